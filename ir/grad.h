#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.h"

namespace tandem::ir {

/// What a gradient rule (OpRules::grad) sees while autodiff walks the forward graph
/// backwards: the forward node, the gradients of its results, and a way to emit nodes.
/// The rule adds a gradient for each operand that needs one; autodiff sums gradients
/// that arrive at the same value from several users.
class GradContext {
 public:
  virtual ~GradContext() = default;
  /// The forward node being differentiated.
  virtual const Node& node() const = 0;
  /// Gradient of result `i`, or null when nothing downstream depends on it.
  virtual Value* resultGrad(size_t i) const = 0;
  /// True when operand `i` leads back to a trained parameter.
  virtual bool needsGrad(size_t operand) const = 0;
  /// Contributes `grad` to the gradient of operand `i`.
  virtual void addOperandGrad(size_t operand, Value* grad) = 0;
  /// Emits a backward node on the forward node's device, scope and location (those of
  /// `spec` are ignored): `c.emit(ReluBackwardArgs{.dy = dy, .y = y}.spec({.names = ...}))`.
  virtual absl::StatusOr<Node*> emit(NodeSpec spec) = 0;
  /// The same with attributes by name, for generic code.
  absl::StatusOr<Node*> emit(Op op, std::vector<Value*> operands,
                             std::vector<std::pair<std::string, AttrValue>> attrs,
                             std::vector<std::string> names) {
    return emit(NodeSpec{.op = op,
                         .operands = std::move(operands),
                         .attrs = std::move(attrs),
                         .names = std::move(names)});
  }
};

/// The conventional name of the gradient of value `v`.
inline std::string gradName(const Value* v) { return v->name() + ".grad"; }

/// dx = BACKWARD(dy, x) with the forward node's attributes: the gradient of a one-input op
/// whose backward op declares the same attributes in the same order (pooling, flatten,
/// pad). A gradient rule: `.grad = gradFromInput<Op::kPadBackward>`.
template <Op kBackwardOp>
absl::Status gradFromInput(GradContext& c) {
  const Node& n = c.node();
  auto dx = c.emit(NodeSpec{.op = kBackwardOp,
                            .operands = {c.resultGrad(0), n.operand(0)},
                            .attr_values = n.attrs(),
                            .names = {gradName(n.operand(0))}});
  if (!dx.ok()) return dx.status();
  c.addOperandGrad(0, (*dx)->result());
  return absl::OkStatus();
}

}  // namespace tandem::ir

#pragma once

// What the op spec (ir/ops.td) says about each op, in a form code can use. The Op enum,
// the traits and this table are generated from the spec by ir/opgen; typed views of
// nodes are in ir/op_views.h, the optimizer and collective interfaces in ir/interfaces.h.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/attrs.h"
#include "ir/op_cost.h"
#include "ir/op_enum.h"
#include "ir/types.h"

namespace tandem::ir {

class Node;
class Value;
class GradContext;
struct OptimizerInfo;
struct CollectiveInfo;

/// Shape rule: the result types of a node from its operands and attributes, or an error
/// that says what is wrong (the caller adds which node). The attributes' declared ranges
/// are checked before it runs (inferTypes).
using InferFn = absl::StatusOr<std::vector<TensorType>> (*)(const Node&);
/// Gradient rule: given the gradients of the node's results, emits nodes that compute the
/// gradients of the operands that need one (see GradContext).
using GradFn = absl::Status (*)(GradContext&);
/// Names of the variables a stateful node writes.
using WritesFn = std::vector<std::string> (*)(const Node&);

/// The per-op behaviour that lives next to each op family in ir/ops/.
struct OpRules {
  InferFn infer = nullptr;
  GradFn grad = nullptr;      // null: not differentiable
  WritesFn writes = nullptr;  // null: writes no variable
};

/// The bit of `t` in a dtype set (OperandSpec::dtypes).
constexpr uint8_t dtypeBit(DType t) { return static_cast<uint8_t>(1u << static_cast<unsigned>(t)); }
/// A dtype set as the messages and docs word it: "f32 or bf16", "i32".
std::string dtypesText(uint8_t dtypes);

/// One operand or result slot of an op's signature.
struct OperandSpec {
  std::string name;
  bool optional = false;
  bool variadic = false;
  /// The dtypes it may have (`x: float` in the spec: dtypeBit of each); 0: any.
  uint8_t dtypes = 0;
  /// An optional operand present exactly when this float attribute is > 0 (an optimizer
  /// state's `when=ATTR>0`) or this bool attribute is true (`present ... when=ATTR`), its
  /// index in OpInfo::attrs; -1 when none.
  int when_attr = -1;

  bool accepts(DType t) const { return dtypes == 0 || (dtypes & dtypeBit(t)) != 0; }
};

/// What the backward op of an op of a class reads beside dy (`grad reads x|y`).
enum class GradReads : uint8_t { kInput, kOutput };

/// An op and the backward op its stanza makes (`grad reads`); both ops' entries point to
/// it, so the class' rules and kernels find the pairing without a per-op line.
struct GradPair {
  Op forward;
  Op backward;
  GradReads reads;
};

/// A one-to-one ONNX mapping (`onnx NAME SINCE..UNTIL`): the importer reads NAME at those
/// opsets as this op, and the exporter writes this op as NAME.
struct OnnxOp {
  absl::string_view name;
  int since = 1;
  int until = 0;  // 0: open
};

/// Everything the op spec says about one op.
struct OpInfo {
  Op op;
  absl::string_view name;
  std::vector<OperandSpec> operands;
  std::vector<OperandSpec> results;
  std::vector<AttrSpec> attrs;
  uint32_t traits;
  absl::string_view doc;
  const OpRules* rules;
  /// The roofline cost (ir/op_cost.h).
  CostSpec cost;
  /// Set for optimizer updates (the `optimizer` trait) and collectives.
  const OptimizerInfo* optimizer = nullptr;
  const CollectiveInfo* collective = nullptr;
  /// The class of `op NAME : CLASS` ("unary_elementwise"); "" for none.
  absl::string_view op_class;
  /// Set on an op with `grad reads` and on the backward op it makes.
  const GradPair* grad_pair = nullptr;
  /// Set when the op maps to one ONNX op one to one.
  const OnnxOp* onnx = nullptr;

  bool has(Trait t) const { return (traits & t) != 0; }
  /// Index of attribute `name` in `attrs`, or -1.
  int attrIndex(absl::string_view name) const;
  size_t minOperands() const;
  /// SIZE_MAX when variadic.
  size_t maxOperands() const;
};

/// The table entry of an op.
const OpInfo& opInfo(Op op);
/// Looks an op up by its text name.
std::optional<Op> opByName(absl::string_view name);
/// All ops in spec order (for docs, --help and tests).
const std::vector<OpInfo>& allOps();

/// Which slot of OpInfo::operands operand `i` of `n` fills: an optional slot that is absent
/// (a middle `b?`, a state whose `when` attribute is 0) moves the later ones up; a variadic
/// one takes the rest. SIZE_MAX for an operand past every slot.
size_t operandSlot(const Node& n, size_t i);

/// The result types of `n`: its attributes checked against their declared ranges ("lr
/// must be >= 0") and its operands against their declared dtypes ("labels (%y: f32[8])
/// must be i32"), then its shape rule. What Graph::create, the verifier and passes that
/// retype a node run.
absl::StatusOr<std::vector<TensorType>> inferTypes(const Node& n);

inline bool isCollective(Op op) { return opInfo(op).has(kCollective); }
inline bool isStateful(Op op) { return opInfo(op).has(kStateful); }
/// A value from outside the dataflow (input, param): no kernel runs it, no arena buffer
/// holds it, nothing in the graph produces it.
inline bool isSource(Op op) { return opInfo(op).has(kSource); }
/// A row-major reshape (reshape, flatten, flatten_backward): result 0 is operand 0's bytes,
/// so plan-memory may give both the same arena bytes (the kernel's copy is then none).
inline bool isView(Op op) { return opInfo(op).has(kView); }

}  // namespace tandem::ir

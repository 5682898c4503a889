#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/attrs.h"
#include "ir/types.h"

namespace tandem::ir {

class Node;
class Value;
class GradContext;

/// Every op, derived from ir/ops.def.
enum class Op : uint16_t {
#define OP(Enum, name, operands, attrs, traits, doc) k##Enum,
#include "ir/ops.def"
#undef OP
};

/// Properties passes ask about instead of listing op names.
enum Trait : uint32_t {
  kCollective = 1u << 0,    // operands/results span devices; grouped by the `devices` attr
  kStateful = 1u << 1,      // writes persistent variables (see OpRules::writes)
  kFusible = 1u << 2,       // candidate for conv-bn-relu style fusion
  kLoss = 1u << 3,          // produces the scalar autodiff differentiates
  kDeclaredType = 1u << 4,  // result type is written down, not inferred
  kBackward = 1u << 5,      // emitted by autodiff as part of a gradient
  kInitOnly = 1u << 6,      // only meaningful in the init graph
  // What mixed-precision does with the op (ops with neither follow their operands' dtype):
  kLowPrecision = 1u << 7,   // computes in the low dtype: its activation operand is cast down
  kFullPrecision = 1u << 8,  // takes f32 only (losses, accuracy): low operands are cast up
};

/// Shape rule: the result types of a node from its operands and attributes, or an error
/// that says what is wrong (the caller adds which node).
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

/// One operand slot of an op's signature.
struct OperandSpec {
  std::string name;
  bool optional = false;
  bool variadic = false;
};

/// Everything the op table says about one op, in a form code can use.
struct OpInfo {
  Op op;
  absl::string_view name;
  std::vector<OperandSpec> operands;
  std::vector<AttrSpec> attrs;
  uint32_t traits;
  absl::string_view doc;
  const OpRules* rules;

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
/// All ops in table order (for docs, --help and tests).
const std::vector<OpInfo>& allOps();

inline bool isCollective(Op op) { return opInfo(op).has(kCollective); }
inline bool isStateful(Op op) { return opInfo(op).has(kStateful); }

}  // namespace tandem::ir

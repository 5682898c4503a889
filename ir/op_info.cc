#include "ir/op_info.h"

#include <algorithm>
#include <cstdint>
#include <variant>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "ir/ir.h"
#include "ir/ops/rule_util.h"

// The table itself (allOps) is generated from ir/ops.td into op_table.cc.

namespace tandem::ir {

int OpInfo::attrIndex(absl::string_view attr) const {
  for (size_t i = 0; i < attrs.size(); ++i)
    if (attrs[i].name == attr) return static_cast<int>(i);
  return -1;
}

size_t OpInfo::minOperands() const {
  size_t n = 0;
  for (const auto& o : operands)
    if (!o.optional) ++n;  // a variadic operand needs at least one value
  return n;
}

size_t OpInfo::maxOperands() const {
  for (const auto& o : operands)
    if (o.variadic) return SIZE_MAX;
  return operands.size();
}

const OpInfo& opInfo(Op op) { return allOps()[static_cast<size_t>(op)]; }

std::optional<Op> opByName(absl::string_view name) {
  static const auto* index = [] {
    auto* m = new absl::flat_hash_map<absl::string_view, Op>();
    for (const OpInfo& info : allOps()) (*m)[info.name] = info.op;
    return m;
  }();
  auto it = index->find(name);
  if (it == index->end()) return std::nullopt;
  return it->second;
}

std::string dtypesText(uint8_t dtypes) {
  std::vector<absl::string_view> names;
  for (DType t : kAllDTypes)
    if ((dtypes & dtypeBit(t)) != 0) names.push_back(dtypeName(t));
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    absl::StrAppend(&out, i == 0 ? "" : i + 1 == names.size() ? " or " : ", ", names[i]);
  return out;
}

size_t operandSlot(const Node& n, size_t i) {
  const std::vector<OperandSpec>& slots = n.info().operands;
  const size_t count = n.numOperands();
  size_t next = 0;  // the next operand to place
  for (size_t s = 0; s < slots.size() && next < count; ++s) {
    size_t required_after = 0;
    for (size_t t = s + 1; t < slots.size(); ++t)
      required_after += !slots[t].optional && !slots[t].variadic;
    const OperandSpec& slot = slots[s];
    if (slot.variadic) {  // the last slot: it takes the rest
      if (i >= next) return s;
      break;
    }
    if (slot.optional) {
      bool present = count - next > required_after;
      if (slot.when_attr >= 0) {
        const auto at = static_cast<size_t>(slot.when_attr);
        // A state's `when` is a float attribute (> 0), a `present` line's a bool.
        const auto* f = at < n.attrs().size() ? std::get_if<double>(&n.attrs()[at]) : nullptr;
        const auto* b = at < n.attrs().size() ? std::get_if<bool>(&n.attrs()[at]) : nullptr;
        present = (f != nullptr && *f > 0) || (b != nullptr && *b);
      }
      if (!present) continue;
    }
    if (next == i) return s;
    ++next;
  }
  return SIZE_MAX;
}

namespace {

/// Each operand's dtype against its slot's declared set (the spec's `x: float`).
absl::Status checkOperandDTypes(const Node& n) {
  const OpInfo& info = n.info();
  for (size_t i = 0; i < n.numOperands(); ++i) {
    const size_t slot = operandSlot(n, i);
    if (slot >= info.operands.size() || n.operand(i) == nullptr) continue;
    const OperandSpec& spec = info.operands[slot];
    if (spec.accepts(n.operand(i)->type().dtype)) continue;
    return absl::InvalidArgumentError(
        absl::StrCat(rules::describeOperand(n, i), " must be ", dtypesText(spec.dtypes)));
  }
  return absl::OkStatus();
}

/// The shape rule's results against the declared dtypes of the result slots: a rule that
/// gives another dtype contradicts the spec (a bug in the rule or the spec, not the input).
absl::Status checkResultDTypes(const Node& n, const std::vector<TensorType>& types) {
  const std::vector<OperandSpec>& slots = n.info().results;
  for (size_t r = 0; r < types.size() && !slots.empty(); ++r) {
    const OperandSpec& spec = slots[std::min(r, slots.size() - 1)];
    if (r >= slots.size() && !spec.variadic) break;
    if (spec.accepts(types[r].dtype)) continue;
    return absl::InternalError(absl::StrCat("the shape rule of ", n.info().name, " gives result ",
                                            spec.name, " the type ", toString(types[r]),
                                            "; ir/ops.td says it is ", dtypesText(spec.dtypes)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<TensorType>> inferTypes(const Node& n) {
  const OpInfo& info = n.info();
  for (size_t i = 0; i < info.attrs.size() && i < n.attrs().size(); ++i) {
    const AttrSpec& spec = info.attrs[i];
    if (!spec.range) continue;
    const AttrValue& v = n.attrs()[i];
    std::vector<double> xs;  // a hw attribute's height and width each
    if (spec.kind == AttrKind::kHw) {
      const Hw hw = Hw::of(v);
      xs = {static_cast<double>(hw.h), static_cast<double>(hw.w)};
    } else {
      xs = {std::holds_alternative<int64_t>(v)  ? static_cast<double>(std::get<int64_t>(v))
            : std::holds_alternative<double>(v) ? std::get<double>(v)
                                                : 0};
    }
    for (double x : xs)
      if (!spec.range->contains(x))  // NaN is in no range
        return absl::InvalidArgumentError(absl::StrCat(spec.name, " must be ", spec.range->text));
  }
  if (absl::Status s = checkOperandDTypes(n); !s.ok()) return s;
  absl::StatusOr<std::vector<TensorType>> types = info.rules->infer(n);
  if (types.ok())
    if (absl::Status s = checkResultDTypes(n, *types); !s.ok()) return s;
  return types;
}

}  // namespace tandem::ir

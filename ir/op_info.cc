#include "ir/op_info.h"

#include <cstdint>
#include <variant>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "ir/ir.h"

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

absl::StatusOr<std::vector<TensorType>> inferTypes(const Node& n) {
  const OpInfo& info = n.info();
  for (size_t i = 0; i < info.attrs.size() && i < n.attrs().size(); ++i) {
    const AttrSpec& spec = info.attrs[i];
    if (!spec.range) continue;
    const AttrValue& v = n.attrs()[i];
    const double x = std::holds_alternative<int64_t>(v)  ? static_cast<double>(std::get<int64_t>(v))
                     : std::holds_alternative<double>(v) ? std::get<double>(v)
                                                         : 0;
    if (!spec.range->contains(x))  // NaN is in no range
      return absl::InvalidArgumentError(absl::StrCat(spec.name, " must be ", spec.range->text));
  }
  return info.rules->infer(n);
}

}  // namespace tandem::ir

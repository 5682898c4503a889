#include "ir/op_info.h"

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tandem::ir {

// Each op family file defines the rules its ops name here; a missing definition is a
// link error, so an op cannot be added without its shape rule.
#define OP(Enum, name, operands, attrs, traits, doc) extern const OpRules k##Enum##Rules;
#include "ir/ops.def"
#undef OP

namespace {

std::vector<OperandSpec> parseOperands(absl::string_view spec) {
  std::vector<OperandSpec> out;
  if (spec.empty()) return out;
  for (absl::string_view item : absl::StrSplit(spec, ", ")) {
    OperandSpec o;
    o.optional = absl::ConsumeSuffix(&item, "?");
    o.variadic = absl::ConsumeSuffix(&item, "...");
    o.name = std::string(item);
    out.push_back(std::move(o));
  }
  return out;
}

std::vector<OpInfo> buildTable() {
  std::vector<OpInfo> table;
#define OP(Enum, name, operands, attrs, traits, doc)                                         \
  table.push_back(OpInfo{Op::k##Enum, name, parseOperands(operands), parseAttrSchema(attrs), \
                         static_cast<uint32_t>(traits), doc, &k##Enum##Rules});
#include "ir/ops.def"
#undef OP
  return table;
}

}  // namespace

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

const std::vector<OpInfo>& allOps() {
  static const std::vector<OpInfo>* table = new std::vector<OpInfo>(buildTable());
  return *table;
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

}  // namespace tandem::ir

#include "ir/attrs.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "ir/number_format.h"

namespace tandem::ir {

bool AttrSpec::accepts(const AttrValue& v) const {
  switch (kind) {
    case AttrKind::kInt:
      return std::holds_alternative<int64_t>(v);
    case AttrKind::kFloat:
      return std::holds_alternative<double>(v);
    case AttrKind::kBool:
      return std::holds_alternative<bool>(v);
    case AttrKind::kInts:
      return std::holds_alternative<std::vector<int64_t>>(v);
    case AttrKind::kSymbol:
      return std::holds_alternative<Symbol>(v);
    case AttrKind::kDevices:
      return std::holds_alternative<std::vector<Device>>(v);
    case AttrKind::kHw: {
      if (std::holds_alternative<int64_t>(v)) return true;
      const auto* hw = std::get_if<std::vector<int64_t>>(&v);
      return hw != nullptr && hw->size() == 2;
    }
    case AttrKind::kEnum: {
      const auto* e = std::get_if<EnumWord>(&v);
      if (e == nullptr) return false;
      for (const auto& w : words)
        if (w == e->word) return true;
      return false;
    }
  }
  return false;
}

std::string AttrSpec::kindText() const {
  switch (kind) {
    case AttrKind::kInt:
      return "int";
    case AttrKind::kFloat:
      return "float";
    case AttrKind::kBool:
      return "bool";
    case AttrKind::kInts:
      return "ints";
    case AttrKind::kSymbol:
      return "symbol";
    case AttrKind::kDevices:
      return "devices";
    case AttrKind::kHw:
      return "hw: an int, or [h,w]";
    case AttrKind::kEnum:
      return absl::StrCat("enum(", absl::StrJoin(words, "|"), ")");
  }
  return "?";
}

AttrValue Hw::toAttr() const {
  return square() ? AttrValue(h) : AttrValue(std::vector<int64_t>{h, w});
}

Hw Hw::of(const AttrValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return Hw(*i);
  const auto& hw = std::get<std::vector<int64_t>>(v);
  return Hw(hw.at(0), hw.at(1));
}

AttrValue canonicalHw(AttrValue v) {
  const auto* hw = std::get_if<std::vector<int64_t>>(&v);
  if (hw != nullptr && hw->size() == 2 && (*hw)[0] == (*hw)[1]) return AttrValue((*hw)[0]);
  return v;
}

std::string toString(const AttrValue& v) {
  struct Printer {
    std::string operator()(int64_t i) const { return absl::StrCat(i); }
    std::string operator()(double d) const { return formatDouble(d); }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(const std::vector<int64_t>& is) const {
      return absl::StrCat("[", absl::StrJoin(is, ","), "]");
    }
    std::string operator()(const Symbol& s) const { return absl::StrCat("@", s.name); }
    std::string operator()(const std::vector<Device>& ds) const { return toString(ds); }
    std::string operator()(const EnumWord& e) const { return e.word; }
  };
  return std::visit(Printer{}, v);
}

}  // namespace tandem::ir

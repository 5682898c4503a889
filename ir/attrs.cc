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
    case AttrKind::kEnum:
      return absl::StrCat("enum(", absl::StrJoin(words, "|"), ")");
  }
  return "?";
}

std::vector<AttrSpec> parseAttrSchema(absl::string_view schema) {
  std::vector<AttrSpec> out;
  if (absl::StripAsciiWhitespace(schema).empty()) return out;
  for (absl::string_view item : absl::StrSplit(schema, ", ")) {
    std::vector<absl::string_view> parts = absl::StrSplit(item, absl::MaxSplits(':', 1));
    if (parts.size() != 2) {
      std::fprintf(stderr, "ops.def: malformed attribute '%.*s'\n", int(item.size()), item.data());
      std::abort();
    }
    AttrSpec spec;
    spec.name = std::string(parts[0]);
    absl::string_view kind = parts[1];
    // "name:int=1": an optional int with its default (the only kind that needs one yet).
    std::vector<absl::string_view> with_default = absl::StrSplit(kind, absl::MaxSplits('=', 1));
    if (with_default.size() == 2) {
      int64_t value = 0;
      if (with_default[0] != "int" || !absl::SimpleAtoi(with_default[1], &value)) {
        std::fprintf(stderr, "ops.def: only int attributes take a default, in '%.*s'\n",
                     int(item.size()), item.data());
        std::abort();
      }
      spec.default_value = AttrValue{value};
      kind = with_default[0];
    }
    if (kind == "int")
      spec.kind = AttrKind::kInt;
    else if (kind == "float")
      spec.kind = AttrKind::kFloat;
    else if (kind == "bool")
      spec.kind = AttrKind::kBool;
    else if (kind == "ints")
      spec.kind = AttrKind::kInts;
    else if (kind == "symbol")
      spec.kind = AttrKind::kSymbol;
    else if (kind == "devices")
      spec.kind = AttrKind::kDevices;
    else if (absl::ConsumePrefix(&kind, "enum(") && absl::ConsumeSuffix(&kind, ")")) {
      spec.kind = AttrKind::kEnum;
      spec.words = absl::StrSplit(kind, '|');
    } else {
      std::fprintf(stderr, "ops.def: unknown attribute kind in '%.*s'\n", int(item.size()),
                   item.data());
      std::abort();
    }
    out.push_back(std::move(spec));
  }
  return out;
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

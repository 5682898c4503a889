#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/types.h"

namespace tandem::ir {

/// A reference to a module variable, printed `@name`.
struct Symbol {
  std::string name;
  bool operator==(const Symbol&) const = default;
};

/// One word out of an enum attribute's fixed set, printed bare (`mean`).
struct EnumWord {
  std::string word;
  bool operator==(const EnumWord&) const = default;
};

/// The value of one node attribute. The op table fixes which alternative each attribute holds.
using AttrValue = std::variant<int64_t, double, bool, std::vector<int64_t>, Symbol,
                               std::vector<Device>, EnumWord>;

enum class AttrKind : uint8_t { kInt, kFloat, kBool, kInts, kSymbol, kDevices, kEnum };

/// One entry of an op's attribute schema, parsed from the op table ("reduction:enum(mean|sum)").
struct AttrSpec {
  std::string name;
  AttrKind kind = AttrKind::kInt;
  std::vector<std::string> words;  // kEnum only
  /// Set for an optional attribute ("groups:int=1"): the value a node has when the
  /// attribute is not given, which the printer then leaves out.
  std::optional<AttrValue> default_value;

  /// True when `v` holds the alternative this kind needs (and, for enums, a known word).
  bool accepts(const AttrValue& v) const;
  /// "int", "enum(mean|sum)", ... for error messages.
  std::string kindText() const;
};

/// Parses the attribute column of the op table. The table is compiled in, so a malformed
/// entry is a programming error and aborts with the offending text.
std::vector<AttrSpec> parseAttrSchema(absl::string_view schema);

/// Prints a value the way the IR text spells it: 3, 0.01, true, [1,2], @w, [cpu:0, cpu:1], mean.
std::string toString(const AttrValue& v);

}  // namespace tandem::ir

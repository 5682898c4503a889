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

/// kHw: a window's height and width (kernel, stride, padding), held as one int64_t when
/// they are equal (the text `3`, as square windows always were) and as [h, w] when not.
enum class AttrKind : uint8_t { kInt, kFloat, kBool, kInts, kSymbol, kDevices, kEnum, kHw };

/// The value of a `hw` attribute. Implicit from one int, so `.stride = 1` in a creator and
/// a builder's single stride mean a square window; readers take .h and .w apart.
struct Hw {
  int64_t h = 0, w = 0;
  Hw() = default;
  Hw(int64_t v) : h(v), w(v) {}  // NOLINT: implicit, a square window
  Hw(int64_t h_, int64_t w_) : h(h_), w(w_) {}
  bool square() const { return h == w; }
  bool operator==(const Hw&) const = default;
  /// The attribute's canonical value: an int when square, [h,w] otherwise.
  AttrValue toAttr() const;
  /// Reads a value `AttrSpec::accepts` took for kind kHw.
  static Hw of(const AttrValue& v);
};
/// The canonical form of a kHw value ([3,3] becomes 3), so that equal windows print and
/// compare alike; other values unchanged.
AttrValue canonicalHw(AttrValue v);

/// The range an int or float attribute must lie in (`attr stride: int >= 1` in the spec).
struct AttrRange {
  double lo = 0, hi = 0;  // hi: infinity when unbounded
  bool lo_open = false, hi_open = false;
  absl::string_view text;  // ">= 1", "in [0, 1)": the verifier says "stride must be >= 1"

  bool contains(double v) const {
    return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  }
};

/// One entry of an op's attribute schema (generated from the op spec, ir/ops.td).
struct AttrSpec {
  std::string name;
  AttrKind kind = AttrKind::kInt;
  std::vector<std::string> words;  // kEnum only
  /// Set for an optional attribute ("groups:int=1"): the value a node has when the
  /// attribute is not given, which the printer then leaves out.
  std::optional<AttrValue> default_value;
  /// Set where the spec declares a range, which the verifier checks before the shape rule.
  std::optional<AttrRange> range;
  /// Set where the spec gives a preset (`preset VALUE`, optimizer hyper-parameters): the
  /// value front ends use when neither the model nor the user gives one. Unlike a default
  /// it leaves the attribute required in the IR text.
  std::optional<double> preset;

  /// True when `v` holds the alternative this kind needs (and, for enums, a known word).
  bool accepts(const AttrValue& v) const;
  /// "int", "enum(mean|sum)", ... for error messages.
  std::string kindText() const;
};

/// Prints a value the way the IR text spells it: 3, 0.01, true, [1,2], @w, [cpu:0, cpu:1], mean.
std::string toString(const AttrValue& v);

}  // namespace tandem::ir

#include "ir/number_format.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace tandem::ir {
namespace {

constexpr uint64_t kSignBit = uint64_t{1} << 63;
constexpr uint64_t kExponentBits = uint64_t{0x7ff} << 52;
constexpr uint64_t kSignificandBits = (uint64_t{1} << 52) - 1;
// The quiet NaN std::numeric_limits<double>::quiet_NaN() has: only the quiet bit set.
constexpr uint64_t kDefaultNanSignificand = uint64_t{1} << 51;

}  // namespace

std::string formatDouble(double v) {
  if (std::isnan(v)) {
    const uint64_t bits = std::bit_cast<uint64_t>(v);
    const char* sign = (bits & kSignBit) != 0 ? "-" : "";
    const uint64_t significand = bits & kSignificandBits;
    if (significand == kDefaultNanSignificand) return absl::StrCat(sign, "nan");
    return absl::StrCat(sign, "nan(0x", absl::Hex(significand), ")");
  }
  char buf[64];
  // std::to_chars without a precision gives the shortest round-tripping form ("inf" and
  // "-inf" for the infinities).
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, end);
}

std::optional<double> parseDouble(absl::string_view text) {
  bool negative = false;
  absl::string_view s = text;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  uint64_t sign = negative ? kSignBit : 0;
  if (s == "inf") return std::bit_cast<double>(sign | kExponentBits);
  if (s == "nan") return std::bit_cast<double>(sign | kExponentBits | kDefaultNanSignificand);
  if (absl::ConsumePrefix(&s, "nan(0x")) {
    if (!absl::ConsumeSuffix(&s, ")") || s.empty()) return std::nullopt;
    uint64_t significand = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), significand, 16);
    // A zero significand is an infinity, not a NaN; more than 52 bits is no double.
    if (ec != std::errc() || end != s.data() + s.size() || significand == 0 ||
        significand > kSignificandBits)
      return std::nullopt;
    return std::bit_cast<double>(sign | kExponentBits | significand);
  }
  // Digits only from here: from_chars would also take "infinity" and "nan(...)" forms.
  if (s.empty() || !((s[0] >= '0' && s[0] <= '9') || s[0] == '.')) return std::nullopt;
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return negative ? -v : v;
}

}  // namespace tandem::ir

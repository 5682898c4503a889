// Every f32 and f64 value an attribute can hold is written as IR text that reads back bit
// for bit: infinities, NaNs with their sign and payload, subnormals, -0 (an imported
// Div by zero is a constant of inf, and `tandem run` must read the .tir back).

#include "ir/number_format.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/op_views.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace tandem::ir {
namespace {

uint64_t bitsOf(double v) { return std::bit_cast<uint64_t>(v); }

/// formatDouble then parseDouble gives `v` back, bit for bit.
void expectRoundTrip(double v) {
  const std::string text = formatDouble(v);
  const std::optional<double> back = parseDouble(text);
  ASSERT_TRUE(back.has_value()) << text;
  EXPECT_EQ(bitsOf(*back), bitsOf(v))
      << text << " (bits " << absl::StrCat(absl::Hex(bitsOf(v))) << ")";
}

double fromF32Bits(uint32_t bits) { return static_cast<double>(std::bit_cast<float>(bits)); }

TEST(NumberFormat, SpecialValuesAreWrittenReadably) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(formatDouble(inf), "inf");
  EXPECT_EQ(formatDouble(-inf), "-inf");
  EXPECT_EQ(formatDouble(nan), "nan");
  EXPECT_EQ(formatDouble(-nan), "-nan");
  EXPECT_EQ(formatDouble(0.0), "0");
  EXPECT_EQ(formatDouble(-0.0), "-0");
  EXPECT_EQ(formatDouble(0.1), "0.1");
  EXPECT_EQ(formatDouble(1e-5), "1e-05");
  // f32's NaN 0x7fc00001, widened to f64, keeps its payload in the top of the significand.
  EXPECT_EQ(formatDouble(fromF32Bits(0x7fc00001u)), "nan(0x8000020000000)");
  EXPECT_EQ(formatDouble(std::bit_cast<double>(uint64_t{0xfff0000000000001})), "-nan(0x1)");
}

TEST(NumberFormat, SpecialValuesRoundTrip) {
  const std::vector<double> values = {
      0.0,
      -0.0,
      1.0,
      0.1,
      std::numeric_limits<double>::infinity(),
      -std::numeric_limits<double>::infinity(),
      std::numeric_limits<double>::quiet_NaN(),
      -std::numeric_limits<double>::quiet_NaN(),
      std::numeric_limits<double>::signaling_NaN(),
      std::bit_cast<double>(uint64_t{0x7ff0000000000001}),  // the smallest payload
      std::bit_cast<double>(uint64_t{0xffffffffffffffff}),  // the largest, negative
      std::numeric_limits<double>::denorm_min(),
      -std::numeric_limits<double>::denorm_min(),
      std::numeric_limits<double>::min(),
      std::numeric_limits<double>::max(),
      std::numeric_limits<double>::lowest(),
      // f32's extremes as an attribute holds them (widened to f64).
      double(std::numeric_limits<float>::denorm_min()),  // 1e-45: Div by 1e-45 gives it
      double(-std::numeric_limits<float>::denorm_min()),
      double(std::numeric_limits<float>::min()),
      double(std::nextafter(std::numeric_limits<float>::min(), 0.0f)),  // largest subnormal
      double(std::numeric_limits<float>::max()),
      fromF32Bits(0x7fc00001u),
      fromF32Bits(0xffc00000u),
      fromF32Bits(0x7fffffffu),
  };
  for (double v : values) expectRoundTrip(v);
}

TEST(NumberFormat, RandomBitPatternsRoundTrip) {
  uint64_t state = 0x243f6a8885a308d3ull;
  auto next = [&state] {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  for (int i = 0; i < 200000; ++i) {
    const uint64_t r = next();
    expectRoundTrip(std::bit_cast<double>(r));
    // Half the f32 patterns with the exponent all ones or all zeros: NaNs, infinities,
    // subnormals, which a uniform draw would almost never give.
    uint32_t f = static_cast<uint32_t>(r >> 32);
    if (i % 4 == 1) f |= 0x7f800000u;
    if (i % 4 == 2) f &= ~0x7f800000u;
    const double widened = fromF32Bits(f);
    expectRoundTrip(widened);
    // And the f32 a kernel computes with comes back as it was (a signaling NaN quiet, as
    // the widening made it).
    // (volatile: the compiler may fold float -> double -> float, which the hardware's
    // conversions of a signaling NaN are not.)
    const volatile double kept = widened;
    const float narrowed = static_cast<float>(*parseDouble(formatDouble(widened)));
    EXPECT_EQ(std::bit_cast<uint32_t>(narrowed), std::bit_cast<uint32_t>(static_cast<float>(kept)))
        << absl::StrCat(absl::Hex(f));
    if (HasFailure()) return;
  }
}

TEST(NumberFormat, MalformedTextIsRefused) {
  for (const char* bad : {"",
                          "-",
                          "+",
                          "infinity",
                          "inff",
                          "-nanx",
                          "nan(",
                          "nan()",
                          "nan(0x)",
                          "nan(0x0)",
                          "nan(0x10000000000000)",
                          "nan(12)",
                          "nan(0xg)",
                          "1e999",
                          "1.5x",
                          "0x10",
                          "--1",
                          "e5",
                          "NaN",
                          "Inf"})
    EXPECT_FALSE(parseDouble(bad).has_value()) << bad;
  EXPECT_EQ(parseDouble("+1.5"), 1.5);
  EXPECT_EQ(parseDouble("-.5"), -0.5);
}

// Through the IR text: constants of every special value print, parse and print again
// identically, and hold the same bits.
TEST(NumberFormat, ConstantsRoundTripThroughTheIr) {
  const std::vector<double> values = {std::numeric_limits<double>::infinity(),
                                      -std::numeric_limits<double>::infinity(),
                                      std::numeric_limits<double>::quiet_NaN(),
                                      -std::numeric_limits<double>::quiet_NaN(),
                                      fromF32Bits(0x7fc00001u),
                                      double(std::numeric_limits<float>::denorm_min()),
                                      -0.0,
                                      std::numeric_limits<double>::denorm_min()};
  std::string text = "module @m {\n\ngraph @g() {\n";
  for (size_t i = 0; i < values.size(); ++i)
    absl::StrAppend(&text, "  %c", i, " = constant() {value=", formatDouble(values[i]),
                    "} : f32[2]\n");
  text += "  return %c0";
  for (size_t i = 1; i < values.size(); ++i) absl::StrAppend(&text, ", %c", i);
  text += "\n}\n}\n";
  auto m = parseModule(text, "special.tir");
  ASSERT_TRUE(m.ok()) << m.status() << "\n" << text;
  ASSERT_TRUE(verifyModule(**m).ok()) << verifyModule(**m);
  const std::string printed = printModule(**m, {.locations = false});
  EXPECT_EQ(printed, text);
  const Graph* g = (*m)->graph("g");
  ASSERT_NE(g, nullptr);
  for (size_t i = 0; i < values.size(); ++i) {
    const Value* c = g->findValue(absl::StrCat("c", i));
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(bitsOf(ConstantView(*c->def()).value()), bitsOf(values[i])) << i;
  }
}

TEST(NumberFormat, AWordThatStartsLikeANumberIsNoNumber) {
  // "info" and "nano" are words, not inf and nan followed by garbage.
  auto m = parseModule(
      "module @m {\ngraph @g() {\n  %c = constant() {value=info} : f32[]\n  "
      "return %c\n}\n}\n",
      "w.tir");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "w.tir:3:26: expected a number, got 'info'");
}

}  // namespace
}  // namespace tandem::ir

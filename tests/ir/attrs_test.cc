// ir/attrs: attribute text, schema parsing, and floats that round-trip bit for bit.

#include "ir/attrs.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "tests/device_kinds.h"

namespace tandem::ir {
namespace {

uint64_t bitsOf(double d) {
  uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

TEST(Attrs, FloatsPrintInTheirShortestExactForm) {
  EXPECT_EQ(toString(AttrValue(0.1)), "0.1");
  EXPECT_EQ(toString(AttrValue(1e-05)), "1e-05");
  EXPECT_EQ(toString(AttrValue(3.0000000000000004)), "3.0000000000000004");
  EXPECT_EQ(toString(AttrValue(0.30000000000000004)), "0.30000000000000004");
  EXPECT_EQ(toString(AttrValue(1.0)), "1");
  EXPECT_EQ(toString(AttrValue(0.0)), "0");
  EXPECT_EQ(toString(AttrValue(-0.0)), "-0");
  EXPECT_EQ(toString(AttrValue(0.9)), "0.9");
  EXPECT_EQ(toString(AttrValue(1e-04)), "1e-04");
  EXPECT_EQ(toString(AttrValue(1e22)), "1e+22");
}

/// The doubles the round-trip tests below push through text.
std::vector<double> trickyDoubles() {
  std::vector<double> out = {0.1,
                             1e-05,
                             3.0000000000000004,
                             0.30000000000000004,
                             -0.0,
                             0.0,
                             1.0 / 3.0,
                             2.0 / 3.0,
                             123456789012345678.0,
                             1e22,
                             1e23,
                             5e-324,  // the smallest denormal
                             2.2250738585072014e-308,
                             std::numeric_limits<double>::max(),
                             std::numeric_limits<double>::epsilon(),
                             -7.25e-9};
  // Deterministic pseudo-random bit patterns (finite ones) cover the rest.
  uint64_t state = 12345;
  while (out.size() < 2000) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t bits = state ^ (state >> 29);
    double d;
    std::memcpy(&d, &bits, sizeof d);
    if (d == d && d - d == 0) out.push_back(d);  // skip NaN and infinities
  }
  return out;
}

TEST(Attrs, FloatTextParsesBackToTheSameBits) {
  for (double d : trickyDoubles()) {
    std::string text = toString(AttrValue(d));
    double back = std::strtod(text.c_str(), nullptr);
    EXPECT_EQ(bitsOf(back), bitsOf(d)) << text;
  }
}

TEST(Attrs, FloatAttributesRoundTripThroughTheIrText) {
  // Each value goes into a constant's attribute, through print and parse, bit for bit.
  for (double d : trickyDoubles()) {
    std::string text =
        "module @m {\n\ngraph @g() {\n  %c = constant() {value=" + toString(AttrValue(d)) +
        "} : f32[]\n  return %c\n}\n}\n";
    auto m = parseModule(text);
    ASSERT_TRUE(m.ok()) << m.status();
    const Node& c = *(*m)->graph("g")->nodes().back();
    EXPECT_EQ(bitsOf(c.floatAttr("value")), bitsOf(d)) << text;
    EXPECT_EQ(printModule(**m), text);
  }
}

TEST(Attrs, OtherKindsPrintAsTheTextSpellsThem) {
  EXPECT_EQ(toString(AttrValue(int64_t{-3})), "-3");
  EXPECT_EQ(toString(AttrValue(true)), "true");
  EXPECT_EQ(toString(AttrValue(false)), "false");
  EXPECT_EQ(toString(AttrValue(std::vector<int64_t>{86, 85, 85})), "[86,85,85]");
  EXPECT_EQ(toString(AttrValue(std::vector<int64_t>{})), "[]");
  EXPECT_EQ(toString(AttrValue(Symbol{"conv1.w"})), "@conv1.w");
  EXPECT_EQ(toString(AttrValue(std::vector<Device>{{::tandem::testing::kind("cpu"), 0},
                                                   {::tandem::testing::kind("cuda"), 1}})),
            "[cpu:0, cuda:1]");
  EXPECT_EQ(toString(AttrValue(EnumWord{"mean"})), "mean");
}

// The op spec (ir/ops.td) is parsed by ir/opgen at build time; the table's schemas say
// what each attribute is.
TEST(Attrs, SchemaKinds) {
  std::vector<AttrSpec> specs{{"axis", AttrKind::kInt},
                              {"lr", AttrKind::kFloat},
                              {"bias", AttrKind::kBool},
                              {"sizes", AttrKind::kInts},
                              {"var", AttrKind::kSymbol},
                              {"devices", AttrKind::kDevices},
                              {"op", AttrKind::kEnum, {"sum", "mean", "max"}}};
  std::vector<std::string> kinds;
  for (const AttrSpec& s : specs) kinds.push_back(s.kindText());
  EXPECT_EQ(kinds, (std::vector<std::string>{"int", "float", "bool", "ints", "symbol", "devices",
                                             "enum(sum|mean|max)"}));
  // all_reduce's attributes as the generated table has them.
  const auto& ar = opInfo(Op::kAllReduce).attrs;
  ASSERT_EQ(ar.size(), 4u);
  EXPECT_EQ(ar[0].name, "op");
  EXPECT_EQ(ar[0].words, (std::vector<std::string>{"sum", "mean", "max"}));
  EXPECT_EQ(ar[1].kindText(), "int");
  ASSERT_TRUE(ar[1].range.has_value());  // bucket: int >= 0
  EXPECT_EQ(ar[1].range->text, ">= 0");
}

TEST(Attrs, SpecsAcceptOnlyTheirKind) {
  std::vector<AttrSpec> specs{
      {"n", AttrKind::kInt}, {"x", AttrKind::kFloat}, {"e", AttrKind::kEnum, {"mean", "sum"}}};
  EXPECT_TRUE(specs[0].accepts(AttrValue(int64_t{1})));
  EXPECT_FALSE(specs[0].accepts(AttrValue(1.0)));
  EXPECT_FALSE(specs[0].accepts(AttrValue(true)));
  EXPECT_TRUE(specs[1].accepts(AttrValue(1.0)));
  EXPECT_FALSE(specs[1].accepts(AttrValue(int64_t{1})));
  EXPECT_TRUE(specs[2].accepts(AttrValue(EnumWord{"sum"})));
  EXPECT_FALSE(specs[2].accepts(AttrValue(EnumWord{"max"})));
  EXPECT_FALSE(specs[2].accepts(AttrValue(Symbol{"sum"})));
}

}  // namespace
}  // namespace tandem::ir

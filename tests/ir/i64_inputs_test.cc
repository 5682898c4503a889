// i64 in the IR (issue 42): a graph input of int64 ids or labels, cast to the i32 the
// index ops take. The text round-trips; the cast's rule admits i64 -> i32 and nothing
// else between integers and floats; the index ops still refuse i64 by name.

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace tandem::ir {
namespace {

constexpr char kI64Labels[] = R"(module @m {
graph @g(%logits: f32[4,3], %y: i64[4]) {
  %y.i32 = cast(%y) {dtype=i32} : i32[4]
  %correct = accuracy(%logits, %y.i32) : i32[]
  return %correct
}
}
)";

// The error parsing `text` gives ("" when it parses and verifies).
std::string i64TextError(const std::string& text) {
  auto m = parseModule(text, "i64.tir");
  if (!m.ok()) return std::string(m.status().message());
  absl::Status s = verifyModule(**m);
  return s.ok() ? std::string() : std::string(s.message());
}

TEST(I64Inputs, CastToI32RoundTripsAndVerifies) {
  auto m = parseModule(kI64Labels, "i64.tir");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(verifyModule(**m).ok()) << verifyModule(**m);
  const Graph& g = *(*m)->graph("g");
  EXPECT_EQ(g.inputs()[1]->result()->type(), (TensorType{DType::kI64, {4}}));
  EXPECT_EQ(g.findValue("y.i32")->type(), (TensorType{DType::kI32, {4}}));
  const std::string printed = printModule(**m);
  auto again = parseModule(printed, "again.tir");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(printModule(**again), printed);
  EXPECT_NE(printed.find("%y: i64[4]"), std::string::npos) << printed;
}

TEST(I64Inputs, CastRefusesOtherIntegerConversions) {
  // A float never becomes an index, nor an index a float; i32 is not a cast's operand (only
  // i64 narrows to it). As (input, result, the error).
  const struct {
    const char *from, *to, *error;
  } cases[] = {
      {"f32", "i32",
       "cannot cast x (%x: f32[4]) to i32: i64 casts to i32 only, and floats among f32 and bf16"},
      {"i64", "f32",
       "cannot cast x (%x: i64[4]) to f32: i64 casts to i32 only, and floats among f32 and bf16"},
      {"i32", "f32", "x (%x: i32[4]) must be f32, bf16 or i64"},
  };
  for (const auto& c : cases)
    EXPECT_EQ(i64TextError(absl::StrCat("module @m {\ngraph @g(%x: ", c.from,
                                        "[4]) {\n  %y = cast(%x) {dtype=", c.to, "} : ", c.to,
                                        "[4]\n  return %y\n}\n}\n")),
              absl::StrCat("i64.tir:3:8: %y (cast): ", c.error))
        << c.from << " to " << c.to;
}

TEST(I64Inputs, IndexOpsTakeI32Only) {
  // The index ops keep their i32 kernels: i64 labels reach them through the cast.
  EXPECT_EQ(i64TextError(R"(module @m {
graph @g(%logits: f32[4,3], %y: i64[4]) {
  %correct = accuracy(%logits, %y) : i32[]
  return %correct
}
}
)"),
            "i64.tir:3:14: %correct (accuracy): labels (%y: i64[4]) must be i32");
}

}  // namespace
}  // namespace tandem::ir

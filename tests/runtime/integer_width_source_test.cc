// IntegerWidthSource (issue 42): a source's i32 field feeds a model's i64 input widened,
// an i64 field an i32 input narrowed, a value past i32 being the read's error.

#include "runtime/data/integer_width_source.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/parser.h"
#include "runtime/data/memory_source.h"

namespace tandem::runtime::data {
namespace {

// A step graph taking x: f32[4,2] and y of `y_dtype` (its body does not matter here).
std::unique_ptr<ir::Module> stepTaking(const char* y_dtype) {
  auto m =
      ir::parseModule(absl::StrCat("module @m {\ngraph @train_step(%x: f32[4,2], %y: ", y_dtype,
                                   "[4]) {\n  return\n}\n}\n"),
                      "widths.tir");
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

std::unique_ptr<MemorySource> sourceOf(HostArray y) {
  std::vector<HostArray> arrays;
  arrays.push_back(HostArray::of<float>("x", {0, 1, 2, 3, 4, 5}, {3, 2}));
  arrays.push_back(std::move(y));
  auto s = MemorySource::create(std::move(arrays), "memory");
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

TEST(IntegerWidthSource, WidensI32LabelsForAnI64Input) {
  auto m = stepTaking("i64");
  auto source = sourceOf(HostArray::of<int32_t>("y", {7, -1, 2147483647}, {3}));
  ASSERT_NE(m, nullptr);
  ASSERT_NE(source, nullptr);
  std::unique_ptr<IntegerWidthSource> view;
  const ExampleSource& s = sourceForInputs(*source, *m->graph("train_step"), view);
  ASSERT_NE(view, nullptr);
  EXPECT_EQ(&s, view.get());
  EXPECT_EQ(s.fields()[0].text(), "x: f32[2]");
  EXPECT_EQ(s.fields()[1].text(), "y: i64[]");
  EXPECT_EQ(s.size(), 3);
  for (int64_t i = 0; i < 3; ++i) {
    float x[2];
    int64_t y = 0;
    void* out[] = {x, &y};
    ASSERT_TRUE(s.read(i, {}, out).ok());
    EXPECT_EQ(x[0], 2.0f * static_cast<float>(i));
    EXPECT_EQ(y, (std::vector<int64_t>{7, -1, 2147483647})[static_cast<size_t>(i)]);
  }
}

TEST(IntegerWidthSource, ASourceOfTheInputsWidthsIsUsedAsItIs) {
  auto m = stepTaking("i32");
  auto source = sourceOf(HostArray::of<int32_t>("y", {7, 8, 9}, {3}));
  ASSERT_NE(m, nullptr);
  ASSERT_NE(source, nullptr);
  std::unique_ptr<IntegerWidthSource> view;
  EXPECT_EQ(&sourceForInputs(*source, *m->graph("train_step"), view), source.get());
  EXPECT_EQ(view, nullptr);
}

TEST(IntegerWidthSource, NarrowsI64ForAnI32InputAndRefusesWhatDoesNotFit) {
  auto m = stepTaking("i32");
  auto source = sourceOf(HostArray::of<int64_t>("y", {5, -3, int64_t{1} << 33}, {3}));
  ASSERT_NE(m, nullptr);
  ASSERT_NE(source, nullptr);
  std::unique_ptr<IntegerWidthSource> view;
  const ExampleSource& s = sourceForInputs(*source, *m->graph("train_step"), view);
  ASSERT_NE(view, nullptr);
  EXPECT_EQ(s.fields()[1].text(), "y: i32[]");
  float x[2];
  int32_t y = 0;
  void* out[] = {x, &y};
  ASSERT_TRUE(s.read(1, {}, out).ok());
  EXPECT_EQ(y, -3);
  EXPECT_EQ(s.read(2, {}, out).message(),
            "memory: example 2: value 8589934592 of field 'y' (element 0) does not fit the "
            "model's i32 input");
}

}  // namespace
}  // namespace tandem::runtime::data

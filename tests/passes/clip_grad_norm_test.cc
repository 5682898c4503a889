// clip-grad-norm's errors and clip_grad_norm's shape rule; the IR it makes is checked in
// tests/checks/passes/clip_grad_norm.tir, training against PyTorch's clip_grad_norm_ in
// tests/runtime/adamw_training_test.cc.

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/parser.h"
#include "passes/registry.h"
#include "tests/passes/pass_test_util.h"

namespace tandem::testing {
namespace {

using ::testing::HasSubstr;

std::string createError(std::map<std::string, std::string> options) {
  passes::PassOptions opts("clip-grad-norm", std::move(options));
  return std::string(passes::createPass("clip-grad-norm", opts).status().message());
}

TEST(ClipGradNorm, OptionsAreChecked) {
  EXPECT_EQ(createError({}), "pass clip-grad-norm: option 'max-norm' is required");
  EXPECT_THAT(createError({{"max-norm", "0"}}), HasSubstr("must be a finite number > 0, got 0"));
  EXPECT_THAT(createError({{"max-norm", "-1"}}), HasSubstr("must be a finite number > 0"));
  EXPECT_THAT(createError({{"max-norm", "1"}, {"norm", "2"}}), HasSubstr("'norm'"));
}

TEST(ClipGradNorm, WhereItRunsIsChecked) {
  auto m = buildZooModel("lenet", 8);
  ASSERT_NE(m, nullptr);
  EXPECT_THAT(std::string(runPipeline(*m, "clip-grad-norm{max-norm=1}").message()),
              HasSubstr("has no optimizer update (run autodiff first)"));
  ASSERT_TRUE(runPipeline(*m, "autodiff{momentum=0.9},replicate{devices=2},insert-collectives,"
                              "group-updates")
                  .ok());
  EXPECT_THAT(std::string(runPipeline(*m, "clip-grad-norm{max-norm=1}").message()),
              HasSubstr("run clip-grad-norm before group-updates"));
  auto twice = buildZooModel("lenet", 8);
  ASSERT_NE(twice, nullptr);
  EXPECT_THAT(std::string(runPipeline(*twice, "autodiff,clip-grad-norm{max-norm=1},"
                                              "clip-grad-norm{max-norm=2}")
                              .message()),
              HasSubstr("clips already"));
}

TEST(ClipGradNorm, ShapeRuleTakesFloatGradients) {
  const std::string text = R"(module @m {
graph @train_step(%g: f32[3], %l: i32[3]) {
  %c, %d = clip_grad_norm(%g, %l) {max_norm=1} : f32[3], i32[3]
  return
}
}
)";
  auto m = ir::parseModule(text, "clip.tir");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("gs (%l: i32[3]) must be f32 or bf16"));
}

}  // namespace
}  // namespace tandem::testing

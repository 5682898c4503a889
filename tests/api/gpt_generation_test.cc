// Generation with a KV cache (issue 43): the GPT's one-token step over its caches gives, at
// every position, the logits the prediction of the whole sequence gives there (so the
// cache holds exactly the prefix's keys and values); the same seed draws the same tokens,
// also past the context (the caches refilled); sampling keeps to top-k and temperature.

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "frontend/zoo/zoo.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tandem/tandem.h"
#include "tests/test_util.h"
#include "tests/tools/cli_helpers.h"
#include "train/generation.h"

namespace tandem::testing {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kContext = 16;

/// A tiny GPT trained for a few steps on a text of 15 characters.
Model trainedGpt(const TempDir& dir) {
  std::string text;
  for (int i = 0; i < 150; ++i) text += i % 2 ? "let there be light\n" : "and there was\n";
  zoo::GptShape shape{.vocab = 15, .context = kContext, .layers = 2, .heads = 2, .width = 32};
  TrainConfig c{.batch = 8, .warmup = 1};
  c.steps = 6;
  absl::StatusOr<Model> m =
      train(zoo::gpt(shape), c, Data::fromSpec("text:" + dir.write("t.txt", text)));
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

TEST(GptGeneration, TheCachedStepsLogitsAreThePredictionsOfTheWholeSequence) {
  TempDir dir;
  Model m = trainedGpt(dir);
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < kContext; ++i) ids.push_back(static_cast<int32_t>(i * 5 % 15));
  absl::StatusOr<Arrays> whole = m.predict({{"x", Array::ints({1, kContext}, ids)}});
  ASSERT_TRUE(whole.ok()) << whole.status();
  const std::vector<float>& expected = whole->at("logits").f32;
  ASSERT_EQ(expected.size(), static_cast<size_t>(kContext * 15));

  absl::StatusOr<std::vector<Weight>> weights = m.weights();
  ASSERT_TRUE(weights.ok());
  auto value_of = [&](const ir::Var& var) -> absl::StatusOr<runtime::HostTensor> {
    for (const Weight& w : *weights)
      if (w.name == var.name) {
        runtime::HostTensor t(var.type);
        std::memcpy(t.buffer.data(), w.bytes.data(), w.bytes.size());
        return t;
      }
    return absl::NotFoundError(var.name);
  };
  absl::StatusOr<std::unique_ptr<training::Generator>> gen = training::Generator::create(
      zoo::gpt({.vocab = 15, .context = kContext, .layers = 2, .heads = 2, .width = 32}),
      ir::Device{}, value_of);
  ASSERT_TRUE(gen.ok()) << gen.status();
  absl::StatusOr<std::vector<std::vector<float>>> stepped = (*gen)->logitsOf(ids);
  ASSERT_TRUE(stepped.ok()) << stepped.status();
  double worst = 0, scale = 0;
  for (int64_t p = 0; p < kContext; ++p)
    for (int64_t v = 0; v < 15; ++v) {
      const double want = expected[static_cast<size_t>(p * 15 + v)];
      worst = std::max(worst, std::abs((*stepped)[p][v] - want));
      scale = std::max(scale, std::abs(want));
    }
  EXPECT_LE(worst, 1e-5 * scale) << "largest logit " << scale;
}

TEST(GptGeneration, TheSameSeedDrawsTheSameTokensPastTheContext) {
  TempDir dir;
  Model m = trainedGpt(dir);
  const std::vector<int32_t> prompt = {3, 1, 4};
  auto draw = [&](uint64_t seed) {
    absl::StatusOr<std::vector<int32_t>> t =
        m.generate(prompt, {.tokens = 40, .temperature = 0.9, .top_k = 5, .seed = seed});
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : std::vector<int32_t>{};
  };
  const std::vector<int32_t> a = draw(7), b = draw(7), c = draw(8);
  ASSERT_EQ(a.size(), 40u);  // 3 + 40 tokens: past the context of 16
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (int32_t t : a) EXPECT_TRUE(t >= 0 && t < 15) << t;
}

TEST(GptGeneration, SamplingKeepsToTopKAndTemperature) {
  const std::vector<float> logits = {0, 10, 9.5f, -5};
  std::mt19937_64 gen(1);
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(training::sampleToken(logits, {.top_k = 1}, gen), 1);
    const int32_t two = training::sampleToken(logits, {.top_k = 2}, gen);
    EXPECT_TRUE(two == 1 || two == 2) << two;
    EXPECT_EQ(training::sampleToken(logits, {.temperature = 1e-3}, gen), 1);
  }
  int ones = 0;
  for (int i = 0; i < 2000; ++i) ones += training::sampleToken(logits, {}, gen) == 1;
  // p(1) = e^10 / (1 + e^10 + e^9.5 + e^-5) = 0.6225
  EXPECT_NEAR(ones / 2000.0, 0.6225, 0.04);
}

TEST(GptGeneration, TheCliPrintsTheSameTextForTheSameSeed) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "In the beginning God created the heaven and the earth.\n";
  CommandResult r = runTandem(
      {"train",       "--model",     "gpt",          "--data",  "text:" + dir.write("c.txt", text),
       "--context",   "16",          "--gpt-layers", "1",       "--gpt-heads",
       "2",           "--gpt-width", "32",           "--batch", "8",
       "--steps",     "4",           "--warmup",     "1",       "--checkpoint",
       dir.file("ck")});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::vector<std::string> args = {"generate", "--checkpoint", dir.file("ck"),
                                         "--prompt", "In the",       "--tokens",
                                         "60",       "--seed",       "3"};
  const CommandResult a = runTandem(args), b = runTandem(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_THAT(a.out, ::testing::StartsWith("In the"));
  EXPECT_EQ(a.out.size(), std::string("In the").size() + 60 + 1);  // and a newline
  const CommandResult bad =
      runTandem({"generate", "--checkpoint", dir.file("ck"), "--prompt", "Zq"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("--prompt"));
}

}  // namespace
}  // namespace tandem::testing

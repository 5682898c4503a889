// The GPT of issue 43 against a PyTorch replay of the same 20 steps from the same initial
// weights (tests/api/gpt_replay.py, PyTorch 1.13): nanoGPT's structure written in PyTorch,
// the output projection tied to the token table, AdamW with nanoGPT's parameter groups,
// warmup then cosine to lr / 10, the gradient norm clipped at 1. Every step's loss agrees
// within 1e-4 relative. Dropout is 0 here (PyTorch's generator is not Tandem's); the
// same-masks-on-any-split property of dropout is gpt_training_test's.
//
// One batch is the whole training set, so an epoch is one step whatever the order the
// loader shuffles it in (the mean over the batch does not depend on it): 20 epochs are the
// 20 steps the replay takes in the same order.

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "frontend/zoo/zoo.h"
#include "gtest/gtest.h"
#include "tandem/tandem.h"
#include "tests/api/replay_util.h"
#include "tests/test_util.h"
#include "tests/tools/cli_helpers.h"

namespace tandem::testing {
namespace {

constexpr int64_t kContext = 16, kWindows = 12, kSteps = 20;

/// Windows of a token sequence at fixed offsets: x = ids[o, o + T), y the ids after them.
class Windows final : public Dataset {
 public:
  Windows(std::vector<int32_t> ids, int64_t vocab) : ids_(std::move(ids)), vocab_(vocab) {}
  std::string where() const override { return "windows"; }
  int64_t size() const override { return kWindows; }
  const std::vector<DatasetField>& fields() const override { return fields_; }
  std::pair<std::string, int64_t> classLabels() const override { return {"y", vocab_}; }
  int64_t offset(int64_t i) const {
    return i * 37 % (static_cast<int64_t>(ids_.size()) - kContext);
  }
  absl::Status read(int64_t index, const runtime::data::ExampleKey&,
                    absl::Span<void* const> out) const override {
    std::memcpy(out[0], ids_.data() + offset(index), kContext * sizeof(int32_t));
    std::memcpy(out[1], ids_.data() + offset(index) + 1, kContext * sizeof(int32_t));
    return absl::OkStatus();
  }

 private:
  std::vector<int32_t> ids_;
  int64_t vocab_;
  std::vector<DatasetField> fields_{{.name = "x", .dtype = ir::DType::kI32, .shape = {kContext}},
                                    {.name = "y", .dtype = ir::DType::kI32, .shape = {kContext}}};
};

TEST(GptReplay, TwentyStepsEqualPyTorchsFromTheSameWeights) {
  TANDEM_NEED_INSTALLED(whyNoTorch());
  // A text of 24 distinct characters as ids.
  std::vector<int32_t> ids;
  uint64_t x = 7;
  for (int i = 0; i < 2000; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    ids.push_back(static_cast<int32_t>((x >> 35) % 24));
  }
  auto windows = std::make_shared<const Windows>(ids, 24);

  zoo::GptShape shape{
      .vocab = 24, .context = kContext, .layers = 2, .heads = 2, .width = 32, .dropout = 0};
  TrainConfig c{.devices = "cpu:0,cpu:1", .batch = kWindows, .epochs = kSteps, .warmup = 5};
  absl::StatusOr<Model> m = Model::create(zoo::gpt(shape), c, Data::fromDatasets(windows, windows));
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<Replayed> run = trainForReplay(*m);
  ASSERT_TRUE(run.ok()) << run.status();
  const std::vector<double>& losses = run->losses;
  ASSERT_EQ(losses.size(), static_cast<size_t>(kSteps));

  // What the replay reads: the weights, the windows, the losses.
  TempDir dir;
  const std::string weights = dir.write("weights.txt", run->weights);
  std::string data;
  for (int64_t i = 0; i < kWindows; ++i)
    absl::StrAppend(&data,
                    absl::StrJoin(ids.begin() + windows->offset(i),
                                  ids.begin() + windows->offset(i) + kContext + 1, " "),
                    "\n");
  const std::string batches = dir.write("windows.txt", data);
  const std::string expected = dir.write("losses.txt", numbersText(losses, "\n"));
  const CommandResult replay = runProgram(
      "/usr/bin/python3", {sourcePath("tests/api/gpt_replay.py"), weights, batches, expected,
                           "--vocab", "24", "--context", std::to_string(kContext), "--layers", "2",
                           "--heads", "2", "--warmup", "5", "--tolerance", "1e-4"});
  EXPECT_EQ(replay.exit_code, 0) << replay.out << replay.err;
  std::printf("%s", replay.out.c_str());
  EXPECT_LT(losses.back(), losses.front());
}

}  // namespace
}  // namespace tandem::testing

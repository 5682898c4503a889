// Issue 46: the zoo's ViT against a PyTorch replay of the same 20 steps from the same
// initial weights (tests/api/vit_replay.py, PyTorch 1.13, bench/pytorch_train.py's Vit with
// its attention written out): AdamW with weight decay on every parameter, warmup then
// cosine, no clipping. Every step's loss agrees within 1e-4 relative. Dropout is 0 here
// (PyTorch's generator is not Tandem's).
//
// One batch is the whole training set, so an epoch is one step whatever order the loader
// shuffles it in (the mean over the batch does not depend on it): 20 epochs are the 20
// steps the replay takes.

#include <cstdint>
#include <cstdio>
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

constexpr int kVitImages = 24, kVitSteps = 20, kVitPixels = 28 * 28;

/// `kVitImages` images of pixels in [0, 1) from a fixed generator, labels i % 10, each class
/// brighter in a band of rows of its own (something to learn in 20 steps).
Examples vitImages() {
  Examples e;
  uint64_t x = 11;
  for (int i = 0; i < kVitImages; ++i) {
    const int label = i % 10;
    for (int p = 0; p < kVitPixels; ++p) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      const float noise = static_cast<float>(x >> 40) / static_cast<float>(1 << 24);
      e.images.push_back(p / 28 / 3 == label ? 0.5f + 0.5f * noise : 0.5f * noise);
    }
    e.labels.push_back(label);
  }
  return e;
}

TEST(VitReplay, TwentyStepsEqualPyTorchsFromTheSameWeights) {
  TANDEM_NEED_INSTALLED(whyNoTorch());
  const Examples data = vitImages();
  TrainConfig c{.devices = "cpu:0,cpu:1", .batch = kVitImages, .epochs = kVitSteps, .warmup = 3};
  absl::StatusOr<Model> m =
      Model::create(zoo::vit({.image_shape = {1, 28, 28}, .classes = 10}, {.dropout = 0}), c,
                    Data::fromExamples(data, data));
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<Replayed> run = trainForReplay(*m);
  ASSERT_TRUE(run.ok()) << run.status();
  const std::vector<double>& losses = run->losses;
  ASSERT_EQ(losses.size(), static_cast<size_t>(kVitSteps));

  // What the replay reads: the weights, the images with their labels, the losses.
  TempDir dir;
  const std::string weights = dir.write("weights.txt", run->weights);
  std::string rows;
  for (int i = 0; i < kVitImages; ++i)
    absl::StrAppend(&rows, data.labels[size_t(i)], " ",
                    numbersText(std::vector<float>(data.images.begin() + i * kVitPixels,
                                                   data.images.begin() + (i + 1) * kVitPixels)),
                    "\n");
  const std::string examples = dir.write("images.txt", rows);
  const std::string expected = dir.write("losses.txt", numbersText(losses, "\n"));
  const CommandResult replay =
      runProgram("/usr/bin/python3", {sourcePath("tests/api/vit_replay.py"), weights, examples,
                                      expected, "--warmup", "3", "--tolerance", "1e-4"});
  EXPECT_EQ(replay.exit_code, 0) << replay.out << replay.err;
  std::printf("%s", replay.out.c_str());
  EXPECT_LT(losses.back(), losses.front());
}

}  // namespace
}  // namespace tandem::testing

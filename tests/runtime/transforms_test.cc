// Per-example image transforms: crop, flip and normalize against plain references, resize
// against PyTorch's interpolate, draws that depend on the example's key alone, the
// --augment parser's errors, and a source whose image field goes through them.

#include "runtime/data/transforms.h"

#include <stdlib.h>

#include <cmath>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/data/draws.h"
#include "runtime/data/memory_source.h"
#include "tests/test_util.h"

namespace tandem::runtime::data {
namespace {

using Shape = std::vector<int64_t>;

std::vector<float> image(const Shape& s, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(s[0] * s[1] * s[2]));
  ExampleKey k{.seed = seed};
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(k.below(1000, 1, i)) / 100.0f;
  return v;
}

std::vector<float> run(const ImageTransform& t, const ExampleKey& key, const Shape& s,
                       const std::vector<float>& in) {
  absl::StatusOr<Shape> out_shape = t.outputShape(s);
  EXPECT_TRUE(out_shape.ok()) << out_shape.status();
  std::vector<float> out(static_cast<size_t>((*out_shape)[0] * (*out_shape)[1] * (*out_shape)[2]),
                         -99.0f);
  t.apply(key, s, in.data(), out.data());
  return out;
}

ExampleKey keyAt(int64_t position) { return {.seed = 42, .epoch = 3, .position = position}; }

TEST(Transforms, CropIsAWindowOfTheZeroPaddedImage) {
  const Shape s = {2, 5, 6};
  const int64_t p = 2;
  const std::vector<float> in = image(s, 1);
  auto crop = randomCrop(p);
  std::set<int64_t> tops, lefts;
  for (int64_t pos = 0; pos < 200; ++pos) {
    const ExampleKey key = keyAt(pos);
    const int64_t top = static_cast<int64_t>(key.below(2 * p + 1, kCropDraw, 0));
    const int64_t left = static_cast<int64_t>(key.below(2 * p + 1, kCropDraw, 1));
    tops.insert(top);
    lefts.insert(left);
    // The plain reference: pad, then take the window at (top, left).
    const int64_t ph = s[1] + 2 * p, pw = s[2] + 2 * p;
    std::vector<float> padded(static_cast<size_t>(s[0] * ph * pw), 0.0f);
    for (int64_t c = 0; c < s[0]; ++c)
      for (int64_t i = 0; i < s[1]; ++i)
        for (int64_t j = 0; j < s[2]; ++j)
          padded[(c * ph + i + p) * pw + j + p] = in[(c * s[1] + i) * s[2] + j];
    std::vector<float> want;
    for (int64_t c = 0; c < s[0]; ++c)
      for (int64_t i = 0; i < s[1]; ++i)
        for (int64_t j = 0; j < s[2]; ++j)
          want.push_back(padded[(c * ph + top + i) * pw + left + j]);
    ASSERT_EQ(run(*crop, key, s, in), want) << "position " << pos;
  }
  // Every offset in [0, 2p] is drawn.
  EXPECT_EQ(tops.size(), 5u);
  EXPECT_EQ(lefts.size(), 5u);
}

TEST(Transforms, FlipMirrorsHalfTheImages) {
  const Shape s = {3, 4, 5};
  const std::vector<float> in = image(s, 2);
  std::vector<float> mirrored;
  for (int64_t r = 0; r < s[0] * s[1]; ++r)
    for (int64_t j = s[2] - 1; j >= 0; --j) mirrored.push_back(in[r * s[2] + j]);
  auto flip = horizontalFlip();
  int flipped = 0;
  for (int64_t pos = 0; pos < 1000; ++pos) {
    const std::vector<float> out = run(*flip, keyAt(pos), s, in);
    ASSERT_TRUE(out == in || out == mirrored);
    flipped += out == mirrored;
  }
  EXPECT_GT(flipped, 430);  // p = 0.5: 500 +- 4.4 sigma
  EXPECT_LT(flipped, 570);
}

TEST(Transforms, NormalizePerChannelAndShared) {
  const Shape s = {3, 2, 2};
  const std::vector<float> in = image(s, 3);
  auto per_channel = normalize({0.5f, 1.0f, 2.0f}, {0.25f, 2.0f, 4.0f});
  const std::vector<float> out = run(*per_channel, {}, s, in);
  const float mean[] = {0.5f, 1.0f, 2.0f}, stddev[] = {0.25f, 2.0f, 4.0f};
  for (size_t i = 0; i < in.size(); ++i)
    EXPECT_EQ(out[i], (in[i] - mean[i / 4]) / stddev[i / 4]) << i;
  const std::vector<float> shared = run(*normalize({0.5f}, {0.25f}), {}, s, in);
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(shared[i], (in[i] - 0.5f) / 0.25f) << i;
  EXPECT_EQ(normalize({0.5f, 1.0f}, {1.0f})->outputShape(s).status().message(),
            "transform 'normalize:0.5,1/1': 2 values for 3 channels (the image is [3,2,2])");
}

// Same key, same output; the order in which examples are transformed does not matter.
TEST(Transforms, DrawsDependOnlyOnTheKey) {
  const Shape s = {1, 6, 6};
  const std::vector<float> in = image(s, 4);
  auto list = parseAugment("crop:2,flip");
  ASSERT_TRUE(list.ok()) << list.status();
  for (const auto& t : *list) {
    std::vector<std::vector<float>> forward, backward(50);
    for (int64_t pos = 0; pos < 50; ++pos) forward.push_back(run(*t, keyAt(pos), s, in));
    for (int64_t pos = 49; pos >= 0; --pos) backward[pos] = run(*t, keyAt(pos), s, in);
    EXPECT_EQ(forward, backward) << t->text();
    std::set<std::vector<float>> distinct(forward.begin(), forward.end());
    EXPECT_GT(distinct.size(), 1u) << t->text();
    // Another seed or epoch draws again.
    ExampleKey other = keyAt(0);
    std::set<std::vector<float>> epochs;
    for (other.epoch = 0; other.epoch < 20; ++other.epoch) epochs.insert(run(*t, other, s, in));
    EXPECT_GT(epochs.size(), 1u) << t->text();
  }
}

TEST(Transforms, ParseAugment) {
  auto list = parseAugment("crop:4,flip,normalize:0.49,0.48,0.45/0.25,0.24,0.26,resize:32x24");
  ASSERT_TRUE(list.ok()) << list.status();
  std::vector<std::string> texts;
  for (const auto& t : *list) texts.push_back(t->text());
  EXPECT_THAT(texts,
              ::testing::ElementsAre("crop:4", "flip", "normalize:0.49,0.48,0.45/0.25,0.24,0.26",
                                     "resize:32x24"));
  auto square = parseAugment("resize:32");
  ASSERT_TRUE(square.ok());
  EXPECT_EQ((*square)[0]->text(), "resize:32x32");
  auto message = [](const char* text) {
    return std::string(parseAugment(text).status().message());
  };
  EXPECT_EQ(message("crop:4,blur"),
            "transform 'blur': unknown transform (crop:N, flip, normalize:MEAN/STD, resize:HxW)");
  EXPECT_EQ(message("crop:x"),
            "transform 'crop:x': the padding is not an integer in [0, 4096] (crop:4 pads 4 "
            "pixels)");
  EXPECT_EQ(message("flip:0.3"),
            "transform 'flip:0.3': flip takes no value (it flips half the images)");
  EXPECT_EQ(message("normalize:0.5"), "transform 'normalize:0.5': expected normalize:MEAN/STD");
  EXPECT_EQ(message("normalize:0.5/0"), "transform 'normalize:0.5/0': a std is not above 0");
  EXPECT_EQ(message("normalize:a/1"), "transform 'normalize:a/1': the mean 'a' is not a number");
  EXPECT_EQ(message("resize:0x3"),
            "transform 'resize:0x3': expected resize:SIZE or resize:HEIGHTxWIDTH (positive)");
  EXPECT_EQ(message("flip,,crop:1"), "an empty transform in the list");
}

TEST(Transforms, ResizeIsPyTorchsBilinear) {
  testing::CommandResult probe = testing::runProgram("/usr/bin/python3", {"-c", "import torch"});
  TANDEM_NEED_INSTALLED(probe.exit_code == 0 ? ""
                                             : "/usr/bin/python3 cannot import torch "
                                               "(python3-torch): " +
                                                   probe.err);
  char tmpl[] = "/tmp/tandem_resize_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  struct Case {
    Shape in;
    int64_t h, w;
  };
  const std::vector<Case> cases = {Case{{1, 28, 28}, 14, 14}, Case{{1, 28, 28}, 32, 32},
                                   Case{{3, 8, 8}, 5, 7}, Case{{2, 5, 9}, 11, 4},
                                   Case{{1, 1, 3}, 4, 4}};
  // One Python run resizes every case: in<k>.bin (with its sizes in the arguments) to
  // out<k>.bin.
  std::vector<std::string> args = {
      "-c",
      "import sys, numpy as np, torch\n"
      "import torch.nn.functional as F\n"
      "d, sizes = sys.argv[1], list(map(int, sys.argv[2:]))\n"
      "for k in range(len(sizes) // 5):\n"
      "  c, h, w, oh, ow = sizes[5 * k:5 * k + 5]\n"
      "  x = np.fromfile('%s/in%d.bin' % (d, k), np.float32).reshape(1, c, h, w)\n"
      "  y = F.interpolate(torch.from_numpy(x), size=(oh, ow), mode='bilinear',\n"
      "                    align_corners=False, antialias=False)\n"
      "  y.numpy().tofile('%s/out%d.bin' % (d, k))\n",
      dir};
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    const std::vector<float> in = image(c.in, 5 + k);
    std::ofstream f(absl::StrCat(dir, "/in", k, ".bin"), std::ios::binary);
    f.write(reinterpret_cast<const char*>(in.data()), static_cast<std::streamsize>(in.size() * 4));
    for (int64_t v : {c.in[0], c.in[1], c.in[2], c.h, c.w}) args.push_back(absl::StrCat(v));
  }
  testing::CommandResult r = testing::runProgram("/usr/bin/python3", args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    SCOPED_TRACE(absl::StrCat(c.in[0], "x", c.in[1], "x", c.in[2], " -> ", c.h, "x", c.w));
    std::vector<float> want(static_cast<size_t>(c.in[0] * c.h * c.w));
    std::ifstream f(absl::StrCat(dir, "/out", k, ".bin"), std::ios::binary);
    f.read(reinterpret_cast<char*>(want.data()), static_cast<std::streamsize>(want.size() * 4));
    ASSERT_TRUE(f.good());
    const std::vector<float> got = run(*resize(c.h, c.w), {}, c.in, image(c.in, 5 + k));
    // Within an ulp or two: PyTorch's kernels for AVX2 machines fuse multiply-adds, ours
    // (and PyTorch's portable ones) do not.
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-6f * std::max(1.0f, std::fabs(want[i]))) << i;
  }
  testing::runProgram("/bin/rm", {"-rf", dir});
}

TEST(Transforms, TransformSourceChangesTheImageField) {
  std::vector<HostArray> arrays;
  arrays.push_back(HostArray::of<float>("x", image({4, 1, 4}, 6), {4, 1, 2, 2}));
  arrays.push_back(HostArray::of<int32_t>("y", {0, 1, 2, 3}, {4}));
  auto base = MemorySource::create(std::move(arrays), "memory", {"y", 4});
  ASSERT_TRUE(base.ok());
  std::shared_ptr<const ExampleSource> shared = *std::move(base);
  auto list = parseAugment("flip,resize:3");
  ASSERT_TRUE(list.ok());
  auto source = transformSource(shared, "x", *std::move(list));
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->fields()[0].text(), "x: f32[1,3,3]");
  EXPECT_EQ((*source)->fields()[1].text(), "y: i32[]");
  EXPECT_EQ((*source)->classLabels(), shared->classLabels());
  // The same as flip then resize by hand on the base's example.
  float raw[4], flipped[4], want[9], got[9];
  int32_t y;
  void* base_out[] = {raw, &y};
  ASSERT_TRUE(shared->read(2, keyAt(7), base_out).ok());
  const Shape s = {1, 2, 2};
  horizontalFlip()->apply(keyAt(7), s, raw, flipped);
  resize(3, 3)->apply(keyAt(7), s, flipped, want);
  void* out[] = {got, &y};
  ASSERT_TRUE((*source)->read(2, keyAt(7), out).ok());
  EXPECT_EQ(std::vector<float>(got, got + 9), std::vector<float>(want, want + 9));
  EXPECT_EQ(y, 2);
  std::vector<std::unique_ptr<ImageTransform>> none;
  EXPECT_EQ(transformSource(shared, "y", std::move(none)).status().message(),
            "memory: the transforms take an image f32 [C,H,W], not y: i32[]");
}

}  // namespace
}  // namespace tandem::runtime::data

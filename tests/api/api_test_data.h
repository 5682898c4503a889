#pragma once

// Data the public API's tests train on, each with a known answer: four classes of images
// told apart by where they are bright, and an exact affine map a linear model can learn.

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tandem/tandem.h"

namespace tandem::testing {

constexpr int kQuadrantClasses = 4;

/// `count` 1x8x8 images of four classes: class k (i % 4) is bright in quadrant k, plus
/// normal noise of standard deviation 0.3 drawn from `seed`.
inline Examples quadrantImages(int count, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> noise(0, 0.3f);
  Examples e;
  for (int i = 0; i < count; ++i) {
    const int k = i % kQuadrantClasses;
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c)
        e.images.push_back(((r < 4) == (k < 2) && (c < 4) == (k % 2 == 0) ? 1.0f : 0.0f) +
                           noise(gen));
    e.labels.push_back(k);
  }
  return e;
}

/// A data set of the program's own: example i has x in [-1, 1)^4 (a hash of i + offset, so
/// that any thread may read any example) and y = w . x + b, w = (1, -2, 0.5, 3), b = 0.5.
class AffineExamples final : public Dataset {
 public:
  static constexpr float kW[4] = {1.0f, -2.0f, 0.5f, 3.0f};
  static constexpr float kB = 0.5f;

  explicit AffineExamples(int64_t count, int64_t offset = 0) : count_(count), offset_(offset) {}
  std::string where() const override { return "AffineExamples"; }
  int64_t size() const override { return count_; }
  const std::vector<DatasetField>& fields() const override { return fields_; }
  absl::Status read(int64_t index, const runtime::data::ExampleKey&,
                    absl::Span<void* const> out) const override {
    float x[4];
    for (int k = 0; k < 4; ++k) {  // splitmix64's finalizer over (index, k)
      uint64_t h = static_cast<uint64_t>((index + offset_) * 4 + k + 1) * 0x9e3779b97f4a7c15ull;
      h ^= h >> 31;
      h *= 0xbf58476d1ce4e5b9ull;
      h ^= h >> 29;
      x[k] = static_cast<float>(h >> 40) / static_cast<float>(1 << 23) - 1.0f;
    }
    float y = kB;
    for (int k = 0; k < 4; ++k) y += kW[k] * x[k];
    std::memcpy(out[0], x, sizeof x);
    std::memcpy(out[1], &y, sizeof y);
    return absl::OkStatus();
  }

 private:
  int64_t count_, offset_;
  std::vector<DatasetField> fields_{{.name = "x", .dtype = ir::DType::kF32, .shape = {4}},
                                    {.name = "y", .dtype = ir::DType::kF32, .shape = {1}}};
};

/// A linear model of AffineExamples fit with mean squared error (SGD, lr 0.1, momentum
/// 0.9): no classes, no accuracy; its metric `abs_error` is the mean |prediction - y|.
inline ModelSpec affineRegression(std::string name = "affine") {
  ModelSpec spec{.name = std::move(name),
                 .inputs = {{.name = "x", .shape = {4}}, {.name = "y", .shape = {1}}},
                 .metrics = {"abs_error"}};
  spec.defaults.optimizer = ir::SgdConfig{.lr = 0.1, .momentum = 0.9};
  spec.step = [](Builder& b, const StepInputs& in) {
    Tensor prediction = b.linear(in["x"], {.out_features = 1, .name = "fc"});
    Tensor abs_error =
        b.l1Loss(prediction, in["y"], {.reduction = ir::Reduction::kSum, .name = "abs_error"});
    return StepOutputs{
        .loss = b.mseLoss(prediction, in["y"],
                          {.reduction = b.training() ? ir::Reduction::kMean : ir::Reduction::kSum}),
        .metrics = {{.name = "abs_error", .sum = abs_error}}};
  };
  return spec;
}

}  // namespace tandem::testing

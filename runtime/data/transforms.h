#pragma once

// Per-example transforms of an image field f32 [C, H, W] (augmentation and resizing), each
// a pure function of the example's key and its input: every random choice is drawn from
// the ExampleKey, so the same run on any devices, threads or processes, or resumed, sees
// the same augmented examples.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/data/example_source.h"

namespace tandem::runtime::data {

class ImageTransform {
 public:
  virtual ~ImageTransform() = default;
  /// Its word in an --augment list: "crop:4", "flip", "normalize:0.5/0.25", "resize:32x32".
  virtual std::string text() const = 0;
  /// Whether it draws from the example's key (augmentation, for training examples only)
  /// rather than being a fixed function of the image (normalize, resize: every part).
  virtual bool random() const { return false; }
  /// The shape it makes of an image of shape `in` ([C, H, W]); an error naming the
  /// transform when it cannot take such an image.
  virtual absl::StatusOr<std::vector<int64_t>> outputShape(absl::Span<const int64_t> in) const = 0;
  /// Writes the transformed image `in` (of shape `in_shape`, accepted by outputShape) to
  /// `out` (of the output shape; not overlapping `in`).
  virtual void apply(const ExampleKey& key, absl::Span<const int64_t> in_shape, const float* in,
                     float* out) const = 0;
};

/// torchvision's RandomCrop(size of the image, padding=`padding`): zero padding on every
/// side, then an H x W window at a random offset (top and left each uniform in
/// [0, 2 * padding]).
std::unique_ptr<ImageTransform> randomCrop(int64_t padding);
/// torchvision's RandomHorizontalFlip(p=0.5).
std::unique_ptr<ImageTransform> horizontalFlip();
/// (x - mean[c]) / std[c]: one mean and std for every channel, or one per channel.
/// Every std must be > 0 (parseAugment checks; here it is the caller's to ensure).
std::unique_ptr<ImageTransform> normalize(std::vector<float> mean, std::vector<float> stddev);
/// Bilinear resizing to height x width as torch.nn.functional.interpolate(mode="bilinear",
/// align_corners=False, antialias=False) computes it (in f32): not PIL's, which smooths
/// (antialiases) when it shrinks.
std::unique_ptr<ImageTransform> resize(int64_t height, int64_t width);

/// The transforms of an --augment text, in order: comma-separated words "crop:N", "flip",
/// "normalize:MEAN/STD" (each one number, or one per channel separated by commas:
/// "normalize:0.49,0.48,0.45/0.25,0.24,0.26"), "resize:S" or "resize:HxW". An error
/// names the bad word: "transform 'crop:x': the padding is not an integer >= 0".
absl::StatusOr<std::vector<std::unique_ptr<ImageTransform>>> parseAugment(absl::string_view text);

/// `source` with its field `field` (f32 [C, H, W]) put through `transforms` in order (the
/// field's shape becomes the last one's output shape). An error when the field is missing,
/// is not an image, or a transform cannot take it.
absl::StatusOr<std::unique_ptr<ExampleSource>> transformSource(
    std::shared_ptr<const ExampleSource> source, const std::string& field,
    std::vector<std::unique_ptr<ImageTransform>> transforms);

}  // namespace tandem::runtime::data

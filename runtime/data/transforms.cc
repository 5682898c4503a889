#include "runtime/data/transforms.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/data/draws.h"

namespace tandem::runtime::data {
namespace {

absl::Status badImage(const ImageTransform& t, absl::Span<const int64_t> in,
                      absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("transform '", t.text(), "': ", why,
                                                 " (the image is [", absl::StrJoin(in, ","), "])"));
}

class RandomCropTransform : public ImageTransform {
 public:
  explicit RandomCropTransform(int64_t padding) : padding_(padding) {}
  std::string text() const override { return absl::StrCat("crop:", padding_); }
  bool random() const override { return true; }
  absl::StatusOr<std::vector<int64_t>> outputShape(absl::Span<const int64_t> in) const override {
    return std::vector<int64_t>(in.begin(), in.end());
  }
  void apply(const ExampleKey& key, absl::Span<const int64_t> s, const float* in,
             float* out) const override {
    const int64_t c = s[0], h = s[1], w = s[2];
    const uint64_t choices = static_cast<uint64_t>(2 * padding_ + 1);
    // The window's top-left corner in the padded image, less the padding: its offset in
    // the image itself.
    const int64_t top = static_cast<int64_t>(key.below(choices, kCropDraw, 0)) - padding_;
    const int64_t left = static_cast<int64_t>(key.below(choices, kCropDraw, 1)) - padding_;
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < h; ++i) {
        float* row = out + (ch * h + i) * w;
        const int64_t si = i + top;
        if (si < 0 || si >= h) {
          std::fill(row, row + w, 0.0f);
          continue;
        }
        const float* src = in + (ch * h + si) * w;
        for (int64_t j = 0; j < w; ++j) {
          const int64_t sj = j + left;
          row[j] = sj >= 0 && sj < w ? src[sj] : 0.0f;
        }
      }
  }

 private:
  int64_t padding_;
};

class FlipTransform : public ImageTransform {
 public:
  std::string text() const override { return "flip"; }
  bool random() const override { return true; }
  absl::StatusOr<std::vector<int64_t>> outputShape(absl::Span<const int64_t> in) const override {
    return std::vector<int64_t>(in.begin(), in.end());
  }
  void apply(const ExampleKey& key, absl::Span<const int64_t> s, const float* in,
             float* out) const override {
    const int64_t rows = s[0] * s[1], w = s[2];
    if ((key.bits(kFlipDraw) >> 63) == 0) {
      std::memcpy(out, in, static_cast<size_t>(rows * w) * sizeof(float));
      return;
    }
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < w; ++j) out[r * w + j] = in[r * w + (w - 1 - j)];
  }
};

std::string transformNumbers(const std::vector<float>& v) { return absl::StrJoin(v, ","); }

class NormalizeTransform : public ImageTransform {
 public:
  NormalizeTransform(std::vector<float> mean, std::vector<float> stddev)
      : mean_(std::move(mean)), std_(std::move(stddev)) {}
  std::string text() const override {
    return absl::StrCat("normalize:", transformNumbers(mean_), "/", transformNumbers(std_));
  }
  absl::StatusOr<std::vector<int64_t>> outputShape(absl::Span<const int64_t> in) const override {
    for (const std::vector<float>* v : {&mean_, &std_})
      if (v->size() != 1 && static_cast<int64_t>(v->size()) != in[0])
        return badImage(*this, in, absl::StrCat(v->size(), " values for ", in[0], " channels"));
    return std::vector<int64_t>(in.begin(), in.end());
  }
  void apply(const ExampleKey&, absl::Span<const int64_t> s, const float* in,
             float* out) const override {
    const int64_t plane = s[1] * s[2];
    for (int64_t c = 0; c < s[0]; ++c) {
      const float m = mean_[mean_.size() == 1 ? 0 : c];
      const float d = std_[std_.size() == 1 ? 0 : c];
      for (int64_t k = 0; k < plane; ++k) out[c * plane + k] = (in[c * plane + k] - m) / d;
    }
  }

 private:
  std::vector<float> mean_, std_;
};

// PyTorch's source index and weights along one axis (upsample_bilinear2d on the CPU,
// align_corners=False): src = scale * (dst + 0.5) - 0.5 clamped at 0, scale = in / out in
// f32; the lower neighbour floor(src), the upper one beside it unless at the edge.
struct Tap {
  int64_t lo, hi;
  float w_lo, w_hi;
};
std::vector<Tap> taps(int64_t in, int64_t out) {
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  std::vector<Tap> t(static_cast<size_t>(out));
  for (int64_t d = 0; d < out; ++d) {
    const float src = std::max(scale * (static_cast<float>(d) + 0.5f) - 0.5f, 0.0f);
    const int64_t lo = static_cast<int64_t>(src);
    const int64_t hi = lo + (lo < in - 1 ? 1 : 0);
    const float w_hi = std::min(std::max(src - static_cast<float>(lo), 0.0f), 1.0f);
    t[static_cast<size_t>(d)] = {lo, hi, 1.0f - w_hi, w_hi};
  }
  return t;
}

class ResizeTransform : public ImageTransform {
 public:
  ResizeTransform(int64_t h, int64_t w) : h_(h), w_(w) {}
  std::string text() const override { return absl::StrCat("resize:", h_, "x", w_); }
  absl::StatusOr<std::vector<int64_t>> outputShape(absl::Span<const int64_t> in) const override {
    return std::vector<int64_t>{in[0], h_, w_};
  }
  void apply(const ExampleKey&, absl::Span<const int64_t> s, const float* in,
             float* out) const override {
    const int64_t c = s[0], ih = s[1], iw = s[2];
    const std::vector<Tap> ty = taps(ih, h_), tx = taps(iw, w_);
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* src = in + ch * ih * iw;
      float* dst = out + ch * h_ * w_;
      for (int64_t i = 0; i < h_; ++i) {
        const Tap& y = ty[static_cast<size_t>(i)];
        const float* r0 = src + y.lo * iw;
        const float* r1 = src + y.hi * iw;
        for (int64_t j = 0; j < w_; ++j) {
          const Tap& x = tx[static_cast<size_t>(j)];
          // PyTorch's order of operations: rows first blended across, then down.
          dst[i * w_ + j] = y.w_lo * (x.w_lo * r0[x.lo] + x.w_hi * r0[x.hi]) +
                            y.w_hi * (x.w_lo * r1[x.lo] + x.w_hi * r1[x.hi]);
        }
      }
    }
  }

 private:
  int64_t h_, w_;
};

absl::Status badWord(absl::string_view word, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("transform '", word, "': ", why));
}

absl::StatusOr<std::vector<float>> floatList(absl::string_view word, absl::string_view text,
                                             absl::string_view what) {
  std::vector<float> v;
  for (absl::string_view piece : absl::StrSplit(text, ',')) {
    float f;
    if (!absl::SimpleAtof(piece, &f) || !std::isfinite(f))
      return badWord(word, absl::StrCat("the ", what, " '", piece, "' is not a number"));
    v.push_back(f);
  }
  return v;
}

absl::StatusOr<std::unique_ptr<ImageTransform>> parseWord(absl::string_view word) {
  const size_t colon = word.find(':');
  const absl::string_view name = word.substr(0, colon);
  const bool has_value = colon != absl::string_view::npos;
  const absl::string_view value = has_value ? word.substr(colon + 1) : absl::string_view();
  if (name == "flip") {
    if (has_value) return badWord(word, "flip takes no value (it flips half the images)");
    return horizontalFlip();
  }
  if (name == "crop") {
    int64_t padding = -1;
    if (!has_value || !absl::SimpleAtoi(value, &padding) || padding < 0 || padding > 4096)
      return badWord(word, "the padding is not an integer in [0, 4096] (crop:4 pads 4 pixels)");
    return randomCrop(padding);
  }
  if (name == "normalize") {
    const size_t slash = value.find('/');
    if (!has_value || slash == absl::string_view::npos)
      return badWord(word, "expected normalize:MEAN/STD");
    absl::StatusOr<std::vector<float>> mean = floatList(word, value.substr(0, slash), "mean");
    if (!mean.ok()) return mean.status();
    absl::StatusOr<std::vector<float>> stddev = floatList(word, value.substr(slash + 1), "std");
    if (!stddev.ok()) return stddev.status();
    for (float s : *stddev)
      if (s <= 0) return badWord(word, "a std is not above 0");
    if (mean->size() != stddev->size() && mean->size() != 1 && stddev->size() != 1)
      return badWord(word, absl::StrCat(mean->size(), " means and ", stddev->size(), " stds"));
    return normalize(*std::move(mean), *std::move(stddev));
  }
  if (name == "resize") {
    std::vector<absl::string_view> hw = absl::StrSplit(value, 'x');
    int64_t h = 0, w = 0;
    const bool ok = has_value && hw.size() <= 2 && absl::SimpleAtoi(hw[0], &h) &&
                    absl::SimpleAtoi(hw.back(), &w) && h > 0 && w > 0 && h <= 65536 && w <= 65536;
    if (!ok) return badWord(word, "expected resize:SIZE or resize:HEIGHTxWIDTH (positive)");
    return resize(h, w);
  }
  return badWord(word, "unknown transform (crop:N, flip, normalize:MEAN/STD, resize:HxW)");
}

class TransformedSource : public ExampleSource {
 public:
  TransformedSource(std::shared_ptr<const ExampleSource> base, size_t field,
                    std::vector<std::unique_ptr<ImageTransform>> transforms,
                    std::vector<std::vector<int64_t>> shapes)
      : base_(std::move(base)),
        field_(field),
        transforms_(std::move(transforms)),
        shapes_(std::move(shapes)),
        fields_(base_->fields()) {
    fields_[field_].shape = shapes_.back();
  }
  std::string where() const override { return base_->where(); }
  int64_t size() const override { return base_->size(); }
  const std::vector<Field>& fields() const override { return fields_; }
  std::pair<std::string, int64_t> classLabels() const override { return base_->classLabels(); }
  absl::Status read(int64_t index, const ExampleKey& key,
                    absl::Span<void* const> out) const override {
    // The image is read into a buffer of this call's, goes through the transforms from
    // buffer to buffer, and the last one writes into `out`.
    if (transforms_.empty()) return base_->read(index, key, out);
    size_t largest = 0;
    for (const std::vector<int64_t>& s : shapes_)
      largest = std::max(largest, static_cast<size_t>(s[0] * s[1] * s[2]));
    std::vector<float> a(largest), b(largest);
    std::vector<void*> base_out(out.begin(), out.end());
    base_out[field_] = a.data();
    if (absl::Status s = base_->read(index, key, base_out); !s.ok()) return s;
    for (size_t t = 0; t < transforms_.size(); ++t) {
      float* dst = t + 1 == transforms_.size() ? static_cast<float*>(out[field_]) : b.data();
      transforms_[t]->apply(key, shapes_[t], a.data(), dst);
      std::swap(a, b);
    }
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<const ExampleSource> base_;
  size_t field_;
  std::vector<std::unique_ptr<ImageTransform>> transforms_;
  std::vector<std::vector<int64_t>> shapes_;  // the input of each transform, and the output
  std::vector<Field> fields_;
};

}  // namespace

std::unique_ptr<ImageTransform> randomCrop(int64_t padding) {
  return std::make_unique<RandomCropTransform>(padding);
}
std::unique_ptr<ImageTransform> horizontalFlip() { return std::make_unique<FlipTransform>(); }
std::unique_ptr<ImageTransform> normalize(std::vector<float> mean, std::vector<float> stddev) {
  return std::make_unique<NormalizeTransform>(std::move(mean), std::move(stddev));
}
std::unique_ptr<ImageTransform> resize(int64_t height, int64_t width) {
  return std::make_unique<ResizeTransform>(height, width);
}

absl::StatusOr<std::vector<std::unique_ptr<ImageTransform>>> parseAugment(absl::string_view text) {
  // Words are split at commas, except that a comma before a number continues the word
  // (normalize's per-channel lists).
  std::vector<std::string> words;
  for (absl::string_view piece : absl::StrSplit(text, ',')) {
    const bool number = !piece.empty() && (std::isdigit(static_cast<unsigned char>(piece[0])) ||
                                           piece[0] == '-' || piece[0] == '.' || piece[0] == '+');
    if (number && !words.empty())
      absl::StrAppend(&words.back(), ",", piece);
    else
      words.emplace_back(piece);
  }
  std::vector<std::unique_ptr<ImageTransform>> out;
  for (const std::string& word : words) {
    if (word.empty()) return absl::InvalidArgumentError("an empty transform in the list");
    absl::StatusOr<std::unique_ptr<ImageTransform>> t = parseWord(word);
    if (!t.ok()) return t.status();
    out.push_back(*std::move(t));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<ExampleSource>> transformSource(
    std::shared_ptr<const ExampleSource> source, const std::string& field,
    std::vector<std::unique_ptr<ImageTransform>> transforms) {
  const std::vector<Field>& fields = source->fields();
  size_t index = fields.size();
  for (size_t f = 0; f < fields.size(); ++f)
    if (fields[f].name == field) index = f;
  if (index == fields.size())
    return absl::InvalidArgumentError(
        absl::StrCat(source->where(), ": no field '", field, "' to transform"));
  const Field& image = fields[index];
  if (image.dtype != ir::DType::kF32 || image.shape.size() != 3)
    return absl::InvalidArgumentError(absl::StrCat(source->where(), ": the transforms take an ",
                                                   "image f32 [C,H,W], not ", image.text()));
  if (transforms.empty())
    return std::unique_ptr<ExampleSource>(new TransformedSource(source, index, {}, {image.shape}));
  std::vector<std::vector<int64_t>> shapes = {image.shape};
  for (const std::unique_ptr<ImageTransform>& t : transforms) {
    absl::StatusOr<std::vector<int64_t>> next = t->outputShape(shapes.back());
    if (!next.ok()) return next.status();
    shapes.push_back(*std::move(next));
  }
  return std::unique_ptr<ExampleSource>(
      new TransformedSource(std::move(source), index, std::move(transforms), std::move(shapes)));
}

}  // namespace tandem::runtime::data

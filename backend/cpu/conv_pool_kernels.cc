// conv2d_relu_avg_pool and its filter gradient (fuse-conv-relu-pool): image by image, so
// that the convolution's output and its gradient never leave the caches. kTaps' loops
// where they run (tap_conv.h: AVX-512, at most 9 taps, stride 1 along the rows, no
// padding, rows of at most 32 columns, no groups), with the unfused kernels' bits;
// elsewhere direct loops in the definition's order.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cpu/avx512_rows.h"
#include "backend/cpu/im2col.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/tap_conv.h"
#include "backend/unary_math.h"
#include "ir/op_views.h"

namespace tandem::backend::cpu {
namespace {

/// The convolution of a conv2d_relu_avg_pool node (or its backward): its window over one
/// group's channels, the batch, output channels and groups.
struct ConvPoolShape {
  ConvWindow window;  // c: the input channels of one group
  int64_t n, o, groups;

  int64_t pooledH() const { return window.oh / 2; }
  int64_t pooledW() const { return window.ow / 2; }
};

ConvPoolShape shapeOf(const ir::Node& node, const ir::Value& x, const ir::Value& w) {
  const ir::Shape& xs = x.type().shape;
  const ir::Shape& ws = w.type().shape;
  const ir::Hw stride = ir::attr::stride(node), pad = ir::attr::pad(node);
  return {.window = {.c = ws[1],
                     .h = xs[2],
                     .w = xs[3],
                     .kh = ws[2],
                     .kw = ws[3],
                     .oh = (xs[2] + 2 * pad.h - ws[2]) / stride.h + 1,
                     .ow = (xs[3] + 2 * pad.w - ws[3]) / stride.w + 1,
                     .stride_h = stride.h,
                     .stride_w = stride.w,
                     .pad_h = pad.h,
                     .pad_w = pad.w},
          .n = xs[0],
          .o = ws[0],
          .groups = ir::attr::groups(node)};
}

/// Where tap_conv.h's fused loops take the shape.
bool tapsRun(const ConvPoolShape& s) {
  constexpr int64_t kRowColumns = 32;  // tap_conv.h's two vectors of 16 floats
  const ConvWindow& g = s.window;
  return avx512Runs() && s.groups == 1 && g.rows() <= kConvReluPoolTaps && g.stride_w == 1 &&
         g.pad_h == 0 && g.pad_w == 0 && g.w <= kRowColumns && g.ow <= kRowColumns;
}

/// Calls tap(r, x) for every tap r = (c, kh, kw) of output (i, j) of output channel oc's
/// group that reads x inside the image (padding skipped), in the filter's order.
template <typename Tap>
void forEachTapOf(const ConvPoolShape& s, const float* x_image, int64_t oc, int64_t i, int64_t j,
                  Tap tap) {
  const ConvWindow& g = s.window;
  const int64_t group = oc / (s.o / s.groups);
  for (int64_t c = 0; c < g.c; ++c) {
    const float* channel = x_image + (group * g.c + c) * g.h * g.w;
    for (int64_t kh = 0; kh < g.kh; ++kh) {
      const int64_t ih = i * g.stride_h - g.pad_h + kh;
      if (ih < 0 || ih >= g.h) continue;
      for (int64_t kw = 0; kw < g.kw; ++kw) {
        const int64_t iw = j * g.stride_w - g.pad_w + kw;
        if (iw >= 0 && iw < g.w) tap((c * g.kh + kh) * g.kw + kw, channel[ih * g.w + iw]);
      }
    }
  }
}

/// One image's convolution of output channel `oc` plus its bias into plane [oh, ow], by
/// the definition: the taps in order.
void convPlane(const ConvPoolShape& s, const float* x_image, const float* w, const float* b,
               int64_t oc, float* plane) {
  const ConvWindow& g = s.window;
  const float* filter = w + oc * g.rows();
  for (int64_t i = 0; i < g.oh; ++i)
    for (int64_t j = 0; j < g.ow; ++j) {
      float sum = 0.0f;
      forEachTapOf(s, x_image, oc, i, j, [&](int64_t r, float x) { sum += filter[r] * x; });
      plane[i * g.ow + j] = sum + (b == nullptr ? 0.0f : b[oc]);
    }
}

/// relu's mask of a plane's rows: bit j of mask[i] where plane[i, j] is > 0 or NaN.
void maskOfPlane(const ConvWindow& g, const float* plane, int32_t* mask) {
  for (int64_t i = 0; i < g.oh; ++i) {
    uint32_t bits = 0;
    for (int64_t j = 0; j < g.ow; ++j)
      if (!(plane[i * g.ow + j] <= 0.0f)) bits |= uint32_t{1} << j;
    mask[i] = static_cast<int32_t>(bits);
  }
}

/// The forward by the definition: per image and output channel the convolution's plane,
/// relu's mask of it, then each 2x2 window's ((a + b) + (c + d)) * 0.25 of relu
/// (avg_pool2d{relu}'s order).
void convReluPoolLoops(const ConvPoolShape& s, const float* x, const float* w, const float* b,
                       float* y, int32_t* mask) {
  const ConvWindow& g = s.window;
  const int64_t image = s.groups * g.c * g.h * g.w, ph = s.pooledH(), pw = s.pooledW();
  std::vector<float> plane(static_cast<size_t>(g.oh * g.ow));
  for (int64_t i = 0; i < s.n; ++i)
    for (int64_t oc = 0; oc < s.o; ++oc) {
      convPlane(s, x + i * image, w, b, oc, plane.data());
      maskOfPlane(g, plane.data(), mask + (i * s.o + oc) * g.oh);
      float* out = y + (i * s.o + oc) * ph * pw;
      for (int64_t r = 0; r < ph; ++r)
        for (int64_t c = 0; c < pw; ++c) {
          const float* top = plane.data() + 2 * r * g.ow + 2 * c;
          const float* bottom = top + g.ow;
          out[r * pw + c] = ((reluValue(top[0]) + reluValue(top[1])) +
                             (reluValue(bottom[0]) + reluValue(bottom[1]))) *
                            0.25f;
        }
    }
}

/// The filter gradient by the definition: each convolution output's share dy * 0.25 of its
/// window where the mask passes (avg_pool2d_backward{relu}'s), summed into dw and db in
/// the images' order.
void convReluPoolFilterLoops(const ConvPoolShape& s, const float* x, const int32_t* mask,
                             const float* dy, float* dw, float* db) {
  const ConvWindow& g = s.window;
  const int64_t image = s.groups * g.c * g.h * g.w, ph = s.pooledH(), pw = s.pooledW();
  std::fill(dw, dw + s.o * g.rows(), 0.0f);
  if (db != nullptr) std::fill(db, db + s.o, 0.0f);
  for (int64_t i = 0; i < s.n; ++i)
    for (int64_t oc = 0; oc < s.o; ++oc) {
      const float* x_image = x + i * image;
      const float* d = dy + (i * s.o + oc) * ph * pw;
      const int32_t* rows = mask + (i * s.o + oc) * g.oh;
      float* filter = dw + oc * g.rows();
      for (int64_t r = 0; r < 2 * ph; ++r)
        for (int64_t col = 0; col < 2 * pw; ++col) {
          const bool passes = (static_cast<uint32_t>(rows[r]) >> col) & 1u;
          const float share = passes ? d[(r / 2) * pw + col / 2] * 0.25f : 0.0f;
          if (db != nullptr) db[oc] += share;
          forEachTapOf(s, x_image, oc, r, col, [&](int64_t t, float x) { filter[t] += share * x; });
        }
    }
}

class ConvReluPoolKernel final : public CpuKernel {
 public:
  explicit ConvReluPoolKernel(const ConvPoolShape& s) : s_(s) {}

 private:
  // x, w, b? -> y, mask
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const float* b = in.size() > 2 ? in[2].f32() : nullptr;
    int32_t* mask = out[1].as<int32_t>();
    if (tapsRun(s_)) {
      tapConvReluPool(s_.window, s_.n, s_.o, in[0].f32(), in[1].f32(), b, out[0].f32(), mask);
    } else {
      convReluPoolLoops(s_, in[0].f32(), in[1].f32(), b, out[0].f32(), mask);
    }
  }
  ConvPoolShape s_;
};

class ConvReluPoolFilterKernel final : public CpuKernel {
 public:
  explicit ConvReluPoolFilterKernel(const ConvPoolShape& s) : s_(s) {}

 private:
  // dy, x, w, mask -> dw, db?
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const int32_t* mask = in[3].as<int32_t>();
    float* db = out.size() > 1 ? out[1].f32() : nullptr;
    if (tapsRun(s_)) {
      tapConvReluPoolFilterGradient(s_.window, s_.n, s_.o, in[1].f32(), mask, in[0].f32(),
                                    out[0].f32(), db);
    } else {
      convReluPoolFilterLoops(s_, in[1].f32(), mask, in[0].f32(), out[0].f32(), db);
    }
  }
  ConvPoolShape s_;
};

}  // namespace

KernelOr makeConv2dReluAvgPoolKernel(const KernelInit& init) {
  const ir::Conv2dReluAvgPoolView v(init.node);
  return std::make_unique<ConvReluPoolKernel>(shapeOf(init.node, *v.x(), *v.w()));
}

KernelOr makeConv2dReluAvgPoolBackwardFilterKernel(const KernelInit& init) {
  const ir::Conv2dReluAvgPoolBackwardFilterView v(init.node);
  return std::make_unique<ConvReluPoolFilterKernel>(shapeOf(init.node, *v.x(), *v.w()));
}

}  // namespace tandem::backend::cpu

// Max, average and global average pooling and their backward ops, as plain loops over
// NCHW planes.
//
// Not oneDNN: on plain NCHW tensors oneDNN 2.6 runs pooling in its reference-grade
// "simple_nchw" implementation, about 2x slower than PyTorch for LeNet's 2x2 average
// pooling, and a blocked layout would cost two reorders that each move as much memory
// as the pooling itself. Pooling is memory-bound: a loop that reads each input once is
// as fast as it gets. The 2x2 stride-2 window without padding (LeNet) has its own loop,
// and for f32 on AVX-512 its own rows (avg_pool_rows.h, the same bits).
//
// Conventions (PyTorch's): max pooling ignores padding, returns NaN for a window holding
// one, and its backward routes dy to the first maximum of each window in row-major
// order, recomputed from x (the op has no workspace operand); average pooling counts
// padding as zeros, i.e. divides by the kernel's h*w, except at the partial last windows of
// ceil_mode, where it divides by the part inside the padded image (count_include_pad).
//
// f32 or bf16 (mixed precision): the loops are templates on the element type T and
// compute in float; a bf16 result is rounded once, where it is stored.
//
// Average pooling with relu=true (fuse-relu-pool) pools relu(x), and its backward masks dx
// where x <= 0: relu's and relu_backward's per-element math (backend/unary_math.h) applied
// on load, so the results are those of the unfused ops bit for bit.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "backend/bf16.h"
#include "backend/cpu/avg_pool_rows.h"
#include "backend/cpu/avx512_rows.h"
#include "backend/cpu/kernels.h"
#include "backend/unary_math.h"
#include "ir/op_views.h"

namespace tandem::backend::cpu {
namespace {

enum class PoolKind { kMax, kAvg };

/// The input extent [begin[i], end[i]) that output i's window covers inside the image,
/// and the extent `divisor[i]` that average pooling counts: the window inside the padded
/// image (the kernel, but for a partial last window that ceil_mode adds).
struct Ranges {
  std::vector<int64_t> begin, end, divisor;
  Ranges(int64_t out, int64_t in, int64_t k, int64_t stride, int64_t pad) {
    for (int64_t i = 0; i < out; ++i) {
      int64_t b = i * stride - pad;
      begin.push_back(std::max<int64_t>(b, 0));
      end.push_back(std::min(b + k, in));
      divisor.push_back(std::min(b + k, in + pad) - b);
    }
  }
  /// 1 / (rows' divisor * columns' divisor) of window (i, j): 1 / (kernel h*w) but at the
  /// partial windows.
  static float scale(const Ranges& rows, const Ranges& cols, int64_t i, int64_t j) {
    return 1.0f / static_cast<float>(rows.divisor[size_t(i)] * cols.divisor[size_t(j)]);
  }
};

/// One pooling over planes of H x W (all N * C of them alike).
struct PoolGeometry {
  int64_t planes, h, w, oh, ow;
  ir::Hw k, stride, pad;  // per axis

  PoolGeometry(const ir::TensorType& x, const ir::TensorType& y, ir::Hw k, ir::Hw stride,
               ir::Hw pad)
      : planes(x.shape[0] * x.shape[1]),
        h(x.shape[2]),
        w(x.shape[3]),
        oh(y.shape[2]),
        ow(y.shape[3]),
        k(k),
        stride(stride),
        pad(pad) {}
  int64_t inPlane() const { return h * w; }
  int64_t outPlane() const { return oh * ow; }
  /// LeNet's window: every output reads one aligned 2x2 block (none partial: no ceil_mode
  /// window past an odd extent).
  bool is2x2() const {
    return k == ir::Hw(2) && stride == ir::Hw(2) && pad == ir::Hw(0) && oh == h / 2 && ow == w / 2;
  }
};

/// g where `keep`, else 0, without a branch.
inline float keepIf(bool keep, float g) {
  return std::bit_cast<float>(std::bit_cast<uint32_t>(g) & (0u - static_cast<uint32_t>(keep)));
}

/// Whether a 2x2 window holds a NaN. Not isnan(a + b + c + d): +inf beside -inf sums to
/// NaN too, and made the window's maximum NaN where PyTorch's is +inf. Two unordered
/// compares (cmpunordps), as cheap as the three additions were.
inline bool anyNan(float a, float b, float c, float d) {
  return __builtin_isunordered(a, b) | __builtin_isunordered(c, d);
}

/// True when v should replace the current maximum: larger, or NaN (which then sticks).
inline bool takesMax(float v, float best) { return v > best || std::isnan(v); }

/// The narrowest rows avg_pool_rows.h takes: below a vector's columns the scalar loop was
/// as fast (LeNet's pool2, 9 columns: 0.21 against 0.23 ms backward, cpu_kernels_bench).
constexpr int64_t kRowsFrom = 16;

template <typename T>
class WindowPoolKernel final : public CpuKernel {
 public:
  WindowPoolKernel(PoolKind kind, bool backward, PoolGeometry g, bool relu)
      : kind_(kind),
        backward_(backward),
        relu_(relu),
        g_(g),
        rows_(g.oh, g.h, g.k.h, g.stride.h, g.pad.h),
        cols_(g.ow, g.w, g.k.w, g.stride.w, g.pad.w) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    if constexpr (std::is_same_v<T, float>) {
      if (kind_ == PoolKind::kAvg && g_.is2x2() && g_.w >= kRowsFrom && avx512Runs()) {
        if (backward_) {
          avgPool2x2BackwardRows(g_.planes, g_.h, g_.w, relu_, in[0].f32(), in[1].f32(),
                                 out[0].f32());
        } else {
          avgPool2x2Rows(g_.planes, g_.h, g_.w, relu_, in[0].f32(), out[0].f32());
        }
        return;
      }
    }
    if (!backward_) {
      for (int64_t p = 0; p < g_.planes; ++p) {
        const T* x = in[0].as<T>() + p * g_.inPlane();
        T* y = out[0].as<T>() + p * g_.outPlane();
        if (kind_ == PoolKind::kMax) {
          maxForward(x, y);
        } else if (relu_) {
          avgForward<true>(x, y);
        } else {
          avgForward<false>(x, y);
        }
      }
      return;
    }
    for (int64_t p = 0; p < g_.planes; ++p) {
      const T* dy = in[0].as<T>() + p * g_.outPlane();
      const T* x = in[1].as<T>() + p * g_.inPlane();
      T* dx = out[0].as<T>() + p * g_.inPlane();
      if (kind_ == PoolKind::kMax) {
        maxBackward(dy, x, dx);
      } else if (relu_) {
        avgBackward<true>(dy, x, dx);
      } else {
        avgBackward<false>(dy, x, dx);
      }
    }
  }

 private:
  /// An input as average pooling reads it: relu(x) with kRelu.
  template <bool kRelu>
  static float pooled(T x) {
    return kRelu ? reluValue(float(x)) : float(x);
  }
  /// A share `g` of dy as it reaches input x: masked as relu_backward would with kRelu.
  template <bool kRelu>
  static float share(float g, T x) {
    return kRelu ? reluBackwardValue(g, float(x)) : g;
  }

  template <bool kRelu>
  void avgForward(const T* x, T* y) const {
    if (g_.is2x2()) {
      for (int64_t i = 0; i < g_.oh; ++i) {
        const T* r0 = x + 2 * i * g_.w;
        const T* r1 = r0 + g_.w;
        for (int64_t j = 0; j < g_.ow; ++j)
          y[i * g_.ow + j] = ((pooled<kRelu>(r0[2 * j]) + pooled<kRelu>(r0[2 * j + 1])) +
                              (pooled<kRelu>(r1[2 * j]) + pooled<kRelu>(r1[2 * j + 1]))) *
                             0.25f;
      }
      return;
    }
    for (int64_t i = 0; i < g_.oh; ++i)
      for (int64_t j = 0; j < g_.ow; ++j) {
        float sum = 0;
        for (int64_t r = rows_.begin[i]; r < rows_.end[i]; ++r)
          for (int64_t c = cols_.begin[j]; c < cols_.end[j]; ++c)
            sum += pooled<kRelu>(x[r * g_.w + c]);
        y[i * g_.ow + j] = sum * Ranges::scale(rows_, cols_, i, j);
      }
  }

  /// `x` is read only with kRelu (the mask); without, it gives only the shape.
  template <bool kRelu>
  void avgBackward(const T* dy, const T* x, T* dx) {
    if (g_.is2x2()) {
      for (int64_t i = 0; i < g_.oh; ++i) {
        T* r0 = dx + 2 * i * g_.w;
        T* r1 = r0 + g_.w;
        const T* x0 = x + 2 * i * g_.w;
        const T* x1 = x0 + g_.w;
        for (int64_t j = 0; j < g_.ow; ++j) {
          float v = dy[i * g_.ow + j] * 0.25f;
          r0[2 * j] = share<kRelu>(v, x0[2 * j]);
          r0[2 * j + 1] = share<kRelu>(v, x0[2 * j + 1]);
          r1[2 * j] = share<kRelu>(v, x1[2 * j]);
          r1[2 * j + 1] = share<kRelu>(v, x1[2 * j + 1]);
        }
        if (g_.w % 2 == 1) r0[g_.w - 1] = r1[g_.w - 1] = 0;  // past the last window
      }
      if (g_.h % 2 == 1) std::fill(dx + (g_.h - 1) * g_.w, dx + g_.h * g_.w, 0.0f);
      return;
    }
    float* acc = accumulator(dx);
    for (int64_t i = 0; i < g_.oh; ++i)
      for (int64_t j = 0; j < g_.ow; ++j) {
        float v = dy[i * g_.ow + j] * Ranges::scale(rows_, cols_, i, j);
        for (int64_t r = rows_.begin[i]; r < rows_.end[i]; ++r)
          for (int64_t c = cols_.begin[j]; c < cols_.end[j]; ++c) acc[r * g_.w + c] += v;
      }
    // The mask after the sums: a select, so masking before rounding to T is the same.
    if constexpr (kRelu)
      for (int64_t e = 0; e < g_.inPlane(); ++e) acc[e] = share<true>(acc[e], x[e]);
    store(acc, dx);
  }

  /// Where overlapping windows add up their gradients: dx itself (zeroed) for f32; for
  /// bf16 a float plane, stored rounded once by store(), since adding in bf16 would round
  /// every contribution.
  float* accumulator(T* dx) {
    float* acc;
    if constexpr (std::is_same_v<T, float>)
      acc = dx;
    else
      acc = plane_.data();
    std::fill(acc, acc + g_.inPlane(), 0.0f);
    return acc;
  }
  void store(const float* acc, T* dx) const {
    if constexpr (!std::is_same_v<T, float>) std::copy(acc, acc + g_.inPlane(), dx);
  }

  /// Index (in the plane) of the first maximum of window (i, j); NaN counts as the
  /// largest. Plain compares, no selects: the rare-path reference for NaN windows.
  int64_t argMaxWithNan(const T* x, int64_t i, int64_t j) const {
    int64_t best = rows_.begin[i] * g_.w + cols_.begin[j];
    for (int64_t r = rows_.begin[i]; r < rows_.end[i]; ++r)
      for (int64_t c = cols_.begin[j]; c < cols_.end[j]; ++c)
        if (takesMax(x[r * g_.w + c], x[best])) best = r * g_.w + c;
    return best;
  }

  /// The same, written with selects rather than branches (random data makes "is this
  /// the new maximum" unpredictable); windows holding a NaN go to argMaxWithNan.
  int64_t argMax(const T* x, int64_t i, int64_t j) const {
    float best_v = -std::numeric_limits<float>::infinity();
    int64_t best = rows_.begin[i] * g_.w + cols_.begin[j];
    bool nan = false;
    for (int64_t r = rows_.begin[i]; r < rows_.end[i]; ++r)
      for (int64_t c = cols_.begin[j]; c < cols_.end[j]; ++c) {
        float v = x[r * g_.w + c];
        nan |= std::isnan(v);
        bool take = v > best_v;
        best_v = take ? v : best_v;
        best = take ? r * g_.w + c : best;
      }
    return nan ? argMaxWithNan(x, i, j) : best;
  }

  void maxForward(const T* x, T* y) const {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    if (g_.is2x2()) {
      for (int64_t i = 0; i < g_.oh; ++i) {
        const T* r0 = x + 2 * i * g_.w;
        const T* r1 = r0 + g_.w;
        for (int64_t j = 0; j < g_.ow; ++j) {
          float a = r0[2 * j], b = r0[2 * j + 1], c = r1[2 * j], d = r1[2 * j + 1];
          float m = std::max(std::max(a, b), std::max(c, d));
          y[i * g_.ow + j] = anyNan(a, b, c, d) ? nan : m;
        }
      }
      return;
    }
    for (int64_t i = 0; i < g_.oh; ++i)
      for (int64_t j = 0; j < g_.ow; ++j) {
        float m = -std::numeric_limits<float>::infinity();
        bool has_nan = false;
        for (int64_t r = rows_.begin[i]; r < rows_.end[i]; ++r)
          for (int64_t c = cols_.begin[j]; c < cols_.end[j]; ++c) {
            float v = x[r * g_.w + c];
            has_nan |= std::isnan(v);
            m = std::max(m, v);
          }
        y[i * g_.ow + j] = has_nan ? nan : m;
      }
  }

  void maxBackward(const T* dy, const T* x, T* dx) {
    if (g_.is2x2()) {
      for (int64_t i = 0; i < g_.oh; ++i) {
        const T* r0 = x + 2 * i * g_.w;
        const T* r1 = r0 + g_.w;
        T* d0 = dx + 2 * i * g_.w;
        T* d1 = d0 + g_.w;
        // Branch-free over the row (random data makes every compare unpredictable); a
        // row with a NaN is redone with the NaN-aware search.
        bool row_nan = false;
        for (int64_t j = 0; j < g_.ow; ++j) {
          float a = r0[2 * j], b = r0[2 * j + 1], c = r1[2 * j], d = r1[2 * j + 1];
          row_nan |= anyNan(a, b, c, d);
          // First maximum of (a, b), of (c, d), then of the two: ties keep the earlier.
          bool ab = b > a, cd = d > c;
          float m1 = ab ? b : a, m2 = cd ? d : c;
          bool second = m2 > m1;
          float g = dy[i * g_.ow + j];
          d0[2 * j] = keepIf(!second && !ab, g);
          d0[2 * j + 1] = keepIf(!second && ab, g);
          d1[2 * j] = keepIf(second && !cd, g);
          d1[2 * j + 1] = keepIf(second && cd, g);
        }
        if (row_nan) {
          for (int64_t j = 0; j < g_.ow; ++j) {
            d0[2 * j] = d0[2 * j + 1] = d1[2 * j] = d1[2 * j + 1] = 0;
            dx[argMaxWithNan(x, i, j)] = dy[i * g_.ow + j];
          }
        }
        if (g_.w % 2 == 1) d0[g_.w - 1] = d1[g_.w - 1] = 0;  // past the last window
      }
      if (g_.h % 2 == 1) std::fill(dx + (g_.h - 1) * g_.w, dx + g_.h * g_.w, 0.0f);
      return;
    }
    float* acc = accumulator(dx);
    for (int64_t i = 0; i < g_.oh; ++i)
      for (int64_t j = 0; j < g_.ow; ++j) acc[argMax(x, i, j)] += dy[i * g_.ow + j];
    store(acc, dx);
  }

  PoolKind kind_;
  bool backward_;
  bool relu_;  // average pooling of relu(x) (fuse-relu-pool)
  PoolGeometry g_;
  Ranges rows_, cols_;
  std::vector<float> plane_ = std::vector<float>(std::is_same_v<T, float> ? 0 : g_.inPlane());
};

/// Mean over each H x W plane, and its backward (dy / HW everywhere).
template <typename T>
class GlobalAvgPoolKernel final : public CpuKernel {
 public:
  GlobalAvgPoolKernel(bool backward, int64_t planes, int64_t hw)
      : backward_(backward), planes_(planes), hw_(hw) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const float scale = 1.0f / static_cast<float>(hw_);
    if (backward_) {
      const T* dy = in[0].as<T>();
      T* dx = out[0].as<T>();
      for (int64_t p = 0; p < planes_; ++p)
        std::fill(dx + p * hw_, dx + (p + 1) * hw_, T(dy[p] * scale));
      return;
    }
    const T* x = in[0].as<T>();
    T* y = out[0].as<T>();
    for (int64_t p = 0; p < planes_; ++p) {
      float sum = 0;
      for (int64_t i = 0; i < hw_; ++i) sum += x[p * hw_ + i];
      y[p] = sum * scale;
    }
  }

 private:
  bool backward_;
  int64_t planes_, hw_;
};

/// (forward: x -> y; backward: dy, x -> dx).
KernelOr makeWindowPool(const KernelInit& init, PoolKind kind, bool backward) {
  const ir::Node& n = init.node;
  const ir::TensorType& x = n.operand(backward ? 1 : 0)->type();
  const ir::TensorType& y = backward ? n.operand(0)->type() : n.result()->type();
  PoolGeometry g(x, y, ir::attr::kernel(n), ir::attr::stride(n), ir::attr::pad(n));
  const bool relu = kind == PoolKind::kAvg && ir::attr::relu(n);
  return withFloatType(x.dtype, [&](auto t) -> KernelOr {
    return std::make_unique<WindowPoolKernel<decltype(t)>>(kind, backward, g, relu);
  });
}

KernelOr makeGlobalPool(const KernelInit& init, bool backward) {
  const ir::Node& n = init.node;
  const ir::TensorType& x = n.operand(backward ? 1 : 0)->type();
  return withFloatType(x.dtype, [&](auto t) -> KernelOr {
    return std::make_unique<GlobalAvgPoolKernel<decltype(t)>>(backward, x.shape[0] * x.shape[1],
                                                              x.shape[2] * x.shape[3]);
  });
}

}  // namespace

KernelOr makeMaxPool2dKernel(const KernelInit& init) {
  return makeWindowPool(init, PoolKind::kMax, /*backward=*/false);
}
KernelOr makeMaxPool2dBackwardKernel(const KernelInit& init) {
  return makeWindowPool(init, PoolKind::kMax, /*backward=*/true);
}
KernelOr makeAvgPool2dKernel(const KernelInit& init) {
  return makeWindowPool(init, PoolKind::kAvg, /*backward=*/false);
}
KernelOr makeAvgPool2dBackwardKernel(const KernelInit& init) {
  return makeWindowPool(init, PoolKind::kAvg, /*backward=*/true);
}
KernelOr makeGlobalAvgPoolKernel(const KernelInit& init) {
  return makeGlobalPool(init, /*backward=*/false);
}
KernelOr makeGlobalAvgPoolBackwardKernel(const KernelInit& init) {
  return makeGlobalPool(init, /*backward=*/true);
}

}  // namespace tandem::backend::cpu

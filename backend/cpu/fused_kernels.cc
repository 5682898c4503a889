// Kernels of the fused convolution / batch norm / relu ops (ir/ops/fused_ops.cc).
//
// The convolutions are the conv2d kernel itself (oneDNN, the same strategies); what the
// fusion changes is everything around them, which runs as loops over each channel's
// values, in plain NCHW or, where the device keeps the activations channel-blocked
// between kernels (layout_plan.h), in nChw16c, 16 channels at once:
//  - conv2d_stats: after the convolution, one pass over its output for the statistics
//    (unfused: batch_norm reads it twice more);
//  - batch_norm_apply: normalize, scale, shift, residual, relu in one pass (unfused:
//    batch_norm, add and relu write three tensors);
//  - backward: one pass for the sums and one for dy, with relu's mask taken from the
//    output (unfused: relu_backward writes dz, batch_norm_backward reads it twice).
// oneDNN 2.6 has no convolution that also gives batch statistics, and its batch norm on
// plain NCHW is the slow reference code (see norm_kernels.cc), hence the loops.
//
// Statistics and backward sums are computed exactly as batch_norm and batch_norm_backward
// compute them (norm_kernels.cc: the mean, then squared deviations from it, float over a
// plane with 8 accumulators, double across planes; plane_sums.h), in both layouts, so
// fused and unfused training agree to the last bit or so rather than to a
// rounding-sensitive 1e-6. They travel as f64: additive, so all_reduce can combine
// devices without the rounding of f32 partial sums (sync batch norm), and the sum of
// squares stored is m * var + m * mean^2 (var from the two passes), from which the apply
// step recovers var without cancellation.
//
// The activations (y, out, dout, residual, dy, dz) are f32 or bf16 (mixed precision): the
// kernels are templates on their element type T, reading each value into a float and
// storing rounded; the per-channel operands stay f32 and the arithmetic float and double,
// so for f32 nothing changes. With bf16 the statistics and sums still equal the unfused
// ones, but batch_norm_apply rounds its output once where batch_norm, add and relu each
// round to bf16: fused and unfused outputs then agree to bf16 rounding, not bit for bit.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/bf16.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/layout_plan.h"
#include "backend/cpu/plane_sums.h"
#include "backend/cpu/vector_loops.h"
#include "ir/op_views.h"

namespace tandem::backend::cpu {
namespace {

/// N, C and H*W of an [N,C,H,W] tensor, and where plane (n, c) starts.
struct Planes {
  int64_t n, c, hw;
  explicit Planes(const ir::TensorType& t)
      : n(t.shape[0]), c(t.shape[1]), hw(t.shape[2] * t.shape[3]) {}
  int64_t at(int64_t img, int64_t ch) const { return (img * c + ch) * hw; }
};

/// Mean and biased variance of channel `ch` from a statistics tensor f64[3, C] (count,
/// sum, sum of squares).
struct ChannelStats {
  double count, mean, var;
};
ChannelStats readStats(const double* stats, int64_t channels, int64_t ch) {
  const double count = stats[ch], sum = stats[channels + ch], sumsq = stats[2 * channels + ch];
  const double mean = count > 0 ? sum / count : 0;
  const double var = count > 0 ? nonNegative(sumsq / count - mean * mean) : 0;
  return {count, mean, var};
}

/// Raised inside compute() when an inner kernel fails; CpuKernel::runHere turns it into
/// the status of the node.
class InnerKernelFailure : public std::runtime_error {
 public:
  explicit InnerKernelFailure(const absl::Status& s) : std::runtime_error(std::string(s.message())) {}
};

void runInner(CpuKernel& k, absl::Span<const TensorView> in, absl::Span<const TensorView> out) {
  if (absl::Status s = k.runHere(in, out); !s.ok()) throw InnerKernelFailure(s);
}

/// f(std::bool_constant<flags>{}...): the runtime flags as compile-time ones.
template <typename F>
KernelOr withFlags(F f) {
  return f();
}
template <typename F, typename... Flags>
KernelOr withFlags(F f, bool flag, Flags... rest) {
  auto bind = [&f](auto c) { return [&f, c](auto... cs) { return f(c, cs...); }; };
  return flag ? withFlags(bind(std::true_type{}), rest...)
              : withFlags(bind(std::false_type{}), rest...);
}

/// f(T{}, std::bool_constant<flags>{}...) with T the element type of `dtype` (float or
/// bf16): a factory's way to pick the instance of a kernel template, e.g.
///   instantiate(dtype, [&](auto t, auto relu) -> KernelOr {
///     return std::make_unique<K<decltype(t), relu>>(...); }, relu);
template <typename F, typename... Flags>
KernelOr instantiate(ir::DType dtype, F f, Flags... flags) {
  return withFloatType(dtype, [&](auto t) {
    return withFlags([&](auto... cs) { return f(t, cs...); }, flags...);
  });
}

/// An [N,C,H,W] tensor in nChw16c (layout_plan.h): per image, C/16 blocks of H*W pixels
/// of 16 consecutive channels. The blocked loops below run over a block's 16 channels at
/// once (one AVX-512 register), accumulating in float over a plane and in double across
/// images, as the plain loops do per channel.
struct Blocks {
  static constexpr int64_t kB = kChannelBlock;
  int64_t n, cb, hw;
  explicit Blocks(const ir::TensorType& t)
      : n(t.shape[0]), cb(t.shape[1] / kB), hw(t.shape[2] * t.shape[3]) {}
  int64_t at(int64_t img, int64_t b) const { return (img * cb + b) * hw * kB; }
};
constexpr int64_t kB = Blocks::kB;

/// Statistics f64[3,C] of y: count, sum, and m * var + m * mean^2 with var from squared
/// deviations from the rounded mean (two passes, as batch_norm computes them).
void writeStats(double* stats, int64_t channels, int64_t ch, const ChannelMoments& c) {
  const double mean = c.mean(), var = c.var();
  stats[ch] = c.m;
  stats[channels + ch] = c.sum;
  stats[2 * channels + ch] = c.m * var + c.m * mean * mean;
}

template <typename T>
TANDEM_VECTOR_LOOPS void planeStats(const T* y, const Planes& p, double* stats) {
  for (int64_t ch = 0; ch < p.c; ++ch)
    writeStats(stats, p.c, ch,
               planeMoments(p.n, p.hw, [&](int64_t img) { return y + p.at(img, ch); }));
}

template <typename T>
TANDEM_VECTOR_LOOPS void blockedStats(const T* y, const Blocks& q, int64_t channels,
                                      double* stats) {
  const double m = double(q.n * q.hw);
  for (int64_t b = 0; b < q.cb; ++b) {
    double sum[kB] = {}, sq[kB] = {};
    float part[1][kB];
    for (int64_t img = 0; img < q.n; ++img) {
      blockPlaneSums<kB, 1>(q.at(img, b), q.hw, [y](int64_t at, int64_t, float* v) { v[0] = y[at]; },
                            part);
      for (int64_t l = 0; l < kB; ++l) sum[l] += part[0][l];
    }
    float fmean[kB];
    for (int64_t l = 0; l < kB; ++l) fmean[l] = static_cast<float>(sum[l] / m);
    for (int64_t img = 0; img < q.n; ++img) {
      blockPlaneSums<kB, 1>(
          q.at(img, b), q.hw,
          [y, &fmean](int64_t at, int64_t l, float* v) {
            const float yv = y[at];
            const float d = yv - fmean[l];
            v[0] = d * d;
          },
          part);
      for (int64_t l = 0; l < kB; ++l) sq[l] += part[0][l];
    }
    for (int64_t l = 0; l < kB; ++l)
      writeStats(stats, channels, b * kB + l, {m, sum[l], sq[l], fmean[l]});
  }
}

// in: x, w, b?; out: y, stats f64[3,C].
template <typename T>
class Conv2dStatsKernel final : public CpuKernel {
 public:
  Conv2dStatsKernel(std::unique_ptr<CpuKernel> conv, const ir::TensorType& y, bool blocked)
      : conv_(std::move(conv)), p_(y), q_(y), blocked_(blocked) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    runInner(*conv_, in, out.subspan(0, 1));
    double* stats = static_cast<double*>(out[1].data);
    if (blocked_)
      blockedStats(out[0].as<T>(), q_, p_.c, stats);
    else
      planeStats(out[0].as<T>(), p_, stats);
  }

 private:
  std::unique_ptr<CpuKernel> conv_;
  Planes p_;
  Blocks q_;
  bool blocked_;
};

/// Scale and shift of one channel from its statistics, rounded as batch_norm rounds them.
struct Affine {
  float scale, shift;
  double invstd;
};
Affine channelAffine(const ChannelStats& st, float gamma, float beta, double eps) {
  const double invstd = 1.0 / std::sqrt(st.var + eps);
  const double dscale = gamma * invstd;
  return {static_cast<float>(dscale), static_cast<float>(beta - st.mean * dscale), invstd};
}

/// out = relu?(y * scale + shift + residual?), per channel (`scale`, `shift` have C
/// entries), in either layout. batch_norm_apply and batch_norm_recompute share it, so a
/// recomputed output equals the forward one bit for bit.
template <typename T, bool kRelu, bool kResidual>
TANDEM_VECTOR_LOOPS void normalize(const Planes& p, const Blocks& q, bool blocked,
                                   const float* scale, const float* shift, const T* y,
                                   const T* res, T* o) {
  // Rounded step by step as batch_norm, add and relu round them apart (in f32; a bf16
  // output is rounded once, at the store). The coefficients are copied to locals first:
  // `o` could alias the arrays as far as the compiler knows, and reloading them after
  // every store would keep the loops from vectorizing. (No __restrict on `o` here: GCC
  // then picks a slower bf16 loop, 490 against 300 us per run on ResNet-18.)
  auto one = [&](int64_t at, float sc, float sh) {
    const float x = y[at];
    float v = x * sc + sh;
    if constexpr (kResidual) {
      const float r = res[at];
      v = v + r;
    }
    if constexpr (kRelu) v = std::max(v, 0.0f);  // PyTorch's relu: NaN and -0 pass
    o[at] = v;
  };
  if (blocked) {
    for (int64_t img = 0; img < q.n; ++img)
      for (int64_t b = 0; b < q.cb; ++b) {
        float sc[kB], sh[kB];
        std::copy_n(scale + b * kB, kB, sc);
        std::copy_n(shift + b * kB, kB, sh);
        for (int64_t i = 0, at = q.at(img, b); i < q.hw; ++i, at += kB)
          for (int64_t l = 0; l < kB; ++l) one(at + l, sc[l], sh[l]);
      }
    return;
  }
  for (int64_t img = 0; img < p.n; ++img)
    for (int64_t ch = 0; ch < p.c; ++ch) {
      const int64_t at = p.at(img, ch);
      const float sc = scale[ch], sh = shift[ch];
      for (int64_t i = 0; i < p.hw; ++i) one(at + i, sc, sh);
    }
}

// in: y, stats, gamma, beta, running_mean, running_var, residual?; out: out, save_mean,
// save_invstd. Conventions as batch_norm's (norm_kernels.cc): biased variance to
// normalize, unbiased into running_var.
template <typename T, bool kRelu, bool kResidual>
class BatchNormApplyKernel final : public CpuKernel {
 public:
  BatchNormApplyKernel(const ir::TensorType& y, bool blocked, double eps, double momentum)
      : p_(y), q_(y), blocked_(blocked), eps_(eps), momentum_(momentum),
        scale_(p_.c), shift_(p_.c) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const float *gamma = in[2].f32(), *beta = in[3].f32();
    const double* stats = static_cast<const double*>(in[1].data);
    float *running_mean = in[4].f32(), *running_var = in[5].f32();
    float *save_mean = out[1].f32(), *save_invstd = out[2].f32();
    for (int64_t ch = 0; ch < p_.c; ++ch) {
      const ChannelStats st = readStats(stats, p_.c, ch);
      const Affine a = channelAffine(st, gamma[ch], beta[ch], eps_);
      scale_[ch] = a.scale;
      shift_[ch] = a.shift;
      save_mean[ch] = static_cast<float>(st.mean);
      save_invstd[ch] = static_cast<float>(a.invstd);
      // One value per channel has no unbiased variance; keep the biased one then.
      const double unbias = st.count > 1 ? st.count / (st.count - 1) : 1.0;
      running_mean[ch] =
          static_cast<float>((1 - momentum_) * running_mean[ch] + momentum_ * st.mean);
      running_var[ch] =
          static_cast<float>((1 - momentum_) * running_var[ch] + momentum_ * unbias * st.var);
    }
    normalize<T, kRelu, kResidual>(p_, q_, blocked_, scale_.data(), shift_.data(), in[0].as<T>(),
                                   kResidual ? in[6].as<T>() : nullptr, out[0].as<T>());
  }

 private:
  Planes p_;
  Blocks q_;
  bool blocked_;
  double eps_, momentum_;
  std::vector<float> scale_, shift_;
};

// in: y, stats, gamma, beta; out: out (batch_norm_apply's, the running statistics left
// alone).
template <typename T, bool kRelu>
class BatchNormRecomputeKernel final : public CpuKernel {
 public:
  BatchNormRecomputeKernel(const ir::TensorType& y, bool blocked, double eps)
      : p_(y), q_(y), blocked_(blocked), eps_(eps), scale_(p_.c), shift_(p_.c) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const double* stats = static_cast<const double*>(in[1].data);
    const float *gamma = in[2].f32(), *beta = in[3].f32();
    for (int64_t ch = 0; ch < p_.c; ++ch) {
      const Affine a = channelAffine(readStats(stats, p_.c, ch), gamma[ch], beta[ch], eps_);
      scale_[ch] = a.scale;
      shift_[ch] = a.shift;
    }
    normalize<T, kRelu, false>(p_, q_, blocked_, scale_.data(), shift_.data(), in[0].as<T>(),
                               nullptr, out[0].as<T>());
  }

 private:
  Planes p_;
  Blocks q_;
  bool blocked_;
  double eps_;
  std::vector<float> scale_, shift_;
};

/// Batch norm's backward sums per channel, sums[ch] = sum(dz) and sums[C + ch] =
/// sum(dz * (y - mean)) (batch_norm_backward's form), in either layout.
template <typename T, bool kRelu>
TANDEM_VECTOR_LOOPS void backwardSums(const Planes& p, const Blocks& q, bool blocked,
                                      const T* dout, const T* y, const T* relu_out,
                                      const float* mean, double* sums) {
  if (blocked) {
    for (int64_t b = 0; b < q.cb; ++b) {
      double sa[kB] = {}, sb[kB] = {};
      float mu[kB];
      std::copy_n(mean + b * kB, kB, mu);
      float part[2][kB];
      for (int64_t img = 0; img < q.n; ++img) {
        blockPlaneSums<kB, 2>(
            q.at(img, b), q.hw,
            [&](int64_t at, int64_t l, float* v) {
              const float dz = maskedGrad<kRelu>(dout, relu_out, at), yv = y[at];
              v[0] = dz;
              v[1] = dz * (yv - mu[l]);
            },
            part);
        for (int64_t l = 0; l < kB; ++l) sa[l] += part[0][l], sb[l] += part[1][l];
      }
      for (int64_t l = 0; l < kB; ++l) sums[b * kB + l] = sa[l], sums[p.c + b * kB + l] = sb[l];
    }
  } else {
    for (int64_t ch = 0; ch < p.c; ++ch) {
      double sum_dz = 0, sum_dz_yc = 0;
      for (int64_t img = 0; img < p.n; ++img) {
        const int64_t at = p.at(img, ch);
        float sa, sb;
        planeGradSums<kRelu>(dout + at, y + at, kRelu ? relu_out + at : nullptr, p.hw,
                             mean[ch], &sa, &sb);
        sum_dz += sa;
        sum_dz_yc += sb;
      }
      sums[ch] = sum_dz;
      sums[p.c + ch] = sum_dz_yc;
    }
  }
}

// in: dout, y, save_mean, save_invstd, out?; out: sums f64[2,C], dbeta, dgamma.
template <typename T, bool kRelu>
class BatchNormBackwardReduceKernel final : public CpuKernel {
 public:
  BatchNormBackwardReduceKernel(const ir::TensorType& y, bool blocked)
      : p_(y), q_(y), blocked_(blocked) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const T *dout = in[0].as<T>(), *y = in[1].as<T>();
    const float *mean = in[2].f32(), *invstd = in[3].f32();
    const T* relu_out = kRelu ? in[4].as<T>() : nullptr;
    double* sums = static_cast<double*>(out[0].data);
    float *dbeta = out[1].f32(), *dgamma = out[2].f32();
    backwardSums<T, kRelu>(p_, q_, blocked_, dout, y, relu_out, mean, sums);
    for (int64_t ch = 0; ch < p_.c; ++ch) {
      dbeta[ch] = static_cast<float>(sums[ch]);
      dgamma[ch] = static_cast<float>(sums[p_.c + ch] * invstd[ch]);
    }
  }

 private:
  Planes p_;
  Blocks q_;
  bool blocked_;
};

/// dy = a * dz + b * (y - mean) + c per channel (dz: dout, masked by relu's output when
/// kRelu; also written to dz_out when kResidual), in either layout.
template <typename T, bool kRelu, bool kResidual>
TANDEM_VECTOR_LOOPS void backwardApply(const Planes& p, const Blocks& q, bool blocked,
                                       const float* fa, const float* fb, const float* fc,
                                       const float* mean, const T* dout, const T* y,
                                       const T* relu_out, T* __restrict dy,
                                       T* __restrict dz_out) {
  // Coefficients in locals, as in normalize(). The outputs never alias the inputs
  // (plan-memory frees an operand only after its last reader, so a node's results never
  // share its operands' bytes): __restrict spares the loops GCC's run-time overlap
  // checks, which made the bf16 loops 2.7x slower (1208 against 453 us per run).
  auto one = [&](int64_t at, float a, float b, float c, float mu) {
    const float dz = maskedGrad<kRelu>(dout, relu_out, at), yv = y[at];
    dy[at] = a * dz + b * (yv - mu) + c;
    if constexpr (kResidual) dz_out[at] = dz;
  };
  if (blocked) {
    for (int64_t img = 0; img < q.n; ++img)
      for (int64_t blk = 0; blk < q.cb; ++blk) {
        float a[kB], b[kB], c[kB], mu[kB];
        std::copy_n(fa + blk * kB, kB, a);
        std::copy_n(fb + blk * kB, kB, b);
        std::copy_n(fc + blk * kB, kB, c);
        std::copy_n(mean + blk * kB, kB, mu);
        for (int64_t i = 0, at = q.at(img, blk); i < q.hw; ++i, at += kB)
          for (int64_t l = 0; l < kB; ++l) one(at + l, a[l], b[l], c[l], mu[l]);
      }
    return;
  }
  for (int64_t img = 0; img < p.n; ++img)
    for (int64_t ch = 0; ch < p.c; ++ch) {
      const float a = fa[ch], b = fb[ch], c = fc[ch], mu = mean[ch];
      for (int64_t i = 0, at = p.at(img, ch); i < p.hw; ++i) one(at + i, a, b, c, mu);
    }
}

// in: dout, y, gamma, save_mean, save_invstd, sums, stats, out?; out: dy (, dz).
template <typename T, bool kRelu, bool kResidual>
class BatchNormBackwardApplyKernel final : public CpuKernel {
 public:
  BatchNormBackwardApplyKernel(const ir::TensorType& y, bool blocked)
      : p_(y), q_(y), blocked_(blocked), fa_(p_.c), fb_(p_.c), fc_(p_.c) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const T *dout = in[0].as<T>(), *y = in[1].as<T>();
    const float *gamma = in[2].f32(), *mean = in[3].f32(), *invstd = in[4].f32();
    const double* sums = static_cast<const double*>(in[5].data);
    const double* stats = static_cast<const double*>(in[6].data);
    const T* relu_out = kRelu ? in[7].as<T>() : nullptr;
    T* dy = out[0].as<T>();
    T* dz_out = kResidual ? out[1].as<T>() : nullptr;
    for (int64_t ch = 0; ch < p_.c; ++ch) {
      const BackwardCoefficients k = backwardCoefficients(
          readStats(stats, p_.c, ch).count, sums[ch], sums[p_.c + ch], gamma[ch], invstd[ch]);
      fa_[ch] = k.a;
      fb_[ch] = k.b;
      fc_[ch] = k.c;
    }
    backwardApply<T, kRelu, kResidual>(p_, q_, blocked_, fa_.data(), fb_.data(), fc_.data(),
                                       mean, dout, y, relu_out, dy, dz_out);
  }

 private:
  Planes p_;
  Blocks q_;
  bool blocked_;
  std::vector<float> fa_, fb_, fc_;
};

// in: w, b?, gamma, beta, running_mean, running_var; out: w', b'.
class FoldBatchNormKernel final : public CpuKernel {
 public:
  FoldBatchNormKernel(int64_t out_channels, int64_t per_channel, bool bias, double eps)
      : k_(out_channels), per_(per_channel), bias_(bias), eps_(eps) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const size_t g = bias_ ? 2 : 1;  // where gamma is
    const float *w = in[0].f32(), *b = bias_ ? in[1].f32() : nullptr;
    const float *gamma = in[g].f32(), *beta = in[g + 1].f32();
    const float *mean = in[g + 2].f32(), *var = in[g + 3].f32();
    float *wf = out[0].f32(), *bf = out[1].f32();
    for (int64_t o = 0; o < k_; ++o) {
      const double scale = gamma[o] / std::sqrt(double(var[o]) + eps_);
      const float fs = static_cast<float>(scale);
      for (int64_t i = 0; i < per_; ++i) wf[o * per_ + i] = w[o * per_ + i] * fs;
      bf[o] = static_cast<float>(((b ? b[o] : 0.0) - mean[o]) * scale + beta[o]);
    }
  }

 private:
  int64_t k_, per_;
  bool bias_;
  double eps_;
};

// in: x, w, b, residual?; out: y. The convolution with its bias, then the residual and
// relu in one pass over its output. Not oneDNN post-ops: the sum post-op wants the
// residual already in the destination, in the primitive's layout, and the blocked and
// Winograd strategies write to a reordered temporary first, so putting it there costs the
// same pass over memory as this loop (which the eval step alone runs).
template <typename T, bool kRelu, bool kResidual>
class Conv2dBiasActKernel final : public CpuKernel {
 public:
  Conv2dBiasActKernel(std::unique_ptr<CpuKernel> conv, int64_t size)
      : conv_(std::move(conv)), size_(size) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    runInner(*conv_, in.subspan(0, 3), out);
    if constexpr (kRelu || kResidual) {
      T* y = out[0].as<T>();
      const T* r = kResidual ? in[3].as<T>() : nullptr;
      for (int64_t i = 0; i < size_; ++i) {
        float v = y[i];
        if constexpr (kResidual) {
          const float ri = r[i];
          v = v + ri;
        }
        if constexpr (kRelu) v = std::max(v, 0.0f);
        y[i] = v;
      }
    }
  }

 private:
  std::unique_ptr<CpuKernel> conv_;
  int64_t size_;
};

}  // namespace

KernelOr makeConv2dStatsKernel(const KernelInit& init) {
  // The conv2d kernel reads only x, w, b?, stride, pad and result 0 (and their layouts):
  // it serves as is.
  KernelOr conv = makeConv2dKernel(init);
  if (!conv.ok()) return conv.status();
  const ir::Value* y = init.node.result(0);
  return instantiate(y->type().dtype, [&](auto t) -> KernelOr {
    return std::make_unique<Conv2dStatsKernel<decltype(t)>>(*std::move(conv), y->type(),
                                                            init.isBlocked(y));
  });
}

KernelOr makeBatchNormApplyKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  const ir::TensorType& y = n.operand(0)->type();
  const bool blocked = init.isBlocked(n.operand(0));
  const double eps = ir::attr::eps(n), momentum = ir::attr::momentum(n);
  return instantiate(
      y.dtype,
      [&](auto t, auto relu, auto residual) -> KernelOr {
        return std::make_unique<BatchNormApplyKernel<decltype(t), relu, residual>>(
            y, blocked, eps, momentum);
      },
      ir::attr::relu(n), n.numOperands() > 6);
}

KernelOr makeBatchNormRecomputeKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  const ir::TensorType& y = n.operand(0)->type();
  const bool blocked = init.isBlocked(n.operand(0));
  const double eps = ir::attr::eps(n);
  return instantiate(
      y.dtype,
      [&](auto t, auto relu) -> KernelOr {
        return std::make_unique<BatchNormRecomputeKernel<decltype(t), relu>>(y, blocked, eps);
      },
      ir::attr::relu(n));
}

KernelOr makeBatchNormBackwardReduceKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  const ir::TensorType& y = n.operand(1)->type();
  const bool blocked = init.isBlocked(n.operand(1));
  return instantiate(
      y.dtype,
      [&](auto t, auto relu) -> KernelOr {
        return std::make_unique<BatchNormBackwardReduceKernel<decltype(t), relu>>(y, blocked);
      },
      n.numOperands() > 4);
}

KernelOr makeBatchNormBackwardApplyKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  const ir::TensorType& y = n.operand(1)->type();
  const bool blocked = init.isBlocked(n.operand(1));
  return instantiate(
      y.dtype,
      [&](auto t, auto relu, auto residual) -> KernelOr {
        return std::make_unique<BatchNormBackwardApplyKernel<decltype(t), relu, residual>>(
            y, blocked);
      },
      n.numOperands() > 7, ir::attr::residual(n));
}

// Folds into f32 master weights (fold_batch_norm's operands are all f32).
KernelOr makeFoldBatchNormKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  const ir::TensorType& w = n.operand(0)->type();
  return std::make_unique<FoldBatchNormKernel>(w.shape[0], w.numElements() / w.shape[0],
                                               n.numOperands() == 6, ir::attr::eps(n));
}

KernelOr makeConv2dBiasActKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  KernelOr conv = makeConv2dKernel(init);  // reads x, w, b, stride, pad and the result
  if (!conv.ok()) return conv.status();
  const ir::TensorType& y = n.result()->type();
  return instantiate(
      y.dtype,
      [&](auto t, auto relu, auto residual) -> KernelOr {
        return std::make_unique<Conv2dBiasActKernel<decltype(t), relu, residual>>(
            *std::move(conv), y.numElements());
      },
      ir::attr::relu(n), n.numOperands() > 3);
}

}  // namespace tandem::backend::cpu

// Kernels of the fused convolution / batch norm / relu ops (ir/ops/fused_ops.cc).
//
// The convolutions are the conv2d kernel itself (oneDNN, the same strategies); what the
// fusion changes is everything around them, which runs as loops over one channel's N
// planes of H*W contiguous values (plain NCHW, as between all kernels):
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
// plane with 8 accumulators, double across planes), so fused and unfused training agree
// to the last bit or so rather than to a rounding-sensitive 1e-6. They travel as f64:
// additive, so all_reduce can combine devices without the rounding of f32 partial sums
// (sync batch norm), and the sum of squares stored is m * var + m * mean^2 (var from the
// two passes), from which the apply step recovers var without cancellation.

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>

#include "absl/strings/str_cat.h"
#include "backend/cpu/dnnl_util.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/plane_sums.h"

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
  const double var = count > 0 ? std::max(0.0, sumsq / count - mean * mean) : 0;
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

// in: x, w, b?; out: y, stats f64[3,C].
class Conv2dStatsKernel final : public CpuKernel {
 public:
  Conv2dStatsKernel(std::unique_ptr<CpuKernel> conv, Planes p) : conv_(std::move(conv)), p_(p) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    runInner(*conv_, in, out.subspan(0, 1));
    const float* y = out[0].f32();
    double* stats = static_cast<double*>(out[1].data);
    const double m = double(p_.n * p_.hw);
    for (int64_t ch = 0; ch < p_.c; ++ch) {
      double sum = 0;
      for (int64_t img = 0; img < p_.n; ++img) {
        const float* yp = y + p_.at(img, ch);
        sum += planeSum(yp, p_.hw, [](float v) { return v; });
      }
      const double mean = sum / m;
      const float fmean = static_cast<float>(mean);
      double sq = 0;
      for (int64_t img = 0; img < p_.n; ++img) {
        const float* yp = y + p_.at(img, ch);
        sq += planeSum(yp, p_.hw, [fmean](float v) {
          float d = v - fmean;
          return d * d;
        });
      }
      // Deviations were taken from the rounded mean; correct for the difference.
      const double var = std::max(0.0, sq / m - (mean - fmean) * (mean - fmean));
      stats[ch] = m;
      stats[p_.c + ch] = sum;
      stats[2 * p_.c + ch] = m * var + m * mean * mean;
    }
  }

 private:
  std::unique_ptr<CpuKernel> conv_;
  Planes p_;
};

/// out = relu?(y * scale + shift + residual?) over channel `ch`'s planes, scale and shift
/// from the statistics; returns 1/std. batch_norm_apply and batch_norm_recompute share it,
/// so a recomputed output equals the forward one bit for bit.
template <bool kRelu, bool kResidual>
double normalizeChannel(const Planes& p, int64_t ch, const ChannelStats& st, float gamma,
                        float beta, double eps, const float* y, const float* res, float* o) {
  const double invstd = 1.0 / std::sqrt(st.var + eps);
  const double dscale = gamma * invstd;  // as batch_norm rounds them
  const float scale = static_cast<float>(dscale);
  const float shift = static_cast<float>(beta - st.mean * dscale);
  for (int64_t img = 0; img < p.n; ++img) {
    const int64_t at = p.at(img, ch);
    const float* yp = y + at;
    float* op = o + at;
    // Rounded step by step as batch_norm, add and relu round them apart.
    for (int64_t i = 0; i < p.hw; ++i) {
      float v = yp[i] * scale + shift;
      if constexpr (kResidual) v = v + res[at + i];
      if constexpr (kRelu) v = std::max(v, 0.0f);
      op[i] = v;
    }
  }
  return invstd;
}

// in: y, stats, gamma, beta, running_mean, running_var, residual?; out: out, save_mean,
// save_invstd. Conventions as batch_norm's (norm_kernels.cc): biased variance to
// normalize, unbiased into running_var.
template <bool kRelu, bool kResidual>
class BatchNormApplyKernel final : public CpuKernel {
 public:
  BatchNormApplyKernel(Planes p, double eps, double momentum)
      : p_(p), eps_(eps), momentum_(momentum) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const float *y = in[0].f32(), *gamma = in[2].f32(), *beta = in[3].f32();
    const double* stats = static_cast<const double*>(in[1].data);
    float *running_mean = in[4].f32(), *running_var = in[5].f32();
    const float* res = kResidual ? in[6].f32() : nullptr;
    float *o = out[0].f32(), *save_mean = out[1].f32(), *save_invstd = out[2].f32();
    for (int64_t ch = 0; ch < p_.c; ++ch) {
      const ChannelStats st = readStats(stats, p_.c, ch);
      const double invstd = normalizeChannel<kRelu, kResidual>(p_, ch, st, gamma[ch], beta[ch],
                                                               eps_, y, res, o);
      save_mean[ch] = static_cast<float>(st.mean);
      save_invstd[ch] = static_cast<float>(invstd);
      // One value per channel has no unbiased variance; keep the biased one then.
      const double unbias = st.count > 1 ? st.count / (st.count - 1) : 1.0;
      running_mean[ch] =
          static_cast<float>((1 - momentum_) * running_mean[ch] + momentum_ * st.mean);
      running_var[ch] =
          static_cast<float>((1 - momentum_) * running_var[ch] + momentum_ * unbias * st.var);
    }
  }

 private:
  Planes p_;
  double eps_, momentum_;
};

// in: y, stats, gamma, beta; out: out (batch_norm_apply's, the running statistics left
// alone).
template <bool kRelu>
class BatchNormRecomputeKernel final : public CpuKernel {
 public:
  BatchNormRecomputeKernel(Planes p, double eps) : p_(p), eps_(eps) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const double* stats = static_cast<const double*>(in[1].data);
    const float *gamma = in[2].f32(), *beta = in[3].f32();
    for (int64_t ch = 0; ch < p_.c; ++ch)
      normalizeChannel<kRelu, false>(p_, ch, readStats(stats, p_.c, ch), gamma[ch], beta[ch],
                                     eps_, in[0].f32(), nullptr, out[0].f32());
  }

 private:
  Planes p_;
  double eps_;
};

/// dz = dout where relu's output is positive; dout itself without relu. A compile-time
/// choice, so that the loops below vectorize (a select, no branch).
template <bool kRelu>
inline float maskedGrad(const float* dout, const float* out, int64_t i) {
  const float d = dout[i];
  if constexpr (!kRelu) return d;
  // out > 0 ? d : +0, as a bit mask: GCC leaves a select inside the unrolled accumulator
  // loops as a branch, and the loop then does not vectorize.
  const uint32_t keep = 0u - static_cast<uint32_t>(out[i] > 0.0f);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(d) & keep);
}

/// sum(dz) and sum(dz * (y - mu)) over one plane in one pass, each in float with kLanes
/// accumulators: the same additions, in the same order, as two planeSum passes (and as
/// batch_norm_backward's two planeSum passes), over half the memory traffic.
template <bool kRelu>
void planeGradSums(const float* dp, const float* yp, const float* rp, int64_t n, float mu,
                   float* sum_dz, float* sum_dz_yc) {
  float a[kLanes] = {}, b[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const float dz = maskedGrad<kRelu>(dp, rp, i + l);
      a[l] += dz;
      b[l] += dz * (yp[i + l] - mu);
    }
  float sa = 0, sb = 0;
  for (; i < n; ++i) {
    const float dz = maskedGrad<kRelu>(dp, rp, i);
    sa += dz;
    sb += dz * (yp[i] - mu);
  }
  for (int l = 0; l < kLanes; ++l) sa += a[l], sb += b[l];
  *sum_dz = sa;
  *sum_dz_yc = sb;
}

// in: dout, y, save_mean, save_invstd, out?; out: sums f64[2,C], dbeta, dgamma.
template <bool kRelu>
class BatchNormBackwardReduceKernel final : public CpuKernel {
 public:
  explicit BatchNormBackwardReduceKernel(Planes p) : p_(p) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const float *dout = in[0].f32(), *y = in[1].f32(), *mean = in[2].f32(), *invstd = in[3].f32();
    const float* relu_out = kRelu ? in[4].f32() : nullptr;
    double* sums = static_cast<double*>(out[0].data);
    float *dbeta = out[1].f32(), *dgamma = out[2].f32();
    for (int64_t ch = 0; ch < p_.c; ++ch) {
      const float mu = mean[ch];
      double sum_dz = 0, sum_dz_yc = 0;  // sum(dz), sum(dz * (y - mean))
      for (int64_t img = 0; img < p_.n; ++img) {
        const int64_t at = p_.at(img, ch);
        float sa, sb;
        planeGradSums<kRelu>(dout + at, y + at, kRelu ? relu_out + at : nullptr, p_.hw, mu, &sa,
                             &sb);
        sum_dz += sa;
        sum_dz_yc += sb;
      }
      // Kept as dz * (y - mean) in the sums: batch_norm_backward uses it that way.
      sums[ch] = sum_dz;
      sums[p_.c + ch] = sum_dz_yc;
      dbeta[ch] = static_cast<float>(sum_dz);
      dgamma[ch] = static_cast<float>(sum_dz_yc * invstd[ch]);
    }
  }

 private:
  Planes p_;
};

// in: dout, y, gamma, save_mean, save_invstd, sums, stats, out?; out: dy (, dz).
template <bool kRelu, bool kResidual>
class BatchNormBackwardApplyKernel final : public CpuKernel {
 public:
  explicit BatchNormBackwardApplyKernel(Planes p) : p_(p) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const float *dout = in[0].f32(), *y = in[1].f32(), *gamma = in[2].f32();
    const float *mean = in[3].f32(), *invstd = in[4].f32();
    const double* sums = static_cast<const double*>(in[5].data);
    const double* stats = static_cast<const double*>(in[6].data);
    const float* relu_out = kRelu ? in[7].f32() : nullptr;
    float* dy = out[0].f32();
    float* dz_out = kResidual ? out[1].f32() : nullptr;
    for (int64_t ch = 0; ch < p_.c; ++ch) {
      const double m = readStats(stats, p_.c, ch).count;
      const double sum_dz = sums[ch], sum_dz_yc = sums[p_.c + ch];
      const double is = invstd[ch], a = gamma[ch] * is;
      // dy = gamma * invstd * (dz - sum_dz / m - (y - mean) * invstd^2 * sum_dz_yc / m)
      //    = a * dz + b * (y - mean) + c, rounded as batch_norm_backward rounds them.
      const float fa = static_cast<float>(a);
      const float fb = static_cast<float>(-a * is * is * sum_dz_yc / m);
      const float fc = static_cast<float>(-a * sum_dz / m);
      const float mu = mean[ch];
      for (int64_t img = 0; img < p_.n; ++img) {
        const int64_t at = p_.at(img, ch);
        const float *dp = dout + at, *yp = y + at, *rp = kRelu ? relu_out + at : nullptr;
        float* dyp = dy + at;
        for (int64_t i = 0; i < p_.hw; ++i) {
          const float dz = maskedGrad<kRelu>(dp, rp, i);
          dyp[i] = fa * dz + fb * (yp[i] - mu) + fc;
          if constexpr (kResidual) dz_out[at + i] = dz;
        }
      }
    }
  }

 private:
  Planes p_;
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
// relu in one pass over its output.
class Conv2dBiasActKernel final : public CpuKernel {
 public:
  Conv2dBiasActKernel(std::unique_ptr<CpuKernel> conv, int64_t size, bool relu, bool residual)
      : conv_(std::move(conv)), size_(size), relu_(relu), residual_(residual) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    runInner(*conv_, in.subspan(0, 3), out);
    float* y = out[0].f32();
    if (residual_) {
      const float* r = in[3].f32();
      for (int64_t i = 0; i < size_; ++i) y[i] += r[i];
    }
    if (relu_)
      for (int64_t i = 0; i < size_; ++i) y[i] = std::max(y[i], 0.0f);
  }

 private:
  std::unique_ptr<CpuKernel> conv_;
  int64_t size_;
  bool relu_, residual_;
};

}  // namespace

KernelOr makeConv2dStatsKernel(const KernelInit& init) {
  if (absl::Status st = checkAllF32(init.node); !st.ok()) return st;
  // The conv2d kernel reads only x, w, b?, stride, pad and result 0: it serves as is.
  KernelOr conv = makeConv2dKernel(init);
  if (!conv.ok()) return conv.status();
  return std::make_unique<Conv2dStatsKernel>(*std::move(conv), Planes(init.node.result(0)->type()));
}

KernelOr makeBatchNormApplyKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  if (absl::Status st = checkAllF32(n); !st.ok()) return st;
  Planes p(n.operand(0)->type());
  const double eps = n.floatAttr("eps"), momentum = n.floatAttr("momentum");
  const bool relu = n.boolAttr("relu"), residual = n.numOperands() > 6;
  if (relu && residual) return std::make_unique<BatchNormApplyKernel<true, true>>(p, eps, momentum);
  if (relu) return std::make_unique<BatchNormApplyKernel<true, false>>(p, eps, momentum);
  if (residual) return std::make_unique<BatchNormApplyKernel<false, true>>(p, eps, momentum);
  return std::make_unique<BatchNormApplyKernel<false, false>>(p, eps, momentum);
}

KernelOr makeBatchNormRecomputeKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  if (absl::Status st = checkAllF32(n); !st.ok()) return st;
  Planes p(n.operand(0)->type());
  const double eps = n.floatAttr("eps");
  if (n.boolAttr("relu")) return std::make_unique<BatchNormRecomputeKernel<true>>(p, eps);
  return std::make_unique<BatchNormRecomputeKernel<false>>(p, eps);
}

KernelOr makeBatchNormBackwardReduceKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  if (absl::Status st = checkAllF32(n); !st.ok()) return st;
  Planes p(n.operand(1)->type());
  if (n.numOperands() > 4) return std::make_unique<BatchNormBackwardReduceKernel<true>>(p);
  return std::make_unique<BatchNormBackwardReduceKernel<false>>(p);
}

KernelOr makeBatchNormBackwardApplyKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  if (absl::Status st = checkAllF32(n); !st.ok()) return st;
  Planes p(n.operand(1)->type());
  const bool relu = n.numOperands() > 7, residual = n.boolAttr("residual");
  if (relu && residual) return std::make_unique<BatchNormBackwardApplyKernel<true, true>>(p);
  if (relu) return std::make_unique<BatchNormBackwardApplyKernel<true, false>>(p);
  if (residual) return std::make_unique<BatchNormBackwardApplyKernel<false, true>>(p);
  return std::make_unique<BatchNormBackwardApplyKernel<false, false>>(p);
}

KernelOr makeFoldBatchNormKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  if (absl::Status st = checkAllF32(n); !st.ok()) return st;
  const ir::TensorType& w = n.operand(0)->type();
  return std::make_unique<FoldBatchNormKernel>(w.shape[0], w.numElements() / w.shape[0],
                                               n.numOperands() == 6, n.floatAttr("eps"));
}

KernelOr makeConv2dBiasActKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  KernelOr conv = makeConv2dKernel(init);  // reads x, w, b, stride, pad and the result
  if (!conv.ok()) return conv.status();
  return std::make_unique<Conv2dBiasActKernel>(*std::move(conv), n.result()->type().numElements(),
                                               n.boolAttr("relu"), n.numOperands() > 3);
}

}  // namespace tandem::backend::cpu

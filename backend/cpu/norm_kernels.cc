// batch_norm and batch_norm_backward over [N,C,H,W] or [N,C] in plain layout, as loops
// over one channel's N planes of H*W contiguous values.
//
// Not oneDNN: on plain NCHW its batch norm runs the generic "ncsp_bnorm" code, slower
// than PyTorch (inference 4x), and a blocked layout would need reorders costing as
// much as the normalization. The loops here read x twice for the statistics (mean,
// then squared deviations: no cancellation) and once to normalize; one channel's
// planes stay in L2 between the passes.
//
// Sums run in float over one plane with 8 independent accumulators (which the compiler
// turns into vector adds, and which keep the rounding error of a 784-value plane near
// 1e-7) and in double across planes.
//
// Conventions (PyTorch's): training normalizes with the biased batch variance, returns
// save_mean and save_invstd = 1/sqrt(var + eps), and updates the running statistics in
// place: running = (1 - momentum) * running + momentum * batch statistic, with the
// unbiased variance (n/(n-1) times the biased one) for running_var.
//
// x, y, dy and dx are f32 or bf16 (mixed precision), the loops templated on their element
// type T; the per-channel operands and results are f32 and the arithmetic is float and
// double either way.

#include <algorithm>
#include <cmath>
#include <memory>

#include "backend/bf16.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/plane_sums.h"
#include "ir/op_views.h"

namespace tandem::backend::cpu {
namespace {

/// N, C and H*W of x, and where plane (n, c) starts.
struct ChannelLayout {
  int64_t n, c, hw;
  explicit ChannelLayout(const ir::TensorType& x)
      : n(x.shape[0]), c(x.shape[1]), hw(x.rank() == 4 ? x.shape[2] * x.shape[3] : 1) {}
  int64_t plane(int64_t img, int64_t ch) const { return (img * c + ch) * hw; }
  int64_t count() const { return n * hw; }
};

/// y = x * scale + shift over channel ch.
template <typename T>
void affine(const ChannelLayout& l, int64_t ch, const T* x, T* y, float scale, float shift) {
  for (int64_t img = 0; img < l.n; ++img) {
    const T* xp = x + l.plane(img, ch);
    T* yp = y + l.plane(img, ch);
    for (int64_t i = 0; i < l.hw; ++i) {
      const float v = xp[i];
      yp[i] = v * scale + shift;
    }
  }
}

template <typename T>
class BatchNormTrainingKernel final : public CpuKernel {
 public:
  BatchNormTrainingKernel(ChannelLayout l, double eps, double momentum)
      : l_(l), eps_(eps), momentum_(momentum) {}

  // in: x, gamma, beta, running_mean, running_var; out: y, save_mean, save_invstd.
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const T* x = in[0].as<T>();
    const float *gamma = in[1].f32(), *beta = in[2].f32();
    float *running_mean = in[3].f32(), *running_var = in[4].f32();
    T* y = out[0].as<T>();
    float *save_mean = out[1].f32(), *save_invstd = out[2].f32();
    const double m = double(l_.count());
    // One value per channel has no unbiased variance; keep the biased one (zero) then.
    const double unbias = l_.count() > 1 ? m / (m - 1) : 1.0;
    for (int64_t ch = 0; ch < l_.c; ++ch) {
      const ChannelMoments c =
          planeMoments(l_.n, l_.hw, [&](int64_t img) { return x + l_.plane(img, ch); });
      const double mean = c.mean(), var = c.var();
      const float fmean = c.fmean;
      const double invstd = 1.0 / std::sqrt(var + eps_);
      const double scale = gamma[ch] * invstd;
      affine(l_, ch, x, y, static_cast<float>(scale), static_cast<float>(beta[ch] - mean * scale));
      save_mean[ch] = fmean;
      save_invstd[ch] = static_cast<float>(invstd);
      running_mean[ch] = static_cast<float>((1 - momentum_) * running_mean[ch] + momentum_ * mean);
      running_var[ch] =
          static_cast<float>((1 - momentum_) * running_var[ch] + momentum_ * unbias * var);
    }
  }

 private:
  ChannelLayout l_;
  double eps_, momentum_;
};

template <typename T>
class BatchNormInferenceKernel final : public CpuKernel {
 public:
  BatchNormInferenceKernel(ChannelLayout l, double eps) : l_(l), eps_(eps) {}

  // in: x, gamma, beta, running_mean, running_var; out: y.
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const T* x = in[0].as<T>();
    const float *gamma = in[1].f32(), *beta = in[2].f32();
    const float *mean = in[3].f32(), *var = in[4].f32();
    for (int64_t ch = 0; ch < l_.c; ++ch) {
      double scale = gamma[ch] / std::sqrt(double(var[ch]) + eps_);
      affine(l_, ch, x, out[0].as<T>(), static_cast<float>(scale),
             static_cast<float>(beta[ch] - mean[ch] * scale));
    }
  }

 private:
  ChannelLayout l_;
  double eps_;
};

template <typename T>
class BatchNormBackwardKernel final : public CpuKernel {
 public:
  explicit BatchNormBackwardKernel(ChannelLayout l) : l_(l) {}

  // in: dy, x, gamma, save_mean, save_invstd; out: dx, dgamma, dbeta.
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const T *dy = in[0].as<T>(), *x = in[1].as<T>();
    const float *gamma = in[2].f32(), *mean = in[3].f32(), *invstd = in[4].f32();
    T* dx = out[0].as<T>();
    float *dgamma = out[1].f32(), *dbeta = out[2].f32();
    const double m = double(l_.count());
    for (int64_t ch = 0; ch < l_.c; ++ch) {
      const float mu = mean[ch];
      double sum_dy = 0, sum_dy_xc = 0;  // sum(dy), sum(dy * (x - mean))
      for (int64_t img = 0; img < l_.n; ++img) {
        float s, sx;
        planeGradSums<false>(dy + l_.plane(img, ch), x + l_.plane(img, ch), nullptr, l_.hw, mu,
                             &s, &sx);
        sum_dy += s;
        sum_dy_xc += sx;
      }
      dbeta[ch] = static_cast<float>(sum_dy);
      dgamma[ch] = static_cast<float>(sum_dy_xc * invstd[ch]);
      const BackwardCoefficients k =
          backwardCoefficients(m, sum_dy, sum_dy_xc, gamma[ch], invstd[ch]);
      for (int64_t img = 0; img < l_.n; ++img) {
        const T* dyp = dy + l_.plane(img, ch);
        const T* xp = x + l_.plane(img, ch);
        T* dxp = dx + l_.plane(img, ch);
        for (int64_t i = 0; i < l_.hw; ++i) {
          const float d = dyp[i], v = xp[i];
          dxp[i] = k.a * d + k.b * (v - mu) + k.c;
        }
      }
    }
  }

 private:
  ChannelLayout l_;
};

}  // namespace

KernelOr makeBatchNormKernel(const KernelInit& init) {
  const ir::Node& n = init.node;  // x, gamma, beta, running_mean, running_var
  const ir::TensorType& x = n.operand(0)->type();
  return withFloatType(x.dtype, [&](auto tag) -> KernelOr {
    using T = decltype(tag);
    if (!ir::attr::training(n))
      return std::make_unique<BatchNormInferenceKernel<T>>(ChannelLayout(x), ir::attr::eps(n));
    return std::make_unique<BatchNormTrainingKernel<T>>(ChannelLayout(x), ir::attr::eps(n),
                                                        ir::attr::momentum(n));
  });
}

KernelOr makeBatchNormBackwardKernel(const KernelInit& init) {
  const ir::Node& n = init.node;  // dy, x, gamma, save_mean, save_invstd
  const ir::TensorType& x = n.operand(1)->type();
  return withFloatType(x.dtype, [&](auto tag) -> KernelOr {
    return std::make_unique<BatchNormBackwardKernel<decltype(tag)>>(ChannelLayout(x));
  });
}

}  // namespace tandem::backend::cpu

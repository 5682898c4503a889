#include "backend/cpu/layer_norm_core.h"

#include "backend/cpu/dnnl_core.h"

namespace tandem::backend::cpu {
namespace {

using dnnl::memory;

/// With gamma and beta, statistics computed (training).
dnnl::normalization_flags affine() {
  return dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
}

absl::Status checkSpec(const LayerNormSpec& s, absl::string_view where) {
  if (s.rows < 1 || s.width < 1)
    return absl::InvalidArgumentError(absl::StrCat(where, ": layer norm over ", s.rows, " rows of ",
                                                   s.width, " values: a dimension is empty"));
  if (!(s.epsilon > 0.0f))
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": layer norm's epsilon must be positive, not ", s.epsilon));
  return checkFloatType(where, "layer norm's data", s.data);
}

struct Descs {
  memory::desc data, stat, param;
  explicit Descs(const LayerNormSpec& s)
      : data(denseDesc({s.rows, s.width}, s.data)),
        stat(denseDesc({s.rows}, ir::DType::kF32)),
        param(denseDesc({s.width}, ir::DType::kF32)) {}
};

dnnl::layer_normalization_forward::primitive_desc forwardDesc(const Descs& d, float eps,
                                                              const dnnl::engine& engine) {
  return {{dnnl::prop_kind::forward_training, d.data, d.stat, eps, affine()},
          userScratchpadAttr(),
          engine};
}

}  // namespace

absl::StatusOr<LayerNormForward> LayerNormForward::make(CpuContext& ctx, const LayerNormSpec& spec,
                                                        absl::string_view where) {
  RETURN_IF_ERROR(checkSpec(spec, where));
  ASSIGN_OR_RETURN(
      DnnlProgram p,
      buildCoreProgram(ctx, where, "layer normalization forward primitive", [&](DnnlProgram& p) {
        const Descs d(spec);
        auto pd = forwardDesc(d, spec.epsilon, p.engine());
        p.add(pd, dnnl::layer_normalization_forward(pd),
              {{DNNL_ARG_SRC, p.input(0, d.data)},
               {DNNL_ARG_SCALE, p.input(1, d.param)},
               {DNNL_ARG_SHIFT, p.input(2, d.param)},
               {DNNL_ARG_DST, p.output(0, d.data)},
               {DNNL_ARG_MEAN, p.output(1, d.stat)},
               {DNNL_ARG_VARIANCE, p.output(2, d.stat)}});
      }));
  return LayerNormForward(std::move(p));
}

void LayerNormForward::run(const void* x, const float* gamma, const float* beta, void* y,
                           float* mean, float* var) {
  runCoreProgram(program_, {x, gamma, beta}, {y, mean, var});
}

absl::StatusOr<LayerNormBackward> LayerNormBackward::make(CpuContext& ctx,
                                                          const LayerNormSpec& spec,
                                                          absl::string_view where) {
  RETURN_IF_ERROR(checkSpec(spec, where));
  ASSIGN_OR_RETURN(
      DnnlProgram p,
      buildCoreProgram(ctx, where, "layer normalization backward primitive", [&](DnnlProgram& p) {
        const Descs d(spec);
        auto hint = forwardDesc(d, spec.epsilon, p.engine());
        dnnl::layer_normalization_backward::primitive_desc pd(
            {dnnl::prop_kind::backward, d.data, d.data, d.stat, spec.epsilon, affine()},
            userScratchpadAttr(), p.engine(), hint);
        p.add(pd, dnnl::layer_normalization_backward(pd),
              {{DNNL_ARG_SRC, p.input(0, d.data)},
               {DNNL_ARG_DIFF_DST, p.input(1, d.data)},
               {DNNL_ARG_MEAN, p.input(2, d.stat)},
               {DNNL_ARG_VARIANCE, p.input(3, d.stat)},
               {DNNL_ARG_SCALE, p.input(4, d.param)},
               // oneDNN 2.6 wants the shift at execution (its backward lists it among the
               // inputs under use_shift) though no gradient depends on it: run() passes
               // gamma's pointer here, so the op's backward needs no beta operand. The
               // PyTorch cases (gamma != beta) would show a read of it.
               {DNNL_ARG_SHIFT, p.input(5, d.param)},
               {DNNL_ARG_DIFF_SRC, p.output(0, d.data)},
               {DNNL_ARG_DIFF_SCALE, p.output(1, d.param)},
               {DNNL_ARG_DIFF_SHIFT, p.output(2, d.param)}});
      }));
  return LayerNormBackward(std::move(p));
}

void LayerNormBackward::run(const void* x, const void* dy, const float* mean, const float* var,
                            const float* gamma, void* dx, float* dgamma, float* dbeta) {
  runCoreProgram(program_, {x, dy, mean, var, gamma, gamma}, {dx, dgamma, dbeta});
}

}  // namespace tandem::backend::cpu

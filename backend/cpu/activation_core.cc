#include "backend/cpu/activation_core.h"

#include "backend/cpu/dnnl_core.h"

namespace tandem::backend::cpu {

using dnnl::algorithm;

algorithm forwardAlgorithm(Activation a) {
  switch (a) {
    case Activation::kGeluErf:
      return algorithm::eltwise_gelu_erf;
    case Activation::kGeluTanh:
      return algorithm::eltwise_gelu_tanh;
    case Activation::kTanh:
      return algorithm::eltwise_tanh_use_dst_for_bwd;
    case Activation::kSigmoid:
      return algorithm::eltwise_logistic_use_dst_for_bwd;
  }
  return algorithm::undef;
}

// The *_use_dst_for_bwd forms compute the same forward values as eltwise_tanh and
// eltwise_logistic; naming them in the forward pass too keeps one algorithm per kind.
algorithm backwardAlgorithm(Activation a) { return forwardAlgorithm(a); }

namespace {

/// The elements as one dense 1-D tensor: eltwise is elementwise, so the shape does not
/// matter, and one dimension keeps oneDNN on its flat jit loop.
dnnl::memory::desc flatDesc(ir::DType type, int64_t n) { return denseDesc({n}, type); }

std::string what(Activation a, absl::string_view pass) {
  return absl::StrCat(activationName(a), " ", pass, " eltwise primitive");
}

}  // namespace

absl::StatusOr<ActivationForward> ActivationForward::make(CpuContext& ctx, Activation a,
                                                          ir::DType type, int64_t n,
                                                          absl::string_view where) {
  RETURN_IF_ERROR(checkFloatType(where, "the activation's tensor", type));
  ASSIGN_OR_RETURN(DnnlProgram p,
                   buildCoreProgram(ctx, where, what(a, "forward"), [&](DnnlProgram& p) {
                     const dnnl::memory::desc md = flatDesc(type, n);
                     dnnl::eltwise_forward::primitive_desc pd(
                         {dnnl::prop_kind::forward_training, forwardAlgorithm(a), md, 0.f, 0.f},
                         userScratchpadAttr(), p.engine());
                     p.add(pd, dnnl::eltwise_forward(pd),
                           {{DNNL_ARG_SRC, p.input(0, md)}, {DNNL_ARG_DST, p.output(0, md)}});
                   }));
  return ActivationForward(std::move(p));
}

void ActivationForward::run(const void* x, void* y) { runCoreProgram(program_, {x}, {y}); }

absl::StatusOr<ActivationBackward> ActivationBackward::make(CpuContext& ctx, Activation a,
                                                            ir::DType type, int64_t n,
                                                            absl::string_view where) {
  RETURN_IF_ERROR(checkFloatType(where, "the activation's tensor", type));
  ASSIGN_OR_RETURN(
      DnnlProgram p, buildCoreProgram(ctx, where, what(a, "backward"), [&](DnnlProgram& p) {
        const dnnl::memory::desc md = flatDesc(type, n);
        dnnl::eltwise_forward::primitive_desc hint(
            {dnnl::prop_kind::forward_training, forwardAlgorithm(a), md, 0.f, 0.f}, p.engine());
        dnnl::eltwise_backward::primitive_desc pd({backwardAlgorithm(a), md, md, 0.f, 0.f},
                                                  userScratchpadAttr(), p.engine(), hint);
        const int saved_arg = backwardReadsOutput(a) ? DNNL_ARG_DST : DNNL_ARG_SRC;
        p.add(pd, dnnl::eltwise_backward(pd),
              {{saved_arg, p.input(0, md)},
               {DNNL_ARG_DIFF_DST, p.input(1, md)},
               {DNNL_ARG_DIFF_SRC, p.output(0, md)}});
      }));
  return ActivationBackward(std::move(p));
}

void ActivationBackward::run(const void* saved, const void* dy, void* dx) {
  runCoreProgram(program_, {saved, dy}, {dx});
}

}  // namespace tandem::backend::cpu

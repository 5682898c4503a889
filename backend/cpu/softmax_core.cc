#include "backend/cpu/softmax_core.h"

#include "backend/cpu/dnnl_core.h"

namespace tandem::backend::cpu {
namespace {

using dnnl::memory;

absl::Status checkSpec(const SoftmaxSpec& s, absl::string_view where) {
  RETURN_IF_ERROR(checkNotEmpty(s.dims, where, "softmax"));
  return checkFloatType(where, "softmax's data", s.data);
}

/// [outer, axis] when nothing follows the axis (the jit's dense case), else 3-D.
memory::desc dataDesc(const SoftmaxSpec& s) {
  const AxisSplit& d = s.dims;
  if (d.inner == 1) return denseDesc({d.outer, d.axis}, s.data);
  return denseDesc({d.outer, d.axis, d.inner}, s.data);
}

absl::string_view name(const SoftmaxSpec& s) { return s.log ? "logsoftmax" : "softmax"; }

}  // namespace

absl::StatusOr<SoftmaxForward> SoftmaxForward::make(CpuContext& ctx, const SoftmaxSpec& spec,
                                                    absl::string_view where) {
  RETURN_IF_ERROR(checkSpec(spec, where));
  ASSIGN_OR_RETURN(DnnlProgram p,
                   buildCoreProgram(ctx, where, absl::StrCat(name(spec), " forward primitive"),
                                    [&](DnnlProgram& p) {
                                      const memory::desc md = dataDesc(spec);
                                      const auto prop = dnnl::prop_kind::forward_training;
                                      std::vector<std::pair<int, DnnlProgram::Slot>> args{
                                          {DNNL_ARG_SRC, p.input(0, md)},
                                          {DNNL_ARG_DST, p.output(0, md)}};
                                      if (spec.log) {
                                        dnnl::logsoftmax_forward::primitive_desc pd(
                                            {prop, md, 1}, userScratchpadAttr(), p.engine());
                                        p.add(pd, dnnl::logsoftmax_forward(pd), args);
                                      } else {
                                        dnnl::softmax_forward::primitive_desc pd(
                                            {prop, md, 1}, userScratchpadAttr(), p.engine());
                                        p.add(pd, dnnl::softmax_forward(pd), args);
                                      }
                                    }));
  return SoftmaxForward(std::move(p));
}

void SoftmaxForward::run(const void* x, void* y) { runCoreProgram(program_, {x}, {y}); }

absl::StatusOr<SoftmaxBackward> SoftmaxBackward::make(CpuContext& ctx, const SoftmaxSpec& spec,
                                                      absl::string_view where) {
  RETURN_IF_ERROR(checkSpec(spec, where));
  ASSIGN_OR_RETURN(
      DnnlProgram p,
      buildCoreProgram(ctx, where, absl::StrCat(name(spec), " backward primitive"),
                       [&](DnnlProgram& p) {
                         const memory::desc md = dataDesc(spec);
                         const auto prop = dnnl::prop_kind::forward_training;
                         std::vector<std::pair<int, DnnlProgram::Slot>> args{
                             {DNNL_ARG_DST, p.input(0, md)},
                             {DNNL_ARG_DIFF_DST, p.input(1, md)},
                             {DNNL_ARG_DIFF_SRC, p.output(0, md)}};
                         if (spec.log) {
                           dnnl::logsoftmax_forward::primitive_desc hint({prop, md, 1}, p.engine());
                           dnnl::logsoftmax_backward::primitive_desc pd(
                               {md, md, 1}, userScratchpadAttr(), p.engine(), hint);
                           p.add(pd, dnnl::logsoftmax_backward(pd), args);
                         } else {
                           dnnl::softmax_forward::primitive_desc hint({prop, md, 1}, p.engine());
                           dnnl::softmax_backward::primitive_desc pd(
                               {md, md, 1}, userScratchpadAttr(), p.engine(), hint);
                           p.add(pd, dnnl::softmax_backward(pd), args);
                         }
                       }));
  return SoftmaxBackward(std::move(p));
}

void SoftmaxBackward::run(const void* y, const void* dy, void* dx) {
  runCoreProgram(program_, {y, dy}, {dx});
}

}  // namespace tandem::backend::cpu

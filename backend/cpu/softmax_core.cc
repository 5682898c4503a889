#include "backend/cpu/softmax_core.h"

#include "backend/cpu/avx512_rows.h"
#include "backend/cpu/dnnl_core.h"
#include "backend/cpu/softmax_vectors.h"

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

/// The forward primitive over `spec`.
absl::StatusOr<DnnlProgram> forwardProgram(CpuContext& ctx, const SoftmaxSpec& spec,
                                           absl::string_view where) {
  return buildCoreProgram(
      ctx, where, absl::StrCat(name(spec), " forward primitive"), [&](DnnlProgram& p) {
        const memory::desc md = dataDesc(spec);
        const auto prop = dnnl::prop_kind::forward_training;
        std::vector<std::pair<int, DnnlProgram::Slot>> args{{DNNL_ARG_SRC, p.input(0, md)},
                                                            {DNNL_ARG_DST, p.output(0, md)}};
        if (spec.log) {
          dnnl::logsoftmax_forward::primitive_desc pd({prop, md, 1}, userScratchpadAttr(),
                                                      p.engine());
          p.add(pd, dnnl::logsoftmax_forward(pd), args);
        } else {
          dnnl::softmax_forward::primitive_desc pd({prop, md, 1}, userScratchpadAttr(), p.engine());
          p.add(pd, dnnl::softmax_forward(pd), args);
        }
      });
}

}  // namespace

absl::StatusOr<SoftmaxForward> SoftmaxForward::make(CpuContext& ctx, const SoftmaxSpec& spec,
                                                    absl::string_view where) {
  RETURN_IF_ERROR(checkSpec(spec, where));
  ASSIGN_OR_RETURN(DnnlProgram p, forwardProgram(ctx, spec, where));
  return SoftmaxForward(std::move(p), spec);
}

/// Whether softmaxRows (softmax_vectors.h) takes `s` here: f32 softmax over short rows.
bool vectorRows(const SoftmaxSpec& s) {
  return avx512Runs() && !s.log && s.data == ir::DType::kF32 && s.dims.inner == 1 &&
         s.dims.axis <= kSoftmaxVectorRow;
}

void SoftmaxForward::run(const void* x, void* y) {
  withFloatType(spec_.data, [&](auto tag) {
    using T = decltype(tag);
    if (vectorRows(spec_)) {  // its NaN rows as it goes
      softmaxRows(static_cast<const float*>(x), spec_.dims.outer, spec_.dims.axis,
                  static_cast<float*>(y));
      return 0;
    }
    findNanRows(static_cast<const T*>(x), spec_.dims, flags_, nan_rows_);  // before y is written
    runCoreProgram(program_, {x}, {y});
    if (!nan_rows_.empty()) fillNanRows(static_cast<T*>(y), spec_.dims, nan_rows_);
    return 0;
  });
}

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
  return SoftmaxBackward(std::move(p), spec);
}

// softmax's backward, y (dy - sum(dy y)), is products and sums, which oneDNN computes as
// IEEE arithmetic does; only log-softmax's exp(y) needs the rows put right.
void SoftmaxBackward::run(const void* y, const void* dy, void* dx) {
  if (!spec_.log) return runCoreProgram(program_, {y, dy}, {dx});
  withFloatType(spec_.data, [&](auto tag) {
    using T = decltype(tag);
    findLogSoftmaxGradRows(static_cast<const T*>(y), static_cast<const T*>(dy), spec_.dims, flags_,
                           grad_rows_);  // before dx (which may be dy) is written
    runCoreProgram(program_, {y, dy}, {dx});
    if (!grad_rows_.rows.empty())
      fixLogSoftmaxGradRows(static_cast<const T*>(y), static_cast<T*>(dx), spec_.dims, grad_rows_);
    return 0;
  });
}

}  // namespace tandem::backend::cpu

#include "backend/cpu/reduce_core.h"

#include "backend/bf16.h"
#include "backend/cpu/dnnl_core.h"
#include "backend/cpu/vector_loops.h"

namespace tandem::backend::cpu {
namespace {

absl::Status checkSpec(const ReduceSpec& s, absl::string_view where) {
  RETURN_IF_ERROR(checkNotEmpty(s.dims, where, "reduction"));
  return checkFloatType(where, "the reduction's data", s.data);
}

template <typename T>
TANDEM_VECTOR_LOOPS void spread(const T* dy, T* dx, int64_t outer, int64_t axis, int64_t inner,
                                float scale) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t a = 0; a < axis; ++a) {
      const T* src = dy + o * inner;
      T* dst = dx + (o * axis + a) * inner;
      for (int64_t i = 0; i < inner; ++i) dst[i] = static_cast<float>(src[i]) * scale;
    }
}

}  // namespace

absl::StatusOr<ReduceForward> ReduceForward::make(CpuContext& ctx, const ReduceSpec& spec,
                                                  absl::string_view where) {
  RETURN_IF_ERROR(checkSpec(spec, where));
  ASSIGN_OR_RETURN(
      DnnlProgram p, buildCoreProgram(ctx, where, "reduction primitive", [&](DnnlProgram& p) {
        const AxisSplit& d = spec.dims;
        const auto x = denseDesc({d.outer, d.axis, d.inner}, spec.data);
        const auto y = denseDesc({d.outer, 1, d.inner}, spec.data);
        const auto alg = spec.kind == Reduction::kSum ? dnnl::algorithm::reduction_sum
                                                      : dnnl::algorithm::reduction_mean;
        dnnl::reduction::primitive_desc pd({alg, x, y, 0.f, 0.f}, userScratchpadAttr(), p.engine());
        p.add(pd, dnnl::reduction(pd),
              {{DNNL_ARG_SRC, p.input(0, x)}, {DNNL_ARG_DST, p.output(0, y)}});
      }));
  return ReduceForward(std::move(p));
}

void ReduceForward::run(const void* x, void* y) { runCoreProgram(program_, {x}, {y}); }

void reduceBackward(const ReduceSpec& s, const void* dy, void* dx) {
  const AxisSplit& d = s.dims;
  const float scale = s.kind == Reduction::kMean ? 1.0f / static_cast<float>(d.axis) : 1.0f;
  withFloatType(s.data, [&](auto tag) {
    using T = decltype(tag);
    spread(static_cast<const T*>(dy), static_cast<T*>(dx), d.outer, d.axis, d.inner, scale);
  });
}

}  // namespace tandem::backend::cpu

#include "backend/cpu/reduce_core.h"

#include <algorithm>
#include <vector>

#include "backend/bf16.h"
#include "backend/cpu/dnnl_core.h"
#include "backend/cpu/vector_loops.h"

namespace tandem::backend::cpu {
namespace {

/// The row length (inner extent) from which the loop sums instead of oneDNN: two AVX-512
/// vectors, so that the loop vectorizes along rows; shorter rows (a sum over the last
/// axis has rows of 1) stay with oneDNN, which vectorizes along the axis.
constexpr int64_t kLoopRow = 32;

absl::Status checkSpec(const ReduceSpec& s, absl::string_view where) {
  RETURN_IF_ERROR(checkNotEmpty(s.dims, where, "reduction"));
  return checkFloatType(where, "the reduction's data", s.data);
}

// y[o, i] = sum over a of x[o, a, i] (times `scale`), accumulated in f32 in index order:
// wide rows (kLoopRow), the reduction oneDNN refuses (an axis of size 1, where src and dst
// are one shape) and shapes it cannot build.
template <typename T>
TANDEM_VECTOR_LOOPS void sumAxis(const T* x, T* y, int64_t outer, int64_t axis, int64_t inner,
                                 float scale) {
  std::vector<float> acc(static_cast<size_t>(inner));
  for (int64_t o = 0; o < outer; ++o) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t a = 0; a < axis; ++a) {
      const T* row = x + (o * axis + a) * inner;
      for (int64_t i = 0; i < inner; ++i) acc[static_cast<size_t>(i)] += static_cast<float>(row[i]);
    }
    for (int64_t i = 0; i < inner; ++i) y[o * inner + i] = acc[static_cast<size_t>(i)] * scale;
  }
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
  // Over an axis of size 1 the reduction is a copy (a mean divides by 1), which oneDNN
  // refuses as a reduction whose source and destination are one shape: a device with one
  // example of the batch reduces over such an axis.
  if (spec.dims.axis == 1) return ReduceForward(spec, std::nullopt);
  // Rows of at least kLoopRow elements: the loop streams them once, adding each into a
  // row of accumulators that stays in L1, where oneDNN 2.6's reduction primitive (ref or
  // its simple JIT kernel) is far slower on a long axis over wide rows: the ViT's
  // [128, 50*64] -> [1, 50*64] bias gradients took 6 ms (docs/PERF.md).
  if (spec.dims.inner >= kLoopRow) return ReduceForward(spec, std::nullopt);
  absl::StatusOr<DnnlProgram> p =
      buildCoreProgram(ctx, where, "reduction primitive", [&](DnnlProgram& p) {
        const AxisSplit& d = spec.dims;
        const auto x = denseDesc({d.outer, d.axis, d.inner}, spec.data);
        const auto y = denseDesc({d.outer, 1, d.inner}, spec.data);
        const auto alg = spec.kind == Reduction::kSum ? dnnl::algorithm::reduction_sum
                                                      : dnnl::algorithm::reduction_mean;
        dnnl::reduction::primitive_desc pd({alg, x, y, 0.f, 0.f}, userScratchpadAttr(), p.engine());
        p.add(pd, dnnl::reduction(pd),
              {{DNNL_ARG_SRC, p.input(0, x)}, {DNNL_ARG_DST, p.output(0, y)}});
      });
  // Any other shape oneDNN cannot reduce runs on the loop: slower, never refused.
  if (!p.ok()) return ReduceForward(spec, std::nullopt);
  return ReduceForward(spec, *std::move(p));
}

void ReduceForward::run(const void* x, void* y) {
  if (program_) return runCoreProgram(*program_, {x}, {y});
  const AxisSplit& d = spec_.dims;
  const float scale = spec_.kind == Reduction::kMean ? 1.0f / static_cast<float>(d.axis) : 1.0f;
  withFloatType(spec_.data, [&](auto tag) {
    using T = decltype(tag);
    sumAxis(static_cast<const T*>(x), static_cast<T*>(y), d.outer, d.axis, d.inner, scale);
  });
}

const std::string& ReduceForward::implementations() const {
  static const std::string loop = "loop";
  return program_ ? program_->implementations() : loop;
}

void reduceBackward(const ReduceSpec& s, const void* dy, void* dx) {
  const AxisSplit& d = s.dims;
  const float scale = s.kind == Reduction::kMean ? 1.0f / static_cast<float>(d.axis) : 1.0f;
  withFloatType(s.data, [&](auto tag) {
    using T = decltype(tag);
    spread(static_cast<const T*>(dy), static_cast<T*>(dx), d.outer, d.axis, d.inner, scale);
  });
}

}  // namespace tandem::backend::cpu

#include "backend/cpu/adamw_core.h"

#include "backend/cpu/vector_loops.h"

namespace tandem::backend::cpu {
namespace {

// w, g, m and v are four distinct tensors (a weight, its gradient and two state
// variables): __restrict lets the loop vectorize without alias checks. This file is
// compiled with -fno-math-errno (backend/CMakeLists.txt): otherwise std::sqrt keeps a
// call to sqrtf for a negative argument's errno (v is never negative), and a loop with a
// call stays scalar (measured 4x slower). The root is IEEE-rounded either way.
template <typename G>
TANDEM_VECTOR_LOOPS void update(float* __restrict w, const G* __restrict g, float* __restrict m,
                                float* __restrict v, int64_t n, const AdamWScalars s) {
  for (int64_t i = 0; i < n; ++i) adamwStep(w[i], static_cast<float>(g[i]), m[i], v[i], s);
}

}  // namespace

void adamwUpdate(float* w, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s) {
  update(w, g, m, v, n, s);
}

void adamwUpdate(float* w, const bf16* g, float* m, float* v, int64_t n, const AdamWScalars& s) {
  update(w, g, m, v, n, s);
}

}  // namespace tandem::backend::cpu

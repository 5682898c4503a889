// attention and its backward op on the GPU against the CPU kernels (issue 43): both run the
// row math of backend/attention_math.h (host-tested against PyTorch 2's SDPA and, with
// dropout, against the CPU core's masks in tests/cores/attention_core_test.cc), the CPU
// blocked into tiles, the GPU a thread per row, so they agree to the f32 order of their
// sums. Causal and not, one tile and several (130 tokens), v of another width. Skips
// without a GPU.

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/backend/kernel_test_util.h"
#include "tests/cuda/cuda_test_util.h"

namespace tandem::testing {
namespace {

using ir::Op;

struct Case {
  int64_t batch, queries, keys, heads, depth, value_depth;
  bool causal;
};

SingleOp::Attrs attrsOf(const Case& c) {
  return {{"heads", c.heads},
          {"scale", 1.0 / std::sqrt(static_cast<double>(c.depth))},
          {"causal", c.causal}};
}

TEST(CudaAttentionKernels, ForwardAndBackwardMatchCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(43);
  for (const Case& c : {Case{2, 37, 37, 3, 16, 16, true}, Case{1, 130, 130, 2, 32, 32, true},
                        Case{2, 5, 70, 2, 8, 12, false}}) {
    SCOPED_TRACE(::testing::Message() << c.queries << " queries, " << c.keys << " keys");
    const ir::TensorType q = f32({c.batch, c.queries, c.heads * c.depth}),
                         k = f32({c.batch, c.keys, c.heads * c.depth}),
                         v = f32({c.batch, c.keys, c.heads * c.value_depth}),
                         y = f32({c.batch, c.queries, c.heads * c.value_depth}),
                         lse = f32({c.batch, c.heads, c.queries});
    SingleOp fwd(Op::kAttention, {q, k, v}, attrsOf(c));
    fillFinite(fwd, rng, 2.0f);
    expectCudaMatchesCpu(fwd, 1e-5);
    // The backward from the forward's own output and log-sum-exp (the CPU's).
    fwd.run();
    SingleOp back(Op::kAttentionBackward, {y, q, k, v, y, lse}, attrsOf(c));
    fillFinite(back, rng, 2.0f);
    for (size_t i = 1; i <= 3; ++i) back.in(i) = cloneBuffer(fwd.in(i - 1));
    back.in(4) = cloneBuffer(fwd.out(0));
    back.in(5) = cloneBuffer(fwd.out(1));
    expectCudaMatchesCpu(back, 1e-5);
  }
}

}  // namespace
}  // namespace tandem::testing

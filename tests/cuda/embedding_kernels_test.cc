// embedding and its backward op on CUDA. Without a GPU: the per-element rules the kernels
// run (backend/embedding_math.h: the forward's row lookup, the backward's column of token
// additions), compiled here and run as the kernels' threads would, against the op's CPU
// kernel: the same bits, including the gradient's order of additions; an id outside the
// table gives a NaN row and adds nothing (never a read past the table). With a GPU: both
// ops against the CPU kernel, bit for bit, and the gradient's bits the same every run.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/host_device.h"
#include "backend/embedding_math.h"
#include "gtest/gtest.h"
#include "tests/cuda/cuda_test_util.h"

namespace tandem::testing {
namespace {

namespace cu = backend::cuda;
using ir::Op;

constexpr int64_t kVocab = 13, kWidth = 37;  // 37: not a multiple of a warp

/// ids [6, 9] with a row picked many times, and a table and dy of uniform values.
void fill(SingleOp& op, std::mt19937& rng, bool backward) {
  op.in(backward ? 1 : 0).fillInts(rng, 0, kVocab - 1);
  int32_t* ids = op.in(backward ? 1 : 0).i32();
  for (int i : {3, 17, 18, 40, 53}) ids[i] = ids[0];
  op.in(backward ? 0 : 1).fillUniform(rng, -2, 2);
}

/// The forward kernel's threads (one per element of y) on the host.
std::vector<float> hostLookup(const int32_t* ids, int64_t tokens, const float* table) {
  std::vector<float> y(static_cast<size_t>(tokens * kWidth));
  for (int64_t t = 0; t < tokens * kWidth; ++t) {
    const int64_t row = backend::embeddingRow(ids[t / kWidth], kVocab);
    y[static_cast<size_t>(t)] = row >= 0 ? table[row * kWidth + t % kWidth] : NAN;
  }
  return y;
}

/// The backward kernel's threads (one per column of the table, rows zeroed first).
std::vector<float> hostGradient(const float* dy, const int32_t* ids, int64_t tokens) {
  std::vector<float> dtable(static_cast<size_t>(kVocab * kWidth), 0.0f);
  for (int64_t c = 0; c < kWidth; ++c)
    backend::embeddingGradColumn(dy, ids, tokens, kVocab, kWidth, c, dtable.data(),
                                 [](const float* p, int64_t i) { return cu::load(p, i); });
  return dtable;
}

std::vector<uint32_t> bitsOf(const float* v, int64_t n) {
  std::vector<uint32_t> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(cu::floatBits(v[i]));
  return out;
}

TEST(CudaEmbeddingMath, KernelThreadsAreTheCpuOpBitForBit) {
  std::mt19937 rng(31);
  SingleOp fwd(Op::kEmbedding, {i32({6, 9}), f32({kVocab, kWidth})});
  fill(fwd, rng, false);
  fwd.run();
  const std::vector<float> y = hostLookup(fwd.in(0).i32(), 54, fwd.in(1).f32());
  EXPECT_EQ(bitsOf(y.data(), fwd.out().size()), bitsOf(fwd.out().f32(), fwd.out().size()));

  SingleOp back(Op::kEmbeddingBackward, {f32({6, 9, kWidth}), i32({6, 9})},
                {{"vocab", int64_t{kVocab}}});
  fill(back, rng, true);
  back.run();
  const std::vector<float> d = hostGradient(back.in(0).f32(), back.in(1).i32(), 54);
  EXPECT_EQ(bitsOf(d.data(), back.out().size()), bitsOf(back.out().f32(), back.out().size()));
}

TEST(CudaEmbeddingMath, AnIdOutsideTheTableIsANanRowAndNoAddition) {
  const std::vector<int32_t> ids = {1, kVocab, -1, 1};
  std::vector<float> table(static_cast<size_t>(kVocab * kWidth), 0.5f);
  const std::vector<float> y = hostLookup(ids.data(), 4, table.data());
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t c = 0; c < kWidth; ++c)
      EXPECT_EQ(std::isnan(y[static_cast<size_t>(t * kWidth + c)]), t == 1 || t == 2) << t;
  const std::vector<float> dy(static_cast<size_t>(4 * kWidth), 1.0f);
  const std::vector<float> d = hostGradient(dy.data(), ids.data(), 4);
  for (int64_t v = 0; v < kVocab; ++v)
    EXPECT_EQ(d[static_cast<size_t>(v * kWidth)], v == 1 ? 2.0f : 0.0f) << "row " << v;
}

// ---- GPU ------------------------------------------------------------------------------

TEST(CudaEmbeddingKernels, LookupAndGradientAreTheCpuBitsEveryRun) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(32);
  SingleOp fwd(Op::kEmbedding, {i32({6, 9}), f32({kVocab, kWidth})});
  fill(fwd, rng, false);
  expectCudaMatchesCpu(fwd, 0.0);

  SingleOp back(Op::kEmbeddingBackward, {f32({6, 9, kWidth}), i32({6, 9})},
                {{"vocab", int64_t{kVocab}}});
  fill(back, rng, true);
  std::vector<Buffer> inputs;
  for (size_t i = 0; i < 2; ++i) inputs.push_back(cloneBuffer(back.in(i)));
  CudaRun first = runOnCuda(back, inputs);
  CudaRun again = runOnCuda(back, inputs, /*runs=*/3);
  back.run();
  ASSERT_EQ(first.results.size(), 1u);
  ASSERT_EQ(again.results.size(), 1u);
  const int64_t n = back.out().size();
  EXPECT_EQ(bitsOf(first.results[0].f32(), n), bitsOf(back.out().f32(), n));
  EXPECT_EQ(bitsOf(again.results[0].f32(), n), bitsOf(first.results[0].f32(), n));
}

}  // namespace
}  // namespace tandem::testing

// sgd_update on CUDA. Without a GPU: the step the kernel runs (optimizer_math.h),
// compiled here, against the CPU kernel bit for bit, with and without momentum, from f32
// and bf16 gradients, over several steps. With a GPU: the kernel against the CPU backend
// bit for bit (w and m are written in place), at sizes with a tail after the 16-byte
// packs and from unaligned pointers.

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/optimizer_launch.h"
#include "backend/cuda/optimizer_math.h"
#include "gtest/gtest.h"
#include "tests/cuda/cuda_test_util.h"

namespace tandem::testing {
namespace {

namespace cu = backend::cuda;
using ir::Op;

constexpr double kLr = 0.05, kWeightDecay = 5e-4;

/// sgd_update of n elements: w (and m) read from variables, the gradient in `g`.
SingleOp sgdOp(int64_t n, ir::DType g, double momentum) {
  std::vector<ir::TensorType> operands{f32({n}), ir::TensorType{g, {n}}};
  std::vector<ir::Var> vars{ir::Var{"state0", f32({n}), ir::VarRole::kParam, {}}};
  std::vector<size_t> state{0};
  if (momentum > 0) {
    operands.push_back(f32({n}));
    vars.push_back(ir::Var{"state2", f32({n}), ir::VarRole::kOptimizer, {}});
    state.push_back(2);
  }
  return SingleOp(Op::kSgdUpdate, operands,
                  {{"lr", kLr}, {"momentum", momentum}, {"weight_decay", kWeightDecay}}, vars, {},
                  state);
}

void fillSgd(SingleOp& op, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1, 1);
  for (size_t i = 0; i < op.node().numOperands(); ++i) {
    Buffer& b = op.in(i);
    for (int64_t k = 0; k < b.size(); ++k) {
      if (b.type().dtype == ir::DType::kBF16)
        b.bf16()[k] = d(rng);
      else
        b.f32()[k] = d(rng);
    }
  }
}

cu::SgdParams params(double momentum) {
  return {static_cast<float>(kLr), static_cast<float>(momentum), static_cast<float>(kWeightDecay)};
}

/// The gradient's element i as the kernel reads it.
float gradAt(Buffer& g, int64_t i) {
  return g.type().dtype == ir::DType::kBF16
             ? cu::bf16ToFloat(reinterpret_cast<const uint16_t*>(g.bf16())[i])
             : g.f32()[i];
}

/// `steps` steps of the host-compiled math on copies of w and m.
void hostSteps(SingleOp& op, int steps, double momentum, std::vector<float>& w,
               std::vector<float>& m) {
  const int64_t n = op.in(0).size();
  w.assign(op.in(0).f32(), op.in(0).f32() + n);
  m.clear();
  if (momentum > 0) m.assign(op.in(2).f32(), op.in(2).f32() + n);
  const cu::SgdParams p = params(momentum);
  for (int s = 0; s < steps; ++s)
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(i);
      if (momentum > 0)
        cu::sgdStep(w[k], gradAt(op.in(1), i), m[k], p);
      else
        cu::sgdStep(w[k], gradAt(op.in(1), i), p);
    }
}

TEST(CudaOptimizerMath, SgdStepIsTheCpuKernelToTheBit) {
  std::mt19937 rng(1);
  for (ir::DType g : {ir::DType::kF32, ir::DType::kBF16})
    for (double momentum : {0.0, 0.9}) {
      SCOPED_TRACE(std::string(ir::dtypeName(g)) + " momentum " + std::to_string(momentum));
      SingleOp op = sgdOp(1001, g, momentum);
      fillSgd(op, rng);
      std::vector<float> w, m;
      hostSteps(op, 3, momentum, w, m);
      for (int s = 0; s < 3; ++s) op.run();
      EXPECT_EQ(std::memcmp(w.data(), op.in(0).f32(), w.size() * sizeof(float)), 0);
      if (momentum > 0) {
        EXPECT_EQ(std::memcmp(m.data(), op.in(2).f32(), m.size() * sizeof(float)), 0);
      }
    }
}

// ---- GPU ------------------------------------------------------------------------------

TEST(CudaOptimizerKernels, SgdUpdateMatchesCpuToTheBit) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  // 1155: packs of 4 and a tail of 3; 3,000,001: more packs than the grid has threads.
  for (int64_t n : {int64_t{1155}, int64_t{3000001}})
    for (ir::DType g : {ir::DType::kF32, ir::DType::kBF16})
      for (double momentum : {0.0, 0.9}) {
        SCOPED_TRACE(std::to_string(n) + " " + std::string(ir::dtypeName(g)) + " momentum " +
                     std::to_string(momentum));
        SingleOp op = sgdOp(n, g, momentum);
        fillSgd(op, rng);
        std::vector<Buffer> inputs;
        for (size_t i = 0; i < op.node().numOperands(); ++i)
          inputs.push_back(cloneBuffer(op.in(i)));
        CudaRun gpu = runOnCuda(op, inputs, /*runs=*/3);  // the state carries over
        for (int s = 0; s < 3; ++s) op.run();
        ASSERT_EQ(gpu.operands.size(), op.node().numOperands());
        for (size_t i = 0; i < gpu.operands.size(); ++i)
          EXPECT_EQ(std::memcmp(gpu.operands[i].view().data, op.in(i).view().data,
                                static_cast<size_t>(op.in(i).type().bytes())),
                    0)
              << "operand " << i;
      }
}

TEST(CudaOptimizerKernels, UnalignedSgdUpdateMatchesTheMath) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(12);
  const int64_t n = 1155;
  SingleOp op = sgdOp(n, ir::DType::kF32, 0.9);
  fillSgd(op, rng);
  std::vector<float> w, m;
  hostSteps(op, 1, 0.9, w, m);
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  void *dw = nullptr, *dg = nullptr, *dm = nullptr;
  ASSERT_EQ(cudaMalloc(&dw, bytes + 16), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dg, bytes + 16), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dm, bytes + 16), cudaSuccess);
  // w 4 bytes past a 16-byte boundary: the one-element path.
  float* pw = reinterpret_cast<float*>(static_cast<char*>(dw) + 4);
  ASSERT_EQ(cudaMemcpy(pw, op.in(0).f32(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dg, op.in(1).f32(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dm, op.in(2).f32(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  cu::launchSgdUpdate(pw, static_cast<const float*>(dg), static_cast<float*>(dm), n, params(0.9),
                      nullptr);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<float> got_w(static_cast<size_t>(n)), got_m(static_cast<size_t>(n));
  ASSERT_EQ(cudaMemcpy(got_w.data(), pw, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got_m.data(), dm, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(dw);
  cudaFree(dg);
  cudaFree(dm);
  EXPECT_EQ(std::memcmp(got_w.data(), w.data(), bytes), 0);
  EXPECT_EQ(std::memcmp(got_m.data(), m.data(), bytes), 0);
}

}  // namespace
}  // namespace tandem::testing

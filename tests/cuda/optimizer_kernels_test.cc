// sgd_update and sgd_update_group on CUDA. Without a GPU: the step the kernels run
// (optimizer_math.h), compiled here, against the CPU kernel bit for bit, with and without
// momentum, from f32 and bf16 gradients, over several steps; the group's launch plan
// (optimizer_plan.h) and its block-to-values mapping, run here over the plan, against the
// CPU's group kernel. With a GPU: both kernels against the CPU backend bit for bit (w and
// m are written in place), at sizes with a tail after the 16-byte packs, from unaligned
// pointers, and a group of more parameters than one launch's table holds.

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/adamw_math.h"
#include "backend/clip_math.h"
#include "backend/cuda/clip_launch.h"
#include "backend/cuda/clip_math.h"
#include "backend/cuda/optimizer_launch.h"
#include "backend/cuda/optimizer_math.h"
#include "backend/cuda/optimizer_plan.h"
#include "backend/sgd_checks.h"
#include "gtest/gtest.h"
#include "ir/updates.h"
#include "tests/cuda/cuda_test_util.h"

namespace tandem::testing {
namespace {

namespace cu = backend::cuda;
using ir::Op;

constexpr double kLr = 0.05, kWeightDecay = 5e-4;

/// sgd_update of n elements: w (and m) read from variables, the gradient in `g`; when
/// `scheduled`, the learning-rate factor last, read from a fed variable.
SingleOp sgdOp(int64_t n, ir::DType g, double momentum, bool scheduled = false) {
  std::vector<ir::TensorType> operands{f32({n}), ir::TensorType{g, {n}}};
  std::vector<ir::Var> vars{ir::Var{"state0", f32({n}), ir::VarRole::kParam, {}}};
  std::vector<size_t> state{0};
  if (momentum > 0) {
    operands.push_back(f32({n}));
    vars.push_back(ir::Var{"state2", f32({n}), ir::VarRole::kOptimizer, {}});
    state.push_back(2);
  }
  if (scheduled) {
    const size_t factor = operands.size();
    operands.push_back(f32({1}));
    vars.push_back(ir::Var{"state" + std::to_string(factor), f32({1}), ir::VarRole::kFed, {}});
    state.push_back(factor);
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

// Under a schedule the kernel makes lr * factor where it runs (sgdParamsAt): the CPU
// kernel's scaledLr, bit for bit, for a factor that is no power of two.
TEST(CudaOptimizerMath, ScheduledSgdStepIsTheCpuKernelToTheBit) {
  std::mt19937 rng(3);
  for (double momentum : {0.0, 0.9}) {
    SCOPED_TRACE("momentum " + std::to_string(momentum));
    SingleOp op = sgdOp(513, ir::DType::kF32, momentum, /*scheduled=*/true);
    fillSgd(op, rng);
    const size_t at = op.node().numOperands() - 1;
    const float factor = 0.3721f;
    op.in(at).f32()[0] = factor;
    const int64_t n = op.in(0).size();
    std::vector<float> w(op.in(0).f32(), op.in(0).f32() + n), m;
    if (momentum > 0) m.assign(op.in(2).f32(), op.in(2).f32() + n);
    const cu::SgdParams p = cu::sgdParamsAt(
        {kLr, static_cast<float>(momentum), static_cast<float>(kWeightDecay), &factor});
    EXPECT_NE(p.lr, static_cast<float>(kLr));
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(i);
      if (momentum > 0)
        cu::sgdStep(w[k], op.in(1).f32()[i], m[k], p);
      else
        cu::sgdStep(w[k], op.in(1).f32()[i], p);
    }
    op.run();
    EXPECT_EQ(std::memcmp(w.data(), op.in(0).f32(), w.size() * sizeof(float)), 0);
    if (momentum > 0) {
      EXPECT_EQ(std::memcmp(m.data(), op.in(2).f32(), m.size() * sizeof(float)), 0);
    }
  }
}

/// sgd_update_group over parameters of `sizes` values: weights and momentum buffers read
/// from variables, gradients of dtype `g`.
SingleOp sgdGroupOp(const std::vector<int64_t>& sizes, ir::DType g, double momentum) {
  const size_t k = sizes.size(), streams = momentum > 0 ? 3 : 2;
  std::vector<ir::TensorType> operands;
  std::vector<ir::Var> vars;
  std::vector<size_t> state;
  for (size_t s = 0; s < streams; ++s)
    for (size_t j = 0; j < k; ++j) {
      const size_t i = s * k + j;
      operands.push_back(s == 1 ? ir::TensorType{g, {sizes[j]}} : f32({sizes[j]}));
      if (s == 1) continue;
      vars.push_back(ir::Var{"state" + std::to_string(i),
                             f32({sizes[j]}),
                             s == 0 ? ir::VarRole::kParam : ir::VarRole::kOptimizer,
                             {}});
      state.push_back(i);
    }
  return SingleOp(Op::kSgdUpdateGroup, operands,
                  {{"lr", kLr}, {"momentum", momentum}, {"weight_decay", kWeightDecay}}, vars, {},
                  state);
}

/// The sizes of a group that needs three launches: 100 parameters (48 per table) of sizes
/// around and across kGroupChunk, ones of a single value among them.
std::vector<int64_t> groupSizes() {
  std::vector<int64_t> sizes;
  for (int j = 0; j < 100; ++j)
    sizes.push_back(j % 7 == 0 ? 1 : (j * 977) % (3 * cu::kGroupChunk) + cu::kGroupChunk / 2);
  return sizes;
}

TEST(CudaOptimizerPlan, TablesHoldAtMost48ParametersInOrder) {
  const std::vector<int64_t> sizes = groupSizes();
  const std::vector<cu::GroupLaunch> plan = cu::planGroupLaunches(sizes);
  ASSERT_EQ(plan.size(), 3u);
  int next = 0;
  for (const cu::GroupLaunch& l : plan) {
    EXPECT_EQ(l.first, next);
    EXPECT_LE(l.count, cu::kGroupTensorsPerLaunch);
    EXPECT_EQ(l.first_block[0], 0);
    for (int t = 0; t < l.count; ++t)
      EXPECT_EQ(l.first_block[t + 1] - l.first_block[t], cu::groupBlocks(sizes[l.first + t]));
    next += l.count;
  }
  EXPECT_EQ(next, 100);
  EXPECT_EQ(plan[0].count, 48);
  EXPECT_EQ(plan[2].count, 4);
  EXPECT_TRUE(cu::planGroupLaunches({}).empty());
}

TEST(CudaOptimizerPlan, EveryValueIsSteppedByExactlyOneBlockThread) {
  const std::vector<int64_t> sizes = groupSizes();
  std::vector<std::vector<int>> hits(sizes.size());
  for (size_t j = 0; j < sizes.size(); ++j) hits[j].assign(static_cast<size_t>(sizes[j]), 0);
  for (const cu::GroupLaunch& l : cu::planGroupLaunches(sizes)) {
    std::vector<int64_t> n(sizes.begin() + l.first, sizes.begin() + l.first + l.count);
    for (int64_t b = 0; b < l.blocks(); ++b) {
      const int t = cu::groupTensorOf(l.first_block, l.count, b);
      ASSERT_GE(b, l.first_block[t]);
      ASSERT_LT(b, l.first_block[t + 1]);
      const cu::GroupRange r = cu::groupRangeOf(l.first_block, n.data(), t, b);
      for (int64_t i = r.begin; i < r.end; ++i) ++hits[static_cast<size_t>(l.first + t)][i];
    }
  }
  for (size_t j = 0; j < sizes.size(); ++j)
    for (size_t i = 0; i < hits[j].size(); ++i)
      ASSERT_EQ(hits[j][i], 1) << "parameter " << j << " value " << i;
}

// The group kernel's body, run here block by block over the plan, steps every parameter
// as the CPU's group kernel does, to the bit.
TEST(CudaOptimizerMath, GroupStepOverThePlanIsTheCpuGroupKernelToTheBit) {
  std::mt19937 rng(5);
  const std::vector<int64_t> sizes = groupSizes();
  for (ir::DType g : {ir::DType::kF32, ir::DType::kBF16})
    for (double momentum : {0.0, 0.9}) {
      SCOPED_TRACE(std::string(ir::dtypeName(g)) + " momentum " + std::to_string(momentum));
      SingleOp op = sgdGroupOp(sizes, g, momentum);
      fillSgd(op, rng);
      const ir::SgdGroupLayout layout = ir::sgdGroupLayout(op.node());
      ASSERT_EQ(layout.k, sizes.size());
      std::vector<std::vector<float>> w(layout.k), m(layout.k);
      for (size_t j = 0; j < layout.k; ++j) {
        Buffer& bw = op.in(layout.weight(j));
        w[j].assign(bw.f32(), bw.f32() + bw.size());
        if (momentum > 0)
          m[j].assign(op.in(layout.buffer(j)).f32(), op.in(layout.buffer(j)).f32() + bw.size());
      }
      const cu::SgdParams p = params(momentum);
      for (const cu::GroupLaunch& l : cu::planGroupLaunches(sizes)) {
        std::vector<int64_t> n(sizes.begin() + l.first, sizes.begin() + l.first + l.count);
        for (int64_t b = 0; b < l.blocks(); ++b) {
          const int t = cu::groupTensorOf(l.first_block, l.count, b);
          const size_t j = static_cast<size_t>(l.first + t);
          const cu::GroupRange r = cu::groupRangeOf(l.first_block, n.data(), t, b);
          for (int64_t i = r.begin; i < r.end; ++i) {
            const float gi = gradAt(op.in(layout.gradient(j)), i);
            if (momentum > 0)
              cu::sgdStep(w[j][i], gi, m[j][i], p);
            else
              cu::sgdStep(w[j][i], gi, p);
          }
        }
      }
      op.run();
      for (size_t j = 0; j < layout.k; ++j) {
        const size_t bytes = w[j].size() * sizeof(float);
        EXPECT_EQ(std::memcmp(w[j].data(), op.in(layout.weight(j)).f32(), bytes), 0) << j;
        if (momentum > 0) {
          EXPECT_EQ(std::memcmp(m[j].data(), op.in(layout.buffer(j)).f32(), bytes), 0) << j;
        }
      }
    }
}

// ---- GPU ------------------------------------------------------------------------------

/// Three steps of `op` on the GPU and on the CPU from the same operands: every operand
/// (w and m are written in place, the state carries over) equal to the bit.
void expectThreeStepsEqualCpu(SingleOp& op) {
  std::vector<Buffer> inputs;
  for (size_t i = 0; i < op.node().numOperands(); ++i) inputs.push_back(cloneBuffer(op.in(i)));
  CudaRun gpu = runOnCuda(op, inputs, /*runs=*/3);
  for (int s = 0; s < 3; ++s) op.run();
  ASSERT_EQ(gpu.operands.size(), op.node().numOperands());
  for (size_t i = 0; i < gpu.operands.size(); ++i)
    EXPECT_EQ(std::memcmp(gpu.operands[i].view().data, op.in(i).view().data,
                          static_cast<size_t>(op.in(i).type().bytes())),
              0)
        << "operand " << i;
}

TEST(CudaOptimizerKernels, SgdUpdateGroupMatchesCpuToTheBit) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(13);
  for (ir::DType g : {ir::DType::kF32, ir::DType::kBF16})
    for (double momentum : {0.0, 0.9}) {
      SCOPED_TRACE(std::string(ir::dtypeName(g)) + " momentum " + std::to_string(momentum));
      SingleOp op = sgdGroupOp(groupSizes(), g, momentum);
      fillSgd(op, rng);
      expectThreeStepsEqualCpu(op);
    }
}

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
        expectThreeStepsEqualCpu(op);
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
  cu::launchSgdUpdate(pw, static_cast<const float*>(dg), static_cast<float*>(dm), n,
                      cu::SgdHyper{kLr, 0.9f, static_cast<float>(kWeightDecay), nullptr}, nullptr);
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

namespace tandem::testing {
namespace {

// adamw_update on CUDA: adamw.cu's counted kernel makes the step's scalars on the GPU from
// the count in device memory (adamwScalars, TANDEM_HD) and steps each element with
// adamwStep. Here: that math, host-compiled, over the count as the kernel reads it,
// against the CPU kernel bit for bit; on a GPU: the kernel against the CPU kernel.

SingleOp adamwOp(int64_t n, ir::DType g) {
  const ir::TensorType w = f32({n});
  return SingleOp(
      Op::kAdamwUpdate, {w, ir::TensorType{g, {n}}, w, w, f32({1})},
      {{"lr", 2e-3}, {"beta1", 0.9}, {"beta2", 0.99}, {"eps", 1e-8}, {"weight_decay", 0.05}},
      {ir::Var{"state0", w, ir::VarRole::kParam, {}},
       ir::Var{"state2", w, ir::VarRole::kOptimizer, {}},
       ir::Var{"state3", w, ir::VarRole::kOptimizer, {}},
       ir::Var{"state4", f32({1}), ir::VarRole::kOptimizer, {}}},
      {}, {0, 2, 3, 4});
}

// Moments as a run leaves them (v >= 0) and a count of 5 updates so far.
void fillAdamw(SingleOp& op, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1, 1), positive(0, 1e-2f);
  for (int64_t k = 0; k < op.in(0).size(); ++k) {
    op.in(0).f32()[k] = d(rng);
    if (op.in(1).type().dtype == ir::DType::kBF16)
      op.in(1).bf16()[k] = d(rng);
    else
      op.in(1).f32()[k] = d(rng);
    op.in(2).f32()[k] = 0.1f * d(rng);
    op.in(3).f32()[k] = positive(rng);
  }
  op.in(4).f32()[0] = 5;
}

// The counted kernel under a schedule: adamwScalarsAt scales the lr by the factor it reads,
// as the CPU kernel does.
TEST(CudaOptimizerMath, ScheduledAdamwStepIsTheCpuKernelToTheBit) {
  std::mt19937 rng(22);
  const ir::TensorType w32 = f32({300});
  SingleOp op(Op::kAdamwUpdate, {w32, w32, w32, w32, f32({1}), f32({1})},
              {{"lr", 2e-3}, {"beta1", 0.9}, {"beta2", 0.99}, {"eps", 1e-8}, {"weight_decay", 0.05}},
              {ir::Var{"state0", w32, ir::VarRole::kParam, {}},
               ir::Var{"state2", w32, ir::VarRole::kOptimizer, {}},
               ir::Var{"state3", w32, ir::VarRole::kOptimizer, {}},
               ir::Var{"state4", f32({1}), ir::VarRole::kOptimizer, {}},
               ir::Var{"state5", f32({1}), ir::VarRole::kFed, {}}},
              {}, {0, 2, 3, 4, 5});
  fillAdamw(op, rng);
  const float factor = 0.61f;
  op.in(5).f32()[0] = factor;
  const int64_t n = op.in(0).size();
  std::vector<float> w(op.in(0).f32(), op.in(0).f32() + n), m(op.in(2).f32(), op.in(2).f32() + n),
      v(op.in(3).f32(), op.in(3).f32() + n);
  const backend::AdamWScalars sc =
      backend::adamwScalarsAt(backend::adamwHyper(op.node()), &factor, op.in(4).f32()[0]);
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    backend::adamwStep(w[k], op.in(1).f32()[i], m[k], v[k], sc);
  }
  op.run();
  EXPECT_EQ(op.in(4).f32()[0], 6.0f);
  EXPECT_EQ(std::memcmp(w.data(), op.in(0).f32(), w.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(v.data(), op.in(3).f32(), v.size() * sizeof(float)), 0);
}

TEST(CudaOptimizerMath, CountedAdamwStepIsTheCpuKernelToTheBit) {
  std::mt19937 rng(21);
  for (ir::DType g : {ir::DType::kF32, ir::DType::kBF16}) {
    SCOPED_TRACE(ir::dtypeName(g));
    SingleOp op = adamwOp(257, g);
    fillAdamw(op, rng);
    const int64_t n = op.in(0).size();
    std::vector<float> w(op.in(0).f32(), op.in(0).f32() + n), m(op.in(2).f32(), op.in(2).f32() + n),
        v(op.in(3).f32(), op.in(3).f32() + n);
    float count = op.in(4).f32()[0];
    const backend::AdamWHyper h = backend::adamwHyper(op.node());
    for (int s = 0; s < 3; ++s) {
      // As the kernel: every block makes the scalars from the count, then countStep adds 1.
      const backend::AdamWScalars sc = backend::adamwScalars(h, static_cast<int64_t>(count) + 1);
      for (int64_t i = 0; i < n; ++i) {
        const size_t k = static_cast<size_t>(i);
        backend::adamwStep(w[k], gradAt(op.in(1), i), m[k], v[k], sc);
      }
      count += 1;
      op.run();
    }
    EXPECT_EQ(op.in(4).f32()[0], count);
    EXPECT_EQ(std::memcmp(w.data(), op.in(0).f32(), w.size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(m.data(), op.in(2).f32(), m.size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(v.data(), op.in(3).f32(), v.size() * sizeof(float)), 0);
  }
}

// On the GPU the scalars come from CUDA's pow in double (within 2 ulp of the host's),
// which rounding to float almost always absorbs: bit for bit is expected, and a
// difference here would name that.
TEST(CudaOptimizerKernels, AdamwUpdateMatchesCpuToTheBit) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(22);
  for (int64_t n : {int64_t{1155}, int64_t{3000001}})
    for (ir::DType g : {ir::DType::kF32, ir::DType::kBF16}) {
      SCOPED_TRACE(std::to_string(n) + " " + std::string(ir::dtypeName(g)));
      SingleOp op = adamwOp(n, g);
      fillAdamw(op, rng);
      expectThreeStepsEqualCpu(op);
    }
}

// adamw_update_group: k parameters' w, g, m, v and counts as five operand streams, random
// moments (v >= 0) and a different count per parameter (each keeps its own).
SingleOp adamwGroupOp(const std::vector<int64_t>& sizes, ir::DType g) {
  const size_t k = sizes.size();
  std::vector<ir::TensorType> operands;
  std::vector<ir::Var> vars;
  std::vector<size_t> state;
  for (size_t s = 0; s < 5; ++s)
    for (size_t j = 0; j < k; ++j) {
      const size_t i = s * k + j;
      const ir::TensorType t = s == 4 ? f32({1}) : f32({sizes[j]});
      operands.push_back(s == 1 ? ir::TensorType{g, {sizes[j]}} : t);
      if (s == 1) continue;
      vars.push_back(ir::Var{"state" + std::to_string(i), t,
                             s == 0 ? ir::VarRole::kParam : ir::VarRole::kOptimizer, {}});
      state.push_back(i);
    }
  return SingleOp(
      Op::kAdamwUpdateGroup, operands,
      {{"lr", 2e-3}, {"beta1", 0.9}, {"beta2", 0.99}, {"eps", 1e-8}, {"weight_decay", 0.05}},
      vars, {}, state);
}

void fillAdamwGroup(SingleOp& op, const std::vector<int64_t>& sizes, std::mt19937& rng) {
  const size_t k = sizes.size();
  const bool bf16 = op.in(k).type().dtype == ir::DType::kBF16;
  std::uniform_real_distribution<float> d(-1, 1), positive(0, 1e-2f);
  for (size_t j = 0; j < k; ++j) {
    for (int64_t i = 0; i < sizes[j]; ++i) {
      op.in(j).f32()[i] = d(rng);
      if (bf16)
        op.in(k + j).bf16()[i] = d(rng);
      else
        op.in(k + j).f32()[i] = d(rng);
      op.in(2 * k + j).f32()[i] = 0.1f * d(rng);
      op.in(3 * k + j).f32()[i] = positive(rng);
    }
    op.in(4 * k + j).f32()[0] = static_cast<float>(j % 4);
  }
}

// The group kernel's body, run here block by block over the plan (each block's scalars
// from its parameter's count, then every count up by one), steps every parameter as the
// CPU's group kernel does, to the bit, over three steps.
TEST(CudaOptimizerMath, AdamwGroupStepOverThePlanIsTheCpuGroupKernelToTheBit) {
  std::mt19937 rng(23);
  const std::vector<int64_t> sizes = groupSizes();
  const size_t k = sizes.size();
  for (ir::DType g : {ir::DType::kF32, ir::DType::kBF16}) {
    SCOPED_TRACE(ir::dtypeName(g));
    SingleOp op = adamwGroupOp(sizes, g);
    fillAdamwGroup(op, sizes, rng);
    std::vector<std::vector<float>> w(k), m(k), v(k);
    std::vector<float> count(k);
    for (size_t j = 0; j < k; ++j) {
      const int64_t n = sizes[j];
      w[j].assign(op.in(j).f32(), op.in(j).f32() + n);
      m[j].assign(op.in(2 * k + j).f32(), op.in(2 * k + j).f32() + n);
      v[j].assign(op.in(3 * k + j).f32(), op.in(3 * k + j).f32() + n);
      count[j] = op.in(4 * k + j).f32()[0];
    }
    const backend::AdamWHyper h = backend::adamwHyper(op.node());
    for (int step = 0; step < 3; ++step) {
      for (const cu::GroupLaunch& l : cu::planGroupLaunches(sizes)) {
        std::vector<int64_t> n(sizes.begin() + l.first, sizes.begin() + l.first + l.count);
        for (int64_t b = 0; b < l.blocks(); ++b) {
          const int t = cu::groupTensorOf(l.first_block, l.count, b);
          const size_t j = static_cast<size_t>(l.first + t);
          const backend::AdamWScalars sc = backend::adamwScalarsAt(h, nullptr, count[j]);
          const cu::GroupRange r = cu::groupRangeOf(l.first_block, n.data(), t, b);
          for (int64_t i = r.begin; i < r.end; ++i)
            backend::adamwStep(w[j][i], gradAt(op.in(k + j), i), m[j][i], v[j][i], sc);
        }
      }
      for (float& c : count) c += 1;  // countGroupSteps, after the launch
      op.run();
    }
    for (size_t j = 0; j < k; ++j) {
      const size_t bytes = w[j].size() * sizeof(float);
      EXPECT_EQ(op.in(4 * k + j).f32()[0], count[j]) << j;
      EXPECT_EQ(std::memcmp(w[j].data(), op.in(j).f32(), bytes), 0) << j;
      EXPECT_EQ(std::memcmp(m[j].data(), op.in(2 * k + j).f32(), bytes), 0) << j;
      EXPECT_EQ(std::memcmp(v[j].data(), op.in(3 * k + j).f32(), bytes), 0) << j;
    }
  }
}

TEST(CudaOptimizerKernels, AdamwUpdateGroupMatchesCpuToTheBit) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(24);
  for (ir::DType g : {ir::DType::kF32, ir::DType::kBF16}) {
    SCOPED_TRACE(ir::dtypeName(g));
    SingleOp op = adamwGroupOp(groupSizes(), g);
    fillAdamwGroup(op, groupSizes(), rng);
    expectThreeStepsEqualCpu(op);
  }
}

}  // namespace
}  // namespace tandem::testing

namespace tandem::testing {
namespace {

// clip_grad_norm on CUDA: clip.cu adds the squares in clip_math.h's order (a fixed grid,
// a tree per block, the partials in order), so every GPU makes the same factor from the
// same all-reduced gradients. Here: that order, host-compiled, against the CPU kernel's
// element order: the factors agree to a float's rounding (the sums differ in their last
// bits of a double); on a GPU: the kernel against the CPU kernel.

SingleOp clipOp(const std::vector<int64_t>& sizes, double max_norm) {
  std::vector<ir::TensorType> operands;
  for (int64_t n : sizes) operands.push_back(f32({n}));
  return SingleOp(Op::kClipGradNorm, operands, {{"max_norm", max_norm}});
}

void fillClip(SingleOp& op, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1, 1);
  for (size_t i = 0; i < op.node().numOperands(); ++i)
    for (int64_t k = 0; k < op.in(i).size(); ++k) op.in(i).f32()[k] = d(rng);
}

TEST(CudaOptimizerMath, ClipSumOrderGivesTheCpuKernelsFactor) {
  std::mt19937 rng(31);
  // 1 and 255: one block; 300,000: more elements than the 512 blocks' threads.
  SingleOp op = clipOp({1, 255, 300000}, 40.0);
  fillClip(op, rng);
  double sum = 0;
  for (size_t k = 0; k < op.node().numOperands(); ++k) {
    const float* g = op.in(k).f32();
    const int64_t n = op.in(k).size(), blocks = cu::clipBlocks(n);
    for (int64_t b = 0; b < blocks; ++b) {
      std::vector<double> sums(cu::kClipThreads);
      for (int t = 0; t < cu::kClipThreads; ++t)
        sums[static_cast<size_t>(t)] = cu::clipThreadSum(
            [g](int64_t i) { return static_cast<double>(g[i]); }, n, blocks, cu::kClipThreads, b, t);
      cu::clipTreeSum(sums.data(), cu::kClipThreads);
      sum += sums[0];
    }
  }
  const float factor = backend::clipFactor(40.0, sum);
  ASSERT_LT(factor, 1.0f);  // sqrt(300256 / 3) is about 316: the gradients are clipped
  op.run();
  // The CPU kernel's factor, read back from its first result.
  const float cpu_factor = op.out(0).f32()[0] / op.in(0).f32()[0];
  EXPECT_NEAR(factor, cpu_factor, 4e-7 * cpu_factor);
  for (int64_t i = 0; i < op.in(2).size(); i += 997)
    EXPECT_NEAR(op.out(2).f32()[i], op.in(2).f32()[i] * factor, 1e-6) << i;
}

TEST(CudaOptimizerKernels, ClipGradNormMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(32);
  for (double max_norm : {40.0, 1e6}) {  // clipped, and left as they are (factor 1)
    SCOPED_TRACE(max_norm);
    SingleOp op = clipOp({1, 255, 300000, 3000001}, max_norm);
    fillClip(op, rng);
    expectCudaMatchesCpu(op, 1e-6);
  }
}

}  // namespace
}  // namespace tandem::testing

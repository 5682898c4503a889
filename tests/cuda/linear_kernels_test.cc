// The linear family on CUDA. Without a GPU: the row-major -> column-major GEMM plans,
// run by a reference column-major GEMM with BLAS semantics, against the CPU kernels, and
// the bias-gradient math against the CPU's. With a GPU: every op through cuBLASLt
// against the CPU backend (f32, TF32, bf16 with f32 master weights).

#include <cstdint>
#include <random>
#include <vector>

#include "backend/cuda/linear_math.h"
#include "backend/cuda/linear_plan.h"
#include "gtest/gtest.h"
#include "tests/cuda/cuda_test_util.h"

namespace tandem::testing {
namespace {

using backend::cuda::GemmPlan;
using ir::Op;

/// D = op(A) op(B) as cuBLAS defines it on column-major storage, with `bias` (length m,
/// or null) added to every column (cuBLASLt's bias epilogue: one value per row of D).
std::vector<float> referenceGemm(const GemmPlan& p, const float* a, const float* b,
                                 const float* bias) {
  std::vector<float> d(static_cast<size_t>(p.ldd * p.n));
  for (int64_t j = 0; j < p.n; ++j)
    for (int64_t i = 0; i < p.m; ++i) {
      double s = bias != nullptr ? bias[i] : 0.0;
      for (int64_t q = 0; q < p.k; ++q) {
        const double av = p.trans_a ? a[q + i * p.lda] : a[i + q * p.lda];
        const double bv = p.trans_b ? b[j + q * p.ldb] : b[q + j * p.ldb];
        s += av * bv;
      }
      d[static_cast<size_t>(i + j * p.ldd)] = static_cast<float>(s);
    }
  return d;
}

/// The plan's stored matrices fit the operands (the sizes cuBLASLt's layouts are made
/// of) and its product, run by the reference GEMM, is the CPU kernel's result 0.
void expectPlanMatchesCpu(SingleOp& op, const GemmPlan& p, int bias_operand = -1) {
  const Buffer& a = op.in(static_cast<size_t>(p.a));
  const Buffer& b = op.in(static_cast<size_t>(p.b));
  EXPECT_EQ(p.aRows() * p.aCols(), a.size());
  EXPECT_EQ(p.bRows() * p.bCols(), b.size());
  EXPECT_GE(p.lda, p.aRows());
  EXPECT_GE(p.ldb, p.bRows());
  EXPECT_EQ(p.ldd, p.m);  // D is dense: the result tensor as it is
  EXPECT_EQ(p.m * p.n, op.out(0).size());
  op.run();
  const float* bias = bias_operand >= 0 ? op.in(static_cast<size_t>(bias_operand)).f32() : nullptr;
  std::vector<float> d = referenceGemm(p, op.in(static_cast<size_t>(p.a)).f32(),
                                       op.in(static_cast<size_t>(p.b)).f32(), bias);
  EXPECT_LE(maxRelativeError(op.out(0).f32(), std::vector<double>(d.begin(), d.end()).data(),
                             op.out(0).size()),
            1e-5)
      << op.node().describe();
}

void fillAll(SingleOp& op, std::mt19937& rng) {
  for (size_t i = 0; i < op.node().numOperands(); ++i) op.in(i).fillUniform(rng);
}

// Odd sizes everywhere, so that a swapped dimension or leading dimension shows.
constexpr int64_t kN = 7, kI = 13, kO = 5;

TEST(CudaLinearPlan, ForwardWithBiasIsTheCpuLinear) {
  std::mt19937 rng(1);
  SingleOp op(Op::kLinear, {f32({kN, kI}), f32({kO, kI}), f32({kO})});
  fillAll(op, rng);
  expectPlanMatchesCpu(op, backend::cuda::linearPlan(kN, kI, kO), /*bias_operand=*/2);
}

TEST(CudaLinearPlan, ForwardWithoutBiasIsTheCpuLinear) {
  std::mt19937 rng(2);
  SingleOp op(Op::kLinear, {f32({kN, kI}), f32({kO, kI})});
  fillAll(op, rng);
  expectPlanMatchesCpu(op, backend::cuda::linearPlan(kN, kI, kO));
}

TEST(CudaLinearPlan, BackwardDataIsTheCpuOne) {
  std::mt19937 rng(3);
  SingleOp op(Op::kLinearBackwardData, {f32({kN, kO}), f32({kO, kI})});
  fillAll(op, rng);
  expectPlanMatchesCpu(op, backend::cuda::linearBackwardDataPlan(kN, kI, kO));
}

TEST(CudaLinearPlan, BackwardWeightIsTheCpuOne) {
  std::mt19937 rng(4);
  SingleOp op(Op::kLinearBackwardWeight, {f32({kN, kO}), f32({kN, kI})}, {{"bias", false}});
  fillAll(op, rng);
  expectPlanMatchesCpu(op, backend::cuda::linearBackwardWeightPlan(kN, kI, kO));
}

TEST(CudaLinearMath, ColumnSumsAreTheCpuBiasGradient) {
  std::mt19937 rng(5);
  const int64_t rows = 37, cols = 11;
  SingleOp op(Op::kLinearBackwardWeight, {f32({rows, cols}), f32({rows, 3})}, {{"bias", true}});
  fillAll(op, rng);
  op.run();
  std::vector<float> sums(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c)
    sums[static_cast<size_t>(c)] = backend::cuda::columnSum(op.in(0).f32(), rows, cols, c);
  std::vector<double> cpu(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) cpu[static_cast<size_t>(c)] = op.out(1).f32()[c];
  EXPECT_LE(maxRelativeError(sums.data(), cpu.data(), cols), 1e-5);
}

TEST(CudaLinearMath, Bf16ColumnSumsAccumulateInF32AndRoundOnce) {
  // 300 rows of 1 + 2^-7 (exact in bf16): the f32 sum 302.34375 is exact, and no bf16
  // accumulator could hold it (spacing 2 above 256); rounded once it is 302.
  const int64_t rows = 300, cols = 3;
  std::vector<uint16_t> m(static_cast<size_t>(rows * cols),
                          backend::cuda::floatToBf16(1.0f + 1.0f / 128));
  for (int64_t c = 0; c < cols; ++c) {
    const float s = backend::cuda::columnSum(m.data(), rows, cols, c);
    EXPECT_EQ(s, 302.34375f);
    EXPECT_EQ(backend::cuda::bf16ToFloat(backend::cuda::floatToBf16(s)), 302.0f);
  }
}

// ---- GPU ------------------------------------------------------------------------------

backend::DeviceOptions noTf32() { return tf32Options(false); }

/// `low` (bf16 activations, maybe f32 weights) on the GPU against `ref` (the same node in
/// f32) on the CPU, from the same bf16-rounded inputs: the CPU's bf16 kernels need
/// AVX512_BF16, which the GPU machine's CPU may lack.
void expectBf16CudaNearF32(SingleOp& ref, SingleOp& low, double tol = 2e-2) {
  shareInputs(ref, low);
  std::vector<Buffer> inputs;
  for (size_t i = 0; i < low.node().numOperands(); ++i) inputs.push_back(cloneBuffer(low.in(i)));
  CudaRun gpu = runOnCuda(low, inputs);
  ref.run();
  ASSERT_EQ(gpu.results.size(), ref.node().numResults());
  for (size_t r = 0; r < gpu.results.size(); ++r) {
    EXPECT_EQ(gpu.results[r].type(), low.out(r).type());
    EXPECT_LE(scaledError(gpu.results[r], ref.out(r)), tol)
        << low.node().describe() << " result " << r;
  }
}

TEST(CudaLinearKernels, ForwardF32MatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  for (bool bias : {true, false}) {
    std::vector<ir::TensorType> types{f32({37, 129}), f32({67, 129})};
    if (bias) types.push_back(f32({67}));
    SingleOp op(Op::kLinear, types);
    fillAll(op, rng);
    expectCudaMatchesCpu(op, 1e-4, noTf32());
    SingleOp tf32(Op::kLinear, types);
    fillAll(tf32, rng);
    expectCudaMatchesCpu(tf32, 1e-3);
  }
}

TEST(CudaLinearKernels, BackwardF32MatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(12);
  SingleOp data(Op::kLinearBackwardData, {f32({37, 67}), f32({67, 129})});
  fillAll(data, rng);
  expectCudaMatchesCpu(data, 1e-4, noTf32());
  for (bool bias : {true, false}) {
    SingleOp weight(Op::kLinearBackwardWeight, {f32({37, 67}), f32({37, 129})}, {{"bias", bias}});
    fillAll(weight, rng);
    expectCudaMatchesCpu(weight, 1e-4, noTf32());
    SingleOp tf32(Op::kLinearBackwardWeight, {f32({37, 67}), f32({37, 129})}, {{"bias", bias}});
    fillAll(tf32, rng);
    expectCudaMatchesCpu(tf32, 1e-3);
  }
}

TEST(CudaLinearKernels, Bf16WithF32MasterWeightsMatchesF32) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(13);
  const int64_t n = 33, in = 200, out = 70;
  {
    SingleOp ref(Op::kLinear, {f32({n, in}), f32({out, in}), f32({out})});
    SingleOp low(Op::kLinear, {bf16({n, in}), f32({out, in}), f32({out})});
    fillAll(ref, rng);
    expectBf16CudaNearF32(ref, low);
  }
  {
    SingleOp ref(Op::kLinear, {f32({n, in}), f32({out, in}), f32({out})});
    SingleOp low(Op::kLinear, {bf16({n, in}), bf16({out, in}), bf16({out})});
    fillAll(ref, rng);
    expectBf16CudaNearF32(ref, low);
  }
  {
    SingleOp ref(Op::kLinearBackwardData, {f32({n, out}), f32({out, in})});
    SingleOp low(Op::kLinearBackwardData, {bf16({n, out}), f32({out, in})});
    fillAll(ref, rng);
    expectBf16CudaNearF32(ref, low);
  }
  {
    SingleOp ref(Op::kLinearBackwardWeight, {f32({n, out}), f32({n, in})}, {{"bias", true}});
    SingleOp low(Op::kLinearBackwardWeight, {bf16({n, out}), bf16({n, in})}, {{"bias", true}});
    fillAll(ref, rng);
    expectBf16CudaNearF32(ref, low);
  }
}

TEST(CudaLinearKernels, RelaunchingGivesTheSameBits) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(14);
  SingleOp op(Op::kLinearBackwardWeight, {f32({64, 33}), f32({64, 47})}, {{"bias", true}});
  fillAll(op, rng);
  std::vector<Buffer> inputs;
  for (size_t i = 0; i < 2; ++i) inputs.push_back(cloneBuffer(op.in(i)));
  CudaRun once = runOnCuda(op, inputs, 1);
  CudaRun thrice = runOnCuda(op, inputs, 3);
  ASSERT_EQ(once.results.size(), 2u);
  ASSERT_EQ(thrice.results.size(), 2u);
  for (size_t r = 0; r < 2; ++r)
    EXPECT_EQ(std::memcmp(once.results[r].view().data, thrice.results[r].view().data,
                          static_cast<size_t>(once.results[r].type().bytes())),
              0)
        << "result " << r;
}

}  // namespace
}  // namespace tandem::testing

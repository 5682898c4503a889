// matmul, reshape, transpose, layer_norm and (log_)softmax on CUDA. Without a GPU: transpose's
// index math (permute_math.h), compiled here, against the CPU kernel (a oneDNN reorder) bit for
// bit. With a GPU: every op against the CPU backend (matmul within f32 rounding of another order of
// sums: cuBLASLt's; TF32 off).

#include <any>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/cuda/cuda_options.h"
#include "backend/cuda/permute_math.h"
#include "gtest/gtest.h"
#include "tests/cuda/cuda_test_util.h"

namespace tandem::testing {
namespace {

namespace cu = backend::cuda;
using ir::Op;

TEST(CudaMatmulMath, PermuteIsTheCpuTransposeBitForBit) {
  std::mt19937 rng(7);
  const std::vector<int64_t> shape{2, 3, 4, 5};
  const std::vector<std::vector<int64_t>> perms = {
      {0, 2, 1, 3}, {3, 2, 1, 0}, {1, 0, 3, 2}, {0, 1, 2, 3}, {2, 0, 3, 1}};
  for (const std::vector<int64_t>& perm : perms) {
    SingleOp t(Op::kTranspose, {f32({2, 3, 4, 5})}, {{"perm", perm}});
    fillFinite(t, rng, 2.0f);
    t.run();
    const cu::PermutePlan plan = cu::permutePlan(shape.data(), perm.data(), 4);
    for (int64_t i = 0; i < t.out().size(); ++i)
      ASSERT_EQ(t.out().f32()[i], t.in(0).f32()[cu::permuteSource(plan, i)]) << "element " << i;
  }
}

TEST(CudaMatmulKernels, MatmulMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(8);
  const backend::Settings own{{"allow_tf32", false}};
  const backend::DeviceOptions no_tf32{.settings = &own};
  struct Shapes {
    ir::Shape a, b;
    bool trans_a, trans_b;
  };
  for (const Shapes& s : std::vector<Shapes>{Shapes{{2, 3, 33, 17}, {2, 3, 17, 9}, false, false},
                                             Shapes{{6, 17, 33}, {6, 9, 17}, true, true},
                                             Shapes{{4, 50, 64}, {64, 96}, false, false},
                                             Shapes{{64, 50}, {4, 96, 64}, true, true}}) {
    for (ir::DType t : {ir::DType::kF32, ir::DType::kBF16}) {
      SingleOp op(Op::kMatmul, {ir::TensorType{t, s.a}, ir::TensorType{t, s.b}},
                  {{"trans_a", s.trans_a}, {"trans_b", s.trans_b}});
      fillFinite(op, rng, 2.0f);
      expectCudaMatchesCpu(op, t == ir::DType::kBF16 ? 8e-3 : 1e-5, no_tf32);
    }
  }
}

TEST(CudaMatmulKernels, TransposeAndReshapeMatchCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(9);
  for (ir::DType t : {ir::DType::kF32, ir::DType::kBF16}) {
    SingleOp tr(Op::kTranspose, {ir::TensorType{t, {2, 50, 4, 16}}},
                {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
    fillFinite(tr, rng, 2.0f);
    expectCudaMatchesCpu(tr, 0);
    SingleOp re(Op::kReshape, {ir::TensorType{t, {2, 50, 64}}},
                {{"shape", std::vector<int64_t>{100, 64}}});
    fillFinite(re, rng, 2.0f);
    expectCudaMatchesCpu(re, 0);
  }
}

// layer_norm, softmax, log_softmax and their backward ops: rows.cu's kernels, whose math
// CudaTransformerMath.* checks on the host against the same CPU cores; here the op kernels
// around them (operand order, bf16 storage, the axis split) on a GPU.
TEST(CudaRowsKernels, LayerNormAndSoftmaxMatchCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(10);
  const ir::TensorType f32_row{ir::DType::kF32, {64}}, stats{ir::DType::kF32, {4, 50}};
  for (ir::DType t : {ir::DType::kF32, ir::DType::kBF16}) {
    const double tol = t == ir::DType::kBF16 ? 8e-3 : 1e-5;
    const ir::TensorType x{t, {4, 50, 64}};
    SingleOp ln(Op::kLayerNorm, {x, f32_row, f32_row}, {{"eps", 1e-6}});
    fillFinite(ln, rng, 2.0f);
    expectCudaMatchesCpu(ln, tol);
    SingleOp lnb(Op::kLayerNormBackward, {x, x, stats, stats, f32_row}, {{"eps", 1e-6}});
    fillFinite(lnb, rng, 2.0f);
    for (int64_t i = 0; i < 200; ++i) lnb.in(3).f32()[i] = 0.5f + 0.25f * lnb.in(3).f32()[i];
    expectCudaMatchesCpu(lnb, tol);
    for (Op op : {Op::kSoftmax, Op::kLogSoftmax, Op::kSoftmaxBackward, Op::kLogSoftmaxBackward})
      for (int64_t axis : {-1, 1}) {
        const bool backward = op == Op::kSoftmaxBackward || op == Op::kLogSoftmaxBackward;
        SingleOp s(op,
                   backward ? std::vector<ir::TensorType>{x, x} : std::vector<ir::TensorType>{x},
                   {{"axis", axis}});
        fillFinite(s, rng, 2.0f);
        expectCudaMatchesCpu(s, tol);
      }
  }
}

}  // namespace
}  // namespace tandem::testing

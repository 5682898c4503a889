// Which cuDNN algorithm and which matrix-product call a kernel keeps: the first candidate
// that runs, as PyTorch walks them, not the first one the heuristics list. Without a GPU:
// the walks over fake libraries that refuse chosen candidates (conv_descriptors.h's
// chooseRunnableAlgo, gemm_choice.h's chooseRunnableGemm). With one: the corners where few
// algorithms run (FMA-only NHWC convolutions, the one-channel bf16 stem, LeNet's 10-class
// bf16 head with its bias, cudnnFind's measured choice) against the CPU backend.

#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "backend/cpu/cpu_info.h"
#include "backend/cuda/conv_descriptors.h"
#include "backend/cuda/gemm_choice.h"
#include "backend/cuda/host_device.h"
#include "gtest/gtest.h"
#include "tests/cuda/cuda_test_util.h"

namespace tandem::testing {
namespace {

namespace cu = backend::cuda;
using cu::AlgoCandidate;
using cu::AlgoChoice;
using ir::DType;

/// cuDNN as the walk sees it: two lists, and the algorithms that refuse to run.
class FakeCudnn final : public cu::ConvAlgoTrials {
 public:
  std::vector<AlgoCandidate> heuristic, measurements;
  std::set<int> refusing;
  bool heuristics_fail = false;
  std::vector<std::string> calls;

  absl::StatusOr<std::vector<AlgoCandidate>> heuristics() override {
    calls.push_back("heuristics");
    if (heuristics_fail) return absl::InternalError("CUDNN_STATUS_INTERNAL_ERROR");
    return heuristic;
  }
  absl::StatusOr<std::vector<AlgoCandidate>> measured() override {
    calls.push_back("measured");
    return measurements;
  }
  absl::Status tryRun(const AlgoChoice& c) override {
    calls.push_back(absl::StrCat("run ", c.algo));
    if (refusing.count(c.algo))
      return absl::InternalError("cudnnConvolutionForward failed: CUDNN_STATUS_NOT_SUPPORTED");
    return absl::OkStatus();
  }
};

AlgoCandidate ok(int algo, cudnnMathType_t math = CUDNN_DEFAULT_MATH,
                 cudnnDeterminism_t d = CUDNN_DETERMINISTIC) {
  return {algo, CUDNN_STATUS_SUCCESS, d, math};
}

// The heuristics' first candidate refuses (as FMA-only NHWC and the bf16 stem may): the
// next one that runs is taken, and the list is never measured.
TEST(CudaAlgorithmChoice, ConvolutionWalksPastAnAlgorithmThatRefuses) {
  const auto exact = *cu::convTypes(DType::kF32, DType::kF32, /*allow_tf32=*/false);
  FakeCudnn cudnn;
  cudnn.heuristic = {ok(1, CUDNN_TENSOR_OP_MATH), ok(6), ok(0),
                     ok(2, CUDNN_DEFAULT_MATH, CUDNN_NON_DETERMINISTIC)};
  cudnn.refusing = {6};
  // Taking the first usable candidate, as the kernels did, picks the one that refuses.
  EXPECT_EQ(cu::chooseAlgo(cudnn.heuristic, exact)->algo, 6);
  auto choice = cu::chooseRunnableAlgo(cudnn, exact, /*measure=*/false);
  ASSERT_TRUE(choice.ok()) << choice.status();
  // 1 is tensor-op (not usable without TF32); 6 refuses; 0 runs, with FMA math.
  EXPECT_EQ(*choice, (AlgoChoice{0, CUDNN_FMA_MATH}));
  EXPECT_EQ(cudnn.calls, (std::vector<std::string>{"heuristics", "run 6", "run 0"}));
}

// A planned workspace bounds the walk: an algorithm that needs more than the plan leaves
// cuDNN is passed over even when it would run, and with nothing within it the error says
// how much there was.
TEST(CudaAlgorithmChoice, ConvolutionTakesOnlyAlgorithmsWithinThePlannedWorkspace) {
  const auto exact = *cu::convTypes(DType::kF32, DType::kF32, /*allow_tf32=*/false);
  FakeCudnn cudnn;
  AlgoCandidate big = ok(6), small = ok(0);
  big.memory = int64_t{64} << 20;
  small.memory = int64_t{1} << 20;
  cudnn.heuristic = {big, small};
  auto choice = cu::chooseRunnableAlgo(cudnn, exact, /*measure=*/false, int64_t{32} << 20);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->algo, 0);
  EXPECT_EQ(cudnn.calls, (std::vector<std::string>{"heuristics", "run 0"}));
  // Unbounded (no plan: the kernel tests), the faster one is taken.
  EXPECT_EQ(cu::chooseAlgo(cudnn.heuristic, exact)->algo, 6);
  absl::StatusOr<AlgoChoice> none = cu::chooseAlgo(cudnn.heuristic, exact, int64_t{512} << 10);
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(absl::StrContains(none.status().message(), "within 524288 bytes of workspace"))
      << none.status();
}

// Deterministic algorithms are tried first; a nondeterministic one only when none of them
// runs.
TEST(CudaAlgorithmChoice, ConvolutionTriesDeterministicAlgorithmsFirst) {
  const auto tf32 = *cu::convTypes(DType::kF32, DType::kF32, true);
  FakeCudnn cudnn;
  cudnn.heuristic = {ok(7, CUDNN_DEFAULT_MATH, CUDNN_NON_DETERMINISTIC), ok(1), ok(0)};
  cudnn.refusing = {1, 0};
  auto choice = cu::chooseRunnableAlgo(cudnn, tf32, false);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->algo, 7);
  EXPECT_EQ(cudnn.calls, (std::vector<std::string>{"heuristics", "run 1", "run 0", "run 7"}));
}

// When no heuristic candidate runs, cudnnFind's measured list is tried; with
// --conv-algorithm measure it comes first.
TEST(CudaAlgorithmChoice, ConvolutionFallsBackToMeasuredAlgorithms) {
  const auto bf16 = *cu::convTypes(DType::kBF16, DType::kF32, true);
  FakeCudnn cudnn;
  cudnn.heuristic = {ok(1), ok(0)};
  cudnn.measurements = {ok(5), ok(1)};
  cudnn.refusing = {0, 1};
  auto fallback = cu::chooseRunnableAlgo(cudnn, bf16, false);
  ASSERT_TRUE(fallback.ok()) << fallback.status();
  EXPECT_EQ(fallback->algo, 5);
  EXPECT_EQ(cudnn.calls,
            (std::vector<std::string>{"heuristics", "run 1", "run 0", "measured", "run 5"}));

  FakeCudnn measuring;
  measuring.heuristic = {ok(1)};
  measuring.measurements = {ok(4), ok(1)};
  auto measured = cu::chooseRunnableAlgo(measuring, bf16, /*measure=*/true);
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_EQ(measured->algo, 4);
  EXPECT_EQ(measuring.calls, (std::vector<std::string>{"measured", "run 4"}));

  // A failed heuristics query is not the end either.
  FakeCudnn broken;
  broken.heuristics_fail = true;
  broken.measurements = {ok(3)};
  auto after_error = cu::chooseRunnableAlgo(broken, bf16, false);
  ASSERT_TRUE(after_error.ok()) << after_error.status();
  EXPECT_EQ(after_error->algo, 3);
}

// Nothing runs: one error listing every refusal, never a guess.
TEST(CudaAlgorithmChoice, ConvolutionThatNothingRunsIsOneErrorListingTheRefusals) {
  const auto exact = *cu::convTypes(DType::kF32, DType::kF32, false);
  FakeCudnn cudnn;
  cudnn.heuristic = {ok(1), ok(0)};
  cudnn.measurements = {ok(2)};
  cudnn.refusing = {0, 1, 2};
  auto choice = cu::chooseRunnableAlgo(cudnn, exact, false);
  ASSERT_FALSE(choice.ok());
  const std::string m(choice.status().message());
  EXPECT_TRUE(absl::StrContains(m, "without TF32")) << m;
  for (const char* algo : {"algorithm 1 (FMA math)", "algorithm 0 (FMA math)",
                           "algorithm 2 (FMA math)", "CUDNN_STATUS_NOT_SUPPORTED"})
    EXPECT_TRUE(absl::StrContains(m, algo)) << algo << " in: " << m;
}

/// cuBLASLt and cuBLAS as the walk sees them.
class FakeBlas final : public cu::GemmTrials {
 public:
  std::vector<cu::GemmCandidate> lt;
  bool lt_unsupported = false;
  std::set<int> refusing;  // lt indices; -1: cuBLAS
  std::vector<std::string> calls;

  absl::StatusOr<std::vector<cu::GemmCandidate>> heuristics() override {
    calls.push_back("heuristics");
    if (lt_unsupported) return absl::UnimplementedError("CUBLAS_STATUS_NOT_SUPPORTED");
    return lt;
  }
  absl::Status tryRun(const cu::GemmCandidate& c) override {
    calls.push_back(cu::describeGemm(c));
    if (refusing.count(c.lt)) return absl::InternalError("CUBLAS_STATUS_NOT_SUPPORTED");
    return absl::OkStatus();
  }
};

// Several heuristic results, tried in order: the first refuses, the second runs.
TEST(CudaAlgorithmChoice, MatrixProductTriesSeveralCublasLtResults) {
  FakeBlas blas;
  blas.lt = {{0, 0}, {1, 4096}, {2, 0}};
  blas.refusing = {0};
  auto choice = cu::chooseRunnableGemm(blas);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(*choice, (cu::GemmCandidate{1, 4096}));
  EXPECT_EQ(blas.calls, (std::vector<std::string>{"heuristics", "cuBLASLt heuristic result 0",
                                                  "cuBLASLt heuristic result 1"}));
}

// cuBLASLt lists nothing (or nothing of its runs): plain cuBLAS, the fallback for shapes
// it refuses (LeNet's 10-class head in bf16 with a bias epilogue is the likeliest).
TEST(CudaAlgorithmChoice, MatrixProductFallsBackToPlainCublas) {
  FakeBlas none;
  none.lt_unsupported = true;
  auto a = cu::chooseRunnableGemm(none);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->cublas());

  FakeBlas refused;
  refused.lt = {{0, 0}, {1, 0}};
  refused.refusing = {0, 1};
  auto b = cu::chooseRunnableGemm(refused);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(b->cublas());
  EXPECT_EQ(refused.calls.back(), "cuBLAS (cublasGemmEx)");

  FakeBlas nothing;
  nothing.lt_unsupported = true;
  nothing.refusing = {-1};
  auto c = cu::chooseRunnableGemm(nothing);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::StrContains(c.status().message(), "cuBLASLt's heuristics")) << c.status();
  EXPECT_TRUE(absl::StrContains(c.status().message(), "cuBLAS (cublasGemmEx)")) << c.status();
}

// ---- On a GPU ----------------------------------------------------------------------------

void fillAll(SingleOp& op, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (size_t i = 0; i < op.node().numOperands(); ++i) {
    Buffer& b = op.in(i);
    if (b.type().dtype == DType::kBF16) {
      for (int64_t k = 0; k < b.size(); ++k)
        reinterpret_cast<uint16_t*>(b.view().data)[k] = cu::floatToBf16(u(rng));
    } else {
      b.fillUniform(rng);
    }
  }
}

// LeNet's head in bf16 with f32 master weights and a bias: [256, 500] x [10, 500]^T + b,
// through whichever call runs (cuBLASLt's bias epilogue, or cuBLAS with the bias copied
// in), against the CPU kernel.
TEST(CudaAlgorithmChoice, Bf16TenClassHeadWithBiasMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  if (!backend::cpu::hostCpuInfo().bf16) GTEST_FAIL() << "this CPU has no bf16 instructions";
  SingleOp op(ir::Op::kLinear, {{DType::kBF16, {256, 500}}, f32({10, 500}), f32({10})});
  fillAll(op, 7);
  expectCudaMatchesCpu(op, 2e-2);
}

// The corners where few cuDNN algorithms run: a one-channel bf16 stem and an f32
// convolution without TF32 (FMA math only; CudaNhwcKernels.ConvolutionsMatchCpu covers it
// in NHWC), each pass, with the heuristics' choice and with cudnnFind's, against the CPU.
TEST(CudaAlgorithmChoice, FewAlgorithmCornersRunAndMatchCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  struct Corner {
    const char* what;
    DType act, weight;
    ir::Shape x, w;
    bool allow_tf32;
    double tolerance;
  };
  const Corner corners[] = {
      {"bf16 stem, one channel",
       DType::kBF16,
       DType::kF32,
       {8, 1, 28, 28},
       {20, 1, 5, 5},
       true,
       2e-2},
      {"f32 without TF32", DType::kF32, DType::kF32, {4, 16, 14, 14}, {32, 16, 3, 3}, false, 1e-4},
  };
  for (const Corner& c : corners) {
    if (c.act == DType::kBF16 && !backend::cpu::hostCpuInfo().bf16) {
      ADD_FAILURE() << c.what << ": this CPU has no bf16 instructions for the reference";
      continue;
    }
    for (backend::ConvAlgorithm algorithm :
         {backend::ConvAlgorithm::kAuto, backend::ConvAlgorithm::kMeasure}) {
      SCOPED_TRACE(absl::StrCat(
          c.what, algorithm == backend::ConvAlgorithm::kMeasure ? ", measured" : ", heuristic"));
      const ir::Shape y = {c.x[0], c.w[0], c.x[2] - c.w[2] + 1, c.x[3] - c.w[3] + 1};
      const SingleOp::Attrs attrs = {{"stride", int64_t{1}}, {"pad", int64_t{0}}};
      const backend::Settings own{{"allow_tf32", c.allow_tf32},
                                  {"conv_algorithm", backend::toString(algorithm)}};
      const backend::DeviceOptions options{.settings = &own};
      SingleOp forward(ir::Op::kConv2d, {{c.act, c.x}, {c.weight, c.w}}, attrs);
      fillAll(forward, 11);
      expectCudaMatchesCpu(forward, c.tolerance, options);
      SingleOp data(ir::Op::kConv2dBackwardData, {{c.act, y}, {c.weight, c.w}, {c.act, c.x}},
                    attrs);
      fillAll(data, 12);
      expectCudaMatchesCpu(data, c.tolerance, options);
      SingleOp filter(ir::Op::kConv2dBackwardFilter, {{c.act, y}, {c.act, c.x}, {c.weight, c.w}},
                      {{"stride", int64_t{1}}, {"pad", int64_t{0}}, {"bias", false}});
      fillAll(filter, 13);
      expectCudaMatchesCpu(filter, c.tolerance, options);
    }
  }
}

}  // namespace
}  // namespace tandem::testing

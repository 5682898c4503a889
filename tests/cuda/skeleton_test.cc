// The CUDA backend without a GPU: what it says, and what it checks before any kernel.

#include "backend/backend.h"
#include "backend/backends.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_kernel.h"
#include "backend/cuda/cuda_status.h"
#include "backend/cuda/target_info.h"
#include "gtest/gtest.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/device_kinds.h"

namespace tandem::testing {
namespace {

TEST(CudaBackend, IsRegisteredInABuildWithNvcc) {
  backend::registerBackends();
  auto b = backend::backendFor(::tandem::testing::kind("cuda"));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->kind(), ::tandem::testing::kind("cuda"));
  EXPECT_EQ((*b)->alignment() % 256, 0);
  EXPECT_TRUE((*b)->target().multi_tensor_update);
  EXPECT_TRUE((*b)->target().shares_devices);
}

// The table lacks exactly what target_info.h's lacksKernel says (fuse-conv-relu-pool's
// pair), so the pipeline, which asks TargetInfo::lacks_kernel, never writes an op that
// would fail to load on a GPU.
TEST(CudaKernelTable, LacksOnlyWhatTheTargetSays) {
  EXPECT_EQ(
      backend::cuda::kernelTable().lacking(),
      (std::vector<ir::Op>{ir::Op::kConv2dReluAvgPool, ir::Op::kConv2dReluAvgPoolBackwardFilter}));
  const ir::TargetInfo info = backend::cuda::targetInfo();
  ASSERT_NE(info.lacks_kernel, nullptr);
  for (const ir::OpInfo& op : ir::allOps())
    EXPECT_EQ(backend::cuda::kernelTable().has(op.op),
              !op.has(ir::kRuntime) && !info.lacks_kernel(op.op))
        << op.name;
}

TEST(CudaBackend, WithoutAGpuMakingADeviceSaysWhatCudaReported) {
  if (whyNoGpu().empty()) GTEST_SKIP() << "this machine has a GPU";
  auto d =
      backend::cuda::cudaBackend().createDevice(ir::Device{::tandem::testing::kind("cuda"), 0}, {});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(d.status().message().find("cuda:0: no CUDA GPU on this machine: cudaGetDeviceCount"),
            std::string::npos)
      << d.status();
}

TEST(CudaStatus, NamesWhereTheCallAndTheLibrarysWords) {
  absl::Status s = backend::cuda::check(cudaErrorMemoryAllocation, "cudaMalloc(&p, 64)", "cuda:1");
  EXPECT_EQ(s.message(),
            "cuda:1: cudaMalloc(&p, 64) failed: cudaErrorMemoryAllocation (out of memory)");
  s = backend::cuda::check(CUDNN_STATUS_BAD_PARAM, "cudnnConvolutionForward(...)",
                           "%conv1 (conv2d @cuda:0)");
  EXPECT_NE(s.message().find("%conv1 (conv2d @cuda:0): cudnnConvolutionForward(...) failed: "
                             "CUDNN_STATUS_BAD_PARAM"),
            std::string::npos)
      << s;
  s = backend::cuda::check(CUBLAS_STATUS_INVALID_VALUE, "cublasGemmEx", "%fc (linear @cuda:0)");
  EXPECT_NE(s.message().find("CUBLAS_STATUS_INVALID_VALUE"), std::string::npos) << s;
  s = backend::cuda::check(ncclInvalidUsage, "ncclCommInitAll", "all_reduce group");
  EXPECT_NE(s.message().find("invalid usage"), std::string::npos) << s;
  EXPECT_TRUE(backend::cuda::check(cudaSuccess, "x", "y").ok());
}

}  // namespace
}  // namespace tandem::testing

// A CUDA device's memory: the kernels' workspace reaches its size while the module loads
// and never moves afterwards (a recorded step points into it), grids are sized for the GPU
// they run on, and new buffers read as zeros on every stream. Without a GPU: the
// workspace's rules over host memory, and the grid arithmetic. With one: the zeros, and
// the grid on the machine's own GPU.

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/grid.h"
#include "backend/cuda/workspace.h"
#include "gtest/gtest.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/device_kinds.h"

namespace tandem::testing {
namespace {

namespace cu = backend::cuda;

/// A workspace over host memory that logs what happens to it.
struct LoggedWorkspace {
  std::vector<std::string> log;
  cu::Workspace workspace{
      "cuda:0", cu::Workspace::Memory{.allocate = [this](int64_t bytes) -> absl::StatusOr<void*> {
                                        log.push_back(absl::StrCat("allocate ", bytes));
                                        return std::malloc(static_cast<size_t>(bytes));
                                      },
                                      .release =
                                          [this](void* p) {
                                            log.push_back("release");
                                            std::free(p);
                                          },
                                      .idle = [this]() -> absl::Status {
                                        log.push_back("idle");
                                        return absl::OkStatus();
                                      }}};
};

// Kernels reserve as they are made: the buffer grows to the largest need while the module
// loads (waiting for the device before it lets the smaller one go), and a launch only
// looks it up.
TEST(CudaWorkspace, GrowsWhileKernelsAreMadeAndLaunchesNeverAllocate) {
  LoggedWorkspace w;
  ASSERT_TRUE(w.workspace.reserve(1000, "%conv1 (conv2d @cuda:0)").ok());
  ASSERT_TRUE(w.workspace.reserve(500, "%fc (linear @cuda:0)").ok());
  ASSERT_TRUE(w.workspace.reserve(4000, "%conv2 (conv2d @cuda:0)").ok());
  EXPECT_EQ(w.log, (std::vector<std::string>{"allocate 1000", "idle", "release", "allocate 4000"}));
  EXPECT_EQ(w.workspace.bytes(), 4000);
  EXPECT_EQ(w.workspace.largest(), "%conv2 (conv2d @cuda:0)");
  w.log.clear();
  auto a = w.workspace.get(1000, "%conv1 (conv2d @cuda:0)");
  auto b = w.workspace.get(4000, "%conv2 (conv2d @cuda:0)");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);  // one buffer for all
  EXPECT_TRUE(w.log.empty());
}

// The hazard of a graph run first after another was recorded (an evaluation after epoch
// 1): nothing may move the buffer the recording points into. After freeze() (a recording
// began) a larger need is an error naming the kernel, and a launch that asks for more
// than its kernel reserved is one too; the buffer stays where it was.
TEST(CudaWorkspace, NeverMovesOnceAStepIsRecorded) {
  LoggedWorkspace w;
  ASSERT_TRUE(w.workspace.reserve(1000, "%conv1 (conv2d @cuda:0)").ok());
  const void* before = *w.workspace.get(1000, "%conv1 (conv2d @cuda:0)");
  w.workspace.freeze();
  w.log.clear();
  absl::Status grown = w.workspace.reserve(8000, "%eval.conv (conv2d @cuda:0)");
  ASSERT_FALSE(grown.ok());
  EXPECT_TRUE(absl::StrContains(grown.message(), "%eval.conv (conv2d @cuda:0)")) << grown;
  EXPECT_TRUE(absl::StrContains(grown.message(), "may not grow")) << grown;
  auto asked = w.workspace.get(8000, "%eval.conv (conv2d @cuda:0)");
  ASSERT_FALSE(asked.ok());
  EXPECT_TRUE(absl::StrContains(asked.status().message(), "%eval.conv")) << asked.status();
  EXPECT_TRUE(w.log.empty()) << "the recorded step's buffer moved";
  EXPECT_EQ(*w.workspace.get(1000, "%conv1 (conv2d @cuda:0)"), before);
  // A need within the buffer is still fine.
  EXPECT_TRUE(w.workspace.reserve(900, "%late (linear @cuda:0)").ok());
}

// Grids fill the GPU they run on, 16 blocks per multiprocessor, whatever it is (the
// kernels had an H100's 132 SMs written in, eight times).
TEST(CudaGrid, SizedByTheGpusMultiprocessors) {
  EXPECT_EQ(cu::gridBlocks(1, 256, 132), 1u);
  EXPECT_EQ(cu::gridBlocks(256 * 10 + 1, 256, 132), 11u);
  EXPECT_EQ(cu::gridBlocks(int64_t{1} << 40, 256, 132), 132u * 16);
  EXPECT_EQ(cu::gridBlocks(int64_t{1} << 40, 256, 108), 108u * 16);  // A100
  EXPECT_EQ(cu::gridBlocks(int64_t{1} << 40, 256, 78), 78u * 16);    // a cut-down part
  EXPECT_EQ(cu::gridBlocks(0, 256, 132), 1u);
  EXPECT_EQ(cu::gridBlocks(int64_t{1} << 40, 256, 0), 16u);  // no answer: still runs
}

TEST(CudaGrid, AsksTheGpuItRunsOn) {
  TANDEM_SKIP_WITHOUT_GPU();
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(cu::gridBlocks(int64_t{1} << 40, 256), static_cast<unsigned>(sms * 16));
  int cached = 0;
  ASSERT_EQ(cu::gpuMultiprocessors(0, &cached), cudaSuccess);
  EXPECT_EQ(cached, sms);
}

// New memory reads as zeros from every stream at once, the comm stream's copy included:
// the zero fill runs on the device's compute stream and is waited for (a plain cudaMemset
// runs on the legacy stream, which the non-blocking streams do not wait for).
TEST(CudaDeviceMemory, NewBuffersAreZeroOnEveryStream) {
  TANDEM_SKIP_WITHOUT_GPU();
  auto device = cu::cudaBackend().createDevice(ir::Device{::tandem::testing::kind("cuda"), 0}, {});
  ASSERT_TRUE(device.ok()) << device.status();
  constexpr int64_t kBytes = int64_t{256} << 20;  // large enough for a fill to take a while
  for (int round = 0; round < 4; ++round) {
    // Dirty memory for the allocator to hand out again.
    {
      auto dirty = (*device)->allocate(kBytes);
      ASSERT_TRUE(dirty.ok()) << dirty.status();
      ASSERT_EQ(cudaMemset(dirty->data(), 0x5A, static_cast<size_t>(kBytes)), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    }
    auto fresh = (*device)->allocate(kBytes);
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    const ir::TensorType t{ir::DType::kF32, {kBytes / 4}};
    Buffer host(t);
    ASSERT_TRUE((*device)->copyToHost(fresh->view(t), host.view(), (*device)->commStream()).ok());
    ASSERT_TRUE((*device)->commStream().synchronize().ok());
    const auto* bytes = static_cast<const unsigned char*>(host.view().data);
    int64_t nonzero = 0;
    for (int64_t i = 0; i < kBytes; ++i) nonzero += bytes[i] != 0;
    EXPECT_EQ(nonzero, 0) << "round " << round;
  }
}

}  // namespace
}  // namespace tandem::testing

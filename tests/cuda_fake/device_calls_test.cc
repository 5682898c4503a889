// The CUDA backend's own code over a fake CUDA runtime (fake_runtime.h), without a GPU:
// the order of the calls it makes where the order is the point.

#include <algorithm>
#include <string>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_stream.h"
#include "gtest/gtest.h"
#include "tests/cuda_fake/fake_runtime.h"
#include "tests/device_kinds.h"

namespace tandem::testing {
namespace {

namespace cu = backend::cuda;

// A new buffer is zeroed on the device's compute stream (s1: the first stream a device
// makes) and the fill is waited for before allocate returns, so every stream, the
// non-blocking comm and prefetch streams included, sees zeros. A plain cudaMemset ran on
// the legacy default stream, which the non-blocking streams do not wait for.
TEST(CudaDeviceCalls, AllocationsAreZeroedOnTheComputeStreamAndWaitedFor) {
  auto device = cu::cudaBackend().createDevice(ir::Device{::tandem::testing::kind("cuda"), 0}, {});
  ASSERT_TRUE(device.ok()) << device.status();
  fake_cuda::reset();
  auto buffer = (*device)->allocate(4096);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  const std::vector<std::string>& calls = fake_cuda::calls();
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "cudaMemset"), 0)
      << "a zero fill on the legacy default stream";
  const auto fill = std::find(calls.begin(), calls.end(), "cudaMemsetAsync s1");
  ASSERT_NE(fill, calls.end());
  EXPECT_NE(std::find(fill, calls.end(), "cudaStreamSynchronize s1"), calls.end())
      << "the fill is not waited for";
  const auto* bytes = static_cast<const unsigned char*>(buffer->data());
  EXPECT_TRUE(std::all_of(bytes, bytes + 4096, [](unsigned char b) { return b == 0; }));
}

// A stamp is a timing event recorded on the stream, read when the stream synchronizes: no
// host callback (which would stall the stream for a round trip through the host at every
// node of a traced step). Its time is the host clock at the synchronize, less the GPU
// time from the stamp to then.
TEST(CudaDeviceCalls, StampsAreTimingEventsReadAtSynchronize) {
  auto device = cu::cudaBackend().createDevice(ir::Device{::tandem::testing::kind("cuda"), 0}, {});
  ASSERT_TRUE(device.ok()) << device.status();
  backend::Stream& compute = (*device)->computeStream();
  fake_cuda::reset();
  int64_t first = -1, second = -1;
  fake_cuda::gpuMilliseconds() = 1.0;
  compute.stamp([&](int64_t ns) { first = ns; });
  fake_cuda::gpuMilliseconds() = 3.5;
  compute.stamp([&](int64_t ns) { second = ns; });
  EXPECT_EQ(first, -1) << "read before the stream synchronized";
  fake_cuda::gpuMilliseconds() = 10.0;
  const int64_t before = backend::steadyNowNs();
  ASSERT_TRUE(compute.synchronize().ok());
  const int64_t after = backend::steadyNowNs();
  const std::vector<std::string>& calls = fake_cuda::calls();
  for (const std::string& c : calls)
    EXPECT_EQ(c.find("cudaLaunchHostFunc"), std::string::npos) << c;
  EXPECT_EQ(second - first, 2'500'000);  // 2.5 ms apart on the GPU's clock
  EXPECT_LE(second, after - 6'500'000);  // 6.5 ms before the synchronize's reading
  EXPECT_GE(second, before - 6'500'000 - 1'000'000);
}

}  // namespace
}  // namespace tandem::testing

// The input pipeline's ordering on a GPU (Device::prefetchStream, backend/backend.h): the
// next batch's slice is copied from pinned staging into one of two device buffers on the
// prefetch stream while the comm stream copies the other buffer into the step's memory,
// each read ordered after its copy by the slot's event, as the executor orders them.
// The buffers are large (24 MiB a slice), so that a missing wait would show as a step
// that read a stale or half-copied slice. Without a GPU the test skips.

#include <algorithm>
#include <array>
#include <memory>

#include "backend/backend.h"
#include "backend/cuda/cuda_device.h"
#include "gtest/gtest.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/device_kinds.h"

namespace tandem::testing {
namespace {

using backend::DeviceBuffer;

TEST(CudaPrefetch, EveryStepReadsExactlyItsBatchsSlice) {
  TANDEM_SKIP_WITHOUT_GPU();
  auto made =
      backend::cuda::cudaBackend().createDevice(ir::Device{::tandem::testing::kind("cuda"), 0}, {});
  ASSERT_TRUE(made.ok()) << made.status();
  backend::Device& d = **made;
  ASSERT_NE(d.prefetchStream(), nullptr);
  backend::Stream& prefetch = *d.prefetchStream();
  backend::Stream& comm = d.commStream();

  constexpr int64_t kRow = int64_t{1} << 21;  // floats per row: 8 MiB
  constexpr int64_t kOffset = 2;              // the device's rows: 2, 3 and 4 of 6
  const ir::TensorType whole{ir::DType::kF32, {6, kRow}};
  const ir::TensorType part{ir::DType::kF32, {3, kRow}};
  std::array<DeviceBuffer, 2> staging, slices;
  std::array<std::unique_ptr<backend::Event>, 2> copied;
  for (int s = 0; s < 2; ++s) {
    auto host = d.allocateHost(whole.bytes());
    auto slice = d.allocate(part.bytes());
    ASSERT_TRUE(host.ok() && slice.ok());
    staging[s] = std::move(*host);
    slices[s] = std::move(*slice);
    copied[s] = prefetch.createEvent();
  }
  auto arena = d.allocate(part.bytes());
  auto out = d.allocateHost(part.bytes());
  ASSERT_TRUE(arena.ok() && out.ok());

  // Batch k, row r holds k * 8 + r everywhere: exact in f32.
  auto handOver = [&](int slot, int batch) {
    copied[slot]->synchronize();  // this slot's last copy out of the staging is done
    float* p = static_cast<float*>(staging[slot].data());
    for (int64_t r = 0; r < 6; ++r)
      std::fill(p + r * kRow, p + (r + 1) * kRow, static_cast<float>(batch * 8 + r));
    absl::Status s = d.copySliceFromHost(staging[slot].view(whole), slices[slot].view(part), 0,
                                         kOffset, prefetch);
    prefetch.record(*copied[slot]);
    return s;
  };
  constexpr int kSteps = 6;
  ASSERT_TRUE(handOver(0, 0).ok());
  for (int k = 0; k < kSteps; ++k) {
    const int slot = k % 2;
    // The step: its comm stream waits for its slot's copy, then copies on the device.
    comm.wait(*copied[slot]);
    ASSERT_TRUE(d.copyIntoSlice(slices[slot].view(part), arena->view(part), 0, 0, comm).ok());
    ASSERT_TRUE(d.copyToHost(arena->view(part), out->view(part), comm).ok());
    // The next batch, handed over while the step runs, into the other slot.
    if (k + 1 < kSteps) {
      ASSERT_TRUE(handOver(1 - slot, k + 1).ok());
    }
    ASSERT_TRUE(comm.synchronize().ok());
    ASSERT_TRUE(prefetch.synchronize().ok());
    const float* got = static_cast<const float*>(out->data());
    for (int64_t r = 0; r < 3; ++r) {
      const float want = static_cast<float>(k * 8 + kOffset + r);
      int64_t wrong = 0;
      for (int64_t i = 0; i < kRow; ++i) wrong += got[r * kRow + i] != want;
      EXPECT_EQ(wrong, 0) << "step " << k << ", row " << r << ": expected " << want;
    }
  }
}

}  // namespace
}  // namespace tandem::testing

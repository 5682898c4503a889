#pragma once

// GPU tests: one node run through the CUDA kernel table on cuda:0 and through the CPU
// one on the same inputs (tests/backend/kernel_test_util.h's SingleOp), results
// compared. Without a GPU they skip, saying what CUDA reported.

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_kernel.h"
#include "backend/cuda/cuda_options.h"
#include "gtest/gtest.h"
#include "tests/backend/kernel_test_util.h"
#include "tests/device_kinds.h"

namespace tandem::testing {

/// Why GPU tests cannot run on this machine, or "" when they can.
inline std::string whyNoGpu() {
  absl::StatusOr<int> count = backend::cuda::gpuCount();
  return count.ok() ? "" : std::string(count.status().message());
}

/// Skips the test (counted as skipped, with the reason) on a machine without a GPU.
#define TANDEM_SKIP_WITHOUT_GPU()                                     \
  if (std::string why_no_gpu = ::tandem::testing::whyNoGpu(); !why_no_gpu.empty()) \
  GTEST_SKIP() << "needs a GPU: " << why_no_gpu

/// A copy of a buffer (same type, same bytes).
inline Buffer cloneBuffer(Buffer& b) {
  Buffer c(b.type());
  std::memcpy(c.view().data, b.view().data, static_cast<size_t>(b.type().bytes()));
  return c;
}

/// What a node left on the GPU: its results and its operands (state written in place).
struct CudaRun {
  std::vector<Buffer> results;
  std::vector<Buffer> operands;
};

/// Device options with TF32 allowed or not (the CUDA options they point at live as long as
/// the program).
inline backend::DeviceOptions tf32Options(bool allow) {
  static const backend::Settings kNoTf32{{"allow_tf32", false}};
  return allow ? backend::DeviceOptions{} : backend::DeviceOptions{.settings = &kNoTf32};
}

/// Runs `op`'s node on cuda:0 from `inputs` (one buffer per operand): operands copied
/// in, results poisoned with 0xFF bytes (NaN in f32 and bf16) so that an element the
/// kernel forgets shows, launched `runs` times, synchronized, everything copied back.
inline CudaRun runOnCuda(SingleOp& op, std::vector<Buffer>& inputs, int runs = 1,
                         backend::DeviceOptions options = {}) {
  CudaRun out;
  auto device = backend::cuda::cudaBackend().createDevice(
      ir::Device{::tandem::testing::kind("cuda"), 0}, options);
  EXPECT_TRUE(device.ok()) << device.status();
  if (!device.ok()) return out;
  backend::Device& d = **device;
  auto kernel = d.makeKernel(op.node());
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  if (!kernel.ok()) return out;
  std::vector<backend::DeviceBuffer> in_mem, out_mem;
  std::vector<backend::TensorView> in_views, out_views;
  for (Buffer& b : inputs) {
    auto m = d.allocate(b.type().bytes());
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return out;
    in_views.push_back(m->view(b.type()));
    EXPECT_TRUE(d.copyFromHost(b.view(), in_views.back(), d.computeStream()).ok());
    in_mem.push_back(std::move(*m));
  }
  for (size_t r = 0; r < op.node().numResults(); ++r) {
    const ir::TensorType& t = op.node().result(r)->type();
    auto m = d.allocate(t.bytes());
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return out;
    EXPECT_EQ(cudaMemset(m->data(), 0xFF, static_cast<size_t>(t.bytes())), cudaSuccess);
    out_views.push_back(m->view(t));
    out_mem.push_back(std::move(*m));
  }
  for (int i = 0; i < runs; ++i) {
    absl::Status s = (*kernel)->launch(d.computeStream(), in_views, out_views);
    EXPECT_TRUE(s.ok()) << s;
  }
  for (size_t r = 0; r < out_views.size(); ++r) {
    out.results.emplace_back(out_views[r].type);
    EXPECT_TRUE(d.copyToHost(out_views[r], out.results.back().view(), d.computeStream()).ok());
  }
  for (size_t i = 0; i < in_views.size(); ++i) {
    out.operands.emplace_back(in_views[i].type);
    EXPECT_TRUE(d.copyToHost(in_views[i], out.operands.back().view(), d.computeStream()).ok());
  }
  absl::Status s = d.computeStream().synchronize();
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

/// Finite values uniform in [-bound, bound) in every operand of `op` (f32 or bf16): the GPU
/// tests compare by scaledError, which needs magnitudes (the specials are the host tests').
inline void fillFinite(SingleOp& op, std::mt19937& rng, float bound = 8.0f) {
  std::uniform_real_distribution<float> d(-bound, bound);
  for (size_t k = 0; k < op.node().numOperands(); ++k)
    for (int64_t i = 0; i < op.in(k).size(); ++i) {
      if (op.in(k).type().dtype == ir::DType::kBF16)
        op.in(k).bf16()[i] = d(rng);
      else
        op.in(k).f32()[i] = d(rng);
    }
}

/// Runs `op` on cuda:0 and on the CPU from the same inputs (the ones in op's buffers),
/// and expects every result, and every operand (state is written in place), within
/// `tol` of the CPU's (scaledError: relative to the tensor's largest magnitude).
inline void expectCudaMatchesCpu(SingleOp& op, double tol, backend::DeviceOptions options = {}) {
  std::vector<Buffer> inputs;
  for (size_t i = 0; i < op.node().numOperands(); ++i) inputs.push_back(cloneBuffer(op.in(i)));
  CudaRun gpu = runOnCuda(op, inputs, 1, options);
  op.run();
  ASSERT_EQ(gpu.results.size(), op.node().numResults());
  for (size_t r = 0; r < gpu.results.size(); ++r)
    EXPECT_LE(scaledError(gpu.results[r], op.out(r)), tol)
        << op.node().describe() << " result " << r;
  for (size_t i = 0; i < gpu.operands.size(); ++i)
    EXPECT_LE(scaledError(gpu.operands[i], op.in(i)), tol)
        << op.node().describe() << " operand " << i << " (written in place?)";
}

}  // namespace tandem::testing

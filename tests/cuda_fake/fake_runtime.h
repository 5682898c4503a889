#pragma once

// A fake of the few CUDA runtime, cuDNN and cuBLAS(Lt) entry points that making a CUDA
// device, allocating on it and timing its stream call: defined in this test program, they
// take the place of the libraries' (the program's own definitions win at link time), so
// the CUDA backend's real code runs here, without a GPU, and the calls it makes are
// logged in order. Everything else still goes to the real libraries.

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

namespace tandem::testing::fake_cuda {

/// The calls made since the last reset, one line each: "cudaMemsetAsync s1", where sN is
/// the N-th stream created (s1: the first device's compute stream), "s0" the legacy one.
std::vector<std::string>& calls();
/// The GPU's clock (milliseconds) that the next event record stamps.
double& gpuMilliseconds();
void reset();

}  // namespace tandem::testing::fake_cuda

#pragma once

// TANDEM_HD marks a function that nvcc compiles for the device and for the host, and the
// host compiler for the host: math that both backends run (the dropout generator, AdamW's
// step, an own CUDA kernel's per-element math) is written once in such a function, so the
// tests that run without a GPU check the very code the GPU runs against the CPU backend.
// In backend/ rather than backend/cuda/ because the CPU backend calls these functions too,
// and a CPU-only build must not need anything of the CUDA backend.

#if defined(__CUDACC__)
#define TANDEM_HD __host__ __device__ __forceinline__
#else
#define TANDEM_HD inline
#endif

#pragma once

#include <cstdint>
#include <string>

namespace tandem::backend::cpu {

/// What the host CPU offers the CPU backend, for `tandem devices`, `tandem --version` and
/// checks of what a kernel needs (bf16 instructions, say).
struct CpuInfo {
  std::string model;         // /proc/cpuinfo's "model name", or "unknown"
  int cores = 1;             // online cores this process may run on
  int64_t memory_bytes = 0;  // physical memory
  std::string isa;           // oneDNN's effective instruction set, e.g. "avx512_core_bf16"
  bool bf16 = false;         // native bf16 dot products (avx512_bf16 or AMX)
  std::string onednn;        // oneDNN version, e.g. "2.6.3"
};

/// Read once per call (cheap: one small file and a few system calls).
CpuInfo hostCpuInfo();

}  // namespace tandem::backend::cpu

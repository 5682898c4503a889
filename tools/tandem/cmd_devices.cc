// `tandem devices` and `tandem --version`: what this build is and what it can run on.

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backend/cpu/cpu_info.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/output_file.h"

#ifndef TANDEM_VERSION
#define TANDEM_VERSION "unknown"
#endif
#ifndef TANDEM_BUILD_TYPE
#define TANDEM_BUILD_TYPE "unknown"
#endif

namespace tandem::tools {
namespace {

constexpr const char* kNoCuda =
    "not in this build: Tandem has no CUDA backend yet (docs/GPU.md); use cpu:N devices";

}  // namespace

std::string versionText() {
  backend::cpu::CpuInfo cpu = backend::cpu::hostCpuInfo();
  return absl::StrCat("tandem ", TANDEM_VERSION, " (", TANDEM_BUILD_TYPE, " build, g++ ",
                      __VERSION__, ", C++20)\n", "cpu backend: oneDNN ", cpu.onednn, ", ",
                      cpu.isa, "\n", "cuda backend: ", kNoCuda, "\n");
}

absl::Status runDevices() {
  backend::cpu::CpuInfo cpu = backend::cpu::hostCpuInfo();
  std::string text = absl::StrFormat(
      "cpu: %s, %d cores, %.1f GiB memory, oneDNN %s on %s%s\n"
      "  devices cpu:0 ... cpu:4095 are logical: each gets a stream thread and "
      "--threads-per-device kernel threads (default 1), all sharing these %d cores\n"
      "cuda: %s\n",
      cpu.model, cpu.cores, cpu.memory_bytes / 1073741824.0, cpu.onednn, cpu.isa,
      cpu.bf16 ? " (bf16 instructions)" : "", cpu.cores, kNoCuda);
  OutputFile out = OutputFile::standardOutput();
  if (absl::Status s = out.write(text); !s.ok()) return s;
  return out.close();
}

}  // namespace tandem::tools

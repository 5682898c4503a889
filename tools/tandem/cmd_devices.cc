// `tandem devices` and `tandem --version`: what this build is and what it can run on.

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backend/backend.h"
#include "backend/cpu/cpu_info.h"
#include "ir/status_macros.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/output_file.h"

#ifndef TANDEM_VERSION
#define TANDEM_VERSION "unknown"
#endif
#ifndef TANDEM_BUILD_TYPE
#define TANDEM_BUILD_TYPE "unknown"
#endif

namespace tandem::tools {
namespace {}  // namespace

std::string versionText() {
  backend::cpu::CpuInfo cpu = backend::cpu::hostCpuInfo();
  return absl::StrCat(
      "tandem ", TANDEM_VERSION, " (", TANDEM_BUILD_TYPE, " build, g++ ", __VERSION__, ", C++20)\n",
      "cpu backend: oneDNN ", cpu.onednn, ", ", cpu.isa, "\n", "cuda backend: ",
      backend::backendFor(ir::DeviceKind::kCuda).ok() ? "yes" : "none in this build", "\n");
}

absl::Status runDevices() {
  std::string text = backend::describeBackends();
  OutputFile out = OutputFile::standardOutput();
  RETURN_IF_ERROR(out.write(text));
  return out.close();
}

}  // namespace tandem::tools

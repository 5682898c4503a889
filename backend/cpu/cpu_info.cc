#include "backend/cpu/cpu_info.h"

#include <sched.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace tandem::backend::cpu {
namespace {

std::string isaName(dnnl::cpu_isa isa) {
  using I = dnnl::cpu_isa;
  switch (isa) {
    case I::sse41:
      return "sse41";
    case I::avx:
      return "avx";
    case I::avx2:
      return "avx2";
    case I::avx2_vnni:
      return "avx2_vnni";
    case I::avx512_mic:
      return "avx512_mic";
    case I::avx512_mic_4ops:
      return "avx512_mic_4ops";
    case I::avx512_core:
      return "avx512_core";
    case I::avx512_core_vnni:
      return "avx512_core_vnni";
    case I::avx512_core_bf16:
      return "avx512_core_bf16";
    case I::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "unknown";
  }
}

}  // namespace

CpuInfo hostCpuInfo() {
  CpuInfo info;
  info.model = "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    if (size_t colon = line.find(':'); colon != std::string::npos)
      info.model = std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    break;
  }
  cpu_set_t set;
  info.cores = sched_getaffinity(0, sizeof set, &set) == 0
                   ? CPU_COUNT(&set)
                   : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  info.memory_bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  info.isa = isaName(isa);
  info.bf16 = isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
  const dnnl_version_t* v = dnnl_version();
  info.onednn = absl::StrCat(v->major, ".", v->minor, ".", v->patch);
  return info;
}

}  // namespace tandem::backend::cpu

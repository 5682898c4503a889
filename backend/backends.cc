// The one place that knows which device kinds this build has: the CPU backend always and
// the CUDA backend when the build found nvcc (it is there on machines without a GPU too,
// where making a device says so). Links the concrete backends; the runtime does not.

#include "backend/backends.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_options.h"
#include "backend/cuda/cuda_options.h"
#include "backend/targets.h"
#if defined(TANDEM_HAVE_CUDA)
#include "backend/cuda/cuda_device.h"
#endif

namespace tandem::backend {
namespace {

// Two backends that read one setting must agree on its values: a build that breaks this
// is a programming error, found by every test that registers.
void registerOrDie(std::string_view kind, std::vector<SettingSpec> specs) {
  if (absl::Status s = registerSettings(kind, std::move(specs)); !s.ok()) {
    std::fprintf(stderr, "tandem: internal error: %s\n", std::string(s.message()).c_str());
    std::abort();
  }
}

}  // namespace

void registerBackends() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerTargets();
    registerOrDie("cpu", cpu::cpuOptions().specs());
    registerOrDie("cuda", cuda::cudaOptions().specs());
    registerBackend(cpu::cpuBackend());
#if defined(TANDEM_HAVE_CUDA)
    registerBackend(cuda::cudaBackend());
#endif
  });
}

}  // namespace tandem::backend

#include "backend/targets.h"

#include <mutex>

#include "backend/cpu/target_info.h"
#include "backend/cuda/target_info.h"

namespace tandem::backend {

void registerTargets() {
  static std::once_flag once;
  std::call_once(once, [] {
    ir::registerTarget(cpu::targetInfo());
    ir::registerTarget(cuda::targetInfo());
  });
}

}  // namespace tandem::backend

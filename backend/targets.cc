#include "backend/targets.h"

#include <mutex>
#include <utility>

#include "backend/cpu/target_info.h"
#include "backend/cuda/target_info.h"

namespace tandem::backend {

void registerTargets() {
  static std::once_flag once;
  std::call_once(once, [] {
    // The layout is the host's: nChw16c is what oneDNN's convolutions use themselves on
    // AVX-512 (AVX-512 F, BW, VL and DQ: its avx512_core); elsewhere they would reorder it into
    // nChw8c in every call. A module planned here and run on another host runs correctly
    // either way: every CPU kernel takes both layouts.
    ir::TargetInfo cpu_target = cpu::targetInfo();
    if (!cpu::hostHasAvx512Core()) cpu_target.preferred_layout = ir::ActivationLayout::kPlain;
    ir::registerTarget(std::move(cpu_target));
    ir::registerTarget(cuda::targetInfo());
  });
}

}  // namespace tandem::backend

// dropout on CPU: the core's loops (dropout_core.h) over the device's rows. The mask is a
// pure function of (the run's seed, @step, mask_id, the row's index in the whole batch,
// the element's index), so the kernel keeps no generator state: it reads the step from
// its operand when it runs (the runtime writes @step before every update), and the
// backward (dropout of dy, the same node attributes) draws the same mask again.

#include <cstdint>
#include <memory>

#include "backend/cpu/dropout_core.h"
#include "backend/cpu/kernels.h"
#include "backend/dropout_node.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"

namespace tandem::backend::cpu {
namespace {

class DropoutKernel final : public CpuKernel {
 public:
  DropoutKernel(const DropoutMask& mask, const DropoutSlice& slice, bool bf16)
      : mask_(mask), slice_(slice), bf16_(bf16) {}

  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const DropoutMask mask = mask_.atStep(in[1].i32());
    if (bf16_)
      dropoutApply(mask, slice_, in[0].as<bf16>(), out[0].as<bf16>());
    else
      dropoutApply(mask, slice_, in[0].f32(), out[0].f32());
  }

 private:
  DropoutMask mask_;  // step 0 here; each run takes @step's value
  DropoutSlice slice_;
  bool bf16_;
};

}  // namespace

KernelOr makeDropoutKernel(const KernelInit& init) {
  ASSIGN_OR_RETURN(const bool bf16, dropoutIsBf16(init.node, "CPU"));
  const DropoutRows r = dropoutRowsOf(init.node);
  return std::make_unique<DropoutKernel>(dropoutMaskOf(init.node, init.ctx.seed()),
                                         DropoutSlice{r.first, r.rows, r.per_row}, bf16);
}

}  // namespace tandem::backend::cpu

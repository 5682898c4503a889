#pragma once

// Whether a tensor holds only finite values: one vectorized read, for kernels whose fast
// algorithm mishandles NaN and infinities and that switch to an exact one when a run's
// operand holds one (the convolutions: dnnl_util.h's ProgramKernel).

#include <cstdint>

#include "backend/bf16.h"
#include "backend/tensor_view.h"

namespace tandem::backend::cpu {

/// True when every element of `t` (f32 or bf16; any other dtype: true) is finite.
bool allFinite(const TensorView& t);
/// The same over n values.
bool allFinite(const float* x, int64_t n);
bool allFinite(const bf16* x, int64_t n);

}  // namespace tandem::backend::cpu

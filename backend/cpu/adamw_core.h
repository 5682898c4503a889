#pragma once

// AdamW's update over one parameter on the CPU: backend/adamw_math.h's adamwStep per
// element, in place. w, m and v are f32 (master weight and state); g is f32 or bf16.

#include <cstdint>

#include "backend/adamw_math.h"
#include "backend/bf16.h"

namespace tandem::backend::cpu {

void adamwUpdate(float* w, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s);
void adamwUpdate(float* w, const bf16* g, float* m, float* v, int64_t n, const AdamWScalars& s);

}  // namespace tandem::backend::cpu

#pragma once

// softmax over short contiguous rows (at most 64 floats: attention's rows of T keys) in
// AVX-512 registers, each row loaded once: its maximum, exp(x - max) by Cephes' expf
// (the argument split at ln 2 in two parts, a degree-6 polynomial, 2^n by vscalefps;
// within 2 ulp of glibc's expf), the sum, and exp times 1 / sum as PyTorch's vectorized
// softmax does. oneDNN 2.6's
// jit softmax took 1.1 ms for the ViT's 25,600 rows of 50 (5 % of its step), and the scan
// for NaN rows before it another 0.4. PyTorch's NaN and infinities (softmax_rows.h) on
// the way: a row holding a NaN or +inf, or only -inf, is NaN throughout; an element of
// -inf in a row with a finite value gets exactly 0.

#include <cstdint>

namespace tandem::backend::cpu {

/// The longest row softmaxRows takes.
inline constexpr int64_t kSoftmaxVectorRow = 64;

/// y[r, :] = softmax(x[r, :]) over `rows` rows of `axis` floats (axis <= 64). Call where
/// avx512Runs() (avx512_rows.h). y may be x.
void softmaxRows(const float* x, int64_t rows, int64_t axis, float* y);

}  // namespace tandem::backend::cpu

#pragma once

// LeNet's 2x2 stride-2 average pooling (with fuse-relu-pool's relu, or without) over f32
// planes in AVX-512 rows: a row pair's 32 columns are two vectors each, split into even
// and odd columns by a permute, and a row of dy is widened to its 2x2 shares by another.
// pool_kernels.cc's scalar 2x2 loop ran unvectorized (two strided loads a window), the
// pools 6 % of LeNet's step. The same bits as that loop: each window sums
// ((a + b) + (c + d)) * 0.25, relu and its backward mask applied on load as
// backend/unary_math.h defines them (NaN and -0.0 included). Call them where
// avx512Runs() (avx512_rows.h).

#include <cstdint>

namespace tandem::backend::cpu {

/// y[p, i, j] = the average of (relu of, with `relu`) x[p, 2i..2i+1, 2j..2j+1] over
/// `planes` planes of h x w (y: h/2 x w/2; an odd last row or column is in no window).
void avgPool2x2Rows(int64_t planes, int64_t h, int64_t w, bool relu, const float* x, float* y);

/// dx[p, r, c] = dy[p, r/2, c/2] * 0.25, 0 where (with `relu`) x <= 0 and in an odd last
/// row or column (no window's).
void avgPool2x2BackwardRows(int64_t planes, int64_t h, int64_t w, bool relu, const float* dy,
                            const float* x, float* dx);

}  // namespace tandem::backend::cpu

#pragma once

// TANDEM_VECTOR_LOOPS before a function: GCC compiles it twice, for x86-64-v4 (AVX-512)
// and for the x86-64 baseline, and the dynamic loader picks one by CPU (function
// multiversioning through an ifunc). The kernels' own loops then run 16 floats wide where
// the CPU can, 4 elsewhere, and bf16's widening and rounding cost little. Both clones give
// the same bits: the build turns floating-point contraction off (-ffp-contract=off in
// CMakeLists.txt), so neither fuses a multiply-add the other does not, and neither
// reassociates. Use it on the loops, not on code that allocates or calls out.

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define TANDEM_VECTOR_LOOPS __attribute__((target_clones("arch=x86-64-v4", "default")))
#else
#define TANDEM_VECTOR_LOOPS
#endif

// TANDEM_AVX512 before a function: GCC compiles it for AVX-512 (oneDNN's avx512_core: F,
// BW, VL, DQ) whatever the build's baseline, so that it may use <immintrin.h>'s AVX-512
// intrinsics; call it only after hostHasAvx512Core() (target_info.h) said yes. For the few
// loops the compiler cannot vectorize well on its own (im2col.cc's masked lines).
// TANDEM_AVX512_INTRINSICS says whether this compiler has them (x86-64 GCC or Clang).
#if defined(__x86_64__) && defined(__GNUC__)
#define TANDEM_AVX512_INTRINSICS 1
#define TANDEM_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#else
#define TANDEM_AVX512_INTRINSICS 0
#define TANDEM_AVX512
#endif

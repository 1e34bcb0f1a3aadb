// Float32-accurate products on the tensor cores from TF32 pieces (3xTF32),
// shared by the hand-written kernels that use mma.m16n8k8
// (digitcaps_tensor_cores.cu, predict_tensor_cores.cu).
//
// A float x is split into big = x rounded to TF32 (10 mantissa bits) and
// small = x - big (exact in float32; the tensor core reads its top 10 bits),
// and a * b is taken as a_small * b_big + a_big * b_small + a_big * b_big;
// the dropped a_small * b_small and the truncation of small are ~2^-21
// relative, float32's order. An infinite x has small = inf - inf = NaN (and
// a rounded finite x's small can have the other sign), so where a * b is
// +-inf the sum can be NaN: non-finite still, but not the formula's
// infinity. Small parts with their value's sign and never zero would keep
// it; that change (rounded big kept) made the layer's cuda_tensor 79.0
// against 59.2 us at MNIST b128 on an H200, so it was not kept.
//
// The mma's fragments: lane (g = lane / 4, t = lane % 4) holds A at rows
// g, g + 8 and B at column g, for mma-k t and t + 4; C at rows g, g + 8 and
// columns 2t, 2t + 1. Also here: the row stride both kernels stage their
// A operands at, and the zeroing of C fragments.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace halcaps::cuda_reference::tf32 {

// A row stride (at least n floats, a multiple of 8) at which a half-warp's
// 8-byte reads of 4 consecutive rows at 8 consecutive columns (a lane's two
// A values of a row, as both tensor-core kernels lay them out) hit distinct
// banks: 8 or 24 modulo 32.
__host__ __device__ constexpr int conflict_free_stride(int n) {
    const int s = (n + 7) / 8 * 8;
    return s % 16 == 0 ? s + 8 : s;
}

// Zeros an M x N array of a lane's C fragments.
template <int M, int N>
__device__ inline void set_zero(float (&x)[M][N][4]) {
#pragma unroll
    for (int m = 0; m < M; m++) {
#pragma unroll
        for (int n = 0; n < N; n++) {
#pragma unroll
            for (int r = 0; r < 4; r++) x[m][n][r] = 0.0f;
        }
    }
}

// x as a TF32 pair: big = x rounded to TF32 (to nearest, ties away from
// zero, on the bits: cvt.rna.tf32.f32 costs five instructions on sm_90
// where this costs two; x is finite and below 2^128 (1 - 2^-12), else big
// overflows), small = x - big.
struct Split {
    uint32_t big, small;
};
__device__ inline Split split_tf32(float x) {
    const uint32_t big = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
    return {big, __float_as_uint(x - __uint_as_float(big))};
}

// x as a TF32 pair with big = x truncated to TF32 (its low 13 bits
// cleared): one instruction where split_tf32's big takes two (ptxas then
// passes x itself as the big operand, the mma reading only its top bits),
// and no limit on a finite x. small is below 2^-10 |x| (2^-11 rounded), so
// the dropped a_small * b_small is ~2^-20 relative, still far below the
// 1e-4 the tests hold every implementation to. digitcaps_tensor_cores.cu
// splits its B values (W) so.
__device__ inline Split split_tf32_truncated(float x) {
    const uint32_t big = __float_as_uint(x) & 0xffffe000u;
    return {big, __float_as_uint(x - __uint_as_float(big))};
}

// d += a * b on the tensor cores, a 16x8 (row-major fragment), b 8x8.
__device__ inline void mma_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// An A fragment as TF32 pairs.
struct SplitA {
    uint32_t big[4], small[4];
};
__device__ inline SplitA split_a(float x0, float x1, float x2, float x3) {
    const Split s0 = split_tf32(x0), s1 = split_tf32(x1), s2 = split_tf32(x2), s3 = split_tf32(x3);
    return {{s0.big, s1.big, s2.big, s3.big}, {s0.small, s1.small, s2.small, s3.small}};
}

// d += a * b in float32 accuracy, b the lane's two B values already split:
// the small products first, so that they are not lost below the big one.
__device__ inline void mma_3xtf32(float (&d)[4], const SplitA &a, Split b0, Split b1) {
    mma_tf32(d, a.small, b0.big, b1.big);
    mma_tf32(d, a.big, b0.small, b1.small);
    mma_tf32(d, a.big, b0.big, b1.big);
}

}  // namespace halcaps::cuda_reference::tf32

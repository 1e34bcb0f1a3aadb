// im2col + cuBLAS SGEMM peer for the capsule convolution; see capsconv_im2col.h.
#include "capsconv_im2col.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>

#include "pointer_alignment.h"

namespace halcaps::cuda_reference {
namespace {

using i64 = int64_t;

constexpr int kThreads = 256;
constexpr i64 kMaxBlocks = 1 << 20;  // grid-stride loops cover the rest

CublasResult invalid() {
    CublasResult r;
    r.blas = CUBLAS_STATUS_INVALID_VALUE;
    return r;
}

bool fits_int(i64 v) { return v >= 1 && v <= INT_MAX; }

unsigned blocks_for(i64 total) {
    return static_cast<unsigned>(std::min<i64>((total + kThreads - 1) / kThreads, kMaxBlocks));
}

struct Dims {
    i64 H, W, CI, KW, CO, stride, pad, OH, OW, P, T;
};

// One thread per (p, t): copies the input pose of tap t of pixel p (zeros in
// the padding) into rows (p, 0..3), columns t*4 .. t*4+3 of A. Consecutive
// threads take consecutive t, so each row's writes are contiguous.
template <bool kVec>
__global__ void im2col_kernel(const float *__restrict__ in, float *__restrict__ A, Dims d) {
    const i64 total = d.P * d.T, row = d.T * 4;
    for (i64 e = i64(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += i64(gridDim.x) * blockDim.x) {
        const i64 t = e % d.T, p = e / d.T;
        const i64 c = t % d.CI, dx = (t / d.CI) % d.KW, dy = t / (d.CI * d.KW);
        const i64 ox = p % d.OW, oy = (p / d.OW) % d.OH, nn = p / (d.OW * d.OH);
        const i64 iy = oy * d.stride + dy - d.pad, ix = ox * d.stride + dx - d.pad;
        float *a = A + p * 4 * row + t * 4;  // row (p, 0); 16-byte aligned (A is, and row, t*4 are multiples of 4)
        if (iy >= 0 && iy < d.H && ix >= 0 && ix < d.W) {
            const float *pose = in + (((nn * d.H + iy) * d.W + ix) * d.CI + c) * 16;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                float4 v;
                if constexpr (kVec) {
                    v = __ldg(reinterpret_cast<const float4 *>(pose) + i);
                } else {
                    v = make_float4(__ldg(pose + i * 4), __ldg(pose + i * 4 + 1), __ldg(pose + i * 4 + 2),
                                    __ldg(pose + i * 4 + 3));
                }
                *reinterpret_cast<float4 *>(a + i * row) = v;
            }
        } else {
#pragma unroll
            for (int i = 0; i < 4; i++) *reinterpret_cast<float4 *>(a + i * row) = make_float4(0.f, 0.f, 0.f, 0.f);
        }
    }
}

// B[t][c][co][j] = K[t][co][c][j], one thread per element of B.
__global__ void filter_to_b_kernel(const float *__restrict__ K, float *__restrict__ B, i64 T, i64 CO) {
    const i64 total = T * 16 * CO;
    for (i64 e = i64(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += i64(gridDim.x) * blockDim.x) {
        const i64 j = e % 4, co = (e / 4) % CO, c = (e / (4 * CO)) % 4, t = e / (16 * CO);
        B[e] = K[((t * CO + co) * 4 + c) * 4 + j];
    }
}

// O[p][co][i][j] = C[p][i][co][j], one thread per element of O.
__global__ void product_to_output_kernel(const float *__restrict__ C, float *__restrict__ O, i64 P, i64 CO) {
    const i64 total = P * 16 * CO;
    for (i64 e = i64(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += i64(gridDim.x) * blockDim.x) {
        const i64 j = e % 4, i = (e / 4) % 4, co = (e / 16) % CO, p = e / (16 * CO);
        O[e] = C[((p * 4 + i) * CO + co) * 4 + j];
    }
}

}  // namespace

Im2colSizes capsconv_im2col_sizes(const CapsConvShape &s) {
    const i64 P = s.batch * s.out_height() * s.out_width(), T = s.kernel_h * s.kernel_w * s.in_caps;
    Im2colSizes z;
    z.columns = P * 4 * T * 4;
    z.filter = s.out_caps > 1 ? T * 16 * s.out_caps : 0;
    z.product = s.out_caps > 1 ? P * 16 * s.out_caps : 0;
    return z;
}

CublasResult capsconv_im2col_cublas(cublasHandle_t handle, const float *input, const float *filter, float *output,
                                    float *scratch, const CapsConvShape &s, cudaStream_t stream) {
    if (!handle || !input || !filter || !output || !scratch || !capsconv_shape_ok(s)) return invalid();
    if (!aligned16(scratch)) return invalid();
    Dims d;
    d.H = s.height, d.W = s.width, d.CI = s.in_caps, d.KW = s.kernel_w, d.CO = s.out_caps;
    d.stride = s.stride, d.pad = s.pad, d.OH = s.out_height(), d.OW = s.out_width();
    d.P = s.batch * d.OH * d.OW;
    d.T = s.kernel_h * s.kernel_w * s.in_caps;
    const i64 M = d.P * 4, N = d.CO * 4, K = d.T * 4;
    if (!fits_int(M) || !fits_int(N) || !fits_int(K)) return invalid();

    const Im2colSizes z = capsconv_im2col_sizes(s);
    float *A = scratch;
    float *B = d.CO > 1 ? scratch + z.columns : nullptr;
    float *C = d.CO > 1 ? B + z.filter : output;
    const float *Bm = d.CO > 1 ? B : filter;

    CublasResult r;
    const bool vec = aligned16(input);
    if (vec) {
        im2col_kernel<true><<<blocks_for(d.P * d.T), kThreads, 0, stream>>>(input, A, d);
    } else {
        im2col_kernel<false><<<blocks_for(d.P * d.T), kThreads, 0, stream>>>(input, A, d);
    }
    if ((r.cuda = cudaGetLastError()) != cudaSuccess) return r;
    if (d.CO > 1) {
        filter_to_b_kernel<<<blocks_for(z.filter), kThreads, 0, stream>>>(filter, B, d.T, d.CO);
        if ((r.cuda = cudaGetLastError()) != cudaSuccess) return r;
    }

    // Row-major C = A . B as cuBLAS's column-major C^T = B^T . A^T:
    //   m = N (CO*4), n = M (P*4), k = K (T*4); B^T is B read column-major
    //   with ld N, A^T is A read column-major with ld K, C^T written with ld N.
    if ((r.blas = cublasSetStream(handle, stream)) != CUBLAS_STATUS_SUCCESS) return r;
    if ((r.blas = cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS) return r;
    if ((r.blas = cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_HOST)) != CUBLAS_STATUS_SUCCESS) return r;
    const float alpha = 1.0f, beta = 0.0f;
    r.blas =
        cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M), static_cast<int>(K),
                    &alpha, Bm, static_cast<int>(N), A, static_cast<int>(K), &beta, C, static_cast<int>(N));
    if (r.blas != CUBLAS_STATUS_SUCCESS) return r;
    if (d.CO > 1) {
        product_to_output_kernel<<<blocks_for(z.product), kThreads, 0, stream>>>(C, output, d.P, d.CO);
        r.cuda = cudaGetLastError();
    }
    return r;
}

}  // namespace halcaps::cuda_reference

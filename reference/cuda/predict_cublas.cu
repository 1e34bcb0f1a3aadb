// cuBLAS peers for capsule prediction; see predict_cublas.h.
//
// cuBLAS is column-major: a row-major M x N matrix with row stride ld is, to
// cuBLAS, a column-major N x M matrix with leading dimension ld. Each GEMM
// below is written for the column-major view of row-major tensors, batched
// over the input capsule i with a constant stride, so no tensor is copied.
#include "predict_cublas.h"

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "pointer_alignment.h"

namespace halcaps::cuda_reference {
namespace {

using i64 = int64_t;

bool fits_int(i64 v) { return v >= 1 && v <= INT_MAX; }

CublasResult invalid() {
    CublasResult r;
    r.blas = CUBLAS_STATUS_INVALID_VALUE;
    return r;
}

// The handle's settings every call relies on: our stream, plain fp32 math
// (no TF32 tensor ops), alpha and beta read from host memory.
cublasStatus_t prepare(cublasHandle_t handle, cudaStream_t stream) {
    cublasStatus_t st = cublasSetStream(handle, stream);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_HOST);
    return st;
}

// [I, B, JE] -> [B, I, JE]. Both sides are rows of JE contiguous elements
// (T = float4 when JE % 4 == 0 and both pointers are 16-byte aligned), so a
// warp copies along one row: coalesced reads and writes. threadIdx.y picks
// one of 8 input capsules, blockIdx.y the batch row; no index division.
template <typename T>
__global__ void permute_ibje_to_bije(const T *__restrict__ src, T *__restrict__ dst, i64 B, i64 I, i64 row) {
    const i64 i = i64(blockIdx.x) * blockDim.y + threadIdx.y;
    if (i >= I) return;
    for (i64 b = blockIdx.y; b < B; b += gridDim.y) {
        const T *s = src + (i * B + b) * row;
        T *d = dst + (b * I + i) * row;
        for (i64 c = threadIdx.x; c < row; c += blockDim.x) d[c] = s[c];
    }
}

cudaError_t launch_permute(const float *src, float *dst, i64 B, i64 I, i64 JE, cudaStream_t stream) {
    const dim3 block(32, 8);
    const i64 gx = (I + block.y - 1) / block.y;
    if (gx > INT_MAX) return cudaErrorInvalidValue;
    const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(B < 65535 ? B : 65535));
    const bool vec = JE % 4 == 0 && aligned16(src) && aligned16(dst);
    if (vec) {
        permute_ibje_to_bije<float4><<<grid, block, 0, stream>>>(reinterpret_cast<const float4 *>(src),
                                                                 reinterpret_cast<float4 *>(dst), B, I, JE / 4);
    } else {
        permute_ibje_to_bije<float><<<grid, block, 0, stream>>>(src, dst, B, I, JE);
    }
    return cudaGetLastError();
}

bool cublas_shape_ok(const PredictShape &s) {
    return s.batch > 0 && s.in_caps > 0 && s.out_caps > 0 && s.out_dim > 0 && s.in_dim > 0;
}

}  // namespace

CublasResult predict_forward_cublas(cublasHandle_t handle, const float *u, const float *W, float *u_hat,
                                    float *scratch_ibje, const PredictShape &s, cudaStream_t stream, bool permute) {
    if (!handle || !cublas_shape_ok(s) || !u || !W || !scratch_ibje || (permute && !u_hat)) return invalid();
    const i64 B = s.batch, I = s.in_caps, JE = s.out_caps * s.out_dim, K = s.in_dim;
    if (!fits_int(B) || !fits_int(I) || !fits_int(JE) || !fits_int(I * K)) return invalid();

    CublasResult r;
    if ((r.blas = prepare(handle, stream)) != CUBLAS_STATUS_SUCCESS) return r;
    // Per i: out_i[b, je] = sum_k u[b, i, k] * W[i, je, k], out_i row-major
    // [B, JE] at scratch + i*B*JE. Column-major:
    //   C (JE x B, ldc = JE)      = out_i^T
    //   A = op_T(K x JE, lda = K) : W[i] ([JE, K] row-major) transposed -> JE x K
    //   B (K x B, ldb = I*K)      : u[:, i, :] (rows of K, I*K apart), op_N
    const float alpha = 1.0f, beta = 0.0f;
    r.blas = cublasSgemmStridedBatched(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(JE), static_cast<int>(B),
                                       static_cast<int>(K), &alpha, W, static_cast<int>(K), JE * K, u,
                                       static_cast<int>(I * K), K, &beta, scratch_ibje, static_cast<int>(JE), B * JE,
                                       static_cast<int>(I));
    if (r.blas != CUBLAS_STATUS_SUCCESS || !permute) return r;
    r.cuda = launch_permute(scratch_ibje, u_hat, B, I, JE, stream);
    return r;
}

CublasResult predict_backward_cublas(cublasHandle_t handle, const float *g, const float *u, const float *W,
                                     float *grad_u, float *grad_W, const PredictShape &s, cudaStream_t stream) {
    if (!handle || !cublas_shape_ok(s) || !g || (!grad_u && !grad_W)) return invalid();
    if ((grad_u && !W) || (grad_W && !u)) return invalid();
    const i64 B = s.batch, I = s.in_caps, JE = s.out_caps * s.out_dim, K = s.in_dim;
    if (!fits_int(B) || !fits_int(I) || !fits_int(K) || !fits_int(I * JE) || !fits_int(I * K)) return invalid();

    CublasResult r;
    if ((r.blas = prepare(handle, stream)) != CUBLAS_STATUS_SUCCESS) return r;
    const float alpha = 1.0f, beta = 0.0f;
    if (grad_u) {
        // Per i: grad_u[b, i, k] = sum_je g[b, i, je] * W[i, je, k]. Column-major:
        //   C (K x B, ldc = I*K)  : grad_u[:, i, :] at grad_u + i*K
        //   A (K x JE, lda = K)   : W[i] ([JE, K] row-major), op_N
        //   B (JE x B, ldb = I*JE): g[:, i, :] at g + i*JE, op_N
        r.blas = cublasSgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(K), static_cast<int>(B),
                                           static_cast<int>(JE), &alpha, W, static_cast<int>(K), JE * K, g,
                                           static_cast<int>(I * JE), JE, &beta, grad_u, static_cast<int>(I * K), K,
                                           static_cast<int>(I));
        if (r.blas != CUBLAS_STATUS_SUCCESS) return r;
    }
    if (grad_W) {
        // Per i: grad_W[i, je, k] = sum_b u[b, i, k] * g[b, i, je]. Column-major:
        //   C (K x JE, ldc = K)            : grad_W[i] ([JE, K] row-major)
        //   A (K x B, lda = I*K)           : u[:, i, :] at u + i*K, op_N
        //   B = op_T(JE x B, ldb = I*JE)   : g[:, i, :] transposed -> B x JE
        r.blas = cublasSgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(K), static_cast<int>(JE),
                                           static_cast<int>(B), &alpha, u, static_cast<int>(I * K), K, g,
                                           static_cast<int>(I * JE), JE, &beta, grad_W, static_cast<int>(K), JE * K,
                                           static_cast<int>(I));
    }
    return r;
}

}  // namespace halcaps::cuda_reference

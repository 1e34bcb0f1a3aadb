// cuBLAS peers for capsule prediction: what a framework user gets from the
// vendor library, fp32 with TF32 off (CUBLAS_DEFAULT_MATH).
//
// Versions, naive first:
//   forward, permute = false  strided-batched SGEMM over i into u_hat_ibje
//                             [I, B, J, E] (the GEMM alone);
//   forward, permute = true   the same, then a permute kernel to u_hat
//                             [B, I, J, E]: the seed blog's "reshape and
//                             transpose" path;
//   backward                  the two einsums a framework makes, each a
//                             strided-batched SGEMM over i that reads g and u
//                             in place through leading dimensions (no permutes).
//
// Shapes as in predict_cuda.h: u [B, I, K], W [I, J, E, K],
// u_hat and g [B, I, J, E], float32 row-major, all pointers device pointers.
// The caller owns the handle (created once); each call sets the handle's
// stream, math mode (CUBLAS_DEFAULT_MATH) and pointer mode (host) and leaves
// them so. Nothing is synchronised.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "predict_cuda.h"

namespace halcaps::cuda_reference {

// The outcome of a call: the first cuBLAS status that was not success (else
// CUBLAS_STATUS_SUCCESS) and the first CUDA error of a kernel launch (else
// cudaSuccess). Invalid arguments (extent < 1, null pointer, an extent beyond
// cuBLAS's int range) give CUBLAS_STATUS_INVALID_VALUE and launch nothing.
// Turn into text with cublasGetStatusString / cudaGetErrorString.
struct CublasResult {
    cublasStatus_t blas = CUBLAS_STATUS_SUCCESS;
    cudaError_t cuda = cudaSuccess;
    bool ok() const { return blas == CUBLAS_STATUS_SUCCESS && cuda == cudaSuccess; }
};

// u_hat_ibje (the caller's scratch, B*I*J*E floats) = per i: u[:, i, :] . W[i]^T,
// laid out [I, B, J, E]; with `permute`, then u_hat = that permuted to
// [B, I, J, E]. Without it u_hat is untouched (and may be null).
CublasResult predict_forward_cublas(cublasHandle_t handle, const float *u, const float *W, float *u_hat,
                                    float *scratch_ibje, const PredictShape &shape, cudaStream_t stream, bool permute);

// grad_u = einsum('bije,ijek->bik', g, W), then
// grad_W = einsum('bije,bik->ijek', g, u); two SGEMM calls. Either output
// may be null to skip its call (for timing one alone), not both.
CublasResult predict_backward_cublas(cublasHandle_t handle, const float *g, const float *u, const float *W,
                                     float *grad_u, float *grad_W, const PredictShape &shape, cudaStream_t stream);

}  // namespace halcaps::cuda_reference

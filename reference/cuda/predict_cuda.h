// Hand-written CUDA kernels for capsule prediction (docs/design.md §1.1), in the
// style of llm.c's dev/cuda: numbered versions, naive first, one launcher per
// version and a switch to pick one.
//
//   u      [B, I, K]        u_hat[b,i,j,e]  = sum_k   W[i,j,e,k] * u[b,i,k]
//   W      [I, J, E, K]     grad_u[b,i,k]   = sum_j,e g[b,i,j,e] * W[i,j,e,k]
//   u_hat  [B, I, J, E]     grad_W[i,j,e,k] = sum_b   g[b,i,j,e] * u[b,i,k]
//   (float32, dense row-major; g has u_hat's shape)
//
// Forward versions:
//   1 blog_naive  the seed blog's TensorFlow 1.x kernel: one thread per output
//                 element, grid-stride loop, TF 1.x GetCudaLaunchConfig grid.
//   2 tuned       a block per (input capsule i, tile of batch rows); a thread
//                 keeps W[i, je:je+V, :] in registers and streams the rows,
//                 writing V consecutive outputs per row (coalesced).
//   3 staged      version 2's walk with a grid of one wave (a block per two
//                 capsules and every Y-th batch row), u staged by cp.async
//                 and evict-first stores; version 2 outside its fast path.
// Backward versions (both gradients):
//   1 blog_naive  the blog's two kernels (grad_u, then grad_W), one thread per
//                 output element, TF 1.x launch configuration.
//   2 tuned       two tuned kernels, grad_u then grad_W, each reading g once.
//   3 fused       one kernel, a block per input capsule, reading g once for
//                 both gradients.
//   4 tensor      one kernel, a warp per input capsule, reading g once for
//                 both gradients as small matrix products on the tensor cores
//                 in float32 accuracy (3xTF32; predict_tensor_cores.cu).
//
// All pointers are device pointers. Launchers only enqueue work on `stream`
// and return cudaGetLastError(); they never synchronise. They return
// cudaErrorInvalidValue for an unknown version, an extent < 1 or a needed
// pointer that is null.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../shapes.h"

namespace halcaps::cuda_reference {

using PredictShape = shapes::PredictShape;  // B, I, K, J, E (reference/shapes.h)

int forward_version_count();   // 3: versions are 1..count
int backward_version_count();  // 4
// "blog_naive", "tuned", "staged" / "blog_naive", "tuned", "fused", "tensor"; nullptr if unknown.
const char *forward_version_name(int version);
const char *backward_version_name(int version);

// u_hat = prediction(u, W).
cudaError_t predict_forward(int version, const float *u, const float *W, float *u_hat, const PredictShape &shape,
                            cudaStream_t stream);

// grad_u and grad_W from g = dL/du_hat. Either output may be null to skip it
// (for timing one gradient alone): versions 1 and 2 then launch only the
// other kernel, and versions 3 and 4 run version 2's kernel for the one
// asked for.
// g is always needed; W only for grad_u, u only for grad_W.
cudaError_t predict_backward(int version, const float *g, const float *u, const float *W, float *grad_u, float *grad_W,
                             const PredictShape &shape, cudaStream_t stream);

}  // namespace halcaps::cuda_reference

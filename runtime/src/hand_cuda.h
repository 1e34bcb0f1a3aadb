// The hand-written CUDA kernels (reference/cuda/) and the cuBLAS peer, made
// callable through the same API as the Halide schedules: an implementation
// name picks one. Host tensors are staged through device memory; device
// tensors are used in place on the caller's stream.
#pragma once

#include <string>
#include <vector>

#include "halcaps/halcaps.h"

namespace halcaps::detail {

struct HandCudaImplementation {
    std::string op;              // "predict" or "predict_backward"
    std::string implementation;  // e.g. "cuda_blog_naive", "cublas"
    std::string description;
};

// Empty when the build has no CUDA.
const std::vector<HandCudaImplementation> &hand_cuda_implementations();
bool is_hand_cuda_implementation(const std::string &op, const std::string &implementation);

// Arguments have been checked by the caller (shapes, strides, memory spaces).
Status run_hand_cuda_predict(const std::string &implementation, const TensorView &u, const TensorView &W,
                             const TensorView &u_hat, const Options &options);
Status run_hand_cuda_predict_backward(const std::string &implementation, const TensorView &g, const TensorView &u,
                                      const TensorView &W, const TensorView &grad_u, const TensorView &grad_W,
                                      const Options &options);

// Routing and the DigitCaps layer by the naive hand-written CUDA
// (reference/cuda/digitcaps_cuda.h), implementation "cuda_naive". b0 may be
// absent (data null: zeros). Arguments checked by the caller.
bool is_hand_cuda_routing_implementation(const std::string &implementation);
Status run_hand_cuda_route(const TensorView &u_hat, const TensorView &b0, const TensorView &v, int iterations,
                           const Options &options);
Status run_hand_cuda_digitcaps(const TensorView &u, const TensorView &W, const TensorView &b0, const TensorView &v,
                               int iterations, const Options &options);

// Benchmark only: the cuBLAS forward without its final permute, writing
// u_hat_ibje [I, B, J, E] (a different layout from predict's output). Device
// tensors only; shapes checked by the caller.
Status run_cublas_predict_gemm_only(const TensorView &u, const TensorView &W, float *u_hat_ibje,
                                    const Options &options);

}  // namespace halcaps::detail

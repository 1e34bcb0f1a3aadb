// The hand-written CUDA kernels (reference/cuda/) and the cuBLAS peer, made
// callable through the same API as the Halide schedules: an implementation
// name picks one. Host tensors are staged through device memory; device
// tensors are used in place on the caller's stream.
#pragma once

#include <string>
#include <vector>

#include "halcaps/halcaps.h"
#include "implementation_table.h"

namespace halcaps::detail {

// The hand-written and library rows of predict, predict_backward and
// capsconv, whose names come from reference/cuda's version tables; the
// operators' tables (runtime/src/*_implementations.cpp) take them from here.
struct HandCudaImplementation {
    std::string op;              // "predict", "predict_backward" or "capsconv"
    std::string implementation;  // e.g. "cuda_blog_naive", "cublas"
    std::string description;
    Family family = Family::hand_written;  // library: cuBLAS, cuDNN
};

// Empty when the build has no CUDA.
const std::vector<HandCudaImplementation> &hand_cuda_implementations();

// Arguments have been checked by the caller (shapes, strides, memory spaces).
Status run_hand_cuda_predict(const std::string &implementation, const TensorView &u, const TensorView &W,
                             const TensorView &u_hat, const Options &options);
Status run_hand_cuda_predict_backward(const std::string &implementation, const TensorView &g, const TensorView &u,
                                      const TensorView &W, const TensorView &grad_u, const TensorView &grad_W,
                                      const Options &options);

// Routing and the DigitCaps layer by the hand-written CUDA
// (reference/cuda/digitcaps_cuda.h): "cuda_naive" for both ops ("route" and
// "digitcaps") and their gradients, "cuda_passes" for the gradients only,
// "cuda_fused" for the layer's forward only, "cuda_tensor" for the layer's
// forward and its gradients, and for training's pairs ("digitcaps_with_s",
// "digitcaps_backward_with_s": routing_s not null; "digitcaps_with_c",
// "digitcaps_backward_with_c": routing_c not null too). b0 may be
// absent (data null: zeros). Arguments checked by the caller;
// run_hand_cuda_digitcaps runs options.implementation and refuses, before
// any device work, a shape beyond cuda_fused's or cuda_tensor's limits
// (unsupported_shape, naming the extent). Which op takes which name:
// routing_implementations.cpp.
Status run_hand_cuda_route(const TensorView &u_hat, const TensorView &b0, const TensorView &v, int iterations,
                           const Options &options);
Status run_hand_cuda_digitcaps(const TensorView &u, const TensorView &W, const TensorView &b0, const TensorView &v,
                               const TensorView *routing_s, const TensorView *routing_c, int iterations,
                               const Options &options);
// Their gradients by the hand-written CUDA ("cuda_naive" and "cuda_passes"
// for "route_backward" and "digitcaps_backward", "cuda_tensor" for
// "digitcaps_backward" and, routing_s not null, "digitcaps_backward_with_s",
// with routing_c not null too, "digitcaps_backward_with_c");
// b0 and grad_b0 may be absent (b0 zeros, grad_b0 not
// computed). Arguments checked by the caller; cuda_passes and cuda_tensor
// refuse, before any device work, a shape beyond their limits
// (unsupported_shape, naming the extent).
Status run_hand_cuda_route_backward(const TensorView &u_hat, const TensorView &b0, const TensorView &grad_v,
                                    const TensorView &grad_u_hat, const TensorView &grad_b0, int iterations,
                                    const Options &options);
Status run_hand_cuda_digitcaps_backward(const TensorView &u, const TensorView &W, const TensorView &b0,
                                        const TensorView *routing_s, const TensorView *routing_c,
                                        const TensorView &grad_v, const TensorView &grad_u, const TensorView &grad_W,
                                        const TensorView &grad_b0, int iterations, const Options &options);

// Benchmark only: the cuBLAS forward without its final permute, writing
// u_hat_ibje [I, B, J, E] (a different layout from predict's output). Device
// tensors only; shapes checked by the caller.
Status run_cublas_predict_gemm_only(const TensorView &u, const TensorView &W, float *u_hat_ibje,
                                    const Options &options);

// The capsule convolution by hand-written CUDA and library peers
// (hand_cuda_capsconv.cpp): cuda_vaidya_b, cuda_vaidya_i1, cuda_vaidya_i2,
// cuda_vaidya_i3 (reference/cuda/capsconv_cuda.h), cudnn (permutes + cuDNN
// convolution, when the build found cuDNN) and im2col_cublas. Their list
// entries (op "capsconv") join hand_cuda_implementations().
void append_hand_cuda_capsconv_implementations(std::vector<HandCudaImplementation> &out);
// Arguments checked by the caller (capsconv in runtime/src/capsconv.cpp).
Status run_hand_cuda_capsconv(const std::string &implementation, const TensorView &input, const TensorView &filter,
                              const TensorView &output, const ConvParams &params, const Options &options);

// Benchmark only: what a peer needs besides the operator's own tensors, for
// the shape of `input`, `filter` and `params` (data pointers unused):
// im2col_cublas its scratch (im2col buffer, and the permuted filter and
// product when co > 1); cudnn the three permuted copies plus the workspace of
// the algorithm it chose (chosen on this call if not yet, which needs the
// device); 0 for the others. `note` says what is counted (and cuDNN's algorithm).
Status hand_cuda_capsconv_extra_memory(const std::string &implementation, const TensorView &input,
                                       const TensorView &filter, const ConvParams &params, const Options &options,
                                       int64_t *bytes, std::string *note);

// Benchmark only: the bare cuDNN convolution (implementation "cudnn_core") on
// device buffers already in its layouts (reference/cuda/capsconv_cudnn.h):
// x [n*4, ci*4, H, W], w [co*4, ci*4, kh, kw] -> y [n*4, co*4, OH, OW]. The
// shapes come from input, filter and params as above.
Status run_cudnn_capsconv_core(const TensorView &input, const TensorView &filter, const ConvParams &params,
                               const float *x, const float *w, float *y, const Options &options);

}  // namespace halcaps::detail

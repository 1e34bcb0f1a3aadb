// Hand-written CUDA for dynamic routing and the DigitCaps layer (DESIGN.md
// §1.2), in the style of capsule_prediction_cuda.h: numbered versions, naive
// first.
//
//   u [B, I, K], W [I, J, E, K], b0 [I, J], u_hat [B, I, J, E], v [B, J, E]
//
// Versions:
//   1 naive  one kernel per step, one thread per output element, as an eager
//            framework runs it: the prediction (the blog's kernel), then per
//            iteration softmax over j, the weighted sum over i, squash, and
//            the agreement update of the logits.
//
// All pointers are device pointers; launchers only enqueue work on `stream`
// and return the first launch error. They never synchronise.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace halcaps::cuda_reference {

struct RoutingShape {
    int64_t batch, in_caps, out_caps, out_dim;  // B, I, J, E
};

// Device scratch the naive routing needs, in floats: logits and c [B, I, J],
// s [B, J, E].
int64_t routing_scratch_floats(const RoutingShape &shape);

// v = route(u_hat, b0) with `iterations` >= 1 rounds; b0 may be null (zeros).
// `scratch` holds routing_scratch_floats(shape) floats.
cudaError_t route_naive(const float *u_hat, const float *b0, float *v, const RoutingShape &shape, int iterations,
                        float *scratch, cudaStream_t stream);

}  // namespace halcaps::cuda_reference

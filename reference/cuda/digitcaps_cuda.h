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
//   2 fused  two kernels an iteration, u_hat recomputed in registers once an
//            iteration and never stored: the prediction, the logits (from
//            the running sum of the v's), the softmax and the weighted sum
//            over a chunk of input capsules in one kernel, the chunks' sum
//            and the squash in another. out_caps <= 16, out_dim <= 32,
//            in_dim <= 16 (digitcaps_fused_refusal).
//   3 tensor version 2's two kernels an iteration, with u_hat computed on
//            the tensor cores in float32 accuracy (3xTF32), 16 batch rows a
//            warp, u_hat and the sums of every output capsule in registers
//            (digitcaps_tensor_cores.cu).
//            out_caps <= 16, out_dim <= 16, in_dim <= 16
//            (digitcaps_tensor_refusal).
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

struct DigitCapsLayerShape {
    int64_t batch, in_caps, in_dim, out_caps, out_dim;  // B, I, K, J, E
};

// The fused layer's limits: the extent beyond them ("out_caps", "out_dim"
// or "in_dim") and its value, or a null extent when the shape is supported.
struct DigitCapsFusedRefusal {
    const char *extent = nullptr;
    int64_t value = 0;
};
DigitCapsFusedRefusal digitcaps_fused_refusal(const DigitCapsLayerShape &shape);

// How digitcaps_fused splits the sum over input capsules (chunk, chosen so
// that the pass kernel's blocks fill the current device once) and the
// device scratch it needs, in floats: the chunks' partial sums and the sum
// of the v's. Queries the current device; enqueues nothing.
struct DigitCapsFusedPlan {
    int64_t chunk = 0, chunks = 0, scratch_floats = 0;
};
cudaError_t digitcaps_fused_plan(const DigitCapsLayerShape &shape, DigitCapsFusedPlan *plan);

// v = digitcaps(u, W, b0) with `iterations` >= 1 rounds by version 2; b0
// may be null (zeros). `scratch` holds plan.scratch_floats floats, `plan`
// from digitcaps_fused_plan for this shape.
cudaError_t digitcaps_fused(const float *u, const float *W, const float *b0, float *v,
                            const DigitCapsLayerShape &shape, int iterations, const DigitCapsFusedPlan &plan,
                            float *scratch, cudaStream_t stream);

// Version 3's limits, as digitcaps_fused_refusal's.
DigitCapsFusedRefusal digitcaps_tensor_refusal(const DigitCapsLayerShape &shape);

// How digitcaps_tensor splits the work: blocks of m_tiles x i_lanes warps
// (16 batch rows a row tile; the i-lanes take alternate input capsules and
// are added in the block), `chunk` input capsules a block (so that the
// blocks fill the current device once), and the device scratch it needs, in
// floats. Queries the current device; enqueues nothing.
struct DigitCapsTensorPlan {
    int m_tiles = 0, i_lanes = 0;
    int64_t chunk = 0, chunks = 0, scratch_floats = 0;
};
cudaError_t digitcaps_tensor_plan(const DigitCapsLayerShape &shape, DigitCapsTensorPlan *plan);

// v = digitcaps(u, W, b0) by version 3, as digitcaps_fused.
cudaError_t digitcaps_tensor(const float *u, const float *W, const float *b0, float *v,
                             const DigitCapsLayerShape &shape, int iterations, const DigitCapsTensorPlan &plan,
                             float *scratch, cudaStream_t stream);

}  // namespace halcaps::cuda_reference

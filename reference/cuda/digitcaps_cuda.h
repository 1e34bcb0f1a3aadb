// Hand-written CUDA for dynamic routing and the DigitCaps layer (docs/design.md
// §1.2), in the style of predict_cuda.h: numbered versions, naive
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
// Backward versions (digitcaps_backward_cuda.cu), the gradients through every
// iteration (docs/design.md §1.2):
//   1 naive  one kernel per step, one thread per output element: the forward
//            replayed by version 1's steps keeping every iteration's c, s and
//            v, then per iteration (last first) the squash's, the weighted
//            sum's, the softmax's and the agreement's gradients; the layer
//            materialises u_hat by the blog's prediction kernel and takes
//            grad_u and grad_W from grad_u_hat by the blog's two kernels.
//   2 passes u_hat materialised once (the layer: the prediction's staged
//            forward), then two kernels an iteration for the forward's
//            replay and two for the backward: a pass kernel reading u_hat
//            once, a lane an output capsule of a row with its out_dim values
//            in registers (the logits of any iteration one dot away through
//            the running sum of the v's), and a kernel over the (b, j) rows
//            (squash, or its gradient); grad_u_hat written once, and the
//            layer's grad_u and grad_W from it by the prediction's
//            tensor-core gradients. out_caps <= 32, out_dim <= 32
//            (route_backward_passes_refusal).
//   3 tensor the layer only: version 2 with no u_hat in memory. Its pass
//            kernels are forward version 3's (digitcaps_tensor_pass): u_hat
//            recomputed on the tensor cores each pass, the forward's replay
//            storing c, the backward's passes storing G; version 2's row
//            kernels, grad_u_hat and gradients. Forward version 3's limits
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
cudaError_t digitcaps_fused(const float *u, const float *W, const float *b0, float *v, const DigitCapsLayerShape &shape,
                            int iterations, const DigitCapsFusedPlan &plan, float *scratch, cudaStream_t stream);

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

// v = digitcaps(u, W, b0) by version 3, as digitcaps_fused; where routing_s
// is not null, every iteration's s is stored there too ([iterations, B, J,
// E]: digitcaps_with_s); where routing_c is not null (with routing_s), every
// iteration's coupling coefficients c too ([iterations, B, I, J]:
// digitcaps_with_c), c_0 by digitcaps_first_coefficients and the later ones
// by the agreement passes that compute them.
cudaError_t digitcaps_tensor(const float *u, const float *W, const float *b0, float *v, float *routing_s,
                             float *routing_c, const DigitCapsLayerShape &shape, int iterations,
                             const DigitCapsTensorPlan &plan, float *scratch, cudaStream_t stream);

// c_0 = softmax over j of b0[i, :] (1 / J where b0 is null) for every batch
// row: c [B, I, J]. out_caps at most 16.
cudaError_t digitcaps_first_coefficients(const float *b0, float *c, const DigitCapsLayerShape &shape,
                                         cudaStream_t stream);

// Version 3's pass kernel on its own, one pass over the plan's grid, for
// backward version 3 (digitcaps_backward_cuda.cu), which replays the forward
// and runs its own backward passes with it. Writes the chunks' partial sums
// [plan.chunks, B, J, E] into `partial`:
//   first                the first iteration: sum_i c[i, j] u_hat, c =
//                        softmax(b0[i, :]) (1 / J without b0); `rows` unused;
//   agreement            a later one, `rows` = v_sum [B, J, E] (the sum of
//                        the earlier v's): c = softmax(b0 + u_hat . v_sum),
//                        sum_i c u_hat;
//   agreement_storing_c  the same, c stored into coefficients.c_out;
//   backward             `rows` = gs [B, J, E] (the gradient of s): gc =
//                        u_hat . gs, G = G_next + c (gc - sum_j c gc) from
//                        coefficients.c_in and .G_next (null: zeros), G
//                        stored into .G_out, sum_i G u_hat;
//   backward_with_logits `backward` with c computed by the pass as
//                        `agreement` computes it (`rows` = v_sum, b0) and
//                        stored into .c_out; gs from `gs_rows`; .G_next read,
//                        .G_out stored.
// gs_rows is null but in backward_with_logits. Coefficients are [B, I, J].
// Every pass but `first` may start before the kernel ahead of it in the
// stream ends (programmatic dependent launch).
enum class DigitCapsTensorPass { first, agreement, agreement_storing_c, backward, backward_with_logits };
struct DigitCapsTensorCoefficients {
    float *c_out = nullptr;
    const float *c_in = nullptr, *G_next = nullptr;
    float *G_out = nullptr;
};
cudaError_t digitcaps_tensor_pass(DigitCapsTensorPass pass, const float *u, const float *W, const float *b0,
                                  const float *rows, const float *gs_rows, float *partial,
                                  const DigitCapsTensorCoefficients &coefficients, const DigitCapsLayerShape &shape,
                                  const DigitCapsTensorPlan &plan, cudaStream_t stream);

// Backward version 1. grad_u_hat, grad_b0 = the gradients of route(u_hat,
// b0) given grad_v = dL/dv; b0 may be null (zeros), grad_b0 null (not
// computed). `scratch` holds route_backward_naive_scratch_floats floats.
int64_t route_backward_naive_scratch_floats(const RoutingShape &shape, int iterations);
cudaError_t route_backward_naive(const float *u_hat, const float *b0, const float *grad_v, float *grad_u_hat,
                                 float *grad_b0, const RoutingShape &shape, int iterations, float *scratch,
                                 cudaStream_t stream);

// Backward version 1 of the layer: grad_u, grad_W (and grad_b0 where not
// null) of digitcaps(u, W, b0). `scratch` holds
// digitcaps_backward_naive_scratch_floats floats (u_hat and its gradient among them).
int64_t digitcaps_backward_naive_scratch_floats(const DigitCapsLayerShape &shape, int iterations);
cudaError_t digitcaps_backward_naive(const float *u, const float *W, const float *b0, const float *grad_v,
                                     float *grad_u, float *grad_W, float *grad_b0, const DigitCapsLayerShape &shape,
                                     int iterations, float *scratch, cudaStream_t stream);

// Backward version 2's limits (the same for the layer: u_hat's shape), as
// digitcaps_fused_refusal's.
DigitCapsFusedRefusal route_backward_passes_refusal(const RoutingShape &shape);

// How version 2 splits the sums over input capsules (`chunk` capsules a
// block, so that the pass kernels' blocks fill the current device in whole
// waves of both the forward and the backward pass kernel) and the device
// scratch routing's gradients need, in floats. Queries the current device;
// enqueues nothing.
struct RouteBackwardPassesPlan {
    int64_t chunk = 0, chunks = 0, scratch_floats = 0;
};
cudaError_t route_backward_passes_plan(const RoutingShape &shape, int iterations, RouteBackwardPassesPlan *plan);

// Backward version 2, as route_backward_naive; `plan` from
// route_backward_passes_plan for this shape and iteration count.
cudaError_t route_backward_passes(const float *u_hat, const float *b0, const float *grad_v, float *grad_u_hat,
                                  float *grad_b0, const RoutingShape &shape, int iterations,
                                  const RouteBackwardPassesPlan &plan, float *scratch, cudaStream_t stream);

// Backward version 2 of the layer, as digitcaps_backward_naive; `plan` from
// route_backward_passes_plan for u_hat's shape, `scratch` holding
// digitcaps_backward_passes_scratch_floats floats.
int64_t digitcaps_backward_passes_scratch_floats(const DigitCapsLayerShape &shape, const RouteBackwardPassesPlan &plan);
cudaError_t digitcaps_backward_passes(const float *u, const float *W, const float *b0, const float *grad_v,
                                      float *grad_u, float *grad_W, float *grad_b0, const DigitCapsLayerShape &shape,
                                      int iterations, const RouteBackwardPassesPlan &plan, float *scratch,
                                      cudaStream_t stream);

// Backward version 3 of the layer, as digitcaps_backward_naive; `plan` from
// digitcaps_tensor_plan for this shape, `scratch` holding
// digitcaps_backward_tensor_scratch_floats floats (grad_u_hat among them).
// routing_s: null, or the forward's s of every iteration ([iterations, B, J,
// E], digitcaps_backward_with_s), which replaces the forward's replay.
// routing_c: null, or (with routing_s) the forward's c of every iteration
// ([iterations, B, I, J], digitcaps_backward_with_c): the backward passes
// then read c rather than computing it from the logits.
// given_c: routing_c will be given (the scratch then holds no c).
int64_t digitcaps_backward_tensor_scratch_floats(const DigitCapsLayerShape &shape, const DigitCapsTensorPlan &plan,
                                                 int iterations, bool given_c);
cudaError_t digitcaps_backward_tensor(const float *u, const float *W, const float *b0, const float *routing_s,
                                      const float *routing_c, const float *grad_v, float *grad_u, float *grad_W,
                                      float *grad_b0, const DigitCapsLayerShape &shape, int iterations,
                                      const DigitCapsTensorPlan &plan, float *scratch, cudaStream_t stream);

}  // namespace halcaps::cuda_reference

// Hand-written CUDA for the gradients of routing and of the DigitCaps layer
// (digitcaps_cuda.h, "Backward versions").
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "digitcaps_cuda.h"
#include "digitcaps_naive_steps.cuh"
#include "digitcaps_shared.cuh"
#include "predict_cuda.h"

namespace halcaps::cuda_reference {

// ---------------------------------------------------------------------------
// Version 1, naive: one kernel a step, a thread per output element. The
// forward is replayed by the forward's own naive steps with every
// iteration's c, s and v kept; then, last iteration first (t = r-1 .. 0),
// with G = dL/dlogits[t+1] (zero after the last iteration) and gv = dL/dv[t]
// (grad_v for the last):
//
//   gs          = squash_backward(s[t], gv)
//   grad_u_hat (+)= c[t] gs + G v[t]                  (the weighted sum, the agreement)
//   gc[b, i, j] = gs[b, j, :] . u_hat[b, i, j, :]
//   G          += c[t] (gc - sum_j c[t] gc)            (the softmax; G is now dL/dlogits[t])
//   gv          = sum_i G u_hat                        (for t - 1: the agreement's v[t - 1])
//
// and grad_b0 = sum_b G. The layer adds the blog's prediction kernel in
// front (u_hat materialised) and the blog's two gradient kernels behind.
//
// Measured on an NVIDIA H200 (docs/history.md:
// nvidia-h200-hand-backward/, run 9): MNIST b128 2730.4 us, b512 7003.3.
// ---------------------------------------------------------------------------
namespace {

using naive_steps::blocks_for;
using naive_steps::i64;
using naive_steps::kThreads;

// The squash's gradient: with n2 = |s|^2 and v = f(n2) s, f(n2) = n2 / ((1 +
// n2) sqrt(n2 + eps)), dL/ds = f gv + 2 f'(n2) (s . gv) s, and
//   2 f'(n2) = (n2 + 2 eps - n2^2) / ((1 + n2)^2 (n2 + eps)^(3/2)).
// Returns (f, 2 f'(n2)) from n2, in double: |s|^2 of a float row fits (up to
// ~1e78) and nothing cancels. Both versions' row kernels use it.
struct SquashSlopes {
    double f, two_df;
};
__device__ inline SquashSlopes squash_slopes(double n2) {
    const double eps = 1e-9;  // docs/design.md §1.2
    const double root = sqrt(n2 + eps);
    return {n2 / ((1 + n2) * root), (n2 + 2 * eps - n2 * n2) / ((1 + n2) * (1 + n2) * (n2 + eps) * root)};
}

// gs[b, j, :] = dL/ds from gv = dL/dv for v = squash(s); one thread per
// (b, j).
__global__ void squash_backward_rows(const float *__restrict__ s, const float *__restrict__ gv, float *__restrict__ gs,
                                     i64 BJ, i64 E) {
    const i64 n = i64(blockIdx.x) * blockDim.x + threadIdx.x;
    if (n >= BJ) return;
    const float *s_row = s + n * E, *gv_row = gv + n * E;
    double n2 = 0, s_dot_gv = 0;
    for (i64 e = 0; e < E; e++) {
        n2 += double(s_row[e]) * s_row[e];
        s_dot_gv += double(s_row[e]) * gv_row[e];
    }
    const SquashSlopes d = squash_slopes(n2);
    for (i64 e = 0; e < E; e++) gs[n * E + e] = float(d.f * gv_row[e] + d.two_df * s_dot_gv * s_row[e]);
}

// grad_u_hat[b, i, j, e] = c[b, i, j] gs[b, j, e] (+ G[b, i, j] v[b, j, e]
// where G is given), written (`accumulate` false) or added; one thread per
// element.
__global__ void grad_u_hat_terms(const float *__restrict__ c, const float *__restrict__ gs, const float *__restrict__ G,
                                 const float *__restrict__ v, float *__restrict__ grad_u_hat, i64 B, i64 I, i64 J,
                                 i64 E, bool accumulate) {
    const i64 n = i64(blockIdx.x) * blockDim.x + threadIdx.x;
    if (n >= B * I * J * E) return;
    const i64 e = n % E, bij = n / E, j = bij % J, b = bij / (I * J);
    const i64 bje = (b * J + j) * E + e;
    float term = c[bij] * gs[bje];
    if (G != nullptr) term += G[bij] * v[bje];
    grad_u_hat[n] = accumulate ? grad_u_hat[n] + term : term;
}

// G[b, i, :] (+)= c (gc - sum_j c gc), the softmax's gradient; one thread per (b, i).
__global__ void softmax_backward_rows(const float *__restrict__ c, const float *__restrict__ gc, float *__restrict__ G,
                                      i64 BI, i64 J, bool accumulate) {
    const i64 n = i64(blockIdx.x) * blockDim.x + threadIdx.x;
    if (n >= BI) return;
    float weighted = 0.0f;
    for (i64 j = 0; j < J; j++) weighted += c[n * J + j] * gc[n * J + j];
    for (i64 j = 0; j < J; j++) {
        const float g = c[n * J + j] * (gc[n * J + j] - weighted);
        G[n * J + j] = accumulate ? G[n * J + j] + g : g;
    }
}

// grad_b0[i, j] = sum_b G[b, i, j]; one thread per (i, j).
__global__ void sum_over_batch(const float *__restrict__ G, float *__restrict__ grad_b0, i64 B, i64 IJ) {
    const i64 n = i64(blockIdx.x) * blockDim.x + threadIdx.x;
    if (n >= IJ) return;
    float sum = 0.0f;
    for (i64 b = 0; b < B; b++) sum += G[b * IJ + n];
    grad_b0[n] = sum;
}

// The naive backward's scratch, in order: logits, G and gc [B, I, J]; gs and
// gv [B, J, E]; c [r, B, I, J]; s and v [r, B, J, E].
struct NaiveBackwardScratch {
    float *logits, *G, *gc, *gs, *gv, *c, *s, *v;
    NaiveBackwardScratch(float *p, i64 BIJ, i64 BJE, int r)
        : logits(p), G(p + BIJ), gc(p + 2 * BIJ), gs(p + 3 * BIJ), gv(p + 3 * BIJ + BJE), c(p + 3 * BIJ + 2 * BJE),
          s(c + r * BIJ), v(s + r * BJE) {}
    static i64 floats(i64 BIJ, i64 BJE, int r) { return (3 + r) * BIJ + (2 + 2 * r) * BJE; }
};

}  // namespace

int64_t route_backward_naive_scratch_floats(const RoutingShape &sh, int iterations) {
    return NaiveBackwardScratch::floats(sh.batch * sh.in_caps * sh.out_caps, sh.batch * sh.out_caps * sh.out_dim,
                                        iterations);
}

cudaError_t route_backward_naive(const float *u_hat, const float *b0, const float *grad_v, float *grad_u_hat,
                                 float *grad_b0, const RoutingShape &sh, int iterations, float *scratch,
                                 cudaStream_t stream) {
    const i64 B = sh.batch, I = sh.in_caps, J = sh.out_caps, E = sh.out_dim;
    if (iterations < 1 || B < 1 || I < 1 || J < 1 || E < 1 || u_hat == nullptr || grad_v == nullptr ||
        grad_u_hat == nullptr || scratch == nullptr) {
        return cudaErrorInvalidValue;
    }
    const i64 BIJ = B * I * J, BJE = B * J * E;
    const NaiveBackwardScratch w(scratch, BIJ, BJE, iterations);
    naive_steps::enqueue_routing(u_hat, b0, B, I, J, E, iterations,
                                 naive_steps::RoutingBuffers{w.logits, w.c, w.s, w.v, BIJ, BJE, BJE}, stream);
    for (int t = iterations - 1; t >= 0; t--) {
        const bool last = t == iterations - 1;
        const float *c = w.c + t * BIJ, *s = w.s + t * BJE, *v = w.v + t * BJE;
        squash_backward_rows<<<blocks_for(B * J), kThreads, 0, stream>>>(s, last ? grad_v : w.gv, w.gs, B * J, E);
        // G is still dL/dlogits[t + 1] here; none after the last iteration.
        grad_u_hat_terms<<<blocks_for(BIJ * E), kThreads, 0, stream>>>(c, w.gs, last ? nullptr : w.G, v, grad_u_hat, B,
                                                                       I, J, E, !last);
        naive_steps::dot_over_e<<<blocks_for(BIJ), kThreads, 0, stream>>>(u_hat, w.gs, w.gc, B, I, J, E, false);
        softmax_backward_rows<<<blocks_for(B * I), kThreads, 0, stream>>>(c, w.gc, w.G, B * I, J, !last);
        if (t > 0) {
            naive_steps::weighted_sum_over_i<<<blocks_for(BJE), kThreads, 0, stream>>>(w.G, u_hat, w.gv, B, I, J, E);
        }
    }
    if (grad_b0 != nullptr) sum_over_batch<<<blocks_for(I * J), kThreads, 0, stream>>>(w.G, grad_b0, B, I * J);
    return cudaGetLastError();
}

int64_t digitcaps_backward_naive_scratch_floats(const DigitCapsLayerShape &sh, int iterations) {
    const RoutingShape routing{sh.batch, sh.in_caps, sh.out_caps, sh.out_dim};
    return 2 * sh.batch * sh.in_caps * sh.out_caps * sh.out_dim +
           route_backward_naive_scratch_floats(routing, iterations);
}

namespace {

// The layer's backward around routing's: u_hat = the prediction (version
// forward_version of predict_cuda.h), grad_u_hat = route_grads(u_hat,
// grad_u_hat, route_scratch), then grad_u and grad_W from grad_u_hat (version
// backward_version). u_hat and grad_u_hat lead `scratch`; routing's scratch
// follows them.
template <typename RouteGrads>
cudaError_t layer_backward(const float *u, const float *W, float *grad_u, float *grad_W, const DigitCapsLayerShape &sh,
                           int forward_version, int backward_version, float *scratch, cudaStream_t stream,
                           RouteGrads route_grads) {
    if (u == nullptr || W == nullptr || grad_u == nullptr || grad_W == nullptr || scratch == nullptr) {
        return cudaErrorInvalidValue;
    }
    const PredictShape predict{sh.batch, sh.in_caps, sh.in_dim, sh.out_caps, sh.out_dim};
    const i64 u_hat_floats = sh.batch * sh.in_caps * sh.out_caps * sh.out_dim;
    float *u_hat = scratch, *grad_u_hat = scratch + u_hat_floats;
    if (cudaError_t err = predict_forward(forward_version, u, W, u_hat, predict, stream); err != cudaSuccess) {
        return err;
    }
    if (cudaError_t err = route_grads(u_hat, grad_u_hat, scratch + 2 * u_hat_floats); err != cudaSuccess) return err;
    return predict_backward(backward_version, grad_u_hat, u, W, grad_u, grad_W, predict, stream);
}

}  // namespace

cudaError_t digitcaps_backward_naive(const float *u, const float *W, const float *b0, const float *grad_v,
                                     float *grad_u, float *grad_W, float *grad_b0, const DigitCapsLayerShape &sh,
                                     int iterations, float *scratch, cudaStream_t stream) {
    const RoutingShape routing{sh.batch, sh.in_caps, sh.out_caps, sh.out_dim};
    constexpr int kBlogNaive = 1;  // predict_cuda.h's version 1, forward and backward
    return layer_backward(u, W, grad_u, grad_W, sh, kBlogNaive, kBlogNaive, scratch, stream,
                          [&](const float *u_hat, float *grad_u_hat, float *route_scratch) {
                              return route_backward_naive(u_hat, b0, grad_v, grad_u_hat, grad_b0, routing, iterations,
                                                          route_scratch, stream);
                          });
}

// ---------------------------------------------------------------------------
// Version 2, passes: u_hat materialised once (predict_cuda.h's
// staged forward, for the layer), then two kernels an iteration for the
// forward's replay and two for the backward, each pass kernel reading u_hat
// once; grad_u_hat written once by a kernel that needs no u_hat, and the
// layer's grad_u and grad_W from it by the prediction's tensor-core
// gradients.
//
// pass kernels   a block of kPassWarps warps for one batch element b and a
//                chunk of input capsules. A warp takes RW = 32 / JL rows
//                (b, i) of u_hat at a time, JL = out_caps rounded up to a
//                power of two lanes a row: lane (row, j) holds u_hat[b, i,
//                j, :] in registers, so that dots over out_dim are the
//                lane's own FMAs and only the softmax's sums over j cross
//                lanes. Sums over the chunk (s_t's or gv's share) stay in
//                the lane's registers, are added over the warp's rows and
//                the block's warps, and written as the chunk's partial sums.
//                The grid is whole waves of both pass kernels.
//   forward      iteration t's logits b0 + u_hat . v_sum_t (the agreement is
//                linear in v: v_sum_t = v_0 + ... + v_{t-1}), c_t (stored:
//                [r, B, I, J]) and the chunk's share of s_t = sum_i c_t u_hat.
//   backward     gc = u_hat . gs_t, G_t = G_{t+1} + c_t (gc - sum_j c_t gc)
//                (stored, every t) and the chunk's share of gv_{t-1} = sum_i
//                G_t u_hat, for t = r-1 .. 1; t = 0 (G_0) only for grad_b0.
// grad_u_hat     sum_t c_t gs_t + sum_{t < r-1} G_{t+1} v_t: a thread per 4
//                floats of a row for 4 input capsules (out_dim a multiple of
//                4), else per row.
// row kernels    a warp per (b, j) row, lane e: the chunks' partial sums
//                added; forward: s_t kept, v_t = squash(s_t), v_sum_{t+1}
//                = v_sum_t + v_t; backward: gs_t = squash_backward(s_t,
//                gv_t), gv_t being grad_v for the last iteration.
// grad_b0 = sum_b G_0, a thread per (i, j).
//
// Limits: out_caps <= 32 (a row's lanes), out_dim <= 32 (a lane's
// registers): route_backward_passes_refusal.
//
// Measured on an NVIDIA H200 (docs/history.md:
// nvidia-h200-tensor-backward/, run 8, `halcaps bench --op
// digitcaps_backward`, grad_b0 not asked for): MNIST b128 342.6 us, b512
// 1144.3, against version 3's 243.8 / 744.2, the Halide default
// rows_vectors' 623.1 / 2028.6 and version 1's 2673.0 / 6931.5 in the same
// call. Under ncu at b128 (run 6): a forward pass 38-40 us, a backward pass
// 35-41, grad_u_hat 42.0, the staged forward 28, the tensor-core gradients
// 49, the row kernels 3-4.5 each. Before grad_u_hat_columns (docs/history.md:
// nvidia-h200-hand-backward/, run 9): 365.8 / 1216.8 us. Before, as (j, e) lanes
// (a lane an element, dots by shuffles), the passes issued 250-500
// instructions a row and the layer took 720-1370 us (runs 1-4).
// ---------------------------------------------------------------------------
namespace {
namespace passes {

constexpr int kPassWarps = 8;
constexpr int kPassThreads = 32 * kPassWarps;
constexpr int kMaxOutCaps = 32, kMaxOutDim = 32;
constexpr int kRowWarps = 8;  // (b, j) rows a block of the row kernels

struct Geometry {
    i64 B, I;
    int J, E;
    int JL, RW;         // lanes a row of u_hat (J rounded up to a power of two), rows a warp
    i64 chunk, chunks;  // input capsules a block, blocks over in_caps
};

int power_of_two_at_least(int n) {
    int p = 1;
    while (p < n) p *= 2;
    return p;
}

// A lane's place: row slot `row` of its warp's RW rows, output capsule j.
struct Lane {
    int lane, row, j;
    bool in_j;
    __device__ explicit Lane(const Geometry &g)
        : lane(int(threadIdx.x % 32)), row(lane / g.JL), j(lane % g.JL), in_j(j < g.J) {}
};

// Sum and maximum over the JL lanes of a row. Unrolled over the five levels
// of a warp: every level shuffles, and a level beyond the row keeps the
// lane's own value, so that no shuffle sits in a branch.
__device__ inline float row_sum(float x, int JL) {
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
        const float y = __shfl_xor_sync(0xffffffffu, x, o);
        x = o < JL ? x + y : x;
    }
    return x;
}
__device__ inline float row_max(float x, int JL) {
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
        const float y = __shfl_xor_sync(0xffffffffu, x, o);
        x = o < JL ? fmaxf(x, y) : x;
    }
    return x;
}

// x[0 .. EM) = p[0 .. E) (zeros past E, or everywhere where `ok` is false).
// VEC: E == EM, a multiple of 4, and p on a 16-byte boundary: 16-byte loads.
template <int EM, bool VEC>
__device__ inline void load_vec(const float *__restrict__ p, int E, bool ok, float *x) {
    if (VEC) {
#pragma unroll
        for (int q = 0; q < EM / 4; q++) {
            const float4 v = ok ? reinterpret_cast<const float4 *>(p)[q] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            x[4 * q] = v.x, x[4 * q + 1] = v.y, x[4 * q + 2] = v.z, x[4 * q + 3] = v.w;
        }
    } else {
#pragma unroll
        for (int e = 0; e < EM; e++) x[e] = ok && e < E ? p[e] : 0.0f;
    }
}
template <int EM, bool VEC>
__device__ inline void store_vec(float *__restrict__ p, int E, const float *x) {
    if (VEC) {
#pragma unroll
        for (int q = 0; q < EM / 4; q++) {
            reinterpret_cast<float4 *>(p)[q] = make_float4(x[4 * q], x[4 * q + 1], x[4 * q + 2], x[4 * q + 3]);
        }
    } else {
#pragma unroll
        for (int e = 0; e < EM; e++) {
            if (e < E) p[e] = x[e];
        }
    }
}

__device__ inline float dot(const float *x, const float *y, int n) {
    float sum = 0.0f;
    for (int e = 0; e < n; e++) sum = fmaf(x[e], y[e], sum);
    return sum;
}

// The block's lanes' sums acc[e] (for their j) added over the warp's rows and
// the block's warps, and written as the chunk's partial row out[j * E + e].
template <int EM>
__device__ inline void write_block_sum(float *acc, float *__restrict__ out, const Geometry &g, const Lane &l,
                                       float *shared /* [kPassWarps][32][EM] */) {
#pragma unroll
    for (int e = 0; e < EM; e++) {
#pragma unroll
        for (int o = 16; o > 0; o /= 2) {
            const float y = __shfl_xor_sync(0xffffffffu, acc[e], o);
            acc[e] = o >= g.JL ? acc[e] + y : acc[e];
        }
    }
    const int warp = int(threadIdx.x) / 32;
    if (l.row == 0) {
#pragma unroll
        for (int e = 0; e < EM; e++) shared[(warp * 32 + l.j) * EM + e] = acc[e];
    }
    __syncthreads();
    for (int n = int(threadIdx.x); n < g.J * g.E; n += kPassThreads) {
        const int j = n / g.E, e = n % g.E;
        float sum = 0.0f;
        for (int w = 0; w < kPassWarps; w++) sum += shared[(w * 32 + j) * EM + e];
        out[n] = sum;
    }
}

// Where the passes keep what they share, per iteration t (each [r] below):
// s_t, v_t, v_sum_t (v_sum_0 unused) and gs_t [B, J, E]; c_t and G_t [B, I, J].
// c_0 is [B, I, J] like the others (c0_batch_stride I * J), or one [I, J]
// table for every batch row (c0_batch_stride 0): version 3's c_0 =
// softmax(b0[i, :]) is the same for every row, and only grad_b0's G_0 pass
// reads it per row.
struct Trace {
    float *s, *v, *v_sum, *gs, *c, *G;
    i64 BJE, BIJ;  // floats an iteration
    i64 c0_batch_stride;
};

// The rows a warp takes: i = i0 + l.row for i0 = first + RW * (warp +
// kPassWarps * n), below i_end; f(i, in) for each, `in` false for a row
// past i_end or a lane past J (whose row is all zeros: f computes it all the
// same, so that no shuffle sits in a branch, and stores nothing of it).
template <typename F>
__device__ inline void for_rows(i64 chunk, const Geometry &g, const Lane &l, F f) {
    const i64 i_end = min(g.I, (chunk + 1) * g.chunk);
    for (i64 i0 = chunk * g.chunk + g.RW * (threadIdx.x / 32); i0 < i_end; i0 += g.RW * kPassWarps) {
        const i64 i = i0 + l.row;
        f(i, l.in_j && i < i_end);
    }
}

// Forward replay, iteration t: c_t (stored) and partial[chunk, b, :, :] =
// the sum over the chunk's i of c_t u_hat.
template <int EM, bool VEC>
__global__ void __launch_bounds__(kPassThreads)
    forward_pass(const float *__restrict__ u_hat, const float *__restrict__ b0, Trace trace, int t,
                 float *__restrict__ partial, Geometry g) {
    __shared__ float shared[kPassWarps * 32 * EM];
    const i64 b = blockIdx.x, chunk = blockIdx.y;
    const Lane l(g);
    float vs[EM], acc[EM];
    load_vec<EM, VEC>(trace.v_sum + t * trace.BJE + (b * g.J + l.j) * g.E, g.E, t > 0 && l.in_j, vs);
#pragma unroll
    for (int e = 0; e < EM; e++) acc[e] = 0.0f;
    float *c_t = trace.c + t * trace.BIJ;
    for_rows(chunk, g, l, [&](i64 i, bool in) {
        const i64 bij = (b * g.I + i) * g.J + l.j;
        float x[EM];
        load_vec<EM, VEC>(u_hat + bij * g.E, g.E, in, x);
        float logit = t > 0 ? dot(x, vs, EM) : 0.0f;
        if (b0 != nullptr && in) logit += b0[i * g.J + l.j];
        const float top = row_max(l.in_j ? logit : -INFINITY, g.JL);
        const float term = l.in_j ? __expf(logit - top) : 0.0f;
        const float c = term / row_sum(term, g.JL);  // the sum >= 1
        if (in) c_t[bij] = c;
#pragma unroll
        for (int e = 0; e < EM; e++) acc[e] = fmaf(c, x[e], acc[e]);  // x = 0 where !in
    });
    write_block_sum<EM>(acc, partial + (chunk * g.B + b) * g.J * g.E, g, l, shared);
}

// Backward, iteration t: G_t (stored), and the chunk's share of gv_{t-1} into
// partial (t > 0). At t = 0 only G_0 is needed, for grad_b0.
template <int EM, bool VEC>
__global__ void __launch_bounds__(kPassThreads, 3)
    backward_pass(const float *__restrict__ u_hat, Trace trace, int t, int iterations, float *__restrict__ partial,
                  Geometry g) {
    __shared__ float shared[kPassWarps * 32 * EM];
    const i64 b = blockIdx.x, chunk = blockIdx.y;
    const Lane l(g);
    const bool last = t == iterations - 1;
    float gs[EM], acc[EM];
    load_vec<EM, VEC>(trace.gs + t * trace.BJE + (b * g.J + l.j) * g.E, g.E, l.in_j, gs);
#pragma unroll
    for (int e = 0; e < EM; e++) acc[e] = 0.0f;
    for_rows(chunk, g, l, [&](i64 i, bool in) {
        const i64 bij = (b * g.I + i) * g.J + l.j;
        float x[EM];
        load_vec<EM, VEC>(u_hat + bij * g.E, g.E, in, x);
        const float c = in ? trace.c[t * trace.BIJ + bij] : 0.0f;
        const float G_next = in && !last ? trace.G[(t + 1) * trace.BIJ + bij] : 0.0f;
        const float gc = dot(x, gs, EM);
        const float G = fmaf(c, gc - row_sum(c * gc, g.JL), G_next);
        if (in) trace.G[t * trace.BIJ + bij] = G;
#pragma unroll
        for (int e = 0; e < EM; e++) acc[e] = fmaf(G, x[e], acc[e]);  // x = 0 where !in
    });
    if (t > 0) write_block_sum<EM>(acc, partial + (chunk * g.B + b) * g.J * g.E, g, l, shared);
}

// grad_u_hat[b, i, j, :] = sum_t c_t gs_t + sum_{t < r-1} G_{t+1} v_t, from
// the coefficients of every iteration ([B, I, J]) and the vectors of (b, j)
// ([B, J, E]): no u_hat. Where out_dim is EM, a multiple of 4, and the
// pointers are on 16-byte boundaries (grad_u_hat_columns): a thread takes 4
// floats of a row (b, j) for kColumnInputs input capsules, so that it loads
// its pieces of gs_t and v_t once for all of them, and a warp's 16-byte
// stores are 512 contiguous bytes. Else (grad_u_hat_rows) a thread a row.
// Block (columns, groups): threadIdx.x a column (4 floats of a row (b, j)),
// threadIdx.y a group of kColumnInputs input capsules; blockIdx.x the batch
// row, blockIdx.y (striding by gridDim.y) the block's groups. R: the
// iteration count where it is at most kUnrolledIterations, so that every
// load of a thread is issued before its first FMA; else 0, a loop over the
// iterations, each one's loads waited for before the next's.
// On an H200 under ncu at MNIST b128 (docs/history.md:
// nvidia-h200-tensor-backward/, runs 2-6): a thread per 8 floats of one (b,
// i, j) row, 59.2 us; 8 floats of a row for 4 input capsules, 69.0; 4
// floats, 62.9; the same on this 2D grid, 66.6; all with the loop over the
// iterations, waiting on each one's loads (three of every four stall
// cycles, run 4). With the loads issued first: 44.5 us.
constexpr int kColumnInputs = 4;
constexpr int kUnrolledIterations = 5;
template <int EM, int R>
__global__ void __launch_bounds__(kPassThreads)
    grad_u_hat_columns(Trace trace, int iterations, float *__restrict__ grad_u_hat, Geometry g) {
    constexpr int kFloats = 4, kPieces = EM / kFloats;  // a row's pieces
    const int column = int(threadIdx.x), j = column / kPieces, first = column % kPieces * kFloats;
    const i64 b = blockIdx.x;
    const float *gs_row = trace.gs + (b * g.J + j) * g.E + first, *v_row = trace.v + (b * g.J + j) * g.E + first;
    for (i64 group = i64(blockIdx.y) * blockDim.y + threadIdx.y;; group += i64(gridDim.y) * blockDim.y) {
        const i64 i_first = group * kColumnInputs;
        if (i_first >= g.I) return;
        const int inputs = int(min(i64(kColumnInputs), g.I - i_first));
        const i64 bij_first = (b * g.I + i_first) * g.J + j;
        const float *c_at = trace.c + bij_first, *G_at = trace.G + trace.BIJ + bij_first;
        const float *c0_at = trace.c + b * trace.c0_batch_stride + i_first * g.J + j;
        float grad[kColumnInputs][kFloats];
#pragma unroll
        for (int k = 0; k < kColumnInputs; k++) {
#pragma unroll
            for (int e = 0; e < kFloats; e++) grad[k][e] = 0.0f;
        }
        // Iteration t's terms: c_t gs_t, and G_{t+1} v_t where v_t reached the
        // next iteration's logits (t + 1 < iterations; else zeros).
        auto add_terms = [&](const float(&gs)[kFloats], const float(&v)[kFloats], const float(&c)[kColumnInputs],
                             const float(&G_next)[kColumnInputs]) {
#pragma unroll
            for (int k = 0; k < kColumnInputs; k++) {
#pragma unroll
                for (int e = 0; e < kFloats; e++) grad[k][e] = fmaf(G_next[k], v[e], fmaf(c[k], gs[e], grad[k][e]));
            }
        };
        auto load_terms = [&](int t, float(&gs)[kFloats], float(&v)[kFloats], float(&c)[kColumnInputs],
                              float(&G_next)[kColumnInputs]) {
            const bool agreement = t + 1 < iterations;
            load_vec<kFloats, true>(gs_row + t * trace.BJE, g.E, true, gs);
            load_vec<kFloats, true>(v_row + t * trace.BJE, g.E, agreement, v);
#pragma unroll
            for (int k = 0; k < kColumnInputs; k++) {
                c[k] = k < inputs ? (t == 0 ? c0_at : c_at + t * trace.BIJ)[k * g.J] : 0.0f;
                G_next[k] = k < inputs && agreement ? G_at[t * trace.BIJ + k * g.J] : 0.0f;
            }
        };
        if constexpr (R > 0) {
            float gs[R][kFloats], v[R][kFloats], c[R][kColumnInputs], G_next[R][kColumnInputs];
#pragma unroll
            for (int t = 0; t < R; t++) load_terms(t, gs[t], v[t], c[t], G_next[t]);
#pragma unroll
            for (int t = 0; t < R; t++) add_terms(gs[t], v[t], c[t], G_next[t]);
        } else {
            for (int t = 0; t < iterations; t++) {
                float gs[kFloats], v[kFloats], c[kColumnInputs], G_next[kColumnInputs];
                load_terms(t, gs, v, c, G_next);
                add_terms(gs, v, c, G_next);
            }
        }
        float *out = grad_u_hat + bij_first * g.E + first;
#pragma unroll
        for (int k = 0; k < kColumnInputs; k++) {
            if (k >= inputs) break;
            store_vec<kFloats, true>(out + k * g.J * g.E, g.E, grad[k]);
        }
    }
}
// Calls f(std::integral_constant<int, R>()) with R = iterations where it is
// at most kUnrolledIterations, else 0.
template <typename F>
void with_unrolled_iterations(int iterations, F f) {
    switch (iterations) {
    case 1:
        return f(std::integral_constant<int, 1>());
    case 2:
        return f(std::integral_constant<int, 2>());
    case 3:
        return f(std::integral_constant<int, 3>());
    case 4:
        return f(std::integral_constant<int, 4>());
    case 5:
        return f(std::integral_constant<int, 5>());
    default:
        return f(std::integral_constant<int, 0>());
    }
}
static_assert(kUnrolledIterations == 5, "with_unrolled_iterations' cases");
// grad_u_hat_columns' block and grid.
inline dim3 grad_u_hat_columns_block(const Geometry &g, int EM) {
    const int columns = g.J * EM / 4;
    return dim3(unsigned(columns), unsigned(std::max(1, kPassThreads / columns)));
}
inline dim3 grad_u_hat_columns_grid(const Geometry &g, int EM) {
    const i64 groups = (g.I + kColumnInputs - 1) / kColumnInputs, per_block = grad_u_hat_columns_block(g, EM).y;
    return dim3(unsigned(g.B), unsigned(std::min<i64>((groups + per_block - 1) / per_block, 65535)));
}
template <int EM>
__global__ void __launch_bounds__(kPassThreads)
    grad_u_hat_rows(Trace trace, int iterations, float *__restrict__ grad_u_hat, Geometry g) {
    const i64 bij = i64(blockIdx.x) * kPassThreads + threadIdx.x;
    if (bij >= g.B * g.I * g.J) return;
    const i64 b = bij / (g.I * g.J), bj = b * g.J + bij % g.J;
    const i64 bij0 = b * trace.c0_batch_stride + bij - b * g.I * g.J;  // c_0's (b, i, j)
    float grad[EM], y[EM];
#pragma unroll
    for (int e = 0; e < EM; e++) grad[e] = 0.0f;
    for (int t = 0; t < iterations; t++) {
        const bool agreement = t + 1 < iterations;
        const float c = t == 0 ? trace.c[bij0] : trace.c[t * trace.BIJ + bij];
        load_vec<EM, false>(trace.gs + t * trace.BJE + bj * g.E, g.E, true, y);
#pragma unroll
        for (int e = 0; e < EM; e++) grad[e] = fmaf(c, y[e], grad[e]);
        const float G_next = agreement ? trace.G[(t + 1) * trace.BIJ + bij] : 0.0f;
        load_vec<EM, false>(trace.v + t * trace.BJE + bj * g.E, g.E, agreement, y);
#pragma unroll
        for (int e = 0; e < EM; e++) grad[e] = fmaf(G_next, y[e], grad[e]);
    }
    store_vec<EM, false>(grad_u_hat + bij * g.E, g.E, grad);
}

// The row kernels: a warp per (b, j) row, lane e.
// The chunks' partial sums of (row, e), 0 past out_dim. Summing 8 chunks at
// a time over both half-warps, with the row kernels launched overlapping the
// pass ahead, was measured (docs/history.md: nvidia-h200-tensor-backward/, run
// 7): version 3 at MNIST b128 9 us slower (255 against 246), version 2 6 us
// faster; this simpler one was kept.
// Four sums a lane, so that four loads are in flight, made the row kernels
// slower at MNIST b128 (64 chunks): 6.4-6.8 us against 4.6-5.0 under ncu
// (docs/history.md: nvidia-h200-tensor-training-pair/, run 6); one sum it is.
__device__ inline float chunks_sum(const float *__restrict__ partial, i64 row, int e, const Geometry &g) {
    float sum = 0.0f;
    if (e < g.E) {
        for (i64 ch = 0; ch < g.chunks; ch++) sum += partial[(ch * g.B * g.J + row) * g.E + e];
    }
    return sum;
}
__device__ inline float warp_sum(float x) {
    for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}
__device__ inline float warp_max(float x) {
    for (int o = 16; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}
__device__ inline double warp_sum(double x) {
    for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

// Iteration t of (b, j) row `row`, lane e, from its s: s_t and v_t =
// squash(s_t) kept, v_sum_{t+1} = v_sum_t + v_t.
__device__ inline void forward_row(float summed, Trace trace, int t, int iterations, i64 row, int e,
                                   const Geometry &g) {
    const float s = e < g.E ? summed : 0.0f;  // lanes past out_dim (some hold a copy) out of the norms
    const float m = fmaxf(warp_max(fabsf(s)), 1.17549435e-38f);  // FLT_MIN: s = 0 gives v = 0
    const float q = warp_sum((s / m) * (s / m));
    if (e >= g.E) return;
    const float v = digitcaps_shared::squash_of(s, m, q);
    const i64 n = t * trace.BJE + row * g.E + e;
    trace.s[n] = s;
    trace.v[n] = v;
    if (t + 1 < iterations) trace.v_sum[n + trace.BJE] = (t > 0 ? trace.v_sum[n] : 0.0f) + v;
}

// s_t = the partial sums added, then forward_row.
__global__ void __launch_bounds__(32 * kRowWarps)
    forward_rows(const float *__restrict__ partial, Trace trace, int t, int iterations, Geometry g) {
    const i64 row = i64(blockIdx.x) * kRowWarps + threadIdx.x / 32;
    if (row >= g.B * g.J) return;
    const int e = int(threadIdx.x % 32);
    forward_row(chunks_sum(partial, row, e, g), trace, t, iterations, row, e, g);
}

// Every iteration's forward_row from the forward's s (routing_s [r, B, J,
// E]): the trace the replay would leave but c, with no pass.
__global__ void __launch_bounds__(32 * kRowWarps)
    rows_of_given_s(const float *__restrict__ routing_s, Trace trace, int iterations, Geometry g) {
    const i64 row = i64(blockIdx.x) * kRowWarps + threadIdx.x / 32;
    if (row >= g.B * g.J) return;
    const int e = int(threadIdx.x % 32);
    // Issuing every iteration's load before the first squash was slower at
    // MNIST b128 under ncu: 7.2 us against 5.6 (run 6).
    for (int t = 0; t < iterations; t++) {
        const float s = e < g.E ? routing_s[t * trace.BJE + row * g.E + e] : 0.0f;
        forward_row(s, trace, t, iterations, row, e, g);
    }
}

// gs_t = squash_backward(s_t, gv_t), gv_t = grad_v (last iteration) or the
// partial sums added. As version 1's squash_backward_rows (squash_slopes, in double).
__global__ void __launch_bounds__(32 * kRowWarps)
    backward_rows(const float *__restrict__ partial, const float *__restrict__ grad_v, Trace trace, int t,
                  int iterations, Geometry g) {
    const i64 row = i64(blockIdx.x) * kRowWarps + threadIdx.x / 32;
    if (row >= g.B * g.J) return;
    const int e = int(threadIdx.x % 32);
    const i64 n = row * g.E + e;
    const bool last = t + 1 == iterations;  // the same for the whole warp
    const float summed = last ? 0.0f : chunks_sum(partial, row, e, g);
    const float gv = e >= g.E ? 0.0f : last ? grad_v[n] : summed;
    const double s = e < g.E ? trace.s[t * trace.BJE + n] : 0.0f;
    const double n2 = warp_sum(s * s), s_dot_gv = warp_sum(s * gv);
    const SquashSlopes d = squash_slopes(n2);
    if (e < g.E) trace.gs[t * trace.BJE + n] = float(d.f * gv + d.two_df * s_dot_gv * s);
}

}  // namespace passes

passes::Geometry geometry_of(const RoutingShape &sh) {
    passes::Geometry g{};
    g.B = sh.batch, g.I = sh.in_caps, g.J = int(sh.out_caps), g.E = int(sh.out_dim);
    g.JL = passes::power_of_two_at_least(g.J);
    g.RW = 32 / g.JL;
    return g;
}

// Calls f(std::integral_constant<int, EM>()) with EM = out_dim rounded up to
// 4, 8, 16 or 32 (a lane's registers of a row).
template <typename F>
auto with_out_dim(int E, F f) {
    if (E <= 4) return f(std::integral_constant<int, 4>());
    if (E <= 8) return f(std::integral_constant<int, 8>());
    if (E <= 16) return f(std::integral_constant<int, 16>());
    return f(std::integral_constant<int, 32>());
}

// The device scratch of version 2, in order: the chunks' partial sums
// [chunks, B, J, E], then the trace: s, v, v_sum, gs [r, B, J, E]; c and G
// [r, B, I, J].
struct PassesScratch {
    float *partial;
    passes::Trace trace;
    // own_c false: the caller's c (digitcaps_backward_with_c's routing_c), so
    // no floats of the scratch for it (trace.c null until the caller sets it).
    PassesScratch(float *p, const passes::Geometry &g, int r, bool own_c = true) {
        const i64 BJE = g.B * g.J * g.E, BIJ = g.B * g.I * g.J;
        partial = p;
        float *t = p + g.chunks * BJE;
        float *c = own_c ? t + 4 * r * BJE : nullptr;
        trace = passes::Trace{
            t,   t + r * BJE, t + 2 * r * BJE, t + 3 * r * BJE, c, t + 4 * r * BJE + (own_c ? r * BIJ : 0),
            BJE, BIJ,         g.I * g.J};
    }
    static i64 floats(const passes::Geometry &g, int r, bool own_c = true) {
        const i64 BJE = g.B * g.J * g.E, BIJ = g.B * g.I * g.J;
        return g.chunks * BJE + r * (4 * BJE + (own_c ? 2 : 1) * BIJ);
    }
};

}  // namespace

DigitCapsFusedRefusal route_backward_passes_refusal(const RoutingShape &sh) {
    if (sh.out_caps > passes::kMaxOutCaps) return {"out_caps", sh.out_caps};
    if (sh.out_dim > passes::kMaxOutDim) return {"out_dim", sh.out_dim};
    return {};
}

namespace {

// Calls f(forward_pass<EM, VEC>, backward_pass<EM, VEC>, grad_u_hat) for
// the shape, grad_u_hat(trace, iterations, out, stream) enqueueing the
// grad_u_hat kernel (grad_u_hat_columns<EM> where VEC, else
// grad_u_hat_rows<EM>): VEC where out_dim is EM, a multiple of 4, and u_hat,
// grad_u_hat and the scratch start on a 16-byte boundary (null pointers: as
// if they did).
template <typename F>
auto with_pass_kernels(const passes::Geometry &g, const void *u_hat, const void *grad_u_hat, const void *scratch, F f) {
    return with_out_dim(g.E, [&](auto em) {
        constexpr int EM = decltype(em)::value;
        auto aligned = [](const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
        auto blocks = [](i64 threads) { return unsigned((threads + passes::kPassThreads - 1) / passes::kPassThreads); };
        if (g.E == EM && aligned(u_hat) && aligned(grad_u_hat) && aligned(scratch)) {
            return f(passes::forward_pass<EM, true>, passes::backward_pass<EM, true>,
                     [&](const passes::Trace &trace, int iterations, float *out, cudaStream_t stream) {
                         const dim3 grid = passes::grad_u_hat_columns_grid(g, EM);
                         const dim3 block = passes::grad_u_hat_columns_block(g, EM);
                         passes::with_unrolled_iterations(iterations, [&](auto unrolled) {
                             passes::grad_u_hat_columns<EM, decltype(unrolled)::value>
                                 <<<grid, block, 0, stream>>>(trace, iterations, out, g);
                         });
                     });
        }
        return f(passes::forward_pass<EM, false>, passes::backward_pass<EM, false>,
                 [&](const passes::Trace &trace, int iterations, float *out, cudaStream_t stream) {
                     passes::grad_u_hat_rows<EM>
                         <<<blocks(g.B * g.I * g.J), passes::kPassThreads, 0, stream>>>(trace, iterations, out, g);
                 });
    });
}

// Versions 2 and 3 around their pass kernels, for `iterations` rounds:
// forward_pass(t) and backward_pass(t) enqueue iteration t's pass, which
// writes w.partial (backward_pass(0) only for grad_b0); the row kernels
// between them, then grad_u_hat by grad_u_hat_kernel (with_pass_kernels')
// and grad_b0 where it is asked for. Where given_s (the forward's
// routing_s) is not null, the replay is one row kernel from it and no
// forward pass runs: the backward passes then compute c themselves.
template <typename ForwardPass, typename BackwardPass, typename GradUHat>
cudaError_t enqueue_iterations(const passes::Geometry &g, const PassesScratch &w, const float *given_s,
                               const float *grad_v, float *grad_u_hat, float *grad_b0, int iterations,
                               cudaStream_t stream, ForwardPass forward_pass, BackwardPass backward_pass,
                               GradUHat grad_u_hat_kernel) {
    const unsigned row_blocks = unsigned((g.B * g.J + passes::kRowWarps - 1) / passes::kRowWarps);
    const unsigned row_threads = 32 * passes::kRowWarps;
    auto forward_rows = [&](int t) {
        passes::forward_rows<<<row_blocks, row_threads, 0, stream>>>(w.partial, w.trace, t, iterations, g);
        return cudaGetLastError();
    };
    auto backward_rows = [&](int t) {
        passes::backward_rows<<<row_blocks, row_threads, 0, stream>>>(w.partial, grad_v, w.trace, t, iterations, g);
        return cudaGetLastError();
    };
    if (given_s != nullptr) {
        passes::rows_of_given_s<<<row_blocks, row_threads, 0, stream>>>(given_s, w.trace, iterations, g);
    }
    for (int t = 0; t < (given_s != nullptr ? 0 : iterations); t++) {
        if (cudaError_t err = forward_pass(t); err != cudaSuccess) return err;
        if (cudaError_t err = forward_rows(t); err != cudaSuccess) return err;
    }
    // G_0 only for grad_b0: without it the last pass is t = 1.
    for (int t = iterations - 1; t >= (grad_b0 != nullptr ? 0 : 1); t--) {
        if (cudaError_t err = backward_rows(t); err != cudaSuccess) return err;
        if (cudaError_t err = backward_pass(t); err != cudaSuccess) return err;
    }
    if (grad_b0 == nullptr) {  // gs_0 from the t = 1 pass's sums (at one iteration, from grad_v)
        if (cudaError_t err = backward_rows(0); err != cudaSuccess) return err;
    }
    grad_u_hat_kernel(w.trace, iterations, grad_u_hat, stream);
    if (grad_b0 != nullptr) {
        sum_over_batch<<<blocks_for(g.I * g.J), kThreads, 0, stream>>>(w.trace.G, grad_b0, g.B, g.I * g.J);
    }
    return cudaGetLastError();
}

}  // namespace

cudaError_t route_backward_passes_plan(const RoutingShape &sh, int iterations, RouteBackwardPassesPlan *plan) {
    if (iterations < 1 || sh.batch < 1 || sh.in_caps < 1 || sh.out_caps < 1 || sh.out_dim < 1 ||
        route_backward_passes_refusal(sh).extent != nullptr) {
        return cudaErrorInvalidValue;
    }
    passes::Geometry g = geometry_of(sh);
    int device = 0, sms = 0, forward_per_sm = 0, backward_per_sm = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (err == cudaSuccess) {
        err = with_pass_kernels(g, nullptr, nullptr, nullptr, [&](auto forward, auto backward, auto) {
            cudaError_t e =
                cudaOccupancyMaxActiveBlocksPerMultiprocessor(&forward_per_sm, forward, passes::kPassThreads, 0);
            if (e != cudaSuccess) return e;
            return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&backward_per_sm, backward, passes::kPassThreads, 0);
        });
    }
    if (err != cudaSuccess) return err;
    // Blocks (b, chunk) that fill the device in whole waves of both pass
    // kernels (forward_per_sm x backward_per_sm blocks an SM: at MNIST 4 x 3,
    // so that neither leaves a partial last wave), each warp the same number
    // of capsules (RW at a time).
    g.chunk = digitcaps_shared::chunk_filling_device(g.I, g.B, forward_per_sm * backward_per_sm, sms,
                                                     i64(g.RW) * passes::kPassWarps);
    g.chunks = (g.I + g.chunk - 1) / g.chunk;
    plan->chunk = g.chunk;
    plan->chunks = g.chunks;
    plan->scratch_floats = PassesScratch::floats(g, iterations);
    return cudaSuccess;
}

cudaError_t route_backward_passes(const float *u_hat, const float *b0, const float *grad_v, float *grad_u_hat,
                                  float *grad_b0, const RoutingShape &sh, int iterations,
                                  const RouteBackwardPassesPlan &plan, float *scratch, cudaStream_t stream) {
    if (iterations < 1 || sh.batch < 1 || sh.in_caps < 1 || sh.out_caps < 1 || sh.out_dim < 1 ||
        route_backward_passes_refusal(sh).extent != nullptr || plan.chunk < 1 ||
        plan.chunks != (sh.in_caps + plan.chunk - 1) / plan.chunk || sh.batch > INT32_MAX || plan.chunks > 65535 ||
        u_hat == nullptr || grad_v == nullptr || grad_u_hat == nullptr || scratch == nullptr) {
        return cudaErrorInvalidValue;
    }
    passes::Geometry g = geometry_of(sh);
    g.chunk = plan.chunk;
    g.chunks = plan.chunks;
    const PassesScratch w(scratch, g, iterations);
    const dim3 pass_grid(unsigned(g.B), unsigned(g.chunks));
    return with_pass_kernels(
        g, u_hat, grad_u_hat, scratch, [&](auto forward_pass, auto backward_pass, auto grad_u_hat_kernel) {
            return enqueue_iterations(
                g, w, nullptr, grad_v, grad_u_hat, grad_b0, iterations, stream,
                [&](int t) {
                    forward_pass<<<pass_grid, passes::kPassThreads, 0, stream>>>(u_hat, b0, w.trace, t, w.partial, g);
                    return cudaGetLastError();
                },
                [&](int t) {
                    backward_pass<<<pass_grid, passes::kPassThreads, 0, stream>>>(u_hat, w.trace, t, iterations,
                                                                                  w.partial, g);
                    return cudaGetLastError();
                },
                grad_u_hat_kernel);
        });
}

int64_t digitcaps_backward_passes_scratch_floats(const DigitCapsLayerShape &sh, const RouteBackwardPassesPlan &plan) {
    return 2 * sh.batch * sh.in_caps * sh.out_caps * sh.out_dim + plan.scratch_floats;
}

cudaError_t digitcaps_backward_passes(const float *u, const float *W, const float *b0, const float *grad_v,
                                      float *grad_u, float *grad_W, float *grad_b0, const DigitCapsLayerShape &sh,
                                      int iterations, const RouteBackwardPassesPlan &plan, float *scratch,
                                      cudaStream_t stream) {
    const RoutingShape routing{sh.batch, sh.in_caps, sh.out_caps, sh.out_dim};
    // predict_cuda.h's fastest versions: the staged forward and the tensor-core gradients.
    constexpr int kStagedForward = 3, kTensorBackward = 4;
    return layer_backward(u, W, grad_u, grad_W, sh, kStagedForward, kTensorBackward, scratch, stream,
                          [&](const float *u_hat, float *grad_u_hat, float *route_scratch) {
                              return route_backward_passes(u_hat, b0, grad_v, grad_u_hat, grad_b0, routing, iterations,
                                                           plan, route_scratch, stream);
                          });
}

// ---------------------------------------------------------------------------
// Version 3, tensor (the layer only): version 2 with no u_hat in memory. Its
// passes are the forward version 3's pass kernel (digitcaps_tensor_pass:
// u_hat recomputed from u and W on the tensor cores in float32 accuracy, a
// warp 16 batch rows of an input capsule, u_hat and the sums of every
// output capsule in its registers):
//   the forward's replay  the first pass (c_0 = softmax(b0[i, :]), the same
//                         for every batch row, written by first_coefficients:
//                         as one [I, J] table unless grad_b0 is asked for),
//                         then agreement passes storing c_t;
//   the backward          gc = u_hat . gs_t, G_t = G_{t+1} + c_t (gc - sum_j
//                         c_t gc) (stored), the chunk's share of sum_i G_t u_hat;
// with version 2's row kernels between them, version 2's grad_u_hat (from c,
// G and the rows: no u_hat) and the prediction's tensor-core gradients.
// From the forward's s (digitcaps_backward_with_s, routing_s given) there
// is no replay: one row kernel takes every iteration's s, v and v_sum from
// routing_s, and each backward pass after the first iteration computes its
// c_t itself from the logits (backward_with_logits), storing it for
// grad_u_hat; c_0 is first_coefficients'. From the forward's s and c
// (digitcaps_backward_with_c, routing_c given too) the trace's c is
// routing_c and every backward pass is the plain one that reads it.
//
// Measured on an NVIDIA H200 (docs/history.md:
// nvidia-h200-tensor-backward/, run 8, `halcaps bench --op
// digitcaps_backward`, grad_b0 not asked for): MNIST b128 243.8 us, b512
// 744.2 (136 MB of device memory at b128, version 2's 226 MB), against
// version 2's 342.6 / 1144.3 and torch.compile's forward and backward 1371.6
// / 5180.6 in the same call. Under ncu at b128 (run 6): first pass 15.0 us,
// the passes storing c 24.6-25.1, the backward passes 25.4-29.5, grad_u_hat
// 44.5, the gradients 51.1, first_coefficients 4.0. With c_0 as one [I, J]
// table (docs/history.md: nvidia-h200-tensor-training-pair/, run 7): 243.3 /
// 736.9 us; first_coefficients 2.0 and grad_u_hat 41.4-43.1 under ncu.
// From the forward's s (run 7): 196.6 us at MNIST b128 and 611.7 at b512,
// against the Halide pair's rows_vectors 501.6 / 1599.1 in the same call;
// under ncu at b128 the two passes with the logits 40.4 and 41.2 us (run 6;
// 44.4 and 40.9 at the shallower staging, run 5), rows_of_given_s 5.6, the
// row kernels 3.0-4.8 each, grad_u_hat 41.6 and the gradients 51.0 (run 5).
// From the forward's s and c (docs/history.md: nvidia-h200-training-pair-with-c,
// run 1): 172.5 / 172.1 us at MNIST b128, 550.8 / 549.7 at b512, against
// 197.6 / 195.0 and 611.7 / 612.0 from s alone in the same run.
// ---------------------------------------------------------------------------
namespace {

// c_0[b, i, j] = softmax(b0[i, :])_j for every batch row: a thread per (i,
// j), by the first pass's own steps (digitcaps_shared.cuh's base-2 softmax;
// 1 / J without b0), written for the batch rows blockIdx.y, + gridDim.y, ...
// (its stores, over consecutive (i, j), coalesced; a thread per (b, i)
// writing its row took 17.5 us at MNIST b128 under ncu, run 1).
constexpr int kTensorMaxOutCaps = 16;  // version 3's out_caps limit (digitcaps_tensor_refusal)
__global__ void first_coefficients(const float *__restrict__ b0, float *__restrict__ c, i64 B, i64 I, int J) {
    const i64 n = i64(blockIdx.x) * blockDim.x + threadIdx.x;
    if (n >= I * J) return;
    float value = 1.0f / float(J);
    if (b0 != nullptr) {
        float row[kTensorMaxOutCaps];  // -inf past J: zeros after the softmax, no change to its sums
        digitcaps_shared::base2_logits_of_b0(b0 + n / J * J, J, row);
        digitcaps_shared::softmax_base2(row);
        const int j = int(n % J);
#pragma unroll
        for (int jj = 0; jj < kTensorMaxOutCaps; jj++) value = jj == j ? row[jj] : value;  // no indexed registers
    }
    for (i64 b = blockIdx.y; b < B; b += gridDim.y) c[b * I * J + n] = value;
}

// first_coefficients for `rows` batch rows of c ([rows, I, J]), the rows
// over at most 64 grid rows.
cudaError_t launch_first_coefficients(const float *b0, float *c, i64 rows, i64 I, int J, cudaStream_t stream) {
    constexpr i64 kBatchSlices = 64;
    first_coefficients<<<dim3(unsigned(blocks_for(I * J)), unsigned(std::min(rows, kBatchSlices))), kThreads, 0,
                         stream>>>(b0, c, rows, I, J);
    return cudaGetLastError();
}

passes::Geometry tensor_geometry(const DigitCapsLayerShape &sh, const DigitCapsTensorPlan &plan) {
    passes::Geometry g = geometry_of(RoutingShape{sh.batch, sh.in_caps, sh.out_caps, sh.out_dim});
    g.chunk = plan.chunk;
    g.chunks = plan.chunks;
    return g;
}

}  // namespace

int64_t digitcaps_backward_tensor_scratch_floats(const DigitCapsLayerShape &sh, const DigitCapsTensorPlan &plan,
                                                 int iterations, bool given_c) {
    return sh.batch * sh.in_caps * sh.out_caps * sh.out_dim +
           PassesScratch::floats(tensor_geometry(sh, plan), iterations, !given_c);
}

cudaError_t digitcaps_first_coefficients(const float *b0, float *c, const DigitCapsLayerShape &sh,
                                         cudaStream_t stream) {
    if (c == nullptr || sh.out_caps > kTensorMaxOutCaps || sh.batch < 1 || sh.in_caps < 1) return cudaErrorInvalidValue;
    return launch_first_coefficients(b0, c, sh.batch, sh.in_caps, int(sh.out_caps), stream);
}

cudaError_t digitcaps_backward_tensor(const float *u, const float *W, const float *b0, const float *routing_s,
                                      const float *routing_c, const float *grad_v, float *grad_u, float *grad_W,
                                      float *grad_b0, const DigitCapsLayerShape &sh, int iterations,
                                      const DigitCapsTensorPlan &plan, float *scratch, cudaStream_t stream) {
    if (iterations < 1 || sh.batch < 1 || sh.in_caps < 1 || digitcaps_tensor_refusal(sh).extent != nullptr ||
        plan.chunk < 1 || plan.chunks != (sh.in_caps + plan.chunk - 1) / plan.chunk || u == nullptr || W == nullptr ||
        grad_v == nullptr || grad_u == nullptr || grad_W == nullptr || scratch == nullptr ||
        (routing_c != nullptr && routing_s == nullptr)) {
        return cudaErrorInvalidValue;
    }
    const passes::Geometry g = tensor_geometry(sh, plan);
    float *grad_u_hat = scratch;
    PassesScratch w(scratch + g.B * g.I * g.J * g.E, g, iterations, routing_c == nullptr);
    if (routing_c != nullptr) {
        // The forward's c, c_0 for every batch row among them, read in place:
        // nothing writes the trace's c on this path.
        w.trace.c = const_cast<float *>(routing_c);
    } else {
        // c_0 per batch row only for grad_b0's G_0 pass; else one [I, J] table
        // (grad_u_hat reads it for every row: 5.9 MB less written and read at
        // MNIST b128).
        const i64 c0_rows = grad_b0 != nullptr ? g.B : 1;
        if (grad_b0 == nullptr) w.trace.c0_batch_stride = 0;
        if (cudaError_t err = launch_first_coefficients(b0, w.trace.c, c0_rows, g.I, g.J, stream); err != cudaSuccess) {
            return err;
        }
    }
    auto pass = [&](DigitCapsTensorPass kind, const float *rows, const float *gs_rows,
                    const DigitCapsTensorCoefficients &co) {
        return digitcaps_tensor_pass(kind, u, W, kind == DigitCapsTensorPass::backward ? nullptr : b0, rows, gs_rows,
                                     w.partial, co, sh, plan, stream);
    };
    if (cudaError_t err = with_pass_kernels(
            g, nullptr, grad_u_hat, w.partial,
            [&](auto, auto, auto grad_u_hat_kernel) {
                return enqueue_iterations(
                    g, w, routing_s, grad_v, grad_u_hat, grad_b0, iterations, stream,
                    [&](int t) {
                        DigitCapsTensorCoefficients co;
                        co.c_out = w.trace.c + t * w.trace.BIJ;
                        return pass(t == 0 ? DigitCapsTensorPass::first : DigitCapsTensorPass::agreement_storing_c,
                                    w.trace.v_sum + t * w.trace.BJE, nullptr, co);
                    },
                    [&](int t) {
                        DigitCapsTensorCoefficients co;
                        co.G_next = t + 1 < iterations ? w.trace.G + (t + 1) * w.trace.BIJ : nullptr;
                        co.G_out = w.trace.G + t * w.trace.BIJ;
                        const float *gs_t = w.trace.gs + t * w.trace.BJE;
                        // From the forward's s alone, c_t (t > 0) is the pass's own
                        // and c_0 first_coefficients'; with its c too, every c_t is read.
                        if (routing_s != nullptr && routing_c == nullptr && t > 0) {
                            co.c_out = w.trace.c + t * w.trace.BIJ;
                            return pass(DigitCapsTensorPass::backward_with_logits, w.trace.v_sum + t * w.trace.BJE,
                                        gs_t, co);
                        }
                        co.c_in = w.trace.c + t * w.trace.BIJ;
                        return pass(DigitCapsTensorPass::backward, gs_t, nullptr, co);
                    },
                    grad_u_hat_kernel);
            });
        err != cudaSuccess) {
        return err;
    }
    constexpr int kTensorBackward = 4;  // predict_cuda.h's tensor-core gradients
    const PredictShape predict{sh.batch, sh.in_caps, sh.in_dim, sh.out_caps, sh.out_dim};
    return predict_backward(kTensorBackward, grad_u_hat, u, W, grad_u, grad_W, predict, stream);
}

}  // namespace halcaps::cuda_reference

// Hand-written CUDA for the gradients of routing and of the DigitCaps layer
// (digitcaps_cuda.h, "Backward versions").
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "capsule_prediction_cuda.h"
#include "digitcaps_cuda.h"
#include "digitcaps_naive_steps.cuh"
#include "digitcaps_shared.cuh"

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
// ---------------------------------------------------------------------------
namespace {

using naive_steps::blocks_for;
using naive_steps::i64;
using naive_steps::kThreads;

// gs[b, j, :] = dL/ds from gv = dL/dv for v = squash(s); one thread per
// (b, j). With n2 = |s|^2 and v = f(n2) s, f(n2) = n2 / ((1 + n2) sqrt(n2 + eps)):
//   gs = f gv + 2 f'(n2) (s . gv) s,
//   2 f'(n2) = (n2 + 2 eps - n2^2) / ((1 + n2)^2 (n2 + eps)^(3/2)).
// In double: |s|^2 of a float row fits (up to ~1e78) and nothing cancels.
__global__ void squash_backward_rows(const float *__restrict__ s, const float *__restrict__ gv,
                                     float *__restrict__ gs, i64 BJ, i64 E) {
    const i64 n = i64(blockIdx.x) * blockDim.x + threadIdx.x;
    if (n >= BJ) return;
    const float *s_row = s + n * E, *gv_row = gv + n * E;
    double n2 = 0, s_dot_gv = 0;
    for (i64 e = 0; e < E; e++) {
        n2 += double(s_row[e]) * s_row[e];
        s_dot_gv += double(s_row[e]) * gv_row[e];
    }
    const double eps = 1e-9;  // DESIGN.md §1.2
    const double f = n2 / ((1 + n2) * sqrt(n2 + eps));
    const double two_df = (n2 + 2 * eps - n2 * n2) / ((1 + n2) * (1 + n2) * (n2 + eps) * sqrt(n2 + eps));
    for (i64 e = 0; e < E; e++) gs[n * E + e] = float(f * gv_row[e] + two_df * s_dot_gv * s_row[e]);
}

// grad_u_hat[b, i, j, e] = c[b, i, j] gs[b, j, e] (+ G[b, i, j] v[b, j, e]
// where G is given), written (`accumulate` false) or added; one thread per
// element.
__global__ void grad_u_hat_terms(const float *__restrict__ c, const float *__restrict__ gs,
                                 const float *__restrict__ G, const float *__restrict__ v,
                                 float *__restrict__ grad_u_hat, i64 B, i64 I, i64 J, i64 E, bool accumulate) {
    const i64 n = i64(blockIdx.x) * blockDim.x + threadIdx.x;
    if (n >= B * I * J * E) return;
    const i64 e = n % E, bij = n / E, j = bij % J, b = bij / (I * J);
    const i64 bje = (b * J + j) * E + e;
    float term = c[bij] * gs[bje];
    if (G != nullptr) term += G[bij] * v[bje];
    grad_u_hat[n] = accumulate ? grad_u_hat[n] + term : term;
}

// G[b, i, :] (+)= c (gc - sum_j c gc), the softmax's gradient; one thread per (b, i).
__global__ void softmax_backward_rows(const float *__restrict__ c, const float *__restrict__ gc,
                                      float *__restrict__ G, i64 BI, i64 J, bool accumulate) {
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
        grad_u_hat_terms<<<blocks_for(BIJ * E), kThreads, 0, stream>>>(c, w.gs, last ? nullptr : w.G, v, grad_u_hat,
                                                                       B, I, J, E, !last);
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
    return 2 * sh.batch * sh.in_caps * sh.out_caps * sh.out_dim + route_backward_naive_scratch_floats(routing, iterations);
}

cudaError_t digitcaps_backward_naive(const float *u, const float *W, const float *b0, const float *grad_v,
                                     float *grad_u, float *grad_W, float *grad_b0, const DigitCapsLayerShape &sh,
                                     int iterations, float *scratch, cudaStream_t stream) {
    if (u == nullptr || W == nullptr || grad_u == nullptr || grad_W == nullptr || scratch == nullptr) {
        return cudaErrorInvalidValue;
    }
    const PredictShape predict{sh.batch, sh.in_caps, sh.out_caps, sh.out_dim, sh.in_dim};
    const RoutingShape routing{sh.batch, sh.in_caps, sh.out_caps, sh.out_dim};
    const i64 u_hat_floats = sh.batch * sh.in_caps * sh.out_caps * sh.out_dim;
    float *u_hat = scratch, *grad_u_hat = scratch + u_hat_floats;
    constexpr int kBlogNaive = 1;  // capsule_prediction_cuda.h's version 1, forward and backward
    if (cudaError_t err = predict_forward(kBlogNaive, u, W, u_hat, predict, stream); err != cudaSuccess) return err;
    if (cudaError_t err = route_backward_naive(u_hat, b0, grad_v, grad_u_hat, grad_b0, routing, iterations,
                                               scratch + 2 * u_hat_floats, stream);
        err != cudaSuccess) {
        return err;
    }
    return predict_backward(kBlogNaive, grad_u_hat, u, W, grad_u, grad_W, predict, stream);
}


// ---------------------------------------------------------------------------
// Version 2, passes: u_hat materialised once (capsule_prediction_cuda.h's
// staged forward, for the layer), then two kernels an iteration, each pass
// kernel reading u_hat once, for the forward's replay and again for the
// backward; grad_u_hat written once, and the layer's grad_u and grad_W from
// it by the prediction's tensor-core gradients.
//
// The agreement is linear in v, so iteration t's logits are
//   logits_t = b0 + u_hat . v_sum_t,  v_sum_t = v_0 + ... + v_{t-1}
// and any iteration's c is one dot a (b, i, j) away from u_hat's row.
//
// pass kernels   a block of kPassWarps warps for one batch element b and a
//                chunk of input capsules; a warp walks its chunk's
//                capsules i, kPassWarps apart, with u_hat[b, i, :, :] in its
//                lanes: lane l holds (j, e) = (step * JP + l / EP, l % EP)
//                for each step, EP = out_dim rounded up to a power of two,
//                JP = 32 / EP output capsules a step. Dots over e are
//                shuffles within EP lanes, the softmax over j shuffles
//                across the JP groups. Sums over the chunk stay in
//                registers, are added over the block's warps in shared
//                memory and written as the chunk's partial sums.
//   forward      c_t, and the chunk's share of s_t = sum_i c_t u_hat.
//   backward     c_t, gc = u_hat . gs_t, G_t = G_{t+1} + c_t (gc - sum_j
//                c_t gc) (stored: G_t [B, I, J] for every t), and the
//                chunk's share of gv_{t-1} = sum_i G_t u_hat; at t = 0
//                grad_u_hat's row, sum_t c_t gs_t + sum_{t<r-1} G_{t+1} v_t,
//                every c_t again from its logits.
// row kernels    a warp per (b, j) row, lane e: the chunks' partial sums
//                added; forward: s_t kept, v_t = squash(s_t), v_sum_{t+1}
//                = v_sum_t + v_t; backward: gs_t = squash_backward(s_t,
//                gv_t), gv_t being grad_v for the last iteration.
// grad_b0 = sum_b G_0, a thread per (i, j).
//
// Limits: out_dim <= 32, and out_caps at most kMaxSteps * JP (16 output
// capsules at out_dim 17..32, 32 at 9..16, ...): route_backward_passes_refusal.
// ---------------------------------------------------------------------------
namespace {
namespace passes {

constexpr int kPassWarps = 8;
constexpr int kPassThreads = 32 * kPassWarps;
constexpr int kMaxSteps = 16;  // a lane's (j, e) elements of a row at most; S, a kernel's template
                               // parameter, is their number (Geometry::steps)
constexpr int kRowWarps = 8;   // (b, j) rows a block of the row kernels

struct Geometry {
    i64 B, I;
    int J, E;
    int EP, JP, steps;  // lanes an output capsule, output capsules a step, steps a row
    i64 chunk, chunks;  // input capsules a block, blocks over in_caps
};

int lanes_per_capsule(int E) {
    int EP = 1;
    while (EP < E) EP *= 2;
    return EP;
}

// The sum over the lane's EP-lane group (every lane of the group gets it).
__device__ inline float group_sum(float x, int EP) {
    for (int o = EP / 2; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

// Over the JP groups of the warp (lanes EP apart).
__device__ inline float across_groups_max(float x, int EP) {
    for (int o = EP; o < 32; o *= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}
__device__ inline float across_groups_sum(float x, int EP) {
    for (int o = EP; o < 32; o *= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

// A lane's place in a row: its output capsule j of each step and out_dim
// index e; `valid` where (j, e) lies inside the row.
struct Lane {
    int jl, e;
    __device__ Lane(const Geometry &g) : jl(int(threadIdx.x % 32) / g.EP), e(int(threadIdx.x % 32) % g.EP) {}
    __device__ int j(int step, const Geometry &g) const { return step * g.JP + jl; }
    __device__ bool valid(int step, const Geometry &g) const { return j(step, g) < g.J && e < g.E; }
};

// x[step] = row[j * E + e] (0 outside the row) for a [J, E] row.
template <int S>
__device__ inline void load_row(const float *__restrict__ row, const Geometry &g, const Lane &l, float *x) {
#pragma unroll
    for (int st = 0; st < S; st++) {
        x[st] = l.valid(st, g) ? row[l.j(st, g) * g.E + l.e] : 0.0f;
    }
}

// c[step] = softmax over j of logits b0[i, :] (b0_row null: zeros) + x .
// v_sum[b, :] (`agree` false: no agreement yet), for the lane's output
// capsule of each step.
template <int S>
__device__ inline void coupling(const float *x, const float *v_sum, bool agree, const float *__restrict__ b0_row,
                                const Geometry &g, const Lane &l, float *c) {
    float top = -INFINITY;
#pragma unroll
    for (int st = 0; st < S; st++) {
        const int j = l.j(st, g);
        float logit = agree ? group_sum(x[st] * v_sum[st], g.EP) : 0.0f;
        if (b0_row != nullptr && j < g.J) logit += b0_row[j];
        c[st] = j < g.J ? logit : -INFINITY;
        top = fmaxf(top, c[st]);
    }
    top = across_groups_max(top, g.EP);
    float total = 0.0f;
#pragma unroll
    for (int st = 0; st < S; st++) {
        c[st] = __expf(c[st] - top);  // 0 past J
        total += c[st];
    }
    // Each lane of a group holds the same terms: sum the lane's steps, then
    // across the groups (one lane of each).
    total = across_groups_sum(total, g.EP);
#pragma unroll
    for (int st = 0; st < S; st++) c[st] /= total;
}

// The block's warps' sums acc[step] added and written as the chunk's
// partial row out[j * E + e].
template <int S>
__device__ inline void write_block_sum(const float *acc, float *__restrict__ out, const Geometry &g, const Lane &l,
                                       float *shared) {
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
#pragma unroll
    for (int st = 0; st < S; st++) {
        shared[(warp * S + st) * 32 + lane] = acc[st];
    }
    __syncthreads();
    for (int n = int(threadIdx.x); n < S * 32; n += kPassThreads) {
        const int st = n / 32, ln = n % 32, j = st * g.JP + ln / g.EP, e = ln % g.EP;
        if (j >= g.J || e >= g.E) continue;
        float sum = 0.0f;
        for (int w = 0; w < kPassWarps; w++) sum += shared[(w * S + st) * 32 + ln];
        out[j * g.E + e] = sum;
    }
}

// The lane's elements of a [J, E] row of a [B, J, E] tensor, or zeros where
// the tensor is null.
template <int S>
__device__ inline void load_bje(const float *__restrict__ t, i64 b, const Geometry &g, const Lane &l, float *x) {
    if (t == nullptr) {
#pragma unroll
        for (int st = 0; st < S; st++) x[st] = 0.0f;
        return;
    }
    load_row<S>(t + b * g.J * g.E, g, l, x);
}

// Forward replay, iteration t: partial[chunk, b, :, :] = sum over the
// chunk's i of c_t u_hat.
template <int S>
__global__ void __launch_bounds__(kPassThreads) forward_pass(const float *__restrict__ u_hat,
                                                             const float *__restrict__ b0,
                                                             const float *__restrict__ v_sum,
                                                             float *__restrict__ partial, Geometry g) {
    __shared__ float shared[kPassWarps * S * 32];
    const i64 b = blockIdx.x, chunk = blockIdx.y;
    const Lane l(g);
    float vs[S], acc[S], x[S], c[S];
    load_bje<S>(v_sum, b, g, l, vs);
#pragma unroll
    for (int st = 0; st < S; st++) acc[st] = 0.0f;
    const i64 i_end = min(g.I, (chunk + 1) * g.chunk);
    for (i64 i = chunk * g.chunk + threadIdx.x / 32; i < i_end; i += kPassWarps) {
        load_row<S>(u_hat + (b * g.I + i) * g.J * g.E, g, l, x);
        coupling<S>(x, vs, v_sum != nullptr, b0 != nullptr ? b0 + i * g.J : nullptr, g, l, c);
#pragma unroll
        for (int st = 0; st < S; st++) acc[st] = fmaf(c[st], x[st], acc[st]);
    }
    write_block_sum<S>(acc, partial + (chunk * g.B + b) * g.J * g.E, g, l, shared);
}

// Where the backward passes keep what they share: per iteration t (each
// [r] below), s_t, v_t, v_sum_t (v_sum_0 unused) and gs_t [B, J, E], and
// G_t [B, I, J].
struct Trace {
    float *s, *v, *v_sum, *gs, *G;
    i64 BJE, BIJ;
    __host__ __device__ const float *v_sum_at(int t) const { return t == 0 ? nullptr : v_sum + t * BJE; }
};

// Backward, iteration t: G_t (stored), the chunk's share of gv_{t-1} (t > 0)
// into partial, and at t = 0 grad_u_hat's rows.
template <int S>
__global__ void __launch_bounds__(kPassThreads) backward_pass(const float *__restrict__ u_hat,
                                                              const float *__restrict__ b0, Trace trace, int t,
                                                              int iterations, float *__restrict__ partial,
                                                              float *__restrict__ grad_u_hat, Geometry g) {
    __shared__ float shared[kPassWarps * S * 32];
    const i64 b = blockIdx.x, chunk = blockIdx.y;
    const Lane l(g);
    const bool last = t == iterations - 1;
    float vs[S], gs[S], acc[S], x[S], c[S];
    load_bje<S>(trace.v_sum_at(t), b, g, l, vs);
    load_bje<S>(trace.gs + t * trace.BJE, b, g, l, gs);
#pragma unroll
    for (int st = 0; st < S; st++) acc[st] = 0.0f;
    const i64 i_end = min(g.I, (chunk + 1) * g.chunk);
    for (i64 i = chunk * g.chunk + threadIdx.x / 32; i < i_end; i += kPassWarps) {
        const i64 bi = b * g.I + i;
        load_row<S>(u_hat + bi * g.J * g.E, g, l, x);
        const float *b0_row = b0 != nullptr ? b0 + i * g.J : nullptr;
        coupling<S>(x, vs, t > 0, b0_row, g, l, c);
        float gc[S], weighted = 0.0f;
#pragma unroll
        for (int st = 0; st < S; st++) {
            gc[st] = group_sum(x[st] * gs[st], g.EP);
            weighted += c[st] * gc[st];
        }
        weighted = across_groups_sum(weighted, g.EP);
        const float *G_next = last ? nullptr : trace.G + ((t + 1) * g.B * g.I + bi) * g.J;
        float *G_row = trace.G + (t * g.B * g.I + bi) * g.J;
        float G[S];
#pragma unroll
        for (int st = 0; st < S; st++) {
                const int j = l.j(st, g);
            G[st] = j < g.J ? c[st] * (gc[st] - weighted) + (G_next != nullptr ? G_next[j] : 0.0f) : 0.0f;
            if (j < g.J && l.e == 0) G_row[j] = G[st];
            acc[st] = fmaf(G[st], x[st], acc[st]);
        }
        if (t > 0) continue;
        // grad_u_hat[b, i, :, :] = sum_tau c_tau gs_tau + sum_{tau < r-1} G_{tau+1} v_tau.
        float grad[S];
#pragma unroll
        for (int st = 0; st < S; st++) grad[st] = c[st] * gs[st];  // tau = 0
        for (int tau = 0; tau < iterations; tau++) {
            float y[S];
            if (tau > 0) {
                load_bje<S>(trace.v_sum_at(tau), b, g, l, y);
                coupling<S>(x, y, true, b0_row, g, l, c);
                load_bje<S>(trace.gs + tau * trace.BJE, b, g, l, y);
#pragma unroll
                for (int st = 0; st < S; st++) grad[st] = fmaf(c[st], y[st], grad[st]);
            }
            if (tau + 1 < iterations) {
                const float *G_after = trace.G + ((tau + 1) * g.B * g.I + bi) * g.J;
                load_bje<S>(trace.v + tau * trace.BJE, b, g, l, y);
#pragma unroll
                for (int st = 0; st < S; st++) {
                    const int j = l.j(st, g);
                    if (j < g.J) grad[st] = fmaf(G_after[j], y[st], grad[st]);
                }
            }
        }
        float *out = grad_u_hat + bi * g.J * g.E;
#pragma unroll
        for (int st = 0; st < S; st++) {
            if (l.valid(st, g)) out[l.j(st, g) * g.E + l.e] = grad[st];
        }
    }
    if (t > 0) write_block_sum<S>(acc, partial + (chunk * g.B + b) * g.J * g.E, g, l, shared);
}

// A warp per (b, j) row, lane e: the chunks' partial sums added.
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

// s_t = the partial sums added, v_t = squash(s_t), v_sum_{t+1} = v_sum_t + v_t.
__global__ void __launch_bounds__(32 * kRowWarps) forward_rows(const float *__restrict__ partial, Trace trace, int t,
                                                               int iterations, Geometry g) {
    const i64 row = i64(blockIdx.x) * kRowWarps + threadIdx.x / 32;
    if (row >= g.B * g.J) return;
    const int e = int(threadIdx.x % 32);
    const float s = chunks_sum(partial, row, e, g);
    const float m = fmaxf(warp_max(fabsf(s)), 1.17549435e-38f);  // FLT_MIN: s = 0 gives v = 0
    const float q = warp_sum((s / m) * (s / m));
    if (e >= g.E) return;
    const i64 n = row * g.E + e;
    const float v = digitcaps_shared::squash_of(s, m, q);
    trace.s[t * trace.BJE + n] = s;
    trace.v[t * trace.BJE + n] = v;
    if (t + 1 < iterations) trace.v_sum[(t + 1) * trace.BJE + n] = (t > 0 ? trace.v_sum[t * trace.BJE + n] : 0.0f) + v;
}

// gs_t = squash_backward(s_t, gv_t), gv_t = grad_v (last iteration) or the
// partial sums added. As version 1's squash_backward_rows, in double.
__global__ void __launch_bounds__(32 * kRowWarps) backward_rows(const float *__restrict__ partial,
                                                                const float *__restrict__ grad_v, Trace trace, int t,
                                                                int iterations, Geometry g) {
    const i64 row = i64(blockIdx.x) * kRowWarps + threadIdx.x / 32;
    if (row >= g.B * g.J) return;
    const int e = int(threadIdx.x % 32);
    const i64 n = row * g.E + e;
    const float gv = e >= g.E ? 0.0f : t + 1 == iterations ? grad_v[n] : chunks_sum(partial, row, e, g);
    const double s = e < g.E ? trace.s[t * trace.BJE + n] : 0.0f;
    const double n2 = warp_sum(s * s), s_dot_gv = warp_sum(s * gv);
    const double eps = 1e-9;
    const double f = n2 / ((1 + n2) * sqrt(n2 + eps));
    const double two_df = (n2 + 2 * eps - n2 * n2) / ((1 + n2) * (1 + n2) * (n2 + eps) * sqrt(n2 + eps));
    if (e < g.E) trace.gs[t * trace.BJE + n] = float(f * gv + two_df * s_dot_gv * s);
}

}  // namespace passes
}  // namespace


namespace {

passes::Geometry geometry_of(const RoutingShape &sh) {
    passes::Geometry g{};
    g.B = sh.batch, g.I = sh.in_caps, g.J = int(sh.out_caps), g.E = int(sh.out_dim);
    g.EP = passes::lanes_per_capsule(g.E);
    g.JP = 32 / g.EP;
    g.steps = (g.J + g.JP - 1) / g.JP;
    return g;
}

// Calls f(std::integral_constant<int, S>()) with S = steps, 1 to kMaxSteps
// (as the refusal checks): the pass kernels' arrays a step hold exactly a row.
template <int S = 1, typename F>
auto with_steps(int steps, F f) {
    if constexpr (S < passes::kMaxSteps) {
        if (steps > S) return with_steps<S + 1>(steps, f);
    }
    return f(std::integral_constant<int, S>());
}

// The device scratch of version 2, in order: the chunks' partial sums
// [chunks, B, J, E], then the trace: s, v, v_sum and gs [r, B, J, E], G [r, B, I, J].
struct PassesScratch {
    float *partial;
    passes::Trace trace;
    PassesScratch(float *p, const passes::Geometry &g, int r) {
        const i64 BJE = g.B * g.J * g.E, BIJ = g.B * g.I * g.J;
        partial = p;
        float *t = p + g.chunks * BJE;
        trace = passes::Trace{t, t + r * BJE, t + 2 * r * BJE, t + 3 * r * BJE, t + 4 * r * BJE, BJE, BIJ};
    }
    static i64 floats(const passes::Geometry &g, int r) {
        const i64 BJE = g.B * g.J * g.E, BIJ = g.B * g.I * g.J;
        return g.chunks * BJE + 4 * r * BJE + r * BIJ;
    }
};

}  // namespace

DigitCapsFusedRefusal route_backward_passes_refusal(const RoutingShape &sh) {
    if (sh.out_dim > 32) return {"out_dim", sh.out_dim};
    const int64_t max_out_caps = int64_t(passes::kMaxSteps) * (32 / passes::lanes_per_capsule(int(sh.out_dim)));
    if (sh.out_caps > max_out_caps) return {"out_caps", sh.out_caps};
    return {};
}

cudaError_t route_backward_passes_plan(const RoutingShape &sh, int iterations, RouteBackwardPassesPlan *plan) {
    if (iterations < 1 || sh.batch < 1 || sh.in_caps < 1 || sh.out_caps < 1 || sh.out_dim < 1 ||
        route_backward_passes_refusal(sh).extent != nullptr) {
        return cudaErrorInvalidValue;
    }
    passes::Geometry g = geometry_of(sh);
    int device = 0, sms = 0, per_sm = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (err == cudaSuccess) {
        err = with_steps(g.steps, [&](auto steps) {
            return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, passes::backward_pass<decltype(steps)::value>,
                                                                 passes::kPassThreads, 0);
        });
    }
    if (err != cudaSuccess) return err;
    // Blocks (b, chunk) that fill the device once, each warp the same number of capsules.
    g.chunk = digitcaps_shared::chunk_filling_device(g.I, g.B, per_sm, sms, passes::kPassWarps);
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
    const unsigned row_blocks = unsigned((g.B * g.J + passes::kRowWarps - 1) / passes::kRowWarps);
    const unsigned row_threads = 32 * passes::kRowWarps;
    with_steps(g.steps, [&](auto steps) {
        constexpr int S = decltype(steps)::value;
        for (int t = 0; t < iterations; t++) {
            passes::forward_pass<S><<<pass_grid, passes::kPassThreads, 0, stream>>>(u_hat, b0, w.trace.v_sum_at(t),
                                                                                    w.partial, g);
            passes::forward_rows<<<row_blocks, row_threads, 0, stream>>>(w.partial, w.trace, t, iterations, g);
        }
        for (int t = iterations - 1; t >= 0; t--) {
            passes::backward_rows<<<row_blocks, row_threads, 0, stream>>>(w.partial, grad_v, w.trace, t, iterations, g);
            passes::backward_pass<S><<<pass_grid, passes::kPassThreads, 0, stream>>>(u_hat, b0, w.trace, t, iterations,
                                                                                     w.partial, grad_u_hat, g);
        }
        return 0;
    });
    if (grad_b0 != nullptr) {
        sum_over_batch<<<blocks_for(g.I * g.J), kThreads, 0, stream>>>(w.trace.G, grad_b0, g.B, g.I * g.J);
    }
    return cudaGetLastError();
}

int64_t digitcaps_backward_passes_scratch_floats(const DigitCapsLayerShape &sh, const RouteBackwardPassesPlan &plan) {
    return 2 * sh.batch * sh.in_caps * sh.out_caps * sh.out_dim + plan.scratch_floats;
}

cudaError_t digitcaps_backward_passes(const float *u, const float *W, const float *b0, const float *grad_v,
                                      float *grad_u, float *grad_W, float *grad_b0, const DigitCapsLayerShape &sh,
                                      int iterations, const RouteBackwardPassesPlan &plan, float *scratch,
                                      cudaStream_t stream) {
    if (u == nullptr || W == nullptr || grad_u == nullptr || grad_W == nullptr || scratch == nullptr) {
        return cudaErrorInvalidValue;
    }
    const PredictShape predict{sh.batch, sh.in_caps, sh.out_caps, sh.out_dim, sh.in_dim};
    const RoutingShape routing{sh.batch, sh.in_caps, sh.out_caps, sh.out_dim};
    const i64 u_hat_floats = sh.batch * sh.in_caps * sh.out_caps * sh.out_dim;
    float *u_hat = scratch, *grad_u_hat = scratch + u_hat_floats;
    // capsule_prediction_cuda.h's fastest versions: the staged forward and the tensor-core gradients.
    constexpr int kStagedForward = 3, kTensorBackward = 4;
    if (cudaError_t err = predict_forward(kStagedForward, u, W, u_hat, predict, stream); err != cudaSuccess) return err;
    if (cudaError_t err = route_backward_passes(u_hat, b0, grad_v, grad_u_hat, grad_b0, routing, iterations, plan,
                                                scratch + 2 * u_hat_floats, stream);
        err != cudaSuccess) {
        return err;
    }
    return predict_backward(kTensorBackward, grad_u_hat, u, W, grad_u, grad_W, predict, stream);
}
}  // namespace halcaps::cuda_reference

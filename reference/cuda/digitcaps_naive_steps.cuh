// The steps of routing-by-agreement as an eager framework runs them: one
// kernel a step, a thread per output element, every intermediate in device
// memory. digitcaps_cuda.cu's version 1 (the forward) and
// digitcaps_backward_cuda.cu's version 1 (the backward, which replays the
// forward keeping every iteration's c, s and v) both launch them.
//
//   u_hat [B, I, J, E], b0 [I, J], logits and c [B, I, J], s and v [B, J, E]
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "digitcaps_shared.cuh"

namespace halcaps::cuda_reference::naive_steps {

// An unnamed namespace: each .cu file that includes this header compiles its
// own copy of the kernels (the build links no relocatable device code).
namespace {

using i64 = int64_t;

constexpr int kThreads = 256;

inline unsigned blocks_for(i64 n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// logits[b, i, j] = b0[i, j] (or 0).
__global__ void init_logits(const float *__restrict__ b0, float *__restrict__ logits, i64 B, i64 IJ) {
    const i64 n = i64(blockIdx.x) * blockDim.x + threadIdx.x;
    if (n >= B * IJ) return;
    logits[n] = b0 != nullptr ? b0[n % IJ] : 0.0f;
}

// c[b, i, :] = softmax over j of logits[b, i, :]; one thread per (b, i).
__global__ void softmax_over_j(const float *__restrict__ logits, float *__restrict__ c, i64 BI, i64 J) {
    const i64 n = i64(blockIdx.x) * blockDim.x + threadIdx.x;
    if (n >= BI) return;
    const float *row = logits + n * J;
    float m = row[0];
    for (i64 j = 1; j < J; j++) m = fmaxf(m, row[j]);
    float sum = 0.0f;
    for (i64 j = 0; j < J; j++) sum += expf(row[j] - m);
    for (i64 j = 0; j < J; j++) c[n * J + j] = expf(row[j] - m) / sum;
}

// out[b, j, e] = sum_i weight[b, i, j] * u_hat[b, i, j, e]; one thread per
// (b, j, e). The forward's weighted sum s (weight c) and the backward's
// gradient of v through the agreement (weight: the logits' gradient).
__global__ void weighted_sum_over_i(const float *__restrict__ weight, const float *__restrict__ u_hat,
                                    float *__restrict__ out, i64 B, i64 I, i64 J, i64 E) {
    const i64 n = i64(blockIdx.x) * blockDim.x + threadIdx.x;
    if (n >= B * J * E) return;
    const i64 e = n % E, j = (n / E) % J, b = n / (E * J);
    float sum = 0.0f;
    for (i64 i = 0; i < I; i++) sum += weight[(b * I + i) * J + j] * u_hat[((b * I + i) * J + j) * E + e];
    out[n] = sum;
}

// v[b, j, :] = squash(s[b, j, :]); one thread per (b, j).
__global__ void squash_rows(const float *__restrict__ s, float *__restrict__ v, i64 BJ, i64 E) {
    const i64 n = i64(blockIdx.x) * blockDim.x + threadIdx.x;
    if (n >= BJ) return;
    const float *row = s + n * E;
    float m = 0.0f;
    for (i64 e = 0; e < E; e++) m = fmaxf(m, fabsf(row[e]));
    m = fmaxf(m, 1.17549435e-38f);  // FLT_MIN
    float q = 0.0f;
    for (i64 e = 0; e < E; e++) q += (row[e] / m) * (row[e] / m);
    for (i64 e = 0; e < E; e++) v[n * E + e] = digitcaps_shared::squash_of(row[e], m, q);
}

// out[b, i, j] (+)= sum_e u_hat[b, i, j, e] * x[b, j, e]; one thread per
// (b, i, j). The forward's agreement (x = v, added to the logits) and the
// backward's gradient of c (x = the gradient of s).
__global__ void dot_over_e(const float *__restrict__ u_hat, const float *__restrict__ x, float *__restrict__ out, i64 B,
                           i64 I, i64 J, i64 E, bool accumulate) {
    const i64 n = i64(blockIdx.x) * blockDim.x + threadIdx.x;
    if (n >= B * I * J) return;
    const i64 j = n % J, b = n / (I * J);
    float sum = 0.0f;
    for (i64 e = 0; e < E; e++) sum += u_hat[n * E + e] * x[(b * J + j) * E + e];
    out[n] = accumulate ? out[n] + sum : sum;
}

// The routing iterations over u_hat. Iteration t writes its coupling
// coefficients to c + t * c_step, its weighted sums to s + t * s_step and its
// outputs to v + t * v_step: steps of 0 overwrite one buffer (the forward),
// steps of a tensor's size keep every iteration (the backward's replay).
struct RoutingBuffers {
    float *logits;  // [B, I, J]
    float *c;       // [B, I, J] an iteration
    float *s, *v;   // [B, J, E] an iteration
    i64 c_step, s_step, v_step;
};

inline void enqueue_routing(const float *u_hat, const float *b0, i64 B, i64 I, i64 J, i64 E, int iterations,
                            const RoutingBuffers &buf, cudaStream_t stream) {
    init_logits<<<blocks_for(B * I * J), kThreads, 0, stream>>>(b0, buf.logits, B, I * J);
    for (int t = 0; t < iterations; t++) {
        float *c = buf.c + t * buf.c_step, *s = buf.s + t * buf.s_step, *v = buf.v + t * buf.v_step;
        softmax_over_j<<<blocks_for(B * I), kThreads, 0, stream>>>(buf.logits, c, B * I, J);
        weighted_sum_over_i<<<blocks_for(B * J * E), kThreads, 0, stream>>>(c, u_hat, s, B, I, J, E);
        squash_rows<<<blocks_for(B * J), kThreads, 0, stream>>>(s, v, B * J, E);
        if (t + 1 < iterations) {
            dot_over_e<<<blocks_for(B * I * J), kThreads, 0, stream>>>(u_hat, v, buf.logits, B, I, J, E, true);
        }
    }
}

}  // namespace

}  // namespace halcaps::cuda_reference::naive_steps

#include "digitcaps_cuda.h"

#include <cmath>

namespace halcaps::cuda_reference {

namespace {

using i64 = int64_t;

constexpr int kThreads = 256;

unsigned blocks_for(i64 n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

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

// s[b, j, e] = sum_i c[b, i, j] * u_hat[b, i, j, e]; one thread per (b, j, e).
__global__ void weighted_sum_over_i(const float *__restrict__ c, const float *__restrict__ u_hat,
                                    float *__restrict__ s, i64 B, i64 I, i64 J, i64 E) {
    const i64 n = i64(blockIdx.x) * blockDim.x + threadIdx.x;
    if (n >= B * J * E) return;
    const i64 e = n % E, j = (n / E) % J, b = n / (E * J);
    float sum = 0.0f;
    for (i64 i = 0; i < I; i++) sum += c[(b * I + i) * J + j] * u_hat[((b * I + i) * J + j) * E + e];
    s[n] = sum;
}

// v[b, j, :] = squash(s[b, j, :]); one thread per (b, j). The norm is taken
// of s / max|s_e| so that it neither overflows nor underflows.
__global__ void squash_rows(const float *__restrict__ s, float *__restrict__ v, i64 BJ, i64 E) {
    const i64 n = i64(blockIdx.x) * blockDim.x + threadIdx.x;
    if (n >= BJ) return;
    const float *row = s + n * E;
    float m = 0.0f;
    for (i64 e = 0; e < E; e++) m = fmaxf(m, fabsf(row[e]));
    m = fmaxf(m, 1.17549435e-38f);  // FLT_MIN: s = 0 gives v = 0
    float q = 0.0f;                  // |s / m|^2, in [1, E]
    for (i64 e = 0; e < E; e++) q += (row[e] / m) * (row[e] / m);
    // |s|^2 / (1 + |s|^2) * s / sqrt(|s|^2 + eps) with |s| = m sqrt(q); eps
    // (1e-9) only matters when |s| is that small, where the factor is ~|s|.
    const float norm = m * sqrtf(q);
    const float norm2 = norm * norm;
    const float scale = norm2 / (1.0f + norm2) / sqrtf(norm2 + 1e-9f);
    for (i64 e = 0; e < E; e++) v[n * E + e] = isfinite(norm2) ? row[e] * scale : row[e] / norm;
}

// logits[b, i, j] += sum_e u_hat[b, i, j, e] * v[b, j, e]; one thread per (b, i, j).
__global__ void add_agreement(const float *__restrict__ u_hat, const float *__restrict__ v,
                              float *__restrict__ logits, i64 B, i64 I, i64 J, i64 E) {
    const i64 n = i64(blockIdx.x) * blockDim.x + threadIdx.x;
    if (n >= B * I * J) return;
    const i64 j = n % J, b = n / (I * J);
    float sum = 0.0f;
    for (i64 e = 0; e < E; e++) sum += u_hat[n * E + e] * v[(b * J + j) * E + e];
    logits[n] += sum;
}

}  // namespace

int64_t routing_scratch_floats(const RoutingShape &s) {
    return 2 * s.batch * s.in_caps * s.out_caps + s.batch * s.out_caps * s.out_dim;
}

cudaError_t route_naive(const float *u_hat, const float *b0, float *v, const RoutingShape &sh, int iterations,
                        float *scratch, cudaStream_t stream) {
    const i64 B = sh.batch, I = sh.in_caps, J = sh.out_caps, E = sh.out_dim;
    if (iterations < 1 || B < 1 || I < 1 || J < 1 || E < 1 || u_hat == nullptr || v == nullptr ||
        scratch == nullptr) {
        return cudaErrorInvalidValue;
    }
    float *logits = scratch, *c = scratch + B * I * J, *s = scratch + 2 * B * I * J;
    init_logits<<<blocks_for(B * I * J), kThreads, 0, stream>>>(b0, logits, B, I * J);
    for (int t = 0; t < iterations; t++) {
        softmax_over_j<<<blocks_for(B * I), kThreads, 0, stream>>>(logits, c, B * I, J);
        weighted_sum_over_i<<<blocks_for(B * J * E), kThreads, 0, stream>>>(c, u_hat, s, B, I, J, E);
        squash_rows<<<blocks_for(B * J), kThreads, 0, stream>>>(s, v, B * J, E);
        if (t + 1 < iterations) {
            add_agreement<<<blocks_for(B * I * J), kThreads, 0, stream>>>(u_hat, v, logits, B, I, J, E);
        }
    }
    return cudaGetLastError();
}

}  // namespace halcaps::cuda_reference

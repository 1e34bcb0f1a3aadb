#include "digitcaps_cuda.h"

#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "device_limits.h"
#include "digitcaps_naive_steps.cuh"
#include "digitcaps_shared.cuh"
#include "pointer_alignment.h"
#include "smem_opt_in.h"

namespace halcaps::cuda_reference {

namespace {

using i64 = int64_t;
using digitcaps_shared::exp2_ftz;

}  // namespace

int64_t routing_scratch_floats(const RoutingShape &s) {
    return 2 * s.batch * s.in_caps * s.out_caps + s.batch * s.out_caps * s.out_dim;
}

cudaError_t route_naive(const float *u_hat, const float *b0, float *v, const RoutingShape &sh, int iterations,
                        float *scratch, cudaStream_t stream) {
    const i64 B = sh.batch, I = sh.in_caps, J = sh.out_caps, E = sh.out_dim;
    if (iterations < 1 || B < 1 || I < 1 || J < 1 || E < 1 || u_hat == nullptr || v == nullptr || scratch == nullptr) {
        return cudaErrorInvalidValue;
    }
    // logits, c and s overwritten every iteration; v is the output.
    const naive_steps::RoutingBuffers buffers{scratch, scratch + B * I * J, scratch + 2 * B * I * J, v, 0, 0, 0};
    naive_steps::enqueue_routing(u_hat, b0, B, I, J, E, iterations, buffers, stream);
    return cudaGetLastError();
}

// ---------------------------------------------------------------------------
// Version 2, fused: the layer in two kernels a routing iteration, u_hat
// recomputed once an iteration and never stored.
//
// The agreement is linear in v, so the logits of iteration t are
//   logits[b, i, j] = b0[i, j] + u_hat[b, i, j, :] . v_sum[b, j, :],
//   v_sum = v_0 + ... + v_{t-1}
// (b0 alone at t = 0): one pass kernel an iteration computes u_hat, the
// logits, the softmax over j and the weighted sum over i together, from one
// computation of u_hat, where the Halide fused_split schedules compute u_hat
// once for the logits and again for the sum.
//
// pass kernel     blocks of 32 batch elements (one a lane) x J warps (one an
//                 output capsule j) over a chunk of input capsules. For each
//                 i of the chunk: W[i] (J*E*K floats) and the tile's u rows
//                 (and b0[i, :]) are in shared memory (cp.async, kStages
//                 slots, two steps ahead); a thread
//                 computes its E values of u_hat[b, i, j, :] in registers (W
//                 read as a broadcast: one j a warp), its logit, and writes it
//                 to shared memory; after the block's one barrier of the step
//                 it reads the J logits of its row b, takes the softmax's c
//                 for its j and adds c * u_hat into its E sums. The chunk's
//                 sums go to partial[chunk, b, j, :].
// squash kernel   one or more (b, j) rows a block (digitcaps_shared.cuh):
//                 adds the chunks' partial sums (in a fixed order), squashes,
//                 and writes v (last iteration) or v_sum.
// The chunk count fills the device once (blocks resident at once over the
// batch tiles), so that every block starts at once and none waits a wave.
//
// Limits: J <= 16 (a block of J warps, at most 512 threads), E <= 32 (a
// thread's E sums and E values of u_hat in registers), K <= 16;
// digitcaps_fused_refusal names the extent beyond them.
//
// Measured on an NVIDIA H200 (docs/history.md:
// nvidia-h200-hand-fused-layer/, run 5, `halcaps bench --op digitcaps`):
// MNIST b128 211.3 us, b512 471.0, against the Halide default
// fused_split_all_vectors' 160.8 and 531.1 in the same run (which computes
// u_hat twice an iteration). Under ncu at b128 the pass kernel takes 83 us an
// iteration and the squash kernel 6: 19.3 M warp instructions a pass, 34% of
// the issue slots used, 18 cycles between a warp's instructions, of which
// 4.9 wait on shared-memory results (short scoreboard) and 2.7 on the
// shared-memory queue (MIO throttle): per step a thread issues 32 16-byte
// broadcast reads of W for 128 FMAs, plus u, v_sum and the J logits, and at
// 64 registers (three blocks an SM) nothing is left to keep W in registers
// across batch rows. Tried: one block an SM (run 2: the occupancy query
// before the kernel was allowed its 55 KB saw no room), 0.5, 2 and 3 waves of
// chunks (runs 1 and 3: slower), b0 read from global memory in every step
// (run 3; staged since run 4: no change). Two batch rows a thread on the
// fast path (run 6, run6/two_rows.diff: each W broadcast feeds both rows,
// 96 registers, two blocks of 64 rows an SM): 238.1 / 238.0 us at b128
// against 210.0 / 209.5, 459.2 / 459.6 at b512 against 471.4 / 471.3; 14%
// fewer instructions, but 16 warps an SM instead of 24. Dropped.
// ---------------------------------------------------------------------------
namespace {
namespace fused {

constexpr int kLanes = 32;  // batch elements a block, one a lane
constexpr int kMaxOutCaps = 16, kMaxOutDim = 32, kMaxInDim = 16;
constexpr int kStages = 4;  // W and u slices staged: two in flight while one is read
constexpr int kPassRegisters = 64;

struct Args {
    i64 B, I;
    int J, E, K;
    i64 chunk;     // input capsules a block
    int w_stride;  // floats a W stage: W[i] (J*E*K, rounded up to 4), then b0[i, :] (J)
    int u_stride;  // floats a staged u row (K padded against bank conflicts)
    int l_padded;  // J rounded up to 4: a row of staged logits, -inf past J
    int l_stride;  // floats a row of staged logits (l_padded, padded against bank conflicts)
    int v_stride;  // floats a staged row of v_sum (E padded against bank conflicts)
};

// u rows padded so that a warp's reads of them hit distinct banks: for the
// 16-byte reads (the fast path, K = 8) a row of 12 floats, else an odd stride.
__host__ __device__ inline int u_stride_for(int K, bool fast) { return fast ? 12 : (K % 2 == 1 ? K : K + 1); }

// A stage of W[i] and b0[i, :], W first so that it stays 16-byte aligned.
inline int w_stride_for(int J, int E, int K) { return (J * E * K + 3) / 4 * 4 + (J + 3) / 4 * 4; }

// Rows of logits read as 16-byte vectors: l_padded floats (J rounded up to
// 4), the stride 4 more where needed so that it is 4 modulo 8.
__host__ __device__ inline int l_padded_for(int J) { return (J + 3) / 4 * 4; }
__host__ __device__ inline int l_stride_for(int J) {
    return l_padded_for(J) % 8 == 4 ? l_padded_for(J) : l_padded_for(J) + 4;
}

// v_sum rows padded likewise: 20 floats for the fast path's 16-byte reads
// (E = 16), else an odd stride.
__host__ __device__ inline int v_stride_for(int E, bool fast) { return fast ? 20 : (E % 2 == 1 ? E : E + 1); }

// The block's shared-memory layout, in floats: kStages W slices, kStages u
// tiles, two logit tiles and the block's rows of v_sum [J][kLanes].
inline size_t smem_bytes(const Args &a) {
    return sizeof(float) * (size_t(kStages) * a.w_stride + size_t(kStages) * kLanes * a.u_stride +
                            2 * size_t(kLanes) * a.l_stride + size_t(a.J) * kLanes * a.v_stride);
}

// A thread's u_hat[b, i, j, :] and its logit: `logit` plus the dot with its
// row of v_sum (in shared memory; all zeros in the first iteration), in
// four partial sums so that the FMAs do not wait on each other. FAST: E = 16 and K = 8, W and u read as 16-byte
// vectors, k-quad outer so that the 16 sums of u_hat interleave. Else scalars, E <= EM, K <= kMaxInDim.
template <int EM, bool FAST>
__device__ inline float predict_and_agree(const float *W_ij, const float *u_row, const float *v_row, int E, int K,
                                          float logit, float *u_hat) {
    float part[4] = {logit, 0.0f, 0.0f, 0.0f};
    if (FAST) {
        const float4 *W4 = reinterpret_cast<const float4 *>(W_ij);
        const float4 *u4 = reinterpret_cast<const float4 *>(u_row);
        const float4 x0 = u4[0], x1 = u4[1];
#pragma unroll
        for (int e = 0; e < EM; e++) {
            const float4 w0 = W4[e * 2], w1 = W4[e * 2 + 1];  // the same address for the whole warp: broadcasts
            u_hat[e] =
                fmaf(w1.w, x1.w,
                     fmaf(w1.z, x1.z,
                          fmaf(w1.y, x1.y,
                               fmaf(w1.x, x1.x, fmaf(w0.w, x0.w, fmaf(w0.z, x0.z, fmaf(w0.y, x0.y, w0.x * x0.x)))))));
        }
        const float4 *v4 = reinterpret_cast<const float4 *>(v_row);
#pragma unroll
        for (int q = 0; q < EM / 4; q++) {
            const float4 v = v4[q];
            part[0] = fmaf(u_hat[4 * q], v.x, part[0]);
            part[1] = fmaf(u_hat[4 * q + 1], v.y, part[1]);
            part[2] = fmaf(u_hat[4 * q + 2], v.z, part[2]);
            part[3] = fmaf(u_hat[4 * q + 3], v.w, part[3]);
        }
    } else {
        float x[kMaxInDim];
#pragma unroll
        for (int k = 0; k < kMaxInDim; k++) x[k] = k < K ? u_row[k] : 0.0f;
#pragma unroll
        for (int e = 0; e < EM; e++) {
            float sum = 0.0f;
            if (e < E) {
#pragma unroll
                for (int k = 0; k < kMaxInDim; k++) {
                    if (k < K) sum = fmaf(W_ij[e * K + k], x[k], sum);
                }
            }
            u_hat[e] = sum;
            if (e < E) part[e % 4] = fmaf(sum, v_row[e], part[e % 4]);
        }
    }
    return (part[0] + part[1]) + (part[2] + part[3]);
}

// EM: the register arrays' extent (E <= EM); FAST: E = 16, K = 8 and u and W
// 16-byte aligned, read and copied as 16-byte vectors (else as scalars).
// 64 registers a thread: three blocks of 10 warps (out_caps 10) an SM. The
// fast path spills a few values at this cap (ptxas -v); uncapped it takes
// 104-115 and one or two blocks fit.
template <int EM, bool FAST>
__global__ void __maxnreg__(kPassRegisters)
    pass_kernel(const float *__restrict__ u, const float *__restrict__ W, const float *__restrict__ b0,
                const float *__restrict__ v_sum, float *__restrict__ partial, Args a, bool agreement) {
    extern __shared__ float4 smem_vec[];
    float *smem = reinterpret_cast<float *>(smem_vec);
    float *W_stage = smem;                                        // [kStages][w_stride]: W[i], b0[i, :]
    float *u_stage = W_stage + kStages * a.w_stride;              // [kStages][kLanes][u_stride]
    float *logit_tile = u_stage + kStages * kLanes * a.u_stride;  // [2][kLanes][l_stride], in base 2
    float *v_tile = logit_tile + 2 * kLanes * a.l_stride;         // [J][kLanes][v_stride]

    const int lane = threadIdx.x, j = threadIdx.y;
    const int tid = j * kLanes + lane, threads = kLanes * a.J;
    const i64 b_first = i64(blockIdx.x) * kLanes, b = b_first + lane;
    const int rows = int(min(i64(kLanes), a.B - b_first));
    const bool active = lane < rows;
    const i64 i_first = i64(blockIdx.y) * a.chunk;
    const int steps = int(min(a.chunk, a.I - i_first));
    const int JEK = a.J * a.E * a.K, EK = a.E * a.K;

    // Copies W[i] and the tile's u[b, i, :] for `step` into its slot and
    // commits them as one group (an empty group past the chunk's end, so
    // that every thread counts the same groups).
    auto stage = [&](int step) {
        if (step < steps) {
            const int slot = step % kStages;
            const i64 i = i_first + step;
            const float *W_i = W + i * JEK;
            float *W_dst = W_stage + slot * a.w_stride;
            float *u_dst = u_stage + slot * kLanes * a.u_stride;
            if (b0 != nullptr && tid < a.J)
                __pipeline_memcpy_async(W_dst + a.w_stride - a.J + tid, b0 + i * a.J + tid, 4);
            if (FAST) {
                for (int q = tid; q < JEK / 4; q += threads) __pipeline_memcpy_async(W_dst + 4 * q, W_i + 4 * q, 16);
                for (int q = tid; q < rows * 2; q += threads) {  // fewer threads than rows * 2 at out_caps 1
                    const int r = q / 2, h = q % 2;
                    __pipeline_memcpy_async(u_dst + r * a.u_stride + 4 * h, u + ((b_first + r) * a.I + i) * 8 + 4 * h,
                                            16);
                }
            } else {
                for (int q = tid; q < JEK; q += threads) __pipeline_memcpy_async(W_dst + q, W_i + q, 4);
                for (int q = tid; q < rows * a.K; q += threads) {
                    const int r = q / a.K, k = q % a.K;
                    __pipeline_memcpy_async(u_dst + r * a.u_stride + k, u + ((b_first + r) * a.I + i) * a.K + k, 4);
                }
            }
        }
        __pipeline_commit();
    };

    float sums[EM], u_hat[EM];
#pragma unroll
    for (int e = 0; e < EM; e++) sums[e] = 0.0f;
    float *v_row = v_tile + (j * kLanes + lane) * a.v_stride;  // visible after the first barrier
    for (int e = 0; e < a.E; e++) v_row[e] = agreement && active ? v_sum[(b * a.J + j) * a.E + e] : 0.0f;
    for (int n = tid; n < 2 * kLanes * (a.l_padded - a.J); n += threads) {
        const int pad = a.l_padded - a.J;
        logit_tile[(n / pad) * a.l_stride + a.J + n % pad] = -INFINITY;  // exp2 of -inf: 0
    }

    // Steps 0 .. kStages - 2 in flight; then at the end of each step s the
    // copy of step s + kStages - 1, into the slot step s - 1 read (every
    // thread passed this step's barrier after reading it). The barrier of
    // step s makes step s + 1's slot visible: it waits for its group, with
    // the kStages - 3 later groups still in flight.
    for (int step = 0; step < kStages - 1; step++) stage(step);
    __pipeline_wait_prior(kStages - 2);  // step 0 has landed
    __syncthreads();

    for (int step = 0; step < steps; step++) {
        const int slot = step % kStages;
        float *logits = logit_tile + (step % 2) * kLanes * a.l_stride;
        if (active) {
            const float *W_ij = W_stage + slot * a.w_stride + j * EK;  // one j a warp: broadcasts
            const float *u_row = u_stage + slot * kLanes * a.u_stride + lane * a.u_stride;
            const float logit0 = b0 != nullptr ? W_stage[slot * a.w_stride + a.w_stride - a.J + j] : 0.0f;
            constexpr float kLog2e = 1.44269504f;
            // The first pass's logits are b0 alone: its v_row of zeros times a
            // non-finite u_hat would make them NaN where the formulas have none.
            const float agreed = predict_and_agree<EM, FAST>(W_ij, u_row, v_row, a.E, a.K, logit0, u_hat);
            logits[lane * a.l_stride + j] = kLog2e * (agreement ? agreed : logit0);
        }
        __pipeline_wait_prior(kStages - 3);  // step + 1 has landed
        __syncthreads();                     // ...for every thread, and so have the logits
        if (active) {
            // The softmax over the row's J logits (every thread of the row
            // takes the same max and sum), 4 at a time.
            const float4 *row = reinterpret_cast<const float4 *>(logits + lane * a.l_stride);
            float top = -INFINITY;
            for (int q = 0; q < a.l_padded / 4; q++) {
                const float4 x = row[q];
                top = fmaxf(top, fmaxf(fmaxf(x.x, x.y), fmaxf(x.z, x.w)));
            }
            float total = 0.0f;
            for (int q = 0; q < a.l_padded / 4; q++) {
                const float4 x = row[q];
                total += (exp2_ftz(x.x - top) + exp2_ftz(x.y - top)) + (exp2_ftz(x.z - top) + exp2_ftz(x.w - top));
            }
            const float c = __fdividef(exp2_ftz(logits[lane * a.l_stride + j] - top), total);  // total >= 1
#pragma unroll
            for (int e = 0; e < EM; e++) sums[e] = fmaf(c, u_hat[e], sums[e]);
        }
        stage(step + kStages - 1);
    }
    __pipeline_wait_prior(0);

    if (active) {
        float *out = partial + ((i64(blockIdx.y) * a.B + b) * a.J + j) * a.E;
#pragma unroll
        for (int e = 0; e < EM; e++) {
            if (e < a.E) out[e] = sums[e];
        }
    }
}

// Past 48 KB of shared memory a block (55 KB at MNIST's shape) the kernel
// must be allowed more, before a launch and before an occupancy query (which
// otherwise reports 0 blocks).
template <int EM, bool FAST>
cudaError_t allow_smem(const Args &a) {
    return allow_dynamic_smem(pass_kernel<EM, FAST>, smem_bytes(a));
}

template <int EM, bool FAST>
cudaError_t launch_pass(const float *u, const float *W, const float *b0, const float *v_sum, float *partial,
                        const Args &a, i64 chunks, bool agreement, cudaStream_t stream) {
    if (cudaError_t err = allow_smem<EM, FAST>(a); err != cudaSuccess) return err;
    const dim3 grid(unsigned((a.B + kLanes - 1) / kLanes), unsigned(chunks)), block(kLanes, a.J);
    pass_kernel<EM, FAST><<<grid, block, smem_bytes(a), stream>>>(u, W, b0, v_sum, partial, a, agreement);
    return cudaGetLastError();
}

template <int EM, bool FAST>
cudaError_t blocks_per_sm(const Args &a, int *count) {
    if (cudaError_t err = allow_smem<EM, FAST>(a); err != cudaSuccess) return err;
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(count, pass_kernel<EM, FAST>, kLanes * a.J, smem_bytes(a));
}

// The fast path's shape (the pointers must also be 16-byte aligned).
bool fast_shape(const DigitCapsLayerShape &s) { return s.out_dim == 16 && s.in_dim == 8; }

// One instantiation of the pass kernel, as a type: its EM and FAST.
template <int EM_, bool FAST_>
struct PassVariant {
    static constexpr int EM = EM_;
    static constexpr bool FAST = FAST_;
};

// Calls `call` with the PassVariant that runs a shape of out_dim E: the
// fast one, else the scalar one with 16 or 32 values in registers.
template <typename Call>
cudaError_t with_pass_variant(bool fast, int E, Call call) {
    if (fast) return call(PassVariant<16, true>());
    if (E <= 16) return call(PassVariant<16, false>());
    return call(PassVariant<32, false>());
}

// The kernel's arguments for a shape, on the fast path or not, `chunk` input
// capsules a block.
Args args_for(const DigitCapsLayerShape &s, bool fast, i64 chunk) {
    const int J = int(s.out_caps), E = int(s.out_dim), K = int(s.in_dim);
    return {s.batch,
            s.in_caps,
            J,
            E,
            K,
            chunk,
            w_stride_for(J, E, K),
            u_stride_for(K, fast),
            l_padded_for(J),
            l_stride_for(J),
            v_stride_for(E, fast)};
}

}  // namespace fused

}  // namespace

DigitCapsFusedRefusal digitcaps_fused_refusal(const DigitCapsLayerShape &s) {
    return digitcaps_shared::extent_beyond(s, fused::kMaxOutCaps, fused::kMaxOutDim, fused::kMaxInDim);
}

cudaError_t digitcaps_fused_plan(const DigitCapsLayerShape &s, DigitCapsFusedPlan *plan) {
    // The instantiation digitcaps_fused launches: the fast one where the
    // shape has it (if u or W is off a 16-byte boundary the scalar one runs,
    // whose blocks need no more shared memory).
    const bool fast = fused::fast_shape(s);
    const fused::Args a = fused::args_for(s, fast, 1);
    DeviceLimits device;
    int per_sm = 0;
    if (cudaError_t err = device_limits(&device); err != cudaSuccess) return err;
    if (cudaError_t err = fused::with_pass_variant(fast, a.E,
                                                   [&](auto variant) {
                                                       using V = decltype(variant);
                                                       return fused::blocks_per_sm<V::EM, V::FAST>(a, &per_sm);
                                                   });
        err != cudaSuccess) {
        return err;
    }
    const i64 batch_tiles = (s.batch + fused::kLanes - 1) / fused::kLanes;
    plan->chunk = digitcaps_shared::chunk_filling_device(s.in_caps, batch_tiles, per_sm, device.sms, 1);
    plan->chunks = (s.in_caps + plan->chunk - 1) / plan->chunk;
    plan->scratch_floats = (plan->chunks + 1) * s.batch * s.out_caps * s.out_dim;
    return cudaSuccess;
}

cudaError_t digitcaps_fused(const float *u, const float *W, const float *b0, float *v, const DigitCapsLayerShape &s,
                            int iterations, const DigitCapsFusedPlan &plan, float *scratch, cudaStream_t stream) {
    if (iterations < 1 || s.batch < 1 || s.in_caps < 1 || s.out_caps < 1 || s.out_dim < 1 || s.in_dim < 1 ||
        digitcaps_fused_refusal(s).extent != nullptr || u == nullptr || W == nullptr || v == nullptr ||
        scratch == nullptr || plan.chunk < 1 || plan.chunks != (s.in_caps + plan.chunk - 1) / plan.chunk) {
        return cudaErrorInvalidValue;
    }
    const bool fast = fused::fast_shape(s) && aligned16(u) && aligned16(W);
    const fused::Args a = fused::args_for(s, fast, plan.chunk);
    const int E = a.E;
    const i64 rows = s.batch * a.J;
    float *partial = scratch, *v_sum = scratch + plan.chunks * rows * E;
    return digitcaps_shared::iterate(
        iterations, partial, v_sum, v, nullptr, rows, E, plan.chunks, stream, [&](bool agreement) {
            return fused::with_pass_variant(fast, E, [&](auto variant) {
                using V = decltype(variant);
                return fused::launch_pass<V::EM, V::FAST>(u, W, b0, v_sum, partial, a, plan.chunks, agreement, stream);
            });
        });
}

}  // namespace halcaps::cuda_reference

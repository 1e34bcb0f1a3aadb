// Version 4 of the hand-written prediction backward (predict_cuda.h):
// both gradients in one pass over g, on the tensor cores in float32 accuracy
// (3xTF32, tf32_mma.cuh).
//
// For one input capsule i, with g_i = g[:, i, :, :] as a B x JE matrix, both
// gradients are small matrix products:
//   grad_u[:, i, :] = g_i   . W_i   (M = batch rows, N = in_dim, summed over je)
//   grad_W[i]       = g_i^T . u_i   (M = je, N = in_dim, summed over batch rows)
// A warp owns one item: an input capsule and a slice of in_dim (all of it at
// in_dim <= 16, else 16 at a time), and walks every batch row, 16 rows (a
// tile) at a time, for each chunk of JC columns of je:
//  - the chunk's W values, split into TF32 pairs, stay in the lane's
//    registers (grad_u's B fragments);
//  - the chunk's grad_W sums stay in the lane's registers (C fragments) over
//    all the tiles and are stored once: no partial sums leave the warp, and
//    no warp waits for another (there is no block barrier);
//  - a tile's g [16][JC] and u [16][KP] are copied into the warp's own
//    shared memory by cp.async, kStages - 1 tiles ahead. grad_u reads g as A
//    fragments with rows = batch rows, grad_W as A fragments of g^T with rows
//    = je, so each g value is read from shared memory and split twice;
//  - a tile's grad_u is complete after the last chunk: the first chunk
//    stores it, later ones add to it (the same lane reads back what it wrote).
// So g is read from global memory once, and u and W once per chunk.
//
// The fragments (tf32_mma.cuh's lane (g, t) layout), for mma-k step ks of
// grad_u and m-tile mt, k-step kb of grad_W:
//  - grad_u: mma-k t is je 8ks + 2t and t + 4 is je 8ks + 2t + 1, so a lane's
//    A values of a row are one 8-byte load; C is grad_u[row g, g + 8][in_dim
//    2t, 2t + 1].
//  - grad_W: M row g is je 16mt + 2g and row g + 8 is je 16mt + 2g + 1 (again
//    one 8-byte load), mma-k t is batch row 8kb + t and t + 4 is 8kb + t + 4;
//    C is grad_W[je 16mt + 2g, 16mt + 2g + 1][in_dim 2t, 2t + 1].
// A half-warp's 8-byte loads then touch 4 consecutive rows at 8 consecutive
// columns in both parts: conflict-free at a row stride of 8 or 24 modulo 32.
//
// Limits: the extents must fit its 32-bit indices (out_caps * out_dim and
// in_dim at most 2^30, in_caps at most INT_MAX; else version 1 runs); at
// in_dim above 16 the slices re-read g, once per 16 of in_dim. The TF32
// split needs |x| < 2^128 (1 - 2^-12) (split_tf32).
//
// Measured on an NVIDIA H200 (docs/history.md:
// nvidia-h200-tensor-core-gradients/, run 4, `halcaps bench --op
// predict_backward`): MNIST b128 47.3 us, b512 158.4, wide b32 178.5,
// against version 3's 65.6 / 217.6 / 177.1 and the Halide default vectors'
// 95.9 / 329.4 / 251.2 in the same run. Under ncu at b128: 168 registers,
// 8.7 warps an SM (1152 input capsules, a warp each), 0.34 instructions
// issued a cycle per scheduler, the most frequent stall waiting on
// fixed-latency results, DRAM 42% busy, the tensor pipe 21%: the warps are
// too few to hide their own latencies. Tried and dropped (runs 2, 3, 5):
// grad_u and grad_W interleaved per 16 columns (50.7 us at b128), 4 blocks
// an SM at 240 registers (60.5), chunks of 80 je at 128 registers (66.9),
// and a pair of warps an input capsule, each half of the columns, grad_u's
// halves added through shared memory (46.3 us: 18 warps an SM, but two
// barriers a tile and more instructions).
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "cp_async.cuh"
#include "pointer_alignment.h"
#include "predict_tensor_cores.h"
#include "tf32_mma.cuh"

namespace halcaps::cuda_reference {

namespace {
namespace tensor_backward {

using i64 = int64_t;
using tf32::conflict_free_stride;
using tf32::set_zero;
using tf32::Split;
using tf32::split_a;
using tf32::split_tf32;
using tf32::SplitA;

constexpr int kRows = 16;   // batch rows a tile: grad_u's M
constexpr int kStages = 2;  // tiles staged a warp: the one read and one in flight
constexpr int kWarpsPerBlock = 2;
constexpr int kThreads = 32 * kWarpsPerBlock;

// One instantiation: NT 8-wide tiles of in_dim (KP = 8 NT in_dim a slice),
// MT 16-wide m-tiles of je a chunk (JC = 16 MT). JC * KP is 1280 in both
// instantiations: 80 registers of split W and 40 of grad_W sums a lane.
// BLOCKS_PER_SM is the __launch_bounds__ minimum: 5 blocks (10 warps) leave
// 168 registers a thread, enough at NT = 1; NT = 2 needs more (4 blocks).
template <int NT_, int MT_, int BLOCKS_PER_SM_>
struct Variant {
    static constexpr int NT = NT_, MT = MT_, BLOCKS_PER_SM = BLOCKS_PER_SM_;
    static constexpr int KP = 8 * NT, JC = 16 * MT, KSTEPS = JC / 8;
    static constexpr int LD = conflict_free_stride(JC), US = conflict_free_stride(KP);
    static constexpr int STAGE = kRows * LD + kRows * US;  // floats: g tile, then u tile
    static constexpr size_t SMEM = sizeof(float) * size_t(kWarpsPerBlock) * kStages * STAGE;
    static_assert(SMEM <= 48 * 1024, "a block's stages fit the default shared-memory limit");
};
using NarrowK = Variant<1, 10, 5>;  // in_dim <= 8: chunks of 160 je (MNIST's J * E)
using WideK = Variant<2, 5, 4>;     // in_dim > 8: slices of 16, chunks of 80 je

struct Args {
    i64 B, I;
    int JE, K;
    int nchunks, kslices;
    i64 tiles, items;   // tiles a chunk (B / 16 rounded up); items = I * kslices
    bool g_vec, u_vec;  // JE (K) a multiple of 4 and g (u) 16-byte aligned: 16-byte copies
};

// Copies `width` (a multiple of 2, compile-time) floats of one row from
// src to dst, two lanes a row (`half`), zeros past `valid` floats (0 for a
// row past B). The common case (16-byte pieces, the whole width valid)
// needs no index arithmetic past the row's pointer. src points at a valid
// row either way.
template <int width>
__device__ inline void copy_row(float *dst, const float *src, int valid, bool vec, int half) {
    if (vec && (valid == width || valid == 0)) {
        const int bytes = valid == 0 ? 0 : 16;
#pragma unroll
        for (int p = 0; p < width / 8; p++) {
            cp_async::copy_zero_filled<16>(dst + 4 * (half + 2 * p), src + 4 * (half + 2 * p), bytes);
        }
    } else if (vec) {  // the whole of a 16-byte piece is valid or none (the row length is a multiple of 4)
#pragma unroll
        for (int p = 0; p < width / 8; p++) {
            const int col = 4 * (half + 2 * p);
            cp_async::copy_zero_filled<16>(dst + col, col < valid ? src + col : src, col < valid ? 16 : 0);
        }
    } else {
#pragma unroll 8
        for (int p = 0; p < width / 2; p++) {
            const int col = half + 2 * p;
            cp_async::copy_zero_filled<4>(dst + col, col < valid ? src + col : src, col < valid ? 4 : 0);
        }
    }
}

// Enqueues the copies of one tile (rows b0.., chunk columns c0.., in_dim
// k0..) of input capsule i into `stage`. Past B, JE or K the tile holds
// zeros, so that every product there adds nothing.
template <typename V>
__device__ void copy_tile(const Args &a, const float *__restrict__ g, const float *__restrict__ u, float *stage, i64 i,
                          i64 b0, int c0, int k0, int lane) {
    const int row = lane / 2, half = lane % 2;  // two lanes a row
    const bool row_ok = b0 + row < a.B;
    const i64 b = row_ok ? b0 + row : 0;
    copy_row<V::JC>(stage + row * V::LD, g + (b * a.I + i) * a.JE + c0, row_ok ? min(V::JC, a.JE - c0) : 0, a.g_vec,
                    half);
    copy_row<V::KP>(stage + kRows * V::LD + row * V::US, u + (b * a.I + i) * a.K + k0,
                    row_ok ? min(V::KP, a.K - k0) : 0, a.u_vec, half);
}

// Stores v at *p (or, add = true, adds it to *p) if ok.
__device__ inline void store_or_add(float *p, float v, bool ok, bool add) {
    if (ok) *p = add ? *p + v : v;
}

template <typename V>
__global__ void __launch_bounds__(kThreads, V::BLOCKS_PER_SM)
    backward_kernel(const float *__restrict__ g, const float *__restrict__ u, const float *__restrict__ W,
                    float *__restrict__ grad_u, float *__restrict__ grad_W, const Args a) {
    extern __shared__ __align__(16) float smem[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int gr = lane / 4, t = lane % 4;  // the fragments' g and t
    const i64 item = i64(blockIdx.x) * kWarpsPerBlock + warp;
    if (item >= a.items) return;  // a whole warp; there are no block barriers
    const i64 i = item / a.kslices;
    const int k0 = int(item % a.kslices) * V::KP;
    float *stages = smem + warp * kStages * V::STAGE;

    // Steps: (chunk, tile) pairs, chunk-major, the copies kStages - 1 steps
    // ahead of the reads; step n uses stage n % kStages.
    int next_chunk = 0;  // the next step to enqueue
    i64 next_tile = 0;
    int next_stage = 0;
    auto enqueue = [&]() {
        if (next_chunk < a.nchunks) {
            copy_tile<V>(a, g, u, stages + next_stage * V::STAGE, i, next_tile * kRows, next_chunk * V::JC, k0, lane);
            next_stage = next_stage + 1 == kStages ? 0 : next_stage + 1;
            if (++next_tile == a.tiles) {
                next_tile = 0;
                next_chunk++;
            }
        }
        cp_async::commit();  // possibly empty, so that the wait below counts groups uniformly
    };
    for (int s = 0; s < kStages - 1; s++) enqueue();

    int stage = 0;  // of the step read
    for (int c = 0; c < a.nchunks; c++) {
        const int c0 = c * V::JC;
        // grad_u's B fragments: W[i, c0 + 8ks + 2t (+1), k0 + 8nt + gr], split.
        Split w[V::KSTEPS][V::NT][2];
#pragma unroll
        for (int ks = 0; ks < V::KSTEPS; ks++) {
#pragma unroll
            for (int nt = 0; nt < V::NT; nt++) {
                const int k = k0 + 8 * nt + gr;
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int je = c0 + 8 * ks + 2 * t + h;
                    const float x = je < a.JE && k < a.K ? __ldg(W + (i * a.JE + je) * a.K + k) : 0.0f;
                    w[ks][nt][h] = split_tf32(x);
                }
            }
        }
        float sum_W[V::MT][V::NT][4];  // grad_W's C fragments
        set_zero(sum_W);

        for (i64 tile = 0; tile < a.tiles; tile++) {
            enqueue();
            cp_async::wait<kStages - 1>();
            __syncwarp();
            const float *g_s = stages + stage * V::STAGE;
            stage = stage + 1 == kStages ? 0 : stage + 1;
            const float *u_s = g_s + kRows * V::LD;

            // grad_u of the tile's rows: two accumulators (even and odd
            // k-steps) so that consecutive mma do not wait on each other.
            float sum_u[2][V::NT][4];
            set_zero(sum_u);
#pragma unroll
            for (int ks = 0; ks < V::KSTEPS; ks++) {
                const float2 lo = *reinterpret_cast<const float2 *>(g_s + gr * V::LD + 8 * ks + 2 * t);
                const float2 hi = *reinterpret_cast<const float2 *>(g_s + (gr + 8) * V::LD + 8 * ks + 2 * t);
                const SplitA x = split_a(lo.x, hi.x, lo.y, hi.y);
#pragma unroll
                for (int nt = 0; nt < V::NT; nt++) tf32::mma_3xtf32(sum_u[ks % 2][nt], x, w[ks][nt][0], w[ks][nt][1]);
            }

            // grad_W: u's B fragments, u[8kb + t (+4), 8nt + gr], split.
            Split ub[2][V::NT][2];
#pragma unroll
            for (int kb = 0; kb < 2; kb++) {
#pragma unroll
                for (int nt = 0; nt < V::NT; nt++) {
                    ub[kb][nt][0] = split_tf32(u_s[(8 * kb + t) * V::US + 8 * nt + gr]);
                    ub[kb][nt][1] = split_tf32(u_s[(8 * kb + t + 4) * V::US + 8 * nt + gr]);
                }
            }
#pragma unroll
            for (int mt = 0; mt < V::MT; mt++) {
#pragma unroll
                for (int kb = 0; kb < 2; kb++) {
                    const float2 lo = *reinterpret_cast<const float2 *>(g_s + (8 * kb + t) * V::LD + 16 * mt + 2 * gr);
                    const float2 hi =
                        *reinterpret_cast<const float2 *>(g_s + (8 * kb + t + 4) * V::LD + 16 * mt + 2 * gr);
                    const SplitA x = split_a(lo.x, lo.y, hi.x, hi.y);
#pragma unroll
                    for (int nt = 0; nt < V::NT; nt++) tf32::mma_3xtf32(sum_W[mt][nt], x, ub[kb][nt][0], ub[kb][nt][1]);
                }
            }
            __syncwarp();  // the stage is refilled by the next step's enqueue

            // Store (first chunk) or add (later chunks) the tile's grad_u.
            const i64 b0 = tile * kRows;
#pragma unroll
            for (int nt = 0; nt < V::NT; nt++) {
                const int k = k0 + 8 * nt + 2 * t;
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const i64 b = b0 + gr + 8 * h;
                    if (b < a.B) {
                        float *row = grad_u + (b * a.I + i) * a.K;
                        store_or_add(row + k, sum_u[0][nt][2 * h] + sum_u[1][nt][2 * h], k<a.K, c> 0);
                        store_or_add(row + k + 1, sum_u[0][nt][2 * h + 1] + sum_u[1][nt][2 * h + 1], k + 1 < a.K,
                                     c > 0);
                    }
                }
            }
        }

        // The chunk's grad_W, complete.
#pragma unroll
        for (int mt = 0; mt < V::MT; mt++) {
#pragma unroll
            for (int nt = 0; nt < V::NT; nt++) {
                const int k = k0 + 8 * nt + 2 * t;
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int je = c0 + 16 * mt + 2 * gr + h;
                    if (je < a.JE) {
                        float *row = grad_W + (i * a.JE + je) * a.K;
                        store_or_add(row + k, sum_W[mt][nt][2 * h], k < a.K, false);
                        store_or_add(row + k + 1, sum_W[mt][nt][2 * h + 1], k + 1 < a.K, false);
                    }
                }
            }
        }
    }
    cp_async::wait<0>();
}

template <typename V>
cudaError_t launch(const float *g, const float *u, const float *W, float *grad_u, float *grad_W, const PredictShape &s,
                   cudaStream_t stream) {
    Args a{};
    a.B = s.batch;
    a.I = s.in_caps;
    a.JE = int(s.out_caps * s.out_dim);
    a.K = int(s.in_dim);
    a.nchunks = (a.JE + V::JC - 1) / V::JC;
    a.kslices = (a.K + V::KP - 1) / V::KP;
    a.tiles = (a.B + kRows - 1) / kRows;
    a.items = a.I * a.kslices;
    a.g_vec = a.JE % 4 == 0 && aligned16(g);
    a.u_vec = a.K % 4 == 0 && aligned16(u);
    const i64 blocks = (a.items + kWarpsPerBlock - 1) / kWarpsPerBlock;
    if (blocks > INT_MAX) return cudaErrorInvalidConfiguration;
    auto kernel = backward_kernel<V>;
    // Five blocks' stages (225 KB at MNIST) fit an SM only with the largest carveout.
    cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
    if (err != cudaSuccess) return err;
    kernel<<<unsigned(blocks), kThreads, V::SMEM, stream>>>(g, u, W, grad_u, grad_W, a);
    return cudaGetLastError();
}

}  // namespace tensor_backward
}  // namespace

bool predict_backward_tensor_cores_supported(const PredictShape &s) {
    return s.out_caps * s.out_dim <= (int64_t(1) << 30) && s.in_dim <= (int64_t(1) << 30) && s.in_caps <= INT_MAX;
}

cudaError_t predict_backward_tensor_cores(const float *g, const float *u, const float *W, float *grad_u, float *grad_W,
                                          const PredictShape &s, cudaStream_t stream) {
    if (s.in_dim <= 8) return tensor_backward::launch<tensor_backward::NarrowK>(g, u, W, grad_u, grad_W, s, stream);
    return tensor_backward::launch<tensor_backward::WideK>(g, u, W, grad_u, grad_W, s, stream);
}

}  // namespace halcaps::cuda_reference

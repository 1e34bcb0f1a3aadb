// Version 3 of the hand-written DigitCaps layer (digitcaps_cuda.h): version
// 2's two kernels an iteration, with u_hat computed on the tensor cores in
// float32 accuracy from three TF32 products (3xTF32).
//
// For one input capsule i, u_hat[:, i, :, :] is a matrix product:
//   u_hat[b, i, (j, e)] = sum_k u[b, i, k] * W[i, j, e, k]
// (M = batch rows, N = out_caps * out_dim, K = in_dim). So a warp takes 16
// batch rows (the M of mma.m16n8k8) and, for each i of its chunk:
//   1. u_hat for every j, 8 values of e at a time, into registers (the
//      mma's C fragments): out_caps * out_dim / 8 products of 3 mma each;
//   2. (iterations after the first) the logits b0[i, j] + u_hat . v_sum
//      (version 2's identity; v_sum, the running sum of the v's, in shared
//      memory), each row's dot summed over the 4 lanes that share it;
//   3. the softmax over j, in registers: the dots are reduce-scattered over
//      the 4 lanes of the rows, each lane pair takes one row's softmax (a
//      half of j each), and every lane gathers the coefficients of its two
//      rows;
//   4. sums[b, j, :] += c[b, i, j] u_hat[b, i, j, :] in float32 FMAs; the
//      sums stay in registers for the whole chunk.
// u_hat is computed once an iteration, on the tensor cores, and its FMAs
// are each W value's use by 16 batch rows. The first iteration's c =
// softmax(b0[i, :]) is the same for every batch row, so its kernel
// (kFirst) keeps no u_hat: the mma adds u times c[i, j] W[i, j] straight
// into the sums. With no u_hat to hold, its warps take two row tiles each
// (where the sums fit the registers), so that each W pair is split into
// TF32 parts once for 32 rows; the block's warps are then 4 i-lanes.
//
// 3xTF32 (tf32_mma.cuh): float32 accuracy from three TF32 products. The
// tests hold it to the same 1e-4 norm-wise bound as every other
// implementation. W's values are split with big truncated
// (split_tf32_truncated), u's rounded: truncating u's too let ptxas pass u
// itself as the big A operand, from registers in the wrong order, and it
// added a move for each of them before most mma.
//
// Block: m_tiles x i_lanes warps; the m_tiles warps of an i-lane take
// 16-row tiles of the batch, the i_lanes take alternate input capsules of
// the block's chunk, and are added in shared memory (in a fixed order) at
// the end, so that fewer partial sums reach global memory. W[i], b0[i, :]
// and the block's u rows of i are staged by cp.async, S steps, one
// barrier a step. The squash kernel (digitcaps_shared.cuh) adds the chunks'
// partial sums and squashes, as in version 2.
//
// The mma's fragments (tf32_mma.cuh): this kernel maps mma-k t to in_dim
// 2t and t + 4 to 2t + 1 (the same in A and B, so the sum over k is
// unchanged), so that each lane reads its two values as one 8-byte load.
//
// Limits: out_caps <= 16, out_dim <= 16, in_dim <= 16: u_hat and the sums
// of every j are in a lane's registers (2 x out_caps x 8 floats at out_dim
// 16; at out_caps above 10 with out_dim above 8 they spill, 588 bytes).
//
// The same pass kernel runs backward version 3's passes
// (digitcaps_backward_cuda.cu, through digitcaps_tensor_pass): the forward's
// replay storing c, and the backward's passes (PassMode below); the forward
// measured the same with those modes added (docs/history.md:
// nvidia-h200-tensor-backward/, run 1: MNIST b128 60.7-61.0 us against
// 60.7-60.8, alternating).
//
// The passes after the first and the squash kernels are launched
// overlapping the kernel ahead of them (programmatic dependent launch,
// digitcaps_shared.cuh): a pass zeros its shared memory and copies its
// first steps of W, u and b0 before it waits for the squash kernel ahead.
//
// Where a call's time goes, from every block's timestamps (docs/history.md:
// nvidia-h200-timeline/, run 2; this file built with
// HALCAPS_DIGITCAPS_TIMELINE, digitcaps_timeline.cuh): at MNIST b128 the
// passes' steps take 55% (1.5 us a step a warp, as at b512), each boundary
// between passes 5.9-6.9 us (the squash kernel and two waits on the kernel
// ahead, 0.8-1.1 us each), the ends of the passes 12%.
//
// Measured on an NVIDIA H200, in one call with the PyTorch peers
// (docs/history.md: nvidia-h200-headline-222983c/): MNIST b128 59.0 us, b512
// 150.3 (torch.compile 424.1 / 1646.2). Every change measured on the way
// there, and every design tried and dropped, with its numbers and its study:
// docs/history.md.
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cp_async.cuh"
#include "device_limits.h"
#include "digitcaps_cuda.h"
#include "digitcaps_shared.cuh"
#include "digitcaps_timeline.cuh"
#include "pointer_alignment.h"
#include "smem_opt_in.h"
#include "tf32_mma.cuh"

namespace halcaps::cuda_reference {

namespace {
namespace tensor {

using i64 = int64_t;
using digitcaps_shared::base2_logits_of_b0;
using digitcaps_shared::exp2_ftz;
using digitcaps_shared::kLog2e;
using digitcaps_shared::softmax_base2;
using tf32::conflict_free_stride;
using tf32::set_zero;
using tf32::Split;
using tf32::split_a;
using tf32::split_tf32_truncated;
using tf32::SplitA;

constexpr int kMaxOutCaps = 16, kMaxOutDim = 16, kMaxInDim = 16;
// Steps staged (the kernel's S): the one read and two in flight where an
// i-lane's chunk is long, the one read and one in flight where it is short
// (at most kShortChunkSteps steps), which spends less time filling the
// pipeline before the first step. On an H200 (docs/history.md:
// nvidia-h200-block-shapes/, run 7), every pass at 2 / 3 / 4 stages: MNIST
// b128 (9 steps) 60.3-60.4 / 61.2-61.5 / 64.1-64.4 us, b512 (36 steps)
// 160.3-160.6 / 157.6-158.0 / 169.7-170.1. The rule between rests on those
// two shapes.
constexpr int kLongStages = 3, kShortStages = 2;
constexpr int64_t kShortChunkSteps = 16;
constexpr int kRows = 16;      // batch rows a warp: the mma's M
constexpr int kThreads = 128;  // a block's threads: 4 warps, m_tiles / RT row warps x i_lanes (block_shape)

struct Args {
    i64 B, I;
    int J, E, K;
    int m_tiles, i_lanes;  // the block's row tiles (16 rows each) and i-lanes
    i64 chunk;             // input capsules a block, a multiple of i_lanes
    int slice;             // floats an i's slice: W [JM][EP][WS], b0 [B0F], u [m_tiles * 16][US] (Variant's)
    bool dense;            // E = EP, K = KP, u and W 16-byte aligned: W[i] and u rows copied as 16-byte pieces
                           // with no index arithmetic past a shift (else 4-byte pieces)
    bool vector_out;       // dense, and partial 16-byte aligned: the partial sums written as 16-byte pieces
};

// What a pass computes (pass_kernel's kMode):
//   kFirstPass  the first iteration: sums of u times c[i, j] W[i, j] (c the
//               same for every batch row), no u_hat;
//   kAgreement  an iteration after it: u_hat, the logits b0 + u_hat . v_sum,
//               c = their softmax and the sums of c u_hat;
//   kBackward   the backward of an iteration (digitcaps_backward_cuda.cu's
//               version 3): u_hat, gc = u_hat . gs (gs in v_sum's place),
//               G = G_next + c (gc - sum_j c gc) from the forward's c, and
//               the sums of G u_hat;
//   kBackwardWithLogits  the same, with c computed (and stored) by the pass
//               itself, as kAgreement computes it: the logits b0 + u_hat .
//               v_sum from the forward's v_sum, and gs in a second row tile
//               (version 3 from the forward's s, with no replay). Under ncu
//               on an H200 at MNIST b128 (docs/history.md:
//               nvidia-h200-tensor-training-pair/, runs 5-6): 40.4-41.2 us
//               and 10.0 M warp instructions a pass, against kBackward's
//               26.0-30.6 us and 7.3-7.4 M and the agreement pass storing
//               c's 24.8-25.7 us and 7.7 M: the one kernel costs less than
//               the two, but more than its instructions' share (255
//               registers, two chains of shuffles a step).
enum PassMode { kFirstPass, kAgreement, kBackward, kBackwardWithLogits };

// The coupling coefficients a pass stores or reads, each [B, I, J] (null:
// none): kAgreement stores c where c_out is given; kBackward reads c_in and
// G_next (null after the last iteration: zeros) and stores G_out;
// kBackwardWithLogits stores c_out, reads G_next and stores G_out.
struct Coefficients {
    float *c_out = nullptr;
    const float *c_in = nullptr, *G_next = nullptr;
    float *G_out = nullptr;
};

// One instantiation of the pass kernel: JM output capsules in registers
// (J <= JM; W is staged with zeros past J and those logits are -inf, so that
// no loop over j has a branch), NE 8-wide tiles of out_dim, KS 8-deep steps
// of in_dim.
template <int JM_, int NE_, int KS_>
struct Variant {
    static constexpr int JM = JM_, NE = NE_, KS = KS_;
    static constexpr int EP = 8 * NE, KP = 8 * KS;
    // The staged rows' strides (W, u, v_sum) and b0's floats, known at
    // compile time so that the kernel's shared-memory addresses are offsets.
    static constexpr int WS = conflict_free_stride(KP), US = WS, VS = conflict_free_stride(JM * EP);
    static constexpr int B0F = (JM + 3) / 4 * 4;
};

template <typename V>
Args args_for(const DigitCapsLayerShape &s, int m_tiles, int i_lanes, i64 chunk, bool aligned) {
    Args a{};
    a.B = s.batch;
    a.I = s.in_caps;
    a.J = int(s.out_caps);
    a.E = int(s.out_dim);
    a.K = int(s.in_dim);
    a.m_tiles = m_tiles;
    a.i_lanes = i_lanes;
    a.chunk = chunk;
    a.slice = V::JM * V::EP * V::WS + V::B0F + m_tiles * kRows * V::US;
    a.dense = a.E == V::EP && a.K == V::KP && aligned;
    return a;
}

// Shared memory, in floats: the staged slices, then the block's rows of
// v_sum (and, kBackwardWithLogits, of gs after them: `row_tiles` 2). After
// the loop the same floats hold every i-lane's sums on their way to being
// added ([i_lanes][tile rows][VS], over both regions). S: the steps staged.
template <typename V, int S>
__host__ __device__ int stage_region_floats(const Args &a) {
    return max(S * a.i_lanes * a.slice, (a.i_lanes - 1) * a.m_tiles * kRows * V::VS);
}
// Each warp's coefficient tile (a pass that stores or reads c or G): its 16
// rows' J values at one input capsule, [16][JM], through which the lanes'
// values reach global memory in address order (pass_kernel).
template <typename V>
constexpr int coefficient_tile_floats() {
    return kThreads / 32 * kRows * V::JM;
}
template <typename V, int S>
size_t smem_bytes(const Args &a, int row_tiles = 1, bool coefficient_tiles = false) {
    return sizeof(float) * (size_t(stage_region_floats<V, S>(a)) + size_t(row_tiles) * a.m_tiles * kRows * V::VS +
                            (coefficient_tiles ? size_t(coefficient_tile_floats<V>()) : 0));
}

// d += a * w in float32 accuracy (3xTF32), w the lane's two B values (split
// with big truncated: one instruction fewer a value than rounded).
__device__ inline void mma_3xtf32(float (&d)[4], const SplitA &a, float2 w) {
    tf32::mma_3xtf32(d, a, split_tf32_truncated(w.x), split_tf32_truncated(w.y));
}

// The lane's two B values of W[i, j] for out_dim tile nt and k-step ks.
template <typename V>
__device__ inline float2 w_pair(const float *W_s, int j, int nt, int ks, int g, int t) {
    return *reinterpret_cast<const float2 *>(W_s + (j * V::EP + 8 * nt + g) * V::WS + 8 * ks + 2 * t);
}

// Calls `call` with the block's i-lane count as a compile-time constant
// (std::integral_constant), so that loops over the i-lanes unroll: 1, 2 or
// 4 (m_tiles x i_lanes warps, which digitcaps_tensor checks).
template <typename Call>
__device__ inline void with_lane_count(int i_lanes, Call call) {
    if (i_lanes == 4) {
        call(std::integral_constant<int, 4>());
    } else if (i_lanes == 2) {
        call(std::integral_constant<int, 2>());
    } else {
        call(std::integral_constant<int, 1>());
    }
}

// V: the instantiation (Variant); kFirst: the first iteration, whose
// coupling coefficients c = softmax_j(b0[i, :]) are the same for every
// batch row, so that the sums are one matrix product over (i, k):
//   sums[b, (j, e)] = sum_i sum_k u[b, i, k] * (c[i, j] W[i, j, e, k]),
// added by the mma straight into the sums (no u_hat, no logits). Blocks of
// at most 128 threads, at least two of them an SM.
// kMode (PassMode) and kStore: whether a kAgreement pass stores c (the
// backward's replay of the forward). In a kBackward pass v_sum is gs; a
// kBackwardWithLogits pass reads both, gs from gs_rows (null in the others).
template <typename V, int kMode, bool kStore, int RT, int S>
__global__ void __launch_bounds__(128, 2)
    pass_kernel(const float *__restrict__ u, const float *__restrict__ W, const float *__restrict__ b0,
                const float *__restrict__ v_sum, const float *__restrict__ gs_rows, float *__restrict__ partial, Args a,
                Coefficients co) {
    constexpr bool kFirst = kMode == kFirstPass;
    constexpr bool kTwoTiles = kMode == kBackwardWithLogits;  // v_sum's rows and gs'
    constexpr bool kGradients = kMode == kBackward || kMode == kBackwardWithLogits;
    constexpr bool kReadsStagedB0 = kMode == kAgreement || kMode == kBackwardWithLogits;  // coefficients_of_logits
    static_assert(!kStore || kMode == kAgreement, "only the forward's agreement passes store c");
    constexpr int JM = V::JM, NE = V::NE, KS = V::KS, EP = V::EP, WS = V::WS, US = V::US, VS = V::VS;
    timeline::BlockClock clock;  // empty outside the timeline probe (digitcaps_timeline.cuh)
    clock.mark(timeline::kEntered);
    extern __shared__ float4 smem_vec[];
    float *smem = reinterpret_cast<float *>(smem_vec);
    const int region = stage_region_floats<V, S>(a);
    float *stages = smem;           // [S][i_lanes][slice]
    float *v_tile = smem + region;  // [m_tiles * 16][vs]: v_sum[b, j, e] at (b, j * EP + e)
    const int tile_rows = a.m_tiles * kRows;
    float *gs_tile = v_tile + tile_rows * VS;  // kTwoTiles: gs' rows, as v_tile's
    // kStore, kGradients: the warps' coefficient tiles, past v_tile (and gs_tile).
    float *coefficient_tiles = v_tile + (kTwoTiles ? 2 : 1) * tile_rows * VS;

    static_assert(RT == 1 || kFirst, "only the first pass takes several row tiles a warp");
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    // The warp's first row tile and its i-lane: it takes row tiles m * RT ..
    // m * RT + RT - 1 (RT = m_tiles in a first pass of two tiles a warp).
    const int row_warps = a.m_tiles / RT;
    const int m = warp % row_warps, q = warp / row_warps;
    const int g = lane / 4, t = lane % 4;
    const int threads = kThreads;
    const i64 b_first = i64(blockIdx.x) * tile_rows;
    const int rows = int(min(i64(tile_rows), a.B - b_first));
    const i64 i_first = i64(blockIdx.y) * a.chunk;
    const int n_i = int(min(a.chunk, a.I - i_first));
    const int steps = (n_i + a.i_lanes - 1) / a.i_lanes;
    const int J = a.J, E = a.E, K = a.K;

    // Zeros where a copy leaves floats that are read: W past out_caps,
    // out_dim or in_dim, u past the batch or in_dim, b0 when absent (the
    // passes with the logits read it), v_sum past the batch. A dense shape
    // whose tiles are full (MNIST's) leaves only b0's; the first iteration
    // does not read v_tile.
    const bool full_tiles = a.dense && J == JM && rows == tile_rows;
    if (full_tiles) {
        if (b0 == nullptr) {  // no copy lands on these floats: no barrier before the copies
            for (int n = threadIdx.x; n < S * a.i_lanes * V::B0F; n += threads) {
                stages[(n / V::B0F) * a.slice + JM * EP * WS + n % V::B0F] = 0.0f;
            }
        }
    } else {
        const int tile_floats = kFirst ? region : region + (kTwoTiles ? 2 : 1) * tile_rows * VS;
        for (int n = threadIdx.x; n < tile_floats / 4; n += threads) smem_vec[n] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (kReadsStagedB0 && J < JM) {
            // b0's floats past out_caps hold -inf, so that the logits there
            // are -inf with no test of j (their dots are 0: W and v_sum are
            // zeros there). Only the passes that take the logits from the
            // staged b0 read them: the first pass tests j itself
            // (base2_logits_of_b0) and kBackward takes no logits.
            __syncthreads();  // the zeros are in place before the -inf land on some of them
            const int pad = JM - J;
            for (int n = threadIdx.x; n < S * a.i_lanes * pad; n += threads) {
                stages[(n / pad) * a.slice + JM * EP * WS + J + n % pad] = -INFINITY;
            }
        }
        __syncthreads();  // the zeros are in place before any copy lands on the same floats
    }

    // Dense copies: W[i] as rows of KP floats, KP / 4 pieces a row, and the
    // block's u rows of i, a piece each. Thread x copies W pieces x, x +
    // kThreads, ... (the same column of rows kThreads / per_row apart) and u
    // piece x, so that every copy's addresses are the thread's first ones
    // of the step (W_step, u_step: taken here for step 0, then advanced a
    // step at a time by stage_dense, which stage calls for the steps in
    // order) plus the slot's offsets and constants: a few instructions a
    // copy (13 before, docs/history.md: nvidia-h200-stall-sites).
    constexpr int per_row = 2 * KS, row_step = kThreads / per_row;
    constexpr int w_copies = (JM * EP * per_row + kThreads - 1) / kThreads;
    static_assert(2 * kRows * per_row <= kThreads, "one u piece a thread");
    const int piece_row = threadIdx.x / per_row, piece_col = 4 * (threadIdx.x % per_row);
    const uint32_t W_at = cp_async::shared_address(stages + piece_row * WS + piece_col);
    const uint32_t u_at = cp_async::shared_address(stages + JM * EP * WS + V::B0F + piece_row * US + piece_col);
    const i64 JEK = i64(J) * E * K;
    const float *W_step = W + i_first * JEK + 4 * threadIdx.x;
    const float *u_step = u + ((b_first + min(piece_row, rows - 1)) * a.I + i_first) * K + piece_col;
    const bool copies_u = piece_row < rows;
    uint32_t w_copy_mask = 0;  // bit n: the thread's piece n * kThreads + x is one of W[i]'s
#pragma unroll
    for (int n = 0; n < w_copies; n++) w_copy_mask |= uint32_t(n * kThreads + int(threadIdx.x) < J * EP * per_row) << n;

    // The dense copies of `step` for its L i-lanes, L known at compile time
    // so that the lanes' copies unroll and each lane's offsets are constants
    // past the step's (with a runtime lane count ptxas recomputed them a
    // lane: 13% more instructions in the first pass, docs/history.md:
    // nvidia-h200-stall-sites, run 7).
    auto stage_dense = [&](int step, auto lanes) {
        constexpr int L = decltype(lanes)::value;
        const uint32_t slice_bytes = uint32_t(sizeof(float)) * uint32_t(a.slice);
        const uint32_t step_bytes = uint32_t((step % S) * L) * slice_bytes;
#pragma unroll
        for (int lq = 0; lq < L; lq++) {
            if (step * L + lq >= n_i) break;
            const uint32_t slot_bytes = step_bytes + lq * slice_bytes;
#pragma unroll
            for (int c = 0; c < w_copies; c++) {
                if (w_copy_mask >> c & 1u) {
                    cp_async::copy16(W_at + slot_bytes + uint32_t(sizeof(float)) * c * row_step * WS,
                                     W_step + lq * JEK + c * 4 * kThreads);
                }
            }
            if (copies_u) cp_async::copy16(u_at + slot_bytes, u_step + lq * K);
        }
        W_step += L * JEK;
        u_step += L * K;
    };
    // Copies the slices of `step` (W[i], b0[i, :], the block's u[b, i, :]
    // for each i-lane's i) and commits them as one group (an empty one past
    // the chunk, so that every thread counts the same groups); the loop over
    // i-lanes below runs only for 4-byte copies or b0.
    auto stage = [&](int step) {
        if (step < steps) {
            const int slot_first = (step % S) * a.i_lanes;
            if (a.dense) with_lane_count(a.i_lanes, [&](auto lanes) { stage_dense(step, lanes); });
            for (int lq = 0; lq < (a.dense && b0 == nullptr ? 0 : a.i_lanes); lq++) {  // 4-byte copies, b0
                const int n = step * a.i_lanes + lq;
                if (n >= n_i) break;
                const i64 i = i_first + n;
                float *W_dst = stages + (slot_first + lq) * a.slice;
                float *b0_dst = W_dst + JM * EP * WS;
                float *u_dst = b0_dst + V::B0F;
                if (!a.dense) {
                    const float *W_i = W + i * JEK;
                    for (int c = threadIdx.x; c < J * E * K; c += threads) {
                        const int row = c / K, col = c % K;  // row = j * E + e
                        __pipeline_memcpy_async(W_dst + ((row / E) * EP + row % E) * WS + col, W_i + c, 4);
                    }
                    for (int c = threadIdx.x; c < rows * K; c += threads) {
                        const int r = c / K, col = c % K;
                        __pipeline_memcpy_async(u_dst + r * US + col, u + ((b_first + r) * a.I + i) * K + col, 4);
                    }
                }
                if (b0 != nullptr) {
                    for (int c = threadIdx.x; c < J; c += threads)
                        __pipeline_memcpy_async(b0_dst + c, b0 + i * J + c, 4);
                }
            }
        }
        __pipeline_commit();
    };

    float sums[RT][JM][NE][4];
#pragma unroll
    for (int rt = 0; rt < RT; rt++) set_zero(sums[rt]);
    // Where J = JM (`through_tile`), a pass that stores or reads c or G
    // passes each step's coefficients through the warp's coefficient tile
    // ([16][JM] in shared memory), so that global memory sees them in address
    // order: piece p of lane x is the tile's float 32 p + x, of tile row
    // (32 p + x) / JM. A warp's load or store instruction then covers about
    // three rows' J floats (I * J floats apart), where each lane's own JH
    // floats of one row spread an instruction over all 16 rows. The pieces'
    // offsets from the tile's first float in global memory, and which rows
    // lie in the batch, are the same at every step: taken here, once (taken
    // a step, they cost 130 instructions a step, docs/history.md:
    // nvidia-h200-coefficient-tiles/, run 1). Elsewhere each lane loads and
    // stores its own floats. On an H200 at MNIST b128 (run 2, alternating
    // with the lanes' own stores and loads): digitcaps_backward_with_s 188.4-
    // 189.2 us against 198.1-198.7, digitcaps_with_c 75.6-75.8 against
    // 77.6-77.8, the other passes' users within 3.5 us; the storing pass
    // writes half the L2 sectors (0.71 M against 1.44 M). Loading c and
    // G_next directly and storing through the tile measured the same (run 3).
    constexpr int kPieces = JM / 2;  // 16 rows x JM floats over 32 lanes
    constexpr bool kTileCoefficients = kStore || kGradients;
    const bool through_tile = kTileCoefficients && J == JM && i64(a.I) * J * kRows <= i64(INT32_MAX);
    float *lane_tile = coefficient_tiles + warp * kRows * JM;
    int piece_offset[kPieces];
    uint32_t piece_in_batch = 0;  // bit p: piece p's row is in the batch
#pragma unroll
    for (int p = 0; p < kPieces; p++) {
        const int f = 32 * p + lane, r = f / JM;
        piece_offset[p] = through_tile ? r * int(a.I) * J + (f - r * JM) : 0;
        piece_in_batch |= uint32_t(m * kRows + r < rows) << p;
    }
    const float *v_rows = v_tile + (m * kRows + g) * VS + 2 * t;  // row g; row g + 8 is 8 * VS on
    const float *gs_lane_rows = v_rows + tile_rows * VS;          // kTwoTiles: the same rows of gs_tile

    // Steps 0 .. S - 2 in flight; at the top of step s the barrier
    // (after this thread's wait for step s's group) makes step s's slot
    // visible and frees the slot step s - 1 read, which the copy of step
    // s + S - 1 then fills.
    for (int step = 0; step < S - 1; step++) stage(step);
    // Up to here the kernel reads only u, W and b0, and may overlap the
    // squash kernel ahead of it; v_sum is that kernel's, and so is partial
    // (which it reads).
    digitcaps_shared::wait_for_previous_kernel();
    clock.mark(timeline::kWaited);
    digitcaps_shared::let_next_kernel_start();
    // The tile's rows of v_sum (and gs'), in a group of their own that step 0
    // waits for with the rest.
    auto copy_rows = [&](const float *__restrict__ from, float *tile) {
        if (a.dense) {  // a row of v_sum is J * EP floats, as in v_tile: a warp a row, 16 bytes a lane
            // The lane's shared and global addresses taken once, the row's
            // pieces unrolled (at most JM * EP / 128 of them).
            constexpr int kRowCopies = (JM * EP + 4 * 32 - 1) / (4 * 32);
            const int warps = threads / 32;
            const uint32_t v_at = cp_async::shared_address(tile + warp * VS + 4 * lane);
            const float *v_from = from + (b_first + warp) * J * E + 4 * lane;
            for (int r = warp; r < rows; r += warps) {
                const int r_on = r - warp;
#pragma unroll
                for (int c = 0; c < kRowCopies; c++) {
                    if (4 * lane + 4 * 32 * c < J * EP) {
                        cp_async::copy16(v_at + uint32_t(sizeof(float)) * (r_on * VS + 4 * 32 * c),
                                         v_from + i64(r_on) * J * E + 4 * 32 * c);
                    }
                }
            }
        } else {
            for (int c = threadIdx.x; c < rows * J * E; c += threads) {
                const int r = c / (J * E), j = (c / E) % J, e = c % E;
                __pipeline_memcpy_async(tile + r * VS + j * EP + e, from + (b_first + r) * J * E + j * E + e, 4);
            }
        }
    };
    if (!kFirst) {
        copy_rows(v_sum, v_tile);
        if (kTwoTiles) copy_rows(gs_rows, gs_tile);
        __pipeline_commit();
    }
    for (int step = 0; step < steps; step++) {
        if (!kFirst && step == 0) {
            __pipeline_wait_prior(0);
        } else {
            __pipeline_wait_prior(S - 2);
        }
        __syncthreads();
        if (step == 0) clock.mark(timeline::kFirstStep);
        stage(step + S - 1);
        const int n = step * a.i_lanes + q;
        if (n >= n_i) continue;  // the chunk's last step may leave some i-lanes idle

        const float *W_s = stages + ((step % S) * a.i_lanes + q) * a.slice;
        const float *b0_s = W_s + JM * EP * WS;
        // Where the lane's coefficients are in [B, I, J] (kStore, kBackward):
        // row softmax_row of its tile, i, the half of j that t & 1 picks (the
        // softmax's split below). The backward's c and G_next are loaded
        // here, so that their latency passes under the products.
        constexpr int JH = JM / 2;
        const int softmax_row = g + (t & 2 ? 8 : 0);  // of the warp's 16: the row whose softmax half the lane takes
        const i64 coefficient_row = b_first + m * kRows + softmax_row;
        const bool row_in = coefficient_row < a.B;
        const int j_first = t & 1 ? JH : 0;
        const i64 coefficients_at = (coefficient_row * a.I + i_first + n) * J + j_first;
        // The warp's coefficient tile at this i starts at tile_at in [B, I, J].
        const i64 tile_at = ((b_first + m * kRows) * a.I + i_first + n) * J;
        // The pieces of `from`'s tile (zeros past the batch), loaded in
        // address order; then (tile_values) each lane's JH values of them.
        auto load_pieces = [&](const float *__restrict__ from, float(&pieces)[kPieces]) {
            const float *tile = from + tile_at;
#pragma unroll
            for (int p = 0; p < kPieces; p++) pieces[p] = piece_in_batch >> p & 1u ? tile[piece_offset[p]] : 0.0f;
        };
        auto tile_values = [&](const float(&pieces)[kPieces], float(&half)[JH]) {
            __syncwarp();  // the tile's last reads are done
#pragma unroll
            for (int p = 0; p < kPieces; p++) lane_tile[32 * p + lane] = pieces[p];
            __syncwarp();
#pragma unroll
            for (int jj = 0; jj < JH; jj++) half[jj] = lane_tile[softmax_row * JM + j_first + jj];
        };
        // Stores each lane's JH values (j = j_first + jj of its row) into `to`.
        auto store_coefficients = [&](const float(&half)[JH], float *__restrict__ to) {
            if (through_tile) {
                __syncwarp();
#pragma unroll
                for (int jj = 0; jj < JH; jj++) lane_tile[softmax_row * JM + j_first + jj] = half[jj];
                __syncwarp();
                float *tile = to + tile_at;
#pragma unroll
                for (int p = 0; p < kPieces; p++) {
                    if (piece_in_batch >> p & 1u) tile[piece_offset[p]] = lane_tile[32 * p + lane];
                }
            } else {
#pragma unroll
                for (int jj = 0; jj < JH; jj++) {
                    if (row_in && j_first + jj < J) to[coefficients_at + jj] = half[jj];
                }
            }
        };
        // c and G_next of the backward passes, loaded here so that their
        // latency passes under the products (into lanes' values after them).
        float c_known[JH], G_known[JH], c_pieces[kPieces], G_pieces[kPieces];
        if constexpr (kGradients) {
            if (through_tile) {
                if constexpr (kMode == kBackward) load_pieces(co.c_in, c_pieces);
                if (co.G_next != nullptr) {
                    load_pieces(co.G_next, G_pieces);
                } else {
#pragma unroll
                    for (int p = 0; p < kPieces; p++) G_pieces[p] = 0.0f;
                }
            } else {
#pragma unroll
                for (int jj = 0; jj < JH; jj++) {
                    const bool ok = row_in && j_first + jj < J;
                    if constexpr (kMode == kBackward) c_known[jj] = ok ? co.c_in[coefficients_at + jj] : 0.0f;
                    G_known[jj] = ok && co.G_next != nullptr ? co.G_next[coefficients_at + jj] : 0.0f;
                }
            }
        }
        // The lane's u values: rows g, g + 8 of each of its row tiles at
        // in_dim 2t, 2t + 1 of each k-step.
        float x[RT][KS][4];
#pragma unroll
        for (int rt = 0; rt < RT; rt++) {
            const float *u_s = b0_s + V::B0F + (m * RT + rt) * kRows * US;
#pragma unroll
            for (int ks = 0; ks < KS; ks++) {
                const float2 lo = *reinterpret_cast<const float2 *>(u_s + g * US + 8 * ks + 2 * t);
                const float2 hi = *reinterpret_cast<const float2 *>(u_s + (g + 8) * US + 8 * ks + 2 * t);
                x[rt][ks][0] = lo.x;
                x[rt][ks][1] = hi.x;
                x[rt][ks][2] = lo.y;
                x[rt][ks][3] = hi.y;
            }
        }

        if constexpr (kFirst) {
            // sums += u times c[i, j] W[i, j] on the tensor cores, c[i, :] =
            // softmax(b0[i, :]); without b0 it is 1 / J, taken once at the end.
            // Each W pair is split once for the warp's RT row tiles.
            float c[JM];
            auto add_products = [&](auto scaled) {
#pragma unroll
                for (int ks = 0; ks < KS; ks++) {
                    SplitA xs[RT];
#pragma unroll
                    for (int rt = 0; rt < RT; rt++) {
                        xs[rt] = split_a(x[rt][ks][0], x[rt][ks][1], x[rt][ks][2], x[rt][ks][3]);
                    }
#pragma unroll
                    for (int j = 0; j < JM; j++) {
#pragma unroll
                        for (int nt = 0; nt < NE; nt++) {
                            float2 w = w_pair<V>(W_s, j, nt, ks, g, t);
                            if constexpr (decltype(scaled)::value) w = make_float2(c[j] * w.x, c[j] * w.y);
                            const Split w0 = split_tf32_truncated(w.x), w1 = split_tf32_truncated(w.y);
#pragma unroll
                            for (int rt = 0; rt < RT; rt++) tf32::mma_3xtf32(sums[rt][j][nt], xs[rt], w0, w1);
                        }
                    }
                }
            };
            if (b0 == nullptr) {
                add_products(std::false_type());
            } else {
                base2_logits_of_b0(b0_s, J, c);
                softmax_base2(c);
                add_products(std::true_type());
            }
        } else {
            // u_hat[b, i, j, e] for rows g, g + 8, every j and the lane's
            // columns e of each out_dim tile.
            float u_hat[JM][NE][4];
            set_zero(u_hat);
#pragma unroll
            for (int ks = 0; ks < KS; ks++) {
                const SplitA xs = split_a(x[0][ks][0], x[0][ks][1], x[0][ks][2], x[0][ks][3]);
#pragma unroll
                for (int j = 0; j < JM; j++) {
#pragma unroll
                    for (int nt = 0; nt < NE; nt++) mma_3xtf32(u_hat[j][nt], xs, w_pair<V>(W_s, j, nt, ks, g, t));
                }
            }

            // The coupling coefficients c of rows g and g + 8 (the softmax
            // over j of b0[i, j] + u_hat . v_sum), shared out over the 4 lanes
            // of the rows (t) so that no lane repeats the whole softmax: the
            // lane's dots over its columns, added over the 4 lanes so that
            // lane t ends with those of row `upper_row` at j = JH * upper_half
            // + jj (a reduce-scatter: JM + JH shuffles, against 2 JM for every
            // lane to hold all), the softmax of those JH logits with the
            // partner lane (t ^ 1) holding the row's other half, then every
            // lane gathers all 2 JM coefficients for the sums.
            static_assert(JM % 2 == 0, "the softmax splits the output capsules in halves");
            const bool upper_row = t & 2, upper_half = t & 1;
            // The lane's dots with the rows at `lane_rows` (v_rows or
            // gs_lane_rows) over every j, for row g + 8 * upper_row, summed
            // over lanes t and t ^ 2.
            auto row_dots_with = [&](const float *lane_rows, float(&row_dots)[JM]) {
#pragma unroll
                for (int j = 0; j < JM; j++) {
                    float dot_lo = 0.0f, dot_hi = 0.0f;
#pragma unroll
                    for (int nt = 0; nt < NE; nt++) {
                        const float2 v_lo = *reinterpret_cast<const float2 *>(lane_rows + j * EP + 8 * nt);
                        const float2 v_hi = *reinterpret_cast<const float2 *>(lane_rows + 8 * VS + j * EP + 8 * nt);
                        dot_lo = fmaf(u_hat[j][nt][0], v_lo.x, fmaf(u_hat[j][nt][1], v_lo.y, dot_lo));
                        dot_hi = fmaf(u_hat[j][nt][2], v_hi.x, fmaf(u_hat[j][nt][3], v_hi.y, dot_hi));
                    }
                    const float given = __shfl_xor_sync(0xffffffffu, upper_row ? dot_lo : dot_hi, 2);
                    row_dots[j] = (upper_row ? dot_hi : dot_lo) + given;
                }
            };
            // The lane's row's dot at j = JH * upper_half + jj (the partner
            // lane's half added).
            auto half_dot = [&](const float(&row_dots)[JM], int jj) {
                const float given = __shfl_xor_sync(0xffffffffu, upper_half ? row_dots[jj] : row_dots[jj + JH], 1);
                return (upper_half ? row_dots[jj + JH] : row_dots[jj]) + given;
            };
            // Forward (and kBackwardWithLogits): base-2 logits, then c (stored
            // where asked for).
            auto coefficients_of_logits = [&](float(&half_c)[JH]) {
                float row_dots[JM];
                row_dots_with(v_rows, row_dots);
                const float *b0_half = b0_s + (upper_half ? JH : 0);  // -inf past out_caps
#pragma unroll
                for (int jj = 0; jj < JH; jj++) {
                    const float dot = half_dot(row_dots, jj);  // every lane: the shuffle names the whole warp
                    half_c[jj] = fmaf(kLog2e, dot, kLog2e * b0_half[jj]);
                }
                softmax_base2<true>(half_c);  // j = 0 (in the lower half) is finite
                if constexpr (kStore || kMode == kBackwardWithLogits) store_coefficients(half_c, co.c_out);
            };
            float half_c[JH];  // of the lane's row at j = JH * upper_half + jj: c, or (backward) G
            if constexpr (kMode == kBackwardWithLogits) coefficients_of_logits(c_known);
            if constexpr (kGradients) {
                // The loaded c and G_next, now in each lane's order.
                if (through_tile) {
                    if constexpr (kMode == kBackward) tile_values(c_pieces, c_known);
                    tile_values(G_pieces, G_known);
                }
                // gc = u_hat . gs, then the softmax's backward: sum_j c gc
                // over both halves (the partner lane's), G = G_next + c (gc -
                // that sum), stored.
                float row_dots[JM];
                row_dots_with(kTwoTiles ? gs_lane_rows : v_rows, row_dots);
#pragma unroll
                for (int jj = 0; jj < JH; jj++) half_c[jj] = half_dot(row_dots, jj);
                float c_dot_gc = 0.0f;
#pragma unroll
                for (int jj = 0; jj < JH; jj++) c_dot_gc = fmaf(c_known[jj], half_c[jj], c_dot_gc);
                c_dot_gc += __shfl_xor_sync(0xffffffffu, c_dot_gc, 1);
#pragma unroll
                for (int jj = 0; jj < JH; jj++) half_c[jj] = fmaf(c_known[jj], half_c[jj] - c_dot_gc, G_known[jj]);
                store_coefficients(half_c, co.G_out);
            } else {
                coefficients_of_logits(half_c);
            }
            // Every lane gathers both rows' coefficients from the 4 lanes of
            // its quad: lane t holds row g + 8 * (t >> 1) at the half t & 1,
            // so each of c's registers comes from one fixed lane of the quad
            // (an indexed shuffle, no select).
            float c[2][JM];
            const int quad = lane & ~3;
#pragma unroll
            for (int jj = 0; jj < JH; jj++) {
                c[0][jj] = __shfl_sync(0xffffffffu, half_c[jj], quad);
                c[0][jj + JH] = __shfl_sync(0xffffffffu, half_c[jj], quad + 1);
                c[1][jj] = __shfl_sync(0xffffffffu, half_c[jj], quad + 2);
                c[1][jj + JH] = __shfl_sync(0xffffffffu, half_c[jj], quad + 3);
            }

            // sums[b, j, :] += c[b, i, j] u_hat[b, i, j, :], in float32.
#pragma unroll
            for (int j = 0; j < JM; j++) {
#pragma unroll
                for (int nt = 0; nt < NE; nt++) {
                    sums[0][j][nt][0] = fmaf(c[0][j], u_hat[j][nt][0], sums[0][j][nt][0]);
                    sums[0][j][nt][1] = fmaf(c[0][j], u_hat[j][nt][1], sums[0][j][nt][1]);
                    sums[0][j][nt][2] = fmaf(c[1][j], u_hat[j][nt][2], sums[0][j][nt][2]);
                    sums[0][j][nt][3] = fmaf(c[1][j], u_hat[j][nt][3], sums[0][j][nt][3]);
                }
            }
        }
    }
    __pipeline_wait_prior(0);
    __syncthreads();  // every slot and v_tile read: the shared memory now holds the i-lanes' sums
    clock.mark(timeline::kStepsDone);

    // Every warp leaves its sums in shared memory, [i-lane][tile row][VS]
    // (at the row stride VS a half-warp's 8-byte stores hit distinct banks);
    // then all the block's threads add the i-lanes' sums of a row in order
    // and write the chunk's partial sums, 16 bytes a thread where the shape
    // is dense. Before, i-lane 0's warps added the others' alone and wrote
    // their fragments' floats one by one: a third of the first pass's warp
    // samples (docs/history.md: nvidia-h200-stall-sites, run 1).
    float *lane_rows = smem + i64(q) * tile_rows * VS;
#pragma unroll
    for (int rt = 0; rt < RT; rt++) {
#pragma unroll
        for (int h = 0; h < 2; h++) {  // rows g and g + 8 of the row tile
            float *row_sums = lane_rows + ((m * RT + rt) * kRows + g + 8 * h) * VS + 2 * t;
#pragma unroll
            for (int j = 0; j < JM; j++) {
#pragma unroll
                for (int nt = 0; nt < NE; nt++) {
                    *reinterpret_cast<float2 *>(row_sums + j * EP + 8 * nt) =
                        make_float2(sums[rt][j][nt][2 * h], sums[rt][j][nt][2 * h + 1]);
                }
            }
        }
    }
    __syncthreads();
    // The first iteration without b0 left out c = 1 / J.
    const float scale = kFirst && b0 == nullptr ? 1.0f / float(J) : 1.0f;
    float *out = partial + (i64(blockIdx.y) * a.B + b_first) * J * E;
    const int lane_floats = tile_rows * VS;
    if (a.vector_out) {  // E = EP: a row's J * E sums are its first J * EP floats here
        // kBatch pieces a thread at a time, all their loads issued before
        // the adds (with the i-lane count known at compile time): the end of
        // a pass waits on these loads' latency, not on its instructions
        // (docs/history.md: nvidia-h200-stall-sites, runs 3 and 4).
        const int row_pieces = J * EP / 4, pieces = rows * row_pieces;
        auto add_and_write = [&](auto lanes) {
            constexpr int L = decltype(lanes)::value, kBatch = 4;
            for (int p_first = threadIdx.x; p_first < pieces; p_first += kBatch * threads) {
                float4 loaded[kBatch][L];
#pragma unroll
                for (int n = 0; n < kBatch; n++) {
                    const int p = min(p_first + n * threads, pieces - 1);
                    const float *at = smem + (p / row_pieces) * VS + 4 * (p % row_pieces);
#pragma unroll
                    for (int qq = 0; qq < L; qq++)
                        loaded[n][qq] = *reinterpret_cast<const float4 *>(at + qq * lane_floats);
                }
#pragma unroll
                for (int n = 0; n < kBatch; n++) {
                    const int p = p_first + n * threads;
                    if (p >= pieces) break;
                    float4 total = loaded[n][0];
#pragma unroll
                    for (int qq = 1; qq < L; qq++) {
                        total = make_float4(total.x + loaded[n][qq].x, total.y + loaded[n][qq].y,
                                            total.z + loaded[n][qq].z, total.w + loaded[n][qq].w);
                    }
                    *reinterpret_cast<float4 *>(out + i64(p / row_pieces) * J * E + 4 * (p % row_pieces)) =
                        make_float4(scale * total.x, scale * total.y, scale * total.z, scale * total.w);
                }
            }
        };
        with_lane_count(a.i_lanes, add_and_write);
    } else {
        for (int p = threadIdx.x; p < rows * J * E; p += threads) {
            const int r = p / (J * E), j = p / E % J, e = p % E;
            const float *at = smem + r * VS + j * EP + e;
            float total = *at;
            for (int qq = 1; qq < a.i_lanes; qq++) total += at[qq * lane_floats];
            out[p] = scale * total;
        }
    }
#ifdef HALCAPS_DIGITCAPS_TIMELINE
    __syncthreads();  // the block's end is its last thread's
#endif
    clock.publish(kFirst                ? timeline::kFirstPassKernel
                  : kMode == kAgreement ? timeline::kAgreementPassKernel
                                        : timeline::kOtherPassKernel,
                  0);
}

// The first pass: with two row tiles a block, each warp takes both (RT = 2)
// and the block's 4 warps are 4 i-lanes (digitcaps_tensor), so that a W
// pair is split once for 32 rows. Only where two tiles' sums fit the
// registers (out_caps x out_dim up to 160: 230 registers at MNIST's variant,
// no spills; at 16 x 16 they would spill). The passes after it hold u_hat
// too, and have no registers left for a second tile.
constexpr int kFirstWarpTiles = 2;
template <typename V>
constexpr bool two_tiles_fit() {
    return V::JM * V::NE <= 20;
}

// Calls `call` with the Variant that runs a shape: the smallest register
// arrays that hold its out_caps, out_dim and in_dim.
template <int JM, int NE, typename Call>
cudaError_t with_ks(int K, Call call) {
    return K <= 8 ? call(Variant<JM, NE, 1>()) : call(Variant<JM, NE, 2>());
}
template <int NE, typename Call>
cudaError_t with_jm(int J, int K, Call call) {
    if (J <= 4) return with_ks<4, NE>(K, call);
    if (J <= 8) return with_ks<8, NE>(K, call);
    if (J <= 10) return with_ks<10, NE>(K, call);
    return with_ks<16, NE>(K, call);
}
template <typename Call>
cudaError_t with_variant(const DigitCapsLayerShape &s, Call call) {
    return s.out_dim <= 8 ? with_jm<1>(int(s.out_caps), int(s.in_dim), call)
                          : with_jm<2>(int(s.out_caps), int(s.in_dim), call);
}

// with_variant, with the stage count as well (std::integral_constant):
// kShortStages where `shallow` (launch_pass decides), else kLongStages.
template <typename Call>
cudaError_t with_variant_and_stages(const DigitCapsLayerShape &s, bool shallow, Call call) {
    return with_variant(s, [&](auto variant) {
        if (shallow) return call(variant, std::integral_constant<int, kShortStages>());
        return call(variant, std::integral_constant<int, kLongStages>());
    });
}

// The block's warps: two row tiles by two i-lanes, or one row tile by four
// i-lanes where the batch fits one tile. At 239 registers (MNIST's shape)
// two blocks of 4 warps fit an SM. Measured on an NVIDIA H200 (run 4, MNIST
// b128 / b512): 2 x 2 87.8 / 253.0 us, 1 x 2 91.8 / 265.4, 1 x 4 100.3 /
// 324.1.
void block_shape(const DigitCapsLayerShape &s, int *m_tiles, int *i_lanes) {
    *m_tiles = s.batch > kRows ? 2 : 1;
    *i_lanes = 4 / *m_tiles;
}

// Enqueues one pass over the plan's grid (b0, v_sum and gs_rows as
// pass_kernel reads them; `store`: kAgreement storing c). Every pass but the
// first is launched overlapping the kernel ahead of it in the stream.
cudaError_t launch_pass(PassMode mode, bool store, const DigitCapsLayerShape &s, const DigitCapsTensorPlan &plan,
                        const float *u, const float *W, const float *b0, const float *v_sum, const float *gs_rows,
                        float *partial, const Coefficients &co, cudaStream_t stream) {
    const int64_t tile_rows = int64_t(plan.m_tiles) * kRows;
    const dim3 grid(unsigned((s.batch + tile_rows - 1) / tile_rows), unsigned(plan.chunks));
    const dim3 block(kThreads);
    // The shallower staging where the chunks are short. kBackwardWithLogits
    // instead takes the deeper wherever its shared memory (two row tiles)
    // fits a block, whatever the chunks' length, and the shallower where it
    // does not (out_caps, out_dim and in_dim 16: 234 KB): at the shallower
    // its MNIST variant spills (16 bytes of stack at 255 registers) and its
    // first pass took 44.4 us against 40.4 under ncu at b128 (docs/history.md:
    // nvidia-h200-tensor-training-pair/, run 6).
    bool shallow = plan.chunk / plan.i_lanes <= kShortChunkSteps;
    if (mode == kBackwardWithLogits) {
        DeviceLimits device;
        if (cudaError_t err = device_limits(&device); err != cudaSuccess) return err;
        with_variant(s, [&](auto variant) {
            using V = decltype(variant);
            const Args a = args_for<V>(s, plan.m_tiles, plan.i_lanes, plan.chunk, true);
            shallow = smem_bytes<V, kLongStages>(a, 2, true) > size_t(device.smem_per_block_optin);
            return cudaSuccess;
        });
    }
    return with_variant_and_stages(s, shallow, [&](auto variant, auto staged) {
        using V = decltype(variant);
        constexpr int S = decltype(staged)::value;
        Args a = args_for<V>(s, plan.m_tiles, plan.i_lanes, plan.chunk, aligned16(u) && aligned16(W));
        a.vector_out = a.dense && aligned16(partial);
        // After the kernel ahead, which it may overlap; coefficient_tiles: a
        // pass that stores or reads c or G.
        auto overlapping = [&](auto kernel, int row_tiles, bool coefficient_tiles) {
            const size_t smem = smem_bytes<V, S>(a, row_tiles, coefficient_tiles);
            if (cudaError_t e = allow_dynamic_smem(kernel, smem); e != cudaSuccess) return e;
            return digitcaps_shared::launch_overlapping(kernel, grid, block, smem, stream, u, W, b0, v_sum, gs_rows,
                                                        partial, a, co);
        };
        if (mode == kBackward) return overlapping(pass_kernel<V, kBackward, false, 1, S>, 1, true);
        if (mode == kBackwardWithLogits) return overlapping(pass_kernel<V, kBackwardWithLogits, false, 1, S>, 2, true);
        if (mode == kAgreement) {
            return store ? overlapping(pass_kernel<V, kAgreement, true, 1, S>, 1, true)
                         : overlapping(pass_kernel<V, kAgreement, false, 1, S>, 1, false);
        }
        Args first = a;
        auto kernel = pass_kernel<V, kFirstPass, false, 1, S>;
        if constexpr (two_tiles_fit<V>()) {
            if (a.m_tiles == kFirstWarpTiles) {
                first.i_lanes = kThreads / 32;  // every warp takes both row tiles: the warps are i-lanes
                kernel = pass_kernel<V, kFirstPass, false, kFirstWarpTiles, S>;
            }
        }
        const size_t smem = smem_bytes<V, S>(first);
        if (cudaError_t e = allow_dynamic_smem(kernel, smem); e != cudaSuccess) return e;
        kernel<<<grid, block, smem, stream>>>(u, W, b0, v_sum, gs_rows, partial, first, co);
        return cudaGetLastError();
    });
}

// Whether `s` is a shape version 3 runs and `plan` a plan of it.
bool runs(const DigitCapsLayerShape &s, const DigitCapsTensorPlan &plan) {
    return s.batch >= 1 && s.in_caps >= 1 && s.out_caps >= 1 && s.out_dim >= 1 && s.in_dim >= 1 &&
           digitcaps_tensor_refusal(s).extent == nullptr && plan.m_tiles >= 1 && plan.i_lanes >= 1 &&
           32 * plan.m_tiles * plan.i_lanes == kThreads && plan.chunk >= 1 && plan.chunk % plan.i_lanes == 0 &&
           plan.chunks == (s.in_caps + plan.chunk - 1) / plan.chunk;
}

}  // namespace tensor
}  // namespace

#ifdef HALCAPS_DIGITCAPS_TIMELINE
cudaError_t digitcaps_tensor_timeline(timeline::BlockRecord *records, unsigned capacity) {
    const unsigned none = 0;
    if (cudaError_t e = cudaMemcpyToSymbol(timeline::timeline_records, &records, sizeof(records)); e != cudaSuccess) {
        return e;
    }
    if (cudaError_t e = cudaMemcpyToSymbol(timeline::timeline_capacity, &capacity, sizeof(capacity));
        e != cudaSuccess) {
        return e;
    }
    return cudaMemcpyToSymbol(timeline::timeline_used, &none, sizeof(none));
}
cudaError_t digitcaps_tensor_timeline_used(unsigned *used) {
    return cudaMemcpyFromSymbol(used, timeline::timeline_used, sizeof(*used));
}
#endif

DigitCapsFusedRefusal digitcaps_tensor_refusal(const DigitCapsLayerShape &s) {
    return digitcaps_shared::extent_beyond(s, tensor::kMaxOutCaps, tensor::kMaxOutDim, tensor::kMaxInDim);
}

cudaError_t digitcaps_tensor_plan(const DigitCapsLayerShape &s, DigitCapsTensorPlan *plan) {
    tensor::block_shape(s, &plan->m_tiles, &plan->i_lanes);
    DeviceLimits device;
    int per_sm = 0;
    if (cudaError_t err = device_limits(&device); err != cudaSuccess) return err;
    const int threads = tensor::kThreads;
    if (cudaError_t err = tensor::with_variant(
            s,
            [&](auto variant) {
                using V = decltype(variant);
                const tensor::Args a = tensor::args_for<V>(s, plan->m_tiles, plan->i_lanes, plan->i_lanes, true);
                // The chunk (from this occupancy) decides the stage count, so the
                // query takes the deeper one. Where the shallower would fit more
                // blocks an SM, the chunks come out fewer and longer than they
                // could be; at MNIST's variant both fit 2, the registers' limit.
                constexpr int S = tensor::kLongStages;
                const size_t smem = tensor::smem_bytes<V, S>(a);
                auto kernel = tensor::pass_kernel<V, tensor::kAgreement, false, 1, S>;
                if (cudaError_t e = allow_dynamic_smem(kernel, smem); e != cudaSuccess) return e;
                return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem);
            });
        err != cudaSuccess) {
        return err;
    }
    const int64_t tile_rows = int64_t(plan->m_tiles) * tensor::kRows;
    const int64_t batch_tiles = (s.batch + tile_rows - 1) / tile_rows;
    plan->chunk = digitcaps_shared::chunk_filling_device(s.in_caps, batch_tiles, per_sm, device.sms, plan->i_lanes);
    plan->chunks = (s.in_caps + plan->chunk - 1) / plan->chunk;
    plan->scratch_floats = (plan->chunks + 1) * s.batch * s.out_caps * s.out_dim;
    return cudaSuccess;
}

cudaError_t digitcaps_tensor(const float *u, const float *W, const float *b0, float *v, float *routing_s,
                             float *routing_c, const DigitCapsLayerShape &s, int iterations,
                             const DigitCapsTensorPlan &plan, float *scratch, cudaStream_t stream) {
    if (iterations < 1 || !tensor::runs(s, plan) || u == nullptr || W == nullptr || v == nullptr ||
        scratch == nullptr || (routing_c != nullptr && routing_s == nullptr)) {
        return cudaErrorInvalidValue;
    }
    const int64_t rows = s.batch * s.out_caps;
    const int E = int(s.out_dim);
    float *partial = scratch, *v_sum = scratch + plan.chunks * rows * E;
    if (routing_c != nullptr) {
        if (cudaError_t err = digitcaps_first_coefficients(b0, routing_c, s, stream); err != cudaSuccess) return err;
    }
    // Keeping c costs the forward 15.6 us at MNIST b128 and 53.9 at b512 on
    // an H200 (75.7 / 212.9 us against 60.1 / 159.0 with s alone;
    // docs/history.md: nvidia-h200-coefficient-tiles, run 2): the c_0 kernel
    // and the agreement passes' stores of c (through the warps' coefficient
    // tiles; a warp's 16 rows still lie I x J floats apart). Before the
    // tiles, 17.2 / 53.1 us (nvidia-h200-training-pair-with-c, run 1).
    int t = 0;  // the iteration of the pass launched
    return digitcaps_shared::iterate(
        iterations, partial, v_sum, v, routing_s, rows, E, plan.chunks, stream, [&](bool agreement) {
            // With routing_c, the agreement pass of iteration t stores its c_t.
            tensor::Coefficients co;
            const bool storing = agreement && routing_c != nullptr;
            if (storing) co.c_out = routing_c + t * s.batch * s.in_caps * s.out_caps;
            t++;
            return tensor::launch_pass(agreement ? tensor::kAgreement : tensor::kFirstPass, storing, s, plan, u, W, b0,
                                       v_sum, nullptr, partial, co, stream);
        });
}

cudaError_t digitcaps_tensor_pass(DigitCapsTensorPass pass, const float *u, const float *W, const float *b0,
                                  const float *rows, const float *gs_rows, float *partial,
                                  const DigitCapsTensorCoefficients &coefficients, const DigitCapsLayerShape &s,
                                  const DigitCapsTensorPlan &plan, cudaStream_t stream) {
    tensor::Coefficients co;
    co.c_out = coefficients.c_out;
    co.c_in = coefficients.c_in;
    co.G_next = coefficients.G_next;
    co.G_out = coefficients.G_out;
    const bool storing = pass == DigitCapsTensorPass::agreement_storing_c;
    const bool with_logits = pass == DigitCapsTensorPass::backward_with_logits;
    if (u == nullptr || W == nullptr || partial == nullptr || (pass != DigitCapsTensorPass::first && rows == nullptr) ||
        (storing && co.c_out == nullptr) ||
        (pass == DigitCapsTensorPass::backward && (co.c_in == nullptr || co.G_out == nullptr)) ||
        (with_logits && (gs_rows == nullptr || co.c_out == nullptr || co.G_out == nullptr)) || !tensor::runs(s, plan)) {
        return cudaErrorInvalidValue;
    }
    const tensor::PassMode mode = pass == DigitCapsTensorPass::first      ? tensor::kFirstPass
                                  : pass == DigitCapsTensorPass::backward ? tensor::kBackward
                                  : with_logits                           ? tensor::kBackwardWithLogits
                                                                          : tensor::kAgreement;
    return tensor::launch_pass(mode, storing, s, plan, u, W, b0, rows, with_logits ? gs_rows : nullptr, partial, co,
                               stream);
}

}  // namespace halcaps::cuda_reference

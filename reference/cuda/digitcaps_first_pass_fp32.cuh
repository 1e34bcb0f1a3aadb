// The first routing iteration of the tensor-core layer (version 3,
// digitcaps_tensor_cores.cu) without b0, as a float32 matrix product on the
// CUDA cores. Without b0 the first iteration's c is 1 / J for every (b, i, j),
// so its sums are
//   s[b, (j, e)] = 1/J sum_i sum_k u[b, i, k] W[i, j, e, k],
// one product of u as a [B, I*K] matrix and W as an [I*K, J*E] one. A block
// takes a 128 x 80 tile of it (batch rows x flattened (j, e) columns) over a
// chunk of input capsules and writes the chunk's partial sums, in the layout
// the squash kernel adds (digitcaps_shared.cuh).
//
// Why not the tensor cores here: under ncu the tensor-core first pass kept
// its tensor pipe a fifth busy, bound by latency at 2 warps a scheduler
// (bench/results/nvidia-h200-first-pass-tiles/, run 2). This kernel's thread
// holds an 8 x 5 tile of sums (40 independent FMAs a k) and reads its 8 u
// values and 5 W values of a k from shared memory (2 + 5 loads for 40 FMAs).
//
// Staging: a capsule's u rows and W columns are loaded into registers one
// capsule ahead and stored transposed into one of two shared buffers
// (k-major: A[k][row], B[k][column]), one barrier a capsule.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace halcaps::cuda_reference::first_pass_fp32 {

constexpr int kThreads = 256;
constexpr int kThreadRows = 16, kThreadCols = 16;  // the block's threads as 16 x 16
constexpr int kRowsEach = 8, kColsEach = 5;        // a thread's tile
constexpr int kTileRows = kThreadRows * kRowsEach;  // 128 batch rows a block
constexpr int kTileCols = kThreadCols * kColsEach;  // 80 (j, e) columns a block
constexpr int kMaxK = 16;
// Row strides of the k-major buffers, in floats: the u rows' stores (a warp
// writes 16 rows at 2 adjacent values of k) and the W columns' stores (8
// values of k at 4 columns) hit distinct banks, and a thread's 8 rows are
// two 16-byte loads.
constexpr int kAStride = kTileRows + 16;  // 144 = 16 (mod 32)
constexpr int kBStride = kTileCols + 20;  // 100 = 4 (mod 32)
constexpr int kUPerThread = kTileRows * kMaxK / kThreads;                           // 8
constexpr int kWPerThread = (kTileCols * kMaxK + kThreads - 1) / kThreads;         // 5

struct Args {
    int64_t B, I, chunk;
    int JE, K;
    float scale;  // 1 / J
};

// Shared memory a block (under 48 KB): two buffers of A [kMaxK][kAStride] and
// B [kMaxK][kBStride].
constexpr size_t kSmemBytes = sizeof(float) * 2 * kMaxK * (kAStride + kBStride);

__global__ void __launch_bounds__(kThreads) first_pass_kernel(const float *__restrict__ u,
                                                              const float *__restrict__ W,
                                                              float *__restrict__ partial, Args a) {
    extern __shared__ float4 smem_vec[];
    float *A_s = reinterpret_cast<float *>(smem_vec);  // [2][kMaxK][kAStride]
    float *B_s = A_s + 2 * kMaxK * kAStride;            // [2][kMaxK][kBStride]

    const int col_first = blockIdx.x * kTileCols;
    const int64_t row_first = int64_t(blockIdx.y) * kTileRows;
    const int64_t i_first = int64_t(blockIdx.z) * a.chunk;
    const int64_t i_end = min(a.I, i_first + a.chunk);
    const int K = a.K, JE = a.JE;
    const int tr = threadIdx.x / kThreadCols, tc = threadIdx.x % kThreadCols;

    // What this thread stages of a capsule: u values (row x / 2, k = x % 2,
    // x % 2 + 2, ...) and W values (flat index x, x + kThreads, ... of the
    // block's columns, k fastest), zeros past the batch, the columns or K.
    const int u_row = threadIdx.x / 2, u_k0 = threadIdx.x % 2;
    const bool u_row_valid = row_first + u_row < a.B;
    float u_regs[kUPerThread], w_regs[kWPerThread];
    auto load = [&](int64_t i) {
        const float *u_i = u + ((row_first + u_row) * a.I + i) * K;
#pragma unroll
        for (int n = 0; n < kUPerThread; n++) {
            const int k = u_k0 + 2 * n;
            u_regs[n] = u_row_valid && k < K ? u_i[k] : 0.0f;
        }
        const float *W_i = W + (i * JE + col_first) * K;  // the block's first column of W[i]
#pragma unroll
        for (int n = 0; n < kWPerThread; n++) {
            const int flat = threadIdx.x + n * kThreads, col = flat / K;
            w_regs[n] = flat < kTileCols * K && col_first + col < JE ? W_i[flat] : 0.0f;
        }
    };
    auto store = [&](int buffer) {
        float *A_b = A_s + buffer * kMaxK * kAStride;
        float *B_b = B_s + buffer * kMaxK * kBStride;
#pragma unroll
        for (int n = 0; n < kUPerThread; n++) {
            const int k = u_k0 + 2 * n;
            if (k < K) A_b[k * kAStride + u_row] = u_regs[n];
        }
#pragma unroll
        for (int n = 0; n < kWPerThread; n++) {
            const int flat = threadIdx.x + n * kThreads;
            if (flat < kTileCols * K) B_b[(flat % K) * kBStride + flat / K] = w_regs[n];
        }
    };

    float sums[kRowsEach][kColsEach] = {};
    if (i_first < i_end) load(i_first);
    for (int64_t i = i_first; i < i_end; i++) {
        const int buffer = int((i - i_first) & 1);
        store(buffer);
        __syncthreads();  // the buffer is complete; the other one is free once every thread is past here
        if (i + 1 < i_end) load(i + 1);
        const float *A_b = A_s + buffer * kMaxK * kAStride + tr * kRowsEach;
        const float *B_b = B_s + buffer * kMaxK * kBStride + tc;
#pragma unroll 4
        for (int k = 0; k < K; k++) {
            const float4 a0 = *reinterpret_cast<const float4 *>(A_b + k * kAStride);
            const float4 a1 = *reinterpret_cast<const float4 *>(A_b + k * kAStride + 4);
            const float rows[kRowsEach] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            float cols[kColsEach];
#pragma unroll
            for (int c = 0; c < kColsEach; c++) cols[c] = B_b[k * kBStride + c * kThreadCols];
#pragma unroll
            for (int r = 0; r < kRowsEach; r++) {
#pragma unroll
                for (int c = 0; c < kColsEach; c++) sums[r][c] = fmaf(rows[r], cols[c], sums[r][c]);
            }
        }
    }

    // The chunk's partial sums: partial[chunk][b][(j, e)].
#pragma unroll
    for (int r = 0; r < kRowsEach; r++) {
        const int64_t b = row_first + tr * kRowsEach + r;
        if (b >= a.B) break;
        float *out = partial + (int64_t(blockIdx.z) * a.B + b) * JE;
#pragma unroll
        for (int c = 0; c < kColsEach; c++) {
            const int col = col_first + tc + c * kThreadCols;
            if (col < JE) out[col] = a.scale * sums[r][c];
        }
    }
}

// Enqueues the first pass over `chunks` chunks of `chunk` input capsules.
inline cudaError_t launch(const float *u, const float *W, float *partial, int64_t B, int64_t I, int J, int E, int K,
                          int64_t chunk, int64_t chunks, cudaStream_t stream) {
    if (K > kMaxK) return cudaErrorInvalidValue;
    const Args a{B, I, chunk, J * E, K, 1.0f / float(J)};
    const dim3 grid(unsigned((a.JE + kTileCols - 1) / kTileCols), unsigned((B + kTileRows - 1) / kTileRows),
                    unsigned(chunks));
    static_assert(kSmemBytes <= 48 * 1024, "no opt-in to more shared memory");
    first_pass_kernel<<<grid, kThreads, kSmemBytes, stream>>>(u, W, partial, a);
    return cudaGetLastError();
}

}  // namespace halcaps::cuda_reference::first_pass_fp32

// Hand-written CUDA kernels for capsule prediction; versions are listed in
// predict_cuda.h. Shapes: u [B, I, K], W [I, J, E, K],
// u_hat and g [B, I, J, E]. Throughout, JE = J*E: the (j, e) pair flattened,
// which is contiguous both in u_hat/g rows and in W[i] (as JE rows of K).
#include "predict_cuda.h"

#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "device_limits.h"
#include "pointer_alignment.h"
#include "predict_tensor_cores.h"
#include "smem_opt_in.h"

namespace halcaps::cuda_reference {
namespace {

using i64 = int64_t;

bool valid_shape(const PredictShape &s) {
    return s.batch > 0 && s.in_caps > 0 && s.out_caps > 0 && s.out_dim > 0 && s.in_dim > 0;
}

__device__ __forceinline__ i64 min64(i64 a, i64 b) { return a < b ? a : b; }

// ---------------------------------------------------------------------------
// Version 1: the seed blog's kernels (jostosh/capsnet, ops/capsuleprediction*.cu.cc),
// re-typed. One thread per output element over a grid-stride loop; each thread
// decomposes its flat index and walks the reduction straight from global
// memory through the read-only cache (the blog's ldg). Indices are 64-bit here
// (the blog's CUDA_1D_KERNEL_LOOP used int).
// ---------------------------------------------------------------------------

// TensorFlow 1.x's GetCudaLaunchConfig(work_element_count, d):
//   physical_thread_count = min(SMs * maxThreadsPerSM, work_element_count)
//   thread_per_block      = min(1024, maxThreadsPerBlock)
//   block_count           = min(DivUp(physical_thread_count, thread_per_block), SMs)
// Note the last line caps the grid at one block per SM (132 blocks of 1024
// on an H100/H200, so at most half the SM's thread slots are used); the
// grid-stride loop covers the rest.
struct BlogLaunch {
    int blocks, threads;
};

cudaError_t blog_launch_config(i64 work_elements, BlogLaunch *config) {
    DeviceLimits d;
    cudaError_t err = device_limits(&d);
    if (err != cudaSuccess) return err;
    const i64 physical = std::min<i64>(i64(d.sms) * d.threads_per_sm, work_elements);
    const int threads = std::min(1024, d.threads_per_block);
    const i64 blocks = std::min<i64>((physical + threads - 1) / threads, d.sms);
    config->blocks = static_cast<int>(std::max<i64>(blocks, 1));
    config->threads = threads;
    return cudaSuccess;
}

__global__ void blog_forward_kernel(const float *__restrict__ u, const float *__restrict__ W, float *__restrict__ u_hat,
                                    i64 I, i64 J, i64 E, i64 K, i64 total) {
    for (i64 n = i64(blockIdx.x) * blockDim.x + threadIdx.x; n < total; n += i64(blockDim.x) * gridDim.x) {
        // n = ((b*I + i)*J + j)*E + e
        const i64 e = n % E;
        const i64 j = (n / E) % J;
        const i64 i = (n / (E * J)) % I;
        const i64 b = n / (E * J * I);
        const float *u_row = u + (b * I + i) * K;
        const float *w_row = W + ((i * J + j) * E + e) * K;
        float sum = 0.0f;
        for (i64 k = 0; k < K; ++k) sum += __ldg(u_row + k) * __ldg(w_row + k);
        u_hat[n] = sum;
    }
}

__global__ void blog_grad_u_kernel(const float *__restrict__ g, const float *__restrict__ W, float *__restrict__ grad_u,
                                   i64 I, i64 JE, i64 K, i64 total) {
    for (i64 n = i64(blockIdx.x) * blockDim.x + threadIdx.x; n < total; n += i64(blockDim.x) * gridDim.x) {
        // n = (b*I + i)*K + k
        const i64 k = n % K;
        const i64 bi = n / K;  // b*I + i
        const i64 i = bi % I;
        const float *g_row = g + bi * JE;
        const float *w_col = W + i * JE * K + k;  // W[i, je, k] at w_col[je*K]
        float sum = 0.0f;
        for (i64 je = 0; je < JE; ++je) sum += __ldg(g_row + je) * __ldg(w_col + je * K);
        grad_u[n] = sum;
    }
}

__global__ void blog_grad_W_kernel(const float *__restrict__ g, const float *__restrict__ u, float *__restrict__ grad_W,
                                   i64 B, i64 I, i64 JE, i64 K, i64 total) {
    for (i64 n = i64(blockIdx.x) * blockDim.x + threadIdx.x; n < total; n += i64(blockDim.x) * gridDim.x) {
        // n = (i*JE + je)*K + k
        const i64 k = n % K;
        const i64 ije = n / K;  // i*JE + je
        const i64 je = ije % JE;
        const i64 i = ije / JE;
        const float *g_col = g + i * JE + je;  // g[b, i, je] at g_col[b*I*JE]
        const float *u_col = u + i * K + k;    // u[b, i, k]  at u_col[b*I*K]
        float sum = 0.0f;
        for (i64 b = 0; b < B; ++b) sum += __ldg(g_col + b * I * JE) * __ldg(u_col + b * I * K);
        grad_W[n] = sum;
    }
}

cudaError_t forward_v1(const float *u, const float *W, float *u_hat, const PredictShape &s, cudaStream_t stream) {
    const i64 total = s.batch * s.in_caps * s.out_caps * s.out_dim;
    BlogLaunch c;
    cudaError_t err = blog_launch_config(total, &c);
    if (err != cudaSuccess) return err;
    blog_forward_kernel<<<c.blocks, c.threads, 0, stream>>>(u, W, u_hat, s.in_caps, s.out_caps, s.out_dim, s.in_dim,
                                                            total);
    return cudaGetLastError();
}

cudaError_t grad_u_v1(const float *g, const float *W, float *grad_u, const PredictShape &s, cudaStream_t stream) {
    const i64 total = s.batch * s.in_caps * s.in_dim;
    BlogLaunch c;
    cudaError_t err = blog_launch_config(total, &c);
    if (err != cudaSuccess) return err;
    blog_grad_u_kernel<<<c.blocks, c.threads, 0, stream>>>(g, W, grad_u, s.in_caps, s.out_caps * s.out_dim, s.in_dim,
                                                           total);
    return cudaGetLastError();
}

cudaError_t grad_W_v1(const float *g, const float *u, float *grad_W, const PredictShape &s, cudaStream_t stream) {
    const i64 total = s.in_caps * s.out_caps * s.out_dim * s.in_dim;
    BlogLaunch c;
    cudaError_t err = blog_launch_config(total, &c);
    if (err != cudaSuccess) return err;
    blog_grad_W_kernel<<<c.blocks, c.threads, 0, stream>>>(g, u, grad_W, s.batch, s.in_caps, s.out_caps * s.out_dim,
                                                           s.in_dim, total);
    return cudaGetLastError();
}

// ---------------------------------------------------------------------------
// Versions 2 and 3: common pieces.
//
// Blocks have 256 threads. K is padded to KM in {4, 8, 16} (a template
// parameter): W rows, u rows and accumulators are KM-wide arrays whose
// entries k >= K hold zeros, so the arithmetic is branch-free and unrolled
// and only loads and stores look at K. Shapes with K > 16 (or extents past
// the int/grid ranges checked in tuned_supported) run version 1's kernels.
// JE is split into column groups of V (or VEC) consecutive je, so that a
// thread moves 16, 8 or 4 contiguous bytes; V > 1 needs JE % V == 0 and the
// pointers walked that way aligned to 4*V bytes, else V = 1.
// ---------------------------------------------------------------------------

constexpr int kThreads = 256;
constexpr int kMaxKm = 16;

__host__ __device__ constexpr int imin(int a, int b) { return a < b ? a : b; }

int padded_k(i64 K) { return K <= 4 ? 4 : K <= 8 ? 8 : 16; }

// Largest V in {4, 2, 1} with JE % V == 0, V*km <= max_regs, and every
// pointer in `ptrs` aligned to V floats.
int pick_v(i64 JE, int km, int max_regs, std::initializer_list<const void *> ptrs) {
    for (int V : {4, 2}) {
        if (JE % V != 0 || V * km > max_regs) continue;
        bool ok = true;
        for (const void *p : ptrs) ok = ok && aligned_to(p, 4 * V);
        if (ok) return V;
    }
    return 1;
}

// Column layout of a block: TX column groups (of V je) by TY rows of
// threads; thread t has x = t % TX, y = t / TX, and the threads with
// y >= TY (fewer than TX of them) own no column. More than 256 groups are
// walked in chunks of TX.
struct Layout {
    int groups, TX, TY;
};

Layout make_layout(i64 JE, int V) {
    Layout l;
    l.groups = static_cast<int>(JE / V);
    l.TX = std::min(l.groups, kThreads);
    l.TY = kThreads / l.TX;
    return l;
}

// Rows row0 .. row0+V-1 of a row-major [*, K] matrix into w[V][KM], zero
// padded. `vec`: K == KM and base is 16-byte aligned.
template <int KM, int V>
__device__ __forceinline__ void load_rows(float (&w)[V][KM], const float *__restrict__ base, i64 row0, int K,
                                          bool vec) {
    if (vec) {
        const float4 *p = reinterpret_cast<const float4 *>(base + row0 * KM);
#pragma unroll
        for (int v = 0; v < V; ++v)
#pragma unroll
            for (int q = 0; q < KM / 4; ++q) {
                const float4 t = __ldg(p + v * (KM / 4) + q);
                w[v][4 * q] = t.x, w[v][4 * q + 1] = t.y, w[v][4 * q + 2] = t.z, w[v][4 * q + 3] = t.w;
            }
    } else {
#pragma unroll
        for (int v = 0; v < V; ++v)
#pragma unroll
            for (int k = 0; k < KM; ++k) w[v][k] = k < K ? __ldg(base + (row0 + v) * K + k) : 0.0f;
    }
}

// Stages u[b0 + r, i, :] for r < nrows into u_s[r][KM] (zero padded), all
// threads of the block cooperating; the caller synchronises around it.
template <int KM>
__device__ __forceinline__ void stage_u(float *__restrict__ u_s, const float *__restrict__ u, i64 b0, int nrows, i64 I,
                                        i64 i, int K, bool vec) {
    if (vec) {
        for (int n = threadIdx.x; n < nrows * (KM / 4); n += blockDim.x) {
            const int r = n / (KM / 4), q = n % (KM / 4);
            reinterpret_cast<float4 *>(u_s)[n] =
                __ldg(reinterpret_cast<const float4 *>(u + ((b0 + r) * I + i) * KM) + q);
        }
    } else {
        for (int n = threadIdx.x; n < nrows * KM; n += blockDim.x) {
            const int r = n / KM, k = n % KM;
            u_s[n] = k < K ? __ldg(u + ((b0 + r) * I + i) * K + k) : 0.0f;
        }
    }
}

// KM floats of a shared-memory row (16-byte aligned) into registers.
template <int KM>
__device__ __forceinline__ void load_smem_row(float (&r)[KM], const float *row) {
#pragma unroll
    for (int q = 0; q < KM / 4; ++q) {
        const float4 t = reinterpret_cast<const float4 *>(row)[q];
        r[4 * q] = t.x, r[4 * q + 1] = t.y, r[4 * q + 2] = t.z, r[4 * q + 3] = t.w;
    }
}

// V outputs of one batch row: acc[v] = sum_k w[v][k] * ur[k], in k order.
template <int V, int KM>
__device__ __forceinline__ void row_outputs(float (&acc)[V], const float (&w)[V][KM], const float (&ur)[KM]) {
#pragma unroll
    for (int v = 0; v < V; ++v) {
        acc[v] = 0.0f;
#pragma unroll
        for (int k = 0; k < KM; ++k) acc[v] = fmaf(w[v][k], ur[k], acc[v]);
    }
}

// V consecutive floats of shared memory (aligned to 4*V bytes).
template <int V>
__device__ __forceinline__ void load_smem_vec(float (&out)[V], const float *p) {
    if constexpr (V == 4) {
        const float4 t = *reinterpret_cast<const float4 *>(p);
        out[0] = t.x, out[1] = t.y, out[2] = t.z, out[3] = t.w;
    } else if constexpr (V == 2) {
        const float2 t = *reinterpret_cast<const float2 *>(p);
        out[0] = t.x, out[1] = t.y;
    } else {
        out[0] = p[0];
    }
}

// Stores V consecutive floats (p aligned to 4*V bytes) as evict-first
// (st.global.cs): u_hat is written once and larger than L2.
template <int V>
__device__ __forceinline__ void store_vec_streaming(float *p, const float (&in)[V]) {
    if constexpr (V == 4) {
        __stcs(reinterpret_cast<float4 *>(p), make_float4(in[0], in[1], in[2], in[3]));
    } else if constexpr (V == 2) {
        __stcs(reinterpret_cast<float2 *>(p), make_float2(in[0], in[1]));
    } else {
        __stcs(p, in[0]);
    }
}

__device__ __forceinline__ void add4(float4 &s, const float4 &v) { s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w; }

// Writes (or, when `accumulate`, adds to) dst[0 .. min(4, K - k0)), where
// dst = row + k0 of a [*, K] row; `vec`: K == KM and the base 16-byte aligned.
__device__ __forceinline__ void store_quad(float *dst, float4 s, int k0, int K, bool vec, bool accumulate) {
    if (vec) {
        float4 *d4 = reinterpret_cast<float4 *>(dst);
        if (accumulate) add4(s, *d4);
        *d4 = s;
    } else {
        const float sv[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
        for (int c = 0; c < 4; ++c)
            if (k0 + c < K) dst[c] = accumulate ? dst[c] + sv[c] : sv[c];
    }
}

// ---------------------------------------------------------------------------
// Version 2 forward.
//
// Bound: the op writes B*I*JE floats (94 MB at MNIST b128) and reads only
// u (4.7 MB) and W (5.9 MB): a store-bandwidth kernel whose floor is about
// 25 us on an H200 (a memset of u_hat takes 25 us there). Design:
//  - a block owns one input capsule i and a tile of BT = 128 batch rows;
//  - W[i, je0:je0+V, :] goes into registers once per block (its loads are
//    in flight while u is staged) and serves all the block's rows;
//  - the block's u rows (BT x K floats, I*K apart in memory) are staged in
//    shared memory by one cooperative load; each row is then a broadcast
//    16-byte shared read;
//  - each thread stores V consecutive outputs per row; a warp stores 32*V*4
//    contiguous bytes of a u_hat row (two segments where it straddles two
//    rows), with evict-first stores.
// V*KM <= 16 (V = 2 at K = 8) measured best: more blocks per SM beat wider
// stores, and evict-first stores gained ~7%. Measured on an H200
// (median of 30): MNIST b128 33-35 us (memset of u_hat 25 us),
// b512 128 us (memset 87), wide 66 us (memset 34; at K = 16 the FMAs weigh).
// ---------------------------------------------------------------------------
constexpr int kForwardRows = 128;

template <int KM, int V>
__global__ void __launch_bounds__(kThreads)
    forward_v2_kernel(const float *__restrict__ u, const float *__restrict__ W, float *__restrict__ u_hat, i64 B, i64 I,
                      int JE, int K, int BT, int TX, int TY, bool w_vec, bool u_vec) {
    extern __shared__ float4 smem_f4[];
    float *u_s = reinterpret_cast<float *>(smem_f4);  // [BT][KM]
    const i64 i = blockIdx.x;
    const int x = threadIdx.x % TX, y = threadIdx.x / TX;
    const int groups = JE / V;
    const i64 ntiles = (B + BT - 1) / BT;
    const i64 out_step = i64(TY) * I * JE;  // from row b to row b + TY
    for (int c0 = 0; c0 < groups; c0 += TX) {
        const int cg = c0 + x;
        const bool col_ok = y < TY && cg < groups;
        const int je0 = col_ok ? cg * V : 0;
        float w[V][KM];
#pragma unroll
        for (int v = 0; v < V; ++v)
#pragma unroll
            for (int k = 0; k < KM; ++k) w[v][k] = 0.0f;
        if (col_ok) load_rows<KM, V>(w, W, i * JE + je0, K, w_vec);
        for (i64 tile = blockIdx.y; tile < ntiles; tile += gridDim.y) {
            const i64 b0 = tile * BT;
            const int nrows = static_cast<int>(min64(BT, B - b0));
            __syncthreads();  // the previous tile's readers are done with u_s
            stage_u<KM>(u_s, u, b0, nrows, I, i, K, u_vec);
            __syncthreads();
            if (!col_ok) continue;
            float *out = u_hat + ((b0 + y) * I + i) * JE + je0;
            for (int r = y; r < nrows; r += TY, out += out_step) {
                float ur[KM];
                load_smem_row<KM>(ur, u_s + r * KM);
                float acc[V];
                row_outputs<V, KM>(acc, w, ur);
                store_vec_streaming<V>(out, acc);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Version 3 forward ("staged"): version 2's W-in-registers walk with the
// grid, the staging and the stores chosen for the write bandwidth
// (bench/studies/predict_store_order.cu and docs/history.md: nvidia-h200-store-order/).
//  - A block owns N consecutive input capsules and the batch rows y, y + Y,
//    y + 2Y, ... (y = blockIdx.y): Y is chosen so that the whole grid is
//    resident at once (one wave, no tail of late blocks), and at any moment
//    the blocks write neighbouring batch rows, long contiguous runs of u_hat.
//  - The block's u rows (rows x N x K floats) are copied to shared memory by
//    cp.async in two groups, the first kStagedFirstRows rows alone, so that the
//    first stores need not wait for the whole tile.
//  - Thread (c, q) keeps W[i0 + c, q*V .. q*V + V, :] in registers and
//    stores V outputs a row as one evict-first vector store (st.global.cs).
//    With plain stores the same kernel took 45.0 us instead of 31.6 at MNIST
//    b128 and 155.4 instead of 105.5 at b512 on an H200 (run 3 there): u_hat
//    is larger than L2, and evict-first lines leave L2 in the order they
//    were written.
// Fast path (pick_staged): K in {4, 8, 16}, J*E % V == 0, u and W 16-byte
// aligned, u_hat aligned to V floats; other shapes run version 2.
// Measured on an H200 (run 5 there, `halcaps bench --device cuda
// --op predict --repeats 30 --seed 2212`): MNIST b128 29.7 us (82.6% of the
// copy bandwidth over the bytes floor; version 2 33.8), b512 99.9 (94.1%;
// 124.9), wide b32 65.0 (73.9%; 64.0).
// ---------------------------------------------------------------------------
constexpr int kStagedFirstRows = 8;
constexpr int kStagedMaxThreads = 512;

template <int K, int V>
__global__ void __launch_bounds__(kStagedMaxThreads)
    forward_staged_kernel(const float *__restrict__ u, const float *__restrict__ W, float *__restrict__ u_hat, int B,
                          int I, int JE, int N) {
    extern __shared__ float4 u_stage[];  // [row][capsule][K / 4]
    constexpr int Q = K / 4;             // float4s in a u row
    const int per_capsule = JE / V;
    const int i0 = blockIdx.x * N, c = threadIdx.x / per_capsule, q = threadIdx.x % per_capsule;
    const int capsules = min(N, I - i0);
    const int Y = gridDim.y, y = blockIdx.y;
    const int rows = (B - y + Y - 1) / Y;
    const int first_rows = min(rows, kStagedFirstRows);
    // Row r of the block is batch row y + r*Y; its capsules are contiguous in u.
    auto stage = [&](int r_begin, int r_end) {
        const int per_row = capsules * Q;
        for (int n = r_begin * per_row + threadIdx.x; n < r_end * per_row; n += blockDim.x) {
            const int r = n / per_row, rest = n % per_row;
            const float4 *src =
                reinterpret_cast<const float4 *>(u + (i64(y) + i64(r) * Y) * I * K + i64(i0) * K) + rest;
            __pipeline_memcpy_async(u_stage + r * N * Q + rest, src, sizeof(float4));
        }
        __pipeline_commit();
    };
    stage(0, first_rows);
    stage(first_rows, rows);  // possibly empty
    const bool owns = c < capsules;
    const i64 i = i0 + (owns ? c : 0);
    float w[V][K];
    load_rows<K, V>(w, W, i * JE + i64(q) * V, K, true);
    const i64 row_step = i64(Y) * I * JE;  // u_hat from batch row b to b + Y
    float *out = u_hat + (i64(y) * I + i) * JE + i64(q) * V;
    auto compute_rows = [&](int r_begin, int r_end) {
        if (!owns) return;
#pragma unroll 4
        for (int r = r_begin; r < r_end; ++r) {
            float ur[K];
            load_smem_row<K>(ur, reinterpret_cast<const float *>(u_stage + (r * N + c) * Q));
            float acc[V];
            row_outputs<V, K>(acc, w, ur);
            store_vec_streaming<V>(out + r * row_step, acc);
        }
    };
    __pipeline_wait_prior(1);  // the first rows have landed
    __syncthreads();
    compute_rows(0, first_rows);
    __pipeline_wait_prior(0);
    __syncthreads();
    compute_rows(first_rows, rows);
}

// ---------------------------------------------------------------------------
// Version 2 grad_W: grad_W[i, je, k] = sum_b g[b, i, je] * u[b, i, k].
//
// A block owns one input capsule i and walks all B rows; thread (x, y) owns
// V consecutive je (column group x) and accumulates V x KM sums in
// registers over rows y, y + TY, ...; u rows come from shared memory (a
// broadcast). Keeping HBM busy needs tens of KB in flight per SM, more than
// registers allow next to the accumulators, so g goes through a per-thread
// ring in shared memory filled by cp.async: each thread copies exactly the
// V-float vectors it will use, D-1 steps of R rows ahead, and waits only for
// its own copies (no barrier for the ring). At the end the TY partial sums
// of each column are added through shared memory and stored.
// Measured on an H200: MNIST b128 48.5 us, b512 122 us, wide
// 82 us (the tiled kernel below, without its grad_u part, was 47 / 144 / 108).
// ---------------------------------------------------------------------------
constexpr int kRingStages = 3;  // D: the ring holds D steps, D-1 in flight

// Rows per thread per step: R*V <= 16 floats keeps the ring within 48 KB.
template <int KM, int V>
__host__ __device__ constexpr int ring_rows() {
    return imin(32 / KM, 16 / V);
}

struct GradWArgs {
    i64 B, I;
    int JE, K;
    int RT;  // rows of u staged at a time
    int TX, TY;
    bool u_vec, gW_vec;  // K == KM and the pointer 16-byte aligned
};

template <int KM, int V>
struct GradWSmem {  // in float4 units: u_s, the grad_W reduction, the ring
    static constexpr int Q = KM / 4, R = ring_rows<KM, V>();
    __host__ __device__ static int u_f4(int RT) { return RT * Q; }
    __host__ __device__ static int red_f4(int TX, int TY) { return TY * TX * V * Q; }
    __host__ __device__ static int ring_f4() { return kRingStages * R * kThreads * V / 4; }
    static size_t bytes(int RT, int TX, int TY) {
        return size_t(u_f4(RT) + red_f4(TX, TY) + ring_f4()) * sizeof(float4);
    }
};

template <int KM, int V>
__global__ void __launch_bounds__(kThreads) grad_W_v2_kernel(const float *__restrict__ g, const float *__restrict__ u,
                                                             float *__restrict__ grad_W, GradWArgs a) {
    using Smem = GradWSmem<KM, V>;
    constexpr int Q = KM / 4, R = Smem::R, D = kRingStages;
    extern __shared__ float4 smem_f4[];
    float *const u_s = reinterpret_cast<float *>(smem_f4);                            // [RT][KM]
    float4 *const red_s = smem_f4 + Smem::u_f4(a.RT);                                 // [TY][TX][V][Q]
    float *const ring = reinterpret_cast<float *>(red_s + Smem::red_f4(a.TX, a.TY));  // [D][R][kThreads][V]

    const int t = threadIdx.x;
    const int TX = a.TX, TY = a.TY, SR = TY * R;
    const int x = t % TX, y = t / TX;
    const i64 i = blockIdx.x, I = a.I, B = a.B;
    const int JE = a.JE, K = a.K;
    const int groups = JE / V;

    for (int c0 = 0; c0 < groups; c0 += TX) {
        const int cg = c0 + x;
        const bool col_ok = y < TY && cg < groups;
        const int je0 = col_ok ? cg * V : 0;
        const int ncols = min(TX, groups - c0);
        const float *g_col = g + i * JE + je0;  // g[0, i, je0]

        float acc[V][KM];
#pragma unroll
        for (int v = 0; v < V; ++v)
#pragma unroll
            for (int k = 0; k < KM; ++k) acc[v][k] = 0.0f;

        for (i64 tb = 0; tb < B; tb += a.RT) {
            const int nrows = static_cast<int>(min64(a.RT, B - tb));
            const int nsteps = (nrows + SR - 1) / SR;
            __syncthreads();  // the previous tile's readers are done with u_s
            stage_u<KM>(u_s, u, tb, nrows, I, i, K, a.u_vec);
            // Copies step s's g vectors into ring slot s % D; always commits
            // a group (maybe empty) so the group count stays uniform.
            auto issue = [&](int s) {
                if (col_ok && s < nsteps) {
                    float *slot = ring + (s % D) * R * kThreads * V + t * V;
                    for (int rr = 0; rr < R; ++rr) {
                        const int r = s * SR + rr * TY + y;
                        if (r < nrows)
                            __pipeline_memcpy_async(slot + rr * kThreads * V, g_col + (tb + r) * I * JE,
                                                    V * sizeof(float));
                    }
                }
                __pipeline_commit();
            };
            for (int d = 0; d < D - 1; ++d) issue(d);
            __syncthreads();  // u_s is staged
            for (int s = 0; s < nsteps; ++s) {
                issue(s + D - 1);
                __pipeline_wait_prior(D - 1);  // this thread's copies of step s have landed
                const float *slot = ring + (s % D) * R * kThreads * V + t * V;
#pragma unroll
                for (int rr = 0; rr < R; ++rr) {
                    const int r = s * SR + rr * TY + y;
                    if (!(col_ok && r < nrows)) continue;
                    float gv[V], ur[KM];
                    load_smem_vec<V>(gv, slot + rr * kThreads * V);
                    load_smem_row<KM>(ur, u_s + r * KM);
#pragma unroll
                    for (int v = 0; v < V; ++v)
#pragma unroll
                        for (int k = 0; k < KM; ++k) acc[v][k] = fmaf(gv[v], ur[k], acc[v][k]);
                }
            }
            __pipeline_wait_prior(0);  // only empty groups remain: the ring is idle
        }

        // Sum the TY row-threads' partials of each column group and store.
        __syncthreads();  // red_s is free (the previous chunk's readers are done)
        if (col_ok) {
#pragma unroll
            for (int v = 0; v < V; ++v)
#pragma unroll
                for (int q = 0; q < Q; ++q)
                    red_s[((y * TX + x) * V + v) * Q + q] =
                        make_float4(acc[v][4 * q], acc[v][4 * q + 1], acc[v][4 * q + 2], acc[v][4 * q + 3]);
        }
        __syncthreads();
        // o = (xx*V + v)*Q + q: consecutive threads write consecutive 16
        // bytes of grad_W (when K == KM).
        for (int o = t; o < ncols * V * Q; o += kThreads) {
            float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
            for (int yy = 0; yy < TY; ++yy) add4(sum, red_s[yy * TX * V * Q + o]);
            const i64 je = i64(c0) * V + o / Q;
            const int q = o % Q;
            store_quad(grad_W + (i * JE + je) * K + 4 * q, sum, 4 * q, K, a.gW_vec, false);
        }
    }
}

// ---------------------------------------------------------------------------
// Version 2 grad_u and version 3 (fused): the tiled kernel.
//
// The two gradients want g in different orders: grad_W[i, je, :] reduces
// over b (a thread owning je walks rows), grad_u[b, i, :] reduces over je (a
// thread owning row b walks je). A "thread owns je" grad_u would sum K
// partials per thread across the threads of a row, K times more data than
// the g it read. So g goes through shared memory in tiles of 32 rows x JC
// columns, and each part reads a tile in its own order:
//  - grad_u: lane = row of the tile, warp = one of 8 slices of the tile's
//    columns; a lane walks its row's slice (conflict-free: the tile's row
//    stride is padded so 32 rows hit distinct banks) against W[i, je, :]
//    from shared memory (the same je for all lanes: a broadcast); the 8
//    slice partials of each (row, k) are then summed and stored.
//  - grad_W (fused only): thread (xw, yw) owns VW consecutive je and
//    accumulates VW x KM sums over rows yw, yw + TYW, ... of the tiles, with
//    u[b, i, :] from the staged u rows (a broadcast). After the last tile of
//    an (i, chunk) the TYW partials of each column are summed through a
//    small shared buffer, one je of the VW per pass, and stored.
//
// Work items: for the fused kernel an input capsule i (all B rows, so
// grad_W[i] is complete in one block); for grad_u alone (i, group of 4
// tiles). Each item is walked as (column chunk, tile) steps. The kernel is
// persistent: a grid of (blocks per SM x SMs) blocks takes items
// blockIdx.x, + gridDim.x, ..., and one cp.async pipeline of NS stages runs
// along a block's whole sequence of steps, so the next NS-1 tiles are in
// flight across item and chunk boundaries. W[i, chunk] is copied once per
// (item, chunk) into one of NS rotating buffers: segment s uses buffer
// s % NS, last used by segment s - NS, which ended at least NS steps
// earlier, before the barrier that precedes the copy.
// Columns come in chunks of JC <= 256 (128 at K = 16) to bound the stage
// size; for JE > JC the grad_u of later chunks is added to what the first
// stored (the same block, the same thread).
//
// Measured on an H200 (median of 30): fused MNIST b128 67 us,
// b512 215 us, wide 178 us; grad_u alone 44 / 135 / 96 us. The bound is
// not HBM (43-48% of the copy bandwidth) but shared-memory traffic and
// instruction issue at 2 blocks (16 warps) per SM: per g element the two
// parts do 2*K FMAs plus ~12 bytes of shared-memory traffic. The fused
// target of 27-40 us at MNIST b128 is not reached; a non-persistent grid
// measured within +-6% of this one.
// ---------------------------------------------------------------------------
constexpr int kTileRows = 32;  // one row per lane in the grad_u part
constexpr int kTileStages = 3;
constexpr int kGradUTilesPerItem = 4;
constexpr int kWarps = kThreads / 32;

struct TiledArgs {
    i64 B, I;
    int JE, K;
    int JC;                             // columns per chunk (a multiple of VEC)
    int LDG;                            // row stride of a staged g tile, in floats
    int TXW, TYW;                       // grad_W layout: column groups x row-threads
    int nchunks;                        // ceil(JE / JC)
    int tiles;                          // tiles per (item, chunk)
    i64 groups;                         // items per input capsule (tile groups)
    i64 items;                          // I * groups
    bool w_vec, u_vec, gW_vec, gu_vec;  // K == KM and the pointer 16-byte aligned
};

// je per grad_W thread: VEC, but 2 at K = 16 (64 accumulators at most).
template <int KM, int VEC>
__host__ __device__ constexpr int grad_w_vec() {
    return KM == 16 && VEC == 4 ? 2 : VEC;
}

template <int KM, bool GW>
struct TiledSmem {  // in floats; every part a multiple of 4
    // A stage: g tile [32][LDG], then u rows [32][KM] (fused).
    __host__ __device__ static int u_off(int LDG) { return kTileRows * LDG; }
    __host__ __device__ static int stage(int LDG) { return u_off(LDG) + (GW ? kTileRows * KM : 0); }
    // After the NS stages: NS W slices [JC][KM], then a buffer of
    // kThreads*KM floats for the grad_u partials [kWarps][32][KM] and the
    // grad_W reduction [TYW][TXW][KM].
    __host__ __device__ static int w_off(int NS, int LDG) { return NS * stage(LDG); }
    __host__ __device__ static int buf_off(int NS, int LDG, int JC) { return w_off(NS, LDG) + NS * JC * KM; }
    static size_t bytes(int NS, int LDG, int JC) {
        return size_t(buf_off(NS, LDG, JC) + kThreads * KM) * sizeof(float);
    }
};

// A position in a block's sequence of steps. The item's input capsule and
// first row are kept so that a step needs no 64-bit division.
struct Cursor {
    i64 item, i, tb0;  // item, its input capsule, its first row
    int c, m;          // column chunk, tile within the (item, chunk)
    int seg;           // (item, chunk) segments begun by this block
    __device__ void start(i64 item_, const TiledArgs &a) {
        item = item_, i = item_ / a.groups, tb0 = (item_ % a.groups) * a.tiles * kTileRows;
        c = 0, m = 0;
    }
    __device__ void advance(const TiledArgs &a) {
        if (++m == a.tiles) {
            m = 0, ++seg;
            if (++c == a.nchunks) start(item + gridDim.x, a);
        }
    }
};

template <int KM, int VEC, bool GW>
__global__ void __launch_bounds__(kThreads, 2)
    backward_tiled_kernel(const float *__restrict__ g, const float *__restrict__ u, const float *__restrict__ W,
                          float *__restrict__ grad_u, float *__restrict__ grad_W, TiledArgs a) {
    using Smem = TiledSmem<KM, GW>;
    constexpr int Q = KM / 4, RT = kTileRows, NS = kTileStages;
    constexpr int VW = grad_w_vec<KM, VEC>();
    extern __shared__ float4 smem_f4[];
    float *const smem = reinterpret_cast<float *>(smem_f4);
    const int LDG = a.LDG, stage_size = Smem::stage(LDG);
    float *const w_slices = smem + Smem::w_off(NS, LDG);
    float4 *const buf = reinterpret_cast<float4 *>(smem + Smem::buf_off(NS, LDG, a.JC));

    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    const i64 I = a.I, B = a.B;
    const int JE = a.JE, K = a.K;
    const int xw = t % a.TXW, yw = t / a.TXW;

    // Where a step's data lives. Tiles past B (in the last group of
    // grad_u alone) have nrows = 0: nothing is copied, computed or stored.
    struct Where {
        i64 i, tb;
        int nrows, c0, jc;
    };
    auto where = [&](const Cursor &s) {
        Where w;
        w.i = s.i;
        w.tb = s.tb0 + i64(s.m) * RT;
        w.nrows = static_cast<int>(B - w.tb < RT ? (B - w.tb > 0 ? B - w.tb : 0) : RT);
        w.c0 = s.c * a.JC;
        w.jc = min(a.JC, JE - w.c0);
        return w;
    };

    // Staging layout of a tile of full width JC: thread t copies column
    // group t % ngroups of rows t / ngroups + k * rstep (threads past
    // rstep * ngroups copy nothing). Recomputed only for a narrower last chunk.
    struct Staging {
        int col, row0, rstep;
    };
    auto staging = [&](int jc) {
        const int ngroups = jc / VEC;
        Staging st;
        st.rstep = kThreads / ngroups;
        st.col = t % ngroups;
        st.row0 = t / ngroups < st.rstep ? t / ngroups : RT;
        return st;
    };
    const Staging full = staging(a.JC);

    // Copies step s's g tile (and u rows) into stage st, and at the start of
    // a segment its W slice; always commits a group (maybe empty) so the
    // group counts stay uniform over the block.
    auto issue = [&](const Cursor &s, int st) {
        if (s.item < a.items) {
            const Where w = where(s);
            float *gs = smem + st * stage_size;
            const Staging sg = w.jc == a.JC ? full : staging(w.jc);
            const float *src = g + (w.tb * I + w.i) * JE + w.c0 + sg.col * VEC;
            for (int r = sg.row0; r < w.nrows; r += sg.rstep)
                __pipeline_memcpy_async(gs + r * LDG + sg.col * VEC, src + r * I * JE, VEC * sizeof(float));
            if (GW) {
                float *us = gs + Smem::u_off(LDG);
                if (a.u_vec) {
                    for (int e = t; e < w.nrows * Q; e += kThreads)
                        __pipeline_memcpy_async(us + 4 * e, u + ((w.tb + e / Q) * I + w.i) * KM + 4 * (e % Q), 16);
                } else {
                    for (int e = t; e < w.nrows * KM; e += kThreads) {
                        const int r = e / KM, k = e % KM;
                        if (k < K)
                            __pipeline_memcpy_async(us + e, u + ((w.tb + r) * I + w.i) * K + k, 4);
                        else
                            us[e] = 0.0f;
                    }
                }
            }
            if (s.m == 0) {
                float *ws = w_slices + (s.seg % NS) * a.JC * KM;
                if (a.w_vec) {
                    const float *src_w = W + (w.i * JE + w.c0) * KM;
                    for (int e = t; e < w.jc * Q; e += kThreads) __pipeline_memcpy_async(ws + 4 * e, src_w + 4 * e, 16);
                } else {
                    for (int e = t; e < w.jc * KM; e += kThreads) {
                        const int je = e / KM, k = e % KM;
                        if (k < K)
                            __pipeline_memcpy_async(ws + e, W + (w.i * JE + w.c0 + je) * K + k, 4);
                        else
                            ws[e] = 0.0f;
                    }
                }
            }
        }
        __pipeline_commit();
    };

    Cursor ahead, cur;
    ahead.start(blockIdx.x, a), cur.start(blockIdx.x, a);
    ahead.seg = cur.seg = 0;
    for (int n = 0; n < NS - 1; ++n) {
        issue(ahead, n);
        ahead.advance(a);
    }
    float acc[VW][KM];  // grad_W sums of this thread's column group (fused)
    for (int n = 0; cur.item < a.items; ++n, cur.advance(a)) {
        __pipeline_wait_prior(NS - 2);    // this thread's copies for step n have landed
        __syncthreads();                  // everyone's have; everyone is done with step n-1
        issue(ahead, (n + NS - 1) % NS);  // refills step n-1's stage
        ahead.advance(a);

        const Where w = where(cur);
        const float *gs = smem + (n % NS) * stage_size;

        // grad_u partials: lane = row, warp = slice of column groups.
        {
            const float *ws = w_slices + (cur.seg % NS) * a.JC * KM;
            const int ngroups = w.jc / VEC;
            const int per_warp = (ngroups + kWarps - 1) / kWarps;
            const int q_end = min(ngroups, (warp + 1) * per_warp);
            float p[KM];
#pragma unroll
            for (int k = 0; k < KM; ++k) p[k] = 0.0f;
            if (lane < w.nrows) {
                for (int q = warp * per_warp; q < q_end; ++q) {
                    float gv[VEC];
                    load_smem_vec<VEC>(gv, gs + lane * LDG + q * VEC);
#pragma unroll
                    for (int v = 0; v < VEC; ++v) {
                        float wr[KM];
                        load_smem_row<KM>(wr, ws + (q * VEC + v) * KM);
#pragma unroll
                        for (int k = 0; k < KM; ++k) p[k] = fmaf(gv[v], wr[k], p[k]);
                    }
                }
            }
#pragma unroll
            for (int q = 0; q < Q; ++q)
                buf[(warp * RT + lane) * Q + q] = make_float4(p[4 * q], p[4 * q + 1], p[4 * q + 2], p[4 * q + 3]);
        }

        // grad_W sums (fused), while the partials settle.
        const bool w_ok = yw < a.TYW && xw < w.jc / VW;
        if (GW) {
            if (cur.m == 0) {
#pragma unroll
                for (int v = 0; v < VW; ++v)
#pragma unroll
                    for (int k = 0; k < KM; ++k) acc[v][k] = 0.0f;
            }
            if (w_ok) {
                const float *us = gs + Smem::u_off(LDG);
                for (int r = yw; r < w.nrows; r += a.TYW) {
                    float gv[VW], ur[KM];
                    load_smem_vec<VW>(gv, gs + r * LDG + xw * VW);
                    load_smem_row<KM>(ur, us + r * KM);
#pragma unroll
                    for (int v = 0; v < VW; ++v)
#pragma unroll
                        for (int k = 0; k < KM; ++k) acc[v][k] = fmaf(gv[v], ur[k], acc[v][k]);
                }
            }
        }

        // grad_u: sum the 8 slices of each (row, quad) and store.
        __syncthreads();
        for (int o = t; o < w.nrows * Q; o += kThreads) {  // o = r*Q + q
            float4 sum = buf[o];
#pragma unroll
            for (int s = 1; s < kWarps; ++s) add4(sum, buf[s * RT * Q + o]);
            const int r = o / Q, q = o % Q;
            store_quad(grad_u + ((w.tb + r) * I + w.i) * K + 4 * q, sum, 4 * q, K, a.gu_vec, w.c0 > 0);
        }
        // buf is rewritten only after the next barrier.

        if (GW && cur.m == a.tiles - 1) {
            // Last tile of (i, chunk): sum the TYW row-threads of each column
            // group through buf, one of the VW je per pass, and store.
#pragma unroll
            for (int v = 0; v < VW; ++v) {
                __syncthreads();  // buf is free
                if (w_ok) {
#pragma unroll
                    for (int q = 0; q < Q; ++q)
                        buf[(yw * a.TXW + xw) * Q + q] =
                            make_float4(acc[v][4 * q], acc[v][4 * q + 1], acc[v][4 * q + 2], acc[v][4 * q + 3]);
                }
                __syncthreads();
                for (int o = t; o < (w.jc / VW) * Q; o += kThreads) {  // o = xx*Q + q
                    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
                    for (int y = 0; y < a.TYW; ++y) add4(sum, buf[y * a.TXW * Q + o]);
                    const int je = w.c0 + (o / Q) * VW + v, q = o % Q;
                    store_quad(grad_W + (w.i * JE + je) * K + 4 * q, sum, 4 * q, K, a.gW_vec, false);
                }
            }
        }
    }
    __pipeline_wait_prior(0);  // only empty groups remain
}

// ---------------------------------------------------------------------------
// Launchers of versions 2 and 3.
// ---------------------------------------------------------------------------

// Which shapes versions 2 and 3 take; the rest use version 1's kernels,
// which handle any shape.
bool tuned_supported(const PredictShape &s) {
    const i64 JE = s.out_caps * s.out_dim;
    return s.in_dim <= kMaxKm && JE <= (i64(1) << 30) && s.in_caps <= INT_MAX &&
           (s.batch + kTileRows - 1) / kTileRows <= INT_MAX;
}

template <int KM, int V>
cudaError_t launch_forward_v2(const float *u, const float *W, float *u_hat, const PredictShape &s,
                              cudaStream_t stream) {
    const i64 B = s.batch, I = s.in_caps, JE = s.out_caps * s.out_dim;
    const int K = static_cast<int>(s.in_dim);
    const Layout l = make_layout(JE, V);
    const int BT = static_cast<int>(std::min<i64>(kForwardRows, B));
    const i64 ntiles = (B + BT - 1) / BT;
    const dim3 grid(static_cast<unsigned>(I), static_cast<unsigned>(std::min<i64>(ntiles, 65535)));
    const size_t smem = size_t(BT) * KM * sizeof(float);
    forward_v2_kernel<KM, V><<<grid, kThreads, smem, stream>>>(u, W, u_hat, B, I, static_cast<int>(JE), K, BT, l.TX,
                                                               l.TY, K == KM && aligned16(W), K == KM && aligned16(u));
    return cudaGetLastError();
}

template <int KM>
cudaError_t forward_v2_km(const float *u, const float *W, float *u_hat, const PredictShape &s, cudaStream_t stream) {
    switch (pick_v(s.out_caps * s.out_dim, KM, 16, {u_hat})) {
    case 4:
        if constexpr (4 * KM <= 16) return launch_forward_v2<KM, 4>(u, W, u_hat, s, stream);
        [[fallthrough]];
    case 2:
        if constexpr (2 * KM <= 16) return launch_forward_v2<KM, 2>(u, W, u_hat, s, stream);
        [[fallthrough]];
    default:
        return launch_forward_v2<KM, 1>(u, W, u_hat, s, stream);
    }
}

// Version 3's launch: the kernel and its block shape, chosen by
// pick_staged; Y (row groups) so that the grid fits in one wave.
struct StagedPlan {
    const void *kernel = nullptr;  // a forward_staged_kernel instance
    int N = 0, threads = 0, Y = 0;
    size_t smem = 0;
};

constexpr size_t kStagedMaxSmem = 48 * 1024;

template <int K, int V>
bool plan_staged(const PredictShape &s, StagedPlan *plan) {
    const i64 JE = s.out_caps * s.out_dim;
    const i64 per_capsule = JE / V;
    if (JE % V != 0 || per_capsule > kStagedMaxThreads) return false;
    // Two capsules a block where they fit: 80 threads at MNIST shapes.
    const int N = 2 * per_capsule <= kStagedMaxThreads ? 2 : 1;
    const i64 groups = (s.in_caps + N - 1) / N;
    const size_t row_bytes = size_t(N) * K * sizeof(float);
    const i64 max_rows = i64(kStagedMaxSmem / row_bytes);
    auto kernel = forward_staged_kernel<K, V>;
    DeviceLimits d;
    int per_sm = 0;
    if (device_limits(&d) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, int(N * per_capsule), 0) != cudaSuccess)
        return false;
    i64 Y = std::max<i64>(1, i64(per_sm) * d.sms / groups);  // one wave
    Y = std::max(Y, (s.batch + max_rows - 1) / max_rows);    // the row tile fits in shared memory
    Y = std::min(Y, s.batch);
    if (Y > 65535) return false;
    plan->kernel = reinterpret_cast<const void *>(kernel);
    plan->N = N, plan->threads = int(N * per_capsule), plan->Y = int(Y);
    plan->smem = size_t((s.batch + Y - 1) / Y) * row_bytes;
    return true;
}

// Version 3's choice of kernel; false where version 2 runs instead. V = 4
// outputs a thread where J*E and u_hat allow it (at K = 16, V = 2: W's V x K
// values stay within 32 registers). At MNIST shapes the plan is 80 threads
// a block, 72 registers, 9 blocks an SM and Y = 2.
bool pick_staged(const PredictShape &s, const float *u, const float *W, const float *u_hat, StagedPlan *plan) {
    // The kernel's B, I and J*E are ints; plan_staged bounds J*E by the block size.
    if (!aligned16(u) || !aligned16(W) || s.batch > INT_MAX / 2 || s.in_caps > INT_MAX) return false;
    const i64 JE = s.out_caps * s.out_dim;
    const bool v4 = JE % 4 == 0 && aligned16(u_hat), v2 = JE % 2 == 0 && aligned_to(u_hat, 8);
    switch (s.in_dim) {
    case 4:
        return (v4 && plan_staged<4, 4>(s, plan)) || (v2 && plan_staged<4, 2>(s, plan));
    case 8:
        return (v4 && plan_staged<8, 4>(s, plan)) || (v2 && plan_staged<8, 2>(s, plan));
    case 16:
        return v2 && plan_staged<16, 2>(s, plan);
    default:
        return false;
    }
}

cudaError_t launch_forward_staged(const float *u, const float *W, float *u_hat, const PredictShape &s,
                                  const StagedPlan &plan, cudaStream_t stream) {
    int B = static_cast<int>(s.batch), I = static_cast<int>(s.in_caps), JE = static_cast<int>(s.out_caps * s.out_dim),
        N = plan.N;
    void *args[] = {&u, &W, &u_hat, &B, &I, &JE, &N};
    const dim3 grid(static_cast<unsigned>((s.in_caps + plan.N - 1) / plan.N), static_cast<unsigned>(plan.Y));
    return cudaLaunchKernel(plan.kernel, grid, dim3(plan.threads), args, plan.smem, stream);
}

template <int KM, int V>
cudaError_t launch_grad_W_v2(const float *g, const float *u, float *grad_W, const PredictShape &s,
                             cudaStream_t stream) {
    const i64 JE = s.out_caps * s.out_dim;
    const int K = static_cast<int>(s.in_dim);
    const Layout l = make_layout(JE, V);
    GradWArgs a;
    a.B = s.batch;
    a.I = s.in_caps;
    a.JE = static_cast<int>(JE);
    a.K = K;
    a.RT = static_cast<int>(std::min<i64>(2048 / KM, s.batch));  // 8 KB of u rows
    a.TX = l.TX;
    a.TY = l.TY;
    a.u_vec = K == KM && aligned16(u);
    a.gW_vec = K == KM && aligned16(grad_W);
    const size_t smem = GradWSmem<KM, V>::bytes(a.RT, a.TX, a.TY);
    auto kernel = grad_W_v2_kernel<KM, V>;
    cudaError_t err = allow_dynamic_smem(kernel, smem);
    if (err != cudaSuccess) return err;
    kernel<<<static_cast<unsigned>(s.in_caps), kThreads, smem, stream>>>(g, u, grad_W, a);
    return cudaGetLastError();
}

// V*KM <= 32 keeps the grad_W accumulators within 32 registers.
template <int KM>
cudaError_t grad_W_v2_km(const float *g, const float *u, float *grad_W, const PredictShape &s, cudaStream_t stream) {
    switch (pick_v(s.out_caps * s.out_dim, KM, 32, {g})) {
    case 4:
        if constexpr (4 * KM <= 32) return launch_grad_W_v2<KM, 4>(g, u, grad_W, s, stream);
        [[fallthrough]];
    case 2:
        if constexpr (2 * KM <= 32) return launch_grad_W_v2<KM, 2>(g, u, grad_W, s, stream);
        [[fallthrough]];
    default:
        return launch_grad_W_v2<KM, 1>(g, u, grad_W, s, stream);
    }
}

template <int KM, int VEC, bool GW>
cudaError_t launch_tiled(const float *g, const float *u, const float *W, float *grad_u, float *grad_W,
                         const PredictShape &s, cudaStream_t stream) {
    const i64 B = s.batch, I = s.in_caps, JE = s.out_caps * s.out_dim;
    const int K = static_cast<int>(s.in_dim);
    TiledArgs a;
    a.B = B;
    a.I = I;
    a.JE = static_cast<int>(JE);
    a.K = K;
    // Columns per chunk: at most 256 (one column group per grad_W thread)
    // and 2048/KM (a stage stays near 22 KB).
    a.JC = static_cast<int>(std::min<i64>(JE, std::min(256, 2048 / KM)));
    // Row stride of a staged tile: odd in 16-byte units for VEC = 4 (odd in
    // floats for VEC = 1) so the 32 rows read by a warp hit distinct banks.
    if (VEC == 4)
        a.LDG = a.JC + ((a.JC / 4) % 2 == 0 ? 4 : 8);
    else
        a.LDG = a.JC % 2 == 0 ? a.JC + 1 : a.JC;
    a.TXW = a.JC / grad_w_vec<KM, VEC>();
    a.TYW = kThreads / a.TXW;
    a.nchunks = static_cast<int>((JE + a.JC - 1) / a.JC);
    const i64 ntiles = (B + kTileRows - 1) / kTileRows;  // <= INT_MAX (tuned_supported)
    a.tiles = static_cast<int>(GW ? ntiles : std::min<i64>(ntiles, kGradUTilesPerItem));
    a.groups = (ntiles + a.tiles - 1) / a.tiles;
    a.items = I * a.groups;
    a.w_vec = K == KM && aligned16(W);
    a.u_vec = K == KM && aligned16(u);
    a.gW_vec = K == KM && aligned16(grad_W);
    a.gu_vec = K == KM && aligned16(grad_u);

    const size_t smem = TiledSmem<KM, GW>::bytes(kTileStages, a.LDG, a.JC);
    auto kernel = backward_tiled_kernel<KM, VEC, GW>;
    cudaError_t err = allow_dynamic_smem(kernel, smem);
    if (err != cudaSuccess) return err;
    // Persistent grid: as many blocks as are resident at once.
    DeviceLimits d;
    if ((err = device_limits(&d)) != cudaSuccess) return err;
    int per_sm = 0;
    if ((err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem)) != cudaSuccess)
        return err;
    if (per_sm < 1) return cudaErrorInvalidConfiguration;
    const i64 blocks = std::min<i64>(a.items, i64(per_sm) * d.sms);
    kernel<<<static_cast<unsigned>(blocks), kThreads, smem, stream>>>(g, u, W, grad_u, grad_W, a);
    return cudaGetLastError();
}

// GW = false: grad_u alone (version 2); GW = true: both (version 3).
template <int KM, bool GW>
cudaError_t tiled_km(const float *g, const float *u, const float *W, float *grad_u, float *grad_W,
                     const PredictShape &s, cudaStream_t stream) {
    if ((s.out_caps * s.out_dim) % 4 == 0 && aligned16(g))
        return launch_tiled<KM, 4, GW>(g, u, W, grad_u, grad_W, s, stream);
    return launch_tiled<KM, 1, GW>(g, u, W, grad_u, grad_W, s, stream);
}

// Calls f.template operator()<KM>() with K padded to KM.
template <typename F>
cudaError_t with_km(i64 K, F f) {
    switch (padded_k(K)) {
    case 4:
        return f(std::integral_constant<int, 4>());
    case 8:
        return f(std::integral_constant<int, 8>());
    default:
        return f(std::integral_constant<int, 16>());
    }
}

// ---- the versions ------------------------------------------------------------

cudaError_t forward_v2(const float *u, const float *W, float *u_hat, const PredictShape &s, cudaStream_t stream) {
    if (!tuned_supported(s)) return forward_v1(u, W, u_hat, s, stream);
    return with_km(s.in_dim, [&](auto km) { return forward_v2_km<decltype(km)::value>(u, W, u_hat, s, stream); });
}

cudaError_t forward_v3(const float *u, const float *W, float *u_hat, const PredictShape &s, cudaStream_t stream) {
    StagedPlan plan;
    if (!pick_staged(s, u, W, u_hat, &plan)) return forward_v2(u, W, u_hat, s, stream);
    return launch_forward_staged(u, W, u_hat, s, plan, stream);
}

cudaError_t grad_u_v2(const float *g, const float *W, float *grad_u, const PredictShape &s, cudaStream_t stream) {
    if (!tuned_supported(s)) return grad_u_v1(g, W, grad_u, s, stream);
    return with_km(s.in_dim, [&](auto km) {
        return tiled_km<decltype(km)::value, false>(g, nullptr, W, grad_u, nullptr, s, stream);
    });
}

cudaError_t grad_W_v2(const float *g, const float *u, float *grad_W, const PredictShape &s, cudaStream_t stream) {
    if (!tuned_supported(s)) return grad_W_v1(g, u, grad_W, s, stream);
    return with_km(s.in_dim, [&](auto km) { return grad_W_v2_km<decltype(km)::value>(g, u, grad_W, s, stream); });
}

cudaError_t backward_v1(const float *g, const float *u, const float *W, float *grad_u, float *grad_W,
                        const PredictShape &s, cudaStream_t stream) {
    if (grad_u) {
        cudaError_t err = grad_u_v1(g, W, grad_u, s, stream);
        if (err != cudaSuccess) return err;
    }
    return grad_W ? grad_W_v1(g, u, grad_W, s, stream) : cudaSuccess;
}

cudaError_t backward_v2(const float *g, const float *u, const float *W, float *grad_u, float *grad_W,
                        const PredictShape &s, cudaStream_t stream) {
    if (grad_u) {
        cudaError_t err = grad_u_v2(g, W, grad_u, s, stream);
        if (err != cudaSuccess) return err;
    }
    return grad_W ? grad_W_v2(g, u, grad_W, s, stream) : cudaSuccess;
}

cudaError_t backward_v3(const float *g, const float *u, const float *W, float *grad_u, float *grad_W,
                        const PredictShape &s, cudaStream_t stream) {
    if (!grad_u || !grad_W) return backward_v2(g, u, W, grad_u, grad_W, s, stream);
    if (!tuned_supported(s)) return backward_v1(g, u, W, grad_u, grad_W, s, stream);
    return with_km(s.in_dim,
                   [&](auto km) { return tiled_km<decltype(km)::value, true>(g, u, W, grad_u, grad_W, s, stream); });
}

cudaError_t backward_v4(const float *g, const float *u, const float *W, float *grad_u, float *grad_W,
                        const PredictShape &s, cudaStream_t stream) {
    if (!grad_u || !grad_W) return backward_v2(g, u, W, grad_u, grad_W, s, stream);
    if (!predict_backward_tensor_cores_supported(s)) return backward_v1(g, u, W, grad_u, grad_W, s, stream);
    return predict_backward_tensor_cores(g, u, W, grad_u, grad_W, s, stream);
}

}  // namespace

int forward_version_count() { return 3; }
int backward_version_count() { return 4; }

const char *forward_version_name(int version) {
    switch (version) {
    case 1:
        return "blog_naive";
    case 2:
        return "tuned";
    case 3:
        return "staged";
    default:
        return nullptr;
    }
}

const char *backward_version_name(int version) {
    switch (version) {
    case 1:
        return "blog_naive";
    case 2:
        return "tuned";
    case 3:
        return "fused";
    case 4:
        return "tensor";
    default:
        return nullptr;
    }
}

cudaError_t predict_forward(int version, const float *u, const float *W, float *u_hat, const PredictShape &shape,
                            cudaStream_t stream) {
    if (!valid_shape(shape) || !u || !W || !u_hat) return cudaErrorInvalidValue;
    switch (version) {
    case 1:
        return forward_v1(u, W, u_hat, shape, stream);
    case 2:
        return forward_v2(u, W, u_hat, shape, stream);
    case 3:
        return forward_v3(u, W, u_hat, shape, stream);
    default:
        return cudaErrorInvalidValue;
    }
}

cudaError_t predict_backward(int version, const float *g, const float *u, const float *W, float *grad_u, float *grad_W,
                             const PredictShape &shape, cudaStream_t stream) {
    if (!valid_shape(shape) || !g || (!grad_u && !grad_W)) return cudaErrorInvalidValue;
    if ((grad_u && !W) || (grad_W && !u)) return cudaErrorInvalidValue;
    switch (version) {
    case 1:
        return backward_v1(g, u, W, grad_u, grad_W, shape, stream);
    case 2:
        return backward_v2(g, u, W, grad_u, grad_W, shape, stream);
    case 3:
        return backward_v3(g, u, W, grad_u, grad_W, shape, stream);
    case 4:
        return backward_v4(g, u, W, grad_u, grad_W, shape, stream);
    default:
        return cudaErrorInvalidValue;
    }
}

}  // namespace halcaps::cuda_reference

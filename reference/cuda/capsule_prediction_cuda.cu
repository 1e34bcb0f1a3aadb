// Hand-written CUDA kernels for capsule prediction; versions are listed in
// capsule_prediction_cuda.h. Shapes: u [B, I, K], W [I, J, E, K],
// u_hat and g [B, I, J, E]. Throughout, JE = J*E: the (j, e) pair flattened,
// which is contiguous both in u_hat/g rows and in W[i] (as JE rows of K).
#include "capsule_prediction_cuda.h"

#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <vector>

namespace halcaps::cuda_reference {
namespace {

using i64 = int64_t;

bool valid_shape(const PredictShape &s) {
    return s.batch > 0 && s.in_caps > 0 && s.out_caps > 0 && s.out_dim > 0 && s.in_dim > 0;
}

bool aligned16(const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
bool aligned_to(const void *p, int bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

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

struct DeviceLimits {
    int sms = 0, threads_per_sm = 0, threads_per_block = 0;
};

// Device attributes, queried once per device.
cudaError_t device_limits(DeviceLimits *out) {
    static std::mutex mutex;
    static std::vector<DeviceLimits> cache;
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return err;
    std::lock_guard<std::mutex> lock(mutex);
    if (device >= static_cast<int>(cache.size())) cache.resize(device + 1);
    DeviceLimits &d = cache[device];
    if (d.sms == 0) {
        DeviceLimits q;
        if ((err = cudaDeviceGetAttribute(&q.sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess) return err;
        if ((err = cudaDeviceGetAttribute(&q.threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device)) !=
            cudaSuccess)
            return err;
        if ((err = cudaDeviceGetAttribute(&q.threads_per_block, cudaDevAttrMaxThreadsPerBlock, device)) !=
            cudaSuccess)
            return err;
        d = q;
    }
    *out = d;
    return cudaSuccess;
}

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

__global__ void blog_forward_kernel(const float *__restrict__ u, const float *__restrict__ W,
                                    float *__restrict__ u_hat, i64 I, i64 J, i64 E, i64 K, i64 total) {
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

__global__ void blog_grad_u_kernel(const float *__restrict__ g, const float *__restrict__ W,
                                   float *__restrict__ grad_u, i64 I, i64 JE, i64 K, i64 total) {
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

__global__ void blog_grad_W_kernel(const float *__restrict__ g, const float *__restrict__ u,
                                   float *__restrict__ grad_W, i64 B, i64 I, i64 JE, i64 K, i64 total) {
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
    blog_grad_u_kernel<<<c.blocks, c.threads, 0, stream>>>(g, W, grad_u, s.in_caps, s.out_caps * s.out_dim,
                                                            s.in_dim, total);
    return cudaGetLastError();
}

cudaError_t grad_W_v1(const float *g, const float *u, float *grad_W, const PredictShape &s, cudaStream_t stream) {
    const i64 total = s.in_caps * s.out_caps * s.out_dim * s.in_dim;
    BlogLaunch c;
    cudaError_t err = blog_launch_config(total, &c);
    if (err != cudaSuccess) return err;
    blog_grad_W_kernel<<<c.blocks, c.threads, 0, stream>>>(g, u, grad_W, s.batch, s.in_caps,
                                                            s.out_caps * s.out_dim, s.in_dim, total);
    return cudaGetLastError();
}

// ---------------------------------------------------------------------------
// Versions 2 and 3: shared layout.
//
// A block works on one input capsule i (blockIdx.x) and 256 threads. The JE
// outputs of a row are split into column groups of V consecutive je
// (V = 4, 2 or 1: a 16-, 8- or 4-byte access per thread); thread t owns
// column group x = t % TX of every row y = t / TX (mod TY), TX = min(groups,
// 256), TY = 256 / TX. The threads past TX*TY (< TX of them) own no column.
// When JE/V > 256 the columns are walked in chunks of TX groups.
//
// K is padded to KM in {4, 8, 16} (a template parameter): W rows, u rows and
// accumulators are KM-wide register arrays whose lanes k >= K hold zeros, so
// the arithmetic is branch-free and fully unrolled and only loads and stores
// look at K. Shapes with K > 16 or huge JE go to version 1's kernels.
// ---------------------------------------------------------------------------

constexpr int kThreads = 256;
constexpr int kMaxKm = 16;

struct Layout {
    int V, TX, TY;
    int groups;  // JE / V column groups
};

Layout make_layout(i64 JE, int V) {
    Layout l;
    l.V = V;
    l.groups = static_cast<int>(JE / V);
    l.TX = std::min(l.groups, kThreads);
    l.TY = kThreads / l.TX;
    return l;
}

int padded_k(i64 K) { return K <= 4 ? 4 : K <= 8 ? 8 : 16; }

// Largest V in {4, 2, 1} with JE % V == 0, V*km <= max_regs, and every
// pointer in `ptrs` aligned to V floats (they are walked V floats at a time).
int pick_v(i64 JE, int km, int max_regs, std::initializer_list<const void *> ptrs) {
    for (int V : {4, 2}) {
        if (JE % V != 0 || V * km > max_regs) continue;
        bool ok = true;
        for (const void *p : ptrs) ok = ok && (p == nullptr || aligned_to(p, 4 * V));
        if (ok) return V;
    }
    return 1;
}

// Loads rows row0 .. row0+V-1 of a [rows, K] matrix into w[V][KM], zero
// padding k >= K. `vec`: K == KM and the base is 16-byte aligned.
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
                w[v][4 * q + 0] = t.x;
                w[v][4 * q + 1] = t.y;
                w[v][4 * q + 2] = t.z;
                w[v][4 * q + 3] = t.w;
            }
    } else {
#pragma unroll
        for (int v = 0; v < V; ++v)
#pragma unroll
            for (int k = 0; k < KM; ++k) w[v][k] = k < K ? __ldg(base + (row0 + v) * K + k) : 0.0f;
    }
}

// Stages u[b0 + r, i, :] for r < nrows into u_s[r][KM] (zero padded), all
// threads of the block cooperating. The caller synchronises around it.
template <int KM>
__device__ __forceinline__ void stage_u(float *__restrict__ u_s, const float *__restrict__ u, i64 b0, int nrows,
                                        i64 I, i64 i, int K, bool vec) {
    if (vec) {
        for (int n = threadIdx.x; n < nrows * (KM / 4); n += blockDim.x) {
            const int r = n / (KM / 4), q = n % (KM / 4);
            const float4 t = __ldg(reinterpret_cast<const float4 *>(u + ((b0 + r) * I + i) * KM) + q);
            reinterpret_cast<float4 *>(u_s)[n] = t;
        }
    } else {
        for (int n = threadIdx.x; n < nrows * KM; n += blockDim.x) {
            const int r = n / KM, k = n % KM;
            u_s[n] = k < K ? __ldg(u + ((b0 + r) * I + i) * K + k) : 0.0f;
        }
    }
}

template <int KM>
__device__ __forceinline__ void load_u_row(float (&ur)[KM], const float *u_s_row) {
#pragma unroll
    for (int q = 0; q < KM / 4; ++q) {
        const float4 t = reinterpret_cast<const float4 *>(u_s_row)[q];
        ur[4 * q + 0] = t.x;
        ur[4 * q + 1] = t.y;
        ur[4 * q + 2] = t.z;
        ur[4 * q + 3] = t.w;
    }
}

// A thread's own V floats from shared memory (its cp.async ring slot).
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

// Stores V consecutive floats (p aligned to 4*V bytes); STREAM marks them
// evict-first (st.global.cs).
template <int V, bool STREAM>
__device__ __forceinline__ void store_vec(float *p, const float (&in)[V]) {
    if constexpr (V == 4) {
        const float4 t = make_float4(in[0], in[1], in[2], in[3]);
        if (STREAM) __stcs(reinterpret_cast<float4 *>(p), t);
        else *reinterpret_cast<float4 *>(p) = t;
    } else if constexpr (V == 2) {
        const float2 t = make_float2(in[0], in[1]);
        if (STREAM) __stcs(reinterpret_cast<float2 *>(p), t);
        else *reinterpret_cast<float2 *>(p) = t;
    } else {
        if (STREAM) __stcs(p, in[0]);
        else p[0] = in[0];
    }
}

// ---------------------------------------------------------------------------
// Version 2 forward.
//
// Bound: the op writes B*I*JE floats (94 MB at MNIST b128) and reads only
// u (4.7 MB) and W (5.9 MB), so it is a store-bandwidth kernel; the floor is
// about 25 us on an H200. The design keeps every issued instruction useful
// for that stream:
//  - W[i, je0:je0+V, :] goes into registers once per block (its loads are in
//    flight while u is staged) and serves all BT rows of the block.
//  - The block's u rows (BT x K floats, I*K apart in memory) are staged in
//    shared memory with one cooperative load; each row is then a broadcast
//    16-byte shared read for all threads.
//  - Each thread stores V consecutive outputs (a 16-byte store for V = 4);
//    a warp stores 32*V*4 contiguous bytes of one u_hat row (rows of
//    different b are I*JE apart, so a warp straddling two rows issues two
//    full segments).
//  - Per output: K FMAs, 1/V of a store, KM/(4V) shared loads.
// ---------------------------------------------------------------------------
template <int KM, int V, bool STREAM>
__global__ void __launch_bounds__(kThreads) forward_v2_kernel(const float *__restrict__ u,
                                                              const float *__restrict__ W,
                                                              float *__restrict__ u_hat, i64 B, i64 I, int JE, int K,
                                                              int BT, int TX, int TY, bool w_vec, bool u_vec) {
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
#pragma unroll 4
            for (int r = y; r < nrows; r += TY, out += out_step) {
                float ur[KM];
                load_u_row<KM>(ur, u_s + r * KM);
                float acc[V];
#pragma unroll
                for (int v = 0; v < V; ++v) {
                    acc[v] = 0.0f;
#pragma unroll
                    for (int k = 0; k < KM; ++k) acc[v] = fmaf(w[v][k], ur[k], acc[v]);
                }
                store_vec<V, STREAM>(out, acc);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Versions 2 and 3 backward: one kernel body, three flavours.
//   GU only  (v2 grad_u): grid (I, batch tiles). W[i, je0:je0+V, :] in
//            registers; per row, a thread's partial grad_u over its V je
//            (KM values) goes to shared memory and the block sums the TX
//            partials of each row (below).
//   GW only  (v2 grad_W): grid (I). A thread accumulates grad_W[i, je0:+V, :]
//            (V*KM registers) over its rows (y, y+TY, ...) of all B; u rows
//            come from shared memory; at the end the TY partials of each
//            column are summed through shared memory.
//   GU + GW  (v3 fused): grid (I), all rows: both of the above on each g
//            vector, which is read exactly once (94 MB at MNIST b128, ~21 us
//            at the H200's read bandwidth; the arithmetic is 2*K FMAs per g
//            element).
//
// Keeping HBM busy needs many bytes in flight per SM (tens of KB), more than
// registers allow next to W and the accumulators. So g goes through a
// per-thread ring in shared memory filled by cp.async: each thread copies
// exactly the V-float vectors it will use, D steps ahead, and waits only for
// its own copies (no barrier is needed for the ring).
//
// Rows are processed in steps of SR = TY*R rows (R rows per thread). In the
// GU flavours a step ends with the block-level sum: partials are stored as
// part_s[row][q][x] (float4 q = k/4, x = column group; conflict-free both
// ways), and TPO threads (a power of two, an aligned lane group) sum each
// (row, q) over x, finished by shuffles.
// When JE/V > 256 the column chunks are the outer loop (the grad_W
// accumulators live across all rows); the grad_u of later chunks is added
// to the stored one by the same thread that stored it.
// ---------------------------------------------------------------------------
struct BwdArgs {
    i64 B, I;
    int JE, K;
    int RT;  // rows per tile (u_s holds RT rows)
    int TX, TY, TPO;
    bool w_vec, u_vec, gW_vec, gu_vec;
};

constexpr int kStages = 3;  // cp.async ring depth: D-1 steps in flight

// Rows per thread per step: R*KM <= 32 keeps part_s within 32 KB and
// R*V <= 16 the ring within 48 KB.
template <int KM, int V>
constexpr int bwd_rows() {
    return (32 / KM) < (16 / V) ? (32 / KM) : (16 / V);
}

// Shared memory of backward_kernel, in float4 units: u_s, then the partials /
// grad_W reduction area, then the ring.
template <int KM, int V, bool GU, bool GW>
struct BwdSmem {
    static constexpr int Q = KM / 4, R = bwd_rows<KM, V>();
    __host__ __device__ static int u_f4(int RT) { return GW ? RT * Q : 0; }
    __host__ __device__ static int red_f4(int TX, int TY) {
        const int part = GU ? TY * R * Q * TX : 0;
        const int wred = GW ? TY * TX * V * Q : 0;
        return part > wred ? part : wred;
    }
    __host__ __device__ static int ring_f4() { return kStages * R * kThreads * V / 4; }
    static size_t bytes(int RT, int TX, int TY) {
        return size_t(u_f4(RT) + red_f4(TX, TY) + ring_f4()) * sizeof(float4);
    }
};

template <int KM, int V, bool GU, bool GW>
__global__ void __launch_bounds__(kThreads) backward_kernel(const float *__restrict__ g, const float *__restrict__ u,
                                                            const float *__restrict__ W, float *__restrict__ grad_u,
                                                            float *__restrict__ grad_W, BwdArgs a) {
    using Smem = BwdSmem<KM, V, GU, GW>;
    constexpr int Q = KM / 4, R = Smem::R, D = kStages;
    extern __shared__ float4 smem_f4[];
    float *u_s = reinterpret_cast<float *>(smem_f4);                  // [RT][KM]
    float4 *red_s = smem_f4 + Smem::u_f4(a.RT);                       // part_s or grad_W partials
    float *ring = reinterpret_cast<float *>(red_s + Smem::red_f4(a.TX, a.TY));  // [D][R][kThreads][V]

    const int t = threadIdx.x;
    const int TX = a.TX, TY = a.TY, SR = TY * R;
    const int x = t % TX, y = t / TX;
    const i64 i = blockIdx.x;
    const i64 I = a.I, B = a.B;
    const int JE = a.JE, K = a.K;
    const int groups = JE / V;
    const i64 g_row_step = I * JE;  // from g[b, i, :] to g[b+1, i, :]
    const i64 ntiles = (B + a.RT - 1) / a.RT;

    for (int c0 = 0; c0 < groups; c0 += TX) {
        const int cg = c0 + x;
        const bool col_ok = y < TY && cg < groups;
        const int je0 = col_ok ? cg * V : 0;
        const int ncols = min(TX, groups - c0);  // valid x in this chunk
        const float *g_col = g + i * JE + je0;   // g[0, i, je0]

        float w[V][KM];
        float acc[V][KM];
#pragma unroll
        for (int v = 0; v < V; ++v)
#pragma unroll
            for (int k = 0; k < KM; ++k) w[v][k] = acc[v][k] = 0.0f;
        if (GU && col_ok) load_rows<KM, V>(w, W, i * JE + je0, K, a.w_vec);

        for (i64 tile = blockIdx.y; tile < ntiles; tile += gridDim.y) {
            const i64 tb = tile * a.RT;
            const int nrows = static_cast<int>(min64(a.RT, B - tb));
            const int nsteps = (nrows + SR - 1) / SR;
            if (GW) {
                __syncthreads();  // the previous tile's readers are done with u_s
                stage_u<KM>(u_s, u, tb, nrows, I, i, K, a.u_vec);
            }
            // Copies of step s's g vectors into ring slot s % D; always
            // commits a group (maybe empty) so the group count stays uniform.
            auto issue = [&](int s) {
                if (col_ok && s < nsteps) {
                    float *slot = ring + (s % D) * R * kThreads * V + t * V;
#pragma unroll
                    for (int rr = 0; rr < R; ++rr) {
                        const int r = s * SR + rr * TY + y;
                        if (r < nrows)
                            __pipeline_memcpy_async(slot + rr * kThreads * V, g_col + (tb + r) * g_row_step,
                                                    V * sizeof(float));
                    }
                }
                __pipeline_commit();
            };
#pragma unroll
            for (int d = 0; d < D - 1; ++d) issue(d);
            if (GW) __syncthreads();  // u_s is staged

            for (int s = 0; s < nsteps; ++s) {
                issue(s + D - 1);
                __pipeline_wait_prior(D - 1);  // this thread's copies of step s have landed
                const float *slot = ring + (s % D) * R * kThreads * V + t * V;
                const int r0 = s * SR;
#pragma unroll
                for (int rr = 0; rr < R; ++rr) {
                    const int sr = rr * TY + y;  // row within the step
                    if (!(col_ok && r0 + sr < nrows)) continue;
                    float gv[V];
                    load_smem_vec<V>(gv, slot + rr * kThreads * V);
                    if (GW) {
                        float ur[KM];
                        load_u_row<KM>(ur, u_s + (r0 + sr) * KM);
#pragma unroll
                        for (int v = 0; v < V; ++v)
#pragma unroll
                            for (int k = 0; k < KM; ++k) acc[v][k] = fmaf(gv[v], ur[k], acc[v][k]);
                    }
                    if (GU) {
                        float p[KM];
#pragma unroll
                        for (int k = 0; k < KM; ++k) {
                            p[k] = 0.0f;
#pragma unroll
                            for (int v = 0; v < V; ++v) p[k] = fmaf(gv[v], w[v][k], p[k]);
                        }
#pragma unroll
                        for (int q = 0; q < Q; ++q)
                            red_s[(sr * Q + q) * TX + x] =
                                make_float4(p[4 * q + 0], p[4 * q + 1], p[4 * q + 2], p[4 * q + 3]);
                    }
                }
                if (GU) {
                    __syncthreads();  // partials of the step are complete
                    const int nq = min(SR, nrows - r0) * Q;
                    const int TPO = a.TPO, lane_in_group = t % TPO;
                    for (int q0 = 0; q0 < nq; q0 += kThreads / TPO) {  // uniform over the block
                        const int o = q0 + t / TPO;                   // o = sr*Q + q
                        float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
                        if (o < nq) {
                            const float4 *col = red_s + o * TX;
                            for (int xx = lane_in_group; xx < ncols; xx += TPO) {
                                const float4 pv = col[xx];
                                sum.x += pv.x, sum.y += pv.y, sum.z += pv.z, sum.w += pv.w;
                            }
                        }
                        for (int off = TPO / 2; off > 0; off /= 2) {
                            sum.x += __shfl_xor_sync(0xffffffffu, sum.x, off);
                            sum.y += __shfl_xor_sync(0xffffffffu, sum.y, off);
                            sum.z += __shfl_xor_sync(0xffffffffu, sum.z, off);
                            sum.w += __shfl_xor_sync(0xffffffffu, sum.w, off);
                        }
                        if (o < nq && lane_in_group == 0) {
                            const int sr = o / Q, q = o % Q;
                            float *dst = grad_u + ((tb + r0 + sr) * I + i) * K + 4 * q;
                            if (a.gu_vec) {  // K == KM, grad_u 16-byte aligned
                                float4 *d4 = reinterpret_cast<float4 *>(dst);
                                if (c0 > 0) {
                                    const float4 old = *d4;
                                    sum.x += old.x, sum.y += old.y, sum.z += old.z, sum.w += old.w;
                                }
                                *d4 = sum;
                            } else {
                                const float sv[4] = {sum.x, sum.y, sum.z, sum.w};
#pragma unroll
                                for (int c = 0; c < 4; ++c)
                                    if (4 * q + c < K) dst[c] = c0 > 0 ? dst[c] + sv[c] : sv[c];
                            }
                        }
                    }
                    __syncthreads();  // part_s is free for the next step
                }
            }
            __pipeline_wait_prior(0);  // (only empty groups remain) the ring is idle
        }

        if (GW) {
            // Sum the TY row-threads' partials of each column, then store.
            __syncthreads();  // red_s is free
            if (col_ok) {
#pragma unroll
                for (int v = 0; v < V; ++v)
#pragma unroll
                    for (int q = 0; q < Q; ++q)
                        red_s[(y * TX + x) * V * Q + v * Q + q] =
                            make_float4(acc[v][4 * q], acc[v][4 * q + 1], acc[v][4 * q + 2], acc[v][4 * q + 3]);
            }
            __syncthreads();
            // o = xx*V*Q + v*Q + q: consecutive threads, consecutive 16 bytes
            // of grad_W (when K == KM).
            for (int o = t; o < ncols * V * Q; o += kThreads) {
                float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
                for (int yy = 0; yy < TY; ++yy) {
                    const float4 pv = red_s[yy * TX * V * Q + o];
                    sum.x += pv.x, sum.y += pv.y, sum.z += pv.z, sum.w += pv.w;
                }
                const int xx = o / (V * Q), v = (o / Q) % V, q = o % Q;
                float *dst = grad_W + (i * JE + i64(c0 + xx) * V + v) * K + 4 * q;
                if (a.gW_vec) {  // K == KM, grad_W 16-byte aligned
                    *reinterpret_cast<float4 *>(dst) = sum;
                } else {
                    const float sv[4] = {sum.x, sum.y, sum.z, sum.w};
#pragma unroll
                    for (int c = 0; c < 4; ++c)
                        if (4 * q + c < K) dst[c] = sv[c];
                }
            }
        }
    }
}

// Which shapes versions 2 and 3 take; the rest (K > 16, JE or I beyond the
// int and grid ranges) use version 1's kernels, which handle any shape.
bool tuned_supported(const PredictShape &s) {
    const i64 JE = s.out_caps * s.out_dim;
    return s.in_dim <= kMaxKm && JE <= (i64(1) << 30) && s.in_caps <= INT_MAX;
}

// ---- forward launch --------------------------------------------------------

// DEV KNOBS (to be fixed after measuring)
int g_fwd_rows = 32;
bool g_fwd_stream = false;
int g_gu_rows = 32;

template <int KM, int V, bool STREAM>
cudaError_t launch_forward_v2(const float *u, const float *W, float *u_hat, const PredictShape &s,
                              cudaStream_t stream) {
    const i64 B = s.batch, I = s.in_caps, JE = s.out_caps * s.out_dim;
    const int K = static_cast<int>(s.in_dim);
    const Layout l = make_layout(JE, V);
    const int BT = static_cast<int>(std::min<i64>(g_fwd_rows, B));
    const i64 ntiles = (B + BT - 1) / BT;
    const dim3 grid(static_cast<unsigned>(I), static_cast<unsigned>(std::min<i64>(ntiles, 65535)));
    const bool w_vec = K == KM && aligned16(W);
    const bool u_vec = K == KM && aligned16(u);
    const size_t smem = size_t(BT) * KM * sizeof(float);
    forward_v2_kernel<KM, V, STREAM><<<grid, kThreads, smem, stream>>>(u, W, u_hat, B, I, static_cast<int>(JE), K,
                                                                       BT, l.TX, l.TY, w_vec, u_vec);
    return cudaGetLastError();
}

template <int KM, int V>
cudaError_t launch_forward_v2s(const float *u, const float *W, float *u_hat, const PredictShape &s,
                               cudaStream_t stream) {
    return g_fwd_stream ? launch_forward_v2<KM, V, true>(u, W, u_hat, s, stream)
                        : launch_forward_v2<KM, V, false>(u, W, u_hat, s, stream);
}

template <int KM>
cudaError_t forward_v2_km(const float *u, const float *W, float *u_hat, const PredictShape &s, cudaStream_t stream) {
    const i64 JE = s.out_caps * s.out_dim;
    switch (pick_v(JE, KM, 64, {u_hat})) {
        case 4: return launch_forward_v2s<KM, 4>(u, W, u_hat, s, stream);
        case 2: return launch_forward_v2s<KM, 2>(u, W, u_hat, s, stream);
        default: return launch_forward_v2s<KM, 1>(u, W, u_hat, s, stream);
    }
}

cudaError_t forward_v2(const float *u, const float *W, float *u_hat, const PredictShape &s, cudaStream_t stream) {
    if (!tuned_supported(s)) return forward_v1(u, W, u_hat, s, stream);
    switch (padded_k(s.in_dim)) {
        case 4: return forward_v2_km<4>(u, W, u_hat, s, stream);
        case 8: return forward_v2_km<8>(u, W, u_hat, s, stream);
        default: return forward_v2_km<16>(u, W, u_hat, s, stream);
    }
}

// ---- backward launch -------------------------------------------------------

enum class Flavour { grad_u, grad_W, fused };

template <int KM, int V, bool GU, bool GW>
cudaError_t launch_backward(const float *g, const float *u, const float *W, float *grad_u, float *grad_W,
                            const PredictShape &s, cudaStream_t stream) {
    using Smem = BwdSmem<KM, V, GU, GW>;
    constexpr int R = Smem::R, Q = KM / 4;
    const i64 B = s.batch, I = s.in_caps, JE = s.out_caps * s.out_dim;
    const int K = static_cast<int>(s.in_dim);
    const Layout l = make_layout(JE, V);

    BwdArgs a;
    a.B = B;
    a.I = I;
    a.JE = static_cast<int>(JE);
    a.K = K;
    a.TX = l.TX;
    a.TY = l.TY;
    // Rows per tile: GW walks all rows in one block (its grid is I), staging
    // u for up to 8 KB of rows at a time; GU alone also splits the batch
    // over blocks (grid I x B/RT).
    a.RT = static_cast<int>(std::min<i64>(GW ? 2048 / KM : g_gu_rows, B));
    // Lanes summing each (row, quad) of partials: spread the step's SR*Q
    // sums over the block, at most 32 (one warp) and no more than needed to
    // cover the TX partials.
    {
        const int nq = l.TY * R * Q;
        int tpo = 1;
        while (tpo * 2 * nq <= kThreads && tpo * 2 <= 32 && tpo < l.TX) tpo *= 2;
        a.TPO = tpo;
    }
    a.w_vec = K == KM && aligned16(W);
    a.u_vec = K == KM && aligned16(u);
    a.gW_vec = K == KM && aligned16(grad_W);
    a.gu_vec = K == KM && aligned16(grad_u);

    const i64 ntiles = (B + a.RT - 1) / a.RT;
    const unsigned grid_y = GW ? 1u : static_cast<unsigned>(std::min<i64>(ntiles, 65535));
    const dim3 grid(static_cast<unsigned>(I), grid_y);
    const size_t smem = Smem::bytes(a.RT, a.TX, a.TY);
    auto kernel = backward_kernel<KM, V, GU, GW>;
    if (smem > 48 * 1024) {
        // Above the default limit a kernel must opt in (up to 227 KB on Hopper).
        cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
        if (err != cudaSuccess) return err;
    }
    kernel<<<grid, kThreads, smem, stream>>>(g, u, W, grad_u, grad_W, a);
    return cudaGetLastError();
}

template <int KM, int V>
cudaError_t backward_flavour(Flavour f, const float *g, const float *u, const float *W, float *grad_u,
                             float *grad_W, const PredictShape &s, cudaStream_t stream) {
    switch (f) {
        case Flavour::grad_u: return launch_backward<KM, V, true, false>(g, u, W, grad_u, grad_W, s, stream);
        case Flavour::grad_W: return launch_backward<KM, V, false, true>(g, u, W, grad_u, grad_W, s, stream);
        default: return launch_backward<KM, V, true, true>(g, u, W, grad_u, grad_W, s, stream);
    }
}

// V*KM <= 32 keeps W and the grad_W accumulators within 64 registers.
template <int KM>
cudaError_t backward_km(Flavour f, const float *g, const float *u, const float *W, float *grad_u, float *grad_W,
                        const PredictShape &s, cudaStream_t stream) {
    const i64 JE = s.out_caps * s.out_dim;
    switch (pick_v(JE, KM, 32, {g})) {
        case 4:
            if constexpr (4 * KM <= 32) return backward_flavour<KM, 4>(f, g, u, W, grad_u, grad_W, s, stream);
            [[fallthrough]];
        case 2:
            if constexpr (2 * KM <= 32) return backward_flavour<KM, 2>(f, g, u, W, grad_u, grad_W, s, stream);
            [[fallthrough]];
        default: return backward_flavour<KM, 1>(f, g, u, W, grad_u, grad_W, s, stream);
    }
}

cudaError_t backward_tuned(Flavour f, const float *g, const float *u, const float *W, float *grad_u, float *grad_W,
                           const PredictShape &s, cudaStream_t stream) {
    switch (padded_k(s.in_dim)) {
        case 4: return backward_km<4>(f, g, u, W, grad_u, grad_W, s, stream);
        case 8: return backward_km<8>(f, g, u, W, grad_u, grad_W, s, stream);
        default: return backward_km<16>(f, g, u, W, grad_u, grad_W, s, stream);
    }
}

cudaError_t backward_v1(const float *g, const float *u, const float *W, float *grad_u, float *grad_W,
                        const PredictShape &s, cudaStream_t stream) {
    if (grad_u) {
        cudaError_t err = grad_u_v1(g, W, grad_u, s, stream);
        if (err != cudaSuccess) return err;
    }
    if (grad_W) return grad_W_v1(g, u, grad_W, s, stream);
    return cudaSuccess;
}

cudaError_t backward_v2(const float *g, const float *u, const float *W, float *grad_u, float *grad_W,
                        const PredictShape &s, cudaStream_t stream) {
    if (!tuned_supported(s)) return backward_v1(g, u, W, grad_u, grad_W, s, stream);
    if (grad_u) {
        cudaError_t err = backward_tuned(Flavour::grad_u, g, u, W, grad_u, grad_W, s, stream);
        if (err != cudaSuccess) return err;
    }
    if (grad_W) return backward_tuned(Flavour::grad_W, g, u, W, grad_u, grad_W, s, stream);
    return cudaSuccess;
}

cudaError_t backward_v3(const float *g, const float *u, const float *W, float *grad_u, float *grad_W,
                        const PredictShape &s, cudaStream_t stream) {
    if (!tuned_supported(s)) return backward_v1(g, u, W, grad_u, grad_W, s, stream);
    if (!grad_u || !grad_W) return backward_v2(g, u, W, grad_u, grad_W, s, stream);
    return backward_tuned(Flavour::fused, g, u, W, grad_u, grad_W, s, stream);
}

}  // namespace

int forward_version_count() { return 2; }
int backward_version_count() { return 3; }

const char *forward_version_name(int version) {
    switch (version) {
        case 1: return "blog_naive";
        case 2: return "tuned";
        default: return nullptr;
    }
}

const char *backward_version_name(int version) {
    switch (version) {
        case 1: return "blog_naive";
        case 2: return "tuned";
        case 3: return "fused";
        default: return nullptr;
    }
}

cudaError_t predict_forward(int version, const float *u, const float *W, float *u_hat, const PredictShape &shape,
                            cudaStream_t stream) {
    if (!valid_shape(shape) || !u || !W || !u_hat) return cudaErrorInvalidValue;
    switch (version) {
        case 1: return forward_v1(u, W, u_hat, shape, stream);
        case 2: return forward_v2(u, W, u_hat, shape, stream);
        default: return cudaErrorInvalidValue;
    }
}

cudaError_t predict_backward(int version, const float *g, const float *u, const float *W, float *grad_u,
                             float *grad_W, const PredictShape &shape, cudaStream_t stream) {
    if (!valid_shape(shape) || !g || (!grad_u && !grad_W)) return cudaErrorInvalidValue;
    if ((grad_u && !W) || (grad_W && !u)) return cudaErrorInvalidValue;
    switch (version) {
        case 1: return backward_v1(g, u, W, grad_u, grad_W, shape, stream);
        case 2: return backward_v2(g, u, W, grad_u, grad_W, shape, stream);
        case 3: return backward_v3(g, u, W, grad_u, grad_W, shape, stream);
        default: return cudaErrorInvalidValue;
    }
}

}  // namespace halcaps::cuda_reference

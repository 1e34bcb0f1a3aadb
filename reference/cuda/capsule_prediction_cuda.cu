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

// ---------------------------------------------------------------------------
// Tiled backward kernel (versions 2 and 3).
//
// The two gradients want g in different orders: grad_W[i, je, :] reduces
// over b (a thread owning je walks rows), grad_u[b, i, :] reduces over je (a
// thread owning row b walks je). A "thread owns je" grad_u would have to sum
// K partials per thread across all threads of a row, K times more data than
// the g it read. So g goes through shared memory in tiles of 32 rows x JC
// columns, and each part reads the tile in its own order:
//  - grad_W: thread (xw, yw) owns VW consecutive je (column group xw) and
//    accumulates VW x KM sums over rows yw, yw + TYW, ... of the tiles, with
//    u[b, i, :] from the staged u rows (a broadcast). After the last tile of
//    an (i, chunk) the TYW row-threads of each column are summed through a
//    small shared buffer and stored.
//  - grad_u: lane = row of the tile, warp = one of 8 slices of the tile's
//    columns; a lane walks its row's slice (conflict-free: the tile's row
//    stride is padded so 32 rows hit distinct banks) against W[i, je, :]
//    from shared memory (the same je for all lanes: a broadcast); then the
//    8 slice partials of each (row, k) are summed and stored.
//
// The kernel is persistent: a grid of (blocks per SM x SMs) blocks walks the
// work items (an input capsule i for fused and grad_W, an (i, 32-row tile)
// for grad_u alone) as one sequence of steps (item, column chunk, tile),
// and one cp.async pipeline of NS stages runs along that sequence: while a
// step is computed, the next NS-1 steps' g tiles, u rows and W slices are
// in flight, across item and chunk boundaries, so no block ever starts
// cold and HBM keeps tens of KB per SM outstanding.
// Columns come in chunks of JC <= 256 (128 for K = 16) so a stage stays
// near 27 KB; for JE > JC the grad_u of later chunks is added to what the
// first stored (the same block does all chunks of an item).
// ---------------------------------------------------------------------------
constexpr int kTileRows = 32;  // one row per lane in the grad_u part
constexpr int kWarps = kThreads / 32;

struct TiledArgs {
    i64 B, I;
    int JE, K;
    int JC;        // columns per chunk (multiple of VEC)
    int LDG;       // row stride of a staged g tile, in floats
    int TXW, TYW;  // grad_W layout: column groups x row-threads
    int nchunks;   // ceil(JE / JC)
    int tiles;     // tiles per (item, chunk): all of B (GW), or 1 (grad_u alone)
    i64 items;     // I (GW), or I * ceil(B / 32) (grad_u alone)
    bool w_vec, u_vec, gW_vec, gu_vec;  // K == KM and the pointer 16-byte aligned
};

// je per grad_W thread: VEC, but 2 for K = 16 (64 accumulators at most).
template <int KM, int VEC>
__host__ __device__ constexpr int grad_w_vec() {
    return KM == 16 && VEC == 4 ? 2 : VEC;
}

template <int KM, int VEC, bool GU, bool GW>
struct TiledSmem {  // in floats; every part a multiple of 4
    // One stage: g tile [32][LDG], u rows [32][KM] (GW), W slice [JC][KM] (GU).
    __host__ __device__ static int u_off(int LDG) { return kTileRows * LDG; }
    __host__ __device__ static int w_off(int LDG) { return u_off(LDG) + (GW ? kTileRows * KM : 0); }
    __host__ __device__ static int stage(int LDG, int JC) { return w_off(LDG) + (GU ? JC * KM : 0); }
    // After the stages: the grad_u partials [kWarps][32][KM] (GU), also the
    // grad_W reduction buffer [kThreads][KM] (GW).
    __host__ __device__ static int buf() {
        const int part = GU ? kWarps * kTileRows * KM : 0, wred = GW ? kThreads * KM : 0;
        return part > wred ? part : wred;
    }
    static size_t bytes(int NS, int LDG, int JC) { return size_t(NS * stage(LDG, JC) + buf()) * sizeof(float); }
};

// Position in a block's sequence of steps.
struct Cursor {
    i64 item;
    int c, m;  // column chunk, tile within the (item, chunk)
    __device__ void advance(const TiledArgs &a) {
        if (++m == a.tiles) {
            m = 0;
            if (++c == a.nchunks) c = 0, item += gridDim.x;
        }
    }
};

template <int KM, int VEC, bool GU, bool GW, int NS>
__global__ void __launch_bounds__(kThreads, 2) backward_tiled_kernel(const float *__restrict__ g,
                                                                     const float *__restrict__ u,
                                                                     const float *__restrict__ W,
                                                                     float *__restrict__ grad_u,
                                                                     float *__restrict__ grad_W, TiledArgs a) {
    using Smem = TiledSmem<KM, VEC, GU, GW>;
    constexpr int Q = KM / 4, RT = kTileRows;
    constexpr int VW = grad_w_vec<KM, VEC>();  // je per grad_W thread
    extern __shared__ float4 smem_f4[];
    float *const stages = reinterpret_cast<float *>(smem_f4);
    const int LDG = a.LDG, stage_size = Smem::stage(LDG, a.JC);
    float4 *const buf = reinterpret_cast<float4 *>(stages + NS * stage_size);

    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    const i64 I = a.I, B = a.B;
    const int JE = a.JE, K = a.K;
    const i64 ntiles_all = (B + RT - 1) / RT;
    const int xw = t % a.TXW, yw = t / a.TXW;

    // Where a step's data lives: input capsule, first row, rows, columns.
    struct Where {
        i64 i, tb;
        int nrows, c0, jc;
    };
    auto where = [&](const Cursor &s) {
        Where w;
        const i64 tile = GW ? s.m : s.item % ntiles_all;  // grad_u alone: one tile per item
        w.i = GW ? s.item : s.item / ntiles_all;
        w.tb = tile * RT;
        w.nrows = static_cast<int>(min64(RT, B - w.tb));
        w.c0 = s.c * a.JC;
        w.jc = min(a.JC, JE - w.c0);
        return w;
    };

    // Copies step s's data into stage `st`; always commits a group (maybe
    // empty) so that group counts stay uniform over the block.
    auto issue = [&](const Cursor &s, int st) {
        if (s.item < a.items) {
            const Where w = where(s);
            float *gs = stages + st * stage_size;
            const int ngroups = w.jc / VEC;
            const int srs = kThreads / ngroups, sc = t % ngroups;  // thread t: column group sc of rows t/ngroups + k*srs
            const float *src = g + (w.tb * I + w.i) * JE + w.c0 + sc * VEC;
            for (int r = t / ngroups < srs ? t / ngroups : RT; r < w.nrows; r += srs)
                __pipeline_memcpy_async(gs + r * LDG + sc * VEC, src + r * I * JE, VEC * sizeof(float));
            if (GW) {
                float *us = gs + Smem::u_off(LDG);
                if (a.u_vec) {
                    for (int e = t; e < w.nrows * Q; e += kThreads)
                        __pipeline_memcpy_async(us + 4 * e, u + ((w.tb + e / Q) * I + w.i) * KM + 4 * (e % Q), 16);
                } else {
                    for (int e = t; e < w.nrows * KM; e += kThreads) {
                        const int r = e / KM, k = e % KM;
                        if (k < K) __pipeline_memcpy_async(us + e, u + ((w.tb + r) * I + w.i) * K + k, 4);
                        else us[e] = 0.0f;
                    }
                }
            }
            if (GU) {
                float *ws = gs + Smem::w_off(LDG);
                if (a.w_vec) {
                    const float *src_w = W + (w.i * JE + w.c0) * KM;
                    for (int e = t; e < w.jc * Q; e += kThreads) __pipeline_memcpy_async(ws + 4 * e, src_w + 4 * e, 16);
                } else {
                    for (int e = t; e < w.jc * KM; e += kThreads) {
                        const int je = e / KM, k = e % KM;
                        if (k < K) __pipeline_memcpy_async(ws + e, W + (w.i * JE + w.c0 + je) * K + k, 4);
                        else ws[e] = 0.0f;
                    }
                }
            }
        }
        __pipeline_commit();
    };

    Cursor ahead{blockIdx.x, 0, 0}, cur{blockIdx.x, 0, 0};
#pragma unroll
    for (int n = 0; n < NS - 1; ++n) {
        issue(ahead, n);
        ahead.advance(a);
    }
    float acc[VW][KM];
    for (int n = 0; cur.item < a.items; ++n, cur.advance(a)) {
        __pipeline_wait_prior(NS - 2);  // this thread's copies for step n have landed
        __syncthreads();                // everyone's have; everyone is done with step n-1
        issue(ahead, (n + NS - 1) % NS);  // refills step n-1's stage
        ahead.advance(a);

        const Where w = where(cur);
        const float *gs = stages + (n % NS) * stage_size;
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
#ifndef HC_NOUNROLL
#pragma unroll 4
#endif
                for (int r = yw; r < w.nrows; r += a.TYW) {
                    float gv[VW], ur[KM];
                    load_smem_vec<VW>(gv, gs + r * LDG + xw * VW);
                    load_u_row<KM>(ur, us + r * KM);
#pragma unroll
                    for (int v = 0; v < VW; ++v)
#pragma unroll
                        for (int k = 0; k < KM; ++k) acc[v][k] = fmaf(gv[v], ur[k], acc[v][k]);
                }
            }
        }

        if (GU) {
            const float *ws = gs + Smem::w_off(LDG);
            const int ngroups = w.jc / VEC;
            const int per_warp = (ngroups + kWarps - 1) / kWarps;
            const int q_end = min(ngroups, (warp + 1) * per_warp);
            float p[KM];
#pragma unroll
            for (int k = 0; k < KM; ++k) p[k] = 0.0f;
            if (lane < w.nrows) {
#ifndef HC_NOUNROLL
#pragma unroll 2
#endif
                for (int q = warp * per_warp; q < q_end; ++q) {
                    float gv[VEC];
                    load_smem_vec<VEC>(gv, gs + lane * LDG + q * VEC);
#pragma unroll
                    for (int v = 0; v < VEC; ++v) {
                        float wr[KM];
                        load_u_row<KM>(wr, ws + (q * VEC + v) * KM);
#pragma unroll
                        for (int k = 0; k < KM; ++k) p[k] = fmaf(gv[v], wr[k], p[k]);
                    }
                }
            }
#pragma unroll
            for (int q = 0; q < Q; ++q)
                buf[(warp * RT + lane) * Q + q] = make_float4(p[4 * q], p[4 * q + 1], p[4 * q + 2], p[4 * q + 3]);
            __syncthreads();  // all slices' partials are in buf
            for (int o = t; o < w.nrows * Q; o += kThreads) {
                float4 sum = buf[o];
#pragma unroll
                for (int s = 1; s < kWarps; ++s) {
                    const float4 pv = buf[s * RT * Q + o];
                    sum.x += pv.x, sum.y += pv.y, sum.z += pv.z, sum.w += pv.w;
                }
                const int r = o / Q, q = o % Q;
                float *dst = grad_u + ((w.tb + r) * I + w.i) * K + 4 * q;
                if (a.gu_vec) {
                    float4 *d4 = reinterpret_cast<float4 *>(dst);
                    if (w.c0 > 0) {
                        const float4 old = *d4;
                        sum.x += old.x, sum.y += old.y, sum.z += old.z, sum.w += old.w;
                    }
                    *d4 = sum;
                } else {
                    const float sv[4] = {sum.x, sum.y, sum.z, sum.w};
#pragma unroll
                    for (int c = 0; c < 4; ++c)
                        if (4 * q + c < K) dst[c] = w.c0 > 0 ? dst[c] + sv[c] : sv[c];
                }
            }
            // buf is rewritten only after the next step's barrier (or the
            // barrier that opens the grad_W flush below).
        }

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
                    for (int y = 0; y < a.TYW; ++y) {
                        const float4 pv = buf[y * a.TXW * Q + o];
                        sum.x += pv.x, sum.y += pv.y, sum.z += pv.z, sum.w += pv.w;
                    }
                    const int je = w.c0 + (o / Q) * VW + v, q = o % Q;
                    float *dst = grad_W + (w.i * JE + je) * K + 4 * q;
                    if (a.gW_vec) {
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
    __pipeline_wait_prior(0);  // only empty groups remain
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
int g_fwd_vregs = 64;

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
    switch (pick_v(JE, KM, g_fwd_vregs, {u_hat})) {
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

int g_bwd_tiled = 1;    // DEV KNOB

int g_stages = 3;  // DEV KNOB
int g_persist = 1;  // DEV KNOB

template <int KM, int VEC, bool GU, bool GW, int NS>
cudaError_t launch_backward_tiled(const float *g, const float *u, const float *W, float *grad_u, float *grad_W,
                                  const PredictShape &s, cudaStream_t stream) {
    using Smem = TiledSmem<KM, VEC, GU, GW>;
    const i64 B = s.batch, I = s.in_caps, JE = s.out_caps * s.out_dim;
    const int K = static_cast<int>(s.in_dim);
    TiledArgs a;
    a.B = B;
    a.I = I;
    a.JE = static_cast<int>(JE);
    a.K = K;
    // Columns per chunk: at most 256 (one column group per grad_W thread)
    // and 2048/KM (a stage stays near 27 KB).
    a.JC = static_cast<int>(std::min<i64>(JE, std::min(256, 2048 / KM)));
    // Row stride of a staged tile: odd in 16-byte units for VEC = 4 (odd in
    // floats for VEC = 1) so the 32 rows read by a warp fall in distinct banks.
    if (VEC == 4) a.LDG = a.JC + ((a.JC / 4) % 2 == 0 ? 4 : 8);
    else a.LDG = a.JC % 2 == 0 ? a.JC + 1 : a.JC;
    a.TXW = a.JC / grad_w_vec<KM, VEC>();
    a.TYW = kThreads / a.TXW;
    a.nchunks = static_cast<int>((JE + a.JC - 1) / a.JC);
    const i64 ntiles = (B + kTileRows - 1) / kTileRows;
    if (GW) {
        a.tiles = static_cast<int>(std::min<i64>(ntiles, INT_MAX));
        a.items = I;
    } else {
        a.tiles = 1;
        a.items = I * ntiles;
    }
    if (ntiles > INT_MAX) return cudaErrorInvalidValue;
    a.w_vec = K == KM && aligned16(W);
    a.u_vec = K == KM && aligned16(u);
    a.gW_vec = K == KM && aligned16(grad_W);
    a.gu_vec = K == KM && aligned16(grad_u);

    const size_t smem = Smem::bytes(NS, a.LDG, a.JC);
    auto kernel = backward_tiled_kernel<KM, VEC, GU, GW, NS>;
    cudaError_t err = cudaSuccess;
    if (smem > 48 * 1024) {
        err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
        if (err != cudaSuccess) return err;
    }
    // Persistent grid: as many blocks as fit on the device at once.
    DeviceLimits d;
    if ((err = device_limits(&d)) != cudaSuccess) return err;
    int per_sm = 0;
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem);
    if (err != cudaSuccess) return err;
    if (per_sm < 1) return cudaErrorInvalidConfiguration;
    const i64 blocks = g_persist ? std::min<i64>(a.items, i64(per_sm) * d.sms) : a.items;
    kernel<<<static_cast<unsigned>(blocks), kThreads, smem, stream>>>(g, u, W, grad_u, grad_W, a);
    return cudaGetLastError();
}

template <int KM, bool GU, bool GW>
cudaError_t backward_tiled_vec(const float *g, const float *u, const float *W, float *grad_u, float *grad_W,
                               const PredictShape &s, cudaStream_t stream) {
    const i64 JE = s.out_caps * s.out_dim;
    if (JE % 4 == 0 && aligned16(g)) {
        if (g_stages == 2) return launch_backward_tiled<KM, 4, GU, GW, 2>(g, u, W, grad_u, grad_W, s, stream);
        if (g_stages == 4) return launch_backward_tiled<KM, 4, GU, GW, 4>(g, u, W, grad_u, grad_W, s, stream);
        return launch_backward_tiled<KM, 4, GU, GW, 3>(g, u, W, grad_u, grad_W, s, stream);
    }
    return launch_backward_tiled<KM, 1, GU, GW, 3>(g, u, W, grad_u, grad_W, s, stream);
}

template <int KM, int V>
cudaError_t backward_flavour(Flavour f, const float *g, const float *u, const float *W, float *grad_u,
                             float *grad_W, const PredictShape &s, cudaStream_t stream) {
    if (g_bwd_tiled) {
        switch (f) {
            case Flavour::grad_u: return backward_tiled_vec<KM, true, false>(g, u, W, grad_u, grad_W, s, stream);
            case Flavour::grad_W: return backward_tiled_vec<KM, false, true>(g, u, W, grad_u, grad_W, s, stream);
            default: return backward_tiled_vec<KM, true, true>(g, u, W, grad_u, grad_W, s, stream);
        }
    }
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

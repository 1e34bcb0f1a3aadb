// Store-order study for the capsule prediction forward (issue 3): how fast
// can u_hat [B, I, J*E] be written on this GPU, and does the order in which
// blocks write it matter?
//
// The forward writes ~9x more bytes than it reads, so its floor is the write
// bandwidth. Our kernels (Halide `batch_rows`, hand `cuda_tuned`) give a
// block one input capsule i and walk its batch rows: each row is a 640-byte
// run (MNIST), the next row's run 737 KB away. This program times, on
// u_hat-sized buffers:
//   memset          cudaMemsetAsync, the driver's write kernel;
//   flat            16-byte stores, consecutive threads at consecutive addresses;
//   capsule_walk    a block per capsule walking its batch rows (batch_rows' order),
//                   a constant stored, V floats a thread;
//   runs_N_R        a block per N consecutive capsules and R batch rows: each
//                   row is an N*640-byte run, written by 16-byte stores;
//   predict_N_R     runs_N_R computing u_hat: a thread keeps W for 4 outputs
//                   in registers, reads its u row through L1 (shared by the 40
//                   threads of a capsule), checked against a float64 reference.
// Build: nvcc -std=c++17 -O3 -arch=sm_90 bench/studies/predict_store_order.cu -o predict_store_order
// Run:   ./predict_store_order [batch ...]       (default 128 512)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cuda_check.h"

namespace {

constexpr int kIn = 1152, kOut = 10, kDim = 16, kK = 8, kJE = kOut * kDim;

using halcaps::bench::check;

__global__ void flat_kernel(float4 *out, long n4) {
    const float4 v = make_float4(1.f, 2.f, 3.f, 4.f);
    for (long x = blockIdx.x * long(blockDim.x) + threadIdx.x; x < n4; x += long(gridDim.x) * blockDim.x)
        __stcs(out + x, v);
}

// One T a thread in address order, evict-first or plain stores.
template <typename T, bool kStreaming>
__global__ void flat_store_kernel(T *out, long n) {
    const long x = blockIdx.x * long(blockDim.x) + threadIdx.x;
    if (x >= n) return;
    T v{};
    if constexpr (kStreaming)
        __stcs(out + x, v);
    else
        out[x] = v;
}

// batch_rows' order: block = capsule i, (JE / V) x TY threads; thread walks
// rows y, y + TY, ...
template <int V>
__global__ void capsule_walk_kernel(float *out, int B, int TY) {
    const int groups = kJE / V;
    const int x = threadIdx.x % groups, y = threadIdx.x / groups;
    const long i = blockIdx.x;
    for (int b = y; b < B; b += TY) {
        float *p = out + (b * long(kIn) + i) * kJE + x * V;
        if constexpr (V == 4)
            __stcs(reinterpret_cast<float4 *>(p), make_float4(1.f, 2.f, 3.f, float(b)));
        else
            __stcs(reinterpret_cast<float2 *>(p), make_float2(1.f, float(b)));
    }
}

// Block = N consecutive capsules x R batch rows; thread t owns float4 t of
// the N*JE-float run of each row.
__global__ void runs_kernel(float *out, int B, int N, int R) {
    const long i0 = long(blockIdx.x) * N;
    const int b0 = blockIdx.y * R, b1 = min(B, b0 + R);
    for (int b = b0; b < b1; ++b) {
        float *p = out + (b * long(kIn) + i0) * kJE + threadIdx.x * 4;
        __stcs(reinterpret_cast<float4 *>(p), make_float4(1.f, 2.f, 3.f, float(b)));
    }
}

// The compute kernels' shared pieces: W[i, q*V .. q*V + V, :] into
// registers, one row's V outputs from its u row (two float4s), the V
// outputs stored (evict-first or plain), and one 16-byte cp.async.
template <int V>
__device__ __forceinline__ void load_w(float (&w)[V][kK], const float *__restrict__ W, long i, int q) {
    const float4 *w4 = reinterpret_cast<const float4 *>(W + (i * kJE + q * V) * kK);
#pragma unroll
    for (int v = 0; v < V; ++v) {
        const float4 lo = __ldg(w4 + 2 * v), hi = __ldg(w4 + 2 * v + 1);
        w[v][0] = lo.x, w[v][1] = lo.y, w[v][2] = lo.z, w[v][3] = lo.w;
        w[v][4] = hi.x, w[v][5] = hi.y, w[v][6] = hi.z, w[v][7] = hi.w;
    }
}

template <int V>
__device__ __forceinline__ void row_outputs(float (&acc)[V], const float (&w)[V][kK], float4 lo, float4 hi) {
    const float ur[kK] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
    for (int v = 0; v < V; ++v) {
        acc[v] = 0.f;
#pragma unroll
        for (int k = 0; k < kK; ++k) acc[v] = fmaf(w[v][k], ur[k], acc[v]);
    }
}

template <int V, bool kStreaming = true>
__device__ __forceinline__ void store_outputs(float *p, const float (&acc)[V]) {
    if constexpr (V == 4) {
        const float4 o = make_float4(acc[0], acc[1], acc[2], acc[3]);
        if constexpr (kStreaming)
            __stcs(reinterpret_cast<float4 *>(p), o);
        else
            *reinterpret_cast<float4 *>(p) = o;
    } else {
        const float2 o = make_float2(acc[0], acc[1]);
        if constexpr (kStreaming)
            __stcs(reinterpret_cast<float2 *>(p), o);
        else
            *reinterpret_cast<float2 *>(p) = o;
    }
}

__device__ __forceinline__ void copy16_async(float4 *dst_shared, const float4 *src) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(dst_shared));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}

// runs_kernel computing u_hat: thread t is capsule i0 + t / 40, outputs
// (t % 40) * 4 .. + 4 of its JE row; W's 4 x 8 values in registers.
__global__ void __launch_bounds__(1024) predict_runs_kernel(const float *__restrict__ u, const float *__restrict__ W,
                                                            float *__restrict__ u_hat, int B, int N, int R) {
    constexpr int quads = kJE / 4;
    const long i = long(blockIdx.x) * N + threadIdx.x / quads;
    const int q = threadIdx.x % quads;
    float w[4][kK];
    load_w<4>(w, W, i, q);
    const int b0 = blockIdx.y * R, b1 = min(B, b0 + R);
#pragma unroll 4
    for (int b = b0; b < b1; ++b) {
        const float4 *u4 = reinterpret_cast<const float4 *>(u + (b * long(kIn) + i) * kK);
        float acc[4];
        row_outputs<4>(acc, w, __ldg(u4), __ldg(u4 + 1));
        store_outputs<4>(u_hat + (b * long(kIn) + i) * kJE + q * 4, acc);
    }
}

// u_hat with a balanced grid: block (x, y) owns capsules x*N .. x*N+N-1 and
// rows y, y + Y, ... (strided) or the y-th of Y equal row ranges; thread t
// owns V outputs of capsule x*N + t / (JE/V). W's V x 8 values in registers.
// kStage: the block's u rows are copied to shared memory first (cp.async),
// else each row is read through L1.
template <int V, bool kStage>
__global__ void __launch_bounds__(640) predict_balanced_kernel(const float *__restrict__ u, const float *__restrict__ W,
                                                               float *__restrict__ u_hat, int B, int N, bool strided) {
    extern __shared__ float4 u_stage[];  // [row][capsule][2] float4
    constexpr int per_cap = kJE / V;
    const int i0 = blockIdx.x * N;
    const int c = threadIdx.x / per_cap, q = threadIdx.x % per_cap;
    const long i = i0 + c;
    const int Y = gridDim.y, y = blockIdx.y;
    const int rows = strided ? (B - y + Y - 1) / Y : (B * (y + 1)) / Y - (B * y) / Y;
    const int first = strided ? y : (B * y) / Y, step = strided ? Y : 1;
    if constexpr (kStage) {
        for (int x = threadIdx.x; x < rows * N * 2; x += blockDim.x) {
            const int r = x / (N * 2), rest = x % (N * 2);
            copy16_async(u_stage + x,
                         reinterpret_cast<const float4 *>(u + (long(first + r * step) * kIn + i0) * kK) + rest);
        }
        asm volatile("cp.async.commit_group;\n" ::);
    }
    float w[V][kK];
    load_w<V>(w, W, i, q);
    if constexpr (kStage) {
        asm volatile("cp.async.wait_all;\n" ::);
        __syncthreads();
    }
#pragma unroll 4
    for (int r = 0; r < rows; ++r) {
        const long b = first + long(r) * step;
        float4 lo, hi;
        if constexpr (kStage) {
            lo = u_stage[(r * N + c) * 2], hi = u_stage[(r * N + c) * 2 + 1];
        } else {
            const float4 *u4 = reinterpret_cast<const float4 *>(u + (b * kIn + i) * kK);
            lo = __ldg(u4), hi = __ldg(u4 + 1);
        }
        float acc[V];
        row_outputs<V>(acc, w, lo, hi);
        store_outputs<V>(u_hat + (b * kIn + i) * kJE + q * V, acc);
    }
}

// predict_balanced_kernel<V, true> with three knobs: kStreaming (evict-first
// stores, else plain), kFirstRows (> 0: the first kFirstRows rows of u are
// a cp.async group of their own, waited for alone, so that stores start
// before the rest of u has arrived), kMinBlocks (the register cap, through
// __launch_bounds__(kMaxThreads, kMinBlocks)). Rows strided: y, y + Y, ...
template <int V, bool kStreaming, int kFirstRows, int kMinBlocks, int kMaxThreads = 256>
__global__ void __launch_bounds__(kMaxThreads, kMinBlocks)
    predict_staged_kernel(const float *__restrict__ u, const float *__restrict__ W, float *__restrict__ u_hat, int B,
                          int N) {
    extern __shared__ float4 u_stage[];  // [row][capsule][2] float4
    constexpr int per_cap = kJE / V;
    const int i0 = blockIdx.x * N;
    const int c = threadIdx.x / per_cap, q = threadIdx.x % per_cap;
    const long i = i0 + c;
    const int Y = gridDim.y, y = blockIdx.y;
    const int rows = (B - y + Y - 1) / Y;
    auto stage = [&](int r_begin, int r_end) {
        for (int x = r_begin * N * 2 + threadIdx.x; x < r_end * N * 2; x += blockDim.x) {
            const int r = x / (N * 2), rest = x % (N * 2);
            copy16_async(u_stage + x, reinterpret_cast<const float4 *>(u + (long(y + r * Y) * kIn + i0) * kK) + rest);
        }
        asm volatile("cp.async.commit_group;\n" ::);
    };
    const int first = kFirstRows > 0 ? min(rows, kFirstRows) : rows;
    stage(0, first);
    if (first < rows) stage(first, rows);
    float w[V][kK];
    load_w<V>(w, W, i, q);
    auto compute_rows = [&](int r_begin, int r_end) {
#pragma unroll 4
        for (int r = r_begin; r < r_end; ++r) {
            const long b = y + long(r) * Y;
            float acc[V];
            row_outputs<V>(acc, w, u_stage[(r * N + c) * 2], u_stage[(r * N + c) * 2 + 1]);
            store_outputs<V, kStreaming>(u_hat + (b * kIn + i) * kJE + q * V, acc);
        }
    };
    if (first < rows) {
        asm volatile("cp.async.wait_group 1;\n" ::);
        __syncthreads();
        compute_rows(0, first);
    }
    asm volatile("cp.async.wait_all;\n" ::);
    __syncthreads();
    compute_rows(first < rows ? first : 0, rows);
}

template <class F>
double median_us(F launch, int repeats = 30) {
    cudaEvent_t a, b;
    check(cudaEventCreate(&a), "event");
    check(cudaEventCreate(&b), "event");
    for (int w = 0; w < 5; ++w) launch();
    std::vector<float> ms;
    for (int r = 0; r < repeats; ++r) {
        check(cudaEventRecord(a), "record");
        launch();
        check(cudaEventRecord(b), "record");
        check(cudaEventSynchronize(b), "sync");
        float t = 0;
        check(cudaEventElapsedTime(&t, a, b), "elapsed");
        ms.push_back(t);
    }
    check(cudaGetLastError(), "launch");
    std::sort(ms.begin(), ms.end());
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return 1e3 * ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char **argv) {
    std::vector<int> batches;
    for (int a = 1; a < argc; ++a) batches.push_back(std::atoi(argv[a]));
    if (batches.empty()) batches = {128, 512};
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "properties");
    std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    for (const int B : batches) {
        const long out_n = long(B) * kIn * kJE, u_n = long(B) * kIn * kK, w_n = long(kIn) * kJE * kK;
        const double out_mb = out_n * 4e-6, floor_mb = (out_n + u_n + w_n) * 4e-6;
        float *out = nullptr, *u = nullptr, *W = nullptr;
        check(cudaMalloc(&out, out_n * 4), "malloc");
        check(cudaMalloc(&u, u_n * 4), "malloc");
        check(cudaMalloc(&W, w_n * 4), "malloc");
        std::mt19937 rng(1234 + B);
        std::uniform_real_distribution<float> dist(-1.f, 1.f);
        std::vector<float> hu(u_n), hw(w_n);
        for (auto &x : hu) x = dist(rng);
        for (auto &x : hw) x = dist(rng);
        check(cudaMemcpy(u, hu.data(), u_n * 4, cudaMemcpyHostToDevice), "copy");
        check(cudaMemcpy(W, hw.data(), w_n * 4, cudaMemcpyHostToDevice), "copy");
        std::printf("\nB = %d: u_hat %.1f MB, bytes floor %.1f MB\n", B, out_mb, floor_mb);
        std::printf("%-46s %9s %12s %14s\n", "kernel", "us", "write GB/s", "floor GB/s");
        auto row = [&](const std::string &name, double us) {
            std::printf("%-46s %9.1f %12.0f %14.0f\n", name.c_str(), us, out_mb * 1e3 / us, floor_mb * 1e3 / us);
        };
        row("memset", median_us([&] { cudaMemsetAsync(out, 0, out_n * 4); }));
        row("flat_1block_per_float4", median_us([&] {
                flat_kernel<<<unsigned(out_n / 4 / 256), 256>>>(reinterpret_cast<float4 *>(out), out_n / 4);
            }));
        auto flat_store = [&](auto *typed_out, auto kernel, const char *name) {
            const long n = out_n * 4 / long(sizeof(*typed_out));
            row(name, median_us([&] { kernel<<<unsigned((n + 255) / 256), 256>>>(typed_out, n); }));
        };
        flat_store(reinterpret_cast<float4 *>(out), flat_store_kernel<float4, true>, "flat_16B_cs");
        flat_store(reinterpret_cast<float4 *>(out), flat_store_kernel<float4, false>, "flat_16B_plain");
        flat_store(reinterpret_cast<float2 *>(out), flat_store_kernel<float2, true>, "flat_8B_cs");
        flat_store(reinterpret_cast<float2 *>(out), flat_store_kernel<float2, false>, "flat_8B_plain");
        flat_store(out, flat_store_kernel<float, true>, "flat_4B_cs");
        flat_store(out, flat_store_kernel<float, false>, "flat_4B_plain");
        row("capsule_walk_v2_80x2", median_us([&] { capsule_walk_kernel<2><<<kIn, 160>>>(out, B, 2); }));
        for (int N : {4, 8})
            for (int R : {8, 32}) {
                const dim3 grid(kIn / N, (B + R - 1) / R);
                row("runs_" + std::to_string(N) + "_" + std::to_string(R),
                    median_us([&] { runs_kernel<<<grid, N * kJE / 4>>>(out, B, N, R); }));
            }
        // Each u_hat kernel is checked against a float64 reference (every 7th
        // output, NaN-poisoned first) before it is timed.
        std::vector<float> h(out_n);
        auto checked_row = [&](const std::string &name, auto launch) {
            check(cudaMemset(out, 0xFF, out_n * 4), "poison");
            launch();
            check(cudaDeviceSynchronize(), name.c_str());
            check(cudaMemcpy(h.data(), out, out_n * 4, cudaMemcpyDeviceToHost), "copy back");
            double worst = 0;
            for (long x = 0; x < out_n; x += 7) {
                const long je = x % kJE, i = (x / kJE) % kIn, b = x / (long(kJE) * kIn);
                double ref = 0, mag = 0;
                for (int k = 0; k < kK; ++k) {
                    const double t = double(hw[(i * kJE + je) * kK + k]) * hu[(b * kIn + i) * kK + k];
                    ref += t, mag += std::fabs(t);
                }
                const double err = std::fabs(h[x] - ref) / (mag + 1e-30);
                if (!(err <= worst)) worst = std::isnan(err) ? INFINITY : err;
            }
            if (worst > 1e-6) {
                std::printf("%-46s WRONG (relative error %.3g)\n", name.c_str(), worst);
                return;
            }
            row(name, median_us(launch));
        };
        for (int N : {4, 8})
            for (int R : {32, 64}) {
                const dim3 grid(kIn / N, (B + R - 1) / R);
                checked_row("predict_runs_" + std::to_string(N) + "_" + std::to_string(R),
                            [&] { predict_runs_kernel<<<grid, N * kJE / 4>>>(u, W, out, B, N, R); });
            }
        // The staged kernel: grid (I / N, Y) (rows strided). `window`: launched
        // on a stream whose L2 access policy window covers u_hat (as much of it
        // as the device allows) with the streaming property on hit and miss.
        int max_window = 0;
        check(cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, 0), "window size");
        cudaStream_t plain_stream = nullptr, window_stream = nullptr;
        check(cudaStreamCreate(&plain_stream), "stream");
        check(cudaStreamCreate(&window_stream), "stream");
        cudaStreamAttrValue policy{};
        policy.accessPolicyWindow.base_ptr = out;
        policy.accessPolicyWindow.num_bytes = std::min<size_t>(out_n * 4, size_t(max_window));
        policy.accessPolicyWindow.hitRatio = 1.0f;
        policy.accessPolicyWindow.hitProp = cudaAccessPropertyStreaming;
        policy.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
        check(cudaStreamSetAttribute(window_stream, cudaStreamAttributeAccessPolicyWindow, &policy), "window");
        std::printf("(access policy window: %.1f of %.1f MB)\n", policy.accessPolicyWindow.num_bytes * 1e-6, out_mb);
        auto staged = [&](auto kernel, const char *label, int V, int N, int Y, bool window) {
            const int threads = N * kJE / V;
            const int rows = (B + Y - 1) / Y;
            const size_t smem = size_t(rows) * N * 32;
            check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024), "smem");
            int per_sm = 0;
            check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem), "occupancy");
            cudaFuncAttributes attr{};
            check(cudaFuncGetAttributes(&attr, kernel), "attributes");
            const dim3 grid(kIn / N, Y);
            char name[96];
            std::snprintf(name, sizeof name, "%s%s_n%d_y%d (%dr, %d/SM, %.2f waves)", label, window ? "_window" : "", N,
                          Y, attr.numRegs, per_sm, double(grid.x) * Y / (per_sm * prop.multiProcessorCount));
            cudaStream_t stream = window ? window_stream : plain_stream;
            checked_row(name, [&] { kernel<<<grid, threads, smem, stream>>>(u, W, out, B, N); });
        };
        for (int Y : {1, 2}) {
            staged(predict_staged_kernel<4, true, 0, 1>, "v4_cs", 4, 2, Y, false);
            staged(predict_staged_kernel<4, false, 0, 1>, "v4_plain", 4, 2, Y, false);
            staged(predict_staged_kernel<4, false, 0, 1>, "v4_plain", 4, 2, Y, true);
            staged(predict_staged_kernel<4, true, 0, 1>, "v4_cs", 4, 2, Y, true);
            staged(predict_staged_kernel<2, false, 0, 1>, "v2_plain", 2, 2, Y, false);
            staged(predict_staged_kernel<2, false, 0, 1>, "v2_plain", 2, 2, Y, true);
            staged(predict_staged_kernel<2, false, 8, 10, 160>, "v2_plain_first8_min10", 2, 2, Y, false);
            staged(predict_staged_kernel<2, false, 8, 10, 160>, "v2_plain_first8_min10", 2, 2, Y, true);
            staged(predict_staged_kernel<2, true, 8, 10, 160>, "v2_cs_first8_min10", 2, 2, Y, false);
            staged(predict_staged_kernel<2, true, 4, 10, 160>, "v2_cs_first4_min10", 2, 2, Y, false);
            staged(predict_staged_kernel<2, true, 16, 10, 160>, "v2_cs_first16_min10", 2, 2, Y, false);
            staged(predict_staged_kernel<4, true, 8, 12, 80>, "v4_cs_first8_min12", 4, 2, Y, false);
            staged(predict_staged_kernel<4, true, 8, 16, 80>, "v4_cs_first8_min16", 4, 2, Y, false);
        }
        cudaStreamDestroy(plain_stream);
        cudaStreamDestroy(window_stream);
        cudaFree(out);
        cudaFree(u);
        cudaFree(W);
    }
    return 0;
}

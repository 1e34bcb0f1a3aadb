// Study for the DigitCaps forward (issue 4): what does adding a pass's
// partial sums cost, written out and added by a second kernel (what
// `cuda_tensor` does now) against added in L2 by float atomics, one float
// or four at a time?
//
// A pass of `cuda_tensor` ends with every block holding the sums of its
// batch tile (tile_rows rows of J x E floats) over its chunk of input
// capsules. Today each block writes them to partial[chunk] and a squash
// kernel adds the chunks. An earlier study (docs/history.md:
// nvidia-h200-pass-costs, run 1) replaced that with one float atomic a
// value and found the passes 7-10 us slower each. Hopper also has
// 16-byte atomic adds (red.global.add.v4.f32), a quarter of the L2
// operations. This program times the three ways alone, at the grids the
// layer uses at MNIST b128 and b512, so that the layer need not be
// rebuilt to learn whether the 16-byte adds are cheap enough:
//   stores+add   every block stores its sums; a second kernel adds the
//                chunks of each row (float4 loads, a thread a float4);
//   atomic x1    memset of s, then every block adds its sums by one
//                atomicAdd a float;
//   atomic x4    memset of s, then one atomicAdd a float4.
// Every way's s is checked against a float64 sum on the host (relative
// error below 1e-5, else WRONG on its row and exit status 1).
//
// Build (CMake target halcaps_partial_sum_atomics, CUDA builds only):
//   cmake --build build --target halcaps_partial_sum_atomics
// Run: build/halcaps_partial_sum_atomics
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "cuda_check.h"

namespace {

using halcaps::bench::check;

constexpr int kThreads = 128;
constexpr int kRowFloats = 160;  // J x E at MNIST: 10 x 16
constexpr int kTileRows = 32;    // a block's batch tile
constexpr int kBlockFloat4s = kTileRows * kRowFloats / 4;
constexpr int kRepeats = 200;

// The value a block holds at float f of its tile: distinct for every
// block and float, so that a wrong add shows in the check.
__host__ __device__ inline float held(int tile, int chunk, int f) {
    return float((tile * 7 + chunk * 13 + f * 3) % 97) * 0.01f - 0.48f;
}

__device__ inline float4 held4(int tile, int chunk, int p) {
    return make_float4(held(tile, chunk, 4 * p), held(tile, chunk, 4 * p + 1), held(tile, chunk, 4 * p + 2),
                       held(tile, chunk, 4 * p + 3));
}

// blockIdx.x: the batch tile; blockIdx.y: the chunk.
__global__ void store_partials(float4 *partial, int tiles) {
    const int tile = blockIdx.x, chunk = blockIdx.y;
    float4 *out = partial + (size_t(chunk) * tiles + tile) * kBlockFloat4s;
    for (int p = threadIdx.x; p < kBlockFloat4s; p += kThreads) out[p] = held4(tile, chunk, p);
}

// A thread a float4 of s: the chunks' partials added in order.
__global__ void add_partials(const float4 *partial, float4 *s, int tiles, int chunks) {
    const int p = blockIdx.x * kThreads + threadIdx.x;
    const int total = tiles * kBlockFloat4s;
    if (p >= total) return;
    float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int c = 0; c < chunks; c++) {
        const float4 x = partial[size_t(c) * total + p];
        sum = make_float4(sum.x + x.x, sum.y + x.y, sum.z + x.z, sum.w + x.w);
    }
    s[p] = sum;
}

__global__ void add_atomic_x1(float *s, int tiles) {
    const int tile = blockIdx.x, chunk = blockIdx.y;
    float *out = s + size_t(tile) * kTileRows * kRowFloats;
    for (int f = threadIdx.x; f < kTileRows * kRowFloats; f += kThreads) atomicAdd(out + f, held(tile, chunk, f));
}

// 16-byte float atomics exist from sm_90 on; built for an older GPU, this
// way falls back to four float atomics (and then times nothing new).
__device__ inline void add_float4(float4 *to, float4 x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    atomicAdd(to, x);
#else
    float *f = reinterpret_cast<float *>(to);
    atomicAdd(f, x.x);
    atomicAdd(f + 1, x.y);
    atomicAdd(f + 2, x.z);
    atomicAdd(f + 3, x.w);
#endif
}

__global__ void add_atomic_x4(float4 *s, int tiles) {
    const int tile = blockIdx.x, chunk = blockIdx.y;
    float4 *out = s + size_t(tile) * kBlockFloat4s;
    for (int p = threadIdx.x; p < kBlockFloat4s; p += kThreads) add_float4(out + p, held4(tile, chunk, p));
}

enum Way { kStoresAndAdd, kAtomicX1, kAtomicX4 };
const char *const kWayNames[] = {"stores+add", "atomic x1", "atomic x4"};

void enqueue(Way way, float *partial, float *s, int tiles, int chunks, cudaStream_t stream) {
    const dim3 grid(tiles, chunks);
    const size_t s_bytes = sizeof(float) * size_t(tiles) * kTileRows * kRowFloats;
    if (way == kStoresAndAdd) {
        store_partials<<<grid, kThreads, 0, stream>>>(reinterpret_cast<float4 *>(partial), tiles);
        const int total = tiles * kBlockFloat4s;
        add_partials<<<(total + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
            reinterpret_cast<const float4 *>(partial), reinterpret_cast<float4 *>(s), tiles, chunks);
    } else {
        check(cudaMemsetAsync(s, 0, s_bytes, stream), "memset s");
        if (way == kAtomicX1) {
            add_atomic_x1<<<grid, kThreads, 0, stream>>>(s, tiles);
        } else {
            add_atomic_x4<<<grid, kThreads, 0, stream>>>(reinterpret_cast<float4 *>(s), tiles);
        }
    }
    check(cudaGetLastError(), "launch");
}

// The largest |s - float64 sum| over s, relative to the largest |sum|.
double error_of(const std::vector<float> &s, int tiles, int chunks) {
    double worst = 0.0, largest = 0.0;
    for (int tile = 0; tile < tiles; tile++) {
        for (int f = 0; f < kTileRows * kRowFloats; f++) {
            double sum = 0.0;
            for (int c = 0; c < chunks; c++) sum += held(tile, c, f);
            worst = std::max(worst, std::fabs(double(s[size_t(tile) * kTileRows * kRowFloats + f]) - sum));
            largest = std::max(largest, std::fabs(sum));
        }
    }
    return worst / std::max(largest, 1e-30);
}

}  // namespace

int main() {
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "device properties");
    std::printf("device: %s\n", prop.name);
    std::printf("%-6s %-6s %-7s %-12s %10s %12s\n", "batch", "tiles", "chunks", "way", "us/call", "rel. error");
    bool all_right = true;
    struct Grid {
        int batch, chunks;
    };
    // The chunks digitcaps_tensor_plan gives MNIST b128 and b512 on an H200.
    for (const Grid grid : {Grid{128, 64}, Grid{512, 16}}) {
        const int tiles = grid.batch / kTileRows;
        const size_t s_floats = size_t(tiles) * kTileRows * kRowFloats;
        float *partial = nullptr, *s = nullptr;
        check(cudaMalloc(&partial, sizeof(float) * s_floats * grid.chunks), "malloc partial");
        check(cudaMalloc(&s, sizeof(float) * s_floats), "malloc s");
        cudaEvent_t start, stop;
        check(cudaEventCreate(&start), "event");
        check(cudaEventCreate(&stop), "event");
        for (const Way way : {kStoresAndAdd, kAtomicX1, kAtomicX4}) {
            check(cudaMemset(s, 0xff, sizeof(float) * s_floats), "poison s");  // NaN
            enqueue(way, partial, s, tiles, grid.chunks, 0);
            std::vector<float> host(s_floats);
            check(cudaMemcpy(host.data(), s, sizeof(float) * s_floats, cudaMemcpyDeviceToHost), "copy s");
            const double error = error_of(host, tiles, grid.chunks);
            // kRepeats calls in one graph, so that the host's launch rate
            // does not set the time of these short kernels.
            cudaStream_t stream;
            check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
            cudaGraph_t graph;
            cudaGraphExec_t exec;
            check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "capture");
            for (int n = 0; n < kRepeats; n++) enqueue(way, partial, s, tiles, grid.chunks, stream);
            check(cudaStreamEndCapture(stream, &graph), "capture");
            check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
            check(cudaGraphLaunch(exec, stream), "warm up");
            check(cudaEventRecord(start, stream), "record");
            check(cudaGraphLaunch(exec, stream), "launch graph");
            check(cudaEventRecord(stop, stream), "record");
            check(cudaEventSynchronize(stop), "sync");
            float ms = 0.0f;
            check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
            check(cudaGraphExecDestroy(exec), "destroy");
            check(cudaGraphDestroy(graph), "destroy");
            check(cudaStreamDestroy(stream), "destroy");
            std::printf("%-6d %-6d %-7d %-12s %10.2f %12.2e%s\n", grid.batch, tiles, grid.chunks, kWayNames[way],
                        1000.0 * ms / kRepeats, error, error < 1e-5 ? "" : "  WRONG");
            all_right = all_right && error < 1e-5;
        }
        check(cudaFree(partial), "free");
        check(cudaFree(s), "free");
    }
    return all_right ? 0 : 1;  // a wrong sum's time is no result
}

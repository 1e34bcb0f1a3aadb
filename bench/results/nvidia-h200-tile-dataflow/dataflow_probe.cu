// Probe: can a persistent kernel that hands each batch tile from one routing
// pass to the next by flags (a dataflow over tiles) hide the boundaries that
// cost the cuda_tensor forward about 17 us of its 59 at MNIST b128?
//
// The passes' steps are replaced by waits of a set length (calibrated
// against the GPU's timer), so that only the structure around them is
// measured. Both designs move the same sums:
//   layered   the library's structure: per iteration a pass kernel (a block
//             per (tile, chunk), 2 blocks an SM, its partial sums written
//             to global memory) and the library's own squash kernel
//             (digitcaps_shared.cuh's launch_squash), the passes after the
//             first and the squash kernels launched overlapping the kernel
//             ahead (programmatic dependent launch), as digitcaps_tensor
//             launches them;
//   dataflow  one kernel, as many blocks as are resident; each block takes
//             items (pass, tile, piece of a chunk) in order from a counter,
//             waits for its tile's v_sum of the pass before (a flag), takes
//             its steps, adds its sums into the tile's s by 16-byte float
//             atomics (red.global.add.v4.f32) and arrives at the tile's
//             counter; the last to arrive squashes the tile's rows, zeros
//             its s for the next call and raises the tile's flag.
// An item's sums are a hash of (pass, chunk, element, call) plus 1e-3 of
// the v_sum it read, so that a tile read before its flag gives another v;
// each design's v is checked against the other's for the same call.
//
// Build (CPU build machine, from the repository root):
//   nvcc -O3 -std=c++17 -arch=sm_90 -I reference/cuda -I runtime/include \
//        -o .gpu/dataflow_probe bench/results/nvidia-h200-tile-dataflow/dataflow_probe.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "digitcaps_shared.cuh"

namespace shared = halcaps::cuda_reference::digitcaps_shared;

#define CHECK(x)                                                                                \
    do {                                                                                        \
        cudaError_t err_ = (x);                                                                 \
        if (err_ != cudaSuccess) {                                                              \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(err_)); \
            std::exit(1);                                                                       \
        }                                                                                       \
    } while (0)

constexpr int kThreads = 128;
constexpr int kTileRows = 32;            // batch rows a block (two 16-row tiles, as MNIST's plan)
constexpr int kJ = 10, kE = 16;          // MNIST's out_caps, out_dim
constexpr int kRowFloats = kJ * kE;      // 160
constexpr int kTileFloats = kTileRows * kRowFloats;  // 5120
constexpr int kTileVectors = kTileFloats / 4;        // 1280
constexpr int kVectorsPerThread = kTileVectors / kThreads;  // 10
constexpr int kPasses = 3;
constexpr int kMaxTiles = 64;
constexpr unsigned long long kSpinLimitNs = 200000000ull;  // a wait past 0.2 s is a hang: flagged, not waited

// Each counter and flag on its own 128-byte line, so that the polls of one
// do not queue behind the atomics on another.
constexpr int kLine = 32;  // unsigned ints a line
struct Sync {
    unsigned int next_item, pad0[kLine - 1];
    unsigned int done, pad1[kLine - 1];
    unsigned int hangs, pad2[kLine - 1];
    unsigned int arrived[kPasses][kMaxTiles][kLine];
    unsigned int ready[kPasses][kMaxTiles][kLine];
};

struct Params {
    int tiles;             // batch tiles of kTileRows rows
    int chunks;            // chunks of input capsules a pass (the layered grid's y)
    int split;             // dataflow: items a chunk
    int steps_first;       // steps a chunk, first pass
    int steps;             // steps a chunk, passes after it
    long long step_cycles_first, step_cycles;
    unsigned int call;     // this call's number (the flags' value, the hash's salt)
    bool light;            // dataflow: the arrival an acq_rel atomic and the flag a release store, with no
                           // __threadfence beside them (thread 0's, after the block's barrier)
    unsigned long long *trace;  // dataflow: where not null, 8 values an item (trace_item)
};
// A traced item's values: the GPU's ns timer as the block took the item,
// once its wait ended, once its v_sum rows were in, once its steps were
// done, once it had arrived, once it had squashed (or arrived); the block;
// whether it squashed.
enum { kTook, kWaited, kRowsIn, kStepsDone, kArrived, kEnded, kBlock, kSquashed, kTraceValues };

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ void spin_cycles(long long cycles) {
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}
__device__ __forceinline__ unsigned int load_acquire(const unsigned int *p) {
    unsigned int v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ unsigned int add_acq_rel(unsigned int *p, unsigned int v) {
    unsigned int old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}
__device__ __forceinline__ void store_release(unsigned int *p, unsigned int v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void red_add_v4(float *p, float4 v) {
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
                 : "memory");
}

// An item's contribution to one float of the tile's sums: a hash in [-1, 1)
// of (pass, chunk, element, call), plus 1e-3 of the v_sum it read.
__device__ __forceinline__ float contribution(int pass, int chunk, int element, unsigned int call, float v_read) {
    unsigned int h = unsigned(pass) * 73856093u ^ unsigned(chunk) * 19349663u ^ unsigned(element) * 83492791u ^
                     call * 2654435761u;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    return float(h & 0xffffu) / 32768.0f - 1.0f + 1e-3f * v_read;
}

// The tile's sums of one item, 10 float4 a thread, from the v_sum rows it
// staged (zeros in the first pass); `share` is 1 / split, exact in float.
__device__ __forceinline__ float4 item_sums(const float *v_tile, int pass, int chunk, int tile, int vector,
                                            unsigned int call, float share) {
    float r[4];
#pragma unroll
    for (int c = 0; c < 4; c++) {
        const int f = 4 * vector + c;
        const int element = tile * kTileFloats + f;
        r[c] = share * contribution(pass, chunk, element, call, pass == 0 ? 0.0f : v_tile[f]);
    }
    return make_float4(r[0], r[1], r[2], r[3]);
}

// The tile's rows of v_sum into shared memory, every load of a thread
// issued before any store (written by other blocks of the same kernel in
// dataflow: loaded from L2, past L1).
__device__ __forceinline__ void load_tile_rows(float4 *tile_rows, const float *v_sum, int tile) {
    const float4 *from = reinterpret_cast<const float4 *>(v_sum) + size_t(tile) * kTileVectors + threadIdx.x;
    float4 rows[kVectorsPerThread];
#pragma unroll
    for (int n = 0; n < kVectorsPerThread; n++) rows[n] = __ldcg(from + n * kThreads);
#pragma unroll
    for (int n = 0; n < kVectorsPerThread; n++) tile_rows[threadIdx.x + n * kThreads] = rows[n];
}

// A pass's steps: waits of `cycles` SM cycles, a block barrier after each.
__device__ __forceinline__ void take_steps(int steps, long long cycles) {
    for (int st = 0; st < steps; st++) {
        spin_cycles(cycles);
        __syncthreads();
    }
}

// A block's partial sums of one pass into its chunk's slot of `partial`
// ([chunks][rows (b, j)][E]), as the layered passes write them.
__device__ __forceinline__ void store_partial_sums(float *partial, const float *v_tile, const Params &p, int pass,
                                                   int chunk, int tile) {
    const int rows = p.tiles * kTileRows * kJ;  // squash rows (b, j)
    float4 *out = reinterpret_cast<float4 *>(partial + (size_t(chunk) * rows + size_t(tile) * kTileRows * kJ) * kE);
#pragma unroll
    for (int n = 0; n < kVectorsPerThread; n++) {
        const int vector = threadIdx.x + n * kThreads;
        out[vector] = item_sums(v_tile, pass, chunk, tile, vector, p.call, 1.0f);
    }
}

// ---------------------------------------------------------------- layered
template <bool kFirst>
__global__ void __launch_bounds__(kThreads, 2) layered_pass(float *__restrict__ partial, const float *__restrict__ v_sum,
                                                            Params p, int pass) {
    extern __shared__ float4 smem_vec[];
    float *v_tile = reinterpret_cast<float *>(smem_vec);
    const int tile = blockIdx.x, chunk = blockIdx.y;
    if (!kFirst) shared::wait_for_previous_kernel();
    shared::let_next_kernel_start();
    if (!kFirst) {
        const float4 *from = reinterpret_cast<const float4 *>(v_sum) + size_t(tile) * kTileVectors;
        for (int n = threadIdx.x; n < kTileVectors; n += kThreads) smem_vec[n] = from[n];
    }
    __syncthreads();
    take_steps(kFirst ? p.steps_first : p.steps, kFirst ? p.step_cycles_first : p.step_cycles);
    store_partial_sums(partial, v_tile, p, pass, chunk, tile);
}

// The floors (run 6, timing only: their v is not checked). One kernel whose
// blocks take the three passes of their (tile, chunk) back to back, with no
// handover between passes: the steps, the rows' loads and the partial sums'
// stores, and one launch.
__global__ void __launch_bounds__(kThreads, 2) passes_back_to_back(float *__restrict__ partial,
                                                                   const float *__restrict__ v_sum, Params p) {
    extern __shared__ float4 smem_vec[];
    float *v_tile = reinterpret_cast<float *>(smem_vec);
    const int tile = blockIdx.x, chunk = blockIdx.y;
    for (int pass = 0; pass < kPasses; pass++) {
        if (pass > 0) load_tile_rows(smem_vec, v_sum, tile);
        __syncthreads();
        take_steps(pass == 0 ? p.steps_first : p.steps, pass == 0 ? p.step_cycles_first : p.step_cycles);
        store_partial_sums(partial, v_tile, p, pass, chunk, tile);
    }
}

// squash_kernels false: the three pass kernels alone, each launched
// overlapping the one ahead (one kernel boundary an iteration, with nothing
// between them: a floor, timing only).
void layered_call(float *partial, float *v_sum, float *v, const Params &p, size_t smem, cudaStream_t stream,
                  bool squash_kernels = true) {
    const dim3 grid(p.tiles, p.chunks);
    const int64_t rows = int64_t(p.tiles) * kTileRows * kJ;
    for (int pass = 0; pass < kPasses; pass++) {
        if (pass == 0) {
            layered_pass<true><<<grid, kThreads, smem, stream>>>(partial, v_sum, p, pass);
            CHECK(cudaGetLastError());
        } else {
            CHECK(shared::launch_overlapping(layered_pass<false>, grid, dim3(kThreads), smem, stream, partial,
                                             static_cast<const float *>(v_sum), p, pass));
        }
        if (squash_kernels) {
            CHECK(shared::launch_squash(partial, v_sum, v, nullptr, rows, kE, p.chunks, pass == 0,
                                        pass + 1 == kPasses, stream));
        }
    }
}

// ---------------------------------------------------------------- dataflow
// The squash of the tile's (b, j) rows from tile_s, the tile's sums (4
// threads a row, a float4 each), into v_sum (v in the last pass), and
// tile_s zeroed for the next call. Every load of a thread is issued before
// any of them is used, so that the squash waits on L2 about twice, not
// twice a float4 (run 2's loop: about 12 us a squash).
__device__ void squash_tile(float *__restrict__ tile_s, float *__restrict__ v_sum, float *__restrict__ v, int tile,
                            int pass) {
    float4 x[kVectorsPerThread], before[kVectorsPerThread];
    float4 *s4 = reinterpret_cast<float4 *>(tile_s) + threadIdx.x;
    float4 *vs4 = reinterpret_cast<float4 *>(v_sum) + size_t(tile) * kTileVectors + threadIdx.x;
#pragma unroll
    for (int n = 0; n < kVectorsPerThread; n++) x[n] = __ldcg(s4 + n * kThreads);
#pragma unroll
    for (int n = 0; n < kVectorsPerThread; n++) {
        before[n] = pass == 1 ? __ldcg(vs4 + n * kThreads) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int n = 0; n < kVectorsPerThread; n++) __stcg(s4 + n * kThreads, make_float4(0.0f, 0.0f, 0.0f, 0.0f));
#pragma unroll
    for (int n = 0; n < kVectorsPerThread; n++) {  // 4 consecutive threads: one (b, j) row
        float m = fmaxf(fmaxf(fabsf(x[n].x), fabsf(x[n].y)), fmaxf(fabsf(x[n].z), fabsf(x[n].w)));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
        m = fmaxf(m, 1.17549435e-38f);
        float q = (x[n].x / m) * (x[n].x / m) + (x[n].y / m) * (x[n].y / m) + (x[n].z / m) * (x[n].z / m) +
                  (x[n].w / m) * (x[n].w / m);
        q += __shfl_xor_sync(0xffffffffu, q, 1);
        q += __shfl_xor_sync(0xffffffffu, q, 2);
        const float4 y = make_float4(shared::squash_of(x[n].x, m, q), shared::squash_of(x[n].y, m, q),
                                     shared::squash_of(x[n].z, m, q), shared::squash_of(x[n].w, m, q));
        if (pass + 1 == kPasses) {
            reinterpret_cast<float4 *>(v)[size_t(tile) * kTileVectors + threadIdx.x + n * kThreads] = y;
        } else {
            __stcg(vs4 + n * kThreads,
                   make_float4(before[n].x + y.x, before[n].y + y.y, before[n].z + y.z, before[n].w + y.w));
        }
    }
}

__global__ void __launch_bounds__(kThreads, 2) dataflow_kernel(float *__restrict__ s, float *__restrict__ v_sum,
                                                               float *__restrict__ v, Sync *sync, Params p) {
    extern __shared__ float4 smem_vec[];
    float *v_tile = reinterpret_cast<float *>(smem_vec);
    __shared__ int item_shared;
    __shared__ bool last_shared;
    const int items_per_pass = p.tiles * p.chunks * p.split;
    const int items = kPasses * items_per_pass;
    const float share = 1.0f / float(p.split);
    // A block takes its next item once its current one has ended. Every
    // item waits only on items taken before it, by blocks that are running
    // them: no wait can deadlock.
    unsigned long long marks[kTraceValues];
    for (;;) {
        if (threadIdx.x == 0) {
            if (p.trace) marks[kTook] = global_ns();
            item_shared = int(atomicAdd(&sync->next_item, 1u));
        }
        __syncthreads();
        const int item = item_shared;
        if (item >= items) break;
        // Items in order: pass, then tile, then chunk, then piece of the chunk.
        const int pass = item / items_per_pass, in_pass = item % items_per_pass;
        const int tile = in_pass / (p.chunks * p.split), chunk = in_pass / p.split % p.chunks, piece = in_pass % p.split;
        if (pass > 0) {
            if (threadIdx.x == 0) {
                const unsigned long long t0 = global_ns();
                while (load_acquire(&sync->ready[pass - 1][tile][0]) != p.call) {
                    __nanosleep(32);
                    // Past the limit, or once any wait has timed out, the
                    // call is reported broken and no longer waited on.
                    if (global_ns() - t0 > kSpinLimitNs || *reinterpret_cast<volatile unsigned int *>(&sync->hangs)) {
                        atomicAdd(&sync->hangs, 1u);
                        break;
                    }
                }
                if (!p.light) __threadfence();
            }
            if (threadIdx.x == 0 && p.trace) marks[kWaited] = global_ns();
            __syncthreads();
            load_tile_rows(smem_vec, v_sum, tile);
        }
        __syncthreads();
        if (threadIdx.x == 0 && p.trace) {
            if (pass == 0) marks[kWaited] = marks[kTook];
            marks[kRowsIn] = global_ns();
        }
        // The chunk's steps, shared out over its pieces.
        const int chunk_steps = pass == 0 ? p.steps_first : p.steps;
        const int steps = chunk_steps * (piece + 1) / p.split - chunk_steps * piece / p.split;
        take_steps(steps, pass == 0 ? p.step_cycles_first : p.step_cycles);
        if (threadIdx.x == 0 && p.trace) marks[kStepsDone] = global_ns();
        float *tile_s = s + (size_t(pass) * p.tiles + tile) * kTileFloats;
#pragma unroll
        for (int n = 0; n < kVectorsPerThread; n++) {
            const int vector = threadIdx.x + n * kThreads;
            red_add_v4(tile_s + 4 * vector, item_sums(v_tile, pass, chunk, tile, vector, p.call, share));
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            unsigned int *arrived = &sync->arrived[pass][tile][0];
            unsigned int before;
            if (p.light) {
                before = add_acq_rel(arrived, 1u);
            } else {
                __threadfence();
                before = atomicAdd(arrived, 1u);
            }
            last_shared = before == unsigned(p.chunks * p.split - 1);
        }
        __syncthreads();
        if (threadIdx.x == 0 && p.trace) marks[kArrived] = global_ns();
        if (last_shared) {
            if (!p.light) __threadfence();
            squash_tile(tile_s, v_sum, v, tile, pass);
            __syncthreads();
            if (threadIdx.x == 0) {
                sync->arrived[pass][tile][0] = 0;
                if (!p.light) __threadfence();
                store_release(&sync->ready[pass][tile][0], p.call);
            }
        }
        if (threadIdx.x == 0 && p.trace) {
            marks[kEnded] = global_ns();
            marks[kBlock] = blockIdx.x;
            marks[kSquashed] = last_shared;
            for (int k = 0; k < kTraceValues; k++) p.trace[size_t(item) * kTraceValues + k] = marks[k];
        }
    }
    if (threadIdx.x == 0 && atomicAdd(&sync->done, 1u) == gridDim.x - 1) {
        sync->next_item = 0;  // every block has taken its last item: the next call starts from 0
        sync->done = 0;
        __threadfence();
    }
}

// ---------------------------------------------------------------- host
__global__ void clock_probe(unsigned long long *out, long long cycles) {
    const unsigned long long t0 = global_ns();
    const long long c0 = clock64();
    spin_cycles(cycles);
    out[0] = global_ns() - t0;
    out[1] = clock64() - c0;
}

double median(std::vector<float> x) {
    std::sort(x.begin(), x.end());
    return x.size() % 2 ? x[x.size() / 2] : 0.5 * (x[x.size() / 2 - 1] + x[x.size() / 2]);
}

int main(int argc, char **argv) {
    int tiles = 4, chunks = 64, steps_first = 5, steps = 9, repeats = 30;
    double step_ns_first = 1360.0, step_ns = 1490.0;
    std::vector<int> splits = {1, 2, 3};
    bool dataflow = true;
    for (int a = 1; a + 1 < argc; a += 2) {
        const std::string k = argv[a];
        const char *val = argv[a + 1];
        if (k == "--tiles") tiles = std::atoi(val);
        else if (k == "--chunks") chunks = std::atoi(val);
        else if (k == "--steps-first") steps_first = std::atoi(val);
        else if (k == "--steps") steps = std::atoi(val);
        else if (k == "--step-ns-first") step_ns_first = std::atof(val);
        else if (k == "--step-ns") step_ns = std::atof(val);
        else if (k == "--repeats") repeats = std::atoi(val);
        else if (k == "--dataflow") dataflow = std::atoi(val) != 0;
        else if (k == "--splits") {
            splits.clear();
            for (const char *c = val; *c;) {
                splits.push_back(std::atoi(c));
                while (*c && *c != ',') c++;
                if (*c == ',') c++;
            }
        } else {
            std::fprintf(stderr, "unknown flag %s\n", k.c_str());
            return 2;
        }
    }
    if (tiles < 1 || tiles > kMaxTiles) {
        std::fprintf(stderr, "--tiles must be 1..%d\n", kMaxTiles);
        return 2;
    }
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a pipe as they are printed
    cudaDeviceProp prop{};
    CHECK(cudaGetDeviceProperties(&prop, 0));

    // The SM clock against the GPU's nanosecond timer, under a 10 ms spin.
    unsigned long long *clock_out;
    CHECK(cudaMalloc(&clock_out, 2 * sizeof(unsigned long long)));
    clock_probe<<<1, 1>>>(clock_out, 5000000);  // warm the clocks
    clock_probe<<<1, 1>>>(clock_out, 20000000);
    unsigned long long clock_host[2];
    CHECK(cudaMemcpy(clock_host, clock_out, sizeof(clock_host), cudaMemcpyDeviceToHost));
    const double cycles_per_ns = double(clock_host[1]) / double(clock_host[0]);

    const size_t smem = 100 * 1024;  // two blocks an SM, as the pass kernels
    CHECK(cudaFuncSetAttribute(layered_pass<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    CHECK(cudaFuncSetAttribute(layered_pass<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    CHECK(cudaFuncSetAttribute(dataflow_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    CHECK(cudaFuncSetAttribute(passes_back_to_back, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, dataflow_kernel, kThreads, smem));
    const int resident = per_sm * prop.multiProcessorCount;

    std::printf("device: %s, %d SMs, SM clock %.0f MHz under a spin, %d blocks an SM\n", prop.name,
                prop.multiProcessorCount, 1000.0 * cycles_per_ns, per_sm);
    std::printf("shape: %d tiles of %d rows (batch %d), %d chunks, steps a chunk %d (first pass) / %d, step %.0f / %.0f ns\n",
                tiles, kTileRows, tiles * kTileRows, chunks, steps_first, steps, step_ns_first, step_ns);

    const size_t tile_floats_all = size_t(tiles) * kTileFloats;
    float *partial, *v_sum, *v, *s, *v_sum_d, *v_d;
    Sync *sync;
    CHECK(cudaMalloc(&partial, size_t(chunks) * tile_floats_all * sizeof(float)));
    const int max_split = *std::max_element(splits.begin(), splits.end());
    CHECK(cudaMalloc(&v_sum, tile_floats_all * sizeof(float)));
    CHECK(cudaMalloc(&v, tile_floats_all * sizeof(float)));
    CHECK(cudaMalloc(&v_sum_d, tile_floats_all * sizeof(float)));
    CHECK(cudaMalloc(&v_d, tile_floats_all * sizeof(float)));
    CHECK(cudaMalloc(&s, kPasses * tile_floats_all * sizeof(float)));
    CHECK(cudaMalloc(&sync, sizeof(Sync)));
    CHECK(cudaMemset(s, 0, kPasses * tile_floats_all * sizeof(float)));
    CHECK(cudaMemset(sync, 0, sizeof(Sync)));

    Params p{};
    p.tiles = tiles;
    p.chunks = chunks;
    p.steps_first = steps_first;
    p.steps = steps;
    p.step_cycles_first = (long long)(step_ns_first * cycles_per_ns);
    p.step_cycles = (long long)(step_ns * cycles_per_ns);
    unsigned int call = 0;

    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));

    auto time_calls = [&](auto one_call) {
        for (int w = 0; w < 5; w++) {
            p.call = ++call;
            one_call();
        }
        std::vector<float> us;
        for (int r = 0; r < repeats; r++) {
            p.call = ++call;
            CHECK(cudaEventRecord(start, stream));
            one_call();
            CHECK(cudaEventRecord(stop, stream));
            CHECK(cudaEventSynchronize(stop));
            float ms = 0;
            CHECK(cudaEventElapsedTime(&ms, start, stop));
            us.push_back(1000.0f * ms);
        }
        std::sort(us.begin(), us.end());
        return std::make_pair(median(us), double(us.front()));
    };
    auto layered = [&]() { layered_call(partial, v_sum, v, p, smem, stream); };

    // Both designs' v for one call, compared (max |difference| / max |v|).
    auto compare = [&](int split) {
        p.call = ++call;
        p.split = split;
        layered();
        dataflow_kernel<<<std::min(resident, kPasses * tiles * chunks * split), kThreads, smem, stream>>>(
            s, v_sum_d, v_d, sync, p);
        CHECK(cudaGetLastError());
        CHECK(cudaStreamSynchronize(stream));
        std::vector<float> a(tile_floats_all), b(tile_floats_all);
        CHECK(cudaMemcpy(a.data(), v, a.size() * sizeof(float), cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(b.data(), v_d, b.size() * sizeof(float), cudaMemcpyDeviceToHost));
        double diff = 0, largest = 0;
        for (size_t n = 0; n < a.size(); n++) {
            diff = std::max(diff, double(std::fabs(a[n] - b[n])));
            largest = std::max(largest, double(std::fabs(a[n])));
        }
        return diff / largest;
    };

    const auto base = time_calls(layered);
    std::printf("%-44s %8.1f us median, %8.1f min\n", "layered (6 kernels)", base.first, base.second);
    unsigned long long *trace;
    CHECK(cudaMalloc(&trace, size_t(kPasses) * tiles * chunks * max_split * kTraceValues * sizeof(unsigned long long)));
    // One call traced: per pass, the medians and maxima over its items of
    // each stretch, when its items' steps began, and when its tiles' flags
    // were raised, in us from the call's first item.
    auto report_trace = [&](int split) {
        const int items = kPasses * tiles * chunks * split, per_pass = items / kPasses;
        std::vector<unsigned long long> t(size_t(items) * kTraceValues);
        CHECK(cudaMemcpy(t.data(), trace, t.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
        unsigned long long origin = ~0ull, last = 0;
        for (int it = 0; it < items; it++) {
            origin = std::min(origin, t[size_t(it) * kTraceValues + kTook]);
            last = std::max(last, t[size_t(it) * kTraceValues + kEnded]);
        }
        std::printf("    traced call: %.1f us from the first item taken to the last ended\n", (last - origin) / 1000.0);
        std::printf("    %-5s %-15s %-15s %-15s %-15s %-15s %-22s %s\n", "pass", "wait med/max", "rows med/max",
                    "steps med/max", "arrive med/max", "squash med/max", "steps begin min/med/max", "flags raised min/max");
        for (int pass = 0; pass < kPasses; pass++) {
            std::vector<float> wait, rows, steps, arrive, squash, begin, flag;
            for (int it = pass * per_pass; it < (pass + 1) * per_pass; it++) {
                const unsigned long long *m = &t[size_t(it) * kTraceValues];
                wait.push_back((m[kWaited] - m[kTook]) / 1000.0f);
                rows.push_back((m[kRowsIn] - m[kWaited]) / 1000.0f);
                steps.push_back((m[kStepsDone] - m[kRowsIn]) / 1000.0f);
                arrive.push_back((m[kArrived] - m[kStepsDone]) / 1000.0f);
                begin.push_back((m[kRowsIn] - origin) / 1000.0f);
                if (m[kSquashed]) {
                    squash.push_back((m[kEnded] - m[kArrived]) / 1000.0f);
                    flag.push_back((m[kEnded] - origin) / 1000.0f);
                }
            }
            auto mm = [](std::vector<float> x) {
                char b[32];
                std::sort(x.begin(), x.end());
                std::snprintf(b, sizeof b, "%.2f/%.2f", x[x.size() / 2], x.back());
                return std::string(b);
            };
            std::sort(begin.begin(), begin.end());
            std::sort(flag.begin(), flag.end());
            std::printf("    %-5d %-15s %-15s %-15s %-15s %-15s %5.1f/%5.1f/%5.1f      %5.1f/%5.1f\n", pass,
                        mm(wait).c_str(), mm(rows).c_str(), mm(steps).c_str(), mm(arrive).c_str(), mm(squash).c_str(),
                        begin.front(), begin[begin.size() / 2], begin.back(), flag.front(), flag.back());
        }
    };

    const auto pass_kernels = time_calls([&]() { layered_call(partial, v_sum, v, p, smem, stream, false); });
    std::printf("%-44s %8.1f us median, %8.1f min (timing only)\n", "floor: the 3 pass kernels, no squash kernels",
                pass_kernels.first, pass_kernels.second);
    const auto one_kernel = time_calls([&]() {
        passes_back_to_back<<<dim3(p.tiles, p.chunks), kThreads, smem, stream>>>(partial, v_sum, p);
        CHECK(cudaGetLastError());
    });
    std::printf("%-44s %8.1f us median, %8.1f min (timing only)\n", "floor: one kernel, passes back to back",
                one_kernel.first, one_kernel.second);
    if (!dataflow) splits.clear();
    for (int n = 0; n < 2 * int(splits.size()); n++) {
        const int split = splits[n / 2];
        p.light = n % 2 == 1;
        p.split = split;
        const int items = kPasses * tiles * chunks * split;
        const int grid = std::min(resident, items);
        CHECK(cudaMemset(sync, 0, sizeof(Sync)));  // a variant after a broken one starts clean
        const auto flow = time_calls([&]() {
            dataflow_kernel<<<grid, kThreads, smem, stream>>>(s, v_sum_d, v_d, sync, p);
            CHECK(cudaGetLastError());
        });
        const double error = compare(split);
        p.call = ++call;
        p.trace = trace;
        dataflow_kernel<<<grid, kThreads, smem, stream>>>(s, v_sum_d, v_d, sync, p);
        CHECK(cudaGetLastError());
        CHECK(cudaStreamSynchronize(stream));
        p.trace = nullptr;
        Sync host_sync{};
        CHECK(cudaMemcpy(&host_sync, sync, sizeof(Sync), cudaMemcpyDeviceToHost));
        char name[64];
        std::snprintf(name, sizeof name, "dataflow, %d item%s a chunk, %s", split, split > 1 ? "s" : "",
                      p.light ? "acq_rel atomics, no fences" : "fences and atomics");
        std::printf("%-44s %8.1f us median, %8.1f min; %d items on %d blocks; v against layered %.2e%s\n", name,
                    flow.first, flow.second, items, grid, error,
                    host_sync.hangs ? "; WAITS TIMED OUT" : (error > 1e-5 ? "; WRONG" : ""));
        report_trace(split);
    }
    CHECK(cudaDeviceSynchronize());
    return 0;
}

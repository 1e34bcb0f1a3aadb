// Pieces the hand-written DigitCaps layers share (digitcaps_cuda.cu's
// versions 1 and 2, digitcaps_tensor_cores.cu's version 3): the squash of a
// row, base-2 exponentials for the softmax and version 3's base-2 softmax
// (which the backward's version 3 shares), the kernel that adds the chunks'
// partial sums over input capsules and squashes them, and two host helpers
// of the fused versions' plans and refusals.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "digitcaps_cuda.h"
#include "digitcaps_timeline.cuh"

namespace halcaps::cuda_reference::digitcaps_shared {

// The squash of a row s[0..E) from m = max_e |s_e| (at least FLT_MIN, so
// that s = 0 gives v = 0) and q = |s / m|^2 (in [1, E]): the factor that
// multiplies s_e, or (where |s|^2 overflows) what divides it. Taking the
// norm of s / m means it neither overflows nor underflows:
// |s|^2 / (1 + |s|^2) * s / sqrt(|s|^2 + eps) with |s| = m sqrt(q); eps
// (1e-9) only matters when |s| is that small, where the factor is ~|s|.
__device__ inline float squash_of(float s_e, float m, float q) {
    const float norm = m * sqrtf(q);
    const float norm2 = norm * norm;
    const float scale = norm2 / (1.0f + norm2) / sqrtf(norm2 + 1e-9f);
    return isfinite(norm2) ? s_e * scale : s_e / norm;
}

// 2^x, flushing results below FLT_MIN to 0 (the softmax's terms that small
// do not change its sums in float32).
__device__ inline float exp2_ftz(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// The softmax over output capsules in base 2, as the tensor-core layer's
// passes take it (digitcaps_tensor_cores.cu) and the backward's c_0 with it
// (digitcaps_backward_cuda.cu's first_coefficients), so that both give the
// same coefficients.
constexpr float kLog2e = 1.44269504f;

// The logits b0[i, j] of one row in base 2 (zeros without b0, -inf past J).
template <int JM>
__device__ inline void base2_logits_of_b0(const float *b0_row, int J, float (&c)[JM]) {
#pragma unroll
    for (int j = 0; j < JM; j++) c[j] = j < J ? kLog2e * b0_row[j] : -INFINITY;
}

// The softmax over j of base-2 logits, in place (-inf gives 0). With
// kLanePair, c holds half of the row's j and the lane's partner (lane ^ 1)
// the other half, so that the max and the sum are taken over both lanes;
// the lanes' halves together must hold a finite logit.
template <bool kLanePair = false, int JM>
__device__ inline void softmax_base2(float (&c)[JM]) {
    float top = c[0];
#pragma unroll
    for (int j = 1; j < JM; j++) top = fmaxf(top, c[j]);
    if (kLanePair) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));
    float total = 0.0f;
#pragma unroll
    for (int j = 0; j < JM; j++) {
        c[j] = exp2_ftz(c[j] - top);
        total += c[j];
    }
    if (kLanePair) total += __shfl_xor_sync(0xffffffffu, total, 1);
    float inverse;  // total in [1, JM]: one MUFU.RCP (__fdividef adds a range check and a scaling)
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(inverse) : "f"(total));
#pragma unroll
    for (int j = 0; j < JM; j++) c[j] *= inverse;
}

// Programmatic dependent launch (sm_90 on): a kernel launched by
// launch_overlapping may start while the kernel ahead of it in the stream
// finishes, once every block of that one has called let_next_kernel_start
// (or ended). It must call wait_for_previous_kernel, which returns once the
// kernel ahead has ended and its writes are visible, before it reads or
// writes anything that kernel reads or writes; what comes before (its
// shared memory set up, copies of inputs no kernel of the call writes)
// overlaps the previous kernel's last blocks and the launch.
__device__ inline void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ inline void let_next_kernel_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
template <typename... Params, typename... Args>
cudaError_t launch_overlapping(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
                               Args... args) {
    cudaLaunchAttribute overlap{};
    overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    overlap.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem_bytes;
    config.stream = stream;
    config.attrs = &overlap;
    config.numAttrs = 1;
    return cudaLaunchKernelEx(&config, kernel, args...);
}

constexpr int kSquashThreads = 128;

// The squash kernel and the launches of it: in the probe's build with
// timestamps, their own symbols (digitcaps_timeline.cuh).
inline namespace HALCAPS_TIMELINE_NAMESPACE {

// A block of R (b, j) rows (threadIdx.z): threads (e lane of EP, group g of
// G) add chunks g, g + G, ... of their row's partial sums, the groups are
// added in order, and the first EP lanes of the row's threads squash it.
// v_sum becomes v (first iteration) or v_sum + v; the last iteration
// writes v instead. Where s_out is not null, s itself is stored there too
// (digitcaps_with_s's routing_s, an iteration's rows). Launched overlapping
// the pass kernel ahead of it, whose partial sums it waits for.
template <int EP, int G>
__global__ void __launch_bounds__(kSquashThreads)
    squash_kernel(const float *__restrict__ partial, float *__restrict__ v_sum, float *__restrict__ v,
                  float *__restrict__ s_out, int64_t rows, int E, int64_t chunks, bool first, bool last) {
    constexpr int R = kSquashThreads / (EP * G);
    static_assert(R >= 1 && EP <= 32 && 32 % EP == 0, "a row's g = 0 lanes lie in one warp");
    __shared__ float group_sums[R][G][EP];
    const int e = threadIdx.x, g = threadIdx.y, rz = threadIdx.z;
    const int64_t row = int64_t(blockIdx.x) * R + rz;
    timeline::BlockClock clock;  // empty outside the timeline probe
    clock.mark(timeline::kEntered);
    wait_for_previous_kernel();
    clock.mark(timeline::kWaited);
    let_next_kernel_start();
    // Four sums in flight, so that four loads are. Eight (every load of a
    // thread with at most 8 chunks) measured 1 us slower at MNIST b128 and
    // b512 on an H200 (docs/history.md: nvidia-h200-timeline/, run 3).
    float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (e < E && row < rows) {
        const float *p = partial + row * E + e;
        const int64_t step = rows * E;
        int64_t chunk = g;
        for (; chunk + 3 * G < chunks; chunk += 4 * G) {
#pragma unroll
            for (int n = 0; n < 4; n++) sum[n] += p[(chunk + n * G) * step];
        }
        for (int n = 0; chunk < chunks; chunk += G, n++) sum[n] += p[chunk * step];
    }
    group_sums[rz][g][e] = (sum[0] + sum[1]) + (sum[2] + sum[3]);
    __syncthreads();
    clock.mark(timeline::kFirstStep);
    clock.mark(timeline::kStepsDone);
    if (g != 0 || row >= rows) return;
    float s = 0.0f;
#pragma unroll
    for (int gg = 0; gg < G; gg++) s += group_sums[rz][gg][e];
    // The row's g = 0 lanes: EP consecutive lanes of one warp, starting at a
    // multiple of EP (the row's threads are EP * G consecutive ones).
    const int lane_first = (threadIdx.x + EP * (threadIdx.y + G * threadIdx.z)) % 32 / EP * EP;
    const unsigned mask = (EP == 32 ? 0xffffffffu : (1u << EP) - 1) << lane_first;
    float m = fabsf(s);  // 0 past E
#pragma unroll
    for (int o = EP / 2; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(mask, m, o, EP));
    m = fmaxf(m, 1.17549435e-38f);  // FLT_MIN
    float q = (s / m) * (s / m);
#pragma unroll
    for (int o = EP / 2; o > 0; o /= 2) q += __shfl_xor_sync(mask, q, o, EP);
    if (e >= E) return;
    const float v_e = squash_of(s, m, q);
    const int64_t n = row * E + e;
    if (s_out != nullptr) s_out[n] = s;
    if (last) {
        v[n] = v_e;
    } else {
        v_sum[n] = first ? v_e : v_sum[n] + v_e;
    }
    clock.publish(timeline::kSquashKernel, first ? 0 : last ? 2 : 1);  // thread (0, 0, 0) gets here
}

// Enqueues squash_kernel over `rows` = B * J rows of out_dim E <= 32, from
// partial[chunks][rows][E]: G groups a row, the fewest that leave each
// thread at most 8 chunks among kMaxGroups, kMaxGroups / 2 and (at EP 16)
// kMaxGroups / 4, never fewer than 2, and the block's other threads on
// further rows. With few chunks (MNIST b512's 16)
// that is 4 rows a block and a fifth of the blocks, where one row a block
// made 5120 blocks in two and a half waves (docs/history.md:
// nvidia-h200-squash-rows).
template <int EP>
inline cudaError_t launch_squash_ep(const float *partial, float *v_sum, float *v, float *s_out, int64_t rows, int E,
                                    int64_t chunks, bool first, bool last, cudaStream_t stream) {
    constexpr int kMaxGroups = kSquashThreads / EP;  // 8 at EP 16, 4 at EP 32
    static_assert(kMaxGroups >= 4, "EP up to 32");
    auto launch = [&](auto groups) {
        constexpr int G = decltype(groups)::value, R = kSquashThreads / (EP * G);
        return launch_overlapping(squash_kernel<EP, G>, dim3(unsigned((rows + R - 1) / R)), dim3(EP, G, R), 0, stream,
                                  partial, v_sum, v, s_out, rows, E, chunks, first, last);
    };
    if (chunks > 8 * (kMaxGroups / 2)) {
        return launch(std::integral_constant<int, kMaxGroups>());
    }
    if (chunks > 8 * (kMaxGroups / 4) || kMaxGroups == 4) {
        return launch(std::integral_constant<int, kMaxGroups / 2>());
    }
    return launch(std::integral_constant<int, kMaxGroups / 4>());
}
inline cudaError_t launch_squash(const float *partial, float *v_sum, float *v, float *s_out, int64_t rows, int E,
                                 int64_t chunks, bool first, bool last, cudaStream_t stream) {
    if (E <= 16) return launch_squash_ep<16>(partial, v_sum, v, s_out, rows, E, chunks, first, last, stream);
    return launch_squash_ep<32>(partial, v_sum, v, s_out, rows, E, chunks, first, last, stream);
}

// The fused versions' routing iterations: for each, the pass kernel
// (launch_pass(agreement), agreement false in the first iteration) writes
// the chunks' partial sums and the squash kernel adds and squashes them into
// v_sum (v in the last iteration). Where routing_s is not null, iteration t's
// s is stored at routing_s + t * rows * E ([iterations, rows, E]).
template <typename LaunchPass>
cudaError_t iterate(int iterations, const float *partial, float *v_sum, float *v, float *routing_s, int64_t rows, int E,
                    int64_t chunks, cudaStream_t stream, LaunchPass launch_pass) {
    for (int t = 0; t < iterations; t++) {
        if (cudaError_t err = launch_pass(t > 0); err != cudaSuccess) return err;
        float *s_out = routing_s != nullptr ? routing_s + t * rows * E : nullptr;
        if (cudaError_t err =
                launch_squash(partial, v_sum, v, s_out, rows, E, chunks, t == 0, t + 1 == iterations, stream);
            err != cudaSuccess) {
            return err;
        }
    }
    return cudaSuccess;
}

}  // namespace HALCAPS_TIMELINE_NAMESPACE

// The first extent of `s` past its limit, with its value, or a null extent.
inline DigitCapsFusedRefusal extent_beyond(const DigitCapsLayerShape &s, int64_t max_out_caps, int64_t max_out_dim,
                                           int64_t max_in_dim) {
    if (s.out_caps > max_out_caps) return {"out_caps", s.out_caps};
    if (s.out_dim > max_out_dim) return {"out_dim", s.out_dim};
    if (s.in_dim > max_in_dim) return {"in_dim", s.in_dim};
    return {};
}

// Input capsules a block (a multiple of `multiple`) so that the blocks, one
// a (batch tile, chunk), fill the device once: per_sm blocks on each of
// `sms` SMs over batch_tiles tiles.
inline int64_t chunk_filling_device(int64_t in_caps, int64_t batch_tiles, int per_sm, int sms, int64_t multiple) {
    const int64_t resident = std::max<int64_t>(1, int64_t(std::max(per_sm, 1)) * sms);
    const int64_t chunks_wanted = std::max<int64_t>(1, resident / batch_tiles);
    const int64_t chunk = (in_caps + chunks_wanted - 1) / chunks_wanted;
    return (chunk + multiple - 1) / multiple * multiple;
}

}  // namespace halcaps::cuda_reference::digitcaps_shared

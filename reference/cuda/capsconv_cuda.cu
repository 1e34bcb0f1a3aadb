// Hand-written CUDA kernels for the capsule convolution; the versions are
// described in capsconv_cuda.h. One kernel template holds the parts every
// version shares (thread -> output pose, filter chunks staged in shared
// memory, the walk over the taps with the zero-padding test); the versions
// differ in the per-thread arithmetic only.
#include "capsconv_cuda.h"

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "pointer_alignment.h"

namespace halcaps::cuda_reference {
namespace {

using i64 = int64_t;

constexpr int kThreads = 64;      // output pixels per block: 241 blocks on the seed problem (132 SMs)
constexpr int kChunkTaps = 512;   // filter poses staged per pass: at most 512 * 16 floats = 32 KB of shared memory
constexpr int kMaxGridY = 65535;  // co beyond this loops inside the block

struct Geometry {
    i64 H, W, CI, KH, KW, CO, stride, pad, OH, OW;
    i64 P;  // n * OH * OW output pixels
    i64 T;  // KH * KW * CI taps
};

// A pose of zeros: what a tap in the zero padding reads.
__device__ __align__(16) float kZeroPose[16];

// Calls f(local_tap, input_pose) for the taps t0 .. t0+nt-1 (t = (dy*KW + dx)*CI + c).
// A tap in the zero padding reads kZeroPose, so that a NaN or inf filter
// value there gives NaN, as the formula's 0 * NaN does (skipping it would
// drop it). local_tap indexes the staged filter chunk.
template <typename F>
__device__ __forceinline__ void for_taps(const float *__restrict__ in, const Geometry &g, i64 t0, int nt, i64 nn,
                                         i64 oy, i64 ox, F f) {
    i64 c = t0 % g.CI;
    i64 dx = (t0 / g.CI) % g.KW;
    i64 dy = t0 / (g.CI * g.KW);
    for (int lt = 0; lt < nt; lt++) {
        const i64 iy = oy * g.stride + dy - g.pad;
        const i64 ix = ox * g.stride + dx - g.pad;
        const bool inside = iy >= 0 && iy < g.H && ix >= 0 && ix < g.W;
        f(lt, inside ? in + (((nn * g.H + iy) * g.W + ix) * g.CI + c) * 16 : kZeroPose);
        if (++c == g.CI) {
            c = 0;
            if (++dx == g.KW) {
                dx = 0;
                ++dy;
            }
        }
    }
}

// V: 1 = B, 2 = I1, 3 = I2, 4 = I3. kVec: input and output 16-byte aligned
// (I3's float4 loads and stores; the other versions ignore it).
template <int V, bool kVec>
__global__ void __launch_bounds__(kThreads)
    capsconv_kernel(const float *__restrict__ in, const float *__restrict__ filter, float *out, Geometry g) {
    // min(T, kChunkTaps) filter poses: sized at launch so that small filters
    // leave room for more resident blocks.
    extern __shared__ float4 sK4[];
    float *sK = reinterpret_cast<float *>(sK4);
    const i64 p = i64(blockIdx.x) * kThreads + threadIdx.x;
    const bool active = p < g.P;  // inactive threads still help stage the filter and reach every barrier
    i64 nn = 0, oy = 0, ox = 0;
    if (active) {
        ox = p % g.OW;
        oy = (p / g.OW) % g.OH;
        nn = p / (g.OW * g.OH);
    }
    for (i64 co = blockIdx.y; co < g.CO; co += gridDim.y) {  // the same trip count for the whole block
        float *o = out + (p * g.CO + co) * 16;               // dereferenced only when active
        float acc[16];                                       // I2, I3: the output pose in registers
#pragma unroll
        for (int e = 0; e < 16; e++) acc[e] = 0.0f;
        if (V == 1 && active) {
            // B accumulates in the output itself, so it starts from zero there.
            for (int e = 0; e < 16; e++) o[e] = 0.0f;
        }
        for (i64 t0 = 0; t0 < g.T; t0 += kChunkTaps) {
            const int nt = static_cast<int>(g.T - t0 < kChunkTaps ? g.T - t0 : kChunkTaps);
            __syncthreads();  // everyone is done with the previous chunk
            for (int e = threadIdx.x; e < nt * 16; e += kThreads) {
                sK[e] = filter[((t0 + e / 16) * g.CO + co) * 16 + e % 16];
            }
            __syncthreads();
            if (!active) continue;

            if constexpr (V == 1) {
                // Per tap and output element: the 4-term sum, then one
                // read-modify-write of the output in global memory. volatile
                // keeps the compiler from holding the output in registers
                // across taps (which would turn B into I2).
                volatile float *vo = o;
                for_taps(in, g, t0, nt, nn, oy, ox, [&](int lt, const float *ip) {
                    const float *kp = sK + lt * 16;
#pragma unroll 1
                    for (int i = 0; i < 4; i++) {
#pragma unroll 1
                        for (int j = 0; j < 4; j++) {
                            float s = 0.0f;
#pragma unroll 1
                            for (int c = 0; c < 4; c++) s += ip[i * 4 + c] * kp[c * 4 + j];
                            vo[i * 4 + j] = vo[i * 4 + j] + s;
                        }
                    }
                });
            } else if constexpr (V == 2) {
                // One scalar accumulator per output element over every tap of
                // the chunk; a filter larger than one chunk carries the
                // partial sum over in the output (this thread's own element).
#pragma unroll 1
                for (int ij = 0; ij < 16; ij++) {
                    const int i = ij >> 2, j = ij & 3;
                    float a = t0 == 0 ? 0.0f : o[ij];
                    for_taps(in, g, t0, nt, nn, oy, ox, [&](int lt, const float *ip) {
                        const float *kp = sK + lt * 16;
#pragma unroll 1
                        for (int c = 0; c < 4; c++) a += __ldg(ip + i * 4 + c) * kp[c * 4 + j];
                    });
                    o[ij] = a;
                }
            } else if constexpr (V == 3) {
                // The 4x4x4 product unrolled; operands loaded where they are used.
                for_taps(in, g, t0, nt, nn, oy, ox, [&](int lt, const float *ip) {
                    const float *kp = sK + lt * 16;
#pragma unroll
                    for (int i = 0; i < 4; i++) {
#pragma unroll
                        for (int j = 0; j < 4; j++) {
#pragma unroll
                            for (int c = 0; c < 4; c++) acc[i * 4 + j] += __ldg(ip + i * 4 + c) * kp[c * 4 + j];
                        }
                    }
                });
            } else {
                // Scalar replacement: the input pose (4 rows) and the filter
                // pose in registers, each loaded once per tap.
                for_taps(in, g, t0, nt, nn, oy, ox, [&](int lt, const float *ip) {
                    float x[16], k[16];
                    if constexpr (kVec) {
#pragma unroll
                        for (int r = 0; r < 4; r++) {
                            const float4 v = __ldg(reinterpret_cast<const float4 *>(ip) + r);
                            x[r * 4 + 0] = v.x, x[r * 4 + 1] = v.y, x[r * 4 + 2] = v.z, x[r * 4 + 3] = v.w;
                        }
                    } else {
#pragma unroll
                        for (int e = 0; e < 16; e++) x[e] = __ldg(ip + e);
                    }
#pragma unroll
                    for (int r = 0; r < 4; r++) {
                        const float4 v = reinterpret_cast<const float4 *>(sK + lt * 16)[r];
                        k[r * 4 + 0] = v.x, k[r * 4 + 1] = v.y, k[r * 4 + 2] = v.z, k[r * 4 + 3] = v.w;
                    }
#pragma unroll
                    for (int i = 0; i < 4; i++) {
#pragma unroll
                        for (int c = 0; c < 4; c++) {
#pragma unroll
                            for (int j = 0; j < 4; j++)
                                acc[i * 4 + j] = fmaf(x[i * 4 + c], k[c * 4 + j], acc[i * 4 + j]);
                        }
                    }
                });
            }
        }
        if ((V == 3 || V == 4) && active) {
            if (V == 4 && kVec) {
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    reinterpret_cast<float4 *>(o)[r] =
                        make_float4(acc[r * 4 + 0], acc[r * 4 + 1], acc[r * 4 + 2], acc[r * 4 + 3]);
                }
            } else {
#pragma unroll
                for (int e = 0; e < 16; e++) o[e] = acc[e];
            }
        }
    }
}

template <int V>
cudaError_t launch(const float *in, const float *filter, float *out, const CapsConvShape &s, cudaStream_t stream) {
    Geometry g;
    g.H = s.height, g.W = s.width, g.CI = s.in_caps, g.KH = s.kernel_h, g.KW = s.kernel_w, g.CO = s.out_caps;
    g.stride = s.stride, g.pad = s.pad, g.OH = s.out_height(), g.OW = s.out_width();
    g.P = s.batch * g.OH * g.OW;
    g.T = g.KH * g.KW * g.CI;
    const i64 blocks = (g.P + kThreads - 1) / kThreads;
    if (blocks > INT_MAX) return cudaErrorInvalidValue;
    const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(g.CO < kMaxGridY ? g.CO : kMaxGridY));
    const size_t shared_bytes = static_cast<size_t>(g.T < kChunkTaps ? g.T : kChunkTaps) * 16 * sizeof(float);
    if (aligned16(in) && aligned16(out)) {
        capsconv_kernel<V, true><<<grid, kThreads, shared_bytes, stream>>>(in, filter, out, g);
    } else {
        capsconv_kernel<V, false><<<grid, kThreads, shared_bytes, stream>>>(in, filter, out, g);
    }
    return cudaGetLastError();
}

}  // namespace

bool capsconv_shape_ok(const CapsConvShape &s) {
    if (s.batch < 1 || s.height < 1 || s.width < 1 || s.in_caps < 1 || s.kernel_h < 1 || s.kernel_w < 1 ||
        s.out_caps < 1 || s.stride < 1 || s.pad < 0) {
        return false;
    }
    return s.kernel_h <= s.height + 2 * s.pad && s.kernel_w <= s.width + 2 * s.pad;
}

int capsconv_version_count() { return 4; }

const char *capsconv_version_name(int version) {
    switch (version) {
    case 1:
        return "vaidya_b";
    case 2:
        return "vaidya_i1";
    case 3:
        return "vaidya_i2";
    case 4:
        return "vaidya_i3";
    default:
        return nullptr;
    }
}

cudaError_t capsconv_forward(int version, const float *input, const float *filter, float *output,
                             const CapsConvShape &shape, cudaStream_t stream) {
    if (!capsconv_shape_ok(shape) || !input || !filter || !output) return cudaErrorInvalidValue;
    switch (version) {
    case 1:
        return launch<1>(input, filter, output, shape, stream);
    case 2:
        return launch<2>(input, filter, output, shape, stream);
    case 3:
        return launch<3>(input, filter, output, shape, stream);
    case 4:
        return launch<4>(input, filter, output, shape, stream);
    default:
        return cudaErrorInvalidValue;
    }
}

}  // namespace halcaps::cuda_reference

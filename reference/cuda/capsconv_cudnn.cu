// cuDNN peer for the capsule convolution; see capsconv_cudnn.h.
#include "capsconv_cudnn.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <vector>

namespace halcaps::cuda_reference {
namespace {

using i64 = int64_t;

constexpr int kTile = 32;     // transpose tiles of 32 x 32 floats
constexpr int kTileRows = 8;  // a block of 32 x 8 threads moves one tile in 4 passes
constexpr int kMaxGrid = 65535;

CudnnResult bad_param() {
    CudnnResult r;
    r.dnn = CUDNN_STATUS_BAD_PARAM;
    return r;
}

bool fits_int(i64 v) { return v >= 0 && v <= INT_MAX; }

// The planar row of pose-major column q = caps*16 + a*4 + b: a*(caps4) + caps*4 + b,
// where caps4 = CAPS*4 (see below).
__device__ __forceinline__ i64 planar_row(i64 q, i64 caps4) { return ((q >> 2) & 3) * caps4 + (q >> 4) * 4 + (q & 3); }

// Between a pose-major tensor A[N][PIX][CAPS][4][4] (I or O) and the planar
// B[N*4 + a][CAPS*4 + b][PIX] (X or Y): for each n it is the transpose of a
// PIX x Q matrix (Q = CAPS*16, the pose-major column q = caps*16 + a*4 + b)
// whose columns land on planar row planar_row(q). Tiled through shared
// memory so that both the reads and the writes are coalesced (a warp walks
// q on the pose-major side and pixels on the planar side).
template <bool kToPlanar>
__global__ void pose_planar_kernel(const float *__restrict__ src, float *__restrict__ dst, i64 N, i64 PIX, i64 Q) {
    __shared__ float tile[kTile][kTile + 1];  // +1: no bank conflicts on the transposed read
    const i64 q0 = i64(blockIdx.x) * kTile;
    const i64 caps4 = Q / 4;
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (i64 nn = blockIdx.z; nn < N; nn += gridDim.z) {
        const float *s = kToPlanar ? src + nn * PIX * Q : src + nn * Q * PIX;
        float *d = kToPlanar ? dst + nn * Q * PIX : dst + nn * PIX * Q;
        for (i64 pix0 = i64(blockIdx.y) * kTile; pix0 < PIX; pix0 += i64(gridDim.y) * kTile) {
            if (kToPlanar) {
                for (int r = ty; r < kTile; r += kTileRows) {
                    const i64 pix = pix0 + r, q = q0 + tx;
                    if (pix < PIX && q < Q) tile[r][tx] = s[pix * Q + q];
                }
                __syncthreads();
                for (int r = ty; r < kTile; r += kTileRows) {
                    const i64 q = q0 + r, pix = pix0 + tx;
                    if (pix < PIX && q < Q) d[planar_row(q, caps4) * PIX + pix] = tile[tx][r];
                }
            } else {
                for (int r = ty; r < kTile; r += kTileRows) {
                    const i64 q = q0 + r, pix = pix0 + tx;
                    if (pix < PIX && q < Q) tile[r][tx] = s[planar_row(q, caps4) * PIX + pix];
                }
                __syncthreads();
                for (int r = ty; r < kTile; r += kTileRows) {
                    const i64 pix = pix0 + r, q = q0 + tx;
                    if (pix < PIX && q < Q) d[pix * Q + q] = tile[tx][r];
                }
            }
            __syncthreads();  // the tile is reused by the next iteration
        }
    }
}

template <bool kToPlanar>
cudaError_t launch_pose_planar(const float *src, float *dst, i64 N, i64 PIX, i64 caps, cudaStream_t stream) {
    if (!src || !dst || N < 1 || PIX < 1 || caps < 1) return cudaErrorInvalidValue;
    const i64 Q = caps * 16;
    const i64 gx = (Q + kTile - 1) / kTile, gy = (PIX + kTile - 1) / kTile;
    if (gx > INT_MAX) return cudaErrorInvalidValue;
    const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(std::min<i64>(gy, kMaxGrid)),
                    static_cast<unsigned>(std::min<i64>(N, kMaxGrid)));
    pose_planar_kernel<kToPlanar><<<grid, dim3(kTile, kTileRows), 0, stream>>>(src, dst, N, PIX, Q);
    return cudaGetLastError();
}

// Wt[co*4 + j][ci*4 + c][dy][dx] = K[dy][dx][ci][co][c][j]; one thread per
// element of Wt (coalesced writes; the filter is small).
__global__ void filter_to_kcrs_kernel(const float *__restrict__ K, float *__restrict__ Wt, i64 KH, i64 KW, i64 CI,
                                      i64 CO) {
    const i64 total = KH * KW * CI * CO * 16;
    for (i64 e = i64(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += i64(gridDim.x) * blockDim.x) {
        const i64 dx = e % KW;
        const i64 dy = (e / KW) % KH;
        const i64 ch = (e / (KW * KH)) % (CI * 4);
        const i64 k = e / (KW * KH * CI * 4);
        const i64 c = ch % 4, ci = ch / 4, j = k % 4, co = k / 4;
        Wt[e] = K[((((dy * KW + dx) * CI + ci) * CO + co) * 4 + c) * 4 + j];
    }
}

}  // namespace

CudnnLayoutSizes capsconv_cudnn_layout_sizes(const CapsConvShape &s) {
    return {s.batch * s.height * s.width * s.in_caps * 16, s.kernel_h * s.kernel_w * s.in_caps * s.out_caps * 16,
            s.batch * s.out_height() * s.out_width() * s.out_caps * 16};
}

cudaError_t capsconv_input_to_nchw(const float *input, float *x, const CapsConvShape &s, cudaStream_t stream) {
    if (!capsconv_shape_ok(s)) return cudaErrorInvalidValue;
    return launch_pose_planar<true>(input, x, s.batch, s.height * s.width, s.in_caps, stream);
}

cudaError_t capsconv_nchw_to_output(const float *y, float *output, const CapsConvShape &s, cudaStream_t stream) {
    if (!capsconv_shape_ok(s)) return cudaErrorInvalidValue;
    return launch_pose_planar<false>(y, output, s.batch, s.out_height() * s.out_width(), s.out_caps, stream);
}

cudaError_t capsconv_filter_to_kcrs(const float *filter, float *w, const CapsConvShape &s, cudaStream_t stream) {
    if (!capsconv_shape_ok(s) || !filter || !w) return cudaErrorInvalidValue;
    const i64 total = s.kernel_h * s.kernel_w * s.in_caps * s.out_caps * 16;
    const int threads = 256;
    const i64 blocks = std::min<i64>((total + threads - 1) / threads, 4096);
    filter_to_kcrs_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(filter, w, s.kernel_h, s.kernel_w,
                                                                                 s.in_caps, s.out_caps);
    return cudaGetLastError();
}

CudnnCapsConv::~CudnnCapsConv() {
    if (x_desc_) cudnnDestroyTensorDescriptor(x_desc_);
    if (y_desc_) cudnnDestroyTensorDescriptor(y_desc_);
    if (w_desc_) cudnnDestroyFilterDescriptor(w_desc_);
    if (conv_desc_) cudnnDestroyConvolutionDescriptor(conv_desc_);
}

const char *CudnnCapsConv::algorithm_name() const {
    switch (algorithm_) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
        return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
        return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
        return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT:
        return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
        return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
        return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
        return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
        return "WINOGRAD_NONFUSED";
    default:
        return "unknown";
    }
}

CudnnResult CudnnCapsConv::create(cudnnHandle_t handle, const CapsConvShape &s, std::unique_ptr<CudnnCapsConv> *out) {
    if (!handle || !out || !capsconv_shape_ok(s)) return bad_param();
    const CudnnLayoutSizes sizes = capsconv_cudnn_layout_sizes(s);
    // cuDNN's legacy descriptors take int extents, and its tensors must have
    // fewer than 2^31 elements.
    for (i64 v : {s.batch * 4, s.in_caps * 4, s.out_caps * 4, s.height, s.width, s.kernel_h, s.kernel_w, s.stride,
                  s.pad, sizes.x, sizes.w, sizes.y}) {
        if (!fits_int(v)) return bad_param();
    }
    std::unique_ptr<CudnnCapsConv> p(new CudnnCapsConv());
    p->shape_ = s;
    CudnnResult r;
    auto ok = [&](cudnnStatus_t st) {
        if (r.dnn == CUDNN_STATUS_SUCCESS) r.dnn = st;
        return r.dnn == CUDNN_STATUS_SUCCESS;
    };
    const int n4 = static_cast<int>(s.batch * 4), c4 = static_cast<int>(s.in_caps * 4),
              k4 = static_cast<int>(s.out_caps * 4);
    const int pad = static_cast<int>(s.pad), stride = static_cast<int>(s.stride);
    if (!ok(cudnnCreateTensorDescriptor(&p->x_desc_)) || !ok(cudnnCreateTensorDescriptor(&p->y_desc_)) ||
        !ok(cudnnCreateFilterDescriptor(&p->w_desc_)) || !ok(cudnnCreateConvolutionDescriptor(&p->conv_desc_))) {
        return r;
    }
    if (!ok(cudnnSetTensor4dDescriptor(p->x_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n4, c4,
                                       static_cast<int>(s.height), static_cast<int>(s.width))) ||
        !ok(cudnnSetFilter4dDescriptor(p->w_desc_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k4, c4,
                                       static_cast<int>(s.kernel_h), static_cast<int>(s.kernel_w))) ||
        !ok(cudnnSetConvolution2dDescriptor(p->conv_desc_, pad, pad, stride, stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_FLOAT)) ||
        !ok(cudnnSetConvolutionMathType(p->conv_desc_, CUDNN_FMA_MATH))) {
        return r;
    }
    int on = 0, oc = 0, oh = 0, ow = 0;
    if (!ok(cudnnGetConvolution2dForwardOutputDim(p->conv_desc_, p->x_desc_, p->w_desc_, &on, &oc, &oh, &ow))) return r;
    if (on != n4 || oc != k4 || oh != s.out_height() || ow != s.out_width()) return bad_param();
    if (!ok(cudnnSetTensor4dDescriptor(p->y_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, on, oc, oh, ow))) return r;

    int max_count = 0;
    if (!ok(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count))) return r;
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(std::max(max_count, 1));
    int returned = 0;
    if (!ok(cudnnFindConvolutionForwardAlgorithm(handle, p->x_desc_, p->w_desc_, p->conv_desc_, p->y_desc_,
                                                 static_cast<int>(perf.size()), &returned, perf.data()))) {
        return r;
    }
    // Results come sorted by time; take the first acceptable one.
    bool found = false;
    for (int k = 0; k < returned && !found; k++) {
        const auto &c = perf[k];
        const bool direct_sum = c.algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
                                c.algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
                                c.algo == CUDNN_CONVOLUTION_FWD_ALGO_GEMM ||
                                c.algo == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT;
        const bool fp32_math = c.mathType == CUDNN_FMA_MATH || c.mathType == CUDNN_DEFAULT_MATH;
        if (c.status == CUDNN_STATUS_SUCCESS && direct_sum && fp32_math) {
            p->algorithm_ = c.algo;
            found = true;
        }
    }
    if (!found) p->algorithm_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    // The descriptor keeps CUDNN_FMA_MATH whatever Find reported, so the run
    // never uses TF32.
    if (!ok(cudnnGetConvolutionForwardWorkspaceSize(handle, p->x_desc_, p->w_desc_, p->conv_desc_, p->y_desc_,
                                                    p->algorithm_, &p->workspace_bytes_))) {
        return r;
    }
    *out = std::move(p);
    return r;
}

CudnnResult CudnnCapsConv::core(cudnnHandle_t handle, const float *x, const float *w, float *y, void *workspace,
                                cudaStream_t stream) const {
    if (!handle || !x || !w || !y || (workspace_bytes_ > 0 && !workspace)) return bad_param();
    CudnnResult r;
    if ((r.dnn = cudnnSetStream(handle, stream)) != CUDNN_STATUS_SUCCESS) return r;
    const float alpha = 1.0f, beta = 0.0f;
    r.dnn = cudnnConvolutionForward(handle, &alpha, x_desc_, x, w_desc_, w, conv_desc_, algorithm_, workspace,
                                    workspace_bytes_, &beta, y_desc_, y);
    return r;
}

CudnnResult CudnnCapsConv::forward(cudnnHandle_t handle, const float *input, const float *filter, float *output,
                                   float *x, float *w, float *y, void *workspace, cudaStream_t stream) const {
    if (!input || !filter || !output) return bad_param();
    CudnnResult r;
    if ((r.cuda = capsconv_input_to_nchw(input, x, shape_, stream)) != cudaSuccess) return r;
    if ((r.cuda = capsconv_filter_to_kcrs(filter, w, shape_, stream)) != cudaSuccess) return r;
    r = core(handle, x, w, y, workspace, stream);
    if (!r.ok()) return r;
    r.cuda = capsconv_nchw_to_output(y, output, shape_, stream);
    return r;
}

}  // namespace halcaps::cuda_reference

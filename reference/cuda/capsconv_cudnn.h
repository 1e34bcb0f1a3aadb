// cuDNN peer for the capsule convolution: the operator run as an ordinary
// convolution, the way a cuDNN (or PyTorch conv2d) user would run it.
//
// The 4x4 pose product O_ij = sum_c I_ic K_cj is a convolution with the pose
// row i folded into the batch, the pose column c into the input channels and
// the pose column j into the output channels:
//
//   X [n*4 + i][ci*4 + c][H][W]        = I[n, y, x, ci, i, c]     (NCHW)
//   Wt[co*4 + j][ci*4 + c][kh][kw]     = K[dy, dx, ci, co, c, j]  (KCRS)
//   Y [n*4 + i][co*4 + j][OH][OW]      = O[n, y, x, co, i, j]     (NCHW)
//
// with cross-correlation, the operator's stride and zero padding, fp32 data
// and compute, and CUDNN_FMA_MATH (no TF32 tensor ops, fp32-exact FMAs).
//
// Versions, naive first:
//   forward  permute I and K into X and Wt, cudnnConvolutionForward, permute
//            Y back to O [n, OH, OW, co, 4, 4]: what the user pays;
//   core     cudnnConvolutionForward alone on X and Wt into Y (a different
//            layout from the operator's output), for timing the library.
// H200 (bench, seed / layer pad 1 / stride2): with the permutes
// 134 / 330 / 121 us, core alone 79 / 270 / 95 us (docs/design.md §3: 67 us incl.
// permutes on the seed problem; 190 / 130 us incl. permutes / core on the
// layer: our permutes and algorithm choice, which excludes FFT and Winograd,
// cost more than that peer's).
//
// The algorithm is chosen once per shape (CudnnCapsConv::create) by
// cudnnFindConvolutionForwardAlgorithm: the fastest that succeeded in FMA
// math, among the direct and GEMM-based algorithms. FFT and Winograd are left
// out: their transforms round differently from a direct fp32 sum, so their
// results are not the same computation as the other rows (a framework's
// benchmark mode might pick them). If none qualifies, IMPLICIT_GEMM (no
// workspace) is used.
//
// All pointers are device pointers; nothing is synchronised except inside
// create() (Find runs the candidates). The caller owns the handle and the
// workspace (workspace_bytes() of it); calls set the handle's stream.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdint>
#include <memory>

#include "capsconv_cuda.h"

namespace halcaps::cuda_reference {

// The first cuDNN status that was not success (else CUDNN_STATUS_SUCCESS) and
// the first CUDA error of a kernel launch (else cudaSuccess). Invalid
// arguments give CUDNN_STATUS_BAD_PARAM and launch nothing. Turn into text
// with cudnnGetErrorString / cudaGetErrorString.
struct CudnnResult {
    cudnnStatus_t dnn = CUDNN_STATUS_SUCCESS;
    cudaError_t cuda = cudaSuccess;
    bool ok() const { return dnn == CUDNN_STATUS_SUCCESS && cuda == cudaSuccess; }
};

// Element counts of X, Wt and Y above (the permuted copies the forward needs
// as scratch; the input, filter and output sizes).
struct CudnnLayoutSizes {
    int64_t x, w, y;
};
CudnnLayoutSizes capsconv_cudnn_layout_sizes(const CapsConvShape &shape);

// Descriptors and the chosen algorithm for one shape (and one handle).
class CudnnCapsConv {
public:
    // Fails with CUDNN_STATUS_BAD_PARAM for an invalid shape or one whose
    // extents exceed cuDNN's int range.
    static CudnnResult create(cudnnHandle_t handle, const CapsConvShape &shape, std::unique_ptr<CudnnCapsConv> *out);
    ~CudnnCapsConv();
    CudnnCapsConv(const CudnnCapsConv &) = delete;
    CudnnCapsConv &operator=(const CudnnCapsConv &) = delete;

    size_t workspace_bytes() const { return workspace_bytes_; }
    cudnnConvolutionFwdAlgo_t algorithm() const { return algorithm_; }
    const char *algorithm_name() const;
    const CapsConvShape &shape() const { return shape_; }

    // Y = conv(X, Wt), layouts above. `workspace` holds workspace_bytes()
    // (may be null when that is 0).
    CudnnResult core(cudnnHandle_t handle, const float *x, const float *w, float *y, void *workspace,
                     cudaStream_t stream) const;

    // output = capsconv(input, filter) through the permutes; x, w, y are
    // scratch of capsconv_cudnn_layout_sizes() floats.
    CudnnResult forward(cudnnHandle_t handle, const float *input, const float *filter, float *output, float *x,
                        float *w, float *y, void *workspace, cudaStream_t stream) const;

private:
    CudnnCapsConv() = default;
    CapsConvShape shape_{};
    cudnnTensorDescriptor_t x_desc_ = nullptr, y_desc_ = nullptr;
    cudnnFilterDescriptor_t w_desc_ = nullptr;
    cudnnConvolutionDescriptor_t conv_desc_ = nullptr;
    cudnnConvolutionFwdAlgo_t algorithm_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    size_t workspace_bytes_ = 0;
};

// The layout permutes alone (used by forward; exposed for tests and for
// preparing core()'s inputs): I -> X, K -> Wt, Y -> O.
cudaError_t capsconv_input_to_nchw(const float *input, float *x, const CapsConvShape &shape, cudaStream_t stream);
cudaError_t capsconv_filter_to_kcrs(const float *filter, float *w, const CapsConvShape &shape, cudaStream_t stream);
cudaError_t capsconv_nchw_to_output(const float *y, float *output, const CapsConvShape &shape, cudaStream_t stream);

}  // namespace halcaps::cuda_reference

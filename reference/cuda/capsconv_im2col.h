// im2col + cuBLAS SGEMM peer for the capsule convolution: the lowering of a
// convolution to one matrix product (as in the MXNet design notes), applied
// to the 4x4-pose operator. fp32 with TF32 off (CUBLAS_DEFAULT_MATH).
//
// Rows are (output pixel p = (n, y, x), pose row i), the reduction runs over
// (tap t = (dy, dx, ci), pose column c), columns are (co, pose column j):
//
//   A    [P*4][T*4]      A[(p,i)][(t,c)] = I[n, y*stride+dy-pad, x*stride+dx-pad, ci, i, c]  (0 in the padding)
//   B    [T*4][CO*4]     B[(t,c)][(co,j)] = K[dy, dx, ci, co, c, j]
//   C    [P*4][CO*4]     C = A . B,  C[(p,i)][(co,j)] = O[n, y, x, co, i, j]
//
// Steps: the im2col kernel writes A (one thread per (p, t): one 64-byte pose
// read, four 16-byte writes into four rows, coalesced along t); one
// cublasSgemm; and, only when co > 1, two small permutes, because the
// operator's layouts order (co, i) and (co, c) the other way round from C and
// B: K [t][co][c][j] -> B [t][c][co][j] before, C [p][i][co][j] -> O
// [p][co][i][j] after. With co = 1 the filter is B and the output is C as
// they stand.
//
// Extra memory: A (P*4 x T*4 floats, the im2col buffer: kh*kw times the
// input for stride 1) plus, when co > 1, the permuted filter and C.
// H200 (bench, seed / layer pad 1 / stride2): 165 / 408 / 66 us.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "capsconv_cuda.h"
#include "predict_cublas.h"  // CublasResult

namespace halcaps::cuda_reference {

// Scratch floats the call needs: the im2col buffer A, and B and C (0 when co = 1).
struct Im2colSizes {
    int64_t columns;  // A
    int64_t filter;   // B
    int64_t product;  // C
    int64_t total() const { return columns + filter + product; }
};
Im2colSizes capsconv_im2col_sizes(const CapsConvShape &shape);

// output = capsconv(input, filter). `scratch` holds capsconv_im2col_sizes().total()
// floats (16-byte aligned). Invalid arguments (bad shape, null pointer,
// extents beyond cuBLAS's int range) give CUBLAS_STATUS_INVALID_VALUE and
// launch nothing. Sets the handle's stream, math mode (CUBLAS_DEFAULT_MATH)
// and pointer mode (host).
CublasResult capsconv_im2col_cublas(cublasHandle_t handle, const float *input, const float *filter, float *output,
                                    float *scratch, const CapsConvShape &shape, cudaStream_t stream);

}  // namespace halcaps::cuda_reference

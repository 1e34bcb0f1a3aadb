// Version 4 of the hand-written prediction backward (predict_cuda.h),
// defined in predict_tensor_cores.cu: both gradients in one pass
// over g on the tensor cores (3xTF32).
#pragma once

#include <cuda_runtime_api.h>

#include "predict_cuda.h"

namespace halcaps::cuda_reference {

// Whether the shape's extents fit the kernel's 32-bit indices; where not,
// version 4 runs version 1's kernels.
bool predict_backward_tensor_cores_supported(const PredictShape &shape);

// grad_u and grad_W (both non-null) from g; device pointers, enqueued on
// `stream`, cudaGetLastError() returned.
cudaError_t predict_backward_tensor_cores(const float *g, const float *u, const float *W, float *grad_u, float *grad_W,
                                          const PredictShape &shape, cudaStream_t stream);

}  // namespace halcaps::cuda_reference

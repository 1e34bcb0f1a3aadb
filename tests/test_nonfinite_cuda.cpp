// NaN, +inf and -inf in each input of the prediction and the capsule
// convolution, forward and backward, by every CUDA implementation: the
// Halide schedules, the hand-written kernels (the 3xTF32 ones included:
// reference/cuda/tf32_mma.cuh keeps an infinite operand's products
// infinite) and the library peers (cuBLAS, cuDNN's direct-sum algorithms).
// The routing ops' cases are in test_digitcaps_cuda.cpp.
#include "nonfinite_checks.h"

using namespace halcaps;
using namespace halcaps::testing;

TEST_CASE("cuda nonfinite: predict and predict_backward, each input", "[cuda][nonfinite]") {
    check_nonfinite_predict(Device::cuda);
}

TEST_CASE("cuda nonfinite: capsconv and capsconv_backward, each input", "[cuda][nonfinite]") {
    check_nonfinite_capsconv(Device::cuda);
}

// Reference implementations of the 4x4-pose capsule convolution (docs/design.md §1.3):
//  - float64 plain loops, forward and both gradients: the ground truth;
//  - float32 loops compiled -O3 with OpenMP: the "gcc -fopenmp" CPU baseline.
//
//   I  [n, H, W, ci, 4, 4]      input pose matrices
//   K  [kh, kw, ci, co, 4, 4]   filter pose matrices
//   O  [n, OH, OW, co, 4, 4]    OH = (H + 2 pad - kh) / stride + 1
//   O[n,y,x,co] = sum_{dy,dx,ci} I[n, y stride + dy - pad, x stride + dx - pad, ci] . K[dy,dx,ci,co]
// where . is the 4x4 matrix product (O_ij = sum_c I_ic K_cj) and input
// outside the image is zero. All tensors row-major.
#pragma once

#include <cstdint>
#include <vector>

namespace halcaps::reference {

constexpr int64_t kPose = 4;  // pose matrices are 4 x 4

struct CapsConvShape {
    int64_t batch, height, width, in_caps;  // n, H, W, ci
    int64_t kernel_h, kernel_w, out_caps;   // kh, kw, co
    int64_t stride = 1, pad = 0;

    int64_t out_height() const { return (height + 2 * pad - kernel_h) / stride + 1; }
    int64_t out_width() const { return (width + 2 * pad - kernel_w) / stride + 1; }
    int64_t input_size() const { return batch * height * width * in_caps * 16; }
    int64_t filter_size() const { return kernel_h * kernel_w * in_caps * out_caps * 16; }
    int64_t output_size() const { return batch * out_height() * out_width() * out_caps * 16; }
    // 2 flops (multiply, add) per term of every output element's sum.
    double flops() const { return 2.0 * output_size() * kernel_h * kernel_w * in_caps * kPose; }
};

// float64 reference, on float32 inputs (as the kernels see them) or float64 ones.
std::vector<double> capsconv_f64(const CapsConvShape &s, const double *input, const double *filter);
std::vector<double> capsconv_f64(const CapsConvShape &s, const float *input, const float *filter);

// Gradients given grad_output = dL/dO [n, OH, OW, co, 4, 4]:
//   grad_input  [n, H, W, ci, 4, 4]:  dL/dI_ic = sum over the outputs it feeds of sum_j g_ij K_cj
//   grad_filter [kh, kw, ci, co, 4, 4]: dL/dK_cj = sum over n, y, x of sum_i I_ic g_ij
std::vector<double> capsconv_grad_input_f64(const CapsConvShape &s, const double *grad_output, const double *filter);
std::vector<double> capsconv_grad_input_f64(const CapsConvShape &s, const float *grad_output, const float *filter);
std::vector<double> capsconv_grad_filter_f64(const CapsConvShape &s, const double *grad_output, const double *input);
std::vector<double> capsconv_grad_filter_f64(const CapsConvShape &s, const float *grad_output, const float *input);

// The forward in float32, parallel over (n, y) with OpenMP.
void capsconv_naive_openmp(const CapsConvShape &s, const float *input, const float *filter, float *output);

}  // namespace halcaps::reference

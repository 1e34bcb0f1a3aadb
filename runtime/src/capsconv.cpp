// Entry points for the capsule convolution (docs/design.md §1.3), forward and
// backward: argument checks and the device, then the operator's table
// (capsconv_implementations.cpp). The direct Halide kernels
// (generators/capsconv.cpp) take stride and pad as their two leading scalar
// arguments.
#include <limits>

#include "argument_checks.h"
#include "implementations.h"
#include "operator_support.h"

namespace halcaps {

namespace {

using detail::ArgumentChecks;

// The dimension names shared between tensors (ArgumentChecks matches extents by name).
const std::vector<const char *> kInputDims = {"batch", "height", "width", "in_caps", "pose_row", "pose_col"};
const std::vector<const char *> kFilterDims = {"kernel_h", "kernel_w", "in_caps", "out_caps", "pose_row", "pose_col"};
const std::vector<const char *> kOutputDims = {"batch", "out_height", "out_width", "out_caps", "pose_row", "pose_col"};

Status fail(const char *op, StatusCode code, const std::string &message) {
    return {code, std::string(op) + ": " + message};
}

// The largest stride and pad the kernels take (their Input<int32_t> ranges
// in generators/capsconv.cpp); a kernel handed more fails its own check.
constexpr int kMaxStrideOrPad = 1 << 20;

// After the tensors' own checks: stride and pad in range, 4x4 poses, a
// filter that fits the padded image, and output extents that agree.
Status check_conv(const char *op, const ArgumentChecks &checks, const ConvParams &params, const char *output_name) {
    if (params.stride < 1) {
        return fail(op, StatusCode::bad_parameter,
                    "stride is " + std::to_string(params.stride) + "; it must be at least 1");
    }
    if (params.pad < 0) {
        return fail(op, StatusCode::bad_parameter, "pad is " + std::to_string(params.pad) + "; it must be at least 0");
    }
    if (params.stride > kMaxStrideOrPad || params.pad > kMaxStrideOrPad) {
        const bool stride = params.stride > kMaxStrideOrPad;
        return fail(op, StatusCode::bad_parameter,
                    std::string(stride ? "stride" : "pad") + " is " +
                        std::to_string(stride ? params.stride : params.pad) + "; the kernels take at most " +
                        std::to_string(kMaxStrideOrPad));
    }
    for (const char *dim : {"pose_row", "pose_col"}) {
        if (checks.extent(dim) != 4) {
            return fail(op, StatusCode::bad_extent,
                        std::string("input's ") + dim + " extent is " + std::to_string(checks.extent(dim)) +
                            "; pose matrices must be 4 x 4");
        }
    }
    const int64_t expected[2] = {
        (checks.extent("height") + 2 * int64_t(params.pad) - checks.extent("kernel_h")) / params.stride + 1,
        (checks.extent("width") + 2 * int64_t(params.pad) - checks.extent("kernel_w")) / params.stride + 1};
    const char *side[2] = {"height", "width"};
    for (int d = 0; d < 2; d++) {
        const int64_t padded = checks.extent(side[d]) + 2 * int64_t(params.pad);
        const int64_t kernel = checks.extent(d == 0 ? "kernel_h" : "kernel_w");
        if (kernel > padded) {
            return fail(op, StatusCode::bad_extent,
                        std::string("filter ") + (d == 0 ? "kernel_h" : "kernel_w") + " is " + std::to_string(kernel) +
                            " but the padded input " + side[d] + " is only " + std::to_string(padded));
        }
        const int64_t got = checks.extent(d == 0 ? "out_height" : "out_width");
        if (got != expected[d]) {
            return fail(op, StatusCode::extent_mismatch,
                        std::string(output_name) + " extent " + std::to_string(d + 1) + " (out_" + side[d] + ") is " +
                            std::to_string(got) + " but stride " + std::to_string(params.stride) + " and pad " +
                            std::to_string(params.pad) + " give " + std::to_string(expected[d]));
        }
    }
    return Status::success();
}

// The stride and pad handed to the direct kernels. With one output pixel the
// stride is never applied, so the kernels get 1: their tiles of the padded
// input grow with the stride (at stride 2^20 past 2^31 bytes).
std::vector<int32_t> kernel_scalars(const ArgumentChecks &checks, const ConvParams &params) {
    const bool one_pixel = checks.extent("out_height") == 1 && checks.extent("out_width") == 1;
    return {one_pixel ? 1 : params.stride, params.pad};
}

detail::CapsConvCall conv_call(const char *op, Device device, const Options &options, const ArgumentChecks &checks,
                               const ConvParams &params) {
    detail::CapsConvCall call;
    call.op = op, call.device = device, call.options = &options;
    call.params = params;
    call.kernel_h = checks.extent("kernel_h"), call.kernel_w = checks.extent("kernel_w");
    call.out_caps = checks.extent("out_caps");
    call.direct_scalars = kernel_scalars(checks, params);
    return call;
}

}  // namespace

Status capsconv(const TensorView &input, const TensorView &filter, const TensorView &output, const ConvParams &params,
                const Options &options) {
    const char *op = "capsconv";
    ArgumentChecks checks(op);
    checks.tensor("input", input, kInputDims);
    checks.tensor("filter", filter, kFilterDims);
    checks.tensor("output", output, kOutputDims);
    const Device device = checks.resolve_device(options.device);
    if (!checks.status().ok()) return checks.status();
    if (Status s = check_conv(op, checks, params, "output"); !s.ok()) return s;
    if (Status s = detail::check_device_ready(op, device); !s.ok()) return s;

    detail::CapsConvCall call = conv_call(op, device, options, checks, params);
    call.input = &input, call.filter = &filter, call.output = &output;
    return detail::run_implementation(detail::capsconv_implementations(), call);
}

Status capsconv_backward(const TensorView &input, const TensorView &filter, const TensorView &grad_output,
                         const TensorView &grad_input, const TensorView &grad_filter, const ConvParams &params,
                         const Options &options) {
    const char *op = "capsconv_backward";
    ArgumentChecks checks(op);
    checks.tensor("input", input, kInputDims);
    checks.tensor("filter", filter, kFilterDims);
    checks.tensor("grad_output", grad_output, kOutputDims);
    checks.tensor("grad_input", grad_input, kInputDims);
    checks.tensor("grad_filter", grad_filter, kFilterDims);
    const Device device = checks.resolve_device(options.device);
    if (!checks.status().ok()) return checks.status();
    if (Status s = check_conv(op, checks, params, "grad_output"); !s.ok()) return s;
    if (Status s = detail::check_device_ready(op, device); !s.ok()) return s;

    detail::CapsConvCall call = conv_call(op, device, options, checks, params);
    call.input = &input, call.filter = &filter, call.grad_output = &grad_output;
    call.grad_input = &grad_input, call.grad_filter = &grad_filter;
    return detail::run_implementation(detail::capsconv_backward_implementations(), call);
}

}  // namespace halcaps

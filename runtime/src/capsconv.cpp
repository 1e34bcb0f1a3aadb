// Entry points for the capsule convolution (docs/design.md §1.3), forward and
// backward: argument checks, device and implementation choice, then the
// Halide kernels (generators/capsconv.cpp), which take stride and pad as
// their two leading scalar arguments.
#include <limits>

#include "argument_checks.h"
#include "halide_call.h"
#include "hand_cuda.h"
#include "kernel_registry.h"
#include "operator_support.h"

namespace halcaps {

namespace {

using detail::ArgumentChecks;
using detail::HalideKernelEntry;

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
                    std::string(stride ? "stride" : "pad") + " is " + std::to_string(stride ? params.stride : params.pad) +
                        "; the kernels take at most " + std::to_string(kMaxStrideOrPad));
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

// The forward's default on the CPU depends on co: `cpu_co4` blocks 4 output
// capsule types at a time (1.8x faster than `cpu` on the n=8, ci=co=32
// layer) but computes and discards a whole block past the last one, so it is
// the default only when co is a multiple of 4.
// On CUDA likewise `tuned_co4` (4 output capsule types a thread): on an H200
// 699 us against 1489 us for `tuned` on that layer and 180 against 203 us on
// the stride-2 one, but 57 against 35 us on the seed problem (co = 1).
// On CUDA, 3x3 filters at stride 1 go to the Winograd form F(4x4, 3x3):
// on the layer-sized problem (n=8, 32x32, ci=co=32, pad 1) on an H200,
// 207 us against tuned_co4's 698 us and cuDNN's 324 us with its permutes
// (docs/history.md: nvidia-h200-winograd/). Its float32 error is larger than
// the direct sum's (relative L2 1.6e-6 against 6e-7 there), within the same
// tolerance. On the CPU the Winograd forms are slower than cpu_co4 (35 and
// 58 ms against 26 ms on that layer), so they are not the default there.
// Every other shape on CUDA goes to staged_rows (16-byte pose rows, input
// tile and filter staged in shared memory): on an H200 the seed problem in
// 28.3 us against tuned's 40.3 and our I3 kernel's 52.3, the stride-2 layer
// in 109.8 against tuned_co4's 181.9 (one run,
// docs/history.md: nvidia-h200-staged-rows/capsconv.txt).
// Its staged tiles grow with the stride and the filter; for shapes whose
// tiles pass the 48 KB a launch gets it returns unsupported_shape, and the
// default then runs cuda_fallback_implementation() instead.
constexpr const char *kCudaDirectDefault = "staged_rows";

std::string forward_implementation(const Options &options, Device device, int64_t out_caps, int64_t kernel_h,
                                   int64_t kernel_w, int stride) {
    const bool gpu = detail::runs_gpu_schedules(device);
    if (options.implementation.empty() && gpu && kernel_h == 3 && kernel_w == 3 && stride == 1) {
        return "winograd4x4_staged";
    }
    if (options.implementation.empty() && gpu) return kCudaDirectDefault;
    if (options.implementation.empty() && out_caps % 4 == 0) return device == Device::cpu ? "cpu_co4" : "tuned_co4";
    return detail::chosen_implementation(options, device);
}

// The CUDA default where staged_rows' tiles do not fit: the unstaged direct
// schedules, tuned_co4 when co is a multiple of 4.
std::string cuda_fallback_implementation(int64_t out_caps) { return out_caps % 4 == 0 ? "tuned_co4" : "tuned"; }

// The Winograd implementations (generators/capsconv_winograd.cpp) are named
// "<form>_<schedule>": the form is winograd2x2 or winograd4x4 (generator
// capsconv_<form>), e.g. "winograd4x4_staged".
const char *const kWinogradForms[] = {"winograd2x2", "winograd4x4"};

// The generator and schedule of a Winograd implementation name; false for any other name.
bool split_winograd_name(const std::string &implementation, std::string *generator, std::string *schedule) {
    for (const char *form : kWinogradForms) {
        const std::string prefix = std::string(form) + "_";
        if (implementation.compare(0, prefix.size(), prefix) == 0) {
            *generator = std::string("capsconv_") + form;
            *schedule = implementation.substr(prefix.size());
            return true;
        }
    }
    return false;
}

// The Winograd forms compute 3x3 filters at stride 1 only (any pad).
Status run_winograd(const char *op, const std::string &implementation, const std::string &generator,
                    const std::string &schedule, const ArgumentChecks &checks, const TensorView &input,
                    const TensorView &filter, const TensorView &output, const ConvParams &params, Device device,
                    const Options &options) {
    if (checks.extent("kernel_h") != 3 || checks.extent("kernel_w") != 3 || params.stride != 1) {
        return fail(op, StatusCode::unsupported_shape,
                    "implementation '" + implementation + "' computes 3x3 filters at stride 1 only; filter is " +
                        std::to_string(checks.extent("kernel_h")) + "x" + std::to_string(checks.extent("kernel_w")) +
                        ", stride " + std::to_string(params.stride));
    }
    const detail::HalideKernelEntry *kernel = detail::find_halide_kernel(generator, schedule, device);
    if (kernel == nullptr) {
        return fail(op, StatusCode::unknown_implementation,
                    "no implementation named '" + implementation + "' for device " + device_name(device) +
                        "; available: " + detail::implementation_names(op, device));
    }
    return detail::run_halide(op, kernel->function, device, options, {input, filter}, {output}, {params.pad},
                              {"input", "filter", "output"});
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

    const std::string implementation =
        forward_implementation(options, device, checks.extent("out_caps"), checks.extent("kernel_h"),
                               checks.extent("kernel_w"), params.stride);
    if (std::string generator, schedule; split_winograd_name(implementation, &generator, &schedule)) {
        return run_winograd(op, implementation, generator, schedule, checks, input, filter, output, params, device,
                            options);
    }
    if (device == Device::cuda && detail::is_hand_cuda_implementation(op, implementation)) {
        return detail::run_hand_cuda_capsconv(implementation, input, filter, output, params, options);
    }
    auto run_direct = [&](const std::string &name) {
        const HalideKernelEntry *kernel = nullptr;
        if (Status s = detail::find_kernel(op, "capsconv", name, device, &kernel); !s.ok()) return s;
        return detail::run_halide(op, kernel->function, device, options, {input, filter}, {output},
                                  kernel_scalars(checks, params), {"input", "filter", "output"});
    };
    const Status result = run_direct(implementation);
    const bool defaulted = options.implementation.empty() && implementation == kCudaDirectDefault;
    if (result.code == StatusCode::unsupported_shape && defaulted) {
        return run_direct(cuda_fallback_implementation(checks.extent("out_caps")));
    }
    return result;
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

    // On CUDA the default is tuned_caps (its grad_filter walks the capsule
    // types across a warp): 2521 against tuned's 11612 us for both gradients
    // of the layer-sized problem on an H200 (schedules/capsconv_schedules.cpp).
    const std::string implementation = options.implementation.empty() && detail::runs_gpu_schedules(device)
                                           ? std::string("tuned_caps")
                                           : detail::chosen_implementation(options, device);
    const HalideKernelEntry *grad_in = nullptr, *grad_filt = nullptr;
    if (Status s = detail::find_kernel(op, "capsconv_grad_input", implementation, device, &grad_in); !s.ok()) return s;
    if (Status s = detail::find_kernel(op, "capsconv_grad_filter", implementation, device, &grad_filt); !s.ok()) {
        return s;
    }
    if (Status s = detail::run_halide(op, grad_in->function, device, options, {grad_output, filter}, {grad_input},
                                      kernel_scalars(checks, params), {"grad_output", "filter", "grad_input"});
        !s.ok()) {
        return s;
    }
    return detail::run_halide(op, grad_filt->function, device, options, {grad_output, input}, {grad_filter},
                              kernel_scalars(checks, params), {"grad_output", "input", "grad_filter"});
}

namespace detail {

void append_capsconv_implementations(std::vector<ImplementationInfo> &out) {
    for (const auto &k : halide_kernels()) {
        const std::string generator = k.generator, schedule = k.schedule;
        if (generator == "capsconv") {
            out.push_back({"capsconv", schedule, k.device, "Halide schedule '" + schedule + "' (4x4-pose capsule convolution)", {}});
        } else if (generator == "capsconv_grad_input" &&
                   find_halide_kernel("capsconv_grad_filter", schedule, k.device) != nullptr) {
            out.push_back({"capsconv_backward", schedule, k.device,
                           "Halide schedules '" + schedule + "' (grad_input, grad_filter)", {}});
        }
        for (const char *form : kWinogradForms) {
            if (generator == std::string("capsconv_") + form) {
                out.push_back({"capsconv", std::string(form) + "_" + schedule, k.device,
                               "Halide schedule '" + schedule + "' of the Winograd form " + form +
                                   " (3x3 filters, stride 1 only)",
                               {}});
            }
        }
    }
}

}  // namespace detail

}  // namespace halcaps

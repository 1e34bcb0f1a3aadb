// Helpers for the capsule convolution tests (docs/design.md §1.3): one problem's
// tensors (inputs random, outputs NaN) and the checks of the kernels' results
// against the float64 reference.
#pragma once

#include <string>
#include <vector>

#include "capsconv_reference.h"
#include "test_support.h"

namespace halcaps::testing {

inline std::string shape_name(const reference::CapsConvShape &s) {
    return "n=" + std::to_string(s.batch) + " H=" + std::to_string(s.height) + " W=" + std::to_string(s.width) +
           " ci=" + std::to_string(s.in_caps) + " k=" + std::to_string(s.kernel_h) + "x" + std::to_string(s.kernel_w) +
           " co=" + std::to_string(s.out_caps) + " stride=" + std::to_string(s.stride) +
           " pad=" + std::to_string(s.pad);
}

struct CapsConvProblem {
    reference::CapsConvShape s;
    std::vector<float> input, filter, grad_output, output, grad_input, grad_filter;

    explicit CapsConvProblem(reference::CapsConvShape shape)
        : s(shape), input(random_normal(s.input_size())), filter(random_normal(s.filter_size())),
          grad_output(random_normal(s.output_size())), output(nan_filled(s.output_size())),
          grad_input(nan_filled(s.input_size())), grad_filter(nan_filled(s.filter_size())) {}

    std::vector<int64_t> input_shape() const { return {s.batch, s.height, s.width, s.in_caps, 4, 4}; }
    std::vector<int64_t> filter_shape() const { return {s.kernel_h, s.kernel_w, s.in_caps, s.out_caps, 4, 4}; }
    std::vector<int64_t> output_shape() const { return {s.batch, s.out_height(), s.out_width(), s.out_caps, 4, 4}; }
    ConvParams params() const { return {static_cast<int>(s.stride), static_cast<int>(s.pad)}; }
};

// Both gradients with `options`, checked against float64 (problem `p`'s
// grad_input and grad_filter start NaN-poisoned).
inline void check_capsconv_backward(CapsConvProblem &p, const Options &options) {
    const reference::CapsConvShape &shape = p.s;
    const Status b =
        capsconv_backward(host_view(p.input, p.input_shape()), host_view(p.filter, p.filter_shape()),
                          host_view(p.grad_output, p.output_shape()), host_view(p.grad_input, p.input_shape()),
                          host_view(p.grad_filter, p.filter_shape()), p.params(), options);
    INFO(b.message);
    REQUIRE(b.ok());
    require_matches("grad_input", p.grad_input,
                    reference::capsconv_grad_input_f64(p.s, p.grad_output.data(), p.filter.data()),
                    shape.kernel_h * shape.kernel_w * shape.out_caps * 4);
    require_matches("grad_filter", p.grad_filter,
                    reference::capsconv_grad_filter_f64(p.s, p.grad_output.data(), p.input.data()),
                    shape.batch * shape.out_height() * shape.out_width() * 4);
}

// Forward and backward with `options`, each output checked against float64.
inline void check_capsconv(const reference::CapsConvShape &shape, const Options &options, bool backward = true) {
    CapsConvProblem p(shape);
    INFO("seed " << seed() << ", shape " << shape_name(shape) << ", implementation " << options.implementation);
    const Status forward = capsconv(host_view(p.input, p.input_shape()), host_view(p.filter, p.filter_shape()),
                                    host_view(p.output, p.output_shape()), p.params(), options);
    INFO(forward.message);
    REQUIRE(forward.ok());
    require_matches("output", p.output, reference::capsconv_f64(p.s, p.input.data(), p.filter.data()),
                    shape.kernel_h * shape.kernel_w * shape.in_caps * 4);
    if (backward) check_capsconv_backward(p, options);
}

}  // namespace halcaps::testing

// Helpers for the capsule convolution tests (DESIGN.md §1.3): one problem's
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
};

}  // namespace halcaps::testing

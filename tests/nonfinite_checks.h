// NaN, +inf and -inf in each input of the prediction and the capsule
// convolution, by every implementation on a device (list_implementations),
// against the float64 reference: the same elements NaN and the same ones
// +-inf as the plain formulas give in IEEE arithmetic (docs/design.md §1.2),
// and the finite elements within the usual tolerance (reference::compare
// checks both). Host tensors: CUDA and OpenCL copy them in and out. On a GPU
// device an implementation may refuse a shape with unsupported_shape (the
// capsule convolution's staged tiles, the Winograd forms off 3x3 stride 1),
// which the checks accept with its message; on the CPU every one must run.
// The routing ops' checks are in digitcaps_checks.h.
#pragma once

#include <limits>

#include "capsconv_checks.h"
#include "digitcaps_checks.h"

namespace halcaps::testing {

// How an implementation's non-finite elements may differ from the
// reference's where it is checked with require_nonfinite_pattern.
//  - superset: the Winograd forms. Their output tile is a linear mix of its
//    whole input tile (F(m x m, 3 x 3): (m + 2)^2 pixels) whose terms for
//    pixels outside an output's 3 x 3 window cancel exactly in real
//    arithmetic; NaN and inf do not cancel (0 * inf, inf - inf), so a
//    non-finite input pixel makes every output of its tiles non-finite.
//    Every element the reference has non-finite must be non-finite.
//  - subset: cuDNN (the "cudnn" peer), which leaves out the filter taps that
//    fall in the zero padding instead of multiplying them by zero, so a NaN
//    or inf filter value does not reach the outputs for which that tap lies
//    outside the image. Every element it gives non-finite must be so in the
//    reference, NaN where the reference is NaN.
// Either way every element finite in both must match the reference; the
// elements that differ are counted.
enum class NonfinitePattern { superset, subset };

inline bool skips_padding_taps(const std::string &implementation) { return implementation == "cudnn"; }

inline void require_nonfinite_pattern(const std::vector<float> &x, const std::vector<double> &ref,
                                      int64_t reduction_length, NonfinitePattern pattern) {
    const bool superset = pattern == NonfinitePattern::superset;
    std::vector<float> finite_x;
    std::vector<double> finite_ref;
    int64_t differing = 0;
    for (size_t n = 0; n < ref.size(); n++) {
        const bool x_finite = std::isfinite(x[n]), ref_finite = std::isfinite(ref[n]);
        if (x_finite && ref_finite) {
            finite_x.push_back(x[n]);
            finite_ref.push_back(ref[n]);
            continue;
        }
        INFO("element " << n << ": " << x[n] << ", the reference " << ref[n]);
        if (superset && !ref_finite) REQUIRE(!x_finite);
        if (!superset && !x_finite) {
            REQUIRE(!ref_finite);
            REQUIRE((std::isnan(x[n]) == std::isnan(ref[n])));
        }
        if (x_finite != ref_finite) differing++;
    }
    INFO(differing << " elements non-finite in one of the output and the formula only, of " << ref.size());
    if (!finite_ref.empty()) require_matches("output (finite elements)", finite_x, finite_ref, reduction_length);
}

// Whether st is a GPU implementation's refusal of the shape (see above).
inline bool refused_on_gpu(Device device, const Status &st) {
    if (device == Device::cpu || st.code != StatusCode::unsupported_shape) return false;
    REQUIRE(!st.message.empty());
    return true;
}

inline void check_nonfinite_predict(Device device) {
    const reference::PredictShape s{3, 5, 7, 4, 6};
    for (const float special : kSpecials) {
        for (const char *input : {"u", "W", "g"}) {
            INFO("seed " << seed() << ", " << special << " in " << input);
            PredictProblem base(s);
            poison(std::string(input) == "u" ? base.u : std::string(input) == "W" ? base.W : base.g, special);
            if (std::string(input) != "g") {
                const auto ref = reference::predict_f64(s, base.u.data(), base.W.data());
                REQUIRE(count_nonfinite(ref) > 0);
                for (const auto &impl : implementations_for("predict", device)) {
                    INFO("predict " << impl);
                    PredictProblem p = base;
                    const Status st = predict(host_view(p.u, p.u_shape()), host_view(p.W, p.W_shape()),
                                              host_view(p.u_hat, p.u_hat_shape()), device_options(device, impl));
                    INFO(st.message);
                    if (refused_on_gpu(device, st)) continue;
                    REQUIRE(st.ok());
                    require_matches("u_hat", p.u_hat, ref, s.in_dim);
                }
            }
            const auto ref_u = reference::predict_grad_input_f64(s, base.g.data(), base.W.data());
            const auto ref_W = reference::predict_grad_weight_f64(s, base.g.data(), base.u.data());
            for (const auto &impl : implementations_for("predict_backward", device)) {
                INFO("predict_backward " << impl);
                PredictProblem p = base;
                const Status st = predict_backward(host_view(p.g, p.u_hat_shape()), host_view(p.u, p.u_shape()),
                                                   host_view(p.W, p.W_shape()), host_view(p.grad_u, p.u_shape()),
                                                   host_view(p.grad_W, p.W_shape()), device_options(device, impl));
                INFO(st.message);
                if (refused_on_gpu(device, st)) continue;
                REQUIRE(st.ok());
                require_matches("grad_u", p.grad_u, as_checked_for(impl, p.grad_u, ref_u), s.out_caps * s.out_dim);
                require_matches("grad_W", p.grad_W, as_checked_for(impl, p.grad_W, ref_W), s.batch);
            }
        }
    }
}

inline void check_nonfinite_capsconv(Device device) {
    // Padding 0 and 1; 3x3 filters at stride 1 so that the Winograd forms run too.
    for (const reference::CapsConvShape &s :
         {reference::CapsConvShape{2, 7, 6, 3, 3, 3, 2, 1, 0}, reference::CapsConvShape{2, 7, 6, 3, 3, 3, 2, 1, 1},
          reference::CapsConvShape{1, 9, 8, 2, 3, 3, 3, 2, 1}}) {
        for (const float special : kSpecials) {
            for (const char *input : {"input", "filter", "grad_output"}) {
                INFO("seed " << seed() << ", " << shape_name(s) << ", " << special << " in " << input);
                CapsConvProblem base(s);
                poison(std::string(input) == "input"    ? base.input
                       : std::string(input) == "filter" ? base.filter
                                                        : base.grad_output,
                       special);
                if (std::string(input) != "grad_output") {
                    const auto ref = reference::capsconv_f64(s, base.input.data(), base.filter.data());
                    for (const auto &impl : implementations_for("capsconv", device)) {
                        INFO("capsconv " << impl);
                        CapsConvProblem p = base;
                        const Status st =
                            capsconv(host_view(p.input, p.input_shape()), host_view(p.filter, p.filter_shape()),
                                     host_view(p.output, p.output_shape()), p.params(), device_options(device, impl));
                        INFO(st.message);
                        const bool winograd = impl.rfind("winograd", 0) == 0;
                        if (winograd && s.stride != 1) {  // 3x3 filters at stride 1 only
                            REQUIRE(st.code == StatusCode::unsupported_shape);
                            continue;
                        }
                        if (refused_on_gpu(device, st)) continue;
                        REQUIRE(st.ok());
                        const int64_t length = s.kernel_h * s.kernel_w * s.in_caps * 4;
                        if (winograd) {
                            require_nonfinite_pattern(p.output, ref, length, NonfinitePattern::superset);
                        } else if (skips_padding_taps(impl) && std::string(input) == "filter") {
                            require_nonfinite_pattern(p.output, ref, length, NonfinitePattern::subset);
                        } else {
                            require_matches("output", p.output, ref, length);
                        }
                    }
                }
                for (const auto &impl : implementations_for("capsconv_backward", device)) {
                    INFO("capsconv_backward " << impl);
                    CapsConvProblem p = base;
                    check_capsconv_backward(p, device_options(device, impl));
                }
            }
        }
    }
}

}  // namespace halcaps::testing

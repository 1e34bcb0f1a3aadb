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

// The Winograd forms' output tile is a linear mix of its whole input tile
// (F(m x m, 3 x 3): (m + 2)^2 pixels) whose terms for pixels outside an
// output's 3 x 3 window cancel exactly in real arithmetic; NaN and inf do not
// cancel (0 * inf, inf - inf), so a non-finite input pixel makes every output
// of the tiles it is in non-finite, a superset of the direct formula's
// pattern. Checked: every element the reference has non-finite is
// non-finite (nothing dropped), and every finite one matches the reference;
// the extra non-finite elements are counted.
inline void require_winograd_superset(const std::vector<float> &x, const std::vector<double> &ref,
                                      int64_t reduction_length) {
    std::vector<float> finite_x;
    std::vector<double> finite_ref;
    int64_t extra = 0;
    for (size_t n = 0; n < ref.size(); n++) {
        if (!std::isfinite(ref[n])) {
            INFO("element " << n << ": " << x[n] << ", the reference " << ref[n]);
            REQUIRE(!std::isfinite(x[n]));
        } else if (!std::isfinite(x[n])) {
            extra++;
        } else {
            finite_x.push_back(x[n]);
            finite_ref.push_back(ref[n]);
        }
    }
    INFO(extra << " elements non-finite where the direct formula's are finite, of " << ref.size());
    if (!finite_ref.empty()) require_matches("output (finite elements)", finite_x, finite_ref, reduction_length);
}

// cuDNN (the "cudnn" peer) leaves out the filter taps that fall in the zero
// padding instead of multiplying them by zero, so a NaN or inf filter value
// does not reach the outputs for which that tap lies outside the image.
// Checked for it: every element it gives non-finite is non-finite in the
// reference, and every finite one matches; the dropped ones are counted.
inline bool skips_padding_taps(const std::string &implementation) { return implementation == "cudnn"; }

inline void require_padding_subset(const std::vector<float> &x, const std::vector<double> &ref,
                                   int64_t reduction_length) {
    std::vector<float> finite_x;
    std::vector<double> finite_ref;
    int64_t dropped = 0;
    for (size_t n = 0; n < ref.size(); n++) {
        if (!std::isfinite(x[n])) {
            INFO("element " << n << ": " << x[n] << ", the reference " << ref[n]);
            REQUIRE(!std::isfinite(ref[n]));
            REQUIRE((std::isnan(x[n]) == std::isnan(ref[n])));
        } else if (!std::isfinite(ref[n])) {
            dropped++;
        } else {
            finite_x.push_back(x[n]);
            finite_ref.push_back(ref[n]);
        }
    }
    INFO(dropped << " elements finite where the formula's are not, of " << ref.size());
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
                            require_winograd_superset(p.output, ref, length);
                        } else if (skips_padding_taps(impl) && std::string(input) == "filter") {
                            require_padding_subset(p.output, ref, length);
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

// NaN, +inf and -inf in each input of each operator, by every CPU
// implementation (list_implementations), against the float64 reference:
// the same elements NaN and the same ones +-inf as the plain formulas give
// in IEEE arithmetic (docs/design.md §1.2, PyTorch's behaviour), and the finite
// elements within the usual tolerance (reference::compare checks both).
#include <limits>

#include "capsconv_checks.h"
#include "digitcaps_checks.h"

using namespace halcaps;
using namespace halcaps::testing;
using reference::DigitCapsShape;

namespace {

std::vector<std::string> cpu_implementations(const std::string &op) { return implementations_for(op, Device::cpu); }

// The Winograd forms' output tile is a linear mix of its whole input tile
// (F(m x m, 3 x 3): (m + 2)^2 pixels) whose terms for pixels outside an
// output's 3 x 3 window cancel exactly in real arithmetic; NaN and inf do not
// cancel (0 * inf, inf - inf), so a non-finite input pixel makes every output
// of the tiles it is in non-finite, a superset of the direct formula's
// pattern. Checked: every element the reference has non-finite is
// non-finite (nothing dropped), and every finite one matches the reference;
// the extra non-finite elements are counted.
void require_winograd_superset(const std::vector<float> &x, const std::vector<double> &ref, int64_t reduction_length) {
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

}  // namespace

TEST_CASE("nonfinite: the comparison takes NaN for NaN and inf for the same inf only", "[nonfinite]") {
    const std::vector<double> ref = {1.0, std::nan(""), INFINITY, -INFINITY};
    const reference::Tolerance tol{1e-6, 1e-4};
    const std::vector<float> same = {1.0f, kNaN, kInf, -kInf};
    const auto ok = reference::compare(same.data(), ref, tol);
    INFO(ok.summary());
    REQUIRE(ok.passed);
    REQUIRE(ok.nonfinite_matched == 3);
    for (const std::vector<float> &bad : std::vector<std::vector<float>>{{kNaN, kNaN, kInf, -kInf},
                                                                         {1.0f, 0.0f, kInf, -kInf},
                                                                         {1.0f, kNaN, kNaN, -kInf},
                                                                         {1.0f, kNaN, -kInf, -kInf},
                                                                         {1.0f, kNaN, kInf, 3.0f},
                                                                         {kInf, kNaN, kInf, -kInf}}) {
        const auto c = reference::compare(bad.data(), ref, tol);
        INFO(c.summary());
        REQUIRE(!c.passed);
        REQUIRE(c.failures == 1);
    }
}

TEST_CASE("nonfinite: routing's NaN reaches every v of its batch element (docs/design.md §1.2)", "[nonfinite]") {
    check_nonfinite_issue_cases(Device::cpu);
}

TEST_CASE("nonfinite: squash", "[nonfinite]") {
    INFO("seed " << seed());
    for (const float special : kSpecials) {
        for (const auto &impl : cpu_implementations("squash")) {
            INFO("squash " << impl << ", " << special);
            // Row 1 random with the special value at a random element; row
            // 3 zeros but for it (a NaN there once gave v = 0: the row's
            // largest |s| dropped the NaN and took the zero-row branch).
            std::vector<float> s = random_normal(5 * 7), v = nan_filled(5 * 7);
            std::vector<float> row = random_normal(7);
            poison(row, special);
            std::copy(row.begin(), row.end(), s.begin() + 7);
            std::fill(s.begin() + 21, s.begin() + 28, 0.0f);
            s[21 + 4] = special;
            const Status st = squash(host_view(s, {5, 7}), host_view(v, {5, 7}), cpu_options(impl));
            INFO(st.message);
            REQUIRE(st.ok());
            const auto ref = reference::squash_f64(5, 7, s.data());
            REQUIRE(count_nonfinite(ref) == 14);  // both rows NaN, as |s|^2 is NaN or inf (inf / inf)
            require_matches("v", v, ref, 7);
        }
    }
}

TEST_CASE("nonfinite: route and route_backward, each input", "[nonfinite]") {
    for (int iterations : {1, 3}) check_nonfinite_route(Device::cpu, iterations);
}

TEST_CASE("nonfinite: the DigitCaps layer, its backward and training's pair, each input", "[nonfinite]") {
    for (int iterations : {1, 3}) check_nonfinite_layer(Device::cpu, iterations);
}

TEST_CASE("nonfinite: predict and predict_backward, each input", "[nonfinite]") {
    const reference::PredictShape s{3, 5, 7, 4, 6};
    for (const float special : kSpecials) {
        for (const char *input : {"u", "W", "g"}) {
            INFO("seed " << seed() << ", " << special << " in " << input);
            PredictProblem base(s);
            poison(std::string(input) == "u" ? base.u : std::string(input) == "W" ? base.W : base.g, special);
            if (std::string(input) != "g") {
                const auto ref = reference::predict_f64(s, base.u.data(), base.W.data());
                REQUIRE(count_nonfinite(ref) > 0);
                for (const auto &impl : cpu_implementations("predict")) {
                    INFO("predict " << impl);
                    PredictProblem p = base;
                    const Status st = predict(host_view(p.u, p.u_shape()), host_view(p.W, p.W_shape()),
                                              host_view(p.u_hat, p.u_hat_shape()), cpu_options(impl));
                    INFO(st.message);
                    REQUIRE(st.ok());
                    require_matches("u_hat", p.u_hat, ref, s.in_dim);
                }
            }
            const auto ref_u = reference::predict_grad_input_f64(s, base.g.data(), base.W.data());
            const auto ref_W = reference::predict_grad_weight_f64(s, base.g.data(), base.u.data());
            for (const auto &impl : cpu_implementations("predict_backward")) {
                INFO("predict_backward " << impl);
                PredictProblem p = base;
                const Status st = predict_backward(host_view(p.g, p.u_hat_shape()), host_view(p.u, p.u_shape()),
                                                   host_view(p.W, p.W_shape()), host_view(p.grad_u, p.u_shape()),
                                                   host_view(p.grad_W, p.W_shape()), cpu_options(impl));
                INFO(st.message);
                REQUIRE(st.ok());
                require_matches("grad_u", p.grad_u, ref_u, s.out_caps * s.out_dim);
                require_matches("grad_W", p.grad_W, ref_W, s.batch);
            }
        }
    }
}

TEST_CASE("nonfinite: capsconv and capsconv_backward, each input", "[nonfinite]") {
    // Padding 0 and 1; 3x3 filters at stride 1 so that the Winograd forms run too.
    for (const reference::CapsConvShape &s : {reference::CapsConvShape{2, 7, 6, 3, 3, 3, 2, 1, 0},
                                             reference::CapsConvShape{2, 7, 6, 3, 3, 3, 2, 1, 1},
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
                    for (const auto &impl : cpu_implementations("capsconv")) {
                        INFO("capsconv " << impl);
                        CapsConvProblem p = base;
                        const Status st = capsconv(host_view(p.input, p.input_shape()),
                                                   host_view(p.filter, p.filter_shape()),
                                                   host_view(p.output, p.output_shape()), p.params(), cpu_options(impl));
                        INFO(st.message);
                        const bool winograd = impl.rfind("winograd", 0) == 0;
                        if (winograd && s.stride != 1) {  // 3x3 filters at stride 1 only
                            REQUIRE(st.code == StatusCode::unsupported_shape);
                            continue;
                        }
                        REQUIRE(st.ok());
                        const int64_t length = s.kernel_h * s.kernel_w * s.in_caps * 4;
                        if (winograd) {
                            require_winograd_superset(p.output, ref, length);
                        } else {
                            require_matches("output", p.output, ref, length);
                        }
                    }
                }
                for (const auto &impl : cpu_implementations("capsconv_backward")) {
                    INFO("capsconv_backward " << impl);
                    CapsConvProblem p = base;
                    check_capsconv_backward(p, cpu_options(impl));
                }
            }
        }
    }
}

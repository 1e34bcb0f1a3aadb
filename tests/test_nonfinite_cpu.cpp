// NaN, +inf and -inf in each input of each operator, by every CPU
// implementation (list_implementations), against the float64 reference:
// the same elements NaN and the same ones +-inf as the plain formulas give
// in IEEE arithmetic (docs/design.md §1.2, PyTorch's behaviour), and the finite
// elements within the usual tolerance (reference::compare checks both).
#include "nonfinite_checks.h"

using namespace halcaps;
using namespace halcaps::testing;
using reference::DigitCapsShape;

namespace {

std::vector<std::string> cpu_implementations(const std::string &op) { return implementations_for(op, Device::cpu); }

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
    check_nonfinite_predict(Device::cpu);
}

TEST_CASE("nonfinite: capsconv and capsconv_backward, each input", "[nonfinite]") {
    check_nonfinite_capsconv(Device::cpu);
}

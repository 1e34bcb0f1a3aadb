// NaN, +inf and -inf in each input of each operator, by every CPU
// implementation (list_implementations), against the float64 reference:
// the same elements NaN and the same ones +-inf as the plain formulas give
// in IEEE arithmetic (docs/design.md §1.2, PyTorch's behaviour), and the finite
// elements within the usual tolerance (reference::compare checks both).
#include "nonfinite_checks.h"

using namespace halcaps;
using namespace halcaps::testing;
using reference::DigitCapsShape;

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

TEST_CASE("nonfinite: squash", "[nonfinite]") { check_nonfinite_squash(Device::cpu); }

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

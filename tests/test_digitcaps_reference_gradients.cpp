// The hand-derived float64 backward of squash, routing and the DigitCaps
// layer against central finite differences of the float64 forward, for the
// loss L = sum(grad_v * v). The kernels' gradients are checked against these
// in test_digitcaps_cpu.cpp.
#include <functional>

#include "digitcaps_reference.h"
#include "finite_differences.h"
#include "test_support.h"

using namespace halcaps;
using namespace halcaps::testing;

namespace {

std::vector<double> random_doubles(int64_t n) {
    const auto f = random_normal(n);
    return {f.begin(), f.end()};
}

double dot(const std::vector<double> &a, const std::vector<double> &b) {
    double sum = 0;
    for (size_t n = 0; n < a.size(); n++) sum += a[n] * b[n];
    return sum;
}

}  // namespace

TEST_CASE("reference squash: values at zero, tiny and huge norms", "[gradient][squash]") {
    // s = 0 gives 0; |s| = 1e-30 gives ~|s|^2 s/|s|; |s| = 1e200 gives a unit vector.
    const std::vector<double> s = {0, 0, 0, 3e-30, 4e-30, 0, 3e200, -4e200, 0, 3, 4, 0};
    const auto v = reference::squash_f64(4, 3, s.data());
    for (int e = 0; e < 3; e++) REQUIRE(v[e] == 0.0);
    const double n2 = 25e-60, tiny_factor = n2 / (1 + n2) / std::sqrt(n2 + reference::kSquashEpsilon);
    REQUIRE(v[3] == Approx(3e-30 * tiny_factor).epsilon(1e-12));
    REQUIRE(v[6] == Approx(0.6).epsilon(1e-12));
    REQUIRE(v[7] == Approx(-0.8).epsilon(1e-12));
    const double f = 25.0 / 26.0 / std::sqrt(25.0 + reference::kSquashEpsilon);
    REQUIRE(v[9] == Approx(3 * f).epsilon(1e-12));
    REQUIRE(v[10] == Approx(4 * f).epsilon(1e-12));
}

TEST_CASE("reference squash backward matches finite differences", "[gradient][squash]") {
    INFO("seed " << seed());
    const int64_t rows = 5, dim = 7;
    auto s = random_doubles(rows * dim);
    for (int64_t e = 0; e < dim; e++) s[dim + e] *= 1e-3;      // small norm: f' is large there
    for (int64_t e = 0; e < dim; e++) s[2 * dim + e] *= 30.0;  // large norm: v is nearly a unit vector
    const auto g = random_doubles(rows * dim);
    auto f = [&] { return dot(g, reference::squash_f64(rows, dim, s.data())); };
    require_matches_finite_differences("grad_s", reference::squash_backward_f64(rows, dim, s.data(), g.data()),
                                       finite_difference(f, s), 1e-6);
}

TEST_CASE("reference routing backward matches finite differences", "[gradient][routing]") {
    for (int iterations : {1, 2, 3, 4, 5}) {
        for (bool with_b0 : {false, true}) {
            const reference::RoutingShape shape{2, 3, 4, 5};
            INFO("seed " << seed() << ", iterations " << iterations << ", b0 " << (with_b0 ? "given" : "zeros"));
            auto u_hat = random_doubles(shape.u_hat_size());
            auto b0 = with_b0 ? random_doubles(shape.b0_size()) : std::vector<double>(shape.b0_size(), 0.0);
            const auto g = random_doubles(shape.v_size());
            auto f = [&] { return dot(g, reference::route_f64(shape, u_hat.data(), b0.data(), iterations)); };
            const auto analytic = reference::route_backward_f64(shape, u_hat.data(), b0.data(), g.data(), iterations);
            require_matches_finite_differences("grad_u_hat", analytic.grad_u_hat, finite_difference(f, u_hat), 1e-6);
            require_matches_finite_differences("grad_b0", analytic.grad_b0, finite_difference(f, b0), 1e-6);
            // A null b0 means zeros.
            if (!with_b0) {
                const auto null_b0 = reference::route_backward_f64(shape, u_hat.data(), nullptr, g.data(), iterations);
                REQUIRE(null_b0.grad_u_hat == analytic.grad_u_hat);
            }
        }
    }
}

TEST_CASE("reference DigitCaps layer backward matches finite differences", "[gradient][digitcaps]") {
    for (const auto &shape : {reference::DigitCapsShape{2, 3, 4, 3, 5}, reference::DigitCapsShape{1, 1, 1, 1, 1},
                              reference::DigitCapsShape{3, 2, 3, 1, 2}}) {
        for (int iterations : {1, 3, 4}) {
            INFO("seed " << seed() << ", iterations " << iterations);
            auto u = random_doubles(shape.u_size()), W = random_doubles(shape.W_size());
            auto b0 = random_doubles(shape.b0_size());
            const auto g = random_doubles(shape.v_size());
            auto f = [&] { return dot(g, reference::digitcaps_f64(shape, u.data(), W.data(), b0.data(), iterations)); };
            const auto analytic =
                reference::digitcaps_backward_f64(shape, u.data(), W.data(), b0.data(), g.data(), iterations);
            require_matches_finite_differences("grad_u", analytic.grad_u, finite_difference(f, u), 1e-6);
            require_matches_finite_differences("grad_W", analytic.grad_W, finite_difference(f, W), 1e-6);
            require_matches_finite_differences("grad_b0", analytic.grad_b0, finite_difference(f, b0), 1e-6);
        }
    }
}

TEST_CASE("reference backward at given s: the layer's own s gives the layer's gradients", "[gradient][digitcaps]") {
    const reference::DigitCapsShape shape{2, 5, 3, 4, 6};
    for (int iterations : {1, 3, 4}) {
        INFO("seed " << seed() << ", iterations " << iterations);
        const auto u = random_normal(shape.u_size()), W = random_normal(shape.W_size());
        const auto b0 = random_normal(shape.b0_size()), g = random_normal(shape.v_size());
        const auto s = reference::digitcaps_routing_s_f64(shape, u.data(), W.data(), b0.data(), iterations);
        // s in float, as digitcaps_with_s returns it; the gradients move by
        // that rounding only.
        const std::vector<float> s_f(s.begin(), s.end());
        const auto given = reference::digitcaps_backward_given_s_f64(shape, u.data(), W.data(), b0.data(), s_f.data(),
                                                                     g.data(), iterations);
        const auto plain =
            reference::digitcaps_backward_f64(shape, u.data(), W.data(), b0.data(), g.data(), iterations);
        for (const auto &[a, b] :
             {std::make_pair(&given.grad_u, &plain.grad_u), std::make_pair(&given.grad_W, &plain.grad_W),
              std::make_pair(&given.grad_b0, &plain.grad_b0)}) {
            REQUIRE(a->size() == b->size());
            for (size_t n = 0; n < a->size(); n++)
                REQUIRE(std::fabs((*a)[n] - (*b)[n]) <= 1e-4 * (1 + std::fabs((*b)[n])));
        }
    }
}

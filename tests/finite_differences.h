// Checking analytic float64 gradients against central finite differences of
// the float64 forward pass, shared by the reference-gradient tests of every
// operator.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include <catch2/catch.hpp>

namespace halcaps::testing {

inline std::vector<double> to_double(const std::vector<float> &v) { return {v.begin(), v.end()}; }

// dL/dx[n] by central differences (h = 1e-6), for every element of x; f reads x.
inline std::vector<double> finite_difference(const std::function<double()> &f, std::vector<double> &x) {
    const double h = 1e-6;
    std::vector<double> grad(x.size());
    for (size_t n = 0; n < x.size(); n++) {
        const double saved = x[n];
        x[n] = saved + h;
        const double up = f();
        x[n] = saved - h;
        const double down = f();
        x[n] = saved;
        grad[n] = (up - down) / (2 * h);
    }
    return grad;
}

// Every element within 1e-6 + 1e-6 |numeric|, and the norm-wise relative
// error under `norm_tolerance`. Central differences of these smooth float64
// functions are good to ~1e-9 (truncation h^2 ~ 1e-12, rounding ~1e-16 |L|/h),
// while a wrong term is O(0.01..1).
inline void require_matches_finite_differences(const char *what, const std::vector<double> &analytic,
                                               const std::vector<double> &numeric, double norm_tolerance = 1e-7) {
    REQUIRE(analytic.size() == numeric.size());
    double diff_sq = 0, ref_sq = 0;
    for (size_t n = 0; n < analytic.size(); n++) {
        INFO(what << " element " << n << ": analytic " << analytic[n] << ", finite difference " << numeric[n]);
        REQUIRE(std::fabs(analytic[n] - numeric[n]) <= 1e-6 + 1e-6 * std::fabs(numeric[n]));
        diff_sq += (analytic[n] - numeric[n]) * (analytic[n] - numeric[n]);
        ref_sq += numeric[n] * numeric[n];
    }
    INFO(what << ": norm-wise relative error");
    REQUIRE(std::sqrt(diff_sq / std::max(ref_sq, 1e-300)) < norm_tolerance);
}

}  // namespace halcaps::testing

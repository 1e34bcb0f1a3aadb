#include "compare.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace halcaps::reference {

Tolerance float32_sum_tolerance(int64_t reduction_length) {
    const double n = static_cast<double>(reduction_length < 1 ? 1 : reduction_length);
    return {1e-6 * n, 1e-4};
}

Comparison compare(const float *x, const std::vector<double> &ref, Tolerance tol) {
    Comparison c;
    double diff_sq = 0, ref_sq = 0;
    for (size_t n = 0; n < ref.size(); n++) {
        const double value = x[n];
        const double err = std::fabs(value - ref[n]);
        const bool bad = !(err <= tol.atol + tol.rtol * std::fabs(ref[n]));  // NaN compares false
        if (bad && c.failures++ == 0) {
            c.first_failure = static_cast<int64_t>(n);
            c.first_value = value;
            c.first_expected = ref[n];
        }
        c.max_abs_error = std::isnan(err) ? std::numeric_limits<double>::infinity()
                                          : std::fmax(c.max_abs_error, err);
        diff_sq += (value - ref[n]) * (value - ref[n]);
        ref_sq += ref[n] * ref[n];
    }
    c.relative_l2_error = ref_sq > 0 ? std::sqrt(diff_sq / ref_sq) : std::sqrt(diff_sq);
    c.passed = c.failures == 0;
    return c;
}

std::string Comparison::summary() const {
    char line[256];
    if (passed) {
        std::snprintf(line, sizeof line, "ok (max abs err %.2e, rel l2 err %.2e)", max_abs_error, relative_l2_error);
    } else {
        std::snprintf(line, sizeof line,
                      "WRONG: %lld elements out of tolerance, first at flat index %lld: got %.9g, expected %.9g "
                      "(rel l2 err %.2e)",
                      static_cast<long long>(failures), static_cast<long long>(first_failure), first_value,
                      first_expected, relative_l2_error);
    }
    return line;
}

}  // namespace halcaps::reference

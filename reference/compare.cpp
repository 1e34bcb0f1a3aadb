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
        bool bad;
        if (!std::isfinite(ref[n])) {
            // NaN agrees with NaN, +-inf with the same infinity; neither
            // enters the error norms.
            bad = std::isnan(ref[n]) ? !std::isnan(value) : value != ref[n];
            if (!bad) c.nonfinite_matched++;
            if (bad) c.max_abs_error = std::numeric_limits<double>::infinity();
        } else {
            const double err = std::fabs(value - ref[n]);
            bad = !(err <= tol.atol + tol.rtol * std::fabs(ref[n]));  // NaN compares false
            c.max_abs_error =
                std::isfinite(err) ? std::fmax(c.max_abs_error, err) : std::numeric_limits<double>::infinity();
            diff_sq += (value - ref[n]) * (value - ref[n]);
            ref_sq += ref[n] * ref[n];
        }
        if (bad && c.failures++ == 0) {
            c.first_failure = static_cast<int64_t>(n);
            c.first_value = value;
            c.first_expected = ref[n];
        }
    }
    c.relative_l2_error = ref_sq > 0 ? std::sqrt(diff_sq / ref_sq) : std::sqrt(diff_sq);
    c.passed = c.failures == 0;
    return c;
}

std::string Comparison::summary() const {
    char line[320];
    char nonfinite[64] = "";
    if (nonfinite_matched > 0) {
        std::snprintf(nonfinite, sizeof nonfinite, ", %lld non-finite as the reference's",
                      static_cast<long long>(nonfinite_matched));
    }
    if (passed) {
        std::snprintf(line, sizeof line, "ok (max abs err %.2e, rel l2 err %.2e%s)", max_abs_error, relative_l2_error,
                      nonfinite);
    } else {
        std::snprintf(line, sizeof line,
                      "WRONG: %lld elements out of tolerance, first at flat index %lld: got %.9g, expected %.9g "
                      "(rel l2 err %.2e%s)",
                      static_cast<long long>(failures), static_cast<long long>(first_failure), first_value,
                      first_expected, relative_l2_error, nonfinite);
    }
    return line;
}

}  // namespace halcaps::reference

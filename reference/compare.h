// Comparing a float32 result with the float64 reference (docs/design.md §2):
// every element must satisfy |x - ref| <= atol + rtol * |ref| (NaN never does),
// and the norm-wise relative error ||x - ref|| / ||ref|| is reported.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace halcaps::reference {

struct Tolerance {
    double atol;
    double rtol;
};

// Tolerance for float32 sums of `reduction_length` products of O(1) values:
// rounding grows at most linearly with the length, so atol scales with it
// while staying ~100x above what a correct float32 kernel produces.
Tolerance float32_sum_tolerance(int64_t reduction_length);

struct Comparison {
    bool passed = false;
    double max_abs_error = 0;      // over all elements (infinity if any NaN)
    double relative_l2_error = 0;  // ||x - ref|| / ||ref||
    int64_t failures = 0;          // elements outside the tolerance (NaN included)
    int64_t first_failure = -1;    // flat index of the first one, -1 if none
    double first_value = 0, first_expected = 0;

    std::string summary() const;  // one line
};

Comparison compare(const float *x, const std::vector<double> &ref, Tolerance tol);

}  // namespace halcaps::reference

// Comparing a float32 result with the float64 reference (docs/design.md §2):
// where the reference is finite, every element must satisfy |x - ref| <=
// atol + rtol * |ref| (NaN and inf never do); where it is NaN the result must
// be NaN, where it is +-inf the same infinity (NaN and Inf propagate as the
// formulas do in IEEE arithmetic, docs/design.md §1.2). The norm-wise relative
// error ||x - ref|| / ||ref|| is reported over the finite elements of ref.
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
    double max_abs_error = 0;       // over all elements (infinity if any is non-finite where ref is not, or unlike it)
    double relative_l2_error = 0;   // ||x - ref|| / ||ref|| over the elements where ref is finite
    int64_t failures = 0;           // elements outside the tolerance (NaN included)
    int64_t nonfinite_matched = 0;  // elements NaN or +-inf as the reference's
    int64_t first_failure = -1;     // flat index of the first one, -1 if none
    double first_value = 0, first_expected = 0;

    std::string summary() const;  // one line
};

Comparison compare(const float *x, const std::vector<double> &ref, Tolerance tol);

}  // namespace halcaps::reference

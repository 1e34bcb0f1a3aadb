// The capsule convolution's float64 gradients (reference/capsconv_f64.cpp)
// against central finite differences of its forward, for L = sum(g * O);
// and the naive OpenMP baseline against the float64 forward.
#include <functional>

#include "capsconv_checks.h"
#include "finite_differences.h"

using namespace halcaps;
using namespace halcaps::testing;

namespace {

// Small shapes covering stride 2, padding, batch > 1, co > 1, 1x1 and
// non-square kernels, and padding wider than the kernel reaches.
std::vector<reference::CapsConvShape> gradient_shapes() {
    return {
        {1, 3, 3, 1, 2, 2, 1, 1, 0}, {2, 4, 3, 2, 3, 3, 2, 2, 1}, {1, 5, 4, 1, 1, 1, 3, 1, 0},
        {1, 3, 4, 2, 2, 3, 1, 1, 2}, {2, 5, 5, 1, 3, 2, 2, 2, 0},
    };
}

}  // namespace

TEST_CASE("capsconv: reference gradients match central finite differences", "[gradient][capsconv]") {
    for (const auto &shape : gradient_shapes()) {
        INFO("seed " << seed() << ", shape " << shape_name(shape));
        CapsConvProblem p(shape);
        auto I = to_double(p.input), K = to_double(p.filter), g = to_double(p.grad_output);
        auto loss = [&] {
            const auto O = reference::capsconv_f64(shape, I.data(), K.data());
            double sum = 0;
            for (size_t n = 0; n < O.size(); n++) sum += g[n] * O[n];
            return sum;
        };
        require_matches_finite_differences("grad_input", reference::capsconv_grad_input_f64(shape, g.data(), K.data()),
                                           finite_difference(loss, I));
        require_matches_finite_differences(
            "grad_filter", reference::capsconv_grad_filter_f64(shape, g.data(), I.data()), finite_difference(loss, K));
    }
}

TEST_CASE("capsconv: the naive OpenMP baseline matches the float64 reference", "[baseline][capsconv]") {
    for (const auto &shape :
         {reference::CapsConvShape{1, 20, 17, 3, 5, 5, 1, 1, 0}, reference::CapsConvShape{3, 9, 8, 5, 3, 3, 4, 2, 1},
          reference::CapsConvShape{1, 1, 1, 1, 1, 1, 1, 1, 0}}) {
        INFO("seed " << seed() << ", shape " << shape_name(shape));
        CapsConvProblem p(shape);
        reference::capsconv_naive_openmp(shape, p.input.data(), p.filter.data(), p.output.data());
        require_matches("output", p.output, reference::capsconv_f64(shape, p.input.data(), p.filter.data()),
                        shape.kernel_h * shape.kernel_w * shape.in_caps * 4);
    }
}

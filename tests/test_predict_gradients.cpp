// The analytic gradients of the float64 reference against central finite
// differences of its forward pass, for the loss L = sum(g * u_hat). The
// kernels' gradients are checked against these analytic ones elsewhere.
#include "finite_differences.h"
#include "test_support.h"

using namespace halcaps;
using namespace halcaps::testing;

namespace {

double loss(const reference::PredictShape &s, const std::vector<double> &u, const std::vector<double> &W,
            const std::vector<double> &g) {
    const auto u_hat = reference::predict_f64(s, u.data(), W.data());
    double sum = 0;
    for (size_t n = 0; n < u_hat.size(); n++) sum += g[n] * u_hat[n];
    return sum;
}

}  // namespace

TEST_CASE("reference gradients match central finite differences", "[gradient]") {
    for (const auto &shape : {reference::PredictShape{2, 3, 4, 3, 5}, reference::PredictShape{1, 1, 1, 1, 1},
                              reference::PredictShape{3, 2, 7, 1, 2}}) {
        INFO("seed " << seed() << ", shape " << shape_name(shape));
        PredictProblem p(shape);
        auto u = to_double(p.u), W = to_double(p.W), g = to_double(p.g);
        auto f = [&] { return loss(shape, u, W, g); };
        require_matches_finite_differences("grad_u", reference::predict_grad_input_f64(shape, g.data(), W.data()),
                                           finite_difference(f, u));
        require_matches_finite_differences("grad_W", reference::predict_grad_weight_f64(shape, g.data(), u.data()),
                                           finite_difference(f, W));
    }
}

TEST_CASE("cpu kernels' gradients match finite differences directly", "[gradient][cpu]") {
    const reference::PredictShape shape{3, 4, 5, 2, 3};
    INFO("seed " << seed());
    PredictProblem p(shape);
    Options options;
    options.device = Device::cpu;
    REQUIRE(predict_backward(host_view(p.g, p.u_hat_shape()), host_view(p.u, p.u_shape()), host_view(p.W, p.W_shape()),
                             host_view(p.grad_u, p.u_shape()), host_view(p.grad_W, p.W_shape()), options)
                .ok());
    auto u = to_double(p.u), W = to_double(p.W), g = to_double(p.g);
    auto f = [&] { return loss(shape, u, W, g); };
    const auto numeric_u = finite_difference(f, u), numeric_W = finite_difference(f, W);
    for (size_t n = 0; n < numeric_u.size(); n++) {
        INFO("grad_u element " << n);
        REQUIRE(std::fabs(p.grad_u[n] - numeric_u[n]) <= 1e-4 * (1 + std::fabs(numeric_u[n])));
    }
    for (size_t n = 0; n < numeric_W.size(); n++) {
        INFO("grad_W element " << n);
        REQUIRE(std::fabs(p.grad_W[n] - numeric_W[n]) <= 1e-4 * (1 + std::fabs(numeric_W[n])));
    }
}

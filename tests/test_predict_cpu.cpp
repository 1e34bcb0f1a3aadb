// Every CPU implementation of capsule prediction and its gradients against
// the float64 reference: the blog's {4, 8} grid, odd sizes, the MNIST shape.
#include "test_support.h"

using namespace halcaps;
using namespace halcaps::testing;

namespace {

// Every cpu implementation of an op ("predict" or "predict_backward") in this build.
std::vector<std::string> cpu_implementations(const std::string &op) {
    auto names = implementations_for(op, Device::cpu);
    REQUIRE(!names.empty());
    return names;
}

Options cpu_options(const std::string &implementation) {
    Options options;
    options.device = Device::cpu;
    options.implementation = implementation;
    return options;
}

}  // namespace

TEST_CASE("cpu: blog grid, batch/in_caps/in_dim/out_caps/out_dim in {4, 8}", "[cpu][grid]") {
    for (const auto &name : cpu_implementations("predict")) {
        for (const auto &shape : blog_grid_shapes()) check_predict(shape, cpu_options(name));
    }
    for (const auto &name : cpu_implementations("predict_backward")) {
        for (const auto &shape : blog_grid_shapes()) check_predict_backward(shape, cpu_options(name));
    }
}

TEST_CASE("cpu: odd sizes and one off every tile", "[cpu][odd]") {
    for (const auto &name : cpu_implementations("predict")) {
        for (const auto &shape : odd_shapes()) check_predict(shape, cpu_options(name));
    }
    for (const auto &name : cpu_implementations("predict_backward")) {
        for (const auto &shape : odd_shapes()) check_predict_backward(shape, cpu_options(name));
    }
}

TEST_CASE("cpu: MNIST CapsNet shape", "[cpu][mnist]") {
    for (const auto &name : cpu_implementations("predict")) check_predict(mnist_shape(), cpu_options(name));
    for (const auto &name : cpu_implementations("predict_backward"))
        check_predict_backward(mnist_shape(), cpu_options(name));
}

TEST_CASE("cpu: the default implementation runs when none is named", "[cpu]") {
    check_predict({3, 5, 8, 2, 16}, Options{});
    check_predict_backward({3, 5, 8, 2, 16}, Options{});
}

TEST_CASE("cpu: naive OpenMP baseline matches the reference", "[cpu][baseline]") {
    for (const auto &shape : {reference::PredictShape{3, 7, 5, 4, 9}, mnist_shape()}) {
        PredictProblem p(shape);
        INFO("seed " << seed() << ", shape " << shape_name(shape));
        reference::predict_naive_openmp(p.s, p.u.data(), p.W.data(), p.u_hat.data());
        require_matches("u_hat", p.u_hat, reference::predict_f64(p.s, p.u.data(), p.W.data()), shape.in_dim);
        reference::predict_grad_input_naive_openmp(p.s, p.g.data(), p.W.data(), p.grad_u.data());
        require_matches("grad_u", p.grad_u, reference::predict_grad_input_f64(p.s, p.g.data(), p.W.data()),
                        shape.out_caps * shape.out_dim);
        reference::predict_grad_weight_naive_openmp(p.s, p.g.data(), p.u.data(), p.grad_W.data());
        require_matches("grad_W", p.grad_W, reference::predict_grad_weight_f64(p.s, p.g.data(), p.u.data()),
                        shape.batch);
    }
}

TEST_CASE("cpu: a NaN-poisoned output element left unwritten is caught", "[cpu][checker]") {
    // The checker itself must fail when one element is missing or wrong.
    PredictProblem p({2, 3, 4, 5, 6});
    auto expected = reference::predict_f64(p.s, p.u.data(), p.W.data());
    std::vector<float> result(expected.begin(), expected.end());
    auto tol = reference::float32_sum_tolerance(p.s.in_dim);
    REQUIRE(reference::compare(result.data(), expected, tol).passed);
    result[17] = std::numeric_limits<float>::quiet_NaN();
    auto with_nan = reference::compare(result.data(), expected, tol);
    REQUIRE_FALSE(with_nan.passed);
    REQUIRE(with_nan.first_failure == 17);
    result[17] = static_cast<float>(expected[17] * (1 + 1e-3));
    REQUIRE_FALSE(reference::compare(result.data(), expected, tol).passed);
}

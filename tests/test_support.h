// Helpers for the operator tests: random inputs, NaN-poisoned outputs, and a
// check of every result against the float64 reference.
#pragma once

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "compare.h"
#include "halcaps/halcaps.h"
#include "predict_reference.h"

namespace halcaps::testing {

// Fresh inputs on every run (docs/design.md §2): one generator per process, seeded
// from std::random_device; the seed is printed with every failure. To replay
// a failure, run the same test binary with the same filter and
// HALCAPS_TEST_SEED set to the printed seed.
inline uint64_t seed() {
    static const uint64_t value = [] {
        const char *given = std::getenv("HALCAPS_TEST_SEED");
        return given != nullptr ? uint64_t{std::strtoull(given, nullptr, 10)} : uint64_t{std::random_device{}()};
    }();
    return value;
}

inline std::mt19937_64 &rng() {
    static std::mt19937_64 generator(seed());
    return generator;
}

inline std::vector<float> random_normal(int64_t n) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float &x : v) {
        do {
            x = normal(rng());
        } while (x == 0.0f);
    }
    return v;
}

inline std::vector<float> nan_filled(int64_t n) {
    return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

inline TensorView host_view(std::vector<float> &data, std::vector<int64_t> shape) {
    TensorView v;
    v.data = data.data();
    v.shape = std::move(shape);
    return v;
}

inline std::string shape_name(const reference::PredictShape &s) {
    return "B=" + std::to_string(s.batch) + " I=" + std::to_string(s.in_caps) + " K=" + std::to_string(s.in_dim) +
           " J=" + std::to_string(s.out_caps) + " E=" + std::to_string(s.out_dim);
}

// Tensors of one capsule-prediction problem, inputs random, outputs NaN.
struct PredictProblem {
    reference::PredictShape s;
    std::vector<float> u, W, g, u_hat, grad_u, grad_W;

    explicit PredictProblem(reference::PredictShape shape)
        : s(shape), u(random_normal(s.u_size())), W(random_normal(s.W_size())), g(random_normal(s.u_hat_size())),
          u_hat(nan_filled(s.u_hat_size())), grad_u(nan_filled(s.u_size())), grad_W(nan_filled(s.W_size())) {}

    std::vector<int64_t> u_shape() const { return {s.batch, s.in_caps, s.in_dim}; }
    std::vector<int64_t> W_shape() const { return {s.in_caps, s.out_caps, s.out_dim, s.in_dim}; }
    std::vector<int64_t> u_hat_shape() const { return {s.batch, s.in_caps, s.out_caps, s.out_dim}; }
};

// Asserts that `result` matches the float64 reference within the float32
// tolerance for a sum of `reduction_length` products.
inline void require_matches(const char *what, const std::vector<float> &result, const std::vector<double> &expected,
                            int64_t reduction_length) {
    const auto c = reference::compare(result.data(), expected, reference::float32_sum_tolerance(reduction_length));
    INFO(what << ": " << c.summary());
    REQUIRE(c.passed);
    REQUIRE(c.relative_l2_error < 1e-5);
}

// The shapes every implementation is checked on (docs/design.md §2, issue grid).
inline std::vector<reference::PredictShape> blog_grid_shapes() {
    std::vector<reference::PredictShape> shapes;
    for (int64_t b : {4, 8})
        for (int64_t i : {4, 8})
            for (int64_t k : {4, 8})
                for (int64_t j : {4, 8})
                    for (int64_t e : {4, 8}) shapes.push_back({b, i, k, j, e});
    return shapes;
}

// Extents 1, 3, 7, 127, primes, and one off every tile size the schedules use
// (CPU: i tiles of 4, vectors of 8 and 16; GPU: 32-wide e·j tiles, 8-wide i and
// k tiles, 16-wide b tiles, 1024-thread blocks).
inline std::vector<reference::PredictShape> odd_shapes() {
    return {
        {1, 1, 1, 1, 1},      {1, 3, 7, 5, 3},    {3, 7, 1, 11, 13}, {7, 5, 3, 3, 17},   {2, 127, 8, 10, 16},
        {1, 1152, 8, 10, 16}, {17, 13, 9, 7, 15}, {15, 3, 7, 33, 1}, {31, 9, 8, 2, 31},  {5, 33, 16, 1, 7},
        {33, 5, 2, 3, 65},    {16, 4, 8, 8, 16},  {13, 31, 5, 4, 9}, {2, 1025, 1, 1, 1},
    };
}

inline reference::PredictShape mnist_shape() { return {128, 1152, 8, 10, 16}; }

// Runs predict and predict_backward with `options` on one problem and checks
// all three outputs against the float64 reference.
inline void check_predict(const reference::PredictShape &shape, const Options &options) {
    PredictProblem p(shape);
    INFO("seed " << seed() << ", shape " << shape_name(shape) << ", implementation " << options.implementation);
    const Status forward =
        predict(host_view(p.u, p.u_shape()), host_view(p.W, p.W_shape()), host_view(p.u_hat, p.u_hat_shape()), options);
    INFO(forward.message);
    REQUIRE(forward.ok());
    require_matches("u_hat", p.u_hat, reference::predict_f64(p.s, p.u.data(), p.W.data()), shape.in_dim);
}

inline void check_predict_backward(const reference::PredictShape &shape, const Options &options) {
    PredictProblem p(shape);
    INFO("seed " << seed() << ", shape " << shape_name(shape) << ", implementation " << options.implementation);
    const Status backward =
        predict_backward(host_view(p.g, p.u_hat_shape()), host_view(p.u, p.u_shape()), host_view(p.W, p.W_shape()),
                         host_view(p.grad_u, p.u_shape()), host_view(p.grad_W, p.W_shape()), options);
    INFO(backward.message);
    REQUIRE(backward.ok());
    require_matches("grad_u", p.grad_u, reference::predict_grad_input_f64(p.s, p.g.data(), p.W.data()),
                    shape.out_caps * shape.out_dim);
    require_matches("grad_W", p.grad_W, reference::predict_grad_weight_f64(p.s, p.g.data(), p.u.data()), shape.batch);
}

inline std::vector<std::string> implementations_for(const std::string &op, Device device) {
    std::vector<std::string> names;
    for (const auto &info : list_implementations()) {
        if (info.op == op && info.device == device) names.push_back(info.implementation);
    }
    return names;
}

}  // namespace halcaps::testing

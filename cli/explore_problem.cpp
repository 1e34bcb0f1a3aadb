#include "cli/explore_problem.h"

#include <algorithm>
#include <cstdio>

#include "capsconv_reference.h"
#include "cli/shapes.h"
#include "digitcaps_reference.h"
#include "predict_reference.h"

namespace halcaps::cli {

namespace {

// The DigitCaps generators' default iteration count, which `explore build`
// does not change.
constexpr int kRoutingIterations = 3;

std::unique_ptr<Tensor> host_tensor(const std::vector<int64_t> &shape) {
    return std::make_unique<Tensor>(shape, Device::cpu);
}

// `count` copies of inputs of these shapes; copy 0 random, the others equal
// to it (so every timed call computes the same thing).
void fill_sets(ExploreProblem &p, const std::vector<std::vector<int64_t>> &shapes, int count, std::mt19937_64 &rng) {
    p.input_sets.resize(count);
    for (int set = 0; set < count; set++) {
        for (size_t n = 0; n < shapes.size(); n++) {
            p.input_sets[set].push_back(host_tensor(shapes[n]));
            if (set == 0) {
                p.input_sets[0][n]->fill_normal(rng);
            } else {
                p.input_sets[set][n]->host() = p.input_sets[0][n]->host();
            }
        }
    }
}

double input_bytes_of(const std::vector<std::vector<int64_t>> &shapes) {
    double elements = 0;
    for (const auto &shape : shapes) {
        double n = 1;
        for (int64_t d : shape) n *= static_cast<double>(d);
        elements += n;
    }
    return 4.0 * elements;
}

const float *input(const ExploreProblem &p, size_t n) { return p.input_sets[0][n]->host().data(); }

std::string predict_shape_json(const reference::PredictShape &s) {
    char text[160];
    std::snprintf(text, sizeof text, "{\"B\": %lld, \"I\": %lld, \"K\": %lld, \"J\": %lld, \"E\": %lld}",
                  (long long)s.batch, (long long)s.in_caps, (long long)s.in_dim, (long long)s.out_caps,
                  (long long)s.out_dim);
    return text;
}

// Capsule prediction (docs/design.md §1.1): (u, W) -> u_hat, (g, W) -> grad_u,
// (g, u) -> grad_W, in the generators' argument order.
void make_prediction(ExploreProblem &p, const std::string &op, const BenchShape &shape, Device device,
                     std::mt19937_64 &rng) {
    const auto &s = shape.s;
    const std::vector<int64_t> u_shape{s.batch, s.in_caps, s.in_dim},
        W_shape{s.in_caps, s.out_caps, s.out_dim, s.in_dim}, g_shape{s.batch, s.in_caps, s.out_caps, s.out_dim};
    std::vector<std::vector<int64_t>> inputs;
    std::vector<int64_t> output;
    if (op == "predict") {
        inputs = {u_shape, W_shape}, output = g_shape;
    } else if (op == "predict_grad_input") {
        inputs = {g_shape, W_shape}, output = u_shape;
    } else {  // predict_grad_weight
        inputs = {g_shape, u_shape}, output = W_shape;
    }
    fill_sets(p, inputs, rotation_sets(device, input_bytes_of(inputs)), rng);
    p.output = host_tensor(output);
    int64_t reduction = 0;
    if (op == "predict") {
        p.ref = reference::predict_f64(s, input(p, 0), input(p, 1));
        reduction = s.in_dim;
    } else if (op == "predict_grad_input") {
        p.ref = reference::predict_grad_input_f64(s, input(p, 0), input(p, 1));
        reduction = s.out_caps * s.out_dim;
    } else {
        p.ref = reference::predict_grad_weight_f64(s, input(p, 0), input(p, 1));
        reduction = s.batch;
    }
    p.tolerance = reference::float32_sum_tolerance(reduction);
    p.bytes = input_bytes_of(inputs) + 4.0 * p.output->size();
    p.flops = 2.0 * s.batch * s.in_caps * s.out_caps * s.out_dim * s.in_dim;
    p.shape_name = shape.name;
    p.shape_json = predict_shape_json(s);
}

// The DigitCaps layer (docs/design.md §1.2): (u, W, b0) -> v after 3 routing
// iterations; b0 random, so the initial logits are exercised too.
void make_digitcaps(ExploreProblem &p, const BenchShape &shape, Device device, std::mt19937_64 &rng) {
    const reference::DigitCapsShape s{shape.s.batch, shape.s.in_caps, shape.s.in_dim, shape.s.out_caps,
                                      shape.s.out_dim};
    const std::vector<std::vector<int64_t>> inputs{
        {s.batch, s.in_caps, s.in_dim}, {s.in_caps, s.out_caps, s.out_dim, s.in_dim}, {s.in_caps, s.out_caps}};
    fill_sets(p, inputs, rotation_sets(device, input_bytes_of(inputs)), rng);
    p.output = host_tensor({s.batch, s.out_caps, s.out_dim});
    p.ref = reference::digitcaps_f64(s, input(p, 0), input(p, 1), input(p, 2), kRoutingIterations);
    // As `halcaps bench` checks the layer: routing's softmax and squash keep
    // errors near float32 rounding of the sums (test_digitcaps_cpu.cpp).
    p.tolerance = {1e-5, 1e-4};
    p.bytes = input_bytes_of(inputs) + 4.0 * p.output->size();
    const double u_hat_size = static_cast<double>(s.batch) * s.in_caps * s.out_caps * s.out_dim;
    p.flops = 2.0 * u_hat_size * s.in_dim + 4.0 * u_hat_size * kRoutingIterations;
    p.shape_name = shape.name;
    p.shape_json = predict_shape_json(shape.s);
}

// The capsule convolution (docs/design.md §1.3): (stride, pad, I, K) -> O.
void make_capsconv(ExploreProblem &p, const CapsConvBenchShape &shape, Device device, std::mt19937_64 &rng) {
    const auto &s = shape.s;
    const std::vector<std::vector<int64_t>> inputs{{s.batch, s.height, s.width, s.in_caps, 4, 4},
                                                   {s.kernel_h, s.kernel_w, s.in_caps, s.out_caps, 4, 4}};
    fill_sets(p, inputs, rotation_sets(device, input_bytes_of(inputs)), rng);
    p.scalars = {static_cast<int32_t>(s.stride), static_cast<int32_t>(s.pad)};
    p.output = host_tensor({s.batch, s.out_height(), s.out_width(), s.out_caps, 4, 4});
    p.ref = reference::capsconv_f64(s, input(p, 0), input(p, 1));
    p.tolerance = reference::float32_sum_tolerance(s.kernel_h * s.kernel_w * s.in_caps * 4);
    p.bytes = input_bytes_of(inputs) + 4.0 * p.output->size();
    p.flops = s.flops();
    char text[256];
    std::snprintf(text, sizeof text,
                  "{\"n\": %lld, \"H\": %lld, \"W\": %lld, \"ci\": %lld, \"k\": %lld, \"co\": %lld, \"stride\": %lld, "
                  "\"pad\": %lld}",
                  (long long)s.batch, (long long)s.height, (long long)s.width, (long long)s.in_caps,
                  (long long)s.kernel_h, (long long)s.out_caps, (long long)s.stride, (long long)s.pad);
    p.shape_name = shape.name;
    p.shape_json = text;
}

}  // namespace

bool explore_can_run(const std::string &op) {
    return op == "predict" || op == "predict_grad_input" || op == "predict_grad_weight" || op == "digitcaps" ||
           op == "digitcaps_fused" || op == "capsconv";
}

ExploreProblem make_explore_problem(const std::string &op, const std::string &shape, Device device,
                                    std::mt19937_64 &rng) {
    ExploreProblem p;
    if (op == "capsconv") {
        make_capsconv(p, parse_capsconv_shape(shape), device, rng);
    } else if (op == "digitcaps" || op == "digitcaps_fused") {
        make_digitcaps(p, parse_shape(shape), device, rng);
    } else if (explore_can_run(op)) {
        make_prediction(p, op, parse_shape(shape), device, rng);
    } else {
        throw UsageError{
            "explore run handles predict (and its gradients), digitcaps, digitcaps_fused and "
            "capsconv, not '" +
            op + "'; time its rows (built into the library) with `halcaps bench`"};
    }
    return p;
}

}  // namespace halcaps::cli

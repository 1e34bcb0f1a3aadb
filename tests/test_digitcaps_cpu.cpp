// Squash, routing and the DigitCaps layer on the CPU, forward and backward,
// against the float64 reference (reference/digitcaps_f64.cpp): the blog's
// {4, 8} grid, odd sizes, 1 / 3 / 5 iterations, b0 given and not, hard inputs,
// NaN-poisoned outputs, and bad arguments with their exact statuses.
#include <algorithm>

#include "digitcaps_checks.h"

using namespace halcaps;
using namespace halcaps::testing;
using reference::DigitCapsShape;

namespace {

void require_status(const Status &s, StatusCode code, const std::string &message_start) {
    INFO("got " << status_code_name(s.code) << ": " << s.message);
    REQUIRE(s.code == code);
    REQUIRE(s.message.rfind(message_start, 0) == 0);
}

}  // namespace

TEST_CASE("routing: implementations are listed with their iteration counts", "[routing]") {
    // "steps", the per-iteration kernels, takes every count; so do the CPU
    // defaults, unrolled where built (tests/test_digitcaps_iterations.cpp).
    REQUIRE(implementations("route", 3).size() >= 3);  // cpu, stage_per_op, steps
    auto sorted = [](std::vector<std::string> names) {
        std::sort(names.begin(), names.end());
        return names;
    };
    REQUIRE(implementations("digitcaps", 1) == std::vector<std::string>{"cpu", "steps"});
    REQUIRE(implementations("digitcaps", 5) == std::vector<std::string>{"cpu", "steps"});
    REQUIRE(sorted(implementations("digitcaps_backward", 3)) ==
            std::vector<std::string>{"cpu", "root_autodiff", "steps"});
    REQUIRE(sorted(implementations("route_backward", 3)) == std::vector<std::string>{"cpu", "root_autodiff", "steps"});
    REQUIRE(sorted(implementations("digitcaps_backward", 1)) == std::vector<std::string>{"cpu", "steps"});
    for (int n : {1, 3, 5}) {
        REQUIRE(sorted(implementations("digitcaps_with_s", n)) ==
                std::vector<std::string>{"cpu_lanes", "fused_cpu", "steps"});
        REQUIRE(sorted(implementations("digitcaps_backward_with_s", n)) ==
                (n == 5 ? std::vector<std::string>{"cpu", "steps"}
                        : std::vector<std::string>{"cpu", "cpu_phases", "steps"}));
        // The pair keeping c is the hand-written CUDA's only.
        REQUIRE(implementations("digitcaps_with_c", n).empty());
        REQUIRE(implementations("digitcaps_backward_with_c", n).empty());
    }
}

TEST_CASE("routing: blog grid, batch/in_caps/in_dim/out_caps/out_dim in {4, 8}", "[routing]") {
    int n = 0;
    for (const auto &g : blog_grid_shapes()) {
        // The reference is O(B I J E K r); alternate b0 and do the backward on half.
        check_all({g.batch, g.in_caps, g.in_dim, g.out_caps, g.out_dim}, 3, n % 2 == 0, n % 2 == 1);
        n++;
    }
}

TEST_CASE("routing: odd sizes, 1 and 5 iterations, b0 given and not", "[routing]") {
    const std::vector<DigitCapsShape> shapes = {{1, 1, 1, 1, 1},   {1, 3, 7, 5, 3},     {3, 7, 1, 11, 13},
                                                {7, 5, 3, 3, 17},  {2, 127, 8, 10, 16}, {17, 13, 9, 7, 15},
                                                {5, 31, 2, 2, 31}, {2, 3, 8, 1, 33}};
    for (const auto &s : shapes) {
        for (int iterations : {1, 3, 5}) {
            check_all(s, iterations, iterations != 3);
        }
    }
}

TEST_CASE("routing: MNIST DigitCaps shape, forward", "[routing]") {
    check_all({128, 1152, 8, 10, 16}, 3, false, false);
}

TEST_CASE("squash: values and numerically hard inputs", "[routing]") { check_squash_values(Device::cpu); }

TEST_CASE("routing: hard inputs (huge and tiny u_hat, large logits)", "[routing]") {
    INFO("seed " << seed());
    const DigitCapsShape s{3, 9, 1, 5, 8};
    // 1e-25: v ~ |s|^3 / sqrt(eps) ~ 1e-70 underflows float32 to 0 (checked
    // for finiteness and size only). 1e-6: v ~ 1e-14, where float32 keeps
    // its precision (at 1e-12, v ~ 1e-32 and fast-math's reassociated
    // products pass through denormals: measured 2e-3 relative error).
    for (float scale : {1e-25f, 1e-6f, 1e15f}) {
        for (float logit_scale : {1.0f, 80.0f}) {
            INFO("u_hat scale " << scale << ", b0 scale " << logit_scale);
            DigitCapsProblem p(s);
            for (float &x : p.u_hat) x *= scale;
            for (float &x : p.b0) x *= logit_scale;  // exp(80) overflows float32 without the max shift
            for (int iterations : {1, 3}) {
                p.v = nan_filled(p.v.size());
                REQUIRE(route(p.u_hat_v(), p.b0_v(), p.v_v(), iterations, cpu_options()).ok());
                const auto ref = reference::route_f64(s.routing(), p.u_hat.data(), p.b0.data(), iterations);
                for (float x : p.v) REQUIRE(std::isfinite(x));
                if (scale < 1e-20f) {
                    for (float x : p.v) REQUIRE(std::fabs(x) <= 1e-37f);
                } else {
                    require_close("v", p.v, ref, 1e-4);
                }
            }
        }
    }
}

// The gradients on the forward's hard inputs (digitcaps_checks.h), by every
// CPU backward, Halide's autodiff (root_autodiff) included: it gave NaN at
// u_hat x 1e-25 and was 0.7 to 1.3 off norm-wise at 1e15 until
// define_squash, for_autodiff, held its scale m = max |s|
// constant and clamped its length factor lower (generators/digitcaps.cpp
// says why).
TEST_CASE("routing: hard inputs for the backward (huge and tiny u_hat and u, large logits)", "[routing]") {
    check_backward_on_hard_inputs(Device::cpu);
}

TEST_CASE("routing: bad arguments give exact statuses", "[routing]") {
    DigitCapsProblem p({2, 3, 4, 5, 6});
    const Options o = cpu_options();
    require_status(route(p.u_hat_v(), TensorView{}, p.v_v(), 0, o), StatusCode::unsupported_iterations,
                   "route: iterations is 0; it must be at least 1");
    require_status(digitcaps(p.u_v(), p.W_v(), TensorView{}, p.v_v(), kMaxRoutingIterations + 1, o),
                   StatusCode::unsupported_iterations,
                   "digitcaps: iterations is " + std::to_string(kMaxRoutingIterations + 1) + "; at most " +
                       std::to_string(kMaxRoutingIterations) + " are supported");
    require_status(route(p.u_hat_v(), TensorView{}, p.v_v(), 5, cpu_options("stage_per_op")),
                   StatusCode::unsupported_iterations,
                   "route: implementation 'stage_per_op' is built for iterations 3");
    require_status(route(p.u_hat_v(), TensorView{}, p.v_v(), 3, cpu_options("tuned")),
                   StatusCode::unknown_implementation, "route: no implementation named 'tuned' for device cpu");
    TensorView bad_b0 = p.b0_v();
    bad_b0.shape = {3, 4};
    require_status(route(p.u_hat_v(), bad_b0, p.v_v(), 3, o), StatusCode::extent_mismatch,
                   "route: b0 extent 1 (out_caps) is 4 but u_hat has out_caps = 5");
    TensorView null_b0 = p.b0_v();
    null_b0.data = nullptr;
    require_status(route(p.u_hat_v(), null_b0, p.v_v(), 3, o), StatusCode::null_pointer,
                   "route: b0 has a null data pointer");
    TensorView v_rank = p.v_v();
    v_rank.shape = {2, 30};
    require_status(digitcaps(p.u_v(), p.W_v(), p.b0_v(), v_rank, 3, o), StatusCode::bad_rank,
                   "digitcaps: v must have rank 3");
    TensorView v_extent = p.v_v();
    v_extent.shape[2] = 0;
    require_status(digitcaps(p.u_v(), p.W_v(), p.b0_v(), v_extent, 3, o), StatusCode::bad_extent,
                   "digitcaps: v extent 2 (out_dim) is 0");
    TensorView W_strided = p.W_v();
    W_strided.strides = {1, 3, 15, 90};
    require_status(digitcaps(p.u_v(), W_strided, p.b0_v(), p.v_v(), 3, o), StatusCode::unsupported_strides,
                   "digitcaps: W has strides [1, 3, 15, 90]");
    TensorView grad_W_bad = p.grad_W_v();
    grad_W_bad.shape[3] = 5;
    require_status(
        digitcaps_backward(p.u_v(), p.W_v(), TensorView{}, p.grad_v_v(), p.grad_u_v(), grad_W_bad, TensorView{}, 3, o),
        StatusCode::extent_mismatch, "digitcaps_backward: grad_W extent 3 (in_dim) is 5 but u has in_dim = 4");
    TensorView gv = p.grad_v_v();
    gv.space = MemorySpace::cuda;
    require_status(route_backward(p.u_hat_v(), TensorView{}, gv, p.grad_u_hat_v(), TensorView{}, 3, o),
                   StatusCode::wrong_memory_space,
                   "route_backward: grad_v is in cuda memory but u_hat is in host memory");
    std::vector<float> scalar(1);
    require_status(squash(host_view(scalar, {}), host_view(scalar, {}), o), StatusCode::bad_rank,
                   "squash: s must have rank >= 1");
    std::vector<float> s(12), v(12);
    require_status(squash(host_view(s, {3, 4}), host_view(v, {4, 3}), o), StatusCode::extent_mismatch,
                   "squash: v extent 0 (dim0) is 4 but s has dim0 = 3");
    // routing_s: [iterations, batch, out_caps, out_dim], its first extent the
    // call's iteration count.
    std::vector<float> routing_s(3 * 2 * 5 * 6);
    require_status(digitcaps_with_s(p.u_v(), p.W_v(), TensorView{}, p.v_v(), host_view(routing_s, {2, 2, 5, 6}), 3, o),
                   StatusCode::extent_mismatch,
                   "digitcaps_with_s: routing_s (iterations) is 2 but the call's iterations = 3");
    require_status(digitcaps_with_s(p.u_v(), p.W_v(), TensorView{}, p.v_v(), host_view(routing_s, {3, 2, 30}), 3, o),
                   StatusCode::bad_rank, "digitcaps_with_s: routing_s must have rank 4");
    require_status(digitcaps_backward_with_s(p.u_v(), p.W_v(), TensorView{}, host_view(routing_s, {3, 2, 6, 5}),
                                             p.grad_v_v(), p.grad_u_v(), p.grad_W_v(), TensorView{}, 3, o),
                   StatusCode::extent_mismatch,
                   "digitcaps_backward_with_s: routing_s extent 2 (out_caps) is 6 but W has out_caps = 5");
    require_status(digitcaps_backward_with_s(p.u_v(), p.W_v(), TensorView{}, host_view(routing_s, {3, 2, 5, 6}),
                                             p.grad_v_v(), p.grad_u_v(), p.grad_W_v(), TensorView{}, 2, o),
                   StatusCode::extent_mismatch,
                   "digitcaps_backward_with_s: routing_s (iterations) is 3 but the call's iterations = 2");
    require_status(digitcaps_with_s(p.u_v(), p.W_v(), TensorView{}, p.v_v(), host_view(routing_s, {3, 2, 5, 6}), 3,
                                    cpu_options("cpu")),
                   StatusCode::unknown_implementation, "digitcaps_with_s: no implementation named 'cpu'");
    // routing_c: [iterations, batch, in_caps, out_caps]; checked before the
    // implementation is looked for, which on the CPU there is none of.
    std::vector<float> routing_c(3 * 2 * 3 * 5);
    require_status(digitcaps_with_c(p.u_v(), p.W_v(), TensorView{}, p.v_v(), host_view(routing_s, {3, 2, 5, 6}),
                                    host_view(routing_c, {3, 2, 3, 4}), 3, o),
                   StatusCode::extent_mismatch,
                   "digitcaps_with_c: routing_c extent 3 (out_caps) is 4 but W has out_caps = 5");
    require_status(digitcaps_with_c(p.u_v(), p.W_v(), TensorView{}, p.v_v(), host_view(routing_s, {3, 2, 5, 6}),
                                    host_view(routing_c, {3, 6, 5}), 3, o),
                   StatusCode::bad_rank, "digitcaps_with_c: routing_c must have rank 4");
    require_status(digitcaps_backward_with_c(p.u_v(), p.W_v(), TensorView{}, host_view(routing_s, {2, 2, 5, 6}),
                                             host_view(routing_c, {2, 2, 3, 5}), p.grad_v_v(), p.grad_u_v(),
                                             p.grad_W_v(), TensorView{}, 3, o),
                   StatusCode::extent_mismatch,
                   "digitcaps_backward_with_c: routing_s (iterations) is 2 but the call's iterations = 3");
    require_status(digitcaps_backward_with_c(p.u_v(), p.W_v(), TensorView{}, host_view(routing_s, {3, 2, 5, 6}),
                                             host_view(routing_c, {3, 2, 3, 5}), p.grad_v_v(), p.grad_u_v(),
                                             p.grad_W_v(), TensorView{}, 3, o),
                   StatusCode::unknown_implementation,
                   "digitcaps_backward_with_c: no implementation for device cpu; available: none");
    require_status(digitcaps_with_c(p.u_v(), p.W_v(), TensorView{}, p.v_v(), host_view(routing_s, {3, 2, 5, 6}),
                                    host_view(routing_c, {3, 2, 3, 5}), 3, cpu_options("cpu")),
                   StatusCode::unknown_implementation,
                   "digitcaps_with_c: no implementation named 'cpu' for device cpu; available: none");
    // Optional outputs may be left out.
    REQUIRE(
        digitcaps_backward(p.u_v(), p.W_v(), TensorView{}, p.grad_v_v(), p.grad_u_v(), p.grad_W_v(), TensorView{}, 3, o)
            .ok());
}

TEST_CASE("routing: Halide's autodiff backward agrees with the hand-derived one", "[routing]") {
    // Two independent derivations of the same gradients (docs/design.md §2): each
    // is also checked against the reference by check_all; here directly
    // against each other, on the same inputs, with b0 given, at odd sizes
    // and where the adjoint region once ran past out_dim (E = 16, 17).
    INFO("seed " << seed());
    for (const DigitCapsShape &s :
         std::vector<DigitCapsShape>{{3, 7, 5, 4, 9}, {5, 13, 8, 10, 16}, {2, 31, 3, 7, 17}}) {
        INFO(name(s, 3, true));
        DigitCapsProblem hand(s);
        DigitCapsProblem ad(s);
        ad.u = hand.u, ad.W = hand.W, ad.b0 = hand.b0, ad.grad_v = hand.grad_v, ad.u_hat = hand.u_hat;
        REQUIRE(route_backward(hand.u_hat_v(), hand.b0_v(), hand.grad_v_v(), hand.grad_u_hat_v(), hand.grad_b0_v(), 3,
                               cpu_options("cpu"))
                    .ok());
        REQUIRE(route_backward(ad.u_hat_v(), ad.b0_v(), ad.grad_v_v(), ad.grad_u_hat_v(), ad.grad_b0_v(), 3,
                               cpu_options("root_autodiff"))
                    .ok());
        require_close("grad_u_hat", ad.grad_u_hat, to_double(hand.grad_u_hat), 1e-4);
        require_close("grad_b0", ad.grad_b0, to_double(hand.grad_b0), 1e-4, max_abs(to_double(hand.grad_u_hat)));
        REQUIRE(digitcaps_backward(hand.u_v(), hand.W_v(), hand.b0_v(), hand.grad_v_v(), hand.grad_u_v(),
                                   hand.grad_W_v(), hand.grad_b0_v(), 3, cpu_options("cpu"))
                    .ok());
        REQUIRE(digitcaps_backward(ad.u_v(), ad.W_v(), ad.b0_v(), ad.grad_v_v(), ad.grad_u_v(), ad.grad_W_v(),
                                   ad.grad_b0_v(), 3, cpu_options("root_autodiff"))
                    .ok());
        require_close("grad_u", ad.grad_u, to_double(hand.grad_u), 1e-4);
        require_close("grad_W", ad.grad_W, to_double(hand.grad_W), 1e-4);
        require_close("grad_b0 (layer)", ad.grad_b0, to_double(hand.grad_b0), 1e-4, max_abs(to_double(hand.grad_u)));
    }
}

TEST_CASE("digitcaps cpu: the training pair's host blocks are kept, reused as if fresh, and released",
          "[routing][host_blocks]") {
    // The backward's alpha at this shape is 2m·B·I·J floats (4.4 MB), kept
    // when a call ends. A call on other inputs in between leaves its values
    // in the blocks a repeated call then reuses: the repeat must give the
    // same bits as the first call.
    INFO("seed " << seed());
    const DigitCapsShape s{16, 1152, 8, 10, 16};
    REQUIRE(release_cached_host_memory().ok());
    REQUIRE(cached_host_memory_bytes() == 0);
    DigitCapsProblem first(s), other(s);
    std::vector<float> routing_s = nan_filled(3 * first.s.v_size()), other_s = routing_s;
    REQUIRE(run_training_pair("cpu_phases", first, routing_s, 3, true, Device::cpu, true).ok());
    const size_t kept = cached_host_memory_bytes();
    INFO("kept after one pair: " << kept << " bytes");
    REQUIRE(kept >= size_t(6) * 16 * 1152 * 10 * sizeof(float));
    const std::vector<float> grad_u = first.grad_u, grad_W = first.grad_W, grad_b0 = first.grad_b0;
    REQUIRE(run_training_pair("cpu_phases", other, other_s, 3, true, Device::cpu, true).ok());
    // Each call takes back what it kept: the cache does not grow with calls of one shape.
    REQUIRE(cached_host_memory_bytes() == kept);
    first.grad_u = nan_filled(grad_u.size()), first.grad_W = nan_filled(grad_W.size());
    first.grad_b0 = nan_filled(grad_b0.size());
    REQUIRE(backward_with_s("cpu_phases", first, routing_s, 3, true, Device::cpu, true).ok());
    REQUIRE(first.grad_u == grad_u);
    REQUIRE(first.grad_W == grad_W);
    REQUIRE(first.grad_b0 == grad_b0);
    REQUIRE(release_cached_host_memory().ok());
    REQUIRE(cached_host_memory_bytes() == 0);
}

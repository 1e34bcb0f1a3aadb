// Routing iterations at run time: every routing op on the CPU takes any count
// from 1 to kMaxRoutingIterations (the unrolled kernels where built, the
// per-iteration "steps" kernels otherwise), checked against the float64
// reference on odd shapes, b0 given and absent, forward and backward; counts
// beyond the limit are refused at once.
#include <chrono>

#include "digitcaps_checks.h"

using namespace halcaps;
using namespace halcaps::testing;
using reference::DigitCapsShape;

TEST_CASE("iterations: every routing op lists 1 to the limit on the CPU", "[iterations]") {
    for (const char *op : {"route", "route_backward", "digitcaps", "digitcaps_backward", "digitcaps_with_s",
                           "digitcaps_backward_with_s"}) {
        INFO(op);
        for (int n = 1; n <= kMaxRoutingIterations; n++) {
            const auto impls = implementations(op, n);
            REQUIRE(std::find(impls.begin(), impls.end(), "steps") != impls.end());
        }
        // The CPU defaults take every count too (route_backward's default is "steps").
        const std::string o = op;
        if (o == "route_backward") continue;
        const std::string default_impl = o == "digitcaps_with_s" ? "fused_cpu" : "cpu";
        for (int n : {2, 4, 16, kMaxRoutingIterations}) {
            const auto impls = implementations(op, n);
            REQUIRE(std::find(impls.begin(), impls.end(), default_impl) != impls.end());
        }
    }
}

TEST_CASE("iterations: 1 to 8 and 16 against the reference, odd shapes, b0 given and not", "[iterations]") {
    const std::vector<DigitCapsShape> shapes = {{3, 7, 5, 4, 9}, {1, 13, 3, 5, 1}, {5, 2, 1, 1, 7}};
    for (int iterations : {1, 2, 3, 4, 5, 6, 7, 8, 16}) {
        for (size_t n = 0; n < shapes.size(); n++) {
            check_all(shapes[n], iterations, true);
            check_all(shapes[n], iterations, false, n == 0);
        }
    }
}

TEST_CASE("iterations: the seed blog's layer (r = 4) at the MNIST shape, forward", "[iterations]") {
    // 3 agreement updates and one more output (docs/design.md §1.2), by the CPU default.
    INFO("seed " << seed());
    DigitCapsProblem p({8, 1152, 8, 10, 16});
    const Status st = digitcaps(p.u_v(), p.W_v(), TensorView{}, p.v_v(), 4, cpu_options());
    INFO(st.message);
    REQUIRE(st.ok());
    const auto ref = reference::digitcaps_f64(p.s, p.u.data(), p.W.data(), nullptr, 4);
    require_close_conditioned("v", p.v, ref,
                              nudged_reference(ref,
                                               [&](int n) {
                                                   return reference::digitcaps_f64(p.s, nudged(p.u, 1, n).data(),
                                                                                   nudged(p.W, 2, n).data(), nullptr,
                                                                                   4);
                                               }),
                              1e-4);
}

TEST_CASE("iterations: counts beyond the limit are refused at once, naming the count and the limit", "[iterations]") {
    // A large shape, so that any work before the refusal would show in the time.
    DigitCapsProblem p({64, 1152, 8, 10, 16});
    const std::string limit = "at most " + std::to_string(kMaxRoutingIterations) + " are supported";
    for (const int iterations : {kMaxRoutingIterations + 1, 1000000}) {
        for (const Options &o : {cpu_options(), cpu_options("steps"), cpu_options("stage_per_op")}) {
            INFO(iterations << " iterations, implementation '" << o.implementation << "'");
            const auto start = std::chrono::steady_clock::now();
            const std::vector<Status> statuses = {
                route(p.u_hat_v(), TensorView{}, p.v_v(), iterations, o),
                route_backward(p.u_hat_v(), TensorView{}, p.grad_v_v(), p.grad_u_hat_v(), TensorView{}, iterations, o),
                digitcaps(p.u_v(), p.W_v(), TensorView{}, p.v_v(), iterations, o),
                digitcaps_backward(p.u_v(), p.W_v(), TensorView{}, p.grad_v_v(), p.grad_u_v(), p.grad_W_v(),
                                   TensorView{}, iterations, o),
            };
            const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            for (const Status &st : statuses) {
                INFO(st.message);
                REQUIRE(st.code == StatusCode::unsupported_iterations);
                REQUIRE(st.message.find("iterations is " + std::to_string(iterations)) != std::string::npos);
                REQUIRE(st.message.find(limit) != std::string::npos);
            }
            REQUIRE(seconds < 0.05);
        }
    }
}

TEST_CASE("iterations: the CPU backward defaults: steps for routing, cpu where built for the layer", "[iterations]") {
    // Named or not, the same kernels: bitwise equal results.
    INFO("seed " << seed());
    DigitCapsProblem a({3, 7, 5, 4, 9});
    DigitCapsProblem b = a;
    for (int iterations : {2, 3}) {
        INFO("iterations " << iterations);
        REQUIRE(route_backward(a.u_hat_v(), a.b0_v(), a.grad_v_v(), a.grad_u_hat_v(), a.grad_b0_v(), iterations,
                               cpu_options())
                    .ok());
        REQUIRE(route_backward(b.u_hat_v(), b.b0_v(), b.grad_v_v(), b.grad_u_hat_v(), b.grad_b0_v(), iterations,
                               cpu_options("steps"))
                    .ok());
        REQUIRE(a.grad_u_hat == b.grad_u_hat);
        // digitcaps_backward: the unrolled "cpu" where it is built (3), "steps" for the other counts (2).
        const std::string layer_default = iterations == 3 ? "cpu" : "steps";
        REQUIRE(digitcaps_backward(a.u_v(), a.W_v(), a.b0_v(), a.grad_v_v(), a.grad_u_v(), a.grad_W_v(), a.grad_b0_v(),
                                   iterations, cpu_options())
                    .ok());
        REQUIRE(digitcaps_backward(b.u_v(), b.W_v(), b.b0_v(), b.grad_v_v(), b.grad_u_v(), b.grad_W_v(), b.grad_b0_v(),
                                   iterations, cpu_options(layer_default))
                    .ok());
        REQUIRE(a.grad_u == b.grad_u);
        REQUIRE(a.grad_W == b.grad_W);
    }
}

TEST_CASE("iterations: the general path's training pair and backward with s at 4 iterations", "[iterations]") {
    // digitcaps_with_s by "steps" keeps s as fused_cpu does: both against the reference.
    const DigitCapsShape s{4, 9, 3, 5, 7};
    for (const auto &impl : {std::string("steps"), std::string("fused_cpu")}) {
        INFO("seed " << seed() << ", " << impl);
        check_digitcaps_forward(impl, true, s, 4, true, Device::cpu);
    }
    check_digitcaps_backward_with_s("steps", s, 4, true, Device::cpu);
    check_digitcaps_backward_with_s("cpu", s, 4, false, Device::cpu, false);
}

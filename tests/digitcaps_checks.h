// Checks of squash, routing and the DigitCaps layer against the float64
// reference (reference/digitcaps_f64.cpp), shared by the CPU tests
// (test_digitcaps_cpu.cpp) and the CUDA tests (test_cuda.cpp): every
// implementation built for a device and an iteration count, on fresh random
// inputs with NaN-poisoned outputs.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "digitcaps_reference.h"
#include "finite_differences.h"
#include "test_support.h"

namespace halcaps::testing {

using reference::DigitCapsShape;

inline Options device_options(Device device, const std::string &implementation = "") {
    Options o;
    o.device = device;
    o.implementation = implementation;
    return o;
}

inline Options cpu_options(const std::string &implementation = "") {
    return device_options(Device::cpu, implementation);
}

inline std::string name(const DigitCapsShape &s, int iterations, bool with_b0) {
    return "B=" + std::to_string(s.batch) + " I=" + std::to_string(s.in_caps) + " K=" + std::to_string(s.in_dim) +
           " J=" + std::to_string(s.out_caps) + " E=" + std::to_string(s.out_dim) + ", " + std::to_string(iterations) +
           " iterations, b0 " + (with_b0 ? "given" : "zeros");
}

// Routing outputs and gradients are sums of I·E products through softmax and
// squash; float32 lands near 1e-6 relative, up to ~1e-5 after 5 iterations
// (each sharpens the softmax, and with it the sensitivity to rounding). Elementwise tolerance relative to
// the result's scale, plus the norm-wise error (docs/design.md §2).
// Over the finite elements: a result's NaN and +-inf are checked as such
// (reference::compare), and set no scale.
inline double max_abs(const std::vector<double> &v) {
    double m = 0;
    for (double x : v) {
        if (std::isfinite(x)) m = std::max(m, std::fabs(x));
    }
    return m;
}

// `scale`: the size of the terms that were summed, when it is larger than
// the result (grad_b0 sums softmax-weighted differences that can cancel to
// ~1e-10 of the gradients they come from); defaults to max |ref|.
// `atol_floor`: an elementwise tolerance the check allows at least
// (require_close_conditioned's sensitivity allowance).
inline void require_close(const char *what, const std::vector<float> &x, const std::vector<double> &ref,
                          double scale_atol, double scale = 0, double norm_tol = 1e-4, double atol_floor = 0) {
    const double max_ref = std::max(max_abs(ref), scale);
    const double atol = std::max(scale_atol * std::max(max_ref, 1e-30), atol_floor);
    const auto c = reference::compare(x.data(), ref, {atol, 1e-4});
    INFO(what << ": " << c.summary() << " (elementwise tolerance " << atol << ")");
    REQUIRE(c.passed);
    if (scale == 0) REQUIRE(c.relative_l2_error < norm_tol);
}

// Routing's output can be ill-conditioned: for some random inputs a logit
// tie that the iterations sharpen makes v move by far more than its inputs.
// Measured on the float64 reference alone (B=17 I=13 K=9 J=7 E=15, inputs
// N(0, 1), 2000 draws): moving u and W by a float32 rounding (6e-8
// relative) moved some element of v by up to 11x the 1e-4 tolerance after 5
// iterations (1% of draws beyond 0.3x), 0.09x after 3. A float32
// implementation cannot be closer than that: such draws failed "routing: odd
// sizes" about once in 15 runs (5 iterations, b0 given; seen in CI and
// replayed with HALCAPS_TEST_SEED=3215415320). So the forward's tolerance
// also allows 10x the change of the reference itself when every input moves
// by kNudge relative: ~0 for a well-conditioned draw (the 1e-4 bound then
// decides), large only near such a tie. Over 1000 such draws at 5 iterations the allowance was 1e-4 of
// max |v| at the median, 6.8e-4 at the 99th percentile and 2.7e-3 at most,
// while stopping one iteration early moves v by 7.6e-2 of max |v| or more.
// One nudge is one random direction, and a float32 result's rounding moves
// it along another: where the nudge misses the sensitive direction, its
// change understates the conditioning. With one nudge "[iterations]" failed
// about once in 40 runs (HALCAPS_TEST_SEED=3295113156: digitcaps_with_s at 8
// iterations 1.2x beyond the allowance; 3420161945: digitcaps_backward's
// grad_u at 16 iterations 1.4x beyond it, and still beyond two nudges'). At
// 8 iterations (B=3 I=7 K=5 J=4 E=9, 40000 draws) the worst draw was 2.3x
// beyond one nudge's allowance and 0.64x of two nudges'. So the reference is
// nudged kNudges times, each element's largest change taken.
constexpr double kNudge = 1e-7;
constexpr int kNudges = 3;

// `x` with each element moved by kNudge relative, with a fixed generator
// (one per salt and nudge) so that a replayed seed reproduces the check.
inline std::vector<double> nudged(const std::vector<float> &x, uint64_t salt, int nudge) {
    std::mt19937_64 generator(salt + 1000 * static_cast<uint64_t>(nudge));
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<double> out(x.size());
    for (size_t n = 0; n < x.size(); n++) out[n] = x[n] * (1.0 + kNudge * normal(generator));
    return out;
}

// Element by element, whichever of `a` and `b` moved further (finitely)
// from `ref`: the two nudges' changes as one nudged reference.
inline std::vector<double> further(const std::vector<double> &ref, std::vector<double> a,
                                   const std::vector<double> &b) {
    for (size_t n = 0; n < a.size(); n++) {
        const double da = a[n] - ref[n], db = b[n] - ref[n];
        if (std::isfinite(db) && (!std::isfinite(da) || std::fabs(db) > std::fabs(da))) a[n] = b[n];
    }
    return a;
}
inline reference::RouteGradients further(const reference::RouteGradients &ref, reference::RouteGradients a,
                                         const reference::RouteGradients &b) {
    a.grad_u_hat = further(ref.grad_u_hat, std::move(a.grad_u_hat), b.grad_u_hat);
    a.grad_b0 = further(ref.grad_b0, std::move(a.grad_b0), b.grad_b0);
    return a;
}
inline reference::DigitCapsGradients further(const reference::DigitCapsGradients &ref, reference::DigitCapsGradients a,
                                             const reference::DigitCapsGradients &b) {
    a.grad_u = further(ref.grad_u, std::move(a.grad_u), b.grad_u);
    a.grad_W = further(ref.grad_W, std::move(a.grad_W), b.grad_W);
    a.grad_b0 = further(ref.grad_b0, std::move(a.grad_b0), b.grad_b0);
    return a;
}

// The reference on nudged inputs, as the conditioned checks take it:
// `reference_at(nudge)` for each of the kNudges nudges (its inputs from
// nudged(x, salt, nudge)), each element the one that moved furthest from `ref`.
template <typename Result, typename ReferenceAt>
Result nudged_reference(const Result &ref, ReferenceAt reference_at) {
    Result out = reference_at(0);
    for (int nudge = 1; nudge < kNudges; nudge++) out = further(ref, std::move(out), reference_at(nudge));
    return out;
}

// require_close with the sensitivity allowance above: `ref_nudged` is the
// reference on nudged inputs (nudged_reference). `scale_atol` (relative to `scale`, see
// require_close) is also the norm-wise tolerance; both are widened to
// `sensitivity` times the reference's own change (10 for the forward,
// kGradientSensitivity for the gradients).
inline void require_close_conditioned(const char *what, const std::vector<float> &x, const std::vector<double> &ref,
                                      const std::vector<double> &ref_nudged, double scale_atol, double sensitivity = 10,
                                      double scale = 0) {
    double change = 0, change2 = 0, ref2 = 0;
    for (size_t n = 0; n < ref.size(); n++) {
        if (!std::isfinite(ref[n]) || !std::isfinite(ref_nudged[n])) continue;
        const double d = ref_nudged[n] - ref[n];
        change = std::max(change, std::fabs(d));
        change2 += d * d;
        ref2 += ref[n] * ref[n];
    }
    INFO(what << ": the reference's own change under a " << kNudge << " relative nudge of its inputs is " << change);
    require_close(what, x, ref, scale_atol, scale,
                  std::max(scale_atol, sensitivity * std::sqrt(change2 / std::max(ref2, 1e-300))),
                  sensitivity * change);
}

inline std::vector<std::string> implementations(const std::string &op, int iterations, Device device = Device::cpu) {
    std::vector<std::string> out;
    for (const auto &info : list_implementations()) {
        if (info.op != op || info.device != device) continue;
        for (int n : info.iterations) {
            if (n == iterations) out.push_back(info.implementation);
        }
    }
    return out;
}

// The implementations that refuse shapes by design, reporting them as
// unsupported_shape before any device work: fused_split (and its variants)
// takes CapsNet's in_dim 8 and out_dim 16 only; the hand-written cuda_fused
// out_caps up to 16, out_dim up to 32 and in_dim up to 16, cuda_tensor each
// of them up to 16, and the backward's cuda_passes out_caps and out_dim up
// to 32.
inline bool refuses_shape(const std::string &implementation, const DigitCapsShape &s) {
    if (implementation.rfind("fused_split", 0) == 0) return s.in_dim != 8 || s.out_dim != 16;
    if (implementation == "cuda_fused") return s.out_caps > 16 || s.out_dim > 32 || s.in_dim > 16;
    if (implementation == "cuda_tensor") return s.out_caps > 16 || s.out_dim > 16 || s.in_dim > 16;
    if (implementation == "cuda_passes") return s.out_caps > 32 || s.out_dim > 32;
    return false;
}
inline void require_refusal(const std::string &implementation, const Status &st) {
    REQUIRE(st.code == StatusCode::unsupported_shape);
    const char *limits = implementation == "cuda_fused"
                             ? "out_caps must be at most 16, out_dim at most 32 and in_dim at most 16"
                         : implementation == "cuda_tensor" ? "out_caps, out_dim and in_dim must each be at most 16"
                         : implementation == "cuda_passes" ? "out_caps and out_dim must each be at most 32"
                                                           : "in_dim must be 8 and out_dim 16";
    REQUIRE(st.message.find(limits) != std::string::npos);
}

struct DigitCapsProblem {
    DigitCapsShape s;
    std::vector<float> u, W, b0, u_hat, grad_v, v, grad_u, grad_W, grad_b0, grad_u_hat;
    explicit DigitCapsProblem(DigitCapsShape shape)
        : s(shape), u(random_normal(s.u_size())), W(random_normal(s.W_size())), b0(random_normal(s.b0_size())),
          u_hat(random_normal(s.routing().u_hat_size())), grad_v(random_normal(s.v_size())), v(nan_filled(s.v_size())),
          grad_u(nan_filled(s.u_size())), grad_W(nan_filled(s.W_size())), grad_b0(nan_filled(s.b0_size())),
          grad_u_hat(nan_filled(s.routing().u_hat_size())) {}
    TensorView u_v() { return host_view(u, {s.batch, s.in_caps, s.in_dim}); }
    TensorView W_v() { return host_view(W, {s.in_caps, s.out_caps, s.out_dim, s.in_dim}); }
    TensorView b0_v() { return host_view(b0, {s.in_caps, s.out_caps}); }
    TensorView u_hat_v() { return host_view(u_hat, {s.batch, s.in_caps, s.out_caps, s.out_dim}); }
    TensorView v_v() { return host_view(v, {s.batch, s.out_caps, s.out_dim}); }
    TensorView grad_v_v() { return host_view(grad_v, {s.batch, s.out_caps, s.out_dim}); }
    TensorView grad_u_v() { return host_view(grad_u, {s.batch, s.in_caps, s.in_dim}); }
    TensorView grad_W_v() { return host_view(grad_W, {s.in_caps, s.out_caps, s.out_dim, s.in_dim}); }
    TensorView grad_b0_v() { return host_view(grad_b0, {s.in_caps, s.out_caps}); }
    TensorView grad_u_hat_v() { return host_view(grad_u_hat, {s.batch, s.in_caps, s.out_caps, s.out_dim}); }
    TensorView routing_s_v(std::vector<float> &routing_s, int iterations) {
        return host_view(routing_s, {iterations, s.batch, s.out_caps, s.out_dim});
    }
    TensorView routing_c_v(std::vector<float> &routing_c, int iterations) {
        return host_view(routing_c, {iterations, s.batch, s.in_caps, s.out_caps});
    }
};

// The gradients' sensitivity factor for require_close_conditioned. The
// gradients go through the same ill-conditioned draws as v, with more
// float32 steps between input and result (rounding perturbs every
// intermediate, not only the inputs): at B=17 I=13 K=9 J=7 E=15, 5
// iterations, b0 given, HALCAPS_TEST_SEED=4 put one element of the layer's
// grad_b0 1.2% off the float64 value (tolerance 1e-3 of its scale), and seed
// 26 put grad_u (backward with s) 10.2x the reference's nudged change off,
// where that change was 1.1% of the element. For a well-conditioned draw the
// allowance is ~1e-5 relative, below g_tol, and g_tol decides.
constexpr double kGradientSensitivity = 100;

// The layer's gradients in `p` (grad_u, grad_W and, where it was asked for,
// grad_b0) against the reference's, to `g_tol` (with the sensitivity
// allowance above).
inline void require_layer_gradients(const DigitCapsProblem &p, bool with_b0, int iterations, double g_tol,
                                    bool with_grad_b0 = true) {
    const auto ref = reference::digitcaps_backward_f64(p.s, p.u.data(), p.W.data(), with_b0 ? p.b0.data() : nullptr,
                                                       p.grad_v.data(), iterations);
    const std::vector<double> grad_v = to_double(p.grad_v);
    const auto ref_n = nudged_reference(ref, [&](int n) {
        return reference::digitcaps_backward_f64(p.s, nudged(p.u, 1, n).data(), nudged(p.W, 2, n).data(),
                                                 with_b0 ? nudged(p.b0, 3, n).data() : nullptr, grad_v.data(),
                                                 iterations);
    });
    require_close_conditioned("grad_u", p.grad_u, ref.grad_u, ref_n.grad_u, g_tol, kGradientSensitivity);
    require_close_conditioned("grad_W", p.grad_W, ref.grad_W, ref_n.grad_W, g_tol, kGradientSensitivity);
    if (!with_grad_b0) return;
    require_close_conditioned("grad_b0", p.grad_b0, ref.grad_b0, ref_n.grad_b0, g_tol, kGradientSensitivity,
                              max_abs(ref.grad_u));
}

// The gradients' tolerance. Gradients through 5 iterations of random
// (unsquashed, |u_hat| ~ 3) inputs: the softmax saturates and the gradients
// reach ~1e2 with float32 rounding amplified along; measured norm-wise
// errors up to 1.5e-4 there (vs ~1e-6 at 1 or 3 iterations), so 10x the
// tolerance.
inline double gradient_tolerance(int iterations) { return iterations >= 5 ? 1e-3 : 1e-4; }

// route_backward by `impl` on a fresh problem (changed by `prepare` where
// given, e.g. scaled), against the reference (or its refusal, where the
// implementation refuses the shape by design).
inline void check_route_backward(const std::string &impl, const DigitCapsShape &shape, int iterations, bool with_b0,
                                 Device device, const std::function<void(DigitCapsProblem &)> &prepare = {}) {
    INFO("route_backward " << impl);
    DigitCapsProblem p(shape);
    if (prepare) prepare(p);
    const Status st = route_backward(p.u_hat_v(), with_b0 ? p.b0_v() : TensorView{}, p.grad_v_v(), p.grad_u_hat_v(),
                                     p.grad_b0_v(), iterations, device_options(device, impl));
    INFO(st.message);
    if (refuses_shape(impl, shape)) {
        require_refusal(impl, st);
        return;
    }
    REQUIRE(st.ok());
    const auto ref = reference::route_backward_f64(p.s.routing(), p.u_hat.data(), with_b0 ? p.b0.data() : nullptr,
                                                   p.grad_v.data(), iterations);
    const std::vector<double> grad_v = to_double(p.grad_v);
    const auto ref_n = nudged_reference(ref, [&](int n) {
        return reference::route_backward_f64(p.s.routing(), nudged(p.u_hat, 1, n).data(),
                                             with_b0 ? nudged(p.b0, 2, n).data() : nullptr, grad_v.data(), iterations);
    });
    const double g_tol = gradient_tolerance(iterations);
    require_close_conditioned("grad_u_hat", p.grad_u_hat, ref.grad_u_hat, ref_n.grad_u_hat, g_tol,
                              kGradientSensitivity);
    require_close_conditioned("grad_b0", p.grad_b0, ref.grad_b0, ref_n.grad_b0, g_tol, kGradientSensitivity,
                              max_abs(ref.grad_u_hat));
}

// digitcaps_backward by `impl`, likewise.
// grad_b0 is asked for where with_grad_b0 (cuda_tensor's c_0 is an [I, J]
// table where it is not).
inline void check_digitcaps_backward(const std::string &impl, const DigitCapsShape &shape, int iterations, bool with_b0,
                                     Device device, const std::function<void(DigitCapsProblem &)> &prepare = {},
                                     bool with_grad_b0 = true) {
    INFO("digitcaps_backward " << impl << (with_grad_b0 ? "" : ", grad_b0 not asked for"));
    DigitCapsProblem p(shape);
    if (prepare) prepare(p);
    const Status st = digitcaps_backward(p.u_v(), p.W_v(), with_b0 ? p.b0_v() : TensorView{}, p.grad_v_v(),
                                         p.grad_u_v(), p.grad_W_v(), with_grad_b0 ? p.grad_b0_v() : TensorView{},
                                         iterations, device_options(device, impl));
    INFO(st.message);
    if (refuses_shape(impl, shape)) {
        require_refusal(impl, st);
        return;
    }
    REQUIRE(st.ok());
    require_layer_gradients(p, with_b0, iterations, gradient_tolerance(iterations), with_grad_b0);
}

// The layer's forward outputs on `p` against the reference (conditioned by
// nudged inputs): v, and routing_s and routing_c where given (non-null).
inline void require_forward_outputs(const DigitCapsProblem &p, bool with_b0, int iterations,
                                    const std::vector<float> *routing_s, const std::vector<float> *routing_c) {
    const float *b0 = with_b0 ? p.b0.data() : nullptr;
    // `f` (one of the reference's forward outputs) at p's inputs, and at them nudged.
    auto check = [&](const char *what, const std::vector<float> &x, auto f) {
        const std::vector<double> ref = f(p.u.data(), p.W.data(), b0);
        require_close_conditioned(what, x, ref,
                                  nudged_reference(ref,
                                                   [&](int n) {
                                                       return f(nudged(p.u, 1, n).data(), nudged(p.W, 2, n).data(),
                                                                with_b0 ? nudged(p.b0, 3, n).data() : nullptr);
                                                   }),
                                  1e-4);
    };
    check("v", p.v, [&](auto u, auto W, auto b) { return reference::digitcaps_f64(p.s, u, W, b, iterations); });
    if (routing_s != nullptr) {
        check("routing_s", *routing_s,
              [&](auto u, auto W, auto b) { return reference::digitcaps_routing_s_f64(p.s, u, W, b, iterations); });
    }
    if (routing_c != nullptr) {
        check("routing_c", *routing_c,
              [&](auto u, auto W, auto b) { return reference::digitcaps_routing_c_f64(p.s, u, W, b, iterations); });
    }
}

// The layer by `impl` on one fresh problem, against the reference: digitcaps,
// or (with_s) digitcaps_with_s, its routing_s checked too.
inline void check_digitcaps_forward(const std::string &impl, bool with_s, const DigitCapsShape &shape, int iterations,
                                    bool with_b0, Device device) {
    const char *op = with_s ? "digitcaps_with_s" : "digitcaps";
    INFO(op << " " << impl);
    DigitCapsProblem p(shape);
    std::vector<float> routing_s = nan_filled(iterations * p.s.v_size());
    const TensorView b0_view = with_b0 ? p.b0_v() : TensorView{};
    const Options options = device_options(device, impl);
    const Status st = with_s ? digitcaps_with_s(p.u_v(), p.W_v(), b0_view, p.v_v(),
                                                p.routing_s_v(routing_s, iterations), iterations, options)
                             : digitcaps(p.u_v(), p.W_v(), b0_view, p.v_v(), iterations, options);
    INFO(st.message);
    if (refuses_shape(impl, shape)) {
        require_refusal(impl, st);
        return;
    }
    REQUIRE(st.ok());
    require_forward_outputs(p, with_b0, iterations, with_s ? &routing_s : nullptr, nullptr);
}

// digitcaps_backward_with_s by `impl` on `p` from the s in `routing_s`.
inline Status backward_with_s(const std::string &impl, DigitCapsProblem &p, std::vector<float> &routing_s,
                              int iterations, bool with_b0, Device device, bool with_grad_b0) {
    return digitcaps_backward_with_s(p.u_v(), p.W_v(), with_b0 ? p.b0_v() : TensorView{},
                                     p.routing_s_v(routing_s, iterations), p.grad_v_v(), p.grad_u_v(), p.grad_W_v(),
                                     with_grad_b0 ? p.grad_b0_v() : TensorView{}, iterations,
                                     device_options(device, impl));
}

// Training's pair on `p`: digitcaps_with_s by `impl` where it has one, else
// by the device's default (its routing_s kept in `routing_s`), then
// backward_with_s by `impl` from that s; returns the backward's status (the
// forward's must be ok).
inline Status run_training_pair(const std::string &impl, DigitCapsProblem &p, std::vector<float> &routing_s,
                                int iterations, bool with_b0, Device device, bool with_grad_b0) {
    const std::vector<std::string> forwards = implementations("digitcaps_with_s", iterations, device);
    const bool own_forward = std::find(forwards.begin(), forwards.end(), impl) != forwards.end();
    const Status forward = digitcaps_with_s(p.u_v(), p.W_v(), with_b0 ? p.b0_v() : TensorView{}, p.v_v(),
                                            p.routing_s_v(routing_s, iterations), iterations,
                                            device_options(device, own_forward ? impl : ""));
    INFO("the forward: " << forward.message);
    REQUIRE(forward.ok());
    return backward_with_s(impl, p, routing_s, iterations, with_b0, device, with_grad_b0);
}

// digitcaps_backward_with_s by `impl` on one fresh problem (changed by
// `prepare` where given), from its training pair's s (run_training_pair);
// against the reference. A shape the backward refuses is refused before any
// read of s.
inline void check_digitcaps_backward_with_s(const std::string &impl, const DigitCapsShape &shape, int iterations,
                                            bool with_b0, Device device, bool with_grad_b0 = true,
                                            const std::function<void(DigitCapsProblem &)> &prepare = {}) {
    INFO("digitcaps_backward_with_s " << impl << (with_grad_b0 ? "" : ", grad_b0 not asked for"));
    DigitCapsProblem p(shape);
    if (prepare) prepare(p);
    std::vector<float> routing_s = nan_filled(iterations * p.s.v_size());
    const bool refused = refuses_shape(impl, shape);
    const Status st = refused ? backward_with_s(impl, p, routing_s, iterations, with_b0, device, with_grad_b0)
                              : run_training_pair(impl, p, routing_s, iterations, with_b0, device, with_grad_b0);
    INFO(st.message);
    if (refused) {
        require_refusal(impl, st);
        return;
    }
    REQUIRE(st.ok());
    require_layer_gradients(p, with_b0, iterations, gradient_tolerance(iterations), with_grad_b0);
}

// The statuses of a training pair's two calls.
struct PairStatus {
    Status forward, backward;
};

// The training pair that keeps c on `p` by `impl`: digitcaps_with_c into
// `routing_s` and `routing_c` (NaN-filled first, sized here), then
// digitcaps_backward_with_c from them, whatever the forward's status.
inline PairStatus run_training_pair_with_c(const std::string &impl, DigitCapsProblem &p, std::vector<float> &routing_s,
                                           std::vector<float> &routing_c, int iterations, bool with_b0, Device device,
                                           bool with_grad_b0) {
    routing_s = nan_filled(iterations * p.s.v_size());
    routing_c = nan_filled(iterations * p.s.batch * p.s.in_caps * p.s.out_caps);
    const TensorView b0_view = with_b0 ? p.b0_v() : TensorView{};
    const Options options = device_options(device, impl);
    PairStatus st;
    st.forward = digitcaps_with_c(p.u_v(), p.W_v(), b0_view, p.v_v(), p.routing_s_v(routing_s, iterations),
                                  p.routing_c_v(routing_c, iterations), iterations, options);
    st.backward = digitcaps_backward_with_c(
        p.u_v(), p.W_v(), b0_view, p.routing_s_v(routing_s, iterations), p.routing_c_v(routing_c, iterations),
        p.grad_v_v(), p.grad_u_v(), p.grad_W_v(), with_grad_b0 ? p.grad_b0_v() : TensorView{}, iterations, options);
    return st;
}

// The training pair that keeps c by `impl` on one fresh problem (changed by
// `prepare` where given): digitcaps_with_c, its v, routing_s and routing_c
// against the reference, then digitcaps_backward_with_c from its s and c,
// the gradients against the reference. Both refuse a shape beyond `impl`'s
// limits before any device work.
inline void check_digitcaps_with_c(const std::string &impl, const DigitCapsShape &shape, int iterations, bool with_b0,
                                   Device device, bool with_grad_b0 = true,
                                   const std::function<void(DigitCapsProblem &)> &prepare = {}) {
    INFO("digitcaps_with_c, digitcaps_backward_with_c " << impl << (with_grad_b0 ? "" : ", grad_b0 not asked for"));
    DigitCapsProblem p(shape);
    if (prepare) prepare(p);
    std::vector<float> routing_s, routing_c;
    const PairStatus st =
        run_training_pair_with_c(impl, p, routing_s, routing_c, iterations, with_b0, device, with_grad_b0);
    INFO("the forward: " << st.forward.message);
    INFO("the backward: " << st.backward.message);
    if (refuses_shape(impl, shape)) {
        require_refusal(impl, st.forward);
        require_refusal(impl, st.backward);
        return;
    }
    REQUIRE(st.forward.ok());
    REQUIRE(st.backward.ok());
    require_layer_gradients(p, with_b0, iterations, gradient_tolerance(iterations), with_grad_b0);
    // The forward's outputs on the plain problem (a prepared one is the hard
    // inputs', whose forward values their own test checks).
    if (!prepare) require_forward_outputs(p, with_b0, iterations, &routing_s, &routing_c);
}

// Every implementation of route, digitcaps and their backward built for
// `iterations`, on one fresh problem each, against the reference (the
// steps left out where with_steps is false: a test of their own covers them).
inline void check_all(const DigitCapsShape &shape, int iterations, bool with_b0, bool backward = true,
                      Device device = Device::cpu, bool with_steps = true) {
    INFO("seed " << seed() << ", " << name(shape, iterations, with_b0));
    auto rows = [&](const char *op) {
        std::vector<std::string> out;
        for (const auto &impl : implementations(op, iterations, device)) {
            if (with_steps || impl != "steps") out.push_back(impl);
        }
        return out;
    };
    for (const auto &impl : rows("route")) {
        INFO("route " << impl);
        DigitCapsProblem p(shape);
        const Status st =
            route(p.u_hat_v(), with_b0 ? p.b0_v() : TensorView{}, p.v_v(), iterations, device_options(device, impl));
        INFO(st.message);
        REQUIRE(st.ok());
        const auto ref =
            reference::route_f64(p.s.routing(), p.u_hat.data(), with_b0 ? p.b0.data() : nullptr, iterations);
        require_close_conditioned("v", p.v, ref,
                                  nudged_reference(ref,
                                                   [&](int n) {
                                                       return reference::route_f64(
                                                           p.s.routing(), nudged(p.u_hat, 1, n).data(),
                                                           with_b0 ? nudged(p.b0, 2, n).data() : nullptr, iterations);
                                                   }),
                                  1e-4);
    }
    // The layer, and the layer keeping every iteration's s (routing_s checked too).
    for (const bool with_s : {false, true}) {
        for (const auto &impl : rows(with_s ? "digitcaps_with_s" : "digitcaps")) {
            check_digitcaps_forward(impl, with_s, shape, iterations, with_b0, device);
        }
    }
    if (!backward) return;
    for (const auto &impl : rows("route_backward")) {
        check_route_backward(impl, shape, iterations, with_b0, device);
    }
    for (const auto &impl : rows("digitcaps_backward")) {
        check_digitcaps_backward(impl, shape, iterations, with_b0, device);
    }
    for (const auto &impl : rows("digitcaps_backward_with_s")) {
        check_digitcaps_backward_with_s(impl, shape, iterations, with_b0, device);
    }
    for (const auto &impl : rows("digitcaps_backward_with_c")) {
        check_digitcaps_with_c(impl, shape, iterations, with_b0, device);
    }
}

// The gradients on the forward's hard inputs (u_hat and u scaled by 1e-25,
// 1e-6 and 1e15; b0 x 80), by every implementation of route_backward,
// digitcaps_backward, digitcaps_backward_with_s (from its training pair's
// s) and digitcaps_backward_with_c (from its pair's s and c) on `device`. At 1e-25
// the reference's gradients (~1e-44) are beyond float32, so finite and no
// larger than 1e-30 is what is checked; 1e-6 and 1e15 against the reference
// (its conditioned check). Large logits with u_hat x 1e15 are left out:
// there grad_b0 is a difference of terms ~1e5 times its size (a softmax
// saturated but for near ties, measured 7e-4 relative off in float32 at 1
// iteration, where the terms' own rounding allows that), which float32
// cannot resolve.
inline void check_backward_on_hard_inputs(Device device) {
    const DigitCapsShape s{3, 9, 4, 5, 8};
    const std::vector<std::pair<float, float>> cases = {
        {1e-25f, 1.0f}, {1e-25f, 80.0f}, {1e-6f, 1.0f}, {1e-6f, 80.0f}, {1e15f, 1.0f}};
    auto finite_and_tiny = [](const char *what, const std::vector<float> &x) {
        INFO(what);
        for (float y : x) {
            REQUIRE(std::isfinite(y));
            REQUIRE(std::fabs(y) <= 1e-30f);
        }
    };
    for (const auto &scales : cases) {
        // Plain variables, not a structured binding: the lambdas below
        // capture them, which C++17 allows only for variables (clang refuses).
        const float scale = scales.first, logit_scale = scales.second;
        for (int iterations : {1, 3}) {
            INFO("seed " << seed() << ", scale " << scale << ", b0 scale " << logit_scale << ", " << iterations
                         << " iterations");
            auto scaled_u_hat = [&](DigitCapsProblem &p) {
                for (float &x : p.u_hat) x *= scale;
                for (float &x : p.b0) x *= logit_scale;
            };
            auto scaled_u = [&](DigitCapsProblem &p) {
                for (float &x : p.u) x *= scale;
                for (float &x : p.b0) x *= logit_scale;
            };
            for (const auto &impl : implementations("route_backward", iterations, device)) {
                if (scale >= 1e-20f) {
                    check_route_backward(impl, s, iterations, true, device, scaled_u_hat);
                    continue;
                }
                INFO("route_backward " << impl);
                DigitCapsProblem p(s);
                scaled_u_hat(p);
                const Status st = route_backward(p.u_hat_v(), p.b0_v(), p.grad_v_v(), p.grad_u_hat_v(), p.grad_b0_v(),
                                                 iterations, device_options(device, impl));
                INFO(st.message);
                REQUIRE(st.ok());
                finite_and_tiny("grad_u_hat", p.grad_u_hat);
            }
            for (const auto &impl : implementations("digitcaps_backward", iterations, device)) {
                if (scale >= 1e-20f) {
                    check_digitcaps_backward(impl, s, iterations, true, device, scaled_u);
                    continue;
                }
                INFO("digitcaps_backward " << impl);
                DigitCapsProblem p(s);
                scaled_u(p);
                const Status st =
                    digitcaps_backward(p.u_v(), p.W_v(), p.b0_v(), p.grad_v_v(), p.grad_u_v(), p.grad_W_v(),
                                       p.grad_b0_v(), iterations, device_options(device, impl));
                INFO(st.message);
                REQUIRE(st.ok());
                finite_and_tiny("grad_u", p.grad_u);
                finite_and_tiny("grad_W", p.grad_W);
            }
            for (const auto &impl : implementations("digitcaps_backward_with_s", iterations, device)) {
                if (scale >= 1e-20f) {
                    check_digitcaps_backward_with_s(impl, s, iterations, true, device, true, scaled_u);
                    continue;
                }
                INFO("digitcaps_backward_with_s " << impl);
                DigitCapsProblem p(s);
                scaled_u(p);
                std::vector<float> routing_s = nan_filled(iterations * p.s.v_size());
                const Status st = run_training_pair(impl, p, routing_s, iterations, true, device, true);
                INFO(st.message);
                REQUIRE(st.ok());
                finite_and_tiny("grad_u", p.grad_u);
                finite_and_tiny("grad_W", p.grad_W);
            }
            for (const auto &impl : implementations("digitcaps_backward_with_c", iterations, device)) {
                if (scale >= 1e-20f) {
                    check_digitcaps_with_c(impl, s, iterations, true, device, true, scaled_u);
                    continue;
                }
                INFO("digitcaps_with_c, digitcaps_backward_with_c " << impl);
                DigitCapsProblem p(s);
                scaled_u(p);
                std::vector<float> routing_s, routing_c;
                const PairStatus st =
                    run_training_pair_with_c(impl, p, routing_s, routing_c, iterations, true, device, true);
                INFO(st.forward.message);
                REQUIRE(st.forward.ok());
                INFO(st.backward.message);
                REQUIRE(st.backward.ok());
                finite_and_tiny("grad_u", p.grad_u);
                finite_and_tiny("grad_W", p.grad_W);
            }
        }
    }
}

// ---- NaN and +-inf (docs/design.md §1.2): each input of each routing op ----

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();
const float kSpecials[] = {kNaN, kInf, -kInf};

// The hand-written 3xTF32 kernels ("cuda_tensor", reference/cuda/tf32_mma.cuh)
// take a * b as three TF32 products of the operands' big and small parts. An
// infinite operand's small part is inf - inf = NaN (and a finite one's small
// part can have the other sign), so where the formula gives +-inf they may
// give NaN: still non-finite, and no NaN or finite element changes. So may
// the layer backward's "cuda_passes", whose grad_u and grad_W are the
// tensor-core prediction gradients' (reference/cuda/digitcaps_backward_cuda.cu).
// The checks take NaN for an infinity from these kernels, and only from them
// (route_backward's cuda_passes has no tensor-core stage and is not checked
// through this).
inline bool splits_into_tf32(const std::string &implementation) {
    return implementation == "cuda_tensor" || implementation == "cuda_passes";
}

// ref with NaN where it is +-inf and x is NaN, for an implementation that
// splits_into_tf32; ref itself for any other.
inline std::vector<double> as_checked_for(const std::string &implementation, const std::vector<float> &x,
                                          std::vector<double> ref) {
    if (!splits_into_tf32(implementation)) return ref;
    for (size_t n = 0; n < ref.size(); n++) {
        if (std::isinf(ref[n]) && std::isnan(x[n])) ref[n] = std::numeric_limits<double>::quiet_NaN();
    }
    return ref;
}

// Puts `value` at one random element of x.
inline void poison(std::vector<float> &x, float value) {
    std::uniform_int_distribution<size_t> pick(0, x.size() - 1);
    x[pick(rng())] = value;
}

inline int64_t count_nonfinite(const std::vector<double> &v) {
    int64_t n = 0;
    for (double x : v) n += std::isfinite(x) ? 0 : 1;
    return n;
}

// The non-finite pattern (reference::compare: NaN where the reference is
// NaN, the same infinity where it is one) and the finite values, with the
// reference's own sensitivity allowance (require_close_conditioned).
inline void require_routing_result(const char *what, const std::vector<float> &x, const std::vector<double> &ref,
                                   const std::vector<double> &ref_nudged, double tol, double sensitivity,
                                   double scale = 0) {
    INFO(what << ": the reference has " << count_nonfinite(ref) << " non-finite of " << ref.size());
    require_close_conditioned(what, x, ref, ref_nudged, tol, sensitivity, scale);
}

// Whether `impl` refused the shape by design (and did so as it should).
inline bool refused(const std::string &impl, const DigitCapsShape &s, const Status &st) {
    if (!refuses_shape(impl, s)) return false;
    require_refusal(impl, st);
    return true;
}

constexpr DigitCapsShape kNonfiniteShape{3, 7, 5, 4, 6};

// The issue's two cases: a NaN at one element of u_hat (route, 3
// iterations) makes every v of its batch element NaN and leaves the others
// finite; -inf at one element of W (the layer) makes every v NaN (W is
// shared by the batch). By the reference and every implementation.
inline void check_nonfinite_issue_cases(Device device) {
    INFO("seed " << seed());
    const DigitCapsShape s = kNonfiniteShape;
    const int64_t per_batch = s.out_caps * s.out_dim;
    DigitCapsProblem p(s);
    const int64_t b_nan = 1;
    p.u_hat[((b_nan * s.in_caps + 2) * s.out_caps + 1) * s.out_dim + 3] = kNaN;
    auto require_batch_nan = [&](const std::vector<float> &v) {
        for (int64_t n = 0; n < s.v_size(); n++) {
            INFO("v element " << n << " = " << v[n]);
            if (n / per_batch == b_nan) {
                REQUIRE(std::isnan(v[n]));
            } else {
                REQUIRE(std::isfinite(v[n]));
            }
        }
    };
    const auto ref = reference::route_f64(s.routing(), p.u_hat.data(), nullptr, 3);
    require_batch_nan(std::vector<float>(ref.begin(), ref.end()));
    for (const auto &impl : implementations("route", 3, device)) {
        INFO("route " << impl);
        for (float &x : p.v) x = 0.5f;  // not NaN-poisoned here: NaN is what is expected
        const Status st = route(p.u_hat_v(), TensorView{}, p.v_v(), 3, device_options(device, impl));
        INFO(st.message);
        if (refused(impl, s, st)) continue;
        REQUIRE(st.ok());
        require_batch_nan(p.v);
    }
    p.W[5] = -kInf;
    for (const auto &impl : implementations("digitcaps", 3, device)) {
        INFO("digitcaps " << impl);
        for (float &x : p.v) x = 0.5f;
        const Status st = digitcaps(p.u_v(), p.W_v(), TensorView{}, p.v_v(), 3, device_options(device, impl));
        INFO(st.message);
        if (refused(impl, s, st)) continue;
        REQUIRE(st.ok());
        for (float x : p.v) REQUIRE(std::isnan(x));
    }
}

// squash by every implementation on `device`: rows of E=4, random, zero,
// |s| ~ 1e-30, 1e-20, 1e18, 1e30 and 3e38-scale, against the reference.
inline void check_squash_values(Device device) {
    INFO("seed " << seed());
    const int64_t E = 4;
    std::vector<float> s = random_normal(16 * E);
    const float scales[] = {0.0f, 1e-30f, 1e-20f, 1e-3f, 1e3f, 1e18f, 1e30f, 1e38f};
    // The 1e38 row's draws are kept within +-3 so that s itself stays finite
    // (float's largest value is 3.4e38; an unclamped draw beyond 3.4 made the
    // input inf, about once in 400 runs); its |s|^2 still overflows float.
    for (int e = 0; e < E; e++) s[7 * E + e] = std::clamp(s[7 * E + e], -3.0f, 3.0f);
    for (int r = 0; r < 8; r++)
        for (int e = 0; e < E; e++) s[r * E + e] *= scales[r];
    const auto ref = reference::squash_f64(16, E, s.data());
    for (const auto &impl : implementations_for("squash", device)) {
        INFO("squash " << impl);
        std::vector<float> v = nan_filled(s.size());
        const Status st = squash(host_view(s, {2, 8, E}), host_view(v, {2, 8, E}), device_options(device, impl));
        INFO(st.message);
        REQUIRE(st.ok());
        for (size_t n = 0; n < v.size(); n++) {
            INFO("element " << n << ": " << v[n] << " vs " << ref[n]);
            REQUIRE(std::isfinite(v[n]));
            REQUIRE(std::fabs(v[n] - ref[n]) <= 1e-6 + 1e-5 * std::fabs(ref[n]));
        }
        for (int e = 0; e < E; e++) REQUIRE(v[e] == 0.0f);  // s = 0 gives exactly 0
    }
}

// squash with NaN, +inf and -inf in a row, by every implementation on `device`.
inline void check_nonfinite_squash(Device device) {
    INFO("seed " << seed());
    for (const float special : kSpecials) {
        for (const auto &impl : implementations_for("squash", device)) {
            INFO("squash " << impl << ", " << special);
            // Row 1 random with the special value at a random element; row
            // 3 zeros but for it (a NaN there once gave v = 0: the row's
            // largest |s| dropped the NaN and took the zero-row branch).
            std::vector<float> s = random_normal(5 * 7), v = nan_filled(5 * 7);
            std::vector<float> row = random_normal(7);
            poison(row, special);
            std::copy(row.begin(), row.end(), s.begin() + 7);
            std::fill(s.begin() + 21, s.begin() + 28, 0.0f);
            s[21 + 4] = special;
            const Status st = squash(host_view(s, {5, 7}), host_view(v, {5, 7}), device_options(device, impl));
            INFO(st.message);
            REQUIRE(st.ok());
            const auto ref = reference::squash_f64(5, 7, s.data());
            REQUIRE(count_nonfinite(ref) == 14);  // both rows NaN, as |s|^2 is NaN or inf (inf / inf)
            require_matches("v", v, ref, 7);
        }
    }
}

// route and route_backward with NaN, +inf and -inf at one element of each
// input (u_hat, b0, grad_v), by every implementation on `device`.
inline void check_nonfinite_route(Device device, int iterations) {
    const DigitCapsShape s = kNonfiniteShape;
    for (const float special : kSpecials) {
        for (const std::string input : {"u_hat", "b0", "grad_v"}) {
            INFO("seed " << seed() << ", " << iterations << " iterations, " << special << " in " << input);
            DigitCapsProblem base(s);
            poison(input == "u_hat" ? base.u_hat : input == "b0" ? base.b0 : base.grad_v, special);
            if (input != "grad_v") {
                const auto ref = reference::route_f64(s.routing(), base.u_hat.data(), base.b0.data(), iterations);
                const auto ref_n = nudged_reference(ref, [&](int n) {
                    return reference::route_f64(s.routing(), nudged(base.u_hat, 1, n).data(),
                                                nudged(base.b0, 2, n).data(), iterations);
                });
                for (const auto &impl : implementations("route", iterations, device)) {
                    INFO("route " << impl);
                    DigitCapsProblem p = base;
                    const Status st = route(p.u_hat_v(), p.b0_v(), p.v_v(), iterations, device_options(device, impl));
                    INFO(st.message);
                    if (refused(impl, s, st)) continue;
                    REQUIRE(st.ok());
                    require_routing_result("v", p.v, ref, ref_n, 1e-4, 10);
                }
            }
            const std::vector<double> grad_v = to_double(base.grad_v);
            const auto ref = reference::route_backward_f64(s.routing(), base.u_hat.data(), base.b0.data(),
                                                           base.grad_v.data(), iterations);
            const auto ref_n = nudged_reference(ref, [&](int n) {
                return reference::route_backward_f64(s.routing(), nudged(base.u_hat, 1, n).data(),
                                                     nudged(base.b0, 2, n).data(), grad_v.data(), iterations);
            });
            for (const auto &impl : implementations("route_backward", iterations, device)) {
                INFO("route_backward " << impl);
                DigitCapsProblem p = base;
                const Status st = route_backward(p.u_hat_v(), p.b0_v(), p.grad_v_v(), p.grad_u_hat_v(), p.grad_b0_v(),
                                                 iterations, device_options(device, impl));
                INFO(st.message);
                if (refused(impl, s, st)) continue;
                REQUIRE(st.ok());
                const double g_tol = gradient_tolerance(iterations);
                require_routing_result("grad_u_hat", p.grad_u_hat, ref.grad_u_hat, ref_n.grad_u_hat, g_tol,
                                       kGradientSensitivity);
                require_routing_result("grad_b0", p.grad_b0, ref.grad_b0, ref_n.grad_b0, g_tol, kGradientSensitivity,
                                       max_abs(ref.grad_u_hat));
            }
        }
    }
}

// The layer (digitcaps, digitcaps_with_s), its backward and
// digitcaps_backward_with_s with NaN, +inf and -inf at one element of each
// input (u, W, b0, grad_v, routing_s), by every implementation on `device`.
// digitcaps_backward_with_s starts from the reference's s of the inputs
// (poisoned where routing_s is the input), against the reference's
// gradients at that s.
inline void check_nonfinite_layer(Device device, int iterations) {
    const DigitCapsShape s = kNonfiniteShape;
    const double g_tol = gradient_tolerance(iterations);
    auto require_gradients = [&](const std::string &impl, const DigitCapsProblem &p,
                                 const reference::DigitCapsGradients &ref, const reference::DigitCapsGradients &ref_n) {
        require_routing_result("grad_u", p.grad_u, as_checked_for(impl, p.grad_u, ref.grad_u),
                               as_checked_for(impl, p.grad_u, ref_n.grad_u), g_tol, kGradientSensitivity);
        require_routing_result("grad_W", p.grad_W, as_checked_for(impl, p.grad_W, ref.grad_W),
                               as_checked_for(impl, p.grad_W, ref_n.grad_W), g_tol, kGradientSensitivity);
        require_routing_result("grad_b0", p.grad_b0, as_checked_for(impl, p.grad_b0, ref.grad_b0),
                               as_checked_for(impl, p.grad_b0, ref_n.grad_b0), g_tol, kGradientSensitivity,
                               max_abs(ref.grad_u));
    };
    for (const float special : kSpecials) {
        for (const std::string input : {"u", "W", "b0", "grad_v", "routing_s"}) {
            INFO("seed " << seed() << ", " << iterations << " iterations, " << special << " in " << input);
            DigitCapsProblem base(s);
            if (input != "routing_s") {
                poison(input == "u" ? base.u : input == "W" ? base.W : input == "b0" ? base.b0 : base.grad_v, special);
            }
            // The reference `f` at base's inputs nudged (nudged_reference).
            auto at_nudged = [&](const auto &ref, auto f) {
                return nudged_reference(
                    ref, [&](int n) { return f(nudged(base.u, 1, n), nudged(base.W, 2, n), nudged(base.b0, 3, n)); });
            };
            if (input != "grad_v" && input != "routing_s") {
                const auto ref = reference::digitcaps_f64(s, base.u.data(), base.W.data(), base.b0.data(), iterations);
                const auto ref_n = at_nudged(ref, [&](const auto &u, const auto &W, const auto &b0) {
                    return reference::digitcaps_f64(s, u.data(), W.data(), b0.data(), iterations);
                });
                const auto ref_s =
                    reference::digitcaps_routing_s_f64(s, base.u.data(), base.W.data(), base.b0.data(), iterations);
                const auto ref_s_n = at_nudged(ref_s, [&](const auto &u, const auto &W, const auto &b0) {
                    return reference::digitcaps_routing_s_f64(s, u.data(), W.data(), b0.data(), iterations);
                });
                for (const bool with_s : {false, true}) {
                    for (const auto &impl :
                         implementations(with_s ? "digitcaps_with_s" : "digitcaps", iterations, device)) {
                        INFO((with_s ? "digitcaps_with_s " : "digitcaps ") << impl);
                        DigitCapsProblem p = base;
                        std::vector<float> routing_s = nan_filled(iterations * s.v_size());
                        const Options o = device_options(device, impl);
                        const Status st = with_s ? digitcaps_with_s(p.u_v(), p.W_v(), p.b0_v(), p.v_v(),
                                                                    p.routing_s_v(routing_s, iterations), iterations, o)
                                                 : digitcaps(p.u_v(), p.W_v(), p.b0_v(), p.v_v(), iterations, o);
                        INFO(st.message);
                        if (refused(impl, s, st)) continue;
                        REQUIRE(st.ok());
                        require_routing_result("v", p.v, as_checked_for(impl, p.v, ref),
                                               as_checked_for(impl, p.v, ref_n), 1e-4, 10);
                        if (with_s) {
                            require_routing_result("routing_s", routing_s, as_checked_for(impl, routing_s, ref_s),
                                                   as_checked_for(impl, routing_s, ref_s_n), 1e-4, 10);
                        }
                    }
                }
            }
            const std::vector<double> grad_v = to_double(base.grad_v);
            if (input != "routing_s") {
                const auto ref = reference::digitcaps_backward_f64(s, base.u.data(), base.W.data(), base.b0.data(),
                                                                   base.grad_v.data(), iterations);
                const auto ref_n = at_nudged(ref, [&](const auto &u, const auto &W, const auto &b0) {
                    return reference::digitcaps_backward_f64(s, u.data(), W.data(), b0.data(), grad_v.data(),
                                                             iterations);
                });
                for (const auto &impl : implementations("digitcaps_backward", iterations, device)) {
                    INFO("digitcaps_backward " << impl);
                    DigitCapsProblem p = base;
                    const Status st =
                        digitcaps_backward(p.u_v(), p.W_v(), p.b0_v(), p.grad_v_v(), p.grad_u_v(), p.grad_W_v(),
                                           p.grad_b0_v(), iterations, device_options(device, impl));
                    INFO(st.message);
                    if (refused(impl, s, st)) continue;
                    REQUIRE(st.ok());
                    require_gradients(impl, p, ref, ref_n);
                }
            }
            const auto s_ref =
                reference::digitcaps_routing_s_f64(s, base.u.data(), base.W.data(), base.b0.data(), iterations);
            std::vector<float> routing_s(s_ref.begin(), s_ref.end());
            if (input == "routing_s") poison(routing_s, special);
            const auto ref = reference::digitcaps_backward_given_s_f64(
                s, base.u.data(), base.W.data(), base.b0.data(), routing_s.data(), base.grad_v.data(), iterations);
            // (the reference given s takes float inputs: the nudged ones rounded to float)
            const auto ref_n = at_nudged(ref, [&](const auto &u, const auto &W, const auto &b0) {
                const std::vector<float> u_f(u.begin(), u.end()), W_f(W.begin(), W.end()), b0_f(b0.begin(), b0.end());
                return reference::digitcaps_backward_given_s_f64(s, u_f.data(), W_f.data(), b0_f.data(),
                                                                 routing_s.data(), base.grad_v.data(), iterations);
            });
            for (const auto &impl : implementations("digitcaps_backward_with_s", iterations, device)) {
                INFO("digitcaps_backward_with_s " << impl);
                DigitCapsProblem p = base;
                std::vector<float> given = routing_s;
                const Status st = backward_with_s(impl, p, given, iterations, true, device, true);
                INFO(st.message);
                if (refused(impl, s, st)) continue;
                REQUIRE(st.ok());
                require_gradients(impl, p, ref, ref_n);
            }
        }
    }
}

}  // namespace halcaps::testing

// `halcaps digitcaps` and `halcaps route`: the DigitCaps layer (prediction +
// routing in one pipeline) and routing alone, forward and with --backward
// the gradients, on random inputs or .npy files. Every implementation run is
// checked against the float64 reference, with outputs poisoned with NaN
// first, and only then timed, on the CPU or a CUDA device.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/npy.h"
#include "compare.h"
#include "digitcaps_reference.h"

namespace halcaps::cli {

namespace {

struct RoutingArgs {
    bool layer = true;  // digitcaps (u, W) or route (u_hat)
    std::string device = "cpu";
    reference::DigitCapsShape shape{128, 1152, 8, 10, 16};  // MNIST DigitCaps
    int iterations = 3;
    bool with_b0 = false;
    std::string implementation;  // empty: the default; "all": every one
    bool backward = false;
    std::string u_path, W_path, u_hat_path, b0_path, out_path;
    int warmup = 2, repeats = 10;
    uint64_t seed = 0;
};

void print_row(const char *op, const std::string &implementation, const reference::Comparison &check,
               const Timing &t, double fastest_us) {
    std::printf("%-9s %-14s %-6s %10.1f %10.1f %8.2fx   %s\n", op, implementation.c_str(),
                check.passed ? "ok" : "WRONG", t.median_us, t.min_us, t.median_us / fastest_us,
                check.summary().c_str());
}

// Routing's outputs go through softmax and squash of sums over I·E terms;
// float32 lands near 1e-6 relative (DESIGN.md §2).
reference::Tolerance routing_tolerance() { return {1e-5, 1e-4}; }

void run(RoutingArgs &a) {
    const Device device = parse_device(a.device);
    std::optional<npy::Array> u_file, W_file, u_hat_file, b0_file;
    auto &s = a.shape;
    if (a.layer && !a.u_path.empty()) {
        u_file = load_npy(a.u_path, 3, "[batch, in_caps, in_dim]");
        W_file = load_npy(a.W_path, 4, "[in_caps, out_caps, out_dim, in_dim]");
        s = {u_file->shape[0], u_file->shape[1], u_file->shape[2], W_file->shape[1], W_file->shape[2]};
    }
    if (!a.layer && !a.u_hat_path.empty()) {
        u_hat_file = load_npy(a.u_hat_path, 4, "[batch, in_caps, out_caps, out_dim]");
        s = {u_hat_file->shape[0], u_hat_file->shape[1], 1, u_hat_file->shape[2], u_hat_file->shape[3]};
    }
    if (!a.b0_path.empty()) {
        b0_file = load_npy(a.b0_path, 2, "[in_caps, out_caps]");
        a.with_b0 = true;
    }
    for (int64_t extent : {s.batch, s.in_caps, s.in_dim, s.out_caps, s.out_dim}) {
        if (extent <= 0) throw UsageError{"every extent must be positive"};
    }
    if (a.seed == 0) a.seed = std::random_device{}() | 1;
    std::mt19937_64 rng(a.seed);
    const char *op = a.layer ? "digitcaps" : "route";
    std::printf("halcaps %s: device %s, B=%lld I=%lld%s J=%lld E=%lld, %d iterations, b0 %s, seed %llu\n", op,
                device == Device::cuda ? cuda_device_name().c_str() : "cpu",
                (long long)s.batch, (long long)s.in_caps,
                a.layer ? (" K=" + std::to_string(s.in_dim)).c_str() : "", (long long)s.out_caps,
                (long long)s.out_dim, a.iterations, a.with_b0 ? "given" : "zeros", (unsigned long long)a.seed);

    Tensor u({s.batch, s.in_caps, s.in_dim}, device), W({s.in_caps, s.out_caps, s.out_dim, s.in_dim}, device);
    Tensor u_hat({s.batch, s.in_caps, s.out_caps, s.out_dim}, device), b0({s.in_caps, s.out_caps}, device);
    Tensor v({s.batch, s.out_caps, s.out_dim}, device), grad_v({s.batch, s.out_caps, s.out_dim}, device);
    if (a.layer) {
        if (u_file) {
            u.host() = u_file->data;
            W.host() = W_file->data;
        } else {
            u.fill_normal(rng);
            W.fill_normal(rng);
        }
    } else if (u_hat_file) {
        u_hat.host() = u_hat_file->data;
    } else {
        u_hat.fill_normal(rng);
    }
    if (b0_file) {
        if (b0_file->shape != b0.shape()) {
            throw UsageError{a.b0_path + ": expected shape " + shape_string(b0.shape()) + ", got " +
                             shape_string(b0_file->shape)};
        }
        b0.host() = b0_file->data;
    } else {
        b0.fill_normal(rng);
    }
    grad_v.fill_normal(rng);
    for (Tensor *t : {&u, &W, &u_hat, &b0, &grad_v}) t->upload();
    const TensorView b0_view = a.with_b0 ? b0.view() : TensorView{};
    const float *b0_ptr = a.with_b0 ? b0.host().data() : nullptr;

    const std::vector<double> v_ref =
        a.layer ? reference::digitcaps_f64(s, u.host().data(), W.host().data(), b0_ptr, a.iterations)
                : reference::route_f64(s.routing(), u_hat.host().data(), b0_ptr, a.iterations);
    std::printf("%-9s %-14s %-6s %10s %10s %9s   %s\n", "op", "implementation", "check", "median_us", "min_us",
                "vs first", "error vs float64 reference");
    int failures = 0;
    double first_us = 0;
    bool saved = false;
    for (const std::string &name : implementations_to_run(op, a.implementation, device, a.iterations)) {
        Options options;
        options.device = device;
        options.implementation = name;
        auto call = [&] {
            return a.layer ? digitcaps(u.view(), W.view(), b0_view, v.view(), a.iterations, options)
                           : route(u_hat.view(), b0_view, v.view(), a.iterations, options);
        };
        v.poison();
        check(call());
        v.download();
        const auto result = reference::compare(v.host().data(), v_ref, routing_tolerance());
        failures += !result.passed;
        const Timing t = time_calls(device, a.warmup, a.repeats, [&] { check(call()); });
        if (first_us == 0) first_us = t.median_us;
        print_row("forward", row_label(name), result, t, first_us);
        if (!a.out_path.empty() && !saved) {
            std::string error;
            if (!npy::write_float32(a.out_path, v.shape(), v.host().data(), &error)) throw UsageError{error};
            saved = true;
        }
    }
    if (a.backward) {
        const std::string bop = std::string(op) + "_backward";
        Tensor grad_u(u.shape(), device), grad_W(W.shape(), device), grad_u_hat(u_hat.shape(), device);
        Tensor grad_b0(b0.shape(), device);
        std::vector<double> ref_a, ref_b, ref_b0;
        if (a.layer) {
            auto r = reference::digitcaps_backward_f64(s, u.host().data(), W.host().data(), b0_ptr,
                                                       grad_v.host().data(), a.iterations);
            ref_a = std::move(r.grad_u), ref_b = std::move(r.grad_W), ref_b0 = std::move(r.grad_b0);
        } else {
            auto r = reference::route_backward_f64(s.routing(), u_hat.host().data(), b0_ptr, grad_v.host().data(),
                                                   a.iterations);
            ref_a = std::move(r.grad_u_hat), ref_b0 = std::move(r.grad_b0);
        }
        first_us = 0;
        for (const std::string &name : implementations_to_run(bop, a.implementation, device, a.iterations)) {
            Options options;
            options.device = device;
            options.implementation = name;
            auto call = [&] {
                return a.layer ? digitcaps_backward(u.view(), W.view(), b0_view, grad_v.view(), grad_u.view(),
                                                    grad_W.view(), grad_b0.view(), a.iterations, options)
                               : route_backward(u_hat.view(), b0_view, grad_v.view(), grad_u_hat.view(),
                                                grad_b0.view(), a.iterations, options);
            };
            grad_u.poison(), grad_W.poison(), grad_u_hat.poison(), grad_b0.poison();
            check(call());
            for (Tensor *t : {&grad_u, &grad_W, &grad_u_hat, &grad_b0}) t->download();
            // Gradients are sums over the batch and the iterations of O(1)
            // terms; compared relative to their own scale.
            const reference::Tolerance tol{1e-4, 1e-3};
            auto first = reference::compare((a.layer ? grad_u : grad_u_hat).host().data(), ref_a, tol);
            auto b0_check = reference::compare(grad_b0.host().data(), ref_b0, tol);
            auto worst = first.passed ? b0_check : first;
            if (a.layer) {
                auto w_check = reference::compare(grad_W.host().data(), ref_b, tol);
                if (!w_check.passed && worst.passed) worst = w_check;
            }
            failures += !worst.passed;
            const Timing t = time_calls(device, a.warmup, a.repeats, [&] { check(call()); });
            if (first_us == 0) first_us = t.median_us;
            print_row("backward", row_label(name), worst, t, first_us);
        }
    }
    if (failures) throw UsageError{std::to_string(failures) + " check(s) failed"};
}

void add_common_options(CLI::App *cmd, RoutingArgs &a) {
    cmd->add_option("--device", a.device, "cpu, cuda, opencl, or auto (cuda when a CUDA device is present)")
        ->check(CLI::IsMember({"cpu", "cuda", "opencl", "auto"}))
        ->capture_default_str();
    cmd->add_option("--batch,-B", a.shape.batch, "batch size B")->capture_default_str();
    cmd->add_option("--in-caps,-I", a.shape.in_caps, "input capsules I")->capture_default_str();
    cmd->add_option("--out-caps,-J", a.shape.out_caps, "output capsules J")->capture_default_str();
    cmd->add_option("--out-dim,-E", a.shape.out_dim, "output capsule dimension E")->capture_default_str();
    cmd->add_option("--iterations,-r", a.iterations, "routing iterations (kernels are built for 1, 3 and 5)")
        ->capture_default_str();
    cmd->add_flag("--b0", a.with_b0, "pass random initial logits b0 [I, J] (default: none, i.e. zeros)");
    cmd->add_option("--b0-file", a.b0_path, "read b0 [I, J] from this .npy file")->check(CLI::ExistingFile);
    cmd->add_option("--schedule", a.implementation,
                    "implementation to run (see `halcaps info`); default: the library's default for the op, the shape "
                    "and the device; 'all': every one "
                    "built for the device and the iteration count");
    cmd->add_flag("--backward", a.backward, "also run the gradients from a random grad_v");
    cmd->add_option("--out", a.out_path, "write v [B, J, E] to this .npy file");
    cmd->add_option("--warmup", a.warmup, "untimed calls before timing")->check(CLI::Range(0, 100000))
        ->capture_default_str();
    cmd->add_option("--repeats", a.repeats, "timed calls; the median is reported")->check(CLI::Range(1, 100000))
        ->capture_default_str();
    cmd->add_option("--seed", a.seed, "random seed for the inputs (0: draw one and print it)")->capture_default_str();
}

}  // namespace

void add_digitcaps_commands(CLI::App &app) {
    auto layer = std::make_shared<RoutingArgs>();
    CLI::App *cmd = app.add_subcommand(
        "digitcaps", "The DigitCaps layer v = route(W u, b0) (on the CPU in one pipeline, u_hat never stored), "
                     "checks every result against the float64 reference, then times it.");
    add_common_options(cmd, *layer);
    cmd->add_option("--in-dim,-K", layer->shape.in_dim, "input capsule dimension K")->capture_default_str();
    auto *u_in = cmd->add_option("--u", layer->u_path, "read u [B, I, K] from this .npy file")->check(CLI::ExistingFile);
    auto *W_in = cmd->add_option("--W", layer->W_path, "read W [I, J, E, K] from this .npy file")->check(CLI::ExistingFile);
    u_in->needs(W_in);
    W_in->needs(u_in);
    cmd->callback([layer] { run(*layer); });

    auto routing = std::make_shared<RoutingArgs>();
    routing->layer = false;
    CLI::App *route_cmd = app.add_subcommand(
        "route", "Dynamic routing v = route(u_hat, b0); checks every result against the float64 "
                 "reference, then times it.");
    add_common_options(route_cmd, *routing);
    route_cmd->add_option("--u-hat", routing->u_hat_path, "read u_hat [B, I, J, E] from this .npy file")
        ->check(CLI::ExistingFile);
    route_cmd->callback([routing] { run(*routing); });
}

}  // namespace halcaps::cli

// `halcaps digitcaps` and `halcaps route`: the DigitCaps layer (prediction +
// routing in one pipeline) and routing alone, forward and with --backward
// the gradients, on random inputs or .npy files. Every implementation run is
// checked against the float64 reference, with outputs poisoned with NaN
// first, and only then timed, on the CPU or a CUDA device. The library sees
// the arguments first: the reference runs only on arguments it accepted.
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
    std::string u_path, W_path, u_hat_path, b0_path, grad_v_path;                   // inputs
    std::string out_path, grad_u_path, grad_W_path, grad_u_hat_path, grad_b0_path;  // outputs
    std::string save_inputs_prefix;
    int warmup = 2, repeats = 10;
    uint64_t seed = 0;
};

void print_row(const char *op, const std::string &implementation, const reference::Comparison &check, const Timing &t,
               double fastest_us) {
    std::printf("%-9s %-14s %-6s %10.1f %10.1f %8.2fx   %s\n", op, implementation.c_str(),
                check.passed ? "ok" : "WRONG", t.median_us, t.min_us, t.median_us / fastest_us,
                check.summary().c_str());
}

// Routing's outputs go through softmax and squash of sums over I·E terms;
// float32 lands near 1e-6 relative (docs/design.md §2).
reference::Tolerance routing_tolerance() { return {1e-5, 1e-4}; }

void run(RoutingArgs &a) {
    const Device device = parse_device(a.device);
    std::optional<NpyInput> u_file, W_file, u_hat_file, b0_file, grad_v_file;
    auto &s = a.shape;
    if (a.layer && !a.u_path.empty()) {
        // B, I and K from u; J and E from W, whose I and K must agree with u's.
        u_file = load_npy_input("--u", a.u_path, {"batch", "in_caps", "in_dim"});
        W_file = load_npy_input("--W", a.W_path, {"in_caps", "out_caps", "out_dim", "in_dim"});
        require_same_extent(*W_file, 0, *u_file, 1, "in_caps");
        require_same_extent(*W_file, 3, *u_file, 2, "in_dim");
        s = {u_file->extent(0), u_file->extent(1), u_file->extent(2), W_file->extent(1), W_file->extent(2)};
    }
    if (!a.layer && !a.u_hat_path.empty()) {
        u_hat_file = load_npy_input("--u-hat", a.u_hat_path, {"batch", "in_caps", "out_caps", "out_dim"});
        s = {u_hat_file->extent(0), u_hat_file->extent(1), 1, u_hat_file->extent(2), u_hat_file->extent(3)};
    }
    const std::pair<int64_t, const char *> extents[] = {{s.batch, "--batch"},
                                                        {s.in_caps, "--in-caps"},
                                                        {s.in_dim, "--in-dim"},
                                                        {s.out_caps, "--out-caps"},
                                                        {s.out_dim, "--out-dim"}};
    for (const auto &[extent, flag] : extents) {
        if (extent <= 0)
            throw UsageError{std::string(flag) + " is " + std::to_string(extent) + "; it must be positive"};
    }
    if (!a.b0_path.empty()) {
        b0_file = load_npy_input("--b0-file", a.b0_path, {"in_caps", "out_caps"});
        a.with_b0 = true;
    }
    if (!a.grad_v_path.empty())
        grad_v_file = load_npy_input("--grad-v", a.grad_v_path, {"batch", "out_caps", "out_dim"});

    // Only the tensors this op uses; every size is checked before the first is allocated.
    const std::vector<int64_t> u_shape{s.batch, s.in_caps, s.in_dim},
        W_shape{s.in_caps, s.out_caps, s.out_dim, s.in_dim}, u_hat_shape{s.batch, s.in_caps, s.out_caps, s.out_dim},
        b0_shape{s.in_caps, s.out_caps}, v_shape{s.batch, s.out_caps, s.out_dim};
    const char *u_what = "u [batch, in_caps, in_dim]", *W_what = "W [in_caps, out_caps, out_dim, in_dim]",
               *u_hat_what = "u_hat [batch, in_caps, out_caps, out_dim]";
    if (a.layer) {
        checked_element_count(u_what, u_shape);
        checked_element_count(W_what, W_shape);
    } else {
        checked_element_count(u_hat_what, u_hat_shape);
    }
    checked_element_count("b0 [in_caps, out_caps]", b0_shape);
    checked_element_count("v [batch, out_caps, out_dim]", v_shape);

    if (a.seed == 0) a.seed = std::random_device{}() | 1;
    std::mt19937_64 rng(a.seed);
    const char *op = a.layer ? "digitcaps" : "route";
    std::printf("halcaps %s: device %s, B=%lld I=%lld%s J=%lld E=%lld, %d iterations, b0 %s, seed %llu\n", op,
                device == Device::cuda ? cuda_device_name().c_str() : "cpu", (long long)s.batch, (long long)s.in_caps,
                a.layer ? (" K=" + std::to_string(s.in_dim)).c_str() : "", (long long)s.out_caps, (long long)s.out_dim,
                a.iterations, a.with_b0 ? "given" : "zeros", (unsigned long long)a.seed);

    std::unique_ptr<Tensor> u, W, u_hat;
    if (a.layer) {
        u = std::make_unique<Tensor>(u_shape, device, u_what);
        W = std::make_unique<Tensor>(W_shape, device, W_what);
        if (u_file) {
            u->assign(u_file->array, u_file->source());
            W->assign(W_file->array, W_file->source());
        } else {
            u->fill_normal(rng);
            W->fill_normal(rng);
        }
    } else {
        u_hat = std::make_unique<Tensor>(u_hat_shape, device, u_hat_what);
        if (u_hat_file) {
            u_hat->assign(u_hat_file->array, u_hat_file->source());
        } else {
            u_hat->fill_normal(rng);
        }
    }
    Tensor b0(b0_shape, device, "b0 [in_caps, out_caps]"), v(v_shape, device, "v [batch, out_caps, out_dim]");
    Tensor grad_v(v_shape, device, "grad_v [batch, out_caps, out_dim]");
    if (b0_file) {
        b0.assign(b0_file->array, b0_file->source());
    } else {
        b0.fill_normal(rng);
    }
    if (grad_v_file) {
        grad_v.assign(grad_v_file->array, grad_v_file->source());
    } else {
        grad_v.fill_normal(rng);
    }
    for (Tensor *t : {u.get(), W.get(), u_hat.get(), &b0, &grad_v}) {
        if (t != nullptr) t->upload();
    }
    if (!a.save_inputs_prefix.empty()) {
        if (a.layer) {
            save_npy(a.save_inputs_prefix + "u.npy", *u);
            save_npy(a.save_inputs_prefix + "W.npy", *W);
        } else {
            save_npy(a.save_inputs_prefix + "u_hat.npy", *u_hat);
        }
        if (a.with_b0) save_npy(a.save_inputs_prefix + "b0.npy", b0);
        if (a.backward) save_npy(a.save_inputs_prefix + "grad_v.npy", grad_v);
    }
    const TensorView b0_view = a.with_b0 ? b0.view() : TensorView{};
    const float *b0_ptr = a.with_b0 ? b0.host().data() : nullptr;

    std::printf("%-9s %-14s %-6s %10s %10s %9s   %s\n", "op", "implementation", "check", "median_us", "min_us",
                "vs first", "error vs float64 reference");
    int failures = 0;
    double first_us = 0;
    bool saved = false;
    // The float64 reference runs once the library has accepted the arguments
    // (a refused iteration count never reaches it).
    std::vector<double> v_ref;
    for (const std::string &name : implementations_to_run(op, a.implementation, device, a.iterations)) {
        Options options;
        options.device = device;
        options.implementation = name;
        auto call = [&] {
            return a.layer ? digitcaps(u->view(), W->view(), b0_view, v.view(), a.iterations, options)
                           : route(u_hat->view(), b0_view, v.view(), a.iterations, options);
        };
        v.poison();
        check_routing(call(), a.iterations);
        v.download();
        if (v_ref.empty()) {
            v_ref = a.layer ? reference::digitcaps_f64(s, u->host().data(), W->host().data(), b0_ptr, a.iterations)
                            : reference::route_f64(s.routing(), u_hat->host().data(), b0_ptr, a.iterations);
        }
        const auto result = reference::compare(v.host().data(), v_ref, routing_tolerance());
        failures += !result.passed;
        const Timing t = time_calls(device, a.warmup, a.repeats, [&] { check(call()); });
        if (first_us == 0) first_us = t.median_us;
        print_row("forward", row_label(name), result, t, first_us);
        if (!a.out_path.empty() && !saved) {
            save_npy(a.out_path, v);
            saved = true;
        }
    }
    if (a.backward) {
        const std::string bop = std::string(op) + "_backward";
        std::unique_ptr<Tensor> grad_u, grad_W, grad_u_hat;
        if (a.layer) {
            grad_u = std::make_unique<Tensor>(u_shape, device, "grad_u [batch, in_caps, in_dim]");
            grad_W = std::make_unique<Tensor>(W_shape, device, "grad_W [in_caps, out_caps, out_dim, in_dim]");
        } else {
            grad_u_hat =
                std::make_unique<Tensor>(u_hat_shape, device, "grad_u_hat [batch, in_caps, out_caps, out_dim]");
        }
        Tensor grad_b0(b0_shape, device, "grad_b0 [in_caps, out_caps]");
        std::vector<double> ref_a, ref_W, ref_b0;  // once the library has accepted the arguments
        first_us = 0;
        bool saved_grads = false;
        for (const std::string &name : implementations_to_run(bop, a.implementation, device, a.iterations)) {
            Options options;
            options.device = device;
            options.implementation = name;
            auto call = [&] {
                return a.layer ? digitcaps_backward(u->view(), W->view(), b0_view, grad_v.view(), grad_u->view(),
                                                    grad_W->view(), grad_b0.view(), a.iterations, options)
                               : route_backward(u_hat->view(), b0_view, grad_v.view(), grad_u_hat->view(),
                                                grad_b0.view(), a.iterations, options);
            };
            for (Tensor *t : {grad_u.get(), grad_W.get(), grad_u_hat.get(), &grad_b0}) {
                if (t != nullptr) t->poison();
            }
            check_routing(call(), a.iterations);
            for (Tensor *t : {grad_u.get(), grad_W.get(), grad_u_hat.get(), &grad_b0}) {
                if (t != nullptr) t->download();
            }
            if (ref_a.empty()) {
                if (a.layer) {
                    auto r = reference::digitcaps_backward_f64(s, u->host().data(), W->host().data(), b0_ptr,
                                                               grad_v.host().data(), a.iterations);
                    ref_a = std::move(r.grad_u), ref_W = std::move(r.grad_W), ref_b0 = std::move(r.grad_b0);
                } else {
                    auto r = reference::route_backward_f64(s.routing(), u_hat->host().data(), b0_ptr,
                                                           grad_v.host().data(), a.iterations);
                    ref_a = std::move(r.grad_u_hat), ref_b0 = std::move(r.grad_b0);
                }
            }
            // Gradients are sums over the batch and the iterations of O(1)
            // terms; compared relative to their own scale.
            const reference::Tolerance tol{1e-4, 1e-3};
            auto first = reference::compare((a.layer ? *grad_u : *grad_u_hat).host().data(), ref_a, tol);
            auto b0_check = reference::compare(grad_b0.host().data(), ref_b0, tol);
            auto worst = first.passed ? b0_check : first;
            if (a.layer) {
                auto w_check = reference::compare(grad_W->host().data(), ref_W, tol);
                if (!w_check.passed && worst.passed) worst = w_check;
            }
            failures += !worst.passed;
            const Timing t = time_calls(device, a.warmup, a.repeats, [&] { check(call()); });
            if (first_us == 0) first_us = t.median_us;
            print_row("backward", row_label(name), worst, t, first_us);
            if (!saved_grads) {
                if (!a.grad_u_path.empty()) save_npy(a.grad_u_path, *grad_u);
                if (!a.grad_W_path.empty()) save_npy(a.grad_W_path, *grad_W);
                if (!a.grad_u_hat_path.empty()) save_npy(a.grad_u_hat_path, *grad_u_hat);
                if (!a.grad_b0_path.empty()) save_npy(a.grad_b0_path, grad_b0);
                saved_grads = true;
            }
        }
    }
    if (failures) throw UsageError{std::to_string(failures) + " check(s) failed"};
}

// The options both commands take; returns the shape flags (which a file
// input excludes: its shape is the file's) and the --backward flag.
struct CommonOptions {
    std::vector<CLI::Option *> shape_flags;
    CLI::Option *backward = nullptr;
};
CommonOptions add_common_options(CLI::App *cmd, RoutingArgs &a) {
    CommonOptions o;
    cmd->add_option("--device", a.device, "cpu, cuda, opencl, or auto (cuda when a CUDA device is present)")
        ->check(CLI::IsMember({"cpu", "cuda", "opencl", "auto"}))
        ->capture_default_str();
    o.shape_flags.push_back(cmd->add_option("--batch,-B", a.shape.batch, "batch size B")->capture_default_str());
    o.shape_flags.push_back(
        cmd->add_option("--in-caps,-I", a.shape.in_caps, "input capsules I")->capture_default_str());
    o.shape_flags.push_back(
        cmd->add_option("--out-caps,-J", a.shape.out_caps, "output capsules J")->capture_default_str());
    o.shape_flags.push_back(
        cmd->add_option("--out-dim,-E", a.shape.out_dim, "output capsule dimension E")->capture_default_str());
    cmd->add_option("--iterations,-r", a.iterations,
                    "routing iterations, 1 to 32 (every op's default and 'steps' take any; `halcaps info` lists "
                    "the counts each other implementation runs)")
        ->capture_default_str();
    auto *random_b0 =
        cmd->add_flag("--b0", a.with_b0, "pass random initial logits b0 [I, J] (default: none, i.e. zeros)");
    cmd->add_option("--b0-file", a.b0_path, "read b0 [I, J] from this .npy file")
        ->check(CLI::ExistingFile)
        ->excludes(random_b0);
    cmd->add_option("--schedule", a.implementation,
                    "implementation to run (see `halcaps info`); default: the library's default for the op, the shape "
                    "and the device; 'all': every one "
                    "built for the device and the iteration count");
    o.backward = cmd->add_flag("--backward", a.backward, "also run the gradients from grad_v (random unless --grad-v)");
    // The gradients' files need --backward (an error without it, rather than a file silently not read or written).
    cmd->add_option("--grad-v", a.grad_v_path, "read grad_v = dL/dv [B, J, E] from this .npy file (needs --backward)")
        ->check(CLI::ExistingFile)
        ->needs(o.backward);
    cmd->add_option("--out", a.out_path, "write v [B, J, E] to this .npy file");
    cmd->add_option("--out-grad-b0", a.grad_b0_path, "write grad_b0 [I, J] to this .npy file (needs --backward)")
        ->needs(o.backward);
    cmd->add_option("--save-inputs", a.save_inputs_prefix,
                    "write the inputs used to PREFIX<name>.npy (u and W, or u_hat; b0 when given; grad_v with "
                    "--backward), to rerun on the same data");
    cmd->add_option("--warmup", a.warmup, "untimed calls before timing")
        ->check(CLI::Range(0, 100000))
        ->capture_default_str();
    cmd->add_option("--repeats", a.repeats, "timed calls; the median is reported")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    cmd->add_option("--seed", a.seed, "random seed for the inputs (0: draw one and print it)")->capture_default_str();
    return o;
}

}  // namespace

void add_digitcaps_commands(CLI::App &app) {
    auto layer = std::make_shared<RoutingArgs>();
    CLI::App *cmd =
        app.add_subcommand("digitcaps",
                           "The DigitCaps layer v = route(W u, b0) (on the CPU in one pipeline, u_hat never stored), "
                           "checks every result against the float64 reference, then times it.");
    CommonOptions layer_options = add_common_options(cmd, *layer);
    layer_options.shape_flags.push_back(
        cmd->add_option("--in-dim,-K", layer->shape.in_dim, "input capsule dimension K")->capture_default_str());
    auto *u_in =
        cmd->add_option("--u", layer->u_path, "read u [B, I, K] from this .npy file")->check(CLI::ExistingFile);
    auto *W_in =
        cmd->add_option("--W", layer->W_path, "read W [I, J, E, K] from this .npy file")->check(CLI::ExistingFile);
    u_in->needs(W_in);
    W_in->needs(u_in);
    for (CLI::Option *shape_flag : layer_options.shape_flags) u_in->excludes(shape_flag);
    cmd->add_option("--out-grad-u", layer->grad_u_path, "write grad_u [B, I, K] to this .npy file (needs --backward)")
        ->needs(layer_options.backward);
    cmd->add_option("--out-grad-W", layer->grad_W_path,
                    "write grad_W [I, J, E, K] to this .npy file (needs --backward)")
        ->needs(layer_options.backward);
    cmd->callback([layer] { run(*layer); });

    auto routing = std::make_shared<RoutingArgs>();
    routing->layer = false;
    CLI::App *route_cmd =
        app.add_subcommand("route",
                           "Dynamic routing v = route(u_hat, b0); checks every result against the float64 "
                           "reference, then times it.");
    CommonOptions route_options = add_common_options(route_cmd, *routing);
    auto *u_hat_in =
        route_cmd->add_option("--u-hat", routing->u_hat_path, "read u_hat [B, I, J, E] from this .npy file")
            ->check(CLI::ExistingFile);
    for (CLI::Option *shape_flag : route_options.shape_flags) u_hat_in->excludes(shape_flag);
    route_cmd
        ->add_option("--out-grad-u-hat", routing->grad_u_hat_path,
                     "write grad_u_hat [B, I, J, E] to this .npy file (needs --backward)")
        ->needs(route_options.backward);
    route_cmd->callback([routing] { run(*routing); });
}

}  // namespace halcaps::cli

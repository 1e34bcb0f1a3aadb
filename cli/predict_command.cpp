// `halcaps predict`: capsule prediction (and with --backward its gradients)
// on random inputs or .npy files, on the CPU or a CUDA device. Every
// implementation run is checked against the float64 reference, with outputs
// poisoned with NaN first, and only then timed. The library sees the
// arguments first: the reference runs only on arguments it accepted.
#include <cstdio>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/npy.h"
#include "compare.h"
#include "predict_reference.h"

namespace halcaps::cli {

namespace {

struct PredictArgs {
    reference::PredictShape shape{128, 1152, 8, 10, 16};  // MNIST CapsNet
    std::string device = "auto";
    std::string implementation;  // empty: the device's default; "all": every one
    bool backward = false;
    std::string u_path, W_path, g_path;
    std::string u_hat_path, grad_u_path, grad_W_path;
    std::string save_inputs_prefix;
    int warmup = 3, repeats = 20;
    uint64_t seed = 0;  // 0: draw one
};

// One row of the results table.
void print_row(const char *op, const std::string &implementation, const reference::Comparison *check, const Timing &t,
               double bytes_floor, double flops, double copy_gbs) {
    const double gbs = bytes_floor / (t.median_us * 1e3);
    std::printf("%-9s %-16s %-6s %10.1f %10.1f %9.1f %7.1f%% %9.1f   %s\n", op, implementation.c_str(),
                check == nullptr ? "-" : (check->passed ? "ok" : "WRONG"), t.median_us, t.min_us, gbs,
                100.0 * gbs / copy_gbs, flops / (t.median_us * 1e3), check == nullptr ? "" : check->summary().c_str());
}

void run_predict(PredictArgs &a) {
    const Device device = parse_device(a.device);
    std::optional<NpyInput> u_file, W_file, g_file;
    if (!a.u_path.empty()) {
        // B, I and K from u; J and E from W, whose I and K must agree with u's.
        u_file = load_npy_input("--u", a.u_path, {"batch", "in_caps", "in_dim"});
        W_file = load_npy_input("--W", a.W_path, {"in_caps", "out_caps", "out_dim", "in_dim"});
        require_same_extent(*W_file, 0, *u_file, 1, "in_caps");
        require_same_extent(*W_file, 3, *u_file, 2, "in_dim");
        a.shape = {u_file->extent(0), u_file->extent(1), u_file->extent(2), W_file->extent(1), W_file->extent(2)};
    }
    const auto &s = a.shape;
    const std::pair<int64_t, const char *> extents[] = {{s.batch, "--batch"},
                                                        {s.in_caps, "--in-caps"},
                                                        {s.in_dim, "--in-dim"},
                                                        {s.out_caps, "--out-caps"},
                                                        {s.out_dim, "--out-dim"}};
    for (const auto &[extent, flag] : extents) {
        if (extent <= 0)
            throw UsageError{std::string(flag) + " is " + std::to_string(extent) + "; it must be positive"};
    }
    if (!a.g_path.empty()) g_file = load_npy_input("--g", a.g_path, {"batch", "in_caps", "out_caps", "out_dim"});
    // Every tensor's size is checked before the first is allocated.
    const std::vector<int64_t> u_shape{s.batch, s.in_caps, s.in_dim},
        W_shape{s.in_caps, s.out_caps, s.out_dim, s.in_dim}, u_hat_shape{s.batch, s.in_caps, s.out_caps, s.out_dim};
    checked_element_count("u [batch, in_caps, in_dim]", u_shape);
    checked_element_count("W [in_caps, out_caps, out_dim, in_dim]", W_shape);
    checked_element_count("u_hat [batch, in_caps, out_caps, out_dim]", u_hat_shape);

    if (a.seed == 0) a.seed = std::random_device{}() | 1;
    std::mt19937_64 rng(a.seed);
    std::printf("halcaps predict: device %s%s, B=%lld I=%lld K=%lld J=%lld E=%lld, seed %llu\n", device_name(device),
                device == Device::cuda ? (" (" + cuda_device_name() + ")").c_str() : "", (long long)s.batch,
                (long long)s.in_caps, (long long)s.in_dim, (long long)s.out_caps, (long long)s.out_dim,
                (unsigned long long)a.seed);

    Tensor u(u_shape, device, "u [batch, in_caps, in_dim]"),
        W(W_shape, device, "W [in_caps, out_caps, out_dim, in_dim]");
    Tensor u_hat(u_hat_shape, device, "u_hat [batch, in_caps, out_caps, out_dim]");
    if (u_file) {
        u.assign(u_file->array, u_file->source());
        W.assign(W_file->array, W_file->source());
    } else {
        u.fill_normal(rng);
        W.fill_normal(rng);
    }
    u.upload();
    W.upload();
    if (!a.save_inputs_prefix.empty()) {
        save_npy(a.save_inputs_prefix + "u.npy", u);
        save_npy(a.save_inputs_prefix + "W.npy", W);
    }

    const double copy_gbs = measured_copy_bandwidth_gbs(device);
    std::printf("copy bandwidth measured now: %.0f GB/s (bytes read + written)\n", copy_gbs);
    std::printf("%-9s %-16s %-6s %10s %10s %9s %8s %9s   %s\n", "op", "implementation", "check", "median_us", "min_us",
                "GB/s", "%copy", "GFLOP/s", "error vs float64 reference");

    int failures = 0;
    const double forward_bytes = 4.0 * (u.size() + W.size() + u_hat.size());
    const double forward_flops = 2.0 * u_hat.size() * s.in_dim;
    std::vector<double> u_hat_ref;  // once the library has accepted the arguments
    const auto forward_tol = reference::float32_sum_tolerance(s.in_dim);
    bool saved = false;
    for (const std::string &name : implementations_to_run("predict", a.implementation, device)) {
        Options options;
        options.device = device;
        options.implementation = name;
        u_hat.poison();
        check(predict(u.view(), W.view(), u_hat.view(), options));
        u_hat.download();
        if (u_hat_ref.empty()) u_hat_ref = reference::predict_f64(s, u.host().data(), W.host().data());
        const auto result = reference::compare(u_hat.host().data(), u_hat_ref, forward_tol);
        failures += !result.passed;
        const Timing t =
            time_calls(device, a.warmup, a.repeats, [&] { check(predict(u.view(), W.view(), u_hat.view(), options)); });
        print_row("forward", row_label(name), &result, t, forward_bytes, forward_flops, copy_gbs);
        if (!a.u_hat_path.empty() && !saved) {
            save_npy(a.u_hat_path, u_hat);
            saved = true;
        }
    }
    if (device == Device::cpu && a.implementation == "all") {
        const Timing t = time_calls(device, 1, a.repeats, [&] {
            reference::predict_naive_openmp(s, u.host().data(), W.host().data(), u_hat.host().data());
        });
        print_row("forward", "naive-openmp", nullptr, t, forward_bytes, forward_flops, copy_gbs);
    }
    if (!a.backward) {
        if (failures) throw UsageError{std::to_string(failures) + " implementation(s) gave wrong results"};
        return;
    }

    Tensor g(u_hat_shape, device, "g [batch, in_caps, out_caps, out_dim]");
    Tensor grad_u(u_shape, device, "grad_u [batch, in_caps, in_dim]");
    Tensor grad_W(W_shape, device, "grad_W [in_caps, out_caps, out_dim, in_dim]");
    if (g_file) {
        g.assign(g_file->array, g_file->source());
    } else {
        g.fill_normal(rng);
    }
    g.upload();
    if (!a.save_inputs_prefix.empty()) save_npy(a.save_inputs_prefix + "g.npy", g);
    const double backward_bytes = 4.0 * (g.size() + u.size() + W.size() + grad_u.size() + grad_W.size());
    const double backward_flops = 2.0 * 2.0 * g.size() * s.in_dim;
    std::vector<double> grad_u_ref, grad_W_ref;  // once the library has accepted the arguments
    bool saved_grads = false;
    for (const std::string &name : implementations_to_run("predict_backward", a.implementation, device)) {
        Options options;
        options.device = device;
        options.implementation = name;
        grad_u.poison();
        grad_W.poison();
        check(predict_backward(g.view(), u.view(), W.view(), grad_u.view(), grad_W.view(), options));
        grad_u.download();
        grad_W.download();
        if (grad_u_ref.empty()) {
            grad_u_ref = reference::predict_grad_input_f64(s, g.host().data(), W.host().data());
            grad_W_ref = reference::predict_grad_weight_f64(s, g.host().data(), u.host().data());
        }
        const auto u_check = reference::compare(grad_u.host().data(), grad_u_ref,
                                                reference::float32_sum_tolerance(s.out_caps * s.out_dim));
        const auto W_check =
            reference::compare(grad_W.host().data(), grad_W_ref, reference::float32_sum_tolerance(s.batch));
        failures += !u_check.passed + !W_check.passed;
        const Timing t = time_calls(device, a.warmup, a.repeats, [&] {
            check(predict_backward(g.view(), u.view(), W.view(), grad_u.view(), grad_W.view(), options));
        });
        const reference::Comparison &worse = u_check.passed ? W_check : u_check;
        print_row("backward", row_label(name), &worse, t, backward_bytes, backward_flops, copy_gbs);
        std::printf("%-9s %-16s        grad_u %s; grad_W %s\n", "", "", u_check.summary().c_str(),
                    W_check.summary().c_str());
        if (!saved_grads && (!a.grad_u_path.empty() || !a.grad_W_path.empty())) {
            if (!a.grad_u_path.empty()) save_npy(a.grad_u_path, grad_u);
            if (!a.grad_W_path.empty()) save_npy(a.grad_W_path, grad_W);
            saved_grads = true;
        }
    }
    if (device == Device::cpu && a.implementation == "all") {
        const Timing t = time_calls(device, 1, a.repeats, [&] {
            reference::predict_grad_input_naive_openmp(s, g.host().data(), W.host().data(), grad_u.host().data());
            reference::predict_grad_weight_naive_openmp(s, g.host().data(), u.host().data(), grad_W.host().data());
        });
        print_row("backward", "naive-openmp", nullptr, t, backward_bytes, backward_flops, copy_gbs);
    }
    if (failures) throw UsageError{std::to_string(failures) + " check(s) failed"};
}

}  // namespace

void add_predict_command(CLI::App &app) {
    auto args = std::make_shared<PredictArgs>();
    CLI::App *cmd = app.add_subcommand(
        "predict",
        "Capsule prediction u_hat[b,i,j,e] = sum_k W[i,j,e,k] u[b,i,k] (and with --backward both gradients) "
        "on random inputs or .npy files; checks every result against the float64 reference, then times it.");
    auto *batch = cmd->add_option("--batch,-B", args->shape.batch, "batch size B")->capture_default_str();
    auto *in_caps = cmd->add_option("--in-caps,-I", args->shape.in_caps, "input capsules I")->capture_default_str();
    auto *in_dim =
        cmd->add_option("--in-dim,-K", args->shape.in_dim, "input capsule dimension K")->capture_default_str();
    auto *out_caps = cmd->add_option("--out-caps,-J", args->shape.out_caps, "output capsules J")->capture_default_str();
    auto *out_dim =
        cmd->add_option("--out-dim,-E", args->shape.out_dim, "output capsule dimension E")->capture_default_str();
    cmd->add_option("--device", args->device, "cpu, cuda, opencl, or auto (cuda when a CUDA device is present)")
        ->check(CLI::IsMember({"cpu", "cuda", "opencl", "auto"}))
        ->capture_default_str();
    cmd->add_option("--schedule", args->implementation,
                    "implementation to run (see `halcaps info`); default: the device's default; 'all': every one, "
                    "plus the naive OpenMP loops on the CPU");
    auto *backward =
        cmd->add_flag("--backward", args->backward, "also run both gradients (grad_u, grad_W) from g = dL/du_hat");
    auto *u_in = cmd->add_option("--u", args->u_path, "read u [B, I, K] from this .npy file (float32, C order)")
                     ->check(CLI::ExistingFile);
    auto *W_in = cmd->add_option("--W", args->W_path, "read W [I, J, E, K] from this .npy file (float32, C order)")
                     ->check(CLI::ExistingFile);
    u_in->needs(W_in);
    W_in->needs(u_in);
    for (CLI::Option *shape_flag : {batch, in_caps, in_dim, out_caps, out_dim}) u_in->excludes(shape_flag);
    // The gradients' files need --backward (an error without it, rather than a file silently not read or written).
    cmd->add_option("--g", args->g_path, "read g = dL/du_hat [B, I, J, E] from this .npy file (needs --backward)")
        ->check(CLI::ExistingFile)
        ->needs(backward);
    cmd->add_option("--out", args->u_hat_path, "write u_hat [B, I, J, E] to this .npy file");
    cmd->add_option("--out-grad-u", args->grad_u_path, "write grad_u [B, I, K] to this .npy file (needs --backward)")
        ->needs(backward);
    cmd->add_option("--out-grad-W", args->grad_W_path, "write grad_W [I, J, E, K] to this .npy file (needs --backward)")
        ->needs(backward);
    cmd->add_option("--save-inputs", args->save_inputs_prefix,
                    "write the inputs used to PREFIXu.npy and PREFIXW.npy, and with --backward PREFIXg.npy "
                    "(to rerun on the same data)");
    cmd->add_option("--warmup", args->warmup, "untimed calls before timing")
        ->check(CLI::Range(0, 100000))
        ->capture_default_str();
    cmd->add_option("--repeats", args->repeats, "timed calls; the median is reported")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    cmd->add_option("--seed", args->seed, "random seed for the inputs (0: draw one and print it)")
        ->capture_default_str();
    cmd->callback([args] { run_predict(*args); });
}

void add_info_command(CLI::App &app) {
    CLI::App *cmd =
        app.add_subcommand("info", "Show the build, the CUDA and OpenCL devices and every implementation by name.");
    cmd->callback([] {
        std::printf("CUDA support built: %s\n", cuda_built() ? "yes" : "no");
        std::printf("CUDA device: %s\n", cuda_device_available() ? cuda_device_name().c_str() : "none");
        std::printf("OpenCL support built: %s\n", opencl_built() ? "yes" : "no");
        std::printf("OpenCL device: %s\n", opencl_device_available() ? opencl_device_name().c_str() : "none");
        // default: the row's place in the op's default walk on its device
        // (runtime/src/implementation_table.h), and where it is the default.
        std::printf("%-18s %-16s %-6s %-12s %-7s %s\n", "op", "implementation", "device", "family", "default",
                    "description");
        for (const auto &info : list_implementations()) {
            const std::string rank = info.default_rank == 0 ? "-" : std::to_string(info.default_rank);
            const std::string when = info.default_when.empty() ? "" : " [default: " + info.default_when + "]";
            std::printf("%-18s %-16s %-6s %-12s %-7s %s%s\n", info.op.c_str(), info.implementation.c_str(),
                        device_name(info.device), info.family.c_str(), rank.c_str(), info.description.c_str(),
                        when.c_str());
        }
    });
}

}  // namespace halcaps::cli

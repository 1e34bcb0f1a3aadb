// `halcaps capsconv`: the 4x4-pose capsule convolution (docs/design.md §1.3),
// forward and with --backward both gradients, on random inputs or .npy
// files. Every implementation is checked against the float64 reference, with
// its outputs poisoned with NaN first, and only then timed (the library sees
// the arguments first: the reference runs only on arguments it accepted); the naive float32 OpenMP
// loops (reference/capsconv_naive_openmp.cpp) are timed alongside as the CPU
// baseline. Default shape: Vaidya's seed problem.
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>

#include "capsconv_reference.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "compare.h"

namespace halcaps::cli {

namespace {

struct CapsConvArgs {
    // n, H, W, ci, kh, kw, co, stride, pad: Vaidya's seed problem.
    reference::CapsConvShape shape{1, 128, 128, 3, 5, 5, 1, 1, 0};
    int kernel = 0;              // --kernel sets kh = kw (checked only when given)
    std::string implementation;  // empty: the default; "all": every one
    bool backward = false, baseline = true;
    std::string device = "cpu";                                  // cpu, cuda or auto
    std::string input_path, filter_path, grad_output_path;       // inputs
    std::string output_path, grad_input_path, grad_filter_path;  // outputs
    std::string save_inputs_prefix;
    int warmup = 2, repeats = 10;
    uint64_t seed = 0;
};

void print_row(const char *op, const std::string &name, const char *check, const Timing &t, double flops,
               double baseline_us, const std::string &error) {
    std::printf("%-9s %-14s %-6s %10.1f %10.1f %9.1f %9s   %s\n", op, name.c_str(), check, t.median_us, t.min_us,
                flops / (t.median_us * 1e3),
                baseline_us > 0 ? (std::to_string(baseline_us / t.median_us).substr(0, 5) + "x").c_str() : "-",
                error.c_str());
}

void run(CapsConvArgs &a, bool kernel_given) {
    auto &s = a.shape;
    std::optional<NpyInput> input_file, filter_file, grad_output_file;
    if (!a.input_path.empty()) {
        // n, H, W and ci from the input; kh, kw and co from the filter, whose ci must agree.
        input_file = load_npy_input("--input", a.input_path, {"n", "H", "W", "ci", "pose_rows", "pose_cols"});
        filter_file = load_npy_input("--filter", a.filter_path, {"kh", "kw", "ci", "co", "pose_rows", "pose_cols"});
        for (const NpyInput *f : {&*input_file, &*filter_file}) {
            require_extent(*f, 4, 4, "pose_rows");
            require_extent(*f, 5, 4, "pose_cols");
        }
        require_same_extent(*filter_file, 2, *input_file, 3, "ci");
        s.batch = input_file->extent(0), s.height = input_file->extent(1), s.width = input_file->extent(2);
        s.in_caps = input_file->extent(3);
        s.kernel_h = filter_file->extent(0), s.kernel_w = filter_file->extent(1), s.out_caps = filter_file->extent(3);
    } else if (kernel_given) {
        if (a.kernel < 1) throw UsageError{"--kernel/-k is " + std::to_string(a.kernel) + "; it must be at least 1"};
        s.kernel_h = s.kernel_w = a.kernel;
    }
    const std::pair<int64_t, const char *> extents[] = {
        {s.batch, "--batch"}, {s.height, "--height"}, {s.width, "--width"},      {s.in_caps, "--in-caps"},
        {s.kernel_h, "--kh"}, {s.kernel_w, "--kw"},   {s.out_caps, "--out-caps"}};
    for (const auto &[extent, flag] : extents) {
        if (extent <= 0)
            throw UsageError{std::string(flag) + " is " + std::to_string(extent) + "; it must be positive"};
    }
    // The library takes int stride and pad (bad_parameter below 1 and 0); the
    // output's extents are computed here, so they are checked here first.
    constexpr int64_t int_max = std::numeric_limits<int>::max();
    if (s.stride < 1 || s.stride > int_max) {
        throw UsageError{"--stride is " + std::to_string(s.stride) + "; it must be from 1 to " +
                         std::to_string(int_max)};
    }
    if (s.pad < 0 || s.pad > int_max) {
        throw UsageError{"--pad is " + std::to_string(s.pad) + "; it must be from 0 to " + std::to_string(int_max)};
    }
    const std::vector<int64_t> input_shape{s.batch, s.height, s.width, s.in_caps, 4, 4},
        filter_shape{s.kernel_h, s.kernel_w, s.in_caps, s.out_caps, 4, 4};
    // Every size is checked before anything uses it (the padded extents, the header line's flop count).
    checked_element_count("input [n, H, W, ci, 4, 4]", input_shape);
    checked_element_count("filter [kh, kw, ci, co, 4, 4]", filter_shape);
    if (s.kernel_h > s.height + 2 * s.pad || s.kernel_w > s.width + 2 * s.pad) {
        throw UsageError{"the filter (" + std::to_string(s.kernel_h) + "x" + std::to_string(s.kernel_w) +
                         ") is larger than the padded input (" + std::to_string(s.height + 2 * s.pad) + "x" +
                         std::to_string(s.width + 2 * s.pad) + "): check --kh/--kw/-k, --height, --width and --pad"};
    }
    if (!a.grad_output_path.empty()) {
        grad_output_file =
            load_npy_input("--grad-output", a.grad_output_path, {"n", "OH", "OW", "co", "pose_rows", "pose_cols"});
    }
    const std::vector<int64_t> output_shape{s.batch, s.out_height(), s.out_width(), s.out_caps, 4, 4};
    checked_element_count("output [n, OH, OW, co, 4, 4]", output_shape);
    if (a.seed == 0) a.seed = std::random_device{}() | 1;
    std::mt19937_64 rng(a.seed);
    const Device device = parse_device(a.device);
    // The naive OpenMP loops are the CPU's comparison point only.
    if (device == Device::cuda) a.baseline = false;
    std::printf(
        "halcaps capsconv: device %s, n=%lld %lldx%lld ci=%lld, filter %lldx%lld co=%lld, stride %lld, "
        "pad %lld -> %lldx%lld, %.3f GFLOP, seed %llu\n",
        device == Device::cuda ? cuda_device_name().c_str() : "cpu", (long long)s.batch, (long long)s.height,
        (long long)s.width, (long long)s.in_caps, (long long)s.kernel_h, (long long)s.kernel_w, (long long)s.out_caps,
        (long long)s.stride, (long long)s.pad, (long long)s.out_height(), (long long)s.out_width(), s.flops() / 1e9,
        (unsigned long long)a.seed);
    Tensor input(input_shape, device, "input [n, H, W, ci, 4, 4]");
    Tensor filter(filter_shape, device, "filter [kh, kw, ci, co, 4, 4]");
    Tensor output(output_shape, device, "output [n, OH, OW, co, 4, 4]");
    if (input_file) {
        input.assign(input_file->array, input_file->source());
        filter.assign(filter_file->array, filter_file->source());
    } else {
        input.fill_normal(rng), filter.fill_normal(rng);
    }
    input.upload(), filter.upload();
    if (!a.save_inputs_prefix.empty()) {
        save_npy(a.save_inputs_prefix + "input.npy", input);
        save_npy(a.save_inputs_prefix + "filter.npy", filter);
    }
    const ConvParams params{static_cast<int>(s.stride), static_cast<int>(s.pad)};
    const auto tol = reference::float32_sum_tolerance(s.kernel_h * s.kernel_w * s.in_caps * 4);

    // The library sees the arguments first (the default implementation, or
    // the one named): nothing else runs on arguments it refuses.
    {
        Options options;
        options.device = device;
        options.implementation = a.implementation == "all" ? "" : a.implementation;
        output.poison();
        check(capsconv(input.view(), filter.view(), output.view(), params, options));
    }
    const std::vector<double> ref = reference::capsconv_f64(s, input.host().data(), filter.host().data());
    std::printf("%-9s %-14s %-6s %10s %10s %9s %9s   %s\n", "op", "implementation", "check", "median_us", "min_us",
                "GFLOP/s", "vs naive", "error vs float64 reference");
    int failures = 0;
    double baseline_us = 0;
    bool saved = false;
    if (a.baseline) {
        output.poison();
        reference::capsconv_naive_openmp(s, input.host().data(), filter.host().data(), output.host().data());
        const auto c = reference::compare(output.host().data(), ref, tol);
        failures += !c.passed;
        const Timing t = time_calls(device, a.warmup, a.repeats, [&] {
            reference::capsconv_naive_openmp(s, input.host().data(), filter.host().data(), output.host().data());
        });
        baseline_us = t.median_us;
        print_row("forward", "naive_openmp", c.passed ? "ok" : "WRONG", t, s.flops(), 0, c.summary());
    }
    for (const std::string &name : implementations_to_run("capsconv", a.implementation, device)) {
        Options options;
        options.device = device;
        options.implementation = name;
        auto call = [&] { return capsconv(input.view(), filter.view(), output.view(), params, options); };
        output.poison();
        const Status first = call();
        if (first.code == StatusCode::unsupported_shape && a.implementation == "all") {
            std::printf("%-9s %-14s n/a    (%s)\n", "forward", row_label(name).c_str(), first.message.c_str());
            continue;
        }
        check(first);
        output.download();
        const auto c = reference::compare(output.host().data(), ref, tol);
        failures += !c.passed;
        const Timing t = time_calls(device, a.warmup, a.repeats, [&] { check(call()); });
        print_row("forward", row_label(name), c.passed ? "ok" : "WRONG", t, s.flops(), baseline_us, c.summary());
        if (!a.output_path.empty() && !saved) {
            save_npy(a.output_path, output);
            saved = true;
        }
    }
    if (a.backward) {
        Tensor grad_output(output_shape, device, "grad_output [n, OH, OW, co, 4, 4]");
        Tensor grad_input(input_shape, device, "grad_input [n, H, W, ci, 4, 4]");
        Tensor grad_filter(filter_shape, device, "grad_filter [kh, kw, ci, co, 4, 4]");
        if (grad_output_file) {
            grad_output.assign(grad_output_file->array, grad_output_file->source());
        } else {
            grad_output.fill_normal(rng);
        }
        grad_output.upload();
        if (!a.save_inputs_prefix.empty()) save_npy(a.save_inputs_prefix + "grad_output.npy", grad_output);
        std::vector<double> ref_gi, ref_gk;  // once the library has accepted the arguments
        bool saved_grads = false;
        const auto tol_gi = reference::float32_sum_tolerance(s.kernel_h * s.kernel_w * s.out_caps * 4);
        const auto tol_gk = reference::float32_sum_tolerance(s.batch * s.out_height() * s.out_width() * 4);
        for (const std::string &name : implementations_to_run("capsconv_backward", a.implementation, device)) {
            Options options;
            options.device = device;
            options.implementation = name;
            auto call = [&] {
                return capsconv_backward(input.view(), filter.view(), grad_output.view(), grad_input.view(),
                                         grad_filter.view(), params, options);
            };
            grad_input.poison(), grad_filter.poison();
            check(call());
            grad_input.download(), grad_filter.download();
            if (ref_gi.empty()) {
                ref_gi = reference::capsconv_grad_input_f64(s, grad_output.host().data(), filter.host().data());
                ref_gk = reference::capsconv_grad_filter_f64(s, grad_output.host().data(), input.host().data());
            }
            const auto ci = reference::compare(grad_input.host().data(), ref_gi, tol_gi);
            const auto ck = reference::compare(grad_filter.host().data(), ref_gk, tol_gk);
            const auto &worst = ci.passed ? ck : ci;
            failures += !(ci.passed && ck.passed);
            const Timing t = time_calls(device, a.warmup, a.repeats, [&] { check(call()); });
            print_row("backward", row_label(name), worst.passed ? "ok" : "WRONG", t, 2 * s.flops(), 0, worst.summary());
            if (!saved_grads) {
                if (!a.grad_input_path.empty()) save_npy(a.grad_input_path, grad_input);
                if (!a.grad_filter_path.empty()) save_npy(a.grad_filter_path, grad_filter);
                saved_grads = true;
            }
        }
    }
    if (failures) throw UsageError{std::to_string(failures) + " check(s) failed"};
}

}  // namespace

void add_capsconv_command(CLI::App &app) {
    auto a = std::make_shared<CapsConvArgs>();
    CLI::App *cmd = app.add_subcommand(
        "capsconv",
        "The 4x4-pose capsule convolution on the CPU or a CUDA device (default: Vaidya's seed problem) on "
        "random inputs or .npy files; checks every result against the float64 reference, then times it "
        "against the naive OpenMP loops.");
    auto &s = a->shape;
    std::vector<CLI::Option *> shape_flags;
    shape_flags.push_back(cmd->add_option("--batch,-n", s.batch, "batch n")->capture_default_str());
    shape_flags.push_back(cmd->add_option("--height,-H", s.height, "input height H")->capture_default_str());
    shape_flags.push_back(cmd->add_option("--width,-W", s.width, "input width W")->capture_default_str());
    shape_flags.push_back(cmd->add_option("--in-caps", s.in_caps, "input capsule types ci")->capture_default_str());
    shape_flags.push_back(cmd->add_option("--out-caps", s.out_caps, "output capsule types co")->capture_default_str());
    auto *kernel = cmd->add_option("--kernel,-k", a->kernel, "filter size kh = kw (at least 1)");
    auto *kh = cmd->add_option("--kh", s.kernel_h, "filter height kh")->capture_default_str();
    auto *kw = cmd->add_option("--kw", s.kernel_w, "filter width kw")->capture_default_str();
    kernel->excludes(kh)->excludes(kw);
    shape_flags.insert(shape_flags.end(), {kernel, kh, kw});
    cmd->add_option("--stride", s.stride, "stride")->capture_default_str();
    cmd->add_option("--pad", s.pad, "zero padding on every side")->capture_default_str();
    cmd->add_option("--schedule", a->implementation,
                    "implementation to run (see `halcaps info`); default: the runtime's default for the device and "
                    "shape; 'all': every one built");
    cmd->add_option("--device", a->device, "cpu, cuda, opencl, or auto (cuda when a CUDA device is present)")
        ->check(CLI::IsMember({"cpu", "cuda", "opencl", "auto"}))
        ->capture_default_str();
    auto *backward = cmd->add_flag("--backward", a->backward,
                                   "also run both gradients from grad_output (random unless --grad-output)");
    auto *input_in = cmd->add_option("--input", a->input_path, "read the input [n, H, W, ci, 4, 4] from this .npy file")
                         ->check(CLI::ExistingFile);
    auto *filter_in =
        cmd->add_option("--filter", a->filter_path, "read the filter [kh, kw, ci, co, 4, 4] from this .npy file")
            ->check(CLI::ExistingFile);
    input_in->needs(filter_in);
    filter_in->needs(input_in);
    for (CLI::Option *shape_flag : shape_flags) input_in->excludes(shape_flag);
    // The gradients' files need --backward (an error without it, rather than a file silently not read or written).
    cmd->add_option("--grad-output", a->grad_output_path,
                    "read grad_output [n, OH, OW, co, 4, 4] from this .npy file (needs --backward)")
        ->check(CLI::ExistingFile)
        ->needs(backward);
    cmd->add_option("--out", a->output_path, "write the output [n, OH, OW, co, 4, 4] to this .npy file");
    cmd->add_option("--out-grad-input", a->grad_input_path,
                    "write grad_input [n, H, W, ci, 4, 4] to this .npy file (needs --backward)")
        ->needs(backward);
    cmd->add_option("--out-grad-filter", a->grad_filter_path,
                    "write grad_filter [kh, kw, ci, co, 4, 4] to this .npy file (needs --backward)")
        ->needs(backward);
    cmd->add_option("--save-inputs", a->save_inputs_prefix,
                    "write the inputs used to PREFIXinput.npy and PREFIXfilter.npy, and with --backward "
                    "PREFIXgrad_output.npy (to rerun on the same data)");
    cmd->add_flag("!--no-baseline", a->baseline, "skip the naive OpenMP loops");
    cmd->add_option("--warmup", a->warmup, "untimed calls before timing")
        ->check(CLI::Range(0, 100000))
        ->capture_default_str();
    cmd->add_option("--repeats", a->repeats, "timed calls; the median is reported")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    cmd->add_option("--seed", a->seed, "random seed for the inputs (0: draw one and print it)")->capture_default_str();
    cmd->callback([a, kernel] { run(*a, kernel->count() > 0); });
}

}  // namespace halcaps::cli

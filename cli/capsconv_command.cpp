// `halcaps capsconv`: the 4x4-pose capsule convolution (DESIGN.md §1.3),
// forward and with --backward both gradients, on random inputs. Every
// implementation is checked against the float64 reference, with its outputs
// poisoned with NaN first, and only then timed; the naive float32 OpenMP
// loops (reference/capsconv_naive_openmp.cpp) are timed alongside as the CPU
// baseline. Default shape: Vaidya's seed problem.
#include <cstdio>
#include <memory>

#include "capsconv_reference.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "compare.h"

namespace halcaps::cli {

namespace {

struct CapsConvArgs {
    // n, H, W, ci, kh, kw, co, stride, pad: Vaidya's seed problem.
    reference::CapsConvShape shape{1, 128, 128, 3, 5, 5, 1, 1, 0};
    int kernel = 0;  // --kernel sets kh = kw
    std::string implementation;  // empty: the default; "all": every one
    bool backward = false, baseline = true;
    std::string device = "cpu";  // cpu, cuda or auto
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

void run(CapsConvArgs &a) {
    auto &s = a.shape;
    if (a.kernel > 0) s.kernel_h = s.kernel_w = a.kernel;
    for (int64_t extent : {s.batch, s.height, s.width, s.in_caps, s.kernel_h, s.kernel_w, s.out_caps}) {
        if (extent <= 0) throw UsageError{"every extent must be positive"};
    }
    if (s.stride < 1) throw UsageError{"--stride must be at least 1"};
    if (s.pad < 0) throw UsageError{"--pad must be at least 0"};
    if (s.kernel_h > s.height + 2 * s.pad || s.kernel_w > s.width + 2 * s.pad) {
        throw UsageError{"the filter is larger than the padded input"};
    }
    if (a.seed == 0) a.seed = std::random_device{}() | 1;
    std::mt19937_64 rng(a.seed);
    const Device device = parse_device(a.device);
    // The naive OpenMP loops are the CPU's comparison point only.
    if (device == Device::cuda) a.baseline = false;
    std::printf("halcaps capsconv: device %s, n=%lld %lldx%lld ci=%lld, filter %lldx%lld co=%lld, stride %lld, "
                "pad %lld -> %lldx%lld, %.3f GFLOP, seed %llu\n",
                device == Device::cuda ? cuda_device_name().c_str() : "cpu", (long long)s.batch, (long long)s.height, (long long)s.width, (long long)s.in_caps,
                (long long)s.kernel_h, (long long)s.kernel_w, (long long)s.out_caps, (long long)s.stride,
                (long long)s.pad, (long long)s.out_height(), (long long)s.out_width(), s.flops() / 1e9,
                (unsigned long long)a.seed);
    Tensor input({s.batch, s.height, s.width, s.in_caps, 4, 4}, device);
    Tensor filter({s.kernel_h, s.kernel_w, s.in_caps, s.out_caps, 4, 4}, device);
    Tensor output({s.batch, s.out_height(), s.out_width(), s.out_caps, 4, 4}, device);
    Tensor grad_output(output.shape(), device), grad_input(input.shape(), device), grad_filter(filter.shape(), device);
    input.fill_normal(rng), filter.fill_normal(rng), grad_output.fill_normal(rng);
    input.upload(), filter.upload(), grad_output.upload();
    const ConvParams params{static_cast<int>(s.stride), static_cast<int>(s.pad)};
    const auto tol = reference::float32_sum_tolerance(s.kernel_h * s.kernel_w * s.in_caps * 4);

    const std::vector<double> ref = reference::capsconv_f64(s, input.host().data(), filter.host().data());
    std::printf("%-9s %-14s %-6s %10s %10s %9s %9s   %s\n", "op", "implementation", "check", "median_us", "min_us",
                "GFLOP/s", "vs naive", "error vs float64 reference");
    int failures = 0;
    double baseline_us = 0;
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
    }
    if (a.backward) {
        const auto ref_gi = reference::capsconv_grad_input_f64(s, grad_output.host().data(), filter.host().data());
        const auto ref_gk = reference::capsconv_grad_filter_f64(s, grad_output.host().data(), input.host().data());
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
            const auto ci = reference::compare(grad_input.host().data(), ref_gi, tol_gi);
            const auto ck = reference::compare(grad_filter.host().data(), ref_gk, tol_gk);
            const auto &worst = ci.passed ? ck : ci;
            failures += !(ci.passed && ck.passed);
            const Timing t = time_calls(device, a.warmup, a.repeats, [&] { check(call()); });
            print_row("backward", row_label(name), worst.passed ? "ok" : "WRONG", t, 2 * s.flops(), 0, worst.summary());
        }
    }
    if (failures) throw UsageError{std::to_string(failures) + " check(s) failed"};
}

}  // namespace

void add_capsconv_command(CLI::App &app) {
    auto a = std::make_shared<CapsConvArgs>();
    CLI::App *cmd = app.add_subcommand(
        "capsconv", "The 4x4-pose capsule convolution on the CPU or a CUDA device (default: Vaidya's seed problem); checks every "
                    "result against the float64 reference, then times it against the naive OpenMP loops.");
    auto &s = a->shape;
    cmd->add_option("--batch,-n", s.batch, "batch n")->capture_default_str();
    cmd->add_option("--height,-H", s.height, "input height H")->capture_default_str();
    cmd->add_option("--width,-W", s.width, "input width W")->capture_default_str();
    cmd->add_option("--in-caps", s.in_caps, "input capsule types ci")->capture_default_str();
    cmd->add_option("--out-caps", s.out_caps, "output capsule types co")->capture_default_str();
    cmd->add_option("--kernel,-k", a->kernel, "filter size kh = kw (overrides --kh/--kw)");
    cmd->add_option("--kh", s.kernel_h, "filter height kh")->capture_default_str();
    cmd->add_option("--kw", s.kernel_w, "filter width kw")->capture_default_str();
    cmd->add_option("--stride", s.stride, "stride")->capture_default_str();
    cmd->add_option("--pad", s.pad, "zero padding on every side")->capture_default_str();
    cmd->add_option("--schedule", a->implementation,
                    "implementation to run (see `halcaps info`); default: the runtime's default for the device and shape; 'all': every one built");
    cmd->add_option("--device", a->device, "cpu, cuda, opencl, or auto (cuda when a CUDA device is present)")
        ->check(CLI::IsMember({"cpu", "cuda", "opencl", "auto"}))
        ->capture_default_str();
    cmd->add_flag("--backward", a->backward, "also run both gradients from a random grad_output");
    cmd->add_flag("!--no-baseline", a->baseline, "skip the naive OpenMP loops");
    cmd->add_option("--warmup", a->warmup, "untimed calls before timing")->check(CLI::Range(0, 100000))
        ->capture_default_str();
    cmd->add_option("--repeats", a->repeats, "timed calls; the median is reported")->check(CLI::Range(1, 100000))
        ->capture_default_str();
    cmd->add_option("--seed", a->seed, "random seed for the inputs (0: draw one and print it)")->capture_default_str();
    cmd->callback([a] { run(*a); });
}

}  // namespace halcaps::cli

// `halcaps bench`: every implementation of capsule prediction (forward and
// both gradients) on a set of shapes, side by side: Halide schedules,
// hand-written CUDA, cuBLAS, and on the CPU the naive OpenMP loops. Each
// implementation is first checked against the float64 reference on fresh
// random inputs with NaN-poisoned outputs, then timed (median after warm-up)
// with its inputs rotated among enough copies to exceed the last-level cache.
// Writes a terminal table, and optionally JSON (bench/plot_bench.py draws it)
// and Markdown.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>

#include "capsconv_reference.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/fma_peak.h"
#include "cli/json.h"
#include "cli/shapes.h"
#include "compare.h"
#include "digitcaps_reference.h"
#include "predict_reference.h"
#include "runtime/src/hand_cuda.h"

#if HALCAPS_WITH_CUDA
#include <cuda_runtime.h>

#include "HalideRuntime.h"
#endif

namespace halcaps::cli {

namespace {

struct BenchArgs {
    std::string device = "auto";
    std::string ops = "all";
    std::vector<std::string> shapes = {"mnist_b128", "mnist_b512", "wide_b32"};
    std::vector<std::string> capsconv_shapes = {"seed", "layer", "stride2"};
    std::vector<std::string> implementations;  // empty: all
    int warmup = 5, repeats = 30;
    uint64_t seed = 0;
    std::string json_path, markdown_path;
    std::string command_line;
};

struct Row {
    std::string op, shape, implementation, family;
    reference::PredictShape dims{};
    bool valid = false;
    // false: the implementation refused the shape (unsupported_shape, e.g.
    // its blocks past 48 KB of shared memory); shown as n/a, not timed, and
    // not counted as wrong. check_summary holds its message.
    bool applies = true;
    double max_abs_error = 0, rel_l2_error = 0;
    double us = 0, gbs = 0, gflops = 0, pct_bandwidth = 0;
    double speedup_vs_naive = std::nan("");  // none where the naive row was not run (or not timed)
    double call_us = 0;                      // one call on an idle stream, the host's launch path included (Timing)
    bool host_bound = false;                 // us includes host time: the call waits on the device (Timing)
    double floor_bytes = 0, floor_us = 0;
    double u_hat_write_us = 0;             // routing ops: one write of u_hat at the write bandwidth, for scale
    double peak_device_mb = std::nan("");  // routing ops on CUDA: device memory a call allocates (DeviceMemoryProbe)
    double pct_fma_peak = std::nan("");    // CPU rows: GFLOP/s as a percentage of the FMA peak measured in the run
    std::string check_summary;
    // capsconv rows: their own dims (JSON object and text), and the extra
    // device memory a peer needs beyond the operator's tensors.
    std::string dims_json, dims_text;
    double extra_bytes = 0;
    std::string extra_note;
};

void set_timing(Row &r, const Timing &t) {
    r.us = t.median_us;
    r.call_us = t.call_median_us;
    r.host_bound = t.host_bound;
}

// The bench's own peer rows, beside the implementations of an operator.
const std::string kCublasGemmOnly = "cublas_gemm_only";  // predict, CUDA: the SGEMM without its permute
const std::string kCudnnCore = "cudnn_core";             // capsconv, CUDA: the bare cuDNN convolution
const std::string kNaiveOpenmp = "naive-openmp";         // predict, predict_backward, capsconv, CPU

std::string family_of(const std::string &implementation, Device device) {
    if (implementation == kNaiveOpenmp) return "cpu_baseline";
    if (implementation.rfind("cublas", 0) == 0) return "cublas";
    if (implementation == "im2col_cublas") return "cublas";
    if (implementation.rfind("cudnn", 0) == 0) return "cudnn";
    if (device == Device::cuda && implementation.rfind("cuda_", 0) == 0) return "cuda";
    return "halide";
}

// The naive implementation that speed-ups are measured against: the blog's
// kernel (GPU) or the OpenMP loops (CPU) for the prediction; for routing and
// the layer, forward and backward, the one-kernel-per-step hand-written CUDA
// (GPU) or the stage-per-op schedule (CPU; the backward's cpu schedule), i.e.
// what an eager framework does.
std::string naive_name(const std::string &op, Device device) {
    if (op == "digitcaps" || op == "route") return device == Device::cuda ? "cuda_naive" : "stage_per_op";
    if (op == "digitcaps_backward") return device == Device::cuda ? "cuda_naive" : "cpu";
    // capsconv: against Vaidya's I3 register kernel, the reference point of the paper.
    if (op == "capsconv") return device == Device::cuda ? "cuda_vaidya_i3" : kNaiveOpenmp;
    return device == Device::cuda ? "cuda_blog_naive" : kNaiveOpenmp;
}

// The operators (as list_implementations names them) that `--op` runs: the
// one mapping from --op to the rows run_bench produces.
std::vector<std::string> bench_ops(const std::string &ops) {
    if (ops == "digitcaps") return {"digitcaps", "digitcaps_with_s", "digitcaps_with_c"};
    if (ops == "digitcaps_backward") {
        return {"digitcaps_backward", "digitcaps_backward_with_s", "digitcaps_backward_with_c"};
    }
    if (ops != "all") return {ops};  // predict, predict_backward, route, capsconv
    return {"predict",
            "predict_backward",
            "digitcaps",
            "digitcaps_with_s",
            "digitcaps_with_c",
            "route",
            "digitcaps_backward",
            "digitcaps_backward_with_s",
            "digitcaps_backward_with_c",
            "capsconv"};
}

bool runs_op(const BenchArgs &a, const std::string &op) {
    const std::vector<std::string> ops = bench_ops(a.ops);
    return std::find(ops.begin(), ops.end(), op) != ops.end();
}

std::vector<std::string> peer_rows(const std::string &op, Device device) {
    if (device == Device::cpu) {
        return op == "predict" || op == "predict_backward" || op == "capsconv" ? std::vector<std::string>{kNaiveOpenmp}
                                                                               : std::vector<std::string>{};
    }
    if (op == "predict") return {kCublasGemmOnly};
    if (op == "capsconv") return {kCudnnCore};
    return {};
}

bool wanted(const BenchArgs &a, const std::string &implementation) {
    return a.implementations.empty() ||
           std::find(a.implementations.begin(), a.implementations.end(), implementation) != a.implementations.end();
}

// The implementations of `op` built for `device` and asked for; with
// `iterations` > 0 (the routing family), only those built for that count.
std::vector<std::string> implementations_of(const std::string &op, Device device, const BenchArgs &a,
                                            int iterations = 0) {
    std::vector<std::string> names;
    for (const auto &info : list_implementations()) {
        if (info.op != op || info.device != device || !wanted(a, info.implementation)) continue;
        if (iterations > 0 &&
            std::find(info.iterations.begin(), info.iterations.end(), iterations) == info.iterations.end()) {
            continue;
        }
        names.push_back(info.implementation);
    }
    return names;
}

// `sets` copies of the same input data (for rotation); copy 0 is used for checking.
class InputSets {
public:
    // `what` names the tensor in errors (e.g. one too large to allocate).
    InputSets(const std::vector<int64_t> &shape, Device device, int sets, std::mt19937_64 &rng, const char *what) {
        for (int n = 0; n < sets; n++) {
            copies_.push_back(std::make_unique<Tensor>(shape, device, what));
            if (n == 0) {
                copies_[0]->fill_normal(rng);
            } else {
                copies_[n]->host() = copies_[0]->host();
            }
            copies_[n]->upload();
        }
    }
    Tensor &first() { return *copies_[0]; }
    TensorView view(int call) { return copies_[call % copies_.size()]->view(); }

private:
    std::vector<std::unique_ptr<Tensor>> copies_;
};

// The naive OpenMP loops as a CPU row: checked on input set 0 into a
// NaN-poisoned output, then timed on rotating sets over at most 5 calls
// (they are slow). `run(call, out)` runs the loops on input set `call`.
template <typename Run>
std::pair<reference::Comparison, Timing> check_and_time_naive(const BenchArgs &a, Tensor &output,
                                                              const std::vector<double> &ref,
                                                              const reference::Tolerance &tol, Run run) {
    output.poison();
    run(0, output.host().data());
    const auto c = reference::compare(output.host().data(), ref, tol);
    int call = 0;
    const Timing t = time_calls(Device::cpu, 1, std::min(a.repeats, 5), [&] { run(call++, output.host().data()); });
    return {c, t};
}

// The device memory one call allocates beyond its inputs and outputs (which
// the bench allocates beforehand), in MB; routing rows on CUDA only.
// Method: Halide's device-allocation cache is switched on, so allocations a
// Halide pipeline frees at its end stay cached (on the device) instead of
// going back to the driver. Before the probed call the cache is emptied
// (halide_reuse_device_allocations(false), then true again); the drop in
// cudaMemGetInfo's free memory across the call is then what the call
// allocated: at least its peak intermediate memory, and equal to it when no
// allocation was freed and re-made within the call (Halide reuses a cached
// block only for a request of the same size). Driver allocations come in
// 2 MiB pages, so small figures are rounded up to them. The hand-written
// CUDA allocates from the stream-ordered pool (cudaMallocAsync), which gives
// memory back at the next synchronisation; for it the pool's own high-water
// mark of used memory (cudaMemPoolAttrUsedMemHigh, reset before the call) is
// the peak. The row shows the larger of the two. The probed call is the
// second one of an implementation, after the checking call, so that loading
// its kernels' code (which also takes device memory) is not counted.
// run_bench switches the cache on for the whole run.
class DeviceMemoryProbe {
public:
    void begin() {
#if HALCAPS_WITH_CUDA
        cudaDeviceSynchronize();
        halide_reuse_device_allocations(nullptr, false);
        halide_reuse_device_allocations(nullptr, true);
        int device_id = 0;
        cudaGetDevice(&device_id);
        if (cudaDeviceGetDefaultMemPool(&pool_, device_id) == cudaSuccess) {
            cudaMemPoolTrimTo(pool_, 0);
            unsigned long long zero = 0;  // cuuint64_t (cuda.h)
            cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &zero);
        } else {
            pool_ = nullptr;
        }
        size_t total = 0;
        ok_ = cudaMemGetInfo(&free_before_, &total) == cudaSuccess;
#endif
    }
    // NaN when the device could not be asked.
    double end_mb() {
#if HALCAPS_WITH_CUDA
        cudaDeviceSynchronize();
        size_t free_after = 0, total = 0;
        if (!ok_ || cudaMemGetInfo(&free_after, &total) != cudaSuccess) return std::nan("");
        const double halide_bytes = free_before_ > free_after ? static_cast<double>(free_before_ - free_after) : 0.0;
        double pool_bytes = 0;
        unsigned long long high = 0;
        if (pool_ != nullptr && cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &high) == cudaSuccess) {
            pool_bytes = static_cast<double>(high);
        }
        return std::max(halide_bytes, pool_bytes) / 1e6;
#else
        return std::nan("");
#endif
    }

private:
#if HALCAPS_WITH_CUDA
    cudaMemPool_t pool_ = nullptr;
#endif
    [[maybe_unused]] size_t free_before_ = 0;  // these two are read only when the build has CUDA
    [[maybe_unused]] bool ok_ = false;
};

void fill_rates(Row &r, double bytes, double flops, double copy_gbs) {
    r.gbs = bytes / (r.us * 1e3);
    r.gflops = flops / (r.us * 1e3);
    r.pct_bandwidth = 100.0 * r.gbs / copy_gbs;
    r.floor_bytes = bytes;
    r.floor_us = bytes / (copy_gbs * 1e3);
}

// A row for an implementation whose checking call returned an error, never
// timed: n/a where it refused the shape (unsupported_shape), wrong for any
// other error.
void mark_failed(Row &r, const Status &status) {
    r.valid = false;
    r.applies = status.code != StatusCode::unsupported_shape;
    r.us = r.call_us = r.gbs = r.gflops = r.pct_bandwidth = std::nan("");
    r.check_summary =
        (r.applies ? std::string("error: ") + status_code_name(status.code) + ": " : std::string("does not apply: ")) +
        status.message;
}

Row failed_row(const std::string &op, const BenchShape &shape, const std::string &name, Device device,
               const Status &status) {
    Row r;
    r.op = op, r.shape = shape.name, r.implementation = name, r.family = family_of(name, device);
    r.dims = shape.s;
    mark_failed(r, status);
    return r;
}

// The check column: ok, WRONG, or n/a for a refused shape.
const char *check_text(const Row &r) { return !r.applies ? "n/a" : r.valid ? "ok" : "WRONG"; }

void take_check(Row &r, const reference::Comparison &c) {
    r.valid = c.passed;
    r.max_abs_error = c.max_abs_error;
    r.rel_l2_error = c.relative_l2_error;
    r.check_summary = c.summary();
}

// A routing-family row once its outputs passed or failed their check `c`:
// the device memory one call allocates (CUDA), then the timed calls; the
// row's identity, check and timing. The caller adds its rates.
Row timed_routing_row(const BenchArgs &a, const std::string &op, const BenchShape &shape, const Options &options,
                      const reference::Comparison &c, const std::function<Status(const Options &, int)> &call) {
    double peak_mb = std::nan("");
    if (options.device == Device::cuda) {
        DeviceMemoryProbe probe;
        probe.begin();
        check(call(options, 0));
        peak_mb = probe.end_mb();
    }
    int n = 0;
    const Timing t = time_calls(options.device, a.warmup, a.repeats, [&] { check(call(options, n++)); });
    Row r;
    r.op = op, r.shape = shape.name, r.implementation = options.implementation;
    r.family = family_of(options.implementation, options.device);
    r.dims = shape.s;
    take_check(r, c);
    set_timing(r, t);
    r.peak_device_mb = peak_mb;
    return r;
}

// Forward rows for one shape.
void bench_forward(const BenchArgs &a, const BenchShape &shape, Device device, double copy_gbs, std::mt19937_64 &rng,
                   std::vector<Row> &rows) {
    const auto &s = shape.s;
    const double input_bytes = 4.0 * (s.u_size() + s.W_size());
    const int sets = rotation_sets(device, input_bytes);
    InputSets u({s.batch, s.in_caps, s.in_dim}, device, sets, rng, "u");
    InputSets W({s.in_caps, s.out_caps, s.out_dim, s.in_dim}, device, sets, rng, "W");
    Tensor u_hat({s.batch, s.in_caps, s.out_caps, s.out_dim}, device);
    const double bytes = input_bytes + 4.0 * s.u_hat_size();
    const double flops = 2.0 * s.u_hat_size() * s.in_dim;
    const auto ref = reference::predict_f64(s, u.first().host().data(), W.first().host().data());
    const auto tol = reference::float32_sum_tolerance(s.in_dim);

    auto add_row = [&](const std::string &name, const reference::Comparison &c, const Timing &t) {
        Row r;
        r.op = "predict", r.shape = shape.name, r.implementation = name, r.family = family_of(name, device);
        r.dims = s;
        take_check(r, c);
        set_timing(r, t);
        fill_rates(r, bytes, flops, copy_gbs);
        rows.push_back(r);
    };

    for (const std::string &name : implementations_of("predict", device, a)) {
        Options options;
        options.device = device;
        options.implementation = name;
        u_hat.poison();
        if (Status st = predict(u.view(0), W.view(0), u_hat.view(), options); !st.ok()) {
            rows.push_back(failed_row("predict", shape, name, device, st));
            continue;
        }
        u_hat.download();
        const auto c = reference::compare(u_hat.host().data(), ref, tol);
        int call = 0;
        const Timing t = time_calls(device, a.warmup, a.repeats, [&] {
            check(predict(u.view(call), W.view(call), u_hat.view(), options));
            call++;
        });
        add_row(name, c, t);
    }

    if (device == Device::cuda && wanted(a, kCublasGemmOnly)) {
        // The GEMM alone writes [I, B, J, E]; check it against the permuted reference.
        std::vector<double> ref_ibje(ref.size());
        const int64_t row = s.out_caps * s.out_dim;
        for (int64_t b = 0; b < s.batch; b++) {
            for (int64_t i = 0; i < s.in_caps; i++) {
                std::copy_n(&ref[(b * s.in_caps + i) * row], row, &ref_ibje[(i * s.batch + b) * row]);
            }
        }
        Options options;
        options.device = device;
        u_hat.poison();
        check(detail::run_cublas_predict_gemm_only(u.view(0), W.view(0), u_hat.view().data, options));
        u_hat.download();
        const auto c = reference::compare(u_hat.host().data(), ref_ibje, tol);
        int call = 0;
        const Timing t = time_calls(device, a.warmup, a.repeats, [&] {
            check(detail::run_cublas_predict_gemm_only(u.view(call), W.view(call), u_hat.view().data, options));
            call++;
        });
        add_row(kCublasGemmOnly, c, t);
    }
    if (device == Device::cpu && wanted(a, kNaiveOpenmp)) {
        const auto [c, t] = check_and_time_naive(a, u_hat, ref, tol, [&](int call, float *out) {
            reference::predict_naive_openmp(s, u.view(call).data, W.view(call).data, out);
        });
        add_row(kNaiveOpenmp, c, t);
    }
}

// Backward rows (both gradients together) for one shape.
void bench_backward(const BenchArgs &a, const BenchShape &shape, Device device, double copy_gbs, std::mt19937_64 &rng,
                    std::vector<Row> &rows) {
    const auto &s = shape.s;
    const double input_bytes = 4.0 * (s.u_hat_size() + s.u_size() + s.W_size());
    const int sets = rotation_sets(device, input_bytes);
    InputSets g({s.batch, s.in_caps, s.out_caps, s.out_dim}, device, sets, rng, "g");
    InputSets u({s.batch, s.in_caps, s.in_dim}, device, sets, rng, "u");
    InputSets W({s.in_caps, s.out_caps, s.out_dim, s.in_dim}, device, sets, rng, "W");
    Tensor grad_u({s.batch, s.in_caps, s.in_dim}, device), grad_W({s.in_caps, s.out_caps, s.out_dim, s.in_dim}, device);
    const double bytes = input_bytes + 4.0 * (s.u_size() + s.W_size());
    const double flops = 4.0 * s.u_hat_size() * s.in_dim;
    const auto ref_u = reference::predict_grad_input_f64(s, g.first().host().data(), W.first().host().data());
    const auto ref_W = reference::predict_grad_weight_f64(s, g.first().host().data(), u.first().host().data());
    const auto tol_u = reference::float32_sum_tolerance(s.out_caps * s.out_dim);
    const auto tol_W = reference::float32_sum_tolerance(s.batch);

    auto add_row = [&](const std::string &name, const Timing &t) {
        const auto cu = reference::compare(grad_u.host().data(), ref_u, tol_u);
        const auto cw = reference::compare(grad_W.host().data(), ref_W, tol_W);
        Row r;
        r.op = "predict_backward", r.shape = shape.name, r.implementation = name;
        r.family = family_of(name, device);
        r.dims = s;
        take_check(r, cu.passed ? cw : cu);
        r.valid = cu.passed && cw.passed;
        r.max_abs_error = std::max(cu.max_abs_error, cw.max_abs_error);
        r.rel_l2_error = std::max(cu.relative_l2_error, cw.relative_l2_error);
        r.check_summary = "grad_u " + cu.summary() + "; grad_W " + cw.summary();
        set_timing(r, t);
        fill_rates(r, bytes, flops, copy_gbs);
        rows.push_back(r);
    };

    for (const std::string &name : implementations_of("predict_backward", device, a)) {
        Options options;
        options.device = device;
        options.implementation = name;
        grad_u.poison();
        grad_W.poison();
        if (Status st = predict_backward(g.view(0), u.view(0), W.view(0), grad_u.view(), grad_W.view(), options);
            !st.ok()) {
            rows.push_back(failed_row("predict_backward", shape, name, device, st));
            continue;
        }
        grad_u.download();
        grad_W.download();
        int call = 0;
        const Timing t = time_calls(device, a.warmup, a.repeats, [&] {
            check(predict_backward(g.view(call), u.view(call), W.view(call), grad_u.view(), grad_W.view(), options));
            call++;
        });
        add_row(name, t);
    }
    if (device == Device::cpu && wanted(a, kNaiveOpenmp)) {
        grad_u.poison();
        grad_W.poison();
        const float *g0 = g.first().host().data(), *u0 = u.first().host().data(), *W0 = W.first().host().data();
        reference::predict_grad_input_naive_openmp(s, g0, W0, grad_u.host().data());
        reference::predict_grad_weight_naive_openmp(s, g0, u0, grad_W.host().data());
        const Timing t = time_calls(device, 1, std::min(a.repeats, 3), [&] {
            reference::predict_grad_input_naive_openmp(s, g0, W0, grad_u.host().data());
            reference::predict_grad_weight_naive_openmp(s, g0, u0, grad_W.host().data());
        });
        add_row(kNaiveOpenmp, t);
    }
}

// Routing rows (3 iterations, b0 absent): the DigitCaps layer (u, W -> v)
// and routing alone (u_hat -> v). The bytes floor of the layer is u and W
// read once and v written once; one write of u_hat (what the layer need not
// do) is shown beside it for scale.
void bench_routing(const BenchArgs &a, const BenchShape &shape, Device device, double copy_gbs, double write_gbs,
                   std::mt19937_64 &rng, std::vector<Row> &rows) {
    constexpr int kIterations = 3;
    const auto &p = shape.s;  // B, I, K, J, E
    const reference::DigitCapsShape s{p.batch, p.in_caps, p.in_dim, p.out_caps, p.out_dim};
    const double u_hat_bytes = 4.0 * s.routing().u_hat_size();
    // Routing alone: per iteration 2 passes over u_hat of 2 flops per element
    // (weighted sum, agreement); the layer adds the prediction.
    const double route_flops = 4.0 * s.routing().u_hat_size() * kIterations;
    const double layer_flops = route_flops + 2.0 * s.routing().u_hat_size() * s.in_dim;
    const reference::Tolerance tol{1e-5, 1e-4};

    // `more`: further outputs checked too (the training pairs' routing_s and
    // routing_c), each against its reference at its tolerance.
    struct CheckedOutput {
        Tensor *tensor;
        const std::vector<double> *ref;
        reference::Tolerance tol;
    };
    auto run_op = [&](const std::string &op, const std::vector<double> &ref, double bytes, double flops,
                      const std::function<Status(const Options &, int)> &call, Tensor &v,
                      const std::vector<CheckedOutput> &more = {}) {
        for (const std::string &implementation : implementations_of(op, device, a, kIterations)) {
            Options options;
            options.device = device;
            options.implementation = implementation;
            v.poison();
            for (const CheckedOutput &m : more) m.tensor->poison();
            if (Status st = call(options, 0); !st.ok()) {  // e.g. fused blocks past 48 KB of shared memory: n/a
                rows.push_back(failed_row(op, shape, implementation, device, st));
                continue;
            }
            v.download();
            auto c = reference::compare(v.host().data(), ref, tol);
            for (const CheckedOutput &m : more) {
                m.tensor->download();
                const auto cm = reference::compare(m.tensor->host().data(), *m.ref, m.tol);
                if (!cm.passed && c.passed) c = cm;
            }
            Row r = timed_routing_row(a, op, shape, options, c, call);
            fill_rates(r, bytes, flops, copy_gbs);
            r.u_hat_write_us = u_hat_bytes / (write_gbs * 1e3);
            rows.push_back(r);
        }
    };

    Tensor v({s.batch, s.out_caps, s.out_dim}, device);
    if (runs_op(a, "digitcaps")) {  // and digitcaps_with_s
        const double input_bytes = 4.0 * (s.u_size() + s.W_size());
        const int sets = rotation_sets(device, input_bytes);
        InputSets u({s.batch, s.in_caps, s.in_dim}, device, sets, rng, "u");
        InputSets W({s.in_caps, s.out_caps, s.out_dim, s.in_dim}, device, sets, rng, "W");
        const auto ref =
            reference::digitcaps_f64(s, u.first().host().data(), W.first().host().data(), nullptr, kIterations);
        run_op(
            "digitcaps", ref, input_bytes + 4.0 * s.v_size(), layer_flops,
            [&](const Options &o, int n) {
                return digitcaps(u.view(n), W.view(n), TensorView{}, v.view(), kIterations, o);
            },
            v);
        // The same layer keeping every iteration's s for the backward: its
        // extra bytes are routing_s's write.
        Tensor routing_s({kIterations, s.batch, s.out_caps, s.out_dim}, device);
        const auto ref_s = reference::digitcaps_routing_s_f64(s, u.first().host().data(), W.first().host().data(),
                                                              nullptr, kIterations);
        // routing_s's values are sums over in_caps, larger than v's (at most
        // 1): its elementwise tolerance scales with them.
        double largest_s = 0;
        for (double x : ref_s) largest_s = std::max(largest_s, std::fabs(x));
        const reference::Tolerance tol_s{tol.atol * std::max(largest_s, 1.0), tol.rtol};
        run_op("digitcaps_with_s", ref, input_bytes + 4.0 * (1 + kIterations) * s.v_size(), layer_flops,
               [&](const Options &o, int n) {
                   return digitcaps_with_s(u.view(n), W.view(n), TensorView{}, v.view(), routing_s.view(), kIterations,
                                           o);
               },
               v, {{&routing_s, &ref_s, tol_s}});
        // And keeping every iteration's c too: routing_c's write besides.
        Tensor routing_c({kIterations, s.batch, s.in_caps, s.out_caps}, device);
        const auto ref_c = reference::digitcaps_routing_c_f64(s, u.first().host().data(), W.first().host().data(),
                                                              nullptr, kIterations);
        run_op(
            "digitcaps_with_c", ref,
            input_bytes + 4.0 * (1 + kIterations) * s.v_size() + 4.0 * kIterations * s.batch * s.in_caps * s.out_caps,
            layer_flops,
            [&](const Options &o, int n) {
                return digitcaps_with_c(u.view(n), W.view(n), TensorView{}, v.view(), routing_s.view(),
                                        routing_c.view(), kIterations, o);
            },
            v, {{&routing_s, &ref_s, tol_s}, {&routing_c, &ref_c, tol}});
    }
    if (runs_op(a, "route")) {
        const int sets = rotation_sets(device, u_hat_bytes);
        InputSets u_hat({s.batch, s.in_caps, s.out_caps, s.out_dim}, device, sets, rng, "u_hat");
        const auto ref = reference::route_f64(s.routing(), u_hat.first().host().data(), nullptr, kIterations);
        run_op(
            "route", ref, u_hat_bytes + 4.0 * s.v_size(), route_flops,
            [&](const Options &o, int n) { return route(u_hat.view(n), TensorView{}, v.view(), kIterations, o); }, v);
    }
}

// Capsule convolution rows for one shape: every implementation of capsconv
// for the device (Halide schedules, hand-written CUDA, cudnn, im2col_cublas;
// on the CPU the naive OpenMP loops too), and on CUDA the bare cuDNN
// convolution (cudnn_core) on inputs already in its layouts. Every row is
// checked against the float64 reference first; peers report their extra
// device memory.
void bench_capsconv(const BenchArgs &a, const CapsConvBenchShape &shape, Device device, double copy_gbs,
                    std::mt19937_64 &rng, std::vector<Row> &rows) {
    const reference::CapsConvShape &s = shape.s;
    const int64_t OH = s.out_height(), OW = s.out_width();
    const std::vector<int64_t> in_shape{s.batch, s.height, s.width, s.in_caps, 4, 4};
    const std::vector<int64_t> filter_shape{s.kernel_h, s.kernel_w, s.in_caps, s.out_caps, 4, 4};
    const double input_bytes = 4.0 * (s.input_size() + s.filter_size());
    const int sets = rotation_sets(device, input_bytes);
    InputSets input(in_shape, device, sets, rng, "input");
    InputSets filter(filter_shape, device, sets, rng, "filter");
    Tensor output({s.batch, OH, OW, s.out_caps, 4, 4}, device);
    const double bytes = input_bytes + 4.0 * s.output_size();
    const auto ref = reference::capsconv_f64(s, input.first().host().data(), filter.first().host().data());
    const auto tol = reference::float32_sum_tolerance(s.kernel_h * s.kernel_w * s.in_caps * 4);
    const ConvParams params{static_cast<int>(s.stride), static_cast<int>(s.pad)};
    char dims_json[256], dims_text[160];
    std::snprintf(dims_json, sizeof dims_json,
                  "{\"n\": %lld, \"H\": %lld, \"W\": %lld, \"ci\": %lld, \"kh\": %lld, \"kw\": %lld, \"co\": %lld, "
                  "\"stride\": %lld, \"pad\": %lld}",
                  (long long)s.batch, (long long)s.height, (long long)s.width, (long long)s.in_caps,
                  (long long)s.kernel_h, (long long)s.kernel_w, (long long)s.out_caps, (long long)s.stride,
                  (long long)s.pad);
    std::snprintf(dims_text, sizeof dims_text, "n=%lld %lldx%lld ci=%lld k=%lldx%lld co=%lld stride=%lld pad=%lld",
                  (long long)s.batch, (long long)s.height, (long long)s.width, (long long)s.in_caps,
                  (long long)s.kernel_h, (long long)s.kernel_w, (long long)s.out_caps, (long long)s.stride,
                  (long long)s.pad);

    auto new_row = [&](const std::string &name) {
        Row r;
        r.op = "capsconv", r.shape = shape.name, r.implementation = name, r.family = family_of(name, device);
        r.dims_json = dims_json, r.dims_text = dims_text;
        return r;
    };
    auto add_row = [&](const std::string &name, const reference::Comparison &c, const Timing &t) {
        Row r = new_row(name);
        take_check(r, c);
        set_timing(r, t);
        fill_rates(r, bytes, s.flops(), copy_gbs);
        if (device == Device::cuda) {
            int64_t extra = 0;
            Options options;
            options.device = device;
            check(detail::hand_cuda_capsconv_extra_memory(name, input.view(0), filter.view(0), params, options, &extra,
                                                          &r.extra_note));
            r.extra_bytes = static_cast<double>(extra);
        }
        rows.push_back(r);
    };

    std::vector<std::string> names = implementations_of("capsconv", device, a);
    for (const std::string &name : names) {
        Options options;
        options.device = device;
        options.implementation = name;
        output.poison();
        if (Status st = capsconv(input.view(0), filter.view(0), output.view(), params, options); !st.ok()) {
            Row r = new_row(name);  // e.g. a Winograd form on a 5x5 filter: n/a
            mark_failed(r, st);
            rows.push_back(r);
            continue;
        }
        output.download();
        const auto c = reference::compare(output.host().data(), ref, tol);
        int call = 0;
        const Timing t = time_calls(device, a.warmup, a.repeats, [&] {
            check(capsconv(input.view(call), filter.view(call), output.view(), params, options));
            call++;
        });
        add_row(name, c, t);
    }

    const bool have_cudnn = std::find(names.begin(), names.end(), "cudnn") != names.end();
    if (device == Device::cuda && have_cudnn && wanted(a, kCudnnCore)) {
        // The convolution alone, on copies of the inputs already permuted (on
        // the host) into NCHW / KCRS; its output Y [n*4, co*4, OH, OW] is
        // permuted back on the host and checked like the others.
        const int64_t P_in = s.height * s.width, P_out = OH * OW;
        std::vector<std::unique_ptr<Tensor>> xs, ws;
        for (int n = 0; n < sets; n++) {
            xs.push_back(
                std::make_unique<Tensor>(std::vector<int64_t>{s.batch * 4, s.in_caps * 4, s.height, s.width}, device));
            ws.push_back(std::make_unique<Tensor>(
                std::vector<int64_t>{s.out_caps * 4, s.in_caps * 4, s.kernel_h, s.kernel_w}, device));
            const float *I = input.first().host().data(), *K = filter.first().host().data();
            std::vector<float> &x = xs.back()->host(), &w = ws.back()->host();
            for (int64_t nn = 0; nn < s.batch; nn++)
                for (int64_t pix = 0; pix < P_in; pix++)
                    for (int64_t ci = 0; ci < s.in_caps; ci++)
                        for (int64_t i = 0; i < 4; i++)
                            for (int64_t c = 0; c < 4; c++)
                                x[((nn * 4 + i) * s.in_caps * 4 + ci * 4 + c) * P_in + pix] =
                                    I[((nn * P_in + pix) * s.in_caps + ci) * 16 + i * 4 + c];
            const int64_t taps = s.kernel_h * s.kernel_w;
            for (int64_t t = 0; t < taps; t++)
                for (int64_t ci = 0; ci < s.in_caps; ci++)
                    for (int64_t co = 0; co < s.out_caps; co++)
                        for (int64_t c = 0; c < 4; c++)
                            for (int64_t j = 0; j < 4; j++)
                                w[((co * 4 + j) * s.in_caps * 4 + ci * 4 + c) * taps + t] =
                                    K[((t * s.in_caps + ci) * s.out_caps + co) * 16 + c * 4 + j];
            xs.back()->upload();
            ws.back()->upload();
        }
        Tensor y({s.batch * 4, s.out_caps * 4, OH, OW}, device);
        Options options;
        options.device = device;
        y.poison();
        auto core = [&](int n) {
            return detail::run_cudnn_capsconv_core(input.view(0), filter.view(0), params, xs[n % sets]->view().data,
                                                   ws[n % sets]->view().data, y.view().data, options);
        };
        if (Status st = core(0); !st.ok()) {
            Row r = new_row(kCudnnCore);
            r.us = r.call_us = r.gbs = r.gflops = r.pct_bandwidth = std::nan("");
            r.check_summary = std::string("error: ") + status_code_name(st.code) + ": " + st.message;
            rows.push_back(r);
        } else {
            y.download();
            std::vector<float> o(ref.size());
            for (int64_t nn = 0; nn < s.batch; nn++)
                for (int64_t pix = 0; pix < P_out; pix++)
                    for (int64_t co = 0; co < s.out_caps; co++)
                        for (int64_t i = 0; i < 4; i++)
                            for (int64_t j = 0; j < 4; j++)
                                o[((nn * P_out + pix) * s.out_caps + co) * 16 + i * 4 + j] =
                                    y.host()[((nn * 4 + i) * s.out_caps * 4 + co * 4 + j) * P_out + pix];
            const auto c = reference::compare(o.data(), ref, tol);
            int call = 0;
            const Timing t = time_calls(device, a.warmup, a.repeats, [&] { check(core(call++)); });
            add_row(kCudnnCore, c, t);
        }
    }
    if (device == Device::cpu && wanted(a, kNaiveOpenmp)) {
        const auto [c, t] = check_and_time_naive(a, output, ref, tol, [&](int call, float *out) {
            reference::capsconv_naive_openmp(s, input.view(call).data, filter.view(call).data, out);
        });
        add_row(kNaiveOpenmp, c, t);
    }
}

// DigitCaps backward rows (3 iterations, b0 absent): grad_u and grad_W from
// u, W and grad_v, checked against the float64 reference's gradients. Bytes
// floor: u, W, grad_v read once, grad_u and grad_W written once. Flops: the
// recomputed forward plus about twice its work for the gradients, counted
// as 3x the layer's (a rough figure, for scale only).
void bench_digitcaps_backward(const BenchArgs &a, const BenchShape &shape, Device device, double copy_gbs,
                              std::mt19937_64 &rng, std::vector<Row> &rows) {
    constexpr int kIterations = 3;
    const auto &p = shape.s;
    const reference::DigitCapsShape s{p.batch, p.in_caps, p.in_dim, p.out_caps, p.out_dim};
    const double input_bytes = 4.0 * (s.u_size() + s.W_size() + s.v_size());
    const int sets = rotation_sets(device, input_bytes);
    InputSets u({s.batch, s.in_caps, s.in_dim}, device, sets, rng, "u");
    InputSets W({s.in_caps, s.out_caps, s.out_dim, s.in_dim}, device, sets, rng, "W");
    InputSets grad_v({s.batch, s.out_caps, s.out_dim}, device, sets, rng, "grad_v");
    Tensor grad_u({s.batch, s.in_caps, s.in_dim}, device), grad_W({s.in_caps, s.out_caps, s.out_dim, s.in_dim}, device);
    const auto ref = reference::digitcaps_backward_f64(s, u.first().host().data(), W.first().host().data(), nullptr,
                                                       grad_v.first().host().data(), kIterations);
    const double bytes = input_bytes + 4.0 * (s.u_size() + s.W_size());
    const double flops = 3.0 * (4.0 * kIterations + 2.0 * s.in_dim) * s.routing().u_hat_size();
    // As tests/digitcaps_checks.h: elementwise to 1e-4 of the largest gradient.
    auto tolerance = [](const std::vector<double> &r) {
        double m = 0;
        for (double x : r) m = std::max(m, std::fabs(x));
        return reference::Tolerance{1e-4 * std::max(m, 1e-30), 1e-4};
    };
    // digitcaps_backward_with_s starts from the s of the device's default
    // digitcaps_with_s on input set 0 (every set holds the same values).
    Tensor routing_s({kIterations, s.batch, s.out_caps, s.out_dim}, device);
    Tensor v({s.batch, s.out_caps, s.out_dim}, device);
    Options forward_options;
    forward_options.device = device;
    const Status forward =
        digitcaps_with_s(u.view(0), W.view(0), TensorView{}, v.view(), routing_s.view(), kIterations, forward_options);
    // digitcaps_backward_with_c from the s and c of the device's default
    // digitcaps_with_c (cuda_tensor: CUDA only, as the backward).
    const int64_t c_floats = kIterations * s.batch * s.in_caps * s.out_caps;
    Tensor routing_s_of_c({kIterations, s.batch, s.out_caps, s.out_dim}, device);
    Tensor routing_c({kIterations, s.batch, s.in_caps, s.out_caps}, device);
    const bool with_c_built = !implementations_of("digitcaps_backward_with_c", device, a, kIterations).empty();
    const Status forward_c = with_c_built
                                 ? digitcaps_with_c(u.view(0), W.view(0), TensorView{}, v.view(), routing_s_of_c.view(),
                                                    routing_c.view(), kIterations, forward_options)
                                 : Status::success();
    // A pair's backward row whose forward failed says so: the forward's
    // refusal alone read as the backward's own.
    auto needs_forward = [](const std::string &op, const std::string &forward_op, const Status &failed) {
        return Status{failed.code,
                      op + " starts from " + forward_op + "'s outputs, which failed here: " + failed.message};
    };
    for (const std::string op : {"digitcaps_backward", "digitcaps_backward_with_s", "digitcaps_backward_with_c"}) {
        const bool with_s = op == "digitcaps_backward_with_s", with_c = op == "digitcaps_backward_with_c";
        auto call = [&](const Options &o, int n) {
            if (with_c) {
                if (!forward_c.ok()) return needs_forward(op, "digitcaps_with_c", forward_c);
                return digitcaps_backward_with_c(u.view(n), W.view(n), TensorView{}, routing_s_of_c.view(),
                                                 routing_c.view(), grad_v.view(n), grad_u.view(), grad_W.view(),
                                                 TensorView{}, kIterations, o);
            }
            if (with_s) {
                if (!forward.ok()) return needs_forward(op, "digitcaps_with_s", forward);
                return digitcaps_backward_with_s(u.view(n), W.view(n), TensorView{}, routing_s.view(), grad_v.view(n),
                                                 grad_u.view(), grad_W.view(), TensorView{}, kIterations, o);
            }
            return digitcaps_backward(u.view(n), W.view(n), TensorView{}, grad_v.view(n), grad_u.view(), grad_W.view(),
                                      TensorView{}, kIterations, o);
        };
        for (const std::string &implementation : implementations_of(op, device, a, kIterations)) {
            Options options;
            options.device = device;
            options.implementation = implementation;
            grad_u.poison();
            grad_W.poison();
            if (Status st = call(options, 0); !st.ok()) {
                rows.push_back(failed_row(op, shape, implementation, device, st));
                continue;
            }
            grad_u.download();
            grad_W.download();
            const auto cu = reference::compare(grad_u.host().data(), ref.grad_u, tolerance(ref.grad_u));
            const auto cw = reference::compare(grad_W.host().data(), ref.grad_W, tolerance(ref.grad_W));
            Row r = timed_routing_row(a, op, shape, options, cu.passed ? cw : cu, call);
            r.valid = cu.passed && cw.passed;
            r.max_abs_error = std::max(cu.max_abs_error, cw.max_abs_error);
            r.rel_l2_error = std::max(cu.relative_l2_error, cw.relative_l2_error);
            r.check_summary = "grad_u " + cu.summary() + "; grad_W " + cw.summary();
            const double state_bytes = with_s   ? 4.0 * kIterations * s.v_size()
                                       : with_c ? 4.0 * (kIterations * s.v_size() + c_floats)
                                                : 0.0;
            fill_rates(r, bytes + state_bytes, flops, copy_gbs);
            rows.push_back(r);
        }
    }
}

// The training pairs' rows (digitcaps_with_s, digitcaps_backward_with_s,
// and the same _with_c) are measured against their plain op's naive row.
std::string plain_op(const std::string &op) {
    for (const std::string suffix : {"_with_s", "_with_c"}) {
        if (op.size() > suffix.size() && op.compare(op.size() - suffix.size(), suffix.size(), suffix) == 0) {
            return op.substr(0, op.size() - suffix.size());
        }
    }
    return op;
}

void fill_speedups(std::vector<Row> &rows, Device device) {
    for (Row &r : rows) {
        const std::string base = plain_op(r.op);
        for (const Row &n : rows) {
            if (n.op == base && n.shape == r.shape && n.implementation == naive_name(base, device)) {
                r.speedup_vs_naive = n.us / r.us;
            }
        }
    }
}

// A number for the tables in `format`, or "-" where there is none (a row
// that was not timed).
std::string number_text(double value, const char *format) {
    if (std::isnan(value)) return "-";
    char text[32];
    std::snprintf(text, sizeof text, format, value);
    return text;
}

// A peak-memory figure for the tables: "-" where none was measured.
std::string memory_text(double mb) { return number_text(mb, "%.1f"); }

std::string iso_time_now() {
    char text[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    return text;
}

void write_json(const std::string &path, const BenchArgs &a, const std::string &device_label, Device device,
                double copy_gbs, double write_gbs, const FmaPeak &fma_peak, const std::vector<Row> &rows,
                const std::string &date) {
    std::ofstream out(path);
    if (!out) throw UsageError{"--json: cannot write " + path};
    out << "{\n  \"tool\": \"halcaps bench\",\n  \"command\": " << json_string(a.command_line)
        << ",\n  \"date\": " << json_string(date) << ",\n  \"device\": " << json_string(device_label)
        << ",\n  \"device_kind\": " << json_string(device_name(device))
        << ",\n  \"copy_bandwidth_gbs\": " << json_number(copy_gbs)
        << ",\n  \"write_bandwidth_gbs\": " << json_number(write_gbs)
        << (fma_peak.gflops > 0 ? ",\n  \"fma_peak_gflops\": " + json_number(fma_peak.gflops) +
                                      ",\n  \"fma_peak_isa\": " + json_string(fma_peak.isa)
                                : std::string())
        << ",\n  \"rows\": [\n";
    for (size_t n = 0; n < rows.size(); n++) {
        const Row &r = rows[n];
        out << "    {\"operator\": " << json_string(r.op) << ", \"shape\": " << json_string(r.shape) << ", \"dims\": "
            << (!r.dims_json.empty()
                    ? r.dims_json
                    : "{\"B\": " + std::to_string(r.dims.batch) + ", \"I\": " + std::to_string(r.dims.in_caps) +
                          ", \"J\": " + std::to_string(r.dims.out_caps) + ", \"E\": " + std::to_string(r.dims.out_dim) +
                          ", \"K\": " + std::to_string(r.dims.in_dim) + "}")
            << ", \"implementation\": " << json_string(r.implementation) << ", \"family\": " << json_string(r.family)
            << ", \"valid\": " << (r.valid ? "true" : "false")
            << (r.applies ? std::string() : ", \"applies\": false, \"note\": " + json_string(r.check_summary))
            << ", \"max_abs_error\": " << json_number(r.max_abs_error)
            << ", \"rel_l2_error\": " << json_number(r.rel_l2_error) << ", \"us\": " << json_number(r.us)
            << ", \"call_us\": " << json_number(r.call_us) << (r.host_bound ? ", \"host_bound\": true" : "")
            << ", \"gbs\": " << json_number(r.gbs) << ", \"gflops\": " << json_number(r.gflops)
            << ", \"pct_bandwidth\": " << json_number(r.pct_bandwidth)
            << (std::isnan(r.pct_fma_peak) ? std::string() : ", \"pct_fma_peak\": " + json_number(r.pct_fma_peak))
            << ", \"speedup_vs_naive\": " << json_number(r.speedup_vs_naive)
            << ", \"floor_bytes\": " << json_number(r.floor_bytes) << ", \"floor_us\": " << json_number(r.floor_us)
            << (r.u_hat_write_us > 0 ? ", \"u_hat_write_us\": " + json_number(r.u_hat_write_us) : std::string())
            << (r.extra_bytes > 0 ? ", \"extra_bytes\": " + json_number(r.extra_bytes) : std::string())
            << (!r.extra_note.empty() ? ", \"extra_note\": " + json_string(r.extra_note) : std::string())
            << (std::isnan(r.peak_device_mb) ? std::string() : ", \"peak_device_mb\": " + json_number(r.peak_device_mb))
            << "}" << (n + 1 < rows.size() ? "," : "") << "\n";
    }
    out << "  ]\n}\n";
    if (!out) throw UsageError{"--json: writing " + path + " failed"};
}

void write_markdown(const std::string &path, const BenchArgs &a, const std::string &device_label, Device device,
                    double copy_gbs, double write_gbs, const FmaPeak &fma_peak, const std::vector<Row> &rows,
                    const std::string &date) {
    std::ofstream out(path);
    if (!out) throw UsageError{"--markdown: cannot write " + path};
    out << "# halcaps bench (" << (a.ops == "all" ? std::string("every operator") : a.ops) << ") on " << device_label
        << "\n\n"
        << "- date: " << date << "\n- command: `" << a.command_line << "`\n"
        << "- copy bandwidth measured in the same run: " << json_number(copy_gbs) << " GB/s (bytes read + written); "
        << "write-only (memset) bandwidth: " << json_number(write_gbs) << " GB/s\n"
        << (fma_peak.gflops > 0 ? "- fp32 FMA peak measured in the same run: " + json_number(fma_peak.gflops) +
                                      " GFLOP/s (" + fma_peak.isa + ", " + std::to_string(fma_peak.threads) +
                                      " threads); % FMA is each row's GFLOP/s against it\n"
                                : std::string())
        << "- every row was checked against the float64 reference (fresh random inputs, NaN-poisoned outputs) "
           "before it was timed; median of "
        << a.repeats << " calls after " << a.warmup << " warm-up calls, inputs rotated past the "
        << (device == Device::cuda ? "L2 cache" : "last-level cache") << "\n"
        << (device == Device::cuda
                ? "- µs is the device's time for a call: CUDA events around it while a wait kernel keeps the stream "
                  "busy, so the host's launch path is hidden as in a pipeline (\"host-bound\" marks a call that "
                  "waited on the device itself, whose µs includes host time); call µs is one call on an idle "
                  "stream, the launch path included; every rate and ratio uses µs (cli/common.h, Timing)\n"
                : "- µs is the host clock around a call; call µs is the same number\n")
        << "- GB/s and % copy count the bytes floor (inputs read once, outputs written once); "
        << "speed-up is against " << naive_name("predict", device) << " for the prediction, "
        << naive_name("digitcaps", device) << " for routing and the layer (3 iterations, b0 absent), "
        << naive_name("digitcaps_backward", device) << " for the layer's backward and "
        << naive_name("capsconv", device) << " for the capsule convolution\n"
        << "- device MB (DigitCaps, routing and DigitCaps backward rows on CUDA): device memory one call allocates "
           "beyond its inputs and outputs, "
           "measured with Halide's device-allocation cache on and emptied before the call (drop in "
           "cudaMemGetInfo's free memory; 2 MiB driver pages) and, for the hand-written CUDA, the "
           "cudaMallocAsync pool's high-water mark; the cache stays on for the timings "
           "(cli/bench_command.cpp, DeviceMemoryProbe)\n";
    const bool with_fma = fma_peak.gflops > 0;
    std::string current;
    // Below each group's table: why a row is n/a or wrong.
    std::vector<std::string> notes;
    auto flush_notes = [&] {
        if (!notes.empty()) out << "\n";
        for (const std::string &note : notes) out << note << "\n";
        notes.clear();
    };
    for (const Row &r : rows) {
        const std::string group = r.op + " / " + r.shape;
        if (group != current) {
            flush_notes();
            current = group;
            const std::string dims =
                !r.dims_text.empty()
                    ? r.dims_text
                    : "B=" + std::to_string(r.dims.batch) + " I=" + std::to_string(r.dims.in_caps) +
                          " K=" + std::to_string(r.dims.in_dim) + " J=" + std::to_string(r.dims.out_caps) +
                          " E=" + std::to_string(r.dims.out_dim);
            out << "\n## " << r.op << ", " << r.shape << " (" << dims << "); bytes floor "
                << json_number(r.floor_bytes / 1e6) << " MB = " << json_number(r.floor_us)
                << " µs at the copy bandwidth"
                << (r.u_hat_write_us > 0 ? "; writing u_hat once would take " + json_number(r.u_hat_write_us) +
                                               " µs at the write bandwidth"
                                         : std::string())
                << "\n\n"
                << "| implementation | family | check | µs | call µs | GB/s | % copy BW | GFLOP/s | "
                << (with_fma ? "% FMA | " : "") << "× vs " << naive_name(plain_op(r.op), device) << " | device MB"
                << (r.op == "capsconv" ? " | extra memory" : "") << " |\n|---|---|---|---:|---:|---:|---:|---:|"
                << (with_fma ? "---:|" : "") << "---:|---:|" << (r.op == "capsconv" ? "---|" : "") << "\n";
        }
        out << "| " << r.implementation << " | " << r.family << " | "
            << (r.applies && !r.valid ? "**WRONG**" : check_text(r)) << " | " << number_text(r.us, "%.1f")
            << (r.host_bound ? " (host-bound)" : "") << " | " << number_text(r.call_us, "%.1f") << " | "
            << number_text(r.gbs, "%.0f") << " | " << number_text(r.pct_bandwidth, "%.1f%%") << " | "
            << number_text(r.gflops, "%.0f") << " | "
            << (with_fma ? number_text(r.pct_fma_peak, "%.1f%%") + " | " : std::string())
            << number_text(r.speedup_vs_naive, "%.2f") << " | " << memory_text(r.peak_device_mb) << " |";
        if (r.op == "capsconv") {
            out << " " << (r.extra_bytes > 0 ? json_number(r.extra_bytes / 1e6) + " MB (" + r.extra_note + ")" : "")
                << " |";
        }
        out << "\n";
        if (!r.valid) notes.push_back("- `" + r.implementation + "` (" + check_text(r) + "): " + r.check_summary);
    }
    flush_notes();
    if (!out) throw UsageError{"--markdown: writing " + path + " failed"};
}

// Every name in --implementations must name a row the run can have: an
// implementation of one of the operators run, on the device, or one of the
// bench's own peer rows. A misspelt name would otherwise give an empty
// table and exit 0.
void check_implementation_names(const BenchArgs &a, Device device) {
    std::vector<std::string> known;
    auto add = [&](const std::string &name) {
        if (std::find(known.begin(), known.end(), name) == known.end()) known.push_back(name);
    };
    for (const std::string &op : bench_ops(a.ops)) {
        for (const std::string &peer : peer_rows(op, device)) add(peer);
    }
    for (const auto &info : list_implementations()) {
        if (info.device == device && runs_op(a, info.op)) add(info.implementation);
    }
    for (const std::string &name : a.implementations) {
        if (std::find(known.begin(), known.end(), name) != known.end()) continue;
        std::string list;
        for (const std::string &k : known) list.append(list.empty() ? "" : ", ").append(k);
        throw UsageError{"--implementations: '" + name + "' is not an implementation of --op " + a.ops + " on " +
                         device_name(device) + " (these are: " + list + ")"};
    }
}

void run_bench(BenchArgs &a) {
    const Device device = parse_device(a.device);
    std::vector<BenchShape> shapes;
    for (const auto &name : a.shapes) shapes.push_back(parse_shape(name));
    std::vector<CapsConvBenchShape> capsconv_shapes;
    for (const auto &name : a.capsconv_shapes) capsconv_shapes.push_back(parse_capsconv_shape(name));
    check_implementation_names(a, device);
    if (a.seed == 0) a.seed = std::random_device{}() | 1;
    std::mt19937_64 rng(a.seed);
    const std::string device_label = device == Device::cuda     ? cuda_device_name()
                                     : device == Device::opencl ? opencl_device_name()
                                                                : "CPU";
    const std::string date = iso_time_now();

#if HALCAPS_WITH_CUDA
    // Halide's device-allocation cache on for the whole run (Halide's default
    // is off): pipelines with device intermediates (the routing ops) then
    // time their kernels, not cuMemAlloc / cuMemFree, and every row runs under
    // the same setting. DeviceMemoryProbe relies on it.
    if (device == Device::cuda) halide_reuse_device_allocations(nullptr, true);
#endif
    const double copy_gbs = measured_copy_bandwidth_gbs(device);
    const double write_gbs = measured_write_bandwidth_gbs(device);
    std::printf(
        "halcaps bench: %s (%s), seed %llu, measured now: copy %.0f GB/s (read + write), write-only %.0f GB/s\n",
        device_label.c_str(), device_name(device), (unsigned long long)a.seed, copy_gbs, write_gbs);

    // Every CPU row is also put against the fp32 FMA peak, measured now on
    // the same machine, so each row shows its distance to the limit.
    FmaPeak fma_peak;
    if (device == Device::cpu) {
        fma_peak = measure_cpu_fma_peak();
        std::printf("fp32 FMA peak measured now: %.0f GFLOP/s (%s, %d threads)\n", fma_peak.gflops,
                    fma_peak.isa.c_str(), fma_peak.threads);
    }

    std::vector<Row> rows;
    for (const auto &shape : shapes) {
        if (runs_op(a, "predict")) bench_forward(a, shape, device, copy_gbs, rng, rows);
        if (runs_op(a, "predict_backward")) bench_backward(a, shape, device, copy_gbs, rng, rows);
        if (runs_op(a, "digitcaps") || runs_op(a, "route")) {
            bench_routing(a, shape, device, copy_gbs, write_gbs, rng, rows);
        }
        if (runs_op(a, "digitcaps_backward")) bench_digitcaps_backward(a, shape, device, copy_gbs, rng, rows);
    }
    if (runs_op(a, "capsconv")) {
        for (const auto &shape : capsconv_shapes) bench_capsconv(a, shape, device, copy_gbs, rng, rows);
    }
    fill_speedups(rows, device);
    if (fma_peak.gflops > 0) {
        for (Row &r : rows) {
            if (r.valid && std::isfinite(r.gflops) && r.gflops > 0) r.pct_fma_peak = 100.0 * r.gflops / fma_peak.gflops;
        }
    }

    std::printf("%-17s %-11s %-18s %-12s %-6s %9s %9s %8s %7s %9s %6s %8s %9s\n", "op", "shape", "implementation",
                "family", "check", "us", "call us", "GB/s", "%copy", "GFLOP/s", "%FMA", "x naive", "device MB");
    int wrong = 0;
    for (const Row &r : rows) {
        wrong += r.applies && !r.valid;
        std::printf("%-17s %-11s %-18s %-12s %-6s %9s %9s %8s %7s %9s %6s %8s %9s\n", r.op.c_str(), r.shape.c_str(),
                    r.implementation.c_str(), r.family.c_str(), check_text(r), number_text(r.us, "%.1f").c_str(),
                    number_text(r.call_us, "%.1f").c_str(), number_text(r.gbs, "%.0f").c_str(),
                    number_text(r.pct_bandwidth, "%.1f%%").c_str(), number_text(r.gflops, "%.0f").c_str(),
                    number_text(r.pct_fma_peak, "%.1f%%").c_str(), number_text(r.speedup_vs_naive, "%.2f").c_str(),
                    memory_text(r.peak_device_mb).c_str());
        if (r.host_bound) std::printf("    host-bound: the call waits on the device, so us includes host time\n");
        if (!r.valid) std::printf("    %s\n", r.check_summary.c_str());
        if (r.extra_bytes > 0) std::printf("    extra memory %.1f MB: %s\n", r.extra_bytes / 1e6, r.extra_note.c_str());
    }
    if (!a.json_path.empty())
        write_json(a.json_path, a, device_label, device, copy_gbs, write_gbs, fma_peak, rows, date);
    if (!a.markdown_path.empty()) {
        write_markdown(a.markdown_path, a, device_label, device, copy_gbs, write_gbs, fma_peak, rows, date);
    }
    if (wrong) throw UsageError{std::to_string(wrong) + " implementation(s) gave wrong results"};
}

}  // namespace

void add_bench_command(CLI::App &app, const std::string &command_line) {
    auto args = std::make_shared<BenchArgs>();
    args->command_line = command_line;
    CLI::App *cmd = app.add_subcommand(
        "bench",
        "Every implementation of capsule prediction (forward and both gradients), the DigitCaps layer, routing "
        "and the capsule convolution, "
        "side by side on a set of shapes: "
        "each checked against the float64 reference, then timed; prints a table, writes JSON and Markdown.");
    cmd->add_option("--device", args->device, "cpu, cuda, opencl, or auto (cuda when a CUDA device is present)")
        ->check(CLI::IsMember({"cpu", "cuda", "opencl", "auto"}))
        ->capture_default_str();
    cmd->add_option("--op", args->ops,
                    "predict, predict_backward, digitcaps (the layer, 3 iterations), route (routing alone), "
                    "digitcaps_backward (the layer's gradients, 3 iterations), capsconv (the 4x4-pose capsule "
                    "convolution), or all")
        ->check(CLI::IsMember(
            {"predict", "predict_backward", "digitcaps", "route", "digitcaps_backward", "capsconv", "all"}))
        ->capture_default_str();
    cmd->add_option("--shapes", args->shapes,
                    "shapes to run: mnist_b128, mnist_b512, wide_b32, or B:I:K:J:E (comma-separated)")
        ->delimiter(',')
        ->capture_default_str();
    cmd->add_option("--capsconv-shapes", args->capsconv_shapes,
                    "capsconv shapes: seed, layer, stride2, or n:H:W:ci:k:co:stride:pad (comma-separated)")
        ->delimiter(',')
        ->capture_default_str();
    cmd->add_option("--implementations", args->implementations,
                    "only these implementations (comma-separated; see `halcaps info`; also cublas_gemm_only, "
                    "cudnn_core and naive-openmp); default: all")
        ->delimiter(',');
    cmd->add_option("--warmup", args->warmup, "untimed calls before timing")
        ->check(CLI::Range(0, 100000))
        ->capture_default_str();
    cmd->add_option("--repeats", args->repeats, "timed calls; the median is reported (at least 20 for results)")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    cmd->add_option("--seed", args->seed, "random seed for the inputs (0: draw one and print it)")
        ->capture_default_str();
    cmd->add_option("--json", args->json_path, "write the rows as JSON here (input of bench/plot_bench.py)");
    cmd->add_option("--markdown", args->markdown_path, "write the rows as Markdown tables here");
    cmd->callback([args] { run_bench(*args); });
}

}  // namespace halcaps::cli

// Entry points for capsule prediction: argument checks, device and
// implementation choice, then the Halide kernels.
#include <cstdint>
#include <vector>

#include "argument_checks.h"
#include "halide_call.h"
#include "hand_cuda.h"
#include "kernel_registry.h"
#include "operator_support.h"

namespace halcaps {

namespace {

using detail::ArgumentChecks;
using detail::find_halide_kernel;
using detail::HalideKernelEntry;
using detail::check_device_ready;
using detail::chosen_implementation;
using detail::find_kernel;

// batch_walk's fast path (schedules/capsule_prediction_schedules.cpp,
// predict_batch_walk): out_dim 16, in_dim 8, a batch that is a multiple of
// 128. Its kernel stores 8 bytes at a time and so requires u_hat to start on
// an 8-byte boundary (misaligned_pointer otherwise, from the kernel's own
// check); device tensors are 16-byte aligned already (halide_call.cpp), a
// host tensor may not be.
bool batch_walk_fits(const TensorView &u, const TensorView &u_hat) {
    return u_hat.shape[3] == 16 && u.shape[2] == 8 && u_hat.shape[0] % 128 == 0 &&
           reinterpret_cast<std::uintptr_t>(u_hat.data) % 8 == 0;
}

// batch_rows' fast path (the same function, whole_row): batch_walk's, with
// out_caps 8 to 32 (a block is 8 * out_caps x 2 threads). Elsewhere it runs
// batch_walk's mapping in a wider block, slower than batch_walk itself.
bool batch_rows_fits(const TensorView &u, const TensorView &u_hat) {
    return batch_walk_fits(u, u_hat) && u_hat.shape[2] >= 8 && u_hat.shape[2] <= 32;
}

// capsule_runs' fast path (schedules/capsule_prediction_schedules.cpp,
// predict_capsule_runs with 2 capsules a block and 2 row groups): out_dim
// and in_caps even, in_dim 8 or 16, an even batch with the block's u tile
// (2 capsules x batch / 2 rows x in_dim floats) within 48 KB of shared
// memory (batch * in_dim at most 12288), out_caps * out_dim at most 1024
// (the block's threads), and u_hat on an 8-byte boundary (its stores are 8
// bytes; misaligned_pointer from the kernel's own check otherwise). The
// default takes it where it was measured faster on an H200, device time
// (docs/history.md: nvidia-h200-capsule-runs/, runs 13-15), up to out_caps *
// out_dim 512, the most measured:
// - in_dim 8, out_caps * out_dim up to 256: faster than batch_rows at MNIST
//   (b128 34.1 us against 36.3, b512 109.4 against 132.3) and than
//   batch_vectors at b32 and b64 (14.7 / 21.2 against 15.5 / 25.7);
// - in_dim 8, out_caps * out_dim 320 to 512: 2-6% faster than batch_rows at
//   b256 and b512, but up to 1.7% slower at b128 (out_caps 24: 75.4 against
//   74.1), so only from b256 on;
// - in_dim 16: 1.2-2.0x faster than batch_vectors at b128 and b512, out_caps
//   10 to 32, but slower at b32 and b64 (b64, out_caps 10: 49.9 against
//   41.3; wide b32: 182.2 against 106.3), where each row group reads W for
//   few rows; so only from b128 on.
bool capsule_runs_fits(const TensorView &u, const TensorView &u_hat) {
    const int64_t batch = u_hat.shape[0], in_caps = u_hat.shape[1], out_caps = u_hat.shape[2],
                  out_dim = u_hat.shape[3], in_dim = u.shape[2];
    const int64_t row = out_caps * out_dim;
    const bool measured_faster = in_dim == 8 ? (row <= 256 || batch >= 256) : batch >= 128;
    return out_dim % 2 == 0 && in_caps % 2 == 0 && (in_dim == 8 || in_dim == 16) && batch % 2 == 0 &&
           batch * in_dim <= 12288 && row <= 512 && measured_faster &&
           reinterpret_cast<std::uintptr_t>(u_hat.data) % 8 == 0;
}

// The `vectors` gradients' fast path (schedules/capsule_prediction_schedules.cpp,
// grad_input_row_vectors and grad_weight_quads): out_dim 16, in_dim 8 or 16.
// Their kernels load and store 16 bytes at a time and so require every tensor
// to start on a 16-byte boundary (misaligned_pointer otherwise, from the
// kernels' own checks); device tensors are already (halide_call.cpp), a host
// tensor may not be.
bool gradient_vectors_fit(const std::vector<const TensorView *> &tensors, const TensorView &u, const TensorView &g) {
    if (g.shape[3] != 16 || (u.shape[2] != 8 && u.shape[2] != 16)) return false;
    for (const TensorView *t : tensors) {
        if (!detail::on_16_byte_boundary(*t)) return false;
    }
    return true;
}

}  // namespace

std::string default_implementation(Device device) { return detail::runs_gpu_schedules(device) ? "tuned" : "cpu"; }

Status predict(const TensorView &u, const TensorView &W, const TensorView &u_hat, const Options &options) {
    const char *op = "predict";
    ArgumentChecks checks(op);
    checks.tensor("u", u, {"batch", "in_caps", "in_dim"});
    checks.tensor("W", W, {"in_caps", "out_caps", "out_dim", "in_dim"});
    checks.tensor("u_hat", u_hat, {"batch", "in_caps", "out_caps", "out_dim"});
    const Device device = checks.resolve_device(options.device);
    if (!checks.status().ok()) return checks.status();
    if (Status s = check_device_ready(op, device); !s.ok()) return s;

    std::string implementation = chosen_implementation(options, device);
    // On CUDA the forward's default is `capsule_runs` where its fast path
    // applies and it was measured faster (capsule_runs_fits; its times
    // above), else `batch_rows` where
    // its own does (batch_rows_fits), else `batch_walk` where its own does
    // (batch_walk_fits), else `batch_vectors`: the fastest Halide forwards
    // measured on an H200 (device time). MNIST b128: batch_rows
    // 36.5 / 36.7 us against batch_walk's 38.1 / 38.0 in one run (seeds 823
    // and 824, docs/history.md: nvidia-h200-batch-rows/run2), b512 132.2 /
    // 132.0 against 131.2 / 131.4, out_caps 32 96.7 / 96.6 against 108.3;
    // batch_walk 38.0 against batch_vectors' 47.3 in an earlier run (seed
    // 391, nvidia-h200-batch-walk/final). Wide b32 (K = 16, outside both fast
    // paths): batch_vectors 106.7 us, batch_walk 1112.6.
    if (options.implementation.empty() && detail::runs_gpu_schedules(device)) {
        implementation = capsule_runs_fits(u, u_hat) ? "capsule_runs"
                         : batch_rows_fits(u, u_hat)   ? "batch_rows"
                         : batch_walk_fits(u, u_hat)   ? "batch_walk"
                                                       : "batch_vectors";
    }
    if (device == Device::cuda && detail::is_hand_cuda_implementation(op, implementation)) {
        return detail::run_hand_cuda_predict(implementation, u, W, u_hat, options);
    }
    const HalideKernelEntry *kernel = nullptr;
    if (Status s = find_kernel(op, "capsule_predict", implementation, device, &kernel); !s.ok()) return s;
    return detail::run_halide(op, kernel->function, device, options, {u, W}, {u_hat}, {}, {"u", "W", "u_hat"});
}

Status predict_backward(const TensorView &g, const TensorView &u, const TensorView &W, const TensorView &grad_u,
                        const TensorView &grad_W, const Options &options) {
    const char *op = "predict_backward";
    ArgumentChecks checks(op);
    checks.tensor("g", g, {"batch", "in_caps", "out_caps", "out_dim"});
    checks.tensor("u", u, {"batch", "in_caps", "in_dim"});
    checks.tensor("W", W, {"in_caps", "out_caps", "out_dim", "in_dim"});
    checks.tensor("grad_u", grad_u, {"batch", "in_caps", "in_dim"});
    checks.tensor("grad_W", grad_W, {"in_caps", "out_caps", "out_dim", "in_dim"});
    const Device device = checks.resolve_device(options.device);
    if (!checks.status().ok()) return checks.status();
    if (Status s = check_device_ready(op, device); !s.ok()) return s;

    std::string implementation = chosen_implementation(options, device);
    // On CUDA the gradients' default is `vectors` where its fast path applies
    // (gradient_vectors_fit), else `tuned`, whose mapping is faster off it.
    // Measured on an H200 (device time, seed 441,
    // docs/history.md: nvidia-h200-gradient-tries/run3): MNIST b128 vectors
    // 106.4 us (tuned 153.5), b512 347.0 (555.1), wide b32 278.6 (518.0);
    // later, vectors' grad_W with its k quads on adjacent lanes (seeds 802
    // and 803, docs/history.md: nvidia-h200-squash-groups/run5): 101.0 / 100.3
    // us at b128, 332.8 / 332.0 at b512, 247.8 / 247.9 at wide b32.
    if (options.implementation.empty() && detail::runs_gpu_schedules(device)) {
        implementation = gradient_vectors_fit({&g, &u, &W, &grad_u, &grad_W}, u, g) ? "vectors" : "tuned";
    }
    if (device == Device::cuda && detail::is_hand_cuda_implementation(op, implementation)) {
        return detail::run_hand_cuda_predict_backward(implementation, g, u, W, grad_u, grad_W, options);
    }
    // Both gradients from one pipeline (capsule_predict_backward: `fused`,
    // `fused_cpu`), else a pipeline each.
    if (const HalideKernelEntry *both = find_halide_kernel("capsule_predict_backward", implementation, device)) {
        return detail::run_halide(op, both->function, device, options, {g, u, W}, {grad_u, grad_W}, {},
                                  {"g", "u", "W", "grad_u", "grad_W"});
    }
    const HalideKernelEntry *grad_input = nullptr, *grad_weight = nullptr;
    if (Status s = find_kernel(op, "capsule_predict_grad_input", implementation, device, &grad_input); !s.ok()) {
        return s;
    }
    if (Status s = find_kernel(op, "capsule_predict_grad_weight", implementation, device, &grad_weight); !s.ok()) {
        return s;
    }
    if (Status s = detail::run_halide(op, grad_input->function, device, options, {g, W}, {grad_u}, {},
                                      {"g", "W", "grad_u"});
        !s.ok()) {
        return s;
    }
    return detail::run_halide(op, grad_weight->function, device, options, {g, u}, {grad_W}, {}, {"g", "u", "grad_W"});
}

std::vector<ImplementationInfo> list_implementations() {
    std::vector<ImplementationInfo> out;
    for (const auto &k : detail::halide_kernels()) {
        const std::string schedule = k.schedule;
        const std::string generator = k.generator;
        if (generator == "capsule_predict") {
            out.push_back({"predict", schedule, k.device, "Halide schedule '" + schedule + "'"});
        } else if (generator == "capsule_predict_grad_input" &&
                   find_halide_kernel("capsule_predict_grad_weight", schedule, k.device) != nullptr) {
            out.push_back({"predict_backward", schedule, k.device, "Halide schedules '" + schedule + "' (grad_u, grad_W)"});
        } else if (generator == "capsule_predict_backward") {
            out.push_back({"predict_backward", schedule, k.device,
                           "Halide schedule '" + schedule + "' (both gradients in one pipeline)"});
        }
    }
    for (const auto &h : detail::hand_cuda_implementations()) {
        out.push_back({h.op, h.implementation, Device::cuda, h.description});
    }
    detail::append_routing_implementations(out);
    detail::append_capsconv_implementations(out);
    return out;
}

}  // namespace halcaps

// The tables of predict and predict_backward (implementation_table.h says
// how a call walks them). Measured times: H200, device time, unless said.
#include <cstdint>

#include "halide_call.h"
#include "hand_cuda.h"
#include "implementations.h"
#include "kernel_registry.h"
#include "operator_support.h"

namespace halcaps::detail {

namespace {

// batch_walk's fast path (schedules/predict_schedules.cpp,
// predict_batch_walk): out_dim 16, in_dim 8, a batch that is a multiple of
// 128. Its kernel stores 8 bytes at a time and so requires u_hat to start on
// an 8-byte boundary (misaligned_pointer otherwise, from the kernel's own
// check); device tensors are 16-byte aligned already (halide_call.cpp), a
// host tensor may not be.
bool batch_walk_fits(const PredictCall &c) {
    return c.u_hat->shape[3] == 16 && c.u->shape[2] == 8 && c.u_hat->shape[0] % 128 == 0 &&
           reinterpret_cast<std::uintptr_t>(c.u_hat->data) % 8 == 0;
}

// batch_rows' fast path (the same function, whole_row): batch_walk's, with
// out_caps 8 to 32 (a block is 8 * out_caps x 2 threads). Elsewhere it runs
// batch_walk's mapping in a wider block, slower than batch_walk itself.
bool batch_rows_fits(const PredictCall &c) {
    return batch_walk_fits(c) && c.u_hat->shape[2] >= 8 && c.u_hat->shape[2] <= 32;
}

// capsule_runs' fast path (schedules/predict_schedules.cpp,
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
bool capsule_runs_fits(const PredictCall &c) {
    const int64_t batch = c.u_hat->shape[0], in_caps = c.u_hat->shape[1], out_caps = c.u_hat->shape[2],
                  out_dim = c.u_hat->shape[3], in_dim = c.u->shape[2];
    const int64_t row = out_caps * out_dim;
    const bool measured_faster = in_dim == 8 ? (row <= 256 || batch >= 256) : batch >= 128;
    return out_dim % 2 == 0 && in_caps % 2 == 0 && (in_dim == 8 || in_dim == 16) && batch % 2 == 0 &&
           batch * in_dim <= 12288 && row <= 512 && measured_faster &&
           reinterpret_cast<std::uintptr_t>(c.u_hat->data) % 8 == 0;
}

// The `vectors` gradients' fast path (schedules/predict_schedules.cpp,
// grad_input_row_vectors and grad_weight_quads): out_dim 16, in_dim 8 or 16.
// Their kernels load and store 16 bytes at a time and so require every tensor
// to start on a 16-byte boundary (misaligned_pointer otherwise, from the
// kernels' own checks); device tensors are already (halide_call.cpp), a host
// tensor may not be.
bool gradient_vectors_fit(const PredictBackwardCall &c) {
    if (c.g->shape[3] != 16 || (c.u->shape[2] != 8 && c.u->shape[2] != 16)) return false;
    for (const TensorView *t : {c.g, c.u, c.W, c.grad_u, c.grad_W}) {
        if (!on_16_byte_boundary(*t)) return false;
    }
    return true;
}

const std::vector<Device> kGpuDevices = {Device::cuda, Device::opencl};

// A row of the predict kernel `schedule` on `device`, where built.
void add_forward(ImplementationTable<PredictCall> &table, const std::string &schedule, Device device,
                 const std::string &default_when = "", std::function<bool(const PredictCall &)> is_default = nullptr) {
    const HalideKernelEntry *kernel = find_halide_kernel("predict", schedule, device);
    if (kernel == nullptr || find_row(table, schedule, device) != nullptr) return;
    Implementation<PredictCall> row;
    row.name = schedule;
    row.device = device;
    row.description = "Halide schedule '" + schedule + "'";
    row.default_when = default_when;
    row.is_default = std::move(is_default);
    row.run = [kernel](const PredictCall &c) {
        return run_halide(c.op, kernel->function, c.device, *c.options, {*c.u, *c.W}, {*c.u_hat}, {},
                          {"u", "W", "u_hat"});
    };
    table.push_back(std::move(row));
}

// A row of the gradients `schedule` on `device`, where built: one pipeline
// for both (predict_backward: fused, fused_cpu) or a pipeline each.
void add_backward(ImplementationTable<PredictBackwardCall> &table, const std::string &schedule, Device device,
                  const std::string &default_when = "",
                  std::function<bool(const PredictBackwardCall &)> is_default = nullptr) {
    if (find_row(table, schedule, device) != nullptr) return;
    Implementation<PredictBackwardCall> row;
    row.name = schedule;
    row.device = device;
    row.default_when = default_when;
    row.is_default = std::move(is_default);
    if (const HalideKernelEntry *both = find_halide_kernel("predict_backward", schedule, device)) {
        row.description = "Halide schedule '" + schedule + "' (both gradients in one pipeline)";
        row.run = [both](const PredictBackwardCall &c) {
            return run_halide(c.op, both->function, c.device, *c.options, {*c.g, *c.u, *c.W}, {*c.grad_u, *c.grad_W},
                              {}, {"g", "u", "W", "grad_u", "grad_W"});
        };
    } else {
        const HalideKernelEntry *input = find_halide_kernel("predict_grad_input", schedule, device);
        const HalideKernelEntry *weight = find_halide_kernel("predict_grad_weight", schedule, device);
        if (input == nullptr || weight == nullptr) return;
        row.description = "Halide schedules '" + schedule + "' (grad_u, grad_W)";
        row.run = [input, weight](const PredictBackwardCall &c) {
            if (Status s = run_halide(c.op, input->function, c.device, *c.options, {*c.g, *c.W}, {*c.grad_u}, {},
                                      {"g", "W", "grad_u"});
                !s.ok()) {
                return s;
            }
            return run_halide(c.op, weight->function, c.device, *c.options, {*c.g, *c.u}, {*c.grad_W}, {},
                              {"g", "u", "grad_W"});
        };
    }
    table.push_back(std::move(row));
}

// The hand-written CUDA and cuBLAS rows of `op` (hand_cuda.cpp's list).
template <typename Call, typename Run>
void add_hand_cuda(ImplementationTable<Call> &table, const std::string &op, Run run) {
    for (const auto &h : hand_cuda_implementations()) {
        if (h.op != op) continue;
        Implementation<Call> row;
        row.name = h.implementation;
        row.device = Device::cuda;
        row.family = h.family;
        row.description = h.description;
        const std::string name = h.implementation;
        row.run = [name, run](const Call &c) { return run(name, c); };
        table.push_back(std::move(row));
    }
}

}  // namespace

const ImplementationTable<PredictCall> &predict_implementations() {
    static const ImplementationTable<PredictCall> table = [] {
        ImplementationTable<PredictCall> t;
        // The defaults, in order. CUDA (and OpenCL): the fastest Halide
        // forwards measured, each where its fast path applies.
        for (Device d : kGpuDevices) {
            // MNIST b128 34.1 us, b512 109.4 (batch_rows 36.3 / 132.3); capsule_runs_fits above.
            add_forward(t, "capsule_runs", d, "where its fast path applies and it was measured faster",
                        capsule_runs_fits);
            // MNIST b128 36.5 / 36.7 us against batch_walk's 38.1 / 38.0 (seeds 823, 824,
            // docs/history.md: nvidia-h200-batch-rows/run2); out_caps 32 96.7 against 108.3.
            add_forward(t, "batch_rows", d,
                        "out_dim 16, in_dim 8, batch a multiple of 128, out_caps 8 to 32, "
                        "u_hat 8-byte aligned",
                        batch_rows_fits);
            // MNIST b128 38.0 us against batch_vectors' 47.3 (seed 391, nvidia-h200-batch-walk/final).
            add_forward(t, "batch_walk", d, "out_dim 16, in_dim 8, batch a multiple of 128, u_hat 8-byte aligned",
                        batch_walk_fits);
            // Off the fast paths: wide b32 (in_dim 16) 106.7 us, batch_walk 1112.6.
            add_forward(t, "batch_vectors", d, "always");
        }
        add_forward(t, "cpu", Device::cpu, "always");
        // Every other schedule built (schedules/kernels.cmake), by name only.
        for (const auto &k : halide_kernels()) {
            if (std::string(k.generator) == "predict") add_forward(t, k.schedule, k.device);
        }
        add_hand_cuda(t, "predict", [](const std::string &name, const PredictCall &c) {
            return run_hand_cuda_predict(name, *c.u, *c.W, *c.u_hat, *c.options);
        });
        return t;
    }();
    return table;
}

const ImplementationTable<PredictBackwardCall> &predict_backward_implementations() {
    static const ImplementationTable<PredictBackwardCall> table = [] {
        ImplementationTable<PredictBackwardCall> t;
        for (Device d : kGpuDevices) {
            // MNIST b128 101.0 / 100.3 us, b512 332.8 / 332.0, wide b32 247.8 / 247.9 (seeds 802, 803,
            // docs/history.md: nvidia-h200-squash-groups/run5); tuned 153.5, 555.1, 518.0 (seed 441).
            add_backward(t, "vectors", d, "out_dim 16, in_dim 8 or 16, every tensor 16-byte aligned",
                         gradient_vectors_fit);
            // Faster than vectors' mapping off its fast path.
            add_backward(t, "tuned", d, "always");
        }
        add_backward(t, "cpu", Device::cpu, "always");
        for (const auto &k : halide_kernels()) {
            const std::string generator = k.generator;
            if (generator == "predict_backward" || generator == "predict_grad_input") {
                add_backward(t, k.schedule, k.device);
            }
        }
        add_hand_cuda(t, "predict_backward", [](const std::string &name, const PredictBackwardCall &c) {
            return run_hand_cuda_predict_backward(name, *c.g, *c.u, *c.W, *c.grad_u, *c.grad_W, *c.options);
        });
        return t;
    }();
    return table;
}

}  // namespace halcaps::detail

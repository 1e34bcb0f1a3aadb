// The tables of squash, routing and the DigitCaps layer (implementation_table.h
// says how a call walks them). Measured times: H200, device time, MNIST b128,
// 3 iterations, unless said; "bench" is bench/results/nvidia-h200/layer-<op>.md.
// The Halide kernels unroll the iteration count (schedules/kernels.cmake lists
// the counts built); a row of one does not apply at a count it is not built
// for, and the walk goes on: on the CPU to the per-iteration kernels, on CUDA
// to the hand-written kernels, which take any count.
#include <functional>
#include <string>
#include <vector>

#include "halide_call.h"
#include "implementations.h"
#include "kernel_registry.h"
#include "operator_support.h"

namespace halcaps::detail {

namespace {

using Table = ImplementationTable<RoutingCall>;
using Predicate = std::function<bool(const RoutingCall &)>;
using Check = std::function<Status(const RoutingCall &)>;

// The API's op names and the generators that implement them. A backward op
// has two generators: the hand-derived one and Halide's autodiff.
struct RoutingOp {
    const char *op;
    std::vector<const char *> generators;
    const char *what;
};
const std::vector<RoutingOp> &routing_ops() {
    static const std::vector<RoutingOp> ops = {
        {"squash", {"squash"}, "squash over the last dimension"},
        {"route", {"routing", "routing_fused"}, "dynamic routing"},
        {"route_backward", {"routing_backward", "routing_backward_autodiff"}, "routing gradients"},
        {"digitcaps", {"digitcaps", "digitcaps_fused"}, "prediction + routing in one pipeline"},
        {"digitcaps_backward", {"digitcaps_backward", "digitcaps_backward_autodiff"}, "DigitCaps gradients"},
        {"digitcaps_with_s", {"digitcaps_fused_with_s"}, "the DigitCaps layer, keeping every iteration's s"},
        {"digitcaps_backward_with_s",
         {"digitcaps_backward_with_s", "digitcaps_backward_with_s_phases"},
         "DigitCaps gradients from the forward's s"},
        // Hand-written CUDA only (cuda_tensor): no Halide generator keeps c.
        {"digitcaps_with_c", {}, "the DigitCaps layer, keeping every iteration's s and c"},
        {"digitcaps_backward_with_c", {}, "DigitCaps gradients from the forward's s and c"},
    };
    return ops;
}

const RoutingOp &routing_op(const std::string &op) {
    for (const auto &r : routing_ops()) {
        if (op == r.op) return r;
    }
    static const RoutingOp none{"", {}, ""};
    return none;
}

std::vector<int> every_count() {
    std::vector<int> out;
    for (int n = 1; n <= kMaxRoutingIterations; n++) out.push_back(n);
    return out;
}
const std::string kEveryCount = "1 to " + std::to_string(kMaxRoutingIterations);

std::string count_list(const std::vector<int> &counts) {
    std::string list;
    for (int n : counts) list += (list.empty() ? "" : ", ") + std::to_string(n);
    return list;
}

// The kernel of one of the op's generators (a schedule name belongs to one
// of them) with `schedule` on `device` at `iterations` (0: squash), or null.
const HalideKernelEntry *routing_kernel(const RoutingOp &r, const std::string &schedule, Device device,
                                        int iterations) {
    for (const char *generator : r.generators) {
        if (const HalideKernelEntry *k = find_halide_kernel(generator, schedule, device, iterations)) return k;
    }
    return nullptr;
}

// The counts built for the op's schedule on device (ascending; {0} for squash).
std::vector<int> counts_built(const RoutingOp &r, const std::string &schedule, Device device) {
    for (const char *generator : r.generators) {
        std::vector<int> counts = built_iterations(generator, schedule, device);
        if (!counts.empty()) return counts;
    }
    return {};
}

std::string halide_description(const RoutingOp &r, const std::string &schedule, const std::string &counts) {
    const std::string what = schedule == "autodiff"        ? "Halide autodiff, Li2018 schedule"
                             : schedule == "root_autodiff" ? "Halide autodiff, every stage compute_root"
                                                           : "Halide schedule '" + schedule + "'";
    return what + " (" + r.what + (counts.empty() ? "" : "; iterations " + counts) + ")";
}

// Builds one op's table; each add_* adds a row unless one of that name and
// device is there already, and a Halide row only where its kernel is built.
struct Builder {
    const RoutingOp &r;
    Table t;

    bool has(const std::string &name, Device device) const { return find_row(t, name, device) != nullptr; }

    // A Halide schedule's row.
    void halide(const std::string &schedule, Device device, const std::string &default_when = "",
                Predicate is_default = nullptr, Check check = nullptr) {
        const std::vector<int> counts = counts_built(r, schedule, device);
        if (counts.empty() || has(schedule, device)) return;
        Implementation<RoutingCall> row;
        row.name = schedule;
        row.device = device;
        const bool squash = counts == std::vector<int>{0};
        if (!squash) row.iterations = counts;
        row.description = halide_description(r, schedule, squash ? "" : count_list(counts));
        row.default_when = default_when;
        row.is_default = std::move(is_default);
        row.check = std::move(check);
        row.run = [&r = r, schedule](const RoutingCall &c) {
            return run_routing_kernel(c, *routing_kernel(r, schedule, c.device, c.iterations));
        };
        t.push_back(std::move(row));
    }
    void halide_gpu(const std::string &schedule, const std::string &default_when = "", Predicate is_default = nullptr,
                    Check check = nullptr) {
        for (Device d : {Device::cuda, Device::opencl}) halide(schedule, d, default_when, is_default, check);
    }
    // The CPU's unrolled kernels of `schedule` at the counts built, the
    // per-iteration kernels at any other: the name of the CPU default.
    void halide_or_steps(const std::string &schedule, const std::string &default_when) {
        const std::vector<int> counts = counts_built(r, schedule, Device::cpu);
        if (counts.empty() || has(schedule, Device::cpu)) return;
        Implementation<RoutingCall> row;
        row.name = schedule;
        row.device = Device::cpu;
        row.iterations = every_count();
        row.description = halide_description(r, schedule,
                                             count_list(counts) + " unrolled, any other from " + kEveryCount +
                                                 " by the per-iteration kernels ('steps')");
        row.default_when = default_when;
        row.run = [&r = r, schedule](const RoutingCall &c) {
            const HalideKernelEntry *k = routing_kernel(r, schedule, Device::cpu, c.iterations);
            return k != nullptr ? run_routing_kernel(c, *k) : run_routing_steps(c);
        };
        t.push_back(std::move(row));
    }
    // The general path on `device`: the routing_step_* kernels, one part of
    // one iteration each, chained by the runtime (routing_steps.cpp) for any
    // count and shape; on the GPU one kernel per stage.
    void steps(Device device, const std::string &default_when = "") {
        const bool built =
            find_halide_kernel("routing_step_s", device == Device::cpu ? "cpu" : "stage_per_kernel", device) != nullptr;
        if (!built || has("steps", device)) return;
        Implementation<RoutingCall> row;
        row.name = "steps";
        row.device = device;  // family halide: Halide kernels, chained
        row.iterations = every_count();
        row.description = std::string("Halide kernels of one routing iteration each (generators routing_step_*") +
                          (device == Device::cpu ? "" : ", a kernel per stage") + "), chained by the runtime (" +
                          r.what + "; iterations " + kEveryCount + ")";
        row.default_when = default_when;
        row.run = run_routing_steps;
        t.push_back(std::move(row));
    }
    // The GPU's general path, the default wherever no row above it applies.
    void steps_gpu() {
        for (Device d : {Device::cuda, Device::opencl}) steps(d, "any count and shape no row above takes");
    }
    // A hand-written CUDA row (reference/cuda/): any iteration count. Its
    // shape limits are checked by the kernel's own refusal, before any
    // device work (unsupported_shape, naming the extent).
    void hand(const std::string &name, const std::string &description, const std::string &default_when = "") {
        if (!cuda_built() || has(name, Device::cuda)) return;
        Implementation<RoutingCall> row;
        row.name = name;
        row.device = Device::cuda;
        row.family = Family::hand_written;
        row.iterations = every_count();
        row.description = "hand-written CUDA, " + description + "; any iteration count)";
        row.default_when = default_when;
        row.run = [name](const RoutingCall &c) { return run_routing_hand_cuda(c, name); };
        t.push_back(std::move(row));
    }
    // Every other schedule built for the op (schedules/kernels.cmake), by name only.
    void rest() {
        for (const char *generator : r.generators) {
            for (const auto &k : halide_kernels()) {
                if (std::string(k.generator) == generator) halide(k.schedule, k.device);
            }
        }
    }
};

// fused_split_all_vectors reads u and W in rows of 8 (CapsNet's in_dim) and
// keeps a thread's 16 out_dim values in registers. Its pipeline refuses other
// shapes too, but may fail Halide's input bounds check first, with an
// out-of-bounds error instead of this status. (out_caps beyond 24 it refuses
// itself.)
Status fused_split_check(const RoutingCall &c) {
    if (c.x.K == 8 && c.x.E == 16) return Status::success();
    return {StatusCode::unsupported_shape,
            "reads u and W in rows of 8 and keeps 16 out_dim values in registers: in_dim must be 8 and out_dim 16, "
            "got " +
                std::to_string(c.x.K) + " and " + std::to_string(c.x.E)};
}

// rows_vectors stores grad_u and grad_W 16 bytes at a time and so requires
// them on a 16-byte boundary (device tensors are, halide_call.cpp; a host
// one off it: misaligned_pointer from the kernel's own check).
bool gradients_16_byte_aligned(const RoutingCall &c) {
    return on_16_byte_boundary(*c.grad_u) && on_16_byte_boundary(*c.grad_W);
}

const char *const kBuilt = "at the counts built";

// The hand-written kernels' descriptions, one each.
const char *const kNaiveForward = "one kernel per step (reference/cuda/digitcaps_cuda.cu";
const char *const kNaiveBackward =
    "one kernel per step, the forward replayed keeping every iteration (reference/cuda/digitcaps_backward_cuda.cu";
const char *const kPasses =
    "u_hat materialised once, two kernels an iteration for the forward's replay and two for the backward, each "
    "pass reading u_hat once (reference/cuda/digitcaps_backward_cuda.cu; out_caps, out_dim <= 32";

Table build(const std::string &op) {
    Builder b{routing_op(op), {}};
    const Device cpu = Device::cpu;
    if (op == "squash") {
        b.halide("cpu", cpu, "always");
        b.halide_gpu("rows", "always");
    } else if (op == "route") {
        b.halide_or_steps("cpu", "always");
        b.halide_gpu("stage_per_kernel", kBuilt);          // 745 us (routing_fused's fused 1391); bench 752.0
        b.hand("cuda_naive", std::string(kNaiveForward));  // 888.5 us; steps 678.0 (H200, one run)
        b.halide_gpu("fused", kBuilt);                     // 774.6 us, the default at 1 and 5
    } else if (op == "route_backward") {
        // The per-iteration kernels against the unrolled "cpu", which computes every stage
        // whole: 162.3 against 190.1 ms (2-core build machine).
        b.steps(cpu, "always");
        b.halide_gpu("stage_per_kernel", kBuilt);                                 // not timed yet
        b.hand("cuda_passes", kPasses, "any count, out_caps and out_dim <= 32");  // not timed for route_backward
        b.hand("cuda_naive", kNaiveBackward);
    } else if (op == "digitcaps") {
        b.halide("cpu_lanes", cpu, kBuilt);
        b.halide_or_steps("cpu", "always");
        b.halide_gpu("fused_split_all_vectors", kBuilt, nullptr, fused_split_check);  // 161.1 us
        b.halide_gpu("fused", kBuilt);                                                // 829.1 us
        b.halide_gpu("stage_per_kernel", kBuilt);                                     // 1183 us
        b.hand("cuda_fused",
               "two kernels an iteration, u_hat recomputed once an iteration (reference/cuda/digitcaps_cuda.cu; "
               "out_caps <= 16, out_dim <= 32, in_dim <= 16",
               "any count, out_caps <= 16, out_dim <= 32, in_dim <= 16");  // bench 206.4 us
        b.hand("cuda_naive", kNaiveForward);  // 1134.2 us, steps 735.7; at 4 iterations 1448.0 and 981.2 (H200)
        b.hand("cuda_tensor",
               "cuda_fused's two kernels an iteration with u_hat on the tensor cores in float32 accuracy (3xTF32; "
               "reference/cuda/digitcaps_tensor_cores.cu; out_caps, out_dim, in_dim <= 16");
    } else if (op == "digitcaps_backward") {
        // "cpu" (vectorised prediction gradients) beats "steps": 420.3 against 522.4 ms (one loaded run).
        b.halide_or_steps("cpu", "always");
        b.halide_gpu("rows_vectors", "grad_u and grad_W 16-byte aligned", gradients_16_byte_aligned);  // 621.5 us
        b.halide_gpu("rows_predict", kBuilt);                                                          // 728.7 us
        b.halide_gpu("stage_per_kernel", kBuilt);                                                      // 3964.3 us
        b.hand("cuda_passes", kPasses, "any count, out_caps and out_dim <= 32");                       // bench 345.8 us
        b.hand("cuda_naive", kNaiveBackward);  // 2673.5 us, steps 2055.4; at 4 iterations 3444.4 and 2773.5 (H200)
        b.hand("cuda_tensor",
               "cuda_passes with no u_hat in memory: its passes are the forward cuda_tensor's, u_hat recomputed on "
               "the tensor cores each pass (3xTF32) (reference/cuda/digitcaps_backward_cuda.cu; out_caps, out_dim, "
               "in_dim <= 16");
    } else if (op == "digitcaps_with_s") {
        // The fused layer's CPU schedules only.
        b.halide("cpu_lanes", cpu, kBuilt);
        b.halide_or_steps("fused_cpu", "always");
        b.halide_gpu("fused_split_all_vectors", kBuilt, nullptr, fused_split_check);  // 170.2 us
        b.halide_gpu("fused", kBuilt);
        b.hand("cuda_tensor",
               "digitcaps' cuda_tensor with every iteration's s stored by its squash kernels "
               "(reference/cuda/digitcaps_tensor_cores.cu; out_caps, out_dim, in_dim <= 16",
               "any count, out_caps, out_dim and in_dim <= 16");  // bench 59.9 us
    } else if (op == "digitcaps_backward_with_s") {
        // cpu_phases: 197.7 against cpu's 475.6 ms of CPU time (one thread, same run, load 12).
        b.halide("cpu_phases", cpu, kBuilt);
        b.halide_or_steps("cpu", "always");
        b.halide_gpu("rows_vectors", "grad_u and grad_W 16-byte aligned", gradients_16_byte_aligned);  // 496.2 us
        b.halide_gpu("rows_predict", kBuilt);                                                          // bench 608.9 us
        b.hand("cuda_tensor",
               "digitcaps_backward's cuda_tensor from the forward's s: no replay, each backward pass computing its c "
               "from the logits (reference/cuda/digitcaps_backward_cuda.cu; out_caps, out_dim, in_dim <= 16",
               "any count, out_caps, out_dim and in_dim <= 16");  // bench 197.0 us
    } else if (op == "digitcaps_with_c") {
        b.hand("cuda_tensor",
               "digitcaps_with_s' cuda_tensor with every iteration's c stored too, by its agreement passes "
               "(reference/cuda/digitcaps_tensor_cores.cu; out_caps, out_dim, in_dim <= 16",
               "any count, out_caps, out_dim and in_dim <= 16");  // bench 77.5 us
    } else if (op == "digitcaps_backward_with_c") {
        b.hand("cuda_tensor",
               "digitcaps_backward_with_s' cuda_tensor reading the forward's c: no logits in its backward passes "
               "(reference/cuda/digitcaps_backward_cuda.cu; out_caps, out_dim, in_dim <= 16",
               "any count, out_caps, out_dim and in_dim <= 16");
    }
    // Every op but squash and the *_with_c pair (whose c the steps do not
    // keep) has the steps on every device: by name on the CPU, and on the
    // GPU as the default where no row above applies (on CUDA ahead of
    // cuda_naive, which they beat at every count timed).
    if (op != "squash" && op.find("_with_c") == std::string::npos) {
        b.steps(cpu);
        b.steps_gpu();
    }
    b.rest();
    return std::move(b.t);
}

}  // namespace

const std::vector<const char *> &routing_op_names() {
    static const std::vector<const char *> names = [] {
        std::vector<const char *> out;
        for (const auto &r : routing_ops()) out.push_back(r.op);
        return out;
    }();
    return names;
}

const ImplementationTable<RoutingCall> &routing_implementations(const std::string &op) {
    static const std::vector<Table> tables = [] {
        std::vector<Table> out;
        for (const auto &r : routing_ops()) out.push_back(build(r.op));
        return out;
    }();
    for (size_t n = 0; n < routing_ops().size(); n++) {
        if (op == routing_ops()[n].op) return tables[n];
    }
    static const Table none;
    return none;
}

}  // namespace halcaps::detail

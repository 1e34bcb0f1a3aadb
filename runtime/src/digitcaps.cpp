// Entry points for squash, routing and the DigitCaps layer, forward and
// backward: argument checks, device and implementation choice, then the
// Halide kernels (generators/digitcaps.cpp).
#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "argument_checks.h"
#include "halide_call.h"
#include "kernel_registry.h"
#include "hand_cuda.h"
#include "operator_support.h"

#if HALCAPS_WITH_CUDA
#include <cuda_runtime.h>

#include "cuda_support.h"
#include "hand_cuda_support.h"
#endif

namespace halcaps {

namespace {

using detail::ArgumentChecks;
using detail::HalideKernelEntry;

// The API's op names and the generators that implement them. A backward op
// has two generators: the hand-derived one (schedule "cpu") and Halide's
// autodiff (schedule "autodiff" with Li2018, "root_autodiff" plainly scheduled).
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
        {"digitcaps_backward_with_s", {"digitcaps_backward_with_s"}, "DigitCaps gradients from the forward's s"},
        // Hand-written CUDA only (cuda_tensor): no Halide generator keeps c.
        {"digitcaps_with_c", {}, "the DigitCaps layer, keeping every iteration's s and c"},
        {"digitcaps_backward_with_c", {}, "DigitCaps gradients from the forward's s and c"},
    };
    return ops;
}

const std::vector<const char *> &generators_of(const std::string &op) {
    for (const auto &r : routing_ops()) {
        if (op == r.op) return r.generators;
    }
    static const std::vector<const char *> none;
    return none;
}

// An empty view (null data, no shape, no strides) stands for an optional
// tensor left out. Anything else is checked as a tensor.
bool is_absent(const TensorView &t) { return t.data == nullptr && t.shape.empty() && t.strides.empty(); }

Status check_iterations(const char *op, int iterations) {
    if (iterations < 1) {
        return {StatusCode::unsupported_iterations,
                std::string(op) + ": iterations is " + std::to_string(iterations) + "; it must be at least 1"};
    }
    if (iterations > kMaxRoutingIterations) {
        return {StatusCode::unsupported_iterations,
                std::string(op) + ": iterations is " + std::to_string(iterations) + "; at most " +
                    std::to_string(kMaxRoutingIterations) + " are supported (kMaxRoutingIterations)"};
    }
    return Status::success();
}

// [in_caps, out_caps] tensors made for one call: zeros standing in for a b0
// the caller left out, or scratch for a grad_b0 the caller does not want. On
// the host for CPU calls; on CUDA, device memory ordered on the call's
// stream (cudaMallocAsync, cudaMemsetAsync, and cudaFreeAsync once the
// kernels are queued). A host tensor there would make Halide copy it with a
// copy that first waits for the stream, so the call would block its caller
// until the device had drained its queue.
class CallScratch {
public:
    explicit CallScratch(const Options &options) : options_(options) {}
    ~CallScratch() {
#if HALCAPS_WITH_CUDA
        if (device_buffers_.empty()) return;
        detail::ScopedCudaContext context(options_);
        for (void *p : device_buffers_) cudaFreeAsync(p, stream());
#endif
    }
    CallScratch(const CallScratch &) = delete;
    CallScratch &operator=(const CallScratch &) = delete;

    // *used = `given` when the caller passed it, else a stand-in: zeros
    // (`zeroed`, for b0) or scratch (for a grad_b0 nobody reads).
    Status given_or_stand_in(const char *op, Device device, const TensorView &given, int64_t in_caps,
                             int64_t out_caps, bool zeroed, TensorView *used) {
        if (!is_absent(given)) {
            *used = given;
            return Status::success();
        }
        return make(op, device, in_caps, out_caps, zeroed, used);
    }

private:
    Status make(const char *op, Device device, int64_t in_caps, int64_t out_caps, bool zeroed, TensorView *view) {
        view->shape = {in_caps, out_caps};
        const size_t count = static_cast<size_t>(in_caps * out_caps);
        if (device != Device::cuda) {
            host_buffers_.emplace_back(count, 0.0f);
            view->data = host_buffers_.back().data();
            return Status::success();
        }
#if HALCAPS_WITH_CUDA
        detail::ScopedCudaContext context(options_);
        if (!context.status().ok()) return context.status();
        void *p = nullptr;
        if (cudaError_t err = cudaMallocAsync(&p, count * sizeof(float), stream()); err != cudaSuccess) {
            return detail::cuda_status(op, zeroed ? "allocating zeros for the absent b0" : "allocating scratch", err);
        }
        device_buffers_.push_back(p);
        if (zeroed) {
            if (cudaError_t err = cudaMemsetAsync(p, 0, count * sizeof(float), stream()); err != cudaSuccess) {
                return detail::cuda_status(op, "zeroing the absent b0", err);
            }
        }
        view->data = static_cast<float *>(p);
        view->space = MemorySpace::cuda;
        return Status::success();
#else
        (void)zeroed;
        return {StatusCode::device_unavailable, std::string(op) + ": this build of halcaps has no CUDA support"};
#endif
    }

#if HALCAPS_WITH_CUDA
    cudaStream_t stream() const { return static_cast<cudaStream_t>(options_.cuda_stream); }
    std::vector<void *> device_buffers_;
#endif
    [[maybe_unused]] const Options &options_;  // read only when the build has CUDA
    std::deque<std::vector<float>> host_buffers_;
};

// On CUDA an op's default is the fastest measured that is built for the
// iteration count (H200, MNIST b128): `preferred` where built,
// else `base`, whose lookup status is returned when neither is.
//   digitcaps           fused_split_all_vectors (161.1 us; fused_split_vectors
//                       261.4 us in an earlier run; 3 iterations, and only CapsNet's
//                       shapes: digitcaps() falls back when it refuses one),
//                       else fused (829.1 us; stage_per_kernel 1183 us)
//   digitcaps_backward  rows_vectors (621.5 us; rows_predict 728.7 us in an earlier run;
//                       3 iterations; rows_predict when grad_u or grad_W is off
//                       a 16-byte boundary: digitcaps_backward()), else
//                       stage_per_kernel (3964.3 us)
//   route               stage_per_kernel (745 us against 1391 us for routing_fused)
//   route_backward      stage_per_kernel (its tiled_stages is checked, not timed yet)
struct CudaDefault {
    const char *preferred;  // null: none
    const char *base;
};
//   digitcaps_with_s, digitcaps_backward_with_s: the same schedules as
//                       digitcaps and digitcaps_backward (3 iterations only;
//                       170.2 and 496.2 us), rows_predict the
//                       backward's fallback
CudaDefault cuda_default(const std::string &op) {
    if (op == "digitcaps" || op == "digitcaps_with_s") return {"fused_split_all_vectors", "fused"};
    if (op == "digitcaps_backward") return {"rows_vectors", "stage_per_kernel"};
    if (op == "digitcaps_backward_with_s") return {"rows_vectors", "rows_predict"};
    return {nullptr, "stage_per_kernel"};
}

// On the CPU every op's default is the device's ("cpu"), except
// digitcaps_with_s, built with the fused layer's CPU schedules only
// (cpu_passes where it is built for the iteration count, else fused_cpu), and
// route_backward, whose default is the per-iteration kernels ("steps": 162.3
// against 190.1 ms for the unrolled "cpu", which computes every stage whole;
// MNIST b128, 3 iterations, 2-core build machine). digitcaps_backward's "cpu"
// (vectorised prediction gradients) beats "steps" there: 420.3 against 522.4
// ms in one loaded run. Where no kernel is built for the count, "steps" runs.
CudaDefault cpu_default(const std::string &op) {
    if (op == "digitcaps_with_s") return {"cpu_passes", "fused_cpu"};
    if (op == "route_backward") return {nullptr, "steps"};
    return {nullptr, "cpu"};
}

// The CPU's general path (implementation "steps"): the routing_step_*
// kernels, one part of one iteration each, chained by the runtime for any
// iteration count up to kMaxRoutingIterations. The ops' CPU defaults run it
// for the counts they have no unrolled kernel for.
constexpr const char *kSteps = "steps";

bool has_steps(const std::string &op) {
    return op == "route" || op == "route_backward" || op == "digitcaps" || op == "digitcaps_backward" ||
           op == "digitcaps_with_s" || op == "digitcaps_backward_with_s";
}

// The device, implementation and kernel for a routing op, once the tensors
// passed their checks. *steps (when non-null) is set where the call runs the
// CPU's general path instead of one kernel (*kernel is then null).
Status pick_kernel(const char *op, ArgumentChecks &checks, const Options &options, int iterations, Device *device,
                   const HalideKernelEntry **kernel, bool *steps = nullptr) {
    *device = checks.resolve_device(options.device);
    if (!checks.status().ok()) return checks.status();
    if (Status s = check_iterations(op, iterations); !s.ok()) return s;
    if (Status s = detail::check_device_ready(op, *device); !s.ok()) return s;
    if (steps != nullptr) *steps = false;
    // The CPU's general path stands in where the default has no kernel built
    // for the iteration count, or where it is named.
    const bool steps_possible = steps != nullptr && *device == Device::cpu && has_steps(op);
    auto run_steps = [&]() {
        *kernel = nullptr;
        *steps = true;
        return Status::success();
    };
    auto find = [&](const std::string &name) {
        return detail::find_routing_kernel(op, generators_of(op), name, *device, iterations, kernel);
    };
    if (options.implementation.empty()) {
        const CudaDefault d = detail::runs_gpu_schedules(*device) ? cuda_default(op) : cpu_default(op);
        if (d.preferred != nullptr && find(d.preferred).ok()) return Status::success();
        if (steps_possible && d.base == std::string(kSteps)) return run_steps();
        const Status s = find(d.base);
        if (steps_possible && s.code == StatusCode::unsupported_iterations) return run_steps();
        return s;
    }
    if (steps_possible && options.implementation == kSteps) return run_steps();
    // The CPU default's name stands for it at every count (halcaps info lists
    // it so): where it has no kernel for the count, "steps" runs.
    const Status s = find(options.implementation);
    if (steps_possible && s.code == StatusCode::unsupported_iterations &&
        options.implementation == cpu_default(op).base) {
        return run_steps();
    }
    return s;
}

// The hand-written CUDA routing ("cuda_naive", also for the gradients;
// "cuda_passes" for the gradients; for the layer's forward "cuda_fused";
// "cuda_tensor" for the layer and its gradients, training's pair included;
// any iteration count >= 1):
// runs `call` and returns its status when it applies, else a status with
// code unknown_implementation (no message) so that the caller goes on to the
// Halide kernels.
template <typename Call>
Status run_hand_routing(const char *op, ArgumentChecks &checks, const Options &options, int iterations, Call call) {
    const Status not_hand{StatusCode::unknown_implementation, ""};
    if (!detail::is_hand_cuda_routing_implementation(op, options.implementation)) return not_hand;
    const Device device = checks.resolve_device(options.device);
    if (!checks.status().ok()) return checks.status();
    if (device != Device::cuda) return not_hand;
    if (iterations < 1) {
        return {StatusCode::unsupported_iterations,
                std::string(op) + ": iterations must be at least 1, got " + std::to_string(iterations)};
    }
    if (Status s = check_iterations(op, iterations); !s.ok()) return s;
    if (Status s = detail::check_device_ready(op, device); !s.ok()) return s;
    return call();
}

// ------------------------------------------------ the CPU's general path --
// Host tensors only (the CPU). u_hat [B, I, J, E]; logits [B, I, J] per
// iteration; s [B, J, E] per iteration.

struct RoutingExtents {
    int64_t B, I, J, E;
    int64_t logits_size() const { return B * I * J; }
    int64_t s_size() const { return B * J * E; }
};

RoutingExtents routing_extents(const ArgumentChecks &checks) {
    return {checks.extent("batch"), checks.extent("in_caps"), checks.extent("out_caps"), checks.extent("out_dim")};
}

TensorView host_tensor(float *data, std::vector<int64_t> shape) {
    TensorView t;
    t.data = data;
    t.shape = std::move(shape);
    return t;
}

Options cpu_default_options() {
    Options o;
    o.device = Device::cpu;
    return o;
}

struct StepKernels {
    const HalideKernelEntry *s = nullptr, *logits = nullptr, *backward = nullptr, *backward_last = nullptr;
};

Status find_step_kernels(const char *op, StepKernels *k) {
    k->s = detail::find_halide_kernel("routing_step_s", "cpu", Device::cpu);
    k->logits = detail::find_halide_kernel("routing_step_logits", "cpu", Device::cpu);
    k->backward = detail::find_halide_kernel("routing_step_backward", "cpu", Device::cpu);
    k->backward_last = detail::find_halide_kernel("routing_step_backward_last", "cpu", Device::cpu);
    if (k->s && k->logits && k->backward && k->backward_last) return Status::success();
    return {StatusCode::internal_error, std::string(op) + ": the routing_step_* kernels are not in this build"};
}

// The routing forward by the step kernels: s of every iteration into
// s_all[t * s_size ...] (or, where given_s, read from it: only the logits
// are computed) and the logits of every iteration into logits_all
// (`iterations` of them), or only two alternating ones where logits_all is
// null. b0 may be absent (zeros).
Status run_step_forward(const char *op, const StepKernels &k, const TensorView &u_hat, const TensorView &b0,
                        const RoutingExtents &x, int iterations, float *s_all, bool given_s,
                        std::vector<float> *logits_all) {
    const int64_t n = x.logits_size();
    std::vector<float> two;
    float *logits = nullptr;
    if (logits_all != nullptr) {
        logits_all->assign(static_cast<size_t>(iterations * n), 0.0f);
        logits = logits_all->data();
    } else {
        two.assign(static_cast<size_t>(2 * n), 0.0f);
        logits = two.data();
    }
    auto logits_of = [&](int t) { return logits + (logits_all != nullptr ? t : t % 2) * n; };
    if (!is_absent(b0)) {
        for (int64_t b = 0; b < x.B; b++) std::copy(b0.data, b0.data + x.I * x.J, logits + b * x.I * x.J);
    }
    const Options options = cpu_default_options();
    for (int t = 0; t < iterations; t++) {
        TensorView logits_t = host_tensor(logits_of(t), {x.B, x.I, x.J});
        TensorView s_t = host_tensor(s_all + t * x.s_size(), {x.B, x.J, x.E});
        if (!given_s) {
            if (Status st = detail::run_halide(op, k.s->function, Device::cpu, options, {u_hat, logits_t}, {s_t}, {},
                                               {"u_hat", "logits", "s"});
                !st.ok()) {
                return st;
            }
        }
        if (t + 1 == iterations) break;
        TensorView next = host_tensor(logits_of(t + 1), {x.B, x.I, x.J});
        if (Status st = detail::run_halide(op, k.logits->function, Device::cpu, options, {u_hat, logits_t, s_t}, {next},
                                           {}, {"u_hat", "logits", "s", "logits_next"});
            !st.ok()) {
            return st;
        }
    }
    return Status::success();
}

// route (and the layer's routing) by the step kernels: v = squash of the
// last iteration's s; every iteration's s into routing_s where non-null.
Status run_step_route(const char *op, const TensorView &u_hat, const TensorView &b0, const TensorView &v,
                      const RoutingExtents &x, int iterations, float *routing_s) {
    StepKernels k;
    if (Status s = find_step_kernels(op, &k); !s.ok()) return s;
    std::vector<float> s_scratch;
    if (routing_s == nullptr) {
        s_scratch.assign(static_cast<size_t>(iterations * x.s_size()), 0.0f);
        routing_s = s_scratch.data();
    }
    if (Status s = run_step_forward(op, k, u_hat, b0, x, iterations, routing_s, false, nullptr); !s.ok()) return s;
    TensorView last_s = host_tensor(routing_s + (iterations - 1) * x.s_size(), {x.B, x.J, x.E});
    return squash(last_s, v, cpu_default_options());
}

// route_backward (and the layer's routing backward) by the step kernels:
// the forward replayed keeping every iteration's logits and s (read from
// given_s, digitcaps_backward_with_s, where non-null), then the iterations'
// backward steps from the last to the first, each adding its terms to
// grad_u_hat; grad_b0 = the sum over the batch of the first iteration's
// g_logits (where grad_b0 is not absent).
Status run_step_route_backward(const char *op, const TensorView &u_hat, const TensorView &b0, const TensorView &grad_v,
                               const TensorView &grad_u_hat, const TensorView &grad_b0, const RoutingExtents &x,
                               int iterations, const float *given_s) {
    StepKernels k;
    if (Status s = find_step_kernels(op, &k); !s.ok()) return s;
    std::vector<float> s_all(static_cast<size_t>(iterations * x.s_size()));
    if (given_s != nullptr) std::copy(given_s, given_s + iterations * x.s_size(), s_all.begin());
    std::vector<float> logits_all;
    if (Status s = run_step_forward(op, k, u_hat, b0, x, iterations, s_all.data(), given_s != nullptr, &logits_all);
        !s.ok()) {
        return s;
    }
    const int64_t n = x.logits_size();
    std::vector<float> g_next(static_cast<size_t>(n)), g(static_cast<size_t>(n));
    const Options options = cpu_default_options();
    for (int t = iterations - 1; t >= 0; t--) {
        TensorView logits_t = host_tensor(logits_all.data() + t * n, {x.B, x.I, x.J});
        TensorView s_t = host_tensor(s_all.data() + t * x.s_size(), {x.B, x.J, x.E});
        TensorView g_t = host_tensor(g.data(), {x.B, x.I, x.J});
        Status st;
        if (t == iterations - 1) {
            st = detail::run_halide(op, k.backward_last->function, Device::cpu, options, {u_hat, logits_t, s_t, grad_v},
                                    {g_t, grad_u_hat}, {}, {"u_hat", "logits", "s", "grad_v", "g_logits", "grad_u_hat"});
        } else {
            TensorView g_next_t = host_tensor(g_next.data(), {x.B, x.I, x.J});
            st = detail::run_halide(op, k.backward->function, Device::cpu, options,
                                    {u_hat, logits_t, s_t, g_next_t, grad_u_hat}, {g_t, grad_u_hat}, {},
                                    {"u_hat", "logits", "s", "g_logits_next", "grad_u_hat", "g_logits", "grad_u_hat"});
        }
        if (!st.ok()) return st;
        std::swap(g, g_next);
    }
    if (!is_absent(grad_b0)) {
        // g_next holds the first iteration's g_logits.
        for (int64_t ij = 0; ij < x.I * x.J; ij++) {
            double sum = 0;
            for (int64_t b = 0; b < x.B; b++) sum += g_next[b * x.I * x.J + ij];
            grad_b0.data[ij] = static_cast<float>(sum);
        }
    }
    return Status::success();
}

}  // namespace

Status squash(const TensorView &s, const TensorView &v, const Options &options) {
    const char *op = "squash";
    ArgumentChecks checks(op);
    // Any rank >= 1; dims named so that messages say which one disagrees.
    if (s.data != nullptr && s.shape.empty()) {
        return {StatusCode::bad_rank, std::string(op) + ": s must have rank >= 1 [..., capsule_dim], got rank 0 []"};
    }
    std::vector<std::string> names;
    for (size_t d = 0; d + 1 < s.shape.size(); d++) names.push_back("dim" + std::to_string(d));
    names.push_back("capsule_dim");
    std::vector<const char *> dims;
    for (const auto &n : names) dims.push_back(n.c_str());
    checks.tensor("s", s, dims);
    checks.tensor("v", v, dims);
    Device device = Device::cpu;
    const HalideKernelEntry *kernel = nullptr;
    // squash has no iterations; its kernel is registered with 0.
    device = checks.resolve_device(options.device);
    if (!checks.status().ok()) return checks.status();
    if (Status st = detail::check_device_ready(op, device); !st.ok()) return st;
    if (Status st = detail::find_kernel(op, "squash", detail::chosen_implementation(options, device), device, &kernel);
        !st.ok()) {
        return st;
    }
    // The kernel sees [rows, capsule_dim]: every dim but the last flattened.
    const int64_t dim = s.shape.back(), rows = s.element_count() / dim;
    TensorView s_flat = s, v_flat = v;
    s_flat.shape = v_flat.shape = {rows, dim};
    s_flat.strides.clear(), v_flat.strides.clear();
    return detail::run_halide(op, kernel->function, device, options, {s_flat}, {v_flat}, {}, {"s", "v"});
}

Status route(const TensorView &u_hat, const TensorView &b0, const TensorView &v, int iterations,
             const Options &options) {
    const char *op = "route";
    ArgumentChecks checks(op);
    checks.tensor("u_hat", u_hat, {"batch", "in_caps", "out_caps", "out_dim"});
    if (!is_absent(b0)) checks.tensor("b0", b0, {"in_caps", "out_caps"});
    checks.tensor("v", v, {"batch", "out_caps", "out_dim"});
    if (Status s = run_hand_routing(op, checks, options, iterations,
                                    [&] { return detail::run_hand_cuda_route(u_hat, b0, v, iterations, options); });
        s.code != StatusCode::unknown_implementation) {
        return s;
    }
    Device device;
    const HalideKernelEntry *kernel = nullptr;
    bool steps = false;
    if (Status s = pick_kernel(op, checks, options, iterations, &device, &kernel, &steps); !s.ok()) return s;
    if (steps) return run_step_route(op, u_hat, b0, v, routing_extents(checks), iterations, nullptr);
    const int64_t I = checks.extent("in_caps"), J = checks.extent("out_caps");
    CallScratch scratch(options);
    TensorView b0_used;
    if (Status s = scratch.given_or_stand_in(op, device, b0, I, J, true, &b0_used); !s.ok()) return s;
    return detail::run_halide(op, kernel->function, device, options, {u_hat, b0_used}, {v}, {}, {"u_hat", "b0", "v"});
}

namespace {

// The `given_s` tensor of digitcaps_with_s (routing_s) and
// digitcaps_backward_with_s: [iterations, batch, out_caps, out_dim], its
// first extent the iteration count asked for.
void check_routing_s(ArgumentChecks &checks, const TensorView &routing_s, int iterations) {
    checks.tensor("routing_s", routing_s, {"iterations", "batch", "out_caps", "out_dim"});
    checks.extent_is("routing_s", "iterations", iterations, "the call's iterations");
}

// The `routing_c` tensor of digitcaps_with_c and digitcaps_backward_with_c:
// [iterations, batch, in_caps, out_caps].
void check_routing_c(ArgumentChecks &checks, const TensorView &routing_c, int iterations) {
    checks.tensor("routing_c", routing_c, {"iterations", "batch", "in_caps", "out_caps"});
    checks.extent_is("routing_c", "iterations", iterations, "the call's iterations");
}

// The ops that keep c have one implementation, the hand-written
// "cuda_tensor" on CUDA: the options with it as the default, and the
// status for a call that asks for anything else.
Options with_c_options(const Options &options) {
    Options chosen = options;
    if (chosen.implementation.empty()) chosen.implementation = "cuda_tensor";
    return chosen;
}
// `given`: the caller's options (an empty implementation named nothing).
Status with_c_unavailable(const char *op, ArgumentChecks &checks, const Options &given) {
    if (!checks.status().ok()) return checks.status();
    const Device device = checks.resolve_device(given.device);
    if (!checks.status().ok()) return checks.status();
    const std::string named = given.implementation.empty() ? "" : " named '" + given.implementation + "'";
    return {StatusCode::unknown_implementation, std::string(op) + ": no implementation" + named + " on device " +
                                                    device_name(device) +
                                                    "; only the hand-written 'cuda_tensor' on device cuda keeps c"};
}

// digitcaps, digitcaps_with_s (`routing_s` non-null: the second output) and
// digitcaps_with_c (`routing_c` non-null too: the third).
Status run_digitcaps(const char *op, const TensorView &u, const TensorView &W, const TensorView &b0,
                     const TensorView &v, const TensorView *routing_s, const TensorView *routing_c, int iterations,
                     const Options &given_options) {
    const Options options = routing_c != nullptr ? with_c_options(given_options) : given_options;
    ArgumentChecks checks(op);
    checks.tensor("u", u, {"batch", "in_caps", "in_dim"});
    checks.tensor("W", W, {"in_caps", "out_caps", "out_dim", "in_dim"});
    if (!is_absent(b0)) checks.tensor("b0", b0, {"in_caps", "out_caps"});
    checks.tensor("v", v, {"batch", "out_caps", "out_dim"});
    if (routing_s != nullptr) check_routing_s(checks, *routing_s, iterations);
    if (routing_c != nullptr) check_routing_c(checks, *routing_c, iterations);
    if (Status s = run_hand_routing(op, checks, options, iterations,
                                    [&] {
                                        return detail::run_hand_cuda_digitcaps(u, W, b0, v, routing_s, routing_c,
                                                                               iterations, options);
                                    });
        s.code != StatusCode::unknown_implementation) {
        return s;
    }
    if (routing_c != nullptr) return with_c_unavailable(op, checks, given_options);
    Device device;
    const HalideKernelEntry *kernel = nullptr;
    bool steps = false;
    if (Status s = pick_kernel(op, checks, options, iterations, &device, &kernel, &steps); !s.ok()) return s;
    if (steps) {
        // u_hat materialised by the prediction's CPU kernel, then routed.
        const RoutingExtents x = routing_extents(checks);
        std::vector<float> u_hat(static_cast<size_t>(x.B * x.I * x.J * x.E));
        const TensorView u_hat_view = host_tensor(u_hat.data(), {x.B, x.I, x.J, x.E});
        if (Status s = predict(u, W, u_hat_view, cpu_default_options()); !s.ok()) return s;
        return run_step_route(op, u_hat_view, b0, v, x, iterations, routing_s != nullptr ? routing_s->data : nullptr);
    }
    const int64_t I = checks.extent("in_caps"), J = checks.extent("out_caps");
    CallScratch scratch(options);
    TensorView b0_used;
    if (Status s = scratch.given_or_stand_in(op, device, b0, I, J, true, &b0_used); !s.ok()) return s;
    const int64_t K = checks.extent("in_dim"), E = checks.extent("out_dim");
    std::vector<TensorView> outputs{v};
    std::vector<const char *> names{"u", "W", "b0", "v"};
    if (routing_s != nullptr) outputs.push_back(*routing_s), names.push_back("routing_s");
    auto run = [&](const HalideKernelEntry *k) {
        // The fused_split schedules read u and W in rows of 8 (CapsNet's
        // in_dim) and keep a thread's 16 out_dim values in registers. Their
        // pipelines refuse other shapes too, but some fail Halide's input
        // bounds check first, with an out-of-bounds error instead of this status.
        if (std::string(k->schedule).rfind("fused_split", 0) == 0 && (K != 8 || E != 16)) {
            return Status{StatusCode::unsupported_shape,
                          std::string(op) + ": implementation '" + k->schedule +
                              "' reads u and W in rows of 8 and keeps 16 out_dim values in registers: in_dim must "
                              "be 8 and out_dim 16, got " + std::to_string(K) + " and " + std::to_string(E)};
        }
        return detail::run_halide(op, k->function, device, options, {u, W, b0_used}, outputs, {}, names);
    };
    if (!options.implementation.empty() || !detail::runs_gpu_schedules(device)) return run(kernel);
    // The CUDA default refuses some shapes before any device work: the
    // fused_split schedules all but CapsNet's (in_dim 8, out_dim 16, out_caps
    // up to 24; fused_split_vectors up to 14, fused_split up to 11), the fused
    // passes those whose blocks would need more than 48 KB of shared memory.
    // Each refusal hands the call to the next in this order (the other
    // fused_split variants refuse what fused_split_all_vectors refuses, so
    // they are not in it). The order starts from cuda_default's names, so
    // that the default is named in one place.
    const CudaDefault d = cuda_default(op);
    const std::vector<std::string> by_speed = {d.preferred, d.base, "stage_per_kernel"};
    Status status = run(kernel);
    auto next = std::find(by_speed.begin(), by_speed.end(), kernel->schedule);
    if (next != by_speed.end()) ++next;
    for (; next != by_speed.end() && status.code == StatusCode::unsupported_shape; ++next) {
        if (Status s = detail::find_routing_kernel(op, generators_of(op), *next, device, iterations, &kernel); !s.ok()) {
            return s;
        }
        status = run(kernel);
    }
    return status;
}


}  // namespace

Status digitcaps(const TensorView &u, const TensorView &W, const TensorView &b0, const TensorView &v, int iterations,
                 const Options &options) {
    return run_digitcaps("digitcaps", u, W, b0, v, nullptr, nullptr, iterations, options);
}

Status digitcaps_with_s(const TensorView &u, const TensorView &W, const TensorView &b0, const TensorView &v,
                        const TensorView &routing_s, int iterations, const Options &options) {
    return run_digitcaps("digitcaps_with_s", u, W, b0, v, &routing_s, nullptr, iterations, options);
}

Status digitcaps_with_c(const TensorView &u, const TensorView &W, const TensorView &b0, const TensorView &v,
                        const TensorView &routing_s, const TensorView &routing_c, int iterations,
                        const Options &options) {
    return run_digitcaps("digitcaps_with_c", u, W, b0, v, &routing_s, &routing_c, iterations, options);
}

Status route_backward(const TensorView &u_hat, const TensorView &b0, const TensorView &grad_v,
                      const TensorView &grad_u_hat, const TensorView &grad_b0, int iterations,
                      const Options &options) {
    const char *op = "route_backward";
    ArgumentChecks checks(op);
    checks.tensor("u_hat", u_hat, {"batch", "in_caps", "out_caps", "out_dim"});
    if (!is_absent(b0)) checks.tensor("b0", b0, {"in_caps", "out_caps"});
    checks.tensor("grad_v", grad_v, {"batch", "out_caps", "out_dim"});
    checks.tensor("grad_u_hat", grad_u_hat, {"batch", "in_caps", "out_caps", "out_dim"});
    if (!is_absent(grad_b0)) checks.tensor("grad_b0", grad_b0, {"in_caps", "out_caps"});
    if (Status s = run_hand_routing(op, checks, options, iterations,
                                    [&] {
                                        return detail::run_hand_cuda_route_backward(u_hat, b0, grad_v, grad_u_hat,
                                                                                    grad_b0, iterations, options);
                                    });
        s.code != StatusCode::unknown_implementation) {
        return s;
    }
    Device device;
    const HalideKernelEntry *kernel = nullptr;
    bool steps = false;
    if (Status s = pick_kernel(op, checks, options, iterations, &device, &kernel, &steps); !s.ok()) return s;
    if (steps) {
        return run_step_route_backward(op, u_hat, b0, grad_v, grad_u_hat, grad_b0, routing_extents(checks), iterations,
                                       nullptr);
    }
    const int64_t I = checks.extent("in_caps"), J = checks.extent("out_caps");
    CallScratch scratch(options);
    TensorView b0_used, grad_b0_used;
    if (Status s = scratch.given_or_stand_in(op, device, b0, I, J, true, &b0_used); !s.ok()) return s;
    if (Status s = scratch.given_or_stand_in(op, device, grad_b0, I, J, false, &grad_b0_used); !s.ok()) return s;
    return detail::run_halide(op, kernel->function, device, options, {u_hat, b0_used, grad_v},
                              {grad_u_hat, grad_b0_used}, {}, {"u_hat", "b0", "grad_v", "grad_u_hat", "grad_b0"});
}

namespace {

// digitcaps_backward, digitcaps_backward_with_s (`routing_s` non-null) and
// digitcaps_backward_with_c (`routing_c` non-null too).
Status run_digitcaps_backward(const char *op, const TensorView &u, const TensorView &W, const TensorView &b0,
                              const TensorView *routing_s, const TensorView *routing_c, const TensorView &grad_v,
                              const TensorView &grad_u, const TensorView &grad_W, const TensorView &grad_b0,
                              int iterations, const Options &given_options) {
    const Options options = routing_c != nullptr ? with_c_options(given_options) : given_options;
    ArgumentChecks checks(op);
    checks.tensor("u", u, {"batch", "in_caps", "in_dim"});
    checks.tensor("W", W, {"in_caps", "out_caps", "out_dim", "in_dim"});
    if (!is_absent(b0)) checks.tensor("b0", b0, {"in_caps", "out_caps"});
    if (routing_s != nullptr) check_routing_s(checks, *routing_s, iterations);
    if (routing_c != nullptr) check_routing_c(checks, *routing_c, iterations);
    checks.tensor("grad_v", grad_v, {"batch", "out_caps", "out_dim"});
    checks.tensor("grad_u", grad_u, {"batch", "in_caps", "in_dim"});
    checks.tensor("grad_W", grad_W, {"in_caps", "out_caps", "out_dim", "in_dim"});
    if (!is_absent(grad_b0)) checks.tensor("grad_b0", grad_b0, {"in_caps", "out_caps"});
    if (Status s = run_hand_routing(op, checks, options, iterations,
                                    [&] {
                                        return detail::run_hand_cuda_digitcaps_backward(u, W, b0, routing_s, routing_c,
                                                                                        grad_v, grad_u, grad_W, grad_b0,
                                                                                        iterations, options);
                                    });
        s.code != StatusCode::unknown_implementation) {
        return s;
    }
    if (routing_c != nullptr) return with_c_unavailable(op, checks, given_options);
    Device device;
    const HalideKernelEntry *kernel = nullptr;
    bool steps = false;
    if (Status s = pick_kernel(op, checks, options, iterations, &device, &kernel, &steps); !s.ok()) return s;
    if (steps) {
        // u_hat materialised by the prediction's CPU kernel, routing's
        // backward into grad_u_hat, then the prediction's gradients of it.
        const RoutingExtents x = routing_extents(checks);
        const size_t u_hat_size = static_cast<size_t>(x.B * x.I * x.J * x.E);
        std::vector<float> u_hat(u_hat_size), grad_u_hat(u_hat_size);
        const TensorView u_hat_view = host_tensor(u_hat.data(), {x.B, x.I, x.J, x.E});
        const TensorView grad_u_hat_view = host_tensor(grad_u_hat.data(), {x.B, x.I, x.J, x.E});
        if (Status s = predict(u, W, u_hat_view, cpu_default_options()); !s.ok()) return s;
        if (Status s = run_step_route_backward(op, u_hat_view, b0, grad_v, grad_u_hat_view, grad_b0, x, iterations,
                                               routing_s != nullptr ? routing_s->data : nullptr);
            !s.ok()) {
            return s;
        }
        return predict_backward(grad_u_hat_view, u, W, grad_u, grad_W, cpu_default_options());
    }
    // rows_vectors, the CUDA default, stores grad_u and grad_W 16 bytes at a
    // time and so requires them on a 16-byte boundary (device tensors are,
    // halide_call.cpp); with a host one off that boundary the default is
    // rows_predict.
    if (options.implementation.empty() && std::string(kernel->schedule) == "rows_vectors" &&
        !(detail::on_16_byte_boundary(grad_u) && detail::on_16_byte_boundary(grad_W))) {
        if (Status s = detail::find_routing_kernel(op, generators_of(op), "rows_predict", device, iterations, &kernel);
            !s.ok()) {
            return s;
        }
    }
    const int64_t I = checks.extent("in_caps"), J = checks.extent("out_caps");
    CallScratch scratch(options);
    TensorView b0_used, grad_b0_used;
    if (Status s = scratch.given_or_stand_in(op, device, b0, I, J, true, &b0_used); !s.ok()) return s;
    if (Status s = scratch.given_or_stand_in(op, device, grad_b0, I, J, false, &grad_b0_used); !s.ok()) return s;
    // The kernels' argument order: routing_s, where given, before grad_v.
    std::vector<TensorView> inputs{u, W, b0_used};
    std::vector<const char *> names{"u", "W", "b0"};
    if (routing_s != nullptr) inputs.push_back(*routing_s), names.push_back("routing_s");
    inputs.push_back(grad_v);
    for (const char *n : {"grad_v", "grad_u", "grad_W", "grad_b0"}) names.push_back(n);
    return detail::run_halide(op, kernel->function, device, options, inputs, {grad_u, grad_W, grad_b0_used}, {},
                              names);
}

}  // namespace

Status digitcaps_backward(const TensorView &u, const TensorView &W, const TensorView &b0, const TensorView &grad_v,
                          const TensorView &grad_u, const TensorView &grad_W, const TensorView &grad_b0,
                          int iterations, const Options &options) {
    return run_digitcaps_backward("digitcaps_backward", u, W, b0, nullptr, nullptr, grad_v, grad_u, grad_W, grad_b0,
                                  iterations, options);
}

Status digitcaps_backward_with_s(const TensorView &u, const TensorView &W, const TensorView &b0,
                                 const TensorView &routing_s, const TensorView &grad_v, const TensorView &grad_u,
                                 const TensorView &grad_W, const TensorView &grad_b0, int iterations,
                                 const Options &options) {
    return run_digitcaps_backward("digitcaps_backward_with_s", u, W, b0, &routing_s, nullptr, grad_v, grad_u, grad_W,
                                  grad_b0, iterations, options);
}

Status digitcaps_backward_with_c(const TensorView &u, const TensorView &W, const TensorView &b0,
                                 const TensorView &routing_s, const TensorView &routing_c, const TensorView &grad_v,
                                 const TensorView &grad_u, const TensorView &grad_W, const TensorView &grad_b0,
                                 int iterations, const Options &options) {
    return run_digitcaps_backward("digitcaps_backward_with_c", u, W, b0, &routing_s, &routing_c, grad_v, grad_u,
                                  grad_W, grad_b0, iterations, options);
}

namespace detail {

void append_routing_implementations(std::vector<ImplementationInfo> &out) {
    for (const auto &r : routing_ops()) {
        // One entry per (implementation, device), with the iteration counts built.
        std::map<std::pair<std::string, Device>, std::set<int>> found;
        for (const char *generator : r.generators) {
            for (const auto &k : halide_kernels()) {
                if (std::string(k.generator) == generator) found[{k.schedule, k.device}].insert(k.iterations);
            }
        }
        // Every count the CPU's general path takes (has_steps ops).
        std::vector<int> any_count;
        for (int n = 1; n <= kMaxRoutingIterations; n++) any_count.push_back(n);
        const std::string any_list = "1 to " + std::to_string(kMaxRoutingIterations);
        for (const auto &[key, counts] : found) {
            ImplementationInfo info{r.op, key.first, key.second, "", {}};
            std::string list;
            for (int n : counts) {
                if (n > 0) {
                    info.iterations.push_back(n);
                    list += (list.empty() ? "" : ", ") + std::to_string(n);
                }
            }
            // The op's CPU default runs the general path for the counts it
            // has no unrolled kernel for.
            const bool falls_back = key.second == Device::cpu && has_steps(r.op) && !list.empty() &&
                                    key.first == cpu_default(r.op).base;
            if (falls_back) {
                info.iterations = any_count;
                list += " unrolled, any other from " + any_list + " by the per-iteration kernels ('steps')";
            }
            info.description = std::string(key.first == "autodiff"        ? "Halide autodiff, Li2018 schedule" :
                                            key.first == "root_autodiff" ? "Halide autodiff, every stage compute_root" :
                                                                      "Halide schedule '" + key.first + "'") +
                                " (" + r.what + (list.empty() ? "" : "; iterations " + list) + ")";
            out.push_back(info);
        }
        if (has_steps(r.op)) {
            out.push_back({r.op, kSteps, Device::cpu,
                           std::string("Halide kernels of one routing iteration each (generators routing_step_*), "
                                       "chained by the runtime (") +
                               r.what + "; iterations " + any_list + ")",
                           any_count});
        }
        if (cuda_built() && (std::string(r.op) == "route" || std::string(r.op) == "digitcaps")) {
            out.push_back({r.op, "cuda_naive", Device::cuda,
                           "hand-written CUDA, one kernel per step (reference/cuda/digitcaps_cuda.cu; any "
                           "iteration count, listed: 1, 3, 5)",
                           {1, 3, 5}});
        }
        if (cuda_built() && (std::string(r.op) == "route_backward" || std::string(r.op) == "digitcaps_backward")) {
            out.push_back({r.op, "cuda_naive", Device::cuda,
                           "hand-written CUDA, one kernel per step, the forward replayed keeping every iteration "
                           "(reference/cuda/digitcaps_backward_cuda.cu; any iteration count, listed: 1, 3, 5)",
                           {1, 3, 5}});
            out.push_back({r.op, "cuda_passes", Device::cuda,
                           "hand-written CUDA, u_hat materialised once, two kernels an iteration for the forward's "
                           "replay and two for the backward, each pass reading u_hat once "
                           "(reference/cuda/digitcaps_backward_cuda.cu; out_caps, out_dim <= 32; any iteration "
                           "count, listed: 1, 3, 5)",
                           {1, 3, 5}});
        }
        if (cuda_built() && std::string(r.op) == "digitcaps_with_s") {
            out.push_back({r.op, "cuda_tensor", Device::cuda,
                           "hand-written CUDA, digitcaps' cuda_tensor with every iteration's s stored by its squash "
                           "kernels (reference/cuda/digitcaps_tensor_cores.cu; out_caps, out_dim, in_dim <= 16; any "
                           "iteration count, listed: 1, 3, 5)",
                           {1, 3, 5}});
        }
        if (cuda_built() && std::string(r.op) == "digitcaps_backward_with_s") {
            out.push_back({r.op, "cuda_tensor", Device::cuda,
                           "hand-written CUDA, digitcaps_backward's cuda_tensor from the forward's s: no replay, each "
                           "backward pass computing its c from the logits (reference/cuda/digitcaps_backward_cuda.cu; "
                           "out_caps, out_dim, in_dim <= 16; any iteration count, listed: 1, 3, 5)",
                           {1, 3, 5}});
        }
        if (cuda_built() && std::string(r.op) == "digitcaps_with_c") {
            out.push_back({r.op, "cuda_tensor", Device::cuda,
                           "hand-written CUDA, digitcaps_with_s' cuda_tensor with every iteration's c stored too, by "
                           "its agreement passes (reference/cuda/digitcaps_tensor_cores.cu; out_caps, out_dim, "
                           "in_dim <= 16; any iteration count, listed: 1, 3, 5)",
                           {1, 3, 5}});
        }
        if (cuda_built() && std::string(r.op) == "digitcaps_backward_with_c") {
            out.push_back({r.op, "cuda_tensor", Device::cuda,
                           "hand-written CUDA, digitcaps_backward_with_s' cuda_tensor reading the forward's c: no "
                           "logits in its backward passes (reference/cuda/digitcaps_backward_cuda.cu; out_caps, "
                           "out_dim, in_dim <= 16; any iteration count, listed: 1, 3, 5)",
                           {1, 3, 5}});
        }
        if (cuda_built() && std::string(r.op) == "digitcaps_backward") {
            out.push_back({r.op, "cuda_tensor", Device::cuda,
                           "hand-written CUDA, cuda_passes with no u_hat in memory: its passes are the forward "
                           "cuda_tensor's, u_hat recomputed on the tensor cores each pass (3xTF32) "
                           "(reference/cuda/digitcaps_backward_cuda.cu; out_caps, out_dim, in_dim <= 16; any "
                           "iteration count, listed: 1, 3, 5)",
                           {1, 3, 5}});
        }
        if (cuda_built() && std::string(r.op) == "digitcaps") {
            out.push_back({r.op, "cuda_fused", Device::cuda,
                           "hand-written CUDA, two kernels an iteration, u_hat recomputed once an iteration "
                           "(reference/cuda/digitcaps_cuda.cu; out_caps <= 16, out_dim <= 32, in_dim <= 16; any "
                           "iteration count, listed: 1, 3, 5)",
                           {1, 3, 5}});
            out.push_back({r.op, "cuda_tensor", Device::cuda,
                           "hand-written CUDA, cuda_fused's two kernels an iteration with u_hat on the tensor cores in "
                           "float32 accuracy (3xTF32; "
                           "reference/cuda/digitcaps_tensor_cores.cu; out_caps, out_dim, in_dim <= 16; any "
                           "iteration count, listed: 1, 3, 5)",
                           {1, 3, 5}});
        }
    }
}

}  // namespace detail

}  // namespace halcaps

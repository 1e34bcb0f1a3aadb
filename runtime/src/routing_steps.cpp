// The general path of every routing op ("steps"): the routing_step_* Halide
// kernels (generators/digitcaps.cpp), one part of one iteration each,
// chained here for any iteration count and any shape, on the CPU, CUDA or
// OpenCL. The layer's u_hat and its gradients come from the prediction's
// default kernels on the same device.
#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "implementations.h"
#include "kernel_registry.h"

#if HALCAPS_WITH_CUDA
#include <cuda_runtime.h>

#include "cuda_support.h"
#include "hand_cuda_support.h"
#endif

namespace halcaps::detail {

namespace {

// Scratch tensors of one chained call, in the memory space of the call's
// tensors (the argument checks put them all in one): host vectors (the CPU,
// and OpenCL, whose tensors Halide copies to the device and back), or CUDA
// memory ordered on the call's stream (cudaMallocAsync, freed with
// cudaFreeAsync once the kernels are queued). Each tensor is its own
// allocation, so it starts on the 16-byte boundary the CUDA kernels need;
// slices of a caller's [iterations, ...] tensor may not, and are copied.
class StepMemory {
public:
    StepMemory(const char *op, MemorySpace space, const Options &options) : op_(op), space_(space), options_(options) {}
    ~StepMemory() {
#if HALCAPS_WITH_CUDA
        if (device_buffers_.empty()) return;
        ScopedCudaContext context(options_);
        for (void *p : device_buffers_) cudaFreeAsync(p, stream());
#endif
    }
    StepMemory(const StepMemory &) = delete;
    StepMemory &operator=(const StepMemory &) = delete;

    // A zeroed tensor of `shape`, named `what` in an allocation failure.
    Status tensor(const char *what, std::vector<int64_t> shape, TensorView *t) {
        int64_t count = 1;
        for (int64_t extent : shape) count *= extent;
        t->shape = std::move(shape);
        t->strides.clear();
        t->space = space_;
        if (space_ == MemorySpace::host) {
            host_buffers_.emplace_back(static_cast<size_t>(count), 0.0f);
            t->data = host_buffers_.back().data();
            return Status::success();
        }
#if HALCAPS_WITH_CUDA
        ScopedCudaContext context(options_);
        if (!context.status().ok()) return context.status();
        const size_t bytes = static_cast<size_t>(count) * sizeof(float);
        void *p = nullptr;
        if (cudaError_t err = cudaMallocAsync(&p, bytes, stream()); err != cudaSuccess) {
            return cuda_status(op_, std::string("allocating ") + what, err);
        }
        device_buffers_.push_back(p);
        if (cudaError_t err = cudaMemsetAsync(p, 0, bytes, stream()); err != cudaSuccess) {
            return cuda_status(op_, std::string("zeroing ") + what, err);
        }
        t->data = static_cast<float *>(p);
        return Status::success();
#else
        (void)what;
        return {StatusCode::device_unavailable, std::string(op_) + ": this build of halcaps has no CUDA support"};
#endif
    }

    // `count` floats from src to dst, both in this space.
    Status copy(float *dst, const float *src, int64_t count) {
        if (space_ == MemorySpace::host) {
            std::copy(src, src + count, dst);
            return Status::success();
        }
#if HALCAPS_WITH_CUDA
        ScopedCudaContext context(options_);
        if (!context.status().ok()) return context.status();
        if (cudaError_t err = cudaMemcpyAsync(dst, src, static_cast<size_t>(count) * sizeof(float),
                                              cudaMemcpyDeviceToDevice, stream());
            err != cudaSuccess) {
            return cuda_status(op_, "copying between the routing steps' tensors", err);
        }
        return Status::success();
#else
        return {StatusCode::device_unavailable, std::string(op_) + ": this build of halcaps has no CUDA support"};
#endif
    }

    // `rows` copies of the `row` floats at src, one after another at dst:
    // b0 to every batch element's logits (on the device by doubling copies).
    Status repeat(float *dst, const float *src, int64_t row, int64_t rows) {
        if (rows == 0) return Status::success();
        if (Status s = copy(dst, src, row); !s.ok()) return s;
        for (int64_t done = 1; done < rows; done *= 2) {
            if (Status s = copy(dst + done * row, dst, std::min(done, rows - done) * row); !s.ok()) return s;
        }
        return Status::success();
    }

private:
#if HALCAPS_WITH_CUDA
    cudaStream_t stream() const { return static_cast<cudaStream_t>(options_.cuda_stream); }
    std::vector<void *> device_buffers_;
#endif
    const char *op_;
    MemorySpace space_;
    [[maybe_unused]] const Options &options_;  // read only when the build has CUDA
    std::deque<std::vector<float>> host_buffers_;
};

struct StepKernels {
    const HalideKernelEntry *s = nullptr, *logits = nullptr, *backward = nullptr, *backward_last = nullptr,
                            *grad_b0 = nullptr;
};

// The step kernels of the call's device: "cpu" on the CPU, one kernel per
// stage ("stage_per_kernel") on CUDA and OpenCL.
Status find_step_kernels(const char *op, Device device, StepKernels *k) {
    const char *schedule = device == Device::cpu ? "cpu" : "stage_per_kernel";
    k->s = find_halide_kernel("routing_step_s", schedule, device);
    k->logits = find_halide_kernel("routing_step_logits", schedule, device);
    k->backward = find_halide_kernel("routing_step_backward", schedule, device);
    k->backward_last = find_halide_kernel("routing_step_backward_last", schedule, device);
    k->grad_b0 = find_halide_kernel("routing_step_grad_b0", schedule, device);
    if (k->s && k->logits && k->backward && k->backward_last && k->grad_b0) return Status::success();
    return {StatusCode::internal_error, std::string(op) + ": the routing_step_* kernels (" + schedule + ") for " +
                                            device_name(device) + " are not in this build"};
}

// One chained call: its kernels, memory and options (the caller's stream
// and context; no implementation name, so the prediction and squash run
// their defaults on the call's device).
struct Steps {
    const RoutingCall &c;
    StepKernels k;
    StepMemory memory;
    Options options;

    Steps(const RoutingCall &call, MemorySpace space) : c(call), memory(call.op, space, *call.options) {
        options = *call.options;
        options.implementation.clear();
        options.device = call.device;
    }

    Status run(const HalideKernelEntry &kernel, const std::vector<TensorView> &inputs,
               const std::vector<TensorView> &outputs, const std::vector<const char *> &names) const {
        return run_halide(c.op, kernel.function, c.device, options, inputs, outputs, {}, names);
    }
};

// Every iteration's logits and s: logits[0] is b0 for every batch element
// (zeros where b0 is absent); s[t] the weighted sum of iteration t.
struct ForwardState {
    std::vector<TensorView> logits, s;
};

// The routing forward by the step kernels over u_hat. Where given_s holds
// the forward's s ([iterations, B, J, E], digitcaps_backward_with_s) only
// the logits are computed; where keep_logits is false, two logits tensors
// alternate.
Status run_step_forward(Steps &st, const TensorView &u_hat, const TensorView &b0, const TensorView *given_s,
                        bool keep_logits, ForwardState *f) {
    const RoutingExtents &x = st.c.x;
    const int iterations = st.c.iterations;
    const int logits_kept = keep_logits ? iterations : std::min(iterations, 2);
    f->logits.resize(static_cast<size_t>(logits_kept));
    f->s.resize(static_cast<size_t>(iterations));
    for (TensorView &t : f->logits) {
        if (Status s = st.memory.tensor("the logits", {x.B, x.I, x.J}, &t); !s.ok()) return s;
    }
    for (int t = 0; t < iterations; t++) {
        TensorView &s_t = f->s[static_cast<size_t>(t)];
        if (Status s = st.memory.tensor("the iterations' s", {x.B, x.J, x.E}, &s_t); !s.ok()) return s;
        if (given_s == nullptr) continue;
        if (Status s = st.memory.copy(s_t.data, given_s->data + t * x.s_size(), x.s_size()); !s.ok()) return s;
    }
    if (!is_absent(b0)) {
        if (Status s = st.memory.repeat(f->logits[0].data, b0.data, x.I * x.J, x.B); !s.ok()) return s;
    }
    auto logits_of = [&](int t) -> const TensorView & { return f->logits[static_cast<size_t>(t % logits_kept)]; };
    for (int t = 0; t < iterations; t++) {
        const TensorView &logits_t = logits_of(t), &s_t = f->s[static_cast<size_t>(t)];
        if (given_s == nullptr) {
            if (Status s = st.run(*st.k.s, {u_hat, logits_t}, {s_t}, {"u_hat", "logits", "s"}); !s.ok()) return s;
        }
        if (t + 1 == iterations) break;
        if (Status s = st.run(*st.k.logits, {u_hat, logits_t, s_t}, {logits_of(t + 1)},
                              {"u_hat", "logits", "s", "logits_next"});
            !s.ok()) {
            return s;
        }
    }
    return Status::success();
}

// route (and the layer's routing): v = squash of the last iteration's s;
// every iteration's s copied into routing_s where given.
Status run_step_route(Steps &st, const TensorView &u_hat, const TensorView &b0, const TensorView &v,
                      const TensorView *routing_s) {
    ForwardState f;
    if (Status s = run_step_forward(st, u_hat, b0, nullptr, false, &f); !s.ok()) return s;
    if (routing_s != nullptr) {
        for (int t = 0; t < st.c.iterations; t++) {
            float *slice = routing_s->data + t * st.c.x.s_size();
            if (Status s = st.memory.copy(slice, f.s[static_cast<size_t>(t)].data, st.c.x.s_size()); !s.ok()) {
                return s;
            }
        }
    }
    return squash(f.s.back(), v, st.options);
}

// route_backward (and the layer's routing backward): the forward replayed
// keeping every iteration's logits and s (s read from given_s where
// given), then the iterations' backward steps from the last to the first,
// each adding its terms to grad_u_hat; grad_b0 = the sum over the batch of
// the first iteration's g_logits (where grad_b0 is not absent).
Status run_step_route_backward(Steps &st, const TensorView &u_hat, const TensorView &b0, const TensorView &grad_v,
                               const TensorView &grad_u_hat, const TensorView &grad_b0, const TensorView *given_s) {
    const RoutingExtents &x = st.c.x;
    ForwardState f;
    if (Status s = run_step_forward(st, u_hat, b0, given_s, true, &f); !s.ok()) return s;
    TensorView g, g_next;
    for (TensorView *t : {&g, &g_next}) {
        if (Status s = st.memory.tensor("the logits' gradients", {x.B, x.I, x.J}, t); !s.ok()) return s;
    }
    for (int t = st.c.iterations - 1; t >= 0; t--) {
        const TensorView &logits_t = f.logits[static_cast<size_t>(t)], &s_t = f.s[static_cast<size_t>(t)];
        Status status;
        if (t == st.c.iterations - 1) {
            status = st.run(*st.k.backward_last, {u_hat, logits_t, s_t, grad_v}, {g, grad_u_hat},
                            {"u_hat", "logits", "s", "grad_v", "g_logits", "grad_u_hat"});
        } else {
            status = st.run(*st.k.backward, {u_hat, logits_t, s_t, g_next, grad_u_hat}, {g, grad_u_hat},
                            {"u_hat", "logits", "s", "g_logits_next", "grad_u_hat", "g_logits", "grad_u_hat"});
        }
        if (!status.ok()) return status;
        std::swap(g, g_next);
    }
    if (is_absent(grad_b0)) return Status::success();
    // g_next holds the first iteration's g_logits.
    return st.run(*st.k.grad_b0, {g_next}, {grad_b0}, {"g_logits", "grad_b0"});
}

}  // namespace

Status run_routing_steps(const RoutingCall &c) {
    const TensorView &first = c.u_hat != nullptr ? *c.u_hat : *c.u;
    Steps st(c, first.space);
    if (Status s = find_step_kernels(c.op, c.device, &st.k); !s.ok()) return s;
    if (c.u_hat != nullptr && !c.backward()) return run_step_route(st, *c.u_hat, *c.b0, *c.v, nullptr);
    if (c.u_hat != nullptr) {
        return run_step_route_backward(st, *c.u_hat, *c.b0, *c.grad_v, *c.grad_u_hat, *c.grad_b0, nullptr);
    }
    // The layer: u_hat by the prediction's default kernel, then routed.
    const RoutingExtents &x = c.x;
    TensorView u_hat;
    if (Status s = st.memory.tensor("u_hat", {x.B, x.I, x.J, x.E}, &u_hat); !s.ok()) return s;
    if (Status s = predict(*c.u, *c.W, u_hat, st.options); !s.ok()) return s;
    if (!c.backward()) return run_step_route(st, u_hat, *c.b0, *c.v, c.routing_s);
    // The backward: routing's backward into grad_u_hat, then the prediction's gradients of it.
    TensorView grad_u_hat;
    if (Status s = st.memory.tensor("grad_u_hat", {x.B, x.I, x.J, x.E}, &grad_u_hat); !s.ok()) return s;
    if (Status s = run_step_route_backward(st, u_hat, *c.b0, *c.grad_v, grad_u_hat, *c.grad_b0, c.routing_s); !s.ok()) {
        return s;
    }
    return predict_backward(grad_u_hat, *c.u, *c.W, *c.grad_u, *c.grad_W, st.options);
}

}  // namespace halcaps::detail

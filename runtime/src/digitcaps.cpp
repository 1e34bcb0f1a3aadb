// Entry points for squash, routing and the DigitCaps layer, forward and
// backward: argument checks and the device, then the operator's table
// (routing_implementations.cpp); and two of the three ways its rows run: a
// Halide kernel (generators/digitcaps.cpp) or the hand-written CUDA (the
// chained per-iteration kernels are routing_steps.cpp).
#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "argument_checks.h"
#include "halide_call.h"
#include "hand_cuda.h"
#include "implementations.h"
#include "kernel_registry.h"
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
using detail::is_absent;
using detail::RoutingCall;
using detail::RoutingExtents;

Status check_iterations(const char *op, int iterations) {
    if (iterations < 1) {
        return {StatusCode::unsupported_iterations,
                std::string(op) + ": iterations is " + std::to_string(iterations) + "; it must be at least 1"};
    }
    if (iterations > kMaxRoutingIterations) {
        return {StatusCode::unsupported_iterations, std::string(op) + ": iterations is " + std::to_string(iterations) +
                                                        "; at most " + std::to_string(kMaxRoutingIterations) +
                                                        " are supported (kMaxRoutingIterations)"};
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
    Status given_or_stand_in(const char *op, Device device, const TensorView &given, int64_t in_caps, int64_t out_caps,
                             bool zeroed, TensorView *used) {
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

// The checks every routing entry point makes once its tensors passed theirs:
// the device, the iteration count, the device ready; then the call.
Status routing_call(const char *op, ArgumentChecks &checks, const Options &options, int iterations, bool layer,
                    RoutingCall *call) {
    const Device device = checks.resolve_device(options.device);
    if (!checks.status().ok()) return checks.status();
    if (Status s = check_iterations(op, iterations); !s.ok()) return s;
    if (Status s = detail::check_device_ready(op, device); !s.ok()) return s;
    call->op = op, call->device = device, call->iterations = iterations, call->options = &options;
    call->x = {checks.extent("batch"), checks.extent("in_caps"), checks.extent("out_caps"), checks.extent("out_dim"),
               layer ? checks.extent("in_dim") : 0};
    return Status::success();
}

}  // namespace

namespace detail {

Status run_routing_kernel(const RoutingCall &c, const HalideKernelEntry &kernel) {
    const Options &options = *c.options;
    if (c.s != nullptr) {
        // squash: the kernel sees [rows, capsule_dim], every dim but the last flattened.
        const int64_t dim = c.s->shape.back(), rows = c.s->element_count() / dim;
        TensorView s_flat = *c.s, v_flat = *c.v;
        s_flat.shape = v_flat.shape = {rows, dim};
        s_flat.strides.clear(), v_flat.strides.clear();
        return run_halide(c.op, kernel.function, c.device, options, {s_flat}, {v_flat}, {}, {"s", "v"});
    }
    CallScratch scratch(options);
    TensorView b0_used, grad_b0_used;
    if (Status s = scratch.given_or_stand_in(c.op, c.device, *c.b0, c.x.I, c.x.J, true, &b0_used); !s.ok()) return s;
    if (c.backward()) {
        if (Status s = scratch.given_or_stand_in(c.op, c.device, *c.grad_b0, c.x.I, c.x.J, false, &grad_b0_used);
            !s.ok()) {
            return s;
        }
    }
    if (c.u_hat != nullptr && !c.backward()) {
        return run_halide(c.op, kernel.function, c.device, options, {*c.u_hat, b0_used}, {*c.v}, {},
                          {"u_hat", "b0", "v"});
    }
    if (c.u_hat != nullptr) {
        return run_halide(c.op, kernel.function, c.device, options, {*c.u_hat, b0_used, *c.grad_v},
                          {*c.grad_u_hat, grad_b0_used}, {}, {"u_hat", "b0", "grad_v", "grad_u_hat", "grad_b0"});
    }
    if (!c.backward()) {
        std::vector<TensorView> outputs{*c.v};
        std::vector<const char *> names{"u", "W", "b0", "v"};
        if (c.routing_s != nullptr) outputs.push_back(*c.routing_s), names.push_back("routing_s");
        return run_halide(c.op, kernel.function, c.device, options, {*c.u, *c.W, b0_used}, outputs, {}, names);
    }
    // The kernels' argument order: routing_s, where given, before grad_v.
    std::vector<TensorView> inputs{*c.u, *c.W, b0_used};
    std::vector<const char *> names{"u", "W", "b0"};
    if (c.routing_s != nullptr) inputs.push_back(*c.routing_s), names.push_back("routing_s");
    inputs.push_back(*c.grad_v);
    for (const char *n : {"grad_v", "grad_u", "grad_W", "grad_b0"}) names.push_back(n);
    return run_halide(c.op, kernel.function, c.device, options, inputs, {*c.grad_u, *c.grad_W, grad_b0_used}, {},
                      names);
}

Status run_routing_hand_cuda(const RoutingCall &c, const std::string &implementation) {
    // The hand-written entry points read the implementation from the options.
    Options options = *c.options;
    options.implementation = implementation;
    if (c.u_hat != nullptr && !c.backward()) return run_hand_cuda_route(*c.u_hat, *c.b0, *c.v, c.iterations, options);
    if (c.u_hat != nullptr) {
        return run_hand_cuda_route_backward(*c.u_hat, *c.b0, *c.grad_v, *c.grad_u_hat, *c.grad_b0, c.iterations,
                                            options);
    }
    if (!c.backward()) {
        return run_hand_cuda_digitcaps(*c.u, *c.W, *c.b0, *c.v, c.routing_s, c.routing_c, c.iterations, options);
    }
    return run_hand_cuda_digitcaps_backward(*c.u, *c.W, *c.b0, c.routing_s, c.routing_c, *c.grad_v, *c.grad_u,
                                            *c.grad_W, *c.grad_b0, c.iterations, options);
}

}  // namespace detail

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
    const Device device = checks.resolve_device(options.device);
    if (!checks.status().ok()) return checks.status();
    if (Status st = detail::check_device_ready(op, device); !st.ok()) return st;
    RoutingCall call;
    call.op = op, call.device = device, call.options = &options;
    call.s = &s, call.v = &v;
    return detail::run_implementation(detail::routing_implementations(op), call);
}

Status route(const TensorView &u_hat, const TensorView &b0, const TensorView &v, int iterations,
             const Options &options) {
    const char *op = "route";
    ArgumentChecks checks(op);
    checks.tensor("u_hat", u_hat, {"batch", "in_caps", "out_caps", "out_dim"});
    if (!is_absent(b0)) checks.tensor("b0", b0, {"in_caps", "out_caps"});
    checks.tensor("v", v, {"batch", "out_caps", "out_dim"});
    RoutingCall call;
    if (Status s = routing_call(op, checks, options, iterations, false, &call); !s.ok()) return s;
    call.u_hat = &u_hat, call.b0 = &b0, call.v = &v;
    return detail::run_implementation(detail::routing_implementations(op), call);
}

Status route_backward(const TensorView &u_hat, const TensorView &b0, const TensorView &grad_v,
                      const TensorView &grad_u_hat, const TensorView &grad_b0, int iterations, const Options &options) {
    const char *op = "route_backward";
    ArgumentChecks checks(op);
    checks.tensor("u_hat", u_hat, {"batch", "in_caps", "out_caps", "out_dim"});
    if (!is_absent(b0)) checks.tensor("b0", b0, {"in_caps", "out_caps"});
    checks.tensor("grad_v", grad_v, {"batch", "out_caps", "out_dim"});
    checks.tensor("grad_u_hat", grad_u_hat, {"batch", "in_caps", "out_caps", "out_dim"});
    if (!is_absent(grad_b0)) checks.tensor("grad_b0", grad_b0, {"in_caps", "out_caps"});
    RoutingCall call;
    if (Status s = routing_call(op, checks, options, iterations, false, &call); !s.ok()) return s;
    call.u_hat = &u_hat, call.b0 = &b0, call.grad_v = &grad_v, call.grad_u_hat = &grad_u_hat, call.grad_b0 = &grad_b0;
    return detail::run_implementation(detail::routing_implementations(op), call);
}

namespace {

// digitcaps, digitcaps_with_s (`routing_s` non-null: the second output) and
// digitcaps_with_c (`routing_c` non-null too: the third).
Status run_digitcaps(const char *op, const TensorView &u, const TensorView &W, const TensorView &b0,
                     const TensorView &v, const TensorView *routing_s, const TensorView *routing_c, int iterations,
                     const Options &options) {
    ArgumentChecks checks(op);
    checks.tensor("u", u, {"batch", "in_caps", "in_dim"});
    checks.tensor("W", W, {"in_caps", "out_caps", "out_dim", "in_dim"});
    if (!is_absent(b0)) checks.tensor("b0", b0, {"in_caps", "out_caps"});
    checks.tensor("v", v, {"batch", "out_caps", "out_dim"});
    if (routing_s != nullptr) check_routing_s(checks, *routing_s, iterations);
    if (routing_c != nullptr) check_routing_c(checks, *routing_c, iterations);
    RoutingCall call;
    if (Status s = routing_call(op, checks, options, iterations, true, &call); !s.ok()) return s;
    call.u = &u, call.W = &W, call.b0 = &b0, call.v = &v, call.routing_s = routing_s, call.routing_c = routing_c;
    return detail::run_implementation(detail::routing_implementations(op), call);
}

// digitcaps_backward, digitcaps_backward_with_s (`routing_s` non-null) and
// digitcaps_backward_with_c (`routing_c` non-null too).
Status run_digitcaps_backward(const char *op, const TensorView &u, const TensorView &W, const TensorView &b0,
                              const TensorView *routing_s, const TensorView *routing_c, const TensorView &grad_v,
                              const TensorView &grad_u, const TensorView &grad_W, const TensorView &grad_b0,
                              int iterations, const Options &options) {
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
    RoutingCall call;
    if (Status s = routing_call(op, checks, options, iterations, true, &call); !s.ok()) return s;
    call.u = &u, call.W = &W, call.b0 = &b0, call.routing_s = routing_s, call.routing_c = routing_c;
    call.grad_v = &grad_v, call.grad_u = &grad_u, call.grad_W = &grad_W, call.grad_b0 = &grad_b0;
    return detail::run_implementation(detail::routing_implementations(op), call);
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

Status digitcaps_backward(const TensorView &u, const TensorView &W, const TensorView &b0, const TensorView &grad_v,
                          const TensorView &grad_u, const TensorView &grad_W, const TensorView &grad_b0, int iterations,
                          const Options &options) {
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
    return run_digitcaps_backward("digitcaps_backward_with_c", u, W, b0, &routing_s, &routing_c, grad_v, grad_u, grad_W,
                                  grad_b0, iterations, options);
}

}  // namespace halcaps

// PyTorch operators torch.ops.halcaps.* over the halcaps C++ API.
//
// Schemas in TORCH_LIBRARY, one kernel per operator registered for both the
// CPU and the CUDA dispatch keys (the library picks the device from where the
// tensors live). The kernels check what the library cannot see (dtype, device
// type, one device for all tensors, rank, so the outputs can be allocated),
// make the inputs contiguous, allocate the outputs and call the library;
// a failed Status is raised as a Python exception carrying its status name
// and message. CUDA work goes on PyTorch's current stream of the tensors'
// device, in that device's primary context, under a device guard.
//
// Uses no Python C API: the shared library serves every Python version of the
// torch version it was built against. Fake kernels and autograd are in
// python/halcaps/_ops.py.
#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/library.h>

#include "halcaps/halcaps.h"

namespace {

using halcaps::Status;
using halcaps::StatusCode;
using halcaps::TensorView;

// The arguments of one operator call: its name for messages and the device
// every tensor must share (the first tensor's).
struct Call {
    const char *op;
    std::optional<c10::Device> device = std::nullopt;
};

std::string shape_string(const at::Tensor &t) {
    std::ostringstream out;
    out << t.sizes();
    return out.str();
}

[[noreturn]] void raise_status(const Call &call, StatusCode code, std::string message) {
    // The library's messages start with its own name of the operator.
    const std::string own_prefix = std::string(call.op) + ": ";
    if (message.rfind(own_prefix, 0) == 0) message.erase(0, own_prefix.size());
    const std::string text =
        std::string("halcaps.") + call.op + ": " + halcaps::status_code_name(code) + ": " + message;
    switch (code) {
    case StatusCode::bad_rank:
    case StatusCode::bad_extent:
    case StatusCode::extent_mismatch:
    case StatusCode::unsupported_strides:
    case StatusCode::wrong_memory_space:
    case StatusCode::unknown_implementation:
    case StatusCode::unsupported_iterations:
    case StatusCode::bad_parameter:
    case StatusCode::unsupported_shape:
    case StatusCode::misaligned_pointer:
    case StatusCode::null_pointer:
        TORCH_CHECK_VALUE(false, text);
    case StatusCode::out_of_memory:
        TORCH_CHECK_WITH(OutOfMemoryError, false, text);
    default:
        TORCH_CHECK(false, text);
    }
}

void check(const Call &call, const Status &status) {
    if (!status.ok()) raise_status(call, status.code, status.message);
}

// dtype, device type and device of one tensor argument; returns it contiguous
// (and, on CUDA, starting on a 16-byte boundary as the Halide kernels need).
at::Tensor prepare(Call &call, const char *name, const at::Tensor &t) {
    TORCH_CHECK_TYPE(t.scalar_type() == at::kFloat, "halcaps.", call.op, ": ", name, " must be float32, got ",
                     t.scalar_type());
    if (!t.device().is_cpu() && !t.device().is_cuda()) {
        raise_status(call, StatusCode::wrong_memory_space,
                     std::string(name) + " is on " + t.device().str() + "; only CPU and CUDA tensors are supported");
    }
    if (!call.device) {
        call.device = t.device();
    } else if (*call.device != t.device()) {
        raise_status(call, StatusCode::wrong_memory_space,
                     std::string(name) + " is on " + t.device().str() + " but the tensors before it are on " +
                         call.device->str());
    }
    at::Tensor dense = t.contiguous();
    if (dense.is_cuda() && reinterpret_cast<std::uintptr_t>(dense.data_ptr()) % 16 != 0) dense = dense.clone();
    return dense;
}

std::optional<at::Tensor> prepare(Call &call, const char *name, const std::optional<at::Tensor> &t) {
    if (!t.has_value()) return std::nullopt;
    return prepare(call, name, *t);
}

void check_rank(const Call &call, const char *name, const at::Tensor &t, int64_t rank, const char *layout) {
    if (t.dim() != rank) {
        raise_status(call, StatusCode::bad_rank,
                     std::string(name) + " must have rank " + std::to_string(rank) + " " + layout + ", got shape " +
                         shape_string(t));
    }
}

TensorView view(const at::Tensor &t) {
    TensorView v;
    v.data = t.data_ptr<float>();
    v.shape.assign(t.sizes().begin(), t.sizes().end());
    v.space = t.is_cuda() ? halcaps::MemorySpace::cuda : halcaps::MemorySpace::host;
    return v;
}

TensorView view(const std::optional<at::Tensor> &t) { return t.has_value() ? view(*t) : TensorView{}; }

// The primary context of CUDA device `index`, retained once and kept: the
// one PyTorch's runtime calls use. The driver is reached with dlopen so that
// the library loads on machines without one.
void *primary_cuda_context(const Call &call, int index) {
    static std::mutex mutex;
    static std::map<int, void *> contexts;
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = contexts.find(index); it != contexts.end()) return it->second;
    static void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (driver == nullptr)
        raise_status(call, StatusCode::device_unavailable, "cannot load the CUDA driver libcuda.so.1");
    using DeviceGet = int (*)(int *, int);
    using PrimaryCtxRetain = int (*)(void **, int);
    auto device_get = reinterpret_cast<DeviceGet>(dlsym(driver, "cuDeviceGet"));
    auto retain = reinterpret_cast<PrimaryCtxRetain>(dlsym(driver, "cuDevicePrimaryCtxRetain"));
    int device = 0;
    void *context = nullptr;
    if (device_get == nullptr || retain == nullptr || device_get(&device, index) != 0 ||
        retain(&context, device) != 0 || context == nullptr) {
        raise_status(call, StatusCode::cuda_error,
                     "cannot retain the primary CUDA context of device " + std::to_string(index));
    }
    contexts.emplace(index, context);
    return context;
}

// Everything a library call needs about where to run; holds the device guard.
struct Launch {
    halcaps::Options options;
    std::optional<c10::DeviceGuard> guard;

    Launch(const Call &call, const std::string &implementation) {
        options.implementation = implementation;
        const c10::Device device = call.device.value_or(c10::Device(c10::kCPU));
        if (device.is_cuda()) {
            guard.emplace(device);
            c10::impl::VirtualGuardImpl impl(device.type());
            options.device = halcaps::Device::cuda;
            options.cuda_stream = impl.getStream(device).native_handle();
            options.cuda_context = primary_cuda_context(call, device.index());
        } else {
            options.device = halcaps::Device::cpu;
        }
    }
};

at::Tensor empty_on(const Call &call, at::IntArrayRef shape) {
    return at::empty(shape, at::TensorOptions().dtype(at::kFloat).device(call.device.value_or(c10::Device(c10::kCPU))));
}

// grad_b0 when asked for, else an empty [0] tensor (the schema's "not computed").
at::Tensor optional_grad_b0(const Call &call, bool wanted, int64_t in_caps, int64_t out_caps) {
    return wanted ? empty_on(call, {in_caps, out_caps}) : empty_on(call, {0});
}

// ---- capsule prediction -------------------------------------------------

at::Tensor predict(const at::Tensor &u_in, const at::Tensor &W_in, c10::string_view implementation) {
    Call call{"predict"};
    at::Tensor u = prepare(call, "u", u_in), W = prepare(call, "W", W_in);
    check_rank(call, "u", u, 3, "[batch, in_caps, in_dim]");
    check_rank(call, "W", W, 4, "[in_caps, out_caps, out_dim, in_dim]");
    at::Tensor u_hat = empty_on(call, {u.size(0), u.size(1), W.size(1), W.size(2)});
    Launch launch(call, std::string(implementation));
    check(call, halcaps::predict(view(u), view(W), view(u_hat), launch.options));
    return u_hat;
}

std::tuple<at::Tensor, at::Tensor> predict_backward(const at::Tensor &g_in, const at::Tensor &u_in,
                                                    const at::Tensor &W_in, c10::string_view implementation) {
    Call call{"predict_backward"};
    at::Tensor g = prepare(call, "g", g_in), u = prepare(call, "u", u_in), W = prepare(call, "W", W_in);
    check_rank(call, "g", g, 4, "[batch, in_caps, out_caps, out_dim]");
    check_rank(call, "u", u, 3, "[batch, in_caps, in_dim]");
    check_rank(call, "W", W, 4, "[in_caps, out_caps, out_dim, in_dim]");
    at::Tensor grad_u = empty_on(call, u.sizes()), grad_W = empty_on(call, W.sizes());
    Launch launch(call, std::string(implementation));
    check(call, halcaps::predict_backward(view(g), view(u), view(W), view(grad_u), view(grad_W), launch.options));
    return {grad_u, grad_W};
}

// ---- squash, routing, DigitCaps -----------------------------------------

at::Tensor squash(const at::Tensor &s_in, c10::string_view implementation) {
    Call call{"squash"};
    at::Tensor s = prepare(call, "s", s_in);
    if (s.dim() < 1) raise_status(call, StatusCode::bad_rank, "s must have rank >= 1, got a scalar");
    at::Tensor v = empty_on(call, s.sizes());
    Launch launch(call, std::string(implementation));
    check(call, halcaps::squash(view(s), view(v), launch.options));
    return v;
}

at::Tensor route(const at::Tensor &u_hat_in, const std::optional<at::Tensor> &b0_in, int64_t iterations,
                 c10::string_view implementation) {
    Call call{"route"};
    at::Tensor u_hat = prepare(call, "u_hat", u_hat_in);
    std::optional<at::Tensor> b0 = prepare(call, "b0", b0_in);
    check_rank(call, "u_hat", u_hat, 4, "[batch, in_caps, out_caps, out_dim]");
    if (b0) check_rank(call, "b0", *b0, 2, "[in_caps, out_caps]");
    at::Tensor v = empty_on(call, {u_hat.size(0), u_hat.size(2), u_hat.size(3)});
    Launch launch(call, std::string(implementation));
    check(call, halcaps::route(view(u_hat), view(b0), view(v), static_cast<int>(iterations), launch.options));
    return v;
}

std::tuple<at::Tensor, at::Tensor> route_backward(const at::Tensor &u_hat_in, const std::optional<at::Tensor> &b0_in,
                                                  const at::Tensor &grad_v_in, int64_t iterations, bool compute_grad_b0,
                                                  c10::string_view implementation) {
    Call call{"route_backward"};
    at::Tensor u_hat = prepare(call, "u_hat", u_hat_in);
    std::optional<at::Tensor> b0 = prepare(call, "b0", b0_in);
    at::Tensor grad_v = prepare(call, "grad_v", grad_v_in);
    check_rank(call, "u_hat", u_hat, 4, "[batch, in_caps, out_caps, out_dim]");
    if (b0) check_rank(call, "b0", *b0, 2, "[in_caps, out_caps]");
    check_rank(call, "grad_v", grad_v, 3, "[batch, out_caps, out_dim]");
    at::Tensor grad_u_hat = empty_on(call, u_hat.sizes());
    at::Tensor grad_b0 = optional_grad_b0(call, compute_grad_b0, u_hat.size(1), u_hat.size(2));
    Launch launch(call, std::string(implementation));
    check(call, halcaps::route_backward(view(u_hat), view(b0), view(grad_v), view(grad_u_hat),
                                        compute_grad_b0 ? view(grad_b0) : TensorView{}, static_cast<int>(iterations),
                                        launch.options));
    return {grad_u_hat, grad_b0};
}

struct DigitCapsArgs {
    at::Tensor u, W;
    std::optional<at::Tensor> b0;
};

DigitCapsArgs digitcaps_args(Call &call, const at::Tensor &u_in, const at::Tensor &W_in,
                             const std::optional<at::Tensor> &b0_in) {
    DigitCapsArgs a{prepare(call, "u", u_in), prepare(call, "W", W_in), prepare(call, "b0", b0_in)};
    check_rank(call, "u", a.u, 3, "[batch, in_caps, in_dim]");
    check_rank(call, "W", a.W, 4, "[in_caps, out_caps, out_dim, in_dim]");
    if (a.b0) check_rank(call, "b0", *a.b0, 2, "[in_caps, out_caps]");
    return a;
}

// routing_s [iterations, ...] cannot be made for a count below 1: refused
// here as the library refuses it. Which counts >= 1 are built is the library's
// to say.
void check_iterations_allocatable(const Call &call, int64_t iterations) {
    if (iterations < 1) {
        raise_status(call, StatusCode::unsupported_iterations,
                     "iterations must be >= 1, got " + std::to_string(iterations));
    }
}

at::Tensor digitcaps(const at::Tensor &u_in, const at::Tensor &W_in, const std::optional<at::Tensor> &b0_in,
                     int64_t iterations, c10::string_view implementation) {
    Call call{"digitcaps"};
    DigitCapsArgs a = digitcaps_args(call, u_in, W_in, b0_in);
    at::Tensor v = empty_on(call, {a.u.size(0), a.W.size(1), a.W.size(2)});
    Launch launch(call, std::string(implementation));
    check(call,
          halcaps::digitcaps(view(a.u), view(a.W), view(a.b0), view(v), static_cast<int>(iterations), launch.options));
    return v;
}

std::tuple<at::Tensor, at::Tensor> digitcaps_with_s(const at::Tensor &u_in, const at::Tensor &W_in,
                                                    const std::optional<at::Tensor> &b0_in, int64_t iterations,
                                                    c10::string_view implementation) {
    Call call{"digitcaps_with_s"};
    DigitCapsArgs a = digitcaps_args(call, u_in, W_in, b0_in);
    at::Tensor v = empty_on(call, {a.u.size(0), a.W.size(1), a.W.size(2)});
    check_iterations_allocatable(call, iterations);
    at::Tensor routing_s = empty_on(call, {iterations, a.u.size(0), a.W.size(1), a.W.size(2)});
    Launch launch(call, std::string(implementation));
    check(call, halcaps::digitcaps_with_s(view(a.u), view(a.W), view(a.b0), view(v), view(routing_s),
                                          static_cast<int>(iterations), launch.options));
    return {v, routing_s};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> digitcaps_backward(const at::Tensor &u_in, const at::Tensor &W_in,
                                                                  const std::optional<at::Tensor> &b0_in,
                                                                  const at::Tensor &grad_v_in, int64_t iterations,
                                                                  bool compute_grad_b0,
                                                                  c10::string_view implementation) {
    Call call{"digitcaps_backward"};
    DigitCapsArgs a = digitcaps_args(call, u_in, W_in, b0_in);
    at::Tensor grad_v = prepare(call, "grad_v", grad_v_in);
    check_rank(call, "grad_v", grad_v, 3, "[batch, out_caps, out_dim]");
    at::Tensor grad_u = empty_on(call, a.u.sizes()), grad_W = empty_on(call, a.W.sizes());
    at::Tensor grad_b0 = optional_grad_b0(call, compute_grad_b0, a.W.size(0), a.W.size(1));
    Launch launch(call, std::string(implementation));
    check(call, halcaps::digitcaps_backward(view(a.u), view(a.W), view(a.b0), view(grad_v), view(grad_u), view(grad_W),
                                            compute_grad_b0 ? view(grad_b0) : TensorView{},
                                            static_cast<int>(iterations), launch.options));
    return {grad_u, grad_W, grad_b0};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> digitcaps_backward_with_s(const at::Tensor &u_in, const at::Tensor &W_in,
                                                                         const std::optional<at::Tensor> &b0_in,
                                                                         const at::Tensor &routing_s_in,
                                                                         const at::Tensor &grad_v_in,
                                                                         int64_t iterations, bool compute_grad_b0,
                                                                         c10::string_view implementation) {
    Call call{"digitcaps_backward_with_s"};
    DigitCapsArgs a = digitcaps_args(call, u_in, W_in, b0_in);
    at::Tensor routing_s = prepare(call, "routing_s", routing_s_in);
    at::Tensor grad_v = prepare(call, "grad_v", grad_v_in);
    check_rank(call, "routing_s", routing_s, 4, "[iterations, batch, out_caps, out_dim]");
    check_rank(call, "grad_v", grad_v, 3, "[batch, out_caps, out_dim]");
    at::Tensor grad_u = empty_on(call, a.u.sizes()), grad_W = empty_on(call, a.W.sizes());
    at::Tensor grad_b0 = optional_grad_b0(call, compute_grad_b0, a.W.size(0), a.W.size(1));
    Launch launch(call, std::string(implementation));
    check(call, halcaps::digitcaps_backward_with_s(
                    view(a.u), view(a.W), view(a.b0), view(routing_s), view(grad_v), view(grad_u), view(grad_W),
                    compute_grad_b0 ? view(grad_b0) : TensorView{}, static_cast<int>(iterations), launch.options));
    return {grad_u, grad_W, grad_b0};
}

// ---- capsule convolution ------------------------------------------------

// OH = (H + 2 pad - kh) / stride + 1 when the parameters are valid; invalid
// ones are left for the library to name (bad_parameter), with an output of
// extent 1 it can be handed.
int64_t conv_extent(int64_t in, int64_t k, int64_t stride, int64_t pad) {
    if (stride < 1 || pad < 0) return 1;
    const int64_t span = in + 2 * pad - k;
    return span >= 0 ? span / stride + 1 : 0;
}

at::Tensor capsconv(const at::Tensor &input_in, const at::Tensor &filter_in, int64_t stride, int64_t pad,
                    c10::string_view implementation) {
    Call call{"capsconv"};
    at::Tensor input = prepare(call, "input", input_in), filter = prepare(call, "filter", filter_in);
    check_rank(call, "input", input, 6, "[n, H, W, in_caps, 4, 4]");
    check_rank(call, "filter", filter, 6, "[kh, kw, in_caps, out_caps, 4, 4]");
    const int64_t oh = conv_extent(input.size(1), filter.size(0), stride, pad);
    const int64_t ow = conv_extent(input.size(2), filter.size(1), stride, pad);
    if (oh == 0 || ow == 0) {
        raise_status(call, StatusCode::bad_extent,
                     "filter " + shape_string(filter) + " is larger than input " + shape_string(input) + " padded by " +
                         std::to_string(pad));
    }
    at::Tensor output = empty_on(call, {input.size(0), oh, ow, filter.size(3), 4, 4});
    Launch launch(call, std::string(implementation));
    halcaps::ConvParams params{static_cast<int>(stride), static_cast<int>(pad)};
    check(call, halcaps::capsconv(view(input), view(filter), view(output), params, launch.options));
    return output;
}

std::tuple<at::Tensor, at::Tensor> capsconv_backward(const at::Tensor &input_in, const at::Tensor &filter_in,
                                                     const at::Tensor &grad_output_in, int64_t stride, int64_t pad,
                                                     c10::string_view implementation) {
    Call call{"capsconv_backward"};
    at::Tensor input = prepare(call, "input", input_in), filter = prepare(call, "filter", filter_in);
    at::Tensor grad_output = prepare(call, "grad_output", grad_output_in);
    check_rank(call, "input", input, 6, "[n, H, W, in_caps, 4, 4]");
    check_rank(call, "filter", filter, 6, "[kh, kw, in_caps, out_caps, 4, 4]");
    check_rank(call, "grad_output", grad_output, 6, "[n, OH, OW, out_caps, 4, 4]");
    at::Tensor grad_input = empty_on(call, input.sizes()), grad_filter = empty_on(call, filter.sizes());
    Launch launch(call, std::string(implementation));
    halcaps::ConvParams params{static_cast<int>(stride), static_cast<int>(pad)};
    check(call, halcaps::capsconv_backward(view(input), view(filter), view(grad_output), view(grad_input),
                                           view(grad_filter), params, launch.options));
    return {grad_input, grad_filter};
}

// ---- what the build holds -------------------------------------------------

// One line per (operator, implementation, device): "op\timplementation\tdevice\titerations\tdescription".
std::string implementations() {
    std::ostringstream out;
    for (const halcaps::ImplementationInfo &info : halcaps::list_implementations()) {
        out << info.op << '\t' << info.implementation << '\t' << halcaps::device_name(info.device) << '\t';
        for (size_t n = 0; n < info.iterations.size(); n++) out << (n ? "," : "") << info.iterations[n];
        out << '\t' << info.description << '\n';
    }
    return out.str();
}

bool cuda_built() { return halcaps::cuda_built(); }

// For bench/: mean microseconds of `repeats` direct C++ API calls of predict
// on prepared views (no dispatcher, no allocation), to set beside the
// Python operator's call time.
double cpp_predict_call_us(const at::Tensor &u_in, const at::Tensor &W_in, int64_t repeats) {
    Call call{"cpp_predict_call_us"};
    at::Tensor u = prepare(call, "u", u_in), W = prepare(call, "W", W_in);
    check_rank(call, "u", u, 3, "[batch, in_caps, in_dim]");
    check_rank(call, "W", W, 4, "[in_caps, out_caps, out_dim, in_dim]");
    at::Tensor u_hat = empty_on(call, {u.size(0), u.size(1), W.size(1), W.size(2)});
    Launch launch(call, "");
    const TensorView uv = view(u), Wv = view(W), out = view(u_hat);
    const auto start = std::chrono::steady_clock::now();
    for (int64_t n = 0; n < repeats; n++) check(call, halcaps::predict(uv, Wv, out, launch.options));
    const std::chrono::duration<double, std::micro> spent = std::chrono::steady_clock::now() - start;
    return spent.count() / static_cast<double>(repeats > 0 ? repeats : 1);
}

}  // namespace

TORCH_LIBRARY(halcaps, m) {
    m.def("predict(Tensor u, Tensor W, str implementation=\"\") -> Tensor");
    m.def("predict_backward(Tensor g, Tensor u, Tensor W, str implementation=\"\") -> (Tensor, Tensor)");
    m.def("squash(Tensor s, str implementation=\"\") -> Tensor");
    m.def("route(Tensor u_hat, Tensor? b0, int iterations=3, str implementation=\"\") -> Tensor");
    m.def(
        "route_backward(Tensor u_hat, Tensor? b0, Tensor grad_v, int iterations=3, bool compute_grad_b0=False, "
        "str implementation=\"\") -> (Tensor, Tensor)");
    m.def("digitcaps(Tensor u, Tensor W, Tensor? b0, int iterations=3, str implementation=\"\") -> Tensor");
    m.def(
        "digitcaps_with_s(Tensor u, Tensor W, Tensor? b0, int iterations=3, str implementation=\"\") "
        "-> (Tensor, Tensor)");
    m.def(
        "digitcaps_backward(Tensor u, Tensor W, Tensor? b0, Tensor grad_v, int iterations=3, "
        "bool compute_grad_b0=False, str implementation=\"\") -> (Tensor, Tensor, Tensor)");
    m.def(
        "digitcaps_backward_with_s(Tensor u, Tensor W, Tensor? b0, Tensor routing_s, Tensor grad_v, "
        "int iterations=3, bool compute_grad_b0=False, str implementation=\"\") -> (Tensor, Tensor, Tensor)");
    m.def("capsconv(Tensor input, Tensor filter, int stride=1, int pad=0, str implementation=\"\") -> Tensor");
    m.def(
        "capsconv_backward(Tensor input, Tensor filter, Tensor grad_output, int stride=1, int pad=0, "
        "str implementation=\"\") -> (Tensor, Tensor)");
    // Build information, no tensors: served for every dispatch key.
    m.def("implementations() -> str", &implementations);
    m.def("cuda_built() -> bool", &cuda_built);
    m.def("cpp_predict_call_us(Tensor u, Tensor W, int repeats) -> float", &cpp_predict_call_us);
}

#define HALCAPS_REGISTER_KERNELS(m)                                  \
    m.impl("predict", &predict);                                     \
    m.impl("predict_backward", &predict_backward);                   \
    m.impl("squash", &squash);                                       \
    m.impl("route", &route);                                         \
    m.impl("route_backward", &route_backward);                       \
    m.impl("digitcaps", &digitcaps);                                 \
    m.impl("digitcaps_with_s", &digitcaps_with_s);                   \
    m.impl("digitcaps_backward", &digitcaps_backward);               \
    m.impl("digitcaps_backward_with_s", &digitcaps_backward_with_s); \
    m.impl("capsconv", &capsconv);                                   \
    m.impl("capsconv_backward", &capsconv_backward)

TORCH_LIBRARY_IMPL(halcaps, CPU, m) { HALCAPS_REGISTER_KERNELS(m); }
TORCH_LIBRARY_IMPL(halcaps, CUDA, m) { HALCAPS_REGISTER_KERNELS(m); }

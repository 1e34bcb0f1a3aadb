// Running an ahead-of-time compiled Halide pipeline on TensorViews: buffer
// setup for host or CUDA memory, the per-call user context that carries the
// CUDA stream and the error text, and the mapping of Halide's error codes to
// our Status.
#pragma once

#include <string>
#include <type_traits>
#include <vector>

#include "HalideRuntime.h"
#include "halcaps/halcaps.h"

namespace halcaps::detail {

// Passed to every generated function as its `user_context`; Halide hands it
// back to our error handler and to our CUDA context/stream overrides.
struct CallContext {
    std::string error_text;       // what Halide's error handler reported
    void *cuda_context = nullptr;  // CUcontext, resolved before the call
    void *cuda_stream = nullptr;   // CUstream
};

// A halide_buffer_t over a TensorView (dims reversed: innermost first).
class HalideTensor {
public:
    HalideTensor(const TensorView &view);
    halide_buffer_t *raw() { return &buffer_; }
    const TensorView &view() const { return view_; }

private:
    TensorView view_;
    std::vector<halide_dimension_t> dims_;
    halide_buffer_t buffer_{};
};

// An ahead-of-time compiled Halide pipeline: `int f(const void *user_context,
// halide_buffer_t *...)` with its inputs first, then its outputs. Kernels
// take different numbers of buffers (prediction 3, routing 3, the DigitCaps
// backward 7), so the function is kept type-erased together with its buffer
// count, which the constructor reads off the function's type.
class HalideKernel {
public:
    static constexpr int kMaxBuffers = 8;

    HalideKernel() = default;
    template <typename... Buffers>
    HalideKernel(int (*function)(const void *, Buffers *...))
        : function_(reinterpret_cast<void (*)()>(function)), buffers_(sizeof...(Buffers)) {
        static_assert((std::is_same_v<Buffers, halide_buffer_t> && ...), "Halide kernels take halide_buffer_t pointers");
        static_assert(sizeof...(Buffers) <= kMaxBuffers, "raise HalideKernel::kMaxBuffers");
    }

    // Kernels with one leading int32 scalar input (the Winograd capsule
    // convolution's pad): `int f(const void *, int32_t, halide_buffer_t *...)`.
    template <typename... Buffers>
    HalideKernel(int (*function)(const void *, int32_t, Buffers *...))
        : function_(reinterpret_cast<void (*)()>(function)), buffers_(sizeof...(Buffers)), scalars_(1) {
        static_assert((std::is_same_v<Buffers, halide_buffer_t> && ...), "Halide kernels take halide_buffer_t pointers");
        static_assert(sizeof...(Buffers) <= kMaxBuffers, "raise HalideKernel::kMaxBuffers");
    }

    // Kernels with two leading int32 scalar inputs (the capsule convolution's
    // stride and pad): `int f(const void *, int32_t, int32_t, halide_buffer_t *...)`.
    template <typename... Buffers>
    HalideKernel(int (*function)(const void *, int32_t, int32_t, Buffers *...))
        : function_(reinterpret_cast<void (*)()>(function)), buffers_(sizeof...(Buffers)), scalars_(2) {
        static_assert((std::is_same_v<Buffers, halide_buffer_t> && ...), "Halide kernels take halide_buffer_t pointers");
        static_assert(sizeof...(Buffers) <= kMaxBuffers, "raise HalideKernel::kMaxBuffers");
    }

    int buffer_count() const { return buffers_; }
    int scalar_count() const { return scalars_; }
    // Calls the kernel with scalars[0 .. scalar_count()) and buffers[0 .. buffer_count()).
    int operator()(const void *user_context, const int32_t *scalars, halide_buffer_t *const *buffers) const;

private:
    void (*function_)() = nullptr;
    int buffers_ = 0;
    int scalars_ = 0;
};

// Runs `kernel` on inputs -> outputs (in the kernel's argument order) on the
// given device. For CUDA, a tensor in device memory is wrapped, never copied;
// a host tensor is copied to the device (inputs) or back (outputs), and the
// call is then synchronous. `scalars` are the kernel's leading int32 inputs.
Status run_halide(const char *op, const HalideKernel &kernel, Device device, const Options &options,
                  const std::vector<TensorView> &inputs, const std::vector<TensorView> &outputs,
                  const std::vector<int32_t> &scalars = {});

// Turns a Halide error code and the handler's text into a Status.
Status status_from_halide(const char *op, int error_code, const std::string &error_text);

}  // namespace halcaps::detail

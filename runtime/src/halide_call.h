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
// int32_t..., halide_buffer_t *...)` with its scalar inputs first (the
// capsule convolution's stride and pad, or the Winograd form's pad alone),
// then its buffers, inputs before outputs. Kernels take different numbers of
// both (prediction 3 buffers, the DigitCaps backward 7), so the function is
// kept type-erased together with the two counts, which the constructor reads
// off the function's type.
class HalideKernel {
public:
    static constexpr int kMaxBuffers = 8;
    static constexpr int kMaxScalars = 2;

    HalideKernel() = default;
    template <typename... Args>
    HalideKernel(int (*function)(const void *, Args...))
        : function_(reinterpret_cast<void (*)()>(function)), buffers_(count<halide_buffer_t *, Args...>()),
          scalars_(count<int32_t, Args...>()) {
        static_assert(scalars_then_buffers<Args...>(),
                      "Halide kernels take int32_t scalars, then halide_buffer_t pointers");
        static_assert(count<halide_buffer_t *, Args...>() <= kMaxBuffers, "raise HalideKernel::kMaxBuffers");
        static_assert(count<int32_t, Args...>() <= kMaxScalars, "raise HalideKernel::kMaxScalars");
    }

    int buffer_count() const { return buffers_; }
    int scalar_count() const { return scalars_; }
    // Calls the kernel with scalars[0 .. scalar_count()) and buffers[0 .. buffer_count()).
    int operator()(const void *user_context, const int32_t *scalars, halide_buffer_t *const *buffers) const;

private:
    // How many of Args are T.
    template <typename T, typename... Args>
    static constexpr int count() {
        return (0 + ... + static_cast<int>(std::is_same_v<Args, T>));
    }
    // Whether Args are int32_t scalars followed by buffer pointers, nothing else.
    template <typename... Args>
    static constexpr bool scalars_then_buffers() {
        constexpr bool is_scalar[] = {std::is_same_v<Args, int32_t>..., false};
        constexpr bool is_buffer[] = {std::is_same_v<Args, halide_buffer_t *>..., false};
        bool seen_buffer = false;
        for (size_t k = 0; k < sizeof...(Args); k++) {
            if (!is_scalar[k] && !is_buffer[k]) return false;
            if (is_scalar[k] && seen_buffer) return false;
            seen_buffer = seen_buffer || is_buffer[k];
        }
        return true;
    }

    void (*function_)() = nullptr;
    int buffers_ = 0;
    int scalars_ = 0;
};

// Whether a tensor's data starts on a 16-byte boundary: what Halide's
// 16-byte loads and stores assume (run_halide refuses device tensors that do
// not; a kernel that declares a host buffer aligned checks it itself).
bool on_16_byte_boundary(const TensorView &t);

// Runs `kernel` on inputs -> outputs (in the kernel's argument order) on the
// given device. For CUDA, a tensor in device memory is wrapped, never copied;
// a host tensor is copied to the device (inputs) or back (outputs), and the
// call is then synchronous. For OpenCL every tensor is a host one (the
// argument checks refuse others), copied likewise. `scalars` are the kernel's leading int32 inputs.
// `names` (inputs then outputs) name the tensors in error messages.
//
// Halide's CUDA code generator turns a 4-float access at an index it can
// prove is a multiple of 4 into one 16-byte load or store, assuming each
// buffer starts on a 16-byte boundary; a device tensor that does not would
// fault the kernel (and poison the CUDA context), so it is refused first
// with misaligned_pointer. (The hand-written cuda_* kernels take any
// alignment; they do not come through here.)
Status run_halide(const char *op, const HalideKernel &kernel, Device device, const Options &options,
                  const std::vector<TensorView> &inputs, const std::vector<TensorView> &outputs,
                  const std::vector<int32_t> &scalars, const std::vector<const char *> &names);

// Turns a Halide error code and the handler's text into a Status (a device
// error as cuda_error or opencl_error, by the device that ran).
Status status_from_halide(const char *op, int error_code, const std::string &error_text,
                          Device device = Device::cuda);

}  // namespace halcaps::detail

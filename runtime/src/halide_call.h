// Running an ahead-of-time compiled Halide pipeline on TensorViews: buffer
// setup for host or CUDA memory, the per-call user context that carries the
// CUDA stream and the error text, and the mapping of Halide's error codes to
// our Status.
#pragma once

#include <string>
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

// Every Halide kernel of the capsule prediction family takes three buffers.
using HalideKernel3 = int (*)(const void *user_context, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);

// Runs `kernel` on (in0, in1) -> out on the given device. For CUDA with
// device tensors the pointers are wrapped, never copied; with host tensors
// Halide copies to and from the device and the call is synchronous.
Status run_halide(const char *op, HalideKernel3 kernel, Device device, const Options &options, const TensorView &in0,
                  const TensorView &in1, const TensorView &out);

// Turns a Halide error code and the handler's text into a Status.
Status status_from_halide(const char *op, int error_code, const std::string &error_text);

}  // namespace halcaps::detail

// Running an ahead-of-time compiled Halide pipeline on TensorViews: buffer
// setup for host or CUDA memory, the per-call user context that carries the
// CUDA stream and the error text, and the mapping of Halide's error codes to
// our Status.
#pragma once

#include <string>
#include <vector>

#include "HalideRuntime.h"
#include "halcaps/halcaps.h"
#include "halide_argv.h"

namespace halcaps::detail {

// Passed to every generated function as its `user_context`; Halide hands it
// back to our error handler and to our CUDA context/stream overrides.
struct CallContext {
    std::string error_text;        // what Halide's error handler reported
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

// Whether a tensor's data starts on a 16-byte boundary: what Halide's
// 16-byte loads and stores assume (run_halide refuses device tensors that do
// not; a kernel that declares a host buffer aligned checks it itself).
bool on_16_byte_boundary(const TensorView &t);

// Runs `kernel` on inputs -> outputs (in the kernel's argument order) on the
// given device, through its _argv entry point (halide_argv.h); a kernel whose
// metadata disagrees with the tensors and scalars given (their counts, a
// buffer's rank) is internal_error naming the kernel, before any work. For
// CUDA, a tensor in device memory is wrapped, never copied; a host tensor is copied to the device (inputs) or back
// (outputs), and the call is then synchronous. For OpenCL every tensor is a host one (the argument checks refuse
// others), copied likewise. `scalars` are the kernel's leading int32 inputs. `names` (inputs then outputs) name the
// tensors in error messages.
//
// Halide's CUDA code generator turns a 4-float access at an index it can
// prove is a multiple of 4 into one 16-byte load or store, assuming each
// buffer starts on a 16-byte boundary; a device tensor that does not would
// fault the kernel (and poison the CUDA context), so it is refused first
// with misaligned_pointer. (The hand-written cuda_* kernels take any
// alignment; they do not come through here.)
Status run_halide(const char *op, const HalideFunction &kernel, Device device, const Options &options,
                  const std::vector<TensorView> &inputs, const std::vector<TensorView> &outputs,
                  const std::vector<int32_t> &scalars, const std::vector<const char *> &names);

// Turns a Halide error code and the handler's text into a Status (a device
// error as cuda_error or opencl_error, by the device that ran).
Status status_from_halide(const char *op, int error_code, const std::string &error_text, Device device = Device::cuda);

}  // namespace halcaps::detail

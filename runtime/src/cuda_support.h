// The CUDA side of the runtime: device discovery, the context to run in, and
// Halide's device interface. Built as stubs when the build has no CUDA.
#pragma once

#include "HalideRuntime.h"
#include "halcaps/halcaps.h"

namespace halcaps::detail {

// Fills *context with the CUcontext to run in: options.cuda_context if set,
// else the calling thread's current context, else device 0's primary context.
Status resolve_cuda_context(const Options &options, void **context);

// Makes options.cuda_context (when set) current on the calling thread for the
// object's lifetime, for code that goes through the CUDA runtime API (the
// hand-written kernels, cuBLAS). Without a context in the options it does
// nothing: the runtime API then uses the thread's current or primary context.
class ScopedCudaContext {
public:
    explicit ScopedCudaContext(const Options &options);
    ~ScopedCudaContext();
    ScopedCudaContext(const ScopedCudaContext &) = delete;
    ScopedCudaContext &operator=(const ScopedCudaContext &) = delete;
    const Status &status() const { return status_; }

private:
    [[maybe_unused]] bool pushed_ = false;  // read only when the build has CUDA
    Status status_;
};

// Halide's CUDA device interface (null when the build has no CUDA).
const halide_device_interface_t *cuda_device_interface();

// Makes a Halide buffer refer to caller-owned device memory, and lets go of it.
int wrap_device_pointer(void *user_context, halide_buffer_t *buffer, void *device_pointer);
int detach_device_pointer(void *user_context, halide_buffer_t *buffer);

}  // namespace halcaps::detail

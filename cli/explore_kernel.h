// A point's kernel loaded from the shared object `halcaps explore build`
// wrote: the generated function and the runtime entry points it exports.
#pragma once

#include <string>

#include "HalideRuntime.h"

namespace halcaps::cli {

class LoadedKernel {
public:
    // dlopen(RTLD_LOCAL) and look the symbols up; throws UsageError on failure.
    LoadedKernel(const std::string &library, const std::string &function);
    ~LoadedKernel();
    LoadedKernel(const LoadedKernel &) = delete;
    LoadedKernel &operator=(const LoadedKernel &) = delete;

    // The generated function on (u, W, u_hat); returns Halide's error code.
    int call(halide_buffer_t *u, halide_buffer_t *W, halide_buffer_t *u_hat) const;
    // Waits for the device (a no-op for CPU kernels).
    int sync(halide_buffer_t *buffer) const;
    // Brings a device result back into its host memory (no-op on the CPU).
    int copy_to_host(halide_buffer_t *buffer) const;
    // Frees the device allocation the kernel's runtime made for `buffer`.
    void device_free(halide_buffer_t *buffer) const;

private:
    void *handle_ = nullptr;
    int (*function_)(const void *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *) = nullptr;
    int (*copy_to_host_)(void *, halide_buffer_t *) = nullptr;
    int (*device_sync_)(void *, halide_buffer_t *) = nullptr;
    int (*device_free_)(void *, halide_buffer_t *) = nullptr;
};

}  // namespace halcaps::cli

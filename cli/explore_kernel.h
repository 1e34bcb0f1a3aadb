// A point's kernel loaded from the shared object `halcaps explore build`
// wrote: the generated function (called through its `_argv` entry point, so
// any operator's arguments fit), its metadata, and the runtime entry points
// the shared object exports. Each shared object carries its own copy of
// Halide's runtime and, for CUDA points, its own CUDA context.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "HalideRuntime.h"
#include "cli/common.h"
#include "runtime/src/halide_argv.h"

namespace halcaps::cli {

class LoadedKernel {
public:
    // dlopen(RTLD_LOCAL) and look the symbols up; throws UsageError on failure.
    // `scalars` int32 arguments and `buffers` buffers (the last the output)
    // are what the operator passes; call() checks them against the
    // function's metadata.
    LoadedKernel(const std::string &library, const std::string &function, int scalars, int buffers);
    ~LoadedKernel();
    LoadedKernel(const LoadedKernel &) = delete;
    LoadedKernel &operator=(const LoadedKernel &) = delete;

    // The generated function on the int32 scalars, then the buffers (inputs,
    // then the output); returns Halide's error code. Throws UsageError where
    // they disagree with the function's metadata (counts, kinds, ranks).
    int call(const std::vector<int32_t> &scalars, const std::vector<halide_buffer_t *> &buffers) const;
    // Waits for the device (a no-op for CPU kernels).
    int sync(halide_buffer_t *buffer) const;
    // Brings a device result back into its host memory (no-op on the CPU).
    int copy_to_host(halide_buffer_t *buffer) const;
    // Copies the host contents to the device the kernel's runtime uses (CUDA
    // points; a no-op on the CPU), so a poisoned output is poisoned there too.
    int copy_to_device(halide_buffer_t *buffer) const;
    // Frees the device allocation the kernel's runtime made for `buffer`.
    void device_free(halide_buffer_t *buffer) const;

    // Median and minimum of `repeats` calls of `call(n)` (n = 0, 1, ... after
    // `warmup` untimed ones). CUDA points are timed with CUDA events recorded
    // on the default stream of the point's own context, around each call, as
    // `halcaps bench` times library calls; CPU points on the host clock.
    Timing time(bool cuda, int warmup, int repeats, const std::function<void(int)> &call) const;

private:
    void *handle_ = nullptr;
    detail::HalideFunction function_;
    int scalar_count_ = 0;
    int input_count_ = 0;
    int (*copy_to_host_)(void *, halide_buffer_t *) = nullptr;
    int (*copy_to_device_)(void *, halide_buffer_t *, const halide_device_interface_t *) = nullptr;
    int (*device_sync_)(void *, halide_buffer_t *) = nullptr;
    int (*device_free_)(void *, halide_buffer_t *) = nullptr;
    // CUDA points only (null otherwise).
    const halide_device_interface_t *(*cuda_interface_)() = nullptr;
    int (*acquire_context_)(void *, void **, bool) = nullptr;
    int (*release_context_)(void *) = nullptr;
};

}  // namespace halcaps::cli

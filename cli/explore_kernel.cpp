#include "cli/explore_kernel.h"

#include <dlfcn.h>

#include <cstdio>
#include <string>

#include "cli/common.h"

namespace halcaps::cli {

namespace {

// Without a handler of ours the runtime's default prints and aborts; ours
// prints, and the failing call returns its error code.
// Halide's messages do not always end in a newline.
void print_halide_error(void *, const char *message) {
    std::string text = message;
    if (text.empty() || text.back() != '\n') text += '\n';
    std::fprintf(stderr, "Halide error: %s", text.c_str());
}

template <typename F>
void look_up(void *handle, const std::string &library, const char *name, F *out) {
    *out = reinterpret_cast<F>(dlsym(handle, name));
    if (*out == nullptr) throw UsageError{library + ": no symbol " + name};
}

}  // namespace

LoadedKernel::LoadedKernel(const std::string &library, const std::string &function) {
    // RTLD_LOCAL: each point's runtime copy stays private to its .so.
    handle_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) throw UsageError{std::string("cannot load ") + library + ": " + dlerror()};
    look_up(handle_, library, function.c_str(), &function_);
    look_up(handle_, library, "halide_copy_to_host", &copy_to_host_);
    look_up(handle_, library, "halide_device_sync", &device_sync_);
    look_up(handle_, library, "halide_device_free", &device_free_);
    using Handler = void (*)(void *, const char *);
    Handler (*set_error_handler)(Handler) = nullptr;
    look_up(handle_, library, "halide_set_error_handler", &set_error_handler);
    set_error_handler(print_halide_error);
}

LoadedKernel::~LoadedKernel() {
    // Unloading runs the runtime's destructors (thread pool, CUDA context),
    // so one point's worker threads do not compete with the next point's.
    if (handle_ != nullptr) dlclose(handle_);
}

int LoadedKernel::call(halide_buffer_t *u, halide_buffer_t *W, halide_buffer_t *u_hat) const {
    return function_(nullptr, u, W, u_hat);
}

int LoadedKernel::sync(halide_buffer_t *buffer) const {
    // halide_device_sync fails on a buffer with no device interface (CPU).
    return buffer->device_interface == nullptr ? 0 : device_sync_(nullptr, buffer);
}

int LoadedKernel::copy_to_host(halide_buffer_t *buffer) const { return copy_to_host_(nullptr, buffer); }

void LoadedKernel::device_free(halide_buffer_t *buffer) const {
    if (buffer->device != 0) device_free_(nullptr, buffer);
}

}  // namespace halcaps::cli

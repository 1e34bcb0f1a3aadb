#include "cuda_support.h"

#include "halide_call.h"

#if HALCAPS_WITH_CUDA

#include <cuda.h>
#include <cuda_runtime.h>

#include "HalideRuntimeCuda.h"

namespace halcaps::detail {

namespace {

// The driver API is reached through the runtime's entry-point lookup rather
// than by linking libcuda, so binaries still start on machines without a GPU
// driver (CI) and report "no CUDA device" instead of failing to load.
template <typename Function>
Function driver_entry_point(const char *name) {
    void *symbol = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion(name, &symbol, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
        return nullptr;
    }
    return reinterpret_cast<Function>(symbol);
}

using CtxGetCurrent = CUresult (*)(CUcontext *);
using CtxPushCurrent = CUresult (*)(CUcontext);
using CtxPopCurrent = CUresult (*)(CUcontext *);

CtxGetCurrent driver_ctx_get_current() {
    static const auto fn = driver_entry_point<CtxGetCurrent>("cuCtxGetCurrent");
    return fn;
}

Status current_or_primary_context(void **context) {
    CtxGetCurrent get_current = driver_ctx_get_current();
    if (!get_current) {
        return {StatusCode::device_unavailable, "cannot reach the CUDA driver (cuCtxGetCurrent not found)"};
    }
    CUcontext current = nullptr;
    if (get_current(&current) == CUDA_SUCCESS && current != nullptr) {
        *context = current;
        return Status::success();
    }
    // No context yet on this thread: let the CUDA runtime make its primary
    // context current, as any cudaMalloc by the caller would.
    if (cudaError_t err = cudaFree(nullptr); err != cudaSuccess) {
        return {StatusCode::cuda_error,
                std::string("initialising the CUDA primary context failed: ") + cudaGetErrorString(err)};
    }
    if (get_current(&current) != CUDA_SUCCESS || current == nullptr) {
        return {StatusCode::cuda_error, "no CUDA context is current after initialising the primary context"};
    }
    *context = current;
    return Status::success();
}

}  // namespace

Status resolve_cuda_context(const Options &options, void **context) {
    if (options.cuda_context != nullptr) {
        *context = options.cuda_context;
        return Status::success();
    }
    return current_or_primary_context(context);
}

ScopedCudaContext::ScopedCudaContext(const Options &options) {
    if (options.cuda_context == nullptr) return;
    static const auto push = driver_entry_point<CtxPushCurrent>("cuCtxPushCurrent");
    if (push == nullptr) {
        status_ = {StatusCode::device_unavailable, "cannot reach the CUDA driver (cuCtxPushCurrent not found)"};
        return;
    }
    if (push(static_cast<CUcontext>(options.cuda_context)) != CUDA_SUCCESS) {
        status_ = {StatusCode::cuda_error, "options.cuda_context could not be made current (cuCtxPushCurrent failed)"};
        return;
    }
    pushed_ = true;
}

ScopedCudaContext::~ScopedCudaContext() {
    if (!pushed_) return;
    static const auto pop = driver_entry_point<CtxPopCurrent>("cuCtxPopCurrent");
    CUcontext popped = nullptr;
    if (pop != nullptr) pop(&popped);
}

const halide_device_interface_t *cuda_device_interface() { return halide_cuda_device_interface(); }

int wrap_device_pointer(void *user_context, halide_buffer_t *buffer, void *device_pointer) {
    return halide_cuda_wrap_device_ptr(user_context, buffer, reinterpret_cast<uint64_t>(device_pointer));
}

int detach_device_pointer(void *user_context, halide_buffer_t *buffer) {
    return halide_cuda_detach_device_ptr(user_context, buffer);
}

}  // namespace halcaps::detail

// Halide's CUDA runtime asks these (weakly defined in its runtime library)
// which context and stream to use; ours answer with the caller's, carried in
// the user context of each call.
extern "C" int halide_cuda_acquire_context(void *user_context, CUcontext *ctx, bool /*create*/) {
    auto *call = static_cast<halcaps::detail::CallContext *>(user_context);
    if (call != nullptr && call->cuda_context != nullptr) {
        *ctx = static_cast<CUcontext>(call->cuda_context);
        return 0;
    }
    void *context = nullptr;
    if (!halcaps::detail::current_or_primary_context(&context).ok()) return -1;
    *ctx = static_cast<CUcontext>(context);
    return 0;
}

extern "C" int halide_cuda_release_context(void * /*user_context*/) { return 0; }

extern "C" int halide_cuda_get_stream(void *user_context, CUcontext /*ctx*/, CUstream *stream) {
    auto *call = static_cast<halcaps::detail::CallContext *>(user_context);
    *stream = call != nullptr ? static_cast<CUstream>(call->cuda_stream) : nullptr;
    return 0;
}

namespace halcaps {

bool cuda_built() { return true; }

bool cuda_device_available() {
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

std::string cuda_device_name() {
    int device = 0;
    cudaDeviceProp properties{};
    if (!cuda_device_available() || cudaGetDevice(&device) != cudaSuccess ||
        cudaGetDeviceProperties(&properties, device) != cudaSuccess) {
        return "";
    }
    return properties.name;
}

Status release_cached_device_memory() {
    if (!cuda_device_available()) return Status::success();
    if (int code = halide_cuda_release_unused_device_allocations(nullptr); code != 0) {
        return {StatusCode::cuda_error, "release_cached_device_memory: Halide's CUDA runtime returned error " +
                                            std::to_string(code) + " while freeing its cached allocations"};
    }
    return Status::success();
}

}  // namespace halcaps

#else  // no CUDA in this build

namespace halcaps::detail {

Status resolve_cuda_context(const Options &, void **) {
    return {StatusCode::device_unavailable, "this build of halcaps has no CUDA support"};
}
ScopedCudaContext::ScopedCudaContext(const Options &) {}
ScopedCudaContext::~ScopedCudaContext() {}
const halide_device_interface_t *cuda_device_interface() { return nullptr; }
int wrap_device_pointer(void *, halide_buffer_t *, void *) { return -1; }
int detach_device_pointer(void *, halide_buffer_t *) { return -1; }

}  // namespace halcaps::detail

namespace halcaps {
bool cuda_built() { return false; }
bool cuda_device_available() { return false; }
std::string cuda_device_name() { return ""; }
Status release_cached_device_memory() { return Status::success(); }
}  // namespace halcaps

#endif

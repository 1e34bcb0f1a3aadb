#include "cli/explore_kernel.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <string>

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

template <typename F>
void look_up_optional(void *handle, const char *name, F *out) {
    *out = reinterpret_cast<F>(dlsym(handle, name));
}

// The few CUDA driver entry points that time a point with events. The tool
// opens libcuda itself (as Halide's runtime does) so that it still runs, and
// times CPU points, on machines without a CUDA driver.
struct CudaEvents {
    using Event = void *;
    int (*ctx_push)(void *) = nullptr;
    int (*ctx_pop)(void **) = nullptr;
    int (*event_create)(Event *, unsigned) = nullptr;
    int (*event_record)(Event, void *) = nullptr;
    int (*event_synchronize)(Event) = nullptr;
    int (*event_elapsed)(float *, Event, Event) = nullptr;
    int (*event_destroy)(Event) = nullptr;
    int (*event_query)(Event) = nullptr;
    int (*module_load_data)(void **, const void *) = nullptr;
    int (*module_get_function)(void **, void *, const char *) = nullptr;
    int (*module_unload)(void *) = nullptr;
    int (*launch_kernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **,
                         void **) = nullptr;

    static const CudaEvents &get() {
        static const CudaEvents events = [] {
            CudaEvents e;
            void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
            if (lib == nullptr) throw UsageError{"timing a CUDA point needs libcuda.so.1: " + std::string(dlerror())};
            const std::string name = "libcuda.so.1";
            look_up(lib, name, "cuCtxPushCurrent_v2", &e.ctx_push);
            look_up(lib, name, "cuCtxPopCurrent_v2", &e.ctx_pop);
            look_up(lib, name, "cuEventCreate", &e.event_create);
            look_up(lib, name, "cuEventRecord", &e.event_record);
            look_up(lib, name, "cuEventSynchronize", &e.event_synchronize);
            look_up(lib, name, "cuEventElapsedTime", &e.event_elapsed);
            look_up(lib, name, "cuEventDestroy_v2", &e.event_destroy);
            look_up(lib, name, "cuEventQuery", &e.event_query);
            look_up(lib, name, "cuModuleLoadData", &e.module_load_data);
            look_up(lib, name, "cuModuleGetFunction", &e.module_get_function);
            look_up(lib, name, "cuModuleUnload", &e.module_unload);
            look_up(lib, name, "cuLaunchKernel", &e.launch_kernel);
            return e;
        }();
        return events;
    }
};

void cuda_check(int result, const char *what) {
    if (result != 0) throw UsageError{std::string(what) + " failed (CUDA driver error " + std::to_string(result) + ")"};
}

constexpr int kCudaErrorNotReady = 600;  // CUDA_ERROR_NOT_READY

// The wait kernel of `halcaps bench` (cli/device_wait.cu) as PTX, for the
// point's own context through the driver API: one thread that returns after
// wait_ns of device wall-clock time.
const char *const kWaitKernelPtx = R"(
.version 7.0
.target sm_70
.address_size 64
.visible .entry halcaps_wait(.param .u64 wait_ns)
{
    .reg .pred %p;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [wait_ns];
    mov.u64 %rd2, %globaltimer;
WAIT:
    nanosleep.u32 1000;
    mov.u64 %rd3, %globaltimer;
    sub.s64 %rd4, %rd3, %rd2;
    setp.lt.u64 %p, %rd4, %rd1;
    @%p bra WAIT;
    ret;
}
)";

}  // namespace

LoadedKernel::LoadedKernel(const std::string &library, const std::string &function, int scalars, int buffers) {
    // RTLD_LOCAL: each point's runtime copy stays private to its .so.
    handle_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) throw UsageError{std::string("cannot load ") + library + ": " + dlerror()};
    look_up(handle_, library, (function + "_argv").c_str(), &function_.argv);
    look_up(handle_, library, (function + "_metadata").c_str(), &function_.metadata);
    scalar_count_ = scalars;
    input_count_ = buffers - 1;
    look_up(handle_, library, "halide_copy_to_host", &copy_to_host_);
    look_up(handle_, library, "halide_copy_to_device", &copy_to_device_);
    look_up(handle_, library, "halide_device_sync", &device_sync_);
    look_up(handle_, library, "halide_device_free", &device_free_);
    look_up_optional(handle_, "halide_cuda_device_interface", &cuda_interface_);
    look_up_optional(handle_, "halide_cuda_acquire_context", &acquire_context_);
    look_up_optional(handle_, "halide_cuda_release_context", &release_context_);
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

int LoadedKernel::call(const std::vector<int32_t> &scalars, const std::vector<halide_buffer_t *> &buffers) const {
    // The runtime's way (runtime/src/halide_argv.h), with a null user context.
    void *user_context = nullptr;
    std::vector<void *> args;
    if (scalars.size() != static_cast<size_t>(scalar_count_)) {
        throw UsageError{std::string(function_.metadata()->name) + ": called with " + std::to_string(scalars.size()) +
                         " scalars, the operator has " + std::to_string(scalar_count_)};
    }
    if (std::string why = detail::halide_argv(*function_.metadata(), &user_context, scalars, buffers,
                                              static_cast<size_t>(input_count_), &args);
        !why.empty()) {
        throw UsageError{std::string(function_.metadata()->name) + " " + why + " (the operator's arguments)"};
    }
    return function_.argv(args.data());
}

int LoadedKernel::sync(halide_buffer_t *buffer) const {
    // halide_device_sync fails on a buffer with no device interface (CPU).
    return buffer->device_interface == nullptr ? 0 : device_sync_(nullptr, buffer);
}

int LoadedKernel::copy_to_host(halide_buffer_t *buffer) const { return copy_to_host_(nullptr, buffer); }

int LoadedKernel::copy_to_device(halide_buffer_t *buffer) const {
    if (cuda_interface_ == nullptr) return 0;
    // The host copy now wins over whatever the device holds.
    buffer->set_device_dirty(false);
    buffer->set_host_dirty(true);
    return copy_to_device_(nullptr, buffer, cuda_interface_());
}

void LoadedKernel::device_free(halide_buffer_t *buffer) const {
    if (buffer->device != 0) device_free_(nullptr, buffer);
}

Timing LoadedKernel::time(bool cuda, int warmup, int repeats, const std::function<void(int)> &call) const {
    int n = 0;
    // CPU points: the host clock, as for any CPU call (time_calls).
    if (!cuda) return time_calls(Device::cpu, warmup, repeats, [&] { call(n++); });
    // CUDA points: events in the point's own context, which time_calls (the
    // CUDA runtime's current context) cannot see.
    for (; n < warmup; n++) call(n);
    if (acquire_context_ == nullptr || release_context_ == nullptr) {
        throw UsageError{"a CUDA point's library exports no halide_cuda_acquire_context"};
    }
    const CudaEvents &cu = CudaEvents::get();
    void *context = nullptr;
    if (acquire_context_(nullptr, &context, true) != 0) throw UsageError{"the point's CUDA context is unusable"};
    // Released at once: some runtimes hold a lock until the release, and
    // every call of the kernel acquires the context again. The context
    // itself lives as long as the library stays loaded.
    release_context_(nullptr);
    // The runtime launches on the default stream of its own context
    // (halide_cuda_get_stream's default), so the events go there too.
    cuda_check(cu.ctx_push(context), "cuCtxPushCurrent");
    CudaEvents::Event start = nullptr, stop = nullptr;
    cuda_check(cu.event_create(&start, 0), "cuEventCreate");
    cuda_check(cu.event_create(&stop, 0), "cuEventCreate");
    void *wait_module = nullptr, *wait_kernel = nullptr;
    cuda_check(cu.module_load_data(&wait_module, kWaitKernelPtx), "cuModuleLoadData (the wait kernel)");
    cuda_check(cu.module_get_function(&wait_kernel, wait_module, "halcaps_wait"), "cuModuleGetFunction");
    // Timed as time_calls times (cli/common.h, Timing), in this context.
    DeviceTimer timer;
    timer.enqueue_wait = [&](double us) {
        unsigned long long wait_ns = static_cast<unsigned long long>(us * 1e3);
        void *params[] = {&wait_ns};
        cuda_check(cu.launch_kernel(wait_kernel, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr),
                   "cuLaunchKernel (the wait kernel)");
    };
    timer.record_start = [&] { cuda_check(cu.event_record(start, nullptr), "cuEventRecord"); };
    timer.record_stop = [&] { cuda_check(cu.event_record(stop, nullptr), "cuEventRecord"); };
    timer.start_done = [&] {
        const int state = cu.event_query(start);
        if (state != kCudaErrorNotReady) cuda_check(state, "cuEventQuery");
        return state != kCudaErrorNotReady;
    };
    timer.elapsed_us = [&] {
        cuda_check(cu.event_synchronize(stop), "cuEventSynchronize");
        float ms = 0;
        cuda_check(cu.event_elapsed(&ms, start, stop), "cuEventElapsedTime");
        return 1000.0 * ms;
    };
    const Timing t = time_device_calls(timer, repeats, [&] { call(n++); });
    cu.module_unload(wait_module);
    cu.event_destroy(start);
    cu.event_destroy(stop);
    void *popped = nullptr;
    cu.ctx_pop(&popped);
    return t;
}

}  // namespace halcaps::cli

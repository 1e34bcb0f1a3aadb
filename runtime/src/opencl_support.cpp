#include "opencl_support.h"

#if HALCAPS_WITH_OPENCL

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <dlfcn.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace halcaps::detail {

namespace {

// The ICD loader, opened once; Halide's runtime takes its symbols from the
// same handle (halide_opencl_get_symbol below).
void *opencl_library() {
    static void *const handle = [] {
        void *h = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
        return h != nullptr ? h : dlopen("libOpenCL.so", RTLD_NOW | RTLD_LOCAL);
    }();
    return handle;
}

template <typename Function>
Function symbol(const char *name) {
    void *library = opencl_library();
    return library != nullptr ? reinterpret_cast<Function>(dlsym(library, name)) : nullptr;
}

std::string text_info(cl_platform_id platform) {
    static const auto get =
        symbol<cl_int (*)(cl_platform_id, cl_platform_info, size_t, void *, size_t *)>("clGetPlatformInfo");
    char name[256] = {};
    if (get == nullptr || get(platform, CL_PLATFORM_NAME, sizeof(name) - 1, name, nullptr) != CL_SUCCESS) return "";
    return name;
}

std::string text_info(cl_device_id device) {
    static const auto get =
        symbol<cl_int (*)(cl_device_id, cl_device_info, size_t, void *, size_t *)>("clGetDeviceInfo");
    char name[256] = {};
    if (get == nullptr || get(device, CL_DEVICE_NAME, sizeof(name) - 1, name, nullptr) != CL_SUCCESS) return "";
    return name;
}

// The device types HL_OCL_DEVICE_TYPE asks for (all when unset or empty).
cl_device_type requested_device_types() {
    const char *wanted = std::getenv("HL_OCL_DEVICE_TYPE");
    cl_device_type types = 0;
    if (wanted != nullptr) {
        if (std::strstr(wanted, "cpu")) types |= CL_DEVICE_TYPE_CPU;
        if (std::strstr(wanted, "gpu")) types |= CL_DEVICE_TYPE_GPU;
        if (std::strstr(wanted, "acc")) types |= CL_DEVICE_TYPE_ACCELERATOR;
    }
    return types != 0 ? types : CL_DEVICE_TYPE_ALL;
}

// The process's device, context and queue, made on first use; `problem`
// says why there are none.
struct OpenCLDevice {
    std::string problem;
    std::string name;
    cl_context context = nullptr;
    cl_command_queue queue = nullptr;
};

OpenCLDevice open_device() {
    OpenCLDevice d;
    if (opencl_library() == nullptr) {
        d.problem = "no OpenCL library (libOpenCL.so.1, an ICD loader) could be loaded";
        return d;
    }
    const auto get_platforms = symbol<cl_int (*)(cl_uint, cl_platform_id *, cl_uint *)>("clGetPlatformIDs");
    const auto get_devices =
        symbol<cl_int (*)(cl_platform_id, cl_device_type, cl_uint, cl_device_id *, cl_uint *)>("clGetDeviceIDs");
    const auto create_context =
        symbol<cl_context (*)(const cl_context_properties *, cl_uint, const cl_device_id *,
                              void(CL_CALLBACK *)(const char *, const void *, size_t, void *), void *, cl_int *)>(
            "clCreateContext");
    const auto create_queue =
        symbol<cl_command_queue (*)(cl_context, cl_device_id, cl_command_queue_properties, cl_int *)>(
            "clCreateCommandQueue");
    if (!get_platforms || !get_devices || !create_context || !create_queue) {
        d.problem = "the OpenCL library lacks the OpenCL 1.2 entry points";
        return d;
    }
    cl_uint count = 0;
    if (cl_int err = get_platforms(0, nullptr, &count); err != CL_SUCCESS || count == 0) {
        d.problem = "no OpenCL platform is installed (clGetPlatformIDs: " +
                    (err != CL_SUCCESS ? "error " + std::to_string(err) : std::string("none")) +
                    "; an ICD such as PoCL registers one in /etc/OpenCL/vendors)";
        return d;
    }
    std::vector<cl_platform_id> platforms(count);
    get_platforms(count, platforms.data(), nullptr);
    const char *wanted_platform = std::getenv("HL_OCL_PLATFORM_NAME");
    const cl_device_type types = requested_device_types();
    for (cl_platform_id platform : platforms) {
        const std::string platform_name = text_info(platform);
        if (wanted_platform != nullptr && platform_name.find(wanted_platform) == std::string::npos) continue;
        cl_device_id device = nullptr;
        cl_uint devices = 0;
        if (get_devices(platform, types, 1, &device, &devices) != CL_SUCCESS || devices == 0) continue;
        cl_int err = CL_SUCCESS;
        d.context = create_context(nullptr, 1, &device, nullptr, nullptr, &err);
        if (err != CL_SUCCESS || d.context == nullptr) {
            d.problem = "clCreateContext failed on " + text_info(device) + " (error " + std::to_string(err) + ")";
            return d;
        }
        d.queue = create_queue(d.context, device, 0, &err);
        if (err != CL_SUCCESS || d.queue == nullptr) {
            d.problem = "clCreateCommandQueue failed on " + text_info(device) + " (error " + std::to_string(err) + ")";
            d.context = nullptr;
            return d;
        }
        d.name = text_info(device) + " (" + platform_name + ")";
        return d;
    }
    d.problem = "no OpenCL device found";
    if (wanted_platform != nullptr) d.problem += std::string(" on a platform named like '") + wanted_platform + "'";
    if (types != CL_DEVICE_TYPE_ALL) d.problem += std::string(" of type '") + std::getenv("HL_OCL_DEVICE_TYPE") + "'";
    d.problem += " (HL_OCL_PLATFORM_NAME and HL_OCL_DEVICE_TYPE choose them)";
    return d;
}

// Never destroyed: Halide's runtime releases its programs from a destructor
// at exit, after static objects may be gone.
std::atomic<const OpenCLDevice *> opened{nullptr};

// Whether Halide's runtime has asked for the library's symbols (it asks for
// all of them at once, on its first use of OpenCL).
std::atomic<bool> halide_loaded_symbols{false};

const OpenCLDevice &the_device() {
    static const OpenCLDevice *const device = [] {
        const OpenCLDevice *d = new OpenCLDevice(open_device());
        opened.store(d);
        return d;
    }();
    return *device;
}

// Halide's runtime holds the context from acquire to release and expects
// other threads to wait in between.
struct Owner {
    std::mutex mutex;
    std::condition_variable released;
    std::thread::id thread;
};
Owner &owner() {
    static Owner *const o = new Owner;
    return *o;
}

}  // namespace

Status opencl_ready(const char *op) {
    const OpenCLDevice &d = the_device();
    if (d.context != nullptr) return Status::success();
    return {StatusCode::device_unavailable, std::string(op) + ": device opencl was asked for, but " + d.problem};
}

}  // namespace halcaps::detail

// Halide's OpenCL runtime asks these (weakly defined in its runtime library)
// for the library's symbols and for the context and queue to use; ours answer
// with the device chosen above.
extern "C" void *halide_opencl_get_symbol(void * /*user_context*/, const char *name) {
    halcaps::detail::halide_loaded_symbols.store(true);
    return halcaps::detail::symbol<void *>(name);
}

extern "C" int halide_acquire_cl_context(void * /*user_context*/, cl_context *ctx, cl_command_queue *q, bool create) {
    using namespace halcaps::detail;
    // Without `create` (Halide's clean-up at exit, which then calls clFinish
    // and releases its programs) only a device already made is handed
    // over, and only once Halide has taken the library's symbols (it takes
    // them before its first use of a context).
    const OpenCLDevice *d = create ? &the_device() : halide_loaded_symbols.load() ? opened.load() : nullptr;
    *ctx = nullptr;
    *q = nullptr;
    if (d == nullptr) return 0;
    if (d->context == nullptr) return create ? CL_DEVICE_NOT_AVAILABLE : 0;
    Owner &o = owner();
    std::unique_lock<std::mutex> lock(o.mutex);
    o.released.wait(lock, [&] { return o.thread == std::thread::id(); });
    o.thread = std::this_thread::get_id();
    *ctx = d->context;
    *q = d->queue;
    return 0;
}

extern "C" int halide_release_cl_context(void * /*user_context*/) {
    using namespace halcaps::detail;
    Owner &o = owner();
    std::lock_guard<std::mutex> lock(o.mutex);
    if (o.thread == std::this_thread::get_id()) {
        o.thread = std::thread::id();
        o.released.notify_one();
    }
    return 0;
}

namespace halcaps {

bool opencl_built() { return true; }
bool opencl_device_available() { return detail::the_device().context != nullptr; }
std::string opencl_device_name() { return detail::the_device().name; }

}  // namespace halcaps

#else  // no OpenCL in this build

namespace halcaps::detail {
Status opencl_ready(const char *op) {
    return {StatusCode::device_unavailable,
            std::string(op) + ": device opencl was asked for, but this build of halcaps has no OpenCL support"};
}
}  // namespace halcaps::detail

namespace halcaps {
bool opencl_built() { return false; }
bool opencl_device_available() { return false; }
std::string opencl_device_name() { return ""; }
}  // namespace halcaps

#endif

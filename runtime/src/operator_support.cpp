#include "operator_support.h"

#include <algorithm>
#include <mutex>

#include "HalideRuntime.h"
#include "opencl_support.h"

namespace halcaps::detail {

Status check_device_ready(const char *op, Device device) {
    if (device == Device::opencl) return opencl_ready(op);
    if (device != Device::cuda) return Status::success();
    if (!cuda_built()) {
        return {StatusCode::device_unavailable,
                std::string(op) + ": device cuda was asked for, but this build of halcaps has no CUDA support"};
    }
    if (!cuda_device_available()) {
        return {StatusCode::device_unavailable, std::string(op) + ": device cuda was asked for, but no CUDA device is present"};
    }
    // Halide's cache of device allocations (off by default in Halide) is
    // turned on for the whole process: pipelines with device intermediates
    // (the fused routing passes' partial sums, the backward's stages) would
    // otherwise pay a cuMemAlloc and cuMemFree per buffer per call.
    static std::once_flag cache_on;
    std::call_once(cache_on, [] { halide_reuse_device_allocations(nullptr, true); });
    return Status::success();
}

// Every implementation name of `op` for `device`, for error messages.
std::string implementation_names(const std::string &op, Device device) {
    std::string out;
    for (const auto &info : list_implementations()) {
        if (info.op == op && info.device == device) out += (out.empty() ? "" : ", ") + info.implementation;
    }
    return out.empty() ? "none" : out;
}

Status find_kernel(const char *op, const char *generator, const std::string &implementation, Device device,
                   const HalideKernelEntry **kernel) {
    *kernel = find_halide_kernel(generator, implementation, device);
    if (*kernel == nullptr) {
        return {StatusCode::unknown_implementation,
                std::string(op) + ": no implementation named '" + implementation + "' for device " +
                    device_name(device) + "; available: " + implementation_names(op, device)};
    }
    return Status::success();
}

std::string chosen_implementation(const Options &options, Device device) {
    return options.implementation.empty() ? default_implementation(device) : options.implementation;
}

std::vector<int> built_iterations(const std::string &generator, const std::string &schedule, Device device) {
    std::vector<int> out;
    for (const auto &k : halide_kernels()) {
        if (generator == k.generator && schedule == k.schedule && device == k.device) out.push_back(k.iterations);
    }
    std::sort(out.begin(), out.end());
    return out;
}

Status find_routing_kernel(const char *op, const std::vector<const char *> &generators,
                           const std::string &implementation, Device device, int iterations,
                           const HalideKernelEntry **kernel) {
    *kernel = nullptr;
    for (const char *generator : generators) {
        const std::vector<int> built = built_iterations(generator, implementation, device);
        if (built.empty()) continue;
        *kernel = find_halide_kernel(generator, implementation, device, iterations);
        if (*kernel != nullptr) return Status::success();
        std::string list;
        for (int n : built) list += (list.empty() ? "" : ", ") + std::to_string(n);
        return {StatusCode::unsupported_iterations,
                std::string(op) + ": implementation '" + implementation + "' is built for iterations " + list +
                    ", not " + std::to_string(iterations) + " (schedules/kernels.cmake lists the counts built)"};
    }
    return {StatusCode::unknown_implementation, std::string(op) + ": no implementation named '" + implementation +
                                                    "' for device " + device_name(device) +
                                                    "; available: " + implementation_names(op, device)};
}

}  // namespace halcaps::detail

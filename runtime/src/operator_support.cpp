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
        return {StatusCode::device_unavailable,
                std::string(op) + ": device cuda was asked for, but no CUDA device is present"};
    }
    // Halide's cache of device allocations (off by default in Halide) is
    // turned on for the whole process: pipelines with device intermediates
    // (the fused routing passes' partial sums, the backward's stages) would
    // otherwise pay a cuMemAlloc and cuMemFree per buffer per call.
    static std::once_flag cache_on;
    std::call_once(cache_on, [] { halide_reuse_device_allocations(nullptr, true); });
    return Status::success();
}

std::vector<int> built_iterations(const std::string &generator, const std::string &schedule, Device device) {
    std::vector<int> out;
    for (const auto &k : halide_kernels()) {
        if (generator == k.generator && schedule == k.schedule && device == k.device) out.push_back(k.iterations);
    }
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace halcaps::detail

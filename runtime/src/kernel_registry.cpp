#include "kernel_registry.h"

namespace halcaps::detail {

const HalideKernelEntry *find_halide_kernel(const std::string &generator, const std::string &schedule, Device device,
                                            int iterations) {
    for (const auto &k : halide_kernels()) {
        if (generator == k.generator && schedule == k.schedule && device == k.device && iterations == k.iterations) {
            return &k;
        }
    }
    return nullptr;
}

std::string halide_schedule_names(const std::string &generator, Device device) {
    std::string names;
    for (const auto &k : halide_kernels()) {
        if (generator == k.generator && device == k.device)
            names += (names.empty() ? "" : ", ") + std::string(k.schedule);
    }
    return names.empty() ? "(none built)" : names;
}

}  // namespace halcaps::detail

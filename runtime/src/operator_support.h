// Pieces every operator's entry point uses after its argument checks: is the
// device usable; and the registry's counts built, for the tables.
#pragma once

#include <string>
#include <vector>

#include "halcaps/halcaps.h"
#include "kernel_registry.h"

namespace halcaps::detail {

// device_unavailable when cuda or opencl is asked for without it in the build or a device.
Status check_device_ready(const char *op, Device device);

// Whether `device` runs the Halide GPU schedules: CUDA, and OpenCL, which
// runs the same schedules under the same names with the same defaults.
inline bool runs_gpu_schedules(Device device) { return device == Device::cuda || device == Device::opencl; }

// The iteration counts built for a generator and schedule, ascending.
std::vector<int> built_iterations(const std::string &generator, const std::string &schedule, Device device);

}  // namespace halcaps::detail

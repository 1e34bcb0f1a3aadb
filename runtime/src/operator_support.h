// Pieces every operator's entry point uses after its argument checks: is the
// device usable, which implementation was asked for, and which kernel runs it.
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

// options.implementation, or the device's default when empty.
std::string chosen_implementation(const Options &options, Device device);

// Every implementation name of `op` for `device`, for error messages.
std::string implementation_names(const std::string &op, Device device);

// The kernel of `generator` built with schedule `implementation` for `device`,
// or unknown_implementation naming what `op` has.
Status find_kernel(const char *op, const char *generator, const std::string &implementation, Device device,
                   const HalideKernelEntry **kernel);

// For the routing ops: the kernel of one of `generators` (an implementation
// name belongs to exactly one of them) built with schedule `implementation`
// and `iterations` unrolled iterations. unknown_implementation when no
// generator has that schedule; unsupported_iterations, listing the counts
// built, when it exists but not for that iteration count.
Status find_routing_kernel(const char *op, const std::vector<const char *> &generators,
                           const std::string &implementation, Device device, int iterations,
                           const HalideKernelEntry **kernel);

// The iteration counts built for a generator and schedule, ascending.
std::vector<int> built_iterations(const std::string &generator, const std::string &schedule, Device device);

// Adds the squash, routing and DigitCaps entries (runtime/src/digitcaps.cpp).
void append_routing_implementations(std::vector<ImplementationInfo> &out);

// Adds the capsule convolution entries (runtime/src/capsconv.cpp).
void append_capsconv_implementations(std::vector<ImplementationInfo> &out);

}  // namespace halcaps::detail

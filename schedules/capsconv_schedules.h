// Named schedules for the capsule convolution and its gradients
// (generators/capsconv.cpp). A generator parameter `schedule=<name>` picks
// one at build time; schedules/kernels.cmake lists the combinations built.
#pragma once

#include <string>

#include "Halide.h"
#include "generators/capsconv_stages.h"

namespace halcaps {

// Each applies the named schedule or stops the build with a message listing
// the schedule names it knows for that device.
void schedule_capsconv(const std::string &name, const Halide::Target &target, CapsConvStages &s);
void schedule_capsconv_grad_input(const std::string &name, const Halide::Target &target, CapsConvGradInputStages &s);
void schedule_capsconv_grad_filter(const std::string &name, const Halide::Target &target, CapsConvGradFilterStages &s);

}  // namespace halcaps

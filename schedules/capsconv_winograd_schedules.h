// Named schedules for the Winograd form of the capsule convolution
// (generators/capsconv_winograd.cpp). A generator parameter `schedule=<name>`
// picks one at build time; schedules/kernels.cmake lists the combinations built.
#pragma once

#include <string>

#include "Halide.h"
#include "generators/capsconv_winograd_stages.h"

namespace halcaps {

// Applies the named schedule or stops the build with a message listing the
// schedule names it knows for that device.
void schedule_capsconv_winograd(const std::string &name, const Halide::Target &target, CapsConvWinogradStages &s);

}  // namespace halcaps

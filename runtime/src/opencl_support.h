// The OpenCL side of the runtime: finding the device, and the context and
// queue Halide's OpenCL runtime runs in. The OpenCL library (the ICD loader,
// libOpenCL.so.1) is opened at run time, never linked, so binaries start on
// machines without one and report device_unavailable. Built as stubs when
// the build has no OpenCL.
//
// The device: the first device of the first platform, or, with the same
// environment variables Halide's runtime reads,
//   HL_OCL_PLATFORM_NAME  the first platform whose name contains this text;
//   HL_OCL_DEVICE_TYPE    the first device of these types: "cpu", "gpu",
//                         "acc" (accelerator), or several ("cpu,gpu").
// (Halide's own choice among several devices is the one with the most
// compute units; ours is the first, so that `halcaps info` names the device
// that runs.) The choice is made once a process, on first use.
#pragma once

#include <string>

#include "halcaps/halcaps.h"

namespace halcaps::detail {

// ok when the OpenCL device above can run kernels (its context and queue
// are made here, once); device_unavailable naming what is missing otherwise.
Status opencl_ready(const char *op);

}  // namespace halcaps::detail

// Keeping the default stream busy while a timed call is enqueued (cli/device_wait.cu).
#pragma once

#include <cuda_runtime.h>

namespace halcaps::cli {

// Enqueues one single-thread kernel on `stream` (the default stream where
// null) that returns after `microseconds` of device wall-clock time; returns
// the launch's error.
cudaError_t enqueue_device_wait(double microseconds, cudaStream_t stream = nullptr);

}  // namespace halcaps::cli

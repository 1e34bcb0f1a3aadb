// A kernel that keeps the default stream busy for a given wall-clock time,
// so that what is enqueued behind it (a start event, the timed call, a stop
// event) reaches the device before the device gets to it. The events then
// measure the device's time for the call's work, and not the host's launch
// path, which a pipeline hides the same way (cli/common.cpp, time_calls).
#include "cli/device_wait.h"

namespace halcaps::cli {

namespace {

__device__ unsigned long long global_timer_ns() {
    unsigned long long ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    return ns;
}

__global__ void wait_kernel(unsigned long long ns) {
    const unsigned long long start = global_timer_ns();
    while (global_timer_ns() - start < ns) __nanosleep(1000);
}

}  // namespace

cudaError_t enqueue_device_wait(double microseconds, cudaStream_t stream) {
    wait_kernel<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(microseconds * 1e3));
    return cudaGetLastError();
}

}  // namespace halcaps::cli

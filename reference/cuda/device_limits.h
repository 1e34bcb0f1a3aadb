// The current device's limits that the hand-written kernels' launch plans
// read (SM count, resident threads an SM, threads a block, shared memory a
// block may opt in to), queried once per device and cached for the process.
#pragma once

#include <cuda_runtime.h>

#include <mutex>
#include <vector>

namespace halcaps::cuda_reference {

struct DeviceLimits {
    int sms = 0, threads_per_sm = 0, threads_per_block = 0, smem_per_block_optin = 0;
};

// The current device's limits, from the cache after its first query.
inline cudaError_t device_limits(DeviceLimits *out) {
    static std::mutex mutex;
    static std::vector<DeviceLimits> cache;
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return err;
    std::lock_guard<std::mutex> lock(mutex);
    if (device >= static_cast<int>(cache.size())) cache.resize(device + 1);
    DeviceLimits &d = cache[device];
    if (d.sms == 0) {
        DeviceLimits q;
        if ((err = cudaDeviceGetAttribute(&q.sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess) return err;
        if ((err = cudaDeviceGetAttribute(&q.threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device)) !=
            cudaSuccess)
            return err;
        if ((err = cudaDeviceGetAttribute(&q.threads_per_block, cudaDevAttrMaxThreadsPerBlock, device)) != cudaSuccess)
            return err;
        if ((err = cudaDeviceGetAttribute(&q.smem_per_block_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device)) !=
            cudaSuccess)
            return err;
        d = q;
    }
    *out = d;
    return cudaSuccess;
}

}  // namespace halcaps::cuda_reference

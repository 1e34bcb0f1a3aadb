// Asynchronous copies from global to shared memory (cp.async, sm_80 on),
// shared by the hand-written tensor-core kernels
// (predict_tensor_cores.cu, digitcaps_tensor_cores.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace halcaps::cuda_reference::cp_async {

// The shared-window address of a pointer into shared memory.
__device__ inline uint32_t shared_address(const float *p) { return uint32_t(__cvta_generic_to_shared(p)); }

// 16 bytes to the shared-window address `dst` from global `src`: for a
// kernel that takes a slot's address once and adds constants to it, instead
// of converting a pointer for every copy (as __pipeline_memcpy_async does).
__device__ inline void copy16(uint32_t dst, const float *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}

// `bytes` (4 or 16) to shared `dst` from global `src`, reading src_bytes of
// them (0 or bytes) and zero-filling the rest; src must be a valid address
// either way.
template <int bytes>
__device__ inline void copy_zero_filled(float *dst, const float *src, int src_bytes) {
    const uint32_t dst_s = shared_address(dst);
    if constexpr (bytes == 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst_s), "l"(src), "r"(src_bytes) : "memory");
    } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst_s), "l"(src), "r"(src_bytes) : "memory");
    }
}

// Closes the copies issued so far into a group; waits until at most
// `pending` groups are still in flight.
__device__ inline void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int pending>
__device__ inline void wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(pending) : "memory");
}

}  // namespace halcaps::cuda_reference::cp_async

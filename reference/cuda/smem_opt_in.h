// Opting a kernel in to more than 48 KB of dynamic shared memory a block,
// shared by the hand-written kernels that need it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace halcaps::cuda_reference {

// Allows `kernel` `bytes` of dynamic shared memory a block: needed past 48 KB
// before a launch and before an occupancy query (which otherwise reports 0
// blocks). A refusal (past the device's opt-in limit) is returned and also
// cleared from the runtime's last error, so that a later call's
// cudaGetLastError does not report it again: left there, it failed the next
// test's launch (docs/history.md: nvidia-h200-tensor-training-pair/, run 7).
template <typename Kernel>
cudaError_t allow_dynamic_smem(Kernel kernel, size_t bytes) {
    if (bytes <= 48 * 1024) return cudaSuccess;
    const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
    if (err != cudaSuccess) cudaGetLastError();
    return err;
}

}  // namespace halcaps::cuda_reference

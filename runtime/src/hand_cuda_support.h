// Pieces the hand-written CUDA entry points share (hand_cuda.cpp and
// hand_cuda_capsconv.cpp): CUDA errors as statuses, the per-context cuBLAS
// handle, and the device memory of one call. CUDA builds only.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "halcaps/halcaps.h"

namespace halcaps::detail {

inline Status cuda_status(const std::string &op, const std::string &what, cudaError_t err) {
    const StatusCode code = err == cudaErrorMemoryAllocation ? StatusCode::out_of_memory : StatusCode::cuda_error;
    return {code, op + ": " + what + " failed: " + cudaGetErrorString(err)};
}

// The cuBLAS handle of the current CUDA context (one per context, created on
// first use; defined in hand_cuda.cpp).
Status shared_cublas_handle(const std::string &op, cublasHandle_t *handle);

// Device memory for one call: tensors already on the device are used in
// place; host tensors get stream-ordered device copies (inputs uploaded,
// outputs downloaded by finish()). Scratch buffers live here too.
class CallMemory {
public:
    CallMemory(std::string op, cudaStream_t stream) : op_(std::move(op)), stream_(stream) {}
    ~CallMemory() {
        for (void *p : owned_) cudaFreeAsync(p, stream_);
        if (any_host_) cudaStreamSynchronize(stream_);
    }

    Status input(const TensorView &view, const float **device) {
        if (view.space == MemorySpace::cuda) {
            *device = view.data;
            return Status::success();
        }
        float *copy = nullptr;
        if (Status s = allocate(view.element_count(), &copy); !s.ok()) return s;
        any_host_ = true;
        if (cudaError_t err =
                cudaMemcpyAsync(copy, view.data, bytes(view.element_count()), cudaMemcpyHostToDevice, stream_);
            err != cudaSuccess) {
            return cuda_status(op_, "copying an input to the device", err);
        }
        *device = copy;
        return Status::success();
    }

    Status output(const TensorView &view, float **device) {
        if (view.space == MemorySpace::cuda) {
            *device = view.data;
            return Status::success();
        }
        if (Status s = allocate(view.element_count(), device); !s.ok()) return s;
        any_host_ = true;
        downloads_.push_back({view, *device});
        return Status::success();
    }

    Status scratch(int64_t count, float **device) { return allocate(count, device); }

    // Copies host outputs back and waits for them; device outputs stay queued.
    Status finish() {
        for (const auto &d : downloads_) {
            if (cudaError_t err = cudaMemcpyAsync(d.view.data, d.device, bytes(d.view.element_count()),
                                                  cudaMemcpyDeviceToHost, stream_);
                err != cudaSuccess) {
                return cuda_status(op_, "copying an output to the host", err);
            }
        }
        if (any_host_) {
            if (cudaError_t err = cudaStreamSynchronize(stream_); err != cudaSuccess) {
                return cuda_status(op_, "the kernels", err);
            }
        }
        return Status::success();
    }

private:
    struct Download {
        TensorView view;
        float *device;
    };
    static size_t bytes(int64_t count) { return static_cast<size_t>(count) * sizeof(float); }

    Status allocate(int64_t count, float **device) {
        void *p = nullptr;
        if (cudaError_t err = cudaMallocAsync(&p, bytes(count), stream_); err != cudaSuccess) {
            return cuda_status(op_, "allocating device memory", err);
        }
        owned_.push_back(p);
        *device = static_cast<float *>(p);
        return Status::success();
    }

    std::string op_;
    cudaStream_t stream_;
    bool any_host_ = false;
    std::vector<void *> owned_;
    std::vector<Download> downloads_;
};

}  // namespace halcaps::detail

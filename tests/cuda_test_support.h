// What every CUDA test file needs: a checked CUDA call, a device copy of a
// host vector (NaN-poisoned on request, optionally offset from the
// allocation so that only 4-byte alignment holds), and Options for Device::cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "halcaps/halcaps.h"

namespace halcaps::testing {

inline void cuda_ok(cudaError_t err) {
    INFO(cudaGetErrorString(err));
    REQUIRE(err == cudaSuccess);
}

// The first float of `storage` that starts on a 16-byte boundary, for a host
// tensor placed on (that pointer) or off (one float further) the boundary
// that Halide's 16-byte loads and stores need; `storage` must hold 4 floats
// more than the tensor.
inline float *first_on_16_byte_boundary(std::vector<float> &storage) {
    float *p = storage.data();
    while (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) p++;
    return p;
}

// `host` on the device, starting `offset` floats past a cudaMalloc'd pointer
// (offset 1: only 4-byte aligned, so kernels' scalar paths run), or all NaN
// (all-ones bytes) when `poison`.
struct DeviceTensor {
    float *base = nullptr, *data = nullptr;
    size_t count = 0;

    DeviceTensor(const std::vector<float> &host, bool poison, int offset = 0) : count(host.size()) {
        cuda_ok(cudaMalloc(&base, (count + offset) * sizeof(float)));
        data = base + offset;
        if (poison) {
            cuda_ok(cudaMemset(base, 0xFF, (count + offset) * sizeof(float)));
        } else {
            cuda_ok(cudaMemcpy(data, host.data(), count * sizeof(float), cudaMemcpyHostToDevice));
        }
    }
    DeviceTensor(const DeviceTensor &) = delete;
    DeviceTensor &operator=(const DeviceTensor &) = delete;
    ~DeviceTensor() { cudaFree(base); }
    std::vector<float> download() const {
        std::vector<float> host(count);
        cuda_ok(cudaMemcpy(host.data(), data, count * sizeof(float), cudaMemcpyDeviceToHost));
        return host;
    }
    TensorView view(std::vector<int64_t> shape) const {
        TensorView v;
        v.data = data;
        v.shape = std::move(shape);
        v.space = MemorySpace::cuda;
        return v;
    }
};

inline Options cuda_options(const std::string &implementation, cudaStream_t stream = nullptr) {
    Options options;
    options.device = Device::cuda;
    options.implementation = implementation;
    options.cuda_stream = stream;
    return options;
}

}  // namespace halcaps::testing

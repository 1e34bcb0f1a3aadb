#include "halcaps/halcaps.h"

namespace halcaps {

const char *status_code_name(StatusCode code) {
    switch (code) {
    case StatusCode::ok:
        return "ok";
    case StatusCode::null_pointer:
        return "null_pointer";
    case StatusCode::bad_rank:
        return "bad_rank";
    case StatusCode::bad_extent:
        return "bad_extent";
    case StatusCode::extent_mismatch:
        return "extent_mismatch";
    case StatusCode::unsupported_strides:
        return "unsupported_strides";
    case StatusCode::wrong_memory_space:
        return "wrong_memory_space";
    case StatusCode::unknown_implementation:
        return "unknown_implementation";
    case StatusCode::device_unavailable:
        return "device_unavailable";
    case StatusCode::out_of_memory:
        return "out_of_memory";
    case StatusCode::cuda_error:
        return "cuda_error";
    case StatusCode::internal_error:
        return "internal_error";
    case StatusCode::unsupported_iterations:
        return "unsupported_iterations";
    case StatusCode::bad_parameter:
        return "bad_parameter";
    case StatusCode::unsupported_shape:
        return "unsupported_shape";
    case StatusCode::misaligned_pointer:
        return "misaligned_pointer";
    case StatusCode::opencl_error:
        return "opencl_error";
    }
    return "unknown_status_code";
}

const char *device_name(Device device) {
    switch (device) {
    case Device::automatic:
        return "automatic";
    case Device::cpu:
        return "cpu";
    case Device::cuda:
        return "cuda";
    case Device::opencl:
        return "opencl";
    }
    return "unknown";
}

int64_t TensorView::element_count() const {
    int64_t n = 1;
    for (int64_t extent : shape) n *= extent;
    return n;
}

}  // namespace halcaps

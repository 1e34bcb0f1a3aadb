#include "argument_checks.h"

#include <limits>

namespace halcaps::detail {

namespace {

std::string shape_string(const std::vector<int64_t> &v) {
    std::string s = "[";
    for (size_t d = 0; d < v.size(); d++) s += (d ? ", " : "") + std::to_string(v[d]);
    return s + "]";
}

std::string dims_string(const std::vector<const char *> &dims) {
    std::string s = "[";
    for (size_t d = 0; d < dims.size(); d++) s += std::string(d ? ", " : "") + dims[d];
    return s + "]";
}

const char *space_name(MemorySpace space) { return space == MemorySpace::host ? "host" : "cuda"; }

}  // namespace

void ArgumentChecks::fail(StatusCode code, const std::string &message) {
    if (status_.ok()) status_ = Status{code, op_ + ": " + message};
}

void ArgumentChecks::extent_is(const char *arg, const char *dim, int64_t expected, const std::string &source) {
    if (!status_.ok()) return;
    const int64_t got = extents_.at(dim);
    if (got != expected) {
        fail(StatusCode::extent_mismatch, std::string(arg) + " (" + dim + ") is " + std::to_string(got) + " but " +
                                              source + " = " + std::to_string(expected));
    }
}

void ArgumentChecks::tensor(const char *arg, const TensorView &t, const std::vector<const char *> &dims) {
    if (!status_.ok()) return;
    const std::string name = arg;
    if (t.data == nullptr) {
        return fail(StatusCode::null_pointer, name + " has a null data pointer");
    }
    if (t.shape.size() != dims.size()) {
        return fail(StatusCode::bad_rank, name + " must have rank " + std::to_string(dims.size()) + " " +
                                              dims_string(dims) + ", got rank " + std::to_string(t.shape.size()) + " " +
                                              shape_string(t.shape));
    }
    // Halide indexes with 32-bit integers, so every element must be addressable with one.
    int64_t elements = 1;
    for (size_t d = 0; d < dims.size(); d++) {
        if (t.shape[d] <= 0) {
            return fail(StatusCode::bad_extent, name + " extent " + std::to_string(d) + " (" + dims[d] + ") is " +
                                                    std::to_string(t.shape[d]) + "; extents must be positive");
        }
        if (t.shape[d] > std::numeric_limits<int32_t>::max() / elements) {
            return fail(StatusCode::bad_extent,
                        name + " " + shape_string(t.shape) + " has more than 2^31-1 elements, which is not supported");
        }
        elements *= t.shape[d];
    }
    if (!t.strides.empty()) {
        std::vector<int64_t> dense(dims.size());
        int64_t stride = 1;
        for (size_t d = dims.size(); d-- > 0;) {
            dense[d] = stride;
            stride *= t.shape[d];
        }
        if (t.strides != dense) {
            return fail(StatusCode::unsupported_strides, name + " has strides " + shape_string(t.strides) +
                                                             "; only dense row-major tensors are supported (strides " +
                                                             shape_string(dense) + ")");
        }
    }
    for (size_t d = 0; d < dims.size(); d++) {
        auto found = extents_.find(dims[d]);
        if (found == extents_.end()) {
            extents_[dims[d]] = t.shape[d];
            extent_source_[dims[d]] = name;
        } else if (found->second != t.shape[d]) {
            return fail(StatusCode::extent_mismatch, name + " extent " + std::to_string(d) + " (" + dims[d] + ") is " +
                                                         std::to_string(t.shape[d]) + " but " +
                                                         extent_source_[dims[d]] + " has " + dims[d] + " = " +
                                                         std::to_string(found->second));
        }
    }
    spaces_.emplace_back(name, t.space);
}

Device ArgumentChecks::resolve_device(Device requested) {
    if (!status_.ok() || spaces_.empty()) return requested;
    const auto &[first_name, first_space] = spaces_.front();
    for (const auto &[name, space] : spaces_) {
        if (space != first_space) {
            fail(StatusCode::wrong_memory_space, name + " is in " + space_name(space) + " memory but " + first_name +
                                                     " is in " + space_name(first_space) +
                                                     " memory; all tensors must be in one memory space");
            return requested;
        }
    }
    if (requested == Device::automatic) {
        return first_space == MemorySpace::cuda ? Device::cuda : Device::cpu;
    }
    if (requested == Device::cpu && first_space == MemorySpace::cuda) {
        fail(StatusCode::wrong_memory_space,
             first_name + " is in cuda memory but the cpu device was asked for; pass host tensors or device cuda");
    }
    if (requested == Device::opencl && first_space == MemorySpace::cuda) {
        fail(StatusCode::wrong_memory_space, first_name +
                                                 " is in cuda memory but the opencl device was asked for; it takes "
                                                 "host tensors (Halide copies them to the device and back)");
    }
    return requested;
}

}  // namespace halcaps::detail

// Validation of TensorView arguments, shared by every operator's entry point.
// Checks run in argument order and the first failure wins, so a message
// always names one argument and one problem.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "halcaps/halcaps.h"

namespace halcaps::detail {

class ArgumentChecks {
public:
    explicit ArgumentChecks(std::string op) : op_(std::move(op)) {}

    // Checks one tensor: non-null data, rank == dims.size(), every extent > 0,
    // dense row-major strides, and extents that agree with earlier tensors on
    // dimensions of the same name (e.g. "batch", "in_caps").
    void tensor(const char *arg, const TensorView &t, const std::vector<const char *> &dims);

    // After `arg`'s tensor(): its dimension `dim` (named as in tensor()) must
    // equal `expected`, a scalar argument described by `source`
    // (extent_mismatch otherwise).
    void extent_is(const char *arg, const char *dim, int64_t expected, const std::string &source);

    // After all tensors: every tensor in the same memory space, and the device
    // resolved from `requested` (automatic follows the tensors).
    Device resolve_device(Device requested);

    const Status &status() const { return status_; }
    int64_t extent(const std::string &dim_name) const { return extents_.at(dim_name); }

private:
    void fail(StatusCode code, const std::string &message);

    std::string op_;
    Status status_;
    std::map<std::string, int64_t> extents_;
    std::map<std::string, std::string> extent_source_;  // dim name -> argument that set it
    std::vector<std::pair<std::string, MemorySpace>> spaces_;
};

}  // namespace halcaps::detail

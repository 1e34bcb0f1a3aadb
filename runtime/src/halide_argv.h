// Calling an ahead-of-time compiled Halide pipeline through its `_argv`
// entry point, with the argument array laid out from its `_metadata`.
// The runtime (run_halide) and `halcaps explore` (cli/explore_kernel.cpp)
// both call kernels this way, so a kernel of any arity fits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "HalideRuntime.h"

namespace halcaps::detail {

// A generated pipeline: `<name>_argv(void **args)` and `<name>_metadata()`.
struct HalideFunction {
    int (*argv)(void **args) = nullptr;
    const halide_filter_metadata_t *(*metadata)() = nullptr;
};

// Fills *args for `metadata`'s arguments in their order (Halide's argv
// order): a pointer to *user_context for `__user_context`, a pointer to the
// next of `scalars` for each int32 scalar, and the next of `buffers` (inputs
// then outputs, `input_count` of them inputs) for each buffer. Returns why
// not where the kernel's arguments disagree with what is given: the count of
// scalars, input or output buffers, a scalar that is not int32, a buffer
// that is not float32 or whose rank is not the given one (empty when they
// agree). The pointers stay valid while scalars, buffers and *user_context do.
std::string halide_argv(const halide_filter_metadata_t &metadata, void **user_context,
                        const std::vector<int32_t> &scalars, const std::vector<halide_buffer_t *> &buffers,
                        size_t input_count, std::vector<void *> *args);

}  // namespace halcaps::detail

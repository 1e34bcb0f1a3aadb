// The bench/ study programs' one way to stop on a CUDA error: the failing
// step's name and CUDA's message on stderr, exit status 1. They are
// standalone programs that measure; a failed step leaves nothing to report.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace halcaps::bench {

inline void check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
        std::exit(1);
    }
}

}  // namespace halcaps::bench

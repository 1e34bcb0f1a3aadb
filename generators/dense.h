// Shared by the generators: every tensor crosses the API dense and row-major
// (runtime/ checks this before any call), so say so to Halide: zero-based
// dims and packed strides let it simplify index arithmetic and prove the
// alignment of vector loads.
#pragma once

#include "Halide.h"

namespace halcaps {

template <typename T>
void require_dense(T &buffer) {
    Halide::Expr stride = 1;
    for (int d = 0; d < buffer.dimensions(); d++) {
        buffer.dim(d).set_min(0).set_stride(stride);
        stride = stride * buffer.dim(d).extent();
    }
}

// The capsule convolution's tensors (generators/capsconv*.cpp): dense,
// zero-based, and the two trailing pose dims of extent 4.
template <typename T>
void require_pose_tensor(T &buffer) {
    require_dense(buffer);
    buffer.dim(0).set_extent(4);
    buffer.dim(1).set_extent(4);
}

}  // namespace halcaps

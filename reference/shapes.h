// The shape of capsule prediction, shared by the float64 reference
// (halcaps::reference), the hand-written CUDA (halcaps::cuda_reference) and
// the runtime: one struct, one field order, so that a brace-initialised
// shape means the same everywhere.
#pragma once

#include <cstdint>

namespace halcaps::shapes {

// u [B, I, K], W [I, J, E, K], u_hat and g [B, I, J, E]; all row-major.
struct PredictShape {
    int64_t batch, in_caps, in_dim, out_caps, out_dim;  // B, I, K, J, E

    int64_t u_size() const { return batch * in_caps * in_dim; }
    int64_t W_size() const { return in_caps * out_caps * out_dim * in_dim; }
    int64_t u_hat_size() const { return batch * in_caps * out_caps * out_dim; }
};

}  // namespace halcaps::shapes

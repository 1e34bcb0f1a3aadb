// Whether a pointer may be read or written as vectors of `bytes` (16: a
// float4): the hand-written kernels' vector paths require it and fall back
// to scalar accesses (or refuse) where it does not hold.
#pragma once

#include <cstdint>

namespace halcaps::cuda_reference {

inline bool aligned_to(const void *p, int bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }
inline bool aligned16(const void *p) { return aligned_to(p, 16); }

}  // namespace halcaps::cuda_reference

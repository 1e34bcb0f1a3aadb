// Whether a pointer may be read or written as 16-byte vectors: the
// hand-written kernels' vector paths require it and fall back to scalar
// accesses (or refuse) where it does not hold.
#pragma once

#include <cstdint>

namespace halcaps::cuda_reference {

inline bool aligned16(const void *p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace halcaps::cuda_reference

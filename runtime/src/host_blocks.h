// Halide's host allocations for halcaps' kernels (halide_malloc and
// halide_free), through a cache of large blocks (host_blocks.cpp).
#pragma once

#include <cstddef>

namespace halcaps::detail {

// Installs the cache as the Halide runtime's allocator, once a process;
// called before the first kernel runs.
void install_host_block_cache();

// Frees every held block (release_cached_host_memory), and the bytes held now.
void release_held_host_blocks();
size_t held_host_bytes();

}  // namespace halcaps::detail

// Host allocations of 1 MiB or more that a kernel frees are kept and handed
// to a later request they fit (at most twice its size), up to 256 MiB held
// in all; smaller ones go to the C heap. Without it a kernel's large
// intermediates were mapped and faulted in afresh on every call: the
// training backward's alpha (35 MB at MNIST b128) is above glibc's mmap
// limit. Measured: the pair's backward 78.9-84.6 ms a call with the cache
// against 92.8-112.4 without, MNIST b128, 2 threads, the 2-core Xeon.
#include "host_blocks.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "HalideRuntime.h"
#include "halcaps/halcaps.h"

namespace halcaps::detail {

namespace {

constexpr size_t kAlignment = 128;  // halide_malloc's contract: the widest vector's alignment or more
constexpr size_t kSmallestKept = size_t(1) << 20;
constexpr size_t kMostHeld = size_t(256) << 20;
// Marks a block as this allocator's, in the header just before the pointer
// it returns; a pointer without it is handed to halide_default_free (a guard:
// the install runs at static initialisation, before any kernel).
constexpr uint64_t kMagic = 0x68616c6361707321ull;

struct Header {
    uint64_t magic;
    uint64_t capacity;  // bytes usable from the returned pointer
    void *block;        // what malloc returned
};

Header *header_of(void *p) { return static_cast<Header *>(p) - 1; }

// The pointer handed out from a block malloc returned: past the header,
// aligned up to kAlignment.
void *aligned_in(void *block) {
    const uintptr_t start = reinterpret_cast<uintptr_t>(block) + sizeof(Header);
    return reinterpret_cast<void *>((start + kAlignment - 1) / kAlignment * kAlignment);
}

std::mutex held_mutex;
size_t held_bytes = 0;
// (capacity, block as malloc returned it), free for reuse. Never destroyed,
// and holding the blocks' own addresses, so that a leak checker at exit
// finds every held block reachable.
std::vector<std::pair<size_t, void *>> &held_list() {
    static auto *list = new std::vector<std::pair<size_t, void *>>();
    return *list;
}

// The smallest held block of `bytes` to 2 x `bytes`, taken off the list; null if none.
void *take_held(size_t bytes) {
    std::lock_guard<std::mutex> lock(held_mutex);
    auto &held = held_list();
    size_t best = held.size();
    for (size_t n = 0; n < held.size(); n++) {
        const size_t capacity = held[n].first;
        if (capacity >= bytes && capacity <= 2 * bytes && (best == held.size() || capacity < held[best].first)) {
            best = n;
        }
    }
    if (best == held.size()) return nullptr;
    void *block = held[best].second;
    held_bytes -= held[best].first;
    held.erase(held.begin() + static_cast<std::ptrdiff_t>(best));
    return aligned_in(block);
}

void *allocate(void * /*user_context*/, size_t bytes) {
    if (bytes >= kSmallestKept) {
        if (void *p = take_held(bytes)) return p;
    }
    // malloc and aligning up by hand: aligned_alloc took ~100 ns more a
    // call, and the backward makes ~150 K small allocations a call.
    void *block = std::malloc(bytes + sizeof(Header) + kAlignment);
    if (block == nullptr) return nullptr;
    void *p = aligned_in(block);
    *header_of(p) = {kMagic, bytes, block};
    return p;
}

void release(void *user_context, void *p) {
    if (p == nullptr) return;
    Header *header = header_of(p);
    if (header->magic != kMagic) {
        halide_default_free(user_context, p);
        return;
    }
    if (header->capacity >= kSmallestKept) {
        std::lock_guard<std::mutex> lock(held_mutex);
        if (held_bytes + header->capacity <= kMostHeld) {
            held_list().emplace_back(header->capacity, header->block);
            held_bytes += header->capacity;
            return;
        }
    }
    header->magic = 0;
    std::free(header->block);
}

}  // namespace

void release_held_host_blocks() {
    std::vector<std::pair<size_t, void *>> blocks;
    {
        std::lock_guard<std::mutex> lock(held_mutex);
        blocks.swap(held_list());
        held_bytes = 0;
    }
    for (auto &held_block : blocks) {
        header_of(aligned_in(held_block.second))->magic = 0;
        std::free(held_block.second);
    }
}

size_t held_host_bytes() {
    std::lock_guard<std::mutex> lock(held_mutex);
    return held_bytes;
}

void install_host_block_cache() {
    static std::once_flag installed;
    std::call_once(installed, [] {
        // HALCAPS_HOST_BLOCK_CACHE=0 leaves Halide's default allocator in
        // place (for memory checkers, and to time a kernel without the cache).
        const char *setting = std::getenv("HALCAPS_HOST_BLOCK_CACHE");
        if (setting != nullptr && std::string(setting) == "0") return;
        halide_set_custom_malloc(allocate);
        halide_set_custom_free(release);
    });
}

}  // namespace halcaps::detail

namespace halcaps {

Status release_cached_host_memory() {
    detail::release_held_host_blocks();
    return Status::success();
}

size_t cached_host_memory_bytes() { return detail::held_host_bytes(); }

}  // namespace halcaps

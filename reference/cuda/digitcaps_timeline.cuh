// Per-block timestamps of version 3's forward kernels (the pass kernels of
// digitcaps_tensor_cores.cu and the squash kernel of digitcaps_shared.cuh),
// for the timeline probe (bench/studies/digitcaps_timeline.cu): when each block
// entered, when the kernel ahead of it let it go on, when its first step's
// copies had landed, when its steps were done and when it ended, read from
// the GPU's global nanosecond timer.
//
// Only the probe's own build of digitcaps_tensor_cores.cu defines
// HALCAPS_DIGITCAPS_TIMELINE. Everywhere else a BlockClock holds nothing and
// its calls compile to nothing: the library's kernels are the probe's
// without the marks. The probe links its build of that file ahead of the
// library, so the linker leaves the library's copy of it out. The squash
// kernel is also instantiated by other files of the library that the probe
// links; in the probe's build it lives in the inline namespace `timed`
// (HALCAPS_TIMELINE_NAMESPACE), so that its symbols do not merge with
// theirs.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#ifdef HALCAPS_DIGITCAPS_TIMELINE
#define HALCAPS_TIMELINE_NAMESPACE timed
#else
#define HALCAPS_TIMELINE_NAMESPACE plain
#endif

namespace halcaps::cuda_reference::timeline {

// Which kernel a record is of.
enum Kernel : uint32_t { kFirstPassKernel = 0, kAgreementPassKernel = 1, kOtherPassKernel = 2, kSquashKernel = 3 };
// The moments a block records; a squash block has no steps, and records
// kFirstStep and kStepsDone as the moment its partial sums were added.
enum Mark : int { kEntered = 0, kWaited, kFirstStep, kStepsDone, kEnded, kMarks };

struct BlockRecord {
    uint64_t at[kMarks];  // ns, the GPU's global timer
    uint32_t kernel;      // Kernel
    uint32_t tag;         // squash: 0 in the first iteration, 2 in the last, 1 between; passes: 0
    uint32_t sm;          // the SM the block ran on
    uint32_t block;       // the block's linear index in its grid
};

#ifdef HALCAPS_DIGITCAPS_TIMELINE
// Where the blocks write their records (set by digitcaps_tensor_timeline in
// digitcaps_tensor_cores.cu; static, so that each file has its own and only
// that file's count): one slot a block, taken in the order the blocks
// enter, none written past `capacity`.
static __device__ BlockRecord *timeline_records = nullptr;
static __device__ unsigned timeline_capacity = 0;
static __device__ unsigned timeline_used = 0;  // slots taken
#endif

// One block's marks, kept by its thread (0, 0, 0). The block takes its
// record's slot when it enters, so that the atomic's round trip passes
// under the block's work: taken as the block ended, it held every block
// about a microsecond longer, and with them the kernel after it (run 1 of
// docs/history.md: nvidia-h200-timeline).
struct BlockClock {
#ifdef HALCAPS_DIGITCAPS_TIMELINE
    uint64_t at[kMarks] = {};
    unsigned slot = 0;
    __device__ static bool keeper() { return threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0; }
    __device__ void mark(Mark m) {
        if (!keeper()) return;
        uint64_t now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        at[m] = now;
        if (m == kEntered && timeline_records != nullptr) slot = atomicAdd(&timeline_used, 1u);
    }
    // Marks kEnded and writes the record.
    __device__ void publish(Kernel kernel, uint32_t tag) {
        mark(kEnded);
        if (!keeper() || timeline_records == nullptr || slot >= timeline_capacity) return;
        BlockRecord r;
        for (int m = 0; m < kMarks; m++) r.at[m] = at[m];
        r.kernel = kernel;
        r.tag = tag;
        uint32_t sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        r.sm = sm;
        r.block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
        timeline_records[slot] = r;
    }
#else
    __device__ void mark(Mark) {}
    __device__ void publish(Kernel, uint32_t) {}
#endif
};

}  // namespace halcaps::cuda_reference::timeline

#ifdef HALCAPS_DIGITCAPS_TIMELINE
namespace halcaps::cuda_reference {
// Points version 3's instrumented kernels at `records` (capacity of them; null:
// none kept) and empties it: the blocks launched after it write their records
// there. Defined in the probe's build of digitcaps_tensor_cores.cu.
cudaError_t digitcaps_tensor_timeline(timeline::BlockRecord *records, unsigned capacity);
// The records the blocks have written since, or tried to (more than the
// capacity: some were dropped).
cudaError_t digitcaps_tensor_timeline_used(unsigned *used);
}  // namespace halcaps::cuda_reference
#endif

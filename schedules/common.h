// Small helpers shared by the schedule files.
#pragma once

#include <string>
#include <vector>

#include "Halide.h"

namespace halcaps::schedule_util {

// A launch gets at most this much shared memory unless the kernel opts in to
// more (cuFuncSetAttribute), which Halide's CUDA runtime does not do.
constexpr int kDefaultSharedBytes = 48 * 1024;

// A launch gets at most this many threads a block.
constexpr int kMaxBlockThreads = 1024;

// Stops generation with a clear message when a point of a schedule space
// asks for a block past the launch limit.
inline void check_threads(const std::string &op, const std::string &name, int threads) {
    if (threads > kMaxBlockThreads) {
        throw Halide::CompileError(op + ": space point '" + name + "' asks for " + std::to_string(threads) +
                                   " threads a block; at most " + std::to_string(kMaxBlockThreads));
    }
}

// One named schedule of an operator: the kind of target it is written for
// and the function that applies it to the operator's stages. Each schedule
// file keeps one table of these per operator; adding a schedule is its
// function plus one row (and its line in schedules/kernels.cmake).
enum class ScheduleTarget { cpu, gpu };

template <typename Stages>
struct ScheduleRow {
    const char *name;
    ScheduleTarget target;
    void (*apply)(const Halide::Target &target, Stages &stages);
};

template <typename Stages>
using ScheduleTable = std::vector<ScheduleRow<Stages>>;

// Applies the row of `table` named `name` for the target's kind (GPU when it
// has a GPU feature), or stops generation with a message listing the
// table's names for that kind.
template <typename Stages>
void apply_schedule(const std::string &op, const ScheduleTable<Stages> &table, const std::string &name,
                    const Halide::Target &target, Stages &stages) {
    const ScheduleTarget kind = target.has_gpu_feature() ? ScheduleTarget::gpu : ScheduleTarget::cpu;
    std::string known;
    for (const ScheduleRow<Stages> &row : table) {
        if (row.target != kind) continue;
        if (row.name == name) return row.apply(target, stages);
        known += (known.empty() ? "" : ", ") + std::string(row.name);
    }
    throw Halide::CompileError(op + ": no schedule named '" + name + "' for target " + target.to_string() + "; known " +
                               (kind == ScheduleTarget::gpu ? "GPU" : "CPU") +
                               " schedules: " + (known.empty() ? "none" : known));
}

// The blog's kernels: one GPU thread per output element, 1024 threads a
// block (TensorFlow 1.x's launch configuration), no reuse between threads.
// The blog flattens the whole output into one index; here the two innermost
// dimensions are fused and tiled 64 wide, the third tiled 16 wide (Halide's
// bounds inference loses the per-thread point through a deeper fusion of
// run-time extents), and any fourth dimension is a block dimension.
inline void one_thread_per_output(Halide::Func output, Halide::Func accum) {
    using namespace Halide;
    std::vector<Var> dims = output.args();
    Var inner("inner"), inner_block("inner_block"), inner_thread("inner_thread");
    Var middle_block("middle_block"), middle_thread("middle_thread");
    output.fuse(dims[0], dims[1], inner)
        .gpu_tile(inner, dims[2], inner_block, middle_block, inner_thread, middle_thread, 64, 16,
                  TailStrategy::GuardWithIf);
    if (dims.size() == 4) output.gpu_blocks(dims[3]);
    // Each thread's accumulator is one float in a register.
    accum.compute_at(output, inner_thread).store_in(MemoryType::Register);
    for (const Var &v : accum.args()) accum.bound_extent(v, 1);
}

}  // namespace halcaps::schedule_util

// Small helpers shared by the schedule files.
#pragma once

#include <string>
#include <vector>

#include "Halide.h"

namespace halcaps::schedule_util {

// Stops generation with a clear message when a schedule name is unknown or
// when a GPU schedule is asked for on a target without CUDA (or vice versa).
inline void check_schedule(const std::string &op, const std::string &name, const Halide::Target &target,
                           const std::vector<std::string> &cpu_names,
                           const std::vector<std::string> &gpu_names) {
    auto join = [](const std::vector<std::string> &names) {
        std::string out;
        for (const auto &n : names) out += (out.empty() ? "" : ", ") + n;
        return out;
    };
    const auto &names = target.has_gpu_feature() ? gpu_names : cpu_names;
    for (const auto &n : names) {
        if (n == name) return;
    }
    throw Halide::CompileError(op + ": no schedule named '" + name + "' for target " + target.to_string() +
                               "; known " + (target.has_gpu_feature() ? "GPU" : "CPU") +
                               " schedules: " + join(names));
}

// The blog's kernels: one GPU thread per output element, 1024 threads a
// block (TensorFlow 1.x's launch configuration). Halide has no grid-stride
// loop, so the grid simply covers every output once.
inline void one_thread_per_output(Halide::Func output, Halide::Func accum) {
    using namespace Halide;
    std::vector<Var> dims = output.args();
    Var fused = dims[0];
    for (size_t d = 1; d < dims.size(); d++) {
        Var next(fused.name() + "_" + dims[d].name());
        output.fuse(fused, dims[d], next);
        fused = next;
    }
    Var block("block"), thread("thread");
    output.gpu_tile(fused, block, thread, 1024, TailStrategy::GuardWithIf);
    accum.compute_at(output, thread);
}

}  // namespace halcaps::schedule_util

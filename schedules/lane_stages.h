// The CPU schedule pieces of a pass vectorised across input capsules, a
// vector of them (a chunk) at a time: shared by the fused layer's
// cpu_lanes (schedules/digitcaps_fused_schedules.cpp) and cpu_phases' alpha
// phase (schedules/digitcaps_training_schedules.cpp). Layouts as in
// generators/digitcaps_stages.h: u (k, i, b), b0 (j, i), W (k, e, j, i),
// u_hat (e, j, i, b).
#pragma once

#include <vector>

#include "Halide.h"

namespace halcaps::schedule_util {

// u and b0 (or wrappers of them) copied once a call to i-innermost storage,
// so that a chunk's reads of them are vector loads.
inline void u_and_b0_i_innermost(Halide::Func u, Halide::Func b0, int vec) {
    using Halide::TailStrategy;
    std::vector<Halide::Var> x = u.args();  // (k, i, b)
    u.compute_root()
        .reorder_storage(x[1], x[0], x[2])
        .reorder(x[1], x[0], x[2])
        .parallel(x[2])
        .vectorize(x[1], vec, TailStrategy::GuardWithIf);
    std::vector<Halide::Var> y = b0.args();  // (j, i)
    b0.compute_root().reorder_storage(y[1], y[0]).reorder(y[1], y[0]).vectorize(y[1], vec, TailStrategy::GuardWithIf);
}

// A chunk of u_hat = sum over k of W u for `group_size` batch elements,
// i-innermost, as a wrapper (u_hat.in()) computed at `group`; its W rows
// gathered to i-innermost once at `chunk` (80 KB at MNIST, from their
// contiguous block of W; a whole-W transpose put each of a chunk's vectors on
// its own page). Each step sums out_tile e rows of the group over k in
// registers: 4 x group_size accumulators fit AVX-512's 32 vector registers,
// AVX2's 16 take 2 x group_size. Both buffers are allocated once at
// `per_tile` at their one-chunk sizes.
inline void u_hat_chunk_in_registers(Halide::Func u_hat, Halide::Func W, const Halide::Var &e, const Halide::Var &j,
                                     const Halide::Var &i, const Halide::Var &b, const Halide::RDom &rk,
                                     const Halide::LoopLevel &chunk, const Halide::LoopLevel &group,
                                     const Halide::LoopLevel &per_tile, int vec, int group_size) {
    using Halide::TailStrategy;
    using Halide::Var;
    const int out_tile = vec >= 16 ? 4 : 2;
    std::vector<Var> w = W.args();  // (k, e, j, i)
    W.in(u_hat)
        .compute_at(chunk)
        .hoist_storage(per_tile)
        .bound_storage(w[3], vec)
        .reorder_storage(w[3], w[0], w[1], w[2])
        .reorder(w[3], w[0], w[1], w[2])
        .vectorize(w[3], vec, TailStrategy::GuardWithIf);
    Var ubo("ubo"), ubi("ubi"), ueo("ueo"), uei("uei");
    Halide::Func tile = u_hat.in();
    tile.compute_at(group)
        .hoist_storage(per_tile)
        .bound_storage(i, vec)
        .bound_storage(b, group_size)
        .reorder_storage(i, e, j, b)
        .split(b, ubo, ubi, group_size, TailStrategy::GuardWithIf)
        .split(e, ueo, uei, out_tile, TailStrategy::GuardWithIf)
        .reorder(i, ubi, uei, ueo, j, ubo)
        .vectorize(i, vec, TailStrategy::GuardWithIf)
        .unroll(ubi)
        .unroll(uei);
    u_hat.compute_at(tile, ueo)
        .bound_storage(i, vec)
        .bound_storage(b, group_size)
        .bound_storage(e, out_tile)
        .reorder_storage(i, e, j, b)
        .vectorize(i)
        .unroll(b, group_size, TailStrategy::GuardWithIf)
        .unroll(e, out_tile, TailStrategy::GuardWithIf);
    u_hat.update()
        .reorder(i, b, e, rk)
        .vectorize(i)
        .unroll(b, group_size, TailStrategy::GuardWithIf)
        .unroll(e, out_tile, TailStrategy::GuardWithIf);
}

// A batch element's stage over a chunk, (i, b) or (j, i, b), computed at
// `at` as i vectors, (j, i, b) stored i-innermost; allocated once at
// `per_tile` at its one-chunk size (a dynamically sized stack buffer went to
// the heap: about 100 K allocations a call).
inline void chunk_stage(Halide::Func f, const Halide::Var &i, const Halide::Var &j, const Halide::Var &b,
                        const Halide::LoopLevel &at, const Halide::LoopLevel &per_tile, int vec) {
    f.compute_at(at).hoist_storage(per_tile).bound_storage(i, vec).bound_storage(b, 1);
    if (f.dimensions() == 3) f.reorder_storage(i, j, b).reorder(i, j, b);
    f.vectorize(i, vec, Halide::TailStrategy::GuardWithIf);
}

// A chunk stage's update over `r` (a sum or max over j or e) as i vectors.
inline void update_over_i(Halide::Func f, const Halide::Var &i, const Halide::RDom &r, int vec) {
    f.update().reorder(i, r).vectorize(i, vec, Halide::TailStrategy::GuardWithIf);
}

}  // namespace halcaps::schedule_util

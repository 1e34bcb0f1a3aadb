// Schedules of the fused DigitCaps layer (generator digitcaps_fused in
// generators/digitcaps.cpp; stages in digitcaps_stages.h,
// FusedDigitCapsStages): one pass per routing iteration, each pass
// recomputing its own u_hat, so nothing of size B·I·J·E is ever stored.
//
// Two GPU designs: `fused_split_all_vectors` (split_gpu below; CapsNet's
// in_dim 8 and out_dim 16 only, the CUDA default where it applies) and
// `fused` and its variant, described here.
//
// fused, per routing iteration t, two kernels:
//   pass kernel   blocks over (input-capsule chunk, batch tile). For each
//                 input capsule i of its chunk in turn, the block computes
//                 u_hat[:, :, i, batch tile] (each thread its e values for the
//                 tile's batch elements, accumulated over k in registers,
//                 then copied to shared memory), the agreement with v[0..t-1],
//                 the softmax over j and adds c·u_hat into the block's partial
//                 sums of s (shared memory). W is read once per batch tile,
//                 not once per batch element. The partial sums go to a global
//                 buffer of E·J·B·ceil(I / in_chunk) floats (2.9 MB at MNIST
//                 b128 with in_chunk 32).
//   squash kernel one block per batch element: s = sum of the partials,
//                 squash, v[t] (the output for the last iteration).
// So 2r kernels for r iterations (stage_per_kernel: 8r + 1), and r
// predictions' worth of FMAs (stage_per_kernel recomputes nothing but stores
// and re-reads u_hat 2r - 1 times).
//
// Threads of a block: (e / e_per_thread) × J (16 × 10 at MNIST); a block
// of more than 1024 threads fails to launch with a CUDA error status (out_dim
// · out_caps / e_per_thread > 1024, far beyond CapsNet shapes).
#include <algorithm>
#include <map>

#include "common.h"
#include "digitcaps_schedules.h"
#include "lane_stages.h"
#include "space_knobs.h"

namespace halcaps {

using namespace Halide;
using schedule_util::apply_schedule;
using schedule_util::kDefaultSharedBytes;
using schedule_util::ScheduleTable;
using schedule_util::ScheduleTarget;

namespace {

// The knobs of the pass kernel; the named GPU schedules differ only in these.
struct FusedGpuTiling {
    int batch_tile;    // batch elements per block, unrolled in each thread's registers
    int in_chunk;      // input capsules per block (the chunk of the sum over i, rfactor)
    int e_per_thread;  // out_dim values per thread, unrolled (threads along e: 16 / e_per_thread at E = 16)
};

// The knobs of fused_split_all_vectors (split_gpu below).
struct SplitGpuTiling {
    int in_chunk;        // partial-sum kernel: input capsules per block (the chunk of the sum over i)
    int logits_i_tile;   // logits kernel: input capsules per block
    int partial_groups;  // the squash kernel adds the chunks' partial sums in up to this many groups in
                         // parallel, as many as fit its block of 1024 threads (out_dim x out_caps x groups)
    int batch_tile;      // partial-sum kernel: batch elements a thread (a multiple of 16)
};

// A pass's stages over one batch element on the CPU, computed at
// `per_batch`: u_hat (W u, unless routing_fused reads its input inline), the
// agreement, the softmax's max and sum, and c.
void pass_stages_at(FusedPass &p, const FusedDigitCapsStages &f, const LoopLevel &per_batch, int vec) {
    Var eo("eo"), ei("ei");
    if (p.u_hat.has_update_definition()) {
        p.u_hat.compute_at(per_batch).vectorize(f.e, vec, TailStrategy::GuardWithIf);
        p.u_hat.update()
            .split(f.e, eo, ei, vec, TailStrategy::GuardWithIf)
            .reorder(ei, f.rk, eo, f.j, f.i)
            .vectorize(ei);
    }
    if (p.agreement.defined()) {
        p.agreement.compute_at(per_batch);
        p.agreement.update().atomic().vectorize(f.re, vec, TailStrategy::GuardWithIf);
    }
    p.logit_max.compute_at(per_batch);
    p.exp_sum.compute_at(per_batch);
    p.c.compute_at(per_batch).vectorize(f.j, vec, TailStrategy::GuardWithIf);
}

// fused_cpu for digitcaps_fused_with_s: its second output, routing_s, reads
// every pass's s, so each s is computed whole (parallel over batch
// elements, its pass's u_hat, logits and c inside the loop over one batch
// element as in fused_cpu) and each v whole after it; routing_s copies the
// s's. Not timed: it exists so that the CPU serves digitcaps_with_s.
void fused_cpu_with_s(const Target &target, FusedDigitCapsStages &f) {
    const int vec = target.natural_vector_size<float>();
    const Var e = f.e, j = f.j, b = f.b;
    for (size_t t = 0; t < f.passes.size(); t++) {
        FusedPass &p = f.passes[t];
        Var eo("eo"), ei("ei");
        p.s.compute_root().parallel(b).vectorize(e, vec, TailStrategy::GuardWithIf);
        p.s.update()
            .split(e, eo, ei, vec, TailStrategy::GuardWithIf)
            .reorder(ei, eo, j, f.ri, b)
            .vectorize(ei)
            .parallel(b);
        pass_stages_at(p, f, LoopLevel(p.s, b), vec);
        Func v_t = t + 1 < f.passes.size() ? p.squash.v : f.v;
        if (t + 1 < f.passes.size()) v_t.compute_root();
        v_t.parallel(b).vectorize(e, vec, TailStrategy::GuardWithIf);
        p.squash.max_abs.compute_at(v_t, b);
        p.squash.norm2_scaled.compute_at(v_t, b);
    }
    f.routing_s.parallel(f.t).vectorize(e, vec, TailStrategy::GuardWithIf);
}

// fused_cpu: exists to check the fused algorithm against the reference on
// machines without a GPU (CI); not tuned. Parallel over batch elements (the
// routing of one batch element never reads another's data), every stage of
// every pass computed per batch element, each pass's u_hat slice (737 KB at
// MNIST) its own L2-resident tile.
// Measured: 112.8 ms at MNIST b128, 3 iterations, on the 2-core AMD EPYC
// build machine (cpu: 24.1).
void fused_cpu(const Target &target, FusedDigitCapsStages &f) {
    if (f.routing_s.defined()) return fused_cpu_with_s(target, f);
    const int vec = target.natural_vector_size<float>();
    const Var e = f.e, j = f.j;
    f.v.parallel(f.b).vectorize(e, vec, TailStrategy::GuardWithIf);
    const LoopLevel per_batch(f.v, f.b);
    for (size_t t = 0; t < f.passes.size(); t++) {
        FusedPass &p = f.passes[t];
        Var eo("eo"), ei("ei");
        pass_stages_at(p, f, per_batch, vec);
        p.s.compute_at(per_batch).vectorize(e, vec, TailStrategy::GuardWithIf);
        p.s.update().split(e, eo, ei, vec, TailStrategy::GuardWithIf).reorder(ei, eo, j, f.ri).vectorize(ei);
        p.squash.max_abs.compute_at(per_batch);
        p.squash.norm2_scaled.compute_at(per_batch);
        if (t + 1 < f.passes.size()) p.squash.v.compute_at(per_batch).vectorize(e, vec, TailStrategy::GuardWithIf);
    }
}

// cpu_lanes: every stage of a pass vectorised across input capsules, a
// vector of them (a chunk) at a time, so that no stage reduces across a
// vector's lanes: the chunk's u_hat, agreement, softmax over j and c are each
// an i vector per (e, j) or j, and s is summed into one partial sum per lane
// (rfactor) that is reduced across lanes once per batch element and pass.
// A batch tile's pass walks the chunks: for each chunk the tile's W rows
// gathered to i-innermost, then each group of kLanesGroup batch elements
// computes its u_hat chunk in registers (schedules/lane_stages.h), then each
// batch element of the group its agreement, softmax and partial sums. u_hat
// is recomputed each pass (r predictions, no B·I·J·E store). Parallel over
// batch tiles. Built in the first-pass-as-GEMM form, pass 0 is a matrix
// product instead (first_pass_as_gemm below).
// Measured: 21.1 ms at MNIST b128, 3 iterations, on the 2-core Xeon (AVX-512)
// build machine (`cpu` 30.4 in the same run).
constexpr int kLanesBatchTile = 64, kLanesGroup = 4;

// Pass 0 in the first-pass-as-GEMM form (FusedPass::weighted_W): s = c W
// times u over (k, i) as a blocked matrix product. Each thread takes a batch
// tile; for each chunk of kGemmChunk input capsules it computes the chunk's
// c W (e-innermost, 327 KB at MNIST, L2-resident), then sums it into tiles
// of kGemmJ out_caps x kGemmB batch elements, each an out_dim vector, in
// registers (an rfactor over the chunks: one read and write of s per chunk
// and tile). c is computed once, for b = 0 only.
constexpr int kGemmChunk = 64, kGemmJ = 5, kGemmB = 4;

void first_pass_as_gemm(FusedPass &p, const FusedDigitCapsStages &f, int vec) {
    const Var e = f.e, j = f.j, b = f.b;
    p.logit_max.compute_root();
    p.exp_sum.compute_root();
    p.c.compute_root();
    Var eo("eo"), ei("ei"), jo("jo"), ji("ji"), bm("bm"), bt("bt"), io("io");
    RVar rk = f.r_ki.x, rio("rio"), rii("rii");
    p.s.compute_root().vectorize(e, vec, TailStrategy::GuardWithIf);
    Func chunk_sums = p.s.update().split(f.r_ki.y, rio, rii, kGemmChunk, TailStrategy::GuardWithIf).rfactor(rio, io);
    p.s.update()
        .split(e, eo, ei, vec, TailStrategy::GuardWithIf)
        .split(j, jo, ji, kGemmJ, TailStrategy::GuardWithIf)
        .split(b, bm, bt, kGemmB, TailStrategy::GuardWithIf)
        .reorder(ei, ji, bt, eo, bm, rio, jo)
        .vectorize(ei)
        .unroll(ji)
        .unroll(bt)
        .parallel(jo);
    chunk_sums.compute_at(p.s, eo)
        .bound_storage(e, vec)
        .bound_storage(j, kGemmJ)
        .bound_storage(b, kGemmB)
        .vectorize(e, vec, TailStrategy::GuardWithIf)
        .unroll(j, kGemmJ, TailStrategy::GuardWithIf)
        .unroll(b, kGemmB, TailStrategy::GuardWithIf);
    chunk_sums.update()
        .reorder(e, j, b, rk, rii)
        .vectorize(e, vec, TailStrategy::GuardWithIf)
        .unroll(j, kGemmJ, TailStrategy::GuardWithIf)
        .unroll(b, kGemmB, TailStrategy::GuardWithIf);
    std::vector<Var> w = p.weighted_W.args();  // (k, e, j, i)
    p.weighted_W.compute_at(p.s, rio)
        .reorder_storage(w[1], w[2], w[0], w[3])
        .reorder(w[1], w[0], w[2], w[3])
        .vectorize(w[1], vec, TailStrategy::GuardWithIf);
    // At in_dim 8, k unrolled: its 8 strided reads of W's rows become dense loads and shuffles.
    p.weighted_W.specialize(f.rk.x.extent() == 8).unroll(w[0]);
}

// One pass of cpu_lanes over input-capsule chunks (see above).
void lanes_pass(FusedPass &p, const FusedDigitCapsStages &f, int vec) {
    const Var e = f.e, j = f.j, i = f.i, b = f.b;
    Var ii("ii"), bo("bo"), bi("bi"), bg("bg"), bl("bl");
    RVar rio("rio"), rii("rii");
    p.s.compute_root().vectorize(e, vec, TailStrategy::GuardWithIf);
    Func lanes = p.s.update().split(f.ri, rio, rii, vec, TailStrategy::GuardWithIf).rfactor(rii, ii);
    p.s.update().reorder(rii, e, j, b).split(b, bo, bi, kLanesBatchTile, TailStrategy::GuardWithIf).parallel(bo);
    lanes.compute_at(p.s, bo).reorder_storage(ii, e, j, b).reorder(ii, e, j, b).vectorize(ii);
    lanes.update()
        .split(b, bg, bl, kLanesGroup, TailStrategy::GuardWithIf)
        .reorder(ii, e, j, bl, bg, rio)
        .vectorize(ii);
    const LoopLevel per_b(lanes, bl), group(lanes, bg), chunk(lanes, rio), per_tile(p.s, bo);
    if (p.u_hat.has_update_definition()) {
        schedule_util::u_hat_chunk_in_registers(p.u_hat, f.W, e, j, i, b, f.rk, chunk, group, per_tile, vec,
                                                kLanesGroup);
    }
    if (p.agreement.defined()) {
        p.v_sum.compute_root().vectorize(e, vec, TailStrategy::GuardWithIf);
        schedule_util::chunk_stage(p.agreement, i, j, b, per_b, per_tile, vec);
        p.agreement.update().reorder(i, f.re, j).vectorize(i, vec, TailStrategy::GuardWithIf);
    }
    for (Func m : {p.logit_max, p.exp_sum}) {
        schedule_util::chunk_stage(m, i, j, b, per_b, per_tile, vec);
        schedule_util::update_over_i(m, i, f.rj, vec);
    }
    schedule_util::chunk_stage(p.c, i, j, b, per_b, per_tile, vec);
}

void cpu_lanes(const Target &target, FusedDigitCapsStages &f) {
    const int vec = target.natural_vector_size<float>();
    const Var e = f.e, b = f.b;
    schedule_util::u_and_b0_i_innermost(f.u, f.b0, vec);
    for (size_t t = 0; t < f.passes.size(); t++) {
        FusedPass &p = f.passes[t];
        if (p.weighted_W.defined()) {
            first_pass_as_gemm(p, f, vec);
        } else {
            lanes_pass(p, f, vec);
        }
        const bool last = t + 1 == f.passes.size();
        Func v_t = last ? f.v : p.squash.v;
        if (!last) v_t.compute_root();
        v_t.parallel(b).vectorize(e, vec, TailStrategy::GuardWithIf);
        p.squash.max_abs.compute_at(v_t, b);
        p.squash.norm2_scaled.compute_at(v_t, b);
    }
    if (f.routing_s.defined()) f.routing_s.parallel(f.t).vectorize(f.e, vec, TailStrategy::GuardWithIf);
}

// Splits `b` of a stage computed inside a block by the batch tile, unrolled
// (the tile's batch elements are each thread's registers), and `e` into
// threads of e_per_thread values each; leaves the order to the caller.
void per_thread_tile(Stage s, const Var &e, const Var &b, const Var &et, const Var &ei, const Var &bx, const Var &bl,
                     const FusedGpuTiling &tile) {
    s.split(b, bx, bl, tile.batch_tile, TailStrategy::GuardWithIf)
        .split(e, et, ei, tile.e_per_thread, TailStrategy::GuardWithIf)
        .unroll(bl)
        .unroll(ei);
}

// The (j, batch element) stages of a pass (agreement, softmax): threads over
// batch elements (as many as the e threads, the rest of the tile unrolled)
// and j.
void per_j_and_batch(Stage s, const Var &j, const Var &b, const Var &i, const FusedGpuTiling &tile,
                     const std::vector<VarOrRVar> &inner = {}) {
    const int b_threads = std::max(1, std::min(tile.batch_tile, 16 / tile.e_per_thread));
    Var bx("bx"), bl("bl"), bt("bt"), bu("bu");
    s.split(b, bx, bl, tile.batch_tile, TailStrategy::GuardWithIf)
        .split(bl, bu, bt, b_threads, TailStrategy::GuardWithIf);
    std::vector<VarOrRVar> order = inner;
    for (const VarOrRVar &v : std::vector<VarOrRVar>{bu, bt, j, i, bx}) order.push_back(v);
    s.reorder(order).unroll(bu).gpu_threads(bt, j);
}

// Pass t's squash kernel, one block per batch element, threads over (e, j):
// s = the sum of the pass's partial sums, squash, v[t] (the output after
// the last pass). `v_sum_out`: before the last pass the kernel stores the
// next pass's v_sum (v_sum + v[t]) instead of v[t], which only that reads,
// and its own kernel goes.
// Returns the loop over the blocks of the kernel that sums s (the squash
// kernel's, or digitcaps_fused_with_s's s kernel), where split_gpu's
// group sums are computed.
LoopLevel squash_kernel(FusedDigitCapsStages &f, size_t t, bool v_sum_out = false) {
    const Var e = f.e, j = f.j, b = f.b;
    FusedPass &p = f.passes[t];
    const bool last = t + 1 == f.passes.size();
    Func out = last ? f.v : (v_sum_out ? f.passes[t + 1].v_sum : p.squash.v);
    if (!last) out.compute_root();
    out.reorder(e, j, b).gpu_blocks(b).gpu_threads(e, j);
    // s's sum (over the partial sums' groups in fused_split_all_vectors) in a register
    // of its thread, then copied once into the block's shared row: summed in
    // shared memory, each add was a load and a store there, and the global
    // loads could not be issued together.
    Func s_shared;
    LoopLevel s_block(out, b);
    if (f.routing_s.defined()) {
        // digitcaps_fused_with_s: routing_s reads s too, so s is summed
        // into global memory by a kernel of its own (a thread per (e, j,
        // b)), which the squash kernel copies into shared memory. (A clone
        // of s for routing_s, clone_in, kept reading the original in its
        // update, and Halide refused the original's location.)
        Func s_root = p.s.in();
        s_root.compute_root().reorder(e, j, b).gpu_blocks(b).gpu_threads(e, j);
        p.s.compute_at(s_root, e).store_in(MemoryType::Register);
        s_block = LoopLevel(s_root, b);
        s_shared = s_root.in({p.squash.max_abs, p.squash.norm2_scaled, p.squash.v});
        s_shared.compute_at(out, b).gpu_threads(e, j);
    } else {
        s_shared = p.s.in();
        s_shared.compute_at(out, b).gpu_threads(e, j);
        p.s.compute_at(s_shared, e).store_in(MemoryType::Register);
    }
    // Each (e, j) thread computes its row's max and norm itself, reading
    // s's row from shared memory: out_dim-fold redundant, but without the
    // four barriers and the serial walks of one thread per j.
    for (Func q : {p.squash.max_abs, p.squash.norm2_scaled}) {
        RVar eo("sq_eo"), ei("sq_ei");
        q.compute_at(out, e).store_in(MemoryType::Register);
        q.update().split(f.re.x, eo, ei, 4, TailStrategy::GuardWithIf).unroll(ei);
    }
    return s_block;
}

// digitcaps_fused_with_s's second output: one kernel after the passes, a
// block per (batch element, iteration), a thread per (e, j), copying each
// pass's s from global memory (squash_kernel); s is summed into global
// memory by a kernel a pass.
// Measured: fused_split_all_vectors with s 170.2 us at MNIST b128, 3
// iterations, on an H200 (without s: 160.3).
void routing_s_kernel(FusedDigitCapsStages &f) {
    if (!f.routing_s.defined()) return;
    f.routing_s.reorder(f.e, f.j, f.b, f.t).gpu_blocks(f.b, f.t).gpu_threads(f.e, f.j);
}

void fused_gpu(const FusedGpuTiling &tile, FusedDigitCapsStages &f) {
    const Var e = f.e, j = f.j, i = f.i, b = f.b;
    const size_t n = f.passes.size();
    for (size_t t = 0; t < n; t++) {
        FusedPass &p = f.passes[t];
        const std::string tag = std::to_string(t);

        // --- pass kernel: partial sums of s over chunks of input capsules.
        RVar rio("rio" + tag), rii("rii" + tag);
        Var io("io" + tag);
        Func part = p.s.update().split(f.ri.x, rio, rii, tile.in_chunk).rfactor(rio, io);
        Func part_out = part.in();
        {
            Var et("et"), ei("ei"), bx("bo"), bl("bl");
            per_thread_tile(part_out, e, b, et, ei, bx, bl, tile);
            part_out.compute_root().reorder(bl, ei, et, j, bx, io).gpu_blocks(bx, io).gpu_threads(et, j);
            // The block's shared memory (below: partial sums and u_hat,
            // E·J floats a batch element each; the agreement and c, J
            // each) grows with out_dim and out_caps. Past the launch limit
            // the pass reports halide_error_code_specialize_fail (the
            // runtime's unsupported_shape) before it launches, instead of
            // failing to launch (a batch tile of 16 at wide_b32: 72 KB).
            const Expr E = f.re.x.extent(), J = f.rj.x.extent();
            const Expr shared_bytes = 4 * tile.batch_tile * J * (2 * E + (p.agreement.defined() ? 1 : 0) + 1);
            part_out.specialize(shared_bytes <= kDefaultSharedBytes);
            part_out.specialize_fail(
                "the pass kernel's partial sums and u_hat for this out_dim and out_caps need "
                "more than 48 KB of shared memory");
        }
        const LoopLevel block(part_out, Var("bo"));
        {
            // The block's partial sums, in shared memory; each thread adds
            // its (e, j) entries for the tile's batch elements per capsule.
            // Not in registers: store_in(Register) here fails to compile
            // (the block's E x J extent is not a constant; Halide asks for
            // bound_extent, which would fix out_dim and out_caps).
            Var et("et"), ei("ei"), bx("bx"), bl("bl");
            part.compute_at(block);
            per_thread_tile(part, e, b, et, ei, bx, bl, tile);
            part.reorder(bl, ei, et, j, bx, io).gpu_threads(et, j);
            per_thread_tile(part.update(), e, b, et, ei, bx, bl, tile);
            part.update().reorder(bl, ei, et, j, rii, bx, io).gpu_threads(et, j);
        }
        const LoopLevel per_capsule(part, rii);
        {
            // u_hat of one input capsule for the batch tile: computed in
            // registers by the thread that owns (e, j), then shared
            // (routing_fused: loaded from the input u_hat into shared memory).
            Func u_hat_shared = p.u_hat.in();
            Var et("et"), ei("ei"), bx("bx"), bl("bl");
            u_hat_shared.compute_at(per_capsule);
            per_thread_tile(u_hat_shared, e, b, et, ei, bx, bl, tile);
            u_hat_shared.reorder(bl, ei, et, j, i, bx).gpu_threads(et, j);
            if (p.u_hat.has_update_definition()) {
                p.u_hat.compute_at(u_hat_shared, et).store_in(MemoryType::Register);
                p.u_hat.unroll(e).unroll(b);
                p.u_hat.update().reorder(b, e, f.rk, j, i).unroll(e).unroll(b);
            }
        }
        if (p.agreement.defined()) {
            // Shared memory: every thread of the softmax reads all of j.
            p.agreement.compute_at(per_capsule);
            per_j_and_batch(p.agreement, j, b, i, tile);
            per_j_and_batch(p.agreement.update(), j, b, i, tile, {f.re});
        }
        p.c.compute_at(per_capsule);
        per_j_and_batch(p.c, j, b, i, tile);
        // The max and sum over j per thread of c: J-fold redundant but
        // without two more barriers per input capsule.
        // Computed at c's innermost loop (one (i, b) point, so a constant
        // size and registers; one level out they went to global memory).
        p.logit_max.compute_at(p.c, Var("bu"));
        p.exp_sum.compute_at(p.c, Var("bu"));

        squash_kernel(f, t);
    }
    routing_s_kernel(f);
}

// A register copy of `staged`'s 8 values along its first dimension (k),
// loaded as two 4-wide vectors, for the consumer `user` at `level`; one
// point in every other dimension.
Func k_row(Func staged, Func user, const LoopLevel &level) {
    Func row = staged.in(user);
    const std::vector<Var> a = row.args();
    Var ko(row.name() + "_ko"), ki(row.name() + "_ki");
    row.compute_at(level).store_in(MemoryType::Register).split(a[0], ko, ki, 4).vectorize(ki).unroll(ko);
    for (size_t d = 1; d < a.size(); d++) row.bound_extent(a[d], 1);
    return row;
}

// W of a block's `capsules` input capsules in shared memory, copied by
// threads over (32 consecutive floats of a (k, e) row block, j): coalesced
// reads, all of a thread's loads unrolled so that they are in flight
// together (a block's staging is otherwise a chain of L2 latencies longer
// than its compute). W_in clamps the capsule index, so the fixed extent is
// safe at the last chunk. Stored e innermost: a k's 16 e values are four
// 16-byte rows (or, !e_innermost, as W is: an e's 8 k values are two).
void stage_W(Func W_tile, const LoopLevel &level, int capsules, bool e_innermost = true) {
    std::vector<Var> a = W_tile.args();  // (k, e, j, i)
    Var ke("W_ke"), keo("W_keo"), thread_x("W_x");
    if (e_innermost) W_tile.reorder_storage(a[1], a[0], a[2], a[3]);
    W_tile.compute_at(level)
        .store_in(MemoryType::GPUShared)
        .bound_extent(a[3], capsules)
        .fuse(a[0], a[1], ke)
        .split(ke, keo, thread_x, 32, TailStrategy::GuardWithIf)
        .reorder(keo, a[3], thread_x, a[2])
        .unroll(keo)
        .unroll(a[3])
        .gpu_threads(thread_x, a[2]);
}

// fused_split_all_vectors: per routing iteration, the pass as up to four
// kernels, each recomputing the u_hat it needs in registers, with no
// barrier inside any loop over input capsules (`fused` has three per
// capsule). CapsNet's shape only: in_dim 8 and out_dim 16 (u and W read as
// rows of 8 floats, v and the partial sums held in registers); the runtime
// refuses other shapes (unsupported_shape) before any device work.
// Per pass t:
//   logits kernel   (t > 0) split_logits_batch_vectors: blocks over (128
//                   batch elements, logits_i_tile capsules), a thread per
//                   (j, 4 batch elements) walking e; writes logits, B·I·J
//                   floats.
//   partial sums    split_partials_batch_vectors: blocks over (batch_tile
//                   batch elements, in_chunk capsules), a thread per (e, j)
//                   with batch_tile batch accumulators; u and c (the
//                   softmax over j, computed while staging) in shared
//                   memory.
//   squash kernel   one block per batch element: the chunks' partial sums
//                   added in groups by threads over (e, j, group) into
//                   shared memory, then each (e, j) thread adds the groups
//                   and squashes; before the last pass it stores the next
//                   pass's v_sum, v_sum + v[t], not v[t].
// Device memory: the logits (B·I·J floats, 5.9 MB at MNIST b128), the
// partial sums (B·J·E per chunk); nothing of size B·I·J·E.
// The steps that led here (a thread per (b, j) in both heavy kernels, then
// in the logits kernel only) are in docs/history.md.
// The shapes fused_split_all_vectors handles (in_dim 8, out_dim 16, and
// every kernel's shared-memory tiles within a launch's 48 KB), and the
// refusal of the others. Every kernel checks the same condition, so the
// first one refuses before any device work.
struct SplitShape {
    Expr fits;
    std::string refusal;
};

// fused_split_all_vectors' logits kernel of pass t > 0: the partial-sum kernel's
// batch vectors applied to the agreement. Blocks over (128 batch elements,
// logits_i_tile capsules), threads over (32 groups of 4 batch elements, j);
// a warp shares one j, so W's rows are the same for all its lanes. Per
// capsule a thread loads its 4 batch elements' u rows into registers (8
// 4-wide vectors, from a tile staged batch innermost), then walks e: the
// capsule's W row of that e (two 16-byte shared broadcasts), u_hat of its 4
// batch elements (8 vector FMAs), and the agreement with v_sum (one 16-byte
// global load of a copy stored batch innermost, L1-resident). Per capsule
// and e: 3 loads for 36 FMAs a thread, against one 16-byte W load per 4
// FMAs in a thread per (b, j) (the retired fused_split's logits kernel, 1.9
// FMAs per shared-memory wavefront under ncu). The batch is covered in whole tiles of 128 (the
// logits and v_sum stored padded; u read clamped), so no store is guarded.
// Shared memory a block: W 8 x 16 x J floats a capsule, u 8 x 128, for
// logits_i_tile (3) capsules: out_caps up to 24 within 48 KB.
// Measured: fused_split_all_vectors 160.3 us at MNIST b128, 3 iterations,
// on an H200: the CUDA default where it applies.
constexpr int kLogitsVector = 4, kLogitsLanes = 32;
constexpr int kLogitsVectorsBatch = kLogitsVector * kLogitsLanes;  // a block's batch elements

void split_logits_batch_vectors(const SplitGpuTiling &tile, FusedDigitCapsStages &f, size_t t, const SplitShape &shape,
                                const Target &target) {
    const Var j = f.j, i = f.i, b = f.b;
    FusedPass &p = f.passes[t];
    constexpr int vector = kLogitsVector, batch_tile = kLogitsVectorsBatch;
    Var bo("lv_bo"), bl("lv_bl"), bq("lv_bq"), bv("lv_bv"), io("lv_io"), ii("lv_ii");
    p.logits.compute_root()
        .align_bounds(b, batch_tile)
        .reorder_storage(b, j, i)
        .split(b, bo, bl, batch_tile, TailStrategy::RoundUp)
        .split(bl, bq, bv, vector)
        .split(i, io, ii, tile.logits_i_tile, TailStrategy::GuardWithIf)
        .reorder(bv, ii, bq, j, io, bo)
        .vectorize(bv)
        .gpu_threads(bq, j)
        .gpu_blocks(io, bo);
    p.logits.specialize(shape.fits);
    p.logits.specialize_fail(shape.refusal);

    // v[0] + ... + v[t-1], batch innermost, stored by pass t-1's squash
    // kernel (squash_kernel's v_sum_out).
    {
        const std::vector<Var> a = p.v_sum.args();  // (e, j, b)
        p.v_sum.align_bounds(a[2], batch_tile).reorder_storage(a[2], a[0], a[1]);
    }

    const std::vector<Var> ga = p.agreement.args();  // (j, i, b)
    p.agreement.compute_at(p.logits, ii).store_in(MemoryType::Register).bound_extent(ga[2], vector).vectorize(ga[2]);
    p.agreement.update().reorder(ga[2], f.re.x).vectorize(ga[2]);

    // u_hat of the thread's 4 batch elements at one e, a vector.
    Func u_hat = p.u_hat.clone_in(p.agreement);
    const std::vector<Var> ua = u_hat.args();  // (e, j, i, b)
    const LoopLevel per_e(p.agreement, f.re.x);
    u_hat.compute_at(per_e)
        .store_in(MemoryType::Register)
        .bound_extent(ua[0], 1)
        .bound_extent(ua[3], vector)
        .vectorize(ua[3]);
    u_hat.update().reorder(ua[3], f.rk.x).vectorize(ua[3]).unroll(f.rk.x);

    // W of the block's capsules in shared memory as W is (k innermost),
    // the e's row of 8 read as two 16-byte broadcasts.
    Func W_tile = f.W.in(u_hat);
    stage_W(W_tile, LoopLevel(p.logits, io), tile.logits_i_tile, false);
    k_row(W_tile, u_hat, per_e);

    // u of the block's capsules and 128 batch elements, batch innermost,
    // copied by threads over ((k, 4 batch elements), capsule), walking the
    // 32 groups of 4 (a warp reads 4 rows of 32 bytes); then the thread's
    // 8 x 4 values in registers, once a capsule. (Threads over the block's
    // first dimension only up to 32 and its second up to the logits_i_tile
    // capsules, within the block's 32 x out_caps.)
    Func u_tile = f.u.in(u_hat);
    {
        const std::vector<Var> a = u_tile.args();  // (k, i, b)
        Var so("u_bo"), si("u_bi"), kb("u_kb");
        u_tile.compute_at(p.logits, io)
            .store_in(MemoryType::GPUShared)
            .align_bounds(a[2], batch_tile)
            .bound_extent(a[2], batch_tile)
            .bound_extent(a[0], 8)
            .reorder_storage(a[2], a[0], a[1])
            .split(a[2], so, si, vector)
            .reorder(a[0], si, so, a[1])
            .fuse(a[0], si, kb)
            .unroll(so)
            .gpu_threads(kb, a[1]);
    }
    {
        Func u_row = u_tile.in(u_hat);
        const std::vector<Var> a = u_row.args();  // (k, i, b)
        u_row.compute_at(p.logits, ii)
            .store_in(MemoryType::Register)
            .bound_extent(a[0], 8)
            .bound_extent(a[1], 1)
            .bound_extent(a[2], vector)
            .vectorize(a[2])
            .unroll(a[0]);
        // OpenCL: the 4-wide reads of this register array, k innermost, are
        // stride-8 loads that Halide lowers to a 32-lane load and a shuffle,
        // past OpenCL C's 16 lanes; with the batch innermost they are dense.
        // CUDA keeps the storage above (its PTX is the one measured).
        if (target.has_feature(Target::OpenCL)) u_row.reorder_storage(a[2], a[0], a[1]);
    }
}

// The softmax over j of pass p's staged c tile: the max and sum of each
// (i, b) row at c's loop `row` (one row, so in registers), their loops over
// j and c's own split by 4 and unrolled, four logits loads in flight at a
// time instead of one.
void softmax_rows_at(FusedPass &p, const FusedDigitCapsStages &f, const Var &row) {
    p.logit_max.compute_at(p.c, row);
    p.exp_sum.compute_at(p.c, row);
    RVar jo("c_jo"), ji("c_ji");
    p.logit_max.update().split(f.rj.x, jo, ji, 4, TailStrategy::GuardWithIf).unroll(ji);
    p.exp_sum.update().split(f.rj.x, jo, ji, 4, TailStrategy::GuardWithIf).unroll(ji);
    Var cjo("c_jo"), cji("c_ji");
    p.c.split(p.c.args()[0], cjo, cji, 4, TailStrategy::GuardWithIf).unroll(cji);
}

// fused_split_all_vectors' partial-sum kernel: predict's batch_vectors
// thread instead of a thread per (b, j). Blocks over (32 batch elements, in_chunk
// capsules), threads over (e, j), 16 x J; a thread keeps the partial sums
// of its (e, j) for the block's 32 batch elements in registers as 4-wide
// vectors, and per capsule reads its own W row of 8 (global memory: the
// lanes' rows are consecutive), then per 4 batch elements computes their
// u_hat (8 FMAs on vectors, u read from the staged tile as 16-byte
// broadcasts) and adds c times it (c read from its staged tile as one
// 16-byte load). Per capsule: 8 W loads, 72 shared loads and 288 FMAs a
// thread; a block stages 10 KB of u and 12.8 KB of c (in_chunk 10), with
// no W in shared memory, so 6 blocks fit an SM.
// The staging's thread loops run over (16 batch elements, in_chunk
// capsules), so in_chunk must be 5, 10 or 20 for the block to keep its
// 16 x J threads at J = 10. The thread's 32 batch elements are computed
// past the batch's end (u is read clamped there) and not stored.
// Bound by the L1 and shared memory rather than by the FMAs; more FMAs a
// load would need more accumulators a thread than the 64 registers allow.
// W is read from W_by_k (split_gpu).
void split_partials_batch_vectors(const SplitGpuTiling &tile, FusedDigitCapsStages &f, size_t t, Func part,
                                  const RVar &rii, const SplitShape &shape, Func W_by_k) {
    const Var e = f.e, j = f.j, b = f.b;
    const int batch_tile = tile.batch_tile;
    constexpr int vector = 4, staging_batch = 16;
    FusedPass &p = f.passes[t];
    Func part_out = part.in();
    const std::vector<Var> pa = part.args();  // (e, j, b, io)
    Var bx("bx"), bl("bl");
    part_out.compute_root()
        .bound(e, 0, 16)
        .split(b, bx, bl, batch_tile, TailStrategy::GuardWithIf)
        .reorder(bl, e, j, bx, pa[3])
        .gpu_threads(e, j)
        .gpu_blocks(bx, pa[3]);
    part_out.specialize(shape.fits).unroll(bl);
    part_out.specialize_fail(shape.refusal);

    Var bo("pv_bo"), bv("pv_bv");
    part.compute_at(part_out, e)
        .store_in(MemoryType::Register)
        .bound_extent(pa[0], 1)
        .bound_extent(pa[1], 1)
        .bound_extent(pa[2], batch_tile)
        .bound_extent(pa[3], 1)
        .split(pa[2], bo, bv, vector)
        .vectorize(bv)
        .unroll(bo);
    part.update().split(pa[2], bo, bv, vector).reorder(bv, bo, rii, pa[0], pa[1], pa[3]).vectorize(bv).unroll(bo);

    // u_hat of 4 batch elements, a vector, summed over k.
    const std::vector<Var> ua = p.u_hat.args();  // (e, j, i, b)
    p.u_hat.compute_at(LoopLevel(part, bo))
        .store_in(MemoryType::Register)
        .bound_extent(ua[0], 1)
        .bound_extent(ua[1], 1)
        .bound_extent(ua[2], 1)
        .bound_extent(ua[3], vector)
        .vectorize(ua[3]);
    p.u_hat.update().reorder(ua[3], f.rk.x).vectorize(ua[3]).unroll(f.rk.x);

    // The thread's W row of the capsule: 8 registers, loaded once a capsule
    // from W_by_k (split_gpu): a warp's loads of one k are 128 contiguous
    // bytes.
    Func W_row = W_by_k.in(p.u_hat);
    const std::vector<Var> wa = W_row.args();  // (k, e, j, i)
    W_row.compute_at(LoopLevel(part, rii))
        .store_in(MemoryType::Register)
        .bound_extent(wa[0], 8)
        .bound_extent(wa[1], 1)
        .bound_extent(wa[2], 1)
        .bound_extent(wa[3], 1)
        .unroll(wa[0]);

    // u of the block's capsules and batch elements, batch innermost; its
    // region aligned to the batch tile so that the 4-wide reads are
    // provably aligned.
    Func u_tile = f.u.in(p.u_hat);
    {
        const std::vector<Var> a = u_tile.args();  // (k, i, b)
        Var so("u_bo"), si("u_bi");
        u_tile.compute_at(part_out, bx)
            .store_in(MemoryType::GPUShared)
            .align_bounds(a[2], batch_tile)
            .bound_extent(a[2], batch_tile)
            .reorder_storage(a[2], a[0], a[1])
            .split(a[2], so, si, staging_batch)
            .reorder(a[0], so, si, a[1])
            .unroll(a[0])
            .unroll(so)
            .gpu_threads(si, a[1]);
    }
    {
        // c of the block's capsules and batch elements, batch innermost, a
        // thread per (b, i) doing the max and sum over j for 2 batch elements.
        const std::vector<Var> a = p.c.args();  // (j, i, b)
        Var so("c_bo"), si("c_bi");
        p.c.compute_at(part_out, bx)
            .store_in(MemoryType::GPUShared)
            .align_bounds(a[2], batch_tile)
            .bound_extent(a[2], batch_tile)
            .reorder_storage(a[2], a[0], a[1])
            .split(a[2], so, si, staging_batch)
            .reorder(a[0], so, si, a[1])
            .gpu_threads(si, a[1]);
        softmax_rows_at(p, f, so);
    }
}

void split_gpu(const std::string &name, const SplitGpuTiling &tile, FusedDigitCapsStages &f, const Target &target) {
    const Var e = f.e, j = f.j, b = f.b;
    // Shared memory a block: the logits kernel's W 8 x 16 x J floats a
    // capsule and u 8 x 128; the partial-sum kernel's u and c.
    const Expr J = f.rj.x.extent();
    const Expr logits_bytes = 4 * tile.logits_i_tile * (8 * 16 * J + 8 * kLogitsVectorsBatch);
    const Expr part_bytes = 4 * tile.in_chunk * tile.batch_tile * (8 + J);
    const Expr fits = f.rk.x.extent() == 8 && f.re.x.extent() == 16 &&
                      (f.passes.size() == 1 || logits_bytes <= kDefaultSharedBytes) &&
                      part_bytes <= kDefaultSharedBytes;
    const SplitShape shape{fits, name +
                                     " needs in_dim 8 and out_dim 16, and its tiles of W for this out_caps need "
                                     "more than 48 KB of shared memory"};
    const size_t n = f.passes.size();
    // W copied once a call (one kernel, 4 * I * J * E * K bytes) with its k
    // dimension outside (e, j), for the partial-sum kernels of every pass.
    // Read in place, a warp's loads of one k were 32 floats 32 bytes apart,
    // 8 cache lines an instruction; ncu showed the L1 89% busy.
    Func W_by_k;
    {
        std::vector<Func> users;
        for (const FusedPass &p : f.passes) users.push_back(p.u_hat);
        W_by_k = f.W.in(users);
        const std::vector<Var> a = W_by_k.args();  // (k, e, j, i)
        // A block per capsule: W's 8 x 16 x J floats staged in shared memory
        // by coalesced reads (stage_W), then written k-major by threads over
        // (e, j), also coalesced. Without the staging each thread read its
        // own 32-byte row, 8.6 us under ncu.
        W_by_k.compute_root()
            .reorder_storage(a[1], a[2], a[0], a[3])
            .reorder(a[0], a[1], a[2], a[3])
            .unroll(a[0])
            .gpu_threads(a[1], a[2])
            .gpu_blocks(a[3]);
        W_by_k.specialize(shape.fits);
        W_by_k.specialize_fail(shape.refusal);
        stage_W(f.W.in(W_by_k), LoopLevel(W_by_k, a[3]), 1);
    }
    for (size_t t = 0; t < n; t++) {
        FusedPass &p = f.passes[t];
        const std::string tag = std::to_string(t);
        if (t > 0) split_logits_batch_vectors(tile, f, t, shape, target);

        // --- partial sums of s over chunks of input capsules.
        RVar rio("rio" + tag), rii("rii" + tag);
        Var io("io" + tag);
        Func part = p.s.update().split(f.ri.x, rio, rii, tile.in_chunk).rfactor(rio, io);
        split_partials_batch_vectors(tile, f, t, part, rii, shape, W_by_k);

        // --- the squash kernel (one block per batch element): the chunks'
        // partial sums in groups, a thread per (e, j, group) (the group's
        // chunks in a rolled loop: Halide splits off its tail and ptxas
        // issues four loads at a time; unrolled by Halide, each load sat
        // behind its own tail test), into the block's shared memory; then
        // s, each (e, j) thread adding the groups, and squash. As many
        // groups as fit a block of 1024 threads, up to partial_groups: 6 at
        // MNIST (E x J = 160), 2 at out_caps 24; past 1024 (E x J) threads
        // the launch fails with a cuda_error status.
        RVar so("s_o" + tag), si("s_i" + tag);
        Var group("group" + tag);
        const Expr block_groups =
            clamp(schedule_util::kMaxBlockThreads / (f.re.x.extent() * f.rj.x.extent()), 1, tile.partial_groups);
        Func groups = p.s.update().split(rio, so, si, block_groups, TailStrategy::GuardWithIf).rfactor(si, group);
        const LoopLevel s_block = squash_kernel(f, t, true);
        groups.compute_at(s_block).store_in(MemoryType::GPUShared).reorder(e, j, group, b).gpu_threads(e, j, group);
        groups.update().reorder(so, e, j, group, b).gpu_threads(e, j, group);
    }
    routing_s_kernel(f);
}

// fused: 8 batch elements x 16 input capsules a block. Any shape whose
// block fits. Latency-bound on the u loads and on the barriers between the
// agreement, softmax and partial-sum stages of each chunk (64 registers,
// about half occupancy). The CUDA default where fused_split_all_vectors
// does not apply, and at 1 and 5 iterations; the fastest Halide layer at
// wide b32.
// Measured: 773.2 us at MNIST b128, 2374.9 at wide b32, 3 iterations, on
// an H200.
void fused(const Target &, FusedDigitCapsStages &f) { fused_gpu({8, 16, 1}, f); }

// fused_chunk8: fused with chunks of 8 input capsules a block, the best
// point `halcaps explore` found in schedules/spaces/digitcaps_fused_cuda.space
// (space:batch_tile=8,in_chunk=8,e_per_thread=1); fused stays the default
// (ahead at b512 and wide b32).
// Measured: 721.8 us at MNIST b128 (fused 773.2), 2684.1 at b512 (fused
// 2664.7), 3 iterations, on an H200.
void fused_chunk8(const Target &, FusedDigitCapsStages &f) { fused_gpu({8, 8, 1}, f); }

// fused_split_all_vectors (split_gpu above): the CUDA default where it
// applies (in_dim 8, out_dim 16, out_caps up to 24, 3 iterations).
// Measured: 161.7 us at MNIST b128, 529.5 at b512, 3 iterations, on an H200.
void fused_split_all_vectors(const Target &target, FusedDigitCapsStages &f) {
    split_gpu("fused_split_all_vectors", {10, 3, 8, 32}, f, target);
}

const ScheduleTable<FusedDigitCapsStages> kFusedSchedules = {
    {"fused_cpu", ScheduleTarget::cpu, fused_cpu},
    {"cpu_lanes", ScheduleTarget::cpu, cpu_lanes},
    {"fused", ScheduleTarget::gpu, fused},
    {"fused_chunk8", ScheduleTarget::gpu, fused_chunk8},
    {"fused_split_all_vectors", ScheduleTarget::gpu, fused_split_all_vectors},
};

}  // namespace

void schedule_digitcaps_fused(const std::string &name, const Target &target, FusedDigitCapsStages &f) {
    // Also routing_fused (f.u_hat_given set): the same passes over an input u_hat.
    // Measured: route `fused` 783.0 us at MNIST b128, 3 iterations, on an H200.
    if (space::is_point_name(name) && target.has_gpu_feature()) {
        // A point of schedules/spaces/digitcaps_fused_cuda.space, parsed
        // strictly (schedules/space_knobs.h), then the named variants' code.
        std::map<std::string, int> v;
        if (std::string error = space::parse_point("digitcaps_fused", "cuda", name, &v); !error.empty()) {
            throw CompileError(error);
        }
        return fused_gpu({v["batch_tile"], v["in_chunk"], v["e_per_thread"]}, f);
    }
    apply_schedule("digitcaps_fused", kFusedSchedules, name, target, f);
}

}  // namespace halcaps

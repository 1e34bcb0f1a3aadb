// Schedules for capsule prediction and its gradients (algorithms in
// generators/predict.cpp). Each schedule is a named function; the
// comment above it records its measured time and the device it ran on.
//
// Sizes that matter for every schedule here (MNIST shape, B=128, I=1152,
// K=8, J=10, E=16): u_hat and g are 94 MB, W is 5.9 MB, u is 4.7 MB. The
// forward pass and both gradients are bound by moving u_hat or g once.
#include "predict_schedules.h"

#include <functional>

#include "autoschedule.h"
#include "common.h"
#include "space_knobs.h"

namespace halcaps {

using namespace Halide;
using schedule_util::apply_schedule;
using schedule_util::check_threads;
using schedule_util::one_thread_per_output;
using schedule_util::ScheduleTable;
using schedule_util::ScheduleTarget;

namespace {

// ---------------------------------------------------------------- forward --

// The knobs of the CPU forward schedule (explored through
// schedules/spaces/predict_cpu.space; the defaults are `cpu`).
struct PredictCpuTiling {
    int tile_i = 32;      // input capsules per parallel tile
    int vec_mult = 1;     // e vectors this many natural vectors wide
    bool stage_w = true;  // transpose the tile's W slice (e innermost) first
};

// Parallel over tiles of `tile_i` input capsules; for each tile, W's slice is
// transposed once into a small buffer with e innermost (tile_i x 5 KB at the
// MNIST shape) and reused for every batch element; each (b, i, j) row of E
// outputs is vectors of `vec_mult` natural vectors, accumulated in registers
// over k. Without stage_w the accumulation reads W(k, e, j, i) directly,
// strided by K along the vector (gathers).
void predict_cpu_tiled(const Target &target, PredictStages &s, const PredictCpuTiling &t) {
    const int vec = target.natural_vector_size<float>() * t.vec_mult;
    Var io("io"), ii("ii"), eo("eo"), ei("ei");
    s.u_hat.split(s.i, io, ii, t.tile_i, TailStrategy::GuardWithIf)
        .split(s.e, eo, ei, vec, TailStrategy::GuardWithIf)
        .reorder(ei, eo, s.j, ii, s.b, io)
        .vectorize(ei)
        .parallel(io);
    // One vector of accumulators per (b, i, j, eo): a constant-size buffer
    // that lives in registers rather than a heap allocation per row.
    s.accum.compute_at(s.u_hat, eo).vectorize(s.e, vec, TailStrategy::GuardWithIf);
    s.accum.update().reorder(s.e, s.rk).vectorize(s.e, vec, TailStrategy::GuardWithIf);

    if (t.stage_w) {
        Func W_by_e = s.W_in;
        std::vector<Var> w = W_by_e.args();  // (k, e, j, i)
        W_by_e.compute_at(s.u_hat, io)
            .reorder_storage(w[1], w[0], w[2], w[3])
            .reorder(w[1], w[0], w[2], w[3])
            .vectorize(w[1], vec, TailStrategy::GuardWithIf);
    }
}

// cpu: predict_cpu_tiled with tiles of 32 input capsules (32 x 5 KB of
// transposed W, stays in L2), one natural vector per e row, W staged. Each
// batch element's outputs for a tile are 20 KB written contiguously.
// Any shape. Halide emits no streaming stores, so each line of u_hat is read
// for ownership before it is written: about 1.9x the bytes floor moves.
// The best point of schedules/spaces/predict_cpu.space; tiles of
// 16 (the earlier `cpu`) ran 8.61 and 19.28 ms against this one's 8.48 and
// 18.44 in two loaded runs on the 2-core build machine (docs/history.md).
// Measured: 5.0 ms at MNIST b128 on the 2-core AMD EPYC build machine, 6.5x
// the naive OpenMP loops.
void predict_cpu(const Target &target, PredictStages &s) { predict_cpu_tiled(target, s, {}); }

// naive: the blog's forward kernel, one thread per output element.
// Measured: 415.5 us at MNIST b128 on an H200.
void predict_naive(PredictStages &s) { one_thread_per_output(s.u_hat, s.accum); }

// The knobs of the register-blocked GPU forward schedule.
struct PredictGpuTiling {
    int ej_threads = 32;   // threads along the fused (e, j) output row (x)
    int i_threads = 4;     // threads along input capsules (y)
    int batch_tile = 16;   // batch elements per thread, one register accumulator each
    bool stage_u = false;  // copy the block's tile of u to shared memory first
    int batch_vector = 1;  // accumulators, and reads of the staged u, as vectors of this many batch elements
};

// A thread owns one (e, j, i) output row across `batch_tile` batch elements,
// held as accumulators in registers. For each k it reads W(k, e, j, i) once
// and u(k, i, b) for its batch tile (the same address for the whole warp, a
// broadcast), so W is read once per batch tile. A warp writes ej_threads
// consecutive (e, j) outputs (coalesced) per b. Tails (B not a multiple of
// the batch tile, E*J not of ej_threads, I not of i_threads) are guarded when
// stored; past the edges the accumulators read the clamped u_in and are
// never stored.
void predict_gpu_tiled(PredictStages &s, const PredictGpuTiling &t) {
    Var ej("ej"), ejo("ejo"), ejt("ejt"), io("io"), it("it"), bo("bo"), bi("bi");
    s.u_hat.fuse(s.e, s.j, ej)
        .split(ej, ejo, ejt, t.ej_threads, TailStrategy::GuardWithIf)
        .split(s.i, io, it, t.i_threads, TailStrategy::GuardWithIf)
        .split(s.b, bo, bi, t.batch_tile, TailStrategy::GuardWithIf)
        .reorder(bi, ejt, it, ejo, io, bo)
        .gpu_threads(ejt, it)
        .gpu_blocks(ejo, io, bo)
        .unroll(bi);
    // The accumulators' extents are stated because bounds inference cannot
    // see through the fused (e, j) index.
    s.accum.compute_at(s.u_hat, ejt)
        .store_in(MemoryType::Register)
        .bound_extent(s.e, 1)
        .bound_extent(s.j, 1)
        .bound_extent(s.i, 1)
        .bound_extent(s.b, t.batch_tile);
    s.accum.update().reorder(s.b, s.rk);
    if (t.batch_vector > 1) {
        s.accum.vectorize(s.b, t.batch_vector);
        s.accum.update().vectorize(s.b, t.batch_vector);
    }
    s.accum.unroll(s.b);
    s.accum.update().unroll(s.b);

    if (t.stage_u) {
        // The block's u tile (K x i_threads x batch_tile floats) is copied to
        // shared memory once, batch innermost: each thread's batch_tile reads
        // of one k are then at constant offsets from one address.
        std::vector<Var> a = s.u_in.args();  // (k, i, b)
        Var flat("u_flat"), flat_o("u_flat_o"), flat_i("u_flat_i"), tx("u_tx"), ty("u_ty");
        s.u_in.compute_at(s.u_hat, ejo)
            .store_in(MemoryType::GPUShared)
            .bound_extent(a[1], t.i_threads)
            .bound_extent(a[2], t.batch_tile)
            .reorder_storage(a[2], a[0], a[1])
            .fuse(a[0], a[1], flat)
            .fuse(flat, a[2], flat)
            .split(flat, flat_o, flat_i, t.ej_threads * t.i_threads, TailStrategy::GuardWithIf)
            .split(flat_i, ty, tx, t.ej_threads)
            .gpu_threads(tx, ty);
        // Vector reads of the tile need its batch offset provably a multiple
        // of the vector: the tile's region starts at a multiple of the batch
        // tile (bounds inference over the fused copy loop cannot show it,
        // and Halide then reads 4 scalars and packs them).
        if (t.batch_vector > 1) s.u_in.align_bounds(a[2], t.batch_tile);
    }
}

// tuned: predict_gpu_tiled with blocks of one warp over (e, j) for one input
// capsule, 32 batch elements per thread, u's tile staged in shared memory:
// the best point of schedules/spaces/predict_cuda.space. Any shape.
// Measured: 49.1 us at MNIST b128 on an H200.
void predict_tuned(PredictStages &s) { predict_gpu_tiled(s, {32, 1, 32, true}); }

// batch_vectors: `tuned`'s thread (one (e, j) of one capsule, 32 batch
// accumulators) with the accumulators as 4-wide vectors over the batch, so
// that u, staged batch innermost, is read as one 16-byte shared load (the
// same address across the warp: a broadcast) per k and 4 batch elements
// instead of one scalar load per k and batch element; blocks of 160 threads
// over the whole (e, j) row of a capsule (5 warps share one staged u tile and
// write 640 contiguous bytes per batch element); k in tiles of 8, unrolled,
// with K == 8 specialised, so that a tile's W loads are issued together.
// Any shape; the CUDA default where none of the paths below applies.
// Measured: 47.6 us at MNIST b128, 107.4 at wide b32 on an H200.
void predict_batch_vectors(PredictStages &s) {
    predict_gpu_tiled(s, {160, 1, 32, true, 4});
    const Expr K = s.rk.x.extent();
    RVar rko("rko"), rki("rki");
    s.accum.update().split(s.rk.x, rko, rki, 8, TailStrategy::GuardWithIf).unroll(rki);
    s.accum.update().specialize(K == 8);
}

// Shared by batch_walk, batch_rows and the capsule runs, whose threads walk
// batch rows: one row's `e_vector` accumulators (one vector) in registers at
// the walk's loop `row`, summed over k in unrolled tiles of 8 (K == 8
// specialised). Bounds inference cannot see through the fused (e, j) index,
// so the accumulators' extents are stated.
void row_accumulators(PredictStages &s, const Var &row, int e_vector, RVar &rko) {
    RVar rki("rki");
    s.accum.compute_at(s.u_hat, row)
        .store_in(MemoryType::Register)
        .bound_extent(s.e, e_vector)
        .bound_extent(s.j, 1)
        .bound_extent(s.i, 1)
        .bound_extent(s.b, 1)
        .vectorize(s.e);
    s.accum.update()
        .split(s.rk.x, rko, rki, 8, TailStrategy::GuardWithIf)
        .reorder(s.e, rki, rko)
        .vectorize(s.e)
        .unroll(rki);
    s.accum.update().specialize(s.rk.x.extent() == 8);
}

// A row's 8 values of u (a k tile), in registers at the tile loop `rko`,
// read 4 wide from the block's staged tile of u.
void u_row_in_registers(PredictStages &s, const RVar &rko) {
    std::vector<Var> a = s.u_in.args();  // (k, i, b)
    Var ko("u_ko"), ki("u_ki");
    s.u_in.in(s.accum)
        .compute_at(s.accum, rko)
        .store_in(MemoryType::Register)
        .bound_extent(a[0], 8)
        .split(a[0], ko, ki, 4)
        .vectorize(ki)
        .unroll(ko);
}

// batch_walk: the hand-written forward's design (reference/cuda, version 2)
// in Halide. A block owns one input capsule, 16 pairs of consecutive e of
// its (e, j) row and a tile of 128 batch rows; its 16 x 8 threads each walk
// 16 of the rows. A thread keeps its 2 x K values of W in registers for the
// whole walk (loaded once: nothing in the walk depends on them changing),
// reads a row's K values of u from the block's staged tile as 16-byte
// broadcasts, and writes its 2 outputs of the row as one 8-byte store (a
// half-warp writes 128 contiguous bytes). `tuned` and `batch_vectors`
// instead hold 32 batch accumulators a thread (64 registers, 50% occupancy)
// and read W again for every batch tile of 32.
// Fast path when out_dim is 16, in_dim 8 and the batch a multiple of 128
// (specialised); any other shape runs the same mapping guarded, slowly
// (wide b32: 1112.6 us, as slow as the blog's kernel), so the runtime picks
// batch_walk by default only where the fast path applies.
// Measured: 39.1 us at MNIST b128 on an H200.
//
// batch_rows (whole_row): batch_walk with a block over the capsule's whole
// (e, j) row, 8 * out_caps x 2 threads (80 x 2 at MNIST), each walking 64
// of the tile's 128 rows, so that u's tile is staged once a capsule
// instead of once for every 16 pairs (five times at MNIST). Fast path:
// batch_walk's, with out_caps 8 to 32 (the staging's 64 x 2 threads fit,
// the block stays within 512 threads); elsewhere it runs batch_walk's
// mapping with the staging's wider block (most of its threads idle), so
// the runtime picks it only where its fast path applies. Where u_hat has
// no buffer of its own (a stage of the layer backward) it is batch_walk.
// Measured: 36.6 us at MNIST b128 on an H200.
void predict_batch_walk(PredictStages &s, bool whole_row = false) {
    const Expr K = s.rk.x.extent();
    Expr fast, row_fast = Internal::const_false();
    Expr pairs;  // (e pair, j) pairs of a row, the row's threads in row_fast
    if (!s.u_hat_buffer.defined()) {
        // u_hat a stage in Halide's own buffer (the layer's backward): its
        // rows aligned by the caller, its batch padded to whole tiles of 128
        // (u is read clamped there).
        fast = (s.out_dim == 16) && (K == 8);
        // batch_rows' block spans out_caps, which only the output buffer
        // gives here: without one it is batch_walk.
        whole_row = false;
    } else {
        const Expr out_dim = s.u_hat_buffer.dim(0).extent();
        const Expr batch = s.u_hat_buffer.dim(3).extent();
        // The 8-byte stores need u_hat's row offsets provably even: its
        // strides are products of extents (dense), but Halide addresses it
        // through the strides themselves, so their parity is part of the
        // condition (always true when out_dim is 16).
        fast = (out_dim == 16) && (K == 8) && (batch % 128 == 0) && (s.u_hat_buffer.dim(2).stride() % 2 == 0) &&
               (s.u_hat_buffer.dim(3).stride() % 2 == 0);
        // ... and the buffer's start 8-byte aligned: declared here (Halide
        // then checks a host u_hat; device tensors are 16-byte aligned,
        // which the runtime checks, runtime/src/halide_call.cpp). Without it
        // the stores were two 4-byte ones.
        s.u_hat_buffer.set_host_alignment(8);
        if (whole_row) {
            // batch_rows: a block over the whole (e, j) row, 8 * out_caps
            // threads wide (out_caps 8 to 32: described above).
            const Expr out_caps = s.u_hat_buffer.dim(1).extent();
            pairs = out_caps * 8;
            row_fast = fast && (out_caps >= 8) && (out_caps <= 32);
        }
    }
    Var eo("eo"), ei("ei"), ej("ej"), ejo("ejo"), ejt("ejt"), bo("bo"), bi("bi"), bt("bt"), br("br");
    auto mapping = [&](Stage f, const Expr &pairs_a_block, int rows_a_thread, TailStrategy e_tail,
                       TailStrategy b_tail) {
        f.split(s.e, eo, ei, 2, e_tail)
            .fuse(eo, s.j, ej)
            .split(ej, ejo, ejt, pairs_a_block, TailStrategy::GuardWithIf)
            .split(s.b, bo, bi, 128, b_tail)
            .split(bi, bt, br, rows_a_thread)
            .reorder(ei, br, ejt, bt, ejo, s.i, bo)
            .gpu_threads(ejt, bt)
            .gpu_blocks(ejo, s.i, bo)
            .vectorize(ei);
    };
    if (whole_row) mapping(s.u_hat.specialize(row_fast), pairs, 64, TailStrategy::RoundUp, TailStrategy::RoundUp);
    mapping(s.u_hat.specialize(fast), 16, 16, TailStrategy::RoundUp, TailStrategy::RoundUp);
    mapping(s.u_hat, 16, 16, TailStrategy::GuardWithIf, TailStrategy::GuardWithIf);

    // One row's accumulators: 2 e (one vector), in registers.
    RVar rko("rko");
    row_accumulators(s, br, 2, rko);

    // The block's u tile (8-float rows, k innermost, 128 batch rows) in
    // shared memory, copied by 16 x 8 threads (batch_walk) or 64 x 2
    // (batch_rows, whose blocks are 8 * out_caps x 2 threads).
    std::vector<Var> a = s.u_in.args();  // (k, i, b)
    const int copy_x = whole_row ? 64 : 16, copy_y = whole_row ? 2 : 8;
    Var flat("u_flat"), flat_o("u_flat_o"), flat_i("u_flat_i"), tx("u_tx"), ty("u_ty");
    s.u_in.compute_at(s.u_hat, ejo)
        .store_in(MemoryType::GPUShared)
        .align_storage(a[0], 8)
        .bound_extent(a[1], 1)
        .bound_extent(a[2], 128)
        .align_bounds(a[2], 128)
        .fuse(a[0], a[2], flat)
        .split(flat, flat_o, flat_i, copy_x * copy_y, TailStrategy::GuardWithIf)
        .split(flat_i, ty, tx, copy_x)
        .gpu_threads(tx, ty);
    u_row_in_registers(s, rko);
}

// The knobs of the capsule-runs forward (schedules/spaces/predict_cuda_runs.space).
struct PredictRunsTiling {
    int e_vector = 2;    // consecutive e a thread: one store of this many floats a row (2 or 4)
    int run_caps = 2;    // input capsules a block: each batch row's run is run_caps * J * E floats
    int run_rows = 64;   // batch rows a block, walked by each of its threads (when row_groups is 0)
    int row_groups = 2;  // if not 0: the batch split into this many groups of rows, a group a block
    int copy_all = 1;    // 1: the u tile copied by every thread of the block; 0: by 32 x run_caps threads
};

// capsule runs: a block owns `run_caps` consecutive input capsules and a
// range of consecutive batch rows (run_rows of them, or batch / row_groups);
// a thread owns e_vector consecutive outputs of one (e, j, i) row, keeps
// their e_vector x K values of W in registers and walks the block's rows,
// so that for each row the block writes run_caps * J * E contiguous floats,
// its threads in address order, and the next block (blocks are numbered
// capsules first) continues the run. The whole grid is resident at once at
// MNIST, so it writes u_hat row group by row group, close to address order.
// batch_rows instead walks one capsule's rows, 640-byte runs 737 KB apart
// at MNIST, which DRAM serves slowly under the plain stores Halide emits
// (docs/history.md: nvidia-h200-store-order). The price: W is read once per
// row group instead of once per capsule (mostly from L2). The block's u tile
// (run_caps capsules x its rows x in_dim floats) is staged in shared memory
// first; a row's values are read from it 8 at a time, as two 16-byte
// broadcasts.
// Fast path (specialised): out_dim a multiple of e_vector, in_dim 8 or 16,
// in_caps a multiple of run_caps, the batch a multiple of the rows a block,
// the block's (J * E / e_vector) x run_caps threads within 1024 and its
// tile within 48 KB; elsewhere the same mapping runs guarded, 32 threads along
// the (e, j) row and 16 rows a block, slowly, so the runtime picks it only
// where the fast path applies (capsule_runs_fits in
// runtime/src/predict.cpp).
// The knobs kept in the space are those that won somewhere; capsule_runs
// below is its best point (docs/history.md: nvidia-h200-capsule-runs).
void predict_capsule_runs(PredictStages &s, const PredictRunsTiling &t) {
    if (t.e_vector != 2 && t.e_vector != 4) {
        throw CompileError("predict: capsule runs take e_vector 2 or 4, not " + std::to_string(t.e_vector));
    }
    if (!s.u_hat_buffer.defined()) {
        throw CompileError("predict: capsule runs schedule only a u_hat that is the pipeline's output");
    }
    const int V = t.e_vector, C = t.run_caps;
    const Expr K = s.rk.x.extent();
    const Expr out_dim = s.u_hat_buffer.dim(0).extent();
    const Expr out_caps = s.u_hat_buffer.dim(1).extent();
    const Expr in_caps = s.u_hat_buffer.dim(2).extent();
    const Expr batch = s.u_hat_buffer.dim(3).extent();
    // Threads along a capsule's (e, j) row, and rows a block, in the fast
    // path (the guarded path takes 32 and 16). Halide checks every split
    // factor before it picks a path, so both are at least 1 at any shape.
    const Expr row_threads = max(out_caps * out_dim / V, 1);
    const Expr rows = t.row_groups > 0 ? max(batch / t.row_groups, 1) : Expr(t.run_rows);
    const int kGuardedRows = 16;
    // in_dim 8 or 16: the sum over k in whole tiles of 8, unrolled. The
    // block's u tile (C capsules x rows x in_dim floats) within 48 KB. The
    // V-float stores need u_hat's row offsets provably multiples of V:
    // Halide addresses it through its strides, so their divisibility is part
    // of the condition (always true for a dense u_hat in the fast path), and
    // its start is declared aligned (device tensors are 16-byte aligned,
    // which the runtime checks; Halide checks a host u_hat).
    const Expr fast = (out_dim % V == 0) && (K == 8 || K == 16) && (in_caps % C == 0) && (batch >= t.row_groups) &&
                      (C * rows * K * 4 <= 48 * 1024) && (batch % rows == 0) && (out_caps * out_dim / V * C <= 1024) &&
                      (s.u_hat_buffer.dim(1).stride() % V == 0) && (s.u_hat_buffer.dim(2).stride() % V == 0) &&
                      (s.u_hat_buffer.dim(3).stride() % V == 0);
    s.u_hat_buffer.set_host_alignment(4 * V);

    Var eo("eo"), ei("ei"), ej("ej"), ejo("ejo"), ejt("ejt"), io("io"), ii("ii"), bo("bo"), bi("bi");
    auto mapping = [&](Stage f, const Expr &threads_along_row, const Expr &block_rows, TailStrategy tail) {
        f.split(s.e, eo, ei, V, tail)
            .fuse(eo, s.j, ej)
            .split(ej, ejo, ejt, threads_along_row, tail)
            .split(s.i, io, ii, C, tail)
            .split(s.b, bo, bi, block_rows, tail)
            .reorder(ei, bi, ejt, ii, ejo, io, bo)
            .gpu_threads(ejt, ii)
            .gpu_blocks(ejo, io, bo)
            .vectorize(ei);
    };
    // A kernel for each in_dim: one for both would hold in_dim 16's 32
    // values of W in registers (56 registers, against 32 for in_dim 8).
    mapping(s.u_hat.specialize(fast && K == 8), row_threads, rows, TailStrategy::RoundUp);
    mapping(s.u_hat.specialize(fast && K == 16), row_threads, rows, TailStrategy::RoundUp);
    mapping(s.u_hat, 32, kGuardedRows, TailStrategy::GuardWithIf);

    // A row's V accumulators (one vector), in registers.
    RVar rko("rko");
    row_accumulators(s, bi, V, rko);
    // At in_dim 16 both tiles unrolled, so that the thread's V x 16 values
    // of W have fixed addresses and LLVM loads them once, before the walk
    // over the rows (as at in_dim 8), not again for every row.
    s.accum.update().specialize(K == 16).unroll(rko);

    // The block's u tile (rows of in_dim floats, k innermost) in shared
    // memory, copied a float a thread: by every thread of the block on the
    // fast path (copy_all), else by 32 x run_caps threads. The whole grid
    // copies its tiles at the start, before any store, so more loads in
    // flight shorten a phase in which nothing is written (b512: 109.4 us
    // against 112.4 with 32 x run_caps threads).
    std::vector<Var> a = s.u_in.args();  // (k, i, b)
    Var flat("u_flat"), flat_o("u_flat_o"), flat_i("u_flat_i"), tx("u_tx"), ty("u_ty");
    const Expr copy_x = t.copy_all ? select(fast, row_threads, 32) : Expr(32);
    s.u_in.compute_at(s.u_hat, ejo)
        .store_in(MemoryType::GPUShared)
        .align_storage(a[0], 8)
        .fuse(a[0], a[1], flat)
        .fuse(flat, a[2], flat)
        .split(flat, flat_o, flat_i, copy_x * C, TailStrategy::GuardWithIf)
        .split(flat_i, ty, tx, copy_x)
        .gpu_threads(tx, ty);
    u_row_in_registers(s, rko);
}

// capsule_runs: predict_capsule_runs with 2 capsules a block (160 threads
// at MNIST), the batch in 2 row groups (1152 blocks at MNIST, all resident
// at once), 8-byte stores, the u tile copied by every thread: the best of
// the capsule-runs space at MNIST b128 and b512 (runs 1-4, 11, 12).
// Limits: its fast path, and the runtime takes it only where it was
// measured faster (capsule_runs_fits in runtime/src/predict.cpp).
// Measured: 34.2 us at MNIST b128 (72% of the copy bandwidth over the bytes
// floor) and 109.7 at b512 (86%) on an H200.
void predict_capsule_runs_default(PredictStages &s) { predict_capsule_runs(s, {2, 2, 64, 2}); }

// ------------------------------------------------------- gradient w.r.t. u --

// cpu: vectors over k (K = 8 floats, contiguous in W), accumulated in
// registers over (e, j); parallel over tiles of `tile_i` (4) input capsules
// so W's slices (4 x 5 KB) stay in L1 while the batch loop streams g.
// (schedules/spaces/predict_grad_input_cpu.space sweeps tile_i.)
void grad_input_cpu(PredictGradInputStages &s, int tile_i = 4) {
    Var io("io"), ii("ii"), ko("ko"), ki("ki");
    s.grad_u.split(s.i, io, ii, tile_i, TailStrategy::GuardWithIf)
        .split(s.k, ko, ki, 8, TailStrategy::GuardWithIf)
        .reorder(ki, ko, ii, s.b, io)
        .vectorize(ki)
        .parallel(io);
    s.accum.compute_at(s.grad_u, ko).vectorize(s.k, 8, TailStrategy::GuardWithIf);
    s.accum.update().reorder(s.k, s.r_ej.x, s.r_ej.y).vectorize(s.k, 8, TailStrategy::GuardWithIf);
}

// naive: the blog's input-gradient kernel, one thread per output element.
// Measured: both naive gradients 520.5 us at MNIST b128 on an H200.
void grad_input_naive(PredictGradInputStages &s) { one_thread_per_output(s.grad_u, s.accum); }

// ------------------------------------------------------- gradient w.r.t. W --

// cpu: for each input capsule (parallel), the 160 x 8 accumulators (5 KB)
// stay in L1 while the batch loop streams g(:, :, i, b) and u(:, i, b);
// vectors over k.
// Measured: both CPU gradients 38.6 ms at MNIST b128 on the 2-core AMD EPYC
// build machine, 8.0x the naive OpenMP loops.
void grad_weight_cpu(PredictGradWeightStages &s) {
    s.grad_W.vectorize(s.k, 8, TailStrategy::GuardWithIf).parallel(s.i);
    s.accum.compute_at(s.grad_W, s.i).vectorize(s.k, 8, TailStrategy::GuardWithIf);
    s.accum.update().reorder(s.k, s.e, s.j, s.rb).vectorize(s.k, 8, TailStrategy::GuardWithIf);
}

// naive: the blog's weight-gradient kernel, one thread per output element.
void grad_weight_naive(PredictGradWeightStages &s) { one_thread_per_output(s.grad_W, s.accum); }

// A thread owns one (e, j, i) and a tile of 8 k: 8 accumulators in
// registers over the whole batch. Per batch element it reads g(e, j, i, b)
// (the lanes of a warp read consecutive (e, j): coalesced) and u(k, i, b) for
// its 8 k (the same addresses for the whole warp: broadcasts). The batch loop
// is unrolled by `batch_unroll` so that many loads are in flight. Past the
// edge of K the accumulators read the clamped u and are not stored.
// The knobs (schedules/spaces/predict_grad_weight_cuda.space; the
// defaults are `tuned`): k_tile accumulators a thread, blocks of ej_threads
// x i_threads.
struct GradWeightGpuTiling {
    int k_tile = 8, ej_threads = 32, i_threads = 4, batch_unroll = 8;
};

void grad_weight_register_tiles(PredictGradWeightStages &s, const GradWeightGpuTiling &t) {
    const int batch_unroll = t.batch_unroll;
    Var ej("ej"), ejo("ejo"), ejt("ejt"), io("io"), it("it"), ko("ko"), ki("ki");
    s.grad_W.split(s.k, ko, ki, t.k_tile, TailStrategy::GuardWithIf)
        .fuse(s.e, s.j, ej)
        .split(ej, ejo, ejt, t.ej_threads, TailStrategy::GuardWithIf)
        .split(s.i, io, it, t.i_threads, TailStrategy::GuardWithIf)
        .reorder(ki, ejt, it, ko, ejo, io)
        .gpu_threads(ejt, it)
        .gpu_blocks(ko, ejo, io)
        .unroll(ki);
    s.accum.compute_at(s.grad_W, ejt)
        .store_in(MemoryType::Register)
        .bound_extent(s.k, t.k_tile)
        .bound_extent(s.e, 1)
        .bound_extent(s.j, 1)
        .bound_extent(s.i, 1)
        .unroll(s.k);
    RVar rbo("rbo"), rbi("rbi");
    s.accum.update()
        .split(s.rb, rbo, rbi, batch_unroll, TailStrategy::GuardWithIf)
        .reorder(s.k, rbi, rbo)
        .unroll(s.k)
        .unroll(rbi);
}

// For 16-byte loads and stores of 4 floats: declares each buffer's start
// 16-byte aligned (Halide then checks a host pointer; device tensors are
// 16-byte aligned, which the runtime checks) and returns the condition that
// every row offset is a multiple of 4. The strides are products of extents
// (dense), but Halide addresses a buffer through the strides themselves, so
// their multiples are part of a fast path's condition. An undefined buffer
// (an intermediate of a larger pipeline) is left out.
Expr declare_aligned_to_vectors(const std::vector<OutputImageParam> &buffers) {
    Expr all = Internal::const_true();
    for (OutputImageParam buffer : buffers) {
        if (!buffer.defined()) continue;
        buffer.set_host_alignment(16);
        for (int d = 1; d < buffer.dimensions(); d++) all = all && (buffer.dim(d).stride() % 4 == 0);
    }
    return all;
}

// The `vectors` gradients' fast paths: out_dim 16, in_dim 8 or 16, and
// `aligned` (the runtime picks `vectors` by the same rule,
// runtime/src/predict.cpp); `mapping` applied to each fast path,
// then to the generic one.
void vectors_fast_paths(Func output, const Expr &aligned, const Expr &out_dim, const Expr &in_dim,
                        const std::function<void(Stage)> &mapping) {
    for (int K : {8, 16}) mapping(output.specialize(aligned && out_dim == 16 && in_dim == K));
    mapping(output);
}

// vectors' grad_W: a thread owns 4 consecutive e of one (j, i) and 4
// consecutive k (16 accumulators, four 4-wide vectors over k) and walks the
// whole batch, 2 rows unrolled. Per batch row it loads the 4 values of g as
// one 16-byte vector and the 4 values of u the same way, then does 16 FMAs.
// Threads over (k quad, 32 of the fused (e quad, j, i)), the k quads on
// adjacent lanes: a warp's g load reads 16 rows, each twice (one L1
// request), where with the k quads in different blocks it read 32.
// `tuned`'s thread (one e, 8 k) loads g 4 bytes at a time and u as 8 scalar
// broadcasts: 9 loads for 8 FMAs, and too few bytes in flight (under ncu
// DRAM 32% busy, L1 60%).
// Fast path (specialised): out_dim 16, in_dim 8 or 16, every stride a
// multiple of 4 and g, u and grad_W 16-byte aligned
// (declare_aligned_to_vectors). Elsewhere the same mapping runs with guards
// and scalar loads.
// Measured: both `vectors` gradients 96.4 us at MNIST b128 on an H200
// (tuned: 155.0).
void grad_weight_quads(PredictGradWeightStages &s) {
    constexpr int vector = 4, q_threads = 32, batch_unroll = 2;
    const Expr K = s.grad_W.output_buffer().dim(0).extent();
    const Expr E = s.grad_W.output_buffer().dim(1).extent();
    const Expr aligned = declare_aligned_to_vectors({s.grad_W.output_buffer(), s.g_buffer, s.u_buffer});

    Var ko("ko"), ki("ki"), eo("eo"), ei("ei"), q("q"), qo("qo"), qt("qt");
    auto mapping = [&](Stage f) {
        f.split(s.k, ko, ki, vector, TailStrategy::GuardWithIf)
            .split(s.e, eo, ei, vector, TailStrategy::GuardWithIf)
            .fuse(eo, s.j, q)
            .fuse(q, s.i, q)
            .split(q, qo, qt, q_threads, TailStrategy::GuardWithIf)
            .reorder(ki, ei, ko, qt, qo)
            .gpu_threads(ko, qt)
            .gpu_blocks(qo)
            .vectorize(ki)
            .unroll(ei);
    };
    vectors_fast_paths(s.grad_W, aligned, E, K, mapping);

    s.accum.compute_at(s.grad_W, ko)
        .store_in(MemoryType::Register)
        .bound_extent(s.k, vector)
        .bound_extent(s.e, vector)
        .bound_extent(s.j, 1)
        .bound_extent(s.i, 1)
        .vectorize(s.k)
        .unroll(s.e);
    RVar rbo("rbo"), rbi("rbi");
    s.accum.update()
        .split(s.rb, rbo, rbi, batch_unroll, TailStrategy::GuardWithIf)
        .reorder(s.k, s.e, rbi, rbo)
        .vectorize(s.k)
        .unroll(s.e)
        .unroll(rbi);

    // A batch row's 4 values of g and of u, each one vector load.
    Func g_quad = s.g_in.in(s.accum);
    std::vector<Var> ga = g_quad.args();  // (e, j, i, b)
    g_quad.compute_at(s.accum, rbi).store_in(MemoryType::Register).bound_extent(ga[0], vector).vectorize(ga[0]);
    Func u_quad = s.u_in.in(s.accum);
    std::vector<Var> ua = u_quad.args();  // (k, i, b)
    u_quad.compute_at(s.accum, rbi).store_in(MemoryType::Register).bound_extent(ua[0], vector).vectorize(ua[0]);
}

// A thread owns one (i, b) and a tile of 8 k (8 accumulators in registers)
// and walks the (e, j) reduction, `ej_unroll` at a time: per step it reads
// g(e, j, i, b) from its own row and W(k, e, j, i) for its 8 k (the same
// addresses for every lane of a warp, which share i: broadcasts).
// Its weakness: the lanes of a warp read 32 different g rows, so each g load
// touches 32 sectors (32 L1 wavefronts per instruction); the hand-written
// kernels reduce over (e, j) across lanes instead.
// The knobs (schedules/spaces/predict_grad_input_cuda.space; the
// defaults are the former `tuned`): k_tile accumulators a thread, blocks of b_threads x
// i_threads.
struct GradInputGpuTiling {
    int k_tile = 8, b_threads = 32, i_threads = 4, ej_unroll = 8;
};

void grad_input_register_tiles(PredictGradInputStages &s, const GradInputGpuTiling &t) {
    const int ej_unroll = t.ej_unroll;
    Var bo("bo"), bt("bt"), io("io"), it("it"), ko("ko"), ki("ki");
    s.grad_u.split(s.k, ko, ki, t.k_tile, TailStrategy::GuardWithIf)
        .split(s.b, bo, bt, t.b_threads, TailStrategy::GuardWithIf)
        .split(s.i, io, it, t.i_threads, TailStrategy::GuardWithIf)
        .reorder(ki, bt, it, ko, bo, io)
        .gpu_threads(bt, it)
        .gpu_blocks(ko, bo, io)
        .unroll(ki);
    s.accum.compute_at(s.grad_u, bt)
        .store_in(MemoryType::Register)
        .bound_extent(s.k, t.k_tile)
        .bound_extent(s.i, 1)
        .bound_extent(s.b, 1)
        .unroll(s.k);
    RVar exo("exo"), exi("exi");
    s.accum.update()
        .split(s.r_ej.x, exo, exi, ej_unroll, TailStrategy::GuardWithIf)
        .reorder(s.k, exi, exo, s.r_ej.y)
        .unroll(s.k)
        .unroll(exi);
}

// A warp owns one input capsule i and `batch_tile` batch rows and reduces
// over (e, j) across its lanes: lane l takes the (e, j) positions l, l + 32,
// ... (the fused (e, j) reduction split by 32 and factored out, `rfactor`),
// so each g load of a warp reads 32 consecutive floats of one g row
// (coalesced) and each lane's W loads are its own 8 consecutive k. A lane
// keeps 8 k x batch_tile partial sums in registers; they are then written to
// shared memory (lane index padded to 33: no bank conflicts either way) and
// each output grad_u(k, i, b) is the sum of its 32 lane partials, one thread
// per output. `i_threads` warps (input capsules) share a block.
// tuned: grad_input_lanes(4, 4) with grad_weight_register_tiles. Any shape;
// it spills at Halide's 64-register cap.
// Measured: both `tuned` gradients 155.0 us at MNIST b128 on an H200.
void grad_input_lanes(PredictGradInputStages &s, int batch_tile, int i_threads) {
    RVar rej("rej"), ro("ro"), rl("rl");
    Var lane("lane");
    Func partial = s.accum.update()
                       .fuse(s.r_ej.x, s.r_ej.y, rej)
                       .split(rej, ro, rl, 32, TailStrategy::GuardWithIf)
                       .rfactor(rl, lane);
    Func partial_shared = partial.in(s.accum);

    Var ko("ko"), ki("ki"), bo("bo"), bt("bt"), io("io"), it("it"), kb("kb");
    s.grad_u.split(s.k, ko, ki, 8, TailStrategy::GuardWithIf)
        .split(s.b, bo, bt, batch_tile, TailStrategy::GuardWithIf)
        .split(s.i, io, it, i_threads, TailStrategy::GuardWithIf)
        .reorder(ki, bt, it, ko, bo, io)
        .fuse(ki, bt, kb)
        .gpu_threads(kb, it)
        .gpu_blocks(ko, bo, io);
    s.accum.compute_at(s.grad_u, kb)
        .store_in(MemoryType::Register)
        .bound_extent(s.k, 1)
        .bound_extent(s.i, 1)
        .bound_extent(s.b, 1);

    std::vector<Var> p = partial_shared.args();  // (k, i, b, lane)
    partial_shared.compute_at(s.grad_u, ko)
        .store_in(MemoryType::GPUShared)
        .bound_extent(p[0], 8)
        .bound_extent(p[2], batch_tile)
        .bound_extent(p[3], 32)
        .reorder_storage(p[3], p[0], p[2], p[1])
        .align_storage(p[3], 33)
        .reorder(p[0], p[2], p[3], p[1])
        .gpu_threads(p[3], p[1])
        .unroll(p[0])
        .unroll(p[2]);

    std::vector<Var> q = partial.args();  // (k, i, b, lane)
    partial.compute_at(partial_shared, p[3])
        .store_in(MemoryType::Register)
        .bound_extent(q[0], 8)
        .bound_extent(q[1], 1)
        .bound_extent(q[2], batch_tile)
        .bound_extent(q[3], 1)
        .unroll(q[0])
        .unroll(q[2]);
    partial.update().reorder(q[0], q[2], ro).unroll(q[0]).unroll(q[2]);
}

// vectors' grad_u: a thread owns one batch row of one capsule, (b, i), with
// its 8 k as two 4-wide vector accumulators, and walks the (e, j) row 4 e
// at a time: one 16-byte load of its own g row, then for each of the 4 e
// the 8 values of W (two 16-byte shared loads, the same address for every
// lane: broadcasts) and 8 FMAs. W's slice of the block's capsule is staged in
// shared memory once, k innermost; blocks of 64 batch rows of one capsule.
// The lanes of a warp read 32 different g rows, but each load takes 16 bytes
// of a row, and the next load of the same lane the next 16 (in the same
// 32-byte sector, which the L1 still holds). `tuned` (grad_input_lanes)
// reads W again for every 4 batch rows and spills at 64 registers.
// Fast path (specialised): out_dim 16, in_dim 8 or 16, every stride a
// multiple of 4 and g and grad_u 16-byte aligned (declared, as for
// grad_weight_quads). Elsewhere the same mapping with guards, scalar loads.
// Measured: both `vectors` gradients 96.4 us at MNIST b128 on an H200
// (their grad_W: grad_weight_quads).
void grad_input_row_vectors(PredictGradInputStages &s) {
    constexpr int vector = 4, batch_tile = 64, k_tile = 8;
    const Expr E = s.r_ej.x.extent();
    const Expr K = s.grad_u.output_buffer().dim(0).extent();
    const Expr aligned = declare_aligned_to_vectors({s.grad_u.output_buffer(), s.g_buffer});

    Var bo("bo"), bt("bt"), ko("ko"), ki("ki");
    auto mapping = [&](Stage f) {
        f.split(s.k, ko, ki, k_tile, TailStrategy::GuardWithIf)
            .split(s.b, bo, bt, batch_tile, TailStrategy::GuardWithIf)
            .reorder(ki, bt, ko, bo, s.i)
            .gpu_threads(bt)
            .gpu_blocks(ko, bo, s.i)
            .vectorize(ki);
    };
    vectors_fast_paths(s.grad_u, aligned, E, K, mapping);

    s.accum.compute_at(s.grad_u, bt)
        .store_in(MemoryType::Register)
        .bound_extent(s.k, k_tile)
        .bound_extent(s.i, 1)
        .bound_extent(s.b, 1)
        .vectorize(s.k);
    RVar eo("eo"), ei("ei");
    s.accum.update()
        .split(s.r_ej.x, eo, ei, vector, TailStrategy::GuardWithIf)
        .reorder(s.k, ei, eo, s.r_ej.y)
        .vectorize(s.k)
        .unroll(ei);

    // The thread's 4 consecutive e of its g row: one 16-byte load.
    Func g_quad = s.g_in.in(s.accum);
    std::vector<Var> ga = g_quad.args();  // (e, j, i, b)
    g_quad.compute_at(s.accum, eo).store_in(MemoryType::Register).bound_extent(ga[0], vector).vectorize(ga[0]);

    // W's slice of the block's capsule (and k tile) in shared memory, k
    // innermost, copied by the block's threads.
    Func W_tile = s.W_in.in(s.accum);
    std::vector<Var> w = W_tile.args();  // (k, e, j, i)
    Var flat("w_flat"), flat_o("w_flat_o"), flat_i("w_flat_i");
    W_tile.compute_at(s.grad_u, ko)
        .store_in(MemoryType::GPUShared)
        .bound_extent(w[0], k_tile)
        .bound_extent(w[3], 1)
        .fuse(w[0], w[1], flat)
        .fuse(flat, w[2], flat)
        .split(flat, flat_o, flat_i, batch_tile, TailStrategy::GuardWithIf)
        .gpu_threads(flat_i);
}

// A point of the schedule space (schedules/spaces/predict_*.space):
// "space:knob=value,..." parsed strictly by schedules/space_knobs.h into the
// CPU or GPU tiling of the target, then the same schedule functions as the
// named schedules.
void schedule_predict_point(const std::string &name, const Target &target, PredictStages &s) {
    const std::string device = target.has_gpu_feature() ? "cuda" : "cpu";
    std::map<std::string, int> v;
    if (std::string error = space::parse_point("predict", device, name, &v); !error.empty()) {
        throw CompileError(error);
    }
    if (device == "cpu") {
        predict_cpu_tiled(target, s, {v["tile_i"], v["vec_mult"], v["stage_w"] != 0});
    } else if (v["runs"] != 0) {
        predict_capsule_runs(s, {v["e_vector"], v["run_caps"], v["run_rows"], v["row_groups"], v["copy_all"]});
    } else {
        predict_gpu_tiled(s, {v["ej_threads"], v["i_threads"], v["batch_tile"], v["stage_u"] != 0});
    }
}

// Points of the gradient spaces (schedules/spaces/predict_grad_*.space).
void schedule_grad_input_point(const std::string &name, const Target &target, PredictGradInputStages &s) {
    const char *op = "predict_grad_input";
    const std::string device = target.has_gpu_feature() ? "cuda" : "cpu";
    std::map<std::string, int> v;
    if (std::string error = space::parse_point(op, device, name, &v); !error.empty()) throw CompileError(error);
    if (device == "cpu") return grad_input_cpu(s, v["tile_i"]);
    check_threads(op, name, v["b_threads"] * v["i_threads"]);
    grad_input_register_tiles(s, {v["k_tile"], v["b_threads"], v["i_threads"], v["ej_unroll"]});
}

void schedule_grad_weight_point(const std::string &name, const Target &target, PredictGradWeightStages &s) {
    const char *op = "predict_grad_weight";
    const std::string device = target.has_gpu_feature() ? "cuda" : "cpu";
    std::map<std::string, int> v;
    if (std::string error = space::parse_point(op, device, name, &v); !error.empty()) throw CompileError(error);
    check_threads(op, name, v["ej_threads"] * v["i_threads"]);
    grad_weight_register_tiles(s, {v["k_tile"], v["ej_threads"], v["i_threads"], v["batch_unroll"]});
}

// The named schedules of each operator, one row each.
const ScheduleTable<PredictStages> kPredictSchedules = {
    {"cpu", ScheduleTarget::cpu, predict_cpu},
    {"naive", ScheduleTarget::gpu, [](const Target &, PredictStages &s) { predict_naive(s); }},
    {"tuned", ScheduleTarget::gpu, [](const Target &, PredictStages &s) { predict_tuned(s); }},
    {"batch_vectors", ScheduleTarget::gpu, [](const Target &, PredictStages &s) { predict_batch_vectors(s); }},
    {"batch_walk", ScheduleTarget::gpu, [](const Target &, PredictStages &s) { predict_batch_walk(s); }},
    {"batch_rows", ScheduleTarget::gpu, [](const Target &, PredictStages &s) { predict_batch_walk(s, true); }},
    {"capsule_runs", ScheduleTarget::gpu, [](const Target &, PredictStages &s) { predict_capsule_runs_default(s); }},
};

const ScheduleTable<PredictGradInputStages> kGradInputSchedules = {
    {"cpu", ScheduleTarget::cpu, [](const Target &, PredictGradInputStages &s) { grad_input_cpu(s); }},
    {"naive", ScheduleTarget::gpu, [](const Target &, PredictGradInputStages &s) { grad_input_naive(s); }},
    {"tuned", ScheduleTarget::gpu, [](const Target &, PredictGradInputStages &s) { grad_input_lanes(s, 4, 4); }},
    {"vectors", ScheduleTarget::gpu, [](const Target &, PredictGradInputStages &s) { grad_input_row_vectors(s); }},
};

const ScheduleTable<PredictGradWeightStages> kGradWeightSchedules = {
    {"cpu", ScheduleTarget::cpu, [](const Target &, PredictGradWeightStages &s) { grad_weight_cpu(s); }},
    {"naive", ScheduleTarget::gpu, [](const Target &, PredictGradWeightStages &s) { grad_weight_naive(s); }},
    {"tuned", ScheduleTarget::gpu,
     [](const Target &, PredictGradWeightStages &s) { grad_weight_register_tiles(s, {}); }},
    {"vectors", ScheduleTarget::gpu, [](const Target &, PredictGradWeightStages &s) { grad_weight_quads(s); }},
};

}  // namespace

void schedule_predict(const std::string &name, const Target &target, PredictStages &s) {
    if (space::is_point_name(name)) return schedule_predict_point(name, target, s);
    if (autoschedulers::is_autoscheduler_row(name)) return autoschedule("predict", name, target, {s.u_hat});
    apply_schedule("predict", kPredictSchedules, name, target, s);
}

void schedule_predict_grad_input(const std::string &name, const Target &target, PredictGradInputStages &s) {
    if (space::is_point_name(name)) return schedule_grad_input_point(name, target, s);
    if (autoschedulers::is_autoscheduler_row(name)) {
        return autoschedule("predict_grad_input", name, target, {s.grad_u});
    }
    apply_schedule("predict_grad_input", kGradInputSchedules, name, target, s);
}

void schedule_predict_grad_weight(const std::string &name, const Target &target, PredictGradWeightStages &s) {
    if (space::is_point_name(name)) return schedule_grad_weight_point(name, target, s);
    if (autoschedulers::is_autoscheduler_row(name)) {
        return autoschedule("predict_grad_weight", name, target, {s.grad_W});
    }
    apply_schedule("predict_grad_weight", kGradWeightSchedules, name, target, s);
}

}  // namespace halcaps

// Schedules for capsule prediction and its gradients (algorithms in
// generators/capsule_prediction.cpp). Each schedule is a named function; the
// comment above it records its measured time and the device it ran on.
//
// Sizes that matter for every schedule here (MNIST shape, B=128, I=1152,
// K=8, J=10, E=16): u_hat and g are 94 MB, W is 5.9 MB, u is 4.7 MB. The
// forward pass and both gradients are bound by moving u_hat or g once.
#include "capsule_prediction_schedules.h"

#include <functional>

#include "autoschedule.h"
#include "common.h"
#include "space_knobs.h"

namespace halcaps {

using namespace Halide;
using schedule_util::check_schedule;
using schedule_util::check_threads;
using schedule_util::one_thread_per_output;

namespace {

const std::vector<std::string> kCpuSchedules = {"cpu"};
const std::vector<std::string> kGpuForwardSchedules = {"naive", "tuned", "registers", "staged", "tuned_k8", "batch_vectors",
                                                         "batch_walk", "batch_rows", "capsule_runs"};
const std::vector<std::string> kGpuGradientSchedules = {"naive", "tuned", "vectors"};

// ---------------------------------------------------------------- forward --

// The knobs of the CPU forward schedule (explored through
// schedules/spaces/capsule_predict_cpu.space; the defaults are `cpu`).
struct PredictCpuTiling {
    int tile_i = 16;       // input capsules per parallel tile
    int vec_mult = 1;      // e vectors this many natural vectors wide
    bool stage_w = true;   // transpose the tile's W slice (e innermost) first
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

// cpu: predict_cpu_tiled with tiles of 16 input capsules (16 x 5 KB of
// transposed W, stays in L2), one natural vector per e row, W staged. Each
// batch element's outputs for a tile are 10 KB written contiguously.
// Measured 2026-11-21, MNIST b128, 2-core AMD EPYC (CI machine, noisy):
// 4.7-5.1 ms, 62-72% of the memcpy bandwidth measured in the same run,
// 4.8-6.8x faster than the naive OpenMP loops (`halcaps bench --device cpu`).
// Tiles of 4 capsules (2.5 KB written per batch element) measured 5.5-5.8 ms
// and 57-59%; tiles of 64, 5.1-5.4 ms.
// The whole CPU space (tile_i, vec_mult, stage_w; results in
// schedules/spaces/capsule_predict_cpu.space) explored 2026-11-21 on a
// 2-core AVX-512 EPYC, where `cpu` took 7.8-8.0 ms: no point is clearly
// faster (tile_i=32: 7.64 ms); staging W is worth 3.7x.
void predict_cpu(const Target &target, PredictStages &s) { predict_cpu_tiled(target, s, {}); }

// naive: the blog's forward kernel, one thread per output element.
// Measured 2026-11-21, NVIDIA H200, `halcaps bench` (inputs rotated past
// L2): MNIST b128 418 us, b512 1648 us (260 and 1014 us when the same small
// inputs stay in L2 between calls); the blog's own kernel (reference/cuda,
// grid-stride) takes 243 us.
void predict_naive(PredictStages &s) {
    one_thread_per_output(s.u_hat, s.accum);
}

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
// the best of the 48 points of schedules/spaces/capsule_predict_cuda.space,
// found by `halcaps explore` on an NVIDIA H200 (2026-11-21; 54.8 us there
// against 68.4 us for `registers`, explore's protocol).
// Measured the same day by `halcaps bench` (inputs rotated past L2): MNIST
// b128 51.9 us (47.7% of the copy bandwidth over the bytes floor; 4.8x the
// blog's kernel), b512 181.6 us (5.2x), wide b32 150.1 us (7.4x).
void predict_tuned(PredictStages &s) { predict_gpu_tiled(s, {32, 1, 32, true}); }

// batch_vectors: `tuned`'s thread (one (e, j) of one capsule, 32 batch
// accumulators) with the accumulators as 4-wide vectors over the batch, so
// that u, staged batch innermost, is read as one 16-byte shared load (the
// same address across the warp: a broadcast) per k and 4 batch elements
// instead of one scalar load per k and batch element; blocks of 160 threads
// over the whole (e, j) row of a capsule (5 warps share one staged u tile and
// write 640 contiguous bytes per batch element); k in tiles of 8, unrolled,
// with K == 8 specialised, so that a tile's W loads are issued together.
// Predicted: MNIST b128 from tuned's 49 us toward 35-40 us (ncu showed
// tuned's L1 93% busy, mostly with its scalar u loads). Measured 2026-11-21
// on an NVIDIA H200 (bench/results/nvidia-h200-batch-vectors/, device time,
// `halcaps bench --device cuda --op predict --repeats 30 --seed 151`): MNIST
// b128 47.5 us (tuned 48.9), b512 176.4 (182.4), wide b32 107.1 (tuned
// 148.0, tuned_k8 109.8): the fastest Halide forward on all three, by 3% at
// MNIST (the hand-written cuda_tuned: 34.7 / 127.5 / 65.0). The prediction
// missed: under ncu (base clocks) the L1 fell from 93% to 64% busy and the
// kernel from 61.5 to 50.6 us, but at full clocks the time barely moved
// (52% of the copy bandwidth); what bounds it there is not pinned down.
// On the way (same protocol): blocks of one warp (`tuned`'s shape) with
// vector reads only, 50.0 / 181.0 / 117.3 us (MNIST b128 62.4 before the
// tile's region was aligned: 4 scalar loads packed into each vector); 16
// batch elements a thread, 61.7 / 226.1 / 168.9; one warp with the k tiles,
// 48.5 / 177.4 / 118.5; blocks of 64 threads, 55.6 / 201.9 / 119.4.
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
    s.accum.update().split(s.rk.x, rko, rki, 8, TailStrategy::GuardWithIf).reorder(s.e, rki, rko).vectorize(s.e).unroll(rki);
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
// Predicted: MNIST b128 from batch_vectors' 47.5 us to about 36 (the hand
// kernel 34.7). Measured 2026-11-22 on an NVIDIA H200
// (bench/results/nvidia-h200-batch-walk/final, device time, `halcaps bench
// --device cuda --op predict --repeats 30 --seed 391`): MNIST b128 38.0 us
// (batch_vectors 47.3, cuda_tuned 34.3; 64.5% of the copy bandwidth over the
// bytes floor, 6.4x the blog's kernel, 2.7x cuBLAS with its permute), b512
// 132.2 (175.6, 125.3; 71.1%, 7.1x). The first cut, whose stores were two
// 4-byte ones (try1 there), took 40.4 / 139.3. ncu at b128: 40 registers,
// 65% of the warps active, L1 91% busy (the hand kernel: 60%, with
// evict-first stores that Halide cannot emit). Tried the same day (try2
// there, seed 401): 4 e a thread with 16-byte stores, 8 x 16 threads each
// walking 8 rows, 48.5 / 169.9 us against 39.2 / 132.7 (64 registers, 46%
// of the warps active), dropped.
//
// batch_rows (whole_row): batch_walk with a block over the capsule's whole
// (e, j) row, 8 * out_caps x 2 threads (80 x 2 at MNIST), each walking 64
// of the tile's 128 rows, so that u's tile is staged once a capsule
// instead of once for every 16 pairs (five times at MNIST). Fast path:
// batch_walk's, with out_caps 8 to 32 (the staging's 64 x 2 threads fit,
// the block stays within 512 threads); elsewhere it runs batch_walk's
// mapping with the staging's wider block (most of its threads idle), so
// the runtime picks it only where its fast path applies. For an
// intermediate u_hat (the layer backward's) it is batch_walk.
// Predicted: MNIST b128 from 38 us toward the hand kernel's 34-35 (batch_walk
// is L1-bound, 91% busy under ncu, the restaging about a seventh of its L1
// work). Measured 2026-11-22 on an NVIDIA H200 (bench/results/nvidia-h200-
// batch-rows/run2, device time, `halcaps bench --device cuda --op predict
// --shapes mnist_b128,mnist_b512,256:1152:8:10:16,128:1152:8:32:16 --seed
// 823` and 824, two rounds): MNIST b128 36.5 / 36.7 us against batch_walk's
// 38.1 / 38.0 (67.3% of the copy bandwidth over the bytes floor, cuda_tuned
// 34.2 / 34.1); b512 132.2 / 132.0 against 131.2 / 131.4; b256 69.2 / 69.2
// against 69.4 / 69.4; out_caps 32 at b128 96.7 / 96.6 against 108.3 /
// 108.3. Under ncu at b128 (base clocks) 37.4 us, L1 55% busy (batch_walk
// 41.0, 85%), DRAM 44% (40%). Tried in the same runs: 32 rows a thread
// (80 x 4 threads) 40.2 us at b128, 16 rows (80 x 8) 56.8, the 64-row walk
// unrolled by 2 or 4 39.6 / 39.2 (48 and 64 registers); none kept.
void predict_batch_walk(PredictStages &s, bool whole_row = false) {
    const Expr K = s.rk.x.extent();
    Expr fast, row_fast = Internal::const_false();
    Expr pairs;  // (e pair, j) pairs of a row, the row's threads in row_fast
    if (s.intermediate_out_dim.defined()) {
        // u_hat inside the layer's backward: Halide's own buffer, its rows
        // aligned by the caller, its batch padded to whole tiles of 128 (u is
        // read clamped there).
        fast = (s.intermediate_out_dim == 16) && (K == 8);
        // batch_rows' block spans out_caps, which only the output buffer
        // gives here: for an intermediate u_hat it is batch_walk.
        whole_row = false;
    } else {
        const Expr out_dim = s.u_hat.output_buffer().dim(0).extent();
        const Expr batch = s.u_hat.output_buffer().dim(3).extent();
        // The 8-byte stores need u_hat's row offsets provably even: its
        // strides are products of extents (dense), but Halide addresses it
        // through the strides themselves, so their parity is part of the
        // condition (always true when out_dim is 16).
        fast = (out_dim == 16) && (K == 8) && (batch % 128 == 0) &&
               (s.u_hat.output_buffer().dim(2).stride() % 2 == 0) &&
               (s.u_hat.output_buffer().dim(3).stride() % 2 == 0);
        // ... and the buffer's start 8-byte aligned: declared here (Halide
        // then checks a host u_hat; device tensors are 16-byte aligned,
        // which the runtime checks, runtime/src/halide_call.cpp). Without it
        // the stores were two 4-byte ones.
        s.u_hat.output_buffer().set_host_alignment(8);
        if (whole_row) {
            // batch_rows: a block over the whole (e, j) row, 8 * out_caps
            // threads wide (out_caps 8 to 32: described above).
            const Expr out_caps = s.u_hat.output_buffer().dim(1).extent();
            pairs = out_caps * 8;
            row_fast = fast && (out_caps >= 8) && (out_caps <= 32);
        }
    }
    Var eo("eo"), ei("ei"), ej("ej"), ejo("ejo"), ejt("ejt"), bo("bo"), bi("bi"), bt("bt"), br("br");
    auto mapping = [&](Stage f, const Expr &pairs_a_block, int rows_a_thread, TailStrategy e_tail, TailStrategy b_tail) {
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

// The knobs of the capsule-runs forward (schedules/spaces/capsule_predict_cuda_runs.space).
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
// (bench/results/nvidia-h200-store-order/). The price: W is read once per
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
// runtime/src/capsule_prediction.cpp).
// Explored on an NVIDIA H200 (bench/results/nvidia-h200-capsule-runs/, runs
// 1-4, 11, 12, `halcaps explore run` over the space): e_vector 4 (56
// registers) lost at every point; reading each row's u through L1 (also
// with 2 or 4 rows unrolled, run 11: 55-266 us), staging the tile 16 rows
// at a time (a barrier and W's loads again each step), copying it 4 floats
// a thread, or walking 2 or 4 rows a thread unrolled together (run 11:
// 113-125 us at b512) were slower (those knobs are gone); run_caps 2 won
// at both sizes, with the whole grid 1152 blocks (2 row groups): 34.4 us at
// MNIST b128 (run_rows 64), 112.4 at b512 (run_rows 256), against
// batch_rows' 36.4 / 132.3; the tile copied by every thread (copy_all, run
// 11) then took 34.0 / 109.4.
void predict_capsule_runs(PredictStages &s, const PredictRunsTiling &t) {
    if (t.e_vector != 2 && t.e_vector != 4) {
        throw CompileError("capsule_predict: capsule runs take e_vector 2 or 4, not " + std::to_string(t.e_vector));
    }
    if (s.intermediate_out_dim.defined()) {
        throw CompileError("capsule_predict: capsule runs schedule only the forward's own output");
    }
    const int V = t.e_vector, C = t.run_caps;
    const Expr K = s.rk.x.extent();
    const Expr out_dim = s.u_hat.output_buffer().dim(0).extent();
    const Expr out_caps = s.u_hat.output_buffer().dim(1).extent();
    const Expr in_caps = s.u_hat.output_buffer().dim(2).extent();
    const Expr batch = s.u_hat.output_buffer().dim(3).extent();
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
                      (s.u_hat.output_buffer().dim(1).stride() % V == 0) &&
                      (s.u_hat.output_buffer().dim(2).stride() % V == 0) &&
                      (s.u_hat.output_buffer().dim(3).stride() % V == 0);
    s.u_hat.output_buffer().set_host_alignment(4 * V);

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
    // flight shorten a phase in which nothing is written: at MNIST b512
    // copy_all took 109.4-109.6 us against 112.4-112.6 for 32 x run_caps
    // threads (b128: 34.0-34.2 against 34.4-34.5; bench/results/nvidia-h200-
    // capsule-runs/run12). Unrolling the copy's walk (4 or 8 floats a thread
    // loaded before their stores, run 12) or copying 4 floats a thread (run
    // 4) was slower: 118.4 and 120.7 us at b512.
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
// Measured 2026-11-23 on an NVIDIA H200 (bench/results/nvidia-h200-capsule-
// runs/run13, device time, `halcaps bench --device cuda --op predict
// --shapes mnist_b128,mnist_b512,wide_b32 --repeats 30 --seed 4302`): MNIST
// b128 34.1 us (71.9% of the copy bandwidth over the bytes floor, 7.1x the
// blog's kernel, 3.0x cuBLAS with its permute; batch_rows 36.3, the
// hand-written cuda_staged 30.0), b512 109.4 (85.9%, 8.6x, 3.5x;
// batch_rows 132.3, cuda_staged 100.5); b256 58.7 against batch_rows'
// 68.8, b1024 230.7 against 257.4, in_dim 16 (128:1152:16:10:16) 63.0
// against batch_vectors' 77.4. Slower at out_caps 32 (b128: 97.9 against
// batch_rows' 96.7) and at wide b32 (182.2 against batch_vectors' 106.3).
// Before copy_all (run 5): 34.1 / 112.0 us.
void predict_capsule_runs_default(PredictStages &s) { predict_capsule_runs(s, {2, 2, 64, 2}); }

// tuned_k8: `tuned`'s tiling with the sum over k in tiles of 8 inside each
// batch element, as the hand-written forward does: a thread reads its 8 W
// values of the tile once and, per batch element, the 8 u values of the tile
// as two 16-byte shared loads into registers (u staged k innermost, rows
// padded to a multiple of 8 so that the loads are provably aligned), then 8
// FMAs. K == 8 is specialised (one tile, no guards); other K run guarded
// tiles. `tuned` instead walks k outside the batch tile: one scalar shared
// load of u per FMA.
// Predicted: MNIST b128 38-42 us (from tuned's 49 us toward the hand
// kernel's 34 us, the inner loop now being the same). Measured 2026-11-21 on
// an NVIDIA H200 (`halcaps bench --device cuda --op predict --repeats 30
// --seed 103`, device time): MNIST b128 54.1 us (tuned 48.9), b512 193.0
// (181.8), wide b32 (K = 16) 109.7 (148.2: 1.35x faster). The prediction
// missed on MNIST. ncu at b128 (ncu's clocks): 61.6 us against tuned's
// 61.3, both at 64 registers (the JIT's cap) and 50% theoretical occupancy,
// DRAM throughput 66% against 89%; 40% of the stall cycles wait on L1TEX
// (local or global) data (bench/results/nvidia-h200-device-timing/ncu/).
// Not spills alone: with the cap raised (HL_CUDA_JIT_MAX_REGISTERS 128 or
// 255) both got slower, tuned_k8 57.2 us and tuned 52.7 at b128
// (predict_register_cap.txt there): fewer resident warps cost more.
// 16 batch
// elements a thread: 62.0 / 229.5 / 151.3 us; 16 with 4 capsules a block:
// 67.9 / 252.3 / 187.1 us (same run), so both were dropped.
void predict_tuned_k8(PredictStages &s) {
    predict_gpu_tiled(s, {32, 1, 32, true});
    const Expr K = s.rk.x.extent();
    std::vector<Var> a = s.u_in.args();  // (k, i, b)
    s.u_in.reorder_storage(a[0], a[2], a[1]).align_storage(a[0], 8);
    RVar rko("rko"), rki("rki");
    s.accum.update().split(s.rk.x, rko, rki, 8, TailStrategy::GuardWithIf).reorder(rki, s.b, rko).unroll(rki);
    // The tile's u values of one batch element, in registers, loaded 4 wide.
    Func u_row = s.u_in.in(s.accum);
    Var ko("u_ko"), ki("u_ki");
    u_row.compute_at(s.accum, s.b)
        .store_in(MemoryType::Register)
        .bound_extent(a[0], 8)
        .split(a[0], ko, ki, 4)
        .vectorize(ki)
        .unroll(ko);
    s.accum.update().specialize(K == 8);
}

// registers: 16 batch accumulators per thread, blocks of 32 x 4 threads,
// nothing staged (the tuned schedule until exploration found a better one).
// Measured 2026-11-21 on an NVIDIA H200 by `halcaps bench`: MNIST b128
// 66.5-71.6 us (37% of the copy bandwidth; 6.2x the naive schedule, 3.6x the
// blog's kernel, 2.9x cuBLAS with its permute); b512 238 us; wide b32 160 us.
// ncu: about 2 instructions issued per FMA (one scalar u load and its address
// per FMA) at 50% occupancy (64 registers); DRAM 22% busy: issue-bound.
// Tried by hand and slower on the same runs (MNIST b128): 32-element batch
// tiles with u staged, 4 input capsules a block (`staged`, 69 us), the same
// with 16 (76 us), W also staged (wrong bounds at tails, dropped), 4 e per
// thread as 16-byte vectors (x4 accumulators, 148 us: Halide scalarises the
// guarded vector stores and the 4 W loads per k are uncoalesced), vectorised
// shared reads of u (Halide splits them into 8-byte pieces), the k reduction
// unrolled by 4 or 8 (guarded past K; 69-80 us, also with u staged: 69-76 us:
// each FMA still needs its own u load; tried again later with K == 8
// specialised, the k loop unrolled inside the batch loop and u staged k
// innermost: the PTX keeps eight scalar ld.shared per batch element at
// consecutive offsets, not merged into 16-byte loads, since the shared
// buffer's 16-byte alignment is not provable; not timed, not kept). The
// hand-written forward (reference/cuda, 37 us) keeps W rows in registers and
// reads u as 16-byte broadcasts, which needs K known at compile time.
void predict_registers(PredictStages &s) { predict_gpu_tiled(s, {32, 4, 16, false}); }

// staged: 32-element batch tiles, u staged in shared memory, 4 input
// capsules a block. Measured 2026-11-21, NVIDIA H200, `halcaps bench`: MNIST
// b128 69-70 us, b512 248 us, wide b32 181 us. One capsule a block (`tuned`)
// runs 4x more, smaller blocks: the barrier after staging stalls fewer
// threads, and more blocks fit an SM.
void predict_staged(PredictStages &s) { predict_gpu_tiled(s, {32, 4, 32, true}); }

// ------------------------------------------------------- gradient w.r.t. u --

// cpu: vectors over k (K = 8 floats, contiguous in W), accumulated in
// registers over (e, j); parallel over tiles of `tile_i` (4) input capsules
// so W's slices (4 x 5 KB) stay in L1 while the batch loop streams g.
// (schedules/spaces/capsule_predict_grad_input_cpu.space sweeps tile_i.)
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
// Measured 2026-11-21, NVIDIA H200, `halcaps bench`: naive grad_u + grad_W
// together, MNIST b128 524 us (421 us for the blog's own kernels).
void grad_input_naive(PredictGradInputStages &s) {
    one_thread_per_output(s.grad_u, s.accum);
}

// ------------------------------------------------------- gradient w.r.t. W --

// cpu: for each input capsule (parallel), the 160 x 8 accumulators (5 KB)
// stay in L1 while the batch loop streams g(:, :, i, b) and u(:, i, b);
// vectors over k.
// Measured 2026-11-21, MNIST b128, 2-core AMD EPYC: grad_u + grad_W together
// 23-26 ms, about 11x faster than the naive OpenMP loops.
void grad_weight_cpu(PredictGradWeightStages &s) {
    s.grad_W.vectorize(s.k, 8, TailStrategy::GuardWithIf).parallel(s.i);
    s.accum.compute_at(s.grad_W, s.i).vectorize(s.k, 8, TailStrategy::GuardWithIf);
    s.accum.update().reorder(s.k, s.e, s.j, s.rb).vectorize(s.k, 8, TailStrategy::GuardWithIf);
}

// naive: the blog's weight-gradient kernel, one thread per output element.
void grad_weight_naive(PredictGradWeightStages &s) {
    one_thread_per_output(s.grad_W, s.accum);
}

// A thread owns one (e, j, i) and a tile of 8 k: 8 accumulators in
// registers over the whole batch. Per batch element it reads g(e, j, i, b)
// (the lanes of a warp read consecutive (e, j): coalesced) and u(k, i, b) for
// its 8 k (the same addresses for the whole warp: broadcasts). The batch loop
// is unrolled by `batch_unroll` so that many loads are in flight. Past the
// edge of K the accumulators read the clamped u and are not stored.
//
// Until grad_u moved to grad_input_lanes, `tuned` was this schedule with
// grad_input_register_tiles: measured 2026-11-21 on an NVIDIA H200 by
// `halcaps bench`, grad_u + grad_W together: MNIST b128 213 us
// (1.3x faster than the first cut, 2.0x the blog's kernels, but 1.7x slower
// than cuBLAS's 123 us and 3.1x slower than the hand-written fused kernel);
// b512 724 us; wide b32 545 us. Under ncu (lower clocks) grad_W takes 68 us
// and grad_u 189 us: grad_u is the problem (see below). Unrolling by 4
// instead of 8 measured the same.
// The knobs (schedules/spaces/capsule_predict_grad_weight_cuda.space; the
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
// runtime/src/capsule_prediction.cpp); `mapping` applied to each fast path,
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
// Predicted (written before the run): from 66 us under ncu to 35-40 us.
// Measured 2026-11-22 on an NVIDIA H200
// (bench/results/nvidia-h200-gradient-tries/run2, ncu at base clocks, MNIST
// b128): 52.6 us (`tuned` 66.4): DRAM 40% busy, L1 83%, 32% of the warps
// active; 128 threads a block with 4 rows unrolled: 60.5 us. The prediction
// missed: the L1 is now the busier unit. Both `vectors` gradients together,
// device time (run3 there, `halcaps bench --device cuda --op
// predict_backward --repeats 30 --seed 441`): MNIST b128 106.4 us (`tuned`
// 153.5, hand-written cuda_fused 66.0), b512 347.0 (555.1, 219.5), wide b32
// 278.6 (518.0, 178.9). Tried before it (run1 there) and slower: `tuned`'s thread with the batch split over 8 (or 4) threads of a
// block, whose partial sums are added through shared memory (an rfactor):
// 113 us (169 us with 4), each thread walking only 16 rows with little in
// flight.
// Until 2026-11-22 the k quads were over blocks (64 threads over the fused
// (e quad, j, i)), so each warp's g loads touched 32 rows. Predicted for the
// k quads on adjacent lanes: 52.6 -> 35-42 us under ncu (the L1 was its bound).
// Measured on an NVIDIA H200 against the previous binary, alternating
// (bench/results/nvidia-h200-squash-groups/run5, seeds 802 and 803): ncu
// 46.6-47.2 us against 52.5-53.3, the L1 55% busy (83%), DRAM 45% (40%);
// both gradients in device time 101.0 / 100.3 us at MNIST b128 against
// 106.4 / 106.7, 332.8 / 332.0 at b512 against 345.8 / 345.8, 247.8 / 247.9
// at wide b32 against 278.0 / 277.5; the layer backward with s 496.0 /
// 496.4 against 505.3 / 504.6 (rows_vectors uses this kernel).
// The prediction missed again: with the L1 freed, each thread's one 16-byte
// g load in flight a row bounds it.
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
// touches 32 sectors (32 L1 wavefronts per instruction). Staging the rows
// through shared memory first (stored batch-innermost, padded to 33 to avoid
// bank conflicts) measured slower (325-337 us for both gradients at MNIST
// b128) and needs more than 48 KB of shared memory at J*E = 512. The
// hand-written kernels instead reduce over (e, j) across lanes. In Halide
// that is an rfactor of the (e, j) reduction into 32 lane partial sums kept
// in registers, W's slice and the partials staged in shared memory, and a
// final sum over lanes; tried 2026-11-21, it generates one kernel of the
// right shape, but bounds inference over the fused and split (e, j) RVars
// makes the staged W region grow with the batch tile (an 8-k bound traps,
// without it the shared allocation exceeds the launch limit). Next to try:
// an explicit lane index in the algorithm, or a wrapper that states the
// staged region.
// The knobs (schedules/spaces/capsule_predict_grad_input_cuda.space; the
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
//
// tuned (grad_input_lanes(4, 4) with grad_weight_register_tiles): measured
// 2026-11-21 on an NVIDIA H200 by `halcaps bench --op predict_backward`
// (seed 22, inputs rotated past L2), grad_u + grad_W together: MNIST b128
// 157 us (the per-row schedule it replaces: 213 us; cuBLAS 123 us; the
// hand-written fused kernel 69 us), b512 559 us (724), wide b32 524 us (548).
// ncu at b128: grad_u alone 111 us, L1 95% busy, 64 registers with 2.1 M
// local-memory spill requests: Halide's CUDA runtime JIT-compiles the PTX
// with at most 64 registers a thread unless HL_CUDA_JIT_MAX_REGISTERS says
// otherwise; with 255 this schedule measured 146-147 us (but the forward
// `tuned` got slower, 55.5 against 51.5 us, so the cap is left alone).
// Tried the same day and slower: 8 batch rows a warp, 2 warps a block
// (229 us; 157 us with 255 registers), and W's slices staged in shared
// memory with (e, j) innermost (231 us, and wrong at wide b32, where the
// staged slice exceeds 48 KB of shared memory).
// Tried later (2026-11-21, H200, device time, `halcaps bench --op
// predict_backward --seed 111`, bench/results/nvidia-h200-device-timing/
// predict_backward_rows.txt): a thread per (b, i) with k in tiles of 8, W's
// slice for the block's capsule staged in shared memory and read as 16-byte
// rows, g read a scalar at a time from each thread's own row. Expected about
// 30-40 us for grad_u (8 FMAs a g load, no spills); with tuned's grad_W both
// gradients took 214.5 us at MNIST b128 against tuned's 153.1 (b512 699.6 vs
// 554.3, wide b32 780.6 vs 517.7): every g load of a warp touches 32 rows,
// far apart. Not kept.
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
// 32-byte sector, which the L1 still holds). The row-per-thread schedule tried
// on 2026-11-21 (comment above grad_input_lanes) read g 4 bytes at a time:
// 4 times the L1 requests. `tuned` (grad_input_lanes) reads W again for
// every 4 batch rows and spills at 64 registers (L1 95% busy).
// Fast path (specialised): out_dim 16, in_dim 8 or 16, every stride a
// multiple of 4 and g and grad_u 16-byte aligned (declared, as for
// grad_weight_quads). Elsewhere the same mapping with guards, scalar loads.
// Predicted (written before the run): grad_u from 111 us under ncu to about
// 40 us (L1-bound, 32 sectors a g load). Measured 2026-11-22 on an NVIDIA
// H200 (bench/results/nvidia-h200-gradient-tries/run2, ncu at base clocks,
// MNIST b128): 64-66 us (`tuned` 111), L1 86% busy, DRAM 33% (both
// gradients in device time: grad_weight_quads' comment). Blocks of 32
// rows with 2 e quads unrolled: 67-68 us. The prediction missed by 1.6x: the
// L1 is still the busy unit. Tried before it (run1 there) and slower:
// `tuned` with W's slices staged in shared memory once a block and read as
// vectors, the block walking 4 (or 2) tiles of 4 batch rows: 173 us (213).
// Tried after it (run6 there): the block's g rows staged in shared memory
// batch innermost (copied along (e, j), coalesced; the batch extent padded
// to 33 or 65 so that both the copy and the reads are conflict-free), each
// thread then reading its own column: 110 us (32 rows a block) and 115 us
// (64), 11% of the warps active (the tile takes 21-42 KB of shared memory),
// and past 48 KB at wide b32 (the launch fails). Dropped.
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

// A point of the schedule space (schedules/spaces/capsule_predict_*.space):
// "space:knob=value,..." parsed strictly by schedules/space_knobs.h into the
// CPU or GPU tiling of the target, then the same schedule functions as the
// named schedules.
void schedule_predict_point(const std::string &name, const Target &target, PredictStages &s) {
    const std::string device = target.has_gpu_feature() ? "cuda" : "cpu";
    std::map<std::string, int> v;
    if (std::string error = space::parse_point("capsule_predict", device, name, &v); !error.empty()) {
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

// Points of the gradient spaces (schedules/spaces/capsule_predict_grad_*.space).
void schedule_grad_input_point(const std::string &name, const Target &target, PredictGradInputStages &s) {
    const char *op = "capsule_predict_grad_input";
    const std::string device = target.has_gpu_feature() ? "cuda" : "cpu";
    std::map<std::string, int> v;
    if (std::string error = space::parse_point(op, device, name, &v); !error.empty()) throw CompileError(error);
    if (device == "cpu") return grad_input_cpu(s, v["tile_i"]);
    check_threads(op, name, v["b_threads"] * v["i_threads"]);
    grad_input_register_tiles(s, {v["k_tile"], v["b_threads"], v["i_threads"], v["ej_unroll"]});
}

void schedule_grad_weight_point(const std::string &name, const Target &target, PredictGradWeightStages &s) {
    const char *op = "capsule_predict_grad_weight";
    const std::string device = target.has_gpu_feature() ? "cuda" : "cpu";
    std::map<std::string, int> v;
    if (std::string error = space::parse_point(op, device, name, &v); !error.empty()) throw CompileError(error);
    check_threads(op, name, v["ej_threads"] * v["i_threads"]);
    grad_weight_register_tiles(s, {v["k_tile"], v["ej_threads"], v["i_threads"], v["batch_unroll"]});
}

}  // namespace

void schedule_predict(const std::string &name, const Target &target, PredictStages &s) {
    if (space::is_point_name(name)) return schedule_predict_point(name, target, s);
    if (autoschedulers::is_autoscheduler_row(name)) return autoschedule("capsule_predict", name, target, {s.u_hat});
    check_schedule("capsule_predict", name, target, kCpuSchedules, kGpuForwardSchedules);
    if (name == "cpu") predict_cpu(target, s);
    if (name == "naive") predict_naive(s);
    if (name == "tuned") predict_tuned(s);
    if (name == "tuned_k8") predict_tuned_k8(s);
    if (name == "batch_vectors") predict_batch_vectors(s);
    if (name == "batch_walk") predict_batch_walk(s);
    if (name == "batch_rows") predict_batch_walk(s, true);
    if (name == "capsule_runs") predict_capsule_runs_default(s);
    if (name == "staged") predict_staged(s);
    if (name == "registers") predict_registers(s);
}

void schedule_predict_grad_input(const std::string &name, const Target &target, PredictGradInputStages &s) {
    if (space::is_point_name(name)) return schedule_grad_input_point(name, target, s);
    if (autoschedulers::is_autoscheduler_row(name)) {
        return autoschedule("capsule_predict_grad_input", name, target, {s.grad_u});
    }
    check_schedule("capsule_predict_grad_input", name, target, kCpuSchedules, kGpuGradientSchedules);
    if (name == "cpu") grad_input_cpu(s);
    if (name == "naive") grad_input_naive(s);
    if (name == "tuned") grad_input_lanes(s, 4, 4);
    if (name == "vectors") grad_input_row_vectors(s);
}

void schedule_predict_grad_weight(const std::string &name, const Target &target, PredictGradWeightStages &s) {
    if (space::is_point_name(name)) return schedule_grad_weight_point(name, target, s);
    if (autoschedulers::is_autoscheduler_row(name)) {
        return autoschedule("capsule_predict_grad_weight", name, target, {s.grad_W});
    }
    check_schedule("capsule_predict_grad_weight", name, target, kCpuSchedules, kGpuGradientSchedules);
    if (name == "cpu") grad_weight_cpu(s);
    if (name == "naive") grad_weight_naive(s);
    if (name == "tuned") grad_weight_register_tiles(s, {});
    if (name == "vectors") grad_weight_quads(s);
}

}  // namespace halcaps

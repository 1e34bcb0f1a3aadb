// Schedules for capsule prediction and its gradients (algorithms in
// generators/capsule_prediction.cpp). Each schedule is a named function; the
// comment above it records its measured time and the device it ran on.
//
// Sizes that matter for every schedule here (MNIST shape, B=128, I=1152,
// K=8, J=10, E=16): u_hat and g are 94 MB, W is 5.9 MB, u is 4.7 MB. The
// forward pass and both gradients are bound by moving u_hat or g once.
#include "capsule_prediction_schedules.h"

#include "common.h"

namespace halcaps {

using namespace Halide;
using schedule_util::check_schedule;
using schedule_util::one_thread_per_output;

namespace {

const std::vector<std::string> kCpuSchedules = {"cpu"};
const std::vector<std::string> kGpuSchedules = {"naive", "tuned", "x_su16", "x_su32", "x_ev8", "x_ev16", "x_ev8i2"};

// ---------------------------------------------------------------- forward --

// cpu: parallel over tiles of 16 input capsules; for each tile, W's slice is
// transposed once into a small buffer with e innermost (16 x 5 KB, stays in
// L2) and reused for every batch element; each (b, i, j) row of E outputs is
// one or two vectors, accumulated in registers over k. Each batch element's
// outputs for a tile are 10 KB written contiguously.
// Measured 2026-11-21, MNIST b128, 2-core AMD EPYC (CI machine, noisy):
// 4.7-5.1 ms, 62-72% of the memcpy bandwidth measured in the same run,
// 4.8-6.8x faster than the naive OpenMP loops (`halcaps bench --device cpu`).
// Tiles of 4 capsules (2.5 KB written per batch element) measured 5.5-5.8 ms
// and 57-59%; tiles of 64, 5.1-5.4 ms.
void predict_cpu(const Target &target, PredictStages &s) {
    const int tile_i = 16;
    const int vec = target.natural_vector_size<float>();
    Var io("io"), ii("ii"), eo("eo"), ei("ei");
    s.u_hat.split(s.i, io, ii, tile_i, TailStrategy::GuardWithIf)
        .split(s.e, eo, ei, vec, TailStrategy::GuardWithIf)
        .reorder(ei, eo, s.j, ii, s.b, io)
        .vectorize(ei)
        .parallel(io);
    // One vector of accumulators per (b, i, j, eo): a constant-size buffer
    // that lives in registers rather than a heap allocation per row.
    s.accum.compute_at(s.u_hat, eo).vectorize(s.e, vec, TailStrategy::GuardWithIf);
    s.accum.update().reorder(s.e, s.rk).vectorize(s.e, vec, TailStrategy::GuardWithIf);

    Func W_by_e = s.W_in;
    std::vector<Var> w = W_by_e.args();  // (k, e, j, i)
    W_by_e.compute_at(s.u_hat, io)
        .reorder_storage(w[1], w[0], w[2], w[3])
        .reorder(w[1], w[0], w[2], w[3])
        .vectorize(w[1], vec, TailStrategy::GuardWithIf);
}

// naive: the blog's forward kernel, one thread per output element.
// Measured 2026-11-21, MNIST b128, NVIDIA H200: 260 us (b512: 1014 us).
void predict_naive(PredictStages &s) {
    one_thread_per_output(s.u_hat, s.accum);
}

// The knobs of the register-blocked GPU forward schedule.
struct PredictGpuTiling {
    int ej_threads = 32;    // threads along the fused (e, j) output row (x)
    int i_threads = 4;      // threads along input capsules (y)
    int batch_tile = 16;    // batch elements per thread, one register accumulator each
    bool stage_u = false;   // stage the block's tile of u in shared memory (vector reads)
    bool stage_W = false;   // stage the block's slice of W in shared memory
    bool vector_u = false;  // with stage_u: vectorize the accumulators by 4 over b
};

// A thread owns one (e, j, i) output row across `batch_tile` batch elements,
// held as accumulators in registers. For each k it reads W(k, e, j, i) once
// and u(k, i, b) for its batch tile (the same address for the whole warp, a
// broadcast), so W is read once per batch tile. A warp writes ej_threads
// consecutive (e, j) outputs (coalesced) per b. Tails (B not a multiple of
// the batch tile, E*J not of ej_threads, I not of i_threads) are guarded when
// stored; at a batch tail the extra accumulators read a clamped u (u_in) and
// are never stored.
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
        .bound_extent(s.b, t.batch_tile)
        .unroll(s.b);
    s.accum.update().reorder(s.b, s.rk).unroll(s.b);

    const int threads = t.ej_threads * t.i_threads;
    if (t.stage_u) {
        // The block's u tile (K x i_threads x batch_tile floats) is copied to
        // shared memory once, batch innermost, so each thread reads four
        // batch elements of one k with a single 16-byte shared load.
        std::vector<Var> a = s.u_in.args();  // (k, i, b)
        Var flat("u_flat"), flat_o("u_flat_o"), flat_i("u_flat_i"), tx("u_tx"), ty("u_ty");
        s.u_in.compute_at(s.u_hat, ejo)
            .store_in(MemoryType::GPUShared)
            .bound_extent(a[1], t.i_threads)
            .bound_extent(a[2], t.batch_tile)
            .align_bounds(a[2], 4)
            .reorder_storage(a[2], a[0], a[1])
            .fuse(a[0], a[1], flat)
            .fuse(flat, a[2], flat)
            .split(flat, flat_o, flat_i, threads, TailStrategy::GuardWithIf)
            .split(flat_i, ty, tx, t.ej_threads)
            .gpu_threads(tx, ty);
        if (t.vector_u) s.accum.update().vectorize(s.b, 4);
    }
    if (t.stage_W) {
        // The block's slice of W, stored e innermost so that the lanes of a
        // warp (consecutive e, then j) read consecutive banks.
        Func W_tile = s.W_in;
        std::vector<Var> a = W_tile.args();  // (k, e, j, i)
        Var flat("W_flat"), flat_o("W_flat_o"), flat_i("W_flat_i"), tx("W_tx"), ty("W_ty");
        W_tile.compute_at(s.u_hat, ejo)
            .store_in(MemoryType::GPUShared)
            .reorder_storage(a[1], a[2], a[0], a[3])
            .fuse(a[0], a[1], flat)
            .fuse(flat, a[2], flat)
            .fuse(flat, a[3], flat)
            .split(flat, flat_o, flat_i, threads, TailStrategy::GuardWithIf)
            .split(flat_i, ty, tx, t.ej_threads)
            .gpu_threads(tx, ty);
    }
}

// A 2-D register tile: a thread owns 4 consecutive e of one (j, i) row
// across `batch_tile` batch elements (4 x batch_tile accumulators). For each
// k it reads 4 values of W and one u(k, i, b) per batch element (a warp-wide
// broadcast), each used for 4 FMAs, and it stores 16-byte vectors: a warp
// writes 32 x 4 consecutive outputs per b. Tiles past the edges of E, J, I and
// B read the clamped inputs (u_in, W_in) and are not stored.
void predict_gpu_e_vectors(PredictStages &s, int batch_tile, int i_threads) {
    Var eo("eo"), ev("ev"), eoj("eoj"), eojo("eojo"), eojt("eojt"), io("io"), it("it"), bo("bo"), bi("bi");
    s.u_hat.split(s.e, eo, ev, 4, TailStrategy::GuardWithIf)
        .fuse(eo, s.j, eoj)
        .split(eoj, eojo, eojt, 32, TailStrategy::GuardWithIf)
        .split(s.i, io, it, i_threads, TailStrategy::GuardWithIf)
        .split(s.b, bo, bi, batch_tile, TailStrategy::GuardWithIf)
        .reorder(ev, bi, eojt, it, eojo, io, bo)
        .gpu_threads(eojt, it)
        .gpu_blocks(eojo, io, bo)
        .vectorize(ev)
        .unroll(bi);
    s.accum.compute_at(s.u_hat, eojt)
        .store_in(MemoryType::Register)
        .bound_extent(s.e, 4)
        .bound_extent(s.j, 1)
        .bound_extent(s.i, 1)
        .bound_extent(s.b, batch_tile)
        .vectorize(s.e)
        .unroll(s.b);
    s.accum.update().reorder(s.e, s.b, s.rk).vectorize(s.e).unroll(s.b);
}

// tuned: predict_gpu_tiled with a 16-element batch tile, nothing staged.
// Measured 2026-11-21, MNIST b128, NVIDIA H200: 83.5 us, 29.5% of the copy
// bandwidth over the bytes floor, 3.1x the naive schedule (b512: 311 us).
// ncu: 51% issue slots busy at 2.1 IPC, 50% occupancy (64 registers): the
// kernel is bound by issuing ~6 instructions per FMA (a scalar u load and
// its address per FMA), not by memory.
void predict_tuned(PredictStages &s) { predict_gpu_tiled(s, {}); }

// ------------------------------------------------------- gradient w.r.t. u --

// cpu: vectors over k (K = 8 floats, contiguous in W), accumulated in
// registers over (e, j); parallel over tiles of 4 input capsules so W's
// slices (4 x 5 KB) stay in L1 while the batch loop streams g.
void grad_input_cpu(PredictGradInputStages &s) {
    Var io("io"), ii("ii"), ko("ko"), ki("ki");
    s.grad_u.split(s.i, io, ii, 4, TailStrategy::GuardWithIf)
        .split(s.k, ko, ki, 8, TailStrategy::GuardWithIf)
        .reorder(ki, ko, ii, s.b, io)
        .vectorize(ki)
        .parallel(io);
    s.accum.compute_at(s.grad_u, ko).vectorize(s.k, 8, TailStrategy::GuardWithIf);
    s.accum.update().reorder(s.k, s.r_ej.x, s.r_ej.y).vectorize(s.k, 8, TailStrategy::GuardWithIf);
}

// naive: the blog's input-gradient kernel, one thread per output element.
// Measured 2026-11-21, MNIST b128, NVIDIA H200: naive grad_u + grad_W together 358 us.
void grad_input_naive(PredictGradInputStages &s) {
    one_thread_per_output(s.grad_u, s.accum);
}

// tuned: threads over (k, b) so the 8 k-threads of one (i, b) share each g
// load (a broadcast) and W(k, e, j, i) is read k-contiguous; blocks over
// (b tiles, i). Each thread walks the (e, j) reduction serially.
// Measured 2026-11-21, MNIST b128, NVIDIA H200: tuned grad_u + grad_W together
// 246 us (11% of the copy bandwidth over the floor): not yet tuned further.
void grad_input_tuned(PredictGradInputStages &s) {
    Var ko("ko"), kt("kt"), bo("bo"), bt("bt");
    s.grad_u.split(s.k, ko, kt, 8, TailStrategy::GuardWithIf)
        .split(s.b, bo, bt, 16, TailStrategy::GuardWithIf)
        .reorder(kt, bt, ko, s.i, bo)
        .gpu_threads(kt, bt)
        .gpu_blocks(ko, s.i, bo);
    s.accum.compute_at(s.grad_u, kt);
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

// tuned: one thread per output, threads over (k, e·j) so a warp writes 128
// contiguous bytes of grad_W and the 8 k-threads of one (e, j, i) share each
// g load; each thread walks the batch serially.
void grad_weight_tuned(PredictGradWeightStages &s) {
    Var ej("ej"), ko("ko"), kt("kt"), ejo("ejo"), ejt("ejt");
    s.grad_W.fuse(s.e, s.j, ej)
        .split(s.k, ko, kt, 8, TailStrategy::GuardWithIf)
        .split(ej, ejo, ejt, 32, TailStrategy::GuardWithIf)
        .reorder(kt, ejt, ko, ejo, s.i)
        .gpu_threads(kt, ejt)
        .gpu_blocks(ko, ejo, s.i);
    s.accum.compute_at(s.grad_W, kt);
}

}  // namespace

void schedule_predict(const std::string &name, const Target &target, PredictStages &s) {
    check_schedule("capsule_predict", name, target, kCpuSchedules, kGpuSchedules);
    if (name == "cpu") predict_cpu(target, s);
    if (name == "naive") predict_naive(s);
    if (name == "tuned") predict_tuned(s);
    if (name == "x_su16") predict_gpu_tiled(s, {32, 4, 16, true, false});
    if (name == "x_su32") predict_gpu_tiled(s, {32, 4, 32, true, false});
    if (name == "x_ev8") predict_gpu_e_vectors(s, 8, 4);
    if (name == "x_ev16") predict_gpu_e_vectors(s, 16, 4);
    if (name == "x_ev8i2") predict_gpu_e_vectors(s, 8, 2);
}

void schedule_predict_grad_input(const std::string &name, const Target &target, PredictGradInputStages &s) {
    check_schedule("capsule_predict_grad_input", name, target, kCpuSchedules, kGpuSchedules);
    if (name == "cpu") grad_input_cpu(s);
    if (name == "naive") grad_input_naive(s);
    if (name == "tuned") grad_input_tuned(s);
}

void schedule_predict_grad_weight(const std::string &name, const Target &target, PredictGradWeightStages &s) {
    check_schedule("capsule_predict_grad_weight", name, target, kCpuSchedules, kGpuSchedules);
    if (name == "cpu") grad_weight_cpu(s);
    if (name == "naive") grad_weight_naive(s);
    if (name == "tuned") grad_weight_tuned(s);
}

}  // namespace halcaps

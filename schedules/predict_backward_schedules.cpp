// Schedules for both prediction gradients as one pipeline (generator
// predict_backward, generators/predict.cpp). The two-pipeline
// gradients (predict_grad_input and _grad_weight) read all of g each:
// at MNIST b128 that alone is 2 x 22 us at the H200's copy bandwidth. Here one
// kernel reads g once for both.
#include <string>
#include <vector>

#include "common.h"
#include "predict_schedules.h"

namespace halcaps {

using namespace Halide;
using schedule_util::apply_schedule;
using schedule_util::ScheduleTable;
using schedule_util::ScheduleTarget;

namespace {

// fused_cpu: checks the algorithm on machines without a GPU (the two-pipeline
// `cpu` gradients are the CPU default). grad_u parallel over batch rows,
// grad_W over input capsules, both vectorised over k.
void backward_cpu(PredictBackwardStages &s) {
    s.grad_u.vectorize(s.k, 8, TailStrategy::GuardWithIf).parallel(s.b);
    s.accum_u.compute_at(s.grad_u, s.i).vectorize(s.k, 8, TailStrategy::GuardWithIf);
    s.accum_u.update().reorder(s.k, s.r_ej.x, s.r_ej.y).vectorize(s.k, 8, TailStrategy::GuardWithIf);
    s.grad_W.vectorize(s.k, 8, TailStrategy::GuardWithIf).parallel(s.i);
    s.accum_W.compute_at(s.grad_W, s.i).vectorize(s.k, 8, TailStrategy::GuardWithIf);
    s.accum_W.update().reorder(s.k, s.e, s.j, s.rb).vectorize(s.k, 8, TailStrategy::GuardWithIf);
}

// The knobs of backward_chunks: batch rows a block (a chunk), and how many
// threads share a row's k in grad_u's part.
struct BackwardChunking {
    int chunk = 32;
    int k_groups = 2;
};

// A block per (input capsule i, chunk of `chunk` batch rows), two kernels:
//  1. The block stages its chunk of g (J x E x chunk floats, batch innermost)
//     and W's slice of i (J x E x K) in shared memory, then
//     - computes grad_W's partial sums over the chunk: a thread per (e, j)
//       (threads e along x, j along y), 8 accumulators in registers (a
//       vector over k), per batch row one shared load of g and u's row
//       (global memory: one address across the block, L1 hits); the partial sums (one grad_W-sized slab a chunk) go to
//       a scratch buffer;
//     - computes grad_u of the chunk's rows: a thread per (batch row,
//       8 / k_groups of k), 16 lanes along batch rows, walking (e, j) with
//       a shared load of g and a broadcast of W's k.
//     Both parts are one kernel through compute_with on their (chunk, i)
//     block loops; the partial sums are an rfactor of grad_W's sum over the
//     batch split into chunks.
//  2. grad_W sums the chunks' partial sums: a thread per (e, j, i).
// g's tile keeps the batch innermost with a row of chunk + 1 floats (odd):
// grad_u's lanes read consecutive batch rows, grad_W's and the copy's lanes
// consecutive (e, j) at a stride of chunk + 1, both free of bank conflicts.
// Every tile's size is a multiple of 8 floats (e and k padded): Halide packs
// the block's tiles one after the other, and a tile of odd size would misalign
// the next one's vector loads.
// Applies where a block's threads (at most 1024) and staged tiles (at most
// 48 KB) fit; elsewhere the kernel returns an error naming the limit.
// Each block's phases (copy, grad_W part, grad_u part) wait on each other
// behind barriers, and the partial sums cost a grad_W-sized slab a chunk, so
// it is slower than the two-pipeline `vectors` and not the default.
// Measured: both gradients 118.1 us at MNIST b128 on an H200 (`vectors` 96.4).
void backward_chunks(PredictBackwardStages &s, const BackwardChunking &t) {
    constexpr int rows_a_lane_group = 16;  // grad_u's lanes along batch rows
    constexpr int copy_unroll = 16;        // g rows a thread loads before storing them
    const int chunk = t.chunk, k_per_thread = 8 / t.k_groups;
    const Expr K = s.grad_u.output_buffer().dim(0).extent();
    const Expr E = s.grad_W.output_buffer().dim(1).extent();
    const Expr J = s.grad_W.output_buffer().dim(2).extent();
    auto round_up_8 = [](const Expr &x) { return (x + 7) / 8 * 8; };
    const Expr u_rows = chunk / rows_a_lane_group * ((K + k_per_thread - 1) / k_per_thread);
    const Expr shared_bytes = 4 * ((chunk + 1) * round_up_8(E) * J + round_up_8(K) * E * J);
    const Expr threads = max(E, rows_a_lane_group) * max(J, u_rows);
    const Expr fits = shared_bytes <= schedule_util::kDefaultSharedBytes && threads <= schedule_util::kMaxBlockThreads;

    // grad_W's sum over the batch, split into chunks; intm(k, e, j, i, bo)
    // holds a chunk's partial sums.
    Var bo("bo"), bi("bi"), bx("bx"), by("by"), ko("ko"), ki("ki");
    RVar rbo("rbo"), rbi("rbi");
    s.accum_W.update().split(s.rb.x, rbo, rbi, chunk, TailStrategy::GuardWithIf);
    Func intm = s.accum_W.update().rfactor({{rbo, bo}});
    Func partials = intm.in(s.accum_W);

    // Kernel 2: a thread per (e, j), a block per input capsule.
    s.grad_W.split(s.k, ko, ki, 8, TailStrategy::GuardWithIf)
        .reorder(ki, s.e, s.j, ko, s.i)
        .gpu_threads(s.e, s.j)
        .gpu_blocks(s.i)
        .vectorize(ki);
    s.accum_W.compute_at(s.grad_W, s.e).store_in(MemoryType::Register).bound_extent(s.k, 8).vectorize(s.k);
    s.accum_W.update().reorder(s.k, rbo).vectorize(s.k);

    // Kernel 1, grad_W's part: the partial sums of the chunk. The mapping,
    // then the shapes it fits (a specialization copies the mapping;
    // compute_with below matches grad_u's loops against it).
    const std::vector<Var> pa = partials.args();  // (k, e, j, i, bo)
    Var pko("pko"), pki("pki");
    partials.compute_root()
        .split(pa[0], pko, pki, 8, TailStrategy::GuardWithIf)
        .reorder(pki, pa[1], pa[2], pko, pa[3], pa[4])
        .gpu_threads(pa[1], pa[2])
        .gpu_blocks(pa[3], pa[4])
        .vectorize(pki);
    partials.specialize(fits && K == 8);  // MNIST's in_dim: u's and W's loads need no clamps
    partials.specialize(fits);
    partials.specialize_fail(
        "predict_backward (fused): the block's tiles or threads exceed the launch limits at this shape "
        "(out_caps x out_dim too large); use another implementation");
    const std::vector<Var> ia = intm.args();
    intm.compute_at(partials, pa[1]).store_in(MemoryType::Register).bound_extent(ia[0], 8).vectorize(ia[0]);
    RVar rbu("rbu"), rbv("rbv");
    intm.update()
        .split(rbi, rbu, rbv, 4, TailStrategy::GuardWithIf)
        .reorder(ia[0], rbv, rbu)
        .vectorize(ia[0])
        .unroll(rbv);

    // Kernel 1, grad_u's part, fused with the partial sums' block loops. A
    // warp's two halves share their batch rows and differ in k.
    s.grad_u.split(s.b, bo, bi, chunk, TailStrategy::GuardWithIf)
        .split(bi, by, bx, rows_a_lane_group)
        .split(s.k, ko, ki, k_per_thread, TailStrategy::GuardWithIf)
        .fuse(ko, by, by)
        .reorder(ki, bx, by, s.i, bo)
        .gpu_threads(bx, by)
        .gpu_blocks(s.i, bo)
        .vectorize(ki);
    s.grad_u.compute_with(partials, pa[3]);
    s.accum_u.compute_at(s.grad_u, bx).store_in(MemoryType::Register).bound_extent(s.k, k_per_thread).vectorize(s.k);
    RVar reo("reo"), rei("rei");
    s.accum_u.update()
        .split(s.r_ej.x, reo, rei, 4, TailStrategy::GuardWithIf)
        .reorder(s.k, rei, reo, s.r_ej.y)
        .vectorize(s.k)
        .unroll(rei);

    // The block's staged tiles.
    Func g_tile = s.g_in.in({intm, s.accum_u});
    const std::vector<Var> ga = g_tile.args();  // (e, j, i, b)
    Var gbo("gbo"), gbi("gbi");
    g_tile.compute_at(partials, pa[3])
        .store_in(MemoryType::GPUShared)
        .reorder_storage(ga[3], ga[0], ga[1], ga[2])
        .bound_storage(ga[3], chunk + 1)
        .align_storage(ga[0], 8)
        .split(ga[3], gbo, gbi, copy_unroll, TailStrategy::GuardWithIf)
        .reorder(gbi, gbo, ga[0], ga[1])
        .gpu_threads(ga[0], ga[1])
        .unroll(gbi);
    Func W_tile = s.W_in.in(s.accum_u);
    const std::vector<Var> wa = W_tile.args();  // (k, e, j, i)
    W_tile.compute_at(partials, pa[3])
        .store_in(MemoryType::GPUShared)
        .align_storage(wa[0], 8)
        .reorder(wa[0], wa[1], wa[2], wa[3])
        .gpu_threads(wa[1], wa[2])
        .vectorize(wa[0], 8, TailStrategy::GuardWithIf);
}

const ScheduleTable<PredictBackwardStages> kBackwardSchedules = {
    {"fused_cpu", ScheduleTarget::cpu, [](const Target &, PredictBackwardStages &s) { backward_cpu(s); }},
    {"fused", ScheduleTarget::gpu,
     [](const Target &, PredictBackwardStages &s) {
         backward_chunks(s, {32, 2});
     }},
};

}  // namespace

void schedule_predict_backward(const std::string &name, const Target &target, PredictBackwardStages &s) {
    apply_schedule("predict_backward", kBackwardSchedules, name, target, s);
}

}  // namespace halcaps

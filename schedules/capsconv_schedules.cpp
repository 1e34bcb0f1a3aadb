// Schedules for the capsule convolution and its gradients (algorithms in
// generators/capsconv.cpp). Each schedule is a named function; the comment
// above it records its measured time and the device it ran on.
//
// Every output element is a 4x4 pose matrix, 16 contiguous floats: the CPU
// schedules make those 16 floats one vector (the two pose dims vectorised
// together; two vectors under AVX2), so the 4x4 product is a handful of
// shuffles and FMAs per reduction step, and the stride and padding of the
// convolution only ever move whole vectors.
#include "capsconv_schedules.h"

#include <map>

#include "autoschedule.h"
#include "common.h"
#include "space_knobs.h"

namespace halcaps {

using namespace Halide;
using schedule_util::apply_schedule;
using schedule_util::kDefaultSharedBytes;
using schedule_util::ScheduleTable;
using schedule_util::ScheduleTarget;

namespace {

// Output pixels along x held in registers at once by the cpu schedules: each
// filter pose loaded is reused for this many pixels.
constexpr int kPixelBlock = 4;

// The common shape of the three cpu schedules. `out` has the two pose dims
// innermost (p0, p1), then `inner` (a dim of the output pixel block's row:
// x for the forward and grad_input, ci for grad_filter), then the rest; the
// two outermost are fused and run in parallel. `accum` is computed per block
// of kPixelBlock along `inner`, as kPixelBlock 16-float vectors in registers,
// the reduction's innermost RVar (the pose's inner index, 4) unrolled.
void pose_block_cpu(Func out, Func accum, const RDom &r) {
    std::vector<Var> d = out.args();  // (p0, p1, a, b, c, e): pose, pose, then 4 more
    Var p0 = d[0], p1 = d[1], a = d[2], b = d[3], c = d[4], e = d[5];
    Var bo("bo"), bi("bi"), ce("ce");
    out.split(b, bo, bi, kPixelBlock, TailStrategy::GuardWithIf)
        .reorder(p0, p1, bi, a, bo, c, e)
        .fuse(c, e, ce)
        .parallel(ce)
        .vectorize(p0, 4)
        .vectorize(p1, 4)
        .unroll(bi);
    // A whole block even at the tail: the inputs are zero or clamped outside
    // their ranges, and the pixels past the edge are never stored.
    accum.compute_at(out, a)
        .bound_extent(p0, 4)
        .bound_extent(p1, 4)
        .bound_extent(b, kPixelBlock)
        .vectorize(p0)
        .vectorize(p1)
        .unroll(b);
    accum.update().reorder(p0, p1, b, r.x, r.y, r.z, r.w).vectorize(p0).vectorize(p1).unroll(b).unroll(r.x);
}

// A copy of the zero-padded operand `padded` per row of the output (the
// parallel loop `ce` of pose_block_cpu): the rows that output row reads, all
// capsule types, with the padding written out as zeros, so the inner loops
// load poses with no boundary test. Each pose is stored transposed: the
// accumulation needs, for one column c, the pose's 4 rows across the vector
// (lanes (j, i) take pose(i, c)), which is then one dense 4-float load
// broadcast by a shuffle rather than 4 scalar loads and inserts.
void stage_rows_transposed(Func out, Func padded) {
    std::vector<Var> a = padded.args();  // (column, row, caps, x, y, n)
    padded.compute_at(out, Var("ce"))
        .reorder_storage(a[1], a[0], a[2], a[3], a[4], a[5])
        .reorder(a[1], a[0], a[2], a[3], a[4], a[5])
        .vectorize(a[1], 4)
        .vectorize(a[0], 4);
}

// cpu: pose_block_cpu over output rows (n, y) in parallel, x blocks of 4,
// the input rows staged per output row (stage_rows_transposed).
// Any shape; the CPU default when co is not a multiple of 4.
// Measured: 1.3 / 63.9 / 2.7 ms (seed / layer / stride2) on the 2-core AMD
// EPYC build machine, 17-21x the naive OpenMP loops.
void capsconv_cpu(CapsConvStages &s) {
    pose_block_cpu(s.O, s.accum, s.r);
    stage_rows_transposed(s.O, s.I_pad);
}

// cpu_co4 (the forward only): like `cpu`, but each block of accumulators is
// 4 output pixels x 4 output capsule types (16 vectors in registers), so
// that each step of the reduction loads and broadcasts 4 filter poses and 4
// input poses for 16 FMAs, where `cpu` needs 1 + 4 for 4: the 4x4 product's
// broadcasts (shuffles), not the FMAs, bound `cpu`. Past the last capsule
// type the block still computes a whole tile from the clamped filter and
// discards it, so with co = 1 (the seed problem) it does 4x the work: meant
// for layers with co a multiple of 4 (the runtime's CPU default then).
// Measured: 2.8 / 34.8 / 1.5 ms (seed / layer / stride2) on the 2-core AMD
// EPYC build machine; on the idle machine the layer reached 78.5% of the FMA
// peak measured in the same run.
void capsconv_cpu_co4(CapsConvStages &s) {
    std::vector<Var> d = s.O.args();  // (j, i, co, x, y, n)
    Var p0 = d[0], p1 = d[1], co = d[2], x = d[3], y = d[4], n = d[5];
    Var xo("xo"), xi("xi"), coo("coo"), coi("coi"), ce("ce");
    s.O.split(x, xo, xi, kPixelBlock, TailStrategy::GuardWithIf)
        .split(co, coo, coi, 4, TailStrategy::GuardWithIf)
        .reorder(p0, p1, xi, coi, xo, coo, y, n)
        .fuse(y, n, ce)
        .parallel(ce)
        .vectorize(p0, 4)
        .vectorize(p1, 4)
        .unroll(xi)
        .unroll(coi);
    s.accum.compute_at(s.O, xo)
        .bound_extent(p0, 4)
        .bound_extent(p1, 4)
        .bound_extent(x, kPixelBlock)
        .bound_extent(co, 4)
        .vectorize(p0)
        .vectorize(p1)
        .unroll(x)
        .unroll(co);
    s.accum.update()
        .reorder(p0, p1, x, co, s.r.x, s.r.y, s.r.z, s.r.w)
        .vectorize(p0)
        .vectorize(p1)
        .unroll(x)
        .unroll(co)
        .unroll(s.r.x);
    stage_rows_transposed(s.O, s.I_pad);
}

// ------------------------------------------------------------------- GPU --
//
// The forward and grad_input share one GPU schedule (pose_conv_gpu): both
// are "for every output pose (p0, p1) of capsule type `a` at pixel (x, y, n),
// sum over a pose index, a capsule type and the filter taps of operand x
// filter products". A block owns a tile of output pixels and capsule types;
// its threads own pixels (and, with row_threads, one pose row each) and keep
// their accumulators in registers across the whole reduction. The reduction's
// capsule types are walked in chunks; for each chunk the block copies the
// filter poses it needs (and, with stage_input, the input tile plus its halo)
// to shared memory, then every thread runs the chunk's taps from there.
// Halide puts the barriers around each copy.
//
// GPU times below: device time on an H200 for the seed / layer (n=8, 32x32,
// ci=co=32, 3x3, pad 1) / stride2 shapes. In the same run Vaidya's I3 kernel
// (cuda_vaidya_i3) took 46.3 / 1298.8 / 194.7 us and cuDNN with its permutes
// 82.0 / 283.0 / 80.4.

struct PoseConvGpuTiling {
    int x_threads;                // output pixels along x, one thread each
    int y_threads;                // output pixels along y, one thread each
    bool row_threads;             // one thread per pose row (4 accumulators a capsule type), else the whole pose (16)
    int caps_tile;                // output capsule types per thread, all in registers
    int chunk;                    // reduction capsule types per shared-memory step
    bool stage_input;             // copy the input tile (with its halo) to shared memory too
    int filter_out_caps_dim = 2;  // the filter dim of the output's capsule type (forward: co, 2)
    // Forward with row_threads only: the 4 outputs of a thread's pose row are
    // one vector (p0 vectorized), each step loads the thread's input pose row
    // as one 16-byte vector into registers and the filter pose's rows as
    // 16-byte vectors from shared memory, and the output row is one 16-byte
    // store (the pose tensors' 16-byte alignment: generators/dense.h).
    bool vector_rows = false;
    // With vector_rows: output pixels along x per thread, x_threads apart
    // (neighbouring lanes keep neighbouring pixels), in registers: each
    // filter pose row loaded from shared memory feeds this many pixels.
    int x_pixels = 1;
};

// `f`, computed at a loop of the block `accum` runs in, copied to shared
// memory by every thread of the block: its region flattened, then dealt out
// over the block's thread dims (the same extents as the compute, so that
// Halide's fused thread loops do not grow the block).
// `fixed` gives the extents of the dims known at build time (dim index,
// extent): the pose dims and capsule-type tiles. Stated, they keep the shared
// allocation's size free of the block and chunk indices (otherwise the host
// takes the maximum over every block before each launch), and a tail chunk
// copies a whole chunk (the operands are zero or clamped past their ends).
void stage_in_shared(Func f, Func accum, const RVar &at, const std::vector<int> &thread_extents,
                     const std::vector<std::pair<int, int>> &fixed) {
    std::vector<Var> a = f.args();
    for (const auto &[dim, extent] : fixed) f.bound_extent(a[dim], extent);
    Var flat("flat"), fo("fo"), fi("fi"), t0("t0"), t1("t1"), t2("t2"), rest("rest");
    int threads = 1;
    for (int e : thread_extents) threads *= e;
    f.compute_at(accum, at).store_in(MemoryType::GPUShared);
    f.fuse(a[0], a[1], flat);
    for (size_t d = 2; d < a.size(); d++) f.fuse(flat, a[d], flat);
    f.split(flat, fo, fi, threads, TailStrategy::GuardWithIf);
    if (thread_extents.size() == 3) {
        f.split(fi, rest, t0, thread_extents[0]).split(rest, t2, t1, thread_extents[1]).gpu_threads(t0, t1, t2);
    } else {
        f.split(fi, t1, t0, thread_extents[0]).gpu_threads(t0, t1);
    }
}

// An operand of a vector_rows schedule (input tile or filter poses),
// copied to shared memory by the block's own (pose row, x, y) threads: each
// thread copies one pose row (dim 0, 4 floats) as a 16-byte vector, the
// thread's pose row is dim 1, and the block's x and y threads walk the
// operand's two spatial dims (pixels for the input, filter taps for the
// filter) in steps of the block's extents. The capsule dims (`unrolled`:
// dim index and extent) are unrolled in each thread. The copy has no
// division by run-time extents (stage_in_shared's flattened copy divides by
// the tile's extents, which depend on the stride and filter size) and a
// thread's unrolled loads are in flight together.
void stage_pose_rows_in_shared(Func f, Func accum, const RVar &at, int x_threads, int y_threads, int x_dim, int y_dim,
                               const std::vector<std::pair<int, int>> &unrolled) {
    std::vector<Var> a = f.args();
    Var xo("xo"), xt("xt"), yo("yo"), yt("yt");
    f.compute_at(accum, at)
        .store_in(MemoryType::GPUShared)
        .bound_extent(a[0], 4)
        .bound_extent(a[1], 4)
        .split(a[x_dim], xo, xt, x_threads, TailStrategy::GuardWithIf)
        .split(a[y_dim], yo, yt, y_threads, TailStrategy::GuardWithIf);
    std::vector<VarOrRVar> order = {a[0]};
    for (const auto &[dim, extent] : unrolled) {
        f.bound_extent(a[dim], extent).unroll(a[dim]);
        order.push_back(a[dim]);
    }
    for (const VarOrRVar &v : {VarOrRVar(a[1]), VarOrRVar(xt), VarOrRVar(yt), VarOrRVar(xo), VarOrRVar(yo)}) {
        order.push_back(v);
    }
    f.reorder(order).vectorize(a[0]).gpu_threads(a[1], xt, yt);
}

// The input tile (c, i, ci, x, y, n): the chunk's capsule types unrolled;
// pixels stored 64 bytes apart (the chunk's capsule types outermost), so a
// warp's 8 pixels x 4 rows span 512 contiguous bytes: no bank conflicts.
void stage_rows_in_shared(Func f, Func accum, const RVar &at, int x_threads, int y_threads, int chunk) {
    std::vector<Var> a = f.args();
    stage_pose_rows_in_shared(f, accum, at, x_threads, y_threads, 3, 4, {{2, chunk}, {5, 1}});
    f.reorder_storage(a[0], a[1], a[3], a[4], a[2], a[5]);
}

// The filter poses (j, c, co, ci, dx, dy): the thread's output types and the
// chunk's input types unrolled, the taps dx and dy along the x and y threads.
void stage_filter_rows_in_shared(Func f, Func accum, const RVar &at, int x_threads, int y_threads, int caps_tile,
                                 int chunk) {
    stage_pose_rows_in_shared(f, accum, at, x_threads, y_threads, 4, 5, {{2, caps_tile}, {3, chunk}});
}

// `out` (p0, p1, a, x, y, n), `accum` its pure-init + update, `r` over
// (pose index, capsule type, dx, dy), `filter` and `input` the two operands,
// `stride` the run-time stride (it sizes the staged input tile).
void pose_conv_gpu(Func out, Func accum, const RDom &r, Func filter, Func input, const PoseConvGpuTiling &t,
                   const Expr &stride) {
    if (t.vector_rows && (!t.row_threads || t.filter_out_caps_dim != 2)) {
        throw CompileError("pose_conv_gpu: vector_rows is for the forward with row_threads only");
    }
    // With more than 2 output capsule types a thread, Halide no longer sees
    // that each thread touches only its own accumulators and keeps the
    // block's whole tile per thread (local memory, 1024 floats at 8 x 2
    // pixels); its 16-byte accesses there faulted with
    // CUDA_ERROR_MISALIGNED_ADDRESS on an H200.
    if (t.vector_rows && t.caps_tile > 2) {
        throw CompileError("pose_conv_gpu: vector_rows takes at most 2 output capsule types a thread (caps_tile)");
    }
    if (t.x_pixels > 1 && !t.vector_rows) {
        throw CompileError("pose_conv_gpu: x_pixels > 1 needs vector_rows");
    }
    std::vector<Var> d = out.args();
    Var p0 = d[0], p1 = d[1], a = d[2], x = d[3], y = d[4], n = d[5];
    Var xo("xo"), xt("xt"), xb("xb"), xi("xi"), yo("yo"), yt("yt"), ao("ao"), ai("ai"), an("an");
    const int block_x = t.x_threads * t.x_pixels;  // output pixels along x a block
    if (t.x_pixels > 1) {
        out.split(x, xo, xb, block_x, TailStrategy::GuardWithIf).split(xb, xi, xt, t.x_threads);
    } else {
        out.split(x, xo, xt, t.x_threads, TailStrategy::GuardWithIf);
    }
    out.split(y, yo, yt, t.y_threads, TailStrategy::GuardWithIf)
        .split(a, ao, ai, t.caps_tile, TailStrategy::GuardWithIf)
        .fuse(ao, n, an);
    const std::vector<int> threads =
        t.row_threads ? std::vector<int>{4, t.x_threads, t.y_threads} : std::vector<int>{t.x_threads, t.y_threads};
    if (t.x_pixels > 1) {
        out.reorder(p0, ai, xi, p1, xt, yt, xo, yo, an).gpu_threads(p1, xt, yt).unroll(xi);
    } else if (t.row_threads) {
        out.reorder(p0, ai, p1, xt, yt, xo, yo, an).gpu_threads(p1, xt, yt);
    } else {
        out.reorder(p0, p1, ai, xt, yt, xo, yo, an).gpu_threads(xt, yt).unroll(p1);
    }
    out.gpu_blocks(xo, yo, an).unroll(ai);
    if (t.vector_rows) {
        out.vectorize(p0);
    } else {
        out.unroll(p0);
    }

    // The block's accumulators, a whole tile even at the edges (the operands
    // are zero or clamped outside their ranges; what lies past the output is
    // never stored), in registers: each thread only touches its own.
    accum.compute_at(out, xo)
        .store_in(MemoryType::Register)
        .bound_extent(p0, 4)
        .bound_extent(p1, 4)
        .bound_extent(a, t.caps_tile)
        .bound_extent(x, block_x)
        .bound_extent(y, t.y_threads)
        .bound_extent(n, 1);
    RVar rco("rco"), rci("rci");
    Stage update = accum.update();
    update.split(r.y, rco, rci, t.chunk, TailStrategy::GuardWithIf);
    if (t.x_pixels > 1) {
        // A thread's pixels innermost but outside the pose index r.x, so the
        // filter row loaded for one r.x step is the same load for each pixel
        // (merged after unrolling), and each pixel's input row is one vector.
        accum.split(x, xi, xt, t.x_threads).reorder(p0, a, n, xi, p1, xt, y).gpu_threads(p1, xt, y).unroll(xi);
        update.split(x, xi, xt, t.x_threads)
            .reorder(p0, a, n, r.x, xi, r.z, r.w, rci, p1, xt, y, rco)
            .gpu_threads(p1, xt, y)
            .unroll(xi);
    } else if (t.row_threads) {
        accum.reorder(p0, a, n, p1, x, y).gpu_threads(p1, x, y);
        update.reorder(p0, a, n, r.x, r.z, r.w, rci, p1, x, y, rco).gpu_threads(p1, x, y);
    } else {
        accum.reorder(p0, p1, a, n, x, y).gpu_threads(x, y).unroll(p1);
        update.reorder(p0, p1, a, n, r.x, r.z, r.w, rci, x, y, rco).gpu_threads(x, y).unroll(p1);
    }
    accum.unroll(a).unroll(n);
    update.unroll(a).unroll(n).unroll(r.x);
    if (t.vector_rows) {
        accum.vectorize(p0);
        update.vectorize(p0);
        // The thread's input pose row for one tap: 4 floats, one vector load,
        // kept in registers while the unrolled r.x steps use its lanes.
        Func row = input.in(accum);
        row.compute_at(t.x_pixels > 1 ? LoopLevel(accum, xi) : LoopLevel(accum, RVar(r.z)))
            .store_in(MemoryType::Register)
            .vectorize(row.args()[0]);
    } else {
        accum.unroll(p0);
        update.unroll(p0);
        if (!t.stage_input && t.filter_out_caps_dim == 2) {
            // The forward's input pose values of one tap, loaded into
            // registers: inlined into the products, Halide folds a padding
            // zero times the filter to 0, dropping a NaN or inf filter
            // element there (the formula's 0 * NaN is NaN).
            Func pose = input.in(accum);
            pose.compute_at(accum, RVar(r.z))
                .store_in(MemoryType::Register)
                .unroll(pose.args()[0])
                .unroll(pose.args()[1]);
        }
    }

    // The filter's capsule dims: (2, 3) = (co, ci) in the forward, where co
    // is the output's and ci the reduction's; the other way round in grad_input.
    const int filter_out = t.filter_out_caps_dim, filter_red = 5 - filter_out;
    if (t.vector_rows) {
        stage_filter_rows_in_shared(filter, accum, rco, t.x_threads, t.y_threads, t.caps_tile, t.chunk);
    } else {
        stage_in_shared(filter, accum, rco, threads, {{0, 4}, {1, 4}, {filter_red, t.chunk}});
    }
    if (t.stage_input && t.vector_rows) {
        stage_rows_in_shared(input, accum, rco, t.x_threads, t.y_threads, t.chunk);
        // The staged input tile and filter poses grow with the stride and the
        // filter: where they pass the launch limit the kernel reports
        // halide_error_code_specialize_fail before any device work (the
        // runtime's unsupported_shape) instead of failing to launch.
        const Expr kw = r.z.extent(), kh = r.w.extent();
        const Expr tile_pixels = ((block_x - 1) * stride + kw) * ((t.y_threads - 1) * stride + kh);
        const Expr shared_bytes = 64 * t.chunk * (tile_pixels + t.caps_tile * kw * kh);
        out.specialize(shared_bytes <= kDefaultSharedBytes);
        out.specialize_fail(
            "the staged input tile and filter poses of this stride and filter size need more than "
            "48 KB of shared memory");
    } else if (t.stage_input) {
        stage_in_shared(input, accum, rco, threads, {{0, 4}, {1, 4}});
    }
}

// vaidya: Vaidya's decomposition: one thread per output pixel (for one n and
// one co), its whole 4x4 output pose in 16 registers, the filter poses of one
// input capsule type at a time staged in shared memory (all taps), the input
// read straight from global memory (through L1). Blocks of 32 x 4 pixels.
// Any shape. Measured: 65.2 / 4751.5 / 278.0 us on an H200.
void capsconv_vaidya(CapsConvStages &s) {
    pose_conv_gpu(s.O, s.accum, s.r, s.K_in, s.I_pad, {32, 4, false, 1, 1, false}, s.stride);
}

// tuned: four threads per output pixel, one per pose row i (4 accumulators,
// the row times the filter pose), so the seed problem (one co, 124 x 124
// pixels) runs 61504 threads rather than 15376; blocks of 32 x 2 pixels x 4
// rows; filter poses of 4 input types a step staged in shared memory, the
// input read through L1 (staging it too, with its halo, needs more than the
// default 48 KB of shared memory at stride 3 for 32 x 2 tiles; staged_rows
// stages it on smaller tiles). Any shape; the CUDA default's fallback where
// staged_rows refuses the shape.
// Measured: 29.3 / 1484.1 / 201.5 us on an H200.
void capsconv_tuned(CapsConvStages &s) {
    pose_conv_gpu(s.O, s.accum, s.r, s.K_in, s.I_pad, {32, 2, true, 1, 4, false}, s.stride);
}

// tuned_co4: as tuned, but each thread holds 4 output capsule types (16
// registers), so each input row loaded feeds 4 filter poses: for layers with
// many co (n=8, 32x32, ci=co=32); at co=1 three quarters of its work is
// thrown away. Blocks of 16 x 4 pixels x 4 rows, filter poses of 2 input
// types a step (shared: 2 x 64 x kh x kw floats, 12.8 KB at 5x5).
// The CUDA default's fallback where staged_rows refuses the shape and co is
// a multiple of 4.
// Measured: 52.3 / 693.3 / 177.9 us on an H200.
void capsconv_tuned_co4(CapsConvStages &s) {
    pose_conv_gpu(s.O, s.accum, s.r, s.K_in, s.I_pad, {16, 4, true, 4, 2, false}, s.stride);
}

// staged_rows: vector_rows with the input tile staged too
// (stage_rows_in_shared): blocks of 8 x 4 pixels x 4 pose rows, 4 input
// capsule types a step (the seed problem's 3 in one step), so the sum's 75
// steps read only shared memory. Shapes whose staged tiles pass 48 KB
// (stride 3 with 5x5 filters, stride 2 with 5x5) get unsupported_shape; the
// runtime's default then takes tuned or tuned_co4. The CUDA default outside
// the Winograd form. At the seed problem a call is about half launch and
// latency; at stride2 (392 output pixels) the direct form lacks parallelism
// and im2col + cuBLAS wins (35.7 us).
// Measured: 17.0 / 667.9 / 104.5 us on an H200, 2.7x Vaidya's I3 kernel on
// the seed problem.
void capsconv_staged_rows(CapsConvStages &s) {
    PoseConvGpuTiling t{8, 4, true, 1, 4, true};
    t.vector_rows = true;
    pose_conv_gpu(s.O, s.accum, s.r, s.K_in, s.I_pad, t, s.stride);
}

// grad_filter on the GPU: the sum over every output pixel is split by rows
// of the output (rfactor over y): a first kernel sums chunks of
// ceil(OH / 64) rows into a partial buffer (at most 64 partials per filter
// element; a thread owns one whole 4x4 filter pose, 16 registers, and walks
// its chunk's pixels and images), a second adds the partials. The seed
// problem has only 75 filter poses (ci=3, 5x5, co=1): without the split
// that is 75 threads.
// Measured (tuned, both gradients): 508 us on the seed problem and 11612 on
// the layer on an H200.
//
// With threads_along_caps (tuned_caps): a warp's threads run
// along the capsule types (8 ci x 4 co a block) rather than along the row
// chunks: in grad_filter_gpu the 32 lanes of a warp read 32 different output
// rows of g and of the input at every step (32 sectors a load); here a
// warp's loads of the input are 8 neighbouring poses (the same for the 4 co
// lanes) and of g 4. The row chunks and taps are block indices.
// The CUDA default for capsconv_backward.
// Measured: both gradients 152 / 2521 / 722 us (seed / layer / stride2) on an
// H200 (tuned: 508 / 11612 / 1185).
void grad_filter_gpu(CapsConvGradFilterStages &s, bool threads_along_caps) {
    RVar ryo("ryo"), ryi("ryi");
    Var u("u");
    // The output height is r.z's extent; chunks of ceil(OH / 64) rows.
    Expr rows = (s.r.z.extent() + 63) / 64;
    s.accum.update().split(s.r.z, ryo, ryi, rows, TailStrategy::GuardWithIf);
    Func partial = s.accum.update().rfactor(ryo, u);
    // partial(j, c, co, ci, dx, dy, u): its 16 pose elements per thread in
    // registers (partial computed per thread of its wrapper).
    Func partial_out = partial.in();
    std::vector<Var> pa = partial_out.args();  // (j, c, co, ci, dx, dy, u)
    Var uo("uo"), ut("ut"), cio("cio"), cit("cit"), coo("coo"), cot("cot"), cb("cb"), taps("taps");
    Var thread_var;
    partial_out.compute_root();
    if (threads_along_caps) {
        // Threads over (ci, co), 8 x 4; blocks over ((ci, co) blocks, taps, u).
        partial_out.split(pa[3], cio, cit, 8, TailStrategy::GuardWithIf)
            .split(pa[2], coo, cot, 4, TailStrategy::GuardWithIf)
            .fuse(cio, coo, cb)
            .fuse(pa[4], pa[5], taps)
            .reorder(pa[0], pa[1], cit, cot, cb, taps, pa[6])
            .gpu_threads(cit, cot)
            .gpu_blocks(cb, taps, pa[6]);
        thread_var = cit;
    } else {
        // Threads over (row chunk u, ci), 32 x 4, blocks over (u, (ci, co),
        // (dx, dy)): the seed problem (62 chunks, ci=3, co=1, 25 taps) gets 50
        // blocks, the n=8 layer (32 chunks, ci=co=32, 9 taps) 2304. Only block
        // indices are fused: a fused thread index hides the per-thread point
        // from bounds inference.
        partial_out.split(pa[6], uo, ut, 32, TailStrategy::GuardWithIf)
            .split(pa[3], cio, cit, 4, TailStrategy::GuardWithIf)
            .fuse(cio, pa[2], cb)
            .fuse(pa[4], pa[5], taps)
            .reorder(pa[0], pa[1], ut, cit, uo, cb, taps)
            .gpu_threads(ut, cit)
            .gpu_blocks(uo, cb, taps);
        thread_var = ut;
    }
    partial_out.unroll(pa[0]).unroll(pa[1]);
    std::vector<Var> pv = partial.args();
    partial.compute_at(partial_out, thread_var).store_in(MemoryType::Register);
    partial.bound_extent(pv[0], 4).bound_extent(pv[1], 4);
    for (size_t k = 2; k < pv.size(); k++) partial.bound_extent(pv[k], 1);
    partial.unroll(pv[0]).unroll(pv[1]);
    // The update's reduction: pose index (r.x, unrolled: each step is a
    // 4 x 4 outer-product sum, 64 FMAs), x, the chunk's rows, images.
    partial.update().reorder(pv[0], pv[1], s.r.x, s.r.y, ryi, s.r.w).unroll(pv[0]).unroll(pv[1]).unroll(s.r.x);

    // The sum of the partials: one thread per filter element, (j, c) x 8 ci
    // a block.
    std::vector<Var> g = s.grad_K.args();  // (j, c, co, ci, dx, dy)
    Var jc("jc"), go("go"), gt("gt"), gtaps("gtaps");
    s.grad_K.fuse(g[0], g[1], jc)
        .split(g[3], go, gt, 8, TailStrategy::GuardWithIf)
        .fuse(g[4], g[5], gtaps)
        .reorder(jc, gt, go, g[2], gtaps)
        .gpu_threads(jc, gt)
        .gpu_blocks(go, g[2], gtaps);
    s.accum.compute_at(s.grad_K, jc).store_in(MemoryType::Register);
    for (const Var &v : s.accum.args()) s.accum.bound_extent(v, 1);
}

// grad_input cpu: as the forward, over input rows (n, Y) in parallel, X
// blocks of 4, the rows of grad_output they read staged transposed
// (stage_rows_transposed); every tap that does not divide by the stride
// multiplies a zero.
// Measured alone (a direct call, median of 7, on the loaded 2-core build
// machine): seed 1964 us, n=8 layer 91 ms.
void grad_input_cpu(const Target &, CapsConvGradInputStages &s) {
    pose_block_cpu(s.grad_I, s.accum, s.r);
    stage_rows_transposed(s.grad_I, s.g_pad);
    // A second copy for stride 1, where every tap hits and the test goes.
    s.grad_I.specialize(s.stride == 1);
}

// grad_input tuned (and tuned_caps, which differs in grad_filter only): the
// forward's `tuned` layout with the roles renamed: threads own input pixels
// and pose rows, the reduction walks 4 output capsule types a step with
// their filter poses and grad_output tile staged. Taps that do not divide
// by the stride multiply a zero, as on the CPU.
// H200: see grad_filter_gpu (measured together).
void grad_input_tuned(const Target &, CapsConvGradInputStages &s) {
    pose_conv_gpu(s.grad_I, s.accum, s.r, s.K_in, s.g_pad, {32, 2, true, 1, 4, false, 3}, s.stride);
}

// grad_filter cpu: the filter's (dx, dy) taps in parallel, blocks of 4 ci
// in registers, the sum over every output pixel (i, x, y, n) innermost.
// Measured alone (as grad_input, under load): seed 2267 us, n=8 layer 232 ms.
void grad_filter_cpu(const Target &, CapsConvGradFilterStages &s) {
    pose_block_cpu(s.grad_K, s.accum, s.r);
    // The whole zero-padded input written out once, so the sum over
    // pixels reads it with no boundary test.
    std::vector<Var> a = s.I_pad.args();
    Var yn("yn");
    s.I_pad.compute_root().fuse(a[4], a[5], yn).parallel(yn).vectorize(a[0], 4).vectorize(a[1], 4);
}

const ScheduleTable<CapsConvStages> kForwardSchedules = {
    {"cpu", ScheduleTarget::cpu, [](const Target &, CapsConvStages &s) { capsconv_cpu(s); }},
    {"cpu_co4", ScheduleTarget::cpu, [](const Target &, CapsConvStages &s) { capsconv_cpu_co4(s); }},
    {"vaidya", ScheduleTarget::gpu, [](const Target &, CapsConvStages &s) { capsconv_vaidya(s); }},
    {"tuned", ScheduleTarget::gpu, [](const Target &, CapsConvStages &s) { capsconv_tuned(s); }},
    {"tuned_co4", ScheduleTarget::gpu, [](const Target &, CapsConvStages &s) { capsconv_tuned_co4(s); }},
    {"staged_rows", ScheduleTarget::gpu, [](const Target &, CapsConvStages &s) { capsconv_staged_rows(s); }},
};

const ScheduleTable<CapsConvGradInputStages> kGradInputSchedules = {
    {"cpu", ScheduleTarget::cpu, grad_input_cpu},
    {"tuned", ScheduleTarget::gpu, grad_input_tuned},
    {"tuned_caps", ScheduleTarget::gpu, grad_input_tuned},
};

const ScheduleTable<CapsConvGradFilterStages> kGradFilterSchedules = {
    {"cpu", ScheduleTarget::cpu, grad_filter_cpu},
    {"tuned", ScheduleTarget::gpu, [](const Target &, CapsConvGradFilterStages &s) { grad_filter_gpu(s, false); }},
    {"tuned_caps", ScheduleTarget::gpu, [](const Target &, CapsConvGradFilterStages &s) { grad_filter_gpu(s, true); }},
};

}  // namespace

void schedule_capsconv(const std::string &name, const Target &target, CapsConvStages &s) {
    if (autoschedulers::is_autoscheduler_row(name)) return autoschedule("capsconv", name, target, {s.O});
    if (space::is_point_name(name) && target.has_gpu_feature()) {
        // A point of schedules/spaces/capsconv_cuda.space, parsed strictly
        // (schedules/space_knobs.h), then the named schedules' code.
        std::map<std::string, int> v;
        if (std::string error = space::parse_point("capsconv", "cuda", name, &v); !error.empty()) {
            throw CompileError(error);
        }
        schedule_util::check_threads("capsconv", name, v["x_threads"] * v["y_threads"] * (v["row_threads"] ? 4 : 1));
        if (v["vector_rows"] && !v["row_threads"]) {
            throw CompileError("capsconv: space point '" + name + "' asks for vector_rows=1 without row_threads=1");
        }
        if (v["x_pixels"] > 1 && !v["vector_rows"]) {
            throw CompileError("capsconv: space point '" + name + "' asks for x_pixels > 1 without vector_rows=1");
        }
        PoseConvGpuTiling t{v["x_threads"], v["y_threads"], v["row_threads"] != 0,
                            v["caps_tile"], v["chunk"],     v["stage_input"] != 0};
        t.vector_rows = v["vector_rows"] != 0;
        t.x_pixels = v["x_pixels"];
        return pose_conv_gpu(s.O, s.accum, s.r, s.K_in, s.I_pad, t, s.stride);
    }
    apply_schedule("capsconv", kForwardSchedules, name, target, s);
}

void schedule_capsconv_grad_input(const std::string &name, const Target &target, CapsConvGradInputStages &s) {
    apply_schedule("capsconv_grad_input", kGradInputSchedules, name, target, s);
}

void schedule_capsconv_grad_filter(const std::string &name, const Target &target, CapsConvGradFilterStages &s) {
    apply_schedule("capsconv_grad_filter", kGradFilterSchedules, name, target, s);
}

}  // namespace halcaps

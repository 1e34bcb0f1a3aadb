// Schedules for the Winograd form of the capsule convolution (algorithm in
// generators/capsconv_winograd.cpp, stages in capsconv_winograd_stages.h).
// Each schedule is a named function; the comment above it records its
// measured time and the device it ran on.
//
// Every schedule here computes the stages one after the other (filter_t,
// input_t, with input_rows inlined on the CPU and its own kernel on the GPU,
// product, O), each over its whole domain: the product is alpha^2
// independent matrix products, and each needs all of its operands' rows, so
// the transforms are written out once rather than recomputed per product
// tile.
#include "capsconv_winograd_schedules.h"

#include "common.h"

namespace halcaps {

using namespace Halide;
using schedule_util::apply_schedule;
using schedule_util::ScheduleTable;
using schedule_util::ScheduleTarget;

namespace {

// The two Winograd-point dims of a transformed stage are always the last
// two and always the whole alpha x alpha: stating it lets the schedules
// unroll them, which turns the transform matrices' entries into constants.
void bound_points(Func f, int alpha) {
    std::vector<Var> a = f.args();
    f.bound(a[a.size() - 2], 0, alpha).bound(a[a.size() - 1], 0, alpha);
}

// cpu: each stage over its whole domain, rows in parallel; the 16 floats of
// a pose (or of a (j, i) pair) one vector. The product keeps 4 tiles x 4
// output capsule types of (j, i) vectors in registers (16 vectors), as the
// direct `cpu_co4` does, walking the pose index and the input capsule types.
// Not the CPU default: the product has no cache blocking over the input
// capsule types.
// Measured: F(4x4) 34.5 ms and F(2x2) 57.7 ms on the layer problem (pad 1)
// on the loaded 2-core AMD EPYC build machine, against 26.1 for the direct
// cpu_co4 in the same session.
void winograd_cpu(CapsConvWinogradStages &s) {
    const int alpha = s.alpha;
    Var wxy("wxy"), txo("txo"), txi("txi"), coo("coo"), coi("coi"), rows("rows");

    // The product computes whole blocks of 4 co and 4 tiles, past the last
    // ones too (and discards them), so filter_t's co loop and input_t's tx
    // loop round up to whole blocks of 4: with the loops over the exact
    // extents, those reads found the buffers allocated but unwritten (as on
    // the GPU, where compute-sanitizer initcheck showed it).
    Var fco("fco"), fci("fci"), itx("itx"), iti("iti");
    bound_points(s.filter_t, alpha);
    s.filter_t.compute_root()
        .split(s.co, fco, fci, 4, TailStrategy::RoundUp)
        .reorder(s.j, s.c, s.wx, s.wy, fci, fco, s.ci)
        .vectorize(s.j, 4)
        .vectorize(s.c, 4)
        .unroll(s.wx)
        .unroll(s.wy)
        .parallel(s.ci);

    bound_points(s.input_t, alpha);
    s.input_t.compute_root()
        .split(s.tx, itx, iti, 4, TailStrategy::RoundUp)
        .reorder(s.c, s.i, s.wx, s.wy, s.ci, iti, itx, s.ty, s.n)
        .vectorize(s.c, 4)
        .vectorize(s.i, 4)
        .unroll(s.wx)
        .unroll(s.wy)
        .fuse(s.ty, s.n, rows)
        .parallel(rows);

    s.product.compute_root()
        .split(s.tx, txo, txi, 4, TailStrategy::GuardWithIf)
        .split(s.co, coo, coi, 4, TailStrategy::GuardWithIf)
        .reorder(s.j, s.i, txi, coi, txo, coo, s.ty, s.n, s.wx, s.wy)
        .fuse(s.wx, s.wy, wxy)
        .parallel(wxy)
        .vectorize(s.j, 4)
        .vectorize(s.i, 4)
        .unroll(txi)
        .unroll(coi);
    s.product_accum.compute_at(s.product, txo)
        .bound_extent(s.j, 4)
        .bound_extent(s.i, 4)
        .bound_extent(s.tx, 4)
        .bound_extent(s.co, 4)
        .vectorize(s.j)
        .vectorize(s.i)
        .unroll(s.tx)
        .unroll(s.co);
    s.product_accum.update()
        .reorder(s.j, s.i, s.tx, s.co, s.r.x, s.r.y)
        .vectorize(s.j)
        .vectorize(s.i)
        .unroll(s.tx)
        .unroll(s.co)
        .unroll(s.r.x);

    Var xt("xt"), xm("xm"), yt("yt"), ym("ym");
    s.O.split(s.x, xt, xm, s.tile, TailStrategy::GuardWithIf)
        .split(s.y, yt, ym, s.tile, TailStrategy::GuardWithIf)
        .reorder(s.j, s.i, xm, ym, s.co, xt, yt, s.n)
        .vectorize(s.j, 4)
        .vectorize(s.i, 4)
        .unroll(xm)
        .unroll(ym)
        .fuse(yt, s.n, rows)
        .parallel(rows);
}

// ------------------------------------------------------------------- GPU --

struct WinogradGpuTiling {
    int co_tile;     // product: output capsule types a thread (accumulators: 16 x co_tile)
    int co_threads;  // product: threads a block along co (they read the same input_t: L1 hits)
    int tx_threads;  // product: tiles along x a block, one thread each
    int ty_threads;  // product: tiles along y a block
};

// The GPU schedules: five kernels.
//  - filter_t: a thread per (j, c, co, ci) computes its alpha^2 points from
//    the 9 taps (constants folded by the unrolling).
//  - input_rows, then input_t: the input transform along x, then along y; a
//    thread per (pose row i, tile, input row y or Winograd point wx)
//    computes alpha values of all 4 pose columns (alpha float4s). input_t is
//    stored (i, tx, ty, c, ci, n, wx, wy): what a warp of the product reads
//    for one (c, ci) is then one contiguous run of float4s.
//  - product: a thread per (tile, co tile, Winograd point) keeps 4 (i) x 4
//    (j) x co_tile accumulators in registers over the 4 ci sum; per step it
//    loads one float4 of input_t (i) and 4 co_tile filter_t scalars that are
//    the same for every thread of the warp (broadcasts). No shared memory:
//    the block's co_threads groups share input_t, and all its threads
//    filter_t, through L1. The co blocks are the fastest-varying block
//    index, so the blocks that read the same input_t run together (L2).
//    Stored (i, j, co, ...).
//  - O: a thread per (j, i, co) of an m x m output tile sums alpha^2
//    products per output pixel.
// Halide's CUDA runtime compiles the kernels with at most 64 registers a
// thread, which bounds the product's tile: co_tile 4 (64 accumulators) spills.
void winograd_gpu(CapsConvWinogradStages &s, const WinogradGpuTiling &t) {
    const int alpha = s.alpha;

    // filter_t's co loop rounds up to whole blocks of 8: the product
    // computes whole co tiles even past the last capsule type (discarding
    // them), and with a guarded tail here those reads found filter_t
    // unwritten for odd co (compute-sanitizer initcheck). Past co, K_in
    // clamps its reads.
    Var coo("coo"), coi("coi");
    bound_points(s.filter_t, alpha);
    s.filter_t.compute_root()
        .split(s.co, coo, coi, 8, TailStrategy::RoundUp)
        .reorder(s.wx, s.wy, s.j, s.c, coi, coo, s.ci)
        .unroll(s.wx)
        .unroll(s.wy)
        .gpu_threads(s.j, s.c, coi)
        .gpu_blocks(coo, s.ci);

    // The input transform in two kernels (along x, then along y), each
    // thread holding alpha float4s: the one-kernel form (a thread computing
    // all alpha^2 points of a tile from its alpha^2 input poses) spilled
    // under the 64-register cap: 227 us for F(4x4) on the layer.
    Var txo("txo"), txi("txi"), cin("cin"), rcn("rcn");
    std::vector<Var> ra = s.input_rows.args();  // (c, i, ci, tx, wx, y, n)
    s.input_rows.compute_root()
        .bound(ra[4], 0, alpha)
        .split(ra[3], txo, txi, 32, TailStrategy::GuardWithIf)
        .reorder(ra[0], ra[4], ra[1], txi, txo, ra[5], ra[2], ra[6])
        .vectorize(ra[0], 4)
        .unroll(ra[4])
        .fuse(ra[2], ra[6], rcn)
        .gpu_threads(ra[1], txi)
        .gpu_blocks(txo, ra[5], rcn);
    bound_points(s.input_t, alpha);
    s.input_t.compute_root()
        .reorder_storage(s.i, s.tx, s.ty, s.c, s.ci, s.n, s.wx, s.wy)
        .split(s.tx, txo, txi, 8, TailStrategy::GuardWithIf)
        .reorder(s.c, s.wy, s.i, txi, s.wx, txo, s.ty, s.ci, s.n)
        .vectorize(s.c, 4)
        .unroll(s.wy)
        .fuse(s.ci, s.n, cin)
        .gpu_threads(s.i, txi, s.wx)
        .gpu_blocks(txo, s.ty, cin);

    Var pt("pt"), pnw("pnw"), pco("pco"), pci("pci"), pcoo("pcoo"), pcot("pcot"), ptxo("ptxo"), ptxi("ptxi"),
        ptyo("ptyo"), ptyi("ptyi");
    s.product.compute_root()
        .reorder_storage(s.i, s.j, s.co, s.tx, s.ty, s.n, s.wx, s.wy)
        .split(s.co, pco, pci, t.co_tile, TailStrategy::GuardWithIf)
        .split(pco, pcoo, pcot, t.co_threads, TailStrategy::GuardWithIf)
        .split(s.tx, ptxo, ptxi, t.tx_threads, TailStrategy::GuardWithIf)
        .split(s.ty, ptyo, ptyi, t.ty_threads, TailStrategy::GuardWithIf)
        .reorder(s.i, s.j, pci, ptxi, ptyi, pcot, pcoo, ptxo, ptyo, s.n, s.wx, s.wy)
        .fuse(ptxo, ptyo, pt)
        // n outermost of the fused block index: with a run-time extent
        // innermost, bounds inference lost the block's single n and the
        // kernel's check of the accumulators' extent trapped.
        .fuse(s.wx, s.wy, pnw)
        .fuse(pnw, s.n, pnw)
        .vectorize(s.i, 4)
        .unroll(s.j)
        .unroll(pci)
        .gpu_threads(ptxi, ptyi, pcot)
        .gpu_blocks(pcoo, pt, pnw);
    s.product_accum.compute_at(s.product, ptxi)
        .store_in(MemoryType::Register)
        .bound_extent(s.j, 4)
        .bound_extent(s.i, 4)
        .bound_extent(s.co, t.co_tile)
        .bound_extent(s.tx, 1)
        .bound_extent(s.ty, 1)
        .bound_extent(s.n, 1)
        .bound_extent(s.wx, 1)
        .bound_extent(s.wy, 1)
        .reorder(s.i, s.j, s.co)
        .vectorize(s.i)
        .unroll(s.j)
        .unroll(s.co);
    s.product_accum.update()
        .reorder(s.i, s.j, s.co, s.r.x, s.r.y)
        .vectorize(s.i)
        .unroll(s.j)
        .unroll(s.co)
        .unroll(s.r.x);

    Var ji("ji"), xt("xt"), xm("xm"), yt("yt"), ym("ym"), ocoo("ocoo"), ocoi("ocoi"), ocn("ocn");
    s.O.split(s.x, xt, xm, s.tile, TailStrategy::GuardWithIf)
        .split(s.y, yt, ym, s.tile, TailStrategy::GuardWithIf)
        .split(s.co, ocoo, ocoi, 8, TailStrategy::GuardWithIf)
        .reorder(xm, ym, s.j, s.i, ocoi, xt, yt, ocoo, s.n)
        .unroll(xm)
        .unroll(ym)
        .fuse(s.j, s.i, ji)
        .fuse(ocoo, s.n, ocn)
        .gpu_threads(ji, ocoi)
        .gpu_blocks(xt, yt, ocn);
}

// Measured on an H200 on the layer problem (n=8, 32x32, ci=co=32, 3x3,
// pad 1), device time; in the same run cuDNN took 283.0 us with its permutes
// and 236.1 bare.
//
// staged: 2 output capsule types a thread (32 accumulators), 8 x 4 tiles
// x 4 co groups a block; the CUDA default for 3x3 filters at stride 1.
// Measured: winograd4x4_staged 206.7 us (winograd2x2_staged 314.0).
void winograd_staged(const Target &, CapsConvWinogradStages &s) { winograd_gpu(s, {2, 4, 8, 4}); }

const ScheduleTable<CapsConvWinogradStages> kWinogradSchedules = {
    {"cpu", ScheduleTarget::cpu, [](const Target &, CapsConvWinogradStages &s) { winograd_cpu(s); }},
    {"staged", ScheduleTarget::gpu, winograd_staged},
};

}  // namespace

void schedule_capsconv_winograd(const std::string &name, const Target &target, CapsConvWinogradStages &s) {
    apply_schedule("capsconv_winograd", kWinogradSchedules, name, target, s);
}

}  // namespace halcaps

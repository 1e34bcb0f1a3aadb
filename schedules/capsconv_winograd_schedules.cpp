// Schedules for the Winograd form of the capsule convolution (algorithm in
// generators/capsconv_winograd.cpp, stages in capsconv_winograd_stages.h).
// Each schedule is a named function; the comment above it records its
// measured time and the device it ran on.
//
// Every schedule here computes the four stages one after the other
// (filter_t, input_t, product, O), each over its whole domain: the product
// is alpha^2 independent matrix products, and each needs all of its
// operands' rows, so the transforms are written out once rather than
// recomputed per product tile.
#include "capsconv_winograd_schedules.h"

#include "common.h"

namespace halcaps {

using namespace Halide;
using schedule_util::check_schedule;

namespace {

const std::vector<std::string> kCpuSchedules = {"cpu"};
const std::vector<std::string> kGpuSchedules = {"staged", "staged_co2", "staged_tx2"};

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
void winograd_cpu(CapsConvWinogradStages &s) {
    const int alpha = s.alpha;
    Var jc("jc"), wxy("wxy"), txo("txo"), txi("txi"), coo("coo"), coi("coi"), rows("rows");

    bound_points(s.filter_t, alpha);
    s.filter_t.compute_root()
        .reorder(s.j, s.c, s.wx, s.wy, s.co, s.ci)
        .vectorize(s.j, 4)
        .vectorize(s.c, 4)
        .unroll(s.wx)
        .unroll(s.wy)
        .parallel(s.ci);

    bound_points(s.input_t, alpha);
    s.input_t.compute_root()
        .reorder(s.c, s.i, s.wx, s.wy, s.ci, s.tx, s.ty, s.n)
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
    int co_tile;     // output capsule types per thread in the product (registers: 16 x co_tile)
    int tx_threads;  // product: tiles along x a block, one thread each
    int ty_threads;  // product: tiles along y a block
    int tx_per_thread = 1;  // product: tiles along x a thread (each filter_t load feeds them all)
};

// The GPU schedules: four kernels.
//  - filter_t: a thread per (j, c, co, ci) computes its alpha^2 points from
//    the 9 taps (constants folded by the unrolling).
//  - input_t: a thread per (pose row i, tile) computes all alpha^2 points of
//    all 4 pose columns, reading each input pose row as one float4. It is
//    stored (i, tx, ty, c, ci, n, wx, wy): what a warp of the product reads
//    for one (c, ci) is then one contiguous run of float4s.
//  - product: a thread per (tile, co tile, Winograd point) keeps 4 (i) x 4
//    (j) x co_tile accumulators in registers over the 4 ci sum; per step it
//    loads one float4 of input_t (i) and 4 co_tile filter_t scalars that are
//    the same for every thread of the warp (broadcasts). No shared memory:
//    the block's threads share filter_t through L1. Stored (i, j, co, ...).
//  - O: a thread per (j, i, co) of an m x m output tile sums alpha^2
//    products per output pixel.
void winograd_gpu(CapsConvWinogradStages &s, const WinogradGpuTiling &t) {
    const int alpha = s.alpha;

    Var jc("jc"), coo("coo"), coi("coi"), taps("taps");
    bound_points(s.filter_t, alpha);
    s.filter_t.compute_root()
        .split(s.co, coo, coi, 8, TailStrategy::GuardWithIf)
        .reorder(s.wx, s.wy, s.j, s.c, coi, coo, s.ci)
        .unroll(s.wx)
        .unroll(s.wy)
        .gpu_threads(s.j, s.c, coi)
        .gpu_blocks(coo, s.ci);

    Var txo("txo"), txi("txi"), tyo("tyo"), tyi("tyi"), cin("cin");
    bound_points(s.input_t, alpha);
    s.input_t.compute_root()
        .reorder_storage(s.i, s.tx, s.ty, s.c, s.ci, s.n, s.wx, s.wy)
        .split(s.tx, txo, txi, 8, TailStrategy::GuardWithIf)
        .split(s.ty, tyo, tyi, 4, TailStrategy::GuardWithIf)
        .reorder(s.c, s.wx, s.wy, s.i, txi, tyi, txo, tyo, s.ci, s.n)
        .vectorize(s.c, 4)
        .unroll(s.wx)
        .unroll(s.wy)
        .fuse(s.ci, s.n, cin)
        .gpu_threads(s.i, txi, tyi)
        .gpu_blocks(txo, tyo, cin);

    Var ptxr("ptxr"), pt("pt"), pcn("pcn"), pw("pw"), pco("pco"), pci("pci"), ptxo("ptxo"), ptxi("ptxi"), ptyo("ptyo"),
        ptyi("ptyi");
    s.product.compute_root()
        .reorder_storage(s.i, s.j, s.co, s.tx, s.ty, s.n, s.wx, s.wy)
        .split(s.co, pco, pci, t.co_tile, TailStrategy::GuardWithIf)
        .split(s.tx, ptxo, ptxi, t.tx_threads * t.tx_per_thread, TailStrategy::GuardWithIf)
        .split(ptxi, ptxi, ptxr, t.tx_per_thread)
        .split(s.ty, ptyo, ptyi, t.ty_threads, TailStrategy::GuardWithIf)
        .reorder(s.i, s.j, pci, ptxr, ptxi, ptyi, ptxo, ptyo, pco, s.n, s.wx, s.wy)
        .fuse(ptxo, ptyo, pt)
        .fuse(pco, s.n, pcn)
        .fuse(s.wx, s.wy, pw)
        .vectorize(s.i, 4)
        .unroll(s.j)
        .unroll(pci)
        .unroll(ptxr)
        .gpu_threads(ptxi, ptyi)
        .gpu_blocks(pt, pcn, pw);
    s.product_accum.compute_at(s.product, ptxi)
        .store_in(MemoryType::Register)
        .bound_extent(s.j, 4)
        .bound_extent(s.i, 4)
        .bound_extent(s.co, t.co_tile)
        .bound_extent(s.tx, t.tx_per_thread)
        .bound_extent(s.ty, 1)
        .bound_extent(s.n, 1)
        .bound_extent(s.wx, 1)
        .bound_extent(s.wy, 1)
        .reorder(s.i, s.j, s.co, s.tx)
        .vectorize(s.i)
        .unroll(s.j)
        .unroll(s.co)
        .unroll(s.tx);
    s.product_accum.update()
        .reorder(s.i, s.j, s.co, s.tx, s.r.x, s.r.y)
        .vectorize(s.i)
        .unroll(s.j)
        .unroll(s.co)
        .unroll(s.tx)
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

}  // namespace

void schedule_capsconv_winograd(const std::string &name, const Target &target, CapsConvWinogradStages &s) {
    check_schedule("capsconv_winograd", name, target, kCpuSchedules, kGpuSchedules);
    if (name == "cpu") winograd_cpu(s);
    // staged: 4 x 4 x 4 accumulators a product thread, 8 x 8 tiles a block.
    // (Not yet measured.)
    if (name == "staged") winograd_gpu(s, {4, 8, 8});
    // staged_co2: 2 output capsule types a thread (32 accumulators), twice
    // the threads. (Not yet measured.)
    if (name == "staged_co2") winograd_gpu(s, {2, 8, 8});
    // staged_tx2: 2 tiles along x a thread (128 accumulators), so each
    // filter_t broadcast feeds 32 FMAs rather than 16. (Not yet measured.)
    if (name == "staged_tx2") winograd_gpu(s, {4, 4, 8, 2});
}

}  // namespace halcaps

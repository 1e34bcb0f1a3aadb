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

#include "autoschedule.h"
#include "common.h"

namespace halcaps {

using namespace Halide;
using schedule_util::check_schedule;

namespace {

const std::vector<std::string> kCpuSchedules = {"cpu", "simple"};
const std::vector<std::string> kGpuSchedules = {};

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
    accum.update()
        .reorder(p0, p1, b, r.x, r.y, r.z, r.w)
        .vectorize(p0)
        .vectorize(p1)
        .unroll(b)
        .unroll(r.x);
}

// simple (built for the forward only; timings under capsconv_cpu): what an
// eager framework's loop would do: one output pose at a time, its 16 floats a
// vector, the reduction straight from memory, rows in parallel.
void pose_simple(Func out, Func accum) {
    std::vector<Var> d = out.args();
    Var ce("ce");
    out.fuse(d[4], d[5], ce).parallel(ce).vectorize(d[0], 4).vectorize(d[1], 4);
    accum.compute_at(out, d[2]).bound_extent(d[0], 4).bound_extent(d[1], 4).vectorize(d[0]).vectorize(d[1]);
    accum.update().vectorize(d[0]).vectorize(d[1]);
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
// Measured 2026-11-21 on the 2-core AMD EPYC build machine (AVX-512 kernels),
// `halcaps capsconv --schedule all --backward --repeats 20` and
// `halcaps capsconv -n 8 -H 32 -W 32 --in-caps 32 --out-caps 32 -k 3
// --schedule all --backward --repeats 5` (median / min, µs; the machine is
// shared with other builds: under load every row, the naive loops included,
// measured up to 2x slower, the ratios about the same):
//   seed problem (n=1, 128x128, ci=3, co=1, 5x5, stride 1, pad 0; 0.148 GFLOP)
//     cpu           878 /    793   168 GFLOP/s   24.8x the naive loops
//     simple       2840 /   2602    52 GFLOP/s    7.7x
//     naive OpenMP 21778 / 18299     6.8 GFLOP/s
//   n=8, 32x32, ci=co=32, 3x3, stride 1, pad 0 (8.49 GFLOP)
//     cpu          39802 /  39526  213 GFLOP/s   27.8x
//     simple      135997 / 134368   63 GFLOP/s    8.1x
//     naive OpenMP 1107664 / 1066510  7.7 GFLOP/s
//   the same with pad 1 (32x32 out, 9.66 GFLOP): cpu 42888, naive 1139667 (26.6x).
// Steps, each measured the same way on the n=8 layer (under load): unstaged,
// the padding tested per term and the input poses loaded as 4 scalars each,
// 210 ms; input rows staged, 150 ms; staged transposed, 78 ms.
// Both gradients together (capsconv_backward, schedules cpu below): 2196 µs
// (seed) and 178846 µs (n=8 layer), of which grad_filter is about 70% on the
// layer (its sum over every pixel runs per (co, 4 ci) block; blocking co as
// well is the next step).
void capsconv_cpu(CapsConvStages &s) {
    pose_block_cpu(s.O, s.accum, s.r);
    stage_rows_transposed(s.O, s.I_pad);
}

}  // namespace

void schedule_capsconv(const std::string &name, const Target &target, CapsConvStages &s) {
    if (autoschedulers::is_autoscheduler_row(name)) return autoschedule("capsconv", name, target, {s.O});
    check_schedule("capsconv", name, target, kCpuSchedules, kGpuSchedules);
    if (name == "cpu") capsconv_cpu(s);
    if (name == "simple") pose_simple(s.O, s.accum);
}

// cpu: as the forward, over input rows (n, Y) in parallel, X blocks of 4,
// the rows of grad_output they read staged transposed (stage_rows_transposed);
// every tap that does not divide by the stride multiplies a zero.
// Measured alone (a direct call, median of 7, same machine, under load):
// seed 1964 µs (3909 before the stride-1 specialisation), n=8 layer 91 ms.
void schedule_capsconv_grad_input(const std::string &name, const Target &target, CapsConvGradInputStages &s) {
    check_schedule("capsconv_grad_input", name, target, kCpuSchedules, kGpuSchedules);
    if (name == "cpu") {
        pose_block_cpu(s.grad_I, s.accum, s.r);
        stage_rows_transposed(s.grad_I, s.g_pad);
        // A second copy for stride 1, where every tap hits and the test goes.
        s.grad_I.specialize(s.stride == 1);
    }
    if (name == "simple") pose_simple(s.grad_I, s.accum);
}

// cpu: the filter's (dx, dy) taps in parallel, blocks of 4 ci in registers,
// the sum over every output pixel (i, x, y, n) innermost.
// Measured alone (as grad_input, under load): seed 2267 µs, n=8 layer 232 ms
// (256 ms before the padded copy of the input).
void schedule_capsconv_grad_filter(const std::string &name, const Target &target, CapsConvGradFilterStages &s) {
    check_schedule("capsconv_grad_filter", name, target, kCpuSchedules, kGpuSchedules);
    if (name == "cpu") {
        pose_block_cpu(s.grad_K, s.accum, s.r);
        // The whole zero-padded input written out once, so the sum over
        // pixels reads it with no boundary test.
        std::vector<Var> a = s.I_pad.args();
        Var yn("yn");
        s.I_pad.compute_root().fuse(a[4], a[5], yn).parallel(yn).vectorize(a[0], 4).vectorize(a[1], 4);
    }
    if (name == "simple") pose_simple(s.grad_K, s.accum);
}

}  // namespace halcaps

// Schedules for squash, routing and the DigitCaps layer, forward and
// hand-derived backward (algorithms in generators/digitcaps.cpp). Each
// schedule is a named function; the comment above it records its measured
// time and the device it ran on.
//
// Sizes that matter (MNIST DigitCaps, B=128, I=1152, K=8, J=10, E=16): u_hat
// is 94 MB in all but 737 KB per batch element, which fits the 1 MB L2 of
// the CI machine's cores; W is 5.9 MB (fits its 32 MB L3); logits and c are
// 46 KB per batch element per iteration; s and v are 640 bytes.
#include "digitcaps_schedules.h"

#include <set>

#include "autoschedule.h"
#include "capsule_prediction_schedules.h"
#include "common.h"

namespace halcaps {

using namespace Halide;
using schedule_util::check_schedule;

namespace {

const std::vector<std::string> kCpuSchedules = {"cpu", "stage_per_op"};
const std::vector<std::string> kNoGpuSchedules = {};
const std::vector<std::string> kGpuSchedules = {"stage_per_kernel"};
const std::vector<std::string> kGpuBackwardSchedules = {"stage_per_kernel", "tiled_stages"};
// tiled_predict and rows_predict need the prediction stages, which only the layer has.
const std::vector<std::string> kGpuLayerBackwardSchedules = {"stage_per_kernel", "tiled_stages", "tiled_predict",
                                                             "rows_predict", "rows_vectors"};

// Every stage of the forward pipeline, in order.
std::vector<Func> forward_stages(const RoutingStages &r) {
    std::vector<Func> out;
    for (const auto &it : r.iterations) {
        for (const Func &f : {it.logits, it.logit_max, it.exp_sum, it.c, it.s, it.squash.max_abs,
                              it.squash.norm2_scaled, it.squash.v}) {
            out.push_back(f);
        }
        if (it.agreement.defined()) out.push_back(it.agreement);
    }
    return out;
}

// Every stage of a backward pipeline: the recomputed forward (u_hat first,
// for the layer), each iteration's backward stages, grad_b0, grad_u_hat and,
// for the layer, grad_u and grad_W; not the output copies. `visit(f,
// in_caps_sum)` is told which stages are sums over in_caps (s, grad_v_agree;
// not s where it is given, digitcaps_backward_with_s).
template <typename Visit>
void visit_backward_stages(RoutingBackwardStages &g, bool digitcaps, Visit visit) {
    const RoutingStages &r = g.forward;
    if (digitcaps) visit(r.u_hat, false);
    for (const auto &it : r.iterations) {
        for (const Func &f : {it.logits, it.logit_max, it.exp_sum, it.c}) visit(f, false);
        visit(it.s, it.s.has_update_definition());
        for (const Func &f : {it.squash.max_abs, it.squash.norm2_scaled, it.squash.v}) visit(f, false);
        if (it.agreement.defined()) visit(it.agreement, false);
    }
    for (const auto &it : g.iterations) {
        for (const Func &f : {it.grad_v, it.s_dot_grad_v, it.grad_s, it.grad_c, it.c_dot_grad_c, it.grad_logits}) {
            visit(f, false);
        }
        if (it.grad_v_agree.defined()) visit(it.grad_v_agree, true);
    }
    if (r.agreements.defined()) visit(r.agreements, false);
    visit(g.grad_b0, false);
    visit(g.grad_u_hat, false);
    if (digitcaps) {
        visit(g.grad_u, false);
        visit(g.grad_W, false);
    }
}

// An eager framework's kernel: the whole stage computed into its own buffer
// before the next starts, parallel over the outermost dimension and
// vectorized along the innermost, for its pure definition and its update.
void compute_root_eager(Func f, int vec) {
    f.compute_root();
    const std::vector<Var> args = f.args();
    if (args.size() > 1) f.parallel(args.back());
    f.vectorize(args.front(), vec, TailStrategy::GuardWithIf);
    for (int u = 0; u < f.num_update_definitions(); u++) {
        if (args.size() > 1) f.update(u).parallel(args.back());
        f.update(u).vectorize(args.front(), vec, TailStrategy::GuardWithIf);
    }
}

// The routing iterations of one batch element, all computed inside the
// output's loop over b (`at`): logits, c, s, v and the agreement of a batch
// element are 50 KB and stay in L1/L2, and u_hat is read from wherever the
// caller put it (the input, or a per-batch-element tile for digitcaps).
// s accumulates over i with e innermost (a row of u_hat is E contiguous
// floats); the agreement reduces each row of E with a vector dot product.
void routing_per_batch_element(RoutingStages &r, LoopLevel at, int vec) {
    for (auto &it : r.iterations) {
        // A capsule's max and exp-sum over out_caps (10 at MNIST): vectors
        // across input capsules, each lane walking its capsule's j, so the
        // exps are vector ones (scalar, they took most of routing's time).
        for (Func f : {it.logit_max, it.exp_sum}) {
            f.compute_at(at).vectorize(r.i, vec, TailStrategy::GuardWithIf);
            f.update().reorder(r.i, r.rj).vectorize(r.i, vec, TailStrategy::GuardWithIf);
        }
        it.c.compute_at(at).vectorize(r.j, vec, TailStrategy::GuardWithIf);
        Var eo("eo"), ei("ei");
        it.s.compute_at(at).vectorize(r.e, vec, TailStrategy::GuardWithIf);
        it.s.update()
            .split(r.e, eo, ei, vec, TailStrategy::GuardWithIf)
            .reorder(ei, eo, r.j, r.ri)
            .vectorize(ei);
        it.squash.max_abs.compute_at(at);
        it.squash.norm2_scaled.compute_at(at);
        if (it.agreement.defined()) {
            it.squash.v.compute_at(at).vectorize(r.e, vec, TailStrategy::GuardWithIf);
            it.agreement.compute_at(at);
            it.agreement.update().atomic().vectorize(r.re, vec, TailStrategy::GuardWithIf);
        }
    }
}

// ------------------------------------------------------------------ squash --

// cpu: rows of E in parallel chunks of 64; each row's max and norm are two
// scalars computed just before the row is written as one or two vectors.
// Squash is a few µs at the MNIST shape (B·J = 1280 rows); not tuned further.
void squash_cpu(const Target &target, SquashGeneratorStages &s) {
    const int vec = target.natural_vector_size<float>();
    Var no("no"), ni("ni");
    s.v.split(s.n, no, ni, 64, TailStrategy::GuardWithIf).parallel(no).vectorize(s.e, vec, TailStrategy::GuardWithIf);
    s.squash.max_abs.compute_at(s.v, ni);
    s.squash.norm2_scaled.compute_at(s.v, ni);
}

// ----------------------------------------------------------------- routing --

// cpu: parallel over batch elements; each one's routing runs start to end
// inside the b loop (routing_per_batch_element), reading its 737 KB slice of
// u_hat 2r-1 times from L2 after the first pass brings it from memory.
// Measured 2026-11-21, MNIST b128, 3 iterations, 2-core AMD EPYC: 12.6 ms,
// 3.8x faster than stage_per_op (47 ms) (`halcaps route --schedule all`).
// 2026-11-22, 2-core Intel Xeon build machine: 22.0 ms, then 16.3 with the
// max and exp-sum over out_caps vectorised across input capsules.
void routing_cpu(const Target &target, RoutingStages &r) {
    const int vec = target.natural_vector_size<float>();
    r.v.parallel(r.b).vectorize(r.e, vec, TailStrategy::GuardWithIf);
    routing_per_batch_element(r, LoopLevel(r.v, r.b), vec);
}

// stage_per_op: every stage of every iteration computed whole (compute_root)
// before the next, as an eager framework runs one kernel per op.
// Measured 2026-11-21, MNIST b128, 3 iterations, 2-core AMD EPYC: 47 ms.
void routing_stage_per_op(const Target &target, RoutingStages &r) {
    const int vec = target.natural_vector_size<float>();
    for (Func f : forward_stages(r)) compute_root_eager(f, vec);
    r.v.parallel(r.b).vectorize(r.e, vec, TailStrategy::GuardWithIf);
}

// --------------------------------------------------------------- digitcaps --

// cpu: one pipeline; u_hat never goes to memory. W is transposed once to
// e-innermost (5.9 MB, stays in L3), so the E outputs of a u_hat row are
// vectors accumulated over k. Parallel over pairs of batch elements; for a
// pair, u_hat's two 737 KB slices are computed together (each vector of W
// loaded once for both), then the routing iterations run on each
// (routing_per_batch_element).
// Measured 2026-11-21, MNIST b128, 3 iterations, 2-core AMD EPYC (CI
// machine, AVX-512): 16.8 ms median, 5.0x faster than stage_per_op (84 ms)
// (`halcaps digitcaps --schedule all --repeats 10`). Transposing W's slice
// per (batch element, input capsule) instead measured 34-58 ms.
// 2026-11-22 on the 2-core Intel Xeon build machine (AVX-512; `halcaps
// digitcaps --schedule cpu` and `stage_per_op`, --repeats 10): 32.6 ms
// against stage_per_op's 130.8 (4.0x); with pairs of batch elements 30.1-31.3;
// with routing's max and exp-sum vectorised across input capsules as well
// (routing_per_batch_element) 24.2 against 126.9 (5.2x).
void digitcaps_cpu(const Target &target, RoutingStages &r) {
    const int vec = target.natural_vector_size<float>();
    Var bo("bo"), bi("bi");
    r.v.split(r.b, bo, bi, 2, TailStrategy::GuardWithIf).parallel(bo).vectorize(r.e, vec, TailStrategy::GuardWithIf);
    const LoopLevel per_pair(r.v, bo), per_batch(r.v, bi);

    Var eo("eo"), ei("ei");
    r.u_hat.compute_at(per_pair).vectorize(r.e, vec, TailStrategy::GuardWithIf);
    r.u_hat.update()
        .split(r.e, eo, ei, vec, TailStrategy::GuardWithIf)
        .reorder(ei, r.b, r.rk, eo, r.j, r.i)
        .vectorize(ei);
    Func W_by_e = r.W;
    std::vector<Var> w = W_by_e.args();  // (k, e, j, i)
    W_by_e.compute_root()
        .parallel(w[3])
        .reorder_storage(w[1], w[0], w[2], w[3])
        .reorder(w[1], w[0], w[2], w[3])
        .vectorize(w[1], vec, TailStrategy::GuardWithIf);

    routing_per_batch_element(r, per_batch, vec);
}

// stage_per_op: u_hat materialised whole (94 MB), then every routing stage
// compute_root, as an eager framework runs it (one kernel per op).
// Measured 2026-11-21, MNIST b128, 3 iterations, 2-core AMD EPYC: 84 ms.
void digitcaps_stage_per_op(const Target &target, RoutingStages &r) {
    const int vec = target.natural_vector_size<float>();
    compute_root_eager(r.u_hat, vec);
    for (Func f : forward_stages(r)) compute_root_eager(f, vec);
    r.v.parallel(r.b).vectorize(r.e, vec, TailStrategy::GuardWithIf);
}

// ------------------------------------------------------------------- GPU --

// An eager framework's GPU kernel: the whole stage computed into its own
// global buffer, one thread per output point (all pure dimensions fused and
// tiled 256 wide), the reduction of an update walked serially by its thread.
void compute_root_gpu(Func f) {
    f.compute_root();
    const std::vector<Var> args = f.args();
    for (int stage = 0; stage <= f.num_update_definitions(); stage++) {
        Stage st = stage == 0 ? Stage(f) : f.update(stage - 1);
        Var all("all_" + std::to_string(stage)), block("block"), thread("thread");
        Var fused = args[0];
        for (size_t d = 1; d < args.size(); d++) {
            Var next(fused.name() + "_" + args[d].name());
            st.fuse(fused, args[d], next);
            fused = next;
        }
        st.gpu_tile(fused, block, thread, 256, TailStrategy::GuardWithIf);
    }
}

// stage_per_kernel: stage_per_op on the GPU, one kernel per stage of every
// iteration, as an eager framework runs routing (softmax, mul, sum, norm, ...).
void routing_stage_per_op_gpu(RoutingStages &r) {
    for (Func f : forward_stages(r)) compute_root_gpu(f);
    compute_root_gpu(r.v);
}

// stage_per_kernel for the layer: u_hat materialised (94 MB at MNIST b128)
// by one kernel, then one kernel per routing stage.
void digitcaps_stage_per_op_gpu(RoutingStages &r) {
    compute_root_gpu(r.u_hat);
    routing_stage_per_op_gpu(r);
}

// ----------------------------------------------- backward, hand-derived --

// cpu: every stage of the recomputed forward and of the backward computed
// whole, parallel over its outermost dimension and vectorized along its
// innermost (u_hat included, for digitcaps: the backward reads it 4r-2
// times). Simple, and it bounds the memory: the largest stage is u_hat-sized.
void backward_cpu(const Target &target, RoutingBackwardStages &g, bool digitcaps) {
    const int vec = target.natural_vector_size<float>();
    visit_backward_stages(g, digitcaps, [&](Func f, bool) { compute_root_eager(f, vec); });
    for (Func f : g.outputs) compute_root_eager(f, vec);
}

// stage_per_kernel for the backward: backward_cpu's structure on the GPU,
// every stage of the recomputed forward and of the backward one kernel
// (compute_root_gpu: one thread per output point, reductions serial in the
// thread). The working baseline for a fused GPU backward; u_hat (digitcaps)
// and grad_u_hat are materialised, 94 MB each at MNIST b128.
// Measured 2026-11-21 on an NVIDIA H200, `halcaps bench --device cuda --op
// digitcaps_backward --shapes mnist_b128,mnist_b512 --repeats 30 --seed 41`:
// DigitCaps backward b128 2457 us (248 MB of device memory), b512 6894 us
// (992 MB): 2.9x the fused forward (839 us), but the forward is itself
// far from its goal. Since grad_u and grad_W read grad_u_hat through
// clamped indices (for tiled_predict), its gradient kernels pay for the
// clamps: b128 3964 us, b512 8247 us (2026-11-21, H200, seed 93,
// bench/results/nvidia-h200-tiled-predict/).
void backward_stage_per_kernel(RoutingBackwardStages &g, bool digitcaps) {
    visit_backward_stages(g, digitcaps, [](Func f, bool) { compute_root_gpu(f); });
    for (Func f : g.outputs) compute_root_gpu(f);
}

// A pure Func computed whole, threads over 16 x 16 tiles of its two
// innermost dimensions, blocks over the tiles (one fused block index) and
// its other dimensions. Returns the innermost thread variable.
Var root_tiled(Func f) {
    const std::vector<Var> a = f.args();
    Var xo("tx_o"), xi("tx_i"), yo("ty_o"), yi("ty_i"), tiles("tiles");
    f.compute_root();
    if (a.size() == 1) {
        f.split(a[0], xo, xi, 128, TailStrategy::GuardWithIf).gpu_threads(xi).gpu_blocks(xo);
        return xi;
    }
    f.split(a[0], xo, xi, 16, TailStrategy::GuardWithIf).split(a[1], yo, yi, 16, TailStrategy::GuardWithIf);
    std::vector<VarOrRVar> order{xi, yi, xo, yo};
    for (size_t d = 2; d < a.size(); d++) order.push_back(a[d]);
    f.reorder(order).fuse(xo, yo, tiles).gpu_threads(xi, yi);
    if (a.size() == 2) f.gpu_blocks(tiles);
    if (a.size() == 3) f.gpu_blocks(tiles, a[2]);
    if (a.size() == 4) f.gpu_blocks(tiles, a[2], a[3]);
    return xi;
}

// One kernel for a stage: a Func with a reduction is computed through a
// wrapper tiled as root_tiled, its init and update in a register of the
// thread that owns each point (stage_per_kernel runs init and update as two
// kernels over one-thread-per-point tiles of every dimension fused).
void compute_root_tiled(Func f) {
    if (!f.has_update_definition()) {
        root_tiled(f);
        return;
    }
    Func whole = f.in();
    const Var thread = root_tiled(whole);
    f.compute_at(whole, thread).store_in(MemoryType::Register);
}

// A sum over in_caps (s, grad_v_agree: B x J x E points at MNIST, 1152
// terms each) in chunks of 64 capsules added in parallel (rfactor), then
// the chunks' sums.
void compute_root_tiled_chunked(Func f, RVar over) {
    RVar chunk("chunk"), within("within");
    Var c("chunk_v");
    Func parts = f.update().split(over, chunk, within, 64, TailStrategy::GuardWithIf).rfactor(chunk, c);
    compute_root_tiled(parts);
    compute_root_tiled(f);
}

// tiled_stages: stage_per_kernel's stages, each still one kernel and
// materialised, but each computed in one kernel (init and update together),
// over 2D thread tiles, and the long sums over in_caps chunked.
// Measured 2026-11-21 on an NVIDIA H200, `halcaps bench --device cuda --op
// digitcaps_backward --shapes mnist_b128,mnist_b512 --repeats 30 --seed 79`
// (bench/results/nvidia-h200-fused-split/backward_tiled.txt): b128 1685.2 us
// against stage_per_kernel's 2461.6 (1.46x), b512 6036.9 against 6888.4
// (1.14x); 3.9x the fused_split forward (435.2 us, same run), so the issue's
// <= 3x is not met. ncu: the four u_hat-sized stages (u_hat, grad_u_hat,
// grad_u, grad_W) now take about the same time each, then the agreements
// and grad_c (one thread per (j, i, b) summing over e).
// One stage as tiled_stages computes it: a sum over in_caps chunked, any
// other stage one kernel.
void tiled_stage(Func f, bool in_caps_sum, RVar in_caps) {
    if (in_caps_sum) {
        compute_root_tiled_chunked(f, in_caps);
    } else {
        compute_root_tiled(f);
    }
}

void backward_tiled_stages(RoutingBackwardStages &g, bool digitcaps) {
    const RVar in_caps = g.forward.ri.x;
    visit_backward_stages(g, digitcaps, [&](Func f, bool in_caps_sum) { tiled_stage(f, in_caps_sum, in_caps); });
    for (Func f : g.outputs) root_tiled(f);
}

// A pure Func computed whole, its dimensions but the last fused into one
// index (contiguous in memory): threads over `threads` consecutive points of
// it, each thread walking `batch_tile` points of the last dimension, the
// batch (unrolled: independent loads in flight); blocks over the rest.
// For u_hat's shape (e, j, i, b) root_tiled's 16 x 16 (e, j) tiles instead
// run a block of 160 live threads per (i, b), and at J = 10 leave 6 of 16
// rows idle.
void root_rows(Func f, int threads, int batch_tile) {
    const std::vector<Var> a = f.args();
    Var rows = a[0], rows_o("rows_o"), rows_t("rows_t"), bo("bo"), bi("bi");
    f.compute_root();
    for (size_t d = 1; d + 1 < a.size(); d++) {
        Var fused(rows.name() + a[d].name());
        f.fuse(rows, a[d], fused);
        rows = fused;
    }
    f.split(rows, rows_o, rows_t, threads, TailStrategy::GuardWithIf)
        .split(a.back(), bo, bi, batch_tile, TailStrategy::GuardWithIf)
        .reorder(bi, rows_t, rows_o, bo)
        .gpu_threads(rows_t)
        .gpu_blocks(rows_o, bo)
        .unroll(bi);
}

// The capsule prediction's schedules (schedules/capsule_prediction_schedules.cpp)
// that compute the layer backward's u_hat, grad_u and grad_W.
struct PredictionSchedules {
    std::string u_hat = "tuned", grad_u = "tuned", grad_W = "tuned";
};

// The prediction's kernels of the layer's backward (u_hat, grad_u, grad_W),
// as tiled_predict and the rows_* schedules schedule them (tiled_predict's
// comment says why). Returns u_hat's stored copy.
Func schedule_prediction_stages(const Target &target, RoutingBackwardStages &g,
                                const PredictionSchedules &schedules = PredictionSchedules()) {
    RoutingStages &r = g.forward;
    const Func grad_u = g.outputs[0], grad_W = g.outputs[1];

    PredictStages forward;
    forward.u_in = r.u.in(r.u_hat);  // staged by the schedule for u_hat alone
    forward.W_in = r.W;
    forward.accum = r.u_hat;
    forward.u_hat = r.u_hat.in();
    forward.u_hat.compute_root();
    forward.e = r.e, forward.j = r.j, forward.i = r.i, forward.b = r.b;
    forward.rk = r.rk;
    forward.intermediate_out_dim = r.re.x.extent();
    schedule_predict(schedules.u_hat, target, forward);

    PredictGradInputStages grad_input;
    grad_input.g_in = g.grad_u_hat_in;
    grad_input.W_in = r.W;
    grad_input.accum = g.grad_u;
    grad_input.grad_u = grad_u;
    grad_input.k = g.k, grad_input.i = r.i, grad_input.b = r.b;
    grad_input.r_ej = g.r_ej;
    schedule_predict_grad_input(schedules.grad_u, target, grad_input);

    PredictGradWeightStages grad_weight;
    grad_weight.g_in = g.grad_u_hat_in;
    grad_weight.u_in = r.u;
    grad_weight.accum = g.grad_W;
    grad_weight.grad_W = grad_W;
    grad_weight.k = g.k, grad_weight.e = r.e, grad_weight.j = r.j, grad_weight.i = r.i;
    grad_weight.rb = g.rb;
    schedule_predict_grad_weight(schedules.grad_W, target, grad_weight);

    return forward.u_hat;
}

// tiled_predict: tiled_stages, except for the four stages of u_hat's size
// that ncu showed taking most of its time (about 250-300 us each at MNIST
// b128: bench/results/nvidia-h200-fused-split/ncu_backward_tiled.txt):
//  - u_hat = W u: the capsule prediction's `tuned` forward schedule;
//  - grad_u and grad_W: the prediction's `tuned` gradient schedules, on
//    grad_u_hat read through grad_u_hat_in (generators/digitcaps.cpp);
//  - grad_u_hat, a pure Func of small stages: root_rows.
// Predicted from the prediction operators' own times (H200: forward 49 us,
// both gradients 153 us) and a 94 MB write: about 1685 - 800 = 900 us.
// Measured 2026-11-21 on an NVIDIA H200, `halcaps bench --device cuda --op
// digitcaps_backward --shapes mnist_b128,mnist_b512 --repeats 30 --seed 93`
// (bench/results/nvidia-h200-tiled-predict/): b128 1144.7 us against
// tiled_stages' 1782.0 (1.56x), b512 3970.0 against 6428.0 (1.62x); 2.63x and
// 2.73x the fused_split forward (435.1 and 1452.1 us, same session). Less
// than predicted: under ncu u_hat now takes 62 us, grad_u 124, grad_W 99 and
// grad_u_hat 114 (a 94 MB write, 830 GB/s), and the agreements and grad_c
// (5 x 97 us, a thread per (j, i, b) reading its own u_hat row) lead.
// Tried the same day: the agreements and grad_c with the sum over e split
// across 16 lanes of a warp and added by shuffles (rfactor + gpu_lanes),
// 148 us each against 97 (16 dependent shuffles a point, 8 points a block in
// series); grad_u_hat with e vectorized by 4, which Halide emitted as scalar
// stores in 4 guarded copies (not run). Later, u_hat by the prediction's
// batch-vector schedule (one warp a block, k tiles; bench/results/
// nvidia-h200-batch-vectors/try3): b128 1139.2 us against 1142.7, b512
// 3964.7 against 3973.0 in the same run, within noise, so u_hat keeps `tuned`.
void backward_tiled_predict(const Target &target, RoutingBackwardStages &g) {
    RoutingStages &r = g.forward;
    schedule_prediction_stages(target, g);
    root_rows(g.grad_u_hat, 256, 8);

    // Every other stage as tiled_stages computes it.
    const std::set<std::string> scheduled = {r.u_hat.name(), g.grad_u_hat.name(), g.grad_u.name(),
                                             g.grad_W.name()};
    const RVar in_caps = r.ri.x;
    visit_backward_stages(g, true, [&](Func f, bool in_caps_sum) {
        if (!scheduled.count(f.name())) tiled_stage(f, in_caps_sum, in_caps);
    });
    root_tiled(g.outputs[2]);  // grad_b0
}

// A Func computed whole, its two innermost dimensions fused into one index
// split over blocks of `threads` threads (blocks also over its other
// dimensions). At J = 10 root_tiled's 16 x 16 tiles of (j, i) or (e, j) leave
// 6 of every 16 threads idle; here every thread of a block but the last
// block's tail owns a point. Returns the thread variable.
Var root_fused_rows(Func f, int threads) {
    const std::vector<Var> a = f.args();
    Var rows("rows"), rows_o("rows_o"), rows_t("rows_t");
    f.compute_root();
    if (a.size() == 1) {
        f.split(a[0], rows_o, rows_t, threads, TailStrategy::GuardWithIf).gpu_threads(rows_t).gpu_blocks(rows_o);
        return rows_t;
    }
    f.fuse(a[0], a[1], rows).split(rows, rows_o, rows_t, threads, TailStrategy::GuardWithIf).gpu_threads(rows_t);
    if (a.size() == 2) f.gpu_blocks(rows_o);
    if (a.size() == 3) f.gpu_blocks(rows_o, a[2]);
    if (a.size() == 4) f.gpu_blocks(rows_o, a[2], a[3]);
    return rows_t;
}

// One point of f computed in a register of each thread of `consumer` that
// reads it (`thread`: the consumer's thread variable, as root_fused_rows
// returns it), init and update. Each thread must read one point of f; bounds
// inference through a fused thread index cannot see that.
void compute_in_thread(Func f, Func consumer, Var thread) {
    f.compute_at(consumer, thread).store_in(MemoryType::Register);
    for (const Var &v : f.args()) f.bound_extent(v, 1);
}

// compute_root_tiled with root_fused_rows' threads: a Func with a reduction
// runs its init and update in a register of the thread that owns the point.
// Returns the Func itself (the register-resident stage) for further
// scheduling of its update.
Func compute_root_rows(Func f, int threads) {
    if (!f.has_update_definition()) {
        root_fused_rows(f, threads);
        return f;
    }
    Func whole = f.in();
    compute_in_thread(f, whole, root_fused_rows(whole, threads));
    return f;
}

// A sum over in_caps (s, grad_v_agree: (e, j, b)) in chunks of 64 capsules
// added in parallel (rfactor), then the chunks' sums (compute_root_rows).
// Each chunk's sum is one kernel: a thread per (e, j, b) of a chunk
// accumulates it in a register and writes it once (computed in place, init
// and update were two kernels and the update added into memory). With
// E == 16 a thread sums 4 e of a row as 16-byte loads.
void chunked_rows_sum(Func f, RVar in_caps, Var e, Var j, Var b, Expr out_dim) {
    RVar chunk("chunk"), within("within"), wo("wo"), wi("wi");
    Var c("chunk_v");
    Func parts = f.update().split(in_caps, chunk, within, 64, TailStrategy::GuardWithIf).rfactor(chunk, c);
    Func whole = parts.in();
    Var eo("eo"), ei("ei"), ej("ej"), ejb("ejb"), rows_o("rows_o"), rows_t("rows_t");
    // A thread per (e_vector e, j, b) of a chunk. (With one e a thread, e is
    // still split by 1: through a split, unlike a fused e alone, bounds
    // inference sees one e a thread.)
    auto threads = [&](Stage s, int e_vector, TailStrategy e_tail) {
        s.split(e, eo, ei, e_vector, e_tail)
            .fuse(eo, j, ej)
            .fuse(ej, b, ejb)
            .split(ejb, rows_o, rows_t, 128, TailStrategy::GuardWithIf)
            .reorder(ei, rows_t, rows_o, c)
            .gpu_threads(rows_t)
            .gpu_blocks(rows_o, c);
    };
    whole.compute_root().align_storage(e, 4);
    threads(whole.specialize(out_dim == 16), 4, TailStrategy::RoundUp);
    whole.specialize(out_dim == 16).vectorize(ei);
    threads(whole, 1, TailStrategy::Auto);
    parts.compute_at(whole, rows_t).store_in(MemoryType::Register);
    // One (j, b, chunk) a thread, and at most 4 e; bounds inference through
    // the fused index cannot see that.
    parts.bound_extent(j, 1).bound_extent(b, 1).bound_extent(c, 1).bound_storage(e, 4);
    parts.specialize(out_dim == 16).vectorize(e, 4, TailStrategy::RoundUp);
    // The chunk's capsules 4 at a time, unrolled; with E == 16 each a vector
    // of the thread's 4 e.
    auto walk = [&](Stage s) { return s.split(within, wo, wi, 4, TailStrategy::GuardWithIf); };
    walk(parts.update().specialize(out_dim == 16))
        .reorder(e, wi, wo, j, b, c)
        .vectorize(e, 4, TailStrategy::RoundUp)
        .unroll(wi);
    walk(parts.update()).reorder(wi, wo, e, j, b, c).unroll(wi);
    compute_root_rows(f, 128);
}

// rows_predict: tiled_predict's prediction kernels (u_hat, grad_u, grad_W);
// every other stage over root_fused_rows' threads instead of 16 x 16 tiles
// (at J = 10 those leave 6 of 16 threads idle), and, when E == 16
// (specialised; other E run the same mapping with scalar loads):
//  - the sums over e of a u_hat row (the recomputed forward's agreements and
//    every grad_c), a thread per (j, i, b), read the row and the other factor
//    as four 16-byte loads each (u_hat, v and grad_s stored with rows of E
//    aligned to 4 floats);
//  - grad_u_hat writes 4 e of a row as one 16-byte store;
//  - the sums over in_caps (s, grad_v_agree) in chunks of 64 capsules
//    (chunked_rows_sum) are a thread per (4 e, j, b), accumulating 16-byte
//    loads of u_hat in registers, one kernel a chunked sum;
//  - the squash's row statistics and s . grad_v are computed inside v's and
//    grad_s's threads, not as kernels of their own; grad_v is inlined;
//  - the pure (j, i, b) stages run 4 batch elements a thread; grad_b0's sum
//    over the batch is unrolled by 8.
// Measured 2026-11-22 on an NVIDIA H200 (bench/results/nvidia-h200-rows-
// predict/run7, device time, `halcaps bench --device cuda --op
// digitcaps_backward --shapes mnist_b128,mnist_b512 --implementations
// tiled_predict,rows_predict --repeats 30 --seed 362`): b128 732.1 us against
// tiled_predict's 1141.3 (1.56x), b512 2460.1 against 3965.8 (1.61x); 2.82x
// and 2.81x the fused_split_vectors forward of the same session (259.5 and
// 874.3 us). Under ncu (run 6, 842 us a call at b128): grad_u 113, the three grad_c
// 103, grad_W 98, the three s chunk sums 82, grad_u_hat 70, the two
// agreements 69, u_hat 62; what is left is mostly the 14 passes over
// u_hat-sized data that this stage-per-kernel structure makes.
// History (same protocol; runs 1-7 there): the first cut (fused rows and the
// vector e sums only) 876.9 us; grad_u_hat and the chunk sums as vectors
// 822.3; chunks of 32 capsules 840.0 (the chunk sums no faster, their init
// and final kernels slower); pure stages 4 batch elements a thread 798.9
// (with the (e, j, b) stages too, which made grad_s 3.9 -> 7.9 us: too few
// threads); then (run 6) the chunk sums' init and update in one kernel, the
// (e, j, b) stages one point a thread, the squash statistics and s . grad_v
// in their consumers' threads. Predicted for run 6: 40-60 us less under
// ncu (five init kernels, grad_s back to about 4 us, nine small kernels
// gone), about 750-765 us; measured 920 -> 842 us under ncu, 738.9 us.
// Tried and dropped: the softmax's max and sum computed inside c's threads
// and c . grad_c inside grad_logits' (each thread its row's sums again)
// 833.5 us, c and grad_logits 3.5x and 2.2x slower; c and grad_logits a
// thread per (i, b) row walking its J points, the row's sums in registers
// (run 6, `rows_softmax`) 770.2 us against 738.9; grad_u_hat a thread per
// (4 e, j, b) walking 32 capsules, grad_s and v loaded once a walk (run 8):
// 109 us under ncu against 70, a quarter of the threads; the e sums a
// thread per (j, b) walking 16 capsules, the other factor's row loaded once
// a walk (runs 8, 9): faster under ncu (grad_c 29 us against 34, the
// agreements 29 against 35) but not in the pipeline, 747.0 us against
// run 7's 732.1 (ncu flushes the caches between kernels; in the pipeline
// those rows are L2 hits). Not run: the e sums as 4 lanes per row (rfactor
// over quarters, staged in shared memory), whose PTX kept scalar loads.
//
// rows_vectors (gradient schedules "vectors"): the same, with the
// prediction's `vectors` gradient kernels (grad_u a thread per batch row,
// grad_W a thread per 4 e and 4 k, both reading grad_u_hat 16 bytes at a
// time; schedules/capsule_prediction_schedules.cpp). grad_u_hat's region is
// bounded to the whole row (its readers clamp e), which makes its rows
// provably start 16-byte aligned. Measured 2026-11-22 on an NVIDIA H200
// (bench/results/nvidia-h200-gradient-tries/run6, device time, `halcaps
// bench --device cuda --op digitcaps_backward --repeats 30 --seed 462`):
// MNIST b128 653.8 us (rows_predict 728.7; with `vectors`' grad_u alone
// 693.1), b512 2110.7 (2443.1; 2267.5). On the way: `vectors`' grad_W kept
// scalar loads until the layer's generator tied the gradients' extents to
// the inputs' (its index clamps are against W's out_dim); the first build
// aligned grad_u_hat's region to 4 e (align_bounds), which at out_dim 1
// computed e past the row and read grad_v out of bounds (Halide's bounds
// check failed 2 CUDA test cases, run3).
// Then (bench/results/nvidia-h200-forward-sums/run3, seeds 521 and 522, the
// variants side by side): u_hat by the prediction's batch_walk kernel
// instead of `tuned` (48.3 -> 34.3 us at the device's clocks under ncu),
// MNIST b128 639.0 / 641.7 us against 652.2 / 654.6; with the logits
// inlined too (their three kernels gone) 628.0 / 627.5, kept; b512 2031.3 /
// 2028.8 against 2112.8 / 2112.6. grad_u_hat with 2 batch elements a thread
// instead of 8, on top: 632.3 / 634.2, not kept.
// Later u_hat by the prediction's batch_rows (a block over the whole (e, j)
// row; bench/results/nvidia-h200-batch-rows/run4, seeds 843 and 844,
// against the previous binary): b128 627.6 / 627.0 us against 629.2 /
// 633.4, b512 2061.3 / 2062.1 against 2026.7 / 2029.1; not kept.
//
// digitcaps_backward_with_s (the s of every iteration given by the
// forward, digitcaps_with_s): the same schedules, with s inlined as a read
// of the input (its three chunked sums over in_caps and their totals gone)
// and the agreements of every iteration one Tuple-valued e sum
// (r.agreements, one kernel for the two at 3 iterations), their pure
// reads inlined. Predicted: about 96 us less than rows_vectors from s, 26
// more from the agreements. Measured 2026-11-22 on an NVIDIA H200
// (bench/results/nvidia-h200-training-pair/run2, `halcaps bench --device
// cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512
// --implementations rows_vectors --seed 622`): b128 521.5 us against
// rows_vectors' 628.7 for digitcaps_backward in the same call, b512 1654.0
// against 2024.3; with the agreements still two kernels (run1, seed 612)
// 542.4 and 1717.0.
// Then the last iteration's grad_c as the Tuple's third element (the
// generator builds the last grad_s with the routing; its own pass over
// u_hat goes). Predicted: about 25 us less at b128. Measured 2026-11-22
// on an NVIDIA H200 against the previous binary, alternating in one run
// (bench/results/nvidia-h200-last-grad-c/run3, seeds 741 and 742): b128
// 507.2 / 508.1 us against 525.2 / 524.4, b512 1605.8 / 1605.4 against
// 1660.5 / 1658.1 (the forward with s 181.5 / 181.3 and 550.2 / 550.0:
// 2.79x / 2.80x and 2.92x). Under ncu (run1) the three-element Tuple kernel
// takes 51.6 us, against about 27 for an e sum with one factor: it is
// L1-bound, 3 factor rows of 10 j a warp. Tried in run 2 and dropped
// (schedule_tries.diff there): its threads over capsules fastest, so that
// a warp's factor loads are broadcasts (57.4 us), and the softmax's max and
// sum computed in c's threads and c . grad_c in grad_logits' (c 7 -> 25-37
// us a kernel, grad_logits 6.5 -> 13-18); together 559.6 us at b128.
// Tried again 2026-11-22 without the J-fold repetition of those sums
// (bench/results/nvidia-h200-squash-groups/run2, schedule_tries.diff there):
// c and grad_logits each by a thread per (i, b) row of J values, the row's
// max and sum of exps (or c . grad_c) in that thread's registers, so that
// logit_max, exp_sum and c . grad_c have no kernels. Predicted: about 40 us
// less at b128 (the three softmax kernels 14.6 us an iteration, the two of
// grad_logits 12). Measured against the previous binary, alternating (seeds
// 773 and 774): the backward with s 518.4 / 517.0 us at b128 against 507.8 /
// 501.7, 1667.0 against 1606.1 / 1601.3 at b512; under ncu c took 18-21 us
// a kernel and grad_logits 12.6-14.5. A warp's loads and stores of those
// rows are 40 bytes apart a lane, where the threads over (j, i) of the
// kernels kept here store whole sectors. Dropped.
//
// What rows_vectors changes in rows_predict's kernels: the prediction's
// schedules (batch_walk for u_hat, vectors for both gradients) and the
// logits inlined into their readers.
struct RowsVariant {
    PredictionSchedules prediction;
    bool inline_logits = false;  // logits[t] = logits[t-1] + agreement[t-1] not stored
};

void backward_rows_predict(const Target &target, RoutingBackwardStages &g, const RowsVariant &variant = RowsVariant()) {
    RoutingStages &r = g.forward;
    const Var e = r.e, j = r.j, i = r.i, b = r.b;
    const Expr out_dim = r.re.x.extent();

    Func u_hat = schedule_prediction_stages(target, g, variant.prediction);
    // Rows of E start 16-byte aligned, so that a row's loads are 16-byte vectors.
    u_hat.align_storage(e, 4);
    for (auto &it : r.iterations) it.squash.v.align_storage(e, 4);
    for (auto &it : g.iterations) it.grad_s.align_storage(e, 4);

    // grad_u_hat: with E == 16 a thread writes 4 e of a row as one vector;
    // otherwise root_rows.
    g.grad_u_hat.compute_root().align_storage(e, 4);
    // vectors' gradients read grad_u_hat 16 bytes at a time: its rows must
    // provably start at multiples of 4 e. The region in e is always the
    // whole row (its readers clamp e); saying so makes its start 0.
    if (variant.prediction.grad_u == "vectors" || variant.prediction.grad_W == "vectors") {
        g.grad_u_hat.bound(e, 0, out_dim);
    }
    Var eo("eo"), ei("ei"), ej("ej"), eji("eji"), rows_o("rows_o"), rows_t("rows_t"), bo("bo"), bi("bi");
    g.grad_u_hat.specialize(out_dim == 16)
        .split(e, eo, ei, 4, TailStrategy::RoundUp)
        .fuse(eo, j, ej)
        .fuse(ej, i, eji)
        .split(eji, rows_o, rows_t, 256, TailStrategy::GuardWithIf)
        .split(b, bo, bi, 8, TailStrategy::GuardWithIf)
        .reorder(ei, bi, rows_t, rows_o, bo)
        .gpu_threads(rows_t)
        .gpu_blocks(rows_o, bo)
        .unroll(bi)
        .vectorize(ei);
    root_rows(g.grad_u_hat, 256, 8);

    // The squash's statistics of a row of s over e (max_abs, norm2_scaled)
    // and s . grad_v, per (j, b) (1280 points at MNIST b128, about 4 us a
    // kernel under ncu, mostly launch and tail), are computed by every thread
    // of the (e, j, b) stage that reads them: v's threads in the forward, and
    // grad_s's, on copies of their own, in the backward. A thread's 16 reads
    // of a row are its warp's 16 neighbours' too. grad_v, a copy, is inlined.
    std::set<std::string> in_threads;
    for (size_t t = 0; t < g.iterations.size(); t++) {
        SquashStages &q = r.iterations[t].squash;
        RoutingBackwardIteration &it = g.iterations[t];
        const Var grad_s_thread = root_fused_rows(it.grad_s, 128);
        compute_in_thread(it.s_dot_grad_v, it.grad_s, grad_s_thread);
        if (t + 1 == g.iterations.size()) {
            // The last v is not part of the backward.
            compute_in_thread(q.max_abs, it.grad_s, grad_s_thread);
            compute_in_thread(q.norm2_scaled, it.grad_s, grad_s_thread);
        } else {
            const Var v_thread = root_fused_rows(q.v, 128);
            compute_in_thread(q.max_abs, q.v, v_thread);
            compute_in_thread(q.norm2_scaled, q.v, v_thread);
            Func norm2_in_grad_s = q.norm2_scaled.clone_in(it.grad_s);
            Func max_abs_in_grad_s = q.max_abs.clone_in({it.grad_s, it.s_dot_grad_v, norm2_in_grad_s});
            compute_in_thread(max_abs_in_grad_s, it.grad_s, grad_s_thread);
            compute_in_thread(norm2_in_grad_s, it.grad_s, grad_s_thread);
        }
        for (Func f : {q.max_abs, q.norm2_scaled, q.v, it.grad_s, it.s_dot_grad_v, it.grad_v}) {
            in_threads.insert(f.name());
        }
    }

    std::set<std::string> e_sums;
    for (const auto &it : r.iterations) {
        if (it.agreement.defined()) e_sums.insert(it.agreement.name());
    }
    for (const auto &it : g.iterations) e_sums.insert(it.grad_c.name());
    const std::set<std::string> scheduled = {r.u_hat.name(), g.grad_u_hat.name(), g.grad_u.name(),
                                             g.grad_W.name()};
    const RVar in_caps = r.ri.x;
    // Inlined, logits[t] is b0 plus t agreements wherever it is read (by
    // logit_max, exp_sum and c of iteration t): its kernel and its 5.9 MB
    // store (MNIST b128) go, its readers load t + 1 values instead of one.
    std::set<std::string> logits;
    for (const auto &it : r.iterations) logits.insert(it.logits.name());
    // A given s (digitcaps_backward_with_s) is a read of the input, and the
    // agreements and the last grad_c there reads of r.agreements: all inlined.
    std::set<std::string> inlined_reads;
    for (const auto &it : r.iterations) {
        if (!it.s.has_update_definition()) inlined_reads.insert(it.s.name());
        if (it.agreement.defined() && !it.agreement.has_update_definition()) inlined_reads.insert(it.agreement.name());
    }
    for (const auto &it : g.iterations) {
        if (!it.grad_c.has_update_definition()) inlined_reads.insert(it.grad_c.name());
    }
    if (r.agreements.defined()) e_sums.insert(r.agreements.name());
    visit_backward_stages(g, true, [&](Func f, bool in_caps_sum) {
        if (scheduled.count(f.name()) || in_threads.count(f.name()) || inlined_reads.count(f.name())) return;
        if (variant.inline_logits && logits.count(f.name())) return;
        if (in_caps_sum) {
            chunked_rows_sum(f, in_caps, e, j, b, out_dim);
            return;
        }
        if (!f.has_update_definition() && f.args().size() == 3 && !f.args()[0].same_as(e)) {
            // A pure stage over (j, i, b): 4 batch elements a thread, so that
            // its loads of them are in flight together. Not the (e, j, b)
            // stages: at 20 K points they have too few threads for it.
            root_rows(f, 128, 4);
            return;
        }
        Func inner = compute_root_rows(f, 128);
        if (f.name() == g.grad_b0.name()) {
            // The sum over the batch: 8 loads in flight a thread.
            RVar bo("bo"), bi("bi");
            inner.update().split(g.rb.x, bo, bi, 8, TailStrategy::GuardWithIf).unroll(bi);
        }
        if (e_sums.count(f.name())) {
            // A thread's sum over its u_hat row: with E == 16, four 16-byte
            // loads of the row and of the other factor; otherwise 4 scalar
            // loads in flight at a time.
            RVar eo("eo"), ei("ei");
            inner.update().specialize(out_dim == 16).split(r.re.x, eo, ei, 4).atomic().vectorize(ei).unroll(eo);
            inner.update().split(r.re.x, eo, ei, 4, TailStrategy::GuardWithIf).unroll(ei);
        }
    });
    root_fused_rows(g.outputs[2], 128);  // grad_b0
}

// ---------------------------------------------------- one routing step --

// cpu for the routing_step_* generators: parallel over batch elements. The
// forward steps compute a batch element's softmax, squash and sums inside
// the output's loop over b, as routing_per_batch_element does (one pass over
// its slice of u_hat a step); the backward steps, which have two outputs,
// compute every stage whole first, as backward_cpu does.
void routing_step_cpu(const std::string &generator, const Target &target, RoutingStepStages &st) {
    const int vec = target.natural_vector_size<float>();
    if (generator == "routing_step_backward" || generator == "routing_step_backward_last") {
        for (Func f : {st.logit_max, st.exp_sum, st.c, st.squash.max_abs, st.squash.norm2_scaled, st.squash.v}) {
            compute_root_eager(f, vec);
        }
        const RoutingBackwardIteration &it = st.backward;
        for (Func f : {it.grad_v_agree, it.s_dot_grad_v, it.grad_s, it.grad_c, it.c_dot_grad_c}) {
            if (f.defined()) compute_root_eager(f, vec);
        }
        for (Func f : st.outputs) compute_root_eager(f, vec);
        return;
    }
    Func out = st.outputs[0];
    const std::vector<Var> args = out.args();
    out.parallel(args.back()).vectorize(args.front(), vec, TailStrategy::GuardWithIf);
    const LoopLevel at(out, args.back());
    if (generator == "routing_step_s") {
        for (Func f : {st.logit_max, st.exp_sum}) {
            f.compute_at(at).vectorize(st.i, vec, TailStrategy::GuardWithIf);
            f.update().reorder(st.i, st.rj).vectorize(st.i, vec, TailStrategy::GuardWithIf);
        }
        st.c.compute_at(at).vectorize(st.j, vec, TailStrategy::GuardWithIf);
        Var eo("eo"), ei("ei");
        st.s.compute_at(at).vectorize(st.e, vec, TailStrategy::GuardWithIf);
        st.s.update()
            .split(st.e, eo, ei, vec, TailStrategy::GuardWithIf)
            .reorder(ei, eo, st.j, st.ri)
            .vectorize(ei);
        return;
    }
    // routing_step_logits
    st.squash.max_abs.compute_at(at);
    st.squash.norm2_scaled.compute_at(at);
    st.squash.v.compute_at(at).vectorize(st.e, vec, TailStrategy::GuardWithIf);
    st.agreement.compute_at(at);
    st.agreement.update().atomic().vectorize(st.re, vec, TailStrategy::GuardWithIf);
}

}  // namespace

void schedule_routing_step(const std::string &generator, const std::string &name, const Target &target,
                           RoutingStepStages &st) {
    check_schedule(generator, name, target, {"cpu"}, kNoGpuSchedules);
    routing_step_cpu(generator, target, st);
}

void schedule_squash(const std::string &name, const Target &target, SquashGeneratorStages &s) {
    check_schedule("squash", name, target, {"cpu"}, kNoGpuSchedules);
    squash_cpu(target, s);
}

void schedule_routing(const std::string &name, const Target &target, RoutingStages &r) {
    check_schedule("routing", name, target, kCpuSchedules, kGpuSchedules);
    if (target.has_gpu_feature()) {
        routing_stage_per_op_gpu(r);
        return;
    }
    if (name == "cpu") routing_cpu(target, r);
    if (name == "stage_per_op") routing_stage_per_op(target, r);
}

void schedule_digitcaps(const std::string &name, const Target &target, RoutingStages &r) {
    if (autoschedulers::is_autoscheduler_row(name)) return autoschedule("digitcaps", name, target, {r.v});
    check_schedule("digitcaps", name, target, kCpuSchedules, kGpuSchedules);
    if (target.has_gpu_feature()) {
        digitcaps_stage_per_op_gpu(r);
        return;
    }
    if (name == "cpu") digitcaps_cpu(target, r);
    if (name == "stage_per_op") digitcaps_stage_per_op(target, r);
}

void schedule_routing_backward(const std::string &name, const Target &target, RoutingBackwardStages &g) {
    check_schedule("routing_backward", name, target, {"cpu"}, kGpuBackwardSchedules);
    if (target.has_gpu_feature()) {
        return name == "tiled_stages" ? backward_tiled_stages(g, false) : backward_stage_per_kernel(g, false);
    }
    backward_cpu(target, g, false);
}

void schedule_digitcaps_backward(const std::string &name, const Target &target, RoutingBackwardStages &g) {
    check_schedule("digitcaps_backward", name, target, {"cpu"}, kGpuLayerBackwardSchedules);
    if (target.has_gpu_feature()) {
        if (name == "tiled_predict") return backward_tiled_predict(target, g);
        if (name == "rows_predict") return backward_rows_predict(target, g);
        if (name == "rows_vectors") return backward_rows_predict(target, g, {{"batch_walk", "vectors", "vectors"}, true});
        return name == "tiled_stages" ? backward_tiled_stages(g, true) : backward_stage_per_kernel(g, true);
    }
    backward_cpu(target, g, true);
}

}  // namespace halcaps

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
#include "common.h"
#include "predict_schedules.h"

namespace halcaps {

using namespace Halide;
using schedule_util::apply_schedule;
using schedule_util::ScheduleTable;
using schedule_util::ScheduleTarget;

namespace {

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

// One routing iteration's softmax and s of one batch element, computed
// inside the output's loop over b (`at`). A capsule's max and exp-sum over
// out_caps (10 at MNIST): vectors across input capsules, each lane walking
// its capsule's j, so the exps are vector ones (scalar, they took most of
// routing's time). s accumulates over i with e innermost (a row of u_hat is
// E contiguous floats).
void softmax_and_s_at(Func logit_max, Func exp_sum, Func c, Func s, const Var &e, const Var &j, const Var &i,
                      const RDom &ri, const RDom &rj, LoopLevel at, int vec) {
    for (Func f : {logit_max, exp_sum}) {
        f.compute_at(at).vectorize(i, vec, TailStrategy::GuardWithIf);
        f.update().reorder(i, rj).vectorize(i, vec, TailStrategy::GuardWithIf);
    }
    c.compute_at(at).vectorize(j, vec, TailStrategy::GuardWithIf);
    Var eo("eo"), ei("ei");
    s.compute_at(at).vectorize(e, vec, TailStrategy::GuardWithIf);
    s.update().split(e, eo, ei, vec, TailStrategy::GuardWithIf).reorder(ei, eo, j, ri).vectorize(ei);
}

// The squash's row statistics of one batch element at `at`, and, where the
// iteration has one, v and the agreement, which reduces each row of E with
// a vector dot product.
void squash_and_agreement_at(SquashStages &squash, Func agreement, const Var &e, const RDom &re, LoopLevel at,
                             int vec) {
    squash.max_abs.compute_at(at);
    squash.norm2_scaled.compute_at(at);
    if (agreement.defined()) {
        squash.v.compute_at(at).vectorize(e, vec, TailStrategy::GuardWithIf);
        agreement.compute_at(at);
        agreement.update().atomic().vectorize(re, vec, TailStrategy::GuardWithIf);
    }
}

// The routing iterations of one batch element, all computed inside the
// output's loop over b (`at`): logits, c, s, v and the agreement of a batch
// element are 50 KB and stay in L1/L2, and u_hat is read from wherever the
// caller put it (the input, or a per-batch-element tile for digitcaps).
void routing_per_batch_element(RoutingStages &r, LoopLevel at, int vec) {
    for (auto &it : r.iterations) {
        softmax_and_s_at(it.logit_max, it.exp_sum, it.c, it.s, r.e, r.j, r.i, r.ri, r.rj, at, vec);
        squash_and_agreement_at(it.squash, it.agreement, r.e, r.re, at, vec);
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

// rows: the GPU's squash, a thread per row of E (blocks of 64 rows) with
// the row's max and norm in its registers, then its E values. What the
// GPU routing steps end with (routing_steps.cpp); not timed.
void squash_gpu_rows(const Target &, SquashGeneratorStages &s) {
    Var no("no"), ni("ni");
    s.v.split(s.n, no, ni, 64, TailStrategy::GuardWithIf).reorder(s.e, ni, no).gpu_blocks(no).gpu_threads(ni);
    s.squash.max_abs.compute_at(s.v, ni);
    s.squash.norm2_scaled.compute_at(s.v, ni);
}

// ----------------------------------------------------------------- routing --

// cpu: parallel over batch elements; each one's routing runs start to end
// inside the b loop (routing_per_batch_element), reading its 737 KB slice of
// u_hat 2r-1 times from L2 after the first pass brings it from memory.
// Measured: 15.6 ms at MNIST b128, 3 iterations, on the 2-core AMD EPYC
// build machine (stage_per_op: 71.2).
void routing_cpu(const Target &target, RoutingStages &r) {
    const int vec = target.natural_vector_size<float>();
    r.v.parallel(r.b).vectorize(r.e, vec, TailStrategy::GuardWithIf);
    routing_per_batch_element(r, LoopLevel(r.v, r.b), vec);
}

// stage_per_op: every stage of every iteration computed whole (compute_root)
// before the next, as an eager framework runs one kernel per op.
// Measured: 71.2 ms at MNIST b128, 3 iterations, on the 2-core AMD EPYC
// build machine.
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
// Measured: 35.3 ms at MNIST b128, 3 iterations, 2 threads (the median of
// five runs' medians), against 40.9 with u_hat's accumulators in memory, on
// the 2-core Xeon build machine.
void digitcaps_cpu(const Target &target, RoutingStages &r) {
    const int vec = target.natural_vector_size<float>();
    Var bo("bo"), bi("bi");
    r.v.split(r.b, bo, bi, 2, TailStrategy::GuardWithIf).parallel(bo).vectorize(r.e, vec, TailStrategy::GuardWithIf);
    const LoopLevel per_pair(r.v, bo), per_batch(r.v, bi);

    // The pair's u_hat one e vector of both batch elements at a time, each
    // summed over k in registers (a constant-size reduction: two FMA chains
    // sharing each load of W; in memory each FMA's accumulator went through
    // a store and a reload). Specialised for out_dim one vector, in_dim 8.
    Var eo("eo"), ei("ei");
    Func tile = r.u_hat.in();
    tile.compute_at(per_pair)
        .split(r.e, eo, ei, vec, TailStrategy::GuardWithIf)
        .reorder(ei, r.b, eo, r.j, r.i)
        .vectorize(ei)
        .unroll(r.b, 2, TailStrategy::GuardWithIf);
    tile.specialize(r.re.x.extent() == vec && r.rk.x.extent() == 8);
    r.u_hat.compute_at(tile, eo).vectorize(r.e).unroll(r.b);
    r.u_hat.update().reorder(r.e, r.b, r.rk).vectorize(r.e).unroll(r.b);
    r.u_hat.bound_storage(r.e, vec).bound_storage(r.b, 2);
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
// Measured: 105.9 ms at MNIST b128, 3 iterations, on the 2-core AMD EPYC
// build machine.
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
// The CUDA default for routing alone.
// Measured: 752.0 us at MNIST b128, 3 iterations, on an H200.
void routing_stage_per_op_gpu(RoutingStages &r) {
    for (Func f : forward_stages(r)) compute_root_gpu(f);
    compute_root_gpu(r.v);
}

// stage_per_kernel for the layer: u_hat materialised (94 MB at MNIST b128)
// by one kernel, then one kernel per routing stage.
// Measured: 1199.8 us at MNIST b128, 3 iterations, on an H200.
void digitcaps_stage_per_op_gpu(RoutingStages &r) {
    compute_root_gpu(r.u_hat);
    routing_stage_per_op_gpu(r);
}

// ----------------------------------------------- backward, hand-derived --

// The layer backward's grad_u and grad_W on the CPU, from the whole
// grad_u_hat: k vectors (8 floats, in_dim at MNIST) over dense copies of W
// and u, so the prediction's clamped reads of them are paid once per
// element, not as a gather per vector. grad_u walks 8 input capsules at a
// time (8 independent accumulators per (e, j)); grad_W walks one input
// capsule's (e, j) accumulators for each batch element in turn (its
// grad_u_hat reads run along e, its u row is one vector).
void prediction_gradients_cpu(const Target &target, RoutingBackwardStages &g) {
    RoutingStages &r = g.forward;
    const Var k = g.k, e = r.e, j = r.j, i = r.i, b = r.b;
    const int kvec = std::min(target.natural_vector_size<float>(), 8);
    Func W_rows = r.W.in(g.grad_u), u_rows = r.u.in(g.grad_W);
    {
        std::vector<Var> w = W_rows.args();  // (k, e, j, i)
        W_rows.compute_root().parallel(w[3]).vectorize(w[0], kvec, TailStrategy::GuardWithIf);
    }
    Var io("io"), ii("ii");
    g.grad_u.compute_root().parallel(b).vectorize(k, kvec, TailStrategy::GuardWithIf);
    g.grad_u.update()
        .split(i, io, ii, 8, TailStrategy::GuardWithIf)
        .reorder(k, ii, g.r_ej.x, g.r_ej.y, io, b)
        .vectorize(k, kvec, TailStrategy::GuardWithIf)
        .unroll(ii)
        .parallel(b);
    g.grad_W.compute_root().parallel(i).vectorize(k, kvec, TailStrategy::GuardWithIf);
    g.grad_W.update().reorder(k, e, j, g.rb, i).vectorize(k, kvec, TailStrategy::GuardWithIf).parallel(i);
    u_rows.compute_at(g.grad_W, i).vectorize(u_rows.args()[0], kvec, TailStrategy::GuardWithIf);
}

// cpu: every stage of the recomputed forward and of the backward computed
// whole, parallel over its outermost dimension and vectorized along its
// innermost (u_hat included, for digitcaps: the backward reads it 4r-2
// times). For the layer, u_hat as the forward's cpu computes it, the sums
// over out_dim one vector dot product a row, grad_u and grad_W as
// prediction_gradients_cpu. Simple, and it bounds the memory: the largest
// stage is u_hat-sized.
// Measured: 269 ms of CPU time a call for digitcaps_backward_with_s at MNIST
// b128, 3 iterations, one thread (perf task-clock), against 730 with every
// stage computed eagerly, on the 2-core Xeon build machine at load 10.
void backward_cpu(const Target &target, RoutingBackwardStages &g, bool digitcaps) {
    const int vec = target.natural_vector_size<float>();
    RoutingStages &r = g.forward;
    std::set<std::string> own;  // the layer's stages scheduled here, not eagerly
    if (digitcaps) {
        prediction_gradients_cpu(target, g);
        own = {g.grad_u.name(), g.grad_W.name(), r.u_hat.name()};
        // u_hat as the forward's cpu computes it: from W transposed to
        // e-innermost, at in_dim 8 a row's 8 FMAs in a register.
        Func W_by_e = r.W;
        std::vector<Var> w = W_by_e.args();  // (k, e, j, i)
        W_by_e.compute_root()
            .parallel(w[3])
            .reorder_storage(w[1], w[0], w[2], w[3])
            .reorder(w[1], w[0], w[2], w[3])
            .vectorize(w[1], vec, TailStrategy::GuardWithIf);
        Var eo("eo"), ei("ei");
        r.u_hat.compute_root().parallel(r.b).vectorize(r.e, vec, TailStrategy::GuardWithIf);
        Stage acc = r.u_hat.update();
        acc.split(r.e, eo, ei, vec, TailStrategy::GuardWithIf)
            .reorder(ei, r.rk, eo, r.j, r.i, r.b)
            .vectorize(ei)
            .parallel(r.b);
        acc.specialize(r.rk.x.extent() == 8).unroll(r.rk);
        // Sums over out_dim of (j, i, b): one vector dot product a u_hat row
        // (vectorised along j they gathered e-strided floats).
        std::vector<Func> e_sums;
        if (r.agreements.defined()) e_sums.push_back(r.agreements);
        for (const auto &it : r.iterations) {
            if (it.agreement.defined() && it.agreement.has_update_definition()) e_sums.push_back(it.agreement);
        }
        for (const auto &it : g.iterations) {
            if (it.grad_c.has_update_definition()) e_sums.push_back(it.grad_c);
        }
        for (Func f : e_sums) {
            own.insert(f.name());
            f.compute_root().parallel(r.b).vectorize(r.j, vec, TailStrategy::GuardWithIf);
            f.update().atomic().vectorize(r.re, vec, TailStrategy::GuardWithIf).parallel(r.b);
        }
    }
    visit_backward_stages(g, digitcaps, [&](Func f, bool) {
        if (own.count(f.name()) == 0) compute_root_eager(f, vec);
    });
    for (Func f : g.outputs) compute_root_eager(f, vec);
}

// stage_per_kernel for the backward: backward_cpu's structure on the GPU,
// every stage of the recomputed forward and of the backward one kernel
// (compute_root_gpu: one thread per output point, reductions serial in the
// thread). The working baseline for a fused GPU backward; u_hat (digitcaps)
// and grad_u_hat are materialised, 94 MB each at MNIST b128.
// Its gradient kernels read grad_u_hat through clamped indices (for the
// rows_* schedules) and pay for the clamps.
// Measured: 4035.8 us for the layer at MNIST b128, 3 iterations, on an H200.
void backward_stage_per_kernel(RoutingBackwardStages &g, bool digitcaps) {
    visit_backward_stages(g, digitcaps, [](Func f, bool) { compute_root_gpu(f); });
    for (Func f : g.outputs) compute_root_gpu(f);
}

// A pure Func computed whole, its dimensions but the last fused into one
// index (contiguous in memory): threads over `threads` consecutive points of
// it, each thread walking `batch_tile` points of the last dimension, the
// batch (unrolled: independent loads in flight); blocks over the rest.
// For u_hat's shape (e, j, i, b) 16 x 16 (e, j) tiles instead run a block
// of 160 live threads per (i, b), and at J = 10 leave 6 of 16 rows idle.
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

// The capsule prediction's schedules (schedules/predict_schedules.cpp)
// that compute the layer backward's u_hat, grad_u and grad_W.
struct PredictionSchedules {
    std::string u_hat = "tuned", grad_u = "tuned", grad_W = "tuned";
};

// The prediction's kernels of the layer's backward (u_hat, grad_u, grad_W),
// as the rows_* schedules schedule them: they take most of the backward's
// time (u_hat = W u by a forward schedule of the prediction; grad_u and grad_W
// by its gradient schedules, on grad_u_hat read through grad_u_hat_in,
// generators/digitcaps.cpp). Returns u_hat's stored copy.
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
    forward.out_dim = r.re.x.extent();  // no u_hat_buffer: u_hat is a stage of the layer backward
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

// A Func computed whole, its two innermost dimensions fused into one index
// split over blocks of `threads` threads (blocks also over its other
// dimensions). At J = 10 16 x 16 thread tiles of (j, i) or (e, j) leave
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

// A Func computed whole over root_fused_rows' threads: one with a reduction
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

// rows_predict: the prediction's `tuned` kernels for u_hat, grad_u and
// grad_W (schedule_prediction_stages); every other stage over
// root_fused_rows' threads instead of 16 x 16 tiles (at J = 10 those leave 6
// of 16 threads idle), and, when E == 16
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
// What is left is mostly the 14 passes over u_hat-sized data that this
// stage-per-kernel structure makes.
// Measured: 728.5 us for the layer at MNIST b128, 3 iterations, on an H200.
//
// rows_vectors (gradient schedules "vectors"): the same, with the
// prediction's `vectors` gradient kernels (grad_u a thread per batch row,
// grad_W a thread per 4 e and 4 k, both reading grad_u_hat 16 bytes at a
// time; schedules/predict_schedules.cpp). grad_u_hat's region is
// bounded to the whole row (its readers clamp e), which makes its rows
// provably start 16-byte aligned. u_hat is computed by the prediction's
// batch_walk kernel and the logits are inlined into their readers. The CUDA
// default at 3 iterations (rows_predict where a host grad_u or grad_W does not
// start on a 16-byte boundary).
// Measured: 619.3 us for the layer at MNIST b128, 3 iterations, on an H200.
//
// digitcaps_backward_with_s (the s of every iteration given by the
// forward, digitcaps_with_s): the same schedules, with s inlined as a read
// of the input (its three chunked sums over in_caps and their totals gone)
// and the agreements of every iteration one Tuple-valued e sum
// (r.agreements, one kernel for the two at 3 iterations), their pure
// reads inlined; the last iteration's grad_c is the Tuple's third element
// (the generator builds the last grad_s with the routing, so its own pass
// over u_hat goes).
// Measured: rows_vectors 494.5 us at MNIST b128, 3 iterations, on an H200
// (the plain backward: 619.3).
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
    const std::set<std::string> scheduled = {r.u_hat.name(), g.grad_u_hat.name(), g.grad_u.name(), g.grad_W.name()};
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

// cpu for the routing_step_* generators: parallel over batch elements.
// The forward steps compute a batch element's stages inside the output's
// loop over b, as routing_per_batch_element does (one pass over its slice
// of u_hat a step): routing_step_s its softmax and s, routing_step_logits
// its squash and agreement.
LoopLevel step_output_per_batch_element(const Target &target, RoutingStepStages &st) {
    const int vec = target.natural_vector_size<float>();
    Func out = st.outputs[0];
    const std::vector<Var> args = out.args();
    out.parallel(args.back()).vectorize(args.front(), vec, TailStrategy::GuardWithIf);
    return LoopLevel(out, args.back());
}

void routing_step_s_cpu(const Target &target, RoutingStepStages &st) {
    const LoopLevel at = step_output_per_batch_element(target, st);
    softmax_and_s_at(st.logit_max, st.exp_sum, st.c, st.s, st.e, st.j, st.i, st.ri, st.rj, at,
                     target.natural_vector_size<float>());
}

void routing_step_logits_cpu(const Target &target, RoutingStepStages &st) {
    const LoopLevel at = step_output_per_batch_element(target, st);
    squash_and_agreement_at(st.squash, st.agreement, st.e, st.re, at, target.natural_vector_size<float>());
}

// The backward steps, which have two outputs, compute every stage whole
// first, as backward_cpu does.
void routing_step_backward_cpu(const Target &target, RoutingStepStages &st) {
    const int vec = target.natural_vector_size<float>();
    for (Func f : {st.logit_max, st.exp_sum, st.c, st.squash.max_abs, st.squash.norm2_scaled, st.squash.v}) {
        compute_root_eager(f, vec);
    }
    const RoutingBackwardIteration &it = st.backward;
    for (Func f : {it.grad_v_agree, it.s_dot_grad_v, it.grad_s, it.grad_c, it.c_dot_grad_c}) {
        if (f.defined()) compute_root_eager(f, vec);
    }
    for (Func f : st.outputs) compute_root_eager(f, vec);
}

void routing_step_grad_b0_cpu(const Target &target, RoutingStepStages &st) {
    const int vec = target.natural_vector_size<float>();
    st.grad_b0.compute_at(st.outputs[0], st.i).vectorize(st.j, vec, TailStrategy::GuardWithIf);
    st.grad_b0.update().vectorize(st.j, vec, TailStrategy::GuardWithIf);
    st.outputs[0].parallel(st.i).vectorize(st.j, vec, TailStrategy::GuardWithIf);
}

// stage_per_kernel for the routing_step_* generators on the GPU: every stage
// of the step one kernel (compute_root_rows: a thread per point over rows
// of its two innermost dimensions, a sum in the thread's register), then
// the outputs. The GPU's general path for the counts no unrolled kernel is
// built for, and for the training pair's shapes the fast kernels refuse.
void routing_step_stage_per_kernel(const Target &, RoutingStepStages &st) {
    const RoutingBackwardIteration &it = st.backward;
    for (Func f : {st.logit_max, st.exp_sum, st.c, st.s, st.squash.max_abs, st.squash.norm2_scaled, st.squash.v,
                   st.agreement, it.grad_v_agree, it.s_dot_grad_v, it.grad_s, it.grad_c, it.c_dot_grad_c, st.grad_b0}) {
        // Undefined in this generator, or a read of an input (no reduction, inlined).
        if (f.defined() && f.has_update_definition()) compute_root_rows(f, 128);
    }
    for (Func f : {st.c, st.squash.v, it.grad_s}) {
        if (f.defined() && !f.has_update_definition()) compute_root_rows(f, 128);
    }
    for (Func f : st.outputs) root_fused_rows(f, 128);
}

// ------------------------------------------------------------- autodiff --

// root_autodiff: every Func the outputs depend on computed whole, serially.
void root_autodiff(const Target &, AutodiffStages &a) {
    for (const Func &out : a.outputs) {
        for (auto &[name, function] : Internal::find_transitive_calls(out.function())) {
            bool is_output = false;
            for (const Func &o : a.outputs) is_output = is_output || o.name() == name;
            if (!is_output) Func(function).compute_root();
        }
    }
}

// ---------------------------------------------------------------- tables --

// The named schedules of each generator, one row each.
const ScheduleTable<SquashGeneratorStages> kSquashSchedules = {
    {"cpu", ScheduleTarget::cpu, squash_cpu},
    {"rows", ScheduleTarget::gpu, squash_gpu_rows},
};

const ScheduleTable<RoutingStages> kRoutingSchedules = {
    {"cpu", ScheduleTarget::cpu, routing_cpu},
    {"stage_per_op", ScheduleTarget::cpu, routing_stage_per_op},
    {"stage_per_kernel", ScheduleTarget::gpu, [](const Target &, RoutingStages &r) { routing_stage_per_op_gpu(r); }},
};

const ScheduleTable<RoutingStages> kDigitCapsSchedules = {
    {"cpu", ScheduleTarget::cpu, digitcaps_cpu},
    {"stage_per_op", ScheduleTarget::cpu, digitcaps_stage_per_op},
    {"stage_per_kernel", ScheduleTarget::gpu, [](const Target &, RoutingStages &r) { digitcaps_stage_per_op_gpu(r); }},
};

const ScheduleTable<RoutingBackwardStages> kRoutingBackwardSchedules = {
    {"cpu", ScheduleTarget::cpu, [](const Target &t, RoutingBackwardStages &g) { backward_cpu(t, g, false); }},
    {"stage_per_kernel", ScheduleTarget::gpu,
     [](const Target &, RoutingBackwardStages &g) { backward_stage_per_kernel(g, false); }},
};

// rows_predict and rows_vectors need the prediction stages, which only the layer has.
const ScheduleTable<RoutingBackwardStages> kDigitCapsBackwardSchedules = {
    {"cpu", ScheduleTarget::cpu, [](const Target &t, RoutingBackwardStages &g) { backward_cpu(t, g, true); }},
    {"stage_per_kernel", ScheduleTarget::gpu,
     [](const Target &, RoutingBackwardStages &g) { backward_stage_per_kernel(g, true); }},
    {"rows_predict", ScheduleTarget::gpu,
     [](const Target &t, RoutingBackwardStages &g) { backward_rows_predict(t, g); }},
    {"rows_vectors", ScheduleTarget::gpu,
     [](const Target &t, RoutingBackwardStages &g) {
         backward_rows_predict(t, g, {{"batch_walk", "vectors", "vectors"}, true});
     }},
};

const ScheduleTable<RoutingStepStages> kRoutingStepSSchedules = {
    {"cpu", ScheduleTarget::cpu, routing_step_s_cpu},
    {"stage_per_kernel", ScheduleTarget::gpu, routing_step_stage_per_kernel},
};

const ScheduleTable<RoutingStepStages> kRoutingStepLogitsSchedules = {
    {"cpu", ScheduleTarget::cpu, routing_step_logits_cpu},
    {"stage_per_kernel", ScheduleTarget::gpu, routing_step_stage_per_kernel},
};

const ScheduleTable<RoutingStepStages> kRoutingStepBackwardSchedules = {
    {"cpu", ScheduleTarget::cpu, routing_step_backward_cpu},
    {"stage_per_kernel", ScheduleTarget::gpu, routing_step_stage_per_kernel},
};

const ScheduleTable<RoutingStepStages> kRoutingStepGradB0Schedules = {
    {"cpu", ScheduleTarget::cpu, routing_step_grad_b0_cpu},
    {"stage_per_kernel", ScheduleTarget::gpu, routing_step_stage_per_kernel},
};

const ScheduleTable<AutodiffStages> kAutodiffSchedules = {
    {"root_autodiff", ScheduleTarget::cpu, root_autodiff},
};

}  // namespace

void schedule_squash(const std::string &name, const Target &target, SquashGeneratorStages &s) {
    apply_schedule("squash", kSquashSchedules, name, target, s);
}

void schedule_routing(const std::string &name, const Target &target, RoutingStages &r) {
    apply_schedule("routing", kRoutingSchedules, name, target, r);
}

void schedule_digitcaps(const std::string &name, const Target &target, RoutingStages &r) {
    if (autoschedulers::is_autoscheduler_row(name)) return autoschedule("digitcaps", name, target, {r.v});
    apply_schedule("digitcaps", kDigitCapsSchedules, name, target, r);
}

void schedule_routing_backward(const std::string &name, const Target &target, RoutingBackwardStages &g) {
    apply_schedule("routing_backward", kRoutingBackwardSchedules, name, target, g);
}

void schedule_digitcaps_backward(const std::string &name, const Target &target, RoutingBackwardStages &g) {
    apply_schedule("digitcaps_backward", kDigitCapsBackwardSchedules, name, target, g);
}

void schedule_routing_step_s(const std::string &name, const Target &target, RoutingStepStages &st) {
    apply_schedule("routing_step_s", kRoutingStepSSchedules, name, target, st);
}

void schedule_routing_step_logits(const std::string &name, const Target &target, RoutingStepStages &st) {
    apply_schedule("routing_step_logits", kRoutingStepLogitsSchedules, name, target, st);
}

void schedule_routing_step_backward(const std::string &generator, const std::string &name, const Target &target,
                                    RoutingStepStages &st) {
    apply_schedule(generator, kRoutingStepBackwardSchedules, name, target, st);
}

void schedule_routing_step_grad_b0(const std::string &name, const Target &target, RoutingStepStages &st) {
    apply_schedule("routing_step_grad_b0", kRoutingStepGradB0Schedules, name, target, st);
}

void schedule_autodiff(const std::string &generator, const std::string &name, const Target &target, AutodiffStages &a) {
    apply_schedule(generator, kAutodiffSchedules, name, target, a);
}

}  // namespace halcaps

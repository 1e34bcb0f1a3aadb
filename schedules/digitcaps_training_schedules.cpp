// Schedules of the DigitCaps layer's backward in three phases
// (generators/digitcaps_training_stages.h). The comment above each records
// its measured time and the machine it ran on.
//
// Sizes at MNIST b128 (B=128, I=1152, K=8, J=10, E=16): a batch element's
// u_hat is 737 KB and each of its (j, i) stages 46 KB, so one batch
// element's chain or alpha phase stays in a core's L2 (2 MB on the build
// machine's Xeon); alpha is 2m · 5.9 MB, beta 2m - 1 rows of 640 bytes a
// batch element.
#include "digitcaps_training_schedules.h"

#include <algorithm>

#include "common.h"
#include "lane_stages.h"

namespace halcaps {

using namespace Halide;
using schedule_util::apply_schedule;
using schedule_util::ScheduleTable;
using schedule_util::ScheduleTarget;

namespace {

// Batch elements whose u_hat is computed together, each vector of W
// loaded once for all of them.
constexpr int kBatchTile = 2;

// u_hat(e, j, i, b) of the kBatchTile batch elements of `at`, as a wrapper
// (u_hat.in()) computed there: e vectors from W transposed to e-innermost,
// each summed over k in registers for kOutCapsTile capsules j of every
// batch element of the tile at once (each load of W feeds kBatchTile FMAs,
// each broadcast of u kOutCapsTile). Specialised to out_dim one vector and
// in_dim 8.
constexpr int kOutCapsTile = 5;

void u_hat_per_batch_tile(Func u_hat, const RoutingStages &r, LoopLevel at, int vec) {
    Var eo("eo"), ei("ei"), jo("jo"), ji("ji");
    Func tile = u_hat.in();
    tile.compute_at(at)
        .split(r.e, eo, ei, vec, TailStrategy::GuardWithIf)
        .split(r.j, jo, ji, kOutCapsTile, TailStrategy::GuardWithIf)
        .reorder(ei, r.b, ji, eo, jo, r.i)
        .vectorize(ei)
        .unroll(r.b, kBatchTile, TailStrategy::GuardWithIf)
        .unroll(ji);
    tile.specialize(r.re.x.extent() == vec && r.rk.x.extent() == 8);
    u_hat.compute_at(tile, eo)
        .bound_storage(r.e, vec)
        .bound_storage(r.b, kBatchTile)
        .bound_storage(r.j, kOutCapsTile)
        .vectorize(r.e)
        .unroll(r.b, kBatchTile, TailStrategy::GuardWithIf)
        .unroll(r.j, kOutCapsTile, TailStrategy::GuardWithIf);
    u_hat.update()
        .reorder(r.e, r.b, r.j, r.rk)
        .vectorize(r.e)
        .unroll(r.b, kBatchTile, TailStrategy::GuardWithIf)
        .unroll(r.j, kOutCapsTile, TailStrategy::GuardWithIf);
}

// A sum over e of (j, i, b) (one or several as a Tuple) computed at `at`:
// one vector dot product a u_hat row.
void e_sums_at(Func f, const RoutingStages &r, LoopLevel at, int vec) {
    f.compute_at(at);
    f.update().atomic().vectorize(r.re, vec, TailStrategy::GuardWithIf);
}

// The softmax over j of one iteration at `at`: max and exp-sum as vectors
// across input capsules (each lane walks its capsule's j), c along j.
void softmax_at(Func logit_max, Func exp_sum, Func c, const RoutingStages &r, LoopLevel at, int vec) {
    for (Func f : {logit_max, exp_sum}) {
        f.compute_at(at).vectorize(r.i, vec, TailStrategy::GuardWithIf);
        f.update().reorder(r.i, r.rj).vectorize(r.i, vec, TailStrategy::GuardWithIf);
    }
    c.compute_at(at).vectorize(r.j, vec, TailStrategy::GuardWithIf);
}

// A sum over j of (i, b) at `at`, vectors across input capsules.
void j_sum_at(Func f, const RoutingStages &r, LoopLevel at, int vec) {
    f.compute_at(at).vectorize(r.i, vec, TailStrategy::GuardWithIf);
    f.update().reorder(r.i, r.rj).vectorize(r.i, vec, TailStrategy::GuardWithIf);
}

// cpu_phases: each phase parallel over its outermost loop; the chain phase
// one batch element at a time with every stage of that element computed
// inside its loop (in L2), u_hat for kBatchTile of them at once; the alpha
// phase over chunks of input capsules as cpu_lanes runs a pass; grad_u and
// grad_b0 over chunks of input capsules, grad_W over input capsules,
// grad_u_hat recomputed inside each (2m - 1 FMAs an element, never stored).
// Measured: 81.1 ms at MNIST b128, 3 iterations, 2 threads, on the 2-core
// Xeon (AVX-512) build machine (bench/results/cpu-2core; digitcaps_backward_with_s'
// cpu 248.5, the pair's forward cpu_lanes 22.8 in the same run).
void backward_phases_cpu(const Target &target, TrainingBackwardStages &st) {
    const int vec = target.natural_vector_size<float>();
    const int m = st.iterations;
    RoutingBackwardStages &g = st.chain;
    RoutingStages &r = g.forward;
    const Var e = st.e, j = st.j, i = st.i, b = st.b, k = st.k, q = st.q;

    // W transposed once to e-innermost for both u_hat's.
    {
        Func W_by_e = r.W;
        std::vector<Var> w = W_by_e.args();  // (k, e, j, i)
        W_by_e.compute_root()
            .parallel(w[3])
            .reorder_storage(w[1], w[0], w[2], w[3])
            .reorder(w[1], w[0], w[2], w[3])
            .vectorize(w[1], vec, TailStrategy::GuardWithIf);
    }

    // chain: beta per batch element.
    Var bo("bo"), bi("bi");
    st.beta.compute_root().bound(q, 0, 2 * m - 1).split(b, bo, bi, kBatchTile, TailStrategy::GuardWithIf);
    st.beta.reorder(e, j, q, bi, bo).parallel(bo).unroll(q).vectorize(e, vec, TailStrategy::GuardWithIf);
    st.beta.specialize(st.capsnet_shape);
    const LoopLevel per_chain(st.beta, bi);
    u_hat_per_batch_tile(r.u_hat, r, LoopLevel(st.beta, bo), vec);
    if (r.agreements.defined()) e_sums_at(r.agreements, r, per_chain, vec);
    for (auto &it : r.iterations) {
        it.logits.compute_at(per_chain).vectorize(j, vec, TailStrategy::GuardWithIf);
        softmax_at(it.logit_max, it.exp_sum, it.c, r, per_chain, vec);
        it.squash.max_abs.compute_at(per_chain);
        it.squash.norm2_scaled.compute_at(per_chain);
        it.squash.v.compute_at(per_chain).vectorize(e, vec, TailStrategy::GuardWithIf);
    }
    for (auto &it : g.iterations) {
        if (it.grad_c.has_update_definition()) e_sums_at(it.grad_c, r, per_chain, vec);
        j_sum_at(it.c_dot_grad_c, r, per_chain, vec);
        it.grad_logits.compute_at(per_chain).vectorize(j, vec, TailStrategy::GuardWithIf);
        if (it.grad_v_agree.defined()) {
            Var eo("eo"), ei("ei");
            it.grad_v_agree.compute_at(per_chain).vectorize(e, vec, TailStrategy::GuardWithIf);
            it.grad_v_agree.update()
                .split(e, eo, ei, vec, TailStrategy::GuardWithIf)
                .reorder(ei, eo, j, r.ri)
                .vectorize(ei);
        }
        it.s_dot_grad_v.compute_at(per_chain);
        it.grad_s.compute_at(per_chain).vectorize(e, vec, TailStrategy::GuardWithIf);
    }

    // alpha: every stage vectorised across input capsules, a vector of them
    // (a chunk) at a time, as the forward's cpu_lanes runs a pass (its sums
    // over e with beta's rows are then lane-parallel, not cross-lane sums):
    // over batch tiles of kAlphaTile, for each chunk W's rows gathered to
    // i-innermost, for each group of kAlphaGroup batch elements their u_hat
    // chunk in registers (schedules/lane_stages.h), then each batch
    // element's dots, logits, softmax and g.
    // alpha keeps its (j, q)-innermost storage for the grads phase (its
    // stores from the i vectors are scattered).
    {
        constexpr int kAlphaTile = 64, kAlphaGroup = 4;
        Var io("io"), ii("ii"), bg("bg"), bl("bl");
        st.alpha.compute_root().bound(q, 0, 2 * m).reorder_storage(j, q, i, b);
        st.alpha.split(b, bo, bi, kAlphaTile, TailStrategy::GuardWithIf)
            .split(bi, bg, bl, kAlphaGroup, TailStrategy::GuardWithIf)
            .split(i, io, ii, vec, TailStrategy::GuardWithIf)
            .reorder(ii, q, j, bl, bg, io, bo)
            .vectorize(ii)
            .unroll(q)
            .parallel(bo);
        const LoopLevel per_b(st.alpha, bl), group(st.alpha, bg), chunk(st.alpha, io), per_tile(st.alpha, bo);
        schedule_util::u_and_b0_i_innermost(r.u.in(st.u_hat), r.b0.in(st.logits[0]), vec);
        schedule_util::u_hat_chunk_in_registers(st.u_hat, r.W, e, j, i, b, r.rk, chunk, group, per_tile, vec,
                                                kAlphaGroup);
        schedule_util::chunk_stage(st.dots, i, j, b, per_b, per_tile, vec);
        st.dots.update().reorder(i, r.re, j).vectorize(i, vec, TailStrategy::GuardWithIf);
        // The logits stored: inlined into the softmax's stages, the gradients
        // were NaN at u x 1e15 (the hard-input test).
        for (int t = 0; t < m; t++) {
            for (Func f : {st.logits[t], st.c[t], st.g[t], st.logit_max[t], st.exp_sum[t], st.c_dot_grad_c[t]}) {
                schedule_util::chunk_stage(f, i, j, b, per_b, per_tile, vec);
            }
            for (Func f : {st.logit_max[t], st.exp_sum[t], st.c_dot_grad_c[t]}) {
                schedule_util::update_over_i(f, i, r.rj, vec);
            }
        }
    }

    // grads, at in_dim 8 (specialised). grad_u: chunks of kGradUChunk input
    // capsules (W's rows of them copied once to k-innermost, alpha's rows of
    // a batch element contiguous), then for each batch element and capsule
    // the sum over (e, j) as k vectors (in_dim 8: one AVX2 vector) in
    // kGradUChains independent partial sums (rfactor over e), each term a
    // broadcast of grad_u_hat (its (e, j) block computed just before, e
    // vectors) times W's k vector: no sums across lanes.
    const int kvec = std::min(vec, 8);
    const Expr k8 = st.grad_W.output_buffer().dim(0).extent() == 8;  // grad_W's k extent is W's
    {
        constexpr int kGradUChunk = 16, kGradUChains = 4;
        Var io("io"), ii("ii"), xi("xi");
        RVar rxo("rxo"), rxi("rxi");
        st.grad_u.compute_root()
            .split(i, io, ii, kGradUChunk, TailStrategy::GuardWithIf)
            .reorder(k, ii, b, io)
            .parallel(io)
            .vectorize(k, kvec, TailStrategy::GuardWithIf);
        st.grad_u.specialize(st.capsnet_shape);
        st.grad_u_value.compute_at(st.grad_u, ii).vectorize(k, kvec, TailStrategy::GuardWithIf);
        Func chains = st.grad_u_value.update()
                          .split(st.r_ej.x, rxo, rxi, kGradUChains, TailStrategy::GuardWithIf)
                          .rfactor(rxi, xi);
        r.W.in(chains).compute_at(st.grad_u, io).vectorize(r.W.args()[0], kvec, TailStrategy::GuardWithIf);
        st.grad_u_value.update().reorder(k, rxi).vectorize(k, kvec, TailStrategy::GuardWithIf);
        chains.compute_at(st.grad_u, ii).vectorize(k, kvec, TailStrategy::GuardWithIf).unroll(xi);
        chains.update().reorder(k, xi, rxo, st.r_ej.y).vectorize(k, kvec, TailStrategy::GuardWithIf).unroll(xi);
        st.grad_u_hat.in(chains).compute_at(st.grad_u, ii).vectorize(e, vec, TailStrategy::GuardWithIf);
    }
    // grad_W: one input capsule at a time; for each j, its (e, k) sums over
    // the batch as e vectors (8 accumulators at in_dim 8), grad_u_hat's row
    // of each batch element computed just before it is used.
    st.grad_W.compute_root().parallel(i).vectorize(k, kvec, TailStrategy::GuardWithIf);
    st.grad_W.specialize(st.capsnet_shape);
    st.grad_W_value.compute_at(st.grad_W, i).reorder_storage(e, k, j, i).vectorize(e, vec, TailStrategy::GuardWithIf);
    {
        Stage acc = st.grad_W_value.update();
        acc.reorder(e, k, st.rb, j).vectorize(e, vec, TailStrategy::GuardWithIf);
        acc.specialize(k8).unroll(k);
    }
    st.grad_u_hat.in(st.grad_W_value).compute_at(st.grad_W_value, st.rb.x).vectorize(e, vec, TailStrategy::GuardWithIf);
    // grad_b0: chunks of input capsules in parallel, each walking the batch
    // with the chunk's sums in L1 (alpha read in its storage order; one
    // capsule at a time over the batch, each read was a line of its own).
    {
        Var io("io"), ii("ii");
        st.grad_b0.compute_root().parallel(i);
        st.grad_b0.update().split(i, io, ii, 64, TailStrategy::GuardWithIf).reorder(j, ii, st.rb, io).parallel(io);
    }
}

const ScheduleTable<TrainingBackwardStages> kPhasesSchedules = {
    {"cpu_phases", ScheduleTarget::cpu, backward_phases_cpu},
};

}  // namespace

void schedule_digitcaps_backward_phases(const std::string &name, const Target &target, TrainingBackwardStages &st) {
    apply_schedule("digitcaps_backward_with_s_phases", kPhasesSchedules, name, target, st);
}

}  // namespace halcaps

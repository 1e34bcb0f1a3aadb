// The named stages of squash, dynamic routing and the DigitCaps layer
// (docs/design.md §1.2), handed by the generators (generators/digitcaps.cpp) to
// the schedules (schedules/digitcaps_schedules.cpp). Every reduction is its
// own Func with a pure init and one update, so a schedule can place it.
//
// Layouts, Halide dims innermost first:
//   u_hat  [B, I, J, E] -> (e, j, i, b)      b0      [I, J]    -> (j, i)
//   s, v   [B, J, E]    -> (e, j, b)          logits  [B, I, J] -> (j, i, b)
//   u      [B, I, K]    -> (k, i, b)          W       [I, J, E, K] -> (k, e, j, i)
#pragma once

#include <vector>

#include "Halide.h"

namespace halcaps {

// v(e, rows...) = squash of s(e, rows...) over e, computed from s / m with
// m = max(max_e |s_e|, FLT_MIN) so that |s|^2 neither overflows nor
// underflows (generators/digitcaps.cpp, define_squash).
struct SquashStages {
    Halide::Func max_abs;       // (rows...): max_e |s_e|, at least FLT_MIN; init + update over e
    Halide::Func norm2_scaled;  // (rows...): |s / max_abs|^2; init + update over e
    Halide::Func v;             // (e, rows...)
};

// One routing iteration, all per batch element b.
struct RoutingIteration {
    Halide::Func logits;     // (j, i, b): b0 for the first iteration, then + agreement
    Halide::Func logit_max;  // (i, b): max over j; init + update
    Halide::Func exp_sum;    // (i, b): sum over j of exp(logits - logit_max); init + update
    Halide::Func c;          // (j, i, b): the coupling coefficients (softmax over j)
    Halide::Func s;          // (e, j, b): sum over i of c * u_hat; init + update over ri
                             // (pure, a read of the given s, in digitcaps_backward_with_s)
    SquashStages squash;     // v(e, j, b) = squash(s)
    Halide::Func agreement;  // (j, i, b): sum over e of u_hat * v; init + update over re.
                             // Undefined for the last iteration.
};

struct RoutingStages {
    Halide::Func u_hat;       // (e, j, i, b): the input (routing) or W u (digitcaps; init + update over rk)
    Halide::Func b0;          // (j, i)
    Halide::Func agreements;  // s given (digitcaps_backward_with_s): (j, i, b), every iteration's
                              // agreement but the last's and the backward's last grad_c as one
                              // sum over e (a Tuple when there are several); each of them is
                              // then a pure read of it
    // s given, the layer backward: its last iteration's grad_v (a copy of the
    // input), s . grad_v and grad_s (RoutingBackwardIteration), built with the
    // routing so that its grad_c can be a term of `agreements`.
    Halide::Func last_grad_v, last_s_dot_grad_v, last_grad_s;
    std::vector<RoutingIteration> iterations;
    Halide::Func v;  // the output (e, j, b)
    Halide::Var e, j, i, b;
    Halide::RDom ri, rj, re;  // over in_caps, out_caps, out_dim
    // DigitCaps only: the prediction's inputs and reduction.
    Halide::Func u, W;  // (k, i, b), (k, e, j, i)
    Halide::RDom rk;    // over in_dim
};

struct SquashGeneratorStages {
    SquashStages squash;  // v(e, n)
    Halide::Func v;       // output (e, n)
    Halide::Var e, n;
};

// The hand-derived backward of one routing iteration t (reference/digitcaps_f64.cpp
// gives the derivation), from g_logits[t+1] = dL/dlogits[t+1] (zero for the last).
struct RoutingBackwardIteration {
    Halide::Func grad_v;        // (e, j, b): dL/dv[t]
    Halide::Func grad_v_agree;  // (e, j, b): sum over i of g_logits[t+1] * u_hat; init + update. Not last.
    Halide::Func s_dot_grad_v;  // (j, b): (s / max_abs) . grad_v; init + update over re
    Halide::Func grad_s;        // (e, j, b): through squash
    Halide::Func grad_c;        // (j, i, b): grad_s . u_hat over e; init + update over re (s given,
                                // the layer's last iteration: a pure read of RoutingStages::agreements)
    Halide::Func c_dot_grad_c;  // (i, b): sum over j of c * grad_c; init + update
    Halide::Func grad_logits;   // (j, i, b): dL/dlogits[t]
};

struct RoutingBackwardStages {
    RoutingStages forward;                             // recomputed
    Halide::Func grad_v;                               // input (e, j, b)
    std::vector<RoutingBackwardIteration> iterations;  // indexed by forward iteration
    Halide::Func grad_u_hat;                           // (e, j, i, b)
    Halide::Func grad_b0;                              // output (j, i): init + update over rb
    Halide::RDom rb;                                   // over batch
    // DigitCaps only: the prediction's gradients of grad_u_hat.
    Halide::Func grad_u_hat_in;  // (e, j, i, b): grad_u_hat through clamped indices
    Halide::Func grad_u;         // output (k, i, b): init + update over r_ej
    Halide::Func grad_W;         // output (k, e, j, i): init + update over rb
    Halide::Var k;
    Halide::RDom r_ej;                  // r_ej.x over out_dim, r_ej.y over out_caps
    std::vector<Halide::Func> outputs;  // the generator's outputs: copies of the above
};

// One routing iteration on its own, for the iteration counts that no
// unrolled kernel is built for: runtime/src/routing_steps.cpp chains these,
// keeping every iteration's logits and s for the backward. Generators:
//   routing_step_s        (u_hat, logits) -> s                   s = sum_i c u_hat, c = softmax(logits)
//   routing_step_logits   (u_hat, logits, s) -> logits_next      logits + u_hat . squash(s)
//   routing_step_backward (u_hat, logits, s, g_logits_next, grad_u_hat_in) -> (g_logits, grad_u_hat):
//                         an iteration that is not the last; grad_u_hat_in + its terms
//   routing_step_backward_last (u_hat, logits, s, grad_v) -> (g_logits, grad_u_hat): the last
//   routing_step_grad_b0  (g_logits) -> grad_b0                 the first iteration's g_logits summed over b
// g_logits = dL/dlogits of the iteration (RoutingBackwardIteration::grad_logits).
struct RoutingStepStages {
    Halide::Func u_hat, logits;          // inputs (e, j, i, b), (j, i, b): this iteration's logits
    Halide::Func logit_max, exp_sum, c;  // the softmax over j of logits
    Halide::Func s;                      // (e, j, b): routing_step_s: sum over i of c * u_hat (init + update
                                         // over ri); the other steps: a read of the input s
    SquashStages squash;                 // not routing_step_s: v = squash(s)
    Halide::Func agreement;              // routing_step_logits: (j, i, b) sum over e of u_hat * v
    Halide::Func g_logits_next;          // routing_step_backward: the next iteration's g_logits (input)
    Halide::Func grad_u_hat_in;          // routing_step_backward: the later iterations' terms of grad_u_hat (input)
    RoutingBackwardIteration backward;   // the backward steps: grad_v (the input grad_v, or the sum over i
                                         // of g_logits_next * u_hat in grad_v_agree) ... grad_logits
    Halide::Func grad_b0;                // routing_step_grad_b0: (j, i) sum over rb of g_logits
    std::vector<Halide::Func> outputs;   // the generator's outputs
    Halide::Var e, j, i, b;
    Halide::RDom ri, rj, re, rb;
};

// The autodiff generators (routing_backward_autodiff,
// digitcaps_backward_autodiff): Halide's propagate_adjoints builds their
// stages, so a schedule is handed the outputs and walks what they call.
struct AutodiffStages {
    std::vector<Halide::Func> outputs;  // the generator's outputs
};

// The fused DigitCaps layer (generator digitcaps_fused): the same math as
// RoutingStages over a predicted u_hat, written as one pass per routing
// iteration. Pass t has its own u_hat (W u recomputed, never shared with
// another pass) and, from it, one agreement with the sum of every earlier
// iteration's v, so its logits are b0 + u_hat . (v[0] + ... + v[t-1]): the
// recurrence logits[t] = logits[t-1] + u_hat . v[t-1] summed up front (the
// same value; float32 rounds it differently). Nothing but
// v[t] (B·J·E floats) links one pass to the next, so a GPU schedule can run a
// pass as one kernel whose u_hat never leaves registers / shared memory.
struct FusedPass {
    Halide::Func u_hat;       // (e, j, i, b): W u for this pass; init + update over rk
                              // (routing_fused: pure, a read of the input). Undefined for
                              // pass 0 in the first-pass-as-GEMM form (weighted_W)
    Halide::Func weighted_W;  // first-pass-as-GEMM form, pass 0 only: (k, e, j, i) c * W, whose c
                              // (from b0 alone) does not depend on the batch element, so that
                              // s = sum over (k, i) of weighted_W * u, a matrix product
    Halide::Func v_sum;       // (e, j, b): v[0] + ... + v[t-1] (pure; pass t-1's v_sum + v[t-1]
                              // from pass 2 on); undefined for pass 0
    Halide::Func agreement;   // (j, i, b): sum over e of u_hat * v_sum; init + update over re.
                              // Undefined for pass 0
    Halide::Func logits;      // (j, i, b): b0 (+ agreement) (pure)
    Halide::Func logit_max;   // (i, b): max over j; init + update
    Halide::Func exp_sum;     // (i, b): sum over j of exp(logits - logit_max); init + update
    Halide::Func c;           // (j, i, b): softmax over j
    Halide::Func s;           // (e, j, b): sum over i of c * u_hat; init + update over ri
                              // (weighted_W's form: over r_ki; c is then read at b = 0 only)
    SquashStages squash;      // v[t](e, j, b) = squash(s)
};

struct FusedDigitCapsStages {
    Halide::Func u, W, b0;     // (k, i, b), (k, e, j, i), (j, i)
    Halide::Func u_hat_given;  // routing_fused: the input u_hat (e, j, i, b); each pass's
                               // u_hat is then a pure copy of it (no update), not W u
    std::vector<FusedPass> passes;
    Halide::Func v;          // the output (e, j, b): squash of the last pass
    Halide::Func routing_s;  // digitcaps_fused_with_s only: the output (e, j, b, t), pass t's s
    Halide::Var e, j, i, b;
    Halide::Var t;                // routing_s's iteration index
    Halide::RDom ri, rj, re, rk;  // over in_caps, out_caps, out_dim, in_dim
    Halide::RDom r_ki;            // over (in_dim, in_caps): pass 0's s in weighted_W's form
};

}  // namespace halcaps

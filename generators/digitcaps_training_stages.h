// The stages of digitcaps_backward_with_s_phases (generators/digitcaps.cpp):
// the DigitCaps layer's backward from the forward's routing_s, written as
// three phases so that nothing of size B·I·J·E is ever stored, handed to
// its schedules (schedules/digitcaps_training_schedules.cpp).
//
// With m = iterations, per batch element b (every sum over input capsules
// is one of b's):
//   chain:  the routing's backward chain of digitcaps_backward_with_s,
//           whose only outputs kept are the small
//           beta(e, j, b, q) = grad_s[q] for q < m, v[q - m] for m <= q < 2m - 1.
//           grad_s[t] needs grad_v[t] = sum_i g[t+1] u_hat, a sum over every
//           input capsule, so the chain walks each b's u_hat once an iteration.
//   alpha:  the per-capsule coefficients, from u_hat recomputed once more and
//           grad_s known: alpha(j, i, b, q) = c[q] for q < m, g[q - m] for
//           q >= m (g[t] = dL/dlogits[t], docs/design.md §1.2), each a
//           sum over e of u_hat's row with one vector of beta, no sum over i.
//   grads:  grad_u_hat = sum_t c[t] grad_s[t] + sum_{t < m-1} g[t+1] v[t]
//           (2m - 1 terms of alpha times beta), recomputed inside grad_u
//           (sums over e, j) and grad_W (sums over b); grad_b0 = sum_b g[0].
#pragma once

#include <vector>

#include "Halide.h"
#include "digitcaps_stages.h"

namespace halcaps {

struct TrainingBackwardStages {
    RoutingBackwardStages chain;  // the chain phase: digitcaps_backward_with_s' stages up to grad_s
    Halide::Func beta;            // (e, j, b, q), 2m - 1 rows a batch element: grad_s[0..m-1], v[0..m-2]
    // alpha phase
    Halide::Func u_hat;                // (e, j, i, b): W u again; init + update over chain.forward.rk
    Halide::Func dots;                 // (j, i, b): sums over e of u_hat times v[0..m-2] then grad_s[0..m-1]
                                       // (a Tuple when 2m - 1 > 1); init + update
    std::vector<Halide::Func> logits;  // per iteration: (j, i, b), pure
    std::vector<Halide::Func> logit_max, exp_sum, c;  // per iteration: the softmax over j
    std::vector<Halide::Func> c_dot_grad_c;           // per iteration: (i, b) sum over j; init + update
    std::vector<Halide::Func> g;                      // per iteration: (j, i, b) dL/dlogits
    Halide::Func alpha;                               // (j, i, b, q), 2m values a capsule: c[0..m-1], g[0..m-1]
    // grads phase
    Halide::Func grad_u_hat;      // (e, j, i, b): pure, from alpha and beta
    Halide::Func grad_u_value;    // (k, i, b): sum over (e, j) of grad_u_hat * W; init + update over r_ej
    Halide::Func grad_W_value;    // (k, e, j, i): sum over b of grad_u_hat * u; init + update over rb
    Halide::Func grad_u, grad_W;  // the outputs: copies of the above
    Halide::Func grad_b0;         // the output: sum over b of g[0]; init + update over rb
    Halide::Expr capsnet_shape;   // in_dim 8 (u's and W's) and out_dim 16: for schedules' specialisations
    Halide::Var e, j, i, b, k, q;
    Halide::RDom r_ej, rb, rj, re;
    int iterations = 0;
};

}  // namespace halcaps

// The named stages of the capsule prediction algorithms (docs/design.md §1.1), handed by
// the generators to the schedules. This header is the whole contract between
// "what is computed" (generators/) and "how it is computed" (schedules/).
#pragma once

#include "Halide.h"

namespace halcaps {

// u_hat(e, j, i, b) = sum_k W(k, e, j, i) * u(k, i, b)
struct PredictStages {
    Halide::Func u;      // input (k, i, b)
    Halide::Func W;      // input (k, e, j, i)
    Halide::Func u_in;   // (k, i, b): u with every index clamped to its range
    Halide::Func W_in;   // (k, e, j, i): W likewise. Both equal the inputs
                         // wherever u_hat is defined, and are defined past
                         // the edges so a schedule may compute whole tiles
    Halide::Func accum;  // (e, j, i, b): pure init 0, update += over rk
    Halide::Func u_hat;  // output (e, j, i, b)
    Halide::Var e, j, i, b;
    Halide::RDom rk;                        // over in_dim (K, u's innermost extent)
    Halide::Expr out_dim;                   // u_hat's extent along e (W's out_dim)
    Halide::OutputImageParam u_hat_buffer;  // u_hat's buffer where u_hat is an output of the pipeline;
                                            // undefined where u_hat is a stage stored in a buffer of
                                            // Halide's own, which a schedule may pad and which
                                            // constrains no caller's buffer
};

// grad_u(k, i, b) = sum_{j,e} g(e, j, i, b) * W(k, e, j, i)
struct PredictGradInputStages {
    Halide::Func g;               // input (e, j, i, b)
    Halide::Func W;               // input (k, e, j, i)
    Halide::Func g_in, W_in;      // the inputs with indices clamped (see PredictStages)
    Halide::ImageParam g_buffer;  // g as a buffer, where g is an input: a schedule may
                                  // declare its start aligned (undefined otherwise)
    Halide::Func accum;           // (k, i, b): pure init 0, update += over r_ej
    Halide::Func grad_u;          // output (k, i, b)
    Halide::Var k, i, b;
    Halide::RDom r_ej;  // r_ej.x over out_dim (e), r_ej.y over out_caps (j)
};

// grad_W(k, e, j, i) = sum_b g(e, j, i, b) * u(k, i, b)
struct PredictGradWeightStages {
    Halide::Func g;                         // input (e, j, i, b)
    Halide::Func u;                         // input (k, i, b)
    Halide::Func g_in, u_in;                // the inputs with indices clamped (see PredictStages)
    Halide::ImageParam g_buffer, u_buffer;  // as in PredictGradInputStages
    Halide::Func accum;                     // (k, e, j, i): pure init 0, update += over rb
    Halide::Func grad_W;                    // output (k, e, j, i)
    Halide::Var k, e, j, i;
    Halide::RDom rb;  // over batch
};

}  // namespace halcaps

namespace halcaps {

// Both gradients as the two outputs of one pipeline, so that a schedule may
// compute them in one pass over g (the same sums as PredictGradInputStages
// and PredictGradWeightStages):
//   grad_u(k, i, b)    = sum_{j,e} g(e, j, i, b) * W(k, e, j, i)
//   grad_W(k, e, j, i) = sum_b     g(e, j, i, b) * u(k, i, b)
struct PredictBackwardStages {
    Halide::Func g, u, W;           // inputs (e, j, i, b), (k, i, b), (k, e, j, i)
    Halide::Func g_in, u_in, W_in;  // the inputs with indices clamped (see PredictStages)
    Halide::Func accum_u;           // (k, i, b): pure init 0, update += over r_ej
    Halide::Func accum_W;           // (k, e, j, i): pure init 0, update += over rb
    Halide::Func grad_u;            // output (k, i, b)
    Halide::Func grad_W;            // output (k, e, j, i)
    Halide::Var k, e, j, i, b;
    Halide::RDom r_ej;  // r_ej.x over out_dim (e), r_ej.y over out_caps (j)
    Halide::RDom rb;    // over batch
};

}  // namespace halcaps

// The named stages of the capsule convolution and its two gradients
// (docs/design.md §1.3), handed by the generators (generators/capsconv.cpp) to the
// schedules (schedules/capsconv_schedules.cpp).
//
// Layouts, Halide dims innermost first (pose dims have extent 4, checked):
//   I  [n, H, W, ci, 4, 4]       -> (c, i, ci, x, y, n)   row i, column c
//   K  [kh, kw, ci, co, 4, 4]    -> (j, c, co, ci, dx, dy) row c, column j
//   O  [n, OH, OW, co, 4, 4]     -> (j, i, co, x, y, n)
#pragma once

#include "Halide.h"

namespace halcaps {

// O(j, i, co, x, y, n) = sum_{c, ci, dx, dy} I_pad(c, i, ci, x s + dx - p, y s + dy - p, n) K_in(j, c, co, ci, dx, dy)
struct CapsConvStages {
    Halide::Func I_pad;  // (c, i, ci, x, y, n): I, zero outside the image (constant_exterior)
    Halide::Func K_in;   // (j, c, co, ci, dx, dy): K with indices clamped (repeat_edge), so a
                         // schedule may compute whole co tiles past the last one
    Halide::Func accum;  // (j, i, co, x, y, n): pure init 0, update += over r
    Halide::Func O;      // output
    Halide::Var j, i, co, x, y, n;
    Halide::RDom r;       // r.x over c (4), r.y over ci, r.z over dx, r.w over dy
    Halide::Expr stride;  // the run-time stride (schedules that stage input tiles size them by it)
};

// grad_I(c, i, ci, X, Y, n) = sum_{j, co, dx, dy} g_pad(j, i, co, x, y, n) K_in(j, c, co, ci, dx, dy)
//   where x = (X + p - dx) / s, y = (Y + p - dy) / s when those divide exactly, else the term is 0
struct CapsConvGradInputStages {
    Halide::Func g_pad;   // (j, i, co, x, y, n): grad_output, zero outside the output
    Halide::Func K_in;    // (j, c, co, ci, dx, dy), clamped
    Halide::Func accum;   // (c, i, ci, x, y, n): pure init 0, update += over r
    Halide::Func grad_I;  // output (c, i, ci, x, y, n)
    Halide::Var c, i, ci, x, y, n;
    Halide::RDom r;       // r.x over j (4), r.y over co, r.z over dx, r.w over dy
    Halide::Expr stride;  // the run-time stride, for specialising (stride 1: every tap hits)
};

// grad_K(j, c, co, ci, dx, dy) = sum_{i, x, y, n} I_pad(c, i, ci, x s + dx - p, y s + dy - p, n) g(j, i, co, x, y, n)
struct CapsConvGradFilterStages {
    Halide::Func I_pad;   // (c, i, ci, x, y, n), zero outside the image
    Halide::Func g_in;    // (j, i, co, x, y, n): grad_output with indices clamped
    Halide::Func accum;   // (j, c, co, ci, dx, dy): pure init 0, update += over r
    Halide::Func grad_K;  // output
    Halide::Var j, c, co, ci, dx, dy;
    Halide::RDom r;  // r.x over i (4), r.y over x (OW), r.z over y (OH), r.w over n
};

}  // namespace halcaps

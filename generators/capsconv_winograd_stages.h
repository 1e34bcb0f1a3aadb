// The named stages of the Winograd form of the capsule convolution
// (generators/capsconv_winograd.cpp), handed to its schedules
// (schedules/capsconv_winograd_schedules.cpp).
//
// F(m x m, 3 x 3) (Lavin & Gray 2016) over the spatial taps of a 3x3,
// stride-1 capsule convolution: the output is cut into m x m tiles; each
// tile's (m + 2) x (m + 2) input patch and each 3x3 filter are taken to an
// alpha x alpha "Winograd domain" (alpha = m + 2), where the convolution over
// the taps becomes an element-wise product; the sums over the input capsule
// type and the pose index stay a matrix product, one per Winograd point:
//
//   filter_t(j, c, co, ci, wx, wy)   = sum_{dx,dy} G[wx][dx] G[wy][dy] K(j, c, co, ci, dx, dy)
//   input_rows(c, i, ci, tx, wx, y, n) = sum_a BT[wx][a] I_pad(c, i, ci, m tx + a - p, y, n)
//   input_t(c, i, ci, tx, ty, n, wx, wy)
//                                    = sum_b BT[wy][b] input_rows(c, i, ci, tx, wx, m ty + b - p, n)
//                                    (= sum_{a,b} BT[wx][a] BT[wy][b] I_pad(..., m tx + a - p, m ty + b - p, n))
//   product(j, i, co, tx, ty, n, wx, wy)
//                                    = sum_{c,ci} input_t(c, i, ci, ...) filter_t(j, c, co, ci, wx, wy)
//   O(j, i, co, x, y, n)             = sum_{wx,wy} AT[x mod m][wx] AT[y mod m][wy] product(j, i, co, x/m, y/m, n, wx,
//   wy)
//
// Per output tile and (row, column) pair this takes alpha^2 multiplies where
// the direct sum takes 9 m^2: 2.25x fewer for m = 2, 4x fewer for m = 4.
// Layouts as in capsconv_stages.h: I (c, i, ci, x, y, n), K (j, c, co, ci,
// dx, dy), O (j, i, co, x, y, n), innermost first.
#pragma once

#include "Halide.h"

namespace halcaps {

struct CapsConvWinogradStages {
    int tile = 2;                // m: output pixels per tile side (2 or 4)
    int alpha = 4;               // m + 2: Winograd points per side
    Halide::Func I_pad;          // (c, i, ci, x, y, n): the input, zero outside the image
    Halide::Func K_in;           // (j, c, co, ci, dx, dy): the filter with indices clamped, so a
                                 // schedule may compute whole co tiles past the last one
    Halide::Func filter_t;       // (j, c, co, ci, wx, wy)
    Halide::Func input_rows;     // (c, i, ci, tx, wx, y, n): the input transformed along x only
    Halide::Func input_t;        // (c, i, ci, tx, ty, n, wx, wy)
    Halide::Func product_accum;  // (j, i, co, tx, ty, n, wx, wy): pure init 0, update += over r
    Halide::Func product;        // the same, a pure copy (the stage a schedule stores)
    Halide::Func O;              // output (j, i, co, x, y, n)
    Halide::Var j, i, c, co, ci, x, y, n, tx, ty, wx, wy;
    Halide::RDom r;  // r.x over c (4), r.y over ci
};

}  // namespace halcaps

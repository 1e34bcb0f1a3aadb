// The capsule convolution (docs/design.md §1.3) for 3x3 filters at stride 1,
// computed by Winograd's minimal filtering F(m x m, 3 x 3): algorithm only;
// the stages and their formulas are in capsconv_winograd_stages.h, the
// schedules in schedules/capsconv_winograd_schedules.cpp.
//
// One generator, capsconv_winograd, with the output tile m as a parameter,
// registered under two names: capsconv_winograd2x2 (F(2x2, 3x3),
// 16 Winograd points, 2.25x fewer multiplies than the direct sum) and
// capsconv_winograd4x4 (F(4x4, 3x3), 36 points, 4x fewer, with larger
// transform constants and so a larger float32 rounding error; both are
// checked against the float64 reference with the direct kernels' tolerance).
//
// Why: the direct convolution on the layer-sized problem (n=8, 32x32,
// ci=co=32) is bound by its 9.66 GFLOP; cuDNN runs it faster than a direct
// fp32 schedule can (schedules/capsconv_schedules.cpp). The Winograd form
// moves most of the work into alpha^2 independent matrix products of
// (n * 4 * tiles) x (ci * 4) by (ci * 4) x (co * 4).
//
// The runtime rejects other filter sizes and strides before calling
// (unsupported_shape); pad is a run-time scalar input as in the direct form.
#include <vector>

#include "Halide.h"

#include "capsconv_winograd_stages.h"
#include "dense.h"
#include "schedules/capsconv_winograd_schedules.h"

namespace {

using namespace Halide;
using halcaps::require_pose_tensor;

using Matrix = std::vector<std::vector<double>>;

// The transform matrices of F(m, 3) (Lavin & Gray 2016; the Cook-Toom
// construction): input BT (alpha x alpha), filter G (alpha x 3), output AT
// (m x alpha), from alpha - 1 interpolation points and the point at infinity.
// m = 2: the points 0, -1, 1 (exact in float32).
// m = 4: the points 0, -1, 1, 1/2, -2 rather than the usual 0, +-1, +-2:
// the same multiplies, but smaller transform entries, so a smaller float32
// rounding error. With 128-term sums of normal inputs (the layer-sized
// problem) a float32 simulation against float64 gave max abs error 2.6e-4
// and relative L2 error 1.6e-6, against 8.0e-4 and 2.5e-6 with 0, +-1, +-2;
// with those, 6 of the layer's 4.2M outputs missed the direct kernels'
// tolerance (1e-6 x 1152 + 1e-4 relative) on the CPU.
struct WinogradMatrices {
    Matrix BT, G, AT;
};

WinogradMatrices winograd_matrices(int m) {
    if (m == 2) {
        return {{{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
                {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}},
                {{1, 1, 1, 0}, {0, 1, -1, -1}}};
    }
    return {{{1, -1.5, -2, 1.5, 1, 0},
             {0, 1, -2.5, 0.5, 1, 0},
             {0, -1, 0.5, 2.5, 1, 0},
             {0, -2, -1, 2, 1, 0},
             {0, 0.5, -1, -0.5, 1, 0},
             {0, 1, -1.5, -2, 1.5, 1}},
            {{1, 0, 0},
             {-1.0 / 3, 1.0 / 3, -1.0 / 3},
             {1.0 / 3, 1.0 / 3, 1.0 / 3},
             {-16.0 / 15, -8.0 / 15, -4.0 / 15},
             {1.0 / 15, -2.0 / 15, 4.0 / 15},
             {0, 0, 1}},
            {{1, 1, 1, 1, 1, 0}, {0, -1, 1, 0.5, -2, 0}, {0, 1, 1, 0.25, 4, 0}, {0, -1, 1, 0.125, -8, 1}}};
}

// matrix[row][col] for a run-time row: a mux over the column's entries. The
// schedules unroll the loops over rows, so each becomes a constant and the
// zero terms fold away.
Expr entry(const Matrix &matrix, Expr row, int col) {
    std::vector<Expr> column;
    for (const auto &r : matrix) column.push_back(Expr(static_cast<float>(r[col])));
    return mux(row, column);
}

// The estimates: the layer-sized problem, n=8, 32x32, ci=co=32, pad 1.
constexpr int kBatch = 8, kSize = 32, kInCaps = 32, kOutCaps = 32;

class CapsConvWinograd : public Generator<CapsConvWinograd> {
public:
    GeneratorParam<std::string> schedule{"schedule", "cpu"};
    // m, the output tile side: 2 or 4 (the registered aliases below set it).
    GeneratorParam<int> output_tile{"output_tile", 2, 2, 4};

    Input<int32_t> pad{"pad", 0, 0, 1 << 20};
    Input<Buffer<float, 6>> I{"I"};
    Input<Buffer<float, 6>> K{"K"};
    Output<Buffer<float, 6>> O{"O"};

    void generate() {
        if (output_tile != 2 && output_tile != 4) {
            throw CompileError("capsconv_winograd: output_tile must be 2 or 4, not " + std::to_string(output_tile));
        }
        const int m = output_tile, alpha = m + 2;
        const WinogradMatrices w = winograd_matrices(m);
        halcaps::CapsConvWinogradStages s;
        s.tile = m, s.alpha = alpha;
        s.j = Var("j"), s.i = Var("i"), s.c = Var("c"), s.co = Var("co"), s.ci = Var("ci");
        s.x = Var("x"), s.y = Var("y"), s.n = Var("n"), s.tx = Var("tx"), s.ty = Var("ty");
        s.wx = Var("wx"), s.wy = Var("wy");
        const Var &j = s.j, &i = s.i, &c = s.c, &co = s.co, &ci = s.ci, &x = s.x, &y = s.y, &n = s.n;
        const Var &tx = s.tx, &ty = s.ty, &wx = s.wx, &wy = s.wy;

        s.I_pad = BoundaryConditions::constant_exterior(I, 0.0f);
        s.K_in = BoundaryConditions::repeat_edge(K);

        Expr filter_sum = 0.0f;
        for (int dy = 0; dy < 3; dy++) {
            for (int dx = 0; dx < 3; dx++) {
                filter_sum += entry(w.G, wx, dx) * entry(w.G, wy, dy) * s.K_in(j, c, co, ci, dx, dy);
            }
        }
        s.filter_t = Func("filter_t");
        s.filter_t(j, c, co, ci, wx, wy) = filter_sum;

        // The input transform BT d B, separably: first along x (input_rows,
        // for every input row y the tiles need), then along y.
        Expr row_sum = 0.0f;
        for (int a = 0; a < alpha; a++) {
            row_sum += entry(w.BT, wx, a) * s.I_pad(c, i, ci, tx * m + a - pad, y, n);
        }
        s.input_rows = Func("input_rows");
        s.input_rows(c, i, ci, tx, wx, y, n) = row_sum;
        Expr input_sum = 0.0f;
        for (int b = 0; b < alpha; b++) {
            input_sum += entry(w.BT, wy, b) * s.input_rows(c, i, ci, tx, wx, ty * m + b - pad, n);
        }
        s.input_t = Func("input_t");
        s.input_t(c, i, ci, tx, ty, n, wx, wy) = input_sum;

        s.r = RDom(0, 4, 0, K.dim(3).extent(), "r");
        s.product_accum = Func("product_accum");
        s.product_accum(j, i, co, tx, ty, n, wx, wy) = 0.0f;
        s.product_accum(j, i, co, tx, ty, n, wx, wy) +=
            s.input_t(s.r.x, i, s.r.y, tx, ty, n, wx, wy) * s.filter_t(j, s.r.x, co, s.r.y, wx, wy);
        s.product = Func("product");
        s.product(j, i, co, tx, ty, n, wx, wy) = s.product_accum(j, i, co, tx, ty, n, wx, wy);

        Expr output_sum = 0.0f;
        for (int b = 0; b < alpha; b++) {
            for (int a = 0; a < alpha; a++) {
                output_sum +=
                    entry(w.AT, x % m, a) * entry(w.AT, y % m, b) * s.product(j, i, co, x / m, y / m, n, a, b);
            }
        }
        O(j, i, co, x, y, n) = output_sum;
        s.O = O;

        require_pose_tensor(I), require_pose_tensor(K), require_pose_tensor(O);
        K.dim(4).set_extent(3);
        K.dim(5).set_extent(3);
        pad.set_estimate(1);
        I.set_estimates({{0, 4}, {0, 4}, {0, kInCaps}, {0, kSize}, {0, kSize}, {0, kBatch}});
        K.set_estimates({{0, 4}, {0, 4}, {0, kOutCaps}, {0, kInCaps}, {0, 3}, {0, 3}});
        O.set_estimates({{0, 4}, {0, 4}, {0, kOutCaps}, {0, kSize}, {0, kSize}, {0, kBatch}});
        if (!using_autoscheduler()) halcaps::schedule_capsconv_winograd(schedule, get_target(), s);
    }
};

}  // namespace

HALIDE_REGISTER_GENERATOR(CapsConvWinograd, capsconv_winograd)
HALIDE_REGISTER_GENERATOR_ALIAS(capsconv_winograd2x2, capsconv_winograd, {{"output_tile", "2"}})
HALIDE_REGISTER_GENERATOR_ALIAS(capsconv_winograd4x4, capsconv_winograd, {{"output_tile", "4"}})

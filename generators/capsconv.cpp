// The capsule convolution with 4x4 pose matrices (Barham & Isard 2019;
// Vaidya, "Speeding up Capsules"; docs/design.md §1.3) and both of its gradients:
// algorithms only. The generators name their stages (capsconv_stages.h) and
// hand them to the schedule picked by the `schedule` generator parameter
// (schedules/capsconv_schedules.cpp).
//
// stride and pad are run-time scalar inputs, not generator parameters: one
// library then serves every convolution (the tests and the CLI need stride 1
// and 2, pad 0..2, and a framework layer would need whatever its model uses),
// and no schedule here depends on their values: the vectors run along the
// pose dims, never along x, so a run-time stride costs no gather. They are
// the first arguments of every kernel (runtime/src/halide_call.h).
//
// Layouts, Halide dims innermost first:
//   I  [n, H, W, ci, 4, 4]     -> (c, i, ci, x, y, n)
//   K  [kh, kw, ci, co, 4, 4]  -> (j, c, co, ci, dx, dy)
//   O  [n, OH, OW, co, 4, 4]   -> (j, i, co, x, y, n)
#include "Halide.h"

#include "capsconv_stages.h"
#include "dense.h"
#include "schedules/capsconv_schedules.h"

namespace {

using namespace Halide;
using halcaps::require_pose_tensor;

// The estimates: the larger of the two problems in the issue, n=8, 32x32,
// ci=co=32, 3x3, stride 1, pad 1 (the seed problem, n=1, 128x128, ci=3,
// co=1, 5x5, pad 0, is timed too: schedules/capsconv_schedules.cpp).
constexpr int kBatch = 8, kSize = 32, kInCaps = 32, kOutCaps = 32, kKernel = 3;

class CapsConv : public Generator<CapsConv> {
public:
    GeneratorParam<std::string> schedule{"schedule", "cpu"};

    Input<int32_t> stride{"stride", 1, 1, 1 << 20};
    Input<int32_t> pad{"pad", 0, 0, 1 << 20};
    Input<Buffer<float, 6>> I{"I"};
    Input<Buffer<float, 6>> K{"K"};
    Output<Buffer<float, 6>> O{"O"};

    void generate() {
        halcaps::CapsConvStages s;
        s.j = Var("j"), s.i = Var("i"), s.co = Var("co"), s.x = Var("x"), s.y = Var("y"), s.n = Var("n");
        s.I_pad = BoundaryConditions::constant_exterior(I, 0.0f);
        s.K_in = BoundaryConditions::repeat_edge(K);
        s.r = RDom(0, 4, 0, K.dim(3).extent(), 0, K.dim(4).extent(), 0, K.dim(5).extent(), "r");
        s.stride = stride;
        const RDom &r = s.r;
        s.accum = Func("O_accum");
        s.accum(s.j, s.i, s.co, s.x, s.y, s.n) = 0.0f;
        s.accum(s.j, s.i, s.co, s.x, s.y, s.n) +=
            s.I_pad(r.x, s.i, r.y, s.x * stride + r.z - pad, s.y * stride + r.w - pad, s.n) *
            s.K_in(s.j, r.x, s.co, r.y, r.z, r.w);
        O(s.j, s.i, s.co, s.x, s.y, s.n) = s.accum(s.j, s.i, s.co, s.x, s.y, s.n);
        s.O = O;

        require_pose_tensor(I), require_pose_tensor(K), require_pose_tensor(O);
        stride.set_estimate(1), pad.set_estimate(1);
        I.set_estimates({{0, 4}, {0, 4}, {0, kInCaps}, {0, kSize}, {0, kSize}, {0, kBatch}});
        K.set_estimates({{0, 4}, {0, 4}, {0, kOutCaps}, {0, kInCaps}, {0, kKernel}, {0, kKernel}});
        O.set_estimates({{0, 4}, {0, 4}, {0, kOutCaps}, {0, kSize}, {0, kSize}, {0, kBatch}});
        if (!using_autoscheduler()) halcaps::schedule_capsconv(schedule, get_target(), s);
    }
};

class CapsConvGradInput : public Generator<CapsConvGradInput> {
public:
    GeneratorParam<std::string> schedule{"schedule", "cpu"};

    Input<int32_t> stride{"stride", 1, 1, 1 << 20};
    Input<int32_t> pad{"pad", 0, 0, 1 << 20};
    Input<Buffer<float, 6>> g{"g"};  // dL/dO
    Input<Buffer<float, 6>> K{"K"};
    Output<Buffer<float, 6>> grad_I{"grad_I"};

    void generate() {
        halcaps::CapsConvGradInputStages s;
        s.c = Var("c"), s.i = Var("i"), s.ci = Var("ci"), s.x = Var("x"), s.y = Var("y"), s.n = Var("n");
        s.g_pad = BoundaryConditions::constant_exterior(g, 0.0f);
        s.K_in = BoundaryConditions::repeat_edge(K);
        s.r = RDom(0, 4, 0, K.dim(2).extent(), 0, K.dim(4).extent(), 0, K.dim(5).extent(), "r");
        const RDom &r = s.r;
        // Input pixel X gets output pixel x through tap dx when x s + dx - p = X.
        // Halide's / rounds down and % is never negative, so a tap that does
        // not divide exactly is dropped and a negative x reads g's zero exterior.
        // A term whose output does not exist is 0, not 0 * K: a NaN or inf
        // tap reaches only the pixels it multiplies (reference/capsconv_f64.cpp).
        const Expr ox = s.x + pad - r.z, oy = s.y + pad - r.w;
        const Expr hits = (ox % stride == 0) && (oy % stride == 0) && ox >= 0 && oy >= 0 &&
                          ox / stride < g.dim(3).extent() && oy / stride < g.dim(4).extent();
        s.stride = stride;
        s.accum = Func("grad_I_accum");
        s.accum(s.c, s.i, s.ci, s.x, s.y, s.n) = 0.0f;
        s.accum(s.c, s.i, s.ci, s.x, s.y, s.n) += select(
            hits, s.g_pad(r.x, s.i, r.y, ox / stride, oy / stride, s.n) * s.K_in(r.x, s.c, r.y, s.ci, r.z, r.w), 0.0f);
        grad_I(s.c, s.i, s.ci, s.x, s.y, s.n) = s.accum(s.c, s.i, s.ci, s.x, s.y, s.n);
        s.grad_I = grad_I;

        require_pose_tensor(g), require_pose_tensor(K), require_pose_tensor(grad_I);
        stride.set_estimate(1), pad.set_estimate(1);
        g.set_estimates({{0, 4}, {0, 4}, {0, kOutCaps}, {0, kSize}, {0, kSize}, {0, kBatch}});
        K.set_estimates({{0, 4}, {0, 4}, {0, kOutCaps}, {0, kInCaps}, {0, kKernel}, {0, kKernel}});
        grad_I.set_estimates({{0, 4}, {0, 4}, {0, kInCaps}, {0, kSize}, {0, kSize}, {0, kBatch}});
        if (!using_autoscheduler()) halcaps::schedule_capsconv_grad_input(schedule, get_target(), s);
    }
};

class CapsConvGradFilter : public Generator<CapsConvGradFilter> {
public:
    GeneratorParam<std::string> schedule{"schedule", "cpu"};

    Input<int32_t> stride{"stride", 1, 1, 1 << 20};
    Input<int32_t> pad{"pad", 0, 0, 1 << 20};
    Input<Buffer<float, 6>> g{"g"};  // dL/dO
    Input<Buffer<float, 6>> I{"I"};
    Output<Buffer<float, 6>> grad_K{"grad_K"};

    void generate() {
        halcaps::CapsConvGradFilterStages s;
        s.j = Var("j"), s.c = Var("c"), s.co = Var("co"), s.ci = Var("ci"), s.dx = Var("dx"), s.dy = Var("dy");
        s.I_pad = BoundaryConditions::constant_exterior(I, 0.0f);
        s.g_in = BoundaryConditions::repeat_edge(g);
        s.r = RDom(0, 4, 0, g.dim(3).extent(), 0, g.dim(4).extent(), 0, g.dim(5).extent(), "r");
        const RDom &r = s.r;
        s.accum = Func("grad_K_accum");
        s.accum(s.j, s.c, s.co, s.ci, s.dx, s.dy) = 0.0f;
        s.accum(s.j, s.c, s.co, s.ci, s.dx, s.dy) +=
            s.I_pad(s.c, r.x, s.ci, r.y * stride + s.dx - pad, r.z * stride + s.dy - pad, r.w) *
            s.g_in(s.j, r.x, s.co, r.y, r.z, r.w);
        grad_K(s.j, s.c, s.co, s.ci, s.dx, s.dy) = s.accum(s.j, s.c, s.co, s.ci, s.dx, s.dy);
        s.grad_K = grad_K;

        require_pose_tensor(g), require_pose_tensor(I), require_pose_tensor(grad_K);
        stride.set_estimate(1), pad.set_estimate(1);
        g.set_estimates({{0, 4}, {0, 4}, {0, kOutCaps}, {0, kSize}, {0, kSize}, {0, kBatch}});
        I.set_estimates({{0, 4}, {0, 4}, {0, kInCaps}, {0, kSize}, {0, kSize}, {0, kBatch}});
        grad_K.set_estimates({{0, 4}, {0, 4}, {0, kOutCaps}, {0, kInCaps}, {0, kKernel}, {0, kKernel}});
        if (!using_autoscheduler()) halcaps::schedule_capsconv_grad_filter(schedule, get_target(), s);
    }
};

}  // namespace

HALIDE_REGISTER_GENERATOR(CapsConv, capsconv)
HALIDE_REGISTER_GENERATOR(CapsConvGradInput, capsconv_grad_input)
HALIDE_REGISTER_GENERATOR(CapsConvGradFilter, capsconv_grad_filter)

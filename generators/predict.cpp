// Capsule prediction (the seed blog's CapsulePrediction op) and both of its
// gradients: algorithms only. Each generator names its stages and hands them to
// the schedule picked by the `schedule` generator parameter (see schedules/).
//
// Layouts (docs/design.md §1.1), Halide dims innermost first:
//   u      [B, I, K]        -> (k, i, b)
//   W      [I, J, E, K]     -> (k, e, j, i)
//   u_hat  [B, I, J, E]     -> (e, j, i, b)
#include "Halide.h"

#include "dense.h"
#include "predict_stages.h"
#include "schedules/predict_schedules.h"

namespace {

using namespace Halide;
using halcaps::require_dense;

// MNIST CapsNet shape (docs/design.md §1.1): the estimates every schedule and
// autoscheduler sees.
constexpr int kBatch = 128, kInCaps = 1152, kInDim = 8, kOutCaps = 10, kOutDim = 16;

// The two gradients' sums, defined once for the generators that compute
// them (one pipeline each, or both in one): accumulators with a pure init 0
// and an update over the reduction, which the schedules address as such.
//   grad_u(k, i, b)    = sum_{j,e} g(e, j, i, b) * W(k, e, j, i)
Func grad_input_sum(const Func &g_in, const Func &W_in, const Var &k, const Var &i, const Var &b, const RDom &r_ej) {
    Func accum("grad_u_accum");
    accum(k, i, b) = 0.0f;
    accum(k, i, b) += g_in(r_ej.x, r_ej.y, i, b) * W_in(k, r_ej.x, r_ej.y, i);
    return accum;
}

//   grad_W(k, e, j, i) = sum_b g(e, j, i, b) * u(k, i, b)
Func grad_weight_sum(const Func &g_in, const Func &u_in, const Var &k, const Var &e, const Var &j, const Var &i,
                     const RDom &rb) {
    Func accum("grad_W_accum");
    accum(k, e, j, i) = 0.0f;
    accum(k, e, j, i) += g_in(e, j, i, rb) * u_in(k, i, rb);
    return accum;
}

class CapsulePredict : public Generator<CapsulePredict> {
public:
    GeneratorParam<std::string> schedule{"schedule", "cpu"};

    Input<Buffer<float, 3>> u{"u"};
    Input<Buffer<float, 4>> W{"W"};
    Output<Buffer<float, 4>> u_hat{"u_hat"};

    void generate() {
        halcaps::PredictStages s;
        s.u = u;
        s.W = W;
        s.e = Var("e"), s.j = Var("j"), s.i = Var("i"), s.b = Var("b");
        s.rk = RDom(0, u.dim(0).extent(), "rk");

        // u and W seen through indices clamped to their ranges (repeat_edge):
        // equal to u and W wherever u_hat is defined, they let a schedule
        // compute whole tiles past the last element (and discard them)
        // without reading outside the inputs, and stage whole tiles with an
        // affine index.
        s.u_in = BoundaryConditions::repeat_edge(u);
        s.W_in = BoundaryConditions::repeat_edge(W);

        s.accum = Func("u_hat_accum");
        s.accum(s.e, s.j, s.i, s.b) = 0.0f;
        s.accum(s.e, s.j, s.i, s.b) += s.W_in(s.rk, s.e, s.j, s.i) * s.u_in(s.rk, s.i, s.b);
        u_hat(s.e, s.j, s.i, s.b) = s.accum(s.e, s.j, s.i, s.b);
        s.u_hat = u_hat;
        s.out_dim = W.dim(1).extent();
        s.u_hat_buffer = s.u_hat.output_buffer();

        require_dense(u), require_dense(W), require_dense(u_hat);
        u.set_estimates({{0, kInDim}, {0, kInCaps}, {0, kBatch}});
        W.set_estimates({{0, kInDim}, {0, kOutDim}, {0, kOutCaps}, {0, kInCaps}});
        u_hat.set_estimates({{0, kOutDim}, {0, kOutCaps}, {0, kInCaps}, {0, kBatch}});

        if (!using_autoscheduler()) {
            halcaps::schedule_predict(schedule, get_target(), s);
        }
    }
};

class CapsulePredictGradInput : public Generator<CapsulePredictGradInput> {
public:
    GeneratorParam<std::string> schedule{"schedule", "cpu"};

    Input<Buffer<float, 4>> g{"g"};
    Input<Buffer<float, 4>> W{"W"};
    Output<Buffer<float, 3>> grad_u{"grad_u"};

    void generate() {
        halcaps::PredictGradInputStages s;
        s.g = g;
        s.W = W;
        s.g_buffer = g;
        s.k = Var("k"), s.i = Var("i"), s.b = Var("b");
        s.r_ej = RDom(0, g.dim(0).extent(), 0, g.dim(1).extent(), "r_ej");

        // Inputs seen through clamped indices (see CapsulePredict).
        s.g_in = BoundaryConditions::repeat_edge(g);
        s.W_in = BoundaryConditions::repeat_edge(W);

        s.accum = grad_input_sum(s.g_in, s.W_in, s.k, s.i, s.b, s.r_ej);
        grad_u(s.k, s.i, s.b) = s.accum(s.k, s.i, s.b);
        s.grad_u = grad_u;

        require_dense(g), require_dense(W), require_dense(grad_u);
        g.set_estimates({{0, kOutDim}, {0, kOutCaps}, {0, kInCaps}, {0, kBatch}});
        W.set_estimates({{0, kInDim}, {0, kOutDim}, {0, kOutCaps}, {0, kInCaps}});
        grad_u.set_estimates({{0, kInDim}, {0, kInCaps}, {0, kBatch}});

        if (!using_autoscheduler()) {
            halcaps::schedule_predict_grad_input(schedule, get_target(), s);
        }
    }
};

class CapsulePredictGradWeight : public Generator<CapsulePredictGradWeight> {
public:
    GeneratorParam<std::string> schedule{"schedule", "cpu"};

    Input<Buffer<float, 4>> g{"g"};
    Input<Buffer<float, 3>> u{"u"};
    Output<Buffer<float, 4>> grad_W{"grad_W"};

    void generate() {
        halcaps::PredictGradWeightStages s;
        s.g = g;
        s.u = u;
        s.g_buffer = g;
        s.u_buffer = u;
        s.k = Var("k"), s.e = Var("e"), s.j = Var("j"), s.i = Var("i");
        s.rb = RDom(0, g.dim(3).extent(), "rb");

        // Inputs seen through clamped indices (see CapsulePredict).
        s.g_in = BoundaryConditions::repeat_edge(g);
        s.u_in = BoundaryConditions::repeat_edge(u);

        s.accum = grad_weight_sum(s.g_in, s.u_in, s.k, s.e, s.j, s.i, s.rb);
        grad_W(s.k, s.e, s.j, s.i) = s.accum(s.k, s.e, s.j, s.i);
        s.grad_W = grad_W;

        require_dense(g), require_dense(u), require_dense(grad_W);
        g.set_estimates({{0, kOutDim}, {0, kOutCaps}, {0, kInCaps}, {0, kBatch}});
        u.set_estimates({{0, kInDim}, {0, kInCaps}, {0, kBatch}});
        grad_W.set_estimates({{0, kInDim}, {0, kOutDim}, {0, kOutCaps}, {0, kInCaps}});

        if (!using_autoscheduler()) {
            halcaps::schedule_predict_grad_weight(schedule, get_target(), s);
        }
    }
};

// Both gradients in one pipeline (two outputs): the sums of
// CapsulePredictGradInput and CapsulePredictGradWeight, so that a schedule
// may compute both in one pass over g.
class CapsulePredictBackward : public Generator<CapsulePredictBackward> {
public:
    GeneratorParam<std::string> schedule{"schedule", "fused_cpu"};

    Input<Buffer<float, 4>> g{"g"};
    Input<Buffer<float, 3>> u{"u"};
    Input<Buffer<float, 4>> W{"W"};
    Output<Buffer<float, 3>> grad_u{"grad_u"};
    Output<Buffer<float, 4>> grad_W{"grad_W"};

    void generate() {
        halcaps::PredictBackwardStages s;
        s.g = g;
        s.u = u;
        s.W = W;
        s.k = Var("k"), s.e = Var("e"), s.j = Var("j"), s.i = Var("i"), s.b = Var("b");
        s.r_ej = RDom(0, g.dim(0).extent(), 0, g.dim(1).extent(), "r_ej");
        s.rb = RDom(0, g.dim(3).extent(), "rb");

        // Inputs seen through clamped indices (see CapsulePredict).
        s.g_in = BoundaryConditions::repeat_edge(g);
        s.u_in = BoundaryConditions::repeat_edge(u);
        s.W_in = BoundaryConditions::repeat_edge(W);

        s.accum_u = grad_input_sum(s.g_in, s.W_in, s.k, s.i, s.b, s.r_ej);
        grad_u(s.k, s.i, s.b) = s.accum_u(s.k, s.i, s.b);
        s.grad_u = grad_u;

        s.accum_W = grad_weight_sum(s.g_in, s.u_in, s.k, s.e, s.j, s.i, s.rb);
        grad_W(s.k, s.e, s.j, s.i) = s.accum_W(s.k, s.e, s.j, s.i);
        s.grad_W = grad_W;

        require_dense(g), require_dense(u), require_dense(W), require_dense(grad_u), require_dense(grad_W);
        g.set_estimates({{0, kOutDim}, {0, kOutCaps}, {0, kInCaps}, {0, kBatch}});
        u.set_estimates({{0, kInDim}, {0, kInCaps}, {0, kBatch}});
        W.set_estimates({{0, kInDim}, {0, kOutDim}, {0, kOutCaps}, {0, kInCaps}});
        grad_u.set_estimates({{0, kInDim}, {0, kInCaps}, {0, kBatch}});
        grad_W.set_estimates({{0, kInDim}, {0, kOutDim}, {0, kOutCaps}, {0, kInCaps}});

        if (!using_autoscheduler()) {
            halcaps::schedule_predict_backward(schedule, get_target(), s);
        }
    }
};

}  // namespace

HALIDE_REGISTER_GENERATOR(CapsulePredict, predict)
HALIDE_REGISTER_GENERATOR(CapsulePredictGradInput, predict_grad_input)
HALIDE_REGISTER_GENERATOR(CapsulePredictGradWeight, predict_grad_weight)
HALIDE_REGISTER_GENERATOR(CapsulePredictBackward, predict_backward)

// float64 reference for squash, dynamic routing and the DigitCaps layer
// (docs/design.md §1.2), forward and backward: plain loops, obviously correct,
// the ground truth every kernel is checked against.
//
// Shapes, row-major (the last index moves fastest):
//   s, v      [B, J, E]         squash works on each row of E
//   u_hat     [B, I, J, E]
//   b0        [I, J]            initial routing logits; empty means zeros
//   u         [B, I, K]
//   W         [I, J, E, K]
// The backward functions take grad_v = dL/dv and differentiate through every
// routing iteration (as TensorFlow's autodiff does in the blog's model).
#pragma once

#include <cstdint>
#include <vector>

namespace halcaps::reference {

// squash's epsilon (docs/design.md §1.2): sqrt(|s|^2 + eps) keeps s = 0 finite.
constexpr double kSquashEpsilon = 1e-9;

struct RoutingShape {
    int64_t batch, in_caps, out_caps, out_dim;  // B, I, J, E

    int64_t u_hat_size() const { return batch * in_caps * out_caps * out_dim; }
    int64_t b0_size() const { return in_caps * out_caps; }
    int64_t v_size() const { return batch * out_caps * out_dim; }
};

struct DigitCapsShape {
    int64_t batch, in_caps, in_dim, out_caps, out_dim;  // B, I, K, J, E

    RoutingShape routing() const { return {batch, in_caps, out_caps, out_dim}; }
    int64_t u_size() const { return batch * in_caps * in_dim; }
    int64_t W_size() const { return in_caps * out_caps * out_dim * in_dim; }
    int64_t b0_size() const { return in_caps * out_caps; }
    int64_t v_size() const { return batch * out_caps * out_dim; }
};

// squash of `rows` vectors of length `dim` each.
std::vector<double> squash_f64(int64_t rows, int64_t dim, const double *s);
std::vector<double> squash_f64(int64_t rows, int64_t dim, const float *s);
// dL/ds from dL/dv.
std::vector<double> squash_backward_f64(int64_t rows, int64_t dim, const double *s, const double *grad_v);

// Routing forward: v [B, J, E]. b0 may be null (zeros).
std::vector<double> route_f64(const RoutingShape &shape, const double *u_hat, const double *b0, int iterations);
std::vector<double> route_f64(const RoutingShape &shape, const float *u_hat, const float *b0, int iterations);

struct RouteGradients {
    std::vector<double> grad_u_hat;  // [B, I, J, E]
    std::vector<double> grad_b0;     // [I, J] (summed over the batch)
};
RouteGradients route_backward_f64(const RoutingShape &shape, const double *u_hat, const double *b0,
                                  const double *grad_v, int iterations);
RouteGradients route_backward_f64(const RoutingShape &shape, const float *u_hat, const float *b0, const float *grad_v,
                                  int iterations);

// The DigitCaps layer: prediction u_hat = W u, then routing. b0 may be null.
std::vector<double> digitcaps_f64(const DigitCapsShape &shape, const double *u, const double *W, const double *b0,
                                  int iterations);
std::vector<double> digitcaps_f64(const DigitCapsShape &shape, const float *u, const float *W, const float *b0,
                                  int iterations);

// The weighted sums s of every routing iteration of the layer, [iterations,
// B, J, E] (digitcaps_with_s's routing_s). b0 may be null.
std::vector<double> digitcaps_routing_s_f64(const DigitCapsShape &shape, const double *u, const double *W,
                                            const double *b0, int iterations);
std::vector<double> digitcaps_routing_s_f64(const DigitCapsShape &shape, const float *u, const float *W,
                                            const float *b0, int iterations);

// The coupling coefficients c of every routing iteration of the layer,
// [iterations, B, I, J] (digitcaps_with_c's routing_c). b0 may be null.
std::vector<double> digitcaps_routing_c_f64(const DigitCapsShape &shape, const double *u, const double *W,
                                            const double *b0, int iterations);
std::vector<double> digitcaps_routing_c_f64(const DigitCapsShape &shape, const float *u, const float *W,
                                            const float *b0, int iterations);

struct DigitCapsGradients {
    std::vector<double> grad_u;   // [B, I, K]
    std::vector<double> grad_W;   // [I, J, E, K]
    std::vector<double> grad_b0;  // [I, J]
};
DigitCapsGradients digitcaps_backward_f64(const DigitCapsShape &shape, const double *u, const double *W,
                                          const double *b0, const double *grad_v, int iterations);
DigitCapsGradients digitcaps_backward_f64(const DigitCapsShape &shape, const float *u, const float *W, const float *b0,
                                          const float *grad_v, int iterations);
// digitcaps_backward_with_s's gradients: those of the layer at the weighted
// sums s given in routing_s [iterations, B, J, E] (v of iteration t is
// squash(routing_s[t])), not at the ones the routing would compute.
DigitCapsGradients digitcaps_backward_given_s_f64(const DigitCapsShape &shape, const float *u, const float *W,
                                                  const float *b0, const float *routing_s, const float *grad_v,
                                                  int iterations);

}  // namespace halcaps::reference

// Plain float64 loops for squash, routing and the DigitCaps layer, forward
// and backward (docs/design.md §1.2). The backward is derived by hand (below) and
// checked against central finite differences of the forward in
// tests/test_digitcaps_gradients.cpp.
#include <algorithm>
#include <cmath>
#include <limits>

#include "digitcaps_reference.h"
#include "predict_reference.h"

namespace halcaps::reference {

namespace {

// The largest of |x[0..n)|, NaN if any is NaN (std::max would drop it).
double max_abs_or_nan(int64_t n, const double *x) {
    double m = 0;
    for (int64_t k = 0; k < n; k++) {
        if (std::isnan(x[k])) return x[k];
        m = std::max(m, std::fabs(x[k]));
    }
    return m;
}

// v = f(|s|^2) s with f(n2) = n2 / ((1 + n2) sqrt(n2 + eps)). |s|^2 is
// computed from s / max|s_e| so that it neither overflows nor loses all its
// digits for huge or tiny s; s = 0 gives v = 0. A NaN or +-inf in s makes
// the row NaN, as the plain formula does (|s|^2 NaN or inf, inf / inf).
void squash_row(int64_t dim, const double *s, double *v) {
    const double m = max_abs_or_nan(dim, s);
    if (m == 0) {
        std::fill(v, v + dim, 0.0);
        return;
    }
    double n2_scaled = 0;  // |s / m|^2, in [1, dim]
    for (int64_t e = 0; e < dim; e++) n2_scaled += (s[e] / m) * (s[e] / m);
    const double n2 = m * m * n2_scaled;  // |s|^2; may be 0 or inf only for |s| beyond 1e±154
    const double scale = std::isinf(n2) ? 1.0 : n2 / (1 + n2);
    // s / sqrt(|s|^2 + eps) = (s / m) / sqrt(|s/m|^2 + eps / m^2)
    const double inv_norm = 1 / std::sqrt(n2_scaled + (kSquashEpsilon / m) / m);
    for (int64_t e = 0; e < dim; e++) v[e] = scale * (s[e] / m) * inv_norm;
}

// dL/ds for one row: with n2 = |s|^2 and v = f(n2) s,
//   dv_e/ds_d = f δ_ed + 2 f'(n2) s_e s_d, so
//   gs_d = f gv_d + 2 f'(n2) s_d (s · gv),
//   f'(n2) = (n2 + 2 eps - n2^2) / (2 (1 + n2)^2 (n2 + eps)^(3/2)).
void squash_backward_row(int64_t dim, const double *s, const double *gv, double *gs) {
    double n2 = 0, s_dot_gv = 0;
    for (int64_t e = 0; e < dim; e++) {
        n2 += s[e] * s[e];
        s_dot_gv += s[e] * gv[e];
    }
    const double eps = kSquashEpsilon;
    const double f = n2 / ((1 + n2) * std::sqrt(n2 + eps));
    const double df = (n2 + 2 * eps - n2 * n2) / (2 * (1 + n2) * (1 + n2) * std::pow(n2 + eps, 1.5));
    for (int64_t e = 0; e < dim; e++) gs[e] = f * gv[e] + 2 * df * s[e] * s_dot_gv;
}

template <typename T>
std::vector<double> to_double(const T *x, int64_t n) {
    if (x == nullptr) return {};
    return std::vector<double>(x, x + n);
}

// Everything the routing forward computes, kept for the backward:
// per iteration t, the coupling coefficients c[t] [B, I, J], the weighted sums
// s[t] and the squashed outputs v[t] [B, J, E].
struct RoutingTrace {
    std::vector<std::vector<double>> c, s, v;
};

// `given_s` (null, or [iterations, B, J, E]): the weighted sums s of every
// iteration taken from it instead of summed (digitcaps_backward_with_s).
RoutingTrace route_trace(const RoutingShape &sh, const double *u_hat, const double *b0, int iterations,
                         const double *given_s = nullptr) {
    const int64_t B = sh.batch, I = sh.in_caps, J = sh.out_caps, E = sh.out_dim;
    auto uh = [&](int64_t b, int64_t i, int64_t j, int64_t e) { return u_hat[((b * I + i) * J + j) * E + e]; };
    RoutingTrace trace;
    std::vector<double> logits(B * I * J);  // [B, I, J]
    for (int64_t b = 0; b < B; b++)
        for (int64_t n = 0; n < I * J; n++) logits[b * I * J + n] = b0 ? b0[n] : 0.0;
    for (int t = 0; t < iterations; t++) {
        std::vector<double> c(B * I * J), s(B * J * E, 0.0), v(B * J * E);
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < I; i++) {
                // softmax over j, shifted by the largest logit so exp never
                // overflows. As PyTorch's: a NaN logit makes the row NaN (the
                // maximum is NaN), so does a +inf one (inf - inf), or a row
                // of -inf (-inf - -inf); a -inf logit among finite ones gets 0.
                const double *row = &logits[(b * I + i) * J];
                double mx = -std::numeric_limits<double>::infinity();
                for (int64_t j = 0; j < J; j++) mx = std::isnan(row[j]) || std::isnan(mx) ? NAN : std::max(mx, row[j]);
                double sum = 0;
                for (int64_t j = 0; j < J; j++) sum += std::exp(row[j] - mx);
                for (int64_t j = 0; j < J; j++) c[(b * I + i) * J + j] = std::exp(row[j] - mx) / sum;
            }
        if (given_s != nullptr) {
            std::copy(given_s + t * B * J * E, given_s + (t + 1) * B * J * E, s.begin());
        } else {
            for (int64_t b = 0; b < B; b++)
                for (int64_t i = 0; i < I; i++)
                    for (int64_t j = 0; j < J; j++)
                        for (int64_t e = 0; e < E; e++)
                            s[(b * J + j) * E + e] += c[(b * I + i) * J + j] * uh(b, i, j, e);
        }
        for (int64_t r = 0; r < B * J; r++) squash_row(E, &s[r * E], &v[r * E]);
        if (t + 1 < iterations) {
            for (int64_t b = 0; b < B; b++)
                for (int64_t i = 0; i < I; i++)
                    for (int64_t j = 0; j < J; j++) {
                        double agreement = 0;
                        for (int64_t e = 0; e < E; e++) agreement += uh(b, i, j, e) * v[(b * J + j) * E + e];
                        logits[(b * I + i) * J + j] += agreement;
                    }
        }
        trace.c.push_back(std::move(c));
        trace.s.push_back(std::move(s));
        trace.v.push_back(std::move(v));
    }
    return trace;
}

// Reverse mode through the iterations. With g_logits[t+1] = dL/dlogits[t+1]
// (zero for the last iteration, whose logits are not used):
//   gv[t]        = (t last ? grad_v : 0) + sum_i g_logits[t+1][b,i,j] u_hat[b,i,j,:]
//   grad_u_hat  += g_logits[t+1][b,i,j] v[t][b,j,:]               (agreement term)
//   gs[t]        = squash_backward(s[t], gv[t])
//   grad_u_hat  += c[t][b,i,j] gs[t][b,j,:]                          (weighted sum)
//   gc[b,i,j]    = gs[t][b,j,:] · u_hat[b,i,j,:]
//   g_logits[t]  = g_logits[t+1] + c (gc - sum_j' c gc)              (softmax)
// and grad_b0 = sum_b g_logits[0].
RouteGradients route_backward_impl(const RoutingShape &sh, const double *u_hat, const double *b0, const double *grad_v,
                                   int iterations, const double *given_s = nullptr) {
    const int64_t B = sh.batch, I = sh.in_caps, J = sh.out_caps, E = sh.out_dim;
    auto uh_index = [&](int64_t b, int64_t i, int64_t j, int64_t e) { return ((b * I + i) * J + j) * E + e; };
    const RoutingTrace trace = route_trace(sh, u_hat, b0, iterations, given_s);
    RouteGradients out;
    out.grad_u_hat.assign(sh.u_hat_size(), 0.0);
    std::vector<double> g_logits(B * I * J, 0.0);  // dL/dlogits[t+1]; zero past the last iteration
    for (int t = iterations - 1; t >= 0; t--) {
        const auto &c = trace.c[t], &s = trace.s[t], &v = trace.v[t];
        std::vector<double> gv(B * J * E, 0.0), gs(B * J * E);
        if (t == iterations - 1) gv.assign(grad_v, grad_v + B * J * E);
        if (t + 1 < iterations) {
            for (int64_t b = 0; b < B; b++)
                for (int64_t i = 0; i < I; i++)
                    for (int64_t j = 0; j < J; j++) {
                        const double g = g_logits[(b * I + i) * J + j];
                        for (int64_t e = 0; e < E; e++) {
                            gv[(b * J + j) * E + e] += g * u_hat[uh_index(b, i, j, e)];
                            out.grad_u_hat[uh_index(b, i, j, e)] += g * v[(b * J + j) * E + e];
                        }
                    }
        }
        for (int64_t r = 0; r < B * J; r++) squash_backward_row(E, &s[r * E], &gv[r * E], &gs[r * E]);
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < I; i++) {
                std::vector<double> gc(J, 0.0);
                double weighted = 0;  // sum_j c gc
                for (int64_t j = 0; j < J; j++) {
                    const double cij = c[(b * I + i) * J + j];
                    for (int64_t e = 0; e < E; e++) {
                        out.grad_u_hat[uh_index(b, i, j, e)] += cij * gs[(b * J + j) * E + e];
                        gc[j] += gs[(b * J + j) * E + e] * u_hat[uh_index(b, i, j, e)];
                    }
                    weighted += cij * gc[j];
                }
                for (int64_t j = 0; j < J; j++) {
                    // Logits carry over unchanged from iteration t to t+1 (plus the
                    // agreement), so g_logits[t+1] flows straight into g_logits[t].
                    g_logits[(b * I + i) * J + j] += c[(b * I + i) * J + j] * (gc[j] - weighted);
                }
            }
    }
    out.grad_b0.assign(I * J, 0.0);
    for (int64_t b = 0; b < B; b++)
        for (int64_t n = 0; n < I * J; n++) out.grad_b0[n] += g_logits[b * I * J + n];
    return out;
}

}  // namespace

std::vector<double> squash_f64(int64_t rows, int64_t dim, const double *s) {
    std::vector<double> v(rows * dim);
    for (int64_t r = 0; r < rows; r++) squash_row(dim, s + r * dim, &v[r * dim]);
    return v;
}

std::vector<double> squash_f64(int64_t rows, int64_t dim, const float *s) {
    const auto sd = to_double(s, rows * dim);
    return squash_f64(rows, dim, sd.data());
}

std::vector<double> squash_backward_f64(int64_t rows, int64_t dim, const double *s, const double *grad_v) {
    std::vector<double> gs(rows * dim);
    for (int64_t r = 0; r < rows; r++) squash_backward_row(dim, s + r * dim, grad_v + r * dim, &gs[r * dim]);
    return gs;
}

std::vector<double> route_f64(const RoutingShape &shape, const double *u_hat, const double *b0, int iterations) {
    return route_trace(shape, u_hat, b0, iterations).v.back();
}

std::vector<double> route_f64(const RoutingShape &shape, const float *u_hat, const float *b0, int iterations) {
    const auto u_hat_d = to_double(u_hat, shape.u_hat_size()), b0_d = to_double(b0, shape.b0_size());
    return route_f64(shape, u_hat_d.data(), b0 ? b0_d.data() : nullptr, iterations);
}

RouteGradients route_backward_f64(const RoutingShape &shape, const double *u_hat, const double *b0,
                                  const double *grad_v, int iterations) {
    return route_backward_impl(shape, u_hat, b0, grad_v, iterations);
}

RouteGradients route_backward_f64(const RoutingShape &shape, const float *u_hat, const float *b0, const float *grad_v,
                                  int iterations) {
    const auto u_hat_d = to_double(u_hat, shape.u_hat_size()), b0_d = to_double(b0, shape.b0_size());
    const auto grad_v_d = to_double(grad_v, shape.v_size());
    return route_backward_impl(shape, u_hat_d.data(), b0 ? b0_d.data() : nullptr, grad_v_d.data(), iterations);
}

std::vector<double> digitcaps_f64(const DigitCapsShape &shape, const double *u, const double *W, const double *b0,
                                  int iterations) {
    const PredictShape p{shape.batch, shape.in_caps, shape.in_dim, shape.out_caps, shape.out_dim};
    const auto u_hat = predict_f64(p, u, W);
    return route_f64(shape.routing(), u_hat.data(), b0, iterations);
}

std::vector<double> digitcaps_f64(const DigitCapsShape &shape, const float *u, const float *W, const float *b0,
                                  int iterations) {
    const auto u_d = to_double(u, shape.u_size()), W_d = to_double(W, shape.W_size());
    const auto b0_d = to_double(b0, shape.b0_size());
    return digitcaps_f64(shape, u_d.data(), W_d.data(), b0 ? b0_d.data() : nullptr, iterations);
}

namespace {

// The layer's routing trace (prediction, then routing), and one of its
// per-iteration parts laid end to end ([iterations, ...]).
RoutingTrace layer_trace(const DigitCapsShape &shape, const double *u, const double *W, const double *b0,
                         int iterations) {
    const PredictShape p{shape.batch, shape.in_caps, shape.in_dim, shape.out_caps, shape.out_dim};
    const auto u_hat = predict_f64(p, u, W);
    return route_trace(shape.routing(), u_hat.data(), b0, iterations);
}
std::vector<double> concatenated(const std::vector<std::vector<double>> &parts) {
    std::vector<double> out;
    for (const auto &part : parts) out.insert(out.end(), part.begin(), part.end());
    return out;
}
// The float overloads' inputs in float64 (b0 null where absent).
struct LayerInputs {
    std::vector<double> u, W, b0;
    bool has_b0;
    LayerInputs(const DigitCapsShape &shape, const float *u_f, const float *W_f, const float *b0_f)
        : u(to_double(u_f, shape.u_size())), W(to_double(W_f, shape.W_size())), b0(to_double(b0_f, shape.b0_size())),
          has_b0(b0_f != nullptr) {}
    const double *b0_or_null() const { return has_b0 ? b0.data() : nullptr; }
};

}  // namespace

std::vector<double> digitcaps_routing_s_f64(const DigitCapsShape &shape, const double *u, const double *W,
                                            const double *b0, int iterations) {
    return concatenated(layer_trace(shape, u, W, b0, iterations).s);
}

std::vector<double> digitcaps_routing_s_f64(const DigitCapsShape &shape, const float *u, const float *W,
                                            const float *b0, int iterations) {
    const LayerInputs in(shape, u, W, b0);
    return digitcaps_routing_s_f64(shape, in.u.data(), in.W.data(), in.b0_or_null(), iterations);
}

std::vector<double> digitcaps_routing_c_f64(const DigitCapsShape &shape, const double *u, const double *W,
                                            const double *b0, int iterations) {
    return concatenated(layer_trace(shape, u, W, b0, iterations).c);
}

std::vector<double> digitcaps_routing_c_f64(const DigitCapsShape &shape, const float *u, const float *W,
                                            const float *b0, int iterations) {
    const LayerInputs in(shape, u, W, b0);
    return digitcaps_routing_c_f64(shape, in.u.data(), in.W.data(), in.b0_or_null(), iterations);
}

// The layer's backward is the routing's, then prediction's two gradients
// (docs/design.md §1.1) applied to grad_u_hat.
DigitCapsGradients digitcaps_backward_f64(const DigitCapsShape &shape, const double *u, const double *W,
                                          const double *b0, const double *grad_v, int iterations) {
    const PredictShape p{shape.batch, shape.in_caps, shape.in_dim, shape.out_caps, shape.out_dim};
    const auto u_hat = predict_f64(p, u, W);
    RouteGradients r = route_backward_f64(shape.routing(), u_hat.data(), b0, grad_v, iterations);
    DigitCapsGradients out;
    out.grad_u = predict_grad_input_f64(p, r.grad_u_hat.data(), W);
    out.grad_W = predict_grad_weight_f64(p, r.grad_u_hat.data(), u);
    out.grad_b0 = std::move(r.grad_b0);
    return out;
}

DigitCapsGradients digitcaps_backward_given_s_f64(const DigitCapsShape &shape, const float *u, const float *W,
                                                  const float *b0, const float *routing_s, const float *grad_v,
                                                  int iterations) {
    const LayerInputs in(shape, u, W, b0);
    const auto s_d = to_double(routing_s, iterations * shape.v_size()), grad_v_d = to_double(grad_v, shape.v_size());
    const PredictShape p{shape.batch, shape.in_caps, shape.in_dim, shape.out_caps, shape.out_dim};
    const auto u_hat = predict_f64(p, in.u.data(), in.W.data());
    RouteGradients r =
        route_backward_impl(shape.routing(), u_hat.data(), in.b0_or_null(), grad_v_d.data(), iterations, s_d.data());
    DigitCapsGradients out;
    out.grad_u = predict_grad_input_f64(p, r.grad_u_hat.data(), in.W.data());
    out.grad_W = predict_grad_weight_f64(p, r.grad_u_hat.data(), in.u.data());
    out.grad_b0 = std::move(r.grad_b0);
    return out;
}

DigitCapsGradients digitcaps_backward_f64(const DigitCapsShape &shape, const float *u, const float *W, const float *b0,
                                          const float *grad_v, int iterations) {
    const auto u_d = to_double(u, shape.u_size()), W_d = to_double(W, shape.W_size());
    const auto b0_d = to_double(b0, shape.b0_size()), grad_v_d = to_double(grad_v, shape.v_size());
    return digitcaps_backward_f64(shape, u_d.data(), W_d.data(), b0 ? b0_d.data() : nullptr, grad_v_d.data(),
                                  iterations);
}

}  // namespace halcaps::reference

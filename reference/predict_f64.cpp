// Plain float64 loops, written to be obviously correct.
#include "predict_reference.h"

namespace halcaps::reference {

namespace {

template <typename T>
std::vector<double> predict_f64_impl(const PredictShape &s, const T *u, const T *W) {
    std::vector<double> u_hat(s.u_hat_size());
    for (int64_t b = 0; b < s.batch; b++)
        for (int64_t i = 0; i < s.in_caps; i++)
            for (int64_t j = 0; j < s.out_caps; j++)
                for (int64_t e = 0; e < s.out_dim; e++) {
                    double sum = 0;
                    for (int64_t k = 0; k < s.in_dim; k++) {
                        sum += double(W[((i * s.out_caps + j) * s.out_dim + e) * s.in_dim + k]) *
                               double(u[(b * s.in_caps + i) * s.in_dim + k]);
                    }
                    u_hat[((b * s.in_caps + i) * s.out_caps + j) * s.out_dim + e] = sum;
                }
    return u_hat;
}

template <typename T>
std::vector<double> predict_grad_input_f64_impl(const PredictShape &s, const T *g, const T *W) {
    std::vector<double> grad_u(s.u_size());
    for (int64_t b = 0; b < s.batch; b++)
        for (int64_t i = 0; i < s.in_caps; i++)
            for (int64_t k = 0; k < s.in_dim; k++) {
                double sum = 0;
                for (int64_t j = 0; j < s.out_caps; j++)
                    for (int64_t e = 0; e < s.out_dim; e++) {
                        sum += double(g[((b * s.in_caps + i) * s.out_caps + j) * s.out_dim + e]) *
                               double(W[((i * s.out_caps + j) * s.out_dim + e) * s.in_dim + k]);
                    }
                grad_u[(b * s.in_caps + i) * s.in_dim + k] = sum;
            }
    return grad_u;
}

template <typename T>
std::vector<double> predict_grad_weight_f64_impl(const PredictShape &s, const T *g, const T *u) {
    std::vector<double> grad_W(s.W_size());
    for (int64_t i = 0; i < s.in_caps; i++)
        for (int64_t j = 0; j < s.out_caps; j++)
            for (int64_t e = 0; e < s.out_dim; e++)
                for (int64_t k = 0; k < s.in_dim; k++) {
                    double sum = 0;
                    for (int64_t b = 0; b < s.batch; b++) {
                        sum += double(g[((b * s.in_caps + i) * s.out_caps + j) * s.out_dim + e]) *
                               double(u[(b * s.in_caps + i) * s.in_dim + k]);
                    }
                    grad_W[((i * s.out_caps + j) * s.out_dim + e) * s.in_dim + k] = sum;
                }
    return grad_W;
}

}  // namespace

// float inputs are what the kernels see; double inputs let the finite-difference
// tests perturb them without rounding.
std::vector<double> predict_f64(const PredictShape &s, const float *u, const float *W) {
    return predict_f64_impl(s, u, W);
}
std::vector<double> predict_f64(const PredictShape &s, const double *u, const double *W) {
    return predict_f64_impl(s, u, W);
}
std::vector<double> predict_grad_input_f64(const PredictShape &s, const float *g, const float *W) {
    return predict_grad_input_f64_impl(s, g, W);
}
std::vector<double> predict_grad_input_f64(const PredictShape &s, const double *g, const double *W) {
    return predict_grad_input_f64_impl(s, g, W);
}
std::vector<double> predict_grad_weight_f64(const PredictShape &s, const float *g, const float *u) {
    return predict_grad_weight_f64_impl(s, g, u);
}
std::vector<double> predict_grad_weight_f64(const PredictShape &s, const double *g, const double *u) {
    return predict_grad_weight_f64_impl(s, g, u);
}

}  // namespace halcaps::reference

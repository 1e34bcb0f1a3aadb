// The naive float32 loop nests a C++ programmer would write first, built -O3
// with OpenMP over the outer loops: Barham & Isard's "gcc -fopenmp" row and
// our CPU baseline. Deliberately not hand-optimised.
#include "predict_reference.h"

namespace halcaps::reference {

void predict_naive_openmp(const PredictShape &s, const float *u, const float *W, float *u_hat) {
#pragma omp parallel for collapse(2)
    for (int64_t b = 0; b < s.batch; b++)
        for (int64_t i = 0; i < s.in_caps; i++)
            for (int64_t j = 0; j < s.out_caps; j++)
                for (int64_t e = 0; e < s.out_dim; e++) {
                    float sum = 0;
                    for (int64_t k = 0; k < s.in_dim; k++) {
                        sum += W[((i * s.out_caps + j) * s.out_dim + e) * s.in_dim + k] *
                               u[(b * s.in_caps + i) * s.in_dim + k];
                    }
                    u_hat[((b * s.in_caps + i) * s.out_caps + j) * s.out_dim + e] = sum;
                }
}

void predict_grad_input_naive_openmp(const PredictShape &s, const float *g, const float *W, float *grad_u) {
#pragma omp parallel for collapse(2)
    for (int64_t b = 0; b < s.batch; b++)
        for (int64_t i = 0; i < s.in_caps; i++)
            for (int64_t k = 0; k < s.in_dim; k++) {
                float sum = 0;
                for (int64_t j = 0; j < s.out_caps; j++)
                    for (int64_t e = 0; e < s.out_dim; e++) {
                        sum += g[((b * s.in_caps + i) * s.out_caps + j) * s.out_dim + e] *
                               W[((i * s.out_caps + j) * s.out_dim + e) * s.in_dim + k];
                    }
                grad_u[(b * s.in_caps + i) * s.in_dim + k] = sum;
            }
}

void predict_grad_weight_naive_openmp(const PredictShape &s, const float *g, const float *u, float *grad_W) {
#pragma omp parallel for collapse(2)
    for (int64_t i = 0; i < s.in_caps; i++)
        for (int64_t j = 0; j < s.out_caps; j++)
            for (int64_t e = 0; e < s.out_dim; e++)
                for (int64_t k = 0; k < s.in_dim; k++) {
                    float sum = 0;
                    for (int64_t b = 0; b < s.batch; b++) {
                        sum += g[((b * s.in_caps + i) * s.out_caps + j) * s.out_dim + e] *
                               u[(b * s.in_caps + i) * s.in_dim + k];
                    }
                    grad_W[((i * s.out_caps + j) * s.out_dim + e) * s.in_dim + k] = sum;
                }
}

}  // namespace halcaps::reference

// Reference implementations of capsule prediction (docs/design.md §1.1):
//  - float64 plain loops: the ground truth every implementation is checked against;
//  - float32 loops compiled -O3 with OpenMP: the "gcc -fopenmp" CPU baseline.
// Shapes: u [B, I, K], W [I, J, E, K], u_hat and g [B, I, J, E]; all row-major.
#pragma once

#include <cstdint>
#include <vector>

#include "shapes.h"

namespace halcaps::reference {

using PredictShape = shapes::PredictShape;  // B, I, K, J, E (reference/shapes.h)

// float64 reference, on float32 inputs (as the kernels see them) or float64 ones.
std::vector<double> predict_f64(const PredictShape &s, const float *u, const float *W);
std::vector<double> predict_grad_input_f64(const PredictShape &s, const float *g, const float *W);
std::vector<double> predict_grad_weight_f64(const PredictShape &s, const float *g, const float *u);
std::vector<double> predict_f64(const PredictShape &s, const double *u, const double *W);
std::vector<double> predict_grad_input_f64(const PredictShape &s, const double *g, const double *W);
std::vector<double> predict_grad_weight_f64(const PredictShape &s, const double *g, const double *u);

// The same loops in float32, parallel over (b, i) with OpenMP.
void predict_naive_openmp(const PredictShape &s, const float *u, const float *W, float *u_hat);
void predict_grad_input_naive_openmp(const PredictShape &s, const float *g, const float *W, float *grad_u);
void predict_grad_weight_naive_openmp(const PredictShape &s, const float *g, const float *u, float *grad_W);

}  // namespace halcaps::reference

// Named schedules for the capsule prediction generators. A generator parameter
// `schedule=<name>` picks one at build time; schedules/kernels.cmake lists the
// (operator, schedule, device) combinations that are built into libraries.
#pragma once

#include <string>

#include "Halide.h"
#include "generators/predict_stages.h"

namespace halcaps {

// Each function applies the named schedule to the stages, or stops the build
// with a message listing the schedule names it knows for that device.
void schedule_predict(const std::string &name, const Halide::Target &target, PredictStages &s);
void schedule_predict_grad_input(const std::string &name, const Halide::Target &target, PredictGradInputStages &s);
void schedule_predict_grad_weight(const std::string &name, const Halide::Target &target, PredictGradWeightStages &s);
// Both gradients in one pipeline (schedules/predict_backward_schedules.cpp).
void schedule_predict_backward(const std::string &name, const Halide::Target &target, PredictBackwardStages &s);

}  // namespace halcaps

// Named schedules for squash, routing, the DigitCaps layer and their
// hand-derived backward passes (generators/digitcaps.cpp). A generator
// parameter `schedule=<name>` picks one at build time; schedules/kernels.cmake
// lists the combinations built into libraries.
#pragma once

#include <string>

#include "Halide.h"
#include "generators/digitcaps_stages.h"

namespace halcaps {

// Each applies the named schedule or stops the build with a message listing
// the schedule names it knows for that device.
void schedule_squash(const std::string &name, const Halide::Target &target, SquashGeneratorStages &s);
void schedule_routing(const std::string &name, const Halide::Target &target, RoutingStages &r);
void schedule_digitcaps(const std::string &name, const Halide::Target &target, RoutingStages &r);
void schedule_routing_backward(const std::string &name, const Halide::Target &target, RoutingBackwardStages &g);
void schedule_digitcaps_backward(const std::string &name, const Halide::Target &target, RoutingBackwardStages &g);
// One routing iteration (RoutingStepStages): generator routing_step_s,
// routing_step_logits, both backward steps and routing_step_grad_b0 (`generator` names which, for
// the message).
void schedule_routing_step_s(const std::string &name, const Halide::Target &target, RoutingStepStages &st);
void schedule_routing_step_logits(const std::string &name, const Halide::Target &target, RoutingStepStages &st);
void schedule_routing_step_backward(const std::string &generator, const std::string &name, const Halide::Target &target,
                                    RoutingStepStages &st);
void schedule_routing_step_grad_b0(const std::string &name, const Halide::Target &target, RoutingStepStages &st);
// The autodiff generators (`generator` names which, for the message).
void schedule_autodiff(const std::string &generator, const std::string &name, const Halide::Target &target,
                       AutodiffStages &a);
// schedules/digitcaps_fused_schedules.cpp: the fused layer (generator digitcaps_fused).
void schedule_digitcaps_fused(const std::string &name, const Halide::Target &target, FusedDigitCapsStages &f);

}  // namespace halcaps

// Schedules for digitcaps_backward_with_s_phases (generators/digitcaps.cpp,
// stages in generators/digitcaps_training_stages.h).
#pragma once

#include <string>

#include "Halide.h"
#include "generators/digitcaps_training_stages.h"

namespace halcaps {

// Applies the named schedule or stops the build with a message listing the
// schedule names it knows.
void schedule_digitcaps_backward_phases(const std::string &name, const Halide::Target &target,
                                        TrainingBackwardStages &st);

}  // namespace halcaps

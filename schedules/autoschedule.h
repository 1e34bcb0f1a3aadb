// Scheduling an operator's stages by one of Halide's autoschedulers
// (schedules/autoschedulers.h), for the auto_* schedules: the generator is
// run with the plugin loaded (-p, PLUGINS in cmake/HalcapsKernels.cmake) and
// schedule=auto_<name>, and its schedule function calls autoschedule().
//
// Why not the generator's own autoscheduler=... parameter: the
// autoschedulers split loops with ShiftInwards (Adams2019, Anderson2021,
// Mullapudi2016) or RoundUp tails chosen for the estimated sizes, which
// need every extent to be at least the split factor; at smaller ones (E = 9
// under a split of 16, batch 1) the kernel would fail its output bounds
// check or read past its inputs. Running the autoscheduler here lets us
// rewrite those tails as GuardWithIf afterwards: the same loop nest, with
// the last partial tile guarded instead of shifted or rounded up, correct
// at every size. Everything else the autoscheduler chose is kept, except
// unrolling a loop whose extent is not a constant (see below).
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "Halide.h"
#include "autoschedulers.h"

namespace halcaps {

inline void autoschedule(const std::string &op, const std::string &name, const Halide::Target &target,
                         const std::vector<Halide::Func> &outputs) {
    using namespace Halide;
    const autoschedulers::Spec *spec = autoschedulers::find(name);
    if (spec == nullptr) throw CompileError(op + ": '" + name + "' is not an autoscheduler schedule");
    const std::string device = target.has_gpu_feature() ? "cuda" : "cpu";
    if (device != spec->device) {
        throw CompileError(op + ": " + spec->plugin + " schedules for " + spec->device + ", not for target " +
                           target.to_string());
    }
    // Adams2019 and Anderson2021 may unroll a loop whose extent is constant
    // only at the estimated sizes (e.g. over J of a staged input, Adams2019
    // on grad_input for the AVX2 target); Halide then refuses to lower it.
    // This switch, read when the pipeline is lowered later in this process,
    // makes such a loop an ordinary serial loop (with a warning) instead.
    setenv("HL_PERMIT_FAILED_UNROLL", "1", 1);
    AutoschedulerParams params(spec->plugin);
    for (const auto &[key, value] : spec->params) params.extra[key] = value;
    Pipeline(outputs).apply_autoscheduler(target, params);

    std::vector<Internal::Function> roots;
    for (const Func &f : outputs) roots.push_back(f.function());
    // (Function and Definition are handles: these copies share the
    // pipeline's schedules.)
    for (auto &[func_name, function] : Internal::build_environment(roots)) {
        std::vector<Internal::Definition> definitions{function.definition()};
        for (size_t n = 0; n < function.updates().size(); n++) definitions.push_back(function.update(n));
        for (Internal::Definition &d : definitions) {
            if (!d.defined()) continue;
            for (Internal::Split &split : d.schedule().splits()) {
                if (split.split_type == Internal::Split::SplitVar && split.tail != TailStrategy::GuardWithIf &&
                    split.tail != TailStrategy::PredicateLoads && split.tail != TailStrategy::PredicateStores) {
                    split.tail = TailStrategy::GuardWithIf;
                }
            }
        }
    }
}

}  // namespace halcaps

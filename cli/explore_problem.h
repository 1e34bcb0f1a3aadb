// The problem `halcaps explore run` poses every point of one operator: its
// inputs (several identical copies, rotated between timed calls as in
// `halcaps bench`), its output, the float64 reference and the tolerance, and
// the bytes and flops floors the results are reported against.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cli/common.h"
#include "compare.h"

namespace halcaps::cli {

struct ExploreProblem {
    std::string shape_name;  // as given to --shape (or the standard name)
    std::string shape_json;  // the dimensions, a JSON object for results.json
    // Leading int32 arguments of the generated function (the capsule
    // convolution's stride and pad); the buffers follow, inputs then output.
    std::vector<int32_t> scalars;
    // input_sets[set][n]: copy `set` of the n-th input; set 0 is checked.
    std::vector<std::vector<std::unique_ptr<Tensor>>> input_sets;
    std::unique_ptr<Tensor> output;
    std::vector<double> ref;
    reference::Tolerance tolerance;
    double bytes = 0;  // the floor: inputs read once, the output written once
    double flops = 0;  // 2 per multiply-add of the algorithm as written

    size_t input_count() const { return input_sets.empty() ? 0 : input_sets[0].size(); }
};

// The operators `explore run` can check: capsule prediction and its two
// gradients, the DigitCaps layer (digitcaps, digitcaps_fused; 3 routing
// iterations, the generators' default, which `explore build` keeps) and the
// capsule convolution (capsconv).
bool explore_can_run(const std::string &op);

// The problem of `op` at `shape`: B:I:K:J:E or a standard name (mnist_b128,
// ...) for prediction and DigitCaps; n:H:W:ci:k:co:stride:pad or seed /
// layer / stride2 for capsconv. `device` picks how many input copies rotate
// (enough to exceed its last-level cache twice over). Throws UsageError.
ExploreProblem make_explore_problem(const std::string &op, const std::string &shape, Device device,
                                    std::mt19937_64 &rng);

}  // namespace halcaps::cli

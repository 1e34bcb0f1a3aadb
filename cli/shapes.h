// Named capsule-prediction shapes and the B:I:K:J:E spelling, shared by
// `halcaps bench` and `halcaps explore`.
#pragma once

#include <string>
#include <vector>

#include "capsule_prediction_reference.h"

namespace halcaps::cli {

struct BenchShape {
    std::string name;
    reference::PredictShape s;  // B, I, K, J, E
};

// The standard shapes of the capsule prediction benchmark.
extern const std::vector<BenchShape> kStandardShapes;

// A standard shape by name, or B:I:K:J:E; throws UsageError otherwise.
BenchShape parse_shape(const std::string &text);

}  // namespace halcaps::cli

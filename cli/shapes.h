// Named capsule-prediction shapes and the B:I:K:J:E spelling, shared by
// `halcaps bench` and `halcaps explore`.
#pragma once

#include <string>
#include <vector>

#include "capsconv_reference.h"
#include "predict_reference.h"

namespace halcaps::cli {

struct BenchShape {
    std::string name;
    reference::PredictShape s;  // B, I, K, J, E
};

// The standard shapes of the capsule prediction benchmark.
extern const std::vector<BenchShape> kStandardShapes;

// A standard shape by name, or B:I:K:J:E; throws UsageError otherwise.
BenchShape parse_shape(const std::string &text);

// The capsule convolution's bench shapes (`halcaps bench --op capsconv`):
//   seed     Vaidya's problem: n=1, 128x128, ci=3, k=5, co=1, stride 1, pad 0
//   layer    a matrix-capsule layer: n=8, 32x32, ci=co=32, k=3, stride 1, pad 1
//   stride2  n=8, 14x14, ci=co=32, k=3, stride 2, pad 1 (matrix-capsule nets use
//            pad 0 or 1; 1 keeps the border pixels' taps in play: 7x7 output)
struct CapsConvBenchShape {
    std::string name;
    reference::CapsConvShape s;
};
extern const std::vector<CapsConvBenchShape> kCapsConvShapes;

// A capsconv shape by name, or n:H:W:ci:k:co:stride:pad; throws UsageError otherwise.
CapsConvBenchShape parse_capsconv_shape(const std::string &text);

}  // namespace halcaps::cli

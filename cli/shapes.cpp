#include "cli/shapes.h"

#include <algorithm>
#include <sstream>

#include "cli/common.h"

namespace halcaps::cli {

namespace {

// "1:2:3" -> {1, 2, 3}; empty when a part is not an integer.
std::vector<int64_t> colon_separated_integers(const std::string &text) {
    std::vector<int64_t> v;
    std::stringstream in(text);
    std::string part;
    while (std::getline(in, part, ':')) {
        try {
            size_t used = 0;
            v.push_back(std::stoll(part, &used));
            if (used != part.size()) return {};
        } catch (...) {
            return {};
        }
    }
    return v;
}

}  // namespace

const std::vector<BenchShape> kStandardShapes = {
    {"mnist_b128", {128, 1152, 8, 10, 16}},
    {"mnist_b512", {512, 1152, 8, 10, 16}},
    {"wide_b32", {32, 2048, 16, 32, 16}},
};

BenchShape parse_shape(const std::string &text) {
    for (const auto &s : kStandardShapes) {
        if (s.name == text) return s;
    }
    // B:I:K:J:E
    const std::vector<int64_t> v = colon_separated_integers(text);
    if (v.size() != 5 || *std::min_element(v.begin(), v.end()) < 1) {
        throw UsageError{"shape '" + text + "' is neither a standard shape (mnist_b128, mnist_b512, wide_b32) " +
                         "nor B:I:K:J:E with positive extents"};
    }
    return {text, {v[0], v[1], v[2], v[3], v[4]}};
}

const std::vector<CapsConvBenchShape> kCapsConvShapes = {
    {"seed", {1, 128, 128, 3, 5, 5, 1, 1, 0}},
    {"layer", {8, 32, 32, 32, 3, 3, 32, 1, 1}},
    {"stride2", {8, 14, 14, 32, 3, 3, 32, 2, 1}},
};

CapsConvBenchShape parse_capsconv_shape(const std::string &text) {
    for (const auto &s : kCapsConvShapes) {
        if (s.name == text) return s;
    }
    // n:H:W:ci:k:co:stride:pad
    const std::vector<int64_t> v = colon_separated_integers(text);
    const bool ok = v.size() == 8 && *std::min_element(v.begin(), v.begin() + 7) >= 1 && v[7] >= 0 &&
                    v[4] <= v[1] + 2 * v[7] && v[4] <= v[2] + 2 * v[7];
    if (!ok) {
        throw UsageError{"capsconv shape '" + text + "' is neither a standard shape (seed, layer, stride2) " +
                         "nor n:H:W:ci:k:co:stride:pad with positive extents and a filter that fits the padded image"};
    }
    return {text, {v[0], v[1], v[2], v[3], v[4], v[4], v[5], v[6], v[7]}};
}

}  // namespace halcaps::cli

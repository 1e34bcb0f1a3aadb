#include "cli/shapes.h"

#include <algorithm>
#include <sstream>

#include "cli/common.h"

namespace halcaps::cli {

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
    std::vector<int64_t> v;
    std::stringstream in(text);
    std::string part;
    while (std::getline(in, part, ':')) {
        try {
            size_t used = 0;
            v.push_back(std::stoll(part, &used));
            if (used != part.size()) v.clear();
        } catch (...) {
            v.clear();
            break;
        }
    }
    if (v.size() != 5 || *std::min_element(v.begin(), v.end()) < 1) {
        throw UsageError{"shape '" + text + "' is neither a standard shape (mnist_b128, mnist_b512, wide_b32) " +
                         "nor B:I:K:J:E with positive extents"};
    }
    return {text, {v[0], v[1], v[2], v[3], v[4]}};
}

}  // namespace halcaps::cli

#include "cli/explore_space.h"

#include <algorithm>
#include <fstream>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

#include "cli/common.h"
#include "schedules/space_knobs.h"

namespace halcaps::cli {

int64_t Space::size() const {
    int64_t n = 1;
    for (const auto &k : knobs) n *= static_cast<int64_t>(k.values.size());
    return n;
}

std::string Point::knob_string() const {
    std::string out;
    for (const auto &[name, value] : values) out += (out.empty() ? "" : ",") + name + "=" + std::to_string(value);
    return out;
}

std::string Point::name() const { return space::kPrefix + knob_string(); }

Space read_space(const std::string &path) {
    std::ifstream in(path);
    if (!in) throw UsageError{"cannot read space file '" + path + "'"};
    Space space;
    space.path = path;
    std::string line;
    int line_number = 0;
    auto fail = [&](const std::string &what) {
        throw UsageError{path + ":" + std::to_string(line_number) + ": " + what};
    };
    while (std::getline(in, line)) {
        line_number++;
        if (const size_t hash = line.find('#'); hash != std::string::npos) line.erase(hash);
        std::istringstream words(line);
        std::string directive;
        if (!(words >> directive)) continue;  // blank or comment
        std::vector<std::string> args;
        for (std::string w; words >> w;) args.push_back(w);
        if (directive == "operator" || directive == "device") {
            if (args.size() != 1) fail("'" + directive + "' takes exactly one word");
            std::string &field = directive == "operator" ? space.op : space.device;
            if (!field.empty()) fail("'" + directive + "' given twice");
            field = args[0];
        } else if (directive == "knob") {
            if (space.op.empty() || space.device.empty()) fail("'operator' and 'device' must come before the knobs");
            if (space::find_spec(space.op, space.device) == nullptr) {
                fail("no schedule space for operator '" + space.op + "' on device '" + space.device +
                     "' (see schedules/space_knobs.h)");
            }
            if (args.size() < 2) fail("'knob' takes a name and at least one value");
            Knob knob{args[0], {}};
            for (const auto &k : space.knobs) {
                if (k.name == knob.name) fail("knob '" + knob.name + "' declared twice");
            }
            std::set<int> seen;
            for (size_t n = 1; n < args.size(); n++) {
                int v = 0;
                const std::string error = space::check_value(space.op, space.device, knob.name, args[n], &v);
                if (!error.empty()) fail(error);
                if (!seen.insert(v).second) fail("knob '" + knob.name + "' lists " + args[n] + " twice");
                knob.values.push_back(v);
            }
            space.knobs.push_back(knob);
        } else {
            fail("unknown directive '" + directive + "' (expected operator, device or knob)");
        }
    }
    line_number = 0;
    if (space.op.empty() || space.device.empty()) fail("missing 'operator' or 'device' line");
    if (space.knobs.empty()) fail("no knobs declared");
    return space;
}

namespace {

// The point with mixed-radix index `index` (last knob fastest).
Point point_at(const Space &space, int64_t index) {
    Point p;
    p.values.resize(space.knobs.size());
    for (size_t k = space.knobs.size(); k-- > 0;) {
        const auto &values = space.knobs[k].values;
        const int64_t n = static_cast<int64_t>(values.size());
        p.values[k] = {space.knobs[k].name, values[index % n]};
        index /= n;
    }
    return p;
}

}  // namespace

std::vector<Point> all_points(const Space &space) {
    std::vector<Point> points;
    for (int64_t n = 0; n < space.size(); n++) points.push_back(point_at(space, n));
    return points;
}

std::vector<Point> sample_points(const Space &space, int64_t count, uint64_t seed) {
    // Spaces are small (hundreds of points): shuffle every index and keep the
    // first `count`, which gives distinct points without rejection loops.
    std::vector<int64_t> indices(space.size());
    std::iota(indices.begin(), indices.end(), 0);
    std::mt19937_64 rng(seed);
    std::shuffle(indices.begin(), indices.end(), rng);
    indices.resize(std::min<int64_t>(count, space.size()));
    std::vector<Point> points;
    for (int64_t i : indices) points.push_back(point_at(space, i));
    return points;
}

}  // namespace halcaps::cli

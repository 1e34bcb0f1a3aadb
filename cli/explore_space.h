// Schedule spaces as declared in schedules/spaces/*.space (the format is
// described at the top of those files), and the points they contain.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace halcaps::cli {

struct Knob {
    std::string name;
    std::vector<int> values;
};

struct Space {
    std::string path;
    std::string op;      // generator name, e.g. predict
    std::string device;  // cpu or cuda
    std::vector<Knob> knobs;

    int64_t size() const;  // number of points
};

// One point: a value for every knob, in the space's knob order.
struct Point {
    std::vector<std::pair<std::string, int>> values;

    // "space:tile_i=16,vec_mult=1": the name schedules and kernels.cmake use.
    std::string name() const;
    // "tile_i=16,vec_mult=1", for tables.
    std::string knob_string() const;
};

// Reads and checks a space file; a malformed line, an unknown directive or
// knob, or a value the schedule does not accept (schedules/space_knobs.h)
// throws UsageError naming the file and line.
Space read_space(const std::string &path);

// Every point, the first knob varying slowest.
std::vector<Point> all_points(const Space &space);

// `count` distinct points drawn uniformly (all of them if count >= size).
std::vector<Point> sample_points(const Space &space, int64_t count, uint64_t seed);

}  // namespace halcaps::cli

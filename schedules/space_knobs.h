// The knobs of each operator's schedule space, and the parsing of a point's
// name ("space:tile_i=16,vec_mult=1"). Halide's generator command line splits
// `param=value` at every '=', so the generator is handed the same name with
// ':' for '=' ("space:tile_i:16,vec_mult:1", see generator_spelling()); the
// parser takes either. Plain C++ without Halide: the schedule
// code (generators) and the `halcaps explore` tool include this one table, so
// the tool rejects an unknown knob or an out-of-range value before compiling
// anything, and the generator rejects the same things if called directly.
//
// Which values are *explored* lives in schedules/spaces/*.space; this table
// only says which knobs exist and which values are legal, so adding a value
// to a space file is a one-line change that touches neither this table nor
// any algorithm.
#pragma once

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace halcaps::space {

constexpr const char *kPrefix = "space:";

struct KnobSpec {
    const char *name;
    int min, max;       // legal values, inclusive
    bool power_of_two;  // tile sizes: only powers of two are legal
    int default_value;  // used when a point leaves the knob out
    const char *meaning;
};

struct SpaceSpec {
    const char *op;
    const char *device;  // "cpu" or "cuda"
    std::vector<KnobSpec> knobs;
};

// The CPU defaults are those of the named schedule `cpu`
// (schedules/predict_schedules.cpp). A GPU space's threads per
// block (the product of its *_threads knobs) must stay within 1024; the
// generator rejects a point beyond that.
inline const std::vector<SpaceSpec> &specs() {
    static const std::vector<SpaceSpec> table = {
        {"predict",
         "cpu",
         {{"tile_i", 1, 1024, true, 32, "input capsules per parallel tile"},
          {"vec_mult", 1, 4, true, 1, "output vector width in natural vectors"},
          {"stage_w", 0, 1, false, 1, "transpose the tile's W slice into a buffer first"}}},
        {"predict",
         "cuda",
         {{"ej_threads", 1, 1024, true, 32, "threads along the fused (e, j) row"},
          {"i_threads", 1, 1024, true, 4, "threads along input capsules"},
          {"batch_tile", 1, 64, true, 16, "batch elements per thread (register accumulators)"},
          {"stage_u", 0, 1, false, 0, "copy the block's u tile to shared memory"},
          // runs=1 picks the capsule-runs family (PredictRunsTiling), which
          // reads only the knobs after runs; defaults as `capsule_runs`,
          // but row_groups 0 (fixed rows, as the first explored points were)
          // and copy_all 0 (a point named before the knob copied with 32 x
          // run_caps threads).
          {"runs", 0, 1, false, 0, "capsule runs: a block over run_caps capsules x run_rows rows"},
          {"e_vector", 2, 4, true, 2, "capsule runs: consecutive e a thread, one store a row"},
          {"run_caps", 1, 64, true, 2, "capsule runs: input capsules a block"},
          {"run_rows", 1, 1024, true, 64, "capsule runs: batch rows a block, walked by each thread"},
          {"row_groups", 0, 64, false, 0, "capsule runs: if not 0, a block's rows are batch / row_groups"},
          {"copy_all", 0, 1, false, 0,
           "capsule runs: 1 copies the u tile with every thread of the block, 0 with 32 x run_caps"}}},
        // The fused DigitCaps layer's pass kernel (schedules/digitcaps_fused_schedules.cpp,
        // FusedGpuTiling); defaults are those of `fused`.
        {"digitcaps_fused",
         "cuda",
         {{"batch_tile", 1, 64, true, 8, "batch elements per block, unrolled in each thread's registers"},
          {"in_chunk", 1, 1024, true, 16, "input capsules per block (chunk of the sum over i)"},
          {"e_per_thread", 1, 16, true, 1, "out_dim values per thread, unrolled"}}},
        // The capsule convolution's GPU schedule (schedules/capsconv_schedules.cpp,
        // PoseConvGpuTiling); defaults are those of `tuned_co4`.
        {"capsconv",
         "cuda",
         {{"x_threads", 1, 64, true, 16, "output pixels along x a block, one thread each"},
          {"y_threads", 1, 64, true, 4, "output pixels along y a block, one thread each"},
          {"row_threads", 0, 1, false, 1, "one thread per pose row (else per whole 4x4 pose)"},
          {"caps_tile", 1, 8, true, 4, "output capsule types a thread, in registers"},
          {"chunk", 1, 32, true, 2, "input capsule types a shared-memory step"},
          {"stage_input", 0, 1, false, 0, "stage the input tile (with its halo) in shared memory too"},
          {"vector_rows", 0, 1, false, 0, "16-byte vector loads of pose rows (needs row_threads=1)"},
          {"x_pixels", 1, 4, true, 1, "output pixels along x a thread (needs vector_rows=1)"}}},
        // The gradients (defaults: the named schedules `cpu` and `tuned`).
        {"predict_grad_input", "cpu", {{"tile_i", 1, 1024, true, 4, "input capsules per parallel tile"}}},
        {"predict_grad_input",
         "cuda",
         {{"k_tile", 1, 32, true, 8, "k accumulators per thread (registers)"},
          {"b_threads", 1, 1024, true, 32, "threads along the batch"},
          {"i_threads", 1, 1024, true, 4, "threads along input capsules"},
          {"ej_unroll", 1, 64, true, 8, "unrolling of the (e) reduction loop"}}},
        {"predict_grad_weight",
         "cuda",
         {{"k_tile", 1, 32, true, 8, "k accumulators per thread (registers)"},
          {"ej_threads", 1, 1024, true, 32, "threads along the fused (e, j) row"},
          {"i_threads", 1, 1024, true, 4, "threads along input capsules"},
          {"batch_unroll", 1, 64, true, 8, "unrolling of the batch reduction loop"}}},
    };
    return table;
}

inline const SpaceSpec *find_spec(const std::string &op, const std::string &device) {
    for (const auto &s : specs()) {
        if (op == s.op && device == s.device) return &s;
    }
    return nullptr;
}

// The point's name as a generator parameter value: '=' written as ':'.
inline std::string generator_spelling(std::string name) {
    for (char &c : name) {
        if (c == '=') c = ':';
    }
    return name;
}

inline bool is_point_name(const std::string &name) { return name.rfind(kPrefix, 0) == 0; }

inline std::string known_knobs(const SpaceSpec &spec) {
    std::string out;
    for (const auto &k : spec.knobs) out += (out.empty() ? "" : ", ") + std::string(k.name);
    return out;
}

// Checks one knob value; returns an error text, empty when legal.
inline std::string check_value(const std::string &op, const std::string &device, const std::string &knob,
                               const std::string &text, int *value) {
    const SpaceSpec *spec = find_spec(op, device);
    if (spec == nullptr) return op + ": no schedule space for device " + device;
    for (const auto &k : spec->knobs) {
        if (knob != k.name) continue;
        char *end = nullptr;
        const long v = text.empty() ? 0 : std::strtol(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || v < k.min || v > k.max || (k.power_of_two && (v & (v - 1)) != 0)) {
            return op + " (" + device + "): knob " + knob + " = '" + text + "' is not legal; " + k.name + " (" +
                   k.meaning + ") takes " + (k.power_of_two ? "powers of two " : "integers ") + "from " +
                   std::to_string(k.min) + " to " + std::to_string(k.max);
        }
        *value = static_cast<int>(v);
        return "";
    }
    return op + " (" + device + "): unknown knob '" + knob + "'; known knobs: " + known_knobs(*spec);
}

// Parses "space:k1=v1,k2=v2" into every knob's value (defaults for those left
// out). Returns an error text, empty on success.
inline std::string parse_point(const std::string &op, const std::string &device, const std::string &name,
                               std::map<std::string, int> *values) {
    const SpaceSpec *spec = find_spec(op, device);
    if (spec == nullptr) return op + ": no schedule space for device " + device;
    if (!is_point_name(name)) return op + ": '" + name + "' is not a space point (space:knob=value,...)";
    values->clear();
    for (const auto &k : spec->knobs) (*values)[k.name] = k.default_value;
    std::map<std::string, bool> seen;
    std::string rest = name.substr(std::string(kPrefix).size());
    size_t start = 0;
    while (start <= rest.size() && !rest.empty()) {
        size_t comma = rest.find(',', start);
        if (comma == std::string::npos) comma = rest.size();
        const std::string item = rest.substr(start, comma - start);
        const size_t eq = item.find_first_of("=:");
        if (eq == std::string::npos || eq == 0) {
            return op + ": malformed space point '" + name + "': expected knob=value, got '" + item + "'";
        }
        const std::string knob = item.substr(0, eq);
        if (seen[knob]) return op + ": space point '" + name + "' sets knob " + knob + " twice";
        seen[knob] = true;
        int v = 0;
        if (std::string e = check_value(op, device, knob, item.substr(eq + 1), &v); !e.empty()) return e;
        (*values)[knob] = v;
        start = comma + 1;
    }
    return "";
}

}  // namespace halcaps::space

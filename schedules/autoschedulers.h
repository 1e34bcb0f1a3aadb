// Halide's autoschedulers as halcaps uses them: each is a schedule name
// (auto_adams2019, ...) of every operator that supports it, built by
// schedules/kernels.cmake and by `halcaps explore build --autoscheduler`.
// Plain C++ without Halide: the generator (schedules/autoschedule.h) and the
// `halcaps` tool include this one table, so the parameters a library is
// built with and the ones explore measures are the same.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace halcaps::autoschedulers {

struct Spec {
    const char *row;     // the schedule / implementation name
    const char *plugin;  // Halide's name; the plugin is libautoschedule_<lowercase>.so next to libHalide
    const char *device;  // "cpu" or "cuda": what it schedules for
    std::vector<std::pair<std::string, std::string>> params;
};

// parallelism: the cores (CPU) or SMs (GPU) to aim for. 16 for the CPU
// plugins suits both the 2-core CI machine (it only over-decomposes) and
// larger hosts; 132 for Anderson2021, the SM count of an H100 / H200.
// Everything else is each plugin's default: Adams2019 and Anderson2021 run
// a beam search of width 32 with the cost-model weights built into the
// plugin; Anderson2021 keeps within 48 KB of shared memory a block (96 KB an
// SM), 32 blocks and 64 warps an SM, all within any sm_80+ GPU's limits.
inline const std::vector<Spec> &specs() {
    static const std::vector<Spec> table = {
        {"auto_adams2019", "Adams2019", "cpu", {{"parallelism", "16"}}},
        {"auto_mullapudi2016", "Mullapudi2016", "cpu", {{"parallelism", "16"}}},
        {"auto_li2018", "Li2018", "cpu", {{"parallelism", "16"}}},
        {"auto_anderson2021", "Anderson2021", "cuda", {{"parallelism", "132"}}},
    };
    return table;
}

inline const Spec *find(const std::string &row) {
    for (const auto &s : specs()) {
        if (row == s.row) return &s;
    }
    return nullptr;
}

inline bool is_autoscheduler_row(const std::string &name) { return find(name) != nullptr; }

// "libautoschedule_adams2019.so"
inline std::string plugin_file(const Spec &s) {
    std::string name = s.plugin;
    for (char &c : name) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return "libautoschedule_" + name + ".so";
}

}  // namespace halcaps::autoschedulers

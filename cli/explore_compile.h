// Compiling one point of a schedule space into a shared object that
// `halcaps explore run` can dlopen, by running the generator executable.
//
// Points are compiled ahead of time (the generator writes an object file),
// on the CPU as well as for CUDA, rather than JIT-compiled in this process:
// one code path for both devices, CUDA points can be compiled on a machine
// without a GPU and run elsewhere, and the tool needs no libHalide.
#pragma once

#include <string>
#include <vector>

namespace halcaps::cli {

struct CompileTools {
    std::string generator;  // halcaps_generators
    std::string cxx;        // the C++ compiler driver used to link
};

// The generator from --generator, else the one this tool was built with,
// else one next to this executable; throws UsageError if none exists.
CompileTools find_compile_tools(const std::string &generator_flag, const std::string &cxx_flag);

// The Halide target for exploring on `device`, with the user_context
// feature (kernels take a `const void *user_context` first, as every halcaps
// kernel does). `target_flag` overrides the architecture part.
std::string explore_target(const std::string &device, const std::string &target_flag);

// Builds the standalone Halide runtime object for `target` into `dir` once
// (reused when present); returns its path.
std::string build_runtime(const CompileTools &tools, const std::string &target, const std::string &dir);

// Halide's autoschedulers as `halcaps explore` runs them: the schedule
// auto_<name> with the plugin (libautoschedule_<name>.so next to libHalide)
// loaded, exactly as schedules/kernels.cmake builds the auto_* kernels (the
// parameters are the generator's, schedules/autoschedulers.h).
struct Autoscheduler {
    std::string name;    // e.g. Adams2019
    std::string device;  // cpu or cuda: what it schedules for
    std::string row;     // the schedule / implementation name, e.g. auto_adams2019
    std::string plugin;  // e.g. libautoschedule_adams2019.so
};

// The autoschedulers for `device` (cpu: Adams2019, Mullapudi2016, Li2018;
// cuda: Anderson2021).
std::vector<Autoscheduler> autoschedulers(const std::string &device);
// The one named `name` (case-insensitive; "adams2019" or "auto_adams2019"
// too) for `device`; throws UsageError listing the known ones.
Autoscheduler find_autoscheduler(const std::string &name, const std::string &device);
// The generator arguments that load it ("-p", the plugin); `plugin_dir`
// overrides where the plugins are looked for.
std::vector<std::string> autoscheduler_arguments(const Autoscheduler &a, const std::string &plugin_dir);

struct CompiledPoint {
    std::string function;      // exported function name
    std::string library;       // path of the .so
    double compile_s = 0;      // generator wall time (lowering + LLVM; with an autoscheduler, its search too)
    double compile_cpu_s = 0;  // the generator's CPU time (user + system): less sensitive to a busy machine
    double link_s = 0;         // linking the .so
    bool ok = false;
    std::string error;  // last line of the generator's or linker's output
};

// Compiles `op` with schedule `point_name` for `target` into
// dir/<function>.so (the log in dir/<function>.log). `extra` are further
// generator arguments (an autoscheduler's, `iterations=3`).
CompiledPoint compile_point(const CompileTools &tools, const std::string &op, const std::string &point_name,
                            const std::string &target, const std::string &runtime_object, const std::string &dir,
                            const std::string &function, const std::vector<std::string> &extra = {});

}  // namespace halcaps::cli

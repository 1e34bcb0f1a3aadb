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

struct CompiledPoint {
    std::string function;    // exported function name
    std::string library;     // path of the .so
    double compile_s = 0;    // generator wall time (lowering + LLVM)
    double link_s = 0;       // linking the .so
    bool ok = false;
    std::string error;       // last line of the generator's or linker's output
};

// Compiles `op` with schedule `point_name` for `target` into
// dir/<function>.so (the log in dir/<function>.log).
CompiledPoint compile_point(const CompileTools &tools, const std::string &op, const std::string &point_name,
                            const std::string &target, const std::string &runtime_object, const std::string &dir,
                            const std::string &function);

}  // namespace halcaps::cli

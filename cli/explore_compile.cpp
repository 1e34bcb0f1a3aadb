#include "cli/explore_compile.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "cli/common.h"
#include "schedules/autoschedulers.h"
#include "schedules/space_knobs.h"

#ifndef HALCAPS_GENERATOR_PATH
#define HALCAPS_GENERATOR_PATH ""
#endif
#ifndef HALCAPS_CXX_COMPILER
#define HALCAPS_CXX_COMPILER "c++"
#endif
// From cmake/HalcapsKernels.cmake: where the autoscheduler plugins are.
#ifndef HALCAPS_AUTOSCHEDULER_DIR
#define HALCAPS_AUTOSCHEDULER_DIR ""
#endif

namespace fs = std::filesystem;

namespace halcaps::cli {

namespace {

// Runs argv with stdout and stderr appended to `log`; returns the exit code
// (or 128 + signal) and, in `cpu_s`, the child's user + system time.
// fork/exec rather than system(): no shell quoting of point names.
int run_logged(const std::vector<std::string> &argv, const std::string &log, double *cpu_s = nullptr) {
    const pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        std::vector<char *> args;
        for (const auto &a : argv) args.push_back(const_cast<char *>(a.c_str()));
        args.push_back(nullptr);
        execvp(args[0], args.data());
        _exit(127);
    }
    int status = 0;
    struct rusage usage {};
    wait4(pid, &status, 0, &usage);
    if (cpu_s != nullptr) {
        *cpu_s =
            usage.ru_utime.tv_sec + usage.ru_stime.tv_sec + 1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string last_line(const std::string &path) {
    std::ifstream in(path);
    std::string line, last;
    while (std::getline(in, line)) {
        if (!line.empty()) last = line;
    }
    return last;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

CompileTools find_compile_tools(const std::string &generator_flag, const std::string &cxx_flag) {
    CompileTools tools;
    tools.cxx = !cxx_flag.empty() ? cxx_flag : HALCAPS_CXX_COMPILER;
    std::vector<std::string> candidates;
    if (!generator_flag.empty()) {
        candidates = {generator_flag};
    } else {
        candidates.push_back(HALCAPS_GENERATOR_PATH);
        std::error_code ec;
        const fs::path self = fs::read_symlink("/proc/self/exe", ec);
        if (!ec) candidates.push_back((self.parent_path() / "halcaps_generators").string());
    }
    for (const auto &c : candidates) {
        if (!c.empty() && fs::exists(c)) {
            tools.generator = c;
            return tools;
        }
    }
    throw UsageError{"no generator executable found (tried " +
                     (candidates.empty() ? std::string("nothing") : candidates.front()) +
                     "); pass --generator PATH to halcaps_generators"};
}

std::string explore_target(const std::string &device, const std::string &target_flag) {
    if (device == "cpu") {
        // The build machine's own ISA: points are timed where they are built.
        return (target_flag.empty() ? "host" : target_flag) + "-user_context";
    }
    // As the CUDA kernels of the build (cmake/HalcapsKernels.cmake): baseline
    // x86-64 host code, PTX for compute capability 8.0.
    return (target_flag.empty() ? "x86-64-linux" : target_flag) + "-cuda-cuda_capability_80-user_context";
}

std::string build_runtime(const CompileTools &tools, const std::string &target, const std::string &dir) {
    const std::string object = dir + "/halide_runtime.o";
    if (fs::exists(object)) return object;
    const std::string log = dir + "/halide_runtime.log";
    const int rc =
        run_logged({tools.generator, "-r", "halide_runtime", "-e", "object", "-o", dir, "target=" + target}, log);
    if (rc != 0 || !fs::exists(object)) {
        throw UsageError{"building the Halide runtime for " + target + " failed: " + last_line(log)};
    }
    return object;
}

std::vector<Autoscheduler> autoschedulers(const std::string &device) {
    std::vector<Autoscheduler> out;
    for (const auto &s : autoschedulers::specs()) {
        if (s.device == device) out.push_back({s.plugin, s.device, s.row, autoschedulers::plugin_file(s)});
    }
    return out;
}

Autoscheduler find_autoscheduler(const std::string &name, const std::string &device) {
    auto lower = [](std::string s) {
        for (char &c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return s;
    };
    std::string known;
    for (const auto &a : autoschedulers(device)) {
        if (lower(name) == lower(a.name) || lower(name) == a.row) return a;
        known += (known.empty() ? "" : ", ") + a.name;
    }
    throw UsageError{"--autoscheduler " + name + ": not an autoscheduler for " + device + " (known: " + known + ")"};
}

std::vector<std::string> autoscheduler_arguments(const Autoscheduler &a, const std::string &plugin_dir) {
    const std::string dir = plugin_dir.empty() ? HALCAPS_AUTOSCHEDULER_DIR : plugin_dir;
    const std::string plugin = dir + "/" + a.plugin;
    if (!fs::exists(plugin)) {
        throw UsageError{"no autoscheduler plugin " + plugin + " (pass --plugin-dir, the folder of libHalide)"};
    }
    return {"-p", plugin};
}

CompiledPoint compile_point(const CompileTools &tools, const std::string &op, const std::string &point_name,
                            const std::string &target, const std::string &runtime_object, const std::string &dir,
                            const std::string &function, const std::vector<std::string> &extra) {
    CompiledPoint c;
    c.function = function;
    c.library = dir + "/" + function + ".so";
    const std::string log = dir + "/" + function + ".log";
    fs::remove(log);

    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::string> argv = {tools.generator,
                                     "-g",
                                     op,
                                     "-e",
                                     "object,c_header",
                                     "-f",
                                     function,
                                     "-o",
                                     dir,
                                     "target=" + target,
                                     "schedule=" + space::generator_spelling(point_name)};
    argv.insert(argv.end(), extra.begin(), extra.end());
    int rc = run_logged(argv, log, &c.compile_cpu_s);
    c.compile_s = seconds_since(t0);
    if (rc != 0) {
        // A generator killed by a signal (rc 128 + n: out of memory, a crash)
        // often leaves an empty log; the exit status is then all there is.
        const std::string last = last_line(log);
        c.error = "compile failed (" +
                  (rc > 128 ? "signal " + std::to_string(rc - 128) : "exit " + std::to_string(rc)) + ")" +
                  (last.empty() ? std::string(": no output") : ": " + last);
        return c;
    }

    // Each .so carries its own copy of the Halide runtime (built once per
    // target) and exports only the kernel (with its _argv entry point and
    // metadata) and the few runtime entry points the tool calls
    // (cli/explore_kernel.h); everything else is local (version script) and
    // bound inside the .so (-Bsymbolic). So a point never resolves halide_*
    // symbols against the halcaps executable, whose runtime may be built for
    // another target (no CUDA in a CPU-only build): a point built here runs
    // under any halcaps build. The price, a few hundred KB per .so, is small.
    const std::string map = dir + "/" + function + ".map";
    std::ofstream(map) << "{ global: " << function << "; " << function << "_argv; " << function << "_metadata;"
                       << " halide_copy_to_host; halide_copy_to_device; halide_device_sync; halide_device_free;"
                       << " halide_set_error_handler; halide_cuda_device_interface; halide_cuda_acquire_context;"
                       << " halide_cuda_release_context; local: *; };\n";
    t0 = std::chrono::steady_clock::now();
    rc = run_logged({tools.cxx, "-shared", "-o", c.library, dir + "/" + function + ".o", runtime_object,
                     "-Wl,--version-script=" + map, "-Wl,-Bsymbolic", "-lpthread", "-ldl"},
                    log);
    c.link_s = seconds_since(t0);
    if (rc != 0) {
        c.error = "link failed: " + last_line(log);
        return c;
    }
    c.ok = true;
    return c;
}

}  // namespace halcaps::cli

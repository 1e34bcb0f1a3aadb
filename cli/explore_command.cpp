// `halcaps explore`: search an operator's schedule space
// (schedules/spaces/*.space) in two phases, so that GPU points can be
// compiled on a CPU-only machine and run on the GPU machine:
//
//   halcaps explore build --space schedules/spaces/predict_cpu.space --out DIR
//       compiles every point (or --sample N of them) with the generator into
//       DIR/<function>.so and writes DIR/points.tsv (read back by `run`) and
//       DIR/points.json, with each point's compile time;
//   halcaps explore build --space ... --autoscheduler all --schedule cpu --out DIR
//       adds rows that are not points of the space: the operator scheduled by
//       each of Halide's autoschedulers for the device (auto_adams2019, ...,
//       as schedules/kernels.cmake builds them) and named schedules, so that
//       their compile (search) time is measured the same way as the points';
//       `--op digitcaps --device cpu --autoscheduler all` does this for an
//       operator without a space;
//   halcaps explore run DIR --shape mnist_b128
//       loads each point, checks it against the float64 reference with
//       NaN-poisoned outputs, times it (median of repeats) and writes
//       DIR/results.csv, DIR/results.json and DIR/best.txt (the best point as
//       a line for schedules/kernels.cmake).
//
// `run` handles capsule prediction and both of its gradients, the DigitCaps
// layer (digitcaps, digitcaps_fused: 3 routing iterations) and the capsule
// convolution (cli/explore_problem.h); the rows of other operators (routing,
// the backward passes) are timed by `halcaps bench`, which runs the same
// schedules built into the library. Run times are measured as bench measures
// them: inputs rotated past the last-level cache, CUDA events around each
// call (in the point's own CUDA context), the median of --repeats calls.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/explore_compile.h"
#include "cli/explore_kernel.h"
#include "cli/explore_problem.h"
#include "cli/explore_space.h"
#include "cli/json.h"
#include "cli/shapes.h"
#include "compare.h"
#include "runtime/src/halide_call.h"
#include "schedules/space_knobs.h"

namespace fs = std::filesystem;

namespace halcaps::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// "3m 20s"-style durations for the progress lines.
std::string duration(double s) {
    char text[32];
    if (s < 60) {
        std::snprintf(text, sizeof text, "%.0fs", s);
    } else {
        std::snprintf(text, sizeof text, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
    }
    return text;
}

// Knob values back from a point's name ("space:a=1,b=2"); none for the
// other rows (auto_adams2019, cpu).
std::vector<std::pair<std::string, int>> knobs_of(const std::string &name) {
    std::vector<std::pair<std::string, int>> out;
    if (!space::is_point_name(name)) return out;
    std::stringstream in(name.substr(name.find(':') + 1));
    for (std::string item; std::getline(in, item, ',');) {
        const size_t eq = item.find('=');
        out.push_back({item.substr(0, eq), std::atoi(item.c_str() + eq + 1)});
    }
    return out;
}

// ------------------------------------------------------------------ build --

struct BuildArgs {
    std::string space_path, out_dir, generator, cxx, target, op, device, plugin_dir;
    std::vector<std::string> autoschedulers, schedules;  // extra rows
    int64_t sample = 0;
    uint64_t seed = 0;
    double budget_minutes = 0;
};

struct BuiltPoint {
    int index = 0;
    std::string name;
    std::string autoscheduler;  // the plugin that scheduled this row, if any
    CompiledPoint compiled;
};

// One thing to compile: a point of the space, a named schedule, or the
// operator handed to an autoscheduler.
struct Row {
    std::string name, autoscheduler, label;
    std::vector<std::string> extra;  // generator arguments
};

// points.tsv: "key<TAB>value" header lines, then one "point" line per point.
// The run phase reads this rather than points.json so the tool needs no JSON
// parser; points.json carries the same facts for people and plots.
void write_points(const std::string &dir, const Space &space, const std::string &target,
                  const std::vector<BuiltPoint> &points, int64_t skipped) {
    std::ofstream tsv(dir + "/points.tsv");
    tsv << "operator\t" << space.op << "\ndevice\t" << space.device << "\ntarget\t" << target << "\nspace\t"
        << space.path << "\n";
    for (const auto &p : points) {
        tsv << "point\t" << p.index << "\t" << p.name << "\t" << p.compiled.function << "\t"
            << fs::path(p.compiled.library).filename().string() << "\t" << p.compiled.compile_s << "\t"
            << p.compiled.link_s << "\t" << (p.compiled.ok ? 1 : 0) << "\t" << p.compiled.error << "\t"
            << p.autoscheduler << "\t" << p.compiled.compile_cpu_s << "\n";
    }
    std::ofstream json(dir + "/points.json");
    json << "{\n  \"operator\": " << json_string(space.op) << ",\n  \"device\": " << json_string(space.device)
         << ",\n  \"target\": " << json_string(target) << ",\n  \"space\": " << json_string(space.path)
         << ",\n  \"skipped_for_budget\": " << skipped << ",\n  \"points\": [";
    for (size_t n = 0; n < points.size(); n++) {
        const auto &p = points[n];
        json << (n ? "," : "") << "\n    {\"point\": " << json_string(p.name) << ", \"knobs\": {";
        const auto knobs = knobs_of(p.name);
        for (size_t k = 0; k < knobs.size(); k++) {
            json << (k ? ", " : "") << json_string(knobs[k].first) << ": " << knobs[k].second;
        }
        json << "}, \"autoscheduler\": " << (p.autoscheduler.empty() ? "null" : json_string(p.autoscheduler))
             << ", \"library\": " << json_string(fs::path(p.compiled.library).filename().string())
             << ", \"compile_s\": " << json_number(p.compiled.compile_s)
             << ", \"compile_cpu_s\": " << json_number(p.compiled.compile_cpu_s)
             << ", \"link_s\": " << json_number(p.compiled.link_s) << ", \"ok\": " << (p.compiled.ok ? "true" : "false")
             << ", \"error\": " << json_string(p.compiled.error) << "}";
    }
    json << "\n  ]\n}\n";
}

void explore_build(const BuildArgs &a) {
    Space space;
    std::vector<Point> points;
    if (!a.space_path.empty()) {
        space = read_space(a.space_path);
        points = a.sample > 0 ? sample_points(space, a.sample, a.seed) : all_points(space);
        if ((!a.op.empty() && a.op != space.op) || (!a.device.empty() && a.device != space.device)) {
            throw UsageError{"--op / --device disagree with the space " + a.space_path + " (" + space.op + " on " +
                             space.device + ")"};
        }
    } else {
        if (a.op.empty() || a.device.empty()) throw UsageError{"give --space, or --op and --device"};
        if (a.device != "cpu" && a.device != "cuda") throw UsageError{"--device must be cpu or cuda"};
        if (a.autoschedulers.empty() && a.schedules.empty()) {
            throw UsageError{"without --space, give rows to build: --autoscheduler or --schedule"};
        }
        space.op = a.op;
        space.device = a.device;
    }
    std::vector<Row> rows;
    for (const auto &p : points) rows.push_back({p.name(), "", p.knob_string(), {}});
    for (const auto &name : a.schedules) rows.push_back({name, "", name, {}});
    std::vector<std::string> wanted = a.autoschedulers;
    if (wanted.size() == 1 && wanted[0] == "all") {
        wanted.clear();
        for (const auto &as : autoschedulers(space.device)) wanted.push_back(as.name);
    }
    for (const auto &w : wanted) {
        const Autoscheduler as = find_autoscheduler(w, space.device);
        rows.push_back({as.row, as.name, as.row + " (" + as.name + ")", autoscheduler_arguments(as, a.plugin_dir)});
    }
    const CompileTools tools = find_compile_tools(a.generator, a.cxx);
    const std::string target = explore_target(space.device, a.target);
    std::error_code ec;
    fs::create_directories(a.out_dir, ec);
    if (ec) throw UsageError{"cannot create '" + a.out_dir + "': " + ec.message()};

    std::printf("explore build: %s on %s, %zu of %lld points and %zu other rows, target %s, into %s\n",
                space.op.c_str(), space.device.c_str(), points.size(),
                static_cast<long long>(space.knobs.empty() ? 0 : space.size()), rows.size() - points.size(),
                target.c_str(), a.out_dir.c_str());
    const auto t0 = Clock::now();
    const std::string runtime = build_runtime(tools, target, a.out_dir);
    std::vector<BuiltPoint> built;
    int64_t skipped = 0;
    for (size_t n = 0; n < rows.size(); n++) {
        if (a.budget_minutes > 0 && seconds_since(t0) > 60 * a.budget_minutes) {
            skipped = static_cast<int64_t>(rows.size() - n);
            std::printf("budget of %.3g min spent: %lld points not compiled\n", a.budget_minutes,
                        static_cast<long long>(skipped));
            break;
        }
        BuiltPoint p;
        p.index = static_cast<int>(n);
        p.name = rows[n].name;
        p.autoscheduler = rows[n].autoscheduler;
        const std::string function = "explore_" + space.op + "_" + std::to_string(n);
        p.compiled = compile_point(tools, space.op, p.name, target, runtime, a.out_dir, function, rows[n].extra);
        built.push_back(p);
        write_points(a.out_dir, space, target, built, 0);  // usable if interrupted
        const double elapsed = seconds_since(t0);
        const double left = elapsed / (n + 1) * (rows.size() - n - 1);
        std::printf("[%zu/%zu] %-44s compile %5.2fs link %4.2fs %s | elapsed %s, ~%s left\n", n + 1, rows.size(),
                    rows[n].label.c_str(), p.compiled.compile_s, p.compiled.link_s,
                    p.compiled.ok ? "ok" : p.compiled.error.c_str(), duration(elapsed).c_str(), duration(left).c_str());
        std::fflush(stdout);
    }
    write_points(a.out_dir, space, target, built, skipped);
    const auto failed = std::count_if(built.begin(), built.end(), [](const BuiltPoint &p) { return !p.compiled.ok; });
    std::printf("wrote %s/points.json (%zu points, %lld failed to compile)\n", a.out_dir.c_str(), built.size(),
                static_cast<long long>(failed));
}

// -------------------------------------------------------------------- run --

struct RunArgs {
    std::string dir, shape;  // empty: mnist_b128, or layer for capsconv
    int warmup = 3, repeats = 10;
    uint64_t seed = 0;
    double budget_minutes = 0;
};

struct PointsFile {
    std::string op, device, target, space;
    struct Entry {
        std::string name, function, library, error, autoscheduler;
        double compile_s = 0, compile_cpu_s = std::nan("");
        bool ok = false;
    };
    std::vector<Entry> points;
};

PointsFile read_points(const std::string &dir) {
    std::ifstream in(dir + "/points.tsv");
    if (!in) throw UsageError{"no " + dir + "/points.tsv (run `halcaps explore build --out " + dir + "` first)"};
    PointsFile f;
    for (std::string line; std::getline(in, line);) {
        std::vector<std::string> fields;
        std::stringstream s(line);
        for (std::string field; std::getline(s, field, '\t');) fields.push_back(field);
        if (fields.size() < 2) continue;
        if (fields[0] == "operator") f.op = fields[1];
        if (fields[0] == "device") f.device = fields[1];
        if (fields[0] == "target") f.target = fields[1];
        if (fields[0] == "space") f.space = fields[1];
        if (fields[0] == "point" && fields.size() >= 8) {
            PointsFile::Entry e;
            e.name = fields[2], e.function = fields[3], e.library = dir + "/" + fields[4];
            e.compile_s = std::atof(fields[5].c_str());
            e.ok = fields[7] == "1";
            e.error = fields.size() > 8 ? fields[8] : "";
            e.autoscheduler = fields.size() > 9 ? fields[9] : "";
            if (fields.size() > 10) e.compile_cpu_s = std::atof(fields[10].c_str());
            f.points.push_back(e);
        }
    }
    if (!explore_can_run(f.op)) {
        throw UsageError{dir +
                         "/points.tsv: explore run handles predict (and its gradients), digitcaps, "
                         "digitcaps_fused and capsconv, not '" +
                         f.op +
                         "'; time its rows (built into the library) "
                         "with `halcaps bench`"};
    }
    return f;
}

struct Result {
    std::string name, autoscheduler;
    double compile_s = 0, compile_cpu_s = std::nan("");
    bool valid = false;
    double us = std::nan(""), gbs = std::nan(""), gflops = std::nan("");
    double call_us = std::nan("");  // one call on an idle stream (Timing); us is the device's time
    bool host_bound = false;        // us includes host time (Timing)
    std::string check;              // the comparison's summary or the error
};

// Checks and times one point. Inputs are host buffers marked dirty: for
// CUDA points the kernel's runtime copies each input set to the device on
// its first use and keeps it there, so timed calls move no data over PCIe.
// The output is poisoned with NaN (on the device too) before the checked
// call. Timed calls rotate through the input sets, as `halcaps bench` does,
// and CUDA points are timed with events in the point's own context.
Result run_point(const PointsFile::Entry &e, const RunArgs &a, ExploreProblem &p, bool cuda) {
    Result r;
    r.name = e.name;
    r.autoscheduler = e.autoscheduler;
    r.compile_s = e.compile_s;
    r.compile_cpu_s = e.compile_cpu_s;
    if (!e.ok) {
        r.check = e.error;
        return r;
    }
    LoadedKernel kernel(e.library, e.function, static_cast<int>(p.scalars.size()),
                        static_cast<int>(p.input_count()) + 1);
    std::vector<std::vector<std::unique_ptr<detail::HalideTensor>>> sets;
    for (auto &set : p.input_sets) {
        sets.emplace_back();
        for (auto &tensor : set) {
            sets.back().push_back(std::make_unique<detail::HalideTensor>(tensor->view()));
            sets.back().back()->raw()->set_host_dirty(true);
        }
    }
    detail::HalideTensor out(p.output->view());
    auto buffers = [&](int n) {
        std::vector<halide_buffer_t *> b;
        for (auto &t : sets[n % sets.size()]) b.push_back(t->raw());
        b.push_back(out.raw());
        return b;
    };
    auto release = [&] {
        for (auto &set : sets) {
            for (auto &t : set) kernel.device_free(t->raw());
        }
        kernel.device_free(out.raw());
    };
    p.output->poison();
    // CUDA: allocates the output on the device and poisons it there too.
    int rc = kernel.copy_to_device(out.raw());
    if (rc == 0) rc = kernel.call(p.scalars, buffers(0));
    if (rc == 0) rc = kernel.sync(out.raw());
    if (rc == 0) rc = kernel.copy_to_host(out.raw());
    if (rc != 0) {
        release();
        r.check = "kernel failed (Halide error " + std::to_string(rc) + ")";
        return r;
    }
    const auto c = reference::compare(p.output->host().data(), p.ref, p.tolerance);
    r.valid = c.passed;
    r.check = c.summary();
    if (r.valid) {
        // Every input set goes to the device before the timed calls (as
        // bench uploads its sets first): otherwise the first call on each set
        // would copy its inputs over PCIe inside the timed window.
        for (size_t n = 1; cuda && rc == 0 && n < sets.size(); n++) rc = kernel.call(p.scalars, buffers(n));
        if (rc == 0) rc = kernel.sync(out.raw());
        if (rc != 0) {
            release();
            r.valid = false;
            r.check = "kernel failed while uploading the input sets (Halide error " + std::to_string(rc) + ")";
            return r;
        }
        // No sync inside a timed call: on CUDA the events mark its end, and a
        // sync would make the host wait for the device (LoadedKernel::time);
        // errors of queued work come back from the sync after timing.
        const Timing t = kernel.time(cuda, a.warmup, a.repeats, [&](int n) {
            if (kernel.call(p.scalars, buffers(n)) != 0) throw UsageError{e.name + ": kernel failed while timing"};
        });
        if (kernel.sync(out.raw()) != 0) throw UsageError{e.name + ": kernel failed while timing"};
        r.us = t.median_us;
        r.call_us = t.call_median_us;
        r.host_bound = t.host_bound;
        r.gbs = p.bytes / (r.us * 1e3);
        r.gflops = p.flops / (r.us * 1e3);
    }
    release();
    return r;
}

void write_results(const RunArgs &a, const PointsFile &f, const ExploreProblem &p, const std::vector<Result> &rows,
                   const Result *best) {
    // The knob columns are those of the space's points; the other rows
    // (autoschedulers, named schedules) leave them empty.
    std::vector<std::string> knob_names;
    for (const auto &r : rows) {
        if (knob_names.empty()) {
            for (const auto &k : knobs_of(r.name)) knob_names.push_back(k.first);
        }
    }
    std::ofstream csv(a.dir + "/results.csv");
    csv << "point";
    for (const auto &k : knob_names) csv << "," << k;
    csv << ",compile_s,valid,us,gbs,autoscheduler,compile_cpu_s,gflops,call_us,host_bound\n";
    for (const auto &r : rows) {
        csv << "\"" << r.name << "\"";
        const auto knobs = knobs_of(r.name);
        for (size_t k = 0; k < knob_names.size(); k++) {
            csv << ",";
            if (k < knobs.size()) csv << knobs[k].second;
        }
        csv << "," << json_number(r.compile_s) << "," << (r.valid ? 1 : 0) << "," << json_number(r.us) << ","
            << json_number(r.gbs) << "," << r.autoscheduler << "," << json_number(r.compile_cpu_s) << ","
            << json_number(r.gflops) << "," << json_number(r.call_us) << "," << (r.host_bound ? 1 : 0) << "\n";
    }

    std::ofstream json(a.dir + "/results.json");
    json << "{\n  \"operator\": " << json_string(f.op) << ",\n  \"device\": " << json_string(f.device)
         << ",\n  \"target\": " << json_string(f.target) << ",\n  \"space\": " << json_string(f.space)
         << ",\n  \"shape\": {\"name\": " << json_string(p.shape_name) << ", " << p.shape_json.substr(1)
         << ",\n  \"repeats\": " << a.repeats << ",\n  \"best\": " << (best ? json_string(best->name) : "null")
         << ",\n  \"points\": [";
    for (size_t n = 0; n < rows.size(); n++) {
        const auto &r = rows[n];
        json << (n ? "," : "") << "\n    {\"point\": " << json_string(r.name) << ", \"knobs\": {";
        const auto knobs = knobs_of(r.name);
        for (size_t k = 0; k < knobs.size(); k++) {
            json << (k ? ", " : "") << json_string(knobs[k].first) << ": " << knobs[k].second;
        }
        json << "}, \"autoscheduler\": " << (r.autoscheduler.empty() ? "null" : json_string(r.autoscheduler))
             << ", \"compile_s\": " << json_number(r.compile_s)
             << ", \"compile_cpu_s\": " << json_number(r.compile_cpu_s)
             << ", \"valid\": " << (r.valid ? "true" : "false") << ", \"us\": " << json_number(r.us)
             << ", \"gbs\": " << json_number(r.gbs) << ", \"gflops\": " << json_number(r.gflops)
             << ", \"call_us\": " << json_number(r.call_us) << ", \"host_bound\": " << (r.host_bound ? "true" : "false")
             << ", \"check\": " << json_string(r.check) << "}";
    }
    json << "\n  ]\n}\n";

    std::ofstream txt(a.dir + "/best.txt");
    if (best == nullptr) {
        txt << "# no valid point\n";
        return;
    }
    txt << "# best of " << rows.size() << " points on " << p.shape_name << " (" << f.device << ", " << f.target
        << "): " << json_number(best->us) << " us, " << json_number(best->gbs) << " GB/s\n# knobs:";
    for (const auto &k : knobs_of(best->name)) txt << " " << k.first << "=" << k.second;
    txt << "\n# for schedules/kernels.cmake (built there for the build's targets, not only this one):\n";
    if (!best->autoscheduler.empty()) {
        txt << "halcaps_add_kernel(" << f.op << "  " << best->name << "  " << f.device
            << " AUTOSCHEDULER Halide::" << best->autoscheduler << ")\n";
    } else if (!space::is_point_name(best->name)) {
        txt << "# (the named schedule '" << best->name << "', already in schedules/kernels.cmake)\n";
    } else {
        txt << "halcaps_add_kernel(" << f.op << "  \"" << best->name << "\"  " << f.device << ")\n";
    }
}

void explore_run(const RunArgs &a) {
    const PointsFile f = read_points(a.dir);
    const bool cuda = f.device == "cuda";
    const std::string shape = !a.shape.empty() ? a.shape : f.op == "capsconv" ? "layer" : "mnist_b128";
    std::mt19937_64 rng(a.seed);
    ExploreProblem problem = make_explore_problem(f.op, shape, cuda ? Device::cuda : Device::cpu, rng);

    std::printf("explore run: %s on %s, shape %s, %zu points (%s), %d repeats, %zu input sets rotated\n", f.op.c_str(),
                f.device.c_str(), problem.shape_name.c_str(), f.points.size(), f.target.c_str(), a.repeats,
                problem.input_sets.size());
    const auto t0 = Clock::now();
    std::vector<Result> rows;
    const Result *best = nullptr;
    for (size_t n = 0; n < f.points.size(); n++) {
        if (a.budget_minutes > 0 && seconds_since(t0) > 60 * a.budget_minutes) {
            std::printf("budget of %.3g min spent: %zu points not run\n", a.budget_minutes, f.points.size() - n);
            break;
        }
        rows.push_back(run_point(f.points[n], a, problem, cuda));
        best = nullptr;
        for (const auto &r : rows) {
            if (r.valid && (best == nullptr || r.us < best->us)) best = &r;
        }
        const Result &r = rows.back();
        const double elapsed = seconds_since(t0);
        const double left = elapsed / (n + 1) * (f.points.size() - n - 1);
        const char *verdict = r.valid ? "ok   " : r.check.find("failed") != std::string::npos ? "ERROR" : "WRONG";
        std::printf("[%zu/%zu] %-44s %s %10.1f us %7.1f GB/s | best %.1f us | elapsed %s, ~%s left\n", n + 1,
                    f.points.size(), r.name.c_str(), verdict, r.us, r.gbs, best ? best->us : std::nan(""),
                    duration(elapsed).c_str(), duration(left).c_str());
        if (!r.valid) std::printf("        %s\n", r.check.c_str());
        std::fflush(stdout);
    }
    write_results(a, f, problem, rows, best);
    if (best != nullptr) {
        std::printf("best: %s  %.1f us  %.1f GB/s\nwrote %s/results.csv, results.json, best.txt\n", best->name.c_str(),
                    best->us, best->gbs, a.dir.c_str());
    } else {
        throw UsageError{"no point of " + a.dir + " was valid"};
    }
}

}  // namespace

void add_explore_command(CLI::App &app) {
    CLI::App *explore = app.add_subcommand(
        "explore", "Search a schedule space: compile its points (build), then check and time them (run).");
    explore->require_subcommand(1);

    auto b = std::make_shared<BuildArgs>();
    CLI::App *build = explore->add_subcommand(
        "build", "Compile every point (or a sample) of a space into shared objects under --out.");
    build->add_option("--space", b->space_path, "space file, e.g. schedules/spaces/predict_cpu.space");
    build->add_option("--op", b->op, "the generator, without --space (e.g. digitcaps, capsconv)");
    build->add_option("--device", b->device, "cpu or cuda, without --space");
    build->add_option("--autoscheduler", b->autoschedulers,
                      "also build the operator scheduled by this autoscheduler (repeatable; 'all': every one for "
                      "the device: Adams2019, Mullapudi2016, Li2018 on cpu, Anderson2021 on cuda)");
    build->add_option("--schedule", b->schedules, "also build this named schedule, e.g. cpu or tuned (repeatable)");
    build->add_option("--plugin-dir", b->plugin_dir,
                      "folder of the libautoschedule_*.so plugins (default: libHalide's)");
    build->add_option("--out", b->out_dir, "work directory for the objects and points.json")->required();
    build->add_option("--sample", b->sample, "compile N random points instead of all")->check(CLI::PositiveNumber);
    build->add_option("--seed", b->seed, "seed of --sample");
    build->add_option("--budget-minutes", b->budget_minutes, "stop compiling after this many minutes")
        ->check(CLI::PositiveNumber);
    build->add_option("--generator", b->generator,
                      "halcaps_generators executable (default: the one built with this tool)");
    build->add_option("--cxx", b->cxx, "compiler driver used to link the shared objects");
    build->add_option("--target", b->target,
                      "Halide target without device features (default: host for cpu, x86-64-linux for cuda)");
    build->callback([b] { explore_build(*b); });

    auto r = std::make_shared<RunArgs>();
    CLI::App *run = explore->add_subcommand(
        "run", "Check each compiled point against the float64 reference, time it, write results and the best point.");
    run->add_option("dir", r->dir, "work directory of `explore build`")->required();
    run->add_option("--shape", r->shape,
                    "mnist_b128 (default), mnist_b512, wide_b32 or B:I:K:J:E; for capsconv layer (default), seed, "
                    "stride2 or n:H:W:ci:k:co:stride:pad");
    run->add_option("--warmup", r->warmup, "untimed calls per point")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    run->add_option("--repeats", r->repeats, "timed calls per point (the median is kept)")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    run->add_option("--seed", r->seed, "seed of the random inputs");
    run->add_option("--budget-minutes", r->budget_minutes, "stop after this many minutes")->check(CLI::PositiveNumber);
    run->callback([r] { explore_run(*r); });
}

}  // namespace halcaps::cli

// The implementation tables (runtime/src/implementation_table.h): the walk
// that picks a default, the statuses of a named row that does not apply,
// and the defaults the operators' tables give per iteration count.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>

#include "halcaps/halcaps.h"
#include "halide_call.h"
#include "implementation_table.h"
#include "kernel_registry.h"
#include "operator_support.h"

using namespace halcaps;

namespace {

struct FakeCall : detail::CallSite {
    int size = 0;
    mutable std::vector<std::string> *ran = nullptr;  // the rows run, in order
};

detail::Implementation<FakeCall> fake_row(const std::string &name, std::vector<int> iterations,
                                          const std::string &default_when, Status result = Status::success()) {
    detail::Implementation<FakeCall> row;
    row.name = name;
    row.device = Device::cpu;
    row.iterations = std::move(iterations);
    row.default_when = default_when;
    row.run = [name, result](const FakeCall &c) {
        c.ran->push_back(name);
        return result;
    };
    return row;
}

// "three": built for 3 only; "small": sizes up to 4; "refuses": refuses
// every shape when run (as a kernel's own refusal); "any": always;
// "by_name": no default.
detail::ImplementationTable<FakeCall> fake_table() {
    std::vector<int> every;
    for (int n = 1; n <= kMaxRoutingIterations; n++) every.push_back(n);
    detail::ImplementationTable<FakeCall> t;
    t.push_back(fake_row("three", {3}, "at 3"));
    t.push_back(fake_row("small", every, "sizes up to 4"));
    t.back().check = [](const FakeCall &c) {
        if (c.size <= 4) return Status::success();
        return Status{StatusCode::unsupported_shape, "takes sizes up to 4, got " + std::to_string(c.size)};
    };
    t.push_back(fake_row("refuses", every, "always", {StatusCode::unsupported_shape, "fake: refused when run"}));
    t.push_back(fake_row("any", every, "always"));
    t.push_back(fake_row("by_name", every, ""));
    return t;
}

// Runs the fake table: the status and the rows run.
std::pair<Status, std::vector<std::string>> walk(const std::string &implementation, int iterations, int size,
                                                 Device device = Device::cpu) {
    static const detail::ImplementationTable<FakeCall> table = fake_table();
    Options options;
    options.implementation = implementation;
    std::vector<std::string> ran;
    FakeCall call;
    call.op = "fake", call.device = device, call.iterations = iterations, call.options = &options;
    call.size = size, call.ran = &ran;
    Status s = detail::run_implementation(table, call);
    return {s, ran};
}

bool takes(const ImplementationInfo &info, int iterations) {
    return std::find(info.iterations.begin(), info.iterations.end(), iterations) != info.iterations.end();
}

}  // namespace

TEST_CASE("implementations: the default is the first row that applies, walked in order", "[implementations]") {
    using Ran = std::vector<std::string>;
    // At 3 the first row is built: it runs, nothing else.
    CHECK(walk("", 3, 8).first.ok());
    CHECK(walk("", 3, 8).second == Ran{"three"});
    // At 1 "three" is not built: the next row that applies runs.
    CHECK(walk("", 1, 2).second == Ran{"small"});
    // Too large for "small": "refuses" runs and refuses, the walk goes on to "any".
    const auto [status, ran] = walk("", 1, 8);
    CHECK(status.ok());
    CHECK(ran == Ran{"refuses", "any"});
    // No default row on another device: unknown_implementation, nothing run.
    const auto [cuda_status, cuda_ran] = walk("", 3, 2, Device::cuda);
    CHECK(cuda_status.code == StatusCode::unknown_implementation);
    CHECK(cuda_ran.empty());
}

TEST_CASE("implementations: a named row that does not apply says why, with its own code", "[implementations]") {
    using Ran = std::vector<std::string>;
    auto [s, ran] = walk("three", 5, 2);
    CHECK(s.code == StatusCode::unsupported_iterations);
    CHECK(s.message ==
          "fake: implementation 'three' is built for iterations 3, not 5 "
          "(schedules/kernels.cmake lists the counts built)");
    CHECK(ran.empty());
    std::tie(s, ran) = walk("small", 3, 9);
    CHECK(s.code == StatusCode::unsupported_shape);
    CHECK(s.message == "fake: implementation 'small' takes sizes up to 4, got 9");
    CHECK(ran.empty());
    // A named row that refuses when run is not replaced by another.
    std::tie(s, ran) = walk("refuses", 3, 2);
    CHECK(s.code == StatusCode::unsupported_shape);
    CHECK(ran == Ran{"refuses"});
    // A row with no default runs by name only.
    std::tie(s, ran) = walk("by_name", 3, 2);
    CHECK(s.ok());
    CHECK(ran == Ran{"by_name"});
    std::tie(s, ran) = walk("no_such", 3, 2);
    CHECK(s.code == StatusCode::unknown_implementation);
    CHECK(s.message ==
          "fake: no implementation named 'no_such' for device cpu; available: three, small, refuses, "
          "any, by_name");
}

TEST_CASE("implementations: the list has one row per name and device, each default row says where",
          "[implementations]") {
    std::set<std::tuple<std::string, std::string, Device>> seen;
    std::set<std::string> ops;
    for (const auto &info : list_implementations()) {
        INFO(info.op << " " << info.implementation << " on " << device_name(info.device));
        CHECK(seen.insert({info.op, info.implementation, info.device}).second);
        CHECK((info.default_rank == 0) == info.default_when.empty());
        CHECK((info.family == "halide" || info.family == "hand_written" || info.family == "library"));
        ops.insert(info.op);
    }
    // Every op of ImplementationInfo::op's comment has a row on the CPU or, for the
    // ops that keep c, wherever CUDA is built.
    for (const char *op :
         {"predict", "predict_backward", "squash", "route", "route_backward", "digitcaps", "digitcaps_backward",
          "digitcaps_with_s", "digitcaps_backward_with_s", "capsconv", "capsconv_backward"}) {
        INFO(op);
        CHECK(ops.count(op) == 1);
        CHECK(!default_implementation(op, Device::cpu, 3).empty());
    }
    CHECK(ops.count("digitcaps_with_c") == (cuda_built() ? 1u : 0u));
    CHECK(ops.count("digitcaps_backward_with_c") == (cuda_built() ? 1u : 0u));
}

TEST_CASE("implementations: a CPU default not built for the count falls through to the next row", "[implementations]") {
    // digitcaps_with_s: cpu_lanes where built (1, 3, 5), else fused_cpu (its
    // unrolled kernel, or the per-iteration ones).
    const auto cpu_lanes = detail::built_iterations("digitcaps_fused_with_s", "cpu_lanes", Device::cpu);
    REQUIRE(!cpu_lanes.empty());
    for (int n = 1; n <= kMaxRoutingIterations; n++) {
        INFO(n << " iterations");
        const bool built = std::find(cpu_lanes.begin(), cpu_lanes.end(), n) != cpu_lanes.end();
        CHECK(default_implementation("digitcaps_with_s", Device::cpu, n) == (built ? "cpu_lanes" : "fused_cpu"));
        CHECK(default_implementation("route", Device::cpu, n) == "cpu");
        CHECK(default_implementation("route_backward", Device::cpu, n) == "steps");
    }
}

TEST_CASE("implementations: every routing op has a CUDA default at every iteration count", "[cuda_table]") {
    // A pure table query: no device needed, only a build with CUDA.
    REQUIRE(cuda_built());
    const std::vector<ImplementationInfo> list = list_implementations();
    for (const char *op : {"route", "route_backward", "digitcaps", "digitcaps_backward", "digitcaps_with_s",
                           "digitcaps_backward_with_s", "digitcaps_with_c", "digitcaps_backward_with_c"}) {
        // The last default row on CUDA takes every count: the steps (Halide),
        // or for the pair keeping c the hand-written cuda_tensor.
        const ImplementationInfo *last = nullptr;
        for (const auto &info : list) {
            if (info.op == op && info.device == Device::cuda && info.default_rank > 0 &&
                (last == nullptr || info.default_rank > last->default_rank)) {
                last = &info;
            }
        }
        INFO(op);
        REQUIRE(last != nullptr);
        const bool keeps_c = std::string(op).find("_with_c") != std::string::npos;
        CHECK(last->implementation == (keeps_c ? "cuda_tensor" : "steps"));
        for (int n = 1; n <= kMaxRoutingIterations; n++) {
            INFO(n << " iterations");
            CHECK(takes(*last, n));
            CHECK(!default_implementation(op, Device::cuda, n).empty());
        }
    }
    // Where the Halide default is not built for the count, the next Halide
    // row built for it, the hand-written kernels with shape limits, then the steps.
    CHECK(default_implementation("route", Device::cuda, 3) == "stage_per_kernel");
    CHECK(default_implementation("route", Device::cuda, 1) == "fused");
    CHECK(default_implementation("route", Device::cuda, 4) == "steps");
    CHECK(default_implementation("route_backward", Device::cuda, 4) == "cuda_passes");
    CHECK(default_implementation("digitcaps_with_s", Device::cuda, 1) == "cuda_tensor");
    CHECK(default_implementation("digitcaps_backward", Device::cuda, 5) == "cuda_passes");
    CHECK(default_implementation("digitcaps_backward", Device::cuda, 3) == "rows_vectors");
}

TEST_CASE("implementations: a Halide kernel called with arguments its metadata does not list is an internal error",
          "[implementations]") {
    const detail::HalideKernelEntry *kernel = detail::find_halide_kernel("squash", "cpu", Device::cpu);
    REQUIRE(kernel != nullptr);
    std::vector<float> s(8, 1.0f), v(8, 0.0f);
    TensorView s_view{s.data(), {2, 4}, {}, MemorySpace::host};
    TensorView v_view{v.data(), {2, 4}, {}, MemorySpace::host};
    TensorView rank3{v.data(), {2, 2, 2}, {}, MemorySpace::host};
    Options options;
    // Right: one input, one output, rank 2.
    REQUIRE(
        detail::run_halide("squash", kernel->function, Device::cpu, options, {s_view}, {v_view}, {}, {"s", "v"}).ok());
    // An extra input, a scalar it does not take, an output of the wrong rank.
    Status extra = detail::run_halide("squash", kernel->function, Device::cpu, options, {s_view, s_view}, {v_view}, {},
                                      {"s", "t", "v"});
    CHECK(extra.code == StatusCode::internal_error);
    CHECK(extra.message.find("halcaps_squash__cpu") != std::string::npos);
    Status scalar =
        detail::run_halide("squash", kernel->function, Device::cpu, options, {s_view}, {v_view}, {1}, {"s", "v"});
    CHECK(scalar.code == StatusCode::internal_error);
    Status rank =
        detail::run_halide("squash", kernel->function, Device::cpu, options, {s_view}, {rank3}, {}, {"s", "v"});
    CHECK(rank.code == StatusCode::internal_error);
    CHECK(rank.message.find("rank") != std::string::npos);
}

// The auto_* implementations (Halide's autoschedulers, schedules/kernels.cmake)
// on the CPU. Capsule prediction, both gradients and the DigitCaps layer are
// checked by the tests that run every implementation the build holds
// (test_predict_cpu.cpp, test_digitcaps_cpu.cpp: the blog grid,
// odd sizes, MNIST, NaN-poisoned outputs); here: that every CPU
// autoscheduler was built for every operator, and the capsule convolution
// (whose other tests name their implementations) at odd sizes.
#include "capsconv_checks.h"
#include "digitcaps_checks.h"

using namespace halcaps;
using namespace halcaps::testing;

// The CMake options (CMakeLists.txt) that decide which are built.
#ifndef HALCAPS_AUTOSCHEDULED_KERNELS
#define HALCAPS_AUTOSCHEDULED_KERNELS 0
#endif
#ifndef HALCAPS_BEAM_SEARCH_KERNELS
#define HALCAPS_BEAM_SEARCH_KERNELS 0
#endif

namespace {

std::vector<std::string> expected_cpu_autoschedulers() {
    std::vector<std::string> out;
    if (HALCAPS_AUTOSCHEDULED_KERNELS) out.insert(out.end(), {"auto_mullapudi2016", "auto_li2018"});
    if (HALCAPS_BEAM_SEARCH_KERNELS) out.push_back("auto_adams2019");
    return out;
}

bool listed(const std::vector<std::string> &names, const std::string &name) {
    return std::find(names.begin(), names.end(), name) != names.end();
}

std::vector<std::string> auto_implementations(const std::string &op) {
    std::vector<std::string> out;
    for (const auto &name : implementations_for(op, Device::cpu)) {
        if (name.rfind("auto_", 0) == 0) out.push_back(name);
    }
    return out;
}

}  // namespace

TEST_CASE("autoscheduled: every CPU autoscheduler is built for every operator", "[autosched]") {
    const auto expected = expected_cpu_autoschedulers();
    if (expected.empty()) WARN("built without HALCAPS_AUTOSCHEDULED_KERNELS and HALCAPS_BEAM_SEARCH_KERNELS");
    REQUIRE(auto_implementations("predict").size() == expected.size());
    for (const auto &name : expected) {
        INFO(name);
        REQUIRE(listed(implementations_for("predict", Device::cpu), name));
        REQUIRE(listed(implementations_for("predict_backward", Device::cpu), name));
        REQUIRE(listed(implementations("digitcaps", 3), name));
        REQUIRE(listed(implementations_for("capsconv", Device::cpu), name));
    }
}

TEST_CASE("autoscheduled: capsule convolution at odd sizes, strides, padding", "[autosched]") {
    // Extents 1, 3, 5, 7, primes; one off the estimates (n = 8, 32x32,
    // ci = co = 32, 3x3) that the autoschedulers tiled for, and past them.
    const std::vector<reference::CapsConvShape> shapes = {
        //  n   H   W  ci kh kw co s  p
        {1, 1, 1, 1, 1, 1, 1, 1, 0},    {1, 3, 3, 1, 3, 3, 1, 1, 0},     {2, 7, 5, 3, 3, 3, 2, 1, 1},
        {1, 9, 9, 2, 3, 3, 3, 2, 0},    {3, 8, 11, 1, 2, 3, 5, 2, 1},    {1, 13, 7, 5, 5, 5, 1, 1, 2},
        {1, 11, 13, 2, 5, 5, 3, 3, 1},  {2, 33, 17, 33, 3, 3, 31, 1, 1}, {1, 17, 33, 31, 3, 3, 33, 2, 1},
        {1, 128, 128, 3, 5, 5, 1, 1, 0}};  // Vaidya's seed problem
    for (const auto &name : auto_implementations("capsconv")) {
        Options options;
        options.device = Device::cpu;
        options.implementation = name;
        for (const auto &shape : shapes) check_capsconv(shape, options, false);
    }
}

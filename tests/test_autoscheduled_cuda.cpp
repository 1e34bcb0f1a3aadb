// auto_anderson2021 (Halide's Anderson2021 GPU autoscheduler,
// schedules/kernels.cmake) for the capsule convolution, whose other tests
// name their implementations; capsule prediction, its gradients and the
// DigitCaps layer run under test_cuda.cpp, which takes every CUDA
// implementation the build holds. Host tensors (copied by the runtime), odd
// sizes, NaN-poisoned outputs. Without a CUDA device the program reports
// "skipped" to ctest (exit code 77), never "passed".
#define CATCH_CONFIG_RUNNER
#include <cstdio>

#include "capsconv_checks.h"
#include "digitcaps_checks.h"

using namespace halcaps;
using namespace halcaps::testing;

#ifndef HALCAPS_BEAM_SEARCH_KERNELS
#define HALCAPS_BEAM_SEARCH_KERNELS 0
#endif

namespace {

bool listed(const std::vector<std::string> &names, const std::string &name) {
    return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

TEST_CASE("cuda autoscheduled: Anderson2021 is built for every operator", "[cuda][autosched]") {
    if (!HALCAPS_BEAM_SEARCH_KERNELS) {
        WARN("built with HALCAPS_BEAM_SEARCH_KERNELS=OFF: auto_anderson2021 is not built");
        REQUIRE(!listed(implementations_for("predict", Device::cuda), "auto_anderson2021"));
        return;
    }
    REQUIRE(listed(implementations_for("predict", Device::cuda), "auto_anderson2021"));
    REQUIRE(listed(implementations_for("predict_backward", Device::cuda), "auto_anderson2021"));
    REQUIRE(listed(implementations("digitcaps", 3, Device::cuda), "auto_anderson2021"));
    REQUIRE(listed(implementations_for("capsconv", Device::cuda), "auto_anderson2021"));
}

TEST_CASE("cuda autoscheduled: capsule convolution at odd sizes, strides, padding", "[cuda][autosched]") {
    const std::vector<reference::CapsConvShape> shapes = {
        //  n   H   W  ci kh kw co s  p
        {1, 1, 1, 1, 1, 1, 1, 1, 0},     {1, 3, 3, 1, 3, 3, 1, 1, 0},     {2, 7, 5, 3, 3, 3, 2, 1, 1},
        {1, 9, 9, 2, 3, 3, 3, 2, 0},     {3, 8, 11, 1, 2, 3, 5, 2, 1},    {1, 13, 7, 5, 5, 5, 1, 1, 2},
        {1, 11, 13, 2, 5, 5, 3, 3, 1},   {2, 33, 17, 33, 3, 3, 31, 1, 1}, {1, 17, 33, 31, 3, 3, 33, 2, 1},
        {8, 32, 32, 32, 3, 3, 32, 1, 1},   // the estimates
        {1, 128, 128, 3, 5, 5, 1, 1, 0}};  // Vaidya's seed problem
    for (const auto &name : implementations_for("capsconv", Device::cuda)) {
        if (name.rfind("auto_", 0) != 0) continue;
        Options options;
        options.device = Device::cuda;
        options.implementation = name;
        for (const auto &shape : shapes) check_capsconv(shape, options, false);
    }
}

int main(int argc, char **argv) {
    if (!cuda_device_available()) {
        std::printf("SKIPPED: no CUDA device is present; the CUDA tests did not run\n");
        return 77;
    }
    std::printf("CUDA device: %s\n", cuda_device_name().c_str());
    return Catch::Session().run(argc, argv);
}

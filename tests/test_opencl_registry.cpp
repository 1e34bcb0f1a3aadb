// The OpenCL twins in the kernel table (cmake/HalcapsKernels.cmake): every
// CUDA Halide kernel has one, built from the same generator, schedule and
// iteration count, except the exclusions listed there, which this file
// asserts one by one (adding one means changing this list too). And the
// opencl device's status where there is none. Runs without any device.
#include <cstdlib>
#include <string>

#include "kernel_registry.h"
#include "test_support.h"

using namespace halcaps;

namespace {

bool excluded(const detail::HalideKernelEntry &k) {
    for (const auto &e : detail::opencl_exclusions()) {
        if ((std::string(e.generator) == "*" || e.generator == std::string(k.generator)) &&
            e.schedule == std::string(k.schedule)) {
            return true;
        }
    }
    return false;
}

const detail::HalideKernelEntry *twin(const detail::HalideKernelEntry &k, Device device) {
    return detail::find_halide_kernel(k.generator, k.schedule, device, k.iterations);
}

}  // namespace

TEST_CASE("opencl registry: the exclusions are exactly these, each with its reason", "[opencl_registry]") {
    const auto &exclusions = detail::opencl_exclusions();
    REQUIRE(exclusions.size() == 1);
    REQUIRE(std::string(exclusions[0].generator) == "*");
    REQUIRE(std::string(exclusions[0].schedule) == "auto_anderson2021");
    REQUIRE(std::string(exclusions[0].reason).find("beam search") != std::string::npos);
}

TEST_CASE("opencl registry: every CUDA Halide kernel has its OpenCL twin, and every twin its CUDA kernel",
          "[opencl_registry]") {
    int cuda = 0, cuda_excluded = 0, opencl = 0;
    for (const auto &k : detail::halide_kernels()) {
        INFO(k.generator << " " << k.schedule << " (" << k.iterations << " iterations) on " << device_name(k.device));
        if (k.device == Device::cuda) {
            cuda++;
            if (excluded(k)) cuda_excluded++;
            if (opencl_built() && !excluded(k)) REQUIRE(twin(k, Device::opencl) != nullptr);
            if (!opencl_built()) REQUIRE(twin(k, Device::opencl) == nullptr);
        }
        if (k.device == Device::opencl) {
            opencl++;
            REQUIRE(opencl_built());
            REQUIRE(!excluded(k));
            if (cuda_built()) REQUIRE(twin(k, Device::cuda) != nullptr);
        }
    }
    if (!opencl_built()) {
        REQUIRE(opencl == 0);
        return;
    }
    // Without CUDA in the build the twins are built all the same: at least
    // the 42 of schedules/kernels.cmake's 42 CUDA lines today.
    REQUIRE(opencl >= 42);
    if (cuda_built()) REQUIRE(opencl == cuda - cuda_excluded);
}

// Run by ctest with no OpenCL platform reachable (OCL_ICD_VENDORS at an
// empty directory) or no device of the type asked for (HL_OCL_DEVICE_TYPE),
// and in builds without OpenCL: every op reports device_unavailable saying why.
TEST_CASE("opencl registry: without an OpenCL device, device_unavailable with the reason", "[.opencl_unavailable]") {
    REQUIRE(!opencl_device_available());
    REQUIRE(opencl_device_name().empty());
    testing::PredictProblem p({2, 3, 4, 5, 6});
    Options o;
    o.device = Device::opencl;
    const Status s = predict(testing::host_view(p.u, p.u_shape()), testing::host_view(p.W, p.W_shape()),
                             testing::host_view(p.u_hat, p.u_hat_shape()), o);
    INFO(status_code_name(s.code) << ": " << s.message);
    REQUIRE(s.code == StatusCode::device_unavailable);
    const char *expected = std::getenv("HALCAPS_TEST_EXPECTED_REASON");
    REQUIRE(expected != nullptr);
    REQUIRE(s.message.rfind(std::string("predict: device opencl was asked for, but ") + expected, 0) == 0);
    const Status c = capsconv_backward(TensorView{}, TensorView{}, TensorView{}, TensorView{}, TensorView{}, {}, o);
    REQUIRE(c.code == StatusCode::null_pointer);  // the argument checks come first
}

// Bad input never aborts: every entry point returns the exact status, with a
// message that names the offending argument.
#include <cstdint>

#include "capsconv_reference.h"
#include "test_support.h"

using namespace halcaps;
using namespace halcaps::testing;

namespace {

struct ForwardArgs {
    PredictProblem p{{2, 3, 4, 5, 6}};
    TensorView u = host_view(p.u, p.u_shape());
    TensorView W = host_view(p.W, p.W_shape());
    TensorView u_hat = host_view(p.u_hat, p.u_hat_shape());
    Options options;

    Status run() { return predict(u, W, u_hat, options); }
};

struct BackwardArgs {
    PredictProblem p{{2, 3, 4, 5, 6}};
    TensorView g = host_view(p.g, p.u_hat_shape());
    TensorView u = host_view(p.u, p.u_shape());
    TensorView W = host_view(p.W, p.W_shape());
    TensorView grad_u = host_view(p.grad_u, p.u_shape());
    TensorView grad_W = host_view(p.grad_W, p.W_shape());
    Options options;

    Status run() { return predict_backward(g, u, W, grad_u, grad_W, options); }
};

void require_status(const Status &s, StatusCode code, const std::string &message_start) {
    INFO("got " << status_code_name(s.code) << ": " << s.message);
    REQUIRE(s.code == code);
    REQUIRE(s.message.rfind(message_start, 0) == 0);
}

}  // namespace

TEST_CASE("predict: valid arguments succeed (the baseline the error cases break)", "[errors]") {
    ForwardArgs a;
    REQUIRE(a.run().ok());
    BackwardArgs b;
    REQUIRE(b.run().ok());
}

TEST_CASE("predict: null data pointer", "[errors]") {
    ForwardArgs a;
    a.W.data = nullptr;
    require_status(a.run(), StatusCode::null_pointer, "predict: W has a null data pointer");
    BackwardArgs b;
    b.grad_W.data = nullptr;
    require_status(b.run(), StatusCode::null_pointer, "predict_backward: grad_W has a null data pointer");
}

TEST_CASE("predict: wrong rank", "[errors]") {
    ForwardArgs a;
    a.u.shape = {2, 12};
    require_status(a.run(), StatusCode::bad_rank, "predict: u must have rank 3");
    ForwardArgs c;
    c.u_hat.shape.push_back(1);
    require_status(c.run(), StatusCode::bad_rank, "predict: u_hat must have rank 4");
    BackwardArgs b;
    b.g.shape = {};
    require_status(b.run(), StatusCode::bad_rank, "predict_backward: g must have rank 4");
}

TEST_CASE("predict: zero or negative extent", "[errors]") {
    ForwardArgs a;
    a.u.shape[0] = 0;
    require_status(a.run(), StatusCode::bad_extent, "predict: u extent 0 (batch) is 0");
    ForwardArgs c;
    c.W.shape[2] = -3;
    require_status(c.run(), StatusCode::bad_extent, "predict: W extent 2 (out_dim) is -3");
    BackwardArgs b;
    b.grad_u.shape[1] = 0;
    require_status(b.run(), StatusCode::bad_extent, "predict_backward: grad_u extent 1 (in_caps) is 0");
}

TEST_CASE("predict: more elements than 32-bit indexing allows", "[errors]") {
    ForwardArgs a;
    a.u_hat.shape = {65536, 3, 5, 65536};
    require_status(a.run(), StatusCode::bad_extent, "predict: u_hat [65536, 3, 5, 65536] has more than 2^31-1");
}

TEST_CASE("predict: mismatched extents", "[errors]") {
    ForwardArgs a;
    a.p.u_hat.resize(2 * 3 * 4 * 6);
    a.u_hat.shape = {2, 3, 4, 6};
    require_status(a.run(), StatusCode::extent_mismatch,
                   "predict: u_hat extent 2 (out_caps) is 4 but W has out_caps = 5");
    ForwardArgs c;
    c.W.shape = {3, 5, 6, 3};
    require_status(c.run(), StatusCode::extent_mismatch, "predict: W extent 3 (in_dim) is 3 but u has in_dim = 4");
    BackwardArgs b;
    b.grad_W.shape = {3, 5, 6, 5};
    require_status(b.run(), StatusCode::extent_mismatch,
                   "predict_backward: grad_W extent 3 (in_dim) is 5 but u has in_dim = 4");
}

TEST_CASE("predict: unsupported strides", "[errors]") {
    ForwardArgs a;
    a.u.strides = {12, 1, 3};  // a transposed view
    require_status(a.run(), StatusCode::unsupported_strides, "predict: u has strides [12, 1, 3]");
    ForwardArgs dense;
    dense.u.strides = {12, 4, 1};  // explicit dense strides are fine
    REQUIRE(dense.run().ok());
    BackwardArgs b;
    b.g.strides = {180, 60, 12, 2};
    require_status(b.run(), StatusCode::unsupported_strides, "predict_backward: g has strides");
}

TEST_CASE("predict: unknown implementation", "[errors]") {
    ForwardArgs a;
    a.options.device = Device::cpu;
    a.options.implementation = "no-such-schedule";
    require_status(a.run(), StatusCode::unknown_implementation,
                   "predict: no implementation named 'no-such-schedule' for device cpu; available: cpu");
    BackwardArgs b;
    b.options.implementation = "tuned";  // a GPU schedule, asked for on the CPU
    b.options.device = Device::cpu;
    require_status(b.run(), StatusCode::unknown_implementation,
                   "predict_backward: no implementation named 'tuned' for device cpu");
}

TEST_CASE("predict: tensors in mixed or wrong memory spaces", "[errors]") {
    ForwardArgs a;
    a.W.space = MemorySpace::cuda;
    require_status(a.run(), StatusCode::wrong_memory_space, "predict: W is in cuda memory but u is in host memory");
    ForwardArgs c;
    for (TensorView *t : {&c.u, &c.W, &c.u_hat}) t->space = MemorySpace::cuda;
    c.options.device = Device::cpu;
    require_status(c.run(), StatusCode::wrong_memory_space,
                   "predict: u is in cuda memory but the cpu device was asked for");
}

TEST_CASE("predict: host tensors may start anywhere", "[errors]") {
    // (CUDA tensors for the Halide kernels must start on a 16-byte boundary:
    // misaligned_pointer, checked by the CUDA tests.)
    ForwardArgs b;
    std::vector<float> shifted(b.p.u_hat.size() + 1);
    const bool aligned = reinterpret_cast<std::uintptr_t>(shifted.data() + 1) % 16 == 0;
    b.u_hat.data = shifted.data() + (aligned ? 0 : 1);
    const Status s = b.run();
    INFO(s.message);
    REQUIRE(s.ok());
}

TEST_CASE("predict: a CUDA run with no CUDA device, or no CUDA in the build", "[errors]") {
    ForwardArgs a;
    a.options.device = Device::cuda;
    const Status s = a.run();
    if (!cuda_built()) {
        require_status(s, StatusCode::device_unavailable, "predict: device cuda was asked for, but this build");
    } else if (!cuda_device_available()) {
        require_status(s, StatusCode::device_unavailable,
                       "predict: device cuda was asked for, but no CUDA device is present");
    } else {
        // With a device, host tensors on CUDA are copied there and back.
        INFO(s.message);
        REQUIRE(s.ok());
    }
}

TEST_CASE("status codes have stable names", "[errors]") {
    REQUIRE(std::string(status_code_name(StatusCode::ok)) == "ok");
    REQUIRE(std::string(status_code_name(StatusCode::extent_mismatch)) == "extent_mismatch");
    REQUIRE(std::string(status_code_name(StatusCode::device_unavailable)) == "device_unavailable");
    REQUIRE(std::string(status_code_name(StatusCode::misaligned_pointer)) == "misaligned_pointer");
}

// Cases the fuzz targets (fuzz/) found; each failed before its fix.

TEST_CASE("capsconv: a stride or pad past the kernels' range is bad_parameter, not a kernel failure", "[errors]") {
    // fuzz_capsconv: stride 2^31-1 reached the kernels (which take at most
    // 2^20) and came back as internal_error. One output pixel: any stride
    // past the image gives the same output shape.
    std::vector<float> input = random_normal(3 * 3 * 16), filter = random_normal(16), output(16),
                       grad_input(3 * 3 * 16), grad_filter(16), grad_output = random_normal(16);
    const TensorView in = host_view(input, {1, 3, 3, 1, 4, 4}), k = host_view(filter, {1, 1, 1, 1, 4, 4});
    const TensorView out = host_view(output, {1, 1, 1, 1, 4, 4}), g = host_view(grad_output, {1, 1, 1, 1, 4, 4});
    const TensorView gi = host_view(grad_input, {1, 3, 3, 1, 4, 4}), gk = host_view(grad_filter, {1, 1, 1, 1, 4, 4});
    Options o;
    o.device = Device::cpu;
    REQUIRE(capsconv(in, k, out, {1 << 20, 0}, o).ok());  // the largest stride the kernels take
    require_status(capsconv(in, k, out, {2147483647, 0}, o), StatusCode::bad_parameter,
                   "capsconv: stride is 2147483647; the kernels take at most 1048576");
    require_status(capsconv_backward(in, k, g, gi, gk, {2147483647, 0}, o), StatusCode::bad_parameter,
                   "capsconv_backward: stride is 2147483647; the kernels take at most 1048576");
    require_status(capsconv(in, k, out, {1, (1 << 20) + 1}, o), StatusCode::bad_parameter,
                   "capsconv: pad is 1048577; the kernels take at most 1048576");
}

TEST_CASE("capsconv: stride and pad in range but huge: a result or out_of_memory, never a kernel failure", "[errors]") {
    // fuzz_capsconv: stride 2^20 on a one-pixel output made the direct
    // kernels' padded-input tiles pass 2^31 bytes (internal_error); with one
    // pixel the stride is never applied, so it now runs.
    std::vector<float> input = random_normal(6 * 1 * 3 * 16), filter = random_normal(4 * 1 * 3 * 3 * 16);
    std::vector<float> output = nan_filled(3 * 16);
    const reference::CapsConvShape one_pixel{1, 6, 1, 3, 4, 1, 3, 1 << 20, 1};
    Options o;
    o.device = Device::cpu;
    const Status s = capsconv(host_view(input, {1, 6, 1, 3, 4, 4}), host_view(filter, {4, 1, 3, 3, 4, 4}),
                              host_view(output, {1, 1, 1, 3, 4, 4}), {1 << 20, 1}, o);
    INFO(s.message);
    REQUIRE(s.ok());
    require_matches("one-pixel output at stride 2^20", output,
                    reference::capsconv_f64(one_pixel, input.data(), filter.data()), 4 * 3 * 4);
    // Pad 2^20 on a 3x3 image at stride 2^20: a 3x3 output whose padded
    // input the kernels would materialize (2^42 pixels): out_of_memory.
    std::vector<float> small_input = random_normal(9 * 16), small_filter = random_normal(16);
    std::vector<float> small_output = nan_filled(9 * 16);
    const Status big = capsconv(host_view(small_input, {1, 3, 3, 1, 4, 4}), host_view(small_filter, {1, 1, 1, 1, 4, 4}),
                                host_view(small_output, {1, 3, 3, 1, 4, 4}), {1 << 20, 1 << 20}, o);
    INFO(big.message);
    if (!big.ok()) {
        REQUIRE(big.code == StatusCode::out_of_memory);
    } else {
        const reference::CapsConvShape shape{1, 3, 3, 1, 1, 1, 1, 1 << 20, 1 << 20};
        require_matches("3x3 output at pad 2^20", small_output,
                        reference::capsconv_f64(shape, small_input.data(), small_filter.data()), 16);
    }
}

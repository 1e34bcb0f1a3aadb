// The capsule convolution on the CPU, forward and both gradients, against the
// float64 reference (reference/capsconv_f64.cpp): odd sizes, stride 2,
// padding, n > 1, co > 1, 1x1 and 5x5 filters, the seed problem, every
// implementation built; NaN-poisoned outputs; the kernels' gradients against
// finite differences; and bad arguments with their exact statuses.
#include <functional>

#include "capsconv_checks.h"
#include "finite_differences.h"

using namespace halcaps;
using namespace halcaps::testing;
using reference::CapsConvShape;

namespace {

void require_status(const Status &s, StatusCode code, const std::string &message_start) {
    INFO("got " << status_code_name(s.code) << ": " << s.message);
    REQUIRE(s.code == code);
    REQUIRE(s.message.rfind(message_start, 0) == 0);
}

Options cpu(const std::string &implementation) {
    Options o;
    o.device = Device::cpu;
    o.implementation = implementation;
    return o;
}

// Extents 1, 3, 5, 7, primes, one off the pixel block of 4 (3, 5, 9) and the
// AVX2 / AVX-512 vector counts; strides 1-3, pads 0-2, filters 1x1 to 5x5.
std::vector<CapsConvShape> odd_conv_shapes() {
    //       n   H   W  ci kh kw co s  p
    return {{1, 1, 1, 1, 1, 1, 1, 1, 0}, {1, 3, 3, 1, 3, 3, 1, 1, 0},  {2, 7, 5, 3, 3, 3, 2, 1, 1},
            {1, 9, 9, 2, 3, 3, 3, 2, 0}, {3, 8, 11, 1, 2, 3, 5, 2, 1}, {1, 13, 7, 5, 5, 5, 1, 1, 2},
            {2, 5, 9, 4, 1, 1, 4, 1, 0}, {1, 6, 6, 3, 1, 1, 7, 2, 0},  {1, 11, 13, 2, 5, 5, 3, 3, 1},
            {4, 4, 4, 9, 3, 3, 1, 1, 1}, {1, 2, 2, 1, 3, 3, 2, 1, 2},  {1, 17, 3, 1, 4, 2, 2, 2, 1}};
}

}  // namespace

TEST_CASE("capsconv: implementations are listed", "[capsconv]") {
    // (and the auto_* ones, checked by test_autoscheduled.cpp)
    std::vector<std::string> forward;
    for (const auto &name : implementations_for("capsconv", Device::cpu)) {
        if (name.rfind("auto_", 0) != 0) forward.push_back(name);
    }
    // In table order: the defaults first (runtime/src/capsconv_implementations.cpp).
    REQUIRE(forward == std::vector<std::string>{"cpu_co4", "cpu", "winograd2x2_cpu", "winograd4x4_cpu"});
    REQUIRE(implementations_for("capsconv_backward", Device::cpu) == std::vector<std::string>{"cpu"});
}

TEST_CASE("capsconv: odd sizes, strides, padding, every implementation", "[capsconv]") {
    for (const auto &shape : odd_conv_shapes()) {
        check_capsconv(shape, cpu("cpu"));
        check_capsconv(shape, cpu("cpu_co4"), false);  // co tails: whole 4-type blocks computed, the rest discarded
    }
}

// The Winograd forms take 3x3 filters at stride 1: the odd shapes of that
// kind, plus output extents one off and on the 2- and 4-pixel output tiles
// (1, 2, 3, 4, 5, 7, 8, 9) and the product's 4-tile blocks (16, 17 pixels).
std::vector<CapsConvShape> winograd_shapes() {
    std::vector<CapsConvShape> shapes;
    for (const auto &s : odd_conv_shapes()) {
        if (s.kernel_h == 3 && s.kernel_w == 3 && s.stride == 1) shapes.push_back(s);
    }
    //                n   H   W  ci kh kw co s  p
    shapes.push_back({1, 4, 5, 2, 3, 3, 1, 1, 0});    // output 2 x 3
    shapes.push_back({2, 6, 9, 3, 3, 3, 5, 1, 0});    // 4 x 7
    shapes.push_back({1, 7, 10, 1, 3, 3, 4, 1, 0});   // 5 x 8
    shapes.push_back({1, 9, 16, 6, 3, 3, 3, 1, 1});   // 9 x 16
    shapes.push_back({3, 17, 15, 4, 3, 3, 2, 1, 2});  // 19 x 17, pad 2
    return shapes;
}

TEST_CASE("capsconv: the Winograd forms on 3x3, stride-1 shapes", "[capsconv][winograd]") {
    for (const auto &shape : winograd_shapes()) {
        check_capsconv(shape, cpu("winograd2x2_cpu"), false);
        check_capsconv(shape, cpu("winograd4x4_cpu"), false);
    }
}

TEST_CASE("capsconv: the Winograd forms reject other filters and strides", "[capsconv][winograd][errors]") {
    for (const char *name : {"winograd2x2_cpu", "winograd4x4_cpu"}) {
        CapsConvProblem five({1, 9, 9, 2, 5, 5, 1, 1, 0});
        require_status(capsconv(host_view(five.input, five.input_shape()), host_view(five.filter, five.filter_shape()),
                                host_view(five.output, five.output_shape()), five.params(), cpu(name)),
                       StatusCode::unsupported_shape,
                       std::string("capsconv: implementation '") + name +
                           "' computes 3x3 filters at stride 1 only; filter is 5x5, stride 1");
        CapsConvProblem strided({1, 9, 9, 2, 3, 3, 1, 2, 1});
        require_status(
            capsconv(host_view(strided.input, strided.input_shape()), host_view(strided.filter, strided.filter_shape()),
                     host_view(strided.output, strided.output_shape()), strided.params(), cpu(name)),
            StatusCode::unsupported_shape,
            std::string("capsconv: implementation '") + name +
                "' computes 3x3 filters at stride 1 only; filter is 3x3, stride 2");
    }
    CapsConvProblem p({1, 5, 5, 1, 3, 3, 1, 1, 1});
    require_status(capsconv(host_view(p.input, p.input_shape()), host_view(p.filter, p.filter_shape()),
                            host_view(p.output, p.output_shape()), p.params(), cpu("winograd4x4_fast")),
                   StatusCode::unknown_implementation,
                   "capsconv: no implementation named 'winograd4x4_fast' for device cpu; available: cpu_co4, cpu");
}

TEST_CASE("capsconv: the seed problem and a wider layer", "[capsconv]") {
    check_capsconv({1, 128, 128, 3, 5, 5, 1, 1, 0}, cpu("cpu"));  // Vaidya's seed problem
    check_capsconv({2, 12, 12, 8, 3, 3, 8, 1, 1}, cpu(""));       // the default implementation (cpu_co4: co = 8)
    check_capsconv({2, 12, 12, 8, 3, 3, 6, 1, 1}, cpu(""));       // the default implementation (cpu: co = 6)
}

TEST_CASE("capsconv: the kernels' gradients match finite differences of the float64 forward", "[capsconv][gradient]") {
    const CapsConvShape shape{2, 5, 4, 2, 3, 2, 2, 2, 1};
    INFO("seed " << seed() << ", shape " << shape_name(shape));
    CapsConvProblem p(shape);
    REQUIRE(capsconv_backward(host_view(p.input, p.input_shape()), host_view(p.filter, p.filter_shape()),
                              host_view(p.grad_output, p.output_shape()), host_view(p.grad_input, p.input_shape()),
                              host_view(p.grad_filter, p.filter_shape()), p.params(), cpu("cpu"))
                .ok());
    std::vector<double> I(p.input.begin(), p.input.end()), K(p.filter.begin(), p.filter.end());
    const std::vector<double> g(p.grad_output.begin(), p.grad_output.end());
    auto loss = [&] {
        const auto O = reference::capsconv_f64(shape, I.data(), K.data());
        double sum = 0;
        for (size_t n = 0; n < O.size(); n++) sum += g[n] * O[n];
        return sum;
    };
    auto check = [&](const char *what, std::vector<double> &x, const std::vector<float> &analytic) {
        const NumericGradient numeric = finite_difference(loss, x);
        for (size_t n = 0; n < x.size(); n++) {
            INFO(what << " element " << n);
            REQUIRE(std::fabs(analytic[n] - numeric[n]) <= 1e-4 * (1 + std::fabs(numeric[n])));
        }
    };
    check("grad_input", I, p.grad_input);
    check("grad_filter", K, p.grad_filter);
}

TEST_CASE("capsconv: bad arguments give exact statuses", "[capsconv][errors]") {
    CapsConvProblem p({2, 6, 5, 3, 3, 3, 2, 2, 1});  // output 3 x 3
    auto in = host_view(p.input, p.input_shape()), k = host_view(p.filter, p.filter_shape()),
         out = host_view(p.output, p.output_shape()), g = host_view(p.grad_output, p.output_shape()),
         gi = host_view(p.grad_input, p.input_shape()), gk = host_view(p.grad_filter, p.filter_shape());
    const ConvParams params = p.params();
    const Options o = cpu("");
    REQUIRE(capsconv(in, k, out, params, o).ok());
    REQUIRE(capsconv_backward(in, k, g, gi, gk, params, o).ok());

    TensorView null_in = in;
    null_in.data = nullptr;
    require_status(capsconv(null_in, k, out, params, o), StatusCode::null_pointer, "capsconv: input has a null data");
    require_status(capsconv_backward(in, k, g, gi, TensorView{nullptr, p.filter_shape()}, params, o),
                   StatusCode::null_pointer, "capsconv_backward: grad_filter has a null data");
    TensorView rank5 = k;
    rank5.shape = {3, 3, 3, 2, 16};
    require_status(capsconv(in, rank5, out, params, o), StatusCode::bad_rank, "capsconv: filter must have rank 6");
    TensorView zero = in;
    zero.shape[1] = 0;
    require_status(capsconv(zero, k, out, params, o), StatusCode::bad_extent, "capsconv: input extent 1 (height) is 0");
    TensorView pose = in;
    pose.shape = {2, 6, 5, 3, 2, 8};
    TensorView pose_k = k;
    pose_k.shape = {3, 3, 3, 2, 2, 8};
    TensorView pose_o = out;
    pose_o.shape = {2, 3, 3, 2, 2, 8};
    require_status(capsconv(pose, pose_k, pose_o, params, o), StatusCode::bad_extent,
                   "capsconv: input's pose_row extent is 2; pose matrices must be 4 x 4");
    TensorView ci_mismatch = k;
    ci_mismatch.shape[2] = 4;
    require_status(capsconv(in, ci_mismatch, out, params, o), StatusCode::extent_mismatch,
                   "capsconv: filter extent 2 (in_caps) is 4 but input has in_caps = 3");
    TensorView co_mismatch = out;
    co_mismatch.shape[3] = 1;
    require_status(capsconv(in, k, co_mismatch, params, o), StatusCode::extent_mismatch,
                   "capsconv: output extent 3 (out_caps) is 1 but filter has out_caps = 2");
    // The output's spatial extents must follow from stride and pad.
    require_status(capsconv(in, k, out, {1, 1}, o), StatusCode::extent_mismatch,
                   "capsconv: output extent 1 (out_height) is 3 but stride 1 and pad 1 give 6");
    require_status(capsconv(in, k, out, {2, 0}, o), StatusCode::extent_mismatch,
                   "capsconv: output extent 1 (out_height) is 3 but stride 2 and pad 0 give 2");
    require_status(capsconv_backward(in, k, g, gi, gk, {2, 2}, o), StatusCode::extent_mismatch,
                   "capsconv_backward: grad_output extent 1 (out_height) is 3 but stride 2 and pad 2 give 4");
    require_status(capsconv(in, k, out, {0, 1}, o), StatusCode::bad_parameter,
                   "capsconv: stride is 0; it must be at least 1");
    require_status(capsconv(in, k, out, {-2, 1}, o), StatusCode::bad_parameter, "capsconv: stride is -2");
    require_status(capsconv_backward(in, k, g, gi, gk, {2, -1}, o), StatusCode::bad_parameter,
                   "capsconv_backward: pad is -1; it must be at least 0");
    // A filter larger than the padded image.
    CapsConvProblem small({1, 2, 2, 1, 1, 1, 1, 1, 0});
    std::vector<float> big_filter = random_normal(5 * 5 * 16);
    require_status(capsconv(host_view(small.input, small.input_shape()), host_view(big_filter, {5, 5, 1, 1, 4, 4}),
                            host_view(small.output, {1, 1, 1, 1, 4, 4}), {1, 1}, o),
                   StatusCode::bad_extent, "capsconv: filter kernel_h is 5 but the padded input height is only 4");
    TensorView strided = in;
    strided.strides = {6 * 5 * 3 * 16, 5 * 3 * 16, 3 * 16, 16, 1, 4};
    require_status(capsconv(strided, k, out, params, o), StatusCode::unsupported_strides,
                   "capsconv: input has strides");
    TensorView on_device = out;
    on_device.space = MemorySpace::cuda;
    require_status(capsconv(in, k, on_device, params, o), StatusCode::wrong_memory_space,
                   "capsconv: output is in cuda");
    require_status(capsconv(in, k, out, params, cpu("tuned")), StatusCode::unknown_implementation,
                   "capsconv: no implementation named 'tuned' for device cpu; available: cpu_co4, cpu");
    require_status(capsconv_backward(in, k, g, gi, gk, params, cpu("cpu_co4")), StatusCode::unknown_implementation,
                   "capsconv_backward: no implementation named 'cpu_co4' for device cpu; available: cpu");
    // Nothing was written by the failed calls after the first good one... and
    // the good calls left no NaN behind (checked against the reference above).
    for (float v : p.output) REQUIRE(!std::isnan(v));
}

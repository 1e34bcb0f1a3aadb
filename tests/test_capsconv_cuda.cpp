// The capsule convolution's Halide CUDA kernels (forward and both gradients)
// against the float64 reference: odd sizes (extents 1, 3, 7, primes, one off
// every tile the GPU schedules use), stride 2 and 3, padding, n > 1, co > 1,
// 1x1, 3x3 and 5x5 filters, the seed problem; host tensors (copied by the
// runtime) and device tensors on the default and on the caller's stream;
// outputs NaN-poisoned. Linked into halcaps_cuda_tests, whose main (in
// test_cuda.cpp) reports "skipped" without a CUDA device. Tag [cuda][capsconv].
#include <cuda_runtime.h>

#include "capsconv_checks.h"
#include "cuda_test_support.h"

using namespace halcaps;
using namespace halcaps::testing;
using reference::CapsConvShape;

namespace {

// The Halide CUDA implementations of `op` in this build (hand-written CUDA
// peers, when built, have their own tests).
std::vector<std::string> halide_cuda_implementations(const std::string &op) {
    std::vector<std::string> names;
    for (const auto &info : list_implementations()) {
        if (info.op == op && info.device == Device::cuda && info.description.rfind("Halide", 0) == 0) {
            names.push_back(info.implementation);
        }
    }
    REQUIRE(!names.empty());
    return names;
}

// The Winograd forms (3x3 filters at stride 1 only) have their own cases.
bool is_winograd(const std::string &implementation) { return implementation.rfind("winograd", 0) == 0; }

// The direct Halide CUDA implementations of `op`.
std::vector<std::string> direct_cuda_implementations(const std::string &op) {
    std::vector<std::string> names;
    for (const auto &name : halide_cuda_implementations(op)) {
        if (!is_winograd(name)) names.push_back(name);
    }
    return names;
}

// The GPU schedules tile output pixels by 32 x 2 (tuned), 32 x 4 (vaidya),
// 16 x 4 (tuned_co4), 8 x 4 (staged_rows), capsule types by 4 (tuned_co4's
// co tile; tuned's reduction chunks) and 2, and grad_filter's row chunks by
// ceil(OH / 64) with partials in 32s: these shapes sit on and one off each.
// Strides up to 3 with 5x5 filters (staged_rows refuses some of them).
std::vector<CapsConvShape> cuda_conv_shapes() {
    //       n   H   W  ci kh kw co s  p
    return {{1, 1, 1, 1, 1, 1, 1, 1, 0},
            {1, 3, 3, 1, 3, 3, 1, 1, 0},
            {2, 7, 5, 3, 3, 3, 2, 1, 1},
            {1, 9, 9, 2, 3, 3, 3, 2, 0},
            {3, 8, 11, 1, 2, 3, 5, 2, 1},
            {1, 13, 7, 5, 5, 5, 1, 1, 2},
            {2, 5, 9, 4, 1, 1, 4, 1, 0},
            {1, 6, 6, 3, 1, 1, 7, 2, 0},
            {1, 11, 13, 2, 5, 5, 3, 3, 1},
            {4, 4, 4, 9, 3, 3, 1, 1, 1},
            {1, 2, 2, 1, 3, 3, 2, 1, 2},
            {1, 17, 3, 1, 4, 2, 2, 2, 1},
            {1, 33, 31, 5, 3, 3, 3, 1, 1},
            {2, 9, 35, 4, 3, 3, 4, 1, 0},
            {1, 17, 15, 8, 3, 3, 5, 1, 1},
            {3, 10, 10, 7, 5, 5, 9, 2, 2},
            {1, 131, 3, 1, 3, 1, 1, 1, 0},
            {2, 65, 7, 2, 1, 3, 1, 1, 1},
            {1, 23, 29, 3, 5, 5, 2, 3, 2},
            // kh = 11: a filter taller than 8 rows.
            {1, 14, 12, 2, 11, 3, 2, 1, 3}};
}

// Forward and backward of `implementation` on device tensors queued on `stream`.
void check_on_device(const CapsConvShape &shape, const std::string &implementation, bool backward,
                     cudaStream_t stream) {
    CapsConvProblem p(shape);
    INFO("seed " << seed() << ", shape " << shape_name(shape) << ", implementation " << implementation);
    DeviceTensor input(p.input, false), filter(p.filter, false), grad_output(p.grad_output, false);
    DeviceTensor output(p.output, true), grad_input(p.grad_input, true), grad_filter(p.grad_filter, true);
    const Options options = cuda_options(implementation, stream);
    const Status f = capsconv(input.view(p.input_shape()), filter.view(p.filter_shape()), output.view(p.output_shape()),
                              p.params(), options);
    INFO(f.message);
    REQUIRE(f.ok());
    cuda_ok(cudaStreamSynchronize(stream));
    require_matches("output", output.download(), reference::capsconv_f64(p.s, p.input.data(), p.filter.data()),
                    shape.kernel_h * shape.kernel_w * shape.in_caps * 4);
    if (!backward) return;
    const Status b = capsconv_backward(input.view(p.input_shape()), filter.view(p.filter_shape()),
                                       grad_output.view(p.output_shape()), grad_input.view(p.input_shape()),
                                       grad_filter.view(p.filter_shape()), p.params(), options);
    INFO(b.message);
    REQUIRE(b.ok());
    cuda_ok(cudaStreamSynchronize(stream));
    require_matches("grad_input", grad_input.download(),
                    reference::capsconv_grad_input_f64(p.s, p.grad_output.data(), p.filter.data()),
                    shape.kernel_h * shape.kernel_w * shape.out_caps * 4);
    require_matches("grad_filter", grad_filter.download(),
                    reference::capsconv_grad_filter_f64(p.s, p.grad_output.data(), p.input.data()),
                    shape.batch * shape.out_height() * shape.out_width() * 4);
}

// staged_rows stages an input tile of (7 s + kw) x (3 s + kh) pixels and the
// filter poses, 4 input capsule types at a time (64 bytes a pose), and
// reports unsupported_shape where that passes the 48 KB a launch gets.
bool staged_rows_fits(const CapsConvShape &shape) {
    const int s = shape.stride, kw = shape.kernel_w, kh = shape.kernel_h;
    const int tile_pixels = (7 * s + kw) * (3 * s + kh);
    return 64 * 4 * (tile_pixels + kw * kh) <= 48 * 1024;
}

// True where `implementation` is expected to refuse `shape`; then checks
// that it does, with unsupported_shape and a message that says why.
bool refuses_shape(const std::string &implementation, const CapsConvShape &shape) {
    if (implementation != "staged_rows" || staged_rows_fits(shape)) return false;
    CapsConvProblem p(shape);
    INFO("shape " << shape_name(shape) << ", implementation " << implementation);
    const Status s = capsconv(host_view(p.input, p.input_shape()), host_view(p.filter, p.filter_shape()),
                              host_view(p.output, p.output_shape()), p.params(), cuda_options(implementation));
    INFO(s.message);
    REQUIRE(s.code == StatusCode::unsupported_shape);
    REQUIRE(s.message.find("48 KB of shared memory") != std::string::npos);
    return true;
}

bool has_backward(const std::string &implementation) {
    for (const auto &name : halide_cuda_implementations("capsconv_backward")) {
        if (name == implementation) return true;
    }
    return false;
}

}  // namespace

TEST_CASE("cuda capsconv: the Halide schedules are listed, tuned for both directions", "[cuda][capsconv]") {
    const auto forward = halide_cuda_implementations("capsconv");
    for (const char *name : {"vaidya", "tuned", "tuned_co4", "staged_rows", "winograd4x4_staged"}) {
        INFO(name);
        REQUIRE(std::find(forward.begin(), forward.end(), name) != forward.end());
    }
    REQUIRE(has_backward("tuned"));
    REQUIRE(has_backward("tuned_caps"));
}

TEST_CASE("cuda capsconv: odd sizes, strides, padding with host tensors", "[cuda][capsconv]") {
    for (const auto &name : direct_cuda_implementations("capsconv")) {
        for (const auto &shape : cuda_conv_shapes()) {
            if (!refuses_shape(name, shape)) check_capsconv(shape, cuda_options(name), has_backward(name));
        }
    }
}

TEST_CASE("cuda capsconv: the seed problem, a small layer and the default implementation", "[cuda][capsconv]") {
    for (const auto &name : direct_cuda_implementations("capsconv")) {
        check_capsconv({1, 128, 128, 3, 5, 5, 1, 1, 0}, cuda_options(name), has_backward(name));  // Vaidya's seed
        check_capsconv({2, 16, 16, 16, 3, 3, 16, 1, 1}, cuda_options(name), has_backward(name));
    }
    // No name: the CUDA defaults.
    check_capsconv({2, 12, 12, 8, 5, 5, 8, 1, 1}, cuda_options(""));  // 5x5: staged_rows
    check_capsconv({2, 12, 12, 8, 3, 3, 6, 2, 1}, cuda_options(""));  // stride 2: staged_rows
    check_capsconv({2, 12, 12, 8, 3, 3, 6, 1, 1}, cuda_options(""));  // 3x3, stride 1: winograd4x4_staged
    // Too large for staged_rows' tiles: the default falls back to tuned, and
    // to tuned_co4 when co is a multiple of 4.
    REQUIRE(!staged_rows_fits({1, 23, 29, 3, 5, 5, 2, 3, 2}));
    check_capsconv({1, 23, 29, 3, 5, 5, 2, 3, 2}, cuda_options(""));
    check_capsconv({1, 23, 29, 3, 5, 5, 4, 3, 2}, cuda_options(""));
}

// The Halide kernels load and store 16 bytes at a time: a device tensor one
// float past a 16-byte boundary is refused, with its name, before any kernel
// runs (the hand-written kernels take it: test_capsconv_cuda_hand.cpp).
TEST_CASE("cuda capsconv: device tensors off a 16-byte boundary are refused", "[cuda][capsconv]") {
    CapsConvProblem p({1, 13, 11, 3, 5, 5, 1, 1, 0});
    for (const char *misaligned : {"input", "filter", "output"}) {
        const std::string which = misaligned;
        DeviceTensor input(p.input, false, which == "input" ? 1 : 0);
        DeviceTensor filter(p.filter, false, which == "filter" ? 1 : 0);
        DeviceTensor output(p.output, true, which == "output" ? 1 : 0);
        for (const char *name : {"", "staged_rows", "tuned"}) {
            const Status s = capsconv(input.view(p.input_shape()), filter.view(p.filter_shape()),
                                      output.view(p.output_shape()), p.params(), cuda_options(name));
            INFO(which << ", implementation '" << name << "': " << s.message);
            REQUIRE(s.code == StatusCode::misaligned_pointer);
            const std::string expected =
                "capsconv: " + which + " is in cuda memory at an address that is not 16-byte aligned";
            REQUIRE(s.message.rfind(expected, 0) == 0);
        }
    }
}

TEST_CASE("cuda capsconv: device tensors on the default stream and on the caller's stream", "[cuda][capsconv]") {
    cudaStream_t stream = nullptr;
    cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (const auto &name : direct_cuda_implementations("capsconv")) {
        const bool backward = has_backward(name);
        check_on_device({2, 7, 5, 3, 3, 3, 2, 1, 1}, name, backward, nullptr);
        check_on_device({1, 33, 31, 5, 3, 3, 3, 2, 1}, name, backward, nullptr);
        check_on_device({3, 10, 10, 7, 5, 5, 9, 1, 2}, name, backward, stream);
        check_on_device({1, 1, 1, 1, 1, 1, 1, 1, 0}, name, backward, stream);
    }
    cuda_ok(cudaStreamDestroy(stream));
}

// Backward implementations that have no forward of the same name (tuned_caps).
TEST_CASE("cuda capsconv: backward-only implementations", "[cuda][capsconv]") {
    const auto forward = halide_cuda_implementations("capsconv");
    for (const auto &name : halide_cuda_implementations("capsconv_backward")) {
        if (std::find(forward.begin(), forward.end(), name) != forward.end()) continue;
        std::vector<CapsConvShape> shapes = cuda_conv_shapes();
        shapes.push_back({1, 128, 128, 3, 5, 5, 1, 1, 0});  // Vaidya's seed
        shapes.push_back({2, 16, 16, 16, 3, 3, 16, 1, 1});
        shapes.push_back({2, 17, 15, 9, 3, 3, 5, 1, 1});  // ci, co one off the 8 x 4 thread block
        for (const auto &shape : shapes) {
            CapsConvProblem p(shape);
            INFO("seed " << seed() << ", shape " << shape_name(shape) << ", implementation " << name);
            check_capsconv_backward(p, cuda_options(name));
        }
    }
}

// The product's blocks hold 8 x 4 output tiles (16 x 8 pixels for F(2x2),
// 32 x 16 for F(4x4)) and 8 capsule types (2 or 4 a thread); the transforms'
// blocks 8 tiles and 8 capsule types: shapes on and one off those, the
// layer-sized problem, and the 3x3 stride-1 odd shapes.
TEST_CASE("cuda capsconv: the Winograd forms on 3x3, stride-1 shapes", "[cuda][capsconv][winograd]") {
    std::vector<CapsConvShape> shapes;
    for (const auto &s : cuda_conv_shapes()) {
        if (s.kernel_h == 3 && s.kernel_w == 3 && s.stride == 1) shapes.push_back(s);
    }
    //                n   H   W  ci kh kw co s  p
    shapes.push_back({1, 16, 16, 3, 3, 3, 8, 1, 1});    // 16 x 16: two F(2x2) blocks
    shapes.push_back({2, 34, 32, 5, 3, 3, 9, 1, 0});    // 32 x 30
    shapes.push_back({1, 35, 33, 2, 3, 3, 3, 1, 2});    // 37 x 35
    shapes.push_back({8, 32, 32, 32, 3, 3, 32, 1, 1});  // the layer-sized problem
    std::vector<std::string> names;
    for (const auto &name : halide_cuda_implementations("capsconv")) {
        if (is_winograd(name)) names.push_back(name);
    }
    REQUIRE(!names.empty());
    cudaStream_t stream = nullptr;
    cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (const auto &name : names) {
        for (const auto &shape : shapes) check_capsconv(shape, cuda_options(name), false);
        check_on_device({2, 7, 5, 3, 3, 3, 2, 1, 1}, name, false, nullptr);
        check_on_device({1, 33, 31, 5, 3, 3, 3, 1, 1}, name, false, stream);
        CapsConvProblem five({1, 9, 9, 2, 5, 5, 1, 1, 0});
        const Status s =
            capsconv(host_view(five.input, five.input_shape()), host_view(five.filter, five.filter_shape()),
                     host_view(five.output, five.output_shape()), five.params(), cuda_options(name));
        INFO(name << ": " << s.message);
        REQUIRE(s.code == StatusCode::unsupported_shape);
    }
    cuda_ok(cudaStreamDestroy(stream));
}

TEST_CASE("cuda capsconv: bad arguments on the cuda device give exact statuses", "[cuda][capsconv]") {
    CapsConvProblem p({1, 6, 5, 3, 3, 3, 2, 2, 1});
    auto in = host_view(p.input, p.input_shape()), k = host_view(p.filter, p.filter_shape()),
         out = host_view(p.output, p.output_shape());
    const Status unknown = capsconv(in, k, out, p.params(), cuda_options("cpu_co4"));
    REQUIRE(unknown.code == StatusCode::unknown_implementation);
    // A device tensor mixed with host ones on the cpu device is refused.
    DeviceTensor device_out(p.output, true);
    Options cpu;
    cpu.device = Device::cpu;
    REQUIRE(capsconv(in, k, device_out.view(p.output_shape()), p.params(), cpu).code == StatusCode::wrong_memory_space);
}

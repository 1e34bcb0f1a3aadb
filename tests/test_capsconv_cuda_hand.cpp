// The capsule convolution's hand-written CUDA kernels (cuda_vaidya_*) and
// library peers (cudnn, im2col_cublas) against the float64 reference: fresh
// random inputs, NaN-poisoned outputs, odd sizes, stride 2, padding, n > 1,
// co > 1, k = 1 and 5, a filter larger than one shared-memory chunk; host
// tensors (copied by the runtime) and device tensors on the caller's stream,
// aligned and not. Part of halcaps_cuda_tests, whose main() reports "skipped"
// without a CUDA device.
#include <cuda_runtime.h>

#include <algorithm>

#include "capsconv_checks.h"
#include "cuda_test_support.h"

using namespace halcaps;
using namespace halcaps::testing;

namespace {

// The hand-written and peer names this build must hold (cudnn only when the
// build found cuDNN, which the list tells).
const std::vector<std::string> kRequired = {"cuda_vaidya_b", "cuda_vaidya_i1", "cuda_vaidya_i2", "cuda_vaidya_i3",
                                            "im2col_cublas"};

std::vector<std::string> hand_implementations() {
    const auto all = implementations_for("capsconv", Device::cuda);
    for (const auto &name : kRequired) {
        INFO("missing capsconv implementation " << name);
        REQUIRE(std::find(all.begin(), all.end(), name) != all.end());
    }
    std::vector<std::string> names = kRequired;
    if (std::find(all.begin(), all.end(), "cudnn") != all.end()) names.push_back("cudnn");
    return names;
}

void check_on_device(const reference::CapsConvShape &shape, const std::string &implementation, cudaStream_t stream,
                     int offset) {
    CapsConvProblem p(shape);
    INFO("seed " << seed() << ", shape " << shape_name(shape) << ", implementation " << implementation
                 << ", device tensors, offset " << offset);
    DeviceTensor input(p.input, false, offset), filter(p.filter, false, offset), output(p.output, true, offset);
    const Status s = capsconv(input.view(p.input_shape()), filter.view(p.filter_shape()), output.view(p.output_shape()),
                              p.params(), cuda_options(implementation, stream));
    INFO(s.message);
    REQUIRE(s.ok());
    cuda_ok(cudaStreamSynchronize(stream));
    require_matches("output", output.download(), reference::capsconv_f64(p.s, p.input.data(), p.filter.data()),
                    shape.kernel_h * shape.kernel_w * shape.in_caps * 4);
}

// n, H, W, ci, kh, kw, co, stride, pad
std::vector<reference::CapsConvShape> odd_capsconv_shapes() {
    return {
        {1, 1, 1, 1, 1, 1, 1, 1, 0},    // one pixel, one tap
        {1, 13, 11, 3, 5, 5, 1, 1, 0},  // the seed problem's k, ci, co on a small odd image
        {2, 9, 7, 3, 3, 3, 2, 2, 1},    // stride 2, pad 1, n > 1, co > 1
        {3, 5, 4, 2, 1, 1, 3, 1, 0},    // k = 1
        {2, 7, 9, 2, 5, 5, 3, 1, 2},    // k = 5, pad 2
        {1, 3, 3, 1, 3, 3, 1, 1, 0},    // a single output pixel
        {3, 17, 15, 2, 3, 3, 2, 1, 1},  // 765 pixels: 11 full blocks of 64 and a partial one
        {2, 8, 8, 3, 3, 3, 1, 3, 2},    // stride 3 with pad 2 (taps in the padding on both sides)
        {1, 6, 6, 33, 4, 4, 2, 1, 0},   // 528 taps: more than one 512-tap filter chunk
        {2, 5, 5, 1, 5, 5, 7, 2, 2},    // kh = H, odd co
        {1, 2, 9, 2, 1, 3, 2, 1, 0},    // non-square filter and image
    };
}

}  // namespace

TEST_CASE("cuda capsconv: hand kernels and peers on odd shapes, host tensors", "[cuda][capsconv_hand]") {
    for (const auto &name : hand_implementations()) {
        for (const auto &shape : odd_capsconv_shapes()) check_capsconv(shape, cuda_options(name), false);
    }
}

TEST_CASE("cuda capsconv: the seed problem and a layer-like shape", "[cuda][capsconv_hand]") {
    for (const auto &name : hand_implementations()) {
        check_capsconv({1, 128, 128, 3, 5, 5, 1, 1, 0}, cuda_options(name), false);
        check_capsconv({2, 16, 16, 32, 3, 3, 8, 1, 1}, cuda_options(name), false);
        check_capsconv({2, 14, 14, 8, 3, 3, 4, 2, 1}, cuda_options(name), false);
    }
}

TEST_CASE("cuda capsconv: device tensors on the caller's stream, aligned and unaligned", "[cuda][capsconv_hand]") {
    cudaStream_t stream = nullptr;
    cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (const auto &name : hand_implementations()) {
        for (int offset : {0, 1}) {
            check_on_device({2, 9, 7, 3, 3, 3, 2, 2, 1}, name, stream, offset);
            check_on_device({1, 13, 11, 3, 5, 5, 1, 1, 0}, name, stream, offset);
            check_on_device({1, 6, 6, 33, 4, 4, 2, 1, 0}, name, nullptr, offset);
        }
    }
    cuda_ok(cudaStreamDestroy(stream));
}

TEST_CASE("cuda capsconv: repeated calls reuse cached state and stay correct", "[cuda][capsconv_hand]") {
    // cudnn caches a plan per shape and a workspace per stream; alternate shapes
    // so that a stale plan or a too-small workspace would show.
    for (const auto &name : hand_implementations()) {
        for (int round = 0; round < 2; round++) {
            check_capsconv({2, 9, 7, 3, 3, 3, 2, 2, 1}, cuda_options(name), false);
            check_capsconv({1, 13, 11, 3, 5, 5, 1, 1, 0}, cuda_options(name), false);
        }
    }
}

TEST_CASE("cuda capsconv: bad parameters are refused before any kernel", "[cuda][capsconv_hand]") {
    CapsConvProblem p({1, 5, 5, 2, 3, 3, 1, 1, 0});
    for (const auto &name : hand_implementations()) {
        ConvParams bad{0, 0};
        Status s = capsconv(host_view(p.input, p.input_shape()), host_view(p.filter, p.filter_shape()),
                            host_view(p.output, p.output_shape()), bad, cuda_options(name));
        REQUIRE(s.code == StatusCode::bad_parameter);
        bad = {1, -1};
        s = capsconv(host_view(p.input, p.input_shape()), host_view(p.filter, p.filter_shape()),
                     host_view(p.output, p.output_shape()), bad, cuda_options(name));
        REQUIRE(s.code == StatusCode::bad_parameter);
    }
    const Status s = capsconv(host_view(p.input, p.input_shape()), host_view(p.filter, p.filter_shape()),
                              host_view(p.output, p.output_shape()), p.params(), cuda_options("cuda_vaidya_i9"));
    REQUIRE(s.code == StatusCode::unknown_implementation);
}

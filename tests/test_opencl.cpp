// Every Halide GPU schedule compiled for OpenCL (the CUDA kernels' twins,
// cmake/HalcapsKernels.cmake), run on the OpenCL device (PoCL on the CPU in
// CI) against the float64 reference, with NaN-poisoned outputs: prediction,
// routing, the DigitCaps layer and the capsule convolution, forward and
// backward. What this checks and what it cannot: README, "The OpenCL build".
// Without an OpenCL device the whole program reports "skipped" to ctest
// (exit code 77, SKIP_RETURN_CODE), never "passed".
#define CATCH_CONFIG_RUNNER
#include <algorithm>
#include <cstdio>
#include <set>

#include "capsconv_checks.h"
#include "digitcaps_checks.h"
#include "nonfinite_checks.h"
#include "test_support.h"

using namespace halcaps;
using namespace halcaps::testing;
using reference::CapsConvShape;

namespace {

Options opencl_options(const std::string &implementation = "") {
    return device_options(Device::opencl, implementation);
}

std::vector<std::string> opencl_implementations(const std::string &op) {
    auto names = implementations_for(op, Device::opencl);
    REQUIRE(!names.empty());
    return names;
}

void require_status(const Status &s, StatusCode code, const std::string &message_part) {
    INFO("got " << status_code_name(s.code) << ": " << s.message);
    REQUIRE(s.code == code);
    REQUIRE(s.message.find(message_part) != std::string::npos);
}

// The iteration counts built for the routing ops' unrolled kernels on
// OpenCL (1, 3 and 5 for the fused forwards; 3, or 1 and 3, for the rest);
// not "steps", which takes every count.
std::vector<int> built_routing_iterations() {
    std::set<int> counts;
    for (const auto &info : list_implementations()) {
        if (info.device != Device::opencl || info.implementation == "steps") continue;
        if (info.op == "route" || info.op == "digitcaps" || info.op == "route_backward" ||
            info.op == "digitcaps_backward") {
            counts.insert(info.iterations.begin(), info.iterations.end());
        }
    }
    REQUIRE(!counts.empty());
    return {counts.begin(), counts.end()};
}

// The capsule convolution's shapes: strides 1 to 3, pads 0 to 3, filters
// 1x1 to 11x3, extents one off the schedules' tiles (pixel blocks of 4 and
// 8, 16-byte pose rows, 32-wide thread tiles). The CUDA tests' list.
std::vector<CapsConvShape> conv_shapes() {
    //       n   H   W  ci kh kw co s  p
    return {{1, 1, 1, 1, 1, 1, 1, 1, 0},   {1, 3, 3, 1, 3, 3, 1, 1, 0},   {2, 7, 5, 3, 3, 3, 2, 1, 1},
            {1, 9, 9, 2, 3, 3, 3, 2, 0},   {3, 8, 11, 1, 2, 3, 5, 2, 1},  {1, 13, 7, 5, 5, 5, 1, 1, 2},
            {2, 5, 9, 4, 1, 1, 4, 1, 0},   {1, 6, 6, 3, 1, 1, 7, 2, 0},   {1, 11, 13, 2, 5, 5, 3, 3, 1},
            {4, 4, 4, 9, 3, 3, 1, 1, 1},   {1, 2, 2, 1, 3, 3, 2, 1, 2},   {1, 17, 3, 1, 4, 2, 2, 2, 1},
            {1, 33, 31, 5, 3, 3, 3, 1, 1}, {2, 9, 35, 4, 3, 3, 4, 1, 0},  {1, 17, 15, 8, 3, 3, 5, 1, 1},
            {3, 10, 10, 7, 5, 5, 9, 2, 2}, {1, 131, 3, 1, 3, 1, 1, 1, 0}, {2, 65, 7, 2, 1, 3, 1, 1, 1},
            {1, 23, 29, 3, 5, 5, 2, 3, 2}, {1, 14, 12, 2, 11, 3, 2, 1, 3}};
}

bool is_winograd(const std::string &implementation) { return implementation.rfind("winograd", 0) == 0; }

// staged_rows refuses shapes whose staged tiles pass 48 KB of local memory
// (specialize_fail, before any device work): as on CUDA.
bool staged_rows_refuses(const std::string &implementation, const CapsConvShape &shape) {
    if (implementation != "staged_rows") return false;
    const int64_t s = shape.stride, kw = shape.kernel_w, kh = shape.kernel_h;
    const int64_t tile_pixels = (7 * s + kw) * (3 * s + kh);
    return 64 * 4 * (tile_pixels + kw * kh) > 48 * 1024;
}

bool has_backward(const std::string &implementation) {
    const auto names = implementations_for("capsconv_backward", Device::opencl);
    return std::find(names.begin(), names.end(), implementation) != names.end();
}

}  // namespace

TEST_CASE("opencl: every CUDA Halide schedule of every operator is listed for opencl", "[opencl][listed]") {
    // (tests/test_opencl_registry.cpp checks the kernel table itself, and the exclusions)
    for (const char *op : {"predict", "predict_backward", "route", "route_backward", "digitcaps", "digitcaps_backward",
                           "digitcaps_with_s", "digitcaps_backward_with_s", "capsconv", "capsconv_backward"}) {
        INFO(op);
        REQUIRE(!implementations_for(op, Device::opencl).empty());
    }
    const auto layer = implementations_for("digitcaps", Device::opencl);
    REQUIRE(std::find(layer.begin(), layer.end(), "fused_split_all_vectors") != layer.end());
    // The hand-written CUDA kernels are CUDA's alone.
    for (const auto &info : list_implementations()) {
        if (info.device == Device::opencl) REQUIRE(info.implementation.rfind("cuda_", 0) != 0);
    }
}

TEST_CASE("opencl: prediction, every schedule, blog grid", "[opencl][predict]") {
    for (const auto &name : opencl_implementations("predict")) {
        for (const auto &shape : blog_grid_shapes()) check_predict(shape, opencl_options(name));
    }
    for (const auto &name : opencl_implementations("predict_backward")) {
        for (const auto &shape : blog_grid_shapes()) check_predict_backward(shape, opencl_options(name));
    }
}

// odd_shapes() (extents 1, 3, 7, 127, primes, one off the 32-wide, 16-wide
// and 8-wide tiles, 1025 capsules past a 1024-thread block), then the
// corners of staged's and capsule_runs' fast paths (the CUDA tests' shapes)
// and batch_walk's (batch a multiple of 128, in_dim 8, out_dim 16).
TEST_CASE("opencl: prediction, every schedule, odd sizes and the fast paths' corners", "[opencl][predict_odd]") {
    // The forward's fast paths' corners (out_caps x out_dim 1024 is past the
    // fused backward's block, which refuses it: the backward runs odd_shapes()).
    std::vector<reference::PredictShape> forward_shapes = odd_shapes();
    for (const reference::PredictShape &s : std::vector<reference::PredictShape>{{37, 5, 4, 3, 6},
                                                                                 {130, 37, 8, 11, 16},
                                                                                 {33, 7, 16, 3, 10},
                                                                                 {3, 1, 8, 1, 2},
                                                                                 {2, 2, 8, 1, 2},
                                                                                 {6, 4, 8, 64, 16},
                                                                                 {34, 6, 16, 5, 4},
                                                                                 {770, 2, 16, 3, 2},
                                                                                 {128, 5, 8, 7, 16},
                                                                                 {256, 3, 8, 33, 16}}) {
        forward_shapes.push_back(s);
    }
    for (const auto &name : opencl_implementations("predict")) {
        for (const auto &shape : forward_shapes) check_predict(shape, opencl_options(name));
    }
    for (const auto &name : opencl_implementations("predict_backward")) {
        for (const auto &shape : odd_shapes()) check_predict_backward(shape, opencl_options(name));
    }
    // No implementation named: CUDA's defaults and their fast-path choices.
    for (const auto &shape : forward_shapes) check_predict(shape, opencl_options());
    for (const auto &shape : odd_shapes()) check_predict_backward(shape, opencl_options());
}

// The blog's {4, 8} grid for every extent is 32 shapes; PoCL's compilation
// of each kernel (0.3-9 s, once per kernel with its work-group
// specialisation off, tests/CMakeLists.txt), not the runs, is what these
// tests cost on a fresh build (a rerun from build/pocl_cache takes seconds). So a
// quarter fraction of the grid: the 8 shapes whose out_caps bit is the
// parity of batch's and in_caps', and out_dim's that of in_caps' and
// in_dim's (every extent at both values, every pair of batch, in_caps and
// in_dim at all four combinations), b0 alternating.
TEST_CASE("opencl: routing and the layer, every schedule, blog grid (a quarter fraction)", "[opencl][routing_grid]") {
    int n = 0;
    for (const auto &g : blog_grid_shapes()) {
        const bool b = g.batch == 8, i = g.in_caps == 8, k = g.in_dim == 8;
        if ((g.out_caps == 8) != (b != i) || (g.out_dim == 8) != (i != k)) continue;
        check_all({g.batch, g.in_caps, g.in_dim, g.out_caps, g.out_dim}, 3, n++ % 2 == 0, true, Device::opencl, false);
    }
    REQUIRE(n == 8);
}

// Batch 1, 7, 15, 17, 33, 40 and in_caps 1, 13, 31, 33, 45, 65 straddle the
// fused variants' batch tiles (8, 32) and capsule chunks (8, 10, 16),
// out_dim 13, 15, 17, 31, 33 their e threads; fused_split_all_vectors runs
// at in_dim 8 and out_dim 16 (and refuses the rest). Each shape at 3
// iterations, b0 alternating; then every iteration count built with b0
// given and absent, on a shape off every tile. The steps run in
// routing_steps (at every count the same kernels), not here or in
// routing_grid.
TEST_CASE("opencl: routing and the layer, every schedule, odd sizes, every iteration count, b0 given and absent",
          "[opencl][routing_odd]") {
    const std::vector<DigitCapsShape> shapes = {{1, 1, 1, 1, 1},     {3, 7, 1, 11, 13},   {7, 13, 9, 7, 15},
                                                {15, 31, 8, 10, 17}, {17, 33, 8, 10, 16}, {33, 65, 8, 10, 16},
                                                {2, 3, 8, 1, 33},    {5, 17, 3, 2, 31},   {40, 45, 8, 7, 16}};
    int n = 0;
    for (const auto &s : shapes) check_all(s, 3, n++ % 2 == 0, true, Device::opencl, false);
    for (int iterations : built_routing_iterations()) {
        for (bool with_b0 : {true, false}) {
            check_all({7, 13, 9, 7, 15}, iterations, with_b0, true, Device::opencl, false);
        }
    }
}

// The per-iteration kernels ("steps", the default at counts no unrolled
// kernel is built for) at 2, 4 and 7 iterations on shapes off their
// 128-thread rows, b0 given and absent: the only OpenCL rows at those
// counts, so check_all runs them alone; then the defaults at 4.
TEST_CASE("opencl: routing and the layer at counts with no unrolled kernel, by the steps", "[opencl][routing_steps]") {
    for (int iterations : {2, 4, 7}) {
        for (const std::string op : {"route", "route_backward", "digitcaps", "digitcaps_backward", "digitcaps_with_s",
                                     "digitcaps_backward_with_s"}) {
            INFO(op << ", " << iterations << " iterations");
            REQUIRE(implementations(op, iterations, Device::opencl) == std::vector<std::string>{"steps"});
        }
    }
    const std::vector<DigitCapsShape> shapes = {{1, 1, 1, 1, 1}, {3, 7, 5, 4, 9}, {5, 130, 9, 11, 13}};
    int n = 0;
    for (const auto &s : shapes) {
        for (int iterations : {2, 4, 7}) check_all(s, iterations, n++ % 2 == 0, true, Device::opencl);
    }
    const DigitCapsShape s{3, 7, 5, 4, 9};
    check_squash_values(Device::opencl);  // what the forward steps end with
    check_digitcaps_forward("", true, s, 4, true, Device::opencl);
    check_digitcaps_backward_with_s("", s, 4, false, Device::opencl);
}

TEST_CASE("opencl: routing and the layer, the defaults and the backward on hard inputs", "[opencl][routing_default]") {
    // No implementation named: CUDA's defaults, their fallbacks included
    // (fused_split_all_vectors refuses in_dim 9 and hands the call to fused).
    for (const DigitCapsShape &s :
         std::vector<DigitCapsShape>{{3, 5, 4, 3, 8}, {17, 33, 8, 10, 16}, {5, 7, 9, 3, 16}}) {
        for (bool with_b0 : {true, false}) {
            INFO("seed " << seed() << ", " << name(s, 3, with_b0));
            DigitCapsProblem p(s);
            const Status st =
                digitcaps(p.u_v(), p.W_v(), with_b0 ? p.b0_v() : TensorView{}, p.v_v(), 3, opencl_options());
            INFO(st.message);
            REQUIRE(st.ok());
            require_forward_outputs(p, with_b0, 3, nullptr, nullptr);
            check_digitcaps_backward("", s, 3, with_b0, Device::opencl);
            check_route_backward("", s, 3, with_b0, Device::opencl);
        }
    }
    check_backward_on_hard_inputs(Device::opencl);
}

TEST_CASE("opencl: capsule convolution, every schedule, strides 1 to 3 with padding", "[opencl][capsconv]") {
    for (const auto &name : opencl_implementations("capsconv")) {
        if (is_winograd(name)) continue;
        for (const auto &shape : conv_shapes()) {
            if (staged_rows_refuses(name, shape)) {
                CapsConvProblem p(shape);
                const Status s = capsconv(host_view(p.input, p.input_shape()), host_view(p.filter, p.filter_shape()),
                                          host_view(p.output, p.output_shape()), p.params(), opencl_options(name));
                require_status(s, StatusCode::unsupported_shape, "48 KB of shared memory");
                continue;
            }
            check_capsconv(shape, opencl_options(name), has_backward(name));
        }
    }
    // Backward-only names, and the defaults (no implementation named).
    for (const auto &name : opencl_implementations("capsconv_backward")) {
        for (const auto &shape : conv_shapes()) {
            CapsConvProblem p(shape);
            INFO("seed " << seed() << ", shape " << shape_name(shape) << ", implementation " << name);
            check_capsconv_backward(p, opencl_options(name));
        }
    }
    for (const auto &shape : conv_shapes()) check_capsconv(shape, opencl_options());
}

TEST_CASE("opencl: capsule convolution, the Winograd forms on 3x3 stride-1 shapes", "[opencl][capsconv]") {
    std::vector<CapsConvShape> shapes;
    for (const auto &s : conv_shapes()) {
        if (s.kernel_h == 3 && s.kernel_w == 3 && s.stride == 1) shapes.push_back(s);
    }
    //                n   H   W  ci kh kw co s  p
    shapes.push_back({1, 16, 16, 3, 3, 3, 8, 1, 1});  // 16 x 16: two F(2x2) blocks
    shapes.push_back({2, 34, 32, 5, 3, 3, 9, 1, 0});  // 32 x 30
    shapes.push_back({1, 35, 33, 2, 3, 3, 3, 1, 2});  // 37 x 35
    int winograd = 0;
    for (const auto &name : opencl_implementations("capsconv")) {
        if (!is_winograd(name)) continue;
        winograd++;
        for (const auto &shape : shapes) check_capsconv(shape, opencl_options(name), false);
        CapsConvProblem five({1, 9, 9, 2, 5, 5, 1, 1, 0});
        const Status s =
            capsconv(host_view(five.input, five.input_shape()), host_view(five.filter, five.filter_shape()),
                     host_view(five.output, five.output_shape()), five.params(), opencl_options(name));
        require_status(s, StatusCode::unsupported_shape, "3x3 filters at stride 1 only");
    }
    REQUIRE(winograd >= 1);  // winograd4x4_staged
}

// The generator drops 31 in-kernel assertions in 15 OpenCL kernels
// ("Ignoring assertion inside OpenCL kernel"; on CUDA they trap). Each is a
// bound_extent or bound_storage check of a tile's region (Halide's
// explicit_bounds_too_small and storage_bound_too_small), and each holds for
// every input the argument checks let through, so those checks are the
// runtime checks before the launch; what they need (README, "The OpenCL
// build"):
// - a vector's or row's extent, min(c q + c, N) - c <= c q (c = 2 or 4): true
//   for every N (predict's batch_walk, batch_rows and capsule_runs, the
//   `vectors` grad_W, the fused backward's grad_u quads, the layer
//   backward's rows_vectors, with s too, capsconv's tuned_co4);
// - the per-thread k row of the prediction's tiled schedules (tuned,
//   batch_vectors, and the layer backward's rows_predict, with s too,
//   through them): in_dim >= 1, else bad_extent;
// - the fused backward's g tile (33 batch rows) and W partials (32): in_dim
//   >= 1 and every tensor's batch extent the same, else bad_extent and
//   extent_mismatch.
// This test is those inputs on the opencl device: refused with those
// statuses, before any kernel runs.
// NaN, +inf and -inf at one element of each input of each operator, by
// every OpenCL schedule (nonfinite_checks.h, digitcaps_checks.h).
TEST_CASE("opencl: NaN, +inf and -inf in each input of each operator", "[opencl][nonfinite]") {
    check_nonfinite_predict(Device::opencl);
    check_nonfinite_capsconv(Device::opencl);
    check_nonfinite_issue_cases(Device::opencl);
    check_nonfinite_squash(Device::opencl);
    for (int iterations : {1, 3}) {
        check_nonfinite_route(Device::opencl, iterations);
        check_nonfinite_layer(Device::opencl, iterations);
    }
}

TEST_CASE("opencl: the inputs the dropped in-kernel assertions guard against are refused before the launch",
          "[opencl][errors]") {
    PredictProblem p({4, 3, 8, 5, 16});
    TensorView u = host_view(p.u, p.u_shape()), W = host_view(p.W, p.W_shape()), g = host_view(p.g, p.u_hat_shape()),
               u_hat = host_view(p.u_hat, p.u_hat_shape()), grad_u = host_view(p.grad_u, p.u_shape()),
               grad_W = host_view(p.grad_W, p.W_shape());
    for (const char *name : {"tuned", "batch_vectors", "batch_walk", "batch_rows", "capsule_runs"}) {
        INFO(name);
        TensorView u0 = u, W0 = W;
        u0.shape[2] = 0;
        W0.shape[3] = 0;
        require_status(predict(u0, W0, u_hat, opencl_options(name)), StatusCode::bad_extent,
                       "u extent 2 (in_dim) is 0");
    }
    for (const char *name : {"fused", "vectors"}) {
        INFO(name);
        TensorView u0 = u, grad_u0 = grad_u, W0 = W, grad_W0 = grad_W;
        u0.shape[2] = grad_u0.shape[2] = W0.shape[3] = grad_W0.shape[3] = 0;
        require_status(predict_backward(g, u0, W0, grad_u0, grad_W0, opencl_options(name)), StatusCode::bad_extent,
                       "u extent 2 (in_dim) is 0");
        TensorView grad_u_short = grad_u;
        grad_u_short.shape[0] = 3;
        require_status(predict_backward(g, u, W, grad_u_short, grad_W, opencl_options(name)),
                       StatusCode::extent_mismatch, "grad_u extent 0 (batch) is 3");
    }
    DigitCapsProblem d({4, 3, 8, 5, 16});
    for (const char *name : {"rows_predict", "rows_vectors"}) {
        INFO(name);
        TensorView u0 = d.u_v(), W0 = d.W_v(), grad_u0 = d.grad_u_v(), grad_W0 = d.grad_W_v();
        u0.shape[2] = W0.shape[3] = grad_u0.shape[2] = grad_W0.shape[3] = 0;
        require_status(digitcaps_backward(u0, W0, TensorView{}, d.grad_v_v(), grad_u0, grad_W0, TensorView{}, 3,
                                          opencl_options(name)),
                       StatusCode::bad_extent, "u extent 2 (in_dim) is 0");
    }
    CapsConvProblem c({1, 6, 5, 3, 3, 3, 2, 2, 1});
    TensorView out0 = host_view(c.output, c.output_shape());
    out0.shape[3] = 0;
    require_status(capsconv(host_view(c.input, c.input_shape()), host_view(c.filter, c.filter_shape()), out0,
                            c.params(), opencl_options("tuned_co4")),
                   StatusCode::bad_extent, "output extent 3 (out_caps) is 0");
}

TEST_CASE("opencl: bad arguments and names on the opencl device give exact statuses", "[opencl][errors]") {
    PredictProblem p({2, 3, 4, 5, 6});
    TensorView u = host_view(p.u, p.u_shape()), W = host_view(p.W, p.W_shape()),
               u_hat = host_view(p.u_hat, p.u_hat_shape());
    // CPU-only and hand-written CUDA names are not OpenCL implementations.
    require_status(predict(u, W, u_hat, opencl_options("cpu")), StatusCode::unknown_implementation,
                   "no implementation named 'cpu' for device opencl; available: ");
    require_status(predict(u, W, u_hat, opencl_options("cuda_blog_naive")), StatusCode::unknown_implementation,
                   "for device opencl");
    // Tensors in CUDA memory are refused: the opencl device takes host tensors.
    TensorView on_cuda = u_hat;
    on_cuda.space = MemorySpace::cuda;
    TensorView u_cuda = u, W_cuda = W;
    u_cuda.space = W_cuda.space = MemorySpace::cuda;
    require_status(predict(u_cuda, W_cuda, on_cuda, opencl_options()), StatusCode::wrong_memory_space,
                   "u is in cuda memory but the opencl device was asked for");
    require_status(predict(u, W, on_cuda, opencl_options()), StatusCode::wrong_memory_space,
                   "u_hat is in cuda memory but u is in host memory");
    // Routing: an iteration count not built.
    DigitCapsProblem d({3, 5, 4, 3, 8});
    require_status(route(d.u_hat_v(), TensorView{}, d.v_v(), 2, opencl_options("fused")),
                   StatusCode::unsupported_iterations, "is built for iterations 1, 3, 5, not 2");
    require_status(route(d.u_hat_v(), TensorView{}, d.v_v(), 0, opencl_options()), StatusCode::unsupported_iterations,
                   "iterations is 0");
    // The capsule convolution's parameters.
    CapsConvProblem c({1, 6, 5, 3, 3, 3, 2, 2, 1});
    ConvParams bad = c.params();
    bad.stride = 0;
    require_status(capsconv(host_view(c.input, c.input_shape()), host_view(c.filter, c.filter_shape()),
                            host_view(c.output, c.output_shape()), bad, opencl_options()),
                   StatusCode::bad_parameter, "stride is 0");
}

int main(int argc, char **argv) {
    if (!opencl_device_available()) {
        std::printf("SKIPPED: no OpenCL device is present; the OpenCL tests did not run\n");
        return 77;
    }
    std::printf("OpenCL device: %s\n", opencl_device_name().c_str());
    return Catch::Session().run(argc, argv);
}

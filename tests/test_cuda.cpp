// Every CUDA implementation against the float64 reference, with host tensors
// (copied by the runtime) and with device tensors on the caller's stream.
// Without a CUDA device the whole program reports "skipped" to ctest (exit
// code 77, SKIP_RETURN_CODE), never "passed".
#define CATCH_CONFIG_RUNNER
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <utility>

#include "cuda_test_support.h"
#include "digitcaps_checks.h"
#include "test_support.h"

using namespace halcaps;
using namespace halcaps::testing;

namespace {

// Every cuda implementation of an op ("predict" or "predict_backward") in this build.
std::vector<std::string> cuda_implementations(const std::string &op) {
    auto names = implementations_for(op, Device::cuda);
    REQUIRE(!names.empty());
    return names;
}

// predict or predict_backward (op) on device tensors, queued on `stream`.
void check_on_device(const std::string &op, const reference::PredictShape &shape, const std::string &implementation,
                     cudaStream_t stream) {
    PredictProblem p(shape);
    INFO("seed " << seed() << ", shape " << shape_name(shape) << ", " << op << " implementation " << implementation);
    DeviceTensor u(p.u, false), W(p.W, false), g(p.g, false);
    DeviceTensor u_hat(p.u_hat, true), grad_u(p.grad_u, true), grad_W(p.grad_W, true);
    const Options options = cuda_options(implementation, stream);

    if (op == "predict") {
        const Status s = predict(u.view(p.u_shape()), W.view(p.W_shape()), u_hat.view(p.u_hat_shape()), options);
        INFO(s.message);
        REQUIRE(s.ok());
        cuda_ok(cudaStreamSynchronize(stream));
        require_matches("u_hat", u_hat.download(), reference::predict_f64(p.s, p.u.data(), p.W.data()), shape.in_dim);
        return;
    }
    const Status s = predict_backward(g.view(p.u_hat_shape()), u.view(p.u_shape()), W.view(p.W_shape()),
                                      grad_u.view(p.u_shape()), grad_W.view(p.W_shape()), options);
    INFO(s.message);
    REQUIRE(s.ok());
    cuda_ok(cudaStreamSynchronize(stream));
    require_matches("grad_u", grad_u.download(), reference::predict_grad_input_f64(p.s, p.g.data(), p.W.data()),
                    shape.out_caps * shape.out_dim);
    require_matches("grad_W", grad_W.download(), reference::predict_grad_weight_f64(p.s, p.g.data(), p.u.data()),
                    shape.batch);
}

}  // namespace

// Outside the fast paths of capsule_runs and batch_walk (a batch of 5, an
// odd in_caps) the forward's default on CUDA is batch_vectors, whose k loop
// is specialised for in_dim 8 and runs guarded tiles of 8 otherwise: it
// must run, and be right, at in_dim 8, 16 and 9. At in_dim 16 with an even
// in_caps and a batch from 128 on it is capsule_runs (its in_dim-16
// kernel), and batch_vectors again below 128 (batch 64) and where
// capsule_runs' tile would pass 48 KB (batch 770).
// (Which schedule ran is not visible here: the Halide forwards sum over k in
// the same order, so their results can be bitwise equal.)
TEST_CASE("cuda: predict's default off batch_walk's shapes is right at in_dim 8, 16 and 9", "[cuda][default]") {
    for (const reference::PredictShape &shape : std::vector<reference::PredictShape>{{5, 7, 8, 3, 16},
                                                                                     {5, 7, 16, 3, 16},
                                                                                     {5, 7, 9, 3, 16},
                                                                                     {128, 6, 16, 10, 16},
                                                                                     {64, 6, 16, 10, 16},
                                                                                     {770, 6, 16, 10, 16}}) {
        const int64_t K = shape.in_dim;
        PredictProblem p(shape);
        INFO("seed " << seed() << ", shape " << shape_name(shape));
        Options o;
        o.device = Device::cuda;
        const Status s =
            predict(host_view(p.u, p.u_shape()), host_view(p.W, p.W_shape()), host_view(p.u_hat, p.u_hat_shape()), o);
        INFO(s.message);
        REQUIRE(s.ok());
        require_matches("u_hat", p.u_hat, reference::predict_f64(p.s, p.u.data(), p.W.data()), K);
    }
}

// At batch_walk's shapes (out_dim 16, in_dim 8, a batch that is a multiple
// of 128) the default is capsule_runs (an even in_caps; past out_caps x
// out_dim 256 only from batch 256 on), else batch_rows (out_caps 8 to 32) or
// batch_walk (other out_caps) when u_hat starts on an 8-byte boundary, and
// batch_vectors otherwise: right either way. Each asked for by name with
// such a host u_hat is refused with misaligned_pointer, naming u_hat.
TEST_CASE("cuda: predict's default at batch_walk's shapes, with u_hat on and off an 8-byte boundary",
          "[cuda][default]") {
    struct Case {
        int64_t batch, in_caps, out_caps;
        const char *fast_kernel;
    };
    for (const auto &[batch, in_caps, out_caps, fast_kernel] :
         {Case{128, 5, 3, "batch_walk"}, Case{128, 5, 10, "batch_rows"}, Case{128, 6, 10, "capsule_runs"},
          Case{128, 6, 32, "batch_rows"}, Case{256, 6, 24, "capsule_runs"}}) {
        const reference::PredictShape shape{batch, in_caps, 8, out_caps, 16};
        PredictProblem p(shape);
        INFO("seed " << seed() << ", shape " << shape_name(shape) << ", fast kernel " << fast_kernel);
        const std::vector<double> expected = reference::predict_f64(p.s, p.u.data(), p.W.data());
        std::vector<float> storage(p.u_hat.size() + 4);
        float *aligned = first_on_16_byte_boundary(storage);
        float *off_boundary = aligned + 1;
        for (float *out : {aligned, off_boundary}) {
            INFO("u_hat at byte offset " << reinterpret_cast<std::uintptr_t>(out) % 8 << " from an 8-byte boundary");
            std::fill(out, out + p.u_hat.size(), std::numeric_limits<float>::quiet_NaN());
            TensorView u_hat = host_view(p.u_hat, p.u_hat_shape());
            u_hat.data = out;
            Options o;
            o.device = Device::cuda;
            const Status s = predict(host_view(p.u, p.u_shape()), host_view(p.W, p.W_shape()), u_hat, o);
            INFO(s.message);
            REQUIRE(s.ok());
            require_matches("u_hat", std::vector<float>(out, out + p.u_hat.size()), expected, shape.in_dim);
            if (out == off_boundary) {
                o.implementation = fast_kernel;
                const Status refused = predict(host_view(p.u, p.u_shape()), host_view(p.W, p.W_shape()), u_hat, o);
                REQUIRE(refused.code == StatusCode::misaligned_pointer);
                REQUIRE(refused.message.find("u_hat") != std::string::npos);
            }
        }
    }
}

// The gradients' default on CUDA is `vectors` where its fast path applies
// (out_dim 16, in_dim 8 or 16, every tensor on a 16-byte boundary) and
// `tuned` otherwise: right either way, and the one expected (bitwise equal to
// it named), at in_dim 8 and 16 (the two fast kernels), with g on and off a
// 16-byte boundary. `vectors` asked for by name with such a host g is refused
// with misaligned_pointer, naming g.
TEST_CASE("cuda: predict_backward's default at in_dim 8 and 16, with g on and off a 16-byte boundary",
          "[cuda][default]") {
    for (int64_t K : {8, 16}) {
        const reference::PredictShape shape{6, 5, K, 3, 16};
        PredictProblem p(shape);
        INFO("seed " << seed() << ", shape " << shape_name(shape));
        const std::vector<double> expected_u = reference::predict_grad_input_f64(p.s, p.g.data(), p.W.data());
        const std::vector<double> expected_W = reference::predict_grad_weight_f64(p.s, p.g.data(), p.u.data());
        std::vector<float> storage(p.g.size() + 4);
        float *aligned = first_on_16_byte_boundary(storage);
        for (float *g : {aligned, aligned + 1}) {
            INFO("g at byte offset " << reinterpret_cast<std::uintptr_t>(g) % 16 << " from a 16-byte boundary");
            std::copy(p.g.begin(), p.g.end(), g);
            TensorView g_view = host_view(p.g, p.u_hat_shape());
            g_view.data = g;
            std::fill(p.grad_u.begin(), p.grad_u.end(), std::numeric_limits<float>::quiet_NaN());
            std::fill(p.grad_W.begin(), p.grad_W.end(), std::numeric_limits<float>::quiet_NaN());
            Options o;
            o.device = Device::cuda;
            const Status s = predict_backward(g_view, host_view(p.u, p.u_shape()), host_view(p.W, p.W_shape()),
                                              host_view(p.grad_u, p.u_shape()), host_view(p.grad_W, p.W_shape()), o);
            INFO(s.message);
            REQUIRE(s.ok());
            require_matches("grad_u", p.grad_u, expected_u, shape.out_caps * shape.out_dim);
            require_matches("grad_W", p.grad_W, expected_W, shape.batch);
            // Which one ran: bitwise equal to it named (the two sum in
            // different orders).
            std::vector<float> named_u(p.grad_u.size()), named_W(p.grad_W.size());
            Options named = o;
            named.implementation = g == aligned ? "vectors" : "tuned";
            INFO("expected the default to be " << named.implementation);
            REQUIRE(predict_backward(g_view, host_view(p.u, p.u_shape()), host_view(p.W, p.W_shape()),
                                     host_view(named_u, p.u_shape()), host_view(named_W, p.W_shape()), named)
                        .ok());
            REQUIRE(named_u == p.grad_u);
            REQUIRE(named_W == p.grad_W);
            if (g != aligned) {
                o.implementation = "vectors";
                const Status refused =
                    predict_backward(g_view, host_view(p.u, p.u_shape()), host_view(p.W, p.W_shape()),
                                     host_view(p.grad_u, p.u_shape()), host_view(p.grad_W, p.W_shape()), o);
                REQUIRE(refused.code == StatusCode::misaligned_pointer);
                REQUIRE(refused.message.find(" g ") != std::string::npos);
            }
        }
    }
}

TEST_CASE("cuda: blog grid with host tensors", "[cuda][grid]") {
    for (const auto &name : cuda_implementations("predict")) {
        for (const auto &shape : blog_grid_shapes()) check_predict(shape, cuda_options(name));
    }
    for (const auto &name : cuda_implementations("predict_backward")) {
        for (const auto &shape : blog_grid_shapes()) check_predict_backward(shape, cuda_options(name));
    }
}

TEST_CASE("cuda: odd sizes with host tensors", "[cuda][odd]") {
    for (const auto &name : cuda_implementations("predict")) {
        for (const auto &shape : odd_shapes()) check_predict(shape, cuda_options(name));
    }
    for (const auto &name : cuda_implementations("predict_backward")) {
        for (const auto &shape : odd_shapes()) check_predict_backward(shape, cuda_options(name));
    }
}

// cuda_staged's fast path (K of 4, 8 or 16, J*E even) at shapes that reach
// its corners: an odd capsule count (the last block owns one capsule), V = 2
// (J*E not a multiple of 4), K = 16, a batch that does not divide into the
// row groups, and a batch whose tile would not fit in 48 KB of shared memory
// (more row groups than one wave needs). Shapes are {B, I, K, J, E}.
TEST_CASE("cuda: the staged forward's fast path at odd shapes", "[cuda][staged]") {
    for (const reference::PredictShape &shape : std::vector<reference::PredictShape>{
             {37, 5, 4, 3, 6}, {130, 37, 8, 11, 16}, {33, 7, 16, 3, 10}, {1000, 3, 8, 1, 4}, {3, 1, 8, 1, 2}}) {
        check_predict(shape, cuda_options("cuda_staged"));
    }
}

// capsule_runs' fast path (out_dim, in_caps and the batch even, in_dim 8
// or 16) at shapes that reach its corners: one row a block and one thread
// along a capsule's row (batch 2, out_caps * out_dim 2), an odd number of
// rows a block (65), a block of 1024 threads (out_caps * out_dim 1024), the
// largest tile at in_dim 8 (768 rows, 48 KB) and one row past it (the
// guarded mapping then runs), in_dim 16 (its own kernel) with the largest
// tile there (384 rows) and one row past it. Shapes are {B, I, K, J, E}.
TEST_CASE("cuda: the capsule-runs forward's fast path at odd shapes", "[cuda][runs]") {
    for (const reference::PredictShape &shape : std::vector<reference::PredictShape>{{2, 2, 8, 1, 2},
                                                                                     {130, 38, 8, 11, 16},
                                                                                     {6, 4, 8, 64, 16},
                                                                                     {1536, 2, 8, 1, 2},
                                                                                     {1538, 4, 8, 3, 2},
                                                                                     {34, 6, 16, 5, 4},
                                                                                     {768, 2, 16, 1, 2},
                                                                                     {770, 2, 16, 3, 2}}) {
        check_predict(shape, cuda_options("capsule_runs"));
    }
}

TEST_CASE("cuda: MNIST shape and odd sizes with device tensors on the default stream", "[cuda][device]") {
    for (const std::string op : {"predict", "predict_backward"}) {
        for (const auto &name : cuda_implementations(op)) {
            check_on_device(op, mnist_shape(), name, nullptr);
            check_on_device(op, {3, 7, 5, 11, 13}, name, nullptr);
        }
    }
}

TEST_CASE("cuda: device tensors on the caller's own stream", "[cuda][stream]") {
    cudaStream_t stream = nullptr;
    cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (const std::string op : {"predict", "predict_backward"}) {
        for (const auto &name : cuda_implementations(op)) {
            check_on_device(op, {128, 1152, 8, 10, 16}, name, stream);
            check_on_device(op, {1, 1, 1, 1, 1}, name, stream);
        }
    }
    cuda_ok(cudaStreamDestroy(stream));
}

TEST_CASE("cuda: routing and the DigitCaps layer against the reference", "[cuda][routing]") {
    REQUIRE(!implementations("digitcaps", 3, Device::cuda).empty());
    for (const auto &g : blog_grid_shapes()) {
        check_all({g.batch, g.in_caps, g.in_dim, g.out_caps, g.out_dim}, 3, g.batch == 4, true, Device::cuda);
    }
    for (const DigitCapsShape &s : std::vector<DigitCapsShape>{
             {1, 1, 1, 1, 1}, {3, 7, 1, 11, 13}, {17, 13, 9, 7, 15}, {2, 300, 8, 10, 16}, {128, 1152, 8, 10, 16}}) {
        check_all(s, 3, true, true, Device::cuda);
    }
    for (int iterations : {1, 5}) check_all({3, 7, 1, 11, 13}, iterations, true, false, Device::cuda);
    // No implementation named: the CUDA default for routing ops runs.
    DigitCapsProblem p({3, 5, 4, 3, 8});
    Options options;
    options.device = Device::cuda;
    const Status st = digitcaps(p.u_v(), p.W_v(), TensorView{}, p.v_v(), 3, options);
    INFO(st.message);
    REQUIRE(st.ok());
    require_close("v", p.v, reference::digitcaps_f64(p.s, p.u.data(), p.W.data(), nullptr, 3), 1e-4);
}

TEST_CASE("cuda: device tensors are refused for the cpu device", "[cuda][errors]") {
    PredictProblem p({2, 3, 4, 5, 6});
    DeviceTensor u(p.u, false), W(p.W, false), u_hat(p.u_hat, true);
    Options options;
    options.device = Device::cpu;
    const Status s = predict(u.view(p.u_shape()), W.view(p.W_shape()), u_hat.view(p.u_hat_shape()), options);
    REQUIRE(s.code == StatusCode::wrong_memory_space);
}

int main(int argc, char **argv) {
    if (!cuda_device_available()) {
        std::printf("SKIPPED: no CUDA device is present; the CUDA tests did not run\n");
        return 77;
    }
    std::printf("CUDA device: %s\n", cuda_device_name().c_str());
    return Catch::Session().run(argc, argv);
}

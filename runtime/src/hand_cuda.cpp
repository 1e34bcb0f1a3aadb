#include "hand_cuda.h"

#if HALCAPS_WITH_CUDA

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include "cuda_support.h"
#include "hand_cuda_support.h"
#include "reference/cuda/digitcaps_cuda.h"
#include "reference/cuda/predict_cublas.h"
#include "reference/cuda/predict_cuda.h"

namespace halcaps::detail {

namespace {

namespace ref = halcaps::cuda_reference;

constexpr const char *kHandPrefix = "cuda_";  // cuda_<version name>, e.g. cuda_blog_naive

// One cuBLAS handle per CUDA context, created on first use in that context.
Status cublas_handle_for_current_context(const std::string &op, cublasHandle_t *handle) {
    static std::mutex mutex;
    static std::map<void *, cublasHandle_t> handles;
    void *context = nullptr;
    if (Status s = resolve_cuda_context(Options{}, &context); !s.ok()) return s;
    std::lock_guard<std::mutex> lock(mutex);
    auto it = handles.find(context);
    if (it == handles.end()) {
        cublasHandle_t created = nullptr;
        if (cublasStatus_t s = cublasCreate(&created); s != CUBLAS_STATUS_SUCCESS) {
            return {s == CUBLAS_STATUS_ALLOC_FAILED ? StatusCode::out_of_memory : StatusCode::cuda_error,
                    op + ": cublasCreate failed: " + cublasGetStatusString(s)};
        }
        it = handles.emplace(context, created).first;
    }
    *handle = it->second;
    return Status::success();
}

Status cublas_status(const std::string &op, const ref::CublasResult &result) {
    if (result.blas != CUBLAS_STATUS_SUCCESS) {
        return {StatusCode::cuda_error, op + ": cuBLAS failed: " + cublasGetStatusString(result.blas)};
    }
    if (result.cuda != cudaSuccess) return cuda_status(op, "a kernel launch", result.cuda);
    return Status::success();
}

ref::PredictShape shape_of(const TensorView &u, const TensorView &W) {
    // u [B, I, K], W [I, J, E, K]
    return {u.shape[0], u.shape[1], u.shape[2], W.shape[1], W.shape[2]};
}

// The hand-written version number for "cuda_<name>", or 0.
int hand_version(const std::string &implementation, int count, const char *(*name_of)(int)) {
    for (int v = 1; v <= count; v++) {
        if (implementation == std::string(kHandPrefix) + name_of(v)) return v;
    }
    return 0;
}

}  // namespace

Status shared_cublas_handle(const std::string &op, cublasHandle_t *handle) {
    return cublas_handle_for_current_context(op, handle);
}

const std::vector<HandCudaImplementation> &hand_cuda_implementations() {
    static const std::vector<HandCudaImplementation> list = [] {
        std::vector<HandCudaImplementation> out;
        for (int v = 1; v <= ref::forward_version_count(); v++) {
            out.push_back({"predict", std::string(kHandPrefix) + ref::forward_version_name(v),
                           "hand-written CUDA, reference/cuda version " + std::to_string(v)});
        }
        out.push_back({"predict", "cublas",
                       "cuBLAS strided-batched SGEMM to [I,B,J,E], then a permute to [B,I,J,E] (TF32 off)",
                       Family::library});
        for (int v = 1; v <= ref::backward_version_count(); v++) {
            out.push_back({"predict_backward", std::string(kHandPrefix) + ref::backward_version_name(v),
                           "hand-written CUDA, reference/cuda version " + std::to_string(v)});
        }
        out.push_back({"predict_backward", "cublas", "cuBLAS: two strided-batched SGEMMs (the two einsums), TF32 off",
                       Family::library});
        append_hand_cuda_capsconv_implementations(out);
        return out;
    }();
    return list;
}

Status run_hand_cuda_predict(const std::string &implementation, const TensorView &u, const TensorView &W,
                             const TensorView &u_hat, const Options &options) {
    const std::string op = "predict";
    ScopedCudaContext context(options);
    if (!context.status().ok()) return context.status();
    auto stream = static_cast<cudaStream_t>(options.cuda_stream);
    CallMemory memory(op, stream);
    const float *u_d = nullptr, *W_d = nullptr;
    float *u_hat_d = nullptr;
    if (Status s = memory.input(u, &u_d); !s.ok()) return s;
    if (Status s = memory.input(W, &W_d); !s.ok()) return s;
    if (Status s = memory.output(u_hat, &u_hat_d); !s.ok()) return s;
    const ref::PredictShape shape = shape_of(u, W);

    if (implementation == "cublas") {
        cublasHandle_t handle = nullptr;
        if (Status s = cublas_handle_for_current_context(op, &handle); !s.ok()) return s;
        float *scratch = nullptr;  // u_hat in [I, B, J, E] before the permute
        if (Status s = memory.scratch(u_hat.element_count(), &scratch); !s.ok()) return s;
        const auto result = ref::predict_forward_cublas(handle, u_d, W_d, u_hat_d, scratch, shape, stream, true);
        if (Status s = cublas_status(op, result); !s.ok()) return s;
    } else {
        const int version = hand_version(implementation, ref::forward_version_count(), ref::forward_version_name);
        if (cudaError_t err = ref::predict_forward(version, u_d, W_d, u_hat_d, shape, stream); err != cudaSuccess) {
            return cuda_status(op, "launching " + implementation, err);
        }
    }
    return memory.finish();
}

Status run_hand_cuda_predict_backward(const std::string &implementation, const TensorView &g, const TensorView &u,
                                      const TensorView &W, const TensorView &grad_u, const TensorView &grad_W,
                                      const Options &options) {
    const std::string op = "predict_backward";
    ScopedCudaContext context(options);
    if (!context.status().ok()) return context.status();
    auto stream = static_cast<cudaStream_t>(options.cuda_stream);
    CallMemory memory(op, stream);
    const float *g_d = nullptr, *u_d = nullptr, *W_d = nullptr;
    float *grad_u_d = nullptr, *grad_W_d = nullptr;
    if (Status s = memory.input(g, &g_d); !s.ok()) return s;
    if (Status s = memory.input(u, &u_d); !s.ok()) return s;
    if (Status s = memory.input(W, &W_d); !s.ok()) return s;
    if (Status s = memory.output(grad_u, &grad_u_d); !s.ok()) return s;
    if (Status s = memory.output(grad_W, &grad_W_d); !s.ok()) return s;
    const ref::PredictShape shape = shape_of(u, W);

    if (implementation == "cublas") {
        cublasHandle_t handle = nullptr;
        if (Status s = cublas_handle_for_current_context(op, &handle); !s.ok()) return s;
        const auto result = ref::predict_backward_cublas(handle, g_d, u_d, W_d, grad_u_d, grad_W_d, shape, stream);
        if (Status s = cublas_status(op, result); !s.ok()) return s;
    } else {
        const int version = hand_version(implementation, ref::backward_version_count(), ref::backward_version_name);
        if (cudaError_t err = ref::predict_backward(version, g_d, u_d, W_d, grad_u_d, grad_W_d, shape, stream);
            err != cudaSuccess) {
            return cuda_status(op, "launching " + implementation, err);
        }
    }
    return memory.finish();
}

namespace {

// b0 on the device, or null where it is absent (zeros).
Status optional_input(CallMemory &memory, const TensorView &view, const float **device) {
    *device = nullptr;
    return view.data != nullptr ? memory.input(view, device) : Status::success();
}

// grad_b0 on the device, or null where it is absent (not computed).
Status optional_output(CallMemory &memory, const TensorView &view, float **device) {
    *device = nullptr;
    return view.data != nullptr ? memory.output(view, device) : Status::success();
}

// Routing of u_hat (already on the device) into v, with its scratch.
Status route_on_device(const std::string &op, CallMemory &memory, const float *u_hat_d, const TensorView &b0,
                       float *v_d, const ref::RoutingShape &shape, int iterations, cudaStream_t stream) {
    const float *b0_d = nullptr;
    if (Status s = optional_input(memory, b0, &b0_d); !s.ok()) return s;
    float *scratch = nullptr;
    if (Status s = memory.scratch(ref::routing_scratch_floats(shape), &scratch); !s.ok()) return s;
    if (cudaError_t err = ref::route_naive(u_hat_d, b0_d, v_d, shape, iterations, scratch, stream);
        err != cudaSuccess) {
        return cuda_status(op, "launching cuda_naive", err);
    }
    return Status::success();
}

}  // namespace

Status run_hand_cuda_route(const TensorView &u_hat, const TensorView &b0, const TensorView &v, int iterations,
                           const Options &options) {
    const std::string op = "route";
    ScopedCudaContext context(options);
    if (!context.status().ok()) return context.status();
    auto stream = static_cast<cudaStream_t>(options.cuda_stream);
    CallMemory memory(op, stream);
    const float *u_hat_d = nullptr;
    float *v_d = nullptr;
    if (Status s = memory.input(u_hat, &u_hat_d); !s.ok()) return s;
    if (Status s = memory.output(v, &v_d); !s.ok()) return s;
    const ref::RoutingShape shape{u_hat.shape[0], u_hat.shape[1], u_hat.shape[2], u_hat.shape[3]};
    if (Status s = route_on_device(op, memory, u_hat_d, b0, v_d, shape, iterations, stream); !s.ok()) return s;
    return memory.finish();
}

namespace {

// A hand-written layer's refusal of a shape beyond its limits
// (unsupported_shape: what the implementation keeps where, its limits, and
// the extent past them), before any device work; success where it applies.
Status refusal_status(const std::string &op, const std::string &implementation, const std::string &limits,
                      const ref::DigitCapsFusedRefusal &refusal) {
    if (refusal.extent == nullptr) return Status::success();
    return {StatusCode::unsupported_shape, op + ": implementation '" + implementation + "' " + limits + "; " +
                                               refusal.extent + " is " + std::to_string(refusal.value)};
}

// cuda_tensor's refusal (forward and backward: the same pass kernel).
Status tensor_refusal(const std::string &op, const ref::DigitCapsLayerShape &layer) {
    return refusal_status(op, "cuda_tensor",
                          "keeps u_hat and the sums of every output capsule in a warp's registers and in_dim in two "
                          "tensor-core steps: out_caps, out_dim and in_dim must each be at most 16",
                          ref::digitcaps_tensor_refusal(layer));
}

}  // namespace

Status run_hand_cuda_digitcaps(const TensorView &u, const TensorView &W, const TensorView &b0, const TensorView &v,
                               const TensorView *routing_s, const TensorView *routing_c, int iterations,
                               const Options &options) {
    const std::string op = routing_c != nullptr   ? "digitcaps_with_c"
                           : routing_s != nullptr ? "digitcaps_with_s"
                                                  : "digitcaps";
    const std::string &implementation = options.implementation;
    const bool fused = implementation == "cuda_fused", tensor = implementation == "cuda_tensor";
    const ref::DigitCapsLayerShape layer{u.shape[0], u.shape[1], u.shape[2], W.shape[1], W.shape[2]};
    if (fused) {
        if (Status s = refusal_status(op, implementation,
                                      "puts a warp per output capsule in one block and keeps a thread's out_dim "
                                      "values in registers: out_caps must be at most 16, out_dim at most 32 and "
                                      "in_dim at most 16",
                                      ref::digitcaps_fused_refusal(layer));
            !s.ok()) {
            return s;
        }
    }
    if (tensor) {
        if (Status s = tensor_refusal(op, layer); !s.ok()) return s;
    }
    ScopedCudaContext context(options);
    if (!context.status().ok()) return context.status();
    auto stream = static_cast<cudaStream_t>(options.cuda_stream);
    CallMemory memory(op, stream);
    const float *u_d = nullptr, *W_d = nullptr;
    float *v_d = nullptr, *u_hat_d = nullptr;
    if (Status s = memory.input(u, &u_d); !s.ok()) return s;
    if (Status s = memory.input(W, &W_d); !s.ok()) return s;
    if (Status s = memory.output(v, &v_d); !s.ok()) return s;
    // Only cuda_tensor keeps s and c (routing_implementations.cpp).
    float *routing_s_d = nullptr, *routing_c_d = nullptr;
    if (routing_s != nullptr) {
        if (Status s = memory.output(*routing_s, &routing_s_d); !s.ok()) return s;
    }
    if (routing_c != nullptr) {
        if (Status s = memory.output(*routing_c, &routing_c_d); !s.ok()) return s;
    }
    if (fused || tensor) {
        const float *b0_d = nullptr;
        if (Status s = optional_input(memory, b0, &b0_d); !s.ok()) return s;
        ref::DigitCapsFusedPlan fused_plan;
        ref::DigitCapsTensorPlan tensor_plan;
        cudaError_t err =
            fused ? ref::digitcaps_fused_plan(layer, &fused_plan) : ref::digitcaps_tensor_plan(layer, &tensor_plan);
        if (err != cudaSuccess) return cuda_status(op, "planning " + implementation, err);
        float *scratch = nullptr;
        if (Status s = memory.scratch(fused ? fused_plan.scratch_floats : tensor_plan.scratch_floats, &scratch);
            !s.ok()) {
            return s;
        }
        err = fused ? ref::digitcaps_fused(u_d, W_d, b0_d, v_d, layer, iterations, fused_plan, scratch, stream)
                    : ref::digitcaps_tensor(u_d, W_d, b0_d, v_d, routing_s_d, routing_c_d, layer, iterations,
                                            tensor_plan, scratch, stream);
        if (err != cudaSuccess) return cuda_status(op, "launching " + implementation, err);
        return memory.finish();
    }
    const ref::PredictShape predict_shape = shape_of(u, W);
    const ref::RoutingShape shape{u.shape[0], u.shape[1], W.shape[1], W.shape[2]};
    // The eager way: u_hat materialised by the blog's prediction kernel.
    if (Status s = memory.scratch(shape.batch * shape.in_caps * shape.out_caps * shape.out_dim, &u_hat_d); !s.ok()) {
        return s;
    }
    if (cudaError_t err = ref::predict_forward(1, u_d, W_d, u_hat_d, predict_shape, stream); err != cudaSuccess) {
        return cuda_status(op, "launching the prediction of cuda_naive", err);
    }
    if (Status s = route_on_device(op, memory, u_hat_d, b0, v_d, shape, iterations, stream); !s.ok()) return s;
    return memory.finish();
}

namespace {

// cuda_passes' refusal of a shape beyond its limits.
Status passes_refusal(const std::string &op, const ref::RoutingShape &shape) {
    return refusal_status(op, "cuda_passes",
                          "keeps a row of u_hat in a warp's lanes, a lane an output capsule with its out_dim values "
                          "in registers: out_caps and out_dim must each be at most 32",
                          ref::route_backward_passes_refusal(shape));
}

// cuda_passes' plan, with its failure as a status.
Status passes_plan(const std::string &op, const ref::RoutingShape &shape, int iterations,
                   ref::RouteBackwardPassesPlan *plan) {
    if (cudaError_t err = ref::route_backward_passes_plan(shape, iterations, plan); err != cudaSuccess) {
        return cuda_status(op, "planning cuda_passes", err);
    }
    return Status::success();
}

}  // namespace

Status run_hand_cuda_route_backward(const TensorView &u_hat, const TensorView &b0, const TensorView &grad_v,
                                    const TensorView &grad_u_hat, const TensorView &grad_b0, int iterations,
                                    const Options &options) {
    const std::string op = "route_backward";
    const bool passes = options.implementation == "cuda_passes";
    const ref::RoutingShape shape{u_hat.shape[0], u_hat.shape[1], u_hat.shape[2], u_hat.shape[3]};
    if (passes) {
        if (Status s = passes_refusal(op, shape); !s.ok()) return s;
    }
    ScopedCudaContext context(options);
    if (!context.status().ok()) return context.status();
    auto stream = static_cast<cudaStream_t>(options.cuda_stream);
    CallMemory memory(op, stream);
    const float *u_hat_d = nullptr, *b0_d = nullptr, *grad_v_d = nullptr;
    float *grad_u_hat_d = nullptr, *grad_b0_d = nullptr, *scratch = nullptr;
    if (Status s = memory.input(u_hat, &u_hat_d); !s.ok()) return s;
    if (Status s = optional_input(memory, b0, &b0_d); !s.ok()) return s;
    if (Status s = memory.input(grad_v, &grad_v_d); !s.ok()) return s;
    if (Status s = memory.output(grad_u_hat, &grad_u_hat_d); !s.ok()) return s;
    if (Status s = optional_output(memory, grad_b0, &grad_b0_d); !s.ok()) return s;
    ref::RouteBackwardPassesPlan plan;
    if (passes) {
        if (Status s = passes_plan(op, shape, iterations, &plan); !s.ok()) return s;
    }
    const int64_t scratch_floats =
        passes ? plan.scratch_floats : ref::route_backward_naive_scratch_floats(shape, iterations);
    if (Status s = memory.scratch(scratch_floats, &scratch); !s.ok()) return s;
    const cudaError_t err = passes ? ref::route_backward_passes(u_hat_d, b0_d, grad_v_d, grad_u_hat_d, grad_b0_d, shape,
                                                                iterations, plan, scratch, stream)
                                   : ref::route_backward_naive(u_hat_d, b0_d, grad_v_d, grad_u_hat_d, grad_b0_d, shape,
                                                               iterations, scratch, stream);
    if (err != cudaSuccess) return cuda_status(op, "launching " + options.implementation, err);
    return memory.finish();
}

Status run_hand_cuda_digitcaps_backward(const TensorView &u, const TensorView &W, const TensorView &b0,
                                        const TensorView *routing_s, const TensorView *routing_c,
                                        const TensorView &grad_v, const TensorView &grad_u, const TensorView &grad_W,
                                        const TensorView &grad_b0, int iterations, const Options &options) {
    const std::string op = routing_c != nullptr   ? "digitcaps_backward_with_c"
                           : routing_s != nullptr ? "digitcaps_backward_with_s"
                                                  : "digitcaps_backward";
    const bool passes = options.implementation == "cuda_passes", tensor = options.implementation == "cuda_tensor";
    const ref::DigitCapsLayerShape layer{u.shape[0], u.shape[1], u.shape[2], W.shape[1], W.shape[2]};
    const ref::RoutingShape routing{layer.batch, layer.in_caps, layer.out_caps, layer.out_dim};
    if (passes) {
        if (Status s = passes_refusal(op, routing); !s.ok()) return s;
    }
    if (tensor) {
        if (Status s = tensor_refusal(op, layer); !s.ok()) return s;
    }
    ScopedCudaContext context(options);
    if (!context.status().ok()) return context.status();
    auto stream = static_cast<cudaStream_t>(options.cuda_stream);
    CallMemory memory(op, stream);
    const float *u_d = nullptr, *W_d = nullptr, *b0_d = nullptr, *grad_v_d = nullptr;
    float *grad_u_d = nullptr, *grad_W_d = nullptr, *grad_b0_d = nullptr, *scratch = nullptr;
    if (Status s = memory.input(u, &u_d); !s.ok()) return s;
    if (Status s = memory.input(W, &W_d); !s.ok()) return s;
    if (Status s = optional_input(memory, b0, &b0_d); !s.ok()) return s;
    // Only cuda_tensor starts from s and c (routing_implementations.cpp).
    const float *routing_s_d = nullptr, *routing_c_d = nullptr;
    if (routing_s != nullptr) {
        if (Status s = memory.input(*routing_s, &routing_s_d); !s.ok()) return s;
    }
    if (routing_c != nullptr) {
        if (Status s = memory.input(*routing_c, &routing_c_d); !s.ok()) return s;
    }
    if (Status s = memory.input(grad_v, &grad_v_d); !s.ok()) return s;
    if (Status s = memory.output(grad_u, &grad_u_d); !s.ok()) return s;
    if (Status s = memory.output(grad_W, &grad_W_d); !s.ok()) return s;
    if (Status s = optional_output(memory, grad_b0, &grad_b0_d); !s.ok()) return s;
    ref::RouteBackwardPassesPlan plan;
    ref::DigitCapsTensorPlan tensor_plan;
    if (passes) {
        if (Status s = passes_plan(op, routing, iterations, &plan); !s.ok()) return s;
    }
    if (tensor) {
        if (cudaError_t err = ref::digitcaps_tensor_plan(layer, &tensor_plan); err != cudaSuccess) {
            return cuda_status(op, "planning cuda_tensor", err);
        }
    }
    const bool given_c = routing_c != nullptr;
    const int64_t scratch_floats =
        passes   ? ref::digitcaps_backward_passes_scratch_floats(layer, plan)
        : tensor ? ref::digitcaps_backward_tensor_scratch_floats(layer, tensor_plan, iterations, given_c)
                 : ref::digitcaps_backward_naive_scratch_floats(layer, iterations);
    if (Status s = memory.scratch(scratch_floats, &scratch); !s.ok()) return s;
    const cudaError_t err =
        passes   ? ref::digitcaps_backward_passes(u_d, W_d, b0_d, grad_v_d, grad_u_d, grad_W_d, grad_b0_d, layer,
                                                  iterations, plan, scratch, stream)
        : tensor ? ref::digitcaps_backward_tensor(u_d, W_d, b0_d, routing_s_d, routing_c_d, grad_v_d, grad_u_d,
                                                  grad_W_d, grad_b0_d, layer, iterations, tensor_plan, scratch, stream)
                 : ref::digitcaps_backward_naive(u_d, W_d, b0_d, grad_v_d, grad_u_d, grad_W_d, grad_b0_d, layer,
                                                 iterations, scratch, stream);
    if (err != cudaSuccess) return cuda_status(op, "launching " + options.implementation, err);
    return memory.finish();
}

Status run_cublas_predict_gemm_only(const TensorView &u, const TensorView &W, float *u_hat_ibje,
                                    const Options &options) {
    const std::string op = "predict (cublas_gemm_only)";
    if (u.space != MemorySpace::cuda || W.space != MemorySpace::cuda) {
        return {StatusCode::wrong_memory_space, op + ": u and W must be device tensors"};
    }
    ScopedCudaContext context(options);
    if (!context.status().ok()) return context.status();
    cublasHandle_t handle = nullptr;
    if (Status s = cublas_handle_for_current_context(op, &handle); !s.ok()) return s;
    const auto result = ref::predict_forward_cublas(handle, u.data, W.data, nullptr, u_hat_ibje, shape_of(u, W),
                                                    static_cast<cudaStream_t>(options.cuda_stream), false);
    return cublas_status(op, result);
}

}  // namespace halcaps::detail

#else  // no CUDA in this build

namespace halcaps::detail {

const std::vector<HandCudaImplementation> &hand_cuda_implementations() {
    static const std::vector<HandCudaImplementation> none;
    return none;
}
Status run_hand_cuda_predict(const std::string &, const TensorView &, const TensorView &, const TensorView &,
                             const Options &) {
    return {StatusCode::device_unavailable, "predict: this build of halcaps has no CUDA support"};
}
Status run_hand_cuda_predict_backward(const std::string &, const TensorView &, const TensorView &, const TensorView &,
                                      const TensorView &, const TensorView &, const Options &) {
    return {StatusCode::device_unavailable, "predict_backward: this build of halcaps has no CUDA support"};
}
Status run_cublas_predict_gemm_only(const TensorView &, const TensorView &, float *, const Options &) {
    return {StatusCode::device_unavailable, "predict: this build of halcaps has no CUDA support"};
}
Status run_hand_cuda_route(const TensorView &, const TensorView &, const TensorView &, int, const Options &) {
    return {StatusCode::device_unavailable, "route: this build of halcaps has no CUDA support"};
}
Status run_hand_cuda_digitcaps(const TensorView &, const TensorView &, const TensorView &, const TensorView &,
                               const TensorView *, const TensorView *, int, const Options &) {
    return {StatusCode::device_unavailable, "digitcaps: this build of halcaps has no CUDA support"};
}
Status run_hand_cuda_route_backward(const TensorView &, const TensorView &, const TensorView &, const TensorView &,
                                    const TensorView &, int, const Options &) {
    return {StatusCode::device_unavailable, "route_backward: this build of halcaps has no CUDA support"};
}
Status run_hand_cuda_digitcaps_backward(const TensorView &, const TensorView &, const TensorView &, const TensorView *,
                                        const TensorView *, const TensorView &, const TensorView &, const TensorView &,
                                        const TensorView &, int, const Options &) {
    return {StatusCode::device_unavailable, "digitcaps_backward: this build of halcaps has no CUDA support"};
}

}  // namespace halcaps::detail

#endif

// The capsule convolution by hand-written CUDA (Vaidya's kernels) and by the
// library peers (cuDNN, im2col + cuBLAS), callable by implementation name
// through halcaps::capsconv, as hand_cuda.cpp does for capsule prediction.
#include "hand_cuda.h"

#if HALCAPS_WITH_CUDA

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "cuda_support.h"
#include "hand_cuda_support.h"
#include "reference/cuda/capsconv_cuda.h"
#include "reference/cuda/capsconv_im2col.h"
#if HALCAPS_WITH_CUDNN
#include "reference/cuda/capsconv_cudnn.h"
#endif

namespace halcaps::detail {

namespace {

namespace ref = halcaps::cuda_reference;

constexpr const char *kOp = "capsconv";
constexpr const char *kHandPrefix = "cuda_";  // cuda_<version name>, e.g. cuda_vaidya_i3

ref::CapsConvShape shape_of(const TensorView &input, const TensorView &filter, const ConvParams &params) {
    // input [n, H, W, ci, 4, 4], filter [kh, kw, ci, co, 4, 4]
    ref::CapsConvShape s;
    s.batch = input.shape[0], s.height = input.shape[1], s.width = input.shape[2], s.in_caps = input.shape[3];
    s.kernel_h = filter.shape[0], s.kernel_w = filter.shape[1], s.out_caps = filter.shape[3];
    s.stride = params.stride, s.pad = params.pad;
    return s;
}

int hand_version(const std::string &implementation) {
    for (int v = 1; v <= ref::capsconv_version_count(); v++) {
        if (implementation == std::string(kHandPrefix) + ref::capsconv_version_name(v)) return v;
    }
    return 0;
}

Status cublas_status(const std::string &op, const ref::CublasResult &result) {
    if (result.blas != CUBLAS_STATUS_SUCCESS) {
        return {StatusCode::cuda_error, op + ": cuBLAS failed: " + cublasGetStatusString(result.blas)};
    }
    if (result.cuda != cudaSuccess) return cuda_status(op, "a kernel launch", result.cuda);
    return Status::success();
}

#if HALCAPS_WITH_CUDNN

// cuDNN state, per CUDA context: one handle; one plan (descriptors and the
// algorithm Find chose) per shape; one workspace per stream, grown to the
// largest any plan has needed on it. Calls on one stream run in order, so
// they can share its workspace; calls on different streams never share one.
// Everything lives for the whole process, like the cuBLAS handle. The mutex
// is held while a call is enqueued: the handle's stream is per handle.
struct CudnnState {
    std::mutex mutex;
    std::map<void *, cudnnHandle_t> handles;
    using ShapeKey =
        std::tuple<void *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;
    std::map<ShapeKey, std::unique_ptr<ref::CudnnCapsConv>> plans;
    struct Workspace {
        void *data = nullptr;
        size_t bytes = 0;
    };
    std::map<std::pair<void *, cudaStream_t>, Workspace> workspaces;
};

CudnnState &cudnn_state() {
    static CudnnState *state = new CudnnState();  // never destroyed: handles must outlive static destructors' users
    return *state;
}

Status cudnn_status(const std::string &op, const ref::CudnnResult &r) {
    if (r.dnn != CUDNN_STATUS_SUCCESS) {
        const StatusCode code = r.dnn == CUDNN_STATUS_ALLOC_FAILED ? StatusCode::out_of_memory : StatusCode::cuda_error;
        return {code, op + ": cuDNN failed: " + cudnnGetErrorString(r.dnn)};
    }
    if (r.cuda != cudaSuccess) return cuda_status(op, "a kernel launch", r.cuda);
    return Status::success();
}

// With the state's mutex held: the handle and plan for the current context
// and this shape, created on first use (the plan's creation runs cuDNN's Find,
// which synchronises), and the stream's workspace, grown if needed.
Status cudnn_plan_locked(const std::string &op, const ref::CapsConvShape &s, cudaStream_t stream, cudnnHandle_t *handle,
                         const ref::CudnnCapsConv **plan, void **workspace) {
    CudnnState &state = cudnn_state();
    void *context = nullptr;
    if (Status st = resolve_cuda_context(Options{}, &context); !st.ok()) return st;
    auto h = state.handles.find(context);
    if (h == state.handles.end()) {
        cudnnHandle_t created = nullptr;
        if (cudnnStatus_t st = cudnnCreate(&created); st != CUDNN_STATUS_SUCCESS) {
            return {st == CUDNN_STATUS_ALLOC_FAILED ? StatusCode::out_of_memory : StatusCode::cuda_error,
                    op + ": cudnnCreate failed: " + cudnnGetErrorString(st)};
        }
        h = state.handles.emplace(context, created).first;
    }
    *handle = h->second;
    if (cudnnStatus_t st = cudnnSetStream(*handle, stream); st != CUDNN_STATUS_SUCCESS) {
        return {StatusCode::cuda_error, op + ": cudnnSetStream failed: " + cudnnGetErrorString(st)};
    }
    const CudnnState::ShapeKey key{context,    s.batch,    s.height,   s.width,  s.in_caps,
                                   s.kernel_h, s.kernel_w, s.out_caps, s.stride, s.pad};
    auto p = state.plans.find(key);
    if (p == state.plans.end()) {
        std::unique_ptr<ref::CudnnCapsConv> created;
        const ref::CudnnResult r = ref::CudnnCapsConv::create(*handle, s, &created);
        if (r.dnn == CUDNN_STATUS_BAD_PARAM) {
            return {StatusCode::bad_extent,
                    op + ": cuDNN refused the shape (CUDNN_STATUS_BAD_PARAM: extents beyond its int range?)"};
        }
        if (Status st = cudnn_status(op, r); !st.ok()) return st;
        p = state.plans.emplace(key, std::move(created)).first;
    }
    *plan = p->second.get();
    CudnnState::Workspace &w = state.workspaces[{context, stream}];
    if (w.bytes < (*plan)->workspace_bytes()) {
        // Stream-ordered: the old buffer is released after the calls queued before.
        if (w.data) cudaFreeAsync(w.data, stream);
        w.data = nullptr;
        w.bytes = 0;
        if (cudaError_t err = cudaMallocAsync(&w.data, (*plan)->workspace_bytes(), stream); err != cudaSuccess) {
            return cuda_status(op, "allocating cuDNN's workspace", err);
        }
        w.bytes = (*plan)->workspace_bytes();
    }
    *workspace = w.data;
    return Status::success();
}

#endif  // HALCAPS_WITH_CUDNN

}  // namespace

void append_hand_cuda_capsconv_implementations(std::vector<HandCudaImplementation> &out) {
    for (int v = 1; v <= ref::capsconv_version_count(); v++) {
        out.push_back({kOp, std::string(kHandPrefix) + ref::capsconv_version_name(v),
                       "hand-written CUDA (Vaidya), reference/cuda/capsconv_cuda.h version " + std::to_string(v)});
    }
#if HALCAPS_WITH_CUDNN
    out.push_back(
        {kOp, "cudnn", "cuDNN convolution (FMA math, no TF32) after permutes to NCHW/KCRS, and back", Family::library});
#endif
    out.push_back(
        {kOp, "im2col_cublas", "im2col kernel + one cuBLAS SGEMM (TF32 off), permutes when co > 1", Family::library});
}

Status run_hand_cuda_capsconv(const std::string &implementation, const TensorView &input, const TensorView &filter,
                              const TensorView &output, const ConvParams &params, const Options &options) {
    const std::string op = kOp;
    ScopedCudaContext context(options);
    if (!context.status().ok()) return context.status();
    auto stream = static_cast<cudaStream_t>(options.cuda_stream);
    CallMemory memory(op, stream);
    const float *in_d = nullptr, *filter_d = nullptr;
    float *out_d = nullptr;
    if (Status s = memory.input(input, &in_d); !s.ok()) return s;
    if (Status s = memory.input(filter, &filter_d); !s.ok()) return s;
    if (Status s = memory.output(output, &out_d); !s.ok()) return s;
    const ref::CapsConvShape shape = shape_of(input, filter, params);

    if (implementation == "im2col_cublas") {
        cublasHandle_t handle = nullptr;
        if (Status s = shared_cublas_handle(op, &handle); !s.ok()) return s;
        float *scratch = nullptr;
        if (Status s = memory.scratch(ref::capsconv_im2col_sizes(shape).total(), &scratch); !s.ok()) return s;
        const auto result = ref::capsconv_im2col_cublas(handle, in_d, filter_d, out_d, scratch, shape, stream);
        if (result.blas == CUBLAS_STATUS_INVALID_VALUE) {
            return {StatusCode::bad_extent, op + ": the shape is beyond cuBLAS's int extents (im2col_cublas)"};
        }
        if (Status s = cublas_status(op, result); !s.ok()) return s;
#if HALCAPS_WITH_CUDNN
    } else if (implementation == "cudnn") {
        const ref::CudnnLayoutSizes sizes = ref::capsconv_cudnn_layout_sizes(shape);
        float *x = nullptr, *w = nullptr, *y = nullptr;
        if (Status s = memory.scratch(sizes.x, &x); !s.ok()) return s;
        if (Status s = memory.scratch(sizes.w, &w); !s.ok()) return s;
        if (Status s = memory.scratch(sizes.y, &y); !s.ok()) return s;
        std::lock_guard<std::mutex> lock(cudnn_state().mutex);
        cudnnHandle_t handle = nullptr;
        const ref::CudnnCapsConv *plan = nullptr;
        void *workspace = nullptr;
        if (Status s = cudnn_plan_locked(op, shape, stream, &handle, &plan, &workspace); !s.ok()) return s;
        if (Status s = cudnn_status(op, plan->forward(handle, in_d, filter_d, out_d, x, w, y, workspace, stream));
            !s.ok()) {
            return s;
        }
#endif
    } else {
        const int version = hand_version(implementation);
        if (cudaError_t err = ref::capsconv_forward(version, in_d, filter_d, out_d, shape, stream);
            err != cudaSuccess) {
            return cuda_status(op, "launching " + implementation, err);
        }
    }
    return memory.finish();
}

Status hand_cuda_capsconv_extra_memory(const std::string &implementation, const TensorView &input,
                                       const TensorView &filter, const ConvParams &params, const Options &options,
                                       int64_t *bytes, std::string *note) {
    const std::string op = kOp;
    const ref::CapsConvShape shape = shape_of(input, filter, params);
    (void)options;  // used only with cuDNN
    *bytes = 0;
    note->clear();
    if (implementation == "im2col_cublas") {
        const ref::Im2colSizes z = ref::capsconv_im2col_sizes(shape);
        *bytes = z.total() * int64_t(sizeof(float));
        *note = "im2col buffer " + std::to_string(z.columns * sizeof(float)) + " B" +
                (z.filter
                     ? " + permuted filter and product " + std::to_string((z.filter + z.product) * sizeof(float)) + " B"
                     : std::string());
        return Status::success();
    }
#if HALCAPS_WITH_CUDNN
    if (implementation == "cudnn" || implementation == "cudnn_core") {
        ScopedCudaContext context(options);
        if (!context.status().ok()) return context.status();
        std::lock_guard<std::mutex> lock(cudnn_state().mutex);
        cudnnHandle_t handle = nullptr;
        const ref::CudnnCapsConv *plan = nullptr;
        void *workspace = nullptr;
        if (Status s = cudnn_plan_locked(op, shape, static_cast<cudaStream_t>(options.cuda_stream), &handle, &plan,
                                         &workspace);
            !s.ok()) {
            return s;
        }
        const ref::CudnnLayoutSizes sizes = ref::capsconv_cudnn_layout_sizes(shape);
        const int64_t copies = implementation == "cudnn" ? (sizes.x + sizes.w + sizes.y) * int64_t(sizeof(float)) : 0;
        *bytes = copies + static_cast<int64_t>(plan->workspace_bytes());
        *note = std::string("algorithm ") + plan->algorithm_name() + ", workspace " +
                std::to_string(plan->workspace_bytes()) + " B" +
                (copies ? " + permuted copies " + std::to_string(copies) + " B" : std::string());
        return Status::success();
    }
#endif
    return Status::success();
}

Status run_cudnn_capsconv_core(const TensorView &input, const TensorView &filter, const ConvParams &params,
                               const float *x, const float *w, float *y, const Options &options) {
    const std::string op = "capsconv (cudnn_core)";
#if HALCAPS_WITH_CUDNN
    ScopedCudaContext context(options);
    if (!context.status().ok()) return context.status();
    auto stream = static_cast<cudaStream_t>(options.cuda_stream);
    std::lock_guard<std::mutex> lock(cudnn_state().mutex);
    cudnnHandle_t handle = nullptr;
    const ref::CudnnCapsConv *plan = nullptr;
    void *workspace = nullptr;
    if (Status s = cudnn_plan_locked(op, shape_of(input, filter, params), stream, &handle, &plan, &workspace);
        !s.ok()) {
        return s;
    }
    return cudnn_status(op, plan->core(handle, x, w, y, workspace, stream));
#else
    (void)input, (void)filter, (void)params, (void)x, (void)w, (void)y, (void)options;
    return {StatusCode::device_unavailable, op + ": this build of halcaps has no cuDNN"};
#endif
}

}  // namespace halcaps::detail

#else  // no CUDA in this build

namespace halcaps::detail {

void append_hand_cuda_capsconv_implementations(std::vector<HandCudaImplementation> &) {}
Status run_hand_cuda_capsconv(const std::string &, const TensorView &, const TensorView &, const TensorView &,
                              const ConvParams &, const Options &) {
    return {StatusCode::device_unavailable, "capsconv: this build of halcaps has no CUDA support"};
}
Status hand_cuda_capsconv_extra_memory(const std::string &, const TensorView &, const TensorView &, const ConvParams &,
                                       const Options &, int64_t *bytes, std::string *note) {
    *bytes = 0;
    note->clear();
    return Status::success();
}
Status run_cudnn_capsconv_core(const TensorView &, const TensorView &, const ConvParams &, const float *, const float *,
                               float *, const Options &) {
    return {StatusCode::device_unavailable, "capsconv: this build of halcaps has no CUDA support"};
}

}  // namespace halcaps::detail

#endif

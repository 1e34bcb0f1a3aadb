// halcaps: capsule-network operators compiled ahead of time with Halide.
//
// The whole public API. Every entry point validates its arguments before any
// kernel runs and reports problems through the returned Status; none aborts.
// Tensors are float32, dense and row-major, on the host or on a CUDA device.
// Device::opencl runs the same Halide GPU schedules compiled for OpenCL on
// host tensors (README, "The OpenCL build").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace halcaps {

enum class StatusCode {
    ok = 0,
    null_pointer,            // a tensor's data pointer is null
    bad_rank,                // a tensor has the wrong number of dimensions
    bad_extent,              // an extent is zero or negative
    extent_mismatch,         // two tensors disagree on a shared extent
    unsupported_strides,     // a tensor is not dense row-major
    wrong_memory_space,      // host and device tensors mixed, or in the wrong place for the device
    unknown_implementation,  // no implementation of that name for that device
    device_unavailable,      // CUDA (OpenCL) asked for but not built in, or no such device present
    out_of_memory,
    cuda_error,              // a CUDA call failed
    internal_error,          // a kernel reported an error the checks above should have caught
    unsupported_iterations,  // routing: iterations < 1, or no kernel built for that count
    bad_parameter,           // a scalar parameter is out of range (capsconv: stride < 1, pad < 0)
    unsupported_shape,       // valid arguments the chosen implementation does not handle
                             // (capsconv's winograd ones: 3x3 filters at stride 1 only)
    misaligned_pointer,      // a CUDA tensor for a Halide kernel is not 16-byte aligned
                             // (or a host tensor not aligned as its kernel declares:
                             // u_hat, 8 bytes, for predict's batch_walk and batch_rows)
    opencl_error,            // an OpenCL call failed (a kernel's build or launch, a copy)
};

// Stable lower-case name of a code, e.g. "extent_mismatch".
const char *status_code_name(StatusCode code);

struct Status {
    StatusCode code = StatusCode::ok;
    std::string message;  // names the offending argument; empty when ok

    bool ok() const { return code == StatusCode::ok; }
    static Status success() { return {}; }
};

enum class MemorySpace { host, cuda };

// A view of caller-owned float32 memory. `shape` is outermost first, as NumPy
// and PyTorch write it. `strides` (in elements) may be left empty for a dense
// row-major tensor; if given, they must be exactly the dense row-major ones.
// For the Halide implementations a tensor in CUDA memory must start on a
// 16-byte boundary (cudaMalloc's pointers, and views that start a multiple of
// 4 floats into them, do): their kernels load and store 16 bytes at a time.
// The hand-written cuda_* implementations take any alignment.
struct TensorView {
    float *data = nullptr;
    std::vector<int64_t> shape;
    std::vector<int64_t> strides{};
    MemorySpace space = MemorySpace::host;

    int64_t element_count() const;
};

enum class Device {
    automatic,  // cuda when the tensors live on a CUDA device, otherwise cpu
    cpu,
    cuda,
    // The Halide GPU schedules compiled for OpenCL, on the first OpenCL
    // device (HL_OCL_PLATFORM_NAME and HL_OCL_DEVICE_TYPE choose another;
    // runtime/src/opencl_support.h). Host tensors only: Halide copies the
    // inputs to the device and the outputs back, and the call is
    // synchronous. The implementations and defaults are CUDA's Halide ones
    // (not the hand-written cuda_*), under the same names.
    opencl,
};

struct Options {
    Device device = Device::automatic;
    // Which implementation to run, e.g. "cpu", "naive", "tuned"; empty picks
    // the operator's default for the device and arguments (see
    // ImplementationInfo and default_implementation(op, device)).
    std::string implementation;
    // CUDA only. The stream the kernels are queued on (a cudaStream_t / CUstream);
    // null means the legacy default stream. Work is asynchronous on device
    // tensors: synchronise the stream before reading the results.
    void *cuda_stream = nullptr;
    // CUDA only. The context to run in (a CUcontext); null means the calling
    // thread's current context, or else the primary context of device 0.
    void *cuda_context = nullptr;
};

// u_hat[b,i,j,e] = sum_k W[i,j,e,k] * u[b,i,k]
//   u [B, I, K], W [I, J, E, K], u_hat [B, I, J, E]
Status predict(const TensorView &u, const TensorView &W, const TensorView &u_hat, const Options &options = {});

// Both gradients of predict given g = dL/du_hat:
//   grad_u[b,i,k]   = sum_{j,e} g[b,i,j,e] * W[i,j,e,k]      grad_u [B, I, K]
//   grad_W[i,j,e,k] = sum_b     g[b,i,j,e] * u[b,i,k]        grad_W [I, J, E, K]
Status predict_backward(const TensorView &g, const TensorView &u, const TensorView &W, const TensorView &grad_u,
                        const TensorView &grad_W, const Options &options = {});

// ---- squash, dynamic routing and the DigitCaps layer (docs/design.md §1.2) ----
//
//   squash(s) = (|s|^2 / (1 + |s|^2)) s / sqrt(|s|^2 + eps),  eps = 1e-9
//
// Routing runs `iterations` rounds of softmax over out_caps, weighted sum
// over in_caps, squash and agreement update, 1 to kMaxRoutingIterations of
// them (unsupported_iterations otherwise, before any work). The Halide
// kernels unroll the count when they are built: 1, 3 and 5 are built
// (list_implementations() says which per implementation); on the CPU the
// defaults run any other count by per-iteration kernels (implementation
// "steps", which takes every count), and on CUDA the hand-written cuda_*
// implementations take any count: the CUDA defaults fall through to them
// where no Halide default is built for the count. Every op's rows and
// default order: runtime/src/routing_implementations.cpp.
//
// NaN and +-inf propagate as the formulas do in IEEE arithmetic (docs/design.md
// §1.2): e.g. a NaN in u_hat makes all of its batch element's v NaN after
// one agreement update; nothing is silently dropped.
constexpr int kMaxRoutingIterations = 32;
//
// b0, the initial routing logits [in_caps, out_caps], may be an empty view
// (TensorView{}: null data, empty shape), which means zeros.

// v = squash(s) over the last dimension; s and v of any rank >= 1, same shape.
Status squash(const TensorView &s, const TensorView &v, const Options &options = {});

//   u_hat [B, I, J, E], b0 [I, J] or empty, v [B, J, E]
Status route(const TensorView &u_hat, const TensorView &b0, const TensorView &v, int iterations = 3,
             const Options &options = {});

// Prediction (u_hat = W u, never stored) followed by routing, in one pipeline.
// (Defaults and implementations of every op: list_implementations().)
//   u [B, I, K], W [I, J, E, K], b0 [I, J] or empty, v [B, J, E]
Status digitcaps(const TensorView &u, const TensorView &W, const TensorView &b0, const TensorView &v,
                 int iterations = 3, const Options &options = {});

// Gradients of route through every iteration, given grad_v = dL/dv [B, J, E]:
// grad_u_hat [B, I, J, E] and grad_b0 [I, J] (summed over the batch; may be an
// empty view when not wanted). Implementations: list_implementations(); on the
// CPU "steps" (the default), "cpu" (the hand-derived backward unrolled) and
// "root_autodiff" (Halide's propagate_adjoints, every stage compute_root).
Status route_backward(const TensorView &u_hat, const TensorView &b0, const TensorView &grad_v,
                      const TensorView &grad_u_hat, const TensorView &grad_b0, int iterations = 3,
                      const Options &options = {});

// Gradients of digitcaps: grad_u [B, I, K], grad_W [I, J, E, K], grad_b0 [I, J]
// (may be an empty view). Implementations as for route_backward.
Status digitcaps_backward(const TensorView &u, const TensorView &W, const TensorView &b0, const TensorView &grad_v,
                          const TensorView &grad_u, const TensorView &grad_W, const TensorView &grad_b0,
                          int iterations = 3, const Options &options = {});

// Training's pair: the forward keeps the weighted sums s of every routing
// iteration, routing_s [iterations, B, J, E] (v of iteration t is
// squash(routing_s[t]); 240 KB at MNIST b128 and 3 iterations), and the
// backward starts from them. digitcaps_backward recomputes them, one pass
// over u_hat's B·I·J·E values an iteration; digitcaps_backward_with_s reads
// them instead. The gradients are those of digitcaps at the s given (the
// forward's own s, up to float32 rounding, when they come from
// digitcaps_with_s with the same u, W and b0). Their Halide kernels are built
// for 3 iterations on CUDA and for 1, 3 and 5 on the CPU, where other counts
// run the per-iteration kernels; the hand-written "cuda_tensor" runs any
// count on CUDA, and is the CUDA default at the other counts.
// routing_s must be [iterations, batch, out_caps, out_dim] (bad_rank,
// extent_mismatch otherwise).
Status digitcaps_with_s(const TensorView &u, const TensorView &W, const TensorView &b0, const TensorView &v,
                        const TensorView &routing_s, int iterations = 3, const Options &options = {});
Status digitcaps_backward_with_s(const TensorView &u, const TensorView &W, const TensorView &b0,
                                 const TensorView &routing_s, const TensorView &grad_v, const TensorView &grad_u,
                                 const TensorView &grad_W, const TensorView &grad_b0, int iterations = 3,
                                 const Options &options = {});

// Training's pair keeping the coupling coefficients too: digitcaps_with_c
// also stores every iteration's c into routing_c [iterations, B, I, J] (c_t =
// softmax over j of iteration t's logits; 17.7 MB at MNIST b128 and 3
// iterations, against u_hat's 94 MB), and digitcaps_backward_with_c reads
// routing_s and routing_c rather than computing c again from the logits,
// which takes a pass over u_hat's B·I·J·E values an iteration. The
// gradients are those of digitcaps at the s and c given. One implementation:
// the hand-written "cuda_tensor" on CUDA, the default there (any iteration
// count; out_caps, out_dim and in_dim at most 16, unsupported_shape beyond);
// any other is unknown_implementation. routing_c must be [iterations,
// batch, in_caps, out_caps] (bad_rank, extent_mismatch otherwise).
Status digitcaps_with_c(const TensorView &u, const TensorView &W, const TensorView &b0, const TensorView &v,
                        const TensorView &routing_s, const TensorView &routing_c, int iterations = 3,
                        const Options &options = {});
Status digitcaps_backward_with_c(const TensorView &u, const TensorView &W, const TensorView &b0,
                                 const TensorView &routing_s, const TensorView &routing_c, const TensorView &grad_v,
                                 const TensorView &grad_u, const TensorView &grad_W, const TensorView &grad_b0,
                                 int iterations = 3, const Options &options = {});

// ---- capsule convolution with 4x4 pose matrices (docs/design.md §1.3) ----
//
//   input  [n, H, W, ci, 4, 4], filter [kh, kw, ci, co, 4, 4], output [n, OH, OW, co, 4, 4]
//   OH = (H + 2 pad - kh) / stride + 1, OW = (W + 2 pad - kw) / stride + 1
//   output[n,y,x,co] = sum_{dy,dx,ci} input[n, y stride + dy - pad, x stride + dx - pad, ci] . filter[dy,dx,ci,co]
// where . is the 4x4 matrix product (O_ij = sum_c I_ic K_cj) and input outside
// the image is zero. stride (1 to 2^20) and pad (0 to 2^20) are run-time values:
// any pair is served by the same kernels (bad_parameter otherwise; out_of_memory
// where a kernel's padded input would pass 2^31-1 bytes); the output's spatial
// extents must be the ones above (extent_mismatch otherwise). The forward's
// Winograd implementations (winograd2x2_*, winograd4x4_*) take 3x3 filters
// at stride 1 only (unsupported_shape otherwise); with no implementation
// named, CUDA runs winograd4x4_staged for those (the defaults:
// runtime/src/capsconv_implementations.cpp).
struct ConvParams {
    int stride = 1;
    int pad = 0;
};

Status capsconv(const TensorView &input, const TensorView &filter, const TensorView &output,
                const ConvParams &params = {}, const Options &options = {});

// Both gradients given grad_output = dL/doutput [n, OH, OW, co, 4, 4]:
// grad_input [n, H, W, ci, 4, 4] and grad_filter [kh, kw, ci, co, 4, 4].
Status capsconv_backward(const TensorView &input, const TensorView &filter, const TensorView &grad_output,
                         const TensorView &grad_input, const TensorView &grad_filter, const ConvParams &params = {},
                         const Options &options = {});

// What can be run: one entry per (operator, implementation, device), read
// from the runtime's tables (runtime/src/*_implementations.cpp), in table
// order. With no implementation named, an operator runs its default: the
// first of its default rows on the device (default_rank 1, 2, ...) that is
// the default for the arguments (default_when says where), takes the
// iteration count, and takes the shape; a row that refuses the shape
// (unsupported_shape) hands the call on to the next.
struct ImplementationInfo {
    std::string op;              // "predict", "predict_backward", "squash", "route", "route_backward",
                                 // "digitcaps", "digitcaps_backward", "digitcaps_with_s",
                                 // "digitcaps_backward_with_s", "digitcaps_with_c",
                                 // "digitcaps_backward_with_c", "capsconv" or "capsconv_backward"
    std::string implementation;  // e.g. "cpu", "batch_rows", "stage_per_kernel", "steps", "cuda_naive"
    Device device;               // cpu, cuda or opencl
    std::string description;
    std::vector<int> iterations{};  // routing ops: the iteration counts it runs; empty otherwise
    int default_rank = 0;           // its place in the default walk on its device (1 first); 0: by name only
    std::string default_when;       // where it is the default (empty: by name only)
    std::string family;             // "halide", "hand_written" or "library"
};
std::vector<ImplementationInfo> list_implementations();
// The first default row of `op` on `device` (cpu, cuda or opencl) that
// takes `iterations` (routing ops; 0 for the others): what a call with no
// implementation named runs where that row's default_when and shape limits
// hold (else a later row; list_implementations() has them all). Empty when
// the op has no default there.
std::string default_implementation(const std::string &op, Device device, int iterations = 0);
// The name of the general Halide schedule of `device`: "cpu" on the CPU,
// "tuned" on CUDA and OpenCL. It is no operator's default as such (see
// default_implementation(op, device)); kept for existing callers.
std::string default_implementation(Device device);

// Whether this build carries CUDA code, and whether a CUDA device is usable now.
bool cuda_built();
bool cuda_device_available();
// Name of the CUDA device (empty if none).
std::string cuda_device_name();

// Whether this build carries the OpenCL kernels, whether the OpenCL device
// (Device::opencl) is usable now, and its name with its platform's (empty if
// none). The first call looks for the device and makes its context.
bool opencl_built();
bool opencl_device_available();
std::string opencl_device_name();

// The Halide kernels' device intermediates (the fused routing passes' partial
// sums, the backward's stages) go to a cache when a call ends, and later
// calls on the same stream reuse them instead of paying cuMemAlloc and
// cuMemFree, which waits for the device. This hands the cached memory back
// to CUDA; it waits for the device. Halide also frees the oldest cached
// blocks when the cache passes 32 of them (after calls on many streams or
// shapes), and a call that does so waits for the device too. No-op without
// a CUDA device.
Status release_cached_device_memory();

// The Halide kernels' host intermediates of 1 MiB or more (the CPU training
// backward's alpha, 35 MB at MNIST b128) are kept when a call ends, and later
// calls reuse them instead of mapping and faulting in fresh pages; at most
// 256 MiB is kept. cached_host_memory_bytes() is what is kept now (none in
// use by a call); release_cached_host_memory() hands it back to the C heap.
Status release_cached_host_memory();
size_t cached_host_memory_bytes();
const char *device_name(Device device);

}  // namespace halcaps

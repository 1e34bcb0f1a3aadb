// The operators' implementation tables (implementation_table.h says how a
// call walks them) and the calls they take: an entry point checks its
// arguments, resolves the device, fills a call and runs its table.
#pragma once

#include <cstdint>
#include <vector>

#include "implementation_table.h"
#include "kernel_registry.h"

namespace halcaps::detail {

// ---- prediction (predict_implementations.cpp)
struct PredictCall : CallSite {
    const TensorView *u = nullptr, *W = nullptr, *u_hat = nullptr;
};
struct PredictBackwardCall : CallSite {
    const TensorView *g = nullptr, *u = nullptr, *W = nullptr, *grad_u = nullptr, *grad_W = nullptr;
};
const ImplementationTable<PredictCall> &predict_implementations();
const ImplementationTable<PredictBackwardCall> &predict_backward_implementations();

// An empty view (null data, no shape, no strides) stands for an optional
// tensor left out (b0, grad_b0). Anything else is checked as a tensor.
inline bool is_absent(const TensorView &t) { return t.data == nullptr && t.shape.empty() && t.strides.empty(); }

// ---- squash, routing and the DigitCaps layer (routing_implementations.cpp)
// One call for all of them: the tensors an op does not take stay null.
// b0 and grad_b0 may be absent views (TensorView{}).
struct RoutingExtents {
    int64_t B = 0, I = 0, J = 0, E = 0, K = 0;  // batch, in_caps, out_caps, out_dim, in_dim (layer ops)
    int64_t logits_size() const { return B * I * J; }
    int64_t s_size() const { return B * J * E; }
};
struct RoutingCall : CallSite {
    RoutingExtents x;
    const TensorView *s = nullptr;  // squash's input (v its output)
    const TensorView *u_hat = nullptr, *u = nullptr, *W = nullptr, *b0 = nullptr, *v = nullptr;
    const TensorView *routing_s = nullptr, *routing_c = nullptr;
    const TensorView *grad_v = nullptr, *grad_u_hat = nullptr, *grad_u = nullptr, *grad_W = nullptr, *grad_b0 = nullptr;
    bool backward() const { return grad_v != nullptr; }
};
// The table of a routing op ("squash", "route", ..., "digitcaps_backward_with_c").
const ImplementationTable<RoutingCall> &routing_implementations(const std::string &op);
// The routing ops' names, in list order.
const std::vector<const char *> &routing_op_names();
// How the rows run: a Halide kernel of the op (digitcaps.cpp), the chained
// per-iteration kernels on any device ("steps", routing_steps.cpp), or the
// hand-written CUDA named `implementation` (digitcaps.cpp).
Status run_routing_kernel(const RoutingCall &call, const HalideKernelEntry &kernel);
Status run_routing_steps(const RoutingCall &call);
Status run_routing_hand_cuda(const RoutingCall &call, const std::string &implementation);

// ---- the capsule convolution (capsconv_implementations.cpp)
struct CapsConvCall : CallSite {
    const TensorView *input = nullptr, *filter = nullptr, *output = nullptr;                 // the forward
    const TensorView *grad_output = nullptr, *grad_input = nullptr, *grad_filter = nullptr;  // the backward
    ConvParams params;
    int64_t kernel_h = 0, kernel_w = 0, out_caps = 0;
    std::vector<int32_t> direct_scalars;  // the direct kernels' stride and pad (capsconv.cpp, kernel_scalars)
};
const ImplementationTable<CapsConvCall> &capsconv_implementations();
const ImplementationTable<CapsConvCall> &capsconv_backward_implementations();

}  // namespace halcaps::detail

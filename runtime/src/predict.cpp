// Entry points for capsule prediction: argument checks and the device, then
// the operator's table (predict_implementations.cpp).
#include <cstdint>
#include <vector>

#include "argument_checks.h"
#include "implementations.h"
#include "operator_support.h"

namespace halcaps {

namespace {
using detail::ArgumentChecks;
using detail::check_device_ready;
}  // namespace

Status predict(const TensorView &u, const TensorView &W, const TensorView &u_hat, const Options &options) {
    const char *op = "predict";
    ArgumentChecks checks(op);
    checks.tensor("u", u, {"batch", "in_caps", "in_dim"});
    checks.tensor("W", W, {"in_caps", "out_caps", "out_dim", "in_dim"});
    checks.tensor("u_hat", u_hat, {"batch", "in_caps", "out_caps", "out_dim"});
    const Device device = checks.resolve_device(options.device);
    if (!checks.status().ok()) return checks.status();
    if (Status s = check_device_ready(op, device); !s.ok()) return s;

    detail::PredictCall call;
    call.op = op, call.device = device, call.options = &options;
    call.u = &u, call.W = &W, call.u_hat = &u_hat;
    return detail::run_implementation(detail::predict_implementations(), call);
}

Status predict_backward(const TensorView &g, const TensorView &u, const TensorView &W, const TensorView &grad_u,
                        const TensorView &grad_W, const Options &options) {
    const char *op = "predict_backward";
    ArgumentChecks checks(op);
    checks.tensor("g", g, {"batch", "in_caps", "out_caps", "out_dim"});
    checks.tensor("u", u, {"batch", "in_caps", "in_dim"});
    checks.tensor("W", W, {"in_caps", "out_caps", "out_dim", "in_dim"});
    checks.tensor("grad_u", grad_u, {"batch", "in_caps", "in_dim"});
    checks.tensor("grad_W", grad_W, {"in_caps", "out_caps", "out_dim", "in_dim"});
    const Device device = checks.resolve_device(options.device);
    if (!checks.status().ok()) return checks.status();
    if (Status s = check_device_ready(op, device); !s.ok()) return s;

    detail::PredictBackwardCall call;
    call.op = op, call.device = device, call.options = &options;
    call.g = &g, call.u = &u, call.W = &W, call.grad_u = &grad_u, call.grad_W = &grad_W;
    return detail::run_implementation(detail::predict_backward_implementations(), call);
}

}  // namespace halcaps

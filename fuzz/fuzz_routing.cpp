// libFuzzer target: the argument checks of squash, route, digitcaps, their
// backward passes and the training pairs (digitcaps_with_s/_with_c and their
// backward), including the iteration count, on views built from the fuzzer's
// bytes (fuzz/fuzz_support.h). Extents stay small so that accepted calls run
// fast.
#include "fuzz/fuzz_support.h"

using namespace halcaps;
using namespace halcaps::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Bytes in(data, size);
    const int which = in.byte() % 9;
    const int64_t B = in.small(3), I = in.small(5), K = in.small(5), J = in.small(4), E = in.small(5);
    const int iterations = make_iterations(in);
    // The training pairs' stored iterations: the count itself where it can be an extent.
    const int64_t T = iterations >= 1 && iterations <= 17 ? iterations : 1;
    const Options options = make_options(in);
    // Every argument is built, in one order, whichever op runs: an input's
    // bytes mean the same for every op.
    Arg u = make_arg(in, {B, I, K}, false, 1), W = make_arg(in, {I, J, E, K}, false, 2);
    Arg u_hat = make_arg(in, {B, I, J, E}, false, 3), b0 = make_arg(in, {I, J}, false, 4);
    Arg grad_v = make_arg(in, {B, J, E}, false, 5);
    Arg v = make_arg(in, {B, J, E}, true, 6);
    Arg grad_u = make_arg(in, {B, I, K}, true, 7), grad_W = make_arg(in, {I, J, E, K}, true, 8);
    Arg grad_u_hat = make_arg(in, {B, I, J, E}, true, 9), grad_b0 = make_arg(in, {I, J}, true, 10);
    const bool s_in = which == 6 || which == 8;  // routing_s is read by the backward passes, written by the forwards
    Arg routing_s = make_arg(in, {T, B, J, E}, !s_in, 11), routing_c = make_arg(in, {T, B, I, J}, which == 7, 12);
    switch (which) {
    case 0: {
        Arg s = make_arg(in, {B, J, E}, false, 13), out = make_arg(in, {B, J, E}, true, 14);
        check_call("squash", squash(s.view, out.view, options), {&s, &out});
        break;
    }
    case 1:
        check_call("route", route(u_hat.view, b0.view, v.view, iterations, options), {&u_hat, &b0, &v});
        break;
    case 2:
        check_call("route_backward",
                   route_backward(u_hat.view, b0.view, grad_v.view, grad_u_hat.view, grad_b0.view, iterations, options),
                   {&u_hat, &b0, &grad_v, &grad_u_hat, &grad_b0});
        break;
    case 3:
        check_call("digitcaps", digitcaps(u.view, W.view, b0.view, v.view, iterations, options), {&u, &W, &b0, &v});
        break;
    case 4:
        check_call("digitcaps_backward",
                   digitcaps_backward(u.view, W.view, b0.view, grad_v.view, grad_u.view, grad_W.view, grad_b0.view,
                                      iterations, options),
                   {&u, &W, &b0, &grad_v, &grad_u, &grad_W, &grad_b0});
        break;
    case 5:
        check_call("digitcaps_with_s",
                   digitcaps_with_s(u.view, W.view, b0.view, v.view, routing_s.view, iterations, options),
                   {&u, &W, &b0, &v, &routing_s});
        break;
    case 6:
        check_call("digitcaps_backward_with_s",
                   digitcaps_backward_with_s(u.view, W.view, b0.view, routing_s.view, grad_v.view, grad_u.view,
                                             grad_W.view, grad_b0.view, iterations, options),
                   {&u, &W, &b0, &routing_s, &grad_v, &grad_u, &grad_W, &grad_b0});
        break;
    case 7:
        check_call(
            "digitcaps_with_c",
            digitcaps_with_c(u.view, W.view, b0.view, v.view, routing_s.view, routing_c.view, iterations, options),
            {&u, &W, &b0, &v, &routing_s, &routing_c});
        break;
    default:
        check_call("digitcaps_backward_with_c",
                   digitcaps_backward_with_c(u.view, W.view, b0.view, routing_s.view, routing_c.view, grad_v.view,
                                             grad_u.view, grad_W.view, grad_b0.view, iterations, options),
                   {&u, &W, &b0, &routing_s, &routing_c, &grad_v, &grad_u, &grad_W, &grad_b0});
        break;
    }
    return 0;
}

// libFuzzer target: the argument checks of predict and predict_backward (and
// the small query functions), on views built from the fuzzer's bytes
// (fuzz/fuzz_support.h). Extents stay small so that accepted calls run fast.
#include "fuzz/fuzz_support.h"

using namespace halcaps;
using namespace halcaps::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Bytes in(data, size);
    const int which = in.byte() % 3;
    const int64_t B = in.small(4), I = in.small(5), K = in.small(9), J = in.small(5), E = in.small(17);
    const Options options = make_options(in);
    if (which == 0) {
        Arg u = make_arg(in, {B, I, K}, false, 1), W = make_arg(in, {I, J, E, K}, false, 2);
        Arg u_hat = make_arg(in, {B, I, J, E}, true, 3);
        check_call("predict", predict(u.view, W.view, u_hat.view, options), {&u, &W, &u_hat});
    } else if (which == 1) {
        Arg g = make_arg(in, {B, I, J, E}, false, 4), u = make_arg(in, {B, I, K}, false, 5);
        Arg W = make_arg(in, {I, J, E, K}, false, 6);
        Arg grad_u = make_arg(in, {B, I, K}, true, 7), grad_W = make_arg(in, {I, J, E, K}, true, 8);
        check_call("predict_backward", predict_backward(g.view, u.view, W.view, grad_u.view, grad_W.view, options),
                   {&g, &u, &W, &grad_u, &grad_W});
    } else {
        // Any status code and device value has a name; the queries never fail.
        const auto code = static_cast<StatusCode>(in.byte());
        if (status_code_name(code) == nullptr) fail("status_code_name returned null", {});
        if (device_name(options.device) == nullptr) fail("device_name returned null", {});
        (void)default_implementation(options.device);
        (void)release_cached_device_memory();
    }
    return 0;
}

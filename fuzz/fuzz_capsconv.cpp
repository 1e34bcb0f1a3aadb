// libFuzzer target: the argument checks of capsconv and capsconv_backward,
// stride and pad included, on views built from the fuzzer's bytes
// (fuzz/fuzz_support.h). Extents stay small so that accepted calls run fast.
#include "fuzz/fuzz_support.h"

using namespace halcaps;
using namespace halcaps::fuzz;

namespace {

// Mostly small values, sometimes an extreme one.
int make_param(Bytes &in) {
    const uint8_t b = in.byte();
    if (b < 224) return b % 6 - 1;  // -1..4
    static const std::vector<int> extremes = {std::numeric_limits<int>::min(), -7, 1 << 20,
                                              std::numeric_limits<int>::max()};
    return in.pick(extremes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Bytes in(data, size);
    const bool backward = in.byte() & 1;
    const int64_t n = in.small(2), H = in.small(7), W = in.small(7), ci = in.small(3), co = in.small(3);
    const int64_t kh = in.small(4), kw = in.small(4);
    ConvParams params;
    params.stride = make_param(in);
    params.pad = make_param(in);
    // The output's extents for these parameters where they make sense, else 1.
    const int64_t stride = params.stride >= 1 ? params.stride : 1,
                  pad = params.pad >= 0 && params.pad < 8 ? params.pad : 0;
    const int64_t OH = H + 2 * pad >= kh ? (H + 2 * pad - kh) / stride + 1 : 1;
    const int64_t OW = W + 2 * pad >= kw ? (W + 2 * pad - kw) / stride + 1 : 1;
    const Options options = make_options(in);
    if (std::getenv("HALCAPS_FUZZ_VERBOSE") != nullptr) {
        std::fprintf(stderr, "stride %d pad %d, device %d implementation '%s'\n", params.stride, params.pad,
                     static_cast<int>(options.device), options.implementation.c_str());
    }
    Arg input = make_arg(in, {n, H, W, ci, 4, 4}, false, 1), filter = make_arg(in, {kh, kw, ci, co, 4, 4}, false, 2);
    if (!backward) {
        Arg output = make_arg(in, {n, OH, OW, co, 4, 4}, true, 3);
        check_call("capsconv", capsconv(input.view, filter.view, output.view, params, options),
                   {&input, &filter, &output});
    } else {
        Arg grad_output = make_arg(in, {n, OH, OW, co, 4, 4}, false, 4);
        Arg grad_input = make_arg(in, {n, H, W, ci, 4, 4}, true, 5);
        Arg grad_filter = make_arg(in, {kh, kw, ci, co, 4, 4}, true, 6);
        check_call("capsconv_backward",
                   capsconv_backward(input.view, filter.view, grad_output.view, grad_input.view, grad_filter.view,
                                     params, options),
                   {&input, &filter, &grad_output, &grad_input, &grad_filter});
    }
    return 0;
}

// float64 reference for the capsule convolution (capsconv_reference.h): plain
// loops over every output element and every term of its sum, no tricks. The
// gradients are the same loops with the product's adjoint scattered back.
#include "capsconv_reference.h"

namespace halcaps::reference {

namespace {

// Index helpers, row-major.
struct Layout {
    const CapsConvShape &s;
    int64_t OH, OW;
    explicit Layout(const CapsConvShape &shape) : s(shape), OH(shape.out_height()), OW(shape.out_width()) {}
    int64_t in(int64_t n, int64_t y, int64_t x, int64_t ci) const {
        return (((n * s.height + y) * s.width + x) * s.in_caps + ci) * 16;
    }
    int64_t filt(int64_t dy, int64_t dx, int64_t ci, int64_t co) const {
        return (((dy * s.kernel_w + dx) * s.in_caps + ci) * s.out_caps + co) * 16;
    }
    int64_t out(int64_t n, int64_t y, int64_t x, int64_t co) const {
        return (((n * OH + y) * OW + x) * s.out_caps + co) * 16;
    }
};

// Calls term(input offset, filter offset, output offset) for every
// (output pixel, filter tap, ci, co); the input offset is -1 where the input
// pixel lies in the zero padding. `with_padding` false: only the terms whose
// input pixel lies inside the image.
//
// NaN and inf (docs/design.md §1.3 in IEEE arithmetic, as PyTorch's im2col
// convolution computes it): the forward's sum runs over every tap, and a
// padded input is a zero that multiplies the filter, so a NaN or inf tap
// makes the outputs it meets in the padding NaN (0 * inf); so does the
// filter's gradient, the sum of the padded input times grad_output. The
// input's gradient sums only the terms in which the input pixel appears
// (the padding is no input), so a filter tap reaches only the pixels it
// multiplies.
template <typename Term>
void for_each_term(const CapsConvShape &s, bool with_padding, Term term) {
    const Layout L(s);
    for (int64_t n = 0; n < s.batch; n++)
        for (int64_t y = 0; y < L.OH; y++)
            for (int64_t x = 0; x < L.OW; x++)
                for (int64_t dy = 0; dy < s.kernel_h; dy++)
                    for (int64_t dx = 0; dx < s.kernel_w; dx++) {
                        const int64_t iy = y * s.stride + dy - s.pad, ix = x * s.stride + dx - s.pad;
                        const bool padded = iy < 0 || iy >= s.height || ix < 0 || ix >= s.width;
                        if (padded && !with_padding) continue;
                        for (int64_t ci = 0; ci < s.in_caps; ci++)
                            for (int64_t co = 0; co < s.out_caps; co++)
                                term(padded ? -1 : L.in(n, iy, ix, ci), L.filt(dy, dx, ci, co), L.out(n, y, x, co));
                    }
}

template <typename T>
std::vector<double> forward(const CapsConvShape &s, const T *I, const T *K) {
    std::vector<double> O(s.output_size(), 0.0);
    for_each_term(s, true, [&](int64_t i0, int64_t k0, int64_t o0) {
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                for (int c = 0; c < 4; c++)
                    O[o0 + i * 4 + j] += (i0 < 0 ? 0.0 : double(I[i0 + i * 4 + c])) * double(K[k0 + c * 4 + j]);
    });
    return O;
}

template <typename T>
std::vector<double> grad_input(const CapsConvShape &s, const T *g, const T *K) {
    std::vector<double> gI(s.input_size(), 0.0);
    for_each_term(s, false, [&](int64_t i0, int64_t k0, int64_t o0) {
        for (int i = 0; i < 4; i++)
            for (int c = 0; c < 4; c++)
                for (int j = 0; j < 4; j++) gI[i0 + i * 4 + c] += double(g[o0 + i * 4 + j]) * double(K[k0 + c * 4 + j]);
    });
    return gI;
}

template <typename T>
std::vector<double> grad_filter(const CapsConvShape &s, const T *g, const T *I) {
    std::vector<double> gK(s.filter_size(), 0.0);
    for_each_term(s, true, [&](int64_t i0, int64_t k0, int64_t o0) {
        for (int c = 0; c < 4; c++)
            for (int j = 0; j < 4; j++)
                for (int i = 0; i < 4; i++)
                    gK[k0 + c * 4 + j] += (i0 < 0 ? 0.0 : double(I[i0 + i * 4 + c])) * double(g[o0 + i * 4 + j]);
    });
    return gK;
}

}  // namespace

std::vector<double> capsconv_f64(const CapsConvShape &s, const double *input, const double *filter) {
    return forward(s, input, filter);
}
std::vector<double> capsconv_f64(const CapsConvShape &s, const float *input, const float *filter) {
    return forward(s, input, filter);
}
std::vector<double> capsconv_grad_input_f64(const CapsConvShape &s, const double *grad_output, const double *filter) {
    return grad_input(s, grad_output, filter);
}
std::vector<double> capsconv_grad_input_f64(const CapsConvShape &s, const float *grad_output, const float *filter) {
    return grad_input(s, grad_output, filter);
}
std::vector<double> capsconv_grad_filter_f64(const CapsConvShape &s, const double *grad_output, const double *input) {
    return grad_filter(s, grad_output, input);
}
std::vector<double> capsconv_grad_filter_f64(const CapsConvShape &s, const float *grad_output, const float *input) {
    return grad_filter(s, grad_output, input);
}

}  // namespace halcaps::reference

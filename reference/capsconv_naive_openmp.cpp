// The naive float32 loop nest of the capsule convolution a C++ programmer
// would write first, built -O3 with OpenMP over (n, y): the CPU baseline.
// Deliberately not hand-optimised.
#include "capsconv_reference.h"

namespace halcaps::reference {

void capsconv_naive_openmp(const CapsConvShape &s, const float *input, const float *filter, float *output) {
    const int64_t OH = s.out_height(), OW = s.out_width();
#pragma omp parallel for collapse(2)
    for (int64_t n = 0; n < s.batch; n++)
        for (int64_t y = 0; y < OH; y++)
            for (int64_t x = 0; x < OW; x++)
                for (int64_t co = 0; co < s.out_caps; co++)
                    for (int64_t i = 0; i < 4; i++)
                        for (int64_t j = 0; j < 4; j++) {
                            float sum = 0;
                            for (int64_t dy = 0; dy < s.kernel_h; dy++)
                                for (int64_t dx = 0; dx < s.kernel_w; dx++) {
                                    const int64_t iy = y * s.stride + dy - s.pad, ix = x * s.stride + dx - s.pad;
                                    if (iy < 0 || iy >= s.height || ix < 0 || ix >= s.width) continue;
                                    for (int64_t ci = 0; ci < s.in_caps; ci++)
                                        for (int64_t c = 0; c < 4; c++)
                                            sum +=
                                                input[(((n * s.height + iy) * s.width + ix) * s.in_caps + ci) * 16 +
                                                      i * 4 + c] *
                                                filter[(((dy * s.kernel_w + dx) * s.in_caps + ci) * s.out_caps + co) *
                                                           16 +
                                                       c * 4 + j];
                                }
                            output[(((n * OH + y) * OW + x) * s.out_caps + co) * 16 + i * 4 + j] = sum;
                        }
}

}  // namespace halcaps::reference

// The CPU's fp32 FMA peak, measured rather than computed from a data sheet:
// the build machine reports only "AMD EPYC", so its vector width per FMA
// unit, its clock under load and whether its cores are SMT siblings are not
// known from the outside. Compute-bound CPU rows (the capsule convolution)
// are reported as a percentage of this number, measured in the same run.
#pragma once

#include <string>

namespace halcaps::cli {

struct FmaPeak {
    double gflops = 0;  // fp32 GFLOP/s over all hardware threads (an FMA counts 2)
    int threads = 0;    // hardware threads used, one loop each
    std::string isa;    // avx512f, avx2+fma, or scalar
};

// Runs independent chains of fp32 FMAs in registers on every hardware
// thread for about `seconds` and returns the best of three trials.
FmaPeak measure_cpu_fma_peak(double seconds = 0.3);

}  // namespace halcaps::cli

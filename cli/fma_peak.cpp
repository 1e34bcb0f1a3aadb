#include "fma_peak.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace halcaps::cli {

namespace {

// Twelve independent accumulator chains: enough to cover an FMA latency of
// 4-5 cycles on two pipes. Each iteration is 12 vector FMAs; the result is
// returned so the loop cannot be removed.
constexpr int kChains = 12;

#if defined(__x86_64__)
__attribute__((target("avx512f"))) float fma_chains_avx512(long iterations) {
    __m512 acc[kChains];
    for (int c = 0; c < kChains; c++) acc[c] = _mm512_set1_ps(1.0f + 0.001f * c);
    const __m512 scale = _mm512_set1_ps(0.999999f), shift = _mm512_set1_ps(1e-6f);
    for (long n = 0; n < iterations; n++) {
#pragma GCC unroll 12
        for (int c = 0; c < kChains; c++) acc[c] = _mm512_fmadd_ps(acc[c], scale, shift);
    }
    // Summed through memory, as below: GCC 12 warns (-Wuninitialized) inside
    // its own _mm512_reduce_add_ps.
    alignas(64) float lanes[16];
    float sum = 0;
    for (int c = 0; c < kChains; c++) {
        _mm512_store_ps(lanes, acc[c]);
        for (float x : lanes) sum += x;
    }
    return sum;
}

__attribute__((target("avx2,fma"))) float fma_chains_avx2(long iterations) {
    __m256 acc[kChains];
    for (int c = 0; c < kChains; c++) acc[c] = _mm256_set1_ps(1.0f + 0.001f * c);
    const __m256 scale = _mm256_set1_ps(0.999999f), shift = _mm256_set1_ps(1e-6f);
    for (long n = 0; n < iterations; n++) {
#pragma GCC unroll 12
        for (int c = 0; c < kChains; c++) acc[c] = _mm256_fmadd_ps(acc[c], scale, shift);
    }
    alignas(32) float lanes[8];
    float sum = 0;
    for (int c = 0; c < kChains; c++) {
        _mm256_store_ps(lanes, acc[c]);
        for (float x : lanes) sum += x;
    }
    return sum;
}
#endif

float fma_chains_scalar(long iterations) {
    float acc[kChains];
    for (int c = 0; c < kChains; c++) acc[c] = 1.0f + 0.001f * c;
    for (long n = 0; n < iterations; n++) {
#pragma GCC unroll 12
        for (int c = 0; c < kChains; c++) acc[c] = acc[c] * 0.999999f + 1e-6f;
    }
    float sum = 0;
    for (float x : acc) sum += x;
    return sum;
}

struct Isa {
    const char *name;
    int lanes;
    float (*run)(long);
};

Isa best_isa() {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return {"avx512f", 16, fma_chains_avx512};
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return {"avx2+fma", 8, fma_chains_avx2};
#endif
    return {"scalar", 1, fma_chains_scalar};
}

// One trial: every thread runs `iterations`; GFLOP/s over the wall time.
double trial(const Isa &isa, int threads, long iterations) {
    std::vector<std::thread> pool;
    std::vector<float> sink(threads);
    const auto start = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; t++) pool.emplace_back([&, t] { sink[t] = isa.run(iterations); });
    for (auto &th : pool) th.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    volatile float keep = 0;
    for (float s : sink) keep = keep + s;
    const double flops = 2.0 * kChains * isa.lanes * double(iterations) * threads;
    return flops / seconds / 1e9;
}

}  // namespace

FmaPeak measure_cpu_fma_peak(double seconds) {
    const Isa isa = best_isa();
    const int threads = std::max(1u, std::thread::hardware_concurrency());
    // Size the loop from a short single-thread probe so each trial lasts
    // about `seconds` whatever the machine's speed.
    const long probe = 1L << 20;
    const auto start = std::chrono::steady_clock::now();
    volatile float keep = isa.run(probe);
    (void)keep;
    const double probe_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const long iterations = std::max(probe, static_cast<long>(probe * seconds / std::max(probe_s, 1e-6)));
    FmaPeak peak;
    peak.threads = threads;
    peak.isa = isa.name;
    for (int t = 0; t < 3; t++) peak.gflops = std::max(peak.gflops, trial(isa, threads, iterations));
    return peak;
}

}  // namespace halcaps::cli

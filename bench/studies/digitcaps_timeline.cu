// Timeline of one `cuda_tensor` DigitCaps forward (issue 4): where the time
// of a call goes, kernel by kernel and block by block.
//
// The layer's 3 iterations are 6 kernels: a pass over the input capsules
// (the first without logits), then the squash kernel that adds the passes'
// partial sums, each launched overlapping the one ahead of it. This program
// runs the layer built with per-block timestamps (digitcaps_timeline.cuh: a
// separate build of digitcaps_tensor_cores.cu, whose kernels are the
// library's plus the marks) and prints, for each kernel, the median over
// calls of when its blocks entered, when the kernel ahead let them go on,
// when their first step's copies had landed, when their steps were done and
// when they ended, in µs from the call's first block.
//
// Before timing, v of one call is checked against the float64 reference
// (relative to the largest |v|, 1e-4, as the tests hold every
// implementation) and every call's v must equal that call's bit for bit.
// The inputs rotate over copies that together pass L2 (as `halcaps bench`
// does), so every call reads u and W from memory.
//
// Build (CMake target halcaps_digitcaps_timeline, CUDA builds only):
//   cmake --build build --target halcaps_digitcaps_timeline
// Run: build/halcaps_digitcaps_timeline [--csv PREFIX] [batch ...]   (default 128 512)
// With --csv, the last call's records of each batch go to PREFIX_bBATCH.csv.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cli/device_wait.h"
#include "cuda_check.h"
#include "digitcaps_cuda.h"
#include "digitcaps_reference.h"
#include "digitcaps_timeline.cuh"

namespace {

using halcaps::cuda_reference::DigitCapsLayerShape;
using halcaps::cuda_reference::DigitCapsTensorPlan;
namespace timeline = halcaps::cuda_reference::timeline;

constexpr int64_t kIn = 1152, kInDim = 8, kOut = 10, kOutDim = 16;
constexpr int kIterations = 3, kWarmup = 3, kRepeats = 15, kCopies = 8;
constexpr unsigned kCapacity = 1 << 15;
constexpr int kLaunches = 2 * kIterations;
const char *const kLaunchNames[kLaunches] = {"pass 1 (first)", "squash 1",        "pass 2 (logits)",
                                             "squash 2",       "pass 3 (logits)", "squash 3"};
// A row of the table: a statistic of a launch's blocks, one mark each.
struct Column {
    const char *name;
    timeline::Mark mark;
    double quantile;  // 0: first, 0.5: median, 1: last
};
const Column kColumns[] = {
    {"first in", timeline::kEntered, 0.0},     {"last in", timeline::kEntered, 1.0},
    {"waited", timeline::kWaited, 0.5},        {"1st step", timeline::kFirstStep, 0.5},
    {"steps done", timeline::kStepsDone, 0.5}, {"last steps", timeline::kStepsDone, 1.0},
    {"ended", timeline::kEnded, 0.5},          {"last end", timeline::kEnded, 1.0},
};
constexpr int kColumnCount = sizeof(kColumns) / sizeof(kColumns[0]);

using halcaps::bench::check;

double quantile_of(std::vector<double> x, double q) {
    if (x.empty()) return NAN;
    std::sort(x.begin(), x.end());
    return x[size_t(std::lround(q * double(x.size() - 1)))];
}

// The launch (0 .. kLaunches) of each record. The squash kernels carry their
// iteration; the two agreement passes do not, but the second one's blocks
// can only enter once the first has ended (the squash kernel between waits
// for it before it lets the next kernel start), so the earlier half of the
// agreement records by entry is pass 2's.
std::vector<int> launches_of(const std::vector<timeline::BlockRecord> &records) {
    std::vector<int> launch(records.size(), -1);
    std::vector<size_t> agreement;
    for (size_t n = 0; n < records.size(); n++) {
        const auto &r = records[n];
        if (r.kernel == timeline::kFirstPassKernel) launch[n] = 0;
        if (r.kernel == timeline::kSquashKernel) launch[n] = 1 + 2 * int(r.tag);
        if (r.kernel == timeline::kAgreementPassKernel) agreement.push_back(n);
    }
    std::sort(agreement.begin(), agreement.end(), [&](size_t a, size_t b) {
        return records[a].at[timeline::kEntered] < records[b].at[timeline::kEntered];
    });
    for (size_t k = 0; k < agreement.size(); k++) launch[agreement[k]] = k < agreement.size() / 2 ? 2 : 4;
    return launch;
}

}  // namespace

int main(int argc, char **argv) {
    std::vector<int64_t> batches;
    std::string csv_prefix;
    for (int n = 1; n < argc; n++) {
        if (std::strcmp(argv[n], "--csv") == 0 && n + 1 < argc) {
            csv_prefix = argv[++n];
        } else {
            batches.push_back(std::atoll(argv[n]));
        }
    }
    if (batches.empty()) batches = {128, 512};

    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "device");
    std::printf(
        "device: %s, %d SMs; MNIST DigitCaps (I=%lld K=%lld J=%lld E=%lld), %d iterations, b0 absent, "
        "cuda_tensor with per-block timestamps; medians over %d calls, inputs rotated over %d copies\n",
        prop.name, prop.multiProcessorCount, (long long)kIn, (long long)kInDim, (long long)kOut, (long long)kOutDim,
        kIterations, kRepeats, kCopies);

    timeline::BlockRecord *records_d = nullptr;
    check(cudaMalloc(&records_d, kCapacity * sizeof(timeline::BlockRecord)), "malloc records");
    cudaEvent_t start, stop;
    check(cudaEventCreate(&start), "event");
    check(cudaEventCreate(&stop), "event");

    std::mt19937 rng(2811);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (int64_t B : batches) {
        const DigitCapsLayerShape shape{B, kIn, kInDim, kOut, kOutDim};
        DigitCapsTensorPlan plan;
        check(halcaps::cuda_reference::digitcaps_tensor_plan(shape, &plan), "plan");
        const int64_t u_floats = B * kIn * kInDim, W_floats = kIn * kOut * kOutDim * kInDim;
        const int64_t v_floats = B * kOut * kOutDim;
        std::vector<std::vector<float>> u(kCopies, std::vector<float>(u_floats)),
            W(kCopies, std::vector<float>(W_floats));
        for (int c = 0; c < kCopies; c++) {
            for (auto &x : u[c]) x = uniform(rng);
            for (auto &x : W[c]) x = 0.1f * uniform(rng);
        }
        float *u_d = nullptr, *W_d = nullptr, *v_d = nullptr, *scratch_d = nullptr;
        check(cudaMalloc(&u_d, kCopies * u_floats * sizeof(float)), "malloc u");
        check(cudaMalloc(&W_d, kCopies * W_floats * sizeof(float)), "malloc W");
        check(cudaMalloc(&v_d, v_floats * sizeof(float)), "malloc v");
        check(cudaMalloc(&scratch_d, plan.scratch_floats * sizeof(float)), "malloc scratch");
        for (int c = 0; c < kCopies; c++) {
            check(cudaMemcpy(u_d + c * u_floats, u[c].data(), u_floats * sizeof(float), cudaMemcpyHostToDevice), "u");
            check(cudaMemcpy(W_d + c * W_floats, W[c].data(), W_floats * sizeof(float), cudaMemcpyHostToDevice), "W");
        }
        auto enqueue = [&](int call) {
            const int c = call % kCopies;
            return halcaps::cuda_reference::digitcaps_tensor(u_d + c * u_floats, W_d + c * W_floats, nullptr, v_d,
                                                             nullptr, nullptr, shape, kIterations, plan, scratch_d,
                                                             nullptr);
        };

        // Checked first: copy 0's v against the float64 reference, on a NaN-poisoned v.
        check(halcaps::cuda_reference::digitcaps_tensor_timeline(nullptr, 0), "timeline off");
        std::vector<std::vector<float>> v_of_copy(kCopies, std::vector<float>(v_floats));
        for (int c = 0; c < kCopies; c++) {
            check(cudaMemset(v_d, 0xff, v_floats * sizeof(float)), "poison v");
            check(enqueue(c), "digitcaps_tensor");
            check(cudaDeviceSynchronize(), "sync");
            check(cudaMemcpy(v_of_copy[c].data(), v_d, v_floats * sizeof(float), cudaMemcpyDeviceToHost), "v");
        }
        const halcaps::reference::DigitCapsShape ref_shape{B, kIn, kInDim, kOut, kOutDim};
        const std::vector<double> expected =
            halcaps::reference::digitcaps_f64(ref_shape, u[0].data(), W[0].data(), nullptr, kIterations);
        double top = 0.0, worst = 0.0;
        for (double x : expected) top = std::max(top, std::fabs(x));
        for (int64_t n = 0; n < v_floats; n++) {
            const double err = std::fabs(double(v_of_copy[0][n]) - expected[n]);
            worst = std::isfinite(v_of_copy[0][n]) ? std::max(worst, err) : INFINITY;
        }
        const bool correct = worst <= 1e-4 * top;
        std::printf(
            "\nbatch %lld: plan %d row tiles x %d i-lanes, chunk %lld, %lld chunks; v against float64: "
            "max |error| / max |v| = %.2e (%s)\n",
            (long long)B, plan.m_tiles, plan.i_lanes, (long long)plan.chunk, (long long)plan.chunks, worst / top,
            correct ? "ok" : "WRONG");
        if (!correct) return 1;

        // Timed calls with the timestamps on: [call][launch][column] in µs from the call's first block.
        std::vector<std::vector<std::vector<double>>> table;
        std::vector<double> call_us, span_us;
        std::vector<int> blocks_of_launch(kLaunches, 0);
        std::vector<timeline::BlockRecord> records(kCapacity);
        std::vector<float> got(v_floats);
        bool repeatable = true;
        for (int call = 0; call < kWarmup + kRepeats; call++) {
            check(halcaps::cuda_reference::digitcaps_tensor_timeline(records_d, kCapacity), "timeline on");
            check(halcaps::cli::enqueue_device_wait(300.0, nullptr), "wait");  // the launches queue behind it
            check(cudaEventRecord(start, nullptr), "start");
            check(enqueue(call), "digitcaps_tensor");
            check(cudaEventRecord(stop, nullptr), "stop");
            check(cudaEventSynchronize(stop), "sync");
            float ms = 0.0f;
            check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
            check(cudaMemcpy(got.data(), v_d, v_floats * sizeof(float), cudaMemcpyDeviceToHost), "v");
            repeatable =
                repeatable && std::memcmp(got.data(), v_of_copy[call % kCopies].data(), v_floats * sizeof(float)) == 0;
            unsigned used = 0;
            check(halcaps::cuda_reference::digitcaps_tensor_timeline_used(&used), "records used");
            if (used > kCapacity) {
                std::fprintf(stderr, "%u records, room for %u\n", used, kCapacity);
                return 1;
            }
            records.resize(used);
            check(cudaMemcpy(records.data(), records_d, used * sizeof(timeline::BlockRecord), cudaMemcpyDeviceToHost),
                  "records");
            if (call < kWarmup) continue;

            const std::vector<int> launch = launches_of(records);
            uint64_t t0 = UINT64_MAX, t_end = 0;
            for (const auto &r : records) {
                t0 = std::min(t0, r.at[timeline::kEntered]);
                t_end = std::max(t_end, r.at[timeline::kEnded]);
            }
            std::vector<std::vector<double>> row(kLaunches, std::vector<double>(kColumnCount));
            for (int l = 0; l < kLaunches; l++) {
                int blocks = 0;
                for (int c = 0; c < kColumnCount; c++) {
                    std::vector<double> at;
                    for (size_t n = 0; n < records.size(); n++) {
                        if (launch[n] == l) at.push_back(1e-3 * double(records[n].at[kColumns[c].mark] - t0));
                    }
                    blocks = int(at.size());
                    row[l][c] = quantile_of(at, kColumns[c].quantile);
                }
                blocks_of_launch[l] = blocks;
            }
            table.push_back(row);
            call_us.push_back(1e3 * ms);
            span_us.push_back(1e-3 * double(t_end - t0));

            if (!csv_prefix.empty() && call + 1 == kWarmup + kRepeats) {
                const std::string path = csv_prefix + "_b" + std::to_string(B) + ".csv";
                FILE *f = std::fopen(path.c_str(), "w");
                if (f == nullptr) {
                    std::fprintf(stderr, "cannot write %s\n", path.c_str());
                    return 1;
                }
                std::fprintf(f,
                             "launch,kernel,tag,sm,block,entered_ns,waited_ns,first_step_ns,steps_done_ns,ended_ns\n");
                for (size_t n = 0; n < records.size(); n++) {
                    const auto &r = records[n];
                    std::fprintf(f, "%d,%u,%u,%u,%u", launch[n], r.kernel, r.tag, r.sm, r.block);
                    for (int m = 0; m < timeline::kMarks; m++) {
                        std::fprintf(f, ",%llu", (unsigned long long)(r.at[m] - t0));
                    }
                    std::fprintf(f, "\n");
                }
                std::fclose(f);
            }
        }

        std::printf(
            "call: %.1f us between the events, %.1f us from the first block's entry to the last block's "
            "end; v the same bit for bit in every call: %s\n",
            quantile_of(call_us, 0.5), quantile_of(span_us, 0.5), repeatable ? "yes" : "NO");
        std::printf("%-17s %7s", "us from 1st block", "blocks");
        for (const auto &c : kColumns) std::printf(" %10s", c.name);
        std::printf("\n");
        for (int l = 0; l < kLaunches; l++) {
            std::printf("%-17s %7d", kLaunchNames[l], blocks_of_launch[l]);
            for (int c = 0; c < kColumnCount; c++) {
                std::vector<double> cell;
                for (const auto &row : table) cell.push_back(row[l][c]);
                std::printf(" %10.2f", quantile_of(cell, 0.5));
            }
            std::printf("\n");
        }
        cudaFree(u_d);
        cudaFree(W_d);
        cudaFree(v_d);
        cudaFree(scratch_d);
        if (!repeatable) return 1;
    }
    return 0;
}

// Batch-split study for the DigitCaps forward (issue 4): can independent
// slices of the batch, each running the hand-written `cuda_tensor` layer on
// its own stream, hide the per-iteration fixed costs that dominate MNIST b128?
//
// Routing couples input capsules, never batch rows: rows [b0, b1) of v depend
// only on rows [b0, b1) of u (and on all of W). So a call can be cut into S
// batch slices that run concurrently. At b128 the layer takes ~60 us against
// ~159 us at b512, i.e. ~27 us that does not scale with the batch (the three
// passes' fill and drain, the squash kernels between them). Slices on
// separate streams can overlap one slice's fixed costs with another's steps.
//
// For each batch B and slice count S this program times, on the device
// (cli/device_wait's kernel ahead of the events, as `halcaps bench` does), S concurrent
// chains of cuda_tensor, each on B / S rows, with
//   chunk x1   the plan digitcaps_tensor_plan makes for B / S rows (each
//              slice alone would fill the device), and
//   chunk xS   that chunk times S (the S slices together fill it once),
// and checks every slice's v against one whole-batch call (different chunks
// add the input capsules in a different order: relative max error < 1e-5).
// The whole-batch call is itself checked against the float64 reference by the
// CUDA tests (tests/test_digitcaps_cuda.cpp).
//
// Build (CMake target halcaps_digitcaps_batch_split, CUDA builds only):
//   cmake --build build --target halcaps_digitcaps_batch_split
// Run: build/halcaps_digitcaps_batch_split [batch ...]   (default 128 512)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cli/device_wait.h"
#include "cuda_check.h"
#include "digitcaps_cuda.h"

namespace {

using halcaps::cuda_reference::DigitCapsLayerShape;
using halcaps::cuda_reference::DigitCapsTensorPlan;

constexpr int64_t kIn = 1152, kInDim = 8, kOut = 10, kOutDim = 16;
constexpr int kIterations = 3, kRepeats = 30, kMaxSlices = 8;

using halcaps::bench::check;

struct Device {
    float *u = nullptr, *W = nullptr, *v = nullptr, *scratch = nullptr;
};

// One way of running the batch: S slices, each with its plan.
struct Split {
    int slices = 1;
    std::vector<DigitCapsTensorPlan> plans;
    std::vector<int64_t> first_row, rows;
};

Split make_split(int64_t B, int slices, int chunk_scale) {
    Split split;
    split.slices = slices;
    for (int s = 0; s < slices; s++) {
        const int64_t first = B * s / slices, last = B * (s + 1) / slices;
        DigitCapsTensorPlan plan;
        const DigitCapsLayerShape shape{last - first, kIn, kInDim, kOut, kOutDim};
        check(halcaps::cuda_reference::digitcaps_tensor_plan(shape, &plan), "plan");
        // A multiple of i_lanes still. Fewer chunks need no more scratch
        // than the plan's, so its scratch_floats stands.
        plan.chunk *= chunk_scale;
        plan.chunks = (kIn + plan.chunk - 1) / plan.chunk;
        split.plans.push_back(plan);
        split.first_row.push_back(first);
        split.rows.push_back(last - first);
    }
    return split;
}

int64_t scratch_floats(const Split &split) {
    int64_t n = 0;
    for (const auto &p : split.plans) n += p.scratch_floats;
    return n;
}

// Queues the split on streams[0..S): forked from streams[0] and joined back.
void enqueue(const Split &split, const Device &d, cudaStream_t *streams, cudaEvent_t fork, cudaEvent_t *joins) {
    check(cudaEventRecord(fork, streams[0]), "fork");
    float *scratch = d.scratch;
    for (int s = 0; s < split.slices; s++) {
        if (s > 0) check(cudaStreamWaitEvent(streams[s], fork, 0), "wait fork");
        const DigitCapsLayerShape shape{split.rows[s], kIn, kInDim, kOut, kOutDim};
        const int64_t b = split.first_row[s];
        check(halcaps::cuda_reference::digitcaps_tensor(d.u + b * kIn * kInDim, d.W, nullptr, d.v + b * kOut * kOutDim,
                                                        nullptr, nullptr, shape, kIterations, split.plans[s], scratch,
                                                        streams[s]),
              "digitcaps_tensor");
        scratch += split.plans[s].scratch_floats;
    }
    for (int s = 1; s < split.slices; s++) {
        check(cudaEventRecord(joins[s], streams[s]), "join");
        check(cudaStreamWaitEvent(streams[0], joins[s], 0), "wait join");
    }
}

double median(std::vector<double> x) {
    std::sort(x.begin(), x.end());
    return x[x.size() / 2];
}

}  // namespace

int main(int argc, char **argv) {
    std::vector<int64_t> batches;
    for (int n = 1; n < argc; n++) batches.push_back(std::atoll(argv[n]));
    if (batches.empty()) batches = {128, 512};

    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "device");
    std::printf(
        "device: %s, %d SMs; MNIST DigitCaps (I=%lld K=%lld J=%lld E=%lld), %d iterations, b0 zeros, "
        "median of %d, device time\n",
        prop.name, prop.multiProcessorCount, (long long)kIn, (long long)kInDim, (long long)kOut, (long long)kOutDim,
        kIterations, kRepeats);
    std::printf("%6s %6s %6s %8s %10s %10s %12s\n", "batch", "slices", "chunk", "chunks", "us", "vs whole",
                "max rel err");

    cudaStream_t streams[kMaxSlices];
    cudaEvent_t fork, joins[kMaxSlices], start, stop;
    for (int s = 0; s < kMaxSlices; s++) {
        check(cudaStreamCreateWithFlags(&streams[s], cudaStreamNonBlocking), "stream");
        check(cudaEventCreateWithFlags(&joins[s], cudaEventDisableTiming), "event");
    }
    check(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), "event");
    check(cudaEventCreate(&start), "event");
    check(cudaEventCreate(&stop), "event");

    std::mt19937 rng(4242);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (int64_t B : batches) {
        std::vector<float> u(B * kIn * kInDim), W(kIn * kOut * kOutDim * kInDim);
        for (auto &x : u) x = uniform(rng);
        for (auto &x : W) x = 0.1f * uniform(rng);
        const int64_t v_floats = B * kOut * kOutDim;

        std::vector<Split> splits;
        for (int slices : {1, 2, 4, 8}) {
            if (B / slices < 16) continue;
            splits.push_back(make_split(B, slices, 1));
            if (slices > 1) splits.push_back(make_split(B, slices, slices));
        }
        int64_t most_scratch = 0;
        for (const auto &split : splits) most_scratch = std::max(most_scratch, scratch_floats(split));

        Device d;
        check(cudaMalloc(&d.u, u.size() * sizeof(float)), "malloc u");
        check(cudaMalloc(&d.W, W.size() * sizeof(float)), "malloc W");
        check(cudaMalloc(&d.v, v_floats * sizeof(float)), "malloc v");
        check(cudaMalloc(&d.scratch, most_scratch * sizeof(float)), "malloc scratch");
        check(cudaMemcpy(d.u, u.data(), u.size() * sizeof(float), cudaMemcpyHostToDevice), "copy u");
        check(cudaMemcpy(d.W, W.data(), W.size() * sizeof(float), cudaMemcpyHostToDevice), "copy W");

        std::vector<float> whole(v_floats), got(v_floats);
        double whole_us = 0.0;
        for (const auto &split : splits) {
            // Checked first, on a NaN-poisoned v.
            check(cudaMemset(d.v, 0xff, v_floats * sizeof(float)), "poison v");
            enqueue(split, d, streams, fork, joins);
            check(cudaStreamSynchronize(streams[0]), "sync");
            check(cudaMemcpy(got.data(), d.v, v_floats * sizeof(float), cudaMemcpyDeviceToHost), "copy v");
            if (split.slices == 1) whole = got;
            double worst = 0.0, top = 0.0;
            for (int64_t n = 0; n < v_floats; n++) top = std::max(top, double(std::fabs(whole[n])));
            for (int64_t n = 0; n < v_floats; n++) {
                const double err = std::fabs(double(got[n]) - double(whole[n]));
                worst = std::isfinite(got[n]) ? std::max(worst, err / top) : INFINITY;
            }
            const bool ok = worst < 1e-5;

            std::vector<double> us;
            for (int r = 0; r < kRepeats + 3; r++) {
                // 300 us: the launches are queued behind it.
                check(halcaps::cli::enqueue_device_wait(300.0, streams[0]), "wait");
                check(cudaEventRecord(start, streams[0]), "start");
                enqueue(split, d, streams, fork, joins);
                check(cudaEventRecord(stop, streams[0]), "stop");
                check(cudaEventSynchronize(stop), "sync");
                float ms = 0.0f;
                check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
                if (r >= 3) us.push_back(1e3 * ms);
            }
            const double t = median(us);
            if (split.slices == 1) whole_us = t;
            std::printf("%6lld %6d %6lld %8lld %10.1f %9.2fx %12.2e%s\n", (long long)B, split.slices,
                        (long long)split.plans[0].chunk, (long long)split.plans[0].chunks, t, whole_us / t, worst,
                        ok ? "" : "  WRONG");
        }
        cudaFree(d.u);
        cudaFree(d.W);
        cudaFree(d.v);
        cudaFree(d.scratch);
    }
    return 0;
}

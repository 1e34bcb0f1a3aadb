// Pieces shared by the command-line subcommands: tensors that live on the
// host and, for CUDA runs, on the device; random inputs; NaN poisoning; timing.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cli/npy.h"
#include "halcaps/halcaps.h"

namespace halcaps::cli {

// Thrown for errors the user can fix (bad files, unusable device); main()
// prints the message on one line and exits non-zero.
struct UsageError {
    std::string message;
};

// A float32 tensor with a host copy and, when `device` is cuda, a device copy.
// `what` names it in errors, e.g. "u [batch, in_caps, in_dim]": a shape whose
// element count overflows, passes what one halcaps tensor holds, or cannot be
// allocated is a UsageError naming it, its extents and the bytes asked.
class Tensor {
public:
    Tensor(std::vector<int64_t> shape, Device device, std::string what = "a tensor");
    ~Tensor();
    Tensor(const Tensor &) = delete;
    Tensor &operator=(const Tensor &) = delete;

    std::vector<float> &host() { return host_; }
    const std::vector<float> &host() const { return host_; }
    const std::vector<int64_t> &shape() const { return shape_; }
    int64_t size() const { return static_cast<int64_t>(host_.size()); }

    const std::string &what() const { return what_; }

    // The host copy from a file's array; `source` (e.g. "--W w.npy") names
    // where it came from. Its shape must be this tensor's exactly
    // (UsageError "extent_mismatch: ..." otherwise), so the data read never
    // runs past the file's values.
    void assign(const npy::Array &array, const std::string &source);
    void fill_normal(std::mt19937_64 &rng);
    void poison();      // NaN everywhere (host and device copies)
    void upload();      // host -> device (no-op on cpu)
    void download();    // device -> host (no-op on cpu)
    TensorView view();  // of the copy the kernels use

private:
    std::vector<int64_t> shape_;
    [[maybe_unused]] Device device_;  // read only when the build has CUDA
    std::string what_;
    std::vector<float> host_;
    float *device_data_ = nullptr;
};

// The elements of a tensor of `shape`, checked before anything is allocated:
// a UsageError naming `what` when an extent is not positive, when the count
// overflows 64 bits, or when it passes the 2^31-1 elements one halcaps tensor
// holds (the bytes asked are in the message).
int64_t checked_element_count(const std::string &what, const std::vector<int64_t> &shape);

// The implementations a command runs for --schedule `requested`: "" (no
// --schedule) the runtime's own default, which may pick per shape (an empty
// implementation name); "all" every one of `op` built for `device` (and,
// for a routing op, given `iterations`, built for that iteration count);
// else that one. When "all" finds none (no implementation built for that
// iteration count), the runtime's default: its call then reports why.
std::vector<std::string> implementations_to_run(const std::string &op, const std::string &requested, Device device,
                                                std::optional<int> iterations = std::nullopt);
// The row label of an implementation name ("" is the runtime's default).
std::string row_label(const std::string &name);

// Device::cpu, Device::cuda or Device::opencl from "cpu", "cuda", "opencl" or
// "auto" (cuda if usable, never opencl).
Device parse_device(const std::string &name);

// Timing over `repeats` calls after `warmup` calls, in microseconds. On the
// CPU, the host clock around each call (median_us = call_median_us). On CUDA,
// events on the default stream around each call, two ways per repetition:
//   median_us, min_us  device time: a wait kernel (cli/device_wait.cu) keeps
//                      the stream busy while the call is enqueued, so the
//                      events span the device's work for the call (its
//                      kernels and the gaps between them), not the host's
//                      launch path, as in a pipeline that keeps the GPU fed.
//                      If a call outlasts the wait (it waits on the device
//                      itself, or its host path is longer), the wait grows,
//                      up to 12.8 ms; beyond that host_bound is set and the
//                      interval includes host time.
//   call_median_us     the stream idle when the call starts: the host's
//                      launch path plus the device's work, what one call
//                      costs a caller that waits for each result.
struct Timing {
    double median_us = 0, min_us = 0;
    double call_median_us = 0;
    bool host_bound = false;
    int repeats = 0;
};
Timing time_calls(Device device, int warmup, int repeats, const std::function<void()> &call);

// The device operations of the CUDA timing above, on one stream: through the
// CUDA runtime in time_calls, through the driver API in a point's own
// context for `halcaps explore run` (cli/explore_kernel.cpp). Each throws
// UsageError on a CUDA error.
struct DeviceTimer {
    std::function<void(double us)> enqueue_wait;  // the wait kernel, for `us` of device time
    std::function<void()> record_start, record_stop;
    std::function<bool()> start_done;    // whether the start event has fired
    std::function<double()> elapsed_us;  // waits for the stop event; start to stop
};
// Both CUDA times of `repeats` calls (no warm-up), as Timing describes.
Timing time_device_calls(const DeviceTimer &timer, int repeats, const std::function<void()> &call);

// The median of `values` (the mean of the middle two for an even count).
double median(std::vector<double> values);

// How many copies of inputs of `input_bytes` make their total exceed the
// device's last-level cache twice over (1 to 16), so that timed calls that
// rotate through them do not find their inputs cached.
int rotation_sets(Device device, double input_bytes);

// Stops with a UsageError carrying the status message if a call failed.
void check(const Status &status);
// The same for a routing call: an iteration count the library refuses
// (unsupported_iterations) is reported against --iterations.
void check_routing(const Status &status, int iterations);

// Copy bandwidth in GB/s (bytes read + written) of a large buffer copy on the
// device (cudaMemcpy device-to-device) or the host (parallel memcpy).
double measured_copy_bandwidth_gbs(Device device);

// Write-only bandwidth in GB/s: a large memset on the device (cudaMemsetAsync)
// or the host (parallel memset). Operators whose bytes are mostly writes
// (capsule prediction forward) are bound by this rather than by the copy.
double measured_write_bandwidth_gbs(Device device);

std::string shape_string(const std::vector<int64_t> &shape);

// A float32 .npy file of the given rank (`layout` names its dimensions in the
// message), or a UsageError naming the file.
npy::Array load_npy(const std::string &path, size_t rank, const char *layout);

// A .npy file given on the command line: the option that named it, its path
// and its contents.
struct NpyInput {
    std::string option;  // e.g. "--W"
    std::string path;
    npy::Array array;

    std::string source() const { return option + " " + path; }  // for messages
    int64_t extent(size_t d) const { return array.shape[d]; }
};
// Reads one: load_npy, and every extent positive (a UsageError naming the
// file and the extent otherwise); `dims` names the dimensions, outermost
// first, and gives the rank.
NpyInput load_npy_input(const std::string &option, const std::string &path, const std::vector<const char *> &dims);
// a's extent da and b's extent db hold the same dimension `dim`: a UsageError
// "extent_mismatch: ..." naming both files, both extents and both shapes
// when they disagree.
void require_same_extent(const NpyInput &a, size_t da, const NpyInput &b, size_t db, const char *dim);
// A file's extent d must be `expected` (e.g. 4, a pose's side): a UsageError
// "extent_mismatch: ..." naming the file otherwise.
void require_extent(const NpyInput &a, size_t d, int64_t expected, const char *dim);
// Writes a tensor's host copy to `path` (a UsageError naming it on failure).
void save_npy(const std::string &path, const Tensor &t);

}  // namespace halcaps::cli

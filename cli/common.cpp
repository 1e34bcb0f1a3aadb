#include "cli/common.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include <omp.h>

#if HALCAPS_WITH_CUDA
#include <cuda_runtime.h>

#include "cli/device_wait.h"
#endif

namespace halcaps::cli {

namespace {

#if HALCAPS_WITH_CUDA
void cuda_check(cudaError_t err, const char *what) {
    if (err != cudaSuccess) throw UsageError{std::string(what) + ": " + cudaGetErrorString(err)};
}
#endif

// "36864 bytes (36.9 kB)": the exact count and a readable size.
// A count as digits while it is exact in a double, else as "1.23e+40".
std::string count_string(double count) {
    char text[32];
    std::snprintf(text, sizeof text, count < 1e15 ? "%.0f" : "%.3g", count);
    return text;
}

// "36864 bytes (36.9 kB)": the count and a readable size.
std::string bytes_string(double bytes) {
    const char *units[] = {"bytes", "kB", "MB", "GB", "TB", "PB", "EB"};
    double scaled = bytes;
    int unit = 0;
    while (scaled >= 1000 && unit < 6) scaled /= 1000, unit++;
    char readable[32];
    std::snprintf(readable, sizeof readable, "%.1f %s", scaled, units[unit]);
    const std::string exact = count_string(bytes) + " bytes";
    return unit == 0 || scaled >= 1000 ? exact : exact + " (" + readable + ")";
}

}  // namespace

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int64_t checked_element_count(const std::string &what, const std::vector<int64_t> &shape) {
    // Halide indexes a buffer with 32-bit integers: one tensor holds at most 2^31-1 elements.
    constexpr int64_t most = std::numeric_limits<int32_t>::max();
    double asked = 1;  // elements, in floating point so that the message can say how many even past 2^63
    for (int64_t extent : shape) {
        if (extent <= 0) {
            throw UsageError{what + " = " + shape_string(shape) + ": every extent must be positive"};
        }
        asked *= static_cast<double>(extent);
    }
    if (asked > most) {
        throw UsageError{what + " = " + shape_string(shape) + " has " + count_string(asked) + " elements, " +
                         bytes_string(4 * asked) + ": more than the 2^31-1 elements a halcaps tensor holds"};
    }
    return static_cast<int64_t>(asked);  // exact: a product of integers below 2^31
}

Tensor::Tensor(std::vector<int64_t> shape, Device device, std::string what)
    : shape_(std::move(shape)), device_(device), what_(std::move(what)) {
    const int64_t count = checked_element_count(what_, shape_);
    try {
        host_.resize(static_cast<size_t>(count));
    } catch (const std::bad_alloc &) {
        throw UsageError{what_ + " = " + shape_string(shape_) + ": cannot allocate " + bytes_string(4.0 * count) +
                         " of host memory"};
    }
#if HALCAPS_WITH_CUDA
    if (device_ == Device::cuda) {
        const cudaError_t err = cudaMalloc(&device_data_, host_.size() * sizeof(float));
        if (err != cudaSuccess) {
            device_data_ = nullptr;
            throw UsageError{what_ + " = " + shape_string(shape_) + ": cudaMalloc of " + bytes_string(4.0 * count) +
                             " failed: " + cudaGetErrorString(err)};
        }
    }
#endif
}

void Tensor::assign(const npy::Array &array, const std::string &source) {
    if (array.shape != shape_) {
        throw UsageError{"extent_mismatch: " + source + " has shape " + shape_string(array.shape) + " but " + what_ +
                         " must be " + shape_string(shape_) + " here"};
    }
    host_ = array.data;  // the same element count as the shape: npy::read_float32 guarantees it
}

Tensor::~Tensor() {
#if HALCAPS_WITH_CUDA
    if (device_data_ != nullptr) cudaFree(device_data_);
#endif
}

void Tensor::fill_normal(std::mt19937_64 &rng) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float &x : host_) {
        do {
            x = normal(rng);
        } while (x == 0.0f);  // docs/design.md §2: random, normal, nonzero
    }
}

void Tensor::poison() {
    std::fill(host_.begin(), host_.end(), std::numeric_limits<float>::quiet_NaN());
#if HALCAPS_WITH_CUDA
    // All-ones bytes are a NaN in float32.
    if (device_data_ != nullptr) cuda_check(cudaMemset(device_data_, 0xFF, host_.size() * sizeof(float)), "cudaMemset");
#endif
}

void Tensor::upload() {
#if HALCAPS_WITH_CUDA
    if (device_data_ != nullptr) {
        cuda_check(cudaMemcpy(device_data_, host_.data(), host_.size() * sizeof(float), cudaMemcpyHostToDevice),
                   "cudaMemcpy to device");
    }
#endif
}

void Tensor::download() {
#if HALCAPS_WITH_CUDA
    if (device_data_ != nullptr) {
        cuda_check(cudaMemcpy(host_.data(), device_data_, host_.size() * sizeof(float), cudaMemcpyDeviceToHost),
                   "cudaMemcpy to host");
    }
#endif
}

TensorView Tensor::view() {
    TensorView v;
    v.shape = shape_;
    if (device_data_ != nullptr) {
        v.data = device_data_;
        v.space = MemorySpace::cuda;
    } else {
        v.data = host_.data();
        v.space = MemorySpace::host;
    }
    return v;
}

std::vector<std::string> implementations_to_run(const std::string &op, const std::string &requested, Device device,
                                                std::optional<int> iterations) {
    if (requested != "all") return {requested};
    std::vector<std::string> names;
    for (const auto &info : list_implementations()) {
        if (info.op != op || info.device != device) continue;
        const bool built = !iterations || std::find(info.iterations.begin(), info.iterations.end(), *iterations) !=
                                              info.iterations.end();
        if (built) names.push_back(info.implementation);
    }
    if (names.empty()) names.push_back("");  // the default's call says why nothing applies
    return names;
}

std::string row_label(const std::string &name) { return name.empty() ? "default" : name; }

Device parse_device(const std::string &name) {
    if (name == "cpu") return Device::cpu;
    if (name == "cuda") {
        if (!cuda_built()) throw UsageError{"--device cuda: this build of halcaps has no CUDA support"};
        if (!cuda_device_available()) throw UsageError{"--device cuda: no CUDA device is present"};
        return Device::cuda;
    }
    if (name == "opencl") {
        if (!opencl_built()) throw UsageError{"--device opencl: this build of halcaps has no OpenCL support"};
        if (!opencl_device_available()) {
            throw UsageError{
                "--device opencl: no OpenCL device is present (HL_OCL_PLATFORM_NAME and "
                "HL_OCL_DEVICE_TYPE choose the platform and device type)"};
        }
        return Device::opencl;
    }
    return cuda_device_available() ? Device::cuda : Device::cpu;  // "auto"
}

void check(const Status &status) {
    if (!status.ok()) throw UsageError{std::string(status_code_name(status.code)) + ": " + status.message};
}

void check_routing(const Status &status, int iterations) {
    if (status.code == StatusCode::unsupported_iterations) {
        throw UsageError{"--iterations " + std::to_string(iterations) + ": " + status_code_name(status.code) + ": " +
                         status.message};
    }
    check(status);
}

namespace {

Timing timing_of(int repeats, const std::vector<double> &device_us, const std::vector<double> &call_us,
                 bool host_bound) {
    Timing t;
    t.repeats = repeats;
    t.median_us = median(device_us);
    t.min_us = *std::min_element(device_us.begin(), device_us.end());
    t.call_median_us = median(call_us);
    t.host_bound = host_bound;
    return t;
}

}  // namespace

Timing time_device_calls(const DeviceTimer &timer, int repeats, const std::function<void()> &call) {
    std::vector<double> device_us, call_us;
    bool host_bound = false;
    // Long enough to cover the host's launch path of any call here (a few
    // to a few tens of µs); lengthened when a call outlasts it.
    double wait_us = 200;
    constexpr double longest_wait_us = 12800;
    for (int n = 0; n < repeats; n++) {
        // Device time: the stream busy while the call is enqueued.
        for (;;) {
            timer.enqueue_wait(wait_us);
            timer.record_start();
            call();
            // The start event already done means the device waited for the
            // host during the call: the interval would include host time.
            const bool start_done = timer.start_done();
            timer.record_stop();
            const double us = timer.elapsed_us();
            if (!start_done || wait_us >= longest_wait_us) {  // past the longest: the call waits on the device
                host_bound = host_bound || start_done;
                device_us.push_back(us);
                break;
            }
            wait_us *= 4;
        }
        // Call time: the stream idle, so the host's launch path counts.
        timer.record_start();
        call();
        timer.record_stop();
        call_us.push_back(timer.elapsed_us());
    }
    return timing_of(repeats, device_us, call_us, host_bound);
}

Timing time_calls([[maybe_unused]] Device device, int warmup, int repeats, const std::function<void()> &call) {
    for (int n = 0; n < warmup; n++) call();
#if HALCAPS_WITH_CUDA
    if (device == Device::cuda) {
        cudaEvent_t start, stop;
        cuda_check(cudaEventCreate(&start), "cudaEventCreate");
        cuda_check(cudaEventCreate(&stop), "cudaEventCreate");
        DeviceTimer timer;
        timer.enqueue_wait = [](double us) { cuda_check(enqueue_device_wait(us), "the timing's wait kernel"); };
        timer.record_start = [&] { cuda_check(cudaEventRecord(start), "cudaEventRecord"); };
        timer.record_stop = [&] { cuda_check(cudaEventRecord(stop), "cudaEventRecord"); };
        timer.start_done = [&] {
            const cudaError_t state = cudaEventQuery(start);
            if (state != cudaErrorNotReady) cuda_check(state, "cudaEventQuery");
            return state != cudaErrorNotReady;
        };
        timer.elapsed_us = [&] {
            cuda_check(cudaEventSynchronize(stop), "cudaEventSynchronize");
            float ms = 0;
            cuda_check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
            return 1000.0 * ms;
        };
        const Timing t = time_device_calls(timer, repeats, call);
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
        return t;
    }
#endif
    std::vector<double> us;
    for (int n = 0; n < repeats; n++) {
        auto t0 = std::chrono::steady_clock::now();
        call();
        auto t1 = std::chrono::steady_clock::now();
        us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    return timing_of(repeats, us, us, false);
}

// The last-level cache is read from the device (L2) on CUDA; on the CPU a
// generous 64 MB stands in for it.
int rotation_sets([[maybe_unused]] Device device, double input_bytes) {
    double cache_bytes = 64.0 * 1024 * 1024;
#if HALCAPS_WITH_CUDA
    if (device == Device::cuda) {
        int device_id = 0, l2 = 0;
        if (cudaGetDevice(&device_id) == cudaSuccess &&
            cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device_id) == cudaSuccess) {
            cache_bytes = l2;
        }
    }
#endif
    return std::clamp(static_cast<int>(std::ceil(2.0 * cache_bytes / input_bytes)), 1, 16);
}

double measured_copy_bandwidth_gbs(Device device) {
    const size_t bytes = device == Device::cuda ? (size_t(1) << 31) : (size_t(1) << 28);  // 2 GiB / 256 MiB
    Timing t;
#if HALCAPS_WITH_CUDA
    if (device == Device::cuda) {
        void *a = nullptr, *b = nullptr;
        cuda_check(cudaMalloc(&a, bytes), "cudaMalloc");
        cuda_check(cudaMalloc(&b, bytes), "cudaMalloc");
        cuda_check(cudaMemset(a, 1, bytes), "cudaMemset");
        t = time_calls(device, 2, 10, [&] { cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice); });
        cudaFree(a);
        cudaFree(b);
    }
#endif
    if (device != Device::cuda) {
        std::vector<char> a(bytes, 1), b(bytes, 0);
        t = time_calls(device, 1, 5, [&] {
            const int threads = omp_get_max_threads();
#pragma omp parallel for
            for (int part = 0; part < threads; part++) {
                const size_t begin = bytes * part / threads, end = bytes * (part + 1) / threads;
                std::memcpy(b.data() + begin, a.data() + begin, end - begin);
            }
        });
    }
    return 2.0 * bytes / (t.median_us * 1e3);
}

double measured_write_bandwidth_gbs(Device device) {
    const size_t bytes = device == Device::cuda ? (size_t(1) << 31) : (size_t(1) << 28);  // 2 GiB / 256 MiB
    Timing t;
#if HALCAPS_WITH_CUDA
    if (device == Device::cuda) {
        void *a = nullptr;
        cuda_check(cudaMalloc(&a, bytes), "cudaMalloc");
        t = time_calls(device, 2, 10, [&] { cudaMemsetAsync(a, 0, bytes); });
        cudaFree(a);
    }
#endif
    if (device != Device::cuda) {
        std::vector<char> a(bytes, 1);
        t = time_calls(device, 1, 5, [&] {
            const int threads = omp_get_max_threads();
#pragma omp parallel for
            for (int part = 0; part < threads; part++) {
                const size_t begin = bytes * part / threads, end = bytes * (part + 1) / threads;
                std::memset(a.data() + begin, part, end - begin);
            }
        });
    }
    return bytes / (t.median_us * 1e3);
}

std::string shape_string(const std::vector<int64_t> &shape) {
    std::string s = "[";
    for (size_t d = 0; d < shape.size(); d++) s += (d ? ", " : "") + std::to_string(shape[d]);
    return s + "]";
}

npy::Array load_npy(const std::string &path, size_t rank, const char *layout) {
    npy::Array array;
    std::string error;
    if (!npy::read_float32(path, &array, &error)) throw UsageError{error};
    if (array.shape.size() != rank) {
        throw UsageError{path + ": expected rank " + std::to_string(rank) + " " + layout + ", got " +
                         shape_string(array.shape)};
    }
    return array;
}

NpyInput load_npy_input(const std::string &option, const std::string &path, const std::vector<const char *> &dims) {
    std::string layout = "[";
    for (size_t d = 0; d < dims.size(); d++) layout += std::string(d ? ", " : "") + dims[d];
    layout += "]";
    NpyInput input{option, path, load_npy(path, dims.size(), layout.c_str())};
    for (size_t d = 0; d < dims.size(); d++) {
        if (input.extent(d) <= 0) {
            throw UsageError{input.source() + ": extent " + std::to_string(d) + " (" + dims[d] + ") of " +
                             shape_string(input.array.shape) + " is " + std::to_string(input.extent(d)) +
                             "; every extent must be positive"};
        }
    }
    return input;
}

void require_same_extent(const NpyInput &a, size_t da, const NpyInput &b, size_t db, const char *dim) {
    if (a.extent(da) == b.extent(db)) return;
    throw UsageError{"extent_mismatch: " + a.source() + " has " + dim + " = " + std::to_string(a.extent(da)) +
                     " (extent " + std::to_string(da) + " of " + shape_string(a.array.shape) + ") but " + b.source() +
                     " has " + dim + " = " + std::to_string(b.extent(db)) + " (extent " + std::to_string(db) + " of " +
                     shape_string(b.array.shape) + ")"};
}

void require_extent(const NpyInput &a, size_t d, int64_t expected, const char *dim) {
    if (a.extent(d) == expected) return;
    throw UsageError{"extent_mismatch: " + a.source() + " has " + dim + " = " + std::to_string(a.extent(d)) +
                     " (extent " + std::to_string(d) + " of " + shape_string(a.array.shape) + "); it must be " +
                     std::to_string(expected)};
}

void save_npy(const std::string &path, const Tensor &t) {
    std::string error;
    if (!npy::write_float32(path, t.shape(), t.host().data(), &error)) throw UsageError{error};
}

}  // namespace halcaps::cli

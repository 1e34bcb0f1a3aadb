// Pieces shared by the API fuzz targets: reading choices from the fuzzer's
// bytes, and tensors whose views start from a shape the operator accepts and
// are then broken in one way the bytes pick (null data, rank, an extent,
// strides, memory space, absent).
//
// Storage always matches the view: a view whose elements fit in kMaxElements
// gets exactly that many floats (so AddressSanitizer sees any read past it in
// instrumented code), and a view the library must refuse outright (an extent
// of 2^31 or more) gets a few. A view of positive extents that would need more
// than kMaxElements is made invalid (its first extent set to 0) rather than
// allocated, so the targets stay fast.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "halcaps/halcaps.h"

namespace halcaps::fuzz {

constexpr double kMaxElements = 1 << 16;

// Choices read from the fuzzer's bytes; zeros once they run out.
class Bytes {
public:
    Bytes(const uint8_t *data, size_t size) : data_(data), size_(size) {}

    uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
    int32_t i32() {
        uint32_t v = 0;
        for (int n = 0; n < 4; n++) v = (v << 8) | byte();
        return static_cast<int32_t>(v);
    }
    // 1..most.
    int64_t small(int most) { return 1 + byte() % most; }
    template <typename T>
    const T &pick(const std::vector<T> &choices) {
        return choices[byte() % choices.size()];
    }

private:
    const uint8_t *data_;
    size_t size_, pos_ = 0;
};

// A failed check in a target: report it and stop, so libFuzzer keeps the input.
[[noreturn]] inline void fail(const std::string &what, const Status &status) {
    std::fprintf(stderr, "fuzz check failed: %s (status %s: '%s')\n", what.c_str(), status_code_name(status.code),
                 status.message.c_str());
    std::abort();
}

// Extents that make any tensor too large for the library (2^31 - 1 elements at most).
inline const std::vector<int64_t> &huge_extents() {
    static const std::vector<int64_t> v = {int64_t(1) << 31, (int64_t(1) << 32) + 3, int64_t(1) << 62,
                                           std::numeric_limits<int64_t>::max()};
    return v;
}

// One tensor argument: the storage and the view passed to the library.
struct Arg {
    std::vector<float> storage;
    TensorView view;
    bool is_output = false;
};

// How a view is broken. Most first bytes keep it valid (160 of 256), so that
// a good share of calls, each with several arguments, reaches the kernels.
enum Mutation : uint8_t {
    keep,
    null_data,
    drop_dim,
    add_dim,
    zero_extent,
    negative_extent,
    off_by_one_extent,
    huge_extent,
    dense_strides,
    wrong_strides,
    cuda_space,
    absent,
    kMutations
};

// Builds an argument of `shape` (the one the operator wants), broken as the
// bytes say. `seed` varies the values (nonzero normal-ish floats).
inline Arg make_arg(Bytes &in, std::vector<int64_t> shape, bool is_output, uint32_t seed) {
    Arg a;
    a.is_output = is_output;
    const uint8_t first = in.byte();
    const uint8_t mutation = first < 160 ? keep : 1 + (first - 160) % (kMutations - 1);
    const uint8_t where = in.byte();
    const size_t d = shape.empty() ? 0 : where % shape.size();
    bool null = false, is_absent = false, cuda = false;
    std::vector<int64_t> strides;
    switch (mutation) {
    case null_data:
        null = true;
        break;
    case drop_dim:
        if (!shape.empty()) shape.erase(shape.begin() + d);
        break;
    case add_dim:
        shape.insert(shape.begin() + (shape.empty() ? 0 : where % (shape.size() + 1)), in.small(3));
        break;
    case zero_extent:
        if (!shape.empty()) shape[d] = 0;
        break;
    case negative_extent:
        if (!shape.empty()) shape[d] = -in.small(3);
        break;
    case off_by_one_extent:
        if (!shape.empty()) shape[d] += (in.byte() & 1) ? 1 : -1;
        break;
    case huge_extent:
        if (!shape.empty()) shape[d] = in.pick(huge_extents());
        break;
    case dense_strides:
    case wrong_strides: {
        strides.assign(shape.size(), 1);
        for (size_t k = shape.size(); k-- > 1;) strides[k - 1] = strides[k] * shape[k];
        if (mutation == wrong_strides && !strides.empty()) strides[d] += 1 + in.byte() % 3;
        break;
    }
    case cuda_space:
        cuda = true;
        break;
    case absent:
        is_absent = true;
        break;
    default:
        break;
    }
    if (is_absent) return a;  // TensorView{}: an optional argument left out, anything else refused
    double elements = 1;
    bool positive = true;
    for (int64_t extent : shape) {
        positive = positive && extent > 0;
        elements *= static_cast<double>(extent);
    }
    size_t count = 4;
    if (positive && elements <= kMaxElements) {
        count = static_cast<size_t>(elements);
    } else if (positive && elements <= std::numeric_limits<int32_t>::max()) {
        shape[0] = 0;  // too big to run here: made invalid instead
    }
    a.storage.resize(count);
    uint32_t x = seed * 2654435761u + 12345u;
    for (float &v : a.storage) {
        x = x * 1664525u + 1013904223u;
        const float u = static_cast<float>((x >> 8) & 0xffff) / 65536.0f;  // [0, 1)
        v = is_output ? std::numeric_limits<float>::quiet_NaN() : (u - 0.5f) * 2.0f + (u < 0.5f ? -0.01f : 0.01f);
    }
    a.view.data = null ? nullptr : a.storage.data();
    a.view.shape = shape;
    a.view.strides = strides;
    // Host memory must never be passed as device memory to a real device.
    a.view.space = cuda && !cuda_device_available() ? MemorySpace::cuda : MemorySpace::host;
    return a;
}

// Options as the bytes say: any device (an out-of-range value too), an
// implementation of the list, none, or a made-up name. Streams and
// contexts stay null (a bad pointer there is undefined, not checkable).
inline Options make_options(Bytes &in) {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> v = {"", "", "no-such-implementation"};
        for (const auto &info : list_implementations()) v.push_back(info.implementation);
        return v;
    }();
    Options o;
    const uint8_t device = in.byte() % 8;
    o.device = device < 3 ? static_cast<Device>(device) : device < 7 ? Device::cpu : static_cast<Device>(57);
    if (o.device == Device::cuda && cuda_device_available()) o.device = Device::cpu;
    o.implementation = in.pick(names);
    return o;
}

// A routing iteration count: mostly -2..17, sometimes an extreme.
inline int make_iterations(Bytes &in) {
    const uint8_t b = in.byte();
    if (b < 224) return b % 20 - 2;
    static const std::vector<int> extremes = {std::numeric_limits<int>::min(), -1000000, 1000000,
                                              std::numeric_limits<int>::max(), 64,       100};
    return in.pick(extremes);
}

// What every call must satisfy: a refusal says why; the checks before the
// kernels catch whatever a kernel would reject (internal_error never); and a
// call that succeeds wrote every element of its outputs.
// With HALCAPS_FUZZ_VERBOSE set, each call's arguments and status are
// printed (to turn a finding into a test).
inline void check_call(const char *op, const Status &status, const std::vector<const Arg *> &args) {
    static const bool verbose = std::getenv("HALCAPS_FUZZ_VERBOSE") != nullptr;
    if (verbose) {
        std::fprintf(stderr, "%s:", op);
        for (const Arg *a : args) {
            std::fprintf(stderr, " %s[", a->view.data == nullptr ? "null" : "");
            for (size_t d = 0; d < a->view.shape.size(); d++) {
                std::fprintf(stderr, "%s%lld", d ? "," : "", (long long)a->view.shape[d]);
            }
            std::fprintf(stderr, "]%s%s", a->view.strides.empty() ? "" : "s",
                         a->view.space == MemorySpace::cuda ? "@cuda" : "");
        }
        std::fprintf(stderr, " -> %s %s\n", status_code_name(status.code), status.message.c_str());
    }
    if (!status.ok()) {
        if (status.message.empty()) fail(std::string(op) + ": a refusal without a message", status);
        if (status.message.rfind(op, 0) != 0)
            fail(std::string(op) + ": the message does not start with the op", status);
        if (status.code == StatusCode::internal_error) fail(std::string(op) + ": internal_error", status);
        return;
    }
    for (const Arg *a : args) {
        if (!a->is_output || a->view.data == nullptr) continue;
        for (float v : a->storage) {
            if (std::isnan(v)) fail(std::string(op) + ": succeeded but left an output element unwritten (NaN)", status);
        }
    }
}

}  // namespace halcaps::fuzz

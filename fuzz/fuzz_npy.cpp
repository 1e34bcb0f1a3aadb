// libFuzzer target: the .npy reader (cli/npy.h) on arbitrary bytes. It must
// refuse with a message or return an array whose data matches its shape; an
// array it accepts is written back and read again, bit for bit.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cli/npy.h"

namespace {

[[noreturn]] void fail(const std::string &what) {
    std::fprintf(stderr, "fuzz check failed: %s\n", what.c_str());
    std::abort();
}

// A file of this process's own for the write-back.
const std::string &scratch_path() {
    static const std::string path = [] {
        const char *dir = std::getenv("TMPDIR");
        return std::string(dir != nullptr ? dir : "/tmp") + "/halcaps_fuzz_npy_" + std::to_string(getpid()) + ".npy";
    }();
    return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    using halcaps::npy::Array;
    Array array;
    std::string error;
    if (!halcaps::npy::read_float32_from_memory("input", data, size, &array, &error)) {
        if (error.rfind("input: ", 0) != 0 || error.size() <= 7) fail("a refusal without a message: '" + error + "'");
        return 0;
    }
    double elements = 1;
    for (int64_t extent : array.shape) {
        if (extent < 0) fail("a negative extent was accepted");
        elements *= static_cast<double>(extent);
    }
    if (elements != static_cast<double>(array.data.size())) fail("the data does not match the shape");
    if (!halcaps::npy::write_float32(scratch_path(), array.shape, array.data.data(), &error)) {
        fail("cannot write back what was read: " + error);
    }
    Array again;
    if (!halcaps::npy::read_float32(scratch_path(), &again, &error))
        fail("cannot read back what was written: " + error);
    if (again.shape != array.shape || again.data.size() != array.data.size() ||
        (!again.data.empty() &&
         std::memcmp(again.data.data(), array.data.data(), again.data.size() * sizeof(float)) != 0)) {
        fail("the write-back differs");
    }
    std::remove(scratch_path().c_str());
    return 0;
}

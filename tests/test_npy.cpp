// Tests for cli/npy.h: round trips, files laid out byte for byte as NumPy writes them, and every
// kind of malformed file we know of, which must be rejected with a message naming the path and
// the problem (and never crash; run under the sanitizers to be sure of that).
#include "cli/npy.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using halcaps::npy::Array;
using halcaps::npy::read_float32;
using halcaps::npy::write_float32;

namespace {

// A fresh directory under the system temp directory, removed with everything in it at the end.
class TempDir {
public:
    TempDir() {
        std::random_device seed;
        std::mt19937_64 rng(seed());
        for (int attempt = 0; attempt < 100; ++attempt) {
            const fs::path candidate = fs::temp_directory_path() / ("halcaps_test_npy_" + std::to_string(rng()));
            if (fs::create_directory(candidate)) {
                path_ = candidate;
                return;
            }
        }
        FAIL("cannot create a temporary directory");
    }
    ~TempDir() {
        std::error_code ignored;
        fs::remove_all(path_, ignored);
    }
    TempDir(const TempDir &) = delete;
    TempDir &operator=(const TempDir &) = delete;

    std::string file(const std::string &name) const { return (path_ / name).string(); }

private:
    fs::path path_;
};

using Bytes = std::string;  // raw file contents

void write_bytes(const std::string &path, const Bytes &bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out.good());
}

Bytes read_bytes(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Little-endian encoding of the low n bytes of value.
Bytes little_endian(uint64_t value, int n) {
    Bytes out;
    for (int i = 0; i < n; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
    return out;
}

// The raw bytes of some floats, as '<f4' data (the test hosts are little-endian, like the library's).
Bytes float_bytes(const std::vector<float> &values) {
    Bytes out(values.size() * sizeof(float), '\0');
    if (!values.empty()) std::memcpy(&out[0], values.data(), out.size());
    return out;
}

// A .npy file with the given version and header dict, padded the way NumPy pads: spaces, then '\n',
// so that everything up to the data is a multiple of 64 bytes.
Bytes npy_file(int major, int minor, const std::string &dict, const Bytes &data) {
    const std::size_t len_bytes = major == 1 ? 2 : 4;
    const std::size_t prefix = 8 + len_bytes;
    const std::size_t pad = 64 - (prefix + dict.size() + 1) % 64;
    const std::string header = dict + std::string(pad, ' ') + "\n";
    Bytes out("\x93NUMPY", 6);
    out += static_cast<char>(major);
    out += static_cast<char>(minor);
    out += little_endian(header.size(), static_cast<int>(len_bytes));
    return out + header + data;
}

// A version 1.0 '<f4' file with the given shape text and data.
Bytes npy_v1(const std::string &shape_text, const Bytes &data) {
    return npy_file(1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_text + ", }", data);
}

std::vector<float> random_nonzero(std::size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1000.0f, 1000.0f);
    std::vector<float> values(n);
    for (float &v : values) {
        do v = dist(rng);
        while (v == 0.0f);
    }
    return values;
}

// Bit patterns, so that comparisons are exact and NaN payloads and -0 count.
std::vector<uint32_t> bits(const std::vector<float> &values) {
    std::vector<uint32_t> out(values.size());
    if (!values.empty()) std::memcpy(out.data(), values.data(), values.size() * sizeof(float));
    return out;
}

// Reads path expecting success.
Array read_ok(const std::string &path) {
    Array array;
    std::string error;
    const bool ok = read_float32(path, &array, &error);
    INFO(error);
    REQUIRE(ok);
    return array;
}

// Writes bytes to path, reads it back, and expects failure with a message that starts with the path
// and contains each of words.
void expect_rejected(const std::string &path, const Bytes &bytes, std::initializer_list<const char *> words) {
    write_bytes(path, bytes);
    Array array;
    array.shape = {42};  // must be left alone on failure
    std::string error;
    const bool ok = read_float32(path, &array, &error);
    INFO("error: " << error);
    REQUIRE_FALSE(ok);
    CHECK(error.rfind(path + ": ", 0) == 0);
    CHECK(error.find('\n') == std::string::npos);
    for (const char *word : words) CHECK_THAT(error, Catch::Contains(word));
    CHECK(array.shape == std::vector<int64_t>{42});
}

}  // namespace

TEST_CASE("npy: round trips keep shape and bits exactly", "[npy]") {
    TempDir dir;
    const std::vector<std::vector<int64_t>> shapes = {
        {7}, {2, 3}, {2, 3, 4, 5}, {1, 5, 1}, {3, 1}, {}, {0}, {3, 0, 2},
    };
    uint32_t seed = 1;
    for (const auto &shape : shapes) {
        std::size_t count = 1;
        for (int64_t extent : shape) count *= static_cast<std::size_t>(extent);
        const std::vector<float> values = random_nonzero(count, seed++);
        const std::string path = dir.file("round_trip.npy");
        CAPTURE(shape);

        std::string error;
        const bool written = write_float32(path, shape, values.data(), &error);
        INFO(error);
        REQUIRE(written);
        // numpy.save starts the data on a 64-byte boundary.
        CHECK((read_bytes(path).size() - count * sizeof(float)) % 64 == 0);

        const Array array = read_ok(path);
        CHECK(array.shape == shape);
        CHECK(bits(array.data) == bits(values));
    }
}

TEST_CASE("npy: special float values survive bit for bit", "[npy]") {
    TempDir dir;
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> values = {-0.0f,
                                 inf,
                                 -inf,
                                 std::numeric_limits<float>::denorm_min(),
                                 std::numeric_limits<float>::max(),
                                 std::numeric_limits<float>::lowest()};
    const uint32_t nan_with_payload = 0x7fc12345u;
    float nan;
    std::memcpy(&nan, &nan_with_payload, sizeof nan);
    values.push_back(nan);

    const std::string path = dir.file("special.npy");
    std::string error;
    REQUIRE(write_float32(path, {static_cast<int64_t>(values.size())}, values.data(), &error));
    CHECK(bits(read_ok(path).data) == bits(values));
}

TEST_CASE("npy: the writer produces exactly what numpy.save writes", "[npy]") {
    // numpy 2.4: np.save(f, np.arange(6, dtype='<f4').reshape(2, 3)). The header length is 0x76 = 118;
    // after the 59-byte dict come 20 spaces of room for the first extent to grow, 38 spaces of
    // padding to 10 + 118 = 128 bytes, and '\n'.
    const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    const Bytes expected = Bytes("\x93NUMPY\x01\x00\x76\x00", 10) + dict + std::string(20 + 38, ' ') + "\n" +
                           float_bytes({0, 1, 2, 3, 4, 5});
    REQUIRE(expected.size() == 128 + 24);

    TempDir dir;
    const std::string path = dir.file("numpy_layout.npy");
    const std::vector<float> values = {0, 1, 2, 3, 4, 5};
    std::string error;
    REQUIRE(write_float32(path, {2, 3}, values.data(), &error));
    CHECK(read_bytes(path) == expected);

    // And a 0-d array, which has no extent to leave room for: 10 + 118 = 128 again.
    const std::string dict0 = "{'descr': '<f4', 'fortran_order': False, 'shape': (), }";
    const float scalar = 2.5f;
    REQUIRE(write_float32(path, {}, &scalar, &error));
    CHECK(read_bytes(path) == Bytes("\x93NUMPY\x01\x00\x76\x00", 10) + dict0 +
                                  std::string(118 - dict0.size() - 1, ' ') + "\n" + float_bytes({scalar}));
}

TEST_CASE("npy: reads files laid out as NumPy writes them", "[npy]") {
    TempDir dir;
    const std::string path = dir.file("numpy.npy");
    const std::vector<float> values = random_nonzero(6, 99);
    const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

    SECTION("version 1.0, older NumPy (no growth room)") {
        write_bytes(path, npy_file(1, 0, dict, float_bytes(values)));
    }
    SECTION("version 1.0, current NumPy (20 spaces of growth room after the dict)") {
        write_bytes(path, npy_file(1, 0, dict + std::string(20, ' '), float_bytes(values)));
    }
    SECTION("version 2.0 (4-byte header length)") { write_bytes(path, npy_file(2, 0, dict, float_bytes(values))); }
    SECTION("version 3.0 (UTF-8 header)") { write_bytes(path, npy_file(3, 0, dict, float_bytes(values))); }
    const Array array = read_ok(path);
    CHECK(array.shape == std::vector<int64_t>{2, 3});
    CHECK(bits(array.data) == bits(values));
}

TEST_CASE("npy: header syntax variations that Python accepts", "[npy]") {
    TempDir dir;
    const std::string path = dir.file("variants.npy");
    const std::vector<float> six = random_nonzero(6, 7);

    struct Case {
        std::string dict;
        std::vector<int64_t> shape;
    };
    const std::vector<Case> cases = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,3), }", {2, 3}},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': ( 2 , 3 , ), }", {2, 3}},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", {6}},
        {"{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}", {2, 3}},
        {"{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 3)}", {2, 3}},
        {"  {\n\t'descr' : '<f4' ,\r\n 'fortran_order':False,'shape':(\n2,\n3\n)\n,\n}", {2, 3}},
        {"{'descr':'<f4','fortran_order':False,'shape':(1,6,1,)}", {1, 6, 1}},
    };
    for (const Case &c : cases) {
        CAPTURE(c.dict);
        write_bytes(path, npy_file(1, 0, c.dict, float_bytes(six)));
        const Array array = read_ok(path);
        CHECK(array.shape == c.shape);
        CHECK(bits(array.data) == bits(six));
    }

    SECTION("0-d arrays: () and ( ) hold one element") {
        const std::vector<float> one = {3.25f};
        for (const char *shape : {"()", "( )"}) {
            write_bytes(path, npy_v1(shape, float_bytes(one)));
            const Array array = read_ok(path);
            CHECK(array.shape.empty());
            CHECK(bits(array.data) == bits(one));
        }
    }
    SECTION("a header without padding or final newline") {
        const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }";
        write_bytes(path, Bytes("\x93NUMPY\x01\x00", 8) + little_endian(dict.size(), 2) + dict + float_bytes(six));
        CHECK(read_ok(path).shape == std::vector<int64_t>{6});
    }
}

TEST_CASE("npy: malformed files are rejected with a clear message", "[npy]") {
    TempDir dir;
    const std::string path = dir.file("bad.npy");
    const Bytes six = float_bytes(random_nonzero(6, 3));
    const Bytes good = npy_v1("(2, 3)", six);
    auto header_with = [](const std::string &shape_or_rest) {
        return "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_or_rest + "}";
    };

    SECTION("empty file") { expect_rejected(path, "", {"empty"}); }
    SECTION("bad magic") { expect_rejected(path, "PK\x03\x04 not numpy at all", {"magic"}); }
    SECTION("bad magic in a tiny file") { expect_rejected(path, "ab", {"magic"}); }
    SECTION("file ends inside the magic") { expect_rejected(path, Bytes("\x93NUM", 4), {"truncated"}); }
    SECTION("unsupported version") {
        Bytes bytes = good;
        bytes[6] = 4;
        expect_rejected(path, bytes, {"version", "4.0"});
        bytes[6] = 1;
        bytes[7] = 1;
        expect_rejected(path, bytes, {"version", "1.1"});
    }
    SECTION("dtype <f8") {
        expect_rejected(path, npy_file(1, 0, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", six),
                        {"dtype", "'<f8'"});
    }
    SECTION("dtype >f4") {
        expect_rejected(path, npy_file(1, 0, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", six),
                        {"dtype", "'>f4'"});
    }
    SECTION("dtype |f4 and =f4") {
        expect_rejected(path, npy_file(1, 0, "{'descr': '|f4', 'fortran_order': False, 'shape': (2, 3), }", six),
                        {"dtype", "'|f4'"});
        expect_rejected(path, npy_file(1, 0, "{'descr': '=f4', 'fortran_order': False, 'shape': (2, 3), }", six),
                        {"dtype", "'=f4'"});
    }
    SECTION("structured dtype") {
        expect_rejected(path, npy_file(1, 0, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }", six),
                        {"malformed header"});
    }
    SECTION("fortran_order True") {
        expect_rejected(path, npy_file(1, 0, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", six),
                        {"fortran_order"});
    }
    SECTION("fortran_order not a bool") {
        expect_rejected(path, npy_file(1, 0, "{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }", six),
                        {"fortran_order", "True or False"});
        expect_rejected(path, npy_file(1, 0, "{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2, 3), }", six),
                        {"fortran_order"});
    }
    SECTION("truncated data") {
        expect_rejected(path, good.substr(0, good.size() - 1), {"truncated", "24 data bytes", "found 23"});
    }
    SECTION("trailing bytes") { expect_rejected(path, good + "xx", {"trailing", "found 26"}); }
    SECTION("shape bigger than the file") { expect_rejected(path, npy_v1("(1000000, 1000)", six), {"truncated"}); }
    SECTION("file ends inside the header length") {
        expect_rejected(path, good.substr(0, 8), {"truncated"});
        expect_rejected(path, good.substr(0, 9), {"truncated"});
        expect_rejected(path, npy_file(2, 0, header_with("(2, 3), "), six).substr(0, 11), {"truncated"});
    }
    SECTION("file ends inside the header") { expect_rejected(path, good.substr(0, 40), {"truncated", "header"}); }
    SECTION("header length beyond the file") {
        Bytes bytes = good;
        bytes[8] = '\xff';
        bytes[9] = '\xff';
        expect_rejected(path, bytes, {"truncated", "65535"});
    }
    SECTION("huge version 2.0 header length") {
        const Bytes bytes = Bytes("\x93NUMPY\x02\x00", 8) + little_endian(0xffffffffu, 4) + "{}";
        expect_rejected(path, bytes, {"truncated", "4294967295"});
    }
    SECTION("missing keys") {
        expect_rejected(path, npy_file(1, 0, "{'descr': '<f4', 'fortran_order': False, }", six),
                        {"missing", "'shape'"});
        expect_rejected(path, npy_file(1, 0, "{'fortran_order': False, 'shape': (2, 3)}", six), {"missing", "'descr'"});
        expect_rejected(path, npy_file(1, 0, "{'descr': '<f4', 'shape': (2, 3)}", six), {"missing", "'fortran_order'"});
        expect_rejected(path, npy_file(1, 0, "{}", six), {"missing"});
    }
    SECTION("extra and duplicate keys") {
        expect_rejected(path, npy_file(1, 0, header_with("(2, 3), 'extra': 1, "), six), {"unexpected key", "extra"});
        expect_rejected(path, npy_file(1, 0, header_with("(2, 3), 'shape': (6,), "), six), {"duplicate", "shape"});
    }
    SECTION("garbage in shape") {
        for (const char *shape :
             {"(2, x)", "(2 3)", "(,)", "(2,,3)", "(2, 3", "[2, 3]", "6", "(3)", "(2.0, 3)", "(+2, 3)", "(2, -)"}) {
            CAPTURE(shape);
            expect_rejected(path, npy_file(1, 0, header_with(std::string(shape) + ", "), six),
                            {"malformed header", "shape"});
        }
    }
    SECTION("other header garbage") {
        for (const char *dict :
             {"", "   ", "descr", "{'descr' '<f4'}",
              "{'descr': '<f4', 'fortran_order': False, "
              "'shape': (2, 3), } junk",
              "{'descr': '<f4'", "{'descr: '<f4'}", "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2, 3)}",
              "{'descr': '<f4',, 'fortran_order': False, 'shape': (2, 3)}", "{,}",
              "{descr: '<f4', 'fortran_order': False, 'shape': (2, 3)}", "\x01\xff\x80"}) {
            CAPTURE(dict);
            expect_rejected(path, npy_file(1, 0, dict, six), {"malformed header"});
        }
    }
    SECTION("negative extent") { expect_rejected(path, npy_v1("(-1, 3)", six), {"negative", "-1"}); }
    SECTION("element count overflow") {
        expect_rejected(path, npy_v1("(4294967296, 4294967296)", six), {"bad shape", "overflow"});
        expect_rejected(path, npy_v1("(2305843009213693952,)", six), {"bad shape", "overflow"});  // 2^61 * 4 bytes
        expect_rejected(path, npy_v1("(0, 4294967296, 4294967296)", six), {"bad shape", "overflow"});
        expect_rejected(path, npy_v1("(99999999999999999999, 3)", six), {"overflow"});
    }
    SECTION("nonexistent path") {
        const std::string missing = dir.file("no/such/file.npy");
        Array array;
        std::string error;
        REQUIRE_FALSE(read_float32(missing, &array, &error));
        CHECK(error == missing + ": cannot open file");
    }
    SECTION("a directory") {
        Array array;
        std::string error;
        REQUIRE_FALSE(read_float32(dir.file(""), &array, &error));
        CHECK_THAT(error, Catch::StartsWith(dir.file("") + ": "));
    }
}

TEST_CASE("npy: every proper prefix of a valid file is rejected", "[npy]") {
    TempDir dir;
    const std::string path = dir.file("prefix.npy");
    const Bytes good = npy_v1("(2, 3)", float_bytes(random_nonzero(6, 5)));
    for (std::size_t n = 0; n < good.size(); ++n) {
        CAPTURE(n);
        write_bytes(path, good.substr(0, n));
        Array array;
        std::string error;
        CHECK_FALSE(read_float32(path, &array, &error));
        CHECK_THAT(error, Catch::StartsWith(path + ": "));
    }
}

TEST_CASE("npy: random corruption never crashes", "[npy]") {
    // Not a check of particular answers: a corrupt header may still be valid. Under the sanitizers this
    // shows that no input leads to a crash, an out-of-bounds read, or an exception.
    TempDir dir;
    const std::string path = dir.file("fuzz.npy");
    const Bytes good = npy_v1("(2, 3)", float_bytes(random_nonzero(6, 11)));
    std::mt19937 rng(12345);
    for (int round = 0; round < 2000; ++round) {
        Bytes bytes = good;
        const int flips = 1 + static_cast<int>(rng() % 4);
        for (int i = 0; i < flips; ++i) {
            const std::size_t at = rng() % (80 < bytes.size() ? 80 : bytes.size());  // mostly the header
            bytes[at] = "0123456789(), -'\"{}:\n\xff"[rng() % 22];
        }
        if (rng() % 4 == 0) bytes.resize(rng() % bytes.size());
        write_bytes(path, bytes);
        Array array;
        std::string error;
        if (!read_float32(path, &array, &error)) CHECK_THAT(error, Catch::StartsWith(path + ": "));
    }
}

TEST_CASE("npy: writer rejects bad input and unwritable paths", "[npy]") {
    TempDir dir;
    const float value = 1.0f;
    std::string error;

    SECTION("negative extent") {
        const std::string path = dir.file("neg.npy");
        REQUIRE_FALSE(write_float32(path, {2, -3}, &value, &error));
        CHECK_THAT(error, Catch::StartsWith(path + ": ") && Catch::Contains("negative"));
        CHECK_FALSE(fs::exists(path));
    }
    SECTION("element count overflow") {
        const std::string path = dir.file("big.npy");
        REQUIRE_FALSE(write_float32(path, {int64_t{1} << 32, int64_t{1} << 32}, &value, &error));
        CHECK_THAT(error, Catch::StartsWith(path + ": ") && Catch::Contains("overflow"));
    }
    SECTION("null data") {
        const std::string path = dir.file("null.npy");
        REQUIRE_FALSE(write_float32(path, {3}, nullptr, &error));
        CHECK_THAT(error, Catch::StartsWith(path + ": ") && Catch::Contains("null"));
        REQUIRE(write_float32(path, {0, 3}, nullptr, &error));  // nothing to write, so null is fine
        CHECK(read_ok(path).data.empty());
    }
    SECTION("directory does not exist") {
        const std::string path = dir.file("no/such/dir/out.npy");
        REQUIRE_FALSE(write_float32(path, {1}, &value, &error));
        CHECK(error == path + ": cannot open file for writing");
    }
}

TEST_CASE("npy: reading from memory agrees with reading the file, and names the buffer on errors", "[npy]") {
    TempDir dir;
    const std::string path = dir.file("in_memory.npy");
    const std::vector<float> values = random_nonzero(6, 7);
    std::string error;
    REQUIRE(write_float32(path, {2, 3}, values.data(), &error));
    const Bytes bytes = read_bytes(path);
    Array from_memory;
    REQUIRE(halcaps::npy::read_float32_from_memory("buffer", bytes.data(), bytes.size(), &from_memory, &error));
    const Array from_file = read_ok(path);
    CHECK(from_memory.shape == from_file.shape);
    CHECK(bits(from_memory.data) == bits(from_file.data));
    // Every proper prefix is refused with a message that starts with the name given.
    for (std::size_t size = 0; size < bytes.size(); ++size) {
        Array untouched;
        std::string why;
        CAPTURE(size);
        REQUIRE_FALSE(halcaps::npy::read_float32_from_memory("buffer", bytes.data(), size, &untouched, &why));
        CHECK(why.rfind("buffer: ", 0) == 0);
        CHECK(untouched.shape.empty());
    }
}

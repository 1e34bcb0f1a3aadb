// Reading and writing NumPy .npy files of float32 in C order; see npy.h.
//
// File layout (numpy/lib/format.py):
//   6 bytes  magic "\x93NUMPY"
//   2 bytes  format version: major, minor (1.0, 2.0 or 3.0)
//   2 bytes  (version 1.0) or 4 bytes (2.0, 3.0): little-endian header length H
//   H bytes  header: a Python dict literal such as
//            {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
//            padded with spaces and ended by '\n'
//   the raw array data, product(shape) * 4 bytes
#include "cli/npy.h"

#include <cstddef>
#include <fstream>
#include <limits>
#include <new>
#include <sstream>

// The float data is copied byte for byte between the file and memory, which is right only where
// float is IEEE-754 binary32 stored little-endian, as on every platform this project targets.
static_assert(std::numeric_limits<float>::is_iec559 && sizeof(float) == 4,
              "halcaps::npy needs IEEE-754 binary32 float");
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "halcaps::npy copies '<f4' bytes straight into float, so it needs a little-endian host"
#endif

namespace halcaps::npy {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;
constexpr std::size_t kVersionLen = 2;
constexpr std::size_t kAlign = 64;                // NumPy's ARRAY_ALIGN: data starts on a 64-byte boundary
constexpr std::size_t kGrowthAxisMaxDigits = 21;  // NumPy's GROWTH_AXIS_MAX_DIGITS
constexpr int64_t kFloatBytes = 4;
constexpr const char *kDescr = "<f4";

// What the header dict says.
struct Header {
    std::string descr;
    bool fortran_order = false;
    std::vector<int64_t> shape;
};

// ---------------------------------------------------------------------------------------------
// Shapes (shared by reader and writer)

// The shape as Python's repr of a tuple writes it: "()", "(3,)", "(2, 3)". This is both what goes
// into the header we write and how shapes appear in error messages.
std::string format_shape(const std::vector<int64_t> &shape) {
    std::string text = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i > 0) text += ", ";
        text += std::to_string(shape[i]);
    }
    if (shape.size() == 1) text += ",";
    return text + ")";
}

// Number of elements in an array of this shape. Fails on a negative extent, and when the byte
// count would not fit in int64, so that the caller can use count * 4 without overflow. Like NumPy,
// the nonzero extents must multiply without overflow even if another extent is 0; that keeps the
// answer independent of the order of the extents.
bool element_count(const std::vector<int64_t> &shape, int64_t *count, std::string *why) {
    const int64_t max_count = std::numeric_limits<int64_t>::max() / kFloatBytes;
    int64_t nonzero_product = 1;
    bool has_zero = false;
    for (int64_t extent : shape) {
        if (extent < 0) {
            *why = "bad shape " + format_shape(shape) + ": extent " + std::to_string(extent) + " is negative";
            return false;
        }
        if (extent == 0) {
            has_zero = true;
            continue;
        }
        if (nonzero_product > max_count / extent) {
            *why = "bad shape " + format_shape(shape) + ": element count overflows 64 bits";
            return false;
        }
        nonzero_product *= extent;
    }
    *count = has_zero ? 0 : nonzero_product;
    return true;
}

// ---------------------------------------------------------------------------------------------
// Header parsing

// Parses the one Python literal NumPy writes as the header: a dict whose keys are 'descr',
// 'fortran_order' and 'shape', with a string, True/False and a tuple of ints as values. It takes
// what Python's ast.literal_eval (which NumPy uses) takes for such a dict: whitespace between
// tokens, ' or " quotes, keys in any order, trailing commas. It takes nothing more: no escapes in
// strings, no other value kinds, no other keys (NumPy rejects other keys too), no duplicate keys,
// no Python 2 "3L" integers.
class HeaderParser {
public:
    explicit HeaderParser(const std::string &text) : text_(text) {}

    bool parse(Header *out, std::string *why) {
        bool seen_descr = false, seen_fortran = false, seen_shape = false;
        skip_space();
        if (!consume('{')) return fail("expected '{'", why);
        while (true) {
            skip_space();
            if (consume('}')) break;
            std::string key;
            if (!parse_string(&key, why)) return false;
            skip_space();
            if (!consume(':')) return fail("expected ':' after key '" + key + "'", why);
            skip_space();
            bool ok;
            if (key == "descr" && !seen_descr) {
                ok = parse_string(&out->descr, why);
                seen_descr = true;
            } else if (key == "fortran_order" && !seen_fortran) {
                ok = parse_bool(&out->fortran_order, why);
                seen_fortran = true;
            } else if (key == "shape" && !seen_shape) {
                ok = parse_shape(&out->shape, why);
                seen_shape = true;
            } else if (key == "descr" || key == "fortran_order" || key == "shape") {
                return fail("duplicate key '" + key + "'", why);
            } else {
                return fail("unexpected key '" + key + "'", why);
            }
            if (!ok) return false;
            skip_space();
            if (consume(',')) continue;
            if (consume('}')) break;
            return fail("expected ',' or '}' after the value of '" + key + "'", why);
        }
        skip_space();
        if (pos_ != text_.size()) return fail("unexpected text after the dict", why);
        if (!seen_descr) return fail_missing("descr", why);
        if (!seen_fortran) return fail_missing("fortran_order", why);
        if (!seen_shape) return fail_missing("shape", why);
        return true;
    }

private:
    // A quoted string without escapes, e.g. '<f4' or "shape".
    bool parse_string(std::string *out, std::string *why) {
        if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
            return fail("expected a quoted string", why);
        }
        const char quote = text_[pos_];
        const std::size_t start = pos_ + 1;
        for (std::size_t i = start; i < text_.size(); ++i) {
            if (text_[i] == '\\' || text_[i] == '\n') {
                pos_ = i;
                return fail("unsupported character in string", why);
            }
            if (text_[i] == quote) {
                *out = text_.substr(start, i - start);
                pos_ = i + 1;
                return true;
            }
        }
        return fail("unterminated string", why);
    }

    // Python's True or False. Nothing else counts: NumPy rejects 0/1 here as well.
    bool parse_bool(bool *out, std::string *why) {
        if (consume_word("True")) {
            *out = true;
            return true;
        }
        if (consume_word("False")) {
            *out = false;
            return true;
        }
        return fail("'fortran_order' must be True or False", why);
    }

    // A tuple of integers: "()", "(3,)", "(2, 3)", "(2,3,)". "(3)" is not a tuple in Python
    // (it is the int 3), so it is rejected, as NumPy does.
    bool parse_shape(std::vector<int64_t> *out, std::string *why) {
        if (!consume('(')) return fail("'shape' must be a tuple such as (2, 3)", why);
        out->clear();
        bool comma_after_last = false;
        while (true) {
            skip_space();
            if (consume(')')) break;
            int64_t extent = 0;
            if (!parse_int(&extent, why)) return false;
            out->push_back(extent);
            skip_space();
            comma_after_last = consume(',');
            if (comma_after_last) continue;
            if (consume(')')) break;
            return fail("expected ',' or ')' in 'shape'", why);
        }
        if (out->size() == 1 && !comma_after_last) {
            return fail("'shape' with one extent needs a trailing comma, as in (3,)", why);
        }
        return true;
    }

    // A decimal integer with an optional '-' (negative extents are parsed here so that the shape
    // check can name them; they are rejected there).
    bool parse_int(int64_t *out, std::string *why) {
        const bool negative = consume('-');
        if (pos_ >= text_.size() || !is_digit(text_[pos_])) {
            return fail("expected an integer in 'shape'", why);
        }
        int64_t value = 0;
        while (pos_ < text_.size() && is_digit(text_[pos_])) {
            const int digit = text_[pos_] - '0';
            if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) {
                return fail("integer in 'shape' overflows 64 bits", why);
            }
            value = value * 10 + digit;
            ++pos_;
        }
        *out = negative ? -value : value;
        return true;
    }

    static bool is_digit(char c) { return c >= '0' && c <= '9'; }

    // Whitespace that Python allows between tokens inside brackets.
    void skip_space() {
        while (pos_ < text_.size() &&
               (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
            ++pos_;
        }
    }

    // Consumes c if it is the next character.
    bool consume(char c) {
        if (pos_ < text_.size() && text_[pos_] == c) {
            ++pos_;
            return true;
        }
        return false;
    }

    // Consumes word if it comes next as a whole identifier (so "Falsey" is not False).
    bool consume_word(const std::string &word) {
        if (text_.compare(pos_, word.size(), word) != 0) return false;
        const std::size_t end = pos_ + word.size();
        if (end < text_.size()) {
            const char next = text_[end];
            if (is_digit(next) || next == '_' || (next >= 'a' && next <= 'z') || (next >= 'A' && next <= 'Z')) {
                return false;
            }
        }
        pos_ = end;
        return true;
    }

    // Reports a syntax error with the offset and a short printable excerpt of what was found there,
    // keeping the message on one line.
    bool fail(const std::string &what, std::string *why) const {
        std::string near;
        for (std::size_t i = pos_; i < text_.size() && near.size() < 16; ++i) {
            const char c = text_[i];
            near += (c >= 0x20 && c < 0x7f) ? c : '?';
        }
        *why = "malformed header: " + what + " at offset " + std::to_string(pos_) +
               (near.empty() ? std::string(" (end of header)") : " (near \"" + near + "\")");
        return false;
    }

    static bool fail_missing(const std::string &key, std::string *why) {
        *why = "malformed header: missing key '" + key + "'";
        return false;
    }

    const std::string &text_;
    std::size_t pos_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Reading

// Reads exactly n bytes, failing on a short read.
bool read_exact(std::istream &in, char *dst, std::size_t n) {
    in.read(dst, static_cast<std::streamsize>(n));
    return static_cast<std::size_t>(in.gcount()) == n;
}

// The file's size in bytes, leaving the stream at the start.
bool file_size(std::istream &in, uint64_t *size) {
    in.seekg(0, std::ios::end);
    const std::streamoff end = in.tellg();
    in.seekg(0, std::ios::beg);
    if (end < 0 || !in) return false;
    *size = static_cast<uint64_t>(end);
    return true;
}

// Checks the magic string and version and reads the header length. On success the stream is at
// the first byte of the header and *prefix_len counts the bytes before it.
bool read_prefix(std::istream &in, uint64_t size, uint64_t *header_len, uint64_t *prefix_len, std::string *why) {
    unsigned char lead[kMagicLen + kVersionLen] = {};
    const std::size_t lead_len = size < sizeof lead ? static_cast<std::size_t>(size) : sizeof lead;
    if (!read_exact(in, reinterpret_cast<char *>(lead), lead_len)) {
        *why = "cannot read file";
        return false;
    }
    // Compare what is there first, so that a short non-.npy file is called that, not "truncated".
    for (std::size_t i = 0; i < kMagicLen && i < lead_len; ++i) {
        if (lead[i] != static_cast<unsigned char>(kMagic[i])) {
            *why = "not a .npy file (bad magic)";
            return false;
        }
    }
    if (lead_len < sizeof lead) {
        *why = "file is truncated: it ends inside the magic string and version";
        return false;
    }
    const int major = lead[kMagicLen];
    const int minor = lead[kMagicLen + 1];
    if (minor != 0 || major < 1 || major > 3) {
        *why = "unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
               " (need 1.0, 2.0 or 3.0)";
        return false;
    }
    // Version 1.0 stores the header length in 2 bytes; 2.0 and 3.0 use 4 for bigger headers.
    const std::size_t len_bytes = major == 1 ? 2 : 4;
    unsigned char len_field[4] = {};
    if (size < sizeof lead + len_bytes || !read_exact(in, reinterpret_cast<char *>(len_field), len_bytes)) {
        *why = "file is truncated: it ends inside the header length";
        return false;
    }
    *header_len = 0;
    for (std::size_t i = len_bytes; i-- > 0;) *header_len = (*header_len << 8) | len_field[i];
    *prefix_len = sizeof lead + len_bytes;
    return true;
}

// Reads and parses the header dict. The file size is checked first, so a huge header length in a
// small file never makes us allocate.
bool read_header(std::istream &in, uint64_t size, uint64_t prefix_len, uint64_t header_len, Header *header,
                 std::string *why) {
    const uint64_t available = size - prefix_len;
    if (header_len > available) {
        *why = "file is truncated: header length is " + std::to_string(header_len) + " bytes, but only " +
               std::to_string(available) + " bytes follow";
        return false;
    }
    std::string text(static_cast<std::size_t>(header_len), '\0');
    if (!read_exact(in, &text[0], text.size())) {
        *why = "cannot read header";
        return false;
    }
    return HeaderParser(text).parse(header, why);
}

// Checks that the header describes data we can use as it is.
bool check_header(const Header &header, std::string *why) {
    if (header.descr != kDescr) {
        *why = "dtype '" + header.descr + "' is not supported (need float32 '" + kDescr + "')";
        return false;
    }
    if (header.fortran_order) {
        *why = "fortran_order arrays are not supported (save with C order)";
        return false;
    }
    return true;
}

// Reads the data that follows the header; the file must hold exactly that many bytes more.
bool read_data(std::istream &in, uint64_t size, uint64_t data_offset, int64_t count, std::vector<float> *data,
               std::string *why) {
    const uint64_t expected = static_cast<uint64_t>(count) * kFloatBytes;  // no overflow: see element_count
    const uint64_t found = size - data_offset;
    if (found != expected) {
        *why = std::string(found < expected ? "file is truncated" : "file has trailing bytes") + ": header promises " +
               std::to_string(expected) + " data bytes, found " + std::to_string(found);
        return false;
    }
    if (static_cast<uint64_t>(count) > data->max_size()) {
        *why = "array is too large for memory";
        return false;
    }
    data->resize(static_cast<std::size_t>(count));
    if (!read_exact(in, reinterpret_cast<char *>(data->data()), static_cast<std::size_t>(expected))) {
        *why = "cannot read data";
        return false;
    }
    return true;
}

// read_float32 on an open stream, without the path prefix on errors and without the out-of-memory guard.
bool read_stream(std::istream &in, Array *out, std::string *why) {
    uint64_t size = 0;
    if (!file_size(in, &size)) {
        *why = "cannot read file (not a regular file?)";
        return false;
    }
    if (size == 0) {
        *why = "file is empty";
        return false;
    }
    uint64_t header_len = 0, prefix_len = 0;
    if (!read_prefix(in, size, &header_len, &prefix_len, why)) return false;
    Header header;
    if (!read_header(in, size, prefix_len, header_len, &header, why)) return false;
    if (!check_header(header, why)) return false;
    int64_t count = 0;
    if (!element_count(header.shape, &count, why)) return false;
    Array array;
    if (!read_data(in, size, prefix_len + header_len, count, &array.data, why)) return false;
    array.shape = std::move(header.shape);
    *out = std::move(array);
    return true;
}

bool read_file(const std::string &path, Array *out, std::string *why) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        *why = "cannot open file";
        return false;
    }
    return read_stream(in, out, why);
}

// ---------------------------------------------------------------------------------------------
// Writing

// The header text exactly as numpy.save writes it for a C-order '<f4' array.
std::string make_header(const std::vector<int64_t> &shape) {
    std::string header =
        std::string("{'descr': '") + kDescr + "', 'fortran_order': False, 'shape': " + format_shape(shape) + ", }";
    // NumPy leaves room for the first extent to grow to 21 digits, so that a writer appending rows can
    // rewrite the header in place.
    if (!shape.empty()) header += std::string(kGrowthAxisMaxDigits - std::to_string(shape[0]).size(), ' ');
    // Pad so the data starts on a 64-byte boundary; like NumPy, always at least one space.
    const std::size_t prefix_len = kMagicLen + kVersionLen + 2;
    const std::size_t pad = kAlign - (prefix_len + header.size() + 1) % kAlign;
    return header + std::string(pad, ' ') + "\n";
}

// write_float32 without the path prefix on errors and without the out-of-memory guard.
bool write_file(const std::string &path, const std::vector<int64_t> &shape, const float *data, std::string *why) {
    int64_t count = 0;
    if (!element_count(shape, &count, why)) return false;
    if (count > 0 && data == nullptr) {
        *why = "data is null";
        return false;
    }
    const std::string header = make_header(shape);
    if (header.size() > 0xffff) {
        *why = "shape has too many dimensions for a version 1.0 header";
        return false;
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) {
        *why = "cannot open file for writing";
        return false;
    }
    const char lead[] = {kMagic[0],
                         kMagic[1],
                         kMagic[2],
                         kMagic[3],
                         kMagic[4],
                         kMagic[5],
                         1,
                         0,  // version 1.0
                         static_cast<char>(header.size() & 0xff),
                         static_cast<char>(header.size() >> 8)};
    out.write(lead, sizeof lead);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    if (count > 0) out.write(reinterpret_cast<const char *>(data), static_cast<std::streamsize>(count * kFloatBytes));
    out.close();
    if (!out) {
        *why = "write failed (disk full?)";
        return false;
    }
    return true;
}

}  // namespace

bool read_float32(const std::string &path, Array *out, std::string *error) {
    std::string why;
    bool ok = false;
    try {
        ok = read_file(path, out, &why);
    } catch (const std::bad_alloc &) {  // a file bigger than memory must not take the program down
        why = "out of memory";
    }
    if (!ok) *error = path + ": " + why;
    return ok;
}

bool read_float32_from_memory(const std::string &name, const void *bytes, std::size_t size, Array *out,
                              std::string *error) {
    std::string why;
    bool ok = false;
    try {
        std::istringstream in(std::string(static_cast<const char *>(bytes), size), std::ios::binary);
        ok = read_stream(in, out, &why);
    } catch (const std::bad_alloc &) {
        why = "out of memory";
    }
    if (!ok) *error = name + ": " + why;
    return ok;
}

bool write_float32(const std::string &path, const std::vector<int64_t> &shape, const float *data, std::string *error) {
    std::string why;
    bool ok = false;
    try {
        ok = write_file(path, shape, data, &why);
    } catch (const std::bad_alloc &) {
        why = "out of memory";
    }
    if (!ok) *error = path + ": " + why;
    return ok;
}

}  // namespace halcaps::npy

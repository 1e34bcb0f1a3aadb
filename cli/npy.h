// Reading and writing NumPy .npy files that hold float32 arrays in C order, so that
// the command-line tool and the tests can exchange tensors with Python.
//
// Only the one kind of file we need is supported: little-endian float32 ('<f4'),
// C (row-major) order. Everything else is rejected with a message that says why,
// instead of being converted silently. The format is described in NumPy's
// numpy/lib/format.py ("NEP 1").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace halcaps::npy {

struct Array {
    std::vector<int64_t> shape;  // row-major, as NumPy writes it; a 0-d array has an empty shape and one element
    std::vector<float> data;     // product(shape) elements
};

// Reads a .npy file (format versions 1.0, 2.0 and 3.0) that holds little-endian float32 ('<f4') data in C order.
// On success returns true and fills *out. On failure returns false, leaves *out untouched and sets *error to a
// one-line message that starts with the path and says what is wrong, e.g.
//   "u.npy: dtype '<f8' is not supported (need float32 '<f4')"
//   "u.npy: fortran_order arrays are not supported (save with C order)"
//   "u.npy: file is truncated: header promises 1024 data bytes, found 1000"
// Never throws, whatever the file holds. out and error must not be null.
// '=f4' (native order of whichever machine wrote the file) and '|f4' are rejected: NumPy itself always
// writes '<f4' for little-endian float32, and '=' does not say which order the bytes are in.
bool read_float32(const std::string &path, Array *out, std::string *error);

// The same on the `size` bytes at `bytes` (a file's whole contents); `name`
// starts the error messages in place of the path.
bool read_float32_from_memory(const std::string &name, const void *bytes, std::size_t size, Array *out,
                              std::string *error);

// Writes a version 1.0 .npy file ('<f4', fortran_order False, the given shape; header padded with spaces and
// terminated by '\n' so that magic+len+header is a multiple of 64 bytes, as NumPy does). The bytes are the
// same as numpy.save writes for the same array.
// Returns false and sets *error (naming the path) if the file cannot be written or shape has a negative extent.
// data may be null only when the shape has no elements. Never throws. error must not be null.
bool write_float32(const std::string &path, const std::vector<int64_t> &shape, const float *data, std::string *error);

}  // namespace halcaps::npy

// Hand-written CUDA kernels for the 4x4-pose capsule convolution (docs/design.md
// §1.3), in the style of predict_cuda.h: numbered versions, naive
// first, one launcher per version and a switch to pick one.
//
//   I [n, H, W, ci, 4, 4]     O[n,y,x,co] = sum_{dy,dx,ci} I[n, y*stride+dy-pad, x*stride+dx-pad, ci] . K[dy,dx,ci,co]
//   K [kh, kw, ci, co, 4, 4]  (. is the 4x4 matrix product, O_ij = sum_c I_ic K_cj;
//   O [n, OH, OW, co, 4, 4]    input outside the image is zero)
//
// Versions 1-4 are Vaidya's kernels ("Speeding up Capsules"), written from the
// paper's description and generalised to n >= 1, co >= 1, stride >= 1 and zero
// padding. All of them run one thread per output pose O[n, y, x, co] (the
// paper: one thread per output pixel, co = 1) in blocks of 64 pixels of one co
// (blockIdx.y), and stage the filter poses of that co in shared memory, in
// chunks of at most 512 (dy, dx, ci) taps (32 KB), so any filter size works.
// They differ only in how a thread computes its 4x4 sum:
//
//   1 vaidya_b   the paper's baseline B: zero the output pose, then for every
//                tap read-modify-write each output element in global memory
//                (its 4-term sum added; 16 volatile loads + 16 stores per
//                tap). Expected to be slow: the output goes through L2 once
//                per tap and element.
//                H200, seed / layer / stride2: 600 / 59511 / 5201 us
//                (docs/design.md §3: 653 us on the seed problem).
//   2 vaidya_i1  I1, scalar accumulation: for each of the 16 output elements
//                (a rolled loop) one local accumulator runs over all taps and
//                the 4 terms, then one store. No global read-modify-write, but
//                the input row is re-read from L1 for every output element
//                (4x the loads of I3) and nothing is unrolled.
//                H200: 538 / 37206 / 2669 us.
//   3 vaidya_i2  I2, the 4x4x4 product of each tap unrolled: 16 accumulators
//                (registers, since the indices are now constants), taps outer;
//                operands are scalar loads at their point of use (the compiler
//                may or may not merge the repeated ones).
//                H200: 68.1 / 5090 / 349 us.
//   4 vaidya_i3  I3, scalar replacement: per tap the input pose row is loaded
//                once into 4 registers (one 16-byte load when aligned) and the
//                filter pose into 16 registers (float4 loads from shared
//                memory); the 4x4 output pose stays in 16 registers and is
//                written with four 16-byte stores. This is the reference
//                kernel of the capsconv bench rows. Expected to be bound by
//                the FMA issue rate and L1 traffic of the input (each input
//                pose is read by kh*kw*co threads, from L1/L2, never staged).
//                H200: 47.6 / 1307 / 196 us (docs/design.md §3: an I3-style kernel
//                took 25.6 us on the seed problem, 1283 us on the layer).
//
// Correctness note: the paper's I1-I3 listings store into the output inside
// the loop over filter taps (each tap overwrites the previous one's result).
// Ours accumulate over all taps (and all ci) before the single store, so they
// compute the full sum; B accumulates in global memory as the paper's does,
// after zeroing the output itself (outputs may hold anything, e.g. NaN).
//
// All pointers are device pointers. Launchers only enqueue work on `stream`
// and return cudaGetLastError(); they never synchronise. They return
// cudaErrorInvalidValue for an unknown version, an extent < 1, stride < 1,
// pad < 0, a filter larger than the padded input, a null pointer, or extents
// past the grid's range.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace halcaps::cuda_reference {

struct CapsConvShape {
    int64_t batch, height, width, in_caps;  // n, H, W, ci
    int64_t kernel_h, kernel_w, out_caps;   // kh, kw, co
    int64_t stride = 1, pad = 0;

    int64_t out_height() const { return (height + 2 * pad - kernel_h) / stride + 1; }
    int64_t out_width() const { return (width + 2 * pad - kernel_w) / stride + 1; }
};

// True when the launchers accept the shape (see above).
bool capsconv_shape_ok(const CapsConvShape &shape);

int capsconv_version_count();  // 4: versions are 1..count
// "vaidya_b", "vaidya_i1", "vaidya_i2", "vaidya_i3"; nullptr if unknown.
const char *capsconv_version_name(int version);

// output = capsconv(input, filter).
cudaError_t capsconv_forward(int version, const float *input, const float *filter, float *output,
                             const CapsConvShape &shape, cudaStream_t stream);

}  // namespace halcaps::cuda_reference

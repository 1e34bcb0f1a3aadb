// u_hat's products on the Hopper warpgroup tensor cores (wgmma, sm_90a) in
// float32 accuracy from three TF32 products (3xTF32, as tf32_mma.cuh), for
// digitcaps_tensor_cores.cu's passes at out_caps x out_dim = 160 (MNIST's).
//
// One warpgroup (4 warps, 128 threads) takes 64 batch rows; warp w of it
// rows 16w .. 16w + 15. A (u, 64 x 8) comes from registers in the layout of
// mma.m16n8k8's A fragment (lane g = lane / 4, t = lane % 4: rows g, g + 8,
// mma-k t and t + 4), so the kernel's u fragments serve both paths. B (W[i]
// split into its TF32 parts, 8 x 160) is read from shared memory through a
// matrix descriptor, in the canonical layout without swizzling: 8 x 16-byte
// core matrices (8 columns n, 4 mma-k each) at kCoreStride bytes along n,
// the two halves of mma-k kHalfBytes apart. The accumulators hold D as
// mma.m16n8k8's C fragments, 20 tiles of 8 columns in a row: a lane's
// rows g, g + 8 at columns 8 n + 2t, 8 n + 2t + 1.
//
// Without sm_90a (a build for another architecture) the products are not
// available: kernels that call them are never launched there
// (available() on the host), and they trap if they are.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "tf32_mma.cuh"

namespace halcaps::cuda_reference::wgmma_tf32 {

constexpr int kN = 160;                    // columns of one product: out_caps x out_dim
constexpr int kCoreStride = 8 * 16;        // bytes between core matrices along n
constexpr int kHalfBytes = kN / 8 * kCoreStride;  // bytes between the two halves of mma-k
constexpr int kOperandFloats = kN * 8;     // floats of one split part of B

// Whether this build has the sm_90a products (HALCAPS_CUDA_SM90A, set by the
// build where an sm_90a architecture is compiled).
inline bool built() {
#if defined(HALCAPS_CUDA_SM90A) && HALCAPS_CUDA_SM90A
    return true;
#else
    return false;
#endif
}

// A shared-memory matrix descriptor: no swizzling, base offset 0; the
// leading byte offset is the step between core matrices along k, the stride
// byte offset the step along n (both multiples of 16 bytes).
__device__ inline uint64_t descriptor(uint32_t shared_address) {
    return uint64_t((shared_address >> 4) & 0x3fffu) | uint64_t((kHalfBytes >> 4) & 0x3fff) << 16 |
           uint64_t((kCoreStride >> 4) & 0x3fff) << 32;
}

// The shared-memory float index, in one split part of B, of mma-k k and
// column n.
__host__ __device__ constexpr int operand_index(int k, int n) {
    return (k / 4) * (kHalfBytes / 4) + n * 4 + k % 4;
}

// d (a lane's 80 accumulators) = [d +] a * b in float32 accuracy: the
// small products first, so that they are not lost below the big one.
// b_big and b_small are descriptors of B's two parts; accumulate false
// starts from zero. Waits for the products before it returns.
__device__ inline void mma_3xtf32(float (&d)[80], const tf32::SplitA &a, uint64_t b_big, uint64_t b_small,
                                  bool accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile(
        "{\n"
        ".reg .pred keep, one;\n"
        "setp.ne.b32 keep, %90, 0;\n"
        "setp.eq.b32 one, 0, 0;\n"
        "wgmma.fence.sync.aligned;\n"
        "wgmma.mma_async.sync.aligned.m64n160k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79}, {%80, %81, %82, %83}, %88, keep, 1, 1;\n"
        "wgmma.mma_async.sync.aligned.m64n160k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79}, {%84, %85, %86, %87}, %89, one, 1, 1;\n"
        "wgmma.mma_async.sync.aligned.m64n160k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79}, {%84, %85, %86, %87}, %88, one, 1, 1;\n"
        "wgmma.commit_group.sync.aligned;\n"
        "wgmma.wait_group.sync.aligned 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79])
        : "r"(a.small[0]), "r"(a.small[1]), "r"(a.small[2]), "r"(a.small[3]), "r"(a.big[0]), "r"(a.big[1]),
          "r"(a.big[2]), "r"(a.big[3]), "l"(b_big), "l"(b_small), "r"(int(accumulate))
        : "memory");
#else
    (void)d, (void)a, (void)b_big, (void)b_small, (void)accumulate;
    __trap();
#endif
}

// Makes this thread's shared-memory stores (B's parts) visible to the
// products, which read shared memory through the async proxy; a barrier
// between the stores and the products must follow.
__device__ inline void fence_stores_for_products() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

}  // namespace halcaps::cuda_reference::wgmma_tf32

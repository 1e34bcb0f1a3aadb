// Checks wgmma_tf32.cuh's layouts on the GPU before a kernel relies on them:
// one warpgroup computes D = A * B (64 x 8 times 8 x 160) with A from
// registers in the kernel's fragment layout (mma-k t -> in_dim 2t, t + 4 ->
// 2t + 1) and B's TF32 parts in shared memory at operand_index, and the
// result is compared with a float64 product. Also with the two descriptor
// offsets swapped, to show which reading of them is the right one.
#include <cstdio>
#include <cmath>
#include <random>
#include <vector>

#include "wgmma_tf32.cuh"

using namespace halcaps::cuda_reference;

__global__ void probe(const float *A, const float *B, float *D, bool swapped) {
    __shared__ __align__(128) float parts[2 * wgmma_tf32::kOperandFloats];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    // B is [n][in_dim] (W[i]'s layout); mma-k k holds in_dim 2k (k < 4) or 2(k - 4) + 1.
    for (int x = threadIdx.x; x < 160 * 8; x += 128) {
        const int n = x / 8, in = x % 8, k = in % 2 == 0 ? in / 2 : in / 2 + 4;
        const tf32::Split s = tf32::split_tf32(B[x]);
        parts[wgmma_tf32::operand_index(k, n)] = __uint_as_float(s.big);
        parts[wgmma_tf32::kOperandFloats + wgmma_tf32::operand_index(k, n)] = __uint_as_float(s.small);
    }
    wgmma_tf32::fence_stores_for_products();
    __syncthreads();
    const int r0 = 16 * warp + g;
    const float *lo = A + r0 * 8, *hi = A + (r0 + 8) * 8;
    const tf32::SplitA a = tf32::split_a(lo[2 * t], hi[2 * t], lo[2 * t + 1], hi[2 * t + 1]);
    uint64_t big = wgmma_tf32::descriptor(uint32_t(__cvta_generic_to_shared(parts)));
    uint64_t small = wgmma_tf32::descriptor(uint32_t(__cvta_generic_to_shared(parts + wgmma_tf32::kOperandFloats)));
    if (swapped) {
        const uint64_t lead = (big >> 16) & 0x3fff, stride = (big >> 32) & 0x3fff;
        big = (big & ~(uint64_t(0x3fff) << 16) & ~(uint64_t(0x3fff) << 32)) | stride << 16 | lead << 32;
        small = (small & ~(uint64_t(0x3fff) << 16) & ~(uint64_t(0x3fff) << 32)) | stride << 16 | lead << 32;
    }
    float d[80];
    for (int i = 0; i < 80; i++) d[i] = 1.0f;  // overwritten: accumulate false
    wgmma_tf32::mma_3xtf32(d, a, big, small, false);
    for (int nb = 0; nb < 20; nb++) {
        for (int r = 0; r < 4; r++) D[(r0 + 8 * (r / 2)) * 160 + 8 * nb + 2 * t + r % 2] = d[4 * nb + r];
    }
}

int main() {
    std::mt19937 rng(9301);
    std::normal_distribution<float> normal;
    std::vector<float> A(64 * 8), B(160 * 8), D(64 * 160);
    for (auto &x : A) x = normal(rng);
    for (auto &x : B) x = normal(rng);
    float *A_d, *B_d, *D_d;
    cudaMalloc(&A_d, A.size() * 4);
    cudaMalloc(&B_d, B.size() * 4);
    cudaMalloc(&D_d, D.size() * 4);
    cudaMemcpy(A_d, A.data(), A.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(B_d, B.data(), B.size() * 4, cudaMemcpyHostToDevice);
    int failures = 0;
    for (int swapped = 0; swapped < 2; swapped++) {
        cudaMemset(D_d, 0xff, D.size() * 4);  // NaN
        probe<<<1, 128>>>(A_d, B_d, D_d, swapped);
        const cudaError_t err = cudaDeviceSynchronize();
        cudaMemcpy(D.data(), D_d, D.size() * 4, cudaMemcpyDeviceToHost);
        double worst = 0, norm = 0, diff = 0;
        for (int r = 0; r < 64; r++) {
            for (int n = 0; n < 160; n++) {
                double want = 0;
                for (int k = 0; k < 8; k++) want += double(A[r * 8 + k]) * B[n * 8 + k];
                const double e = std::fabs(D[r * 160 + n] - want);
                worst = std::isnan(e) ? INFINITY : std::max(worst, e);
                diff += e * e;
                norm += want * want;
            }
        }
        const double rel = std::sqrt(diff / norm);
        std::printf("descriptor offsets %s: %s, max abs error %.3g, norm-wise %.3g\n",
                    swapped ? "swapped (lead = n step, stride = k step)" : "as in wgmma_tf32.cuh", cudaGetErrorString(err),
                    worst, rel);
        if (!swapped && !(rel < 1e-6)) failures++;
    }
    std::printf("%s\n", failures ? "FAILED" : "passed");
    return failures;
}

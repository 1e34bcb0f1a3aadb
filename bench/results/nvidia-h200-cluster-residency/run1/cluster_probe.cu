// How many thread-block clusters an H200 holds at once, and what a cluster
// barrier and an exchange of row sums through distributed shared memory cost.
// Study: bench/results/nvidia-h200-cluster-residency/ (README.md there).
//
// Build (on the CPU build machine; see the README):
//   nvcc -O3 -std=c++17 -arch=sm_90a -o cluster_probe cluster_probe.cu
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdio>

namespace cg = cooperative_groups;

// Stands for a pass kernel in the occupancy queries: only its block size and
// dynamic shared memory matter there (its registers are few).
__global__ void occupant(float *out) {
    extern __shared__ float staged[];
    staged[threadIdx.x] = float(threadIdx.x);
    __syncthreads();
    if (out != nullptr) out[blockIdx.x] = staged[0];
}

// One routing iteration's exchange in a cluster of N blocks, each holding 16
// rows x 160 partial sums (a 16-row batch tile, MNIST's out_caps x out_dim):
// cluster barrier; block r adds row r over the N blocks; cluster barrier;
// every block copies all 16 added rows to its own shared memory.
template <int N>
__global__ void exchange(float *out, int iterations, unsigned long long *elapsed_ns) {
    extern __shared__ float smem[];
    cg::cluster_group cluster = cg::this_cluster();
    const int rank = int(cluster.block_rank());
    float *partial = smem, *own_row = smem + 16 * 160, *rows = own_row + 160;
    for (int p = threadIdx.x; p < 16 * 160; p += blockDim.x) partial[p] = float(rank + p);
    unsigned long long start = 0, end = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    float carried = 0.0f;
    for (int it = 0; it < iterations; it++) {
        cluster.sync();
        for (int p = threadIdx.x; p < 160; p += blockDim.x) {
            float loaded[N];
#pragma unroll
            for (int q = 0; q < N; q++) loaded[q] = cluster.map_shared_rank(partial, q)[(rank % 16) * 160 + p];
            float total = 0.0f;
#pragma unroll
            for (int q = 0; q < N; q++) total += loaded[q];
            own_row[p] = total;
        }
        cluster.sync();
        for (int p = threadIdx.x; p < 16 * 160; p += blockDim.x) {
            rows[p] = cluster.map_shared_rank(own_row, (p / 160) % N)[p % 160];
        }
        __syncthreads();
        carried += rows[threadIdx.x];
        partial[threadIdx.x] += carried;  // the next iteration's sums depend on this one's rows
    }
    cluster.sync();
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(end));
    if (threadIdx.x == 0) elapsed_ns[blockIdx.x] = end - start;
    if (out != nullptr) out[blockIdx.x * blockDim.x + threadIdx.x] = carried;
}

// Cluster barriers alone.
__global__ void barriers(int iterations, unsigned long long *elapsed_ns) {
    cg::cluster_group cluster = cg::this_cluster();
    unsigned long long start = 0, end = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    for (int it = 0; it < iterations; it++) cluster.sync();
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(end));
    if (threadIdx.x == 0) elapsed_ns[blockIdx.x] = end - start;
}

cudaLaunchConfig_t clustered(int blocks, int threads, int smem, int cluster, cudaLaunchAttribute *attribute) {
    attribute->id = cudaLaunchAttributeClusterDimension;
    attribute->val.clusterDim.x = unsigned(cluster);
    attribute->val.clusterDim.y = 1;
    attribute->val.clusterDim.z = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(unsigned(blocks));
    config.blockDim = dim3(unsigned(threads));
    config.dynamicSmemBytes = size_t(smem);
    config.attrs = attribute;
    config.numAttrs = 1;
    return config;
}

template <typename Kernel>
void allow(Kernel kernel, int smem) {
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
}

int most_clusters(int threads, int smem, int cluster) {
    allow(occupant, smem);
    cudaLaunchAttribute attribute;
    const cudaLaunchConfig_t config = clustered(cluster * 64, threads, smem, cluster, &attribute);
    int count = -1;
    if (cudaError_t e = cudaOccupancyMaxActiveClusters(&count, occupant, &config); e != cudaSuccess) {
        printf(" (%s)", cudaGetErrorString(e));
        cudaGetLastError();
    }
    return count;
}

// The largest of the blocks' in-kernel times, in us.
double slowest_us(const unsigned long long *device_ns, int blocks) {
    unsigned long long host[1024] = {};
    cudaMemcpy(host, device_ns, sizeof(unsigned long long) * blocks, cudaMemcpyDeviceToHost);
    unsigned long long most = 0;
    for (int b = 0; b < blocks; b++) most = host[b] > most ? host[b] : most;
    return double(most) / 1000.0;
}

template <int N>
void time_exchange(int blocks, int threads, unsigned long long *elapsed_ns, float *out) {
    const int smem = 120 * 1024;  // one block an SM, as a pass kernel of 8 warps at 240 registers
    allow(exchange<N>, smem);
    allow(barriers, smem);
    cudaLaunchAttribute attribute;
    const cudaLaunchConfig_t config = clustered(blocks, threads, smem, N, &attribute);
    for (int iterations : {1, 101}) {
        cudaLaunchKernelEx(&config, exchange<N>, out, iterations, elapsed_ns);  // warm-up
        cudaError_t e = cudaDeviceSynchronize();
        cudaLaunchKernelEx(&config, exchange<N>, out, iterations, elapsed_ns);
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
        const double exchange_us = slowest_us(elapsed_ns, blocks);
        cudaLaunchKernelEx(&config, barriers, iterations, elapsed_ns);
        cudaError_t e2 = cudaDeviceSynchronize();
        const double barriers_us = slowest_us(elapsed_ns, blocks);
        printf("cluster %2d, %3d blocks of %3d threads, %3d iterations: exchange %8.2f us (%s), barriers alone %8.2f us "
               "(%s)\n",
               N, blocks, threads, iterations, exchange_us, cudaGetErrorString(e), barriers_us,
               cudaGetErrorString(e2));
    }
}

int main() {
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    printf("%s: %d SMs, %zu bytes of shared memory an SM, %zu a block at most\n", p.name, p.multiProcessorCount,
           p.sharedMemPerMultiprocessor, p.sharedMemPerBlockOptin);
    printf("clusters resident at once (cudaOccupancyMaxActiveClusters), and blocks an SM without clusters:\n");
    for (int threads : {128, 256}) {
        for (int smem_kb : {60, 95, 120, 200}) {
            printf("  %3d threads, %3d KB:", threads, smem_kb);
            for (int cluster : {2, 4, 8, 16}) printf("  size %2d: %3d", cluster, most_clusters(threads, smem_kb * 1024, cluster));
            int per_sm = 0;
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, occupant, threads, smem_kb * 1024);
            printf("  | %d blocks an SM\n", per_sm);
        }
    }
    unsigned long long *elapsed_ns = nullptr;
    float *out = nullptr;
    cudaMalloc(&elapsed_ns, 1024 * sizeof(unsigned long long));
    cudaMalloc(&out, 1024 * 256 * sizeof(float));
    for (int threads : {128, 256}) {
        time_exchange<8>(64, threads, elapsed_ns, out);
        time_exchange<16>(64, threads, elapsed_ns, out);
        time_exchange<16>(112, threads, elapsed_ns, out);
    }
    return 0;
}

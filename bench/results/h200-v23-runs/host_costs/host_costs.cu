// Host-side cost of the CUDA calls a small sieve_knn call makes before its scan runs
// (experiment; built by hand: nvcc -O2 -std=c++17 -arch=sm_90a host_costs.cu -lcuda -o host_costs).
// Prints microseconds per call, averaged over N calls after a warm-up.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cub/cub.cuh>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

__global__ void empty_kernel(int *x) {
    if (x && threadIdx.x == 1000000) x[0] = 1;
}
__global__ void big_smem_kernel(int *x) {
    extern __shared__ int s[];
    if (x && threadIdx.x == 1000000) x[0] = s[0];
}
__global__ void __cluster_dims__(1, 1, 1) cluster_kernel(int *x) {
    if (x && threadIdx.x == 1000000) x[0] = 1;
}

typedef CUresult (*EncodeTiledFn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                  const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                  const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                  CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

template <typename F> double per_call_us(const char *what, F f, int n = 2000) {
    for (int i = 0; i < 50; i++) f();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; i++) f();
    auto t1 = std::chrono::steady_clock::now();
    double us = std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
    printf("%-58s %8.3f us\n", what, us);
    return us;
}

int main() {
    cudaSetDevice(0);
    cudaStream_t s;
    cudaStreamCreate(&s);
    int *d = nullptr;
    cudaMalloc(&d, 64 << 20);
    std::vector<char> pageable(1 << 20);
    void *pinned = nullptr;
    cudaMallocHost(&pinned, 1 << 20);
    cudaPointerAttributes a;
    per_call_us("cudaPointerGetAttributes (pageable)", [&] { cudaPointerGetAttributes(&a, pageable.data()); cudaGetLastError(); });
    per_call_us("cudaPointerGetAttributes (pinned)", [&] { cudaPointerGetAttributes(&a, pinned); });
    per_call_us("cudaSetDevice(0)", [&] { cudaSetDevice(0); });
    per_call_us("cudaFuncSetAttribute (max dynamic smem 200 KB)", [&] {
        cudaFuncSetAttribute(big_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10); });
    int per_sm = 0;
    per_call_us("cudaOccupancyMaxActiveBlocksPerMultiprocessor", [&] {
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, big_smem_kernel, 256, 100 << 10); });
    size_t tb = 0;
    per_call_us("cub::DeviceSegmentedSort::SortKeys size (64 x 3840)", [&] {
        cub::DeviceSegmentedSort::SortKeys((void *)nullptr, tb, (const uint64_t *)nullptr, (uint64_t *)nullptr,
                                           (int64_t)64 * 3840, (int64_t)64, (const int64_t *)nullptr, (const int64_t *)nullptr); });
    per_call_us("cub::DeviceRadixSort::SortKeys size (1M keys)", [&] {
        cub::DeviceRadixSort::SortKeys((void *)nullptr, tb, (const uint64_t *)nullptr, (uint64_t *)nullptr, (int64_t)1000000); });
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, cudaEnableDefault, &q);
    EncodeTiledFn enc = (EncodeTiledFn)fn;
    CUtensorMap map;
    const cuuint64_t rdim[3] = {768, 1024, 977};
    const cuuint64_t rstride[2] = {768 * 2, (cuuint64_t)768 * 2 * 1024};
    const cuuint32_t rbox[3] = {64, 128, 1};
    const cuuint32_t ones[3] = {1, 1, 1};
    if (enc)
        per_call_us("cuTensorMapEncodeTiled (3-D rows map)", [&] {
            enc(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, (void *)d, rdim, rstride, rbox, ones,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE); });
    // queued work: sync every 16 calls so the queue stays short
    int i = 0;
    per_call_us("cudaMemsetAsync 4 B (queued)", [&] { cudaMemsetAsync(d, 0, 4, s); if (++i % 16 == 0) cudaStreamSynchronize(s); });
    per_call_us("cudaMemcpyAsync H2D 3 KB from pinned (queued)", [&] { cudaMemcpyAsync(d, pinned, 3072, cudaMemcpyHostToDevice, s); if (++i % 16 == 0) cudaStreamSynchronize(s); });
    per_call_us("cudaMemcpyAsync D2H 4 KB to pinned (queued)", [&] { cudaMemcpyAsync(pinned, d, 4096, cudaMemcpyDeviceToHost, s); if (++i % 16 == 0) cudaStreamSynchronize(s); });
    per_call_us("kernel launch <<<132, 384>>> (queued)", [&] { empty_kernel<<<132, 384, 0, s>>>(d); if (++i % 16 == 0) cudaStreamSynchronize(s); });
    cudaFuncSetAttribute(big_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10);
    per_call_us("kernel launch, 200 KB dynamic smem (queued)", [&] { big_smem_kernel<<<132, 384, 200 << 10, s>>>(d); if (++i % 16 == 0) cudaStreamSynchronize(s); });
    per_call_us("cudaLaunchKernelEx, cluster of 1 (queued)", [&] {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(4); cfg.blockDim = dim3(256); cfg.stream = s;
        cudaLaunchKernelEx(&cfg, cluster_kernel, d); if (++i % 16 == 0) cudaStreamSynchronize(s); });
    cudaStreamSynchronize(s);
    per_call_us("cudaStreamSynchronize (idle stream)", [&] { cudaStreamSynchronize(s); });
    per_call_us("launch empty kernel + cudaStreamSynchronize (round trip)", [&] { empty_kernel<<<1, 32, 0, s>>>(d); cudaStreamSynchronize(s); });
    per_call_us("D2H 4 KB to pinned + cudaStreamSynchronize (round trip)", [&] { cudaMemcpyAsync(pinned, d, 4096, cudaMemcpyDeviceToHost, s); cudaStreamSynchronize(s); });
    std::vector<char> host(4096);
    per_call_us("D2H 4 KB to pageable (synchronous)", [&] { cudaMemcpyAsync(host.data(), d, 4096, cudaMemcpyDeviceToHost, s); });
    per_call_us("H2D 64 B from pageable + sync (the old `use` copy)", [&] { cudaMemcpyAsync(d, host.data(), 64, cudaMemcpyHostToDevice, s); cudaStreamSynchronize(s); });
    printf("errors: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}

/* util.cu: data helpers of the CUDA backend for tests and benchmarks (deterministic normal
 * fill, stored-row norms). Must not: be used on a search path. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_common.cuh"

namespace {

template <typename T>
__global__ void fill_normal_kernel(T *dst, size_t n, uint64_t seed, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = T(sieve__normal_at(seed, i) * scale);
}

template <typename T>
__global__ void fill_rows_kernel(T *dst, uint64_t n_rows, uint32_t dim, int pattern, uint64_t seed) {
    uint64_t n = n_rows * dim;
    for (uint64_t at = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; at < n;
         at += (uint64_t)gridDim.x * blockDim.x)
        dst[at] = T(sieve__pattern_at(pattern, seed, n_rows, dim, at / dim, (uint32_t)(at % dim)));
}

template <typename T>
__device__ inline float to_f(T v) { return (float)v; }
template <>
__device__ inline float to_f<__half>(__half v) { return __half2float(v); }
template <>
__device__ inline float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

/* Same arithmetic as sieve_row_sqnorm: lane i % 8, fmaf in index order, pairwise combine. */
template <typename T>
__global__ void row_sqnorms_kernel(const T *rows, uint64_t n_rows, uint32_t dim, float *out) {
    uint64_t r = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (r >= n_rows) return;
    const T *x = rows + r * dim;
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (uint32_t i = 0; i < dim; i++) {
        float v = to_f(x[i]);
        s[i % 8] = fmaf(v, v, s[i % 8]);
    }
    out[r] = __fadd_rn(__fadd_rn(__fadd_rn(s[0], s[1]), __fadd_rn(s[2], s[3])),
                       __fadd_rn(__fadd_rn(s[4], s[5]), __fadd_rn(s[6], s[7])));
}

} // namespace

extern "C" int sieve__cuda_fill_normal(void *ctx, void *dst, sieve_dtype dtype, size_t n,
                                       uint64_t seed, float scale) {
    sieve__cuda_ctx *c = (sieve__cuda_ctx *)ctx;
    SIEVE_CUDA_TRY(cudaSetDevice(c->ordinal));
    unsigned blocks = 4096;
    switch (dtype) {
    case SIEVE_DTYPE_F32:
        fill_normal_kernel<float><<<blocks, 256, 0, c->stream>>>((float *)dst, n, seed, scale);
        break;
    case SIEVE_DTYPE_F16:
        fill_normal_kernel<__half><<<blocks, 256, 0, c->stream>>>((__half *)dst, n, seed, scale);
        break;
    case SIEVE_DTYPE_BF16:
        fill_normal_kernel<__nv_bfloat16>
            <<<blocks, 256, 0, c->stream>>>((__nv_bfloat16 *)dst, n, seed, scale);
        break;
    }
    SIEVE_CUDA_LAUNCH_CHECK();
    SIEVE_CUDA_TRY(cudaStreamSynchronize(c->stream));
    return 0;
}

extern "C" int sieve__cuda_row_sqnorms(void *ctx, sieve_dtype dtype, const void *rows,
                                       uint64_t n_rows, uint32_t dim, float *out) {
    sieve__cuda_ctx *c = (sieve__cuda_ctx *)ctx;
    SIEVE_CUDA_TRY(cudaSetDevice(c->ordinal));
    if (n_rows == 0) return 0;
    unsigned blocks = (unsigned)((n_rows + 255) / 256);
    switch (dtype) {
    case SIEVE_DTYPE_F32:
        row_sqnorms_kernel<float><<<blocks, 256, 0, c->stream>>>((const float *)rows, n_rows, dim, out);
        break;
    case SIEVE_DTYPE_F16:
        row_sqnorms_kernel<__half><<<blocks, 256, 0, c->stream>>>((const __half *)rows, n_rows, dim, out);
        break;
    case SIEVE_DTYPE_BF16:
        row_sqnorms_kernel<__nv_bfloat16>
            <<<blocks, 256, 0, c->stream>>>((const __nv_bfloat16 *)rows, n_rows, dim, out);
        break;
    }
    SIEVE_CUDA_LAUNCH_CHECK();
    SIEVE_CUDA_TRY(cudaStreamSynchronize(c->stream));
    return 0;
}

extern "C" int sieve__cuda_fill_rows(void *ctx, void *dst, sieve_dtype dtype, uint64_t n_rows,
                                     uint32_t dim, int pattern, uint64_t seed) {
    sieve__cuda_ctx *c = (sieve__cuda_ctx *)ctx;
    SIEVE_CUDA_TRY(cudaSetDevice(c->ordinal));
    unsigned blocks = 8192;
    switch (dtype) {
    case SIEVE_DTYPE_F32:
        fill_rows_kernel<float><<<blocks, 256, 0, c->stream>>>((float *)dst, n_rows, dim, pattern, seed);
        break;
    case SIEVE_DTYPE_F16:
        fill_rows_kernel<__half><<<blocks, 256, 0, c->stream>>>((__half *)dst, n_rows, dim, pattern, seed);
        break;
    case SIEVE_DTYPE_BF16:
        fill_rows_kernel<__nv_bfloat16>
            <<<blocks, 256, 0, c->stream>>>((__nv_bfloat16 *)dst, n_rows, dim, pattern, seed);
        break;
    }
    SIEVE_CUDA_LAUNCH_CHECK();
    SIEVE_CUDA_TRY(cudaStreamSynchronize(c->stream));
    return 0;
}

/* device.cu: the CUDA backend's context, memory and copies.
 * Owns: one stream per sieve_device, device properties. Must not: be called by anything
 * but kernels/device.c (through sieve_kernels_internal.h). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"

extern "C" int sieve__cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no device" error */
        return 0;
    }
    return n;
}

extern "C" int sieve__cuda_open(int ordinal, void **out) {
    sieve__cuda_ctx *c = (sieve__cuda_ctx *)calloc(1, sizeof *c);
    if (!c) return SIEVE_ENOMEM;
    c->ordinal = ordinal;
    if (cudaSetDevice(ordinal) != cudaSuccess ||
        cudaGetDeviceProperties(&c->prop, ordinal) != cudaSuccess ||
        cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking) != cudaSuccess) {
        cudaGetLastError();
        free(c);
        return SIEVE_EDEVICE;
    }
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    cudaError_t got = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &c->encode_tiled,
                                                       12000, cudaEnableDefault, &found);
#else
    cudaError_t got = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &c->encode_tiled,
                                              cudaEnableDefault, &found);
#endif
    if (got != cudaSuccess || found != cudaDriverEntryPointSuccess) {
        cudaGetLastError();
        c->encode_tiled = NULL;
    }
    *out = c;
    return 0;
}

extern "C" void sieve__cuda_close(void *ctx) {
    sieve__cuda_ctx *c = (sieve__cuda_ctx *)ctx;
    if (!c) return;
    cudaSetDevice(c->ordinal);
    sieve__cuda_release_workspace(c);
    sieve_pool_destroy(c->copier);
    sieve_pool_destroy(c->streamer);
    cudaStreamDestroy(c->stream);
    free(c);
}

extern "C" int sieve__cuda_info(void *ctx, sieve_device_info *info) {
    sieve__cuda_ctx *c = (sieve__cuda_ctx *)ctx;
    SIEVE_CUDA_TRY(cudaSetDevice(c->ordinal));
    size_t fr = 0, tot = 0;
    SIEVE_CUDA_TRY(cudaMemGetInfo(&fr, &tot));
    snprintf(info->name, sizeof info->name, "%s", c->prop.name);
    info->memory_total = tot;
    info->memory_free = fr;
    info->multiprocessors = c->prop.multiProcessorCount;
    info->compute_capability = c->prop.major * 10 + c->prop.minor;
    return 0;
}

extern "C" int sieve__cuda_alloc(void *ctx, size_t bytes, void **out) {
    sieve__cuda_ctx *c = (sieve__cuda_ctx *)ctx;
    SIEVE_CUDA_TRY(cudaSetDevice(c->ordinal));
    cudaError_t e = cudaMalloc(out, bytes ? bytes : 1);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        *out = NULL;
        return SIEVE_ENOMEM;
    }
    SIEVE_CUDA_TRY(e);
    return 0;
}

extern "C" void sieve__cuda_free(void *ctx, void *ptr) {
    sieve__cuda_ctx *c = (sieve__cuda_ctx *)ctx;
    cudaSetDevice(c->ordinal);
    cudaFree(ptr);
}

extern "C" int sieve__cuda_copy(void *ctx, void *dst, const void *src, size_t bytes, int kind,
                                int async) {
    sieve__cuda_ctx *c = (sieve__cuda_ctx *)ctx;
    cudaMemcpyKind k = kind == SIEVE__COPY_H2D   ? cudaMemcpyHostToDevice
                       : kind == SIEVE__COPY_D2H ? cudaMemcpyDeviceToHost
                                                 : cudaMemcpyDeviceToDevice;
    SIEVE_CUDA_TRY(cudaSetDevice(c->ordinal));
    SIEVE_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, k, c->stream));
    if (!async) SIEVE_CUDA_TRY(cudaStreamSynchronize(c->stream));
    return 0;
}

extern "C" int sieve__cuda_sync(void *ctx) {
    sieve__cuda_ctx *c = (sieve__cuda_ctx *)ctx;
    SIEVE_CUDA_TRY(cudaStreamSynchronize(c->stream));
    return 0;
}

extern "C" int sieve__cuda_host_alloc(void *ctx, size_t bytes, void **out) {
    sieve__cuda_ctx *c = (sieve__cuda_ctx *)ctx;
    SIEVE_CUDA_TRY(cudaSetDevice(c->ordinal));
    cudaError_t e = cudaMallocHost(out, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *out = NULL;
        return SIEVE_ENOMEM;
    }
    return 0;
}

extern "C" void sieve__cuda_host_free(void *ctx, void *ptr) {
    (void)ctx;
    cudaFreeHost(ptr);
}

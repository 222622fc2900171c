/* sieve_kernels_internal.h: shared between the kernel module's own files, never installed
 * or included outside kernels/ (and tests/kernels for white-box checks).
 *
 * Owns: the sieve_device struct layout, the CPU and CUDA backend entry points that the
 * dispatch in device.c / search.c calls. Must not: include CUDA headers.
 */
#ifndef SIEVE_KERNELS_INTERNAL_H
#define SIEVE_KERNELS_INTERNAL_H

#include "sieve_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sieve_device {
    sieve_device_kind kind;
    int ordinal;        /* CUDA ordinal, -1 on the CPU */
    uint32_t threads;   /* CPU worker threads */
    void *cuda;         /* backend context (struct sieve__cuda_ctx), NULL on the CPU */
};

/* Monotonic wall clock in milliseconds. */
double sieve__now_ms(void);

/* Checks the arguments every search entry shares. 0 or SIEVE_EINVAL. */
int sieve__check_search_args(const sieve_matrix *m, const float *queries, uint32_t n_queries,
                             const sieve_search_params *p, const int64_t *out_rows,
                             const float *out_scores);

/* ---- CPU backend (kernels/cpu) */
int sieve__cpu_knn_scratch_size(const sieve_device *dev, const sieve_matrix *m,
                                uint32_t n_queries, const sieve_search_params *p,
                                size_t *bytes);
int sieve__cpu_knn(const sieve_device *dev, const sieve_matrix *m, const float *queries,
                   uint32_t n_queries, const sieve_search_params *p, void *scratch,
                   size_t scratch_bytes, int64_t *out_rows, float *out_scores,
                   uint32_t *out_counts, uint8_t *out_paths, sieve_search_stats *stats);
int sieve__cpu_knn_materialized(const sieve_device *dev, const sieve_matrix *m,
                                const float *queries, uint32_t n_queries,
                                const sieve_search_params *p, int64_t *out_rows,
                                float *out_scores, uint32_t *out_counts,
                                sieve_search_stats *stats);

/* ---- CUDA backend (kernels/cuda, or kernels/cuda_stub.c when built without CUDA).
 * Every function returns SIEVE_ENODEV from the stub. */
int sieve__cuda_device_count(void);
int sieve__cuda_open(int ordinal, void **ctx);
void sieve__cuda_close(void *ctx);
int sieve__cuda_info(void *ctx, sieve_device_info *info);
int sieve__cuda_alloc(void *ctx, size_t bytes, void **out);
void sieve__cuda_free(void *ctx, void *ptr);
int sieve__cuda_copy(void *ctx, void *dst, const void *src, size_t bytes, int kind, int async);
int sieve__cuda_sync(void *ctx);
int sieve__cuda_host_alloc(void *ctx, size_t bytes, void **out);
void sieve__cuda_host_free(void *ctx, void *ptr);
int sieve__cuda_knn_scratch_size(void *ctx, const sieve_matrix *m, uint32_t n_queries,
                                 const sieve_search_params *p, size_t *bytes);
int sieve__cuda_knn(void *ctx, const sieve_matrix *m, const float *queries,
                    uint32_t n_queries, const sieve_search_params *p, void *scratch,
                    size_t scratch_bytes, int64_t *out_rows, float *out_scores,
                    uint32_t *out_counts, uint8_t *out_paths, sieve_search_stats *stats);
int sieve__cuda_knn_materialized(void *ctx, const sieve_matrix *m, const float *queries,
                                 uint32_t n_queries, const sieve_search_params *p,
                                 int64_t *out_rows, float *out_scores, uint32_t *out_counts,
                                 sieve_search_stats *stats);

#define SIEVE__COPY_H2D 1
#define SIEVE__COPY_D2H 2
#define SIEVE__COPY_D2D 3

#ifdef __cplusplus
}
#endif
#endif

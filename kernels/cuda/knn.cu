/* knn.cu: the fused score + sample-guided exact top-k search on CUDA.
 * Placeholder until the GPU kernel lands: reports SIEVE_ENOTSUP so callers fall back. */
#include "cuda_common.cuh"
#include <stdlib.h>

void sieve__cuda_release_workspace(sieve__cuda_ctx *c) {
    if (c->work) cudaFree(c->work);
    if (c->pinned) cudaFreeHost(c->pinned);
    c->work = NULL;
    c->pinned = NULL;
    c->work_bytes = c->pinned_bytes = 0;
}

extern "C" int sieve__cuda_knn_scratch_size(void *ctx, const sieve_matrix *m,
                                            uint32_t n_queries, const sieve_search_params *p,
                                            size_t *bytes) {
    return SIEVE_ENOTSUP;
}

extern "C" int sieve__cuda_knn(void *ctx, const sieve_matrix *m, const float *queries,
                               uint32_t n_queries, const sieve_search_params *p, void *scratch,
                               size_t scratch_bytes, int64_t *out_rows, float *out_scores,
                               uint32_t *out_counts, uint8_t *out_paths,
                               sieve_search_stats *stats) {
    return SIEVE_ENOTSUP;
}

extern "C" int sieve__cuda_knn_materialized(void *ctx, const sieve_matrix *m,
                                            const float *queries, uint32_t n_queries,
                                            const sieve_search_params *p, int64_t *out_rows,
                                            float *out_scores, uint32_t *out_counts,
                                            sieve_search_stats *stats) {
    return SIEVE_ENOTSUP;
}

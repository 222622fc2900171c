/* cuda_stub.c: the CUDA backend when sieve is built without CUDA. Every entry reports
 * SIEVE_ENODEV so "auto" falls back to the CPU and "cuda:N" fails clearly. */
#include "sieve_kernels_internal.h"

int sieve__cuda_device_count(void) { return 0; }
int sieve__cuda_open(int ordinal, void **ctx) { return SIEVE_ENODEV; }
void sieve__cuda_close(void *ctx) {}
int sieve__cuda_info(void *ctx, sieve_device_info *info) { return SIEVE_ENODEV; }
int sieve__cuda_alloc(void *ctx, size_t bytes, void **out) { return SIEVE_ENODEV; }
void sieve__cuda_free(void *ctx, void *ptr) {}
int sieve__cuda_copy(void *ctx, void *dst, const void *src, size_t bytes, int kind, int async) {
    return SIEVE_ENODEV;
}
int sieve__cuda_sync(void *ctx) { return SIEVE_ENODEV; }
int sieve__cuda_host_alloc(void *ctx, size_t bytes, void **out) { return SIEVE_ENODEV; }
void sieve__cuda_host_free(void *ctx, void *ptr) {}
int sieve__cuda_knn_scratch_size(void *ctx, const sieve_matrix *m, uint32_t n_queries,
                                 const sieve_search_params *p, size_t *bytes) {
    return SIEVE_ENODEV;
}
int sieve__cuda_knn(void *ctx, const sieve_matrix *m, const float *queries,
                    uint32_t n_queries, const sieve_search_params *p, void *scratch,
                    size_t scratch_bytes, int64_t *out_rows, float *out_scores,
                    uint32_t *out_counts, uint8_t *out_paths, sieve_search_stats *stats) {
    return SIEVE_ENODEV;
}
int sieve__cuda_knn_materialized(void *ctx, const sieve_matrix *m, const float *queries,
                                 uint32_t n_queries, const sieve_search_params *p,
                                 int64_t *out_rows, float *out_scores, uint32_t *out_counts,
                                 sieve_search_stats *stats) {
    return SIEVE_ENODEV;
}
int sieve__cuda_fill_normal(void *ctx, void *dst, sieve_dtype dtype, size_t n, uint64_t seed,
                            float scale) {
    return SIEVE_ENODEV;
}
int sieve__cuda_row_sqnorms(void *ctx, sieve_dtype dtype, const void *rows, uint64_t n_rows,
                            uint32_t dim, float *out) {
    return SIEVE_ENODEV;
}
int sieve__cuda_fill_rows(void *ctx, void *dst, sieve_dtype dtype, uint64_t n_rows, uint32_t dim,
                          int pattern, uint64_t seed) {
    return SIEVE_ENODEV;
}
int sieve__cuda_select3(void *ctx, const float *keys, uint32_t lists, uint32_t n, uint32_t rj,
                        uint32_t rj2, uint32_t parts, float *out) {
    return SIEVE_ENODEV;
}
int sieve__cuda_indexer_scratch_size(void *ctx, const sieve_indexer_params *p, size_t *bytes) {
    return SIEVE_ENODEV;
}
int sieve__cuda_indexer_topk(void *ctx, const sieve_indexer_params *p, const void *q,
                             const void *keys, const float *w, void *scratch,
                             size_t scratch_bytes, int32_t *out_idx, float *out_scores,
                             uint32_t *out_counts, sieve_indexer_stats *stats) {
    return SIEVE_ENODEV;
}
int sieve__cuda_indexer_materialized(void *ctx, const sieve_indexer_params *p, const void *q,
                                     const void *keys, const float *w, int32_t *out_idx,
                                     float *out_scores, uint32_t *out_counts,
                                     sieve_indexer_stats *stats) {
    return SIEVE_ENODEV;
}
int sieve__cuda_sparse_attn_scratch_size(void *ctx, const sieve_sparse_attn_params *p,
                                         size_t *bytes) {
    return SIEVE_ENODEV;
}
int sieve__cuda_sparse_attention(void *ctx, const sieve_sparse_attn_params *p, const void *q,
                                 const void *keys, const void *values, const int32_t *idx,
                                 void *scratch, size_t scratch_bytes, float *out, float *lse,
                                 sieve_sparse_attn_stats *stats) {
    return SIEVE_ENODEV;
}
int sieve__cuda_causal_attn_scratch_size(void *ctx, const sieve_attn_params *p, size_t *bytes) {
    return SIEVE_ENODEV;
}
int sieve__cuda_causal_attention(void *ctx, const sieve_attn_params *p, const void *q,
                                 const void *keys, const void *values, void *scratch,
                                 size_t scratch_bytes, float *out, float *lse, double *ms) {
    return SIEVE_ENODEV;
}
int sieve__cuda_bsp_scratch_size(void *ctx, const sieve_bsp_params *p, size_t *bytes) {
    return SIEVE_ENODEV;
}
int sieve__cuda_block_sparse_prefill(void *ctx, const sieve_bsp_params *p, const void *q,
                                     const void *keys, const void *values, void *scratch,
                                     size_t scratch_bytes, float *out, float *lse,
                                     uint32_t *sel_counts, int32_t *sel_blocks,
                                     sieve_bsp_stats *stats) {
    return SIEVE_ENODEV;
}

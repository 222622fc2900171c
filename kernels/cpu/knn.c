/* knn.c: the CPU backend's fused sample-guided exact top-k (placeholder: not yet built). */
#include "sieve_kernels_internal.h"

int sieve__cpu_knn_scratch_size(const sieve_device *dev, const sieve_matrix *m,
                                uint32_t n_queries, const sieve_search_params *p,
                                size_t *bytes) {
    return SIEVE_ENOTSUP;
}
int sieve__cpu_knn(const sieve_device *dev, const sieve_matrix *m, const float *queries,
                   uint32_t n_queries, const sieve_search_params *p, void *scratch,
                   size_t scratch_bytes, int64_t *out_rows, float *out_scores,
                   uint32_t *out_counts, uint8_t *out_paths, sieve_search_stats *stats) {
    return SIEVE_ENOTSUP;
}
int sieve__cpu_knn_materialized(const sieve_device *dev, const sieve_matrix *m,
                                const float *queries, uint32_t n_queries,
                                const sieve_search_params *p, int64_t *out_rows,
                                float *out_scores, uint32_t *out_counts,
                                sieve_search_stats *stats) {
    return SIEVE_ENOTSUP;
}
int sieve_knn_reference(const sieve_matrix *m, const float *queries, uint32_t n_queries,
                        sieve_metric metric, uint32_t k, int64_t *out_rows,
                        double *out_keys, uint32_t *out_counts) {
    return SIEVE_ENOTSUP;
}

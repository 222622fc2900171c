/* indexer.c: the device-agnostic entry points of the sparse-attention indexer top-k
 * (sieve_kernels.h, "sparse attention: indexer top-k").
 * Owns: the parameter defaults, the visibility rule, the argument checks every indexer entry
 * shares (SIEVE_EINVAL before any work), dispatch to the CPU or CUDA backend, and
 * sieve_indexer_reference, the float64 ground truth.
 * Must not: implement the fast kernels (kernels/cpu/indexer.c, kernels/cuda/indexer.cu do),
 * use BLAS, threads or the backends' scorers in the reference (it exists to be obviously
 * right, not fast), keep state between calls.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sieve_kernels_internal.h"

void sieve_indexer_params_init(sieve_indexer_params *p, sieve_dtype dtype, uint32_t n_queries,
                               uint32_t heads, uint32_t head_dim, uint32_t n_keys, uint32_t k) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->dtype = dtype;
    p->n_queries = n_queries;
    p->heads = heads;
    p->head_dim = head_dim;
    p->n_keys = n_keys;
    p->k = k;
}

uint32_t sieve_indexer_visible(const sieve_indexer_params *p, uint32_t t) {
    if (!p) return 0;
    if (!p->causal) return p->n_keys;
    const uint64_t v = (uint64_t)p->pos0 + t + 1; /* cannot wrap: at most 2^33 - 1 */
    return v < p->n_keys ? (uint32_t)v : p->n_keys;
}

int sieve__check_indexer_params(const sieve_indexer_params *p) {
    if (!p) return SIEVE_EINVAL;
    const size_t esz = sieve_dtype_size(p->dtype); /* 0 for an unknown dtype */
    if (esz == 0) return SIEVE_EINVAL;
    if (p->n_queries == 0 || p->heads == 0 || p->head_dim == 0 || p->n_keys == 0)
        return SIEVE_EINVAL;
    if (p->k == 0 || p->k > p->n_keys) return SIEVE_EINVAL;
    if (p->n_keys > (uint32_t)INT32_MAX) return SIEVE_EINVAL; /* out_idx is int32 */
    /* every array's byte size must be addressable */
    size_t th, thd, q_bytes, kd, k_bytes, tk, out_bytes, w_bytes;
    if (!sieve__mul_size(p->n_queries, p->heads, &th) ||
        !sieve__mul_size(th, p->head_dim, &thd) || !sieve__mul_size(thd, esz, &q_bytes) ||
        !sieve__mul_size(th, sizeof(float), &w_bytes) ||
        !sieve__mul_size(p->n_keys, p->head_dim, &kd) || !sieve__mul_size(kd, esz, &k_bytes) ||
        !sieve__mul_size(p->n_queries, p->k, &tk) ||
        !sieve__mul_size(tk, sizeof(float), &out_bytes))
        return SIEVE_EINVAL;
    return 0;
}

/* The checks sieve_indexer_topk and sieve_indexer_topk_materialized share. */
static int check_call(const sieve_device *dev, const sieve_indexer_params *p, const void *q,
                      const void *keys, const float *w, const int32_t *out_idx,
                      const float *out_scores) {
    if (!dev || !p || !q || !keys || !w || !out_idx || !out_scores) return SIEVE_EINVAL;
    return sieve__check_indexer_params(p);
}

int sieve_indexer_scratch_size(sieve_device *dev, const sieve_indexer_params *p,
                               size_t *bytes) {
    if (!dev || !p || !bytes) return SIEVE_EINVAL;
    int rc = sieve__check_indexer_params(p);
    if (rc) return rc;
    if (dev->kind == SIEVE_DEVICE_CUDA)
        return sieve__cuda_indexer_scratch_size(dev->cuda, p, bytes);
    rc = sieve__cpu_indexer_supported(p);
    if (rc) return rc;
    *bytes = 0; /* the CPU allocates its per-worker buffers itself */
    return 0;
}

int sieve_indexer_topk(sieve_device *dev, const sieve_indexer_params *p, const void *q,
                       const void *keys, const float *w, void *scratch, size_t scratch_bytes,
                       int32_t *out_idx, float *out_scores, uint32_t *out_counts,
                       sieve_indexer_stats *stats) {
    int rc = check_call(dev, p, q, keys, w, out_idx, out_scores);
    if (rc) return rc;
    if (dev->kind == SIEVE_DEVICE_CUDA)
        return sieve__cuda_indexer_topk(dev->cuda, p, q, keys, w, scratch, scratch_bytes,
                                        out_idx, out_scores, out_counts, stats);
    /* the CPU needs no scratch (sieve_indexer_scratch_size gives 0): any block is enough */
    return sieve__cpu_indexer_topk(dev, p, q, keys, w, 0, out_idx, out_scores, out_counts,
                                   stats);
}

int sieve_indexer_topk_materialized(sieve_device *dev, const sieve_indexer_params *p,
                                    const void *q, const void *keys, const float *w,
                                    int32_t *out_idx, float *out_scores, uint32_t *out_counts,
                                    sieve_indexer_stats *stats) {
    int rc = check_call(dev, p, q, keys, w, out_idx, out_scores);
    if (rc) return rc;
    if (dev->kind == SIEVE_DEVICE_CUDA)
        return sieve__cuda_indexer_materialized(dev->cuda, p, q, keys, w, out_idx, out_scores,
                                                out_counts, stats);
    return sieve__cpu_indexer_topk(dev, p, q, keys, w, 1, out_idx, out_scores, out_counts,
                                   stats);
}

/* ---------------------------------------------------------------- float64 reference */

typedef struct ref_entry {
    double score;
    uint32_t idx;
} ref_entry;

/* Score descending, index ascending (scores are never NaN here). */
static int cmp_entry(const void *pa, const void *pb) {
    const ref_entry *a = pa, *b = pb;
    if (a->score > b->score) return -1;
    if (a->score < b->score) return 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

int sieve_indexer_reference(const sieve_indexer_params *p, const void *q, const void *keys,
                            const float *w, int32_t *out_idx, double *out_scores,
                            uint32_t *out_counts) {
    if (!p || !q || !keys || !w || !out_idx) return SIEVE_EINVAL;
    int rc = sieve__check_indexer_params(p);
    if (rc) return rc;
    const uint32_t H = p->heads, D = p->head_dim, L = p->n_keys, k = p->k;
    const size_t esz = sieve_dtype_size(p->dtype);
    const size_t hd = (size_t)H * D; /* fits: checked with n_queries >= 1 */
    ref_entry *e = malloc((size_t)L * sizeof *e);
    float *qf = malloc(hd * sizeof *qf);
    float *kf = malloc((size_t)D * sizeof *kf);
    if (!e || !qf || !kf) {
        free(e);
        free(qf);
        free(kf);
        return SIEVE_ENOMEM;
    }
    for (uint32_t t = 0; t < p->n_queries; t++) {
        /* the stored values, converted exactly to float32 (and from there to double) */
        sieve_convert_to_f32(p->dtype, (const char *)q + (size_t)t * hd * esz, qf, hd);
        const float *wt = w + (size_t)t * H;
        const uint32_t v = sieve_indexer_visible(p, t);
        for (uint32_t s = 0; s < v; s++) {
            sieve_convert_to_f32(p->dtype, (const char *)keys + (size_t)s * D * esz, kf, D);
            double score = 0.0;
            for (uint32_t h = 0; h < H; h++) {
                const float *qh = qf + (size_t)h * D;
                double dot = 0.0;
                for (uint32_t d = 0; d < D; d++) dot += (double)qh[d] * (double)kf[d];
                /* ReLU as fmax: a NaN dot contributes 0, as on the devices */
                score += (double)wt[h] * fmax(0.0, dot);
            }
            /* NaN ranks last, like the devices' canonical scores; -0 is +0 */
            e[s].score = isnan(score) ? -INFINITY : (score == 0.0 ? 0.0 : score);
            e[s].idx = s;
        }
        qsort(e, v, sizeof *e, cmp_entry);
        const uint32_t count = v < k ? v : k;
        for (uint32_t i = 0; i < k; i++) {
            out_idx[(size_t)t * k + i] = i < count ? (int32_t)e[i].idx : -1;
            if (out_scores) out_scores[(size_t)t * k + i] = i < count ? e[i].score : NAN;
        }
        if (out_counts) out_counts[t] = count;
    }
    free(e);
    free(qf);
    free(kf);
    return 0;
}

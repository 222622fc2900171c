/* sparse_attn.c: the device-agnostic entry points of grouped sparse attention
 * (sieve_kernels.h, "sparse attention: grouped").
 * Owns: the parameter defaults, the argument checks every sparse-attention entry shares
 * (SIEVE_EINVAL before any work), dispatch to the CPU or CUDA backend, and
 * sieve_sparse_attention_reference, the float64 ground truth.
 * Must not: implement the fast kernels (kernels/cpu/sparse_attn.c, kernels/cuda/sparse_attn.cu
 * do), use BLAS, threads or the backends' code in the reference (it exists to be obviously
 * right, not fast), keep state between calls.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sieve_kernels_internal.h"

void sieve_sparse_attn_params_init(sieve_sparse_attn_params *p, sieve_dtype dtype,
                                   uint32_t n_queries, uint32_t q_heads, uint32_t kv_heads,
                                   uint32_t head_dim, uint32_t v_dim, uint32_t n_keys,
                                   uint32_t k) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->dtype = dtype;
    p->n_queries = n_queries;
    p->q_heads = q_heads;
    p->kv_heads = kv_heads;
    p->head_dim = head_dim;
    p->v_dim = v_dim;
    p->n_keys = n_keys;
    p->k = k;
    p->group = 16;
    p->scale = 0.0f; /* 1 / sqrt(head_dim) */
}

int sieve__check_sparse_attn_params(const sieve_sparse_attn_params *p) {
    if (!p) return SIEVE_EINVAL;
    /* the shape's checks are dense attention's (dtype, sizes, heads, n_keys, scale, the
     * arrays' byte sizes); then what the selected keys add */
    sieve_attn_params a;
    sieve_attn_params_init(&a, p->dtype, p->n_queries, p->q_heads, p->kv_heads, p->head_dim,
                           p->v_dim, p->n_keys);
    a.scale = p->scale;
    const int rc = sieve__check_attn_params(&a);
    if (rc) return rc;
    if (p->k == 0 || p->group < 1 || p->group > 32) return SIEVE_EINVAL;
    size_t idx_bytes; /* n_keys <= INT32_MAX (checked above): idx is int32 */
    if (!sieve__mul3_size(p->n_queries, p->k, sizeof(int32_t), &idx_bytes)) return SIEVE_EINVAL;
    return 0;
}

int sieve_sparse_attn_scratch_size(sieve_device *dev, const sieve_sparse_attn_params *p,
                                   size_t *bytes) {
    if (!dev || !p || !bytes) return SIEVE_EINVAL;
    int rc = sieve__check_sparse_attn_params(p);
    if (rc) return rc;
    if (dev->kind == SIEVE_DEVICE_CUDA)
        return sieve__cuda_sparse_attn_scratch_size(dev->cuda, p, bytes);
    *bytes = 0; /* the CPU allocates its buffers itself */
    return 0;
}

int sieve_sparse_attention(sieve_device *dev, const sieve_sparse_attn_params *p,
                           const void *q, const void *keys, const void *values,
                           const int32_t *idx, void *scratch, size_t scratch_bytes,
                           float *out, float *lse, sieve_sparse_attn_stats *stats) {
    if (!dev || !p || !q || !keys || !values || !idx || !out) return SIEVE_EINVAL;
    int rc = sieve__check_sparse_attn_params(p);
    if (rc) return rc;
    if (dev->kind == SIEVE_DEVICE_CUDA)
        return sieve__cuda_sparse_attention(dev->cuda, p, q, keys, values, idx, scratch,
                                            scratch_bytes, out, lse, stats);
    /* the CPU needs no scratch (sieve_sparse_attn_scratch_size gives 0) and ignores it */
    return sieve__cpu_sparse_attention(dev, p, q, keys, values, idx, out, lse, stats);
}

/* ---------------------------------------------------------------- float64 reference */

static int cmp_i32(const void *pa, const void *pb) {
    const int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    return (a > b) - (a < b);
}

/* Writes S_t of one idx row (k entries) to set, ascending and distinct, and returns |S_t|. */
static uint32_t ref_set(const int32_t *row, uint32_t k, uint32_t n_keys, int32_t *set) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < k; i++)
        if (row[i] >= 0 && (uint32_t)row[i] < n_keys) set[n++] = row[i];
    qsort(set, n, sizeof *set, cmp_i32);
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (m == 0 || set[i] != set[m - 1]) set[m++] = set[i];
    return m;
}

int sieve_sparse_attention_reference(const sieve_sparse_attn_params *p, const void *q,
                                     const void *keys, const void *values,
                                     const int32_t *idx, double *out, double *lse) {
    if (!p || !q || !keys || !values || !idx || !out) return SIEVE_EINVAL;
    int rc = sieve__check_sparse_attn_params(p);
    if (rc) return rc;
    const uint32_t Hq = p->q_heads, Hkv = p->kv_heads, D = p->head_dim, Dv = p->v_dim;
    const uint32_t k = p->k, rep = Hq / Hkv;
    const size_t esz = sieve_dtype_size(p->dtype);
    const double scale = p->scale == 0.0f ? 1.0 / sqrt((double)D) : (double)p->scale;
    int32_t *set = malloc((size_t)k * sizeof *set);
    double *s = malloc((size_t)k * sizeof *s);
    double *acc = malloc((size_t)Dv * sizeof *acc);
    float *qf = malloc((size_t)D * sizeof *qf);
    float *kf = malloc((size_t)D * sizeof *kf);
    float *vf = malloc((size_t)Dv * sizeof *vf);
    if (!set || !s || !acc || !qf || !kf || !vf) {
        free(set);
        free(s);
        free(acc);
        free(qf);
        free(kf);
        free(vf);
        return SIEVE_ENOMEM;
    }
    for (uint32_t t = 0; t < p->n_queries; t++) {
        const uint32_t n = ref_set(idx + (size_t)t * k, k, p->n_keys, set);
        for (uint32_t h = 0; h < Hq; h++) {
            const uint32_t g = h / rep;
            double *o = out + ((size_t)t * Hq + h) * Dv;
            if (n == 0) {
                for (uint32_t v = 0; v < Dv; v++) o[v] = 0.0;
                if (lse) lse[(size_t)t * Hq + h] = -INFINITY;
                continue;
            }
            /* the stored values, converted exactly to float32 (and from there to double) */
            sieve_convert_to_f32(p->dtype, (const char *)q + ((size_t)t * Hq + h) * D * esz, qf,
                                 D);
            double m = -INFINITY;
            for (uint32_t j = 0; j < n; j++) {
                const size_t row = (size_t)set[j] * Hkv + g;
                sieve_convert_to_f32(p->dtype, (const char *)keys + row * D * esz, kf, D);
                double dot = 0.0;
                for (uint32_t d = 0; d < D; d++) dot += (double)qf[d] * (double)kf[d];
                s[j] = scale * dot;
                if (j == 0 || s[j] > m) m = s[j];
            }
            double sum = 0.0;
            for (uint32_t v = 0; v < Dv; v++) acc[v] = 0.0;
            for (uint32_t j = 0; j < n; j++) {
                const double e = exp(s[j] - m);
                const size_t row = (size_t)set[j] * Hkv + g;
                sieve_convert_to_f32(p->dtype, (const char *)values + row * Dv * esz, vf, Dv);
                sum += e;
                for (uint32_t v = 0; v < Dv; v++) acc[v] += e * (double)vf[v];
            }
            for (uint32_t v = 0; v < Dv; v++) o[v] = acc[v] / sum;
            if (lse) lse[(size_t)t * Hq + h] = m + log(sum);
        }
    }
    free(set);
    free(s);
    free(acc);
    free(qf);
    free(kf);
    free(vf);
    return 0;
}

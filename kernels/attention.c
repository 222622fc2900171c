/* attention.c: the device-agnostic entry points of dense causal attention
 * (sieve_kernels.h, "attention: dense causal").
 * Owns: the parameter defaults, the argument checks every dense-attention entry shares
 * (SIEVE_EINVAL before any work), dispatch to the CPU or CUDA backend, the CPU call's wall
 * time, and sieve_causal_attention_reference, the float64 ground truth.
 * Must not: implement the fast kernels (kernels/cpu/attention.c and the CUDA backend do),
 * use BLAS, threads or the backends' code in the reference (it exists to be obviously
 * right, not fast), keep state between calls.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sieve_kernels_internal.h"

void sieve_attn_params_init(sieve_attn_params *p, sieve_dtype dtype, uint32_t n_queries,
                            uint32_t q_heads, uint32_t kv_heads, uint32_t head_dim,
                            uint32_t v_dim, uint32_t n_keys) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->dtype = dtype;
    p->n_queries = n_queries;
    p->q_heads = q_heads;
    p->kv_heads = kv_heads;
    p->head_dim = head_dim;
    p->v_dim = v_dim;
    p->n_keys = n_keys;
    p->pos0 = 0;
    p->scale = 0.0f; /* 1 / sqrt(head_dim) */
}

int sieve__check_attn_params(const sieve_attn_params *p) {
    if (!p) return SIEVE_EINVAL;
    const size_t esz = sieve_dtype_size(p->dtype); /* 0 for an unknown dtype */
    if (esz == 0) return SIEVE_EINVAL;
    if (p->n_queries == 0 || p->q_heads == 0 || p->kv_heads == 0 || p->head_dim == 0 ||
        p->v_dim == 0 || p->n_keys == 0)
        return SIEVE_EINVAL;
    if (p->q_heads % p->kv_heads != 0) return SIEVE_EINVAL;
    if (p->n_keys > (uint32_t)INT32_MAX) return SIEVE_EINVAL;
    if (!isfinite(p->scale)) return SIEVE_EINVAL;
    /* every array's byte size must be addressable (lse, T x Hq floats, is no larger than
     * out, T x Hq x Dv floats); pos0 is any value: it only clips the visible keys */
    size_t tq, kv, q_bytes, k_bytes, v_bytes, out_bytes;
    if (!sieve__mul_size(p->n_queries, p->q_heads, &tq) ||
        !sieve__mul3_size(tq, p->head_dim, esz, &q_bytes) ||
        !sieve__mul_size(p->n_keys, p->kv_heads, &kv) ||
        !sieve__mul3_size(kv, p->head_dim, esz, &k_bytes) ||
        !sieve__mul3_size(kv, p->v_dim, esz, &v_bytes) ||
        !sieve__mul3_size(tq, p->v_dim, sizeof(float), &out_bytes))
        return SIEVE_EINVAL;
    return 0;
}

int sieve_causal_attn_scratch_size(sieve_device *dev, const sieve_attn_params *p,
                                   size_t *bytes) {
    if (!dev || !p || !bytes) return SIEVE_EINVAL;
    int rc = sieve__check_attn_params(p);
    if (rc) return rc;
    if (dev->kind == SIEVE_DEVICE_CUDA)
        return sieve__cuda_causal_attn_scratch_size(dev->cuda, p, bytes);
    *bytes = 0; /* the CPU allocates its buffers itself */
    return 0;
}

int sieve_causal_attention(sieve_device *dev, const sieve_attn_params *p, const void *q,
                           const void *keys, const void *values, void *scratch,
                           size_t scratch_bytes, float *out, float *lse, double *ms) {
    if (!dev || !p || !q || !keys || !values || !out) return SIEVE_EINVAL;
    int rc = sieve__check_attn_params(p);
    if (rc) return rc;
    if (dev->kind == SIEVE_DEVICE_CUDA)
        return sieve__cuda_causal_attention(dev->cuda, p, q, keys, values, scratch,
                                            scratch_bytes, out, lse, ms);
    /* the CPU needs no scratch (sieve_causal_attn_scratch_size gives 0) and ignores it */
    const double t0 = sieve__now_ms();
    rc = sieve__cpu_causal_attention(dev, p, q, keys, values, out, lse);
    if (!rc && ms) *ms = sieve__now_ms() - t0; /* left as it was on an error */
    return rc;
}

/* ---------------------------------------------------------------- float64 reference */

int sieve_causal_attention_reference(const sieve_attn_params *p, const void *q,
                                     const void *keys, const void *values, double *out,
                                     double *lse) {
    if (!p || !q || !keys || !values || !out) return SIEVE_EINVAL;
    int rc = sieve__check_attn_params(p);
    if (rc) return rc;
    const uint32_t Hq = p->q_heads, Hkv = p->kv_heads, D = p->head_dim, Dv = p->v_dim;
    const uint32_t rep = Hq / Hkv;
    const size_t esz = sieve_dtype_size(p->dtype);
    const double scale = p->scale == 0.0f ? 1.0 / sqrt((double)D) : (double)p->scale;
    /* a token sees at most n_keys keys (its scores: n_keys doubles) */
    size_t s_bytes;
    if (!sieve__mul_size(p->n_keys, sizeof(double), &s_bytes)) return SIEVE_ENOMEM;
    double *s = malloc(s_bytes);
    double *acc = malloc((size_t)Dv * sizeof *acc);
    float *qf = malloc((size_t)D * sizeof *qf);
    float *kf = malloc((size_t)D * sizeof *kf);
    float *vf = malloc((size_t)Dv * sizeof *vf);
    if (!s || !acc || !qf || !kf || !vf) {
        free(s);
        free(acc);
        free(qf);
        free(kf);
        free(vf);
        return SIEVE_ENOMEM;
    }
    for (uint32_t t = 0; t < p->n_queries; t++) {
        const uint32_t n = sieve__attn_visible(p, t); /* >= 1: n_keys >= 1 */
        for (uint32_t h = 0; h < Hq; h++) {
            const uint32_t g = h / rep;
            double *o = out + ((size_t)t * Hq + h) * Dv;
            /* the stored values, converted exactly to float32 (and from there to double) */
            sieve_convert_to_f32(p->dtype, (const char *)q + ((size_t)t * Hq + h) * D * esz, qf,
                                 D);
            double m = -INFINITY;
            for (uint32_t j = 0; j < n; j++) {
                const size_t row = (size_t)j * Hkv + g;
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
                const size_t row = (size_t)j * Hkv + g;
                sieve_convert_to_f32(p->dtype, (const char *)values + row * Dv * esz, vf, Dv);
                sum += e;
                for (uint32_t v = 0; v < Dv; v++) acc[v] += e * (double)vf[v];
            }
            for (uint32_t v = 0; v < Dv; v++) o[v] = acc[v] / sum;
            if (lse) lse[(size_t)t * Hq + h] = m + log(sum);
        }
    }
    free(s);
    free(acc);
    free(qf);
    free(kf);
    free(vf);
    return 0;
}

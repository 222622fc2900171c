/* block_sparse_ref.c: the float64 references of block-sparse prefill with mean correction
 * (sieve_kernels.h, "attention: block-sparse prefill"): sieve_bsp_select_reference (the
 * pooled keys, every block score, exponential and sum in double, the selection and each
 * block's E_J / max E) and sieve_bsp_attention_reference (the attention over a given
 * selection, kept keys and pooled rows of the corrected blocks, in double).
 * Owns: the argument checks of both (SIEVE_EINVAL before any output is written, a selection
 * that is not strictly ascending and visible included), the reference pooled rows.
 * Must not: use BLAS, threads or the backends' code (it exists to be obviously right, not
 * fast), keep state between calls.
 *
 * The pooled rows are the only float32 values here, by contract: kbar_J (vbar_J) of kv head
 * g is the double sum, in ascending position, of the block's stored key (value) rows
 * converted to float32, divided by the block's key count in double, rounded to float, then
 * to the storage dtype (sieve_convert_from_f32) and back (sieve_convert_to_f32). The CPU
 * backend computes them the same way, so both hold the same bits. Everything after that
 * (dots, scale, exponentials, sums, the logarithm of B) is double.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sieve_kernels_internal.h"

/* The pooled rows of blocks 0 .. nb - 1 of every kv head of src (n_keys x kv_heads x dim
 * stored values): *out (allocated here, kv_heads x nb x dim floats, block J of kv head g at
 * (g nb + J) dim; the caller frees it). 0 or SIEVE_ENOMEM. */
static int ref_pool(const sieve_bsp_params *p, const void *src, uint32_t dim, uint32_t nb,
                    float **out) {
    const sieve_attn_params *a = &p->attn;
    const size_t esz = sieve_dtype_size(a->dtype);
    size_t n;
    *out = NULL;
    if (!sieve__mul3_size(a->kv_heads, nb, dim, &n) || n > SIZE_MAX / sizeof(float))
        return SIEVE_ENOMEM;
    float *rows = malloc(n ? n * sizeof *rows : 1);
    double *acc = malloc((size_t)dim * sizeof *acc);
    float *f = malloc((size_t)dim * sizeof *f);
    void *stor = malloc((size_t)dim * esz);
    if (!rows || !acc || !f || !stor) {
        free(rows);
        free(acc);
        free(f);
        free(stor);
        return SIEVE_ENOMEM;
    }
    for (uint32_t g = 0; g < a->kv_heads; g++)
        for (uint32_t J = 0; J < nb; J++) {
            const uint64_t s0 = (uint64_t)J * p->block;
            const uint64_t s1 = s0 + p->block < a->n_keys ? s0 + p->block : a->n_keys;
            for (uint32_t d = 0; d < dim; d++) acc[d] = 0.0;
            for (uint64_t s = s0; s < s1; s++) {
                const size_t row = (size_t)s * a->kv_heads + g;
                sieve_convert_to_f32(a->dtype, (const char *)src + row * dim * esz, f, dim);
                for (uint32_t d = 0; d < dim; d++) acc[d] += (double)f[d];
            }
            for (uint32_t d = 0; d < dim; d++) f[d] = (float)(acc[d] / (double)(s1 - s0));
            sieve_convert_from_f32(a->dtype, f, stor, dim);
            sieve_convert_to_f32(a->dtype, stor, rows + ((size_t)g * nb + J) * dim, dim);
        }
    free(acc);
    free(f);
    free(stor);
    *out = rows;
    return 0;
}

/* The softmax scale in double: p's, or 1 / sqrt(head_dim) for 0. */
static double ref_scale(const sieve_attn_params *a) {
    return a->scale == 0.0f ? 1.0 / sqrt((double)a->head_dim) : (double)a->scale;
}

/* sum_d x[d] y[d] in double. */
static double ref_dot(const float *x, const float *y, uint32_t n) {
    double s = 0.0;
    for (uint32_t d = 0; d < n; d++) s += (double)x[d] * (double)y[d];
    return s;
}

/* ---------------------------------------------------------------- selection */

int sieve_bsp_select_reference(const sieve_bsp_params *p, const void *q, const void *keys,
                               uint32_t *sel_counts, int32_t *sel_blocks, double *ratio) {
    if (!p || !q || !keys || !sel_counts || !sel_blocks) return SIEVE_EINVAL;
    int rc = sieve__check_bsp_params(p);
    if (rc) return rc;
    uint32_t tiles;
    uint64_t per_head;
    rc = sieve_bsp_layout(p, &tiles, &per_head, NULL); /* per_head x kv_heads within int64 */
    if (rc) return rc;
    const sieve_attn_params *a = &p->attn;
    const uint32_t Hq = a->q_heads, Hkv = a->kv_heads, D = a->head_dim, B = p->block;
    const uint32_t rep = Hq / Hkv;
    const size_t esz = sieve_dtype_size(a->dtype);
    const double scale = ref_scale(a);
    /* n_I grows with I: the last tile sees the most blocks */
    const uint32_t nbk = sieve__bsp_visible_blocks(p, tiles - 1);
    const size_t rows = (size_t)(B < a->n_queries ? B : a->n_queries) * rep; /* of a tile */
    size_t s_count;
    if (!sieve__mul_size(rows, nbk, &s_count) || s_count > SIZE_MAX / sizeof(double))
        return SIEVE_ENOMEM;
    float *kbar = NULL;
    rc = ref_pool(p, keys, D, nbk, &kbar);
    if (rc) return rc;
    double *s = malloc(s_count * sizeof *s);
    double *E = malloc((size_t)nbk * sizeof *E);
    float *qf = malloc((size_t)D * sizeof *qf);
    if (!s || !E || !qf) {
        free(kbar);
        free(s);
        free(E);
        free(qf);
        return SIEVE_ENOMEM;
    }
    uint64_t off = 0; /* off_I */
    for (uint32_t I = 0; I < tiles; I++) {
        const uint32_t nI = sieve__bsp_visible_blocks(p, I);
        const uint32_t t0 = I * B; /* I < tiles: below n_queries */
        const uint32_t t1 = (uint64_t)t0 + B < a->n_queries ? t0 + B : a->n_queries;
        for (uint32_t g = 0; g < Hkv; g++) {
            /* every row's scores (token t ascending, then the heads of g) and their max */
            double M = -INFINITY;
            size_t i = 0;
            for (uint32_t t = t0; t < t1; t++)
                for (uint32_t r = 0; r < rep; r++, i++) {
                    const size_t th = (size_t)t * Hq + (size_t)g * rep + r;
                    sieve_convert_to_f32(a->dtype, (const char *)q + th * D * esz, qf, D);
                    for (uint32_t J = 0; J < nI; J++) {
                        const double x =
                            scale * ref_dot(qf, kbar + ((size_t)g * nbk + J) * D, D);
                        s[i * nI + J] = x;
                        if (x > M) M = x;
                    }
                }
            double maxE = 0.0;
            for (uint32_t J = 0; J < nI; J++) {
                double e = 0.0;
                for (size_t k = 0; k < i; k++) e += exp(s[k * nI + J] - M);
                E[J] = e;
                if (J == 0 || e > maxE) maxE = e;
            }
            const double thr = (double)p->alpha * maxE;
            const size_t base = (size_t)g * per_head + off;
            uint32_t cnt = 0;
            for (uint32_t J = 0; J < nI; J++) {
                if (ratio) ratio[base + J] = E[J] / maxE;
                if (sieve__bsp_forced(p, I, J) || E[J] >= thr)
                    sel_blocks[base + cnt++] = (int32_t)J;
            }
            sel_counts[(size_t)g * tiles + I] = cnt;
        }
        off += nI;
    }
    free(kbar);
    free(s);
    free(E);
    free(qf);
    return 0;
}

/* ---------------------------------------------------------------- attention */

int sieve_bsp_attention_reference(const sieve_bsp_params *p, const void *q, const void *keys,
                                  const void *values, const uint32_t *sel_counts,
                                  const int32_t *sel_blocks, uint32_t t_begin,
                                  uint32_t t_count, double *out, double *lse) {
    if (!p || !q || !keys || !values || !sel_counts || !sel_blocks || !out) return SIEVE_EINVAL;
    int rc = sieve__check_bsp_params(p);
    if (rc) return rc;
    const sieve_attn_params *a = &p->attn;
    if (t_count == 0 || t_begin >= a->n_queries || t_count > a->n_queries - t_begin)
        return SIEVE_EINVAL;
    uint32_t tiles;
    uint64_t per_head;
    rc = sieve_bsp_layout(p, &tiles, &per_head, NULL);
    if (rc) return rc;
    const uint32_t Hq = a->q_heads, Hkv = a->kv_heads, D = a->head_dim, Dv = a->v_dim;
    const uint32_t B = p->block, rep = Hq / Hkv;
    /* the selection: every tile's entries strictly ascending and below its n_I */
    for (uint32_t g = 0; g < Hkv; g++) {
        uint64_t off = 0;
        for (uint32_t I = 0; I < tiles; I++) {
            const uint32_t nI = sieve__bsp_visible_blocks(p, I);
            const uint32_t cnt = sel_counts[(size_t)g * tiles + I];
            if (cnt > nI) return SIEVE_EINVAL;
            const int32_t *blk = sel_blocks + (size_t)g * per_head + off;
            for (uint32_t k = 0; k < cnt; k++) {
                if (blk[k] < 0 || (uint32_t)blk[k] >= nI) return SIEVE_EINVAL;
                if (k > 0 && blk[k] <= blk[k - 1]) return SIEVE_EINVAL;
            }
            off += nI;
        }
    }
    const size_t esz = sieve_dtype_size(a->dtype);
    const double scale = ref_scale(a), logB = log((double)B);
    const uint32_t nbk = sieve__bsp_visible_blocks(p, tiles - 1);
    /* only full blocks are corrected; the last tile has the most */
    const uint32_t nbf = p->correct ? sieve__bsp_full_blocks(p, tiles - 1) : 0;
    /* a row's terms: at most the keys the last token sees and the corrected blocks */
    const size_t nterm = (size_t)sieve__attn_visible(a, a->n_queries - 1) + nbf;
    float *kbar = NULL, *vbar = NULL;
    rc = ref_pool(p, keys, D, nbf, &kbar);
    if (!rc) rc = ref_pool(p, values, Dv, nbf, &vbar);
    double *x = malloc(nterm * sizeof *x);
    double *acc = malloc((size_t)Dv * sizeof *acc);
    unsigned char *kept = malloc(nbk);
    float *qf = malloc((size_t)D * sizeof *qf);
    float *kf = malloc((size_t)D * sizeof *kf);
    float *vf = malloc((size_t)Dv * sizeof *vf);
    if (rc || !x || !acc || !kept || !qf || !kf || !vf) {
        free(kbar);
        free(vbar);
        free(x);
        free(acc);
        free(kept);
        free(qf);
        free(kf);
        free(vf);
        return SIEVE_ENOMEM;
    }
    for (uint32_t t = t_begin; t < t_begin + t_count; t++) {
        const uint32_t I = t / B;
        const uint32_t n = sieve__attn_visible(a, t);
        const uint32_t nI = sieve__bsp_visible_blocks(p, I), nF = sieve__bsp_full_blocks(p, I);
        uint64_t off = 0;
        for (uint32_t i = 0; i < I; i++) off += sieve__bsp_visible_blocks(p, i);
        for (uint32_t h = 0; h < Hq; h++) {
            const uint32_t g = h / rep;
            const size_t th = (size_t)t * Hq + h, oh = (size_t)(t - t_begin) * Hq + h;
            double *o = out + oh * Dv;
            memset(kept, 0, nI);
            const int32_t *blk = sel_blocks + (size_t)g * per_head + off;
            for (uint32_t k = 0; k < sel_counts[(size_t)g * tiles + I]; k++) kept[blk[k]] = 1;
            sieve_convert_to_f32(a->dtype, (const char *)q + th * D * esz, qf, D);
            /* the logits: kept keys t sees, ascending, then the corrected blocks */
            size_t nt = 0;
            double m = -INFINITY;
            for (uint32_t J = 0; J < nI; J++) {
                if (!kept[J]) continue;
                for (uint64_t s = (uint64_t)J * B; s < (uint64_t)(J + 1) * B && s < n; s++) {
                    const size_t row = (size_t)s * Hkv + g;
                    sieve_convert_to_f32(a->dtype, (const char *)keys + row * D * esz, kf, D);
                    x[nt] = scale * ref_dot(qf, kf, D);
                    if (x[nt] > m) m = x[nt];
                    nt++;
                }
            }
            if (p->correct)
                for (uint32_t J = 0; J < nF; J++) {
                    if (kept[J]) continue;
                    x[nt] = scale * ref_dot(qf, kbar + ((size_t)g * nbf + J) * D, D) + logB;
                    if (x[nt] > m) m = x[nt];
                    nt++;
                }
            if (nt == 0) { /* nothing to attend */
                for (uint32_t v = 0; v < Dv; v++) o[v] = 0.0;
                if (lse) lse[oh] = -INFINITY;
                continue;
            }
            double sum = 0.0;
            for (uint32_t v = 0; v < Dv; v++) acc[v] = 0.0;
            size_t j = 0;
            for (uint32_t J = 0; J < nI; J++) { /* the kept keys again, in the same order */
                if (!kept[J]) continue;
                for (uint64_t s = (uint64_t)J * B; s < (uint64_t)(J + 1) * B && s < n; s++, j++) {
                    const double e = exp(x[j] - m);
                    const size_t row = (size_t)s * Hkv + g;
                    sieve_convert_to_f32(a->dtype, (const char *)values + row * Dv * esz, vf, Dv);
                    sum += e;
                    for (uint32_t v = 0; v < Dv; v++) acc[v] += e * (double)vf[v];
                }
            }
            if (p->correct)
                for (uint32_t J = 0; J < nF; J++) {
                    if (kept[J]) continue;
                    const double e = exp(x[j++] - m); /* B e^{xbar_J} relative to e^m */
                    const float *vb = vbar + ((size_t)g * nbf + J) * Dv;
                    sum += e;
                    for (uint32_t v = 0; v < Dv; v++) acc[v] += e * (double)vb[v];
                }
            for (uint32_t v = 0; v < Dv; v++) o[v] = acc[v] / sum;
            if (lse) lse[oh] = m + log(sum);
        }
    }
    free(kbar);
    free(vbar);
    free(x);
    free(acc);
    free(kept);
    free(qf);
    free(kf);
    free(vf);
    return 0;
}

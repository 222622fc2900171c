/* attention.c (cpu): the CPU backend of dense causal attention.
 * Owns: the float32 attention of each query token over its visible keys, the per-worker
 * buffers and the order of every sum.
 * Must not: keep state between calls, write the caller's arrays outside their shapes or on
 * an error, let the answer depend on the worker count or the block sizes below.
 *
 * One parallel phase: dev->threads workers (sieve__cpu_run) claim tokens dynamically, the
 * last token first (it sees the most keys, so the longest tasks start earliest). Token t
 * sees the keys s = 0 .. n - 1, n = sieve__attn_visible(p, t) >= 1. For each kv head g the
 * query heads h of g (h / (q_heads / kv_heads) == g) are taken HCHUNK at a time; for such a
 * chunk the visible key rows are converted to float32 KBLOCK rows at a time and gathered
 * transposed (head_dim x rows), then the value rows row-major (rows x v_dim), and each head
 * computes, all in float32:
 *     dot_s = sum over d in index order of q[t,h,d] * key[s,g,d]
 *     x_s = dot_s * scale,  m = max x_s,  e_s = expf(x_s - m),  l = sum_s e_s
 *     out[t,h,v] = (sum_s e_s * value[s,g,v]) / l,  lse[t,h] = m + logf(l)
 * Every sum over s runs in ascending s in one accumulator and every dot is its own sum over
 * d, so cutting the keys into blocks changes no rounding: the answer is the unblocked
 * two-pass softmax's, bit for bit, for every worker count. float16 and bfloat16 products
 * are exact in float32; float32 products round once. scale 0 means 1 / sqrt(head_dim),
 * computed in double and rounded to float once.
 * Memory per worker: about HCHUNK x (head_dim + v_dim + nmax) + KBLOCK x (head_dim + v_dim)
 * floats, nmax = the keys the last token sees (the scores of a chunk of heads over a whole
 * row: the softmax's maximum is needed before the first exponential). Every buffer is
 * allocated before out or lse is written, so SIEVE_ENOMEM leaves them untouched.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#define MAX_WORKERS 256u
#define KBLOCK 256u /* key or value rows converted per block */
#define HCHUNK 8u   /* query heads of one kv head attended together (share the conversion) */

/* One worker's buffers. */
typedef struct wbuf {
    float *qf;   /* R x head_dim: the query rows of one chunk of heads */
    float *kt;   /* head_dim x KBLOCK: a block of key rows, transposed (leading dim: rows) */
    float *vv;   /* KBLOCK x v_dim: a block of value rows */
    float *conv; /* head_dim: one converted key row */
    float *sc;   /* R x nmax: the scores, then the exponentials */
    float *mx;   /* R: the maxima */
    float *sum;  /* R: the exponentials' sums */
    float *acc;  /* R x v_dim: the weighted value sums */
} wbuf;

typedef struct actx {
    const sieve_attn_params *p;
    const void *q, *keys, *values;
    uint32_t T, Hq, Hkv, D, Dv, rep, R;
    size_t nmax; /* the leading dimension of sc */
    size_t esz;
    float scale;
    wbuf *bufs;
    float *out, *lse;
    atomic_uint_fast64_t next;
} actx;

/* Heads h0 .. h0 + nr - 1 (all of kv head g) of token t over its n visible keys. */
static void attend_chunk(const actx *c, wbuf *b, uint32_t t, uint32_t g, uint32_t h0,
                         uint32_t nr, uint32_t n) {
    const uint32_t D = c->D, Dv = c->Dv, Hkv = c->Hkv;
    const size_t ld = c->nmax;
    for (uint32_t r = 0; r < nr; r++)
        sieve_convert_to_f32(c->p->dtype,
                             (const char *)c->q + ((size_t)t * c->Hq + h0 + r) * D * c->esz,
                             b->qf + (size_t)r * D, D);
    /* the scores, a block of keys at a time */
    for (uint32_t j0 = 0; j0 < n; j0 += KBLOCK) {
        const uint32_t nb = n - j0 < KBLOCK ? n - j0 : KBLOCK;
        for (uint32_t j = 0; j < nb; j++) {
            const size_t row = (size_t)(j0 + j) * Hkv + g;
            sieve_convert_to_f32(c->p->dtype, (const char *)c->keys + row * D * c->esz, b->conv,
                                 D);
            for (uint32_t d = 0; d < D; d++) b->kt[(size_t)d * nb + j] = b->conv[d];
        }
        for (uint32_t r = 0; r < nr; r++) {
            float *sc = b->sc + (size_t)r * ld + j0;
            const float *qr = b->qf + (size_t)r * D;
            for (uint32_t j = 0; j < nb; j++) sc[j] = 0.0f;
            for (uint32_t d = 0; d < D; d++) { /* each dot in index order d; vectorised over j */
                const float qd = qr[d];
                const float *kd = b->kt + (size_t)d * nb;
                for (uint32_t j = 0; j < nb; j++) sc[j] += qd * kd[j];
            }
        }
    }
    /* the softmax's maxima, exponentials and sums, ascending s */
    for (uint32_t r = 0; r < nr; r++) {
        float *sc = b->sc + (size_t)r * ld;
        float m = -INFINITY;
        for (uint32_t j = 0; j < n; j++) {
            sc[j] *= c->scale;
            if (sc[j] > m) m = sc[j];
        }
        float l = 0.0f;
        for (uint32_t j = 0; j < n; j++) {
            sc[j] = expf(sc[j] - m);
            l += sc[j];
        }
        b->mx[r] = m;
        b->sum[r] = l;
    }
    /* the weighted value sums, a block of values at a time, ascending s */
    for (size_t i = 0; i < (size_t)nr * Dv; i++) b->acc[i] = 0.0f;
    for (uint32_t j0 = 0; j0 < n; j0 += KBLOCK) {
        const uint32_t nb = n - j0 < KBLOCK ? n - j0 : KBLOCK;
        for (uint32_t j = 0; j < nb; j++) {
            const size_t row = (size_t)(j0 + j) * Hkv + g;
            sieve_convert_to_f32(c->p->dtype, (const char *)c->values + row * Dv * c->esz,
                                 b->vv + (size_t)j * Dv, Dv);
        }
        for (uint32_t r = 0; r < nr; r++) {
            const float *e = b->sc + (size_t)r * ld + j0;
            float *acc = b->acc + (size_t)r * Dv;
            for (uint32_t j = 0; j < nb; j++) {
                const float ej = e[j];
                const float *vj = b->vv + (size_t)j * Dv;
                for (uint32_t v = 0; v < Dv; v++) acc[v] += ej * vj[v];
            }
        }
    }
    for (uint32_t r = 0; r < nr; r++) {
        const size_t th = (size_t)t * c->Hq + h0 + r;
        const float *acc = b->acc + (size_t)r * Dv;
        const float l = b->sum[r];
        float *o = c->out + th * Dv;
        for (uint32_t v = 0; v < Dv; v++) o[v] = acc[v] / l;
        if (c->lse) c->lse[th] = b->mx[r] + logf(l);
    }
}

static void attend_token(const actx *c, wbuf *b, uint32_t t) {
    const uint32_t n = sieve__attn_visible(c->p, t); /* >= 1: n_keys >= 1 */
    for (uint32_t g = 0; g < c->Hkv; g++)
        for (uint32_t r0 = 0; r0 < c->rep; r0 += c->R) {
            const uint32_t nr = c->rep - r0 < c->R ? c->rep - r0 : c->R;
            attend_chunk(c, b, t, g, g * c->rep + r0, nr, n);
        }
}

static void attend_worker(void *vc, uint32_t worker) {
    actx *c = vc;
    wbuf *b = &c->bufs[worker];
    for (;;) {
        const uint64_t i = atomic_fetch_add(&c->next, 1);
        if (i >= c->T) break;
        attend_token(c, b, c->T - 1 - (uint32_t)i); /* the longest rows first */
    }
}

/* *total += count * elem, aligned, recording the offset; 0 on size overflow. */
static int region(size_t *total, size_t *off, size_t count, size_t elem) {
    if (count && elem > (SIZE_MAX / 2) / count) return 0;
    const size_t bytes = sieve__cpu_align(count * elem);
    if (*total > SIZE_MAX / 2 - bytes) return 0;
    *off = *total;
    *total += bytes;
    return 1;
}

int sieve__cpu_causal_attention(const sieve_device *dev, const sieve_attn_params *p,
                                const void *q, const void *keys, const void *values,
                                float *out, float *lse) {
    const uint32_t T = p->n_queries;
    uint32_t W = dev->threads ? dev->threads : 1;
    if (W > T) W = T;
    if (W > MAX_WORKERS) W = MAX_WORKERS;

    actx c;
    memset(&c, 0, sizeof c);
    c.p = p;
    c.q = q;
    c.keys = keys;
    c.values = values;
    c.T = T;
    c.Hq = p->q_heads;
    c.Hkv = p->kv_heads;
    c.D = p->head_dim;
    c.Dv = p->v_dim;
    c.rep = p->q_heads / p->kv_heads;
    c.R = c.rep < HCHUNK ? c.rep : HCHUNK;
    c.nmax = sieve__attn_visible(p, T - 1); /* visible counts grow with t */
    c.esz = sieve_dtype_size(p->dtype);
    c.scale = p->scale == 0.0f ? (float)(1.0 / sqrt((double)p->head_dim)) : p->scale;
    c.out = out;
    c.lse = lse;
    atomic_init(&c.next, 0);

    const size_t D = c.D, Dv = c.Dv, R = c.R;
    const size_t nb = c.nmax < KBLOCK ? c.nmax : KBLOCK;
    size_t per = 0, o_q, o_kt, o_vv, o_conv, o_sc, o_mx, o_sum, o_acc;
    if (!region(&per, &o_q, R * D, sizeof(float)) ||
        !region(&per, &o_kt, D * nb, sizeof(float)) ||
        !region(&per, &o_vv, nb * Dv, sizeof(float)) ||
        !region(&per, &o_conv, D, sizeof(float)) ||
        !region(&per, &o_sc, c.nmax, R * sizeof(float)) ||
        !region(&per, &o_mx, R, sizeof(float)) || !region(&per, &o_sum, R, sizeof(float)) ||
        !region(&per, &o_acc, R * Dv, sizeof(float)) || per > (SIZE_MAX / 2) / W)
        return SIEVE_ENOMEM;
    char *mem = malloc(per * W + SIEVE__ALIGN);
    c.bufs = calloc(W, sizeof *c.bufs);
    if (!mem || !c.bufs) {
        free(mem);
        free(c.bufs);
        return SIEVE_ENOMEM;
    }
    char *base = mem + (SIEVE__ALIGN - (uintptr_t)mem % SIEVE__ALIGN) % SIEVE__ALIGN;
    for (uint32_t i = 0; i < W; i++) {
        char *m = base + (size_t)i * per;
        c.bufs[i].qf = (float *)(void *)(m + o_q);
        c.bufs[i].kt = (float *)(void *)(m + o_kt);
        c.bufs[i].vv = (float *)(void *)(m + o_vv);
        c.bufs[i].conv = (float *)(void *)(m + o_conv);
        c.bufs[i].sc = (float *)(void *)(m + o_sc);
        c.bufs[i].mx = (float *)(void *)(m + o_mx);
        c.bufs[i].sum = (float *)(void *)(m + o_sum);
        c.bufs[i].acc = (float *)(void *)(m + o_acc);
    }
    sieve__cpu_run(W, attend_worker, &c);
    free(mem);
    free(c.bufs);
    return 0;
}

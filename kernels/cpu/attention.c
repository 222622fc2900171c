/* attention.c (cpu): the CPU backend of dense causal attention.
 * Owns: the float32 attention of each query token over its visible keys, the per-worker
 * buffers and the order of every sum; sieve__cpu_attend_entries, the same attention over a
 * list of entries (key positions, then pooled rows), which block-sparse prefill shares.
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
 * floats and nmax entries, nmax = the keys the last token sees (the scores of a chunk of
 * heads over a whole row: the softmax's maximum is needed before the first exponential).
 * Every buffer is allocated before out or lse is written, so SIEVE_ENOMEM leaves them
 * untouched.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#define MAX_WORKERS 256u
#define KBLOCK SIEVE__CPU_ATTN_KBLOCK /* key or value rows converted per block */
#define HCHUNK 8u   /* query heads of one kv head attended together (share the conversion) */

/* One worker's buffers: the attention's (sieve__cpu_attn_buf) and a token's entries. */
typedef struct wbuf {
    sieve__cpu_attn_buf ab;
    uint32_t *ent; /* nmax: the keys 0 .. n - 1 of a token */
} wbuf;

typedef struct actx {
    const sieve_attn_params *p;
    sieve__cpu_attn_src src;
    uint32_t T, rep, R;
    size_t nmax; /* the leading dimension of sc */
    wbuf *bufs;
    atomic_uint_fast64_t next;
} actx;

void sieve__cpu_attend_entries(const sieve__cpu_attn_src *a, const sieve__cpu_attn_buf *b,
                               const float *kbar_g, const float *vbar_g, uint32_t t,
                               uint32_t g, uint32_t h0, uint32_t nr, const uint32_t *ent,
                               uint32_t n, uint32_t ne) {
    const uint32_t D = a->D, Dv = a->Dv, Hkv = a->Hkv;
    const sieve_dtype dt = a->dtype;
    const size_t ld = b->ld;
    for (uint32_t r = 0; r < nr; r++)
        sieve_convert_to_f32(dt, (const char *)a->q + ((size_t)t * a->Hq + h0 + r) * D * a->esz,
                             b->qf + (size_t)r * D, D);
    /* the dots, a block of entries at a time */
    for (uint32_t j0 = 0; j0 < n; j0 += KBLOCK) {
        const uint32_t nb = n - j0 < KBLOCK ? n - j0 : KBLOCK;
        for (uint32_t j = 0; j < nb; j++) {
            const uint32_t e = ent[j0 + j];
            const float *row = b->conv;
            if (e & SIEVE__CPU_POOLED)
                row = kbar_g + (size_t)(e & ~SIEVE__CPU_POOLED) * D;
            else
                sieve_convert_to_f32(dt, (const char *)a->keys + ((size_t)e * Hkv + g) * D * a->esz,
                                     b->conv, D);
            for (uint32_t d = 0; d < D; d++) b->kt[(size_t)d * nb + j] = row[d];
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
    /* the logits, the softmax's maxima, exponentials and sums, in entry order */
    for (uint32_t r = 0; r < nr; r++) {
        float *sc = b->sc + (size_t)r * ld;
        float m = -INFINITY;
        for (uint32_t j = 0; j < ne; j++) {
            sc[j] *= a->scale;
            if (sc[j] > m) m = sc[j];
        }
        for (uint32_t j = ne; j < n; j++) {
            sc[j] = sc[j] * a->scale + a->pooled_bias; /* a pooled row stands for B keys */
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
    /* the weighted value sums, a block of entries at a time, in entry order */
    for (size_t i = 0; i < (size_t)nr * Dv; i++) b->acc[i] = 0.0f;
    for (uint32_t j0 = 0; j0 < n; j0 += KBLOCK) {
        const uint32_t nb = n - j0 < KBLOCK ? n - j0 : KBLOCK;
        for (uint32_t j = 0; j < nb; j++) {
            const uint32_t e = ent[j0 + j];
            float *dst = b->vv + (size_t)j * Dv;
            if (e & SIEVE__CPU_POOLED)
                memcpy(dst, vbar_g + (size_t)(e & ~SIEVE__CPU_POOLED) * Dv,
                       (size_t)Dv * sizeof *dst);
            else
                sieve_convert_to_f32(
                    dt, (const char *)a->values + ((size_t)e * Hkv + g) * Dv * a->esz, dst, Dv);
        }
        for (uint32_t r = 0; r < nr; r++) {
            const float *ex = b->sc + (size_t)r * ld + j0;
            float *acc = b->acc + (size_t)r * Dv;
            for (uint32_t j = 0; j < nb; j++) {
                const float ej = ex[j];
                const float *vj = b->vv + (size_t)j * Dv;
                for (uint32_t v = 0; v < Dv; v++) acc[v] += ej * vj[v];
            }
        }
    }
    for (uint32_t r = 0; r < nr; r++) {
        const size_t th = (size_t)t * a->Hq + h0 + r;
        const float *acc = b->acc + (size_t)r * Dv;
        const float l = b->sum[r];
        float *o = a->out + th * Dv;
        for (uint32_t v = 0; v < Dv; v++) o[v] = acc[v] / l;
        if (a->lse) a->lse[th] = b->mx[r] + logf(l);
    }
}

int sieve__cpu_attn_reserve(size_t *per, sieve__cpu_attn_layout *l, size_t nr, size_t D,
                            size_t Dv, size_t n) {
    const size_t kb = n < KBLOCK ? n : KBLOCK;
    l->n = n;
    return sieve__cpu_region(per, &l->o_qf, nr * D, sizeof(float)) &&
           sieve__cpu_region(per, &l->o_kt, D * kb, sizeof(float)) &&
           sieve__cpu_region(per, &l->o_vv, kb * Dv, sizeof(float)) &&
           sieve__cpu_region(per, &l->o_conv, D, sizeof(float)) &&
           sieve__cpu_region(per, &l->o_sc, n, nr * sizeof(float)) &&
           sieve__cpu_region(per, &l->o_mx, nr, sizeof(float)) &&
           sieve__cpu_region(per, &l->o_sum, nr, sizeof(float)) &&
           sieve__cpu_region(per, &l->o_acc, nr * Dv, sizeof(float));
}

void sieve__cpu_attn_bind(sieve__cpu_attn_buf *b, const sieve__cpu_attn_layout *l, char *m) {
    b->qf = (float *)(void *)(m + l->o_qf);
    b->kt = (float *)(void *)(m + l->o_kt);
    b->vv = (float *)(void *)(m + l->o_vv);
    b->conv = (float *)(void *)(m + l->o_conv);
    b->sc = (float *)(void *)(m + l->o_sc);
    b->mx = (float *)(void *)(m + l->o_mx);
    b->sum = (float *)(void *)(m + l->o_sum);
    b->acc = (float *)(void *)(m + l->o_acc);
    b->ld = l->n;
}

static void attend_token(const actx *c, wbuf *b, uint32_t t) {
    const uint32_t n = sieve__attn_visible(c->p, t); /* >= 1: n_keys >= 1 */
    for (uint32_t j = 0; j < n; j++) b->ent[j] = j; /* every key the token sees, ascending */
    for (uint32_t g = 0; g < c->src.Hkv; g++)
        for (uint32_t r0 = 0; r0 < c->rep; r0 += c->R) {
            const uint32_t nr = c->rep - r0 < c->R ? c->rep - r0 : c->R;
            sieve__cpu_attend_entries(&c->src, &b->ab, NULL, NULL, t, g, g * c->rep + r0, nr,
                                      b->ent, n, n);
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
    c.src.dtype = p->dtype;
    c.src.esz = sieve_dtype_size(p->dtype);
    c.src.q = q;
    c.src.keys = keys;
    c.src.values = values;
    c.src.Hq = p->q_heads;
    c.src.Hkv = p->kv_heads;
    c.src.D = p->head_dim;
    c.src.Dv = p->v_dim;
    c.src.scale = p->scale == 0.0f ? (float)(1.0 / sqrt((double)p->head_dim)) : p->scale;
    c.src.pooled_bias = 0.0f; /* no pooled entries */
    c.src.out = out;
    c.src.lse = lse;
    c.T = T;
    c.rep = p->q_heads / p->kv_heads;
    c.R = c.rep < HCHUNK ? c.rep : HCHUNK;
    c.nmax = sieve__attn_visible(p, T - 1); /* visible counts grow with t */
    atomic_init(&c.next, 0);

    size_t per = 0, o_ent;
    sieve__cpu_attn_layout al;
    if (!sieve__cpu_attn_reserve(&per, &al, c.R, c.src.D, c.src.Dv, c.nmax) ||
        !sieve__cpu_region(&per, &o_ent, c.nmax, sizeof(uint32_t)) || per > (SIZE_MAX / 2) / W)
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
        sieve__cpu_attn_bind(&c.bufs[i].ab, &al, m);
        c.bufs[i].ent = (uint32_t *)(void *)(m + o_ent);
    }
    sieve__cpu_run(W, attend_worker, &c);
    free(mem);
    free(c.bufs);
    return 0;
}

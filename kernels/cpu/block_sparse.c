/* block_sparse.c (cpu): the CPU backend of block-sparse prefill with mean correction
 * (sieve_kernels.h, "attention: block-sparse prefill").
 * Owns: the pooled rows (kbar, vbar) in float32, the float32 block scores and the selection,
 * the float32 attention of each query token over its kept keys and its corrected blocks'
 * pooled rows, the selection's output arrays, the per-worker buffers, the order of every sum
 * and the statistics but ms_total.
 * Must not: keep state between calls, write the caller's arrays outside their shapes or on
 * an error, let the answer depend on the worker count or the block sizes below, allocate
 * anything of n_queries x n_keys entries.
 *
 * With B = p->block, tile I = tokens I B .. min((I + 1) B, T) - 1, n_I its visible blocks,
 * nf_I its full blocks (sieve__bsp_visible_blocks, sieve__bsp_full_blocks), three parallel
 * phases, each claimed dynamically by dev->threads workers (sieve__cpu_run):
 *  pool: the workers claim (block J, kv head g) pairs. kbar_J of kv head g (for every J below
 *    the last tile's n_I) and, with correct = 1, vbar_J (for every J below the last tile's
 *    nf_I: the only blocks that can be corrected): the stored rows of the block converted to
 *    float32, summed per element in double in ascending position, divided by the block's key
 *    count in double, rounded to float, then to the storage dtype and back to float32, as
 *    the float64 reference does (block_sparse_ref.c), so both hold the same bits.
 *  select: the workers claim (tile I, kv head g) pairs, the last tiles first (they see the
 *    most blocks). For each row i of the tile (token t ascending, then the query heads h of
 *    g ascending) and every J < n_I, the scores in float32:
 *        s_iJ = (sum over d in index order of q[t,h,d] * kbar_J[d]) * scale
 *        M = max s_iJ,  E_J = sum over i ascending of expf(s_iJ - M)  (a double accumulator)
 *    and J is kept when sieve__bsp_forced(p, I, J) or E_J >= alpha * max E (in double).
 *    The block of the largest E_J is kept: alpha <= 1, so alpha * max E is at most max E.
 *    One byte per visible block records the decision.
 *  attend: the workers claim tokens, the last token first (it sees the most keys). Token t
 *    of tile I sees n = sieve__attn_visible(p, t) keys; for kv head g its entries are the
 *    keys s < n of the kept blocks in ascending s, then (correct = 1) the pooled rows of the
 *    full blocks J < nf_I that are not kept, in ascending J. The query heads of g are taken
 *    HCHUNK at a time through sieve__cpu_attend_entries, the code dense causal attention
 *    runs too (kernels/cpu/attention.c: KBLOCK entries converted and gathered transposed, the
 *    value rows row-major), all in float32:
 *        dot_j = sum over d in index order of q[t,h,d] * row_j[d]   (key row or kbar_J)
 *        x_j = dot_j * scale (a key),  x_j = dot_j * scale + logf((float)B) (a pooled row)
 *        m = max x_j,  e_j = expf(x_j - m),  l = sum_j e_j
 *        out[t,h,v] = (sum_j e_j * row'_j[v]) / l,  lse[t,h] = m + logf(l)
 *    (row'_j the value row or vbar_J), every sum over j ascending in one accumulator. With
 *    alpha 0 every visible block is kept and nothing is corrected: the entries are the keys
 *    0 .. n - 1 and every operation is sieve_causal_attention's on the CPU, bit for bit. A
 *    row with no entry (possible only with correct = 0) gets out 0 and lse -inf.
 * scale 0 means 1 / sqrt(head_dim), computed in double and rounded to float once. float16
 * and bfloat16 products are exact in float32; float32 products round once. No result
 * depends on the worker count or the claiming order: each pooled row, tile decision and
 * token is computed by one worker in a fixed order.
 * After the selection, a single pass over the decisions writes sel_counts and sel_blocks
 * (when given; entries past a tile's count are left alone) and counts the kept and
 * corrected blocks. ms_select is the wall time of pool, select and that pass, ms_attend the
 * wall time of attend.
 * Memory: the pooled rows (about (n_keys / B) x kv_heads x (head_dim + v_dim) floats), one
 * byte per visible block (kv_heads x per_head, the selection's own size), and per worker
 * about min(B, T) x (q_heads / kv_heads) x n_I floats (the tile's scores: rows x blocks, at
 * most (q_heads / kv_heads) x (n_keys + B)) plus the buffers of kernels/cpu/attention.c for
 * n_keys + n_I entries. Every buffer is allocated before out, lse or the selection is
 * written, so SIEVE_ENOMEM leaves them untouched.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#define MAX_WORKERS 256u
#define HCHUNK 8u   /* query heads of one kv head attended together (share the conversion) */
#define POOLED SIEVE__CPU_POOLED /* an entry with this bit is pooled block (entry & ~POOLED) */

/* One worker's buffers. */
typedef struct wbuf {
    /* pool */
    double *dacc; /* max(head_dim, v_dim): a block's sums */
    float *mean;  /* max(head_dim, v_dim): the mean as float32 */
    void *stor;   /* max(head_dim, v_dim) elements of the storage dtype */
    /* select */
    float *qrow;  /* head_dim: one query row */
    float *kbt;   /* head_dim x n_I: the tile's pooled keys of kv head g, transposed */
    float *ss;    /* rows x n_I: the block scores of a tile, then their exponentials */
    double *e;    /* n_I: E_J */
    float *conv;  /* max(head_dim, v_dim): one converted row (pool) */
    /* attend */
    uint32_t *ent;          /* nent: a token's entries for one kv head */
    sieve__cpu_attn_buf ab; /* sieve__cpu_attend_entries's buffers (R heads, ld nent) */
} wbuf;

typedef struct bctx {
    const sieve_bsp_params *p;
    sieve__cpu_attn_src src; /* for sieve__cpu_attend_entries */
    const void *q, *keys, *values;
    uint32_t T, Hq, Hkv, D, Dv, rep, R, B, tiles;
    size_t esz;
    float scale, logB;
    uint32_t *n_vis;   /* tiles: n_I */
    uint32_t *n_full;  /* tiles: nf_I */
    uint64_t *off;     /* tiles: off_I */
    uint64_t per_head;
    uint32_t nbk;      /* pooled key rows per kv head: the last tile's n_I */
    uint32_t nbv;      /* pooled value rows per kv head: the last tile's nf_I (0 without
                          correction) */
    float *kbar;       /* kv_heads x nbk x head_dim: kbar of (g, J) at (g nbk + J) D */
    float *vbar;       /* kv_heads x nbv x v_dim */
    unsigned char *keep; /* kv_heads x per_head: 1 where block J of tile I, head g is kept */
    size_t nent;       /* the leading dimension of sc, the capacity of ent */
    wbuf *bufs;
    float *out, *lse;
    atomic_uint_fast64_t next;
} bctx;

/* ---------------------------------------------------------------- pool */

/* The pooled row of block J, kv head g, of src (n_keys x kv_heads x dim stored values) into
 * dst (dim floats): the double sums in ascending position of the float32 rows, divided by
 * the key count, rounded to float, to the storage dtype and back. */
static void pool_row(const bctx *c, wbuf *b, const void *src, uint32_t dim, uint32_t g,
                     uint32_t J, float *dst) {
    const uint32_t L = c->p->attn.n_keys;
    const uint32_t s0 = J * c->B; /* J < ceil(L / B): no wrap */
    const uint32_t s1 = (uint64_t)s0 + c->B < L ? s0 + c->B : L;
    for (uint32_t d = 0; d < dim; d++) b->dacc[d] = 0.0;
    for (uint32_t s = s0; s < s1; s++) {
        const size_t row = (size_t)s * c->Hkv + g;
        sieve_convert_to_f32(c->p->attn.dtype, (const char *)src + row * dim * c->esz, b->conv,
                             dim);
        for (uint32_t d = 0; d < dim; d++) b->dacc[d] += (double)b->conv[d];
    }
    const double cnt = (double)(s1 - s0);
    for (uint32_t d = 0; d < dim; d++) b->mean[d] = (float)(b->dacc[d] / cnt);
    sieve_convert_from_f32(c->p->attn.dtype, b->mean, b->stor, dim);
    sieve_convert_to_f32(c->p->attn.dtype, b->stor, dst, dim);
}

static void pool_worker(void *vc, uint32_t worker) {
    bctx *c = vc;
    wbuf *b = &c->bufs[worker];
    const uint64_t nk = (uint64_t)c->nbk * c->Hkv, total = nk + (uint64_t)c->nbv * c->Hkv;
    for (;;) {
        const uint64_t u = atomic_fetch_add(&c->next, 1);
        if (u >= total) break;
        if (u < nk) { /* J-major: the rows of one block lie together */
            const uint32_t J = (uint32_t)(u / c->Hkv), g = (uint32_t)(u % c->Hkv);
            pool_row(c, b, c->keys, c->D, g, J, c->kbar + ((size_t)g * c->nbk + J) * c->D);
        } else {
            const uint64_t v = u - nk;
            const uint32_t J = (uint32_t)(v / c->Hkv), g = (uint32_t)(v % c->Hkv);
            pool_row(c, b, c->values, c->Dv, g, J, c->vbar + ((size_t)g * c->nbv + J) * c->Dv);
        }
    }
}

/* ---------------------------------------------------------------- select */

/* The block scores and the decisions of tile I, kv head g. */
static void select_tile(const bctx *c, wbuf *b, uint32_t I, uint32_t g) {
    const uint32_t D = c->D, nI = c->n_vis[I];
    const uint32_t t0 = I * c->B; /* I < tiles: no wrap */
    const uint32_t t1 = (uint64_t)t0 + c->B < c->T ? t0 + c->B : c->T;
    const float *kb = c->kbar + (size_t)g * c->nbk * D;
    for (uint32_t J = 0; J < nI; J++)
        for (uint32_t d = 0; d < D; d++) b->kbt[(size_t)d * nI + J] = kb[(size_t)J * D + d];
    /* the scores, row by row (token-major), and their maximum */
    float M = -INFINITY;
    size_t i = 0;
    for (uint32_t t = t0; t < t1; t++)
        for (uint32_t r = 0; r < c->rep; r++, i++) {
            const size_t th = (size_t)t * c->Hq + (size_t)g * c->rep + r;
            sieve_convert_to_f32(c->p->attn.dtype, (const char *)c->q + th * D * c->esz, b->qrow,
                                 D);
            float *s = b->ss + i * nI;
            for (uint32_t J = 0; J < nI; J++) s[J] = 0.0f;
            for (uint32_t d = 0; d < D; d++) { /* each dot in index order d; vectorised over J */
                const float qd = b->qrow[d];
                const float *kd = b->kbt + (size_t)d * nI;
                for (uint32_t J = 0; J < nI; J++) s[J] += qd * kd[J];
            }
            for (uint32_t J = 0; J < nI; J++) {
                s[J] *= c->scale;
                if (s[J] > M) M = s[J];
            }
        }
    const size_t rows = i;
    /* E_J: the rows' exponentials summed in row order, one double accumulator per block (a
     * float sum over tens of thousands of rows would drift past the contract's band) */
    for (uint32_t J = 0; J < nI; J++) b->e[J] = 0.0;
    for (i = 0; i < rows; i++) {
        const float *s = b->ss + i * nI;
        for (uint32_t J = 0; J < nI; J++) b->e[J] += (double)expf(s[J] - M);
    }
    double maxE = b->e[0];
    for (uint32_t J = 1; J < nI; J++)
        if (b->e[J] > maxE) maxE = b->e[J];
    const double thr = (double)c->p->alpha * maxE;
    unsigned char *keep = c->keep + (size_t)g * c->per_head + c->off[I];
    for (uint32_t J = 0; J < nI; J++)
        keep[J] = (unsigned char)(sieve__bsp_forced(c->p, I, J) || b->e[J] >= thr);
}

static void select_worker(void *vc, uint32_t worker) {
    bctx *c = vc;
    wbuf *b = &c->bufs[worker];
    const uint64_t total = (uint64_t)c->tiles * c->Hkv;
    for (;;) {
        const uint64_t u = atomic_fetch_add(&c->next, 1);
        if (u >= total) break;
        const uint32_t I = c->tiles - 1 - (uint32_t)(u / c->Hkv); /* the longest tiles first */
        select_tile(c, b, I, (uint32_t)(u % c->Hkv));
    }
}

/* ---------------------------------------------------------------- attend */

static void attend_token(const bctx *c, wbuf *b, uint32_t t) {
    const uint32_t I = t / c->B, B = c->B;
    const uint32_t n = sieve__attn_visible(&c->p->attn, t); /* >= 1 */
    const uint32_t nI = c->n_vis[I], nF = c->n_full[I];
    for (uint32_t g = 0; g < c->Hkv; g++) {
        const unsigned char *keep = c->keep + (size_t)g * c->per_head + c->off[I];
        uint32_t cnt = 0;
        for (uint32_t J = 0; J < nI; J++) {
            if (!keep[J]) continue;
            const uint32_t s0 = J * B; /* J < n_I: below n_keys + B, no wrap in 64 bits */
            if (s0 >= n) break;        /* t sees none of this block nor of the later ones */
            const uint32_t s1 = (uint64_t)s0 + B < n ? s0 + B : n;
            for (uint32_t s = s0; s < s1; s++) b->ent[cnt++] = s;
        }
        const uint32_t ne = cnt;
        if (c->p->correct)
            for (uint32_t J = 0; J < nF; J++)
                if (!keep[J]) b->ent[cnt++] = POOLED | J;
        if (cnt == 0) { /* nothing to attend (correct = 0 only) */
            for (uint32_t r = 0; r < c->rep; r++) {
                const size_t th = (size_t)t * c->Hq + (size_t)g * c->rep + r;
                memset(c->out + th * c->Dv, 0, (size_t)c->Dv * sizeof(float));
                if (c->lse) c->lse[th] = -INFINITY;
            }
            continue;
        }
        for (uint32_t r0 = 0; r0 < c->rep; r0 += c->R) {
            const uint32_t nr = c->rep - r0 < c->R ? c->rep - r0 : c->R;
            sieve__cpu_attend_entries(&c->src, &b->ab, c->kbar + (size_t)g * c->nbk * c->D,
                                      c->vbar + (size_t)g * c->nbv * c->Dv, t, g,
                                      g * c->rep + r0, nr, b->ent, cnt, ne);
        }
    }
}

static void attend_worker(void *vc, uint32_t worker) {
    bctx *c = vc;
    wbuf *b = &c->bufs[worker];
    for (;;) {
        const uint64_t i = atomic_fetch_add(&c->next, 1);
        if (i >= c->T) break;
        attend_token(c, b, c->T - 1 - (uint32_t)i); /* the longest rows first */
    }
}

/* ---------------------------------------------------------------- entry */


/* Runs fn on min(W, units) workers from a zeroed counter. */
static void run_phase(bctx *c, uint32_t W, uint64_t units, sieve__cpu_task_fn fn) {
    const uint32_t w = units < W ? (uint32_t)units : W;
    atomic_store(&c->next, 0);
    if (w) sieve__cpu_run(w, fn, c);
}

int sieve__cpu_block_sparse_prefill(const sieve_device *dev, const sieve_bsp_params *p,
                                    const void *q, const void *keys, const void *values,
                                    float *out, float *lse, uint32_t *sel_counts,
                                    int32_t *sel_blocks, sieve_bsp_stats *stats) {
    const sieve_attn_params *a = &p->attn;
    uint32_t W = dev->threads ? dev->threads : 1;
    if (W > MAX_WORKERS) W = MAX_WORKERS;

    bctx c;
    memset(&c, 0, sizeof c);
    c.p = p;
    c.q = q;
    c.keys = keys;
    c.values = values;
    c.T = a->n_queries;
    c.Hq = a->q_heads;
    c.Hkv = a->kv_heads;
    c.D = a->head_dim;
    c.Dv = a->v_dim;
    c.rep = a->q_heads / a->kv_heads;
    c.R = c.rep < HCHUNK ? c.rep : HCHUNK;
    c.B = p->block;
    c.tiles = sieve__bsp_tiles(p);
    c.esz = sieve_dtype_size(a->dtype);
    c.scale = a->scale == 0.0f ? (float)(1.0 / sqrt((double)a->head_dim)) : a->scale;
    c.logB = logf((float)p->block);
    c.out = out;
    c.lse = lse;
    c.src.dtype = a->dtype;
    c.src.esz = c.esz;
    c.src.q = q;
    c.src.keys = keys;
    c.src.values = values;
    c.src.Hq = c.Hq;
    c.src.Hkv = c.Hkv;
    c.src.D = c.D;
    c.src.Dv = c.Dv;
    c.src.scale = c.scale;
    c.src.pooled_bias = c.logB;
    c.src.out = out;
    c.src.lse = lse;
    atomic_init(&c.next, 0);

    /* the layout: n_I, nf_I, off_I (per_head x kv_heads within int64: checked) */
    c.n_vis = malloc((size_t)c.tiles * sizeof *c.n_vis);
    c.n_full = malloc((size_t)c.tiles * sizeof *c.n_full);
    c.off = malloc((size_t)c.tiles * sizeof *c.off);
    char *mem = NULL;
    int rc = SIEVE_ENOMEM;
    if (!c.n_vis || !c.n_full || !c.off) goto done;
    for (uint32_t I = 0; I < c.tiles; I++) {
        c.n_vis[I] = sieve__bsp_visible_blocks(p, I);
        c.n_full[I] = sieve__bsp_full_blocks(p, I);
        c.off[I] = c.per_head;
        c.per_head += c.n_vis[I];
    }
    /* n_I and nf_I grow with I (the visible counts grow with t) */
    c.nbk = c.n_vis[c.tiles - 1];
    c.nbv = p->correct ? c.n_full[c.tiles - 1] : 0;
    {
        size_t nk, nv, nkeep;
        if (!sieve__mul3_size(c.Hkv, c.nbk, (size_t)c.D * sizeof(float), &nk) ||
            !sieve__mul3_size(c.Hkv, c.nbv, (size_t)c.Dv * sizeof(float), &nv) ||
            c.per_head > SIZE_MAX || !sieve__mul_size(c.Hkv, (size_t)c.per_head, &nkeep))
            goto done;
        c.kbar = malloc(nk ? nk : 1);
        c.vbar = malloc(nv ? nv : 1);
        c.keep = malloc(nkeep ? nkeep : 1);
        if (!c.kbar || !c.vbar || !c.keep) goto done;
    }
    { /* no more workers than the largest phase has units */
        uint64_t units = c.T;
        if ((uint64_t)c.tiles * c.Hkv > units) units = (uint64_t)c.tiles * c.Hkv;
        if (((uint64_t)c.nbk + c.nbv) * c.Hkv > units) units = ((uint64_t)c.nbk + c.nbv) * c.Hkv;
        if (W > units) W = (uint32_t)units;
    }
    c.bufs = calloc(W, sizeof *c.bufs);
    if (!c.bufs) goto done;
    /* entries of a token: at most the last token's keys and the last tile's full blocks */
    c.nent = (size_t)sieve__attn_visible(a, c.T - 1) + c.nbv;
    {
        const size_t D = c.D, Dv = c.Dv, R = c.R, Dm = D > Dv ? D : Dv;
        const size_t rows = (size_t)(c.B < c.T ? c.B : c.T) * c.rep; /* rows of a tile */
        size_t per = 0, o_dacc, o_mean, o_stor, o_qrow, o_kbt, o_ss, o_e, o_ent, o_conv;
        sieve__cpu_attn_layout al;
        if (!sieve__cpu_region(&per, &o_dacc, Dm, sizeof(double)) ||
            !sieve__cpu_region(&per, &o_mean, Dm, sizeof(float)) ||
            !sieve__cpu_region(&per, &o_stor, Dm, c.esz) ||
            !sieve__cpu_region(&per, &o_qrow, D, sizeof(float)) ||
            !sieve__cpu_region(&per, &o_kbt, D, (size_t)c.nbk * sizeof(float)) ||
            !sieve__cpu_region(&per, &o_ss, rows, (size_t)c.nbk * sizeof(float)) ||
            !sieve__cpu_region(&per, &o_e, c.nbk, sizeof(double)) ||
            !sieve__cpu_region(&per, &o_ent, c.nent, sizeof(uint32_t)) ||
            !sieve__cpu_region(&per, &o_conv, Dm, sizeof(float)) ||
            !sieve__cpu_attn_reserve(&per, &al, R, D, Dv, c.nent) || per > (SIZE_MAX / 2) / W)
            goto done;
        mem = malloc(per * W + SIEVE__ALIGN);
        if (!mem) goto done;
        char *base = mem + (SIEVE__ALIGN - (uintptr_t)mem % SIEVE__ALIGN) % SIEVE__ALIGN;
        for (uint32_t i = 0; i < W; i++) {
            char *m = base + (size_t)i * per;
            wbuf *b = &c.bufs[i];
            b->dacc = (double *)(void *)(m + o_dacc);
            b->mean = (float *)(void *)(m + o_mean);
            b->stor = m + o_stor;
            b->qrow = (float *)(void *)(m + o_qrow);
            b->kbt = (float *)(void *)(m + o_kbt);
            b->ss = (float *)(void *)(m + o_ss);
            b->e = (double *)(void *)(m + o_e);
            b->ent = (uint32_t *)(void *)(m + o_ent);
            b->conv = (float *)(void *)(m + o_conv);
            sieve__cpu_attn_bind(&b->ab, &al, m);
        }
    }

    /* everything is allocated: from here on the call succeeds */
    const double t0 = sieve__now_ms();
    run_phase(&c, W, ((uint64_t)c.nbk + c.nbv) * c.Hkv, pool_worker);
    run_phase(&c, W, (uint64_t)c.tiles * c.Hkv, select_worker);
    uint64_t kept = 0, corrected = 0;
    for (uint32_t g = 0; g < c.Hkv; g++)
        for (uint32_t I = 0; I < c.tiles; I++) {
            const unsigned char *keep = c.keep + (size_t)g * c.per_head + c.off[I];
            int32_t *dst = sel_blocks ? sel_blocks + (size_t)g * c.per_head + c.off[I] : NULL;
            uint32_t cnt = 0;
            for (uint32_t J = 0; J < c.n_vis[I]; J++) {
                if (keep[J]) {
                    if (dst) dst[cnt] = (int32_t)J;
                    cnt++;
                } else if (p->correct && J < c.n_full[I]) {
                    corrected++;
                }
            }
            if (sel_counts) sel_counts[(size_t)g * c.tiles + I] = cnt;
            kept += cnt;
        }
    const double t1 = sieve__now_ms();
    run_phase(&c, W, c.T, attend_worker);
    const double t2 = sieve__now_ms();
    if (stats) {
        stats->visible_blocks = c.per_head * c.Hkv;
        stats->kept_blocks = kept;
        stats->corrected_blocks = corrected;
        stats->density = stats->visible_blocks ? (double)kept / (double)stats->visible_blocks : 0.0;
        stats->ms_select = t1 - t0;
        stats->ms_attend = t2 - t1;
    }
    rc = 0;
done:
    free(mem);
    free(c.n_vis);
    free(c.n_full);
    free(c.off);
    free(c.bufs);
    free(c.kbar);
    free(c.vbar);
    free(c.keep);
    return rc;
}

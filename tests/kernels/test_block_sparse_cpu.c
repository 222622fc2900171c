/* test_block_sparse_cpu.c: block-sparse prefill with mean correction on the CPU
 * (sieve_block_sparse_prefill, sieve_bsp_layout, sieve_bsp_select_reference,
 * sieve_bsp_attention_reference). With alpha 0 every visible block is kept and the CPU must
 * give sieve_causal_attention's CPU answer bit for bit (GQA, chunks, clipping, odd tiles,
 * block 1, a block past n_keys, every dtype); its selection must equal the float64
 * reference's except for blocks whose E_J / max E lies within 1e-4 relative of alpha (the
 * contract's precision), with the forced blocks always kept and alpha 1 keeping only the
 * forced blocks and the near-maximal ones; given its own selection its output must agree
 * with the float64 attention reference (with and without correction, on sub-ranges of
 * tokens); the references must agree with the test's own float64 computation; the mean
 * correction must be much closer to dense attention than dropping on data where pruned
 * blocks keep some mass; a row reduced to one pooled block must return that block's mean
 * value bit for bit, a row with nothing to attend 0 and -inf; the worker count must not
 * change any bit; the statistics must count the selection; the layout must match a direct
 * computation; bad arguments and bad selections must give SIEVE_EINVAL and leave every
 * output alone.
 * Must not: build expected values with the code under test (the layout, the forced blocks,
 * the pooled rows and the float64 selection and attention are computed here, by other
 * means: per-token loops over the definitions).
 *
 * The tolerance of the CPU against the float64 attention reference (same selection):
 *     |out32 - out64| <= 1e-5 + 1e-5 max|v|,   |lse32 - lse64| <= 1e-5 (1 + |lse64|)
 * with max|v| the largest stored |value|. The CPU sums at most a few hundred float32 terms
 * of scores below about 10 in magnitude here, so its error is a few 1e-7 relative to the
 * values (the derivation of test_attention_cpu.c: (D + 4) u |scale| sum|q k| per logit,
 * (2n + 8) u for the sums, u = 2^-24); 1e-5 leaves a wide margin while still catching a
 * wrong term (a missing key or a pooled row of the wrong weight moves the output by far
 * more). Near-ties of the selection are skipped as the contract allows (1e-4 relative).
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kt_util.h"
#include "sieve_kernels_internal.h"

#define SENT_BLK (-12345)     /* sel_blocks entries the call must not write */
#define SENT_CNT 0xdeadbeefu  /* sel_counts before the call */
#define TIE_REL 1e-4          /* the contract's near-tie band of the selection */

static sieve_device *open_cpu(const char *spec) {
    sieve_device *dev = NULL;
    int rc = sieve_device_open(spec, &dev);
    cr_assert_eq(rc, 0, "sieve_device_open(%s) returned %d", spec, rc);
    return dev;
}

/* ---------------------------------------------------------------- the layout, computed here */

/* Keys token t sees: min(n_keys, pos0 + t + 1) without wrapping. */
static uint32_t own_visible(const sieve_attn_params *a, uint32_t t) {
    const unsigned long long v = (unsigned long long)a->pos0 + t + 1ull;
    return v < a->n_keys ? (uint32_t)v : a->n_keys;
}

typedef struct olayout {
    uint32_t tiles;
    uint64_t per_head;
    uint32_t *nI;  /* visible blocks of each tile */
    uint32_t *nF;  /* full blocks of each tile */
    uint64_t *off; /* off_I */
} olayout;

/* From the definitions, token by token: n_I = ceil(e_I / B) with e_I the most keys a token
 * of tile I sees; nf_I = the blocks every token of the tile sees whole (the fewest keys a
 * token of the tile sees, divided by B, rounded down). */
static void olayout_make(olayout *o, const sieve_bsp_params *p) {
    const sieve_attn_params *a = &p->attn;
    const unsigned long long B = p->block;
    o->tiles = (uint32_t)((a->n_queries + B - 1) / B);
    o->nI = malloc(o->tiles * sizeof *o->nI);
    o->nF = malloc(o->tiles * sizeof *o->nF);
    o->off = malloc(o->tiles * sizeof *o->off);
    cr_assert(o->nI && o->nF && o->off);
    o->per_head = 0;
    for (uint32_t I = 0; I < o->tiles; I++) {
        unsigned long long most = 0, fewest = ~0ull;
        for (unsigned long long t = I * B; t < (I + 1) * B && t < a->n_queries; t++) {
            const unsigned long long e = own_visible(a, (uint32_t)t);
            if (e > most) most = e;
            if (e < fewest) fewest = e;
        }
        o->nI[I] = (uint32_t)((most + B - 1) / B);
        o->nF[I] = (uint32_t)(fewest / B);
        o->off[I] = o->per_head;
        o->per_head += o->nI[I];
    }
}

static void olayout_free(olayout *o) {
    free(o->nI);
    free(o->nF);
    free(o->off);
    memset(o, 0, sizeof *o);
}

/* Whether block J of tile I is kept whatever its score (not full, sink, window). */
static int own_forced(const sieve_bsp_params *p, const olayout *o, uint32_t I, uint32_t J) {
    const uint32_t nf = o->nF[I];
    if (J >= nf) return 1;
    if (J < p->sink_blocks) return 1;
    return (unsigned long long)J + p->window_blocks >= nf;
}

/* ---------------------------------------------------------------- problems */

typedef struct bprob {
    sieve_bsp_params p;
    void *q, *keys, *values; /* stored, in p.attn.dtype */
    float *qf, *kf, *vf;     /* the stored values as float32 (exact) */
} bprob;

static size_t n_q(const sieve_attn_params *a) {
    return (size_t)a->n_queries * a->q_heads * a->head_dim;
}
static size_t n_k(const sieve_attn_params *a) {
    return (size_t)a->n_keys * a->kv_heads * a->head_dim;
}
static size_t n_v(const sieve_attn_params *a) {
    return (size_t)a->n_keys * a->kv_heads * a->v_dim;
}

/* Stores float32 inputs (q, keys, values) in the dtype and keeps the stored values' float32
 * copies. */
static void prob_store(bprob *pr, const sieve_bsp_params *p, const float *q, const float *k,
                       const float *v) {
    memset(pr, 0, sizeof *pr);
    pr->p = *p;
    const sieve_attn_params *a = &p->attn;
    const size_t esz = sieve_dtype_size(a->dtype);
    pr->q = malloc(n_q(a) * esz);
    pr->keys = malloc(n_k(a) * esz);
    pr->values = malloc(n_v(a) * esz);
    pr->qf = malloc(n_q(a) * sizeof(float));
    pr->kf = malloc(n_k(a) * sizeof(float));
    pr->vf = malloc(n_v(a) * sizeof(float));
    cr_assert(pr->q && pr->keys && pr->values && pr->qf && pr->kf && pr->vf);
    sieve_convert_from_f32(a->dtype, q, pr->q, n_q(a));
    sieve_convert_to_f32(a->dtype, pr->q, pr->qf, n_q(a));
    sieve_convert_from_f32(a->dtype, k, pr->keys, n_k(a));
    sieve_convert_to_f32(a->dtype, pr->keys, pr->kf, n_k(a));
    sieve_convert_from_f32(a->dtype, v, pr->values, n_v(a));
    sieve_convert_to_f32(a->dtype, pr->values, pr->vf, n_v(a));
}

static void prob_free(bprob *pr) {
    free(pr->q);
    free(pr->keys);
    free(pr->values);
    free(pr->qf);
    free(pr->kf);
    free(pr->vf);
    memset(pr, 0, sizeof *pr);
}

/* Gaussian q, keys and values. */
static void prob_random(bprob *pr, const sieve_bsp_params *p, uint64_t seed) {
    const sieve_attn_params *a = &p->attn;
    float *q = malloc(n_q(a) * sizeof *q), *k = malloc(n_k(a) * sizeof *k);
    float *v = malloc(n_v(a) * sizeof *v);
    cr_assert(q && k && v);
    kt_rng r = {seed * 7919 + 11};
    for (size_t i = 0; i < n_q(a); i++) q[i] = kt_gauss(&r);
    for (size_t i = 0; i < n_k(a); i++) k[i] = kt_gauss(&r);
    for (size_t i = 0; i < n_v(a); i++) v[i] = 2.0f * kt_gauss(&r);
    prob_store(pr, p, q, k, v);
    free(q);
    free(k);
    free(v);
}

/* Structured data: the keys of block J (kv head g) around a centre c_gJ (N(0, 1) per
 * element) with spread kspread, the values around a block mean m_gJ (N(0, 1)) with spread
 * vspread, and the queries of each tile and head near the centres of `hot` of the tile's
 * visible blocks (qamp times their normalised sum, plus N(0, 0.3^2) noise): those blocks
 * carry most of the softmax mass, the others some. */
static void prob_structured(bprob *pr, const sieve_bsp_params *p, float kspread, float vspread,
                            float qamp, uint32_t hot, uint64_t seed) {
    const sieve_attn_params *a = &p->attn;
    const uint32_t Hq = a->q_heads, Hkv = a->kv_heads, D = a->head_dim, Dv = a->v_dim;
    const uint32_t B = p->block, rep = Hq / Hkv;
    const uint32_t nblk = (uint32_t)(((unsigned long long)a->n_keys + B - 1) / B);
    float *q = malloc(n_q(a) * sizeof *q), *k = malloc(n_k(a) * sizeof *k);
    float *v = malloc(n_v(a) * sizeof *v);
    float *cen = malloc((size_t)Hkv * nblk * D * sizeof *cen);
    float *mv = malloc((size_t)Hkv * nblk * Dv * sizeof *mv);
    float *dir = malloc((size_t)D * sizeof *dir);
    cr_assert(q && k && v && cen && mv && dir);
    kt_rng r = {seed * 104729 + 3};
    for (size_t i = 0; i < (size_t)Hkv * nblk * D; i++) cen[i] = kt_gauss(&r);
    for (size_t i = 0; i < (size_t)Hkv * nblk * Dv; i++) mv[i] = kt_gauss(&r);
    for (uint32_t s = 0; s < a->n_keys; s++)
        for (uint32_t g = 0; g < Hkv; g++) {
            const float *c = cen + ((size_t)g * nblk + s / B) * D;
            const float *m = mv + ((size_t)g * nblk + s / B) * Dv;
            for (uint32_t d = 0; d < D; d++)
                k[((size_t)s * Hkv + g) * D + d] = c[d] + kspread * kt_gauss(&r);
            for (uint32_t d = 0; d < Dv; d++)
                v[((size_t)s * Hkv + g) * Dv + d] = m[d] + vspread * kt_gauss(&r);
        }
    olayout o;
    olayout_make(&o, p);
    for (uint32_t I = 0; I < o.tiles; I++)
        for (uint32_t h = 0; h < Hq; h++) {
            const uint32_t g = h / rep;
            for (uint32_t d = 0; d < D; d++) dir[d] = 0.0f;
            for (uint32_t i = 0; i < hot; i++) {
                const uint32_t J = (uint32_t)(kt_next(&r) % o.nI[I]);
                for (uint32_t d = 0; d < D; d++)
                    dir[d] += qamp / sqrtf((float)hot) * cen[((size_t)g * nblk + J) * D + d];
            }
            for (uint32_t t = I * B; t < (I + 1) * B && t < a->n_queries; t++)
                for (uint32_t d = 0; d < D; d++)
                    q[((size_t)t * Hq + h) * D + d] = dir[d] + 0.3f * kt_gauss(&r);
        }
    olayout_free(&o);
    prob_store(pr, p, q, k, v);
    free(q);
    free(k);
    free(v);
    free(cen);
    free(mv);
    free(dir);
}

/* ---------------------------------------------------------------- running */

typedef struct bres {
    olayout o;
    float *out, *lse;
    uint32_t *counts; /* kv_heads x tiles */
    int32_t *blocks;  /* kv_heads x per_head */
    sieve_bsp_stats st;
} bres;

static void res_alloc(bres *r, const sieve_bsp_params *p) {
    memset(r, 0, sizeof *r);
    olayout_make(&r->o, p);
    const sieve_attn_params *a = &p->attn;
    const size_t th = (size_t)a->n_queries * a->q_heads;
    r->out = malloc(th * a->v_dim * sizeof *r->out);
    r->lse = malloc(th * sizeof *r->lse);
    r->counts = malloc((size_t)a->kv_heads * r->o.tiles * sizeof *r->counts);
    r->blocks = malloc((size_t)a->kv_heads * r->o.per_head * sizeof *r->blocks);
    cr_assert(r->out && r->lse && r->counts && r->blocks);
    memset(r->out, 0xa5, th * a->v_dim * sizeof *r->out); /* the call must overwrite them */
    memset(r->lse, 0xa5, th * sizeof *r->lse);
    for (size_t i = 0; i < (size_t)a->kv_heads * r->o.tiles; i++) r->counts[i] = SENT_CNT;
    for (size_t i = 0; i < (size_t)a->kv_heads * r->o.per_head; i++) r->blocks[i] = SENT_BLK;
    memset(&r->st, 0xa5, sizeof r->st);
}

static void res_free(bres *r) {
    olayout_free(&r->o);
    free(r->out);
    free(r->lse);
    free(r->counts);
    free(r->blocks);
    memset(r, 0, sizeof *r);
}

/* Runs the CPU on pr with p (pr->p but for the selection knobs) into a fresh result. */
static void run_bsp(sieve_device *dev, const bprob *pr, const sieve_bsp_params *p, bres *r,
                    const char *what) {
    res_alloc(r, p);
    int rc = sieve_block_sparse_prefill(dev, p, pr->q, pr->keys, pr->values, NULL, 0, r->out,
                                        r->lse, r->counts, r->blocks, &r->st);
    cr_assert_eq(rc, 0, "%s: sieve_block_sparse_prefill returned %d (%s)", what, rc,
                 sieve_strerror(rc));
}

/* Whether the selection (counts, blocks in r's layout) keeps block J of tile I, kv head g. */
static int sel_has(const bres *r, const uint32_t *counts, const int32_t *blocks, uint32_t g,
                   uint32_t I, uint32_t J) {
    const uint32_t c = counts[(size_t)g * r->o.tiles + I];
    const int32_t *b = blocks + (size_t)g * r->o.per_head + r->o.off[I];
    for (uint32_t k = 0; k < c; k++)
        if (b[k] == (int32_t)J) return 1;
    return 0;
}

/* Asserts the selection's shape: counts within n_I, entries strictly ascending and visible,
 * the forced blocks present, the entries past each count still SENT_BLK (when sentinels is
 * nonzero). */
static void check_sel_shape(const sieve_bsp_params *p, const bres *r, const uint32_t *counts,
                            const int32_t *blocks, int sentinels, const char *what) {
    for (uint32_t g = 0; g < p->attn.kv_heads; g++)
        for (uint32_t I = 0; I < r->o.tiles; I++) {
            const uint32_t c = counts[(size_t)g * r->o.tiles + I], nI = r->o.nI[I];
            const int32_t *b = blocks + (size_t)g * r->o.per_head + r->o.off[I];
            cr_assert(c >= 1 && c <= nI, "%s: head %u tile %u: count %u of %u visible", what, g,
                      I, c, nI);
            for (uint32_t k = 0; k < c; k++) {
                cr_assert(b[k] >= 0 && (uint32_t)b[k] < nI, "%s: head %u tile %u entry %u: %d",
                          what, g, I, k, b[k]);
                cr_assert(k == 0 || b[k] > b[k - 1], "%s: head %u tile %u: %d after %d", what, g,
                          I, b[k], b[k - 1]);
            }
            for (uint32_t k = c; sentinels && k < nI; k++)
                cr_assert_eq(b[k], SENT_BLK, "%s: head %u tile %u: entry %u past the count %u "
                             "written (%d)", what, g, I, k, c, b[k]);
            for (uint32_t J = 0; J < nI; J++)
                if (own_forced(p, &r->o, I, J))
                    cr_assert(sel_has(r, counts, blocks, g, I, J),
                              "%s: head %u tile %u: forced block %u (nf %u) missing", what, g, I,
                              J, r->o.nF[I]);
        }
}

/* The largest stored |value|. */
static double max_abs_value(const bprob *pr) {
    double m = 0.0;
    for (size_t i = 0; i < n_v(&pr->p.attn); i++) m = fmax(m, fabs((double)pr->vf[i]));
    return m;
}

/* Asserts the CPU's rows t_begin .. t_begin + t_count - 1 (out, lse of the whole call)
 * within the file comment's tolerance of the reference's (rout, rlse: t_count rows). */
static void check_rows(const bprob *pr, const float *out, const float *lse, const double *rout,
                       const double *rlse, uint32_t t_begin, uint32_t t_count,
                       const char *what) {
    const sieve_attn_params *a = &pr->p.attn;
    const uint32_t Hq = a->q_heads, Dv = a->v_dim;
    const double vmax = max_abs_value(pr);
    for (uint32_t t = 0; t < t_count; t++)
        for (uint32_t h = 0; h < Hq; h++) {
            const size_t th = ((size_t)t_begin + t) * Hq + h, rh = (size_t)t * Hq + h;
            if (isinf(rlse[rh])) {
                cr_assert(rlse[rh] < 0 && isinf(lse[th]) && lse[th] < 0,
                          "%s: token %u head %u: lse %g, reference %g", what, t_begin + t, h,
                          lse[th], rlse[rh]);
            } else {
                cr_assert(fabs((double)lse[th] - rlse[rh]) <= 1e-5 * (1.0 + fabs(rlse[rh])),
                          "%s: token %u head %u: lse %.9g, reference %.17g", what, t_begin + t,
                          h, lse[th], rlse[rh]);
            }
            for (uint32_t v = 0; v < Dv; v++) {
                const double got = out[th * Dv + v], want = rout[rh * Dv + v];
                cr_assert(fabs(got - want) <= 1e-5 + 1e-5 * vmax,
                          "%s: token %u head %u out[%u] %.9g, reference %.17g (max|v| %g)", what,
                          t_begin + t, h, v, got, want, vmax);
            }
        }
}

/* ---------------------------------------------------------------- the test's own float64 */

/* The pooled row of block J, kv head g, of rows (float32 copies of the stored rows,
 * n_keys x kv_heads x dim) into f (dim floats): the mean in double, rounded to float, to the
 * dtype and back. */
static void own_pool(const sieve_bsp_params *p, const float *rows, uint32_t dim, uint32_t g,
                     uint32_t J, float *f) {
    const sieve_attn_params *a = &p->attn;
    const unsigned long long s0 = (unsigned long long)J * p->block;
    unsigned long long s1 = s0 + p->block;
    if (s1 > a->n_keys) s1 = a->n_keys;
    uint16_t st[256];
    cr_assert_leq(dim, 256u);
    for (uint32_t d = 0; d < dim; d++) {
        double sum = 0.0;
        for (unsigned long long s = s0; s < s1; s++)
            sum += (double)rows[((size_t)s * a->kv_heads + g) * dim + d];
        f[d] = (float)(sum / (double)(s1 - s0));
    }
    if (a->dtype != SIEVE_DTYPE_F32) { /* round to the storage dtype */
        sieve_convert_from_f32(a->dtype, f, st, dim);
        sieve_convert_to_f32(a->dtype, st, f, dim);
    }
}

static double own_scale(const sieve_attn_params *a) {
    return a->scale == 0.0f ? 1.0 / sqrt((double)a->head_dim) : (double)a->scale;
}

static double own_dot(const float *x, const float *y, uint32_t n) {
    double s = 0.0;
    for (uint32_t i = 0; i < n; i++) s += (double)x[i] * y[i];
    return s;
}

/* E_J / max E for every visible block of tile I, kv head g (ratio: n_I doubles). */
static void own_ratio(const bprob *pr, const olayout *o, uint32_t g, uint32_t I, double *ratio) {
    const sieve_bsp_params *p = &pr->p;
    const sieve_attn_params *a = &p->attn;
    const uint32_t Hq = a->q_heads, D = a->head_dim, rep = Hq / a->kv_heads, nI = o->nI[I];
    const double scale = own_scale(a);
    float kb[256];
    cr_assert_leq(D, 256u);
    double M = -INFINITY;
    for (int pass = 0; pass < 2; pass++) { /* the maximum, then the sums */
        for (uint32_t J = 0; J < nI; J++) {
            own_pool(p, pr->kf, D, g, J, kb);
            double e = 0.0;
            for (uint32_t t = I * p->block; t < (I + 1) * p->block && t < a->n_queries; t++)
                for (uint32_t h = g * rep; h < (g + 1) * rep; h++) {
                    const double x = scale * own_dot(pr->qf + ((size_t)t * Hq + h) * D, kb, D);
                    if (pass == 0) M = fmax(M, x);
                    else e += exp(x - M);
                }
            if (pass == 1) ratio[J] = e;
        }
    }
    double mx = 0.0;
    for (uint32_t J = 0; J < nI; J++) mx = fmax(mx, ratio[J]);
    for (uint32_t J = 0; J < nI; J++) ratio[J] /= mx;
}

/* The float64 attention of head h of token t given the kept flags of its tile (kept: n_I
 * bytes), the formula of the contract; returns lse (out: v_dim doubles). */
static double own_attend(const bprob *pr, const olayout *o, const unsigned char *kept,
                         uint32_t t, uint32_t h, double *out) {
    const sieve_bsp_params *p = &pr->p;
    const sieve_attn_params *a = &p->attn;
    const uint32_t Hq = a->q_heads, Hkv = a->kv_heads, D = a->head_dim, Dv = a->v_dim;
    const uint32_t g = h / (Hq / Hkv), I = t / p->block, n = own_visible(a, t);
    const double scale = own_scale(a);
    const float *qh = pr->qf + ((size_t)t * Hq + h) * D;
    float kb[256], vb[256];
    cr_assert(D <= 256 && Dv <= 256);
    /* the maximum logit first */
    double m = -INFINITY;
    for (uint32_t s = 0; s < n; s++)
        if (kept[s / p->block])
            m = fmax(m, scale * own_dot(qh, pr->kf + ((size_t)s * Hkv + g) * D, D));
    for (uint32_t J = 0; p->correct && J < o->nF[I]; J++)
        if (!kept[J]) {
            own_pool(p, pr->kf, D, g, J, kb);
            m = fmax(m, scale * own_dot(qh, kb, D) + log((double)p->block));
        }
    for (uint32_t v = 0; v < Dv; v++) out[v] = 0.0;
    if (m == -INFINITY) return -INFINITY;
    double den = 0.0;
    for (uint32_t s = 0; s < n; s++) {
        if (!kept[s / p->block]) continue;
        const double w = exp(scale * own_dot(qh, pr->kf + ((size_t)s * Hkv + g) * D, D) - m);
        den += w;
        for (uint32_t v = 0; v < Dv; v++) out[v] += w * pr->vf[((size_t)s * Hkv + g) * Dv + v];
    }
    for (uint32_t J = 0; p->correct && J < o->nF[I]; J++) {
        if (kept[J]) continue;
        own_pool(p, pr->kf, D, g, J, kb);
        own_pool(p, pr->vf, Dv, g, J, vb);
        const double w = (double)p->block * exp(scale * own_dot(qh, kb, D) - m);
        den += w;
        for (uint32_t v = 0; v < Dv; v++) out[v] += w * vb[v];
    }
    for (uint32_t v = 0; v < Dv; v++) out[v] /= den;
    return m + log(den);
}

/* ---------------------------------------------------------------- layout */

Test(bsp_layout, direct_computation) {
    /* T, L, pos0, block */
    const uint32_t shapes[][4] = {
        {100, 100, 0, 16}, {50, 200, 37, 16}, {30, 50, 40, 8},  {70, 70, 0, 32},
        {20, 20, 0, 1},    {40, 60, 20, 128}, {5, 7, 1000, 3},  {33, 1000, 0, 7},
        {1, 1, 0, 64},     {64, 64, 0, 64},   {65, 300, 235, 64},
    };
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        sieve_bsp_params p;
        sieve_bsp_params_init(&p, SIEVE_DTYPE_F16, shapes[si][0], 4, 2, 8, 8, shapes[si][1]);
        p.attn.pos0 = shapes[si][2];
        p.block = shapes[si][3];
        olayout o;
        olayout_make(&o, &p);
        uint32_t tiles = 0;
        uint64_t per_head = 0;
        uint32_t *nb = malloc((o.tiles + 1) * sizeof *nb);
        cr_assert_not_null(nb);
        nb[o.tiles] = 777u; /* past the tiles: left alone */
        cr_assert_eq(sieve_bsp_layout(&p, &tiles, &per_head, nb), 0);
        cr_assert_eq(tiles, o.tiles, "shape %zu: tiles %u, want %u", si, tiles, o.tiles);
        cr_assert_eq(per_head, o.per_head, "shape %zu: per_head %llu, want %llu", si,
                     (unsigned long long)per_head, (unsigned long long)o.per_head);
        for (uint32_t I = 0; I < o.tiles; I++) {
            cr_assert_eq(nb[I], o.nI[I], "shape %zu tile %u: n_I %u, want %u", si, I, nb[I],
                         o.nI[I]);
            /* the internal helpers agree with the definitions too */
            cr_assert_eq(sieve__bsp_visible_blocks(&p, I), o.nI[I]);
            cr_assert_eq(sieve__bsp_full_blocks(&p, I), o.nF[I], "shape %zu tile %u", si, I);
            cr_assert(o.nI[I] >= 1 && o.nF[I] <= o.nI[I]);
        }
        cr_assert_eq(nb[o.tiles], 777u);
        cr_assert_eq(sieve__bsp_tiles(&p), o.tiles);
        tiles = 0;
        per_head = 0;
        cr_assert_eq(sieve_bsp_layout(&p, &tiles, &per_head, NULL), 0); /* n_blocks optional */
        cr_assert(tiles == o.tiles && per_head == o.per_head);
        free(nb);
        olayout_free(&o);
    }
    /* a hand-checked case: T 10, L 12, pos0 3, B 4: tiles {0-3, 4-7, 8-9} see 4..7, 8..11,
     * 12 (clipped) keys: n_I 2, 3, 3; nf_I 1, 2, 3 */
    sieve_bsp_params p;
    sieve_bsp_params_init(&p, SIEVE_DTYPE_F32, 10, 1, 1, 1, 1, 12);
    p.attn.pos0 = 3;
    p.block = 4;
    uint32_t tiles, nb[3];
    uint64_t per_head;
    cr_assert_eq(sieve_bsp_layout(&p, &tiles, &per_head, nb), 0);
    cr_assert(tiles == 3 && per_head == 8 && nb[0] == 2 && nb[1] == 3 && nb[2] == 3);
    cr_assert(sieve__bsp_full_blocks(&p, 0) == 1 && sieve__bsp_full_blocks(&p, 1) == 2 &&
              sieve__bsp_full_blocks(&p, 2) == 3);

    /* errors leave the outputs alone */
    tiles = 99;
    per_head = 99;
    cr_assert_eq(sieve_bsp_layout(NULL, &tiles, &per_head, NULL), SIEVE_EINVAL);
    cr_assert_eq(sieve_bsp_layout(&p, NULL, &per_head, NULL), SIEVE_EINVAL);
    cr_assert_eq(sieve_bsp_layout(&p, &tiles, NULL, NULL), SIEVE_EINVAL);
    p.block = 0;
    cr_assert_eq(sieve_bsp_layout(&p, &tiles, &per_head, nb), SIEVE_EINVAL);
    cr_assert(tiles == 99 && per_head == 99);
}

Test(bsp_layout, params_init_and_scratch) {
    sieve_bsp_params p;
    memset(&p, 0xa5, sizeof p);
    sieve_bsp_params_init(&p, SIEVE_DTYPE_BF16, 3, 8, 2, 64, 32, 1000);
    cr_assert(p.attn.dtype == SIEVE_DTYPE_BF16 && p.attn.n_queries == 3 && p.attn.q_heads == 8 &&
              p.attn.kv_heads == 2 && p.attn.head_dim == 64 && p.attn.v_dim == 32 &&
              p.attn.n_keys == 1000 && p.attn.pos0 == 0 && p.attn.scale == 0.0f);
    cr_assert(p.block == 128 && p.alpha == 0.1f && p.sink_blocks == 2 && p.window_blocks == 4 &&
              p.correct == 1);
    sieve_bsp_params_init(NULL, SIEVE_DTYPE_F32, 1, 1, 1, 1, 1, 1); /* no crash */
    sieve_device *dev = open_cpu("cpu:2");
    size_t bytes = 99;
    cr_assert_eq(sieve_bsp_scratch_size(dev, &p, &bytes), 0);
    cr_assert_eq(bytes, 0, "the CPU needs no scratch");
    bytes = 99;
    p.alpha = 2.0f;
    cr_assert_eq(sieve_bsp_scratch_size(dev, &p, &bytes), SIEVE_EINVAL);
    cr_assert_eq(bytes, 99);
    sieve_device_close(dev);
}

/* ---------------------------------------------------------------- alpha 0: dense, bit for bit */

typedef struct bshape {
    uint32_t T, Hq, Hkv, D, Dv, L, pos0, block, sink, window;
    float scale;
    const char *kind;
} bshape;

static const bshape dense_shapes[] = {
    {96, 8, 2, 24, 40, 96, 0, 16, 4, 8, 0.0f, "prefill, GQA 8/2"},
    {50, 4, 1, 16, 8, 200, 37, 16, 1, 2, -0.3f, "chunk at pos0 37"},
    {30, 6, 2, 9, 11, 50, 40, 8, 0, 0, 0.0f, "clipped at n_keys"},
    {70, 3, 3, 7, 5, 70, 0, 32, 2, 1, 0.7f, "T not a multiple of the block"},
    {20, 3, 1, 5, 6, 20, 0, 1, 4, 8, 0.0f, "block 1"},
    {40, 4, 2, 8, 8, 60, 20, 128, 4, 8, 0.0f, "block past n_keys"},
    {300, 20, 2, 16, 12, 300, 0, 64, 0, 0, 0.0f, "past one 256-key block, 10 heads/kv"},
    {25, 2, 1, 8, 4, 30, 10, 0xffffffffu, 0, 0, 0.0f, "block UINT32_MAX"},
};

static void dense_bitwise(sieve_dtype dtype) {
    sieve_device *dev = open_cpu("cpu:2");
    for (size_t si = 0; si < sizeof dense_shapes / sizeof dense_shapes[0]; si++) {
        const bshape *sh = &dense_shapes[si];
        sieve_bsp_params p;
        sieve_bsp_params_init(&p, dtype, sh->T, sh->Hq, sh->Hkv, sh->D, sh->Dv, sh->L);
        p.attn.pos0 = sh->pos0;
        p.attn.scale = sh->scale;
        p.block = sh->block;
        p.sink_blocks = sh->sink;
        p.window_blocks = sh->window;
        p.alpha = 0.0f;
        bprob pr;
        prob_random(&pr, &p, 10 * si + dtype);
        char what[160];
        snprintf(what, sizeof what, "%s %s (T=%u Hq=%u Hkv=%u L=%u pos0=%u B=%u)",
                 sieve_dtype_name(dtype), sh->kind, sh->T, sh->Hq, sh->Hkv, sh->L, sh->pos0,
                 sh->block);
        const size_t th = (size_t)sh->T * sh->Hq;
        float *dout = malloc(th * sh->Dv * sizeof *dout), *dlse = malloc(th * sizeof *dlse);
        cr_assert(dout && dlse);
        cr_assert_eq(sieve_causal_attention(dev, &p.attn, pr.q, pr.keys, pr.values, NULL, 0, dout,
                                            dlse, NULL),
                     0, "%s: dense", what);
        for (int correct = 0; correct <= 1; correct++) {
            p.correct = correct;
            bres r;
            run_bsp(dev, &pr, &p, &r, what);
            for (size_t i = 0; i < th * sh->Dv; i++)
                cr_assert_eq(memcmp(&r.out[i], &dout[i], sizeof(float)), 0,
                             "%s correct %d: token %zu head %zu out[%zu] %.9g, dense %.9g", what,
                             correct, i / sh->Dv / sh->Hq, i / sh->Dv % sh->Hq, i % sh->Dv,
                             r.out[i], dout[i]);
            for (size_t i = 0; i < th; i++)
                cr_assert_eq(memcmp(&r.lse[i], &dlse[i], sizeof(float)), 0,
                             "%s correct %d: token %zu head %zu lse %.9g, dense %.9g", what,
                             correct, i / sh->Hq, i % sh->Hq, r.lse[i], dlse[i]);
            /* every visible block kept, nothing corrected */
            for (uint32_t g = 0; g < sh->Hkv; g++)
                for (uint32_t I = 0; I < r.o.tiles; I++) {
                    cr_assert_eq(r.counts[(size_t)g * r.o.tiles + I], r.o.nI[I], "%s tile %u", what,
                                 I);
                    for (uint32_t J = 0; J < r.o.nI[I]; J++)
                        cr_assert_eq(r.blocks[(size_t)g * r.o.per_head + r.o.off[I] + J],
                                     (int32_t)J);
                }
            const uint64_t vis = (uint64_t)sh->Hkv * r.o.per_head;
            cr_assert(r.st.visible_blocks == vis && r.st.kept_blocks == vis &&
                          r.st.corrected_blocks == 0 && r.st.density == 1.0,
                      "%s: stats visible %llu kept %llu corrected %llu density %g", what,
                      (unsigned long long)r.st.visible_blocks,
                      (unsigned long long)r.st.kept_blocks,
                      (unsigned long long)r.st.corrected_blocks, r.st.density);
            res_free(&r);
        }
        free(dout);
        free(dlse);
        prob_free(&pr);
    }
    sieve_device_close(dev);
}

Test(bsp_dense, alpha0_bitwise_f32) { dense_bitwise(SIEVE_DTYPE_F32); }
Test(bsp_dense, alpha0_bitwise_f16) { dense_bitwise(SIEVE_DTYPE_F16); }
Test(bsp_dense, alpha0_bitwise_bf16) { dense_bitwise(SIEVE_DTYPE_BF16); }

/* ---------------------------------------------------------------- selection vs reference */

typedef struct sshape {
    uint32_t T, Hq, Hkv, D, Dv, L, pos0, block, sink, window;
    const char *kind;
} sshape;

static const sshape sel_shapes[] = {
    {192, 4, 2, 16, 8, 192, 0, 16, 1, 1, "prefill"},
    {64, 6, 2, 16, 8, 320, 250, 16, 1, 2, "chunk at pos0 250"},
    {100, 2, 1, 32, 8, 260, 200, 8, 2, 0, "clipped, block 8"},
};

/* The CPU's selection against the reference's at several alphas: equal but for blocks whose
 * ratio lies within TIE_REL of alpha (counted: at most 2% of the compared ones), the forced
 * blocks kept by both, the reference consistent with its own ratios (in [0, 1], a 1 in every
 * tile); a block of (near-)maximal E kept in every tile; at alpha 1 nothing but the forced
 * and the near-maximal blocks kept. Pruning must happen from alpha 0.1 on (else the
 * comparison says little). */
static void select_vs_reference(sieve_dtype dtype) {
    sieve_device *dev = open_cpu("cpu:2");
    const float alphas[] = {0.02f, 0.1f, 0.3f, 0.6f, 1.0f};
    for (size_t si = 0; si < sizeof sel_shapes / sizeof sel_shapes[0]; si++) {
        const sshape *sh = &sel_shapes[si];
        sieve_bsp_params p;
        sieve_bsp_params_init(&p, dtype, sh->T, sh->Hq, sh->Hkv, sh->D, sh->Dv, sh->L);
        p.attn.pos0 = sh->pos0;
        p.block = sh->block;
        p.sink_blocks = sh->sink;
        p.window_blocks = sh->window;
        bprob pr;
        prob_structured(&pr, &p, 0.5f, 0.3f, 1.0f, 2, 20 * si + dtype);
        for (size_t ai = 0; ai < sizeof alphas / sizeof alphas[0]; ai++) {
            p.alpha = alphas[ai];
            char what[128];
            snprintf(what, sizeof what, "%s %s alpha %g", sieve_dtype_name(dtype), sh->kind,
                     (double)p.alpha);
            bres r;
            run_bsp(dev, &pr, &p, &r, what);
            check_sel_shape(&p, &r, r.counts, r.blocks, 1, what);
            const size_t nc = (size_t)sh->Hkv * r.o.tiles, nb = (size_t)sh->Hkv * r.o.per_head;
            uint32_t *rc_ = malloc(nc * sizeof *rc_);
            int32_t *rb = malloc(nb * sizeof *rb);
            double *ratio = malloc(nb * sizeof *ratio);
            cr_assert(rc_ && rb && ratio);
            for (size_t i = 0; i < nb; i++) rb[i] = SENT_BLK;
            cr_assert_eq(sieve_bsp_select_reference(&p, pr.q, pr.keys, rc_, rb, ratio), 0);
            check_sel_shape(&p, &r, rc_, rb, 1, "reference");
            uint64_t compared = 0, skipped = 0, pruned = 0;
            for (uint32_t g = 0; g < sh->Hkv; g++)
                for (uint32_t I = 0; I < r.o.tiles; I++) {
                    const double *ra = ratio + (size_t)g * r.o.per_head + r.o.off[I];
                    int near_max_kept = 0, has_one = 0;
                    for (uint32_t J = 0; J < r.o.nI[I]; J++) {
                        const int cpu = sel_has(&r, r.counts, r.blocks, g, I, J);
                        const int ref = sel_has(&r, rc_, rb, g, I, J);
                        cr_assert(ra[J] >= 0.0 && ra[J] <= 1.0, "%s: ratio %g", what, ra[J]);
                        if (ra[J] == 1.0) has_one = 1;
                        if (cpu && ra[J] >= 1.0 - TIE_REL) near_max_kept = 1;
                        if (own_forced(&p, &r.o, I, J)) continue; /* checked above */
                        if (!cpu) pruned++;
                        if (p.alpha == 1.0f && ra[J] == 1.0) continue; /* the maximum: on the
                                                                          threshold itself */
                        if (fabs(ra[J] - p.alpha) <= TIE_REL * p.alpha) {
                            skipped++;
                            continue;
                        }
                        compared++;
                        cr_assert_eq(cpu, ref,
                                     "%s: head %u tile %u block %u: cpu %d, reference %d "
                                     "(ratio %.9g)",
                                     what, g, I, J, cpu, ref, ra[J]);
                        cr_assert_eq(ref, ra[J] >= p.alpha, "%s: reference %d, ratio %.17g", what,
                                     ref, ra[J]);
                        if (p.alpha == 1.0f)
                            cr_assert(!cpu || ra[J] >= 1.0 - TIE_REL,
                                      "%s: head %u tile %u block %u kept at ratio %.9g", what, g,
                                      I, J, ra[J]);
                    }
                    cr_assert(has_one, "%s: head %u tile %u: no block of ratio 1", what, g, I);
                    cr_assert(near_max_kept,
                              "%s: head %u tile %u: no block of (near-)maximal E kept", what, g,
                              I);
                }
            if (getenv("KT_VERBOSE"))
                fprintf(stderr, "%-50s compared %llu skipped %llu pruned %llu density %.3f\n",
                        what, (unsigned long long)compared, (unsigned long long)skipped,
                        (unsigned long long)pruned, r.st.density);
            cr_assert(compared >= 40 && skipped * 50 <= compared,
                      "%s: %llu blocks compared, %llu skipped as near-ties", what,
                      (unsigned long long)compared, (unsigned long long)skipped);
            if (p.alpha >= 0.1f)
                cr_assert(pruned > 0, "%s: nothing pruned (the test would be vacuous)", what);
            free(rc_);
            free(rb);
            free(ratio);
            res_free(&r);
        }
        prob_free(&pr);
    }
    sieve_device_close(dev);
}

Test(bsp_select, vs_reference_f32) { select_vs_reference(SIEVE_DTYPE_F32); }
Test(bsp_select, vs_reference_bf16) { select_vs_reference(SIEVE_DTYPE_BF16); }

/* The pooled key of a short last block (n_keys not a multiple of B) is the mean over its own
 * keys (3 here), not over B: block 6 of tile 1 (keys 48 .. 50, along the queries) has the
 * largest E, so its pooled key sets max E and with it the other blocks' ratios (about 0.1
 * here; dividing by B would make them several times larger). Over a sweep of alphas that
 * splits tile 1's blocks, the CPU must decide every block as the reference does (near-ties
 * skipped), on float32 and float16 storage. */
Test(bsp_select, short_last_block_mean) {
    sieve_device *dev = open_cpu("cpu:2");
    const sieve_dtype dts[] = {SIEVE_DTYPE_F32, SIEVE_DTYPE_F16};
    for (int di = 0; di < 2; di++) {
        const uint32_t T = 16, Hq = 2, Hkv = 1, D = 16, Dv = 4, L = 51;
        sieve_bsp_params p;
        sieve_bsp_params_init(&p, dts[di], T, Hq, Hkv, D, Dv, L);
        p.attn.pos0 = 35; /* tile 0 sees 36 .. 43 keys, tile 1 44 .. 51: blocks 0 .. 6 */
        p.block = 8;
        p.sink_blocks = 0;
        p.window_blocks = 0;
        float q[16 * 2 * 16], k[51 * 16], v[51 * 4], dir[16];
        kt_rng rng = {4242}; /* the same data on both dtypes */
        for (uint32_t d = 0; d < D; d++) dir[d] = kt_gauss(&rng);
        for (uint32_t i = 0; i < T * Hq * D; i++) q[i] = 0.5f * dir[i % D] + 0.3f * kt_gauss(&rng);
        for (uint32_t s = 0; s < L; s++)
            for (uint32_t d = 0; d < D; d++)
                k[s * D + d] = s >= 48 ? 1.5f * dir[d] + 0.3f * kt_gauss(&rng) : kt_gauss(&rng);
        for (uint32_t i = 0; i < L * Dv; i++) v[i] = kt_gauss(&rng);
        bprob pr;
        prob_store(&pr, &p, q, k, v);
        uint64_t compared = 0, skipped = 0, splits = 0;
        for (int ai = 0; ai < 24; ai++) {
            p.alpha = (float)(0.07 * pow(1.04, ai)); /* 0.07 .. 0.18 */
            char what[64];
            snprintf(what, sizeof what, "%s alpha %g", sieve_dtype_name(p.attn.dtype),
                     (double)p.alpha);
            bres r;
            run_bsp(dev, &pr, &p, &r, what);
            cr_assert(r.o.tiles == 2 && r.o.nI[1] == 7 && r.o.nF[1] == 5, "%s: layout", what);
            uint32_t rc_[2];
            int32_t rb[13];
            double ratio[13];
            cr_assert_eq(sieve_bsp_select_reference(&p, pr.q, pr.keys, rc_, rb, ratio), 0);
            cr_assert(ratio[r.o.off[1] + 6] == 1.0, "%s: block 6 of tile 1 has ratio %g", what,
                      ratio[r.o.off[1] + 6]);
            int kept1 = 0, pruned1 = 0;
            for (uint32_t I = 0; I < 2; I++)
                for (uint32_t J = 0; J < r.o.nI[I]; J++) {
                    const double ra = ratio[r.o.off[I] + J];
                    if (own_forced(&p, &r.o, I, J) || ra == 1.0) continue;
                    if (fabs(ra - p.alpha) <= TIE_REL * p.alpha) {
                        skipped++;
                        continue;
                    }
                    compared++;
                    const int cpu = sel_has(&r, r.counts, r.blocks, 0, I, J);
                    cr_assert_eq(cpu, sel_has(&r, rc_, rb, 0, I, J),
                                 "%s: tile %u block %u (ratio %.9g)", what, I, J, ra);
                    if (I == 1) {
                        kept1 += cpu;
                        pruned1 += !cpu;
                    }
                }
            splits += kept1 > 0 && pruned1 > 0; /* this alpha splits tile 1 */
            res_free(&r);
        }
        cr_assert(compared >= 100 && skipped * 50 <= compared && splits >= 5,
                  "%s: compared %llu, skipped %llu, alphas splitting tile 1: %llu",
                  sieve_dtype_name(p.attn.dtype), (unsigned long long)compared,
                  (unsigned long long)skipped, (unsigned long long)splits);
        prob_free(&pr);
    }
    sieve_device_close(dev);
}

/* ---------------------------------------------------------------- the references vs own */

/* A tile of 32,768 rows (4,096 tokens x 8 heads) whose block 1 scores 0.1 of block 0 (to
 * float rounding): a float32 sum of the rows' exponentials drifts by about 3e-4 relative,
 * past the contract's 1e-4 band; the CPU sums in double, so at alpha 2e-4 relative on
 * either side of the ratio it decides as the float64 reference does. */
Test(bsp_select, large_tile_precision) {
    const uint32_t T = 4096, Hq = 8, L = 12288, B = 4096;
    float *q = malloc((size_t)T * Hq * sizeof *q), *k = malloc((size_t)L * sizeof *k),
          *v = malloc((size_t)L * sizeof *v), *out = malloc((size_t)T * Hq * sizeof *out);
    cr_assert(q && k && v && out);
    for (size_t i = 0; i < (size_t)T * Hq; i++) q[i] = 1.0f;
    for (uint32_t s = 0; s < L; s++) {
        k[s] = s < B ? 0.0f : s < 2 * B ? logf(0.1f) : -10.0f;
        v[s] = (float)(s / B);
    }
    sieve_bsp_params p;
    sieve_bsp_params_init(&p, SIEVE_DTYPE_F32, T, Hq, 1, 1, 1, L);
    p.attn.pos0 = 8192;
    p.attn.scale = 1.0f;
    p.block = B;
    p.sink_blocks = 0;
    p.window_blocks = 0;
    p.correct = 0;
    uint32_t tiles = 0;
    uint64_t per_head = 0;
    cr_assert_eq(sieve_bsp_layout(&p, &tiles, &per_head, NULL), 0);
    cr_assert_eq(tiles, 1);
    cr_assert_eq(per_head, 3); /* blocks 0 and 1 full, block 2 the diagonal */
    uint32_t rc_[1], cc[1];
    int32_t rb[3], cb[3];
    double ratio[3];
    cr_assert_eq(sieve_bsp_select_reference(&p, q, k, rc_, rb, ratio), 0);
    cr_assert(fabs(ratio[1] - 0.1) < 1e-6, "block 1's ratio %.9g", ratio[1]);
    sieve_device *dev = open_cpu("cpu:2");
    for (int side = -1; side <= 1; side += 2) {
        p.alpha = (float)(ratio[1] * (1.0 - side * 2e-4)); /* side 1: below the ratio, kept */
        cr_assert_eq(sieve_bsp_select_reference(&p, q, k, rc_, rb, ratio), 0);
        cr_assert_eq(sieve_block_sparse_prefill(dev, &p, q, k, v, NULL, 0, out, NULL, cc, cb,
                                                NULL),
                     0);
        const int ref1 = rc_[0] >= 2 && rb[1] == 1, cpu1 = cc[0] >= 2 && cb[1] == 1;
        cr_assert_eq(ref1, side > 0, "alpha %.9g: the reference %s block 1", (double)p.alpha,
                     ref1 ? "keeps" : "drops");
        cr_assert_eq(cpu1, ref1, "alpha %.9g (ratio %.9g): CPU %s block 1, reference %s",
                     (double)p.alpha, ratio[1], cpu1 ? "keeps" : "drops",
                     ref1 ? "keeps" : "drops");
    }
    sieve_device_close(dev);
    free(q);
    free(k);
    free(v);
    free(out);
}

/* On small problems the references agree with the test's own float64: the ratios, the
 * selection (away from near-ties of 1e-9), and the attention given that selection with and
 * without correction, on the whole range and on a sub-range. */
Test(bsp_reference, own_float64) {
    const sieve_dtype dts[] = {SIEVE_DTYPE_F32, SIEVE_DTYPE_F16, SIEVE_DTYPE_BF16};
    for (int di = 0; di < 3; di++) {
        sieve_bsp_params p;
        sieve_bsp_params_init(&p, dts[di], 40, 4, 2, 8, 5, 70);
        p.attn.pos0 = 27;
        p.attn.scale = di == 1 ? 0.6f : 0.0f;
        p.block = 8;
        p.sink_blocks = 1;
        p.window_blocks = 1;
        p.alpha = 0.25f;
        bprob pr;
        prob_structured(&pr, &p, 0.6f, 0.5f, 0.4f, 2, 300 + di);
        olayout o;
        olayout_make(&o, &p);
        const uint32_t Hkv = p.attn.kv_heads, Hq = p.attn.q_heads, Dv = p.attn.v_dim;
        const size_t nb = (size_t)Hkv * o.per_head;
        uint32_t *cnt = malloc((size_t)Hkv * o.tiles * sizeof *cnt);
        int32_t *blk = malloc(nb * sizeof *blk);
        double *ratio = malloc(nb * sizeof *ratio), *own = malloc(64 * sizeof *own);
        unsigned char *kept = malloc(64);
        cr_assert(cnt && blk && ratio && own && kept);
        cr_assert_eq(sieve_bsp_select_reference(&p, pr.q, pr.keys, cnt, blk, ratio), 0);
        uint64_t pruned = 0;
        for (uint32_t g = 0; g < Hkv; g++)
            for (uint32_t I = 0; I < o.tiles; I++) {
                cr_assert_leq(o.nI[I], 64u);
                own_ratio(&pr, &o, g, I, own);
                memset(kept, 0, 64);
                const int32_t *b = blk + (size_t)g * o.per_head + o.off[I];
                for (uint32_t k = 0; k < cnt[(size_t)g * o.tiles + I]; k++) kept[b[k]] = 1;
                for (uint32_t J = 0; J < o.nI[I]; J++) {
                    const double rr = ratio[(size_t)g * o.per_head + o.off[I] + J];
                    cr_assert(fabs(rr - own[J]) <= 1e-12 + 1e-10 * own[J],
                              "%s head %u tile %u block %u: reference ratio %.17g, own %.17g",
                              sieve_dtype_name(p.attn.dtype), g, I, J, rr, own[J]);
                    const int want = own_forced(&p, &o, I, J) || own[J] >= p.alpha;
                    if (fabs(own[J] - p.alpha) > 1e-9)
                        cr_assert_eq(kept[J], want, "head %u tile %u block %u (ratio %g)", g, I,
                                     J, own[J]);
                    pruned += !kept[J];
                }
            }
        cr_assert(pruned > 0, "nothing pruned");
        /* the attention given that selection */
        const uint32_t T = p.attn.n_queries;
        double *rout = malloc((size_t)T * Hq * Dv * sizeof *rout);
        double *rlse = malloc((size_t)T * Hq * sizeof *rlse);
        double *sout = malloc((size_t)T * Hq * Dv * sizeof *sout);
        double *slse = malloc((size_t)T * Hq * sizeof *slse);
        cr_assert(rout && rlse && sout && slse);
        for (int correct = 0; correct <= 1; correct++) {
            p.correct = correct;
            pr.p.correct = correct;
            cr_assert_eq(sieve_bsp_attention_reference(&p, pr.q, pr.keys, pr.values, cnt, blk, 0,
                                                       T, rout, rlse),
                         0);
            for (uint32_t t = 0; t < T; t++) {
                const uint32_t I = t / p.block;
                for (uint32_t h = 0; h < Hq; h++) {
                    const uint32_t g = h / (Hq / Hkv);
                    memset(kept, 0, 64);
                    const int32_t *b = blk + (size_t)g * o.per_head + o.off[I];
                    for (uint32_t k = 0; k < cnt[(size_t)g * o.tiles + I]; k++) kept[b[k]] = 1;
                    const double l = own_attend(&pr, &o, kept, t, h, own);
                    const size_t th = (size_t)t * Hq + h;
                    cr_assert(fabs(rlse[th] - l) <= 1e-12 * (1.0 + fabs(l)) ||
                                  (isinf(l) && rlse[th] == l),
                              "correct %d token %u head %u: reference lse %.17g, own %.17g",
                              correct, t, h, rlse[th], l);
                    for (uint32_t v = 0; v < Dv; v++)
                        cr_assert(fabs(rout[th * Dv + v] - own[v]) <= 1e-12 * (1.0 + fabs(own[v])),
                                  "correct %d token %u head %u: reference out[%u] %.17g, own "
                                  "%.17g",
                                  correct, t, h, v, rout[th * Dv + v], own[v]);
                }
            }
            /* a sub-range gives the same rows, bit for bit */
            const uint32_t tb = 13, tc = 17;
            for (size_t i = 0; i < (size_t)T * Hq * Dv; i++) sout[i] = 555.0;
            cr_assert_eq(sieve_bsp_attention_reference(&p, pr.q, pr.keys, pr.values, cnt, blk,
                                                       tb, tc, sout, slse),
                         0);
            const size_t ro = (size_t)tc * Hq * Dv;
            cr_assert(memcmp(sout, rout + (size_t)tb * Hq * Dv, ro * sizeof *sout) == 0 &&
                          memcmp(slse, rlse + (size_t)tb * Hq, (size_t)tc * Hq * sizeof *slse) == 0,
                      "correct %d: the sub-range differs from the whole", correct);
            cr_assert(sout[(size_t)tc * Hq * Dv] == 555.0, "wrote past t_count rows");
        }
        free(rout);
        free(rlse);
        free(sout);
        free(slse);
        free(cnt);
        free(blk);
        free(ratio);
        free(own);
        free(kept);
        olayout_free(&o);
        prob_free(&pr);
    }
}

/* ---------------------------------------------------------------- attention vs reference */

static void attention_vs_reference(sieve_dtype dtype) {
    sieve_device *dev = open_cpu("cpu:2");
    const struct {
        sshape sh;
        float alpha;
    } cases[] = {
        {{160, 8, 2, 16, 12, 160, 0, 16, 1, 1, "prefill"}, 0.1f},
        {{160, 8, 2, 16, 12, 160, 0, 16, 0, 0, "prefill, no sink, no window"}, 0.5f},
        {{70, 4, 1, 24, 8, 300, 233, 32, 1, 1, "chunk at pos0 233"}, 0.2f},
        {{50, 3, 3, 8, 16, 90, 60, 8, 2, 1, "clipped"}, 0.3f},
        {{300, 2, 1, 16, 8, 300, 0, 4, 1, 1, "block 4, 300 keys"}, 0.05f},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const sshape *sh = &cases[ci].sh;
        sieve_bsp_params p;
        sieve_bsp_params_init(&p, dtype, sh->T, sh->Hq, sh->Hkv, sh->D, sh->Dv, sh->L);
        p.attn.pos0 = sh->pos0;
        p.block = sh->block;
        p.sink_blocks = sh->sink;
        p.window_blocks = sh->window;
        p.alpha = cases[ci].alpha;
        bprob pr;
        prob_structured(&pr, &p, 0.5f, 0.5f, 1.0f, 2, 40 * ci + dtype);
        for (int correct = 0; correct <= 1; correct++) {
            p.correct = correct;
            char what[128];
            snprintf(what, sizeof what, "%s %s alpha %g correct %d", sieve_dtype_name(dtype),
                     sh->kind, (double)p.alpha, correct);
            bres r;
            run_bsp(dev, &pr, &p, &r, what);
            cr_assert(r.st.kept_blocks < r.st.visible_blocks, "%s: nothing pruned", what);
            const uint32_t ranges[][2] = {
                {0, sh->T}, {13, 20}, {sh->T - 1, 1}, {sh->T / 2, sh->T - sh->T / 2}};
            for (int ri = 0; ri < 4; ri++) {
                const uint32_t tb = ranges[ri][0], tc = ranges[ri][1];
                double *rout = malloc((size_t)tc * sh->Hq * sh->Dv * sizeof *rout);
                double *rlse = malloc((size_t)tc * sh->Hq * sizeof *rlse);
                cr_assert(rout && rlse);
                cr_assert_eq(sieve_bsp_attention_reference(&p, pr.q, pr.keys, pr.values, r.counts,
                                                           r.blocks, tb, tc, rout, rlse),
                             0, "%s", what);
                char w2[160];
                snprintf(w2, sizeof w2, "%s tokens %u+%u", what, tb, tc);
                check_rows(&pr, r.out, r.lse, rout, rlse, tb, tc, w2);
                free(rout);
                free(rlse);
            }
            res_free(&r);
        }
        prob_free(&pr);
    }
    sieve_device_close(dev);
}

Test(bsp_attention, vs_reference_f32) { attention_vs_reference(SIEVE_DTYPE_F32); }
Test(bsp_attention, vs_reference_f16) { attention_vs_reference(SIEVE_DTYPE_F16); }
Test(bsp_attention, vs_reference_bf16) { attention_vs_reference(SIEVE_DTYPE_BF16); }

/* ---------------------------------------------------------------- correction vs dropping */

/* On structured data (a few blocks of each tile carry most of the mass, the pruned ones
 * some), the relative L2 error against float64 dense attention of the corrected output must
 * be at most half the dropped one's (the same selection: it does not depend on correct). */
static void correction_vs_drop(sieve_dtype dtype) {
    sieve_device *dev = open_cpu("cpu:2");
    sieve_bsp_params p;
    sieve_bsp_params_init(&p, dtype, 256, 4, 2, 32, 16, 256);
    p.block = 16;
    p.sink_blocks = 1;
    p.window_blocks = 1;
    p.alpha = 0.2f;
    bprob pr;
    prob_structured(&pr, &p, 0.3f, 0.2f, 0.6f, 1, 77 + dtype);
    const uint32_t T = p.attn.n_queries, Hq = p.attn.q_heads, Dv = p.attn.v_dim;
    const size_t no = (size_t)T * Hq * Dv;
    double *dense = malloc(no * sizeof *dense);
    cr_assert_not_null(dense);
    cr_assert_eq(sieve_causal_attention_reference(&p.attn, pr.q, pr.keys, pr.values, dense, NULL),
                 0);
    double err[2];
    bres r[2];
    for (int correct = 0; correct <= 1; correct++) {
        p.correct = correct;
        run_bsp(dev, &pr, &p, &r[correct], correct ? "corrected" : "dropped");
        double num = 0.0, den = 0.0;
        for (size_t i = 0; i < no; i++) {
            const double d = (double)r[correct].out[i] - dense[i];
            num += d * d;
            den += dense[i] * dense[i];
        }
        err[correct] = sqrt(num / den);
    }
    cr_assert(memcmp(r[0].counts, r[1].counts, (size_t)p.attn.kv_heads * r[0].o.tiles * 4) == 0 &&
                  memcmp(r[0].blocks, r[1].blocks,
                         (size_t)p.attn.kv_heads * r[0].o.per_head * 4) == 0,
              "the selection depends on correct");
    fprintf(stderr,
            "bsp correction (%s, T=L=%u, B=%u, alpha %g): density %.3f, %llu of %llu blocks "
            "corrected; relative L2 error vs dense: corrected %.3e, dropped %.3e (ratio %.3f)\n",
            sieve_dtype_name(dtype), T, p.block, (double)p.alpha, r[1].st.density,
            (unsigned long long)r[1].st.corrected_blocks,
            (unsigned long long)r[1].st.visible_blocks, err[1], err[0], err[1] / err[0]);
    cr_assert(r[1].st.corrected_blocks > 0 && r[1].st.density < 0.7,
              "too little pruning: density %g", r[1].st.density);
    cr_assert(err[0] >= 1e-2, "dropping costs only %g: the pruned blocks carry no mass", err[0]);
    cr_assert(err[1] <= 0.5 * err[0], "corrected %.3e is not at most half of dropped %.3e",
              err[1], err[0]);
    res_free(&r[0]);
    res_free(&r[1]);
    free(dense);
    prob_free(&pr);
    sieve_device_close(dev);
}

Test(bsp_correction, closer_than_drop_f32) { correction_vs_drop(SIEVE_DTYPE_F32); }
Test(bsp_correction, closer_than_drop_bf16) { correction_vs_drop(SIEVE_DTYPE_BF16); }

/* ---------------------------------------------------------------- exact cases */

/* B 4, pos0 3, T 8, L 12, no sink, no window, alpha 1: token 0 sees block 0 only (keys
 * 0 .. 3), which is full for tile 0 and pruned (block 1, forced, has the larger E); tile 1
 * (tokens 4 .. 7 see 8 .. 11 keys) keeps only block 2 (forced, the largest E) and prunes the
 * full blocks 0 and 1, so token 4 sees nothing kept. With correction token 0 has one term,
 * block 0's pooled row, of weight 1: out is vbar_0 bit for bit and lse the pooled logit;
 * without it tokens 0 and 4 have nothing to attend: out 0 and lse -inf, on the CPU and the
 * reference alike. */
Test(bsp_exact, one_pooled_row_and_empty_rows) {
    sieve_device *dev = open_cpu("cpu:2");
    for (int dt = 0; dt < 3; dt++) {
        const uint32_t T = 8, Hq = 4, Hkv = 2, D = 4, Dv = 3, L = 12;
        sieve_bsp_params p;
        sieve_bsp_params_init(&p, (sieve_dtype)dt, T, Hq, Hkv, D, Dv, L);
        p.attn.pos0 = 3;
        p.block = 4;
        p.sink_blocks = 0;
        p.window_blocks = 0;
        p.alpha = 1.0f;
        float q[8 * 4 * 4], k[12 * 2 * 4], v[12 * 2 * 3];
        kt_rng rng = {99 + (uint64_t)dt};
        for (uint32_t i = 0; i < T * Hq * D; i++) /* along e0 */
            q[i] = (i % D == 0 ? 2.0f : 0.0f) + 0.1f * kt_gauss(&rng);
        for (uint32_t s = 0; s < L; s++) /* block 0 against the queries, 1 along, 2 more so */
            for (uint32_t i = 0; i < Hkv * D; i++)
                k[s * Hkv * D + i] = (i % D == 0 ? (s < 4 ? -1.0f : s < 8 ? 1.0f : 1.5f) : 0.0f) +
                                     0.1f * kt_gauss(&rng);
        for (uint32_t i = 0; i < L * Hkv * Dv; i++) v[i] = 3.0f * kt_gauss(&rng);
        bprob pr;
        prob_store(&pr, &p, q, k, v);
        const char *name = sieve_dtype_name(p.attn.dtype);
        for (int correct = 0; correct <= 1; correct++) {
            p.correct = correct;
            bres r;
            run_bsp(dev, &pr, &p, &r, name);
            for (uint32_t g = 0; g < Hkv; g++) {
                cr_assert(r.counts[g * 2] == 1 && r.blocks[g * 5] == 1, "%s: tile 0 of head %u",
                          name, g);
                cr_assert(r.counts[g * 2 + 1] == 1 && r.blocks[g * 5 + 2] == 2,
                          "%s: tile 1 of head %u", name, g);
            }
            cr_assert_eq(r.st.corrected_blocks, correct ? 3u * Hkv : 0u);
            cr_assert_eq(r.st.kept_blocks, 2u * Hkv);
            double rout[8 * 4 * 3], rlse[8 * 4];
            cr_assert_eq(sieve_bsp_attention_reference(&p, pr.q, pr.keys, pr.values, r.counts,
                                                       r.blocks, 0, T, rout, rlse),
                         0);
            check_rows(&pr, r.out, r.lse, rout, rlse, 0, T, name);
            for (uint32_t h = 0; h < Hq; h++) {
                const uint32_t g = h / (Hq / Hkv);
                if (correct) {
                    float vb[3], kb[4];
                    own_pool(&p, pr.vf, Dv, g, 0, vb);
                    own_pool(&p, pr.kf, D, g, 0, kb);
                    for (uint32_t j = 0; j < Dv; j++)
                        cr_assert_eq(memcmp(&r.out[h * Dv + j], &vb[j], sizeof(float)), 0,
                                     "%s head %u: out[%u] %.9g, vbar_0 %.9g", name, h, j,
                                     r.out[h * Dv + j], vb[j]);
                    const double x = own_dot(pr.qf + h * D, kb, D) / 2.0 + log(4.0);
                    cr_assert(fabs(r.lse[h] - x) <= 1e-6 * (1.0 + fabs(x)),
                              "%s head %u: lse %.9g, pooled logit %.17g", name, h, r.lse[h], x);
                } else {
                    for (uint32_t t = 0; t <= 4; t += 4) {
                        const size_t th = (size_t)t * Hq + h;
                        for (uint32_t j = 0; j < Dv; j++)
                            cr_assert(r.out[th * Dv + j] == 0.0f && !signbit(r.out[th * Dv + j]),
                                      "%s token %u head %u: out[%u] %g", name, t, h, j,
                                      r.out[th * Dv + j]);
                        cr_assert(isinf(r.lse[th]) && r.lse[th] < 0, "%s: lse %g", name,
                                  r.lse[th]);
                        cr_assert(isinf(rlse[th]) && rlse[th] < 0 && rout[th * Dv] == 0.0);
                    }
                    cr_assert(isfinite(r.lse[1 * Hq + h]), "token 1 sees block 1's first key");
                }
            }
            res_free(&r);
        }
        prob_free(&pr);
    }
    sieve_device_close(dev);
}

/* ---------------------------------------------------------------- threads */

/* 1, 2 and 3 workers give the same bits: out, lse, the selection (the sentinels past the
 * counts included) and the statistics' counts. */
Test(bsp_threads, answer_independent_of_threads) {
    const sieve_dtype dts[] = {SIEVE_DTYPE_F32, SIEVE_DTYPE_BF16};
    for (int di = 0; di < 2; di++) {
        sieve_bsp_params p;
        sieve_bsp_params_init(&p, dts[di], 150, 12, 2, 16, 12, 290);
        p.attn.pos0 = 140;
        p.block = 16;
        p.sink_blocks = 1;
        p.window_blocks = 2;
        p.alpha = 0.15f;
        bprob pr;
        prob_structured(&pr, &p, 0.4f, 0.3f, 1.0f, 2, 500 + di);
        const char *specs[] = {"cpu:1", "cpu:2", "cpu:3"};
        bres r[3];
        for (int i = 0; i < 3; i++) {
            sieve_device *dev = open_cpu(specs[i]);
            run_bsp(dev, &pr, &p, &r[i], specs[i]);
            sieve_device_close(dev);
        }
        const size_t th = (size_t)p.attn.n_queries * p.attn.q_heads;
        for (int i = 1; i < 3; i++) {
            cr_assert(memcmp(r[0].out, r[i].out, th * p.attn.v_dim * sizeof(float)) == 0,
                      "%s: out differs between cpu:1 and %s", sieve_dtype_name(p.attn.dtype),
                      specs[i]);
            cr_assert(memcmp(r[0].lse, r[i].lse, th * sizeof(float)) == 0, "lse, %s", specs[i]);
            cr_assert(memcmp(r[0].counts, r[i].counts,
                             (size_t)p.attn.kv_heads * r[0].o.tiles * sizeof(uint32_t)) == 0,
                      "sel_counts, %s", specs[i]);
            cr_assert(memcmp(r[0].blocks, r[i].blocks,
                             (size_t)p.attn.kv_heads * r[0].o.per_head * sizeof(int32_t)) == 0,
                      "sel_blocks, %s", specs[i]);
            cr_assert(r[0].st.visible_blocks == r[i].st.visible_blocks &&
                          r[0].st.kept_blocks == r[i].st.kept_blocks &&
                          r[0].st.corrected_blocks == r[i].st.corrected_blocks &&
                          r[0].st.density == r[i].st.density,
                      "stats, %s", specs[i]);
        }
        cr_assert(r[0].st.corrected_blocks > 0 && r[0].st.kept_blocks < r[0].st.visible_blocks);
        for (int i = 0; i < 3; i++) res_free(&r[i]);
        prob_free(&pr);
    }
}

/* ---------------------------------------------------------------- statistics */

/* The statistics count the returned selection: visible = kv_heads x per_head, kept = the
 * sum of the counts, corrected = the full blocks not kept (0 without correction), density =
 * kept / visible; the times are finite, non-negative and within the call's. Leaving out
 * the selection or lse changes no bit of out nor the counts. */
Test(bsp_stats, consistent_with_selection) {
    sieve_device *dev = open_cpu("cpu:2");
    sieve_bsp_params p;
    sieve_bsp_params_init(&p, SIEVE_DTYPE_F16, 120, 4, 2, 16, 8, 200);
    p.attn.pos0 = 80;
    p.block = 8;
    p.sink_blocks = 2;
    p.window_blocks = 3;
    bprob pr;
    prob_structured(&pr, &p, 0.5f, 0.3f, 0.4f, 2, 900);
    const float alphas[] = {0.0f, 0.1f, 0.5f, 1.0f};
    for (int ai = 0; ai < 4; ai++)
        for (int correct = 0; correct <= 1; correct++) {
            p.alpha = alphas[ai];
            p.correct = correct;
            char what[64];
            snprintf(what, sizeof what, "alpha %g correct %d", (double)p.alpha, correct);
            bres r;
            const double t0 = sieve__now_ms();
            run_bsp(dev, &pr, &p, &r, what);
            const double span = sieve__now_ms() - t0;
            check_sel_shape(&p, &r, r.counts, r.blocks, 1, what);
            uint64_t kept = 0, corrected = 0;
            for (uint32_t g = 0; g < p.attn.kv_heads; g++)
                for (uint32_t I = 0; I < r.o.tiles; I++) {
                    kept += r.counts[(size_t)g * r.o.tiles + I];
                    for (uint32_t J = 0; J < r.o.nF[I]; J++)
                        corrected += correct && !sel_has(&r, r.counts, r.blocks, g, I, J);
                }
            const uint64_t visible = (uint64_t)p.attn.kv_heads * r.o.per_head;
            cr_assert_eq(r.st.visible_blocks, visible, "%s", what);
            cr_assert_eq(r.st.kept_blocks, kept, "%s", what);
            cr_assert_eq(r.st.corrected_blocks, corrected, "%s", what);
            cr_assert(fabs(r.st.density - (double)kept / (double)visible) <= 1e-15, "%s", what);
            if (alphas[ai] == 0.0f) cr_assert(kept == visible && corrected == 0);
            if (alphas[ai] >= 0.5f && correct) cr_assert(corrected > 0, "%s", what);
            cr_assert(isfinite(r.st.ms_select) && r.st.ms_select >= 0.0 &&
                          isfinite(r.st.ms_attend) && r.st.ms_attend >= 0.0,
                      "%s: ms %g %g", what, r.st.ms_select, r.st.ms_attend);
            cr_assert(r.st.ms_total >= r.st.ms_select + r.st.ms_attend - 1e-9 &&
                          r.st.ms_total <= span && r.st.ms_total > 0.0,
                      "%s: ms_total %g, select %g + attend %g, span %g", what, r.st.ms_total,
                      r.st.ms_select, r.st.ms_attend, span);
            /* no selection, no lse: the same out and counts */
            const size_t no = (size_t)p.attn.n_queries * p.attn.q_heads * p.attn.v_dim;
            float *out = malloc(no * sizeof *out);
            cr_assert_not_null(out);
            sieve_bsp_stats st;
            cr_assert_eq(sieve_block_sparse_prefill(dev, &p, pr.q, pr.keys, pr.values, NULL, 0,
                                                    out, NULL, NULL, NULL, &st),
                         0);
            cr_assert(memcmp(out, r.out, no * sizeof *out) == 0, "%s: out without sel", what);
            cr_assert(st.kept_blocks == kept && st.corrected_blocks == corrected &&
                      st.visible_blocks == visible);
            cr_assert_eq(sieve_block_sparse_prefill(dev, &p, pr.q, pr.keys, pr.values, NULL, 0,
                                                    out, NULL, NULL, NULL, NULL),
                         0, "stats optional");
            cr_assert(memcmp(out, r.out, no * sizeof *out) == 0);
            free(out);
            res_free(&r);
        }
    prob_free(&pr);
    sieve_device_close(dev);
}

/* ---------------------------------------------------------------- arguments */

#define SENT_OUT 12345.0f
#define SENT_LSE -777.0f

enum { E_T = 6, E_HQ = 4, E_HKV = 2, E_D = 4, E_DV = 3, E_L = 10 };
enum { E_NO = E_T * E_HQ * E_DV, E_NL = E_T * E_HQ, E_NC = 64, E_NB = 256 };

typedef struct eout {
    float out[E_NO], lse[E_NL];
    uint32_t counts[E_NC];
    int32_t blocks[E_NB];
    double rout[E_NO], rlse[E_NL], ratio[E_NB];
    sieve_bsp_stats st;
} eout;

static void fill_sentinels(eout *e) {
    for (int i = 0; i < E_NO; i++) {
        e->out[i] = SENT_OUT;
        e->rout[i] = 321.0;
    }
    for (int i = 0; i < E_NL; i++) {
        e->lse[i] = SENT_LSE;
        e->rlse[i] = 321.0;
    }
    for (int i = 0; i < E_NC; i++) e->counts[i] = SENT_CNT;
    for (int i = 0; i < E_NB; i++) {
        e->blocks[i] = SENT_BLK;
        e->ratio[i] = 321.0;
    }
    memset(&e->st, 0x5a, sizeof e->st);
}

static void assert_sentinels(const eout *e, const char *what) {
    for (int i = 0; i < E_NO; i++)
        cr_assert(e->out[i] == SENT_OUT && e->rout[i] == 321.0, "%s: out[%d] written", what, i);
    for (int i = 0; i < E_NL; i++)
        cr_assert(e->lse[i] == SENT_LSE && e->rlse[i] == 321.0, "%s: lse[%d] written", what, i);
    for (int i = 0; i < E_NC; i++)
        cr_assert(e->counts[i] == SENT_CNT, "%s: sel_counts[%d] written", what, i);
    for (int i = 0; i < E_NB; i++)
        cr_assert(e->blocks[i] == SENT_BLK && e->ratio[i] == 321.0,
                  "%s: sel_blocks / ratio [%d] written", what, i);
    sieve_bsp_stats st;
    memset(&st, 0x5a, sizeof st);
    cr_assert(memcmp(&st, &e->st, sizeof st) == 0, "%s: stats written", what);
}

static void error_problem(sieve_bsp_params *p, float *q, float *keys, float *values) {
    sieve_bsp_params_init(p, SIEVE_DTYPE_F32, E_T, E_HQ, E_HKV, E_D, E_DV, E_L);
    p->attn.pos0 = 4; /* tiles {0-3, 4-5} see 5..8 and 9..10 keys: n_I 2, 3; nf_I 1, 2 */
    p->block = 4;
    p->sink_blocks = 0;
    p->window_blocks = 0;
    p->alpha = 0.5f;
    for (int i = 0; i < E_T * E_HQ * E_D; i++) q[i] = (float)(i % 5) - 1.0f;
    for (int i = 0; i < E_L * E_HKV * E_D; i++) keys[i] = (float)(i % 7) - 2.0f;
    for (int i = 0; i < E_L * E_HKV * E_DV; i++) values[i] = (float)(i % 3);
}

Test(bsp_errors, bad_arguments) {
    sieve_device *dev = open_cpu("cpu:2");
    sieve_bsp_params p;
    float q[E_T * E_HQ * E_D], keys[E_L * E_HKV * E_D], values[E_L * E_HKV * E_DV];
    error_problem(&p, q, keys, values);
    eout *e = malloc(sizeof *e);
    cr_assert_not_null(e);

#define BSP(pp, qq, kk, vv, oo, cc, bb)                                                           \
    sieve_block_sparse_prefill(dev, pp, qq, kk, vv, NULL, 0, oo, e->lse, cc, bb, &e->st)
    fill_sentinels(e);
    cr_assert_eq(sieve_block_sparse_prefill(NULL, &p, q, keys, values, NULL, 0, e->out, e->lse,
                                            e->counts, e->blocks, &e->st),
                 SIEVE_EINVAL);
    cr_assert_eq(BSP(NULL, q, keys, values, e->out, e->counts, e->blocks), SIEVE_EINVAL);
    cr_assert_eq(BSP(&p, NULL, keys, values, e->out, e->counts, e->blocks), SIEVE_EINVAL);
    cr_assert_eq(BSP(&p, q, NULL, values, e->out, e->counts, e->blocks), SIEVE_EINVAL);
    cr_assert_eq(BSP(&p, q, keys, NULL, e->out, e->counts, e->blocks), SIEVE_EINVAL);
    cr_assert_eq(BSP(&p, q, keys, values, NULL, e->counts, e->blocks), SIEVE_EINVAL);
    cr_assert_eq(BSP(&p, q, keys, values, e->out, e->counts, NULL), SIEVE_EINVAL);
    cr_assert_eq(BSP(&p, q, keys, values, e->out, NULL, e->blocks), SIEVE_EINVAL);
    /* the references' pointers */
    cr_assert_eq(sieve_bsp_select_reference(NULL, q, keys, e->counts, e->blocks, e->ratio),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_bsp_select_reference(&p, NULL, keys, e->counts, e->blocks, e->ratio),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_bsp_select_reference(&p, q, NULL, e->counts, e->blocks, e->ratio),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_bsp_select_reference(&p, q, keys, NULL, e->blocks, e->ratio),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_bsp_select_reference(&p, q, keys, e->counts, NULL, e->ratio),
                 SIEVE_EINVAL);
    assert_sentinels(e, "NULL pointers");

    /* a valid selection for the attention reference's pointer checks */
    uint32_t cnt[E_NC];
    int32_t blk[E_NB];
    cr_assert_eq(sieve_bsp_select_reference(&p, q, keys, cnt, blk, NULL), 0);
#define AREF(pp, qq, kk, vv, cc, bb, tb, tc, oo)                                                  \
    sieve_bsp_attention_reference(pp, qq, kk, vv, cc, bb, tb, tc, oo, e->rlse)
    cr_assert_eq(AREF(NULL, q, keys, values, cnt, blk, 0, E_T, e->rout), SIEVE_EINVAL);
    cr_assert_eq(AREF(&p, NULL, keys, values, cnt, blk, 0, E_T, e->rout), SIEVE_EINVAL);
    cr_assert_eq(AREF(&p, q, NULL, values, cnt, blk, 0, E_T, e->rout), SIEVE_EINVAL);
    cr_assert_eq(AREF(&p, q, keys, NULL, cnt, blk, 0, E_T, e->rout), SIEVE_EINVAL);
    cr_assert_eq(AREF(&p, q, keys, values, NULL, blk, 0, E_T, e->rout), SIEVE_EINVAL);
    cr_assert_eq(AREF(&p, q, keys, values, cnt, NULL, 0, E_T, e->rout), SIEVE_EINVAL);
    cr_assert_eq(AREF(&p, q, keys, values, cnt, blk, 0, E_T, NULL), SIEVE_EINVAL);
    /* token ranges */
    cr_assert_eq(AREF(&p, q, keys, values, cnt, blk, 0, 0, e->rout), SIEVE_EINVAL);
    cr_assert_eq(AREF(&p, q, keys, values, cnt, blk, E_T, 1, e->rout), SIEVE_EINVAL);
    cr_assert_eq(AREF(&p, q, keys, values, cnt, blk, 2, E_T - 1, e->rout), SIEVE_EINVAL);
    cr_assert_eq(AREF(&p, q, keys, values, cnt, blk, 1, UINT32_MAX, e->rout), SIEVE_EINVAL);
    cr_assert_eq(AREF(&p, q, keys, values, cnt, blk, UINT32_MAX, 2, e->rout), SIEVE_EINVAL);
    assert_sentinels(e, "NULL pointers and token ranges");

    /* bad parameters, each on its own */
    for (int c = 0; c < 14; c++) {
        sieve_bsp_params b = p;
        switch (c) {
        case 0: b.block = 0; break;
        case 1: b.alpha = -0.1f; break;
        case 2: b.alpha = nextafterf(1.0f, 2.0f); break;
        case 3: b.alpha = 1.5f; break;
        case 4: b.alpha = NAN; break;
        case 5: b.alpha = INFINITY; break;
        case 6: b.alpha = -0.0f - FLT_MIN; break;
        case 7: b.correct = 2; break;
        case 8: b.correct = -1; break;
        case 9: b.attn.n_queries = 0; break;
        case 10: b.attn.q_heads = 3; break; /* not a multiple of kv_heads 2 */
        case 11: b.attn.scale = INFINITY; break;
        case 12: b.attn.dtype = (sieve_dtype)7; break;
        case 13: b.attn.n_keys = 0; break;
        }
        char what[32];
        snprintf(what, sizeof what, "case %d", c);
        fill_sentinels(e);
        cr_assert_eq(BSP(&b, q, keys, values, e->out, e->counts, e->blocks), SIEVE_EINVAL, "%s",
                     what);
        cr_assert_eq(sieve_bsp_select_reference(&b, q, keys, e->counts, e->blocks, e->ratio),
                     SIEVE_EINVAL, "%s", what);
        cr_assert_eq(AREF(&b, q, keys, values, cnt, blk, 0, E_T, e->rout), SIEVE_EINVAL, "%s",
                     what);
        assert_sentinels(e, what);
        uint32_t tiles = 99;
        uint64_t per_head = 99;
        size_t bytes = 99;
        cr_assert_eq(sieve_bsp_layout(&b, &tiles, &per_head, NULL), SIEVE_EINVAL, "%s", what);
        cr_assert_eq(sieve_bsp_scratch_size(dev, &b, &bytes), SIEVE_EINVAL, "%s", what);
        cr_assert(tiles == 99 && per_head == 99 && bytes == 99, "%s", what);
        cr_assert_eq(sieve__check_bsp_params(&b), SIEVE_EINVAL, "%s", what);
    }
    cr_assert_eq(sieve__check_bsp_params(NULL), SIEVE_EINVAL);

    /* the edges that are allowed, and the good call (so the errors above were about the
     * arguments): alpha 0 and 1, correct 0, any sink and window */
    sieve_bsp_params ok = p;
    ok.alpha = 0.0f;
    cr_assert_eq(sieve__check_bsp_params(&ok), 0);
    ok.alpha = 1.0f;
    ok.correct = 0;
    ok.sink_blocks = UINT32_MAX;
    ok.window_blocks = UINT32_MAX;
    cr_assert_eq(sieve__check_bsp_params(&ok), 0);
    ok.block = UINT32_MAX;
    cr_assert_eq(sieve__check_bsp_params(&ok), 0);
    fill_sentinels(e);
    cr_assert_eq(BSP(&p, q, keys, values, e->out, e->counts, e->blocks), 0);
    for (int i = 0; i < E_NO; i++) cr_assert(e->out[i] != SENT_OUT && isfinite(e->out[i]));
    cr_assert(e->st.visible_blocks > 0 && e->st.kept_blocks > 0);
    cr_assert_eq(AREF(&p, q, keys, values, e->counts, e->blocks, 0, E_T, e->rout), 0);
    for (int i = 0; i < E_NO; i++)
        cr_assert(fabs(e->out[i] - e->rout[i]) <= 1e-5 * (1.0 + fabs(e->rout[i])), "out[%d]", i);
#undef BSP
#undef AREF
    free(e);
    sieve_device_close(dev);
}

/* The attention reference rejects selections that are not strictly ascending or not
 * visible, with SIEVE_EINVAL and out / lse untouched. */
Test(bsp_errors, bad_selections) {
    sieve_bsp_params p;
    float q[E_T * E_HQ * E_D], keys[E_L * E_HKV * E_D], values[E_L * E_HKV * E_DV];
    error_problem(&p, q, keys, values);
    p.alpha = 0.0f; /* every visible block: tile 0 {0, 1}, tile 1 {0, 1, 2} */
    uint32_t tiles;
    uint64_t per_head;
    uint32_t nb[2];
    cr_assert_eq(sieve_bsp_layout(&p, &tiles, &per_head, nb), 0);
    cr_assert(tiles == 2 && per_head == 5 && nb[0] == 2 && nb[1] == 3);
    uint32_t cnt0[4];
    int32_t blk0[10];
    cr_assert_eq(sieve_bsp_select_reference(&p, q, keys, cnt0, blk0, NULL), 0);
    cr_assert(cnt0[0] == 2 && cnt0[1] == 3 && cnt0[2] == 2 && cnt0[3] == 3);
    eout *e = malloc(sizeof *e);
    cr_assert_not_null(e);
    for (int c = 0; c < 8; c++) {
        uint32_t cnt[4];
        int32_t blk[10];
        memcpy(cnt, cnt0, sizeof cnt);
        memcpy(blk, blk0, sizeof blk);
        switch (c) {
        case 0: blk[0] = 1; blk[1] = 0; break;        /* head 0 tile 0 {1, 0} */
        case 1: blk[2 + 1] = 0; break;                /* head 0 tile 1 {0, 0, 2} */
        case 2: blk[5 + 2 + 2] = 3; break;            /* head 1 tile 1: 3 >= n_I */
        case 3: blk[5] = -1; break;                   /* negative */
        case 4: cnt[0] = 3; break;                    /* more than n_I entries */
        case 5: cnt[3] = 4; break;
        case 6: blk[5 + 1] = 2; break;                /* head 1 tile 0: 2 >= n_I = 2 */
        case 7: blk[2] = INT32_MIN; break;
        }
        char what[32];
        snprintf(what, sizeof what, "selection %d", c);
        for (int correct = 0; correct <= 1; correct++) {
            p.correct = correct;
            fill_sentinels(e);
            cr_assert_eq(sieve_bsp_attention_reference(&p, q, keys, values, cnt, blk, 0, E_T,
                                                       e->rout, e->rlse),
                         SIEVE_EINVAL, "%s", what);
            cr_assert_eq(sieve_bsp_attention_reference(&p, q, keys, values, cnt, blk, 5, 1,
                                                       e->rout, e->rlse),
                         SIEVE_EINVAL, "%s (one token)", what);
            assert_sentinels(e, what);
        }
    }
    /* a sparser valid selection is accepted: tile 1 keeps {2} only (the rest is corrected
     * or dropped) */
    uint32_t cnt[4] = {2, 1, 2, 1};
    int32_t blk[10] = {0, 1, 2, SENT_BLK, SENT_BLK, 0, 1, 2, SENT_BLK, SENT_BLK};
    fill_sentinels(e);
    cr_assert_eq(sieve_bsp_attention_reference(&p, q, keys, values, cnt, blk, 0, E_T, e->rout,
                                               e->rlse),
                 0);
    free(e);
}

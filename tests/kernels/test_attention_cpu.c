/* test_attention_cpu.c: dense causal attention on the CPU (sieve_causal_attention,
 * sieve_causal_attention_reference). The CPU must agree with the float64 reference within
 * the float32 bound below on every dtype, on GQA shapes, on prefills, on chunks (pos0 > 0)
 * and where the rows are clipped at n_keys; the reference must agree with the test's own
 * float64 attention and with closed forms; a token must not read keys past its position
 * (bit for bit) and must read the ones before it; token 0 of a prefill must return value
 * row 0 exactly; the worker count must not change the answer; large scores must not
 * overflow; bad arguments must give SIEVE_EINVAL and leave the outputs alone.
 * Must not: build expected values with the code under test (the visible counts and the
 * float64 attention are computed here, by other means).
 *
 * The tolerance (the derivation of test_sparse_attn_cpu.c, whose CPU computes the same
 * float32 operations in the same order; here the set of token t is the keys 0 .. n - 1,
 * n = min(n_keys, pos0 + t + 1)). Both sides read the same stored values, exact in float32
 * and double, so the dtype adds no error. For query head h of token t let s_j = scale q.k_j
 * (double), B_j = sum_d |q_d k_j,d|, w_j = the float64 softmax weights, M = max s_j,
 * u = 2^-24. The CPU's float32 exponent s32_j - m32 differs from s_j - M, up to a shift
 * common to every j (which the softmax ignores), by at most
 *     e_j = |scale| (D + 4) u B_j      (a D-term float32 dot, gamma_D; the product with the
 *                                       float scale and the float scale itself, 2u)
 *         + u (M - s_j)                 (rounding the difference before expf)
 *         + 2u                          (expf within an ulp)
 * Perturbing the exponents by e_j moves the weights by sum_j |w'_j - w_j| <= 2 sum_j w_j e_j
 * to first order, and the n-term float32 sums l and sum e_j v_j and the division add
 * (2n + 2) u relative. With V = max |v| over the visible value rows (of kv head g):
 *     |out32 - out64| <= V (2.5 W + (2n + 8) u),                   W = sum_j w_j e_j
 *     |lse32 - lse64| <= 1.5 W + (n + 8) u + 2 u (|lse64| + log n + 1)
 * (log-sum-exp moves by at most W under those perturbations; logf and the final sum round
 * once each). The factors 2.5 and 1.5 leave room for the second-order terms, which stay
 * below 1% for every W here. The bound grows with |scores| and with n as float32 must,
 * where a fixed 1e-5 (1 + V) would be too loose for small scores and too tight at 1e4.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kt_util.h"
#include "sieve_kernels_internal.h"

#define U32 0x1.0p-24

static sieve_device *open_cpu(const char *spec) {
    sieve_device *dev = NULL;
    int rc = sieve_device_open(spec, &dev);
    cr_assert_eq(rc, 0, "sieve_device_open(%s) returned %d", spec, rc);
    return dev;
}

/* Keys token t sees, computed here: min(n_keys, pos0 + t + 1) without wrapping. */
static uint32_t own_visible(const sieve_attn_params *p, uint32_t t) {
    const unsigned long long v = (unsigned long long)p->pos0 + t + 1ull;
    return v < p->n_keys ? (uint32_t)v : p->n_keys;
}

/* ---------------------------------------------------------------- problems */

typedef struct aprob {
    sieve_attn_params p;
    void *q, *keys, *values; /* stored, in p.dtype */
    float *qf, *kf, *vf;     /* the stored values as float32 (exact) */
} aprob;

static size_t n_q(const sieve_attn_params *p) {
    return (size_t)p->n_queries * p->q_heads * p->head_dim;
}
static size_t n_k(const sieve_attn_params *p) {
    return (size_t)p->n_keys * p->kv_heads * p->head_dim;
}
static size_t n_v(const sieve_attn_params *p) {
    return (size_t)p->n_keys * p->kv_heads * p->v_dim;
}

/* Allocates a problem of p's shape with zero inputs. */
static void prob_alloc(aprob *pr, const sieve_attn_params *p) {
    memset(pr, 0, sizeof *pr);
    pr->p = *p;
    const size_t esz = sieve_dtype_size(p->dtype);
    pr->q = calloc(n_q(p), esz);
    pr->keys = calloc(n_k(p), esz);
    pr->values = calloc(n_v(p), esz);
    pr->qf = calloc(n_q(p), sizeof(float));
    pr->kf = calloc(n_k(p), sizeof(float));
    pr->vf = calloc(n_v(p), sizeof(float));
    cr_assert(pr->q && pr->keys && pr->values && pr->qf && pr->kf && pr->vf);
}

/* Stores float32 inputs (NULL keeps the current ones) in p.dtype and keeps the stored
 * values' float32 copies. */
static void prob_store(aprob *pr, const float *q, const float *k, const float *v) {
    const sieve_attn_params *p = &pr->p;
    if (q) {
        sieve_convert_from_f32(p->dtype, q, pr->q, n_q(p));
        sieve_convert_to_f32(p->dtype, pr->q, pr->qf, n_q(p));
    }
    if (k) {
        sieve_convert_from_f32(p->dtype, k, pr->keys, n_k(p));
        sieve_convert_to_f32(p->dtype, pr->keys, pr->kf, n_k(p));
    }
    if (v) {
        sieve_convert_from_f32(p->dtype, v, pr->values, n_v(p));
        sieve_convert_to_f32(p->dtype, pr->values, pr->vf, n_v(p));
    }
}

/* Re-stores the float32 copies (after the test edited qf, kf or vf) in p.dtype. */
static void prob_restore(aprob *pr) {
    float *q = malloc(n_q(&pr->p) * sizeof *q), *k = malloc(n_k(&pr->p) * sizeof *k);
    float *v = malloc(n_v(&pr->p) * sizeof *v);
    cr_assert(q && k && v);
    memcpy(q, pr->qf, n_q(&pr->p) * sizeof *q);
    memcpy(k, pr->kf, n_k(&pr->p) * sizeof *k);
    memcpy(v, pr->vf, n_v(&pr->p) * sizeof *v);
    prob_store(pr, q, k, v);
    free(q);
    free(k);
    free(v);
}

static void prob_free(aprob *pr) {
    free(pr->q);
    free(pr->keys);
    free(pr->values);
    free(pr->qf);
    free(pr->kf);
    free(pr->vf);
    memset(pr, 0, sizeof *pr);
}

/* Gaussian q, keys and values (values times vscale). */
static void prob_random(aprob *pr, const sieve_attn_params *p, float vscale, uint64_t seed) {
    prob_alloc(pr, p);
    const size_t nq = n_q(p), nk = n_k(p), nv = n_v(p);
    float *q = malloc(nq * sizeof *q), *k = malloc(nk * sizeof *k), *v = malloc(nv * sizeof *v);
    cr_assert(q && k && v);
    kt_rng r = {seed * 7919 + 5};
    for (size_t i = 0; i < nq; i++) q[i] = kt_gauss(&r);
    for (size_t i = 0; i < nk; i++) k[i] = kt_gauss(&r);
    for (size_t i = 0; i < nv; i++) v[i] = vscale * kt_gauss(&r);
    prob_store(pr, q, k, v);
    free(q);
    free(k);
    free(v);
}

/* ---------------------------------------------------------------- the test's own float64 */

typedef kt_attend_result own_result;

/* The test's float64 attention of head h of token t over keys 0 .. n - 1, and the bounds
 * of the file comment (kt_attend64). */
static own_result own_attend(const aprob *pr, uint32_t t, uint32_t h, uint32_t n, double *out) {
    const sieve_attn_params *p = &pr->p;
    const double scale = p->scale == 0.0f ? 1.0 / sqrt((double)p->head_dim) : (double)p->scale;
    return kt_attend64(pr->qf + ((size_t)t * p->q_heads + h) * p->head_dim, pr->kf, pr->vf,
                       p->kv_heads, h / (p->q_heads / p->kv_heads), p->head_dim, p->v_dim, scale,
                       NULL, n, out);
}

/* ---------------------------------------------------------------- running */

typedef struct aresult {
    float *out, *lse;
    double *rout, *rlse; /* the reference */
    double ms;
} aresult;

static void result_alloc(aresult *r, const sieve_attn_params *p) {
    const size_t th = (size_t)p->n_queries * p->q_heads;
    r->out = malloc(th * p->v_dim * sizeof *r->out);
    r->lse = malloc(th * sizeof *r->lse);
    r->rout = malloc(th * p->v_dim * sizeof *r->rout);
    r->rlse = malloc(th * sizeof *r->rlse);
    cr_assert(r->out && r->lse && r->rout && r->rlse);
    memset(r->out, 0xa5, th * p->v_dim * sizeof *r->out); /* the call must overwrite it */
    memset(r->lse, 0xa5, th * sizeof *r->lse);
    r->ms = -1.0;
}

static void result_free(aresult *r) {
    free(r->out);
    free(r->lse);
    free(r->rout);
    free(r->rlse);
    memset(r, 0, sizeof *r);
}

/* Runs the CPU only (into a fresh result), asserting success and a wall time. */
static void run_cpu(sieve_device *dev, const aprob *pr, aresult *r, const char *what) {
    result_alloc(r, &pr->p);
    int rc = sieve_causal_attention(dev, &pr->p, pr->q, pr->keys, pr->values, NULL, 0, r->out,
                                    r->lse, &r->ms);
    cr_assert_eq(rc, 0, "%s: sieve_causal_attention returned %d (%s)", what, rc,
                 sieve_strerror(rc));
    cr_assert(isfinite(r->ms) && r->ms >= 0.0, "%s: ms %g", what, r->ms);
}

/* Runs the CPU and the reference on pr. */
static void run(sieve_device *dev, const aprob *pr, aresult *r, const char *what) {
    run_cpu(dev, pr, r, what);
    int rc = sieve_causal_attention_reference(&pr->p, pr->q, pr->keys, pr->values, r->rout,
                                              r->rlse);
    cr_assert_eq(rc, 0, "%s: reference returned %d (%s)", what, rc, sieve_strerror(rc));
}

/* Asserts: the reference equals the test's own float64 attention; the CPU is within the
 * tolerance of the file comment. Returns the largest error / tolerance ratio seen. */
static double check_vs_reference(const aprob *pr, const aresult *r, const char *what) {
    const sieve_attn_params *p = &pr->p;
    const uint32_t Hq = p->q_heads, Dv = p->v_dim;
    double *own = malloc((size_t)Dv * sizeof *own);
    cr_assert(own);
    double worst = 0.0;
    for (uint32_t t = 0; t < p->n_queries; t++) {
        const uint32_t n = own_visible(p, t);
        for (uint32_t h = 0; h < Hq; h++) {
            const size_t th = (size_t)t * Hq + h;
            const own_result o = own_attend(pr, t, h, n, own);
            const float *co = r->out + th * Dv;
            const double *ro = r->rout + th * Dv;
            cr_assert(fabs(r->rlse[th] - o.lse) <= 1e-12 * (1.0 + fabs(o.lse)),
                      "%s: token %u head %u: reference lse %.17g, own float64 %.17g", what, t, h,
                      r->rlse[th], o.lse);
            cr_assert(fabs((double)r->lse[th] - r->rlse[th]) <= o.tol_lse,
                      "%s: token %u head %u (n=%u): lse %.9g, reference %.17g (tol %.3g)", what,
                      t, h, n, r->lse[th], r->rlse[th], o.tol_lse);
            if (o.tol_lse > 0) worst = fmax(worst, fabs(r->lse[th] - r->rlse[th]) / o.tol_lse);
            for (uint32_t v = 0; v < Dv; v++) {
                cr_assert(fabs(ro[v] - own[v]) <= 1e-12 * (1.0 + fabs(own[v])),
                          "%s: token %u head %u: reference out[%u] %.17g, own float64 %.17g",
                          what, t, h, v, ro[v], own[v]);
                const double err = fabs((double)co[v] - ro[v]);
                cr_assert(err <= o.tol_out,
                          "%s: token %u head %u (n=%u): out[%u] %.9g, reference %.17g (tol %.3g)",
                          what, t, h, n, v, co[v], ro[v], o.tol_out);
                if (o.tol_out > 0) worst = fmax(worst, err / o.tol_out);
            }
        }
    }
    free(own);
    return worst;
}

/* Asserts tokens [ta, ta + nt) of a and [tb, tb + nt) of b bit-identical (out, and lse when
 * both are given); hq, dv: the shape of a token's rows. */
static void assert_same_tokens(uint32_t hq, uint32_t dv, const float *ao, const float *al,
                               uint32_t ta, const float *bo, const float *bl, uint32_t tb,
                               uint32_t nt, const char *what) {
    const size_t to = (size_t)hq * dv;
    for (size_t i = 0; i < (size_t)nt * to; i++)
        cr_assert_eq(memcmp(&ao[ta * to + i], &bo[tb * to + i], sizeof(float)), 0,
                     "%s: token %zu head %zu out[%zu]: %.9g vs %.9g", what, ta + i / to,
                     i % to / dv, i % dv, ao[ta * to + i], bo[tb * to + i]);
    if (al && bl)
        for (size_t i = 0; i < (size_t)nt * hq; i++)
            cr_assert_eq(memcmp(&al[(size_t)ta * hq + i], &bl[(size_t)tb * hq + i],
                                sizeof(float)),
                         0, "%s: token %zu head %zu lse: %.9g vs %.9g", what, ta + i / hq,
                         i % hq, al[(size_t)ta * hq + i], bl[(size_t)tb * hq + i]);
}

/* ---------------------------------------------------------------- against the reference */

typedef struct ashape {
    uint32_t T, Hq, Hkv, D, Dv, L, pos0;
    float scale;
    const char *kind;
} ashape;

static const ashape shapes[] = {
    /* a prefill (pos0 0, T = L), GQA 4:1, D != Dv */
    {70, 8, 2, 24, 40, 70, 0, 0.0f, "prefill"},
    /* a prefill past one block of 256 keys, MHA, odd sizes, explicit scale */
    {300, 3, 3, 7, 5, 300, 0, 0.7f, "prefill"},
    /* a chunk of a longer prefill: pos0 > 0, T < L - pos0, MQA, negative scale */
    {20, 4, 1, 16, 8, 300, 100, -0.3f, "chunk"},
    /* rows clipped at n_keys: pos0 + T > L (tokens 9 .. 29 see all 50 keys) */
    {30, 6, 2, 9, 11, 50, 40, 0.0f, "clipped"},
    /* wide heads, 3 blocks of keys, 10 heads per kv head (chunks of 8 and 2), clipped */
    {6, 20, 2, 128, 128, 520, 515, 0.0f, "wide"},
};

static void vs_reference(sieve_dtype dtype) {
    sieve_device *dev = open_cpu("cpu:2");
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const ashape *sh = &shapes[si];
        sieve_attn_params p;
        sieve_attn_params_init(&p, dtype, sh->T, sh->Hq, sh->Hkv, sh->D, sh->Dv, sh->L);
        p.pos0 = sh->pos0;
        p.scale = sh->scale;
        aprob pr;
        prob_random(&pr, &p, 2.0f, 100 * si + dtype);
        char what[128];
        snprintf(what, sizeof what, "%s %s T=%u Hq=%u Hkv=%u D=%u Dv=%u L=%u pos0=%u scale=%g",
                 sieve_dtype_name(dtype), sh->kind, sh->T, sh->Hq, sh->Hkv, sh->D, sh->Dv, sh->L,
                 sh->pos0, (double)sh->scale);
        aresult r;
        run(dev, &pr, &r, what);
        const double worst = check_vs_reference(&pr, &r, what);
        if (getenv("KT_VERBOSE"))
            fprintf(stderr, "%-75s worst err/tol %.3g  ms %.3f\n", what, worst, r.ms);
        result_free(&r);
        prob_free(&pr);
    }
    sieve_device_close(dev);
}

Test(attn_reference, f32) { vs_reference(SIEVE_DTYPE_F32); }
Test(attn_reference, f16) { vs_reference(SIEVE_DTYPE_F16); }
Test(attn_reference, bf16) { vs_reference(SIEVE_DTYPE_BF16); }

/* ---------------------------------------------------------------- closed forms */

/* A prefill of two tokens, D = 1, scale 0 = 1: token 0 sees key 0 only (out = v0, lse =
 * q k0), token 1 sees keys 0 and 1 (scores 2 and 0 here). Then D = 4, Dv = 2, a chunk at
 * pos0 1 over 3 keys: token 0 sees keys 0 and 1, token 1 all three (key 2 weighs in), with
 * scale 1/2 and -1/4. Every number is exact in float16 and bfloat16. */
Test(attn_exact, closed_forms) {
    sieve_device *dev = open_cpu("cpu:1");
    for (int dt = 0; dt < 3; dt++) {
        const char *name = sieve_dtype_name((sieve_dtype)dt);
        {
            sieve_attn_params p;
            sieve_attn_params_init(&p, (sieve_dtype)dt, 2, 1, 1, 1, 1, 2);
            aprob pr;
            prob_alloc(&pr, &p);
            const float q[] = {1.5f, 1.0f}, k[] = {0.0f, 2.0f}, v[] = {3.0f, -1.0f};
            prob_store(&pr, q, k, v);
            aresult r;
            run(dev, &pr, &r, "D=1");
            /* token 0: one key of weight 1; q k0 = 0 */
            cr_assert(r.rout[0] == 3.0 && r.rlse[0] == 0.0, "%s: reference token 0 %.17g %.17g",
                      name, r.rout[0], r.rlse[0]);
            cr_assert(r.out[0] == 3.0f && r.lse[0] == 0.0f, "%s: token 0 out %.9g lse %.9g", name,
                      r.out[0], r.lse[0]);
            /* token 1: scores 0 and 2 */
            const double e2 = exp(2.0);
            const double want = (1.0 * 3.0 + e2 * -1.0) / (1.0 + e2), lw = log(1.0 + e2);
            cr_assert(fabs(r.rout[1] - want) <= 4 * DBL_EPSILON * fabs(want),
                      "%s: reference out %.17g, closed form %.17g", name, r.rout[1], want);
            cr_assert(fabs(r.rlse[1] - lw) <= 4 * DBL_EPSILON * lw,
                      "%s: reference lse %.17g, closed form %.17g", name, r.rlse[1], lw);
            cr_assert(fabs((double)r.out[1] - want) <= 8 * FLT_EPSILON * 3.0,
                      "%s: out %.9g, closed form %.17g", name, r.out[1], want);
            cr_assert(fabs((double)r.lse[1] - lw) <= 8 * FLT_EPSILON * lw,
                      "%s: lse %.9g, closed form %.17g", name, r.lse[1], lw);
            result_free(&r);
            prob_free(&pr);
        }
        const float scales[] = {0.0f, -0.25f};
        for (int si = 0; si < 2; si++) {
            sieve_attn_params p;
            sieve_attn_params_init(&p, (sieve_dtype)dt, 2, 1, 1, 4, 2, 3);
            p.pos0 = 1;
            p.scale = scales[si];
            aprob pr;
            prob_alloc(&pr, &p);
            /* both tokens ask q; q.k0 = 3, q.k1 = -1, q.k2 = 2 */
            const float q[] = {1.0f, 2.0f, -1.0f, 0.5f, 1.0f, 2.0f, -1.0f, 0.5f};
            const float k[] = {1, 1, 0, 0, 0, 0, 2, 2, 0, 1, 0, 0};
            const float v[] = {1.0f, -2.0f, 4.0f, 0.5f, 100.0f, -100.0f};
            prob_store(&pr, q, k, v);
            aresult r;
            run(dev, &pr, &r, "D=4");
            const double sc = si == 0 ? 0.5 : -0.25;
            const double a = exp(3.0 * sc), b = exp(-1.0 * sc), c = exp(2.0 * sc);
            const double want[2][2] = {
                {(a * 1.0 + b * 4.0) / (a + b), (a * -2.0 + b * 0.5) / (a + b)},
                {(a * 1.0 + b * 4.0 + c * 100.0) / (a + b + c),
                 (a * -2.0 + b * 0.5 + c * -100.0) / (a + b + c)}};
            const double lw[2] = {log(a + b), log(a + b + c)};
            for (int t = 0; t < 2; t++) {
                for (int j = 0; j < 2; j++) {
                    cr_assert(fabs(r.rout[t * 2 + j] - want[t][j]) <=
                                  8 * DBL_EPSILON * (1.0 + fabs(want[t][j])),
                              "%s scale %g: token %d reference out[%d] %.17g, closed form %.17g",
                              name, sc, t, j, r.rout[t * 2 + j], want[t][j]);
                    cr_assert(fabs((double)r.out[t * 2 + j] - want[t][j]) <=
                                  16 * FLT_EPSILON * 100.0,
                              "%s scale %g: token %d out[%d] %.9g, closed form %.17g", name, sc,
                              t, j, r.out[t * 2 + j], want[t][j]);
                }
                cr_assert(fabs(r.rlse[t] - lw[t]) <= 8 * DBL_EPSILON * (1.0 + fabs(lw[t])),
                          "%s: token %d reference lse %.17g, closed form %.17g", name, t,
                          r.rlse[t], lw[t]);
                cr_assert(fabs((double)r.lse[t] - lw[t]) <= 8 * FLT_EPSILON * (1.0 + fabs(lw[t])),
                          "%s scale %g: token %d lse %.9g, closed form %.17g", name, sc, t,
                          r.lse[t], lw[t]);
            }
            check_vs_reference(&pr, &r, "D=4");
            result_free(&r);
            prob_free(&pr);
        }
    }
    sieve_device_close(dev);
}

/* Token 0 of a prefill sees key 0 only: its weight is exactly 1, so out is value row 0 of
 * the query head's kv head bit for bit, and lse is the float32 score scale * q.k0 (within
 * the dot's rounding: (D + 4) u |scale| sum|q_d k_d| plus the score's own rounding). */
Test(attn_exact, first_token_of_prefill) {
    sieve_device *dev = open_cpu("cpu:2");
    for (int dt = 0; dt < 3; dt++) {
        const uint32_t T = 5, Hq = 6, Hkv = 3, D = 20, Dv = 7;
        const float scales[] = {0.0f, 3.0f};
        for (int si = 0; si < 2; si++) {
            sieve_attn_params p;
            sieve_attn_params_init(&p, (sieve_dtype)dt, T, Hq, Hkv, D, Dv, T);
            p.scale = scales[si];
            aprob pr;
            prob_random(&pr, &p, 3.0f, 30 + dt);
            aresult r;
            run(dev, &pr, &r, "first token");
            check_vs_reference(&pr, &r, "first token");
            const double scale = si == 0 ? 1.0 / sqrt((double)D) : 3.0;
            for (uint32_t h = 0; h < Hq; h++) {
                const uint32_t g = h / (Hq / Hkv);
                const float *want = pr.vf + (size_t)g * Dv; /* key 0, kv head g */
                for (uint32_t v = 0; v < Dv; v++)
                    cr_assert_eq(memcmp(&r.out[(size_t)h * Dv + v], &want[v], 4), 0,
                                 "%s: head %u out[%u] %.9g, value row 0 of kv head %u %.9g",
                                 sieve_dtype_name(p.dtype), h, v, r.out[h * Dv + v], g, want[v]);
                double dot = 0.0, ab = 0.0;
                const float *qh = pr.qf + (size_t)h * D, *k0 = pr.kf + (size_t)g * D;
                for (uint32_t d = 0; d < D; d++) {
                    dot += (double)qh[d] * k0[d];
                    ab += fabs((double)qh[d] * k0[d]);
                }
                const double s = scale * dot;
                const double tol = (D + 4) * U32 * scale * ab + 4 * U32 * fabs(s);
                cr_assert(fabs((double)r.lse[h] - s) <= tol,
                          "%s: head %u: lse %.9g, scale q.k0 %.17g (tol %.3g)",
                          sieve_dtype_name(p.dtype), h, r.lse[h], s, tol);
                cr_assert(r.rlse[h] == s || fabs(r.rlse[h] - s) <= 1e-14 * (1.0 + fabs(s)),
                          "reference lse %.17g, score %.17g", r.rlse[h], s);
                for (uint32_t v = 0; v < Dv; v++)
                    cr_assert(r.rout[(size_t)h * Dv + v] == (double)want[v],
                              "reference head %u out[%u] %.17g", h, v, r.rout[h * Dv + v]);
            }
            result_free(&r);
            prob_free(&pr);
        }
    }
    sieve_device_close(dev);
}

/* ---------------------------------------------------------------- causality */

/* Asserts which (token, head) pairs of b differ from a: exactly the query heads of kv head
 * g of the tokens that see position s (pos0 + t >= s); every other pair is the same bits. */
static void assert_changed_where_seen(const sieve_attn_params *p, const aresult *a,
                                      const aresult *b, uint32_t s, uint32_t g,
                                      const char *what) {
    const uint32_t Hq = p->q_heads, Dv = p->v_dim;
    for (uint32_t t = 0; t < p->n_queries; t++)
        for (uint32_t h = 0; h < Hq; h++) {
            const size_t th = (size_t)t * Hq + h;
            const int sees = (unsigned long long)p->pos0 + t >= s && h / (Hq / p->kv_heads) == g;
            const int same = memcmp(a->out + th * Dv, b->out + th * Dv, Dv * sizeof(float)) == 0 &&
                             memcmp(&a->lse[th], &b->lse[th], sizeof(float)) == 0;
            cr_assert(sees ? !same : same,
                      "%s: position %u of kv head %u changed: token %u head %u %s", what, s, g,
                      t, h, sees ? "did not change" : "changed");
        }
}

/* Changing every key and value row at positions >= c (for all kv heads) leaves the tokens
 * with pos0 + t < c bit for bit as they were (CPU and reference), and changes the others.
 * Changing one visible key row s1 of kv head 1 (then, instead, its value row) changes
 * exactly the tokens with pos0 + t >= s1 in the query heads of kv head 1. Each change is
 * made to the original Gaussian problem, whose softmax weights are all far above float32's
 * resolution (scores of about unit size over at most 60 keys). A prefill and a chunk
 * (n_queries < n_keys - pos0), every dtype. */
Test(attn_causal, future_keys_unread_visible_keys_read) {
    sieve_device *dev = open_cpu("cpu:2");
    for (int dt = 0; dt < 3; dt++)
        for (int chunk = 0; chunk < 2; chunk++) {
            const uint32_t T = chunk ? 24 : 60, L = 60, Hq = 4, Hkv = 2, D = 12, Dv = 6;
            const uint32_t pos0 = chunk ? 20 : 0, c = chunk ? 33 : 27, s1 = chunk ? 25 : 14;
            sieve_attn_params p;
            sieve_attn_params_init(&p, (sieve_dtype)dt, T, Hq, Hkv, D, Dv, L);
            p.pos0 = pos0;
            char what[64];
            snprintf(what, sizeof what, "%s %s", sieve_dtype_name(p.dtype),
                     chunk ? "chunk" : "prefill");
            aprob pr;
            prob_random(&pr, &p, 1.0f, 50 + 2 * dt + chunk);
            float *kf0 = malloc(n_k(&p) * sizeof *kf0), *vf0 = malloc(n_v(&p) * sizeof *vf0);
            cr_assert(kf0 && vf0);
            memcpy(kf0, pr.kf, n_k(&p) * sizeof *kf0);
            memcpy(vf0, pr.vf, n_v(&p) * sizeof *vf0);
            aresult a, b;
            run(dev, &pr, &a, what);
            check_vs_reference(&pr, &a, what);

            /* the future: every row at s >= c, large and of the other sign */
            for (uint32_t s = c; s < L; s++) {
                for (size_t i = 0; i < (size_t)Hkv * D; i++)
                    pr.kf[(size_t)s * Hkv * D + i] = -4.0f * pr.kf[(size_t)s * Hkv * D + i] + 1.0f;
                for (size_t i = 0; i < (size_t)Hkv * Dv; i++)
                    pr.vf[(size_t)s * Hkv * Dv + i] = 50.0f - pr.vf[(size_t)s * Hkv * Dv + i];
            }
            prob_restore(&pr);
            run(dev, &pr, &b, what);
            check_vs_reference(&pr, &b, what);
            const uint32_t unaffected = c - pos0; /* tokens 0 .. c - pos0 - 1 see s < c */
            assert_same_tokens(Hq, Dv, a.out, a.lse, 0, b.out, b.lse, 0, unaffected, what);
            for (size_t i = 0; i < (size_t)unaffected * Hq * Dv; i++)
                cr_assert(a.rout[i] == b.rout[i], "%s: reference out[%zu] changed", what, i);
            for (size_t i = 0; i < (size_t)unaffected * Hq; i++)
                cr_assert(a.rlse[i] == b.rlse[i], "%s: reference lse[%zu] changed", what, i);
            for (uint32_t t = unaffected; t < T; t++)
                for (uint32_t h = 0; h < Hq; h++)
                    cr_assert(memcmp(a.out + ((size_t)t * Hq + h) * Dv,
                                     b.out + ((size_t)t * Hq + h) * Dv, Dv * sizeof(float)) != 0,
                              "%s: token %u head %u sees changed keys but did not change",
                              what, t, h);
            result_free(&b);

            /* one visible key row: s1 of kv head 1, in the original problem */
            memcpy(pr.kf, kf0, n_k(&p) * sizeof *kf0);
            memcpy(pr.vf, vf0, n_v(&p) * sizeof *vf0);
            for (uint32_t d = 0; d < D; d++) pr.kf[((size_t)s1 * Hkv + 1) * D + d] += 0.75f;
            prob_restore(&pr);
            run(dev, &pr, &b, what);
            check_vs_reference(&pr, &b, what);
            assert_changed_where_seen(&p, &a, &b, s1, 1, what);
            result_free(&b);

            /* one visible value row: s1 of kv head 1, in the original problem */
            memcpy(pr.kf, kf0, n_k(&p) * sizeof *kf0);
            for (uint32_t v = 0; v < Dv; v++) pr.vf[((size_t)s1 * Hkv + 1) * Dv + v] += 2.0f;
            prob_restore(&pr);
            run(dev, &pr, &b, what);
            check_vs_reference(&pr, &b, what);
            /* out changes where the value is seen; lse reads no value: it keeps its bits */
            for (uint32_t t = 0; t < T; t++)
                for (uint32_t h = 0; h < Hq; h++) {
                    const size_t th = (size_t)t * Hq + h;
                    const int sees = pos0 + t >= s1 && h / (Hq / Hkv) == 1;
                    const int same =
                        memcmp(a.out + th * Dv, b.out + th * Dv, Dv * sizeof(float)) == 0;
                    cr_assert(sees ? !same : same,
                              "%s: value %u of kv head 1 changed: token %u head %u %s", what, s1,
                              t, h, sees ? "did not change" : "changed");
                    cr_assert_eq(memcmp(&a.lse[th], &b.lse[th], sizeof(float)), 0,
                                 "%s: a value changed lse (token %u head %u)", what, t, h);
                }
            result_free(&a);
            result_free(&b);
            free(kf0);
            free(vf0);
            prob_free(&pr);
        }
    sieve_device_close(dev);
}

/* A chunk (pos0 P, T tokens) over the same keys gives the same bits as tokens P .. P+T-1 of
 * the whole prefill; tokens past n_keys (pos0 + t + 1 > L) all see L keys: with one query
 * they agree bit for bit with each other and with a pos0 so large that pos0 + t + 1 wraps
 * 32 bits (still every key), and differ from the token that sees L - 1. */
Test(attn_causal, chunks_and_clipping) {
    sieve_device *dev = open_cpu("cpu:3");
    for (int dt = 0; dt < 3; dt++) {
        const uint32_t L = 280, Hq = 4, Hkv = 4, D = 10, Dv = 12;
        sieve_attn_params p;
        sieve_attn_params_init(&p, (sieve_dtype)dt, L, Hq, Hkv, D, Dv, L);
        const char *name = sieve_dtype_name(p.dtype);
        aprob full;
        prob_random(&full, &p, 1.0f, 60 + dt);
        aresult rf;
        run_cpu(dev, &full, &rf, "prefill");
        const uint32_t chunks[][2] = {{0, 1}, {100, 37}, {255, 25}, {279, 1}};
        for (int i = 0; i < 4; i++) {
            const uint32_t P = chunks[i][0], C = chunks[i][1];
            sieve_attn_params pc = p;
            pc.pos0 = P;
            pc.n_queries = C;
            aprob ch;
            prob_alloc(&ch, &pc);
            const size_t esz = sieve_dtype_size(p.dtype), qrow = (size_t)Hq * D;
            memcpy(ch.q, (char *)full.q + P * qrow * esz, C * qrow * esz);
            memcpy(ch.keys, full.keys, n_k(&p) * esz);
            memcpy(ch.values, full.values, n_v(&p) * esz);
            aresult rc;
            run_cpu(dev, &ch, &rc, "chunk");
            char what[64];
            snprintf(what, sizeof what, "%s chunk pos0 %u T %u", name, P, C);
            assert_same_tokens(Hq, Dv, rf.out, rf.lse, P, rc.out, rc.lse, 0, C, what);
            result_free(&rc);
            prob_free(&ch);
        }
        result_free(&rf);
        prob_free(&full);

        /* clipping: 8 tokens with one query at pos0 L - 3: tokens 2 .. 7 see all L keys */
        sieve_attn_params pk = p;
        pk.n_queries = 8;
        pk.pos0 = L - 3;
        aprob ck;
        prob_random(&ck, &pk, 1.0f, 70 + dt);
        for (uint32_t t = 1; t < 8; t++)
            memcpy(ck.qf + (size_t)t * Hq * D, ck.qf, (size_t)Hq * D * sizeof(float));
        prob_restore(&ck);
        aresult r1, r2;
        run(dev, &ck, &r1, "clipped");
        check_vs_reference(&ck, &r1, "clipped");
        for (uint32_t t = 3; t < 8; t++)
            assert_same_tokens(Hq, Dv, r1.out, r1.lse, 2, r1.out, r1.lse, t, 1, name);
        cr_assert(memcmp(r1.out + (size_t)Hq * Dv, r1.out + 2 * (size_t)Hq * Dv,
                         (size_t)Hq * Dv * sizeof(float)) != 0,
                  "%s: token 1 sees L - 1 keys, token 2 all L: the same answer", name);
        ck.p.pos0 = UINT32_MAX - 3; /* pos0 + t + 1 wraps 32 bits from t = 3 */
        run(dev, &ck, &r2, "pos0 near 2^32");
        check_vs_reference(&ck, &r2, "pos0 near 2^32");
        for (uint32_t t = 0; t < 8; t++)
            assert_same_tokens(Hq, Dv, r1.out, r1.lse, 2, r2.out, r2.lse, t, 1, name);
        result_free(&r1);
        result_free(&r2);
        prob_free(&ck);
    }
    sieve_device_close(dev);
}

/* ---------------------------------------------------------------- threads */

/* 1, 2 and 3 workers give the same bits (prefill past one key block, GQA with more heads
 * per kv head than one chunk of 8); leaving lse out changes no bit of out, and the
 * scratch pointer the CPU ignores changes nothing. */
Test(attn_threads, answer_independent_of_threads) {
    for (int dt = 0; dt < 3; dt++) {
        sieve_attn_params p;
        sieve_attn_params_init(&p, (sieve_dtype)dt, 45, 12, 1, 16, 24, 300);
        p.pos0 = 240;
        aprob pr;
        prob_random(&pr, &p, 1.0f, 90 + dt);
        const char *specs[] = {"cpu:1", "cpu:2", "cpu:3"};
        aresult first;
        memset(&first, 0, sizeof first);
        for (int i = 0; i < 3; i++) {
            sieve_device *dev = open_cpu(specs[i]);
            char what[64];
            snprintf(what, sizeof what, "%s %s", sieve_dtype_name(p.dtype), specs[i]);
            aresult r;
            if (i == 0) {
                run(dev, &pr, &r, what);
                check_vs_reference(&pr, &r, what);
                first = r;
            } else {
                run_cpu(dev, &pr, &r, what);
                assert_same_tokens(p.q_heads, p.v_dim, first.out, first.lse, 0, r.out, r.lse, 0,
                                   p.n_queries, what);
                result_free(&r);
            }
            sieve_device_close(dev);
        }
        sieve_device *dev = open_cpu("cpu:2");
        const size_t no = (size_t)p.n_queries * p.q_heads * p.v_dim;
        float *out = malloc(no * sizeof *out);
        cr_assert_not_null(out);
        char scratch[8];
        cr_assert_eq(sieve_causal_attention(dev, &pr.p, pr.q, pr.keys, pr.values, scratch + 1, 3,
                                            out, NULL, NULL),
                     0);
        assert_same_tokens(p.q_heads, p.v_dim, first.out, NULL, 0, out, NULL, 0, p.n_queries,
                           "no lse, no ms");
        free(out);
        sieve_device_close(dev);
        result_free(&first);
        prob_free(&pr);
    }
}

/* ---------------------------------------------------------------- stability */

/* A prefill of 16 tokens with q.k_s = 10000 + 50 s: exp of the raw scores would overflow
 * (or underflow to 0/0 with scale -1); the max-subtracted softmax stays finite and within
 * the tolerance. With scale 1 token t's newest key t takes all the weight (lse 10000 +
 * 50 t), with scale -1 key 0 does (lse -10000). */
Test(attn_stability, large_scores) {
    sieve_device *dev = open_cpu("cpu:2");
    for (int dt = 0; dt < 3; dt++)
        for (int sg = 0; sg < 2; sg++) {
            const uint32_t L = 16, D = 4, Dv = 3;
            sieve_attn_params p;
            sieve_attn_params_init(&p, (sieve_dtype)dt, L, 1, 1, D, Dv, L);
            p.scale = sg == 0 ? 1.0f : -1.0f;
            aprob pr;
            prob_alloc(&pr, &p);
            float q[16 * 4], k[16 * 4], v[16 * 3];
            for (int i = 0; i < 16 * 4; i++) q[i] = 50.0f;
            for (uint32_t s = 0; s < L; s++) { /* q.k_s = 10000 + 50 s */
                k[s * D + 0] = 50.0f + (float)s;
                k[s * D + 1] = k[s * D + 2] = k[s * D + 3] = 50.0f;
                for (uint32_t j = 0; j < Dv; j++)
                    v[s * Dv + j] = (float)(s + 1) * (j == 1 ? -1.0f : 1.0f);
            }
            prob_store(&pr, q, k, v);
            char what[64];
            snprintf(what, sizeof what, "%s scale %g", sieve_dtype_name(p.dtype),
                     (double)p.scale);
            aresult r;
            run(dev, &pr, &r, what);
            check_vs_reference(&pr, &r, what);
            for (uint32_t t = 0; t < L; t++) {
                const uint32_t top = sg == 0 ? t : 0;
                const double lw = sg == 0 ? 10000.0 + 50.0 * t : -10000.0;
                cr_assert(isfinite(r.lse[t]), "%s: token %u lse %g", what, t, r.lse[t]);
                cr_assert(fabs(r.rlse[t] - lw) <= 1e-9 * fabs(lw), "%s: reference lse %.17g",
                          what, r.rlse[t]);
                /* float32 scores near 1e4 carry an ulp of 2^-10 */
                cr_assert(fabs(r.lse[t] - lw) <= 4e-3, "%s: token %u lse %.9g, want about %.1f",
                          what, t, r.lse[t], lw);
                for (uint32_t j = 0; j < Dv; j++) {
                    const float got = r.out[t * Dv + j], want = pr.vf[top * Dv + j];
                    cr_assert(isfinite(got) && fabs(got - want) <= 1e-6 * fabs(want),
                              "%s: token %u out[%u] %.9g, want key %u's value %.9g", what, t, j,
                              got, top, want);
                }
            }
            result_free(&r);
            prob_free(&pr);
        }
    sieve_device_close(dev);
}

/* ---------------------------------------------------------------- arguments */

#define SENT_OUT 12345.0f
#define SENT_LSE -777.0f
#define SENT_MS -5.0

static void fill_sentinels(float *out, size_t no, float *lse, size_t nl, double *ms) {
    for (size_t i = 0; i < no; i++) out[i] = SENT_OUT;
    for (size_t i = 0; i < nl; i++) lse[i] = SENT_LSE;
    *ms = SENT_MS;
}

static void assert_sentinels(const float *out, size_t no, const float *lse, size_t nl,
                             double ms, const char *what) {
    for (size_t i = 0; i < no; i++)
        cr_assert(out[i] == SENT_OUT, "%s: out[%zu] written (%g)", what, i, out[i]);
    for (size_t i = 0; i < nl; i++)
        cr_assert(lse[i] == SENT_LSE, "%s: lse[%zu] written (%g)", what, i, lse[i]);
    cr_assert(ms == SENT_MS, "%s: ms written (%g)", what, ms);
}

Test(attn_errors, params_init_and_scratch) {
    sieve_attn_params p;
    memset(&p, 0xa5, sizeof p);
    sieve_attn_params_init(&p, SIEVE_DTYPE_BF16, 3, 8, 2, 64, 32, 1000);
    cr_assert_eq(p.dtype, SIEVE_DTYPE_BF16);
    cr_assert(p.n_queries == 3 && p.q_heads == 8 && p.kv_heads == 2 && p.head_dim == 64 &&
              p.v_dim == 32 && p.n_keys == 1000);
    cr_assert_eq(p.pos0, 0);
    cr_assert(p.scale == 0.0f && !signbit(p.scale));
    sieve_attn_params_init(NULL, SIEVE_DTYPE_F32, 1, 1, 1, 1, 1, 1); /* no crash */

    sieve_device *dev = open_cpu("cpu:2");
    size_t bytes = 99;
    cr_assert_eq(sieve_causal_attn_scratch_size(dev, &p, &bytes), 0);
    cr_assert_eq(bytes, 0, "the CPU needs no scratch");
    p.pos0 = 5000;
    bytes = 99;
    cr_assert_eq(sieve_causal_attn_scratch_size(dev, &p, &bytes), 0);
    cr_assert_eq(bytes, 0);
    cr_assert_eq(sieve_causal_attn_scratch_size(NULL, &p, &bytes), SIEVE_EINVAL);
    cr_assert_eq(sieve_causal_attn_scratch_size(dev, NULL, &bytes), SIEVE_EINVAL);
    cr_assert_eq(sieve_causal_attn_scratch_size(dev, &p, NULL), SIEVE_EINVAL);
    p.kv_heads = 3;
    bytes = 99;
    cr_assert_eq(sieve_causal_attn_scratch_size(dev, &p, &bytes), SIEVE_EINVAL);
    cr_assert_eq(bytes, 99, "untouched on error");
    sieve_device_close(dev);
}

Test(attn_errors, bad_arguments) {
    sieve_device *dev = open_cpu("cpu:2");
    sieve_attn_params p;
    sieve_attn_params_init(&p, SIEVE_DTYPE_F32, 2, 4, 2, 4, 3, 6);
    p.pos0 = 3;
    float q[2 * 4 * 4], keys[6 * 2 * 4], values[6 * 2 * 3];
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) q[i] = (float)(i % 5) - 1.0f;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) keys[i] = (float)(i % 7) - 2.0f;
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) values[i] = (float)(i % 3);
    enum { NO = 2 * 4 * 3, NL = 2 * 4 };
    float out[NO], lse[NL];
    double rout[NO], rlse[NL], ms;

#define ATTN(pp, qq, kk, vv, oo) sieve_causal_attention(dev, pp, qq, kk, vv, NULL, 0, oo, lse, &ms)
    fill_sentinels(out, NO, lse, NL, &ms);
    cr_assert_eq(sieve_causal_attention(NULL, &p, q, keys, values, NULL, 0, out, lse, &ms),
                 SIEVE_EINVAL);
    cr_assert_eq(ATTN(NULL, q, keys, values, out), SIEVE_EINVAL);
    cr_assert_eq(ATTN(&p, NULL, keys, values, out), SIEVE_EINVAL);
    cr_assert_eq(ATTN(&p, q, NULL, values, out), SIEVE_EINVAL);
    cr_assert_eq(ATTN(&p, q, keys, NULL, out), SIEVE_EINVAL);
    cr_assert_eq(ATTN(&p, q, keys, values, NULL), SIEVE_EINVAL);
    assert_sentinels(out, NO, lse, NL, ms, "NULL pointers");
    cr_assert_eq(sieve_causal_attention_reference(NULL, q, keys, values, rout, rlse),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_causal_attention_reference(&p, NULL, keys, values, rout, rlse),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_causal_attention_reference(&p, q, NULL, values, rout, rlse),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_causal_attention_reference(&p, q, keys, NULL, rout, rlse), SIEVE_EINVAL);
    cr_assert_eq(sieve_causal_attention_reference(&p, q, keys, values, NULL, rlse),
                 SIEVE_EINVAL);

    /* bad parameters, each on its own */
    for (int c = 0; c < 21; c++) {
        sieve_attn_params b = p;
        switch (c) {
        case 0: b.n_queries = 0; break;
        case 1: b.q_heads = 0; break;
        case 2: b.kv_heads = 0; break;
        case 3: b.head_dim = 0; break;
        case 4: b.v_dim = 0; break;
        case 5: b.n_keys = 0; break;
        case 6: b.q_heads = 3; break;  /* not a multiple of kv_heads 2 */
        case 7: b.kv_heads = 8; break; /* more kv heads than q heads */
        case 8: b.scale = NAN; break;
        case 9: b.scale = -NAN; break;
        case 10: b.scale = INFINITY; break;
        case 11: b.scale = -INFINITY; break;
        case 12: b.n_keys = 0x80000000u; break; /* past INT32_MAX */
        case 13: b.n_keys = UINT32_MAX; break;
        case 14: b.dtype = (sieve_dtype)3; break;
        case 15: b.dtype = (sieve_dtype)99; break;
        case 16: /* q: T Hq D esz past size_t */
            b.n_queries = UINT32_MAX;
            b.q_heads = UINT32_MAX;
            b.kv_heads = 1;
            b.head_dim = UINT32_MAX;
            break;
        case 17: /* keys: L Hkv D esz past size_t (q fits) */
            b.n_queries = 1;
            b.q_heads = b.kv_heads = 1u << 20;
            b.head_dim = 1u << 20;
            b.n_keys = INT32_MAX;
            break;
        case 18: /* values: L Hkv Dv esz past size_t (q and keys fit) */
            b.dtype = SIEVE_DTYPE_F16;
            b.n_queries = 1;
            b.q_heads = b.kv_heads = UINT32_MAX;
            b.head_dim = 1;
            b.v_dim = 2;
            b.n_keys = INT32_MAX;
            break;
        case 19: /* out: T Hq Dv 4 past size_t (q with float16 fits) */
            b.dtype = SIEVE_DTYPE_F16;
            b.n_queries = 0x80000000u;
            b.q_heads = 0x80000000u;
            b.kv_heads = 1;
            b.head_dim = 1;
            b.v_dim = 1;
            break;
        case 20: /* out past size_t through v_dim alone (q, keys, values fit) */
            b.n_queries = 1u << 16;
            b.q_heads = 1u << 16;
            b.kv_heads = 1;
            b.head_dim = 1;
            b.v_dim = 1u << 30;
            break;
        }
        char what[32];
        snprintf(what, sizeof what, "case %d", c);
        fill_sentinels(out, NO, lse, NL, &ms);
        cr_assert_eq(ATTN(&b, q, keys, values, out), SIEVE_EINVAL, "%s", what);
        assert_sentinels(out, NO, lse, NL, ms, what);
        for (int i = 0; i < NO; i++) rout[i] = 321.0;
        cr_assert_eq(sieve_causal_attention_reference(&b, q, keys, values, rout, rlse),
                     SIEVE_EINVAL, "%s", what);
        for (int i = 0; i < NO; i++) cr_assert(rout[i] == 321.0, "%s: reference wrote", what);
        size_t bytes = 99;
        cr_assert_eq(sieve_causal_attn_scratch_size(dev, &b, &bytes), SIEVE_EINVAL, "%s", what);
        cr_assert_eq(bytes, 99, "%s", what);
        cr_assert_eq(sieve__check_attn_params(&b), SIEVE_EINVAL, "%s", what);
    }
    cr_assert_eq(sieve__check_attn_params(NULL), SIEVE_EINVAL);

    /* the edges that are allowed, and the good call (so the errors above were about the
     * arguments): n_keys = INT32_MAX, any pos0, negative scale, q_heads == kv_heads */
    sieve_attn_params ok = p;
    ok.n_keys = INT32_MAX;
    cr_assert_eq(sieve__check_attn_params(&ok), 0);
    ok = p;
    ok.pos0 = UINT32_MAX;
    ok.scale = -2.0f;
    cr_assert_eq(sieve__check_attn_params(&ok), 0);
    ok = p;
    ok.q_heads = ok.kv_heads = 4;
    cr_assert_eq(sieve__check_attn_params(&ok), 0);
    ok.scale = FLT_MAX;
    cr_assert_eq(sieve__check_attn_params(&ok), 0);
    fill_sentinels(out, NO, lse, NL, &ms);
    cr_assert_eq(ATTN(&p, q, keys, values, out), 0);
    for (int i = 0; i < NO; i++) cr_assert(out[i] != SENT_OUT && isfinite(out[i]), "out[%d]", i);
    for (int i = 0; i < NL; i++) cr_assert(lse[i] != SENT_LSE && isfinite(lse[i]), "lse[%d]", i);
    cr_assert(ms != SENT_MS && isfinite(ms) && ms >= 0.0, "ms %g", ms);
    cr_assert_eq(sieve_causal_attention_reference(&p, q, keys, values, rout, NULL), 0);
    for (int i = 0; i < NO; i++)
        cr_assert(fabs(out[i] - rout[i]) <= 1e-5 * (1.0 + fabs(rout[i])), "out[%d] %g vs %g", i,
                  out[i], rout[i]);
#undef ATTN
    sieve_device_close(dev);
}

/* The call's wall time: positive on a problem that takes measurable work, and the value of
 * the call's own span (between two clock reads around it). */
Test(attn_errors, wall_time) {
    sieve_device *dev = open_cpu("cpu:2");
    sieve_attn_params p;
    sieve_attn_params_init(&p, SIEVE_DTYPE_BF16, 128, 4, 2, 64, 64, 128);
    aprob pr;
    prob_random(&pr, &p, 1.0f, 5);
    aresult r;
    const double t0 = sieve__now_ms();
    run_cpu(dev, &pr, &r, "wall time");
    const double span = sieve__now_ms() - t0;
    cr_assert(r.ms > 0.0 && r.ms <= span, "ms %g, span around the call %g", r.ms, span);
    result_free(&r);
    prob_free(&pr);
    sieve_device_close(dev);
}

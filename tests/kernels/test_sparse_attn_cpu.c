/* test_sparse_attn_cpu.c: grouped sparse attention on the CPU (sieve_sparse_attention,
 * sieve_sparse_attention_reference). The CPU must agree with the float64 reference within
 * the float32 bound below on every dtype and on GQA shapes; the reference must agree with
 * the test's own float64 attention and with closed forms; padding, out-of-range entries,
 * duplicates and the order of a row must not change the answer (bit for bit); group and the
 * worker count must not change it either, while the statistics count the sets and unions
 * exactly; large scores must not overflow; bad arguments must give SIEVE_EINVAL and leave
 * the outputs alone. Must not: build expected values with the code under test (sets, unions
 * and float64 attention are computed here, by other means: a mark array over the keys).
 *
 * The tolerance. Both sides read the same stored values, exact in float32 and double, so
 * the dtype adds no error. For query head h of token t with set S (n = |S| keys) let
 * s_j = scale q.k_j (double), B_j = sum_d |q_d k_j,d|, w_j = the float64 softmax weights,
 * M = max s_j, u = 2^-24. The CPU's float32 exponent s32_j - m32 differs from s_j - M, up to
 * a shift common to every j (which the softmax ignores), by at most
 *     e_j = |scale| (D + 4) u B_j      (a D-term float32 dot, gamma_D; the product with the
 *                                       float scale and the float scale itself, 2u)
 *         + u (M - s_j)                 (rounding the difference before expf)
 *         + 2u                          (expf within an ulp)
 * Perturbing the exponents by e_j moves the weights by sum_j |w'_j - w_j| <= 2 sum_j w_j e_j
 * to first order, and the n-term float32 sums l and sum e_j v_j and the division add
 * (2n + 2) u relative. With V = max |v| over the set's value rows (of kv head g):
 *     |out32 - out64| <= V (2.5 W + (2n + 8) u),                   W = sum_j w_j e_j
 *     |lse32 - lse64| <= 1.5 W + (n + 8) u + 2 u (|lse64| + log n + 1)
 * (log-sum-exp moves by at most W under those perturbations; logf and the final sum round
 * once each). The factors 2.5 and 1.5 leave room for the second-order terms, which stay
 * below 1% for every W here (W < 1e-2 even at scores of 1e4). This bound is rigorous and
 * scale-aware (it grows with |scores| as float32 must), where a fixed 1e-5 (1 + V) is
 * neither: it would be too loose for small scores and too tight at 1e4.
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

/* ---------------------------------------------------------------- problems */

typedef struct aprob {
    sieve_sparse_attn_params p;
    void *q, *keys, *values;   /* stored, in p.dtype */
    float *qf, *kf, *vf;       /* the stored values as float32 (exact) */
    int32_t *idx;
} aprob;

/* Allocates a problem of p's shape with zero inputs and zero idx. */
static void prob_alloc(aprob *pr, const sieve_sparse_attn_params *p) {
    memset(pr, 0, sizeof *pr);
    pr->p = *p;
    const size_t esz = sieve_dtype_size(p->dtype);
    const size_t nq = (size_t)p->n_queries * p->q_heads * p->head_dim;
    const size_t nk = (size_t)p->n_keys * p->kv_heads * p->head_dim;
    const size_t nv = (size_t)p->n_keys * p->kv_heads * p->v_dim;
    pr->q = calloc(nq, esz);
    pr->keys = calloc(nk, esz);
    pr->values = calloc(nv, esz);
    pr->qf = calloc(nq, sizeof(float));
    pr->kf = calloc(nk, sizeof(float));
    pr->vf = calloc(nv, sizeof(float));
    pr->idx = calloc((size_t)p->n_queries * p->k, sizeof(int32_t));
    cr_assert(pr->q && pr->keys && pr->values && pr->qf && pr->kf && pr->vf && pr->idx);
}

/* Stores float32 inputs (q, keys, values; NULL keeps the current ones) in p.dtype and keeps
 * the stored values' float32 copies. */
static void prob_store(aprob *pr, const float *q, const float *k, const float *v) {
    const sieve_sparse_attn_params *p = &pr->p;
    const size_t nq = (size_t)p->n_queries * p->q_heads * p->head_dim;
    const size_t nk = (size_t)p->n_keys * p->kv_heads * p->head_dim;
    const size_t nv = (size_t)p->n_keys * p->kv_heads * p->v_dim;
    if (q) {
        sieve_convert_from_f32(p->dtype, q, pr->q, nq);
        sieve_convert_to_f32(p->dtype, pr->q, pr->qf, nq);
    }
    if (k) {
        sieve_convert_from_f32(p->dtype, k, pr->keys, nk);
        sieve_convert_to_f32(p->dtype, pr->keys, pr->kf, nk);
    }
    if (v) {
        sieve_convert_from_f32(p->dtype, v, pr->values, nv);
        sieve_convert_to_f32(p->dtype, pr->values, pr->vf, nv);
    }
}

static void prob_free(aprob *pr) {
    free(pr->q);
    free(pr->keys);
    free(pr->values);
    free(pr->qf);
    free(pr->kf);
    free(pr->vf);
    free(pr->idx);
    memset(pr, 0, sizeof *pr);
}

typedef enum imode {
    IDX_MIXED,  /* random keys with -1 padding, duplicates and out-of-range entries */
    IDX_WINDOW, /* keys near 4 t: neighbouring tokens' sets overlap */
} imode;

/* Gaussian q, keys and values (values times vscale) and idx rows of mode m. */
static void prob_random(aprob *pr, const sieve_sparse_attn_params *p, imode m, float vscale,
                        uint64_t seed) {
    prob_alloc(pr, p);
    const size_t nq = (size_t)p->n_queries * p->q_heads * p->head_dim;
    const size_t nk = (size_t)p->n_keys * p->kv_heads * p->head_dim;
    const size_t nv = (size_t)p->n_keys * p->kv_heads * p->v_dim;
    float *q = malloc(nq * sizeof *q), *k = malloc(nk * sizeof *k), *v = malloc(nv * sizeof *v);
    cr_assert(q && k && v);
    kt_rng r = {seed * 6151 + 3};
    for (size_t i = 0; i < nq; i++) q[i] = kt_gauss(&r);
    for (size_t i = 0; i < nk; i++) k[i] = kt_gauss(&r);
    for (size_t i = 0; i < nv; i++) v[i] = vscale * kt_gauss(&r);
    prob_store(pr, q, k, v);
    free(q);
    free(k);
    free(v);
    const uint32_t L = p->n_keys, K = p->k;
    for (uint32_t t = 0; t < p->n_queries; t++) {
        int32_t *row = pr->idx + (size_t)t * K;
        for (uint32_t i = 0; i < K; i++) {
            const double x = kt_uniform(&r);
            if (m == IDX_WINDOW) {
                const int64_t c = (int64_t)4 * t + (int64_t)(kt_next(&r) % 61) - 30;
                row[i] = c >= 0 && c < (int64_t)L ? (int32_t)c : -1;
            } else if (x < 0.70 || i == 0) {
                row[i] = (int32_t)(kt_next(&r) % L);
            } else if (x < 0.80) {
                row[i] = row[kt_next(&r) % i]; /* a duplicate */
            } else if (x < 0.90) {
                row[i] = -1;
            } else if (x < 0.95) {
                row[i] = (int32_t)(L + kt_next(&r) % 10); /* n_keys and past it */
            } else {
                row[i] = x < 0.975 ? INT32_MIN : -2;
            }
        }
    }
}

/* ---------------------------------------------------------------- the test's own float64 */

/* S_t by a mark array over the keys: ascending positions into set; returns |S_t|. */
static uint32_t own_set(const aprob *pr, uint32_t t, uint8_t *mark, uint32_t *set) {
    const sieve_sparse_attn_params *p = &pr->p;
    memset(mark, 0, p->n_keys);
    for (uint32_t i = 0; i < p->k; i++) {
        const int32_t e = pr->idx[(size_t)t * p->k + i];
        if (e >= 0 && (int64_t)e < (int64_t)p->n_keys) mark[e] = 1;
    }
    uint32_t n = 0;
    for (uint32_t s = 0; s < p->n_keys; s++)
        if (mark[s]) set[n++] = s;
    return n;
}

/* The test's float64 attention of head h of token t over set (n keys), and the bounds of
 * the file comment (kt_attend64). */
typedef kt_attend_result own_result;

static own_result own_attend(const aprob *pr, uint32_t t, uint32_t h, const uint32_t *set,
                             uint32_t n, double *out) {
    const sieve_sparse_attn_params *p = &pr->p;
    const double scale = p->scale == 0.0f ? 1.0 / sqrt((double)p->head_dim) : (double)p->scale;
    return kt_attend64(pr->qf + ((size_t)t * p->q_heads + h) * p->head_dim, pr->kf, pr->vf,
                       p->kv_heads, h / (p->q_heads / p->kv_heads), p->head_dim, p->v_dim, scale,
                       set, n, out);
}

/* ---------------------------------------------------------------- running */

typedef struct aresult {
    float *out, *lse;
    double *rout, *rlse; /* the reference */
    sieve_sparse_attn_stats st;
} aresult;

static void result_alloc(aresult *r, const sieve_sparse_attn_params *p) {
    const size_t th = (size_t)p->n_queries * p->q_heads;
    r->out = malloc(th * p->v_dim * sizeof *r->out);
    r->lse = malloc(th * sizeof *r->lse);
    r->rout = malloc(th * p->v_dim * sizeof *r->rout);
    r->rlse = malloc(th * sizeof *r->rlse);
    cr_assert(r->out && r->lse && r->rout && r->rlse);
    memset(r->out, 0xa5, th * p->v_dim * sizeof *r->out); /* the call must overwrite it */
    memset(r->lse, 0xa5, th * sizeof *r->lse);
    memset(&r->st, 0xa5, sizeof r->st);
}

static void result_free(aresult *r) {
    free(r->out);
    free(r->lse);
    free(r->rout);
    free(r->rlse);
}

/* Runs the CPU and the reference on pr (with pr->p). */
static void run(sieve_device *dev, const aprob *pr, aresult *r, const char *what) {
    result_alloc(r, &pr->p);
    int rc = sieve_sparse_attention(dev, &pr->p, pr->q, pr->keys, pr->values, pr->idx, NULL, 0,
                                    r->out, r->lse, &r->st);
    cr_assert_eq(rc, 0, "%s: sieve_sparse_attention returned %d (%s)", what, rc,
                 sieve_strerror(rc));
    rc = sieve_sparse_attention_reference(&pr->p, pr->q, pr->keys, pr->values, pr->idx, r->rout,
                                          r->rlse);
    cr_assert_eq(rc, 0, "%s: reference returned %d (%s)", what, rc, sieve_strerror(rc));
}

/* Asserts: the reference equals the test's own float64 attention; the CPU is within the
 * tolerance of the file comment; empty sets give exactly 0 and -inf on both. Returns the
 * largest error / tolerance ratio seen (for the log). */
static double check_vs_reference(const aprob *pr, const aresult *r, const char *what) {
    const sieve_sparse_attn_params *p = &pr->p;
    const uint32_t Hq = p->q_heads, Dv = p->v_dim;
    uint8_t *mark = malloc(p->n_keys);
    uint32_t *set = malloc((size_t)p->k * sizeof *set);
    double *own = malloc((size_t)Dv * sizeof *own);
    cr_assert(mark && set && own);
    double worst = 0.0;
    for (uint32_t t = 0; t < p->n_queries; t++) {
        const uint32_t n = own_set(pr, t, mark, set);
        for (uint32_t h = 0; h < Hq; h++) {
            const size_t th = (size_t)t * Hq + h;
            const own_result o = own_attend(pr, t, h, set, n, own);
            const float *co = r->out + th * Dv;
            const double *ro = r->rout + th * Dv;
            if (n == 0) {
                for (uint32_t v = 0; v < Dv; v++) {
                    cr_assert(co[v] == 0.0f, "%s: token %u head %u (empty set): out[%u] = %g",
                              what, t, h, v, co[v]);
                    cr_assert(ro[v] == 0.0, "%s: token %u: reference out %g", what, t, ro[v]);
                }
                cr_assert(isinf(r->lse[th]) && r->lse[th] < 0,
                          "%s: token %u head %u (empty set): lse %g", what, t, h, r->lse[th]);
                cr_assert(isinf(r->rlse[th]) && r->rlse[th] < 0,
                          "%s: token %u: reference lse %g", what, t, r->rlse[th]);
                continue;
            }
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
    free(mark);
    free(set);
    free(own);
    return worst;
}

/* Asserts a and b bit-identical (out, and lse when both are given). */
static void assert_same_bits(const sieve_sparse_attn_params *p, const float *ao, const float *al,
                             const float *bo, const float *bl, const char *what) {
    const size_t th = (size_t)p->n_queries * p->q_heads;
    for (size_t i = 0; i < th * p->v_dim; i++)
        cr_assert_eq(memcmp(&ao[i], &bo[i], sizeof(float)), 0,
                     "%s: out[%zu] (token %zu): %.9g vs %.9g", what, i,
                     i / ((size_t)p->q_heads * p->v_dim), ao[i], bo[i]);
    if (al && bl)
        for (size_t i = 0; i < th; i++)
            cr_assert_eq(memcmp(&al[i], &bl[i], sizeof(float)), 0, "%s: lse[%zu]: %.9g vs %.9g",
                         what, i, al[i], bl[i]);
}

/* The test's own statistics: sum |S_t| and the sum over groups of the union's size. */
static void own_stats(const aprob *pr, uint32_t group, uint64_t *member, uint64_t *uni) {
    const sieve_sparse_attn_params *p = &pr->p;
    uint8_t *mark = malloc(p->n_keys), *gmark = malloc(p->n_keys);
    uint32_t *set = malloc((size_t)p->k * sizeof *set);
    cr_assert(mark && gmark && set);
    *member = 0;
    *uni = 0;
    for (uint32_t t0 = 0; t0 < p->n_queries; t0 += group) {
        memset(gmark, 0, p->n_keys);
        for (uint32_t t = t0; t < t0 + group && t < p->n_queries; t++) {
            const uint32_t n = own_set(pr, t, mark, set);
            *member += n;
            for (uint32_t j = 0; j < n; j++) gmark[set[j]] = 1;
        }
        for (uint32_t s = 0; s < p->n_keys; s++) *uni += gmark[s];
    }
    free(mark);
    free(gmark);
    free(set);
}

static void assert_stats(const aprob *pr, const sieve_sparse_attn_stats *st, const char *what) {
    const sieve_sparse_attn_params *p = &pr->p;
    uint64_t member, uni;
    own_stats(pr, p->group, &member, &uni);
    const uint64_t groups = ((uint64_t)p->n_queries + p->group - 1) / p->group;
    cr_assert_eq(st->groups, groups, "%s: groups %llu, want %llu", what,
                 (unsigned long long)st->groups, (unsigned long long)groups);
    cr_assert_eq(st->member_entries, member, "%s: member_entries %llu, want %llu", what,
                 (unsigned long long)st->member_entries, (unsigned long long)member);
    cr_assert_eq(st->union_entries, uni, "%s: union_entries %llu, want %llu", what,
                 (unsigned long long)st->union_entries, (unsigned long long)uni);
    cr_assert(st->union_entries <= st->member_entries, "%s: a union larger than its members",
              what);
    cr_assert(isfinite(st->ms_prepare) && st->ms_prepare >= 0.0, "%s: ms_prepare %g", what,
              st->ms_prepare);
    cr_assert(isfinite(st->ms_attend) && st->ms_attend >= 0.0, "%s: ms_attend %g", what,
              st->ms_attend);
    cr_assert(isfinite(st->ms_total) && st->ms_total >= st->ms_prepare + st->ms_attend - 1e-6,
              "%s: ms_total %g < prepare %g + attend %g", what, st->ms_total, st->ms_prepare,
              st->ms_attend);
}

/* ---------------------------------------------------------------- against the reference */

typedef struct ashape {
    uint32_t T, Hq, Hkv, D, Dv, L, k, group;
    float scale;
} ashape;

static const ashape shapes[] = {
    {37, 8, 2, 24, 40, 300, 48, 16, 0.0f},  /* GQA 4:1, D != Dv, T not a multiple of group */
    {5, 3, 3, 7, 5, 50, 9, 2, 0.7f},        /* MHA, odd sizes, explicit scale */
    {9, 4, 1, 16, 8, 1000, 64, 32, -0.3f},  /* MQA, negative scale, one group */
    {3, 2, 1, 128, 128, 2000, 512, 1, 0.0f}, /* wide heads, long sets, group 1 */
};

static void vs_reference(sieve_dtype dtype) {
    sieve_device *dev = open_cpu("cpu:2");
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const ashape *sh = &shapes[si];
        sieve_sparse_attn_params p;
        sieve_sparse_attn_params_init(&p, dtype, sh->T, sh->Hq, sh->Hkv, sh->D, sh->Dv, sh->L,
                                      sh->k);
        p.group = sh->group;
        p.scale = sh->scale;
        aprob pr;
        prob_random(&pr, &p, IDX_MIXED, 2.0f, 100 * si + dtype);
        if (p.n_queries > 5) /* token 5 lists only padding */
            for (uint32_t i = 0; i < p.k; i++) pr.idx[5 * (size_t)p.k + i] = -1;
        char what[128];
        snprintf(what, sizeof what, "%s T=%u Hq=%u Hkv=%u D=%u Dv=%u L=%u k=%u g=%u scale=%g",
                 sieve_dtype_name(dtype), sh->T, sh->Hq, sh->Hkv, sh->D, sh->Dv, sh->L, sh->k,
                 sh->group, (double)sh->scale);
        aresult r;
        run(dev, &pr, &r, what);
        const double worst = check_vs_reference(&pr, &r, what);
        assert_stats(&pr, &r.st, what);
        if (getenv("KT_VERBOSE"))
            fprintf(stderr, "%-70s worst err/tol %.3g  ms %.3f\n", what, worst, r.st.ms_total);
        result_free(&r);
        prob_free(&pr);
    }
    sieve_device_close(dev);
}

Test(sparse_attn_reference, f32) { vs_reference(SIEVE_DTYPE_F32); }
Test(sparse_attn_reference, f16) { vs_reference(SIEVE_DTYPE_F16); }
Test(sparse_attn_reference, bf16) { vs_reference(SIEVE_DTYPE_BF16); }

/* ---------------------------------------------------------------- closed forms */

/* One token, one head, keys and values chosen so the scores are known: out and lse against
 * their closed forms, on every dtype (every number below is exact in float16 and bfloat16). */
Test(sparse_attn_exact, closed_forms) {
    sieve_device *dev = open_cpu("cpu:1");
    for (int dt = 0; dt < 3; dt++) {
        /* D = 1, scale 0 = 1 / sqrt(1): scores 2 and 0 */
        {
            sieve_sparse_attn_params p;
            sieve_sparse_attn_params_init(&p, (sieve_dtype)dt, 1, 1, 1, 1, 1, 2, 2);
            aprob pr;
            prob_alloc(&pr, &p);
            const float q[] = {1.0f}, k[] = {2.0f, 0.0f}, v[] = {1.0f, 3.0f};
            prob_store(&pr, q, k, v);
            pr.idx[0] = 0;
            pr.idx[1] = 1;
            aresult r;
            run(dev, &pr, &r, "D=1");
            const double e2 = exp(2.0);
            const double want = (e2 * 1.0 + 1.0 * 3.0) / (e2 + 1.0), lw = log(e2 + 1.0);
            cr_assert(fabs(r.rout[0] - want) <= 4 * DBL_EPSILON * want,
                      "%s: reference out %.17g, closed form %.17g", sieve_dtype_name(p.dtype),
                      r.rout[0], want);
            cr_assert(fabs(r.rlse[0] - lw) <= 4 * DBL_EPSILON * lw,
                      "reference lse %.17g, closed form %.17g", r.rlse[0], lw);
            cr_assert(fabs((double)r.out[0] - want) <= 8 * FLT_EPSILON * want,
                      "%s: out %.9g, closed form %.17g", sieve_dtype_name(p.dtype), r.out[0],
                      want);
            cr_assert(fabs((double)r.lse[0] - lw) <= 8 * FLT_EPSILON * lw,
                      "%s: lse %.9g, closed form %.17g", sieve_dtype_name(p.dtype), r.lse[0], lw);
            result_free(&r);
            prob_free(&pr);
        }
        /* D = 4, Dv = 2, keys 0 and 2 listed (2 twice, key 1 not at all, padding between):
         * q.k0 = 3, q.k2 = -1; scale 0 = 1/2 gives scores 1.5 and -0.5, scale -1/4 gives
         * -0.75 and 0.25 */
        const float scales[] = {0.0f, -0.25f};
        for (int si = 0; si < 2; si++) {
            sieve_sparse_attn_params p;
            sieve_sparse_attn_params_init(&p, (sieve_dtype)dt, 1, 1, 1, 4, 2, 3, 4);
            p.scale = scales[si];
            aprob pr;
            prob_alloc(&pr, &p);
            const float q[] = {1.0f, 2.0f, -1.0f, 0.5f};
            const float k[] = {1, 1, 0, 0, 9, 9, 9, 9, 0, 0, 2, 2};
            const float v[] = {1.0f, -2.0f, 100.0f, 100.0f, 4.0f, 0.5f};
            prob_store(&pr, q, k, v);
            const int32_t row[] = {2, -1, 0, 2};
            memcpy(pr.idx, row, sizeof row);
            aresult r;
            run(dev, &pr, &r, "D=4");
            const double sc = si == 0 ? 0.5 : -0.25;
            const double a = exp(3.0 * sc), b = exp(-1.0 * sc);
            const double want[2] = {(a * 1.0 + b * 4.0) / (a + b), (a * -2.0 + b * 0.5) / (a + b)};
            const double lw = log(a + b);
            for (int j = 0; j < 2; j++) {
                cr_assert(fabs(r.rout[j] - want[j]) <= 8 * DBL_EPSILON * fabs(want[j]),
                          "scale %g: reference out[%d] %.17g, closed form %.17g", (double)sc, j,
                          r.rout[j], want[j]);
                cr_assert(fabs((double)r.out[j] - want[j]) <= 16 * FLT_EPSILON * 4.0,
                          "%s scale %g: out[%d] %.9g, closed form %.17g",
                          sieve_dtype_name(p.dtype), (double)sc, j, r.out[j], want[j]);
            }
            cr_assert(fabs(r.rlse[0] - lw) <= 8 * DBL_EPSILON * (1.0 + fabs(lw)),
                      "reference lse %.17g, closed form %.17g", r.rlse[0], lw);
            cr_assert(fabs((double)r.lse[0] - lw) <= 8 * FLT_EPSILON * (1.0 + fabs(lw)),
                      "%s scale %g: lse %.9g, closed form %.17g", sieve_dtype_name(p.dtype),
                      (double)sc, r.lse[0], lw);
            result_free(&r);
            prob_free(&pr);
        }
    }
    sieve_device_close(dev);
}

/* Query head h reads kv head h / (Hq / Hkv): with one key per token (weight exactly 1) out
 * is that kv head's value row, bit for bit, and lse the score. */
Test(sparse_attn_exact, gqa_head_mapping) {
    sieve_device *dev = open_cpu("cpu:2");
    for (int dt = 0; dt < 3; dt++) {
        sieve_sparse_attn_params p;
        sieve_sparse_attn_params_init(&p, (sieve_dtype)dt, 4, 6, 3, 5, 3, 4, 3);
        aprob pr;
        prob_random(&pr, &p, IDX_MIXED, 1.0f, 40 + dt);
        for (uint32_t t = 0; t < 4; t++) { /* token t lists key 3 - t once, then padding */
            pr.idx[(size_t)t * 3 + 0] = -1;
            pr.idx[(size_t)t * 3 + 1] = (int32_t)(3 - t);
            pr.idx[(size_t)t * 3 + 2] = 4; /* n_keys: out of range */
        }
        aresult r;
        run(dev, &pr, &r, "gqa mapping");
        check_vs_reference(&pr, &r, "gqa mapping");
        for (uint32_t t = 0; t < 4; t++)
            for (uint32_t h = 0; h < 6; h++) {
                const uint32_t g = h / 2, s = 3 - t;
                const float *want = pr.vf + ((size_t)s * 3 + g) * 3;
                const float *got = r.out + ((size_t)t * 6 + h) * 3;
                for (uint32_t v = 0; v < 3; v++)
                    cr_assert_eq(memcmp(&got[v], &want[v], 4), 0,
                                 "%s: token %u head %u: out[%u] %.9g, kv head %u's value %.9g",
                                 sieve_dtype_name(p.dtype), t, h, v, got[v], g, want[v]);
                double dot = 0.0, ab = 0.0;
                const float *qh = pr.qf + ((size_t)t * 6 + h) * 5, *ks = pr.kf + ((size_t)s * 3 + g) * 5;
                for (uint32_t d = 0; d < 5; d++) {
                    dot += (double)qh[d] * ks[d];
                    ab += fabs((double)qh[d] * ks[d]);
                }
                const double sc = dot / sqrt(5.0);
                cr_assert(fabs(r.lse[(size_t)t * 6 + h] - sc) <= 12 * U32 * ab / sqrt(5.0),
                          "token %u head %u: lse %.9g, score %.17g", t, h,
                          r.lse[(size_t)t * 6 + h], sc);
            }
        result_free(&r);
        prob_free(&pr);
    }
    sieve_device_close(dev);
}

/* ---------------------------------------------------------------- sets */

/* Padding (-1), out-of-range entries (n_keys, past it, INT32_MIN, INT32_MAX, other
 * negatives), duplicates and the order of a row change nothing: every token below lists the
 * set {3, 7, 11} for the same query and gets the same bits; rows of padding only give 0 and
 * -inf. The statistics count the sets and unions computed by hand. */
Test(sparse_attn_sets, padding_duplicates_and_order) {
    sieve_device *dev = open_cpu("cpu:2");
    for (int dt = 0; dt < 3; dt++) {
        const uint32_t T = 7, K = 8, L = 20, D = 8, Dv = 5, Hq = 2;
        sieve_sparse_attn_params p;
        sieve_sparse_attn_params_init(&p, (sieve_dtype)dt, T, Hq, 1, D, Dv, L, K);
        aprob pr;
        prob_random(&pr, &p, IDX_MIXED, 1.0f, 70 + dt);
        /* every token has token 0's query */
        const size_t qrow = (size_t)Hq * D, esz = sieve_dtype_size(p.dtype);
        for (uint32_t t = 1; t < T; t++) {
            memcpy((char *)pr.q + t * qrow * esz, pr.q, qrow * esz);
            memcpy(pr.qf + t * qrow, pr.qf, qrow * sizeof(float));
        }
        const int32_t rows[7][8] = {
            {3, 7, 11, -1, -1, -1, -1, -1},
            {11, -1, 7, 20, 3, INT32_MIN, 21, INT32_MAX},
            {7, 7, 3, 11, 3, 11, 7, 7},
            {-1, -1, -1, -1, -1, -1, -1, -1},
            {20, INT32_MIN, -5, INT32_MAX, 20, -1, 25, 1000},
            {3, 7, 11, 0, -1, -1, -1, -1}, /* one more key: differs */
            {11, 7, 3, 3, 3, 3, 3, 3},
        };
        memcpy(pr.idx, rows, sizeof rows);
        aresult r;
        run(dev, &pr, &r, "sets");
        check_vs_reference(&pr, &r, "sets");
        const size_t to = (size_t)Hq * Dv;
        const int same[] = {1, 2, 6};
        for (int i = 0; i < 3; i++) {
            char what[64];
            snprintf(what, sizeof what, "%s: token %d vs token 0", sieve_dtype_name(p.dtype),
                     same[i]);
            const sieve_sparse_attn_params one = {.n_queries = 1, .q_heads = Hq, .v_dim = Dv};
            assert_same_bits(&one, r.out, r.lse, r.out + same[i] * to, r.lse + same[i] * Hq,
                             what);
            for (size_t j = 0; j < to; j++)
                cr_assert(r.rout[j] == r.rout[same[i] * to + j], "%s: reference differs", what);
        }
        cr_assert(memcmp(r.out, r.out + 5 * to, to * sizeof(float)) != 0,
                  "token 5 lists key 0 too: its answer must differ");
        for (int t = 3; t <= 4; t++) {
            for (size_t j = 0; j < to; j++)
                cr_assert(r.out[t * to + j] == 0.0f && !signbit(r.out[t * to + j]),
                          "token %d (padding only): out %g", t, r.out[t * to + j]);
            for (uint32_t h = 0; h < Hq; h++)
                cr_assert(isinf(r.lse[t * Hq + h]) && r.lse[t * Hq + h] < 0,
                          "token %d: lse %g", t, r.lse[t * Hq + h]);
        }
        /* by hand: |S_t| = 3 3 3 0 0 4 3; one group of 16 holds the union {0, 3, 7, 11} */
        cr_assert_eq(r.st.groups, 1);
        cr_assert_eq(r.st.member_entries, 16);
        cr_assert_eq(r.st.union_entries, 4);
        assert_stats(&pr, &r.st, "sets");
        result_free(&r);

        /* group 2: {0,1} {2,3} {4,5} {6} -> unions 3, 3, 4, 3 */
        pr.p.group = 2;
        run(dev, &pr, &r, "sets g=2");
        cr_assert_eq(r.st.groups, 4);
        cr_assert_eq(r.st.member_entries, 16);
        cr_assert_eq(r.st.union_entries, 13);
        result_free(&r);
        /* group 1: the unions are the sets */
        pr.p.group = 1;
        run(dev, &pr, &r, "sets g=1");
        cr_assert_eq(r.st.groups, 7);
        cr_assert_eq(r.st.union_entries, 16);
        result_free(&r);
        prob_free(&pr);
    }
    sieve_device_close(dev);
}

/* ---------------------------------------------------------------- group and threads */

/* group 1, 7, 16 and 32 and 1, 2 or 3 workers give the same bits; the statistics count the
 * groups, members and unions as the test does. */
Test(sparse_attn_group, answer_independent_of_group_and_threads) {
    for (int dt = 0; dt < 3; dt++) {
        sieve_sparse_attn_params p;
        sieve_sparse_attn_params_init(&p, (sieve_dtype)dt, 45, 4, 2, 16, 24, 200, 32);
        aprob pr;
        prob_random(&pr, &p, IDX_WINDOW, 1.0f, 90 + dt);
        const uint32_t groups[] = {1, 7, 16, 32};
        const char *specs[] = {"cpu:2", "cpu:2", "cpu:1", "cpu:3"};
        aresult first;
        memset(&first, 0, sizeof first);
        uint64_t unions[4];
        for (int i = 0; i < 4; i++) {
            sieve_device *dev = open_cpu(specs[i]);
            pr.p.group = groups[i];
            char what[80];
            snprintf(what, sizeof what, "%s group %u %s", sieve_dtype_name(p.dtype), groups[i],
                     specs[i]);
            aresult r;
            run(dev, &pr, &r, what);
            assert_stats(&pr, &r.st, what);
            unions[i] = r.st.union_entries;
            if (i == 0) {
                check_vs_reference(&pr, &r, what);
                first = r;
            } else {
                assert_same_bits(&pr.p, first.out, first.lse, r.out, r.lse, what);
                result_free(&r);
            }
            sieve_device_close(dev);
        }
        /* overlapping windows: bigger groups share more */
        cr_assert(unions[0] > unions[1] && unions[1] > unions[2] && unions[2] > unions[3],
                  "unions %llu %llu %llu %llu", (unsigned long long)unions[0],
                  (unsigned long long)unions[1], (unsigned long long)unions[2],
                  (unsigned long long)unions[3]);
        /* the optional outputs: no lse, no stats, a scratch pointer the CPU ignores */
        sieve_device *dev = open_cpu("cpu:2");
        const size_t no = (size_t)p.n_queries * p.q_heads * p.v_dim;
        float *out = malloc(no * sizeof *out);
        cr_assert_not_null(out);
        char scratch[8];
        cr_assert_eq(sieve_sparse_attention(dev, &pr.p, pr.q, pr.keys, pr.values, pr.idx,
                                            scratch + 1, 3, out, NULL, NULL),
                     0);
        assert_same_bits(&pr.p, first.out, NULL, out, NULL, "no lse, no stats");
        free(out);
        sieve_device_close(dev);
        result_free(&first);
        prob_free(&pr);
    }
}

/* Unions counted exactly in two designed cases: the 16 tokens of a group share one set
 * (listed in other orders, with duplicates), and every token has a set of its own. */
Test(sparse_attn_group, union_counts) {
    sieve_device *dev = open_cpu("cpu:2");
    const uint32_t T = 32, K = 12, L = 200;
    sieve_sparse_attn_params p;
    sieve_sparse_attn_params_init(&p, SIEVE_DTYPE_BF16, T, 2, 1, 8, 8, L, K);
    aprob pr;
    prob_random(&pr, &p, IDX_MIXED, 1.0f, 123);
    /* shared: group 0 lists A = {10, 20, ..., 100}, group 1 lists B = {80, 90, ..., 170}
     * (|A| = |B| = 10, |A u B| = 17) */
    kt_rng rng = {9};
    for (uint32_t t = 0; t < T; t++) {
        int32_t *row = pr.idx + (size_t)t * K;
        const int32_t base = t < 16 ? 10 : 80;
        for (uint32_t i = 0; i < 10; i++) row[i] = base + 10 * (int32_t)i;
        row[10] = row[kt_next(&rng) % 10]; /* a duplicate */
        row[11] = -1;
        for (uint32_t i = K - 1; i > 0; i--) { /* shuffle */
            const uint32_t j = (uint32_t)(kt_next(&rng) % (i + 1));
            const int32_t x = row[i];
            row[i] = row[j];
            row[j] = x;
        }
    }
    const struct {
        uint32_t group;
        uint64_t groups, uni;
    } shared[] = {{16, 2, 20}, {32, 1, 17}, {1, 32, 320}, {8, 4, 40}, {7, 5, 10 * 3 + 17 + 10}};
    for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++) {
        pr.p.group = shared[i].group;
        aresult r;
        run(dev, &pr, &r, "shared");
        cr_assert_eq(r.st.groups, shared[i].groups, "group %u: groups %llu", shared[i].group,
                     (unsigned long long)r.st.groups);
        cr_assert_eq(r.st.member_entries, 320);
        cr_assert_eq(r.st.union_entries, shared[i].uni, "group %u: union_entries %llu, want %llu",
                     shared[i].group, (unsigned long long)r.st.union_entries,
                     (unsigned long long)shared[i].uni);
        assert_stats(&pr, &r.st, "shared");
        if (i == 0) check_vs_reference(&pr, &r, "shared");
        result_free(&r);
    }
    /* disjoint: token t lists keys 5t .. 5t + 4 (and padding): the union is the sum */
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t i = 0; i < K; i++)
            pr.idx[(size_t)t * K + i] = i < 5 ? (int32_t)(5 * t + i) : -1;
    const uint32_t dg[] = {1, 7, 16, 32};
    for (int i = 0; i < 4; i++) {
        pr.p.group = dg[i];
        aresult r;
        run(dev, &pr, &r, "disjoint");
        cr_assert_eq(r.st.member_entries, 160);
        cr_assert_eq(r.st.union_entries, 160, "group %u: union_entries %llu", dg[i],
                     (unsigned long long)r.st.union_entries);
        assert_stats(&pr, &r.st, "disjoint");
        result_free(&r);
    }
    prob_free(&pr);
    sieve_device_close(dev);
}

/* ---------------------------------------------------------------- stability */

/* Scores near +1e4 and -1e4: exp of the raw scores would overflow or underflow to 0/0; the
 * max-subtracted softmax stays finite and within the tolerance, and key 15 (50 above the
 * next score) takes all the weight (scale 1) or key 0 does (scale -1). */
Test(sparse_attn_stability, large_scores) {
    sieve_device *dev = open_cpu("cpu:2");
    for (int dt = 0; dt < 3; dt++)
        for (int sg = 0; sg < 2; sg++) {
            const uint32_t L = 16, D = 4, Dv = 3;
            sieve_sparse_attn_params p;
            sieve_sparse_attn_params_init(&p, (sieve_dtype)dt, 2, 1, 1, D, Dv, L, L);
            p.scale = sg == 0 ? 1.0f : -1.0f;
            aprob pr;
            prob_alloc(&pr, &p);
            float q[2 * 4], k[16 * 4], v[16 * 3];
            for (int i = 0; i < 8; i++) q[i] = 50.0f;
            for (uint32_t s = 0; s < L; s++) { /* q.k_s = 10000 + 50 s */
                k[s * D + 0] = 50.0f + (float)s;
                k[s * D + 1] = k[s * D + 2] = k[s * D + 3] = 50.0f;
                for (uint32_t j = 0; j < Dv; j++) v[s * Dv + j] = (float)(s + 1) * (j + 1 == 2 ? -1.0f : 1.0f);
            }
            prob_store(&pr, q, k, v);
            for (uint32_t t = 0; t < 2; t++)
                for (uint32_t i = 0; i < L; i++)
                    pr.idx[t * L + i] = t == 0 ? (int32_t)i : (int32_t)(L - 1 - i);
            char what[64];
            snprintf(what, sizeof what, "%s scale %g", sieve_dtype_name(p.dtype), (double)p.scale);
            aresult r;
            run(dev, &pr, &r, what);
            check_vs_reference(&pr, &r, what);
            const uint32_t top = sg == 0 ? 15 : 0;
            const double lw = sg == 0 ? 10750.0 : -10000.0;
            for (uint32_t t = 0; t < 2; t++) {
                cr_assert(isfinite(r.lse[t]), "%s: lse %g", what, r.lse[t]);
                cr_assert(fabs(r.rlse[t] - lw) <= 1e-9, "%s: reference lse %.17g", what,
                          r.rlse[t]);
                /* float32 scores near 1e4 carry an ulp of 2^-10 */
                cr_assert(fabs(r.lse[t] - lw) <= 4e-3, "%s: lse %.9g, want about %.1f", what,
                          r.lse[t], lw);
                for (uint32_t j = 0; j < Dv; j++) {
                    const float got = r.out[t * Dv + j], want = pr.vf[top * Dv + j];
                    cr_assert(isfinite(got) && fabs(got - want) <= 1e-6 * fabs(want),
                              "%s: token %u out[%u] %.9g, want key %u's value %.9g", what, t, j,
                              got, top, want);
                }
            }
            assert_same_bits(&(sieve_sparse_attn_params){.n_queries = 1, .q_heads = 1, .v_dim = Dv},
                             r.out, r.lse, r.out + Dv, r.lse + 1, "row order");
            result_free(&r);
            prob_free(&pr);
        }
    sieve_device_close(dev);
}

/* ---------------------------------------------------------------- arguments */

#define SENT_OUT 12345.0f
#define SENT_LSE -777.0f

static void fill_sentinels(float *out, size_t no, float *lse, size_t nl) {
    for (size_t i = 0; i < no; i++) out[i] = SENT_OUT;
    for (size_t i = 0; i < nl; i++) lse[i] = SENT_LSE;
}

static void assert_sentinels(const float *out, size_t no, const float *lse, size_t nl,
                             const char *what) {
    for (size_t i = 0; i < no; i++)
        cr_assert(out[i] == SENT_OUT, "%s: out[%zu] written (%g)", what, i, out[i]);
    for (size_t i = 0; i < nl; i++)
        cr_assert(lse[i] == SENT_LSE, "%s: lse[%zu] written (%g)", what, i, lse[i]);
}

Test(sparse_attn_errors, params_init_and_scratch) {
    sieve_sparse_attn_params p;
    memset(&p, 0xa5, sizeof p);
    sieve_sparse_attn_params_init(&p, SIEVE_DTYPE_BF16, 3, 8, 2, 64, 32, 1000, 7);
    cr_assert_eq(p.dtype, SIEVE_DTYPE_BF16);
    cr_assert(p.n_queries == 3 && p.q_heads == 8 && p.kv_heads == 2 && p.head_dim == 64 &&
              p.v_dim == 32 && p.n_keys == 1000 && p.k == 7);
    cr_assert_eq(p.group, 16);
    cr_assert(p.scale == 0.0f);
    sieve_sparse_attn_params_init(NULL, SIEVE_DTYPE_F32, 1, 1, 1, 1, 1, 1, 1); /* no crash */

    sieve_device *dev = open_cpu("cpu:2");
    size_t bytes = 99;
    cr_assert_eq(sieve_sparse_attn_scratch_size(dev, &p, &bytes), 0);
    cr_assert_eq(bytes, 0, "the CPU needs no scratch");
    cr_assert_eq(sieve_sparse_attn_scratch_size(NULL, &p, &bytes), SIEVE_EINVAL);
    cr_assert_eq(sieve_sparse_attn_scratch_size(dev, NULL, &bytes), SIEVE_EINVAL);
    cr_assert_eq(sieve_sparse_attn_scratch_size(dev, &p, NULL), SIEVE_EINVAL);
    p.group = 0;
    bytes = 99;
    cr_assert_eq(sieve_sparse_attn_scratch_size(dev, &p, &bytes), SIEVE_EINVAL);
    cr_assert_eq(bytes, 99, "untouched on error");
    sieve_device_close(dev);
}

Test(sparse_attn_errors, bad_arguments) {
    sieve_device *dev = open_cpu("cpu:2");
    sieve_sparse_attn_params p;
    sieve_sparse_attn_params_init(&p, SIEVE_DTYPE_F32, 2, 4, 2, 4, 3, 6, 3);
    float q[2 * 4 * 4], keys[6 * 2 * 4], values[6 * 2 * 3];
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) q[i] = (float)(i % 5) - 1.0f;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) keys[i] = (float)(i % 7) - 2.0f;
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) values[i] = (float)(i % 3);
    const int32_t idx[2 * 3] = {0, 5, -1, 2, 2, 3};
    enum { NO = 2 * 4 * 3, NL = 2 * 4 };
    float out[NO], lse[NL];
    double rout[NO], rlse[NL];
    sieve_sparse_attn_stats st;

#define ATTN(pp, qq, kk, vv, ii, oo) \
    sieve_sparse_attention(dev, pp, qq, kk, vv, ii, NULL, 0, oo, lse, &st)
    fill_sentinels(out, NO, lse, NL);
    cr_assert_eq(sieve_sparse_attention(NULL, &p, q, keys, values, idx, NULL, 0, out, lse, &st),
                 SIEVE_EINVAL);
    cr_assert_eq(ATTN(NULL, q, keys, values, idx, out), SIEVE_EINVAL);
    cr_assert_eq(ATTN(&p, NULL, keys, values, idx, out), SIEVE_EINVAL);
    cr_assert_eq(ATTN(&p, q, NULL, values, idx, out), SIEVE_EINVAL);
    cr_assert_eq(ATTN(&p, q, keys, NULL, idx, out), SIEVE_EINVAL);
    cr_assert_eq(ATTN(&p, q, keys, values, NULL, out), SIEVE_EINVAL);
    cr_assert_eq(ATTN(&p, q, keys, values, idx, NULL), SIEVE_EINVAL);
    assert_sentinels(out, NO, lse, NL, "NULL pointers");
    cr_assert_eq(sieve_sparse_attention_reference(NULL, q, keys, values, idx, rout, rlse),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_sparse_attention_reference(&p, NULL, keys, values, idx, rout, rlse),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_sparse_attention_reference(&p, q, NULL, values, idx, rout, rlse),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_sparse_attention_reference(&p, q, keys, NULL, idx, rout, rlse),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_sparse_attention_reference(&p, q, keys, values, NULL, rout, rlse),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_sparse_attention_reference(&p, q, keys, values, idx, NULL, rlse),
                 SIEVE_EINVAL);

    /* bad parameters, each on its own */
    for (int c = 0; c < 23; c++) {
        sieve_sparse_attn_params b = p;
        switch (c) {
        case 0: b.n_queries = 0; break;
        case 1: b.q_heads = 0; break;
        case 2: b.kv_heads = 0; break;
        case 3: b.head_dim = 0; break;
        case 4: b.v_dim = 0; break;
        case 5: b.n_keys = 0; break;
        case 6: b.k = 0; break;
        case 7: b.q_heads = 3; break; /* not a multiple of kv_heads 2 */
        case 8: b.kv_heads = 8; break; /* more kv heads than q heads */
        case 9: b.group = 0; break;
        case 10: b.group = 33; break;
        case 11: b.scale = NAN; break;
        case 12: b.scale = INFINITY; break;
        case 13: b.scale = -INFINITY; break;
        case 14: b.n_keys = 0x80000000u; break; /* past INT32_MAX */
        case 15: b.dtype = (sieve_dtype)3; break;
        case 16: b.group = UINT32_MAX; break;
        case 17: /* q: T Hq D esz past size_t */
            b.n_queries = UINT32_MAX;
            b.q_heads = UINT32_MAX;
            b.kv_heads = 1;
            b.head_dim = UINT32_MAX;
            break;
        case 18: /* keys: L Hkv D esz past size_t (q fits) */
            b.n_queries = 1;
            b.q_heads = b.kv_heads = 1u << 20;
            b.head_dim = 1u << 20;
            b.n_keys = INT32_MAX;
            break;
        case 19: /* values: L Hkv Dv esz past size_t (q and keys fit) */
            b.dtype = SIEVE_DTYPE_F16;
            b.n_queries = 1;
            b.q_heads = b.kv_heads = UINT32_MAX;
            b.head_dim = 1;
            b.v_dim = 2;
            b.n_keys = INT32_MAX;
            b.k = 1;
            break;
        case 20: /* idx: T k 4 past size_t */
            b.n_queries = UINT32_MAX;
            b.k = UINT32_MAX;
            b.q_heads = b.kv_heads = 1;
            b.head_dim = b.v_dim = 1;
            break;
        case 21: /* out: T Hq Dv 4 past size_t (q with float16 fits) */
            b.dtype = SIEVE_DTYPE_F16;
            b.n_queries = 0x80000000u;
            b.q_heads = 0x80000000u;
            b.kv_heads = 1;
            b.head_dim = 1;
            b.v_dim = 1;
            b.k = 1;
            break;
        case 22: b.scale = -NAN; break;
        }
        char what[32];
        snprintf(what, sizeof what, "case %d", c);
        fill_sentinels(out, NO, lse, NL);
        cr_assert_eq(ATTN(&b, q, keys, values, idx, out), SIEVE_EINVAL, "%s", what);
        assert_sentinels(out, NO, lse, NL, what);
        cr_assert_eq(sieve_sparse_attention_reference(&b, q, keys, values, idx, rout, rlse),
                     SIEVE_EINVAL, "%s", what);
        size_t bytes = 99;
        cr_assert_eq(sieve_sparse_attn_scratch_size(dev, &b, &bytes), SIEVE_EINVAL, "%s", what);
        cr_assert_eq(sieve__check_sparse_attn_params(&b), SIEVE_EINVAL, "%s", what);
    }
    cr_assert_eq(sieve__check_sparse_attn_params(NULL), SIEVE_EINVAL);

    /* the edges that are allowed, and the good call (so the errors above were about the
     * arguments): group 1 and 32, n_keys = INT32_MAX passes the check, negative scale */
    sieve_sparse_attn_params ok = p;
    ok.group = 1;
    cr_assert_eq(sieve__check_sparse_attn_params(&ok), 0);
    ok.group = 32;
    ok.scale = -2.0f;
    cr_assert_eq(sieve__check_sparse_attn_params(&ok), 0);
    ok.n_keys = INT32_MAX;
    cr_assert_eq(sieve__check_sparse_attn_params(&ok), 0);
    ok = p;
    ok.q_heads = ok.kv_heads = 4;
    cr_assert_eq(sieve__check_sparse_attn_params(&ok), 0);
    fill_sentinels(out, NO, lse, NL);
    cr_assert_eq(ATTN(&p, q, keys, values, idx, out), 0);
    for (int i = 0; i < NO; i++) cr_assert(out[i] != SENT_OUT && isfinite(out[i]), "out[%d]", i);
    for (int i = 0; i < NL; i++) cr_assert(lse[i] != SENT_LSE && isfinite(lse[i]), "lse[%d]", i);
    cr_assert_eq(sieve_sparse_attention_reference(&p, q, keys, values, idx, rout, NULL), 0);
    cr_assert_eq(st.groups, 1);
    cr_assert_eq(st.member_entries, 4);   /* {0, 5} and {2, 3} */
    cr_assert_eq(st.union_entries, 4);
#undef ATTN
    sieve_device_close(dev);
}

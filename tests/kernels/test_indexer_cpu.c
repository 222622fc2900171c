/* test_indexer_cpu.c: the CPU indexer top-k of sparse attention (sieve_indexer_*). The fused
 * sample-guided path must equal the materialized path bit for bit (indices, score bits,
 * counts) on random and adversarial data, every dtype and shape; both must agree with the
 * float64 reference up to near-ties; the certified, underfill, overflow and direct paths must
 * really run (forced boundaries, small capacities) and stay exact; bad arguments must give
 * SIEVE_EINVAL. Must not: build expected values with the code under test (the test computes
 * its own float64 scores and error bounds from the stored values).
 *
 * The tolerance. A float32 dot of D terms in any order (BLAS, with or without FMA) is within
 * gamma_D * sum_d |q_d key_d| of the exact dot (gamma_n = n u / (1 - n u), u = 2^-24); the
 * ReLU does not increase the error, and the fmaf fold over H heads adds at most
 * gamma_H * sum_h |w_h relu(dot32_h)|. So every CPU score is within
 *     tol(t) = (D + H + 2) u * max over s of sum_h |w[t,h]| sum_d |q[t,h,d] key[s,d]|
 * of its float64 value (the +2 covers the second-order terms); float16 and bfloat16 values
 * convert exactly, so the dtype adds nothing. A returned key a that the reference did not
 * return displaced a reference key b ranked the other way round in float32, and chaining
 * the two scores' bounds gives score64(a) >= kth64 - 2 tol(t) (and score64(b) <= kth64 +
 * 2 tol(t)): that is the membership assertion; every returned score must be within tol(t)
 * of its key's float64 score.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kt_util.h"
#include "sieve_kernels_internal.h"

static sieve_device *open_cpu(const char *spec) {
    sieve_device *dev = NULL;
    int rc = sieve_device_open(spec, &dev);
    cr_assert_eq(rc, 0, "sieve_device_open(%s) returned %d", spec, rc);
    return dev;
}

/* ---------------------------------------------------------------- problems */

typedef enum idata {
    I_GAUSS,       /* iid N(0,1) q and keys, signed weights */
    I_EQUAL,       /* every key identical: every score tied */
    I_SORTED_ASC,  /* keys = u * (0.25 + s/L): scores rise with s (u . q > 0, w > 0) */
    I_SORTED_DESC, /* keys = u * (1.25 - s/L): scores fall with s */
    I_OUTLIER,     /* Gaussian keys, key 2L/3 scaled by 1000 */
    I_BAND,        /* one key vector plus 1e-3 perturbations: a narrow band of scores */
    I_DUP,         /* 37 distinct keys repeated all over */
    I_NEGW,        /* every weight negative: scores <= 0, many exactly 0 */
    I_RELU0,       /* keys > 0, queries < 0: every dot negative, every score 0 */
    I_DATA_COUNT
} idata;

static const char *idata_name(idata d) {
    static const char *names[] = {"gauss", "equal", "sorted_asc", "sorted_desc", "outlier",
                                  "band",  "dup",   "neg_w",      "relu0"};
    return d < I_DATA_COUNT ? names[d] : "?";
}

typedef struct iprob {
    sieve_indexer_params p;
    void *q, *keys; /* stored, in p.dtype */
    float *w;
    float *qf, *kf; /* the stored values as float32 (exact) */
} iprob;

/* Builds a problem of data set d for p's dtype and shape (q: T x H x D, keys: L x D). */
static void make_prob(iprob *pr, const sieve_indexer_params *p, idata d, uint64_t seed) {
    memset(pr, 0, sizeof *pr);
    pr->p = *p;
    const size_t T = p->n_queries, H = p->heads, D = p->head_dim, L = p->n_keys;
    const size_t nq = T * H * D, nk = L * D, esz = sieve_dtype_size(p->dtype);
    float *q = malloc(nq * sizeof *q), *k = malloc(nk * sizeof *k), *u = malloc(D * sizeof *u);
    pr->w = malloc(T * H * sizeof *pr->w);
    pr->q = malloc(nq * esz);
    pr->keys = malloc(nk * esz);
    pr->qf = malloc(nq * sizeof(float));
    pr->kf = malloc(nk * sizeof(float));
    cr_assert(q && k && u && pr->w && pr->q && pr->keys && pr->qf && pr->kf);
    kt_rng r = {seed * 7919 + 17};
    for (size_t i = 0; i < nq; i++) q[i] = kt_gauss(&r);
    for (size_t i = 0; i < nk; i++) k[i] = kt_gauss(&r);
    for (size_t i = 0; i < T * H; i++) pr->w[i] = (float)(0.05 + 0.95 * kt_uniform(&r));
    double un = 0.0;
    for (size_t i = 0; i < D; i++) {
        u[i] = fabsf(kt_gauss(&r)) + 0.1f;
        un += (double)u[i] * u[i];
    }
    for (size_t i = 0; i < D; i++) u[i] = (float)(u[i] / sqrt(un));
    switch (d) {
    case I_GAUSS:
        for (size_t i = 0; i < T * H; i++) pr->w[i] = 0.5f * kt_gauss(&r);
        break;
    case I_EQUAL:
        for (size_t s = 1; s < L; s++) memcpy(k + s * D, k, D * sizeof *k);
        break;
    case I_SORTED_ASC:
    case I_SORTED_DESC:
        for (size_t s = 0; s < L; s++) {
            double f = d == I_SORTED_ASC ? 0.25 + (double)s / L : 1.25 - (double)s / L;
            for (size_t i = 0; i < D; i++) k[s * D + i] = (float)(f * u[i]);
        }
        for (size_t i = 0; i < nq; i++) q[i] = 2.0f * u[i % D] + 0.1f * q[i];
        break;
    case I_OUTLIER:
        for (size_t i = 0; i < D; i++) k[(L * 2 / 3) * D + i] *= 1000.0f;
        break;
    case I_BAND:
        for (size_t s = 1; s < L; s++)
            for (size_t i = 0; i < D; i++) k[s * D + i] = k[i] + 1e-3f * k[s * D + i];
        break;
    case I_DUP: {
        size_t distinct = L < 37 ? L : 37;
        for (size_t s = distinct; s < L; s++)
            memcpy(k + s * D, k + (kt_next(&r) % distinct) * D, D * sizeof *k);
        break;
    }
    case I_NEGW:
        for (size_t i = 0; i < T * H; i++) pr->w[i] = -pr->w[i];
        break;
    case I_RELU0:
        for (size_t i = 0; i < nk; i++) k[i] = fabsf(k[i]) + 0.01f;
        for (size_t i = 0; i < nq; i++) q[i] = -fabsf(q[i]) - 0.01f;
        break;
    default: break;
    }
    sieve_convert_from_f32(p->dtype, q, pr->q, nq);
    sieve_convert_from_f32(p->dtype, k, pr->keys, nk);
    sieve_convert_to_f32(p->dtype, pr->q, pr->qf, nq);
    sieve_convert_to_f32(p->dtype, pr->keys, pr->kf, nk);
    free(q);
    free(k);
    free(u);
}

static void free_prob(iprob *pr) {
    free(pr->q);
    free(pr->keys);
    free(pr->w);
    free(pr->qf);
    free(pr->kf);
    memset(pr, 0, sizeof *pr);
}

/* The test's own float64 score of key s for query t, and its error scale
 * B = sum_h |w| sum_d |q key|. */
static double score64(const iprob *pr, uint32_t t, uint32_t s, double *bound) {
    const uint32_t H = pr->p.heads, D = pr->p.head_dim;
    const float *qt = pr->qf + (size_t)t * H * D, *ks = pr->kf + (size_t)s * D;
    double score = 0.0, b = 0.0;
    for (uint32_t h = 0; h < H; h++) {
        double dot = 0.0, ab = 0.0;
        for (uint32_t d = 0; d < D; d++) {
            double x = (double)qt[(size_t)h * D + d] * (double)ks[d];
            dot += x;
            ab += fabs(x);
        }
        double wh = (double)pr->w[(size_t)t * H + h];
        score += wh * (dot > 0.0 ? dot : 0.0);
        b += fabs(wh) * ab;
    }
    if (bound) *bound = b;
    return score;
}

/* ---------------------------------------------------------------- checks */

typedef struct iresult {
    int32_t *idx;
    float *scores;
    uint32_t *counts;
    sieve_indexer_stats st;
} iresult;

static void result_alloc(iresult *r, const sieve_indexer_params *p) {
    size_t nk = (size_t)p->n_queries * p->k;
    r->idx = malloc(nk * sizeof *r->idx);
    r->scores = malloc(nk * sizeof *r->scores);
    r->counts = malloc(p->n_queries * sizeof *r->counts);
    cr_assert(r->idx && r->scores && r->counts);
    memset(&r->st, 0xa5, sizeof r->st); /* the calls must overwrite it */
}

static void result_free(iresult *r) {
    free(r->idx);
    free(r->scores);
    free(r->counts);
}

/* Asserts two results identical: indices, score bits, counts. */
static void assert_same(const sieve_indexer_params *p, const iresult *a, const iresult *b,
                        const char *what, const char *an, const char *bn) {
    for (uint32_t t = 0; t < p->n_queries; t++) {
        cr_assert_eq(a->counts[t], b->counts[t], "%s: query %u: %s count %u, %s count %u",
                     what, t, an, a->counts[t], bn, b->counts[t]);
        for (uint32_t i = 0; i < p->k; i++) {
            size_t at = (size_t)t * p->k + i;
            cr_assert_eq(a->idx[at], b->idx[at],
                         "%s: query %u rank %u: %s key %d (%.9g), %s key %d (%.9g)", what, t, i,
                         an, a->idx[at], a->scores[at], bn, b->idx[at], b->scores[at]);
            cr_assert_eq(memcmp(&a->scores[at], &b->scores[at], sizeof(float)), 0,
                         "%s: query %u rank %u key %d: %s score %.9g, %s score %.9g", what, t, i,
                         a->idx[at], an, a->scores[at], bn, b->scores[at]);
        }
    }
}

/* Shape of one result: counts = min(k, visible), real entries distinct visible keys sorted
 * by (score descending, index ascending) with non-NaN scores, padding index -1 / NaN. */
static void assert_well_formed(const sieve_indexer_params *p, const iresult *r,
                               const char *what) {
    uint8_t *seen = calloc(p->n_keys, 1);
    cr_assert_not_null(seen);
    for (uint32_t t = 0; t < p->n_queries; t++) {
        uint32_t v = sieve_indexer_visible(p, t);
        uint32_t want = v < p->k ? v : p->k;
        cr_assert_eq(r->counts[t], want, "%s: query %u sees %u keys: count %u, want %u", what,
                     t, v, r->counts[t], want);
        const int32_t *idx = r->idx + (size_t)t * p->k;
        const float *sc = r->scores + (size_t)t * p->k;
        for (uint32_t i = 0; i < want; i++) {
            cr_assert(idx[i] >= 0 && (uint32_t)idx[i] < v, "%s: query %u rank %u: key %d of %u",
                      what, t, i, idx[i], v);
            cr_assert(!seen[idx[i]], "%s: query %u: key %d returned twice", what, t, idx[i]);
            seen[idx[i]] = 1;
            cr_assert(!isnan(sc[i]), "%s: query %u rank %u: NaN score", what, t, i);
            if (i > 0)
                cr_assert(sc[i - 1] > sc[i] || (sc[i - 1] == sc[i] && idx[i - 1] < idx[i]),
                          "%s: query %u: rank %u (key %d, %.9g) before rank %u (key %d, %.9g)",
                          what, t, i - 1, idx[i - 1], sc[i - 1], i, idx[i], sc[i]);
        }
        for (uint32_t i = 0; i < want; i++) seen[idx[i]] = 0;
        for (uint32_t i = want; i < p->k; i++) {
            cr_assert_eq(idx[i], -1, "%s: query %u: padding index %d", what, t, idx[i]);
            cr_assert(isnan(sc[i]), "%s: query %u: padding score %g", what, t, sc[i]);
        }
    }
    free(seen);
}

/* Asserts the stats of one call add up. */
static void assert_stats(const sieve_indexer_params *p, const sieve_indexer_stats *st,
                         int materialized, const char *what) {
    uint64_t sum = 0;
    for (int i = 0; i < SIEVE_PATH_COUNT; i++) sum += st->path_count[i];
    cr_assert_eq(st->queries, p->n_queries, "%s: stats.queries %llu", what,
                 (unsigned long long)st->queries);
    cr_assert_eq(sum, p->n_queries, "%s: path counts add to %llu", what,
                 (unsigned long long)sum);
    cr_assert(st->ms_total >= 0.0 && isfinite(st->ms_total), "%s: ms_total %g", what,
              st->ms_total);
    cr_assert(st->ms_sample >= 0.0 && st->ms_scan >= 0.0 && st->ms_select >= 0.0 &&
                  st->ms_recover >= 0.0,
              "%s: negative phase time", what);
    if (materialized) {
        cr_assert_eq(st->path_count[SIEVE_PATH_FULL], p->n_queries, "%s", what);
        cr_assert_eq(st->keys_sampled, 0, "%s", what);
        cr_assert_eq(st->candidates_admitted, 0, "%s", what);
    } else {
        cr_assert_eq(st->path_count[SIEVE_PATH_FULL], 0, "%s: the fused path never reports FULL",
                     what);
        uint64_t gated = st->path_count[SIEVE_PATH_CERTIFIED] +
                         st->path_count[SIEVE_PATH_UNDERFILL] +
                         st->path_count[SIEVE_PATH_OVERFLOW];
        if (gated == 0) cr_assert_eq(st->candidates_admitted, 0, "%s", what);
        cr_assert_geq(st->candidates_admitted, (uint64_t)p->k * st->path_count[SIEVE_PATH_CERTIFIED],
                      "%s: certified queries admitted fewer than k each", what);
    }
}

/* Runs the fused and the materialized paths, asserts them identical and well formed, and
 * returns the fused answer in *fused (and the materialized stats in *mst). */
static void run_both(sieve_device *dev, const iprob *pr, const char *what, iresult *fused,
                     sieve_indexer_stats *mst) {
    const sieve_indexer_params *p = &pr->p;
    iresult m;
    result_alloc(fused, p);
    result_alloc(&m, p);
    int rc = sieve_indexer_topk(dev, p, pr->q, pr->keys, pr->w, NULL, 0, fused->idx,
                                fused->scores, fused->counts, &fused->st);
    cr_assert_eq(rc, 0, "%s: sieve_indexer_topk returned %d (%s)", what, rc, sieve_strerror(rc));
    rc = sieve_indexer_topk_materialized(dev, p, pr->q, pr->keys, pr->w, m.idx, m.scores,
                                         m.counts, &m.st);
    cr_assert_eq(rc, 0, "%s: materialized returned %d (%s)", what, rc, sieve_strerror(rc));
    assert_same(p, fused, &m, what, "fused", "materialized");
    assert_well_formed(p, fused, what);
    assert_stats(p, &fused->st, 0, what);
    assert_stats(p, &m.st, 1, what);
    if (getenv("KT_VERBOSE"))
        fprintf(stderr,
                "%-58s sampled %8llu admitted %8llu paths C%llu U%llu O%llu D%llu  "
                "ms %.2f / %.2f\n",
                what, (unsigned long long)fused->st.keys_sampled,
                (unsigned long long)fused->st.candidates_admitted,
                (unsigned long long)fused->st.path_count[SIEVE_PATH_CERTIFIED],
                (unsigned long long)fused->st.path_count[SIEVE_PATH_UNDERFILL],
                (unsigned long long)fused->st.path_count[SIEVE_PATH_OVERFLOW],
                (unsigned long long)fused->st.path_count[SIEVE_PATH_DIRECT],
                fused->st.ms_total, m.st.ms_total);
    if (mst) *mst = m.st;
    result_free(&m);
}

static int contains(const int32_t *a, uint32_t n, int32_t v) {
    for (uint32_t i = 0; i < n; i++)
        if (a[i] == v) return 1;
    return 0;
}

/* Checks the first nref queries of r against sieve_indexer_reference and the test's own
 * float64 scores, within the tolerance of the file comment. */
static void check_reference(const iprob *pr, const iresult *r, uint32_t nref, const char *what) {
    const sieve_indexer_params *p = &pr->p;
    if (nref > p->n_queries) nref = p->n_queries;
    const uint32_t k = p->k;
    int32_t *ri = malloc((size_t)p->n_queries * k * sizeof *ri);
    double *rs = malloc((size_t)p->n_queries * k * sizeof *rs);
    uint32_t *rc_ = malloc(p->n_queries * sizeof *rc_);
    double *s64 = malloc((size_t)p->n_keys * sizeof *s64);
    cr_assert(ri && rs && rc_ && s64);
    /* the reference runs on the first nref queries only (it is slow) */
    sieve_indexer_params pp = *p;
    pp.n_queries = nref;
    int rc = sieve_indexer_reference(&pp, pr->q, pr->keys, pr->w, ri, rs, rc_);
    cr_assert_eq(rc, 0, "%s: reference returned %d", what, rc);
    const double u = 0x1.0p-24;
    for (uint32_t t = 0; t < nref; t++) {
        const uint32_t v = sieve_indexer_visible(p, t);
        double bmax = 0.0;
        for (uint32_t s = 0; s < v; s++) {
            double b;
            s64[s] = score64(pr, t, s, &b);
            bmax = fmax(bmax, b);
        }
        const double tol = (double)(p->head_dim + p->heads + 2) * u * bmax;
        const uint32_t n = r->counts[t];
        cr_assert_eq(n, rc_[t], "%s: query %u: count %u, reference %u", what, t, n, rc_[t]);
        const int32_t *fi = r->idx + (size_t)t * k, *gi = ri + (size_t)t * k;
        const float *fs = r->scores + (size_t)t * k;
        const double *gs = rs + (size_t)t * k;
        for (uint32_t i = n; i < k; i++) {
            cr_assert_eq(gi[i], -1, "%s: query %u: reference padding %d", what, t, gi[i]);
            cr_assert(isnan(gs[i]), "%s: query %u: reference padding score %g", what, t, gs[i]);
        }
        if (n == 0) continue;
        /* the reference's own scores are the float64 scores of its keys, sorted */
        for (uint32_t i = 0; i < n; i++) {
            cr_assert(gi[i] >= 0 && (uint32_t)gi[i] < v, "%s: query %u: reference key %d", what,
                      t, gi[i]);
            double want = s64[gi[i]];
            cr_assert_leq(fabs(gs[i] - want), 1e-12 * bmax + 1e-300,
                          "%s: query %u: reference score %.17g of key %d, float64 %.17g", what,
                          t, gs[i], gi[i], want);
            if (i > 0)
                cr_assert(gs[i - 1] > gs[i] || (gs[i - 1] == gs[i] && gi[i - 1] < gi[i]),
                          "%s: query %u: reference not sorted at rank %u", what, t, i);
        }
        const double kth = gs[n - 1];
        for (uint32_t i = 0; i < n; i++) {
            const double sa = s64[fi[i]];
            cr_assert_leq(fabs((double)fs[i] - sa), tol,
                          "%s: query %u key %d: score %.9g, float64 %.17g (tol %.3g)", what, t,
                          fi[i], fs[i], sa, tol);
            cr_assert_geq(sa, kth - 2.0 * tol,
                          "%s: query %u: key %d (float64 %.17g) is below the reference's k-th "
                          "score %.17g by more than 2 tol = %.3g",
                          what, t, fi[i], sa, kth, 2.0 * tol);
            if (!contains(fi, n, gi[i]))
                cr_assert_leq(s64[gi[i]], kth + 2.0 * tol,
                              "%s: query %u: reference key %d (float64 %.17g) is missing "
                              "(k-th %.17g, 2 tol = %.3g)",
                              what, t, gi[i], s64[gi[i]], kth, 2.0 * tol);
        }
    }
    free(ri);
    free(rs);
    free(rc_);
    free(s64);
}

/* ---------------------------------------------------------------- data sets and shapes */

typedef struct ishape {
    uint32_t T, H, D, L, k;
    int causal;
    uint32_t pos0;
    uint32_t sample_keys; /* 0: default (which takes the direct path below 8192 keys) */
    uint32_t nref;        /* queries checked against the reference */
} ishape;

static const ishape shapes[] = {
    {16, 1, 8, 1000, 10, 0, 0, 0, 16},     /* H = 1 (sgemv), direct */
    {8, 4, 64, 777, 1, 0, 0, 0, 4},        /* k = 1, L not a multiple of the block */
    {4, 64, 128, 300, 300, 0, 0, 0, 1},    /* k = L, wide heads */
    {4, 64, 128, 700, 5, 0, 0, 128, 1},    /* wide heads on the sampled path */
    {8, 4, 8, 5000, 20, 0, 0, 256, 4},     /* the sampled path on every data set */
    {24, 4, 16, 3001, 16, 1, 2980, 200, 6}, /* causal, sampled, visible 2981 .. 3001 */
    {12, 2, 8, 600, 8, 1, 0, 0, 12},       /* causal from 0: early queries see < k keys */
};

/* Every data set in dtype through every shape: fused == materialized, reference agreement,
 * and the exact answers the ties force. */
static void all_sets(sieve_dtype dtype) {
    sieve_device *dev = open_cpu("cpu:2");
    uint64_t sampled = 0, gated = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const ishape *sh = &shapes[si];
        for (int d = 0; d < I_DATA_COUNT; d++) {
            sieve_indexer_params p;
            sieve_indexer_params_init(&p, dtype, sh->T, sh->H, sh->D, sh->L, sh->k);
            p.causal = sh->causal;
            p.pos0 = sh->pos0;
            p.sample_keys = sh->sample_keys;
            p.seed = 1000u * si + (uint64_t)d;
            iprob pr;
            make_prob(&pr, &p, (idata)d, 31u * si + (uint64_t)d + 7u * dtype);
            char what[160];
            snprintf(what, sizeof what, "%s/%s T=%u H=%u D=%u L=%u k=%u%s", sieve_dtype_name(dtype),
                     idata_name((idata)d), sh->T, sh->H, sh->D, sh->L, sh->k,
                     sh->causal ? " causal" : "");
            iresult r;
            run_both(dev, &pr, what, &r, NULL);
            sampled += r.st.keys_sampled;
            gated += r.st.path_count[SIEVE_PATH_CERTIFIED] + r.st.path_count[SIEVE_PATH_UNDERFILL] +
                     r.st.path_count[SIEVE_PATH_OVERFLOW];
            if (sh->sample_keys && !sh->causal)
                cr_assert_eq(r.st.keys_sampled, (uint64_t)sh->sample_keys * sh->T, "%s", what);
            if (!sh->sample_keys)
                cr_assert_eq(r.st.path_count[SIEVE_PATH_DIRECT], sh->T,
                             "%s: rows this short go direct", what);
            if (d == I_EQUAL || d == I_RELU0) {
                /* every score tied: the smallest indices, in order, with one score */
                for (uint32_t t = 0; t < p.n_queries; t++)
                    for (uint32_t i = 0; i < r.counts[t]; i++) {
                        size_t at = (size_t)t * p.k + i;
                        cr_assert_eq(r.idx[at], (int32_t)i, "%s: query %u rank %u: key %d", what,
                                     t, i, r.idx[at]);
                        cr_assert_eq(memcmp(&r.scores[at], &r.scores[(size_t)t * p.k], 4), 0,
                                     "%s: query %u: tied scores differ", what, t);
                        if (d == I_RELU0)
                            cr_assert(r.scores[at] == 0.0f && !signbit(r.scores[at]),
                                      "%s: score %g, want +0", what, r.scores[at]);
                    }
            }
            if (d == I_NEGW)
                for (uint32_t t = 0; t < p.n_queries; t++)
                    for (uint32_t i = 0; i < r.counts[t]; i++)
                        cr_assert_leq(r.scores[(size_t)t * p.k + i], 0.0f, "%s", what);
            check_reference(&pr, &r, sh->nref, what);
            result_free(&r);
            free_prob(&pr);
        }
    }
    cr_assert_gt(sampled, 0);
    cr_assert_gt(gated, 0);
    sieve_device_close(dev);
}

Test(indexer_sets, f32) { all_sets(SIEVE_DTYPE_F32); }
Test(indexer_sets, f16) { all_sets(SIEVE_DTYPE_F16); }
Test(indexer_sets, bf16) { all_sets(SIEVE_DTYPE_BF16); }

/* The answer for k is the first k entries of the full sort of the same scores (k = L with
 * the materialized path), on the sampled path and with several seeds. */
Test(indexer_exact, prefix_of_the_full_sort) {
    sieve_device *dev = open_cpu("cpu:2");
    const idata sets[] = {I_GAUSS, I_DUP, I_BAND, I_SORTED_DESC};
    for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++) {
        sieve_indexer_params full;
        sieve_indexer_params_init(&full, SIEVE_DTYPE_BF16, 6, 3, 24, 2500, 2500);
        iprob pr;
        make_prob(&pr, &full, sets[si], 900 + si);
        iresult all;
        result_alloc(&all, &full);
        cr_assert_eq(sieve_indexer_topk_materialized(dev, &full, pr.q, pr.keys, pr.w, all.idx,
                                                     all.scores, all.counts, NULL),
                     0);
        assert_well_formed(&full, &all, "full sort");
        const uint32_t ks[] = {1, 7, 100};
        for (int ki = 0; ki < 3; ki++)
            for (uint64_t seed = 0; seed < 3; seed++) {
                sieve_indexer_params p = full;
                p.k = ks[ki];
                p.sample_keys = 300;
                p.seed = seed * 0x9e3779b97f4a7c15ull;
                iresult r;
                result_alloc(&r, &p);
                cr_assert_eq(sieve_indexer_topk(dev, &p, pr.q, pr.keys, pr.w, NULL, 0, r.idx,
                                                r.scores, r.counts, &r.st),
                             0);
                assert_stats(&p, &r.st, 0, "prefix");
                cr_assert_eq(r.st.keys_sampled, 300u * 6);
                for (uint32_t t = 0; t < p.n_queries; t++) {
                    cr_assert_eq(r.counts[t], p.k);
                    for (uint32_t i = 0; i < p.k; i++) {
                        size_t a = (size_t)t * p.k + i, b = (size_t)t * full.k + i;
                        cr_assert_eq(r.idx[a], all.idx[b],
                                     "%s k=%u seed %llu: query %u rank %u: key %d, full sort %d",
                                     idata_name(sets[si]), p.k, (unsigned long long)seed, t, i,
                                     r.idx[a], all.idx[b]);
                        cr_assert_eq(memcmp(&r.scores[a], &all.scores[b], 4), 0);
                    }
                }
                result_free(&r);
            }
        result_free(&all);
        free_prob(&pr);
    }
    sieve_device_close(dev);
}

/* The answer does not depend on the worker count. */
Test(indexer_exact, same_answer_for_every_thread_count) {
    sieve_indexer_params p;
    sieve_indexer_params_init(&p, SIEVE_DTYPE_F16, 20, 8, 32, 4000, 12);
    p.sample_keys = 400;
    p.causal = 1;
    p.pos0 = 3000;
    iprob pr;
    make_prob(&pr, &p, I_GAUSS, 5);
    const char *specs[] = {"cpu:1", "cpu:2", "cpu:3"};
    iresult r[3];
    for (int i = 0; i < 3; i++) {
        sieve_device *dev = open_cpu(specs[i]);
        run_both(dev, &pr, specs[i], &r[i], NULL);
        sieve_device_close(dev);
    }
    assert_same(&p, &r[0], &r[1], "threads", "cpu:1", "cpu:2");
    assert_same(&p, &r[0], &r[2], "threads", "cpu:1", "cpu:3");
    check_reference(&pr, &r[0], 3, "threads");
    for (int i = 0; i < 3; i++) result_free(&r[i]);
    free_prob(&pr);
}

/* Causal padding: query t of pos0 = 0 sees t + 1 keys; fewer than k give -1 / NaN tails and
 * counts t + 1; without causal pos0 is ignored. */
Test(indexer_exact, causal_padding_and_counts) {
    sieve_device *dev = open_cpu("cpu:2");
    sieve_indexer_params p;
    sieve_indexer_params_init(&p, SIEVE_DTYPE_F32, 16, 4, 16, 100, 10);
    p.causal = 1;
    cr_assert_eq(sieve_indexer_visible(&p, 0), 1);
    cr_assert_eq(sieve_indexer_visible(&p, 15), 16);
    iprob pr;
    make_prob(&pr, &p, I_GAUSS, 77);
    iresult r;
    run_both(dev, &pr, "causal pos0=0", &r, NULL);
    for (uint32_t t = 0; t < 16; t++) {
        uint32_t want = t + 1 < 10 ? t + 1 : 10;
        cr_assert_eq(r.counts[t], want, "query %u: count %u", t, r.counts[t]);
        for (uint32_t i = 0; i < 10; i++) {
            int32_t idx = r.idx[(size_t)t * 10 + i];
            if (i < want) cr_assert(idx >= 0 && (uint32_t)idx <= t, "query %u: key %d", t, idx);
            else cr_assert_eq(idx, -1);
        }
    }
    check_reference(&pr, &r, 16, "causal pos0=0");
    result_free(&r);

    /* the same problem without causal: every query sees all 100 keys */
    pr.p.causal = 0;
    pr.p.pos0 = 5;
    cr_assert_eq(sieve_indexer_visible(&pr.p, 0), 100);
    run_both(dev, &pr, "non-causal", &r, NULL);
    for (uint32_t t = 0; t < 16; t++) cr_assert_eq(r.counts[t], 10);
    check_reference(&pr, &r, 16, "non-causal");
    result_free(&r);

    /* visibility saturates at n_keys without wrapping */
    pr.p.causal = 1;
    pr.p.pos0 = UINT32_MAX;
    cr_assert_eq(sieve_indexer_visible(&pr.p, UINT32_MAX), 100);
    pr.p.pos0 = 98;
    cr_assert_eq(sieve_indexer_visible(&pr.p, 0), 99);
    cr_assert_eq(sieve_indexer_visible(&pr.p, 1), 100);
    cr_assert_eq(sieve_indexer_visible(&pr.p, 2), 100);
    free_prob(&pr);
    sieve_device_close(dev);
}

/* NaN and infinity in the inputs: no crash, both paths identical, well-formed rows (NaN
 * scores rank last as -inf). */
Test(indexer_exact, nonfinite_inputs_are_memory_safe) {
    sieve_device *dev = open_cpu("cpu:2");
    for (int dt = 0; dt < 3; dt++) {
        sieve_indexer_params p;
        sieve_indexer_params_init(&p, (sieve_dtype)dt, 8, 4, 8, 3000, 12);
        p.sample_keys = 256;
        iprob pr;
        make_prob(&pr, &p, I_GAUSS, 11 + dt);
        size_t esz = sieve_dtype_size(p.dtype);
        float bad[4] = {NAN, INFINITY, -INFINITY, NAN};
        for (uint32_t s = 0; s < p.n_keys; s += 37) /* some keys hold NaN or +-inf */
            sieve_convert_from_f32(p.dtype, &bad[s % 4], (char *)pr.keys + ((size_t)s * 8 + 3) * esz,
                                   1);
        sieve_convert_from_f32(p.dtype, &bad[1], (char *)pr.q + 5 * esz, 1); /* query 0 */
        pr.w[2 * 4 + 1] = NAN;                                               /* query 2 */
        pr.w[3 * 4 + 0] = INFINITY;                                          /* query 3 */
        char what[64];
        snprintf(what, sizeof what, "%s nonfinite", sieve_dtype_name(p.dtype));
        iresult r;
        run_both(dev, &pr, what, &r, NULL);
        result_free(&r);
        p.force_boundary = 1; /* a NaN boundary admits nothing: underfill, recovered */
        p.forced_boundary = NAN;
        pr.p = p;
        run_both(dev, &pr, what, &r, NULL);
        cr_assert_eq(r.st.path_count[SIEVE_PATH_UNDERFILL], p.n_queries);
        result_free(&r);
        free_prob(&pr);
    }
    sieve_device_close(dev);
}

/* ---------------------------------------------------------------- the paths run */

/* Default parameters on a long row: the sample proposes, the pass certifies. */
Test(indexer_paths, certified_by_default) {
    sieve_device *dev = open_cpu("cpu:2");
    for (int dt = 0; dt < 3; dt++) {
        sieve_indexer_params p;
        sieve_indexer_params_init(&p, (sieve_dtype)dt, 16, 4, 16, 20000, 16);
        p.seed = 42;
        iprob pr;
        make_prob(&pr, &p, I_GAUSS, 100 + dt);
        /* Positive weights: a query whose weights are all negative scores every key <= 0,
         * and the ~1/16 of the keys with all dots <= 0 tie at its top score 0, more than
         * any capacity; such a query overflows by design (measured: 1 of 16 here). */
        for (size_t i = 0; i < (size_t)p.n_queries * p.heads; i++) pr.w[i] = fabsf(pr.w[i]);
        char what[64];
        snprintf(what, sizeof what, "%s default L=20000 k=16", sieve_dtype_name(p.dtype));
        iresult r;
        run_both(dev, &pr, what, &r, NULL);
        const sieve_indexer_stats *st = &r.st;
        cr_assert_eq(st->path_count[SIEVE_PATH_CERTIFIED], p.n_queries,
                     "%s: certified %llu of %u (underfill %llu overflow %llu direct %llu)", what,
                     (unsigned long long)st->path_count[SIEVE_PATH_CERTIFIED], p.n_queries,
                     (unsigned long long)st->path_count[SIEVE_PATH_UNDERFILL],
                     (unsigned long long)st->path_count[SIEVE_PATH_OVERFLOW],
                     (unsigned long long)st->path_count[SIEVE_PATH_DIRECT]);
        cr_assert_eq(st->keys_sampled, 4096ull * p.n_queries, "%s: default sample 4096", what);
        cr_assert_geq(st->candidates_admitted, 16ull * p.n_queries);
        cr_assert_lt(st->candidates_admitted, 20000ull * p.n_queries / 10,
                     "%s: the gate admitted %llu keys", what,
                     (unsigned long long)st->candidates_admitted);
        check_reference(&pr, &r, 2, what);
        result_free(&r);
        free_prob(&pr);
    }
    /* causal, default sample: queries seeing more than 2 x 4096 keys are sampled, the
     * others go direct */
    sieve_indexer_params p;
    sieve_indexer_params_init(&p, SIEVE_DTYPE_BF16, 32, 8, 32, 20000, 64);
    p.causal = 1;
    p.pos0 = 8192 - 16; /* queries 0..15 see <= 8192 keys */
    iprob pr;
    make_prob(&pr, &p, I_GAUSS, 321);
    iresult r;
    run_both(dev, &pr, "bf16 causal default", &r, NULL);
    cr_assert_eq(r.st.path_count[SIEVE_PATH_DIRECT], 16);
    cr_assert_eq(r.st.keys_sampled, 4096ull * 16);
    cr_assert_gt(r.st.path_count[SIEVE_PATH_CERTIFIED], 12);
    check_reference(&pr, &r, 1, "bf16 causal default");
    result_free(&r);
    free_prob(&pr);
    sieve_device_close(dev);
}

/* A forced boundary above every score admits nothing: every query underfills and is
 * recovered from its whole row, exactly. */
Test(indexer_paths, forced_underfill) {
    sieve_device *dev = open_cpu("cpu:2");
    for (int d = 0; d < I_DATA_COUNT; d++) {
        sieve_indexer_params p;
        sieve_indexer_params_init(&p, SIEVE_DTYPE_F16, 8, 4, 16, 2000, 10);
        p.force_boundary = 1;
        p.forced_boundary = 1e30f;
        iprob pr;
        make_prob(&pr, &p, (idata)d, 55 + d);
        char what[64];
        snprintf(what, sizeof what, "forced underfill %s", idata_name((idata)d));
        iresult r;
        run_both(dev, &pr, what, &r, NULL);
        cr_assert_eq(r.st.path_count[SIEVE_PATH_UNDERFILL], p.n_queries, "%s", what);
        cr_assert_eq(r.st.candidates_admitted, 0);
        cr_assert_eq(r.st.keys_sampled, 0, "a forced boundary needs no sample");
        check_reference(&pr, &r, 2, what);
        result_free(&r);
        free_prob(&pr);
    }
    sieve_device_close(dev);
}

/* A forced boundary below every score admits every key: with a small capacity every query
 * overflows and is recovered exactly; with capacity L every query is certified. */
Test(indexer_paths, forced_overflow_and_certified) {
    sieve_device *dev = open_cpu("cpu:2");
    for (int d = 0; d < I_DATA_COUNT; d++) {
        sieve_indexer_params p;
        sieve_indexer_params_init(&p, SIEVE_DTYPE_BF16, 8, 4, 16, 2000, 10);
        p.force_boundary = 1;
        p.forced_boundary = -1e30f;
        p.candidate_capacity = 50;
        iprob pr;
        make_prob(&pr, &p, (idata)d, 66 + d);
        char what[64];
        snprintf(what, sizeof what, "forced overflow %s", idata_name((idata)d));
        iresult r;
        run_both(dev, &pr, what, &r, NULL);
        cr_assert_eq(r.st.path_count[SIEVE_PATH_OVERFLOW], p.n_queries, "%s", what);
        cr_assert_eq(r.st.candidates_admitted, 2000ull * p.n_queries,
                     "%s: every key is admitted and counted past the capacity", what);
        check_reference(&pr, &r, 2, what);
        result_free(&r);

        pr.p.candidate_capacity = 2000;
        snprintf(what, sizeof what, "forced low, capacity L %s", idata_name((idata)d));
        run_both(dev, &pr, what, &r, NULL);
        cr_assert_eq(r.st.path_count[SIEVE_PATH_CERTIFIED], p.n_queries, "%s", what);
        cr_assert_eq(r.st.candidates_admitted, 2000ull * p.n_queries);
        result_free(&r);

        pr.p.candidate_capacity = 9; /* below k: nothing can be certified */
        snprintf(what, sizeof what, "forced low, capacity < k %s", idata_name((idata)d));
        run_both(dev, &pr, what, &r, NULL);
        cr_assert_eq(r.st.path_count[SIEVE_PATH_OVERFLOW], p.n_queries, "%s", what);
        result_free(&r);
        free_prob(&pr);
    }
    sieve_device_close(dev);
}

/* The gate is inclusive: a boundary equal to the k-th score admits at least k keys and
 * certifies; the next float up admits fewer and underfills. Both exact. */
Test(indexer_paths, boundary_exactly_at_kth_score) {
    sieve_device *dev = open_cpu("cpu:2");
    for (int dt = 0; dt < 3; dt++)
        for (uint64_t seed = 0; seed < 4; seed++) {
            const uint32_t k = 10;
            sieve_indexer_params p;
            sieve_indexer_params_init(&p, (sieve_dtype)dt, 1, 6, 40, 5000, k + 1);
            iprob pr;
            make_prob(&pr, &p, I_GAUSS, 500 + seed + 10 * dt);
            iresult m;
            result_alloc(&m, &p);
            cr_assert_eq(sieve_indexer_topk_materialized(dev, &p, pr.q, pr.keys, pr.w, m.idx,
                                                         m.scores, m.counts, NULL),
                         0);
            cr_assert_gt(m.scores[k - 1], m.scores[k], "need distinct scores around the k-th");
            pr.p.k = k;
            pr.p.force_boundary = 1;
            pr.p.forced_boundary = m.scores[k - 1];
            iresult r;
            run_both(dev, &pr, "boundary = k-th", &r, NULL);
            cr_assert_eq(r.st.path_count[SIEVE_PATH_CERTIFIED], 1);
            cr_assert_eq(r.st.candidates_admitted, k);
            for (uint32_t i = 0; i < k; i++) cr_assert_eq(r.idx[i], m.idx[i]);
            result_free(&r);
            pr.p.forced_boundary = nextafterf(m.scores[k - 1], INFINITY);
            run_both(dev, &pr, "boundary above k-th", &r, NULL);
            cr_assert_eq(r.st.path_count[SIEVE_PATH_UNDERFILL], 1);
            cr_assert_eq(r.st.candidates_admitted, k - 1);
            for (uint32_t i = 0; i < k; i++) cr_assert_eq(r.idx[i], m.idx[i]);
            result_free(&r);
            result_free(&m);
            free_prob(&pr);
        }
    sieve_device_close(dev);
}

/* ---------------------------------------------------------------- arguments */

Test(indexer_errors, bad_arguments) {
    sieve_device *dev = open_cpu("cpu:2");
    sieve_indexer_params p;
    sieve_indexer_params_init(&p, SIEVE_DTYPE_F32, 2, 2, 4, 6, 3);
    cr_assert_eq(p.dtype, SIEVE_DTYPE_F32);
    cr_assert(p.n_queries == 2 && p.heads == 2 && p.head_dim == 4 && p.n_keys == 6 && p.k == 3);
    cr_assert(!p.causal && !p.pos0 && !p.seed && !p.sample_keys && !p.candidate_capacity &&
              !p.force_boundary && p.forced_boundary == 0.0f);
    float q[2 * 2 * 4], keys[6 * 4], w[2 * 2];
    for (int i = 0; i < 16; i++) q[i] = (float)(i % 5) - 1.0f;
    for (int i = 0; i < 24; i++) keys[i] = (float)(i % 7) - 2.0f;
    for (int i = 0; i < 4; i++) w[i] = 0.5f;
    int32_t idx[6 * 2];
    float sc[6 * 2];
    double rs[6 * 2];
    uint32_t cnt[2];
    sieve_indexer_stats st;

    size_t bytes = 99;
    cr_assert_eq(sieve_indexer_scratch_size(dev, &p, &bytes), 0);
    cr_assert_eq(bytes, 0, "the CPU needs no scratch");
    cr_assert_eq(sieve_indexer_scratch_size(NULL, &p, &bytes), SIEVE_EINVAL);
    cr_assert_eq(sieve_indexer_scratch_size(dev, NULL, &bytes), SIEVE_EINVAL);
    cr_assert_eq(sieve_indexer_scratch_size(dev, &p, NULL), SIEVE_EINVAL);

#define TOPK(pp, qq, kk, ww, ii, ss) sieve_indexer_topk(dev, pp, qq, kk, ww, NULL, 0, ii, ss, cnt, &st)
#define MAT(pp, qq, kk, ww, ii, ss) \
    sieve_indexer_topk_materialized(dev, pp, qq, kk, ww, ii, ss, cnt, &st)
    cr_assert_eq(sieve_indexer_topk(NULL, &p, q, keys, w, NULL, 0, idx, sc, cnt, &st),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_indexer_topk_materialized(NULL, &p, q, keys, w, idx, sc, cnt, &st),
                 SIEVE_EINVAL);
    cr_assert_eq(TOPK(NULL, q, keys, w, idx, sc), SIEVE_EINVAL);
    cr_assert_eq(TOPK(&p, NULL, keys, w, idx, sc), SIEVE_EINVAL);
    cr_assert_eq(TOPK(&p, q, NULL, w, idx, sc), SIEVE_EINVAL);
    cr_assert_eq(TOPK(&p, q, keys, NULL, idx, sc), SIEVE_EINVAL);
    cr_assert_eq(TOPK(&p, q, keys, w, NULL, sc), SIEVE_EINVAL);
    cr_assert_eq(TOPK(&p, q, keys, w, idx, NULL), SIEVE_EINVAL);
    cr_assert_eq(MAT(NULL, q, keys, w, idx, sc), SIEVE_EINVAL);
    cr_assert_eq(MAT(&p, NULL, keys, w, idx, sc), SIEVE_EINVAL);
    cr_assert_eq(MAT(&p, q, NULL, w, idx, sc), SIEVE_EINVAL);
    cr_assert_eq(MAT(&p, q, keys, NULL, idx, sc), SIEVE_EINVAL);
    cr_assert_eq(MAT(&p, q, keys, w, NULL, sc), SIEVE_EINVAL);
    cr_assert_eq(MAT(&p, q, keys, w, idx, NULL), SIEVE_EINVAL);
    cr_assert_eq(sieve_indexer_reference(NULL, q, keys, w, idx, rs, cnt), SIEVE_EINVAL);
    cr_assert_eq(sieve_indexer_reference(&p, NULL, keys, w, idx, rs, cnt), SIEVE_EINVAL);
    cr_assert_eq(sieve_indexer_reference(&p, q, NULL, w, idx, rs, cnt), SIEVE_EINVAL);
    cr_assert_eq(sieve_indexer_reference(&p, q, keys, NULL, idx, rs, cnt), SIEVE_EINVAL);
    cr_assert_eq(sieve_indexer_reference(&p, q, keys, w, NULL, rs, cnt), SIEVE_EINVAL);

    /* bad parameters, each on its own */
    for (int c = 0; c < 9; c++) {
        sieve_indexer_params b = p;
        switch (c) {
        case 0: b.k = 0; break;
        case 1: b.k = b.n_keys + 1; break;
        case 2: b.heads = 0; break;
        case 3: b.head_dim = 0; break;
        case 4: b.n_queries = 0; break;
        case 5: b.n_keys = 0; break;
        case 6: b.dtype = (sieve_dtype)3; break;
        case 7: /* 2^31 keys do not fit the int32 indices */
            b.n_keys = 0x80000000u;
            break;
        case 8: /* n_queries x heads x head_dim x 4 bytes does not fit in size_t */
            b.n_queries = UINT32_MAX;
            b.heads = UINT32_MAX;
            b.head_dim = UINT32_MAX;
            break;
        }
        cr_assert_eq(TOPK(&b, q, keys, w, idx, sc), SIEVE_EINVAL, "case %d", c);
        cr_assert_eq(MAT(&b, q, keys, w, idx, sc), SIEVE_EINVAL, "case %d", c);
        cr_assert_eq(sieve_indexer_reference(&b, q, keys, w, idx, rs, cnt), SIEVE_EINVAL,
                     "case %d", c);
        cr_assert_eq(sieve_indexer_scratch_size(dev, &b, &bytes), SIEVE_EINVAL, "case %d", c);
        cr_assert_eq(sieve__check_indexer_params(&b), SIEVE_EINVAL, "case %d", c);
    }
    cr_assert_eq(sieve__check_indexer_params(NULL), SIEVE_EINVAL);

    /* the good calls work (so the errors above were about the arguments), and the optional
     * outputs may be NULL */
    cr_assert_eq(TOPK(&p, q, keys, w, idx, sc), 0);
    cr_assert_eq(MAT(&p, q, keys, w, idx, sc), 0);
    cr_assert_eq(sieve_indexer_topk(dev, &p, q, keys, w, NULL, 0, idx, sc, NULL, NULL), 0);
    cr_assert_eq(sieve_indexer_topk_materialized(dev, &p, q, keys, w, idx, sc, NULL, NULL), 0);
    cr_assert_eq(sieve_indexer_reference(&p, q, keys, w, idx, NULL, NULL), 0);
    cr_assert_eq(sieve_indexer_reference(&p, q, keys, w, idx, rs, cnt), 0);
    sieve_indexer_params kl = p;
    kl.k = kl.n_keys; /* k = n_keys is allowed */
    cr_assert_eq(TOPK(&kl, q, keys, w, idx, sc), 0);
    cr_assert_eq(cnt[0], 6);
    cr_assert_eq(cnt[1], 6);
#undef TOPK
#undef MAT
    sieve_device_close(dev);
}

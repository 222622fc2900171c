/* test_knn_cpu.c: the CPU exact top-k. The fused path must equal the materialized oracle bit
 * for bit (rows, scores, counts) on every data set, dtype and metric; it must agree with the
 * float64 reference up to near-ties (tolerance derived in kt_util.c); forced underfill,
 * overflow and full-row recoveries must be exact and visible in the statistics. */
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

typedef struct kcase {
    sieve_dtype dtype;
    sieve_metric metric;
    kt_data data;
    uint64_t n;
    uint32_t dim, rpp, nq, k;
    uint32_t nq_ref; /* queries checked against the float64 reference */
} kcase;

/* Builds the case's matrix and queries, checks fused == oracle and the reference. */
static sieve_search_stats run_case(sieve_device *dev, const kcase *c,
                                   const sieve_search_params *override) {
    float *rows = kt_make_rows(c->data, c->n, c->dim, c->n + c->dim + c->data);
    if (c->metric == SIEVE_METRIC_COSINE) kt_normalise(rows, c->n, c->dim);
    kt_matrix t;
    kt_matrix_build(&t, c->dtype, c->dim, c->n, c->rpp, rows);
    float *q = kt_make_queries(c->data, c->nq, c->dim, c->nq * 31u + c->k);
    sieve_search_params p;
    sieve_search_params_init(&p, c->metric, c->k);
    if (override) p = *override;
    char what[160];
    snprintf(what, sizeof what, "%s/%s/%s n=%llu d=%u B=%u k=%u", sieve_dtype_name(c->dtype),
             sieve_metric_name(c->metric), kt_data_name(c->data), (unsigned long long)c->n,
             c->dim, c->nq, c->k);
    size_t nk = (size_t)c->nq * c->k;
    int64_t *r = malloc(nk * sizeof *r);
    float *s = malloc(nk * sizeof *s);
    uint32_t *cnt = malloc(c->nq * sizeof *cnt);
    cr_assert(r && s && cnt);
    sieve_search_stats st;
    kt_check_fused_vs_oracle(dev, &t.m, q, c->nq, &p, what, &st, r, s, cnt, NULL);
    if (getenv("KT_VERBOSE"))
        fprintf(stderr,
                "%-44s sampled %8llu admitted %9llu rescans %3llu paths C%llu U%llu O%llu F%llu "
                "D%llu\n",
                what, (unsigned long long)st.rows_sampled,
                (unsigned long long)st.candidates_admitted, (unsigned long long)st.rescans,
                (unsigned long long)st.path_count[0], (unsigned long long)st.path_count[1],
                (unsigned long long)st.path_count[2], (unsigned long long)st.path_count[3],
                (unsigned long long)st.path_count[4]);
    uint32_t nref = c->nq_ref < c->nq ? c->nq_ref : c->nq;
    if (nref) kt_check_reference(&t.m, q, nref, c->metric, c->k, r, s, cnt, what);
    free(r);
    free(s);
    free(cnt);
    free(q);
    free(rows);
    kt_matrix_free(&t);
    return st;
}

/* Every data set through the sampled (non-direct) path at B=64 and B=1. */
static void sampled_sets(sieve_dtype dtype, sieve_metric metric) {
    sieve_device *dev = open_cpu("cpu:2");
    uint64_t fused_queries = 0;
    for (int d = 0; d < KT_DATA_COUNT; d++) {
        kcase c = {dtype, metric, (kt_data)d, 40000, 24, 192, 64, 10, 3};
        sieve_search_stats st = run_case(dev, &c, NULL);
        cr_assert_eq(st.path_count[SIEVE_PATH_DIRECT], 0, "N=40000 must not take the direct path");
        cr_assert_gt(st.rows_sampled, 0);
        fused_queries += st.path_count[SIEVE_PATH_CERTIFIED] + st.path_count[SIEVE_PATH_UNDERFILL] +
                         st.path_count[SIEVE_PATH_OVERFLOW];
        /* pages of 448 rows: two tiles each (256 + 192), the last page one short tile */
        kcase c1 = {dtype, metric, (kt_data)d, 40000, 24, 448, 1, 100, 1};
        run_case(dev, &c1, NULL);
    }
    /* Most sets are not degenerate: the gated path must have answered most queries. */
    cr_assert_geq(fused_queries, 5 * 64u, "gated paths answered only %llu queries",
                  (unsigned long long)fused_queries);
    sieve_device_close(dev);
}

Test(knn_sampled, f32_dot) { sampled_sets(SIEVE_DTYPE_F32, SIEVE_METRIC_DOT); }
Test(knn_sampled, f32_cosine) { sampled_sets(SIEVE_DTYPE_F32, SIEVE_METRIC_COSINE); }
Test(knn_sampled, f32_euclid) { sampled_sets(SIEVE_DTYPE_F32, SIEVE_METRIC_EUCLID); }
Test(knn_sampled, f16_dot) { sampled_sets(SIEVE_DTYPE_F16, SIEVE_METRIC_DOT); }
Test(knn_sampled, f16_cosine) { sampled_sets(SIEVE_DTYPE_F16, SIEVE_METRIC_COSINE); }
Test(knn_sampled, f16_euclid) { sampled_sets(SIEVE_DTYPE_F16, SIEVE_METRIC_EUCLID); }
Test(knn_sampled, bf16_dot) { sampled_sets(SIEVE_DTYPE_BF16, SIEVE_METRIC_DOT); }
Test(knn_sampled, bf16_cosine) { sampled_sets(SIEVE_DTYPE_BF16, SIEVE_METRIC_COSINE); }
Test(knn_sampled, bf16_euclid) { sampled_sets(SIEVE_DTYPE_BF16, SIEVE_METRIC_EUCLID); }

/* Small row counts (direct path), N = 1, N not a multiple of the page, k = 1 and k = N. */
Test(knn_small, every_dtype_metric_and_set) {
    sieve_device *dev = open_cpu("cpu:2");
    const uint64_t ns[] = {1, 100, 1000};
    for (int dt = 0; dt < 3; dt++)
        for (int me = 0; me < 3; me++)
            for (int d = 0; d < KT_DATA_COUNT; d++)
                for (int i = 0; i < 3; i++) {
                    uint64_t n = ns[i];
                    uint32_t ks[] = {1, (uint32_t)(n / 2 ? n / 2 : 1), (uint32_t)n};
                    for (int j = 0; j < 3; j++) {
                        uint32_t nq = (d + j) % 2 ? 64 : 1;
                        kcase c = {(sieve_dtype)dt, (sieve_metric)me, (kt_data)d, n, 20, 128,
                                   nq, ks[j], 2};
                        sieve_search_stats st = run_case(dev, &c, NULL);
                        cr_assert_eq(st.path_count[SIEVE_PATH_DIRECT], nq);
                    }
                }
    sieve_device_close(dev);
}

Test(knn_small, k_larger_than_n_is_einval) {
    sieve_device *dev = open_cpu("cpu");
    float rows[3 * 8] = {0}, q[8] = {1};
    kt_matrix t;
    kt_matrix_build(&t, SIEVE_DTYPE_F32, 8, 3, 64, rows);
    sieve_search_params p;
    sieve_search_params_init(&p, SIEVE_METRIC_DOT, 4);
    int64_t r[4];
    float s[4];
    double keys[4];
    cr_assert_eq(sieve_knn(dev, &t.m, q, 1, &p, NULL, 0, r, s, NULL, NULL, NULL), SIEVE_EINVAL);
    cr_assert_eq(sieve_knn_materialized(dev, &t.m, q, 1, &p, r, s, NULL, NULL), SIEVE_EINVAL);
    cr_assert_eq(sieve_knn_reference(&t.m, q, 1, SIEVE_METRIC_DOT, 4, r, keys, NULL), SIEVE_EINVAL);
    size_t bytes = 0;
    cr_assert_eq(sieve_knn_scratch_size(dev, &t.m, 1, &p, &bytes), SIEVE_EINVAL);
    p.k = 0;
    cr_assert_eq(sieve_knn(dev, &t.m, q, 1, &p, NULL, 0, r, s, NULL, NULL, NULL), SIEVE_EINVAL);
    cr_assert_eq(sieve_knn_reference(&t.m, q, 1, SIEVE_METRIC_DOT, 0, r, keys, NULL), SIEVE_EINVAL);
    p.k = 3;
    cr_assert_eq(sieve_knn(dev, &t.m, q, 1, &p, NULL, 0, r, s, NULL, NULL, NULL), 0);
    kt_matrix_free(&t);
    sieve_device_close(dev);
}

Test(knn_errors, bad_arguments) {
    sieve_device *dev = open_cpu("cpu:2");
    float rows[100 * 8];
    for (int i = 0; i < 800; i++) rows[i] = (float)(i % 7) - 3.0f;
    kt_matrix t;
    kt_matrix_build(&t, SIEVE_DTYPE_F32, 8, 100, 64, rows);
    float q[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    sieve_search_params p;
    sieve_search_params_init(&p, SIEVE_METRIC_EUCLID, 5);
    int64_t r[5];
    float s[5];
    cr_assert_eq(sieve_knn(NULL, &t.m, q, 1, &p, NULL, 0, r, s, NULL, NULL, NULL), SIEVE_EINVAL);
    cr_assert_eq(sieve_knn(dev, NULL, q, 1, &p, NULL, 0, r, s, NULL, NULL, NULL), SIEVE_EINVAL);
    cr_assert_eq(sieve_knn(dev, &t.m, NULL, 1, &p, NULL, 0, r, s, NULL, NULL, NULL), SIEVE_EINVAL);
    cr_assert_eq(sieve_knn(dev, &t.m, q, 0, &p, NULL, 0, r, s, NULL, NULL, NULL), SIEVE_EINVAL);
    cr_assert_eq(sieve_knn(dev, &t.m, q, 1, NULL, NULL, 0, r, s, NULL, NULL, NULL), SIEVE_EINVAL);
    cr_assert_eq(sieve_knn(dev, &t.m, q, 1, &p, NULL, 0, NULL, s, NULL, NULL, NULL), SIEVE_EINVAL);
    cr_assert_eq(sieve_knn(dev, &t.m, q, 1, &p, NULL, 0, r, NULL, NULL, NULL, NULL), SIEVE_EINVAL);
    sieve_matrix bad = t.m;
    bad.rows_per_page = 96;
    cr_assert_eq(sieve_knn(dev, &bad, q, 1, &p, NULL, 0, r, s, NULL, NULL, NULL), SIEVE_EINVAL);
    bad = t.m;
    bad.norm_pages = NULL; /* Euclid needs norms */
    cr_assert_eq(sieve_knn(dev, &bad, q, 1, &p, NULL, 0, r, s, NULL, NULL, NULL), SIEVE_EINVAL);
    bad.dim = 0;
    cr_assert_eq(sieve_knn(dev, &bad, q, 1, &p, NULL, 0, r, s, NULL, NULL, NULL), SIEVE_EINVAL);
    bad = t.m;
    bad.dtype = (sieve_dtype)7;
    cr_assert_eq(sieve_knn(dev, &bad, q, 1, &p, NULL, 0, r, s, NULL, NULL, NULL), SIEVE_EINVAL);
    sieve_search_params bp = p;
    bp.metric = (sieve_metric)9;
    cr_assert_eq(sieve_knn(dev, &t.m, q, 1, &bp, NULL, 0, r, s, NULL, NULL, NULL), SIEVE_EINVAL);
    bp = p;
    bp.force_boundary = 1;
    bp.forced_boundary = NAN;
    cr_assert_eq(sieve_knn(dev, &t.m, q, 1, &bp, NULL, 0, r, s, NULL, NULL, NULL), SIEVE_EINVAL);
    float qnan[8] = {1, 2, NAN, 4, 5, 6, 7, 8};
    cr_assert_eq(sieve_knn(dev, &t.m, qnan, 1, &p, NULL, 0, r, s, NULL, NULL, NULL),
                 SIEVE_ENONFINITE);
    cr_assert_eq(sieve_knn_materialized(dev, &t.m, qnan, 1, &p, r, s, NULL, NULL),
                 SIEVE_ENONFINITE);
    qnan[2] = INFINITY;
    cr_assert_eq(sieve_knn(dev, &t.m, qnan, 1, &p, NULL, 0, r, s, NULL, NULL, NULL),
                 SIEVE_ENONFINITE);
    cr_assert_eq(sieve_knn_reference(NULL, q, 1, SIEVE_METRIC_DOT, 1, r, NULL, NULL), SIEVE_EINVAL);
    cr_assert_eq(sieve_knn_reference(&t.m, q, 1, SIEVE_METRIC_DOT, 1, NULL, NULL, NULL),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_knn_reference(&t.m, q, 1, (sieve_metric)5, 1, r, NULL, NULL), SIEVE_EINVAL);
    /* the good call works, so the errors above were about the arguments */
    cr_assert_eq(sieve_knn(dev, &t.m, q, 1, &p, NULL, 0, r, s, NULL, NULL, NULL), 0);
    kt_matrix_free(&t);
    sieve_device_close(dev);
}

/* The caller-owned scratch (CUB style): the size query, too small, unaligned. */
Test(knn_scratch, size_query_enospc_and_unaligned) {
    sieve_device *dev = open_cpu("cpu:2");
    uint64_t n = 40000;
    uint32_t dim = 16, nq = 8, k = 20;
    float *rows = kt_make_rows(KT_GAUSS, n, dim, 3);
    kt_matrix t;
    kt_matrix_build(&t, SIEVE_DTYPE_F16, dim, n, 128, rows);
    float *q = kt_make_queries(KT_GAUSS, nq, dim, 4);
    sieve_search_params p;
    sieve_search_params_init(&p, SIEVE_METRIC_DOT, k);
    size_t bytes = 0;
    cr_assert_eq(sieve_knn_scratch_size(dev, &t.m, nq, &p, &bytes), 0);
    cr_assert_gt(bytes, 0);
    cr_assert_eq(sieve_knn_scratch_size(dev, &t.m, 0, &p, &bytes), SIEVE_EINVAL);
    cr_assert_eq(sieve_knn_scratch_size(dev, &t.m, nq, &p, NULL), SIEVE_EINVAL);
    cr_assert_eq(sieve_knn_scratch_size(dev, &t.m, nq, &p, &bytes), 0);
    int64_t r0[160], r1[160];
    float s0[160], s1[160];
    uint32_t c0[8], c1[8];
    cr_assert_eq(sieve_knn(dev, &t.m, q, nq, &p, NULL, 0, r0, s0, c0, NULL, NULL), 0);
    char *block = malloc(bytes + 1);
    cr_assert_not_null(block);
    cr_assert_eq(sieve_knn(dev, &t.m, q, nq, &p, block + 1, bytes - 1, r1, s1, c1, NULL, NULL),
                 SIEVE_ENOSPC);
    cr_assert_eq(sieve_knn(dev, &t.m, q, nq, &p, block + 1, bytes, r1, s1, c1, NULL, NULL), 0);
    cr_assert_eq(memcmp(r0, r1, sizeof r0), 0);
    cr_assert_eq(memcmp(s0, s1, sizeof s0), 0);
    cr_assert_eq(memcmp(c0, c1, sizeof c0), 0);
    free(block);
    free(rows);
    free(q);
    kt_matrix_free(&t);
    sieve_device_close(dev);
}

/* The fast path really runs: Gaussian data, N = 50000, k = 10, every query certified by the
 * first scan, and the gate admitted a small share of the rows. */
Test(knn_paths, certified_on_gaussian) {
    sieve_device *dev = open_cpu("cpu:2");
    for (int me = 0; me < 3; me++) {
        kcase c = {SIEVE_DTYPE_F32, (sieve_metric)me, KT_GAUSS, 50000, 32, 256, 64, 10, 4};
        sieve_search_stats st = run_case(dev, &c, NULL);
        cr_assert_eq(st.path_count[SIEVE_PATH_CERTIFIED], 64,
                     "%s: certified %llu of 64 (underfill %llu overflow %llu full %llu)",
                     sieve_metric_name(c.metric),
                     (unsigned long long)st.path_count[SIEVE_PATH_CERTIFIED],
                     (unsigned long long)st.path_count[SIEVE_PATH_UNDERFILL],
                     (unsigned long long)st.path_count[SIEVE_PATH_OVERFLOW],
                     (unsigned long long)st.path_count[SIEVE_PATH_FULL]);
        cr_assert_eq(st.rows_sampled, 16384ull * 64);
        cr_assert_eq(st.rows_scanned, 50000ull * 64);
        cr_assert_eq(st.rescans, 0);
        cr_assert_geq(st.candidates_admitted, 10ull * 64);
        cr_assert_lt(st.candidates_admitted, 50000ull * 64 / 20,
                     "the gate admitted %llu of %llu rows",
                     (unsigned long long)st.candidates_admitted, 50000ull * 64);
    }
    sieve_device_close(dev);
}

/* P(Poisson(r) > j), summed term by term in long double (the test's own reference). */
static long double poisson_above(double r, uint64_t j) {
    long double q = expl(-(long double)r); /* P(0), then P(i) up to P(j) */
    for (uint64_t i = 1; i <= j; i++) q *= (long double)r / (long double)i;
    long double above = 0.0L;
    for (uint64_t i = j + 1; q > 1e-40L || (double)i < r; i++) {
        q *= (long double)r / (long double)i;
        above += q;
    }
    return above;
}

/* The rank of the rule before sieve__boundary_rank's bound: floor(1.25 r + 3 sqrt(r) + 2). */
static uint64_t rank_before(double r) { return (uint64_t)floor(1.25 * r + 3.0 * sqrt(r) + 2.0); }

/* The proposal's rank: the chance that more than j sampled rows lie among a query's k best
 * (an underfill) is at most SIEVE__UNDERFILL_P; j is never below the rule before
 * (1.25 r + 3 sqrt(r) + 2) and, where it is above it, the smallest such rank or one more
 * (the rule bounds the tail from above). Over r from 0.001 to 2000, the range of k S / N
 * the sample sizes give. */
Test(knn_paths, boundary_rank_bounds_the_underfill_chance) {
    cr_assert_eq(sieve__boundary_rank(0.0), 0);
    cr_assert_eq(sieve__boundary_rank(-1.0), 0);
    uint64_t prev = 0, raised = 0;
    for (double r = 0.001; r < 2000.0; r *= 1.07) {
        const uint64_t j = sieve__boundary_rank(r);
        const uint64_t before = rank_before(r);
        const long double at = poisson_above(r, j);
        cr_assert_leq(at, (long double)SIEVE__UNDERFILL_P, "r = %g: j = %llu, P = %Lg", r,
                      (unsigned long long)j, at);
        cr_assert_geq(j, before, "r = %g: j = %llu below the rule before (%llu)", r,
                      (unsigned long long)j, (unsigned long long)before);
        if (j > before) {
            raised++;
            if (j >= 2)
                cr_assert_gt(poisson_above(r, j - 2), (long double)SIEVE__UNDERFILL_P,
                             "r = %g: j = %llu is more than one past the smallest", r,
                             (unsigned long long)j);
        }
        cr_assert_geq(j, prev, "r = %g: rank fell from %llu to %llu", r,
                      (unsigned long long)prev, (unsigned long long)j);
        prev = j;
    }
    /* the rule before failed the bound at r = 1.28 (3.7e-4 a query) */
    cr_assert_gt(raised, 20, "the bound raised the rank at %llu values of r only",
                 (unsigned long long)raised);
    cr_assert_gt(poisson_above(1.28, rank_before(1.28)), 1e-4L);
    cr_assert_gt(sieve__boundary_rank(1.28), rank_before(1.28));
}

/* Forced underfill: a boundary above every key and a tiny sample. The secondary boundary
 * recovers; the answer is still exact. */
Test(knn_paths, forced_underfill) {
    sieve_device *dev = open_cpu("cpu:2");
    for (int me = 0; me < 3; me++) {
        kcase c = {SIEVE_DTYPE_F32, (sieve_metric)me, KT_GAUSS, 30000, 16, 128, 64, 10, 2};
        sieve_search_params p;
        sieve_search_params_init(&p, c.metric, c.k);
        p.sample_rows = 256;
        p.force_boundary = 1;
        p.forced_boundary = 1e30f;
        sieve_search_stats st = run_case(dev, &c, &p);
        cr_assert_eq(st.candidates_admitted, 0);
        cr_assert_gt(st.path_count[SIEVE_PATH_UNDERFILL], 0,
                     "underfill path never ran (full %llu)",
                     (unsigned long long)st.path_count[SIEVE_PATH_FULL]);
        cr_assert_eq(st.path_count[SIEVE_PATH_CERTIFIED], 0);
        cr_assert_geq(st.rescans, 64);
    }
    sieve_device_close(dev);
}

/* Forced overflow: a candidate buffer smaller than what the boundary admits, no tightening.
 * The histogram names a higher threshold and the rescan is exact. With one worker the scan
 * is deterministic: a query that overflows is rescanned exactly once (the gate the histogram
 * names admits exactly the rows it counted, or the rescan is skipped for the full row). */
Test(knn_paths, forced_overflow) {
    sieve_device *one = open_cpu("cpu:1");
    for (int me = 0; me < 3; me++) {
        kcase c = {SIEVE_DTYPE_F32, (sieve_metric)me, KT_GAUSS, 30000, 16, 128, 64, 10, 2};
        sieve_search_params p;
        sieve_search_params_init(&p, c.metric, c.k);
        p.sample_rows = 8192;
        p.candidate_capacity = 16;
        p.flags = SIEVE_SEARCH_NO_TIGHTEN;
        sieve_search_stats st = run_case(one, &c, &p);
        cr_assert_geq(st.path_count[SIEVE_PATH_OVERFLOW], 32, "overflow answered only %llu",
                      (unsigned long long)st.path_count[SIEVE_PATH_OVERFLOW]);
        cr_assert_eq(st.rescans,
                     st.path_count[SIEVE_PATH_OVERFLOW] + st.path_count[SIEVE_PATH_FULL],
                     "rescans %llu, overflow %llu, full %llu", (unsigned long long)st.rescans,
                     (unsigned long long)st.path_count[SIEVE_PATH_OVERFLOW],
                     (unsigned long long)st.path_count[SIEVE_PATH_FULL]);
    }
    sieve_device_close(one);
    sieve_device *dev = open_cpu("cpu:2");
    for (int me = 0; me < 3; me++) {
        kcase c = {SIEVE_DTYPE_BF16, (sieve_metric)me, KT_CLUSTER, 30000, 16, 128, 64, 10, 2};
        sieve_search_params p;
        sieve_search_params_init(&p, c.metric, c.k);
        p.sample_rows = 1024;
        p.candidate_capacity = 24;
        p.flags = SIEVE_SEARCH_NO_TIGHTEN;
        sieve_search_stats st = run_case(dev, &c, &p);
        cr_assert_gt(st.path_count[SIEVE_PATH_OVERFLOW], 0, "overflow path never ran (full %llu)",
                     (unsigned long long)st.path_count[SIEVE_PATH_FULL]);
        cr_assert_gt(st.rescans, 0);
    }
    sieve_device_close(dev);
}

/* The gate is inclusive: a boundary equal to the k-th key admits exactly k rows and
 * certifies; one equal to the (k-1)-th admits k-1 and must recover (underfill; tightening
 * keeps the secondary scan within the buffers). */
Test(knn_paths, boundary_exactly_at_kth_key) {
    sieve_device *dev = open_cpu("cpu:2");
    uint64_t n = 40000;
    uint32_t dim = 16, k = 10;
    float *rows = kt_make_rows(KT_GAUSS, n, dim, 21);
    float *qs = kt_make_queries(KT_GAUSS, 4, dim, 22);
    for (int dt = 0; dt < 2; dt++)
        for (int me = 0; me < 2; me++) { /* Dot and Cosine report the key itself */
            float *x = malloc(n * dim * sizeof *x);
            cr_assert_not_null(x);
            memcpy(x, rows, n * dim * sizeof *x);
            if (me == SIEVE_METRIC_COSINE) kt_normalise(x, n, dim);
            kt_matrix t;
            kt_matrix_build(&t, (sieve_dtype)dt, dim, n, 128, x);
            for (uint32_t j = 0; j < 4; j++) {
                const float *q = qs + j * dim;
                sieve_search_params p;
                sieve_search_params_init(&p, (sieve_metric)me, k + 1);
                int64_t r[11];
                float s[11];
                cr_assert_eq(sieve_knn_materialized(dev, &t.m, q, 1, &p, r, s, NULL, NULL), 0);
                cr_assert_gt(s[k - 1], s[k], "need distinct keys around the k-th");
                p.k = k;
                p.sample_rows = 1024;
                p.force_boundary = 1;
                p.forced_boundary = s[k - 1];
                sieve_search_stats st;
                kt_check_fused_vs_oracle(dev, &t.m, q, 1, &p, "boundary = k-th key", &st, NULL,
                                         NULL, NULL, NULL);
                cr_assert_eq(st.candidates_admitted, k, "admitted %llu",
                             (unsigned long long)st.candidates_admitted);
                cr_assert_eq(st.path_count[SIEVE_PATH_CERTIFIED], 1);
                p.forced_boundary = s[k - 2];
                kt_check_fused_vs_oracle(dev, &t.m, q, 1, &p, "boundary = (k-1)-th key", &st,
                                         NULL, NULL, NULL, NULL);
                cr_assert_eq(st.candidates_admitted, k - 1);
                cr_assert_eq(st.path_count[SIEVE_PATH_UNDERFILL], 1,
                             "paths C%llu U%llu O%llu F%llu",
                             (unsigned long long)st.path_count[0],
                             (unsigned long long)st.path_count[1],
                             (unsigned long long)st.path_count[2],
                             (unsigned long long)st.path_count[3]);
            }
            kt_matrix_free(&t);
            free(x);
        }
    free(rows);
    free(qs);
    sieve_device_close(dev);
}

/* Integer keys on a bin grid: with the boundary at 0 and the sample maximum at 1024 the
 * 512 bins are 2 wide, so many keys sit exactly on bin edges and on tightened thresholds,
 * and the k-th key is shared by several rows. */
Test(knn_paths, keys_on_bin_edges_and_ties_at_the_gate) {
    sieve_device *dev = open_cpu("cpu:2");
    uint64_t n = 40000;
    uint32_t dim = 2, k = 300;
    float *rows = malloc(n * dim * sizeof *rows);
    cr_assert_not_null(rows);
    kt_rng rng = {31};
    for (uint64_t r = 0; r < n; r++) {
        rows[r * dim] = r % 800 == 0 ? 1024.0f : (float)((int)(kt_next(&rng) % 1524) - 500);
        rows[r * dim + 1] = (float)((int)(kt_next(&rng) % 7) - 3);
    }
    const float q[2] = {1.0f, 0.0f};
    for (int dt = 0; dt < 2; dt++) { /* float32 and float16 hold these integers exactly */
        kt_matrix t;
        kt_matrix_build(&t, (sieve_dtype)dt, dim, n, 192, rows);
        for (int variant = 0; variant < 3; variant++) {
            sieve_search_params p;
            sieve_search_params_init(&p, SIEVE_METRIC_DOT, k);
            p.sample_rows = 8192;
            p.candidate_capacity = (uint32_t)n;
            p.force_boundary = variant < 2;
            p.forced_boundary = 0.0f;
            if (variant == 1) p.flags = SIEVE_SEARCH_NO_TIGHTEN;
            sieve_search_stats st;
            int64_t r[300];
            float s[300];
            uint32_t cnt;
            kt_check_fused_vs_oracle(dev, &t.m, q, 1, &p, "integer grid", &st, r, s, &cnt, NULL);
            cr_assert_eq(st.path_count[SIEVE_PATH_CERTIFIED], 1, "variant %d", variant);
            kt_check_reference(&t.m, q, 1, SIEVE_METRIC_DOT, k, r, s, &cnt, "integer grid");
            for (uint32_t i = 1; i < k; i++) /* exact ties are ordered by row */
                if (s[i] == s[i - 1]) cr_assert_lt(r[i - 1], r[i]);
        }
        kt_matrix_free(&t);
    }
    free(rows);
    sieve_device_close(dev);
}

/* All ties: identical integer rows give exactly equal keys in any summation order, so the
 * answer is known: the k smallest eligible rows. A tiny buffer overflows twice and the full
 * row recovers. */
Test(knn_paths, all_ties_go_full_and_break_ties_by_row) {
    sieve_device *dev = open_cpu("cpu:2");
    uint64_t n = 40000;
    uint32_t dim = 16, k = 10, nq = 4;
    float *rows = malloc(n * dim * sizeof *rows);
    cr_assert_not_null(rows);
    for (uint64_t r = 0; r < n; r++)
        for (uint32_t i = 0; i < dim; i++) rows[r * dim + i] = (float)((int)(i % 5) - 2);
    float q[4 * 16];
    for (uint32_t i = 0; i < nq * dim; i++) q[i] = (float)((int)(i % 3) - 1);
    for (int dt = 0; dt < 3; dt++) {
        kt_matrix t;
        kt_matrix_build(&t, (sieve_dtype)dt, dim, n, 192, rows);
        uint64_t *del = kt_matrix_deleted(&t);
        kt_bit_set(del, 0);
        kt_bit_set(del, 3);
        kt_bit_set(del, 9);
        for (int me = 0; me < 3; me += 2) { /* Dot and Euclid keep integer keys */
            sieve_search_params p;
            sieve_search_params_init(&p, (sieve_metric)me, k);
            p.candidate_capacity = 4;
            sieve_search_stats st;
            int64_t r[40];
            float s[40];
            uint32_t cnt[4];
            kt_check_fused_vs_oracle(dev, &t.m, q, nq, &p, "all ties", &st, r, s, cnt, NULL);
            cr_assert_eq(st.path_count[SIEVE_PATH_FULL], nq);
            const int64_t want[10] = {1, 2, 4, 5, 6, 7, 8, 10, 11, 12};
            for (uint32_t j = 0; j < nq; j++) {
                cr_assert_eq(cnt[j], k);
                for (uint32_t i = 0; i < k; i++) {
                    cr_assert_eq(r[j * k + i], want[i], "query %u rank %u: row %lld, want %lld",
                                 j, i, (long long)r[j * k + i], (long long)want[i]);
                    cr_assert_eq(s[j * k + i], s[j * k], "all scores must be equal");
                }
            }
        }
        kt_matrix_free(&t);
    }
    free(rows);
    sieve_device_close(dev);
}

/* Identical real-valued rows must score alike wherever they lie, or ties between them are
 * not broken by row. 20,000 rows in pages of 1024 end in a 544-row page: tiles of 256, 256
 * and 32 rows. Before the short tile was scored padded to the full tile, OpenBLAS computed it
 * with another kernel (another summation order) and, for 2 of 8 random queries, its rows
 * outranked row 0 (found through the REST API, tests/python/test_rest_exact.py). Every
 * dtype and metric, one query (sgemv) and eight (sgemm), k = 1 and 100, and twins: row r
 * and row r + 10,000 equal, so each twin pair must come back together, smaller row first. */
Test(knn_paths, identical_real_rows_score_alike_wherever_they_lie) {
    sieve_device *dev = open_cpu("cpu:2");
    const uint64_t n = 20000;
    const uint32_t dim = 32, nq = 8;
    float *one = kt_make_rows(KT_GAUSS, 1, dim, 11);
    float *half = kt_make_rows(KT_GAUSS, n / 2, dim, 12);
    float *rows = malloc(n * dim * sizeof *rows);
    float *twins = malloc(n * dim * sizeof *twins);
    float *q = kt_make_queries(KT_GAUSS, nq, dim, 13);
    cr_assert(one && half && rows && twins && q);
    for (uint64_t r = 0; r < n; r++) {
        memcpy(rows + r * dim, one, dim * sizeof *rows);
        memcpy(twins + r * dim, half + (r % (n / 2)) * dim, dim * sizeof *twins);
    }
    int64_t *r = malloc(nq * 100 * sizeof *r);
    float *sc = malloc(nq * 100 * sizeof *sc);
    cr_assert(r && sc);
    uint32_t cnt[8];
    for (int dt = 0; dt < 3; dt++)
        for (int me = 0; me < 3; me++)
            for (uint32_t b = 1; b <= nq; b += nq - 1)
                for (uint32_t k = 1; k <= 100; k += 99) {
                    for (int set = 0; set < 2; set++) {
                        kt_matrix t;
                        kt_matrix_build(&t, (sieve_dtype)dt, dim, n, 1024, set ? twins : rows);
                        sieve_search_params p;
                        sieve_search_params_init(&p, (sieve_metric)me, k);
                        char what[96];
                        snprintf(what, sizeof what, "%s %s %s B=%u k=%u",
                                 set ? "twins" : "identical", sieve_dtype_name((sieve_dtype)dt),
                                 sieve_metric_name((sieve_metric)me), b, k);
                        kt_check_fused_vs_oracle(dev, &t.m, q, b, &p, what, NULL, r, sc, cnt,
                                                 NULL);
                        for (uint32_t j = 0; j < b; j++) {
                            cr_assert_eq(cnt[j], k, "%s: count", what);
                            for (uint32_t i = 0; i < k; i++) {
                                const int64_t *rj = r + (size_t)j * k;
                                const float *sj = sc + (size_t)j * k;
                                if (!set) {
                                    cr_assert_eq(rj[i], (int64_t)i,
                                                 "%s query %u rank %u: row %lld, want %u", what,
                                                 j, i, (long long)rj[i], i);
                                    cr_assert(sj[i] == sj[0], "%s: scores differ", what);
                                } else if (i % 2 == 1) {
                                    /* a pair: the twin right after, same score */
                                    cr_assert_eq(rj[i], rj[i - 1] + (int64_t)(n / 2),
                                                 "%s query %u rank %u: row %lld after %lld", what,
                                                 j, i, (long long)rj[i], (long long)rj[i - 1]);
                                    cr_assert(sj[i] == sj[i - 1], "%s: twins score apart", what);
                                }
                            }
                        }
                        kt_matrix_free(&t);
                    }
                }
    free(one);
    free(half);
    free(rows);
    free(twins);
    free(q);
    free(r);
    free(sc);
    sieve_device_close(dev);
}

/* Deleted and allowed masks on the sampled path, fewer eligible rows than k, and none. */
Test(knn_masks, deleted_allowed_and_too_few) {
    sieve_device *dev = open_cpu("cpu:2");
    uint64_t n = 40100; /* pages of 576 rows = tiles of 256, 256, 64; last page 256 + 100 */
    uint32_t dim = 24, nq = 64;
    float *rows = kt_make_rows(KT_CLUSTER, n, dim, 11);
    float *q = kt_make_queries(KT_CLUSTER, nq, dim, 12);
    kt_rng rng = {99};
    for (int dt = 0; dt < 3; dt++)
        for (int me = 0; me < 3; me++) {
            kt_matrix t;
            kt_matrix_build(&t, (sieve_dtype)dt, dim, n, 576, rows);
            uint64_t *del = kt_matrix_deleted(&t);
            uint64_t *allow = kt_matrix_allowed(&t);
            for (uint64_t r = 0; r < n; r++) {
                if (kt_uniform(&rng) < 0.3) kt_bit_set(del, r);
                if (kt_uniform(&rng) < 0.6) kt_bit_set(allow, r);
            }
            sieve_search_params p;
            sieve_search_params_init(&p, (sieve_metric)me, 15);
            int64_t *r = malloc(nq * 15 * sizeof *r);
            float *s = malloc(nq * 15 * sizeof *s);
            uint32_t cnt[64];
            sieve_search_stats st;
            kt_check_fused_vs_oracle(dev, &t.m, q, nq, &p, "masks", &st, r, s, cnt, NULL);
            kt_check_reference(&t.m, q, 3, p.metric, p.k, r, s, cnt, "masks");
            cr_assert_eq(st.path_count[SIEVE_PATH_DIRECT], 0);

            /* only 5 rows allowed (one of them deleted): 4 results and padding */
            memset(allow, 0, (n + 63) / 64 * sizeof *allow);
            const uint64_t few[5] = {7, 1000, 23456, 39998, 39999};
            for (int i = 0; i < 5; i++) kt_bit_set(allow, few[i]);
            memset(del, 0, (n + 63) / 64 * sizeof *del);
            kt_bit_set(del, 1000);
            kt_check_fused_vs_oracle(dev, &t.m, q, nq, &p, "few eligible", &st, r, s, cnt, NULL);
            kt_check_reference(&t.m, q, 2, p.metric, p.k, r, s, cnt, "few eligible");
            for (uint32_t j = 0; j < nq; j++) {
                cr_assert_eq(cnt[j], 4);
                cr_assert_eq(r[j * 15 + 4], -1);
                cr_assert(isnan(s[j * 15 + 14]));
            }
            /* nothing eligible */
            memset(allow, 0, (n + 63) / 64 * sizeof *allow);
            kt_check_fused_vs_oracle(dev, &t.m, q, nq, &p, "none eligible", &st, r, s, cnt, NULL);
            for (uint32_t j = 0; j < nq; j++) {
                cr_assert_eq(cnt[j], 0);
                cr_assert_eq(r[j * 15], -1);
            }
            free(r);
            free(s);
            kt_matrix_free(&t);
        }
    free(rows);
    free(q);
    sieve_device_close(dev);
}

/* Results do not depend on the number of worker threads (bit for bit), nor on the seed. */
Test(knn_determinism, threads_and_seed) {
    uint64_t n = 40000;
    uint32_t dim = 24, nq = 64, k = 50;
    float *rows = kt_make_rows(KT_GAUSS, n, dim, 5);
    float *q = kt_make_queries(KT_GAUSS, nq, dim, 6);
    kt_matrix t;
    kt_matrix_build(&t, SIEVE_DTYPE_F16, dim, n, 128, rows);
    const char *specs[] = {"cpu:1", "cpu:2", "cpu:3", "cpu:8"};
    int64_t *r0 = malloc(nq * k * sizeof *r0), *r1 = malloc(nq * k * sizeof *r1);
    float *s0 = malloc(nq * k * sizeof *s0), *s1 = malloc(nq * k * sizeof *s1);
    cr_assert(r0 && r1 && s0 && s1);
    for (int i = 0; i < 4; i++) {
        sieve_device *dev = open_cpu(specs[i]);
        sieve_search_params p;
        sieve_search_params_init(&p, SIEVE_METRIC_EUCLID, k);
        p.seed = 1000 + (uint64_t)i;
        int rc = sieve_knn(dev, &t.m, q, nq, &p, NULL, 0, i ? r1 : r0, i ? s1 : s0, NULL, NULL,
                           NULL);
        cr_assert_eq(rc, 0);
        if (i) {
            cr_assert_eq(memcmp(r0, r1, nq * k * sizeof *r0), 0, "%s differs from cpu:1", specs[i]);
            cr_assert_eq(memcmp(s0, s1, nq * k * sizeof *s0), 0, "%s differs from cpu:1", specs[i]);
        }
        sieve_device_close(dev);
    }
    free(r0);
    free(r1);
    free(s0);
    free(s1);
    free(rows);
    free(q);
    kt_matrix_free(&t);
}

/* Large k through the sampled path (k = 2048 of 40000, both sample-size rules). */
Test(knn_sampled, large_k) {
    sieve_device *dev = open_cpu("cpu:2");
    kcase c = {SIEVE_DTYPE_F32, SIEVE_METRIC_DOT, KT_GAUSS, 40000, 16, 128, 16, 2048, 1};
    sieve_search_params p;
    sieve_search_params_init(&p, c.metric, c.k);
    p.sample_rows = 8192;
    sieve_search_stats st = run_case(dev, &c, &p);
    cr_assert_eq(st.path_count[SIEVE_PATH_DIRECT], 0);
    cr_assert_gt(st.path_count[SIEVE_PATH_CERTIFIED], 0);
    sieve_device_close(dev);
}

/* SIEVE_SEARCH_RAW_KEYS reports the ranking key for every metric, on both paths; for Euclid
 * sieve_euclid_distance of the raw key is, bit for bit, the distance a normal call reports,
 * and the rows are the same. */
Test(knn_flags, raw_keys) {
    sieve_device *dev = open_cpu("cpu:2");
    uint64_t n = 40000;
    uint32_t dim = 24, nq = 8, k = 20;
    float *rows = kt_make_rows(KT_CLUSTER, n, dim, 41);
    float *q = kt_make_queries(KT_CLUSTER, nq, dim, 42);
    kt_matrix t;
    kt_matrix_build(&t, SIEVE_DTYPE_F16, dim, n, 256, rows);
    int64_t r0[160], r1[160];
    float s0[160], s1[160];
    for (int me = 0; me < 3; me++) {
        sieve_search_params p;
        sieve_search_params_init(&p, (sieve_metric)me, k);
        kt_check_fused_vs_oracle(dev, &t.m, q, nq, &p, "reported", NULL, r0, s0, NULL, NULL);
        p.flags |= SIEVE_SEARCH_RAW_KEYS;
        kt_check_fused_vs_oracle(dev, &t.m, q, nq, &p, "raw keys", NULL, r1, s1, NULL, NULL);
        cr_assert_eq(memcmp(r0, r1, sizeof r0), 0, "%s: raw keys changed the rows",
                     sieve_metric_name(p.metric));
        for (uint32_t j = 0; j < nq; j++)
            for (uint32_t i = 0; i < k; i++) {
                float raw = s1[j * k + i];
                float want = me == SIEVE_METRIC_EUCLID
                                 ? sieve_euclid_distance(q + (size_t)j * dim, dim, raw)
                                 : raw;
                cr_assert_eq(memcmp(&want, &s0[j * k + i], 4), 0,
                             "%s query %u rank %u: raw key %.9g gives %.9g, reported %.9g",
                             sieve_metric_name(p.metric), j, i, raw, want, s0[j * k + i]);
            }
    }
    kt_matrix_free(&t);
    free(rows);
    free(q);
    sieve_device_close(dev);
}

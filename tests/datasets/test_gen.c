/* test_gen.c: generators are deterministic for a seed, independent of chunking, and have the
 * statistics their header states; every adversarial kind really has its property. */
#include "helpers.h"

#include <math.h>

TestSuite(gen);

static double dotd(const float *a, const float *b, size_t d) {
    double s = 0.0;
    for (size_t i = 0; i < d; i++) s += (double)a[i] * (double)b[i];
    return s;
}

static float dotf(const float *a, const float *b, size_t d) { /* float32, index order */
    float s = 0.0f;
    for (size_t i = 0; i < d; i++) s += a[i] * b[i];
    return s;
}

static void expect_unit_norms(const float *x, size_t n, size_t d, const char *what) {
    for (size_t i = 0; i < n; i++) {
        double nn = sqrt(dotd(x + i * d, x + i * d, d));
        cr_assert(fabs(nn - 1.0) <= 1e-5, "%s: row %zu has norm %.9f, expected 1 within 1e-5",
                  what, i, nn);
    }
}

#define EXPECT_NEAR(v, want, tol)                                                           \
    cr_assert(fabs((double)(v) - (double)(want)) <= (tol), "%s = %.6f, expected %.6f +- %g", \
              #v, (double)(v), (double)(want), (double)(tol))

Test(gen, rng_is_seeded_and_in_range) {
    sieve_rng a, b, c;
    sieve_rng_init(&a, 42, 1, 7);
    sieve_rng_init(&b, 42, 1, 7);
    sieve_rng_init(&c, 42, 1, 8);
    int same = 1, diff = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = sieve_rng_u64(&a), y = sieve_rng_u64(&b), z = sieve_rng_u64(&c);
        same &= x == y;
        diff += x != z;
    }
    cr_assert(same, "same (seed, stream, index) gave different sequences");
    cr_assert_eq(diff, 100, "neighbouring indices overlap in %d of 100 draws", 100 - diff);
    /* uniform in [0,1), below(n) < n and roughly flat, normals with mean 0 and variance 1 */
    int hist[10] = {0};
    double s = 0, s2 = 0;
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        double u = sieve_rng_uniform(&a);
        cr_assert(u >= 0.0 && u < 1.0, "uniform %.17g outside [0,1)", u);
        uint64_t k = sieve_rng_below(&a, 10);
        cr_assert_lt(k, 10);
        hist[k]++;
        double g = sieve_rng_normal(&a);
        s += g;
        s2 += g * g;
    }
    for (int k = 0; k < 10; k++)
        cr_assert(abs(hist[k] - n / 10) < 800, "bucket %d has %d draws, expected %d +- 800", k,
                  hist[k], n / 10);
    EXPECT_NEAR(s / n, 0.0, 0.012);
    EXPECT_NEAR(s2 / n, 1.0, 0.015);
}

Test(gen, deterministic_and_independent_of_chunking) {
    const sieve_ds_gen_kind kinds[] = {SIEVE_DS_GEN_GAUSSIAN, SIEVE_DS_GEN_CLUSTERED};
    for (int k = 0; k < 2; k++) {
        sieve_ds_error err = {0};
        sieve_ds_gen_params p;
        sieve_ds_gen_params_init(&p, kinds[k]);
        p.dim = 33;
        p.count = 100;
        p.clusters = 7;
        p.seed = 12345;
        sieve_ds_gen *g1, *g2, *g3;
        EXPECT_OK(err, sieve_ds_gen_create(&p, &g1, &err));
        EXPECT_OK(err, sieve_ds_gen_create(&p, &g2, &err));
        p.seed = 12346;
        EXPECT_OK(err, sieve_ds_gen_create(&p, &g3, &err));
        float a[100 * 33], b[100 * 33], c[100 * 33];
        cr_assert_eq(sieve_ds_gen_rows(g1, 0, 100, a), 0);
        /* the same rows in uneven chunks from a second generator */
        cr_assert_eq(sieve_ds_gen_rows(g2, 0, 37, b), 0);
        cr_assert_eq(sieve_ds_gen_rows(g2, 37, 1, b + 37 * 33), 0);
        cr_assert_eq(sieve_ds_gen_rows(g2, 38, 62, b + 38 * 33), 0);
        expect_floats_eq(b, a, 100 * 33, "chunked rows");
        cr_assert_eq(sieve_ds_gen_rows(g3, 0, 100, c), 0);
        size_t differ = 0;
        for (size_t i = 0; i < 100 * 33; i++) differ += a[i] != c[i];
        cr_assert_gt(differ, 100 * 33 - 10, "another seed changed only %zu values", differ);
        float q1[5 * 33], q2[5 * 33];
        uint64_t s1[5], s2[5];
        cr_assert_eq(sieve_ds_gen_queries(g1, 3, 5, q1, s1), 0);
        cr_assert_eq(sieve_ds_gen_queries(g2, 3, 2, q2, s2), 0);
        cr_assert_eq(sieve_ds_gen_queries(g2, 5, 3, q2 + 2 * 33, s2 + 2), 0);
        expect_floats_eq(q2, q1, 5 * 33, "chunked queries");
        for (int i = 0; i < 5; i++) EXPECT_U64(s2[i], s1[i]);
        EXPECT_RC(err, SIEVE_ERANGE, sieve_ds_gen_rows(g1, 90, 11, a));
        sieve_ds_gen_destroy(g1);
        sieve_ds_gen_destroy(g2);
        sieve_ds_gen_destroy(g3);
    }
}

Test(gen, gaussian_statistics) {
    sieve_ds_error err = {0};
    sieve_ds_gen_params p;
    sieve_ds_gen_params_init(&p, SIEVE_DS_GEN_GAUSSIAN);
    p.dim = 768;
    p.count = 200;
    sieve_ds_gen *g;
    EXPECT_OK(err, sieve_ds_gen_create(&p, &g, &err));
    float *x = malloc(200 * 768 * sizeof(float));
    cr_assert_eq(sieve_ds_gen_rows(g, 0, 200, x), 0);
    double s = 0, s2 = 0, s4 = 0;
    const size_t n = 200 * 768;
    for (size_t i = 0; i < n; i++) {
        s += x[i];
        s2 += (double)x[i] * x[i];
        s4 += (double)x[i] * x[i] * x[i] * x[i];
    }
    EXPECT_NEAR(s / n, 0.0, 0.012);      /* 4.6 standard errors */
    EXPECT_NEAR(s2 / n, 1.0, 0.017);     /* 4.7 standard errors */
    EXPECT_NEAR(s4 / n, 3.0, 0.15);      /* kurtosis of a normal */
    sieve_ds_gen_destroy(g);
    p.normalize = 1;
    EXPECT_OK(err, sieve_ds_gen_create(&p, &g, &err));
    cr_assert_eq(sieve_ds_gen_rows(g, 0, 200, x), 0);
    expect_unit_norms(x, 200, 768, "normalised gaussian");
    cr_assert_eq(sieve_ds_gen_queries(g, 0, 10, x, NULL), 0);
    expect_unit_norms(x, 10, 768, "normalised gaussian queries");
    uint32_t cl;
    EXPECT_RC(err, SIEVE_EINVAL, sieve_ds_gen_cluster_of(g, 0, &cl));
    sieve_ds_gen_destroy(g);
    free(x);
}

Test(gen, clustered_statistics_match_the_stated_formulas) {
    sieve_ds_error err = {0};
    sieve_ds_gen_params p;
    sieve_ds_gen_params_init(&p, SIEVE_DS_GEN_CLUSTERED);
    p.dim = 256;
    p.count = 2000;
    p.clusters = 16;
    p.spread = 1.0f;
    p.anisotropy = 0.5f;
    p.seed = 9;
    const double s2 = 1.0, a2 = 0.25;
    sieve_ds_gen *g;
    EXPECT_OK(err, sieve_ds_gen_create(&p, &g, &err));
    const size_t n = 2000, d = 256;
    float *x = malloc(n * d * sizeof(float));
    float *c = malloc(16 * d * sizeof(float));
    uint32_t *cl = malloc(n * sizeof(uint32_t));
    cr_assert_eq(sieve_ds_gen_rows(g, 0, n, x), 0);
    expect_unit_norms(x, n, d, "clustered rows");
    for (uint32_t k = 0; k < 16; k++) cr_assert_eq(sieve_ds_gen_centre(g, k, c + k * d), 0);
    expect_unit_norms(c, 16, d, "centres");
    /* centres share the anisotropic direction: c_j . c_k ~ a^2 */
    double cc = 0;
    for (int j = 0; j < 16; j++)
        for (int k = j + 1; k < 16; k++) cc += dotd(c + j * d, c + k * d, d);
    EXPECT_NEAR(cc / (16 * 15 / 2), a2, 0.03);
    double to_centre = 0;
    int sizes[16] = {0};
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(sieve_ds_gen_cluster_of(g, i, &cl[i]), 0);
        sizes[cl[i]]++;
        double own = dotd(x + i * d, c + cl[i] * d, d);
        to_centre += own;
        for (uint32_t k = 0; k < 16; k++)
            if (k != cl[i])
                cr_assert_gt(own, dotd(x + i * d, c + k * d, d),
                             "row %zu is closer to centre %u than to its own %u", i, k, cl[i]);
    }
    EXPECT_NEAR(to_centre / n, 1.0 / sqrt(1.0 + s2), 0.01);
    for (int k = 0; k < 16; k++)
        cr_assert(sizes[k] > 60 && sizes[k] < 200, "cluster %d has %d rows, expected ~125", k,
                  sizes[k]);
    double same = 0, other = 0;
    size_t ns = 0, no = 0;
    for (size_t i = 0; i < 400; i++)
        for (size_t j = i + 1; j < 400; j++) {
            double v = dotd(x + i * d, x + j * d, d);
            if (cl[i] == cl[j]) {
                same += v;
                ns++;
            } else {
                other += v;
                no++;
            }
        }
    EXPECT_NEAR(same / (double)ns, 1.0 / (1.0 + s2), 0.02);
    EXPECT_NEAR(other / (double)no, a2 / (1.0 + s2), 0.02);
    sieve_ds_gen_destroy(g);
    free(x);
    free(c);
    free(cl);
}

Test(gen, msmarco_shape_limits_and_queries_near_their_source) {
    sieve_ds_error err = {0};
    sieve_ds_gen_params p;
    sieve_ds_gen_params_init(&p, SIEVE_DS_GEN_MSMARCO);
    EXPECT_U64(p.dim, 768);
    EXPECT_U64(p.count, 8841823);
    sieve_ds_gen *g;
    p.count = 8841824;
    EXPECT_RC(err, SIEVE_ERANGE, sieve_ds_gen_create(&p, &g, &err));
    EXPECT_MSG(err, "expected dimension 768 and at most 8841823 passages");
    p.count = 3000;
    p.dim = 512;
    EXPECT_RC(err, SIEVE_ERANGE, sieve_ds_gen_create(&p, &g, &err));
    p.dim = 768;
    p.clusters = 64; /* fewer clusters than the preset so 3000 rows fill them */
    EXPECT_OK(err, sieve_ds_gen_create(&p, &g, &err));
    const size_t n = 3000, d = 768, nq = 20;
    float *x = malloc(n * d * sizeof(float));
    float *q = malloc(nq * d * sizeof(float));
    uint64_t src[20];
    cr_assert_eq(sieve_ds_gen_rows(g, 0, n, x), 0);
    cr_assert_eq(sieve_ds_gen_queries(g, 0, nq, q, src), 0);
    expect_unit_norms(x, n, d, "msmarco passages");
    expect_unit_norms(q, nq, d, "msmarco queries");
    double med_sum = 0;
    double *sc = malloc(n * sizeof(double));
    for (size_t j = 0; j < nq; j++) {
        cr_assert_lt(src[j], n);
        size_t best = 0;
        for (size_t i = 0; i < n; i++) {
            sc[i] = dotd(q + j * d, x + i * d, d);
            if (sc[i] > sc[best]) best = i;
        }
        cr_assert_eq(best, src[j], "query %zu: top neighbour %zu, expected its source %llu", j,
                     best, (unsigned long long)src[j]);
        EXPECT_NEAR(sc[best], 1.0 / sqrt(1.0 + 0.36), 0.03);
        /* median score: the background band a^2/(1+s^2) scaled by 1/sqrt(1+t^2) */
        size_t below = 0;
        double band = 0.3025 / 2.0 / sqrt(1.36);
        for (size_t i = 0; i < n; i++) below += sc[i] < band;
        med_sum += (double)below / (double)n;
    }
    EXPECT_NEAR(med_sum / nq, 0.5, 0.1);
    free(sc);
    free(x);
    free(q);
    sieve_ds_gen_destroy(g);
}

Test(gen, parameter_errors) {
    sieve_ds_error err = {0};
    sieve_ds_gen_params p;
    sieve_ds_gen *g = (sieve_ds_gen *)1;
    sieve_ds_gen_params_init(&p, SIEVE_DS_GEN_CLUSTERED);
    p.anisotropy = 1.0f;
    EXPECT_RC(err, SIEVE_EINVAL, sieve_ds_gen_create(&p, &g, &err));
    cr_assert_null(g);
    EXPECT_MSG(err, "anisotropy 1; expected a value in [0, 1)");
    sieve_ds_gen_params_init(&p, SIEVE_DS_GEN_CLUSTERED);
    p.spread = -1.0f;
    EXPECT_RC(err, SIEVE_EINVAL, sieve_ds_gen_create(&p, &g, &err));
    sieve_ds_gen_params_init(&p, SIEVE_DS_GEN_GAUSSIAN);
    p.dim = 0;
    EXPECT_RC(err, SIEVE_EINVAL, sieve_ds_gen_create(&p, &g, &err));
    EXPECT_MSG(err, "dimension 0; expected 1 to 65536");
    p.dim = 8;
    p.count = 0;
    EXPECT_RC(err, SIEVE_EINVAL, sieve_ds_gen_create(&p, &g, &err));
}

/* ------------------------------------------------------------ adversarial */

#define AN 4096
#define AD 64

static float *adv(sieve_ds_adv_kind kind, const float *q, sieve_ds_adv_info *info) {
    float *x = malloc((size_t)AN * AD * sizeof(float));
    cr_assert_eq(sieve_ds_adversarial_fill(kind, q, AD, AN, 77, x, info), 0, "fill %s",
                 sieve_ds_adv_name(kind));
    /* any range can be generated on its own and matches */
    float part[100 * AD];
    cr_assert_eq(sieve_ds_adv_rows(kind, q, AD, AN, 77, 1000, 100, part, NULL), 0);
    expect_floats_eq(part, x + 1000 * AD, 100 * AD, sieve_ds_adv_name(kind));
    return x;
}

static void query(float *q, double *qn) {
    sieve_rng r;
    sieve_rng_init(&r, 5, 1, 0);
    for (int j = 0; j < AD; j++) q[j] = (float)(2.0 * sieve_rng_normal(&r));
    *qn = sqrt(dotd(q, q, AD));
}

Test(gen, adversarial_sorted) {
    float q[AD];
    double qn;
    query(q, &qn);
    for (int desc = 0; desc < 2; desc++) {
        sieve_ds_adv_info info;
        sieve_ds_adv_kind kind = desc ? SIEVE_DS_ADV_SORTED_DESC : SIEVE_DS_ADV_SORTED_ASC;
        float *x = adv(kind, q, &info);
        EXPECT_U64(info.distinct, AN);
        EXPECT_U64(info.outlier_row, UINT64_MAX);
        double prev = desc ? INFINITY : -INFINITY;
        float prevf = desc ? INFINITY : -INFINITY;
        for (size_t i = 0; i < AN; i++) {
            double s = dotd(q, x + i * AD, AD);
            float sf = dotf(q, x + i * AD, AD);
            cr_assert(desc ? s < prev : s > prev, "%s: score[%zu] = %.12g after %.12g",
                      sieve_ds_adv_name(kind), i, s, prev);
            cr_assert(desc ? sf < prevf : sf > prevf, "%s: float32 score[%zu] = %.9g after %.9g",
                      sieve_ds_adv_name(kind), i, (double)sf, (double)prevf);
            prev = s;
            prevf = sf;
        }
        /* end points: scores -|q| .. |q|; rows are not collinear (orthogonal part 0.5) */
        size_t first = desc ? AN - 1 : 0, last = desc ? 0 : AN - 1;
        EXPECT_NEAR(dotd(q, x + first * AD, AD) / qn, -1.0, 1e-6);
        EXPECT_NEAR(dotd(q, x + last * AD, AD) / qn, 1.0, 1e-6);
        EXPECT_NEAR(dotd(x, x, AD), 0.25 + 1.0, 1e-5);
        free(x);
    }
}

Test(gen, adversarial_ties_outlier_band_duplicates) {
    float q[AD];
    double qn;
    query(q, &qn);
    sieve_ds_adv_info info;

    float *x = adv(SIEVE_DS_ADV_TIES, q, &info);
    EXPECT_U64(info.distinct, 1);
    for (size_t i = 1; i < AN; i++)
        cr_assert_eq(memcmp(x, x + i * AD, AD * sizeof(float)), 0, "ties: row %zu differs", i);
    EXPECT_NEAR(dotd(q, x, AD) / qn, 0.5, 1e-6);
    free(x);

    x = adv(SIEVE_DS_ADV_OUTLIER, q, &info);
    cr_assert_lt(info.outlier_row, AN);
    double out = dotd(q, x + info.outlier_row * AD, AD), maxo = 0;
    for (size_t i = 0; i < AN; i++)
        if (i != info.outlier_row) maxo = fmax(maxo, fabs(dotd(q, x + i * AD, AD)));
    EXPECT_NEAR(out / qn, SIEVE_DS_ADV_OUTLIER_SCALE, 1e-2);
    cr_assert_leq(maxo, qn * (1 + 1e-6), "other scores up to %.6g, |q| = %.6g", maxo, qn);
    cr_assert_gt(maxo, qn * 0.99, "others should span [-|q|, |q|], max %.6g", maxo);
    cr_assert_gt(out, 1000 * maxo, "outlier %.6g is not huge next to %.6g", out, maxo);
    free(x);

    x = adv(SIEVE_DS_ADV_NARROW_BAND, q, &info);
    double lo = INFINITY, hi = -INFINITY;
    double *s = malloc(AN * sizeof(double));
    for (size_t i = 0; i < AN; i++) {
        s[i] = dotd(q, x + i * AD, AD);
        lo = fmin(lo, s[i]);
        hi = fmax(hi, s[i]);
    }
    cr_assert(lo >= 0.5 * qn - 1e-6 * qn && hi <= (0.5 + SIEVE_DS_ADV_BAND_WIDTH) * qn + 1e-6 * qn,
              "band [%.9g, %.9g] outside [%.9g, %.9g]", lo, hi, 0.5 * qn,
              (0.5 + SIEVE_DS_ADV_BAND_WIDTH) * qn);
    cr_assert_gt(hi - lo, 0.9 * SIEVE_DS_ADV_BAND_WIDTH * qn, "band too narrow: %.3g", hi - lo);
    size_t distinct_scores = 0;
    for (size_t i = 0; i < AN; i++) {
        int dup = 0;
        for (size_t j = 0; j < i && !dup; j++) dup = s[j] == s[i];
        distinct_scores += !dup;
    }
    cr_assert_gt(distinct_scores, AN / 2, "only %zu distinct scores", distinct_scores);
    free(s);
    free(x);

    x = adv(SIEVE_DS_ADV_DUPLICATES, q, &info);
    const size_t m = AN / 4;
    EXPECT_U64(info.distinct, m);
    for (size_t i = m; i < AN; i++)
        cr_assert_eq(memcmp(x + i * AD, x + (i % m) * AD, AD * sizeof(float)), 0,
                     "duplicates: row %zu is not a copy of row %zu", i, i % m);
    for (size_t i = 0; i < m; i++)
        for (size_t j = i + 1; j < m; j++)
            if (!memcmp(x + i * AD, x + j * AD, AD * sizeof(float)))
                cr_assert_fail("duplicates: distinct rows %zu and %zu are equal", i, j);
    free(x);

    x = adv(SIEVE_DS_ADV_RANDOM, q, &info);
    for (size_t i = 0; i < AN; i++)
        cr_assert_leq(fabs(dotd(q, x + i * AD, AD)), qn * (1 + 1e-6));
    free(x);
}

Test(gen, adversarial_errors_and_names) {
    float q[4] = {0, 0, 0, 0}, x[16];
    EXPECT_U64(sieve_ds_adversarial_fill(SIEVE_DS_ADV_TIES, q, 4, 4, 1, x, NULL), (uint64_t)(int64_t)SIEVE_EINVAL);
    q[1] = NAN;
    EXPECT_U64(sieve_ds_adversarial_fill(SIEVE_DS_ADV_TIES, q, 4, 4, 1, x, NULL), (uint64_t)(int64_t)SIEVE_EINVAL);
    q[1] = 1;
    cr_assert_eq(sieve_ds_adv_rows(SIEVE_DS_ADV_RANDOM, q, 4, 4, 1, 3, 2, x, NULL), SIEVE_ERANGE);
    cr_assert_eq(sieve_ds_adv_rows((sieve_ds_adv_kind)99, q, 4, 4, 1, 0, 1, x, NULL), SIEVE_EINVAL);
    /* dimension 1: nothing is orthogonal to q, rows are t * qhat */
    float q1 = -3.0f, x1[5];
    cr_assert_eq(sieve_ds_adversarial_fill(SIEVE_DS_ADV_SORTED_ASC, &q1, 1, 5, 1, x1, NULL), 0);
    float want[5] = {1.0f, 0.5f, 0.0f, -0.5f, -1.0f}; /* qhat = -1, t = -1 .. 1 */
    for (int i = 0; i < 5; i++) /* by value: the middle row may be -0 */
        cr_assert_eq(x1[i], want[i], "dim 1 row %d: %g, expected %g", i, (double)x1[i],
                     (double)want[i]);
    for (int k = 0; k <= SIEVE_DS_ADV_RANDOM; k++) {
        sieve_ds_adv_kind back;
        cr_assert_eq(sieve_ds_adv_parse(sieve_ds_adv_name((sieve_ds_adv_kind)k), &back), 0);
        cr_assert_eq((int)back, k);
    }
    sieve_ds_adv_kind back;
    cr_assert_eq(sieve_ds_adv_parse("sorted", &back), SIEVE_EINVAL);
}

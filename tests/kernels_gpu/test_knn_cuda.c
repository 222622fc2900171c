/* test_knn_cuda.c: the CUDA fused search against its own materialized full sort (bit-exact)
 * and against the float64 CPU reference (up to stated near-ties), on random and adversarial
 * data. Skips, saying so, where no CUDA device is visible. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sieve_kernels.h"
#include "sieve_kernels_internal.h"

static int have_gpu(void) { return sieve_cuda_device_count() > 0; }

#define SKIP_WITHOUT_GPU()                                                                  \
    do {                                                                                    \
        if (!have_gpu()) cr_skip_test("no CUDA device visible: GPU kernel tests skipped");  \
    } while (0)

typedef struct gcase {
    sieve_dtype dtype;
    sieve_metric metric;
    sieve_pattern pattern;
    uint64_t n;
    uint32_t dim, rpp, B, k;
    int with_masks;           /* 1: deleted every 7th row, allowed = not multiple of 5 */
    int force;                /* 0 none, 1 underfill (boundary too high), 2 overflow */
    int check_cpu;            /* compare with the float64 reference on the host copy */
} gcase;

static const char *case_str(const gcase *c, char *buf, size_t n) {
    snprintf(buf, n, "%s %s %s N=%llu dim=%u B=%u k=%u masks=%d force=%d",
             sieve_dtype_name(c->dtype), sieve_metric_name(c->metric),
             sieve_pattern_name(c->pattern), (unsigned long long)c->n, c->dim, c->B, c->k,
             c->with_masks, c->force);
    return buf;
}

/* B x dim normal float32 queries (seed), filled on the host device; the caller frees. */
static float *normal_queries(sieve_device *cpu, uint32_t B, uint32_t dim, uint64_t seed) {
    float *q = malloc((size_t)B * dim * 4);
    cr_assert_not_null(q);
    sieve_device_fill_normal(cpu, q, SIEVE_DTYPE_F32, (size_t)B * dim, seed, 1.0f);
    return q;
}

static float *queries_for(sieve_device *host, const gcase *c, uint64_t seed) {
    float *q = normal_queries(host, c->B, c->dim, seed);
    if (c->pattern == SIEVE_PATTERN_SORTED_ASC || c->pattern == SIEVE_PATTERN_SORTED_DESC)
        for (uint32_t i = 0; i < c->B; i++) {
            for (uint32_t j = 1; j < c->dim; j++) q[(size_t)i * c->dim + j] *= 0.01f;
            q[(size_t)i * c->dim] = 1.0f;
        }
    return q;
}

/* The masks of a case with_masks: every 7th row deleted (r % 7 == 3), and only rows that
 * are not a multiple of 5 allowed. */
static int deleted_row(uint64_t r) { return r % 7 == 3; }
static int allowed_row(uint64_t r) { return r % 5 != 0; }

static void make_masks(uint64_t n, uint64_t **del, uint64_t **allow) {
    size_t words = (size_t)((n + 63) / 64);
    *del = calloc(words, 8);
    *allow = calloc(words, 8);
    cr_assert(*del && *allow);
    for (uint64_t r = 0; r < n; r++) {
        if (deleted_row(r)) (*del)[r / 64] |= 1ull << (r % 64);
        if (allowed_row(r)) (*allow)[r / 64] |= 1ull << (r % 64);
    }
}

/* A key or score ranked as the kernels rank keys (sieve__ord_of_bits: -0 < +0, -inf
 * lowest). */
static uint32_t ord_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return sieve__ord_of_bits(u);
}

/* Converts one stored element to double. */
static double elem(const void *rows, sieve_dtype dt, size_t at) {
    switch (dt) {
    case SIEVE_DTYPE_F16: return sieve_f16_to_f32(((const uint16_t *)rows)[at]);
    case SIEVE_DTYPE_BF16: return sieve_bf16_to_f32(((const uint16_t *)rows)[at]);
    default: return ((const float *)rows)[at];
    }
}

/* Forces a recovery on every query: force 1, underfill (a boundary above every key);
 * 2, overflow (a candidate buffer of k + 8, no tightening); 0 leaves p as it is. */
static void force_recovery(sieve_search_params *p, int force) {
    if (force == 1) {
        p->force_boundary = 1;
        p->forced_boundary = 1e30f;
    } else if (force == 2) {
        p->candidate_capacity = p->k + 8;
        p->flags = SIEVE_SEARCH_NO_TIGHTEN;
    }
}

/* Runs one case and returns the fused search's statistics. */
static sieve_search_stats run_case(const gcase *c) {
    char name[256];
    case_str(c, name, sizeof name);
    sieve_device *gpu = NULL, *cpu = NULL;
    cr_assert_eq(sieve_device_open("cuda:0", &gpu), 0);
    cr_assert_eq(sieve_device_open("cpu", &cpu), 0);
    sieve_dev_matrix *dm = NULL;
    cr_assert_eq(sieve_dev_matrix_create(gpu, c->dtype, c->n, c->dim, c->rpp, &dm), 0, "%s", name);
    cr_assert_eq(sieve_device_fill_rows(gpu, sieve_dev_matrix_rows(dm), c->dtype, c->n, c->dim,
                                        c->pattern, 7),
                 0);
    cr_assert_eq(sieve_dev_matrix_update_norms(dm), 0);
    uint64_t *del = NULL, *allow = NULL;
    if (c->with_masks) {
        make_masks(c->n, &del, &allow);
        cr_assert_eq(sieve_dev_matrix_set_masks(dm, del, allow), 0);
    }
    const sieve_matrix *m = sieve_dev_matrix_view(dm);
    float *q = queries_for(cpu, c, 11 + c->B);
    sieve_search_params p;
    sieve_search_params_init(&p, c->metric, c->k);
    force_recovery(&p, c->force);
    size_t nr = (size_t)c->B * c->k;
    int64_t *rows = malloc(nr * 8), *mrows = malloc(nr * 8);
    float *sc = malloc(nr * 4), *msc = malloc(nr * 4);
    uint32_t *cnt = malloc(c->B * 4), *mcnt = malloc(c->B * 4);
    uint8_t *paths = malloc(c->B);
    cr_assert(rows && mrows && sc && msc && cnt && mcnt && paths);
    /* poison the outputs: every element must be written */
    memset(rows, 0x5a, nr * 8);
    memset(sc, 0x5a, nr * 4);
    sieve_search_stats st;
    int rc = sieve_knn(gpu, m, q, c->B, &p, NULL, 0, rows, sc, cnt, paths, &st);
    cr_assert_eq(rc, 0, "%s: sieve_knn: %s", name, sieve_strerror(rc));
    rc = sieve_knn_materialized(gpu, m, q, c->B, &p, mrows, msc, mcnt, NULL);
    cr_assert_eq(rc, 0, "%s: materialized: %s", name, sieve_strerror(rc));
    for (uint32_t b = 0; b < c->B; b++) {
        cr_assert_eq(cnt[b], mcnt[b], "%s q=%u: count fused %u materialized %u", name, b, cnt[b], mcnt[b]);
        for (uint32_t i = 0; i < c->k; i++) {
            size_t at = (size_t)b * c->k + i;
            cr_assert_eq(rows[at], mrows[at], "%s q=%u i=%u: row fused %lld materialized %lld",
                         name, b, i, (long long)rows[at], (long long)mrows[at]);
            if (i < cnt[b])
                cr_assert_eq(memcmp(&sc[at], &msc[at], 4), 0, "%s q=%u i=%u: score %.9g vs %.9g",
                             name, b, i, sc[at], msc[at]);
            else
                cr_assert(isnan(sc[at]) && rows[at] == -1, "%s: padding at q=%u i=%u", name, b, i);
        }
    }
    /* k = N: whatever the oracle says, every eligible row comes back exactly once */
    if (c->k == c->n) {
        uint64_t live = 0;
        for (uint64_t r = 0; r < c->n; r++)
            live += !c->with_masks || (!deleted_row(r) && allowed_row(r));
        uint8_t *seen = malloc((size_t)c->n);
        cr_assert_not_null(seen);
        for (uint32_t b = 0; b < c->B; b++) {
            cr_assert_eq(cnt[b], live, "%s q=%u: %u rows of %llu eligible", name, b, cnt[b],
                         (unsigned long long)live);
            memset(seen, 0, (size_t)c->n);
            for (uint32_t i = 0; i < cnt[b]; i++) {
                size_t at = (size_t)b * c->k + i;
                int64_t r = rows[at];
                cr_assert(r >= 0 && (uint64_t)r < c->n, "%s q=%u i=%u: row %lld out of range",
                          name, b, i, (long long)r);
                cr_assert(!seen[r], "%s q=%u i=%u: row %lld returned twice", name, b, i,
                          (long long)r);
                cr_assert(!c->with_masks || (!deleted_row(r) && allowed_row(r)),
                          "%s q=%u: row %lld is masked out", name, b, (long long)r);
                seen[r] = 1;
                /* best first, ties by the smaller row: for Dot and Cosine the reported score
                   is the key itself, ranked as the kernels rank keys; Euclid's distance only
                   has to be non-decreasing */
                if (i == 0) continue;
                if (c->metric == SIEVE_METRIC_EUCLID) {
                    cr_assert(sc[at - 1] <= sc[at], "%s q=%u i=%u: distance %.9g after %.9g",
                              name, b, i, sc[at], sc[at - 1]);
                } else {
                    uint32_t prev = ord_bits(sc[at - 1]), cur = ord_bits(sc[at]);
                    cr_assert(prev > cur || (prev == cur && rows[at - 1] < r),
                              "%s q=%u i=%u: row %lld score %.9g after row %lld score %.9g",
                              name, b, i, (long long)r, sc[at], (long long)rows[at - 1],
                              sc[at - 1]);
                }
            }
        }
        free(seen);
    }
    /* the forced paths really ran */
    if (c->force == 1)
        cr_assert_eq(st.path_count[SIEVE_PATH_CERTIFIED], 0, "%s: forced underfill certified", name);
    if (c->force == 1)
        cr_assert_gt(st.path_count[SIEVE_PATH_UNDERFILL] + st.path_count[SIEVE_PATH_FULL], 0, "%s", name);
    if (c->force == 2)
        cr_assert_gt(st.path_count[SIEVE_PATH_OVERFLOW] + st.path_count[SIEVE_PATH_FULL], 0,
                     "%s: forced overflow never overflowed", name);
    if (c->check_cpu) {
        /* same data on the host, float64 reference, near-tie tolerance */
        size_t esz = sieve_dtype_size(c->dtype);
        sieve_dev_matrix *hm = NULL;
        cr_assert_eq(sieve_dev_matrix_create(cpu, c->dtype, c->n, c->dim, c->rpp, &hm), 0);
        const void *hrows = sieve_dev_matrix_rows(hm);
        cr_assert_eq(sieve_device_fill_rows(cpu, sieve_dev_matrix_rows(hm), c->dtype, c->n,
                                            c->dim, c->pattern, 7), 0);
        cr_assert_eq(sieve_dev_matrix_update_norms(hm), 0);
        if (c->with_masks) cr_assert_eq(sieve_dev_matrix_set_masks(hm, del, allow), 0);
        int64_t *rr = malloc(nr * 8);
        double *rk = malloc(nr * 8);
        uint32_t *rc2 = malloc(c->B * 4);
        rc = sieve_knn_reference(sieve_dev_matrix_view(hm), q, c->B, c->metric, c->k, rr, rk, rc2);
        if (rc == SIEVE_ENOTSUP) {
            cr_log_warn("%s: CPU reference not built yet; GPU-vs-CPU check skipped", name);
        } else {
            cr_assert_eq(rc, 0);
            /* key error bound: query rounding (u_q) plus float32 accumulation over dim */
            double uq = c->dtype == SIEVE_DTYPE_F16 ? 1.0 / 2048 : c->dtype == SIEVE_DTYPE_BF16 ? 1.0 / 256 : 0;
            double u = uq + (c->dim + 2) * 5.96e-8;
            for (uint32_t b = 0; b < c->B; b++) {
                cr_assert_eq(cnt[b], rc2[b], "%s q=%u: count %u vs reference %u", name, b, cnt[b], rc2[b]);
                if (!cnt[b]) continue;
                const float *qq = q + (size_t)b * c->dim;
                double qs = 1.0;
                if (c->metric == SIEVE_METRIC_COSINE) {
                    double s2 = 0;
                    for (uint32_t j = 0; j < c->dim; j++) s2 += (double)qq[j] * qq[j];
                    qs = s2 > 0 ? 1.0 / sqrt(s2) : 1.0;
                }
                double kth = rk[(size_t)b * c->k + cnt[b] - 1];
                for (uint32_t i = 0; i < cnt[b]; i++) {
                    int64_t r = rows[(size_t)b * c->k + i];
                    int found = 0;
                    for (uint32_t j = 0; j < cnt[b] && !found; j++) found = rr[(size_t)b * c->k + j] == r;
                    if (found) continue;
                    /* a row only the GPU returned: its exact key must be within tol of kth */
                    double key = 0, mag = 0, nrm = 0;
                    for (uint32_t j = 0; j < c->dim; j++) {
                        double x = elem(hrows, c->dtype, (size_t)r * c->dim + j);
                        key += x * qq[j] * qs;
                        mag += fabs(x * qq[j] * qs);
                        nrm += x * x;
                    }
                    double tol = u * (c->metric == SIEVE_METRIC_EUCLID ? 2 * mag + nrm : mag) + 1e-30;
                    if (c->metric == SIEVE_METRIC_EUCLID) key = 2 * key - nrm;
                    cr_assert_leq(fabs(key - kth), 2 * tol,
                                  "%s q=%u: GPU row %lld key %.9g vs reference k-th %.9g (tol %.3g)",
                                  name, b, (long long)r, key, kth, 2 * tol);
                }
            }
        }
        (void)esz;
        free(rr);
        free(rk);
        free(rc2);
        sieve_dev_matrix_destroy(hm);
    }
    free(rows);
    free(mrows);
    free(sc);
    free(msc);
    free(cnt);
    free(mcnt);
    free(paths);
    free(q);
    free(del);
    free(allow);
    sieve_dev_matrix_destroy(dm);
    sieve_device_close(gpu);
    sieve_device_close(cpu);
    return st;
}

static const sieve_dtype DT[] = {SIEVE_DTYPE_F16, SIEVE_DTYPE_BF16, SIEVE_DTYPE_F32};
static const sieve_metric MT[] = {SIEVE_METRIC_DOT, SIEVE_METRIC_COSINE, SIEVE_METRIC_EUCLID};

Test(knn_cuda, small_shapes_every_dtype_metric_pattern, .timeout = 1800) {
    SKIP_WITHOUT_GPU();
    const uint64_t ns[] = {1, 1000, 65537};
    for (int d = 0; d < 3; d++)
        for (int mi = 0; mi < 3; mi++)
            for (int pat = 0; pat < SIEVE_PATTERN_COUNT; pat++)
                for (int ni = 0; ni < 3; ni++) {
                    uint64_t n = ns[ni];
                    const uint32_t ks[] = {1, 10, 128, (uint32_t)n};
                    const uint32_t bs[] = {1, 7, 64};
                    for (int ki = 0; ki < 4; ki++)
                        for (int bi = 0; bi < 3; bi++) {
                            uint32_t k = ks[ki];
                            if (k > n || (k == n && n > 1000 && bs[bi] > 7)) continue;
                            gcase c = {DT[d], MT[mi], (sieve_pattern)pat, n, 96, 128, bs[bi], k,
                                       0, 0, n <= 1000 || bs[bi] == 1};
                            run_case(&c);
                        }
                }
}

Test(knn_cuda, odd_dimensions_and_masks, .timeout = 900) {
    SKIP_WITHOUT_GPU();
    const uint32_t dims[] = {1, 3, 13, 100, 768};
    for (int d = 0; d < 3; d++)
        for (int di = 0; di < 5; di++) {
            gcase c = {DT[d], SIEVE_METRIC_DOT, SIEVE_PATTERN_NORMAL, 40001, dims[di], 256, 7, 50, 1, 0, 1};
            run_case(&c);
            gcase e = {DT[d], SIEVE_METRIC_EUCLID, SIEVE_PATTERN_DUPS, 40001, dims[di], 256, 3, 10, 0, 0, 1};
            run_case(&e);
        }
    /* fewer eligible rows than k */
    gcase f = {SIEVE_DTYPE_F16, SIEVE_METRIC_DOT, SIEVE_PATTERN_NORMAL, 700, 64, 128, 5, 600, 1, 0, 1};
    run_case(&f);
}

Test(knn_cuda, forced_underfill_and_overflow, .timeout = 900) {
    SKIP_WITHOUT_GPU();
    for (int d = 0; d < 3; d++)
        for (int pat = 0; pat < SIEVE_PATTERN_COUNT; pat++) {
            gcase u = {DT[d], SIEVE_METRIC_DOT, (sieve_pattern)pat, 100003, 64, 128, 7, 100, 0, 1, 0};
            run_case(&u);
            gcase o = {DT[d], SIEVE_METRIC_DOT, (sieve_pattern)pat, 100003, 64, 128, 7, 100, 0, 2, 0};
            run_case(&o);
        }
}

Test(knn_cuda, large_batches_and_k, .timeout = 1800) {
    SKIP_WITHOUT_GPU();
    const uint32_t ks[] = {1, 10, 128, 1024, 8192, 16384};
    for (int ki = 0; ki < 6; ki++) {
        gcase c = {SIEVE_DTYPE_F16, SIEVE_METRIC_DOT, SIEVE_PATTERN_NORMAL, 1000000, 768, 1024, 64, ks[ki], 0, 0, 0};
        run_case(&c);
    }
    gcase b = {SIEVE_DTYPE_F16, SIEVE_METRIC_DOT, SIEVE_PATTERN_NORMAL, 200000, 768, 1024, 1024, 1024, 0, 0, 0};
    run_case(&b);
    gcase t = {SIEVE_DTYPE_F16, SIEVE_METRIC_DOT, SIEVE_PATTERN_TIES, 1000000, 768, 1024, 7, 128, 0, 0, 0};
    run_case(&t);
    gcase s = {SIEVE_DTYPE_BF16, SIEVE_METRIC_COSINE, SIEVE_PATTERN_SORTED_DESC, 1000000, 768, 1024, 7, 1024, 0, 0, 0};
    run_case(&s);
    gcase f = {SIEVE_DTYPE_F32, SIEVE_METRIC_EUCLID, SIEVE_PATTERN_OUTLIER, 1000000, 768, 1024, 64, 128, 0, 0, 0};
    run_case(&f);
    gcase g = {SIEVE_DTYPE_F16, SIEVE_METRIC_DOT, SIEVE_PATTERN_BAND, 5000000, 768, 1024, 64, 128, 0, 0, 0};
    run_case(&g);
    gcase h = {SIEVE_DTYPE_F16, SIEVE_METRIC_DOT, SIEVE_PATTERN_NORMAL, 5000000, 768, 1024, 16, 8192, 0, 0, 0};
    run_case(&h);
    /* 1,100 pageable queries of 256 floats (1.07 MiB, staged by the host threads in 18
       pieces, the last partial) against the float64 reference on the host: both search
       paths read the same uploaded queries, so only the reference sees a piece staged or
       sent wrongly */
    gcase u = {SIEVE_DTYPE_F16, SIEVE_METRIC_COSINE, SIEVE_PATTERN_NORMAL, 40009, 256, 256, 1100, 10, 0, 0, 1};
    run_case(&u);
}

/* k = N at 1M and 5M rows: any k up to the number of rows is answered, here by the direct
 * path (at k = N the sample would be every row, so every eligible row is sorted). The
 * materialized oracle sorts every row too, so beside its bit-for-bit comparison run_case
 * checks the answer on its own: every eligible row once, best first, ties by the smaller
 * row. With the masks, k = N exceeds the eligible rows and the tail is padding. Small
 * dimensions keep the fills short; five cases cover the three dtypes and the three
 * metrics (not every pair). */
Test(knn_cuda, k_equals_n_at_scale, .timeout = 900) {
    SKIP_WITHOUT_GPU();
    const gcase cases[] = {
        {SIEVE_DTYPE_F16, SIEVE_METRIC_DOT, SIEVE_PATTERN_NORMAL, 1000000, 128, 1024, 7, 1000000, 0, 0, 0},
        {SIEVE_DTYPE_BF16, SIEVE_METRIC_COSINE, SIEVE_PATTERN_TIES, 1000000, 96, 1024, 2, 1000000, 1, 0, 0},
        {SIEVE_DTYPE_F32, SIEVE_METRIC_EUCLID, SIEVE_PATTERN_DUPS, 1000003, 64, 1024, 3, 1000003, 0, 0, 0},
        {SIEVE_DTYPE_F16, SIEVE_METRIC_EUCLID, SIEVE_PATTERN_SORTED_DESC, 5000000, 64, 1024, 1, 5000000, 0, 0, 0},
        {SIEVE_DTYPE_BF16, SIEVE_METRIC_DOT, SIEVE_PATTERN_BAND, 5000000, 64, 1024, 2, 5000000, 1, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sieve_search_stats st = run_case(&cases[i]);
        cr_assert_eq(st.path_count[SIEVE_PATH_DIRECT], cases[i].B, "case %zu: %llu of %u "
                     "queries on the direct path", i,
                     (unsigned long long)st.path_count[SIEVE_PATH_DIRECT], cases[i].B);
    }
}

/* The select step every way (SIEVE_CUDA_SELECT): the block sort in shared memory (the
 * default up to k = 36864: a query keeping more than one block sorts is split into up to
 * eight parts of consecutive histogram bins, a block each, and with 9 queries on a GPU of
 * more SMs, queries keeping more than 4096 are split to fill them), the segmented sort, and
 * the 256-thread block at every k ("small": eight parts of 1024), each against the
 * materialized full sort, and the statistics say which one ordered each certified query.
 * Covers every sort size of the block (k = 1 to 8192), queries split in parts (k = 6000 to
 * 36864 with the default block, 1500 and 3000 with the small one), queries keeping more
 * than eight parts hold (k >= 8192 with the small block: handed to the segmented sort
 * before they are staged), k past the block path (40000), the split with forced underfill
 * and overflow (recoveries before the select), all-equal keys at k = 5000 and 16384 (the
 * block's sort key is the row alone), duplicates with Euclid, sorted data and masks. */
Test(knn_cuda, block_and_segmented_select_against_full_sort, .timeout = 1800) {
    SKIP_WITHOUT_GPU();
    const char *const how[] = {"block", "segmented", "small"};
    for (int h = 0; h < 3; h++) {
        cr_assert_eq(setenv("SIEVE_CUDA_SELECT", how[h], 1), 0);
        cr_log_info("select %s", how[h]);
        const uint32_t ks[] = {1, 300, 1500, 3000, 6000, 8192, 12288, 16384, 36864, 40000};
        for (int ki = 0; ki < 10; ki++) {
            gcase c = {SIEVE_DTYPE_F16, SIEVE_METRIC_DOT, SIEVE_PATTERN_NORMAL, 1000000, 128, 1024, 9, ks[ki], 0, 0, 0};
            sieve_search_stats st = run_case(&c);
            const uint64_t used = st.path_count[SIEVE_PATH_CERTIFIED] +
                                  st.path_count[SIEVE_PATH_UNDERFILL] +
                                  st.path_count[SIEVE_PATH_OVERFLOW];
            cr_assert_gt(used, 0, "k=%u: no query certified", ks[ki]);
            if (h == 1 || ks[ki] > 36864) /* segmented, or past the block path */
                cr_assert_eq(st.select_segmented, used, "select %s k=%u", how[h], ks[ki]);
            else if (h == 2 && ks[ki] >= 8192) /* more than eight parts of the small block */
                cr_assert_eq(st.select_segmented, used, "select small k=%u: %llu of %llu handed",
                             ks[ki], (unsigned long long)st.select_segmented,
                             (unsigned long long)used);
            else if (h == 2 && ks[ki] == 6000) /* six to eight parts, as the bins fall */
                cr_log_info("select small k=6000: %llu of %llu queries handed back",
                            (unsigned long long)st.select_segmented, (unsigned long long)used);
            else /* one block, or split into parts */
                cr_assert_eq(st.select_segmented, 0, "select %s k=%u: %llu queries segmented",
                             how[h], ks[ki], (unsigned long long)st.select_segmented);
            /* speculated on the block path where the 9 x k results (12 bytes each) are
               staged, under 2 MiB (larger ones into pageable arrays are pipelined) */
            cr_assert_eq(st.select_speculated, h != 1 && 9u * 12u * ks[ki] < (2u << 20),
                         "select %s k=%u: select_speculated %llu", how[h], ks[ki],
                         (unsigned long long)st.select_speculated);
        }
        const gcase cases[] = {
            {SIEVE_DTYPE_F16, SIEVE_METRIC_DOT, SIEVE_PATTERN_TIES, 200000, 96, 128, 7, 5000, 0, 0, 0},
            {SIEVE_DTYPE_F16, SIEVE_METRIC_DOT, SIEVE_PATTERN_TIES, 1000000, 96, 128, 3, 16384, 0, 0, 0},
            {SIEVE_DTYPE_BF16, SIEVE_METRIC_EUCLID, SIEVE_PATTERN_DUPS, 300001, 64, 128, 5, 3000, 0, 0, 0},
            {SIEVE_DTYPE_BF16, SIEVE_METRIC_EUCLID, SIEVE_PATTERN_DUPS, 1000003, 64, 128, 5, 13000, 0, 0, 0},
            {SIEVE_DTYPE_F32, SIEVE_METRIC_COSINE, SIEVE_PATTERN_SORTED_DESC, 100003, 32, 128, 5, 1024, 1, 0, 1},
            {SIEVE_DTYPE_F16, SIEVE_METRIC_DOT, SIEVE_PATTERN_BAND, 65537, 768, 128, 70, 700, 1, 0, 0},
            {SIEVE_DTYPE_F16, SIEVE_METRIC_DOT, SIEVE_PATTERN_OUTLIER, 1000, 64, 128, 3, 1000, 0, 0, 1},
            {SIEVE_DTYPE_F16, SIEVE_METRIC_DOT, SIEVE_PATTERN_NORMAL, 1000000, 128, 1024, 5, 16384, 1, 1, 0},
            {SIEVE_DTYPE_F16, SIEVE_METRIC_COSINE, SIEVE_PATTERN_NORMAL, 1000000, 128, 1024, 5, 16384, 0, 2, 0},
        };
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i]);
    }
    cr_assert_eq(unsetenv("SIEVE_CUDA_SELECT"), 0);
}

/* Every scan variant of the CUDA backend (SIEVE_CUDA_SCAN; on GPUs without wgmma each name
 * falls back to mma.sync): fused == its own materialized sort, and agreement with the float64
 * reference, for batches that use the 64-query and the 128-query tiles (two tiles, the second
 * partial) and row counts that are not a multiple of any row tile. Criterion runs each test
 * in its own process, so setting the variable here does not leak into other tests. */
static const char *const VARIANTS[] = {"mma",        "wg64x128",           "wg128x128s3",
                                       "wg64x128-direct", "wg128x128s3-direct", "tma64x256",
                                       "tma128x256", "tma64x128", "tma64x128s", "tma128x256s",
                                       "tma64x256s", "tma128x256h"};

Test(knn_cuda, every_scan_variant_against_reference, .timeout = 1800) {
    SKIP_WITHOUT_GPU();
    /* each case runs with B = 1, 64 and 200 (B is set in the loop) */
    const gcase cases[] = {
        {SIEVE_DTYPE_F16, SIEVE_METRIC_DOT, SIEVE_PATTERN_NORMAL, 5003, 768, 256, 0, 10, 0, 0, 1},
        {SIEVE_DTYPE_BF16, SIEVE_METRIC_EUCLID, SIEVE_PATTERN_DUPS, 3001, 96, 128, 0, 32, 1, 0, 1},
        {SIEVE_DTYPE_F16, SIEVE_METRIC_COSINE, SIEVE_PATTERN_TIES, 1000, 136, 128, 0, 1000, 0, 0, 1},
        /* the best rows of half the queries sit in the last tiles: hundreds of keys pass
           the gate in one tile, more than a tile stages (cp.async tiles) or a warp's buffer
           holds (staged TMA tiles), so the direct admissions run */
        {SIEVE_DTYPE_F16, SIEVE_METRIC_DOT, SIEVE_PATTERN_SORTED_ASC, 100003, 768, 512, 0, 1000, 1, 0, 0},
        /* one 64-wide K chunk per tile (the TMA producer publishes the next tile with the
           tile's only chunk) */
        {SIEVE_DTYPE_F16, SIEVE_METRIC_EUCLID, SIEVE_PATTERN_NORMAL, 9001, 64, 128, 0, 50, 0, 0, 1},
        /* sixteen 64-wide K chunks per tile, the last one partly past dim */
        {SIEVE_DTYPE_F16, SIEVE_METRIC_DOT, SIEVE_PATTERN_NORMAL, 4099, 1000, 256, 0, 20, 0, 0, 1},
        /* forced overflow: every query's buffer fills, recovery from the histogram */
        {SIEVE_DTYPE_BF16, SIEVE_METRIC_DOT, SIEVE_PATTERN_NORMAL, 50021, 256, 256, 0, 100, 0, 2, 0},
    };
    const uint32_t bs[] = {1, 64, 200};
    for (size_t v = 0; v < sizeof VARIANTS / sizeof *VARIANTS; v++) {
        cr_assert_eq(setenv("SIEVE_CUDA_SCAN", VARIANTS[v], 1), 0);
        cr_log_info("scan variant %s", VARIANTS[v]);
        for (int bi = 0; bi < 3; bi++)
            for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
                gcase c = cases[i];
                c.B = bs[bi];
                run_case(&c);
            }
    }
    cr_assert_eq(unsetenv("SIEVE_CUDA_SCAN"), 0);
}

/* A device matrix of n normal rows (seed) of `dt`, rpp rows a page, norms current. */
static sieve_dev_matrix *normal_matrix(sieve_device *gpu, sieve_dtype dt, uint64_t n, uint32_t dim,
                                       uint32_t rpp, uint64_t seed) {
    sieve_dev_matrix *dm = NULL;
    cr_assert_eq(sieve_dev_matrix_create(gpu, dt, n, dim, rpp, &dm), 0);
    cr_assert_eq(sieve_device_fill_rows(gpu, sieve_dev_matrix_rows(dm), dt, n, dim,
                                        SIEVE_PATTERN_NORMAL, seed), 0);
    cr_assert_eq(sieve_dev_matrix_update_norms(dm), 0);
    return dm;
}

/* One search with the environment variable `var` set to `val` (NULL: unset), results in host
 * arrays (page-locked when `pinned`) poisoned first; returns the statistics. */
typedef struct spec_out {
    int64_t *rows;
    float *sc;
    uint32_t *cnt;
    uint8_t *paths;
} spec_out;

static sieve_search_stats setting_run(sieve_device *gpu, const sieve_matrix *m, const float *q,
                                      uint32_t B, const sieve_search_params *p, const char *var,
                                      const char *val, int pinned, spec_out *o) {
    if (val) cr_assert_eq(setenv(var, val, 1), 0);
    else cr_assert_eq(unsetenv(var), 0);
    const size_t nr = (size_t)B * p->k;
    if (pinned) {
        cr_assert_eq(sieve_host_alloc_pinned(gpu, nr * 8, (void **)&o->rows), 0);
        cr_assert_eq(sieve_host_alloc_pinned(gpu, nr * 4, (void **)&o->sc), 0);
        cr_assert_eq(sieve_host_alloc_pinned(gpu, B * 4, (void **)&o->cnt), 0);
    } else {
        o->rows = malloc(nr * 8);
        o->sc = malloc(nr * 4);
        o->cnt = malloc(B * 4);
    }
    o->paths = malloc(B);
    cr_assert(o->rows && o->sc && o->cnt && o->paths);
    memset(o->rows, 0x5a, nr * 8);
    memset(o->sc, 0x5a, nr * 4);
    memset(o->cnt, 0x5a, B * 4);
    sieve_search_stats st;
    int rc = sieve_knn(gpu, m, q, B, p, NULL, 0, o->rows, o->sc, o->cnt, o->paths, &st);
    cr_assert_eq(rc, 0, "%s=%s B=%u k=%u: %s", var, val ? val : "(unset)", B, p->k,
                 sieve_strerror(rc));
    return st;
}

/* setting_run with SIEVE_CUDA_SPECULATE set to `spec` (NULL: unset). */
static sieve_search_stats spec_run(sieve_device *gpu, const sieve_matrix *m, const float *q,
                                   uint32_t B, const sieve_search_params *p, const char *spec,
                                   int pinned, spec_out *o) {
    return setting_run(gpu, m, q, B, p, "SIEVE_CUDA_SPECULATE", spec, pinned, o);
}

static void spec_free(sieve_device *gpu, int pinned, spec_out *o) {
    if (pinned) {
        sieve_host_free_pinned(gpu, o->rows);
        sieve_host_free_pinned(gpu, o->sc);
        sieve_host_free_pinned(gpu, o->cnt);
    } else {
        free(o->rows);
        free(o->sc);
        free(o->cnt);
    }
    free(o->paths);
}

/* Two searches' results are the same bit for bit (rows, scores, counts, paths). */
static void assert_same_results(const spec_out *a, const spec_out *b, uint32_t B, uint32_t k,
                                const char *name) {
    cr_assert_eq(memcmp(a->cnt, b->cnt, B * 4), 0, "%s: counts differ", name);
    cr_assert_eq(memcmp(a->paths, b->paths, B), 0, "%s: paths differ", name);
    for (size_t i = 0; i < (size_t)B * k; i++) {
        cr_assert_eq(a->rows[i], b->rows[i], "%s i=%zu: row %lld vs %lld", name, i,
                     (long long)a->rows[i], (long long)b->rows[i]);
        cr_assert_eq(memcmp(&a->sc[i], &b->sc[i], 4), 0, "%s i=%zu: score %.9g vs %.9g", name, i,
                     a->sc[i], b->sc[i]);
    }
}

/* A search's results equal the materialized full sort's (rows, scores, counts), bit for bit. */
static void assert_equals_full_sort(sieve_device *gpu, const sieve_matrix *m, const float *q,
                                    uint32_t B, const sieve_search_params *p, const spec_out *a,
                                    const char *name) {
    const size_t nr = (size_t)B * p->k;
    int64_t *mrows = malloc(nr * 8);
    float *msc = malloc(nr * 4);
    uint32_t *mcnt = malloc(B * 4);
    cr_assert(mrows && msc && mcnt);
    cr_assert_eq(sieve_knn_materialized(gpu, m, q, B, p, mrows, msc, mcnt, NULL), 0);
    cr_assert_eq(memcmp(mcnt, a->cnt, B * 4), 0, "%s: counts differ from the full sort", name);
    cr_assert_eq(memcmp(mrows, a->rows, nr * 8), 0, "%s: rows differ from the full sort", name);
    cr_assert_eq(memcmp(msc, a->sc, nr * 4), 0, "%s: scores differ from the full sort", name);
    free(mrows);
    free(msc);
    free(mcnt);
}

/* The default sample (sieve_kernels.h, sample_rows): max(16384, 8k) rows; when 2 x 8k < N,
 * 4k from k = 8192 on and at most the power of two at or above 64 N / k (at least 16384);
 * a collection small enough for the direct path under 8k keeps it (no sample). Every
 * search equals the full sort whatever the sample. */
Test(knn_cuda, default_sample_size_by_k_and_rows, .timeout = 600) {
    SKIP_WITHOUT_GPU();
    sieve_device *gpu = NULL, *cpu = NULL;
    cr_assert_eq(sieve_device_open("cuda:0", &gpu), 0);
    cr_assert_eq(sieve_device_open("cpu", &cpu), 0);
    const uint32_t B = 3;
    const struct {
        uint64_t n;
        uint32_t k;
        uint64_t sample; /* rows a query, 0: the direct path */
    } cs[] = {
        {300007, 128, 16384},    /* the minimum */
        {300007, 2048, 16384},   /* 8k */
        {300007, 4096, 16384},   /* 8k = 32768 over 64 N / k = 4688: the minimum */
        {300007, 8191, 16384},   /* 8k, bounded likewise */
        {300007, 16384, 16384},  /* 4k = 65536, bounded likewise */
        {1100009, 4096, 32768},  /* 8k: 64 N / k = 17188 rounds up to 32768 */
        {1100009, 8192, 16384},  /* 4k = 32768, 64 N / k = 8594: 16384 */
        {1048576, 4096, 16384},  /* 64 N / k = 16384 exactly */
        {1048577, 4096, 32768},  /* one row more: 32768 */
        {131073, 8192, 16384},   /* 2 x 8k = 131072 < N by one row: fused, bounded */
        {131072, 8192, 0},       /* 2 x 8k = N: the direct path, as before */
    };
    for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++) {
        sieve_dev_matrix *dm = normal_matrix(gpu, SIEVE_DTYPE_F16, cs[ci].n, 64, 256, 61 + ci);
        const sieve_matrix *m = sieve_dev_matrix_view(dm);
        float *q = normal_queries(cpu, B, 64, 71 + ci);
        sieve_search_params p;
        sieve_search_params_init(&p, SIEVE_METRIC_DOT, cs[ci].k);
        spec_out a;
        sieve_search_stats st = setting_run(gpu, m, q, B, &p, "SIEVE_CUDA_SPECULATE", NULL, 0, &a);
        char name[96];
        snprintf(name, sizeof name, "N=%llu k=%u", (unsigned long long)cs[ci].n, cs[ci].k);
        cr_assert_eq(st.rows_sampled, cs[ci].sample * B, "%s: %llu rows sampled, want %llu",
                     name, (unsigned long long)st.rows_sampled,
                     (unsigned long long)(cs[ci].sample * B));
        cr_assert_eq(st.path_count[SIEVE_PATH_DIRECT], cs[ci].sample ? 0 : B, "%s: direct %llu",
                     name, (unsigned long long)st.path_count[SIEVE_PATH_DIRECT]);
        assert_equals_full_sort(gpu, m, q, B, &p, &a, name);
        spec_free(gpu, 0, &a);
        free(q);
        sieve_dev_matrix_destroy(dm);
    }
    sieve_device_close(gpu);
    sieve_device_close(cpu);
}

/* The speculative select (the select and the download queued behind the scan, certified on
 * the device, one wait for it) against the select after the host's certification
 * (SIEVE_CUDA_SPECULATE=0) and the materialized full sort: the same rows, scores, counts and
 * paths, bit for bit, into pageable arrays (staged) and page-locked ones, and the statistics
 * say whether it ran and whether it missed: certified batches at k = 1 to 8192 with Dot,
 * Euclid and masks (no miss), forced underfill and overflow (a miss: recoveries after all),
 * queries keeping more candidates than eight parts of the 256-thread block sort
 * (SIEVE_CUDA_SPECULATE=small at k = 12288: a miss) and fewer (k = 1500: split, no miss),
 * queries split in parts of the default block (k = 12288, 16384 with masks), batches of 129
 * to 1024 queries, and the limits (a large result into pageable arrays, the segmented
 * select forced: not speculated; k past the block path: the select test). */
Test(knn_cuda, speculative_select_matches_certify_first, .timeout = 900) {
    SKIP_WITHOUT_GPU();
    sieve_device *gpu = NULL, *cpu = NULL;
    cr_assert_eq(sieve_device_open("cuda:0", &gpu), 0);
    cr_assert_eq(sieve_device_open("cpu", &cpu), 0);
    sieve_dev_matrix *dm = normal_matrix(gpu, SIEVE_DTYPE_F16, 300007, 128, 256, 21);
    uint64_t *del = NULL, *allow = NULL;
    make_masks(300007, &del, &allow);
    sieve_dev_matrix *mm = normal_matrix(gpu, SIEVE_DTYPE_BF16, 300007, 128, 256, 22);
    cr_assert_eq(sieve_dev_matrix_set_masks(mm, del, allow), 0);
    enum { PLAIN, UNDERFILL, OVERFLOW, SMALL_OVER, NOT_SPEC };
    const struct {
        sieve_dev_matrix *dm;
        sieve_metric metric;
        uint32_t B, k;
        int kind, pinned;
        const char *spec; /* the speculative run's setting (NULL: default) */
    } cs[] = {
        {dm, SIEVE_METRIC_DOT, 1, 1, PLAIN, 0, NULL},
        {dm, SIEVE_METRIC_DOT, 1, 10, PLAIN, 1, NULL},
        {dm, SIEVE_METRIC_DOT, 7, 128, PLAIN, 0, NULL},
        {dm, SIEVE_METRIC_EUCLID, 16, 256, PLAIN, 1, NULL},
        {dm, SIEVE_METRIC_DOT, 64, 1024, PLAIN, 0, NULL},
        {dm, SIEVE_METRIC_DOT, 128, 128, PLAIN, 1, NULL},
        {dm, SIEVE_METRIC_DOT, 3, 8192, PLAIN, 0, NULL},
        {dm, SIEVE_METRIC_DOT, 128, 8192, PLAIN, 1, NULL},
        {dm, SIEVE_METRIC_DOT, 128, 8192, NOT_SPEC, 0, NULL}, /* 12.6 MB pageable: pipelined */
        {mm, SIEVE_METRIC_COSINE, 5, 100, PLAIN, 0, NULL},
        {dm, SIEVE_METRIC_DOT, 7, 100, UNDERFILL, 0, NULL},
        {dm, SIEVE_METRIC_DOT, 7, 100, OVERFLOW, 1, NULL},
        {dm, SIEVE_METRIC_DOT, 3, 12288, SMALL_OVER, 0, "small"},
        {dm, SIEVE_METRIC_DOT, 3, 1500, PLAIN, 0, "small"}, /* split in parts */
        {dm, SIEVE_METRIC_DOT, 129, 10, PLAIN, 0, NULL},
        {dm, SIEVE_METRIC_DOT, 1024, 128, PLAIN, 0, NULL},  /* 1.5 MB staged */
        {dm, SIEVE_METRIC_DOT, 1024, 1024, PLAIN, 1, NULL}, /* 12.6 MB page-locked */
        {mm, SIEVE_METRIC_EUCLID, 300, 64, PLAIN, 1, NULL},
        {dm, SIEVE_METRIC_DOT, 300, 100, UNDERFILL, 0, NULL},
        {dm, SIEVE_METRIC_DOT, 2, 12288, PLAIN, 0, NULL},
        {mm, SIEVE_METRIC_DOT, 4, 16384, PLAIN, 1, NULL},
    };
    for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++) {
        const uint32_t B = cs[ci].B, k = cs[ci].k;
        const sieve_matrix *m = sieve_dev_matrix_view(cs[ci].dm);
        float *q = normal_queries(cpu, B, 128, 40 + ci);
        sieve_search_params p;
        sieve_search_params_init(&p, cs[ci].metric, k);
        force_recovery(&p, cs[ci].kind == UNDERFILL ? 1 : cs[ci].kind == OVERFLOW ? 2 : 0);
        spec_out a, b;
        sieve_search_stats sa = spec_run(gpu, m, q, B, &p, cs[ci].spec, cs[ci].pinned, &a);
        sieve_search_stats sb = spec_run(gpu, m, q, B, &p, "0", 0, &b);
        char name[160];
        snprintf(name, sizeof name, "case %zu (B=%u k=%u kind %d pinned %d)", ci, B, k,
                 cs[ci].kind, cs[ci].pinned);
        cr_assert_eq(sb.select_speculated, 0, "%s: speculated with SIEVE_CUDA_SPECULATE=0", name);
        cr_assert_eq(sa.select_speculated, cs[ci].kind != NOT_SPEC, "%s: select_speculated %llu",
                     name, (unsigned long long)sa.select_speculated);
        cr_assert_eq(sa.speculation_missed, cs[ci].kind != PLAIN && cs[ci].kind != NOT_SPEC,
                     "%s: speculation_missed %llu", name,
                     (unsigned long long)sa.speculation_missed);
        if (cs[ci].kind == SMALL_OVER) /* the miss came from the block, not certification */
            cr_assert_eq(sa.path_count[SIEVE_PATH_CERTIFIED], B, "%s", name);
        assert_same_results(&a, &b, B, k, name);
        assert_equals_full_sort(gpu, m, q, B, &p, &a, name); /* and so both do */
        spec_free(gpu, cs[ci].pinned, &a);
        spec_free(gpu, 0, &b);
        free(q);
    }
    /* the segmented select forced: no speculation */
    cr_assert_eq(setenv("SIEVE_CUDA_SELECT", "segmented", 1), 0);
    {
        float *q = normal_queries(cpu, 4, 128, 99);
        sieve_search_params p;
        sieve_search_params_init(&p, SIEVE_METRIC_DOT, 10);
        spec_out a;
        sieve_search_stats sa = spec_run(gpu, sieve_dev_matrix_view(dm), q, 4, &p, NULL, 0, &a);
        cr_assert_eq(sa.select_speculated, 0, "speculated with the segmented select forced");
        cr_assert_eq(sa.select_segmented, 4);
        spec_free(gpu, 0, &a);
        free(q);
    }
    cr_assert_eq(unsetenv("SIEVE_CUDA_SELECT"), 0);
    cr_assert_eq(unsetenv("SIEVE_CUDA_SPECULATE"), 0);
    free(del);
    free(allow);
    sieve_dev_matrix_destroy(dm);
    sieve_dev_matrix_destroy(mm);
    sieve_device_close(gpu);
    sieve_device_close(cpu);
}

/* The search's kernels chained by programmatic dependent launch (each scheduled while the one
 * before runs, waiting on the device for its results; the gate scan's producer loading rows
 * before the propose step has finished) against the same searches launched one after another
 * (SIEVE_CUDA_PDL=0) and the materialized full sort: the same rows, scores, counts and paths,
 * bit for bit, and launches_chained says which launches were chained: with
 * SIEVE_CUDA_PDL=1, on Hopper, the sample and gate scans of the tensor-core tiles, the
 * propose step and the speculative select; the propose step and the select alone behind the
 * float32 loops and the mma.sync tiles (dim not a multiple of 8); none on the direct path or
 * with SIEVE_CUDA_PDL=0; by default every launch up to 8 queries and none above; a list of
 * stages chains those. The cases: certified batches of 1 to 300 queries, pageable and
 * page-locked, k up to 8192 (the pipelined download: no speculative select; 1.5 MB of
 * results staged), masks (the eligible counts' host waits
 * between the preparation and the sample), forced underfill and overflow (recoveries behind
 * a chained scan), and 40 back-to-back calls at B = 1 and 64, each against its unchained
 * twin. */
Test(knn_cuda, chained_launches_match_sequential, .timeout = 900) {
    SKIP_WITHOUT_GPU();
    sieve_device *gpu = NULL, *cpu = NULL;
    cr_assert_eq(sieve_device_open("cuda:0", &gpu), 0);
    cr_assert_eq(sieve_device_open("cpu", &cpu), 0);
    sieve_device_info info;
    cr_assert_eq(sieve_device_get_info(gpu, &info), 0);
    const int pdl = info.compute_capability >= 90, hopper = info.compute_capability == 90;
    const uint64_t n = 300007;
    sieve_dev_matrix *dm = normal_matrix(gpu, SIEVE_DTYPE_F16, n, 128, 256, 31);
    uint64_t *del = NULL, *allow = NULL;
    make_masks(n, &del, &allow);
    sieve_dev_matrix *mm = normal_matrix(gpu, SIEVE_DTYPE_BF16, n, 128, 256, 32);
    cr_assert_eq(sieve_dev_matrix_set_masks(mm, del, allow), 0);
    sieve_dev_matrix *fm = normal_matrix(gpu, SIEVE_DTYPE_F32, n, 128, 256, 33);
    sieve_dev_matrix *om = normal_matrix(gpu, SIEVE_DTYPE_F16, n, 100, 256, 34); /* mma.sync */
    sieve_dev_matrix *sm = normal_matrix(gpu, SIEVE_DTYPE_F16, 20000, 128, 256, 35); /* direct */
    enum { PLAIN, UNDERFILL, OVERFLOW };
    const struct {
        sieve_dev_matrix *dm;
        uint32_t dim;
        sieve_metric metric;
        uint32_t B, k;
        int kind, pinned;
        int scans, spec; /* chained scans on Hopper (sample, gate), a speculative select */
    } cs[] = {
        {dm, 128, SIEVE_METRIC_DOT, 1, 1, PLAIN, 0, 2, 1},
        {dm, 128, SIEVE_METRIC_DOT, 1, 10, PLAIN, 1, 2, 1},
        {dm, 128, SIEVE_METRIC_EUCLID, 16, 256, PLAIN, 0, 2, 1},
        {dm, 128, SIEVE_METRIC_DOT, 64, 1024, PLAIN, 1, 2, 1},
        {dm, 128, SIEVE_METRIC_DOT, 128, 128, PLAIN, 0, 2, 1},
        {dm, 128, SIEVE_METRIC_DOT, 128, 1024, PLAIN, 0, 2, 1}, /* 1.5 MB staged */
        {dm, 128, SIEVE_METRIC_DOT, 128, 8192, PLAIN, 0, 2, 0}, /* pipelined download */
        {dm, 128, SIEVE_METRIC_DOT, 300, 1000, PLAIN, 0, 2, 0},
        {dm, 128, SIEVE_METRIC_DOT, 7, 100, UNDERFILL, 0, 2, 1},
        {dm, 128, SIEVE_METRIC_DOT, 7, 100, OVERFLOW, 1, 2, 1},
        {mm, 128, SIEVE_METRIC_COSINE, 5, 100, PLAIN, 0, 2, 1},
        {mm, 128, SIEVE_METRIC_DOT, 200, 64, PLAIN, 0, 2, 1},
        {fm, 128, SIEVE_METRIC_DOT, 3, 50, PLAIN, 0, 0, 1},
        {fm, 128, SIEVE_METRIC_EUCLID, 40, 10, PLAIN, 0, 0, 1},
        {om, 100, SIEVE_METRIC_DOT, 9, 32, PLAIN, 0, 0, 1},
        {sm, 128, SIEVE_METRIC_DOT, 4, 10, PLAIN, 0, -1, 0}, /* direct: nothing chained */
    };
    for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++) {
        const uint32_t B = cs[ci].B, k = cs[ci].k;
        const sieve_matrix *m = sieve_dev_matrix_view(cs[ci].dm);
        float *q = normal_queries(cpu, B, cs[ci].dim, 60 + ci);
        sieve_search_params p;
        sieve_search_params_init(&p, cs[ci].metric, k);
        force_recovery(&p, cs[ci].kind == UNDERFILL ? 1 : cs[ci].kind == OVERFLOW ? 2 : 0);
        spec_out a, b;
        sieve_search_stats sa = setting_run(gpu, m, q, B, &p, "SIEVE_CUDA_PDL", "1",
                                            cs[ci].pinned, &a);
        sieve_search_stats sb = setting_run(gpu, m, q, B, &p, "SIEVE_CUDA_PDL", "0", 0, &b);
        char name[160];
        snprintf(name, sizeof name, "case %zu (B=%u k=%u dim=%u kind %d pinned %d)", ci, B, k,
                 cs[ci].dim, cs[ci].kind, cs[ci].pinned);
        const uint64_t want = !pdl || cs[ci].scans < 0
                                  ? 0
                                  : (uint64_t)((hopper ? cs[ci].scans : 0) + 1 + cs[ci].spec);
        cr_assert_eq(sa.launches_chained, want, "%s: launches_chained %llu, expected %llu", name,
                     (unsigned long long)sa.launches_chained, (unsigned long long)want);
        cr_assert_eq(sb.launches_chained, 0, "%s: chained with SIEVE_CUDA_PDL=0", name);
        cr_assert_eq(sa.select_speculated, (uint64_t)cs[ci].spec, "%s: select_speculated", name);
        if (cs[ci].kind != PLAIN)
            cr_assert(sa.rescans > 0 || sa.path_count[SIEVE_PATH_FULL] > 0,
                      "%s: the forced case recovered nothing", name);
        assert_same_results(&a, &b, B, k, name);
        assert_equals_full_sort(gpu, m, q, B, &p, &a, name);
        spec_free(gpu, cs[ci].pinned, &a);
        spec_free(gpu, 0, &b);
        free(q);
    }
    /* back to back: each chained call against its unchained twin */
    const sieve_matrix *m = sieve_dev_matrix_view(dm);
    for (int it = 0; it < 40; it++) {
        const uint32_t B = it % 2 ? 64 : 1, k = it % 3 ? 10 : 128;
        float *q = normal_queries(cpu, B, 128, 500 + it);
        sieve_search_params p;
        sieve_search_params_init(&p, SIEVE_METRIC_DOT, k);
        spec_out a, b;
        setting_run(gpu, m, q, B, &p, "SIEVE_CUDA_PDL", "1", 0, &a);
        setting_run(gpu, m, q, B, &p, "SIEVE_CUDA_PDL", "0", 0, &b);
        char name[96];
        snprintf(name, sizeof name, "back-to-back call %d (B=%u k=%u)", it, B, k);
        assert_same_results(&a, &b, B, k, name);
        spec_free(gpu, 0, &a);
        spec_free(gpu, 0, &b);
        free(q);
    }
    /* the default (every launch up to 8 queries, none above) and lists of stages */
    const struct {
        const char *val;
        uint32_t B;
        uint64_t want; /* on Hopper */
    } st[] = {{NULL, 8, 4}, {NULL, 9, 0}, {NULL, 64, 0}, {"gate", 7, 1},
              {"sample,propose", 7, 2}, {"propose,select", 100, 2}, {"1", 100, 4}};
    for (size_t si = 0; si < sizeof st / sizeof *st; si++) {
        const uint32_t B = st[si].B, k = 64;
        float *q = normal_queries(cpu, B, 128, 900 + si);
        sieve_search_params p;
        sieve_search_params_init(&p, SIEVE_METRIC_DOT, k);
        spec_out a, b;
        sieve_search_stats sa = setting_run(gpu, m, q, B, &p, "SIEVE_CUDA_PDL", st[si].val, 0, &a);
        setting_run(gpu, m, q, B, &p, "SIEVE_CUDA_PDL", "0", 0, &b);
        char name[96];
        snprintf(name, sizeof name, "SIEVE_CUDA_PDL=%s B=%u", st[si].val ? st[si].val : "(unset)",
                 B);
        const uint64_t want = hopper ? st[si].want : 0; /* other GPUs: not every stage chains */
        if (hopper || !pdl)
            cr_assert_eq(sa.launches_chained, want, "%s: launches_chained %llu, expected %llu",
                         name, (unsigned long long)sa.launches_chained, (unsigned long long)want);
        assert_same_results(&a, &b, B, k, name);
        spec_free(gpu, 0, &a);
        spec_free(gpu, 0, &b);
        free(q);
    }
    cr_assert_eq(unsetenv("SIEVE_CUDA_PDL"), 0);
    free(del);
    free(allow);
    sieve_dev_matrix_destroy(dm);
    sieve_dev_matrix_destroy(mm);
    sieve_dev_matrix_destroy(fm);
    sieve_dev_matrix_destroy(om);
    sieve_dev_matrix_destroy(sm);
    sieve_device_close(gpu);
    sieve_device_close(cpu);
}

/* Runs one fused search with the given variant; returns the scores (caller frees). */
static float *scores_with(const char *variant, const sieve_matrix *m, const float *q, uint32_t B,
                          uint32_t k, sieve_device *gpu) {
    cr_assert_eq(setenv("SIEVE_CUDA_SCAN", variant, 1), 0);
    sieve_search_params p;
    sieve_search_params_init(&p, SIEVE_METRIC_DOT, k);
    int64_t *rows = malloc((size_t)B * k * 8);
    float *sc = malloc((size_t)B * k * 4);
    uint32_t *cnt = malloc(B * 4);
    cr_assert(rows && sc && cnt);
    int rc = sieve_knn(gpu, m, q, B, &p, NULL, 0, rows, sc, cnt, NULL, NULL);
    cr_assert_eq(rc, 0, "%s: %s", variant, sieve_strerror(rc));
    free(rows);
    free(cnt);
    return sc;
}

/* The tensor-core variants compute each key with the same float32 accumulation over K in
 * 16-wide steps: a query's keys must not depend on the variant (hence not on the batch it
 * was grouped into by the server). */
Test(knn_cuda, scan_variants_give_identical_keys, .timeout = 900) {
    SKIP_WITHOUT_GPU();
    sieve_device *gpu = NULL, *cpu = NULL;
    cr_assert_eq(sieve_device_open("cuda:0", &gpu), 0);
    cr_assert_eq(sieve_device_open("cpu", &cpu), 0);
    const uint64_t n = 40009; /* > 2 x 16384 sample rows: the fused path, not the direct one */
    const uint32_t dim = 768, B = 130, k = 50;
    sieve_dtype dts[] = {SIEVE_DTYPE_F16, SIEVE_DTYPE_BF16};
    for (int d = 0; d < 2; d++) {
        sieve_dev_matrix *dm = normal_matrix(gpu, dts[d], n, dim, 256, 3);
        float *q = normal_queries(cpu, B, dim, 5);
        const sieve_matrix *m = sieve_dev_matrix_view(dm);
        float *ref = scores_with("mma", m, q, B, k, gpu);
        for (size_t v = 1; v < sizeof VARIANTS / sizeof *VARIANTS; v++) {
            float *sc = scores_with(VARIANTS[v], m, q, B, k, gpu);
            for (size_t i = 0; i < (size_t)B * k; i++)
                cr_assert_eq(memcmp(&sc[i], &ref[i], 4), 0, "%s %s: key %zu %.9g vs mma %.9g",
                             sieve_dtype_name(dts[d]), VARIANTS[v], i, sc[i], ref[i]);
            free(sc);
        }
        /* pages the TMA cannot address as one array (no page_base): the tma variants fall
           back to the cp.async tiles, with the same keys */
        sieve_matrix loose = *m;
        loose.page_base = NULL;
        loose.page_stride = 0;
        for (size_t v = 5; v < sizeof VARIANTS / sizeof *VARIANTS; v++) {
            float *sc = scores_with(VARIANTS[v], &loose, q, B, k, gpu);
            for (size_t i = 0; i < (size_t)B * k; i++)
                cr_assert_eq(memcmp(&sc[i], &ref[i], 4), 0, "%s without page_base: key %zu", VARIANTS[v], i);
            free(sc);
        }
        /* the 64-query tiles on the first 64 queries give those queries' keys */
        static const char *const Q64[] = {"tma64x256", "tma64x128", "tma64x128s", "tma64x256s",
                                          "wg64x128"};
        for (size_t v = 0; v < sizeof Q64 / sizeof *Q64; v++) {
            float *sc = scores_with(Q64[v], m, q, 64, k, gpu);
            for (size_t i = 0; i < (size_t)64 * k; i++)
                cr_assert_eq(memcmp(&sc[i], &ref[i], 4), 0, "%s %s, 64 queries: key %zu %.9g vs %.9g",
                             sieve_dtype_name(dts[d]), Q64[v], i, sc[i], ref[i]);
            free(sc);
        }
        /* and a query's keys do not depend on the batch it is in: query 0 alone */
        float *one = scores_with("wg64x128", m, q, 1, k, gpu);
        for (uint32_t i = 0; i < k; i++)
            cr_assert_eq(memcmp(&one[i], &ref[i], 4), 0, "batch of one: key %u %.9g vs %.9g", i,
                         one[i], ref[i]);
        free(one);
        free(ref);
        free(q);
        sieve_dev_matrix_destroy(dm);
    }
    cr_assert_eq(unsetenv("SIEVE_CUDA_SCAN"), 0);
    sieve_device_close(gpu);
    sieve_device_close(cpu);
}

/* float32 storage has three loops: a row per thread for batches of up to 4 queries
 * (scan_f32v_kernel, NQ = 1, 2 or 4 queries a thread), the row-major cp.async loop for 5-32
 * queries when dim % 4 == 0 (scan_f32r_kernel: 8 rows x 2, 4 or 8 queries a thread) and the
 * tiles otherwise (forced at every batch with SIEVE_CUDA_SCAN=f32tile). All are sequential
 * fmaf chains over k, so a query's keys must be bit-identical whichever loop, batch and tile
 * ran: batches of 1, 2, 3, 4, 5, 8, 13, 16, 20 and 32 (each with its default loop and with the
 * tiles) and 64 (the 256 x 64 tile) against the first queries of a 130-query batch (two
 * 128-query tiles), for dim 768 (the row-major loop's one-pointer copies in full blocks,
 * per-row copies in the last), dim 100 (columns padded to 128: per-row copies) and dim 13
 * (4-byte copies; tiles above 4 queries), at a row count not a multiple of any tile. */
Test(knn_cuda, float32_keys_do_not_depend_on_the_loop, .timeout = 600) {
    SKIP_WITHOUT_GPU();
    sieve_device *gpu = NULL, *cpu = NULL;
    cr_assert_eq(sieve_device_open("cuda:0", &gpu), 0);
    cr_assert_eq(sieve_device_open("cpu", &cpu), 0);
    const uint64_t n = 40009; /* > 2 x 16384 sample rows: the fused path, not the direct one */
    const uint32_t dims[] = {768, 100, 13}, B = 130, k = 50;
    for (int d = 0; d < 3; d++) {
        const uint32_t dim = dims[d];
        sieve_dev_matrix *dm = normal_matrix(gpu, SIEVE_DTYPE_F32, n, dim, 256, 9);
        float *q = normal_queries(cpu, B, dim, 13);
        const sieve_matrix *m = sieve_dev_matrix_view(dm);
        float *ref = scores_with("f32tile", m, q, B, k, gpu);
        /* every loop: row per thread (1-4), row-major cp.async (5-32), tiles (above) */
        const uint32_t bs[] = {1, 2, 3, 4, 5, 8, 13, 16, 20, 32, 64};
        for (int bi = 0; bi < 11; bi++) {
            const char *const loops[] = {"", "f32tile"};
            for (int l = 0; l < 2; l++) {
                float *sc = scores_with(loops[l], m, q, bs[bi], k, gpu);
                for (size_t i = 0; i < (size_t)bs[bi] * k; i++)
                    cr_assert_eq(memcmp(&sc[i], &ref[i], 4), 0,
                                 "dim %u, batch of %u (%s): key %zu %.9g vs %.9g in 130", dim,
                                 bs[bi], l ? "tiles forced" : "default loop", i, sc[i], ref[i]);
                free(sc);
            }
        }
        free(ref);
        free(q);
        sieve_dev_matrix_destroy(dm);
    }
    cr_assert_eq(unsetenv("SIEVE_CUDA_SCAN"), 0);
    sieve_device_close(gpu);
    sieve_device_close(cpu);
}

/* sieve_knn on `dev` into pageable arrays with the environment variable `env` set to 0 gives
 * rows, scores and counts equal, bit for bit, to rows, sc and cnt. */
static void same_with_setting(sieve_device *dev, const char *env, const char *what,
                              const sieve_matrix *m, const float *q, uint32_t B,
                              const sieve_search_params *p, const int64_t *rows,
                              const float *sc, const uint32_t *cnt) {
    const size_t nr = (size_t)B * p->k;
    int64_t *r0 = malloc(nr * 8);
    float *s0 = malloc(nr * 4);
    uint32_t *c0 = malloc(B * 4);
    cr_assert(r0 && s0 && c0);
    memset(r0, 0x5a, nr * 8);
    memset(s0, 0x5a, nr * 4);
    memset(c0, 0x5a, B * 4);
    cr_assert_eq(setenv(env, "0", 1), 0);
    int rc = sieve_knn(dev, m, q, B, p, NULL, 0, r0, s0, c0, NULL, NULL);
    cr_assert_eq(unsetenv(env), 0);
    cr_assert_eq(rc, 0, "%s B=%u k=%u: %s", what, B, p->k, sieve_strerror(rc));
    cr_assert_eq(memcmp(c0, cnt, B * 4), 0, "%s B=%u k=%u: counts", what, B, p->k);
    cr_assert_eq(memcmp(r0, rows, nr * 8), 0, "%s B=%u k=%u: rows", what, B, p->k);
    cr_assert_eq(memcmp(s0, sc, nr * 4), 0, "%s B=%u k=%u: scores", what, B, p->k);
    free(r0);
    free(s0);
    free(c0);
}

/* Result arrays in page-locked memory are written by the copy engine directly; they must
 * hold exactly what pageable arrays get through the staging buffer: small results (one
 * staged copy), large ones (the chunked pipeline, rows on the bus as 32-bit values), and
 * padding when fewer than k rows are eligible, staged and pipelined. A page-locked array
 * with a pageable partner takes the staged path. Page-locked queries (read by the copy
 * engine directly) give the same answers as pageable ones, and the pageable paths give the
 * same with and without the context's kept copy threads and with 64-bit rows on the bus
 * (SIEVE_CUDA_NARROW=0). */
Test(knn_cuda, pinned_results_match_pageable, .timeout = 600) {
    SKIP_WITHOUT_GPU();
    sieve_device *gpu = NULL, *gpu_plain = NULL, *cpu = NULL;
    cr_assert_eq(sieve_device_open("cuda:0", &gpu), 0);
    cr_assert_eq(sieve_device_open("cuda:0", &gpu_plain), 0);
    cr_assert_eq(sieve_device_open("cpu", &cpu), 0);
    const uint64_t n = 100003;
    const uint32_t dim = 256;
    sieve_dev_matrix *dm = normal_matrix(gpu, SIEVE_DTYPE_F16, n, dim, 1024, 9);
    /* shapes: 60 results (one copy), 1.6M results (19 MB, chunked, 32-bit rows on the bus),
       and k above the eligible rows of a 1500-row prefix (about 1030; padding): staged,
       chunked (7 MB) and chunked with 32-bit rows (24 MB) */
    const struct { uint32_t B, k; uint64_t rows; int masks; } sh[] = {
        {3, 20, n, 0}, {200, 8192, n, 0}, {5, 2000, 1500, 1}, {300, 2000, 1500, 1},
        {1000, 2000, 1500, 1}};
    for (int si = 0; si < 5; si++) {
        uint32_t B = sh[si].B, k = sh[si].k;
        uint64_t *del = NULL, *allow = NULL;
        if (sh[si].masks) {
            make_masks(n, &del, &allow);
            for (uint64_t r = sh[si].rows; r < n; r++) allow[r / 64] &= ~(1ull << (r % 64));
        }
        cr_assert_eq(sieve_dev_matrix_set_masks(dm, del, allow), 0);
        const sieve_matrix *m = sieve_dev_matrix_view(dm);
        float *q = normal_queries(cpu, B, dim, 21 + si);
        sieve_search_params p;
        sieve_search_params_init(&p, SIEVE_METRIC_DOT, k);
        size_t nr = (size_t)B * k;
        int64_t *rows = malloc(nr * 8), *prows = NULL;
        float *sc = malloc(nr * 4), *psc = NULL;
        uint32_t *cnt = malloc(B * 4), *pcnt = NULL;
        cr_assert(rows && sc && cnt);
        cr_assert_eq(sieve_host_alloc_pinned(gpu, nr * 8, (void **)&prows), 0);
        cr_assert_eq(sieve_host_alloc_pinned(gpu, nr * 4, (void **)&psc), 0);
        cr_assert_eq(sieve_host_alloc_pinned(gpu, B * 4, (void **)&pcnt), 0);
        int rc = sieve_knn(gpu, m, q, B, &p, NULL, 0, rows, sc, cnt, NULL, NULL);
        cr_assert_eq(rc, 0, "pageable B=%u k=%u: %s", B, k, sieve_strerror(rc));
        /* the same pageable call on a device whose host copies run on the calling thread,
           with the chunked download's threads started per call (SIEVE_CUDA_HOSTCOPY=0, read
           at a device's first staged copy), and with the rows on the bus as 64-bit values
           (SIEVE_CUDA_NARROW=0, read per call): the same answer as the defaults give */
        same_with_setting(gpu_plain, "SIEVE_CUDA_HOSTCOPY", "copies on one thread", m, q, B, &p,
                          rows, sc, cnt);
        same_with_setting(gpu, "SIEVE_CUDA_NARROW", "64-bit rows", m, q, B, &p, rows, sc, cnt);
        /* into pinned arrays from pageable queries, then from page-locked queries (copied
           from directly): the same answer both times */
        float *pq = NULL;
        cr_assert_eq(sieve_host_alloc_pinned(gpu, (size_t)B * dim * 4, (void **)&pq), 0);
        memcpy(pq, q, (size_t)B * dim * 4);
        for (int pinned_q = 0; pinned_q < 2; pinned_q++) {
            const char *what = pinned_q ? "pinned queries and results" : "pinned results";
            memset(prows, 0x5a, nr * 8);
            memset(psc, 0x5a, nr * 4);
            memset(pcnt, 0x5a, B * 4);
            rc = sieve_knn(gpu, m, pinned_q ? pq : q, B, &p, NULL, 0, prows, psc, pcnt, NULL, NULL);
            cr_assert_eq(rc, 0, "%s B=%u k=%u: %s", what, B, k, sieve_strerror(rc));
            cr_assert_eq(memcmp(cnt, pcnt, B * 4), 0, "%s B=%u k=%u: counts differ", what, B, k);
            for (size_t i = 0; i < nr; i++) {
                cr_assert_eq(rows[i], prows[i], "%s B=%u k=%u i=%zu: row %lld vs %lld", what, B,
                             k, i, (long long)prows[i], (long long)rows[i]);
                cr_assert_eq(memcmp(&sc[i], &psc[i], 4), 0, "%s B=%u k=%u i=%zu: score differs",
                             what, B, k, i);
            }
            if (sh[si].masks) {
                cr_assert_lt(pcnt[0], k, "the padding case must pad");
                cr_assert(prows[k - 1] == -1 && isnan(psc[k - 1]), "padding in pinned arrays");
                cr_assert(rows[(size_t)B * k - 1] == -1 && isnan(sc[(size_t)B * k - 1]),
                          "padding in pageable arrays");
            }
        }
        sieve_host_free_pinned(gpu, pq);
        /* pinned rows with pageable scores: the staged path, same answer */
        memset(prows, 0x5a, nr * 8);
        memset(sc, 0x5a, nr * 4);
        rc = sieve_knn(gpu, m, q, B, &p, NULL, 0, prows, sc, NULL, NULL, NULL);
        cr_assert_eq(rc, 0, "mixed B=%u k=%u: %s", B, k, sieve_strerror(rc));
        cr_assert_eq(memcmp(prows, rows, nr * 8), 0, "mixed B=%u k=%u: rows differ", B, k);
        cr_assert_eq(memcmp(sc, psc, nr * 4), 0, "mixed B=%u k=%u: scores differ", B, k);
        sieve_host_free_pinned(gpu, prows);
        sieve_host_free_pinned(gpu, psc);
        sieve_host_free_pinned(gpu, pcnt);
        free(rows);
        free(sc);
        free(cnt);
        free(q);
        free(del);
        free(allow);
    }
    sieve_dev_matrix_destroy(dm);
    sieve_device_close(gpu_plain);
    sieve_device_close(gpu);
    sieve_device_close(cpu);
}

/* Host reference of the sample selection: the float bits at descending rank r of the keys
 * ordered as ord_bits orders them. */
static int cmp_desc_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static uint32_t bits_at_rank(const uint32_t *sorted_ord, uint32_t r) {
    uint32_t o = sorted_ord[r];
    return (o & 0x80000000u) ? (o & 0x7fffffffu) : ~o;
}

/* The propose step's selection (maximum and two ranks of each query's sample keys, one
 * joint radix pass per digit with warp-aggregated histograms, each list split over a cluster
 * of 1, 2, 4 or 8 blocks, or as many as the search picks) against a full sort of the same
 * keys, bit for bit: slices in shared memory and in global memory, lengths that are not a
 * multiple of the block or of the cluster, fewer keys than blocks, all-equal keys, narrow
 * bands that share their top bytes, -inf (ineligible sample rows), signed zeros, sorted
 * lists, and the first and last ranks; and, where one block holds a list with small ranks
 * (its passes over the keys at or above a group maximum only), ties at the top, sorted keys
 * whose top groups hold every kept key, all-equal keys (too many kept: all keys' passes),
 * -inf and a length that is not a multiple of 32. */
Test(knn_cuda, sample_selection_matches_a_sort, .timeout = 300) {
    SKIP_WITHOUT_GPU();
    sieve_device *gpu = NULL, *cpu = NULL;
    cr_assert_eq(sieve_device_open("cuda:0", &gpu), 0);
    cr_assert_eq(sieve_device_open("cpu", &cpu), 0);
    const struct { const char *what; uint32_t n, rj, rj2; } cs[] = {
        {"normal, global memory", 65536, 166, 340},
        {"normal, shared memory", 16384, 4, 16},
        {"all equal", 20000, 0, 19999},
        {"half -inf, n not a multiple of 32", 1000, 499, 500},
        {"narrow band", 50001, 7, 50000},
        {"signed zeros and negatives", 4099, 1000, 3000},
        {"sorted ascending with duplicates", 70001, 1, 69999},
        {"sorted descending", 131072, 600, 1208},
        {"fewer keys than blocks", 5, 1, 4},
        {"slices in global memory even 8 ways", 262147, 9000, 18008},
        {"small ranks, ties at the top", 20000, 5, 200},
        {"small ranks, sorted ascending", 16384, 2, 40},
        {"small ranks, all equal", 16384, 3, 40},
        {"small ranks, half -inf, n not a multiple of 32", 16411, 4, 60},
    };
    const uint32_t parts[] = {1, 2, 4, 8, 0};
    const uint32_t lists = 3;
    for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++) {
        const uint32_t n = cs[ci].n;
        float *keys = malloc((size_t)lists * n * 4);
        uint32_t *ord = malloc((size_t)n * 4);
        float out[9];
        cr_assert(keys && ord);
        sieve_device_fill_normal(cpu, keys, SIEVE_DTYPE_F32, (size_t)lists * n, 100 + ci, 1.0f);
        for (uint32_t l = 0; l < lists; l++) {
            float *k = keys + (size_t)l * n;
            for (uint32_t i = 0; i < n; i++) {
                switch (ci) {
                case 2: k[i] = 1.5f; break;
                case 3: if (i % 2) k[i] = -INFINITY; break;
                case 4: k[i] = 3.0f + 1e-6f * (float)((i * 7919u + l) % 1000u); break;
                case 5: k[i] = (i % 3 == 0) ? -0.0f : (i % 3 == 1) ? 0.0f : -fabsf(k[i]); break;
                case 6: k[i] = (float)(i / 4) * 0.25f - 100.0f; break;
                case 7: k[i] = 1000.0f - (float)i * 0.01f; break;
                case 10: if ((i * 2654435761u + l) % 67u == 0) k[i] = 7.0f; break;
                case 11: k[i] = (float)i * 0.001f - 3.0f; break;
                case 12: k[i] = -2.5f; break;
                case 13: if (i % 2) k[i] = -INFINITY; break;
                default: break;
                }
            }
        }
        uint32_t want[3 * 3];
        for (uint32_t l = 0; l < lists; l++) {
            for (uint32_t i = 0; i < n; i++) ord[i] = ord_bits(keys[(size_t)l * n + i]);
            qsort(ord, n, 4, cmp_desc_u32);
            want[3 * l + 0] = bits_at_rank(ord, 0);
            want[3 * l + 1] = bits_at_rank(ord, cs[ci].rj);
            want[3 * l + 2] = bits_at_rank(ord, cs[ci].rj2);
        }
        for (size_t pi = 0; pi < sizeof parts / sizeof *parts; pi++) {
            memset(out, 0xff, sizeof out);
            cr_assert_eq(sieve__cuda_select3(gpu->cuda, keys, lists, n, cs[ci].rj, cs[ci].rj2,
                                             parts[pi], out),
                         0, "%s, %u blocks", cs[ci].what, parts[pi]);
            for (uint32_t l = 0; l < lists; l++) {
                for (int w = 0; w < 3; w++) {
                    uint32_t got;
                    memcpy(&got, &out[3 * l + w], 4);
                    cr_assert_eq(got, want[3 * l + w],
                                 "%s, %u blocks per list, list %u, %s: bits %08x, a sort "
                                 "gives %08x",
                                 cs[ci].what, parts[pi], l,
                                 w == 0 ? "maximum" : w == 1 ? "rank j" : "rank j2", got,
                                 want[3 * l + w]);
                }
            }
        }
        free(keys);
        free(ord);
    }
    /* 40 lists of 16384 keys with small ranks: the automatic choice is one block a list
       (the group-maxima fast path; clusters of 8 would put more than two blocks on an SM of
       a 132-SM GPU), as the propose step picks from 34 queries on */
    {
        const uint32_t nl = 40, n = 16384, rj = 9, rj2 = 26;
        float *keys = malloc((size_t)nl * n * 4);
        uint32_t *ord = malloc((size_t)n * 4);
        float *out = malloc((size_t)nl * 3 * 4);
        cr_assert(keys && ord && out);
        sieve_device_fill_normal(cpu, keys, SIEVE_DTYPE_F32, (size_t)nl * n, 77, 1.0f);
        for (uint32_t l = 0; l < nl; l += 3) /* ties at the top of every third list */
            for (uint32_t i = 0; i < n; i += 97) keys[(size_t)l * n + i] = 6.0f;
        memset(out, 0xff, (size_t)nl * 3 * 4);
        cr_assert_eq(sieve__cuda_select3(gpu->cuda, keys, nl, n, rj, rj2, 0, out), 0);
        for (uint32_t l = 0; l < nl; l++) {
            for (uint32_t i = 0; i < n; i++) ord[i] = ord_bits(keys[(size_t)l * n + i]);
            qsort(ord, n, 4, cmp_desc_u32);
            const uint32_t want[3] = {bits_at_rank(ord, 0), bits_at_rank(ord, rj),
                                      bits_at_rank(ord, rj2)};
            for (int w = 0; w < 3; w++) {
                uint32_t got;
                memcpy(&got, &out[3 * l + w], 4);
                cr_assert_eq(got, want[w],
                             "40 lists, automatic blocks, list %u, %s: bits %08x, a sort "
                             "gives %08x",
                             l, w == 0 ? "maximum" : w == 1 ? "rank j" : "rank j2", got,
                             want[w]);
            }
        }
        free(keys);
        free(ord);
        free(out);
    }
    float k1[4] = {1, 2, 3, 4}, o1[3];
    cr_assert_eq(sieve__cuda_select3(gpu->cuda, k1, 1, 4, 0, 1, 3, o1), SIEVE_EINVAL,
                 "3 blocks per list (not a power of two) is refused");
    cr_assert_eq(sieve__cuda_select3(gpu->cuda, k1, 1, 4, 0, 1, 16, o1), SIEVE_EINVAL,
                 "16 blocks per list (past the portable cluster size) is refused");
    sieve_device_close(gpu);
    sieve_device_close(cpu);
}

Test(knn_cuda, skips_cleanly_without_gpu) {
    /* On a machine without a GPU, opening cuda:0 fails with SIEVE_ENODEV, and auto is the CPU. */
    if (have_gpu()) {
        sieve_device *d = NULL;
        cr_assert_eq(sieve_device_open("auto", &d), 0);
        cr_assert_eq(sieve_device_get_kind(d), SIEVE_DEVICE_CUDA);
        sieve_device_close(d);
        return;
    }
    sieve_device *d = NULL;
    cr_assert_eq(sieve_device_open("cuda:0", &d), SIEVE_ENODEV);
    cr_assert_null(d);
    cr_assert_eq(sieve_device_open("auto", &d), 0);
    cr_assert_eq(sieve_device_get_kind(d), SIEVE_DEVICE_CPU);
    sieve_device_close(d);
}

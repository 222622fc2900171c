/* test_cpu_select.c: white-box tests of the CPU backend's helpers (cpu_internal.h): the
 * candidate encoding orders like (key descending, row ascending), both sorts equal qsort,
 * bin membership agrees with the explicit edges for adversarial ranges and values, the slot
 * selection equals a full sort. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "kt_util.h"

static int cmp_u64(const void *pa, const void *pb) {
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return (a > b) - (a < b);
}

Test(cpu_select, candidate_order_and_round_trip) {
    const float keys[] = {-INFINITY, -FLT_MAX, -1.5f, -1.0f, -FLT_MIN, -0x1p-149f, 0.0f,
                          0x1p-149f, FLT_MIN,  1e-30f, 1.0f,  1.5f,     FLT_MAX,    INFINITY};
    const uint32_t rows[] = {0, 1, 77, 0xfffffffeu};
    size_t nk = sizeof keys / sizeof keys[0];
    for (size_t i = 0; i < nk; i++)
        for (size_t a = 0; a < 4; a++) {
            uint64_t c = sieve__cpu_cand(keys[i], rows[a]);
            cr_assert_neq(c, SIEVE__NO_CAND);
            float back = sieve__cpu_cand_key(c);
            cr_assert_eq(memcmp(&back, &keys[i], 4), 0, "key %a decoded as %a", keys[i], back);
            cr_assert_eq(sieve__cpu_cand_row(c), rows[a]);
            for (size_t j = 0; j < nk; j++)
                for (size_t b = 0; b < 4; b++) {
                    uint64_t d = sieve__cpu_cand(keys[j], rows[b]);
                    int better = keys[i] > keys[j] || (keys[i] == keys[j] && rows[a] < rows[b]);
                    cr_assert_eq(c < d, better, "(%a, %u) vs (%a, %u)", keys[i], rows[a], keys[j],
                                 rows[b]);
                }
        }
}

Test(cpu_select, sorts_equal_qsort) {
    kt_rng r = {5};
    const size_t sizes[] = {0, 1, 2, 3, 24, 25, 100, 511, 512, 513, 3000, 20000};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int pattern = 0; pattern < 5; pattern++) {
            size_t n = sizes[si];
            uint64_t *a = malloc((n + 1) * sizeof *a), *b = malloc((n + 1) * sizeof *b);
            uint64_t *want = malloc((n + 1) * sizeof *want), *tmp = malloc((n + 1) * sizeof *tmp);
            cr_assert(a && b && want && tmp);
            for (size_t i = 0; i < n; i++) {
                uint64_t v = kt_next(&r);
                switch (pattern) {
                case 1: v %= 3; break;                                    /* heavy duplicates */
                case 2: v = i; break;                                     /* sorted */
                case 3: v = n - i; break;                                 /* reversed */
                case 4: v = ((uint64_t)(kt_next(&r) % 5) << 32) | i; break; /* ties on high half */
                default: break;
                }
                a[i] = b[i] = want[i] = v;
            }
            qsort(want, n, sizeof *want, cmp_u64);
            sieve__cpu_sort_u64(a, n, tmp);
            sieve__cpu_sort_u64(b, n, NULL);
            cr_assert_eq(memcmp(a, want, n * sizeof *a), 0, "radix n=%zu pattern %d", n, pattern);
            cr_assert_eq(memcmp(b, want, n * sizeof *b), 0, "introsort n=%zu pattern %d", n,
                         pattern);
            free(a);
            free(b);
            free(want);
            free(tmp);
        }
}

Test(cpu_select, smallest_equals_qsort_prefix) {
    kt_rng r = {8};
    const size_t sizes[] = {1, 2, 30, 100, 1000, 5000};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int pattern = 0; pattern < 4; pattern++)
            for (size_t j = 0; j <= sizes[si]; j += 1 + sizes[si] / 13) {
                size_t n = sizes[si];
                uint64_t *a = malloc(n * sizeof *a), *want = malloc(n * sizeof *want);
                uint64_t *tmp = malloc(n * sizeof *tmp);
                cr_assert(a && want && tmp);
                for (size_t i = 0; i < n; i++) {
                    uint64_t v = kt_next(&r);
                    if (pattern == 1) v %= 4;
                    if (pattern == 2) v = i;
                    if (pattern == 3) v = n - i;
                    a[i] = want[i] = v;
                }
                qsort(want, n, sizeof *want, cmp_u64);
                sieve__cpu_smallest_u64(a, n, j, pattern % 2 ? tmp : NULL);
                cr_assert_eq(memcmp(a, want, j * sizeof *a), 0, "n=%zu j=%zu pattern %d", n, j,
                             pattern);
                qsort(a, n, sizeof *a, cmp_u64); /* nothing lost or duplicated */
                cr_assert_eq(memcmp(a, want, n * sizeof *a), 0);
                free(a);
                free(want);
                free(tmp);
            }
}

/* bin(x) >= b exactly when x >= edge[b], for every b >= 1; edges are nondecreasing. */
static void check_bins(float lo, float hi, kt_rng *r) {
    sieve__cpu_bins bins;
    sieve__cpu_bins_init(&bins, lo, hi);
    cr_assert_eq(memcmp(&bins.edge[0], &lo, 4), 0, "edge[0] must be lo (%a)", lo);
    for (uint32_t b = 1; b < SIEVE__NBINS; b++)
        cr_assert_leq(bins.edge[b - 1], bins.edge[b], "edges [%a, %a] not monotone at %u", lo, hi,
                      b);
    float xs[4 * SIEVE__NBINS + 64];
    size_t n = 0;
    for (uint32_t b = 0; b < SIEVE__NBINS; b++) {
        float e = bins.edge[b];
        xs[n++] = e;
        xs[n++] = nextafterf(e, INFINITY);
        xs[n++] = nextafterf(e, -INFINITY);
    }
    const float special[] = {-INFINITY, INFINITY, 0.0f, -FLT_MAX, FLT_MAX, lo, hi};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) xs[n++] = special[i];
    while (n < sizeof xs / sizeof xs[0]) {
        double u = kt_uniform(r) * 1.2 - 0.1;
        float x = (isfinite(lo) && isfinite(hi)) ? (float)(lo + u * ((double)hi - lo))
                                                 : kt_gauss(r) * 1e3f;
        xs[n++] = x;
    }
    for (size_t i = 0; i < n; i++) {
        float x = xs[i];
        if (isnan(x)) continue;
        uint32_t got = sieve__cpu_bin(&bins, x);
        cr_assert_lt(got, SIEVE__NBINS);
        for (uint32_t b = 1; b < SIEVE__NBINS; b++)
            cr_assert_eq(got >= b, x >= bins.edge[b],
                         "range [%a, %a]: x = %a in bin %u, edge[%u] = %a", lo, hi, x, got, b,
                         bins.edge[b]);
    }
}

Test(cpu_select, bins_agree_with_edges) {
    kt_rng r = {17};
    check_bins(0.0f, 1024.0f, &r);
    check_bins(-3.0f, 7.0f, &r);
    check_bins(1.0f, nextafterf(1.0f, 2.0f), &r);                  /* one ulp wide */
    check_bins(1.0f, nextafterf(nextafterf(1.0f, 2.0f), 2.0f), &r); /* two ulps */
    check_bins(0.0f, 0x1p-140f, &r);                               /* subnormal width */
    check_bins(-FLT_MAX, FLT_MAX, &r);                             /* width overflows */
    check_bins(-INFINITY, 1.0f, &r);
    check_bins(1.0f, INFINITY, &r);
    check_bins(5.0f, 5.0f, &r);   /* empty */
    check_bins(5.0f, -5.0f, &r);  /* inverted */
    check_bins(INFINITY, INFINITY, &r);
    for (int i = 0; i < 40; i++) {
        float a = kt_gauss(&r) * 100.0f, b = a + fabsf(kt_gauss(&r)) * (i % 2 ? 1e-4f : 10.0f);
        check_bins(a, b, &r);
    }
}

Test(cpu_select, bins_kth) {
    uint32_t hist[SIEVE__NBINS];
    memset(hist, 0, sizeof hist);
    hist[SIEVE__NBINS - 1] = 3;
    hist[100] = 4;
    hist[7] = 10;
    uint64_t above = 99;
    cr_assert_eq(sieve__cpu_bins_kth(hist, 1, &above), SIEVE__NBINS - 1);
    cr_assert_eq(above, 0);
    cr_assert_eq(sieve__cpu_bins_kth(hist, 3, &above), SIEVE__NBINS - 1);
    cr_assert_eq(sieve__cpu_bins_kth(hist, 4, &above), 100);
    cr_assert_eq(above, 3);
    cr_assert_eq(sieve__cpu_bins_kth(hist, 8, &above), 7);
    cr_assert_eq(above, 7);
    cr_assert_eq(sieve__cpu_bins_kth(hist, 17, &above), 7);
    cr_assert_eq(sieve__cpu_bins_kth(hist, 18, &above), SIEVE__NBINS);
    cr_assert_eq(above, 17);
}

/* select_slot equals a full sort of the present candidates, for integer keys (ties, keys on
 * bin edges), Gaussian keys, -inf keys, and every k from 1 to past the count. */
Test(cpu_select, slot_selection_equals_full_sort) {
    kt_rng r = {23};
    const uint64_t n_rows = 2000;
    uint64_t *slot = malloc(n_rows * sizeof *slot), *orig = malloc(n_rows * sizeof *orig);
    uint64_t *want = malloc(n_rows * sizeof *want), *top = malloc((n_rows + 8) * sizeof *top);
    uint64_t *tmp = malloc(n_rows * sizeof *tmp);
    cr_assert(slot && orig && want && top && tmp);
    for (int pattern = 0; pattern < 4; pattern++) {
        size_t present = 0;
        for (uint64_t row = 0; row < n_rows; row++) {
            if (kt_uniform(&r) < 0.2) {
                orig[row] = SIEVE__NO_CAND;
                continue;
            }
            float key;
            switch (pattern) {
            case 0: key = (float)(int)(kt_next(&r) % 1025); break;
            case 1: key = kt_gauss(&r); break;
            case 2: key = kt_uniform(&r) < 0.1 ? -INFINITY : (float)(int)(kt_next(&r) % 4); break;
            default: key = 7.0f; break;
            }
            orig[row] = sieve__cpu_cand(key, (uint32_t)row);
            want[present++] = orig[row];
        }
        qsort(want, present, sizeof *want, cmp_u64);
        for (uint32_t k = 1; k <= present + 3; k += (k < 40 ? 1 : 97)) {
            for (int use_tmp = 0; use_tmp < 2; use_tmp++) {
                memcpy(slot, orig, n_rows * sizeof *slot);
                size_t got = sieve__cpu_select_slot(slot, n_rows, k, top, use_tmp ? tmp : NULL,
                                                    use_tmp ? n_rows : 0);
                size_t expect = present < k ? present : k;
                cr_assert_eq(got, expect, "pattern %d k %u", pattern, k);
                cr_assert_eq(memcmp(top, want, got * sizeof *top), 0, "pattern %d k %u", pattern,
                             k);
            }
        }
    }
    free(slot);
    free(orig);
    free(want);
    free(top);
    free(tmp);
}

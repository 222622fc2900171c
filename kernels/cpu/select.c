/* select.c: sorting, binning and selection helpers of the CPU backend.
 * Owns: the candidate sort (LSD radix with a scratch buffer, introsort in place), the
 * equal-width bins of the fused path, exact top-k of a full-row slot, writing results.
 * Must not: score, allocate, or start threads.
 */
#include <math.h>
#include <string.h>

#include "cpu_internal.h"

/* ---------------------------------------------------------------- sorting */

static void insertion_sort(uint64_t *a, size_t n) {
    for (size_t i = 1; i < n; i++) {
        uint64_t v = a[i];
        size_t j = i;
        while (j > 0 && a[j - 1] > v) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = v;
    }
}

static void sift_down(uint64_t *a, size_t root, size_t n) {
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n) return;
        if (child + 1 < n && a[child + 1] > a[child]) child++;
        if (a[root] >= a[child]) return;
        uint64_t t = a[root];
        a[root] = a[child];
        a[child] = t;
        root = child;
    }
}

static void heap_sort(uint64_t *a, size_t n) {
    for (size_t i = n / 2; i-- > 0;) sift_down(a, i, n);
    for (size_t end = n; end-- > 1;) {
        uint64_t t = a[0];
        a[0] = a[end];
        a[end] = t;
        sift_down(a, 0, end);
    }
}

static uint64_t median3(uint64_t a, uint64_t b, uint64_t c) {
    if (a > b) { uint64_t t = a; a = b; b = t; }
    if (b > c) b = c;
    return a > b ? a : b;
}

static void intro_sort(uint64_t *a, size_t n, int depth) {
    while (n > 24) {
        if (depth-- == 0) {
            heap_sort(a, n);
            return;
        }
        uint64_t pivot = median3(a[0], a[n / 2], a[n - 1]);
        /* Hoare partition: [0, j] <= pivot <= [j+1, n); both parts non-empty because the
         * pivot is an element of a. */
        size_t i = 0, j = n - 1;
        for (;;) {
            while (a[i] < pivot) i++;
            while (a[j] > pivot) j--;
            if (i >= j) break;
            uint64_t t = a[i];
            a[i] = a[j];
            a[j] = t;
            i++;
            j--;
        }
        size_t left = j + 1;
        if (left < n - left) {
            intro_sort(a, left, depth);
            a += left;
            n -= left;
        } else {
            intro_sort(a + left, n - left, depth);
            n = left;
        }
    }
    insertion_sort(a, n);
}

static void radix_sort(uint64_t *a, size_t n, uint64_t *tmp) {
    size_t count[8][256];
    memset(count, 0, sizeof count);
    for (size_t i = 0; i < n; i++) {
        uint64_t v = a[i];
        for (int d = 0; d < 8; d++) count[d][(v >> (8 * d)) & 0xff]++;
    }
    uint64_t *src = a, *dst = tmp;
    for (int d = 0; d < 8; d++) {
        size_t *c = count[d];
        if (c[(src[0] >> (8 * d)) & 0xff] == n) continue; /* one digit value: pass is a no-op */
        size_t sum = 0;
        for (int b = 0; b < 256; b++) {
            size_t t = c[b];
            c[b] = sum;
            sum += t;
        }
        for (size_t i = 0; i < n; i++) {
            uint64_t v = src[i];
            dst[c[(v >> (8 * d)) & 0xff]++] = v;
        }
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != a) memcpy(a, src, n * sizeof *a);
}

void sieve__cpu_sort_u64(uint64_t *a, size_t n, uint64_t *tmp) {
    if (n < 2) return;
    if (tmp && n >= 512) {
        radix_sort(a, n, tmp);
        return;
    }
    int depth = 0;
    for (size_t m = n; m > 1; m >>= 1) depth += 2;
    intro_sort(a, n, depth);
}

void sieve__cpu_smallest_u64(uint64_t *a, size_t n, size_t j, uint64_t *tmp) {
    if (j >= n || j * 4 >= n) {
        sieve__cpu_sort_u64(a, n, tmp);
        return;
    }
    if (j == 0) return;
    /* Quickselect on [lo, hi) until the range holding the j-th smallest is short, then sort
     * it; past the depth limit, sort the remaining range (always correct). */
    size_t lo = 0, hi = n;
    int depth = 0;
    for (size_t m = n; m > 1; m >>= 1) depth += 2;
    while (hi - lo > 24) {
        if (depth-- == 0) {
            sieve__cpu_sort_u64(a + lo, hi - lo, NULL);
            break;
        }
        size_t len = hi - lo;
        uint64_t *b = a + lo;
        uint64_t pivot = median3(b[0], b[len / 2], b[len - 1]);
        size_t i = 0, k = len - 1;
        for (;;) {
            while (b[i] < pivot) i++;
            while (b[k] > pivot) k--;
            if (i >= k) break;
            uint64_t t = b[i];
            b[i] = b[k];
            b[k] = t;
            i++;
            k--;
        }
        size_t mid = lo + k + 1; /* [lo, mid) <= pivot <= [mid, hi) */
        if (j <= mid) hi = mid; /* keeps lo < j <= hi, and [0, lo) <= [lo, n) */
        else lo = mid;
    }
    if (hi - lo <= 24) insertion_sort(a + lo, hi - lo);
    sieve__cpu_sort_u64(a, j, tmp);
}

/* ---------------------------------------------------------------- bins */

void sieve__cpu_bins_init(sieve__cpu_bins *b, float lo, float hi) {
    float w = 0.0f;
    if (isfinite(lo) && isfinite(hi) && hi > lo) {
        w = (hi - lo) / (float)SIEVE__NBINS;
        if (!isfinite(w)) w = hi / (float)SIEVE__NBINS - lo / (float)SIEVE__NBINS;
    }
    if (w > 0.0f && isfinite(w)) {
        /* lo + i*w is nondecreasing in i (both roundings are monotone); edge[0] == lo. */
        for (uint32_t i = 0; i < SIEVE__NBINS; i++) b->edge[i] = lo + (float)i * w;
        b->inv_w = 1.0f / w;
        if (!isfinite(b->inv_w)) b->inv_w = 0.0f;
    } else {
        for (uint32_t i = 0; i < SIEVE__NBINS; i++) b->edge[i] = lo;
        b->inv_w = 0.0f;
    }
}

uint32_t sieve__cpu_bins_kth(const uint32_t *hist, uint64_t k, uint64_t *above) {
    uint64_t cum = 0;
    for (uint32_t b = SIEVE__NBINS; b-- > 0;) {
        if (cum + hist[b] >= k) {
            *above = cum;
            return b;
        }
        cum += hist[b];
    }
    *above = cum;
    return SIEVE__NBINS;
}

/* ---------------------------------------------------------------- selection */

size_t sieve__cpu_select_slot(uint64_t *slot, uint64_t n_rows, uint32_t k, uint64_t *top,
                              uint64_t *tmp, size_t tmp_cap) {
    size_t n = 0;
    float lo = INFINITY, hi = -INFINITY;
    for (uint64_t r = 0; r < n_rows; r++) {
        uint64_t c = slot[r];
        if (c == SIEVE__NO_CAND) continue;
        slot[n++] = c;
        float key = sieve__cpu_cand_key(c);
        if (isfinite(key)) {
            lo = fminf(lo, key);
            hi = fmaxf(hi, key);
        }
    }
    if (n <= k) {
        sieve__cpu_sort_u64(slot, n, tmp_cap >= n ? tmp : NULL);
        memcpy(top, slot, n * sizeof *slot);
        return n;
    }
    sieve__cpu_bins bins;
    sieve__cpu_bins_init(&bins, lo, hi);
    uint32_t hist[SIEVE__NBINS];
    memset(hist, 0, sizeof hist);
    for (size_t i = 0; i < n; i++) hist[sieve__cpu_bin(&bins, sieve__cpu_cand_key(slot[i]))]++;
    uint64_t above = 0;
    uint32_t b = sieve__cpu_bins_kth(hist, k, &above); /* exists: n > k */
    /* Bins above b go straight to the output; only bin b (which also holds keys below the
     * first edge when b == 0) is sorted. */
    int has_above = b + 1 < SIEVE__NBINS;
    float up = has_above ? bins.edge[b + 1] : INFINITY;
    float low = b == 0 ? -INFINITY : bins.edge[b];
    size_t nt = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t c = slot[i];
        float key = sieve__cpu_cand_key(c);
        if (has_above && key >= up) top[nt++] = c;
        else if (key >= low) slot[m++] = c; /* m <= i: in place */
    }
    sieve__cpu_smallest_u64(slot, m, k - nt, tmp_cap >= m ? tmp : NULL);
    memcpy(top + nt, slot, (size_t)(k - nt) * sizeof *slot);
    sieve__cpu_sort_u64(top, k, tmp_cap >= k ? tmp : NULL);
    return k;
}

void sieve__cpu_emit(const uint64_t *sorted, size_t count, uint32_t k, sieve_metric metric,
                     float qsq, int64_t *out_rows, float *out_scores) {
    for (size_t i = 0; i < count; i++) {
        out_rows[i] = (int64_t)sieve__cpu_cand_row(sorted[i]);
        out_scores[i] = sieve__cpu_report(metric, sieve__cpu_cand_key(sorted[i]), qsq);
    }
    for (size_t i = count; i < k; i++) {
        out_rows[i] = -1;
        out_scores[i] = NAN;
    }
}

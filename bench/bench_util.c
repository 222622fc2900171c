/* bench_util.c: small helpers the sieve-bench modes share (clock, median, list parsing,
 * JSON numbers). Must not: depend on the kernels or the device. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

double bench_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Parses "1k,2.5m,7" with k = kilo and m = kilo^2; with allow_all, "all" gives 0. */
static int parse_list(const char *s, uint64_t *out, int max, int allow_all, uint64_t kilo) {
    int n = 0;
    char *copy = strdup(s), *save = NULL;
    if (!copy) return -1;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (allow_all && !strcmp(t, "all") && n < max) {
            out[n++] = 0;
            continue;
        }
        char *end = NULL;
        errno = 0;
        double v = strtod(t, &end);
        uint64_t mult = 1;
        if (end && (*end == 'k' || *end == 'K')) mult = kilo, end++;
        else if (end && (*end == 'm' || *end == 'M')) mult = kilo * kilo, end++;
        if (errno || !end || *end || v <= 0 || n >= max) {
            free(copy);
            return -1;
        }
        out[n++] = (uint64_t)(v * (double)mult + 0.5);
    }
    free(copy);
    return n;
}

int bench_parse_list_u64_all(const char *s, uint64_t *out, int max, int allow_all) {
    return parse_list(s, out, max, allow_all, 1000);
}

int bench_parse_list_u64(const char *s, uint64_t *out, int max) {
    return bench_parse_list_u64_all(s, out, max, 0);
}

int bench_parse_list_u32(const char *s, uint32_t *out, int max) {
    uint64_t tmp[MAXLIST];
    int n = bench_parse_list_u64(s, tmp, max < MAXLIST ? max : MAXLIST);
    for (int i = 0; i < n; i++) {
        if (tmp[i] > UINT32_MAX) return -1;
        out[i] = (uint32_t)tmp[i];
    }
    return n;
}

const char *bench_jnum(char buf[32], double v) {
    if (isfinite(v)) snprintf(buf, 32, "%.4f", v);
    else snprintf(buf, 32, "null");
    return buf;
}


int bench_parse_sizes_pow2(const char *s, uint32_t *out, int max) {
    uint64_t tmp[MAXLIST];
    int n = parse_list(s, tmp, max < MAXLIST ? max : MAXLIST, 0, 1024);
    for (int i = 0; i < n; i++) {
        if (tmp[i] > UINT32_MAX) return -1;
        out[i] = (uint32_t)tmp[i];
    }
    return n;
}

/* store_test_util.h: helpers shared by the store suites: a fresh temporary data directory per
 * test (removed afterwards), deterministic vectors, and point builders. */
#ifndef STORE_TEST_UTIL_H
#define STORE_TEST_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkdtemp, fork */
#endif

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sieve_store.h"

/* Makes a fresh directory under $TMPDIR (or /tmp) and writes its path into buf. */
static inline void tu_mkdtemp(char *buf, size_t cap) {
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, cap, "%s/sieve-store-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    cr_assert_not_null(mkdtemp(buf), "mkdtemp(%s) failed", buf);
}

/* Removes a data directory (flat: the store keeps only files in it). */
static inline void tu_rmdir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

/* Deterministic pseudo-random value in [-1, 1) for (seed, i). */
static inline float tu_val(uint64_t seed, uint64_t i) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + i * 0xD1B54A32D192ED03ull + 1;
    x ^= x >> 31; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 27; x *= 0x94D049BB133111EBull;
    x ^= x >> 33;
    return (float)((double)(x >> 11) / 4503599627370496.0 - 1.0);
}

static inline void tu_vec(float *v, uint32_t dim, uint64_t seed) {
    for (uint32_t i = 0; i < dim; i++) v[i] = tu_val(seed, i);
}

static inline sieve_point_id tu_num(uint64_t n) {
    sieve_point_id id;
    memset(&id, 0, sizeof id);
    id.kind = SIEVE_ID_NUM;
    id.num = n;
    return id;
}

static inline sieve_point_id tu_uuid(uint64_t n) {
    sieve_point_id id;
    memset(&id, 0, sizeof id);
    id.kind = SIEVE_ID_UUID;
    for (int i = 0; i < 16; i++) id.uuid[i] = (uint8_t)(n >> ((i % 8) * 8)) ^ (uint8_t)(i * 37);
    return id;
}

static inline sieve_collection_config tu_cfg(const char *name, uint32_t dim, sieve_metric m,
                                             sieve_dtype dt, uint32_t rpp) {
    sieve_collection_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "%s", name);
    c.dim = dim;
    c.metric = m;
    c.dtype = dt;
    c.rows_per_page = rpp;
    return c;
}

#endif

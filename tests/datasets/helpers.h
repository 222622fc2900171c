/* helpers.h: shared helpers of the datasets suites: a private temporary directory per test,
 * raw file writers for hand-made (corrupt) inputs, and assertions that print both sides. */
#ifndef SIEVE_TEST_DS_HELPERS_H
#define SIEVE_TEST_DS_HELPERS_H

#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sieve_datasets.h"

static char g_dir[256];

/* Fixture: a fresh directory under $TMPDIR (or /tmp), removed after the test. */
static inline void tmp_setup(void) {
    const char *t = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/sieve-ds-XXXXXX", t && *t ? t : "/tmp");
    cr_assert_not_null(mkdtemp(g_dir), "mkdtemp failed for %s", g_dir);
}

static inline void tmp_teardown(void) {
    DIR *d = opendir(g_dir);
    if (!d) return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(g_dir);
}

/* Path of name inside the test directory (static buffer rotation of 8). */
static inline const char *tpath(const char *name) {
    static char bufs[8][512];
    static int k;
    char *b = bufs[k++ & 7];
    snprintf(b, 512, "%s/%s", g_dir, name);
    return b;
}

static inline void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot create %s", path);
    cr_assert_eq(fwrite(data, 1, n, f), n, "short write to %s", path);
    fclose(f);
}

static inline void write_text(const char *path, const char *text) { write_file(path, text, strlen(text)); }

static inline long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static inline int file_exists(const char *path) { return access(path, F_OK) == 0; }

/* Expects `call` to return `code`; prints the names of both and the error message. */
#define EXPECT_RC(err, code, call)                                                           \
    do {                                                                                     \
        int rc_ = (call);                                                                    \
        cr_assert_eq(rc_, (code), "%s\n  returned %s (%d), expected %s (%d)\n  message: %s", \
                     #call, sieve_errname(rc_), rc_, sieve_errname(code), (int)(code),       \
                     (err).msg);                                                             \
    } while (0)

#define EXPECT_OK(err, call) EXPECT_RC(err, 0, call)

/* Expects the message to contain `sub`. */
#define EXPECT_MSG(err, sub)                                                                 \
    cr_assert_not_null(strstr((err).msg, (sub)), "message \"%s\"\n  does not contain \"%s\"", \
                       (err).msg, (sub))

#define EXPECT_U64(a, b)                                                                     \
    do {                                                                                     \
        unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b);      \
        cr_assert_eq(a_, b_, "%s = %llu, expected %s = %llu", #a, a_, #b, b_);               \
    } while (0)

/* Bitwise float comparison of n values; prints the first mismatch. */
static inline void expect_floats_eq(const float *got, const float *want, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
            cr_assert_fail("%s: element %zu is %.9g, expected %.9g (bitwise)", what, i,
                           (double)got[i], (double)want[i]);
    }
}

/* n x d test matrix with varied, exactly representable values. */
static inline float *test_matrix(size_t n, size_t d, unsigned salt) {
    float *m = malloc(n * d * sizeof(float));
    cr_assert_not_null(m);
    for (size_t i = 0; i < n * d; i++) {
        unsigned h = (unsigned)(i * 2654435761u) ^ (salt * 40503u);
        m[i] = ((float)(h % 20001u) - 10000.0f) / 128.0f; /* multiples of 1/128 in [-78, 78] */
    }
    return m;
}

#endif

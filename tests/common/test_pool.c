/* test_pool.c: the pool's parallel loop calls every item exactly once, from the calling
 * thread and pool threads that wake in time, with every write visible when it returns,
 * whether the threads sleep or spin between loops; its memcpy equals memcpy at every size
 * and alignment, and so do its streaming-store copy and widening. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sieve_error.h"
#include "sieve_pool.h"

Test(pool, rejects_bad_arguments) {
    sieve_pool *p = NULL;
    cr_assert_eq(sieve_pool_create(4, 0, NULL), SIEVE_EINVAL);
    cr_assert_eq(sieve_pool_create(0, 0, &p), SIEVE_EINVAL);
    cr_assert_eq(sieve_pool_create(257, 0, &p), SIEVE_EINVAL);
    cr_assert_eq(sieve_pool_create(2, 1000001, &p), SIEVE_EINVAL);
    cr_assert_null(p);
    cr_assert_eq(sieve_pool_workers(NULL), 1);
    sieve_pool_destroy(NULL);
}

#define MAX_ITEMS 4096
#define MAX_THREADS 32

typedef struct loop_log {
    uint64_t loop;                 /* this loop's number */
    uint32_t calls[MAX_ITEMS];     /* per item: calls (plain writes, checked after the loop) */
    uint64_t stamp[MAX_ITEMS];     /* per item: the loop that last wrote it */
    _Atomic uint32_t n_threads;    /* distinct threads seen in this loop */
    pthread_t threads[MAX_THREADS];
    pthread_mutex_t mu;
    uint32_t sleep_us;             /* per item, to let pool threads join */
} loop_log;

static void note_thread(loop_log *l) {
    pthread_mutex_lock(&l->mu);
    pthread_t me = pthread_self();
    uint32_t n = atomic_load(&l->n_threads), i = 0;
    while (i < n && !pthread_equal(l->threads[i], me)) i++;
    if (i == n && n < MAX_THREADS) {
        l->threads[n] = me;
        atomic_store(&l->n_threads, n + 1);
    }
    pthread_mutex_unlock(&l->mu);
}

static void item(void *ctx, size_t i) {
    loop_log *l = ctx;
    l->calls[i]++;
    l->stamp[i] = l->loop;
    if (l->sleep_us) {
        struct timespec ts = {0, (long)l->sleep_us * 1000};
        nanosleep(&ts, NULL);
        note_thread(l);
    }
}

/* `loops` loops of n_items over a pool of `workers` threads, pausing every pause_every
 * loops long enough for spinning threads to fall asleep. */
static void check_loops(uint32_t workers, uint32_t spin_us, size_t n_items, uint64_t loops,
                        int pause_every) {
    sieve_pool *p = NULL;
    cr_assert_eq(sieve_pool_create(workers, spin_us, &p), 0);
    cr_assert_not_null(p);
    cr_assert_eq(sieve_pool_workers(p), workers, "pool started %u of %u threads",
                 sieve_pool_workers(p), workers);
    loop_log *l = calloc(1, sizeof *l);
    cr_assert_not_null(l);
    pthread_mutex_init(&l->mu, NULL);
    for (uint64_t r = 1; r <= loops; r++) {
        l->loop = r;
        sieve_pool_for(p, n_items, item, l);
        for (size_t i = 0; i < n_items; i++) {
            cr_assert_eq(l->calls[i], r, "loop %llu: item %zu called %u times",
                         (unsigned long long)r, i, l->calls[i]);
            cr_assert_eq(l->stamp[i], r, "loop %llu: item %zu's write not visible",
                         (unsigned long long)r, i);
        }
        for (size_t i = n_items; i < MAX_ITEMS; i++) cr_assert_eq(l->calls[i], 0);
        if (pause_every && r % (uint64_t)pause_every == 0) {
            struct timespec ts = {0, 3 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    pthread_mutex_destroy(&l->mu);
    free(l);
    sieve_pool_destroy(p);
}

Test(pool, every_item_once_sleeping) { check_loops(4, 0, 1000, 500, 0); }
Test(pool, every_item_once_spinning) { check_loops(3, 500, 1000, 500, 0); }
Test(pool, threads_fall_asleep_and_wake) { check_loops(4, 200, 300, 60, 5); }
Test(pool, few_items_and_one_item) {
    check_loops(4, 0, 2, 300, 0);
    check_loops(4, 100, 1, 300, 0);
}
Test(pool, one_thread) { check_loops(1, 0, 100, 10, 0); }
Test(pool, many_threads) { check_loops(16, 50, 4096, 100, 0); }

Test(pool, sleeping_threads_join_a_long_loop) {
    /* 40 items of 5 ms: 200 ms on the calling thread alone, time enough for the sleeping
       threads to wake and take some; the caller takes part too */
    sieve_pool *p = NULL;
    cr_assert_eq(sieve_pool_create(4, 0, &p), 0);
    loop_log *l = calloc(1, sizeof *l);
    cr_assert_not_null(l);
    pthread_mutex_init(&l->mu, NULL);
    l->loop = 1;
    l->sleep_us = 5000;
    sieve_pool_for(p, 40, item, l);
    for (size_t i = 0; i < 40; i++) cr_assert_eq(l->calls[i], 1);
    uint32_t n = atomic_load(&l->n_threads);
    cr_assert_geq(n, 2, "only %u thread(s) ran the items", n);
    cr_assert_leq(n, 4);
    int caller = 0;
    for (uint32_t i = 0; i < n; i++) caller |= pthread_equal(l->threads[i], pthread_self());
    cr_assert(caller, "the calling thread takes items too");
    pthread_mutex_destroy(&l->mu);
    free(l);
    sieve_pool_destroy(p);
}

Test(pool, no_items_and_no_pool) {
    loop_log *l = calloc(1, sizeof *l);
    cr_assert_not_null(l);
    sieve_pool *p = NULL;
    cr_assert_eq(sieve_pool_create(3, 0, &p), 0);
    sieve_pool_for(p, 0, item, l);
    for (size_t i = 0; i < MAX_ITEMS; i++) cr_assert_eq(l->calls[i], 0);
    l->loop = 7;
    sieve_pool_for(NULL, 50, item, l); /* no pool: the calling thread */
    for (size_t i = 0; i < 50; i++) cr_assert(l->calls[i] == 1 && l->stamp[i] == 7);
    sieve_pool_destroy(p);
    free(l);
}

Test(pool, destroy_without_a_loop) {
    for (uint32_t spin = 0; spin <= 1000; spin += 1000) {
        sieve_pool *p = NULL;
        cr_assert_eq(sieve_pool_create(8, spin, &p), 0);
        cr_assert_eq(sieve_pool_workers(p), 8);
        sieve_pool_destroy(p);
    }
}

/* n pseudo-random bytes (an LCG from seed); the caller frees them. */
static unsigned char *random_bytes(size_t n, uint32_t seed) {
    unsigned char *b = malloc(n);
    cr_assert_not_null(b);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        b[i] = (unsigned char)(seed >> 24);
    }
    return b;
}

/* dst + doff holds the n bytes of src + soff, and the guard bytes around them (0xA5) are
 * untouched: the doff bytes before and up to `after` past the end (within maxn). */
static void assert_copied(const unsigned char *dst, const unsigned char *src, size_t maxn,
                          size_t doff, size_t soff, size_t n, size_t after, const char *what) {
    cr_assert_eq(memcmp(dst + doff, src + soff, n), 0,
                 "%s: %zu bytes (target +%zu, source +%zu) differ", what, n, doff, soff);
    for (size_t i = 0; i < doff; i++) cr_assert_eq(dst[i], 0xA5, "%s: before the start", what);
    for (size_t i = doff + n; i < doff + n + after && i < maxn; i++)
        cr_assert_eq(dst[i], 0xA5, "%s: %zu bytes: byte %zu past the end written", what, n,
                     i - doff - n);
}

Test(pool, memcpy_equals_memcpy) {
    const size_t P = SIEVE_POOL_PIECE;
    const size_t A = SIEVE_POOL_ALONE_MAX;
    const size_t sizes[] = {0, 1, 63, A, A + 1, A + P - 1, A + P, 1000003, 5u << 20};
    const size_t maxn = (5u << 20) + 64;
    unsigned char *src = random_bytes(maxn, 12345), *dst = malloc(maxn);
    cr_assert_not_null(dst);
    for (uint32_t workers = 1; workers <= 7; workers += 3) {
        sieve_pool *p = NULL;
        cr_assert_eq(sieve_pool_create(workers, 100, &p), 0);
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (size_t off = 0; off <= 3; off += 3) { /* unaligned source and target too */
                const size_t n = sizes[s];
                memset(dst, 0xA5, maxn);
                sieve_pool_memcpy(p, dst + off, src + off, n);
                char what[32];
                snprintf(what, sizeof what, "%u threads", workers);
                assert_copied(dst, src, maxn, off, off, n, 64, what);
            }
        sieve_pool_destroy(p);
    }
    memset(dst, 0, maxn);
    sieve_pool_memcpy(NULL, dst, src, 1000003);
    cr_assert_eq(memcmp(dst, src, 1000003), 0);
    free(src);
    free(dst);
}

/* A vectored copy (one loop over the pieces of all copies) writes each copy's bytes and
 * nothing between them: copies of 0 bytes, less than a piece, exact pieces and many pieces,
 * more copies than one loop takes (in groups), in one buffer with a 64-byte guard gap after
 * each target, at 1, 4 and 7 threads and without a pool; the copies' sum both under and
 * over what goes to the calling thread alone (SIEVE_POOL_ALONE_MAX). */
Test(pool, memcpyv_equals_memcpy) {
    const size_t P = SIEVE_POOL_PIECE;
    const size_t sets[][11] = {
        {3, 100, 0, 7},                            /* small: the calling thread */
        {3, 8 * P, 4 * P, 5},                      /* results: rows, scores, counts */
        {3, 8 * P + 1, 0, 2 * P - 1},              /* pieces across uneven copies */
        {10, 1, P, 0, 3 * P + 17, 2, P - 3, 0, 5 * P, 64, 2 * P}, /* two groups */
    };
    for (uint32_t workers = 0; workers <= 7; workers += workers ? 3 : 1) {
        sieve_pool *p = NULL;
        if (workers) cr_assert_eq(sieve_pool_create(workers, 100, &p), 0);
        for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++) {
            const size_t nc = sets[si][0];
            const size_t *n = &sets[si][1];
            size_t total = 0;
            for (size_t c = 0; c < nc; c++) total += n[c] + 64;
            unsigned char *src = random_bytes(total, 99 + si), *dst = malloc(total);
            cr_assert_not_null(dst);
            memset(dst, 0xA5, total);
            sieve_pool_copy cp[10];
            size_t off = 0;
            for (size_t c = 0; c < nc; c++) {
                cp[c] = (sieve_pool_copy){dst + off + 3, src + off, n[c]}; /* target +3 */
                off += n[c] + 64;
            }
            sieve_pool_memcpyv(p, cp, nc);
            off = 0;
            for (size_t c = 0; c < nc; c++) {
                char what[64];
                snprintf(what, sizeof what, "%u threads, set %zu, copy %zu", workers, si, c);
                cr_assert_eq(memcmp(dst + off + 3, src + off, n[c]), 0, "%s: bytes differ", what);
                for (size_t i = 0; i < 3; i++)
                    cr_assert_eq(dst[off + i], 0xA5, "%s: written before the target", what);
                for (size_t i = off + 3 + n[c]; i < off + n[c] + 64; i++)
                    cr_assert_eq(dst[i], 0xA5, "%s: written past the target", what);
                off += n[c] + 64;
            }
            free(src);
            free(dst);
        }
        sieve_pool_destroy(p);
    }
}

/* The streaming-store copy equals memcpy at every size and at every alignment of source and
 * target (its head, 16-byte body and tail), and writes nothing outside the target. */
Test(pool, copy_stream_equals_memcpy) {
    const size_t sizes[] = {0, 1, 15, 16, 17, 31, 48, 1000, 65537, (1u << 20) + 5};
    const size_t maxn = (1u << 20) + 64;
    unsigned char *src = random_bytes(maxn, 777), *dst = malloc(maxn);
    cr_assert_not_null(dst);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t doff = 0; doff < 16; doff += 5)
            for (size_t soff = 0; soff < 16; soff += 7) {
                const size_t n = sizes[s];
                memset(dst, 0xA5, maxn);
                sieve_copy_stream(dst + doff, src + soff, n);
                assert_copied(dst, src, maxn, doff, soff, n, 32, "streaming copy");
            }
    free(src);
    free(dst);
}

/* Widening with streaming stores: every value sign-extended (the padding row -1, the
 * largest rows, zero) at every count and at targets on and off a 16-byte boundary; nothing
 * written past the end. */
Test(pool, widen_i32_stream_sign_extends) {
    const size_t maxn = 300007;
    int32_t *src = (int32_t *)random_bytes(maxn * 4, 4242); /* every sign and magnitude */
    int64_t *buf = malloc((maxn + 8) * 8);
    cr_assert_not_null(buf);
    src[0] = -1;
    src[1] = INT32_MAX;
    src[2] = INT32_MIN;
    src[3] = 0;
    src[maxn - 1] = -1;
    const size_t counts[] = {0, 1, 2, 3, 4, 5, 1000, 65536, maxn};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
        for (size_t off = 0; off <= 1; off++) { /* target 16-byte aligned or 8 past it */
            const size_t n = counts[c];
            int64_t *dst = buf + off;
            for (size_t i = 0; i < maxn + 8; i++) buf[i] = 0x5a5a5a5a5a5a5a5all;
            sieve_widen_i32_stream(dst, src, n);
            for (size_t i = 0; i < n; i++)
                cr_assert_eq(dst[i], (int64_t)src[i], "n=%zu off=%zu i=%zu: %lld vs %d", n, off,
                             i, (long long)dst[i], src[i]);
            for (size_t i = n; i < n + 4; i++)
                cr_assert_eq(dst[i], 0x5a5a5a5a5a5a5a5all, "n=%zu: past the end written", n);
            if (off) cr_assert_eq(buf[0], 0x5a5a5a5a5a5a5a5all, "before the start written");
        }
    free(src);
    free(buf);
}

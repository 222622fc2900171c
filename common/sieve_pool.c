/* sieve_pool.c: threads kept alive between parallel loops (see sieve_pool.h).
 * Owns: the threads and the hand-off of a loop (a generation counter that wakes them, a
 * state word that says whether the loop is open and how many threads are in it, one mutex
 * and two condition variables). Must not: run two loops at once or keep global state. */
#define _POSIX_C_SOURCE 200809L
#include "sieve_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "sieve_error.h"

#define POOL_MAX_WORKERS 256u
#define POOL_MAX_SPIN_US 1000000u
#define POOL_OPEN ((uint64_t)1 << 63) /* state: the loop takes new threads */

struct sieve_pool {
    pthread_mutex_t mu;
    pthread_cond_t wake; /* pool threads sleep on it between loops */
    pthread_cond_t done; /* the caller sleeps on it for the threads still in a loop */
    _Atomic uint64_t gen;   /* one more for every loop (moved under mu) */
    _Atomic uint64_t state; /* POOL_OPEN while items may be left | threads in the loop */
    _Atomic size_t next;    /* the next unclaimed item */
    _Atomic int quit;
    uint32_t sleepers; /* threads waiting on `wake` (under mu) */
    uint32_t spin_us;
    uint32_t workers; /* 1 + started threads */
    /* the current loop: written before state opens, read only by threads that entered */
    size_t n_items;
    sieve_pool_item_fn fn;
    void *ctx;
    pthread_t *tids;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static uint64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Claims and runs items until none are left. */
static void drain(sieve_pool *p) {
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (i >= p->n_items) return;
        p->fn(p->ctx, i);
    }
}

/* A pool thread: waits for a new generation (polling spin_us, then sleeping), enters the
 * loop if it is still open, drains it, leaves. */
static void *pool_main(void *arg) {
    sieve_pool *p = arg;
    uint64_t seen = 0;
    for (;;) {
        int moved = 0;
        if (p->spin_us) {
            const uint64_t end = now_us() + p->spin_us;
            for (uint32_t i = 1;; i++) {
                if (atomic_load_explicit(&p->gen, memory_order_acquire) != seen ||
                    atomic_load_explicit(&p->quit, memory_order_relaxed)) {
                    moved = 1;
                    break;
                }
                cpu_relax();
                if ((i & 63u) == 0 && now_us() >= end) break;
            }
        }
        if (!moved) {
            pthread_mutex_lock(&p->mu);
            p->sleepers++;
            while (atomic_load_explicit(&p->gen, memory_order_acquire) == seen &&
                   !atomic_load_explicit(&p->quit, memory_order_relaxed))
                pthread_cond_wait(&p->wake, &p->mu);
            p->sleepers--;
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load_explicit(&p->quit, memory_order_acquire)) return NULL;
        seen = atomic_load_explicit(&p->gen, memory_order_acquire);
        /* enter only while the loop is open: once the caller closes it, it waits for the
           threads inside and then may reuse everything the loop points to */
        uint64_t st = atomic_load_explicit(&p->state, memory_order_acquire);
        int entered = 0;
        while (st & POOL_OPEN) {
            if (atomic_compare_exchange_weak_explicit(&p->state, &st, st + 1,
                                                      memory_order_acq_rel,
                                                      memory_order_acquire)) {
                entered = 1;
                break;
            }
        }
        if (!entered) continue;
        drain(p);
        st = atomic_fetch_sub_explicit(&p->state, 1, memory_order_acq_rel) - 1;
        if (st == 0) { /* closed, and the last one out: the caller may be asleep */
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

int sieve_pool_create(uint32_t workers, uint32_t spin_us, sieve_pool **out) {
    if (!out || !workers || workers > POOL_MAX_WORKERS || spin_us > POOL_MAX_SPIN_US)
        return SIEVE_EINVAL;
    *out = NULL;
    sieve_pool *p = calloc(1, sizeof *p);
    if (!p) return SIEVE_ENOMEM;
    p->tids = calloc(workers, sizeof *p->tids);
    int have_mu = 0, have_wake = 0, have_done = 0;
    if (p->tids) have_mu = pthread_mutex_init(&p->mu, NULL) == 0;
    if (have_mu) have_wake = pthread_cond_init(&p->wake, NULL) == 0;
    if (have_wake) have_done = pthread_cond_init(&p->done, NULL) == 0;
    if (!have_done) {
        if (have_wake) pthread_cond_destroy(&p->wake);
        if (have_mu) pthread_mutex_destroy(&p->mu);
        free(p->tids);
        free(p);
        return SIEVE_ENOMEM;
    }
    atomic_init(&p->gen, 0);
    atomic_init(&p->state, 0);
    atomic_init(&p->next, 0);
    atomic_init(&p->quit, 0);
    p->spin_us = spin_us;
    p->workers = 1;
    while (p->workers < workers) {
        if (pthread_create(&p->tids[p->workers - 1], NULL, pool_main, p)) break; /* slower only */
        p->workers++;
    }
    *out = p;
    return 0;
}

uint32_t sieve_pool_workers(const sieve_pool *p) { return p ? p->workers : 1; }

void sieve_pool_for(sieve_pool *p, size_t n_items, sieve_pool_item_fn fn, void *ctx) {
    if (!n_items) return;
    if (!p || p->workers == 1 || n_items == 1) {
        for (size_t i = 0; i < n_items; i++) fn(ctx, i);
        return;
    }
    p->n_items = n_items;
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_store_explicit(&p->state, POOL_OPEN, memory_order_release);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_acq_rel);
    const int wake = p->sleepers > 0;
    pthread_mutex_unlock(&p->mu);
    if (wake) pthread_cond_broadcast(&p->wake);
    drain(p);
    /* close: no thread enters from now on; wait for those inside (each still finishing the
       item it claimed). The last one out signals `done` under mu, and the count is checked
       under mu, so the signal cannot be missed. */
    if (atomic_fetch_and_explicit(&p->state, ~POOL_OPEN, memory_order_acq_rel) == POOL_OPEN)
        return;
    if (p->spin_us) {
        const uint64_t end = now_us() + p->spin_us;
        for (uint32_t i = 1; atomic_load_explicit(&p->state, memory_order_acquire); i++) {
            cpu_relax();
            if ((i & 63u) == 0 && now_us() >= end) break;
        }
    }
    pthread_mutex_lock(&p->mu);
    while (atomic_load_explicit(&p->state, memory_order_acquire))
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

/* Copies one sieve_pool_memcpyv loop takes at most. */
#define COPY_MAX 8

/* The pieces of a sieve_pool_memcpyv loop: copy c's pieces are first[c] .. first[c + 1] - 1. */
typedef struct copy_job {
    const sieve_pool_copy *c;
    size_t n;
    size_t first[COPY_MAX + 1];
} copy_job;

static void copy_piece(void *ctx, size_t i) {
    const copy_job *j = ctx;
    size_t c = 0;
    while (i >= j->first[c + 1]) c++;
    const size_t off = (i - j->first[c]) * SIEVE_POOL_PIECE;
    const size_t left = j->c[c].n - off;
    memcpy((unsigned char *)j->c[c].dst + off, (const unsigned char *)j->c[c].src + off,
           left < SIEVE_POOL_PIECE ? left : SIEVE_POOL_PIECE);
}

void sieve_pool_memcpyv(sieve_pool *p, const sieve_pool_copy *copies, size_t n_copies) {
    size_t bytes = 0;
    for (size_t c = 0; c < n_copies; c++) bytes += copies[c].n;
    if (!p || p->workers == 1 || bytes <= SIEVE_POOL_ALONE_MAX) {
        for (size_t c = 0; c < n_copies; c++)
            if (copies[c].n) memcpy(copies[c].dst, copies[c].src, copies[c].n);
        return;
    }
    /* more copies than one job holds: in groups (each group one loop) */
    for (size_t c0 = 0; c0 < n_copies; c0 += COPY_MAX) {
        copy_job j;
        j.c = copies + c0;
        j.n = n_copies - c0 < COPY_MAX ? n_copies - c0 : COPY_MAX;
        j.first[0] = 0;
        for (size_t c = 0; c < j.n; c++)
            j.first[c + 1] = j.first[c] + (j.c[c].n + SIEVE_POOL_PIECE - 1) / SIEVE_POOL_PIECE;
        sieve_pool_for(p, j.first[j.n], copy_piece, &j);
    }
}

void sieve_pool_memcpy(sieve_pool *p, void *dst, const void *src, size_t n) {
    const sieve_pool_copy c = {dst, src, n};
    sieve_pool_memcpyv(p, &c, 1);
}

void sieve_copy_stream(void *dst, const void *src, size_t n) {
    unsigned char *d = dst;
    const unsigned char *s = src;
#if defined(__x86_64__) && defined(__SSE2__)
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    if (head > n) head = n;
    memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    size_t n16 = n / 16;
    __m128i *dv = (__m128i *)d;
    for (size_t i = 0; i < n16; i++)
        _mm_stream_si128(dv + i, _mm_loadu_si128((const __m128i *)(s + 16 * i)));
    _mm_sfence();
    d += 16 * n16;
    s += 16 * n16;
    n -= 16 * n16;
#endif
    if (n) memcpy(d, s, n);
}

void sieve_widen_i32_stream(int64_t *dst, const int32_t *src, size_t n) {
    size_t i = 0;
#if defined(__x86_64__) && defined(__SSE2__)
    for (; i < n && ((uintptr_t)(dst + i) & 15); i++) dst[i] = src[i];
    for (; i + 2 <= n; i += 2) {
        const __m128i v = _mm_loadl_epi64((const __m128i *)(src + i)); /* two int32 */
        const __m128i sign = _mm_srai_epi32(v, 31);
        _mm_stream_si128((__m128i *)(dst + i), _mm_unpacklo_epi32(v, sign));
    }
    _mm_sfence();
#endif
    for (; i < n; i++) dst[i] = src[i];
}

void sieve_pool_destroy(sieve_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store_explicit(&p->quit, 1, memory_order_release);
    pthread_mutex_unlock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    for (uint32_t i = 0; i + 1 < p->workers; i++) pthread_join(p->tids[i], NULL);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    free(p->tids);
    free(p);
}

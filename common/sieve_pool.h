/* sieve_pool.h: a small pool of worker threads kept alive between parallel loops.
 *
 * Owns: its threads, the hand-off of one parallel loop at a time to them, and a parallel
 * memcpy built on it. Must not: know what the work is (the caller's function does), or be
 * used by two threads at the same time (the owner serialises loops).
 *
 * Why: starting threads for each large host copy costs tens of microseconds per thread,
 * as much as the copy they share; threads kept alive cost a wake-up, and since the caller
 * starts on the work at once and sleeping threads join as they wake, a loop costs at most
 * the wake call and the rest of the last item a pool thread claimed more than the calling
 * thread alone.
 */
#ifndef SIEVE_POOL_H
#define SIEVE_POOL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sieve_pool sieve_pool;

/* One item of a parallel loop. */
typedef void (*sieve_pool_item_fn)(void *ctx, size_t item);

/* Starts a pool of `workers` workers: the thread that calls sieve_pool_for and
 * workers - 1 threads started here. After a loop an idle thread polls for the next one for
 * spin_us microseconds, then sleeps on a condition variable (0: at once). When a thread
 * fails to start, the pool keeps the threads it has (sieve_pool_workers).
 * *out is owned by the caller: free it with sieve_pool_destroy.
 * Errors: SIEVE_EINVAL (out NULL, workers 0 or above 256, spin_us above 1,000,000),
 * SIEVE_ENOMEM. */
int sieve_pool_create(uint32_t workers, uint32_t spin_us, sieve_pool **out);

/* The number of threads a loop may use (at least 1). */
uint32_t sieve_pool_workers(const sieve_pool *p);

/* Calls fn(ctx, i) once for every i in 0..n_items-1 and returns when all calls have
 * returned (their writes visible to the caller). Items are claimed in ascending order, one
 * at a time, by the calling thread and by every pool thread that wakes while items are
 * left, so a loop never waits for a thread to wake: a thread that wakes after the last
 * item was claimed does not join. Sleeping threads are woken with one broadcast (polling
 * ones join as they see the loop). p NULL: every item on the calling thread.
 * One loop at a time per pool: fn must not start a loop on the same pool. */
void sieve_pool_for(sieve_pool *p, size_t n_items, sieve_pool_item_fn fn, void *ctx);

/* One copy of sieve_pool_memcpyv: n bytes from src to dst (not overlapping). */
typedef struct sieve_pool_copy {
    void *dst;
    const void *src;
    size_t n;
} sieve_pool_copy;
/* Every copy of `copies` as one loop over pieces of SIEVE_POOL_PIECE bytes (sieve_pool_for:
 * the pieces of all copies, in order, claimed by whichever thread is free), or each copy by
 * memcpy on the calling thread when p is NULL or the copies hold at most
 * SIEVE_POOL_ALONE_MAX bytes in all (waking the pool's threads for less cost more than
 * they saved: on the H200 machine's host, the upload of 64-128 queries, 196-393 KiB, was
 * 2-5% of a 0.5 ms search slower on the pool). Copies must not overlap one another. */
#define SIEVE_POOL_PIECE ((size_t)64 << 10)
#define SIEVE_POOL_ALONE_MAX ((size_t)512 << 10)
void sieve_pool_memcpyv(sieve_pool *p, const sieve_pool_copy *copies, size_t n_copies);
/* sieve_pool_memcpyv of the one copy {dst, src, n}. */
void sieve_pool_memcpy(sieve_pool *p, void *dst, const void *src, size_t n);

/* memcpy(dst, src, n) with non-temporal (streaming) stores where the CPU has them (x86-64
 * SSE2; memcpy elsewhere): the destination's lines are written without being read first
 * and without displacing the cache, for copies far larger than the cache whose
 * destination is not read again soon. dst and src must not overlap. */
void sieve_copy_stream(void *dst, const void *src, size_t n);

/* dst[i] = src[i] (sign-extended) for i < n, with streaming stores as sieve_copy_stream. */
void sieve_widen_i32_stream(int64_t *dst, const int32_t *src, size_t n);

/* Stops and joins the workers and frees the pool; NULL is allowed. */
void sieve_pool_destroy(sieve_pool *p);

#ifdef __cplusplus
}
#endif
#endif

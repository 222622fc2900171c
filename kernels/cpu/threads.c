/* threads.c: the CPU backend's worker runner and its BLAS threading policy.
 * Owns: starting and joining the worker threads of one parallel phase, pinning OpenBLAS to
 * one thread. Must not: hold state between calls (no pool, no globals of its own). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>

#include <cblas.h>

#include "cpu_internal.h"

typedef struct worker_arg {
    sieve__cpu_task_fn fn;
    void *ctx;
    uint32_t worker;
} worker_arg;

static void *worker_main(void *p) {
    worker_arg *a = p;
    a->fn(a->ctx, a->worker);
    return NULL;
}

void sieve__cpu_run(uint32_t workers, sieve__cpu_task_fn fn, void *ctx) {
    if (workers <= 1) {
        fn(ctx, 0);
        return;
    }
    pthread_t *tid = malloc((size_t)(workers - 1) * sizeof *tid);
    worker_arg *args = malloc((size_t)(workers - 1) * sizeof *args);
    uint32_t started = 0;
    if (tid && args) {
        for (uint32_t w = 1; w < workers; w++) {
            args[started] = (worker_arg){fn, ctx, w};
            if (pthread_create(&tid[started], NULL, worker_main, &args[started])) break;
            started++;
        }
    }
    /* Work is claimed dynamically, so fewer started threads only cost speed. */
    fn(ctx, 0);
    for (uint32_t i = 0; i < started; i++) pthread_join(tid[i], NULL);
    free(tid);
    free(args);
}

void sieve__cpu_blas_single_thread(void) {
    /* Process-wide: OpenBLAS keeps its thread count in library state. Searches parallelise
     * over tiles themselves, so every sgemm runs on its caller's thread and its result
     * cannot depend on how OpenBLAS would split it. */
    openblas_set_num_threads(1);
}

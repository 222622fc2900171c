/* threads.c: the CPU backend's worker runner and its BLAS threading policy.
 * Owns: starting and joining the worker threads of one parallel phase, pinning OpenBLAS to
 * one thread. Must not: hold state between calls (no pool, no globals of its own). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

char *openblas_get_corename(void);

void sieve_cpu_blas_fixup(char **argv) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (!argv || !argv[0] || getenv("OPENBLAS_CORETYPE")) return;
    const char *core = openblas_get_corename();
    /* OpenBLAS names its generic x86-64 fallbacks after old cores */
    static const char *const generic[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem",
                                          "Atom", "Katmai", "Coppermine", "Northwood", "Banias"};
    int fallback = 0;
    for (size_t i = 0; core && i < sizeof generic / sizeof generic[0]; i++)
        if (!strcmp(core, generic[i])) fallback = 1;
    if (!fallback) return;
    __builtin_cpu_init();
    const char *want = NULL;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
        want = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        want = "Haswell";
    if (!want || setenv("OPENBLAS_CORETYPE", want, 1)) return;
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE"); /* exec failed: carry on with the generic kernels */
#else
    (void)argv;
#endif
}

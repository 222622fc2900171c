/* bench_attn_opts.h: the options sieve-bench's `attention sparse`, `attention dense` and
 * `attention prefill` modes share (bench/ only, not installed). */
#ifndef SIEVE_BENCH_ATTN_OPTS_H
#define SIEVE_BENCH_ATTN_OPTS_H

#include <stdint.h>

#include "sieve_kernels.h"

typedef struct bench_attn_opts {
    const char *device;                           /* --device */
    sieve_dtype dtype;                            /* --dtype */
    uint32_t q_heads, kv_heads, head_dim, v_dim;  /* --q-heads, --kv-heads, --head-dim, --v-dim */
    int repeat, warmup, check_tokens;             /* --repeat, --warmup, --check-tokens */
    uint64_t seed;                                /* --seed */
    const char *json;                             /* --json (NULL: none) */
} bench_attn_opts;

/* Applies option a with its value v (not NULL) to c. Returns 1 where a is one of these
 * options and v a good value, 0 where a is not one of them (c untouched), -1 for a bad
 * value. Does not keep v's storage beyond what c points to (device and json point into it). */
int bench_attn_opt(bench_attn_opts *c, const char *a, const char *v);

#endif

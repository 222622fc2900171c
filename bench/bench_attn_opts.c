/* bench_attn_opts.c: parsing of the options the attention bench modes share
 * (bench_attn_opts.h). Must not: print, exit or know a mode's own options. */
#include "bench_attn_opts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int bench_attn_opt(bench_attn_opts *c, const char *a, const char *v) {
    char *end = NULL;
    errno = 0;
    uint32_t *u32 = NULL;
    int *i32 = NULL, min = 0;
    if (!strcmp(a, "--q-heads")) u32 = &c->q_heads;
    else if (!strcmp(a, "--kv-heads")) u32 = &c->kv_heads;
    else if (!strcmp(a, "--head-dim")) u32 = &c->head_dim;
    else if (!strcmp(a, "--v-dim")) u32 = &c->v_dim;
    else if (!strcmp(a, "--repeat")) i32 = &c->repeat, min = 1;
    else if (!strcmp(a, "--warmup")) i32 = &c->warmup;
    else if (!strcmp(a, "--check-tokens")) i32 = &c->check_tokens;
    if (u32) {
        const unsigned long x = strtoul(v, &end, 10);
        if (*end || !x || *v == '-' || errno || x > UINT32_MAX) return -1;
        *u32 = (uint32_t)x;
        return 1;
    }
    if (i32) {
        const long x = strtol(v, &end, 10);
        if (*end || x < min || errno || x > 1000000000L) return -1;
        *i32 = (int)x;
        return 1;
    }
    if (!strcmp(a, "--device")) {
        c->device = v;
        return 1;
    }
    if (!strcmp(a, "--dtype")) return sieve_dtype_parse(v, &c->dtype) ? -1 : 1;
    if (!strcmp(a, "--seed")) {
        const unsigned long long x = strtoull(v, &end, 10);
        if (*end || errno) return -1;
        c->seed = x;
        return 1;
    }
    if (!strcmp(a, "--json")) {
        c->json = v;
        return 1;
    }
    return 0;
}

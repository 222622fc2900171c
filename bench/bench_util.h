/* bench_util.h: what sieve-bench's mode files share (bench/ only, not installed). */
#ifndef SIEVE_BENCH_UTIL_H
#define SIEVE_BENCH_UTIL_H

#include <stdint.h>

#define MAXLIST 32

/* Monotonic wall clock in milliseconds. */
double bench_now_ms(void);
/* Median of v[0 .. n) (sorts v in place). */
double bench_median(double *v, int n);
/* Parses "1k,2.5m,7" (k = 1000, m = 1000000) into out (at most max); with allow_all, "all"
 * gives 0. Returns the count, or -1 for a malformed or non-positive entry. */
int bench_parse_list_u64_all(const char *s, uint64_t *out, int max, int allow_all);
int bench_parse_list_u64(const char *s, uint64_t *out, int max);
int bench_parse_list_u32(const char *s, uint32_t *out, int max);
/* As bench_parse_list_u32 with k = 1024 and m = 1048576 (the attention mode's sizes). */
int bench_parse_sizes_pow2(const char *s, uint32_t *out, int max);
/* v with four decimals, or "null" when not finite, written into buf. */
const char *bench_jnum(char buf[32], double v);

/* The `attention` mode (bench_attention.c): argv after the mode name. Exit status. */
int sieve_bench_attention(int argc, char **argv);
/* `attention sparse` (bench_sparse_attn.c): argv after "sparse". Exit status. */
int sieve_bench_sparse_attention(int argc, char **argv);
/* `attention dense` (bench_dense_attn.c): argv after "dense". Exit status. */
int sieve_bench_dense_attention(int argc, char **argv);
/* `attention prefill` (bench_bsp.c): argv after "prefill". Exit status. */
int sieve_bench_prefill_attention(int argc, char **argv);

#endif

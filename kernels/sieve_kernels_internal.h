/* sieve_kernels_internal.h: shared between the kernel module's own files, never installed
 * or included outside kernels/ (and tests/kernels for white-box checks).
 *
 * Owns: the sieve_device struct layout, the CPU and CUDA backend entry points that the
 * dispatch in device.c / search.c calls. Must not: include CUDA headers.
 */
#ifndef SIEVE_KERNELS_INTERNAL_H
#define SIEVE_KERNELS_INTERNAL_H

#include <math.h>
#include <stdint.h>

#include "sieve_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sieve_device {
    sieve_device_kind kind;
    int ordinal;        /* CUDA ordinal, -1 on the CPU */
    uint32_t threads;   /* CPU worker threads */
    void *cuda;         /* backend context (struct sieve__cuda_ctx), NULL on the CPU */
};

/* Monotonic wall clock in milliseconds. */
double sieve__now_ms(void);

/* Largest chance of an underfill the proposal accepts per query (see sieve__boundary_rank):
 * a batch of 1,024 queries rescans the collection for one of them about once in 100
 * batches, a batch of 64 once in 1,600. */
#define SIEVE__UNDERFILL_P 1e-5

/* The sample rank (0: the sample's largest key) of the proposed boundary of a query that
 * expects r of its sampled rows among its k best (r = k S_e / N_e: S_e of N_e eligible rows
 * sampled). Fewer than k eligible rows reach the sample key of rank j (an underfill: a
 * second scan for that query, which for a memory-bound batch doubles its time) only when
 * more than j sampled rows lie above the k-th best row; their number is binomial (k - 1
 * rows, each sampled with chance S_e / N_e), and the Poisson distribution of mean r bounds
 * its upper tail. Returns the larger of floor(1.25 r + 3 sqrt(r) + 2), the rule before, and
 * the smallest j whose bound on P(Poisson(r) > j) is at most SIEVE__UNDERFILL_P; 0 for
 * r <= 0. The rule before let 1 query in 2,700 to 10,000 underfill where r is 0.5 to 8
 * (k = 32 to 500 at 16,384 sampled rows of 1M); above r = 30 it is the stricter of the two
 * and stays: the Poisson rank alone admitted 3-11% fewer rows at k = 8192-16384 without a
 * measurable gain (bench/KERNEL_NOTES.md, v30). */
uint64_t sieve__boundary_rank(double r);

/* Checks the arguments every search entry shares. 0 or SIEVE_EINVAL. */
int sieve__check_search_args(const sieve_matrix *m, const float *queries, uint32_t n_queries,
                             const sieve_search_params *p, const int64_t *out_rows,
                             const float *out_scores);

/* ---- CPU backend (kernels/cpu) */
int sieve__cpu_knn_scratch_size(const sieve_device *dev, const sieve_matrix *m,
                                uint32_t n_queries, const sieve_search_params *p,
                                size_t *bytes);
int sieve__cpu_knn(const sieve_device *dev, const sieve_matrix *m, const float *queries,
                   uint32_t n_queries, const sieve_search_params *p, void *scratch,
                   size_t scratch_bytes, int64_t *out_rows, float *out_scores,
                   uint32_t *out_counts, uint8_t *out_paths, sieve_search_stats *stats);
int sieve__cpu_knn_materialized(const sieve_device *dev, const sieve_matrix *m,
                                const float *queries, uint32_t n_queries,
                                const sieve_search_params *p, int64_t *out_rows,
                                float *out_scores, uint32_t *out_counts,
                                sieve_search_stats *stats);

/* ---- CUDA backend (kernels/cuda, or kernels/cuda_stub.c when built without CUDA).
 * Every function returns SIEVE_ENODEV from the stub. */
int sieve__cuda_device_count(void);
int sieve__cuda_open(int ordinal, void **ctx);
void sieve__cuda_close(void *ctx);
int sieve__cuda_info(void *ctx, sieve_device_info *info);
int sieve__cuda_alloc(void *ctx, size_t bytes, void **out);
void sieve__cuda_free(void *ctx, void *ptr);
int sieve__cuda_copy(void *ctx, void *dst, const void *src, size_t bytes, int kind, int async);
int sieve__cuda_sync(void *ctx);
int sieve__cuda_host_alloc(void *ctx, size_t bytes, void **out);
void sieve__cuda_host_free(void *ctx, void *ptr);
int sieve__cuda_knn_scratch_size(void *ctx, const sieve_matrix *m, uint32_t n_queries,
                                 const sieve_search_params *p, size_t *bytes);
int sieve__cuda_knn(void *ctx, const sieve_matrix *m, const float *queries,
                    uint32_t n_queries, const sieve_search_params *p, void *scratch,
                    size_t scratch_bytes, int64_t *out_rows, float *out_scores,
                    uint32_t *out_counts, uint8_t *out_paths, sieve_search_stats *stats);
int sieve__cuda_knn_materialized(void *ctx, const sieve_matrix *m, const float *queries,
                                 uint32_t n_queries, const sieve_search_params *p,
                                 int64_t *out_rows, float *out_scores, uint32_t *out_counts,
                                 sieve_search_stats *stats);

int sieve__cuda_fill_normal(void *ctx, void *dst, sieve_dtype dtype, size_t n, uint64_t seed,
                            float scale);
int sieve__cuda_row_sqnorms(void *ctx, sieve_dtype dtype, const void *rows, uint64_t n_rows,
                            uint32_t dim, float *out);

/* *out = a * b, or 0 (and *out untouched) where the product does not fit in size_t: the
 * argument checks' array sizes. */
static inline int sieve__mul_size(size_t a, size_t b, size_t *out) {
    if (a && b > SIZE_MAX / a) return 0;
    *out = a * b;
    return 1;
}
static inline int sieve__mul3_size(size_t a, size_t b, size_t c, size_t *out) {
    size_t ab;
    return sieve__mul_size(a, b, &ab) && sieve__mul_size(ab, c, out);
}

/* ---- the indexer top-k (kernels/indexer.c checks the arguments and dispatches) */

/* Checks p (sizes nonzero, 1 <= k <= n_keys, dtype known, products within size_t).
 * 0 or SIEVE_EINVAL. */
int sieve__check_indexer_params(const sieve_indexer_params *p);

/* CPU backend (kernels/cpu/indexer.c), host memory. `materialized` nonzero: score each
 * query's whole row and select from it; zero: the sample-guided path (sample, proposed
 * boundary, one gated pass into a candidate buffer, certification, whole-row recovery).
 * Both score with one function, so their answers are bit-identical. */
int sieve__cpu_indexer_topk(const sieve_device *dev, const sieve_indexer_params *p,
                            const void *q, const void *keys, const float *w, int materialized,
                            int32_t *out_idx, float *out_scores, uint32_t *out_counts,
                            sieve_indexer_stats *stats);

/* 0, or SIEVE_ENOTSUP for a shape the CPU backend does not run (heads or head_dim past
 * INT_MAX / 256: BLAS sizes). */
int sieve__cpu_indexer_supported(const sieve_indexer_params *p);

/* CUDA backend (kernels/cuda/indexer.cu; SIEVE_ENODEV from the stub). */
int sieve__cuda_indexer_scratch_size(void *ctx, const sieve_indexer_params *p, size_t *bytes);
int sieve__cuda_indexer_topk(void *ctx, const sieve_indexer_params *p, const void *q,
                             const void *keys, const float *w, void *scratch,
                             size_t scratch_bytes, int32_t *out_idx, float *out_scores,
                             uint32_t *out_counts, sieve_indexer_stats *stats);
int sieve__cuda_indexer_materialized(void *ctx, const sieve_indexer_params *p, const void *q,
                                     const void *keys, const float *w, int32_t *out_idx,
                                     float *out_scores, uint32_t *out_counts,
                                     sieve_indexer_stats *stats);

/* ---- grouped sparse attention (kernels/sparse_attn.c checks the arguments and dispatches) */

/* Checks p (sizes nonzero, q_heads a multiple of kv_heads, group 1..32, n_keys at most
 * INT32_MAX, scale finite, dtype known, array sizes within size_t). 0 or SIEVE_EINVAL. */
int sieve__check_sparse_attn_params(const sieve_sparse_attn_params *p);

/* CPU backend (kernels/cpu/sparse_attn.c), host memory, arguments already checked. */
int sieve__cpu_sparse_attention(const sieve_device *dev, const sieve_sparse_attn_params *p,
                                const void *q, const void *keys, const void *values,
                                const int32_t *idx, float *out, float *lse,
                                sieve_sparse_attn_stats *stats);

/* CUDA backend (kernels/cuda/sparse_attn.cu; SIEVE_ENODEV from the stub). */
int sieve__cuda_sparse_attn_scratch_size(void *ctx, const sieve_sparse_attn_params *p,
                                         size_t *bytes);
int sieve__cuda_sparse_attention(void *ctx, const sieve_sparse_attn_params *p, const void *q,
                                 const void *keys, const void *values, const int32_t *idx,
                                 void *scratch, size_t scratch_bytes, float *out, float *lse,
                                 sieve_sparse_attn_stats *stats);

/* ---- dense causal attention (kernels/attention.c checks the arguments and dispatches) */

/* Checks p (sizes nonzero, q_heads a multiple of kv_heads, n_keys at most INT32_MAX, scale
 * finite, dtype known, array sizes within size_t). 0 or SIEVE_EINVAL. */
int sieve__check_attn_params(const sieve_attn_params *p);

/* Keys query t sees: min(n_keys, pos0 + t + 1). */
static inline uint32_t sieve__attn_visible(const sieve_attn_params *p, uint32_t t) {
    const uint64_t v = (uint64_t)p->pos0 + t + 1;
    return v < p->n_keys ? (uint32_t)v : p->n_keys;
}

/* CPU backend (kernels/cpu/attention.c), host memory, arguments already checked. */
int sieve__cpu_causal_attention(const sieve_device *dev, const sieve_attn_params *p,
                                const void *q, const void *keys, const void *values,
                                float *out, float *lse);

/* CUDA backend (kernels/cuda/sparse_attn.cu; SIEVE_ENODEV from the stub). */
int sieve__cuda_causal_attn_scratch_size(void *ctx, const sieve_attn_params *p, size_t *bytes);
int sieve__cuda_causal_attention(void *ctx, const sieve_attn_params *p, const void *q,
                                 const void *keys, const void *values, void *scratch,
                                 size_t scratch_bytes, float *out, float *lse, double *ms);

/* ---- block-sparse prefill (kernels/block_sparse.c checks the arguments and dispatches) */

/* Checks p (the shape as sieve__check_attn_params, block >= 1, alpha in [0, 1], correct 0
 * or 1). 0 or SIEVE_EINVAL. The selection's size (per_head x kv_heads within int64) is
 * checked by the callers in kernels/block_sparse.c. */
int sieve__check_bsp_params(const sieve_bsp_params *p);

/* Tiles of p: ceil(n_queries / block). */
static inline uint32_t sieve__bsp_tiles(const sieve_bsp_params *p) {
    return (uint32_t)(((uint64_t)p->attn.n_queries + p->block - 1) / p->block);
}
/* n_I: the blocks tile I's last token sees any key of (>= 1). */
static inline uint32_t sieve__bsp_visible_blocks(const sieve_bsp_params *p, uint32_t tile) {
    const uint64_t last = (uint64_t)tile * p->block + p->block - 1;
    const uint32_t t = last < p->attn.n_queries ? (uint32_t)last : p->attn.n_queries - 1;
    return (uint32_t)(((uint64_t)sieve__attn_visible(&p->attn, t) + p->block - 1) / p->block);
}
/* The full blocks of tile I (every token sees all B keys): J < this. */
static inline uint32_t sieve__bsp_full_blocks(const sieve_bsp_params *p, uint32_t tile) {
    return sieve__attn_visible(&p->attn, (uint32_t)((uint64_t)tile * p->block)) / p->block;
}
/* Whether block J (visible to tile I, J < n_I) is kept whatever its score: not full, a
 * sink block, or among the window's last full blocks. */
static inline int sieve__bsp_forced(const sieve_bsp_params *p, uint32_t tile, uint32_t J) {
    const uint32_t nf = sieve__bsp_full_blocks(p, tile);
    return J >= nf || J < p->sink_blocks || (uint64_t)J + p->window_blocks >= nf;
}

/* CPU backend (kernels/cpu/block_sparse.c), host memory, arguments already checked;
 * sel_counts / sel_blocks optional (both or neither); fills every stats field but
 * ms_total (stats may be NULL). */
int sieve__cpu_block_sparse_prefill(const sieve_device *dev, const sieve_bsp_params *p,
                                    const void *q, const void *keys, const void *values,
                                    float *out, float *lse, uint32_t *sel_counts,
                                    int32_t *sel_blocks, sieve_bsp_stats *stats);

/* CUDA backend (kernels/cuda/block_sparse.cu; SIEVE_ENODEV from the stub); fills every
 * stats field but ms_total (stats may be NULL: the counts are then not downloaded). */
int sieve__cuda_bsp_scratch_size(void *ctx, const sieve_bsp_params *p, size_t *bytes);
int sieve__cuda_block_sparse_prefill(void *ctx, const sieve_bsp_params *p, const void *q,
                                     const void *keys, const void *values, void *scratch,
                                     size_t scratch_bytes, float *out, float *lse,
                                     uint32_t *sel_counts, int32_t *sel_blocks,
                                     sieve_bsp_stats *stats);

#ifdef __CUDACC__
#define SIEVE__HD __host__ __device__
#else
#define SIEVE__HD
#endif

/* The order both backends give float keys: a key's bits mapped to a uint32 that is larger
 * for a larger key (-0 below +0; NaNs outside every number). */
static inline SIEVE__HD uint32_t sieve__ord_of_bits(uint32_t u) {
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* SplitMix64's output for state x (its step adds the golden ratio first): the seed mix of the
 * samples' random offsets on every backend. */
static inline SIEVE__HD uint64_t sieve__splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The value sieve_device_fill_normal puts at index i (shared by both backends; the scaling
 * by 2^-24 is exact, so contraction into an fma cannot change the result). */
static inline SIEVE__HD float sieve__normal_at(uint64_t seed, uint64_t i) {
    uint64_t s = 0;
    for (int r = 0; r < 4; r++) {
        uint64_t x = seed * 0x9e3779b97f4a7c15ull + i * 4u + (uint64_t)r + 0x632be59bd9b4e019ull;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        x ^= x >> 31;
        s += x >> 40; /* 24-bit uniform */
    }
    /* Irwin-Hall(4): mean 2, variance 1/3; exact integer sum, one rounding to float */
    return (float)(((double)s * (1.0 / 16777216.0) - 2.0) * 1.7320508075688772);
}

/* The value sieve_device_fill_rows puts at row r, element i. */
static inline SIEVE__HD float sieve__pattern_at(int pattern, uint64_t seed, uint64_t n_rows,
                                                uint32_t dim, uint64_t r, uint32_t i) {
    uint64_t idx = r * dim + i;
    switch (pattern) {
    case 1: return sieve__normal_at(seed, i);
    case 2: return sieve__normal_at(seed, (r / 4) * dim + i);
    case 3:
    case 4: {
        uint64_t rr = pattern == 3 ? r : n_rows - 1 - r;
        if (i == 0) return (float)(8.0 * (double)rr / (double)n_rows);
        return 0.05f * sieve__normal_at(seed, idx);
    }
    case 5: {
        float v = sieve__normal_at(seed, idx);
        return r == n_rows / 2 ? v * 1000.0f : v;
    }
    case 6: return fmaf(0.001f, sieve__normal_at(seed, idx), sieve__normal_at(seed, i));
    default: return sieve__normal_at(seed, idx);
    }
}

int sieve__cuda_fill_rows(void *ctx, void *dst, sieve_dtype dtype, uint64_t n_rows, uint32_t dim,
                          int pattern, uint64_t seed);
/* For the GPU tests: the fused search's sample selection over `lists` host lists of n float
 * keys, each list split over `parts` blocks of one thread block cluster (1, 2, 4 or 8; 0: as
 * the search would pick); out[3l .. 3l + 2] (host) = list l's keys at descending ranks 0, rj
 * and rj2 (ordered as float bits map to ordered integers, so -0 < +0).
 * Errors: SIEVE_EINVAL, SIEVE_ENOMEM, SIEVE_EDEVICE (SIEVE_ENODEV without CUDA). */
int sieve__cuda_select3(void *ctx, const float *keys, uint32_t lists, uint32_t n, uint32_t rj,
                        uint32_t rj2, uint32_t parts, float *out);

#define SIEVE__COPY_H2D 1
#define SIEVE__COPY_D2H 2
#define SIEVE__COPY_D2D 3

#ifdef __cplusplus
}
#endif
#endif

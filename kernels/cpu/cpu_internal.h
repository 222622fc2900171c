/* cpu_internal.h: shared by the CPU backend's own files (kernels/cpu), never included
 * elsewhere except white-box tests.
 *
 * Owns: the tile scorer every CPU path scores with, the candidate encoding, sorting and
 * binning helpers, and the worker-thread runner. Must not: include CUDA headers, know the
 * search paths' control flow (knn.c, materialized.c own that).
 *
 * Determinism: the scorer cuts the stored matrix into fixed tiles (aligned row ranges inside
 * one page, SIEVE__TILE_ROWS rows or a page if smaller; a page's last tile may be short).
 * Tiles do not depend on the thread count, and each tile is scored by exactly one BLAS call
 * for all n_queries queries (cblas_sgemm, or cblas_sgemv for a single query, see score.c),
 * so every path that uses sieve__cpu_score_tile gets bit-identical float32 keys. OpenBLAS is
 * pinned to one thread (openblas_set_num_threads(1), which is process-wide) and the CPU
 * backend parallelises over tiles itself.
 */
#ifndef SIEVE_CPU_INTERNAL_H
#define SIEVE_CPU_INTERNAL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sieve_kernels_internal.h"

#define SIEVE__TILE_ROWS 256u /* rows per tile (a page's rows when a page is smaller) */
#define SIEVE__NBINS 512u     /* equal-width bins per query in the fused path */
#define SIEVE__ALIGN 64u      /* alignment of every scratch region */

/* ---------------------------------------------------------------- worker threads */

/* fn(ctx, worker) runs once for each worker 0..workers-1, worker 0 on the calling thread.
 * Work must be shared out dynamically (atomic counters) so that a worker that could not be
 * started only costs speed: when pthread_create fails the remaining workers still run. */
typedef void (*sieve__cpu_task_fn)(void *ctx, uint32_t worker);
void sieve__cpu_run(uint32_t workers, sieve__cpu_task_fn fn, void *ctx);

/* Pins OpenBLAS to one thread (process-wide: affects every OpenBLAS caller in the process). */
void sieve__cpu_blas_single_thread(void);

/* ---------------------------------------------------------------- the tile scorer */

typedef struct sieve__cpu_scorer {
    const sieve_matrix *m;
    sieve_metric metric;
    uint32_t nq;             /* queries scored together by every BLAS call */
    uint32_t dim;
    const float *q;          /* nq x dim prepared queries (normalised for Cosine) */
    uint32_t tile_rows;      /* rows of a full tile; also the leading dimension of keys */
    uint32_t tiles_per_page;
    uint64_t n_tiles;
} sieve__cpu_scorer;

/* Copies queries into qout (nq x dim), normalising each for Cosine (float32: the norm is
 * sqrtf of the fmaf sum of squares in index order; a zero query stays zero), and writes the
 * float32 |q|^2 of each (fmaf, index order) into qsq (the Euclid score needs it).
 * Errors: SIEVE_ENONFINITE when a query holds NaN or infinity. */
int sieve__cpu_prepare_queries(sieve_metric metric, const float *queries, uint32_t nq,
                               uint32_t dim, float *qout, float *qsq);

void sieve__cpu_scorer_init(sieve__cpu_scorer *s, const sieve_matrix *m, sieve_metric metric,
                            const float *q, uint32_t nq);

/* Rows of tile t: [*row0, *row0 + *nrows). *row0 is a multiple of 64. */
void sieve__cpu_tile(const sieve__cpu_scorer *s, uint64_t t, uint64_t *row0, uint32_t *nrows);

/* Scores rows [row0, row0+nrows) of one tile for all queries: keys[q * tile_rows + j] is the
 * ranking key of row row0+j. xbuf (tile_rows x dim floats) holds converted float16/bfloat16
 * rows. Keys are canonical: NaN becomes -inf and -0 becomes +0, so comparing the keys'
 * encoded bits orders exactly like comparing the floats. */
void sieve__cpu_score_tile(const sieve__cpu_scorer *s, uint64_t row0, uint32_t nrows,
                           float *xbuf, float *keys);

/* Scores n (<= tile_rows) arbitrary rows (gathered into xbuf) into keys, same layout. Used
 * for the sample only: its keys steer the work, never the answer, so they need not be
 * bit-identical to the tile keys. */
void sieve__cpu_score_rows(const sieve__cpu_scorer *s, const uint32_t *rows, uint32_t n,
                           float *xbuf, float *keys);

/* Row eligibility: not deleted and (no allowed mask or allowed). */
static inline int sieve__cpu_eligible(const sieve_matrix *m, uint64_t row) {
    if (m->deleted && ((m->deleted[row >> 6] >> (row & 63)) & 1u)) return 0;
    if (m->allowed && !((m->allowed[row >> 6] >> (row & 63)) & 1u)) return 0;
    return 1;
}

/* Eligibility bits of rows [row0, row0+nrows) (row0 a multiple of 64, nrows <= 256) into
 * mask[0..3] (bit j = row row0+j). Returns 1 when every row of the tile is eligible. */
int sieve__cpu_tile_mask(const sieve_matrix *m, uint64_t row0, uint32_t nrows,
                         uint64_t mask[4]);

/* Number of eligible rows of m. */
uint64_t sieve__cpu_count_eligible(const sieve_matrix *m);

/* The metric whose reported score a search writes: SIEVE_SEARCH_RAW_KEYS reports the raw
 * ranking key for every metric (as Dot does). */
static inline sieve_metric sieve__cpu_report_metric(const sieve_search_params *p) {
    return (p->flags & SIEVE_SEARCH_RAW_KEYS) ? SIEVE_METRIC_DOT : p->metric;
}

/* The reported score of a key: the key itself for Dot and Cosine, the Euclidean distance
 * sqrtf(fmaxf(0, |q|^2 - key)) for Euclid (the same value as sieve_euclid_distance). */
static inline float sieve__cpu_report(sieve_metric metric, float key, float qsq) {
    return metric == SIEVE_METRIC_EUCLID ? sqrtf(fmaxf(0.0f, qsq - key)) : key;
}

/* ---------------------------------------------------------------- candidates */

/* A candidate is one uint64: the high half orders keys descending, the low half is the row,
 * so sorting candidates ascending as integers sorts them best first (key descending, ties by
 * the smaller row). Keys must be canonical (see sieve__cpu_score_tile). */
static inline uint64_t sieve__cpu_cand(float key, uint32_t row) {
    uint32_t u;
    memcpy(&u, &key, 4);
    uint32_t ord = sieve__ord_of_bits(u); /* ascending with key */
    return ((uint64_t)(~ord) << 32) | row;
}
static inline uint32_t sieve__cpu_cand_row(uint64_t c) { return (uint32_t)c; }
static inline float sieve__cpu_cand_key(uint64_t c) {
    uint32_t ord = ~(uint32_t)(c >> 32);
    uint32_t u = (ord & 0x80000000u) ? (ord & 0x7fffffffu) : ~ord;
    float key;
    memcpy(&key, &u, 4);
    return key;
}
#define SIEVE__NO_CAND UINT64_MAX /* an empty slot (row field 0xffffffff is never a row) */

/* Sorts a ascending. tmp (n elements) enables an LSD radix sort; NULL sorts in place
 * (introsort). */
void sieve__cpu_sort_u64(uint64_t *a, size_t n, uint64_t *tmp);

/* Leaves the j smallest of a[0..n) sorted ascending in a[0..j) (the rest in any order): a
 * full sort when j is a large share of n, else an in-place quickselect first. tmp as above. */
void sieve__cpu_smallest_u64(uint64_t *a, size_t n, size_t j, uint64_t *tmp);

/* ---------------------------------------------------------------- bins */

/* SIEVE__NBINS equal-width bins over [lo, hi]: bin b holds keys x with edge[b] <= x <
 * edge[b+1]; the top bin is open above (keys above hi clamp into it) and keys below lo fall
 * into bin 0. The edges are explicit floats and sieve__cpu_bin uses exactly them, so "x is in
 * a bin >= b" is the same statement as "x >= edge[b]": tightening a gate to an edge and
 * selecting by bins are exact. Non-finite or empty ranges give one effective bin (every edge
 * equals lo, everything >= lo lands in the top bin). */
typedef struct sieve__cpu_bins {
    float edge[SIEVE__NBINS];
    float inv_w;
} sieve__cpu_bins;

void sieve__cpu_bins_init(sieve__cpu_bins *b, float lo, float hi);

static inline uint32_t sieve__cpu_bin(const sieve__cpu_bins *b, float x) {
    const uint32_t top = SIEVE__NBINS - 1;
    if (x >= b->edge[top]) return top;
    if (!(x >= b->edge[1])) return 0;
    /* here edge[1] <= x < edge[top]: the range is finite and non-degenerate */
    float t = (x - b->edge[0]) * b->inv_w;
    uint32_t i;
    if (!(t >= 1.0f)) i = 1;
    else if (!(t < (float)(top - 1))) i = top - 1;
    else i = (uint32_t)t;
    while (x < b->edge[i]) i--;
    while (x >= b->edge[i + 1]) i++;
    return i;
}

/* The highest bin b whose suffix count hist[b] + ... + hist[top] is >= k, with *above = the
 * suffix count of the bins above b. Returns SIEVE__NBINS when the total is below k. */
uint32_t sieve__cpu_bins_kth(const uint32_t *hist, uint64_t k, uint64_t *above);

/* Exact top-k of a full-row slot: slot[r] is row r's candidate or SIEVE__NO_CAND (n_rows
 * entries). Compacts in place, bins the keys, sorts only the threshold bin, and writes the
 * min(k, eligible) best candidates, sorted best first, to top (k entries). tmp (tmp_cap
 * entries) speeds up sorting when large enough. Returns how many were written. */
size_t sieve__cpu_select_slot(uint64_t *slot, uint64_t n_rows, uint32_t k, uint64_t *top,
                              uint64_t *tmp, size_t tmp_cap);

/* Writes count sorted candidates and pads to k (row -1, score NaN). */
void sieve__cpu_emit(const uint64_t *sorted, size_t count, uint32_t k, sieve_metric metric,
                     float qsq, int64_t *out_rows, float *out_scores);

/* Rounds n up to SIEVE__ALIGN. */
static inline size_t sieve__cpu_align(size_t n) {
    return (n + SIEVE__ALIGN - 1) & ~(size_t)(SIEVE__ALIGN - 1);
}

/* Reserves count x elem bytes, aligned, at the end of a layout of *total bytes: *off gets
 * their offset and *total grows. 0 (nothing changed) when the sizes pass SIZE_MAX / 2. */
static inline int sieve__cpu_region(size_t *total, size_t *off, size_t count, size_t elem) {
    if (count && elem > (SIZE_MAX / 2) / count) return 0;
    const size_t bytes = sieve__cpu_align(count * elem);
    if (*total > SIZE_MAX / 2 - bytes) return 0;
    *off = *total;
    *total += bytes;
    return 1;
}

/* ---------------------------------------------------------------- attention rows */

#define SIEVE__CPU_ATTN_KBLOCK 256u   /* key or value rows converted per block */
#define SIEVE__CPU_POOLED 0x80000000u /* an entry with this bit is pooled block (entry & ~bit);
                                         else a key position (n_keys <= INT32_MAX) */

/* What sieve__cpu_attend_entries reads and writes: q, keys and values stored as
 * sieve_causal_attention lays them out, the softmax scale, the bias a pooled entry's logit
 * gets (log B), and out / lse (lse may be NULL). */
typedef struct sieve__cpu_attn_src {
    sieve_dtype dtype;
    size_t esz;
    const void *q, *keys, *values;
    uint32_t Hq, Hkv, D, Dv;
    float scale, pooled_bias;
    float *out, *lse;
} sieve__cpu_attn_src;

/* One worker's buffers for up to nr query heads: qf (nr x D), kt (D x KBLOCK), vv
 * (KBLOCK x Dv), conv (D), sc (nr rows of ld >= the entries), mx, sum (nr), acc (nr x Dv). */
typedef struct sieve__cpu_attn_buf {
    float *qf, *kt, *vv, *conv, *sc, *mx, *sum, *acc;
    size_t ld;
} sieve__cpu_attn_buf;

/* The buffers' places in one worker's block: sieve__cpu_attn_reserve reserves them (after
 * what *per holds, for up to nr heads over up to n entries; 0 when the sizes pass
 * SIZE_MAX / 2), sieve__cpu_attn_bind points b at them in the block at m. */
typedef struct sieve__cpu_attn_layout {
    size_t o_qf, o_kt, o_vv, o_conv, o_sc, o_mx, o_sum, o_acc, n;
} sieve__cpu_attn_layout;
int sieve__cpu_attn_reserve(size_t *per, sieve__cpu_attn_layout *l, size_t nr, size_t D,
                            size_t Dv, size_t n);
void sieve__cpu_attn_bind(sieve__cpu_attn_buf *b, const sieve__cpu_attn_layout *l, char *m);

/* The float32 attention of query heads h0 .. h0 + nr - 1 (all of kv head g) of token t over
 * its n >= 1 entries ent (the first ne key positions, the rest pooled blocks whose rows are
 * kbar_g + J x D and vbar_g + J x Dv), written to out and lse. Every dot is one sum over d in
 * index order; the softmax takes the maximum first, then expf(x - m), and every sum over
 * the entries runs in their order in one accumulator, so cutting them into blocks changes
 * no rounding (kernels/cpu/attention.c). */
void sieve__cpu_attend_entries(const sieve__cpu_attn_src *a, const sieve__cpu_attn_buf *b,
                               const float *kbar_g, const float *vbar_g, uint32_t t,
                               uint32_t g, uint32_t h0, uint32_t nr, const uint32_t *ent,
                               uint32_t n, uint32_t ne);

#endif

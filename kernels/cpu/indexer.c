/* indexer.c (cpu): the CPU backend of the sparse-attention indexer top-k.
 * Owns: the indexer's one scorer (float32 dots per head, the ReLU-weighted fold over the heads),
 * the fixed key-block grid, the sample-guided fused path (sample, proposed boundary, one
 * gated pass into a candidate buffer, certification, whole-row recovery) and the
 * materialize-then-select path, per-worker buffers and statistics.
 * Must not: score other than through score_keys (bit-identity between the two paths depends
 * on it), keep state between calls, write the caller's arrays outside their shapes.
 *
 * Scores. For query t (heads H, head_dim D) and a block of keys, the H x BLOCK dots
 * S = Q_t K_block^T are each one float32 sum over d = 0 .. D-1 in index order (the block
 * transposed so that the loop over keys is the inner one and vectorises), and
 *     score[s] = fold over h = 0 .. H-1 of acc = fmaf(w[t,h], fmaxf(0, S[h][s]), acc),
 * starting from acc = +0.0f, is the CPU's score. Scores are canonical: NaN becomes -inf (it
 * ranks last) and -0 becomes +0, so the float order, the candidates' integer order
 * (sieve__cpu_cand) and the contract's order (score descending, index ascending) agree.
 *
 * Determinism. Every key's score is the same arithmetic on its own row, wherever the key
 * lies, so identical keys score identically and every path (fused, its recoveries,
 * materialized, the sample) computes bit-identical scores for every key. (The dots were
 * once one cblas_sgemm a block; OpenBLAS's kernels on some CPUs, seen on AMD EPYC with
 * 0.3.21, sum different columns of one call in different orders, so 300 identical keys
 * scored differently at positions 8 and 248 and ties were not broken by index.) Keys are
 * cut into a fixed grid of BLOCK-key blocks starting at key 0; full float32 blocks are read
 * in place, every other block from a float32 copy (sieve_convert_to_f32, exact).
 *
 * Per query t, with v = sieve_indexer_visible(p, t) keys visible:
 *  materialized: score the v keys into a per-worker row, keep the min(k, v) best (the
 *    candidates' integer order: quickselect, then a sort of the winners). Counted as
 *    SIEVE_PATH_FULL (every key of the row scored and selected, like
 *    sieve_knn_materialized).
 *  fused:
 *   1. S = p->sample_keys or max(4096, 4k). When v <= k or v <= 2S (the sample would cost
 *      about as much as the pass) the row is scored and selected directly
 *      (SIEVE_PATH_DIRECT), as materialized does.
 *   2. Sample S keys at the fractional stride v/S with a random offset o in [0, v) from
 *      p->seed and t: key_j = floor((j v + o) / S). With r = k S / v and
 *      j = sieve__boundary_rank(r), the boundary is the sample's score of descending rank
 *      j; when j >= S the sample cannot place it and the query goes DIRECT.
 *      p->force_boundary skips the sample and proposes p->forced_boundary (for any v > k).
 *   3. One pass over the visible blocks keeps every key with score >= boundary (ties at
 *      the boundary are kept) in a candidate buffer of cap entries and counts every one,
 *      also those past cap (overflow is detected, never silent).
 *   4. k <= admitted <= cap: certified (SIEVE_PATH_CERTIFIED): at least k keys score >=
 *      boundary, so the k-th best does, and so does every key of the top k: all of them
 *      were kept, and the top k of the buffer is the top k of the row. admitted < k
 *      (SIEVE_PATH_UNDERFILL) or admitted > cap (SIEVE_PATH_OVERFLOW): the whole row is
 *      scored again and selected, as materialized does. Either way the answer is exact.
 *   cap = p->candidate_capacity, or by default 2 (j' + 4 sqrt(j') + 4) v / S (j' = j + 1
 *   sampled keys at or above the boundary; twice its expected share of the row plus slack),
 *   at least k + 64; never more than v.
 *
 * Threads: queries are claimed dynamically by dev->threads workers (sieve__cpu_run); each
 * worker owns its buffers (query copy, key block, dots, a v-entry row and its sort buffer)
 * and its statistics, merged after the run. Statistics:
 * ms_total is the call's wall time; the phases of different queries overlap on the
 * workers, so ms_sample, ms_scan (scoring for the answer: the gated pass, or the whole
 * row on the direct and materialized paths), ms_select and ms_recover (rescoring and
 * selecting recovered rows) are wall times summed over the workers.
 */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#define BLOCK 256u            /* keys a block (the fixed grid) */
#define MAX_WORKERS 256u
#define DEFAULT_SAMPLE 4096u  /* default sample keys: max(DEFAULT_SAMPLE, 4k) */

/* One worker's buffers. */
typedef struct wbuf {
    float *qf;     /* H x D: the query converted to float32 (non-float32 dtypes) */
    float *xbuf;   /* BLOCK x D: a converted or gathered key block */
    float *dots;   /* H x BLOCK: the block's dot products */
    float *kt;     /* D x BLOCK: the block transposed */
    float *blk;    /* BLOCK: the block's scores */
    uint64_t *row; /* max visible entries: candidates, sample or whole row */
    uint64_t *tmp; /* as many: the sort buffer */
} wbuf;

typedef struct ictx {
    const sieve_indexer_params *p;
    const void *q, *keys;
    const float *w;
    int materialized;
    uint32_t H, D, k;
    size_t esz;
    wbuf *bufs;
    sieve_indexer_stats *wstats; /* one per worker */
    int32_t *out_idx;
    float *out_scores;
    uint32_t *out_counts;
    atomic_uint_fast64_t next;
} ictx;

/* ---------------------------------------------------------------- the scorer */

/* The one scorer: out[j] = the canonical score of key row j < n of kb (BLOCK x D float32)
 * for the query qf (H x D) with head weights wt; b's dots and kt are its work space. */
static void score_keys(const ictx *c, wbuf *b, const float *qf, const float *wt,
                       const float *kb, uint32_t n, float *out) {
    const uint32_t H = c->H, D = c->D;
    float *dots = b->dots, *kt = b->kt;
    for (uint32_t j = 0; j < n; j++)
        for (uint32_t d = 0; d < D; d++) kt[(size_t)d * BLOCK + j] = kb[(size_t)j * D + d];
    for (uint32_t h = 0; h < H; h++) { /* dots[h][j]: d ascending, one accumulator */
        float *dh = dots + (size_t)h * BLOCK;
        const float *qh = qf + (size_t)h * D;
        for (uint32_t j = 0; j < n; j++) dh[j] = 0.0f;
        for (uint32_t d = 0; d < D; d++) {
            const float qd = qh[d];
            const float *kd = kt + (size_t)d * BLOCK;
            for (uint32_t j = 0; j < n; j++) dh[j] += qd * kd[j];
        }
    }
    for (uint32_t j = 0; j < n; j++) out[j] = 0.0f;
    for (uint32_t h = 0; h < H; h++) { /* per key: heads in index order */
        const float wh = wt[h];
        const float *dh = dots + (size_t)h * BLOCK;
        for (uint32_t j = 0; j < n; j++) out[j] = fmaf(wh, fmaxf(0.0f, dh[j]), out[j]);
    }
    for (uint32_t j = 0; j < n; j++) {
        const float x = out[j];
        if (x != x) out[j] = -INFINITY; /* NaN ranks last */
        else if (x == 0.0f) out[j] = 0.0f; /* -0 and +0 are one score */
    }
}

/* Scores keys [s0, s0 + n) of the grid block starting at s0 (s0 a multiple of BLOCK,
 * n <= BLOCK) into out[0 .. n). */
static void score_block(const ictx *c, wbuf *b, const float *qf, const float *wt, uint64_t s0,
                        uint32_t n, float *out) {
    const size_t D = c->D;
    const float *kb;
    if (c->p->dtype == SIEVE_DTYPE_F32 && n == BLOCK) {
        kb = (const float *)c->keys + s0 * D;
    } else {
        sieve_convert_to_f32(c->p->dtype, (const char *)c->keys + s0 * D * c->esz, b->xbuf,
                             (size_t)n * D);
        kb = b->xbuf;
    }
    score_keys(c, b, qf, wt, kb, n, out);
}

/* Scores the first v keys into row (candidates: score and key index). */
static void score_row(const ictx *c, wbuf *b, const float *qf, const float *wt, uint32_t v) {
    for (uint64_t s0 = 0; s0 < v; s0 += BLOCK) {
        const uint32_t n = (uint32_t)(v - s0 < BLOCK ? v - s0 : BLOCK);
        score_block(c, b, qf, wt, s0, n, b->blk);
        for (uint32_t j = 0; j < n; j++)
            b->row[s0 + j] = sieve__cpu_cand(b->blk[j], (uint32_t)(s0 + j));
    }
}

/* ---------------------------------------------------------------- paths */

/* Scores the strided sample of S < v keys into row[0 .. S) (candidates; the index field is
 * the sample position). */
static void score_sample(const ictx *c, wbuf *b, const float *qf, const float *wt, uint32_t t,
                         uint32_t v, uint32_t S) {
    const uint64_t o = sieve__splitmix64(c->p->seed ^ ((uint64_t)t * 0xd1b54a32d192ed03ull)) % v;
    /* offset o/S in [0, v/S) keys */
    const size_t D = c->D;
    for (uint32_t j0 = 0; j0 < S; j0 += BLOCK) {
        const uint32_t n = S - j0 < BLOCK ? S - j0 : BLOCK;
        for (uint32_t i = 0; i < n; i++) {
            const uint64_t s = ((uint64_t)(j0 + i) * v + o) / S; /* < v, no overflow */
            sieve_convert_to_f32(c->p->dtype, (const char *)c->keys + s * D * c->esz,
                                 b->xbuf + (size_t)i * D, D);
        }
        score_keys(c, b, qf, wt, b->xbuf, n, b->blk);
        for (uint32_t i = 0; i < n; i++) b->row[j0 + i] = sieve__cpu_cand(b->blk[i], j0 + i);
    }
}

/* The default candidate capacity of a query whose boundary is the sample's rank-j score
 * (0-based) among S sampled of v visible keys. */
static uint64_t default_capacity(uint32_t k, uint32_t v, uint32_t S, uint64_t j) {
    const double jj = (double)j + 1.0;
    const double expect = (jj + 4.0 * sqrt(jj) + 4.0) * (double)v / (double)S;
    double cap = ceil(2.0 * expect);
    if (cap < (double)k + 64.0) cap = (double)k + 64.0;
    return cap >= (double)v ? v : (uint64_t)cap;
}

/* Writes count sorted candidates of query t and pads its row to k (index -1, score NaN). */
static void emit(const ictx *c, uint32_t t, const uint64_t *top, uint32_t count) {
    int32_t *idx = c->out_idx + (size_t)t * c->k;
    float *sc = c->out_scores + (size_t)t * c->k;
    for (uint32_t i = 0; i < c->k; i++) {
        idx[i] = i < count ? (int32_t)sieve__cpu_cand_row(top[i]) : -1;
        sc[i] = i < count ? sieve__cpu_cand_key(top[i]) : NAN;
    }
    if (c->out_counts) c->out_counts[t] = count;
}

/* Scores query t's whole visible row and selects from it (direct, materialized and
 * recovered queries). Times go to *ms_score and *ms_sel. */
static void whole_row(const ictx *c, wbuf *b, const float *qf, const float *wt, uint32_t t,
                      uint32_t v, double *ms_score, double *ms_sel) {
    const double t0 = sieve__now_ms();
    score_row(c, b, qf, wt, v);
    const double t1 = sieve__now_ms();
    const uint32_t count = v < c->k ? v : c->k;
    sieve__cpu_smallest_u64(b->row, v, count, b->tmp);
    emit(c, t, b->row, count);
    *ms_score += t1 - t0;
    *ms_sel += sieve__now_ms() - t1;
}

/* The fused path of one query (materialized == 0). */
static void fused_query(const ictx *c, wbuf *b, sieve_indexer_stats *st, const float *qf,
                        const float *wt, uint32_t t, uint32_t v) {
    const sieve_indexer_params *p = c->p;
    const uint32_t k = c->k;
    uint64_t s_req = p->sample_keys;
    if (!s_req) s_req = (uint64_t)k * 4 > DEFAULT_SAMPLE ? (uint64_t)k * 4 : DEFAULT_SAMPLE;
    if (v <= k || (!p->force_boundary && (uint64_t)v <= 2 * s_req)) {
        st->path_count[SIEVE_PATH_DIRECT]++;
        whole_row(c, b, qf, wt, t, v, &st->ms_scan, &st->ms_select);
        return;
    }
    /* here v > k and, unless forced, S < v / 2 */
    const uint32_t S = (uint32_t)(s_req < v ? s_req : v);
    const uint64_t j = sieve__boundary_rank((double)k * (double)S / (double)v);
    float boundary;
    if (p->force_boundary) {
        boundary = p->forced_boundary;
    } else {
        const double t0 = sieve__now_ms();
        score_sample(c, b, qf, wt, t, v, S);
        st->keys_sampled += S;
        if (j >= S) { /* the sample cannot place the boundary */
            st->ms_sample += sieve__now_ms() - t0;
            st->path_count[SIEVE_PATH_DIRECT]++;
            whole_row(c, b, qf, wt, t, v, &st->ms_scan, &st->ms_select);
            return;
        }
        sieve__cpu_smallest_u64(b->row, S, (size_t)j + 1, b->tmp);
        boundary = sieve__cpu_cand_key(b->row[j]);
        st->ms_sample += sieve__now_ms() - t0;
    }
    const uint64_t cap = p->candidate_capacity
                             ? (p->candidate_capacity < v ? p->candidate_capacity : v)
                             : default_capacity(k, v, S, j);

    /* the gated pass: every visible key scored once, those >= boundary kept */
    const double t1 = sieve__now_ms();
    uint64_t admitted = 0;
    for (uint64_t s0 = 0; s0 < v; s0 += BLOCK) {
        const uint32_t n = (uint32_t)(v - s0 < BLOCK ? v - s0 : BLOCK);
        score_block(c, b, qf, wt, s0, n, b->blk);
        for (uint32_t i = 0; i < n; i++) {
            const float x = b->blk[i];
            if (!(x >= boundary)) continue;
            if (admitted < cap) b->row[admitted] = sieve__cpu_cand(x, (uint32_t)(s0 + i));
            admitted++; /* counted even when it did not fit: overflow is never silent */
        }
    }
    st->candidates_admitted += admitted;
    const double t2 = sieve__now_ms();
    st->ms_scan += t2 - t1;

    if (admitted >= k && admitted <= cap) {
        st->path_count[SIEVE_PATH_CERTIFIED]++;
        sieve__cpu_smallest_u64(b->row, (size_t)admitted, k, b->tmp);
        emit(c, t, b->row, k);
        st->ms_select += sieve__now_ms() - t2;
        return;
    }
    st->path_count[admitted > cap ? SIEVE_PATH_OVERFLOW : SIEVE_PATH_UNDERFILL]++;
    double ms_rec = 0.0;
    whole_row(c, b, qf, wt, t, v, &ms_rec, &ms_rec);
    st->ms_recover += ms_rec;
}

static void query_worker(void *vc, uint32_t worker) {
    ictx *c = vc;
    wbuf *b = &c->bufs[worker];
    sieve_indexer_stats *st = &c->wstats[worker];
    const size_t hd = (size_t)c->H * c->D;
    for (;;) {
        const uint64_t t = atomic_fetch_add(&c->next, 1);
        if (t >= c->p->n_queries) break;
        const float *qf;
        if (c->p->dtype == SIEVE_DTYPE_F32) {
            qf = (const float *)c->q + t * hd;
        } else {
            sieve_convert_to_f32(c->p->dtype, (const char *)c->q + t * hd * c->esz, b->qf, hd);
            qf = b->qf;
        }
        const float *wt = c->w + t * c->H;
        const uint32_t v = sieve_indexer_visible(c->p, (uint32_t)t);
        st->queries++;
        if (c->materialized) {
            st->path_count[SIEVE_PATH_FULL]++;
            whole_row(c, b, qf, wt, (uint32_t)t, v, &st->ms_scan, &st->ms_select);
        } else {
            fused_query(c, b, st, qf, wt, (uint32_t)t, v);
        }
    }
}

/* ---------------------------------------------------------------- entry */


int sieve__cpu_indexer_supported(const sieve_indexer_params *p) {
    /* the blocks' sizes stay within int (as when a BLAS call scored them) */
    return p->heads > INT_MAX / BLOCK || p->head_dim > INT_MAX / BLOCK ? SIEVE_ENOTSUP : 0;
}

int sieve__cpu_indexer_topk(const sieve_device *dev, const sieve_indexer_params *p,
                            const void *q, const void *keys, const float *w, int materialized,
                            int32_t *out_idx, float *out_scores, uint32_t *out_counts,
                            sieve_indexer_stats *stats) {
    const double t_start = sieve__now_ms();
    int rc0 = sieve__cpu_indexer_supported(p);
    if (rc0) return rc0;
    const uint32_t T = p->n_queries;
    uint32_t W = dev->threads ? dev->threads : 1;
    if (W > T) W = T;
    if (W > MAX_WORKERS) W = MAX_WORKERS;
    /* visible counts rise with t: the last query sees the most */
    const uint32_t max_v = sieve_indexer_visible(p, T - 1);
    size_t per = 0, o_qf, o_x, o_d, o_k, o_b, o_r, o_t;
    const size_t H = p->heads, D = p->head_dim;
    int ok = sieve__cpu_region(&per, &o_qf, p->dtype == SIEVE_DTYPE_F32 ? 0 : H * D,
                               sizeof(float)) &&
             sieve__cpu_region(&per, &o_x, (size_t)BLOCK * D, sizeof(float)) &&
             sieve__cpu_region(&per, &o_d, H * BLOCK, sizeof(float)) &&
             sieve__cpu_region(&per, &o_k, D * BLOCK, sizeof(float)) &&
             sieve__cpu_region(&per, &o_b, BLOCK, sizeof(float)) &&
             sieve__cpu_region(&per, &o_r, max_v, sizeof(uint64_t)) &&
             sieve__cpu_region(&per, &o_t, max_v, sizeof(uint64_t));
    if (!ok || per > (SIZE_MAX / 2) / W) return SIEVE_ENOMEM;
    char *mem = malloc(per * W + SIEVE__ALIGN);
    wbuf *bufs = malloc(W * sizeof *bufs);
    sieve_indexer_stats *wstats = calloc(W, sizeof *wstats);
    if (!mem || !bufs || !wstats) {
        free(mem);
        free(bufs);
        free(wstats);
        return SIEVE_ENOMEM;
    }
    char *base = mem + (SIEVE__ALIGN - (uintptr_t)mem % SIEVE__ALIGN) % SIEVE__ALIGN;
    for (uint32_t i = 0; i < W; i++) {
        char *m = base + (size_t)i * per;
        bufs[i] = (wbuf){(float *)(void *)(m + o_qf), (float *)(void *)(m + o_x),
                         (float *)(void *)(m + o_d), (float *)(void *)(m + o_k),
                         (float *)(void *)(m + o_b), (uint64_t *)(void *)(m + o_r),
                         (uint64_t *)(void *)(m + o_t)};
    }

    ictx c;
    memset(&c, 0, sizeof c);
    c.p = p;
    c.q = q;
    c.keys = keys;
    c.w = w;
    c.materialized = materialized;
    c.H = p->heads;
    c.D = p->head_dim;
    c.k = p->k;
    c.esz = sieve_dtype_size(p->dtype);
    c.bufs = bufs;
    c.wstats = wstats;
    c.out_idx = out_idx;
    c.out_scores = out_scores;
    c.out_counts = out_counts;
    atomic_init(&c.next, 0);
    sieve__cpu_run(W, query_worker, &c);

    if (stats) {
        sieve_indexer_stats st;
        memset(&st, 0, sizeof st);
        for (uint32_t i = 0; i < W; i++) {
            const sieve_indexer_stats *a = &wstats[i];
            st.queries += a->queries;
            st.keys_sampled += a->keys_sampled;
            st.candidates_admitted += a->candidates_admitted;
            for (int j = 0; j < SIEVE_PATH_COUNT; j++) st.path_count[j] += a->path_count[j];
            st.ms_sample += a->ms_sample;
            st.ms_scan += a->ms_scan;
            st.ms_select += a->ms_select;
            st.ms_recover += a->ms_recover;
        }
        st.ms_total = sieve__now_ms() - t_start;
        *stats = st;
    }
    free(mem);
    free(bufs);
    free(wstats);
    return 0;
}

/* knn.c: the CPU backend's fused, sample-guided, certified exact top-k (design.md).
 * Owns: the scratch plan, the sample and proposal, the gated scan rounds, certification,
 * the recoveries (underfill, overflow, full row) and the bin-guided selection.
 * Must not: score other than through score.c's tile scorer (bit-identity with the
 * materialized oracle depends on it), keep state between calls.
 *
 * Per query q of a batch of B over N rows (N_e of them eligible):
 *  1. Sample S = p->sample_rows or max(16384, 8k) rows (capped at N) at the fractional stride
 *     N/S with a random offset from p->seed: row_j = floor((j*N + o) / S), o in [0, N). The
 *     sample spans the whole row range, so sorted data cannot fool it. When N <= 2S the
 *     sample would cost about as much as the scan, and every row is scored and selected
 *     directly (SIEVE_PATH_DIRECT).
 *  2. Propose: with S_e eligible sampled rows and r = k * S_e / N_e, the boundary is the
 *     sample key of rank 1 + sieve__boundary_rank(r) (more than k rows above it but for a
 *     chance of at most SIEVE__UNDERFILL_P), the secondary boundary the key of rank 4x that
 *     + 16 (or the sample minimum).
 *     p->force_boundary replaces the boundary. SIEVE__NBINS equal-width bins span
 *     [boundary, sample max]; keys above the max clamp into the top bin. Sample keys come
 *     from gathered rows and may differ from the scan's in the last bit: they only steer the
 *     work. When the sample cannot place the boundary (rank > S_e) or k >= N_e, the query
 *     goes to the full row at once.
 *  3. Scan: one pass over all tiles. Each worker gates key >= its threshold (inclusive, so
 *     ties at the threshold are admitted), appends (row, key) to its own per-query buffer
 *     (cap entries), counts the key in its own per-query histogram, and counts every
 *     admission even when the buffer is full (overflow is detected, never silent). When the
 *     worker's own admitted keys in bins >= b reach k, its threshold rises to edge[b]: that
 *     worker alone proves k rows are >= edge[b], so nothing below it can be in the top k.
 *  4. Certify: no worker overflowed and the union holds >= k candidates => exact
 *     (SIEVE_PATH_CERTIFIED). A row that was not admitted is below some worker's threshold,
 *     and either that worker holds k rows at or above its threshold, or the threshold is the
 *     boundary and the union holds k rows at or above it; either way k rows beat it.
 *     Underfill (< k): rescan with the secondary boundary (SIEVE_PATH_UNDERFILL); still short
 *     => full row. Overflow: the summed histogram names the highest edge with >= k rows at or
 *     above it; rescan with that threshold and fresh bins up to the largest admitted key
 *     (SIEVE_PATH_OVERFLOW), unless that threshold is no higher or more rows than all the
 *     buffers hold are already counted above it (ties at the top); overflowing again => full
 *     row. Full row (SIEVE_PATH_FULL):
 *     every eligible key is written into an N-entry slot, then selected.
 *  5. Select: the summed histogram names the bin holding the k-th key; candidates above it
 *     go straight to the output, only that bin is sorted (key descending, row ascending),
 *     and the k winners are sorted best first.
 *
 * Every rescan scores all B queries again with the same tile calls, so recovered keys are
 * bit-identical to the first scan's (and to the materialized oracle's); its cost is one more
 * full scan of the batch, which is why the proposal aims a little high.
 *
 * Memory: all working memory is one scratch block (sieve__cpu_knn_scratch_size). The
 * candidate capacity p->candidate_capacity is per query and per worker on the CPU. Full-row
 * slots (N candidates each) are limited to 256 MiB for the direct path and 32 MiB
 * otherwise (at least one slot); queries waiting for a slot take later rounds.
 */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#define DIRECT_SLOT_BUDGET ((size_t)256 << 20)
#define FULL_SLOT_BUDGET ((size_t)32 << 20)
#define MAX_WORKERS 256u

enum { Q_GATED, Q_WAIT_FULL, Q_FULL, Q_DONE };

/* One query's progress through the paths. */
typedef struct qstate {
    uint8_t mode;          /* Q_* */
    uint8_t path;          /* sieve_search_path that is (or will be) answering */
    uint8_t scanned;       /* scanned at least once (later scans count as rescans) */
    uint8_t has_secondary;
    float thr;             /* threshold of the next gated scan */
    float secondary;
    float hi;              /* top of the sampled key range */
    uint32_t slot;         /* full-row slot while mode == Q_FULL */
    uint32_t count;        /* results written */
} qstate;

/* One worker's gate for one query. */
typedef struct wstate {
    uint64_t count; /* admissions, including those that did not fit */
    float thr;
    float maxkey;
} wstate;

/* Scratch layout; offsets are from the 64-byte aligned base. */
typedef struct plan {
    uint64_t n;
    uint32_t nq, k, dim, workers, tile_rows;
    uint32_t sample;    /* rows requested for the sample (0 on the direct path) */
    int direct;
    uint32_t cap;       /* candidates per worker per query */
    uint32_t slots;     /* full-row slots */
    size_t work;        /* u64 entries in each worker's work and tmp arrays */
    size_t o_q, o_qsq, o_srows, o_skeys, o_xbuf, o_kbuf, o_work, o_tmp, o_top;
    size_t o_ws, o_hist, o_cand, o_bins, o_qs, o_lists, o_slots, total;
} plan;

/* total += count * elem (aligned); 0 or SIEVE_ENOMEM on size overflow. */
static int region(size_t *total, size_t *off, uint64_t count, size_t elem) {
    if (count && elem > (SIZE_MAX / 2) / count) return SIEVE_ENOMEM;
    size_t bytes = sieve__cpu_align((size_t)count * elem);
    if (*total > SIZE_MAX / 2 - bytes) return SIEVE_ENOMEM;
    *off = *total;
    *total += bytes;
    return 0;
}

/* The boundary's rank in the sorted sample, counted from 1 (sieve__boundary_rank + 1). */
static uint64_t boundary_rank(double r) {
    const uint64_t j = sieve__boundary_rank(r);
    return j == UINT64_MAX ? j : j + 1;
}

static int make_plan(const sieve_device *dev, const sieve_matrix *m, uint32_t nq,
                     const sieve_search_params *p, plan *pl) {
    memset(pl, 0, sizeof *pl);
    pl->n = m->n_rows;
    pl->nq = nq;
    pl->k = p->k;
    pl->dim = m->dim;
    sieve__cpu_scorer sc;
    sieve__cpu_scorer_init(&sc, m, p->metric, NULL, nq);
    pl->tile_rows = sc.tile_rows;
    uint64_t workers = dev->threads ? dev->threads : 1;
    if (workers > sc.n_tiles) workers = sc.n_tiles;
    if (workers > MAX_WORKERS) workers = MAX_WORKERS;
    pl->workers = (uint32_t)(workers ? workers : 1);

    uint64_t s = p->sample_rows ? p->sample_rows : (uint64_t)p->k * 8;
    if (!p->sample_rows && s < 16384) s = 16384;
    if (s > pl->n) s = pl->n;
    pl->direct = pl->n <= 2 * s;
    size_t slot_budget = pl->direct ? DIRECT_SLOT_BUDGET : FULL_SLOT_BUDGET;
    uint64_t slots = slot_budget / ((size_t)pl->n * sizeof(uint64_t));
    if (slots < 1) slots = 1;
    if (slots > nq) slots = nq;
    pl->slots = (uint32_t)slots;
    if (!pl->direct) {
        pl->sample = (uint32_t)s;
        uint64_t cap = p->candidate_capacity;
        if (!cap) {
            double r = (double)p->k * (double)s / (double)pl->n;
            double rank = (double)boundary_rank(r);
            double expect = (rank + 4.0 * sqrt(rank) + 4.0) * (double)pl->n / (double)s;
            cap = (uint64_t)ceil(2.0 * expect);
            if (cap < (uint64_t)p->k + 64) cap = (uint64_t)p->k + 64;
            cap = (cap + 15) & ~(uint64_t)15;
        }
        if (cap > pl->n) cap = pl->n;
        pl->cap = (uint32_t)cap;
        uint64_t work = (uint64_t)pl->workers * pl->cap;
        if (work < s) work = s;
        pl->work = (size_t)work;
    } else {
        /* sorting buffer for a slot's threshold bin; larger bins sort in place */
        pl->work = (size_t)(pl->n < 65536 ? pl->n : 65536);
    }
    size_t t = 0;
    uint64_t W = pl->workers;
    int rc = 0;
    rc |= region(&t, &pl->o_q, (uint64_t)nq * pl->dim, sizeof(float));
    rc |= region(&t, &pl->o_qsq, nq, sizeof(float));
    rc |= region(&t, &pl->o_srows, pl->sample, sizeof(uint32_t));
    rc |= region(&t, &pl->o_skeys, (uint64_t)nq * pl->sample, sizeof(float));
    rc |= region(&t, &pl->o_xbuf, W * pl->tile_rows * pl->dim, sizeof(float));
    rc |= region(&t, &pl->o_kbuf, W * nq * pl->tile_rows, sizeof(float));
    rc |= region(&t, &pl->o_work, W * pl->work, sizeof(uint64_t));
    rc |= region(&t, &pl->o_tmp, W * pl->work, sizeof(uint64_t));
    rc |= region(&t, &pl->o_top, W * pl->k, sizeof(uint64_t));
    uint64_t wq = pl->direct ? 0 : W * nq;
    rc |= region(&t, &pl->o_ws, wq, sizeof(wstate));
    rc |= region(&t, &pl->o_hist, wq * SIEVE__NBINS, sizeof(uint32_t));
    rc |= region(&t, &pl->o_cand, wq * pl->cap, sizeof(uint64_t));
    rc |= region(&t, &pl->o_bins, pl->direct ? 0 : nq, sizeof(sieve__cpu_bins));
    rc |= region(&t, &pl->o_qs, nq, sizeof(qstate));
    rc |= region(&t, &pl->o_lists, (uint64_t)nq * 2, sizeof(uint32_t));
    rc |= region(&t, &pl->o_slots, (uint64_t)pl->slots * pl->n, sizeof(uint64_t));
    if (rc) return SIEVE_ENOMEM;
    pl->total = t + SIEVE__ALIGN; /* room to align an unaligned caller block */
    return 0;
}

int sieve__cpu_knn_scratch_size(const sieve_device *dev, const sieve_matrix *m,
                                uint32_t n_queries, const sieve_search_params *p,
                                size_t *bytes) {
    plan pl;
    int rc = make_plan(dev, m, n_queries, p, &pl);
    if (rc) return rc;
    *bytes = pl.total;
    return 0;
}

/* ---------------------------------------------------------------- shared call context */

typedef struct call {
    const plan *pl;
    const sieve_matrix *m;
    const sieve__cpu_scorer *sc;
    const sieve_search_params *p;
    char *base;
    const float *qsq;
    uint32_t *srows;
    uint32_t n_srows;
    float *skeys;
    uint64_t n_eligible;
    qstate *qs;
    sieve__cpu_bins *bins;
    int tighten;
    /* the current phase */
    const uint32_t *list; /* queries the phase works on */
    uint32_t n_list;
    atomic_uint_fast64_t next;
    atomic_int error;
    int64_t *out_rows;
    float *out_scores;
} call;

#define AT(c, off, type) ((type *)(void *)((c)->base + (c)->pl->off))

static float *worker_xbuf(const call *c, uint32_t w) {
    return AT(c, o_xbuf, float) + (size_t)w * c->pl->tile_rows * c->pl->dim;
}
static float *worker_kbuf(const call *c, uint32_t w) {
    return AT(c, o_kbuf, float) + (size_t)w * c->pl->nq * c->pl->tile_rows;
}
static uint64_t *worker_work(const call *c, uint32_t w) {
    return AT(c, o_work, uint64_t) + (size_t)w * c->pl->work;
}
static uint64_t *worker_tmp(const call *c, uint32_t w) {
    return AT(c, o_tmp, uint64_t) + (size_t)w * c->pl->work;
}
static uint64_t *worker_top(const call *c, uint32_t w) {
    return AT(c, o_top, uint64_t) + (size_t)w * c->pl->k;
}
static wstate *wq_state(const call *c, uint32_t w, uint32_t q) {
    return AT(c, o_ws, wstate) + (size_t)w * c->pl->nq + q;
}
static uint32_t *wq_hist(const call *c, uint32_t w, uint32_t q) {
    return AT(c, o_hist, uint32_t) + ((size_t)w * c->pl->nq + q) * SIEVE__NBINS;
}
static uint64_t *wq_cand(const call *c, uint32_t w, uint32_t q) {
    return AT(c, o_cand, uint64_t) + ((size_t)w * c->pl->nq + q) * c->pl->cap;
}
static uint64_t *slot_mem(const call *c, uint32_t slot) {
    return AT(c, o_slots, uint64_t) + (size_t)slot * c->pl->n;
}

/* ---------------------------------------------------------------- sample and proposal */

static void sample_worker(void *vc, uint32_t w) {
    call *c = vc;
    const plan *pl = c->pl;
    float *xbuf = worker_xbuf(c, w), *kbuf = worker_kbuf(c, w);
    for (;;) {
        uint64_t chunk = atomic_fetch_add(&c->next, 1);
        uint64_t j0 = chunk * pl->tile_rows;
        if (j0 >= c->n_srows) break;
        uint32_t n = (uint32_t)(c->n_srows - j0 < pl->tile_rows ? c->n_srows - j0 : pl->tile_rows);
        sieve__cpu_score_rows(c->sc, c->srows + j0, n, xbuf, kbuf);
        for (uint32_t q = 0; q < pl->nq; q++)
            memcpy(c->skeys + (size_t)q * pl->sample + j0, kbuf + (size_t)q * pl->tile_rows,
                   n * sizeof(float));
    }
}

static void propose_worker(void *vc, uint32_t w) {
    call *c = vc;
    const plan *pl = c->pl;
    const sieve_search_params *p = c->p;
    uint64_t *sorted = worker_work(c, w), *tmp = worker_tmp(c, w);
    uint32_t se = c->n_srows;
    for (;;) {
        uint64_t q = atomic_fetch_add(&c->next, 1);
        if (q >= pl->nq) break;
        qstate *s = &c->qs[q];
        const float *keys = c->skeys + (size_t)q * pl->sample;
        for (uint32_t j = 0; j < se; j++) sorted[j] = sieve__cpu_cand(keys[j], j);
        sieve__cpu_sort_u64(sorted, se, tmp);
        double r = (double)pl->k * (double)se / (double)c->n_eligible;
        uint64_t rank = boundary_rank(r);
        uint64_t rank2 = 4 * rank + 16;
        if (rank2 > se) rank2 = se;
        s->mode = Q_GATED;
        s->path = SIEVE_PATH_CERTIFIED;
        s->has_secondary = se > 0;
        if (se > 0) {
            s->hi = sieve__cpu_cand_key(sorted[0]);
            s->secondary = sieve__cpu_cand_key(sorted[rank2 - 1]);
        }
        if (p->force_boundary) {
            s->thr = p->forced_boundary;
            if (se == 0) s->hi = s->thr;
        } else if (rank > se) {
            /* The sample cannot place the boundary (k is a large share of the eligible
             * rows, or too few sampled rows are eligible): go to the full row at once. */
            s->mode = Q_WAIT_FULL;
            s->path = SIEVE_PATH_FULL;
            continue;
        } else {
            s->thr = sieve__cpu_cand_key(sorted[rank - 1]);
        }
        sieve__cpu_bins_init(&c->bins[q], s->thr, s->hi);
    }
}

/* Collects the eligible rows of the strided sample into c->srows. */
static void draw_sample(call *c, uint64_t seed) {
    const plan *pl = c->pl;
    uint64_t o = sieve__splitmix64(seed) % pl->n; /* offset o/S in [0, N/S) rows */
    uint32_t n = 0;
    for (uint64_t j = 0; j < pl->sample; j++) {
        uint64_t row = (j * pl->n + o) / pl->sample;
        if (sieve__cpu_eligible(c->m, row)) c->srows[n++] = (uint32_t)row;
    }
    c->n_srows = n;
}

/* ---------------------------------------------------------------- scan */

static void scan_worker(void *vc, uint32_t w) {
    call *c = vc;
    const plan *pl = c->pl;
    const sieve__cpu_scorer *sc = c->sc;
    float *xbuf = worker_xbuf(c, w), *kbuf = worker_kbuf(c, w);
    const uint32_t k = pl->k, cap = pl->cap, top = SIEVE__NBINS - 1;
    for (;;) {
        uint64_t t = atomic_fetch_add(&c->next, 1);
        if (t >= sc->n_tiles) break;
        uint64_t row0;
        uint32_t nrows;
        sieve__cpu_tile(sc, t, &row0, &nrows);
        sieve__cpu_score_tile(sc, row0, nrows, xbuf, kbuf);
        uint64_t mask[4];
        int all = sieve__cpu_tile_mask(c->m, row0, nrows, mask);
        for (uint32_t a = 0; a < c->n_list; a++) {
            uint32_t q = c->list[a];
            const qstate *s = &c->qs[q];
            const float *kq = kbuf + (size_t)q * pl->tile_rows;
            if (s->mode == Q_FULL) {
                uint64_t *slot = slot_mem(c, s->slot) + row0;
                for (uint32_t j = 0; j < nrows; j++)
                    slot[j] = (all || ((mask[j >> 6] >> (j & 63)) & 1u))
                                  ? sieve__cpu_cand(kq[j], (uint32_t)(row0 + j))
                                  : SIEVE__NO_CAND;
                continue;
            }
            wstate *ws = wq_state(c, w, q);
            uint32_t *hist = wq_hist(c, w, q);
            uint64_t *buf = wq_cand(c, w, q);
            const sieve__cpu_bins *bins = &c->bins[q];
            float thr = ws->thr, maxkey = ws->maxkey;
            uint64_t count = ws->count, before = count;
            for (uint32_t j = 0; j < nrows; j++) {
                float x = kq[j];
                if (!(x >= thr)) continue;
                if (!all && !((mask[j >> 6] >> (j & 63)) & 1u)) continue;
                if (count < cap) buf[count] = sieve__cpu_cand(x, (uint32_t)(row0 + j));
                count++; /* counted even when it did not fit: overflow is never silent */
                hist[sieve__cpu_bin(bins, x)]++;
                if (x > maxkey) maxkey = x;
            }
            if (c->tighten && count > before && count >= k) {
                /* This worker alone holds `cum` admitted rows >= edge[b]; once that reaches
                 * k, nothing below edge[b] can be in the top k. */
                uint64_t cum = 0;
                for (uint32_t b = top; b >= 1; b--) {
                    cum += hist[b];
                    if (cum >= k) {
                        if (bins->edge[b] > thr) thr = bins->edge[b];
                        break;
                    }
                }
            }
            ws->thr = thr;
            ws->maxkey = maxkey;
            ws->count = count;
        }
    }
}

/* ---------------------------------------------------------------- select */

/* Exact top-k from the union of the workers' buffers of a certified query. */
/* Sums query q's bin histogram over the workers and returns the bin holding its k-th key
 * (sieve__cpu_bins_kth: *above = admitted keys in the bins above it; SIEVE__NBINS when
 * fewer than k were admitted), with *in_bin = the admitted keys in that bin. */
static uint32_t merged_kth_bin(const call *c, uint32_t q, uint64_t *above, uint64_t *in_bin) {
    uint32_t hist[SIEVE__NBINS];
    memset(hist, 0, sizeof hist);
    for (uint32_t t = 0; t < c->pl->workers; t++) {
        const uint32_t *h = wq_hist(c, t, q);
        for (uint32_t b = 0; b < SIEVE__NBINS; b++) hist[b] += h[b];
    }
    uint32_t b = sieve__cpu_bins_kth(hist, c->pl->k, above);
    *in_bin = b < SIEVE__NBINS ? hist[b] : 0;
    return b;
}

static int select_gated(call *c, uint32_t w, uint32_t q, uint64_t *out, size_t *count) {
    const plan *pl = c->pl;
    uint64_t above = 0, in_bin = 0;
    uint32_t b = merged_kth_bin(c, q, &above, &in_bin);
    if (b >= SIEVE__NBINS) return SIEVE_EINTERNAL;
    const sieve__cpu_bins *bins = &c->bins[q];
    int has_above = b + 1 < SIEVE__NBINS;
    float up = has_above ? bins->edge[b + 1] : INFINITY;
    float low = b == 0 ? -INFINITY : bins->edge[b];
    uint64_t *tb = worker_work(c, w);
    size_t nt = 0, m = 0;
    for (uint32_t t = 0; t < pl->workers; t++) {
        const uint64_t *buf = wq_cand(c, t, q);
        uint64_t n = wq_state(c, t, q)->count;
        for (uint64_t i = 0; i < n; i++) {
            float key = sieve__cpu_cand_key(buf[i]);
            if (has_above && key >= up) {
                if (nt >= above) return SIEVE_EINTERNAL;
                out[nt++] = buf[i];
            } else if (key >= low) {
                tb[m++] = buf[i];
            }
        }
    }
    if (nt != above || m != in_bin) return SIEVE_EINTERNAL;
    uint64_t *tmp = worker_tmp(c, w);
    sieve__cpu_smallest_u64(tb, m, pl->k - nt, tmp); /* only the threshold bin is sorted */
    memcpy(out + nt, tb, (size_t)(pl->k - nt) * sizeof *out);
    sieve__cpu_sort_u64(out, pl->k, pl->work >= pl->k ? tmp : NULL);
    *count = pl->k;
    return 0;
}

static void select_worker(void *vc, uint32_t w) {
    call *c = vc;
    const plan *pl = c->pl;
    uint64_t *top = worker_top(c, w);
    for (;;) {
        uint64_t i = atomic_fetch_add(&c->next, 1);
        if (i >= c->n_list) break;
        uint32_t q = c->list[i];
        qstate *s = &c->qs[q];
        size_t count = 0;
        if (s->mode == Q_FULL) {
            count = sieve__cpu_select_slot(slot_mem(c, s->slot), pl->n, pl->k, top,
                                           worker_work(c, w), pl->work);
        } else {
            int rc = select_gated(c, w, q, top, &count);
            if (rc) {
                atomic_store(&c->error, rc);
                count = 0;
            }
        }
        s->count = (uint32_t)count;
        s->mode = Q_DONE;
        sieve__cpu_emit(top, count, pl->k, sieve__cpu_report_metric(c->p), c->qsq[q],
                        c->out_rows + (size_t)q * pl->k, c->out_scores + (size_t)q * pl->k);
    }
}

/* ---------------------------------------------------------------- rounds */

/* Decides what a gated query does after a scan: done (appended to *done), or a recovery. */
static void evaluate_gated(call *c, uint32_t q, int first, sieve_search_stats *st,
                           uint32_t *done, uint32_t *n_done) {
    const plan *pl = c->pl;
    qstate *s = &c->qs[q];
    uint64_t total = 0;
    int over = 0;
    float maxkey = -INFINITY;
    for (uint32_t t = 0; t < pl->workers; t++) {
        const wstate *ws = wq_state(c, t, q);
        total += ws->count;
        if (ws->count > pl->cap) over = 1;
        maxkey = fmaxf(maxkey, ws->maxkey);
    }
    if (first) st->candidates_admitted += total;
    if (!over && total >= pl->k) {
        done[(*n_done)++] = q;
        return;
    }
    if (!over) { /* underfill */
        if (s->path == SIEVE_PATH_CERTIFIED && s->has_secondary && s->secondary < s->thr) {
            s->path = SIEVE_PATH_UNDERFILL;
            s->thr = s->secondary;
            sieve__cpu_bins_init(&c->bins[q], s->thr, fmaxf(s->hi, maxkey));
            return;
        }
    } else if (s->path != SIEVE_PATH_OVERFLOW) {
        uint64_t above = 0, in_bin = 0;
        uint32_t b = merged_kth_bin(c, q, &above, &in_bin);
        /* >= k rows are >= edge[b]: a rescan gated there still holds the top k. It is
         * pointless when it cannot narrow the gate, or when more rows than all the workers'
         * buffers together are already known to pass it (ties at the top). */
        uint64_t known = above + in_bin;
        if (b < SIEVE__NBINS && c->bins[q].edge[b] > s->thr &&
            known <= (uint64_t)pl->workers * pl->cap) {
            s->path = SIEVE_PATH_OVERFLOW;
            s->thr = c->bins[q].edge[b];
            sieve__cpu_bins_init(&c->bins[q], s->thr, maxkey);
            return;
        }
    }
    s->mode = Q_WAIT_FULL;
    s->path = SIEVE_PATH_FULL;
}

static int run_rounds(call *c, uint32_t *list, uint32_t *done, sieve_search_stats *st) {
    const plan *pl = c->pl;
    int first = 1;
    for (;;) {
        uint32_t n_active = 0, slot = 0;
        for (uint32_t q = 0; q < pl->nq; q++) {
            qstate *s = &c->qs[q];
            if (s->mode == Q_WAIT_FULL && slot < pl->slots) {
                s->mode = Q_FULL;
                s->slot = slot++;
            }
            if (s->mode == Q_GATED || s->mode == Q_FULL) list[n_active++] = q;
        }
        if (n_active == 0) return 0;
        for (uint32_t a = 0; a < n_active; a++) {
            uint32_t q = list[a];
            qstate *s = &c->qs[q];
            if (s->scanned) st->rescans++;
            if (s->mode != Q_GATED) continue;
            for (uint32_t t = 0; t < pl->workers; t++) {
                *wq_state(c, t, q) = (wstate){0, s->thr, -INFINITY};
                memset(wq_hist(c, t, q), 0, SIEVE__NBINS * sizeof(uint32_t));
            }
        }
        st->rows_scanned += pl->n * n_active;

        double t0 = sieve__now_ms();
        c->list = list;
        c->n_list = n_active;
        atomic_store(&c->next, 0);
        sieve__cpu_run(pl->workers, scan_worker, c);
        double t1 = sieve__now_ms();
        st->ms_scan += t1 - t0;

        uint32_t n_done = 0;
        for (uint32_t a = 0; a < n_active; a++) {
            uint32_t q = list[a];
            qstate *s = &c->qs[q];
            s->scanned = 1;
            if (s->mode == Q_FULL) done[n_done++] = q;
            else evaluate_gated(c, q, first, st, done, &n_done);
        }
        c->list = done;
        c->n_list = n_done;
        atomic_store(&c->next, 0);
        uint32_t sel_workers = pl->workers < n_done ? pl->workers : n_done;
        if (n_done) sieve__cpu_run(sel_workers, select_worker, c);
        for (uint32_t i = 0; i < n_done; i++) st->path_count[c->qs[done[i]].path]++;
        st->ms_select += sieve__now_ms() - t1;
        int err = atomic_load(&c->error);
        if (err) return err;
        first = 0;
    }
}

int sieve__cpu_knn(const sieve_device *dev, const sieve_matrix *m, const float *queries,
                   uint32_t n_queries, const sieve_search_params *p, void *scratch,
                   size_t scratch_bytes, int64_t *out_rows, float *out_scores,
                   uint32_t *out_counts, uint8_t *out_paths, sieve_search_stats *stats) {
    double t_start = sieve__now_ms();
    if (p->force_boundary && isnan(p->forced_boundary)) return SIEVE_EINVAL;
    /* BLAS takes int sizes */
    if (n_queries > INT_MAX || m->dim > INT_MAX / SIEVE__TILE_ROWS) return SIEVE_EINVAL;
    plan pl;
    int rc = make_plan(dev, m, n_queries, p, &pl);
    if (rc) return rc;
    void *owned = NULL;
    if (!scratch) {
        owned = malloc(pl.total);
        if (!owned) return SIEVE_ENOMEM;
        scratch = owned;
    } else if (scratch_bytes < pl.total) {
        return SIEVE_ENOSPC;
    }
    sieve__cpu_blas_single_thread();

    call c;
    memset(&c, 0, sizeof c);
    c.pl = &pl;
    c.m = m;
    c.p = p;
    c.base = (char *)scratch + ((SIEVE__ALIGN - (uintptr_t)scratch % SIEVE__ALIGN) % SIEVE__ALIGN);
    c.tighten = !(p->flags & SIEVE_SEARCH_NO_TIGHTEN);
    c.out_rows = out_rows;
    c.out_scores = out_scores;
    atomic_init(&c.next, 0);
    atomic_init(&c.error, 0);

    sieve_search_stats st;
    memset(&st, 0, sizeof st);
    st.queries = n_queries;

    float *q = AT(&c, o_q, float);
    float *qsq = AT(&c, o_qsq, float);
    rc = sieve__cpu_prepare_queries(p->metric, queries, n_queries, m->dim, q, qsq);
    if (rc) goto out;
    sieve__cpu_scorer sc;
    sieve__cpu_scorer_init(&sc, m, p->metric, q, n_queries);
    c.sc = &sc;
    c.qsq = qsq;
    c.qs = AT(&c, o_qs, qstate);
    c.bins = AT(&c, o_bins, sieve__cpu_bins);
    c.srows = AT(&c, o_srows, uint32_t);
    c.skeys = AT(&c, o_skeys, float);
    memset(c.qs, 0, (size_t)n_queries * sizeof(qstate));
    c.n_eligible = sieve__cpu_count_eligible(m);

    if (c.n_eligible == 0) {
        for (uint32_t i = 0; i < n_queries; i++) {
            c.qs[i].path = pl.direct ? SIEVE_PATH_DIRECT : SIEVE_PATH_FULL;
            st.path_count[c.qs[i].path]++;
            sieve__cpu_emit(NULL, 0, p->k, p->metric, 0.0f, out_rows + (size_t)i * p->k,
                            out_scores + (size_t)i * p->k);
        }
    } else {
        if (pl.direct || p->k >= c.n_eligible) {
            /* Small rows, or no more eligible rows than k: every eligible row is an answer
             * candidate, nothing to sample. */
            for (uint32_t i = 0; i < n_queries; i++) {
                c.qs[i].mode = Q_WAIT_FULL;
                c.qs[i].path = pl.direct ? SIEVE_PATH_DIRECT : SIEVE_PATH_FULL;
            }
        } else {
            double t0 = sieve__now_ms();
            draw_sample(&c, p->seed);
            st.rows_sampled = (uint64_t)c.n_srows * n_queries;
            atomic_store(&c.next, 0);
            if (c.n_srows) sieve__cpu_run(pl.workers, sample_worker, &c);
            atomic_store(&c.next, 0);
            sieve__cpu_run(pl.workers < n_queries ? pl.workers : n_queries, propose_worker, &c);
            st.ms_sample = sieve__now_ms() - t0;
        }
        uint32_t *lists = AT(&c, o_lists, uint32_t);
        rc = run_rounds(&c, lists, lists + n_queries, &st);
        if (rc) goto out;
    }
    for (uint32_t i = 0; i < n_queries; i++) {
        if (out_counts) out_counts[i] = c.qs[i].count;
        if (out_paths) out_paths[i] = c.qs[i].path;
    }
    st.ms_total = sieve__now_ms() - t_start;
    if (stats) *stats = st;
out:
    free(owned);
    return rc;
}

/* materialized.c: the CPU materialize-then-sort oracle for the fused path.
 * Owns: writing every key of every query into an n_queries x N matrix with the shared tile
 * scorer, then a full sort per query (key descending, row ascending) and the first k.
 * Must not: share any selection logic with knn.c beyond the candidate encoding and the sort,
 * so a selection bug in the fused path cannot hide in its oracle.
 */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

typedef struct mat_call {
    const sieve_matrix *m;
    const sieve__cpu_scorer *sc;
    sieve_metric metric; /* of the reported scores */
    uint32_t k;
    float *keys;      /* nq x n_rows */
    const float *qsq;
    float *xbuf, *kbuf; /* per worker */
    uint64_t *sortbuf;  /* per worker: 2 x n_eligible */
    uint64_t n_eligible;
    atomic_uint_fast64_t next;
    int64_t *out_rows;
    float *out_scores;
    uint32_t *counts;
} mat_call;

static void score_worker(void *vc, uint32_t w) {
    mat_call *c = vc;
    const sieve__cpu_scorer *sc = c->sc;
    float *xbuf = c->xbuf + (size_t)w * sc->tile_rows * sc->dim;
    float *kbuf = c->kbuf + (size_t)w * sc->nq * sc->tile_rows;
    for (;;) {
        uint64_t t = atomic_fetch_add(&c->next, 1);
        if (t >= sc->n_tiles) break;
        uint64_t row0;
        uint32_t nrows;
        sieve__cpu_tile(sc, t, &row0, &nrows);
        sieve__cpu_score_tile(sc, row0, nrows, xbuf, kbuf);
        for (uint32_t q = 0; q < sc->nq; q++)
            memcpy(c->keys + (size_t)q * c->m->n_rows + row0, kbuf + (size_t)q * sc->tile_rows,
                   nrows * sizeof(float));
    }
}

static void sort_worker(void *vc, uint32_t w) {
    mat_call *c = vc;
    uint64_t n_rows = c->m->n_rows;
    uint64_t *a = c->sortbuf + (size_t)w * 2 * c->n_eligible;
    uint64_t *tmp = a + c->n_eligible;
    for (;;) {
        uint64_t q = atomic_fetch_add(&c->next, 1);
        if (q >= c->sc->nq) break;
        const float *kq = c->keys + (size_t)q * n_rows;
        size_t n = 0;
        for (uint64_t r = 0; r < n_rows; r++)
            if (sieve__cpu_eligible(c->m, r)) a[n++] = sieve__cpu_cand(kq[r], (uint32_t)r);
        sieve__cpu_sort_u64(a, n, tmp);
        size_t count = n < c->k ? n : c->k;
        c->counts[q] = (uint32_t)count;
        sieve__cpu_emit(a, count, c->k, c->metric, c->qsq[q], c->out_rows + (size_t)q * c->k,
                        c->out_scores + (size_t)q * c->k);
    }
}

/* n * size, or SIZE_MAX when it overflows. */
static size_t mul(uint64_t n, size_t size) {
    if (size && n > SIZE_MAX / size) return SIZE_MAX;
    return (size_t)n * size;
}

int sieve__cpu_knn_materialized(const sieve_device *dev, const sieve_matrix *m,
                                const float *queries, uint32_t n_queries,
                                const sieve_search_params *p, int64_t *out_rows,
                                float *out_scores, uint32_t *out_counts,
                                sieve_search_stats *stats) {
    double t_start = sieve__now_ms();
    /* BLAS takes int sizes */
    if (n_queries > INT_MAX || m->dim > INT_MAX / SIEVE__TILE_ROWS) return SIEVE_EINVAL;
    sieve__cpu_scorer sc;
    sieve__cpu_scorer_init(&sc, m, p->metric, NULL, n_queries);
    uint64_t workers = dev->threads ? dev->threads : 1;
    if (workers > sc.n_tiles) workers = sc.n_tiles;
    if (workers > 256) workers = 256;
    uint32_t W = (uint32_t)workers;
    uint64_t n_el = sieve__cpu_count_eligible(m);

    mat_call c;
    memset(&c, 0, sizeof c);
    float *q = malloc(mul((uint64_t)n_queries * m->dim, sizeof(float)));
    float *qsq = malloc(mul(n_queries, sizeof(float)));
    c.keys = malloc(mul((uint64_t)n_queries * m->n_rows, sizeof(float)));
    c.xbuf = malloc(mul((uint64_t)W * sc.tile_rows * m->dim, sizeof(float)));
    c.kbuf = malloc(mul((uint64_t)W * n_queries * sc.tile_rows, sizeof(float)));
    c.sortbuf = malloc(mul((uint64_t)W * 2 * (n_el ? n_el : 1), sizeof(uint64_t)));
    c.counts = malloc(mul(n_queries, sizeof(uint32_t)));
    int rc = 0;
    if (!q || !qsq || !c.keys || !c.xbuf || !c.kbuf || !c.sortbuf || !c.counts) {
        rc = SIEVE_ENOMEM;
        goto out;
    }
    rc = sieve__cpu_prepare_queries(p->metric, queries, n_queries, m->dim, q, qsq);
    if (rc) goto out;
    sieve__cpu_blas_single_thread();
    sc.q = q;
    c.m = m;
    c.sc = &sc;
    c.metric = sieve__cpu_report_metric(p);
    c.k = p->k;
    c.qsq = qsq;
    c.n_eligible = n_el;
    c.out_rows = out_rows;
    c.out_scores = out_scores;

    atomic_init(&c.next, 0);
    sieve__cpu_run(W, score_worker, &c);
    double t_scored = sieve__now_ms();
    atomic_store(&c.next, 0);
    sieve__cpu_run(W < n_queries ? W : n_queries, sort_worker, &c);

    if (out_counts) memcpy(out_counts, c.counts, (size_t)n_queries * sizeof(uint32_t));
    if (stats) {
        memset(stats, 0, sizeof *stats);
        stats->queries = n_queries;
        stats->rows_scanned = m->n_rows * n_queries;
        stats->path_count[SIEVE_PATH_FULL] = n_queries;
        stats->ms_scan = t_scored - t_start;
        stats->ms_select = sieve__now_ms() - t_scored;
        stats->ms_total = sieve__now_ms() - t_start;
    }
out:
    free(q);
    free(qsq);
    free(c.keys);
    free(c.xbuf);
    free(c.kbuf);
    free(c.sortbuf);
    free(c.counts);
    return rc;
}

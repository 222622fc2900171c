/* score.c: the CPU tile scorer shared by every CPU search path.
 * Owns: query preparation, the fixed tile grid, the one sgemm per tile, the key definitions
 * (Dot/Cosine: q.x; Euclid: 2 q.x - |x|^2 with |x|^2 from the norm pages), key
 * canonicalisation, row eligibility. Must not: select, allocate, or start threads; every
 * buffer comes from the caller.
 *
 * A tile is the row range [page*rpp + i*T, min(page*rpp + (i+1)*T, page end, n_rows)) with
 * T = min(SIEVE__TILE_ROWS, rows_per_page). It is scored by exactly one BLAS call,
 * cblas_sgemm(RowMajor, Q x X^T) with M = n_queries, N = rows of the tile, K = dim, reading
 * float32 pages in place and float16/bfloat16 pages through a float32 copy of the tile
 * (sieve_convert_to_f32: exact, F16C where the CPU has it). Because the tile grid and the
 * call never depend on the thread count or the path, the fused path, its recoveries and the
 * materialized oracle compute bit-identical keys.
 *
 * One query is the exception that keeps the rule: the call is then cblas_sgemv (X q), for
 * every tile and every path of that search. The product is the same; OpenBLAS's sgemm packs
 * the whole tile for M = 1 and runs about half as fast on this memory-bound shape.
 *
 * Every call has the same shape: a short tile (the last rows of a collection) is scored
 * padded with zero rows to the full tile and the padding's keys are dropped. OpenBLAS
 * computes a short call with other kernels, in another summation order, so identical rows
 * got different keys depending on where they lay, and ties between them were not broken by
 * row (measured with the SkylakeX kernels the server selects: 20,000 identical rows, eight
 * queries, and the last 32 rows, a short tile, outranked row 0 for two of them).
 */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "cpu_internal.h"

int sieve__cpu_prepare_queries(sieve_metric metric, const float *queries, uint32_t nq,
                               uint32_t dim, float *qout, float *qsq) {
    for (uint32_t q = 0; q < nq; q++) {
        const float *src = queries + (size_t)q * dim;
        float *dst = qout + (size_t)q * dim;
        float s = 0.0f, mx = 0.0f;
        for (uint32_t i = 0; i < dim; i++) {
            if (!isfinite(src[i])) return SIEVE_ENONFINITE;
            s = fmaf(src[i], src[i], s);
            mx = fmaxf(mx, fabsf(src[i]));
        }
        qsq[q] = s;
        if (metric == SIEVE_METRIC_COSINE && mx > 0.0f) {
            /* Scale by the largest magnitude first so the sum of squares cannot overflow or
             * underflow, then divide by the norm of the scaled vector. */
            float ss = 0.0f;
            for (uint32_t i = 0; i < dim; i++) {
                float v = src[i] / mx;
                ss = fmaf(v, v, ss);
            }
            float nrm = sqrtf(ss);
            for (uint32_t i = 0; i < dim; i++) dst[i] = (src[i] / mx) / nrm;
        } else {
            memcpy(dst, src, (size_t)dim * sizeof(float));
        }
    }
    return 0;
}

void sieve__cpu_scorer_init(sieve__cpu_scorer *s, const sieve_matrix *m, sieve_metric metric,
                            const float *q, uint32_t nq) {
    uint32_t rpp = m->rows_per_page;
    s->m = m;
    s->metric = metric;
    s->nq = nq;
    s->dim = m->dim;
    s->q = q;
    s->tile_rows = rpp < SIEVE__TILE_ROWS ? rpp : SIEVE__TILE_ROWS;
    s->tiles_per_page = (rpp + s->tile_rows - 1) / s->tile_rows;
    uint64_t full_pages = m->n_rows / rpp;
    uint64_t rest = m->n_rows % rpp;
    s->n_tiles = full_pages * s->tiles_per_page + (rest + s->tile_rows - 1) / s->tile_rows;
}

void sieve__cpu_tile(const sieve__cpu_scorer *s, uint64_t t, uint64_t *row0,
                     uint32_t *nrows) {
    uint32_t rpp = s->m->rows_per_page;
    uint64_t page = t / s->tiles_per_page;
    uint32_t sub = (uint32_t)(t % s->tiles_per_page);
    uint64_t start = page * rpp + (uint64_t)sub * s->tile_rows;
    uint64_t end = start + s->tile_rows;
    if (end > page * rpp + rpp) end = page * rpp + rpp;
    if (end > s->m->n_rows) end = s->m->n_rows;
    *row0 = start;
    *nrows = (uint32_t)(end - start);
}

/* Euclid transform and canonicalisation of an nq x n block of dot products. norms[j] is
 * |x|^2 of column j (Euclid only). */
static void finish_keys(const sieve__cpu_scorer *s, uint32_t n, const float *norms,
                        float *keys) {
    for (uint32_t q = 0; q < s->nq; q++) {
        float *kq = keys + (size_t)q * s->tile_rows;
        if (s->metric == SIEVE_METRIC_EUCLID)
            for (uint32_t j = 0; j < n; j++) kq[j] = 2.0f * kq[j] - norms[j];
        for (uint32_t j = 0; j < n; j++) {
            float x = kq[j];
            if (x != x) kq[j] = -INFINITY; /* NaN ranks last */
            else if (x == 0.0f) kq[j] = 0.0f; /* -0 and +0 are one key */
        }
    }
}

static void blas_tile(const sieve__cpu_scorer *s, const float *x, uint32_t n, float *keys) {
    if (s->nq == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)s->dim, 1.0f, x, (int)s->dim, s->q,
                    1, 0.0f, keys, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)s->nq, (int)n, (int)s->dim,
                    1.0f, s->q, (int)s->dim, x, (int)s->dim, 0.0f, keys, (int)s->tile_rows);
}

void sieve__cpu_score_tile(const sieve__cpu_scorer *s, uint64_t row0, uint32_t nrows,
                           float *xbuf, float *keys) {
    const sieve_matrix *m = s->m;
    uint64_t page = row0 / m->rows_per_page;
    size_t off = (size_t)(row0 % m->rows_per_page);
    size_t esz = sieve_dtype_size(m->dtype);
    const char *src = (const char *)m->pages[page] + off * s->dim * esz;
    const float *x;
    uint32_t n = nrows;
    if (m->dtype == SIEVE_DTYPE_F32 && nrows == s->tile_rows) {
        x = (const float *)(const void *)src;
    } else {
        if (m->dtype == SIEVE_DTYPE_F32)
            memcpy(xbuf, src, (size_t)nrows * s->dim * sizeof(float));
        else
            sieve_convert_to_f32(m->dtype, src, xbuf, (size_t)nrows * s->dim);
        if (nrows < s->tile_rows) { /* a short tile: padded to the full one (see above) */
            memset(xbuf + (size_t)nrows * s->dim, 0,
                   (size_t)(s->tile_rows - nrows) * s->dim * sizeof(float));
            n = s->tile_rows;
        }
        x = xbuf;
    }
    blas_tile(s, x, n, keys);
    const float *norms = NULL;
    if (s->metric == SIEVE_METRIC_EUCLID) norms = m->norm_pages[page] + off;
    finish_keys(s, nrows, norms, keys);
}

void sieve__cpu_score_rows(const sieve__cpu_scorer *s, const uint32_t *rows, uint32_t n,
                           float *xbuf, float *keys) {
    const sieve_matrix *m = s->m;
    size_t esz = sieve_dtype_size(m->dtype);
    uint32_t rpp = m->rows_per_page;
    float norms[SIEVE__TILE_ROWS];
    for (uint32_t j = 0; j < n; j++) {
        uint32_t r = rows[j];
        const char *src = (const char *)m->pages[r / rpp] + (size_t)(r % rpp) * s->dim * esz;
        sieve_convert_to_f32(m->dtype, src, xbuf + (size_t)j * s->dim, s->dim);
        if (s->metric == SIEVE_METRIC_EUCLID) norms[j] = m->norm_pages[r / rpp][r % rpp];
    }
    blas_tile(s, xbuf, n, keys);
    finish_keys(s, n, norms, keys);
}

int sieve__cpu_tile_mask(const sieve_matrix *m, uint64_t row0, uint32_t nrows,
                         uint64_t mask[4]) {
    int all = 1;
    uint32_t words = (nrows + 63) / 64;
    for (uint32_t w = 0; w < 4; w++) mask[w] = 0;
    for (uint32_t w = 0; w < words; w++) {
        uint32_t left = nrows - w * 64;
        uint64_t full = left >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << left) - 1);
        uint64_t bits = full;
        uint64_t idx = row0 / 64 + w;
        if (m->deleted) bits &= ~m->deleted[idx];
        if (m->allowed) bits &= m->allowed[idx];
        mask[w] = bits;
        if (bits != full) all = 0;
    }
    return all;
}

uint64_t sieve__cpu_count_eligible(const sieve_matrix *m) {
    if (!m->deleted && !m->allowed) return m->n_rows;
    uint64_t n = 0, words = (m->n_rows + 63) / 64;
    for (uint64_t w = 0; w < words; w++) {
        uint64_t left = m->n_rows - w * 64;
        uint64_t bits = left >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << left) - 1);
        if (m->deleted) bits &= ~m->deleted[w];
        if (m->allowed) bits &= m->allowed[w];
        n += (uint64_t)__builtin_popcountll(bits);
    }
    return n;
}

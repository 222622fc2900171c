/* reference.c: sieve_knn_reference, the float64 ground truth on host memory.
 * Owns: keys accumulated in double from the stored values (each converted exactly to
 * double), the same key definitions as the kernels (Dot/Cosine: q.x with the query
 * normalised in double for Cosine; Euclid: 2 q.x - |x|^2 with |x|^2 also in double), a full
 * sort (key descending, row ascending). Must not: use BLAS, threads or the tile scorer; it
 * exists to be obviously right, not fast.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sieve_kernels.h"

typedef struct ref_entry {
    double key;
    uint32_t row;
} ref_entry;

static int cmp_entry(const void *pa, const void *pb) {
    const ref_entry *a = pa, *b = pb;
    if (a->key > b->key) return -1;
    if (a->key < b->key) return 1;
    return a->row < b->row ? -1 : a->row > b->row;
}

static double stored(sieve_dtype dtype, const void *row, uint32_t i) {
    switch (dtype) {
    case SIEVE_DTYPE_F16: return (double)sieve_f16_to_f32(((const uint16_t *)row)[i]);
    case SIEVE_DTYPE_BF16: return (double)sieve_bf16_to_f32(((const uint16_t *)row)[i]);
    default: return (double)((const float *)row)[i];
    }
}

static int row_eligible(const sieve_matrix *m, uint64_t r) {
    if (m->deleted && ((m->deleted[r >> 6] >> (r & 63)) & 1u)) return 0;
    if (m->allowed && !((m->allowed[r >> 6] >> (r & 63)) & 1u)) return 0;
    return 1;
}

int sieve_knn_reference(const sieve_matrix *m, const float *queries, uint32_t n_queries,
                        sieve_metric metric, uint32_t k, int64_t *out_rows,
                        double *out_keys, uint32_t *out_counts) {
    if (!m || !queries || !out_rows || n_queries == 0 || k == 0) return SIEVE_EINVAL;
    if ((unsigned)metric > SIEVE_METRIC_EUCLID) return SIEVE_EINVAL;
    if (m->dim == 0 || m->n_rows == 0 || m->n_rows > UINT32_MAX || !m->pages) return SIEVE_EINVAL;
    if (sieve_dtype_size(m->dtype) == 0 || m->rows_per_page == 0 || m->rows_per_page % 64)
        return SIEVE_EINVAL;
    if ((uint64_t)k > m->n_rows) return SIEVE_EINVAL;
    uint32_t dim = m->dim;
    ref_entry *e = malloc((size_t)m->n_rows * sizeof *e);
    double *qd = malloc((size_t)dim * sizeof *qd);
    if (!e || !qd) {
        free(e);
        free(qd);
        return SIEVE_ENOMEM;
    }
    size_t esz = sieve_dtype_size(m->dtype);
    for (uint32_t q = 0; q < n_queries; q++) {
        double nrm = 0.0;
        for (uint32_t i = 0; i < dim; i++) {
            qd[i] = (double)queries[(size_t)q * dim + i];
            nrm += qd[i] * qd[i];
        }
        if (metric == SIEVE_METRIC_COSINE && nrm > 0.0) {
            nrm = sqrt(nrm);
            for (uint32_t i = 0; i < dim; i++) qd[i] /= nrm;
        }
        size_t n = 0;
        for (uint64_t r = 0; r < m->n_rows; r++) {
            if (!row_eligible(m, r)) continue;
            const void *row = (const char *)m->pages[r / m->rows_per_page] +
                              (size_t)(r % m->rows_per_page) * dim * esz;
            double dot = 0.0, sq = 0.0;
            for (uint32_t i = 0; i < dim; i++) {
                double x = stored(m->dtype, row, i);
                dot += qd[i] * x;
                sq += x * x;
            }
            e[n].key = metric == SIEVE_METRIC_EUCLID ? 2.0 * dot - sq : dot;
            e[n].row = (uint32_t)r;
            n++;
        }
        qsort(e, n, sizeof *e, cmp_entry);
        size_t count = n < k ? n : k;
        for (size_t i = 0; i < k; i++) {
            out_rows[(size_t)q * k + i] = i < count ? (int64_t)e[i].row : -1;
            if (out_keys) out_keys[(size_t)q * k + i] = i < count ? e[i].key : NAN;
        }
        if (out_counts) out_counts[q] = (uint32_t)count;
    }
    free(e);
    free(qd);
    return 0;
}

/* kt_util.c: helpers of the kernel test suites (see kt_util.h).
 *
 * The reference tolerance. A float32 dot product of d terms, summed in any order with or
 * without FMA, is within gamma_d * sum|q_i x_i| of the exact value (gamma_d = d u / (1 - d u),
 * u = 2^-24). Stored float16/bfloat16/float32 values convert to float32 and to double exactly,
 * so the storage dtype adds no error of its own: the rows ARE the rounded values, and both
 * sides read the same ones. On top of the dot product: Euclid doubles it and subtracts the
 * float32 |x|^2 (error gamma_d sum x_i^2) with one more rounding (u |key|); Cosine normalises
 * the query in float32 (relative error below (d/2 + 4) u per component). So for every row
 *     |key32 - key64| <= e(row) = gamma * (2 sum|q_i x_i| + sum x_i^2 + |key|),
 *     gamma = (2 d + 8) u,
 * which covers every metric with room to spare. If row a is in one top-k set and not in the
 * other, a row b was ranked the other way round, and chaining the bounds gives
 * |key64(a) - kth64| <= e(a) + e(b) <= 2 E, E = max e over both sets. That is the assertion.
 */
#include "kt_util.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

uint64_t kt_next(kt_rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double kt_uniform(kt_rng *r) { return (double)(kt_next(r) >> 11) * 0x1.0p-53; }

float kt_gauss(kt_rng *r) {
    double u1 = kt_uniform(r), u2 = kt_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

const char *kt_data_name(kt_data d) {
    static const char *names[] = {"gauss", "cluster", "sorted_asc", "sorted_desc",
                                  "equal", "outlier", "narrow",     "dup"};
    return d < KT_DATA_COUNT ? names[d] : "?";
}

static void direction(float *u, uint32_t dim) {
    kt_rng r = {777};
    double s = 0.0;
    for (uint32_t i = 0; i < dim; i++) {
        u[i] = kt_gauss(&r);
        s += (double)u[i] * u[i];
    }
    for (uint32_t i = 0; i < dim; i++) u[i] = (float)(u[i] / sqrt(s));
}

typedef struct keyed {
    double key;
    uint64_t idx;
} keyed;

static int cmp_keyed(const void *pa, const void *pb) {
    const keyed *a = pa, *b = pb;
    return (a->key > b->key) - (a->key < b->key);
}

float *kt_make_rows(kt_data d, uint64_t n, uint32_t dim, uint64_t seed) {
    kt_rng r = {seed * 7919 + 13};
    float *x = malloc((size_t)n * dim * sizeof *x);
    cr_assert_not_null(x);
    for (size_t i = 0; i < (size_t)n * dim; i++) x[i] = kt_gauss(&r);
    switch (d) {
    case KT_GAUSS: break;
    case KT_CLUSTER: {
        float centres[12 * 256];
        cr_assert_leq(dim, 256u);
        for (uint32_t i = 0; i < 12 * dim; i++) centres[i] = 2.0f * kt_gauss(&r);
        for (uint64_t row = 0; row < n; row++) {
            uint32_t c = (uint32_t)(kt_next(&r) % 12);
            for (uint32_t i = 0; i < dim; i++)
                x[row * dim + i] = centres[c * dim + i] + 0.05f * x[row * dim + i];
        }
        break;
    }
    case KT_SORTED_ASC:
    case KT_SORTED_DESC: {
        float *u = malloc(dim * sizeof *u);
        keyed *k = malloc((size_t)n * sizeof *k);
        float *y = malloc((size_t)n * dim * sizeof *y);
        cr_assert(u && k && y);
        direction(u, dim);
        for (uint64_t row = 0; row < n; row++) {
            double s = 0.0;
            for (uint32_t i = 0; i < dim; i++) s += (double)u[i] * x[row * dim + i];
            k[row].key = d == KT_SORTED_ASC ? s : -s;
            k[row].idx = row;
        }
        qsort(k, n, sizeof *k, cmp_keyed);
        for (uint64_t row = 0; row < n; row++)
            memcpy(y + row * dim, x + k[row].idx * dim, dim * sizeof *y);
        free(x);
        free(u);
        free(k);
        x = y;
        break;
    }
    case KT_EQUAL:
        for (uint64_t row = 1; row < n; row++) memcpy(x + row * dim, x, dim * sizeof *x);
        break;
    case KT_OUTLIER:
        for (uint32_t i = 0; i < dim; i++) x[(n * 2 / 3) * dim + i] *= 1000.0f;
        break;
    case KT_NARROW:
        for (uint64_t row = 1; row < n; row++) {
            memcpy(x + row * dim, x, dim * sizeof *x);
            uint32_t i = (uint32_t)(kt_next(&r) % dim);
            float v = x[row * dim + i];
            int steps = (int)(kt_next(&r) % 5) - 2;
            float toward = steps > 0 ? INFINITY : -INFINITY;
            for (int s = 0; s < abs(steps); s++) v = nextafterf(v, toward);
            x[row * dim + i] = v;
        }
        break;
    case KT_DUP: {
        uint64_t distinct = n < 37 ? n : 37;
        for (uint64_t row = distinct; row < n; row++)
            memcpy(x + row * dim, x + (kt_next(&r) % distinct) * dim, dim * sizeof *x);
        break;
    }
    default: break;
    }
    return x;
}

float *kt_make_queries(kt_data d, uint32_t nq, uint32_t dim, uint64_t seed) {
    kt_rng r = {seed * 104729 + 5};
    float *q = malloc((size_t)nq * dim * sizeof *q);
    cr_assert_not_null(q);
    float *u = malloc(dim * sizeof *u);
    cr_assert_not_null(u);
    direction(u, dim);
    for (uint32_t j = 0; j < nq; j++)
        for (uint32_t i = 0; i < dim; i++) {
            float g = kt_gauss(&r);
            q[(size_t)j * dim + i] =
                (d == KT_SORTED_ASC || d == KT_SORTED_DESC) ? 3.0f * u[i] + 0.3f * g : g;
        }
    free(u);
    return q;
}

void kt_normalise(float *rows, uint64_t n, uint32_t dim) {
    for (uint64_t r = 0; r < n; r++) {
        double s = 0.0;
        for (uint32_t i = 0; i < dim; i++) s += (double)rows[r * dim + i] * rows[r * dim + i];
        if (s > 0)
            for (uint32_t i = 0; i < dim; i++)
                rows[r * dim + i] = (float)(rows[r * dim + i] / sqrt(s));
    }
}

void kt_matrix_build(kt_matrix *t, sieve_dtype dtype, uint32_t dim, uint64_t n,
                     uint32_t rows_per_page, const float *rows) {
    memset(t, 0, sizeof *t);
    size_t esz = sieve_dtype_size(dtype);
    t->n_pages = (size_t)((n + rows_per_page - 1) / rows_per_page);
    t->pages = calloc(t->n_pages, sizeof *t->pages);
    t->norms = calloc(t->n_pages, sizeof *t->norms);
    cr_assert(t->pages && t->norms);
    for (size_t pg = 0; pg < t->n_pages; pg++) {
        t->pages[pg] = malloc((size_t)rows_per_page * dim * esz);
        t->norms[pg] = malloc((size_t)rows_per_page * sizeof(float));
        cr_assert(t->pages[pg] && t->norms[pg]);
        for (uint32_t i = 0; i < rows_per_page; i++) {
            uint64_t r = (uint64_t)pg * rows_per_page + i;
            if (r >= n) break;
            char *dst = (char *)t->pages[pg] + (size_t)i * dim * esz;
            sieve_convert_from_f32(dtype, rows + r * dim, dst, dim);
            t->norms[pg][i] = sieve_row_sqnorm(dtype, dst, dim);
        }
    }
    t->m.dtype = dtype;
    t->m.dim = dim;
    t->m.n_rows = n;
    t->m.rows_per_page = rows_per_page;
    t->m.pages = (const void *const *)t->pages;
    t->m.norm_pages = (const float *const *)t->norms;
}

void kt_matrix_free(kt_matrix *t) {
    for (size_t pg = 0; pg < t->n_pages; pg++) {
        free(t->pages[pg]);
        free(t->norms[pg]);
    }
    free(t->pages);
    free(t->norms);
    free(t->deleted);
    free(t->allowed);
    memset(t, 0, sizeof *t);
}

uint64_t *kt_matrix_deleted(kt_matrix *t) {
    t->deleted = calloc((size_t)((t->m.n_rows + 63) / 64), sizeof(uint64_t));
    cr_assert_not_null(t->deleted);
    t->m.deleted = t->deleted;
    return t->deleted;
}

uint64_t *kt_matrix_allowed(kt_matrix *t) {
    t->allowed = calloc((size_t)((t->m.n_rows + 63) / 64), sizeof(uint64_t));
    cr_assert_not_null(t->allowed);
    t->m.allowed = t->allowed;
    return t->allowed;
}

void kt_bit_set(uint64_t *bits, uint64_t r) { bits[r >> 6] |= (uint64_t)1 << (r & 63); }

static double stored_value(const sieve_matrix *m, uint64_t row, uint32_t i) {
    const char *p = (const char *)m->pages[row / m->rows_per_page] +
                    (size_t)(row % m->rows_per_page) * m->dim * sieve_dtype_size(m->dtype);
    float v;
    if (m->dtype == SIEVE_DTYPE_F32) memcpy(&v, p + (size_t)i * 4, 4);
    else {
        uint16_t h;
        memcpy(&h, p + (size_t)i * 2, 2);
        v = m->dtype == SIEVE_DTYPE_F16 ? sieve_f16_to_f32(h) : sieve_bf16_to_f32(h);
    }
    return (double)v;
}

double kt_row_key(const sieve_matrix *m, const float *query, uint64_t row, sieve_metric metric,
                  double *bound) {
    double nrm = 1.0;
    if (metric == SIEVE_METRIC_COSINE) {
        double s = 0.0;
        for (uint32_t i = 0; i < m->dim; i++) s += (double)query[i] * query[i];
        if (s > 0) nrm = sqrt(s);
    }
    double dot = 0.0, sq = 0.0, abs_dot = 0.0;
    for (uint32_t i = 0; i < m->dim; i++) {
        double x = stored_value(m, row, i), q = (double)query[i] / nrm;
        dot += q * x;
        abs_dot += fabs(q * x);
        sq += x * x;
    }
    double key = metric == SIEVE_METRIC_EUCLID ? 2.0 * dot - sq : dot;
    if (bound) *bound = 2.0 * abs_dot + sq + fabs(key);
    return key;
}

void kt_check_fused_vs_oracle(sieve_device *dev, const sieve_matrix *m, const float *queries,
                              uint32_t nq, const sieve_search_params *p, const char *what,
                              sieve_search_stats *stats, int64_t *rows, float *scores,
                              uint32_t *counts, uint8_t *paths) {
    size_t nk = (size_t)nq * p->k;
    int64_t *fr = malloc(nk * sizeof *fr), *mr = malloc(nk * sizeof *mr);
    float *fs = malloc(nk * sizeof *fs), *ms = malloc(nk * sizeof *ms);
    uint32_t *fc = malloc(nq * sizeof *fc), *mc = malloc(nq * sizeof *mc);
    uint8_t *fp = malloc(nq);
    cr_assert(fr && mr && fs && ms && fc && mc && fp);
    sieve_search_stats st;
    int rc = sieve_knn(dev, m, queries, nq, p, NULL, 0, fr, fs, fc, fp, &st);
    cr_assert_eq(rc, 0, "%s: sieve_knn returned %d (%s)", what, rc, sieve_strerror(rc));
    rc = sieve_knn_materialized(dev, m, queries, nq, p, mr, ms, mc, NULL);
    cr_assert_eq(rc, 0, "%s: materialized returned %d", what, rc);
    for (uint32_t q = 0; q < nq; q++) {
        cr_assert_eq(fc[q], mc[q], "%s: query %u: fused count %u, oracle count %u", what, q,
                     fc[q], mc[q]);
        for (uint32_t i = 0; i < p->k; i++) {
            size_t at = (size_t)q * p->k + i;
            cr_assert_eq(fr[at], mr[at],
                         "%s: query %u rank %u (path %u): fused row %lld (%.9g), oracle row "
                         "%lld (%.9g)",
                         what, q, i, fp[q], (long long)fr[at], fs[at], (long long)mr[at], ms[at]);
            cr_assert_eq(memcmp(&fs[at], &ms[at], sizeof(float)), 0,
                         "%s: query %u rank %u row %lld: fused score %.9g, oracle %.9g", what,
                         q, i, (long long)fr[at], fs[at], ms[at]);
        }
    }
    uint64_t sum = 0;
    for (int i = 0; i < SIEVE_PATH_COUNT; i++) sum += st.path_count[i];
    cr_assert_eq(sum, nq, "%s: path counts add to %llu, queries %u", what,
                 (unsigned long long)sum, nq);
    cr_assert_eq(st.queries, nq);
    if (stats) *stats = st;
    if (rows) memcpy(rows, fr, nk * sizeof *fr);
    if (scores) memcpy(scores, fs, nk * sizeof *fs);
    if (counts) memcpy(counts, fc, nq * sizeof *fc);
    if (paths) memcpy(paths, fp, nq);
    free(fr);
    free(mr);
    free(fs);
    free(ms);
    free(fc);
    free(mc);
    free(fp);
}

static int cmp_i64(const void *pa, const void *pb) {
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

static int contains(const int64_t *sorted, size_t n, int64_t v) {
    return bsearch(&v, sorted, n, sizeof v, cmp_i64) != NULL;
}

void kt_check_reference(const sieve_matrix *m, const float *queries, uint32_t nq_check,
                        sieve_metric metric, uint32_t k, const int64_t *rows,
                        const float *scores, const uint32_t *counts, const char *what) {
    size_t nk = (size_t)nq_check * k;
    int64_t *rr = malloc(nk * sizeof *rr);
    double *rk = malloc(nk * sizeof *rk);
    uint32_t *rc_ = malloc(nq_check * sizeof *rc_);
    int64_t *a = malloc(k * sizeof *a), *b = malloc(k * sizeof *b);
    cr_assert(rr && rk && rc_ && a && b);
    int rc = sieve_knn_reference(m, queries, nq_check, metric, k, rr, rk, rc_);
    cr_assert_eq(rc, 0, "%s: reference returned %d", what, rc);
    const double gamma = (2.0 * m->dim + 8.0) * 0x1.0p-24;
    for (uint32_t q = 0; q < nq_check; q++) {
        const float *query = queries + (size_t)q * m->dim;
        uint32_t n = counts[q];
        cr_assert_eq(n, rc_[q], "%s: query %u: count %u, reference %u", what, q, n, rc_[q]);
        for (uint32_t i = n; i < k; i++) {
            cr_assert_eq(rows[(size_t)q * k + i], -1, "%s: query %u: padding row %lld", what,
                         q, (long long)rows[(size_t)q * k + i]);
            cr_assert(isnan(scores[(size_t)q * k + i]), "%s: query %u: padding score %g", what,
                      q, scores[(size_t)q * k + i]);
        }
        if (n == 0) continue;
        const int64_t *fr = rows + (size_t)q * k, *gr = rr + (size_t)q * k;
        double kth = rk[(size_t)q * k + n - 1];
        double e_max = 0.0;
        for (uint32_t i = 0; i < n; i++) {
            cr_assert(fr[i] >= 0 && (uint64_t)fr[i] < m->n_rows, "%s: query %u: bad row %lld",
                      what, q, (long long)fr[i]);
            uint64_t r = (uint64_t)fr[i];
            int deleted = m->deleted && ((m->deleted[r >> 6] >> (r & 63)) & 1u);
            int allowed = !m->allowed || ((m->allowed[r >> 6] >> (r & 63)) & 1u);
            cr_assert(!deleted && allowed, "%s: query %u: row %lld is not eligible", what, q,
                      (long long)fr[i]);
            double bound;
            double key = kt_row_key(m, query, (uint64_t)fr[i], metric, &bound);
            e_max = fmax(e_max, gamma * bound);
            if (metric != SIEVE_METRIC_EUCLID)
                cr_assert_leq(fabs((double)scores[(size_t)q * k + i] - key), gamma * bound,
                              "%s: query %u row %lld: score %.9g, float64 key %.17g", what, q,
                              (long long)fr[i], scores[(size_t)q * k + i], key);
            kt_row_key(m, query, (uint64_t)gr[i], metric, &bound);
            e_max = fmax(e_max, gamma * bound);
        }
        memcpy(a, fr, n * sizeof *a);
        memcpy(b, gr, n * sizeof *b);
        qsort(a, n, sizeof *a, cmp_i64);
        qsort(b, n, sizeof *b, cmp_i64);
        double tol = 2.0 * e_max;
        for (uint32_t i = 0; i < n; i++) {
            cr_assert(i == 0 || a[i] != a[i - 1], "%s: query %u: row %lld returned twice", what,
                      q, (long long)a[i]);
            if (!contains(b, n, a[i])) {
                double key = kt_row_key(m, query, (uint64_t)a[i], metric, NULL);
                cr_assert_leq(fabs(key - kth), tol,
                              "%s: query %u: row %lld (float64 key %.17g) is not in the "
                              "reference top-%u (k-th key %.17g, tolerance %.3g)",
                              what, q, (long long)a[i], key, k, kth, tol);
            }
            if (!contains(a, n, b[i])) {
                double key = kt_row_key(m, query, (uint64_t)b[i], metric, NULL);
                cr_assert_leq(fabs(key - kth), tol,
                              "%s: query %u: reference row %lld (float64 key %.17g) is "
                              "missing (k-th key %.17g, tolerance %.3g)",
                              what, q, (long long)b[i], key, kth, tol);
            }
        }
    }
    free(rr);
    free(rk);
    free(rc_);
    free(a);
    free(b);
}

kt_attend_result kt_attend64(const float *qh, const float *kf, const float *vf, uint32_t kv_heads,
                             uint32_t g, uint32_t D, uint32_t Dv, double scale,
                             const uint32_t *set, uint32_t n, double *out) {
    const double u = 0x1.0p-24;
    kt_attend_result r = {-INFINITY, 0.0, 0.0};
    for (uint32_t v = 0; v < Dv; v++) out[v] = 0.0;
    if (n == 0) return r;
    double *s = malloc(n * sizeof *s), *b = malloc(n * sizeof *b);
    cr_assert(s && b);
    double M = -INFINITY, V = 0.0;
    for (uint32_t j = 0; j < n; j++) {
        const size_t key = set ? set[j] : j;
        const float *kj = kf + (key * kv_heads + g) * D;
        double dot = 0.0, ab = 0.0;
        for (uint32_t d = 0; d < D; d++) {
            dot += (double)qh[d] * kj[d];
            ab += fabs((double)qh[d] * kj[d]);
        }
        s[j] = scale * dot;
        b[j] = ab;
        M = fmax(M, s[j]);
        const float *vj = vf + (key * kv_heads + g) * Dv;
        for (uint32_t v = 0; v < Dv; v++) V = fmax(V, fabs((double)vj[v]));
    }
    double l = 0.0;
    for (uint32_t j = 0; j < n; j++) l += exp(s[j] - M);
    double W = 0.0;
    for (uint32_t j = 0; j < n; j++) {
        const double w = exp(s[j] - M) / l;
        const size_t key = set ? set[j] : j;
        const float *vj = vf + (key * kv_heads + g) * Dv;
        for (uint32_t v = 0; v < Dv; v++) out[v] += w * vj[v];
        W += w * (fabs(scale) * (D + 4) * u * b[j] + u * (M - s[j]) + 2.0 * u);
    }
    r.lse = M + log(l);
    r.tol_out = V * (2.5 * W + (2.0 * n + 8.0) * u);
    r.tol_lse = 1.5 * W + (n + 8.0) * u + 2.0 * u * (fabs(r.lse) + log((double)n) + 1.0);
    free(s);
    free(b);
    return r;
}

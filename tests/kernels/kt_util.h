/* kt_util.h: helpers of the kernel test suites: paged host matrices, data sets, a PRNG and
 * an independent float64 key for single rows. Must not: call the code under test to build
 * expected values (the norm pages use sieve_row_sqnorm by contract). */
#ifndef KT_UTIL_H
#define KT_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "sieve_kernels.h"

typedef struct kt_rng {
    uint64_t s;
} kt_rng;

uint64_t kt_next(kt_rng *r);
double kt_uniform(kt_rng *r); /* [0, 1) */
float kt_gauss(kt_rng *r);

typedef enum kt_data {
    KT_GAUSS,       /* iid N(0,1) */
    KT_CLUSTER,     /* 12 centres, small spread */
    KT_SORTED_ASC,  /* rows ascending by their dot with a fixed direction */
    KT_SORTED_DESC, /* descending */
    KT_EQUAL,       /* every row identical */
    KT_OUTLIER,     /* Gaussian plus one row scaled by 1000 */
    KT_NARROW,      /* one vector with last-bit perturbations: keys within a few ulps */
    KT_DUP,         /* 37 distinct vectors repeated all over the rows */
    KT_DATA_COUNT
} kt_data;

const char *kt_data_name(kt_data d);

/* n x dim float32 rows of data set d (caller frees). */
float *kt_make_rows(kt_data d, uint64_t n, uint32_t dim, uint64_t seed);
/* nq x dim queries; for the sorted sets they lie near the sorting direction. */
float *kt_make_queries(kt_data d, uint32_t nq, uint32_t dim, uint64_t seed);
/* Normalises each of n rows in place (what the store does for Cosine collections). */
void kt_normalise(float *rows, uint64_t n, uint32_t dim);

/* A paged host matrix as the store would hand it to the CPU device. */
typedef struct kt_matrix {
    sieve_matrix m;
    void **pages;
    float **norms;
    uint64_t *deleted;
    uint64_t *allowed;
    size_t n_pages;
} kt_matrix;

/* Builds pages of rows_per_page rows (the last one partially filled, each page malloc'd
 * separately) from float32 rows converted to dtype, with norm pages (sieve_row_sqnorm). */
void kt_matrix_build(kt_matrix *t, sieve_dtype dtype, uint32_t dim, uint64_t n,
                     uint32_t rows_per_page, const float *rows);
void kt_matrix_free(kt_matrix *t);
/* Allocates a zeroed deleted / allowed bitmap and attaches it. */
uint64_t *kt_matrix_deleted(kt_matrix *t);
uint64_t *kt_matrix_allowed(kt_matrix *t);
void kt_bit_set(uint64_t *bits, uint64_t r);

/* Float64 key of one row (an implementation independent of sieve_knn_reference), and the
 * sum bound A = 2 sum|q_i x_i| + sum x_i^2 + |key| used for the float32 error bound. */
double kt_row_key(const sieve_matrix *m, const float *query, uint64_t row, sieve_metric metric,
                  double *bound);

/* Runs sieve_knn and sieve_knn_materialized and asserts identical rows, score bits and
 * counts; returns the fused stats. rows/scores/counts/paths receive the fused answer when
 * not NULL. */
void kt_check_fused_vs_oracle(sieve_device *dev, const sieve_matrix *m, const float *queries,
                              uint32_t nq, const sieve_search_params *p, const char *what,
                              sieve_search_stats *stats, int64_t *rows, float *scores,
                              uint32_t *counts, uint8_t *paths);

/* Checks the fused answer (rows/counts of nq_check queries, k each) against
 * sieve_knn_reference within the float32 tolerance described in kt_util.c. */
void kt_check_reference(const sieve_matrix *m, const float *queries, uint32_t nq_check,
                        sieve_metric metric, uint32_t k, const int64_t *rows,
                        const float *scores, const uint32_t *counts, const char *what);

/* The float64 attention of one query head (qh: D floats) over keys set[0 .. n) of kv head g
 * (set NULL: keys 0 .. n - 1) of kf (rows of kv_heads x D floats) and vf (kv_heads x Dv),
 * scale applied to the dots, into out (Dv doubles); n == 0 gives out 0 and lse -inf. Also
 * the error bounds of a float32 computation in the CPU backends' order (u = 2^-24; per key
 * e_j = |scale| (D + 4) u sum_d |q k| + u (max - s_j) + 2 u, W = sum_j w_j e_j, V the
 * largest |value| read): tol_out = V (2.5 W + (2n + 8) u), tol_lse = 1.5 W + (n + 8) u +
 * 2 u (|lse| + log n + 1). Independent of the code under test. */
typedef struct kt_attend_result {
    double lse, tol_out, tol_lse;
} kt_attend_result;
kt_attend_result kt_attend64(const float *qh, const float *kf, const float *vf, uint32_t kv_heads,
                             uint32_t g, uint32_t D, uint32_t Dv, double scale,
                             const uint32_t *set, uint32_t n, double *out);

#endif

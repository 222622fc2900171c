/* adversarial.c: matrices that break naive top-k selection (sorted scores, ties, one huge
 * outlier, a narrow band, duplicates), built around a given query. Must not: keep state;
 * row i is a pure function of (kind, query, n, seed, i), so any range can be generated alone.
 *
 * Construction (see the header): row = r + t * qhat, where qhat = q/|q| and r is a Gaussian
 * vector with its qhat component removed, scaled to |r| = 0.5. The exact score is |q| * t;
 * r adds spread in the other directions so rows are not collinear (a kernel cannot shortcut
 * them) while leaving the score where t puts it. Everything is computed in double and rounded
 * once to float32. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ds_internal.h"

enum { STREAM_ADV = 100, STREAM_ADV_OUTLIER = 200 };
#define ORTHO_NORM 0.5

static const char *const ADV_NAMES[] = {"sorted-asc", "sorted-desc", "ties",  "outlier",
                                        "narrow-band", "duplicates", "random"};

const char *sieve_ds_adv_name(sieve_ds_adv_kind kind) {
    if ((unsigned)kind >= sizeof ADV_NAMES / sizeof ADV_NAMES[0]) return NULL;
    return ADV_NAMES[kind];
}

int sieve_ds_adv_parse(const char *name, sieve_ds_adv_kind *out) {
    if (!name || !out) return SIEVE_EINVAL;
    for (size_t i = 0; i < sizeof ADV_NAMES / sizeof ADV_NAMES[0]; i++)
        if (!strcmp(name, ADV_NAMES[i])) {
            *out = (sieve_ds_adv_kind)i;
            return 0;
        }
    return SIEVE_EINVAL;
}

/* Row `base` of the seeded orthogonal family plus t * qhat, into x. */
static void ortho_row(const double *qhat, uint32_t dim, uint64_t seed, uint64_t base, double t,
                      double *tmp, float *x) {
    sieve_rng r;
    sieve_rng_init(&r, seed, STREAM_ADV, base);
    double dot = 0.0;
    for (uint32_t j = 0; j < dim; j++) {
        tmp[j] = sieve_rng_normal(&r);
        dot += tmp[j] * qhat[j];
    }
    double nn = 0.0;
    for (uint32_t j = 0; j < dim; j++) {
        tmp[j] -= dot * qhat[j];
        nn += tmp[j] * tmp[j];
    }
    /* dim 1 (or a draw parallel to q) leaves nothing orthogonal: then r = 0. */
    double sc = nn > 1e-300 ? ORTHO_NORM / sqrt(nn) : 0.0;
    for (uint32_t j = 0; j < dim; j++) x[j] = (float)(tmp[j] * sc + t * qhat[j]);
}

static uint64_t outlier_row(uint64_t n, uint64_t seed) {
    sieve_rng r;
    sieve_rng_init(&r, seed, STREAM_ADV_OUTLIER, 0);
    return sieve_rng_below(&r, n);
}

int sieve_ds_adv_rows(sieve_ds_adv_kind kind, const float *q, uint32_t dim, uint64_t n,
                      uint64_t seed, uint64_t row0, size_t count, float *out,
                      sieve_ds_adv_info *info) {
    if (!q || (!out && count) || dim == 0 || n == 0 || !sieve_ds_adv_name(kind))
        return SIEVE_EINVAL;
    if (row0 > n || count > n - row0) return SIEVE_ERANGE;
    double qn = 0.0;
    for (uint32_t j = 0; j < dim; j++) {
        if (!isfinite(q[j])) return SIEVE_EINVAL;
        qn += (double)q[j] * (double)q[j];
    }
    if (!(qn > 0.0)) return SIEVE_EINVAL;
    qn = sqrt(qn);
    const uint64_t m = (n + 3) / 4; /* distinct rows of DUPLICATES */
    const uint64_t orow = outlier_row(n, seed);
    if (info) {
        info->outlier_row = kind == SIEVE_DS_ADV_OUTLIER ? orow : UINT64_MAX;
        info->distinct = kind == SIEVE_DS_ADV_DUPLICATES ? m : kind == SIEVE_DS_ADV_TIES ? 1 : n;
    }
    if (count == 0) return 0;
    double *qhat = malloc(2 * (size_t)dim * sizeof(double));
    if (!qhat) return SIEVE_ENOMEM;
    double *tmp = qhat + dim;
    for (uint32_t j = 0; j < dim; j++) qhat[j] = (double)q[j] / qn;

    for (size_t k = 0; k < count; k++) {
        const uint64_t i = row0 + k;
        float *x = out + k * (size_t)dim;
        double t;
        uint64_t base = i;
        sieve_rng r;
        switch (kind) {
        case SIEVE_DS_ADV_SORTED_ASC:
        case SIEVE_DS_ADV_SORTED_DESC: {
            uint64_t pos = kind == SIEVE_DS_ADV_SORTED_ASC ? i : n - 1 - i;
            t = n > 1 ? -1.0 + 2.0 * (double)pos / (double)(n - 1) : 0.0;
            break;
        }
        case SIEVE_DS_ADV_TIES:
            base = 0;
            t = 0.5;
            break;
        case SIEVE_DS_ADV_OUTLIER:
            if (i == orow) {
                for (uint32_t j = 0; j < dim; j++)
                    x[j] = (float)(SIEVE_DS_ADV_OUTLIER_SCALE * qhat[j]);
                continue;
            }
            sieve_rng_init(&r, seed, STREAM_ADV + 1, i);
            t = 2.0 * sieve_rng_uniform(&r) - 1.0;
            break;
        case SIEVE_DS_ADV_NARROW_BAND:
            sieve_rng_init(&r, seed, STREAM_ADV + 1, i);
            t = 0.5 + SIEVE_DS_ADV_BAND_WIDTH * sieve_rng_uniform(&r);
            break;
        case SIEVE_DS_ADV_DUPLICATES:
            base = i % m;
            sieve_rng_init(&r, seed, STREAM_ADV + 1, base);
            t = 2.0 * sieve_rng_uniform(&r) - 1.0;
            break;
        case SIEVE_DS_ADV_RANDOM:
        default:
            sieve_rng_init(&r, seed, STREAM_ADV + 1, i);
            t = 2.0 * sieve_rng_uniform(&r) - 1.0;
            break;
        }
        ortho_row(qhat, dim, seed, base, t, tmp, x);
    }
    free(qhat);
    return 0;
}

int sieve_ds_adversarial_fill(sieve_ds_adv_kind kind, const float *q, uint32_t dim, size_t n,
                              uint64_t seed, float *out, sieve_ds_adv_info *info) {
    return sieve_ds_adv_rows(kind, q, dim, n, seed, 0, n, out, info);
}

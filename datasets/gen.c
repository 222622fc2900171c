/* gen.c: the seeded random number generator and the synthetic vector generators (Gaussian,
 * clustered mixture, MS MARCO-shaped). Must not: keep global state. Every row and query is a
 * pure function of (parameters, index) through counter-style seeding, so output never
 * depends on chunk sizes or thread counts, and any range can be regenerated on its own. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ds_internal.h"

/* Stream numbers: one independent sequence family per purpose. */
enum { STREAM_ROWS = 1, STREAM_QUERIES = 2, STREAM_CENTRES = 3, STREAM_MEAN = 4 };

/* ------------------------------------------------------------ random numbers */

static uint64_t mix64(uint64_t z) { /* splitmix64's finaliser: a bijection on 64 bits */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void sieve_rng_init(sieve_rng *r, uint64_t seed, uint64_t stream, uint64_t index) {
    /* Chained mixing: for a fixed (seed, stream) the starting point is a bijection of index,
     * so distinct rows never share a state. */
    uint64_t h = mix64(seed + 0x9e3779b97f4a7c15ull);
    h = mix64(h ^ (stream * 0xd1b54a32d192ed03ull));
    h = mix64(h ^ index);
    for (int i = 0; i < 4; i++) {
        h += 0x9e3779b97f4a7c15ull;
        r->s[i] = mix64(h);
    }
    r->has_spare = 0;
    r->spare = 0.0;
}

uint64_t sieve_rng_u64(sieve_rng *r) { /* xoshiro256** */
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double sieve_rng_uniform(sieve_rng *r) {
    return (double)(sieve_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

uint64_t sieve_rng_below(sieve_rng *r, uint64_t n) {
    if (n <= 1) return 0;
    /* Rejection from the largest multiple of n below 2^64. */
    uint64_t limit = UINT64_MAX - (UINT64_MAX % n);
    uint64_t x;
    do x = sieve_rng_u64(r);
    while (x >= limit);
    return x % n;
}

double sieve_rng_normal(sieve_rng *r) {
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double u, v, s; /* Marsaglia's polar method */
    do {
        u = 2.0 * sieve_rng_uniform(r) - 1.0;
        v = 2.0 * sieve_rng_uniform(r) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    double m = sqrt(-2.0 * log(s) / s);
    r->spare = v * m;
    r->has_spare = 1;
    return u * m;
}

/* ------------------------------------------------------------ helpers */

/* Scales x[0..n) to unit length (norm accumulated in double). A zero vector stays zero. */
static void normalise_f(float *x, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
    if (s <= 0.0) return;
    double inv = 1.0 / sqrt(s);
    for (size_t i = 0; i < n; i++) x[i] = (float)((double)x[i] * inv);
}

static void normals_f(sieve_rng *r, float *x, size_t n, double scale) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(scale * sieve_rng_normal(r));
}

/* ------------------------------------------------------------ generators */

struct sieve_ds_gen {
    sieve_ds_gen_params p;
    float *centres; /* clusters x dim, unit length (clustered kinds) */
};

void sieve_ds_gen_params_init(sieve_ds_gen_params *p, sieve_ds_gen_kind kind) {
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->dim = 768;
    p->count = 1000000;
    p->normalize = 0;
    p->clusters = 1024;
    p->spread = 1.0f;
    p->anisotropy = 0.5f;
    p->query_noise = 0.5f;
    if (kind == SIEVE_DS_GEN_MSMARCO) {
        p->dim = SIEVE_DS_MSMARCO_DIM;
        p->count = SIEVE_DS_MSMARCO_PASSAGES;
        p->clusters = 4096;
        p->spread = 1.0f;
        p->anisotropy = 0.55f;
        p->query_noise = 0.6f;
    }
}

static int clustered(const sieve_ds_gen *g) { return g->p.kind != SIEVE_DS_GEN_GAUSSIAN; }

int sieve_ds_gen_create(const sieve_ds_gen_params *p, sieve_ds_gen **out, sieve_ds_error *err) {
    if (out) *out = NULL;
    if (!p || !out) return sieve__ds_fail(err, SIEVE_EINVAL, "generator: NULL argument");
    if (p->kind != SIEVE_DS_GEN_GAUSSIAN && p->kind != SIEVE_DS_GEN_CLUSTERED &&
        p->kind != SIEVE_DS_GEN_MSMARCO)
        return sieve__ds_fail(err, SIEVE_EINVAL, "generator: unknown kind %d", (int)p->kind);
    if (p->dim == 0 || p->dim > SIEVE_DS_MAX_DIM)
        return sieve__ds_fail(err, SIEVE_EINVAL, "generator: dimension %u; expected 1 to %u",
                              p->dim, SIEVE_DS_MAX_DIM);
    if (p->count == 0)
        return sieve__ds_fail(err, SIEVE_EINVAL, "generator: count 0; expected at least 1 row");
    if (p->kind == SIEVE_DS_GEN_MSMARCO &&
        (p->dim != SIEVE_DS_MSMARCO_DIM || p->count > SIEVE_DS_MSMARCO_PASSAGES))
        return sieve__ds_fail(err, SIEVE_ERANGE,
                              "generator: MS MARCO preset with %llu x %u; expected dimension %u "
                              "and at most %u passages",
                              (unsigned long long)p->count, p->dim, SIEVE_DS_MSMARCO_DIM,
                              SIEVE_DS_MSMARCO_PASSAGES);
    if (p->kind != SIEVE_DS_GEN_GAUSSIAN) {
        if (p->clusters == 0 || p->clusters > (1u << 24))
            return sieve__ds_fail(err, SIEVE_EINVAL,
                                  "generator: %u clusters; expected 1 to 16777216", p->clusters);
        if (!(p->spread >= 0.0f) || !(p->query_noise >= 0.0f) || !isfinite(p->spread) ||
            !isfinite(p->query_noise))
            return sieve__ds_fail(err, SIEVE_EINVAL,
                                  "generator: spread %g, query noise %g; expected finite values "
                                  ">= 0",
                                  (double)p->spread, (double)p->query_noise);
        if (!(p->anisotropy >= 0.0f && p->anisotropy < 1.0f))
            return sieve__ds_fail(err, SIEVE_EINVAL,
                                  "generator: anisotropy %g; expected a value in [0, 1)",
                                  (double)p->anisotropy);
    }
    sieve_ds_gen *g = calloc(1, sizeof *g);
    if (!g) return sieve__ds_fail(err, SIEVE_ENOMEM, "generator: out of memory");
    g->p = *p;
    if (clustered(g)) {
        const size_t d = p->dim;
        g->centres = malloc((size_t)p->clusters * d * sizeof(float));
        float *m = malloc(d * sizeof(float));
        if (!g->centres || !m) {
            free(m);
            sieve_ds_gen_destroy(g);
            return sieve__ds_fail(err, SIEVE_ENOMEM,
                                  "generator: out of memory for %u x %u centres", p->clusters,
                                  p->dim);
        }
        sieve_rng r;
        sieve_rng_init(&r, p->seed, STREAM_MEAN, 0);
        normals_f(&r, m, d, 1.0);
        normalise_f(m, d);
        const double a = p->anisotropy, b = sqrt(1.0 - a * a);
        for (uint32_t k = 0; k < p->clusters; k++) {
            float *c = g->centres + (size_t)k * d;
            sieve_rng_init(&r, p->seed, STREAM_CENTRES, k);
            normals_f(&r, c, d, 1.0);
            normalise_f(c, d);
            for (size_t j = 0; j < d; j++) c[j] = (float)(a * m[j] + b * c[j]);
            normalise_f(c, d);
        }
        free(m);
    }
    *out = g;
    return 0;
}

void sieve_ds_gen_destroy(sieve_ds_gen *g) {
    if (!g) return;
    free(g->centres);
    free(g);
}

const sieve_ds_gen_params *sieve_ds_gen_params_get(const sieve_ds_gen *g) { return &g->p; }

/* Row i into x (dim floats). */
static void gen_row(const sieve_ds_gen *g, uint64_t i, float *x) {
    const size_t d = g->p.dim;
    sieve_rng r;
    sieve_rng_init(&r, g->p.seed, STREAM_ROWS, i);
    if (!clustered(g)) {
        normals_f(&r, x, d, 1.0);
        if (g->p.normalize) normalise_f(x, d);
        return;
    }
    const float *c = g->centres + (size_t)sieve_rng_below(&r, g->p.clusters) * d;
    const double sc = (double)g->p.spread / sqrt((double)d);
    for (size_t j = 0; j < d; j++) x[j] = (float)((double)c[j] + sc * sieve_rng_normal(&r));
    normalise_f(x, d);
}

int sieve_ds_gen_rows(const sieve_ds_gen *g, uint64_t row0, size_t n, float *out) {
    if (!g || (!out && n)) return SIEVE_EINVAL;
    if (row0 > g->p.count || n > g->p.count - row0) return SIEVE_ERANGE;
    for (size_t i = 0; i < n; i++) gen_row(g, row0 + i, out + i * (size_t)g->p.dim);
    return 0;
}

int sieve_ds_gen_queries(const sieve_ds_gen *g, uint64_t q0, size_t n, float *out,
                         uint64_t *sources) {
    if (!g || (!out && n)) return SIEVE_EINVAL;
    const size_t d = g->p.dim;
    for (size_t i = 0; i < n; i++) {
        float *q = out + i * d;
        sieve_rng r;
        sieve_rng_init(&r, g->p.seed, STREAM_QUERIES, q0 + i);
        if (!clustered(g)) {
            normals_f(&r, q, d, 1.0);
            if (g->p.normalize) normalise_f(q, d);
            if (sources) sources[i] = UINT64_MAX;
            continue;
        }
        uint64_t src = sieve_rng_below(&r, g->p.count);
        gen_row(g, src, q);
        const double sc = (double)g->p.query_noise / sqrt((double)d);
        for (size_t j = 0; j < d; j++) q[j] = (float)((double)q[j] + sc * sieve_rng_normal(&r));
        normalise_f(q, d);
        if (sources) sources[i] = src;
    }
    return 0;
}

int sieve_ds_gen_cluster_of(const sieve_ds_gen *g, uint64_t row, uint32_t *cluster) {
    if (!g || !cluster || !clustered(g)) return SIEVE_EINVAL;
    if (row >= g->p.count) return SIEVE_ERANGE;
    sieve_rng r;
    sieve_rng_init(&r, g->p.seed, STREAM_ROWS, row);
    *cluster = (uint32_t)sieve_rng_below(&r, g->p.clusters);
    return 0;
}

int sieve_ds_gen_centre(const sieve_ds_gen *g, uint32_t k, float *out) {
    if (!g || !out || !clustered(g)) return SIEVE_EINVAL;
    if (k >= g->p.clusters) return SIEVE_ERANGE;
    memcpy(out, g->centres + (size_t)k * g->p.dim, (size_t)g->p.dim * sizeof(float));
    return 0;
}

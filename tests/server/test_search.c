/* test_search.c: black-box tests of sieve-server's search routes: exact results against
 * the kernel module's float64 reference (sieve_knn_reference) for every metric and stored
 * dtype, offset/limit/score_threshold, payload and vector selection, filters (checked
 * against a predicate evaluated here), the batch and query forms, and every validation
 * error. The reference matrix is built from the vectors the server reports back, so the
 * comparison sees exactly the stored (normalised, rounded) values. */
#define _GNU_SOURCE /* vasprintf, open_memstream */
#include <math.h>

#include "sieve_kernels.h"
#include <pthread.h>

#include "tcommon.h"

TestSuite(search, .init = fixture_init, .fini = fixture_fini);

#define ID0 1000u

typedef struct dataset {
    uint32_t n, dim;
    sieve_metric metric;
    sieve_dtype dtype;
    float *raw;      /* what was uploaded */
    float *stored;   /* what the server reports it stores */
    void *pagebuf;   /* stored values in dtype, rows_per_page 64 */
    float *norms;
    const void **pages;
    const float **norm_pages;
    sieve_matrix m;
} dataset;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* Payload fields of point i: i, g = i % 5, tag = "t" + i % 3, flag = i even. */
static void payload_json(uint32_t i, char *buf, size_t n) {
    snprintf(buf, n, "{\"i\":%u,\"g\":%u,\"tag\":\"t%u\",\"flag\":%s,\"arr\":[%u,%u]}", i,
             i % 5, i % 3, i % 2 ? "false" : "true", i % 7, 100 + i % 11);
}

static char *vec_json(const float *v, uint32_t dim) {
    size_t cap = (size_t)dim * 20 + 8, off = 0;
    char *s = malloc(cap);
    cr_assert(s);
    s[off++] = '[';
    for (uint32_t d = 0; d < dim; d++)
        off += (size_t)snprintf(s + off, cap - off, "%s%.9g", d ? "," : "", (double)v[d]);
    snprintf(s + off, cap - off, "]");
    return s;
}

/* Creates collection `name`, uploads n random points (ids ID0 + i), reads them back. */
static void make_dataset(dataset *ds, const char *name, uint32_t n, uint32_t dim,
                         sieve_metric metric, sieve_dtype dtype) {
    memset(ds, 0, sizeof *ds);
    ds->n = n;
    ds->dim = dim;
    ds->metric = metric;
    ds->dtype = dtype;
    char path[128];
    snprintf(path, sizeof path, "/collections/%s", name);
    go("PUT", path, "{\"vectors\":{\"size\":%u,\"distance\":\"%s\",\"datatype\":\"%s\"}}", dim,
       sieve_metric_name(metric), sieve_dtype_name(dtype));
    ok_result();
    ds->raw = malloc((size_t)n * dim * sizeof(float));
    ds->stored = malloc((size_t)n * dim * sizeof(float));
    cr_assert(ds->raw && ds->stored);
    for (size_t i = 0; i < (size_t)n * dim; i++) ds->raw[i] = frand();
    /* Upload in two requests, one per form. */
    size_t cap = (size_t)n * (dim * 20 + 200) + 64;
    char *body = malloc(cap);
    cr_assert(body);
    uint32_t half = n / 2;
    size_t off = (size_t)snprintf(body, cap, "{\"points\":[");
    for (uint32_t i = 0; i < half; i++) {
        char pl[160];
        payload_json(i, pl, sizeof pl);
        char *v = vec_json(ds->raw + (size_t)i * dim, dim);
        off += (size_t)snprintf(body + off, cap - off, "%s{\"id\":%u,\"vector\":%s,\"payload\":%s}",
                                i ? "," : "", ID0 + i, v, pl);
        free(v);
    }
    snprintf(body + off, cap - off, "]}");
    snprintf(path, sizeof path, "/collections/%s/points?wait=true", name);
    go_raw("PUT", path, body);
    ok_result();
    off = (size_t)snprintf(body, cap, "{\"batch\":{\"ids\":[");
    for (uint32_t i = half; i < n; i++)
        off += (size_t)snprintf(body + off, cap - off, "%s%u", i > half ? "," : "", ID0 + i);
    off += (size_t)snprintf(body + off, cap - off, "],\"vectors\":[");
    for (uint32_t i = half; i < n; i++) {
        char *v = vec_json(ds->raw + (size_t)i * dim, dim);
        off += (size_t)snprintf(body + off, cap - off, "%s%s", i > half ? "," : "", v);
        free(v);
    }
    off += (size_t)snprintf(body + off, cap - off, "],\"payloads\":[");
    for (uint32_t i = half; i < n; i++) {
        char pl[160];
        payload_json(i, pl, sizeof pl);
        off += (size_t)snprintf(body + off, cap - off, "%s%s", i > half ? "," : "", pl);
    }
    snprintf(body + off, cap - off, "]}}");
    go_raw("PUT", path, body);
    ok_result();

    /* Read every vector back as stored. */
    off = (size_t)snprintf(body, cap, "{\"with_vector\":true,\"with_payload\":false,\"ids\":[");
    for (uint32_t i = 0; i < n; i++)
        off += (size_t)snprintf(body + off, cap - off, "%s%u", i ? "," : "", ID0 + i);
    snprintf(body + off, cap - off, "]}");
    snprintf(path, sizeof path, "/collections/%s/points", name);
    go_raw("POST", path, body);
    free(body);
    json_t *res = ok_result();
    cr_assert_eq(json_array_size(res), n, "retrieve returned %zu of %u", json_array_size(res), n);
    size_t k;
    json_t *rec;
    json_array_foreach(res, k, rec) {
        uint32_t i = (uint32_t)(json_integer_value(json_object_get(rec, "id")) - ID0);
        cr_assert(i < n, "unexpected id");
        json_t *v = json_object_get(rec, "vector");
        cr_assert_eq(json_array_size(v), dim);
        for (uint32_t d = 0; d < dim; d++)
            ds->stored[(size_t)i * dim + d] = (float)json_number_value(json_array_get(v, d));
    }
    /* The host matrix the reference searches: the stored values in the stored dtype. */
    size_t es = sieve_dtype_size(dtype);
    uint32_t rpp = 64, pages = (n + rpp - 1) / rpp;
    ds->pagebuf = calloc((size_t)pages * rpp * dim, es);
    ds->norms = calloc((size_t)pages * rpp, sizeof(float));
    ds->pages = calloc(pages, sizeof *ds->pages);
    ds->norm_pages = calloc(pages, sizeof *ds->norm_pages);
    cr_assert(ds->pagebuf && ds->norms && ds->pages && ds->norm_pages);
    sieve_convert_from_f32(dtype, ds->stored, ds->pagebuf, (size_t)n * dim);
    for (uint32_t i = 0; i < n; i++)
        ds->norms[i] = sieve_row_sqnorm(dtype, (char *)ds->pagebuf + (size_t)i * dim * es, dim);
    for (uint32_t p = 0; p < pages; p++) {
        ds->pages[p] = (char *)ds->pagebuf + (size_t)p * rpp * dim * es;
        ds->norm_pages[p] = ds->norms + (size_t)p * rpp;
    }
    ds->m.dtype = dtype;
    ds->m.dim = dim;
    ds->m.n_rows = n;
    ds->m.rows_per_page = rpp;
    ds->m.pages = ds->pages;
    ds->m.norm_pages = ds->norm_pages;
}

static void free_dataset(dataset *ds) {
    free(ds->raw);
    free(ds->stored);
    free(ds->pagebuf);
    free(ds->norms);
    free(ds->pages);
    free(ds->norm_pages);
}

/* The query as the kernel sees it (normalised for Cosine). */
static void prep_query(const dataset *ds, const float *q, float *out) {
    memcpy(out, q, ds->dim * sizeof(float));
    if (ds->metric != SIEVE_METRIC_COSINE) return;
    double s = 0;
    for (uint32_t d = 0; d < ds->dim; d++) s += (double)q[d] * q[d];
    s = sqrt(s);
    if (s > 0)
        for (uint32_t d = 0; d < ds->dim; d++) out[d] = (float)(q[d] / s);
}

/* Ranking key of row i in double (larger is better), as the reference defines it. */
static double key_of(const dataset *ds, const float *q, uint32_t i) {
    double dot = 0, nn = 0;
    for (uint32_t d = 0; d < ds->dim; d++) {
        double x = ds->stored[(size_t)i * ds->dim + d];
        dot += (double)q[d] * x;
        nn += x * x;
    }
    return ds->metric == SIEVE_METRIC_EUCLID ? 2 * dot - nn : dot;
}

/* Qdrant's score for a key: the key itself, or the distance for Euclid. */
static double score_of(const dataset *ds, const float *q, double key) {
    if (ds->metric != SIEVE_METRIC_EUCLID) return key;
    double qq = 0;
    for (uint32_t d = 0; d < ds->dim; d++) qq += (double)q[d] * q[d];
    return sqrt(fmax(0.0, qq - key));
}

/* The CUDA kernels round the query to the storage type before the tensor-core products (as
 * FAISS's float16 GPU index does; see kernels/sieve_kernels.h), so a key computed on a GPU
 * may differ from the float32-query key by up to u * sum_d |q_d x_d| (twice that for
 * Euclid's 2 q.x), u = 2^-11 for float16 and 2^-8 for bfloat16 storage. On the CPU the query
 * stays float32 and this is 0. */
static double device_query_err(const dataset *ds, const float *q, uint32_t row) {
    const char *dev = getenv("SIEVE_TEST_DEVICE");
    if (!dev || strncmp(dev, "cuda", 4) || ds->dtype == SIEVE_DTYPE_F32) return 0;
    double u = ds->dtype == SIEVE_DTYPE_F16 ? 1.0 / 2048 : 1.0 / 256;
    double mag = 0;
    for (uint32_t d = 0; d < ds->dim; d++)
        mag += fabs((double)q[d] * ds->stored[(size_t)row * ds->dim + d]);
    return u * mag * (ds->metric == SIEVE_METRIC_EUCLID ? 2 : 1);
}

typedef struct expect {
    uint32_t limit, offset;
    const uint64_t *allowed;
    int has_threshold;
    double threshold;
    int with_payload, with_vector;
} expect;

/* Checks a ScoredPoint list against the reference top-k. Near ties (keys within
 * tolerance) may come in either order; anything else must match exactly. */
static void check_points(const char *what, const json_t *pts, const dataset *ds,
                         const float *query, const expect *x) {
    float q[256];
    prep_query(ds, query, q);
    uint32_t k = x->offset + x->limit;
    if (k > ds->n) k = ds->n;
    int64_t *rows = malloc(k * sizeof *rows);
    double *keys = malloc(k * sizeof *keys);
    uint32_t count = 0;
    sieve_matrix m = ds->m;
    m.allowed = x->allowed;
    int rc = sieve_knn_reference(&m, q, 1, ds->metric, k, rows, keys, &count);
    cr_assert_eq(rc, 0, "sieve_knn_reference: %s", sieve_strerror(rc));
    uint32_t want = count > x->offset ? count - x->offset : 0;
    if (x->has_threshold) {
        uint32_t keep = 0;
        for (uint32_t j = 0; j < want; j++) {
            double s = score_of(ds, q, keys[x->offset + j]);
            int pass = ds->metric == SIEVE_METRIC_EUCLID ? s <= x->threshold : s >= x->threshold;
            if (!pass) break;
            keep++;
        }
        want = keep;
    }
    cr_assert(json_is_array(pts), "%s: not an array", what);
    cr_assert_eq(json_array_size(pts), want, "%s: expected %u points, got %zu: %s", what, want,
                 json_array_size(pts), R.body);
    for (uint32_t j = 0; j < want; j++) {
        json_t *p = json_array_get(pts, j);
        json_int_t id = json_integer_value(json_object_get(p, "id"));
        uint32_t row = (uint32_t)(id - ID0);
        cr_assert(id >= ID0 && row < ds->n, "%s[%u]: bad id %lld", what, j, (long long)id);
        double rkey = keys[x->offset + j];
        double gerr = device_query_err(ds, q, row);
        double tol = 1e-4 * (1 + fabs(rkey)) + gerr +
                     device_query_err(ds, q, (uint32_t)rows[x->offset + j]);
        if ((int64_t)row != rows[x->offset + j]) {
            double kk = key_of(ds, q, row);
            cr_assert(fabs(kk - rkey) <= tol,
                      "%s[%u]: got id %lld (key %.9g), reference has id %lld (key %.9g)", what,
                      j, (long long)id, kk, (long long)(rows[x->offset + j] + ID0), rkey);
        }
        cr_assert(x->allowed == NULL || (x->allowed[row >> 6] >> (row & 63) & 1),
                  "%s[%u]: id %lld does not pass the filter", what, j, (long long)id);
        double got = json_number_value(json_object_get(p, "score"));
        double exp = score_of(ds, q, rkey);
        if (ds->metric == SIEVE_METRIC_EUCLID) {
            /* The distance comes from |q|^2 - key in float32: compare squared distances
             * with a tolerance relative to the magnitudes that cancel. */
            double qq = 0;
            for (uint32_t d = 0; d < ds->dim; d++) qq += (double)q[d] * q[d];
            cr_assert(fabs(got * got - exp * exp) <= 1e-5 * (1 + qq + exp * exp) + tol,
                      "%s[%u]: distance %.9g, expected %.9g", what, j, got, exp);
        } else {
            cr_assert(fabs(got - exp) <= 1e-4 * (1 + fabs(exp)) + tol,
                      "%s[%u]: score %.9g, expected %.9g", what, j, got, exp);
        }
        cr_assert(json_is_integer(json_object_get(p, "version")), "%s: no version", what);
        json_t *pl = json_object_get(p, "payload");
        if (x->with_payload) {
            cr_assert_eq(json_integer_value(json_object_get(pl, "i")), row, "%s: payload", what);
        } else {
            cr_assert(pl == NULL || json_is_null(pl), "%s: unexpected payload", what);
        }
        json_t *v = json_object_get(p, "vector");
        if (x->with_vector) {
            cr_assert_eq(json_array_size(v), ds->dim, "%s: vector", what);
            for (uint32_t d = 0; d < ds->dim; d++)
                cr_assert_eq((float)json_number_value(json_array_get(v, d)),
                             ds->stored[(size_t)row * ds->dim + d], "%s: vector[%u]", what, d);
        } else {
            cr_assert(v == NULL || json_is_null(v), "%s: unexpected vector", what);
        }
    }
    free(rows);
    free(keys);
}

/* Runs searches of every form on ds and checks each against the reference. */
static void exact_suite(const char *name, sieve_metric metric, sieve_dtype dtype) {
    START(END);
    dataset ds;
    make_dataset(&ds, name, 300, 24, metric, dtype);
    char path[160], what[96];
    enum { NQ = 5 };
    float qs[NQ][24];
    char *qj[NQ];
    for (int i = 0; i < NQ; i++) {
        for (int d = 0; d < 24; d++) qs[i][d] = frand();
        qj[i] = vec_json(qs[i], 24);
    }
    for (int i = 0; i < NQ; i++) {
        expect x = {.limit = 10};
        snprintf(path, sizeof path, "/collections/%s/points/search", name);
        go("POST", path, "{\"vector\":%s,\"limit\":10}", qj[i]);
        snprintf(what, sizeof what, "search q%d", i);
        check_points(what, ok_result(), &ds, qs[i], &x);

        x.limit = 7;
        x.offset = 5;
        x.with_payload = 1;
        x.with_vector = 1;
        snprintf(path, sizeof path, "/collections/%s/points/query", name);
        go("POST", path, "{\"query\":%s,\"limit\":7,\"offset\":5,\"with_payload\":true,"
                         "\"with_vector\":true}", qj[i]);
        snprintf(what, sizeof what, "query q%d", i);
        check_points(what, json_object_get(ok_result(), "points"), &ds, qs[i], &x);

        expect y = {.limit = 10}; /* query's default limit */
        go("POST", path, "{\"query\":{\"nearest\":%s}}", qj[i]);
        snprintf(what, sizeof what, "query nearest q%d", i);
        check_points(what, json_object_get(ok_result(), "points"), &ds, qs[i], &y);
    }
    /* Batches: every search of the batch is answered (in one kernel call if the batcher
     * groups them, which it should: same k, no filter). */
    char *body = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&body, &blen);
    fprintf(f, "{\"searches\":[");
    for (int i = 0; i < NQ; i++) fprintf(f, "%s{\"vector\":%s,\"limit\":%d}", i ? "," : "", qj[i], 3 + i);
    fprintf(f, "]}");
    fclose(f);
    snprintf(path, sizeof path, "/collections/%s/points/search/batch", name);
    go_raw("POST", path, body);
    free(body);
    json_t *res = ok_result();
    cr_assert_eq(json_array_size(res), NQ, "%s", R.body);
    for (int i = 0; i < NQ; i++) {
        expect x = {.limit = (uint32_t)(3 + i)};
        snprintf(what, sizeof what, "search/batch[%d]", i);
        check_points(what, json_array_get(res, (size_t)i), &ds, qs[i], &x);
    }
    f = open_memstream(&body, &blen);
    fprintf(f, "{\"searches\":[");
    for (int i = 0; i < NQ; i++)
        fprintf(f, "%s{\"query\":{\"nearest\":%s},\"limit\":4,\"with_payload\":true}", i ? "," : "",
                qj[i]);
    fprintf(f, "]}");
    fclose(f);
    snprintf(path, sizeof path, "/collections/%s/points/query/batch", name);
    go_raw("POST", path, body);
    free(body);
    res = ok_result();
    cr_assert_eq(json_array_size(res), NQ, "%s", R.body);
    for (int i = 0; i < NQ; i++) {
        expect x = {.limit = 4, .with_payload = 1};
        snprintf(what, sizeof what, "query/batch[%d]", i);
        check_points(what, json_object_get(json_array_get(res, (size_t)i), "points"), &ds, qs[i],
                     &x);
    }
    for (int i = 0; i < NQ; i++) free(qj[i]);
    free_dataset(&ds);
    stop_ok();
}

Test(search, exact_dot_float32) { exact_suite("dot32", SIEVE_METRIC_DOT, SIEVE_DTYPE_F32); }
Test(search, exact_cosine_float32) {
    exact_suite("cos32", SIEVE_METRIC_COSINE, SIEVE_DTYPE_F32);
}
Test(search, exact_euclid_float32) {
    exact_suite("euc32", SIEVE_METRIC_EUCLID, SIEVE_DTYPE_F32);
}
Test(search, exact_dot_float16) { exact_suite("dot16", SIEVE_METRIC_DOT, SIEVE_DTYPE_F16); }
Test(search, exact_euclid_bfloat16) {
    exact_suite("eucbf", SIEVE_METRIC_EUCLID, SIEVE_DTYPE_BF16);
}

/* Re-reads the stored vectors of every live id (after writes) and rebuilds the reference
 * matrix; alive gets the bitmap of ids that still exist. */
static void reload_dataset(dataset *ds, const char *name, uint64_t *alive) {
    size_t cap = (size_t)ds->n * 12 + 128;
    char *body = malloc(cap);
    cr_assert(body);
    size_t off = (size_t)snprintf(body, cap, "{\"with_vector\":true,\"with_payload\":false,\"ids\":[");
    for (uint32_t i = 0; i < ds->n; i++)
        off += (size_t)snprintf(body + off, cap - off, "%s%u", i ? "," : "", ID0 + i);
    snprintf(body + off, cap - off, "]}");
    char path[128];
    snprintf(path, sizeof path, "/collections/%s/points", name);
    go_raw("POST", path, body);
    free(body);
    json_t *res = ok_result();
    memset(alive, 0, ((ds->n + 63) / 64) * sizeof *alive);
    size_t k;
    json_t *rec;
    json_array_foreach(res, k, rec) {
        uint32_t i = (uint32_t)(json_integer_value(json_object_get(rec, "id")) - ID0);
        cr_assert(i < ds->n);
        alive[i >> 6] |= 1ull << (i & 63);
        json_t *v = json_object_get(rec, "vector");
        for (uint32_t d = 0; d < ds->dim; d++)
            ds->stored[(size_t)i * ds->dim + d] = (float)json_number_value(json_array_get(v, d));
    }
    size_t es = sieve_dtype_size(ds->dtype);
    sieve_convert_from_f32(ds->dtype, ds->stored, ds->pagebuf, (size_t)ds->n * ds->dim);
    for (uint32_t i = 0; i < ds->n; i++)
        ds->norms[i] = sieve_row_sqnorm(ds->dtype, (char *)ds->pagebuf + (size_t)i * ds->dim * es,
                                        ds->dim);
}

/* Searches see every acknowledged write: overwritten vectors, deletes, re-inserts (on a
 * GPU, SIEVE_TEST_DEVICE=cuda:0, this checks that the page cache refreshes). */
static void writes_visible(int workers) {
    if (workers > 1) START("--batch-workers", "3", "--host-page-cache", END);
    else START(END);
    dataset ds;
    make_dataset(&ds, "w", 200, 16, SIEVE_METRIC_EUCLID, SIEVE_DTYPE_F32);
    uint64_t alive[4];
    float q[16];
    for (int round = 0; round < 4; round++) {
        /* round 0: as uploaded; then overwrite 20 vectors, delete 20 points, re-insert 10 */
        if (round == 1) {
            char *body = NULL;
            size_t blen = 0;
            FILE *f = open_memstream(&body, &blen);
            fprintf(f, "{\"points\":[");
            for (int i = 0; i < 20; i++) {
                float v[16];
                for (int d = 0; d < 16; d++) v[d] = frand() * 0.1f;
                char *vj = vec_json(v, 16);
                fprintf(f, "%s{\"id\":%u,\"vector\":%s}", i ? "," : "", ID0 + (unsigned)i * 9, vj);
                free(vj);
            }
            fprintf(f, "]}");
            fclose(f);
            go_raw("PUT", "/collections/w/points", body);
            free(body);
            ok_result();
        } else if (round == 2) {
            go("POST", "/collections/w/points/delete", "{\"filter\":{\"must\":[{\"key\":\"i\","
                                                      "\"range\":{\"gte\":100,\"lt\":120}}]}}");
            ok_result();
        } else if (round == 3) {
            char *body = NULL;
            size_t blen = 0;
            FILE *f = open_memstream(&body, &blen);
            fprintf(f, "{\"points\":[");
            for (int i = 0; i < 10; i++) {
                char *vj = vec_json(ds.raw + (size_t)(100 + i) * 16, 16);
                fprintf(f, "%s{\"id\":%u,\"vector\":%s}", i ? "," : "", ID0 + 100 + (unsigned)i, vj);
                free(vj);
            }
            fprintf(f, "]}");
            fclose(f);
            go_raw("PUT", "/collections/w/points", body);
            free(body);
            ok_result();
        }
        reload_dataset(&ds, "w", alive);
        for (int t = 0; t < 3; t++) {
            for (int d = 0; d < 16; d++) q[d] = frand();
            char *qj = vec_json(q, 16);
            go("POST", "/collections/w/points/search", "{\"vector\":%s,\"limit\":25}", qj);
            free(qj);
            char what[64];
            snprintf(what, sizeof what, "round %d q%d", round, t);
            expect x = {.limit = 25, .allowed = alive};
            check_points(what, ok_result(), &ds, q, &x);
        }
    }
    long long live = 0;
    for (uint32_t i = 0; i < ds.n; i++) live += (long long)(alive[i >> 6] >> (i & 63) & 1);
    /* 20 deleted by the filter, less the 2 overwritten without payload (108, 117), and 10
     * re-inserted of which 108 was never gone: 200 - 18 + 9. */
    cr_assert_eq(live, 191);
    cr_assert_eq(api_count("w"), live);
    free_dataset(&ds);
    stop_ok();
}

Test(search, writes_are_visible_to_the_next_search) { writes_visible(1); }

/* The same with three batch workers sharing one page cache (on the CPU, the host copy that
 * runs the GPU cache's refresh code): a worker's kept snapshot must not hide a write. */
Test(search, writes_are_visible_with_several_batch_workers) { writes_visible(3); }


/* ---------------------------------------------------------------- filters */

static int f_g2(uint32_t i) { return i % 5 == 2; }
static int f_t1(uint32_t i) { return i % 3 == 1; }
static int f_flag(uint32_t i) { return i % 2 == 0; }
static int f_any13(uint32_t i) { return i % 5 == 1 || i % 5 == 3; }
static int f_not0(uint32_t i) { return i % 5 != 0; }
static int f_should(uint32_t i) { return i % 5 == 1 || i % 3 == 2; }
static int f_range(uint32_t i) { return i >= 40 && i < 90; }
static int f_hasid(uint32_t i) { return i == 3 || i == 17 || i == 150 || i == 151; }
static int f_nested(uint32_t i) { return (i % 5 == 1 || i % 5 == 2) && i < 120 && i % 2; }
static int f_except(uint32_t i) { return i % 5 > 2; }
static int f_minshould(uint32_t i) {
    return (i % 5 == 1) + (i % 2 == 0) + (i % 3 == 2) >= 2;
}
static int f_none(uint32_t i) { return 0; }
static int f_arr(uint32_t i) { return i % 7 == 4 || 100 + i % 11 == 104; }
static int f_rangef(uint32_t i) { return (double)i > 10.5 && (double)i <= 20.25; }
static int f_mixed(uint32_t i) { return i % 3 != 0 && !(i >= 100 && i <= 199) && i % 5 != 4; }

static const struct {
    const char *json;
    int (*pred)(uint32_t);
} filters[] = {
    {"{\"must\":[{\"key\":\"g\",\"match\":{\"value\":2}}]}", f_g2},
    {"{\"must\":[{\"key\":\"tag\",\"match\":{\"value\":\"t1\"}}]}", f_t1},
    {"{\"must\":{\"key\":\"flag\",\"match\":{\"value\":true}}}", f_flag},
    {"{\"must\":[{\"key\":\"g\",\"match\":{\"any\":[1,3]}}]}", f_any13},
    {"{\"must_not\":[{\"key\":\"g\",\"match\":{\"value\":0}}]}", f_not0},
    {"{\"should\":[{\"key\":\"g\",\"match\":{\"value\":1}},{\"key\":\"tag\",\"match\":{\"any\":"
     "[\"t2\"]}}]}", f_should},
    {"{\"must\":[{\"key\":\"i\",\"range\":{\"gte\":40,\"lt\":90}}]}", f_range},
    {"{\"must\":[{\"has_id\":[1003,1017,1150,1151,99999]}]}", f_hasid},
    {"{\"must\":[{\"should\":[{\"key\":\"g\",\"match\":{\"value\":1}},{\"key\":\"g\",\"match\":"
     "{\"value\":2}}]},{\"key\":\"i\",\"range\":{\"lt\":120}}],\"must_not\":[{\"key\":\"flag\","
     "\"match\":{\"value\":true}}]}", f_nested},
    {"{\"must\":[{\"key\":\"g\",\"match\":{\"except\":[0,1,2]}}]}", f_except},
    {"{\"min_should\":{\"conditions\":[{\"key\":\"g\",\"match\":{\"value\":1}},{\"key\":\"flag\","
     "\"match\":{\"value\":true}},{\"key\":\"tag\",\"match\":{\"value\":\"t2\"}}],\"min_count\":2}}",
     f_minshould},
    {"{\"must\":[{\"key\":\"tag\",\"match\":{\"value\":\"nope\"}}]}", f_none},
    {"{\"must\":[{\"key\":\"arr\",\"match\":{\"any\":[4,104]}}]}", f_arr},
    {"{\"must\":[{\"key\":\"i\",\"range\":{\"gt\":10.5,\"lte\":20.25}}]}", f_rangef},
    {"{\"must_not\":[{\"key\":\"tag\",\"match\":{\"value\":\"t0\"}},{\"key\":\"i\",\"range\":"
     "{\"gte\":100,\"lte\":199}}],\"must\":[{\"key\":\"g\",\"match\":{\"except\":[4]}}]}", f_mixed},
};

Test(search, filters_are_exact_and_fill_the_limit) {
    START(END);
    dataset ds;
    make_dataset(&ds, "f", 240, 8, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32);
    uint64_t mask[4];
    for (size_t fi = 0; fi < sizeof filters / sizeof filters[0]; fi++) {
        memset(mask, 0, sizeof mask);
        uint32_t matches = 0;
        for (uint32_t i = 0; i < ds.n; i++)
            if (filters[fi].pred(i)) {
                mask[i >> 6] |= 1ull << (i & 63);
                matches++;
            }
        go("POST", "/collections/f/points/count", "{\"filter\":%s}", filters[fi].json);
        cr_assert_eq(json_integer_value(json_object_get(ok_result(), "count")), matches,
                     "filter %zu (%s): count", fi, filters[fi].json);
        for (int qi = 0; qi < 2; qi++) {
            float q[8];
            for (int d = 0; d < 8; d++) q[d] = frand();
            char *qj = vec_json(q, 8);
            uint32_t limit = qi ? 30 : 5;
            go("POST", "/collections/f/points/search",
               "{\"vector\":%s,\"limit\":%u,\"filter\":%s,\"with_payload\":true}", qj, limit,
               filters[fi].json);
            char what[64];
            snprintf(what, sizeof what, "filter %zu q%d", fi, qi);
            json_t *res = ok_result();
            uint32_t want = matches < limit ? matches : limit;
            cr_assert_eq(json_array_size(res), want,
                         "%s: %u points match, limit %u, got %zu", what, matches, limit,
                         json_array_size(res));
            expect x = {.limit = limit, .allowed = mask, .with_payload = 1};
            check_points(what, res, &ds, q, &x);
            free(qj);
        }
    }
    /* Filtered batch: mixed filters in one request. */
    float q[8];
    for (int d = 0; d < 8; d++) q[d] = frand();
    char *qj = vec_json(q, 8);
    go("POST", "/collections/f/points/search/batch",
       "{\"searches\":[{\"vector\":%s,\"limit\":6,\"filter\":%s},{\"vector\":%s,\"limit\":6},"
       "{\"vector\":%s,\"limit\":6,\"filter\":%s}]}", qj, filters[0].json, qj, qj,
       filters[6].json);
    json_t *res = ok_result();
    memset(mask, 0, sizeof mask);
    for (uint32_t i = 0; i < ds.n; i++)
        if (f_g2(i)) mask[i >> 6] |= 1ull << (i & 63);
    expect x0 = {.limit = 6, .allowed = mask};
    check_points("batch[0]", json_array_get(res, 0), &ds, q, &x0);
    expect x1 = {.limit = 6};
    check_points("batch[1]", json_array_get(res, 1), &ds, q, &x1);
    uint64_t mask2[4] = {0};
    for (uint32_t i = 0; i < ds.n; i++)
        if (f_range(i)) mask2[i >> 6] |= 1ull << (i & 63);
    expect x2 = {.limit = 6, .allowed = mask2};
    check_points("batch[2]", json_array_get(res, 2), &ds, q, &x2);
    free(qj);
    free_dataset(&ds);
    stop_ok();
}

Test(search, limits_offsets_thresholds_and_selectors) {
    START(END);
    dataset ds;
    make_dataset(&ds, "l", 7, 4, SIEVE_METRIC_EUCLID, SIEVE_DTYPE_F32);
    float q[4] = {0.1f, -0.2f, 0.3f, 0.05f};
    char *qj = vec_json(q, 4);
    go("POST", "/collections/l/points/search", "{\"vector\":%s,\"limit\":100}", qj);
    expect x = {.limit = 100};
    check_points("limit above points", ok_result(), &ds, q, &x);
    cr_assert_eq(json_array_size(json_object_get(R.json, "result")), 7);
    go("POST", "/collections/l/points/search", "{\"vector\":%s,\"limit\":100,\"offset\":5}", qj);
    expect y = {.limit = 100, .offset = 5};
    check_points("offset 5", ok_result(), &ds, q, &y);
    go("POST", "/collections/l/points/search", "{\"vector\":%s,\"limit\":3,\"offset\":10}", qj);
    cr_assert_eq(json_array_size(ok_result()), 0, "%s", R.body);

    /* Euclid: distances ascending; a threshold keeps distance <= threshold. */
    go("POST", "/collections/l/points/search", "{\"vector\":%s,\"limit\":7}", qj);
    json_t *all = ok_result();
    double d2 = json_number_value(json_object_get(json_array_get(all, 2), "score"));
    double d3 = json_number_value(json_object_get(json_array_get(all, 3), "score"));
    cr_assert(d2 <= d3, "Euclid scores must ascend: %s", R.body);
    double thr = (d2 + d3) / 2;
    go("POST", "/collections/l/points/search", "{\"vector\":%s,\"limit\":7,"
                                               "\"score_threshold\":%.9g}", qj, thr);
    expect z = {.limit = 7, .has_threshold = 1, .threshold = thr};
    check_points("threshold", ok_result(), &ds, q, &z);
    cr_assert_eq(json_array_size(json_object_get(R.json, "result")), 3, "%s", R.body);

    /* with_payload forms */
    go("POST", "/collections/l/points/search", "{\"vector\":%s,\"limit\":2,\"with_payload\":"
                                               "[\"g\",\"tag\"]}", qj);
    json_t *pl = json_object_get(json_array_get(ok_result(), 0), "payload");
    cr_assert_eq(json_object_size(pl), 2, "%s", R.body);
    cr_assert(json_object_get(pl, "g") && json_object_get(pl, "tag"), "%s", R.body);
    go("POST", "/collections/l/points/search", "{\"vector\":%s,\"limit\":2,\"with_payload\":"
                                               "{\"include\":[\"i\"]}}", qj);
    pl = json_object_get(json_array_get(ok_result(), 0), "payload");
    cr_assert_eq(json_object_size(pl), 1, "%s", R.body);
    go("POST", "/collections/l/points/search", "{\"vector\":%s,\"limit\":2,\"with_payload\":"
                                               "{\"exclude\":[\"i\",\"arr\"]}}", qj);
    pl = json_object_get(json_array_get(ok_result(), 0), "payload");
    cr_assert_eq(json_object_size(pl), 3, "%s", R.body);
    cr_assert(!json_object_get(pl, "i"), "%s", R.body);
    go("POST", "/collections/l/points/search", "{\"vector\":%s,\"limit\":2,\"with_payload\":"
                                               "false,\"with_vector\":true}", qj);
    json_t *p0 = json_array_get(ok_result(), 0);
    cr_assert(json_is_null(json_object_get(p0, "payload")), "%s", R.body);
    cr_assert_eq(json_array_size(json_object_get(p0, "vector")), 4, "%s", R.body);
    /* Named-vector form of search with the unnamed vector. */
    go("POST", "/collections/l/points/search", "{\"vector\":{\"name\":\"\",\"vector\":%s},"
                                               "\"limit\":2}", qj);
    cr_assert_eq(json_array_size(ok_result()), 2, "%s", R.body);

    /* Empty collections answer with no points. */
    go("PUT", "/collections/empty", "{\"vectors\":{\"size\":4,\"distance\":\"Dot\"}}");
    ok_result();
    go("POST", "/collections/empty/points/search", "{\"vector\":%s,\"limit\":5}", qj);
    cr_assert_eq(json_array_size(ok_result()), 0, "%s", R.body);
    go("PUT", "/collections/empty/points", "{\"points\":[{\"id\":1,\"vector\":%s}]}", qj);
    ok_result();
    go("POST", "/collections/empty/points/delete", "{\"points\":[1]}");
    ok_result();
    go("POST", "/collections/empty/points/query", "{\"query\":%s}", qj);
    cr_assert_eq(json_array_size(json_object_get(ok_result(), "points")), 0, "%s", R.body);
    free(qj);
    free_dataset(&ds);
    stop_ok();
}

Test(search, bad_searches_name_the_field) {
    START(END);
    go("PUT", "/collections/c", "{\"vectors\":{\"size\":3,\"distance\":\"Dot\"}}");
    ok_result();
    go("PUT", "/collections/c/points", "{\"points\":[{\"id\":1,\"vector\":[1,2,3],\"payload\":"
                                       "{\"a\":1}}]}");
    ok_result();
    char deep[4096];
    size_t off = 0;
    for (int i = 0; i < 40; i++) off += (size_t)snprintf(deep + off, sizeof deep - off, "{\"must\":[");
    off += (size_t)snprintf(deep + off, sizeof deep - off, "{\"has_id\":[1]}");
    for (int i = 0; i < 40; i++) off += (size_t)snprintf(deep + off, sizeof deep - off, "]}");
    static const struct {
        const char *path, *body;
        int status;
        const char *needle;
    } cases[] = {
        {"search", "{\"vector\":[1,2,3],\"limit\":0}", 400, "limit"},
        {"search", "{\"vector\":[1,2,3],\"limit\":16385}", 400, "limit"},
        {"search", "{\"vector\":[1,2,3],\"limit\":\"10\"}", 400, "limit"},
        {"search", "{\"vector\":[1,2,3]}", 400, "limit"},
        {"search", "{\"vector\":[1,2,3],\"limit\":10,\"offset\":-1}", 400, "offset"},
        {"search", "{\"vector\":[1,2,3],\"limit\":10,\"offset\":16380}", 400, "offset + limit"},
        {"search", "{\"limit\":10}", 400, "vector"},
        {"search", "{\"vector\":[1,2],\"limit\":10}", 400, "expected 3 numbers"},
        {"search", "{\"vector\":[1,2,\"x\"],\"limit\":10}", 400, "vector[2]"},
        {"search", "{\"vector\":[1e39,2,3],\"limit\":10}", 400, "vector[0]"},
        {"search", "{\"vector\":\"abc\",\"limit\":10}", 400, "vector"},
        {"search", "{\"vector\":{\"name\":\"img\",\"vector\":[1,2,3]},\"limit\":1}", 400,
         "named vectors"},
        {"search", "{\"vector\":[1,2,3],\"limit\":1,\"colour\":1}", 400, "colour"},
        {"search", "{\"vector\":[1,2,3],\"limit\":1,\"filter\":{\"must\":[],\"bogus\":1}}", 400,
         "filter.bogus"},
        {"search", "{\"vector\":[1,2,3],\"limit\":1,\"filter\":{\"must\":[{\"key\":\"a\","
                   "\"match\":{\"value\":1.5}}]}}", 400, "filter.must[0].match.value"},
        {"search", "{\"vector\":[1,2,3],\"limit\":1,\"filter\":{\"must\":[{\"key\":\"a\","
                   "\"match\":{\"any\":[1,\"x\"]}}]}}", 400, "filter.must[0].match.any"},
        {"search", "{\"vector\":[1,2,3],\"limit\":1,\"filter\":{\"must\":[{\"key\":\"a\","
                   "\"range\":{\"gt\":\"2020-01-01\"}}]}}", 400, "filter.must[0].range.gt"},
        {"search", "{\"vector\":[1,2,3],\"limit\":1,\"filter\":{\"must\":[{\"key\":\"a\","
                   "\"geo_radius\":{}}]}}", 400, "not supported"},
        {"search", "{\"vector\":[1,2,3],\"limit\":1,\"filter\":{\"must\":[{\"key\":\"a\"}]}}",
         400, "filter.must[0]"},
        {"search", "{\"vector\":[1,2,3],\"limit\":1,\"filter\":{\"must\":[{\"has_id\":[-1]}]}}",
         400, "filter.must[0].has_id[0]"},
        {"search", "{\"vector\":[1,2,3],\"limit\":1,\"filter\":{\"must\":[{\"wat\":1}]}}", 400,
         "filter.must[0].wat"},
        {"search", "{\"vector\":[1,2,3],\"limit\":1,\"filter\":[1]}", 400, "filter"},
        {"search", "{\"vector\":[1,2,3],\"limit\":1,\"with_payload\":5}", 400, "with_payload"},
        {"search", "{\"vector\":[1,2,3],\"limit\":1,\"with_vector\":\"yes\"}", 400,
         "with_vector"},
        {"search", "{\"vector\":[1,2,3],\"limit\":1,\"score_threshold\":\"x\"}", 400,
         "score_threshold"},
        {"query", "{\"limit\":1}", 400, "query"},
        {"query", "{\"query\":{\"recommend\":{\"positive\":[1]}}}", 400, "query"},
        {"query", "{\"query\":7}", 400, "query"},
        {"query", "{\"query\":[1,2,3],\"using\":\"img\"}", 400, "using"},
        {"query", "{\"query\":[1,2,3],\"prefetch\":[{}]}", 400, "prefetch"},
        {"query", "{\"query\":{\"nearest\":[1,2]}}", 400, "query.nearest"},
        {"search/batch", "{\"searches\":{}}", 400, "searches"},
        {"search/batch", "{\"searches\":[{\"vector\":[1,2,3],\"limit\":1},{\"vector\":[1,2,3],"
                         "\"limit\":-3}]}", 400, "searches[1].limit"},
        {"query/batch", "{\"searches\":[{\"query\":[1,2,3]},{\"query\":[1]}]}", 400,
         "searches[1].query"},
        {"search", "[1,2,3]", 400, "expected a JSON object"},
        {"search", "{\"vector\":[1,2,3],\"limit\":1", 400, "invalid JSON"},
        /* raw bytes that are not UTF-8: the error quoting them must still be valid JSON */
        {"search", "\xc8\xbe\xff\xfe{", 400, "invalid JSON"},
        {"search", "{\"vector\":[1,2,3],\"limit\":1,\"\xff\":1}", 400, "invalid JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "/collections/c/points/%s", cases[i].path);
        go_raw("POST", path, cases[i].body);
        cr_assert_eq(R.status, cases[i].status, "case %zu (%s): expected %d, got %ld: %s", i,
                     cases[i].body, cases[i].status, R.status, R.body);
        cr_assert(strstr(th_error(&R), cases[i].needle),
                  "case %zu: error \"%s\" should mention \"%s\"", i, th_error(&R),
                  cases[i].needle);
    }
    go("POST", "/collections/c/points/search", "{\"vector\":[1,2,3],\"limit\":1,\"filter\":%s}",
       deep);
    EXPECT_ERROR(400, "nested deeper");
    /* A batch over the cap. */
    char *body = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&body, &blen);
    fprintf(f, "{\"searches\":[");
    for (int i = 0; i < 1025; i++) fprintf(f, "%s{\"vector\":[1,2,3],\"limit\":1}", i ? "," : "");
    fprintf(f, "]}");
    fclose(f);
    go_raw("POST", "/collections/c/points/search/batch", body);
    free(body);
    EXPECT_ERROR(400, "at most 1024");
    go("POST", "/collections/c/points/search/batch", "{\"searches\":[]}");
    cr_assert_eq(json_array_size(ok_result()), 0);
    go("POST", "/collections/missing/points/search", "{\"vector\":[1,2,3],\"limit\":1}");
    EXPECT_ERROR(404, "missing");
    go("POST", "/collections/missing/points/query/batch", "{\"searches\":[]}");
    EXPECT_ERROR(404, "missing");
    /* Still serving. */
    go("POST", "/collections/c/points/search", "{\"vector\":[1,2,3],\"limit\":1}");
    cr_assert_eq(json_array_size(ok_result()), 1);
    stop_ok();
}

/* ---------------------------------------------------------------- several batch workers */

/* One search result list as (id, score, payload "i") triples, from a reply body. */
typedef struct hitlist {
    int n;
    long long id[16];
    double score[16];
    long long pi[16];
} hitlist;

static int parse_hits(const char *body, hitlist *h) {
    memset(h, 0, sizeof *h);
    json_error_t je;
    json_t *j = json_loads(body, 0, &je);
    json_t *res = j ? json_object_get(j, "result") : NULL;
    if (!json_is_array(res) || json_array_size(res) > 16) {
        json_decref(j);
        return -1;
    }
    h->n = (int)json_array_size(res);
    for (int i = 0; i < h->n; i++) {
        json_t *p = json_array_get(res, (size_t)i);
        h->id[i] = json_integer_value(json_object_get(p, "id"));
        h->score[i] = json_number_value(json_object_get(p, "score"));
        h->pi[i] = json_integer_value(json_object_get(json_object_get(p, "payload"), "i"));
    }
    json_decref(j);
    return 0;
}

/* Same ids in the same order, the same payloads, scores equal up to float32 rounding (a
 * query batched with others may take another BLAS code path on the CPU). */
static int same_hits(const hitlist *a, const hitlist *b) {
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++)
        if (a->id[i] != b->id[i] || a->pi[i] != b->pi[i] ||
            fabs(a->score[i] - b->score[i]) > 1e-5 * (1 + fabs(a->score[i])))
            return 0;
    return 1;
}

#define MW_N 500
#define MW_DIM 16
#define MW_NQ 12
#define MW_THREADS 6
#define MW_PER_THREAD 40

typedef struct mw_reader {
    int port;
    char **queries;        /* MW_NQ request bodies */
    const hitlist *ref[2]; /* per query: state A and state B */
    int index;
    int done, in_a, in_b;
    char failure[512];
} mw_reader;

static void *mw_reader_main(void *arg) {
    mw_reader *r = arg;
    th_server s;
    memset(&s, 0, sizeof s);
    s.port = r->port;
    for (int i = 0; i < MW_PER_THREAD && !r->failure[0]; i++) {
        int q = (r->index * 5 + i) % MW_NQ;
        th_resp resp;
        memset(&resp, 0, sizeof resp);
        if (th_req(&s, "POST", "/collections/mw/points/search", r->queries[q], NULL, &resp) ||
            resp.status != 200) {
            snprintf(r->failure, sizeof r->failure, "reader %d q%d: HTTP %ld %.300s", r->index,
                     q, resp.status, resp.body ? resp.body : resp.error);
        } else {
            hitlist h;
            if (parse_hits(resp.body, &h)) {
                snprintf(r->failure, sizeof r->failure, "reader %d q%d: bad reply %.300s",
                         r->index, q, resp.body);
            } else if (same_hits(&h, &r->ref[0][q])) {
                r->in_a++;
            } else if (same_hits(&h, &r->ref[1][q])) {
                r->in_b++;
            } else {
                snprintf(r->failure, sizeof r->failure, "reader %d q%d: the reply matches "
                         "neither state: %.400s", r->index, q, resp.body);
            }
        }
        th_resp_free(&resp);
        r->done++;
    }
    return NULL;
}

/* Uploads every point of the collection at once (one atomic write): state 0 or 1. */
static void mw_put_state(const float *vecs) {
    char *body = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&body, &blen);
    fprintf(f, "{\"points\":[");
    for (uint32_t i = 0; i < MW_N; i++) {
        char *vj = vec_json(vecs + (size_t)i * MW_DIM, MW_DIM);
        fprintf(f, "%s{\"id\":%u,\"vector\":%s,\"payload\":{\"i\":%u}}", i ? "," : "", ID0 + i,
                vj, i);
        free(vj);
    }
    fprintf(f, "]}");
    fclose(f);
    go_raw("PUT", "/collections/mw/points?wait=true", body);
    free(body);
    ok_result();
}

/* Zero vectors (score 0, below every query's top 10 here) that come and go: they take new
 * rows and pages, free rows for reuse and dirty pages, without changing any answer. */
static void mw_noise(int round) {
    char *body = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&body, &blen);
    fprintf(f, "{\"points\":[");
    for (int i = 0; i < 30; i++)
        fprintf(f, "%s{\"id\":%d,\"vector\":[%s0]}", i ? "," : "", 100000 + round * 30 + i,
                "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,");
    fprintf(f, "]}");
    fclose(f);
    go_raw("PUT", "/collections/mw/points?wait=true", body);
    free(body);
    ok_result();
    if (round > 0) {
        go("POST", "/collections/mw/points/delete?wait=true", "{\"points\":[%d,%d,%d,%d,%d]}",
           100000 + (round - 1) * 30, 100000 + (round - 1) * 30 + 3,
           100000 + (round - 1) * 30 + 7, 100000 + (round - 1) * 30 + 11,
           100000 + (round - 1) * 30 + 29);
        ok_result();
    }
}

/* Three batch workers answer exactly as one worker and as the reference, also under
 * concurrent load while writes land: every reply equals the sequential answer of one of
 * the two states the collection alternates between (each state is one atomic upsert that
 * rewrites every row in place), and the noise writes never show. On the CPU the workers
 * share the host copy of the page cache (--host-page-cache), so its refresh under
 * concurrent searches runs here too; with SIEVE_TEST_DEVICE=cuda:0 it is the GPU cache. */
Test(search, batch_workers_agree_with_one_worker_under_writes) {
    START("--batch-workers", "3", "--host-page-cache", "--batch-wait-us", "300", END);
    dataset ds;
    make_dataset(&ds, "mw", MW_N, MW_DIM, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32);
    float *va = malloc(sizeof(float) * MW_N * MW_DIM), *vb = malloc(sizeof(float) * MW_N * MW_DIM);
    cr_assert(va && vb);
    for (size_t i = 0; i < (size_t)MW_N * MW_DIM; i++) {
        va[i] = frand();
        vb[i] = frand();
    }
    float qs[MW_NQ][MW_DIM];
    char *qbody[MW_NQ];
    for (int q = 0; q < MW_NQ; q++) {
        for (int d = 0; d < MW_DIM; d++) qs[q][d] = frand();
        char *vj = vec_json(qs[q], MW_DIM);
        if (asprintf(&qbody[q], "{\"vector\":%s,\"limit\":10,\"with_payload\":true}", vj) < 0)
            qbody[q] = NULL;
        cr_assert(qbody[q]);
        free(vj);
    }
    /* Sequential answers of both states; state A is also checked against the reference. */
    static hitlist ref[2][MW_NQ];
    for (int st = 0; st < 2; st++) {
        mw_put_state(st ? vb : va);
        if (!st) {
            memcpy(ds.raw, va, sizeof(float) * MW_N * MW_DIM);
            uint64_t alive[(MW_N + 63) / 64];
            reload_dataset(&ds, "mw", alive);
        }
        for (int q = 0; q < MW_NQ; q++) {
            go_raw("POST", "/collections/mw/points/search", qbody[q]);
            EXPECT_STATUS(200);
            cr_assert_eq(parse_hits(R.body, &ref[st][q]), 0, "%s", R.body);
            cr_assert_eq(ref[st][q].n, 10);
            cr_assert_gt(ref[st][q].score[9], 0, "q%d: the 10th score must be above the noise's "
                                                 "0", q);
            if (!st) {
                expect x = {.limit = 10, .with_payload = 0};
                char what[32];
                snprintf(what, sizeof what, "state A q%d", q);
                json_t *res = ok_result();
                /* the payload here is {"i": row}: check_points checks ids and scores */
                json_t *copy = json_deep_copy(res);
                size_t k;
                json_t *p;
                json_array_foreach(copy, k, p) json_object_set_new(p, "payload", json_null());
                check_points(what, copy, &ds, qs[q], &x);
                json_decref(copy);
            }
        }
    }
    /* Concurrent readers while the collection flips between A and B and noise comes and
     * goes. */
    mw_reader rd[MW_THREADS];
    pthread_t th[MW_THREADS];
    for (int i = 0; i < MW_THREADS; i++) {
        memset(&rd[i], 0, sizeof rd[i]);
        rd[i].port = S.port;
        rd[i].queries = qbody;
        rd[i].ref[0] = ref[0];
        rd[i].ref[1] = ref[1];
        rd[i].index = i;
        cr_assert_eq(pthread_create(&th[i], NULL, mw_reader_main, &rd[i]), 0);
    }
    int state = 1;
    for (int round = 0; round < 12; round++) {
        mw_noise(round);
        state ^= 1;
        mw_put_state(state ? vb : va);
    }
    int in_a = 0, in_b = 0;
    for (int i = 0; i < MW_THREADS; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(rd[i].failure[0], 0, "%s", rd[i].failure);
        cr_assert_eq(rd[i].done, MW_PER_THREAD);
        in_a += rd[i].in_a;
        in_b += rd[i].in_b;
    }
    cr_log_info("concurrent replies: %d in state A, %d in state B", in_a, in_b);
    go("GET", "/metrics", NULL);
    EXPECT_STATUS(200);
    cr_assert_eq(metric_value(R.body, "sieve_batch_workers"), 3, "%s", R.body);
    cr_assert(metric_value(R.body, "sieve_batch_size_count") <
                  metric_value(R.body, "sieve_batch_size_sum"),
              "concurrent searches never shared a kernel call");
    /* The final state (B: an even number of flips from B) answered by one worker. */
    stop_ok();
    cr_assert_eq(state, 1);
    cr_assert_eq(th_start(&S, "--batch-workers", "1", END), 0);
    for (int q = 0; q < MW_NQ; q++) {
        go_raw("POST", "/collections/mw/points/search", qbody[q]);
        EXPECT_STATUS(200);
        hitlist h;
        cr_assert_eq(parse_hits(R.body, &h), 0);
        cr_assert(same_hits(&h, &ref[1][q]), "q%d: one worker answers %s", q, R.body);
    }
    for (int q = 0; q < MW_NQ; q++) free(qbody[q]);
    free(va);
    free(vb);
    free_dataset(&ds);
    stop_ok();
}

/* test_cli_http.c: black-box runs of the sieve tool and libsieve-client against a real
 * sieve-server.
 *
 * Owns: starting the build's sieve-server on a free loopback port with a temporary data
 * directory and driving it with the `sieve` binary (create, ingest over HTTP, count, get,
 * search from a file, stdin and a point id, filters, delete, info, drop), with the library
 * (every endpoint, error codes and messages), an HTTP ingest killed and resumed, api keys,
 * and `--data-dir` on a directory the server holds. Search results are checked against a
 * brute-force scan done here. Must not: link server code.
 *
 * Until the server module is merged the build's sieve-server is a placeholder that cannot
 * take a data directory; then every test here is skipped, saying so.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sieve_client.h"
#include "sieve_datasets.h"
#include "tc.h"

static char g_dir[256];
static tc_server g_srv;

static void setup(void) {
    unsetenv("SIEVE_URL");
    unsetenv("SIEVE_API_KEY");
    if (!tc_server_available())
        cr_skip_test("%s is the placeholder server (no --data-dir): the HTTP black-box tests "
                     "need the server module",
                     tc_server_bin());
    cr_assert_eq(tc_mkdtemp(g_dir, "sieve-http"), 0);
    memset(&g_srv, 0, sizeof g_srv);
}

static void teardown(void) {
    if (g_srv.pid > 0) {
        int st = tc_server_stop(&g_srv);
        cr_expect_eq(st, 0, "sieve-server did not shut down cleanly (%d)", st);
    }
    if (g_dir[0]) tc_rmrf(g_dir);
}

TestSuite(http_cli, .init = setup, .fini = teardown, .timeout = 600);
TestSuite(http_lib, .init = setup, .fini = teardown, .timeout = 600);

static void start_server(const char *const *extra) {
    cr_assert_eq(tc_server_start(&g_srv, extra), 0, "sieve-server did not start");
}

static const char *P(const char *name) {
    static char bufs[16][512];
    static int k;
    char *b = bufs[k++ & 15];
    snprintf(b, 512, "%s/%s", g_dir, name);
    return b;
}

/* Runs sieve --url <server> ARGS... (NULL-terminated), stdin from in (may be NULL). */
static int sieve_in(tc_out *o, const char *in, ...) {
    char *argv[64];
    int n = 0;
    argv[n++] = (char *)tc_sieve_bin();
    va_list ap;
    va_start(ap, in);
    const char *a;
    while ((a = va_arg(ap, const char *)) && n < 61) argv[n++] = (char *)a;
    va_end(ap);
    argv[n++] = "--url";
    argv[n++] = g_srv.url;
    argv[n] = NULL;
    return tc_run(argv, in, NULL, o);
}
#define sieve(o, ...) sieve_in(o, NULL, __VA_ARGS__)

#define ASSERT_OK(o)                                                                               \
    cr_assert_eq((o).status, 0, "sieve exited with %d\nstdout: %s\nstderr: %s", (o).status,        \
                 (o).out, (o).err)

static void fill(float *v, size_t n, uint64_t seed) {
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
}

static void write_fbin(const char *path, const float *v, size_t n, uint32_t dim) {
    sieve_ds_writer *w;
    sieve_ds_error err;
    cr_assert_eq(
        sieve_ds_writer_open(path, SIEVE_DS_FORMAT_FBIN, SIEVE_DS_ELEM_AUTO, dim, 0, &w, &err), 0,
        "%s", err.msg);
    cr_assert_eq(sieve_ds_writer_write_f32(w, v, n, &err), 0, "%s", err.msg);
    cr_assert_eq(sieve_ds_writer_close(w, &err), 0, "%s", err.msg);
}

static sieve_client *client(void) {
    sieve_client_options o;
    sieve_client_options_init(&o);
    o.url = g_srv.url;
    sieve_client *c;
    cr_assert_eq(sieve_client_open(&o, &c), 0);
    return c;
}

/* Checks a result list (JSON array of {"id","score"}) against a brute-force Dot scan of
 * the live points: scores match, best first, and nothing left out scores higher. */
static void check_topk(json_t *res, const float *q, const float *v, const uint64_t *ids,
                       const int *live, size_t n, uint32_t dim, size_t k) {
    cr_assert(json_is_array(res), "result is not a list");
    size_t live_n = 0;
    for (size_t i = 0; i < n; i++) live_n += live ? (size_t)live[i] : 1;
    size_t want = k < live_n ? k : live_n;
    cr_assert_eq(json_array_size(res), want, "%zu results, want %zu", json_array_size(res), want);
    double *score = malloc(n * sizeof *score);
    for (size_t i = 0; i < n; i++) {
        double s = 0;
        for (uint32_t d = 0; d < dim; d++) s += (double)q[d] * v[i * dim + d];
        score[i] = s;
    }
    double prev = INFINITY, lowest = INFINITY;
    for (size_t r = 0; r < want; r++) {
        json_t *p = json_array_get(res, r);
        uint64_t id = (uint64_t)json_integer_value(json_object_get(p, "id"));
        double sc = json_number_value(json_object_get(p, "score"));
        size_t i = 0;
        while (i < n && ids[i] != id) i++;
        cr_assert_lt(i, n, "result %zu has unknown id %llu", r, (unsigned long long)id);
        cr_assert(!live || live[i], "result %zu is the deleted point %llu", r,
                  (unsigned long long)id);
        cr_assert(fabs(sc - score[i]) <= 1e-4 * (1 + fabs(score[i])),
                  "id %llu: server score %.7g, brute force %.7g", (unsigned long long)id, sc,
                  score[i]);
        cr_assert(sc <= prev + 1e-6, "results out of order at %zu", r);
        prev = sc;
        if (score[i] < lowest) lowest = score[i];
        score[i] = -INFINITY; /* taken */
    }
    for (size_t i = 0; i < n; i++)
        if (!live || live[i])
            cr_assert(score[i] <= lowest + 1e-4 * (1 + fabs(lowest)),
                      "id %llu scores %.7g, above the last result %.7g but was left out",
                      (unsigned long long)ids[i], score[i], lowest);
    free(score);
}

static json_t *parse(const char *text) {
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    cr_assert_not_null(j, "not JSON (%s): %s", e.text, text);
    return j;
}

/* ---------------------------------------------------------------- the CLI */

/* The "docs" data: N x D vectors, ids 1000 + 13 i, payload {"text": "passage i"}, and Q
 * queries, written to v.fbin, ids.u64bin, c.tsv and q.fbin. */
enum { N = 3000, D = 16, Q = 5 };
static float *g_v, g_q[Q * D];
static uint64_t g_ids[N];
static char g_texts[N][32];

static void write_docs(void) {
    g_v = malloc(N * D * sizeof *g_v);
    fill(g_v, N * D, 21);
    fill(g_q, Q * D, 22);
    write_fbin(P("v.fbin"), g_v, N, D);
    write_fbin(P("q.fbin"), g_q, Q, D);
    sieve_ds_id dids[N];
    const char *tp[N];
    for (int i = 0; i < N; i++) {
        g_ids[i] = 1000 + (uint64_t)i * 13;
        memset(&dids[i], 0, sizeof dids[i]);
        dids[i].num = g_ids[i];
        snprintf(g_texts[i], sizeof g_texts[i], "passage %d", i);
        tp[i] = g_texts[i];
    }
    sieve_ds_writer *w;
    sieve_ds_error err;
    cr_assert_eq(sieve_ds_writer_open(P("ids.u64bin"), SIEVE_DS_FORMAT_U64BIN, SIEVE_DS_ELEM_AUTO,
                                      1, 0, &w, &err),
                 0, "%s", err.msg);
    cr_assert_eq(sieve_ds_writer_write_u64(w, g_ids, N, &err), 0);
    cr_assert_eq(sieve_ds_writer_close(w, &err), 0);
    cr_assert_eq(sieve_ds_tsv_save(P("c.tsv"), dids, tp, N, &err), 0, "%s", err.msg);
}

/* Skips the test when this build's server cannot search (its CPU kernel returns
 * SIEVE_ENOTSUP until the CPU kernels are merged): a search of collection coll. */
static void require_search(const char *coll, uint32_t dim) {
    sieve_client *c = client();
    float *x = calloc(dim, sizeof *x);
    x[0] = 1;
    sieve_client_search_params q;
    memset(&q, 0, sizeof q);
    q.vector = x;
    q.dim = dim;
    q.limit = 1;
    sieve_client_records r;
    int rc = sieve_client_search(c, coll, &q, &r);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", sieve_client_message(c));
    free(x);
    sieve_client_close(c);
    if (rc && strstr(msg, "not supported by this build")) {
        tc_server_stop(&g_srv); /* a skipped test does not reach the teardown */
        tc_rmrf(g_dir);
        cr_skip_test("this build's sieve-server cannot search on the CPU yet (%s)", msg);
    }
    cr_assert_eq(rc, 0, "probe search failed: %s", msg);
    sieve_client_records_clear(&r);
}

/* Creates "docs" and ingests the data over HTTP. */
static void load_docs(void) {
    write_docs();
    tc_out o;
    sieve(&o, "ingest", P("v.fbin"), "--ids", P("ids.u64bin"), "--payloads", P("c.tsv"), "-c",
          "docs", "--create", "--parallel", "4", "--batch", "97", NULL);
    ASSERT_OK(o);
    cr_assert(strstr(o.out, "it now has 3,000 points"), "%s", o.out);
    tc_out_free(&o);
}

Test(http_cli, create_ingest_count_get_delete_drop) {
    start_server(NULL);
    write_docs();
    float *v = g_v;
    uint64_t *ids = g_ids;
    (void)ids;

    tc_out o;
    sieve(&o, "health", NULL);
    ASSERT_OK(o);
    cr_assert(strstr(o.out, "healthy"), "%s", o.out);
    tc_out_free(&o);
    sieve(&o, "collection", "create", "docs", "--dim", "16", "--distance", "Dot", NULL);
    ASSERT_OK(o);
    tc_out_free(&o);
    sieve(&o, "collection", "create", "docs", "--dim", "16", NULL);
    cr_assert_eq(o.status, 1);
    cr_assert(strstr(o.err, "already exists"), "%s", o.err);
    tc_out_free(&o);
    sieve(&o, "collection", "list", "--json", NULL);
    ASSERT_OK(o);
    cr_assert_str_eq(o.out, "[\"docs\"]\n");
    tc_out_free(&o);

    sieve(&o, "ingest", P("v.fbin"), "--ids", P("ids.u64bin"), "--payloads", P("c.tsv"), "-c",
          "docs", "--parallel", "4", "--batch", "97", "--stats", NULL);
    ASSERT_OK(o);
    cr_assert(strstr(o.out, "it now has 3,000 points"), "%s", o.out);
    /* the binary upsert body is the default over HTTP: 31 batches of 97 rows and the
     * collection lookup */
    cr_assert(strstr(o.err, "http: 32 requests (0 retries)") &&
                  strstr(o.err, "of binary upserts sent"), "%s", o.err);
    tc_out_free(&o);
    /* the same through the JSON route (--json) stores the same points (6 batches, and
     * the lookup, creation and second lookup of the collection) */
    sieve(&o, "ingest", P("v.fbin"), "--ids", P("ids.u64bin"), "--payloads", P("c.tsv"), "-c",
          "docs_json", "--create", "--parallel", "2", "--batch", "500", "--json", "--stats",
          NULL);
    ASSERT_OK(o);
    cr_assert(strstr(o.out, "it now has 3,000 points"), "%s", o.out);
    cr_assert(strstr(o.err, "http: 9 requests (0 retries)") && strstr(o.err, "of JSON sent"),
              "%s", o.err);
    tc_out_free(&o);
    sieve(&o, "get", "-c", "docs_json", "1000", "39987", "--with-vector", "--json", NULL);
    ASSERT_OK(o);
    json_t *jj = parse(o.out);
    cr_assert_eq(json_array_size(jj), 2);
    for (size_t r = 0; r < 2; r++) {
        json_t *p = json_array_get(jj, r);
        uint64_t id = (uint64_t)json_integer_value(json_object_get(p, "id"));
        size_t i = (size_t)(id - 1000) / 13;
        cr_assert_str_eq(json_string_value(json_object_get(json_object_get(p, "payload"), "text")),
                         g_texts[i]);
        json_t *vec = json_object_get(p, "vector");
        for (int d = 0; d < D; d++) {
            float got = (float)json_number_value(json_array_get(vec, (size_t)d));
            cr_assert_eq(memcmp(&got, &v[i * D + d], 4), 0, "--json id %llu [%d]: %a vs %a",
                         (unsigned long long)id, d, (double)got, (double)v[i * D + d]);
        }
    }
    json_decref(jj);
    tc_out_free(&o);
    sieve(&o, "ingest", P("v.fbin"), "-c", "docs", "--data-dir", P("x"), "--json", NULL);
    cr_assert_eq(o.status, 2, "--json with --data-dir is a usage error: %s", o.err);
    tc_out_free(&o);
    sieve(&o, "count", "-c", "docs", NULL);
    ASSERT_OK(o);
    cr_assert_str_eq(o.out, "3000\n");
    tc_out_free(&o);

    /* get: exact vectors and payloads */
    sieve(&o, "get", "-c", "docs", "1000", "39987", "--with-vector", "--json", NULL);
    ASSERT_OK(o);
    json_t *j = parse(o.out);
    cr_assert_eq(json_array_size(j), 2);
    for (size_t r = 0; r < 2; r++) {
        json_t *p = json_array_get(j, r);
        uint64_t id = (uint64_t)json_integer_value(json_object_get(p, "id"));
        size_t i = (size_t)(id - 1000) / 13;
        cr_assert(id == 1000 || id == 39987, "id %llu", (unsigned long long)id);
        cr_assert_str_eq(json_string_value(json_object_get(json_object_get(p, "payload"), "text")),
                         g_texts[i]);
        json_t *vec = json_object_get(p, "vector");
        cr_assert_eq(json_array_size(vec), D);
        for (int d = 0; d < D; d++) {
            float got = (float)json_number_value(json_array_get(vec, (size_t)d));
            cr_assert_eq(memcmp(&got, &v[i * D + d], 4), 0, "id %llu [%d]: %a vs %a",
                         (unsigned long long)id, d, (double)got, (double)v[i * D + d]);
        }
    }
    json_decref(j);
    tc_out_free(&o);

    /* delete by id and by filter */
    sieve(&o, "delete", "-c", "docs", "1000", "1013", NULL);
    ASSERT_OK(o);
    tc_out_free(&o);
    sieve(&o, "delete", "-c", "docs", "--filter",
          "{\"must\":[{\"key\":\"text\",\"match\":{\"value\":\"passage 9\"}}]}", NULL);
    ASSERT_OK(o);
    tc_out_free(&o);
    sieve(&o, "count", "-c", "docs", NULL);
    ASSERT_OK(o);
    cr_assert_str_eq(o.out, "2997\n");
    tc_out_free(&o);
    sieve(&o, "get", "-c", "docs", "1013", NULL);
    cr_assert_eq(o.status, 1);
    cr_assert(strstr(o.err, "not found"), "%s", o.err);
    tc_out_free(&o);
    sieve(&o, "collection", "info", "docs", "--json", NULL);
    ASSERT_OK(o);
    j = parse(o.out);
    cr_assert_eq(json_integer_value(json_object_get(j, "points")), 2997);
    cr_assert_eq(json_integer_value(json_object_get(j, "dim")), D);
    cr_assert_str_eq(json_string_value(json_object_get(j, "distance")), "Dot");
    json_decref(j);
    tc_out_free(&o);
    sieve(&o, "collection", "delete", "docs", NULL);
    ASSERT_OK(o);
    tc_out_free(&o);
    sieve(&o, "collection", "info", "docs", NULL);
    cr_assert_eq(o.status, 1);
    cr_assert(strstr(o.err, "HTTP 404"), "%s", o.err);
    tc_out_free(&o);
    free(v);
}

Test(http_cli, search_from_files_stdin_ids_with_filters_and_deletes) {
    start_server(NULL);
    load_docs();
    require_search("docs", D);
    float *v = g_v, *q = g_q;
    uint64_t *ids = g_ids;
    tc_out o;
    json_t *j;
    /* search: one row of a file, every row of a file, stdin, a point's own vector */
    sieve(&o, "search", "-c", "docs", "--vector-file", P("q.fbin"), "--row", "2", "--limit", "10",
          "--json", NULL);
    ASSERT_OK(o);
    j = parse(o.out);
    check_topk(j, q + 2 * D, v, ids, NULL, N, D, 10);
    json_decref(j);
    tc_out_free(&o);
    sieve(&o, "search", "-c", "docs", "--vector-file", P("q.fbin"), "--limit", "7", "--json",
          "--no-payload", NULL);
    ASSERT_OK(o);
    j = parse(o.out);
    cr_assert_eq(json_array_size(j), Q);
    for (int k = 0; k < Q; k++)
        check_topk(json_array_get(j, (size_t)k), q + k * D, v, ids, NULL, N, D, 7);
    json_decref(j);
    tc_out_free(&o);
    char line[1024];
    size_t len = 0;
    len += (size_t)snprintf(line + len, sizeof line - len, "[");
    for (int d = 0; d < D; d++)
        len += (size_t)snprintf(line + len, sizeof line - len, "%s%.9g", d ? ", " : "",
                                (double)q[4 * D + d]);
    snprintf(line + len, sizeof line - len, "]\n");
    sieve_in(&o, line, "search", "-c", "docs", "--limit", "3", "--json", NULL);
    ASSERT_OK(o);
    j = parse(o.out);
    check_topk(j, q + 4 * D, v, ids, NULL, N, D, 3);
    json_decref(j);
    tc_out_free(&o);
    sieve(&o, "search", "-c", "docs", "--id", "1013", "--limit", "5", "--json", "--query-api",
          NULL);
    ASSERT_OK(o);
    j = parse(o.out);
    check_topk(j, v + 1 * D, v, ids, NULL, N, D, 5);
    json_decref(j);
    tc_out_free(&o);
    /* table output names the columns */
    sieve(&o, "search", "-c", "docs", "--vector-file", P("q.fbin"), "--row", "0", "-k", "2", NULL);
    ASSERT_OK(o);
    cr_assert(strstr(o.out, "rank") && strstr(o.out, "score") && strstr(o.out, "passage "), "%s",
              o.out);
    tc_out_free(&o);
    /* filtered search returns only what matches */
    sieve(&o, "search", "-c", "docs", "--vector-file", P("q.fbin"), "--row", "0", "--filter",
          "{\"must\":[{\"key\":\"text\",\"match\":{\"value\":\"passage 7\"}}]}", "--json", NULL);
    ASSERT_OK(o);
    j = parse(o.out);
    cr_assert_eq(json_array_size(j), 1);
    cr_assert_eq(json_integer_value(json_object_get(json_array_get(j, 0), "id")), 1000 + 7 * 13);
    json_decref(j);
    tc_out_free(&o);

    sieve(&o, "delete", "-c", "docs", "1000", "1013", NULL);
    ASSERT_OK(o);
    tc_out_free(&o);
    sieve(&o, "delete", "-c", "docs", "--filter",
          "{\"must\":[{\"key\":\"text\",\"match\":{\"value\":\"passage 9\"}}]}", NULL);
    ASSERT_OK(o);
    tc_out_free(&o);
    int live[N];
    for (int i = 0; i < N; i++) live[i] = i != 0 && i != 1 && i != 9;
    sieve(&o, "search", "-c", "docs", "--vector", "1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0", "-k", "20",
          "--json", NULL);
    ASSERT_OK(o);
    j = parse(o.out);
    float e0[D] = {1};
    check_topk(j, e0, v, ids, live, N, D, 20);
    json_decref(j);
    tc_out_free(&o);

    free(v);
}

Test(http_cli, upsert_from_stdin_and_jsonl_ingest) {
    start_server(NULL);
    tc_out o;
    sieve(&o, "collection", "create", "u", "--dim", "3", "--distance", "Euclid", NULL);
    ASSERT_OK(o);
    tc_out_free(&o);
    const char *in = "{\"id\": \"550e8400-e29b-41d4-a716-446655440000\", \"vector\": [1, 2, 3], "
                     "\"payload\": {\"k\": \"v\"}}\n\n{\"id\": 5, \"vector\": [0.5, 0.25, 1e-7]}\n";
    sieve_in(&o, in, "upsert", "-c", "u", NULL);
    ASSERT_OK(o);
    cr_assert(strstr(o.err, "upserted 2 points"), "%s", o.err);
    tc_out_free(&o);
    sieve(&o, "get", "-c", "u", "550E8400E29B41D4A716446655440000", "5", "--with-vector", "--json",
          NULL);
    ASSERT_OK(o);
    json_t *j = parse(o.out);
    cr_assert_eq(json_array_size(j), 2);
    int seen = 0;
    for (size_t i = 0; i < 2; i++) {
        json_t *p = json_array_get(j, i);
        json_t *id = json_object_get(p, "id");
        if (json_is_string(id)) {
            cr_assert_str_eq(json_string_value(id), "550e8400-e29b-41d4-a716-446655440000");
            cr_assert_str_eq(json_string_value(json_object_get(json_object_get(p, "payload"), "k")),
                             "v");
            seen |= 1;
        } else {
            cr_assert_eq(json_integer_value(id), 5);
            cr_assert_eq((float)json_number_value(json_array_get(json_object_get(p, "vector"), 2)),
                         1e-7f);
            seen |= 2;
        }
    }
    cr_assert_eq(seen, 3);
    json_decref(j);
    tc_out_free(&o);
    /* a bad line stops with its line number; nothing of its batch is written */
    sieve_in(&o, "{\"id\": 9, \"vector\": [1, 2]}\n", "upsert", "-c", "u", NULL);
    cr_assert_eq(o.status, 1);
    cr_assert(strstr(o.err, "HTTP 400"), "%s", o.err);
    tc_out_free(&o);
    sieve_in(&o, "{\"id\": 9, \"vectr\": [1, 2, 3]}\n", "upsert", "-c", "u", NULL);
    cr_assert_eq(o.status, 1);
    cr_assert(strstr(o.err, "stdin:1: unknown key \"vectr\""), "%s", o.err);
    tc_out_free(&o);

    /* .jsonl through ingest, with --create over HTTP */
    FILE *f = fopen(P("p.jsonl"), "w");
    for (int i = 0; i < 500; i++)
        fprintf(f, "{\"id\": %d, \"vector\": [%d, %d.5], \"payload\": {\"n\": %d}}\n", i, i, -i, i);
    fclose(f);
    sieve(&o, "ingest", P("p.jsonl"), "-c", "js", "--create", "--distance", "Euclid", "--batch",
          "64", NULL);
    ASSERT_OK(o);
    cr_assert(strstr(o.err, "created collection 'js' (2 dimensions, Euclid, float32)"), "%s",
              o.err);
    tc_out_free(&o);
    /* UUID ids cannot go in the binary body: their batches go as JSON */
    f = fopen(P("u.jsonl"), "w");
    fprintf(f, "{\"id\": 7, \"vector\": [1, 2]}\n");
    fprintf(f, "{\"id\": \"550e8400-e29b-41d4-a716-446655440000\", \"vector\": [3, 4]}\n");
    fprintf(f, "{\"id\": 8, \"vector\": [5, 6]}\n");
    fclose(f);
    sieve(&o, "ingest", P("u.jsonl"), "-c", "uu", "--create", "--batch", "2", "--stats", NULL);
    ASSERT_OK(o);
    cr_assert(strstr(o.out, "it now has 3 points"), "%s", o.out);
    tc_out_free(&o);
    sieve(&o, "get", "-c", "uu", "550e8400-e29b-41d4-a716-446655440000", "8", "--with-vector",
          "--json", NULL);
    ASSERT_OK(o);
    j = parse(o.out);
    cr_assert_eq(json_array_size(j), 2, "%s", o.out);
    tc_out_free(&o);
    json_decref(j);
    sieve(&o, "count", "-c", "js", "--filter",
          "{\"must\":[{\"key\":\"n\",\"range\":{\"gte\":100,\"lt\":200}}]}", NULL);
    ASSERT_OK(o);
    cr_assert_str_eq(o.out, "100\n");
    tc_out_free(&o);
    require_search("js", 2);
    sieve(&o, "search", "-c", "js", "--vector", "[10, -10.5]", "-k", "1", "--json", NULL);
    ASSERT_OK(o);
    j = parse(o.out);
    cr_assert_eq(json_integer_value(json_object_get(json_array_get(j, 0), "id")), 10);
    cr_assert_float_eq(json_number_value(json_object_get(json_array_get(j, 0), "score")), 0.0,
                       1e-6);
    json_decref(j);
    tc_out_free(&o);
}

Test(http_cli, ingest_over_http_killed_and_resumed) {
    start_server(NULL);
    enum { BN = 60000, BD = 16 };
    float *v = malloc((size_t)BN * BD * sizeof *v);
    fill(v, (size_t)BN * BD, 31);
    write_fbin(P("big.fbin"), v, BN, BD);
    char big[512], ck[512], out[512], err[512];
    snprintf(big, sizeof big, "%s", P("big.fbin"));
    snprintf(ck, sizeof ck, "%s", P("ck"));
    snprintf(out, sizeof out, "%s", P("run.out"));
    snprintf(err, sizeof err, "%s", P("run.err"));
    char *argv[] = {(char *)tc_sieve_bin(),
                    "ingest",
                    big,
                    "-c",
                    "r",
                    "--create",
                    "--batch",
                    "500",
                    "--parallel",
                    "4",
                    "--checkpoint",
                    ck,
                    "--url",
                    g_srv.url,
                    NULL};
    int resumed = 0;
    for (int attempt = 0; attempt < 3 && !resumed; attempt++) {
        pid_t pid = tc_spawn(argv, out, err);
        int had = 0, finished = 0;
        for (int i = 0; i < 30000; i++) {
            if (access(ck, F_OK) == 0) {
                had = 1;
                break;
            }
            int w;
            if (waitpid(pid, &w, WNOHANG) == pid) {
                finished = 1;
                break;
            }
            struct timespec ts = {0, 1000000L};
            nanosleep(&ts, NULL);
        }
        if (!finished) {
            kill(pid, SIGKILL);
            tc_wait(pid);
        }
        tc_out o;
        tc_run(argv, NULL, NULL, &o);
        ASSERT_OK(o);
        if (had && !finished) {
            resumed = strstr(o.err, "resuming at row") != NULL;
            cr_assert(resumed, "did not resume: %s", o.err);
        }
        cr_assert(strstr(o.out, "it now has 60,000 points"), "%s", o.out);
        tc_out_free(&o);
    }
    cr_assert(resumed, "no run was interrupted after its first checkpoint");
    /* every point, exactly */
    sieve_client *c = client();
    uint64_t cnt;
    cr_assert_eq(sieve_client_count(c, "r", NULL, &cnt), 0);
    cr_assert_eq(cnt, BN);
    enum { CH = 1000 };
    sieve_client_id ids[CH];
    for (int base = 0; base < BN; base += CH) {
        for (int i = 0; i < CH; i++) ids[i] = sieve_client_id_num((uint64_t)(base + i));
        sieve_client_records r;
        cr_assert_eq(sieve_client_retrieve(c, "r", ids, CH, 0, 1, &r), 0, "%s",
                     sieve_client_message(c));
        cr_assert_eq(r.n, CH);
        for (size_t i = 0; i < r.n; i++) {
            uint64_t row = r.items[i].id.num;
            cr_assert_lt(row, BN);
            cr_assert_eq(r.items[i].dim, BD);
            cr_assert_eq(memcmp(r.items[i].vector, v + row * BD, BD * sizeof(float)), 0,
                         "point %llu differs from the input", (unsigned long long)row);
        }
        sieve_client_records_clear(&r);
    }
    sieve_client_close(c);
    free(v);
}

Test(http_cli, api_key_required_and_accepted) {
    const char *extra[] = {"--api-key", "k3y", NULL};
    start_server(extra);
    tc_out o;
    sieve(&o, "collection", "list", NULL);
    cr_assert_eq(o.status, 1);
    cr_assert(strstr(o.err, "HTTP 401"), "%s", o.err);
    cr_assert(strstr(o.err, "--api-key"), "%s", o.err);
    tc_out_free(&o);
    sieve(&o, "collection", "create", "a", "--dim", "2", "--api-key", "k3y", NULL);
    ASSERT_OK(o);
    tc_out_free(&o);
    char *env[] = {"SIEVE_API_KEY=k3y", NULL};
    char *argv[] = {(char *)tc_sieve_bin(), "collection", "list", "--url", g_srv.url, NULL};
    tc_run(argv, NULL, env, &o);
    ASSERT_OK(o);
    cr_assert_str_eq(o.out, "a\n");
    tc_out_free(&o);
}

Test(http_cli, data_dir_of_a_running_server_is_refused) {
    start_server(NULL);
    float v[40];
    fill(v, 40, 41);
    write_fbin(P("v.fbin"), v, 10, 4);
    char data[300];
    snprintf(data, sizeof data, "%s/data", g_srv.dir);
    tc_out o;
    char *argv[] = {(char *)tc_sieve_bin(),
                    "ingest",
                    (char *)P("v.fbin"),
                    "-c",
                    "x",
                    "--create",
                    "--data-dir",
                    data,
                    NULL};
    tc_run(argv, NULL, NULL, &o);
    cr_assert_eq(o.status, 1, "%s", o.err);
    cr_assert(strstr(o.err, "is held by another process (a running sieve-server?)"), "%s", o.err);
    tc_out_free(&o);
    /* the route the message recommends works */
    sieve(&o, "ingest", P("v.fbin"), "-c", "x", "--create", NULL);
    ASSERT_OK(o);
    cr_assert(strstr(o.out, "it now has 10 points"), "%s", o.out);
    tc_out_free(&o);
}

/* ---------------------------------------------------------------- the library */

/* Six points in collection "lib" (dim 4, Dot): ids 1..3 through the list form (payload
 * color blue, red, blue), 4, 5 and a UUID through the column form (5 is red). */
static float lib_v[6][4] = {{1, 0, 0, 0},       {0, 1, 0, 0}, {0, 0, 1, 0},
                            {0.5f, 0.5f, 0, 0}, {2, 0, 0, 0}, {0, 0, 0, 3}};

static void lib_points(sieve_client *c, sieve_client_point pts[3], sieve_client_id bids[3]) {
    float(*v)[4] = lib_v;
    for (int i = 0; i < 3; i++) {
        pts[i].id = sieve_client_id_num((uint64_t)i + 1);
        pts[i].vector = v[i];
        pts[i].payload = i == 1 ? "{\"color\":\"red\",\"n\":2}" : "{\"color\":\"blue\"}";
        pts[i].payload_len = 0;
    }
    cr_assert_eq(sieve_client_upsert(c, "lib", pts, 3, 4), 0, "%s", sieve_client_message(c));
    bids[0] = sieve_client_id_num(4);
    bids[1] = sieve_client_id_num(5);
    cr_assert_eq(sieve_client_id_parse("00000000-0000-0000-0000-000000000006", &bids[2]), 0);
    const char *bpl[3] = {NULL, "{\"color\":\"red\"}", NULL};
    cr_assert_eq(sieve_client_upsert_batch(c, "lib", bids, &v[3][0], 3, 4, bpl), 0, "%s",
                 sieve_client_message(c));
}

Test(http_lib, every_endpoint_with_codes_and_messages) {
    start_server(NULL);
    sieve_client *c = client();
    sieve_client_server_info si;
    cr_assert_eq(sieve_client_server_info_get(c, &si), 0, "%s", sieve_client_message(c));
    cr_assert(strstr(si.title, "sieve"), "title %s", si.title);
    cr_assert_eq(sieve_client_healthz(c), 0);

    sieve_client_collection_config cfg = {4, SIEVE_CLIENT_DOT, SIEVE_CLIENT_FLOAT32};
    cr_assert_eq(sieve_client_create_collection(c, "lib", &cfg), 0, "%s", sieve_client_message(c));
    cr_assert_eq(sieve_client_create_collection(c, "lib", &cfg), SIEVE_EEXIST);
    cr_assert_eq(sieve_client_http_status(c), 409);
    int ex = 0;
    cr_assert_eq(sieve_client_collection_exists(c, "lib", &ex), 0);
    cr_assert_eq(ex, 1);
    cr_assert_eq(sieve_client_collection_exists(c, "nope", &ex), 0);
    cr_assert_eq(ex, 0);
    sieve_client_collection_info info;
    cr_assert_eq(sieve_client_get_collection(c, "nope", &info), SIEVE_ENOTFOUND);
    cr_assert(strstr(sieve_client_message(c), "nope"), "%s", sieve_client_message(c));
    cr_assert_eq(sieve_client_http_status(c), 404);

    sieve_client_point pts[3];
    sieve_client_id bids[3];
    lib_points(c, pts, bids);
    /* wrong dimension: the server says so */
    cr_assert_eq(sieve_client_upsert(c, "lib", pts, 1, 3), SIEVE_EINVAL);
    cr_assert_eq(sieve_client_http_status(c), 400);
    cr_assert_neq(sieve_client_message(c)[0], 0);
    cr_assert_eq(sieve_client_upsert(c, "nope", pts, 1, 4), SIEVE_ENOTFOUND);

    uint64_t n = 0;
    cr_assert_eq(sieve_client_count(c, "lib", NULL, &n), 0);
    cr_assert_eq(n, 6);
    cr_assert_eq(
        sieve_client_count(c, "lib",
                           "{\"must\":[{\"key\":\"color\",\"match\":{\"value\":\"red\"}}]}", &n),
        0);
    cr_assert_eq(n, 2);
    cr_assert_eq(sieve_client_count(c, "lib", "{\"must\":[{\"key\":\"color\",\"bogus\":1}]}", &n),
                 SIEVE_EINVAL);

    sieve_client_record rec;
    cr_assert_eq(sieve_client_get_point(c, "lib", &bids[2], &rec), 0, "%s",
                 sieve_client_message(c));
    cr_assert(rec.id.is_uuid);
    cr_assert_eq(rec.dim, 4);
    cr_assert_eq(rec.vector[3], 3.0f);
    sieve_client_record_clear(&rec);
    sieve_client_id missing = sieve_client_id_num(77);
    cr_assert_eq(sieve_client_get_point(c, "lib", &missing, &rec), SIEVE_ENOTFOUND);

    sieve_client_id want[3] = {sieve_client_id_num(2), missing, sieve_client_id_num(5)};
    sieve_client_records r;
    cr_assert_eq(sieve_client_retrieve(c, "lib", want, 3, 1, 1, &r), 0);
    cr_assert_eq(r.n, 2);
    for (size_t i = 0; i < r.n; i++) {
        cr_assert_not_null(r.items[i].payload);
        cr_assert(strstr(r.items[i].payload, "red"), "%s", r.items[i].payload);
        cr_assert_not_null(r.items[i].vector);
    }
    sieve_client_records_clear(&r);

    /* deletes */
    sieve_client_id del[2] = {sieve_client_id_num(1), missing};
    cr_assert_eq(sieve_client_delete_points(c, "lib", del, 2), 0);
    cr_assert_eq(sieve_client_delete_filter(c, "lib",
                                            "{\"must\":[{\"key\":\"color\",\"match\":{\"value\":"
                                            "\"red\"}}]}"),
                 0, "%s", sieve_client_message(c));
    cr_assert_eq(sieve_client_count(c, "lib", NULL, &n), 0);
    cr_assert_eq(n, 3); /* 3, 4, 6 */
    cr_assert_eq(sieve_client_get_collection(c, "lib", &info), 0);
    cr_assert_eq(info.points, 3);
    cr_assert_eq(info.config.dim, 4);
    cr_assert_eq(info.config.distance, SIEVE_CLIENT_DOT);
    cr_assert_eq(info.config.dtype, SIEVE_CLIENT_FLOAT32);
    cr_assert_geq(info.rows, 6);
    char **names;
    size_t cnt;
    cr_assert_eq(sieve_client_list_collections(c, &names, &cnt), 0);
    cr_assert_eq(cnt, 1);
    cr_assert_str_eq(names[0], "lib");
    sieve_client_free_names(names, cnt);
    int existed = 0;
    cr_assert_eq(sieve_client_delete_collection(c, "lib", &existed), 0);
    cr_assert_eq(existed, 1);
    cr_assert_eq(sieve_client_delete_collection(c, "lib", &existed), 0);
    cr_assert_eq(existed, 0);
    sieve_client_stats st;
    sieve_client_get_stats(c, &st);
    cr_assert_eq(st.connects, 1, "keep-alive: %llu connections for %llu calls",
                 (unsigned long long)st.connects, (unsigned long long)st.calls);
    sieve_client_close(c);
}

Test(http_lib, search_batch_query_routes_agree) {
    start_server(NULL);
    sieve_client *c = client();
    sieve_client_collection_config cfg = {4, SIEVE_CLIENT_DOT, SIEVE_CLIENT_FLOAT32};
    cr_assert_eq(sieve_client_create_collection(c, "lib", &cfg), 0, "%s", sieve_client_message(c));
    sieve_client_point pts[3];
    sieve_client_id bids[3];
    lib_points(c, pts, bids);
    require_search("lib", 4);
    sieve_client_records r;
    /* searches: the four routes agree */
    float qv[4] = {1, 0.1f, 0, 0};
    sieve_client_search_params q;
    memset(&q, 0, sizeof q);
    q.vector = qv;
    q.dim = 4;
    q.limit = 3;
    q.with_payload = 1;
    cr_assert_eq(sieve_client_search(c, "lib", &q, &r), 0, "%s", sieve_client_message(c));
    cr_assert_eq(r.n, 3);
    cr_assert_eq(r.items[0].id.num, 5); /* 2.0 */
    cr_assert_float_eq(r.items[0].score, 2.0f, 1e-6);
    cr_assert_eq(r.items[1].id.num, 1); /* 1.0 */
    cr_assert_eq(r.items[2].id.num, 4); /* 0.55 */
    cr_assert_float_eq(r.items[2].score, 0.55f, 1e-6);
    sieve_client_records res[2];
    sieve_client_search_params qs[2] = {q, q};
    qs[1].filter = "{\"must\":[{\"key\":\"color\",\"match\":{\"value\":\"blue\"}}]}";
    qs[1].limit = 10;
    cr_assert_eq(sieve_client_search_batch(c, "lib", qs, 2, res), 0, "%s", sieve_client_message(c));
    cr_assert_eq(res[0].n, 3);
    cr_assert_eq(res[0].items[0].id.num, 5);
    cr_assert_eq(res[1].n, 2, "blue points: %zu", res[1].n); /* ids 1 and 3 */
    cr_assert_eq(res[1].items[0].id.num, 1);
    sieve_client_records_clear(&res[0]);
    sieve_client_records_clear(&res[1]);
    sieve_client_records rq;
    cr_assert_eq(sieve_client_query(c, "lib", &q, &rq), 0, "%s", sieve_client_message(c));
    cr_assert_eq(rq.n, r.n);
    for (size_t i = 0; i < r.n; i++) cr_assert_eq(rq.items[i].id.num, r.items[i].id.num);
    sieve_client_records_clear(&rq);
    cr_assert_eq(sieve_client_query_batch(c, "lib", qs, 2, res), 0, "%s", sieve_client_message(c));
    cr_assert_eq(res[0].n, 3);
    cr_assert_eq(res[1].n, 2);
    sieve_client_records_clear(&res[0]);
    sieve_client_records_clear(&res[1]);
    sieve_client_records_clear(&r);
    q.use_score_threshold = 1;
    q.score_threshold = 0.9f;
    cr_assert_eq(sieve_client_search(c, "lib", &q, &r), 0);
    cr_assert_eq(r.n, 2, "threshold kept %zu", r.n);
    sieve_client_records_clear(&r);
    q.dim = 3;
    cr_assert_eq(sieve_client_search(c, "lib", &q, &r), SIEVE_EINVAL);
    cr_assert_eq(sieve_client_http_status(c), 400);

    sieve_client_close(c);
}

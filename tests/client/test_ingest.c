/* test_ingest.c: `sieve ingest --data-dir` and the sieve tool's command line, end to end.
 *
 * Owns: round trips of every input format through the real `sieve` binary into a data
 * directory, checked point by point against the store (ids, vectors bit for bit, payloads
 * as JSON values); corrupted and mismatched inputs (exit status and a message naming the
 * file and the offset or row); an ingest killed with SIGKILL (or stopped with SIGINT) and
 * run again ending with exactly the input; checkpoints that must not be trusted; the
 * directory held by another process; --help everywhere; progress quiet in pipes.
 * Must not: need a running sieve-server (test_cli_http.c covers the HTTP route).
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "sieve_datasets.h"
#include "sieve_store.h"
#include "tc.h"

static char g_dir[256];

static void setup(void) {
    unsetenv("SIEVE_URL");
    unsetenv("SIEVE_API_KEY");
    cr_assert_eq(tc_mkdtemp(g_dir, "sieve-ingest"), 0);
}

static void teardown(void) { tc_rmrf(g_dir); }

TestSuite(ingest, .init = setup, .fini = teardown);
TestSuite(ingest_errors, .init = setup, .fini = teardown);
TestSuite(resume, .init = setup, .fini = teardown);
TestSuite(cli, .init = setup, .fini = teardown);
TestSuite(checkpoint, .init = setup, .fini = teardown);

/* Path of name inside the test directory (rotating static buffers). */
static const char *P(const char *name) {
    static char bufs[16][512];
    static int k;
    char *b = bufs[k++ & 15];
    snprintf(b, 512, "%s/%s", g_dir, name);
    return b;
}

/* Runs sieve with the NULL-terminated arguments. */
static int sieve(tc_out *o, ...) {
    char *argv[64];
    int n = 0;
    argv[n++] = (char *)tc_sieve_bin();
    va_list ap;
    va_start(ap, o);
    const char *a;
    while ((a = va_arg(ap, const char *)) && n < 63) argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    return tc_run(argv, NULL, NULL, o);
}

#define ASSERT_RUN_OK(o)                                                                           \
    cr_assert_eq((o).status, 0, "sieve exited with %d\nstdout: %s\nstderr: %s", (o).status,        \
                 (o).out, (o).err)

/* ---------------------------------------------------------------- data */

static void fill(float *v, size_t n, uint64_t seed, float scale) {
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0) * scale;
    }
}

static void write_dense(const char *path, sieve_ds_format f, sieve_ds_elem e, uint32_t dim,
                        const float *v, size_t n) {
    sieve_ds_writer *w;
    sieve_ds_error err;
    cr_assert_eq(sieve_ds_writer_open(path, f, e, dim, 0, &w, &err), 0, "%s", err.msg);
    cr_assert_eq(sieve_ds_writer_write_f32(w, v, n, &err), 0, "%s", err.msg);
    cr_assert_eq(sieve_ds_writer_close(w, &err), 0, "%s", err.msg);
}

static void write_ids(const char *path, sieve_ds_format f, sieve_ds_elem e, const uint64_t *ids,
                      size_t n) {
    sieve_ds_writer *w;
    sieve_ds_error err;
    cr_assert_eq(sieve_ds_writer_open(path, f, e, 1, 0, &w, &err), 0, "%s", err.msg);
    cr_assert_eq(sieve_ds_writer_write_u64(w, ids, n, &err), 0, "%s", err.msg);
    cr_assert_eq(sieve_ds_writer_close(w, &err), 0, "%s", err.msg);
}

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* Expected content of one point. */
typedef struct expect {
    sieve_point_id id;
    const float *vec;
    const char *payload; /* JSON text or NULL */
} expect;

static sieve_point_id num_id(uint64_t v) {
    sieve_point_id p;
    memset(&p, 0, sizeof p);
    p.kind = SIEVE_ID_NUM;
    p.num = v;
    return p;
}

/* Opens the store and checks that the collection holds exactly these points. tol = 0:
 * vectors bit for bit. */
static void check_store(const char *dir, const char *coll, const expect *e, size_t n, uint32_t dim,
                        float tol) {
    sieve_store *st;
    int rc = sieve_store_open(dir, NULL, &st);
    cr_assert_eq(rc, 0, "open %s: %s", dir, sieve_errname(rc));
    uint64_t count = 0;
    cr_assert_eq(sieve_store_count(st, coll, &count), 0);
    cr_assert_eq(count, n, "collection %s holds %llu points, want %zu", coll,
                 (unsigned long long)count, n);
    float *got = malloc(dim * sizeof *got);
    for (size_t i = 0; i < n; i++) {
        char *payload = NULL;
        rc = sieve_store_get(st, coll, &e[i].id, got, &payload);
        cr_assert_eq(rc, 0, "point %zu (id %llu) missing: %s", i, (unsigned long long)e[i].id.num,
                     sieve_errname(rc));
        for (uint32_t k = 0; k < dim; k++) {
            if (tol == 0)
                cr_assert_eq(memcmp(&got[k], &e[i].vec[k], 4), 0,
                             "point %zu element %u: stored %a, input %a", i, k, (double)got[k],
                             (double)e[i].vec[k]);
            else
                cr_assert(fabsf(got[k] - e[i].vec[k]) <= tol,
                          "point %zu element %u: stored %g, expected %g (tol %g)", i, k,
                          (double)got[k], (double)e[i].vec[k], (double)tol);
        }
        if (!e[i].payload) {
            cr_assert_null(payload, "point %zu has payload %s, want none", i, payload);
        } else {
            cr_assert_not_null(payload, "point %zu lost its payload %s", i, e[i].payload);
            json_t *a = json_loads(payload, 0, NULL), *b = json_loads(e[i].payload, 0, NULL);
            cr_assert(a && b && json_equal(a, b), "point %zu payload %s, want %s", i, payload,
                      e[i].payload);
            json_decref(a);
            json_decref(b);
        }
        free(payload);
    }
    free(got);
    sieve_store_close(st);
}

/* Checks rows [0, n) of v with ids id0 + i and no payloads. */
static void check_rows(const char *dir, const char *coll, const float *v, size_t n, uint32_t dim,
                       uint64_t id0) {
    expect *e = calloc(n, sizeof *e);
    for (size_t i = 0; i < n; i++) {
        e[i].id = num_id(id0 + i);
        e[i].vec = v + i * dim;
    }
    check_store(dir, coll, e, n, dim, 0);
    free(e);
}

/* ---------------------------------------------------------------- round trips */

Test(ingest, fvecs_with_row_number_ids) {
    enum { N = 700, D = 24 };
    float *v = malloc(N * D * sizeof *v);
    fill(v, N * D, 1, 1.0f);
    write_dense(P("v.fvecs"), SIEVE_DS_FORMAT_FVECS, SIEVE_DS_ELEM_AUTO, D, v, N);
    tc_out o;
    sieve(&o, "ingest", P("v.fvecs"), "--collection", "c", "--create", "--data-dir", P("data"),
          "--batch", "64", NULL);
    ASSERT_RUN_OK(o);
    cr_assert(strstr(o.out, "ingested 700 rows"), "stdout: %s", o.out);
    cr_assert(strstr(o.out, "it now has 700 points"), "stdout: %s", o.out);
    cr_assert(strstr(o.err, "created collection 'c' (24 dimensions, Dot, float32)"), "%s", o.err);
    tc_out_free(&o);
    cr_assert_neq(access(P("v.fvecs.sieve-ingest-c"), F_OK), 0, "checkpoint left after success");
    check_rows(P("data"), "c", v, N, D, 0);
    /* the same command again is harmless: the same ids are rewritten, nothing is added */
    sieve(&o, "ingest", P("v.fvecs"), "--collection", "c", "--data-dir", P("data"), NULL);
    ASSERT_RUN_OK(o);
    tc_out_free(&o);
    check_rows(P("data"), "c", v, N, D, 0);
    free(v);
}

Test(ingest, bvecs_u64bin_ids_jsonl_payloads) {
    enum { N = 300, D = 16 };
    float *v = malloc(N * D * sizeof *v);
    for (int i = 0; i < N * D; i++) v[i] = (float)((i * 37 + i / 7) % 256);
    write_dense(P("v.bvecs"), SIEVE_DS_FORMAT_BVECS, SIEVE_DS_ELEM_AUTO, D, v, N);
    uint64_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = 1000000000000000ull + (uint64_t)i * 7919;
    write_ids(P("ids.u64bin"), SIEVE_DS_FORMAT_U64BIN, SIEVE_DS_ELEM_AUTO, ids, N);
    sieve_ds_jsonl_writer *w;
    sieve_ds_error err;
    cr_assert_eq(sieve_ds_jsonl_writer_open(P("p.jsonl"), &w, &err), 0, "%s", err.msg);
    static char texts[N][96];
    for (int i = 0; i < N; i++) {
        snprintf(texts[i], sizeof texts[i],
                 "{\"i\":%d,\"s\":\"r\\u00e9sum\\u00e9 %d\",\"tags\":[1,\"x\"]}", i, i * i);
        cr_assert_eq(sieve_ds_jsonl_write(w, NULL, NULL, 0, i % 5 == 3 ? NULL : texts[i], &err), 0,
                     "%s", err.msg);
    }
    cr_assert_eq(sieve_ds_jsonl_writer_close(w, &err), 0, "%s", err.msg);
    tc_out o;
    sieve(&o, "ingest", P("v.bvecs"), "--ids", P("ids.u64bin"), "--payloads", P("p.jsonl"),
          "--collection", "b", "--create", "--data-dir", P("data"), "--batch", "50", "--parallel",
          "3", NULL);
    ASSERT_RUN_OK(o);
    tc_out_free(&o);
    expect e[N];
    for (int i = 0; i < N; i++) {
        e[i].id = num_id(ids[i]);
        e[i].vec = v + i * D;
        e[i].payload = i % 5 == 3 ? NULL : texts[i];
    }
    check_store(P("data"), "b", e, N, D, 0);
    free(v);
}

Test(ingest, fbin_ibin_ids_tsv_payloads) {
    enum { N = 257, D = 8 };
    float *v = malloc(N * D * sizeof *v);
    fill(v, N * D, 2, 3.0f);
    write_dense(P("v.fbin"), SIEVE_DS_FORMAT_FBIN, SIEVE_DS_ELEM_AUTO, D, v, N);
    uint64_t ids[N];
    sieve_ds_id dids[N];
    static char texts[N][80];
    const char *tp[N];
    for (int i = 0; i < N; i++) {
        ids[i] = 5000000 + (uint64_t)i * 3;
        memset(&dids[i], 0, sizeof dids[i]);
        dids[i].num = ids[i];
        snprintf(texts[i], sizeof texts[i], "passage %d: \"quoted\" back\\slash caf\xc3\xa9", i);
        tp[i] = texts[i];
    }
    write_ids(P("ids.ibin"), SIEVE_DS_FORMAT_IBIN, SIEVE_DS_ELEM_AUTO, ids, N);
    sieve_ds_error err;
    cr_assert_eq(sieve_ds_tsv_save(P("collection.tsv"), dids, tp, N, &err), 0, "%s", err.msg);
    tc_out o;
    sieve(&o, "ingest", P("v.fbin"), "--ids", P("ids.ibin"), "--payloads", P("collection.tsv"),
          "--collection", "m", "--create", "--data-dir", P("data"), NULL);
    ASSERT_RUN_OK(o);
    tc_out_free(&o);
    expect e[N];
    static char pl[N][160];
    for (int i = 0; i < N; i++) {
        json_t *j = json_pack("{s:s}", "text", texts[i]);
        char *s = json_dumps(j, JSON_COMPACT);
        snprintf(pl[i], sizeof pl[i], "%s", s);
        free(s);
        json_decref(j);
        e[i].id = num_id(ids[i]);
        e[i].vec = v + i * D;
        e[i].payload = pl[i];
    }
    check_store(P("data"), "m", e, N, D, 0);
    free(v);
}

Test(ingest, npy_float32_with_npy_ids) {
    enum { N = 400, D = 32 };
    float *v = malloc(N * D * sizeof *v);
    fill(v, N * D, 3, 0.1f);
    write_dense(P("v.npy"), SIEVE_DS_FORMAT_NPY, SIEVE_DS_ELEM_F32, D, v, N);
    uint64_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = (uint64_t)(N - i) * 1000003ull;
    write_ids(P("ids.npy"), SIEVE_DS_FORMAT_NPY, SIEVE_DS_ELEM_U64, ids, N);
    tc_out o;
    sieve(&o, "ingest", P("v.npy"), "--ids", P("ids.npy"), "--collection", "n", "--create",
          "--data-dir", P("data"), "--batch", "33", NULL);
    ASSERT_RUN_OK(o);
    tc_out_free(&o);
    expect e[N];
    for (int i = 0; i < N; i++) {
        e[i].id = num_id(ids[i]);
        e[i].vec = v + i * D;
        e[i].payload = NULL;
    }
    check_store(P("data"), "n", e, N, D, 0);
    free(v);
}

Test(ingest, npy_float16_with_id_start) {
    enum { N = 200, D = 12 };
    float *v = malloc(N * D * sizeof *v);
    fill(v, N * D, 4, 50.0f);
    write_dense(P("h.npy"), SIEVE_DS_FORMAT_NPY, SIEVE_DS_ELEM_F16, D, v, N);
    /* what the file holds: every value rounded to float16 */
    for (int i = 0; i < N * D; i++) v[i] = sieve_ds_f16_to_f32(sieve_ds_f32_to_f16(v[i]));
    tc_out o;
    sieve(&o, "ingest", P("h.npy"), "--collection", "h", "--create", "--data-dir", P("data"),
          "--id-start", "5000", NULL);
    ASSERT_RUN_OK(o);
    tc_out_free(&o);
    check_rows(P("data"), "h", v, N, D, 5000);
    free(v);
}

Test(ingest, jsonl_with_ids_vectors_payloads) {
    enum { N = 150, D = 6 };
    float *v = malloc(N * D * sizeof *v);
    fill(v, N * D, 5, 1e-3f);
    v[0] = 1e15f; /* large, yet its squared norm fits float32 */
    v[1] = -1.4e-45f;
    v[2] = 0.0f;
    sieve_ds_jsonl_writer *w;
    sieve_ds_error err;
    cr_assert_eq(sieve_ds_jsonl_writer_open(P("pts.jsonl"), &w, &err), 0, "%s", err.msg);
    expect e[N];
    static char pl[N][64];
    for (int i = 0; i < N; i++) {
        sieve_ds_id id;
        memset(&id, 0, sizeof id);
        if (i % 3 == 0) {
            id.is_uuid = 1;
            for (int k = 0; k < 16; k++) id.uuid[k] = (uint8_t)(k * 17 + 1);
            id.uuid[14] = (uint8_t)(i >> 8);
            id.uuid[15] = (uint8_t)i;
        } else {
            id.num = (uint64_t)i * 11;
        }
        snprintf(pl[i], sizeof pl[i], "{\"row\":%d,\"ok\":%s}", i, i % 2 ? "true" : "false");
        cr_assert_eq(sieve_ds_jsonl_write(w, &id, v + i * D, D, i % 4 == 0 ? NULL : pl[i], &err), 0,
                     "%s", err.msg);
        memset(&e[i].id, 0, sizeof e[i].id);
        e[i].id.kind = id.is_uuid ? SIEVE_ID_UUID : SIEVE_ID_NUM;
        e[i].id.num = id.num;
        memcpy(e[i].id.uuid, id.uuid, 16);
        e[i].vec = v + i * D;
        e[i].payload = i % 4 == 0 ? NULL : pl[i];
    }
    cr_assert_eq(sieve_ds_jsonl_writer_close(w, &err), 0, "%s", err.msg);
    tc_out o;
    sieve(&o, "ingest", P("pts.jsonl"), "--collection", "j", "--create", "--data-dir", P("data"),
          "--batch", "16", "--distance", "Euclid", NULL);
    ASSERT_RUN_OK(o);
    tc_out_free(&o);
    check_store(P("data"), "j", e, N, D, 0);
    free(v);
}

Test(ingest, cosine_float16_collection_created_as_asked) {
    enum { N = 100, D = 16 };
    float *v = malloc(N * D * sizeof *v);
    fill(v, N * D, 6, 2.0f);
    write_dense(P("v.fbin"), SIEVE_DS_FORMAT_FBIN, SIEVE_DS_ELEM_AUTO, D, v, N);
    tc_out o;
    sieve(&o, "ingest", P("v.fbin"), "--collection", "cos", "--create", "--distance", "cosine",
          "--dtype", "float16", "--data-dir", P("data"), NULL);
    ASSERT_RUN_OK(o);
    tc_out_free(&o);
    sieve_store *st;
    cr_assert_eq(sieve_store_open(P("data"), NULL, &st), 0);
    sieve_collection_info info;
    cr_assert_eq(sieve_store_collection_info(st, "cos", &info), 0);
    cr_assert_eq(info.config.metric, SIEVE_METRIC_COSINE);
    cr_assert_eq(info.config.dtype, SIEVE_DTYPE_F16);
    cr_assert_eq(info.config.dim, D);
    sieve_store_close(st);
    /* stored: the normalised vector in float16 */
    for (int i = 0; i < N; i++) {
        double s = 0;
        for (int k = 0; k < D; k++) s += (double)v[i * D + k] * v[i * D + k];
        for (int k = 0; k < D; k++) v[i * D + k] = (float)(v[i * D + k] / sqrt(s));
    }
    expect e[N];
    for (int i = 0; i < N; i++) {
        e[i].id = num_id((uint64_t)i);
        e[i].vec = v + i * D;
        e[i].payload = NULL;
    }
    check_store(P("data"), "cos", e, N, D, 1.0f / 1024);
    /* asking for another distance on the existing collection is refused */
    sieve(&o, "ingest", P("v.fbin"), "--collection", "cos", "--create", "--distance", "Dot",
          "--data-dir", P("data"), NULL);
    cr_assert_eq(o.status, 1, "%s", o.err);
    cr_assert(strstr(o.err, "exists with Cosine/float16, not the Dot/float16 asked for"), "%s",
              o.err);
    tc_out_free(&o);
    free(v);
}

Test(ingest, limit_small_batches_many_threads) {
    enum { N = 1000, D = 4 };
    float *v = malloc(N * D * sizeof *v);
    fill(v, N * D, 7, 1.0f);
    write_dense(P("v.fbin"), SIEVE_DS_FORMAT_FBIN, SIEVE_DS_ELEM_AUTO, D, v, N);
    tc_out o;
    sieve(&o, "ingest", P("v.fbin"), "--collection", "l", "--create", "--data-dir", P("data"),
          "--limit", "333", "--batch", "7", "--parallel", "5", NULL);
    ASSERT_RUN_OK(o);
    cr_assert(strstr(o.out, "ingested 333 rows"), "%s", o.out);
    tc_out_free(&o);
    check_rows(P("data"), "l", v, 333, D, 0);
    free(v);
}

/* ---------------------------------------------------------------- bad inputs */

/* Runs an ingest that must fail with exit status 1 and a message holding every needle. */
static void expect_failure(const char *file, const char *extra1, const char *extra2,
                           const char *const *needles) {
    tc_out o;
    sieve(&o, "ingest", file, "--collection", "bad", "--create", "--data-dir", P("data"), "--batch",
          "4", extra1, extra2, NULL);
    cr_assert_eq(o.status, 1, "exit %d; stderr: %s", o.status, o.err);
    for (size_t i = 0; needles[i]; i++)
        cr_assert(strstr(o.err, needles[i]), "message lacks '%s': %s", needles[i], o.err);
    tc_out_free(&o);
}

Test(ingest_errors, truncated_fbin) {
    float v[100 * 8];
    fill(v, 800, 8, 1.0f);
    write_dense(P("t.fbin"), SIEVE_DS_FORMAT_FBIN, SIEVE_DS_ELEM_AUTO, 8, v, 100);
    cr_assert_eq(truncate(P("t.fbin"), 8 + 99 * 32 + 10), 0);
    const char *n[] = {"t.fbin", "3208 bytes expected", "3186 bytes", NULL};
    expect_failure(P("t.fbin"), NULL, NULL, n);
    cr_assert_neq(access(P("data"), F_OK), 0, "a failed input check created the data directory");
}

Test(ingest_errors, fvecs_row_with_another_dimension) {
    /* rows: dim 3, dim 3, dim 7 (at byte offset 32), dim 3 */
    int32_t buf[4 + 4 + 8 + 4];
    size_t k = 0;
    for (int r = 0; r < 4; r++) {
        int d = r == 2 ? 7 : 3;
        buf[k++] = d;
        for (int i = 0; i < d; i++) {
            float f = (float)(r + i);
            memcpy(&buf[k++], &f, 4);
        }
    }
    write_bytes(P("m.fvecs"), buf, k * 4);
    const char *n[] = {"m.fvecs", "byte offset 32", "dimension 7", NULL};
    expect_failure(P("m.fvecs"), NULL, NULL, n);
}

Test(ingest_errors, nan_in_a_row) {
    float v[20 * 4];
    fill(v, 80, 9, 1.0f);
    v[5 * 4 + 2] = NAN;
    /* writers refuse NaN unless told to let it through */
    sieve_ds_writer *w;
    sieve_ds_error err;
    cr_assert_eq(sieve_ds_writer_open(P("nan.fbin"), SIEVE_DS_FORMAT_FBIN, SIEVE_DS_ELEM_AUTO, 4,
                                      SIEVE_DS_ALLOW_NONFINITE, &w, &err),
                 0, "%s", err.msg);
    cr_assert_eq(sieve_ds_writer_write_f32(w, v, 20, &err), 0, "%s", err.msg);
    cr_assert_eq(sieve_ds_writer_close(w, &err), 0, "%s", err.msg);
    const char *m[] = {"nan.fbin", "row 5, element 2", "NaN", NULL};
    expect_failure(P("nan.fbin"), NULL, NULL, m);
    /* rows of the batches before the bad one may be stored; nothing after, nothing partial */
    sieve_store *st;
    cr_assert_eq(sieve_store_open(P("data"), NULL, &st), 0);
    uint64_t cnt = 99;
    cr_assert_eq(sieve_store_count(st, "bad", &cnt), 0);
    cr_assert(cnt == 0 || cnt == 4, "%llu points stored", (unsigned long long)cnt);
    sieve_store_close(st);
}

Test(ingest_errors, jsonl_bad_line) {
    write_bytes(
        P("bad.jsonl"),
        "{\"id\":1,\"vector\":[1,2]}\n{\"id\":2,\"vector\":[3,4]}\n{\"id\":3,\"vector\":[5,}\n",
        strlen("{\"id\":1,\"vector\":[1,2]}\n{\"id\":2,\"vector\":[3,4]}\n"
               "{\"id\":3,\"vector\":[5,}\n"));
    const char *n[] = {"bad.jsonl:3", NULL};
    expect_failure(P("bad.jsonl"), NULL, NULL, n);
}

Test(ingest_errors, ids_file_of_another_length) {
    float v[10 * 2];
    fill(v, 20, 10, 1.0f);
    write_dense(P("v.fbin"), SIEVE_DS_FORMAT_FBIN, SIEVE_DS_ELEM_AUTO, 2, v, 10);
    uint64_t ids[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    write_ids(P("ids.u64bin"), SIEVE_DS_FORMAT_U64BIN, SIEVE_DS_ELEM_AUTO, ids, 9);
    const char *n[] = {"ids.u64bin", "9", "10", NULL};
    expect_failure(P("v.fbin"), "--ids", P("ids.u64bin"), n);
}

Test(ingest_errors, fortran_order_npy) {
    const char hdr[] = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }";
    char buf[128 + 16];
    memset(buf, ' ', sizeof buf);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    uint16_t hl = 128 - 10;
    memcpy(buf + 8, &hl, 2);
    memcpy(buf + 10, hdr, sizeof hdr - 1);
    buf[127] = '\n';
    float f[4] = {1, 2, 3, 4};
    memcpy(buf + 128, f, 16);
    write_bytes(P("f.npy"), buf, sizeof buf);
    const char *n[] = {"f.npy", "Fortran", NULL};
    expect_failure(P("f.npy"), NULL, NULL, n);
}

Test(ingest_errors, missing_file_and_wrong_dimension) {
    const char *n[] = {"nope.fbin", NULL};
    expect_failure(P("nope.fbin"), NULL, NULL, n);
    float v[10 * 3];
    fill(v, 30, 11, 1.0f);
    write_dense(P("d3.fbin"), SIEVE_DS_FORMAT_FBIN, SIEVE_DS_ELEM_AUTO, 3, v, 10);
    write_dense(P("d2.fbin"), SIEVE_DS_FORMAT_FBIN, SIEVE_DS_ELEM_AUTO, 2, v, 10);
    tc_out o;
    sieve(&o, "ingest", P("d3.fbin"), "--collection", "k", "--create", "--data-dir", P("data"),
          NULL);
    ASSERT_RUN_OK(o);
    tc_out_free(&o);
    sieve(&o, "ingest", P("d2.fbin"), "--collection", "k", "--data-dir", P("data"), NULL);
    cr_assert_eq(o.status, 1);
    cr_assert(strstr(o.err, "has 2-dimensional vectors but collection 'k' has 3"), "%s", o.err);
    tc_out_free(&o);
    sieve(&o, "ingest", P("d2.fbin"), "--collection", "absent", "--data-dir", P("data"), NULL);
    cr_assert_eq(o.status, 1);
    cr_assert(strstr(o.err, "collection 'absent' does not exist"), "%s", o.err);
    cr_assert(strstr(o.err, "--create"), "%s", o.err);
    tc_out_free(&o);
    check_rows(P("data"), "k", v, 10, 3, 0);
}

Test(ingest_errors, data_dir_held_by_another_process) {
    float v[10 * 3];
    fill(v, 30, 12, 1.0f);
    write_dense(P("v.fbin"), SIEVE_DS_FORMAT_FBIN, SIEVE_DS_ELEM_AUTO, 3, v, 10);
    /* a child process holds the directory open, like a server would */
    int ready[2], release[2];
    cr_assert_eq(pipe(ready), 0);
    cr_assert_eq(pipe(release), 0);
    pid_t pid = fork();
    if (pid == 0) {
        sieve_store *st;
        char c = sieve_store_open(P("data"), NULL, &st) ? 'x' : 'o';
        if (write(ready[1], &c, 1) != 1) _exit(3);
        if (read(release[0], &c, 1) < 0) _exit(4);
        sieve_store_close(st);
        _exit(0);
    }
    char c = 0;
    cr_assert_eq(read(ready[0], &c, 1), 1);
    cr_assert_eq(c, 'o', "the holder could not open the store");
    tc_out o;
    sieve(&o, "ingest", P("v.fbin"), "--collection", "x", "--create", "--data-dir", P("data"),
          NULL);
    cr_assert_eq(o.status, 1, "exit %d: %s", o.status, o.err);
    cr_assert(strstr(o.err, "is held by another process (a running sieve-server?)"), "%s", o.err);
    cr_assert(strstr(o.err, "--url http://HOST:PORT"), "%s", o.err);
    tc_out_free(&o);
    cr_assert_eq(write(release[1], "q", 1), 1);
    cr_assert_eq(tc_wait(pid), 0);
    /* once released the same command works */
    sieve(&o, "ingest", P("v.fbin"), "--collection", "x", "--create", "--data-dir", P("data"),
          NULL);
    ASSERT_RUN_OK(o);
    tc_out_free(&o);
    check_rows(P("data"), "x", v, 10, 3, 0);
}

/* ---------------------------------------------------------------- interrupted and resumed */

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Starts an ingest of FILE into data dir dd; waits until its checkpoint exists (a batch is
 * durably stored), then `delay_ms` more, then sends sig. Returns the exit status and
 * whether the checkpoint existed when the signal went. */
static int interrupt_ingest(const char *file, const char *dd, const char *ckpt, int sig,
                            long delay_ms, int *had_ckpt) {
    char *argv[] = {(char *)tc_sieve_bin(),
                    "ingest",
                    (char *)file,
                    "--collection",
                    "r",
                    "--create",
                    "--data-dir",
                    (char *)dd,
                    "--batch",
                    "1000",
                    "--parallel",
                    "2",
                    "--checkpoint",
                    (char *)ckpt,
                    NULL};
    pid_t pid = tc_spawn(argv, P("run.out"), P("run.err"));
    cr_assert_gt(pid, 0);
    *had_ckpt = 0;
    for (int i = 0; i < 20000; i++) {
        if (access(ckpt, F_OK) == 0) {
            *had_ckpt = 1;
            break;
        }
        int w;
        if (waitpid(pid, &w, WNOHANG) == pid) return WIFEXITED(w) ? WEXITSTATUS(w) : -1;
        sleep_ms(1);
    }
    sleep_ms(delay_ms);
    kill(pid, sig);
    return tc_wait(pid);
}

Test(resume, killed_at_random_moments_ends_with_exactly_the_input, .timeout = 600) {
    enum { N = 150000, D = 16 };
    float *v = malloc((size_t)N * D * sizeof *v);
    fill(v, (size_t)N * D, 13, 1.0f);
    write_dense(P("big.fbin"), SIEVE_DS_FORMAT_FBIN, SIEVE_DS_ELEM_AUTO, D, v, N);
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    int resumed = 0;
    for (int trial = 0; trial < 4; trial++) {
        char dd[64], ck[64];
        snprintf(dd, sizeof dd, "data%d", trial);
        snprintf(ck, sizeof ck, "ck%d", trial);
        int had = 0;
        long delay = rand() % 40;
        int st = interrupt_ingest(P("big.fbin"), P(dd), P(ck), SIGKILL, delay, &had);
        cr_assert(st == 1000 + SIGKILL || st == 0, "killed ingest ended with %d", st);
        /* run the same command again until it completes */
        tc_out o;
        char *argv[] = {(char *)tc_sieve_bin(),
                        "ingest",
                        (char *)P("big.fbin"),
                        "--collection",
                        "r",
                        "--create",
                        "--data-dir",
                        (char *)P(dd),
                        "--batch",
                        "1000",
                        "--parallel",
                        "2",
                        "--checkpoint",
                        (char *)P(ck),
                        NULL};
        tc_run(argv, NULL, NULL, &o);
        ASSERT_RUN_OK(o);
        if (st != 0 && had) {
            cr_assert(strstr(o.err, "resuming at row"),
                      "killed after a checkpoint (delay %ld ms) "
                      "but the second run did not resume: %s",
                      delay, o.err);
            resumed++;
        }
        cr_assert(strstr(o.out, "it now has 150,000 points"), "%s", o.out);
        tc_out_free(&o);
        cr_assert_neq(access(P(ck), F_OK), 0, "checkpoint left after completion");
        check_rows(P(dd), "r", v, N, D, 0);
    }
    cr_assert_geq(resumed, 1,
                  "no trial was killed mid-way; the input is too small for this "
                  "machine");
    free(v);
}

Test(resume, sigint_stops_cleanly_and_says_how_to_continue, .timeout = 300) {
    enum { N = 150000, D = 16 };
    float *v = malloc((size_t)N * D * sizeof *v);
    fill(v, (size_t)N * D, 14, 1.0f);
    write_dense(P("big.fbin"), SIEVE_DS_FORMAT_FBIN, SIEVE_DS_ELEM_AUTO, D, v, N);
    int had = 0;
    int st = interrupt_ingest(P("big.fbin"), P("data"), P("ck"), SIGINT, 0, &had);
    char *err = tc_read_file(P("run.err"), NULL);
    if (st == 0) {
        cr_assert(!had || strstr(err, "150,000 vectors"), "%s", err);
    } else {
        cr_assert_eq(st, 130, "interrupted ingest exited %d: %s", st, err);
        cr_assert(strstr(err, "interrupted"), "%s", err);
        cr_assert(strstr(err, "run the same command again to continue from row"), "%s", err);
        cli_ckpt ck;
        char why[256];
        cr_assert_eq(cli_ckpt_load(P("ck"), &ck, why, sizeof why), 0, "%s", why);
        cr_assert_gt(ck.done, 0);
        cr_assert_lt(ck.done, N);
        cr_assert_eq(ck.done % 1000, 0, "watermark %llu is not a batch boundary",
                     (unsigned long long)ck.done);
        /* everything below the watermark really is stored */
        sieve_store *s;
        cr_assert_eq(sieve_store_open(P("data"), NULL, &s), 0);
        float got[D];
        for (uint64_t r = 0; r < ck.done; r += 997) {
            sieve_point_id id = num_id(r);
            cr_assert_eq(sieve_store_get(s, "r", &id, got, NULL), 0,
                         "row %llu below the "
                         "watermark is missing",
                         (unsigned long long)r);
            cr_assert_eq(memcmp(got, v + r * D, sizeof got), 0);
        }
        sieve_store_close(s);
    }
    free(err);
    tc_out o;
    char *argv[] = {(char *)tc_sieve_bin(),
                    "ingest",
                    (char *)P("big.fbin"),
                    "--collection",
                    "r",
                    "--data-dir",
                    (char *)P("data"),
                    "--batch",
                    "1000",
                    "--checkpoint",
                    (char *)P("ck"),
                    NULL};
    tc_run(argv, NULL, NULL, &o);
    ASSERT_RUN_OK(o);
    if (st == 130) cr_assert(strstr(o.err, "resuming at row"), "%s", o.err);
    tc_out_free(&o);
    check_rows(P("data"), "r", v, N, D, 0);
    free(v);
}

/* Leaves a checkpoint behind (by SIGKILL after one), or fails the test. */
static void leave_checkpoint(const char *file, const char *dd, const char *ck) {
    for (int attempt = 0; attempt < 5; attempt++) {
        int had = 0;
        int st = interrupt_ingest(file, dd, ck, SIGKILL, 0, &had);
        if (st == 1000 + SIGKILL && had && access(ck, F_OK) == 0) return;
        tc_rmrf(dd);
        unlink(ck);
    }
    cr_assert_fail("could not interrupt an ingest after its first checkpoint");
}

Test(resume, checkpoint_of_a_dropped_collection_is_not_trusted, .timeout = 300) {
    enum { N = 150000, D = 16 };
    float *v = malloc((size_t)N * D * sizeof *v);
    fill(v, (size_t)N * D, 15, 1.0f);
    write_dense(P("big.fbin"), SIEVE_DS_FORMAT_FBIN, SIEVE_DS_ELEM_AUTO, D, v, N);
    leave_checkpoint(P("big.fbin"), P("data"), P("ck"));
    sieve_store *st;
    cr_assert_eq(sieve_store_open(P("data"), NULL, &st), 0);
    cr_assert_eq(sieve_store_drop_collection(st, "r"), 0);
    sieve_store_close(st);
    tc_out o;
    char *argv[] = {(char *)tc_sieve_bin(),
                    "ingest",
                    (char *)P("big.fbin"),
                    "--collection",
                    "r",
                    "--create",
                    "--data-dir",
                    (char *)P("data"),
                    "--batch",
                    "5000",
                    "--checkpoint",
                    (char *)P("ck"),
                    NULL};
    tc_run(argv, NULL, NULL, &o);
    ASSERT_RUN_OK(o);
    cr_assert(strstr(o.err, "is missing or different in 'r'"), "%s", o.err);
    cr_assert(strstr(o.err, "starting at row 0"), "%s", o.err);
    cr_assert_null(strstr(o.err, "resuming at row"), "%s", o.err);
    tc_out_free(&o);
    check_rows(P("data"), "r", v, N, D, 0);
    free(v);
}

Test(resume, changed_input_file_starts_over, .timeout = 300) {
    enum { N = 150000, D = 16 };
    float *v = malloc((size_t)N * D * sizeof *v);
    fill(v, (size_t)N * D, 16, 1.0f);
    write_dense(P("big.fbin"), SIEVE_DS_FORMAT_FBIN, SIEVE_DS_ELEM_AUTO, D, v, N);
    leave_checkpoint(P("big.fbin"), P("data"), P("ck"));
    /* the file is rewritten with other values (same size): the checkpoint must not be used */
    fill(v, (size_t)N * D, 17, 1.0f);
    sleep_ms(20);
    write_dense(P("big.fbin"), SIEVE_DS_FORMAT_FBIN, SIEVE_DS_ELEM_AUTO, D, v, N);
    tc_out o;
    char *argv[] = {(char *)tc_sieve_bin(),
                    "ingest",
                    (char *)P("big.fbin"),
                    "--collection",
                    "r",
                    "--data-dir",
                    (char *)P("data"),
                    "--batch",
                    "5000",
                    "--checkpoint",
                    (char *)P("ck"),
                    NULL};
    tc_run(argv, NULL, NULL, &o);
    ASSERT_RUN_OK(o);
    cr_assert(strstr(o.err, "belongs to another ingest"), "%s", o.err);
    cr_assert(strstr(o.err, "changed since"), "%s", o.err);
    tc_out_free(&o);
    check_rows(P("data"), "r", v, N, D, 0);
    free(v);
}

/* ---------------------------------------------------------------- checkpoint files */

static void sample_ckpt(cli_ckpt *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->vectors.path, sizeof c->vectors.path, "/data/v.fbin");
    c->vectors.size = 3072000008ull;
    c->vectors.mtime_ns = 1764400000123456789ll;
    snprintf(c->payloads.path, sizeof c->payloads.path, "/data/collection.tsv");
    c->payloads.size = 10;
    snprintf(c->format, sizeof c->format, "fbin");
    snprintf(c->target, sizeof c->target, "url:http://127.0.0.1:6333");
    snprintf(c->collection, sizeof c->collection, "docs");
    c->id_start = 7;
    c->rows = 1000000;
    c->dim = 768;
    c->done = 424242;
}

Test(checkpoint, save_load_and_compare) {
    cli_ckpt a, b;
    sample_ckpt(&a);
    cr_assert_eq(cli_ckpt_save(P("ck"), &a), 0);
    char why[512] = "";
    cr_assert_eq(cli_ckpt_load(P("ck"), &b, why, sizeof why), 0, "%s", why);
    cr_assert_eq(memcmp(&a, &b, sizeof a), 0, "loaded checkpoint differs");
    cr_assert_eq(cli_ckpt_same_job(&a, &b, why, sizeof why), 1);
    b.done = 5;
    cr_assert_eq(cli_ckpt_same_job(&a, &b, why, sizeof why), 1, "done is not identity");
    b.vectors.mtime_ns++;
    cr_assert_eq(cli_ckpt_same_job(&a, &b, why, sizeof why), 0);
    cr_assert(strstr(why, "changed since"), "%s", why);
    sample_ckpt(&b);
    snprintf(b.target, sizeof b.target, "data-dir:/srv/sieve");
    cr_assert_eq(cli_ckpt_same_job(&a, &b, why, sizeof why), 0);
    cr_assert(strstr(why, "url:http://127.0.0.1:6333"), "%s", why);
    sample_ckpt(&b);
    b.id_start = 8;
    cr_assert_eq(cli_ckpt_same_job(&a, &b, why, sizeof why), 0);
    cr_assert_eq(cli_ckpt_load(P("absent"), &b, why, sizeof why), 1);
}

Test(checkpoint, torn_edited_or_foreign_files_are_rejected) {
    cli_ckpt a, b;
    sample_ckpt(&a);
    cr_assert_eq(cli_ckpt_save(P("ck"), &a), 0);
    size_t len;
    char *text = tc_read_file(P("ck"), &len);
    cr_assert_not_null(text);
    char why[512];
    /* torn: every prefix must be rejected */
    for (size_t cut = 0; cut < len; cut += 7) {
        write_bytes(P("torn"), text, cut);
        cr_assert_eq(cli_ckpt_load(P("torn"), &b, why, sizeof why), -1,
                     "prefix of %zu bytes "
                     "accepted",
                     cut);
        cr_assert_eq(b.done, 0);
    }
    /* edited: a different watermark with the old checksum */
    char *p = strstr(text, "done=424242");
    cr_assert_not_null(p);
    p[5] = '9';
    write_bytes(P("edited"), text, len);
    cr_assert_eq(cli_ckpt_load(P("edited"), &b, why, sizeof why), -1);
    cr_assert(strstr(why, "checksum"), "%s", why);
    write_bytes(P("foreign"), "hello\n", 6);
    cr_assert_eq(cli_ckpt_load(P("foreign"), &b, why, sizeof why), -1);
    cr_assert(strstr(why, "not a sieve ingest checkpoint"), "%s", why);
    free(text);
    /* done beyond rows */
    a.done = a.rows + 1;
    cr_assert_eq(cli_ckpt_save(P("over"), &a), 0);
    cr_assert_eq(cli_ckpt_load(P("over"), &b, why, sizeof why), -1);
}

/* ---------------------------------------------------------------- the command line */

Test(cli, help_on_every_command) {
    const char *cmds[] = {"collection", "upsert", "get",    "delete",
                          "count",      "search", "ingest", "health"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        tc_out o;
        sieve(&o, cmds[i], "--help", NULL);
        cr_assert_eq(o.status, 0, "sieve %s --help exited %d", cmds[i], o.status);
        char want[64];
        snprintf(want, sizeof want, "usage: sieve %s", cmds[i]);
        cr_assert(strstr(o.out, want), "sieve %s --help printed: %s", cmds[i], o.out);
        cr_assert(strstr(o.out, "--url URL"), "sieve %s --help lacks --url", cmds[i]);
        tc_out_free(&o);
    }
    tc_out o;
    sieve(&o, "--help", NULL);
    cr_assert_eq(o.status, 0);
    cr_assert(strstr(o.out, "usage: sieve COMMAND"), "%s", o.out);
    tc_out_free(&o);
    sieve(&o, "frobnicate", NULL);
    cr_assert_eq(o.status, 2);
    cr_assert(strstr(o.err, "unknown command 'frobnicate'"), "%s", o.err);
    tc_out_free(&o);
}

Test(cli, usage_errors_exit_2_with_a_hint) {
    static const struct {
        const char *args[6];
        const char *needle;
    } cases[] = {
        {{"ingest", "x.fbin", NULL}, "--collection NAME is required"},
        {{"ingest", "--collection", "c", NULL}, "which FILE?"},
        {{"ingest", "x.fbin", "-c", "c", "--bogus", NULL}, "unknown option '--bogus'"},
        {{"ingest", "x.fbin", "-c", "c", "--batch", NULL}, "needs a value"},
        {{"ingest", "x.fbin", "-c", "c", "--parallel", "0"}, "--parallel wants 1..64"},
        {{"collection", "create", "n", NULL}, "create needs --dim"},
        {{"collection", "rename", "n", NULL}, "unknown action 'rename'"},
        {{"search", "--collection", "c", "--vector", "1,x"}, "'x' is not a number"},
        {{"get", "--collection", "c", "abc", NULL}, "'abc' is not an id"},
        {{"upsert", "--collection", "c", "--id", "1", NULL}, "--id needs --vector"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[10];
        int n = 0;
        argv[n++] = (char *)tc_sieve_bin();
        for (int k = 0; k < 6 && cases[i].args[k]; k++) argv[n++] = (char *)cases[i].args[k];
        argv[n] = NULL;
        tc_out o;
        tc_run(argv, NULL, NULL, &o);
        cr_assert_eq(o.status, 2, "case %zu exited %d: %s", i, o.status, o.err);
        cr_assert(strstr(o.err, cases[i].needle), "case %zu: '%s' not in: %s", i, cases[i].needle,
                  o.err);
        cr_assert(strstr(o.err, "--help"), "case %zu gives no hint: %s", i, o.err);
        tc_out_free(&o);
    }
}

Test(cli, no_server_gives_a_clear_message) {
    tc_out o;
    sieve(&o, "collection", "list", "--url", "http://127.0.0.1:1", "--retries", "0", NULL);
    cr_assert_eq(o.status, 1);
    cr_assert(strstr(o.err, "cannot connect to http://127.0.0.1:1"), "%s", o.err);
    cr_assert(strstr(o.err, "is sieve-server running there?"), "%s", o.err);
    tc_out_free(&o);
    char *env[] = {"SIEVE_URL=http://127.0.0.1:1", NULL};
    char *argv[] = {(char *)tc_sieve_bin(), "count", "-c", "x", "--retries", "0", NULL};
    tc_run(argv, NULL, env, &o);
    cr_assert_eq(o.status, 1);
    cr_assert(strstr(o.err, "http://127.0.0.1:1"), "SIEVE_URL not used: %s", o.err);
    tc_out_free(&o);
}

Test(cli, progress_bar_only_when_asked_or_on_a_terminal) {
    enum { N = 5000, D = 8 };
    float *v = malloc(N * D * sizeof *v);
    fill(v, N * D, 18, 1.0f);
    write_dense(P("v.fbin"), SIEVE_DS_FORMAT_FBIN, SIEVE_DS_ELEM_AUTO, D, v, N);
    tc_out o;
    sieve(&o, "ingest", P("v.fbin"), "-c", "p", "--create", "--data-dir", P("data"), NULL);
    ASSERT_RUN_OK(o);
    cr_assert_null(strchr(o.err, '\r'), "progress drawn into a pipe: %s", o.err);
    cr_assert_null(strstr(o.err, "ETA"), "%s", o.err);
    tc_out_free(&o);
    sieve(&o, "ingest", P("v.fbin"), "-c", "p", "--data-dir", P("data"), "--progress", "--batch",
          "100", NULL);
    ASSERT_RUN_OK(o);
    cr_assert(strstr(o.err, "5,000/5,000 vectors"), "no final progress line: %s", o.err);
    tc_out_free(&o);
    free(v);
}

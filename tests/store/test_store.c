/* test_store.c: the LMDB store against real LMDB files in a fresh directory per test:
 * collections, points (every dtype and metric), rejected batches, snapshots, generations,
 * persistence, the directory lock, map growth from 1 MiB, and concurrent writers. */
#define _GNU_SOURCE /* mkdtemp */
#include <lmdb.h>
#include <math.h>
#include <pthread.h>
#include <sys/wait.h>

#include "store_test_util.h"

static char g_dir[512];
static sieve_store *g_st;

static void open_store(void) {
    sieve_store_options o;
    sieve_store_options_init(&o);
    int rc = sieve_store_open(g_dir, &o, &g_st);
    cr_assert_eq(rc, 0, "sieve_store_open: %s", sieve_errname(rc));
}

static void setup(void) {
    tu_mkdtemp(g_dir, sizeof g_dir);
    open_store();
}

static void teardown(void) {
    sieve_store_close(g_st);
    g_st = NULL;
    tu_rmdir(g_dir);
}

static void create(const char *name, uint32_t dim, sieve_metric m, sieve_dtype dt, uint32_t rpp) {
    sieve_collection_config c = tu_cfg(name, dim, m, dt, rpp);
    int rc = sieve_store_create_collection(g_st, &c);
    cr_assert_eq(rc, 0, "create %s: %s", name, sieve_errname(rc));
}

/* Upserts ids base .. base+n-1, vector seed = id + seed_off, optional payload {"id":N}. */
static void upsert_range(const char *coll, uint32_t dim, uint64_t base, size_t n,
                         uint64_t seed_off, int with_payload) {
    float *vecs = malloc(n * dim * sizeof *vecs);
    sieve_point *pts = calloc(n, sizeof *pts);
    char (*pay)[48] = malloc(n * sizeof *pay);
    cr_assert(vecs && pts && pay);
    for (size_t i = 0; i < n; i++) {
        tu_vec(vecs + i * dim, dim, base + i + seed_off);
        pts[i].id = tu_num(base + i);
        pts[i].vector = vecs + i * dim;
        pts[i].dim = dim;
        if (with_payload) {
            snprintf(pay[i], sizeof pay[i], "{\"id\":%llu}", (unsigned long long)(base + i));
            pts[i].payload = pay[i];
            pts[i].payload_len = strlen(pay[i]);
        }
    }
    int rc = sieve_store_upsert(g_st, coll, pts, n);
    cr_assert_eq(rc, 0, "upsert %s [%llu, +%zu): %s", coll, (unsigned long long)base, n,
                 sieve_errname(rc));
    free(vecs);
    free(pts);
    free(pay);
}

static uint64_t count_of(const char *coll) {
    uint64_t n = 0;
    int rc = sieve_store_count(g_st, coll, &n);
    cr_assert_eq(rc, 0, "count %s: %s", coll, sieve_errname(rc));
    return n;
}

static sieve_collection_info info_of(const char *coll) {
    sieve_collection_info in;
    int rc = sieve_store_collection_info(g_st, coll, &in);
    cr_assert_eq(rc, 0, "info %s: %s", coll, sieve_errname(rc));
    return in;
}

/* What the store should keep for src: normalised for Cosine, rounded through the dtype. */
static void expected_row(const sieve_collection_config *c, const float *src, float *out) {
    float tmp[1024];
    cr_assert_leq(c->dim, 1024);
    memcpy(tmp, src, c->dim * sizeof *tmp);
    if (c->metric == SIEVE_METRIC_COSINE) {
        double s = 0;
        for (uint32_t i = 0; i < c->dim; i++) s += (double)tmp[i] * tmp[i];
        double inv = s > 0 ? 1.0 / sqrt(s) : 0.0;
        for (uint32_t i = 0; i < c->dim; i++) tmp[i] = (float)(tmp[i] * inv);
    }
    uint16_t h[1024];
    switch (c->dtype) {
    case SIEVE_DTYPE_F32: memcpy(out, tmp, c->dim * sizeof *out); break;
    default:
        sieve_convert_from_f32(c->dtype, tmp, h, c->dim);
        sieve_convert_to_f32(c->dtype, h, out, c->dim);
        break;
    }
}

/* ================================================================ collections */

TestSuite(collections, .init = setup, .fini = teardown);

Test(collections, create_list_info_drop) {
    create("alpha", 4, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 0);
    create("b.c-d_E", 768, SIEVE_METRIC_COSINE, SIEVE_DTYPE_F16, 0);
    create("Zeta", 3, SIEVE_METRIC_EUCLID, SIEVE_DTYPE_BF16, 256);
    char **names;
    size_t n;
    cr_assert_eq(sieve_store_list_collections(g_st, &names, &n), 0);
    cr_assert_eq(n, 3, "listed %zu", n);
    cr_assert_str_eq(names[0], "Zeta"); /* byte order: uppercase first */
    cr_assert_str_eq(names[1], "alpha");
    cr_assert_str_eq(names[2], "b.c-d_E");
    sieve_store_free_names(names, n);

    sieve_collection_info a = info_of("alpha"), b = info_of("b.c-d_E"), z = info_of("Zeta");
    cr_assert_eq(a.config.dim, 4);
    cr_assert_eq(a.config.metric, SIEVE_METRIC_DOT);
    cr_assert_eq(a.config.dtype, SIEVE_DTYPE_F32);
    /* 4 f32 + 4 norm bytes = 20 bytes a row: the largest power of two <= 1 MiB is 32768 */
    cr_assert_eq(a.config.rows_per_page, 32768, "rpp %u", a.config.rows_per_page);
    /* 768 f16 + 4 = 1540 bytes a row: 512 rows = 788480 bytes <= 1 MiB < 1024 rows */
    cr_assert_eq(b.config.rows_per_page, 512, "rpp %u", b.config.rows_per_page);
    cr_assert_eq(b.config.metric, SIEVE_METRIC_COSINE);
    cr_assert_eq(b.config.dtype, SIEVE_DTYPE_F16);
    cr_assert_eq(z.config.rows_per_page, 256);
    cr_assert_eq(z.config.dtype, SIEVE_DTYPE_BF16);
    cr_assert_eq(a.points, 0);
    cr_assert_eq(a.rows, 0);
    cr_assert_eq(a.pages, 0);
    cr_assert_str_eq(a.config.name, "alpha");
    cr_assert_neq(a.collection_id, b.collection_id);
    cr_assert_neq(b.collection_id, z.collection_id);

    cr_assert_eq(sieve_store_drop_collection(g_st, "alpha"), 0);
    sieve_collection_info tmp;
    cr_assert_eq(sieve_store_collection_info(g_st, "alpha", &tmp), SIEVE_ENOTFOUND);
    cr_assert_eq(sieve_store_list_collections(g_st, &names, &n), 0);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(names[0], "Zeta");
    cr_assert_str_eq(names[1], "b.c-d_E");
    sieve_store_free_names(names, n);
}

Test(collections, duplicate_is_eexist_and_keeps_config) {
    create("dup", 8, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 0);
    sieve_collection_config c = tu_cfg("dup", 16, SIEVE_METRIC_EUCLID, SIEVE_DTYPE_F16, 0);
    int rc = sieve_store_create_collection(g_st, &c);
    cr_assert_eq(rc, SIEVE_EEXIST, "got %s", sieve_errname(rc));
    sieve_collection_info in = info_of("dup");
    cr_assert_eq(in.config.dim, 8);
    cr_assert_eq(in.config.dtype, SIEVE_DTYPE_F32);
}

Test(collections, unknown_is_enotfound) {
    sieve_collection_info in;
    uint64_t n;
    float v[4] = {1, 2, 3, 4};
    sieve_point p = {.id = tu_num(1), .vector = v};
    sieve_point_id id = tu_num(1);
    sieve_snapshot *s;
    cr_assert_eq(sieve_store_collection_info(g_st, "nope", &in), SIEVE_ENOTFOUND);
    cr_assert_eq(sieve_store_drop_collection(g_st, "nope"), SIEVE_ENOTFOUND);
    cr_assert_eq(sieve_store_count(g_st, "nope", &n), SIEVE_ENOTFOUND);
    cr_assert_eq(sieve_store_upsert(g_st, "nope", &p, 1), SIEVE_ENOTFOUND);
    cr_assert_eq(sieve_store_delete(g_st, "nope", &id, 1, NULL), SIEVE_ENOTFOUND);
    cr_assert_eq(sieve_store_get(g_st, "nope", &id, v, NULL), SIEVE_ENOTFOUND);
    cr_assert_eq(sieve_snapshot_open(g_st, "nope", &s), SIEVE_ENOTFOUND);
    cr_assert_null(s);
}

Test(collections, invalid_names_dims_and_configs) {
    const char *bad[] = {"", ".", "..", "a/b", "a b", "caf\xc3\xa9", "tab\t", "x\"y",
                         "12345678901234567890123456789012345678901234567890123456789012345"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(sieve_store_name_valid(bad[i]), 0, "'%s' accepted", bad[i]);
        sieve_collection_config c = tu_cfg(bad[i], 4, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 0);
        if (strlen(bad[i]) > SIEVE_NAME_MAX) memset(c.name, 'a', sizeof c.name); /* no NUL */
        int rc = sieve_store_create_collection(g_st, &c);
        cr_assert_eq(rc, SIEVE_EINVAL, "'%s': %s", bad[i], sieve_errname(rc));
        cr_assert_eq(sieve_store_drop_collection(g_st, bad[i]), SIEVE_EINVAL);
    }
    cr_assert_eq(sieve_store_name_valid(NULL), 0);
    const char *max = "1234567890123456789012345678901234567890123456789012345678901234";
    cr_assert_eq(strlen(max), 64);
    cr_assert_eq(sieve_store_name_valid(max), 1);
    cr_assert_eq(sieve_store_name_valid("..."), 1);
    create(max, 4, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 0);

    struct { uint32_t dim; int metric, dtype; uint32_t rpp; int rc; } cases[] = {
        {0, 0, 0, 0, SIEVE_EINVAL},      {65537, 0, 0, 0, SIEVE_EINVAL},
        {4, 7, 0, 0, SIEVE_EINVAL},      {4, 0, 9, 0, SIEVE_EINVAL},
        {4, 0, 0, 100, SIEVE_EINVAL},    {4, 0, 0, 64, SIEVE_EINVAL},
        {65536, 0, 0, 0, 0},             {1, 0, 1, 128, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[16];
        snprintf(name, sizeof name, "c%zu", i);
        sieve_collection_config c = tu_cfg(name, cases[i].dim, (sieve_metric)cases[i].metric,
                                           (sieve_dtype)cases[i].dtype, cases[i].rpp);
        int rc = sieve_store_create_collection(g_st, &c);
        cr_assert_eq(rc, cases[i].rc, "case %zu: got %s want %s", i, sieve_errname(rc),
                     sieve_errname(cases[i].rc));
    }
    cr_assert_eq(info_of("c6").config.rows_per_page, 128); /* a 65536-dim row exceeds 1 MiB/128 */
    cr_assert_eq(sieve_store_create_collection(g_st, NULL), SIEVE_EINVAL);
    cr_assert_eq(sieve_store_create_collection(NULL, NULL), SIEVE_EINVAL);
}

Test(collections, ids_are_never_reused) {
    create("a", 4, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 0);
    uint32_t first = info_of("a").collection_id;
    upsert_range("a", 4, 0, 10, 0, 1);
    cr_assert_eq(sieve_store_drop_collection(g_st, "a"), 0);
    create("a", 4, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 0);
    sieve_collection_info in = info_of("a");
    cr_assert_gt(in.collection_id, first, "id %u after %u", in.collection_id, first);
    cr_assert_eq(in.points, 0);
    cr_assert_eq(in.rows, 0);
    sieve_point_id id = tu_num(3);
    cr_assert_eq(sieve_store_get(g_st, "a", &id, NULL, NULL), SIEVE_ENOTFOUND);
}

/* Counts keys starting with cid in each named database, straight through LMDB. */
static void keys_with_cid(const char *dir, uint32_t cid, size_t counts[5]) {
    const char *dbs[5] = {"pages", "ids", "rows", "payloads", "free"};
    MDB_env *env;
    cr_assert_eq(mdb_env_create(&env), 0);
    mdb_env_set_maxdbs(env, 8);
    cr_assert_eq(mdb_env_open(env, dir, MDB_RDONLY, 0644), 0);
    MDB_txn *txn;
    cr_assert_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
    for (int i = 0; i < 5; i++) {
        MDB_dbi dbi;
        cr_assert_eq(mdb_dbi_open(txn, dbs[i], 0, &dbi), 0, "db %s", dbs[i]);
        MDB_cursor *cur;
        cr_assert_eq(mdb_cursor_open(txn, dbi, &cur), 0);
        MDB_val k, v;
        counts[i] = 0;
        for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
             rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
            const uint8_t *b = k.mv_data;
            uint32_t c = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
            if (c == cid) counts[i]++;
        }
        mdb_cursor_close(cur);
    }
    mdb_txn_abort(txn);
    mdb_env_close(env);
}

Test(collections, drop_deletes_every_key_of_the_collection) {
    create("gone", 8, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 128);
    create("kept", 8, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 128);
    upsert_range("gone", 8, 0, 700, 0, 1);
    upsert_range("kept", 8, 0, 300, 0, 1);
    sieve_point_id del[3] = {tu_num(1), tu_num(2), tu_num(3)};
    cr_assert_eq(sieve_store_delete(g_st, "gone", del, 3, NULL), 0);
    cr_assert_eq(sieve_store_delete(g_st, "kept", del, 3, NULL), 0);
    uint32_t gone = info_of("gone").collection_id, kept = info_of("kept").collection_id;
    cr_assert_eq(sieve_store_drop_collection(g_st, "gone"), 0);
    sieve_store_close(g_st);
    g_st = NULL;
    size_t c[5];
    keys_with_cid(g_dir, gone, c);
    for (int i = 0; i < 5; i++) cr_assert_eq(c[i], 0, "db %d keeps %zu keys", i, c[i]);
    keys_with_cid(g_dir, kept, c);
    cr_assert_eq(c[0], 3, "pages %zu", c[0]);  /* 300 rows / 128 */
    cr_assert_eq(c[1], 297, "ids %zu", c[1]);
    cr_assert_eq(c[2], 300, "rows %zu", c[2]);
    cr_assert_eq(c[3], 297, "payloads %zu", c[3]);
    cr_assert_eq(c[4], 3, "free %zu", c[4]);
    open_store();
    cr_assert_eq(count_of("kept"), 297);
}

/* ================================================================ points */

TestSuite(points, .init = setup, .fini = teardown);

Test(points, upsert_get_numeric_and_uuid_ids_with_payloads) {
    create("p", 8, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 0);
    float v[4][8];
    for (int i = 0; i < 4; i++) tu_vec(v[i], 8, 100 + i);
    const char *pay0 = "{\"a\":1,\"tags\":[\"x\",\"y\"]}";
    sieve_point pts[4] = {
        {.id = tu_num(0), .vector = v[0], .payload = pay0, .payload_len = strlen(pay0)},
        {.id = tu_num(UINT64_MAX), .vector = v[1]},
        {.id = tu_uuid(7), .vector = v[2], .payload = "{}", .payload_len = 2},
        {.id = tu_uuid(8), .vector = v[3], .dim = 8},
    };
    cr_assert_eq(sieve_store_upsert(g_st, "p", pts, 4), 0);
    cr_assert_eq(count_of("p"), 4);
    for (int i = 0; i < 4; i++) {
        float got[8];
        char *pay = (char *)1;
        int rc = sieve_store_get(g_st, "p", &pts[i].id, got, &pay);
        cr_assert_eq(rc, 0, "get %d: %s", i, sieve_errname(rc));
        for (int j = 0; j < 8; j++)
            cr_assert_eq(got[j], v[i][j], "point %d [%d]: %.9g != %.9g", i, j, got[j], v[i][j]);
        if (pts[i].payload) {
            cr_assert_not_null(pay);
            cr_assert_str_eq(pay, pts[i].payload);
        } else {
            cr_assert_null(pay, "point %d has payload %s", i, pay);
        }
        free(pay);
    }
    sieve_point_id other = tu_uuid(9), num = tu_num(5);
    cr_assert_eq(sieve_store_get(g_st, "p", &other, NULL, NULL), SIEVE_ENOTFOUND);
    cr_assert_eq(sieve_store_get(g_st, "p", &num, NULL, NULL), SIEVE_ENOTFOUND);
    sieve_point_id bad = {.kind = (sieve_id_kind)5};
    cr_assert_eq(sieve_store_get(g_st, "p", &bad, NULL, NULL), SIEVE_EINVAL);
}

Test(points, every_dtype_and_metric_round_trips) {
    const sieve_dtype dts[3] = {SIEVE_DTYPE_F32, SIEVE_DTYPE_F16, SIEVE_DTYPE_BF16};
    const sieve_metric ms[3] = {SIEVE_METRIC_DOT, SIEVE_METRIC_COSINE, SIEVE_METRIC_EUCLID};
    const double rel[3] = {0.0, 1.0 / 2048, 1.0 / 256}; /* half an ulp of each dtype */
    const uint32_t dim = 37;
    for (int d = 0; d < 3; d++) {
        for (int m = 0; m < 3; m++) {
            char name[32];
            snprintf(name, sizeof name, "c_%d_%d", d, m);
            create(name, dim, ms[m], dts[d], 128);
            upsert_range(name, dim, 0, 200, 5000, 0);
            sieve_collection_config cfg = info_of(name).config;
            for (uint64_t id = 0; id < 200; id += 7) {
                float src[37], got[37], want[37], unit[37];
                tu_vec(src, dim, id + 5000);
                memcpy(unit, src, sizeof unit);
                if (ms[m] == SIEVE_METRIC_COSINE) {
                    double s = 0;
                    for (uint32_t i = 0; i < dim; i++) s += (double)src[i] * src[i];
                    for (uint32_t i = 0; i < dim; i++) unit[i] = (float)(src[i] / sqrt(s));
                }
                sieve_point_id pid = tu_num(id);
                cr_assert_eq(sieve_store_get(g_st, name, &pid, got, NULL), 0);
                expected_row(&cfg, src, want);
                double sq = 0;
                for (uint32_t i = 0; i < dim; i++) {
                    cr_assert_eq(got[i], want[i], "%s id %llu [%u]: %.9g != %.9g", name,
                                 (unsigned long long)id, i, got[i], want[i]);
                    double tol = rel[d] * fabs(unit[i]) + (ms[m] == SIEVE_METRIC_COSINE ? 1e-7 : 0);
                    cr_assert_leq(fabs(got[i] - unit[i]), tol, "%s id %llu [%u]: %.9g vs %.9g",
                                  name, (unsigned long long)id, i, got[i], unit[i]);
                    sq += (double)got[i] * got[i];
                }
                if (ms[m] == SIEVE_METRIC_COSINE)
                    cr_assert_leq(fabs(sqrt(sq) - 1.0), 2 * rel[d] + 1e-6, "%s: |x| = %.9g", name,
                                  sqrt(sq));
            }
        }
    }
}

Test(points, overwrite_replaces_vector_and_payload_in_place) {
    create("o", 4, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 0);
    float v1[4] = {1, 2, 3, 4}, v2[4] = {-4, -3, -2, -1};
    sieve_point p = {.id = tu_num(5), .vector = v1, .payload = "{\"v\":1}", .payload_len = 7};
    cr_assert_eq(sieve_store_upsert(g_st, "o", &p, 1), 0);
    upsert_range("o", 4, 10, 3, 0, 0);
    sieve_point q = {.id = tu_num(5), .vector = v2};
    cr_assert_eq(sieve_store_upsert(g_st, "o", &q, 1), 0);
    sieve_collection_info in = info_of("o");
    cr_assert_eq(in.points, 4);
    cr_assert_eq(in.rows, 4, "overwrite must not take a new row (rows %llu)",
                 (unsigned long long)in.rows);
    float got[4];
    char *pay = (char *)1;
    cr_assert_eq(sieve_store_get(g_st, "o", &p.id, got, &pay), 0);
    cr_assert_null(pay, "payload not cleared: %s", pay);
    for (int i = 0; i < 4; i++) cr_assert_eq(got[i], v2[i]);
    sieve_point r = {.id = tu_num(5), .vector = v1, .payload = "{\"v\":3}", .payload_len = 7};
    cr_assert_eq(sieve_store_upsert(g_st, "o", &r, 1), 0);
    cr_assert_eq(sieve_store_get(g_st, "o", &p.id, got, &pay), 0);
    cr_assert_str_eq(pay, "{\"v\":3}");
    free(pay);
    sieve_snapshot *s;
    cr_assert_eq(sieve_snapshot_open(g_st, "o", &s), 0);
    uint64_t row;
    cr_assert_eq(sieve_snapshot_id_row(s, &p.id, &row), 0);
    cr_assert_eq(row, 0, "id 5 moved to row %llu", (unsigned long long)row);
    sieve_snapshot_close(s);
}

Test(points, repeated_id_in_one_call_keeps_the_last) {
    create("r", 2, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 0);
    float a[2] = {1, 1}, b[2] = {2, 2}, c[2] = {3, 3};
    sieve_point pts[4] = {
        {.id = tu_num(9), .vector = a, .payload = "{\"n\":1}", .payload_len = 7},
        {.id = tu_num(1), .vector = b},
        {.id = tu_num(9), .vector = c},
        {.id = tu_num(1), .vector = a, .payload = "{\"n\":4}", .payload_len = 7},
    };
    cr_assert_eq(sieve_store_upsert(g_st, "r", pts, 4), 0);
    cr_assert_eq(count_of("r"), 2);
    cr_assert_eq(info_of("r").rows, 2);
    float got[2];
    char *pay;
    cr_assert_eq(sieve_store_get(g_st, "r", &pts[0].id, got, &pay), 0);
    cr_assert_eq(got[0], 3);
    cr_assert_null(pay);
    cr_assert_eq(sieve_store_get(g_st, "r", &pts[1].id, got, &pay), 0);
    cr_assert_eq(got[0], 1);
    cr_assert_str_eq(pay, "{\"n\":4}");
    free(pay);
}

Test(points, delete_count_and_lowest_free_row_reuse) {
    create("d", 4, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 0);
    upsert_range("d", 4, 0, 10, 0, 1);
    sieve_point_id del[4] = {tu_num(5), tu_num(2), tu_num(99), tu_num(5)};
    uint64_t nd = 77;
    cr_assert_eq(sieve_store_delete(g_st, "d", del, 4, &nd), 0);
    cr_assert_eq(nd, 2, "deleted %llu", (unsigned long long)nd);
    cr_assert_eq(count_of("d"), 8);
    char *pay = (char *)1;
    cr_assert_eq(sieve_store_get(g_st, "d", &del[0], NULL, &pay), SIEVE_ENOTFOUND);
    cr_assert_null(pay);
    cr_assert_eq(sieve_store_delete(g_st, "d", del, 0, &nd), 0);
    cr_assert_eq(nd, 0);
    cr_assert_eq(sieve_store_delete(g_st, "d", del, 1, &nd), 0);
    cr_assert_eq(nd, 0);

    upsert_range("d", 4, 100, 3, 0, 0); /* ids 100, 101, 102 */
    sieve_collection_info in = info_of("d");
    cr_assert_eq(in.points, 11);
    cr_assert_eq(in.rows, 11, "rows %llu", (unsigned long long)in.rows);
    sieve_snapshot *s;
    cr_assert_eq(sieve_snapshot_open(g_st, "d", &s), 0);
    uint64_t want[3] = {2, 5, 10};
    for (int i = 0; i < 3; i++) {
        sieve_point_id id = tu_num(100 + (uint64_t)i);
        uint64_t row = 0;
        cr_assert_eq(sieve_snapshot_id_row(s, &id, &row), 0);
        cr_assert_eq(row, want[i], "id %d got row %llu want %llu", 100 + i,
                     (unsigned long long)row, (unsigned long long)want[i]);
        const char *json;
        size_t len;
        cr_assert_eq(sieve_snapshot_row_payload(s, row, &json, &len), 0);
        cr_assert_null(json, "reused row %llu kept a payload", (unsigned long long)row);
    }
    sieve_snapshot_close(s);
    /* the old point 5 stays gone: its id is not resurrected by the reuse of its row */
    cr_assert_eq(sieve_store_get(g_st, "d", &del[0], NULL, NULL), SIEVE_ENOTFOUND);
}

/* Every rejected call leaves the collection exactly as it was. */
Test(points, rejected_batches_write_nothing) {
    create("x", 8, SIEVE_METRIC_DOT, SIEVE_DTYPE_F16, 0);
    float orig[8];
    tu_vec(orig, 8, 1);
    sieve_point base = {.id = tu_num(1), .vector = orig, .payload = "{\"k\":0}", .payload_len = 7};
    cr_assert_eq(sieve_store_upsert(g_st, "x", &base, 1), 0);
    sieve_collection_info before = info_of("x");

    float good[8], nan_v[8], inf_v[8], big[8];
    tu_vec(good, 8, 2);
    memcpy(nan_v, good, sizeof good);
    nan_v[3] = NAN;
    memcpy(inf_v, good, sizeof good);
    inf_v[7] = -INFINITY;
    memcpy(big, good, sizeof good);
    big[0] = 1e6f; /* finite in float32, infinite in float16 */
    size_t huge_len = (16u << 20) + 1;
    char *huge = malloc(huge_len);
    cr_assert_not_null(huge);
    memset(huge, ' ', huge_len);
    huge[0] = '{';
    huge[huge_len - 1] = '}';

    struct { float *bad; uint32_t dim; const char *pay; size_t len; int kind; int rc; } cases[] = {
        {nan_v, 8, NULL, 0, 0, SIEVE_ENONFINITE},
        {inf_v, 8, NULL, 0, 0, SIEVE_ENONFINITE},
        {good, 7, NULL, 0, 0, SIEVE_EDIM},
        {good, 9, NULL, 0, 0, SIEVE_EDIM},
        {big, 8, NULL, 0, 0, SIEVE_ERANGE},
        {good, 8, "{\"a\":", 5, 0, SIEVE_EPARSE},
        {good, 8, "[1,2]", 5, 0, SIEVE_EINVAL},
        {good, 8, "42", 2, 0, SIEVE_EPARSE},
        {good, 8, "{} {}", 5, 0, SIEVE_EPARSE},
        {good, 8, huge, huge_len, 0, SIEVE_ETOOBIG},
        {good, 8, NULL, 3, 0, SIEVE_EINVAL},
        {NULL, 8, NULL, 0, 0, SIEVE_EINVAL},
        {good, 8, NULL, 0, 7, SIEVE_EINVAL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        /* a valid new point, an overwrite of point 1, then the bad one */
        float fresh[8];
        tu_vec(fresh, 8, 3);
        sieve_point pts[3] = {
            {.id = tu_num(2), .vector = fresh, .payload = "{\"k\":2}", .payload_len = 7},
            {.id = tu_num(1), .vector = good, .payload = "{\"k\":1}", .payload_len = 7},
            {.id = tu_num(3), .vector = cases[c].bad, .dim = cases[c].dim,
             .payload = cases[c].pay, .payload_len = cases[c].len},
        };
        if (cases[c].kind) pts[2].id.kind = (sieve_id_kind)cases[c].kind;
        int rc = sieve_store_upsert(g_st, "x", pts, 3);
        cr_assert_eq(rc, cases[c].rc, "case %zu: got %s want %s", c, sieve_errname(rc),
                     sieve_errname(cases[c].rc));
        sieve_collection_info after = info_of("x");
        cr_assert_eq(after.points, before.points, "case %zu", c);
        cr_assert_eq(after.rows, before.rows, "case %zu", c);
        cr_assert_eq(after.generation, before.generation, "case %zu", c);
        sieve_point_id two = tu_num(2);
        cr_assert_eq(sieve_store_get(g_st, "x", &two, NULL, NULL), SIEVE_ENOTFOUND, "case %zu", c);
        float got[8], want[8];
        char *pay;
        cr_assert_eq(sieve_store_get(g_st, "x", &base.id, got, &pay), 0);
        cr_assert_str_eq(pay, "{\"k\":0}", "case %zu", c);
        free(pay);
        expected_row(&before.config, orig, want);
        for (int i = 0; i < 8; i++) cr_assert_eq(got[i], want[i], "case %zu [%d]", c, i);
    }
    free(huge);
    cr_assert_eq(sieve_store_upsert(g_st, "x", NULL, 0), 0);
    cr_assert_eq(sieve_store_upsert(g_st, "x", NULL, 1), SIEVE_EINVAL);
    cr_assert_eq(sieve_store_upsert(g_st, "bad name", &base, 1), SIEVE_EINVAL);
    sieve_point_id bad_id = {.kind = (sieve_id_kind)3};
    cr_assert_eq(sieve_store_delete(g_st, "x", &bad_id, 1, NULL), SIEVE_EINVAL);
    cr_assert_eq(info_of("x").generation, before.generation);
}

/* ================================================================ snapshots */

TestSuite(snapshots, .init = setup, .fini = teardown);

Test(snapshots, matrix_pages_and_norms_equal_the_stored_vectors) {
    const sieve_dtype dts[3] = {SIEVE_DTYPE_F32, SIEVE_DTYPE_F16, SIEVE_DTYPE_BF16};
    for (int d = 0; d < 3; d++) {
        char name[16];
        snprintf(name, sizeof name, "m%d", d);
        create(name, 16, SIEVE_METRIC_EUCLID, dts[d], 128);
        upsert_range(name, 16, 0, 300, 0, 0);
        sieve_snapshot *s;
        cr_assert_eq(sieve_snapshot_open(g_st, name, &s), 0);
        const sieve_matrix *m = sieve_snapshot_matrix(s);
        const sieve_collection_info *in = sieve_snapshot_info(s);
        cr_assert_eq(m->n_rows, 300);
        cr_assert_eq(in->pages, 3);
        cr_assert_eq(m->rows_per_page, 128);
        cr_assert_eq(m->dtype, dts[d]);
        cr_assert_eq(m->dim, 16);
        cr_assert_null(m->allowed);
        size_t es = sieve_dtype_size(dts[d]);
        for (uint64_t r = 0; r < 384; r++) {
            const uint8_t *page = m->pages[r / 128];
            cr_assert_eq((uintptr_t)page % 16, 0, "page %llu misaligned", (unsigned long long)(r / 128));
            const uint8_t *row = page + (r % 128) * 16 * es;
            float norm = m->norm_pages[r / 128][r % 128];
            uint8_t want[64] = {0};
            if (r < 300) {
                float src[16];
                tu_vec(src, 16, r);
                sieve_convert_from_f32(dts[d], src, want, 16);
                float wn = sieve_row_sqnorm(dts[d], want, 16);
                cr_assert_eq(norm, wn, "%s row %llu norm %.9g != %.9g", name, (unsigned long long)r, norm, wn);
            } else {
                cr_assert_eq(norm, 0.0f, "unused row %llu norm %.9g", (unsigned long long)r, norm);
            }
            cr_assert_eq(memcmp(row, want, 16 * es), 0, "%s row %llu bytes differ", name,
                         (unsigned long long)r);
        }
        for (uint64_t w = 0; w < (300 + 63) / 64; w++) cr_assert_eq(m->deleted[w], 0);
        float v[16], src[16];
        cr_assert_eq(sieve_snapshot_row_vector(s, 299, v), 0);
        tu_vec(src, 16, 299);
        uint8_t tmp[64];
        sieve_convert_from_f32(dts[d], src, tmp, 16);
        sieve_convert_to_f32(dts[d], tmp, src, 16);
        for (int i = 0; i < 16; i++) cr_assert_eq(v[i], src[i]);
        cr_assert_eq(sieve_snapshot_row_vector(s, 300, v), SIEVE_ERANGE);
        sieve_snapshot_close(s);
    }
}

Test(snapshots, deleted_bitmap_and_isolation) {
    create("b", 4, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 128);
    upsert_range("b", 4, 0, 200, 0, 1);
    sieve_snapshot *old;
    cr_assert_eq(sieve_snapshot_open(g_st, "b", &old), 0);
    uint64_t dead[5] = {0, 63, 64, 130, 199};
    sieve_point_id ids[5];
    for (int i = 0; i < 5; i++) ids[i] = tu_num(dead[i]);
    cr_assert_eq(sieve_store_delete(g_st, "b", ids, 5, NULL), 0);
    sieve_snapshot *s;
    cr_assert_eq(sieve_snapshot_open(g_st, "b", &s), 0);
    const sieve_matrix *m = sieve_snapshot_matrix(s);
    cr_assert_eq(sieve_snapshot_info(s)->points, 195);
    for (uint64_t r = 0; r < 200; r++) {
        int want = 0;
        for (int i = 0; i < 5; i++) want |= dead[i] == r;
        int got = (int)((m->deleted[r / 64] >> (r % 64)) & 1);
        cr_assert_eq(got, want, "row %llu bit %d want %d", (unsigned long long)r, got, want);
        sieve_point_id id;
        int rc = sieve_snapshot_row_id(s, r, &id);
        if (want) {
            cr_assert_eq(rc, SIEVE_ENOTFOUND, "row %llu: %s", (unsigned long long)r, sieve_errname(rc));
        } else {
            cr_assert_eq(rc, 0);
            cr_assert_eq(id.kind, SIEVE_ID_NUM);
            cr_assert_eq(id.num, r);
        }
    }
    cr_assert_eq(sieve_snapshot_row_id(s, 200, &ids[0]), SIEVE_ERANGE);
    /* the snapshot taken before the delete still sees the old state */
    const sieve_matrix *om = sieve_snapshot_matrix(old);
    cr_assert_eq(sieve_snapshot_info(old)->points, 200);
    cr_assert_eq(om->deleted[0] | om->deleted[1] | om->deleted[2] | om->deleted[3], 0);
    sieve_point_id id;
    cr_assert_eq(sieve_snapshot_row_id(old, 63, &id), 0);
    cr_assert_eq(id.num, 63);
    const char *json;
    size_t len;
    cr_assert_eq(sieve_snapshot_row_payload(old, 63, &json, &len), 0);
    cr_assert_eq(len, strlen("{\"id\":63}"));
    cr_assert_eq(memcmp(json, "{\"id\":63}", len), 0);
    cr_assert_eq(sieve_snapshot_row_payload(s, 63, &json, &len), 0);
    cr_assert_null(json);
    sieve_snapshot_close(old);
    sieve_snapshot_close(s);
}

/* Every row's answer through the id cache c equals sieve_snapshot_row_id's (id or error),
 * for rows 0 .. upto - 1 (past the end too); the prefetch hint runs a few rows ahead (past
 * the end as well), as the batcher calls it, and must change nothing. */
static void ids_agree(sieve_snapshot *s, sieve_idcache *c, uint64_t upto) {
    for (uint64_t r = 0; r < upto; r++) {
        sieve_point_id a, b;
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        sieve_snapshot_row_id_prefetch(s, c, r + 8);
        int ra = sieve_snapshot_row_id(s, r, &a);
        int rb = sieve_snapshot_row_id_cached(s, c, r, &b);
        cr_assert_eq(rb, ra, "row %llu: cached %s, database %s", (unsigned long long)r,
                     sieve_errname(rb), sieve_errname(ra));
        if (ra) continue;
        cr_assert_eq(b.kind, a.kind, "row %llu", (unsigned long long)r);
        if (a.kind == SIEVE_ID_NUM)
            cr_assert_eq(b.num, a.num, "row %llu: %llu vs %llu", (unsigned long long)r,
                         (unsigned long long)b.num, (unsigned long long)a.num);
        else
            cr_assert_eq(memcmp(b.uuid, a.uuid, 16), 0, "row %llu", (unsigned long long)r);
    }
}

static uint64_t cached_num(sieve_snapshot *s, sieve_idcache *c, uint64_t row) {
    sieve_point_id id;
    int rc = sieve_snapshot_row_id_cached(s, c, row, &id);
    cr_assert_eq(rc, 0, "row %llu: %s", (unsigned long long)row, sieve_errname(rc));
    cr_assert_eq(id.kind, SIEVE_ID_NUM);
    return id.num;
}

Test(snapshots, id_cache_agrees_with_the_database) {
    /* 128-row pages (the smallest): 300 numeric ids, then 40 UUIDs (rows 300-339: the
       third page partial) */
    create("c", 4, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 128);
    upsert_range("c", 4, 0, 300, 0, 0);
    float vecs[40 * 4];
    sieve_point pts[40];
    memset(pts, 0, sizeof pts);
    for (int i = 0; i < 40; i++) {
        tu_vec(vecs + i * 4, 4, 900 + i);
        pts[i].id = tu_uuid(700 + i);
        pts[i].vector = vecs + i * 4;
        pts[i].dim = 4;
    }
    cr_assert_eq(sieve_store_upsert(g_st, "c", pts, 40), 0);
    sieve_idcache *c, *tiny;
    cr_assert_eq(sieve_idcache_new(1 << 20, &c), 0);
    cr_assert_eq(sieve_idcache_new(2 * 128 * 18, &tiny), 0); /* two pages' worth */
    sieve_snapshot *s1;
    cr_assert_eq(sieve_snapshot_open(g_st, "c", &s1), 0);
    ids_agree(s1, c, 345);
    ids_agree(s1, c, 345); /* now from the cache */
    ids_agree(s1, tiny, 345);
    cr_assert_eq(cached_num(s1, c, 5), 5);
    cr_assert_eq(cached_num(s1, c, 299), 299);
    sieve_point_id u;
    cr_assert_eq(sieve_snapshot_row_id_cached(s1, c, 339, &u), 0);
    cr_assert_eq(u.kind, SIEVE_ID_UUID);
    cr_assert_eq(memcmp(u.uuid, tu_uuid(739).uuid, 16), 0);
    cr_assert_eq(sieve_snapshot_row_id_cached(s1, c, 340, &u), SIEVE_ERANGE);

    /* deletes, then new points that take the freed rows (lowest first) */
    sieve_point_id dead[4] = {tu_num(3), tu_num(17), tu_num(18), tu_num(250)};
    cr_assert_eq(sieve_store_delete(g_st, "c", dead, 4, NULL), 0);
    sieve_snapshot *s2;
    cr_assert_eq(sieve_snapshot_open(g_st, "c", &s2), 0);
    ids_agree(s2, c, 345);
    cr_assert_eq(sieve_snapshot_row_id_cached(s2, c, 17, &u), SIEVE_ENOTFOUND);
    upsert_range("c", 4, 1000, 3, 0, 0);
    sieve_snapshot *s3;
    cr_assert_eq(sieve_snapshot_open(g_st, "c", &s3), 0);
    ids_agree(s3, c, 345);
    ids_agree(s3, tiny, 345);
    cr_assert_eq(cached_num(s3, c, 3), 1000);
    cr_assert_eq(cached_num(s3, c, 17), 1001);
    cr_assert_eq(cached_num(s3, c, 18), 1002);
    cr_assert_eq(sieve_snapshot_row_id_cached(s3, c, 250, &u), SIEVE_ENOTFOUND);
    /* the older snapshots still see their own ids, with pages cached at a newer generation */
    ids_agree(s1, c, 345);
    ids_agree(s2, c, 345);
    cr_assert_eq(cached_num(s1, c, 3), 3);
    cr_assert_eq(cached_num(s1, c, 17), 17);
    cr_assert_eq(cached_num(s3, c, 3), 1000);
    sieve_snapshot_close(s1);
    sieve_snapshot_close(s2);
    sieve_snapshot_close(s3);

    /* other collections through the same cache, in turns with this one (more of them than
       the cache keeps, so entries are evicted and read again) */
    const char *others[] = {"d", "e", "f", "g", "h"};
    for (int i = 0; i < 5; i++) {
        create(others[i], 4, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 128);
        upsert_range(others[i], 4, 9000 + 1000 * (uint64_t)i, 150, 0, 0);
    }
    sieve_snapshot *sc;
    cr_assert_eq(sieve_snapshot_open(g_st, "c", &sc), 0);
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < 5; i++) {
            sieve_snapshot *so;
            cr_assert_eq(sieve_snapshot_open(g_st, others[i], &so), 0);
            ids_agree(so, c, 160);
            cr_assert_eq(cached_num(so, c, 149), 9000 + 1000 * (uint64_t)i + 149);
            sieve_snapshot_close(so);
            ids_agree(sc, c, 345);
            cr_assert_eq(cached_num(sc, c, 17), 1001);
        }
    sieve_snapshot_close(sc);

    /* a collection of the same name created again: other ids on the same rows */
    cr_assert_eq(sieve_store_drop_collection(g_st, "c"), 0);
    create("c", 4, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 128);
    upsert_range("c", 4, 5000, 50, 0, 0);
    sieve_snapshot *s4;
    cr_assert_eq(sieve_snapshot_open(g_st, "c", &s4), 0);
    ids_agree(s4, c, 60);
    cr_assert_eq(cached_num(s4, c, 0), 5000);
    cr_assert_eq(cached_num(s4, c, 49), 5049);
    sieve_snapshot_close(s4);
    sieve_idcache_free(c);
    sieve_idcache_free(tiny);
    cr_assert_eq(sieve_snapshot_row_id_cached(NULL, NULL, 0, &u), SIEVE_EINVAL);
}

Test(snapshots, generations_change_only_for_touched_pages) {
    create("g", 4, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 128);
    upsert_range("g", 4, 0, 300, 0, 0); /* pages 0, 1, 2 (page 2 partly used) */
    uint64_t g0[3], g1[3];
    sieve_snapshot *s;
    cr_assert_eq(sieve_snapshot_open(g_st, "g", &s), 0);
    memcpy(g0, sieve_snapshot_page_generations(s), sizeof g0);
    uint64_t c0 = sieve_snapshot_info(s)->generation;
    sieve_snapshot_close(s);

    upsert_range("g", 4, 200, 1, 77, 0); /* overwrite row 200 (page 1) */
    cr_assert_eq(sieve_snapshot_open(g_st, "g", &s), 0);
    memcpy(g1, sieve_snapshot_page_generations(s), sizeof g1);
    uint64_t c1 = sieve_snapshot_info(s)->generation;
    sieve_snapshot_close(s);
    cr_assert_gt(c1, c0);
    cr_assert_eq(g1[0], g0[0]);
    cr_assert_neq(g1[1], g0[1], "page 1 generation did not change");
    cr_assert_eq(g1[2], g0[2]);

    sieve_point_id id = tu_num(5);
    cr_assert_eq(sieve_store_delete(g_st, "g", &id, 1, NULL), 0); /* bitmap only */
    uint64_t g2[3];
    cr_assert_eq(sieve_snapshot_open(g_st, "g", &s), 0);
    memcpy(g2, sieve_snapshot_page_generations(s), sizeof g2);
    uint64_t c2 = sieve_snapshot_info(s)->generation;
    sieve_snapshot_close(s);
    cr_assert_gt(c2, c1);
    for (int p = 0; p < 3; p++) cr_assert_eq(g2[p], g1[p], "page %d after delete", p);

    upsert_range("g", 4, 1000, 2, 0, 0); /* reuses row 5 (page 0), appends row 300 (page 2) */
    uint64_t g3[3];
    cr_assert_eq(sieve_snapshot_open(g_st, "g", &s), 0);
    memcpy(g3, sieve_snapshot_page_generations(s), sizeof g3);
    cr_assert_eq(sieve_snapshot_info(s)->rows, 301);
    sieve_snapshot_close(s);
    cr_assert_neq(g3[0], g2[0]);
    cr_assert_eq(g3[1], g2[1]);
    cr_assert_neq(g3[2], g2[2]);
}

typedef struct visit { uint64_t rows[64]; char pay[64][32]; size_t n; uint64_t stop_at; } visit;

static int visitor(void *ctx, uint64_t row, const sieve_point_id *id, const char *payload,
                   size_t len) {
    visit *v = ctx;
    cr_assert_eq(id->num, row + 1000);
    v->rows[v->n] = row;
    snprintf(v->pay[v->n], sizeof v->pay[0], "%.*s", (int)len, payload ? payload : "");
    v->n++;
    return row == v->stop_at ? 42 : 0;
}

Test(snapshots, foreach_visits_live_rows_with_payloads) {
    create("f", 2, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 0);
    upsert_range("f", 2, 1000, 10, 0, 0);
    /* payloads on some rows only */
    float v[2] = {1, 2};
    sieve_point p[2] = {{.id = tu_num(1003), .vector = v, .payload = "{\"p\":3}", .payload_len = 7},
                        {.id = tu_num(1008), .vector = v, .payload = "{\"p\":8}", .payload_len = 7}};
    cr_assert_eq(sieve_store_upsert(g_st, "f", p, 2), 0);
    sieve_point_id d[2] = {tu_num(1000), tu_num(1004)};
    cr_assert_eq(sieve_store_delete(g_st, "f", d, 2, NULL), 0);
    sieve_snapshot *s;
    cr_assert_eq(sieve_snapshot_open(g_st, "f", &s), 0);
    visit vis = {.stop_at = UINT64_MAX};
    cr_assert_eq(sieve_snapshot_foreach(s, visitor, &vis), 0);
    uint64_t want[8] = {1, 2, 3, 5, 6, 7, 8, 9};
    cr_assert_eq(vis.n, 8, "visited %zu", vis.n);
    for (int i = 0; i < 8; i++) {
        cr_assert_eq(vis.rows[i], want[i]);
        const char *wp = want[i] == 3 ? "{\"p\":3}" : want[i] == 8 ? "{\"p\":8}" : "";
        cr_assert_str_eq(vis.pay[i], wp, "row %llu", (unsigned long long)want[i]);
    }
    visit stop = {.stop_at = 5};
    cr_assert_eq(sieve_snapshot_foreach(s, visitor, &stop), 42);
    cr_assert_eq(stop.n, 4);
    sieve_point_id id = tu_num(1004);
    uint64_t row;
    cr_assert_eq(sieve_snapshot_id_row(s, &id, &row), SIEVE_ENOTFOUND);
    id = tu_num(1007);
    cr_assert_eq(sieve_snapshot_id_row(s, &id, &row), 0);
    cr_assert_eq(row, 7);
    sieve_snapshot_close(s);
}

/* A delete that finds nothing commits an LMDB transaction that changes nothing (and gets no
 * new id); snapshots opened after it must not wait for a publish that never comes. */
Test(snapshots, open_after_a_write_that_changed_nothing, .timeout = 20) {
    create("n", 2, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 0);
    upsert_range("n", 2, 0, 3, 0, 0);
    uint64_t gen = info_of("n").generation;
    sieve_point_id absent[2] = {tu_num(50), tu_uuid(50)};
    uint64_t nd = 9;
    cr_assert_eq(sieve_store_delete(g_st, "n", absent, 2, &nd), 0);
    cr_assert_eq(nd, 0);
    cr_assert_eq(info_of("n").generation, gen, "a no-op delete changed the generation");
    for (int i = 0; i < 3; i++) {
        sieve_snapshot *s;
        cr_assert_eq(sieve_snapshot_open(g_st, "n", &s), 0);
        cr_assert_eq(sieve_snapshot_info(s)->points, 3);
        sieve_snapshot_close(s);
        cr_assert_eq(sieve_store_delete(g_st, "n", absent, 1, NULL), 0);
    }
}

Test(snapshots, empty_collection) {
    create("e", 3, SIEVE_METRIC_DOT, SIEVE_DTYPE_F16, 0);
    sieve_snapshot *s;
    cr_assert_eq(sieve_snapshot_open(g_st, "e", &s), 0);
    const sieve_matrix *m = sieve_snapshot_matrix(s);
    cr_assert_eq(m->n_rows, 0);
    cr_assert_eq(sieve_snapshot_info(s)->pages, 0);
    visit vis = {.stop_at = UINT64_MAX};
    cr_assert_eq(sieve_snapshot_foreach(s, visitor, &vis), 0);
    cr_assert_eq(vis.n, 0);
    sieve_snapshot_close(s);
    sieve_snapshot_close(NULL);
}

Test(snapshots, is_current_until_the_collection_changes) {
    create("cur", 4, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 0);
    create("other", 4, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 0);
    upsert_range("cur", 4, 0, 10, 0, 0);
    sieve_snapshot *s;
    cr_assert_eq(sieve_snapshot_open(g_st, "cur", &s), 0);
    cr_assert_eq(sieve_snapshot_is_current(s), 1);
    upsert_range("other", 4, 0, 10, 0, 0); /* another collection: still current */
    cr_assert_eq(sieve_snapshot_is_current(s), 1);
    sieve_point_id absent = tu_num(999);
    cr_assert_eq(sieve_store_delete(g_st, "cur", &absent, 1, NULL), 0); /* changes nothing */
    cr_assert_eq(sieve_snapshot_is_current(s), 1, "a no-op delete made the snapshot stale");
    upsert_range("cur", 4, 10, 1, 0, 0);
    cr_assert_eq(sieve_snapshot_is_current(s), 0, "a committed upsert left the snapshot current");
    sieve_snapshot_close(s);
    cr_assert_eq(sieve_snapshot_open(g_st, "cur", &s), 0);
    cr_assert_eq(sieve_snapshot_is_current(s), 1);
    cr_assert_eq(sieve_store_drop_collection(g_st, "cur"), 0);
    cr_assert_eq(sieve_snapshot_is_current(s), 0, "dropped");
    create("cur", 4, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 0);
    cr_assert_eq(sieve_snapshot_is_current(s), 0, "re-created under the same name");
    sieve_snapshot_close(s);
    cr_assert_eq(sieve_snapshot_is_current(NULL), 0);
}

/* ================================================================ persistence and lock */

TestSuite(persistence, .init = setup, .fini = teardown);

Test(persistence, reopen_keeps_everything) {
    create("one", 8, SIEVE_METRIC_COSINE, SIEVE_DTYPE_BF16, 128);
    create("two", 3, SIEVE_METRIC_EUCLID, SIEVE_DTYPE_F32, 0);
    upsert_range("one", 8, 0, 500, 0, 1);
    upsert_range("two", 3, 0, 20, 9, 0);
    sieve_point_id del[3] = {tu_num(7), tu_num(300), tu_num(3)};
    cr_assert_eq(sieve_store_delete(g_st, "one", del, 3, NULL), 0);
    float v[8] = {1, 0, 0, 0, 0, 0, 0, 0};
    sieve_point p = {.id = tu_uuid(1), .vector = v, .payload = "{\"u\":true}", .payload_len = 10};
    cr_assert_eq(sieve_store_upsert(g_st, "one", &p, 1), 0); /* takes row 3 */
    sieve_collection_info one = info_of("one"), two = info_of("two");
    sieve_store_close(g_st);
    g_st = NULL;
    open_store();

    char **names;
    size_t n;
    cr_assert_eq(sieve_store_list_collections(g_st, &names, &n), 0);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(names[0], "one");
    cr_assert_str_eq(names[1], "two");
    sieve_store_free_names(names, n);
    sieve_collection_info a = info_of("one"), b = info_of("two");
    cr_assert_eq(a.points, one.points);
    cr_assert_eq(a.points, 498);
    cr_assert_eq(a.rows, one.rows);
    cr_assert_eq(a.pages, one.pages);
    cr_assert_eq(a.collection_id, one.collection_id);
    cr_assert_eq(memcmp(&a.config, &one.config, sizeof a.config), 0);
    cr_assert_eq(b.points, two.points);
    cr_assert_eq(b.config.rows_per_page, two.config.rows_per_page);

    for (uint64_t id = 0; id < 500; id++) {
        sieve_point_id pid = tu_num(id);
        float got[8], src[8], want[8];
        char *pay;
        int rc = sieve_store_get(g_st, "one", &pid, got, &pay);
        if (id == 7 || id == 300 || id == 3) {
            cr_assert_eq(rc, SIEVE_ENOTFOUND, "id %llu", (unsigned long long)id);
            continue;
        }
        cr_assert_eq(rc, 0, "id %llu: %s", (unsigned long long)id, sieve_errname(rc));
        tu_vec(src, 8, id);
        expected_row(&a.config, src, want);
        for (int i = 0; i < 8; i++) cr_assert_eq(got[i], want[i]);
        char wp[32];
        snprintf(wp, sizeof wp, "{\"id\":%llu}", (unsigned long long)id);
        cr_assert_str_eq(pay, wp);
        free(pay);
    }
    char *pay;
    cr_assert_eq(sieve_store_get(g_st, "one", &p.id, NULL, &pay), 0);
    cr_assert_str_eq(pay, "{\"u\":true}");
    free(pay);

    sieve_snapshot *s;
    cr_assert_eq(sieve_snapshot_open(g_st, "one", &s), 0);
    const sieve_matrix *m = sieve_snapshot_matrix(s);
    for (uint64_t r = 0; r < 500; r++) {
        int bit = (int)((m->deleted[r / 64] >> (r % 64)) & 1);
        cr_assert_eq(bit, r == 7 || r == 300, "row %llu", (unsigned long long)r);
    }
    uint64_t row;
    cr_assert_eq(sieve_snapshot_id_row(s, &p.id, &row), 0);
    cr_assert_eq(row, 3);
    sieve_snapshot_close(s);

    /* the free list survived too: the next insert takes row 7, then 300, then appends */
    upsert_range("one", 8, 9000, 3, 0, 0);
    cr_assert_eq(sieve_snapshot_open(g_st, "one", &s), 0);
    uint64_t want[3] = {7, 300, 500};
    for (int i = 0; i < 3; i++) {
        sieve_point_id id = tu_num(9000 + (uint64_t)i);
        cr_assert_eq(sieve_snapshot_id_row(s, &id, &row), 0);
        cr_assert_eq(row, want[i], "got %llu", (unsigned long long)row);
    }
    sieve_snapshot_close(s);
}

Test(persistence, second_open_is_ebusy) {
    sieve_store *other = (sieve_store *)1;
    int rc = sieve_store_open(g_dir, NULL, &other);
    cr_assert_eq(rc, SIEVE_EBUSY, "same process: %s", sieve_errname(rc));
    cr_assert_null(other);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        sieve_store *o2 = NULL;
        _exit(sieve_store_open(g_dir, NULL, &o2) == SIEVE_EBUSY ? 0 : 1);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child open was not EBUSY");
    sieve_store_close(g_st);
    g_st = NULL;
    open_store(); /* free again once closed */
    cr_assert_eq(sieve_store_open(NULL, NULL, &other), SIEVE_EINVAL);
}

Test(persistence, open_rejects_a_file_path) {
    char path[600];
    snprintf(path, sizeof path, "%s/sieve.lock", g_dir);
    sieve_store *o = NULL;
    cr_assert_eq(sieve_store_open(path, NULL, &o), SIEVE_EINVAL);
    cr_assert_null(o);
}

/* ================================================================ map growth */

typedef struct reader_ctx {
    sieve_store *st;
    volatile int stop;
    uint64_t snapshots;
    int err;
} reader_ctx;

/* Opens snapshots in a loop while the writer grows the map, checking that the view and the
 * pages agree (points = rows - deleted, every page pointer present). */
static void *reader_main(void *arg) {
    reader_ctx *c = arg;
    while (!c->stop) {
        sieve_snapshot *s;
        int rc = sieve_snapshot_open(c->st, "grow", &s);
        if (rc) { c->err = rc; break; }
        const sieve_matrix *m = sieve_snapshot_matrix(s);
        const sieve_collection_info *in = sieve_snapshot_info(s);
        if (in->points != m->n_rows) c->err = SIEVE_EINTERNAL;
        if (m->n_rows) {
            uint64_t r = m->n_rows - 1;
            float v[1024], want[1024];
            sieve_snapshot_row_vector(s, r, v);
            sieve_point_id id;
            if (sieve_snapshot_row_id(s, r, &id)) c->err = SIEVE_EINTERNAL;
            tu_vec(want, 1024, id.num);
            if (memcmp(v, want, sizeof v)) c->err = SIEVE_ECORRUPT;
        }
        sieve_snapshot_close(s);
        c->snapshots++;
        if (c->err) break;
    }
    return NULL;
}

TestSuite(growth, .fini = teardown);

Test(growth, map_grows_from_1mib_under_readers) {
    tu_mkdtemp(g_dir, sizeof g_dir);
    sieve_store_options o;
    sieve_store_options_init(&o);
    o.initial_map_bytes = 1u << 20;
    cr_assert_eq(sieve_store_open(g_dir, &o, &g_st), 0);
    sieve_store_stats s0;
    cr_assert_eq(sieve_store_get_stats(g_st, &s0), 0);
    cr_assert_eq(s0.map_bytes, 1u << 20, "initial map %llu", (unsigned long long)s0.map_bytes);
    create("grow", 1024, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 128);
    reader_ctx rc = {.st = g_st};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, reader_main, &rc), 0);
    const size_t total = 64000, batch = 2000; /* 64000 x 4 KiB = 250 MiB of vectors */
    for (size_t b = 0; b < total; b += batch) upsert_range("grow", 1024, b, batch, 0, 0);
    rc.stop = 1;
    pthread_join(th, NULL);
    cr_assert_eq(rc.err, 0, "reader saw %s", sieve_errname(rc.err));
    cr_assert_gt(rc.snapshots, 0);
    sieve_store_stats s1;
    cr_assert_eq(sieve_store_get_stats(g_st, &s1), 0);
    cr_assert_geq(s1.map_grows, 8, "grows %llu", (unsigned long long)s1.map_grows);
    cr_assert_geq(s1.map_bytes, 256ull << 20, "map %llu", (unsigned long long)s1.map_bytes);
    cr_assert_eq(s1.failed, 0);
    cr_assert_eq(count_of("grow"), total);
    for (uint64_t id = 0; id < total; id += 997) {
        float got[1024], want[1024];
        sieve_point_id pid = tu_num(id);
        cr_assert_eq(sieve_store_get(g_st, "grow", &pid, got, NULL), 0);
        tu_vec(want, 1024, id);
        cr_assert_eq(memcmp(got, want, sizeof got), 0, "id %llu", (unsigned long long)id);
    }
    sieve_store_close(g_st);
    g_st = NULL;
    cr_assert_eq(sieve_store_open(g_dir, &o, &g_st), 0); /* reopens with the grown map */
    cr_assert_eq(count_of("grow"), total);
}

/* A reader that keeps one snapshot for as long as sieve_snapshot_is_current says it may
 * (as the server's batcher does) must not block the writer's map growth: the growth makes
 * the snapshot non-current, the reader closes it and the writer proceeds. */
typedef struct keeper_ctx {
    sieve_store *st;
    volatile int stop;
    int err;
    unsigned long reopened;
} keeper_ctx;

static void *keeper_main(void *arg) {
    keeper_ctx *c = arg;
    while (!c->stop) {
        sieve_snapshot *s;
        int rc = sieve_snapshot_open(c->st, "keep", &s);
        if (rc) {
            c->err = rc;
            break;
        }
        while (!c->stop && sieve_snapshot_is_current(s)) {
            struct timespec ts = {0, 200 * 1000};
            nanosleep(&ts, NULL);
        }
        sieve_snapshot_close(s);
        c->reopened++;
    }
    return NULL;
}

Test(growth, a_kept_current_snapshot_yields_to_map_growth, .timeout = 120) {
    tu_mkdtemp(g_dir, sizeof g_dir);
    sieve_store_options o;
    sieve_store_options_init(&o);
    o.initial_map_bytes = 1u << 20;
    cr_assert_eq(sieve_store_open(g_dir, &o, &g_st), 0);
    create("keep", 8, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 128);
    upsert_range("keep", 8, 0, 100, 0, 0);
    create("big", 1024, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 128);
    keeper_ctx kc = {.st = g_st};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, keeper_main, &kc), 0);
    /* writes to another collection only: "keep" never changes, so only the map growth can
       make the kept snapshot stale */
    for (size_t b = 0; b < 16000; b += 2000) upsert_range("big", 1024, b, 2000, 0, 0);
    kc.stop = 1;
    pthread_join(th, NULL);
    cr_assert_eq(kc.err, 0, "keeper saw %s", sieve_errname(kc.err));
    sieve_store_stats st;
    cr_assert_eq(sieve_store_get_stats(g_st, &st), 0);
    cr_assert_geq(st.map_grows, 3, "grows %llu", (unsigned long long)st.map_grows);
    cr_assert_geq(kc.reopened, 2, "the kept snapshot was reopened %lu times", kc.reopened);
    cr_assert_eq(count_of("big"), 16000);
}

/* ================================================================ concurrency */

typedef struct writer_ctx {
    sieve_store *st;
    int thread;
    int rc;
} writer_ctx;

#define CW_THREADS 8
#define CW_BATCHES 40
#define CW_POINTS 25

static void *writer_thread(void *arg) {
    writer_ctx *c = arg;
    float vecs[CW_POINTS][16];
    sieve_point pts[CW_POINTS];
    char pay[CW_POINTS][32];
    for (int b = 0; b < CW_BATCHES && !c->rc; b++) {
        for (int i = 0; i < CW_POINTS; i++) {
            uint64_t id = ((uint64_t)c->thread * CW_BATCHES + (uint64_t)b) * CW_POINTS + (uint64_t)i;
            tu_vec(vecs[i], 16, id);
            snprintf(pay[i], sizeof pay[i], "{\"t\":%d}", c->thread);
            pts[i] = (sieve_point){.id = tu_num(id), .vector = vecs[i], .dim = 16,
                                   .payload = pay[i], .payload_len = strlen(pay[i])};
        }
        c->rc = sieve_store_upsert(c->st, "cc", pts, CW_POINTS);
    }
    return NULL;
}

static void *snap_thread(void *arg) {
    reader_ctx *c = arg;
    while (!c->stop) {
        sieve_snapshot *s;
        int rc = sieve_snapshot_open(c->st, "cc", &s);
        if (rc) { c->err = rc; break; }
        const sieve_matrix *m = sieve_snapshot_matrix(s);
        const sieve_collection_info *in = sieve_snapshot_info(s);
        /* whole batches only, and the view agrees with the transaction */
        if (in->points % CW_POINTS || in->points != m->n_rows) c->err = SIEVE_EINTERNAL;
        for (uint64_t r = 0; r < m->n_rows && !c->err; r += 37) {
            sieve_point_id id;
            if (sieve_snapshot_row_id(s, r, &id)) c->err = SIEVE_ECORRUPT;
        }
        sieve_snapshot_close(s);
        c->snapshots++;
        if (c->err) break;
    }
    return NULL;
}

TestSuite(concurrency, .init = setup, .fini = teardown);

Test(concurrency, eight_writers_group_commit) {
    create("cc", 16, SIEVE_METRIC_DOT, SIEVE_DTYPE_F16, 128);
    sieve_store_stats s0;
    sieve_store_get_stats(g_st, &s0);
    pthread_t th[CW_THREADS], rt;
    writer_ctx ctx[CW_THREADS];
    reader_ctx rd = {.st = g_st};
    cr_assert_eq(pthread_create(&rt, NULL, snap_thread, &rd), 0);
    for (int t = 0; t < CW_THREADS; t++) {
        ctx[t] = (writer_ctx){g_st, t, 0};
        cr_assert_eq(pthread_create(&th[t], NULL, writer_thread, &ctx[t]), 0);
    }
    for (int t = 0; t < CW_THREADS; t++) pthread_join(th[t], NULL);
    rd.stop = 1;
    pthread_join(rt, NULL);
    for (int t = 0; t < CW_THREADS; t++)
        cr_assert_eq(ctx[t].rc, 0, "thread %d: %s", t, sieve_errname(ctx[t].rc));
    cr_assert_eq(rd.err, 0, "reader: %s", sieve_errname(rd.err));
    const uint64_t total = (uint64_t)CW_THREADS * CW_BATCHES * CW_POINTS;
    cr_assert_eq(count_of("cc"), total);
    sieve_collection_config cfg = info_of("cc").config;
    for (uint64_t id = 0; id < total; id++) {
        float got[16], src[16], want[16];
        char *pay;
        sieve_point_id pid = tu_num(id);
        cr_assert_eq(sieve_store_get(g_st, "cc", &pid, got, &pay), 0, "id %llu", (unsigned long long)id);
        tu_vec(src, 16, id);
        expected_row(&cfg, src, want);
        cr_assert_eq(memcmp(got, want, sizeof got), 0, "id %llu", (unsigned long long)id);
        char wp[32];
        snprintf(wp, sizeof wp, "{\"t\":%d}", (int)(id / (CW_BATCHES * CW_POINTS)));
        cr_assert_str_eq(pay, wp);
        free(pay);
    }
    sieve_store_stats s1;
    sieve_store_get_stats(g_st, &s1);
    uint64_t reqs = s1.requests - s0.requests, commits = s1.commits - s0.commits;
    cr_assert_eq(reqs, CW_THREADS * CW_BATCHES);
    cr_assert_lt(commits, reqs, "no grouping: %llu commits for %llu requests",
                 (unsigned long long)commits, (unsigned long long)reqs);
    cr_assert_gt(s1.max_group, 1);
    cr_log_info("group commit: %llu requests in %llu commits (largest group %llu), %llu snapshots",
                (unsigned long long)reqs, (unsigned long long)commits,
                (unsigned long long)s1.max_group, (unsigned long long)rd.snapshots);
}

/* One failing request in a group fails alone: the others in the same transaction commit. */
typedef struct mixed_ctx { sieve_store *st; int bad; int rc; } mixed_ctx;

static void *mixed_thread(void *arg) {
    mixed_ctx *c = arg;
    for (int b = 0; b < 30; b++) {
        float v[4] = {1, 2, 3, 4};
        if (c->bad) {
            /* valid vectors for a collection dropped in between: fails in the writer */
            sieve_point p = {.id = tu_num(1), .vector = v};
            int rc = sieve_store_upsert(c->st, "ghost", &p, 1);
            if (rc != SIEVE_ENOTFOUND && rc != 0) c->rc = rc;
            sieve_collection_config cfg = tu_cfg("ghost", 4, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 0);
            rc = sieve_store_create_collection(c->st, &cfg);
            if (rc && rc != SIEVE_EEXIST) c->rc = rc;
            rc = sieve_store_drop_collection(c->st, "ghost");
            if (rc && rc != SIEVE_ENOTFOUND) c->rc = rc;
        } else {
            sieve_point p = {.id = tu_num((uint64_t)b), .vector = v};
            int rc = sieve_store_upsert(c->st, "m", &p, 1);
            if (rc) c->rc = rc;
        }
    }
    return NULL;
}

Test(concurrency, failing_requests_fail_alone) {
    create("m", 4, SIEVE_METRIC_DOT, SIEVE_DTYPE_F32, 0);
    mixed_ctx c[4] = {{g_st, 0, 0}, {g_st, 1, 0}, {g_st, 0, 0}, {g_st, 1, 0}};
    pthread_t th[4];
    for (int i = 0; i < 4; i++) cr_assert_eq(pthread_create(&th[i], NULL, mixed_thread, &c[i]), 0);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) cr_assert_eq(c[i].rc, 0, "thread %d: %s", i, sieve_errname(c[i].rc));
    cr_assert_eq(count_of("m"), 30);
    sieve_store_stats s;
    sieve_store_get_stats(g_st, &s);
    cr_assert_gt(s.failed, 0, "no request failed, the test proved nothing");
}

/* ================================================================ ids */

Test(ids, uuid_parse_and_format) {
    uint8_t u[16], v[16];
    cr_assert_eq(sieve_uuid_parse("123e4567-e89b-12d3-a456-426614174000", u), 0);
    const uint8_t want[16] = {0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3,
                              0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00};
    cr_assert_eq(memcmp(u, want, 16), 0);
    char buf[37];
    sieve_uuid_format(u, buf);
    cr_assert_str_eq(buf, "123e4567-e89b-12d3-a456-426614174000");
    cr_assert_eq(sieve_uuid_parse("123E4567E89B12D3A456426614174000", v), 0);
    cr_assert_eq(memcmp(u, v, 16), 0);
    cr_assert_eq(sieve_uuid_parse("FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", v), 0);
    sieve_uuid_format(v, buf);
    cr_assert_str_eq(buf, "ffffffff-ffff-ffff-ffff-ffffffffffff");
    const char *bad[] = {"", "123e4567-e89b-12d3-a456-42661417400", "123e4567-e89b-12d3-a456-4266141740000",
                         "123e4567e89b-12d3-a456-426614174000-", "123e4567-e89b-12d3-a456_426614174000",
                         "g23e4567-e89b-12d3-a456-426614174000", "123e4567-e89b-12d3-a456-42661417400 ",
                         "{123e4567-e89b-12d3-a456-426614174000}", "123e4567e89b12d3a45642661417400z"};
    memcpy(v, want, 16);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(sieve_uuid_parse(bad[i], u), SIEVE_EINVAL, "'%s' accepted", bad[i]);
    }
    cr_assert_eq(sieve_uuid_parse(NULL, u), SIEVE_EINVAL);
}

Test(ids, point_id_order_numbers_first) {
    sieve_point_id a = tu_num(5), b = tu_num(UINT64_MAX), c, d;
    memset(&c, 0, sizeof c);
    memset(&d, 0, sizeof d);
    c.kind = d.kind = SIEVE_ID_UUID;
    d.uuid[15] = 1;
    cr_assert_lt(sieve_point_id_cmp(&a, &b), 0);
    cr_assert_gt(sieve_point_id_cmp(&b, &a), 0);
    cr_assert_eq(sieve_point_id_cmp(&a, &a), 0);
    cr_assert_lt(sieve_point_id_cmp(&b, &c), 0, "numbers sort before UUIDs");
    cr_assert_gt(sieve_point_id_cmp(&c, &b), 0);
    cr_assert_lt(sieve_point_id_cmp(&c, &d), 0);
    cr_assert_eq(sieve_point_id_cmp(&d, &d), 0);
    sieve_point_id e = tu_num(256), f = tu_num(1); /* numeric, not byte-wise little-endian */
    cr_assert_gt(sieve_point_id_cmp(&e, &f), 0);
}

/* test_devcache.c: the device page cache against the kernel's materialized full sort of the
 * same snapshot, on the CPU and (where one is visible) on a CUDA device: resident, refreshed
 * after upserts and deletes (only dirty pages re-uploaded), with filters, and streamed when
 * the budget is smaller than the collection. Real LMDB files in a temporary directory. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sieve_store.h"

static char dir[256];

static void setup(void) {
    snprintf(dir, sizeof dir, "%s/sieve-devcache-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(devcache, .init = setup, .fini = teardown);

/* Upserts ids [first, first+n) with vectors from the normal sequence at seed. */
static void put_points(sieve_store *st, const char *name, uint32_t dim, uint64_t first,
                       uint32_t n, uint64_t seed) {
    sieve_device *cpu = NULL;
    cr_assert_eq(sieve_device_open("cpu:1", &cpu), 0);
    float *v = malloc((size_t)n * dim * sizeof *v);
    sieve_point *pts = calloc(n, sizeof *pts);
    cr_assert(v && pts);
    cr_assert_eq(sieve_device_fill_normal(cpu, v, SIEVE_DTYPE_F32, (size_t)n * dim, seed, 1.0f), 0);
    for (uint32_t i = 0; i < n; i++) {
        pts[i].id.kind = SIEVE_ID_NUM;
        pts[i].id.num = first + i;
        pts[i].vector = v + (size_t)i * dim;
        pts[i].dim = dim;
    }
    cr_assert_eq(sieve_store_upsert(st, name, pts, n), 0);
    free(v);
    free(pts);
    sieve_device_close(cpu);
}

/* Searches through the cache on dev and checks the answer equals the materialized full sort
 * on the same device over the snapshot's own matrix (copied to the device by the cache). */
static void check_search(sieve_devcache *dc, sieve_device *dev, sieve_store *st, const char *name,
                         sieve_metric metric, uint32_t nq, uint32_t k, const uint64_t *allowed,
                         int64_t *keep_rows) {
    sieve_snapshot *snap = NULL;
    cr_assert_eq(sieve_snapshot_open(st, name, &snap), 0);
    const sieve_collection_info *info = sieve_snapshot_info(snap);
    sieve_device *cpu = NULL;
    cr_assert_eq(sieve_device_open("cpu:1", &cpu), 0);
    float *q = malloc((size_t)nq * info->config.dim * sizeof *q);
    cr_assert_eq(sieve_device_fill_normal(cpu, q, SIEVE_DTYPE_F32, (size_t)nq * info->config.dim, 99, 1.0f), 0);
    sieve_search_params p;
    sieve_search_params_init(&p, metric, k);
    size_t nr = (size_t)nq * k;
    int64_t *rows = malloc(nr * 8), *ref = malloc(nr * 8);
    float *sc = malloc(nr * 4), *rsc = malloc(nr * 4);
    uint32_t *cnt = malloc(nq * 4), *rcnt = malloc(nq * 4);
    cr_assert_eq(sieve_devcache_knn(dc, snap, allowed, q, nq, &p, rows, sc, cnt, NULL), 0);
    /* the reference: materialized on the host copy of the same stored rows, CPU kernel for
       the CPU cache; for a CUDA cache the resident entry was searched by the same CUDA
       scorer, so compare with a CUDA materialized search over a device copy */
    sieve_matrix m = *sieve_snapshot_matrix(snap);
    m.allowed = allowed;
    int rc;
    if (sieve_device_get_kind(dev) == SIEVE_DEVICE_CPU) {
        rc = sieve_knn_materialized(dev, &m, q, nq, &p, ref, rsc, rcnt, NULL);
    } else {
        sieve_dev_matrix *dm = NULL;
        cr_assert_eq(sieve_dev_matrix_create(dev, m.dtype, m.n_rows, m.dim, m.rows_per_page, &dm), 0);
        size_t rb = (size_t)m.rows_per_page * m.dim * sieve_dtype_size(m.dtype);
        uint64_t pages = (m.n_rows + m.rows_per_page - 1) / m.rows_per_page;
        for (uint64_t pg = 0; pg < pages; pg++) {
            cr_assert_eq(sieve_device_upload(dev, (unsigned char *)sieve_dev_matrix_rows(dm) + pg * rb, m.pages[pg], rb), 0);
            cr_assert_eq(sieve_device_upload(dev, sieve_dev_matrix_norms(dm) + pg * m.rows_per_page, m.norm_pages[pg],
                                             (size_t)m.rows_per_page * 4), 0);
        }
        cr_assert_eq(sieve_dev_matrix_set_masks(dm, m.deleted, allowed), 0);
        rc = sieve_knn_materialized(dev, sieve_dev_matrix_view(dm), q, nq, &p, ref, rsc, rcnt, NULL);
        sieve_dev_matrix_destroy(dm);
    }
    cr_assert_eq(rc, 0, "materialized: %s", sieve_strerror(rc));
    for (uint32_t b = 0; b < nq; b++) {
        cr_assert_eq(cnt[b], rcnt[b], "q=%u count %u vs %u", b, cnt[b], rcnt[b]);
        for (uint32_t i = 0; i < cnt[b]; i++) {
            size_t at = (size_t)b * k + i;
            cr_assert_eq(rows[at], ref[at], "q=%u i=%u row %lld vs %lld", b, i, (long long)rows[at], (long long)ref[at]);
            cr_assert_eq(memcmp(&sc[at], &rsc[at], 4), 0, "q=%u i=%u score %.9g vs %.9g", b, i, sc[at], rsc[at]);
            if (m.deleted) cr_assert_eq((m.deleted[rows[at] / 64] >> (rows[at] % 64)) & 1, 0, "deleted row returned");
            if (allowed) cr_assert_eq((allowed[rows[at] / 64] >> (rows[at] % 64)) & 1, 1, "filtered row returned");
        }
    }
    if (keep_rows) memcpy(keep_rows, rows, nr * 8);
    sieve_snapshot_close(snap);
    free(q);
    free(rows);
    free(ref);
    free(sc);
    free(rsc);
    free(cnt);
    free(rcnt);
    sieve_device_close(cpu);
}

static void exercise(const char *spec, uint64_t budget) {
    sieve_device *dev = NULL;
    cr_assert_eq(sieve_device_open(spec, &dev), 0);
    sieve_store *st = NULL;
    cr_assert_eq(sieve_store_open(dir, NULL, &st), 0);
    const sieve_metric metrics[] = {SIEVE_METRIC_DOT, SIEVE_METRIC_COSINE, SIEVE_METRIC_EUCLID};
    const sieve_dtype dtypes[] = {SIEVE_DTYPE_F16, SIEVE_DTYPE_F32, SIEVE_DTYPE_BF16};
    for (int t = 0; t < 3; t++) {
        sieve_collection_config cfg;
        memset(&cfg, 0, sizeof cfg);
        snprintf(cfg.name, sizeof cfg.name, "c%d", t);
        cfg.dim = 48;
        cfg.metric = metrics[t];
        cfg.dtype = dtypes[t];
        cfg.rows_per_page = 128;
        cr_assert_eq(sieve_store_create_collection(st, &cfg), 0);
        put_points(st, cfg.name, cfg.dim, 0, 3000, 1 + t);

        sieve_devcache_options o;
        sieve_devcache_options_init(&o);
        o.budget_bytes = budget;
        o.stream_chunk_pages = budget ? 5 : 0;
        sieve_devcache *dc = NULL;
        cr_assert_eq(sieve_devcache_create(dev, &o, &dc), 0);
        check_search(dc, dev, st, cfg.name, cfg.metric, 9, 25, NULL, NULL);
        sieve_devcache_stats s0;
        cr_assert_eq(sieve_devcache_get_stats(dc, &s0), 0);

        /* an overwrite in one page and new points in a new page: only those re-upload */
        put_points(st, cfg.name, cfg.dim, 5, 1, 500 + t);
        put_points(st, cfg.name, cfg.dim, 3000, 200, 600 + t);
        check_search(dc, dev, st, cfg.name, cfg.metric, 9, 25, NULL, NULL);
        sieve_devcache_stats s1;
        cr_assert_eq(sieve_devcache_get_stats(dc, &s1), 0);
        if (sieve_device_get_kind(dev) == SIEVE_DEVICE_CUDA && !budget) {
            cr_assert_eq(s1.streamed_searches, 0);
            /* 24 pages initially (3000 rows of 128); then page 0 (id 5 rewritten), page 23
               (rows 3000..3071 added) and the new page 24 */
            cr_assert_eq(s0.pages_uploaded, 24, "initial pages uploaded: %llu", (unsigned long long)s0.pages_uploaded);
            cr_assert_eq(s1.pages_uploaded - s0.pages_uploaded, 3, "dirty pages uploaded: %llu",
                         (unsigned long long)(s1.pages_uploaded - s0.pages_uploaded));
        }
        if (budget) cr_assert_gt(s1.streamed_searches, 0, "a budget below the collection must stream");

        /* deletes: the tombstones are honoured; then a filter */
        int64_t before[9 * 25];
        check_search(dc, dev, st, cfg.name, cfg.metric, 9, 25, NULL, before);
        sieve_point_id ids[10];
        for (int i = 0; i < 10; i++) {
            sieve_snapshot *snap = NULL;
            cr_assert_eq(sieve_snapshot_open(st, cfg.name, &snap), 0);
            cr_assert_eq(sieve_snapshot_row_id(snap, (uint64_t)before[i], &ids[i]), 0);
            sieve_snapshot_close(snap);
        }
        uint64_t deleted = 0;
        cr_assert_eq(sieve_store_delete(st, cfg.name, ids, 10, &deleted), 0);
        cr_assert_eq(deleted, 10);
        check_search(dc, dev, st, cfg.name, cfg.metric, 9, 25, NULL, NULL);
        uint64_t words = (3200 + 63) / 64;
        uint64_t *allow = calloc(words, 8);
        for (uint64_t r = 0; r < 3200; r++)
            if (r % 3 == 1) allow[r / 64] |= 1ull << (r % 64);
        check_search(dc, dev, st, cfg.name, cfg.metric, 9, 25, allow, NULL);
        free(allow);
        sieve_devcache_destroy(dc);
    }
    sieve_store_close(st);
    sieve_device_close(dev);
}

Test(devcache, cpu_device_searches_the_map_exactly) { exercise("cpu", 0); }

Test(devcache, cuda_resident_and_refreshed, .timeout = 600) {
    if (sieve_cuda_device_count() == 0) cr_skip_test("no CUDA device visible: GPU page cache test skipped");
    exercise("cuda:0", 0);
}

Test(devcache, cuda_streams_when_over_budget, .timeout = 600) {
    if (sieve_cuda_device_count() == 0) cr_skip_test("no CUDA device visible: GPU page cache test skipped");
    exercise("cuda:0", 64 * 1024); /* far below one collection: every search streams */
}

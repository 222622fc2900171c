/* test_devcache.c: the device page cache against the kernel's materialized full sort of the
 * same snapshot, on the CPU and (where one is visible) on a CUDA device: resident, refreshed
 * after upserts and deletes (only dirty pages re-uploaded), with filters, and streamed when
 * the budget is smaller than the collection; the same resident and streaming code on the
 * CPU with host_resident; and several lanes searching one shared cache while a writer
 * changes the collection. Real LMDB files in a temporary directory. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
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

static void exercise(const char *spec, uint64_t budget, int host_resident) {
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
        o.host_resident = host_resident;
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
        if ((sieve_device_get_kind(dev) == SIEVE_DEVICE_CUDA || host_resident) && !budget) {
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

Test(devcache, cpu_device_searches_the_map_exactly) { exercise("cpu", 0, 0); }

Test(devcache, host_resident_refreshes_like_a_gpu) { exercise("cpu", 0, 1); }

Test(devcache, host_resident_streams_when_over_budget) { exercise("cpu", 64 * 1024, 1); }

Test(devcache, cuda_resident_and_refreshed, .timeout = 600) {
    if (sieve_cuda_device_count() == 0) cr_skip_test("no CUDA device visible: GPU page cache test skipped");
    exercise("cuda:0", 0, 0);
}

Test(devcache, cuda_streams_when_over_budget, .timeout = 600) {
    if (sieve_cuda_device_count() == 0) cr_skip_test("no CUDA device visible: GPU page cache test skipped");
    exercise("cuda:0", 64 * 1024, 0); /* far below one collection: every search streams */
}

/* ---------------------------------------------------------------- shared cache, many lanes */

typedef struct lane_ctx {
    sieve_devcache *dc;
    sieve_store *st;
    const char *spec;
    int index;
    volatile int *stop;
    unsigned long searches, filtered;
    uint64_t generations_seen[2]; /* smallest and largest */
    char failure[256];
} lane_ctx;

/* The materialized full sort of the snapshot's own matrix on dev (for CUDA over a device
 * copy, so the keys come from the same scorer as the cache's search). */
static int materialized_ref(sieve_device *dev, const sieve_matrix *host, const uint64_t *allowed,
                            const float *q, uint32_t nq, const sieve_search_params *p,
                            int64_t *rows, float *sc, uint32_t *cnt) {
    sieve_matrix m = *host;
    m.allowed = allowed;
    if (sieve_device_get_kind(dev) == SIEVE_DEVICE_CPU)
        return sieve_knn_materialized(dev, &m, q, nq, p, rows, sc, cnt, NULL);
    sieve_dev_matrix *dm = NULL;
    int rc = sieve_dev_matrix_create(dev, m.dtype, m.n_rows, m.dim, m.rows_per_page, &dm);
    size_t rb = (size_t)m.rows_per_page * m.dim * sieve_dtype_size(m.dtype);
    uint64_t pages = (m.n_rows + m.rows_per_page - 1) / m.rows_per_page;
    for (uint64_t pg = 0; pg < pages && !rc; pg++) {
        rc = sieve_device_upload(dev, (unsigned char *)sieve_dev_matrix_rows(dm) + pg * rb, m.pages[pg], rb);
        if (!rc)
            rc = sieve_device_upload(dev, sieve_dev_matrix_norms(dm) + pg * m.rows_per_page, m.norm_pages[pg],
                                     (size_t)m.rows_per_page * 4);
    }
    if (!rc) rc = sieve_dev_matrix_set_masks(dm, m.deleted, allowed);
    if (!rc) rc = sieve_knn_materialized(dev, sieve_dev_matrix_view(dm), q, nq, p, rows, sc, cnt, NULL);
    sieve_dev_matrix_destroy(dm);
    return rc;
}

/* One worker: its own device and lane; searches fresh snapshots while the writer runs and
 * checks each answer against the materialized full sort of that snapshot's own matrix. Odd
 * searches use a filter mask of its own (rows r % 3 == index % 3), so lanes sharing a mask
 * buffer would be caught. */
static void *lane_main(void *arg) {
    lane_ctx *c = arg;
    sieve_device *dev = NULL, *ref = NULL;
    sieve_devcache_lane *lane = NULL;
    if (sieve_device_open(c->spec, &dev) || sieve_device_open(c->spec, &ref) ||
        sieve_devcache_lane_create(c->dc, dev, &lane)) {
        snprintf(c->failure, sizeof c->failure, "cannot open a device or lane");
        goto out;
    }
    const uint32_t nq = 3, k = 12;
    c->generations_seen[0] = UINT64_MAX;
    for (unsigned long it = 0; !*c->stop || it < 4; it++) {
        sieve_snapshot *snap = NULL;
        int rc = sieve_snapshot_open(c->st, "shared", &snap);
        if (rc) {
            snprintf(c->failure, sizeof c->failure, "snapshot: %s", sieve_strerror(rc));
            break;
        }
        const sieve_collection_info *info = sieve_snapshot_info(snap);
        if (info->generation < c->generations_seen[0]) c->generations_seen[0] = info->generation;
        if (info->generation > c->generations_seen[1]) c->generations_seen[1] = info->generation;
        uint32_t dim = info->config.dim;
        float q[3 * 32];
        for (uint32_t i = 0; i < nq * dim; i++) /* host values, whatever the device */
            q[i] = (float)(((1000 + (uint64_t)c->index * 100000 + it) * 2654435761u + i * 40503u) % 2001) / 1000.0f - 1.0f;
        uint64_t *allow = NULL;
        if (it % 2) {
            size_t words = (size_t)((info->rows + 63) / 64);
            allow = calloc(words ? words : 1, 8);
            for (uint64_t r = 0; r < info->rows; r++)
                if (r % 3 == (uint64_t)c->index % 3) allow[r / 64] |= 1ull << (r % 64);
            c->filtered++;
        }
        sieve_search_params p;
        sieve_search_params_init(&p, info->config.metric, k);
        int64_t rows[3 * 12], rrows[3 * 12];
        float sc[3 * 12], rsc[3 * 12];
        uint32_t cnt[3], rcnt[3];
        rc = sieve_devcache_lane_knn(lane, snap, allow, q, nq, &p, rows, sc, cnt, NULL);
        int rrc = rc ? 0 : materialized_ref(ref, sieve_snapshot_matrix(snap), allow, q, nq, &p,
                                            rrows, rsc, rcnt);
        if (rc || rrc) {
            snprintf(c->failure, sizeof c->failure, "lane %d search %lu: %s / reference %s",
                     c->index, it, sieve_strerror(rc), sieve_strerror(rrc));
        } else {
            for (uint32_t b = 0; b < nq && !c->failure[0]; b++) {
                if (cnt[b] != rcnt[b])
                    snprintf(c->failure, sizeof c->failure, "lane %d search %lu q%u: count %u vs %u",
                             c->index, it, b, cnt[b], rcnt[b]);
                for (uint32_t i = 0; i < cnt[b] && !c->failure[0]; i++) {
                    size_t at = (size_t)b * k + i;
                    if (rows[at] != rrows[at] || memcmp(&sc[at], &rsc[at], 4))
                        snprintf(c->failure, sizeof c->failure,
                                 "lane %d search %lu (generation %llu) q%u #%u: row %lld score "
                                 "%.9g, reference row %lld score %.9g", c->index, it,
                                 (unsigned long long)info->generation, b, i,
                                 (long long)rows[at], sc[at], (long long)rrows[at], rsc[at]);
                }
            }
        }
        free(allow);
        sieve_snapshot_close(snap);
        c->searches++;
        if (c->failure[0]) break;
    }
out:
    sieve_devcache_lane_destroy(lane);
    sieve_device_close(dev);
    sieve_device_close(ref);
    return NULL;
}

/* Several lanes search one collection through one shared cache while a writer overwrites,
 * adds (past the resident copy's capacity, so it is replaced) and deletes points: every
 * answer equals the full sort of its own snapshot. */
static void shared_cache_under_writes(const char *spec, int host_resident) {
    sieve_store *st = NULL;
    cr_assert_eq(sieve_store_open(dir, NULL, &st), 0);
    sieve_collection_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.name, sizeof cfg.name, "shared");
    cfg.dim = 32;
    cfg.metric = SIEVE_METRIC_DOT;
    cfg.dtype = SIEVE_DTYPE_F16;
    cfg.rows_per_page = 128;
    cr_assert_eq(sieve_store_create_collection(st, &cfg), 0);
    put_points(st, cfg.name, cfg.dim, 0, 2000, 7);
    sieve_device *dev = NULL;
    cr_assert_eq(sieve_device_open(spec, &dev), 0);
    sieve_devcache_options o;
    sieve_devcache_options_init(&o);
    o.host_resident = host_resident;
    sieve_devcache *dc = NULL;
    cr_assert_eq(sieve_devcache_create(dev, &o, &dc), 0);
    sieve_devcache_lane *bad = NULL;
    sieve_device *other = NULL;
    if (sieve_device_get_kind(dev) == SIEVE_DEVICE_CUDA) {
        cr_assert_eq(sieve_device_open("cpu:1", &other), 0);
        cr_assert_eq(sieve_devcache_lane_create(dc, other, &bad), SIEVE_EINVAL,
                     "a CPU lane on a CUDA cache must be refused");
        cr_assert_null(bad);
        sieve_device_close(other);
    }
    cr_assert_eq(sieve_devcache_lane_create(dc, NULL, &bad), SIEVE_EINVAL);

    enum { LANES = 3 };
    volatile int stop = 0;
    lane_ctx ctx[LANES];
    pthread_t th[LANES];
    for (int i = 0; i < LANES; i++) {
        memset(&ctx[i], 0, sizeof ctx[i]);
        ctx[i] = (lane_ctx){.dc = dc, .st = st, .spec = spec, .index = i, .stop = &stop};
        cr_assert_eq(pthread_create(&th[i], NULL, lane_main, &ctx[i]), 0);
    }
    uint64_t next_id = 2000;
    for (int round = 0; round < 24; round++) {
        put_points(st, cfg.name, cfg.dim, (uint64_t)round * 37 % 2000, 20, 100 + round); /* overwrite */
        put_points(st, cfg.name, cfg.dim, next_id, 40, 300 + round);                    /* grow */
        next_id += 40;
        sieve_point_id ids[5];
        for (int i = 0; i < 5; i++) {
            memset(&ids[i], 0, sizeof ids[i]);
            ids[i].kind = SIEVE_ID_NUM;
            ids[i].num = (uint64_t)(round * 5 + i) * 13 % next_id;
        }
        cr_assert_eq(sieve_store_delete(st, cfg.name, ids, 5, NULL), 0);
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    stop = 1;
    unsigned long total = 0;
    for (int i = 0; i < LANES; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(ctx[i].failure[0], 0, "%s", ctx[i].failure);
        cr_assert_geq(ctx[i].searches, 4, "lane %d searched %lu times", i, ctx[i].searches);
        cr_assert_gt(ctx[i].filtered, 0);
        total += ctx[i].searches;
    }
    sieve_devcache_stats s;
    cr_assert_eq(sieve_devcache_get_stats(dc, &s), 0);
    if (host_resident || sieve_device_get_kind(dev) == SIEVE_DEVICE_CUDA) {
        cr_assert_eq(s.resident_collections, 1, "resident collections %llu",
                     (unsigned long long)s.resident_collections);
        cr_assert_gt(s.pages_uploaded, 16, "pages uploaded %llu (the initial 16 pages and refreshes)",
                     (unsigned long long)s.pages_uploaded);
    }
    cr_log_info("%lu searches over %d lanes", total, LANES);
    sieve_devcache_destroy(dc);
    sieve_device_close(dev);
    sieve_store_close(st);
}

Test(devcache, lanes_share_a_host_resident_cache_under_writes, .timeout = 600) {
    shared_cache_under_writes("cpu:1", 1);
}

Test(devcache, lanes_on_the_cpu_map_under_writes, .timeout = 600) {
    shared_cache_under_writes("cpu:1", 0);
}

Test(devcache, cuda_lanes_share_a_cache_under_writes, .timeout = 600) {
    if (sieve_cuda_device_count() == 0) cr_skip_test("no CUDA device visible: GPU page cache test skipped");
    shared_cache_under_writes("cuda:0", 0);
}

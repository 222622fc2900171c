/* store_ingest.c: sieve-bench-store, the bulk-ingest benchmark of the LMDB store.
 * Upserts N random vectors in batches straight into a data directory through
 * sieve_store_upsert (from one or more threads) and reports vectors/s.
 * Must not: measure anything but the store (vectors are generated before the clock starts). */
#define _GNU_SOURCE
#include <getopt.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "sieve_store.h"

static void usage(FILE *f, const char *argv0) {
    fprintf(f,
            "usage: %s --dir DIR [options]\n"
            "Bulk-ingest benchmark: upserts N random float32 vectors into collection 'bench'\n"
            "of a fresh or existing data directory and prints vectors/s.\n\n"
            "  --dir DIR        data directory (created; must not be open elsewhere)\n"
            "  --n N            vectors (default 1000000)\n"
            "  --dim D          dimension (default 768)\n"
            "  --batch B        vectors per upsert call (default 10000)\n"
            "  --dtype T        float32 | float16 | bfloat16 (default float32)\n"
            "  --metric M       Dot | Cosine | Euclid (default Dot)\n"
            "  --threads T      concurrent upsert callers (default 1)\n"
            "  --no-sync        MDB_NOSYNC (not durable; for comparison only)\n"
            "  --map-mib M      initial map size in MiB (default 1024)\n"
            "  --malloc-default leave glibc malloc's thresholds alone (see below)\n"
            "  -h, --help       this text\n\n"
            "By default the benchmark raises glibc's mmap and trim thresholds, as an ingest\n"
            "process should: LMDB allocates every dirty page blob of a transaction with\n"
            "malloc and frees it at commit, and with the default thresholds glibc hands that\n"
            "memory back to the kernel after every commit, so each transaction page-faults\n"
            "its whole size in again.\n",
            argv0);
}

typedef struct shared {
    sieve_store *st;
    const float *pool;
    size_t pool_n, n, batch;
    uint32_t dim;
    atomic_size_t next;
    atomic_size_t done;
    int err;
    double t0;
} shared;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *worker(void *arg) {
    shared *s = arg;
    sieve_point *pts = calloc(s->batch, sizeof *pts);
    if (!pts) { s->err = SIEVE_ENOMEM; return NULL; }
    for (;;) {
        size_t b0 = atomic_fetch_add(&s->next, s->batch);
        if (b0 >= s->n || s->err) break;
        size_t cnt = s->n - b0 < s->batch ? s->n - b0 : s->batch;
        for (size_t i = 0; i < cnt; i++) {
            pts[i].id.kind = SIEVE_ID_NUM;
            pts[i].id.num = b0 + i;
            pts[i].vector = s->pool + ((b0 + i) % s->pool_n) * s->dim;
            pts[i].dim = s->dim;
        }
        int rc = sieve_store_upsert(s->st, "bench", pts, cnt);
        if (rc) {
            fprintf(stderr, "upsert at %zu: %s (%s)\n", b0, sieve_errname(rc), sieve_strerror(rc));
            s->err = rc;
            break;
        }
        size_t done = atomic_fetch_add(&s->done, cnt) + cnt;
        size_t tenth = s->n / 10 ? s->n / 10 : 1;
        if (done / tenth != (done - cnt) / tenth)
            fprintf(stderr, "  %3zu%%  %zu vectors  %.0f vectors/s\n", done * 100 / s->n, done,
                    done / (now() - s->t0));
    }
    free(pts);
    return NULL;
}

int main(int argc, char **argv) {
    const char *dir = NULL, *dtype = "float32", *metric = "Dot";
    size_t n = 1000000, batch = 10000, map_mib = 1024;
    uint32_t dim = 768;
    int threads = 1, no_sync = 0, malloc_default = 0;
    static const struct option opts[] = {
        {"dir", 1, 0, 'd'}, {"n", 1, 0, 'n'}, {"dim", 1, 0, 'D'}, {"batch", 1, 0, 'b'},
        {"dtype", 1, 0, 't'}, {"metric", 1, 0, 'm'}, {"threads", 1, 0, 'T'},
        {"no-sync", 0, 0, 'S'}, {"map-mib", 1, 0, 'M'}, {"malloc-default", 0, 0, 'A'},
        {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': dir = optarg; break;
        case 'n': n = strtoull(optarg, NULL, 10); break;
        case 'D': dim = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'b': batch = strtoull(optarg, NULL, 10); break;
        case 't': dtype = optarg; break;
        case 'm': metric = optarg; break;
        case 'T': threads = atoi(optarg); break;
        case 'S': no_sync = 1; break;
        case 'M': map_mib = strtoull(optarg, NULL, 10); break;
        case 'A': malloc_default = 1; break;
        case 'h': usage(stdout, argv[0]); return 0;
        default: usage(stderr, argv[0]); return 2;
        }
    }
    sieve_collection_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.name, sizeof cfg.name, "bench");
    cfg.dim = dim;
    if (!dir || !n || !batch || threads < 1 || threads > 256 ||
        sieve_dtype_parse(dtype, &cfg.dtype) || sieve_metric_parse(metric, &cfg.metric)) {
        usage(stderr, argv[0]);
        return 2;
    }
    if (!malloc_default) {
        mallopt(M_MMAP_THRESHOLD, 32 << 20);
        mallopt(M_TRIM_THRESHOLD, 512 << 20);
    }
    size_t pool_n = n < 100000 ? n : 100000;
    float *pool = malloc(pool_n * dim * sizeof *pool);
    if (!pool) { fprintf(stderr, "out of memory for the vector pool\n"); return 1; }
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < pool_n * dim; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        pool[i] = (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }

    sieve_store_options o;
    sieve_store_options_init(&o);
    o.no_sync = no_sync;
    o.initial_map_bytes = (uint64_t)map_mib << 20;
    sieve_store *st;
    int rc = sieve_store_open(dir, &o, &st);
    if (rc) {
        fprintf(stderr, "open %s: %s (%s)\n", dir, sieve_errname(rc), sieve_strerror(rc));
        return 1;
    }
    rc = sieve_store_create_collection(st, &cfg);
    if (rc && rc != SIEVE_EEXIST) {
        fprintf(stderr, "create: %s\n", sieve_errname(rc));
        return 1;
    }
    sieve_collection_info info;
    sieve_store_collection_info(st, "bench", &info);
    fprintf(stderr, "ingest %zu x %u %s (%s) in batches of %zu, %d thread(s), %s commits, "
            "%u rows a page, malloc %s\n", n, dim, sieve_dtype_name(info.config.dtype),
            sieve_metric_name(info.config.metric), batch, threads,
            no_sync ? "NOSYNC" : "durable", info.config.rows_per_page,
            malloc_default ? "default" : "tuned");

    shared sh = {.st = st, .pool = pool, .pool_n = pool_n, .n = n, .batch = batch, .dim = dim};
    atomic_init(&sh.next, 0);
    atomic_init(&sh.done, 0);
    pthread_t *th = calloc((size_t)threads, sizeof *th);
    sh.t0 = now();
    for (int t = 0; t < threads; t++) pthread_create(&th[t], NULL, worker, &sh);
    for (int t = 0; t < threads; t++) pthread_join(th[t], NULL);
    double secs = now() - sh.t0;
    sieve_store_stats stats;
    sieve_store_get_stats(st, &stats);
    uint64_t count = 0;
    sieve_store_count(st, "bench", &count);
    sieve_store_close(st);
    char path[4096];
    snprintf(path, sizeof path, "%s/data.mdb", dir);
    struct stat sb;
    double file_mb = stat(path, &sb) ? 0 : sb.st_size / 1e6;
    if (sh.err) return 1;
    size_t es = sieve_dtype_size(cfg.dtype);
    printf("vectors %zu  seconds %.3f  vectors/s %.0f  vector MB/s %.0f  commits %llu  "
           "largest group %llu  map grows %llu  count %llu  data.mdb %.0f MB\n"
           "writer: applying %.3f s, committing %.3f s; the rest (checks, conversion, norms "
           "in the callers, queueing) %.3f s\n",
           n, secs, n / secs, n * (double)dim * es / secs / 1e6,
           (unsigned long long)stats.commits, (unsigned long long)stats.max_group,
           (unsigned long long)stats.map_grows, (unsigned long long)count, file_mb,
           stats.apply_ns * 1e-9, stats.commit_ns * 1e-9,
           secs - (stats.apply_ns + stats.commit_ns) * 1e-9);
    free(th);
    free(pool);
    return 0;
}

/* sieve_bench.c: sieve-bench, the kernel-level benchmark.
 *
 * Owns: the `knn` mode (fused search vs the in-house materialized path on synthetic data or
 * on rows and queries read from vector files, with exactness checks, the floor and percent
 * of floor, recovery-path counts) and its table and JSON output, and the dispatch to the
 * `attention` mode (bench_attention.c). Must not: touch the store or the server.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "sieve_datasets.h"
#include "sieve_kernels.h"

typedef struct knn_opts {
    const char *device;
    sieve_dtype dtypes[4];
    int n_dtypes;
    uint64_t ns[MAXLIST];
    int n_ns;
    uint32_t batches[MAXLIST];
    int n_batches;
    uint32_t ks[MAXLIST];
    int n_ks;
    uint32_t dim, rpp;
    sieve_metric metric;
    sieve_pattern pattern;
    int repeat, warmup, mat_repeat;
    int validate;       /* 0 none, 1 fused == materialized */
    int materialized;   /* time the materialized baseline */
    int pinned_results; /* query and result arrays in page-locked host memory */
    uint32_t sample_rows; /* sieve_search_params.sample_rows; 0: the default */
    double bw_gbs, tflops_f16, tflops_bf16, tflops_f32;
    const char *json;
    uint64_t seed;
    const char *base_path;    /* rows from this file instead of a synthetic pattern */
    const char *queries_path; /* queries from this file (batch B = its first B rows) */
} knn_opts;

/* Query and result arrays: page-locked (sieve_host_alloc_pinned) or malloc; NULL on
 * failure. */
static void *res_alloc(sieve_device *dev, int pinned, size_t bytes) {
    void *p = NULL;
    if (!pinned) return malloc(bytes);
    return sieve_host_alloc_pinned(dev, bytes, &p) ? NULL : p;
}

static void res_free(sieve_device *dev, int pinned, void *p) {
    if (!p) return;
    if (pinned)
        sieve_host_free_pinned(dev, p);
    else
        free(p);
}

static void knn_usage(FILE *f) {
    fprintf(f,
            "usage: sieve-bench knn [options]\n"
            "\n"
            "Times the fused exact k-NN search against the in-house materialize-then-sort\n"
            "path on synthetic data held on the device, checks that both give the same answer,\n"
            "and reports the floor (stored bytes read once at --bw, or matrix FLOPs at the\n"
            "dtype's rate, whichever is larger) and the percent of floor reached.\n"
            "\n"
            "options (lists are comma separated; 1k = 1000, 1m = 1000000):\n"
            "  --device SPEC      auto | cpu | cpu:T | cuda:N           (default auto)\n"
            "  --dtype LIST       float16,bfloat16,float32              (default float16)\n"
            "  --n LIST           stored rows; 'all' = every row of --base   (default 1m)\n"
            "  --dim D            dimension                              (default 768)\n"
            "  --batch LIST       queries per call                       (default 1,64)\n"
            "  --k LIST           results per query                      (default 128)\n"
            "  --metric M         Dot | Cosine | Euclid                  (default Dot)\n"
            "  --data P           normal|ties|dups|sorted_asc|sorted_desc|outlier|band\n"
            "  --rows-per-page R  page size in rows (multiple of 128)    (default 1024)\n"
            "  --repeat R         timed fused calls per shape (median)   (default 20)\n"
            "  --warmup W         untimed calls first                    (default 2)\n"
            "  --no-materialized  skip the materialized baseline and the exactness check\n"
            "  --mat-repeat R     timed materialized calls               (default 3)\n"
            "  --sample-rows S    rows in the strided sample (default: the library's,\n"
            "                     max(16384, 8k))\n"
            "  --results KIND     pageable | pinned: where the query and result arrays live\n"
            "                     (pinned: sieve_host_alloc_pinned, as the server's batcher\n"
            "                     holds them, copied directly; pageable: malloc, through a\n"
            "                     staging buffer)                     (default pageable)\n"
            "  --bw GBS           memory bandwidth for the floor         (default 4250)\n"
            "  --tflops-f16 T     --tflops-bf16 T  --tflops-f32 T        (default 708, 730, 50.6)\n"
            "  --seed S           data and query seed                    (default 1)\n"
            "  --base FILE        stored rows from a vector file (.fbin .npy .fvecs ...;\n"
            "                     --n takes its first rows) instead of --data\n"
            "  --queries FILE     queries from a vector file: a batch of B is its first B\n"
            "                     rows (default: normal random queries)\n"
            "  --json FILE        also append one JSON object per shape to FILE\n"
            "  -h, --help         this help\n"
            "\n"
            "environment (the CUDA backend; none changes an answer, each is for A/B runs):\n"
            "  SIEVE_CUDA_SCAN=V        scan variant: mma, wg64x128, wg128x128s3, tma64x256,\n"
            "                           tma64x128, tma128x256, tma64x128s, tma64x256s,\n"
            "                           tma128x256s, tma128x256h, the wg forms with -direct;\n"
            "                           f32tile for float32 (default: chosen by batch and k)\n"
            "  SIEVE_CUDA_SELECT=S      segmented | small: the select step's sort: one\n"
            "                           segmented sort, or the 256-thread block at every k\n"
            "                           (default: a block per query sized by k)\n"
            "  SIEVE_CUDA_SPECULATE=S   0 | small | large: the speculative select (select and\n"
            "                           download queued behind the scan, k up to 36864)\n"
            "                           off, or with the 256- or 1024-thread block\n"
            "  SIEVE_CUDA_PDL=V         1 | 0 | a list of sample,propose,gate,select: the\n"
            "                           launches chained behind the one before (programmatic\n"
            "                           dependent launch, sm_90): every one at any batch, none,\n"
            "                           or those (default: every one up to 8 queries)\n");
}

static int knn_parse(int argc, char **argv, knn_opts *o) {
    memset(o, 0, sizeof *o);
    o->device = "auto";
    o->dtypes[0] = SIEVE_DTYPE_F16;
    o->n_dtypes = 1;
    o->ns[0] = 1000000;
    o->n_ns = 1;
    o->batches[0] = 1;
    o->batches[1] = 64;
    o->n_batches = 2;
    o->ks[0] = 128;
    o->n_ks = 1;
    o->dim = 768;
    o->rpp = 1024;
    o->metric = SIEVE_METRIC_DOT;
    o->pattern = SIEVE_PATTERN_NORMAL;
    o->repeat = 20;
    o->warmup = 2;
    o->mat_repeat = 3;
    o->materialized = 1;
    o->validate = 1;
    o->bw_gbs = 4250;
    o->tflops_f16 = 708;
    o->tflops_bf16 = 730;
    o->tflops_f32 = 50.6;
    o->seed = 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED()                                                                  \
    do {                                                                        \
        if (!v) {                                                               \
            fprintf(stderr, "sieve-bench knn: %s needs a value\n", a);          \
            return -1;                                                          \
        }                                                                       \
        i++;                                                                    \
    } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            knn_usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--device")) {
            NEED();
            o->device = v;
        } else if (!strcmp(a, "--dtype")) {
            NEED();
            char *copy = strdup(v), *save = NULL;
            o->n_dtypes = 0;
            for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (o->n_dtypes >= 4 || sieve_dtype_parse(t, &o->dtypes[o->n_dtypes])) {
                    fprintf(stderr, "sieve-bench knn: bad --dtype '%s' (float16, bfloat16, float32)\n", t);
                    free(copy);
                    return -1;
                }
                o->n_dtypes++;
            }
            free(copy);
        } else if (!strcmp(a, "--n")) {
            NEED();
            /* "all" (0 here) = every row of --base; checked once the file is open */
            if ((o->n_ns = bench_parse_list_u64_all(v, o->ns, MAXLIST, 1)) <= 0) goto bad;
        } else if (!strcmp(a, "--base")) {
            NEED();
            o->base_path = v;
        } else if (!strcmp(a, "--queries")) {
            NEED();
            o->queries_path = v;
        } else if (!strcmp(a, "--batch")) {
            NEED();
            if ((o->n_batches = bench_parse_list_u32(v, o->batches, MAXLIST)) <= 0) goto bad;
        } else if (!strcmp(a, "--k")) {
            NEED();
            if ((o->n_ks = bench_parse_list_u32(v, o->ks, MAXLIST)) <= 0) goto bad;
        } else if (!strcmp(a, "--dim")) {
            NEED();
            o->dim = (uint32_t)atoi(v);
            if (o->dim == 0) goto bad;
        } else if (!strcmp(a, "--rows-per-page")) {
            NEED();
            o->rpp = (uint32_t)atoi(v);
            if (o->rpp == 0 || o->rpp % 128) goto bad;
        } else if (!strcmp(a, "--metric")) {
            NEED();
            if (sieve_metric_parse(v, &o->metric)) goto bad;
        } else if (!strcmp(a, "--data")) {
            NEED();
            if (sieve_pattern_parse(v, &o->pattern)) goto bad;
        } else if (!strcmp(a, "--repeat")) {
            NEED();
            o->repeat = atoi(v);
            if (o->repeat <= 0) goto bad;
        } else if (!strcmp(a, "--warmup")) {
            NEED();
            o->warmup = atoi(v);
        } else if (!strcmp(a, "--mat-repeat")) {
            NEED();
            o->mat_repeat = atoi(v);
            if (o->mat_repeat <= 0) goto bad;
        } else if (!strcmp(a, "--sample-rows")) {
            NEED();
            char *end = NULL;
            unsigned long sr = strtoul(v, &end, 10);
            if (!end || *end || sr == 0 || sr > UINT32_MAX) goto bad;
            o->sample_rows = (uint32_t)sr;
        } else if (!strcmp(a, "--results")) {
            NEED();
            if (!strcmp(v, "pinned"))
                o->pinned_results = 1;
            else if (!strcmp(v, "pageable"))
                o->pinned_results = 0;
            else
                goto bad;
        } else if (!strcmp(a, "--no-materialized")) {
            o->materialized = 0;
            o->validate = 0;
        } else if (!strcmp(a, "--bw")) {
            NEED();
            o->bw_gbs = atof(v);
        } else if (!strcmp(a, "--tflops-f16")) {
            NEED();
            o->tflops_f16 = atof(v);
        } else if (!strcmp(a, "--tflops-bf16")) {
            NEED();
            o->tflops_bf16 = atof(v);
        } else if (!strcmp(a, "--tflops-f32")) {
            NEED();
            o->tflops_f32 = atof(v);
        } else if (!strcmp(a, "--seed")) {
            NEED();
            o->seed = strtoull(v, NULL, 10);
        } else if (!strcmp(a, "--json")) {
            NEED();
            o->json = v;
        } else {
            fprintf(stderr, "sieve-bench knn: unknown option '%s' (see --help)\n", a);
            return -1;
        }
        continue;
    bad:
        fprintf(stderr, "sieve-bench knn: bad value '%s' for %s (see --help)\n", v, a);
        return -1;
#undef NEED
    }
    return 0;
}

/* Queries: normal, or along e0 for the sorted patterns so their keys really are sorted. */
static float *make_queries(sieve_device *host, uint32_t nq, uint32_t dim, sieve_pattern pat,
                           uint64_t seed) {
    float *q = malloc((size_t)nq * dim * sizeof *q);
    if (!q) return NULL;
    sieve_device_fill_normal(host, q, SIEVE_DTYPE_F32, (size_t)nq * dim, seed ^ 0xabcdefull, 1.0f);
    if (pat == SIEVE_PATTERN_SORTED_ASC || pat == SIEVE_PATTERN_SORTED_DESC) {
        for (uint32_t i = 0; i < nq; i++) {
            for (uint32_t j = 1; j < dim; j++) q[(size_t)i * dim + j] *= 0.01f;
            q[(size_t)i * dim] = 1.0f;
        }
    }
    return q;
}

/* Reads the first n_rows rows of path (any dense format) into a new n_rows-row matrix of
 * dtype on dev, converting on the host in chunks. Returns 0 or a SIEVE_E* code (message
 * printed). */
static int load_base(sieve_device *dev, const char *path, sieve_dtype dt, uint64_t n_rows,
                     uint32_t dim, uint32_t rpp, sieve_dev_matrix **out) {
    sieve_ds_reader *r = NULL;
    sieve_ds_error err;
    *out = NULL;
    int rc = sieve_ds_reader_open(path, SIEVE_DS_FORMAT_AUTO, 0, &r, &err);
    if (rc) {
        fprintf(stderr, "sieve-bench: %s\n", err.msg);
        return rc;
    }
    sieve_dev_matrix *dm = NULL;
    rc = sieve_dev_matrix_create(dev, dt, n_rows, dim, rpp, &dm);
    if (rc) {
        fprintf(stderr, "sieve-bench: cannot allocate %llu x %u %s rows: %s\n",
                (unsigned long long)n_rows, dim, sieve_dtype_name(dt), sieve_strerror(rc));
        sieve_ds_reader_close(r);
        return rc;
    }
    const size_t chunk = 8192;
    size_t esz = sieve_dtype_size(dt);
    float *f = malloc(chunk * dim * sizeof *f);
    void *conv = malloc(chunk * dim * esz);
    if (!f || !conv) rc = SIEVE_ENOMEM;
    sieve_progress bar;
    char label[64];
    snprintf(label, sizeof label, "load %s", sieve_dtype_name(dt));
    sieve_progress_init(&bar, stderr, label, "rows", n_rows, 0, SIEVE_PROGRESS_AUTO);
    char *rows = sieve_dev_matrix_rows(dm);
    for (uint64_t done = 0; !rc && done < n_rows;) {
        size_t want = n_rows - done < chunk ? (size_t)(n_rows - done) : chunk, got = 0;
        rc = sieve_ds_reader_read_f32(r, want, f, &got, &err);
        if (rc) {
            fprintf(stderr, "sieve-bench: %s\n", err.msg);
            break;
        }
        if (got == 0) {
            fprintf(stderr, "sieve-bench: %s ended at row %llu; expected %llu rows\n", path,
                    (unsigned long long)done, (unsigned long long)n_rows);
            rc = SIEVE_ECORRUPT;
            break;
        }
        sieve_convert_from_f32(dt, f, conv, got * dim);
        rc = sieve_device_upload(dev, rows + done * dim * esz, conv, got * dim * esz);
        if (rc) fprintf(stderr, "sieve-bench: upload failed: %s\n", sieve_strerror(rc));
        done += got;
        sieve_progress_update(&bar, done);
    }
    sieve_progress_finish(&bar);
    free(f);
    free(conv);
    sieve_ds_reader_close(r);
    if (rc) {
        sieve_dev_matrix_destroy(dm);
        return rc;
    }
    *out = dm;
    return 0;
}

/* Reads the first n rows of path into a new host array (n x dim floats). */
static int load_queries(const char *path, uint32_t n, uint32_t dim, float **out) {
    sieve_ds_reader *r = NULL;
    sieve_ds_error err;
    *out = NULL;
    int rc = sieve_ds_reader_open(path, SIEVE_DS_FORMAT_AUTO, 0, &r, &err);
    if (rc) {
        fprintf(stderr, "sieve-bench: %s\n", err.msg);
        return rc;
    }
    sieve_ds_info in;
    sieve_ds_reader_info(r, &in);
    if (in.dim != dim || in.count < n) {
        fprintf(stderr,
                "sieve-bench: %s has %llu x %u queries; need at least %u rows of dimension %u "
                "(the largest --batch and the rows' dimension)\n",
                path, (unsigned long long)in.count, in.dim, n, dim);
        sieve_ds_reader_close(r);
        return SIEVE_EINVAL;
    }
    float *q = malloc((size_t)n * dim * sizeof *q);
    size_t got = 0;
    rc = q ? sieve_ds_reader_read_f32(r, n, q, &got, &err) : SIEVE_ENOMEM;
    if (rc == 0 && got != n) rc = SIEVE_ECORRUPT, snprintf(err.msg, sizeof err.msg, "%s: short read", path);
    if (rc) {
        fprintf(stderr, "sieve-bench: %s\n", rc == SIEVE_ENOMEM ? "out of memory" : err.msg);
        free(q);
        q = NULL;
    }
    sieve_ds_reader_close(r);
    *out = q;
    return rc;
}

/* Checks --base/--queries against the options: dimension, --n all, row counts. */
static int check_files(knn_opts *o, char *label, size_t label_len) {
    if (!o->base_path) {
        for (int i = 0; i < o->n_ns; i++)
            if (o->ns[i] == 0) {
                fprintf(stderr, "sieve-bench knn: --n all needs --base FILE\n");
                return -1;
            }
        snprintf(label, label_len, "%s", sieve_pattern_name(o->pattern));
        if (o->queries_path) snprintf(label, label_len, "%s+queries", sieve_pattern_name(o->pattern));
        return 0;
    }
    sieve_ds_reader *r = NULL;
    sieve_ds_error err;
    if (sieve_ds_reader_open(o->base_path, SIEVE_DS_FORMAT_AUTO, 0, &r, &err)) {
        fprintf(stderr, "sieve-bench: %s\n", err.msg);
        return -1;
    }
    sieve_ds_info in;
    sieve_ds_reader_info(r, &in);
    sieve_ds_reader_close(r);
    o->dim = in.dim;
    for (int i = 0; i < o->n_ns; i++) {
        if (o->ns[i] == 0) o->ns[i] = in.count;
        if (o->ns[i] > in.count) {
            fprintf(stderr, "sieve-bench knn: --n %llu is more than the %llu rows of %s\n",
                    (unsigned long long)o->ns[i], (unsigned long long)in.count, o->base_path);
            return -1;
        }
    }
    const char *slash = strrchr(o->base_path, '/');
    snprintf(label, label_len, "file:%s", slash ? slash + 1 : o->base_path);
    return 0;
}

/* A number for JSON: "null" when it is not finite (JSON has no NaN). */
static double tflops_for(const knn_opts *o, sieve_dtype dt) {
    return dt == SIEVE_DTYPE_F16 ? o->tflops_f16 : dt == SIEVE_DTYPE_BF16 ? o->tflops_bf16 : o->tflops_f32;
}

static int run_knn(int argc, char **argv) {
    knn_opts o;
    if (knn_parse(argc, argv, &o)) return 2;
    char data_label[300];
    if (check_files(&o, data_label, sizeof data_label)) return 2;
    uint32_t max_batch = 0;
    uint64_t max_n = 0;
    for (int i = 0; i < o.n_batches; i++) max_batch = o.batches[i] > max_batch ? o.batches[i] : max_batch;
    for (int i = 0; i < o.n_ns; i++) max_n = o.ns[i] > max_n ? o.ns[i] : max_n;
    float *file_queries = NULL;
    if (o.queries_path && load_queries(o.queries_path, max_batch, o.dim, &file_queries)) return 2;
    sieve_device *dev = NULL, *host = NULL;
    int rc = sieve_device_open(o.device, &dev);
    if (rc) {
        fprintf(stderr, "sieve-bench: cannot open device '%s': %s\n", o.device, sieve_strerror(rc));
        free(file_queries);
        return 1;
    }
    sieve_device_open("cpu:1", &host);
    sieve_device_info info;
    sieve_device_get_info(dev, &info);
    FILE *js = NULL;
    if (o.json && !(js = fopen(o.json, "a"))) {
        fprintf(stderr, "sieve-bench: cannot open %s: %s\n", o.json, strerror(errno));
        free(file_queries);
        sieve_device_close(host);
        sieve_device_close(dev);
        return 1;
    }
    printf("# sieve-bench knn on %s; dim %u, metric %s, data %s, %d timed calls (median), "
           "%s query and result arrays\n",
           info.name, o.dim, sieve_metric_name(o.metric), data_label, o.repeat,
           o.pinned_results ? "pinned" : "pageable");
    printf("# floor = max(stored bytes / %.0f GB/s, 2*B*N*dim / dtype rate); times are whole\n"
           "# sieve_knn calls (query upload, sample, scan, select, result download)\n",
           o.bw_gbs);
    printf("%-9s %-8s %5s %6s %10s %10s %9s %7s %10s %8s %-16s %s\n", "N", "dtype", "B", "k",
           "fused_ms", "mat_ms", "floor_ms", "%floor", "admit/q", "exact", "paths(c/u/o/f/d)",
           "sample/scan/select(download)_ms");
    int failures = 0;
    for (int di = 0; di < o.n_dtypes; di++) {
        sieve_dtype dt = o.dtypes[di];
        /* File rows: loaded once per dtype; each --n searches a prefix of them. */
        sieve_dev_matrix *filem = NULL;
        if (o.base_path) {
            rc = load_base(dev, o.base_path, dt, max_n, o.dim, o.rpp, &filem);
            if (!rc && o.metric == SIEVE_METRIC_EUCLID) rc = sieve_dev_matrix_update_norms(filem);
            if (rc) {
                failures++;
                sieve_dev_matrix_destroy(filem);
                continue;
            }
        }
        for (int ni = 0; ni < o.n_ns; ni++) {
            uint64_t n = o.ns[ni];
            sieve_dev_matrix *dm = NULL;
            rc = 0;
            if (!filem) {
                rc = sieve_dev_matrix_create(dev, dt, n, o.dim, o.rpp, &dm);
                if (!rc) rc = sieve_device_fill_rows(dev, sieve_dev_matrix_rows(dm), dt, n, o.dim,
                                                     o.pattern, o.seed);
                if (!rc && o.metric == SIEVE_METRIC_EUCLID) rc = sieve_dev_matrix_update_norms(dm);
            }
            if (rc) {
                fprintf(stderr, "sieve-bench: cannot build %llu x %u %s matrix: %s\n",
                        (unsigned long long)n, o.dim, sieve_dtype_name(dt), sieve_strerror(rc));
                sieve_dev_matrix_destroy(dm);
                failures++;
                continue;
            }
            sieve_matrix prefix = *sieve_dev_matrix_view(filem ? filem : dm);
            prefix.n_rows = n; /* a prefix of the file's rows (the page table stays valid) */
            const sieve_matrix *m = &prefix;
            for (int bi = 0; bi < o.n_batches; bi++) {
                uint32_t B = o.batches[bi];
                float *q = NULL;
                if (file_queries) {
                    q = malloc((size_t)B * o.dim * sizeof *q);
                    if (q) memcpy(q, file_queries, (size_t)B * o.dim * sizeof *q);
                } else {
                    q = make_queries(host, B, o.dim, o.pattern, o.seed + B);
                }
                if (q && o.pinned_results) { /* the queries page-locked too */
                    float *pq = res_alloc(dev, 1, (size_t)B * o.dim * sizeof *q);
                    if (pq) memcpy(pq, q, (size_t)B * o.dim * sizeof *q);
                    free(q);
                    q = pq;
                }
                if (!q) {
                    fprintf(stderr, "sieve-bench: out of memory for %u queries\n", B);
                    failures++;
                    continue;
                }
                for (int ki = 0; ki < o.n_ks; ki++) {
                    uint32_t k = o.ks[ki];
                    if (k > n) continue;
                    sieve_search_params p;
                    sieve_search_params_init(&p, o.metric, k);
                    p.sample_rows = o.sample_rows;
                    size_t nr = (size_t)B * k;
                    int64_t *rows = res_alloc(dev, o.pinned_results, nr * 8);
                    int64_t *mrows = res_alloc(dev, o.pinned_results, nr * 8);
                    float *sc = res_alloc(dev, o.pinned_results, nr * 4);
                    float *msc = res_alloc(dev, o.pinned_results, nr * 4);
                    uint32_t *cnt = res_alloc(dev, o.pinned_results, (size_t)B * 4);
                    uint32_t *mcnt = res_alloc(dev, o.pinned_results, (size_t)B * 4);
                    size_t sb = 0;
                    void *scratch = NULL;
                    rc = (rows && mrows && sc && msc && cnt && mcnt) ? 0 : SIEVE_ENOMEM;
                    if (!rc) rc = sieve_knn_scratch_size(dev, m, B, &p, &sb);
                    if (!rc) rc = sieve_device_alloc(dev, sb, &scratch);
                    sieve_search_stats st;
                    memset(&st, 0, sizeof st);
                    double *t = calloc((size_t)o.repeat + (size_t)o.mat_repeat, sizeof *t);
                    for (int r = 0; !rc && r < o.warmup; r++)
                        rc = sieve_knn(dev, m, q, B, &p, scratch, sb, rows, sc, cnt, NULL, &st);
                    for (int r = 0; !rc && r < o.repeat; r++) {
                        double t0 = bench_now_ms();
                        rc = sieve_knn(dev, m, q, B, &p, scratch, sb, rows, sc, cnt, NULL, &st);
                        t[r] = bench_now_ms() - t0;
                    }
                    double fused = rc ? NAN : bench_median(t, o.repeat);
                    double mat = NAN;
                    const char *exact = "-";
                    if (!rc && o.materialized) {
                        for (int r = 0; !rc && r < o.mat_repeat; r++) {
                            double t0 = bench_now_ms();
                            rc = sieve_knn_materialized(dev, m, q, B, &p, mrows, msc, mcnt, NULL);
                            t[r] = bench_now_ms() - t0;
                        }
                        if (!rc) mat = bench_median(t, o.mat_repeat);
                        if (!rc && o.validate) {
                            size_t bad = 0;
                            for (size_t i = 0; i < nr; i++)
                                if (rows[i] != mrows[i] || memcmp(&sc[i], &msc[i], 4)) bad++;
                            for (uint32_t i = 0; i < B; i++)
                                if (cnt[i] != mcnt[i]) bad++;
                            exact = bad ? "MISMATCH" : "yes";
                            if (bad) {
                                failures++;
                                for (size_t i = 0, shown = 0; i < nr && shown < 5; i++)
                                    if (rows[i] != mrows[i] || memcmp(&sc[i], &msc[i], 4)) {
                                        fprintf(stderr,
                                                "  mismatch q=%zu i=%zu: fused (%lld, %.9g) "
                                                "materialized (%lld, %.9g)\n",
                                                i / k, i % k, (long long)rows[i], sc[i],
                                                (long long)mrows[i], msc[i]);
                                        shown++;
                                    }
                            }
                        }
                    }
                    if (rc) {
                        fprintf(stderr, "sieve-bench: N=%llu B=%u k=%u failed: %s\n",
                                (unsigned long long)n, B, k, sieve_strerror(rc));
                        failures++;
                    }
                    double bytes = (double)n * o.dim * (double)sieve_dtype_size(dt);
                    double flops = 2.0 * B * (double)n * o.dim;
                    double floor_ms = fmax(bytes / (o.bw_gbs * 1e9), flops / (tflops_for(&o, dt) * 1e12)) * 1e3;
                    if (info.kind == SIEVE_DEVICE_CPU) floor_ms = NAN;
                    printf("%-9llu %-8s %5u %6u %10.3f %10.3f %9.3f %6.0f%% %10.0f %8s "
                           "%llu/%llu/%llu/%llu/%llu %.3f/%.3f/%.3f(%.3f)\n",
                           (unsigned long long)n, sieve_dtype_name(dt), B, k, fused, mat, floor_ms,
                           100.0 * floor_ms / fused, (double)st.candidates_admitted / B, exact,
                           (unsigned long long)st.path_count[0], (unsigned long long)st.path_count[1],
                           (unsigned long long)st.path_count[2], (unsigned long long)st.path_count[3],
                           (unsigned long long)st.path_count[4], st.ms_sample, st.ms_scan,
                           st.ms_select, st.ms_download);
                    fflush(stdout);
                    char jf[32], jm[32], jl[32];
                    if (js)
                        fprintf(js,
                                "{\"mode\":\"knn\",\"device\":\"%s\",\"n\":%llu,\"dim\":%u,"
                                "\"dtype\":\"%s\",\"metric\":\"%s\",\"data\":\"%s\",\"results\":\"%s\",\"sample_rows\":%u,\"batch\":%u,"
                                "\"k\":%u,\"fused_ms\":%s,\"materialized_ms\":%s,"
                                "\"floor_ms\":%s,\"exact\":\"%s\",\"admitted_per_query\":%.1f,"
                                "\"sample_ms\":%.4f,\"scan_ms\":%.4f,\"select_ms\":%.4f,\"download_ms\":%.4f,"
                                "\"paths\":[%llu,%llu,%llu,%llu,%llu],\"select_segmented\":%llu,"
                                "\"select_speculated\":%llu,\"speculation_missed\":%llu,"
                                "\"launches_chained\":%llu}\n",
                                info.name, (unsigned long long)n, o.dim, sieve_dtype_name(dt),
                                sieve_metric_name(o.metric), data_label,
                                o.pinned_results ? "pinned" : "pageable", o.sample_rows, B, k,
                                bench_jnum(jf, fused), bench_jnum(jm, mat), bench_jnum(jl, floor_ms), exact,
                                (double)st.candidates_admitted / B,
                                st.ms_sample, st.ms_scan, st.ms_select, st.ms_download,
                                (unsigned long long)st.path_count[0], (unsigned long long)st.path_count[1],
                                (unsigned long long)st.path_count[2], (unsigned long long)st.path_count[3],
                                (unsigned long long)st.path_count[4],
                                (unsigned long long)st.select_segmented,
                                (unsigned long long)st.select_speculated,
                                (unsigned long long)st.speculation_missed,
                                (unsigned long long)st.launches_chained);
                    free(t);
                    sieve_device_free(dev, scratch);
                    res_free(dev, o.pinned_results, rows);
                    res_free(dev, o.pinned_results, mrows);
                    res_free(dev, o.pinned_results, sc);
                    res_free(dev, o.pinned_results, msc);
                    res_free(dev, o.pinned_results, cnt);
                    res_free(dev, o.pinned_results, mcnt);
                    rc = 0;
                }
                res_free(dev, o.pinned_results, q);
            }
            sieve_dev_matrix_destroy(dm);
        }
        sieve_dev_matrix_destroy(filem);
    }
    free(file_queries);
    if (js) fclose(js);
    sieve_device_close(host);
    sieve_device_close(dev);
    if (failures) fprintf(stderr, "sieve-bench knn: %d failures\n", failures);
    return failures ? 1 : 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: sieve-bench MODE [options]\n"
            "\n"
            "modes:\n"
            "  knn        fused exact k-NN vs the materialized path (see sieve-bench knn --help)\n"
            "  attention  the sparse-attention kernels: the fused indexer top-k vs its\n"
            "             materialize-then-select path (see sieve-bench attention --help);\n"
            "             `attention sparse`: grouped vs per-query sparse attention;\n"
            "             `attention dense`: dense causal attention (the baseline);\n"
            "             `attention prefill`: block-sparse prefill with mean correction\n");
}

int main(int argc, char **argv) {
    sieve_cpu_blas_fixup(argv);
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "knn")) return run_knn(argc - 2, argv + 2);
    if (!strcmp(argv[1], "attention")) return sieve_bench_attention(argc - 2, argv + 2);
    fprintf(stderr, "sieve-bench: unknown mode '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}

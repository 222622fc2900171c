/* bench_attention.c: sieve-bench's `attention` mode.
 *
 * Owns: timing the indexer top-k of the kernel module on synthetic data held on
 * the device: the fused indexer top-k (sieve_indexer_topk) against its materialize-then-select
 * path, with the bit-exactness check between them, the floor (the indexer's matrix FLOPs at
 * the dtype's rate, or its bytes at --bw), the recovery-path counts, a table and JSON lines.
 * Grouped sparse attention and dense causal attention have their own files
 * (bench_sparse_attn.c, bench_dense_attn.c), reached as `attention sparse` and `attention
 * dense`, and block-sparse prefill too (bench_bsp.c, `attention prefill`). Must not: touch
 * the store or the server.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "sieve_kernels.h"

typedef struct attn_opts {
    const char *device;
    sieve_dtype dtype;
    uint32_t heads, head_dim;
    uint32_t keys[MAXLIST], queries[MAXLIST], ks[MAXLIST];
    int n_keys, n_queries, n_ks;
    int causal;
    int repeat, warmup, mat_repeat, materialized;
    double bw_gbs, tflops;
    uint32_t sample_keys;
    uint64_t seed;
    const char *json;
    int shape_given; /* --keys, --queries or --k on the command line */
} attn_opts;

static void attn_usage(FILE *f) {
    fprintf(f,
            "usage: sieve-bench attention [indexer] [options]\n"
            "       sieve-bench attention sparse [options]   (grouped sparse attention; see\n"
            "                                                  sieve-bench attention sparse --help)\n"
            "       sieve-bench attention dense [options]    (dense causal attention; see\n"
            "                                                  sieve-bench attention dense --help)\n"
            "       sieve-bench attention prefill [options]  (block-sparse prefill with mean\n"
            "                                                  correction against dense; see\n"
            "                                                  sieve-bench attention prefill --help)\n"
            "\n"
            "Times the fused indexer top-k of DeepSeek-style sparse attention,\n"
            "    I[t,s] = sum_h w[t,h] * relu(q[t,h] . key[s]),  the k best keys per query,\n"
            "against the in-house materialize-then-select path (the whole T x L score matrix\n"
            "written, then a radix select per row), checks both give the same answer bit for\n"
            "bit, and reports the floor: the larger of the matrix FLOPs (2 H D per visible\n"
            "(query, key) pair) at --tflops and the bytes of q, keys and w read once at --bw.\n"
            "Query t sits at position L - T + t (the last T tokens of the sequence).\n"
            "\n"
            "options (lists are comma separated; sizes take k = 1024 and m = 1048576):\n"
            "  --device SPEC      auto | cpu | cpu:T | cuda:N           (default auto)\n"
            "  --dtype T          bfloat16 | float16 (| float32 on the CPU) (default bfloat16)\n"
            "  --heads H          indexer heads (CUDA: at most 64)      (default 64)\n"
            "  --head-dim D       head dimension (CUDA: multiple of 8)  (default 128)\n"
            "  --keys LIST        keys L                                (default 128k)\n"
            "  --queries LIST     query tokens T (1-128: decode)        (default 2048)\n"
            "  --k LIST           keys kept per query                   (default 2048)\n"
            "                     (on the CPU device the defaults are 16k, 16 and 256)\n"
            "  --no-causal        every query sees every key\n"
            "  --repeat R         timed fused calls (median)            (default 10)\n"
            "  --warmup W         untimed calls first                   (default 2)\n"
            "  --mat-repeat R     timed materialized calls              (default 3)\n"
            "  --no-materialized  skip the materialized path and the exactness check\n"
            "  --sample-keys S    keys in the strided sample (default: the library's)\n"
            "  --tflops T         matrix rate for the floor             (default 730 bf16,\n"
            "                     708 float16, 50.6 float32: the H200's measured GEMM)\n"
            "  --bw GBS           memory bandwidth for the floor        (default 4250)\n"
            "  --seed S           data seed                             (default 1)\n"
            "  --json FILE        also append one JSON object per shape to FILE\n"
            "  -h, --help         this help\n");
}

static int attn_parse(int argc, char **argv, attn_opts *o) {
    memset(o, 0, sizeof *o);
    o->device = "auto";
    o->dtype = SIEVE_DTYPE_BF16;
    o->heads = 64;
    o->head_dim = 128;
    o->keys[0] = 131072;
    o->n_keys = 1;
    o->queries[0] = 2048;
    o->n_queries = 1;
    o->ks[0] = 2048;
    o->n_ks = 1;
    o->causal = 1;
    o->repeat = 10;
    o->warmup = 2;
    o->mat_repeat = 3;
    o->materialized = 1;
    o->bw_gbs = 4250;
    o->tflops = 0;
    o->seed = 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            attn_usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--no-causal")) {
            o->causal = 0;
            continue;
        } else if (!strcmp(a, "--no-materialized")) {
            o->materialized = 0;
            continue;
        }
        if (!v) {
            fprintf(stderr, "sieve-bench attention: %s needs a value (see --help)\n", a);
            return -1;
        }
        i++;
        errno = 0;
        if (!strcmp(a, "--device")) o->device = v;
        else if (!strcmp(a, "--dtype")) {
            if (sieve_dtype_parse(v, &o->dtype)) goto bad;
        } else if (!strcmp(a, "--heads")) {
            o->heads = (uint32_t)strtoul(v, &end, 10);
            if (*end || !o->heads || *v == '-') goto bad;
        } else if (!strcmp(a, "--head-dim")) {
            o->head_dim = (uint32_t)strtoul(v, &end, 10);
            if (*end || !o->head_dim || *v == '-') goto bad;
        } else if (!strcmp(a, "--keys")) {
            if ((o->n_keys = bench_parse_sizes_pow2(v, o->keys, MAXLIST)) <= 0) goto bad;
            o->shape_given = 1;
        } else if (!strcmp(a, "--queries")) {
            if ((o->n_queries = bench_parse_sizes_pow2(v, o->queries, MAXLIST)) <= 0) goto bad;
            o->shape_given = 1;
        } else if (!strcmp(a, "--k")) {
            if ((o->n_ks = bench_parse_sizes_pow2(v, o->ks, MAXLIST)) <= 0) goto bad;
            o->shape_given = 1;
        } else if (!strcmp(a, "--repeat")) {
            o->repeat = (int)strtol(v, &end, 10);
            if (*end || o->repeat < 1) goto bad;
        } else if (!strcmp(a, "--warmup")) {
            o->warmup = (int)strtol(v, &end, 10);
            if (*end || o->warmup < 0) goto bad;
        } else if (!strcmp(a, "--mat-repeat")) {
            o->mat_repeat = (int)strtol(v, &end, 10);
            if (*end || o->mat_repeat < 1) goto bad;
        } else if (!strcmp(a, "--sample-keys")) {
            o->sample_keys = (uint32_t)strtoul(v, &end, 10);
            if (*end || *v == '-') goto bad;
        } else if (!strcmp(a, "--tflops")) {
            o->tflops = strtod(v, &end);
            if (*end || !(o->tflops > 0)) goto bad;
        } else if (!strcmp(a, "--bw")) {
            o->bw_gbs = strtod(v, &end);
            if (*end || !(o->bw_gbs > 0)) goto bad;
        } else if (!strcmp(a, "--seed")) {
            o->seed = strtoull(v, &end, 10);
            if (*end) goto bad;
        } else if (!strcmp(a, "--json")) o->json = v;
        else {
            fprintf(stderr, "sieve-bench attention: unknown option %s (see --help)\n", a);
            return -1;
        }
        if (errno) goto bad;
        continue;
    bad:
        fprintf(stderr, "sieve-bench attention: bad value '%s' for %s (see --help)\n", v, a);
        return -1;
    }
    if (o->tflops == 0)
        o->tflops = o->dtype == SIEVE_DTYPE_BF16 ? 730 : o->dtype == SIEVE_DTYPE_F16 ? 708 : 50.6;
    return 0;
}

/* One shape: 0, or 1 when it failed (printed). */
static int run_shape(const attn_opts *o, sieve_device *dev, const sieve_device_info *info,
                     FILE *js, uint32_t T, uint32_t L, uint32_t k) {
    const uint32_t H = o->heads, D = o->head_dim;
    const size_t es = sieve_dtype_size(o->dtype);
    const size_t nq = (size_t)T * H * D, nk = (size_t)L * D, nw = (size_t)T * H;
    const size_t no = (size_t)T * k;
    void *q = NULL, *keys = NULL, *w = NULL, *i1 = NULL, *s1 = NULL, *c1 = NULL, *i2 = NULL,
         *s2 = NULL, *c2 = NULL, *scratch = NULL;
    double *t = calloc((size_t)(o->repeat > o->mat_repeat ? o->repeat : o->mat_repeat), 8);
    int32_t *hi1 = NULL, *hi2 = NULL;
    float *hs1 = NULL, *hs2 = NULL;
    uint32_t *hc1 = NULL, *hc2 = NULL;
    const char *exact = "-";
    double fused = NAN, mat = NAN;
    sieve_indexer_stats st, mst;
    memset(&st, 0, sizeof st);
    memset(&mst, 0, sizeof mst);
    sieve_indexer_params p;
    sieve_indexer_params_init(&p, o->dtype, T, H, D, L, k);
    p.causal = o->causal;
    p.pos0 = o->causal ? L - T : 0;
    p.seed = o->seed;
    p.sample_keys = o->sample_keys;
    size_t sb = 0;
    int rc = t ? 0 : SIEVE_ENOMEM;
    if (!rc) rc = sieve_indexer_scratch_size(dev, &p, &sb);
    if (!rc) rc = sieve_device_alloc(dev, nq * es, &q);
    if (!rc) rc = sieve_device_alloc(dev, nk * es, &keys);
    if (!rc) rc = sieve_device_alloc(dev, nw * 4, &w);
    if (!rc) rc = sieve_device_alloc(dev, no * 4, &i1);
    if (!rc) rc = sieve_device_alloc(dev, no * 4, &s1);
    if (!rc) rc = sieve_device_alloc(dev, (size_t)T * 4, &c1);
    if (!rc && o->materialized) rc = sieve_device_alloc(dev, no * 4, &i2);
    if (!rc && o->materialized) rc = sieve_device_alloc(dev, no * 4, &s2);
    if (!rc && o->materialized) rc = sieve_device_alloc(dev, (size_t)T * 4, &c2);
    if (!rc && sb) rc = sieve_device_alloc(dev, sb, &scratch);
    if (!rc) rc = sieve_device_fill_normal(dev, q, o->dtype, nq, o->seed * 3 + 1, 1.0f);
    if (!rc) rc = sieve_device_fill_rows(dev, keys, o->dtype, L, D, SIEVE_PATTERN_NORMAL, o->seed);
    if (!rc) rc = sieve_device_fill_normal(dev, w, SIEVE_DTYPE_F32, nw, o->seed * 3 + 2,
                                           1.0f / sqrtf((float)H));
    for (int r = 0; !rc && r < o->warmup; r++)
        rc = sieve_indexer_topk(dev, &p, q, keys, w, scratch, sb, i1, s1, c1, &st);
    for (int r = 0; !rc && r < o->repeat; r++) {
        const double t0 = bench_now_ms();
        rc = sieve_indexer_topk(dev, &p, q, keys, w, scratch, sb, i1, s1, c1, &st);
        t[r] = bench_now_ms() - t0;
    }
    if (!rc) fused = bench_median(t, o->repeat);
    if (!rc && o->materialized) {
        rc = sieve_indexer_topk_materialized(dev, &p, q, keys, w, i2, s2, c2, &mst); /* warm */
        for (int r = 0; !rc && r < o->mat_repeat; r++) {
            const double t0 = bench_now_ms();
            rc = sieve_indexer_topk_materialized(dev, &p, q, keys, w, i2, s2, c2, &mst);
            t[r] = bench_now_ms() - t0;
        }
        if (!rc) mat = bench_median(t, o->mat_repeat);
        hi1 = malloc(no * 4);
        hi2 = malloc(no * 4);
        hs1 = malloc(no * 4);
        hs2 = malloc(no * 4);
        hc1 = malloc((size_t)T * 4);
        hc2 = malloc((size_t)T * 4);
        if (!rc && !(hi1 && hi2 && hs1 && hs2 && hc1 && hc2)) rc = SIEVE_ENOMEM;
        if (!rc) rc = sieve_device_download(dev, hi1, i1, no * 4);
        if (!rc) rc = sieve_device_download(dev, hi2, i2, no * 4);
        if (!rc) rc = sieve_device_download(dev, hs1, s1, no * 4);
        if (!rc) rc = sieve_device_download(dev, hs2, s2, no * 4);
        if (!rc) rc = sieve_device_download(dev, hc1, c1, (size_t)T * 4);
        if (!rc) rc = sieve_device_download(dev, hc2, c2, (size_t)T * 4);
        if (!rc) {
            size_t bad = 0;
            for (size_t i = 0; i < no; i++)
                if (hi1[i] != hi2[i] || memcmp(&hs1[i], &hs2[i], 4)) {
                    if (bad < 5)
                        fprintf(stderr, "  mismatch query %zu rank %zu: fused (%d, %.9g) "
                                        "materialized (%d, %.9g)\n",
                                i / k, i % k, hi1[i], hs1[i], hi2[i], hs2[i]);
                    bad++;
                }
            for (uint32_t i = 0; i < T; i++) bad += hc1[i] != hc2[i];
            exact = bad ? "MISMATCH" : "yes";
        }
    }
    /* the floor: every visible (query, key) pair's 2 H D FLOPs, or the inputs read once */
    double pairs = 0;
    for (uint32_t i = 0; i < T; i++) pairs += o->causal ? fmin((double)L, (double)(L - T) + i + 1) : L;
    const double flops = 2.0 * H * D * pairs;
    const double bytes = (double)(nq + nk) * es + nw * 4.0;
    double floor_ms = fmax(flops / (o->tflops * 1e12), bytes / (o->bw_gbs * 1e9)) * 1e3;
    if (info->kind == SIEVE_DEVICE_CPU) floor_ms = NAN;
    if (rc) fprintf(stderr, "sieve-bench attention: T=%u L=%u k=%u failed: %s\n", T, L, k,
                    sieve_strerror(rc));
    printf("%7u %8u %6u %10.3f %10.3f %7.2fx %9.3f %6.0f%% %9.0f %8s %llu/%llu/%llu/%llu/%llu "
           "%.3f/%.3f/%.3f/%.3f\n",
           T, L, k, fused, mat, mat / fused, floor_ms, 100.0 * floor_ms / fused,
           (double)st.candidates_admitted / T, exact, (unsigned long long)st.path_count[0],
           (unsigned long long)st.path_count[1], (unsigned long long)st.path_count[2],
           (unsigned long long)st.path_count[3], (unsigned long long)st.path_count[4],
           st.ms_sample, st.ms_scan, st.ms_select, st.ms_recover);
    fflush(stdout);
    if (js) {
        char jf[32], jm[32], jl[32];
        fprintf(js,
                "{\"mode\":\"attention\",\"kernel\":\"indexer\",\"device\":\"%s\",\"dtype\":\"%s\","
                "\"T\":%u,\"H\":%u,\"D\":%u,\"L\":%u,\"k\":%u,\"causal\":%d,\"fused_ms\":%s,"
                "\"materialized_ms\":%s,\"floor_ms\":%s,\"exact\":\"%s\","
                "\"admitted_per_query\":%.1f,\"sample_ms\":%.4f,\"scan_ms\":%.4f,"
                "\"select_ms\":%.4f,\"recover_ms\":%.4f,\"paths\":[%llu,%llu,%llu,%llu,%llu],"
                "\"repeat\":%d}\n",
                info->name, sieve_dtype_name(o->dtype), T, H, D, L, k, o->causal,
                bench_jnum(jf, fused), bench_jnum(jm, mat), bench_jnum(jl, floor_ms), exact,
                (double)st.candidates_admitted / T, st.ms_sample, st.ms_scan, st.ms_select,
                st.ms_recover, (unsigned long long)st.path_count[0],
                (unsigned long long)st.path_count[1], (unsigned long long)st.path_count[2],
                (unsigned long long)st.path_count[3], (unsigned long long)st.path_count[4],
                o->repeat);
        fflush(js);
    }
    void *dptr[] = {q, keys, w, i1, s1, c1, i2, s2, c2, scratch};
    for (size_t i = 0; i < sizeof dptr / sizeof *dptr; i++)
        if (dptr[i]) sieve_device_free(dev, dptr[i]);
    free(hi1);
    free(hi2);
    free(hs1);
    free(hs2);
    free(hc1);
    free(hc2);
    free(t);
    return rc || !strcmp(exact, "MISMATCH");
}

int sieve_bench_attention(int argc, char **argv) {
    /* `attention sparse ...` is grouped sparse attention; `attention [indexer] ...` this */
    if (argc > 0 && !strcmp(argv[0], "sparse"))
        return sieve_bench_sparse_attention(argc - 1, argv + 1);
    if (argc > 0 && !strcmp(argv[0], "dense"))
        return sieve_bench_dense_attention(argc - 1, argv + 1);
    if (argc > 0 && !strcmp(argv[0], "prefill"))
        return sieve_bench_prefill_attention(argc - 1, argv + 1);
    if (argc > 0 && !strcmp(argv[0], "indexer")) {
        argc--;
        argv++;
    }
    attn_opts o;
    if (attn_parse(argc, argv, &o)) return 2;
    sieve_device *dev = NULL;
    int rc = sieve_device_open(o.device, &dev);
    if (rc) {
        fprintf(stderr, "sieve-bench attention: cannot open device '%s': %s\n", o.device,
                sieve_strerror(rc));
        return 1;
    }
    sieve_device_info info;
    sieve_device_get_info(dev, &info);
    if (info.kind == SIEVE_DEVICE_CPU && !o.shape_given) {
        /* the GPU's default shape is about 2 TFLOP: hours on a CPU */
        o.keys[0] = 16384;
        o.queries[0] = 16;
        o.ks[0] = 256;
        printf("# the CPU device: a smaller default shape (L 16384, T 16, k 256); --keys, "
               "--queries and --k choose others\n");
    }
    FILE *js = NULL;
    if (o.json && !(js = fopen(o.json, "a"))) {
        fprintf(stderr, "sieve-bench attention: cannot open %s: %s\n", o.json, strerror(errno));
        sieve_device_close(dev);
        return 1;
    }
    printf("# sieve-bench attention (indexer top-k) on %s; %s, H %u, D %u, %s, %d timed calls "
           "(median)\n",
           info.name, sieve_dtype_name(o.dtype), o.heads, o.head_dim,
           o.causal ? "causal (queries are the last T tokens)" : "not causal", o.repeat);
    printf("# floor = max(2 H D x visible pairs / %.0f TFLOP/s, inputs / %.0f GB/s); times are "
           "whole calls\n",
           o.tflops, o.bw_gbs);
    printf("%7s %8s %6s %10s %10s %8s %9s %7s %9s %8s %-16s %s\n", "T", "L", "k", "fused_ms",
           "mat_ms", "mat/fus", "floor_ms", "%floor", "admit/q", "exact", "paths(c/u/o/f/d)",
           "sample/scan/select/recover_ms");
    int failures = 0;
    const int total = o.n_keys * o.n_queries * o.n_ks;
    int done = 0;
    for (int li = 0; li < o.n_keys; li++)
        for (int ti = 0; ti < o.n_queries; ti++)
            for (int ki = 0; ki < o.n_ks; ki++) {
                const uint32_t L = o.keys[li], T = o.queries[ti], k = o.ks[ki];
                done++;
                if ((o.causal && T > L) || k > L) { /* causal: the queries are the last T keys */
                    fprintf(stderr, "sieve-bench attention: T=%u k=%u past L=%u, skipped\n", T,
                            k, L);
                    continue;
                }
                failures += run_shape(&o, dev, &info, js, T, L, k);
                if (isatty(2))
                    fprintf(stderr, "\r[%d/%d shapes]%s", done, total, done == total ? "\n" : "");
            }
    if (js) fclose(js);
    sieve_device_close(dev);
    if (failures) fprintf(stderr, "sieve-bench attention: %d failures\n", failures);
    return failures ? 1 : 0;
}

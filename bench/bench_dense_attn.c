/* bench_dense_attn.c: sieve-bench's `attention dense` mode.
 *
 * Owns: timing the in-house dense causal attention (sieve_causal_attention), the baseline and
 * reference of the sparse-attention kernels, on synthetic prefills held on the device: the
 * whole call and the device time, TFLOP/s, the floor (the causal FLOPs at --tflops), a check
 * of sampled tokens against the float64 reference, a table and JSON lines (torch's flash and
 * cuDNN backends are timed by bench/torch_attention.py dense in the same stage).
 * Must not: touch the store or the server.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_attn_opts.h"
#include "bench_util.h"
#include "sieve_kernels.h"

typedef struct da_opts {
    bench_attn_opts c; /* the options the attention modes share */
    uint32_t seqs[MAXLIST];
    int n_seqs;
    double tflops;
    int shape_given;
} da_opts;

static void da_usage(FILE *f) {
    fprintf(f,
            "usage: sieve-bench attention dense [options]\n"
            "\n"
            "Times the in-house dense causal attention (every token attends every key at or\n"
            "before it; grouped-query heads), the baseline and reference of the sparse kernels,\n"
            "on prefills of each length, with the floor: the causal FLOPs (2 (head_dim + v_dim)\n"
            "per (query head, visible key) pair) at --tflops. --check-tokens tokens are checked\n"
            "against the float64 reference (each output within the rounding bound, and the\n"
            "rows' relative L2 error at most 0.05). torch's flash and cuDNN attention on the same\n"
            "shapes: bench/torch_attention.py dense.\n"
            "\n"
            "options (lists are comma separated; sizes take k = 1024 and m = 1048576):\n"
            "  --device SPEC      auto | cpu | cpu:T | cuda:N           (default auto)\n"
            "  --dtype T          bfloat16 | float16 (| float32 on the CPU) (default bfloat16)\n"
            "  --q-heads H        query heads                           (default 32)\n"
            "  --kv-heads H       key/value heads                       (default 8)\n"
            "  --head-dim D       of q and keys (CUDA: 64 or 128)       (default 128)\n"
            "  --v-dim D          of values (CUDA: 64 or 128)           (default 128)\n"
            "  --seq LIST         prefill lengths                       (default 8k,32k)\n"
            "                     (on the CPU device the default is 1k)\n"
            "  --repeat R         timed calls (median)                  (default 5)\n"
            "  --warmup W         untimed calls first                   (default 1)\n"
            "  --check-tokens N   tokens checked against float64        (default 4)\n"
            "  --tflops T         matrix rate for the floor             (default 730 bf16,\n"
            "                     708 float16, 50.6 float32: the H200's measured GEMM)\n"
            "  --seed S           data seed                             (default 1)\n"
            "  --json FILE        also append one JSON object per shape to FILE\n"
            "  -h, --help         this help\n");
}

static int da_parse(int argc, char **argv, da_opts *o) {
    memset(o, 0, sizeof *o);
    o->c.device = "auto";
    o->c.dtype = SIEVE_DTYPE_BF16;
    o->c.q_heads = 32;
    o->c.kv_heads = 8;
    o->c.head_dim = 128;
    o->c.v_dim = 128;
    o->seqs[0] = 8192;
    o->seqs[1] = 32768;
    o->n_seqs = 2;
    o->c.repeat = 5;
    o->c.warmup = 1;
    o->c.check_tokens = 4;
    o->c.seed = 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            da_usage(stdout);
            exit(0);
        }
        if (!v) {
            fprintf(stderr, "sieve-bench attention dense: %s needs a value (see --help)\n", a);
            return -1;
        }
        i++;
        errno = 0;
        const int shared = bench_attn_opt(&o->c, a, v);
        if (shared < 0) goto bad;
        if (shared) continue;
        if (!strcmp(a, "--seq")) {
            if ((o->n_seqs = bench_parse_sizes_pow2(v, o->seqs, MAXLIST)) <= 0) goto bad;
            o->shape_given = 1;
        } else if (!strcmp(a, "--tflops")) {
            o->tflops = strtod(v, &end);
            if (*end || !(o->tflops > 0)) goto bad;
        } else {
            fprintf(stderr, "sieve-bench attention dense: unknown option %s (see --help)\n", a);
            return -1;
        }
        if (errno) goto bad;
        continue;
    bad:
        fprintf(stderr, "sieve-bench attention dense: bad value '%s' for %s (see --help)\n", v,
                a);
        return -1;
    }
    if (o->c.q_heads % o->c.kv_heads) {
        fprintf(stderr, "sieve-bench attention dense: --q-heads %u is not a multiple of "
                        "--kv-heads %u\n", o->c.q_heads, o->c.kv_heads);
        return -1;
    }
    if (o->tflops == 0)
        o->tflops = o->c.dtype == SIEVE_DTYPE_BF16 ? 730 : o->c.dtype == SIEVE_DTYPE_F16 ? 708 : 50.6;
    return 0;
}

/* One prefill of S tokens: 0, or 1 when it failed or a checked token was off. */
static int run_seq(const da_opts *o, sieve_device *dev, const sieve_device_info *info, FILE *js,
                   uint32_t S) {
    const uint32_t Hq = o->c.q_heads, Hkv = o->c.kv_heads, D = o->c.head_dim, DV = o->c.v_dim;
    const size_t es = sieve_dtype_size(o->c.dtype);
    const size_t nq = (size_t)S * Hq * D, nk = (size_t)S * Hkv * D, nv = (size_t)S * Hkv * DV;
    const size_t no = (size_t)S * Hq * DV, nl = (size_t)S * Hq;
    void *q = NULL, *keys = NULL, *vals = NULL, *out = NULL, *lse = NULL, *scratch = NULL;
    double *t = calloc((size_t)o->c.repeat, 8), *td = calloc((size_t)o->c.repeat, 8);
    double call = NAN, dev_ms = NAN, max_err = NAN, tol = NAN, rel = NAN;
    const char *ok = "-";
    sieve_attn_params p;
    sieve_attn_params_init(&p, o->c.dtype, S, Hq, Hkv, D, DV, S);
    size_t sb = 0;
    int rc = t && td ? 0 : SIEVE_ENOMEM;
    if (!rc) rc = sieve_causal_attn_scratch_size(dev, &p, &sb);
    if (!rc) rc = sieve_device_alloc(dev, nq * es, &q);
    if (!rc) rc = sieve_device_alloc(dev, nk * es, &keys);
    if (!rc) rc = sieve_device_alloc(dev, nv * es, &vals);
    if (!rc) rc = sieve_device_alloc(dev, no * 4, &out);
    if (!rc) rc = sieve_device_alloc(dev, nl * 4, &lse);
    if (!rc && sb) rc = sieve_device_alloc(dev, sb, &scratch);
    if (!rc) rc = sieve_device_fill_normal(dev, q, o->c.dtype, nq, o->c.seed * 7 + 1, 1.0f);
    if (!rc) rc = sieve_device_fill_normal(dev, keys, o->c.dtype, nk, o->c.seed * 7 + 2, 1.0f);
    if (!rc) rc = sieve_device_fill_normal(dev, vals, o->c.dtype, nv, o->c.seed * 7 + 3, 1.0f);
    for (int r = 0; !rc && r < o->c.warmup; r++)
        rc = sieve_causal_attention(dev, &p, q, keys, vals, scratch, sb, out, lse, NULL);
    for (int r = 0; !rc && r < o->c.repeat; r++) {
        const double t0 = bench_now_ms();
        rc = sieve_causal_attention(dev, &p, q, keys, vals, scratch, sb, out, lse, &td[r]);
        t[r] = bench_now_ms() - t0;
    }
    if (!rc) {
        call = bench_median(t, o->c.repeat);
        dev_ms = bench_median(td, o->c.repeat);
    }
    /* sampled tokens against float64: each a one-token problem at its position */
    const uint32_t nc = (uint32_t)o->c.check_tokens < S ? (uint32_t)o->c.check_tokens : S;
    if (!rc && nc) {
        void *hq = malloc((size_t)Hq * D * es), *hk = malloc(nk * es), *hv = malloc(nv * es);
        float *ho = malloc((size_t)Hq * DV * 4);
        double *ro = malloc((size_t)Hq * DV * 8);
        if (!hq || !hk || !hv || !ho || !ro) rc = SIEVE_ENOMEM;
        if (!rc) rc = sieve_device_download(dev, hk, keys, nk * es);
        if (!rc) rc = sieve_device_download(dev, hv, vals, nv * es);
        double vmax = 0.0;
        for (size_t i = 0; !rc && i < nv; i++) {
            float f;
            sieve_convert_to_f32(o->c.dtype, (const char *)hv + i * es, &f, 1);
            vmax = fmax(vmax, fabs(f));
        }
        const double u = o->c.dtype == SIEVE_DTYPE_BF16 ? 0x1p-9
                         : o->c.dtype == SIEVE_DTYPE_F16 ? 0x1p-11 : 0x1p-20;
        tol = (2.0 * u + 1e-3) * vmax;
        max_err = 0.0;
        double d2 = 0.0, r2 = 0.0; /* the relative L2 error of the checked rows */
        for (uint32_t c = 0; !rc && c < nc; c++) {
            const uint32_t tok = c + 1 == nc ? S - 1 : (uint32_t)(((uint64_t)c * 2654435761u) % S);
            rc = sieve_device_download(dev, hq, (const char *)q + (size_t)tok * Hq * D * es,
                                       (size_t)Hq * D * es);
            if (!rc) rc = sieve_device_download(dev, ho, (const float *)out + (size_t)tok * Hq * DV,
                                                (size_t)Hq * DV * 4);
            sieve_attn_params sp = p;
            sp.n_queries = 1;
            sp.pos0 = tok;
            if (!rc) rc = sieve_causal_attention_reference(&sp, hq, hk, hv, ro, NULL);
            for (size_t i = 0; !rc && i < (size_t)Hq * DV; i++) {
                max_err = fmax(max_err, fabs((double)ho[i] - ro[i]));
                d2 += ((double)ho[i] - ro[i]) * ((double)ho[i] - ro[i]);
                r2 += ro[i] * ro[i];
            }
        }
        /* each element within the rounding bound, and the rows as a whole close: at long
         * rows the outputs are small beside the element bound, so an output of zeros
         * would pass the first check alone (the probabilities' rounding errors are
         * independent: their relative L2 error is about 2^-9) */
        rel = r2 > 0.0 ? sqrt(d2 / r2) : sqrt(d2);
        if (!rc) ok = max_err <= tol && rel <= 0.05 ? "yes" : "OFF";
        free(hq);
        free(hk);
        free(hv);
        free(ho);
        free(ro);
    }
    const double pairs = (double)S * (S + 1) / 2.0 * Hq;
    const double flops = 2.0 * (D + DV) * pairs;
    const double floor_ms = info->kind == SIEVE_DEVICE_CPU ? NAN : flops / (o->tflops * 1e12) * 1e3;
    if (rc) fprintf(stderr, "sieve-bench attention dense: S=%u failed: %s\n", S,
                    sieve_strerror(rc));
    printf("%8u %10.3f %10.3f %8.0f %9.3f %6.0f%% %9.2e %4s\n", S, call, dev_ms,
           flops / (call * 1e9), floor_ms, 100.0 * floor_ms / call, max_err, ok);
    fflush(stdout);
    if (js) {
        char a[32], b[32], c[32], d[32], e[32];
        fprintf(js,
                "{\"mode\":\"attention\",\"kernel\":\"dense\",\"device\":\"%s\",\"dtype\":\"%s\","
                "\"T\":%u,\"L\":%u,\"Hq\":%u,\"Hkv\":%u,\"D\":%u,\"DV\":%u,\"causal\":1,"
                "\"ms\":%s,\"device_ms\":%s,\"tflops\":%.1f,\"floor_ms\":%s,\"max_err\":%s,"
                "\"rel_l2\":%s,"
                "\"ok\":\"%s\",\"repeat\":%d}\n",
                info->name, sieve_dtype_name(o->c.dtype), S, S, Hq, Hkv, D, DV, bench_jnum(a, call),
                bench_jnum(b, dev_ms), flops / (call * 1e9), bench_jnum(c, floor_ms),
                bench_jnum(d, max_err), bench_jnum(e, rel), ok, o->c.repeat);
        fflush(js);
    }
    void *dptr[] = {q, keys, vals, out, lse, scratch};
    for (size_t i = 0; i < sizeof dptr / sizeof *dptr; i++)
        if (dptr[i]) sieve_device_free(dev, dptr[i]);
    free(t);
    free(td);
    return rc || !strcmp(ok, "OFF");
}

int sieve_bench_dense_attention(int argc, char **argv) {
    da_opts o;
    if (da_parse(argc, argv, &o)) return 2;
    sieve_device *dev = NULL;
    int rc = sieve_device_open(o.c.device, &dev);
    if (rc) {
        fprintf(stderr, "sieve-bench attention dense: cannot open device '%s': %s\n", o.c.device,
                sieve_strerror(rc));
        return 1;
    }
    sieve_device_info info;
    sieve_device_get_info(dev, &info);
    if (info.kind == SIEVE_DEVICE_CPU && !o.shape_given) {
        o.seqs[0] = 1024;
        o.n_seqs = 1;
        printf("# the CPU device: a smaller default prefill (1k tokens); --seq chooses others\n");
    }
    FILE *js = NULL;
    if (o.c.json && !(js = fopen(o.c.json, "a"))) {
        fprintf(stderr, "sieve-bench attention dense: cannot open %s: %s\n", o.c.json,
                strerror(errno));
        sieve_device_close(dev);
        return 1;
    }
    printf("# sieve-bench attention dense (causal prefill) on %s; %s, q heads %u, kv heads %u, "
           "D %u, v_dim %u, %d timed calls (median)\n",
           info.name, sieve_dtype_name(o.c.dtype), o.c.q_heads, o.c.kv_heads, o.c.head_dim, o.c.v_dim,
           o.c.repeat);
    printf("# floor = 2 (D + v_dim) x (query head, visible key) pairs / %.0f TFLOP/s\n",
           o.tflops);
    printf("%8s %10s %10s %8s %9s %7s %9s %4s\n", "seq", "call_ms", "device_ms", "TFLOP/s",
           "floor_ms", "%floor", "max_err", "ok");
    int failures = 0;
    for (int i = 0; i < o.n_seqs; i++) {
        failures += run_seq(&o, dev, &info, js, o.seqs[i]);
        if (isatty(2))
            fprintf(stderr, "\r[%d/%d lengths]%s", i + 1, o.n_seqs, i + 1 == o.n_seqs ? "\n" : "");
    }
    if (js) fclose(js);
    sieve_device_close(dev);
    if (failures) fprintf(stderr, "sieve-bench attention dense: %d failures\n", failures);
    return failures ? 1 : 0;
}

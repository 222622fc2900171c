/* bench_sparse_attn.c: sieve-bench's `attention sparse` mode.
 *
 * Owns: timing grouped sparse attention (sieve_sparse_attention, LiteDSA) against per-query
 * sparse attention (the same call with group 1) on synthetic data held on the device, with
 * selected sets of a chosen overlap between neighbouring tokens; the check of the grouped
 * output against the per-query one and of both against the float64 reference on a sample
 * of tokens; the bytes each gathers; a table and JSON lines.
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

typedef struct sa_opts {
    bench_attn_opts c; /* the options the attention modes share */
    uint32_t keys[MAXLIST], queries[MAXLIST], ks[MAXLIST], groups[MAXLIST];
    int n_keys, n_queries, n_ks, n_groups;
    double shares[MAXLIST];
    int n_shares;
    double bw_gbs;
    int shape_given;
} sa_opts;

static void sa_usage(FILE *f) {
    fprintf(f,
            "usage: sieve-bench attention sparse [options]\n"
            "\n"
            "Times grouped sparse attention (LiteDSA: `group` neighbouring query tokens share\n"
            "the union of their selected keys, each keeping its own set by a membership mask)\n"
            "against per-query sparse attention (group 1: each token gathers its own keys),\n"
            "    out[t,h] = softmax over s in S_t of (q[t,h] . key[s,g] / sqrt(D)) . value[s,g]\n"
            "with grouped-query heads (g = h / (q-heads / kv-heads)). Token t sits at position\n"
            "L - T + t and selects k keys at or before it (causal): with probability --share\n"
            "an entry is one of its group's shared k, otherwise its own random key, so share 1\n"
            "is heavy overlap and 0 none. Both outputs are checked against each other and,\n"
            "on --check-tokens tokens, against the float64 reference (each output within the\n"
            "rounding bound, the rows' relative L2 error at most 0.05). perq_GB and grp_GB are\n"
            "the key and value bytes each call gathers from its lists (rows gathered twice\n"
            "counted twice; the L2 cache serves some), floor_ms every key and value row some\n"
            "token reads, q and idx read once and out written once, at --bw.\n"
            "\n"
            "options (lists are comma separated; sizes take k = 1024 and m = 1048576):\n"
            "  --device SPEC      auto | cpu | cpu:T | cuda:N           (default auto)\n"
            "  --dtype T          bfloat16 | float16 (| float32 on the CPU) (default bfloat16)\n"
            "  --q-heads H        query heads                           (default 32)\n"
            "  --kv-heads H       key/value heads                       (default 8)\n"
            "  --head-dim D       of q and keys (CUDA: 64 or 128)       (default 128)\n"
            "  --v-dim D          of values (CUDA: 64 or 128)           (default 128)\n"
            "  --keys LIST        keys L                                (default 128k)\n"
            "  --queries LIST     query tokens T                        (default 2048)\n"
            "  --k LIST           keys each token selects               (default 2048)\n"
            "  --group LIST       tokens sharing a list (1..32)         (default 16)\n"
            "  --share LIST       overlap, 0..1 (see above)             (default 0.9)\n"
            "                     (on the CPU device the defaults are L 8k, T 32, k 256)\n"
            "  --repeat R         timed calls of each (median)          (default 10)\n"
            "  --warmup W         untimed calls first                   (default 2)\n"
            "  --check-tokens N   tokens checked against float64        (default 8)\n"
            "  --bw GBS           memory bandwidth for the floor        (default 4250)\n"
            "  --seed S           data seed                             (default 1)\n"
            "  --json FILE        also append one JSON object per shape to FILE\n"
            "  -h, --help         this help\n");
}

static int parse_shares(const char *s, double *out, int max) {
    int n = 0;
    char *copy = strdup(s), *save = NULL;
    if (!copy) return -1;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *end = NULL;
        errno = 0;
        const double v = strtod(t, &end);
        if (*end || errno || !(v >= 0.0 && v <= 1.0) || n >= max) {
            free(copy);
            return -1;
        }
        out[n++] = v;
    }
    free(copy);
    return n;
}

static int sa_parse(int argc, char **argv, sa_opts *o) {
    memset(o, 0, sizeof *o);
    o->c.device = "auto";
    o->c.dtype = SIEVE_DTYPE_BF16;
    o->c.q_heads = 32;
    o->c.kv_heads = 8;
    o->c.head_dim = 128;
    o->c.v_dim = 128;
    o->keys[0] = 131072;
    o->n_keys = 1;
    o->queries[0] = 2048;
    o->n_queries = 1;
    o->ks[0] = 2048;
    o->n_ks = 1;
    o->groups[0] = 16;
    o->n_groups = 1;
    o->shares[0] = 0.9;
    o->n_shares = 1;
    o->c.repeat = 10;
    o->c.warmup = 2;
    o->c.check_tokens = 8;
    o->bw_gbs = 4250;
    o->c.seed = 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            sa_usage(stdout);
            exit(0);
        }
        if (!v) {
            fprintf(stderr, "sieve-bench attention sparse: %s needs a value (see --help)\n", a);
            return -1;
        }
        i++;
        errno = 0;
        const int shared = bench_attn_opt(&o->c, a, v);
        if (shared < 0) goto bad;
        if (shared) continue;
        if (!strcmp(a, "--keys")) {
            if ((o->n_keys = bench_parse_sizes_pow2(v, o->keys, MAXLIST)) <= 0) goto bad;
            o->shape_given = 1;
        } else if (!strcmp(a, "--queries")) {
            if ((o->n_queries = bench_parse_sizes_pow2(v, o->queries, MAXLIST)) <= 0) goto bad;
            o->shape_given = 1;
        } else if (!strcmp(a, "--k")) {
            if ((o->n_ks = bench_parse_sizes_pow2(v, o->ks, MAXLIST)) <= 0) goto bad;
            o->shape_given = 1;
        } else if (!strcmp(a, "--group")) {
            if ((o->n_groups = bench_parse_list_u32(v, o->groups, MAXLIST)) <= 0) goto bad;
            for (int g = 0; g < o->n_groups; g++)
                if (o->groups[g] < 1 || o->groups[g] > 32) goto bad;
        } else if (!strcmp(a, "--share")) {
            if ((o->n_shares = parse_shares(v, o->shares, MAXLIST)) <= 0) goto bad;
        } else if (!strcmp(a, "--bw")) {
            o->bw_gbs = strtod(v, &end);
            if (*end || !(o->bw_gbs > 0)) goto bad;
        } else {
            fprintf(stderr, "sieve-bench attention sparse: unknown option %s (see --help)\n", a);
            return -1;
        }
        if (errno) goto bad;
        continue;
    bad:
        fprintf(stderr, "sieve-bench attention sparse: bad value '%s' for %s (see --help)\n", v,
                a);
        return -1;
    }
    if (o->c.q_heads % o->c.kv_heads) {
        fprintf(stderr, "sieve-bench attention sparse: --q-heads %u is not a multiple of "
                        "--kv-heads %u\n", o->c.q_heads, o->c.kv_heads);
        return -1;
    }
    return 0;
}

/* SplitMix64 step: the bench's own generator for the selected sets. */
static uint64_t sa_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The selected sets: token t (position L - T + t) sees keys 0 .. L - T + t; its group's
 * shared list is k keys visible to the group's first token; each entry is the shared one
 * with probability share, else a random visible key of its own. */
static void make_sets(int32_t *idx, uint32_t T, uint32_t L, uint32_t k, uint32_t G,
                      double share, uint64_t seed) {
    uint64_t s = seed;
    int32_t *base = malloc((size_t)k * 4);
    if (!base) return;
    const uint64_t cut = (uint64_t)(share * 18446744073709551615.0);
    for (uint32_t t = 0; t < T; t++) {
        const uint32_t vis = L - T + t + 1;
        if (t % G == 0)
            for (uint32_t i = 0; i < k; i++) base[i] = (int32_t)(sa_next(&s) % vis);
        for (uint32_t i = 0; i < k; i++)
            idx[(size_t)t * k + i] = share >= 1.0 || sa_next(&s) < cut
                                         ? base[i]
                                         : (int32_t)(sa_next(&s) % vis);
    }
    free(base);
}

static double to_double(sieve_dtype dt, const void *a, size_t i) {
    float f;
    sieve_convert_to_f32(dt, (const char *)a + i * sieve_dtype_size(dt), &f, 1);
    return f;
}

/* One shape and share: 0, or 1 when it failed or an output was off (printed). */
static int run_shape(const sa_opts *o, sieve_device *dev, const sieve_device_info *info,
                     FILE *js, uint32_t T, uint32_t L, uint32_t k, uint32_t G, double share) {
    const uint32_t Hq = o->c.q_heads, Hkv = o->c.kv_heads, D = o->c.head_dim, DV = o->c.v_dim;
    const size_t es = sieve_dtype_size(o->c.dtype);
    const size_t nq = (size_t)T * Hq * D, nk = (size_t)L * Hkv * D, nv = (size_t)L * Hkv * DV;
    const size_t no = (size_t)T * Hq * DV, nl = (size_t)T * Hq, ni = (size_t)T * k;
    void *q = NULL, *keys = NULL, *vals = NULL, *didx = NULL, *o1 = NULL, *l1 = NULL,
         *o2 = NULL, *l2 = NULL, *scratch = NULL;
    double *t = calloc((size_t)o->c.repeat, 8);
    int32_t *idx = malloc(ni * 4);
    float *h1 = malloc(no * 4), *h2 = malloc(no * 4);
    double grouped = NAN, perq = NAN, max_gp = NAN, max_ref = NAN, tol = NAN;
    const char *ok = "-";
    sieve_sparse_attn_stats gs, ps;
    memset(&gs, 0, sizeof gs);
    memset(&ps, 0, sizeof ps);
    sieve_sparse_attn_params p;
    sieve_sparse_attn_params_init(&p, o->c.dtype, T, Hq, Hkv, D, DV, L, k);
    size_t sb = 0, sb1 = 0;
    int rc = t && idx && h1 && h2 ? 0 : SIEVE_ENOMEM;
    p.group = G;
    if (!rc) rc = sieve_sparse_attn_scratch_size(dev, &p, &sb);
    p.group = 1;
    if (!rc) rc = sieve_sparse_attn_scratch_size(dev, &p, &sb1);
    if (sb1 > sb) sb = sb1;
    if (!rc) rc = sieve_device_alloc(dev, nq * es, &q);
    if (!rc) rc = sieve_device_alloc(dev, nk * es, &keys);
    if (!rc) rc = sieve_device_alloc(dev, nv * es, &vals);
    if (!rc) rc = sieve_device_alloc(dev, ni * 4, &didx);
    if (!rc) rc = sieve_device_alloc(dev, no * 4, &o1);
    if (!rc) rc = sieve_device_alloc(dev, nl * 4, &l1);
    if (!rc) rc = sieve_device_alloc(dev, no * 4, &o2);
    if (!rc) rc = sieve_device_alloc(dev, nl * 4, &l2);
    if (!rc && sb) rc = sieve_device_alloc(dev, sb, &scratch);
    if (!rc) rc = sieve_device_fill_normal(dev, q, o->c.dtype, nq, o->c.seed * 5 + 1, 1.0f);
    if (!rc) rc = sieve_device_fill_normal(dev, keys, o->c.dtype, nk, o->c.seed * 5 + 2, 1.0f);
    if (!rc) rc = sieve_device_fill_normal(dev, vals, o->c.dtype, nv, o->c.seed * 5 + 3, 1.0f);
    if (!rc) {
        make_sets(idx, T, L, k, G, share, o->c.seed * 5 + 4);
        rc = sieve_device_upload(dev, didx, idx, ni * 4);
    }
    /* grouped, then per query; each median of repeat calls */
    for (int pass = 0; !rc && pass < 2; pass++) {
        p.group = pass == 0 ? G : 1;
        void *out = pass == 0 ? o1 : o2, *lse = pass == 0 ? l1 : l2;
        sieve_sparse_attn_stats *st = pass == 0 ? &gs : &ps;
        for (int r = 0; !rc && r < o->c.warmup; r++)
            rc = sieve_sparse_attention(dev, &p, q, keys, vals, didx, scratch, sb, out, lse, st);
        for (int r = 0; !rc && r < o->c.repeat; r++) {
            const double t0 = bench_now_ms();
            rc = sieve_sparse_attention(dev, &p, q, keys, vals, didx, scratch, sb, out, lse, st);
            t[r] = bench_now_ms() - t0;
        }
        if (!rc) *(pass == 0 ? &grouped : &perq) = bench_median(t, o->c.repeat);
    }
    /* grouped against per query: the probabilities' rounding bound of sieve_kernels.h
     * (values are N(0,1): the largest |value| read is taken over the whole array) */
    if (!rc) rc = sieve_device_download(dev, h1, o1, no * 4);
    if (!rc) rc = sieve_device_download(dev, h2, o2, no * 4);
    void *hq = NULL, *hk = NULL, *hv = NULL;
    if (!rc) {
        hq = malloc(nq * es);
        hk = malloc(nk * es);
        hv = malloc(nv * es);
        if (!hq || !hk || !hv) rc = SIEVE_ENOMEM;
    }
    if (!rc) rc = sieve_device_download(dev, hq, q, nq * es);
    if (!rc) rc = sieve_device_download(dev, hk, keys, nk * es);
    if (!rc) rc = sieve_device_download(dev, hv, vals, nv * es);
    if (!rc) {
        double vmax = 0.0;
        for (size_t i = 0; i < nv; i++) vmax = fmax(vmax, fabs(to_double(o->c.dtype, hv, i)));
        const double u = o->c.dtype == SIEVE_DTYPE_BF16 ? 0x1p-9
                         : o->c.dtype == SIEVE_DTYPE_F16 ? 0x1p-11 : 0x1p-20;
        tol = (2.0 * u + 1e-3) * vmax; /* 1e-3: the dots' float32 error at these scores */
        max_gp = 0.0;
        for (size_t i = 0; i < no; i++) max_gp = fmax(max_gp, fabs((double)h1[i] - h2[i]));
        /* a sample of tokens against float64: a sub-problem of those tokens */
        const uint32_t nc = (uint32_t)o->c.check_tokens < T ? (uint32_t)o->c.check_tokens : T;
        max_ref = 0.0;
        double d2 = 0.0, r2 = 0.0; /* relative L2 error of the checked rows, both calls */
        if (nc) {
            sieve_sparse_attn_params sp = p;
            sp.n_queries = nc;
            sp.group = 1;
            void *sq = malloc((size_t)nc * Hq * D * es);
            int32_t *si = malloc((size_t)nc * k * 4);
            double *ro = malloc((size_t)nc * Hq * DV * 8);
            if (!sq || !si || !ro) rc = SIEVE_ENOMEM;
            for (uint32_t c = 0; !rc && c < nc; c++) {
                const uint32_t tok = (uint32_t)(((uint64_t)c * 2654435761u + 7) % T);
                memcpy((char *)sq + (size_t)c * Hq * D * es, (char *)hq + (size_t)tok * Hq * D * es,
                       (size_t)Hq * D * es);
                memcpy(si + (size_t)c * k, idx + (size_t)tok * k, (size_t)k * 4);
            }
            if (!rc) rc = sieve_sparse_attention_reference(&sp, sq, hk, hv, si, ro, NULL);
            for (uint32_t c = 0; !rc && c < nc; c++) {
                const uint32_t tok = (uint32_t)(((uint64_t)c * 2654435761u + 7) % T);
                for (size_t i = 0; i < (size_t)Hq * DV; i++) {
                    const double r = ro[(size_t)c * Hq * DV + i];
                    const double e1 = h1[(size_t)tok * Hq * DV + i] - r;
                    const double e2 = h2[(size_t)tok * Hq * DV + i] - r;
                    max_ref = fmax(max_ref, fmax(fabs(e1), fabs(e2)));
                    d2 += e1 * e1 + e2 * e2;
                    r2 += 2.0 * r * r;
                }
            }
            free(sq);
            free(si);
            free(ro);
        }
        /* each element within the rounding bound, and the rows as a whole close (the
         * outputs of long sets are small beside the element bound: zeros would pass it) */
        const double rel = r2 > 0.0 ? sqrt(d2 / r2) : sqrt(d2);
        if (!rc) ok = max_gp <= 2.0 * tol && max_ref <= tol && rel <= 0.05 ? "yes" : "OFF";
    }
    free(hq);
    free(hk);
    free(hv);
    /* bytes each call gathers: every (group, kv head) CTA row chunk reads its list's keys and
     * values once (per query: each token its own set) */
    const uint32_t R = Hq / Hkv;
    const double chunks = ceil((double)G * R / 64.0);
    const double row_bytes = (double)(D + DV) * es * Hkv;
    const double g_bytes = (double)gs.union_entries * row_bytes * chunks;
    const double p_bytes = (double)ps.union_entries * row_bytes;
    /* the floor: every key and value row some token reads, q and idx read once, out and lse
     * written once (rows read by several groups or heads may come from the L2 cache, so the
     * gathered bytes are not a bound) */
    uint64_t distinct = 0;
    uint64_t *seen = calloc((L + 63) / 64, 8);
    const int counted = seen != NULL;
    if (seen) {
        for (size_t i = 0; i < ni; i++)
            if (idx[i] >= 0 && (uint32_t)idx[i] < L) seen[idx[i] >> 6] |= 1ull << (idx[i] & 63);
        for (uint32_t w = 0; w < (L + 63) / 64; w++) distinct += (uint64_t)__builtin_popcountll(seen[w]);
        free(seen);
    }
    const double io_bytes = (double)nq * es + (double)ni * 4 + (double)(no + nl) * 4;
    const double floor_ms = counted ? ((double)distinct * row_bytes + io_bytes) / (o->bw_gbs * 1e9) * 1e3
                                 : NAN;
    const double per_token = T ? (double)gs.member_entries / T : 0.0;
    const double union_ratio = gs.groups && per_token > 0
                                   ? (double)gs.union_entries / gs.groups / per_token
                                   : NAN;
    if (rc) fprintf(stderr, "sieve-bench attention sparse: T=%u L=%u k=%u group=%u failed: %s\n",
                    T, L, k, G, sieve_strerror(rc));
    printf("%6u %7u %5u %5u %5.2f %8.1f %6.2f %10.3f %10.3f %7.2fx %8.2f %8.2f %8.3f %8.3f "
           "%9.2e %9.2e %4s\n",
           T, L, k, G, share, per_token, union_ratio, perq, grouped, perq / grouped,
           p_bytes / 1e9, g_bytes / 1e9, floor_ms, gs.ms_prepare, max_gp, max_ref, ok);
    fflush(stdout);
    if (js) {
        char a[32], b[32], c[32], d[32], e[32], f[32];
        fprintf(js,
                "{\"mode\":\"attention\",\"kernel\":\"sparse\",\"device\":\"%s\",\"dtype\":\"%s\","
                "\"T\":%u,\"Hq\":%u,\"Hkv\":%u,\"D\":%u,\"DV\":%u,\"L\":%u,\"k\":%u,\"group\":%u,"
                "\"share\":%.3f,\"members_per_token\":%.1f,\"union_over_set\":%s,"
                "\"per_query_ms\":%s,\"grouped_ms\":%s,\"per_query_gathered_gb\":%.4f,"
                "\"grouped_gathered_gb\":%.4f,\"floor_ms\":%s,\"prepare_ms\":%.4f,"
                "\"attend_ms\":%.4f,\"per_query_prepare_ms\":%.4f,\"max_diff_grouped_per_query\":%s,"
                "\"max_err_reference\":%s,\"ok\":\"%s\",\"repeat\":%d}\n",
                info->name, sieve_dtype_name(o->c.dtype), T, Hq, Hkv, D, DV, L, k, G, share,
                per_token, bench_jnum(a, union_ratio), bench_jnum(b, perq),
                bench_jnum(c, grouped), p_bytes / 1e9, g_bytes / 1e9, bench_jnum(d, floor_ms),
                gs.ms_prepare, gs.ms_attend, ps.ms_prepare, bench_jnum(e, max_gp),
                bench_jnum(f, max_ref), ok, o->c.repeat);
        fflush(js);
    }
    void *dptr[] = {q, keys, vals, didx, o1, l1, o2, l2, scratch};
    for (size_t i = 0; i < sizeof dptr / sizeof *dptr; i++)
        if (dptr[i]) sieve_device_free(dev, dptr[i]);
    free(t);
    free(idx);
    free(h1);
    free(h2);
    return rc || !strcmp(ok, "OFF");
}

int sieve_bench_sparse_attention(int argc, char **argv) {
    sa_opts o;
    if (sa_parse(argc, argv, &o)) return 2;
    sieve_device *dev = NULL;
    int rc = sieve_device_open(o.c.device, &dev);
    if (rc) {
        fprintf(stderr, "sieve-bench attention sparse: cannot open device '%s': %s\n", o.c.device,
                sieve_strerror(rc));
        return 1;
    }
    sieve_device_info info;
    sieve_device_get_info(dev, &info);
    if (info.kind == SIEVE_DEVICE_CPU && !o.shape_given) {
        o.keys[0] = 8192;
        o.queries[0] = 32;
        o.ks[0] = 256;
        printf("# the CPU device: a smaller default shape (L 8192, T 32, k 256); --keys, "
               "--queries and --k choose others\n");
    }
    FILE *js = NULL;
    if (o.c.json && !(js = fopen(o.c.json, "a"))) {
        fprintf(stderr, "sieve-bench attention sparse: cannot open %s: %s\n", o.c.json,
                strerror(errno));
        sieve_device_close(dev);
        return 1;
    }
    printf("# sieve-bench attention sparse on %s; %s, q heads %u, kv heads %u, D %u, v_dim %u, "
           "%d timed calls (median)\n",
           info.name, sieve_dtype_name(o.c.dtype), o.c.q_heads, o.c.kv_heads, o.c.head_dim, o.c.v_dim,
           o.c.repeat);
    printf("# set/tok: distinct keys a token reads; union/set: a group's list over one token's "
           "set; gathered GB: key and value bytes read from the lists\n");
    printf("%6s %7s %5s %5s %5s %8s %6s %10s %10s %8s %8s %8s %8s %8s %9s %9s %4s\n", "T", "L",
           "k", "group", "share", "set/tok", "union", "perq_ms", "grouped_ms", "speedup",
           "perq_GB", "grp_GB", "floor_ms", "prep_ms", "grp-perq", "ref_err", "ok");
    int failures = 0;
    const int total = o.n_keys * o.n_queries * o.n_ks * o.n_groups * o.n_shares;
    int done = 0;
    for (int li = 0; li < o.n_keys; li++)
        for (int ti = 0; ti < o.n_queries; ti++)
            for (int ki = 0; ki < o.n_ks; ki++)
                for (int gi = 0; gi < o.n_groups; gi++)
                    for (int si = 0; si < o.n_shares; si++) {
                        const uint32_t L = o.keys[li], T = o.queries[ti], k = o.ks[ki];
                        done++;
                        if (T > L) {
                            fprintf(stderr, "sieve-bench attention sparse: T=%u past L=%u, "
                                            "skipped\n", T, L);
                            continue;
                        }
                        failures += run_shape(&o, dev, &info, js, T, L, k, o.groups[gi],
                                              o.shares[si]);
                        if (isatty(2))
                            fprintf(stderr, "\r[%d/%d shapes]%s", done, total,
                                    done == total ? "\n" : "");
                    }
    if (js) fclose(js);
    sieve_device_close(dev);
    if (failures) fprintf(stderr, "sieve-bench attention sparse: %d failures\n", failures);
    return failures ? 1 : 0;
}

/* bench_bsp.c: sieve-bench's `attention prefill` mode.
 *
 * Owns: timing block-sparse prefill with mean correction (sieve_block_sparse_prefill,
 * FlashPrefill V2) with the correction on and off against the in-house dense causal
 * attention (sieve_causal_attention) on structured synthetic prefills held on the device;
 * the selection's density and its check (forced blocks kept, the data's target blocks
 * found); the approximation error of both outputs against the dense one; the exactness of
 * the block-sparse computation on sampled tokens against the float64 reference given the
 * call's own selection; a table and JSON lines (torch's flash and cuDNN backends are timed by
 * bench/torch_attention.py dense; bench/report_attention.py --prefill sets them side by side).
 * Must not: touch the store or the server.
 *
 * The data. Random draws n(.) are approximately standard normal: the four 16-bit lanes of a
 * SplitMix64 hash of (seed, array, element) summed, centred and scaled (Irwin-Hall, |n| < 3.47),
 * so element i of each array depends only on --seed and i (any thread count, any device).
 * scale = 1 / sqrt(D) (the kernels' default), B = --block, R = q_heads / kv_heads.
 *   - centre c_gJ of kv head g and key block J: D draws rescaled to norm sqrt(D) (a random
 *     direction; equal norms give every target the same logit, below);
 *   - keys    k[s,g] = c_gJ + 0.5 n                      (J = s / B);
 *   - values  v[s,g] = m_gJ + 0.5 n, m_gJ = v_dim draws  (each block's mean offset);
 *   - targets: for query tile I (tokens I B .. I B + B - 1) and kv head g, m = max(1,
 *     round(hot x F_I)) of the tile's F_I full blocks, uniform without replacement (seeded
 *     per (g, I); none when F_I = 0, the first tile);
 *   - queries: the tile's rows (token t, query head h of g; row i = (t - I B) R + h mod R)
 *     take the targets round robin from a seeded rotation, two each (one when m = 1):
 *         q[t,h] = w (c_a + c_b) + 0.5 n,   w = MU / (scale (|c_a|^2 + c_a . c_b)),  MU = 8
 *     so scale q . c_a = scale q . c_b = 8 exactly before the noise.
 * Why. Chosen with a float64 model of the selection and of the three outputs (D 128, R 4,
 * B 64, alpha 0.1, hot 0.04), then checked on this generator's own output at 32K and 128K
 * (12 tiles spread over the sequence, float64); target_recall, extra_blocks, planned_density
 * and pruned_mass in the JSON measure the same on every run:
 *   - two targets a row rather than a mix of all m: the mix's dot with another random centre
 *     spreads as much as its dot with a target once m nears D / 12, and at 128K a tile has
 *     about 80 targets. The tile's rows together aim at every target whenever 2 B R >= m
 *     (2 x 64 x 4 = 512 against 82 at 128K), each target's E_J summing about 2 B R / m rows;
 *   - w solving both dots exactly removes the c_a . c_b cross term (spread 8 / sqrt(D) = 0.7
 *     in each logit), which otherwise spread the targets' E_J past the factor 1 / alpha (in
 *     the model 10% of the targets fell below alpha at 128K);
 *   - MU 8: a target block's pooled logit is 8, another block's about N(0, 2 MU^2 / D + 0.25)
 *     = N(0, 1.25) at D 128. Measured: the smallest target's E_J at least 0.56 (128K) and
 *     0.80 (32K) of the tile's largest, the largest other block's at most 0.042 and 0.020;
 *     every target kept, no other block: the kept blocks are the forced ones and the
 *     targets, a density of hot plus the forced share (5.2% at 128K, 8.8% at 32K; at a few
 *     thousand tokens the 13 forced blocks of a tile dominate);
 *   - the mass left: about L other keys of weight e^{N(0, 1.25)} against the 2 B keys a row
 *     aims at, weight e^8. Measured: the pruned blocks hold on average 6% of a row's
 *     attention at 32K and 20% at 128K (under 1% at 4K): what the correction recovers and
 *     dropping loses (relative L2 error against dense 0.2% corrected against 7.5% dropped at
 *     32K, 0.6% against 26% at 128K);
 *   - key noise 0.5: a block's logits spread by about 0.56 (scale |q| x 0.5), so attention is
 *     concentrated but not one-hot (at 128K a row's largest probability is about 1%, half its
 *     mass on about 90 keys), and a pruned block's pooled term B e^{xbar_J} under-counts its
 *     mass by only about e^{0.16};
 *   - value offsets 1, noise 0.5: a pruned block carries a signal (its mean m_gJ) that the
 *     correction's vbar_J reproduces and dropping loses.
 * With fewer dimensions the separation shrinks (a target stands about sqrt(D / 2) standard
 * deviations of another block's logit above it): D 64 still separates at the tests' lengths,
 * at D 32 other blocks pass alpha 0.1 (extra_blocks > 0); with 2 B R < m some targets get no
 * row (target_recall < 1). Generation runs on the host's cores (every core, seeded per
 * element and per tile), then the arrays are uploaded; the CPU device uses them in place.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_attn_opts.h"
#include "bench_util.h"
#include "sieve_kernels.h"

#define GEN_MU 8.0          /* a target's pooled logit (before the noise) */
#define GEN_Q_NOISE 0.5f    /* query noise */
#define GEN_K_NOISE 0.5f    /* key noise around the block's centre */
#define GEN_V_NOISE 0.5f    /* value noise around the block's mean offset */
#define ERR_ELEMS (1u << 25) /* the error sample: about this many output elements */

typedef struct bsp_opts {
    bench_attn_opts c; /* the options the attention modes share */
    uint32_t seqs[MAXLIST];
    int n_seqs;
    double alphas[MAXLIST];
    int n_alphas;
    uint32_t block, sink, window;
    double hot;
    int shape_given;
} bsp_opts;

static void bsp_usage(FILE *f) {
    fprintf(f,
            "usage: sieve-bench attention prefill [options]\n"
            "\n"
            "Times block-sparse prefill with mean correction (FlashPrefill V2: key blocks\n"
            "mean-pooled, each query tile's blocks scored, a block kept when its score is at\n"
            "least alpha x the tile's largest, or it is a sink, window or diagonal block; the\n"
            "attention runs over the kept blocks, each pruned full block entering as one pooled\n"
            "row) with the correction (corrected) and without it (dropped), against the in-house\n"
            "dense causal attention, on prefills of each length (queries = keys, grouped-query\n"
            "heads). The data is structured: each query tile aims at max(1, round(hot x its full\n"
            "blocks)) target blocks, so the density is about --hot plus the forced blocks' share\n"
            "and the pruned blocks keep some mass (bench/bench_bsp.c says how). Reported: density\n"
            "(kept / visible blocks), times (whole calls, median) and speedups over dense,\n"
            "dense-equivalent TFLOP/s (dense's causal FLOPs over the call's time), the relative\n"
            "L2 error of both outputs against dense (every row, or the rows of every s-th tile\n"
            "when an output passes 2^25 elements), the share of rows with pruned blocks where\n"
            "the correction is closer to dense than dropping, and a check: every tile's\n"
            "selection holds its forced blocks, and --check-tokens tokens of both calls agree\n"
            "with the float64 reference given the call's own selection (each output within the\n"
            "rounding bound, the rows' relative L2 error at most 0.05). The timed calls do not\n"
            "ask for the selection; one more call of each does, for the checks. torch's flash\n"
            "and cuDNN attention: bench/torch_attention.py dense, then bench/report_attention.py\n"
            "--prefill.\n"
            "\n"
            "options (lists are comma separated; sizes take k = 1024 and m = 1048576):\n"
            "  --device SPEC      auto | cpu | cpu:T | cuda:N           (default auto)\n"
            "  --dtype T          bfloat16 | float16 (| float32 on the CPU) (default bfloat16)\n"
            "  --q-heads H        query heads                           (default 32)\n"
            "  --kv-heads H       key/value heads                       (default 8)\n"
            "  --head-dim D       of q and keys (CUDA: 64 or 128)       (default 128)\n"
            "  --v-dim D          of values (CUDA: 64 or 128)           (default 128)\n"
            "  --seq LIST         prefill lengths                       (default 32k,128k)\n"
            "                     (on the CPU device the default is 1k)\n"
            "  --block B          keys a block, tokens a tile (CUDA: 64 or 128) (default 128)\n"
            "  --alpha LIST       thresholds, 0..1 (relative to a tile's largest block score)\n"
            "                                                           (default 0.1)\n"
            "  --sink N           first blocks always kept              (default 2)\n"
            "  --window N         a tile's last full blocks always kept (default 4)\n"
            "  --hot F            share of a tile's full blocks its queries aim at, (0, 1]\n"
            "                                                           (default 0.04)\n"
            "  --repeat R         timed calls of each (median)          (default 5)\n"
            "  --warmup W         untimed calls first                   (default 1)\n"
            "  --check-tokens N   tokens checked against float64        (default 8)\n"
            "  --seed S           data seed                             (default 1)\n"
            "  --json FILE        also append one JSON object per (length, alpha) to FILE\n"
            "  -h, --help         this help\n");
}

/* Comma-separated numbers in [lo, hi]; the count, or -1. */
static int parse_fracs(const char *s, double *out, int max, double lo, double hi) {
    int n = 0;
    char *copy = strdup(s), *save = NULL;
    if (!copy) return -1;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *end = NULL;
        errno = 0;
        const double v = strtod(t, &end);
        if (*end || errno || !(v >= lo && v <= hi) || n >= max) {
            free(copy);
            return -1;
        }
        out[n++] = v;
    }
    free(copy);
    return n;
}

/* An unsigned 32-bit count (min or more); 0 or -1. */
static int parse_u32(const char *v, uint32_t min, uint32_t *out) {
    char *end = NULL;
    errno = 0;
    const unsigned long x = strtoul(v, &end, 10);
    if (*end || !*v || *v == '-' || errno || x > UINT32_MAX || x < min) return -1;
    *out = (uint32_t)x;
    return 0;
}

static int bsp_parse(int argc, char **argv, bsp_opts *o) {
    memset(o, 0, sizeof *o);
    o->c.device = "auto";
    o->c.dtype = SIEVE_DTYPE_BF16;
    o->c.q_heads = 32;
    o->c.kv_heads = 8;
    o->c.head_dim = 128;
    o->c.v_dim = 128;
    o->seqs[0] = 32768;
    o->seqs[1] = 131072;
    o->n_seqs = 2;
    o->alphas[0] = 0.1;
    o->n_alphas = 1;
    o->block = 128; /* FlashPrefill V2's configuration: 256 sink and 512 window tokens */
    o->sink = 2;
    o->window = 4;
    o->hot = 0.04;
    o->c.repeat = 5;
    o->c.warmup = 1;
    o->c.check_tokens = 8;
    o->c.seed = 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        double hot[1];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            bsp_usage(stdout);
            exit(0);
        }
        if (!v) {
            fprintf(stderr, "sieve-bench attention prefill: %s needs a value (see --help)\n", a);
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
        } else if (!strcmp(a, "--alpha")) {
            if ((o->n_alphas = parse_fracs(v, o->alphas, MAXLIST, 0.0, 1.0)) <= 0) goto bad;
        } else if (!strcmp(a, "--hot")) {
            if (parse_fracs(v, hot, 1, 0.0, 1.0) != 1 || !(hot[0] > 0.0)) goto bad;
            o->hot = hot[0];
        } else if (!strcmp(a, "--block")) {
            if (parse_u32(v, 1, &o->block)) goto bad;
        } else if (!strcmp(a, "--sink")) {
            if (parse_u32(v, 0, &o->sink)) goto bad;
        } else if (!strcmp(a, "--window")) {
            if (parse_u32(v, 0, &o->window)) goto bad;
        } else {
            fprintf(stderr, "sieve-bench attention prefill: unknown option %s (see --help)\n", a);
            return -1;
        }
        continue;
    bad:
        fprintf(stderr, "sieve-bench attention prefill: bad value '%s' for %s (see --help)\n", v,
                a);
        return -1;
    }
    if (o->c.q_heads % o->c.kv_heads) {
        fprintf(stderr, "sieve-bench attention prefill: --q-heads %u is not a multiple of "
                        "--kv-heads %u\n", o->c.q_heads, o->c.kv_heads);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- progress */

/* A one-line status on a terminal's stderr (nothing otherwise), overwritten by the next. */
static void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void progress(const char *fmt, ...) {
    if (!isatty(2)) return;
    char buf[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\r%-60s", buf);
    fflush(stderr);
}

static void progress_clear(void) {
    if (isatty(2)) fprintf(stderr, "\r%60s\r", "");
}

/* v with six significant digits (errors, shares), or "null" when not finite. */
static const char *jsci(char buf[32], double v) {
    if (isfinite(v)) snprintf(buf, 32, "%.6g", v);
    else snprintf(buf, 32, "null");
    return buf;
}

/* ---------------------------------------------------------------- the data */

static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Draw i of the stream key: approximately N(0, 1) (Irwin-Hall of four 16-bit lanes). */
static inline float gauss(uint64_t key, uint64_t i) {
    const uint64_t h = mix64(key + (i + 1) * 0x9e3779b97f4a7c15ull);
    const int64_t s = (int64_t)(h & 0xffff) + (int64_t)((h >> 16) & 0xffff) +
                      (int64_t)((h >> 32) & 0xffff) + (int64_t)(h >> 48);
    return (float)(s - 131070) * (float)(1.7320508075688772 / 131072.0);
}

/* A SplitMix64 sequence (per-tile choices). */
static inline uint64_t next64(uint64_t *s) { return mix64(*s += 0x9e3779b97f4a7c15ull); }

enum { STREAM_CENTRE = 1, STREAM_OFFSET, STREAM_KEY, STREAM_VALUE, STREAM_QUERY, STREAM_TILE };

static uint64_t stream_key(uint64_t seed, int stream) {
    return mix64(seed * 0x100000001b3ull + (uint64_t)stream * 0x632be59bd9b4e019ull);
}

typedef struct gen_ctx {
    sieve_dtype dtype;
    uint32_t S, Hq, Hkv, D, DV, B, tiles, R;
    double hot;
    uint64_t seed;
    const float *cent; /* Hkv x tiles x D: the blocks' centres (norm sqrt(D)) */
    const float *voff; /* Hkv x tiles x DV: the blocks' mean offsets */
    void *q, *keys, *vals; /* host arrays of dtype */
    const uint32_t *tcount; /* targets of tile I (every kv head) */
    const uint64_t *toff;   /* where tile I's targets start in a kv head's list */
    uint64_t ttotal;        /* targets of one kv head */
    int32_t *targets;       /* Hkv x ttotal */
    int nthreads;
    unsigned done;          /* tiles finished (atomic) */
    int failed;             /* a worker's allocation failed */
} gen_ctx;

typedef struct gen_arg {
    gen_ctx *g;
    int index;
} gen_arg;

/* Tile I's full blocks (T = L, pos0 0: its first token sees I B + 1 keys). */
static uint32_t full_blocks(uint32_t S, uint32_t B, uint32_t I) {
    const uint64_t f = (uint64_t)I * B + 1;
    return (uint32_t)((f < S ? f : S) / B);
}

static void *gen_worker(void *p) {
    const gen_arg *ga = p;
    gen_ctx *g = ga->g;
    const uint32_t D = g->D, DV = g->DV, B = g->B, Hq = g->Hq, Hkv = g->Hkv, R = g->R;
    const size_t es = sieve_dtype_size(g->dtype);
    const uint64_t kk = stream_key(g->seed, STREAM_KEY), kv = stream_key(g->seed, STREAM_VALUE),
                   kq = stream_key(g->seed, STREAM_QUERY), kt = stream_key(g->seed, STREAM_TILE);
    const double scale = 1.0 / sqrt((double)D);
    float *row = malloc((size_t)(D > DV ? D : DV) * sizeof *row);
    int32_t *perm = malloc((size_t)g->tiles * sizeof *perm);
    if (!row || !perm) {
        __atomic_store_n(&g->failed, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&g->done, g->tiles, __ATOMIC_RELAXED); /* let the waiter finish */
        free(row);
        free(perm);
        return NULL;
    }
    for (uint32_t I = (uint32_t)ga->index; I < g->tiles; I += (uint32_t)g->nthreads) {
        const uint32_t t0 = I * B, t1 = (uint32_t)((uint64_t)t0 + B < g->S ? t0 + B : g->S);
        /* the tile's keys and values (T = L: the tile's tokens are the block's keys) */
        for (uint32_t s = t0; s < t1; s++)
            for (uint32_t h = 0; h < Hkv; h++) {
                const size_t r = (size_t)s * Hkv + h;
                const float *c = g->cent + ((size_t)h * g->tiles + I) * D;
                for (uint32_t d = 0; d < D; d++) row[d] = c[d] + GEN_K_NOISE * gauss(kk, r * D + d);
                sieve_convert_from_f32(g->dtype, row, (char *)g->keys + r * D * es, D);
                const float *m = g->voff + ((size_t)h * g->tiles + I) * DV;
                for (uint32_t d = 0; d < DV; d++) row[d] = m[d] + GEN_V_NOISE * gauss(kv, r * DV + d);
                sieve_convert_from_f32(g->dtype, row, (char *)g->vals + r * DV * es, DV);
            }
        /* the tile's targets and queries, per kv head */
        const uint32_t F = full_blocks(g->S, B, I), m = g->tcount[I];
        for (uint32_t h = 0; h < Hkv; h++) {
            uint64_t st = kt ^ mix64(((uint64_t)h << 32) + I);
            int32_t *tg = g->targets + (size_t)h * g->ttotal + g->toff[I];
            for (uint32_t j = 0; j < F; j++) perm[j] = (int32_t)j;
            for (uint32_t j = 0; j < m; j++) { /* partial Fisher-Yates */
                const uint32_t k = j + (uint32_t)(next64(&st) % (F - j));
                const int32_t x = perm[j];
                perm[j] = perm[k];
                perm[k] = x;
                tg[j] = perm[j];
            }
            const uint32_t rot = m ? (uint32_t)(next64(&st) % m) : 0;
            for (uint32_t t = t0; t < t1; t++)
                for (uint32_t r = 0; r < R; r++) {
                    const uint32_t hq = h * R + r;
                    const uint64_t i = (uint64_t)(t - t0) * R + r; /* the tile's row */
                    const size_t qr = (size_t)t * Hq + hq;
                    const float *ca = NULL, *cb = NULL;
                    double w = 0.0;
                    if (m) {
                        ca = g->cent + ((size_t)h * g->tiles + (uint32_t)tg[(rot + 2 * i) % m]) * D;
                        double aa = 0.0, ab = 0.0;
                        if (m > 1) {
                            cb = g->cent + ((size_t)h * g->tiles + (uint32_t)tg[(rot + 2 * i + 1) % m]) * D;
                            for (uint32_t d = 0; d < D; d++) ab += (double)ca[d] * cb[d];
                        }
                        for (uint32_t d = 0; d < D; d++) aa += (double)ca[d] * ca[d];
                        if (cb && aa + ab < 0.25 * aa) cb = NULL, ab = 0.0; /* near-opposite */
                        w = GEN_MU / (scale * (aa + ab));
                    }
                    for (uint32_t d = 0; d < D; d++) {
                        const double sig = ca ? w * ((double)ca[d] + (cb ? cb[d] : 0.0)) : 0.0;
                        row[d] = (float)sig + GEN_Q_NOISE * gauss(kq, qr * D + d);
                    }
                    sieve_convert_from_f32(g->dtype, row, (char *)g->q + qr * D * es, D);
                }
        }
        __atomic_add_fetch(&g->done, 1u, __ATOMIC_RELAXED);
    }
    free(row);
    free(perm);
    return NULL;
}

/* Fills q, keys and vals (host memory, dtype) as the opening comment says, on every core;
 * targets (Hkv x the sum of tcount) gets each (kv head, tile)'s target blocks at toff.
 * 0 or SIEVE_ENOMEM. */
static int generate(gen_ctx *g, const char *what) {
    const uint32_t D = g->D, DV = g->DV;
    const uint64_t kc = stream_key(g->seed, STREAM_CENTRE), ko = stream_key(g->seed, STREAM_OFFSET);
    float *cent = malloc((size_t)g->Hkv * g->tiles * D * sizeof *cent);
    float *voff = malloc((size_t)g->Hkv * g->tiles * DV * sizeof *voff);
    if (!cent || !voff) {
        free(cent);
        free(voff);
        return SIEVE_ENOMEM;
    }
    for (size_t b = 0; b < (size_t)g->Hkv * g->tiles; b++) {
        float *c = cent + b * D;
        double n2 = 0.0;
        for (uint32_t d = 0; d < D; d++) {
            c[d] = gauss(kc, b * D + d);
            n2 += (double)c[d] * c[d];
        }
        const double f = n2 > 0.0 ? sqrt((double)D / n2) : 1.0;
        for (uint32_t d = 0; d < D; d++) c[d] = (float)(c[d] * f);
        for (uint32_t d = 0; d < DV; d++) voff[b * DV + d] = gauss(ko, b * DV + d);
    }
    g->cent = cent;
    g->voff = voff;
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    int n = nc < 1 ? 1 : nc > 64 ? 64 : (int)nc;
    if ((uint32_t)n > g->tiles) n = (int)g->tiles;
    g->nthreads = n;
    g->done = 0;
    g->failed = 0;
    pthread_t th[64];
    gen_arg args[64];
    int started = 0;
    for (int i = 0; i < n; i++) {
        args[i].g = g;
        args[i].index = i;
    }
    while (started < n && !pthread_create(&th[started], NULL, gen_worker, &args[started]))
        started++;
    for (int i = started; i < n; i++) gen_worker(&args[i]); /* threads it could not start */
    while (__atomic_load_n(&g->done, __ATOMIC_RELAXED) < g->tiles) {
        progress("[%s: generating %u%%]", what,
                 (unsigned)(100.0 * __atomic_load_n(&g->done, __ATOMIC_RELAXED) / g->tiles));
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    free(cent);
    free(voff);
    g->cent = g->voff = NULL;
    return g->failed ? SIEVE_ENOMEM : 0;
}

/* ---------------------------------------------------------------- one length */

typedef struct timed {
    double ms, select_ms, attend_ms; /* medians */
    sieve_bsp_stats st;              /* the last call's */
} timed;

/* warmup + repeat calls of one mode without the selection outputs, medians into *tm; then
 * one call that writes the selection too (the outputs the checks read). */
static int time_bsp(const bsp_opts *o, sieve_device *dev, const sieve_bsp_params *p,
                    const void *q, const void *keys, const void *vals, void *scratch,
                    size_t sb, float *out, float *lse, uint32_t *sc, int32_t *sbk, timed *tm) {
    double *t = calloc((size_t)o->c.repeat, 8), *ts = calloc((size_t)o->c.repeat, 8),
           *ta = calloc((size_t)o->c.repeat, 8);
    int rc = t && ts && ta ? 0 : SIEVE_ENOMEM;
    sieve_bsp_stats st;
    memset(&st, 0, sizeof st);
    for (int r = 0; !rc && r < o->c.warmup; r++)
        rc = sieve_block_sparse_prefill(dev, p, q, keys, vals, scratch, sb, out, lse, NULL, NULL,
                                        &st);
    for (int r = 0; !rc && r < o->c.repeat; r++) {
        const double t0 = bench_now_ms();
        rc = sieve_block_sparse_prefill(dev, p, q, keys, vals, scratch, sb, out, lse, NULL, NULL,
                                        &st);
        t[r] = bench_now_ms() - t0;
        ts[r] = st.ms_select;
        ta[r] = st.ms_attend;
    }
    if (!rc) {
        tm->ms = bench_median(t, o->c.repeat);
        tm->select_ms = bench_median(ts, o->c.repeat);
        tm->attend_ms = bench_median(ta, o->c.repeat);
        rc = sieve_block_sparse_prefill(dev, p, q, keys, vals, scratch, sb, out, lse, sc, sbk,
                                        &tm->st);
    }
    free(t);
    free(ts);
    free(ta);
    return rc;
}

/* What the selection check finds over every (kv head, tile). */
typedef struct sel_check {
    int valid;               /* every tile ascending, visible, its forced blocks kept */
    uint64_t kept, planned;  /* kept entries; forced blocks and targets (union) */
    uint64_t targets, targets_kept, extra; /* targets; of them kept; kept neither */
} sel_check;

static void check_selection(const sieve_bsp_params *p, uint32_t tiles, uint64_t per_head,
                            const uint32_t *nblk, const uint32_t *sc, const int32_t *sbk,
                            const gen_ctx *g, unsigned char *mark, sel_check *out) {
    memset(out, 0, sizeof *out);
    out->valid = 1;
    const uint32_t B = p->block, S = p->attn.n_queries;
    for (uint32_t h = 0; h < p->attn.kv_heads; h++) {
        uint64_t off = 0;
        for (uint32_t I = 0; I < tiles; off += nblk[I], I++) {
            const uint32_t nI = nblk[I], F = full_blocks(S, B, I), cnt = sc[(size_t)h * tiles + I];
            const int32_t *blk = sbk + (size_t)h * per_head + off;
            if (cnt > nI) {
                out->valid = 0;
                continue;
            }
            memset(mark, 0, nI);
            for (uint32_t k = 0; k < cnt; k++) {
                if (blk[k] < 0 || (uint32_t)blk[k] >= nI || (k && blk[k] <= blk[k - 1])) {
                    out->valid = 0;
                    break;
                }
                mark[blk[k]] = 1; /* 1 kept */
            }
            out->kept += cnt;
            const int32_t *tg = g->targets + (size_t)h * g->ttotal + g->toff[I];
            for (uint32_t j = 0; j < g->tcount[I]; j++) {
                out->targets++;
                out->targets_kept += mark[tg[j]] & 1;
                mark[tg[j]] |= 2; /* 2 a target */
            }
            for (uint32_t J = 0; J < nI; J++) {
                const int forced = J >= F || J < p->sink_blocks || (uint64_t)J + p->window_blocks >= F;
                if (forced && !(mark[J] & 1)) out->valid = 0;
                if (forced || (mark[J] & 2)) out->planned++;
                else if (mark[J] & 1) out->extra++;
            }
        }
    }
}

/* Whether two selections hold the same blocks (entries past a tile's count aside). */
static int same_selection(uint32_t Hkv, uint32_t tiles, uint64_t per_head, const uint32_t *nblk,
                          const uint32_t *sc1, const int32_t *sb1, const uint32_t *sc2,
                          const int32_t *sb2) {
    for (uint32_t h = 0; h < Hkv; h++) {
        uint64_t off = 0;
        for (uint32_t I = 0; I < tiles; off += nblk[I], I++) {
            const size_t c = (size_t)h * tiles + I;
            if (sc1[c] != sc2[c]) return 0;
            const size_t b = (size_t)h * per_head + off;
            if (sc1[c] <= nblk[I] && memcmp(sb1 + b, sb2 + b, (size_t)sc1[c] * 4)) return 0;
        }
    }
    return 1;
}

/* One prefill of S tokens at every alpha: the failed or off (alpha) lines (printed). */
static int run_seq(const bsp_opts *o, sieve_device *dev, const sieve_device_info *info, FILE *js,
                   uint32_t S) {
    const uint32_t Hq = o->c.q_heads, Hkv = o->c.kv_heads, D = o->c.head_dim, DV = o->c.v_dim;
    const uint32_t B = o->block, R = Hq / Hkv;
    const sieve_dtype dt = o->c.dtype;
    const int cpu = info->kind == SIEVE_DEVICE_CPU;
    const size_t es = sieve_dtype_size(dt);
    const size_t nq = (size_t)S * Hq * D, nk = (size_t)S * Hkv * D, nv = (size_t)S * Hkv * DV;
    const size_t no = (size_t)S * Hq * DV, nl = (size_t)S * Hq;
    char what[48];
    snprintf(what, sizeof what, "S=%u", S);
    void *q = NULL, *keys = NULL, *vals = NULL, *scratch = NULL;
    void *outs[3] = {NULL, NULL, NULL}, *lses[3] = {NULL, NULL, NULL}; /* dense, corr, drop */
    void *dsc[2] = {NULL, NULL}, *dsb[2] = {NULL, NULL};                /* corr, drop */
    void *hq = NULL, *hk = NULL, *hv = NULL;
    uint32_t *hsc[2] = {NULL, NULL}, *nblk = NULL, *tcount = NULL;
    int32_t *hsb[2] = {NULL, NULL}, *targets = NULL;
    uint64_t *toff = NULL;
    unsigned char *mark = NULL;
    double *t = calloc((size_t)o->c.repeat, 8), *td = calloc((size_t)o->c.repeat, 8);
    double dense_ms = NAN, dense_dev = NAN, gen_s = NAN, vmax = 0.0;
    size_t sb = 0, dsbytes = 0;
    uint32_t tiles = 0;
    uint64_t per_head = 0;
    sieve_attn_params ap;
    sieve_attn_params_init(&ap, dt, S, Hq, Hkv, D, DV, S);
    sieve_bsp_params bp;
    sieve_bsp_params_init(&bp, dt, S, Hq, Hkv, D, DV, S);
    bp.block = B;
    bp.sink_blocks = o->sink;
    bp.window_blocks = o->window;
    int rc = t && td ? 0 : SIEVE_ENOMEM;
    if (!rc) rc = sieve_bsp_layout(&bp, &tiles, &per_head, NULL);
    if (!rc && !(nblk = malloc((size_t)tiles * 4))) rc = SIEVE_ENOMEM;
    if (!rc) rc = sieve_bsp_layout(&bp, &tiles, &per_head, nblk);
    if (!rc) rc = sieve_causal_attn_scratch_size(dev, &ap, &dsbytes);
    if (!rc) rc = sieve_device_alloc(dev, nq * es, &q);
    if (!rc) rc = sieve_device_alloc(dev, nk * es, &keys);
    if (!rc) rc = sieve_device_alloc(dev, nv * es, &vals);
    for (int i = 0; i < 3; i++) {
        if (!rc) rc = sieve_device_alloc(dev, no * 4, &outs[i]);
        if (!rc) rc = sieve_device_alloc(dev, nl * 4, &lses[i]);
    }
    for (int i = 0; i < 2; i++) {
        if (!rc) rc = sieve_device_alloc(dev, (size_t)Hkv * tiles * 4, &dsc[i]);
        if (!rc) rc = sieve_device_alloc(dev, (size_t)Hkv * per_head * 4, &dsb[i]);
        if (!rc && !(hsc[i] = malloc((size_t)Hkv * tiles * 4))) rc = SIEVE_ENOMEM;
        if (!rc && !(hsb[i] = malloc((size_t)Hkv * per_head * 4))) rc = SIEVE_ENOMEM;
    }
    if (!rc && dsbytes) rc = sieve_device_alloc(dev, dsbytes, &scratch);
    sb = dsbytes;
    /* the data: generated on the host (the CPU device's arrays are host memory) */
    if (!rc) {
        hq = cpu ? q : malloc(nq * es);
        hk = cpu ? keys : malloc(nk * es);
        hv = cpu ? vals : malloc(nv * es);
        tcount = malloc((size_t)tiles * 4);
        toff = malloc((size_t)tiles * 8);
        mark = malloc((size_t)tiles);
        if (!hq || !hk || !hv || !tcount || !toff || !mark) rc = SIEVE_ENOMEM;
    }
    gen_ctx g;
    memset(&g, 0, sizeof g);
    if (!rc) {
        uint64_t tot = 0;
        for (uint32_t I = 0; I < tiles; I++) {
            const uint32_t F = full_blocks(S, B, I);
            uint32_t m = F ? (uint32_t)llround(o->hot * F) : 0;
            if (F && m < 1) m = 1;
            if (m > F) m = F;
            tcount[I] = m;
            toff[I] = tot;
            tot += m;
        }
        if (!(targets = malloc((size_t)(tot ? tot : 1) * Hkv * 4))) rc = SIEVE_ENOMEM;
        g = (gen_ctx){.dtype = dt, .S = S, .Hq = Hq, .Hkv = Hkv, .D = D, .DV = DV, .B = B,
                      .tiles = tiles, .R = R, .hot = o->hot, .seed = o->c.seed, .q = hq,
                      .keys = hk, .vals = hv, .tcount = tcount, .toff = toff, .ttotal = tot,
                      .targets = targets};
    }
    if (!rc) {
        const double t0 = bench_now_ms();
        rc = generate(&g, what);
        gen_s = (bench_now_ms() - t0) / 1e3;
    }
    if (!rc && !cpu) {
        progress("[%s: uploading]", what);
        rc = sieve_device_upload(dev, q, hq, nq * es);
        if (!rc) rc = sieve_device_upload(dev, keys, hk, nk * es);
        if (!rc) rc = sieve_device_upload(dev, vals, hv, nv * es);
    }
    /* dense: the baseline and the outputs the errors are measured against */
    if (!rc) progress("[%s: dense]", what);
    for (int r = 0; !rc && r < o->c.warmup; r++)
        rc = sieve_causal_attention(dev, &ap, q, keys, vals, scratch, sb, outs[0], lses[0], NULL);
    for (int r = 0; !rc && r < o->c.repeat; r++) {
        const double t0 = bench_now_ms();
        rc = sieve_causal_attention(dev, &ap, q, keys, vals, scratch, sb, outs[0], lses[0], &td[r]);
        t[r] = bench_now_ms() - t0;
    }
    if (!rc) {
        dense_ms = bench_median(t, o->c.repeat);
        dense_dev = bench_median(td, o->c.repeat);
    }
    if (rc) fprintf(stderr, "sieve-bench attention prefill: S=%u (data or dense) failed: %s\n", S,
                    sieve_strerror(rc));
    /* the values' largest magnitude, for the checks' rounding bound */
    if (!rc) {
        float buf[4096];
        for (size_t i = 0; i < nv; i += 4096) {
            const size_t n = nv - i < 4096 ? nv - i : 4096;
            sieve_convert_to_f32(dt, (const char *)hv + i * es, buf, n);
            for (size_t j = 0; j < n; j++) vmax = fmax(vmax, fabs((double)buf[j]));
        }
    }
    const double u = dt == SIEVE_DTYPE_BF16 ? 0x1p-9 : dt == SIEVE_DTYPE_F16 ? 0x1p-11 : 0x1p-20;
    const double tol = (2.0 * u + 1e-3) * vmax;
    const double flops = 2.0 * (D + DV) * ((double)S * (S + 1) / 2.0 * Hq);
    const int base_rc = rc;
    int failures = 0;
    for (int ai = 0; ai < o->n_alphas; ai++) {
        const double alpha = o->alphas[ai];
        timed tm[2];
        memset(tm, 0, sizeof tm);
        for (int i = 0; i < 2; i++) tm[i].ms = tm[i].select_ms = tm[i].attend_ms = NAN;
        sel_check chk[2];
        memset(chk, 0, sizeof chk);
        double rel_c = NAN, rel_d = NAN, closer = NAN, pruned_mass = NAN, corr_mass = NAN;
        double max_err = NAN, check_rel = NAN, check_mae = NAN, mae_c = NAN, mae_d = NAN;
        uint64_t err_rows = 0, pruned_rows = 0;
        uint32_t stride = 1;
        int same = -1;
        const char *ok = "-";
        rc = base_rc;
        bp.alpha = (float)alpha;
        /* scratch for both modes */
        for (int c = 1; !rc && c >= 0; c--) {
            size_t need = 0;
            bp.correct = c;
            rc = sieve_bsp_scratch_size(dev, &bp, &need);
            if (!rc && need > sb) {
                if (scratch) sieve_device_free(dev, scratch);
                scratch = NULL;
                sb = 0;
                rc = sieve_device_alloc(dev, need, &scratch);
                if (!rc) sb = need;
            }
        }
        for (int i = 0; !rc && i < 2; i++) { /* 0: corrected, 1: dropped */
            progress("[%s alpha %g: %s]", what, alpha, i ? "dropped" : "corrected");
            bp.correct = !i;
            rc = time_bsp(o, dev, &bp, q, keys, vals, scratch, sb, outs[1 + i], lses[1 + i],
                          dsc[i], dsb[i], &tm[i]);
        }
        if (!rc) progress("[%s alpha %g: checking]", what, alpha);
        for (int i = 0; !rc && i < 2; i++) {
            rc = sieve_device_download(dev, hsc[i], dsc[i], (size_t)Hkv * tiles * 4);
            if (!rc) rc = sieve_device_download(dev, hsb[i], dsb[i], (size_t)Hkv * per_head * 4);
            if (!rc) check_selection(&bp, tiles, per_head, nblk, hsc[i], hsb[i], &g, mark, &chk[i]);
        }
        if (!rc)
            same = same_selection(Hkv, tiles, per_head, nblk, hsc[0], hsb[0], hsc[1], hsb[1]);
        /* the errors against dense: every row, or the rows of every stride-th tile (the last
         * tile always among them) when an output passes ERR_ELEMS elements */
        if (!rc) {
            stride = (uint32_t)((no + ERR_ELEMS - 1) / ERR_ELEMS);
            if (stride < 1) stride = 1;
            const size_t tile_o = (size_t)B * Hq * DV, tile_l = (size_t)B * Hq;
            float *ho[3], *hl[3];
            for (int i = 0; i < 3; i++) {
                ho[i] = malloc(tile_o * 4);
                hl[i] = malloc(tile_l * 4);
                if (!ho[i] || !hl[i]) rc = SIEVE_ENOMEM;
            }
            double d2c = 0.0, d2d = 0.0, r2 = 0.0, pm = 0.0, cm = 0.0, a1c = 0.0, a1d = 0.0;
            uint64_t nclose = 0;
            for (uint32_t I = tiles; !rc && I-- > 0;) {
                if ((tiles - 1 - I) % stride) continue;
                const uint32_t t0 = I * B, t1 = (uint32_t)((uint64_t)t0 + B < S ? t0 + B : S);
                const size_t n_o = (size_t)(t1 - t0) * Hq * DV, n_l = (size_t)(t1 - t0) * Hq;
                for (int i = 0; !rc && i < 3; i++) {
                    rc = sieve_device_download(dev, ho[i], (const float *)outs[i] + (size_t)t0 * Hq * DV,
                                               n_o * 4);
                    if (!rc) rc = sieve_device_download(dev, hl[i], (const float *)lses[i] + (size_t)t0 * Hq,
                                                        n_l * 4);
                }
                for (size_t rr = 0; !rc && rr < n_l; rr++) {
                    const uint32_t h = (uint32_t)(rr % Hq), kvh = h / R;
                    double ec = 0.0, ed = 0.0, rn = 0.0;
                    for (uint32_t v = 0; v < DV; v++) {
                        const double ref = ho[0][rr * DV + v];
                        const double a = ho[1][rr * DV + v] - ref, b = ho[2][rr * DV + v] - ref;
                        ec += a * a;
                        ed += b * b;
                        a1c += fabs(a);
                        a1d += fabs(b);
                        rn += ref * ref;
                    }
                    d2c += ec;
                    d2d += ed;
                    r2 += rn;
                    pm += 1.0 - exp((double)hl[2][rr] - hl[0][rr]);
                    cm += exp((double)hl[1][rr] - hl[0][rr]);
                    err_rows++;
                    if (hsc[0][(size_t)kvh * tiles + I] < nblk[I]) { /* pruned blocks */
                        pruned_rows++;
                        nclose += ec < ed;
                    }
                }
            }
            for (int i = 0; i < 3; i++) {
                free(ho[i]);
                free(hl[i]);
            }
            if (!rc && err_rows) {
                rel_c = r2 > 0.0 ? sqrt(d2c / r2) : sqrt(d2c);
                rel_d = r2 > 0.0 ? sqrt(d2d / r2) : sqrt(d2d);
                /* FlashPrefill V2's own test metric: the mean absolute error against dense */
                mae_c = a1c / ((double)err_rows * DV);
                mae_d = a1d / ((double)err_rows * DV);
                pruned_mass = pm / (double)err_rows;
                corr_mass = cm / (double)err_rows;
                closer = pruned_rows ? (double)nclose / (double)pruned_rows : NAN;
            }
        }
        /* exactness given the selection: sampled tokens of both calls against float64 */
        const uint32_t nc = (uint32_t)o->c.check_tokens < S ? (uint32_t)o->c.check_tokens : S;
        if (!rc && chk[0].valid && chk[1].valid && nc) {
            float *ho = malloc((size_t)Hq * DV * 4);
            double *ro = malloc((size_t)Hq * DV * 8);
            double d2[2] = {0.0, 0.0}, r2[2] = {0.0, 0.0}, a1 = 0.0;
            if (!ho || !ro) rc = SIEVE_ENOMEM;
            max_err = 0.0;
            for (uint32_t c = 0; !rc && c < nc; c++) {
                const uint32_t tok = c + 1 == nc ? S - 1 : (uint32_t)(((uint64_t)c * 2654435761u) % S);
                for (int i = 0; !rc && i < 2; i++) {
                    bp.correct = !i;
                    rc = sieve_bsp_attention_reference(&bp, hq, hk, hv, hsc[i], hsb[i], tok, 1, ro,
                                                       NULL);
                    if (!rc) rc = sieve_device_download(dev, ho, (const float *)outs[1 + i] +
                                                        (size_t)tok * Hq * DV, (size_t)Hq * DV * 4);
                    for (size_t e = 0; !rc && e < (size_t)Hq * DV; e++) {
                        const double diff = (double)ho[e] - ro[e];
                        max_err = fmax(max_err, fabs(diff));
                        a1 += fabs(diff);
                        d2[i] += diff * diff;
                        r2[i] += ro[e] * ro[e];
                    }
                }
            }
            /* each element within the rounding bound, and the rows as a whole close */
            const double rc_c = r2[0] > 0.0 ? sqrt(d2[0] / r2[0]) : sqrt(d2[0]);
            const double rc_d = r2[1] > 0.0 ? sqrt(d2[1] / r2[1]) : sqrt(d2[1]);
            check_rel = fmax(rc_c, rc_d);
            check_mae = a1 / (2.0 * nc * Hq * DV);
            if (!rc) ok = max_err <= tol && check_rel <= 0.05 ? "yes" : "OFF";
            free(ho);
            free(ro);
        }
        if (!rc && !(chk[0].valid && chk[1].valid)) {
            ok = "OFF";
            fprintf(stderr, "sieve-bench attention prefill: S=%u alpha=%g: a selection is not "
                            "ascending and visible or lacks a forced block (%s)\n",
                    S, alpha, chk[0].valid ? "dropped" : "corrected");
        }
        if (rc) {
            if (rc != base_rc)
                fprintf(stderr, "sieve-bench attention prefill: S=%u alpha=%g failed: %s\n", S,
                        alpha, sieve_strerror(rc));
            tm[0].ms = tm[1].ms = NAN;
            ok = "-";
        }
        progress_clear();
        const sieve_bsp_stats *st = &tm[0].st;
        const double planned = st->visible_blocks ? (double)chk[0].planned / st->visible_blocks : NAN;
        const double recall = chk[0].targets ? (double)chk[0].targets_kept / chk[0].targets : NAN;
        const double dens = rc ? NAN : st->density;
        printf("%8u %6.3f %8.4f %8.4f %10.3f %10.3f %10.3f %7.2fx %7.2fx %8.2f %8.3f %8.3f "
               "%9.2e %9.2e %6.3f %9.2e %4s\n",
               S, alpha, dens, planned, dense_ms, tm[0].ms, tm[1].ms, dense_ms / tm[0].ms,
               dense_ms / tm[1].ms, flops / (tm[0].ms * 1e9), tm[0].select_ms, tm[0].attend_ms,
               rel_c, rel_d, closer, max_err, ok);
        fflush(stdout);
        if (js) {
            char a[32], b[32], c[32], d[32], e[32], f[32], gg[32], h[32], i2[32], j[32], k[32],
                l[32], m[32], n[32], p2[32], q2[32], r[32], s2[32], t2[32], u2[32], v2[32], w2[32],
                x2[32], y2[32], z2[32], mc[32], md[32], mk[32];
            fprintf(js,
                    "{\"mode\":\"attention\",\"kernel\":\"prefill\",\"device\":\"%s\","
                    "\"dtype\":\"%s\",\"T\":%u,\"L\":%u,\"Hq\":%u,\"Hkv\":%u,\"D\":%u,\"DV\":%u,"
                    "\"causal\":1,\"block\":%u,\"alpha\":%.4f,\"sink\":%u,\"window\":%u,"
                    "\"hot\":%.4f,\"seed\":%llu,\"gen_s\":%s,"
                    "\"dense_ms\":%s,\"dense_device_ms\":%s,"
                    "\"corrected_ms\":%s,\"corrected_select_ms\":%s,\"corrected_attend_ms\":%s,"
                    "\"dropped_ms\":%s,\"dropped_select_ms\":%s,\"dropped_attend_ms\":%s,"
                    "\"speedup_corrected\":%s,\"speedup_dropped\":%s,"
                    "\"dense_tflops\":%s,\"corrected_tflops\":%s,\"dropped_tflops\":%s,"
                    "\"density\":%s,\"planned_density\":%s,\"visible_blocks\":%llu,"
                    "\"kept_blocks\":%llu,\"corrected_blocks\":%llu,\"dropped_kept_blocks\":%llu,"
                    "\"target_recall\":%s,\"extra_blocks\":%llu,\"selections_equal\":%d,"
                    "\"rel_l2_corrected\":%s,\"rel_l2_dropped\":%s,\"corrected_closer\":%s,"
                    "\"pruned_rows\":%llu,\"err_rows\":%llu,\"err_tile_stride\":%u,"
                    "\"pruned_mass\":%s,\"corrected_mass\":%s,"
                    "\"check_tokens\":%u,\"check_max_err\":%s,\"check_tol\":%s,"
                    "\"check_rel_l2\":%s,\"check_mean_abs\":%s,\"mean_abs_corrected\":%s,"
                    "\"mean_abs_dropped\":%s,\"ok\":\"%s\",\"repeat\":%d}\n",
                    info->name, sieve_dtype_name(dt), S, S, Hq, Hkv, D, DV, B, alpha, o->sink,
                    o->window, o->hot, (unsigned long long)o->c.seed, bench_jnum(a, gen_s),
                    bench_jnum(b, dense_ms), bench_jnum(c, dense_dev), bench_jnum(d, tm[0].ms),
                    bench_jnum(e, tm[0].select_ms), bench_jnum(f, tm[0].attend_ms),
                    bench_jnum(gg, tm[1].ms), bench_jnum(h, tm[1].select_ms),
                    bench_jnum(i2, tm[1].attend_ms), bench_jnum(j, dense_ms / tm[0].ms),
                    bench_jnum(k, dense_ms / tm[1].ms), bench_jnum(l, flops / (dense_ms * 1e9)),
                    bench_jnum(m, flops / (tm[0].ms * 1e9)), bench_jnum(n, flops / (tm[1].ms * 1e9)),
                    jsci(p2, dens), jsci(q2, planned),
                    (unsigned long long)st->visible_blocks, (unsigned long long)st->kept_blocks,
                    (unsigned long long)st->corrected_blocks,
                    (unsigned long long)tm[1].st.kept_blocks, jsci(r, recall),
                    (unsigned long long)chk[0].extra, same, jsci(s2, rel_c),
                    jsci(t2, rel_d), jsci(u2, closer),
                    (unsigned long long)pruned_rows, (unsigned long long)err_rows, stride,
                    jsci(v2, pruned_mass), jsci(w2, corr_mass), nc,
                    jsci(x2, max_err), jsci(y2, tol), jsci(z2, check_rel), jsci(mk, check_mae),
                    jsci(mc, mae_c), jsci(md, mae_d), ok,
                    o->c.repeat);
            fflush(js);
        }
        failures += rc || !strcmp(ok, "OFF");
    }
    void *dptr[] = {q, keys, vals, scratch, outs[0], outs[1], outs[2], lses[0], lses[1], lses[2],
                    dsc[0], dsc[1], dsb[0], dsb[1]};
    for (size_t i = 0; i < sizeof dptr / sizeof *dptr; i++)
        if (dptr[i]) sieve_device_free(dev, dptr[i]);
    if (!cpu) {
        free(hq);
        free(hk);
        free(hv);
    }
    for (int i = 0; i < 2; i++) {
        free(hsc[i]);
        free(hsb[i]);
    }
    free(nblk);
    free(tcount);
    free(toff);
    free(targets);
    free(mark);
    free(t);
    free(td);
    return failures;
}

int sieve_bench_prefill_attention(int argc, char **argv) {
    bsp_opts o;
    if (bsp_parse(argc, argv, &o)) return 2;
    sieve_device *dev = NULL;
    int rc = sieve_device_open(o.c.device, &dev);
    if (rc) {
        fprintf(stderr, "sieve-bench attention prefill: cannot open device '%s': %s\n",
                o.c.device, sieve_strerror(rc));
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
        fprintf(stderr, "sieve-bench attention prefill: cannot open %s: %s\n", o.c.json,
                strerror(errno));
        sieve_device_close(dev);
        return 1;
    }
    printf("# sieve-bench attention prefill (block-sparse, mean correction) on %s; %s, q heads "
           "%u, kv heads %u, D %u, v_dim %u, block %u, sink %u, window %u, hot %g, %d timed "
           "calls (median)\n",
           info.name, sieve_dtype_name(o.c.dtype), o.c.q_heads, o.c.kv_heads, o.c.head_dim,
           o.c.v_dim, o.block, o.sink, o.window, o.hot, o.c.repeat);
    printf("# density: kept / visible blocks (planned: forced blocks and the data's targets); "
           "x: dense / block-sparse call time; TFLOP/s: dense-equivalent (corrected); err: "
           "relative L2 against dense; closer: share of rows with pruned blocks where corrected "
           "beats dropped; check: max error against float64 given the selection\n");
    printf("%8s %6s %8s %8s %10s %10s %10s %8s %8s %8s %8s %8s %9s %9s %6s %9s %4s\n", "seq",
           "alpha", "density", "planned", "dense_ms", "corr_ms", "drop_ms", "x_corr", "x_drop",
           "TFLOP/s", "sel_ms", "att_ms", "err_corr", "err_drop", "closer", "check", "ok");
    int failures = 0;
    for (int i = 0; i < o.n_seqs; i++) {
        failures += run_seq(&o, dev, &info, js, o.seqs[i]);
        if (isatty(2))
            fprintf(stderr, "\r[%d/%d lengths]%s", i + 1, o.n_seqs, i + 1 == o.n_seqs ? "\n" : "");
    }
    if (js) fclose(js);
    sieve_device_close(dev);
    if (failures) fprintf(stderr, "sieve-bench attention prefill: %d failures\n", failures);
    return failures ? 1 : 0;
}

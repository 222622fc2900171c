/* test_block_sparse_cuda.c: CUDA block-sparse prefill against the float64 references: its
 * selection against sieve_bsp_select_reference (equal but for blocks within 1e-4 of the
 * threshold), its output against sieve_bsp_attention_reference given its own selection (up to
 * the bound sieve_kernels.h states for the attention kernels), with and without mean
 * correction; alpha 0 against CUDA dense causal attention bit for bit; blocks of 64 and 128,
 * chunks of a longer prefill (pos0 > 0), rows clipped at n_keys, 1 to 128 query heads a kv
 * head, decode-size calls (slices), one token, fewer keys than a block, many pooled rows,
 * the 3-stage ring, the Hopper wgmma kernels forced on small shapes, and the error codes.
 * Skips, saying so, where no CUDA device is visible. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/kt_util.h"
#include "sieve_kernels.h"

static int have_gpu(void) { return sieve_cuda_device_count() > 0; }

#define SKIP_WITHOUT_GPU()                                                                   \
    do {                                                                                     \
        if (!have_gpu())                                                                     \
            cr_skip_test("no CUDA device visible: GPU block-sparse prefill tests skipped");  \
    } while (0)

typedef struct bcase {
    sieve_dtype dtype;
    uint32_t T, Hq, Hkv, D, DV, L, pos0, block;
    float alpha;
    uint32_t sink, window;
    float qscale; /* the queries' spread (larger: more concentrated attention) */
    float scale;  /* the softmax scale (0, when left out: 1 / sqrt(head_dim)) */
} bcase;

static double elem(const void *a, sieve_dtype dt, size_t i) {
    switch (dt) {
    case SIEVE_DTYPE_F16: return sieve_f16_to_f32(((const uint16_t *)a)[i]);
    case SIEVE_DTYPE_BF16: return sieve_bf16_to_f32(((const uint16_t *)a)[i]);
    default: return ((const float *)a)[i];
    }
}

/* Keys and values around a centre per (block of 64 keys, kv head), so blocks score apart. */
static void *make_kv(sieve_dtype dt, uint32_t L, uint32_t H, uint32_t D, uint64_t seed) {
    const size_t n = (size_t)L * H * D;
    float *f = malloc(n * sizeof *f), *centre = malloc((size_t)H * D * sizeof *centre);
    void *out = malloc(n * sieve_dtype_size(dt));
    cr_assert(f && centre && out);
    kt_rng r = {seed};
    for (uint32_t s = 0; s < L; s++) {
        if (s % 64 == 0)
            for (size_t i = 0; i < (size_t)H * D; i++) centre[i] = 1.5f * kt_gauss(&r);
        for (size_t i = 0; i < (size_t)H * D; i++)
            f[(size_t)s * H * D + i] = centre[i] + 0.7f * kt_gauss(&r);
    }
    sieve_convert_from_f32(dt, f, out, n);
    free(f);
    free(centre);
    return out;
}

typedef struct run_out {
    float *out, *lse;
    uint32_t *counts;
    int32_t *blocks;
    sieve_bsp_stats st;
} run_out;

/* One GPU call: every output downloaded. */
static void run_gpu(sieve_device *gpu, const sieve_bsp_params *p, const void *dq,
                    const void *dk, const void *dv, uint32_t tiles, uint64_t per_head,
                    run_out *r) {
    const sieve_attn_params *a = &p->attn;
    const size_t no = (size_t)a->n_queries * a->q_heads * a->v_dim;
    const size_t nl = (size_t)a->n_queries * a->q_heads;
    const size_t nc = (size_t)a->kv_heads * tiles, nb = (size_t)a->kv_heads * per_head;
    void *dout, *dlse, *dc, *db, *scratch = NULL;
    cr_assert_eq(sieve_device_alloc(gpu, no * 4, &dout), 0);
    cr_assert_eq(sieve_device_alloc(gpu, nl * 4, &dlse), 0);
    cr_assert_eq(sieve_device_alloc(gpu, nc * 4, &dc), 0);
    cr_assert_eq(sieve_device_alloc(gpu, nb * 4, &db), 0);
    size_t sb = 0;
    cr_assert_eq(sieve_bsp_scratch_size(gpu, p, &sb), 0);
    cr_assert(sb > 0);
    cr_assert_eq(sieve_device_alloc(gpu, sb, &scratch), 0);
    cr_assert_eq(sieve_block_sparse_prefill(gpu, p, dq, dk, dv, scratch, sb, dout, dlse, dc, db,
                                            &r->st),
                 0);
    r->out = malloc(no * 4);
    r->lse = malloc(nl * 4);
    r->counts = malloc(nc * 4);
    r->blocks = malloc(nb * 4);
    cr_assert(r->out && r->lse && r->counts && r->blocks);
    cr_assert_eq(sieve_device_download(gpu, r->out, dout, no * 4), 0);
    cr_assert_eq(sieve_device_download(gpu, r->lse, dlse, nl * 4), 0);
    cr_assert_eq(sieve_device_download(gpu, r->counts, dc, nc * 4), 0);
    cr_assert_eq(sieve_device_download(gpu, r->blocks, db, nb * 4), 0);
    sieve_device_free(gpu, scratch);
    sieve_device_free(gpu, dout);
    sieve_device_free(gpu, dlse);
    sieve_device_free(gpu, dc);
    sieve_device_free(gpu, db);
}

static void free_run(run_out *r) {
    free(r->out);
    free(r->lse);
    free(r->counts);
    free(r->blocks);
}

/* Membership of J in a tile's ascending list. */
static int in_list(const int32_t *b, uint32_t n, uint32_t J) {
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        const uint32_t mid = (lo + hi) / 2;
        if ((uint32_t)b[mid] < J) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && (uint32_t)b[lo] == J;
}

static void run_case(const bcase *c, uint64_t seed) {
    char desc[200];
    snprintf(desc, sizeof desc, "%s T=%u Hq=%u Hkv=%u D=%u DV=%u L=%u pos0=%u B=%u alpha=%g",
             sieve_dtype_name(c->dtype), c->T, c->Hq, c->Hkv, c->D, c->DV, c->L, c->pos0,
             c->block, (double)c->alpha);
    sieve_device *gpu = NULL, *cpu = NULL;
    cr_assert_eq(sieve_device_open("cuda:0", &gpu), 0);
    cr_assert_eq(sieve_device_open("cpu:2", &cpu), 0);
    const size_t es = sieve_dtype_size(c->dtype);
    const size_t nq = (size_t)c->T * c->Hq * c->D, nk = (size_t)c->L * c->Hkv * c->D;
    const size_t nv = (size_t)c->L * c->Hkv * c->DV;
    void *hq = malloc(nq * es);
    cr_assert(hq);
    cr_assert_eq(sieve_device_fill_normal(cpu, hq, c->dtype, nq, seed + 1, c->qscale), 0);
    void *hk = make_kv(c->dtype, c->L, c->Hkv, c->D, seed + 2);
    void *hv = make_kv(c->dtype, c->L, c->Hkv, c->DV, seed + 3);
    void *dq, *dk, *dv;
    cr_assert_eq(sieve_device_alloc(gpu, nq * es, &dq), 0);
    cr_assert_eq(sieve_device_alloc(gpu, nk * es, &dk), 0);
    cr_assert_eq(sieve_device_alloc(gpu, nv * es, &dv), 0);
    cr_assert_eq(sieve_device_upload(gpu, dq, hq, nq * es), 0);
    cr_assert_eq(sieve_device_upload(gpu, dk, hk, nk * es), 0);
    cr_assert_eq(sieve_device_upload(gpu, dv, hv, nv * es), 0);

    sieve_bsp_params p;
    sieve_bsp_params_init(&p, c->dtype, c->T, c->Hq, c->Hkv, c->D, c->DV, c->L);
    p.attn.pos0 = c->pos0;
    p.block = c->block;
    p.alpha = c->alpha;
    p.sink_blocks = c->sink;
    p.attn.scale = c->scale;
    p.window_blocks = c->window;
    uint32_t tiles = 0;
    uint64_t per_head = 0;
    cr_assert_eq(sieve_bsp_layout(&p, &tiles, &per_head, NULL), 0);
    uint32_t *nI = malloc((size_t)tiles * 4);
    uint64_t *off = malloc(((size_t)tiles + 1) * 8);
    cr_assert(nI && off);
    cr_assert_eq(sieve_bsp_layout(&p, &tiles, &per_head, nI), 0);
    off[0] = 0;
    for (uint32_t i = 0; i < tiles; i++) off[i + 1] = off[i] + nI[i];

    /* the float64 selection and each block's E_J / max E */
    const size_t nc = (size_t)c->Hkv * tiles, nb = (size_t)c->Hkv * per_head;
    uint32_t *rc = malloc(nc * 4);
    int32_t *rb = malloc(nb * 4);
    double *ratio = malloc(nb * 8);
    cr_assert(rc && rb && ratio);
    cr_assert_eq(sieve_bsp_select_reference(&p, hq, hk, rc, rb, ratio), 0, "%s", desc);

    /* the output bound of each (token, query head), which both runs share: the largest
     * |value| among its visible keys (a running maximum over keys, per kv head) and the
     * largest sum |q_d k_d| */
    const uint32_t R = c->Hq / c->Hkv;
    const double u = c->dtype == SIEVE_DTYPE_BF16 ? 0x1p-9 : 0x1p-11;
    const double scale = fabs(c->scale != 0.0f ? (double)c->scale : 1.0 / sqrt((double)c->D));
    const size_t nl = (size_t)c->T * c->Hq;
    double *tolo = malloc(nl * 8), *dmaxs = malloc(nl * 8);
    double *fk = malloc(nk * 8), *fq = malloc((size_t)c->D * 8);
    double *vrun = malloc((size_t)c->L * c->Hkv * 8);
    cr_assert(tolo && dmaxs && fk && fq && vrun);
    for (size_t i = 0; i < nk; i++) fk[i] = fabs(elem(hk, c->dtype, i));
    for (uint32_t h = 0; h < c->Hkv; h++) {
        double run = 0.0;
        for (uint32_t s = 0; s < c->L; s++) {
            for (uint32_t d = 0; d < c->DV; d++)
                run = fmax(run, fabs(elem(hv, c->dtype, ((size_t)s * c->Hkv + h) * c->DV + d)));
            vrun[(size_t)h * c->L + s] = run;
        }
    }
    for (uint32_t t = 0; t < c->T; t++) {
        const uint64_t v64 = (uint64_t)c->pos0 + t + 1;
        const uint32_t vis = v64 < c->L ? (uint32_t)v64 : c->L;
        for (uint32_t hh = 0; hh < c->Hq; hh++) {
            const uint32_t gk = hh / R;
            for (uint32_t d = 0; d < c->D; d++)
                fq[d] = fabs(elem(hq, c->dtype, ((size_t)t * c->Hq + hh) * c->D + d));
            double mag = 0.0;
            for (uint32_t s = 0; s < vis; s++) {
                const double *kr = fk + ((size_t)s * c->Hkv + gk) * c->D;
                double m = 0.0;
                for (uint32_t d = 0; d < c->D; d++) m += fq[d] * kr[d];
                mag = fmax(mag, m);
            }
            const double vmax = vis ? vrun[(size_t)gk * c->L + vis - 1] : 0.0;
            const double dmax = scale * mag * (c->D + 2) * 0x1p-24;
            dmaxs[(size_t)t * c->Hq + hh] = dmax;
            tolo[(size_t)t * c->Hq + hh] = (2.0 * u + 4.0 * dmax + 1e-5) * vmax;
        }
    }
    free(fk);
    free(fq);
    free(vrun);

    for (int corr = 1; corr >= 0; corr--) {
        p.correct = corr;
        run_out g;
        run_gpu(gpu, &p, dq, dk, dv, tiles, per_head, &g);
        /* selection: equal to the reference's but within 1e-3 of the threshold */
        uint64_t kept = 0, compared = 0, skipped = 0, corrected = 0;
        for (uint32_t h = 0; h < c->Hkv; h++)
            for (uint32_t i = 0; i < tiles; i++) {
                const size_t row = (size_t)h * tiles + i, base = h * per_head + off[i];
                const uint32_t n = g.counts[row];
                cr_assert(n >= 1 && n <= nI[i], "%s: kv %u tile %u keeps %u of %u", desc, h, i,
                          n, nI[i]);
                for (uint32_t j = 1; j < n; j++)
                    cr_assert(g.blocks[base + j] > g.blocks[base + j - 1], "%s: not ascending",
                              desc);
                cr_assert((uint32_t)g.blocks[base + n - 1] < nI[i]);
                kept += n;
                for (uint32_t J = 0; J < nI[i]; J++) {
                    const int ing = in_list(g.blocks + base, n, J);
                    const int inr = in_list(rb + base, rc[row], J);
                    const double q = ratio[base + J];
                    if (fabs(q - c->alpha) <= 1e-4 * c->alpha) { /* the contract's band */
                        skipped++;
                    } else {
                        compared++;
                        cr_assert_eq(ing, inr,
                                     "%s: kv %u tile %u block %u: GPU %s, reference %s "
                                     "(E/max %.9g)",
                                     desc, h, i, J, ing ? "kept" : "not", inr ? "kept" : "not",
                                     q);
                    }
                    /* full, not kept: corrected when correction is on */
                    const uint64_t first = (uint64_t)c->pos0 + (uint64_t)i * c->block + 1;
                    const uint32_t f = (uint32_t)(first < c->L ? first : c->L);
                    if (!ing && (uint64_t)(J + 1) * c->block <= f) corrected += (uint64_t)corr;
                }
            }
        cr_assert(skipped * 20 <= compared + 20, "%s: %llu blocks near the threshold of %llu",
                  desc, (unsigned long long)skipped, (unsigned long long)compared);
        cr_assert_eq(g.st.visible_blocks, (uint64_t)c->Hkv * per_head, "%s", desc);
        cr_assert_eq(g.st.kept_blocks, kept, "%s", desc);
        cr_assert_eq(g.st.corrected_blocks, corrected, "%s", desc);
        cr_assert(fabs(g.st.density - (double)kept / (double)g.st.visible_blocks) < 1e-12);

        /* the output against float64 given the GPU's own selection */
        const size_t no = (size_t)c->T * c->Hq * c->DV;
        double *rout = malloc(no * 8), *rlse = malloc(nl * 8);
        cr_assert(rout && rlse);
        cr_assert_eq(sieve_bsp_attention_reference(&p, hq, hk, hv, g.counts, g.blocks, 0, c->T,
                                                   rout, rlse),
                     0, "%s", desc);
        for (uint32_t t = 0; t < c->T; t++) {
            for (uint32_t hh = 0; hh < c->Hq; hh++) {
                const double dmax = dmaxs[(size_t)t * c->Hq + hh];
                const double tol = tolo[(size_t)t * c->Hq + hh];
                const size_t o = ((size_t)t * c->Hq + hh) * c->DV;
                for (uint32_t d = 0; d < c->DV; d++) {
                    const double err = fabs((double)g.out[o + d] - rout[o + d]);
                    cr_assert(isfinite(g.out[o + d]) && err <= tol,
                              "%s correct %d t %u h %u d %u: out %.9g, reference %.9g "
                              "(error %.3g > %.3g)",
                              desc, corr, t, hh, d, g.out[o + d], rout[o + d], err, tol);
                }
                const double rl = rlse[(size_t)t * c->Hq + hh], gl = g.lse[(size_t)t * c->Hq + hh];
                cr_assert(fabs(gl - rl) <= 1e-5 * (1.0 + fabs(rl)) + 4.0 * dmax,
                          "%s correct %d t %u h %u: lse %.9g, reference %.9g", desc, corr, t, hh,
                          gl, rl);
            }
        }
        free(rout);
        free(rlse);
        free_run(&g);
    }
    free(tolo);
    free(dmaxs);
    free(rc);
    free(rb);
    free(ratio);
    free(nI);
    free(off);
    sieve_device_free(gpu, dq);
    sieve_device_free(gpu, dk);
    sieve_device_free(gpu, dv);
    sieve_device_close(gpu);
    sieve_device_close(cpu);
    free(hq);
    free(hk);
    free(hv);
}

/* GQA 32/8, blocks of 64, T not a multiple of the tile; a sink and a window. */
Test(block_sparse_cuda, prefill_gqa_bf16) {
    SKIP_WITHOUT_GPU();
    bcase c = {SIEVE_DTYPE_BF16, 1000, 32, 8, 128, 128, 1000, 0, 64, 0.2f, 1, 2, 1.0f, 0.0f};
    run_case(&c, 101);
}

/* Blocks of 128 (two key tiles a block), a chunk of a longer prefill whose tiles start
 * mid-block, head_dim 64, v_dim 128, no sink or window. */
Test(block_sparse_cuda, chunk_block128_f16) {
    SKIP_WITHOUT_GPU();
    bcase c = {SIEVE_DTYPE_F16, 700, 16, 2, 64, 128, 2000, 1237, 128, 0.3f, 0, 0, 1.5f, 0.0f};
    run_case(&c, 102);
}

/* Tokens past the last key (rows clipped at n_keys: tiles whose every block is full), one
 * query head a kv head (64 tokens a CTA), v_dim 64. */
Test(block_sparse_cuda, clipped_mha_bf16) {
    SKIP_WITHOUT_GPU();
    bcase c = {SIEVE_DTYPE_BF16, 300, 4, 4, 128, 64, 640, 500, 64, 0.1f, 2, 1, 1.0f, 0.0f};
    run_case(&c, 103);
}

/* 3 query heads a kv head (groups of 16 tokens, 48 rows), 128 on one kv head (a token over
 * two CTAs), a decode-size call (the lists split into slices). */
Test(block_sparse_cuda, head_ratios_and_decode) {
    SKIP_WITHOUT_GPU();
    bcase a = {SIEVE_DTYPE_BF16, 200, 12, 4, 64, 64, 900, 700, 64, 0.15f, 1, 1, 1.2f, 0.0f};
    run_case(&a, 104);
    bcase b = {SIEVE_DTYPE_F16, 70, 128, 1, 64, 64, 600, 530, 64, 0.2f, 1, 1, 1.0f, 0.0f};
    run_case(&b, 105);
    bcase d = {SIEVE_DTYPE_BF16, 3, 32, 8, 128, 128, 5000, 4997, 128, 0.1f, 2, 2, 1.0f, 0.0f};
    run_case(&d, 106);
}

/* Edges: one token (decode at the end of a long prefix), keys fewer than one block (every
 * block the diagonal band), a block of 128 over 100 keys. */
Test(block_sparse_cuda, small_edges) {
    SKIP_WITHOUT_GPU();
    bcase a = {SIEVE_DTYPE_BF16, 1, 32, 8, 128, 128, 3000, 2999, 64, 0.1f, 2, 2, 1.5f, 0.0f};
    run_case(&a, 109);
    bcase b = {SIEVE_DTYPE_F16, 40, 8, 2, 64, 64, 50, 10, 64, 0.3f, 1, 1, 1.0f, 0.0f};
    run_case(&b, 110);
    bcase d = {SIEVE_DTYPE_BF16, 100, 4, 1, 128, 64, 100, 0, 128, 0.5f, 0, 0, 1.0f, 0.0f};
    run_case(&d, 111);
}

/* The mma.sync kernels at D = 128 (on compute capability 9.0 this shape fills the GPU and
 * would take the wgmma kernels; SIEVE_CUDA_ATTN_KERNEL=mma and SIEVE_CUDA_BSP_SCORE=mma force
 * them), the attention kernel's block mode on a 3-stage ring (SIEVE_CUDA_SA_STAGES=3, the
 * tuning hook; 2 by default). */
Test(block_sparse_cuda, three_stage_ring) {
    SKIP_WITHOUT_GPU();
    cr_assert_eq(setenv("SIEVE_CUDA_SA_STAGES", "3", 1), 0);
    cr_assert_eq(setenv("SIEVE_CUDA_ATTN_KERNEL", "mma", 1), 0);
    cr_assert_eq(setenv("SIEVE_CUDA_BSP_SCORE", "mma", 1), 0);
    bcase c = {SIEVE_DTYPE_BF16, 600, 32, 8, 128, 128, 900, 300, 64, 0.2f, 1, 2, 1.0f, 0.0f};
    run_case(&c, 112);
    cr_assert_eq(unsetenv("SIEVE_CUDA_SA_STAGES"), 0);
    cr_assert_eq(unsetenv("SIEVE_CUDA_ATTN_KERNEL"), 0);
    cr_assert_eq(unsetenv("SIEVE_CUDA_BSP_SCORE"), 0);
}

/* Many corrected blocks: one tile of 64 tokens at the end of 9,000 keys, a small alpha, so
 * about 130 pooled rows (two full 64-row tiles of them and a partial one). */
static const bcase MANY_POOLED = {SIEVE_DTYPE_BF16, 64, 8, 2, 128, 128, 9000, 8936, 64,
                                  0.05f, 1, 1, 1.0f, 0.0f};

Test(block_sparse_cuda, many_pooled_rows) {
    SKIP_WITHOUT_GPU();
    run_case(&MANY_POOLED, 113);
}

/* The Hopper wgmma kernels (attn_wg.cuh; chosen where a call fills the GPU, forced here by
 * SIEVE_CUDA_ATTN_KERNEL=wgmma on shapes the automatic choice leaves to the mma.sync kernel),
 * with the block scores on wgmma too (SIEVE_CUDA_BSP_SCORE=wgmma, the default on compute
 * capability 9.0 at D = 128, set so the cases keep it): blocks of 64 and
 * 128, tiles starting mid-block, one query head a kv head (the second warpgroup of every CTA
 * without rows), three (a tile's second CTA half full), one token, fewer keys than a block,
 * alpha 1 and 0, a negative scale with pooled rows (the attention kernel negates the
 * queries; the block scores take the smallest raw score), many pooled rows; over 320
 * visible blocks (six chunks of 64 pooled keys or more: both warpgroups of the block-score
 * kernel refill their two buffers), with two query passes and with a partial second pass
 * and a negative scale; 20 query heads a kv head (a tile's rows in seven passes of the block
 * scores, the last partial); the attention kernel's rings (SIEVE_CUDA_WG_RING) spread
 * over the cases. One test a case (they run in parallel). Compute capability 9.0 only;
 * elsewhere the same cases run on the mma.sync kernels. */
static const bcase WG_CASES[] = {
    {SIEVE_DTYPE_BF16, 1000, 32, 8, 128, 128, 1000, 0, 64, 0.2f, 1, 2, 1.0f, 0.0f},
    {SIEVE_DTYPE_F16, 700, 16, 2, 128, 128, 2000, 1237, 128, 0.3f, 0, 0, 1.5f, 0.0f},
    {SIEVE_DTYPE_BF16, 300, 4, 4, 128, 128, 640, 500, 64, 0.1f, 2, 1, 1.0f, 0.0f},
    {SIEVE_DTYPE_BF16, 200, 12, 4, 128, 128, 900, 700, 64, 0.15f, 1, 1, 1.2f, 0.0f},
    {SIEVE_DTYPE_BF16, 1, 32, 8, 128, 128, 3000, 2999, 64, 0.1f, 2, 2, 1.5f, 0.0f},
    {SIEVE_DTYPE_F16, 40, 8, 2, 128, 128, 50, 10, 64, 0.3f, 1, 1, 1.0f, 0.0f},
    {SIEVE_DTYPE_BF16, 512, 8, 2, 128, 128, 1500, 988, 64, 1.0f, 0, 0, 2.0f, 0.0f},
    {SIEVE_DTYPE_F16, 256, 8, 2, 128, 128, 800, 544, 128, 0.0f, 0, 0, 1.0f, 0.0f},
    {SIEVE_DTYPE_BF16, 300, 16, 4, 128, 128, 1200, 900, 64, 0.2f, 1, 1, 1.0f, -0.08f},
    {SIEVE_DTYPE_BF16, 128, 16, 4, 128, 128, 21000, 20872, 64, 0.1f, 1, 2, 1.0f, 0.0f},
    {SIEVE_DTYPE_F16, 100, 12, 4, 128, 128, 23000, 22900, 64, 0.2f, 1, 1, 1.0f, -0.09f},
    {SIEVE_DTYPE_BF16, 40, 40, 2, 128, 128, 3000, 2960, 64, 0.2f, 1, 1, 1.0f, 0.0f},
};
/* The 64-key attention kernel's rings (STxLA); the 128-key kernel's (kSKvSV) are named in
 * WGP_CASE_TEST below. */
static const char *const WG_RING_NAMES[] = {"5x2", "6x2", "6x3"};

static void run_wg_case(const bcase *c, uint64_t seed, const char *ring) {
    cr_assert_eq(setenv("SIEVE_CUDA_ATTN_KERNEL", "wgmma", 1), 0);
    cr_assert_eq(setenv("SIEVE_CUDA_BSP_SCORE", "wgmma", 1), 0);
    cr_assert_eq(setenv("SIEVE_CUDA_WG_RING", ring, 1), 0);
    run_case(c, seed);
    cr_assert_eq(unsetenv("SIEVE_CUDA_ATTN_KERNEL"), 0);
    cr_assert_eq(unsetenv("SIEVE_CUDA_BSP_SCORE"), 0);
    cr_assert_eq(unsetenv("SIEVE_CUDA_WG_RING"), 0);
}

#define WG_CASE_TEST(i)                                                                      \
    Test(block_sparse_cuda, wgmma_kernel_##i) {                                               \
        SKIP_WITHOUT_GPU();                                                                  \
        run_wg_case(&WG_CASES[i], 120 + i, WG_RING_NAMES[i % 3]);                            \
    }
WG_CASE_TEST(0)
WG_CASE_TEST(1)
WG_CASE_TEST(2)
WG_CASE_TEST(3)
WG_CASE_TEST(4)
WG_CASE_TEST(5)
WG_CASE_TEST(6)
WG_CASE_TEST(7)
WG_CASE_TEST(8)
WG_CASE_TEST(9)
WG_CASE_TEST(10)
WG_CASE_TEST(11)

Test(block_sparse_cuda, wgmma_kernel_many_pooled) {
    SKIP_WITHOUT_GPU();
    run_wg_case(&MANY_POOLED, 130, "6x2");
}

/* The 128-key attention kernel (sa_wgp_kernel) in the block mode, blocks of 128 (a block one
 * tile): pooled rows over several tiles and a partial last one (164 and 180 visible blocks),
 * a negative scale with pooled rows, a tile's two CTAs (300 tokens x 4 heads), one token,
 * fewer keys than a block (the tile's rows clipped at n_keys), alpha 0.5 with 20 query heads
 * a kv head, and WG_CASES' two cases with blocks of 128 (alpha 0.3 without sink or window
 * blocks; alpha 0, nothing pooled); both of its rings. */
static const bcase WGP_CASES[] = {
    {SIEVE_DTYPE_BF16, 128, 16, 4, 128, 128, 21000, 20872, 128, 0.1f, 1, 2, 1.0f, 0.0f},
    {SIEVE_DTYPE_F16, 100, 12, 4, 128, 128, 23000, 22900, 128, 0.2f, 1, 1, 1.0f, -0.09f},
    {SIEVE_DTYPE_BF16, 300, 16, 4, 128, 128, 1200, 900, 128, 0.2f, 1, 1, 1.0f, -0.08f},
    {SIEVE_DTYPE_BF16, 1, 32, 8, 128, 128, 3000, 2999, 128, 0.1f, 2, 2, 1.5f, 0.0f},
    {SIEVE_DTYPE_F16, 40, 8, 2, 128, 128, 50, 10, 128, 0.3f, 1, 1, 1.0f, 0.0f},
    {SIEVE_DTYPE_BF16, 200, 40, 2, 128, 128, 5000, 4800, 128, 0.5f, 1, 1, 1.0f, 0.0f},
    {SIEVE_DTYPE_F16, 700, 16, 2, 128, 128, 2000, 1237, 128, 0.3f, 0, 0, 1.5f, 0.0f},
    {SIEVE_DTYPE_F16, 256, 8, 2, 128, 128, 800, 544, 128, 0.0f, 0, 0, 1.0f, 0.0f},
};

#define WGP_CASE_TEST(i)                                                                     \
    Test(block_sparse_cuda, wgmma128_kernel_##i) {                                            \
        SKIP_WITHOUT_GPU();                                                                  \
        run_wg_case(&WGP_CASES[i], 140 + i, i % 2 ? "k3v4" : "k3v3");                        \
    }
WGP_CASE_TEST(0)
WGP_CASE_TEST(1)
WGP_CASE_TEST(2)
WGP_CASE_TEST(3)
WGP_CASE_TEST(4)
WGP_CASE_TEST(5)
WGP_CASE_TEST(6)
WGP_CASE_TEST(7)

/* alpha 1 keeps the forced blocks and the best one; alpha 0 keeps every block, so nothing is
 * corrected (the dense answer: next test). */
Test(block_sparse_cuda, alpha_extremes) {
    SKIP_WITHOUT_GPU();
    bcase a = {SIEVE_DTYPE_BF16, 512, 8, 2, 128, 128, 1500, 988, 64, 1.0f, 0, 0, 2.0f, 0.0f};
    run_case(&a, 107);
    bcase b = {SIEVE_DTYPE_F16, 256, 8, 2, 64, 64, 800, 544, 128, 0.0f, 0, 0, 1.0f, 0.0f};
    run_case(&b, 108);
}

/* alpha 0: every visible block kept and none corrected, the same tiles in the same order as
 * dense causal attention, so the answer equals CUDA sieve_causal_attention bit for bit (a
 * shape whose CTAs are many: no slices in either), on the kernel the call chooses (on
 * compute capability 9.0 the 128-key wgmma kernel for blocks of 128; blocks of 64 take the
 * 64-key one, so the dense call is given its ring, 5x2) and on the mma.sync kernel. */
Test(block_sparse_cuda, alpha0_equals_dense) {
    SKIP_WITHOUT_GPU();
    sieve_device *gpu = NULL, *cpu = NULL;
    cr_assert_eq(sieve_device_open("cuda:0", &gpu), 0);
    cr_assert_eq(sieve_device_open("cpu:2", &cpu), 0);
    const uint32_t T = 2048, Hq = 32, Hkv = 8, D = 128, L = 2048;
    const size_t nq = (size_t)T * Hq * D, nk = (size_t)L * Hkv * D, no = (size_t)T * Hq * D;
    void *dq, *dk, *dv, *do1, *do2, *dl1, *dl2;
    cr_assert_eq(sieve_device_alloc(gpu, nq * 2, &dq), 0);
    cr_assert_eq(sieve_device_alloc(gpu, nk * 2, &dk), 0);
    cr_assert_eq(sieve_device_alloc(gpu, nk * 2, &dv), 0);
    cr_assert_eq(sieve_device_alloc(gpu, no * 4, &do1), 0);
    cr_assert_eq(sieve_device_alloc(gpu, no * 4, &do2), 0);
    cr_assert_eq(sieve_device_alloc(gpu, (size_t)T * Hq * 4, &dl1), 0);
    cr_assert_eq(sieve_device_alloc(gpu, (size_t)T * Hq * 4, &dl2), 0);
    cr_assert_eq(sieve_device_fill_normal(gpu, dq, SIEVE_DTYPE_BF16, nq, 7, 1.0f), 0);
    cr_assert_eq(sieve_device_fill_normal(gpu, dk, SIEVE_DTYPE_BF16, nk, 8, 1.0f), 0);
    cr_assert_eq(sieve_device_fill_normal(gpu, dv, SIEVE_DTYPE_BF16, nk, 9, 1.0f), 0);
    for (uint32_t run = 0; run < 4; run++) {
        const uint32_t B = run % 2 ? 128 : 64;
        if (run == 2) cr_assert_eq(setenv("SIEVE_CUDA_ATTN_KERNEL", "mma", 1), 0);
        if (B == 64)
            cr_assert_eq(setenv("SIEVE_CUDA_WG_RING", "5x2", 1), 0);
        else
            cr_assert_eq(unsetenv("SIEVE_CUDA_WG_RING"), 0);
        sieve_bsp_params p;
        sieve_bsp_params_init(&p, SIEVE_DTYPE_BF16, T, Hq, Hkv, D, D, L);
        p.block = B;
        p.alpha = 0.0f;
        sieve_bsp_stats st;
        cr_assert_eq(sieve_block_sparse_prefill(gpu, &p, dq, dk, dv, NULL, 0, do1, dl1, NULL,
                                                NULL, &st),
                     0);
        cr_assert_eq(st.kept_blocks, st.visible_blocks);
        cr_assert_eq(st.corrected_blocks, 0);
        cr_assert_eq(sieve_causal_attention(gpu, &p.attn, dq, dk, dv, NULL, 0, do2, dl2, NULL),
                     0);
        float *a = malloc(no * 4), *b = malloc(no * 4);
        cr_assert(a && b);
        cr_assert_eq(sieve_device_download(gpu, a, do1, no * 4), 0);
        cr_assert_eq(sieve_device_download(gpu, b, do2, no * 4), 0);
        size_t diff = 0;
        for (size_t i = 0; i < no; i++) diff += memcmp(&a[i], &b[i], 4) != 0;
        cr_assert_eq(diff, 0, "block %u (%s): %zu of %zu outputs differ from dense", B,
                     run < 2 ? "chosen kernel" : "mma.sync", diff, no);
        cr_assert_eq(sieve_device_download(gpu, a, dl1, (size_t)T * Hq * 4), 0);
        cr_assert_eq(sieve_device_download(gpu, b, dl2, (size_t)T * Hq * 4), 0);
        cr_assert_eq(memcmp(a, b, (size_t)T * Hq * 4), 0, "block %u: lse differs", B);
        free(a);
        free(b);
    }
    cr_assert_eq(unsetenv("SIEVE_CUDA_ATTN_KERNEL"), 0);
    cr_assert_eq(unsetenv("SIEVE_CUDA_WG_RING"), 0);
    void *bufs[] = {dq, dk, dv, do1, do2, dl1, dl2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) sieve_device_free(gpu, bufs[i]);
    sieve_device_close(gpu);
    sieve_device_close(cpu);
}

Test(block_sparse_cuda, errors) {
    SKIP_WITHOUT_GPU();
    sieve_device *gpu = NULL;
    cr_assert_eq(sieve_device_open("cuda:0", &gpu), 0);
    sieve_bsp_params p;
    sieve_bsp_params_init(&p, SIEVE_DTYPE_BF16, 100, 4, 1, 128, 128, 100);
    size_t sb = 0;
    p.block = 96;
    cr_assert_eq(sieve_bsp_scratch_size(gpu, &p, &sb), SIEVE_ENOTSUP);
    p.block = 0;
    cr_assert_eq(sieve_bsp_scratch_size(gpu, &p, &sb), SIEVE_EINVAL);
    p.block = 64;
    p.attn.dtype = SIEVE_DTYPE_F32;
    cr_assert_eq(sieve_bsp_scratch_size(gpu, &p, &sb), SIEVE_ENOTSUP);
    p.attn.dtype = SIEVE_DTYPE_BF16;
    p.attn.head_dim = 96;
    cr_assert_eq(sieve_bsp_scratch_size(gpu, &p, &sb), SIEVE_ENOTSUP);
    p.attn.head_dim = 128;
    p.alpha = 1.5f;
    cr_assert_eq(sieve_bsp_scratch_size(gpu, &p, &sb), SIEVE_EINVAL);
    p.alpha = 0.1f;
    cr_assert_eq(sieve_bsp_scratch_size(gpu, &p, &sb), 0);
    cr_assert(sb > 0);
    void *dq, *dk, *dv, *dout, *dc, *db, *scratch;
    cr_assert_eq(sieve_device_alloc(gpu, 100 * 4 * 128 * 2 + 64, &dq), 0);
    cr_assert_eq(sieve_device_alloc(gpu, 100 * 128 * 2 + 64, &dk), 0);
    cr_assert_eq(sieve_device_alloc(gpu, 100 * 128 * 2 + 64, &dv), 0);
    cr_assert_eq(sieve_device_alloc(gpu, 100 * 4 * 128 * 4, &dout), 0);
    cr_assert_eq(sieve_device_alloc(gpu, 64, &dc), 0);
    cr_assert_eq(sieve_device_alloc(gpu, 4096, &db), 0);
    cr_assert_eq(sieve_device_alloc(gpu, sb, &scratch), 0);
    cr_assert_eq(sieve_device_fill_normal(gpu, dq, SIEVE_DTYPE_BF16, 100 * 4 * 128, 1, 1.0f), 0);
    cr_assert_eq(sieve_device_fill_normal(gpu, dk, SIEVE_DTYPE_BF16, 100 * 128, 2, 1.0f), 0);
    cr_assert_eq(sieve_device_fill_normal(gpu, dv, SIEVE_DTYPE_BF16, 100 * 128, 3, 1.0f), 0);
    cr_assert_eq(sieve_block_sparse_prefill(gpu, &p, (char *)dq + 8, dk, dv, NULL, 0, dout, NULL,
                                            NULL, NULL, NULL),
                 SIEVE_ENOTSUP);
    cr_assert_eq(sieve_block_sparse_prefill(gpu, &p, dq, dk, dv, scratch, sb - 1, dout, NULL,
                                            NULL, NULL, NULL),
                 SIEVE_ENOSPC);
    cr_assert_eq(sieve_block_sparse_prefill(gpu, &p, dq, dk, dv, (char *)scratch + 16, sb, dout,
                                            NULL, NULL, NULL, NULL),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_block_sparse_prefill(gpu, &p, dq, dk, dv, NULL, 0, dout, NULL,
                                            (uint32_t *)((char *)dc + 2), db, NULL),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_block_sparse_prefill(gpu, &p, dq, dk, dv, NULL, 0, dout, NULL, dc, NULL,
                                            NULL),
                 SIEVE_EINVAL);
    /* and a good call after the errors: the context is usable */
    sieve_bsp_stats st;
    cr_assert_eq(sieve_block_sparse_prefill(gpu, &p, dq, dk, dv, scratch, sb, dout, NULL, dc, db,
                                            &st),
                 0);
    cr_assert(st.kept_blocks >= 1 && st.kept_blocks <= st.visible_blocks);
    void *bufs[] = {dq, dk, dv, dout, dc, db, scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) sieve_device_free(gpu, bufs[i]);
    sieve_device_close(gpu);
}

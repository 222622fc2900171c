/* test_attention_cuda.c: CUDA dense causal attention against the float64 reference (up to the
 * bound sieve_kernels.h states for the sparse kernels: the probabilities rounded to the
 * storage dtype, plus the float32 dots) and against the CPU backend, on prefills, chunks of
 * a longer prefill, rows clipped at n_keys, 1 to 128 query heads a kv head, both head
 * dimensions, decode-size calls (the keys split over several thread blocks), large
 * scores, and the Hopper wgmma kernel forced on small shapes. Skips, saying so, where no
 * CUDA device is visible. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sieve_kernels.h"

static int have_gpu(void) { return sieve_cuda_device_count() > 0; }

#define SKIP_WITHOUT_GPU()                                                                   \
    do {                                                                                     \
        if (!have_gpu())                                                                     \
            cr_skip_test("no CUDA device visible: GPU dense attention tests skipped");     \
    } while (0)

typedef struct acase {
    sieve_dtype dtype;
    uint32_t T, Hq, Hkv, D, DV, L, pos0;
    float qscale;
    float scale; /* the softmax scale (0: 1 / sqrt(head_dim)) */
} acase;

static double elem(const void *a, sieve_dtype dt, size_t i) {
    switch (dt) {
    case SIEVE_DTYPE_F16: return sieve_f16_to_f32(((const uint16_t *)a)[i]);
    case SIEVE_DTYPE_BF16: return sieve_bf16_to_f32(((const uint16_t *)a)[i]);
    default: return ((const float *)a)[i];
    }
}

static void run_case(const acase *c, uint64_t seed) {
    char desc[160];
    snprintf(desc, sizeof desc, "%s T=%u Hq=%u Hkv=%u D=%u DV=%u L=%u pos0=%u",
             sieve_dtype_name(c->dtype), c->T, c->Hq, c->Hkv, c->D, c->DV, c->L, c->pos0);
    sieve_device *cpu = NULL, *gpu = NULL;
    cr_assert_eq(sieve_device_open("cpu:2", &cpu), 0);
    cr_assert_eq(sieve_device_open("cuda:0", &gpu), 0);
    const size_t es = sieve_dtype_size(c->dtype);
    const size_t nq = (size_t)c->T * c->Hq * c->D, nk = (size_t)c->L * c->Hkv * c->D;
    const size_t nv = (size_t)c->L * c->Hkv * c->DV, no = (size_t)c->T * c->Hq * c->DV;
    const size_t nl = (size_t)c->T * c->Hq;
    void *hq = malloc(nq * es), *hk = malloc(nk * es), *hv = malloc(nv * es);
    double *rout = malloc(no * 8), *rlse = malloc(nl * 8);
    float *out = malloc(no * 4), *lse = malloc(nl * 4), *cout = malloc(no * 4),
          *clse = malloc(nl * 4);
    cr_assert(hq && hk && hv && rout && rlse && out && lse && cout && clse);
    cr_assert_eq(sieve_device_fill_normal(cpu, hq, c->dtype, nq, seed + 1, c->qscale), 0);
    cr_assert_eq(sieve_device_fill_normal(cpu, hk, c->dtype, nk, seed + 2, 1.0f), 0);
    cr_assert_eq(sieve_device_fill_normal(cpu, hv, c->dtype, nv, seed + 3, 1.0f), 0);
    sieve_attn_params p;
    sieve_attn_params_init(&p, c->dtype, c->T, c->Hq, c->Hkv, c->D, c->DV, c->L);
    p.pos0 = c->pos0;
    p.scale = c->scale;
    cr_assert_eq(sieve_causal_attention_reference(&p, hq, hk, hv, rout, rlse), 0, "%s", desc);
    cr_assert_eq(sieve_causal_attention(cpu, &p, hq, hk, hv, NULL, 0, cout, clse, NULL), 0);

    void *dq, *dk, *dv, *dout, *dlse, *scratch = NULL;
    cr_assert_eq(sieve_device_alloc(gpu, nq * es, &dq), 0);
    cr_assert_eq(sieve_device_alloc(gpu, nk * es, &dk), 0);
    cr_assert_eq(sieve_device_alloc(gpu, nv * es, &dv), 0);
    cr_assert_eq(sieve_device_alloc(gpu, no * 4, &dout), 0);
    cr_assert_eq(sieve_device_alloc(gpu, nl * 4, &dlse), 0);
    cr_assert_eq(sieve_device_upload(gpu, dq, hq, nq * es), 0);
    cr_assert_eq(sieve_device_upload(gpu, dk, hk, nk * es), 0);
    cr_assert_eq(sieve_device_upload(gpu, dv, hv, nv * es), 0);
    size_t sb = 0;
    cr_assert_eq(sieve_causal_attn_scratch_size(gpu, &p, &sb), 0, "%s", desc);
    if (sb) cr_assert_eq(sieve_device_alloc(gpu, sb, &scratch), 0);
    double ms = -1.0;
    cr_assert_eq(sieve_causal_attention(gpu, &p, dq, dk, dv, scratch, sb, dout, dlse, &ms), 0,
                 "%s", desc);
    cr_assert(ms >= 0.0);
    cr_assert_eq(sieve_device_download(gpu, out, dout, no * 4), 0);
    cr_assert_eq(sieve_device_download(gpu, lse, dlse, nl * 4), 0);

    const double u = c->dtype == SIEVE_DTYPE_BF16 ? 0x1p-9 : 0x1p-11;
    const double scale = fabs(c->scale != 0.0f ? (double)c->scale : 1.0 / sqrt((double)c->D));
    const uint32_t R = c->Hq / c->Hkv;
    for (uint32_t t = 0; t < c->T; t++) {
        const uint64_t v64 = (uint64_t)c->pos0 + t + 1;
        const uint32_t vis = v64 < c->L ? (uint32_t)v64 : c->L;
        for (uint32_t h = 0; h < c->Hq; h++) {
            const uint32_t g = h / R;
            double vmax = 0.0, mag = 0.0;
            for (uint32_t s = 0; s < vis; s++) {
                for (uint32_t d = 0; d < c->DV; d++)
                    vmax = fmax(vmax, fabs(elem(hv, c->dtype, ((size_t)s * c->Hkv + g) * c->DV + d)));
                double m = 0.0;
                for (uint32_t d = 0; d < c->D; d++)
                    m += fabs(elem(hq, c->dtype, ((size_t)t * c->Hq + h) * c->D + d) *
                              elem(hk, c->dtype, ((size_t)s * c->Hkv + g) * c->D + d));
                mag = fmax(mag, m);
            }
            const double dmax = scale * mag * (c->D + 2) * 0x1p-24;
            const double tol = (2.0 * u + 4.0 * dmax + 1e-5) * vmax;
            const size_t o = ((size_t)t * c->Hq + h) * c->DV;
            for (uint32_t d = 0; d < c->DV; d++) {
                const double err = fabs((double)out[o + d] - rout[o + d]);
                cr_assert(isfinite(out[o + d]) && err <= tol,
                          "%s t %u h %u d %u: out %.9g, reference %.9g (error %.3g > %.3g)", desc,
                          t, h, d, out[o + d], rout[o + d], err, tol);
                /* the CPU keeps float32 probabilities: within the same bound of the GPU */
                cr_assert(fabs((double)out[o + d] - cout[o + d]) <= tol + 1e-5 * vmax,
                          "%s t %u h %u d %u: GPU %.9g, CPU %.9g", desc, t, h, d, out[o + d],
                          cout[o + d]);
            }
            const double rl = rlse[(size_t)t * c->Hq + h], gl = lse[(size_t)t * c->Hq + h];
            cr_assert(fabs(gl - rl) <= 1e-5 * (1.0 + fabs(rl)) + 4.0 * dmax,
                      "%s t %u h %u: lse %.9g, reference %.9g", desc, t, h, gl, rl);
        }
    }
    if (scratch) sieve_device_free(gpu, scratch);
    sieve_device_free(gpu, dq);
    sieve_device_free(gpu, dk);
    sieve_device_free(gpu, dv);
    sieve_device_free(gpu, dout);
    sieve_device_free(gpu, dlse);
    sieve_device_close(gpu);
    sieve_device_close(cpu);
    free(hq);
    free(hk);
    free(hv);
    free(rout);
    free(rlse);
    free(out);
    free(lse);
    free(cout);
    free(clse);
}

/* A prefill, GQA 32/8 (16 tokens a CTA), T not a multiple of 16. */
Test(attention_cuda, prefill_gqa_bf16) {
    SKIP_WITHOUT_GPU();
    acase c = {SIEVE_DTYPE_BF16, 333, 32, 8, 128, 128, 333, 0, 1.0f, 0.0f};
    run_case(&c, 11);
}

/* A chunk of a longer prefill (pos0 > 0), 8 heads a kv head, head_dim 64, v_dim 128. */
Test(attention_cuda, chunk_f16) {
    SKIP_WITHOUT_GPU();
    acase c = {SIEVE_DTYPE_F16, 150, 16, 2, 64, 128, 1400, 1000, 1.0f, 0.0f};
    run_case(&c, 12);
}

/* Queries past the last key (rows clipped at n_keys); one head a kv head (64 tokens a CTA). */
Test(attention_cuda, clipped_mha_bf16) {
    SKIP_WITHOUT_GPU();
    acase c = {SIEVE_DTYPE_BF16, 200, 2, 2, 64, 64, 700, 600, 1.0f, 0.0f};
    run_case(&c, 13);
}

/* 64 and 128 query heads on one kv head (a token fills one or two CTAs), v_dim 64. */
Test(attention_cuda, many_heads_f16) {
    SKIP_WITHOUT_GPU();
    acase a = {SIEVE_DTYPE_F16, 40, 64, 1, 128, 64, 900, 500, 1.0f, 0.0f};
    run_case(&a, 14);
    acase b = {SIEVE_DTYPE_BF16, 9, 128, 1, 64, 64, 300, 0, 1.0f, 0.0f};
    run_case(&b, 15);
}

/* Decode-size calls: the keys split over several thread blocks and merged. */
Test(attention_cuda, decode_slices_bf16) {
    SKIP_WITHOUT_GPU();
    acase a = {SIEVE_DTYPE_BF16, 1, 32, 8, 128, 128, 6000, 5999, 1.0f, 0.0f};
    run_case(&a, 16);
    acase b = {SIEVE_DTYPE_F16, 5, 8, 8, 64, 64, 4099, 4090, 1.0f, 0.0f};
    run_case(&b, 17);
}

/* Scaled scores in the tens to hundreds. */
Test(attention_cuda, large_scores_bf16) {
    SKIP_WITHOUT_GPU();
    acase c = {SIEVE_DTYPE_BF16, 64, 8, 2, 128, 128, 500, 436, 80.0f, 0.0f};
    run_case(&c, 18);
}

/* Explicit scales, one negative (the softmax then favours the smallest dots). */
Test(attention_cuda, explicit_scales_f16) {
    SKIP_WITHOUT_GPU();
    acase a = {SIEVE_DTYPE_F16, 70, 16, 4, 128, 64, 300, 230, 1.0f, -0.15f};
    run_case(&a, 19);
    acase b = {SIEVE_DTYPE_BF16, 130, 8, 8, 64, 128, 130, 0, 1.0f, 0.3f};
    run_case(&b, 20);
}

/* The Hopper wgmma kernel (attn_wg.cuh; chosen where a call fills the GPU, forced here by
 * SIEVE_CUDA_ATTN_KERNEL=wgmma): GQA with T not a multiple of a CTA's tokens, one query head
 * a kv head (a CTA's rows over 128 tokens, the last CTA part full), 16 (a token one warp's
 * 16 rows), a chunk of a longer prefill with rows clipped at n_keys, one token, large scores
 * and a negative scale, 128 query heads on one kv head (a token both warpgroups' rows) and
 * 3 (tokens across warp boundaries), a negative scale on bfloat16 (the kernel negates the
 * queries); every case on both wgmma kernels, the 64-key tiles' rings and the 128-key
 * tiles' (SIEVE_CUDA_WG_RING) spread over the cases. Compute capability 9.0
 * only; elsewhere the mma.sync kernel. */
Test(attention_cuda, wgmma_kernel) {
    SKIP_WITHOUT_GPU();
    cr_assert_eq(setenv("SIEVE_CUDA_ATTN_KERNEL", "wgmma", 1), 0);
    const acase cs[] = {
        {SIEVE_DTYPE_BF16, 333, 32, 8, 128, 128, 333, 0, 1.0f, 0.0f},
        {SIEVE_DTYPE_F16, 300, 4, 4, 128, 128, 300, 0, 1.0f, 0.0f},
        {SIEVE_DTYPE_BF16, 40, 32, 2, 128, 128, 900, 500, 1.0f, 0.0f},
        {SIEVE_DTYPE_F16, 250, 8, 2, 128, 128, 1100, 1000, 1.0f, 0.0f},
        {SIEVE_DTYPE_BF16, 1, 32, 8, 128, 128, 6000, 5999, 1.0f, 0.0f},
        {SIEVE_DTYPE_BF16, 64, 8, 2, 128, 128, 500, 436, 80.0f, 0.0f},
        {SIEVE_DTYPE_F16, 70, 16, 4, 128, 128, 300, 230, 1.0f, -0.15f},
        {SIEVE_DTYPE_BF16, 9, 128, 1, 128, 128, 300, 100, 1.0f, 0.0f},
        {SIEVE_DTYPE_F16, 100, 12, 4, 128, 128, 700, 600, 1.0f, 0.0f},
        {SIEVE_DTYPE_BF16, 200, 32, 8, 128, 128, 700, 500, 1.0f, -0.1f},
    };
    static const char *const rings[] = {"5x2", "6x2", "6x3"}, *const krings[] = {"k3v3", "k3v4"};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        cr_assert_eq(setenv("SIEVE_CUDA_WG_RING", rings[i % 3], 1), 0);
        run_case(&cs[i], 30 + i);
        cr_assert_eq(setenv("SIEVE_CUDA_WG_RING", krings[i % 2], 1), 0);
        run_case(&cs[i], 30 + i);
    }
    cr_assert_eq(unsetenv("SIEVE_CUDA_ATTN_KERNEL"), 0);
    cr_assert_eq(unsetenv("SIEVE_CUDA_WG_RING"), 0);
}

/* The wgmma kernels' rings (SIEVE_CUDA_WG_RING, a tuning hook) change when tiles load, not
 * what is computed: every ring's output and lse equal its kernel's first ring's bit for bit
 * (5x2 for the 64-key tiles, k3v3 for the 128-key tiles), at a shape that takes a wgmma
 * kernel by itself (on other GPUs every ring gives the mma.sync kernel's answer); the two
 * kernels' outputs agree within the rounding of P to bfloat16 at different running maxima. */
Test(attention_cuda, wgmma_rings_equal) {
    SKIP_WITHOUT_GPU();
    sieve_device *gpu = NULL;
    cr_assert_eq(sieve_device_open("cuda:0", &gpu), 0);
    const uint32_t T = 2500, Hq = 32, Hkv = 8, D = 128, L = 2600;
    const size_t nq = (size_t)T * Hq * D, nk = (size_t)L * Hkv * D, nl = (size_t)T * Hq;
    void *dq, *dk, *dv, *dout, *dlse;
    cr_assert_eq(sieve_device_alloc(gpu, nq * 2, &dq), 0);
    cr_assert_eq(sieve_device_alloc(gpu, nk * 2, &dk), 0);
    cr_assert_eq(sieve_device_alloc(gpu, nk * 2, &dv), 0);
    cr_assert_eq(sieve_device_alloc(gpu, nq * 4, &dout), 0);
    cr_assert_eq(sieve_device_alloc(gpu, nl * 4, &dlse), 0);
    cr_assert_eq(sieve_device_fill_normal(gpu, dq, SIEVE_DTYPE_BF16, nq, 41, 1.5f), 0);
    cr_assert_eq(sieve_device_fill_normal(gpu, dk, SIEVE_DTYPE_BF16, nk, 42, 1.0f), 0);
    cr_assert_eq(sieve_device_fill_normal(gpu, dv, SIEVE_DTYPE_BF16, nk, 43, 1.0f), 0);
    sieve_attn_params p;
    sieve_attn_params_init(&p, SIEVE_DTYPE_BF16, T, Hq, Hkv, D, D, L);
    p.pos0 = L - T;
    float *o0 = malloc(nq * 4), *l0 = malloc(nl * 4), *o1 = malloc(nq * 4), *l1 = malloc(nl * 4);
    float *ok = malloc(nq * 4);
    cr_assert(o0 && l0 && o1 && l1 && ok);
    static const char *const rings[] = {"5x2", "6x2", "6x3", "k3v3", "k3v4"};
    for (int r = 0; r < 5; r++) {
        const int first = r == 0 || r == 3; /* each kernel's first ring */
        cr_assert_eq(setenv("SIEVE_CUDA_WG_RING", rings[r], 1), 0);
        cr_assert_eq(sieve_device_fill_normal(gpu, dout, SIEVE_DTYPE_F32, nq, 50 + r, 1.0f), 0);
        cr_assert_eq(sieve_device_fill_normal(gpu, dlse, SIEVE_DTYPE_F32, nl, 60 + r, 1.0f), 0);
        cr_assert_eq(sieve_causal_attention(gpu, &p, dq, dk, dv, NULL, 0, dout, dlse, NULL), 0);
        cr_assert_eq(sieve_device_download(gpu, first ? o0 : o1, dout, nq * 4), 0);
        cr_assert_eq(sieve_device_download(gpu, first ? l0 : l1, dlse, nl * 4), 0);
        if (r == 0) memcpy(ok, o0, nq * 4);
        if (first) {
            size_t finite = 0;
            for (size_t i = 0; i < nq; i++) finite += isfinite(o0[i]) && o0[i] != 0.f;
            cr_assert(finite > nq / 2, "ring %s: only %zu of %zu outputs finite, non-zero",
                      rings[r], finite, nq);
            if (r == 3) { /* the 128-key kernel against the 64-key one */
                double worst = 0.0, sum = 0.0;
                for (size_t i = 0; i < nq; i++) {
                    const double d = fabs((double)o0[i] - (double)ok[i]);
                    worst = d > worst ? d : worst;
                    sum += d;
                }
                /* each within run_case's bound of the exact answer, about 2 u |v|max (u =
                 * 2^-9 for bfloat16; |v| of these 2.6 million normal draws below 6) */
                cr_assert(worst < 4 * 0x1p-9 * 6, "k3v3 against 5x2: max difference %g", worst);
                cr_assert(sum / (double)nq < 1e-3, "k3v3 against 5x2: mean difference %g",
                          sum / (double)nq);
            }
            continue;
        }
        size_t diff = 0;
        for (size_t i = 0; i < nq; i++) diff += memcmp(&o0[i], &o1[i], 4) != 0;
        cr_assert_eq(diff, 0, "ring %s: %zu of %zu outputs differ from ring %s", rings[r], diff,
                     nq, rings[r < 3 ? 0 : 3]);
        cr_assert_eq(memcmp(l0, l1, nl * 4), 0, "ring %s: lse differs from ring %s", rings[r],
                     rings[r < 3 ? 0 : 3]);
    }
    cr_assert_eq(unsetenv("SIEVE_CUDA_WG_RING"), 0);
    free(ok);
    free(o0);
    free(l0);
    free(o1);
    free(l1);
    void *bufs[] = {dq, dk, dv, dout, dlse};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) sieve_device_free(gpu, bufs[i]);
    sieve_device_close(gpu);
}

Test(attention_cuda, errors) {
    SKIP_WITHOUT_GPU();
    sieve_device *gpu = NULL;
    cr_assert_eq(sieve_device_open("cuda:0", &gpu), 0);
    sieve_attn_params p;
    sieve_attn_params_init(&p, SIEVE_DTYPE_BF16, 4, 4, 1, 128, 128, 100);
    size_t sb = 0;
    p.dtype = SIEVE_DTYPE_F32;
    cr_assert_eq(sieve_causal_attn_scratch_size(gpu, &p, &sb), SIEVE_ENOTSUP);
    p.dtype = SIEVE_DTYPE_BF16;
    p.head_dim = 96;
    cr_assert_eq(sieve_causal_attn_scratch_size(gpu, &p, &sb), SIEVE_ENOTSUP);
    p.head_dim = 128;
    p.q_heads = 6; /* not a multiple of 4 kv heads */
    p.kv_heads = 4;
    cr_assert_eq(sieve_causal_attn_scratch_size(gpu, &p, &sb), SIEVE_EINVAL);
    p.q_heads = 8192; /* more than 4,096 query heads a kv head */
    p.kv_heads = 1;
    cr_assert_eq(sieve_causal_attn_scratch_size(gpu, &p, &sb), SIEVE_ENOTSUP);
    p.q_heads = 4;
    void *dq, *dk, *dv, *dout;
    cr_assert_eq(sieve_device_alloc(gpu, 4 * 4 * 128 * 2 + 64, &dq), 0);
    cr_assert_eq(sieve_device_alloc(gpu, 100 * 128 * 2 + 64, &dk), 0);
    cr_assert_eq(sieve_device_alloc(gpu, 100 * 128 * 2 + 64, &dv), 0);
    cr_assert_eq(sieve_device_alloc(gpu, 4 * 4 * 128 * 4, &dout), 0);
    cr_assert_eq(sieve_causal_attention(gpu, &p, (char *)dq + 8, dk, dv, NULL, 0, dout, NULL,
                                        NULL),
                 SIEVE_ENOTSUP);
    cr_assert_eq(sieve_causal_attention(gpu, &p, dq, dk, dv, (char *)dq + 16, 1 << 20, dout,
                                        NULL, NULL),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_causal_attention(gpu, &p, dq, dk, dv, NULL, 0, (float *)((char *)dout + 2),
                                        NULL, NULL),
                 SIEVE_EINVAL);
    sieve_device_free(gpu, dq);
    sieve_device_free(gpu, dk);
    sieve_device_free(gpu, dv);
    sieve_device_free(gpu, dout);
    sieve_device_close(gpu);
}

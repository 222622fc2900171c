/* test_sparse_attn_cuda.c: CUDA grouped sparse attention against the float64 reference (up to
 * the bound sieve_kernels.h states: the probabilities rounded to the storage dtype, plus
 * the float32 dots) for every group size run (group 1 is per-query), the CPU backend's
 * union statistics against the GPU's, on overlapping, disjoint, padded, duplicated, empty
 * and out-of-range rows, every row/column split of the kernel, positions past one union
 * window, and large scores. Skips, saying so, where no CUDA device is visible. */
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
            cr_skip_test("no CUDA device visible: GPU sparse-attention tests skipped");    \
    } while (0)

typedef enum idx_kind {
    IDX_OVERLAP,  /* a group shares a base set; each token swaps about 1 in 8 for its own */
    IDX_DISJOINT, /* every token draws its own positions */
    IDX_MESSY,    /* overlap plus -1 padding, out-of-range entries, repeats, empty rows */
    IDX_CAUSAL,   /* token t draws from [0, L - T + t]: neighbours see nearly the same keys */
    IDX_HIGH,     /* every token draws from the last 100,000 keys (and a few rows only -1) */
} idx_kind;

typedef struct scase {
    sieve_dtype dtype;
    uint32_t T, Hq, Hkv, D, DV, L, k;
    idx_kind kind;
    float qscale;      /* multiplies q (large scores) */
    uint32_t groups[4]; /* groups to run (0 ends the list); each is compared with the reference */
    float scale;       /* the softmax scale (0: 1 / sqrt(head_dim)) */
} scase;

static double elem(const void *a, sieve_dtype dt, size_t i) {
    switch (dt) {
    case SIEVE_DTYPE_F16: return sieve_f16_to_f32(((const uint16_t *)a)[i]);
    case SIEVE_DTYPE_BF16: return sieve_bf16_to_f32(((const uint16_t *)a)[i]);
    default: return ((const float *)a)[i];
    }
}

static int32_t *make_idx(const scase *c, uint64_t seed) {
    kt_rng r = {seed};
    int32_t *idx = malloc((size_t)c->T * c->k * 4);
    int32_t *base = malloc((size_t)c->k * 4);
    cr_assert(idx && base);
    for (uint32_t t = 0; t < c->T; t++) {
        int32_t *row = idx + (size_t)t * c->k;
        if (t % 16 == 0)
            for (uint32_t i = 0; i < c->k; i++) base[i] = (int32_t)(kt_next(&r) % c->L);
        for (uint32_t i = 0; i < c->k; i++) {
            switch (c->kind) {
            case IDX_DISJOINT: row[i] = (int32_t)(kt_next(&r) % c->L); break;
            case IDX_HIGH:
                row[i] = t % 5 == 4 ? -1 : (int32_t)(c->L - 1 - kt_next(&r) % 100000);
                break;
            case IDX_CAUSAL: {
                const uint32_t vis = c->L - c->T + t + 1;
                row[i] = (int32_t)(kt_next(&r) % 8 ? (uint32_t)base[i] % vis
                                                   : kt_next(&r) % vis);
                break;
            }
            default:
                row[i] = kt_next(&r) % 8 ? base[i] : (int32_t)(kt_next(&r) % c->L);
                break;
            }
        }
        if (c->kind == IDX_MESSY) {
            if (t % 7 == 3) /* empty row */
                for (uint32_t i = 0; i < c->k; i++) row[i] = -1;
            for (uint32_t i = c->k - c->k / 4; i < c->k; i++) row[i] = -1; /* padding */
            if (c->k >= 8) {
                row[0] = (int32_t)c->L;         /* out of range */
                row[1] = INT32_MIN;
                row[2] = row[3];                 /* a repeat */
                row[4] = INT32_MAX;
            }
        }
    }
    free(base);
    return idx;
}

/* Checks one output against the float64 reference with the header's bound. */
static void check_against_ref(const scase *c, uint32_t G, const void *q, const void *keys,
                              const void *vals, const int32_t *idx, const float *out,
                              const float *lse, const double *rout, const double *rlse) {
    const double u = c->dtype == SIEVE_DTYPE_BF16 ? 0x1p-9 : 0x1p-11;
    const double scale = fabs(c->scale != 0.0f ? (double)c->scale : 1.0 / sqrt((double)c->D));
    const uint32_t R = c->Hq / c->Hkv;
    for (uint32_t t = 0; t < c->T; t++) {
        const int32_t *row = idx + (size_t)t * c->k;
        for (uint32_t h = 0; h < c->Hq; h++) {
            const uint32_t g = h / R;
            /* the largest |value| and the largest sum |q k| the token's set reads */
            double vmax = 0.0, mag = 0.0;
            int any = 0;
            for (uint32_t i = 0; i < c->k; i++) {
                if (row[i] < 0 || (uint32_t)row[i] >= c->L) continue;
                any = 1;
                const size_t s = (size_t)row[i];
                for (uint32_t d = 0; d < c->DV; d++) {
                    const double v = fabs(elem(vals, c->dtype, (s * c->Hkv + g) * c->DV + d));
                    if (v > vmax) vmax = v;
                }
                double m = 0.0;
                for (uint32_t d = 0; d < c->D; d++)
                    m += fabs(elem(q, c->dtype, ((size_t)t * c->Hq + h) * c->D + d) *
                              elem(keys, c->dtype, (s * c->Hkv + g) * c->D + d));
                if (m > mag) mag = m;
            }
            /* the dots' float32 error moves each probability by up to about 2 dmax */
            const double dmax = scale * mag * (c->D + 2) * 0x1p-24;
            const double tol = (2.0 * u + 4.0 * dmax + 1e-5) * vmax + 1e-30;
            const size_t o = ((size_t)t * c->Hq + h) * c->DV;
            for (uint32_t d = 0; d < c->DV; d++) {
                const double err = fabs((double)out[o + d] - rout[o + d]);
                cr_assert(isfinite(out[o + d]) && err <= tol,
                          "group %u t %u h %u d %u: out %.9g, reference %.9g (error %.3g > %.3g)",
                          G, t, h, d, out[o + d], rout[o + d], err, tol);
            }
            const double rl = rlse[(size_t)t * c->Hq + h], gl = lse[(size_t)t * c->Hq + h];
            if (!any) {
                cr_assert(isinf(rl) && rl < 0);
                cr_assert(isinf(gl) && gl < 0, "group %u t %u h %u: empty row lse %g", G, t, h,
                          gl);
                for (uint32_t d = 0; d < c->DV; d++) cr_assert_eq(out[o + d], 0.0f);
            } else {
                const double ltol = 1e-5 * (1.0 + fabs(rl)) + 4.0 * dmax;
                cr_assert(fabs(gl - rl) <= ltol, "group %u t %u h %u: lse %.9g, reference %.9g",
                          G, t, h, gl, rl);
            }
        }
    }
}

static void run_case(const scase *c, uint64_t seed) {
    sieve_device *cpu = NULL, *gpu = NULL;
    cr_assert_eq(sieve_device_open("cpu:2", &cpu), 0);
    cr_assert_eq(sieve_device_open("cuda:0", &gpu), 0);
    const size_t es = sieve_dtype_size(c->dtype);
    const size_t nq = (size_t)c->T * c->Hq * c->D, nk = (size_t)c->L * c->Hkv * c->D;
    const size_t nv = (size_t)c->L * c->Hkv * c->DV, no = (size_t)c->T * c->Hq * c->DV;
    const size_t nl = (size_t)c->T * c->Hq, ni = (size_t)c->T * c->k;
    void *hq = malloc(nq * es), *hk = malloc(nk * es), *hv = malloc(nv * es);
    cr_assert(hq && hk && hv);
    cr_assert_eq(sieve_device_fill_normal(cpu, hq, c->dtype, nq, seed + 1, c->qscale), 0);
    cr_assert_eq(sieve_device_fill_normal(cpu, hk, c->dtype, nk, seed + 2, 1.0f), 0);
    cr_assert_eq(sieve_device_fill_normal(cpu, hv, c->dtype, nv, seed + 3, 1.0f), 0);
    int32_t *idx = make_idx(c, seed + 4);

    sieve_sparse_attn_params p;
    sieve_sparse_attn_params_init(&p, c->dtype, c->T, c->Hq, c->Hkv, c->D, c->DV, c->L, c->k);
    p.scale = c->scale;
    double *rout = malloc(no * 8), *rlse = malloc(nl * 8);
    float *out = malloc(no * 4), *lse = malloc(nl * 4), *cout = malloc(no * 4),
          *clse = malloc(nl * 4);
    cr_assert(rout && rlse && out && lse && cout && clse);
    cr_assert_eq(sieve_sparse_attention_reference(&p, hq, hk, hv, idx, rout, rlse), 0);

    void *dq, *dk, *dv, *di, *dout, *dlse;
    cr_assert_eq(sieve_device_alloc(gpu, nq * es, &dq), 0);
    cr_assert_eq(sieve_device_alloc(gpu, nk * es, &dk), 0);
    cr_assert_eq(sieve_device_alloc(gpu, nv * es, &dv), 0);
    cr_assert_eq(sieve_device_alloc(gpu, ni * 4, &di), 0);
    cr_assert_eq(sieve_device_alloc(gpu, no * 4, &dout), 0);
    cr_assert_eq(sieve_device_alloc(gpu, nl * 4, &dlse), 0);
    cr_assert_eq(sieve_device_upload(gpu, dq, hq, nq * es), 0);
    cr_assert_eq(sieve_device_upload(gpu, dk, hk, nk * es), 0);
    cr_assert_eq(sieve_device_upload(gpu, dv, hv, nv * es), 0);
    cr_assert_eq(sieve_device_upload(gpu, di, idx, ni * 4), 0);

    for (int gi = 0; gi < 4 && c->groups[gi]; gi++) {
        const uint32_t G = c->groups[gi];
        p.group = G;
        size_t sb = 0;
        cr_assert_eq(sieve_sparse_attn_scratch_size(gpu, &p, &sb), 0);
        void *scratch = NULL;
        if (gi % 2 == 0) cr_assert_eq(sieve_device_alloc(gpu, sb, &scratch), 0);
        sieve_sparse_attn_stats gs, cs;
        cr_assert_eq(sieve_sparse_attention(gpu, &p, dq, dk, dv, di, scratch, sb, dout, dlse,
                                            &gs),
                     0, "group %u", G);
        cr_assert_eq(sieve_device_download(gpu, out, dout, no * 4), 0);
        cr_assert_eq(sieve_device_download(gpu, lse, dlse, nl * 4), 0);
        check_against_ref(c, G, hq, hk, hv, idx, out, lse, rout, rlse);
        /* the CPU backend's counts of the same unions */
        cr_assert_eq(sieve_sparse_attention(cpu, &p, hq, hk, hv, idx, NULL, 0, cout, clse, &cs),
                     0);
        cr_assert_eq(gs.groups, (uint64_t)(c->T + G - 1) / G);
        cr_assert_eq(gs.groups, cs.groups);
        cr_assert_eq(gs.member_entries, cs.member_entries, "group %u: members %llu vs %llu", G,
                     (unsigned long long)gs.member_entries,
                     (unsigned long long)cs.member_entries);
        cr_assert_eq(gs.union_entries, cs.union_entries, "group %u: union %llu vs %llu", G,
                     (unsigned long long)gs.union_entries, (unsigned long long)cs.union_entries);
        cr_assert(gs.union_entries <= gs.member_entries);
        if (G == 1) cr_assert_eq(gs.union_entries, gs.member_entries);
        if (gi == 0) {
            /* without lse and stats: the same outputs bit for bit */
            float *out2 = malloc(no * 4);
            cr_assert(out2);
            cr_assert_eq(sieve_sparse_attention(gpu, &p, dq, dk, dv, di, scratch, sb, dout, NULL,
                                                NULL),
                         0);
            cr_assert_eq(sieve_device_download(gpu, out2, dout, no * 4), 0);
            cr_assert(memcmp(out, out2, no * 4) == 0, "group %u: out without lse differs", G);
            free(out2);
        }
        if (scratch) sieve_device_free(gpu, scratch);
    }
    sieve_device_free(gpu, dq);
    sieve_device_free(gpu, dk);
    sieve_device_free(gpu, dv);
    sieve_device_free(gpu, di);
    sieve_device_free(gpu, dout);
    sieve_device_free(gpu, dlse);
    sieve_device_close(gpu);
    sieve_device_close(cpu);
    free(hq);
    free(hk);
    free(hv);
    free(idx);
    free(rout);
    free(rlse);
    free(out);
    free(lse);
    free(cout);
    free(clse);
}

/* GQA 32/8 (4 heads a kv head): 16 tokens fill one CTA's 64 rows; one token is one row
 * block whose columns four warps split. T not a multiple of 16. */
Test(sparse_attn_cuda, gqa_overlap_bf16) {
    SKIP_WITHOUT_GPU();
    scase c = {SIEVE_DTYPE_BF16, 100, 32, 8, 128, 128, 5000, 256, IDX_OVERLAP, 1.0f,
               {16, 1, 0}, 0.0f};
    run_case(&c, 101);
}

/* 8 heads a kv head, head_dim 64 and v_dim 128, float16: 128 rows (two CTAs) at group 16,
 * two row blocks at group 4 (2-way column split), three at group 6 (one warp idle). */
Test(sparse_attn_cuda, rows_and_splits_f16) {
    SKIP_WITHOUT_GPU();
    scase c = {SIEVE_DTYPE_F16, 45, 8, 1, 64, 128, 3001, 200, IDX_CAUSAL, 1.0f, {16, 4, 6, 1}, 0.0f};
    run_case(&c, 202);
}

/* One head a kv head, group 32 (the mask's bit 31), v_dim 64; disjoint sets, so a member
 * bit misread lets a token read another's keys and the output moves by O(1). */
Test(sparse_attn_cuda, disjoint_group32_bf16) {
    SKIP_WITHOUT_GPU();
    scase c = {SIEVE_DTYPE_BF16, 70, 4, 4, 128, 64, 20000, 96, IDX_DISJOINT, 1.0f,
               {32, 16, 3, 1}, 0.0f};
    run_case(&c, 303);
}

/* Padding, out-of-range entries, repeats and empty rows. */
Test(sparse_attn_cuda, messy_rows_f16) {
    SKIP_WITHOUT_GPU();
    scase c = {SIEVE_DTYPE_F16, 64, 16, 2, 64, 64, 777, 64, IDX_MESSY, 1.0f, {16, 1, 5, 0}, 0.0f};
    run_case(&c, 404);
}

/* Positions past one union window (2^18): the union is built in two passes; then positions
 * only in the last windows (the first ones skipped), with groups of only padding. */
Test(sparse_attn_cuda, two_windows_bf16) {
    SKIP_WITHOUT_GPU();
    scase h = {SIEVE_DTYPE_BF16, 24, 2, 1, 64, 64, 700001, 64, IDX_HIGH, 1.0f, {4, 1, 0}, 0.0f};
    run_case(&h, 506);
    scase c = {SIEVE_DTYPE_BF16, 40, 2, 1, 64, 64, 300007, 128, IDX_OVERLAP, 1.0f, {16, 1, 0}, 0.0f};
    run_case(&c, 505);
}

/* Scaled scores in the tens to hundreds (q scaled by 80): the online softmax must neither
 * overflow nor lose the winners. */
Test(sparse_attn_cuda, large_scores_bf16) {
    SKIP_WITHOUT_GPU();
    scase c = {SIEVE_DTYPE_BF16, 32, 8, 2, 128, 128, 4096, 300, IDX_OVERLAP, 80.0f,
               {16, 1, 0}, 0.0f};
    run_case(&c, 606);
}

/* One token, k = 1; and k past n_keys with every key listed (the union is the whole
 * sequence, its last tile partial). */
Test(sparse_attn_cuda, tiny_shapes) {
    SKIP_WITHOUT_GPU();
    scase a = {SIEVE_DTYPE_F16, 1, 1, 1, 64, 64, 10, 1, IDX_OVERLAP, 1.0f, {16, 1, 0}, 0.0f};
    run_case(&a, 707);
    scase b = {SIEVE_DTYPE_BF16, 20, 4, 1, 128, 64, 70, 200, IDX_DISJOINT, 1.0f, {16, 1, 0}, 0.0f};
    run_case(&b, 708);
}

/* Few keys a token (k = 6, disjoint sets), so each output is a mix of a handful of value
 * rows and a value row read for the wrong slot moves it far past the bound; a negative
 * explicit scale. */
Test(sparse_attn_cuda, value_path_small_sets_bf16) {
    SKIP_WITHOUT_GPU();
    scase c = {SIEVE_DTYPE_BF16, 50, 8, 2, 128, 64, 3000, 6, IDX_DISJOINT, 1.0f, {16, 1, 0},
               -0.2f};
    run_case(&c, 808);
}

/* 128 query heads on one kv head (a token's rows over two CTAs) in groups of 2, T = 5 (the
 * last group one token: its second row chunk has no rows); 16 heads a kv head with fewer
 * tokens than a group (three of four row chunks empty); an explicit scale. */
Test(sparse_attn_cuda, many_heads_short_groups_f16) {
    SKIP_WITHOUT_GPU();
    scase a = {SIEVE_DTYPE_F16, 5, 128, 1, 64, 64, 900, 40, IDX_OVERLAP, 1.0f, {2, 1, 0}, 0.1f};
    run_case(&a, 909);
    scase b = {SIEVE_DTYPE_BF16, 3, 64, 4, 128, 128, 2000, 100, IDX_OVERLAP, 1.0f, {16, 1, 0},
               0.0f};
    run_case(&b, 910);
}

/* Unsupported shapes and bad arguments: errors, nothing written. */
Test(sparse_attn_cuda, errors) {
    SKIP_WITHOUT_GPU();
    sieve_device *gpu = NULL;
    cr_assert_eq(sieve_device_open("cuda:0", &gpu), 0);
    sieve_sparse_attn_params p;
    sieve_sparse_attn_params_init(&p, SIEVE_DTYPE_BF16, 16, 4, 1, 128, 128, 1000, 32);
    size_t sb = 0;
    cr_assert_eq(sieve_sparse_attn_scratch_size(gpu, &p, &sb), 0);
    cr_assert(sb > 0);
    void *dq, *dk, *dv, *di, *dout, *scratch;
    cr_assert_eq(sieve_device_alloc(gpu, 16 * 4 * 128 * 2 + 64, &dq), 0);
    cr_assert_eq(sieve_device_alloc(gpu, 1000 * 128 * 2 + 64, &dk), 0);
    cr_assert_eq(sieve_device_alloc(gpu, 1000 * 128 * 2 + 64, &dv), 0);
    cr_assert_eq(sieve_device_alloc(gpu, 16 * 32 * 4, &di), 0);
    cr_assert_eq(sieve_device_alloc(gpu, 16 * 4 * 128 * 4, &dout), 0);
    cr_assert_eq(sieve_device_alloc(gpu, sb, &scratch), 0);
    float *sent = malloc(16 * 4 * 128 * 4), *back = malloc(16 * 4 * 128 * 4);
    cr_assert(sent && back);
    for (size_t i = 0; i < 16 * 4 * 128; i++) sent[i] = 12345.0f;
    cr_assert_eq(sieve_device_upload(gpu, dout, sent, 16 * 4 * 128 * 4), 0);
    /* too little scratch, misaligned scratch, misaligned q */
    cr_assert_eq(sieve_sparse_attention(gpu, &p, dq, dk, dv, di, scratch, sb - 1, dout, NULL,
                                        NULL),
                 SIEVE_ENOSPC);
    cr_assert_eq(sieve_sparse_attention(gpu, &p, dq, dk, dv, di, (char *)scratch + 16, sb - 256,
                                        dout, NULL, NULL),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_sparse_attention(gpu, &p, (char *)dq + 8, dk, dv, di, scratch, sb, dout,
                                        NULL, NULL),
                 SIEVE_ENOTSUP);
    /* idx and out must be 4-byte aligned */
    cr_assert_eq(sieve_sparse_attention(gpu, &p, dq, dk, dv, (const int32_t *)((char *)di + 2),
                                        scratch, sb, dout, NULL, NULL),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_sparse_attention(gpu, &p, dq, dk, dv, di, scratch, sb,
                                        (float *)((char *)dout + 1), NULL, NULL),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_device_download(gpu, back, dout, 16 * 4 * 128 * 4), 0);
    cr_assert(memcmp(sent, back, 16 * 4 * 128 * 4) == 0, "an error wrote out");
    free(sent);
    free(back);
    /* float32, head_dim 96, 8,192 query heads a kv head: not run on CUDA */
    sieve_sparse_attn_params f = p;
    f.dtype = SIEVE_DTYPE_F32;
    cr_assert_eq(sieve_sparse_attn_scratch_size(gpu, &f, &sb), SIEVE_ENOTSUP);
    f = p;
    f.head_dim = 96;
    cr_assert_eq(sieve_sparse_attn_scratch_size(gpu, &f, &sb), SIEVE_ENOTSUP);
    f = p;
    f.q_heads = 8192;
    cr_assert_eq(sieve_sparse_attn_scratch_size(gpu, &f, &sb), SIEVE_ENOTSUP);
    f = p;
    f.group = 0;
    cr_assert_eq(sieve_sparse_attn_scratch_size(gpu, &f, &sb), SIEVE_EINVAL);
    sieve_device_free(gpu, dq);
    sieve_device_free(gpu, dk);
    sieve_device_free(gpu, dv);
    sieve_device_free(gpu, di);
    sieve_device_free(gpu, dout);
    sieve_device_free(gpu, scratch);
    sieve_device_close(gpu);
}

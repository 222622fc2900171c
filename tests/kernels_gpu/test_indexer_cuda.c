/* test_indexer_cuda.c: the CUDA indexer top-k (fused, sample-guided) against its own
 * materialize-then-select path (bit-exact: indices, score bits, counts) and against the
 * float64 reference up to the near-tie bound sieve_kernels.h states, on random and
 * adversarial keys, causal and not, at every recovery path. Skips, saying so, where no CUDA
 * device is visible. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sieve_kernels.h"

static int have_gpu(void) { return sieve_cuda_device_count() > 0; }

#define SKIP_WITHOUT_GPU()                                                                   \
    do {                                                                                     \
        if (!have_gpu()) cr_skip_test("no CUDA device visible: GPU indexer tests skipped"); \
    } while (0)

typedef enum icase_w { W_NORMAL = 0, W_ZERO = 1, W_POS = 2 } icase_w;

typedef struct icase {
    sieve_dtype dtype;
    sieve_pattern keys; /* sieve_device_fill_rows pattern of the keys */
    uint32_t T, H, D, L, k;
    int causal;
    uint32_t pos0;
    icase_w wts;
    int force;          /* 0 none, 1 underfill (boundary above every score), 2 overflow */
    int check_cpu;      /* compare with the float64 reference */
    uint32_t sample;    /* sample_keys (0: default) */
    int null_scratch;   /* call the fused path without scratch (the device's workspace) */
    int expect;         /* 0: any paths; 1: at most 1 in 20 queries recovered; 2: every query
                           FULL (scored whole) */
} icase;

static const char *case_str(const icase *c, char *b, size_t n) {
    snprintf(b, n, "%s keys=%s T=%u H=%u D=%u L=%u k=%u causal=%d pos0=%u w=%d force=%d",
             sieve_dtype_name(c->dtype), sieve_pattern_name(c->keys), c->T, c->H, c->D, c->L,
             c->k, c->causal, c->pos0, (int)c->wts, c->force);
    return b;
}

static double elem(const void *a, sieve_dtype dt, size_t i) {
    switch (dt) {
    case SIEVE_DTYPE_F16: return sieve_f16_to_f32(((const uint16_t *)a)[i]);
    case SIEVE_DTYPE_BF16: return sieve_bf16_to_f32(((const uint16_t *)a)[i]);
    default: return ((const float *)a)[i];
    }
}

/* The score in double from the stored values, and the near-tie bound's magnitude
 * sum_h |w| sum_d |q k| (into *mag). Independent of the code under test. */
static double score64(const icase *c, const void *q, const void *keys, const float *w,
                      uint32_t t, uint32_t s, double *mag) {
    double acc = 0.0, m = 0.0;
    for (uint32_t h = 0; h < c->H; h++) {
        double d = 0.0, a = 0.0;
        const size_t qo = ((size_t)t * c->H + h) * c->D, ko = (size_t)s * c->D;
        for (uint32_t i = 0; i < c->D; i++) {
            const double x = elem(q, c->dtype, qo + i) * elem(keys, c->dtype, ko + i);
            d += x;
            a += fabs(x);
        }
        const double wh = w[(size_t)t * c->H + h];
        acc += wh * (d > 0.0 ? d : 0.0);
        m += fabs(wh) * a;
    }
    if (mag) *mag = m;
    return acc;
}

static void run_case(const icase *c) {
    char desc[256];
    case_str(c, desc, sizeof desc);
    sieve_device *cpu = NULL, *gpu = NULL;
    cr_assert_eq(sieve_device_open("cpu:1", &cpu), 0);
    cr_assert_eq(sieve_device_open("cuda:0", &gpu), 0);
    const size_t es = sieve_dtype_size(c->dtype);
    const size_t nq = (size_t)c->T * c->H * c->D, nk = (size_t)c->L * c->D;
    const size_t nw = (size_t)c->T * c->H, no = (size_t)c->T * c->k;
    void *hq = malloc(nq * es), *hk = malloc(nk * es);
    float *hw = malloc(nw * 4);
    cr_assert(hq && hk && hw);
    cr_assert_eq(sieve_device_fill_normal(cpu, hq, c->dtype, nq, 11 + c->T, 1.0f), 0);
    cr_assert_eq(sieve_device_fill_rows(cpu, hk, c->dtype, c->L, c->D, c->keys, 5 + c->L), 0);
    cr_assert_eq(sieve_device_fill_normal(cpu, hw, SIEVE_DTYPE_F32, nw, 7, 1.0f), 0);
    if (c->keys == SIEVE_PATTERN_SORTED_ASC || c->keys == SIEVE_PATTERN_SORTED_DESC) {
        /* queries along e0, so each head's dot rises (falls) with the key index */
        float *f = malloc(nq * 4);
        cr_assert(f);
        sieve_convert_to_f32(c->dtype, hq, f, nq);
        for (size_t r = 0; r < (size_t)c->T * c->H; r++) {
            for (uint32_t i = 1; i < c->D; i++) f[r * c->D + i] *= 0.01f;
            f[r * c->D] = 1.0f;
        }
        sieve_convert_from_f32(c->dtype, f, hq, nq);
        free(f);
    }
    for (size_t i = 0; i < nw; i++) {
        if (c->wts == W_ZERO) hw[i] = 0.0f;
        if (c->wts == W_POS) hw[i] = fabsf(hw[i]);
    }

    void *dq, *dk, *dw, *di1, *ds1, *dc1, *di2, *ds2, *dc2;
    cr_assert_eq(sieve_device_alloc(gpu, nq * es, &dq), 0);
    cr_assert_eq(sieve_device_alloc(gpu, nk * es, &dk), 0);
    cr_assert_eq(sieve_device_alloc(gpu, nw * 4, &dw), 0);
    cr_assert_eq(sieve_device_alloc(gpu, no * 4, &di1), 0);
    cr_assert_eq(sieve_device_alloc(gpu, no * 4, &ds1), 0);
    cr_assert_eq(sieve_device_alloc(gpu, (size_t)c->T * 4, &dc1), 0);
    cr_assert_eq(sieve_device_alloc(gpu, no * 4, &di2), 0);
    cr_assert_eq(sieve_device_alloc(gpu, no * 4, &ds2), 0);
    cr_assert_eq(sieve_device_alloc(gpu, (size_t)c->T * 4, &dc2), 0);
    cr_assert_eq(sieve_device_upload(gpu, dq, hq, nq * es), 0);
    cr_assert_eq(sieve_device_upload(gpu, dk, hk, nk * es), 0);
    cr_assert_eq(sieve_device_upload(gpu, dw, hw, nw * 4), 0);

    sieve_indexer_params p;
    sieve_indexer_params_init(&p, c->dtype, c->T, c->H, c->D, c->L, c->k);
    p.causal = c->causal;
    p.pos0 = c->pos0;
    p.seed = 1234 + c->L;
    p.sample_keys = c->sample;
    if (c->force == 1) {
        p.force_boundary = 1;
        p.forced_boundary = 1e30f;
    } else if (c->force == 2) {
        p.force_boundary = 1;
        p.forced_boundary = -1e30f;
        p.candidate_capacity = c->k + 8;
    }
    size_t sb = 0;
    cr_assert_eq(sieve_indexer_scratch_size(gpu, &p, &sb), 0, "%s", desc);
    void *scratch = NULL;
    if (sb && !c->null_scratch) cr_assert_eq(sieve_device_alloc(gpu, sb, &scratch), 0);
    sieve_indexer_stats st1, st2;
    int rc = sieve_indexer_topk(gpu, &p, dq, dk, dw, scratch, sb, di1, ds1, dc1, &st1);
    cr_assert_eq(rc, 0, "%s: fused rc %d (%s)", desc, rc, sieve_strerror(rc));
    rc = sieve_indexer_topk_materialized(gpu, &p, dq, dk, dw, di2, ds2, dc2, &st2);
    cr_assert_eq(rc, 0, "%s: materialized rc %d (%s)", desc, rc, sieve_strerror(rc));

    int32_t *i1 = malloc(no * 4), *i2 = malloc(no * 4);
    float *s1 = malloc(no * 4), *s2 = malloc(no * 4);
    uint32_t *c1 = malloc((size_t)c->T * 4), *c2 = malloc((size_t)c->T * 4);
    cr_assert(i1 && i2 && s1 && s2 && c1 && c2);
    cr_assert_eq(sieve_device_download(gpu, i1, di1, no * 4), 0);
    cr_assert_eq(sieve_device_download(gpu, s1, ds1, no * 4), 0);
    cr_assert_eq(sieve_device_download(gpu, c1, dc1, (size_t)c->T * 4), 0);
    cr_assert_eq(sieve_device_download(gpu, i2, di2, no * 4), 0);
    cr_assert_eq(sieve_device_download(gpu, s2, ds2, no * 4), 0);
    cr_assert_eq(sieve_device_download(gpu, c2, dc2, (size_t)c->T * 4), 0);

    /* stats: every query answered by exactly one path; forced paths really ran */
    uint64_t paths = 0;
    for (int i = 0; i < SIEVE_PATH_COUNT; i++) paths += st1.path_count[i];
    cr_assert_eq(st1.queries, c->T, "%s", desc);
    cr_assert_eq(paths, c->T, "%s: path counts sum to %llu", desc, (unsigned long long)paths);
    if (c->force == 1)
        cr_assert_eq(st1.path_count[SIEVE_PATH_UNDERFILL], c->T, "%s: underfill %llu", desc,
                     (unsigned long long)st1.path_count[SIEVE_PATH_UNDERFILL]);
    if (c->expect == 1) {
        const uint64_t rec = st1.path_count[SIEVE_PATH_UNDERFILL] + st1.path_count[SIEVE_PATH_OVERFLOW];
        cr_assert_leq(rec * 20, c->T, "%s: %llu of %u queries recovered", desc,
                      (unsigned long long)rec, c->T);
    }
    if (c->expect == 2)
        cr_assert_eq(st1.path_count[SIEVE_PATH_FULL], c->T, "%s: %llu of %u queries scored whole",
                     desc, (unsigned long long)st1.path_count[SIEVE_PATH_FULL], c->T);
    if (c->force == 2) {
        uint64_t over = 0;
        for (uint32_t t = 0; t < c->T; t++) {
            uint32_t v = c->causal && c->pos0 + t + 1 < c->L ? c->pos0 + t + 1 : c->L;
            if (v > c->k + 8) over++;
        }
        cr_assert_eq(st1.path_count[SIEVE_PATH_OVERFLOW], over, "%s: overflow %llu of %llu",
                     desc, (unsigned long long)st1.path_count[SIEVE_PATH_OVERFLOW],
                     (unsigned long long)over);
    }

    /* fused == materialized, bit for bit */
    for (uint32_t t = 0; t < c->T; t++) {
        cr_assert_eq(c1[t], c2[t], "%s: query %u counts %u vs %u", desc, t, c1[t], c2[t]);
        for (uint32_t r = 0; r < c->k; r++) {
            const size_t o = (size_t)t * c->k + r;
            uint32_t b1, b2;
            memcpy(&b1, &s1[o], 4);
            memcpy(&b2, &s2[o], 4);
            cr_assert(i1[o] == i2[o] && b1 == b2,
                      "%s: query %u rank %u: fused (%d, %a) materialized (%d, %a)", desc, t, r,
                      i1[o], (double)s1[o], i2[o], (double)s2[o]);
        }
    }
    /* order, padding, visibility */
    for (uint32_t t = 0; t < c->T; t++) {
        const uint32_t v = c->causal && c->pos0 + t + 1 < c->L ? c->pos0 + t + 1 : c->L;
        const uint32_t need = v < c->k ? v : c->k;
        cr_assert_eq(c1[t], need, "%s: query %u count %u, expected %u", desc, t, c1[t], need);
        for (uint32_t r = 0; r < c->k; r++) {
            const size_t o = (size_t)t * c->k + r;
            if (r >= need) {
                cr_assert(i1[o] == -1 && isnan(s1[o]), "%s: query %u rank %u not padded", desc,
                          t, r);
                continue;
            }
            cr_assert(i1[o] >= 0 && (uint32_t)i1[o] < v, "%s: query %u rank %u key %d of %u",
                      desc, t, r, i1[o], v);
            if (r > 0)
                cr_assert(s1[o - 1] > s1[o] || (s1[o - 1] == s1[o] && i1[o - 1] < i1[o]),
                          "%s: query %u ranks %u-%u out of order", desc, t, r - 1, r);
        }
    }
    if (c->keys == SIEVE_PATTERN_TIES || c->wts == W_ZERO)
        /* every visible score equal: the smallest indices, in order */
        for (uint32_t t = 0; t < c->T; t++)
            for (uint32_t r = 0; r < c1[t]; r++)
                cr_assert_eq(i1[(size_t)t * c->k + r], (int32_t)r, "%s: tie order, query %u",
                             desc, t);

    if (c->check_cpu) {
        int32_t *ri = malloc(no * 4);
        double *rs = malloc(no * 8);
        uint32_t *rc_ = malloc((size_t)c->T * 4);
        cr_assert(ri && rs && rc_);
        cr_assert_eq(sieve_indexer_reference(&p, hq, hk, hw, ri, rs, rc_), 0);
        const double u = ldexp(1.0, -24) * (double)(c->D + c->H + 2);
        /* sum_h |w| sum_d |q k| <= sum_h |w| |q_h| max_s |k_s| (Cauchy-Schwarz): a bound on
           the near-tie tolerance's magnitude in O((T H + L) D) */
        double kmax = 0.0;
        for (uint32_t s = 0; s < c->L; s++) {
            double n2 = 0.0;
            for (uint32_t i = 0; i < c->D; i++) {
                const double x = elem(hk, c->dtype, (size_t)s * c->D + i);
                n2 += x * x;
            }
            if (n2 > kmax) kmax = n2;
        }
        kmax = sqrt(kmax);
        for (uint32_t t = 0; t < c->T; t++) {
            cr_assert_eq(rc_[t], c1[t], "%s: query %u reference count", desc, t);
            if (!c1[t]) continue;
            double magmax = 0.0;
            for (uint32_t h = 0; h < c->H; h++) {
                double n2 = 0.0;
                for (uint32_t i = 0; i < c->D; i++) {
                    const double x = elem(hq, c->dtype, ((size_t)t * c->H + h) * c->D + i);
                    n2 += x * x;
                }
                magmax += fabs((double)hw[(size_t)t * c->H + h]) * sqrt(n2) * kmax;
            }
            const double tol = u * magmax;
            const double kth = rs[(size_t)t * c->k + c1[t] - 1];
            for (uint32_t r = 0; r < c1[t]; r++) {
                const size_t o = (size_t)t * c->k + r;
                const double d = score64(c, hq, hk, hw, t, (uint32_t)i1[o], NULL);
                cr_assert(d >= kth - 2 * tol, "%s: query %u rank %u key %d score %.9g below "
                          "the reference's k-th %.9g by more than 2 x %.3g", desc, t, r, i1[o],
                          d, kth, tol);
                cr_assert(fabs((double)s1[o] - d) <= tol, "%s: query %u rank %u: score %.9g vs "
                          "float64 %.9g (tol %.3g)", desc, t, r, (double)s1[o], d, tol);
            }
        }
        free(ri);
        free(rs);
        free(rc_);
    }
    free(i1);
    free(i2);
    free(s1);
    free(s2);
    free(c1);
    free(c2);
    free(hq);
    free(hk);
    free(hw);
    void *dev_ptrs[] = {dq, dk, dw, di1, ds1, dc1, di2, ds2, dc2, scratch};
    for (size_t i = 0; i < sizeof dev_ptrs / sizeof *dev_ptrs; i++)
        if (dev_ptrs[i]) sieve_device_free(gpu, dev_ptrs[i]);
    sieve_device_close(gpu);
    sieve_device_close(cpu);
}

#define BF SIEVE_DTYPE_BF16
#define FH SIEVE_DTYPE_F16
#define NORMAL SIEVE_PATTERN_NORMAL

Test(indexer_cuda, random_prefill_and_decode) {
    SKIP_WITHOUT_GPU();
    const uint32_t ks[] = {1, 10, 128, 2048};
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) {
        run_case(&(icase){BF, NORMAL, 64, 64, 128, 65537, ks[i], 0, 0, W_NORMAL, 0, 0, 0, 0, 0});
        run_case(&(icase){BF, NORMAL, 3, 64, 128, 65537, ks[i], 1, 65000, W_NORMAL, 0, i < 3, 0, 0, 0});
        run_case(&(icase){BF, NORMAL, 64, 64, 128, 65537, ks[i], 1, 65537 - 64, W_NORMAL, 0, 0, 0, 0, 0});
        run_case(&(icase){FH, NORMAL, 7, 64, 128, 65537, ks[i], 1, 65537 - 7, W_POS, 0, 0, 0, 0, 0});
    }
    /* decode rows at 128K keys */
    run_case(&(icase){BF, NORMAL, 1, 64, 128, 131072, 2048, 1, 131071, W_NORMAL, 0, 0, 0, 0, 0});
}

Test(indexer_cuda, heads_and_head_dims) {
    SKIP_WITHOUT_GPU();
    const uint32_t hs[] = {1, 8, 16, 24, 32, 48, 64};
    const uint32_t ds[] = {8, 64, 72, 136, 256};
    for (size_t i = 0; i < sizeof hs / sizeof *hs; i++)
        run_case(&(icase){BF, NORMAL, 13, hs[i], 128, 5003, 64, 0, 0, W_NORMAL, 0, 1, 512, 0, 0});
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++)
        run_case(&(icase){FH, NORMAL, 9, 32, ds[i], 5003, 64, 1, 4000, W_NORMAL, 0, 1, 512, 0, 0});
}

Test(indexer_cuda, adversarial_keys) {
    SKIP_WITHOUT_GPU();
    const sieve_pattern pats[] = {SIEVE_PATTERN_TIES, SIEVE_PATTERN_DUPS,
                                  SIEVE_PATTERN_SORTED_ASC, SIEVE_PATTERN_SORTED_DESC,
                                  SIEVE_PATTERN_OUTLIER, SIEVE_PATTERN_BAND};
    for (size_t i = 0; i < sizeof pats / sizeof *pats; i++) {
        run_case(&(icase){BF, pats[i], 16, 64, 128, 20000, 100, 0, 0, W_POS, 0, 0, 0, 0, 0});
        run_case(&(icase){BF, pats[i], 4, 64, 128, 20000, 100, 0, 0, W_POS, 0, 1, 0, 0, 0});
        run_case(&(icase){FH, pats[i], 16, 64, 128, 20000, 2048, 1, 19990, W_NORMAL, 0, 0, 0, 0, 0});
    }
    /* every score zero (zero weights): ties everywhere */
    run_case(&(icase){BF, NORMAL, 8, 64, 128, 30000, 500, 0, 0, W_ZERO, 0, 0, 0, 0, 0});
}

Test(indexer_cuda, causal_short_rows_and_whole_rows) {
    SKIP_WITHOUT_GPU();
    /* self-attention prefill from position 0: the first queries see fewer than k keys */
    run_case(&(icase){BF, NORMAL, 300, 64, 128, 300, 64, 1, 0, W_NORMAL, 0, 1, 0, 0, 0});
    run_case(&(icase){BF, NORMAL, 40, 16, 64, 3000, 3000, 0, 0, W_NORMAL, 0, 1, 0, 0, 0}); /* k = L */
    /* k past what the fused path's block sorts: every query scored in full */
    run_case(&(icase){FH, NORMAL, 5, 64, 128, 9001, 7000, 0, 0, W_NORMAL, 0, 1, 0, 0, 0});
    run_case(&(icase){FH, NORMAL, 5, 64, 128, 9001, 9001, 1, 8990, W_NORMAL, 0, 1, 0, 0, 0});
}

Test(indexer_cuda, recovery_paths) {
    SKIP_WITHOUT_GPU();
    run_case(&(icase){BF, NORMAL, 33, 64, 128, 40000, 128, 0, 0, W_NORMAL, 1, 0, 0, 0, 0});
    run_case(&(icase){BF, NORMAL, 33, 64, 128, 40000, 128, 1, 39000, W_NORMAL, 2, 0, 0, 0, 0});
    run_case(&(icase){FH, SIEVE_PATTERN_TIES, 20, 64, 128, 40000, 16, 0, 0, W_POS, 2, 0, 0, 0, 0});
}

Test(indexer_cuda, edge_shapes_and_plans) {
    SKIP_WITHOUT_GPU();
    /* fewer keys than one tile; one key; a sample larger than the row */
    run_case(&(icase){BF, NORMAL, 9, 64, 128, 100, 5, 0, 0, W_NORMAL, 0, 1, 0, 0, 0});
    run_case(&(icase){BF, NORMAL, 3, 8, 64, 1, 1, 1, 0, W_NORMAL, 0, 1, 0, 0, 0});
    run_case(&(icase){FH, NORMAL, 5, 64, 128, 20000, 64, 0, 0, W_POS, 0, 0, 50000, 0, 1});
    /* the device's own workspace */
    run_case(&(icase){BF, NORMAL, 17, 64, 128, 30000, 128, 1, 29000, W_NORMAL, 0, 0, 0, 1, 1});
    /* a causal prefill whose rows start far from the sample's offset (8,191 = 2 x 4,096 - 1
       keys): the fractional stride samples every row */
    run_case(&(icase){BF, NORMAL, 1024, 64, 128, 8191, 64, 1, 2048, W_POS, 0, 0, 0, 0, 1});
    /* k whose expected candidates pass one block's sort: every row scored whole at once;
       below it, certified */
    run_case(&(icase){FH, NORMAL, 8, 64, 128, 40000, 6000, 0, 0, W_POS, 0, 0, 0, 0, 2});
    run_case(&(icase){FH, NORMAL, 8, 64, 128, 40000, 3000, 0, 0, W_POS, 0, 0, 0, 0, 1});
}

Test(indexer_cuda, target_shape) {
    SKIP_WITHOUT_GPU();
    /* the indexer shape of targets.md: T = 2048, H = 64, D = 128, L = 131072, k = 2048 */
    run_case(&(icase){BF, NORMAL, 2048, 64, 128, 131072, 2048, 1, 131072 - 2048, W_NORMAL, 0, 0,
                      0, 0, 0});
}

Test(indexer_cuda, unsupported_and_bad_arguments) {
    SKIP_WITHOUT_GPU();
    sieve_device *gpu = NULL;
    cr_assert_eq(sieve_device_open("cuda:0", &gpu), 0);
    sieve_indexer_params p;
    size_t sb = 0;
    sieve_indexer_params_init(&p, SIEVE_DTYPE_F32, 4, 8, 64, 1000, 10);
    cr_assert_eq(sieve_indexer_scratch_size(gpu, &p, &sb), SIEVE_ENOTSUP);
    sieve_indexer_params_init(&p, SIEVE_DTYPE_BF16, 4, 65, 64, 1000, 10);
    cr_assert_eq(sieve_indexer_scratch_size(gpu, &p, &sb), SIEVE_ENOTSUP);
    sieve_indexer_params_init(&p, SIEVE_DTYPE_BF16, 4, 8, 60, 1000, 10);
    cr_assert_eq(sieve_indexer_scratch_size(gpu, &p, &sb), SIEVE_ENOTSUP);
    sieve_indexer_params_init(&p, SIEVE_DTYPE_BF16, 4, 8, 64, 1000, 1001);
    cr_assert_eq(sieve_indexer_scratch_size(gpu, &p, &sb), SIEVE_EINVAL);
    sieve_indexer_params_init(&p, SIEVE_DTYPE_BF16, 4, 8, 64, 1000, 10);
    cr_assert_eq(sieve_indexer_scratch_size(gpu, &p, &sb), 0);
    cr_assert_gt(sb, 0);
    void *d = NULL;
    cr_assert_eq(sieve_device_alloc(gpu, 1 << 20, &d), 0);
    /* scratch too small */
    cr_assert_eq(sieve_indexer_topk(gpu, &p, d, d, d, d, sb - 1, d, d, NULL, NULL), SIEVE_ENOSPC);
    /* scratch off its 256-byte alignment; q or keys off 16 bytes */
    cr_assert_eq(sieve_indexer_topk(gpu, &p, d, d, d, (char *)d + 8, sb, d, d, NULL, NULL),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_indexer_topk(gpu, &p, (char *)d + 8, d, d, d, sb, d, d, NULL, NULL),
                 SIEVE_ENOTSUP);
    cr_assert_eq(sieve_indexer_topk(gpu, &p, d, (char *)d + 8, d, d, sb, d, d, NULL, NULL),
                 SIEVE_ENOTSUP);
    sieve_device_free(gpu, d);
    sieve_device_close(gpu);
}

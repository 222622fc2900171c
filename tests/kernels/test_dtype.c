/* test_dtype.c: element types. float16 and bfloat16 conversions are checked exhaustively on
 * their 65536 bit patterns, against an independent nearest-value search for float32 inputs,
 * and on round-to-nearest-even spot cases; names parse both ways. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kt_util.h"

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* The value of a float16 pattern computed from its definition, in double. */
static double f16_value(uint16_t h) {
    int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 0) v = ldexp((double)m, -24);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = ldexp(1.0 + m / 1024.0, e - 15);
    return sign ? -v : v;
}

Test(dtype, f16_every_pattern_round_trips) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = sieve_f16_to_f32((uint16_t)h);
        double want = f16_value((uint16_t)h);
        if (isnan(want)) {
            cr_assert(isnan(f), "0x%04x must decode to NaN, got %g", h, f);
            uint16_t back = sieve_f32_to_f16(f);
            cr_assert((back & 0x7c00) == 0x7c00 && (back & 0x3ff),
                      "NaN 0x%04x re-encoded as 0x%04x", h, back);
            cr_assert_eq(back & 0x8000, h & 0x8000, "NaN sign lost for 0x%04x", h);
            continue;
        }
        cr_assert_eq((double)f, want, "0x%04x decodes to %.10g, want %.10g", h, f, want);
        cr_assert_eq(signbit(f) != 0, (h & 0x8000) != 0, "sign of 0x%04x", h);
        uint16_t back = sieve_f32_to_f16(f);
        cr_assert_eq(back, h, "0x%04x -> %.10g -> 0x%04x", h, f, back);
    }
}

Test(dtype, bf16_every_pattern_round_trips) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = sieve_bf16_to_f32((uint16_t)h);
        cr_assert_eq(f32_bits(f), h << 16, "0x%04x decodes to bits 0x%08x", h, f32_bits(f));
        uint16_t back = sieve_f32_to_bf16(f);
        if (isnan(f)) {
            cr_assert(isnan(sieve_bf16_to_f32(back)), "NaN 0x%04x re-encoded as 0x%04x", h, back);
            cr_assert_eq(back & 0x8000, h & 0x8000);
        } else {
            cr_assert_eq(back, h, "0x%04x -> %.10g -> 0x%04x", h, f, back);
        }
    }
}

/* Nearest float16 to x by search over the finite magnitudes, ties to the even pattern;
 * magnitudes from 65520 (the midpoint past the largest finite value) up become infinity. */
static uint16_t f16_nearest(float x) {
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs((double)x);
    if (a >= 65520.0) return sign | 0x7c00;
    uint32_t lo = 0, hi = 0x7bff; /* largest pattern with value <= a */
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1) / 2;
        if (f16_value((uint16_t)mid) <= a) lo = mid;
        else hi = mid - 1;
    }
    if (lo == 0x7bff) return sign | 0x7bff;
    double d0 = a - f16_value((uint16_t)lo), d1 = f16_value((uint16_t)(lo + 1)) - a;
    uint16_t m = (uint16_t)(d0 < d1 ? lo : d1 < d0 ? lo + 1 : (lo & 1 ? lo + 1 : lo));
    return sign | m;
}

static uint16_t bf16_nearest(float x) {
    uint32_t u = f32_bits(x);
    uint16_t lo = (uint16_t)(u >> 16);
    double a = (double)x;
    double vlo = (double)bits_f32((uint32_t)lo << 16);
    uint16_t up = (uint16_t)(lo + 1); /* next pattern away from zero */
    double vup = (double)bits_f32((uint32_t)up << 16);
    if ((up & 0x7fff) == 0x7f80) vup = signbit(x) ? -0x1.0p128 : 0x1.0p128; /* rounds to inf */
    double d0 = fabs(a - vlo), d1 = fabs(vup - a);
    return d0 < d1 ? lo : d1 < d0 ? up : (lo & 1 ? up : lo);
}

Test(dtype, rounding_matches_nearest_even_search) {
    kt_rng r = {2024};
    for (int i = 0; i < 300000; i++) {
        uint32_t u = (uint32_t)kt_next(&r);
        /* concentrate on the float16 range half of the time */
        if (i & 1) u = (u & 0x807fffffu) | ((uint32_t)(100 + kt_next(&r) % 46) << 23);
        float x = bits_f32(u);
        if (isnan(x)) continue;
        cr_assert_eq(sieve_f32_to_f16(x), f16_nearest(x), "f16 of %a (0x%08x): 0x%04x, want 0x%04x",
                     x, u, sieve_f32_to_f16(x), f16_nearest(x));
        cr_assert_eq(sieve_f32_to_bf16(x), bf16_nearest(x),
                     "bf16 of %a (0x%08x): 0x%04x, want 0x%04x", x, u, sieve_f32_to_bf16(x),
                     bf16_nearest(x));
    }
    /* every exact midpoint between neighbouring float16 values */
    for (uint32_t h = 0; h < 0x7bff; h++) {
        double mid = (f16_value((uint16_t)h) + f16_value((uint16_t)(h + 1))) / 2;
        float x = (float)mid;
        if ((double)x != mid) continue; /* not representable in float32 */
        uint16_t want = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        cr_assert_eq(sieve_f32_to_f16(x), want, "midpoint %a above 0x%04x: 0x%04x, want 0x%04x",
                     x, h, sieve_f32_to_f16(x), want);
        cr_assert_eq(sieve_f32_to_f16(-x), want | 0x8000);
    }
}

Test(dtype, spot_cases) {
    cr_assert_eq(sieve_f32_to_f16(1.0f), 0x3c00);
    cr_assert_eq(sieve_f32_to_f16(1.0f + 0x1.0p-11f), 0x3c00);           /* tie -> even */
    cr_assert_eq(sieve_f32_to_f16(1.0f + 3 * 0x1.0p-11f), 0x3c02);       /* tie -> even */
    cr_assert_eq(sieve_f32_to_f16(1.0f + 0x1.0p-11f + 0x1.0p-20f), 0x3c01); /* above tie */
    cr_assert_eq(sieve_f32_to_f16(65504.0f), 0x7bff);
    cr_assert_eq(sieve_f32_to_f16(65519.0f), 0x7bff);
    cr_assert_eq(sieve_f32_to_f16(65520.0f), 0x7c00); /* tie with "65536" -> even -> inf */
    cr_assert_eq(sieve_f32_to_f16(1e10f), 0x7c00);
    cr_assert_eq(sieve_f32_to_f16(-1e10f), 0xfc00);
    cr_assert_eq(sieve_f32_to_f16(INFINITY), 0x7c00);
    cr_assert_eq(sieve_f32_to_f16(-0.0f), 0x8000);
    cr_assert_eq(sieve_f32_to_f16(0x1.0p-14f), 0x0400); /* smallest normal */
    cr_assert_eq(sieve_f32_to_f16(0x1.0p-24f), 0x0001); /* smallest subnormal */
    cr_assert_eq(sieve_f32_to_f16(0x1.0p-25f), 0x0000); /* tie -> even (zero) */
    cr_assert_eq(sieve_f32_to_f16(0x1.8p-24f), 0x0002); /* 1.5 ulp: tie -> even */
    cr_assert_eq(sieve_f32_to_f16(0x1.0p-26f), 0x0000);
    cr_assert_eq(sieve_f32_to_f16(0x1.ff8p-15f), 0x03ff); /* largest subnormal */
    cr_assert_eq(sieve_f32_to_f16(0x1.ffcp-15f), 0x0400); /* tie -> even: the smallest normal */
    cr_assert(isnan(sieve_f16_to_f32(sieve_f32_to_f16(NAN))));
    cr_assert_eq(sieve_f16_to_f32(0x3555), 0x1.554p-2f);

    cr_assert_eq(sieve_f32_to_bf16(1.0f), 0x3f80);
    cr_assert_eq(sieve_f32_to_bf16(1.0f + 0x1.0p-8f), 0x3f80);        /* tie -> even */
    cr_assert_eq(sieve_f32_to_bf16(1.0f + 3 * 0x1.0p-8f), 0x3f82);    /* tie -> even */
    cr_assert_eq(sieve_f32_to_bf16(1.0f + 0x1.0p-8f + 0x1.0p-20f), 0x3f81);
    cr_assert_eq(sieve_f32_to_bf16(bits_f32(0x7f7fffffu)), 0x7f80); /* FLT_MAX rounds to inf */
    cr_assert_eq(sieve_f32_to_bf16(-INFINITY), 0xff80);
    cr_assert_eq(sieve_f32_to_bf16(-0.0f), 0x8000);
    cr_assert(isnan(sieve_bf16_to_f32(sieve_f32_to_bf16(NAN))));
    cr_assert(isnan(sieve_bf16_to_f32(sieve_f32_to_bf16(bits_f32(0x7f800001u))))); /* sNaN */
}

Test(dtype, convert_arrays_and_sqnorm) {
    float src[7] = {1.0f, -2.5f, 0.1f, 65504.0f, 1e-8f, -0.0f, 3.14159f};
    uint16_t h[7], b[7];
    float back[7], f[7];
    sieve_convert_from_f32(SIEVE_DTYPE_F16, src, h, 7);
    sieve_convert_from_f32(SIEVE_DTYPE_BF16, src, b, 7);
    for (int i = 0; i < 7; i++) {
        cr_assert_eq(h[i], sieve_f32_to_f16(src[i]));
        cr_assert_eq(b[i], sieve_f32_to_bf16(src[i]));
    }
    sieve_convert_to_f32(SIEVE_DTYPE_F16, h, back, 7);
    for (int i = 0; i < 7; i++) cr_assert_eq(f32_bits(back[i]), f32_bits(sieve_f16_to_f32(h[i])));
    sieve_convert_from_f32(SIEVE_DTYPE_F32, src, f, 7);
    cr_assert_eq(memcmp(f, src, sizeof f), 0);
}

/* The array conversions (F16C where the CPU has it) equal the scalar ones: to float32 on all
 * 65536 patterns at unaligned starts, to float16 on random finite values and every midpoint. */
Test(dtype, array_conversions_equal_scalar) {
    uint16_t *h = malloc(65536 * sizeof *h);
    float *fast = malloc(65536 * sizeof *fast);
    cr_assert(h && fast);
    for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    for (int dt = SIEVE_DTYPE_F16; dt <= SIEVE_DTYPE_BF16; dt++)
        for (size_t off = 0; off < 3; off++) {
            size_t n = 65536 - off;
            sieve_convert_to_f32((sieve_dtype)dt, h + off, fast, n);
            for (size_t i = 0; i < n; i++) {
                uint16_t p = (uint16_t)(i + off);
                float want = dt == SIEVE_DTYPE_F16 ? sieve_f16_to_f32(p) : sieve_bf16_to_f32(p);
                if (isnan(want)) cr_assert(isnan(fast[i]), "dtype %d pattern 0x%04x", dt, p);
                else
                    cr_assert_eq(f32_bits(fast[i]), f32_bits(want), "dtype %d pattern 0x%04x", dt,
                                 p);
            }
        }
    kt_rng r = {404};
    float *x = malloc(65536 * sizeof *x);
    cr_assert_not_null(x);
    size_t n = 0;
    for (uint32_t p = 0; p < 0x7bff; p++) { /* midpoints between neighbouring float16 values */
        double mid = (f16_value((uint16_t)p) + f16_value((uint16_t)(p + 1))) / 2;
        if ((double)(float)mid == mid) x[n++] = (float)mid;
    }
    while (n < 65536) {
        uint32_t e = (uint32_t)(100 + kt_next(&r) % 46);
        uint32_t u = ((uint32_t)kt_next(&r) & 0x807fffffu) | (e << 23);
        x[n++] = bits_f32(u);
    }
    for (int dt = SIEVE_DTYPE_F16; dt <= SIEVE_DTYPE_BF16; dt++) {
        sieve_convert_from_f32((sieve_dtype)dt, x + 1, h, n - 1);
        for (size_t i = 0; i + 1 < n; i++) {
            float v = x[i + 1];
            uint16_t want = dt == SIEVE_DTYPE_F16 ? sieve_f32_to_f16(v) : sieve_f32_to_bf16(v);
            cr_assert_eq(h[i], want, "dtype %d value %a: 0x%04x, want 0x%04x", dt, v, h[i], want);
        }
    }
    free(h);
    free(fast);
    free(x);
}

/* |x|^2 of a stored row, in the documented order: element i in lane i % 8 (fmaf in index
 * order), lanes combined ((0+1)+(2+3))+((4+5)+(6+7)), from the stored (rounded) values. */
static float sqnorm_documented(sieve_dtype dtype, const void *row, uint32_t dim) {
    float s[8] = {0};
    for (uint32_t i = 0; i < dim; i++) {
        float v;
        if (dtype == SIEVE_DTYPE_F32) memcpy(&v, (const char *)row + 4 * (size_t)i, 4);
        else {
            uint16_t u;
            memcpy(&u, (const char *)row + 2 * (size_t)i, 2);
            v = dtype == SIEVE_DTYPE_F16 ? sieve_f16_to_f32(u) : sieve_bf16_to_f32(u);
        }
        s[i % 8] = fmaf(v, v, s[i % 8]);
    }
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

Test(dtype, row_sqnorm_order) {
    kt_rng r = {77};
    const uint32_t dims[] = {1, 3, 8, 20, 64, 100, 129, 768};
    float x[768];
    uint32_t stored[768];
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
        for (int dt = 0; dt < 3; dt++)
            for (int rep = 0; rep < 20; rep++) {
                uint32_t dim = dims[di];
                for (uint32_t i = 0; i < dim; i++) x[i] = kt_gauss(&r) * (rep % 2 ? 1e-3f : 3.0f);
                sieve_convert_from_f32((sieve_dtype)dt, x, stored, dim);
                float got = sieve_row_sqnorm((sieve_dtype)dt, stored, dim);
                float want = sqnorm_documented((sieve_dtype)dt, stored, dim);
                cr_assert_eq(f32_bits(got), f32_bits(want), "dtype %d dim %u: %a, want %a", dt, dim,
                             got, want);
            }
    float v[2] = {3.0f, 4.0f};
    cr_assert_eq(sieve_row_sqnorm(SIEVE_DTYPE_F32, v, 2), 25.0f);
}

Test(dtype, names_and_metrics) {
    sieve_dtype d;
    cr_assert_eq(sieve_dtype_parse("float16", &d), 0);
    cr_assert_eq(d, SIEVE_DTYPE_F16);
    cr_assert_eq(sieve_dtype_parse("BF16", &d), 0);
    cr_assert_eq(d, SIEVE_DTYPE_BF16);
    cr_assert_eq(sieve_dtype_parse("f32", &d), 0);
    cr_assert_eq(d, SIEVE_DTYPE_F32);
    cr_assert_eq(sieve_dtype_parse("int8", &d), SIEVE_EINVAL);
    cr_assert_eq(sieve_dtype_parse(NULL, &d), SIEVE_EINVAL);
    cr_assert_str_eq(sieve_dtype_name(SIEVE_DTYPE_BF16), "bfloat16");
    cr_assert_null(sieve_dtype_name((sieve_dtype)9));
    cr_assert_eq(sieve_dtype_size(SIEVE_DTYPE_F32), 4);
    cr_assert_eq(sieve_dtype_size(SIEVE_DTYPE_F16), 2);
    cr_assert_eq(sieve_dtype_size((sieve_dtype)9), 0);
    sieve_metric m;
    cr_assert_eq(sieve_metric_parse("cosine", &m), 0);
    cr_assert_eq(m, SIEVE_METRIC_COSINE);
    cr_assert_eq(sieve_metric_parse("Euclid", &m), 0);
    cr_assert_eq(m, SIEVE_METRIC_EUCLID);
    cr_assert_eq(sieve_metric_parse("Manhattan", &m), SIEVE_EINVAL);
    cr_assert_str_eq(sieve_metric_name(SIEVE_METRIC_DOT), "Dot");
}

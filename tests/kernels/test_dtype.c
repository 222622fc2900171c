/* test_dtype.c: element types. float16 and bfloat16 conversions are checked exhaustively on
 * their 65536 bit patterns, against an independent nearest-value search for float32 inputs,
 * and on round-to-nearest-even spot cases; names parse both ways. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
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
    /* |x|^2 from the stored (rounded) values, float32 fmaf in index order */
    float v[3] = {3.0f, 4.0f, 0.1f};
    uint16_t vh[3];
    sieve_convert_from_f32(SIEVE_DTYPE_F16, v, vh, 3);
    float t = sieve_f16_to_f32(vh[2]);
    float want = fmaf(t, t, fmaf(4.0f, 4.0f, fmaf(3.0f, 3.0f, 0.0f)));
    cr_assert_eq(sieve_row_sqnorm(SIEVE_DTYPE_F16, vh, 3), want);
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

/* test_reply_format.c: white-box tests of the server's float formatting for replies
 * (sieve__fmt_float, server/util.c): byte for byte what snprintf's "%.9g" gives, on a
 * sweep of bit patterns over every exponent, random scores, and the cases its integer path
 * must get right (halfway cases rounded to even, powers of ten, the switch to the exponent
 * form, signed zeros, the smallest and largest normals, subnormals, infinities), and the
 * decimal point ids written without printf. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "server.h"

static void check_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    if (isnan(f)) return;
    char got[32], want[32];
    const int n = sieve__fmt_float(got, f);
    snprintf(want, sizeof want, "%.9g", (double)f);
    cr_assert_str_eq(got, want, "bits %08x: %s, snprintf gives %s", u, got, want);
    cr_assert_eq(n, (int)strlen(want), "bits %08x: length %d for %s", u, n, want);
}

static void check(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    check_bits(u);
}

Test(reply_format, matches_snprintf_over_every_exponent) {
    /* about 65,000 bit patterns spread over the whole range, both signs */
    for (uint64_t u = 0; u < (1ull << 32); u += 65521) check_bits((uint32_t)u);
    /* every mantissa step near 1 and near the integer/exponent-form boundaries */
    for (uint32_t i = 0; i < 20000; i++) {
        check(1.0f + (float)i * 1.1920929e-7f);
        check(nextafterf(1e9f, 0.f) - (float)i * 64.f);
        check(1e-4f + (float)i * 7.2759576e-12f);
    }
}

Test(reply_format, random_scores) {
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 1000000; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        /* dot products and distances as the kernels produce them: mostly |x| in 1e-3 .. 1e3 */
        const double unit = (double)(s >> 11) / 9007199254740992.0 - 0.5;
        const double x = unit * pow(10.0, (double)(s % 9) - 3.0);
        check((float)x);
    }
}

Test(reply_format, edge_cases) {
    const float cs[] = {
        0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 0.1f, 0.2f, 0.3f, 1e-5f, 1e-4f, 9.9999997e-5f,
        1e8f, 1e9f, 999999999.0f, 123456789.0f, 1234567.125f, /* tie: 1234567.12 */
        1234567.375f, 2.5f, 16777216.0f, 16777215.0f, 4294967296.0f, 1e20f, 3.4028235e38f,
        -3.4028235e38f, 1.17549435e-38f /* smallest normal */, 1e-30f, 9.5367431640625e-7f,
        1.4e-45f /* subnormal */, 1e-40f, INFINITY, -INFINITY, 0.000123456789f,
        98765.4321f, 1.00000012f, 0.99999994f, 1.5e-5f, 123456.789e3f};
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) check(cs[i]);
    char b[32];
    sieve__fmt_float(b, 1234567.125f);
    cr_assert_str_eq(b, "1234567.12", "the halfway case rounds to even");
    sieve__fmt_float(b, 1e9f);
    cr_assert_str_eq(b, "1e+09");
    sieve__fmt_float(b, -0.0f);
    cr_assert_str_eq(b, "-0");
}

/* Numeric point ids in replies: the digits snprintf's PRIu64 gives, 0 and 2^64 - 1 too. */
Test(reply_format, numeric_ids) {
    const uint64_t ids[] = {0, 1, 9, 10, 99, 100, 4294967295u, 4294967296u, 1234567890123ull,
                            9999999999999999999ull, 10000000000000000000ull, UINT64_MAX};
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
        sieve_point_id id;
        memset(&id, 0, sizeof id);
        id.kind = SIEVE_ID_NUM;
        id.num = ids[i];
        sieve__sbuf b;
        sieve__sbuf_init(&b);
        sieve__sbuf_putc(&b, '[');
        sieve__sbuf_id(&b, &id);
        sieve__sbuf_putc(&b, ']');
        char want[32];
        snprintf(want, sizeof want, "[%llu]", (unsigned long long)ids[i]);
        cr_assert(!b.failed);
        cr_assert_str_eq(b.p, want, "id %llu", (unsigned long long)ids[i]);
        sieve__sbuf_free(&b);
    }
}

/* A UUID point id: quoted, in the canonical 8-4-4-4-12 form. */
Test(reply_format, uuid_ids) {
    sieve_point_id id;
    memset(&id, 0, sizeof id);
    id.kind = SIEVE_ID_UUID;
    for (int i = 0; i < 16; i++) id.uuid[i] = (uint8_t)(0x10 * i + 15 - i);
    char got[SIEVE__ID_JSON_MAX];
    cr_assert_eq(sieve__fmt_id(got, &id), 38);
    cr_assert_str_eq(got, "\"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0\"");
}

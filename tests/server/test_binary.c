/* test_binary.c: black-box tests of the binary upsert body (Content-Type
 * application/x-sieve-points) against a real server: stored values, payloads, 16-bit rows,
 * every malformed header, length, dimension, dtype, id, value and payload case (a 400 that
 * names the part, and nothing written), unknown collections, the body cap and api keys. */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include "tcommon.h"

TestSuite(binary, .init = fixture_init, .fini = fixture_fini);

#define CT "application/x-sieve-points"
#define AUTO (UINT64_MAX - 1) /* payload_bytes: the length of the case's payload text */

/* A body under construction. */
typedef struct bbuf {
    unsigned char *p;
    size_t len, cap;
} bbuf;

static void bput(bbuf *b, const void *s, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        cr_assert(b->p, "out of memory");
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void ble(bbuf *b, uint64_t v, int bytes) {
    unsigned char t[8];
    for (int i = 0; i < bytes; i++) t[i] = (unsigned char)(v >> (8 * i));
    bput(b, t, (size_t)bytes);
}

typedef struct hdr {
    const char *magic;
    unsigned version, dtype;
    uint32_t flags, dim;
    uint64_t count, pbytes;
} hdr;

/* Header, then ids, then raw rows (host order), then the payload text (may be NULL). */
static bbuf body_of(const hdr *h, const uint64_t *ids, size_t n_ids, const void *rows,
                    size_t row_bytes, const char *payloads) {
    bbuf b = {0};
    bput(&b, h->magic, 4);
    ble(&b, h->version, 2);
    ble(&b, h->dtype, 2);
    ble(&b, h->flags, 4);
    ble(&b, h->dim, 4);
    ble(&b, h->count, 8);
    ble(&b, h->pbytes, 8);
    for (size_t i = 0; i < n_ids; i++) ble(&b, ids[i], 8);
    bput(&b, rows, row_bytes);
    if (payloads) bput(&b, payloads, strlen(payloads));
    return b;
}

/* A well-formed float32 body of n points of dim 3 with optional payload text. */
static bbuf good_body(size_t n, const uint64_t *ids, const float *rows, const char *payloads) {
    hdr h = {"SVPT", 1, 0, payloads ? 1u : 0u, 3, n, payloads ? strlen(payloads) : 0};
    return body_of(&h, ids, n, rows, n * 3 * sizeof(float), payloads);
}

static long put_bin(const char *path, const bbuf *b, const char *ctype) {
    th_resp_free(&R);
    int rc = th_req_ct(&S, "PUT", path, b->len ? (const char *)b->p : "", b->len, ctype, KEY, &R);
    cr_assert_eq(rc, 0, "no HTTP reply (server crashed?): %s", R.error);
    return R.status;
}

/* The stored vector and payload of one point. */
static void get_point(const char *coll, uint64_t id, json_t **vec, json_t **payload) {
    char path[128];
    snprintf(path, sizeof path, "/collections/%s/points/%llu", coll, (unsigned long long)id);
    go("GET", path, NULL);
    json_t *res = ok_result();
    *vec = json_object_get(res, "vector");
    *payload = json_object_get(res, "payload");
}

Test(binary, upsert_stores_exact_values_ids_and_payloads) {
    START(END);
    go("PUT", "/collections/b", "{\"vectors\":{\"size\":3,\"distance\":\"Dot\"}}");
    ok_result();
    const uint64_t ids[3] = {7, 9223372036854775807ull, 0};
    const float rows[9] = {0.1f, -2.5f, 1.7e19f, 1e-45f, 0, -3.5f, 123456.789f, 7, -1};
    const char *pl = "[{\"a\":1,\"nested\":{\"x\":[1,2]}},null,{\"s\":\"\\u00e9t\\u00e9\"}]";
    bbuf b = good_body(3, ids, rows, pl);
    put_bin("/collections/b/points", &b, CT);
    json_t *res = ok_result();
    cr_assert_str_eq(json_string_value(json_object_get(res, "status")), "completed", "%s", R.body);
    cr_assert_eq(api_count("b"), 3);
    for (int i = 0; i < 3; i++) {
        json_t *vec, *payload;
        get_point("b", ids[i], &vec, &payload);
        cr_assert(json_is_array(vec) && json_array_size(vec) == 3, "%s", R.body);
        /* float32 written with 9 digits: parse back to float and compare bits */
        for (int k = 0; k < 3; k++) {
            float got = (float)json_number_value(json_array_get(vec, (size_t)k));
            cr_assert_eq(memcmp(&got, &rows[3 * i + k], 4), 0, "point %d value %d: %a != %a",
                         i, k, (double)got, (double)rows[3 * i + k]);
        }
        if (i == 0) {
            cr_assert_eq(json_integer_value(json_object_get(payload, "a")), 1, "%s", R.body);
            cr_assert(json_is_array(json_object_get(json_object_get(payload, "nested"), "x")),
                      "%s", R.body);
        } else if (i == 1) {
            cr_assert(json_is_object(payload) && json_object_size(payload) == 0,
                      "point without payload should have {}: %s", R.body);
        } else {
            cr_assert_str_eq(json_string_value(json_object_get(payload, "s")), "\xc3\xa9t\xc3\xa9");
        }
    }
    free(b.p);

    /* Overwrite through the binary route: a repeated id keeps its last row, as in JSON; a
     * body without payloads clears them. Content-Type is case-insensitive and may have
     * parameters. */
    const uint64_t ids2[2] = {7, 7};
    const float rows2[6] = {1, 2, 3, 4, 5, 6};
    b = good_body(2, ids2, rows2, NULL);
    put_bin("/collections/b/points", &b, "Application/X-Sieve-Points; version=1");
    ok_result();
    free(b.p);
    cr_assert_eq(api_count("b"), 3);
    json_t *vec, *payload;
    get_point("b", 7, &vec, &payload);
    double want[3] = {4, 5, 6};
    expect_vec(vec, want, 3, "overwritten vector");
    cr_assert_eq(json_object_size(payload), 0, "payload not cleared: %s", R.body);

    /* count 0 is a valid, empty upsert */
    hdr h0 = {"SVPT", 1, 0, 0, 3, 0, 0};
    b = body_of(&h0, NULL, 0, NULL, 0, NULL);
    put_bin("/collections/b/points", &b, CT);
    ok_result();
    free(b.p);
    cr_assert_eq(api_count("b"), 3);

    /* The JSON route is unchanged beside it. */
    go("PUT", "/collections/b/points", "{\"points\":[{\"id\":8,\"vector\":[1,2,3]}]}");
    ok_result();
    cr_assert_eq(api_count("b"), 4);
    stop_ok();
}

static uint16_t f16_bits(float f) {
    /* exact for the values used below (small integers and halves) */
    if (f == 0) return 0;
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u;
    int exp = (int)((u >> 23) & 0xff) - 127 + 15;
    uint32_t man = (u >> 13) & 0x3ffu;
    return (uint16_t)(sign | ((uint32_t)exp << 10) | man);
}

Test(binary, sixteen_bit_rows_are_widened_exactly) {
    START(END);
    go("PUT", "/collections/h", "{\"vectors\":{\"size\":3,\"distance\":\"Dot\",\"datatype\":"
                                "\"float16\"}}");
    ok_result();
    const float vals[6] = {1.5f, -2, 0.25f, 1024, -0.5f, 3};
    uint16_t h16[6], b16[6];
    for (int i = 0; i < 6; i++) {
        h16[i] = f16_bits(vals[i]);
        uint32_t u;
        memcpy(&u, &vals[i], 4);
        b16[i] = (uint16_t)(u >> 16); /* exact: these floats have short mantissas */
    }
    const uint64_t ids[2] = {1, 2};
    hdr h = {"SVPT", 1, 1, 0, 3, 2, 0};
    bbuf b = body_of(&h, ids, 2, h16, sizeof h16, NULL);
    put_bin("/collections/h/points", &b, CT);
    ok_result();
    free(b.p);
    const uint64_t ids_b[2] = {3, 4};
    h.dtype = 2;
    b = body_of(&h, ids_b, 2, b16, sizeof b16, NULL);
    put_bin("/collections/h/points", &b, CT);
    ok_result();
    free(b.p);
    cr_assert_eq(api_count("h"), 4);
    for (uint64_t id = 1; id <= 4; id++) {
        json_t *vec, *payload;
        get_point("h", id, &vec, &payload);
        size_t r = (size_t)((id - 1) % 2);
        double want[3] = {vals[3 * r], vals[3 * r + 1], vals[3 * r + 2]};
        expect_vec(vec, want, 3, "16-bit row");
    }
    stop_ok();
}

Test(binary, malformed_bodies_get_400_naming_the_part_and_write_nothing) {
    START(END);
    go("PUT", "/collections/p", "{\"vectors\":{\"size\":3,\"distance\":\"Dot\"}}");
    ok_result();
    go("PUT", "/collections/h", "{\"vectors\":{\"size\":3,\"distance\":\"Dot\",\"datatype\":"
                                "\"float16\"}}");
    ok_result();
    go("PUT", "/collections/e", "{\"vectors\":{\"size\":3,\"distance\":\"Euclid\"}}");
    ok_result();
    const uint64_t ids[3] = {1, 2, 3};
    const float rows[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    const char *pl3 = "[{},{},{}]";
    float nan_rows[9], inf_rows[9], big_rows[9], huge_rows[9];
    memcpy(nan_rows, rows, sizeof rows);
    nan_rows[5] = NAN;
    memcpy(inf_rows, rows, sizeof rows);
    inf_rows[0] = -INFINITY;
    memcpy(big_rows, rows, sizeof rows);
    big_rows[4] = 70000; /* over float16's 65504 */
    memcpy(huge_rows, rows, sizeof rows);
    huge_rows[6] = huge_rows[7] = 3e20f; /* squared length overflows float32 */
    const uint64_t big_id[3] = {1, 9223372036854775808ull, 3};
    uint16_t f16_inf[9] = {0x3c00, 0x3c00, 0x3c00, 0x3c00, 0x3c00, 0x3c00, 0x3c00, 0x7c00, 0};

    struct {
        const char *coll;
        hdr h;
        const uint64_t *ids;
        size_t n_ids;
        const void *rows;
        size_t row_bytes;
        const char *payloads;
        size_t cut; /* bytes to drop from the end (0: none) */
        const char *needle;
    } cases[] = {
        {"p", {"SVPT", 1, 0, 0, 3, 0, 0}, NULL, 0, NULL, 0, NULL, 32, "shorter than the 32-byte"},
        {"p", {"SVPT", 1, 0, 0, 3, 0, 0}, NULL, 0, NULL, 0, NULL, 1, "shorter than the 32-byte"},
        {"p", {"SVPX", 1, 0, 0, 3, 3, 0}, ids, 3, rows, 36, NULL, 0, "bad magic"},
        {"p", {"SVPT", 2, 0, 0, 3, 3, 0}, ids, 3, rows, 36, NULL, 0, "version 2"},
        {"p", {"SVPT", 0, 0, 0, 3, 3, 0}, ids, 3, rows, 36, NULL, 0, "version 0"},
        {"p", {"SVPT", 1, 3, 0, 3, 3, 0}, ids, 3, rows, 36, NULL, 0, "dtype 3"},
        {"p", {"SVPT", 1, 0, 2, 3, 3, 0}, ids, 3, rows, 36, NULL, 0, "flags 0x2"},
        {"p", {"SVPT", 1, 0, 0x80000001u, 3, 3, 10}, ids, 3, rows, 36, pl3, 0, "flags"},
        {"p", {"SVPT", 1, 0, 0, 4, 3, 0}, ids, 3, rows, 36, NULL, 0, "dim is 4"},
        {"p", {"SVPT", 1, 0, 0, 0, 3, 0}, ids, 3, rows, 36, NULL, 0, "dim is 0"},
        {"p", {"SVPT", 1, 0, 0, 3, 4, 0}, ids, 3, rows, 36, NULL, 0, "describes more"},
        {"p", {"SVPT", 1, 0, 0, 3, 2, 0}, ids, 3, rows, 36, NULL, 0, "describes fewer"},
        {"p", {"SVPT", 1, 0, 0, 3, 3, 0}, ids, 3, rows, 36, NULL, 4, "describes more"},
        {"p", {"SVPT", 1, 0, 0, 3, 1ull << 62, 0}, ids, 3, rows, 36, NULL, 0, "describes more"},
        {"p", {"SVPT", 1, 0, 0, 3, UINT64_MAX, 0}, ids, 3, rows, 36, NULL, 0, "describes more"},
        {"p", {"SVPT", 1, 0, 1, 3, 3, UINT64_MAX}, ids, 3, rows, 36, pl3, 0, "describes more"},
        {"p", {"SVPT", 1, 1, 0, 3, 3, 0}, ids, 3, rows, 36, NULL, 0, "describes fewer"},
        {"p", {"SVPT", 1, 0, 0, 3, 3, 10}, ids, 3, rows, 36, pl3, 0, "payloads flag is not set"},
        {"p", {"SVPT", 1, 0, 1, 3, 3, 0}, ids, 3, rows, 36, NULL, 0, "payload_bytes is 0"},
        {"p", {"SVPT", 1, 0, 0, 3, 3, 0}, big_id, 3, rows, 36, NULL, 0, "ids[1]"},
        {"p", {"SVPT", 1, 0, 0, 3, 3, 0}, ids, 3, nan_rows, 36, NULL, 0, "rows[1][2]"},
        {"p", {"SVPT", 1, 0, 0, 3, 3, 0}, ids, 3, inf_rows, 36, NULL, 0, "rows[0][0]"},
        {"h", {"SVPT", 1, 1, 0, 3, 3, 0}, ids, 3, f16_inf, 18, NULL, 0, "rows[2][1]"},
        {"h", {"SVPT", 1, 0, 0, 3, 3, 0}, ids, 3, big_rows, 36, NULL, 0, "rows[1][1]"},
        {"e", {"SVPT", 1, 0, 0, 3, 3, 0}, ids, 3, huge_rows, 36, NULL, 0, "rows[2]"},
        {"p", {"SVPT", 1, 0, 1, 3, 3, AUTO}, ids, 3, rows, 36, "[{},{},{]", 0, "invalid JSON"},
        {"p", {"SVPT", 1, 0, 1, 3, 3, AUTO}, ids, 3, rows, 36, "[{},{}]", 0, "expected 3 entries"},
        {"p", {"SVPT", 1, 0, 1, 3, 3, AUTO}, ids, 3, rows, 36, "[{},[],{}]", 0, "payloads[1]"},
        {"p", {"SVPT", 1, 0, 1, 3, 3, AUTO}, ids, 3, rows, 36, "{\"a\":[1]}", 0, "a JSON array"},
        {"p", {"SVPT", 1, 0, 1, 3, 3, AUTO}, ids, 3, rows, 36, "[{},{\"a\":1,\"a\":2},{}]", 0,
         "invalid JSON"},
        {"p", {"SVPT", 1, 0, 1, 3, 3, AUTO}, ids, 3, rows, 36, "[{},{},{}] x", 0, "invalid JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hdr h = cases[i].h;
        if (h.pbytes == AUTO) h.pbytes = strlen(cases[i].payloads);
        bbuf b = body_of(&h, cases[i].ids, cases[i].n_ids, cases[i].rows, cases[i].row_bytes,
                         cases[i].payloads);
        b.len -= cases[i].cut;
        char path[64];
        snprintf(path, sizeof path, "/collections/%s/points", cases[i].coll);
        put_bin(path, &b, CT);
        free(b.p);
        cr_assert_eq(R.status, 400, "case %zu (%s): expected 400, got %ld: %s", i,
                     cases[i].needle, R.status, R.body);
        cr_assert(strstr(th_error(&R), cases[i].needle),
                  "case %zu: error \"%s\" should mention \"%s\"", i, th_error(&R),
                  cases[i].needle);
        cr_assert_eq(api_count(cases[i].coll), 0, "case %zu half-applied a write", i);
    }
    /* A JSON body sent with the binary content type is read as binary, and refused. */
    bbuf j = {0};
    const char *json = "{\"points\":[{\"id\":1,\"vector\":[1,2,3]},{\"id\":2,\"vector\":[1,2,3]}]}";
    bput(&j, json, strlen(json));
    put_bin("/collections/p/points", &j, CT);
    free(j.p);
    EXPECT_ERROR(400, "magic");
    cr_assert_eq(api_count("p"), 0);
    /* Unknown collection: 404 before the body is looked at. */
    bbuf b = good_body(3, ids, rows, NULL);
    put_bin("/collections/none/points", &b, CT);
    free(b.p);
    EXPECT_ERROR(404, "none");
    stop_ok();
}

Test(binary, oversize_bodies_get_413_and_keys_are_checked) {
    START("--max-body", "4k", "--api-key", "w-key", "--read-only-api-key", "r-key", END);
    KEY = "w-key";
    go("PUT", "/collections/p", "{\"vectors\":{\"size\":3,\"distance\":\"Dot\"}}");
    ok_result();
    size_t n = 400; /* 400 x (8 + 12) + 32 bytes > 4 KiB */
    uint64_t *ids = malloc(n * sizeof *ids);
    float *rows = calloc(n * 3, sizeof *rows);
    cr_assert(ids && rows);
    for (size_t i = 0; i < n; i++) ids[i] = i;
    bbuf b = good_body(n, ids, rows, NULL);
    put_bin("/collections/p/points", &b, CT);
    EXPECT_ERROR(413, "too large");
    free(b.p);
    cr_assert_eq(api_count("p"), 0);

    b = good_body(3, ids, rows, NULL);
    KEY = NULL;
    put_bin("/collections/p/points", &b, CT);
    EXPECT_ERROR(401, "api key");
    KEY = "r-key";
    put_bin("/collections/p/points", &b, CT);
    EXPECT_STATUS(403);
    KEY = "w-key";
    cr_assert_eq(api_count("p"), 0);
    put_bin("/collections/p/points", &b, CT);
    ok_result();
    cr_assert_eq(api_count("p"), 3);
    free(b.p);
    free(ids);
    free(rows);
    stop_ok();
}

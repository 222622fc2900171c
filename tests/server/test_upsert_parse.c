/* test_upsert_parse.c: white-box tests of the server's direct upsert-body parser
 * (server/upsert_parse.c) against jansson, the parser every other route uses: numbers
 * convert to exactly the float32 jansson's double gives, malformed and hostile bodies are
 * rejected with the field or the syntax error named, and under random mutation the parser
 * never accepts a body jansson rejects (and never crashes: this suite runs under ASan). */
#define _GNU_SOURCE /* open_memstream */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

static uint64_t rs = 0x1234567887654321ull;
static uint64_t rnd(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

/* A random JSON number in one of many spellings. */
static void random_number(char *buf, size_t n) {
    switch (rnd() % 8) {
    case 0: snprintf(buf, n, "%d", (int)(rnd() % 2000001) - 1000000); break;
    case 1: snprintf(buf, n, "%.9g", ((double)(rnd() >> 11) / 9007199254740992.0 - 0.5) * 10); break;
    case 2: snprintf(buf, n, "%.17g", ((double)(rnd() >> 11) / 9007199254740992.0 - 0.5)); break;
    case 3: snprintf(buf, n, "%de%d", (int)(rnd() % 1000), (int)(rnd() % 60) - 30); break;
    case 4: snprintf(buf, n, "-0.%06llu%06lluE+%d", (unsigned long long)(rnd() % 1000000),
                     (unsigned long long)(rnd() % 1000000), (int)(rnd() % 30)); break;
    case 5: snprintf(buf, n, "%.3f", ((double)(rnd() % 100000) - 50000) / 7.0); break;
    case 6: snprintf(buf, n, "123456789012345678901234.5e-10"); break;
    default: snprintf(buf, n, "0.%019llu", (unsigned long long)(rnd() % 10000000000000000000ull)); break;
    }
}

Test(upsert_parse, numbers_match_jansson_exactly) {
    enum { DIM = 64, N = 200 };
    char *body = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&body, &len);
    fprintf(f, "{\"batch\":{\"ids\":[");
    for (int i = 0; i < N; i++) fprintf(f, "%s%d", i ? "," : "", i);
    fprintf(f, "],\"vectors\":[");
    for (int i = 0; i < N; i++) {
        fprintf(f, "%s[", i ? "," : "");
        for (int d = 0; d < DIM; d++) {
            char num[64];
            random_number(num, sizeof num);
            fprintf(f, "%s%s", d ? " , " : "", num);
        }
        fprintf(f, "]");
    }
    fprintf(f, "]}}");
    fclose(f);
    sieve__upsert u;
    sieve__err e = {0};
    int rc = sieve__upsert_parse(body, len, DIM, &u, &e);
    cr_assert_eq(rc, 0, "parse failed: %s", e.msg);
    cr_assert_eq(u.n, N);
    cr_assert(u.batch_form);
    json_t *j = json_loadb(body, len, 0, NULL);
    cr_assert(j, "jansson rejects the body");
    json_t *vecs = json_object_get(json_object_get(j, "batch"), "vectors");
    for (int i = 0; i < N; i++) {
        cr_assert_eq(u.points[i].id.kind, SIEVE_ID_NUM);
        cr_assert_eq(u.points[i].id.num, (uint64_t)i);
        for (int d = 0; d < DIM; d++) {
            float want = (float)json_number_value(json_array_get(json_array_get(vecs, i), d));
            float got = u.points[i].vector[d];
            cr_assert(memcmp(&want, &got, sizeof got) == 0, "point %d value %d: %.9g vs jansson %.9g",
                      i, d, (double)got, (double)want);
        }
    }
    json_decref(j);
    sieve__upsert_free(&u);
    free(body);
}

/* Many points: the arrays grow (and move) while parsing; every vector must still be right. */
Test(upsert_parse, many_points_in_both_forms) {
    enum { DIM = 5, N = 1500 };
    for (int form = 0; form < 2; form++) {
        char *body = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&body, &len);
        if (form == 0) {
            fprintf(f, "{\"points\":[");
            for (int i = 0; i < N; i++)
                fprintf(f, "%s{\"id\":%d,\"vector\":[%d,1,2,3,%d],\"payload\":{\"i\":%d}}",
                        i ? "," : "", i, i, -i, i);
            fprintf(f, "]}");
        } else {
            fprintf(f, "{\"batch\":{\"vectors\":[");
            for (int i = 0; i < N; i++) fprintf(f, "%s[%d,1,2,3,%d]", i ? "," : "", i, -i);
            fprintf(f, "],\"payloads\":[");
            for (int i = 0; i < N; i++) fprintf(f, "%s{\"i\":%d}", i ? "," : "", i);
            fprintf(f, "],\"ids\":[");
            for (int i = 0; i < N; i++) fprintf(f, "%s%d", i ? "," : "", i);
            fprintf(f, "]}}");
        }
        fclose(f);
        sieve__upsert u;
        sieve__err e = {0};
        cr_assert_eq(sieve__upsert_parse(body, len, DIM, &u, &e), 0, "%s", e.msg);
        cr_assert_eq(u.n, N);
        for (int i = 0; i < N; i++) {
            cr_assert_eq(u.points[i].id.num, (uint64_t)i);
            cr_assert_eq(u.points[i].vector[0], (float)i, "form %d point %d", form, i);
            cr_assert_eq(u.points[i].vector[4], (float)-i, "form %d point %d", form, i);
            char want[32];
            snprintf(want, sizeof want, "{\"i\":%d}", i);
            cr_assert_str_eq(u.points[i].payload, want);
            cr_assert_eq(u.points[i].payload_len, strlen(want));
        }
        sieve__upsert_free(&u);
        free(body);
    }
}

Test(upsert_parse, points_form_ids_payloads_and_escapes) {
    const char *body =
        " { \"points\" : [ {\"payload\":{\"s\":\"a\\u00e9\\ud83d\\ude00\\n\",\"n\":[1,{\"x\":null}]},"
        "\"vector\":[1,-2.5e0,3E-1],\"id\":7},"
        "{\"id\":\"550E8400-E29B-41D4-A716-446655440000\",\"vector\":{\"\":[0,0,1]},\"payload\":null},"
        "{\"id\":18,\"vector\":[4,5,6]} ], \"shard_key\": {\"a\": [1, 2]} }\n";
    sieve__upsert u;
    sieve__err e = {0};
    int rc = sieve__upsert_parse(body, strlen(body), 3, &u, &e);
    cr_assert_eq(rc, 0, "%s", e.msg);
    cr_assert_eq(u.n, 3);
    cr_assert_eq(u.batch_form, 0);
    cr_assert_eq(u.points[0].id.num, 7);
    cr_assert_eq(u.points[0].vector[1], -2.5f);
    cr_assert_eq(u.points[0].vector[2], 0.3f);
    json_t *pl = json_loads(u.points[0].payload, 0, NULL);
    cr_assert(pl, "stored payload is not JSON: %s", u.points[0].payload);
    cr_assert_str_eq(json_string_value(json_object_get(pl, "s")), "a\xc3\xa9\xf0\x9f\x98\x80\n");
    json_decref(pl);
    cr_assert_eq(u.points[1].id.kind, SIEVE_ID_UUID);
    cr_assert_eq(u.points[1].id.uuid[0], 0x55);
    cr_assert_null(u.points[1].payload);
    cr_assert_eq(u.points[1].vector[2], 1.0f);
    cr_assert_null(u.points[2].payload);
    sieve__upsert_free(&u);
}

Test(upsert_parse, bad_bodies_name_the_problem) {
    static const struct {
        const char *body, *needle;
    } cases[] = {
        {"", "empty body"},
        {"[1]", "expected a JSON object"},
        {"{\"points\":[]} x", "end of file expected"},
        {"{\"points\":[],\"points\":[]}", "duplicate object key"},
        {"{\"points\":[{\"id\":1,\"id\":2,\"vector\":[1,2]}]}", "duplicate object key"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,2],\"payload\":{\"a\":1,\"a\":2}}]}", "duplicate"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,NaN]}]}", "invalid JSON"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,-Infinity]}]}", "invalid JSON"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,1e400]}]}", "real number overflow"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,01]}]}", "invalid JSON"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,1.]}]}", "invalid JSON"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,.5]}]}", "invalid JSON"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,2,]}]}", "invalid JSON"},
        {"{\"points\":[{\"id\":9223372036854775808,\"vector\":[1,2]}]}", "too big integer"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,2],\"payload\":{\"s\":\"a\x01\"}}]}", "invalid JSON"},
        {"{\"points\":[{\"id\":\"\\ud800\",\"vector\":[1,2]}]}", "invalid JSON"},
        {"{\"points\":[{\"id\":\"\\q\",\"vector\":[1,2]}]}", "invalid JSON"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,2]}", "invalid JSON"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,2]}]", "invalid JSON"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,tru]}]}", "invalid JSON"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,true]}]}", "points[0].vector[1]"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,\"2\"]}]}", "points[0].vector[1]"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,2,3]}]}", "expected 2 numbers"},
        {"{\"points\":[{\"id\":1,\"vector\":[1]}]}", "expected 2 numbers"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,4e38]}]}", "float32"},
        {"{\"points\":[{\"id\":1.0,\"vector\":[1,2]}]}", "points[0].id"},
        {"{\"points\":[{\"id\":-1,\"vector\":[1,2]}]}", "points[0].id"},
        {"{\"points\":[{\"id\":\"abc\",\"vector\":[1,2]}]}", "not a UUID"},
        {"{\"points\":[{\"id\":[1],\"vector\":[1,2]}]}", "points[0].id"},
        {"{\"points\":[{\"vector\":[1,2]}]}", "points[0].id: required"},
        {"{\"points\":[{\"id\":1}]}", "points[0].vector: required"},
        {"{\"points\":[{\"id\":1,\"vector\":null}]}", "points[0].vector: required"},
        {"{\"points\":[{\"id\":1,\"vector\":{\"a\":[1,2]}}]}", "named"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,2],\"payload\":7}]}", "points[0].payload"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,2],\"extra\":7}]}", "points[0].extra"},
        {"{\"points\":[7]}", "points[0]"},
        {"{\"points\":{}}", "points"},
        {"{\"points\":[],\"batch\":{\"ids\":[],\"vectors\":[]}}", "exactly one"},
        {"{}", "exactly one"},
        {"{\"pointz\":[]}", "pointz"},
        {"{\"points\":[],\"update_filter\":{}}", "update_filter"},
        {"{\"batch\":{\"ids\":[1,2],\"vectors\":[[1,2]]}}", "batch.vectors"},
        {"{\"batch\":{\"vectors\":[[1,2]]}}", "batch.ids"},
        {"{\"batch\":{\"ids\":[1],\"vectors\":[[1,2]],\"payloads\":[{},{}]}}", "batch.payloads"},
        {"{\"batch\":{\"ids\":[1],\"vectors\":[[1,2]],\"payloads\":[3]}}", "batch.payloads[0]"},
        {"{\"batch\":{\"ids\":[1],\"vectors\":{\"a\":[]}}}", "named vectors"},
        {"{\"batch\":{\"ids\":[\"x\"],\"vectors\":[[1,2]]}}", "batch.ids[0]"},
        {"{\"batch\":{\"ids\":[1],\"vectors\":[[1,2]],\"more\":1}}", "batch.more"},
        {"{\"points\":[],\"shard_key\":\"a\xff\"}", "invalid UTF-8"},
        {"{\"points\":[],\"shard_key\":\"\xed\xa0\x80\"}", "invalid UTF-8"},
        {"{\"points\":[],\"shard_key\":\"\xc0\xaf\"}", "invalid UTF-8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sieve__upsert u;
        sieve__err e = {0};
        int rc = sieve__upsert_parse(cases[i].body, strlen(cases[i].body), 2, &u, &e);
        cr_assert_eq(rc, -1, "case %zu (%s) was accepted", i, cases[i].body);
        cr_assert_eq(e.status, 400, "case %zu: status %u", i, e.status);
        cr_assert(strstr(e.msg, cases[i].needle), "case %zu (%s): \"%s\" should mention \"%s\"",
                  i, cases[i].body, e.msg, cases[i].needle);
        sieve__upsert_free(&u);
    }
    /* Deep nesting in a payload is bounded, not a stack overflow. */
    size_t depth = 100000;
    char *deep = malloc(2 * depth + 64);
    int off = sprintf(deep, "{\"points\":[{\"id\":1,\"vector\":[1,2],\"payload\":{\"a\":");
    memset(deep + off, '[', depth);
    memset(deep + off + depth, ']', depth);
    strcpy(deep + off + 2 * depth, "}}]}");
    sieve__upsert u;
    sieve__err e = {0};
    cr_assert_eq(sieve__upsert_parse(deep, strlen(deep), 2, &u, &e), -1);
    cr_assert(strstr(e.msg, "depth"), "%s", e.msg);
    sieve__upsert_free(&u);
    free(deep);
}

Test(upsert_parse, mutations_never_accept_what_jansson_rejects) {
    const char *seed =
        "{\"points\":[{\"id\":1,\"vector\":[0.5,-1e-3,2],\"payload\":{\"k\":\"v\\\"w\",\"n\":[1,2,"
        "{\"z\":true}]}},{\"id\":\"00000000-0000-0000-0000-00000000002a\",\"vector\":[1,2,3]}],"
        "\"shard_key\":\"k\xc3\xa9y\"}";
    size_t n = strlen(seed);
    char *buf = malloc(n + 8);
    static const char alphabet[] = "{}[]\",:0123456789.eE+-truefalsnul\\ \n\x01\xff";
    int accepted = 0;
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(buf, seed, n + 1);
        size_t len = n;
        int edits = 1 + (int)(rnd() % 3);
        for (int k = 0; k < edits && len > 1; k++) {
            size_t at = rnd() % len;
            switch (rnd() % 3) {
            case 0: buf[at] = alphabet[rnd() % (sizeof alphabet - 1)]; break;
            case 1: memmove(buf + at, buf + at + 1, len - at); len--; break; /* delete */
            default: len = at ? at : 1; buf[len] = 0; break;                 /* truncate */
            }
        }
        buf[len] = 0;
        sieve__upsert u;
        sieve__err e = {0};
        int rc = sieve__upsert_parse(buf, len, 3, &u, &e);
        json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
        if (rc == 0) {
            accepted++;
            cr_assert(j != NULL, "accepted a body jansson rejects: %s", buf);
        } else {
            cr_assert(e.status == 400 && e.msg[0], "rejection without a message: %s", buf);
        }
        if (!j) cr_assert_eq(rc, -1, "invalid JSON accepted: %s", buf);
        json_decref(j);
        sieve__upsert_free(&u);
    }
    cr_assert_gt(accepted, 0, "no mutation stayed valid: the test lost its power");
    free(buf);
}

/* ---------------------------------------------------------------- plain search bodies */

/* Plain search bodies read the same floats, limit and offset jansson's path would. */
Test(search_plain, numbers_limit_and_offset_match_jansson) {
    enum { DIM = 48 };
    for (int round = 0; round < 50; round++) {
        char *body = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&body, &len);
        int lim = 1 + (int)(rnd() % 100), off = (int)(rnd() % 20), with_off = round % 3 == 0;
        char vec[DIM * 40];
        size_t vo = 0;
        vo += (size_t)snprintf(vec + vo, sizeof vec - vo, "[");
        for (int d = 0; d < DIM; d++) {
            char num[64];
            random_number(num, sizeof num);
            vo += (size_t)snprintf(vec + vo, sizeof vec - vo, "%s%s", d ? ", " : "", num);
        }
        snprintf(vec + vo, sizeof vec - vo, "]");
        if (round % 2)
            fprintf(f, " { \"limit\" : %d ,\"vector\":%s%s%d}\n", lim, vec,
                    with_off ? ",\"offset\":" : "", with_off ? off : lim);
        else
            fprintf(f, "{\"vector\":%s,\"limit\":%d%s}", vec, lim, with_off ? ",\"offset\":3" : "");
        fclose(f);
        if (!(round % 2) && with_off) off = 3;
        if (round % 2 && !with_off) { /* the trailing number made it invalid JSON: a key */
            /* fprintf above wrote "...]<lim>}": not JSON; both paths must reject it */
            float v[DIM];
            uint32_t l = 0, o = 0;
            cr_assert_eq(sieve__search_parse_plain(body, len, DIM, v, &l, &o), 0, "%s", body);
            cr_assert_null(json_loadb(body, len, 0, NULL));
            free(body);
            continue;
        }
        float v[DIM];
        uint32_t l = 0, o = 99;
        cr_assert_eq(sieve__search_parse_plain(body, len, DIM, v, &l, &o), 1, "%s", body);
        json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
        cr_assert(j, "jansson rejects %s", body);
        cr_assert_eq(l, (uint32_t)lim);
        cr_assert_eq(o, with_off ? (uint32_t)off : 0u, "offset %u in %s", o, body);
        json_t *jv = json_object_get(j, "vector");
        for (int d = 0; d < DIM; d++) {
            float want = (float)json_number_value(json_array_get(jv, (size_t)d));
            cr_assert(memcmp(&want, &v[d], sizeof want) == 0, "value %d: %.9g vs jansson %.9g", d,
                      (double)v[d], (double)want);
        }
        json_decref(j);
        free(body);
    }
}

/* Everything but the plainest form is left to the generic path (which answers or names
 * the error), including bodies the generic path rejects. */
Test(search_plain, anything_else_goes_to_the_generic_path) {
    static const char *const bodies[] = {
        "",
        "[]",
        "{}",
        "{\"vector\":[1,2,3]}",                                  /* no limit */
        "{\"limit\":3}",                                         /* no vector */
        "{\"vector\":[1,2,3],\"limit\":3,\"filter\":null}",       /* another key */
        "{\"vector\":[1,2,3],\"limit\":3,\"with_payload\":true}",
        "{\"vector\":[1,2,3],\"limit\":3,\"limit\":4}",          /* duplicate key */
        "{\"vector\":[1,2,3],\"vector\":[1,2,3],\"limit\":3}",
        "{\"vector\":[1,2],\"limit\":3}",                        /* wrong dimension */
        "{\"vector\":[1,2,3,4],\"limit\":3}",
        "{\"vector\":[1,2,\"3\"],\"limit\":3}",
        "{\"vector\":[1,2,NaN],\"limit\":3}",
        "{\"vector\":[1,2,1e39],\"limit\":3}",                   /* beyond float32 */
        "{\"vector\":{\"name\":\"\",\"vector\":[1,2,3]},\"limit\":3}",
        "{\"vector\":[1,2,3],\"limit\":0}",
        "{\"vector\":[1,2,3],\"limit\":-1}",
        "{\"vector\":[1,2,3],\"limit\":16385}",
        "{\"vector\":[1,2,3],\"limit\":3.0}",
        "{\"vector\":[1,2,3],\"limit\":\"3\"}",
        "{\"vector\":[1,2,3],\"limit\":10,\"offset\":16380}",    /* offset + limit > 16384 */
        "{\"vector\":[1,2,3],\"limit\":10,\"offset\":-1}",
        "{\"vector\":[1,2,3],\"limit\":3} x",                    /* trailing data */
        "{\"vector\":[1,2,3],\"limit\":3",                       /* truncated */
        "{\"vector\":[1,2,3,],\"limit\":3}",
        "{\"vec\\u0074or\":[1,2,3],\"limit\":3}",                /* an escape spelling "vector": fine either way, but must not crash */
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        float v[3];
        uint32_t l = 0, o = 0;
        int r = sieve__search_parse_plain(bodies[i], strlen(bodies[i]), 3, v, &l, &o);
        if (i + 1 == sizeof bodies / sizeof bodies[0]) {
            /* "vec\u0074or" is the key "vector" to jansson too: accepting it is correct */
            if (r) cr_assert(l == 3 && v[0] == 1 && v[2] == 3);
            continue;
        }
        cr_assert_eq(r, 0, "body %zu (%s) should go to the generic path", i, bodies[i]);
    }
    float v[3];
    uint32_t l = 0, o = 0;
    const char *ok = "{\"vector\":[1,-2.5,3e2],\"limit\":16384}";
    cr_assert_eq(sieve__search_parse_plain(ok, strlen(ok), 3, v, &l, &o), 1);
    cr_assert(v[0] == 1.0f && v[1] == -2.5f && v[2] == 300.0f && l == 16384 && o == 0,
              "%g %g %g limit %u offset %u", (double)v[0], (double)v[1], (double)v[2], l, o);
}

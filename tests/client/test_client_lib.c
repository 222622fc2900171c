/* test_client_lib.c: libsieve-client without a sieve-server.
 *
 * Owns: the float32 writer (exact round trip), the JSON object check, ids and names, and
 * the HTTP core against a tiny HTTP/1.1 server written here (a real socket on loopback,
 * answering from a script): retries on 503/429 with and without Retry-After, connection
 * loss for idempotent and non-idempotent calls, connection refused, keep-alive reuse, error
 * statuses mapped to SIEVE_E* with the server's message, the api-key header, request bodies
 * as sent and replies parsed into typed results.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <criterion/criterion.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "client_internal.h"
#include "sieve_client.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- float32 writer */

static void check_f32(float x) {
    char buf[SIEVE__CL_F32_SCRATCH + 8];
    memset(buf, 'Z', sizeof buf);
    size_t n = sieve__cl_fmt_f32(buf, x);
    cr_assert(n >= 1 && n <= SIEVE__CL_F32_MAX, "length %zu for %a", n, (double)x);
    for (size_t i = SIEVE__CL_F32_SCRATCH; i < sizeof buf; i++)
        cr_assert_eq(buf[i], 'Z', "wrote past its scratch room for %a", (double)x);
    buf[n] = 0;
    char *end;
    double d = strtod(buf, &end);
    cr_assert_eq(*end, 0, "'%s' is not one number", buf);
    float back = (float)d;
    uint32_t a, b;
    memcpy(&a, &x, 4);
    memcpy(&b, &back, 4);
    cr_assert_eq(a, b, "%a written as '%s' reads back as %a", (double)x, buf, (double)back);
    float back2 = strtof(buf, NULL);
    memcpy(&b, &back2, 4);
    cr_assert_eq(a, b, "%a written as '%s' reads back through strtof as %a", (double)x, buf,
                 (double)back2);
    /* JSON number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?(e-?[0-9]+)? */
    const char *p = buf;
    if (*p == '-') p++;
    cr_assert(*p >= '0' && *p <= '9', "'%s' does not start with a digit", buf);
    if (*p == '0') cr_assert(p[1] == 0 || p[1] == '.', "'%s' has a leading zero", buf);
}

Test(fmt_f32, special_values_and_boundaries) {
    const float xs[] = {
        0.0f,        -0.0f,   1.0f,        -1.0f,        0.1f,          1e-5f,
        9.99999e-6f, 1e9f,    999999999.f, 1e10f,        123456789.f,   FLT_MIN,
        -FLT_MIN,    FLT_MAX, -FLT_MAX,    FLT_TRUE_MIN, 3.4028235e38f, 1.17549421e-38f,
        0.5f,        100.f,   1e-45f,      2e-45f};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) check_f32(xs[i]);
    /* every power of ten in range and its neighbours */
    for (int e = -45; e <= 38; e++) {
        float x = (float)pow(10.0, e);
        if (x == 0 || !isfinite(x)) continue;
        check_f32(x);
        check_f32(nextafterf(x, 0));
        check_f32(nextafterf(x, INFINITY));
        check_f32(-x);
    }
    char buf[SIEVE__CL_F32_SCRATCH];
    buf[sieve__cl_fmt_f32(buf, 0.0f)] = 0;
    cr_assert_str_eq(buf, "0");
    buf[sieve__cl_fmt_f32(buf, -0.0f)] = 0;
    cr_assert_str_eq(buf, "-0");
    buf[sieve__cl_fmt_f32(buf, 0.5f)] = 0;
    cr_assert_str_eq(buf, "0.5");
    buf[sieve__cl_fmt_f32(buf, 100.0f)] = 0;
    cr_assert_str_eq(buf, "100");
    buf[sieve__cl_fmt_f32(buf, 1e10f)] = 0;
    cr_assert_str_eq(buf, "1e10");
    buf[sieve__cl_fmt_f32(buf, 1.5e-7f)] = 0;
    cr_assert_str_eq(buf, "1.50000005e-7");
    buf[sieve__cl_fmt_f32(buf, -2.5e-3f)] = 0;
    cr_assert_str_eq(buf, "-0.00249999994");
}

Test(fmt_f32, random_bit_patterns_round_trip) {
    uint64_t s = 0x9e3779b97f4a7c15ull;
    size_t checked = 0;
    for (size_t i = 0; i < 2000000; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        uint32_t bits = (uint32_t)(s >> 16);
        float x;
        memcpy(&x, &bits, 4);
        if (!isfinite(x)) continue;
        check_f32(x);
        checked++;
    }
    cr_assert_gt(checked, 1900000, "only %zu finite patterns", checked);
    /* typical embedding values: many small normals */
    for (int i = 0; i < 200000; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        float x = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0) * 0.2f;
        check_f32(x);
    }
}

Test(fmt_f32, jansson_accepts_the_output) {
    uint64_t s = 12345;
    for (int i = 0; i < 20000; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        uint32_t bits = (uint32_t)(s >> 20);
        float x;
        memcpy(&x, &bits, 4);
        if (!isfinite(x)) continue;
        char buf[SIEVE__CL_F32_SCRATCH];
        buf[sieve__cl_fmt_f32(buf, x)] = 0;
        json_error_t e;
        json_t *j = json_loads(buf, JSON_DECODE_ANY, &e);
        cr_assert_not_null(j, "jansson rejects '%s': %s", buf, e.text);
        cr_assert_eq((float)json_number_value(j), x, "'%s' parsed as %a, want %a", buf,
                     json_number_value(j), (double)x);
        json_decref(j);
    }
}

Test(fmt_f32, vector_writer_and_nonfinite_scan) {
    sieve__cl_buf b;
    sieve__cl_buf_init(&b);
    const float v[] = {1.0f, -0.25f, 3e-7f};
    sieve__cl_buf_vector(&b, v, 3);
    cr_assert_not(b.failed);
    cr_assert_str_eq(b.p, "[1,-0.25,3.00000011e-7]");
    sieve__cl_buf_free(&b);
    float w[5] = {1, 2, 3, NAN, 5};
    cr_assert_eq(sieve__cl_find_nonfinite(w, 5), 3);
    w[3] = -INFINITY;
    cr_assert_eq(sieve__cl_find_nonfinite(w, 5), 3);
    w[3] = 4;
    cr_assert_eq(sieve__cl_find_nonfinite(w, 5), 5);
}

/* ---------------------------------------------------------------- JSON checks */

Test(json_check, objects_accepted_and_rejected) {
    const char *good[] = {"{}", " {\"a\":1} ",
                          "{\"a\":[1,2.5e-3,-0,true,false,null,{\"b\":\"\\u00e9\\n\"}]}",
                          "{\"text\":\"tab\\tand \\\"quote\\\"\"}", "{\"a\":{\"b\":{\"c\":[]}}}"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char why[128] = "";
        int rc = sieve__cl_json_check_object(good[i], strlen(good[i]), why, sizeof why);
        cr_assert_eq(rc, 0, "rejected %s: %s", good[i], why);
    }
    const char *bad[] = {"",
                         "[]",
                         "1",
                         "{",
                         "{\"a\"}",
                         "{\"a\":}",
                         "{\"a\":1,}",
                         "{\"a\":01}",
                         "{a:1}",
                         "{\"a\":1} x",
                         "{\"a\":\"x",
                         "{\"a\":tru}",
                         "{\"a\":\"\\x\"}",
                         "{\"a\":1}}",
                         "{\"a\":1.}",
                         "{\"a\":\"\\u12\"}",
                         "{\"a\":[1 2]}",
                         "{\"a\":\"line\nbreak\"}",
                         "{\"a\":1},{\"b\":2}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char why[128] = "";
        int rc = sieve__cl_json_check_object(bad[i], strlen(bad[i]), why, sizeof why);
        cr_assert_eq(rc, SIEVE_EPARSE, "accepted %s (rc %d)", bad[i], rc);
        cr_assert(strstr(why, "at byte"), "no offset in '%s'", why);
    }
    /* nesting limit */
    cr_assert_eq(sieve__cl_json_check_object("{\"a\":[[[1]]]}", 13, NULL, 0), 0);
    char *d = malloc(4096);
    int k = sprintf(d, "{\"a\":");
    for (int i = 0; i < 600; i++) d[k++] = '[';
    for (int i = 0; i < 600; i++) d[k++] = ']';
    d[k++] = '}';
    cr_assert_eq(sieve__cl_json_check_object(d, (size_t)k, NULL, 0), SIEVE_EPARSE);
    free(d);
}

Test(json_check, string_escaping) {
    sieve__cl_buf b;
    sieve__cl_buf_init(&b);
    const char s[] = "a\"b\\c\n\x01\xc3\xa9";
    sieve__cl_buf_json_str(&b, s, sizeof s - 1);
    cr_assert_str_eq(b.p, "\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\"");
    json_t *j = json_loads(b.p, JSON_DECODE_ANY, NULL);
    cr_assert(json_is_string(j));
    cr_assert_str_eq(json_string_value(j), s);
    json_decref(j);
    sieve__cl_buf_free(&b);
}

/* ---------------------------------------------------------------- ids and names */

Test(ids, parse_and_format) {
    sieve_client_id id;
    char t[40];
    cr_assert_eq(sieve_client_id_parse("0", &id), 0);
    cr_assert(!id.is_uuid && id.num == 0);
    cr_assert_eq(sieve_client_id_parse("18446744073709551615", &id), 0);
    cr_assert_eq(id.num, UINT64_MAX);
    cr_assert_eq(sieve_client_id_parse("18446744073709551616", &id), SIEVE_EINVAL);
    cr_assert_eq(sieve_client_id_parse("-1", &id), SIEVE_EINVAL);
    cr_assert_eq(sieve_client_id_parse("", &id), SIEVE_EINVAL);
    cr_assert_eq(sieve_client_id_parse("12a", &id), SIEVE_EINVAL);
    cr_assert_eq(sieve_client_id_parse("550E8400-E29B-41D4-A716-446655440000", &id), 0);
    cr_assert(id.is_uuid);
    cr_assert_eq(id.uuid[0], 0x55);
    cr_assert_eq(id.uuid[15], 0x00);
    sieve_client_id_format(&id, t);
    cr_assert_str_eq(t, "550e8400-e29b-41d4-a716-446655440000");
    cr_assert_eq(sieve_client_id_parse("550e8400e29b41d4a716446655440000", &id), 0);
    sieve_client_id_format(&id, t);
    cr_assert_str_eq(t, "550e8400-e29b-41d4-a716-446655440000");
    cr_assert_eq(sieve_client_id_parse("550e8400-e29b-41d4-a716-44665544000g", &id), SIEVE_EINVAL);
    cr_assert_eq(sieve_client_id_parse("550e8400-e29b41d4-a716-4466554400000", &id), SIEVE_EINVAL);
    id = sieve_client_id_num(42);
    sieve_client_id_format(&id, t);
    cr_assert_str_eq(t, "42");
}

Test(names, distance_and_dtype) {
    sieve_client_distance d;
    sieve_client_dtype t;
    cr_assert_eq(sieve_client_distance_parse("cosine", &d), 0);
    cr_assert_eq(d, SIEVE_CLIENT_COSINE);
    cr_assert_eq(sieve_client_distance_parse("Euclidean", &d), 0);
    cr_assert_eq(d, SIEVE_CLIENT_EUCLID);
    cr_assert_eq(sieve_client_distance_parse("Manhattan", &d), SIEVE_EINVAL);
    cr_assert_str_eq(sieve_client_distance_name(SIEVE_CLIENT_DOT), "Dot");
    cr_assert_null(sieve_client_distance_name((sieve_client_distance)7));
    cr_assert_eq(sieve_client_dtype_parse("BF16", &t), 0);
    cr_assert_eq(t, SIEVE_CLIENT_BFLOAT16);
    cr_assert_eq(sieve_client_dtype_parse("float64", &t), SIEVE_EINVAL);
    cr_assert_str_eq(sieve_client_dtype_name(SIEVE_CLIENT_FLOAT16), "float16");
}

Test(client, open_rejects_bad_options) {
    sieve_client *c = (sieve_client *)1;
    sieve_client_options o;
    sieve_client_options_init(&o);
    o.url = "ftp://x";
    cr_assert_eq(sieve_client_open(&o, &c), SIEVE_EINVAL);
    cr_assert_null(c);
    sieve_client_options_init(&o);
    o.max_retries = -1;
    cr_assert_eq(sieve_client_open(&o, &c), SIEVE_EINVAL);
    cr_assert_eq(sieve_client_open(NULL, NULL), SIEVE_EINVAL);
    cr_assert_eq(sieve_client_open(NULL, &c), 0);
    cr_assert_not_null(c);
    sieve_client_close(c);
    sieve_client_close(NULL);
}

/* ---------------------------------------------------------------- a scripted HTTP server */

typedef struct stub_reply {
    int status;          /* 0: close the connection without replying */
    const char *headers; /* extra header lines, each ending in \r\n */
    const char *body;
} stub_reply;

#define STUB_MAX_REQ 64

typedef struct stub_req {
    char method[16];
    char path[512];
    char *head; /* raw header block */
    char *body;
    size_t body_len;
    int conn; /* connection number */
} stub_req;

typedef struct stub {
    int lfd, port;
    pthread_t th;
    pthread_mutex_t mu;
    const stub_reply *script;
    int nscript, next; /* past the end: the last entry repeats */
    stub_req reqs[STUB_MAX_REQ];
    int nreq, conns;
    volatile int stop;
} stub;

static int read_request(int fd, stub_req *r, volatile int *stop) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    char *hend = NULL;
    while (!hend) {
        struct pollfd p = {fd, POLLIN, 0};
        int pr = poll(&p, 1, 50);
        if (*stop) goto fail;
        if (pr <= 0) continue;
        if (n + 1 >= cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
        ssize_t got = recv(fd, buf + n, cap - n - 1, 0);
        if (got <= 0) goto fail;
        n += (size_t)got;
        buf[n] = 0;
        hend = strstr(buf, "\r\n\r\n");
    }
    size_t hlen = (size_t)(hend - buf) + 4;
    size_t clen = 0;
    const char *cl = strcasestr(buf, "\r\ncontent-length:");
    if (cl && cl < hend) clen = strtoul(cl + 17, NULL, 10);
    while (n < hlen + clen) {
        if (n + 1 >= cap || hlen + clen + 1 > cap) {
            cap = hlen + clen + 1 > cap * 2 ? hlen + clen + 1 : cap * 2;
            buf = realloc(buf, cap);
        }
        ssize_t got = recv(fd, buf + n, cap - n - 1, 0);
        if (got <= 0) goto fail;
        n += (size_t)got;
    }
    memset(r, 0, sizeof *r);
    sscanf(buf, "%15s %511s", r->method, r->path);
    r->head = strndup(buf, hlen);
    r->body = malloc(clen + 1);
    memcpy(r->body, buf + hlen, clen);
    r->body[clen] = 0;
    r->body_len = clen;
    free(buf);
    return 0;
fail:
    free(buf);
    return -1;
}

static void *stub_main(void *arg) {
    stub *s = arg;
    while (!s->stop) {
        struct pollfd p = {s->lfd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0) continue;
        pthread_mutex_lock(&s->mu);
        int conn = ++s->conns;
        pthread_mutex_unlock(&s->mu);
        for (;;) {
            stub_req r;
            if (read_request(fd, &r, &s->stop)) break;
            r.conn = conn;
            pthread_mutex_lock(&s->mu);
            const stub_reply *rep = &s->script[s->next < s->nscript ? s->next : s->nscript - 1];
            s->next++;
            if (s->nreq < STUB_MAX_REQ)
                s->reqs[s->nreq++] = r;
            else {
                free(r.head);
                free(r.body);
            }
            pthread_mutex_unlock(&s->mu);
            if (!rep->status) break; /* drop the connection without an answer */
            const char *body = rep->body ? rep->body : "";
            char head[1024];
            int hn = snprintf(head, sizeof head,
                              "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                              "Content-Length: %zu\r\n%s\r\n",
                              rep->status, strlen(body), rep->headers ? rep->headers : "");
            if (send(fd, head, (size_t)hn, MSG_NOSIGNAL) < 0) break;
            if (*body && send(fd, body, strlen(body), MSG_NOSIGNAL) < 0) break;
        }
        close(fd);
    }
    return NULL;
}

static void stub_start(stub *s, const stub_reply *script, int n) {
    memset(s, 0, sizeof *s);
    s->script = script;
    s->nscript = n;
    pthread_mutex_init(&s->mu, NULL);
    s->lfd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(s->lfd, 0);
    int one = 1;
    setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(bind(s->lfd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(s->lfd, 16), 0);
    socklen_t len = sizeof a;
    getsockname(s->lfd, (struct sockaddr *)&a, &len);
    s->port = ntohs(a.sin_port);
    cr_assert_eq(pthread_create(&s->th, NULL, stub_main, s), 0);
}

static void stub_stop(stub *s) {
    s->stop = 1;
    pthread_join(s->th, NULL);
    close(s->lfd);
    for (int i = 0; i < s->nreq; i++) {
        free(s->reqs[i].head);
        free(s->reqs[i].body);
    }
    pthread_mutex_destroy(&s->mu);
}

static sieve_client *stub_client(const stub *s, int retries, const char *key) {
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", s->port);
    sieve_client_options o;
    sieve_client_options_init(&o);
    o.url = url;
    o.max_retries = retries;
    o.backoff_ms = 20;
    o.backoff_max_ms = 2000;
    o.timeout_ms = 10000;
    o.api_key = key;
    sieve_client *c = NULL;
    cr_assert_eq(sieve_client_open(&o, &c), 0);
    return c;
}

#define OK_COUNT "{\"result\":{\"count\":7},\"status\":\"ok\",\"time\":0.001}"

Test(http, retry_after_503_then_ok) {
    const stub_reply script[] = {
        {503, "Retry-After: 1\r\n", "{\"status\":{\"error\":\"queue full\"},\"time\":0}"},
        {200, NULL, OK_COUNT}};
    stub s;
    stub_start(&s, script, 2);
    sieve_client *c = stub_client(&s, 3, NULL);
    uint64_t n = 0;
    double t0 = now_s();
    int rc = sieve_client_count(c, "docs", NULL, &n);
    double dt = now_s() - t0;
    cr_assert_eq(rc, 0, "count: %s (%s)", sieve_errname(rc), sieve_client_message(c));
    cr_assert_eq(n, 7);
    cr_assert_geq(dt, 0.95, "Retry-After: 1 not honoured: retried after %.3f s", dt);
    cr_assert_lt(dt, 3.0, "waited %.3f s", dt);
    cr_assert_eq(s.nreq, 2, "requests %d", s.nreq);
    cr_assert_str_eq(s.reqs[0].path, "/collections/docs/points/count");
    cr_assert_str_eq(s.reqs[1].body, s.reqs[0].body);
    sieve_client_stats st;
    sieve_client_get_stats(c, &st);
    cr_assert_eq(st.retries, 1);
    cr_assert_eq(st.attempts, 2);
    cr_assert_eq(sieve_client_http_status(c), 200);
    cr_assert_str_eq(sieve_client_message(c), "");
    sieve_client_close(c);
    stub_stop(&s);
}

Test(http, retry_429_with_backoff_for_non_idempotent_call) {
    /* 429/503 mean "not applied": even collection create is retried */
    const stub_reply script[] = {{429, NULL, "{\"status\":{\"error\":\"slow down\"}}"},
                                 {429, NULL, "{\"status\":{\"error\":\"slow down\"}}"},
                                 {200, NULL, "{\"result\":true,\"status\":\"ok\",\"time\":0}"}};
    stub s;
    stub_start(&s, script, 3);
    sieve_client *c = stub_client(&s, 5, NULL);
    sieve_client_collection_config cfg = {128, SIEVE_CLIENT_COSINE, SIEVE_CLIENT_FLOAT16};
    int rc = sieve_client_create_collection(c, "docs", &cfg);
    cr_assert_eq(rc, 0, "create: %s (%s)", sieve_errname(rc), sieve_client_message(c));
    cr_assert_eq(s.nreq, 3);
    cr_assert_str_eq(s.reqs[2].method, "PUT");
    cr_assert_str_eq(s.reqs[2].path, "/collections/docs");
    json_t *j = json_loads(s.reqs[2].body, 0, NULL);
    cr_assert_not_null(j, "body %s", s.reqs[2].body);
    json_t *v = json_object_get(j, "vectors");
    cr_assert_eq(json_integer_value(json_object_get(v, "size")), 128);
    cr_assert_str_eq(json_string_value(json_object_get(v, "distance")), "Cosine");
    cr_assert_str_eq(json_string_value(json_object_get(v, "datatype")), "float16");
    json_decref(j);
    sieve_client_close(c);
    stub_stop(&s);
}

Test(http, busy_until_retries_run_out) {
    const stub_reply script[] = {{503, NULL, "{\"status\":{\"error\":\"shutting down\"}}"}};
    stub s;
    stub_start(&s, script, 1);
    sieve_client *c = stub_client(&s, 2, NULL);
    uint64_t n = 99;
    int rc = sieve_client_count(c, "docs", NULL, &n);
    cr_assert_eq(rc, SIEVE_ENET, "rc %s", sieve_errname(rc));
    cr_assert_eq(n, 0);
    cr_assert_eq(s.nreq, 3, "1 attempt + 2 retries, saw %d", s.nreq);
    cr_assert_eq(sieve_client_http_status(c), 503);
    cr_assert(strstr(sieve_client_message(c), "shutting down (HTTP 503)"), "message '%s'",
              sieve_client_message(c));
    cr_assert(strstr(sieve_client_message(c), "after 2 retries"), "message '%s'",
              sieve_client_message(c));
    sieve_client_close(c);
    stub_stop(&s);
}

Test(http, error_statuses_map_to_codes_with_the_server_message) {
    static const struct {
        int status;
        int code;
    } cases[] = {{400, SIEVE_EINVAL},    {401, SIEVE_EAUTH},  {403, SIEVE_EAUTH},
                 {404, SIEVE_ENOTFOUND}, {409, SIEVE_EEXIST}, {413, SIEVE_ETOOBIG},
                 {500, SIEVE_EINTERNAL}, {502, SIEVE_ENET}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        stub_reply script[1] = {
            {cases[i].status, NULL,
             "{\"status\":{\"error\":\"vector: expected 3 values\"},\"time\":0}"}};
        stub s;
        stub_start(&s, script, 1);
        sieve_client *c = stub_client(&s, 3, NULL);
        uint64_t n;
        int rc = sieve_client_count(c, "docs", NULL, &n);
        cr_assert_eq(rc, cases[i].code, "HTTP %d gave %s, want %s", cases[i].status,
                     sieve_errname(rc), sieve_errname(cases[i].code));
        char want[128];
        snprintf(want, sizeof want, "vector: expected 3 values (HTTP %d)", cases[i].status);
        cr_assert_str_eq(sieve_client_message(c), want);
        cr_assert_eq(sieve_client_http_status(c), cases[i].status);
        cr_assert_eq(s.nreq, 1, "HTTP %d must not be retried (%d requests)", cases[i].status,
                     s.nreq);
        sieve_client_close(c);
        stub_stop(&s);
    }
}

Test(http, non_json_error_body) {
    const stub_reply script[] = {{404, NULL, "no such route\nsecond line"}};
    stub s;
    stub_start(&s, script, 1);
    sieve_client *c = stub_client(&s, 0, NULL);
    sieve_client_record r;
    sieve_client_id id = sieve_client_id_num(5);
    int rc = sieve_client_get_point(c, "docs", &id, &r);
    cr_assert_eq(rc, SIEVE_ENOTFOUND);
    cr_assert_str_eq(sieve_client_message(c),
                     "GET /collections/docs/points/5: HTTP 404: no such route");
    cr_assert_null(r.payload);
    sieve_client_close(c);
    stub_stop(&s);
}

Test(http, lost_connection_retried_only_when_idempotent) {
    const stub_reply script[] = {{0, NULL, NULL}, {200, NULL, OK_COUNT}};
    stub s;
    stub_start(&s, script, 2);
    sieve_client *c = stub_client(&s, 3, NULL);
    uint64_t n = 0;
    int rc = sieve_client_count(c, "docs", NULL, &n);
    cr_assert_eq(rc, 0, "count: %s (%s)", sieve_errname(rc), sieve_client_message(c));
    cr_assert_eq(n, 7);
    cr_assert_eq(s.nreq, 2);
    sieve_client_close(c);
    stub_stop(&s);

    /* delete by filter may not be repeated blindly */
    const stub_reply script2[] = {{0, NULL, NULL}, {200, NULL, OK_COUNT}};
    stub_start(&s, script2, 2);
    c = stub_client(&s, 3, NULL);
    rc = sieve_client_delete_filter(c, "docs", "{\"must\":[]}");
    cr_assert_eq(rc, SIEVE_ENET, "rc %s", sieve_errname(rc));
    cr_assert_eq(s.nreq, 1, "a non-idempotent call was re-sent (%d requests)", s.nreq);
    cr_assert_eq(sieve_client_http_status(c), 0);
    cr_assert_neq(sieve_client_message(c)[0], 0);
    sieve_client_close(c);
    stub_stop(&s);
}

Test(http, connection_refused) {
    /* find a port nobody listens on: bind, note it, close */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, (struct sockaddr *)&a, sizeof a);
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    close(fd);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", ntohs(a.sin_port));
    sieve_client_options o;
    sieve_client_options_init(&o);
    o.url = url;
    o.max_retries = 2;
    o.backoff_ms = 10;
    sieve_client *c;
    cr_assert_eq(sieve_client_open(&o, &c), 0);
    char **names;
    size_t n;
    int rc = sieve_client_list_collections(c, &names, &n);
    cr_assert_eq(rc, SIEVE_ENET);
    cr_assert(strstr(sieve_client_message(c), "cannot connect to"), "message '%s'",
              sieve_client_message(c));
    cr_assert(strstr(sieve_client_message(c), "3 attempts"), "message '%s'",
              sieve_client_message(c));
    sieve_client_stats st;
    sieve_client_get_stats(c, &st);
    cr_assert_eq(st.attempts, 3);
    sieve_client_close(c);
}

Test(http, keep_alive_reuses_one_connection_and_sends_the_key) {
    const stub_reply script[] = {{200, NULL, OK_COUNT}};
    stub s;
    stub_start(&s, script, 1);
    sieve_client *c = stub_client(&s, 0, "s3cret");
    for (int i = 0; i < 5; i++) {
        uint64_t n;
        cr_assert_eq(sieve_client_count(c, "docs", "{\"must\":[{\"has_id\":[1]}]}", &n), 0);
    }
    cr_assert_eq(s.nreq, 5);
    cr_assert_eq(s.conns, 1, "5 calls used %d connections", s.conns);
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(s.reqs[i].conn, 1);
        cr_assert(strcasestr(s.reqs[i].head, "\r\napi-key: s3cret\r\n"), "headers: %s",
                  s.reqs[i].head);
        cr_assert(strcasestr(s.reqs[i].head, "\r\ncontent-type: application/json\r\n"));
    }
    json_t *j = json_loads(s.reqs[0].body, 0, NULL);
    cr_assert_not_null(j);
    cr_assert(json_is_true(json_object_get(j, "exact")));
    cr_assert(json_is_array(json_object_get(json_object_get(j, "filter"), "must")));
    json_decref(j);
    sieve_client_stats st;
    sieve_client_get_stats(c, &st);
    cr_assert_eq(st.connects, 1);
    cr_assert_eq(st.calls, 5);
    sieve_client_close(c);
    stub_stop(&s);
}

Test(http, upsert_bodies_carry_exact_values) {
    const stub_reply script[] = {
        {200, NULL,
         "{\"result\":{\"operation_id\":1,\"status\":\"completed\"},\"status\":\"ok\"}"}};
    stub s;
    stub_start(&s, script, 1);
    sieve_client *c = stub_client(&s, 0, NULL);
    enum { N = 3, D = 5 };
    float v[N * D];
    uint64_t x = 7;
    for (int i = 0; i < N * D; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint32_t bits = (uint32_t)(x >> 32);
        memcpy(&v[i], &bits, 4);
        if (!isfinite(v[i])) v[i] = (float)i * 1e-3f;
    }
    sieve_client_id ids[N];
    ids[0] = sieve_client_id_num(1);
    ids[1] = sieve_client_id_num(9007199254740993ull);
    cr_assert_eq(sieve_client_id_parse("550e8400-e29b-41d4-a716-446655440000", &ids[2]), 0);
    const char *pl[N] = {"{\"a\":1}", NULL, " {\"t\":\"x\\\"y\"} "};
    int rc = sieve_client_upsert_batch(c, "my coll", ids, v, N, D, pl);
    cr_assert_eq(rc, 0, "%s", sieve_client_message(c));
    sieve_client_point pts[N];
    for (int i = 0; i < N; i++) {
        pts[i].id = ids[i];
        pts[i].vector = v + i * D;
        pts[i].payload = pl[i];
        pts[i].payload_len = 0;
    }
    rc = sieve_client_upsert(c, "my coll", pts, N, D);
    cr_assert_eq(rc, 0, "%s", sieve_client_message(c));
    cr_assert_eq(s.nreq, 2);
    cr_assert_str_eq(s.reqs[0].method, "PUT");
    cr_assert_str_eq(s.reqs[0].path, "/collections/my%20coll/points?wait=true");
    /* column form */
    json_error_t e;
    json_t *j = json_loads(s.reqs[0].body, 0, &e);
    cr_assert_not_null(j, "%s: %s", e.text, s.reqs[0].body);
    json_t *b = json_object_get(j, "batch");
    json_t *jids = json_object_get(b, "ids"), *jv = json_object_get(b, "vectors");
    json_t *jp = json_object_get(b, "payloads");
    cr_assert_eq(json_integer_value(json_array_get(jids, 1)), 9007199254740993ll);
    cr_assert_str_eq(json_string_value(json_array_get(jids, 2)),
                     "550e8400-e29b-41d4-a716-446655440000");
    for (int i = 0; i < N; i++)
        for (int k = 0; k < D; k++) {
            float got = (float)json_number_value(json_array_get(json_array_get(jv, i), k));
            cr_assert_eq(memcmp(&got, &v[i * D + k], 4), 0, "vector %d[%d]: sent %a, got %a", i, k,
                         (double)v[i * D + k], (double)got);
        }
    cr_assert(json_is_null(json_array_get(jp, 1)));
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(jp, 2), "t")), "x\"y");
    json_decref(j);
    /* list form */
    j = json_loads(s.reqs[1].body, 0, &e);
    cr_assert_not_null(j, "%s: %s", e.text, s.reqs[1].body);
    json_t *p = json_object_get(j, "points");
    cr_assert_eq(json_array_size(p), N);
    cr_assert_eq(json_integer_value(json_object_get(json_array_get(p, 0), "id")), 1);
    cr_assert_eq(
        json_integer_value(json_object_get(json_object_get(json_array_get(p, 0), "payload"), "a")),
        1);
    cr_assert_null(json_object_get(json_array_get(p, 1), "payload"));
    float got = (float)json_number_value(
        json_array_get(json_object_get(json_array_get(p, 2), "vector"), 4));
    cr_assert_eq(memcmp(&got, &v[14], 4), 0);
    json_decref(j);
    sieve_client_close(c);
    stub_stop(&s);
}

Test(http, bad_input_is_rejected_before_sending) {
    const stub_reply script[] = {{200, NULL, "{\"result\":{},\"status\":\"ok\"}"}};
    stub s;
    stub_start(&s, script, 1);
    sieve_client *c = stub_client(&s, 0, NULL);
    float v[4] = {1, 2, NAN, 4};
    sieve_client_point p = {sieve_client_id_num(1), v, NULL, 0};
    cr_assert_eq(sieve_client_upsert(c, "docs", &p, 1, 4), SIEVE_ENONFINITE);
    cr_assert(strstr(sieve_client_message(c), "element 2"), "%s", sieve_client_message(c));
    v[2] = 3;
    p.payload = "{\"a\":}";
    cr_assert_eq(sieve_client_upsert(c, "docs", &p, 1, 4), SIEVE_EPARSE);
    cr_assert(strstr(sieve_client_message(c), "payload of point 0"), "%s", sieve_client_message(c));
    p.payload = "[1]";
    cr_assert_eq(sieve_client_upsert(c, "docs", &p, 1, 4), SIEVE_EPARSE);
    cr_assert_eq(sieve_client_upsert(c, "docs", &p, 0, 4), SIEVE_EINVAL);
    cr_assert_eq(sieve_client_upsert(c, "", &p, 1, 4), SIEVE_EINVAL);
    sieve_client_search_params q;
    memset(&q, 0, sizeof q);
    q.vector = v;
    q.dim = 4;
    q.limit = 0;
    sieve_client_records r;
    cr_assert_eq(sieve_client_search(c, "docs", &q, &r), SIEVE_EINVAL);
    q.limit = 3;
    q.filter = "{\"must\": [}";
    cr_assert_eq(sieve_client_search(c, "docs", &q, &r), SIEVE_EINVAL);
    cr_assert_eq(r.n, 0);
    q.filter = NULL;
    v[0] = INFINITY;
    cr_assert_eq(sieve_client_search(c, "docs", &q, &r), SIEVE_ENONFINITE);
    cr_assert_eq(sieve_client_count(c, "docs", "not json", &(uint64_t){0}), SIEVE_EINVAL);
    cr_assert_eq(s.nreq, 0, "%d requests were sent", s.nreq);
    sieve_client_close(c);
    stub_stop(&s);
}

static uint64_t rd_le(const unsigned char *p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

Test(http, binary_upsert_body_is_the_documented_layout) {
    const stub_reply script[] = {
        {503, "Retry-After: 0\r\n", "{\"status\":{\"error\":\"busy\"}}"},
        {200, NULL,
         "{\"result\":{\"operation_id\":1,\"status\":\"completed\"},\"status\":\"ok\"}"}};
    stub s;
    stub_start(&s, script, 2);
    sieve_client *c = stub_client(&s, 2, "k3y");
    enum { N = 3, D = 5 };
    float v[N * D];
    for (int i = 0; i < N * D; i++) v[i] = (float)i * 0.1f - 0.7f;
    sieve_client_id ids[N] = {sieve_client_id_num(5), sieve_client_id_num(9223372036854775807ull),
                              sieve_client_id_num(0)};
    const char *pl[N] = {"{\"a\":1}", NULL, " {\"t\":\"x\"} "};
    int rc = sieve_client_upsert_binary(c, "my coll", ids, v, SIEVE_CLIENT_FLOAT32, N, D, pl);
    cr_assert_eq(rc, 0, "%s", sieve_client_message(c));
    /* float16 rows, no payloads; then a JSON call still says application/json */
    uint16_t h[2 * 2] = {0x3c00, 0xc000, 0x3800, 0x0001};
    rc = sieve_client_upsert_binary(c, "f", ids, h, SIEVE_CLIENT_FLOAT16, 2, 2, NULL);
    cr_assert_eq(rc, 0, "%s", sieve_client_message(c));
    sieve_client_point pt = {sieve_client_id_num(1), v, NULL, 0};
    cr_assert_eq(sieve_client_upsert(c, "f", &pt, 1, D), 0, "%s", sieve_client_message(c));
    cr_assert_eq(s.nreq, 4, "a retry after 503 and two more requests: %d", s.nreq);
    for (int r = 0; r < 3; r++) {
        cr_assert(strcasestr(s.reqs[r].head, "\r\ncontent-type: application/x-sieve-points\r\n"),
                  "request %d: %s", r, s.reqs[r].head);
        cr_assert(strcasestr(s.reqs[r].head, "\r\napi-key: k3y\r\n"), "%s", s.reqs[r].head);
    }
    cr_assert(strcasestr(s.reqs[3].head, "\r\ncontent-type: application/json\r\n"), "%s",
              s.reqs[3].head);
    cr_assert_str_eq(s.reqs[1].path, "/collections/my%20coll/points?wait=true");
    cr_assert_eq(s.reqs[0].body_len, s.reqs[1].body_len);
    cr_assert_eq(memcmp(s.reqs[0].body, s.reqs[1].body, s.reqs[0].body_len), 0, "retry differs");
    const unsigned char *b = (const unsigned char *)s.reqs[1].body;
    const char *want_pl = "[{\"a\":1},null, {\"t\":\"x\"} ]";
    size_t pbytes = strlen(want_pl);
    cr_assert_eq(s.reqs[1].body_len, 32 + N * 8 + N * D * 4 + pbytes, "body %zu bytes",
                 s.reqs[1].body_len);
    cr_assert_eq(memcmp(b, "SVPT", 4), 0);
    cr_assert_eq(rd_le(b + 4, 2), 1, "version");
    cr_assert_eq(rd_le(b + 6, 2), 0, "dtype");
    cr_assert_eq(rd_le(b + 8, 4), 1, "flags");
    cr_assert_eq(rd_le(b + 12, 4), D, "dim");
    cr_assert_eq(rd_le(b + 16, 8), N, "count");
    cr_assert_eq(rd_le(b + 24, 8), pbytes, "payload_bytes");
    for (int i = 0; i < N; i++) cr_assert_eq(rd_le(b + 32 + 8 * i, 8), ids[i].num, "id %d", i);
    for (int i = 0; i < N * D; i++) {
        uint32_t w = (uint32_t)rd_le(b + 32 + 8 * N + 4 * i, 4), want;
        memcpy(&want, &v[i], 4);
        cr_assert_eq(w, want, "value %d: %08x != %08x", i, w, want);
    }
    cr_assert_eq(memcmp(b + 32 + 8 * N + 4 * N * D, want_pl, pbytes), 0, "payloads: %.*s",
                 (int)pbytes, (const char *)b + 32 + 8 * N + 4 * N * D);
    const unsigned char *h2 = (const unsigned char *)s.reqs[2].body;
    cr_assert_eq(s.reqs[2].body_len, 32 + 2 * 8 + 4 * 2);
    cr_assert_eq(rd_le(h2 + 6, 2), 1, "float16 dtype");
    cr_assert_eq(rd_le(h2 + 8, 4), 0, "no payload flag");
    cr_assert_eq(rd_le(h2 + 24, 8), 0, "no payload bytes");
    for (int i = 0; i < 4; i++) cr_assert_eq(rd_le(h2 + 48 + 2 * i, 2), h[i], "half %d", i);
    sieve_client_close(c);
    stub_stop(&s);
}

Test(http, binary_upsert_rejects_bad_input_before_sending) {
    const stub_reply script[] = {{200, NULL, "{\"result\":{},\"status\":\"ok\"}"}};
    stub s;
    stub_start(&s, script, 1);
    sieve_client *c = stub_client(&s, 0, NULL);
    float v[4] = {1, 2, 3, 4};
    sieve_client_id id = sieve_client_id_num(1), uid;
    cr_assert_eq(sieve_client_id_parse("550e8400-e29b-41d4-a716-446655440000", &uid), 0);
    cr_assert_eq(sieve_client_upsert_binary(c, "d", &uid, v, SIEVE_CLIENT_FLOAT32, 1, 4, NULL),
                 SIEVE_EINVAL);
    cr_assert(strstr(sieve_client_message(c), "UUID"), "%s", sieve_client_message(c));
    sieve_client_id big = sieve_client_id_num(9223372036854775808ull);
    cr_assert_eq(sieve_client_upsert_binary(c, "d", &big, v, SIEVE_CLIENT_FLOAT32, 1, 4, NULL),
                 SIEVE_EINVAL);
    cr_assert(strstr(sieve_client_message(c), "2^63-1"), "%s", sieve_client_message(c));
    cr_assert_eq(sieve_client_upsert_binary(c, "d", &id, v, (sieve_client_dtype)7, 1, 4, NULL),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_client_upsert_binary(c, "d", &id, v, SIEVE_CLIENT_FLOAT32, 0, 4, NULL),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_client_upsert_binary(c, "d", &id, NULL, SIEVE_CLIENT_FLOAT32, 1, 4, NULL),
                 SIEVE_EINVAL);
    cr_assert_eq(sieve_client_upsert_binary(c, "", &id, v, SIEVE_CLIENT_FLOAT32, 1, 4, NULL),
                 SIEVE_EINVAL);
    v[3] = NAN;
    cr_assert_eq(sieve_client_upsert_binary(c, "d", &id, v, SIEVE_CLIENT_FLOAT32, 1, 4, NULL),
                 SIEVE_ENONFINITE);
    cr_assert(strstr(sieve_client_message(c), "element 3"), "%s", sieve_client_message(c));
    v[3] = 4;
    uint16_t h[4] = {0x3c00, 0x7c00, 0, 0}; /* float16 infinity */
    cr_assert_eq(sieve_client_upsert_binary(c, "d", &id, h, SIEVE_CLIENT_FLOAT16, 1, 4, NULL),
                 SIEVE_ENONFINITE);
    const char *bad[1] = {"{\"a\":}"};
    cr_assert_eq(sieve_client_upsert_binary(c, "d", &id, v, SIEVE_CLIENT_FLOAT32, 1, 4, bad),
                 SIEVE_EPARSE);
    cr_assert_eq(s.nreq, 0, "%d requests were sent", s.nreq);
    sieve_client_close(c);
    stub_stop(&s);
}

Test(http, search_replies_become_typed_records) {
    const stub_reply script[] = {
        {200, NULL,
         "{\"result\":[{\"id\":42,\"version\":0,\"score\":0.75,\"payload\":{\"t\":\"a "
         "b\",\"n\":[1,2]},"
         "\"vector\":[0.5,-1,2.25]},{\"id\":\"550e8400-e29b-41d4-a716-446655440000\",\"score\":-3e-"
         "2,"
         "\"payload\":null}],\"status\":\"ok\",\"time\":0.1}"},
        {200, NULL, "{\"result\":[[{\"id\":1,\"score\":1}],[]],\"status\":\"ok\",\"time\":0.1}"},
        {200, NULL, "{\"result\":{\"points\":[{\"id\":3,\"score\":2.5}]},\"status\":\"ok\"}"},
        {200, NULL,
         "{\"result\":[{\"points\":[]},{\"points\":[{\"id\":4,\"score\":1},{\"id\":5,\"score\":0}]}"
         "],"
         "\"status\":\"ok\"}"},
        {200, NULL, "{\"result\":[{\"id\":\"not an id\"}],\"status\":\"ok\"}"}};
    stub s;
    stub_start(&s, script, 5);
    sieve_client *c = stub_client(&s, 0, NULL);
    float v[3] = {1, 0.5f, -2};
    sieve_client_search_params q;
    memset(&q, 0, sizeof q);
    q.vector = v;
    q.dim = 3;
    q.limit = 2;
    q.offset = 1;
    q.with_payload = 1;
    q.with_vector = 1;
    q.use_score_threshold = 1;
    q.score_threshold = 0.25f;
    q.filter = "{\"must\":[{\"key\":\"t\",\"match\":{\"value\":\"a b\"}}]}";
    sieve_client_records r;
    int rc = sieve_client_search(c, "docs", &q, &r);
    cr_assert_eq(rc, 0, "%s", sieve_client_message(c));
    cr_assert_eq(r.n, 2);
    cr_assert_eq(r.items[0].id.num, 42);
    cr_assert_float_eq(r.items[0].score, 0.75f, 0);
    cr_assert_str_eq(r.items[0].payload, "{\"t\":\"a b\",\"n\":[1,2]}");
    cr_assert_eq(r.items[0].dim, 3);
    cr_assert_float_eq(r.items[0].vector[2], 2.25f, 0);
    cr_assert(r.items[1].id.is_uuid);
    cr_assert_eq(r.items[1].id.uuid[1], 0x0e);
    cr_assert_float_eq(r.items[1].score, -0.03f, 1e-9);
    cr_assert_null(r.items[1].payload);
    cr_assert_null(r.items[1].vector);
    sieve_client_records_clear(&r);
    cr_assert_eq(r.n, 0);
    json_t *j = json_loads(s.reqs[0].body, 0, NULL);
    cr_assert_str_eq(s.reqs[0].path, "/collections/docs/points/search");
    cr_assert_eq(json_integer_value(json_object_get(j, "limit")), 2);
    cr_assert_eq(json_integer_value(json_object_get(j, "offset")), 1);
    cr_assert_float_eq(json_number_value(json_object_get(j, "score_threshold")), 0.25, 0);
    cr_assert(json_is_true(json_object_get(j, "with_vector")));
    cr_assert_float_eq(json_number_value(json_array_get(json_object_get(j, "vector"), 2)), -2.0, 0);
    cr_assert_str_eq(
        json_string_value(json_object_get(
            json_array_get(json_object_get(json_object_get(j, "filter"), "must"), 0), "key")),
        "t");
    json_decref(j);

    sieve_client_search_params qs[2] = {q, q};
    sieve_client_records rs[2];
    rc = sieve_client_search_batch(c, "docs", qs, 2, rs);
    cr_assert_eq(rc, 0, "%s", sieve_client_message(c));
    cr_assert_eq(rs[0].n, 1);
    cr_assert_eq(rs[0].items[0].id.num, 1);
    cr_assert_eq(rs[1].n, 0);
    sieve_client_records_clear(&rs[0]);
    sieve_client_records_clear(&rs[1]);
    cr_assert_str_eq(s.reqs[1].path, "/collections/docs/points/search/batch");
    j = json_loads(s.reqs[1].body, 0, NULL);
    cr_assert_eq(json_array_size(json_object_get(j, "searches")), 2);
    json_decref(j);

    rc = sieve_client_query(c, "docs", &q, &r);
    cr_assert_eq(rc, 0, "%s", sieve_client_message(c));
    cr_assert_eq(r.n, 1);
    cr_assert_eq(r.items[0].id.num, 3);
    cr_assert_float_eq(r.items[0].score, 2.5f, 0);
    sieve_client_records_clear(&r);
    cr_assert_str_eq(s.reqs[2].path, "/collections/docs/points/query");
    j = json_loads(s.reqs[2].body, 0, NULL);
    cr_assert(json_is_array(json_object_get(j, "query")));
    json_decref(j);

    rc = sieve_client_query_batch(c, "docs", qs, 2, rs);
    cr_assert_eq(rc, 0, "%s", sieve_client_message(c));
    cr_assert_eq(rs[0].n, 0);
    cr_assert_eq(rs[1].n, 2);
    cr_assert_eq(rs[1].items[1].id.num, 5);
    sieve_client_records_clear(&rs[0]);
    sieve_client_records_clear(&rs[1]);

    rc = sieve_client_search(c, "docs", &q, &r);
    cr_assert_eq(rc, SIEVE_EPARSE, "a bad id in a reply gave %s", sieve_errname(rc));
    cr_assert_eq(r.n, 0);
    cr_assert_null(r.items);
    sieve_client_close(c);
    stub_stop(&s);
}

Test(http, collection_calls_parse_their_replies) {
    const stub_reply script[] = {
        {200, NULL,
         "{\"result\":{\"collections\":[{\"name\":\"a\"},{\"name\":\"b.c\"}]},\"status\":\"ok\"}"},
        {200, NULL,
         "{\"result\":{\"status\":\"green\",\"points_count\":12,\"config\":{\"params\":{"
         "\"vectors\":"
         "{\"size\":768,\"distance\":\"Cosine\"}}},\"sieve\":{\"datatype\":\"bfloat16\",\"rows\":"
         "15,\"pages\":1,\"rows_per_page\":256,\"generation\":9}},\"status\":\"ok\"}"},
        {200, NULL, "{\"result\":{\"exists\":false},\"status\":\"ok\"}"},
        {200, NULL, "{\"result\":true,\"status\":\"ok\"}"},
        {200, NULL, "{\"title\":\"sieve\",\"version\":\"0.1.0\"}"},
        {200, NULL, "ok"},
        {200, NULL, "{\"result\":[{\"id\":7,\"payload\":{\"k\":1}}],\"status\":\"ok\"}"},
        {200, NULL, "{\"result\":{\"operation_id\":0,\"status\":\"completed\"},\"status\":\"ok\"}"},
        {200, NULL, "{\"status\":\"ok\"}"}};
    stub s;
    stub_start(&s, script, 9);
    sieve_client *c = stub_client(&s, 0, NULL);
    char **names;
    size_t n;
    cr_assert_eq(sieve_client_list_collections(c, &names, &n), 0);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(names[1], "b.c");
    sieve_client_free_names(names, n);
    sieve_client_collection_info info;
    cr_assert_eq(sieve_client_get_collection(c, "a", &info), 0, "%s", sieve_client_message(c));
    cr_assert_eq(info.points, 12);
    cr_assert_eq(info.config.dim, 768);
    cr_assert_eq(info.config.distance, SIEVE_CLIENT_COSINE);
    cr_assert_eq(info.config.dtype, SIEVE_CLIENT_BFLOAT16);
    cr_assert_eq(info.rows, 15);
    cr_assert_eq(info.rows_per_page, 256);
    cr_assert_eq(info.generation, 9);
    cr_assert_str_eq(info.status, "green");
    int ex = 1;
    cr_assert_eq(sieve_client_collection_exists(c, "a", &ex), 0);
    cr_assert_eq(ex, 0);
    cr_assert_eq(sieve_client_delete_collection(c, "a", &ex), 0);
    cr_assert_eq(ex, 1);
    cr_assert_str_eq(s.reqs[3].method, "DELETE");
    sieve_client_server_info si;
    cr_assert_eq(sieve_client_server_info_get(c, &si), 0);
    cr_assert_str_eq(si.title, "sieve");
    cr_assert_str_eq(si.version, "0.1.0");
    cr_assert_eq(sieve_client_healthz(c), 0);
    cr_assert_str_eq(s.reqs[5].path, "/healthz");
    sieve_client_id ids[2] = {sieve_client_id_num(7), sieve_client_id_num(8)};
    sieve_client_records r;
    cr_assert_eq(sieve_client_retrieve(c, "a", ids, 2, 1, 0, &r), 0);
    cr_assert_eq(r.n, 1);
    cr_assert_str_eq(r.items[0].payload, "{\"k\":1}");
    sieve_client_records_clear(&r);
    json_t *j = json_loads(s.reqs[6].body, 0, NULL);
    cr_assert_eq(json_array_size(json_object_get(j, "ids")), 2);
    cr_assert(json_is_false(json_object_get(j, "with_vector")));
    json_decref(j);
    cr_assert_eq(sieve_client_delete_points(c, "a", ids, 2), 0);
    cr_assert_str_eq(s.reqs[7].path, "/collections/a/points/delete?wait=true");
    /* an envelope without a result is a protocol error */
    cr_assert_eq(sieve_client_collection_exists(c, "a", &ex), SIEVE_EPARSE);
    sieve_client_close(c);
    stub_stop(&s);
}

Test(http, raw_request) {
    const stub_reply script[] = {{418, NULL, "teapot"}};
    stub s;
    stub_start(&s, script, 1);
    sieve_client *c = stub_client(&s, 0, NULL);
    long st = 0;
    char *body = NULL;
    cr_assert_eq(sieve_client_raw(c, "POST", "/x", "{}", 2, 1, &st, &body), 0);
    cr_assert_eq(st, 418);
    cr_assert_str_eq(body, "teapot");
    free(body);
    cr_assert_eq(sieve_client_raw(c, "PATCH", "/x", NULL, 0, 1, &st, NULL), SIEVE_EINVAL);
    cr_assert_eq(sieve_client_raw(c, "GET", "x", NULL, 0, 1, &st, NULL), SIEVE_EINVAL);
    sieve_client_close(c);
    stub_stop(&s);
}

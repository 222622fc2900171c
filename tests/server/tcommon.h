/* tcommon.h: shared fixture and assertion helpers of the sieve-server suites.
 * Each Criterion test runs in its own process, so the one static server here is private
 * to a test. Every test ends with stop_ok(), which asserts a clean SIGTERM shutdown.
 * The suites set no Criterion .timeout: with --jobs 2 the runner leaks its timeout records
 * (LeakSanitizer fails the run); ctest's TIMEOUT bounds the whole binary instead. */
#ifndef SIEVE_TEST_TCOMMON_H
#define SIEVE_TEST_TCOMMON_H

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static th_server S;
static th_resp R;
static const char *KEY; /* api key sent by go() when set */

static void fixture_init(void) {
    th_init(&S);
    memset(&R, 0, sizeof R);
    KEY = NULL;
}

static void fixture_fini(void) {
    th_resp_free(&R);
    th_cleanup(&S);
}

/* Ends the argument list of START and th_start. */
#define END ((const char *)NULL)
/* Starts the fixture's server with extra arguments: START(END), START("--x", "1", END). */
#define START(...)                                                                     \
    cr_assert_eq(th_start(&S, __VA_ARGS__), 0,                                         \
                 "sieve-server did not start (is SIEVE_BUILD_DIR set?)")

/* Sends one request (body printf-style, NULL for none) and keeps the reply in R. */
__attribute__((format(printf, 3, 4), unused)) static long go(const char *method,
                                                              const char *path,
                                                              const char *fmt, ...) {
    th_resp_free(&R);
    char *body = NULL;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(&body, fmt, ap) < 0) body = NULL;
        va_end(ap);
        cr_assert(body, "out of memory building a request");
    }
    int rc = th_req(&S, method, path, body, KEY, &R);
    free(body);
    cr_assert_eq(rc, 0, "no HTTP reply (server crashed?): %s", R.error);
    return R.status;
}

/* The same with a prebuilt body. */
__attribute__((unused)) static long go_raw(const char *method, const char *path,
                                           const char *body) {
    th_resp_free(&R);
    int rc = th_req(&S, method, path, body, KEY, &R);
    cr_assert_eq(rc, 0, "no HTTP reply (server crashed?): %s", R.error);
    return R.status;
}

/* The value of an unlabelled Prometheus sample in a /metrics body, or -1 when absent. */
__attribute__((unused)) static double metric_value(const char *text, const char *name) {
    const char *p = text;
    size_t n = strlen(name);
    while ((p = strstr(p, name))) {
        if ((p == text || p[-1] == '\n') && p[n] == ' ') return atof(p + n + 1);
        p += n;
    }
    return -1;
}

#define EXPECT_STATUS(code)                                                             \
    cr_assert_eq(R.status, (long)(code), "expected HTTP %d, got %ld: %s", (int)(code),  \
                 R.status, R.body ? R.body : "")

/* Asserts an error reply with this status whose message contains needle. */
#define EXPECT_ERROR(code, needle)                                                      \
    do {                                                                                \
        EXPECT_STATUS(code);                                                            \
        cr_assert(strstr(th_error(&R), (needle)) != NULL,                               \
                  "error message \"%s\" should mention \"%s\"", th_error(&R), (needle)); \
        cr_assert(json_is_number(json_object_get(R.json, "time")),                      \
                  "error envelope lacks time: %s", R.body);                             \
    } while (0)

/* Asserts an ok envelope and returns its result. */
__attribute__((unused)) static json_t *ok_result(void) {
    EXPECT_STATUS(200);
    cr_assert(R.json, "reply is not JSON: %s", R.body);
    cr_assert_str_eq(json_string_value(json_object_get(R.json, "status")), "ok",
                     "reply: %s", R.body);
    cr_assert(json_is_number(json_object_get(R.json, "time")), "reply: %s", R.body);
    json_t *res = json_object_get(R.json, "result");
    cr_assert(res, "reply has no result: %s", R.body);
    return res;
}

__attribute__((unused)) static void stop_ok(void) {
    int rc = th_stop(&S);
    cr_assert_eq(rc, 0, "sieve-server did not shut down cleanly on SIGTERM (status %d)", rc);
}

/* Live point count of a collection through the API. */
__attribute__((unused)) static long long api_count(const char *coll) {
    char path[256];
    snprintf(path, sizeof path, "/collections/%s/points/count", coll);
    go("POST", path, "{\"exact\":true}");
    json_t *res = ok_result();
    return json_integer_value(json_object_get(res, "count"));
}

/* Asserts that arr is a JSON array of numbers equal to want (ints and reals alike). */
__attribute__((unused)) static void expect_vec(const json_t *arr, const double *want, size_t n,
                                               const char *what) {
    cr_assert(json_is_array(arr) && json_array_size(arr) == n, "%s: expected %zu numbers: %s",
              what, n, R.body);
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(arr, i);
        cr_assert(json_is_number(x) && json_number_value(x) == want[i],
                  "%s[%zu]: expected %g, got %g", what, i, want[i], json_number_value(x));
    }
}

#endif

/* client_http.c: the HTTP core of libsieve-client.
 *
 * Owns: the client object (one libcurl easy handle reused for keep-alive, headers,
 * timeouts), sending one request with the retry rules of sieve_client.h (429/503 with
 * Retry-After or jittered exponential backoff; connection failures), mapping HTTP error
 * replies to SIEVE_E* codes with the server's message, and the client's counters.
 * Must not: know any endpoint's JSON shape (client_api.c does).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "client_internal.h"

struct sieve_client {
    CURL *h;
    struct curl_slist *headers;
    struct curl_slist *headers_bin; /* the same with the binary upsert's Content-Type */
    char *base; /* URL without a trailing '/' */
    sieve_client_options o;
    sieve__cl_buf resp; /* body of the last reply */
    sieve__cl_buf url;  /* scratch for the request URL */
    long status;
    long retry_after_ms; /* from the current reply's Retry-After; -1: none */
    char msg[1024];
    char curl_err[CURL_ERROR_SIZE];
    uint64_t rng;
    sieve_client_stats stats;
};

/* libcurl wants curl_global_init once per process before any other call from threads. */
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_OK;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

void sieve_client_options_init(sieve_client_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->url = SIEVE_CLIENT_DEFAULT_URL;
    o->connect_timeout_ms = 5000;
    o->timeout_ms = 300000;
    o->max_retries = 5;
    o->backoff_ms = 100;
    o->backoff_max_ms = 30000;
}

int sieve__cl_fail(sieve_client *c, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
    return code;
}

void sieve__cl_begin(sieve_client *c) {
    c->msg[0] = 0;
    c->status = 0;
    c->stats.calls++;
}

const char *sieve_client_message(const sieve_client *c) { return c ? c->msg : ""; }
long sieve_client_http_status(const sieve_client *c) { return c ? c->status : 0; }

void sieve_client_get_stats(const sieve_client *c, sieve_client_stats *out) {
    if (!out) return;
    if (!c) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = c->stats;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud) {
    sieve_client *c = ud;
    size_t n = size * nmemb;
    sieve__cl_buf_put(&c->resp, data, n);
    return c->resp.failed ? 0 : n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *ud) {
    sieve_client *c = ud;
    size_t n = size * nmemb;
    static const char key[] = "retry-after:";
    if (n > sizeof key - 1 && !strncasecmp(data, key, sizeof key - 1)) {
        char val[128];
        size_t len = n - (sizeof key - 1);
        if (len >= sizeof val) len = sizeof val - 1;
        memcpy(val, data + sizeof key - 1, len);
        val[len] = 0;
        char *v = val;
        while (*v == ' ' || *v == '\t') v++;
        for (char *e = v + strlen(v); e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' ');)
            *--e = 0;
        if (*v >= '0' && *v <= '9') {
            char *end;
            double secs = strtod(v, &end);
            if (end != v && secs >= 0 && secs < 1e7) c->retry_after_ms = (long)(secs * 1000.0);
        } else if (*v) {
            time_t when = curl_getdate(v, NULL);
            if (when != (time_t)-1) {
                time_t now = time(NULL);
                c->retry_after_ms = when > now ? (long)(when - now) * 1000 : 0;
            }
        }
    }
    return n;
}

int sieve_client_open(const sieve_client_options *opts, sieve_client **out) {
    if (!out) return SIEVE_EINVAL;
    *out = NULL;
    sieve_client_options o;
    if (opts)
        o = *opts;
    else
        sieve_client_options_init(&o);
    if (!o.url || !*o.url) o.url = SIEVE_CLIENT_DEFAULT_URL;
    if (strncasecmp(o.url, "http://", 7) && strncasecmp(o.url, "https://", 8)) return SIEVE_EINVAL;
    if (o.connect_timeout_ms < 0 || o.timeout_ms < 0 || o.max_retries < 0 || o.backoff_ms < 0 ||
        o.backoff_max_ms < 0)
        return SIEVE_EINVAL;
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK) return SIEVE_ENET;

    sieve_client *c = calloc(1, sizeof *c);
    if (!c) return SIEVE_ENOMEM;
    c->o = o;
    c->o.url = NULL;
    c->o.api_key = NULL;
    size_t ulen = strlen(o.url);
    while (ulen > 0 && o.url[ulen - 1] == '/') ulen--;
    c->base = malloc(ulen + 1);
    if (!c->base) goto nomem;
    memcpy(c->base, o.url, ulen);
    c->base[ulen] = 0;
    c->retry_after_ms = -1;
    c->rng = (uint64_t)(uintptr_t)c ^ ((uint64_t)time(NULL) << 20) ^ 0x9e3779b97f4a7c15ull;

    struct curl_slist *h = NULL, *t;
    if (!(t = curl_slist_append(h, "Content-Type: application/json"))) goto nomem_h;
    h = t;
    if (!(t = curl_slist_append(h, "Accept: application/json"))) goto nomem_h;
    h = t;
    /* No "Expect: 100-continue" round trip before large bodies. */
    if (!(t = curl_slist_append(h, "Expect:"))) goto nomem_h;
    h = t;
    if (o.api_key && *o.api_key) {
        size_t n = strlen(o.api_key) + 16;
        char *line = malloc(n);
        if (!line) goto nomem_h;
        snprintf(line, n, "api-key: %s", o.api_key);
        t = curl_slist_append(h, line);
        free(line);
        if (!t) goto nomem_h;
        h = t;
    }
    c->headers = h;
    /* the binary list: its own Content-Type, then the same lines as the JSON list */
    struct curl_slist *hb =
        curl_slist_append(NULL, "Content-Type: " SIEVE_CLIENT_POINTS_MEDIA_TYPE);
    for (struct curl_slist *it = h->next; hb && it; it = it->next) {
        struct curl_slist *nt = curl_slist_append(hb, it->data);
        if (!nt) {
            curl_slist_free_all(hb);
            hb = NULL;
        }
        hb = nt;
    }
    if (!hb) goto nomem;
    c->headers_bin = hb;

    c->h = curl_easy_init();
    if (!c->h) {
        sieve_client_close(c);
        return SIEVE_ENET;
    }
    CURL *e = c->h;
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->headers);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "sieve-client/" SIEVE_CLIENT_VERSION);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, c->o.connect_timeout_ms);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, c->o.timeout_ms);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, c);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->curl_err);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    *out = c;
    return 0;

nomem_h:
    curl_slist_free_all(h);
nomem:
    sieve_client_close(c);
    return SIEVE_ENOMEM;
}

void sieve_client_close(sieve_client *c) {
    if (!c) return;
    if (c->h) curl_easy_cleanup(c->h);
    curl_slist_free_all(c->headers);
    curl_slist_free_all(c->headers_bin);
    free(c->base);
    sieve__cl_buf_free(&c->resp);
    sieve__cl_buf_free(&c->url);
    free(c);
}

/* ---------------------------------------------------------------- one request */

static uint64_t next_rand(sieve_client *c) {
    uint64_t x = c->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c->rng = x;
    return x;
}

static void sleep_ms(long ms) {
    if (ms <= 0) return;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

/* The wait before retry number `retry` (1-based). */
static long retry_delay(sieve_client *c, int retry) {
    long cap = c->o.backoff_max_ms;
    if (c->retry_after_ms >= 0) return c->retry_after_ms < cap ? c->retry_after_ms : cap;
    long d = c->o.backoff_ms;
    for (int i = 1; i < retry && d < cap; i++) d *= 2;
    if (d > cap) d = cap;
    /* jitter: somewhere in [d/2, d] so parallel clients do not retry in step */
    long half = d / 2;
    return half + (long)(next_rand(c) % (uint64_t)(d - half + 1));
}

static int is_method(const char *m) {
    return !strcmp(m, "GET") || !strcmp(m, "PUT") || !strcmp(m, "POST") || !strcmp(m, "DELETE");
}

/* Sends once. Returns the CURLcode; *status gets the reply's status (0 without one). */
static CURLcode send_once(sieve_client *c, const char *method, const char *body, size_t body_len,
                          int binary, long *status) {
    CURL *e = c->h;
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, binary ? c->headers_bin : c->headers);
    sieve__cl_buf_reset(&c->resp);
    c->retry_after_ms = -1;
    c->curl_err[0] = 0;
    curl_easy_setopt(e, CURLOPT_URL, c->url.p);
    if (!strcmp(method, "GET") || (!strcmp(method, "DELETE") && !body)) {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, !strcmp(method, "GET") ? NULL : method);
    } else {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? body_len : 0));
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, !strcmp(method, "POST") ? NULL : method);
    }
    c->stats.attempts++;
    c->stats.bytes_sent += body ? body_len : 0;
    CURLcode cc = curl_easy_perform(e);
    long st = 0, nconn = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &st);
    curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &nconn);
    c->stats.connects += (uint64_t)nconn;
    *status = cc == CURLE_OK ? st : 0;
    return cc;
}

/* Sends with the retry rules; on return c->resp holds the last reply's body and c->status
 * its status. Returns 0 when a reply came (any status), else SIEVE_ENET/ENOMEM with the
 * message set. */
static int send_retrying(sieve_client *c, const char *method, const char *path, const char *body,
                         size_t body_len, int idempotent, int binary) {
    if (!is_method(method) || !path || path[0] != '/')
        return sieve__cl_fail(c, SIEVE_EINVAL, "bad request method or path");
    sieve__cl_buf_reset(&c->url);
    sieve__cl_buf_puts(&c->url, c->base);
    sieve__cl_buf_puts(&c->url, path);
    if (c->url.failed) return sieve__cl_fail(c, SIEVE_ENOMEM, "out of memory");
    for (int attempt = 0;; attempt++) {
        long st = 0;
        CURLcode cc = send_once(c, method, body, body_len, binary, &st);
        c->status = st;
        int retry = 0;
        if (cc == CURLE_OK) {
            if (st == 429 || st == 503) retry = 1;
        } else if (cc == CURLE_WRITE_ERROR && c->resp.failed) {
            return sieve__cl_fail(c, SIEVE_ENOMEM, "out of memory reading the reply of %s %s",
                                  method, path);
        } else if (cc == CURLE_COULDNT_CONNECT) {
            retry = 1; /* nothing was sent */
        } else if (cc == CURLE_SEND_ERROR || cc == CURLE_RECV_ERROR || cc == CURLE_GOT_NOTHING ||
                   cc == CURLE_PARTIAL_FILE || cc == CURLE_OPERATION_TIMEDOUT) {
            retry = idempotent;
        }
        if (retry && attempt < c->o.max_retries) {
            c->stats.retries++;
            sleep_ms(retry_delay(c, attempt + 1));
            continue;
        }
        if (cc != CURLE_OK) {
            const char *why = c->curl_err[0] ? c->curl_err : curl_easy_strerror(cc);
            if (cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST)
                return sieve__cl_fail(c, SIEVE_ENET,
                                      "cannot connect to %s: %s (%d attempts); is sieve-server "
                                      "running there?",
                                      c->base, why, attempt + 1);
            return sieve__cl_fail(c, SIEVE_ENET, "%s %s%s: %s (%d attempts)", method, c->base, path,
                                  why, attempt + 1);
        }
        return 0;
    }
}

static int status_to_code(long st) {
    switch (st) {
    case 400: return SIEVE_EINVAL;
    case 401:
    case 403: return SIEVE_EAUTH;
    case 404: return SIEVE_ENOTFOUND;
    case 409: return SIEVE_EEXIST;
    case 413: return SIEVE_ETOOBIG;
    case 500: return SIEVE_EINTERNAL;
    default: return SIEVE_ENET;
    }
}

/* Records the message of an error reply in c->msg and returns its code. */
static int error_reply(sieve_client *c, const char *method, const char *path) {
    long st = c->status;
    int code = status_to_code(st);
    const char *text = NULL;
    json_t *j = c->resp.len ? json_loadb(c->resp.p, c->resp.len, 0, NULL) : NULL;
    if (j) {
        json_t *s = json_object_get(j, "status");
        json_t *e = json_is_object(s) ? json_object_get(s, "error") : NULL;
        if (json_is_string(e)) text = json_string_value(e);
    }
    if (text) {
        sieve__cl_fail(c, code, "%s (HTTP %ld)", text, st);
    } else if (c->resp.len) {
        /* a non-JSON body: its first line, trimmed */
        size_t n = strcspn(c->resp.p, "\r\n");
        if (n > 300) n = 300;
        sieve__cl_fail(c, code, "%s %s: HTTP %ld: %.*s", method, path, st, (int)n, c->resp.p);
    } else {
        sieve__cl_fail(c, code, "%s %s: HTTP %ld", method, path, st);
    }
    if (st == 429 || st == 503) {
        size_t len = strlen(c->msg);
        snprintf(c->msg + len, sizeof c->msg - len, "; server still busy after %d retries",
                 c->o.max_retries);
    }
    json_decref(j);
    return code;
}

static int request_common(sieve_client *c, const char *method, const char *path,
                          const char *body, size_t body_len, int idempotent, int binary,
                          json_t **json) {
    if (json) *json = NULL;
    int rc = send_retrying(c, method, path, body, body_len, idempotent, binary);
    if (rc) return rc;
    if (c->status < 200 || c->status > 299) return error_reply(c, method, path);
    if (!json) return 0;
    json_error_t je;
    json_t *j = json_loadb(c->resp.p ? c->resp.p : "", c->resp.len, 0, &je);
    if (!j)
        return sieve__cl_fail(c, SIEVE_EPARSE, "%s %s: reply is not JSON (%s at byte %d)", method,
                              path, je.text, je.position);
    *json = j;
    return 0;
}

int sieve__cl_request(sieve_client *c, const char *method, const char *path, const char *body,
                      size_t body_len, int idempotent, json_t **json) {
    return request_common(c, method, path, body, body_len, idempotent, 0, json);
}

int sieve__cl_request_binary(sieve_client *c, const char *method, const char *path,
                             const char *body, size_t body_len, int idempotent, json_t **json) {
    return request_common(c, method, path, body, body_len, idempotent, 1, json);
}

int sieve_client_raw(sieve_client *c, const char *method, const char *path, const char *body,
                     size_t body_len, int idempotent, long *status, char **reply) {
    if (reply) *reply = NULL;
    if (status) *status = 0;
    if (!c) return SIEVE_EINVAL;
    sieve__cl_begin(c);
    if (!method || !path) return sieve__cl_fail(c, SIEVE_EINVAL, "method and path are required");
    int rc = send_retrying(c, method, path, body, body_len, idempotent, 0);
    if (rc) return rc;
    if (status) *status = c->status;
    if (reply) {
        char *copy = malloc(c->resp.len + 1);
        if (!copy) return sieve__cl_fail(c, SIEVE_ENOMEM, "out of memory");
        if (c->resp.len) memcpy(copy, c->resp.p, c->resp.len);
        copy[c->resp.len] = 0;
        *reply = copy;
    }
    return 0;
}

/* reply.c: the one place where sieve-server's response bodies are built.
 *
 * Owns: Qdrant's envelope, {"result":...,"status":"ok","time":s} for success and
 * {"status":{"error":"..."},"time":s} for errors, and setting a request's reply exactly
 * once. Must not: queue responses on connections (http.c does) or validate input.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

char *sieve__envelope_ok(double seconds, const char *result, size_t len, size_t *out_len) {
    sieve__sbuf b;
    sieve__sbuf_init(&b);
    sieve__sbuf_puts(&b, "{\"result\":");
    sieve__sbuf_put(&b, result, len);
    sieve__sbuf_printf(&b, ",\"status\":\"ok\",\"time\":%.6f}", seconds);
    if (b.failed) {
        sieve__sbuf_free(&b);
        return NULL;
    }
    *out_len = b.len;
    return b.p;
}

char *sieve__envelope_error(double seconds, const char *msg, size_t *out_len) {
    sieve__sbuf b;
    sieve__sbuf_init(&b);
    sieve__sbuf_puts(&b, "{\"status\":{\"error\":");
    sieve__sbuf_json_str(&b, msg, strlen(msg));
    sieve__sbuf_printf(&b, "},\"time\":%.6f}", seconds);
    if (b.failed) {
        sieve__sbuf_free(&b);
        return NULL;
    }
    *out_len = b.len;
    return b.p;
}

static void set_reply(sieve__req *req, unsigned status, const char *type, char *body,
                      size_t len) {
    free(req->resp);
    req->status = status;
    req->resp = body;
    req->resp_len = len;
    req->resp_type = type;
    req->state = SIEVE_REQ_DONE;
}

/* Last resort when even the error body cannot be allocated: a static body. */
static void set_oom(sieve__req *req) {
    static const char oom[] = "{\"status\":{\"error\":\"out of memory\"},\"time\":0}";
    char *p = malloc(sizeof oom);
    if (p) memcpy(p, oom, sizeof oom);
    set_reply(req, 500, "application/json", p, p ? sizeof oom - 1 : 0);
}

static double elapsed(const sieve__req *req) { return sieve__now_s() - req->t_start; }

void sieve__reply_ok_raw(sieve__req *req, const char *result, size_t len) {
    size_t n = 0;
    char *body = sieve__envelope_ok(elapsed(req), result, len, &n);
    if (!body) {
        set_oom(req);
        return;
    }
    set_reply(req, 200, "application/json", body, n);
}

void sieve__reply_ok_json(sieve__req *req, json_t *result) {
    sieve__sbuf b;
    sieve__sbuf_init(&b);
    if (result) sieve__sbuf_json(&b, result);
    else b.failed = 1;
    json_decref(result);
    if (b.failed) {
        sieve__sbuf_free(&b);
        set_oom(req);
        return;
    }
    sieve__reply_ok_raw(req, b.p, b.len);
    sieve__sbuf_free(&b);
}

void sieve__reply_error(sieve__req *req, unsigned status, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t n = 0;
    char *body = sieve__envelope_error(elapsed(req), msg, &n);
    if (!body) {
        set_oom(req);
        return;
    }
    set_reply(req, status, "application/json", body, n);
    sieve__log(req->srv, SIEVE_LOG_DEBUG, "%s -> %u: %s", sieve__route_name(req->route),
               status, msg);
}

void sieve__reply_err(sieve__req *req, const sieve__err *e) {
    sieve__reply_error(req, e->status ? e->status : 500, "%s",
                       e->msg[0] ? e->msg : "internal error");
}

void sieve__reply_text(sieve__req *req, unsigned status, const char *content_type,
                       const char *text) {
    size_t n = strlen(text);
    char *p = malloc(n + 1);
    if (!p) {
        set_oom(req);
        return;
    }
    memcpy(p, text, n + 1);
    set_reply(req, status, content_type, p, n);
}

/* http.c: sieve-server's HTTP layer on libmicrohttpd.
 *
 * Owns: the daemon (thread pool on poll, connection timeout and memory limit, suspend and
 * resume), the per-request state machine (route, auth and size checks on the headers;
 * body accumulation up to the cap; JSON parsing; dispatch; queueing the reply), request
 * metrics, and the clean shutdown (stop accepting, let in-flight requests finish, stop).
 * Must not: interpret request fields (routes do) or build reply bodies (reply.c does).
 *
 * A request's life: headers arrive -> route, auth, Content-Length checked (an error is
 * queued at once and the rest of the body is discarded by the daemon) -> body chunks
 * appended (past the cap they are dropped and the reply is 413) -> body parsed, handler
 * run -> the handler set a reply, or suspended the connection for the batcher, which
 * answers every query and resumes; the reply is then built on this thread -> reply queued
 * -> completion callback records metrics and frees.
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server.h"

typedef void (*handler_fn)(sieve__req *req, json_t *body);

enum { BODY_NONE = 0, BODY_OPTIONAL, BODY_REQUIRED };

typedef struct route_def {
    const char *name;
    handler_fn fn;
    int write; /* changes data: the read-only key gets 403 */
    int open;  /* no api key needed */
    int body;
    int raw;   /* the handler reads req->body itself (no jansson tree) */
} route_def;

static const route_def routes[SIEVE_R_COUNT] = {
    [SIEVE_R_ROOT] = {"GET /", sieve__route_root, 0, 1, BODY_NONE},
    [SIEVE_R_HEALTHZ] = {"GET /healthz", sieve__route_health, 0, 1, BODY_NONE},
    [SIEVE_R_LIVEZ] = {"GET /livez", sieve__route_health, 0, 1, BODY_NONE},
    [SIEVE_R_READYZ] = {"GET /readyz", sieve__route_health, 0, 1, BODY_NONE},
    [SIEVE_R_METRICS] = {"GET /metrics", sieve__route_metrics, 0, 0, BODY_NONE},
    [SIEVE_R_COLL_LIST] = {"GET /collections", sieve__route_coll_list, 0, 0, BODY_NONE},
    [SIEVE_R_COLL_GET] = {"GET /collections/{name}", sieve__route_coll_get, 0, 0, BODY_NONE},
    [SIEVE_R_COLL_CREATE] = {"PUT /collections/{name}", sieve__route_coll_create, 1, 0,
                             BODY_REQUIRED},
    [SIEVE_R_COLL_DELETE] = {"DELETE /collections/{name}", sieve__route_coll_delete, 1, 0,
                             BODY_NONE},
    [SIEVE_R_COLL_EXISTS] = {"GET /collections/{name}/exists", sieve__route_coll_exists, 0, 0,
                             BODY_NONE},
    [SIEVE_R_POINTS_UPSERT] = {"PUT /collections/{name}/points", sieve__route_points_upsert,
                               1, 0, BODY_REQUIRED, 1},
    [SIEVE_R_POINTS_RETRIEVE] = {"POST /collections/{name}/points",
                                 sieve__route_points_retrieve, 0, 0, BODY_REQUIRED},
    [SIEVE_R_POINT_GET] = {"GET /collections/{name}/points/{id}", sieve__route_point_get, 0, 0,
                           BODY_NONE},
    [SIEVE_R_POINTS_DELETE] = {"POST /collections/{name}/points/delete",
                               sieve__route_points_delete, 1, 0, BODY_REQUIRED},
    [SIEVE_R_POINTS_COUNT] = {"POST /collections/{name}/points/count",
                              sieve__route_points_count, 0, 0, BODY_OPTIONAL},
    [SIEVE_R_POINTS_SCROLL] = {"POST /collections/{name}/points/scroll",
                               sieve__route_points_scroll, 0, 0, BODY_OPTIONAL},
    [SIEVE_R_SEARCH] = {"POST /collections/{name}/points/search", sieve__route_search, 0, 0,
                        BODY_REQUIRED},
    [SIEVE_R_SEARCH_BATCH] = {"POST /collections/{name}/points/search/batch",
                              sieve__route_search, 0, 0, BODY_REQUIRED},
    [SIEVE_R_QUERY] = {"POST /collections/{name}/points/query", sieve__route_search, 0, 0,
                       BODY_REQUIRED},
    [SIEVE_R_QUERY_BATCH] = {"POST /collections/{name}/points/query/batch",
                             sieve__route_search, 0, 0, BODY_REQUIRED},
    [SIEVE_R_INDEX_CREATE] = {"PUT /collections/{name}/index", sieve__route_index, 1, 0,
                              BODY_REQUIRED},
    [SIEVE_R_INDEX_DELETE] = {"DELETE /collections/{name}/index/{field}", sieve__route_index,
                              1, 0, BODY_NONE},
    [SIEVE_R_UNMATCHED] = {"unmatched", NULL, 0, 1, BODY_NONE},
};

const char *sieve__route_name(sieve__route r) {
    if ((unsigned)r >= SIEVE_R_COUNT) r = SIEVE_R_UNMATCHED;
    return routes[r].name;
}

static sieve__method parse_method(const char *m) {
    static const char *const names[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"};
    for (int i = 0; i < 6; i++)
        if (!strcmp(m, names[i])) return (sieve__method)i;
    return SIEVE_M_OTHER;
}

/* Resolves method + path into req->route (and req->name / req->point_id).
 * Returns 0, or fills e (404 unknown path, 405 wrong method, 400 bad name). */
static int resolve(sieve__req *req, const char *method, const char *url, sieve__err *e) {
    char path[1024];
    size_t len = strcspn(url, "?");
    if (len >= sizeof path) return sieve__fail(e, 404, "unknown path (too long)");
    memcpy(path, url, len);
    path[len] = 0;
    while (len > 1 && path[len - 1] == '/') path[--len] = 0;
    char *seg[8];
    int n = 0;
    for (char *save = NULL, *t = strtok_r(path, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
        if (n == 8) return sieve__fail(e, 404, "unknown path: %.200s", url);
        seg[n++] = t;
    }
    sieve__method m = req->method == SIEVE_M_HEAD ? SIEVE_M_GET : req->method;
    sieve__route r = SIEVE_R_UNMATCHED;
    int ok_method = 0;
#define WANT(method, route) \
    do {                    \
        if (m == (method)) { r = (route); ok_method = 1; } \
    } while (0)
    if (n == 0) WANT(SIEVE_M_GET, SIEVE_R_ROOT);
    else if (n == 1 && !strcmp(seg[0], "healthz")) WANT(SIEVE_M_GET, SIEVE_R_HEALTHZ);
    else if (n == 1 && !strcmp(seg[0], "livez")) WANT(SIEVE_M_GET, SIEVE_R_LIVEZ);
    else if (n == 1 && !strcmp(seg[0], "readyz")) WANT(SIEVE_M_GET, SIEVE_R_READYZ);
    else if (n == 1 && !strcmp(seg[0], "metrics")) WANT(SIEVE_M_GET, SIEVE_R_METRICS);
    else if (n >= 1 && !strcmp(seg[0], "collections")) {
        if (n == 1) WANT(SIEVE_M_GET, SIEVE_R_COLL_LIST);
        else if (n == 2) {
            WANT(SIEVE_M_GET, SIEVE_R_COLL_GET);
            WANT(SIEVE_M_PUT, SIEVE_R_COLL_CREATE);
            WANT(SIEVE_M_DELETE, SIEVE_R_COLL_DELETE);
        } else if (n == 3 && !strcmp(seg[2], "exists")) {
            WANT(SIEVE_M_GET, SIEVE_R_COLL_EXISTS);
        } else if (n == 3 && !strcmp(seg[2], "index")) {
            WANT(SIEVE_M_PUT, SIEVE_R_INDEX_CREATE);
        } else if (n == 4 && !strcmp(seg[2], "index")) {
            WANT(SIEVE_M_DELETE, SIEVE_R_INDEX_DELETE);
        } else if (n >= 3 && !strcmp(seg[2], "points")) {
            if (n == 3) {
                WANT(SIEVE_M_PUT, SIEVE_R_POINTS_UPSERT);
                WANT(SIEVE_M_POST, SIEVE_R_POINTS_RETRIEVE);
            } else if (n == 4 && !strcmp(seg[3], "delete")) {
                WANT(SIEVE_M_POST, SIEVE_R_POINTS_DELETE);
            } else if (n == 4 && !strcmp(seg[3], "count")) {
                WANT(SIEVE_M_POST, SIEVE_R_POINTS_COUNT);
            } else if (n == 4 && !strcmp(seg[3], "scroll")) {
                WANT(SIEVE_M_POST, SIEVE_R_POINTS_SCROLL);
            } else if (n == 4 && !strcmp(seg[3], "search")) {
                WANT(SIEVE_M_POST, SIEVE_R_SEARCH);
            } else if (n == 4 && !strcmp(seg[3], "query")) {
                WANT(SIEVE_M_POST, SIEVE_R_QUERY);
            } else if (n == 5 && !strcmp(seg[3], "search") && !strcmp(seg[4], "batch")) {
                WANT(SIEVE_M_POST, SIEVE_R_SEARCH_BATCH);
            } else if (n == 5 && !strcmp(seg[3], "query") && !strcmp(seg[4], "batch")) {
                WANT(SIEVE_M_POST, SIEVE_R_QUERY_BATCH);
            } else if (n == 4) {
                WANT(SIEVE_M_GET, SIEVE_R_POINT_GET);
                if (ok_method) {
                    req->point_id = strdup(seg[3]);
                    if (!req->point_id) return sieve__fail(e, 500, "out of memory");
                }
            } else {
                return sieve__fail(e, 404, "unknown path: %.200s", url);
            }
        } else {
            return sieve__fail(e, 404, "unknown path: %.200s", url);
        }
        if (ok_method && n >= 2) {
            if (strlen(seg[1]) > SIEVE_NAME_MAX || !sieve_store_name_valid(seg[1]))
                return sieve__fail(e, 400, "collection name: \"%.80s\" is invalid (expected "
                                           "1 to %d characters of A-Z a-z 0-9 _ . -, not "
                                           "\".\" or \"..\")", seg[1], SIEVE_NAME_MAX);
            snprintf(req->name, sizeof req->name, "%s", seg[1]);
        }
    } else {
        return sieve__fail(e, 404, "unknown path: %.200s", url);
    }
#undef WANT
    if (!ok_method)
        return sieve__fail(e, 405, "method %.16s is not allowed on %.200s", method, url);
    req->route = r;
    return 0;
}

void sieve__req_release_body(sieve__req *req) {
    if (req->body_accounted) atomic_fetch_sub(&req->srv->body_bytes, req->body_accounted);
    req->body_accounted = 0;
    sieve__sbuf_free(&req->body);
}

const char *sieve__req_arg(sieve__req *req, const char *key) {
    return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, key);
}

void sieve__req_suspend(sieve__req *req) {
    req->state = SIEVE_REQ_SUSPENDED;
    req->suspended = 1;
    atomic_fetch_add(&req->srv->suspended, 1);
    MHD_suspend_connection(req->conn);
}

void sieve__req_resume(sieve__req *req) {
    sieve_server *s = req->srv;
    MHD_resume_connection(req->conn);
    atomic_fetch_sub(&s->suspended, 1);
}

/* Queues req's reply on its connection. */
static enum MHD_Result send_reply(sieve__req *req) {
    struct MHD_Response *r = MHD_create_response_from_buffer(req->resp_len, req->resp,
                                                             MHD_RESPMEM_MUST_FREE);
    if (!r) return MHD_NO;
    req->resp = NULL; /* the response owns the body now */
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                            req->resp_type ? req->resp_type : "application/json");
    if (req->close_after) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(req->conn, req->status, r);
    MHD_destroy_response(r);
    req->state = SIEVE_REQ_SENT;
    return ret;
}

/* Drops the request from the count of searches on their way to the batcher. */
static void leave_incoming(sieve__req *req) {
    if (!req->incoming) return;
    req->incoming = 0;
    atomic_fetch_sub(&req->srv->searches_incoming, 1);
}

/* Runs the route's handler on the complete body. */
static void dispatch(sieve__req *req) {
    const route_def *rd = &routes[req->route];
    leave_incoming(req); /* a search is queued (or refused) by the handler below */
    /* The plainest search bodies skip the jansson tree (768 numbers are 768 nodes). */
    if (req->route == SIEVE_R_SEARCH && sieve__route_search_plain(req)) return;
    json_t *body = NULL;
    if (rd->raw) {
        if (!req->body.len && !req->binary_body) {
            sieve__reply_error(req, 400, "request body: expected a JSON object, got an empty "
                                         "body");
            return;
        }
        rd->fn(req, NULL);
        return;
    }
    if (rd->body != BODY_NONE && req->body.len) {
        json_error_t je;
        body = json_loadb(req->body.p, req->body.len, JSON_REJECT_DUPLICATES, &je);
        if (!body) {
            sieve__reply_error(req, 400, "request body: invalid JSON at line %d, column %d: %s",
                               je.line, je.column, je.text);
            return;
        }
        if (!json_is_object(body)) {
            sieve__reply_error(req, 400, "request body: expected a JSON object, got %s",
                               sieve__jv_type(body));
            json_decref(body);
            return;
        }
    } else if (rd->body == BODY_REQUIRED) {
        sieve__reply_error(req, 400, "request body: expected a JSON object, got an empty body");
        return;
    }
    sieve__req_release_body(req); /* handlers work from the parsed tree */
    rd->fn(req, body);
    json_decref(body);
}

/* The first callback of a request: everything that can be decided from the headers. */
static void on_headers(sieve__req *req, const char *method, const char *url) {
    sieve_server *s = req->srv;
    sieve__err e;
    if (resolve(req, method, url, &e)) {
        req->route = SIEVE_R_UNMATCHED;
        sieve__reply_err(req, &e);
        return;
    }
    const route_def *rd = &routes[req->route];
    if (!atomic_load(&s->ready) && req->route != SIEVE_R_HEALTHZ &&
        req->route != SIEVE_R_LIVEZ) {
        req->close_after = 1;
        if (req->route == SIEVE_R_READYZ) return; /* the handler answers 503 */
        sieve__reply_error(req, 503, "the server is shutting down");
        return;
    }
    if (!rd->open && sieve__auth_check(s, req->conn, rd->write, &e)) {
        sieve__reply_err(req, &e);
        return;
    }
    if (req->route == SIEVE_R_POINTS_UPSERT) {
        /* the media type, case-insensitive, optionally followed by parameters */
        const char *ct = MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_TYPE);
        size_t ml = strlen(SIEVE_BIN_MEDIA_TYPE);
        if (ct && !strncasecmp(ct, SIEVE_BIN_MEDIA_TYPE, ml) &&
            (ct[ml] == 0 || ct[ml] == ';' || ct[ml] == ' ' || ct[ml] == '\t'))
            req->binary_body = 1;
    }
    const char *cl = MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(cl, &end, 10);
        if (errno || end == cl || v > s->cfg.max_body) {
            sieve__reply_error(req, 413, "request body too large: %s bytes, the limit is %zu "
                                         "(--max-body)", cl, s->cfg.max_body);
            return;
        }
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **con_cls) {
    sieve_server *s = cls;
    sieve__req *req = *con_cls;
    if (!req) {
        req = calloc(1, sizeof *req);
        if (!req) return MHD_NO;
        req->srv = s;
        req->conn = conn;
        req->t_start = sieve__now_s();
        req->method = parse_method(method);
        req->route = SIEVE_R_UNMATCHED;
        sieve__sbuf_init(&req->body);
        atomic_fetch_add(&s->in_flight, 1);
        *con_cls = req;
        on_headers(req, method, url);
        if (req->state == SIEVE_REQ_DONE) return send_reply(req);
        if (req->route == SIEVE_R_SEARCH || req->route == SIEVE_R_SEARCH_BATCH ||
            req->route == SIEVE_R_QUERY || req->route == SIEVE_R_QUERY_BATCH) {
            req->incoming = 1;
            atomic_fetch_add(&s->searches_incoming, 1);
        }
        return MHD_YES;
    }
    if (req->state == SIEVE_REQ_BODY) {
        if (*upload_size) {
            size_t n = *upload_size;
            *upload_size = 0;
            if (req->body_too_large || req->body_busy) return MHD_YES; /* discarding */
            if (req->body.len + n > s->cfg.max_body) {
                req->body_too_large = 1;
                sieve__req_release_body(req);
                return MHD_YES;
            }
            /* A budget for all bodies together, so many large uploads at once cannot
             * exhaust memory. */
            unsigned long long budget = (unsigned long long)s->cfg.max_body *
                                        SIEVE_SERVER_BODY_BUDGET;
            if (atomic_fetch_add(&s->body_bytes, n) + n > budget) {
                atomic_fetch_sub(&s->body_bytes, n);
                req->body_busy = 1;
                sieve__req_release_body(req);
                return MHD_YES;
            }
            req->body_accounted += n;
            sieve__sbuf_put(&req->body, upload, n);
            return MHD_YES;
        }
        if (req->body_busy)
            sieve__reply_error(req, 503, "the server holds too many large request bodies at "
                                         "once; retry shortly");
        else if (req->body_too_large)
            sieve__reply_error(req, 413, "request body too large: the limit is %zu bytes "
                                         "(--max-body)", s->cfg.max_body);
        else if (req->body.failed)
            sieve__reply_error(req, 500, "out of memory while reading the request body");
        else
            dispatch(req);
        if (req->suspended) {
            /* The batcher owns the reply now and may already be writing it: touch nothing
             * but this flag (only this thread uses it). MHD calls again after resume. */
            req->suspended = 0;
            return MHD_YES;
        }
    }
    if (req->state == SIEVE_REQ_SUSPENDED && req->job &&
        atomic_load(&req->job->pending) == 0) {
        /* Resumed by the batcher with every query answered: the reply is built here, on
         * this connection's pool thread, so the batcher is free for the next batch. */
        double t = sieve__now_s();
        sieve__search_job_reply(req->job);
        sieve__metrics_reply(s->metrics, sieve__now_s() - t);
    }
    if (req->state == SIEVE_REQ_DONE) return send_reply(req);
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    sieve_server *s = cls;
    sieve__req *req = *con_cls;
    if (!req) return;
    *con_cls = NULL;
    double dt = sieve__now_s() - req->t_start;
    if (req->status) {
        sieve__metrics_request(s->metrics, req->route, req->status, dt);
        sieve__log(s, SIEVE_LOG_DEBUG, "%s %s -> %u (%.3f ms)%s", sieve__route_name(req->route),
                   req->name, req->status, dt * 1e3,
                   toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection closed)");
    }
    leave_incoming(req);
    sieve__req_release_body(req);
    free(req->resp);
    free(req->point_id);
    sieve__job_free(req->job);
    free(req);
    atomic_fetch_sub(&s->in_flight, 1);
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
    sieve__log(cls, SIEVE_LOG_WARN, "http: %s", line);
}

int sieve__http_start(sieve_server *s) {
    const sieve_server_config *c = &s->cfg;
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port[16];
    snprintf(port, sizeof port, "%u", c->port);
    int gai = getaddrinfo(c->host[0] ? c->host : NULL, port, &hints, &ai);
    if (gai) {
        sieve__log(s, SIEVE_LOG_ERROR, "cannot resolve --host %s: %s", c->host,
                   gai_strerror(gai));
        return SIEVE_EINVAL;
    }
    /* poll(), not epoll: with epoll, MHD_quiesce_daemon (sieve__http_shutdown) races a
       pool worker that removes the listen socket from its epoll set at the same time, and
       libmicrohttpd aborts the process ("Failed to remove listen FD from epoll set";
       0.9.75, twice in 39 runs of the server test suite). With poll the quiesce reaches
       the workers through their inter-thread channel. Each worker polls only its own
       share of the connections. */
    unsigned flags = MHD_USE_POLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    s->daemon = MHD_start_daemon(
        flags, (uint16_t)c->port, NULL, NULL, on_request, s,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s, /* first, so every message goes through it */
        MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)c->threads,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)c->conn_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(256 * 1024),
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)10000,
        MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)1024,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->daemon) {
        sieve__log(s, SIEVE_LOG_ERROR, "cannot listen on %s:%u (is the port in use?)", c->host,
                   c->port);
        return SIEVE_EIO;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->bound_port = di ? di->port : c->port;
    return 0;
}

void sieve__http_shutdown(sieve_server *s, double grace_s) {
    if (!s->daemon) return;
    atomic_store(&s->ready, 0);
    MHD_socket fd = MHD_quiesce_daemon(s->daemon);
    /* In-flight requests finish; searches waiting for the batcher always complete, and the
     * daemon must not stop while a connection is suspended, so wait for those without a
     * deadline and for the rest up to grace_s. */
    double deadline = sieve__now_s() + grace_s;
    while (atomic_load(&s->in_flight) > 0) {
        if (atomic_load(&s->suspended) == 0 && sieve__now_s() > deadline) {
            sieve__log(s, SIEVE_LOG_WARN, "closing %ld unfinished request(s) after %.0f s",
                       (long)atomic_load(&s->in_flight), grace_s);
            break;
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(s->daemon);
    s->daemon = NULL;
    if (fd != MHD_INVALID_SOCKET) close(fd);
}

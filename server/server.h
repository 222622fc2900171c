/* server.h: internal declarations shared by sieve-server's files (never installed).
 *
 * Owns: the server context (sieve_server), the per-request state (sieve__req), the error
 * record used by every validator (sieve__err) and the prototypes of each file's entry
 * points. Must not: hold mutable globals; every piece of state hangs off sieve_server.
 *
 * Threads: libmicrohttpd's pool threads run the route handlers and build search replies;
 * --batch-workers batcher workers per device run searches; the main thread waits for a
 * signal and shuts down. sieve_server's
 * fields are written before the threads start and only read afterwards, except the atomics
 * and the objects that carry their own locks (metrics, batcher, store).
 */
#ifndef SIEVE_SERVER_H
#define SIEVE_SERVER_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "sieve_kernels.h"
#include "sieve_store.h"

#ifndef SIEVE_VERSION
#define SIEVE_VERSION "0.0.0"
#endif

/* The largest k the server asks of the kernel: offset + limit of one search must not
 * exceed it. 16384 is the top of the kernel's fast path (design.md). */
#define SIEVE_SERVER_MAX_K 16384u
/* Most searches in one search/batch or query/batch request. */
#define SIEVE_SERVER_MAX_BATCH_SEARCHES 1024u
/* Most results one search request may ask for (offset + limit summed over its searches),
 * and most vector values it may ask to return (limit x dim summed over searches with
 * with_vector): replies stay within a few hundred MB. */
#define SIEVE_SERVER_MAX_RESULTS (1u << 20)
#define SIEVE_SERVER_MAX_VECTOR_VALUES (1u << 25)
/* Request bodies held in memory at once, as a multiple of --max-body; past it 503. */
#define SIEVE_SERVER_BODY_BUDGET 16u
/* Most queries waiting in one collection's queue; past it searches get 503. */
#define SIEVE_SERVER_MAX_QUEUE 65536u
/* Deepest nesting of filters inside filters. */
#define SIEVE_SERVER_MAX_FILTER_DEPTH 32

/* ---------------------------------------------------------------- small helpers */

/* A growable text buffer. On allocation failure it sets failed and drops further writes;
 * callers check failed once at the end. Always NUL-terminated when p != NULL. */
typedef struct sieve__sbuf {
    char *p;
    size_t len, cap;
    int failed;
} sieve__sbuf;

void sieve__sbuf_init(sieve__sbuf *b);
void sieve__sbuf_free(sieve__sbuf *b);
void sieve__sbuf_put(sieve__sbuf *b, const char *s, size_t n);
void sieve__sbuf_puts(sieve__sbuf *b, const char *s);
void sieve__sbuf_putc(sieve__sbuf *b, char c);
void sieve__sbuf_printf(sieve__sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Length (1-4) of the valid UTF-8 sequence starting at s (n bytes available), or 0 when
 * it is not valid UTF-8 (overlong forms, surrogates and code points past U+10FFFF too). */
size_t sieve__utf8_seq(const unsigned char *s, size_t n);
/* Appends s (n bytes) as a quoted, escaped JSON string; invalid UTF-8 becomes U+FFFD, so
 * replies stay valid JSON whatever a client sent. */
void sieve__sbuf_json_str(sieve__sbuf *b, const char *s, size_t n);
/* Appends a float32 value as a JSON number with 9 significant digits (enough to round-trip
 * any float32); infinities become +-3.40282347e+38 because JSON has no infinity. */
void sieve__sbuf_float(sieve__sbuf *b, float f);
/* Writes f to out (at least 24 bytes) exactly as snprintf's "%.9g" of (double)f does (9
 * significant digits, rounded half to even on the exact value, trailing zeros dropped, the
 * exponent form when the first digit's exponent is below -4 or above 8) and returns the
 * length. Floats of magnitude 2^-20 to 2^124 (and many smaller) take an integer path (the
 * value as a 128-bit integer times a power of ten) that is several times faster than
 * snprintf; the rest (tiny, subnormal, infinite, NaN) go through snprintf. */
int sieve__fmt_float(char *out, float f);
/* sieve__fmt_float of f as a JSON number (NaN as 0, infinities as +-3.40282347e+38, as
 * sieve__sbuf_float writes them); out at least 24 bytes. */
int sieve__fmt_json_float(char *out, float f);
/* Appends a jansson value as compact JSON. */
void sieve__sbuf_json(sieve__sbuf *b, const json_t *j);

double sieve__now_s(void); /* monotonic seconds */
/* snprintf for field paths in messages: truncation is fine there (and expected to be
 * rare), so this wrapper keeps -Wformat-truncation quiet about it. */
int sieve__pathf(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Why a request failed: the HTTP status and a message naming the field. Validators fill
 * one and return -1; handlers pass it to sieve__reply_err. */
typedef struct sieve__err {
    unsigned status;
    char msg[512];
} sieve__err;

/* Fills e (status, printf-style message) and returns -1. */
int sieve__fail(sieve__err *e, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The HTTP status for a SIEVE_E* code from the store or the kernels. */
unsigned sieve__status_for(int code);

/* ---------------------------------------------------------------- logging */

enum { SIEVE_LOG_ERROR = 0, SIEVE_LOG_WARN = 1, SIEVE_LOG_INFO = 2, SIEVE_LOG_DEBUG = 3 };

struct sieve_server;
void sieve__log(const struct sieve_server *s, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---------------------------------------------------------------- configuration */

typedef struct sieve_server_config {
    char host[256];
    unsigned port;           /* 0 = any free port (printed at startup) */
    char data_dir[4096];
    char api_key[512];       /* empty = no authentication */
    char read_only_key[512]; /* empty = none */
    size_t max_body;         /* bytes */
    uint32_t batch_max;      /* most queries in one kernel call */
    uint32_t batch_wait_us;  /* how long a lone query waits for company */
    uint32_t batch_workers;  /* batch workers per device; 0 = 2 on a GPU, 1 on the CPU */
    uint32_t threads;        /* HTTP pool threads */
    char device[256];        /* "auto", "cpu", "cpu:T", "cuda:N"; comma-separated list */
    int log_level;
    unsigned conn_timeout_s;
    int no_sync;             /* testing only: LMDB without fsync */
    int host_page_cache;     /* testing only: the GPU page cache's code paths on the CPU */
} sieve_server_config;

/* ---------------------------------------------------------------- the context */

typedef struct sieve__metrics sieve__metrics;
typedef struct sieve__batcher sieve__batcher;

typedef struct sieve_server {
    sieve_server_config cfg;
    sieve_store *store;
    sieve__batcher *batcher;
    sieve__metrics *metrics;
    struct MHD_Daemon *daemon;
    unsigned bound_port;
    atomic_int ready;            /* 1 while serving; 0 during startup and shutdown */
    atomic_long in_flight;       /* requests between first callback and completion */
    atomic_long searches_incoming; /* search requests whose headers arrived but whose queries
                                      are not queued yet (body in transit or being parsed): the
                                      batcher waits, within its window, for them to join */
    atomic_long suspended;       /* connections waiting for the batcher */
    atomic_ullong body_bytes;    /* request body bytes held in memory, all requests */
    atomic_ullong next_op_id;    /* operation_id of write replies */
    pthread_mutex_t log_mu;
} sieve_server;

/* ---------------------------------------------------------------- requests */

typedef enum sieve__method {
    SIEVE_M_GET = 0, SIEVE_M_HEAD, SIEVE_M_POST, SIEVE_M_PUT, SIEVE_M_DELETE, SIEVE_M_PATCH,
    SIEVE_M_OTHER, SIEVE_M_COUNT
} sieve__method;

/* Routes: one entry per (method, path template); metrics are kept per route. */
typedef enum sieve__route {
    SIEVE_R_ROOT = 0,
    SIEVE_R_HEALTHZ,
    SIEVE_R_LIVEZ,
    SIEVE_R_READYZ,
    SIEVE_R_METRICS,
    SIEVE_R_COLL_LIST,
    SIEVE_R_COLL_GET,
    SIEVE_R_COLL_CREATE,
    SIEVE_R_COLL_DELETE,
    SIEVE_R_COLL_EXISTS,
    SIEVE_R_POINTS_UPSERT,
    SIEVE_R_POINTS_RETRIEVE,
    SIEVE_R_POINT_GET,
    SIEVE_R_POINTS_DELETE,
    SIEVE_R_POINTS_COUNT,
    SIEVE_R_POINTS_SCROLL,
    SIEVE_R_SEARCH,
    SIEVE_R_SEARCH_BATCH,
    SIEVE_R_QUERY,
    SIEVE_R_QUERY_BATCH,
    SIEVE_R_INDEX_CREATE,
    SIEVE_R_INDEX_DELETE,
    SIEVE_R_UNMATCHED,  /* unknown path, wrong method, refused before routing */
    SIEVE_R_COUNT
} sieve__route;

/* Template of a route for logs and metrics ("POST /collections/{name}/points/search"). */
const char *sieve__route_name(sieve__route r);

typedef enum sieve__req_state {
    SIEVE_REQ_BODY = 0,   /* receiving the body */
    SIEVE_REQ_SUSPENDED,  /* waiting for the batcher */
    SIEVE_REQ_DONE,       /* response ready to queue */
    SIEVE_REQ_SENT,
} sieve__req_state;

typedef struct sieve__search_job sieve__search_job;

typedef struct sieve__req {
    sieve_server *srv;
    struct MHD_Connection *conn;
    sieve__method method;
    sieve__route route;
    char name[SIEVE_NAME_MAX + 1]; /* collection from the path, when the route has one */
    char *point_id;                /* point id text from the path (GET .../points/{id}) */
    double t_start;
    /* body */
    sieve__sbuf body;
    int body_too_large;
    int body_busy;                 /* refused: too many body bytes held server-wide */
    size_t body_accounted;         /* bytes of this body counted in srv->body_bytes */
    /* response */
    sieve__req_state state;
    unsigned status;
    char *resp;                    /* malloc'd body */
    size_t resp_len;
    const char *resp_type;         /* static content type */
    int close_after;               /* send Connection: close */
    int incoming;                  /* counted in srv->searches_incoming */
    sieve__search_job *job;        /* a search waiting for the batcher (owned) */
    int suspended;                 /* set by sieve__req_suspend; read by the pool thread only */
    int binary_body;               /* Content-Type is SIEVE_BIN_MEDIA_TYPE (upsert only) */
} sieve__req;

/* ---------------------------------------------------------------- replies (reply.c) */

/* Every reply goes through these; each sets req's status and body exactly once. */
void sieve__reply_ok_json(sieve__req *req, json_t *result);   /* steals result */
void sieve__reply_ok_raw(sieve__req *req, const char *result, size_t len); /* JSON text */
void sieve__reply_error(sieve__req *req, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void sieve__reply_err(sieve__req *req, const sieve__err *e);
void sieve__reply_text(sieve__req *req, unsigned status, const char *content_type,
                       const char *text);
/* Builds the ok envelope around result text into a malloc'd string. */
char *sieve__envelope_ok(double seconds, const char *result, size_t len, size_t *out_len);
char *sieve__envelope_error(double seconds, const char *msg, size_t *out_len);

/* ---------------------------------------------------------------- http (http.c) */

int sieve__http_start(sieve_server *s);
/* Stops accepting, waits (up to grace_s) for in-flight requests, then stops the daemon. */
void sieve__http_shutdown(sieve_server *s, double grace_s);
/* Suspends req's connection (from its handler) until sieve__req_resume. */
void sieve__req_suspend(sieve__req *req);
/* Resumes a suspended connection whose reply has been set (any thread). */
void sieve__req_resume(sieve__req *req);
/* Frees req's body and returns its bytes to the server-wide body budget. */
void sieve__req_release_body(sieve__req *req);
/* Reads a query-string argument of the request, or NULL. */
const char *sieve__req_arg(sieve__req *req, const char *key);

/* ---------------------------------------------------------------- auth (auth.c) */

/* 0 when allowed; else fills e with 401 or 403. write: the route changes data. */
int sieve__auth_check(const sieve_server *s, struct MHD_Connection *c, int write,
                      sieve__err *e);
/* Constant-time string equality (time depends only on the lengths' maximum). */
int sieve__ct_equal(const char *a, const char *b);

/* ---------------------------------------------------------------- JSON validation (jv.c) */

/* Checks that obj (at path) has only keys from allowed (NULL-terminated); keys listed in
 * ignored (NULL-terminated, may be NULL) are accepted and not interpreted. */
int sieve__jv_keys(const json_t *obj, const char *path, const char *const *allowed,
                   const char *const *ignored, sieve__err *e);
/* Member of obj or NULL when absent or JSON null. */
json_t *sieve__jv_get(const json_t *obj, const char *key);
/* Integer in [min, max]; absent/null gives def. */
int sieve__jv_int(const json_t *obj, const char *key, const char *path, long long min,
                  long long max, long long def, long long *out, sieve__err *e);
/* Boolean; absent/null gives def. */
int sieve__jv_bool(const json_t *obj, const char *key, const char *path, int def, int *out,
                   sieve__err *e);
/* A finite number representable as float32 (integers allowed). */
int sieve__jv_float(const json_t *j, const char *path, float *out, sieve__err *e);
/* A dense vector of exactly dim finite float32 values into out. */
int sieve__jv_vector(const json_t *j, const char *path, uint32_t dim, float *out,
                     sieve__err *e);
/* A point id: unsigned integer or UUID string. */
int sieve__jv_id(const json_t *j, const char *path, sieve_point_id *out, sieve__err *e);
/* Parses a point id from text (path segment): digits or a UUID. */
int sieve__id_parse_text(const char *text, sieve_point_id *out);
/* A point id as JSON (a number, or a quoted UUID) into out (SIEVE__ID_JSON_MAX bytes, NUL
 * included); returns the length. sieve__sbuf_id appends it to b. */
#define SIEVE__ID_JSON_MAX 39
int sieve__fmt_id(char *out, const sieve_point_id *id);
void sieve__sbuf_id(sieve__sbuf *b, const sieve_point_id *id);
json_t *sieve__id_json(const sieve_point_id *id);
/* Describes a JSON value's type for messages ("a string", "null", ...). */
const char *sieve__jv_type(const json_t *j);

/* with_payload: which payload fields go into a reply. */
typedef enum { SIEVE_PSEL_NONE = 0, SIEVE_PSEL_ALL, SIEVE_PSEL_INCLUDE, SIEVE_PSEL_EXCLUDE }
    sieve__psel_mode;
typedef struct sieve__psel {
    sieve__psel_mode mode;
    char **keys;
    size_t n;
} sieve__psel;
/* Parses with_payload (bool, list of keys, {"include": [...]}, {"exclude": [...]});
 * absent/null gives def_mode. */
int sieve__psel_parse(const json_t *j, const char *path, sieve__psel_mode def_mode,
                      sieve__psel *out, sieve__err *e);
void sieve__psel_free(sieve__psel *p);
/* Appends the selected payload (from stored JSON text, NULL when none) as JSON: an object
 * (empty object when the point has no payload). Returns -1 on a corrupt stored payload. */
int sieve__psel_write(const sieve__psel *p, const char *json, size_t len, sieve__sbuf *out);
/* Parses with_vector (bool; absent/null gives def). */
int sieve__jv_with_vector(const json_t *j, const char *path, int def, int *out,
                          sieve__err *e);

/* ---------------------------------------------------------------- upsert bodies (upsert_parse.c) */

/* Points parsed from an upsert body: n points whose vectors live in vectors (n x dim) and
 * whose payloads are compact JSON strings (NULL when none). */
typedef struct sieve__upsert {
    sieve_point *points;
    float *vectors;
    char **payloads;
    size_t n, cap;
    int batch_form;  /* 1: came as {"batch": ...}; 0: {"points": [...]} */
} sieve__upsert;

/* Parses {"points": [...]} or {"batch": {...}} (len bytes at body, NUL-terminated) for a
 * collection of dim. 0, or -1 with e filled (400 naming the field, 413, 500). u must be
 * freed with sieve__upsert_free either way. */
int sieve__upsert_parse(const char *body, size_t len, uint32_t dim, sieve__upsert *u,
                        sieve__err *e);
void sieve__upsert_free(sieve__upsert *u);

/* The binary upsert body (server/README.md, "Binary upsert"), selected by this media type
 * in Content-Type. Little-endian: a 32-byte header (magic, version, dtype, flags, dim,
 * count, payload_bytes), count uint64 ids, count x dim rows of the dtype, then payload_bytes
 * of a JSON array (one object or null per point) when flag bit 0 is set. */
#define SIEVE_BIN_MEDIA_TYPE "application/x-sieve-points"
#define SIEVE_BIN_MAGIC "SVPT"
#define SIEVE_BIN_VERSION 1u
#define SIEVE_BIN_HEADER 32u
#define SIEVE_BIN_FLAG_PAYLOADS 1u
enum { SIEVE_BIN_F32 = 0, SIEVE_BIN_F16 = 1, SIEVE_BIN_BF16 = 2 };

/* Parses a binary upsert body (len bytes at body) for a collection of dim. float32 rows are
 * used in place (u->points[i].vector points into body: keep body alive until the store call
 * returns); 16-bit rows are widened into u->vectors. 0, or -1 with e filled (400 naming what
 * is wrong, 500). u must be freed with sieve__upsert_free either way. */
int sieve__upsert_parse_binary(const char *body, size_t len, uint32_t dim, sieve__upsert *u,
                               sieve__err *e);

/* Reads a search body of exactly the form {"vector": [dim numbers], "limit": N} with an
 * optional "offset": M (keys in any order, each once) whose values the generic path would
 * accept: finite float32 values, 1 <= N, 0 <= M, N + M <= SIEVE_SERVER_MAX_K. Returns 1 with
 * vector (dim floats, converted exactly as jansson's path converts them), *limit and
 * *offset filled; 0 for anything else (a syntax error, another key, a bad value): then the
 * caller parses the body with the generic path, which answers or explains the error. */
int sieve__search_parse_plain(const char *body, size_t len, uint32_t dim, float *vector,
                              uint32_t *limit, uint32_t *offset);

/* ---------------------------------------------------------------- filters (filter.c) */

typedef struct sieve__filter sieve__filter;

/* Compiles a Qdrant filter object (path names it in messages). j NULL or JSON null gives
 * *out = NULL, which matches every point. */
int sieve__filter_parse(const json_t *j, const char *path, sieve__filter **out,
                        sieve__err *e);
void sieve__filter_free(sieve__filter *f);
/* 1 if the point matches. payload: the parsed payload object or NULL. */
int sieve__filter_match(const sieve__filter *f, const sieve_point_id *id,
                        const json_t *payload);
/* Builds the allowed-row bitmap (ceil(rows/64) words, malloc'd) of the live rows of snap
 * that match f; *matches gets their count. Errors: SIEVE_ENOMEM, SIEVE_ECORRUPT (a stored
 * payload is not JSON), the store's errors. */
int sieve__filter_mask(const sieve__filter *f, sieve_snapshot *snap, uint64_t **mask,
                       uint64_t *matches);
/* Visits the live rows of snap that match f (every live row when f is NULL). */
typedef int (*sieve__match_fn)(void *ctx, uint64_t row, const sieve_point_id *id,
                               const char *payload, size_t payload_len);
int sieve__filter_foreach(const sieve__filter *f, sieve_snapshot *snap, sieve__match_fn fn,
                          void *ctx);

/* ---------------------------------------------------------------- searches (batcher.c) */

typedef enum sieve__job_kind {
    SIEVE_JOB_SEARCH = 0,   /* result: [ScoredPoint] */
    SIEVE_JOB_SEARCH_BATCH, /* result: [[ScoredPoint]] */
    SIEVE_JOB_QUERY,        /* result: {"points": [ScoredPoint]} */
    SIEVE_JOB_QUERY_BATCH,  /* result: [{"points": [ScoredPoint]}] */
} sieve__job_kind;

/* One result of a search, as the batcher found it in its snapshot; the reply's JSON is
 * built from it later, on the connection's thread. */
typedef struct sieve__hit {
    sieve_point_id id;
    float score;            /* as reported: key, or distance for Euclid */
    int has_payload;        /* the point has a payload (bytes in the query's payloads) */
    int has_vector;         /* the query's vectors hold this hit's vector */
    size_t payload_off, payload_len;
} sieve__hit;

typedef struct sieve__query {
    /* input, validated by the route */
    float *vector;          /* dim values (owned) */
    uint32_t dim;
    uint32_t limit, offset;
    sieve__filter *filter;  /* owned; NULL = everything */
    char *filter_key;       /* canonical filter JSON (owned; NULL = no filter) */
    sieve__psel payload;
    int with_vector;
    int has_threshold;
    float threshold;
    /* output, written by the batcher, read by the reply builder after the job finished */
    sieve__hit *hits;       /* n_hits results, best first (owned) */
    uint32_t n_hits;
    sieve__sbuf payloads;   /* stored payload JSON of the hits, back to back */
    float *vectors;         /* n_hits x dim stored vectors when with_vector (owned) */
    sieve__err err;         /* err.status != 0 on failure */
    /* plumbing */
    sieve__search_job *job;
    struct sieve__query *next;
    double t_enqueue;
} sieve__query;

struct sieve__search_job {
    sieve__req *req;
    sieve_server *srv;
    char collection[SIEVE_NAME_MAX + 1];
    sieve__job_kind kind;
    size_t n;
    sieve__query *q;        /* n queries (owned) */
    atomic_size_t pending;
};

void sieve__job_free(sieve__search_job *job);

/* Creates the batcher: opens each device of spec (comma-separated) and starts
 * s->cfg.batch_workers workers per device (0: 2 on a GPU, 1 on the CPU), each with its own
 * device handle, sharing the device's page cache. Errors: those of sieve_device_open and
 * sieve_devcache_create, SIEVE_ENOMEM. */
int sieve__batcher_create(sieve_server *s, const char *spec, sieve__batcher **out);
/* Enqueues every query of job on its collection's queue. When the last query of the job
 * finishes, the worker resumes req; its HTTP thread then builds the reply
 * (sieve__search_job_reply). Errors: SIEVE_ECLOSED (shutting
 * down), SIEVE_EBUSY (queue full). On error nothing was enqueued. */
int sieve__batcher_submit(sieve__batcher *b, sieve__search_job *job);
/* Waits for the queues to drain, stops and joins the workers, closes the devices. */
void sieve__batcher_destroy(sieve__batcher *b);
/* Device description and memory in use, for startup logs and metrics. */
void sieve__batcher_describe(sieve__batcher *b, char *buf, size_t n);
uint64_t sieve__batcher_device_memory_used(sieve__batcher *b);
/* The page caches' resident bytes and counters, summed over the workers. */
void sieve__batcher_cache_stats(sieve__batcher *b, uint64_t *resident_bytes,
                                uint64_t *pages_uploaded, uint64_t *streamed);
/* Queries waiting over every collection. */
uint64_t sieve__batcher_queued(sieve__batcher *b);
/* Batch workers over every device. */
size_t sieve__batcher_workers(sieve__batcher *b);

/* Builds the reply of a finished job (routes_search.c), on the request's HTTP thread after
 * the batcher resumed it: every query's hits (or error) are final then. */
void sieve__search_job_reply(sieve__search_job *job);

/* ---------------------------------------------------------------- metrics (metrics.c) */

int sieve__metrics_create(sieve__metrics **out);
void sieve__metrics_destroy(sieve__metrics *m);
void sieve__metrics_request(sieve__metrics *m, sieve__route r, unsigned status,
                            double seconds);
/* Phases of a batcher worker's loop, for sieve_batch_phase_seconds_total (summed over the
 * workers): wait (for queries and the batch window), snapshot (opening or re-checking the
 * worker's snapshot), search (page cache and kernel), lookup (result rows to ids, payload
 * bytes and vectors in the snapshot), resume (handing requests back to their connections),
 * bookkeeping (queue statistics, device gauges). */
typedef enum sieve__phase {
    SIEVE__PHASE_WAIT = 0,
    SIEVE__PHASE_SNAPSHOT,
    SIEVE__PHASE_SEARCH,
    SIEVE__PHASE_LOOKUP,
    SIEVE__PHASE_RESUME,
    SIEVE__PHASE_BOOKKEEPING,
    SIEVE__PHASE_COUNT
} sieve__phase;
void sieve__metrics_phase(sieve__metrics *m, sieve__phase phase, double seconds);
/* A search reply built on an HTTP thread (sieve_search_reply_seconds_total). */
void sieve__metrics_reply(sieve__metrics *m, double seconds);

void sieve__metrics_batch(sieve__metrics *m, uint32_t queries, double kernel_s,
                          const sieve_search_stats *st);
void sieve__metrics_filter(sieve__metrics *m, double seconds, int cached);
/* Appends the Prometheus text exposition. */
void sieve__metrics_render(sieve_server *s, sieve__sbuf *out);

/* ---------------------------------------------------------------- routes */

void sieve__route_root(sieve__req *req, json_t *body);
void sieve__route_health(sieve__req *req, json_t *body);
void sieve__route_metrics(sieve__req *req, json_t *body);
void sieve__route_coll_list(sieve__req *req, json_t *body);
void sieve__route_coll_get(sieve__req *req, json_t *body);
void sieve__route_coll_create(sieve__req *req, json_t *body);
void sieve__route_coll_delete(sieve__req *req, json_t *body);
void sieve__route_coll_exists(sieve__req *req, json_t *body);
void sieve__route_points_upsert(sieve__req *req, json_t *body);
void sieve__route_points_retrieve(sieve__req *req, json_t *body);
void sieve__route_point_get(sieve__req *req, json_t *body);
void sieve__route_points_delete(sieve__req *req, json_t *body);
void sieve__route_points_count(sieve__req *req, json_t *body);
void sieve__route_points_scroll(sieve__req *req, json_t *body);
void sieve__route_search(sieve__req *req, json_t *body);
/* POST .../points/search from the raw body when it has the plainest form
 * (sieve__search_parse_plain): 1 when it handled the request (queued or answered it), 0
 * when the caller must parse the body and call sieve__route_search. */
int sieve__route_search_plain(sieve__req *req);
void sieve__route_index(sieve__req *req, json_t *body);

/* Looks up the collection of req (404 when absent). */
int sieve__collection_info(sieve__req *req, sieve_collection_info *info, sieve__err *e);

#endif

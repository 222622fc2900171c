/* sieve_client.h: libsieve-client, the C client of sieve-server's HTTP API.
 *
 * Owns: a typed C API over every endpoint of sieve-server (Qdrant's REST shapes): server
 * info and health, collections (list, create, info, exists, delete), points (upsert in the
 * list and the column ("batch") form and sieve's binary form, retrieve, get, delete by ids
 * or filter, count) and search (search, search/batch, query, query/batch), on libcurl and
 * jansson.
 * Must not: link the store, the kernels or the server (a client needs only libcurl and
 * jansson), or keep global state other than libcurl's one-time global initialisation.
 *
 * Connections: each sieve_client owns one libcurl easy handle and reuses it for every call,
 * so calls on one client share one keep-alive connection. Every call has a connect timeout
 * and a total timeout (options).
 *
 * Retries: a reply of 429 or 503 means the server did not apply the request; every call is
 * retried then, after the delay in the reply's Retry-After header (seconds or an HTTP date)
 * or else an exponential backoff with jitter (backoff_ms, doubling, capped at
 * backoff_max_ms). A connection that could not be opened is retried for every call (nothing
 * was sent). A connection lost or timed out after the request was sent is retried only for
 * idempotent calls: every read, upsert (re-writing the same ids is harmless) and delete by
 * ids; not collection create or delete and not delete by filter. At most max_retries
 * retries follow the first attempt.
 *
 * Errors: every call that can fail returns 0 or a negative SIEVE_E* code (sieve_error.h):
 *   SIEVE_EINVAL     bad argument, or HTTP 400 (the server's message says which field)
 *   SIEVE_EAUTH      HTTP 401 or 403 (missing, wrong or read-only api key)
 *   SIEVE_ENOTFOUND  HTTP 404 (unknown collection or point)
 *   SIEVE_EEXIST     HTTP 409 (collection exists)
 *   SIEVE_ETOOBIG    HTTP 413 (body over the server's limit: send smaller batches)
 *   SIEVE_ENET       no reply (connection refused, reset, timed out; after the retries), or
 *                    429/503 after the retries, or another unexpected HTTP status
 *   SIEVE_EINTERNAL  HTTP 500
 *   SIEVE_EPARSE     the reply is not the JSON the API promises; or (upsert) a payload
 *                    text that is not a JSON object
 *   SIEVE_ENONFINITE a vector given to upsert or search holds NaN or infinity
 *   SIEVE_ENOMEM     allocation failed
 * After a failed call, sieve_client_message() has a one-line explanation (the server's own
 * error message when it sent one) and sieve_client_http_status() the HTTP status of the last
 * reply (0 when none came).
 *
 * Ownership: results are written into caller-provided structs whose contents the library
 * allocates; each such struct has a clear function that frees the contents. On failure the
 * output structs are left empty (nothing to free, clearing them is harmless). Input pointers
 * are only read, and only during the call.
 *
 * Thread-safety: a sieve_client is used by one thread at a time (it may move between
 * threads). Open one client per thread for parallel requests; clients are independent.
 */
#ifndef SIEVE_CLIENT_H
#define SIEVE_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "sieve_error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SIEVE_CLIENT_VERSION "0.1.0"
#define SIEVE_CLIENT_DEFAULT_URL "http://127.0.0.1:6333"

/* ---------------------------------------------------------------- client */

typedef struct sieve_client sieve_client;

typedef struct sieve_client_options {
    const char *url;         /* server base URL (default SIEVE_CLIENT_DEFAULT_URL); a path
                                prefix is kept, a trailing '/' is ignored */
    const char *api_key;     /* sent as the "api-key" header; NULL or "" for none */
    long connect_timeout_ms; /* default 5000 */
    long timeout_ms;         /* whole request (send, wait, receive); default 300000; 0: none */
    int max_retries;         /* retries after the first attempt (default 5; 0: none) */
    long backoff_ms;         /* first backoff (default 100), doubled per retry, jittered */
    long backoff_max_ms;     /* cap of one wait, also of a Retry-After (default 30000) */
} sieve_client_options;

/* Fills o with the defaults above. */
void sieve_client_options_init(sieve_client_options *o);

/* Creates a client. opts may be NULL for the defaults. No connection is made yet.
 * On success *out is owned by the caller (sieve_client_close); on failure *out is NULL.
 * Errors: SIEVE_EINVAL (NULL out, a URL that is not http:// or https://, negative timeouts
 * or retries), SIEVE_ENOMEM, SIEVE_ENET (libcurl could not be initialised). */
int sieve_client_open(const sieve_client_options *opts, sieve_client **out);
/* Closes the connection and frees c. NULL is ignored. */
void sieve_client_close(sieve_client *c);

/* The explanation of the last failed call ("" after a successful one). Owned by c, valid
 * until the next call on c. */
const char *sieve_client_message(const sieve_client *c);
/* HTTP status of the last reply of the last call (0 when no reply came). */
long sieve_client_http_status(const sieve_client *c);

typedef struct sieve_client_stats {
    uint64_t calls;      /* API calls made */
    uint64_t attempts;   /* HTTP requests sent (calls + retries) */
    uint64_t retries;    /* of which retries */
    uint64_t bytes_sent; /* request body bytes */
    uint64_t connects;   /* new connections opened (keep-alive reuse keeps this low) */
} sieve_client_stats;

/* Copies c's counters (since open). */
void sieve_client_get_stats(const sieve_client *c, sieve_client_stats *out);

/* ---------------------------------------------------------------- point ids */

/* An unsigned integer id or a UUID (the server takes integers up to 2^63-1). */
typedef struct sieve_client_id {
    int is_uuid; /* 0: num is the id; 1: uuid is the id */
    uint64_t num;
    uint8_t uuid[16];
} sieve_client_id;

/* A numeric id. */
sieve_client_id sieve_client_id_num(uint64_t num);
/* Parses a decimal integer or a UUID (8-4-4-4-12 hex or 32 hex digits, any case).
 * 0 or SIEVE_EINVAL. */
int sieve_client_id_parse(const char *text, sieve_client_id *out);
/* Writes the decimal or the lowercase hyphenated UUID form (NUL-terminated) into buf. */
void sieve_client_id_format(const sieve_client_id *id, char buf[40]);

/* ---------------------------------------------------------------- server */

typedef struct sieve_client_server_info {
    char title[64];
    char version[64];
} sieve_client_server_info;

/* GET /. Errors: SIEVE_EINVAL, SIEVE_ENET, SIEVE_EAUTH, SIEVE_EPARSE. */
int sieve_client_server_info_get(sieve_client *c, sieve_client_server_info *out);
/* GET /healthz: 0 when the server answers 200. Errors: SIEVE_ENET, SIEVE_EAUTH. */
int sieve_client_healthz(sieve_client *c);

/* ---------------------------------------------------------------- collections */

typedef enum sieve_client_distance {
    SIEVE_CLIENT_DOT = 0,
    SIEVE_CLIENT_COSINE = 1,
    SIEVE_CLIENT_EUCLID = 2,
} sieve_client_distance;

typedef enum sieve_client_dtype {
    SIEVE_CLIENT_FLOAT32 = 0,
    SIEVE_CLIENT_FLOAT16 = 1,
    SIEVE_CLIENT_BFLOAT16 = 2,
} sieve_client_dtype;

/* "Dot", "Cosine", "Euclid" (the API's spelling), or NULL. */
const char *sieve_client_distance_name(sieve_client_distance d);
/* Parses "Dot", "Cosine", "Euclid" (also "Euclidean"), any case. 0 or SIEVE_EINVAL. */
int sieve_client_distance_parse(const char *s, sieve_client_distance *out);
/* "float32", "float16", "bfloat16", or NULL. */
const char *sieve_client_dtype_name(sieve_client_dtype t);
/* Parses the names above and "f32", "f16", "bf16", any case. 0 or SIEVE_EINVAL. */
int sieve_client_dtype_parse(const char *s, sieve_client_dtype *out);

typedef struct sieve_client_collection_config {
    uint32_t dim; /* 1 .. 65536 */
    sieve_client_distance distance;
    sieve_client_dtype dtype;
} sieve_client_collection_config;

/* PUT /collections/{name}. Not retried after a lost connection (not idempotent).
 * Errors: SIEVE_EINVAL (NULL, empty name, dim 0, or the server's 400), SIEVE_EEXIST,
 * SIEVE_EAUTH, SIEVE_ENET, SIEVE_EPARSE, SIEVE_ENOMEM. */
int sieve_client_create_collection(sieve_client *c, const char *name,
                                   const sieve_client_collection_config *cfg);
/* DELETE /collections/{name}. *existed (optional) gets whether it existed (the server
 * answers true/false; an absent collection is not an error). Not retried after a lost
 * connection. Errors: SIEVE_EINVAL, SIEVE_EAUTH, SIEVE_ENET, SIEVE_EPARSE. */
int sieve_client_delete_collection(sieve_client *c, const char *name, int *existed);
/* GET /collections/{name}/exists. Errors: SIEVE_EINVAL, SIEVE_EAUTH, SIEVE_ENET,
 * SIEVE_EPARSE. */
int sieve_client_collection_exists(sieve_client *c, const char *name, int *exists);
/* GET /collections. *names gets a malloc'd array of *count malloc'd names in the server's
 * order; free with sieve_client_free_names. Errors: SIEVE_EINVAL, SIEVE_EAUTH, SIEVE_ENET,
 * SIEVE_EPARSE, SIEVE_ENOMEM. */
int sieve_client_list_collections(sieve_client *c, char ***names, size_t *count);
void sieve_client_free_names(char **names, size_t count);

typedef struct sieve_client_collection_info {
    char status[16]; /* "green" */
    uint64_t points; /* live points */
    sieve_client_collection_config config;
    /* sieve's own section (0 when the server did not send it): */
    uint64_t rows; /* rows addressed (live + deleted) */
    uint64_t pages;
    uint32_t rows_per_page;
    uint64_t generation; /* changes with every committed write to the collection */
} sieve_client_collection_info;

/* GET /collections/{name}. Errors: SIEVE_EINVAL, SIEVE_ENOTFOUND, SIEVE_EAUTH, SIEVE_ENET,
 * SIEVE_EPARSE (includes a distance or datatype this client does not know). */
int sieve_client_get_collection(sieve_client *c, const char *name,
                                sieve_client_collection_info *out);

/* ---------------------------------------------------------------- points */

typedef struct sieve_client_point {
    sieve_client_id id;
    const float *vector; /* dim float32 values (the dim of the upsert call) */
    const char *payload; /* a JSON object's text, or NULL for no payload */
    size_t payload_len;  /* bytes of payload; 0 means strlen(payload) */
} sieve_client_point;

/* PUT /collections/{name}/points with {"points": [...]}: inserts or replaces n points
 * (1 <= n) of dim values each, atomically and durably (the server replies after its
 * commit). Vectors are checked for NaN/Inf and payloads for JSON object syntax before
 * anything is sent; floats are sent with 9 significant digits, so the server stores
 * exactly these float32 values (before its dtype conversion). Retried (idempotent).
 * Errors: SIEVE_EINVAL (NULL, n or dim 0, or the server's 400, e.g. a dimension that does
 * not match the collection), SIEVE_ENONFINITE, SIEVE_EPARSE (payload not a JSON object),
 * SIEVE_ENOTFOUND, SIEVE_ETOOBIG, SIEVE_EAUTH, SIEVE_ENET, SIEVE_ENOMEM. */
int sieve_client_upsert(sieve_client *c, const char *collection, const sieve_client_point *pts,
                        size_t n, uint32_t dim);

/* The same in the column form {"batch": {"ids", "vectors", "payloads"}}: ids[i] gets row i
 * of vectors (n * dim floats, row-major). payloads: NULL for none, else n entries (NULL
 * entries: no payload) of JSON object text. Errors as sieve_client_upsert. */
int sieve_client_upsert_batch(sieve_client *c, const char *collection, const sieve_client_id *ids,
                              const float *vectors, size_t n, uint32_t dim,
                              const char *const *payloads);

/* The binary upsert body's media type (wire format in server/README.md, "Binary upsert"). */
#define SIEVE_CLIENT_POINTS_MEDIA_TYPE "application/x-sieve-points"

/* PUT /collections/{name}/points with the binary body (Content-Type
 * SIEVE_CLIENT_POINTS_MEDIA_TYPE): the fast bulk route. ids[i] gets row i of rows (n * dim
 * values of row_dtype, row-major: float32 as float, float16 and bfloat16 as their uint16 bit
 * patterns in host order; the server widens 16-bit rows to float32 exactly before its own
 * dtype conversion). ids must be numbers up to 2^63-1 (use sieve_client_upsert_batch for
 * UUIDs). payloads: NULL for none, else n entries (NULL entries: no payload) of JSON object
 * text. Vectors are checked for NaN/Inf and payloads for object syntax before anything is
 * sent. Atomic and durable like sieve_client_upsert; retried (idempotent).
 * Errors: SIEVE_EINVAL (NULL, n or dim 0, a UUID or too large id, a bad row_dtype, or the
 * server's 400, e.g. a dimension that does not match the collection), SIEVE_ENONFINITE,
 * SIEVE_EPARSE (payload not a JSON object), SIEVE_ENOTFOUND, SIEVE_ETOOBIG, SIEVE_EAUTH,
 * SIEVE_ENET, SIEVE_ENOMEM. */
int sieve_client_upsert_binary(sieve_client *c, const char *collection, const sieve_client_id *ids,
                               const void *rows, sieve_client_dtype row_dtype, size_t n,
                               uint32_t dim, const char *const *payloads);

/* One point of a reply. */
typedef struct sieve_client_record {
    sieve_client_id id;
    float score;   /* search and query results; 0 for retrieve and get */
    char *payload; /* compact JSON object text (NUL-terminated), or NULL when none was
                      asked for or the point has none */
    float *vector; /* dim values when the vector was asked for, else NULL */
    uint32_t dim;
} sieve_client_record;

/* A list of points; items[0..n) in the server's order (best first for searches). */
typedef struct sieve_client_records {
    sieve_client_record *items;
    size_t n;
} sieve_client_records;

/* Frees what a record / a list holds and zeroes it (NULL and empty ones are fine). */
void sieve_client_record_clear(sieve_client_record *r);
void sieve_client_records_clear(sieve_client_records *r);

/* POST /collections/{name}/points: the points with these ids that exist (absent ids are
 * left out, as the server does). out is filled; free with sieve_client_records_clear.
 * Errors: SIEVE_EINVAL, SIEVE_ENOTFOUND (collection), SIEVE_EAUTH, SIEVE_ENET,
 * SIEVE_EPARSE, SIEVE_ENOMEM. */
int sieve_client_retrieve(sieve_client *c, const char *collection, const sieve_client_id *ids,
                          size_t n, int with_payload, int with_vector, sieve_client_records *out);
/* GET /collections/{name}/points/{id}: one point with its payload and vector. out is
 * filled; free with sieve_client_record_clear. Errors: SIEVE_EINVAL, SIEVE_ENOTFOUND
 * (collection or point; the message says which), SIEVE_EAUTH, SIEVE_ENET, SIEVE_EPARSE,
 * SIEVE_ENOMEM. */
int sieve_client_get_point(sieve_client *c, const char *collection, const sieve_client_id *id,
                           sieve_client_record *out);

/* POST /collections/{name}/points/delete {"points": [ids]} (n >= 1; absent ids are
 * ignored). Retried (idempotent). Errors: SIEVE_EINVAL, SIEVE_ENOTFOUND, SIEVE_EAUTH,
 * SIEVE_ENET, SIEVE_EPARSE, SIEVE_ENOMEM. */
int sieve_client_delete_points(sieve_client *c, const char *collection, const sieve_client_id *ids,
                               size_t n);
/* POST /collections/{name}/points/delete {"filter": filter}: deletes every point the
 * filter (a Qdrant filter object's JSON text) matches. Not retried after a lost
 * connection. Errors: SIEVE_EINVAL (NULL, not a JSON object, or the server's 400),
 * SIEVE_ENOTFOUND, SIEVE_EAUTH, SIEVE_ENET, SIEVE_EPARSE, SIEVE_ENOMEM. */
int sieve_client_delete_filter(sieve_client *c, const char *collection, const char *filter);

/* POST /collections/{name}/points/count: exact count of the points matching filter (JSON
 * text of a filter object, or NULL for all). Errors: SIEVE_EINVAL, SIEVE_ENOTFOUND,
 * SIEVE_EAUTH, SIEVE_ENET, SIEVE_EPARSE, SIEVE_ENOMEM. */
int sieve_client_count(sieve_client *c, const char *collection, const char *filter, uint64_t *out);

/* ---------------------------------------------------------------- search */

typedef struct sieve_client_search_params {
    const float *vector; /* dim float32 values (finite) */
    uint32_t dim;
    uint32_t limit;     /* results wanted, >= 1 (the server allows up to 16384) */
    uint32_t offset;    /* results skipped before them */
    const char *filter; /* Qdrant filter object's JSON text, or NULL */
    int with_payload;
    int with_vector;
    int use_score_threshold; /* keep only score >= threshold (distance <= it for Euclid) */
    float score_threshold;
} sieve_client_search_params;

/* POST /collections/{name}/points/search. Scores are the server's: the dot product for Dot
 * and Cosine (higher first), the Euclidean distance for Euclid (lower first). out is
 * filled (best first); free with sieve_client_records_clear.
 * Errors: SIEVE_EINVAL (NULL, dim or limit 0, or the server's 400 such as a dimension
 * mismatch), SIEVE_ENONFINITE, SIEVE_ENOTFOUND, SIEVE_EAUTH, SIEVE_ENET, SIEVE_EPARSE,
 * SIEVE_ENOMEM. */
int sieve_client_search(sieve_client *c, const char *collection,
                        const sieve_client_search_params *q, sieve_client_records *out);
/* POST /collections/{name}/points/search/batch with n searches (1 <= n; the server takes
 * up to 1024). out must have room for n lists; out[i] gets the results of qs[i]; clear
 * each. On failure every out[i] is empty. Errors as sieve_client_search. */
int sieve_client_search_batch(sieve_client *c, const char *collection,
                              const sieve_client_search_params *qs, size_t n,
                              sieve_client_records *out);
/* POST /collections/{name}/points/query {"query": vector, ...} (the universal query API
 * with a nearest-vector query); results as sieve_client_search. */
int sieve_client_query(sieve_client *c, const char *collection, const sieve_client_search_params *q,
                       sieve_client_records *out);
/* POST /collections/{name}/points/query/batch. As sieve_client_search_batch. */
int sieve_client_query_batch(sieve_client *c, const char *collection,
                             const sieve_client_search_params *qs, size_t n,
                             sieve_client_records *out);

/* ---------------------------------------------------------------- raw requests */

/* Sends one request with the client's URL, key, timeouts and retry rules (idempotent:
 * whether a lost connection may be retried) and returns the reply as it came: *status the
 * HTTP status, *body a malloc'd NUL-terminated copy of the body (caller frees; may be
 * NULL to discard). method: "GET", "PUT", "POST" or "DELETE"; path starts with '/';
 * body NULL for none. HTTP error statuses are not errors here; only a missing reply is.
 * Errors: SIEVE_EINVAL, SIEVE_ENET, SIEVE_ENOMEM. */
int sieve_client_raw(sieve_client *c, const char *method, const char *path, const char *body,
                     size_t body_len, int idempotent, long *status, char **reply);

#ifdef __cplusplus
}
#endif
#endif

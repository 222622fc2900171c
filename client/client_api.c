/* client_api.c: the endpoints of libsieve-client.
 *
 * Owns: one function per sieve-server endpoint: argument checks, the request body (built
 * with client_json.c's writers; floats never go through printf), the path, whether the
 * call may be retried after a lost connection, and turning the reply (parsed with jansson)
 * into the typed results of sieve_client.h. Must not: talk to libcurl (client_http.c does).
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "client_internal.h"

/* ---------------------------------------------------------------- ids and names */

sieve_client_id sieve_client_id_num(uint64_t num) {
    sieve_client_id id;
    memset(&id, 0, sizeof id);
    id.num = num;
    return id;
}

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

int sieve_client_id_parse(const char *text, sieve_client_id *out) {
    if (!text || !out || !*text) return SIEVE_EINVAL;
    size_t n = strlen(text);
    sieve_client_id id;
    memset(&id, 0, sizeof id);
    int all_digits = 1;
    for (size_t i = 0; i < n; i++)
        if (text[i] < '0' || text[i] > '9') all_digits = 0;
    if (all_digits && n <= 20) {
        uint64_t v = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t d = (uint64_t)(text[i] - '0');
            if (v > (UINT64_MAX - d) / 10) return SIEVE_EINVAL;
            v = v * 10 + d;
        }
        id.num = v;
        *out = id;
        return 0;
    }
    if (n != 36 && n != 32) return SIEVE_EINVAL;
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        if (n == 36 && (i == 8 || i == 13 || i == 18 || i == 23)) {
            if (text[i] != '-') return SIEVE_EINVAL;
            continue;
        }
        int hi = hexval(text[i]), lo = i + 1 < n ? hexval(text[i + 1]) : -1;
        if (hi < 0 || lo < 0) return SIEVE_EINVAL;
        id.uuid[k++] = (uint8_t)(hi << 4 | lo);
        i++;
    }
    if (k != 16) return SIEVE_EINVAL;
    id.is_uuid = 1;
    *out = id;
    return 0;
}

void sieve_client_id_format(const sieve_client_id *id, char buf[40]) {
    static const char hex[] = "0123456789abcdef";
    if (!id) {
        buf[0] = 0;
        return;
    }
    if (!id->is_uuid) {
        snprintf(buf, 40, "%llu", (unsigned long long)id->num);
        return;
    }
    char *p = buf;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) *p++ = '-';
        *p++ = hex[id->uuid[i] >> 4];
        *p++ = hex[id->uuid[i] & 15];
    }
    *p = 0;
}

int sieve__cl_id_from_json(const json_t *j, sieve_client_id *out) {
    if (json_is_integer(j)) {
        json_int_t v = json_integer_value(j);
        if (v < 0) return SIEVE_EPARSE;
        *out = sieve_client_id_num((uint64_t)v);
        return 0;
    }
    if (json_is_string(j))
        return sieve_client_id_parse(json_string_value(j), out) ? SIEVE_EPARSE : 0;
    return SIEVE_EPARSE;
}

int sieve__cl_path_collection(sieve_client *c, sieve__cl_buf *b, const char *name) {
    static const char hex[] = "0123456789ABCDEF";
    if (!name || !*name) return sieve__cl_fail(c, SIEVE_EINVAL, "a collection name is required");
    sieve__cl_buf_puts(b, "/collections/");
    for (const char *p = name; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        if (isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
            sieve__cl_buf_putc(b, (char)ch);
        } else {
            char enc[3] = {'%', hex[ch >> 4], hex[ch & 15]};
            sieve__cl_buf_put(b, enc, 3);
        }
    }
    return 0;
}

static const char *const distance_names[] = {"Dot", "Cosine", "Euclid"};
static const char *const dtype_names[] = {"float32", "float16", "bfloat16"};

const char *sieve_client_distance_name(sieve_client_distance d) {
    return (unsigned)d < 3 ? distance_names[d] : NULL;
}

int sieve_client_distance_parse(const char *s, sieve_client_distance *out) {
    if (!s || !out) return SIEVE_EINVAL;
    for (int i = 0; i < 3; i++)
        if (!strcasecmp(s, distance_names[i])) {
            *out = (sieve_client_distance)i;
            return 0;
        }
    if (!strcasecmp(s, "Euclidean")) {
        *out = SIEVE_CLIENT_EUCLID;
        return 0;
    }
    return SIEVE_EINVAL;
}

const char *sieve_client_dtype_name(sieve_client_dtype t) {
    return (unsigned)t < 3 ? dtype_names[t] : NULL;
}

int sieve_client_dtype_parse(const char *s, sieve_client_dtype *out) {
    static const char *const short_names[] = {"f32", "f16", "bf16"};
    if (!s || !out) return SIEVE_EINVAL;
    for (int i = 0; i < 3; i++)
        if (!strcasecmp(s, dtype_names[i]) || !strcasecmp(s, short_names[i])) {
            *out = (sieve_client_dtype)i;
            return 0;
        }
    return SIEVE_EINVAL;
}

/* ---------------------------------------------------------------- reply helpers */

/* Checks a Qdrant envelope and returns its "result" (borrowed from j). */
static int result_of(sieve_client *c, json_t *j, const char *what, json_t **result) {
    json_t *st = json_object_get(j, "status");
    json_t *r = json_object_get(j, "result");
    if (!json_is_string(st) || strcmp(json_string_value(st), "ok") || !r)
        return sieve__cl_fail(c, SIEVE_EPARSE, "%s: reply has no {\"status\": \"ok\", \"result\"}",
                              what);
    *result = r;
    return 0;
}

static int bad_reply(sieve_client *c, const char *what, const char *detail) {
    return sieve__cl_fail(c, SIEVE_EPARSE, "%s: unexpected reply: %s", what, detail);
}

void sieve_client_record_clear(sieve_client_record *r) {
    if (!r) return;
    free(r->payload);
    free(r->vector);
    memset(r, 0, sizeof *r);
}

void sieve_client_records_clear(sieve_client_records *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n; i++) sieve_client_record_clear(&r->items[i]);
    free(r->items);
    r->items = NULL;
    r->n = 0;
}

/* Fills *rec from one point object of a reply. */
static int parse_record(sieve_client *c, const char *what, json_t *p, sieve_client_record *rec) {
    memset(rec, 0, sizeof *rec);
    if (!json_is_object(p)) return bad_reply(c, what, "a point is not an object");
    if (sieve__cl_id_from_json(json_object_get(p, "id"), &rec->id))
        return bad_reply(c, what, "a point has no valid \"id\"");
    json_t *score = json_object_get(p, "score");
    if (score) {
        if (!json_is_number(score)) return bad_reply(c, what, "\"score\" is not a number");
        rec->score = (float)json_number_value(score);
    }
    json_t *payload = json_object_get(p, "payload");
    if (payload && !json_is_null(payload)) {
        if (!json_is_object(payload)) return bad_reply(c, what, "\"payload\" is not an object");
        rec->payload = json_dumps(payload, JSON_COMPACT);
        if (!rec->payload) return sieve__cl_fail(c, SIEVE_ENOMEM, "out of memory");
    }
    json_t *vec = json_object_get(p, "vector");
    if (vec && !json_is_null(vec)) {
        if (!json_is_array(vec) || json_array_size(vec) == 0) {
            sieve_client_record_clear(rec);
            return bad_reply(c, what, "\"vector\" is not an array of numbers");
        }
        size_t dim = json_array_size(vec);
        rec->vector = malloc(dim * sizeof *rec->vector);
        if (!rec->vector) {
            sieve_client_record_clear(rec);
            return sieve__cl_fail(c, SIEVE_ENOMEM, "out of memory");
        }
        rec->dim = (uint32_t)dim;
        for (size_t i = 0; i < dim; i++) {
            json_t *x = json_array_get(vec, i);
            if (!json_is_number(x)) {
                sieve_client_record_clear(rec);
                return bad_reply(c, what, "\"vector\" holds a non-number");
            }
            rec->vector[i] = (float)json_number_value(x);
        }
    }
    return 0;
}

/* Fills *out from an array of point objects. */
static int parse_records(sieve_client *c, const char *what, json_t *arr,
                         sieve_client_records *out) {
    out->items = NULL;
    out->n = 0;
    if (!json_is_array(arr)) return bad_reply(c, what, "expected an array of points");
    size_t n = json_array_size(arr);
    if (n) {
        out->items = calloc(n, sizeof *out->items);
        if (!out->items) return sieve__cl_fail(c, SIEVE_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        int rc = parse_record(c, what, json_array_get(arr, i), &out->items[i]);
        if (rc) {
            sieve_client_records_clear(out);
            return rc;
        }
        out->n = i + 1;
    }
    return 0;
}

/* Builds "/collections/NAME" + suffix into b. */
static int coll_path(sieve_client *c, sieve__cl_buf *b, const char *name, const char *suffix) {
    sieve__cl_buf_init(b);
    int rc = sieve__cl_path_collection(c, b, name);
    if (rc) return rc;
    if (suffix) sieve__cl_buf_puts(b, suffix);
    if (b->failed) {
        sieve__cl_buf_free(b);
        return sieve__cl_fail(c, SIEVE_ENOMEM, "out of memory");
    }
    return 0;
}

/* Sends and checks the envelope; *result borrowed from *j (caller json_decref(*j)). */
static int call(sieve_client *c, const char *method, const char *path, const sieve__cl_buf *body,
                int idempotent, const char *what, json_t **j, json_t **result) {
    if (body && body->failed) return sieve__cl_fail(c, SIEVE_ENOMEM, "out of memory");
    int rc = sieve__cl_request(c, method, path, body ? body->p : NULL, body ? body->len : 0,
                               idempotent, j);
    if (rc) return rc;
    rc = result_of(c, *j, what, result);
    if (rc) {
        json_decref(*j);
        *j = NULL;
    }
    return rc;
}

/* ---------------------------------------------------------------- server */

int sieve_client_server_info_get(sieve_client *c, sieve_client_server_info *out) {
    if (!c) return SIEVE_EINVAL;
    sieve__cl_begin(c);
    if (!out) return sieve__cl_fail(c, SIEVE_EINVAL, "out is NULL");
    memset(out, 0, sizeof *out);
    json_t *j;
    int rc = sieve__cl_request(c, "GET", "/", NULL, 0, 1, &j);
    if (rc) return rc;
    json_t *t = json_object_get(j, "title"), *v = json_object_get(j, "version");
    if (!json_is_string(t)) {
        json_decref(j);
        return bad_reply(c, "GET /", "no \"title\"");
    }
    snprintf(out->title, sizeof out->title, "%s", json_string_value(t));
    if (json_is_string(v)) snprintf(out->version, sizeof out->version, "%s", json_string_value(v));
    json_decref(j);
    return 0;
}

int sieve_client_healthz(sieve_client *c) {
    if (!c) return SIEVE_EINVAL;
    sieve__cl_begin(c);
    return sieve__cl_request(c, "GET", "/healthz", NULL, 0, 1, NULL);
}

/* ---------------------------------------------------------------- collections */

int sieve_client_create_collection(sieve_client *c, const char *name,
                                   const sieve_client_collection_config *cfg) {
    if (!c) return SIEVE_EINVAL;
    sieve__cl_begin(c);
    if (!cfg || !cfg->dim || !sieve_client_distance_name(cfg->distance) ||
        !sieve_client_dtype_name(cfg->dtype))
        return sieve__cl_fail(c, SIEVE_EINVAL,
                              "create collection: dim must be >= 1 and distance and datatype "
                              "valid");
    sieve__cl_buf path, body;
    int rc = coll_path(c, &path, name, NULL);
    if (rc) return rc;
    sieve__cl_buf_init(&body);
    sieve__cl_buf_printf(
        &body, "{\"vectors\":{\"size\":%u,\"distance\":\"%s\",\"datatype\":\"%s\"}}", cfg->dim,
        sieve_client_distance_name(cfg->distance), sieve_client_dtype_name(cfg->dtype));
    json_t *j = NULL, *r;
    rc = call(c, "PUT", path.p, &body, 0, "create collection", &j, &r);
    json_decref(j);
    sieve__cl_buf_free(&path);
    sieve__cl_buf_free(&body);
    return rc;
}

int sieve_client_delete_collection(sieve_client *c, const char *name, int *existed) {
    if (!c) return SIEVE_EINVAL;
    sieve__cl_begin(c);
    if (existed) *existed = 0;
    sieve__cl_buf path;
    int rc = coll_path(c, &path, name, NULL);
    if (rc) return rc;
    json_t *j = NULL, *r;
    rc = call(c, "DELETE", path.p, NULL, 0, "delete collection", &j, &r);
    if (!rc) {
        if (!json_is_boolean(r))
            rc = bad_reply(c, "delete collection", "result is not a boolean");
        else if (existed)
            *existed = json_is_true(r);
    }
    json_decref(j);
    sieve__cl_buf_free(&path);
    return rc;
}

int sieve_client_collection_exists(sieve_client *c, const char *name, int *exists) {
    if (!c) return SIEVE_EINVAL;
    sieve__cl_begin(c);
    if (!exists) return sieve__cl_fail(c, SIEVE_EINVAL, "exists is NULL");
    *exists = 0;
    sieve__cl_buf path;
    int rc = coll_path(c, &path, name, "/exists");
    if (rc) return rc;
    json_t *j = NULL, *r;
    rc = call(c, "GET", path.p, NULL, 1, "collection exists", &j, &r);
    if (!rc) {
        json_t *e = json_object_get(r, "exists");
        if (!json_is_boolean(e))
            rc = bad_reply(c, "collection exists", "no boolean \"exists\"");
        else
            *exists = json_is_true(e);
    }
    json_decref(j);
    sieve__cl_buf_free(&path);
    return rc;
}

void sieve_client_free_names(char **names, size_t count) {
    if (!names) return;
    for (size_t i = 0; i < count; i++) free(names[i]);
    free(names);
}

int sieve_client_list_collections(sieve_client *c, char ***names, size_t *count) {
    if (!c) return SIEVE_EINVAL;
    sieve__cl_begin(c);
    if (!names || !count) return sieve__cl_fail(c, SIEVE_EINVAL, "names and count are required");
    *names = NULL;
    *count = 0;
    json_t *j = NULL, *r;
    int rc = call(c, "GET", "/collections", NULL, 1, "list collections", &j, &r);
    if (rc) return rc;
    json_t *arr = json_object_get(r, "collections");
    if (!json_is_array(arr)) {
        json_decref(j);
        return bad_reply(c, "list collections", "no \"collections\" array");
    }
    size_t n = json_array_size(arr);
    char **v = calloc(n ? n : 1, sizeof *v);
    if (!v) {
        json_decref(j);
        return sieve__cl_fail(c, SIEVE_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        json_t *nm = json_object_get(json_array_get(arr, i), "name");
        if (!json_is_string(nm)) {
            rc = bad_reply(c, "list collections", "an entry has no \"name\"");
        } else if (!(v[i] = strdup(json_string_value(nm)))) {
            rc = sieve__cl_fail(c, SIEVE_ENOMEM, "out of memory");
        }
        if (rc) {
            sieve_client_free_names(v, i);
            json_decref(j);
            return rc;
        }
    }
    json_decref(j);
    *names = v;
    *count = n;
    return 0;
}

static uint64_t u64_of(json_t *j) {
    return json_is_integer(j) && json_integer_value(j) >= 0 ? (uint64_t)json_integer_value(j) : 0;
}

int sieve_client_get_collection(sieve_client *c, const char *name,
                                sieve_client_collection_info *out) {
    if (!c) return SIEVE_EINVAL;
    sieve__cl_begin(c);
    if (!out) return sieve__cl_fail(c, SIEVE_EINVAL, "out is NULL");
    memset(out, 0, sizeof *out);
    sieve__cl_buf path;
    int rc = coll_path(c, &path, name, NULL);
    if (rc) return rc;
    json_t *j = NULL, *r;
    rc = call(c, "GET", path.p, NULL, 1, "collection info", &j, &r);
    sieve__cl_buf_free(&path);
    if (rc) return rc;
    sieve_client_collection_info info;
    memset(&info, 0, sizeof info);
    json_t *st = json_object_get(r, "status");
    snprintf(info.status, sizeof info.status, "%s",
             json_is_string(st) ? json_string_value(st) : "");
    info.points = u64_of(json_object_get(r, "points_count"));
    json_t *params = json_object_get(json_object_get(r, "config"), "params");
    json_t *vec = json_object_get(params, "vectors");
    json_t *size = json_object_get(vec, "size");
    json_t *dist = json_object_get(vec, "distance");
    json_t *sv = json_object_get(r, "sieve");
    json_t *dt = json_object_get(sv, "datatype");
    if (!dt) dt = json_object_get(vec, "datatype");
    if (!json_is_integer(size) || json_integer_value(size) <= 0 ||
        json_integer_value(size) > UINT32_MAX) {
        rc = bad_reply(c, "collection info", "no config.params.vectors.size");
    } else if (!json_is_string(dist) ||
               sieve_client_distance_parse(json_string_value(dist), &info.config.distance)) {
        rc = bad_reply(c, "collection info", "unknown config.params.vectors.distance");
    } else if (dt && (!json_is_string(dt) ||
                      sieve_client_dtype_parse(json_string_value(dt), &info.config.dtype))) {
        rc = bad_reply(c, "collection info", "unknown datatype");
    }
    if (!rc) {
        info.config.dim = (uint32_t)json_integer_value(size);
        info.rows = u64_of(json_object_get(sv, "rows"));
        info.pages = u64_of(json_object_get(sv, "pages"));
        info.rows_per_page = (uint32_t)u64_of(json_object_get(sv, "rows_per_page"));
        info.generation = u64_of(json_object_get(sv, "generation"));
        *out = info;
    }
    json_decref(j);
    return rc;
}

/* ---------------------------------------------------------------- points */

/* Checks a payload text; returns its length through *len. */
static int check_payload(sieve_client *c, const char *what, size_t row, const char *p,
                         size_t given_len, size_t *len) {
    size_t n = given_len ? given_len : strlen(p);
    char why[128];
    if (sieve__cl_json_check_object(p, n, why, sizeof why))
        return sieve__cl_fail(c, SIEVE_EPARSE, "%s: payload of point %zu is not a JSON object: %s",
                              what, row, why);
    *len = n;
    return 0;
}

static int check_vector(sieve_client *c, const char *what, size_t row, const float *v,
                        uint32_t dim) {
    if (!v) return sieve__cl_fail(c, SIEVE_EINVAL, "%s: point %zu has no vector", what, row);
    size_t bad = sieve__cl_find_nonfinite(v, dim);
    if (bad < dim)
        return sieve__cl_fail(c, SIEVE_ENONFINITE,
                              "%s: vector %zu, element %zu is NaN or infinite; expected finite "
                              "values",
                              what, row, bad);
    return 0;
}

int sieve_client_upsert(sieve_client *c, const char *collection, const sieve_client_point *pts,
                        size_t n, uint32_t dim) {
    if (!c) return SIEVE_EINVAL;
    sieve__cl_begin(c);
    if (!pts || !n || !dim)
        return sieve__cl_fail(c, SIEVE_EINVAL, "upsert: points, n >= 1 and dim >= 1 are required");
    sieve__cl_buf path, body;
    int rc = coll_path(c, &path, collection, "/points?wait=true");
    if (rc) return rc;
    sieve__cl_buf_init(&body);
    sieve__cl_buf_reserve(&body, n * ((size_t)dim * 11 + 64));
    sieve__cl_buf_puts(&body, "{\"points\":[");
    for (size_t i = 0; i < n && !rc; i++) {
        rc = check_vector(c, "upsert", i, pts[i].vector, dim);
        if (rc) break;
        sieve__cl_buf_puts(&body, i ? ",{\"id\":" : "{\"id\":");
        sieve__cl_buf_id(&body, &pts[i].id);
        sieve__cl_buf_puts(&body, ",\"vector\":");
        sieve__cl_buf_vector(&body, pts[i].vector, dim);
        if (pts[i].payload) {
            size_t len = 0;
            rc = check_payload(c, "upsert", i, pts[i].payload, pts[i].payload_len, &len);
            if (rc) break;
            sieve__cl_buf_puts(&body, ",\"payload\":");
            sieve__cl_buf_put(&body, pts[i].payload, len);
        }
        sieve__cl_buf_putc(&body, '}');
    }
    sieve__cl_buf_puts(&body, "]}");
    if (!rc) {
        json_t *j = NULL, *r;
        rc = call(c, "PUT", path.p, &body, 1, "upsert", &j, &r);
        json_decref(j);
    }
    sieve__cl_buf_free(&path);
    sieve__cl_buf_free(&body);
    return rc;
}

static void put_ids(sieve__cl_buf *b, const sieve_client_id *ids, size_t n) {
    sieve__cl_buf_putc(b, '[');
    for (size_t i = 0; i < n; i++) {
        if (i) sieve__cl_buf_putc(b, ',');
        sieve__cl_buf_id(b, &ids[i]);
    }
    sieve__cl_buf_putc(b, ']');
}

/* Appends the JSON array of n payloads (each a checked JSON object, or null). */
static int put_payloads(sieve_client *c, sieve__cl_buf *b, const char *const *payloads, size_t n) {
    int rc = 0;
    sieve__cl_buf_putc(b, '[');
    for (size_t i = 0; i < n && !rc; i++) {
        if (i) sieve__cl_buf_putc(b, ',');
        if (!payloads[i]) {
            sieve__cl_buf_puts(b, "null");
            continue;
        }
        size_t len = 0;
        rc = check_payload(c, "upsert", i, payloads[i], 0, &len);
        if (!rc) sieve__cl_buf_put(b, payloads[i], len);
    }
    sieve__cl_buf_putc(b, ']');
    return rc;
}

int sieve_client_upsert_batch(sieve_client *c, const char *collection, const sieve_client_id *ids,
                              const float *vectors, size_t n, uint32_t dim,
                              const char *const *payloads) {
    if (!c) return SIEVE_EINVAL;
    sieve__cl_begin(c);
    if (!ids || !vectors || !n || !dim)
        return sieve__cl_fail(c, SIEVE_EINVAL,
                              "upsert: ids, vectors, n >= 1 and dim >= 1 are required");
    sieve__cl_buf path, body;
    int rc = coll_path(c, &path, collection, "/points?wait=true");
    if (rc) return rc;
    sieve__cl_buf_init(&body);
    sieve__cl_buf_reserve(&body, n * ((size_t)dim * 11 + 32));
    sieve__cl_buf_puts(&body, "{\"batch\":{\"ids\":");
    put_ids(&body, ids, n);
    sieve__cl_buf_puts(&body, ",\"vectors\":[");
    for (size_t i = 0; i < n && !rc; i++) {
        const float *v = vectors + i * (size_t)dim;
        rc = check_vector(c, "upsert", i, v, dim);
        if (rc) break;
        if (i) sieve__cl_buf_putc(&body, ',');
        sieve__cl_buf_vector(&body, v, dim);
    }
    sieve__cl_buf_putc(&body, ']');
    if (payloads && !rc) {
        sieve__cl_buf_puts(&body, ",\"payloads\":");
        rc = put_payloads(c, &body, payloads, n);
    }
    sieve__cl_buf_puts(&body, "}}");
    if (!rc) {
        json_t *j = NULL, *r;
        rc = call(c, "PUT", path.p, &body, 1, "upsert", &j, &r);
        json_decref(j);
    }
    sieve__cl_buf_free(&path);
    sieve__cl_buf_free(&body);
    return rc;
}

/* Appends v as 8 (or 4, 2) little-endian bytes. */
static void put_le(sieve__cl_buf *b, uint64_t v, int bytes) {
    unsigned char t[8];
    for (int i = 0; i < bytes; i++) t[i] = (unsigned char)(v >> (8 * i));
    sieve__cl_buf_put(b, t, (size_t)bytes);
}

static int host_is_le(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

int sieve_client_upsert_binary(sieve_client *c, const char *collection, const sieve_client_id *ids,
                               const void *rows, sieve_client_dtype row_dtype, size_t n,
                               uint32_t dim, const char *const *payloads) {
    if (!c) return SIEVE_EINVAL;
    sieve__cl_begin(c);
    if (!ids || !rows || !n || !dim)
        return sieve__cl_fail(c, SIEVE_EINVAL,
                              "upsert: ids, rows, n >= 1 and dim >= 1 are required");
    if (row_dtype != SIEVE_CLIENT_FLOAT32 && row_dtype != SIEVE_CLIENT_FLOAT16 &&
        row_dtype != SIEVE_CLIENT_BFLOAT16)
        return sieve__cl_fail(c, SIEVE_EINVAL, "upsert: unknown row dtype %d", (int)row_dtype);
    size_t esize = row_dtype == SIEVE_CLIENT_FLOAT32 ? 4 : 2;
    if (n > (SIZE_MAX / 2) / ((size_t)dim * esize + 8))
        return sieve__cl_fail(c, SIEVE_EINVAL, "upsert: %zu rows of %u values is too large", n,
                              dim);
    for (size_t i = 0; i < n; i++) {
        if (ids[i].is_uuid)
            return sieve__cl_fail(c, SIEVE_EINVAL,
                                  "upsert: point %zu has a UUID id; the binary upsert carries "
                                  "numeric ids only (use sieve_client_upsert_batch)", i);
        if (ids[i].num > (uint64_t)INT64_MAX)
            return sieve__cl_fail(c, SIEVE_EINVAL,
                                  "upsert: point %zu has id %llu, larger than 2^63-1", i,
                                  (unsigned long long)ids[i].num);
    }
    /* finite values only: the exponent field all ones is NaN or infinity */
    size_t vals = n * (size_t)dim;
    if (esize == 4) {
        size_t bad = sieve__cl_find_nonfinite(rows, vals);
        if (bad < vals)
            return sieve__cl_fail(c, SIEVE_ENONFINITE,
                                  "upsert: vector %zu, element %zu is NaN or infinite; expected "
                                  "finite values", bad / dim, bad % dim);
    } else {
        const uint16_t *h = rows;
        uint16_t mask = row_dtype == SIEVE_CLIENT_FLOAT16 ? 0x7c00u : 0x7f80u;
        for (size_t i = 0; i < vals; i++)
            if ((h[i] & mask) == mask)
                return sieve__cl_fail(c, SIEVE_ENONFINITE,
                                      "upsert: vector %zu, element %zu is NaN or infinite; "
                                      "expected finite values", i / dim, i % dim);
    }
    sieve__cl_buf path, body, pay;
    int rc = coll_path(c, &path, collection, "/points?wait=true");
    if (rc) return rc;
    sieve__cl_buf_init(&body);
    sieve__cl_buf_init(&pay);
    if (payloads) rc = put_payloads(c, &pay, payloads, n);
    if (!rc) {
        sieve__cl_buf_reserve(&body, 32 + n * 8 + vals * esize + pay.len);
        sieve__cl_buf_put(&body, "SVPT", 4);
        put_le(&body, 1, 2);                                     /* version */
        put_le(&body, (uint64_t)row_dtype, 2);                   /* dtype */
        put_le(&body, payloads ? 1 : 0, 4);                      /* flags */
        put_le(&body, dim, 4);
        put_le(&body, n, 8);
        put_le(&body, pay.len, 8);                               /* payload_bytes */
        if (host_is_le()) {
            char *d = sieve__cl_buf_reserve(&body, n * 8);
            if (d) {
                for (size_t i = 0; i < n; i++) memcpy(d + i * 8, &ids[i].num, 8);
                body.len += n * 8;
            }
            sieve__cl_buf_put(&body, rows, vals * esize);
        } else {
            for (size_t i = 0; i < n; i++) put_le(&body, ids[i].num, 8);
            for (size_t i = 0; i < vals; i++) {
                uint32_t w;
                if (esize == 4) memcpy(&w, (const float *)rows + i, 4);
                else w = ((const uint16_t *)rows)[i];
                put_le(&body, w, (int)esize);
            }
        }
        if (pay.len) sieve__cl_buf_put(&body, pay.p, pay.len);
        if (pay.failed) body.failed = 1;
        json_t *j = NULL, *r;
        if (body.failed) {
            rc = sieve__cl_fail(c, SIEVE_ENOMEM, "out of memory");
        } else {
            rc = sieve__cl_request_binary(c, "PUT", path.p, body.p, body.len, 1, &j);
            if (!rc) rc = result_of(c, j, "upsert", &r);
        }
        json_decref(j);
    }
    sieve__cl_buf_free(&path);
    sieve__cl_buf_free(&body);
    sieve__cl_buf_free(&pay);
    return rc;
}

int sieve_client_retrieve(sieve_client *c, const char *collection, const sieve_client_id *ids,
                          size_t n, int with_payload, int with_vector, sieve_client_records *out) {
    if (!c) return SIEVE_EINVAL;
    sieve__cl_begin(c);
    if (!out) return sieve__cl_fail(c, SIEVE_EINVAL, "out is NULL");
    memset(out, 0, sizeof *out);
    if (!ids && n) return sieve__cl_fail(c, SIEVE_EINVAL, "retrieve: ids is NULL");
    sieve__cl_buf path, body;
    int rc = coll_path(c, &path, collection, "/points");
    if (rc) return rc;
    sieve__cl_buf_init(&body);
    sieve__cl_buf_puts(&body, "{\"ids\":");
    put_ids(&body, ids, n);
    sieve__cl_buf_printf(&body, ",\"with_payload\":%s,\"with_vector\":%s}",
                         with_payload ? "true" : "false", with_vector ? "true" : "false");
    json_t *j = NULL, *r;
    rc = call(c, "POST", path.p, &body, 1, "retrieve", &j, &r);
    if (!rc) rc = parse_records(c, "retrieve", r, out);
    json_decref(j);
    sieve__cl_buf_free(&path);
    sieve__cl_buf_free(&body);
    return rc;
}

int sieve_client_get_point(sieve_client *c, const char *collection, const sieve_client_id *id,
                           sieve_client_record *out) {
    if (!c) return SIEVE_EINVAL;
    sieve__cl_begin(c);
    if (!out || !id) return sieve__cl_fail(c, SIEVE_EINVAL, "get point: id and out are required");
    memset(out, 0, sizeof *out);
    sieve__cl_buf path;
    int rc = coll_path(c, &path, collection, "/points/");
    if (rc) return rc;
    char idtext[40];
    sieve_client_id_format(id, idtext);
    sieve__cl_buf_puts(&path, idtext);
    json_t *j = NULL, *r;
    if (path.failed)
        rc = sieve__cl_fail(c, SIEVE_ENOMEM, "out of memory");
    else
        rc = call(c, "GET", path.p, NULL, 1, "get point", &j, &r);
    if (!rc) rc = parse_record(c, "get point", r, out);
    json_decref(j);
    sieve__cl_buf_free(&path);
    return rc;
}

int sieve_client_delete_points(sieve_client *c, const char *collection, const sieve_client_id *ids,
                               size_t n) {
    if (!c) return SIEVE_EINVAL;
    sieve__cl_begin(c);
    if (!ids || !n) return sieve__cl_fail(c, SIEVE_EINVAL, "delete: ids and n >= 1 are required");
    sieve__cl_buf path, body;
    int rc = coll_path(c, &path, collection, "/points/delete?wait=true");
    if (rc) return rc;
    sieve__cl_buf_init(&body);
    sieve__cl_buf_puts(&body, "{\"points\":");
    put_ids(&body, ids, n);
    sieve__cl_buf_putc(&body, '}');
    json_t *j = NULL, *r;
    rc = call(c, "POST", path.p, &body, 1, "delete points", &j, &r);
    json_decref(j);
    sieve__cl_buf_free(&path);
    sieve__cl_buf_free(&body);
    return rc;
}

/* Appends ",\"filter\":FILTER" after checking its syntax. */
static int put_filter(sieve_client *c, const char *what, sieve__cl_buf *b, const char *filter) {
    char why[128];
    size_t n = strlen(filter);
    if (sieve__cl_json_check_object(filter, n, why, sizeof why))
        return sieve__cl_fail(c, SIEVE_EINVAL, "%s: filter is not a JSON object: %s", what, why);
    sieve__cl_buf_puts(b, "\"filter\":");
    sieve__cl_buf_put(b, filter, n);
    return 0;
}

int sieve_client_delete_filter(sieve_client *c, const char *collection, const char *filter) {
    if (!c) return SIEVE_EINVAL;
    sieve__cl_begin(c);
    if (!filter) return sieve__cl_fail(c, SIEVE_EINVAL, "delete: a filter is required");
    sieve__cl_buf path, body;
    int rc = coll_path(c, &path, collection, "/points/delete?wait=true");
    if (rc) return rc;
    sieve__cl_buf_init(&body);
    sieve__cl_buf_putc(&body, '{');
    rc = put_filter(c, "delete", &body, filter);
    sieve__cl_buf_putc(&body, '}');
    if (!rc) {
        json_t *j = NULL, *r;
        rc = call(c, "POST", path.p, &body, 0, "delete by filter", &j, &r);
        json_decref(j);
    }
    sieve__cl_buf_free(&path);
    sieve__cl_buf_free(&body);
    return rc;
}

int sieve_client_count(sieve_client *c, const char *collection, const char *filter, uint64_t *out) {
    if (!c) return SIEVE_EINVAL;
    sieve__cl_begin(c);
    if (!out) return sieve__cl_fail(c, SIEVE_EINVAL, "out is NULL");
    *out = 0;
    sieve__cl_buf path, body;
    int rc = coll_path(c, &path, collection, "/points/count");
    if (rc) return rc;
    sieve__cl_buf_init(&body);
    sieve__cl_buf_puts(&body, "{\"exact\":true");
    if (filter) {
        sieve__cl_buf_putc(&body, ',');
        rc = put_filter(c, "count", &body, filter);
    }
    sieve__cl_buf_putc(&body, '}');
    if (!rc) {
        json_t *j = NULL, *r;
        rc = call(c, "POST", path.p, &body, 1, "count", &j, &r);
        if (!rc) {
            json_t *cnt = json_object_get(r, "count");
            if (!json_is_integer(cnt) || json_integer_value(cnt) < 0)
                rc = bad_reply(c, "count", "no \"count\"");
            else
                *out = (uint64_t)json_integer_value(cnt);
        }
        json_decref(j);
    }
    sieve__cl_buf_free(&path);
    sieve__cl_buf_free(&body);
    return rc;
}

/* ---------------------------------------------------------------- search */

/* Appends one search object; key is "vector" (search) or "query" (query). */
static int put_search(sieve_client *c, const char *what, sieve__cl_buf *b, const char *key,
                      const sieve_client_search_params *q, size_t index) {
    if (!q->vector || !q->dim || !q->limit)
        return sieve__cl_fail(c, SIEVE_EINVAL,
                              "%s %zu: vector, dim >= 1 and limit >= 1 are required", what, index);
    size_t bad = sieve__cl_find_nonfinite(q->vector, q->dim);
    if (bad < q->dim)
        return sieve__cl_fail(c, SIEVE_ENONFINITE,
                              "%s %zu: query vector element %zu is NaN or infinite", what, index,
                              bad);
    sieve__cl_buf_printf(b, "{\"%s\":", key);
    sieve__cl_buf_vector(b, q->vector, q->dim);
    sieve__cl_buf_printf(b, ",\"limit\":%u,\"offset\":%u,\"with_payload\":%s,\"with_vector\":%s",
                         q->limit, q->offset, q->with_payload ? "true" : "false",
                         q->with_vector ? "true" : "false");
    if (q->use_score_threshold) {
        if (sieve__cl_find_nonfinite(&q->score_threshold, 1) == 0)
            return sieve__cl_fail(c, SIEVE_ENONFINITE, "%s %zu: score_threshold is not finite",
                                  what, index);
        char num[SIEVE__CL_F32_SCRATCH];
        size_t len = sieve__cl_fmt_f32(num, q->score_threshold);
        sieve__cl_buf_puts(b, ",\"score_threshold\":");
        sieve__cl_buf_put(b, num, len);
    }
    if (q->filter) {
        sieve__cl_buf_putc(b, ',');
        int rc = put_filter(c, what, b, q->filter);
        if (rc) return rc;
    }
    sieve__cl_buf_putc(b, '}');
    return 0;
}

/* Shared by the four search calls. query: the /query routes; batch: n searches. */
static int search_common(sieve_client *c, const char *collection,
                         const sieve_client_search_params *qs, size_t n, sieve_client_records *out,
                         int query, int batch) {
    const char *what =
        query ? (batch ? "query batch" : "query") : (batch ? "search batch" : "search");
    if (!c) return SIEVE_EINVAL;
    sieve__cl_begin(c);
    if (!out || !qs || !n)
        return sieve__cl_fail(c, SIEVE_EINVAL, "%s: searches, n >= 1 and out are required", what);
    for (size_t i = 0; i < n; i++) memset(&out[i], 0, sizeof out[i]);
    const char *suffix = query ? (batch ? "/points/query/batch" : "/points/query")
                               : (batch ? "/points/search/batch" : "/points/search");
    sieve__cl_buf path, body;
    int rc = coll_path(c, &path, collection, suffix);
    if (rc) return rc;
    sieve__cl_buf_init(&body);
    if (batch) sieve__cl_buf_puts(&body, "{\"searches\":[");
    for (size_t i = 0; i < n && !rc; i++) {
        if (i) sieve__cl_buf_putc(&body, ',');
        rc = put_search(c, what, &body, query ? "query" : "vector", &qs[i], i);
    }
    if (batch) sieve__cl_buf_puts(&body, "]}");
    json_t *j = NULL, *r = NULL;
    if (!rc) rc = call(c, "POST", path.p, &body, 1, what, &j, &r);
    if (!rc) {
        if (batch && (!json_is_array(r) || json_array_size(r) != n)) {
            rc = bad_reply(c, what, "result is not an array with one entry per search");
        } else {
            for (size_t i = 0; i < n && !rc; i++) {
                json_t *one = batch ? json_array_get(r, i) : r;
                if (query) one = json_object_get(one, "points");
                rc = parse_records(c, what, one, &out[i]);
            }
            if (rc)
                for (size_t i = 0; i < n; i++) sieve_client_records_clear(&out[i]);
        }
    }
    json_decref(j);
    sieve__cl_buf_free(&path);
    sieve__cl_buf_free(&body);
    return rc;
}

int sieve_client_search(sieve_client *c, const char *collection,
                        const sieve_client_search_params *q, sieve_client_records *out) {
    return search_common(c, collection, q, 1, out, 0, 0);
}

int sieve_client_search_batch(sieve_client *c, const char *collection,
                              const sieve_client_search_params *qs, size_t n,
                              sieve_client_records *out) {
    return search_common(c, collection, qs, n, out, 0, 1);
}

int sieve_client_query(sieve_client *c, const char *collection, const sieve_client_search_params *q,
                       sieve_client_records *out) {
    return search_common(c, collection, q, 1, out, 1, 0);
}

int sieve_client_query_batch(sieve_client *c, const char *collection,
                             const sieve_client_search_params *qs, size_t n,
                             sieve_client_records *out) {
    return search_common(c, collection, qs, n, out, 1, 1);
}

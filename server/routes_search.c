/* routes_search.c: search and query routes of sieve-server.
 *
 * Owns: validating points/search, points/search/batch, points/query and points/query/batch
 * requests (vector, limit, offset, filter, with_payload, with_vector, score_threshold),
 * turning them into a search job for the batcher, suspending the connection, and building
 * the reply (the JSON of every result) on the connection's thread once the batcher has
 * answered every query of the job and resumed it.
 * Must not: run searches itself or block a pool thread waiting for one.
 *
 * Limits: limit is 1..16384 and offset + limit (the k asked of the kernel) at most 16384
 * (SIEVE_SERVER_MAX_K); a batch holds at most 1024 searches. Fewer matching points than
 * offset + limit simply gives fewer results.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

/* Parses the fields every search shares (everything but the vector) into q. */
static int parse_common(const json_t *o, const char *path, int limit_required,
                        sieve__query *q, sieve__err *e) {
    char f[400];
    long long limit = 10, offset = 0;
    if (limit_required && !sieve__jv_get(o, "limit"))
        return sieve__fail(e, 400, "%s%slimit: required (an integer from 1 to %u)", path,
                           *path ? "." : "", SIEVE_SERVER_MAX_K);
    if (sieve__jv_int(o, "limit", path, 1, SIEVE_SERVER_MAX_K, 10, &limit, e)) return -1;
    if (sieve__jv_int(o, "offset", path, 0, SIEVE_SERVER_MAX_K - 1, 0, &offset, e)) return -1;
    if (limit + offset > SIEVE_SERVER_MAX_K)
        return sieve__fail(e, 400, "%s%soffset: offset + limit must be at most %u, got %lld + "
                                   "%lld", path, *path ? "." : "", SIEVE_SERVER_MAX_K, offset,
                           limit);
    q->limit = (uint32_t)limit;
    q->offset = (uint32_t)offset;

    json_t *params = sieve__jv_get(o, "params");
    if (params && !json_is_object(params))
        return sieve__fail(e, 400, "%s%sparams: expected an object, got %s", path,
                           *path ? "." : "", sieve__jv_type(params));

    sieve__pathf(f, sizeof f, "%s%sfilter", path, *path ? "." : "");
    json_t *fj = sieve__jv_get(o, "filter");
    if (sieve__filter_parse(fj, f, &q->filter, e)) return -1;
    if (q->filter) {
        q->filter_key = json_dumps(fj, JSON_COMPACT | JSON_SORT_KEYS);
        if (!q->filter_key) return sieve__fail(e, 500, "out of memory");
    }

    sieve__pathf(f, sizeof f, "%s%swith_payload", path, *path ? "." : "");
    if (sieve__psel_parse(json_object_get(o, "with_payload"), f, SIEVE_PSEL_NONE, &q->payload,
                          e))
        return -1;
    json_t *wv = json_object_get(o, "with_vector");
    if (!wv || json_is_null(wv)) wv = json_object_get(o, "with_vectors");
    sieve__pathf(f, sizeof f, "%s%swith_vector", path, *path ? "." : "");
    if (sieve__jv_with_vector(wv, f, 0, &q->with_vector, e)) return -1;

    json_t *th = sieve__jv_get(o, "score_threshold");
    if (th) {
        sieve__pathf(f, sizeof f, "%s%sscore_threshold", path, *path ? "." : "");
        if (sieve__jv_float(th, f, &q->threshold, e)) return -1;
        q->has_threshold = 1;
    }
    return 0;
}

static int take_vector(const json_t *v, const char *path, uint32_t dim, sieve__query *q,
                       sieve__err *e) {
    q->dim = dim;
    q->vector = malloc(dim * sizeof(float));
    if (!q->vector) return sieve__fail(e, 500, "out of memory");
    return sieve__jv_vector(v, path, dim, q->vector, e);
}

/* SearchRequest: {"vector": [...] | {"name": "", "vector": [...]}, "limit", ...}. */
static int parse_search(const json_t *o, const char *path, uint32_t dim, sieve__query *q,
                        sieve__err *e) {
    static const char *const keys[] = {"vector", "filter", "params", "limit", "offset",
                                       "with_payload", "with_vector", "with_vectors",
                                       "score_threshold", NULL};
    static const char *const ignored[] = {"shard_key", NULL};
    char f[400];
    if (!json_is_object(o))
        return sieve__fail(e, 400, "%s: expected a search request object, got %s",
                           *path ? path : "request body", sieve__jv_type(o));
    if (sieve__jv_keys(o, path, keys, ignored, e)) return -1;
    sieve__pathf(f, sizeof f, "%s%svector", path, *path ? "." : "");
    json_t *v = sieve__jv_get(o, "vector");
    if (!v) return sieve__fail(e, 400, "%s: required (an array of %u numbers)", f, dim);
    if (json_is_object(v) && json_object_get(v, "vector")) { /* NamedVector */
        json_t *name = json_object_get(v, "name");
        static const char *const nk[] = {"name", "vector", NULL};
        if (sieve__jv_keys(v, f, nk, NULL, e)) return -1;
        if (name && !(json_is_string(name) && json_string_length(name) == 0))
            return sieve__fail(e, 400, "%s.name: named vectors are not supported (only the "
                                       "unnamed vector \"\")", f);
        char f2[420];
        sieve__pathf(f2, sizeof f2, "%s.vector", f);
        if (take_vector(json_object_get(v, "vector"), f2, dim, q, e)) return -1;
    } else if (take_vector(v, f, dim, q, e)) {
        return -1;
    }
    return parse_common(o, path, 1, q, e);
}

/* QueryRequest: {"query": [...] | {"nearest": [...]}, "limit" (default 10), ...}. */
static int parse_query(const json_t *o, const char *path, uint32_t dim, sieve__query *q,
                       sieve__err *e) {
    static const char *const keys[] = {"query", "using", "filter", "params", "limit",
                                       "offset", "with_payload", "with_vector",
                                       "with_vectors", "score_threshold", "prefetch",
                                       "lookup_from", NULL};
    static const char *const ignored[] = {"shard_key", NULL};
    char f[400];
    const char *dot = *path ? "." : "";
    if (!json_is_object(o))
        return sieve__fail(e, 400, "%s: expected a query request object, got %s",
                           *path ? path : "request body", sieve__jv_type(o));
    if (sieve__jv_keys(o, path, keys, ignored, e)) return -1;
    if (sieve__jv_get(o, "prefetch"))
        return sieve__fail(e, 400, "%s%sprefetch: multi-stage queries are not supported", path,
                           dot);
    if (sieve__jv_get(o, "lookup_from"))
        return sieve__fail(e, 400, "%s%slookup_from: not supported", path, dot);
    json_t *u = sieve__jv_get(o, "using");
    if (u && !(json_is_string(u) && json_string_length(u) == 0))
        return sieve__fail(e, 400, "%s%susing: named vectors are not supported (only the "
                                   "unnamed vector \"\")", path, dot);
    sieve__pathf(f, sizeof f, "%s%squery", path, dot);
    json_t *v = sieve__jv_get(o, "query");
    if (!v)
        return sieve__fail(e, 400, "%s: required (a vector of %u numbers or {\"nearest\": "
                                   "vector})", f, dim);
    if (json_is_object(v)) {
        json_t *near = json_object_get(v, "nearest");
        if (!near) {
            const char *first = json_object_size(v)
                                    ? json_object_iter_key(json_object_iter(v)) : "{}";
            return sieve__fail(e, 400, "%s: only nearest-neighbour queries are supported "
                                       "(a vector or {\"nearest\": vector}), got '%s'", f,
                               first);
        }
        static const char *const nk[] = {"nearest", "mmr", NULL};
        if (sieve__jv_keys(v, f, nk, NULL, e)) return -1;
        if (sieve__jv_get(v, "mmr"))
            return sieve__fail(e, 400, "%s.mmr: maximal marginal relevance is not supported",
                               f);
        char f2[420];
        sieve__pathf(f2, sizeof f2, "%s.nearest", f);
        if (take_vector(near, f2, dim, q, e)) return -1;
    } else if (json_is_array(v)) {
        if (take_vector(v, f, dim, q, e)) return -1;
    } else {
        return sieve__fail(e, 400, "%s: expected a vector of %u numbers or {\"nearest\": "
                                   "vector}, got %s (queries by point id are not supported)",
                           f, dim, sieve__jv_type(v));
    }
    return parse_common(o, path, 0, q, e);
}

/* Hands job (owned by req from here) to the batcher, the connection suspended. */
static void submit(sieve__req *req, sieve__search_job *job) {
    /* Suspend first: the batcher may answer before this handler returns. */
    req->job = job;
    sieve__req_suspend(req);
    int rc = sieve__batcher_submit(req->srv->batcher, job);
    if (rc) {
        if (rc == SIEVE_EBUSY)
            sieve__reply_error(req, 503, "too many queued searches on collection '%s'; retry "
                                         "later", req->name);
        else if (rc == SIEVE_ECLOSED)
            sieve__reply_error(req, 503, "the server is shutting down");
        else sieve__reply_error(req, 500, "cannot queue the search: %s", sieve_strerror(rc));
        sieve__req_resume(req);
    }
}

int sieve__route_search_plain(sieve__req *req) {
    sieve_collection_info info;
    if (req->route != SIEVE_R_SEARCH || !req->body.p ||
        sieve_store_collection_info(req->srv->store, req->name, &info))
        return 0; /* the generic path answers, 404 included */
    uint32_t dim = info.config.dim;
    float *v = malloc((size_t)dim * sizeof *v);
    uint32_t limit = 0, offset = 0;
    if (!v || !sieve__search_parse_plain(req->body.p, req->body.len, dim, v, &limit, &offset)) {
        free(v);
        return 0;
    }
    sieve__search_job *job = calloc(1, sizeof *job);
    if (job) job->q = calloc(1, sizeof *job->q);
    if (!job || !job->q) {
        free(v);
        free(job);
        return 0; /* out of memory: the generic path reports it */
    }
    job->n = 1;
    job->req = req;
    job->srv = req->srv;
    job->kind = SIEVE_JOB_SEARCH;
    sieve__pathf(job->collection, sizeof job->collection, "%s", req->name);
    sieve__query *q = &job->q[0];
    q->vector = v;
    q->dim = dim;
    q->limit = limit;
    q->offset = offset;
    q->payload.mode = SIEVE_PSEL_NONE;
    sieve__req_release_body(req);
    submit(req, job);
    return 1;
}

void sieve__route_search(sieve__req *req, json_t *body) {
    sieve__err e;
    sieve_collection_info info;
    sieve__search_job *job = NULL;
    if (sieve__collection_info(req, &info, &e)) goto fail;
    sieve__job_kind kind = req->route == SIEVE_R_SEARCH         ? SIEVE_JOB_SEARCH
                           : req->route == SIEVE_R_SEARCH_BATCH ? SIEVE_JOB_SEARCH_BATCH
                           : req->route == SIEVE_R_QUERY        ? SIEVE_JOB_QUERY
                                                                : SIEVE_JOB_QUERY_BATCH;
    int batch = kind == SIEVE_JOB_SEARCH_BATCH || kind == SIEVE_JOB_QUERY_BATCH;
    int query = kind == SIEVE_JOB_QUERY || kind == SIEVE_JOB_QUERY_BATCH;
    json_t *list = NULL;
    size_t n = 1;
    if (batch) {
        static const char *const keys[] = {"searches", NULL};
        if (sieve__jv_keys(body, "", keys, NULL, &e)) goto fail;
        list = sieve__jv_get(body, "searches");
        if (!json_is_array(list)) {
            sieve__fail(&e, 400, "searches: expected an array of %s requests, got %s",
                        query ? "query" : "search", sieve__jv_type(list));
            goto fail;
        }
        n = json_array_size(list);
        if (n > SIEVE_SERVER_MAX_BATCH_SEARCHES) {
            sieve__fail(&e, 400, "searches: expected at most %u searches in one batch, got %zu",
                        SIEVE_SERVER_MAX_BATCH_SEARCHES, n);
            goto fail;
        }
        if (n == 0) {
            sieve__reply_ok_raw(req, "[]", 2);
            return;
        }
    }
    job = calloc(1, sizeof *job);
    if (job) job->q = calloc(n, sizeof *job->q);
    if (!job || !job->q) {
        sieve__fail(&e, 500, "out of memory");
        goto fail;
    }
    job->n = n;
    job->req = req;
    job->srv = req->srv;
    job->kind = kind;
    sieve__pathf(job->collection, sizeof job->collection, "%s", req->name);
    for (size_t i = 0; i < n; i++) {
        char path[48] = "";
        const json_t *o = body;
        if (batch) {
            sieve__pathf(path, sizeof path, "searches[%zu]", i);
            o = json_array_get(list, i);
        }
        int rc = query ? parse_query(o, path, info.config.dim, &job->q[i], &e)
                       : parse_search(o, path, info.config.dim, &job->q[i], &e);
        if (rc) goto fail;
    }
    /* Bound what one request can make the server compute and hold. */
    unsigned long long results = 0, values = 0;
    for (size_t i = 0; i < n; i++) {
        results += job->q[i].offset + job->q[i].limit;
        if (job->q[i].with_vector) values += (unsigned long long)job->q[i].limit * info.config.dim;
    }
    if (results > SIEVE_SERVER_MAX_RESULTS) {
        sieve__fail(&e, 400, "searches: offset + limit summed over the batch is %llu, at most "
                             "%u per request", results, SIEVE_SERVER_MAX_RESULTS);
        goto fail;
    }
    if (values > SIEVE_SERVER_MAX_VECTOR_VALUES) {
        sieve__fail(&e, 400, "with_vector: the %s would return %llu vector values (limit x "
                             "dimension), at most %u per request; lower limit or drop "
                             "with_vector", batch ? "batch" : "search", values,
                    SIEVE_SERVER_MAX_VECTOR_VALUES);
        goto fail;
    }
    submit(req, job);
    return;
fail:
    sieve__job_free(job);
    sieve__reply_err(req, &e);
}

/* Writes q's ScoredPoint list from the hits the batcher kept. Returns 0, or -1 when a
 * stored payload cannot be read as JSON. */
static int write_hits(const sieve__query *q, sieve__sbuf *o) {
    static const char ID[] = "{\"id\":", SCORE[] = ",\"version\":0,\"score\":",
                      PAYLOAD[] = ",\"payload\":", BARE[] = "null,\"vector\":null}";
    sieve__sbuf_putc(o, '[');
    for (uint32_t i = 0; i < q->n_hits; i++) {
        const sieve__hit *h = &q->hits[i];
        /* the hit up to its payload in one piece (the whole hit when it has neither payload
           nor vector), then one append */
        char line[1 + sizeof ID + SIEVE__ID_JSON_MAX + sizeof SCORE + 24 + sizeof PAYLOAD +
                  sizeof BARE];
        size_t n = 0;
        if (i) line[n++] = ',';
        memcpy(line + n, ID, sizeof ID - 1);
        n += sizeof ID - 1;
        n += (size_t)sieve__fmt_id(line + n, &h->id);
        memcpy(line + n, SCORE, sizeof SCORE - 1);
        n += sizeof SCORE - 1;
        n += (size_t)sieve__fmt_json_float(line + n, h->score);
        memcpy(line + n, PAYLOAD, sizeof PAYLOAD - 1);
        n += sizeof PAYLOAD - 1;
        if (q->payload.mode == SIEVE_PSEL_NONE && !h->has_vector) {
            memcpy(line + n, BARE, sizeof BARE - 1);
            sieve__sbuf_put(o, line, n + sizeof BARE - 1);
            continue;
        }
        sieve__sbuf_put(o, line, n);
        if (q->payload.mode != SIEVE_PSEL_NONE) {
            const char *pj = h->has_payload && q->payloads.p ? q->payloads.p + h->payload_off
                                                               : NULL;
            if (sieve__psel_write(&q->payload, pj, h->has_payload ? h->payload_len : 0, o))
                return -1;
        } else {
            sieve__sbuf_puts(o, "null");
        }
        sieve__sbuf_puts(o, ",\"vector\":");
        if (h->has_vector) {
            const float *v = q->vectors + (size_t)i * q->dim;
            sieve__sbuf_putc(o, '[');
            for (uint32_t d = 0; d < q->dim; d++) {
                if (d) sieve__sbuf_putc(o, ',');
                sieve__sbuf_float(o, v[d]);
            }
            sieve__sbuf_putc(o, ']');
        } else {
            sieve__sbuf_puts(o, "null");
        }
        sieve__sbuf_putc(o, '}');
    }
    sieve__sbuf_putc(o, ']');
    return 0;
}

void sieve__search_job_reply(sieve__search_job *job) {
    sieve__req *req = job->req;
    int batch = job->kind == SIEVE_JOB_SEARCH_BATCH || job->kind == SIEVE_JOB_QUERY_BATCH;
    int query = job->kind == SIEVE_JOB_QUERY || job->kind == SIEVE_JOB_QUERY_BATCH;
    for (size_t i = 0; i < job->n; i++) {
        const sieve__err *e = &job->q[i].err;
        if (!e->status) continue;
        if (batch) sieve__reply_error(req, e->status, "searches[%zu]: %s", i, e->msg);
        else sieve__reply_err(req, e);
        return;
    }
    sieve__sbuf b;
    sieve__sbuf_init(&b);
    if (batch) sieve__sbuf_putc(&b, '[');
    for (size_t i = 0; i < job->n; i++) {
        if (i) sieve__sbuf_putc(&b, ',');
        if (query) sieve__sbuf_puts(&b, "{\"points\":");
        if (write_hits(&job->q[i], &b)) {
            sieve__sbuf_free(&b);
            if (batch)
                sieve__reply_error(req, 500, "searches[%zu]: internal error: a stored payload "
                                             "is unreadable", i);
            else sieve__reply_error(req, 500, "internal error: a stored payload is unreadable");
            return;
        }
        if (query) sieve__sbuf_putc(&b, '}');
    }
    if (batch) sieve__sbuf_putc(&b, ']');
    if (b.failed) sieve__reply_error(req, 500, "out of memory");
    else sieve__reply_ok_raw(req, b.p, b.len);
    sieve__sbuf_free(&b);
}

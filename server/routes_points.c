/* routes_points.c: point routes of sieve-server.
 *
 * Owns: upsert (the `points` list, the `batch` column form and the binary body), retrieve
 * by ids, get one point, delete by ids or by filter, count (exact, with filter) and scroll,
 * in Qdrant's request and response shapes. Every request is validated completely before the
 * store is called, and each write is one atomic store call, so a bad request changes nothing.
 * Must not: search (routes_search.c and the batcher do).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

/* Shared by the write routes: {"operation_id": n, "status": "completed"}. Writes are
 * durable when the store returns, so `wait` makes no difference. */
static void reply_update(sieve__req *req) {
    unsigned long long op = atomic_fetch_add(&req->srv->next_op_id, 1);
    char text[96];
    sieve__pathf(text, sizeof text, "{\"operation_id\":%llu,\"status\":\"completed\"}", op);
    sieve__reply_ok_raw(req, text, strlen(text));
}

static void reply_store_error(sieve__req *req, int rc, const char *what) {
    if (rc == SIEVE_ENOTFOUND)
        sieve__reply_error(req, 404, "collection '%s' not found", req->name);
    else
        sieve__reply_error(req, sieve__status_for(rc), "%s failed: %s", what,
                           sieve_strerror(rc));
}

/* ---------------------------------------------------------------- upsert */

/* What the store would refuse with SIEVE_ERANGE, found here so the message can name the
 * field: a value that overflows the collection's 16-bit dtype, or a squared norm that
 * overflows float32 (Euclid needs it). Cosine vectors are normalised first, so they fit. */
static int check_storable(const sieve_collection_config *c, const float *v, const char *path,
                          void *tmp, sieve__err *e) {
    if (c->metric == SIEVE_METRIC_COSINE) return 0;
    sieve_convert_from_f32(c->dtype, v, tmp, c->dim);
    if (c->dtype != SIEVE_DTYPE_F32) {
        const uint16_t *h = tmp;
        uint16_t expmask = c->dtype == SIEVE_DTYPE_F16 ? 0x7c00u : 0x7f80u;
        for (uint32_t i = 0; i < c->dim; i++)
            if ((h[i] & expmask) == expmask)
                return sieve__fail(e, 400, "%s[%u]: %g does not fit the collection's %s "
                                           "vectors (largest magnitude %s)", path, i,
                                   (double)v[i], sieve_dtype_name(c->dtype),
                                   c->dtype == SIEVE_DTYPE_F16 ? "65504" : "3.39e38");
    }
    if (!isfinite(sieve_row_sqnorm(c->dtype, tmp, c->dim)))
        return sieve__fail(e, 400, "%s: the squared length overflows float32 (values too large "
                                   "for a %s collection)", path, sieve_metric_name(c->metric));
    return 0;
}

/* The body is parsed straight from req->body (no jansson tree): JSON by upsert_parse.c, the
 * binary form (Content-Type application/x-sieve-points) by upsert_binary.c. */
void sieve__route_points_upsert(sieve__req *req, json_t *body) {
    sieve__err e;
    sieve__upsert u;
    memset(&u, 0, sizeof u);
    sieve_collection_info info;
    if (sieve__collection_info(req, &info, &e)) goto fail;
    uint32_t dim = info.config.dim;
    if (req->binary_body) {
        /* float32 rows stay in the body: it is released after the store call */
        if (sieve__upsert_parse_binary(req->body.p, req->body.len, dim, &u, &e)) goto fail;
    } else {
        if (sieve__upsert_parse(req->body.p, req->body.len, dim, &u, &e)) goto fail;
        sieve__req_release_body(req);
    }
    if (u.n && info.config.metric != SIEVE_METRIC_COSINE) {
        void *tmp = malloc((size_t)dim * sizeof(float));
        if (!tmp) {
            sieve__fail(&e, 500, "out of memory");
            goto fail;
        }
        for (size_t i = 0; i < u.n; i++) {
            char path[64];
            if (req->binary_body) sieve__pathf(path, sizeof path, "rows[%zu]", i);
            else if (u.batch_form) sieve__pathf(path, sizeof path, "batch.vectors[%zu]", i);
            else sieve__pathf(path, sizeof path, "points[%zu].vector", i);
            if (check_storable(&info.config, u.points[i].vector, path, tmp, &e)) {
                free(tmp);
                goto fail;
            }
        }
        free(tmp);
    }
    for (size_t i = 0; i < u.n; i++) u.points[i].dim = dim; /* the store checks it too */
    if (u.n) {
        int rc = sieve_store_upsert(req->srv->store, req->name, u.points, u.n);
        if (rc) {
            sieve__upsert_free(&u);
            sieve__req_release_body(req);
            reply_store_error(req, rc, "upsert");
            return;
        }
    }
    sieve__upsert_free(&u);
    sieve__req_release_body(req);
    reply_update(req);
    return;
fail:
    sieve__upsert_free(&u);
    sieve__req_release_body(req);
    sieve__reply_err(req, &e);
}

/* ---------------------------------------------------------------- reading points */

/* Appends a Record {"id","payload","vector"} of row to o. Returns -1 on a store error. */
static int write_record(sieve__sbuf *o, sieve_snapshot *snap, uint64_t row,
                        const sieve_point_id *id, const sieve__psel *psel, int with_vector,
                        float *vecbuf, uint32_t dim) {
    sieve__sbuf_puts(o, "{\"id\":");
    sieve__sbuf_id(o, id);
    sieve__sbuf_puts(o, ",\"payload\":");
    if (psel->mode != SIEVE_PSEL_NONE) {
        const char *pj = NULL;
        size_t pl = 0;
        if (sieve_snapshot_row_payload(snap, row, &pj, &pl)) return -1;
        if (sieve__psel_write(psel, pj, pl, o)) return -1;
    } else {
        sieve__sbuf_puts(o, "null");
    }
    sieve__sbuf_puts(o, ",\"vector\":");
    if (with_vector) {
        if (sieve_snapshot_row_vector(snap, row, vecbuf)) return -1;
        sieve__sbuf_putc(o, '[');
        for (uint32_t d = 0; d < dim; d++) {
            if (d) sieve__sbuf_putc(o, ',');
            sieve__sbuf_float(o, vecbuf[d]);
        }
        sieve__sbuf_putc(o, ']');
    } else {
        sieve__sbuf_puts(o, "null");
    }
    sieve__sbuf_putc(o, '}');
    return 0;
}

static int open_snapshot(sieve__req *req, sieve_snapshot **snap, sieve__err *e) {
    int rc = sieve_snapshot_open(req->srv->store, req->name, snap);
    if (rc == SIEVE_ENOTFOUND) return sieve__fail(e, 404, "collection '%s' not found", req->name);
    if (rc)
        return sieve__fail(e, sieve__status_for(rc), "cannot read collection '%s': %s",
                           req->name, sieve_strerror(rc));
    return 0;
}

static int parse_id_list(const json_t *arr, const char *path, sieve_point_id **ids, size_t *n,
                         sieve__err *e) {
    *ids = NULL;
    *n = 0;
    if (!json_is_array(arr))
        return sieve__fail(e, 400, "%s: expected an array of point ids, got %s", path,
                           sieve__jv_type(arr));
    size_t m = json_array_size(arr);
    *ids = malloc((m ? m : 1) * sizeof **ids);
    if (!*ids) return sieve__fail(e, 500, "out of memory");
    for (size_t i = 0; i < m; i++) {
        char f[96];
        sieve__pathf(f, sizeof f, "%s[%zu]", path, i);
        if (sieve__jv_id(json_array_get(arr, i), f, &(*ids)[i], e)) {
            free(*ids);
            *ids = NULL;
            return -1;
        }
    }
    *n = m;
    return 0;
}

typedef struct id_pos {
    sieve_point_id id;
    size_t pos;
} id_pos;

static int id_pos_cmp(const void *a, const void *b) {
    const id_pos *x = a, *y = b;
    int c = sieve_point_id_cmp(&x->id, &y->id);
    if (c) return c;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Flags (malloc'd, n bytes) marking every repeat of an id after its first position. */
static char *dup_flags(const sieve_point_id *ids, size_t n) {
    char *dup = calloc(n ? n : 1, 1);
    id_pos *v = malloc((n ? n : 1) * sizeof *v);
    if (!dup || !v) {
        free(dup);
        free(v);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        v[i].id = ids[i];
        v[i].pos = i;
    }
    qsort(v, n, sizeof *v, id_pos_cmp);
    for (size_t i = 1; i < n; i++)
        if (!sieve_point_id_cmp(&v[i].id, &v[i - 1].id)) dup[v[i].pos] = 1;
    free(v);
    return dup;
}

void sieve__route_points_retrieve(sieve__req *req, json_t *body) {
    static const char *const keys[] = {"ids", "with_payload", "with_vector", "with_vectors",
                                       NULL};
    static const char *const ignored[] = {"shard_key", "consistency", NULL};
    sieve__err e;
    sieve__psel psel;
    memset(&psel, 0, sizeof psel);
    sieve_point_id *ids = NULL;
    size_t n = 0;
    sieve_snapshot *snap = NULL;
    float *vecbuf = NULL;
    sieve__sbuf o;
    sieve__sbuf_init(&o);
    int with_vector = 0;
    char *dup = NULL;

    sieve_collection_info info;
    if (sieve__collection_info(req, &info, &e)) goto fail;
    if (sieve__jv_keys(body, "", keys, ignored, &e)) goto fail;
    json_t *idj = sieve__jv_get(body, "ids");
    if (!idj) {
        sieve__fail(&e, 400, "ids: required (an array of point ids)");
        goto fail;
    }
    if (parse_id_list(idj, "ids", &ids, &n, &e)) goto fail;
    if (sieve__psel_parse(json_object_get(body, "with_payload"), "with_payload",
                          SIEVE_PSEL_ALL, &psel, &e))
        goto fail;
    json_t *wv = json_object_get(body, "with_vector");
    if (!wv) wv = json_object_get(body, "with_vectors");
    if (sieve__jv_with_vector(wv, "with_vector", 0, &with_vector, &e)) goto fail;
    if (open_snapshot(req, &snap, &e)) goto fail;
    uint32_t dim = sieve_snapshot_info(snap)->config.dim;
    vecbuf = malloc(dim * sizeof(float));
    if (!vecbuf) {
        sieve__fail(&e, 500, "out of memory");
        goto fail;
    }
    dup = dup_flags(ids, n);
    if (!dup) {
        sieve__fail(&e, 500, "out of memory");
        goto fail;
    }
    sieve__sbuf_putc(&o, '[');
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        if (dup[i]) continue; /* each id once, where first asked */
        uint64_t row;
        int rc = sieve_snapshot_id_row(snap, &ids[i], &row);
        if (rc == SIEVE_ENOTFOUND) continue;
        if (!rc) {
            if (!first) sieve__sbuf_putc(&o, ',');
            first = 0;
            rc = write_record(&o, snap, row, &ids[i], &psel, with_vector, vecbuf, dim) ? -1 : 0;
        }
        if (rc) {
            sieve__fail(&e, 500, "cannot read point: %s", sieve_strerror(rc));
            goto fail;
        }
    }
    sieve__sbuf_putc(&o, ']');
    if (o.failed) {
        sieve__fail(&e, 500, "out of memory");
        goto fail;
    }
    sieve__reply_ok_raw(req, o.p, o.len);
    goto out;
fail:
    sieve__reply_err(req, &e);
out:
    if (snap) sieve_snapshot_close(snap);
    sieve__sbuf_free(&o);
    sieve__psel_free(&psel);
    free(ids);
    free(vecbuf);
    free(dup);
}

void sieve__route_point_get(sieve__req *req, json_t *body) {
    sieve__err e;
    sieve_point_id id;
    sieve_snapshot *snap = NULL;
    float *vecbuf = NULL;
    sieve__sbuf o;
    sieve__sbuf_init(&o);
    sieve__psel all = {SIEVE_PSEL_ALL, NULL, 0};
    sieve_collection_info info;
    if (sieve__collection_info(req, &info, &e)) goto fail;
    if (sieve__id_parse_text(req->point_id, &id)) {
        sieve__fail(&e, 400, "point id: expected an unsigned integer or a UUID, got \"%.64s\"",
                    req->point_id);
        goto fail;
    }
    if (open_snapshot(req, &snap, &e)) goto fail;
    uint32_t dim = sieve_snapshot_info(snap)->config.dim;
    vecbuf = malloc(dim * sizeof(float));
    uint64_t row;
    int rc = vecbuf ? sieve_snapshot_id_row(snap, &id, &row) : SIEVE_ENOMEM;
    if (rc == SIEVE_ENOTFOUND) {
        sieve__fail(&e, 404, "point %s not found in collection '%s'", req->point_id, req->name);
        goto fail;
    }
    if (rc || write_record(&o, snap, row, &id, &all, 1, vecbuf, dim) || o.failed) {
        sieve__fail(&e, 500, "cannot read point %s", req->point_id);
        goto fail;
    }
    sieve__reply_ok_raw(req, o.p, o.len);
    goto out;
fail:
    sieve__reply_err(req, &e);
out:
    if (snap) sieve_snapshot_close(snap);
    sieve__sbuf_free(&o);
    free(vecbuf);
}

/* ---------------------------------------------------------------- delete, count */

typedef struct id_vec {
    sieve_point_id *ids;
    size_t n, cap;
    int oom;
} id_vec;

static int collect_id(void *ctx, uint64_t row, const sieve_point_id *id, const char *payload,
                      size_t payload_len) {
    id_vec *v = ctx;
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 1024;
        sieve_point_id *p = realloc(v->ids, cap * sizeof *p);
        if (!p) {
            v->oom = 1;
            return 1;
        }
        v->ids = p;
        v->cap = cap;
    }
    v->ids[v->n++] = *id;
    return 0;
}

void sieve__route_points_delete(sieve__req *req, json_t *body) {
    static const char *const keys[] = {"points", "filter", NULL};
    static const char *const ignored[] = {"shard_key", NULL};
    sieve__err e;
    sieve__filter *f = NULL;
    id_vec v = {0};
    sieve_collection_info info;
    if (sieve__collection_info(req, &info, &e)) goto fail;
    if (sieve__jv_keys(body, "", keys, ignored, &e)) goto fail;
    json_t *pts = sieve__jv_get(body, "points"), *fj = sieve__jv_get(body, "filter");
    if (!!pts == !!fj) {
        sieve__fail(&e, 400, "request body: expected exactly one of \"points\" (a list of "
                             "ids) or \"filter\"");
        goto fail;
    }
    if (pts) {
        if (parse_id_list(pts, "points", &v.ids, &v.n, &e)) goto fail;
    } else {
        if (sieve__filter_parse(fj, "filter", &f, &e)) goto fail;
        sieve_snapshot *snap = NULL;
        if (open_snapshot(req, &snap, &e)) goto fail;
        int rc = sieve__filter_foreach(f, snap, collect_id, &v);
        sieve_snapshot_close(snap);
        if (v.oom) rc = SIEVE_ENOMEM;
        if (rc < 0) {
            sieve__fail(&e, sieve__status_for(rc), "filter evaluation failed: %s",
                        sieve_strerror(rc));
            goto fail;
        }
    }
    if (v.n) {
        uint64_t deleted = 0;
        int rc = sieve_store_delete(req->srv->store, req->name, v.ids, v.n, &deleted);
        if (rc) {
            free(v.ids);
            sieve__filter_free(f);
            reply_store_error(req, rc, "delete");
            return;
        }
    }
    free(v.ids);
    sieve__filter_free(f);
    reply_update(req);
    return;
fail:
    free(v.ids);
    sieve__filter_free(f);
    sieve__reply_err(req, &e);
}

static int count_row(void *ctx, uint64_t row, const sieve_point_id *id, const char *payload,
                     size_t payload_len) {
    (*(uint64_t *)ctx)++;
    return 0;
}

void sieve__route_points_count(sieve__req *req, json_t *body) {
    static const char *const keys[] = {"filter", "exact", NULL};
    static const char *const ignored[] = {"shard_key", NULL};
    sieve__err e;
    sieve__filter *f = NULL;
    uint64_t count = 0;
    int exact = 1;
    sieve_collection_info info;
    if (sieve__collection_info(req, &info, &e)) goto fail;
    if (body && sieve__jv_keys(body, "", keys, ignored, &e)) goto fail;
    if (body && sieve__jv_bool(body, "exact", "", 1, &exact, &e)) goto fail;
    if (body && sieve__filter_parse(json_object_get(body, "filter"), "filter", &f, &e))
        goto fail;
    if (!f) {
        int rc = sieve_store_count(req->srv->store, req->name, &count);
        if (rc) {
            reply_store_error(req, rc, "count");
            return;
        }
    } else {
        sieve_snapshot *snap = NULL;
        if (open_snapshot(req, &snap, &e)) goto fail;
        int rc = sieve__filter_foreach(f, snap, count_row, &count);
        sieve_snapshot_close(snap);
        if (rc < 0) {
            sieve__fail(&e, sieve__status_for(rc), "filter evaluation failed: %s",
                        sieve_strerror(rc));
            goto fail;
        }
    }
    sieve__filter_free(f);
    char text[64];
    sieve__pathf(text, sizeof text, "{\"count\":%llu}", (unsigned long long)count);
    sieve__reply_ok_raw(req, text, strlen(text)); /* always exact */
    return;
fail:
    sieve__filter_free(f);
    sieve__reply_err(req, &e);
}

/* ---------------------------------------------------------------- scroll */

typedef struct id_row {
    sieve_point_id id;
    uint64_t row;
} id_row;

typedef struct id_rows {
    id_row *v;
    size_t n, cap;
    int oom;
} id_rows;

static int collect_id_row(void *ctx, uint64_t row, const sieve_point_id *id,
                          const char *payload, size_t payload_len) {
    id_rows *v = ctx;
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 1024;
        id_row *p = realloc(v->v, cap * sizeof *p);
        if (!p) {
            v->oom = 1;
            return 1;
        }
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n].id = *id;
    v->v[v->n].row = row;
    v->n++;
    return 0;
}

static int id_row_cmp(const void *a, const void *b) {
    return sieve_point_id_cmp(&((const id_row *)a)->id, &((const id_row *)b)->id);
}

void sieve__route_points_scroll(sieve__req *req, json_t *body) {
    static const char *const keys[] = {"offset", "limit", "filter", "with_payload",
                                       "with_vector", "with_vectors", NULL};
    static const char *const ignored[] = {"shard_key", "consistency", NULL};
    sieve__err e;
    sieve__filter *f = NULL;
    sieve__psel psel;
    memset(&psel, 0, sizeof psel);
    id_rows v = {0};
    sieve_snapshot *snap = NULL;
    float *vecbuf = NULL;
    sieve__sbuf o;
    sieve__sbuf_init(&o);
    int with_vector = 0, has_offset = 0;
    long long limit = 10;
    sieve_point_id offset;
    memset(&offset, 0, sizeof offset);

    sieve_collection_info info;
    if (sieve__collection_info(req, &info, &e)) goto fail;
    if (body) {
        if (sieve__jv_keys(body, "", keys, ignored, &e)) goto fail;
        if (sieve__jv_get(body, "order_by")) {
            sieve__fail(&e, 400, "order_by: not supported (scroll is ordered by id)");
            goto fail;
        }
        if (sieve__jv_int(body, "limit", "", 1, 100000, 10, &limit, &e)) goto fail;
        json_t *oj = sieve__jv_get(body, "offset");
        if (oj) {
            if (sieve__jv_id(oj, "offset", &offset, &e)) goto fail;
            has_offset = 1;
        }
        if (sieve__filter_parse(json_object_get(body, "filter"), "filter", &f, &e)) goto fail;
        if (sieve__psel_parse(json_object_get(body, "with_payload"), "with_payload",
                              SIEVE_PSEL_ALL, &psel, &e))
            goto fail;
        json_t *wv = json_object_get(body, "with_vector");
        if (!wv) wv = json_object_get(body, "with_vectors");
        if (sieve__jv_with_vector(wv, "with_vector", 0, &with_vector, &e)) goto fail;
    } else {
        psel.mode = SIEVE_PSEL_ALL;
    }
    if (open_snapshot(req, &snap, &e)) goto fail;
    uint32_t dim = sieve_snapshot_info(snap)->config.dim;
    vecbuf = malloc(dim * sizeof(float));
    int rc = vecbuf ? sieve__filter_foreach(f, snap, collect_id_row, &v) : SIEVE_ENOMEM;
    if (v.oom) rc = SIEVE_ENOMEM;
    if (rc < 0) {
        sieve__fail(&e, sieve__status_for(rc), "scroll failed: %s", sieve_strerror(rc));
        goto fail;
    }
    qsort(v.v, v.n, sizeof *v.v, id_row_cmp);
    size_t start = 0;
    if (has_offset)
        while (start < v.n && sieve_point_id_cmp(&v.v[start].id, &offset) < 0) start++;
    size_t end = start + (size_t)limit < v.n ? start + (size_t)limit : v.n;
    sieve__sbuf_puts(&o, "{\"points\":[");
    for (size_t i = start; i < end; i++) {
        if (i > start) sieve__sbuf_putc(&o, ',');
        if (write_record(&o, snap, v.v[i].row, &v.v[i].id, &psel, with_vector, vecbuf, dim)) {
            sieve__fail(&e, 500, "cannot read a point");
            goto fail;
        }
    }
    sieve__sbuf_puts(&o, "],\"next_page_offset\":");
    if (end < v.n) sieve__sbuf_id(&o, &v.v[end].id);
    else sieve__sbuf_puts(&o, "null");
    sieve__sbuf_putc(&o, '}');
    if (o.failed) {
        sieve__fail(&e, 500, "out of memory");
        goto fail;
    }
    sieve__reply_ok_raw(req, o.p, o.len);
    goto out;
fail:
    sieve__reply_err(req, &e);
out:
    if (snap) sieve_snapshot_close(snap);
    sieve__sbuf_free(&o);
    sieve__psel_free(&psel);
    sieve__filter_free(f);
    free(v.v);
    free(vecbuf);
}

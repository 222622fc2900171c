/* routes_collections.c: service and collection routes of sieve-server.
 *
 * Owns: GET / (title and version), /healthz, /livez, /readyz, /metrics, and the collection
 * routes (list, create, get info, delete, exists) in Qdrant's shapes. CollectionInfo
 * carries the fields qdrant-client's model requires; sieve has no HNSW index or optimizer,
 * so those sections report fixed placeholder values, and a "sieve" section adds the
 * storage facts (dtype, rows, pages). Must not: search or touch points.
 *
 * Deviation kept on purpose: DELETE of a collection that does not exist answers 200 with
 * result false, as Qdrant does (clients delete before re-creating), not 404.
 *
 * Payload indexes: sieve filters by visiting every row (exactly, with no index), so
 * creating or deleting a payload index is accepted (after checking the request) and does
 * nothing; code written for Qdrant that creates indexes keeps working.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "server.h"

void sieve__route_root(sieve__req *req, json_t *body) {
    char text[160];
    snprintf(text, sizeof text,
             "{\"title\":\"sieve - exact vector search (Qdrant-compatible REST)\","
             "\"version\":\"%s\"}", SIEVE_VERSION);
    sieve__reply_text(req, 200, "application/json", text);
}

void sieve__route_health(sieve__req *req, json_t *body) {
    if (req->route == SIEVE_R_READYZ) {
        if (!atomic_load(&req->srv->ready)) {
            sieve__reply_text(req, 503, "text/plain; charset=utf-8", "not ready");
            return;
        }
        sieve__reply_text(req, 200, "text/plain; charset=utf-8", "all shards are ready");
        return;
    }
    sieve__reply_text(req, 200, "text/plain; charset=utf-8", "healthz check passed");
}

void sieve__route_metrics(sieve__req *req, json_t *body) {
    sieve__sbuf b;
    sieve__sbuf_init(&b);
    sieve__metrics_render(req->srv, &b);
    if (b.failed) {
        sieve__sbuf_free(&b);
        sieve__reply_error(req, 500, "out of memory");
        return;
    }
    sieve__reply_text(req, 200, "text/plain; version=0.0.4; charset=utf-8", b.p);
    sieve__sbuf_free(&b);
}

int sieve__collection_info(sieve__req *req, sieve_collection_info *info, sieve__err *e) {
    int rc = sieve_store_collection_info(req->srv->store, req->name, info);
    if (rc == SIEVE_ENOTFOUND)
        return sieve__fail(e, 404, "collection '%s' not found", req->name);
    if (rc)
        return sieve__fail(e, sieve__status_for(rc), "cannot read collection '%s': %s",
                           req->name, sieve_strerror(rc));
    return 0;
}

void sieve__route_coll_list(sieve__req *req, json_t *body) {
    char **names = NULL;
    size_t n = 0;
    int rc = sieve_store_list_collections(req->srv->store, &names, &n);
    if (rc) {
        sieve__reply_error(req, sieve__status_for(rc), "cannot list collections: %s",
                           sieve_strerror(rc));
        return;
    }
    sieve__sbuf b;
    sieve__sbuf_init(&b);
    sieve__sbuf_puts(&b, "{\"collections\":[");
    for (size_t i = 0; i < n; i++) {
        sieve__sbuf_puts(&b, i ? ",{\"name\":" : "{\"name\":");
        sieve__sbuf_json_str(&b, names[i], strlen(names[i]));
        sieve__sbuf_putc(&b, '}');
    }
    sieve__sbuf_puts(&b, "]}");
    sieve_store_free_names(names, n);
    if (b.failed) sieve__reply_error(req, 500, "out of memory");
    else sieve__reply_ok_raw(req, b.p, b.len);
    sieve__sbuf_free(&b);
}

static json_t *collection_info_json(const sieve_collection_info *info) {
    const sieve_collection_config *c = &info->config;
    json_t *vectors = json_pack("{s:I,s:s,s:b}", "size", (json_int_t)c->dim, "distance",
                                sieve_metric_name(c->metric), "on_disk", 1);
    /* Qdrant's datatype enum has float32, float16 and uint8: bfloat16 collections leave it
     * out there (qdrant-client rejects unknown values) and report it under "sieve". */
    if (vectors && c->dtype != SIEVE_DTYPE_BF16)
        json_object_set_new(vectors, "datatype", json_string(sieve_dtype_name(c->dtype)));
    return json_pack(
        "{s:s,s:s,s:I,s:I,s:i,"
        "s:{s:{s:o,s:i,s:i,s:i,s:b},"
        "s:{s:i,s:i,s:i,s:i,s:b},"
        "s:{s:f,s:i,s:i,s:n,s:n,s:i,s:i,s:n},"
        "s:{s:i,s:i},s:n},"
        "s:{},"
        "s:{s:s,s:I,s:I,s:i,s:I,s:b}}",
        "status", "green", "optimizer_status", "ok",
        "indexed_vectors_count", (json_int_t)0, "points_count", (json_int_t)info->points,
        "segments_count", 1,
        "config",
        "params", "vectors", vectors, "shard_number", 1, "replication_factor", 1,
        "write_consistency_factor", 1, "on_disk_payload", 1,
        "hnsw_config", "m", 0, "ef_construct", 0, "full_scan_threshold", 0,
        "max_indexing_threads", 0, "on_disk", 0,
        "optimizer_config", "deleted_threshold", 0.0, "vacuum_min_vector_number", 0,
        "default_segment_number", 1, "max_segment_size", "memmap_threshold",
        "indexing_threshold", 0, "flush_interval_sec", 0, "max_optimization_threads",
        "wal_config", "wal_capacity_mb", 0, "wal_segments_ahead", 0,
        "quantization_config",
        "payload_schema",
        "sieve", "datatype", sieve_dtype_name(c->dtype), "rows", (json_int_t)info->rows,
        "pages", (json_int_t)info->pages, "rows_per_page", (int)c->rows_per_page,
        "generation", (json_int_t)info->generation, "exact", 1);
}

void sieve__route_coll_get(sieve__req *req, json_t *body) {
    sieve_collection_info info;
    sieve__err e;
    if (sieve__collection_info(req, &info, &e)) {
        sieve__reply_err(req, &e);
        return;
    }
    json_t *j = collection_info_json(&info);
    if (!j) {
        sieve__reply_error(req, 500, "out of memory");
        return;
    }
    sieve__reply_ok_json(req, j);
}

void sieve__route_coll_exists(sieve__req *req, json_t *body) {
    sieve_collection_info info;
    int rc = sieve_store_collection_info(req->srv->store, req->name, &info);
    if (rc && rc != SIEVE_ENOTFOUND) {
        sieve__reply_error(req, sieve__status_for(rc), "cannot read collection '%s': %s",
                           req->name, sieve_strerror(rc));
        return;
    }
    sieve__reply_ok_json(req, json_pack("{s:b}", "exists", rc == 0));
}

void sieve__route_coll_delete(sieve__req *req, json_t *body) {
    int rc = sieve_store_drop_collection(req->srv->store, req->name);
    if (rc && rc != SIEVE_ENOTFOUND) {
        sieve__reply_error(req, sieve__status_for(rc), "cannot delete collection '%s': %s",
                           req->name, sieve_strerror(rc));
        return;
    }
    if (!rc) sieve__log(req->srv, SIEVE_LOG_INFO, "collection '%s' deleted", req->name);
    sieve__reply_ok_json(req, json_boolean(rc == 0));
}

/* Parses the "vectors" section of a create request into cfg. */
static int parse_vectors(const json_t *v, sieve_collection_config *cfg, sieve__err *e) {
    static const char *const keys[] = {"size", "distance", "datatype", "on_disk",
                                       "hnsw_config", "quantization_config",
                                       "multivector_config", NULL};
    if (!v)
        return sieve__fail(e, 400, "vectors: required, e.g. {\"size\": 768, \"distance\": "
                                   "\"Cosine\"}");
    if (!json_is_object(v))
        return sieve__fail(e, 400, "vectors: expected an object {\"size\": N, \"distance\": "
                                   "...}, got %s", sieve__jv_type(v));
    if (!json_object_get(v, "size") && json_object_size(v) > 0) {
        const char *first = json_object_iter_key(json_object_iter((json_t *)v));
        if (json_is_object(json_object_get(v, first)))
            return sieve__fail(e, 400, "vectors: named vectors are not supported (got a "
                                       "vector named '%s'); use {\"size\": N, \"distance\": "
                                       "...}", first);
    }
    if (sieve__jv_keys(v, "vectors", keys, NULL, e)) return -1;
    if (sieve__jv_get(v, "multivector_config"))
        return sieve__fail(e, 400, "vectors.multivector_config: multivectors are not "
                                   "supported");
    if (!sieve__jv_get(v, "size"))
        return sieve__fail(e, 400, "vectors.size: required (an integer from 1 to 65536)");
    long long size = 0;
    if (sieve__jv_int(v, "size", "vectors", 1, 65536, 0, &size, e)) return -1;
    cfg->dim = (uint32_t)size;
    json_t *d = sieve__jv_get(v, "distance");
    if (!d)
        return sieve__fail(e, 400, "vectors.distance: required (Dot, Cosine or Euclid)");
    if (!json_is_string(d))
        return sieve__fail(e, 400, "vectors.distance: expected Dot, Cosine or Euclid, got %s",
                           sieve__jv_type(d));
    sieve_metric metric;
    if (sieve_metric_parse(json_string_value(d), &metric))
        return sieve__fail(e, 400, "vectors.distance: expected Dot, Cosine or Euclid, got "
                                   "\"%.40s\"", json_string_value(d));
    cfg->metric = metric;
    cfg->dtype = SIEVE_DTYPE_F32;
    json_t *t = sieve__jv_get(v, "datatype");
    if (t) {
        sieve_dtype dt;
        if (!json_is_string(t) || sieve_dtype_parse(json_string_value(t), &dt))
            return sieve__fail(e, 400, "vectors.datatype: expected float32, float16 or "
                                       "bfloat16, got %s%.40s%s",
                               json_is_string(t) ? "\"" : sieve__jv_type(t),
                               json_is_string(t) ? json_string_value(t) : "",
                               json_is_string(t) ? "\"" : "");
        cfg->dtype = dt;
    }
    return 0;
}

void sieve__route_coll_create(sieve__req *req, json_t *body) {
    static const char *const keys[] = {"vectors", NULL};
    /* Qdrant settings that have no meaning for an exact, single-node store: accepted and
     * ignored so existing client code keeps working. */
    static const char *const ignored[] = {
        "shard_number", "sharding_method", "replication_factor", "write_consistency_factor",
        "on_disk_payload", "hnsw_config", "wal_config", "optimizers_config",
        "quantization_config", "strict_mode_config", "metadata", "sparse_vectors",
        "init_from", NULL};
    sieve__err e;
    sieve_collection_config cfg;
    memset(&cfg, 0, sizeof cfg);
    if (sieve__jv_keys(body, "", keys, ignored, &e)) goto fail;
    json_t *sv = sieve__jv_get(body, "sparse_vectors");
    if (sv && !(json_is_object(sv) && json_object_size(sv) == 0)) {
        sieve__fail(&e, 400, "sparse_vectors: sparse vectors are not supported");
        goto fail;
    }
    if (sieve__jv_get(body, "init_from")) {
        sieve__fail(&e, 400, "init_from: copying from another collection is not supported");
        goto fail;
    }
    if (parse_vectors(sieve__jv_get(body, "vectors"), &cfg, &e)) goto fail;
    snprintf(cfg.name, sizeof cfg.name, "%s", req->name);
    int rc = sieve_store_create_collection(req->srv->store, &cfg);
    if (rc == SIEVE_EEXIST) {
        sieve__fail(&e, 409, "collection '%s' already exists", req->name);
        goto fail;
    }
    if (rc) {
        sieve__fail(&e, sieve__status_for(rc), "cannot create collection '%s': %s", req->name,
                    sieve_strerror(rc));
        goto fail;
    }
    sieve__log(req->srv, SIEVE_LOG_INFO, "collection '%s' created (%u x %s, %s)", req->name,
               cfg.dim, sieve_dtype_name(cfg.dtype), sieve_metric_name(cfg.metric));
    sieve__reply_ok_json(req, json_true());
    return;
fail:
    sieve__reply_err(req, &e);
}

void sieve__route_index(sieve__req *req, json_t *body) {
    static const char *const keys[] = {"field_name", "field_schema", NULL};
    sieve__err e;
    sieve_collection_info info;
    if (sieve__collection_info(req, &info, &e)) goto fail;
    if (req->route == SIEVE_R_INDEX_CREATE) {
        if (sieve__jv_keys(body, "", keys, NULL, &e)) goto fail;
        json_t *f = sieve__jv_get(body, "field_name");
        if (!f || !json_is_string(f) || json_string_length(f) == 0) {
            sieve__fail(&e, 400, "field_name: required (the payload field to index)");
            goto fail;
        }
        json_t *sc = sieve__jv_get(body, "field_schema");
        if (sc && !json_is_string(sc) && !json_is_object(sc)) {
            sieve__fail(&e, 400, "field_schema: expected a schema name or object, got %s",
                        sieve__jv_type(sc));
            goto fail;
        }
    }
    unsigned long long op = atomic_fetch_add(&req->srv->next_op_id, 1);
    char text[96];
    snprintf(text, sizeof text, "{\"operation_id\":%llu,\"status\":\"completed\"}", op);
    sieve__reply_ok_raw(req, text, strlen(text));
    return;
fail:
    sieve__reply_err(req, &e);
}

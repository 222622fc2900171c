/* collections.c: collection configs (the "coll" and "meta" databases), create, drop, list,
 * info, and rebuilding every collection's view from the row table at open.
 * Must not: touch vector pages except to delete them on drop; wait for the writer anywhere
 * but through sieve__submit. */
#include <stdio.h>
#include <stdlib.h>

#include "store_internal.h"

#define CFG_BYTES 24
#define PAGE_TARGET (1u << 20)
#define PAGE_MAX_BYTES (256ull << 20)

uint32_t sieve__default_rows_per_page(uint32_t dim, sieve_dtype dtype) {
    uint64_t row = (uint64_t)dim * sieve_dtype_size(dtype) + 4;
    uint32_t rpp = 128;
    while ((uint64_t)rpp * 2 * row <= PAGE_TARGET && rpp * 2 <= SIEVE__RPP_MAX) rpp *= 2;
    return rpp;
}

size_t sieve__page_bytes(const sieve_collection_config *cfg, uint32_t psize) {
    size_t b = (size_t)cfg->rows_per_page * ((size_t)cfg->dim * sieve_dtype_size(cfg->dtype) + 4);
    return b < psize ? psize : b;
}

static void cfg_encode(const sieve_collection_config *cfg, uint32_t cid, uint8_t out[CFG_BYTES]) {
    sieve__put_be32(out, SIEVE__FORMAT);
    sieve__put_be32(out + 4, cid);
    sieve__put_be32(out + 8, cfg->dim);
    sieve__put_be32(out + 12, (uint32_t)cfg->metric);
    sieve__put_be32(out + 16, (uint32_t)cfg->dtype);
    sieve__put_be32(out + 20, cfg->rows_per_page);
}

/* 1 if cfg's numbers are acceptable (name aside). */
static int cfg_numbers_valid(const sieve_collection_config *cfg) {
    if (cfg->dim < 1 || cfg->dim > SIEVE__DIM_MAX) return 0;
    if (!sieve_metric_name(cfg->metric) || !sieve_dtype_size(cfg->dtype)) return 0;
    uint32_t rpp = cfg->rows_per_page;
    if (rpp == 0 || rpp % 128 || rpp > SIEVE__RPP_MAX) return 0;
    uint64_t bytes = (uint64_t)rpp * ((uint64_t)cfg->dim * sieve_dtype_size(cfg->dtype) + 4);
    return bytes <= PAGE_MAX_BYTES;
}

static int cfg_decode(const MDB_val *name, const MDB_val *val, sieve_collection_config *cfg,
                      uint32_t *cid) {
    if (val->mv_size != CFG_BYTES || name->mv_size < 1 || name->mv_size > SIEVE_NAME_MAX)
        return SIEVE_ECORRUPT;
    const uint8_t *p = val->mv_data;
    if (sieve__get_be32(p) != SIEVE__FORMAT) return SIEVE_ECORRUPT;
    memset(cfg, 0, sizeof *cfg);
    memcpy(cfg->name, name->mv_data, name->mv_size);
    *cid = sieve__get_be32(p + 4);
    cfg->dim = sieve__get_be32(p + 8);
    cfg->metric = (sieve_metric)sieve__get_be32(p + 12);
    cfg->dtype = (sieve_dtype)sieve__get_be32(p + 16);
    cfg->rows_per_page = sieve__get_be32(p + 20);
    if (!sieve_store_name_valid(cfg->name) || !cfg_numbers_valid(cfg) || *cid == 0)
        return SIEVE_ECORRUPT;
    return 0;
}

int sieve__coll_get(sieve_store *st, MDB_txn *txn, const char *name,
                    sieve_collection_config *cfg, uint32_t *cid) {
    MDB_val k = {strlen(name), (void *)name}, v;
    int rc = mdb_get(txn, st->dbi_coll, &k, &v);
    if (rc == MDB_NOTFOUND) return SIEVE_ENOTFOUND;
    if (rc) return sieve__mdb_err(rc);
    return cfg_decode(&k, &v, cfg, cid);
}

/* ---------------------------------------------------------------- open */

/* Rebuilds one collection's view from its row table. */
static int load_one(sieve_store *st, MDB_txn *txn, const sieve_collection_config *cfg,
                    uint32_t cid, sieve__view **out) {
    sieve__view *v = sieve__view_new(cfg->name, cfg, cid);
    if (!v) return SIEVE_ENOMEM;
    MDB_cursor *cur;
    int rc = mdb_cursor_open(txn, st->dbi_rows, &cur);
    if (rc) { sieve__view_unref(v); return sieve__mdb_err(rc); }
    sieve__rkey rk = sieve__rowkey(cid, 0);
    MDB_val k = {sizeof rk.b, rk.b}, d;
    uint64_t rows = 0, live = 0;
    rc = mdb_cursor_get(cur, &k, &d, MDB_SET_RANGE);
    while (rc == 0) {
        if (k.mv_size != 12 || sieve__get_be32(k.mv_data) != cid) break;
        uint64_t row = sieve__get_be64((const uint8_t *)k.mv_data + 4);
        const uint8_t *val = d.mv_data;
        if (row != rows || d.mv_size != SIEVE__ROWVAL || val[SIEVE__IDKEY] > 1) {
            rc = SIEVE_ECORRUPT;
            break;
        }
        if ((rc = sieve__view_reserve(v, rows + 1))) break;
        if (val[SIEVE__IDKEY]) live++;
        else v->deleted[row / 64] |= 1ull << (row % 64);
        rows++;
        rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT);
    }
    mdb_cursor_close(cur);
    if (rc == MDB_NOTFOUND) rc = 0;
    if (rc) { sieve__view_unref(v); return sieve__mdb_err(rc); }
    uint32_t rpp = cfg->rows_per_page;
    v->info.rows = rows;
    v->info.points = live;
    v->info.pages = (rows + rpp - 1) / rpp;
    for (uint64_t p = 0; p < v->info.pages; p++) v->page_gen[p] = 1;
    if (v->info.pages) { /* the last page must be there, with the expected size */
        sieve__rkey pk = sieve__rowkey(cid, v->info.pages - 1);
        MDB_val key = {sizeof pk.b, pk.b}, val;
        rc = mdb_get(txn, st->dbi_pages, &key, &val);
        if (rc == 0 && val.mv_size != sieve__page_bytes(cfg, st->psize)) rc = SIEVE_ECORRUPT;
        if (rc) { sieve__view_unref(v); return rc == MDB_NOTFOUND ? SIEVE_ECORRUPT : sieve__mdb_err(rc); }
    }
    *out = v;
    return 0;
}

int sieve__load_views(sieve_store *st, MDB_txn *txn) {
    MDB_cursor *cur;
    int rc = mdb_cursor_open(txn, st->dbi_coll, &cur);
    if (rc) return sieve__mdb_err(rc);
    MDB_val k, d;
    rc = mdb_cursor_get(cur, &k, &d, MDB_FIRST);
    while (rc == 0) {
        sieve_collection_config cfg;
        uint32_t cid;
        sieve__view *v = NULL;
        if ((rc = cfg_decode(&k, &d, &cfg, &cid))) break;
        if ((rc = load_one(st, txn, &cfg, cid, &v))) break;
        if (st->n_entries == st->cap_entries) {
            size_t cap = st->cap_entries ? st->cap_entries * 2 : 8;
            sieve__entry *e = realloc(st->entries, cap * sizeof *e);
            if (!e) { sieve__view_unref(v); rc = SIEVE_ENOMEM; break; }
            st->entries = e;
            st->cap_entries = cap;
        }
        /* "coll" iterates in memcmp order, which is strcmp order: entries stay sorted */
        snprintf(st->entries[st->n_entries].name, sizeof st->entries[0].name, "%s", cfg.name);
        st->entries[st->n_entries++].view = v;
        rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT);
    }
    mdb_cursor_close(cur);
    if (rc == MDB_NOTFOUND) rc = 0;
    return sieve__mdb_err(rc);
}

/* ---------------------------------------------------------------- writer side */

int sieve__apply_create(sieve_store *st, MDB_txn *txn, sieve__req *req) {
    sieve_collection_config old;
    uint32_t cid;
    int rc = sieve__coll_get(st, txn, req->cfg.name, &old, &cid);
    if (rc == 0) return SIEVE_EEXIST;
    if (rc != SIEVE_ENOTFOUND) return rc;
    MDB_val mk = {8, "next_cid"}, mv;
    rc = mdb_get(txn, st->dbi_meta, &mk, &mv);
    if (rc == MDB_NOTFOUND) cid = 1;
    else if (rc) return sieve__mdb_err(rc);
    else if (mv.mv_size != 4) return SIEVE_ECORRUPT;
    else cid = sieve__get_be32(mv.mv_data);
    if (cid == 0 || cid == UINT32_MAX) return SIEVE_ERANGE; /* ids exhausted */
    uint8_t next[4], rec[CFG_BYTES];
    sieve__put_be32(next, cid + 1);
    mv.mv_size = 4;
    mv.mv_data = next;
    if ((rc = mdb_put(txn, st->dbi_meta, &mk, &mv, 0))) return sieve__mdb_err(rc);
    cfg_encode(&req->cfg, cid, rec);
    MDB_val k = {strlen(req->cfg.name), req->cfg.name}, v = {CFG_BYTES, rec};
    if ((rc = mdb_put(txn, st->dbi_coll, &k, &v, MDB_NOOVERWRITE))) return sieve__mdb_err(rc);
    req->cid = cid;
    return 0;
}

/* Deletes every key of dbi that starts with cid. */
static int delete_range(MDB_txn *txn, MDB_dbi dbi, uint32_t cid) {
    MDB_cursor *cur;
    int rc = mdb_cursor_open(txn, dbi, &cur);
    if (rc) return rc;
    uint8_t prefix[4];
    sieve__put_be32(prefix, cid);
    MDB_val k = {4, prefix}, d;
    rc = mdb_cursor_get(cur, &k, &d, MDB_SET_RANGE);
    while (rc == 0 && k.mv_size >= 4 && sieve__get_be32(k.mv_data) == cid) {
        if ((rc = mdb_cursor_del(cur, 0))) break;
        rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT);
    }
    mdb_cursor_close(cur);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

int sieve__apply_drop(sieve_store *st, MDB_txn *txn, sieve__req *req) {
    sieve_collection_config cfg;
    uint32_t cid;
    int rc = sieve__coll_get(st, txn, req->name, &cfg, &cid);
    if (rc) return rc;
    MDB_dbi dbis[] = {st->dbi_pages, st->dbi_ids, st->dbi_rows, st->dbi_payloads, st->dbi_free};
    for (size_t i = 0; i < sizeof dbis / sizeof dbis[0]; i++)
        if ((rc = delete_range(txn, dbis[i], cid))) return sieve__mdb_err(rc);
    MDB_val k = {strlen(req->name), req->name};
    if ((rc = mdb_del(txn, st->dbi_coll, &k, NULL))) return sieve__mdb_err(rc);
    req->cid = cid;
    return 0;
}

/* ---------------------------------------------------------------- public */

int sieve_store_create_collection(sieve_store *st, const sieve_collection_config *cfg) {
    if (!st || !cfg) return SIEVE_EINVAL;
    sieve__req req;
    memset(&req, 0, sizeof req);
    req.kind = SIEVE__REQ_CREATE;
    req.cfg = *cfg;
    if (!sieve_store_name_valid(req.cfg.name)) return SIEVE_EINVAL;
    if (req.cfg.dim < 1 || req.cfg.dim > SIEVE__DIM_MAX || !sieve_dtype_size(req.cfg.dtype))
        return SIEVE_EINVAL;
    if (!req.cfg.rows_per_page)
        req.cfg.rows_per_page = sieve__default_rows_per_page(req.cfg.dim, req.cfg.dtype);
    if (!cfg_numbers_valid(&req.cfg)) return SIEVE_EINVAL;
    snprintf(req.name, sizeof req.name, "%s", req.cfg.name);
    return sieve__submit(st, &req);
}

int sieve_store_drop_collection(sieve_store *st, const char *name) {
    if (!st || !sieve_store_name_valid(name)) return SIEVE_EINVAL;
    sieve__req req;
    memset(&req, 0, sizeof req);
    req.kind = SIEVE__REQ_DROP;
    snprintf(req.name, sizeof req.name, "%s", name);
    return sieve__submit(st, &req);
}

void sieve_store_free_names(char **names, size_t count) {
    if (!names) return;
    for (size_t i = 0; i < count; i++) free(names[i]);
    free(names);
}

int sieve_store_list_collections(sieve_store *st, char ***names, size_t *count) {
    if (!st || !names || !count) return SIEVE_EINVAL;
    *names = NULL;
    *count = 0;
    pthread_mutex_lock(&st->mu);
    size_t n = st->n_entries;
    char **out = calloc(n ? n : 1, sizeof *out);
    int rc = out ? 0 : SIEVE_ENOMEM;
    for (size_t i = 0; i < n && !rc; i++) /* entries are sorted by name */
        if (!(out[i] = strdup(st->entries[i].name))) rc = SIEVE_ENOMEM;
    pthread_mutex_unlock(&st->mu);
    if (rc) {
        sieve_store_free_names(out, n);
        return rc;
    }
    *names = out;
    *count = n;
    return 0;
}

int sieve_store_collection_info(sieve_store *st, const char *name, sieve_collection_info *out) {
    if (!st || !out || !sieve_store_name_valid(name)) return SIEVE_EINVAL;
    sieve__view *v = sieve__view_get(st, name, NULL);
    if (!v) return SIEVE_ENOTFOUND;
    *out = v->info;
    sieve__view_unref(v);
    return 0;
}

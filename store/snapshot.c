/* snapshot.c: read snapshots: one LMDB read transaction, the collection's view as of that
 * transaction, and a sieve_matrix whose page pointers come from that transaction's map.
 * Must not: write, or hand out pointers that outlive sieve_snapshot_close.
 */
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

struct sieve_snapshot {
    sieve_store *st;
    sieve__view *view;
    MDB_txn *txn;
    sieve_matrix m;
    const void **pages;
    const float **norms;
    size_t row_bytes;
};

/* Opens a read transaction that sees exactly the transaction *view describes: when the
 * writer has committed but not yet published, wait for its publish and take the new view. */
static int begin_consistent(sieve_store *st, const char *name, sieve__view **view,
                            MDB_txn **txn) {
    for (;;) {
        uint64_t published;
        sieve__view *v = sieve__view_get(st, name, &published);
        if (!v) return SIEVE_ENOTFOUND;
        MDB_txn *t;
        int rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &t);
        if (rc) {
            sieve__view_unref(v);
            return sieve__mdb_err(rc);
        }
        if (mdb_txn_id(t) == published) {
            *view = v;
            *txn = t;
            return 0;
        }
        mdb_txn_abort(t);
        sieve__view_unref(v);
        pthread_mutex_lock(&st->mu);
        while (st->published_txnid == published) pthread_cond_wait(&st->publish_cv, &st->mu);
        pthread_mutex_unlock(&st->mu);
    }
}

void sieve_snapshot_close(sieve_snapshot *snap) {
    if (!snap) return;
    if (snap->txn) mdb_txn_abort(snap->txn);
    sieve__readers_leave(snap->st);
    sieve__view_unref(snap->view);
    free(snap->pages);
    free(snap->norms);
    free(snap);
}

int sieve_snapshot_open(sieve_store *st, const char *collection, sieve_snapshot **out) {
    if (!out) return SIEVE_EINVAL;
    *out = NULL;
    if (!st || !sieve_store_name_valid(collection)) return SIEVE_EINVAL;
    sieve_snapshot *s = calloc(1, sizeof *s);
    if (!s) return SIEVE_ENOMEM;
    s->st = st;
    sieve__readers_enter(st);
    int rc = begin_consistent(st, collection, &s->view, &s->txn);
    if (rc) {
        sieve_snapshot_close(s);
        return rc;
    }
    const sieve_collection_info *in = &s->view->info;
    const sieve_collection_config *cfg = &in->config;
    uint32_t cid = in->collection_id;
    s->row_bytes = (size_t)cfg->dim * sieve_dtype_size(cfg->dtype);
    size_t vec_bytes = (size_t)cfg->rows_per_page * s->row_bytes;
    size_t blob = sieve__page_bytes(cfg, st->psize);
    uint64_t n_pages = in->pages;
    if (n_pages) {
        s->pages = malloc(n_pages * sizeof *s->pages);
        s->norms = malloc(n_pages * sizeof *s->norms);
        if (!s->pages || !s->norms) {
            sieve_snapshot_close(s);
            return SIEVE_ENOMEM;
        }
        MDB_cursor *cur;
        if ((rc = mdb_cursor_open(s->txn, st->dbi_pages, &cur))) {
            sieve_snapshot_close(s);
            return sieve__mdb_err(rc);
        }
        sieve__rkey pk = sieve__rowkey(cid, 0);
        MDB_val k = {sizeof pk.b, pk.b}, d;
        rc = mdb_cursor_get(cur, &k, &d, MDB_SET_RANGE);
        for (uint64_t p = 0; p < n_pages && !rc; p++) {
            pk = sieve__rowkey(cid, p);
            if (k.mv_size != sizeof pk.b || memcmp(k.mv_data, pk.b, sizeof pk.b) ||
                d.mv_size != blob) {
                rc = SIEVE_ECORRUPT;
                break;
            }
            s->pages[p] = d.mv_data;
            s->norms[p] = (const float *)((const uint8_t *)d.mv_data + vec_bytes);
            if (p + 1 < n_pages) rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT);
        }
        mdb_cursor_close(cur);
        if (rc) {
            sieve_snapshot_close(s);
            return rc == MDB_NOTFOUND ? SIEVE_ECORRUPT : sieve__mdb_err(rc);
        }
    }
    s->m.dtype = cfg->dtype;
    s->m.dim = cfg->dim;
    s->m.n_rows = in->rows;
    s->m.rows_per_page = cfg->rows_per_page;
    s->m.pages = (const void *const *)s->pages;
    s->m.norm_pages = (const float *const *)s->norms;
    s->m.deleted = s->view->deleted;
    s->m.allowed = NULL;
    *out = s;
    return 0;
}

int sieve_snapshot_is_current(sieve_snapshot *snap) {
    if (!snap) return 0;
    sieve_store *st = snap->st;
    pthread_mutex_lock(&st->map_mu);
    int growing = st->grow_waiting;
    pthread_mutex_unlock(&st->map_mu);
    if (growing) return 0;
    /* views are immutable and replaced by every commit that touches the collection; snap
       holds a reference to its own, so the address cannot be reused while it is open */
    sieve__view *v = sieve__view_get(st, snap->view->info.config.name, NULL);
    int same = v == snap->view;
    if (v) sieve__view_unref(v);
    return same;
}

const sieve_collection_info *sieve_snapshot_info(const sieve_snapshot *snap) {
    return snap ? &snap->view->info : NULL;
}

const sieve_matrix *sieve_snapshot_matrix(const sieve_snapshot *snap) {
    return snap ? &snap->m : NULL;
}

const uint64_t *sieve_snapshot_page_generations(const sieve_snapshot *snap) {
    return snap ? snap->view->page_gen : NULL;
}

static int row_deleted(const sieve_snapshot *s, uint64_t row) {
    return (s->view->deleted[row / 64] >> (row % 64)) & 1;
}

/* The id in a "rows" value (SIEVE__ROWVAL bytes: id key, live flag) of a live row. */
static int id_of_rowval(const uint8_t *v, sieve_point_id *out) {
    if (v[SIEVE__IDKEY] != 1) return SIEVE_ECORRUPT;
    return sieve__id_from_key(v, out);
}

int sieve_snapshot_row_id(sieve_snapshot *snap, uint64_t row, sieve_point_id *out) {
    if (!snap || !out) return SIEVE_EINVAL;
    if (row >= snap->view->info.rows) return SIEVE_ERANGE;
    if (row_deleted(snap, row)) return SIEVE_ENOTFOUND;
    sieve__rkey rk = sieve__rowkey(snap->view->info.collection_id, row);
    MDB_val k = {sizeof rk.b, rk.b}, d;
    int rc = mdb_get(snap->txn, snap->st->dbi_rows, &k, &d);
    if (rc) return rc == MDB_NOTFOUND ? SIEVE_ECORRUPT : sieve__mdb_err(rc);
    if (d.mv_size != SIEVE__ROWVAL) return SIEVE_ECORRUPT;
    return id_of_rowval(d.mv_data, out);
}

/* ---------------------------------------------------------------- row -> id cache */

#define IDC_CHUNK 64 /* rows read together (rows per page are multiples of 128) */
#define IDC_COLLECTIONS 4

/* One collection's cached row values. */
typedef struct idc_coll {
    uint32_t cid, rpp;
    uint64_t last_use;  /* of the cache's lookups, for eviction */
    size_t n_pages;     /* entries of vals */
    uint8_t **vals;     /* per page: rpp row values (SIEVE__ROWVAL bytes each), or NULL */
    size_t n_chunks;    /* entries of gen and got */
    uint64_t *gen;      /* per 64-row chunk: page generation it was read at; 0: not read */
    uint8_t *got;       /* per chunk: rows read (fewer than 64 in a last, partial chunk) */
} idc_coll;

struct sieve_idcache {
    idc_coll coll[IDC_COLLECTIONS]; /* cid 0: a free entry (collection ids start at 1) */
    uint64_t uses;
    size_t bytes, max_bytes;
};

int sieve_idcache_new(size_t max_bytes, sieve_idcache **out) {
    if (!out) return SIEVE_EINVAL;
    *out = calloc(1, sizeof **out);
    if (!*out) return SIEVE_ENOMEM;
    (*out)->max_bytes = max_bytes;
    return 0;
}

static void idc_coll_clear(sieve_idcache *c, idc_coll *e) {
    for (size_t p = 0; p < e->n_pages; p++) {
        if (e->vals[p]) c->bytes -= (size_t)e->rpp * SIEVE__ROWVAL;
        free(e->vals[p]);
    }
    free(e->vals);
    free(e->gen);
    free(e->got);
    memset(e, 0, sizeof *e);
}

void sieve_idcache_free(sieve_idcache *c) {
    if (!c) return;
    for (int i = 0; i < IDC_COLLECTIONS; i++) idc_coll_clear(c, &c->coll[i]);
    free(c);
}

/* The entry of collection cid (rows per page rpp), taking the least recently used one
 * when it has none (collection ids start at 1, so cid 0 marks a free entry). */
static idc_coll *idc_coll_of(sieve_idcache *c, uint32_t cid, uint32_t rpp) {
    idc_coll *e = NULL, *old = &c->coll[0];
    for (int i = 0; i < IDC_COLLECTIONS; i++) {
        if (c->coll[i].cid == cid) e = &c->coll[i];
        if (c->coll[i].last_use < old->last_use) old = &c->coll[i];
    }
    if (!e || e->rpp != rpp) {
        if (!e) e = old;
        idc_coll_clear(c, e);
        e->cid = cid;
        e->rpp = rpp;
    }
    e->last_use = ++c->uses;
    return e;
}

/* Makes room for the pages and chunks of rows rows (new ones empty). 0 or SIEVE_ENOMEM. */
static int idc_reserve(idc_coll *e, uint64_t rows) {
    const size_t np = (size_t)((rows + e->rpp - 1) / e->rpp), nc = np * (e->rpp / IDC_CHUNK);
    if (np > e->n_pages) {
        uint8_t **v = realloc(e->vals, np * sizeof *v);
        if (!v) return SIEVE_ENOMEM;
        for (size_t p = e->n_pages; p < np; p++) v[p] = NULL;
        e->vals = v;
        e->n_pages = np;
    }
    if (nc > e->n_chunks) {
        uint64_t *g = realloc(e->gen, nc * sizeof *g);
        if (!g) return SIEVE_ENOMEM;
        e->gen = g;
        uint8_t *n = realloc(e->got, nc);
        if (!n) return SIEVE_ENOMEM;
        e->got = n;
        for (size_t i = e->n_chunks; i < nc; i++) {
            g[i] = 0;
            n[i] = 0;
        }
        e->n_chunks = nc;
    }
    return 0;
}

/* Reads the values of the rows of chunk ch as of snap (one cursor pass, at most 64 rows,
 * all in one page). Any error leaves the chunk unread; the caller then asks the database
 * directly. */
static int idc_fill(sieve_snapshot *snap, sieve_idcache *c, idc_coll *e, uint64_t ch,
                    uint64_t gen) {
    const uint64_t rows = snap->view->info.rows;
    const uint64_t first = ch * IDC_CHUNK, p = first / e->rpp;
    const uint64_t end = first + IDC_CHUNK < rows ? first + IDC_CHUNK : rows;
    const size_t page_bytes = (size_t)e->rpp * SIEVE__ROWVAL;
    if (!e->vals[p]) {
        if (c->bytes + page_bytes > c->max_bytes) return SIEVE_ENOMEM;
        if (!(e->vals[p] = malloc(page_bytes))) return SIEVE_ENOMEM;
        c->bytes += page_bytes;
    }
    e->gen[ch] = 0;
    uint8_t *dst = e->vals[p] + (first - p * e->rpp) * SIEVE__ROWVAL;
    MDB_cursor *cur;
    int rc = mdb_cursor_open(snap->txn, snap->st->dbi_rows, &cur);
    if (rc) return sieve__mdb_err(rc);
    sieve__rkey rk = sieve__rowkey(e->cid, first);
    MDB_val k = {sizeof rk.b, rk.b}, d;
    rc = mdb_cursor_get(cur, &k, &d, MDB_SET_RANGE);
    int bad = 0;
    for (uint64_t r = first; r < end && !rc; r++) {
        rk = sieve__rowkey(e->cid, r);
        if (k.mv_size != sizeof rk.b || memcmp(k.mv_data, rk.b, sizeof rk.b) ||
            d.mv_size != SIEVE__ROWVAL) {
            bad = 1;
            break;
        }
        memcpy(dst + (r - first) * SIEVE__ROWVAL, d.mv_data, SIEVE__ROWVAL);
        if (r + 1 < end) rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT);
    }
    mdb_cursor_close(cur);
    if (bad || rc) return SIEVE_ECORRUPT; /* a row missing or malformed: see the database */
    e->gen[ch] = gen;
    e->got[ch] = (uint8_t)(end - first);
    return 0;
}

int sieve_snapshot_row_id_cached(sieve_snapshot *snap, sieve_idcache *c, uint64_t row,
                                 sieve_point_id *out) {
    if (!c) return sieve_snapshot_row_id(snap, row, out);
    if (!snap || !out) return SIEVE_EINVAL;
    const sieve_collection_info *in = &snap->view->info;
    if (row >= in->rows) return SIEVE_ERANGE;
    if (row_deleted(snap, row)) return SIEVE_ENOTFOUND;
    idc_coll *e = idc_coll_of(c, in->collection_id, in->config.rows_per_page);
    const uint64_t p = row / e->rpp, ch = row / IDC_CHUNK;
    const uint64_t gen = snap->view->page_gen[p];
    if (idc_reserve(e, in->rows) ||
        ((gen == 0 || e->gen[ch] != gen || row - ch * IDC_CHUNK >= e->got[ch]) &&
         idc_fill(snap, c, e, ch, gen)))
        return sieve_snapshot_row_id(snap, row, out);
    return id_of_rowval(e->vals[p] + (row - p * e->rpp) * SIEVE__ROWVAL, out);
}

void sieve_snapshot_row_id_prefetch(const sieve_snapshot *snap, const sieve_idcache *c,
                                    uint64_t row) {
    if (!snap || !c) return;
    const sieve_collection_info *in = &snap->view->info;
    if (row >= in->rows) return;
    for (int i = 0; i < IDC_COLLECTIONS; i++) {
        const idc_coll *e = &c->coll[i];
        if (e->cid != in->collection_id || e->rpp != in->config.rows_per_page) continue;
        const uint64_t p = row / e->rpp;
        if (p < e->n_pages && e->vals[p])
            __builtin_prefetch(e->vals[p] + (row - p * e->rpp) * SIEVE__ROWVAL);
        return;
    }
}

int sieve_snapshot_id_row(sieve_snapshot *snap, const sieve_point_id *id, uint64_t *row) {
    if (!snap || !id || !row) return SIEVE_EINVAL;
    if (id->kind != SIEVE_ID_NUM && id->kind != SIEVE_ID_UUID) return SIEVE_EINVAL;
    uint8_t ik[4 + SIEVE__IDKEY];
    sieve__put_be32(ik, snap->view->info.collection_id);
    sieve__id_key(id, ik + 4);
    MDB_val k = {sizeof ik, ik}, d;
    int rc = mdb_get(snap->txn, snap->st->dbi_ids, &k, &d);
    if (rc) return sieve__mdb_err(rc);
    if (d.mv_size != 8) return SIEVE_ECORRUPT;
    uint64_t r = sieve__get_be64(d.mv_data);
    if (r >= snap->view->info.rows || row_deleted(snap, r)) return SIEVE_ECORRUPT;
    *row = r;
    return 0;
}

int sieve_snapshot_row_payload(sieve_snapshot *snap, uint64_t row, const char **json,
                               size_t *len) {
    if (!snap || !json || !len) return SIEVE_EINVAL;
    *json = NULL;
    *len = 0;
    if (row >= snap->view->info.rows) return SIEVE_ERANGE;
    sieve__rkey rk = sieve__rowkey(snap->view->info.collection_id, row);
    MDB_val k = {sizeof rk.b, rk.b}, d;
    int rc = mdb_get(snap->txn, snap->st->dbi_payloads, &k, &d);
    if (rc == MDB_NOTFOUND) return 0;
    if (rc) return sieve__mdb_err(rc);
    *json = d.mv_data;
    *len = d.mv_size;
    return 0;
}

int sieve_snapshot_row_vector(sieve_snapshot *snap, uint64_t row, float *out) {
    if (!snap || !out) return SIEVE_EINVAL;
    if (row >= snap->view->info.rows) return SIEVE_ERANGE;
    uint32_t rpp = snap->m.rows_per_page;
    const uint8_t *page = snap->pages[row / rpp];
    sieve_convert_to_f32(snap->m.dtype, page + (row % rpp) * snap->row_bytes, out, snap->m.dim);
    return 0;
}

int sieve_snapshot_foreach(sieve_snapshot *snap, sieve_row_visitor fn, void *ctx) {
    if (!snap || !fn) return SIEVE_EINVAL;
    uint32_t cid = snap->view->info.collection_id;
    uint64_t rows = snap->view->info.rows;
    MDB_cursor *rc_cur = NULL, *pc_cur = NULL;
    int rc = mdb_cursor_open(snap->txn, snap->st->dbi_rows, &rc_cur);
    if (!rc) rc = mdb_cursor_open(snap->txn, snap->st->dbi_payloads, &pc_cur);
    if (rc) {
        if (rc_cur) mdb_cursor_close(rc_cur);
        return sieve__mdb_err(rc);
    }
    sieve__rkey start = sieve__rowkey(cid, 0);
    MDB_val rk = {sizeof start.b, start.b}, rd, pk = rk, pd;
    int rrc = mdb_cursor_get(rc_cur, &rk, &rd, MDB_SET_RANGE);
    int prc = mdb_cursor_get(pc_cur, &pk, &pd, MDB_SET_RANGE);
    uint64_t prow = UINT64_MAX; /* row of the payload cursor, UINT64_MAX past the end */
    if (prc == 0 && pk.mv_size == 12 && sieve__get_be32(pk.mv_data) == cid)
        prow = sieve__get_be64((const uint8_t *)pk.mv_data + 4);
    rc = 0;
    while (rrc == 0 && rk.mv_size == 12 && sieve__get_be32(rk.mv_data) == cid) {
        uint64_t row = sieve__get_be64((const uint8_t *)rk.mv_data + 4);
        if (row >= rows) break; /* the view ends here */
        const uint8_t *val = rd.mv_data;
        if (rd.mv_size != SIEVE__ROWVAL) { rc = SIEVE_ECORRUPT; break; }
        if (val[SIEVE__IDKEY] == 1 && !row_deleted(snap, row)) {
            while (prow < row) {
                prc = mdb_cursor_get(pc_cur, &pk, &pd, MDB_NEXT);
                prow = (prc == 0 && pk.mv_size == 12 && sieve__get_be32(pk.mv_data) == cid)
                           ? sieve__get_be64((const uint8_t *)pk.mv_data + 4)
                           : UINT64_MAX;
            }
            sieve_point_id id;
            if ((rc = sieve__id_from_key(val, &id))) break;
            int stop = prow == row ? fn(ctx, row, &id, pd.mv_data, pd.mv_size)
                                   : fn(ctx, row, &id, NULL, 0);
            if (stop) { rc = stop; break; }
        }
        rrc = mdb_cursor_get(rc_cur, &rk, &rd, MDB_NEXT);
    }
    if (!rc && rrc && rrc != MDB_NOTFOUND) rc = sieve__mdb_err(rrc);
    mdb_cursor_close(rc_cur);
    mdb_cursor_close(pc_cur);
    return rc;
}

/* points.c: upsert, delete, get and count.
 *
 * Owns: checking and encoding a batch in the caller's thread (finite values, dimensions,
 * payload JSON, duplicate ids, Cosine normalisation, dtype conversion, squared norms; large
 * batches are split over a few short-lived threads), and the writer-side application of
 * upserts and deletes to the "ids", "rows", "payloads", "free" and "pages" databases.
 * Must not: commit, wait for the writer other than through sieve__submit, or keep pointers
 * into LMDB past the transaction that produced them.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "store_internal.h"

/* ---------------------------------------------------------------- a small parallel for */

/* Elements (vector values) per helper thread before a batch is split. */
#define PAR_MIN_ELEMS (1u << 18)
#define PAR_MAX_THREADS 8

typedef void (*range_fn)(void *ctx, size_t lo, size_t hi, unsigned part);

typedef struct par_job {
    range_fn fn;
    void *ctx;
    size_t lo, hi;
    unsigned part;
} par_job;

static void *par_main(void *arg) {
    par_job *j = arg;
    j->fn(j->ctx, j->lo, j->hi, j->part);
    return NULL;
}

/* Splits [0, n) into at most parts ranges and runs fn on each, the caller taking the first.
 * Falls back to fewer parts when a thread cannot be started. Returns the parts used. */
static unsigned parallel_for(size_t n, unsigned parts, range_fn fn, void *ctx) {
    if (parts < 1) parts = 1;
    if (parts > n) parts = n ? (unsigned)n : 1;
    par_job jobs[PAR_MAX_THREADS];
    pthread_t tids[PAR_MAX_THREADS];
    int started[PAR_MAX_THREADS] = {0};
    for (unsigned p = 0; p < parts; p++) {
        jobs[p] = (par_job){fn, ctx, n * p / parts, n * (p + 1) / parts, p};
    }
    for (unsigned p = 1; p < parts; p++)
        started[p] = pthread_create(&tids[p], NULL, par_main, &jobs[p]) == 0;
    fn(ctx, jobs[0].lo, jobs[0].hi, 0);
    for (unsigned p = 1; p < parts; p++) {
        if (started[p]) pthread_join(tids[p], NULL);
        else fn(ctx, jobs[p].lo, jobs[p].hi, p);
    }
    return parts;
}

static unsigned parts_for(size_t elems) {
    if (elems < 2 * (size_t)PAR_MIN_ELEMS) return 1;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t parts = elems / PAR_MIN_ELEMS;
    if (cpus > 0 && parts > (size_t)cpus) parts = (size_t)cpus;
    if (parts > PAR_MAX_THREADS) parts = PAR_MAX_THREADS;
    return parts < 1 ? 1 : (unsigned)parts;
}

/* ---------------------------------------------------------------- checking a batch */

typedef struct check_ctx {
    const sieve_point *pts;
    uint32_t dim;
    int rc[PAR_MAX_THREADS];     /* first error of each part ... */
    size_t at[PAR_MAX_THREADS];  /* ... and its point index */
} check_ctx;

static int check_point(const sieve_point *p, uint32_t dim) {
    if (p->id.kind != SIEVE_ID_NUM && p->id.kind != SIEVE_ID_UUID) return SIEVE_EINVAL;
    if (!p->vector) return SIEVE_EINVAL;
    if (p->dim && p->dim != dim) return SIEVE_EDIM;
    if (!p->payload && p->payload_len) return SIEVE_EINVAL;
    if (p->payload_len > SIEVE__PAYLOAD_MAX) return SIEVE_ETOOBIG;
    uint32_t bad = 0; /* branch-free so it vectorises: exponent all ones = NaN or Inf */
    for (uint32_t i = 0; i < dim; i++) {
        uint32_t u;
        memcpy(&u, &p->vector[i], 4);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    if (bad) return SIEVE_ENONFINITE;
    if (p->payload) {
        json_error_t err;
        json_t *j = json_loadb(p->payload, p->payload_len, 0, &err);
        if (!j) return SIEVE_EPARSE;
        int obj = json_is_object(j);
        json_decref(j);
        if (!obj) return SIEVE_EINVAL;
    }
    return 0;
}

static void check_range(void *arg, size_t lo, size_t hi, unsigned part) {
    check_ctx *c = arg;
    c->rc[part] = 0;
    for (size_t i = lo; i < hi; i++) {
        int rc = check_point(&c->pts[i], c->dim);
        if (rc) {
            c->rc[part] = rc;
            c->at[part] = i;
            return;
        }
    }
}

/* ---------------------------------------------------------------- encoding a batch */

typedef struct enc_ctx {
    const sieve_point *pts;
    const size_t *order;   /* unique points, in application order */
    sieve_collection_config cfg;
    const void **vecs;     /* out: stored row of each unique point */
    uint8_t *buf;          /* converted rows (NULL when rows are used as given) */
    float *norms;
    int rc[PAR_MAX_THREADS];
    size_t at[PAR_MAX_THREADS];
} enc_ctx;

static void enc_range(void *arg, size_t lo, size_t hi, unsigned part) {
    enc_ctx *c = arg;
    uint32_t dim = c->cfg.dim;
    sieve_dtype dt = c->cfg.dtype;
    size_t row_bytes = (size_t)dim * sieve_dtype_size(dt);
    int cosine = c->cfg.metric == SIEVE_METRIC_COSINE;
    float *tmp = NULL;
    c->rc[part] = 0;
    if (cosine && dt != SIEVE_DTYPE_F32 && !(tmp = malloc((size_t)dim * sizeof *tmp))) {
        c->rc[part] = SIEVE_ENOMEM;
        c->at[part] = lo;
        return;
    }
    for (size_t k = lo; k < hi; k++) {
        const float *src = c->pts[c->order[k]].vector;
        void *dst = c->buf ? c->buf + k * row_bytes : NULL;
        if (cosine) {
            /* normalise in float32 (accumulate in double: no overflow for finite input) */
            double s = 0;
            for (uint32_t i = 0; i < dim; i++) s += (double)src[i] * src[i];
            double inv = s > 0 ? 1.0 / sqrt(s) : 0.0;
            float *out = dt == SIEVE_DTYPE_F32 ? (float *)dst : tmp;
            for (uint32_t i = 0; i < dim; i++) out[i] = (float)(src[i] * inv);
            if (dt != SIEVE_DTYPE_F32) sieve_convert_from_f32(dt, tmp, dst, dim);
        } else if (dst) {
            sieve_convert_from_f32(dt, src, dst, dim);
        }
        const void *row = dst ? dst : (const void *)src;
        int bad = 0;
        if (dt != SIEVE_DTYPE_F32) { /* a finite float32 can overflow a 16-bit type */
            const uint16_t *h = row;
            uint16_t expmask = dt == SIEVE_DTYPE_F16 ? 0x7c00u : 0x7f80u;
            for (uint32_t i = 0; i < dim && !bad; i++) bad = (h[i] & expmask) == expmask;
        }
        float nrm = bad ? 0.0f : sieve_row_sqnorm(dt, row, dim);
        if (bad || !isfinite(nrm)) {
            c->rc[part] = SIEVE_ERANGE;
            c->at[part] = k;
            break;
        }
        c->vecs[k] = row;
        c->norms[k] = nrm;
    }
    free(tmp);
}

/* First error over the parts (lowest index), or 0. */
static int first_error(const int *rc, const size_t *at, unsigned parts) {
    int best = 0;
    size_t best_at = SIZE_MAX;
    for (unsigned p = 0; p < parts; p++)
        if (rc[p] && at[p] < best_at) { best = rc[p]; best_at = at[p]; }
    return best;
}

/* ---------------------------------------------------------------- duplicate ids */

typedef struct key_ref { const uint8_t *key; size_t idx; } key_ref;

static int key_ref_cmp(const void *a, const void *b) {
    const key_ref *x = a, *y = b;
    int c = memcmp(x->key, y->key, SIEVE__IDKEY);
    if (c) return c;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Fills order with the indices of the last occurrence of each id, in index order; returns
 * how many, or 0 on allocation failure (n > 0). */
static size_t dedupe(const uint8_t *keys, size_t n, size_t *order) {
    size_t i;
    for (i = 1; i < n; i++)
        if (memcmp(keys + (i - 1) * SIEVE__IDKEY, keys + i * SIEVE__IDKEY, SIEVE__IDKEY) >= 0)
            break;
    if (i >= n) { /* strictly increasing: no duplicates (the common bulk case) */
        for (i = 0; i < n; i++) order[i] = i;
        return n;
    }
    key_ref *refs = malloc(n * sizeof *refs);
    uint8_t *keep = calloc(n, 1);
    if (!refs || !keep) { free(refs); free(keep); return 0; }
    for (i = 0; i < n; i++) refs[i] = (key_ref){keys + i * SIEVE__IDKEY, i};
    qsort(refs, n, sizeof *refs, key_ref_cmp);
    for (i = 0; i < n; i++)
        if (i + 1 == n || memcmp(refs[i].key, refs[i + 1].key, SIEVE__IDKEY))
            keep[refs[i].idx] = 1;
    size_t m = 0;
    for (i = 0; i < n; i++) if (keep[i]) order[m++] = i;
    free(refs);
    free(keep);
    return m;
}

/* ---------------------------------------------------------------- upsert */

int sieve_store_upsert(sieve_store *st, const char *collection, const sieve_point *points,
                       size_t n) {
    if (!st || !sieve_store_name_valid(collection) || (!points && n)) return SIEVE_EINVAL;
    sieve__view *v = sieve__view_get(st, collection, NULL);
    if (!v) return SIEVE_ENOTFOUND;
    sieve_collection_config cfg = v->info.config;
    uint32_t cid = v->info.collection_id;
    sieve__view_unref(v);
    if (n == 0) return 0;

    check_ctx cc = {.pts = points, .dim = cfg.dim};
    unsigned parts = parallel_for(n, parts_for(n * cfg.dim), check_range, &cc);
    int rc = first_error(cc.rc, cc.at, parts);
    if (rc) return rc;

    size_t row_bytes = (size_t)cfg.dim * sieve_dtype_size(cfg.dtype);
    int as_given = cfg.dtype == SIEVE_DTYPE_F32 && cfg.metric != SIEVE_METRIC_COSINE;
    uint8_t *keys = malloc(n * SIEVE__IDKEY);
    size_t *order = malloc(n * sizeof *order);
    const void **vecs = NULL;
    const sieve_point **pts = NULL;
    float *norms = NULL;
    uint8_t *buf = NULL, *fresh = NULL;
    uint64_t *rows = NULL;
    size_t m = 0;
    rc = SIEVE_ENOMEM;
    if (!keys || !order) goto out;
    for (size_t i = 0; i < n; i++) sieve__id_key(&points[i].id, keys + i * SIEVE__IDKEY);
    if (!(m = dedupe(keys, n, order))) goto out;
    if (m < n) /* compact the keys to the unique points */
        for (size_t k = 0; k < m; k++)
            memmove(keys + k * SIEVE__IDKEY, keys + order[k] * SIEVE__IDKEY, SIEVE__IDKEY);
    vecs = malloc(m * sizeof *vecs);
    pts = malloc(m * sizeof *pts);
    norms = malloc(m * sizeof *norms);
    rows = malloc(m * sizeof *rows);
    fresh = malloc(m);
    if (!as_given) buf = malloc(m * row_bytes);
    if (!vecs || !pts || !norms || !rows || !fresh || (!as_given && !buf)) goto out;

    enc_ctx ec = {.pts = points, .order = order, .cfg = cfg, .vecs = vecs, .buf = buf,
                  .norms = norms};
    parts = parallel_for(m, parts_for(m * cfg.dim), enc_range, &ec);
    if ((rc = first_error(ec.rc, ec.at, parts))) goto out;

    sieve__req req;
    memset(&req, 0, sizeof req);
    req.kind = SIEVE__REQ_UPSERT;
    snprintf(req.name, sizeof req.name, "%s", collection);
    req.cfg = cfg;
    req.cid = cid;
    req.n = m;
    req.keys = keys;
    req.vecs = vecs;
    req.norms = norms;
    for (size_t k = 0; k < m; k++) pts[k] = &points[order[k]];
    req.pts = pts;
    req.rows_out = rows;
    req.fresh = fresh;
    req.bytes = m * (row_bytes + 64);
    for (size_t k = 0; k < m; k++) req.bytes += pts[k]->payload_len;
    rc = sieve__submit(st, &req);
out:
    free(keys);
    free(order);
    free(vecs);
    free(pts);
    free(norms);
    free(buf);
    free(rows);
    free(fresh);
    return rc;
}

int sieve__rows_count(sieve_store *st, MDB_txn *txn, uint32_t cid, uint64_t *rows) {
    MDB_cursor *cur;
    int rc = mdb_cursor_open(txn, st->dbi_rows, &cur);
    if (rc) return sieve__mdb_err(rc);
    sieve__rkey rk = sieve__rowkey(cid + 1, 0);
    MDB_val k = {sizeof rk.b, rk.b}, d;
    rc = mdb_cursor_get(cur, &k, &d, MDB_SET_RANGE);
    if (rc == 0) rc = mdb_cursor_get(cur, &k, &d, MDB_PREV);
    else if (rc == MDB_NOTFOUND) rc = mdb_cursor_get(cur, &k, &d, MDB_LAST);
    *rows = 0;
    if (rc == 0 && k.mv_size == 12 && sieve__get_be32(k.mv_data) == cid)
        *rows = sieve__get_be64((const uint8_t *)k.mv_data + 4) + 1;
    mdb_cursor_close(cur);
    return rc == MDB_NOTFOUND ? 0 : sieve__mdb_err(rc);
}

typedef struct row_ref { uint64_t row; size_t k; } row_ref;

static int row_ref_cmp(const void *a, const void *b) {
    const row_ref *x = a, *y = b;
    return (x->row > y->row) - (x->row < y->row);
}

/* Copies the rows refs[lo, hi) (all in one page) into the page blob at dst. */
static void patch_rows(const sieve__req *r, const row_ref *refs, size_t lo, size_t hi,
                       uint8_t *dst, size_t row_bytes, uint32_t rpp) {
    uint8_t *norm_dst = dst + (size_t)rpp * row_bytes;
    for (size_t t = lo; t < hi; t++) {
        size_t in = refs[t].row % rpp;
        memcpy(dst + in * row_bytes, r->vecs[refs[t].k], row_bytes);
        memcpy(norm_dst + in * 4, &r->norms[refs[t].k], 4);
    }
}

/* Writes every page the request touches: one put per page (MDB_RESERVE). A page that
 * existed and is only partly rewritten is read into scratch first. */
static int write_pages(sieve_store *st, MDB_txn *txn, sieve__req *r,
                       const sieve_collection_config *cfg, uint32_t cid, uint64_t old_rows) {
    uint32_t rpp = cfg->rows_per_page;
    size_t row_bytes = (size_t)cfg->dim * sieve_dtype_size(cfg->dtype);
    size_t vec_bytes = (size_t)rpp * row_bytes;
    size_t blob = sieve__page_bytes(cfg, st->psize);
    uint64_t old_pages = (old_rows + rpp - 1) / rpp;
    row_ref *refs = malloc(r->n * sizeof *refs);
    if (!refs) return SIEVE_ENOMEM;
    int sorted = 1;
    for (size_t k = 0; k < r->n; k++) {
        refs[k] = (row_ref){r->rows_out[k], k};
        if (k && refs[k].row < refs[k - 1].row) sorted = 0;
    }
    if (!sorted) qsort(refs, r->n, sizeof *refs, row_ref_cmp);
    int rc = 0;
    if (st->scratch_bytes < blob) {
        uint8_t *s = realloc(st->scratch, blob);
        if (!s) { free(refs); return SIEVE_ENOMEM; }
        st->scratch = s;
        st->scratch_bytes = blob;
    }
    for (size_t i = 0, j; i < r->n && !rc; i = j) {
        uint64_t page = refs[i].row / rpp;
        for (j = i + 1; j < r->n && refs[j].row / rpp == page; j++) {}
        size_t count = j - i; /* rows are distinct, so count == rpp covers the page */
        sieve__rkey pk = sieve__rowkey(cid, page);
        MDB_val key = {sizeof pk.b, pk.b}, val = {blob, NULL};
        if (page < old_pages && count < rpp) {
            MDB_val old;
            rc = mdb_get(txn, st->dbi_pages, &key, &old);
            if (rc) { rc = rc == MDB_NOTFOUND ? SIEVE_ECORRUPT : sieve__mdb_err(rc); break; }
            if (old.mv_size != blob) { rc = SIEVE_ECORRUPT; break; }
            memcpy(st->scratch, old.mv_data, blob);
            patch_rows(r, refs, i, j, st->scratch, row_bytes, rpp);
            if ((rc = sieve__mdb_err(mdb_put(txn, st->dbi_pages, &key, &val, MDB_RESERVE)))) break;
            memcpy(val.mv_data, st->scratch, blob);
            continue;
        }
        if (page >= old_pages && refs[i].row != page * rpp) { rc = SIEVE_EINTERNAL; break; }
        if ((rc = sieve__mdb_err(mdb_put(txn, st->dbi_pages, &key, &val, MDB_RESERVE)))) break;
        uint8_t *dst = val.mv_data;
        if (count < rpp) { /* a new page: rows page*rpp .. +count, the rest is unused */
            memset(dst + count * row_bytes, 0, vec_bytes - count * row_bytes);
            memset(dst + vec_bytes + count * 4, 0, (rpp - count) * 4);
        }
        if (blob > vec_bytes + (size_t)rpp * 4)
            memset(dst + vec_bytes + (size_t)rpp * 4, 0, blob - vec_bytes - (size_t)rpp * 4);
        patch_rows(r, refs, i, j, dst, row_bytes, rpp);
    }
    free(refs);
    return rc;
}

int sieve__apply_upsert(sieve_store *st, MDB_txn *txn, sieve__req *r) {
    sieve_collection_config cfg;
    uint32_t cid;
    int rc = sieve__coll_get(st, txn, r->name, &cfg, &cid);
    if (rc) return rc;
    if (cid != r->cid) return SIEVE_ENOTFOUND; /* dropped (and maybe re-created) since */
    uint64_t rows;
    if ((rc = sieve__rows_count(st, txn, cid, &rows))) return rc;
    uint64_t old_rows = rows;
    MDB_cursor *fc;
    if ((rc = mdb_cursor_open(txn, st->dbi_free, &fc))) return sieve__mdb_err(rc);
    int free_left = 1, have_free = 0;
    uint64_t free_row = 0;
    uint8_t ik[4 + SIEVE__IDKEY], rv[SIEVE__ROWVAL], cand_be[8];
    sieve__put_be32(ik, cid);
    for (size_t k = 0; k < r->n && !rc; k++) {
        const uint8_t *key = r->keys + k * SIEVE__IDKEY;
        if (!have_free && free_left) { /* the lowest free row, if any */
            sieve__rkey fk = sieve__rowkey(cid, 0);
            MDB_val a = {sizeof fk.b, fk.b}, b;
            rc = mdb_cursor_get(fc, &a, &b, MDB_SET_RANGE);
            if (rc == 0 && a.mv_size == 12 && sieve__get_be32(a.mv_data) == cid) {
                free_row = sieve__get_be64((const uint8_t *)a.mv_data + 4);
                have_free = 1;
            } else if (rc == 0 || rc == MDB_NOTFOUND) {
                free_left = 0;
                rc = 0;
            } else {
                break;
            }
        }
        uint64_t cand = have_free ? free_row : rows, row;
        int is_new = 0;
        memcpy(ik + 4, key, SIEVE__IDKEY);
        sieve__put_be64(cand_be, cand);
        MDB_val a = {sizeof ik, ik}, b = {8, cand_be};
        rc = mdb_put(txn, st->dbi_ids, &a, &b, MDB_NOOVERWRITE);
        if (rc == MDB_KEYEXIST) { /* b now holds the existing row */
            if (b.mv_size != 8) { rc = SIEVE_ECORRUPT; break; }
            row = sieve__get_be64(b.mv_data);
            if (row >= rows) { rc = SIEVE_ECORRUPT; break; }
            rc = 0;
        } else if (rc) {
            break;
        } else {
            row = cand;
            is_new = 1;
            if (have_free) {
                sieve__rkey fk = sieve__rowkey(cid, row);
                MDB_val c = {sizeof fk.b, fk.b};
                if ((rc = mdb_del(txn, st->dbi_free, &c, NULL))) break;
                have_free = 0;
            } else {
                rows++;
            }
            sieve__rkey rk = sieve__rowkey(cid, row);
            memcpy(rv, key, SIEVE__IDKEY);
            rv[SIEVE__IDKEY] = 1;
            MDB_val c = {sizeof rk.b, rk.b}, d = {sizeof rv, rv};
            if ((rc = mdb_put(txn, st->dbi_rows, &c, &d, 0))) break;
        }
        const sieve_point *p = r->pts[k];
        sieve__rkey pk = sieve__rowkey(cid, row);
        MDB_val c = {sizeof pk.b, pk.b};
        if (p->payload) {
            MDB_val d = {p->payload_len, (void *)p->payload};
            rc = mdb_put(txn, st->dbi_payloads, &c, &d, 0);
        } else if (!is_new) {
            rc = mdb_del(txn, st->dbi_payloads, &c, NULL);
            if (rc == MDB_NOTFOUND) rc = 0;
        }
        r->rows_out[k] = row;
        r->fresh[k] = (uint8_t)is_new;
    }
    mdb_cursor_close(fc);
    if (rc) return sieve__mdb_err(rc);
    r->rows_after = rows;
    return write_pages(st, txn, r, &cfg, cid, old_rows);
}

/* ---------------------------------------------------------------- delete */

int sieve_store_delete(sieve_store *st, const char *collection, const sieve_point_id *ids,
                       size_t n, uint64_t *n_deleted) {
    if (n_deleted) *n_deleted = 0;
    if (!st || !sieve_store_name_valid(collection) || (!ids && n)) return SIEVE_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (ids[i].kind != SIEVE_ID_NUM && ids[i].kind != SIEVE_ID_UUID) return SIEVE_EINVAL;
    sieve__view *v = sieve__view_get(st, collection, NULL);
    if (!v) return SIEVE_ENOTFOUND;
    sieve__view_unref(v);
    if (n == 0) return 0;
    uint8_t *keys = malloc(n * SIEVE__IDKEY);
    uint64_t *rows = malloc(n * sizeof *rows);
    int rc = SIEVE_ENOMEM;
    if (keys && rows) {
        for (size_t i = 0; i < n; i++) sieve__id_key(&ids[i], keys + i * SIEVE__IDKEY);
        sieve__req req;
        memset(&req, 0, sizeof req);
        req.kind = SIEVE__REQ_DELETE;
        snprintf(req.name, sizeof req.name, "%s", collection);
        req.n = n;
        req.keys = keys;
        req.rows_out = rows;
        req.bytes = n * 64;
        rc = sieve__submit(st, &req);
        if (!rc && n_deleted) *n_deleted = req.n_out;
    }
    free(keys);
    free(rows);
    return rc;
}

int sieve__apply_delete(sieve_store *st, MDB_txn *txn, sieve__req *r) {
    sieve_collection_config cfg;
    uint32_t cid;
    int rc = sieve__coll_get(st, txn, r->name, &cfg, &cid);
    if (rc) return rc;
    r->cid = cid;
    r->n_out = 0;
    uint8_t ik[4 + SIEVE__IDKEY], rv[SIEVE__ROWVAL] = {0};
    sieve__put_be32(ik, cid);
    for (size_t k = 0; k < r->n; k++) {
        memcpy(ik + 4, r->keys + k * SIEVE__IDKEY, SIEVE__IDKEY);
        MDB_val a = {sizeof ik, ik}, b;
        rc = mdb_get(txn, st->dbi_ids, &a, &b);
        if (rc == MDB_NOTFOUND) { rc = 0; continue; }
        if (rc) break;
        if (b.mv_size != 8) { rc = SIEVE_ECORRUPT; break; }
        uint64_t row = sieve__get_be64(b.mv_data);
        if ((rc = mdb_del(txn, st->dbi_ids, &a, NULL))) break;
        sieve__rkey rk = sieve__rowkey(cid, row);
        MDB_val c = {sizeof rk.b, rk.b}, d = {sizeof rv, rv}, e = {0, NULL};
        if ((rc = mdb_put(txn, st->dbi_rows, &c, &d, 0))) break;
        rc = mdb_del(txn, st->dbi_payloads, &c, NULL);
        if (rc && rc != MDB_NOTFOUND) break;
        if ((rc = mdb_put(txn, st->dbi_free, &c, &e, 0))) break;
        r->rows_out[r->n_out++] = row;
    }
    return sieve__mdb_err(rc);
}

/* ---------------------------------------------------------------- reads */

int sieve_store_count(sieve_store *st, const char *collection, uint64_t *out) {
    if (!st || !out || !sieve_store_name_valid(collection)) return SIEVE_EINVAL;
    sieve__view *v = sieve__view_get(st, collection, NULL);
    if (!v) return SIEVE_ENOTFOUND;
    *out = v->info.points;
    sieve__view_unref(v);
    return 0;
}

int sieve_store_get(sieve_store *st, const char *collection, const sieve_point_id *id,
                    float *vector_out, char **payload_out) {
    if (payload_out) *payload_out = NULL;
    if (!st || !id || !sieve_store_name_valid(collection)) return SIEVE_EINVAL;
    if (id->kind != SIEVE_ID_NUM && id->kind != SIEVE_ID_UUID) return SIEVE_EINVAL;
    sieve__readers_enter(st);
    sieve__view *v = sieve__view_get(st, collection, NULL);
    if (!v) {
        sieve__readers_leave(st);
        return SIEVE_ENOTFOUND;
    }
    const sieve_collection_config *cfg = &v->info.config;
    uint32_t cid = v->info.collection_id;
    MDB_txn *txn;
    int rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn);
    if (rc) goto done;
    uint8_t ik[4 + SIEVE__IDKEY];
    sieve__put_be32(ik, cid);
    sieve__id_key(id, ik + 4);
    MDB_val a = {sizeof ik, ik}, b;
    if ((rc = mdb_get(txn, st->dbi_ids, &a, &b))) goto abort;
    if (b.mv_size != 8) { rc = SIEVE_ECORRUPT; goto abort; }
    uint64_t row = sieve__get_be64(b.mv_data);
    uint32_t rpp = cfg->rows_per_page;
    if (vector_out) {
        sieve__rkey pk = sieve__rowkey(cid, row / rpp);
        MDB_val c = {sizeof pk.b, pk.b}, d;
        if ((rc = mdb_get(txn, st->dbi_pages, &c, &d))) {
            if (rc == MDB_NOTFOUND) rc = SIEVE_ECORRUPT;
            goto abort;
        }
        if (d.mv_size != sieve__page_bytes(cfg, st->psize)) { rc = SIEVE_ECORRUPT; goto abort; }
        size_t row_bytes = (size_t)cfg->dim * sieve_dtype_size(cfg->dtype);
        sieve_convert_to_f32(cfg->dtype, (const uint8_t *)d.mv_data + (row % rpp) * row_bytes,
                             vector_out, cfg->dim);
    }
    if (payload_out) {
        sieve__rkey pk = sieve__rowkey(cid, row);
        MDB_val c = {sizeof pk.b, pk.b}, d;
        rc = mdb_get(txn, st->dbi_payloads, &c, &d);
        if (rc == 0) {
            char *s = malloc(d.mv_size + 1);
            if (!s) { rc = SIEVE_ENOMEM; goto abort; }
            memcpy(s, d.mv_data, d.mv_size);
            s[d.mv_size] = '\0';
            *payload_out = s;
        } else if (rc == MDB_NOTFOUND) {
            rc = 0;
        }
    }
abort:
    mdb_txn_abort(txn);
done:
    sieve__readers_leave(st);
    sieve__view_unref(v);
    return sieve__mdb_err(rc);
}

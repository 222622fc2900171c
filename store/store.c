/* store.c: the store's lifecycle and its one writer.
 *
 * Owns: opening the data directory (directory lock, LMDB environment, named databases),
 * the request queue, the writer thread with group commit (one durable LMDB transaction per
 * group, one nested transaction per request), the flusher thread (starts the kernel's
 * writeback during a commit, see store_internal.h), growing the map on MDB_MAP_FULL,
 * building and publishing the next views after a commit, statistics and close.
 * Must not: parse payloads or encode vectors (points.c does that in the caller's thread),
 * know the key formats beyond store_internal.h.
 *
 * Locks: the map gate (map_mu, map_cv: read transactions enter it as readers, the writer
 * waits for it to empty only to resize the map) and mu (queue, published views, stats).
 * mu may be taken while inside the gate, never the other way round; the writer never holds
 * mu while it runs LMDB work.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store_internal.h"

#define MAP_MIN (1ull << 20)
#define MAP_MAX (1ull << 46)

void sieve_store_options_init(sieve_store_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->initial_map_bytes = 1ull << 30;
    o->no_sync = 0;
    o->group_max = 256;
}

int sieve__mdb_err(int rc) {
    if (rc == 0) return 0;
    if (rc >= SIEVE_EINTERNAL && rc < 0) return rc; /* already a sieve code */
    switch (rc) {
    case MDB_MAP_FULL: return MDB_MAP_FULL;        /* handled by the writer */
    case ENOMEM: return SIEVE_ENOMEM;
    case MDB_TXN_FULL: return SIEVE_ETOOBIG;
    case MDB_CORRUPTED: case MDB_PAGE_NOTFOUND: case MDB_INVALID:
    case MDB_VERSION_MISMATCH: case MDB_INCOMPATIBLE: case MDB_BAD_VALSIZE:
        return SIEVE_ECORRUPT;
    case MDB_NOTFOUND: return SIEVE_ENOTFOUND;
    case MDB_KEYEXIST: return SIEVE_EEXIST;
    case MDB_READERS_FULL: return SIEVE_EBUSY;
    default: return SIEVE_EIO;
    }
}

/* ---------------------------------------------------------------- views */

sieve__view *sieve__view_new(const char *name, const sieve_collection_config *cfg,
                             uint32_t cid) {
    sieve__view *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    atomic_init(&v->refs, 1);
    snprintf(v->name, sizeof v->name, "%s", name);
    v->info.config = *cfg;
    v->info.collection_id = cid;
    v->info.generation = 1;
    return v;
}

sieve__view *sieve__view_copy(const sieve__view *src) {
    sieve__view *v = sieve__view_new(src->name, &src->info.config, src->info.collection_id);
    if (!v) return NULL;
    v->info = src->info;
    if (sieve__view_reserve(v, src->info.rows)) {
        sieve__view_unref(v);
        return NULL;
    }
    if (src->info.rows) memcpy(v->deleted, src->deleted, (src->info.rows + 63) / 64 * 8);
    if (src->info.pages) memcpy(v->page_gen, src->page_gen, src->info.pages * 8);
    return v;
}

int sieve__view_reserve(sieve__view *v, uint64_t rows) {
    uint64_t words = (rows + 63) / 64;
    uint32_t rpp = v->info.config.rows_per_page;
    uint64_t pages = (rows + rpp - 1) / rpp;
    if (words > v->deleted_cap) {
        size_t cap = v->deleted_cap ? v->deleted_cap : 16;
        while (cap < words) cap *= 2;
        uint64_t *d = realloc(v->deleted, cap * 8);
        if (!d) return SIEVE_ENOMEM;
        memset(d + v->deleted_cap, 0, (cap - v->deleted_cap) * 8);
        v->deleted = d;
        v->deleted_cap = cap;
    }
    if (pages > v->page_gen_cap) {
        size_t cap = v->page_gen_cap ? v->page_gen_cap : 4;
        while (cap < pages) cap *= 2;
        uint64_t *g = realloc(v->page_gen, cap * 8);
        if (!g) return SIEVE_ENOMEM;
        memset(g + v->page_gen_cap, 0, (cap - v->page_gen_cap) * 8);
        v->page_gen = g;
        v->page_gen_cap = cap;
    }
    return 0;
}

void sieve__view_unref(sieve__view *v) {
    if (!v) return;
    if (atomic_fetch_sub(&v->refs, 1) != 1) return;
    free(v->deleted);
    free(v->page_gen);
    free(v);
}

static ptrdiff_t entry_find(const sieve_store *st, const char *name, int *found) {
    size_t lo = 0, hi = st->n_entries;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(st->entries[mid].name, name);
        if (c == 0) { *found = 1; return (ptrdiff_t)mid; }
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    *found = 0;
    return (ptrdiff_t)lo;
}

sieve__view *sieve__view_get(sieve_store *st, const char *name, uint64_t *txnid) {
    pthread_mutex_lock(&st->mu);
    int found;
    ptrdiff_t i = entry_find(st, name, &found);
    sieve__view *v = NULL;
    if (found) {
        v = st->entries[i].view;
        atomic_fetch_add(&v->refs, 1);
    }
    if (txnid) *txnid = st->published_txnid;
    pthread_mutex_unlock(&st->mu);
    return v;
}

/* Under st->mu: makes room for extra more entries. */
static int entries_reserve(sieve_store *st, size_t extra) {
    if (st->n_entries + extra <= st->cap_entries) return 0;
    size_t cap = st->cap_entries ? st->cap_entries : 8;
    while (cap < st->n_entries + extra) cap *= 2;
    sieve__entry *e = realloc(st->entries, cap * sizeof *e);
    if (!e) return SIEVE_ENOMEM;
    st->entries = e;
    st->cap_entries = cap;
    return 0;
}

/* Under st->mu, with room reserved: installs v (a reference passes to the entry) and
 * returns the view it replaces (to unref outside the lock) or NULL. */
static sieve__view *entry_put(sieve_store *st, sieve__view *v) {
    int found;
    ptrdiff_t i = entry_find(st, v->name, &found);
    if (found) {
        sieve__view *old = st->entries[i].view;
        st->entries[i].view = v;
        return old;
    }
    memmove(st->entries + i + 1, st->entries + i, (st->n_entries - (size_t)i) * sizeof *st->entries);
    snprintf(st->entries[i].name, sizeof st->entries[i].name, "%s", v->name);
    st->entries[i].view = v;
    st->n_entries++;
    return NULL;
}

/* Under st->mu: removes the entry of collection cid, returning its view or NULL. */
static sieve__view *entry_remove_cid(sieve_store *st, uint32_t cid) {
    for (size_t i = 0; i < st->n_entries; i++) {
        if (st->entries[i].view->info.collection_id != cid) continue;
        sieve__view *old = st->entries[i].view;
        memmove(st->entries + i, st->entries + i + 1, (st->n_entries - i - 1) * sizeof *st->entries);
        st->n_entries--;
        return old;
    }
    return NULL;
}

/* Writer thread: the current view of collection cid (entries change only in the writer,
 * so reading them here needs no lock). */
static sieve__view *published_by_cid(sieve_store *st, uint32_t cid) {
    for (size_t i = 0; i < st->n_entries; i++)
        if (st->entries[i].view->info.collection_id == cid) return st->entries[i].view;
    return NULL;
}

/* ---------------------------------------------------------------- the next views of a group */

typedef struct plan {
    sieve__view **views; /* next views, in first-touch order (dropped ones marked) */
    size_t n, cap;
    size_t creates;
} plan;

static void plan_free(plan *p) {
    for (size_t i = 0; i < p->n; i++) sieve__view_unref(p->views[i]);
    free(p->views);
    memset(p, 0, sizeof *p);
}

/* The working next view of collection cid, started from the published one. */
static int plan_view(sieve_store *st, plan *p, uint32_t cid, sieve__view **out) {
    for (size_t i = p->n; i-- > 0;)
        if (p->views[i]->info.collection_id == cid && !p->views[i]->dropped) {
            *out = p->views[i];
            return 0;
        }
    const sieve__view *cur = published_by_cid(st, cid);
    if (!cur) return SIEVE_EINTERNAL;
    sieve__view *v = sieve__view_copy(cur);
    if (!v) return SIEVE_ENOMEM;
    v->info.generation++;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 8;
        sieve__view **nv = realloc(p->views, cap * sizeof *nv);
        if (!nv) { sieve__view_unref(v); return SIEVE_ENOMEM; }
        p->views = nv;
        p->cap = cap;
    }
    p->views[p->n++] = v;
    *out = v;
    return 0;
}

static int plan_push(plan *p, sieve__view *v) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 8;
        sieve__view **nv = realloc(p->views, cap * sizeof *nv);
        if (!nv) return SIEVE_ENOMEM;
        p->views = nv;
        p->cap = cap;
    }
    p->views[p->n++] = v;
    return 0;
}

/* Applies the effects of the successful requests (in order) to next views. */
static int plan_build(sieve_store *st, sieve__req **grp, size_t n, plan *p) {
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        sieve__req *r = grp[i];
        if (r->rc) continue;
        sieve__view *v = NULL;
        switch (r->kind) {
        case SIEVE__REQ_CREATE:
            v = sieve__view_new(r->cfg.name, &r->cfg, r->cid);
            if (!v) { rc = SIEVE_ENOMEM; break; }
            if ((rc = plan_push(p, v))) { sieve__view_unref(v); break; }
            p->creates++;
            break;
        case SIEVE__REQ_DROP:
            if ((rc = plan_view(st, p, r->cid, &v))) break;
            v->dropped = 1;
            break;
        case SIEVE__REQ_UPSERT: {
            if ((rc = plan_view(st, p, r->cid, &v))) break;
            if ((rc = sieve__view_reserve(v, r->rows_after))) break;
            sieve_collection_info *in = &v->info;
            uint32_t rpp = in->config.rows_per_page;
            for (size_t k = 0; k < r->n; k++) {
                uint64_t row = r->rows_out[k];
                if (r->fresh[k]) {
                    if (row < in->rows) v->deleted[row / 64] &= ~(1ull << (row % 64));
                    in->points++;
                }
                v->page_gen[row / rpp] = in->generation;
            }
            if (r->rows_after > in->rows) in->rows = r->rows_after;
            in->pages = (in->rows + rpp - 1) / rpp;
            break;
        }
        case SIEVE__REQ_DELETE: {
            if (!r->n_out) break;
            if ((rc = plan_view(st, p, r->cid, &v))) break;
            for (uint64_t k = 0; k < r->n_out; k++) {
                uint64_t row = r->rows_out[k];
                v->deleted[row / 64] |= 1ull << (row % 64);
                v->info.points--;
            }
            break;
        }
        }
    }
    if (!rc) {
        pthread_mutex_lock(&st->mu);
        rc = entries_reserve(st, p->creates);
        pthread_mutex_unlock(&st->mu);
    }
    return rc;
}

/* After the commit: installs the next views (each one's reference passes to its entry, or
 * is released when its collection was dropped), records the txn id they describe, wakes
 * snapshots waiting for them, then releases the replaced views outside the lock. */
static void plan_publish(sieve_store *st, plan *p, uint64_t txnid) {
    sieve__view *stack_old[16];
    sieve__view **old = stack_old;
    if (p->n * 2 > 16) {
        while (!(old = malloc(p->n * 2 * sizeof *old))) {
            /* committed already: the views must be published; wait for memory */
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    size_t n_old = 0;
    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; i < p->n; i++) {
        sieve__view *v = p->views[i], *gone;
        if (v->dropped) {
            gone = entry_remove_cid(st, v->info.collection_id);
            old[n_old++] = v;
        } else {
            gone = entry_put(st, v);
        }
        if (gone) old[n_old++] = gone;
    }
    st->published_txnid = txnid;
    st->stats.commits++;
    pthread_cond_broadcast(&st->publish_cv);
    pthread_mutex_unlock(&st->mu);
    for (size_t i = 0; i < n_old; i++) sieve__view_unref(old[i]);
    if (old != stack_old) free(old);
    free(p->views);
    memset(p, 0, sizeof *p);
}

/* ---------------------------------------------------------------- growing the map */

void sieve__readers_enter(sieve_store *st) {
    pthread_mutex_lock(&st->map_mu);
    while (st->grow_waiting) pthread_cond_wait(&st->map_cv, &st->map_mu);
    st->readers++;
    pthread_mutex_unlock(&st->map_mu);
}

void sieve__readers_leave(sieve_store *st) {
    pthread_mutex_lock(&st->map_mu);
    if (--st->readers == 0 && st->grow_waiting) pthread_cond_broadcast(&st->map_cv);
    pthread_mutex_unlock(&st->map_mu);
}

/* Doubles the map. blocking: wait for open readers to leave (new ones wait meanwhile);
 * otherwise give up at once when a reader is inside. Writer thread only, with no write
 * transaction open. */
static int grow_map(sieve_store *st, int blocking) {
    pthread_mutex_lock(&st->map_mu);
    if (st->readers && !blocking) {
        pthread_mutex_unlock(&st->map_mu);
        return 0;
    }
    st->grow_waiting = 1;
    while (st->readers) pthread_cond_wait(&st->map_cv, &st->map_mu);
    int rc = 0;
    uint64_t want = st->map_bytes * 2;
    if (want > MAP_MAX) rc = SIEVE_EIO;
    else rc = sieve__mdb_err(mdb_env_set_mapsize(st->env, want));
    if (!rc) {
        MDB_envinfo ei;
        mdb_env_info(st->env, &ei);
        st->map_bytes = ei.me_mapsize;
    }
    st->grow_waiting = 0;
    pthread_cond_broadcast(&st->map_cv);
    pthread_mutex_unlock(&st->map_mu);
    if (!rc) {
        pthread_mutex_lock(&st->mu);
        st->stats.map_grows++;
        st->stats.map_bytes = st->map_bytes;
        pthread_mutex_unlock(&st->mu);
    }
    return rc;
}

/* Grows ahead of need when the map is over three quarters used and no reader is in the
 * way, so that MDB_MAP_FULL (which must wait for every reader) stays rare. */
static void maybe_grow(sieve_store *st) {
    MDB_envinfo ei;
    if (mdb_env_info(st->env, &ei)) return;
    uint64_t used = ((uint64_t)ei.me_last_pgno + 1) * st->psize;
    if (used * 4 > st->map_bytes * 3 && st->map_bytes * 2 <= MAP_MAX) (void)grow_map(st, 0);
}

/* ---------------------------------------------------------------- the flusher */

/* Writer thread: marks the start (1) or the end (0) of a commit. */
static void flusher_set(sieve_store *st, int active) {
    if (!st->flusher_started) return;
    pthread_mutex_lock(&st->flush_mu);
    st->flush_active = active;
    if (active) pthread_cond_signal(&st->flush_cv);
    pthread_mutex_unlock(&st->flush_mu);
}

static void *flusher_main(void *arg) {
    sieve_store *st = arg;
    pthread_mutex_lock(&st->flush_mu);
    for (;;) {
        while (!st->flush_active && !st->flush_stop)
            pthread_cond_wait(&st->flush_cv, &st->flush_mu);
        if (st->flush_stop) break;
        pthread_mutex_unlock(&st->flush_mu);
        /* start writeback of whatever the commit has copied so far; errors are the commit's
         * own fdatasync's to report */
        (void)sync_file_range(st->data_fd, 0, 0, SYNC_FILE_RANGE_WRITE);
        struct timespec ts = {0, 4 * 1000 * 1000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&st->flush_mu);
    }
    pthread_mutex_unlock(&st->flush_mu);
    return NULL;
}

static void flusher_stop(sieve_store *st) {
    if (!st->flusher_started) return;
    pthread_mutex_lock(&st->flush_mu);
    st->flush_stop = 1;
    pthread_cond_signal(&st->flush_cv);
    pthread_mutex_unlock(&st->flush_mu);
    pthread_join(st->flusher, NULL);
    st->flusher_started = 0;
}

/* ---------------------------------------------------------------- group commit */

static int apply_one(sieve_store *st, MDB_txn *txn, sieve__req *r) {
    switch (r->kind) {
    case SIEVE__REQ_CREATE: return sieve__apply_create(st, txn, r);
    case SIEVE__REQ_DROP: return sieve__apply_drop(st, txn, r);
    case SIEVE__REQ_UPSERT: return sieve__apply_upsert(st, txn, r);
    case SIEVE__REQ_DELETE: return sieve__apply_delete(st, txn, r);
    }
    return SIEVE_EINTERNAL;
}

/* Runs the group once. Returns MDB_MAP_FULL when the whole group must be retried after
 * growing the map; otherwise 0 with each request's rc set. */
static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int try_group(sieve_store *st, sieve__req **grp, size_t n) {
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < n; i++) grp[i]->rc = 0;
    MDB_txn *txn;
    int rc = mdb_txn_begin(st->env, NULL, 0, &txn);
    if (rc) {
        for (size_t i = 0; i < n; i++) grp[i]->rc = sieve__mdb_err(rc);
        return 0;
    }
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) {
        sieve__req *r = grp[i];
        if (n == 1) {
            rc = sieve__mdb_err(apply_one(st, txn, r));
        } else {
            MDB_txn *child;
            rc = sieve__mdb_err(mdb_txn_begin(st->env, txn, 0, &child));
            if (!rc) {
                rc = sieve__mdb_err(apply_one(st, child, r));
                if (!rc) rc = sieve__mdb_err(mdb_txn_commit(child));
                else mdb_txn_abort(child);
            }
        }
        if (rc == MDB_MAP_FULL) {
            mdb_txn_abort(txn);
            return MDB_MAP_FULL;
        }
        r->rc = rc;
        if (!rc) ok++;
    }
    if (!ok) {
        mdb_txn_abort(txn);
        return 0;
    }
    plan p = {0};
    rc = plan_build(st, grp, n, &p);
    if (rc) {
        plan_free(&p);
        mdb_txn_abort(txn);
        for (size_t i = 0; i < n; i++) if (!grp[i]->rc) grp[i]->rc = rc;
        return 0;
    }
    uint64_t t1 = now_ns();
    flusher_set(st, 1);
    rc = sieve__mdb_err(mdb_txn_commit(txn));
    flusher_set(st, 0);
    uint64_t t2 = now_ns();
    /* The id readers will see: LMDB commits a transaction that changed nothing without a
     * new id, so mdb_txn_id(txn) would be one ahead of every reader forever. */
    MDB_envinfo ei;
    if (!rc) rc = sieve__mdb_err(mdb_env_info(st->env, &ei));
    uint64_t txnid = rc ? 0 : ei.me_last_txnid;
    pthread_mutex_lock(&st->mu);
    st->stats.apply_ns += t1 - t0;
    st->stats.commit_ns += t2 - t1;
    pthread_mutex_unlock(&st->mu);
    if (rc == MDB_MAP_FULL) {
        plan_free(&p);
        return MDB_MAP_FULL;
    }
    if (rc) {
        plan_free(&p);
        for (size_t i = 0; i < n; i++) if (!grp[i]->rc) grp[i]->rc = rc;
        return 0;
    }
    plan_publish(st, &p, txnid);
    maybe_grow(st);
    return 0;
}

static void run_group(sieve_store *st, sieve__req **grp, size_t n) {
    for (;;) {
        int rc = try_group(st, grp, n);
        if (rc != MDB_MAP_FULL) break;
        pthread_mutex_lock(&st->mu);
        st->stats.retries++;
        pthread_mutex_unlock(&st->mu);
        rc = grow_map(st, 1);
        if (rc) {
            for (size_t i = 0; i < n; i++) grp[i]->rc = rc;
            break;
        }
    }
}

static void *writer_main(void *arg) {
    sieve_store *st = arg;
    pthread_mutex_lock(&st->mu);
    for (;;) {
        while (!st->q_head && !st->stopping) pthread_cond_wait(&st->queue_cv, &st->mu);
        if (!st->q_head) break;
        size_t n = 0;
        uint64_t bytes = 0;
        while (st->q_head && n < st->opts.group_max &&
               (n == 0 || bytes + st->q_head->bytes <= SIEVE__GROUP_BYTES)) {
            sieve__req *r = st->q_head;
            st->q_head = r->next;
            if (!st->q_head) st->q_tail = NULL;
            bytes += r->bytes;
            st->group[n++] = r;
        }
        pthread_mutex_unlock(&st->mu);
        run_group(st, st->group, n);
        pthread_mutex_lock(&st->mu);
        st->stats.requests += n;
        if (n > st->stats.max_group) st->stats.max_group = n;
        for (size_t i = 0; i < n; i++) {
            sieve__req *r = st->group[i];
            if (r->rc) st->stats.failed++;
            r->done = 1;
            pthread_cond_signal(&r->cv); /* r may be gone once mu is released */
        }
    }
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

int sieve__submit(sieve_store *st, sieve__req *req) {
    if (pthread_cond_init(&req->cv, NULL)) return SIEVE_ENOMEM;
    req->done = 0;
    req->rc = 0;
    req->next = NULL;
    pthread_mutex_lock(&st->mu);
    if (st->stopping) {
        pthread_mutex_unlock(&st->mu);
        pthread_cond_destroy(&req->cv);
        return SIEVE_ECLOSED;
    }
    if (st->q_tail) st->q_tail->next = req;
    else st->q_head = req;
    st->q_tail = req;
    pthread_cond_signal(&st->queue_cv);
    while (!req->done) pthread_cond_wait(&req->cv, &st->mu);
    pthread_mutex_unlock(&st->mu);
    pthread_cond_destroy(&req->cv);
    return req->rc;
}

/* ---------------------------------------------------------------- open and close */

static int open_dbis(sieve_store *st) {
    MDB_txn *txn;
    int rc = mdb_txn_begin(st->env, NULL, 0, &txn);
    if (rc) return sieve__mdb_err(rc);
    struct { const char *name; MDB_dbi *dbi; } dbs[] = {
        {"meta", &st->dbi_meta}, {"coll", &st->dbi_coll}, {"pages", &st->dbi_pages},
        {"ids", &st->dbi_ids}, {"rows", &st->dbi_rows}, {"payloads", &st->dbi_payloads},
        {"free", &st->dbi_free},
    };
    for (size_t i = 0; i < sizeof dbs / sizeof dbs[0] && !rc; i++)
        rc = mdb_dbi_open(txn, dbs[i].name, MDB_CREATE, dbs[i].dbi);
    if (!rc) {
        MDB_val k = {6, "format"}, v;
        rc = mdb_get(txn, st->dbi_meta, &k, &v);
        if (rc == MDB_NOTFOUND) {
            uint8_t buf[4];
            sieve__put_be32(buf, SIEVE__FORMAT);
            v.mv_size = 4;
            v.mv_data = buf;
            rc = mdb_put(txn, st->dbi_meta, &k, &v, 0);
        } else if (!rc && (v.mv_size != 4 || sieve__get_be32(v.mv_data) != SIEVE__FORMAT)) {
            rc = SIEVE_ECORRUPT;
        }
    }
    if (rc) {
        mdb_txn_abort(txn);
        return sieve__mdb_err(rc);
    }
    return sieve__mdb_err(mdb_txn_commit(txn));
}

static void store_free(sieve_store *st) {
    if (!st) return;
    for (size_t i = 0; i < st->n_entries; i++) sieve__view_unref(st->entries[i].view);
    free(st->entries);
    free(st->group);
    free(st->scratch);
    if (st->env) mdb_env_close(st->env);
    if (st->lock_fd >= 0) close(st->lock_fd); /* releases the flock */
    pthread_mutex_destroy(&st->map_mu);
    pthread_cond_destroy(&st->map_cv);
    pthread_mutex_destroy(&st->mu);
    pthread_cond_destroy(&st->queue_cv);
    pthread_mutex_destroy(&st->flush_mu);
    pthread_cond_destroy(&st->flush_cv);
    pthread_cond_destroy(&st->publish_cv);
    free(st);
}

int sieve_store_open(const char *dir, const sieve_store_options *opts, sieve_store **out) {
    if (!dir || !*dir || !out) return SIEVE_EINVAL;
    *out = NULL;
    sieve_store_options o;
    sieve_store_options_init(&o);
    if (opts) {
        if (opts->initial_map_bytes) o.initial_map_bytes = opts->initial_map_bytes;
        if (opts->group_max) o.group_max = opts->group_max;
        o.no_sync = opts->no_sync;
    }
    if (o.initial_map_bytes < MAP_MIN) o.initial_map_bytes = MAP_MIN;
    if (o.initial_map_bytes > MAP_MAX || o.group_max > 65536) return SIEVE_EINVAL;

    if (mkdir(dir, 0755) && errno != EEXIST) return errno == ENOMEM ? SIEVE_ENOMEM : SIEVE_EIO;
    struct stat sb;
    if (stat(dir, &sb)) return SIEVE_EIO;
    if (!S_ISDIR(sb.st_mode)) return SIEVE_EINVAL;

    sieve_store *st = calloc(1, sizeof *st);
    if (!st) return SIEVE_ENOMEM;
    st->lock_fd = -1;
    st->opts = o;
    pthread_mutex_init(&st->map_mu, NULL);
    pthread_cond_init(&st->map_cv, NULL);
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->queue_cv, NULL);
    pthread_mutex_init(&st->flush_mu, NULL);
    pthread_cond_init(&st->flush_cv, NULL);
    pthread_cond_init(&st->publish_cv, NULL);

    int rc = 0;
    size_t plen = strlen(dir) + 16;
    char *path = malloc(plen);
    if (!path) { store_free(st); return SIEVE_ENOMEM; }
    snprintf(path, plen, "%s/sieve.lock", dir);
    st->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    free(path);
    if (st->lock_fd < 0) rc = SIEVE_EIO;
    else if (flock(st->lock_fd, LOCK_EX | LOCK_NB))
        rc = (errno == EWOULDBLOCK) ? SIEVE_EBUSY : SIEVE_EIO;
    if (rc) { store_free(st); return rc; }

    rc = mdb_env_create(&st->env);
    if (rc) { st->env = NULL; store_free(st); return sieve__mdb_err(rc); }
    if (!rc) rc = mdb_env_set_maxdbs(st->env, 8);
    if (!rc) rc = mdb_env_set_maxreaders(st->env, 1024);
    if (!rc) rc = mdb_env_set_mapsize(st->env, o.initial_map_bytes);
    if (!rc) rc = mdb_env_open(st->env, dir, MDB_NOTLS | (o.no_sync ? MDB_NOSYNC : 0), 0644);
    if (rc) { store_free(st); return sieve__mdb_err(rc); }
    int dead = 0;
    mdb_reader_check(st->env, &dead);
    MDB_envinfo ei;
    MDB_stat ms;
    mdb_env_info(st->env, &ei);
    mdb_env_stat(st->env, &ms);
    st->map_bytes = ei.me_mapsize;
    st->psize = ms.ms_psize;
    st->stats.map_bytes = st->map_bytes;

    rc = open_dbis(st);
    if (!rc) {
        MDB_txn *txn;
        rc = sieve__mdb_err(mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn));
        if (!rc) {
            st->published_txnid = mdb_txn_id(txn);
            rc = sieve__load_views(st, txn);
            mdb_txn_abort(txn);
        }
    }
    if (!rc) {
        st->group = calloc(o.group_max, sizeof *st->group);
        if (!st->group) rc = SIEVE_ENOMEM;
    }
    if (!rc && !o.no_sync && mdb_env_get_fd(st->env, &st->data_fd) == 0 &&
        pthread_create(&st->flusher, NULL, flusher_main, st) == 0)
        st->flusher_started = 1; /* optional: without it commits are only slower */
    if (!rc) {
        if (pthread_create(&st->writer, NULL, writer_main, st)) rc = SIEVE_ENOMEM;
        else st->writer_started = 1;
    }
    if (rc) {
        flusher_stop(st);
        store_free(st);
        return rc;
    }
    *out = st;
    return 0;
}

void sieve_store_close(sieve_store *st) {
    if (!st) return;
    pthread_mutex_lock(&st->mu);
    st->stopping = 1;
    pthread_cond_signal(&st->queue_cv);
    pthread_mutex_unlock(&st->mu);
    if (st->writer_started) pthread_join(st->writer, NULL);
    flusher_stop(st);
    store_free(st);
}

int sieve_store_get_stats(sieve_store *st, sieve_store_stats *out) {
    if (!st || !out) return SIEVE_EINVAL;
    pthread_mutex_lock(&st->mu);
    *out = st->stats;
    pthread_mutex_unlock(&st->mu);
    return 0;
}

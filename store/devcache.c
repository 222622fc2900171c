/* devcache.c: the device page cache (sieve_devcache_* in sieve_store.h).
 *
 * Owns: per-collection device copies of the vector pages (one contiguous device buffer of
 * page slots, each slot the page's rows then its norms, plus the page tables the kernels
 * read), the device deleted bitmap, the generations they were copied at, the lanes through
 * which threads search (each with its own device handle and filter-mask buffer), and the
 * streaming path for collections larger than the budget.
 * Must not: include CUDA headers (device memory goes through sieve_kernels.h), write to the
 * store, or hold a snapshot beyond one call.
 *
 * Locking: mu guards the entry list, the clock, the counters and every entry's mutable
 * fields (generation, page generations, n_pages, n_rows, readers). An entry's device pages
 * and deleted bitmap are written only under mu and only while its readers count is zero;
 * a search takes a reader reference under mu, runs the kernel with mu released, and drops
 * the reference (waking waiters on cv) when the kernel has finished. Nothing ever waits on
 * cv while holding a reference, so waits cannot deadlock. stream_mu serialises streamed
 * searches and guards the staging buffers; it is never taken with mu held (mu may be taken
 * inside it for the counters).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sieve_store.h"

typedef struct dc_entry {
    uint32_t cid;
    uint64_t generation;      /* collection generation the device copy reflects */
    uint64_t last_use;
    uint32_t readers;         /* searches reading the device copy right now */
    sieve_dtype dtype;
    uint32_t dim, rpp;
    size_t rows_bytes, slot_bytes; /* per page */
    uint64_t cap_pages, n_pages, n_rows;
    void *base;               /* device: cap_pages slots */
    void **ptab;              /* device: page table */
    float **ntab;             /* device: norm page table */
    uint64_t *deleted;        /* device: cap_pages * rpp bits */
    uint64_t *page_gen;       /* host: generation of each resident page */
    uint64_t bytes;           /* device bytes held */
} dc_entry;

struct sieve_devcache_lane {
    sieve_devcache *dc;
    sieve_device *dev;        /* this lane's own handle: its stream and kernel scratch */
    uint64_t *allowed;        /* device: this lane's filter mask */
    size_t allowed_words;
};

struct sieve_devcache {
    sieve_device *dev;
    sieve_devcache_options opts;
    int direct;               /* CPU without host_resident: search the snapshot's map */
    sieve_device_kind kind;
    int ordinal;
    pthread_mutex_t mu;       /* see the file comment */
    pthread_cond_t cv;        /* an entry's readers dropped to zero */
    dc_entry **entries;
    size_t n_entries;
    uint64_t clock;
    sieve_devcache_stats stats;
    sieve_devcache_lane *own; /* the lane of sieve_devcache_knn */
    /* streaming buffers (allocated on first use), guarded by stream_mu */
    pthread_mutex_t stream_mu;
    void *stream_dev[2];
    void *stream_host[2];
    size_t stream_bytes;
};

void sieve_devcache_options_init(sieve_devcache_options *o) {
    memset(o, 0, sizeof *o);
}

static int device_ordinal(sieve_device *dev, int *ordinal) {
    *ordinal = -1;
    if (sieve_device_get_kind(dev) != SIEVE_DEVICE_CUDA) return 0;
    sieve_device_info info;
    int rc = sieve_device_get_info(dev, &info);
    if (!rc) *ordinal = info.ordinal;
    return rc;
}

int sieve_devcache_create(sieve_device *dev, const sieve_devcache_options *opts,
                          sieve_devcache **out) {
    if (!dev || !out) return SIEVE_EINVAL;
    *out = NULL;
    sieve_devcache *dc = calloc(1, sizeof *dc);
    if (!dc) return SIEVE_ENOMEM;
    dc->dev = dev;
    if (opts) dc->opts = *opts;
    dc->kind = sieve_device_get_kind(dev);
    if (dc->kind == SIEVE_DEVICE_CUDA) dc->opts.host_resident = 0;
    dc->direct = dc->kind == SIEVE_DEVICE_CPU && !dc->opts.host_resident;
    int rc = device_ordinal(dev, &dc->ordinal);
    if (!rc && dc->kind == SIEVE_DEVICE_CUDA && dc->opts.budget_bytes == 0) {
        sieve_device_info info;
        rc = sieve_device_get_info(dev, &info);
        if (!rc) dc->opts.budget_bytes = info.memory_free / 10 * 8;
    }
    if (dc->opts.host_resident && dc->opts.budget_bytes == 0)
        dc->opts.budget_bytes = 1ull << 62; /* no limit */
    if (rc) {
        free(dc);
        return rc;
    }
    dc->stats.budget_bytes = dc->opts.budget_bytes;
    pthread_mutex_init(&dc->mu, NULL);
    pthread_cond_init(&dc->cv, NULL);
    pthread_mutex_init(&dc->stream_mu, NULL);
    rc = sieve_devcache_lane_create(dc, dev, &dc->own);
    if (rc) {
        sieve_devcache_destroy(dc);
        return rc;
    }
    *out = dc;
    return 0;
}

/* Frees an entry (no reader may hold it) with the device memory calls of dev. mu held. */
static void entry_free(sieve_devcache *dc, sieve_device *dev, dc_entry *e) {
    if (!e) return;
    sieve_device_free(dev, e->base);
    sieve_device_free(dev, e->ptab);
    sieve_device_free(dev, e->ntab);
    sieve_device_free(dev, e->deleted);
    free(e->page_gen);
    dc->stats.resident_bytes -= e->bytes;
    if (dc->stats.resident_collections) dc->stats.resident_collections--;
    free(e);
}

/* stream_mu held (or the cache is being destroyed). */
static void stream_free(sieve_devcache *dc, sieve_device *dev) {
    for (int i = 0; i < 2; i++) {
        sieve_device_free(dev, dc->stream_dev[i]);
        sieve_host_free_pinned(dev, dc->stream_host[i]);
        dc->stream_dev[i] = dc->stream_host[i] = NULL;
    }
    dc->stream_bytes = 0;
}

void sieve_devcache_destroy(sieve_devcache *dc) {
    if (!dc) return;
    sieve_devcache_lane_destroy(dc->own);
    for (size_t i = 0; i < dc->n_entries; i++) entry_free(dc, dc->dev, dc->entries[i]);
    free(dc->entries);
    stream_free(dc, dc->dev);
    pthread_cond_destroy(&dc->cv);
    pthread_mutex_destroy(&dc->mu);
    pthread_mutex_destroy(&dc->stream_mu);
    free(dc);
}

int sieve_devcache_get_stats(const sieve_devcache *dc, sieve_devcache_stats *out) {
    if (!dc || !out) return SIEVE_EINVAL;
    /* the counters change under mu; the cache is logically const here */
    pthread_mutex_t *mu = (pthread_mutex_t *)&dc->mu;
    pthread_mutex_lock(mu);
    *out = dc->stats;
    pthread_mutex_unlock(mu);
    return 0;
}

int sieve_devcache_lane_create(sieve_devcache *dc, sieve_device *dev,
                               sieve_devcache_lane **out) {
    if (!out) return SIEVE_EINVAL;
    *out = NULL;
    if (!dc || !dev || sieve_device_get_kind(dev) != dc->kind) return SIEVE_EINVAL;
    int ordinal;
    int rc = device_ordinal(dev, &ordinal);
    if (rc) return rc;
    if (ordinal != dc->ordinal) return SIEVE_EINVAL;
    sieve_devcache_lane *l = calloc(1, sizeof *l);
    if (!l) return SIEVE_ENOMEM;
    l->dc = dc;
    l->dev = dev;
    *out = l;
    return 0;
}

void sieve_devcache_lane_destroy(sieve_devcache_lane *lane) {
    if (!lane) return;
    sieve_device_free(lane->dev, lane->allowed);
    free(lane);
}

/* Bytes a resident copy of cap_pages pages needs. */
static uint64_t entry_bytes(uint64_t cap_pages, size_t slot_bytes, uint32_t rpp) {
    uint64_t mask = cap_pages * rpp / 8;
    return cap_pages * slot_bytes + 2 * cap_pages * sizeof(void *) + mask;
}

/* mu held; the entry has no readers. */
static void remove_entry(sieve_devcache *dc, sieve_device *dev, size_t i) {
    entry_free(dc, dev, dc->entries[i]);
    dc->entries[i] = dc->entries[--dc->n_entries];
}

/* Evicts least recently used entries that no search is reading until need more bytes fit.
 * mu held. */
static void make_room(sieve_devcache *dc, sieve_device *dev, uint64_t need) {
    while (dc->stats.resident_bytes + need > dc->opts.budget_bytes) {
        size_t victim = SIZE_MAX;
        for (size_t i = 0; i < dc->n_entries; i++) {
            if (dc->entries[i]->readers) continue;
            if (victim == SIZE_MAX || dc->entries[i]->last_use < dc->entries[victim]->last_use)
                victim = i;
        }
        if (victim == SIZE_MAX) return;
        remove_entry(dc, dev, victim);
    }
}

/* Allocates an entry able to hold cap_pages pages, through dev. mu held. */
static int entry_alloc(sieve_devcache *dc, sieve_device *dev, const sieve_collection_info *info,
                       uint64_t cap_pages, dc_entry **out) {
    const sieve_collection_config *cfg = &info->config;
    dc_entry *e = calloc(1, sizeof *e);
    if (!e) return SIEVE_ENOMEM;
    e->cid = info->collection_id;
    e->generation = UINT64_MAX;
    e->dtype = cfg->dtype;
    e->dim = cfg->dim;
    e->rpp = cfg->rows_per_page;
    e->rows_bytes = (size_t)e->rpp * e->dim * sieve_dtype_size(e->dtype);
    e->slot_bytes = (e->rows_bytes + (size_t)e->rpp * 4 + 255) / 256 * 256;
    e->cap_pages = cap_pages;
    size_t mask_bytes = (size_t)(cap_pages * e->rpp / 8);
    int rc = 0;
    e->page_gen = malloc(cap_pages * sizeof *e->page_gen);
    void **hp = malloc(cap_pages * sizeof *hp);
    float **hn = malloc(cap_pages * sizeof *hn);
    if (!e->page_gen || !hp || !hn) rc = SIEVE_ENOMEM;
    if (!rc) rc = sieve_device_alloc(dev, cap_pages * e->slot_bytes, &e->base);
    if (!rc) rc = sieve_device_alloc(dev, cap_pages * sizeof(void *), (void **)&e->ptab);
    if (!rc) rc = sieve_device_alloc(dev, cap_pages * sizeof(float *), (void **)&e->ntab);
    if (!rc) rc = sieve_device_alloc(dev, mask_bytes, (void **)&e->deleted);
    if (!rc) {
        for (uint64_t p = 0; p < cap_pages; p++) {
            hp[p] = (unsigned char *)e->base + p * e->slot_bytes;
            hn[p] = (float *)((unsigned char *)hp[p] + e->rows_bytes);
            e->page_gen[p] = UINT64_MAX;
        }
        rc = sieve_device_upload(dev, e->ptab, hp, cap_pages * sizeof(void *));
    }
    if (!rc) rc = sieve_device_upload(dev, e->ntab, hn, cap_pages * sizeof(float *));
    free(hp);
    free(hn);
    e->bytes = entry_bytes(cap_pages, e->slot_bytes, e->rpp);
    dc->stats.resident_bytes += e->bytes;
    dc->stats.resident_collections++;
    if (rc) {
        entry_free(dc, dev, e);
        return rc;
    }
    *out = e;
    return 0;
}

/* Copies pages [p0, p1) of the snapshot into consecutive slots at dst (device), through
 * plain (pageable) uploads on dev. mu held. */
static int upload_pages(sieve_devcache *dc, sieve_device *dev, dc_entry *e,
                        const sieve_matrix *m, uint64_t p0, uint64_t p1, unsigned char *dst) {
    for (uint64_t p = p0; p < p1; p++) {
        unsigned char *slot = dst + (p - p0) * e->slot_bytes;
        int rc = sieve_device_upload(dev, slot, m->pages[p], e->rows_bytes);
        if (!rc) rc = sieve_device_upload(dev, slot + e->rows_bytes, m->norm_pages[p],
                                          (size_t)e->rpp * 4);
        if (rc) return rc;
        dc->stats.pages_uploaded++;
        dc->stats.bytes_uploaded += e->rows_bytes + (uint64_t)e->rpp * 4;
    }
    return 0;
}

/* Uploads a host bitmap of n_rows bits into a device mask of cap_words words (the words
 * past n_rows are cleared; NULL uploads all zero). */
static int upload_mask(sieve_device *dev, uint64_t *dst, size_t cap_words, const uint64_t *host,
                       uint64_t n_rows) {
    size_t words = (size_t)((n_rows + 63) / 64);
    uint64_t *tmp = calloc(cap_words ? cap_words : 1, 8);
    if (!tmp) return SIEVE_ENOMEM;
    if (host) memcpy(tmp, host, words * 8);
    int rc = sieve_device_upload(dev, dst, tmp, cap_words * 8);
    free(tmp);
    return rc;
}

static size_t entry_mask_words(const dc_entry *e) { return (size_t)(e->cap_pages * e->rpp / 64); }

static size_t find_entry(sieve_devcache *dc, uint32_t cid) {
    for (size_t i = 0; i < dc->n_entries; i++)
        if (dc->entries[i]->cid == cid) return i;
    return SIZE_MAX;
}

/* Makes the snapshot's collection resident and at the snapshot's generation, and takes a
 * reader reference on it (release with release_entry); *out NULL when it cannot fit (then
 * the caller streams). Device work goes through the lane's device. Locks mu. */
static int acquire_resident(sieve_devcache_lane *l, sieve_snapshot *snap, dc_entry **out) {
    sieve_devcache *dc = l->dc;
    const sieve_collection_info *info = sieve_snapshot_info(snap);
    const sieve_matrix *m = sieve_snapshot_matrix(snap);
    const uint64_t *gens = sieve_snapshot_page_generations(snap);
    *out = NULL;
    int rc = 0;
    pthread_mutex_lock(&dc->mu);
    for (;;) {
        size_t at = find_entry(dc, info->collection_id);
        dc_entry *e = at == SIZE_MAX ? NULL : dc->entries[at];
        int fits = e && e->dtype == info->config.dtype && e->dim == info->config.dim &&
                   e->rpp == info->config.rows_per_page && e->cap_pages >= info->pages;
        int current = fits && e->generation == info->generation && e->n_pages == info->pages;
        if (e && !current && e->readers) {
            /* searches are reading the copy we must change: wait for them, then look again
               (the entry may be gone by then) */
            pthread_cond_wait(&dc->cv, &dc->mu);
            continue;
        }
        if (e && !fits) {
            /* grown past its capacity (collection ids are never reused, so only growth
               lands here): start over with room to grow */
            remove_entry(dc, l->dev, at);
            e = NULL;
        }
        if (!e) {
            size_t slot = ((size_t)info->config.rows_per_page * info->config.dim *
                               sieve_dtype_size(info->config.dtype) +
                           (size_t)info->config.rows_per_page * 4 + 255) / 256 * 256;
            uint64_t cap = info->pages + info->pages / 4 + 1;
            if (entry_bytes(cap, slot, info->config.rows_per_page) > dc->opts.budget_bytes)
                cap = info->pages;
            uint64_t need = entry_bytes(cap, slot, info->config.rows_per_page);
            if (need > dc->opts.budget_bytes) break; /* stream instead */
            make_room(dc, l->dev, need);
            if (dc->stats.resident_bytes + need > dc->opts.budget_bytes) break;
            dc_entry **grown = realloc(dc->entries, (dc->n_entries + 1) * sizeof *grown);
            if (!grown) {
                rc = SIEVE_ENOMEM;
                break;
            }
            dc->entries = grown;
            rc = entry_alloc(dc, l->dev, info, cap, &e);
            if (rc == SIEVE_ENOMEM) { /* the device is fuller than the budget: stream */
                rc = 0;
                break;
            }
            if (rc) break;
            dc->entries[dc->n_entries++] = e;
        }
        if (e->generation != info->generation || e->n_pages != info->pages) {
            /* no reader: nothing reads these pages while they are rewritten */
            for (uint64_t p = 0; p < info->pages && !rc; p++) {
                if (p < e->n_pages && e->page_gen[p] == gens[p]) continue;
                rc = upload_pages(dc, l->dev, e, m, p, p + 1,
                                  (unsigned char *)e->base + p * e->slot_bytes);
                if (!rc) e->page_gen[p] = gens[p];
            }
            if (!rc) rc = upload_mask(l->dev, e->deleted, entry_mask_words(e), m->deleted,
                                      info->rows);
            if (rc) {
                e->generation = UINT64_MAX; /* partly refreshed: look again next time */
                break;
            }
            e->n_pages = info->pages;
            e->n_rows = info->rows;
            e->generation = info->generation;
        }
        e->last_use = ++dc->clock;
        e->readers++;
        *out = e;
        break;
    }
    pthread_mutex_unlock(&dc->mu);
    return rc;
}

static void release_entry(sieve_devcache *dc, dc_entry *e) {
    pthread_mutex_lock(&dc->mu);
    if (--e->readers == 0) pthread_cond_broadcast(&dc->cv);
    pthread_mutex_unlock(&dc->mu);
}

/* ------------------------------------------------------------------ streaming */

typedef struct stage_job {
    const sieve_matrix *m;
    uint64_t p0, p1;
    size_t rows_bytes, slot_bytes;
    uint32_t rpp;
    unsigned char *host;
} stage_job;

/* Copies pages into a pinned host buffer (runs beside the device search of the previous
 * chunk). */
static void *stage_pages(void *arg) {
    stage_job *j = arg;
    for (uint64_t p = j->p0; p < j->p1; p++) {
        unsigned char *slot = j->host + (p - j->p0) * j->slot_bytes;
        memcpy(slot, j->m->pages[p], j->rows_bytes);
        memcpy(slot + j->rows_bytes, j->m->norm_pages[p], (size_t)j->rpp * 4);
    }
    return NULL;
}

/* Merges run (n lists of cnt_b (row,key) best-first) into acc; both keyed by raw keys. */
static void merge_lists(uint32_t nq, uint32_t k, int64_t *acc_rows, float *acc_keys,
                        uint32_t *acc_cnt, const int64_t *rows, const float *keys,
                        const uint32_t *cnt, int64_t *tmp_rows, float *tmp_keys) {
    for (uint32_t q = 0; q < nq; q++) {
        const int64_t *ar = acc_rows + (size_t)q * k, *br = rows + (size_t)q * k;
        const float *ak = acc_keys + (size_t)q * k, *bk = keys + (size_t)q * k;
        uint32_t na = acc_cnt[q], nb = cnt[q], i = 0, j = 0, o = 0;
        while (o < k && (i < na || j < nb)) {
            int take_a;
            if (i >= na) take_a = 0;
            else if (j >= nb) take_a = 1;
            else take_a = ak[i] > bk[j] || (ak[i] == bk[j] && ar[i] < br[j]);
            if (take_a) {
                tmp_rows[o] = ar[i];
                tmp_keys[o++] = ak[i++];
            } else {
                tmp_rows[o] = br[j];
                tmp_keys[o++] = bk[j++];
            }
        }
        memcpy(acc_rows + (size_t)q * k, tmp_rows, o * sizeof *tmp_rows);
        memcpy(acc_keys + (size_t)q * k, tmp_keys, o * sizeof *tmp_keys);
        acc_cnt[q] = o;
    }
}

/* The deleted bitmap a search of this snapshot passes: none when every addressed row is live
 * (the GPU search then counts no eligible rows on the device: one wait for it less). */
static const uint64_t *deleted_for(const sieve_collection_info *info, const uint64_t *bits) {
    return info->points < info->rows ? bits : NULL;
}

/* The streamed search; stream_mu held. Adds the pages it copied to *pages_up. */
static int stream_locked(sieve_devcache_lane *l, sieve_snapshot *snap, const uint64_t *allowed,
                         const float *queries, uint32_t nq, const sieve_search_params *p,
                         int64_t *out_rows, float *out_scores, uint32_t *out_counts,
                         sieve_search_stats *stats, uint64_t *pages_up) {
    sieve_devcache *dc = l->dc;
    sieve_device *dev = l->dev;
    const sieve_collection_info *info = sieve_snapshot_info(snap);
    const sieve_matrix *m = sieve_snapshot_matrix(snap);
    const uint32_t rpp = info->config.rows_per_page, k = p->k, dim = info->config.dim;
    const size_t rows_bytes = (size_t)rpp * dim * sieve_dtype_size(info->config.dtype);
    const size_t slot = (rows_bytes + (size_t)rpp * 4 + 255) / 256 * 256;
    uint64_t chunk = dc->opts.stream_chunk_pages;
    if (!chunk) {
        uint64_t by_budget = dc->opts.budget_bytes / 4 / slot;
        uint64_t by_gib = (1ull << 30) / slot;
        chunk = by_budget < by_gib ? by_budget : by_gib;
    }
    if (chunk < 1) chunk = 1;
    if (chunk > info->pages) chunk = info->pages;
    int rc = 0;
    size_t need = (size_t)chunk * slot;
    if (dc->stream_bytes < need) {
        stream_free(dc, dev);
        for (int i = 0; i < 2 && !rc; i++) {
            rc = sieve_device_alloc(dev, need, &dc->stream_dev[i]);
            if (!rc) rc = sieve_host_alloc_pinned(dev, need, &dc->stream_host[i]);
        }
        if (rc) {
            stream_free(dc, dev);
            return rc;
        }
        dc->stream_bytes = need;
    }
    size_t nr = (size_t)nq * k;
    int64_t *crows = malloc(nr * 8), *trows = malloc((size_t)k * 8);
    float *ckeys = malloc(nr * 4), *akeys = malloc(nr * 4), *tkeys = malloc((size_t)k * 4);
    uint32_t *ccnt = malloc((size_t)nq * 4);
    void **ptab = NULL, **hp = malloc(chunk * sizeof *hp);
    float **ntab = NULL, **hn = malloc(chunk * sizeof *hn);
    uint64_t *del = NULL, *alw = NULL;
    size_t mask_bytes = (size_t)(chunk * rpp / 8);
    if (!crows || !trows || !ckeys || !akeys || !tkeys || !ccnt || !hp || !hn) rc = SIEVE_ENOMEM;
    if (!rc) rc = sieve_device_alloc(dev, chunk * sizeof(void *), (void **)&ptab);
    if (!rc) rc = sieve_device_alloc(dev, chunk * sizeof(float *), (void **)&ntab);
    if (!rc) rc = sieve_device_alloc(dev, mask_bytes, (void **)&del);
    if (!rc && allowed) rc = sieve_device_alloc(dev, mask_bytes, (void **)&alw);
    sieve_search_params cp = *p;
    cp.flags |= SIEVE_SEARCH_RAW_KEYS;
    sieve_search_stats total, st;
    memset(&total, 0, sizeof total);
    for (uint32_t q = 0; q < nq; q++) out_counts[q] = 0;
    pthread_t th;
    stage_job job = {m, 0, 0, rows_bytes, slot, rpp, NULL};
    int have_thread = 0;
    /* stage chunk 0 now; then, while chunk c is searched, chunk c+1 is staged */
    if (!rc) {
        job.p1 = chunk < info->pages ? chunk : info->pages;
        job.host = dc->stream_host[0];
        stage_pages(&job);
    }
    int cur = 0;
    for (uint64_t p0 = 0; !rc && p0 < info->pages; p0 += chunk, cur ^= 1) {
        uint64_t p1 = p0 + chunk < info->pages ? p0 + chunk : info->pages;
        uint64_t rows0 = p0 * rpp;
        uint64_t nrows = (p1 == info->pages ? info->rows : p1 * rpp) - rows0;
        rc = sieve_device_upload(dev, dc->stream_dev[cur], dc->stream_host[cur], (p1 - p0) * slot);
        if (rc) break;
        *pages_up += p1 - p0;
        if (p1 < info->pages) {
            job.p0 = p1;
            job.p1 = p1 + chunk < info->pages ? p1 + chunk : info->pages;
            job.host = dc->stream_host[cur ^ 1];
            have_thread = pthread_create(&th, NULL, stage_pages, &job) == 0;
            if (!have_thread) stage_pages(&job);
        }
        for (uint64_t i = 0; i < p1 - p0; i++) {
            hp[i] = (unsigned char *)dc->stream_dev[cur] + i * slot;
            hn[i] = (float *)((unsigned char *)hp[i] + rows_bytes);
        }
        rc = sieve_device_upload(dev, ptab, hp, (p1 - p0) * sizeof(void *));
        if (!rc) rc = sieve_device_upload(dev, ntab, hn, (p1 - p0) * sizeof(float *));
        size_t words = (size_t)((nrows + 63) / 64);
        const uint64_t *mdel = deleted_for(info, m->deleted);
        if (!rc && mdel) rc = sieve_device_upload(dev, del, mdel + rows0 / 64, words * 8);
        if (!rc && allowed) rc = sieve_device_upload(dev, alw, allowed + rows0 / 64, words * 8);
        sieve_matrix cm = {m->dtype, m->dim, nrows, rpp, (const void *const *)ptab,
                           (const float *const *)ntab, mdel ? del : NULL, allowed ? alw : NULL,
                           dc->stream_dev[cur], slot};
        cp.k = k <= nrows ? k : (uint32_t)nrows;
        if (!rc) rc = sieve_knn(dev, &cm, queries, nq, &cp, NULL, 0, crows, ckeys, ccnt, NULL, &st);
        if (have_thread) {
            pthread_join(th, NULL);
            have_thread = 0;
        }
        if (rc) break;
        sieve_search_stats_add(&total, &st);
        /* chunk-relative rows -> collection rows; lists of cp.k re-spaced to k */
        for (uint32_t q = nq; q-- > 0;) {
            for (uint32_t i = cp.k; i-- > 0;) {
                crows[(size_t)q * k + i] = crows[(size_t)q * cp.k + i] + (crows[(size_t)q * cp.k + i] >= 0 ? (int64_t)rows0 : 0);
                ckeys[(size_t)q * k + i] = ckeys[(size_t)q * cp.k + i];
            }
        }
        merge_lists(nq, k, out_rows, akeys, out_counts, crows, ckeys, ccnt, trows, tkeys);
    }
    if (have_thread) pthread_join(th, NULL);
    if (!rc) {
        for (uint32_t q = 0; q < nq; q++)
            for (uint32_t i = 0; i < k; i++) {
                size_t at = (size_t)q * k + i;
                if (i >= out_counts[q]) {
                    out_rows[at] = -1;
                    out_scores[at] = NAN;
                } else if (p->metric == SIEVE_METRIC_EUCLID) {
                    out_scores[at] = sieve_euclid_distance(queries + (size_t)q * dim, dim, akeys[at]);
                } else {
                    out_scores[at] = akeys[at];
                }
            }
        total.queries = nq;
        if (stats) *stats = total;
    }
    sieve_device_free(dev, ptab);
    sieve_device_free(dev, ntab);
    sieve_device_free(dev, del);
    sieve_device_free(dev, alw);
    free(crows);
    free(trows);
    free(ckeys);
    free(akeys);
    free(tkeys);
    free(ccnt);
    free(hp);
    free(hn);
    return rc;
}

static int stream_search(sieve_devcache_lane *l, sieve_snapshot *snap, const uint64_t *allowed,
                         const float *queries, uint32_t nq, const sieve_search_params *p,
                         int64_t *out_rows, float *out_scores, uint32_t *out_counts,
                         sieve_search_stats *stats) {
    sieve_devcache *dc = l->dc;
    const sieve_collection_info *info = sieve_snapshot_info(snap);
    uint64_t pages_up = 0;
    pthread_mutex_lock(&dc->stream_mu);
    int rc = stream_locked(l, snap, allowed, queries, nq, p, out_rows, out_scores, out_counts,
                           stats, &pages_up);
    pthread_mutex_unlock(&dc->stream_mu);
    const size_t rows_bytes = (size_t)info->config.rows_per_page * info->config.dim *
                              sieve_dtype_size(info->config.dtype);
    const size_t slot = (rows_bytes + (size_t)info->config.rows_per_page * 4 + 255) / 256 * 256;
    pthread_mutex_lock(&dc->mu);
    dc->stats.pages_uploaded += pages_up;
    dc->stats.bytes_uploaded += pages_up * slot;
    if (!rc) dc->stats.streamed_searches++;
    pthread_mutex_unlock(&dc->mu);
    return rc;
}

int sieve_devcache_lane_knn(sieve_devcache_lane *l, sieve_snapshot *snap,
                            const uint64_t *allowed, const float *queries, uint32_t n_queries,
                            const sieve_search_params *p, int64_t *out_rows, float *out_scores,
                            uint32_t *out_counts, sieve_search_stats *stats) {
    if (!l || !snap || !queries || !p || !out_rows || !out_scores || !out_counts ||
        n_queries == 0)
        return SIEVE_EINVAL;
    const sieve_collection_info *info = sieve_snapshot_info(snap);
    if (info->rows == 0 || p->k == 0 || p->k > info->rows) return SIEVE_EINVAL;
    if (l->dc->direct) {
        sieve_matrix m = *sieve_snapshot_matrix(snap);
        m.deleted = deleted_for(info, m.deleted);
        m.allowed = allowed;
        return sieve_knn(l->dev, &m, queries, n_queries, p, NULL, 0, out_rows, out_scores,
                         out_counts, NULL, stats);
    }
    dc_entry *e = NULL;
    int rc = acquire_resident(l, snap, &e);
    if (rc) return rc;
    if (!e) return stream_search(l, snap, allowed, queries, n_queries, p, out_rows, out_scores,
                                 out_counts, stats);
    /* e's shape fields (cap_pages, rpp, tables) do not change while we hold a reference */
    if (allowed) {
        size_t words = entry_mask_words(e);
        if (l->allowed_words < words) {
            sieve_device_free(l->dev, l->allowed);
            l->allowed = NULL;
            l->allowed_words = 0;
            rc = sieve_device_alloc(l->dev, words * 8, (void **)&l->allowed);
            if (!rc) l->allowed_words = words;
        }
        if (!rc) rc = upload_mask(l->dev, l->allowed, words, allowed, info->rows);
    }
    if (!rc) {
        sieve_matrix m = {e->dtype, e->dim, info->rows, e->rpp, (const void *const *)e->ptab,
                          (const float *const *)e->ntab, deleted_for(info, e->deleted),
                          allowed ? l->allowed : NULL, e->base, e->slot_bytes};
        rc = sieve_knn(l->dev, &m, queries, n_queries, p, NULL, 0, out_rows, out_scores,
                       out_counts, NULL, stats);
        /* on failure work may still be queued on this lane's stream: let it drain before
           the pages may change */
        if (rc) (void)sieve_device_sync(l->dev);
    }
    release_entry(l->dc, e);
    return rc;
}

int sieve_devcache_knn(sieve_devcache *dc, sieve_snapshot *snap, const uint64_t *allowed,
                       const float *queries, uint32_t n_queries, const sieve_search_params *p,
                       int64_t *out_rows, float *out_scores, uint32_t *out_counts,
                       sieve_search_stats *stats) {
    if (!dc) return SIEVE_EINVAL;
    return sieve_devcache_lane_knn(dc->own, snap, allowed, queries, n_queries, p, out_rows,
                                   out_scores, out_counts, stats);
}

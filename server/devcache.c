/* devcache.c: device-resident copies of collections, for search devices whose memory is
 * not host memory (CUDA).
 *
 * Owns: per (worker device, collection) the device copy of every vector page and norm
 * page, the device arrays of page pointers the kernel reads, the deleted bitmap and one
 * allowed-mask buffer. A page is uploaded when it is new or its generation in the snapshot
 * differs from the one resident (sieve_snapshot_page_generations), so a search after an
 * acknowledged write sees it and unchanged pages are never copied twice.
 * Must not: know about HTTP or filters; it only copies what a snapshot shows.
 *
 * Deviation from design.md (which puts the device page cache in the store): the store's
 * public header has no device residency API yet, so the batcher keeps this minimal cache.
 * It holds whole collections (no streaming of non-resident pages): a collection larger
 * than device memory fails its searches with "out of memory".
 *
 * Thread-safety: a devcache belongs to one batcher worker (one device) and is used by that
 * worker's thread only.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "server.h"

typedef struct devcoll {
    char name[SIEVE_NAME_MAX + 1];
    uint32_t collection_id;
    sieve_dtype dtype;
    uint32_t dim, rpp;
    size_t npages, cap;        /* resident pages; capacity of the arrays below */
    void **pages;              /* device pointers, one per page */
    float **norms;
    uint64_t *gens;            /* generation of each resident page */
    const void **d_pages;      /* device array of the page pointers */
    const float **d_norms;
    uint64_t *d_deleted;       /* device bitmap */
    size_t deleted_words;
    uint64_t last_used;
    struct devcoll *next;
} devcoll;

struct sieve__devcache {
    sieve_device *dev;
    devcoll *colls;
    uint64_t *d_allowed;
    size_t allowed_words;
    uint64_t tick;
    uint64_t bytes; /* device bytes held */
};

int sieve__devcache_create(sieve_device *dev, sieve__devcache **out) {
    sieve__devcache *c = calloc(1, sizeof *c);
    if (!c) return SIEVE_ENOMEM;
    c->dev = dev;
    *out = c;
    return 0;
}

static void coll_free(sieve__devcache *c, devcoll *d) {
    size_t es = sieve_dtype_size(d->dtype);
    for (size_t i = 0; i < d->npages; i++) {
        sieve_device_free(c->dev, d->pages[i]);
        sieve_device_free(c->dev, d->norms[i]);
        c->bytes -= (uint64_t)d->rpp * d->dim * es + (uint64_t)d->rpp * sizeof(float);
    }
    sieve_device_free(c->dev, (void *)d->d_pages);
    sieve_device_free(c->dev, (void *)d->d_norms);
    sieve_device_free(c->dev, d->d_deleted);
    c->bytes -= (uint64_t)d->cap * 2 * sizeof(void *) + (uint64_t)d->deleted_words * 8;
    free(d->pages);
    free(d->norms);
    free(d->gens);
    free(d);
}

void sieve__devcache_destroy(sieve__devcache *c) {
    if (!c) return;
    while (c->colls) {
        devcoll *d = c->colls;
        c->colls = d->next;
        coll_free(c, d);
    }
    sieve_device_free(c->dev, c->d_allowed);
    free(c);
}

uint64_t sieve__devcache_bytes(const sieve__devcache *c) { return c ? c->bytes : 0; }

/* The entry of this collection; a stale entry of a dropped collection of the same name is
 * freed first. */
static devcoll *entry(sieve__devcache *c, const sieve_collection_info *info) {
    for (devcoll **p = &c->colls; *p; p = &(*p)->next) {
        devcoll *d = *p;
        if (strcmp(d->name, info->config.name)) continue;
        if (d->collection_id == info->collection_id) return d;
        *p = d->next;
        coll_free(c, d);
        break;
    }
    devcoll *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    memcpy(d->name, info->config.name, sizeof d->name);
    d->collection_id = info->collection_id;
    d->dtype = info->config.dtype;
    d->dim = info->config.dim;
    d->rpp = info->config.rows_per_page;
    d->next = c->colls;
    c->colls = d;
    return d;
}

static int grow_arrays(sieve__devcache *c, devcoll *d, size_t need) {
    if (need <= d->cap) return 0;
    size_t cap = d->cap ? d->cap : 16;
    while (cap < need) cap *= 2;
    void **pages = realloc(d->pages, cap * sizeof *pages);
    if (!pages) return SIEVE_ENOMEM;
    d->pages = pages;
    float **norms = realloc(d->norms, cap * sizeof *norms);
    if (!norms) return SIEVE_ENOMEM;
    d->norms = norms;
    uint64_t *gens = realloc(d->gens, cap * sizeof *gens);
    if (!gens) return SIEVE_ENOMEM;
    d->gens = gens;
    void *dp = NULL, *dn = NULL;
    int rc = sieve_device_alloc(c->dev, cap * sizeof(void *), &dp);
    if (!rc) rc = sieve_device_alloc(c->dev, cap * sizeof(void *), &dn);
    if (rc) {
        sieve_device_free(c->dev, dp);
        return rc;
    }
    sieve_device_free(c->dev, (void *)d->d_pages);
    sieve_device_free(c->dev, (void *)d->d_norms);
    c->bytes += (uint64_t)(cap - d->cap) * 2 * sizeof(void *);
    d->d_pages = dp;
    d->d_norms = dn;
    d->cap = cap;
    return 0;
}

/* Device buffer of at least words 64-bit words (grown, contents undefined). */
static int ensure_words(sieve__devcache *c, uint64_t **buf, size_t *have, size_t words) {
    if (words <= *have && *buf) return 0;
    void *p = NULL;
    int rc = sieve_device_alloc(c->dev, (words ? words : 1) * sizeof(uint64_t), &p);
    if (rc) return rc;
    sieve_device_free(c->dev, *buf);
    c->bytes += (uint64_t)(words - *have) * 8;
    *buf = p;
    *have = words;
    return 0;
}

int sieve__devcache_matrix(sieve__devcache *c, sieve_snapshot *snap, sieve_matrix *m) {
    const sieve_collection_info *info = sieve_snapshot_info(snap);
    const sieve_matrix *h = sieve_snapshot_matrix(snap);
    const uint64_t *gens = sieve_snapshot_page_generations(snap);
    devcoll *d = entry(c, info);
    if (!d) return SIEVE_ENOMEM;
    d->last_used = ++c->tick;
    size_t es = sieve_dtype_size(d->dtype);
    size_t npages = (size_t)((h->n_rows + d->rpp - 1) / d->rpp);
    int rc = grow_arrays(c, d, npages);
    if (rc) return rc;
    size_t page_bytes = (size_t)d->rpp * d->dim * es;
    for (size_t p = d->npages; p < npages; p++) { /* new pages */
        void *vp = NULL, *np = NULL;
        rc = sieve_device_alloc(c->dev, page_bytes, &vp);
        if (!rc) rc = sieve_device_alloc(c->dev, (size_t)d->rpp * sizeof(float), &np);
        if (rc) {
            sieve_device_free(c->dev, vp);
            return rc;
        }
        d->pages[p] = vp;
        d->norms[p] = np;
        d->gens[p] = UINT64_MAX; /* forces the upload below */
        d->npages = p + 1;
        c->bytes += page_bytes + (uint64_t)d->rpp * sizeof(float);
    }
    for (size_t p = 0; p < npages; p++) {
        uint64_t g = gens ? gens[p] : info->generation;
        if (d->gens[p] == g && gens) continue;
        uint64_t rows = h->n_rows - (uint64_t)p * d->rpp;
        if (rows > d->rpp) rows = d->rpp;
        rc = sieve_device_upload(c->dev, d->pages[p], h->pages[p], (size_t)rows * d->dim * es);
        if (!rc && h->norm_pages)
            rc = sieve_device_upload(c->dev, d->norms[p], h->norm_pages[p],
                                     (size_t)rows * sizeof(float));
        if (rc) {
            d->gens[p] = UINT64_MAX;
            return rc;
        }
        d->gens[p] = g;
    }
    /* The pointer arrays and the deleted bitmap are small: refresh them every time. */
    if (npages) {
        rc = sieve_device_upload(c->dev, (void *)d->d_pages, d->pages, npages * sizeof(void *));
        if (!rc)
            rc = sieve_device_upload(c->dev, (void *)d->d_norms, d->norms,
                                     npages * sizeof(void *));
        if (rc) return rc;
    }
    size_t words = (size_t)((h->n_rows + 63) / 64);
    const uint64_t *deleted = NULL;
    if (h->deleted && words) {
        rc = ensure_words(c, &d->d_deleted, &d->deleted_words, words);
        if (!rc) rc = sieve_device_upload(c->dev, d->d_deleted, h->deleted, words * 8);
        if (rc) return rc;
        deleted = d->d_deleted;
    }
    *m = *h;
    m->pages = d->d_pages;
    m->norm_pages = h->norm_pages ? d->d_norms : NULL;
    m->deleted = deleted;
    m->allowed = NULL;
    return 0;
}

int sieve__devcache_mask(sieve__devcache *c, const uint64_t *mask, uint64_t rows,
                         const uint64_t **out) {
    size_t words = (size_t)((rows + 63) / 64);
    int rc = ensure_words(c, &c->d_allowed, &c->allowed_words, words);
    if (!rc && words) rc = sieve_device_upload(c->dev, c->d_allowed, mask, words * 8);
    if (rc) return rc;
    *out = c->d_allowed;
    return 0;
}

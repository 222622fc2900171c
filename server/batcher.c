/* batcher.c: the query batcher of sieve-server.
 *
 * Owns: one queue per collection and the batch workers: --batch-workers of them per search
 * device (default 2 on a GPU, 1 on the CPU). A worker takes the collection whose oldest
 * query has waited longest, waits up to the batch window for company while fewer than
 * batch_max queries wait, then takes up to batch_max of them and answers them inside one
 * store snapshot: queries with the same filter share one allowed-row mask (built by visiting
 * the rows, reused across batches while the collection does not change), queries with the
 * same filter and k share one kernel call, and result rows are mapped to ids (through the
 * worker's row -> id cache, sieve_idcache) and, when asked, payload bytes and vectors, in
 * that same snapshot. When the last query of a request is answered, the worker resumes the
 * connection; the reply's JSON is built afterwards on the connection's own HTTP thread
 * (sieve__search_job_reply), not here.
 * Must not: parse HTTP bodies (routes validate before submitting), format replies, or write
 * to the store.
 *
 * Pipelining: the workers of one device run concurrently, so while one worker's batch is on
 * the device the next worker collects, opens its snapshot and prepares the next batch, and
 * a finished worker maps rows to ids and resumes connections beside the next kernel call.
 * Each worker owns its own device handle (so its own stream and kernel scratch, see
 * kernels/sieve_kernels.h), its own lane into the device's page cache, its own mask cache,
 * id cache, host buffers and snapshot; the only things the workers of a device share are
 * the queues (under the batcher's mutex) and the page cache (sieve_devcache, which locks
 * itself: a resident collection is refreshed only while no worker's search reads it).
 *
 * Snapshots: a worker keeps its snapshot for the next batch of the same collection while
 * sieve_snapshot_is_current says nothing changed (at most SNAP_MAX_AGE_S), and closes it
 * before it goes idle, so a writer that must grow the map never waits for an idle worker.
 *
 * Devices: every search goes through the store's device page cache: on the CPU it searches
 * the snapshot's pages where they lie in LMDB's map; on a GPU it keeps pages resident
 * (refreshed by page generation) and streams collections larger than its budget, exactly.
 *
 * Thread-safety: submit may be called from any thread; everything else is internal.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"

typedef struct cqueue {
    char name[SIEVE_NAME_MAX + 1];
    sieve__query *head, *tail;
    size_t len;
    size_t inflight;     /* queries taken by workers and not answered yet */
    size_t expect;       /* queries in the system when a batch was last answered: its own,
                            those queued meanwhile and those in other workers' hands */
    double last_done;    /* when that batch was answered (monotonic seconds) */
    double last_cost;    /* how long answering it took (seconds) */
    struct cqueue *next;
} cqueue;

/* A cached allowed-row mask: valid while the collection's generation is unchanged. */
typedef struct mask_entry {
    uint32_t collection_id;
    uint64_t generation;
    char *key;
    uint64_t *mask;
    uint64_t matches;
    uint64_t last_used;
} mask_entry;
#define MASK_CACHE 8

/* A kept snapshot serves further batches for at most this long (LMDB cannot reuse pages
 * freed after a read transaction began while it is open). */
#define SNAP_MAX_AGE_S 0.5

/* Row -> point id cache of each worker (sieve_idcache): 18 bytes a row, so 256 MiB hold the
 * ids of about 15M rows; collections past that look the rest up in LMDB per hit. */
#define ID_CACHE_BYTES ((size_t)256 << 20)

typedef struct worker {
    sieve__batcher *b;
    pthread_t thread;
    int started;
    struct worker *head;        /* the first worker of this device: owns dc and the gauges */
    sieve_device *dev;          /* this worker's own handle (stream, kernel scratch) */
    sieve_devcache *dc;         /* the device's page cache (owned by head) */
    sieve_devcache_lane *lane;  /* this worker's way into dc */
    char spec[64];
    char desc[sizeof(((sieve_device_info *)0)->name) + 64]; /* device name, fixed at open */
    int is_cuda;
    uint32_t group_size;        /* workers on this device (head only) */
    /* gauges of the device, in head: */
    atomic_ullong mem_used;     /* device memory in use, refreshed after batches */
    atomic_ullong cache_bytes;  /* the page cache's resident bytes */
    atomic_ullong pages_uploaded, streamed; /* the page cache's counters */
    atomic_ullong last_info_ns; /* when mem_used was last queried */
    sieve__query **batch;       /* batch_max slots */
    sieve_idcache *idc;         /* row -> point id of the answers' rows (ID_CACHE_BYTES) */
    struct cqueue *queue;       /* the queue of the batch in hand */
    mask_entry masks[MASK_CACHE];
    uint64_t tick;
    /* the kept snapshot */
    sieve_snapshot *snap;
    char snap_name[SIEVE_NAME_MAX + 1];
    double snap_opened;
    /* host buffers of one kernel call, grown as needed; qbuf (the queries), rbuf and sbuf
       (the results) are page-locked on a CUDA device (sieve_host_alloc_pinned on dev, freed
       with it), so queries and results cross the bus by one copy each instead of through
       the kernel's staging buffer */
    float *qbuf;
    int64_t *rbuf;
    float *sbuf;
    uint32_t *cbuf;
    size_t qcap, rcap, scap, ccap;
} worker;

struct sieve__batcher {
    sieve_server *srv;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    cqueue *queues;
    size_t queued;
    int stopping;
    worker *workers;
    size_t n_workers;
};

/* ---------------------------------------------------------------- jobs */

void sieve__job_free(sieve__search_job *job) {
    if (!job) return;
    for (size_t i = 0; i < job->n; i++) {
        sieve__query *q = &job->q[i];
        free(q->vector);
        sieve__filter_free(q->filter);
        free(q->filter_key);
        sieve__psel_free(&q->payload);
        free(q->hits);
        sieve__sbuf_free(&q->payloads);
        free(q->vectors);
    }
    free(job->q);
    free(job);
}

/* Marks q answered; the last answer of a job resumes the request, whose HTTP thread then
 * builds the reply from the queries' hits (the decrement publishes them to that thread). */
static void query_done(sieve__query *q) {
    sieve__search_job *job = q->job;
    if (atomic_fetch_sub(&job->pending, 1) == 1) sieve__req_resume(job->req);
}

static void query_fail(sieve__query *q, unsigned status, const char *msg) {
    q->err.status = status;
    snprintf(q->err.msg, sizeof q->err.msg, "%s", msg);
}

/* ---------------------------------------------------------------- queues */

static cqueue *find_queue(sieve__batcher *b, const char *name, int create) {
    for (cqueue *q = b->queues; q; q = q->next)
        if (!strcmp(q->name, name)) return q;
    if (!create) return NULL;
    cqueue *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    snprintf(q->name, sizeof q->name, "%s", name);
    q->next = b->queues;
    b->queues = q;
    return q;
}

int sieve__batcher_submit(sieve__batcher *b, sieve__search_job *job) {
    pthread_mutex_lock(&b->mu);
    if (b->stopping) {
        pthread_mutex_unlock(&b->mu);
        return SIEVE_ECLOSED;
    }
    cqueue *cq = find_queue(b, job->collection, 1);
    if (!cq) {
        pthread_mutex_unlock(&b->mu);
        return SIEVE_ENOMEM;
    }
    if (cq->len + job->n > SIEVE_SERVER_MAX_QUEUE) {
        pthread_mutex_unlock(&b->mu);
        return SIEVE_EBUSY;
    }
    double now = sieve__now_s();
    atomic_store(&job->pending, job->n);
    for (size_t i = 0; i < job->n; i++) {
        sieve__query *q = &job->q[i];
        q->job = job;
        q->t_enqueue = now;
        q->next = NULL;
        if (cq->tail) cq->tail->next = q;
        else cq->head = q;
        cq->tail = q;
    }
    cq->len += job->n;
    b->queued += job->n;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return 0;
}

uint64_t sieve__batcher_queued(sieve__batcher *b) {
    pthread_mutex_lock(&b->mu);
    uint64_t n = b->queued;
    pthread_mutex_unlock(&b->mu);
    return n;
}

/* The queue whose head has waited longest, or NULL when all are empty. */
static cqueue *oldest_queue(sieve__batcher *b) {
    cqueue *best = NULL;
    for (cqueue *q = b->queues; q; q = q->next)
        if (q->head && (!best || q->head->t_enqueue < best->head->t_enqueue)) best = q;
    return best;
}

static void abs_deadline(struct timespec *ts, double wait_s) {
    clock_gettime(CLOCK_MONOTONIC, ts);
    double ns = (double)ts->tv_nsec + wait_s * 1e9;
    ts->tv_sec += (time_t)(ns / 1e9);
    ts->tv_nsec = (long)fmod(ns, 1e9);
}

static void drop_snapshot(worker *w) {
    sieve_snapshot_close(w->snap);
    w->snap = NULL;
    w->snap_name[0] = 0;
}

/* Takes the next batch (up to batch_max queries of one collection) into w->batch, waiting
 * for work and for the batch window. Returns the count, or 0 when stopping and drained. */
static size_t take_batch(worker *w, char *name) {
    sieve__batcher *b = w->b;
    const sieve_server_config *cfg = &b->srv->cfg;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        cqueue *cq = oldest_queue(b);
        if (!cq) {
            if (b->stopping) {
                pthread_mutex_unlock(&b->mu);
                return 0;
            }
            if (w->snap) {
                /* going idle: a kept snapshot must not hold up a writer (map growth) */
                pthread_mutex_unlock(&b->mu);
                drop_snapshot(w);
                pthread_mutex_lock(&b->mu);
                continue;
            }
            pthread_cond_wait(&b->cv, &b->mu);
            continue;
        }
        /* Batch window. Closed-loop clients come back soon after their answers, so while
         * fewer queries are queued than the queue expects, it waits for the rest: up to
         * batch_wait_us plus 5% of the previous batch's cost, counted from the later of its
         * head's arrival and that batch's completion. It expects the queries that were in
         * the system when a batch was last answered (that batch's, those queued meanwhile
         * and those other workers held) less those other workers hold now: with two
         * workers and 64 closed-loop clients each batch expects the 32 not on the device.
         * A lone client never waits (it expects 1), and the wait ends as soon as the
         * expected count is there. A burst after a quiet spell is caught by the count of
         * searches whose requests have arrived but are still being received or parsed.
         * Other workers may take the queue meanwhile; then we look again. */
        double now = sieve__now_s();
        double since = now - (cq->head->t_enqueue > cq->last_done ? cq->head->t_enqueue
                                                                    : cq->last_done);
        double window = cfg->batch_wait_us * 1e-6 + 0.05 * cq->last_cost;
        if (!cfg->batch_wait_us) window = 0;
        /* ... and for searches already on their way: headers in, query not yet queued */
        size_t incoming = (size_t)atomic_load(&b->srv->searches_incoming);
        size_t expect = cq->expect > cq->inflight ? cq->expect - cq->inflight : 0;
        if (expect < cq->len + incoming) expect = cq->len + incoming;
        if (expect > cfg->batch_max) expect = cfg->batch_max;
        if (cq->len < expect && since < window && !b->stopping) {
            struct timespec ts;
            abs_deadline(&ts, window - since);
            pthread_cond_timedwait(&b->cv, &b->mu, &ts);
            continue;
        }
        size_t n = cq->len < cfg->batch_max ? cq->len : cfg->batch_max;
        for (size_t i = 0; i < n; i++) {
            sieve__query *q = cq->head;
            cq->head = q->next;
            q->next = NULL;
            w->batch[i] = q;
        }
        if (!cq->head) cq->tail = NULL;
        cq->len -= n;
        cq->inflight += n;
        b->queued -= n;
        w->queue = cq;
        snprintf(name, SIEVE_NAME_MAX + 1, "%s", cq->name);
        pthread_mutex_unlock(&b->mu);
        return n;
    }
}

/* ---------------------------------------------------------------- masks */

static void mask_cache_clear(worker *w) {
    for (int i = 0; i < MASK_CACHE; i++) {
        free(w->masks[i].key);
        free(w->masks[i].mask);
        memset(&w->masks[i], 0, sizeof w->masks[i]);
    }
}

/* The allowed-row mask of filter f (canonical key) in snap; borrowed from the cache.
 * Returns 0 or a SIEVE_E* code. */
static int get_mask(worker *w, sieve_snapshot *snap, const sieve__filter *f, const char *key,
                    const uint64_t **mask, uint64_t *matches) {
    const sieve_collection_info *info = sieve_snapshot_info(snap);
    sieve__metrics *m = w->b->srv->metrics;
    w->tick++;
    int victim = 0;
    for (int i = 0; i < MASK_CACHE; i++) {
        mask_entry *e = &w->masks[i];
        if (e->key && e->collection_id == info->collection_id &&
            e->generation == info->generation && !strcmp(e->key, key)) {
            e->last_used = w->tick;
            *mask = e->mask;
            *matches = e->matches;
            sieve__metrics_filter(m, 0, 1);
            return 0;
        }
        if (w->masks[i].last_used < w->masks[victim].last_used) victim = i;
    }
    double t0 = sieve__now_s();
    uint64_t *bits = NULL, hits = 0;
    int rc = sieve__filter_mask(f, snap, &bits, &hits);
    if (rc) return rc;
    char *k = strdup(key);
    if (!k) {
        free(bits);
        return SIEVE_ENOMEM;
    }
    mask_entry *e = &w->masks[victim];
    free(e->key);
    free(e->mask);
    e->collection_id = info->collection_id;
    e->generation = info->generation;
    e->key = k;
    e->mask = bits;
    e->matches = hits;
    e->last_used = w->tick;
    sieve__metrics_filter(m, sieve__now_s() - t0, 0);
    *mask = bits;
    *matches = hits;
    return 0;
}

/* ---------------------------------------------------------------- answering */

/* The capacity a buffer of cap elements grows to for n (doubling from 64). */
static size_t grown_cap(size_t cap, size_t n) {
    size_t c = cap ? cap : 64;
    while (c < n) c *= 2;
    return c;
}

/* Grows a page-locked buffer of w's device (plain memory on the CPU device) to hold n
 * elements of size sz; the contents are not kept. Returns 0 or -1. */
static int grow_pinned(worker *w, void **p, size_t *cap, size_t n, size_t sz) {
    if (*cap >= n) return 0;
    const size_t c = grown_cap(*cap, n);
    void *q = NULL;
    if (sieve_host_alloc_pinned(w->dev, c * sz, &q)) return -1;
    sieve_host_free_pinned(w->dev, *p);
    *p = q;
    *cap = c;
    return 0;
}

/* Grows a buffer to hold n elements of size sz. Returns 0 or -1. */
static int grow(void **p, size_t *cap, size_t n, size_t sz) {
    if (*cap >= n) return 0;
    const size_t c = grown_cap(*cap, n);
    void *q = realloc(*p, c * sz);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* Hits ahead whose cached id the hit loop asks the CPU to load
 * (sieve_snapshot_row_id_prefetch). */
#define ID_PREFETCH_AHEAD 8

/* Keeps q's results from the kernel's rows/scores (count real entries): point ids, and the
 * stored payload bytes and vector when the query asks for them, all read in snap. The JSON
 * is written later by the connection's thread. */
static void collect_hits(sieve_snapshot *snap, sieve_idcache *idc, sieve__query *q,
                         sieve_metric metric, const int64_t *rows, const float *scores,
                         uint32_t count) {
    uint32_t n = 0;
    for (uint32_t i = q->offset; i < count; i++) {
        if (rows[i] < 0) break;
        float s = scores[i];
        /* Euclid reports a distance (smaller is better): keep distance <= threshold;
           results are sorted best first, so the first failure ends the list */
        if (q->has_threshold &&
            (metric == SIEVE_METRIC_EUCLID ? !(s <= q->threshold) : !(s >= q->threshold)))
            break;
        n++;
    }
    q->n_hits = 0;
    if (!n) return;
    q->hits = malloc((size_t)n * sizeof *q->hits);
    if (q->with_vector) q->vectors = malloc((size_t)n * q->dim * sizeof(float));
    if (!q->hits || (q->with_vector && !q->vectors)) {
        query_fail(q, 500, "out of memory");
        return;
    }
    for (uint32_t j = 0; j < n; j++) {
        uint32_t i = q->offset + j;
        uint64_t row = (uint64_t)rows[i];
        sieve__hit *h = &q->hits[j];
        if (j + ID_PREFETCH_AHEAD < n) /* the row ids are random reads: overlap them */
            sieve_snapshot_row_id_prefetch(snap, idc, (uint64_t)rows[i + ID_PREFETCH_AHEAD]);
        memset(h, 0, sizeof *h);
        h->score = scores[i];
        if (sieve_snapshot_row_id_cached(snap, idc, row, &h->id)) {
            query_fail(q, 500, "internal error: a result row has no point id");
            return;
        }
        if (q->payload.mode != SIEVE_PSEL_NONE) {
            const char *pj = NULL;
            size_t pl = 0;
            if (sieve_snapshot_row_payload(snap, row, &pj, &pl)) {
                query_fail(q, 500, "internal error: a stored payload is unreadable");
                return;
            }
            if (pj) {
                h->has_payload = 1;
                h->payload_off = q->payloads.len;
                h->payload_len = pl;
                sieve__sbuf_put(&q->payloads, pj, pl);
            }
        }
        if (q->with_vector &&
            sieve_snapshot_row_vector(snap, row, q->vectors + (size_t)j * q->dim) == 0)
            h->has_vector = 1;
    }
    q->n_hits = n;
    if (q->payloads.failed) query_fail(q, 500, "out of memory");
}

/* Answers group g (n queries with the same filter and k) with one kernel call. */
static void run_group(worker *w, sieve_snapshot *snap, sieve__query **g, size_t n,
                      uint32_t k) {
    const sieve_collection_info *info = sieve_snapshot_info(snap);
    sieve__metrics *m = w->b->srv->metrics;
    sieve_metric metric = info->config.metric;
    uint32_t dim = info->config.dim;
    const uint64_t *mask = NULL;
    uint64_t eligible = info->points;
    if (g[0]->filter_key) {
        int rc = get_mask(w, snap, g[0]->filter, g[0]->filter_key, &mask, &eligible);
        if (rc) {
            char msg[160];
            snprintf(msg, sizeof msg, "filter evaluation failed: %s", sieve_strerror(rc));
            for (size_t i = 0; i < n; i++) query_fail(g[i], sieve__status_for(rc), msg);
            return;
        }
    }
    if (eligible == 0 || info->rows == 0) return; /* no hits for any of them */
    if (k > eligible) k = (uint32_t)eligible;
    if (k > info->rows) k = (uint32_t)info->rows;
    int rc = SIEVE_ENOMEM;
    sieve_search_stats st;
    memset(&st, 0, sizeof st);
    double t0 = 0, t1 = 0;
    if (!grow_pinned(w, (void **)&w->qbuf, &w->qcap, n * dim, sizeof(float)) &&
        !grow_pinned(w, (void **)&w->rbuf, &w->rcap, n * k, sizeof(int64_t)) &&
        !grow_pinned(w, (void **)&w->sbuf, &w->scap, n * k, sizeof(float)) &&
        !grow((void **)&w->cbuf, &w->ccap, n, sizeof(uint32_t))) {
        for (size_t i = 0; i < n; i++)
            memcpy(w->qbuf + i * dim, g[i]->vector, dim * sizeof(float));
        sieve_search_params p;
        sieve_search_params_init(&p, metric, k);
        t0 = sieve__now_s();
        rc = sieve_devcache_lane_knn(w->lane, snap, mask, w->qbuf, (uint32_t)n, &p, w->rbuf,
                                     w->sbuf, w->cbuf, &st);
        t1 = sieve__now_s();
    }
    if (rc) {
        char msg[200];
        snprintf(msg, sizeof msg, "search failed on %s: %s%s", w->spec, sieve_strerror(rc),
                 rc == SIEVE_ENOMEM ? " (device memory too small even to stream the "
                                      "collection)" : "");
        sieve__log(w->b->srv, SIEVE_LOG_ERROR, "%s (collection %s, %zu queries, k=%u)", msg,
                   info->config.name, n, k);
        for (size_t i = 0; i < n; i++) query_fail(g[i], 500, msg);
        return;
    }
    sieve__metrics_batch(m, (uint32_t)n, t1 - t0, &st);
    sieve__metrics_phase(m, SIEVE__PHASE_SEARCH, t1 - t0);
    for (size_t i = 0; i < n; i++)
        collect_hits(snap, w->idc, g[i], metric, w->rbuf + i * k, w->sbuf + i * k,
                     w->cbuf[i] < k ? w->cbuf[i] : k);
    sieve__metrics_phase(m, SIEVE__PHASE_LOOKUP, sieve__now_s() - t1);
}

static int same_filter(const sieve__query *a, const sieve__query *b) {
    if (!a->filter_key || !b->filter_key) return a->filter_key == b->filter_key;
    return !strcmp(a->filter_key, b->filter_key);
}

static uint32_t query_k(const sieve__query *q) { return q->offset + q->limit; }

/* The worker's snapshot of collection name: the kept one while it is current, else a new
 * one. Returns 0 or a SIEVE_E* code. */
static int worker_snapshot(worker *w, const char *name, sieve_snapshot **out) {
    double now = sieve__now_s();
    if (w->snap && (strcmp(w->snap_name, name) || now - w->snap_opened > SNAP_MAX_AGE_S ||
                    !sieve_snapshot_is_current(w->snap)))
        drop_snapshot(w); /* closed before opening another (sieve_store.h) */
    if (!w->snap) {
        int rc = sieve_snapshot_open(w->b->srv->store, name, &w->snap);
        if (rc) return rc;
        snprintf(w->snap_name, sizeof w->snap_name, "%s", name);
        w->snap_opened = now;
    }
    *out = w->snap;
    return 0;
}

static void answer_batch(worker *w, const char *name, sieve__query **qs, size_t n) {
    sieve_server *s = w->b->srv;
    sieve_snapshot *snap = NULL;
    double ts = sieve__now_s();
    int rc = worker_snapshot(w, name, &snap);
    sieve__metrics_phase(s->metrics, SIEVE__PHASE_SNAPSHOT, sieve__now_s() - ts);
    if (rc) {
        char msg[200];
        if (rc == SIEVE_ENOTFOUND)
            snprintf(msg, sizeof msg, "collection '%s' not found", name);
        else snprintf(msg, sizeof msg, "cannot read collection '%s': %s", name,
                      sieve_strerror(rc));
        for (size_t i = 0; i < n; i++) query_fail(qs[i], sieve__status_for(rc), msg);
        return;
    }
    const sieve_collection_info *info = sieve_snapshot_info(snap);
    /* A query validated against an older collection of the same name may not fit. */
    for (size_t i = 0; i < n; i++)
        if (qs[i]->dim != info->config.dim) {
            char msg[160];
            snprintf(msg, sizeof msg, "vector: expected %u numbers (the collection's "
                                      "dimension), got %u", info->config.dim, qs[i]->dim);
            query_fail(qs[i], 400, msg);
        }
    /* Group by (filter, k); each group is one kernel call. */
    char *done = calloc(n, 1);
    sieve__query **grp = malloc(n * sizeof *grp);
    if (!done || !grp) {
        for (size_t i = 0; i < n; i++) query_fail(qs[i], 500, "out of memory");
    } else {
        for (size_t i = 0; i < n; i++) {
            if (done[i] || qs[i]->err.status) continue;
            size_t gn = 0;
            for (size_t j = i; j < n; j++) {
                if (done[j] || qs[j]->err.status) continue;
                if (query_k(qs[j]) != query_k(qs[i]) || !same_filter(qs[i], qs[j])) continue;
                grp[gn++] = qs[j];
                done[j] = 1;
            }
            run_group(w, snap, grp, gn, query_k(qs[i]));
        }
    }
    free(done);
    free(grp);
}

/* Refreshes the device's gauges in its head worker (any worker of the device may). */
static void update_gauges(worker *w, double now) {
    worker *h = w->head;
    /* device memory for /metrics at most every 0.5 s: querying it costs a driver call */
    unsigned long long now_ns = (unsigned long long)(now * 1e9);
    unsigned long long last = atomic_load(&h->last_info_ns);
    if (h->is_cuda && now_ns - last > 500000000ull &&
        atomic_compare_exchange_strong(&h->last_info_ns, &last, now_ns)) {
        sieve_device_info info;
        if (sieve_device_get_info(w->dev, &info) == 0 && info.memory_total >= info.memory_free)
            atomic_store(&h->mem_used, info.memory_total - info.memory_free);
    }
    sieve_devcache_stats cs;
    if (sieve_devcache_get_stats(h->dc, &cs) == 0) {
        atomic_store(&h->cache_bytes, cs.resident_bytes);
        atomic_store(&h->pages_uploaded, cs.pages_uploaded);
        atomic_store(&h->streamed, cs.streamed_searches);
    }
}

static void *worker_main(void *arg) {
    worker *w = arg;
    sieve__metrics *m = w->b->srv->metrics;
    char name[SIEVE_NAME_MAX + 1];
    for (;;) {
        double tw = sieve__now_s();
        size_t n = take_batch(w, name);
        if (!n) break;
        double t0 = sieve__now_s();
        sieve__metrics_phase(m, SIEVE__PHASE_WAIT, t0 - tw);
        answer_batch(w, name, w->batch, n);
        double ta = sieve__now_s();
        for (size_t i = 0; i < n; i++) query_done(w->batch[i]);
        double t1 = sieve__now_s();
        sieve__metrics_phase(m, SIEVE__PHASE_RESUME, t1 - ta);
        pthread_mutex_lock(&w->b->mu);
        cqueue *cq = w->queue;
        cq->inflight -= n;
        cq->last_done = t1;
        cq->last_cost = t1 - t0;
        cq->expect = n + cq->len + cq->inflight;
        pthread_mutex_unlock(&w->b->mu);
        update_gauges(w, t1);
        sieve__metrics_phase(m, SIEVE__PHASE_BOOKKEEPING, sieve__now_s() - t1);
    }
    drop_snapshot(w);
    return NULL;
}

/* ---------------------------------------------------------------- lifecycle */

/* Opens worker w's device. A CPU device named without a thread count ("cpu", or "auto"
 * resolving to the CPU) shared by several workers gives each an equal share of the cores,
 * so concurrent kernels do not oversubscribe them. */
static int open_device(worker *w, uint32_t workers) {
    int rc = sieve_device_open(w->spec, &w->dev);
    if (rc || workers < 2 || strchr(w->spec, ':')) return rc;
    sieve_device_info info;
    if (sieve_device_get_kind(w->dev) != SIEVE_DEVICE_CPU ||
        sieve_device_get_info(w->dev, &info) != 0)
        return 0;
    uint32_t t = info.threads / workers ? info.threads / workers : 1;
    char spec[32];
    snprintf(spec, sizeof spec, "cpu:%u", t);
    sieve_device_close(w->dev);
    w->dev = NULL;
    return sieve_device_open(spec, &w->dev);
}

int sieve__batcher_create(sieve_server *s, const char *spec, sieve__batcher **out) {
    *out = NULL;
    sieve__batcher *b = calloc(1, sizeof *b);
    if (!b) return SIEVE_ENOMEM;
    b->srv = s;
    pthread_mutex_init(&b->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&b->cv, &ca);
    pthread_condattr_destroy(&ca);

    size_t n_dev = 1;
    for (const char *p = spec; *p; p++) n_dev += *p == ',';
    /* room for the most workers any device may get */
    size_t per_max = s->cfg.batch_workers ? s->cfg.batch_workers : 2;
    b->workers = calloc(n_dev * per_max, sizeof *b->workers);
    if (!b->workers) {
        sieve__batcher_destroy(b);
        return SIEVE_ENOMEM;
    }
    const char *p = spec;
    int rc = 0;
    for (size_t d = 0; d < n_dev && !rc; d++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char dspec[64];
        if (len >= sizeof dspec) {
            rc = SIEVE_EINVAL;
            break;
        }
        memcpy(dspec, p, len);
        dspec[len] = 0;
        p = comma ? comma + 1 : p + len;
        /* the head worker opens the device first, to learn its kind (auto: 2 on a GPU) */
        uint32_t per = s->cfg.batch_workers;
        worker *h = NULL;
        for (uint32_t i = 0; !rc && (i == 0 || i < per); i++) {
            worker *w = &b->workers[b->n_workers];
            w->b = b;
            snprintf(w->spec, sizeof w->spec, "%s", dspec);
            b->n_workers++;
            if (i == 0) {
                h = w;
                rc = sieve_device_open(w->spec, &w->dev);
                if (rc) break;
                if (!per) per = sieve_device_get_kind(w->dev) == SIEVE_DEVICE_CUDA ? 2 : 1;
                if (per > 1 && sieve_device_get_kind(w->dev) == SIEVE_DEVICE_CPU) {
                    /* reopen with the cores shared out between the workers */
                    sieve_device_close(w->dev);
                    w->dev = NULL;
                    rc = open_device(w, per);
                    if (rc) break;
                }
                h->group_size = per;
                sieve_device_info info;
                snprintf(w->desc, sizeof w->desc, "%s", w->spec);
                if (sieve_device_get_info(w->dev, &info) == 0) {
                    snprintf(w->desc, sizeof w->desc, "%s", info.name);
                    w->is_cuda = info.kind == SIEVE_DEVICE_CUDA;
                    if (w->is_cuda && info.memory_total >= info.memory_free)
                        atomic_store(&w->mem_used, info.memory_total - info.memory_free);
                }
                sieve_devcache_options dco;
                sieve_devcache_options_init(&dco);
                dco.host_resident = s->cfg.host_page_cache;
                rc = sieve_devcache_create(w->dev, &dco, &w->dc);
                if (rc) break;
            } else {
                rc = open_device(w, per);
                if (rc) break;
            }
            w->head = h;
            w->dc = h->dc;
            rc = sieve_devcache_lane_create(w->dc, w->dev, &w->lane);
            if (rc) break;
            w->batch = malloc(s->cfg.batch_max * sizeof *w->batch);
            if (!w->batch) rc = SIEVE_ENOMEM;
            if (!rc) rc = sieve_idcache_new(ID_CACHE_BYTES, &w->idc);
        }
    }
    if (!rc) {
        for (size_t i = 0; i < b->n_workers; i++) {
            if (pthread_create(&b->workers[i].thread, NULL, worker_main, &b->workers[i])) {
                rc = SIEVE_ENOMEM;
                break;
            }
            b->workers[i].started = 1;
        }
    }
    if (rc) {
        sieve__batcher_destroy(b);
        return rc;
    }
    *out = b;
    return 0;
}

void sieve__batcher_destroy(sieve__batcher *b) {
    if (!b) return;
    pthread_mutex_lock(&b->mu);
    b->stopping = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    for (size_t i = 0; i < b->n_workers; i++) {
        worker *w = &b->workers[i];
        if (w->started) pthread_join(w->thread, NULL);
        drop_snapshot(w);
        mask_cache_clear(w);
        sieve_devcache_lane_destroy(w->lane);
        free(w->batch);
        sieve_idcache_free(w->idc);
        sieve_host_free_pinned(w->dev, w->qbuf); /* before the devices close, below */
        sieve_host_free_pinned(w->dev, w->rbuf);
        sieve_host_free_pinned(w->dev, w->sbuf);
        free(w->cbuf);
    }
    /* every lane is gone: now the caches (which use their head's device), then devices */
    for (size_t i = 0; i < b->n_workers; i++) {
        worker *w = &b->workers[i];
        if (w->dc && (!w->head || w->head == w)) sieve_devcache_destroy(w->dc);
    }
    for (size_t i = 0; i < b->n_workers; i++) sieve_device_close(b->workers[i].dev);
    free(b->workers);
    while (b->queues) {
        cqueue *q = b->queues;
        b->queues = q->next;
        free(q);
    }
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

void sieve__batcher_describe(sieve__batcher *b, char *buf, size_t n) {
    size_t off = 0;
    buf[0] = 0;
    for (size_t i = 0; i < b->n_workers && off < n; i++) {
        const worker *w = &b->workers[i];
        if (w->head != w) continue;
        int k = snprintf(buf + off, n - off, "%s%s (%u batch worker%s)", off ? ", " : "",
                         w->desc, w->group_size, w->group_size == 1 ? "" : "s");
        if (k < 0) break;
        off += (size_t)k;
    }
}

size_t sieve__batcher_workers(sieve__batcher *b) { return b->n_workers; }

void sieve__batcher_cache_stats(sieve__batcher *b, uint64_t *resident_bytes,
                                uint64_t *pages_uploaded, uint64_t *streamed) {
    *resident_bytes = *pages_uploaded = *streamed = 0;
    for (size_t i = 0; i < b->n_workers; i++) {
        worker *w = &b->workers[i];
        if (w->head != w) continue;
        *resident_bytes += atomic_load(&w->cache_bytes);
        *pages_uploaded += atomic_load(&w->pages_uploaded);
        *streamed += atomic_load(&w->streamed);
    }
}

uint64_t sieve__batcher_device_memory_used(sieve__batcher *b) {
    uint64_t used = 0;
    for (size_t i = 0; i < b->n_workers; i++)
        if (b->workers[i].head == &b->workers[i]) used += atomic_load(&b->workers[i].mem_used);
    return used;
}

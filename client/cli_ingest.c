/* cli_ingest.c: `sieve ingest`, bulk loading of vector files.
 *
 * Owns: the ingest pipeline and its resume logic. One reader (the main thread) reads the
 * input through a datasets source (vectors joined with optional id and payload files) into
 * a ring of batch slots; worker threads send the slots, either through sieve-server (one
 * keep-alive client per worker; a batch is split on 413 and retried on network errors) or
 * straight into a data directory with sieve_store_upsert (several callers, so one thread's
 * conversion and norms overlap the store writer's commit of another's batch). The main
 * thread draws the progress bar while it waits.
 * Must not: write anything before the target collection and the input have been checked,
 * or write a checkpoint that is ahead of what is durably stored.
 *
 * Resume. Ids are the identity of a point: a row without an id in the files gets id
 * id_start + row, so every run gives every row the same id, and re-upserting a stored id
 * rewrites the same point (never a duplicate). Batches complete out of order, so the
 * checkpoint holds a watermark: the number of leading rows whose batches have all been
 * acknowledged (durable); it is rewritten whenever that watermark moves. A new run with
 * the same job (same files, sizes, mtimes, target, collection, id numbering, rows) checks
 * that the ids of the first row and of the last row below the watermark are stored (and,
 * where the stored values are exact, that their vectors match), then starts at the
 * watermark; rows beyond it that the interrupted run had already stored are simply
 * written again. A missing, torn, foreign or unverifiable checkpoint starts from row 0,
 * which is correct, only slower. A finished ingest removes its checkpoint.
 *
 * The one piece of global state is the flag set by SIGINT/SIGTERM (a signal handler has
 * nowhere else to put it): the reader stops, in-flight batches finish, the checkpoint is
 * written, and the command tells how to resume.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "sieve_store.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

enum { SLOT_FREE = 0, SLOT_READY, SLOT_BUSY, SLOT_DONE, SLOT_FAILED };

/* One batch in flight. In the shared-reader mode the slot owns copies of the rows; in the
 * worker-reads mode it only records the batch and points into the worker's own source. */
typedef struct slot {
    int state;
    uint64_t batch; /* batch number in this run */
    uint64_t row0;  /* first row */
    size_t n;
    const float *vecs;       /* n * dim */
    const sieve_ds_id *ids;  /* n */
    const char *const *pptr; /* n payload texts (NULL: none), or NULL for no payloads */
    const size_t *plen;
    /* shared-reader mode: the slot's own buffers */
    float *own_vecs;
    sieve_ds_id *own_ids;
    char *arena; /* payload texts, NUL-terminated */
    size_t arena_len, arena_cap;
    size_t *poff; /* payload offsets; SIZE_MAX: none */
    size_t *own_plen;
    const char **own_pptr;
} slot;

/* A worker's own things: its scratch for one request and, in the worker-reads mode, its
 * own source and id buffer. */
typedef struct worker_ctx {
    struct ingest *g;
    int index;
    sieve_point *pts;      /* direct route */
    sieve_client_id *cids; /* HTTP route */
    sieve_ds_source *src;  /* worker-reads mode */
    sieve_ds_id *ids;      /* generated ids (worker-reads mode) */
} worker_ctx;

typedef struct ingest {
    /* options */
    const char *vectors_path, *ids_path, *payloads_path, *coll, *data_dir, *ckpt_opt;
    sieve_ds_format fmt;
    int create, restart, direct, have_distance, have_dtype, stats, json;
    sieve_client_distance distance;
    sieve_client_dtype dtype;
    uint64_t id_start, limit;
    size_t batch;
    int parallel;
    sieve_progress_mode pmode;
    cli_common cc;
    /* input and target */
    sieve_ds_source_options so;
    sieve_ds_source *src;
    sieve_ds_source_info info;
    uint32_t dim;
    uint64_t total, start;
    int worker_reads; /* every worker reads its own batches (dense input files only) */
    sieve_store *st;
    sieve_client **clients; /* one per worker (HTTP) */
    int exact_vectors;      /* stored float32 equals the input (float32, not Cosine) */
    /* where the time goes (--stats): seconds, summed over threads */
    double t_read, t_copy, t_wait_slot, t_send;
    /* pipeline */
    slot *slots;
    size_t nslots;
    uint64_t nbatches;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t filled, taken, wm_batch, wm_row, acked;
    int reader_done, failed, workers_alive;
    char err[1536];
    /* checkpoint */
    char ckpt_path[CLI_CKPT_PATH_MAX + 64];
    int ckpt_on;
    cli_ckpt ck;
    pthread_mutex_t ck_mu;
    uint64_t ck_written;
    int ck_warned;
} ingest;

static const char *CMD = "ingest";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *group(uint64_t v, char buf[32]) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%" PRIu64, v);
    int o = 0;
    for (int i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = 0;
    return buf;
}

static void help_ingest(FILE *f) {
    fprintf(
        f,
        "usage: sieve ingest FILE --collection NAME [options]\n"
        "\n"
        "Bulk-loads the vectors of FILE (.fvecs .bvecs .fbin .npy float32/float16 .jsonl;\n"
        "others the datasets module reads: .u8bin .i8bin) into a collection, through a\n"
        "running sieve-server (default) or straight into a data directory (--data-dir,\n"
        "fastest; no server may have that directory open). Row i gets the id from --ids,\n"
        "else from the .jsonl's \"id\", else from the payload file, else --id-start + i.\n"
        "\n"
        "Input:\n"
        "  --ids FILE         one id per row: .u64bin, .ibin (d=1) or .npy of integers\n"
        "  --payloads FILE    .jsonl ({\"payload\": {...}} per row) or an MS MARCO style .tsv\n"
        "                     (id<TAB>text per row, stored as {\"text\": TEXT})\n"
        "  --format F         format of FILE when its extension does not tell (fvecs, bvecs,\n"
        "                     fbin, npy, jsonl, ...)\n"
        "  --id-start N       ids N, N+1, ... for rows without ids (default 0)\n"
        "  --limit N          ingest only the first N rows\n"
        "\n"
        "Target:\n"
        "  --collection NAME  collection to fill (required)\n"
        "  --create           create the collection if it does not exist (dimension from FILE)\n"
        "  --distance D       Dot (default), Cosine or Euclid, with --create\n"
        "  --dtype T          float32 (default), float16 or bfloat16 storage, with --create\n"
        "  --data-dir DIR     write straight into this data directory instead of a server\n"
        "  --url URL          the server (default $SIEVE_URL, else " SIEVE_CLIENT_DEFAULT_URL ")\n"
        "\n"
        "Throughput:\n"
        "  --batch N          vectors per request or store write (default: about 16 MiB per\n"
        "                     binary HTTP request, 8 MiB of JSON with --json; about 128 MiB\n"
        "                     of vectors per store write with --data-dir)\n"
        "  --parallel N       HTTP connections or store writer threads (default 4 over HTTP,\n"
        "                     2 with --data-dir)\n"
        "  --json             send JSON upserts instead of sieve's binary upsert body (the\n"
        "                     default; batches with UUID ids always go as JSON)\n"
        "\n"
        "Resume:\n"
        "  --checkpoint PATH  where progress is recorded (default FILE.sieve-ingest-NAME next\n"
        "                     to FILE). Run an interrupted ingest again with the same command:\n"
        "                     it verifies what is stored and continues at the first row not\n"
        "                     known to be stored. Every row ends up stored exactly once (ids\n"
        "                     are the identity; writing an id again replaces it).\n"
        "  --restart          ignore an existing checkpoint and start at row 0\n"
        "\n"
        "Output:\n"
        "  --progress         always draw the progress bar (default: only on a terminal)\n"
        "  --quiet            no progress bar\n"
        "  --stats            print where the time went (reading, waiting, sending; the\n"
        "                     store's apply and commit times with --data-dir)\n"
        "\n"
        "If FILE repeats an id, which of its rows wins is unspecified with --parallel > 1.\n"
        "\n" CLI_COMMON_HELP);
}

/* ---------------------------------------------------------------- failure and checkpoint */

static void fail_locked(ingest *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_locked(ingest *g, const char *fmt, ...) {
    if (g->failed) return;
    g->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->err, sizeof g->err, fmt, ap);
    va_end(ap);
    pthread_cond_broadcast(&g->cv);
}

/* Records that rows [0, wm) are durable. Called outside g->mu; only ever moves forward. */
static void save_checkpoint(ingest *g, uint64_t wm) {
    if (!g->ckpt_on) return;
    pthread_mutex_lock(&g->ck_mu);
    if (wm > g->ck_written) {
        g->ck.done = wm;
        if (cli_ckpt_save(g->ckpt_path, &g->ck) == 0) {
            g->ck_written = wm;
        } else if (!g->ck_warned) {
            g->ck_warned = 1;
            cli_warn(CMD, "cannot write checkpoint %s: %s; an interrupted run will start over",
                     g->ckpt_path, strerror(errno));
        }
    }
    pthread_mutex_unlock(&g->ck_mu);
}

/* ---------------------------------------------------------------- sending one batch */

static int send_direct(ingest *g, worker_ctx *w, slot *s, char *msg, size_t len) {
    for (size_t i = 0; i < s->n; i++) {
        sieve_point *p = &w->pts[i];
        const sieve_ds_id *id = &s->ids[i];
        memset(&p->id, 0, sizeof p->id);
        p->id.kind = id->is_uuid ? SIEVE_ID_UUID : SIEVE_ID_NUM;
        p->id.num = id->num;
        memcpy(p->id.uuid, id->uuid, 16);
        p->vector = s->vecs + i * (size_t)g->dim;
        p->dim = g->dim;
        p->payload = s->pptr ? s->pptr[i] : NULL;
        p->payload_len = p->payload ? s->plen[i] : 0;
    }
    int rc = sieve_store_upsert(g->st, g->coll, w->pts, s->n);
    if (rc) {
        const char *hint = "";
        if (rc == SIEVE_ERANGE)
            hint = ": a value does not fit the collection's datatype, or a vector's squared "
                   "length overflows float32";
        else if (rc == SIEVE_ETOOBIG)
            hint = ": a payload is larger than 16 MiB";
        else if (rc == SIEVE_EPARSE || rc == SIEVE_EINVAL)
            hint = ": a payload is not a JSON object";
        snprintf(msg, len, "store write of rows %" PRIu64 "..%" PRIu64 " failed: %s (%s)%s",
                 s->row0, s->row0 + s->n - 1, sieve_strerror(rc), sieve_errname(rc), hint);
    }
    return rc;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR && !stop_requested) {
    }
}

/* Sends rows [lo, hi) of s; halves on 413; retries a few more times (beyond the client's
 * own retries) when the server stays unreachable. */
static int send_http_range(ingest *g, worker_ctx *w, slot *s, size_t lo, size_t hi, int binary,
                           char *msg, size_t len) {
    sieve_client *cl = g->clients[w->index];
    const char *const *pl = s->pptr ? s->pptr + lo : NULL;
    for (int attempt = 0;; attempt++) {
        const float *v = s->vecs + lo * (size_t)g->dim;
        int rc = binary ? sieve_client_upsert_binary(cl, g->coll, w->cids + lo, v,
                                                     SIEVE_CLIENT_FLOAT32, hi - lo, g->dim, pl)
                        : sieve_client_upsert_batch(cl, g->coll, w->cids + lo, v, hi - lo, g->dim,
                                                    pl);
        if (!rc) return 0;
        if (rc == SIEVE_ETOOBIG && hi - lo > 1) {
            size_t mid = lo + (hi - lo) / 2;
            rc = send_http_range(g, w, s, lo, mid, binary, msg, len);
            return rc ? rc : send_http_range(g, w, s, mid, hi, binary, msg, len);
        }
        if (rc == SIEVE_ENET && attempt < 3 && !stop_requested) {
            sleep_s((double)(2 << attempt));
            continue;
        }
        snprintf(msg, len, "upsert of rows %" PRIu64 "..%" PRIu64 " failed: %s", s->row0 + lo,
                 s->row0 + hi - 1, sieve_client_message(cl));
        return rc;
    }
}

static int send_http(ingest *g, worker_ctx *w, slot *s, char *msg, size_t len) {
    /* the binary body unless --json, or the batch has an id it cannot carry (a UUID) */
    int binary = !g->json;
    for (size_t i = 0; i < s->n; i++) {
        w->cids[i] = cli_id_from_ds(&s->ids[i]);
        if (w->cids[i].is_uuid || w->cids[i].num > (uint64_t)INT64_MAX) binary = 0;
    }
    return send_http_range(g, w, s, 0, s->n, binary, msg, len);
}

/* Ids for rows without an id source: id_start + row. */
static void make_ids(ingest *g, sieve_ds_id *ids, uint64_t row0, size_t n) {
    for (size_t i = 0; i < n; i++) {
        memset(&ids[i], 0, sizeof ids[i]);
        ids[i].num = g->id_start + row0 + i;
    }
}

/* Worker-reads mode: reads batch s (row0, n set) through the worker's own source. */
static int worker_read(ingest *g, worker_ctx *w, slot *s, char *msg, size_t len) {
    sieve_ds_error derr;
    sieve_ds_batch b;
    if ((sieve_ds_source_tell(w->src) != s->row0 && sieve_ds_source_seek(w->src, s->row0, &derr)) ||
        sieve_ds_source_read(w->src, s->n, &b, &derr)) {
        snprintf(msg, len, "%s", derr.msg);
        return -1;
    }
    if (b.n != s->n) {
        snprintf(msg, len, "%s: ended at row %" PRIu64 "; expected %" PRIu64 " rows",
                 g->vectors_path, s->row0 + b.n, g->total);
        return -1;
    }
    s->vecs = b.vectors;
    if (b.ids) {
        s->ids = b.ids;
    } else {
        make_ids(g, w->ids, s->row0, s->n);
        s->ids = w->ids;
    }
    s->pptr = b.payloads;
    s->plen = b.payload_lens;
    return 0;
}

/* Marks s finished (rc 0) or failed and moves the watermark; called with g->mu held.
 * Returns the watermark. */
static uint64_t finish_locked(ingest *g, slot *s, int rc, const char *msg) {
    if (rc) {
        s->state = SLOT_FAILED;
        fail_locked(g, "%s", msg);
    } else {
        s->state = SLOT_DONE;
        g->acked += s->n;
        /* advance the watermark over every leading finished batch */
        for (;;) {
            slot *w = &g->slots[g->wm_batch % g->nslots];
            if (g->wm_batch >= g->filled || w->state != SLOT_DONE || w->batch != g->wm_batch) break;
            g->wm_row = w->row0 + w->n;
            w->state = SLOT_FREE;
            g->wm_batch++;
        }
    }
    pthread_cond_broadcast(&g->cv);
    return g->wm_row;
}

/* Claims the next batch for a worker that reads its own rows; NULL when there is none
 * (or the run stops). Called with g->mu held. */
static slot *claim_locked(ingest *g) {
    for (;;) {
        if (g->failed || stop_requested || g->filled >= g->nbatches) return NULL;
        slot *s = &g->slots[g->filled % g->nslots];
        if (s->state == SLOT_FREE) {
            s->batch = g->filled++;
            s->row0 = g->start + s->batch * g->batch;
            s->n = g->total - s->row0 < g->batch ? (size_t)(g->total - s->row0) : g->batch;
            s->state = SLOT_BUSY;
            g->taken = g->filled;
            return s;
        }
        pthread_cond_wait(&g->cv, &g->mu);
    }
}

static void *worker(void *arg) {
    worker_ctx *w = arg;
    ingest *g = w->g;
    char msg[1536];
    for (;;) {
        slot *s;
        pthread_mutex_lock(&g->mu);
        if (g->worker_reads) {
            s = claim_locked(g);
        } else {
            while (!g->failed && g->taken == g->filled && !g->reader_done)
                pthread_cond_wait(&g->cv, &g->mu);
            s = g->failed || g->taken == g->filled ? NULL : &g->slots[g->taken % g->nslots];
            if (s) {
                g->taken++;
                s->state = SLOT_BUSY;
            }
        }
        pthread_mutex_unlock(&g->mu);
        if (!s) break;

        msg[0] = 0;
        double t0 = now_s(), t1 = t0;
        int rc = 0;
        if (g->worker_reads) {
            rc = worker_read(g, w, s, msg, sizeof msg);
            t1 = now_s();
        }
        if (!rc)
            rc = g->direct ? send_direct(g, w, s, msg, sizeof msg)
                           : send_http(g, w, s, msg, sizeof msg);
        double t2 = now_s();

        pthread_mutex_lock(&g->mu);
        g->t_read += t1 - t0;
        g->t_send += t2 - t1;
        uint64_t wm = finish_locked(g, s, rc, msg);
        pthread_mutex_unlock(&g->mu);
        if (!rc) save_checkpoint(g, wm);
    }
    pthread_mutex_lock(&g->mu);
    g->workers_alive--;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

/* ---------------------------------------------------------------- the shared reader */

static int slot_alloc(ingest *g, slot *s) {
    memset(s, 0, sizeof *s);
    if (g->worker_reads) return 0;
    s->own_vecs = malloc(g->batch * (size_t)g->dim * sizeof *s->own_vecs);
    s->own_ids = malloc(g->batch * sizeof *s->own_ids);
    s->poff = malloc(g->batch * sizeof *s->poff);
    s->own_plen = malloc(g->batch * sizeof *s->own_plen);
    s->own_pptr = malloc(g->batch * sizeof *s->own_pptr);
    return s->own_vecs && s->own_ids && s->poff && s->own_plen && s->own_pptr ? 0 : -1;
}

static void slot_free(slot *s) {
    free(s->own_vecs);
    free(s->own_ids);
    free(s->arena);
    free(s->poff);
    free(s->own_plen);
    free(s->own_pptr);
}

/* Copies a source batch into s (the source's buffers live only until its next read). */
static int slot_fill(ingest *g, slot *s, const sieve_ds_batch *b) {
    s->n = b->n;
    s->row0 = b->first_row;
    memcpy(s->own_vecs, b->vectors, b->n * (size_t)g->dim * sizeof *s->own_vecs);
    s->vecs = s->own_vecs;
    if (b->ids)
        memcpy(s->own_ids, b->ids, b->n * sizeof *s->own_ids);
    else
        make_ids(g, s->own_ids, b->first_row, b->n);
    s->ids = s->own_ids;
    s->pptr = NULL;
    s->plen = NULL;
    if (!b->payloads) return 0;
    s->arena_len = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (!b->payloads[i]) {
            s->poff[i] = SIZE_MAX;
            s->own_plen[i] = 0;
            continue;
        }
        size_t len = b->payload_lens[i];
        if (s->arena_len + len + 1 > s->arena_cap) {
            size_t cap = s->arena_cap ? s->arena_cap : 1 << 16;
            while (cap < s->arena_len + len + 1) cap *= 2;
            char *na = realloc(s->arena, cap);
            if (!na) return -1;
            s->arena = na;
            s->arena_cap = cap;
        }
        memcpy(s->arena + s->arena_len, b->payloads[i], len);
        s->arena[s->arena_len + len] = 0;
        s->poff[i] = s->arena_len;
        s->own_plen[i] = len;
        s->arena_len += len + 1;
    }
    for (size_t i = 0; i < b->n; i++)
        s->own_pptr[i] = s->poff[i] == SIZE_MAX ? NULL : s->arena + s->poff[i];
    s->pptr = s->own_pptr;
    s->plen = s->own_plen;
    return 0;
}

/* Waits up to 100 ms on g->cv (g->mu held), then redraws the progress bar. */
static void wait_and_draw(ingest *g, sieve_progress *bar) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 100000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    uint64_t acked = g->acked;
    pthread_mutex_unlock(&g->mu);
    sieve_progress_update(bar, g->start + acked);
    pthread_mutex_lock(&g->mu);
}

/* The shared reader (main thread): fills slots in row order. Returns 1 when interrupted. */
static int read_into_slots(ingest *g, sieve_progress *bar) {
    uint64_t row = g->start;
    sieve_ds_error derr;
    while (row < g->total) {
        if (stop_requested) return 1;
        double tw = now_s();
        pthread_mutex_lock(&g->mu);
        slot *s = &g->slots[g->filled % g->nslots];
        while (!g->failed && s->state != SLOT_FREE && !stop_requested) wait_and_draw(g, bar);
        int failed = g->failed;
        pthread_mutex_unlock(&g->mu);
        if (failed) return 0;
        if (stop_requested) return 1;
        double tr = now_s();
        uint64_t want = g->total - row < g->batch ? g->total - row : g->batch;
        sieve_ds_batch b;
        int rc = sieve_ds_source_read(g->src, (size_t)want, &b, &derr);
        if (!rc && b.n == 0) {
            rc = SIEVE_ECORRUPT;
            snprintf(derr.msg, sizeof derr.msg,
                     "%s: ended at row %" PRIu64 "; expected %" PRIu64 " rows", g->vectors_path,
                     row, g->total);
        }
        double tc = now_s();
        if (!rc && slot_fill(g, s, &b)) {
            rc = SIEVE_ENOMEM;
            snprintf(derr.msg, sizeof derr.msg, "out of memory copying payloads");
        }
        double te = now_s();
        pthread_mutex_lock(&g->mu);
        g->t_wait_slot += tr - tw;
        g->t_read += tc - tr;
        g->t_copy += te - tc;
        if (rc) {
            fail_locked(g, "%s", derr.msg);
            pthread_mutex_unlock(&g->mu);
            return 0;
        }
        s->batch = g->filled;
        s->state = SLOT_READY;
        g->filled++;
        uint64_t acked = g->acked;
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
        row += b.n;
        sieve_progress_update(bar, g->start + acked);
    }
    return 0;
}

/* Runs the pipeline from g->start to g->total. Returns CLI_OK, CLI_FAIL or CLI_INTERRUPTED. */
static int run_pipeline(ingest *g, sieve_progress *bar) {
    int status = CLI_OK;
    g->nslots = (size_t)g->parallel * 2 + 1;
    g->nbatches = (g->total - g->start + g->batch - 1) / g->batch;
    g->wm_row = g->start;
    g->ck_written = g->start;
    g->slots = calloc(g->nslots, sizeof *g->slots);
    worker_ctx *wc = calloc((size_t)g->parallel, sizeof *wc);
    pthread_t *th = calloc((size_t)g->parallel, sizeof *th);
    if (!g->slots || !wc || !th) {
        status = cli_error(CLI_FAIL, CMD, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < g->nslots; i++)
        if (slot_alloc(g, &g->slots[i])) {
            status = cli_error(CLI_FAIL, CMD, "out of memory for %zu batches of %zu vectors",
                               g->nslots, g->batch);
            goto out;
        }
    for (int i = 0; i < g->parallel; i++) {
        worker_ctx *w = &wc[i];
        w->g = g;
        w->index = i;
        if (g->direct)
            w->pts = calloc(g->batch, sizeof *w->pts);
        else
            w->cids = calloc(g->batch, sizeof *w->cids);
        if (!w->pts && !w->cids) {
            status = cli_error(CLI_FAIL, CMD, "out of memory");
            goto out;
        }
        if (g->worker_reads) {
            sieve_ds_error derr;
            w->ids = malloc(g->batch * sizeof *w->ids);
            if (!w->ids) {
                status = cli_error(CLI_FAIL, CMD, "out of memory");
                goto out;
            }
            if (sieve_ds_source_open(&g->so, &w->src, &derr)) {
                status = cli_error(CLI_FAIL, CMD, "%s", derr.msg);
                goto out;
            }
        }
    }

    int started = 0;
    for (int i = 0; i < g->parallel; i++) {
        pthread_mutex_lock(&g->mu);
        g->workers_alive++;
        pthread_mutex_unlock(&g->mu);
        if (pthread_create(&th[i], NULL, worker, &wc[i])) {
            pthread_mutex_lock(&g->mu);
            g->workers_alive--;
            fail_locked(g, "cannot start a worker thread");
            pthread_mutex_unlock(&g->mu);
            break;
        }
        started++;
    }
    int interrupted = g->worker_reads ? 0 : read_into_slots(g, bar);

    /* let the workers finish (what was read), drawing progress meanwhile */
    pthread_mutex_lock(&g->mu);
    g->reader_done = 1;
    pthread_cond_broadcast(&g->cv);
    while (g->workers_alive > 0) wait_and_draw(g, bar);
    pthread_mutex_unlock(&g->mu);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    sieve_progress_update(bar, g->start + g->acked);
    if (g->failed)
        status = CLI_FAIL;
    else if (interrupted || (stop_requested && g->wm_row < g->total))
        status = CLI_INTERRUPTED;
out:
    if (wc)
        for (int i = 0; i < g->parallel; i++) {
            free(wc[i].pts);
            free(wc[i].cids);
            free(wc[i].ids);
            sieve_ds_source_close(wc[i].src);
        }
    if (g->slots)
        for (size_t i = 0; i < g->nslots; i++) slot_free(&g->slots[i]);
    free(g->slots);
    g->slots = NULL;
    free(wc);
    free(th);
    return status;
}

/* ---------------------------------------------------------------- setup */

/* The id and vector of one row (for verification). vec: dim floats. */
static int row_id(ingest *g, uint64_t row, sieve_ds_id *id, float *vec) {
    sieve_ds_error e;
    sieve_ds_batch b;
    if (sieve_ds_source_seek(g->src, row, &e) || sieve_ds_source_read(g->src, 1, &b, &e) ||
        b.n != 1)
        return -1;
    if (b.ids) {
        *id = b.ids[0];
    } else {
        memset(id, 0, sizeof *id);
        id->num = g->id_start + row;
    }
    memcpy(vec, b.vectors, g->dim * sizeof *vec);
    return 0;
}

/* 1 when the point with this id is stored (and, with exact vectors, equals vec); 0 when not;
 * -1 when it could not be checked (message printed). */
static int stored(ingest *g, const sieve_ds_id *id, const float *vec, float *scratch) {
    if (g->direct) {
        sieve_point_id pid;
        memset(&pid, 0, sizeof pid);
        pid.kind = id->is_uuid ? SIEVE_ID_UUID : SIEVE_ID_NUM;
        pid.num = id->num;
        memcpy(pid.uuid, id->uuid, 16);
        int rc = sieve_store_get(g->st, g->coll, &pid, scratch, NULL);
        if (rc == SIEVE_ENOTFOUND) return 0;
        if (rc) {
            cli_error(CLI_FAIL, CMD, "reading a point back: %s", sieve_strerror(rc));
            return -1;
        }
    } else {
        sieve_client_id cid = cli_id_from_ds(id);
        sieve_client_records r;
        int rc = sieve_client_retrieve(g->clients[0], g->coll, &cid, 1, 0, 1, &r);
        if (rc) {
            cli_client_error(g->clients[0], rc, CMD, "reading a point back");
            return -1;
        }
        int found = r.n == 1 && r.items[0].vector && r.items[0].dim == g->dim;
        if (found) memcpy(scratch, r.items[0].vector, g->dim * sizeof *scratch);
        sieve_client_records_clear(&r);
        if (!found) return 0;
    }
    if (g->exact_vectors && memcmp(scratch, vec, g->dim * sizeof *vec)) return 0;
    return 1;
}

/* Decides g->start from the checkpoint. Returns CLI_OK or CLI_FAIL (message printed). */
static int plan_resume(ingest *g) {
    g->start = 0;
    if (!g->ckpt_on) return CLI_OK;
    cli_ckpt old;
    char why[CLI_CKPT_PATH_MAX + 128];
    int rc = cli_ckpt_load(g->ckpt_path, &old, why, sizeof why);
    if (rc == 1) return CLI_OK;
    if (g->restart) {
        fprintf(stderr, "sieve ingest: --restart: ignoring checkpoint %s\n", g->ckpt_path);
        return CLI_OK;
    }
    if (rc < 0) {
        cli_warn(CMD, "ignoring checkpoint %s (%s); starting at row 0", g->ckpt_path, why);
        return CLI_OK;
    }
    if (!cli_ckpt_same_job(&old, &g->ck, why, sizeof why)) {
        cli_warn(CMD, "checkpoint %s belongs to another ingest (%s); starting at row 0",
                 g->ckpt_path, why);
        return CLI_OK;
    }
    if (old.done == 0) return CLI_OK;
    /* verify: the first row and the last row below the watermark must be stored */
    float *vec = malloc(2 * (size_t)g->dim * sizeof *vec);
    if (!vec) return cli_error(CLI_FAIL, CMD, "out of memory");
    uint64_t rows[2] = {0, old.done - 1};
    int ok = 1;
    for (int k = 0; k < 2 && ok; k++) {
        sieve_ds_id id;
        if (row_id(g, rows[k], &id, vec)) {
            ok = 0;
            break;
        }
        int s = stored(g, &id, vec, vec + g->dim);
        if (s < 0) {
            free(vec);
            return CLI_FAIL;
        }
        if (!s) {
            char t[40], r1[32];
            sieve_ds_id_format(&id, t);
            cli_warn(CMD,
                     "checkpoint %s says rows below %s are stored, but row %" PRIu64
                     " (id %s) is missing or different in '%s' (was the collection deleted or "
                     "changed?); starting at row 0",
                     g->ckpt_path, group(old.done, r1), rows[k], t, g->coll);
            ok = 0;
        }
    }
    free(vec);
    if (ok) {
        char a[32], b[32];
        g->start = old.done;
        fprintf(stderr, "sieve ingest: resuming at row %s of %s (checkpoint %s)\n",
                group(g->start, a), group(g->total, b), g->ckpt_path);
    }
    return CLI_OK;
}

static int setup_direct(ingest *g) {
    sieve_store_options so;
    sieve_store_options_init(&so);
    /* start with a map that holds the input, so the writer never stops to grow it */
    uint64_t need = (g->total - 0) * ((uint64_t)g->dim * 4 + 64) / 4 * 5;
    if (need > so.initial_map_bytes)
        so.initial_map_bytes = (need + (1u << 30) - 1) & ~(uint64_t)((1u << 30) - 1);
    int rc = sieve_store_open(g->data_dir, &so, &g->st);
    if (rc == SIEVE_EBUSY)
        return cli_error(CLI_FAIL, CMD,
                         "data directory %s is held by another process (a running sieve-server?);"
                         " only one process may write it. Ingest through that server instead: "
                         "sieve ingest %s --collection %s --url http://HOST:PORT",
                         g->data_dir, g->vectors_path, g->coll);
    if (rc)
        return cli_error(CLI_FAIL, CMD, "cannot open data directory %s: %s (%s)", g->data_dir,
                         sieve_strerror(rc), sieve_errname(rc));
    sieve_collection_info ci;
    rc = sieve_store_collection_info(g->st, g->coll, &ci);
    if (rc == SIEVE_ENOTFOUND) {
        if (!g->create)
            return cli_error(CLI_FAIL, CMD,
                             "collection '%s' does not exist in %s; add --create (with --distance "
                             "and --dtype) to create it",
                             g->coll, g->data_dir);
        sieve_collection_config cfg;
        memset(&cfg, 0, sizeof cfg);
        if (!sieve_store_name_valid(g->coll))
            return cli_error(CLI_FAIL, CMD,
                             "'%s' is not a valid collection name (1..64 of A-Z a-z 0-9 _ . -)",
                             g->coll);
        snprintf(cfg.name, sizeof cfg.name, "%s", g->coll);
        cfg.dim = g->dim;
        if (sieve_metric_parse(sieve_client_distance_name(g->distance), &cfg.metric) ||
            sieve_dtype_parse(sieve_client_dtype_name(g->dtype), &cfg.dtype))
            return cli_error(CLI_FAIL, CMD, "internal: distance or dtype");
        rc = sieve_store_create_collection(g->st, &cfg);
        if (rc)
            return cli_error(CLI_FAIL, CMD, "cannot create collection '%s': %s", g->coll,
                             sieve_strerror(rc));
        fprintf(stderr, "sieve ingest: created collection '%s' (%u dimensions, %s, %s)\n", g->coll,
                g->dim, sieve_client_distance_name(g->distance), sieve_client_dtype_name(g->dtype));
        rc = sieve_store_collection_info(g->st, g->coll, &ci);
        if (rc) return cli_error(CLI_FAIL, CMD, "collection '%s': %s", g->coll, sieve_strerror(rc));
    } else if (rc) {
        return cli_error(CLI_FAIL, CMD, "collection '%s': %s", g->coll, sieve_strerror(rc));
    }
    if (ci.config.dim != g->dim)
        return cli_error(CLI_FAIL, CMD, "%s has %u-dimensional vectors but collection '%s' has %u",
                         g->vectors_path, g->dim, g->coll, ci.config.dim);
    sieve_client_distance d;
    sieve_client_dtype t;
    if (sieve_client_distance_parse(sieve_metric_name(ci.config.metric), &d) ||
        sieve_client_dtype_parse(sieve_dtype_name(ci.config.dtype), &t))
        return cli_error(CLI_FAIL, CMD, "collection '%s' has an unknown metric or dtype", g->coll);
    if ((g->have_distance && d != g->distance) || (g->have_dtype && t != g->dtype))
        return cli_error(CLI_FAIL, CMD,
                         "collection '%s' exists with %s/%s, not the %s/%s asked for", g->coll,
                         sieve_client_distance_name(d), sieve_client_dtype_name(t),
                         sieve_client_distance_name(g->have_distance ? g->distance : d),
                         sieve_client_dtype_name(g->have_dtype ? g->dtype : t));
    g->exact_vectors = t == SIEVE_CLIENT_FLOAT32 && d != SIEVE_CLIENT_COSINE;
    return CLI_OK;
}

static int setup_http(ingest *g) {
    g->clients = calloc((size_t)g->parallel, sizeof *g->clients);
    if (!g->clients) return cli_error(CLI_FAIL, CMD, "out of memory");
    cli_common cc = g->cc;
    if (cc.retries < 0) cc.retries = 8; /* bulk loads ride out server restarts */
    for (int i = 0; i < g->parallel; i++) {
        g->clients[i] = cli_client_open(&cc, CMD);
        if (!g->clients[i]) return CLI_FAIL;
    }
    sieve_client *cl = g->clients[0];
    sieve_client_collection_info ci;
    int rc = sieve_client_get_collection(cl, g->coll, &ci);
    if (rc == SIEVE_ENOTFOUND) {
        if (!g->create)
            return cli_error(CLI_FAIL, CMD,
                             "collection '%s' does not exist on %s; add --create (with "
                             "--distance and --dtype) to create it",
                             g->coll, g->cc.url);
        sieve_client_collection_config cfg = {g->dim, g->distance, g->dtype};
        rc = sieve_client_create_collection(cl, g->coll, &cfg);
        if (rc && rc != SIEVE_EEXIST) return cli_client_error(cl, rc, CMD, "create collection");
        if (!rc)
            fprintf(stderr, "sieve ingest: created collection '%s' (%u dimensions, %s, %s)\n",
                    g->coll, g->dim, sieve_client_distance_name(g->distance),
                    sieve_client_dtype_name(g->dtype));
        rc = sieve_client_get_collection(cl, g->coll, &ci);
    }
    if (rc) return cli_client_error(cl, rc, CMD, "collection info");
    if (ci.config.dim != g->dim)
        return cli_error(CLI_FAIL, CMD, "%s has %u-dimensional vectors but collection '%s' has %u",
                         g->vectors_path, g->dim, g->coll, ci.config.dim);
    if ((g->have_distance && ci.config.distance != g->distance) ||
        (g->have_dtype && ci.config.dtype != g->dtype))
        return cli_error(
            CLI_FAIL, CMD, "collection '%s' exists with %s/%s, not the %s/%s asked for", g->coll,
            sieve_client_distance_name(ci.config.distance),
            sieve_client_dtype_name(ci.config.dtype),
            sieve_client_distance_name(g->have_distance ? g->distance : ci.config.distance),
            sieve_client_dtype_name(g->have_dtype ? g->dtype : ci.config.dtype));
    g->exact_vectors =
        ci.config.dtype == SIEVE_CLIENT_FLOAT32 && ci.config.distance != SIEVE_CLIENT_COSINE;
    return CLI_OK;
}

/* Fills the checkpoint identity and path. */
static int setup_checkpoint(ingest *g) {
    memset(&g->ck, 0, sizeof g->ck);
    if (cli_ckpt_describe(g->vectors_path, &g->ck.vectors) ||
        cli_ckpt_describe(g->ids_path, &g->ck.ids) ||
        cli_ckpt_describe(g->payloads_path, &g->ck.payloads))
        return cli_error(CLI_FAIL, CMD, "cannot describe the input files: %s", strerror(errno));
    snprintf(
        g->ck.format, sizeof g->ck.format, "%s",
        sieve_ds_format_name(g->fmt ? g->fmt : sieve_ds_format_from_path(g->vectors_path))
            ? sieve_ds_format_name(g->fmt ? g->fmt : sieve_ds_format_from_path(g->vectors_path))
            : "auto");
    if (g->direct) {
        char *abs = realpath(g->data_dir, NULL);
        snprintf(g->ck.target, sizeof g->ck.target, "data-dir:%s", abs ? abs : g->data_dir);
        free(abs);
    } else {
        snprintf(g->ck.target, sizeof g->ck.target, "url:%s", g->cc.url);
    }
    snprintf(g->ck.collection, sizeof g->ck.collection, "%s", g->coll);
    g->ck.id_start = g->id_start;
    g->ck.rows = g->total;
    g->ck.dim = g->dim;
    if (g->ckpt_opt)
        snprintf(g->ckpt_path, sizeof g->ckpt_path, "%s", g->ckpt_opt);
    else
        snprintf(g->ckpt_path, sizeof g->ckpt_path, "%s.sieve-ingest-%s", g->vectors_path, g->coll);
    /* can we write there? */
    char probe[sizeof g->ckpt_path + 8];
    snprintf(probe, sizeof probe, "%s.tmp", g->ckpt_path);
    FILE *f = fopen(probe, "a");
    if (!f) {
        cli_warn(CMD,
                 "cannot write the checkpoint %s (%s): this run cannot be resumed where it "
                 "stops; choose a writable place with --checkpoint PATH",
                 g->ckpt_path, strerror(errno));
        g->ckpt_on = 0;
        return CLI_OK;
    }
    fclose(f);
    unlink(probe);
    g->ckpt_on = 1;
    return CLI_OK;
}

/* ---------------------------------------------------------------- the command */

static void print_stats(ingest *g, double secs) {
    fprintf(stderr,
            "sieve ingest: stats: %.2f s wall; %s: %.2f s reading, %.2f s copying, %.2f s "
            "waiting for a free batch; %d workers: %.2f s sending in total (%.0f%% busy)\n",
            secs, g->worker_reads ? "workers read their own rows" : "one reader thread", g->t_read,
            g->t_copy, g->t_wait_slot, g->parallel, g->t_send,
            secs > 0 ? 100.0 * g->t_send / (secs * g->parallel) : 0.0);
    if (g->direct) {
        sieve_store_stats st;
        if (!sieve_store_get_stats(g->st, &st))
            fprintf(stderr,
                    "sieve ingest: store: %" PRIu64 " writes in %" PRIu64
                    " commits (at most %" PRIu64
                    " per commit); writer %.2f s applying, %.2f s committing (write + sync); "
                    "map %.2f GiB, grown %" PRIu64 " times\n",
                    st.requests, st.commits, st.max_group, (double)st.apply_ns * 1e-9,
                    (double)st.commit_ns * 1e-9, (double)st.map_bytes / (1u << 30), st.map_grows);
    } else {
        sieve_client_stats t, sum;
        memset(&sum, 0, sizeof sum);
        for (int i = 0; i < g->parallel; i++) {
            sieve_client_get_stats(g->clients[i], &t);
            sum.attempts += t.attempts;
            sum.retries += t.retries;
            sum.bytes_sent += t.bytes_sent;
            sum.connects += t.connects;
        }
        fprintf(stderr,
                "sieve ingest: http: %" PRIu64 " requests (%" PRIu64 " retries), %.1f MiB of "
                "%s sent (%.1f MiB/s), %" PRIu64 " connections\n",
                sum.attempts, sum.retries, (double)sum.bytes_sent / (1 << 20),
                g->json ? "JSON" : "binary upserts",
                secs > 0 ? (double)sum.bytes_sent / (1 << 20) / secs : 0.0, sum.connects);
    }
}

enum {
    OPT_COLLECTION = CLI_OPT_FIRST_LOCAL,
    OPT_IDS,
    OPT_PAYLOADS,
    OPT_FORMAT,
    OPT_ID_START,
    OPT_LIMIT,
    OPT_CREATE,
    OPT_DISTANCE,
    OPT_DTYPE,
    OPT_DATA_DIR,
    OPT_BATCH,
    OPT_PARALLEL,
    OPT_CHECKPOINT,
    OPT_RESTART,
    OPT_PROGRESS,
    OPT_QUIET,
    OPT_STATS,
    OPT_JSON,
};

static int parse_args(ingest *g, int argc, char **argv) {
    static const struct option lo[] = {{"collection", required_argument, NULL, OPT_COLLECTION},
                                       {"ids", required_argument, NULL, OPT_IDS},
                                       {"payloads", required_argument, NULL, OPT_PAYLOADS},
                                       {"format", required_argument, NULL, OPT_FORMAT},
                                       {"id-start", required_argument, NULL, OPT_ID_START},
                                       {"limit", required_argument, NULL, OPT_LIMIT},
                                       {"create", no_argument, NULL, OPT_CREATE},
                                       {"distance", required_argument, NULL, OPT_DISTANCE},
                                       {"dtype", required_argument, NULL, OPT_DTYPE},
                                       {"data-dir", required_argument, NULL, OPT_DATA_DIR},
                                       {"batch", required_argument, NULL, OPT_BATCH},
                                       {"parallel", required_argument, NULL, OPT_PARALLEL},
                                       {"checkpoint", required_argument, NULL, OPT_CHECKPOINT},
                                       {"restart", no_argument, NULL, OPT_RESTART},
                                       {"progress", no_argument, NULL, OPT_PROGRESS},
                                       {"quiet", no_argument, NULL, OPT_QUIET},
                                       {"no-progress", no_argument, NULL, OPT_QUIET},
                                       {"stats", no_argument, NULL, OPT_STATS},
                                       {"json", no_argument, NULL, OPT_JSON},
                                       CLI_COMMON_LONGOPTS,
                                       {NULL, 0, NULL, 0}};
    int o, have_url = 0;
    uint32_t u;
    opterr = 0;
    optind = 1;
    while ((o = getopt_long(argc, argv, ":hc:q", lo, NULL)) != -1) {
        if (o == CLI_OPT_URL) have_url = 1;
        int r = cli_common_opt(&g->cc, o, optarg, CMD);
        if (r < 0) return CLI_USAGE;
        if (r) continue;
        switch (o) {
        case 'h':
        case CLI_OPT_HELP: help_ingest(stdout); return -1;
        case 'c':
        case OPT_COLLECTION: g->coll = optarg; break;
        case OPT_IDS: g->ids_path = optarg; break;
        case OPT_PAYLOADS: g->payloads_path = optarg; break;
        case OPT_FORMAT:
            if (sieve_ds_format_parse(optarg, &g->fmt) || g->fmt == SIEVE_DS_FORMAT_TSV ||
                g->fmt == SIEVE_DS_FORMAT_QRELS)
                return cli_usage_error(CMD,
                                       "--format wants a vector format (fvecs, bvecs, fbin, "
                                       "npy, jsonl, ...), got '%s'",
                                       optarg);
            break;
        case OPT_ID_START:
            if (cli_parse_u64(optarg, &g->id_start))
                return cli_usage_error(CMD, "--id-start wants an unsigned integer, got '%s'",
                                       optarg);
            break;
        case OPT_LIMIT:
            if (cli_parse_u64(optarg, &g->limit) || !g->limit)
                return cli_usage_error(CMD, "--limit wants a row count >= 1, got '%s'", optarg);
            break;
        case OPT_CREATE: g->create = 1; break;
        case OPT_DISTANCE:
            if (sieve_client_distance_parse(optarg, &g->distance))
                return cli_usage_error(CMD, "--distance wants Dot, Cosine or Euclid, got '%s'",
                                       optarg);
            g->have_distance = 1;
            break;
        case OPT_DTYPE:
            if (sieve_client_dtype_parse(optarg, &g->dtype))
                return cli_usage_error(CMD, "--dtype wants float32, float16 or bfloat16, got '%s'",
                                       optarg);
            g->have_dtype = 1;
            break;
        case OPT_DATA_DIR: g->data_dir = optarg; break;
        case OPT_BATCH:
            if (cli_parse_u32(optarg, 1, 1u << 20, &u))
                return cli_usage_error(CMD, "--batch wants 1..1048576, got '%s'", optarg);
            g->batch = u;
            break;
        case OPT_PARALLEL:
            if (cli_parse_u32(optarg, 1, 64, &u))
                return cli_usage_error(CMD, "--parallel wants 1..64, got '%s'", optarg);
            g->parallel = (int)u;
            break;
        case OPT_CHECKPOINT: g->ckpt_opt = optarg; break;
        case OPT_RESTART: g->restart = 1; break;
        case OPT_PROGRESS: g->pmode = SIEVE_PROGRESS_ALWAYS; break;
        case 'q':
        case OPT_QUIET: g->pmode = SIEVE_PROGRESS_NEVER; break;
        case OPT_STATS: g->stats = 1; break;
        case OPT_JSON: g->json = 1; break;
        default: return cli_bad_option(CMD, o, argv);
        }
    }
    if (optind >= argc) return cli_usage_error(CMD, "which FILE? give the vectors file to ingest");
    g->vectors_path = argv[optind++];
    if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (!g->coll) return cli_usage_error(CMD, "--collection NAME is required");
    if (g->data_dir && have_url) return cli_usage_error(CMD, "give --data-dir or --url, not both");
    if (g->data_dir && g->json)
        return cli_usage_error(CMD, "--json chooses the HTTP body format; it does not apply to "
                                    "--data-dir");
    if ((g->have_distance || g->have_dtype) && !g->create)
        cli_warn(CMD, "--distance/--dtype only matter with --create; checking them against the "
                      "existing collection");
    g->direct = g->data_dir != NULL;
    return CLI_OK;
}

int cli_cmd_ingest(int argc, char **argv) {
    ingest g;
    memset(&g, 0, sizeof g);
    cli_common_init(&g.cc);
    g.pmode = SIEVE_PROGRESS_AUTO;
    int status = parse_args(&g, argc, argv);
    if (status) return status < 0 ? CLI_OK : status;
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    pthread_mutex_init(&g.ck_mu, NULL);

    /* input */
    memset(&g.so, 0, sizeof g.so);
    g.so.vectors = g.vectors_path;
    g.so.vectors_format = g.fmt;
    g.so.ids = g.ids_path;
    g.so.payloads = g.payloads_path;
    sieve_ds_error derr;
    if (sieve_ds_source_open(&g.so, &g.src, &derr)) {
        status = cli_error(CLI_FAIL, CMD, "%s", derr.msg);
        goto out;
    }
    sieve_ds_source_info_get(g.src, &g.info);
    g.dim = g.info.dim;
    uint64_t count = g.info.count;
    if (count == SIEVE_DS_UNKNOWN_COUNT && sieve_ds_count_lines(g.vectors_path, &count, &derr)) {
        status = cli_error(CLI_FAIL, CMD, "%s", derr.msg);
        goto out;
    }
    if (!g.dim || !count) {
        status = cli_error(CLI_FAIL, CMD, "%s: no vectors in the file", g.vectors_path);
        goto out;
    }
    g.total = g.limit && g.limit < count ? g.limit : count;
    if (!g.info.has_ids && g.total - 1 > UINT64_MAX - g.id_start) {
        status = cli_error(CLI_FAIL, CMD,
                           "--id-start %" PRIu64 " + %" PRIu64 " rows overflows 64-bit ids",
                           g.id_start, g.total);
        goto out;
    }
    if (!g.parallel) g.parallel = g.direct ? 2 : 4;
    if (!g.batch) {
        if (g.direct) {
            /* about 128 MiB of vectors per store write: each commit costs two syncs, so
             * big writes amortise them (measured in bench/RESULTS.md, "Ingest") */
            g.batch = (128u << 20) / ((size_t)g.dim * 4);
            if (g.batch < 4096) g.batch = 4096;
            if (g.batch > 65536) g.batch = 65536;
        } else if (!g.json) {
            /* about 16 MiB of binary body per request (the server takes 32 MiB by default):
             * fewer, larger store commits */
            size_t per = (size_t)g.dim * 4 + 8 + (g.info.has_payloads ? 512 : 0);
            g.batch = (16u << 20) / per;
            if (g.batch < 8) g.batch = 8;
            if (g.batch > 65536) g.batch = 65536;
        } else {
            /* about 8 MiB of JSON per request (the server takes 32 MiB by default) */
            size_t per = (size_t)g.dim * 12 + 48 + (g.info.has_payloads ? 512 : 0);
            g.batch = (8u << 20) / per;
            if (g.batch < 8) g.batch = 8;
            if (g.batch > 8192) g.batch = 8192;
        }
    }
    if (g.batch > g.total) g.batch = (size_t)g.total;
    /* Dense files seek in O(1): then every worker reads its own batches (no shared reader,
     * no copy). Text files (.jsonl vectors, payload files) are read once, in order. */
    {
        sieve_ds_format vf = g.fmt ? g.fmt : sieve_ds_format_from_path(g.vectors_path);
        g.worker_reads = sieve_ds_format_is_dense(vf) && !g.payloads_path;
    }

    /* target */
    if (g.direct) {
#ifdef M_MMAP_THRESHOLD
        /* LMDB mallocs each transaction's dirty pages and frees them at commit; keep that
         * memory in the process instead of faulting it in again for every commit. */
        mallopt(M_MMAP_THRESHOLD, 32 << 20);
        mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
        status = setup_direct(&g);
    } else {
        status = setup_http(&g);
    }
    if (status) goto out;

    status = setup_checkpoint(&g);
    if (status) goto out;
    status = plan_resume(&g);
    if (status) goto out;
    if (g.start >= g.total) {
        char a[32];
        fprintf(stderr, "sieve ingest: all %s rows are already stored (checkpoint %s)\n",
                group(g.total, a), g.ckpt_path);
        if (g.ckpt_on) unlink(g.ckpt_path);
        goto summary;
    }
    if (sieve_ds_source_seek(g.src, g.start, &derr)) {
        status = cli_error(CLI_FAIL, CMD, "%s", derr.msg);
        goto out;
    }

    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    signal(SIGPIPE, SIG_IGN);

    sieve_progress bar;
    sieve_progress_init(&bar, stderr, "ingest", "vectors", g.total, g.start, g.pmode);
    double t0 = now_s();
    status = run_pipeline(&g, &bar);
    double secs = now_s() - t0;
    sieve_progress_finish(&bar);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);

    char a[32], b[32], c[32];
    if (g.stats) print_stats(&g, secs);
    if (status == CLI_OK) {
        if (g.ckpt_on) unlink(g.ckpt_path);
        uint64_t sent = g.total - g.start;
        fprintf(stderr, "sieve ingest: %s vectors in %.2f s (%.0f vectors/s)%s\n", group(sent, a),
                secs, secs > 0 ? (double)sent / secs : 0.0, g.start ? " after resuming" : "");
    } else {
        if (g.failed) fprintf(stderr, "sieve ingest: %s\n", g.err);
        if (status == CLI_INTERRUPTED) fprintf(stderr, "sieve ingest: interrupted\n");
        if (g.ckpt_on && g.ck_written > 0)
            fprintf(stderr,
                    "sieve ingest: the first %s of %s rows are stored (checkpoint %s); run the "
                    "same command again to continue from row %s\n",
                    group(g.ck_written, a), group(g.total, b), g.ckpt_path, group(g.ck_written, c));
        goto out;
    }
summary:
    if (!status) {
        uint64_t points = 0;
        int rc = 0;
        if (g.direct) {
            rc = sieve_store_count(g.st, g.coll, &points);
        } else {
            rc = sieve_client_count(g.clients[0], g.coll, NULL, &points);
        }
        if (!rc)
            printf("ingested %s rows of %s into '%s'; it now has %s points\n", group(g.total, a),
                   g.vectors_path, g.coll, group(points, b));
        else
            printf("ingested %s rows of %s into '%s'\n", group(g.total, a), g.vectors_path, g.coll);
    }
out:
    if (g.clients) {
        for (int i = 0; i < g.parallel; i++) sieve_client_close(g.clients[i]);
        free(g.clients);
    }
    sieve_store_close(g.st);
    sieve_ds_source_close(g.src);
    pthread_mutex_destroy(&g.mu);
    pthread_cond_destroy(&g.cv);
    pthread_mutex_destroy(&g.ck_mu);
    return status;
}

/* store_internal.h: what the store's source files share (not a public header).
 *
 * Owns: the sieve_store struct, the LMDB key formats, write requests, the writer's mutable
 * per-collection state and the immutable published views. Must not: be included outside
 * store/.
 *
 * ---------------------------------------------------------------- LMDB layout
 * One environment per data directory (data.mdb and lock.mdb inside it) plus the directory
 * lock file sieve.lock (flock, one sieve process per directory). Seven named databases,
 * shared by all collections. Integers in keys are big-endian so that memcmp order equals
 * numeric order and every collection's keys form one contiguous range.
 *
 *   "meta"      "format"    -> u32 BE (SIEVE__FORMAT)
 *               "next_cid"  -> u32 BE, the next collection id (ids start at 1, never reused)
 *   "coll"      name bytes (no NUL) -> config record, 24 bytes of u32 BE:
 *               format, cid, dim, metric, dtype, rows_per_page
 *   "pages"     cid u32 BE | page u64 BE (12 bytes) -> one page blob:
 *               rows_per_page * dim elements of the dtype (row r of the page at element
 *               r * dim), then rows_per_page float32 squared norms (sieve_row_sqnorm of the
 *               stored row), all in host byte order, padded with zeros up to at least one
 *               LMDB page so that the blob always lives in overflow pages (16-byte aligned
 *               in the map). Rows of the page not yet used are zero.
 *   "ids"       cid u32 BE | id key (17 bytes) -> row u64 BE
 *               id key: kind u8 (0 number, 1 UUID) then 16 bytes: for numbers 8 zero bytes
 *               and the number as u64 BE, for UUIDs the 16 UUID bytes. Key order equals
 *               sieve_point_id_cmp order.
 *   "rows"      cid u32 BE | row u64 BE -> id key (17 bytes) | live u8 (1 live, 0 deleted;
 *               a deleted row's id key is zero). Every row ever allocated has an entry, so
 *               the collection's row count is the last row key + 1.
 *   "payloads"  cid u32 BE | row u64 BE -> payload JSON text (an object, no NUL); absent
 *               when the point has no payload.
 *   "free"      cid u32 BE | row u64 BE -> empty: deleted rows waiting for reuse; inserts
 *               take the lowest one.
 */
#ifndef SIEVE_STORE_INTERNAL_H
#define SIEVE_STORE_INTERNAL_H

#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "sieve_store.h"

#define SIEVE__FORMAT 1u
#define SIEVE__IDKEY 17                 /* kind byte + 16 bytes */
#define SIEVE__ROWVAL (SIEVE__IDKEY + 1) /* id key + live flag */
#define SIEVE__PAYLOAD_MAX (16u << 20)
#define SIEVE__DIM_MAX 65536u
#define SIEVE__RPP_MAX (1u << 20)
#define SIEVE__GROUP_BYTES (256ull << 20) /* a group stops growing past this many bytes */

/* ---------------------------------------------------------------- byte helpers */

static inline void sieve__put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}
static inline uint32_t sieve__get_be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline void sieve__put_be64(uint8_t *p, uint64_t v) {
    sieve__put_be32(p, (uint32_t)(v >> 32));
    sieve__put_be32(p + 4, (uint32_t)v);
}
static inline uint64_t sieve__get_be64(const uint8_t *p) {
    return ((uint64_t)sieve__get_be32(p) << 32) | sieve__get_be32(p + 4);
}

/* cid | u64 keys of "pages", "rows", "payloads", "free". */
typedef struct sieve__rkey { uint8_t b[12]; } sieve__rkey;
static inline sieve__rkey sieve__rowkey(uint32_t cid, uint64_t n) {
    sieve__rkey k;
    sieve__put_be32(k.b, cid);
    sieve__put_be64(k.b + 4, n);
    return k;
}

/* ids.c */
void sieve__id_key(const sieve_point_id *id, uint8_t key[SIEVE__IDKEY]);
int sieve__id_from_key(const uint8_t key[SIEVE__IDKEY], sieve_point_id *out);

/* ---------------------------------------------------------------- views */

/* An immutable, refcounted picture of one collection as of one committed transaction.
 * The writer builds the next view of each collection a group touches (a copy of the
 * current one with the group's effects applied) before it commits, and publishes it after
 * the commit, before any caller is woken. Snapshots, get, count and info take references. */
typedef struct sieve__view {
    atomic_uint_fast64_t refs;
    char name[SIEVE_NAME_MAX + 1];
    sieve_collection_info info;
    uint64_t *deleted;  /* ceil(rows/64) words, bit set = row deleted (NULL when rows == 0) */
    uint64_t *page_gen; /* info.pages entries (NULL when pages == 0) */
    size_t deleted_cap, page_gen_cap; /* while the writer builds it */
    int dropped;        /* while the writer builds a group: the collection was dropped */
} sieve__view;

sieve__view *sieve__view_new(const char *name, const sieve_collection_config *cfg,
                             uint32_t cid);
sieve__view *sieve__view_copy(const sieve__view *v);
/* Makes room for rows rows (bitmap words and page generations, zero-filled). */
int sieve__view_reserve(sieve__view *v, uint64_t rows);
void sieve__view_unref(sieve__view *v);

/* A published collection: name -> current view. */
typedef struct sieve__entry {
    char name[SIEVE_NAME_MAX + 1];
    sieve__view *view;
} sieve__entry;

/* ---------------------------------------------------------------- write requests */

typedef enum sieve__req_kind {
    SIEVE__REQ_CREATE, SIEVE__REQ_DROP, SIEVE__REQ_UPSERT, SIEVE__REQ_DELETE
} sieve__req_kind;

typedef struct sieve__req {
    sieve__req_kind kind;
    struct sieve__req *next;
    pthread_cond_t cv;
    int done;
    int rc;                   /* sieve error code, set by the writer */
    uint64_t bytes;           /* rough size, for capping a group */
    char name[SIEVE_NAME_MAX + 1];
    sieve_collection_config cfg; /* create: resolved config; upsert: the config prepared for */
    uint32_t cid;             /* upsert: the collection id the vectors were prepared for;
                                 create/drop: set by the writer */
    /* upsert: n unique points in application order */
    size_t n;
    const uint8_t *keys;      /* n * SIEVE__IDKEY */
    const void *const *vecs;  /* n stored rows (dtype, dim elements) */
    const float *norms;       /* n squared norms */
    const sieve_point *const *pts; /* n points (payloads) */
    /* delete: n id keys in keys */
    /* effects, filled by the writer's apply (reset on every retry) */
    uint64_t *rows_out;       /* upsert: row of each point; delete: rows deleted */
    uint8_t *fresh;           /* upsert: 1 if the row became live (insert) */
    uint64_t n_out;           /* delete: rows deleted */
    uint64_t rows_after;      /* upsert: collection row count after the request */
} sieve__req;

/* ---------------------------------------------------------------- the store */

struct sieve_store {
    int lock_fd;
    MDB_env *env;
    MDB_dbi dbi_meta, dbi_coll, dbi_pages, dbi_ids, dbi_rows, dbi_payloads, dbi_free;
    sieve_store_options opts;
    uint32_t psize;               /* LMDB page size */

    /* The map gate: LMDB may resize the map only while no transaction is open in this
     * process. Read transactions (snapshots, get) enter as readers; the writer grows the map
     * only with no reader inside, and while it waits no new reader enters. Unlike a
     * pthread rwlock, a reader may leave from another thread than the one that entered. */
    pthread_mutex_t map_mu;
    pthread_cond_t map_cv;
    uint64_t readers;
    int grow_waiting;
    pthread_mutex_t mu;           /* everything below until "writer only" */
    pthread_cond_t queue_cv;      /* writer waits for requests */
    pthread_cond_t publish_cv;    /* broadcast after each publish */
    sieve__req *q_head, *q_tail;
    int stopping;
    sieve__entry *entries;        /* sorted by name */
    size_t n_entries, cap_entries;
    uint64_t published_txnid;     /* the LMDB txn id the published views describe */
    sieve_store_stats stats;

    /* The flusher: while the writer is inside mdb_txn_commit it starts the kernel's writeback
     * of the data file's dirty pages every few milliseconds (sync_file_range, WRITE only), so
     * the disk writes the first pages of a commit while LMDB still copies the last ones into
     * the page cache, instead of only once the commit's fdatasync begins. It never waits for
     * the disk and changes no ordering LMDB relies on (the kernel may write any dirty page
     * at any time). Not started with no_sync. */
    pthread_mutex_t flush_mu;
    pthread_cond_t flush_cv;
    int flush_active;             /* the writer is committing */
    int flush_stop;
    int data_fd;
    pthread_t flusher;
    int flusher_started;

    /* writer only */
    pthread_t writer;
    int writer_started;
    sieve__req **group;           /* group_max slots */
    uint8_t *scratch;             /* one page blob, for read-modify-write */
    size_t scratch_bytes;
    uint64_t map_bytes;
};

/* store.c */
void sieve__readers_enter(sieve_store *st);
void sieve__readers_leave(sieve_store *st);
int sieve__mdb_err(int rc);   /* LMDB/errno code -> sieve code */
int sieve__submit(sieve_store *st, sieve__req *req);
/* Looks up name's current view and takes a reference (NULL when absent). Also reports the
 * published txn id when txnid is not NULL. Locks st->mu. */
sieve__view *sieve__view_get(sieve_store *st, const char *name, uint64_t *txnid);

/* collections.c */
uint32_t sieve__default_rows_per_page(uint32_t dim, sieve_dtype dtype);
size_t sieve__page_bytes(const sieve_collection_config *cfg, uint32_t psize);
int sieve__coll_get(sieve_store *st, MDB_txn *txn, const char *name,
                    sieve_collection_config *cfg, uint32_t *cid);
/* Builds the views of every collection from LMDB (at open). */
int sieve__load_views(sieve_store *st, MDB_txn *txn);
int sieve__apply_create(sieve_store *st, MDB_txn *txn, sieve__req *req);
int sieve__apply_drop(sieve_store *st, MDB_txn *txn, sieve__req *req);

/* points.c */
int sieve__apply_upsert(sieve_store *st, MDB_txn *txn, sieve__req *req);
int sieve__apply_delete(sieve_store *st, MDB_txn *txn, sieve__req *req);
/* Row count of collection cid inside txn (last "rows" key + 1). */
int sieve__rows_count(sieve_store *st, MDB_txn *txn, uint32_t cid, uint64_t *rows);

#endif

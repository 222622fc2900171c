/* sieve_store.h: the public API of sieve's LMDB store.
 *
 * Owns: one LMDB environment per data directory; collections (config, vector pages, id map,
 * row table, payloads, free rows); durable group-committed writes; read snapshots that expose
 * a collection's pages as a sieve_matrix straight out of LMDB's memory map; the map growing
 * on MDB_MAP_FULL. Must not: parse HTTP, know about CUDA (device residency goes through the
 * kernel module's device-memory functions only).
 *
 * Files in a data directory: data.mdb and lock.mdb (LMDB) and sieve.lock, which the open
 * store holds with flock(LOCK_EX|LOCK_NB): one sieve process per data directory, and a bulk
 * ingest into a directory that a server has open fails with SIEVE_EBUSY.
 *
 * Layout (store_internal.h documents the exact key formats): a fixed set of named databases
 * shared by all collections, each key prefixed by the collection's 32-bit id. This deviates
 * from "named databases per collection" in design.md on purpose: LMDB DBI handles are
 * environment-wide and unsafe to close while other threads' transactions still use them,
 * and a fixed set has no maxdbs limit. Dropping a collection deletes its key ranges in one
 * write transaction; collection ids are never reused. Floats are stored in host byte order.
 *
 * Pages: rows_per_page consecutive rows of one dtype followed by their float32 squared norms
 * (sieve_row_sqnorm), one LMDB value per page, written with one put per page. The default
 * rows_per_page is the largest power of two (at least 128) whose page fits in 1 MiB.
 *
 * Rows: each point occupies one row. Overwriting an id rewrites its row in place. Deleting
 * a point marks its row deleted (its vector stays in the page until the row is reused);
 * later inserts reuse the lowest free row. There is no compaction.
 *
 * Thread-safety: a sieve_store is safe to use from any number of threads. Write calls
 * (create, drop, upsert, delete) are queued to one writer thread that groups concurrent
 * requests into one durable LMDB transaction (group commit), each request in its own nested
 * transaction so that a failing request fails alone; each request is applied atomically (all
 * of it or none of it) and the call returns after the commit is durable and visible to
 * snapshots opened afterwards (while a commit copies its pages into the page cache, a
 * helper thread starts the kernel's writeback of what is already there, so the commit's
 * fdatasync has less left to wait for). Callers check, normalise, convert and take norms of
 * their vectors in their own thread (large batches on a few short-lived helper threads), so
 * several concurrent callers overlap that work with the writer's commits. A snapshot is used by one
 * thread at a time (it may move between threads).
 *
 * Memory: each commit builds a new immutable view of every collection it touched (deleted
 * bitmap, rows/8 bytes, and page generations, pages*8 bytes), so very small commits on very
 * large collections pay that copy.
 */
#ifndef SIEVE_STORE_H
#define SIEVE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "sieve_error.h"
#include "sieve_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SIEVE_NAME_MAX 64 /* collection names: 1..64 chars of [A-Za-z0-9_.-], not "." or ".." */

typedef struct sieve_store sieve_store;

typedef struct sieve_store_options {
    uint64_t initial_map_bytes; /* initial LMDB map size (default 1 GiB, at least 1 MiB; an
                                   existing larger map is kept); doubles on MDB_MAP_FULL */
    int no_sync;                /* tests and benchmarks only: MDB_NOSYNC (not durable) */
    uint32_t group_max;         /* most requests grouped into one transaction (default 256,
                                   at most 65536); a group also stops at about 256 MiB */
} sieve_store_options;

/* Fills o with the defaults above. */
void sieve_store_options_init(sieve_store_options *o);

/* Opens (creating if needed) the store in directory dir (one level of mkdir). opts may be
 * NULL for the defaults. On success *out owns the store (close it with sieve_store_close);
 * on failure *out is NULL. Fails with SIEVE_EBUSY if another process or another open handle
 * holds the directory's lock (one sieve process per data directory).
 * Errors: SIEVE_EINVAL (NULL or empty dir, dir is not a directory, bad options), SIEVE_EIO,
 * SIEVE_ECORRUPT (not a sieve store of this format), SIEVE_EBUSY, SIEVE_ENOMEM. */
int sieve_store_open(const char *dir, const sieve_store_options *opts, sieve_store **out);
/* Finishes queued writes, stops the writer and closes the environment. NULL is ignored.
 * All snapshots must be closed first. */
void sieve_store_close(sieve_store *st);

/* ---------------------------------------------------------------- collections */

typedef struct sieve_collection_config {
    char name[SIEVE_NAME_MAX + 1];
    uint32_t dim;            /* 1 .. 65536 */
    sieve_metric metric;
    sieve_dtype dtype;
    uint32_t rows_per_page;  /* 0 = choose (about 1 MiB pages); else a multiple of 128 */
} sieve_collection_config;

typedef struct sieve_collection_info {
    sieve_collection_config config; /* rows_per_page resolved */
    uint64_t points;      /* live points */
    uint64_t rows;        /* rows addressed (live + deleted), the kernel's n_rows */
    uint64_t pages;
    uint64_t generation;  /* increases with every committed change to the collection */
    uint32_t collection_id;
} sieve_collection_info;

/* 1 if name is a valid collection name, else 0. */
int sieve_store_name_valid(const char *name);

/* Errors: SIEVE_EINVAL (bad name, dim, page size), SIEVE_EEXIST, SIEVE_EIO. */
int sieve_store_create_collection(sieve_store *st, const sieve_collection_config *cfg);
/* Errors: SIEVE_EINVAL, SIEVE_ENOTFOUND, SIEVE_EIO. */
int sieve_store_drop_collection(sieve_store *st, const char *name);
/* *names gets a malloc'd array of *count malloc'd names, sorted; free with
 * sieve_store_free_names. Errors: SIEVE_ENOMEM, SIEVE_EIO. */
int sieve_store_list_collections(sieve_store *st, char ***names, size_t *count);
void sieve_store_free_names(char **names, size_t count);
/* Errors: SIEVE_EINVAL, SIEVE_ENOTFOUND. */
int sieve_store_collection_info(sieve_store *st, const char *name, sieve_collection_info *out);

/* ---------------------------------------------------------------- points */

typedef enum sieve_id_kind { SIEVE_ID_NUM = 0, SIEVE_ID_UUID = 1 } sieve_id_kind;

typedef struct sieve_point_id {
    sieve_id_kind kind;
    uint64_t num;          /* when kind == SIEVE_ID_NUM */
    uint8_t uuid[16];      /* when kind == SIEVE_ID_UUID */
} sieve_point_id;

/* Parses a canonical or hyphen-less UUID string (case-insensitive). 0 or SIEVE_EINVAL. */
int sieve_uuid_parse(const char *text, uint8_t out[16]);
/* Writes the lowercase hyphenated form (36 chars + NUL) into buf[37]. */
void sieve_uuid_format(const uint8_t uuid[16], char buf[37]);
/* Orders ids: numbers before UUIDs, then by value. */
int sieve_point_id_cmp(const sieve_point_id *a, const sieve_point_id *b);

typedef struct sieve_point {
    sieve_point_id id;
    const float *vector;     /* dim float32 values (finite); converted to the collection's
                                dtype, normalised first for Cosine */
    const char *payload;     /* JSON object text, or NULL for no payload */
    size_t payload_len;      /* bytes of payload (0 with NULL) */
    uint32_t dim;            /* values at vector as the caller received them, checked against
                                the collection (SIEVE_EDIM); 0 = the caller vouches for dim */
} sieve_point;

/* Inserts or replaces n points in one atomic, durable write. Every vector is checked
 * (finite, right dimension) before anything is written; a failed call writes nothing.
 * Replacing an id replaces its vector and its payload (NULL payload clears it).
 * Within one call, a repeated id keeps its last occurrence. New ids take the lowest free
 * (deleted) row, else the next row. Cosine vectors are normalised in float32 before the
 * conversion (a zero vector stays zero). The points and everything they point to are only
 * read, and only until the call returns.
 * Errors: SIEVE_EINVAL (NULL pointers, bad id kind, payload not a JSON object),
 * SIEVE_EPARSE (payload is not JSON), SIEVE_ENOTFOUND (collection), SIEVE_ENONFINITE,
 * SIEVE_EDIM, SIEVE_ERANGE (a value overflows the dtype, or the squared norm overflows
 * float32), SIEVE_ETOOBIG (payload over 16 MiB), SIEVE_ENOMEM, SIEVE_EIO, SIEVE_ECLOSED. */
int sieve_store_upsert(sieve_store *st, const char *collection, const sieve_point *points,
                       size_t n);

/* Deletes the points with these ids (absent ids are ignored) in one durable write.
 * *n_deleted (optional) gets how many existed. Errors: SIEVE_EINVAL, SIEVE_ENOTFOUND,
 * SIEVE_EIO, SIEVE_ECLOSED. */
int sieve_store_delete(sieve_store *st, const char *collection, const sieve_point_id *ids,
                       size_t n, uint64_t *n_deleted);

/* Live point count. Errors: SIEVE_EINVAL, SIEVE_ENOTFOUND. */
int sieve_store_count(sieve_store *st, const char *collection, uint64_t *out);

/* Reads one point. vector_out (optional) gets dim float32 values as stored (converted from
 * the dtype); *payload_out (optional) gets a malloc'd NUL-terminated copy of the payload
 * JSON or NULL when it has none (caller frees). Errors: SIEVE_EINVAL, SIEVE_ENOTFOUND
 * (collection or point). */
int sieve_store_get(sieve_store *st, const char *collection, const sieve_point_id *id,
                    float *vector_out, char **payload_out);

/* ---------------------------------------------------------------- statistics */

typedef struct sieve_store_stats {
    uint64_t requests;      /* write requests applied (create, drop, upsert, delete) */
    uint64_t failed;        /* of which failed (and wrote nothing) */
    uint64_t commits;       /* LMDB write transactions committed */
    uint64_t retries;       /* groups re-run after MDB_MAP_FULL */
    uint64_t map_grows;     /* times the map was grown */
    uint64_t map_bytes;     /* current map size */
    uint64_t max_group;     /* most requests in one transaction */
    uint64_t apply_ns;      /* writer time applying requests (puts, page writes) */
    uint64_t commit_ns;     /* writer time in mdb_txn_commit (writes and syncs) */
} sieve_store_stats;

/* Copies the writer's counters (group commit: commits < requests under concurrency).
 * Errors: SIEVE_EINVAL. */
int sieve_store_get_stats(sieve_store *st, sieve_store_stats *out);

/* ---------------------------------------------------------------- read snapshots */

/* A consistent read view of one collection: an LMDB read transaction plus the paged
 * matrix. While a snapshot is open the pointers it hands out stay valid and the map is not
 * resized (a writer that needs to grow the map waits for open snapshots to close), so keep
 * snapshots short-lived. A thread that holds a snapshot must not open another snapshot, call
 * sieve_store_get or any write call until it closes it: when the map must grow, the writer
 * waits for every open snapshot and new readers wait for the writer. A snapshot opened after
 * a write call returned sees that write. Deletes show in the deleted bitmap only; page
 * generations change when a page's bytes (vectors or norms) change. */
typedef struct sieve_snapshot sieve_snapshot;

/* Errors: SIEVE_EINVAL, SIEVE_ENOTFOUND, SIEVE_ENOMEM, SIEVE_EIO, SIEVE_ECORRUPT. */
int sieve_snapshot_open(sieve_store *st, const char *collection, sieve_snapshot **out);
void sieve_snapshot_close(sieve_snapshot *snap);

/* 1 when snap may serve another batch of reads as if it had just been opened: the
 * collection's published state is still the one snap sees (no commit has changed it since,
 * and it was not dropped or re-created) and no writer is waiting for snapshots to close so
 * it can grow the map. 0 otherwise (also for NULL): close snap and open a new one. Cheap
 * (two short locks, no LMDB call); callable by the thread that holds snap. A long-lived
 * snapshot holds LMDB pages freed by later writes, so callers should also bound its age. */
int sieve_snapshot_is_current(sieve_snapshot *snap);

/* The collection's info as of this snapshot. */
const sieve_collection_info *sieve_snapshot_info(const sieve_snapshot *snap);

/* The host-memory matrix view (pages and norm pages in LMDB's map; the deleted bitmap owned
 * by the snapshot; allowed = NULL). Valid until sieve_snapshot_close. */
const sieve_matrix *sieve_snapshot_matrix(const sieve_snapshot *snap);

/* Generation of each page (n = info->pages entries): a page's generation changes whenever
 * any of its rows or norms change. Owned by the snapshot. */
const uint64_t *sieve_snapshot_page_generations(const sieve_snapshot *snap);

/* Row -> external id. Errors: SIEVE_ERANGE (row >= rows), SIEVE_ENOTFOUND (row deleted). */
int sieve_snapshot_row_id(sieve_snapshot *snap, uint64_t row, sieve_point_id *out);
/* A row -> id cache, for answers with many hits (one database lookup per row costs about a
 * microsecond): the first lookup in a run of 64 rows reads the ids of all of them in one
 * cursor pass, later ones index them, as long as the snapshot's generation of their page
 * is the one they were read at (a page's generation changes whenever a row of it is
 * written, so a freed row taken by a new point invalidates them). Keeps up to 4
 * collections (the least recently used one makes way) and at most max_bytes of row values
 * (18 bytes a row, allocated by page); past that, lookups go to the database. Owned by one
 * thread at a time; use it with snapshots of one store and free it before closing that
 * store. */
typedef struct sieve_idcache sieve_idcache;
int sieve_idcache_new(size_t max_bytes, sieve_idcache **out);
void sieve_idcache_free(sieve_idcache *c);
/* sieve_snapshot_row_id through the cache c (NULL: straight to the database); the same
 * answers and errors. */
int sieve_snapshot_row_id_cached(sieve_snapshot *snap, sieve_idcache *c, uint64_t row,
                                 sieve_point_id *out);
/* A hint before sieve_snapshot_row_id_cached of `row`: starts loading the row's cached
 * value into the CPU cache (nothing when it is not cached), so a caller looking up many
 * rows overlaps their memory latency by calling it a few rows ahead. Changes nothing. */
void sieve_snapshot_row_id_prefetch(const sieve_snapshot *snap, const sieve_idcache *c,
                                    uint64_t row);
/* External id -> row. Errors: SIEVE_ENOTFOUND. */
int sieve_snapshot_id_row(sieve_snapshot *snap, const sieve_point_id *id, uint64_t *row);
/* Payload JSON of a row: *json points into the map (not NUL-terminated), valid until the
 * snapshot closes; *json = NULL, *len = 0 when the row has no payload. Errors: SIEVE_ERANGE. */
int sieve_snapshot_row_payload(sieve_snapshot *snap, uint64_t row, const char **json,
                               size_t *len);
/* Stored vector of a row as float32 (dim values). Errors: SIEVE_ERANGE. */
int sieve_snapshot_row_vector(sieve_snapshot *snap, uint64_t row, float *out);

/* Calls fn for every live row in row order with its id and payload (payload NULL if none);
 * stops early when fn returns nonzero and returns that value. Used to build filter masks. */
typedef int (*sieve_row_visitor)(void *ctx, uint64_t row, const sieve_point_id *id,
                                 const char *payload, size_t payload_len);
int sieve_snapshot_foreach(sieve_snapshot *snap, sieve_row_visitor fn, void *ctx);

/* ---------------------------------------------------------------- device page cache */

/* A device page cache: keeps collections' pages resident in one device's memory, refreshes
 * only the pages whose generation changed since it last looked, keeps the deleted bitmap
 * (tombstones) on the device, and searches exactly. A collection larger than the budget is
 * still searched exactly: its pages stream through pinned host buffers in chunks (staging
 * of the next chunk overlaps the search of the current one) and the per-chunk top-k lists
 * are merged by (key, row), which is the same order the kernel uses. On the CPU device the
 * pages are searched where they lie in LMDB's map and the cache holds nothing (unless
 * host_resident is set, for tests).
 *
 * Thread-safety: one cache may be shared by several threads, each searching through its own
 * lane (sieve_devcache_lane_*: its own device handle, so its own stream and kernel scratch,
 * and its own filter-mask buffer); the resident pages are shared. Each resident collection
 * counts the lanes whose searches are reading it: its pages are refreshed (or it is evicted
 * or replaced) only while that count is zero, so a search never sees pages change under
 * it, and a lane whose snapshot is at another generation waits until the searches in
 * flight finish. A snapshot older than the resident copy makes the copy go back to that
 * snapshot's pages (only pages whose generation differs are copied); keep snapshots fresh
 * (sieve_snapshot_is_current) to avoid that. Streamed searches run one at a time per cache
 * (they share the pinned staging buffers and are bound by host-to-device copies).
 * sieve_devcache_knn searches through the cache's own lane on the device it was created
 * with, so it is for one thread at a time. The device must outlive the cache; lanes must be
 * destroyed before their cache. */
typedef struct sieve_devcache sieve_devcache;

typedef struct sieve_devcache_options {
    uint64_t budget_bytes;       /* device bytes for resident pages; 0 = 80% of free memory
                                    (no limit with host_resident) */
    uint32_t stream_chunk_pages; /* pages per streamed chunk; 0 = about 1 GiB or budget/4 */
    int host_resident;           /* tests: on the CPU device, copy pages into the cache's own
                                    (host) memory and search that copy, refreshing and
                                    streaming exactly as on a GPU; ignored on CUDA */
} sieve_devcache_options;

void sieve_devcache_options_init(sieve_devcache_options *o);

/* Errors: SIEVE_EINVAL, SIEVE_ENOMEM, SIEVE_EDEVICE. */
int sieve_devcache_create(sieve_device *dev, const sieve_devcache_options *opts,
                          sieve_devcache **out);
/* Frees every device allocation of the cache. NULL is ignored. */
void sieve_devcache_destroy(sieve_devcache *dc);

/* Exact k-NN over the live rows of the snapshot's collection (and, when allowed is not NULL,
 * only rows whose bit is set in that host bitmap of ceil(rows/64) words). Outputs as
 * sieve_knn (host memory; rows are collection rows). stats (optional) is overwritten.
 * Searches through the cache's own lane (one thread at a time; other lanes may search
 * concurrently).
 * Errors: as sieve_knn, plus SIEVE_ENOMEM when even one streamed chunk does not fit. */
int sieve_devcache_knn(sieve_devcache *dc, sieve_snapshot *snap, const uint64_t *allowed,
                       const float *queries, uint32_t n_queries, const sieve_search_params *p,
                       int64_t *out_rows, float *out_scores, uint32_t *out_counts,
                       sieve_search_stats *stats);

/* A lane: one thread's way into a shared cache. */
typedef struct sieve_devcache_lane sieve_devcache_lane;

/* Creates a lane of dc that searches on dev: a device handle of the same kind as the
 * cache's (for CUDA, the same GPU) used by this lane only, so that lanes on different
 * threads each have their own stream and scratch. dev must outlive the lane.
 * Errors: SIEVE_EINVAL (NULL, or dev is of another kind or another GPU), SIEVE_ENOMEM,
 * SIEVE_EDEVICE. */
int sieve_devcache_lane_create(sieve_devcache *dc, sieve_device *dev,
                               sieve_devcache_lane **out);
/* Frees the lane's buffers. NULL is ignored. */
void sieve_devcache_lane_destroy(sieve_devcache_lane *lane);
/* As sieve_devcache_knn, through lane (one thread at a time per lane). */
int sieve_devcache_lane_knn(sieve_devcache_lane *lane, sieve_snapshot *snap,
                            const uint64_t *allowed, const float *queries, uint32_t n_queries,
                            const sieve_search_params *p, int64_t *out_rows, float *out_scores,
                            uint32_t *out_counts, sieve_search_stats *stats);

typedef struct sieve_devcache_stats {
    uint64_t resident_collections;
    uint64_t resident_bytes;     /* device bytes held for pages, norms, tables and masks */
    uint64_t budget_bytes;
    uint64_t pages_uploaded;     /* since creation, resident refreshes and streamed chunks */
    uint64_t bytes_uploaded;
    uint64_t streamed_searches;  /* searches that streamed because the collection was too big */
} sieve_devcache_stats;

/* A consistent copy of the counters (any thread). Errors: SIEVE_EINVAL. */
int sieve_devcache_get_stats(const sieve_devcache *dc, sieve_devcache_stats *out);

#ifdef __cplusplus
}
#endif
#endif

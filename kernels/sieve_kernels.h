/* sieve_kernels.h: the public C ABI of sieve's kernel module.
 *
 * Owns: device selection (CPU or CUDA), element types and their conversions, the batched
 * exact k-NN search (fused score + sample-guided certified top-k), the materialize-then-sort
 * oracle, a float64 reference, the device memory primitives the page cache needs, and the
 * sparse-attention kernels (the indexer top-k: fused, materialized, float64 reference).
 * Must not: include CUDA headers here (callers in store/, server/, client/ stay CUDA-free),
 * know about LMDB, HTTP or JSON.
 *
 * Thread-safety: a sieve_device is used by one thread at a time (it owns a stream and
 * staging buffers); open one per worker. Everything else here is pure. A CUDA device
 * starts up to 8 host threads of its own at its first copy between pageable arrays and its
 * staging buffer (never when the caller's arrays are page-locked) and stops them at close.
 *
 * CPU device: searches run on the device's worker threads and call OpenBLAS single-threaded
 * (openblas_set_num_threads(1), a process-wide OpenBLAS setting), so results never depend
 * on BLAS threading. OpenBLAS picks its kernels from the CPU model at load time; on CPUs it
 * does not recognise it falls back to slow generic ones, and OPENBLAS_CORETYPE (for example
 * SkylakeX) in the environment selects better ones.
 *
 * The exact top-k contract (see design.md): for each query, the result is the k rows of the
 * largest ranking key, best first, ties broken by the smaller row number, and equal to a
 * full sort of the keys this module computes. The ranking key is the float32 dot product
 * for Dot and Cosine, and 2*q.x - |x|^2 for Euclid (larger is better, equivalent to the
 * smallest distance). Sampling and binning change how much work is done, never the answer.
 *
 * Precision: the CPU computes keys from float32 queries and the stored values (BLAS, float32
 * accumulation). CUDA computes float32 storage the same way (FFMA, no TF32); for float16 and
 * bfloat16 storage it rounds the query to the storage type for the tensor-core products
 * (float32 accumulation), as FAISS's float16 GPU index does, so a CUDA key may differ from
 * the CPU's by up to u * sum_d |q_d x_d| (twice that for Euclid), u = 2^-11 for float16 and
 * 2^-8 for bfloat16: answers agree across devices up to near-ties within that bound.
 * On Hopper (sm_90) the float16/bfloat16 scan uses wgmma tiles, elsewhere mma.sync; the
 * environment variable SIEVE_CUDA_SCAN (mma, wg64x128, wg128x128s3, wg64x128-direct,
 * wg128x128s3-direct, tma64x256, tma64x128, tma128x256, tma64x128s, tma64x256s, tma128x256s)
 * overrides the choice, for benchmarks and tests only (for float32 storage, f32tile runs the
 * tiles at batches of up to 32 queries, which otherwise take a row-per-thread loop (up to 4)
 * or a row-major cp.async loop (5-32); the keys are the same either way); SIEVE_CUDA_SELECT
 * (segmented, small) likewise forces how the select step sorts the candidates: one segmented
 * sort, or the smallest block of threads per query at every k (by default a block per query
 * in shared memory sized by k, queries keeping more than it holds handed to the segmented
 * sort).
 */
#ifndef SIEVE_KERNELS_H
#define SIEVE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "sieve_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- element types */

typedef enum sieve_dtype {
    SIEVE_DTYPE_F32 = 0,  /* IEEE binary32 */
    SIEVE_DTYPE_F16 = 1,  /* IEEE binary16 */
    SIEVE_DTYPE_BF16 = 2, /* bfloat16 (upper half of a binary32) */
} sieve_dtype;

typedef enum sieve_metric {
    SIEVE_METRIC_DOT = 0,    /* key = q.x */
    SIEVE_METRIC_COSINE = 1, /* rows normalised at upsert; query normalised here; key = q.x */
    SIEVE_METRIC_EUCLID = 2, /* key = 2 q.x - |x|^2; reported score = sqrt(max(0,|q|^2 - key)) */
} sieve_metric;

/* Bytes per element of dtype, or 0 for an unknown dtype. */
size_t sieve_dtype_size(sieve_dtype dtype);
/* "float32" / "float16" / "bfloat16", or NULL. */
const char *sieve_dtype_name(sieve_dtype dtype);
/* Parses the names above (also "f32","f16","bf16","float"); 0 or SIEVE_EINVAL. */
int sieve_dtype_parse(const char *name, sieve_dtype *out);
/* "Dot" / "Cosine" / "Euclid", or NULL. */
const char *sieve_metric_name(sieve_metric metric);
/* Parses "Dot", "Cosine", "Euclid" (case-insensitive); 0 or SIEVE_EINVAL. */
int sieve_metric_parse(const char *name, sieve_metric *out);

/* Round-to-nearest-even conversions (NaN stays NaN, overflow goes to infinity). */
uint16_t sieve_f32_to_f16(float x);
float sieve_f16_to_f32(uint16_t h);
uint16_t sieve_f32_to_bf16(float x);
float sieve_bf16_to_f32(uint16_t h);

/* Converts n float32 values into dtype (dst holds n * sieve_dtype_size(dtype) bytes). */
void sieve_convert_from_f32(sieve_dtype dtype, const float *src, void *dst, size_t n);
/* Converts n dtype values into float32. */
void sieve_convert_to_f32(sieve_dtype dtype, const void *src, float *dst, size_t n);

/* Squared L2 norm of a stored row, accumulated in float32 in index order from the stored
 * (rounded) values: this is the |x|^2 the Euclid key uses, on every device. */
float sieve_row_sqnorm(sieve_dtype dtype, const void *row, uint32_t dim);

/* ---------------------------------------------------------------- devices */

typedef enum sieve_device_kind {
    SIEVE_DEVICE_CPU = 0,
    SIEVE_DEVICE_CUDA = 1,
} sieve_device_kind;

typedef struct sieve_device sieve_device;

typedef struct sieve_device_info {
    sieve_device_kind kind;
    int ordinal;                /* CUDA device number, or -1 for the CPU */
    char name[256];             /* "cpu (2 threads)" or the GPU's name */
    uint32_t threads;           /* CPU worker threads used by searches */
    uint64_t memory_total;      /* device memory in bytes (0 for the CPU) */
    uint64_t memory_free;       /* at the time of the call (0 for the CPU) */
    int multiprocessors;        /* 0 for the CPU */
    int compute_capability;     /* a GPU's major * 10 + minor (90: Hopper), 0 for the CPU */
} sieve_device_info;

/* For executables, first thing in main: when OpenBLAS did not recognise this CPU and fell
 * back to its generic kernels (it picks them once, at load time), and OPENBLAS_CORETYPE is
 * unset, sets OPENBLAS_CORETYPE to the newest core type the CPU supports (SkylakeX for
 * AVX-512, Haswell for AVX2) and re-executes the program with the same arguments. Returns
 * (doing nothing) when no fix-up applies or the re-exec fails. Results are the same with
 * any OpenBLAS kernel: searches call it per tile and compare only within one process. */
void sieve_cpu_blas_fixup(char **argv);

/* Number of CUDA devices usable by this build (0 when built without CUDA or none visible). */
int sieve_cuda_device_count(void);

/* Opens a device. spec: "auto" (CUDA device 0 when one is usable, else the CPU), "cpu",
 * "cpu:T" (T worker threads; default = online cores), "cuda" or "cuda:N".
 * On success *out owns the device; close it with sieve_device_close.
 * Errors: SIEVE_EINVAL (bad spec), SIEVE_ENODEV (no such CUDA device or CUDA not built),
 * SIEVE_ENOMEM, SIEVE_EDEVICE. */
int sieve_device_open(const char *spec, sieve_device **out);
/* Releases the device and everything it owns. NULL is ignored. */
void sieve_device_close(sieve_device *dev);
/* Fills *info. Errors: SIEVE_EINVAL, SIEVE_EDEVICE. */
int sieve_device_get_info(sieve_device *dev, sieve_device_info *info);
sieve_device_kind sieve_device_get_kind(const sieve_device *dev);

/* Device memory (for the page cache). On the CPU these are plain host allocations, so
 * callers can be device-agnostic. All copies are ordered on the device's stream and
 * complete before the call returns unless named _async.
 * Errors: SIEVE_EINVAL, SIEVE_ENOMEM, SIEVE_EDEVICE. */
int sieve_device_alloc(sieve_device *dev, size_t bytes, void **out);
void sieve_device_free(sieve_device *dev, void *ptr);
int sieve_device_upload(sieve_device *dev, void *dst, const void *src, size_t bytes);
int sieve_device_upload_async(sieve_device *dev, void *dst, const void *src, size_t bytes);
int sieve_device_download(sieve_device *dev, void *dst, const void *src, size_t bytes);
int sieve_device_sync(sieve_device *dev);
/* Page-locked host memory (plain malloc on the CPU device). */
int sieve_host_alloc_pinned(sieve_device *dev, size_t bytes, void **out);
void sieve_host_free_pinned(sieve_device *dev, void *ptr);

/* Fills n values of dtype at dst (memory of dev) with a deterministic pseudo-random,
 * approximately standard normal sequence times scale: value i depends only on (seed, i),
 * and the CPU and CUDA devices produce identical values. For tests and benchmarks.
 * Errors: SIEVE_EINVAL, SIEVE_EDEVICE. */
int sieve_device_fill_normal(sieve_device *dev, void *dst, sieve_dtype dtype, size_t n,
                             uint64_t seed, float scale);

/* Synthetic row sets for tests and benchmarks, including the adversarial ones the
 * exactness contract must survive. Row r, element i (n_rows x dim, g = the normal sequence
 * of sieve_device_fill_normal):
 *   NORMAL      g(r*dim+i)
 *   TIES        g(i): every row identical, every key tied
 *   DUPS        g((r/4)*dim+i): rows in groups of four identical rows
 *   SORTED_ASC  element 0 = 8*r/n_rows, others 0.05*g(r*dim+i): keys of a query along
 *               e0 rise with r (and tie where the dtype rounds neighbours together)
 *   SORTED_DESC as SORTED_ASC with r replaced by n_rows-1-r
 *   OUTLIER     NORMAL, with row n_rows/2 scaled by 1000
 *   BAND        g(i) + 0.001*g(r*dim+i): every key in a narrow band
 * Identical values on every device. */
typedef enum sieve_pattern {
    SIEVE_PATTERN_NORMAL = 0,
    SIEVE_PATTERN_TIES = 1,
    SIEVE_PATTERN_DUPS = 2,
    SIEVE_PATTERN_SORTED_ASC = 3,
    SIEVE_PATTERN_SORTED_DESC = 4,
    SIEVE_PATTERN_OUTLIER = 5,
    SIEVE_PATTERN_BAND = 6,
} sieve_pattern;
#define SIEVE_PATTERN_COUNT 7

/* "normal", "ties", "dups", "sorted_asc", "sorted_desc", "outlier", "band" (NULL if bad). */
const char *sieve_pattern_name(sieve_pattern pattern);
/* 0 or SIEVE_EINVAL. */
int sieve_pattern_parse(const char *name, sieve_pattern *out);

/* Fills n_rows x dim values of dtype at dst (memory of dev) with pattern.
 * Errors: SIEVE_EINVAL, SIEVE_EDEVICE. */
int sieve_device_fill_rows(sieve_device *dev, void *dst, sieve_dtype dtype, uint64_t n_rows,
                           uint32_t dim, sieve_pattern pattern, uint64_t seed);

/* out[r] = sieve_row_sqnorm(row r) for n_rows contiguous rows of dim values at rows; rows
 * and out are memory of dev. Bit-identical on every device.
 * Errors: SIEVE_EINVAL, SIEVE_EDEVICE. */
int sieve_device_row_sqnorms(sieve_device *dev, sieve_dtype dtype, const void *rows,
                             uint64_t n_rows, uint32_t dim, float *out);

/* ---------------------------------------------------------------- the stored matrix */

/* A read-only view of a collection's rows, paged. Every pointer in it (the arrays
 * themselves and what they point to) is in the memory of the device that searches:
 * host memory for the CPU, device memory for CUDA. The view does not own anything.
 *
 * Row r lives in pages[r / rows_per_page] at offset (r % rows_per_page) * dim elements.
 * rows_per_page must be a positive multiple of 64 (and of 128 for CUDA).
 */
typedef struct sieve_matrix {
    sieve_dtype dtype;
    uint32_t dim;
    uint64_t n_rows;                 /* rows addressed: 0 .. n_rows-1 (deleted ones included) */
    uint32_t rows_per_page;
    const void *const *pages;        /* ceil(n_rows / rows_per_page) page pointers */
    const float *const *norm_pages;  /* |x|^2 of each row, same paging (sieve_row_sqnorm);
                                        required for Euclid, ignored otherwise */
    const uint64_t *deleted;         /* optional: bit r set = row r is not a candidate */
    const uint64_t *allowed;         /* optional: bit r clear = row r is not a candidate */
    /* Optional, a promise about the pages: when page_base is not NULL, page p starts at
     * page_base + p * page_stride bytes for every p (pages evenly spaced in one allocation).
     * The CUDA backend then reads rows with the tensor memory accelerator (one descriptor
     * for the whole matrix). NULL: pages may lie anywhere. */
    const void *page_base;
    uint64_t page_stride;
} sieve_matrix;

/* A matrix whose memory the kernel module owns on one device: rows_per_page-row pages laid
 * out contiguously (page p at rows + p * rows_per_page * dim elements, the last page full
 * size), a contiguous |x|^2 array, optional deleted/allowed bitmaps, and the page tables, all
 * in the device's memory. Used by tests, benchmarks and the device page cache.
 * Not thread-safe; the owning device must outlive it. */
typedef struct sieve_dev_matrix sieve_dev_matrix;

/* Allocates an n_rows x dim matrix of dtype (contents undefined; norms zero).
 * Errors: SIEVE_EINVAL, SIEVE_ENOMEM, SIEVE_EDEVICE. */
int sieve_dev_matrix_create(sieve_device *dev, sieve_dtype dtype, uint64_t n_rows, uint32_t dim,
                            uint32_t rows_per_page, sieve_dev_matrix **out);
void sieve_dev_matrix_destroy(sieve_dev_matrix *dm);
/* The view to search (valid until destroy or the next set_masks). */
const sieve_matrix *sieve_dev_matrix_view(const sieve_dev_matrix *dm);
/* Device pointers to the contiguous rows and norms (owned by dm). */
void *sieve_dev_matrix_rows(sieve_dev_matrix *dm);
float *sieve_dev_matrix_norms(sieve_dev_matrix *dm);
/* Recomputes every row's |x|^2 on the device. Errors: as sieve_device_row_sqnorms. */
int sieve_dev_matrix_update_norms(sieve_dev_matrix *dm);
/* Copies host bitmaps (ceil(n_rows/64) words each; NULL clears that mask) to the device.
 * Errors: SIEVE_ENOMEM, SIEVE_EDEVICE. */
int sieve_dev_matrix_set_masks(sieve_dev_matrix *dm, const uint64_t *deleted,
                               const uint64_t *allowed);

/* ---------------------------------------------------------------- search */

typedef enum sieve_search_path {
    SIEVE_PATH_CERTIFIED = 0, /* first scan admitted >= k candidates: certified exact */
    SIEVE_PATH_UNDERFILL = 1, /* first scan admitted < k: recovered with the secondary boundary */
    SIEVE_PATH_OVERFLOW = 2,  /* candidate buffer overflowed: recovered by tightening and rescan */
    SIEVE_PATH_FULL = 3,      /* exact full-row recovery (every eligible row sorted) */
    SIEVE_PATH_DIRECT = 4,    /* small row counts: every eligible row sorted directly */
} sieve_search_path;
#define SIEVE_PATH_COUNT 5

/* Flags for sieve_search_params.flags. */
#define SIEVE_SEARCH_NO_TIGHTEN 0x1u  /* keep the proposed boundary for the whole scan */
#define SIEVE_SEARCH_RAW_KEYS 0x2u    /* out_scores gets the ranking key for every metric (no
                                         Euclid distance), so partial results merge exactly */

/* The reported Euclid score for a raw key: sqrtf(fmaxf(0, |q|^2 - key)) with |q|^2 summed in
 * float32 with fmaf in index order, exactly as every backend computes it. */
float sieve_euclid_distance(const float *query, uint32_t dim, float key);

typedef struct sieve_search_params {
    sieve_metric metric;
    uint32_t k;                /* 1 .. n_rows */
    uint64_t seed;             /* picks the sample's random offset; any value is exact */
    uint32_t flags;
    /* Test and tuning hooks; 0 means "choose". Never change the answer. */
    uint32_t sample_rows;      /* rows in the strided sample (<= N; default max(16384, 8k);
                                  on the CUDA backend, when 2 x 8k < N, 4k from k = 8192 on
                                  and at most the power of two at or above 64 N / k, at
                                  least 16384) */
    uint32_t candidate_capacity; /* per-query candidate buffer (default from k); on the CPU
                                    each worker thread has one of this size per query */
    int force_boundary;        /* nonzero: use forced_boundary as the proposed boundary */
    float forced_boundary;
} sieve_search_params;

/* Fills p with defaults for metric and k. */
void sieve_search_params_init(sieve_search_params *p, sieve_metric metric, uint32_t k);

typedef struct sieve_search_stats {
    uint64_t queries;
    uint64_t rows_scanned;        /* rows scored in full scans (per query summed over the batch) */
    uint64_t rows_sampled;        /* rows scored for the sample, per query summed */
    uint64_t candidates_admitted; /* rows passing the gate in the first scan, summed */
    uint64_t rescans;             /* extra scans run by recoveries, per query summed */
    uint64_t path_count[SIEVE_PATH_COUNT]; /* queries answered by each path */
    uint64_t select_segmented;    /* CUDA: certified queries whose candidates the segmented
                                     sort ordered (the others: a block sort in shared memory) */
    uint64_t select_speculated;   /* CUDA: calls whose select and result download were queued
                                     behind the scan before the host certified (one wait for
                                     the device; their ms_scan holds the select and download) */
    uint64_t speculation_missed;  /* of those, calls in which a query was not certified or kept
                                     more candidates than its block sorts: recoveries and the
                                     select ran after all, as without speculation */
    uint64_t launches_chained;    /* CUDA: kernels launched behind the one before by programmatic
                                     dependent launch (query preparation, sample scan, propose,
                                     gate scan, speculative select; scheduled while their
                                     predecessor still runs, waiting on the device for its
                                     results) */
    double ms_sample, ms_scan, ms_select, ms_total; /* wall time of each phase */
    double ms_download; /* part of ms_select: copying the results to the caller's arrays */
} sieve_search_stats;

/* Adds b into a (counts and times). */
void sieve_search_stats_add(sieve_search_stats *a, const sieve_search_stats *b);

/* Scratch bytes sieve_knn needs for this device, matrix shape, batch and parameters.
 * Errors: SIEVE_EINVAL, SIEVE_ENOMEM (the size does not fit in size_t). */
int sieve_knn_scratch_size(sieve_device *dev, const sieve_matrix *m, uint32_t n_queries,
                           const sieve_search_params *p, size_t *bytes);

/* Batched exact k-NN, the fused sample-guided path of design.md.
 *
 * queries: n_queries x m->dim float32, row-major, host memory (finite values); on a GPU a
 *   page-locked array is read by the copy engine directly, a pageable one through a
 *   staging buffer.
 * scratch: scratch_bytes of the device's memory (>= sieve_knn_scratch_size); the caller
 *   owns it; when scratch is NULL the function allocates and frees its own.
 * out_rows, out_scores: n_queries x p->k, host memory, written best first. When fewer than
 *   k rows are eligible (deleted/allowed masks), the tail is padded with row -1 and score
 *   NaN, and out_counts (optional, n_queries) says how many are real. On a GPU, arrays that
 *   lie in page-locked memory (sieve_host_alloc_pinned, or registered with CUDA) are written
 *   by the copy engine directly; pageable arrays go through a staging buffer and a host
 *   copy (shared with the device's host threads when large).
 * out_paths: optional, n_queries bytes of sieve_search_path.
 * stats: optional; overwritten.
 * Reported scores: the key for Dot and Cosine; the Euclidean distance for Euclid.
 * Errors: SIEVE_EINVAL (NULL pointers, k == 0, k > n_rows, bad dims/page size),
 * SIEVE_ENONFINITE (a query holds NaN or infinity), SIEVE_ENOSPC (scratch too small),
 * SIEVE_ENOMEM, SIEVE_EDEVICE. */
int sieve_knn(sieve_device *dev, const sieve_matrix *m, const float *queries,
              uint32_t n_queries, const sieve_search_params *p, void *scratch,
              size_t scratch_bytes, int64_t *out_rows, float *out_scores,
              uint32_t *out_counts, uint8_t *out_paths, sieve_search_stats *stats);

/* The materialize-then-sort oracle: the same scorer writes every key of the row, which is
 * then fully sorted (key descending, row ascending). Same arguments and outputs as
 * sieve_knn (scratch is allocated internally). Its answer must equal sieve_knn's bit for
 * bit. Errors: as sieve_knn. */
int sieve_knn_materialized(sieve_device *dev, const sieve_matrix *m, const float *queries,
                           uint32_t n_queries, const sieve_search_params *p,
                           int64_t *out_rows, float *out_scores, uint32_t *out_counts,
                           sieve_search_stats *stats);

/* Float64 reference on host memory (m's pointers must be host memory): keys accumulated
 * in double from the stored values (Cosine queries normalised in double, Euclid |x|^2
 * recomputed in double, norm pages unused), full sort, ties by row. out_rows: n_queries x k,
 * padded with -1 like sieve_knn. out_keys (optional) gets the double keys (not the reported
 * scores; NaN padding), for near-tie tolerance checks; out_counts is optional.
 * Single-threaded, slow.
 * Errors: SIEVE_EINVAL, SIEVE_ENOMEM. */
int sieve_knn_reference(const sieve_matrix *m, const float *queries, uint32_t n_queries,
                        sieve_metric metric, uint32_t k, int64_t *out_rows,
                        double *out_keys, uint32_t *out_counts);

/* ---------------------------------------------------------------- sparse attention: indexer top-k */

/* The indexer of DeepSeek-style sparse attention (design.md, "The attention workload"): for
 * query token t and key s,
 *     I[t,s] = sum over h of w[t,h] * max(0, q[t,h] . key[s])
 * with q: n_queries x heads x head_dim and keys: n_keys x head_dim, both of one dtype,
 * row-major and contiguous, and w: n_queries x heads float32. Query t sits at position
 * pos0 + t of the key sequence; with causal set it sees the keys s <= pos0 + t only (at most
 * n_keys), otherwise all of them. Per query the result is the k visible keys of the largest
 * score, best first, ties broken by the smaller key index, and equal to a full sort of the
 * scores this device computes: the sample-guided fused path (sieve_indexer_topk) and the
 * materialize-then-select path (sieve_indexer_topk_materialized) return the same keys and
 * scores bit for bit on one device. A query that sees fewer than k keys gets them all,
 * the tail padded with index -1 and score NaN.
 *
 * Scores: each q[t,h] . key[s] accumulates the products of the stored values in float32
 * (exact products for float16 and bfloat16), then the heads' terms w[t,h] * max(0, dot)
 * are summed in float32. The CPU sums the dot over head_dim with BLAS and the heads in
 * index order with fmaf; CUDA sums the dot on the tensor cores (16-wide steps in index
 * order) and the heads in a fixed tree. The two devices' scores may therefore differ by up
 * to about (head_dim + heads) * 2^-24 * sum over h of |w[t,h]| * sum over d |q[t,h,d]
 * key[s,d]|, and their answers agree up to near-ties within that bound. On both devices a
 * NaN score ranks as -inf and -0 counts as +0; q, keys and w should be finite.
 *
 * CUDA: Hopper (sm_90) only, float16 and bfloat16 only, heads 1..64, head_dim a multiple of
 * 8 up to 256, q and keys 16-byte aligned (SIEVE_ENOTSUP otherwise). The CPU takes every
 * dtype, heads and head_dim up to INT_MAX / 256 (BLAS sizes); n_keys at most INT32_MAX
 * (indices are int32) everywhere. */

typedef struct sieve_indexer_params {
    sieve_dtype dtype;          /* of q and keys */
    uint32_t n_queries;         /* T >= 1 */
    uint32_t heads;             /* H >= 1 */
    uint32_t head_dim;          /* D >= 1 */
    uint32_t n_keys;            /* L >= 1 */
    uint32_t k;                 /* 1 .. n_keys */
    int causal;                 /* nonzero: query t sees keys 0 .. pos0 + t */
    uint32_t pos0;              /* position of query 0 in the key sequence (causal only) */
    uint64_t seed;              /* picks the sample's random offset; any value is exact */
    /* Tuning and test hooks; 0 means "choose". Never change the answer. */
    uint32_t sample_keys;       /* keys in the strided sample (default: CPU max(4096, 4k);
                                   CUDA 4096, or a quarter of a shorter row, at least 1024) */
    uint32_t candidate_capacity; /* per-query candidate buffer of the fused path (CUDA keeps
                                    it within [k, 8192], what one block sorts) */
    int force_boundary;         /* nonzero: propose forced_boundary for every query */
    float forced_boundary;
} sieve_indexer_params;

/* Fills p: dtype, shape and k as given, causal off, everything else 0. */
void sieve_indexer_params_init(sieve_indexer_params *p, sieve_dtype dtype, uint32_t n_queries,
                               uint32_t heads, uint32_t head_dim, uint32_t n_keys, uint32_t k);

/* Keys query t sees: n_keys, or with causal min(n_keys, pos0 + t + 1). */
uint32_t sieve_indexer_visible(const sieve_indexer_params *p, uint32_t t);

typedef struct sieve_indexer_stats {
    uint64_t queries;
    uint64_t keys_sampled;        /* visible keys scored for the samples, summed over queries */
    uint64_t candidates_admitted; /* keys passing the proposed boundaries, summed */
    uint64_t path_count[SIEVE_PATH_COUNT]; /* queries answered by each path (sieve_search_path:
                                     CERTIFIED; UNDERFILL and OVERFLOW, recovered by scoring
                                     the query's whole row; DIRECT: no boundary proposed, every
                                     visible key kept or the row selected whole; FULL: the
                                     materialized path, and on CUDA the fused path where the
                                     expected candidates would not fit one block's sort of
                                     8,192: every row scored whole). candidates_admitted on
                                     CUDA also counts a DIRECT token's visible keys (all kept),
                                     the CPU none */
    double ms_sample, ms_scan, ms_select, ms_recover, ms_total; /* time of each phase (CUDA:
                                     device time between events, ms_recover the host's wall
                                     time of the recovery, and of everything on the
                                     materialized path; CPU: summed over the worker threads,
                                     whose queries overlap); ms_total: the call's wall time */
} sieve_indexer_stats;

/* Scratch bytes sieve_indexer_topk needs on dev for p (the CPU needs none: 0).
 * Errors: SIEVE_EINVAL (zero sizes, k > n_keys, an unknown dtype, sizes past size_t or
 * INT32_MAX keys), SIEVE_ENOTSUP (a shape or dtype the device does not run). */
int sieve_indexer_scratch_size(sieve_device *dev, const sieve_indexer_params *p, size_t *bytes);

/* The fused indexer top-k: a strided sample of the keys proposes each query's boundary; one
 * pass scores every visible key and keeps those at or above it (the score matrix is never
 * stored); a query whose pass kept at least k and at most candidate_capacity is certified
 * and its kept keys sorted; any other query is recovered by scoring and selecting its whole
 * row, so the answer is always exact.
 * q, keys, w: memory of dev (host memory for the CPU), shapes as above; not modified.
 * scratch: scratch_bytes of dev's memory (>= sieve_indexer_scratch_size), 256-byte aligned
 *   (as sieve_device_alloc returns it), owned by the caller; NULL: a workspace the device
 *   keeps and grows is used (the CPU needs none and ignores it).
 * out_idx (int32), out_scores (float32): n_queries x k, memory of dev, best first.
 * out_counts: optional, n_queries uint32 in memory of dev (the real entries of each row).
 * stats: optional, host memory; overwritten.
 * Returns after the results are written (the device's stream is synchronised).
 * Errors: SIEVE_EINVAL (NULL pointers, zero sizes, k > n_keys, misaligned scratch),
 * SIEVE_ENOTSUP, SIEVE_ENOSPC (scratch too small), SIEVE_ENOMEM, SIEVE_EDEVICE. */
int sieve_indexer_topk(sieve_device *dev, const sieve_indexer_params *p, const void *q,
                       const void *keys, const float *w, void *scratch, size_t scratch_bytes,
                       int32_t *out_idx, float *out_scores, uint32_t *out_counts,
                       sieve_indexer_stats *stats);

/* The materialize-then-select baseline and oracle: the same scorer scores every visible
 * key of every query, then each row's k best are selected and sorted. CUDA writes the whole
 * n_queries x n_keys float32 score matrix to device memory (a workspace the device keeps
 * and grows, n_queries x (n_keys x 4 + k x 8) bytes, twice the k x 8 and a sort's temporary
 * above k = 8192) and selects each row by a radix select over it; the CPU holds one row per worker thread and selects by quickselect. Same
 * arguments and results as sieve_indexer_topk (every query counted as SIEVE_PATH_FULL).
 * Errors: as sieve_indexer_topk. */
int sieve_indexer_topk_materialized(sieve_device *dev, const sieve_indexer_params *p,
                                    const void *q, const void *keys, const float *w,
                                    int32_t *out_idx, float *out_scores, uint32_t *out_counts,
                                    sieve_indexer_stats *stats);

/* Float64 reference on host memory: every score accumulated in double from the stored
 * values (products, the ReLU and the heads' sum), a full sort per query (score descending,
 * index ascending). out_idx: n_queries x k, padded with -1 like sieve_indexer_topk;
 * out_scores (optional) gets the double scores (NaN padding); out_counts optional.
 * Single-threaded, slow. Errors: SIEVE_EINVAL, SIEVE_ENOMEM. */
int sieve_indexer_reference(const sieve_indexer_params *p, const void *q, const void *keys,
                            const float *w, int32_t *out_idx, double *out_scores,
                            uint32_t *out_counts);


/* ---------------------------------------------------------------- sparse attention: grouped */

/* Sparse attention over each query token's selected keys (design.md, "The attention
 * workload"; LiteDSA). q: n_queries x q_heads x head_dim, keys: n_keys x kv_heads x
 * head_dim, values: n_keys x kv_heads x v_dim, all of one dtype, row-major and contiguous;
 * idx: n_queries x k int32 positions (the indexer's output fits as it is). Query head h
 * reads kv head g = h / (q_heads / kv_heads) (grouped-query attention). With S_t the set of
 * distinct entries of row t of idx that lie in [0, n_keys) (other entries, such as the
 * indexer's -1 padding, are skipped; a position listed twice counts once):
 *     out[t,h] = sum over s in S_t of softmax_s(scale * q[t,h] . keys[s,g]) * values[s,g]
 *     lse[t,h] = log(sum over s in S_t of exp(scale * q[t,h] . keys[s,g]))  (natural log)
 * out: n_queries x q_heads x v_dim float32; lse: optional, n_queries x q_heads float32. A
 * token whose S_t is empty gets out = 0 and lse = -inf. Which keys are in S_t is the
 * caller's choice: no causal rule is applied here (the indexer's causal rows already are).
 *
 * group: the number of neighbouring query tokens (t = group * i .. group * i + group - 1)
 * that share one key/value list, the union of their sets, in ascending position; each token
 * keeps its own set through a membership mask, so the answer does not depend on group
 * (up to rounding). group 1 is per-query sparse attention, the baseline grouped attention
 * is measured against. The union is read once for the group's tokens and heads of one kv
 * head, so grouping pays where neighbouring tokens' sets overlap (stats report how much).
 *
 * k may exceed n_keys (rows may hold padding and repeats).
 *
 * Precision: dots accumulate in float32 (float16 and bfloat16 products are exact there;
 * float32 products round once on the CPU); the softmax runs in float32 (CUDA online over
 * tiles of the list, the CPU in two passes, maximum first). CUDA rounds the probabilities
 * to the storage dtype before the probability-value product (as flash attention does;
 * float32 sums), so its out differs from the float64 reference by up to about 2^-8
 * (bfloat16) or 2^-10 (float16) times the largest |value| a token reads, plus the dots'
 * float32 error; the CPU keeps float32 probabilities, and its answer is bit-identical for
 * every group and thread count. q, keys and values should be finite: an infinity or NaN
 * makes the rows that read it NaN, and on CUDA also rows that share its tile without
 * reading it (the other tokens of its group; 0 x NaN in the probability-value product).
 *
 * CUDA: compute capability 9.0 or newer (built for sm_90a, PTX beyond), float16 and
 * bfloat16, head_dim and v_dim 64 or 128, kv_heads at most 65,535, q_heads / kv_heads at
 * most 4,096, q, keys and values 16-byte aligned (SIEVE_ENOTSUP otherwise). The CPU takes every
 * dtype and shape, and computes each token's set directly (group only shapes the GPU's
 * work; the CPU's stats still count the unions). */

typedef struct sieve_sparse_attn_params {
    sieve_dtype dtype;          /* of q, keys and values */
    uint32_t n_queries;         /* T >= 1 */
    uint32_t q_heads;           /* >= 1, a multiple of kv_heads */
    uint32_t kv_heads;          /* >= 1 */
    uint32_t head_dim;          /* D of q and keys, >= 1 */
    uint32_t v_dim;             /* of values, >= 1 */
    uint32_t n_keys;            /* L >= 1, at most INT32_MAX */
    uint32_t k;                 /* entries per row of idx, >= 1 */
    uint32_t group;             /* 1 .. 32 query tokens sharing one list (1: per query) */
    float scale;                /* softmax scale, finite; 0 means 1 / sqrt(head_dim) */
} sieve_sparse_attn_params;

/* Fills p: dtype and shape as given, group 16, scale 0 (1 / sqrt(head_dim)). */
void sieve_sparse_attn_params_init(sieve_sparse_attn_params *p, sieve_dtype dtype,
                                   uint32_t n_queries, uint32_t q_heads, uint32_t kv_heads,
                                   uint32_t head_dim, uint32_t v_dim, uint32_t n_keys,
                                   uint32_t k);

typedef struct sieve_sparse_attn_stats {
    uint64_t groups;            /* ceil(n_queries / group) */
    uint64_t member_entries;    /* sum over tokens of |S_t| */
    uint64_t union_entries;     /* sum over groups of the union's size */
    double ms_prepare;          /* CUDA: building the unions and masks (device time); CPU:
                                   building the sets and counting the unions (wall time) */
    double ms_attend;           /* the attention itself (CUDA: device time) */
    double ms_total;            /* the call's wall time */
} sieve_sparse_attn_stats;

/* Scratch bytes sieve_sparse_attention needs on dev for p (the CPU needs none: 0).
 * Errors: SIEVE_EINVAL (bad parameters, sizes past size_t), SIEVE_ENOTSUP (CUDA: a shape
 * or dtype it does not run). */
int sieve_sparse_attn_scratch_size(sieve_device *dev, const sieve_sparse_attn_params *p,
                                   size_t *bytes);

/* Grouped sparse attention as above. q, keys, values, idx, out, lse: memory of dev (host
 * memory for the CPU), not modified but for out and lse. scratch: scratch_bytes of dev's
 * memory (>= sieve_sparse_attn_scratch_size), 256-byte aligned, owned by the caller; NULL:
 * a workspace the device keeps and grows (the CPU ignores it). stats: optional, host
 * memory, overwritten. Returns after out and lse are written (the stream is synchronised).
 * Errors: SIEVE_EINVAL (NULL pointers, bad parameters; on CUDA misaligned scratch, or idx,
 * out or lse not 4-byte aligned), SIEVE_ENOTSUP, SIEVE_ENOSPC (scratch too small),
 * SIEVE_ENOMEM, SIEVE_EDEVICE; on an error stats is left as it was. */
int sieve_sparse_attention(sieve_device *dev, const sieve_sparse_attn_params *p,
                           const void *q, const void *keys, const void *values,
                           const int32_t *idx, void *scratch, size_t scratch_bytes,
                           float *out, float *lse, sieve_sparse_attn_stats *stats);

/* Float64 reference on host memory: the same sets, every dot, exponential and sum in double
 * from the stored values. out: n_queries x q_heads x v_dim double; lse optional (double).
 * Single-threaded, slow. Errors: SIEVE_EINVAL, SIEVE_ENOMEM. */
int sieve_sparse_attention_reference(const sieve_sparse_attn_params *p, const void *q,
                                     const void *keys, const void *values,
                                     const int32_t *idx, double *out, double *lse);


/* ---------------------------------------------------------------- attention: dense causal */

/* Dense causal attention, the in-house reference and baseline of the sparse-attention
 * kernels (design.md, "The attention workload"). q: n_queries x q_heads x head_dim, keys:
 * n_keys x kv_heads x head_dim, values: n_keys x kv_heads x v_dim, one dtype, row-major and
 * contiguous; query token t sits at position pos0 + t and attends the keys
 * s = 0 .. min(n_keys, pos0 + t + 1) - 1 (a prefill is pos0 = 0, n_queries = n_keys; a
 * chunk of a longer prefill has pos0 > 0). Query head h reads kv head h / (q_heads /
 * kv_heads):
 *     out[t,h] = sum over visible s of softmax_s(scale * q[t,h] . keys[s,g]) * values[s,g]
 *     lse[t,h] = log(sum over visible s of exp(scale * q[t,h] . keys[s,g]))
 * out: n_queries x q_heads x v_dim float32; lse optional (float32). Precision as
 * sieve_sparse_attention (CUDA rounds the probabilities to the storage dtype before the
 * product with the values; the CPU keeps float32). CUDA: as sieve_sparse_attention (compute
 * capability 9.0 or newer, float16 and bfloat16, head_dim and v_dim 64 or 128, kv_heads at
 * most 65,535, q_heads / kv_heads at most 4,096, 16-byte aligned arrays; a non-finite input
 * may also make other rows of its 64-key tile NaN); the CPU takes every dtype and shape. */

typedef struct sieve_attn_params {
    sieve_dtype dtype;          /* of q, keys and values */
    uint32_t n_queries;         /* T >= 1 */
    uint32_t q_heads;           /* >= 1, a multiple of kv_heads */
    uint32_t kv_heads;          /* >= 1 */
    uint32_t head_dim;          /* >= 1 */
    uint32_t v_dim;             /* >= 1 */
    uint32_t n_keys;            /* L >= 1, at most INT32_MAX */
    uint32_t pos0;              /* position of query 0 */
    float scale;                /* softmax scale, finite; 0 means 1 / sqrt(head_dim) */
} sieve_attn_params;

/* Fills p: dtype and shape as given, pos0 0, scale 0 (1 / sqrt(head_dim)). */
void sieve_attn_params_init(sieve_attn_params *p, sieve_dtype dtype, uint32_t n_queries,
                            uint32_t q_heads, uint32_t kv_heads, uint32_t head_dim,
                            uint32_t v_dim, uint32_t n_keys);

/* Scratch bytes sieve_causal_attention needs on dev for p (0 on the CPU; on CUDA the
 * partial results where short calls split the keys over several thread blocks).
 * Errors: SIEVE_EINVAL, SIEVE_ENOTSUP (CUDA: a shape or dtype it does not run). */
int sieve_causal_attn_scratch_size(sieve_device *dev, const sieve_attn_params *p,
                                   size_t *bytes);

/* Dense causal attention as above. Memory, scratch and errors as sieve_sparse_attention;
 * ms (optional, host memory) gets the device time of the attention (CUDA) or the call's
 * wall time (CPU). Returns after out and lse are written. */
int sieve_causal_attention(sieve_device *dev, const sieve_attn_params *p, const void *q,
                           const void *keys, const void *values, void *scratch,
                           size_t scratch_bytes, float *out, float *lse, double *ms);

/* Float64 reference on host memory (every dot, exponential and sum in double).
 * out: n_queries x q_heads x v_dim double; lse optional. Single-threaded, slow.
 * Errors: SIEVE_EINVAL, SIEVE_ENOMEM. */
int sieve_causal_attention_reference(const sieve_attn_params *p, const void *q,
                                     const void *keys, const void *values, double *out,
                                     double *lse);

/* ------------------------------------------------------- attention: block-sparse prefill */

/* Block-sparse prefill with mean correction (FlashPrefill V2; design.md, "The attention
 * workload"). Shape, positions and scale as sieve_causal_attention (p->attn): query token t
 * sits at pos0 + t and sees the keys s < min(n_keys, pos0 + t + 1). With B = p->block:
 *   - key block J holds the keys J*B .. min((J+1)*B, n_keys) - 1; query tile I holds the
 *     tokens I*B .. min((I+1)*B, n_queries) - 1 (tiles = ceil(n_queries / B));
 *   - tile I's visible blocks are J < n_I = ceil(e_I / B), e_I the keys its last token sees;
 *     its full blocks are those every token of the tile sees whole: (J+1)*B <= f_I, f_I the
 *     keys its first token sees (so a full block always holds B keys);
 *   - pooled rows: kbar_J and vbar_J, the mean of the block's key (value) rows of one kv
 *     head, summed in double in ascending position from the stored values, divided by the
 *     block's key count, rounded to float32 and then to the storage dtype (every backend
 *     computes them bit-identically);
 *   - block scores of tile I and kv head g: for every row i of the tile (each token t of I and
 *     each query head h of g) and every visible J, s_iJ = scale * q[t,h] . kbar_J;
 *     M = max over i and J of s_iJ; E_J = sum over i of exp(s_iJ - M) (FlashPrefill's
 *     Score_IJ up to the row normalisation, which the threshold does not need);
 *   - selection: block J is kept (computed exactly) when it is visible and not full (the
 *     diagonal band), or J < sink_blocks, or it is among the window_blocks last full blocks,
 *     or E_J >= alpha * max over visible J' of E_J'. alpha 0 keeps every visible block (the
 *     answer is then dense causal attention); the block of the largest E_J is always kept;
 *   - correction: with correct = 1 every full block that is not kept enters each row of the
 *     tile as one pooled term, logit scale * q[t,h] . kbar_J + log(B) and value vbar_J
 *     (B keys of mean key and value); with correct = 0 it is dropped.
 * Then for every row (t, h), with K_t the keys of kept blocks that t sees and C the
 * corrected blocks:
 *     out[t,h] = (sum_{s in K_t} e^{x_s} v_s + sum_{J in C} B e^{xbar_J} vbar_J) / den
 *     den = sum_{s in K_t} e^{x_s} + sum_{J in C} B e^{xbar_J},  lse[t,h] = log(den)
 * (x_s = scale * q[t,h] . keys[s,g], xbar_J = scale * q[t,h] . kbar_J); a row with nothing
 * to attend (possible only with correct = 0) gets out 0 and lse -infinity.
 *
 * Precision: the selection compares sums of float32 exponentials of float32 scores (the CPU
 * sums them in double; CUDA takes tensor-core dots and ex2.approx and sums 256 rows at a
 * time in float32), so a block whose E_J lies within about 1e-4 relative of alpha * max
 * (more on CUDA for tiles of many thousands of rows) may be decided either way by different
 * backends; the float64 reference (sieve_bsp_select_reference) reports each block's
 * E_J / max E so tests can skip those. The attention given a selection has
 * sieve_causal_attention's precision (CUDA rounds probabilities to the storage dtype).
 *
 * CUDA: as sieve_causal_attention (compute capability 9.0 or newer, float16 and bfloat16,
 * head_dim and v_dim 64 or 128, q_heads / kv_heads at most 4,096, 16-byte aligned arrays),
 * block 64 or 128 (SIEVE_ENOTSUP otherwise); the CPU takes every dtype, shape and block. */

typedef struct sieve_bsp_params {
    sieve_attn_params attn;     /* shape, pos0 and scale as sieve_causal_attention */
    uint32_t block;             /* B >= 1: keys a block and tokens a tile (default 128) */
    float alpha;                /* threshold in [0, 1] relative to the tile's largest E_J
                                   (default 0.1) */
    uint32_t sink_blocks;       /* the first blocks always kept (default 2) */
    uint32_t window_blocks;     /* a tile's last full blocks always kept (default 4) */
    int correct;                /* 1: mean correction of pruned full blocks (default); 0: drop */
} sieve_bsp_params;

/* Fills p: dtype and shape as given, pos0 0, scale 0, and FlashPrefill V2's configuration:
 * block 128, alpha 0.1, 2 sink blocks (256 tokens), a window of 4 blocks (512 tokens),
 * correct 1. */
void sieve_bsp_params_init(sieve_bsp_params *p, sieve_dtype dtype, uint32_t n_queries,
                           uint32_t q_heads, uint32_t kv_heads, uint32_t head_dim,
                           uint32_t v_dim, uint32_t n_keys);

typedef struct sieve_bsp_stats {
    uint64_t visible_blocks;    /* sum over kv heads and tiles of n_I */
    uint64_t kept_blocks;       /* of them kept (computed exactly) */
    uint64_t corrected_blocks;  /* of them entered as pooled rows (0 when correct = 0) */
    double density;             /* kept / visible */
    double ms_select;           /* pooling, block scores and selection (CUDA: device time) */
    double ms_attend;           /* the attention over kept blocks and pooled rows */
    double ms_total;            /* the call's wall time */
} sieve_bsp_stats;

/* Tiles of a call (ceil(n_queries / block)) and the selection's layout: tile I of kv head g
 * lists its kept blocks, ascending, from sel_blocks[g * per_head + off_I], where
 * off_I = n_0 + ... + n_{I-1} and per_head = the sum of every n_I. n_blocks (optional):
 * an array of tiles entries for the n_I. Errors: SIEVE_EINVAL (bad parameters, or per_head
 * x kv_heads past what int64 counts). */
int sieve_bsp_layout(const sieve_bsp_params *p, uint32_t *tiles, uint64_t *per_head,
                     uint32_t *n_blocks);

/* Scratch bytes sieve_block_sparse_prefill needs on dev for p (the CPU needs none: 0; it
 * allocates about kv_heads x per_head bytes of decisions itself). On CUDA about kv_heads x
 * per_head x 16 bytes (each visible block's score pair and its place in the kept and
 * corrected lists) plus the pooled rows: it grows with the square of n_queries / block
 * (about 270 MB at 128K tokens, blocks of 64 and 8 kv heads).
 * Errors: SIEVE_EINVAL, SIEVE_ENOTSUP (CUDA: a shape, dtype or block it does not run). */
int sieve_bsp_scratch_size(sieve_device *dev, const sieve_bsp_params *p, size_t *bytes);

/* Block-sparse prefill as above: pooled rows, block scores, selection, then the attention
 * over the kept blocks and the pooled rows of the corrected ones. q, keys, values, out, lse,
 * sel_counts and sel_blocks: memory of dev (host memory for the CPU). out: n_queries x
 * q_heads x v_dim float32; lse optional (n_queries x q_heads float32). sel_counts and
 * sel_blocks optional (both or neither): kv_heads x tiles counts of kept blocks and
 * kv_heads x per_head entries laid out as sieve_bsp_layout says (entries past a tile's
 * count are left as they were). scratch as sieve_sparse_attention. stats optional, host
 * memory. Returns after every output is written. Errors: SIEVE_EINVAL (NULL pointers,
 * bad parameters, alpha outside [0, 1], block 0; on CUDA misaligned scratch or outputs not
 * 4-byte aligned), SIEVE_ENOTSUP, SIEVE_ENOSPC (scratch too small), SIEVE_ENOMEM,
 * SIEVE_EDEVICE; on an error stats is left as it was. */
int sieve_block_sparse_prefill(sieve_device *dev, const sieve_bsp_params *p, const void *q,
                               const void *keys, const void *values, void *scratch,
                               size_t scratch_bytes, float *out, float *lse,
                               uint32_t *sel_counts, int32_t *sel_blocks,
                               sieve_bsp_stats *stats);

/* Float64 reference of the selection on host memory: the pooled rows as above, every dot,
 * exponential and sum in double. sel_counts and sel_blocks as sieve_block_sparse_prefill's
 * (required); ratio (optional, kv_heads x per_head doubles, laid out as sel_blocks but
 * over every visible block of the tile, J at g * per_head + off_I + J) gets E_J / max E_J'.
 * Single-threaded, slow. Errors: SIEVE_EINVAL, SIEVE_ENOMEM. */
int sieve_bsp_select_reference(const sieve_bsp_params *p, const void *q, const void *keys,
                               uint32_t *sel_counts, int32_t *sel_blocks, double *ratio);

/* Float64 reference of the attention given a selection (host memory, in
 * sieve_block_sparse_prefill's layout: entries of a tile strictly ascending and visible,
 * otherwise SIEVE_EINVAL), for the tokens t_begin .. t_begin + t_count - 1 (within
 * n_queries, t_count >= 1): the formula above in double, the pooled rows as above.
 * out: t_count x q_heads x v_dim double; lse optional (t_count x q_heads). Errors:
 * SIEVE_EINVAL, SIEVE_ENOMEM. */
int sieve_bsp_attention_reference(const sieve_bsp_params *p, const void *q, const void *keys,
                                  const void *values, const uint32_t *sel_counts,
                                  const int32_t *sel_blocks, uint32_t t_begin,
                                  uint32_t t_count, double *out, double *lse);

#ifdef __cplusplus
}
#endif
#endif

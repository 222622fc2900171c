/* sieve_datasets.h: the public C API of sieve's datasets module.
 *
 * Owns: streaming readers and writers for vector files (.fvecs/.ivecs/.bvecs, .fbin/.ibin/
 * .u8bin/.i8bin/.u64bin, .npy), record files (.jsonl, MS MARCO style .tsv, qrels), a source
 * that joins a vector file with optional id and payload files for bulk ingestion, seeded
 * synthetic generators (Gaussian, clustered, MS MARCO-shaped, adversarial) and a terminal
 * progress bar. Must not: depend on the store, the server or the kernels (it has its own
 * float16 conversion so that clients do not link the CUDA runtime).
 *
 * Errors. Every function that can fail returns 0 or a negative SIEVE_E* code and, when
 * `err` is not NULL, writes a one-line message into err->msg naming the file, the byte
 * offset or line, and what was expected, e.g.
 *   "vectors.fbin: header says 1000000 x 768 (3072000008 bytes expected) but file has
 *    1048576 bytes"
 * The codes are used consistently:
 *   SIEVE_EINVAL     bad argument (NULL pointer, zero dim, unknown format or element type)
 *   SIEVE_ENOTFOUND  the file does not exist
 *   SIEVE_EIO        a system call failed (message has strerror)
 *   SIEVE_ENOMEM     allocation failed
 *   SIEVE_ECORRUPT   structure broken: truncated file, bad magic, header/size or count
 *                    mismatch, implausible dimension
 *   SIEVE_EDIM       a row's dimension differs from the file's (or from another file's)
 *   SIEVE_ENONFINITE a NaN or infinity in vector data (unless SIEVE_DS_ALLOW_NONFINITE)
 *   SIEVE_ENOTSUP    valid but unsupported: Fortran order, big-endian, another dtype
 *   SIEVE_EPARSE     text syntax: bad JSON line, TSV line without a tab, npy header dict
 *   SIEVE_ERANGE     a value does not fit (writers; .jsonl beyond float32), negative id, seek
 *                    past the end
 *   SIEVE_ETOOBIG    a text line longer than SIEVE_DS_MAX_LINE
 *
 * Thread-safety: every reader, writer, source and progress object is used by one thread at
 * a time. Several readers may read the same file concurrently (open one per thread and seek
 * each to its own range). Generators are immutable after creation: their fill functions may
 * be called from many threads at once on one generator.
 *
 * Byte order: all binary formats are little-endian, as the formats define them.
 */
#ifndef SIEVE_DATASETS_H
#define SIEVE_DATASETS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sieve_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- errors and limits */

/* Filled with a message on failure (msg[0] == 0 after success is not promised). */
typedef struct sieve_ds_error {
    int code;      /* the returned SIEVE_E* code */
    char msg[512]; /* "FILE: what went wrong at offset/line, and what was expected" */
} sieve_ds_error;

#define SIEVE_DS_MAX_DIM 65536u           /* larger dimensions are treated as corrupt */
#define SIEVE_DS_MAX_LINE (256u << 20)    /* longest accepted text line (bytes) */
#define SIEVE_DS_UNKNOWN_COUNT UINT64_MAX /* count of a text file not yet read to the end */

/* Flags for readers, writers and sources (bitwise or). */
#define SIEVE_DS_ALLOW_NONFINITE 0x1u /* pass NaN/Inf through instead of SIEVE_ENONFINITE */

/* ---------------------------------------------------------------- formats */

typedef enum sieve_ds_format {
    SIEVE_DS_FORMAT_AUTO = 0, /* from the file name's extension */
    SIEVE_DS_FORMAT_FVECS,    /* per row: int32 dim, dim x float32 */
    SIEVE_DS_FORMAT_IVECS,    /* per row: int32 dim, dim x int32 */
    SIEVE_DS_FORMAT_BVECS,    /* per row: int32 dim, dim x uint8 */
    SIEVE_DS_FORMAT_FBIN,     /* uint32 n, uint32 d, n*d float32 (big-ann-benchmarks) */
    SIEVE_DS_FORMAT_IBIN,     /* uint32 n, uint32 d, n*d int32 (ground truth; ids with d=1) */
    SIEVE_DS_FORMAT_U8BIN,    /* uint32 n, uint32 d, n*d uint8 */
    SIEVE_DS_FORMAT_I8BIN,    /* uint32 n, uint32 d, n*d int8 */
    SIEVE_DS_FORMAT_U64BIN,   /* sieve's id file: uint32 n, uint32 d, n*d uint64 (ids: d=1) */
    SIEVE_DS_FORMAT_NPY,      /* NumPy .npy v1/v2/v3, C order, little-endian, 1-D or 2-D */
    SIEVE_DS_FORMAT_JSONL,    /* {"id":..,"vector":[..],"payload":{..}} per line */
    SIEVE_DS_FORMAT_TSV,      /* id<TAB>text per line (MS MARCO collection / queries) */
    SIEVE_DS_FORMAT_QRELS,    /* "qid 0 pid rel" or "qid<TAB>pid" per line (never AUTO) */
} sieve_ds_format;

/* Extension-based guess: .fvecs .ivecs .bvecs .fbin .ibin .u8bin .i8bin .u64bin .npy
 * .jsonl/.ndjson .tsv; SIEVE_DS_FORMAT_AUTO when unknown. */
sieve_ds_format sieve_ds_format_from_path(const char *path);
/* "fvecs", "npy", ... or NULL. */
const char *sieve_ds_format_name(sieve_ds_format f);
/* Parses the names above. 0 or SIEVE_EINVAL. */
int sieve_ds_format_parse(const char *name, sieve_ds_format *out);
/* 1 if f is a dense binary matrix format (fvecs .. npy), else 0. */
int sieve_ds_format_is_dense(sieve_ds_format f);

/* Element types stored in dense files. */
typedef enum sieve_ds_elem {
    SIEVE_DS_ELEM_AUTO = 0, /* writers: the format's natural type (float32 for npy) */
    SIEVE_DS_ELEM_F32,
    SIEVE_DS_ELEM_F16,
    SIEVE_DS_ELEM_U8,
    SIEVE_DS_ELEM_I8,
    SIEVE_DS_ELEM_I32,
    SIEVE_DS_ELEM_U32,
    SIEVE_DS_ELEM_I64,
    SIEVE_DS_ELEM_U64,
} sieve_ds_elem;

/* Bytes per element (0 for AUTO/unknown). */
size_t sieve_ds_elem_size(sieve_ds_elem e);
/* "float32", "float16", "uint8", "int8", "int32", "uint32", "int64", "uint64", or NULL. */
const char *sieve_ds_elem_name(sieve_ds_elem e);
/* Parses the names above and "f32", "f16", "u8", "i8", "i32", "u32", "i64", "u64".
 * 0 or SIEVE_EINVAL. */
int sieve_ds_elem_parse(const char *name, sieve_ds_elem *out);

/* IEEE binary16 conversions, round to nearest even; NaN stays NaN, overflow -> infinity. */
uint16_t sieve_ds_f32_to_f16(float x);
float sieve_ds_f16_to_f32(uint16_t h);

/* ---------------------------------------------------------------- point ids */

/* A point id as the store and the HTTP API know it: an unsigned integer or a UUID. */
typedef struct sieve_ds_id {
    int is_uuid;      /* 0: num is the id; 1: uuid is the id */
    uint64_t num;
    uint8_t uuid[16];
} sieve_ds_id;

/* Parses "123" (decimal uint64) or a UUID (8-4-4-4-12 hex or 32 hex digits, any case).
 * len = bytes of text (need not be NUL-terminated). 0 or SIEVE_EPARSE. */
int sieve_ds_id_parse(const char *text, size_t len, sieve_ds_id *out);
/* Writes the decimal or lowercase hyphenated UUID form into buf (37 bytes suffice). */
void sieve_ds_id_format(const sieve_ds_id *id, char buf[40]);

/* ---------------------------------------------------------------- dense readers */

typedef struct sieve_ds_reader sieve_ds_reader;

typedef struct sieve_ds_info {
    sieve_ds_format format;
    sieve_ds_elem elem;   /* element type as stored */
    uint64_t count;       /* rows */
    uint32_t dim;         /* values per row (1 for a 1-D .npy; 0 for an empty .fvecs) */
    uint64_t data_offset; /* byte offset of row 0 */
    uint64_t row_bytes;   /* bytes per row in the file (fvecs family: 4 + dim * elem) */
    uint64_t file_bytes;  /* size of the file */
} sieve_ds_info;

/* Opens a dense file, reads and validates its header against the file size. The whole
 * structure is checked here (header, size = header + count * row_bytes); per-row dimension
 * prefixes (fvecs family) and finiteness are checked as rows are read.
 * format: SIEVE_DS_FORMAT_AUTO guesses from the extension. flags: SIEVE_DS_ALLOW_NONFINITE.
 * Errors: SIEVE_EINVAL (NULL argument, not a dense format), SIEVE_ENOTFOUND, SIEVE_EIO,
 * SIEVE_ECORRUPT (truncated, bad magic, size mismatch, dimension 0 or > SIEVE_DS_MAX_DIM),
 * SIEVE_EPARSE (npy header dict), SIEVE_ENOTSUP (npy dtype/order/shape), SIEVE_ENOMEM.
 * On success *out is owned by the caller (sieve_ds_reader_close); on failure *out = NULL. */
int sieve_ds_reader_open(const char *path, sieve_ds_format format, unsigned flags,
                         sieve_ds_reader **out, sieve_ds_error *err);

/* Copies the file's description into *info. Never fails for a valid reader. */
void sieve_ds_reader_info(const sieve_ds_reader *r, sieve_ds_info *info);

/* Reads up to max_rows rows from the current position into out (max_rows * dim floats),
 * converting every element type to float32 (integers above 2^24 round). *nread gets the
 * rows read; 0 means the end. The position advances by *nread. The reader asks the kernel
 * to read ahead of the position, so disk reads overlap the caller's work between calls;
 * chunks of 1 to 32 MiB are fastest (larger buffers fall out of the CPU caches).
 * Errors: SIEVE_EINVAL, SIEVE_EIO, SIEVE_ECORRUPT (file shrank since open), SIEVE_EDIM
 * (an fvecs-family row prefix differs from the first row's), SIEVE_ENONFINITE. On an error
 * the rows before the bad one are in out, *nread counts them, and the position is at the
 * bad row. */
int sieve_ds_reader_read_f32(sieve_ds_reader *r, size_t max_rows, float *out, size_t *nread,
                             sieve_ds_error *err);

/* Like read_f32 for integer files (ids, ground truth): out gets max_rows * dim values.
 * Errors as read_f32, plus SIEVE_ENOTSUP for float files and SIEVE_ERANGE for a negative
 * value (the message names the row). */
int sieve_ds_reader_read_u64(sieve_ds_reader *r, size_t max_rows, uint64_t *out,
                             size_t *nread, sieve_ds_error *err);

/* Moves the position to row (0 <= row <= count; count is the end). O(1).
 * Errors: SIEVE_EINVAL, SIEVE_ERANGE. */
int sieve_ds_reader_seek(sieve_ds_reader *r, uint64_t row, sieve_ds_error *err);
/* Current row position. */
uint64_t sieve_ds_reader_tell(const sieve_ds_reader *r);
/* Closes the file and frees r (NULL is a no-op). */
void sieve_ds_reader_close(sieve_ds_reader *r);

/* ---------------------------------------------------------------- dense writers */

typedef struct sieve_ds_writer sieve_ds_writer;

/* Creates a dense file. Data goes to "PATH.partial", which close renames to path, so a
 * killed or failed run never leaves a file that looks complete. Headers that hold the row
 * count (fbin family, npy) are written at close.
 * elem: SIEVE_DS_ELEM_AUTO or the format's type (fvecs/fbin f32, ivecs/ibin i32, bvecs/
 * u8bin u8, i8bin i8, u64bin u64; npy any of f32 f16 u8 i8 i32 u32 i64 u64).
 * dim: 1 .. SIEVE_DS_MAX_DIM. flags: SIEVE_DS_ALLOW_NONFINITE.
 * Errors: SIEVE_EINVAL (bad format/elem/dim combination), SIEVE_EIO, SIEVE_ENOMEM. */
int sieve_ds_writer_open(const char *path, sieve_ds_format format, sieve_ds_elem elem,
                         uint32_t dim, unsigned flags, sieve_ds_writer **out,
                         sieve_ds_error *err);

/* Appends n rows (n * dim floats), converting to the file's element type. Integer types
 * need integral values within range; float16 needs |x| <= 65504.
 * Errors: SIEVE_EINVAL, SIEVE_ENONFINITE, SIEVE_ERANGE (value does not fit; the message
 * names row and element), SIEVE_EIO, SIEVE_ETOOBIG (more than 2^32-1 rows in a format
 * with a 32-bit count). On an error nothing of this call is written. */
int sieve_ds_writer_write_f32(sieve_ds_writer *w, const float *rows, size_t n,
                              sieve_ds_error *err);
/* Appends n rows of integers (n * dim values) to an integer file. Errors as write_f32,
 * plus SIEVE_ENOTSUP for a float file. */
int sieve_ds_writer_write_u64(sieve_ds_writer *w, const uint64_t *rows, size_t n,
                              sieve_ds_error *err);
/* Rows written so far. */
uint64_t sieve_ds_writer_count(const sieve_ds_writer *w);
/* Writes the header, flushes, fsyncs and renames into place, then frees w (always, even
 * on error; on error the partial file is removed). Errors: SIEVE_EIO. */
int sieve_ds_writer_close(sieve_ds_writer *w, sieve_ds_error *err);
/* Discards everything written and frees w (NULL is a no-op). */
void sieve_ds_writer_abort(sieve_ds_writer *w);

/* ---------------------------------------------------------------- JSON lines */

/* One record of a .jsonl file: {"id": 7 | "uuid" | "123", "vector": [..], "payload": {..}}.
 * Every key is optional; other keys are rejected (a typo like "vectors" would otherwise
 * silently drop data). If the first record has a vector, every record must have one of the
 * same length, and vice versa. Blank lines are skipped. Numeric ids above 2^63-1 must be
 * written as decimal strings ("18446744073709551615"). */
typedef struct sieve_ds_record {
    uint64_t line;        /* 1-based line number */
    uint64_t index;       /* 0-based record number */
    int has_id;
    sieve_ds_id id;
    const float *vector;  /* dim floats owned by the reader, valid until the next call; NULL
                             when the file has no vectors */
    uint32_t dim;
    const char *payload;  /* the payload object's JSON text as written on the line (NUL-
                             terminated), owned by the reader, valid until the next call;
                             NULL for none or "payload": null */
    size_t payload_len;
} sieve_ds_record;

typedef struct sieve_ds_jsonl sieve_ds_jsonl;

/* Opens a .jsonl file for streaming. Errors: SIEVE_EINVAL, SIEVE_ENOTFOUND, SIEVE_EIO,
 * SIEVE_ENOMEM. *out is owned by the caller (sieve_ds_jsonl_close). */
int sieve_ds_jsonl_open(const char *path, unsigned flags, sieve_ds_jsonl **out,
                        sieve_ds_error *err);
/* Reads the next record into *rec; *got = 1, or *got = 0 at the end of the file.
 * Errors (the message has "FILE:LINE:"): SIEVE_EPARSE (bad JSON, wrong types, unknown key),
 * SIEVE_EDIM (vector length differs from the first record's, or vector presence differs),
 * SIEVE_ERANGE (a number beyond the float32 range), SIEVE_ETOOBIG, SIEVE_EIO, SIEVE_ENOMEM.
 * A bad record is consumed: the next call reads the line after it. */
int sieve_ds_jsonl_next(sieve_ds_jsonl *r, sieve_ds_record *rec, int *got,
                        sieve_ds_error *err);
/* Skips records until `index` records have been consumed from the start (counting non-blank
 * lines without parsing them); rewinds first when index is behind the position.
 * Errors: SIEVE_ERANGE (file has fewer records), SIEVE_EIO. */
int sieve_ds_jsonl_seek(sieve_ds_jsonl *r, uint64_t index, sieve_ds_error *err);
/* Records consumed so far, and the byte offset of the next line. */
uint64_t sieve_ds_jsonl_tell(const sieve_ds_jsonl *r);
uint64_t sieve_ds_jsonl_tell_bytes(const sieve_ds_jsonl *r);
void sieve_ds_jsonl_close(sieve_ds_jsonl *r);

/* Writer: one line per record, floats written with 9 significant digits so float32 values
 * read back bit-exact. Same .partial-then-rename rule as the dense writer. */
typedef struct sieve_ds_jsonl_writer sieve_ds_jsonl_writer;
/* Errors: SIEVE_EINVAL, SIEVE_EIO, SIEVE_ENOMEM. */
int sieve_ds_jsonl_writer_open(const char *path, sieve_ds_jsonl_writer **out,
                               sieve_ds_error *err);
/* id: NULL for none; vector: NULL (dim 0) for none; payload: JSON object text or NULL,
 * written as given (re-serialised compactly only if it spans several lines).
 * Errors: SIEVE_EINVAL, SIEVE_ENONFINITE, SIEVE_EPARSE (payload not a JSON object),
 * SIEVE_EIO. */
int sieve_ds_jsonl_write(sieve_ds_jsonl_writer *w, const sieve_ds_id *id, const float *vector,
                         uint32_t dim, const char *payload, sieve_ds_error *err);
/* Flushes, renames into place and frees w (always). Errors: SIEVE_EIO. */
int sieve_ds_jsonl_writer_close(sieve_ds_jsonl_writer *w, sieve_ds_error *err);
void sieve_ds_jsonl_writer_abort(sieve_ds_jsonl_writer *w);

/* ---------------------------------------------------------------- TSV (MS MARCO) */

/* One line of an MS MARCO style file: collection.tsv (pid<TAB>passage) or queries.tsv
 * (qid<TAB>query). The id is a decimal uint64 or a UUID; the text is everything after the
 * first tab, without the line end (a trailing CR is dropped). Blank lines are skipped. */
typedef struct sieve_ds_text {
    uint64_t line;    /* 1-based */
    uint64_t index;   /* 0-based record number */
    sieve_ds_id id;
    const char *text; /* NUL-terminated, owned by the reader, valid until the next call */
    size_t text_len;
} sieve_ds_text;

typedef struct sieve_ds_tsv sieve_ds_tsv;
/* Errors: SIEVE_EINVAL, SIEVE_ENOTFOUND, SIEVE_EIO, SIEVE_ENOMEM. */
int sieve_ds_tsv_open(const char *path, sieve_ds_tsv **out, sieve_ds_error *err);
/* *got = 1 with a record, 0 at the end. Errors: SIEVE_EPARSE (no tab, bad id),
 * SIEVE_ETOOBIG, SIEVE_EIO. */
int sieve_ds_tsv_next(sieve_ds_tsv *r, sieve_ds_text *rec, int *got, sieve_ds_error *err);
/* As sieve_ds_jsonl_seek. */
int sieve_ds_tsv_seek(sieve_ds_tsv *r, uint64_t index, sieve_ds_error *err);
uint64_t sieve_ds_tsv_tell(const sieve_ds_tsv *r);
uint64_t sieve_ds_tsv_tell_bytes(const sieve_ds_tsv *r);
void sieve_ds_tsv_close(sieve_ds_tsv *r);

/* Writes n lines "id<TAB>text\n" (to PATH.partial, then renamed). A text holding a tab,
 * CR or LF is rejected with SIEVE_EINVAL naming its index. Errors: SIEVE_EINVAL, SIEVE_EIO. */
int sieve_ds_tsv_save(const char *path, const sieve_ds_id *ids, const char *const *texts,
                      size_t n, sieve_ds_error *err);

/* ---------------------------------------------------------------- qrels */

typedef struct sieve_ds_qrel {
    uint64_t qid;
    uint64_t pid;
    int32_t rel; /* relevance; 1 for the two-column form */
} sieve_ds_qrel;

/* Loads a whole qrels file: TREC lines "qid ITER pid rel" (spaces or tabs) or two-column
 * "qid<TAB>pid". All lines must use the same form. *out is malloc'd, owned by the caller
 * (free()); *n = lines. Errors: SIEVE_EPARSE (line number, expected form), SIEVE_ENOTFOUND,
 * SIEVE_EIO, SIEVE_ENOMEM, SIEVE_EINVAL. */
int sieve_ds_qrels_load(const char *path, sieve_ds_qrel **out, size_t *n, sieve_ds_error *err);
/* Writes qrels in the TREC four-column form ("qid 0 pid rel") or, with two_column, as
 * "qid<TAB>pid" (then every rel must be 1, else SIEVE_EINVAL). Errors: SIEVE_EINVAL, SIEVE_EIO. */
int sieve_ds_qrels_save(const char *path, const sieve_ds_qrel *q, size_t n, int two_column,
                        sieve_ds_error *err);

/* Counts the non-blank lines of a text file (a fast pass without parsing), for a progress
 * total. Errors: SIEVE_EINVAL, SIEVE_ENOTFOUND, SIEVE_EIO. */
int sieve_ds_count_lines(const char *path, uint64_t *out, sieve_ds_error *err);

/* ---------------------------------------------------------------- ingestion source */

/* A source joins a vector file with optional id and payload files row by row, for bulk
 * ingestion: row i of the vectors gets id i of the id file and payload line i.
 *  - vectors: any dense format (read as float32) or .jsonl (its "id" and "payload" keys are
 *    used when present).
 *  - ids: an integer dense file with one id per row (.u64bin, .ibin or .npy of uint64/int64/
 *    int32/uint32 with d = 1 or 1-D); its count must equal the vectors' count.
 *  - payloads: .jsonl (its "payload") or .tsv (payload {"text": TEXT}, the text JSON-escaped;
 *    it must be UTF-8). One payload source per row: a payload file next to .jsonl vectors
 *    that carry payloads is an error.
 * Ids: the first of the id file, the vectors' .jsonl "id" and the payload file's id gives a
 * row its id; every other one present must equal it (a file that drifted out of line is
 * caught at the first wrong row). Without any id source the batch's ids are NULL and the
 * caller chooses (e.g. row numbers). A .jsonl whose first record has an "id" must have one
 * on every line, and vice versa. */
typedef struct sieve_ds_source_options {
    const char *vectors;
    sieve_ds_format vectors_format;  /* AUTO: from the extension */
    const char *ids;                 /* NULL for none */
    sieve_ds_format ids_format;
    const char *payloads;            /* NULL for none */
    sieve_ds_format payloads_format;
    unsigned flags;                  /* SIEVE_DS_ALLOW_NONFINITE */
} sieve_ds_source_options;

typedef struct sieve_ds_source_info {
    uint64_t count;      /* rows, or SIEVE_DS_UNKNOWN_COUNT for .jsonl vectors */
    uint32_t dim;        /* from the header, or from the first .jsonl record (read at open);
                            0 only for an empty .jsonl file */
    int has_ids;
    int has_payloads;
    uint64_t total_bytes; /* size of the vectors file (progress by bytes for .jsonl) */
} sieve_ds_source_info;

/* One batch; every pointer is owned by the source and valid until its next read/seek/close. */
typedef struct sieve_ds_batch {
    size_t n;                  /* rows in this batch; 0 at the end */
    uint32_t dim;
    uint64_t first_row;        /* row number of the batch's first row */
    const float *vectors;      /* n * dim */
    const sieve_ds_id *ids;    /* n ids, or NULL without an id source */
    const char *const *payloads; /* n JSON object texts (NULL entries: no payload), or NULL */
    const size_t *payload_lens;
} sieve_ds_batch;

typedef struct sieve_ds_source sieve_ds_source;

/* Opens every file and checks what can be checked up front (headers, dense counts).
 * Errors: those of the readers; SIEVE_ECORRUPT for an ids count that differs from the
 * vectors' count; SIEVE_EINVAL for a missing vectors path or an unusable format.
 * *out is owned by the caller (sieve_ds_source_close). */
int sieve_ds_source_open(const sieve_ds_source_options *o, sieve_ds_source **out,
                         sieve_ds_error *err);
void sieve_ds_source_info_get(const sieve_ds_source *s, sieve_ds_source_info *info);
/* Reads up to max_rows rows (max_rows >= 1). batch->n == 0 at the end, after checking that
 * the payload file has no extra lines. Errors: those of the readers; SIEVE_ECORRUPT when a
 * payload file ends early or runs long, or an id there disagrees (message names both files,
 * the row and the line). After an error the source must be sought or closed. */
int sieve_ds_source_read(sieve_ds_source *s, size_t max_rows, sieve_ds_batch *batch,
                         sieve_ds_error *err);
/* Positions every file at row (resume). O(1) for dense files; text files are scanned.
 * Errors: SIEVE_ERANGE (beyond the end), SIEVE_EIO. */
int sieve_ds_source_seek(sieve_ds_source *s, uint64_t row, sieve_ds_error *err);
uint64_t sieve_ds_source_tell(const sieve_ds_source *s);
/* Bytes of the vectors file consumed so far (for byte-based progress). */
uint64_t sieve_ds_source_tell_bytes(const sieve_ds_source *s);
void sieve_ds_source_close(sieve_ds_source *s);

/* ---------------------------------------------------------------- random numbers */

/* xoshiro256** state, seeded through splitmix64. Counter-style seeding: (seed, stream,
 * index) gives an independent sequence, so generators can produce any row on its own and
 * the result never depends on chunking or threads. */
typedef struct sieve_rng {
    uint64_t s[4];
    double spare; /* second normal of the last pair (Marsaglia polar method) */
    int has_spare;
} sieve_rng;

void sieve_rng_init(sieve_rng *r, uint64_t seed, uint64_t stream, uint64_t index);
uint64_t sieve_rng_u64(sieve_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double sieve_rng_uniform(sieve_rng *r);
/* Uniform in [0, n) without modulo bias (n >= 1). */
uint64_t sieve_rng_below(sieve_rng *r, uint64_t n);
/* Standard normal N(0, 1). */
double sieve_rng_normal(sieve_rng *r);

/* ---------------------------------------------------------------- generators */

typedef enum sieve_ds_gen_kind {
    SIEVE_DS_GEN_GAUSSIAN = 0, /* i.i.d. N(0,1) elements; optionally unit-normalised */
    SIEVE_DS_GEN_CLUSTERED,    /* unit vectors around `clusters` centres (see below) */
    SIEVE_DS_GEN_MSMARCO,      /* SIEVE_DS_GEN_CLUSTERED with the MS MARCO preset */
} sieve_ds_gen_kind;

/* The clustered mixture (also the MS MARCO preset). With d = dim, s = spread,
 * a = anisotropy, t = query_noise and z a fresh N(0, I_d) draw each time:
 *   m      = unit Gaussian direction shared by all centres (real embeddings are anisotropic)
 *   c_j    = normalise(a * m + sqrt(1 - a^2) * u_j), u_j a unit Gaussian direction
 *   row i  : cluster k uniform in [0, C); x_i = normalise(c_k + s * z / sqrt(d))
 *   query j: source row r uniform in [0, count); q_j = normalise(x_r + t * z / sqrt(d))
 * For large d this gives, in expectation:
 *   x . c_k                         ~ 1 / sqrt(1 + s^2)
 *   x . y, same cluster             ~ 1 / (1 + s^2)
 *   x . y, different clusters       ~ a^2 / (1 + s^2)   (spread ~ 1/sqrt(d) around it)
 *   q_j . x_r                       ~ 1 / sqrt(1 + t^2) (the source is the top neighbour)
 * So a query's scores concentrate in a narrow band near a^2/(1+s^2), with a few thousand
 * same-cluster rows above it and its source row on top: the shape that makes top-k selection
 * over bi-encoder embeddings hard (narrow score range, heavy ties near the boundary).
 * Gaussian queries are independent N(0,1) rows (normalised if the rows are). */
typedef struct sieve_ds_gen_params {
    sieve_ds_gen_kind kind;
    uint64_t seed;
    uint64_t count;      /* rows; queries pick sources in [0, count) */
    uint32_t dim;
    int normalize;       /* Gaussian only: unit-normalise rows and queries */
    uint32_t clusters;   /* C */
    float spread;        /* s */
    float anisotropy;    /* a, in [0, 1) */
    float query_noise;   /* t */
} sieve_ds_gen_params;

/* MS MARCO passage collection size: the largest count the MS MARCO preset accepts. */
#define SIEVE_DS_MSMARCO_PASSAGES 8841823u
#define SIEVE_DS_MSMARCO_DIM 768u

/* Fills p with defaults for kind: Gaussian (dim 768, not normalised); clustered (dim 768,
 * C 1024, s 1.0, a 0.5, t 0.5); MS MARCO (dim 768, count 8,841,823, C 4096, s 1.0, a 0.55,
 * t 0.6: same-cluster scores ~0.5, background ~0.15, query to source ~0.86). seed 0. */
void sieve_ds_gen_params_init(sieve_ds_gen_params *p, sieve_ds_gen_kind kind);

typedef struct sieve_ds_gen sieve_ds_gen;

/* Creates a generator (computes the cluster centres: C x dim floats).
 * Errors: SIEVE_EINVAL (dim 0 or > SIEVE_DS_MAX_DIM, count 0, clusters 0, spread < 0,
 * anisotropy outside [0,1), query_noise < 0), SIEVE_ERANGE (MS MARCO: dim != 768 or count >
 * 8,841,823), SIEVE_ENOMEM. *out is owned by the caller (sieve_ds_gen_destroy). */
int sieve_ds_gen_create(const sieve_ds_gen_params *p, sieve_ds_gen **out, sieve_ds_error *err);
void sieve_ds_gen_destroy(sieve_ds_gen *g);
/* The parameters the generator was created with. */
const sieve_ds_gen_params *sieve_ds_gen_params_get(const sieve_ds_gen *g);
/* Writes rows [row0, row0 + n) into out (n * dim floats). Row i is a function of (params, i)
 * only. Thread-safe. Errors: SIEVE_EINVAL, SIEVE_ERANGE (beyond count). */
int sieve_ds_gen_rows(const sieve_ds_gen *g, uint64_t row0, size_t n, float *out);
/* Writes queries [q0, q0 + n) into out; sources (optional, n values) gets the row each query
 * was drawn near (UINT64_MAX for Gaussian). Any number of queries. Thread-safe.
 * Errors: SIEVE_EINVAL. */
int sieve_ds_gen_queries(const sieve_ds_gen *g, uint64_t q0, size_t n, float *out,
                         uint64_t *sources);
/* Cluster index of row (clustered kinds). Errors: SIEVE_EINVAL (Gaussian), SIEVE_ERANGE. */
int sieve_ds_gen_cluster_of(const sieve_ds_gen *g, uint64_t row, uint32_t *cluster);
/* Copies centre c_k (dim floats). Errors: SIEVE_EINVAL (Gaussian), SIEVE_ERANGE. */
int sieve_ds_gen_centre(const sieve_ds_gen *g, uint32_t k, float *out);

/* ---------------------------------------------------------------- adversarial sets */

/* Matrices that break naive top-k selection, built around a given query q (|q| > 0).
 * Unless stated, row i = r_i + t_i * q/|q| where r_i is a Gaussian vector orthogonal to q
 * with |r_i| = 0.5, so the exact score q . x_i = |q| * t_i (up to float32 rounding of the
 * stored row, at most 2^-24 |q| |x_i|):
 *   SORTED_ASC   t_i = -1 + 2i/(n-1): scores strictly ascending in row order (strict in
 *                exact arithmetic on the stored rows for n up to about 7 million; float32
 *                accumulation keeps them strict for n up to about 10^4 at d = 768)
 *   SORTED_DESC  the reverse
 *   TIES         every row is the same vector (t = 0.5): all scores bit-identical
 *   OUTLIER      t_i uniform in [-1, 1) except row o (o from the seed, see info) which is
 *                10^4 * q/|q|: one score 10^4 |q|, every other at most ~|q|
 *   NARROW_BAND  t_i = 0.5 + 1e-4 * u_i, u_i uniform [0, 1): every score inside
 *                [0.5 |q|, 0.5001 |q|]
 *   DUPLICATES   m = ceil(n/4) distinct rows (t uniform in [-1, 1)); row i is a bit-exact
 *                copy of distinct row i mod m, so copies lie m rows apart
 *   RANDOM       t_i uniform in [-1, 1) (a control)
 * Row i depends only on (kind, q, n, seed, i): any range can be generated on its own. */
typedef enum sieve_ds_adv_kind {
    SIEVE_DS_ADV_SORTED_ASC = 0,
    SIEVE_DS_ADV_SORTED_DESC,
    SIEVE_DS_ADV_TIES,
    SIEVE_DS_ADV_OUTLIER,
    SIEVE_DS_ADV_NARROW_BAND,
    SIEVE_DS_ADV_DUPLICATES,
    SIEVE_DS_ADV_RANDOM,
} sieve_ds_adv_kind;

#define SIEVE_DS_ADV_OUTLIER_SCALE 1.0e4
#define SIEVE_DS_ADV_BAND_WIDTH 1.0e-4

/* "sorted-asc", "sorted-desc", "ties", "outlier", "narrow-band", "duplicates", "random". */
const char *sieve_ds_adv_name(sieve_ds_adv_kind kind);
/* Parses the names above. 0 or SIEVE_EINVAL. */
int sieve_ds_adv_parse(const char *name, sieve_ds_adv_kind *out);

typedef struct sieve_ds_adv_info {
    uint64_t outlier_row; /* OUTLIER: the outlier's row; UINT64_MAX otherwise */
    uint64_t distinct;    /* DUPLICATES: m; TIES: 1; otherwise n */
} sieve_ds_adv_info;

/* Writes rows [row0, row0 + count) of the n-row adversarial matrix of `kind` for query q
 * (dim floats) into out (count * dim floats). info (optional) describes the whole matrix.
 * Thread-safe. Errors: SIEVE_EINVAL (NULL, dim 0, n 0, unknown kind, |q| = 0 or not
 * finite), SIEVE_ERANGE (row0 + count > n), SIEVE_ENOMEM (2 * dim doubles of scratch). */
int sieve_ds_adv_rows(sieve_ds_adv_kind kind, const float *q, uint32_t dim, uint64_t n,
                      uint64_t seed, uint64_t row0, size_t count, float *out,
                      sieve_ds_adv_info *info);
/* Fills the whole n x dim matrix: sieve_ds_adv_rows(kind, q, dim, n, seed, 0, n, out, info). */
int sieve_ds_adversarial_fill(sieve_ds_adv_kind kind, const float *q, uint32_t dim, size_t n,
                              uint64_t seed, float *out, sieve_ds_adv_info *info);

/* ---------------------------------------------------------------- progress bar */

/* A one-line progress bar on a terminal: label, bar, percent, count/total, rate and ETA,
 * redrawn at most every 100 ms; nothing when disabled (mode AUTO and the stream is not a
 * terminal), so pipes and logs stay clean. Not thread-safe; update from one thread. */
typedef enum sieve_progress_mode {
    SIEVE_PROGRESS_AUTO = 0,   /* on when the stream is a terminal */
    SIEVE_PROGRESS_ALWAYS = 1,
    SIEVE_PROGRESS_NEVER = 2,
} sieve_progress_mode;

typedef struct sieve_progress {
    FILE *out;
    int enabled;
    char label[48];
    char unit[24];
    uint64_t total;     /* 0: unknown (no bar, no ETA) */
    uint64_t base;      /* count already done when this run started (resume) */
    uint64_t done;
    double t_start;     /* monotonic seconds */
    double t_drawn;     /* last redraw; < 0 before the first */
    size_t last_len;    /* length of the last line drawn (to blank leftovers) */
} sieve_progress;

/* Prepares p. label and unit are copied (truncated to fit). base: items already done (a
 * resumed run) so the rate and ETA count only this run's work. */
void sieve_progress_init(sieve_progress *p, FILE *out, const char *label, const char *unit,
                         uint64_t total, uint64_t base, sieve_progress_mode mode);
/* Records `done` items in total (including base) and redraws if 100 ms have passed. */
void sieve_progress_update(sieve_progress *p, uint64_t done);
/* Draws the final state and ends the line (no-op when disabled). */
void sieve_progress_finish(sieve_progress *p);
/* Formats the line for `done` items after elapsed_s seconds into buf (NUL-terminated,
 * truncated to len), e.g.
 *   "ingest [#########.........]  31.2%  2,758,492/8,841,823 vectors  215.3k/s  ETA 0:28"
 * Returns the line's length. Pure: used by update and by tests. */
size_t sieve_progress_format(const sieve_progress *p, uint64_t done, double elapsed_s,
                             char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif

/* ds_internal.h: helpers shared by the datasets module's files (sieve__ds_ names).
 *
 * Owns: error formatting, whole-buffer file I/O, the buffered line reader used by every text
 * format, and the write-to-.partial-then-rename output file. Must not: be included outside
 * datasets/ (tests use the public header only).
 */
#ifndef SIEVE_DS_INTERNAL_H
#define SIEVE_DS_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "sieve_datasets.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "sieve datasets: the file formats are little-endian; add byte swapping for this host"
#endif

#if defined(__GNUC__)
#define SIEVE__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SIEVE__PRINTF(a, b)
#endif

/* Fills err (if not NULL) with code and the formatted message; returns code. */
int sieve__ds_fail(sieve_ds_error *err, int code, const char *fmt, ...) SIEVE__PRINTF(3, 4);

/* Maps an errno from open() to ENOTFOUND/EIO and fills err: "PATH: cannot open: ...". */
int sieve__ds_fail_open(sieve_ds_error *err, const char *path, int errnum);

/* Opens path read-only; *size gets its size. Errors: SIEVE_ENOTFOUND, SIEVE_EIO. */
int sieve__ds_open_read(const char *path, int *fd, uint64_t *size, sieve_ds_error *err);

/* Reads exactly n bytes at offset. A short file gives SIEVE_ECORRUPT ("PATH: ended at byte
 * X while reading WHAT at offset Y"). what: a noun phrase for the message. */
int sieve__ds_pread_full(int fd, const char *path, void *buf, size_t n, uint64_t offset,
                         const char *what, sieve_ds_error *err);

/* strdup that returns NULL on failure. */
char *sieve__ds_strdup(const char *s);

/* "1,234,567" into buf (buf >= 32 bytes). Returns buf. */
char *sieve__ds_group(uint64_t v, char *buf);

/* Index of the first non-finite value in x[0..n), or n. */
size_t sieve__ds_find_nonfinite(const float *x, size_t n);

/* ------------------------------------------------------------ line reader */

typedef struct sieve__ds_lines {
    int fd;
    char *path;
    char *buf;
    size_t cap, start, end;  /* unread data is buf[start, end) */
    uint64_t buf_offset;     /* file offset of buf[0] */
    uint64_t line_no;        /* 1-based number of the last line returned */
    uint64_t line_offset;    /* file offset of the last line returned */
    uint64_t file_bytes;
    int eof;
} sieve__ds_lines;

/* Opens path. Errors: SIEVE_ENOTFOUND, SIEVE_EIO, SIEVE_ENOMEM. */
int sieve__ds_lines_open(sieve__ds_lines *l, const char *path, sieve_ds_error *err);
/* Next line, NUL-terminated in place, without its LF or CRLF. *got = 0 at the end.
 * Errors: SIEVE_EIO, SIEVE_ETOOBIG, SIEVE_ENOMEM. */
int sieve__ds_lines_next(sieve__ds_lines *l, char **line, size_t *len, int *got,
                         sieve_ds_error *err);
/* Byte offset of the next unread line. */
uint64_t sieve__ds_lines_tell(const sieve__ds_lines *l);
/* Back to the start of the file. */
void sieve__ds_lines_rewind(sieve__ds_lines *l);
void sieve__ds_lines_close(sieve__ds_lines *l);
/* 1 if the line holds only spaces, tabs or CRs. */
int sieve__ds_blank(const char *s, size_t len);

/* ------------------------------------------------------------ output file */

typedef struct sieve__ds_out {
    int fd;
    char *path;    /* final name */
    char *tmp;     /* PATH.partial */
    char *buf;
    size_t len, cap;
    uint64_t offset; /* bytes written to the file (after the buffer is flushed) */
} sieve__ds_out;

/* Creates PATH.partial (truncating a stale one). Errors: SIEVE_EINVAL, SIEVE_EIO,
 * SIEVE_ENOMEM. */
int sieve__ds_out_open(sieve__ds_out *o, const char *path, sieve_ds_error *err);
/* Appends n bytes (buffered). Errors: SIEVE_EIO. */
int sieve__ds_out_write(sieve__ds_out *o, const void *p, size_t n, sieve_ds_error *err);
/* Flushes the buffer, then writes n bytes at offset (header patching). Errors: SIEVE_EIO. */
int sieve__ds_out_pwrite(sieve__ds_out *o, const void *p, size_t n, uint64_t offset,
                         sieve_ds_error *err);
/* Flushes, fsyncs, closes and renames PATH.partial to PATH; on failure removes it.
 * Frees o's memory either way. Errors: SIEVE_EIO. */
int sieve__ds_out_commit(sieve__ds_out *o, sieve_ds_error *err);
/* Closes and removes PATH.partial; frees o's memory. */
void sieve__ds_out_abort(sieve__ds_out *o);

/* ------------------------------------------------------------ JSON text */

/* Appends s[0..n) to o as a JSON string literal (quotes, escapes). Invalid UTF-8 gives
 * SIEVE_EPARSE with *bad_at = the offending byte's index. Used by the source and writers.
 * buf/len/cap: a growable buffer. Errors: SIEVE_EPARSE, SIEVE_ENOMEM. */
int sieve__ds_json_string(char **buf, size_t *len, size_t *cap, const char *s, size_t n,
                          size_t *bad_at);
/* Appends raw bytes to a growable buffer. Errors: SIEVE_ENOMEM. */
int sieve__ds_buf_append(char **buf, size_t *len, size_t *cap, const void *p, size_t n);

/* ------------------------------------------------------------ npy headers (npy.c) */

/* Bytes of the header sieve writes (a v1.0 header padded to a multiple of 64). */
#define SIEVE__DS_NPY_HEADER_BYTES 128u

/* Reads and checks the .npy header of an open file of `size` bytes; fills info (format,
 * elem, count, dim, data_offset, row_bytes, file_bytes). Errors: SIEVE_ECORRUPT,
 * SIEVE_EPARSE, SIEVE_ENOTSUP, SIEVE_EIO, SIEVE_ENOMEM. */
int sieve__ds_npy_read_header(int fd, const char *path, uint64_t size, sieve_ds_info *info,
                              sieve_ds_error *err);
/* Writes the SIEVE__DS_NPY_HEADER_BYTES-byte header for a count x dim array of elem into
 * out (dim 1 gives a 1-D shape). Returns 0, or SIEVE_EINVAL for an element without a
 * NumPy type. */
int sieve__ds_npy_make_header(char out[SIEVE__DS_NPY_HEADER_BYTES], sieve_ds_elem elem,
                              uint64_t count, uint32_t dim);

/* Size in bytes of a .jsonl reader's file (text.c). */
uint64_t sieve__ds_jsonl_file_bytes(const sieve_ds_jsonl *r);

#endif

/* dense.c: streaming readers and writers of dense matrix files: the fvecs family (a 4-byte
 * dimension before every row), the big-ann-benchmarks .bin family (uint32 n, uint32 d, then
 * data; sieve adds .u64bin with uint64 elements for ids) and .npy (header in npy.c).
 * Must not: hold a whole file in memory; every read goes through pread at an explicit
 * offset, so a reader's position is only a row number and seeking is O(1). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ds_internal.h"

#define STAGE_BYTES ((size_t)4 << 20)
#define PIECE_BYTES ((size_t)1 << 20)
#define PREFETCH_BYTES ((uint64_t)32 << 20)

struct sieve_ds_reader {
    int fd;
    char *path;
    unsigned flags;
    sieve_ds_info info;
    size_t esize;
    int prefixed; /* fvecs family */
    uint64_t pos;
    unsigned char *stage;
    size_t stage_cap;
    float *f16; /* float16 -> float32 table (65536 entries) for F16 files */
    uint64_t advised; /* prefetch advice given up to this byte offset */
};

static sieve_ds_elem format_elem(sieve_ds_format f) {
    switch (f) {
    case SIEVE_DS_FORMAT_FVECS: return SIEVE_DS_ELEM_F32;
    case SIEVE_DS_FORMAT_IVECS: return SIEVE_DS_ELEM_I32;
    case SIEVE_DS_FORMAT_BVECS: return SIEVE_DS_ELEM_U8;
    case SIEVE_DS_FORMAT_FBIN: return SIEVE_DS_ELEM_F32;
    case SIEVE_DS_FORMAT_IBIN: return SIEVE_DS_ELEM_I32;
    case SIEVE_DS_FORMAT_U8BIN: return SIEVE_DS_ELEM_U8;
    case SIEVE_DS_FORMAT_I8BIN: return SIEVE_DS_ELEM_I8;
    case SIEVE_DS_FORMAT_U64BIN: return SIEVE_DS_ELEM_U64;
    case SIEVE_DS_FORMAT_NPY: return SIEVE_DS_ELEM_F32;
    default: return SIEVE_DS_ELEM_AUTO;
    }
}

static int is_prefixed(sieve_ds_format f) {
    return f == SIEVE_DS_FORMAT_FVECS || f == SIEVE_DS_FORMAT_IVECS || f == SIEVE_DS_FORMAT_BVECS;
}

static int is_float(sieve_ds_elem e) { return e == SIEVE_DS_ELEM_F32 || e == SIEVE_DS_ELEM_F16; }

static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static int bad_format(const char *path, sieve_ds_format f, sieve_ds_error *err) {
    if (f == SIEVE_DS_FORMAT_AUTO)
        return sieve__ds_fail(err, SIEVE_EINVAL,
                              "%s: cannot tell the format from the file name; expected .fvecs, "
                              ".ivecs, .bvecs, .fbin, .ibin, .u8bin, .i8bin, .u64bin or .npy",
                              path);
    return sieve__ds_fail(err, SIEVE_EINVAL,
                          "%s: %s is not a dense matrix format; expected fvecs, ivecs, bvecs, "
                          "fbin, ibin, u8bin, i8bin, u64bin or npy",
                          path, sieve_ds_format_name(f) ? sieve_ds_format_name(f) : "(unknown)");
}

/* Header checks of the fvecs family: first row's dimension, whole rows, last row's prefix. */
static int open_prefixed(sieve_ds_reader *r, uint64_t size, sieve_ds_error *err) {
    const char *path = r->path;
    sieve_ds_info *in = &r->info;
    in->data_offset = 0;
    if (size == 0) { /* an empty file: no rows, dimension unknown */
        in->count = 0;
        in->dim = 0;
        in->row_bytes = 0;
        return 0;
    }
    if (size < 4)
        return sieve__ds_fail(err, SIEVE_ECORRUPT,
                              "%s: file has %llu bytes; expected at least 4 (the first row's "
                              "int32 dimension)",
                              path, (unsigned long long)size);
    unsigned char b[4];
    int rc = sieve__ds_pread_full(r->fd, path, b, 4, 0, "the first row's dimension", err);
    if (rc) return rc;
    int32_t d = (int32_t)rd32(b);
    if (d <= 0 || (uint32_t)d > SIEVE_DS_MAX_DIM)
        return sieve__ds_fail(err, SIEVE_ECORRUPT,
                              "%s: byte offset 0: first row's dimension is %d; expected 1 to %u "
                              "(is this really a .%s file?)",
                              path, d, SIEVE_DS_MAX_DIM, sieve_ds_format_name(in->format));
    in->dim = (uint32_t)d;
    in->row_bytes = 4 + (uint64_t)d * r->esize;
    if (size % in->row_bytes != 0) {
        uint64_t whole = size / in->row_bytes;
        return sieve__ds_fail(err, SIEVE_ECORRUPT,
                              "%s: file has %llu bytes, not a whole number of %llu-byte rows "
                              "(int32 dimension + %d x %s): row %llu at byte offset %llu has "
                              "only %llu bytes; was the file truncated?",
                              path, (unsigned long long)size, (unsigned long long)in->row_bytes,
                              d, sieve_ds_elem_name(in->elem), (unsigned long long)whole,
                              (unsigned long long)(whole * in->row_bytes),
                              (unsigned long long)(size - whole * in->row_bytes));
    }
    in->count = size / in->row_bytes;
    if (in->count > 1) { /* catch a wrong dimension early: the last row's prefix */
        uint64_t off = (in->count - 1) * in->row_bytes;
        rc = sieve__ds_pread_full(r->fd, path, b, 4, off, "the last row's dimension", err);
        if (rc) return rc;
        int32_t dl = (int32_t)rd32(b);
        if (dl != d)
            return sieve__ds_fail(err, SIEVE_EDIM,
                                  "%s: row %llu at byte offset %llu has dimension %d; expected "
                                  "%d (the first row's)",
                                  path, (unsigned long long)(in->count - 1),
                                  (unsigned long long)off, dl, d);
    }
    return 0;
}

static int open_bin(sieve_ds_reader *r, uint64_t size, sieve_ds_error *err) {
    const char *path = r->path;
    sieve_ds_info *in = &r->info;
    if (size < 8)
        return sieve__ds_fail(err, SIEVE_ECORRUPT,
                              "%s: file has %llu bytes; expected at least 8 (uint32 n, uint32 d "
                              "header)",
                              path, (unsigned long long)size);
    unsigned char b[8];
    int rc = sieve__ds_pread_full(r->fd, path, b, 8, 0, "the header", err);
    if (rc) return rc;
    uint64_t n = rd32(b), d = rd32(b + 4);
    if ((d == 0 && n > 0) || d > SIEVE_DS_MAX_DIM)
        return sieve__ds_fail(err, SIEVE_ECORRUPT,
                              "%s: byte offset 4: header says dimension %llu; expected 1 to %u",
                              path, (unsigned long long)d, SIEVE_DS_MAX_DIM);
    uint64_t expect = 8 + n * d * r->esize;
    if (size != expect)
        return sieve__ds_fail(err, SIEVE_ECORRUPT,
                              "%s: header says %llu x %llu (%llu bytes expected) but file has "
                              "%llu bytes%s",
                              path, (unsigned long long)n, (unsigned long long)d,
                              (unsigned long long)expect, (unsigned long long)size,
                              size < expect ? "; was it truncated?" : "");
    in->count = n;
    in->dim = (uint32_t)d;
    in->data_offset = 8;
    in->row_bytes = d * r->esize;
    return 0;
}

int sieve_ds_reader_open(const char *path, sieve_ds_format format, unsigned flags,
                         sieve_ds_reader **out, sieve_ds_error *err) {
    if (out) *out = NULL;
    if (!path || !out) return sieve__ds_fail(err, SIEVE_EINVAL, "reader: NULL path or out");
    if (format == SIEVE_DS_FORMAT_AUTO) format = sieve_ds_format_from_path(path);
    if (!sieve_ds_format_is_dense(format)) return bad_format(path, format, err);
    sieve_ds_reader *r = calloc(1, sizeof *r);
    if (!r) return sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", path);
    r->fd = -1;
    r->flags = flags;
    r->path = sieve__ds_strdup(path);
    if (!r->path) {
        free(r);
        return sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", path);
    }
    uint64_t size;
    int rc = sieve__ds_open_read(path, &r->fd, &size, err);
    if (rc) goto fail;
    r->info.format = format;
    r->info.file_bytes = size;
    r->info.elem = format_elem(format);
    r->esize = sieve_ds_elem_size(r->info.elem);
    r->prefixed = is_prefixed(format);
    if (format == SIEVE_DS_FORMAT_NPY) {
        rc = sieve__ds_npy_read_header(r->fd, path, size, &r->info, err);
        r->esize = sieve_ds_elem_size(r->info.elem);
    } else if (r->prefixed) {
        rc = open_prefixed(r, size, err);
    } else {
        rc = open_bin(r, size, err);
    }
    if (rc) goto fail;
    if (r->prefixed || r->info.elem != SIEVE_DS_ELEM_F32) {
        r->stage_cap = STAGE_BYTES > r->info.row_bytes ? STAGE_BYTES : (size_t)r->info.row_bytes;
        r->stage = malloc(r->stage_cap);
        if (!r->stage) goto nomem;
    }
    if (r->info.elem == SIEVE_DS_ELEM_F16) {
        r->f16 = malloc(65536 * sizeof(float));
        if (!r->f16) goto nomem;
        for (uint32_t h = 0; h < 65536; h++) r->f16[h] = sieve_ds_f16_to_f32((uint16_t)h);
    }
    *out = r;
    return 0;
nomem:
    rc = sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", path);
fail:
    sieve_ds_reader_close(r);
    return rc;
}

void sieve_ds_reader_info(const sieve_ds_reader *r, sieve_ds_info *info) { *info = r->info; }

uint64_t sieve_ds_reader_tell(const sieve_ds_reader *r) { return r->pos; }

int sieve_ds_reader_seek(sieve_ds_reader *r, uint64_t row, sieve_ds_error *err) {
    if (!r) return sieve__ds_fail(err, SIEVE_EINVAL, "seek: NULL reader");
    if (row > r->info.count)
        return sieve__ds_fail(err, SIEVE_ERANGE,
                              "%s: cannot seek to row %llu; the file has %llu rows", r->path,
                              (unsigned long long)row, (unsigned long long)r->info.count);
    r->pos = row;
    r->advised = 0; /* re-advise from the new position */
    return 0;
}

void sieve_ds_reader_close(sieve_ds_reader *r) {
    if (!r) return;
    if (r->fd >= 0) close(r->fd);
    free(r->path);
    free(r->stage);
    free(r->f16);
    free(r);
}

/* Asks the kernel to start reading ahead of [off, off + len) now, so the disk works while
 * the caller processes this chunk (an ingest inserting it, say). Each byte is advised at most
 * once: the advice goes out in PREFETCH_BYTES steps, tracked in r->advised. Advisory only. */
static void prefetch_next(sieve_ds_reader *r, uint64_t off, uint64_t len) {
#if defined(POSIX_FADV_WILLNEED)
    uint64_t need = off + len + PREFETCH_BYTES / 2, end = r->info.file_bytes;
    if (r->advised < off + len) r->advised = off + len; /* after a seek */
    if (r->advised >= need || r->advised >= end) return;
    uint64_t to = r->advised + PREFETCH_BYTES < end ? r->advised + PREFETCH_BYTES : end;
    (void)posix_fadvise(r->fd, (off_t)r->advised, (off_t)(to - r->advised), POSIX_FADV_WILLNEED);
    r->advised = to;
#else
    (void)r;
    (void)off;
    (void)len;
#endif
}

/* Byte offset of element j of row `row`. */
static uint64_t elem_offset(const sieve_ds_reader *r, uint64_t row, uint32_t j) {
    return r->info.data_offset + row * r->info.row_bytes + (r->prefixed ? 4u : 0u) +
           (uint64_t)j * r->esize;
}

static int nonfinite_error(const sieve_ds_reader *r, uint64_t row, uint32_t j, float v,
                           sieve_ds_error *err) {
    return sieve__ds_fail(err, SIEVE_ENONFINITE,
                          "%s: row %llu, element %u (byte offset %llu) is %s; expected finite "
                          "values",
                          r->path, (unsigned long long)row, j,
                          (unsigned long long)elem_offset(r, row, j),
                          isnan(v) ? "NaN" : v > 0 ? "+infinity" : "-infinity");
}

/* Checks row prefixes of n staged rows starting at file row `row0`; returns the index of the
 * first bad row (n if all good) and fills err. */
static size_t check_prefixes(const sieve_ds_reader *r, const unsigned char *s, size_t n,
                             uint64_t row0, int *rc, sieve_ds_error *err) {
    for (size_t i = 0; i < n; i++) {
        int32_t d = (int32_t)rd32(s + i * r->info.row_bytes);
        if (d != (int32_t)r->info.dim) {
            *rc = sieve__ds_fail(err, SIEVE_EDIM,
                                 "%s: row %llu at byte offset %llu has dimension %d; expected "
                                 "%u (the first row's)",
                                 r->path, (unsigned long long)(row0 + i),
                                 (unsigned long long)(r->info.data_offset +
                                                      (row0 + i) * r->info.row_bytes),
                                 d, r->info.dim);
            return i;
        }
    }
    return n;
}

static void to_f32(const sieve_ds_reader *r, const unsigned char *src, float *dst, size_t n) {
    switch (r->info.elem) {
    case SIEVE_DS_ELEM_F32: memcpy(dst, src, n * 4); break;
    case SIEVE_DS_ELEM_F16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = r->f16[h];
        }
        break;
    case SIEVE_DS_ELEM_U8:
        for (size_t i = 0; i < n; i++) dst[i] = (float)src[i];
        break;
    case SIEVE_DS_ELEM_I8:
        for (size_t i = 0; i < n; i++) dst[i] = (float)(int8_t)src[i];
        break;
    case SIEVE_DS_ELEM_I32:
        for (size_t i = 0; i < n; i++) {
            int32_t v;
            memcpy(&v, src + 4 * i, 4);
            dst[i] = (float)v;
        }
        break;
    case SIEVE_DS_ELEM_U32:
        for (size_t i = 0; i < n; i++) {
            uint32_t v;
            memcpy(&v, src + 4 * i, 4);
            dst[i] = (float)v;
        }
        break;
    case SIEVE_DS_ELEM_I64:
        for (size_t i = 0; i < n; i++) {
            int64_t v;
            memcpy(&v, src + 8 * i, 8);
            dst[i] = (float)v;
        }
        break;
    case SIEVE_DS_ELEM_U64:
        for (size_t i = 0; i < n; i++) {
            uint64_t v;
            memcpy(&v, src + 8 * i, 8);
            dst[i] = (float)v;
        }
        break;
    default: break;
    }
}

/* Converts n integers to uint64; returns the index of the first negative value or n. */
static size_t to_u64(const sieve_ds_reader *r, const unsigned char *src, uint64_t *dst, size_t n,
                     int64_t *neg) {
    for (size_t i = 0; i < n; i++) {
        int64_t v = 0;
        switch (r->info.elem) {
        case SIEVE_DS_ELEM_U8: dst[i] = src[i]; continue;
        case SIEVE_DS_ELEM_I8: v = (int8_t)src[i]; break;
        case SIEVE_DS_ELEM_I32: {
            int32_t x;
            memcpy(&x, src + 4 * i, 4);
            v = x;
            break;
        }
        case SIEVE_DS_ELEM_U32: {
            uint32_t x;
            memcpy(&x, src + 4 * i, 4);
            dst[i] = x;
            continue;
        }
        case SIEVE_DS_ELEM_I64: memcpy(&v, src + 8 * i, 8); break;
        case SIEVE_DS_ELEM_U64: memcpy(&dst[i], src + 8 * i, 8); continue;
        default: break;
        }
        if (v < 0) {
            *neg = v;
            return i;
        }
        dst[i] = (uint64_t)v;
    }
    return n;
}

/* Shared body of read_f32 / read_u64. */
static int read_rows(sieve_ds_reader *r, size_t max_rows, float *outf, uint64_t *outu,
                     size_t *nread, sieve_ds_error *err) {
    if (nread) *nread = 0;
    if (!r || !nread || (!outf && !outu))
        return sieve__ds_fail(err, SIEVE_EINVAL, "read: NULL reader, output or count");
    if (outu && is_float(r->info.elem))
        return sieve__ds_fail(err, SIEVE_ENOTSUP,
                              "%s: file holds %s values; expected an integer file (ids or "
                              "ground truth)",
                              r->path, sieve_ds_elem_name(r->info.elem));
    uint64_t left = r->info.count - r->pos;
    size_t want = max_rows < left ? max_rows : (size_t)left;
    if (want == 0) return 0;
    const uint32_t dim = r->info.dim;
    const int check = outf && is_float(r->info.elem) && !(r->flags & SIEVE_DS_ALLOW_NONFINITE);

    /* Fast path: the file's rows are exactly the output's layout. Read in pieces of about
     * 1 MiB and scan each for NaN/Inf while it is still in the core's cache. */
    if (!r->prefixed && ((outf && r->info.elem == SIEVE_DS_ELEM_F32) ||
                         (outu && r->info.elem == SIEVE_DS_ELEM_U64))) {
        unsigned char *dst = outf ? (unsigned char *)outf : (unsigned char *)outu;
        size_t piece = PIECE_BYTES / r->info.row_bytes;
        if (piece == 0) piece = 1;
        size_t done = 0;
        while (done < want) {
            size_t n = want - done < piece ? want - done : piece;
            const uint64_t off = r->info.data_offset + r->pos * r->info.row_bytes;
            int rc = sieve__ds_pread_full(r->fd, r->path, dst + done * r->info.row_bytes,
                                          n * r->info.row_bytes, off, "row data", err);
            if (rc) {
                *nread = done;
                return rc;
            }
            prefetch_next(r, off, n * r->info.row_bytes);
            if (check) {
                const float *f = outf + done * (size_t)dim;
                size_t bad = sieve__ds_find_nonfinite(f, n * dim);
                if (bad < n * dim) {
                    size_t row = bad / dim;
                    done += row;
                    r->pos += row;
                    *nread = done;
                    return nonfinite_error(r, r->pos, (uint32_t)(bad % dim), f[bad], err);
                }
            }
            done += n;
            r->pos += n;
        }
        *nread = done;
        return 0;
    }

    const size_t per = r->stage_cap / r->info.row_bytes;
    const size_t skip = r->prefixed ? 4 : 0;
    size_t done = 0;
    while (done < want) {
        size_t n = want - done < per ? want - done : per;
        const uint64_t off = r->info.data_offset + r->pos * r->info.row_bytes;
        int rc = sieve__ds_pread_full(r->fd, r->path, r->stage, n * r->info.row_bytes, off,
                                      "row data", err);
        if (rc) {
            *nread = done;
            return rc;
        }
        prefetch_next(r, off, n * r->info.row_bytes);
        size_t good = n;
        rc = 0;
        if (r->prefixed) good = check_prefixes(r, r->stage, n, r->pos, &rc, err);
        for (size_t i = 0; i < good; i++) {
            const unsigned char *src = r->stage + i * r->info.row_bytes + skip;
            if (outf) {
                float *dst = outf + (done + i) * (size_t)dim;
                to_f32(r, src, dst, dim);
                if (check) {
                    size_t bad = sieve__ds_find_nonfinite(dst, dim);
                    if (bad < dim) {
                        done += i;
                        r->pos += i;
                        *nread = done;
                        return nonfinite_error(r, r->pos, (uint32_t)bad, dst[bad], err);
                    }
                }
            } else {
                int64_t neg = 0;
                size_t bad = to_u64(r, src, outu + (done + i) * (size_t)dim, dim, &neg);
                if (bad < dim) {
                    done += i;
                    r->pos += i;
                    *nread = done;
                    return sieve__ds_fail(err, SIEVE_ERANGE,
                                          "%s: row %llu, element %zu (byte offset %llu) is "
                                          "%lld; expected a non-negative integer",
                                          r->path, (unsigned long long)r->pos, bad,
                                          (unsigned long long)elem_offset(r, r->pos,
                                                                          (uint32_t)bad),
                                          (long long)neg);
                }
            }
        }
        done += good;
        r->pos += good;
        if (rc) {
            *nread = done;
            return rc;
        }
    }
    *nread = done;
    return 0;
}

int sieve_ds_reader_read_f32(sieve_ds_reader *r, size_t max_rows, float *out, size_t *nread,
                             sieve_ds_error *err) {
    if (!out) {
        if (nread) *nread = 0;
        return sieve__ds_fail(err, SIEVE_EINVAL, "read: NULL output");
    }
    return read_rows(r, max_rows, out, NULL, nread, err);
}

int sieve_ds_reader_read_u64(sieve_ds_reader *r, size_t max_rows, uint64_t *out,
                             size_t *nread, sieve_ds_error *err) {
    if (!out) {
        if (nread) *nread = 0;
        return sieve__ds_fail(err, SIEVE_EINVAL, "read: NULL output");
    }
    return read_rows(r, max_rows, NULL, out, nread, err);
}

/* ------------------------------------------------------------ writers */

struct sieve_ds_writer {
    sieve__ds_out out;
    sieve_ds_format format;
    sieve_ds_elem elem;
    size_t esize;
    uint32_t dim;
    unsigned flags;
    uint64_t count;
    int prefixed;
    unsigned char *stage;
    size_t stage_cap;
};

static int elem_allowed(sieve_ds_format f, sieve_ds_elem e) {
    if (f == SIEVE_DS_FORMAT_NPY) return sieve_ds_elem_size(e) != 0;
    return e == format_elem(f);
}

int sieve_ds_writer_open(const char *path, sieve_ds_format format, sieve_ds_elem elem,
                         uint32_t dim, unsigned flags, sieve_ds_writer **out,
                         sieve_ds_error *err) {
    if (out) *out = NULL;
    if (!path || !out) return sieve__ds_fail(err, SIEVE_EINVAL, "writer: NULL path or out");
    if (format == SIEVE_DS_FORMAT_AUTO) format = sieve_ds_format_from_path(path);
    if (!sieve_ds_format_is_dense(format)) return bad_format(path, format, err);
    if (elem == SIEVE_DS_ELEM_AUTO) elem = format_elem(format);
    if (!elem_allowed(format, elem))
        return sieve__ds_fail(err, SIEVE_EINVAL, "%s: a .%s file cannot hold %s values; expected %s",
                              path, sieve_ds_format_name(format),
                              sieve_ds_elem_name(elem) ? sieve_ds_elem_name(elem) : "unknown",
                              format == SIEVE_DS_FORMAT_NPY
                                  ? "a NumPy element type"
                                  : sieve_ds_elem_name(format_elem(format)));
    if (dim == 0 || dim > SIEVE_DS_MAX_DIM)
        return sieve__ds_fail(err, SIEVE_EINVAL, "%s: dimension %u; expected 1 to %u", path, dim,
                              SIEVE_DS_MAX_DIM);
    sieve_ds_writer *w = calloc(1, sizeof *w);
    if (!w) return sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", path);
    w->format = format;
    w->elem = elem;
    w->esize = sieve_ds_elem_size(elem);
    w->dim = dim;
    w->flags = flags;
    w->prefixed = is_prefixed(format);
    size_t row_bytes = (w->prefixed ? 4 : 0) + (size_t)dim * w->esize;
    w->stage_cap = STAGE_BYTES > row_bytes ? STAGE_BYTES : row_bytes;
    w->stage = malloc(w->stage_cap);
    if (!w->stage) {
        free(w);
        return sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", path);
    }
    int rc = sieve__ds_out_open(&w->out, path, err);
    if (rc) {
        free(w->stage);
        free(w);
        return rc;
    }
    /* Placeholder header; the real one (with the count) is written at close. */
    if (format == SIEVE_DS_FORMAT_NPY) {
        char h[SIEVE__DS_NPY_HEADER_BYTES];
        sieve__ds_npy_make_header(h, elem, 0, dim);
        rc = sieve__ds_out_write(&w->out, h, sizeof h, err);
    } else if (!w->prefixed) {
        unsigned char h[8] = {0};
        rc = sieve__ds_out_write(&w->out, h, sizeof h, err);
    }
    if (rc) {
        sieve_ds_writer_abort(w);
        return rc;
    }
    *out = w;
    return 0;
}

uint64_t sieve_ds_writer_count(const sieve_ds_writer *w) { return w ? w->count : 0; }

/* Value limits of integer element types, as doubles and as integers. */
static void int_limits(sieve_ds_elem e, double *lo, double *hi, uint64_t *umax) {
    switch (e) {
    case SIEVE_DS_ELEM_U8: *lo = 0; *hi = 255; *umax = 255; break;
    case SIEVE_DS_ELEM_I8: *lo = -128; *hi = 127; *umax = 127; break;
    case SIEVE_DS_ELEM_I32: *lo = -2147483648.0; *hi = 2147483647.0; *umax = INT32_MAX; break;
    case SIEVE_DS_ELEM_U32: *lo = 0; *hi = 4294967295.0; *umax = UINT32_MAX; break;
    case SIEVE_DS_ELEM_I64:
        *lo = -9223372036854775808.0;
        *hi = 9223372036854775807.0;
        *umax = INT64_MAX;
        break;
    default: *lo = 0; *hi = 18446744073709551615.0; *umax = UINT64_MAX; break;
    }
}

static int check_count(sieve_ds_writer *w, size_t n, sieve_ds_error *err) {
    if (!w->prefixed && w->format != SIEVE_DS_FORMAT_NPY && w->count + n > UINT32_MAX)
        return sieve__ds_fail(err, SIEVE_ETOOBIG,
                              "%s: a .%s file holds at most 4294967295 rows (32-bit count); "
                              "%llu + %zu rows requested",
                              w->out.path, sieve_ds_format_name(w->format),
                              (unsigned long long)w->count, n);
    return 0;
}

/* Stores one value of element type e at dst (value already validated). */
static void put_elem(sieve_ds_elem e, unsigned char *dst, double v, uint64_t u, int from_u) {
    switch (e) {
    case SIEVE_DS_ELEM_F32: {
        float f = (float)v;
        memcpy(dst, &f, 4);
        break;
    }
    case SIEVE_DS_ELEM_F16: {
        uint16_t h = sieve_ds_f32_to_f16((float)v);
        memcpy(dst, &h, 2);
        break;
    }
    case SIEVE_DS_ELEM_U8: dst[0] = (unsigned char)(from_u ? u : (uint64_t)v); break;
    case SIEVE_DS_ELEM_I8: {
        int8_t x = from_u ? (int8_t)u : (int8_t)v;
        memcpy(dst, &x, 1);
        break;
    }
    case SIEVE_DS_ELEM_I32: {
        int32_t x = from_u ? (int32_t)u : (int32_t)v;
        memcpy(dst, &x, 4);
        break;
    }
    case SIEVE_DS_ELEM_U32: {
        uint32_t x = from_u ? (uint32_t)u : (uint32_t)v;
        memcpy(dst, &x, 4);
        break;
    }
    case SIEVE_DS_ELEM_I64: {
        int64_t x = from_u ? (int64_t)u : (int64_t)v;
        memcpy(dst, &x, 8);
        break;
    }
    case SIEVE_DS_ELEM_U64: {
        uint64_t x = from_u ? u : (uint64_t)v;
        memcpy(dst, &x, 8);
        break;
    }
    default: break;
    }
}

/* Converts and writes n validated rows through the stage buffer. */
static int write_staged(sieve_ds_writer *w, const float *fr, const uint64_t *ur, size_t n,
                        sieve_ds_error *err) {
    const size_t row_bytes = (w->prefixed ? 4 : 0) + (size_t)w->dim * w->esize;
    const size_t per = w->stage_cap / row_bytes;
    size_t done = 0;
    while (done < n) {
        size_t m = n - done < per ? n - done : per;
        for (size_t i = 0; i < m; i++) {
            unsigned char *dst = w->stage + i * row_bytes;
            if (w->prefixed) {
                int32_t d = (int32_t)w->dim;
                memcpy(dst, &d, 4);
                dst += 4;
            }
            size_t base = (done + i) * (size_t)w->dim;
            for (uint32_t j = 0; j < w->dim; j++) {
                if (fr) put_elem(w->elem, dst + j * w->esize, fr[base + j], 0, 0);
                else put_elem(w->elem, dst + j * w->esize, 0, ur[base + j], 1);
            }
        }
        int rc = sieve__ds_out_write(&w->out, w->stage, m * row_bytes, err);
        if (rc) return rc;
        done += m;
    }
    return 0;
}

int sieve_ds_writer_write_f32(sieve_ds_writer *w, const float *rows, size_t n,
                              sieve_ds_error *err) {
    if (!w || (!rows && n)) return sieve__ds_fail(err, SIEVE_EINVAL, "write: NULL writer or rows");
    int rc = check_count(w, n, err);
    if (rc) return rc;
    const size_t total = n * (size_t)w->dim;
    /* Validate everything first, so a failed call writes nothing. */
    if (is_float(w->elem)) {
        if (!(w->flags & SIEVE_DS_ALLOW_NONFINITE)) {
            size_t bad = sieve__ds_find_nonfinite(rows, total);
            if (bad < total)
                return sieve__ds_fail(err, SIEVE_ENONFINITE,
                                      "%s: row %llu, element %zu is %s; expected finite values",
                                      w->out.path,
                                      (unsigned long long)(w->count + bad / w->dim),
                                      bad % w->dim, isnan(rows[bad]) ? "NaN" : "infinite");
        }
        if (w->elem == SIEVE_DS_ELEM_F16) {
            for (size_t i = 0; i < total; i++)
                if (isfinite(rows[i]) && fabsf(rows[i]) >= 65520.0f)
                    return sieve__ds_fail(err, SIEVE_ERANGE,
                                          "%s: row %llu, element %zu is %g; expected |x| <= "
                                          "65504 (the float16 range)",
                                          w->out.path,
                                          (unsigned long long)(w->count + i / w->dim),
                                          i % w->dim, (double)rows[i]);
        }
    } else {
        double lo, hi;
        uint64_t umax;
        int_limits(w->elem, &lo, &hi, &umax);
        for (size_t i = 0; i < total; i++) {
            double v = rows[i];
            if (!(v >= lo && v <= hi && v == floor(v)) ||
                (w->elem == SIEVE_DS_ELEM_I64 && v >= 9223372036854775808.0) ||
                (w->elem == SIEVE_DS_ELEM_U64 && v >= 18446744073709551616.0))
                return sieve__ds_fail(err, SIEVE_ERANGE,
                                      "%s: row %llu, element %zu is %g; expected an integer in "
                                      "[%.0f, %.0f] (%s)",
                                      w->out.path, (unsigned long long)(w->count + i / w->dim),
                                      i % w->dim, v, lo, hi, sieve_ds_elem_name(w->elem));
        }
    }
    if (w->elem == SIEVE_DS_ELEM_F32 && !w->prefixed)
        rc = sieve__ds_out_write(&w->out, rows, total * 4, err);
    else
        rc = write_staged(w, rows, NULL, n, err);
    if (rc) return rc;
    w->count += n;
    return 0;
}

int sieve_ds_writer_write_u64(sieve_ds_writer *w, const uint64_t *rows, size_t n,
                              sieve_ds_error *err) {
    if (!w || (!rows && n)) return sieve__ds_fail(err, SIEVE_EINVAL, "write: NULL writer or rows");
    if (is_float(w->elem))
        return sieve__ds_fail(err, SIEVE_ENOTSUP,
                              "%s: integer values given to a %s file; expected an integer "
                              "element type",
                              w->out.path, sieve_ds_elem_name(w->elem));
    int rc = check_count(w, n, err);
    if (rc) return rc;
    double lo, hi;
    uint64_t umax;
    int_limits(w->elem, &lo, &hi, &umax);
    const size_t total = n * (size_t)w->dim;
    for (size_t i = 0; i < total; i++)
        if (rows[i] > umax)
            return sieve__ds_fail(err, SIEVE_ERANGE,
                                  "%s: row %llu, element %zu is %llu; expected at most %llu (%s)",
                                  w->out.path, (unsigned long long)(w->count + i / w->dim),
                                  i % w->dim, (unsigned long long)rows[i],
                                  (unsigned long long)umax, sieve_ds_elem_name(w->elem));
    if (w->elem == SIEVE_DS_ELEM_U64 && !w->prefixed)
        rc = sieve__ds_out_write(&w->out, rows, total * 8, err);
    else
        rc = write_staged(w, NULL, rows, n, err);
    if (rc) return rc;
    w->count += n;
    return 0;
}

int sieve_ds_writer_close(sieve_ds_writer *w, sieve_ds_error *err) {
    if (!w) return sieve__ds_fail(err, SIEVE_EINVAL, "close: NULL writer");
    int rc = 0;
    if (w->format == SIEVE_DS_FORMAT_NPY) {
        char h[SIEVE__DS_NPY_HEADER_BYTES];
        sieve__ds_npy_make_header(h, w->elem, w->count, w->dim);
        rc = sieve__ds_out_pwrite(&w->out, h, sizeof h, 0, err);
    } else if (!w->prefixed) {
        uint32_t h[2] = {(uint32_t)w->count, w->dim};
        rc = sieve__ds_out_pwrite(&w->out, h, sizeof h, 0, err);
    }
    if (rc) sieve__ds_out_abort(&w->out);
    else rc = sieve__ds_out_commit(&w->out, err);
    free(w->stage);
    free(w);
    return rc;
}

void sieve_ds_writer_abort(sieve_ds_writer *w) {
    if (!w) return;
    sieve__ds_out_abort(&w->out);
    free(w->stage);
    free(w);
}

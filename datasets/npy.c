/* npy.c: the NumPy .npy header: parsing (versions 1.0, 2.0 and 3.0) and writing (1.0).
 * Must not: read or write array data (dense.c does). Only C-order, little-endian 1-D and
 * 2-D arrays of float32, float16 and the integer types are accepted; everything else is
 * rejected with a message that says how to convert. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds_internal.h"

#define NPY_MAX_HEADER (1u << 20)

typedef struct hparse {
    const char *s;
    size_t n, i;
    uint64_t base; /* file offset of s[0] */
    const char *path;
    sieve_ds_error *err;
} hparse;

static void skip_ws(hparse *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' ||
                           p->s[p->i] == '\r'))
        p->i++;
}

static int expected(hparse *p, const char *what) {
    char found[16];
    if (p->i >= p->n) snprintf(found, sizeof found, "the end");
    else snprintf(found, sizeof found, "'%c'", p->s[p->i]);
    return sieve__ds_fail(p->err, SIEVE_EPARSE,
                          "%s: npy header dict at byte offset %llu: expected %s, found %s",
                          p->path, (unsigned long long)(p->base + p->i), what, found);
}

/* Parses a quoted Python string into out (cap bytes). */
static int parse_str(hparse *p, char *out, size_t cap) {
    skip_ws(p);
    if (p->i >= p->n || (p->s[p->i] != '\'' && p->s[p->i] != '"')) return expected(p, "a quoted string");
    char q = p->s[p->i++];
    size_t o = 0;
    while (p->i < p->n && p->s[p->i] != q) {
        if (o + 1 >= cap) return expected(p, "a shorter string");
        out[o++] = p->s[p->i++];
    }
    if (p->i >= p->n) return expected(p, "a closing quote");
    p->i++;
    out[o] = 0;
    return 0;
}

static int parse_bool(hparse *p, int *out) {
    skip_ws(p);
    if (p->n - p->i >= 4 && !memcmp(p->s + p->i, "True", 4)) {
        p->i += 4;
        *out = 1;
        return 0;
    }
    if (p->n - p->i >= 5 && !memcmp(p->s + p->i, "False", 5)) {
        p->i += 5;
        *out = 0;
        return 0;
    }
    return expected(p, "True or False");
}

/* Parses "(a, b, ...)" with an optional trailing comma; up to 8 entries. */
static int parse_shape(hparse *p, uint64_t *dims, int *ndim) {
    skip_ws(p);
    if (p->i >= p->n || p->s[p->i] != '(') return expected(p, "'(' starting the shape tuple");
    p->i++;
    *ndim = 0;
    for (;;) {
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ')') {
            p->i++;
            return 0;
        }
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
            return expected(p, "a non-negative integer in the shape");
        uint64_t v = 0;
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
            uint64_t d = (uint64_t)(p->s[p->i] - '0');
            if (v > (UINT64_MAX - d) / 10) return expected(p, "a shape entry below 2^64");
            v = v * 10 + d;
            p->i++;
        }
        if (p->i < p->n && p->s[p->i] == 'L') p->i++; /* Python 2 long suffix */
        if (*ndim >= 8) return expected(p, "at most 8 dimensions");
        dims[(*ndim)++] = v;
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == ')') {
            p->i++;
            return 0;
        }
        return expected(p, "',' or ')' in the shape");
    }
}

/* Maps a descr string to an element type; sets *code/message on failure. */
static int descr_elem(const char *path, const char *d, sieve_ds_elem *e, sieve_ds_error *err) {
    char order = '=';
    const char *t = d;
    if (*t == '<' || *t == '>' || *t == '|' || *t == '=') order = *t++;
    static const struct {
        const char *code;
        sieve_ds_elem e;
    } map[] = {{"f4", SIEVE_DS_ELEM_F32}, {"f2", SIEVE_DS_ELEM_F16}, {"u1", SIEVE_DS_ELEM_U8},
               {"i1", SIEVE_DS_ELEM_I8},  {"i4", SIEVE_DS_ELEM_I32}, {"u4", SIEVE_DS_ELEM_U32},
               {"i8", SIEVE_DS_ELEM_I64}, {"u8", SIEVE_DS_ELEM_U64}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (strcmp(t, map[i].code) != 0) continue;
        if (order == '>' && sieve_ds_elem_size(map[i].e) > 1)
            return sieve__ds_fail(err, SIEVE_ENOTSUP,
                                  "%s: big-endian array (dtype '%s'); expected little-endian: "
                                  "save arr.astype('<%s') instead",
                                  path, d, t);
        *e = map[i].e;
        return 0;
    }
    return sieve__ds_fail(err, SIEVE_ENOTSUP,
                          "%s: dtype '%s' is not supported; expected float32 ('<f4'), float16 "
                          "('<f2') or an integer type ('<u8', '<i8', '<i4', '<u4', '|u1', "
                          "'|i1')",
                          path, d);
}

int sieve__ds_npy_read_header(int fd, const char *path, uint64_t size, sieve_ds_info *info,
                              sieve_ds_error *err) {
    unsigned char pre[12];
    if (size < 10)
        return sieve__ds_fail(err, SIEVE_ECORRUPT,
                              "%s: file has %llu bytes; expected at least 10 (npy magic, "
                              "version and header length)",
                              path, (unsigned long long)size);
    size_t pre_n = size >= 12 ? 12 : 10;
    int rc = sieve__ds_pread_full(fd, path, pre, pre_n, 0, "the npy preamble", err);
    if (rc) return rc;
    if (memcmp(pre, "\x93NUMPY", 6) != 0)
        return sieve__ds_fail(err, SIEVE_ECORRUPT,
                              "%s: byte offset 0: no NumPy magic (\\x93NUMPY); expected an "
                              ".npy file",
                              path);
    unsigned major = pre[6], minor = pre[7];
    uint64_t hlen, hstart;
    if (major == 1) {
        hlen = (uint64_t)pre[8] | ((uint64_t)pre[9] << 8);
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (pre_n < 12)
            return sieve__ds_fail(err, SIEVE_ECORRUPT,
                                  "%s: file has %llu bytes; expected at least 12 (npy %u.%u "
                                  "preamble)",
                                  path, (unsigned long long)size, major, minor);
        hlen = (uint64_t)pre[8] | ((uint64_t)pre[9] << 8) | ((uint64_t)pre[10] << 16) |
               ((uint64_t)pre[11] << 24);
        hstart = 12;
    } else {
        return sieve__ds_fail(err, SIEVE_ENOTSUP,
                              "%s: byte offset 6: npy format version %u.%u; expected 1.0, 2.0 "
                              "or 3.0",
                              path, major, minor);
    }
    if (hlen > NPY_MAX_HEADER || hstart + hlen > size)
        return sieve__ds_fail(err, SIEVE_ECORRUPT,
                              "%s: byte offset 8: header length %llu runs past the end of the "
                              "file (%llu bytes); expected a header ending by byte %llu",
                              path, (unsigned long long)hlen, (unsigned long long)size,
                              (unsigned long long)size);
    char *h = malloc((size_t)hlen + 1);
    if (!h) return sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", path);
    rc = sieve__ds_pread_full(fd, path, h, (size_t)hlen, hstart, "the npy header", err);
    if (rc) {
        free(h);
        return rc;
    }
    h[hlen] = 0;

    hparse p = {h, (size_t)hlen, 0, hstart, path, err};
    char descr[32] = {0};
    int fortran = 0, have_descr = 0, have_order = 0, have_shape = 0, ndim = 0;
    uint64_t dims[8] = {0};
    skip_ws(&p);
    if (p.i >= p.n || h[p.i] != '{') {
        rc = expected(&p, "'{' starting the header dict");
        goto out;
    }
    p.i++;
    for (;;) {
        skip_ws(&p);
        if (p.i < p.n && h[p.i] == '}') break;
        char key[32];
        if ((rc = parse_str(&p, key, sizeof key))) goto out;
        skip_ws(&p);
        if (p.i >= p.n || h[p.i] != ':') {
            rc = expected(&p, "':' after a key");
            goto out;
        }
        p.i++;
        if (!strcmp(key, "descr")) {
            skip_ws(&p);
            if (p.i < p.n && h[p.i] == '[') {
                rc = sieve__ds_fail(err, SIEVE_ENOTSUP,
                                    "%s: structured dtype (a field list); expected a plain "
                                    "float32, float16 or integer array",
                                    path);
                goto out;
            }
            if ((rc = parse_str(&p, descr, sizeof descr))) goto out;
            have_descr = 1;
        } else if (!strcmp(key, "fortran_order")) {
            if ((rc = parse_bool(&p, &fortran))) goto out;
            have_order = 1;
        } else if (!strcmp(key, "shape")) {
            if ((rc = parse_shape(&p, dims, &ndim))) goto out;
            have_shape = 1;
        } else {
            rc = sieve__ds_fail(err, SIEVE_EPARSE,
                                "%s: npy header has unknown key '%s'; expected 'descr', "
                                "'fortran_order' and 'shape'",
                                path, key);
            goto out;
        }
        skip_ws(&p);
        if (p.i < p.n && h[p.i] == ',') {
            p.i++;
            continue;
        }
        skip_ws(&p);
        if (p.i < p.n && h[p.i] == '}') break;
        rc = expected(&p, "',' or '}' in the header dict");
        goto out;
    }
    if (!have_descr || !have_order || !have_shape) {
        rc = sieve__ds_fail(err, SIEVE_EPARSE,
                            "%s: npy header lacks '%s'; expected 'descr', 'fortran_order' and "
                            "'shape'",
                            path, !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
        goto out;
    }
    sieve_ds_elem elem = SIEVE_DS_ELEM_AUTO;
    if ((rc = descr_elem(path, descr, &elem, err))) goto out;
    if (ndim == 0 || ndim > 2) {
        rc = sieve__ds_fail(err, SIEVE_ENOTSUP,
                            "%s: array has %d dimensions; expected a 2-D (n, d) matrix or a "
                            "1-D (n,) array",
                            path, ndim);
        goto out;
    }
    if (fortran && ndim == 2 && dims[0] > 1 && dims[1] > 1) {
        rc = sieve__ds_fail(err, SIEVE_ENOTSUP,
                            "%s: array is in Fortran (column-major) order; expected C order: "
                            "save np.ascontiguousarray(arr) instead",
                            path);
        goto out;
    }
    uint64_t n = dims[0], d = ndim == 2 ? dims[1] : 1;
    if (d == 0 || d > SIEVE_DS_MAX_DIM) {
        rc = sieve__ds_fail(err, SIEVE_ENOTSUP,
                            "%s: rows of %llu values; expected 1 to %u values per row", path,
                            (unsigned long long)d, SIEVE_DS_MAX_DIM);
        goto out;
    }
    uint64_t esz = sieve_ds_elem_size(elem);
    uint64_t data = hstart + hlen;
    if (n > (UINT64_MAX - data) / (d * esz) || data + n * d * esz != size) {
        char shape[64];
        if (ndim == 2) snprintf(shape, sizeof shape, "(%llu, %llu)", (unsigned long long)n,
                                (unsigned long long)d);
        else snprintf(shape, sizeof shape, "(%llu,)", (unsigned long long)n);
        int over = n > (UINT64_MAX - data) / (d * esz);
        rc = sieve__ds_fail(err, SIEVE_ECORRUPT,
                            "%s: header says shape %s of %s (%s%llu bytes expected: %llu of "
                            "header, then data) but file has %llu bytes",
                            path, shape, sieve_ds_elem_name(elem), over ? "more than " : "",
                            over ? (unsigned long long)UINT64_MAX
                                 : (unsigned long long)(data + n * d * esz),
                            (unsigned long long)data, (unsigned long long)size);
        goto out;
    }
    info->format = SIEVE_DS_FORMAT_NPY;
    info->elem = elem;
    info->count = n;
    info->dim = (uint32_t)d;
    info->data_offset = data;
    info->row_bytes = d * esz;
    info->file_bytes = size;
    rc = 0;
out:
    free(h);
    return rc;
}

static const char *npy_descr(sieve_ds_elem e) {
    switch (e) {
    case SIEVE_DS_ELEM_F32: return "<f4";
    case SIEVE_DS_ELEM_F16: return "<f2";
    case SIEVE_DS_ELEM_U8: return "|u1";
    case SIEVE_DS_ELEM_I8: return "|i1";
    case SIEVE_DS_ELEM_I32: return "<i4";
    case SIEVE_DS_ELEM_U32: return "<u4";
    case SIEVE_DS_ELEM_I64: return "<i8";
    case SIEVE_DS_ELEM_U64: return "<u8";
    default: return NULL;
    }
}

int sieve__ds_npy_make_header(char out[SIEVE__DS_NPY_HEADER_BYTES], sieve_ds_elem elem,
                              uint64_t count, uint32_t dim) {
    const char *descr = npy_descr(elem);
    if (!descr) return SIEVE_EINVAL;
    char dict[SIEVE__DS_NPY_HEADER_BYTES];
    int n;
    if (dim == 1)
        n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%llu,), }",
                     descr, (unsigned long long)count);
    else
        n = snprintf(dict, sizeof dict,
                     "{'descr': '%s', 'fortran_order': False, 'shape': (%llu, %u), }", descr,
                     (unsigned long long)count, dim);
    const size_t hlen = SIEVE__DS_NPY_HEADER_BYTES - 10;
    if (n < 0 || (size_t)n + 1 > hlen) return SIEVE_EINVAL;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (char)(hlen & 0xff);
    out[9] = (char)(hlen >> 8);
    memset(out + 10, ' ', hlen);
    memcpy(out + 10, dict, (size_t)n);
    out[SIEVE__DS_NPY_HEADER_BYTES - 1] = '\n';
    return 0;
}

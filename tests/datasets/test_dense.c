/* test_dense.c: dense formats (fvecs family, .bin family, .npy): round trips of every format
 * and element type, chunked reads and seeks, and each kind of corrupt input giving the right
 * code and a message with the file name, offset and expectation. */
#include "helpers.h"

#include <math.h>
#include <stdint.h>

#include "sieve_kernels.h"

TestSuite(dense, .init = tmp_setup, .fini = tmp_teardown);

/* Writes m (n x d floats) as path/format/elem, reads it back whole and compares. */
static void roundtrip_f32(const char *name, sieve_ds_format fmt, sieve_ds_elem elem,
                          const float *m, size_t n, uint32_t d, const float *expect) {
    sieve_ds_error err = {0};
    const char *p = tpath(name);
    sieve_ds_writer *w;
    EXPECT_OK(err, sieve_ds_writer_open(p, fmt, elem, d, 0, &w, &err));
    /* in two calls, to cover appending */
    EXPECT_OK(err, sieve_ds_writer_write_f32(w, m, n / 2, &err));
    EXPECT_OK(err, sieve_ds_writer_write_f32(w, m + (n / 2) * d, n - n / 2, &err));
    EXPECT_U64(sieve_ds_writer_count(w), n);
    cr_assert(!file_exists(p), "%s exists before close; expected only the .partial file", p);
    EXPECT_OK(err, sieve_ds_writer_close(w, &err));
    cr_assert(file_exists(p), "%s missing after close", p);

    sieve_ds_reader *r;
    EXPECT_OK(err, sieve_ds_reader_open(p, SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    sieve_ds_info in;
    sieve_ds_reader_info(r, &in);
    EXPECT_U64(in.count, n);
    EXPECT_U64(in.dim, d);
    EXPECT_U64(in.format, fmt);
    EXPECT_U64(in.elem, elem == SIEVE_DS_ELEM_AUTO ? in.elem : elem);
    EXPECT_U64(in.file_bytes, (uint64_t)file_size(p));
    float *got = calloc(n * d + 1, sizeof(float));
    size_t nr = 0;
    EXPECT_OK(err, sieve_ds_reader_read_f32(r, n + 10, got, &nr, &err));
    EXPECT_U64(nr, n);
    expect_floats_eq(got, expect ? expect : m, n * d, name);
    EXPECT_OK(err, sieve_ds_reader_read_f32(r, 5, got, &nr, &err));
    EXPECT_U64(nr, 0);
    sieve_ds_reader_close(r);
    free(got);
}

Test(dense, roundtrip_float_formats) {
    const size_t n = 37;
    const uint32_t d = 19;
    float *m = test_matrix(n, d, 1);
    roundtrip_f32("a.fvecs", SIEVE_DS_FORMAT_FVECS, SIEVE_DS_ELEM_AUTO, m, n, d, NULL);
    roundtrip_f32("a.fbin", SIEVE_DS_FORMAT_FBIN, SIEVE_DS_ELEM_AUTO, m, n, d, NULL);
    roundtrip_f32("a.npy", SIEVE_DS_FORMAT_NPY, SIEVE_DS_ELEM_F32, m, n, d, NULL);
    /* float16: exact after one rounding */
    float *h = malloc(n * d * sizeof(float));
    for (size_t i = 0; i < n * d; i++) h[i] = sieve_ds_f16_to_f32(sieve_ds_f32_to_f16(m[i]));
    roundtrip_f32("h.npy", SIEVE_DS_FORMAT_NPY, SIEVE_DS_ELEM_F16, m, n, d, h);
    roundtrip_f32("h2.npy", SIEVE_DS_FORMAT_NPY, SIEVE_DS_ELEM_F16, h, n, d, h);
    free(h);
    free(m);
}

Test(dense, roundtrip_integer_formats_as_float) {
    const size_t n = 23;
    const uint32_t d = 8;
    float *m = malloc(n * d * sizeof(float));
    for (size_t i = 0; i < n * d; i++) m[i] = (float)((i * 37) % 256);
    roundtrip_f32("a.bvecs", SIEVE_DS_FORMAT_BVECS, SIEVE_DS_ELEM_AUTO, m, n, d, NULL);
    roundtrip_f32("a.u8bin", SIEVE_DS_FORMAT_U8BIN, SIEVE_DS_ELEM_AUTO, m, n, d, NULL);
    roundtrip_f32("u8.npy", SIEVE_DS_FORMAT_NPY, SIEVE_DS_ELEM_U8, m, n, d, NULL);
    for (size_t i = 0; i < n * d; i++) m[i] = (float)((int)((i * 37) % 256) - 128);
    roundtrip_f32("a.i8bin", SIEVE_DS_FORMAT_I8BIN, SIEVE_DS_ELEM_AUTO, m, n, d, NULL);
    roundtrip_f32("i8.npy", SIEVE_DS_FORMAT_NPY, SIEVE_DS_ELEM_I8, m, n, d, NULL);
    for (size_t i = 0; i < n * d; i++) m[i] = (float)((int)(i * 7919) - 500000);
    roundtrip_f32("a.ivecs", SIEVE_DS_FORMAT_IVECS, SIEVE_DS_ELEM_AUTO, m, n, d, NULL);
    roundtrip_f32("a.ibin", SIEVE_DS_FORMAT_IBIN, SIEVE_DS_ELEM_AUTO, m, n, d, NULL);
    roundtrip_f32("i32.npy", SIEVE_DS_FORMAT_NPY, SIEVE_DS_ELEM_I32, m, n, d, NULL);
    roundtrip_f32("i64.npy", SIEVE_DS_FORMAT_NPY, SIEVE_DS_ELEM_I64, m, n, d, NULL);
    free(m);
}

/* Integer files through write_u64/read_u64, including values above 2^53 and the 1-D npy. */
static void roundtrip_u64(const char *name, sieve_ds_format fmt, sieve_ds_elem elem, uint32_t d,
                          uint64_t maxval) {
    sieve_ds_error err = {0};
    const size_t n = 41;
    uint64_t v[41 * 3];
    for (size_t i = 0; i < n * d; i++) v[i] = maxval - (uint64_t)i * 977u; /* <= maxval */
    const char *p = tpath(name);
    sieve_ds_writer *w;
    EXPECT_OK(err, sieve_ds_writer_open(p, fmt, elem, d, 0, &w, &err));
    EXPECT_OK(err, sieve_ds_writer_write_u64(w, v, n, &err));
    EXPECT_OK(err, sieve_ds_writer_close(w, &err));
    sieve_ds_reader *r;
    EXPECT_OK(err, sieve_ds_reader_open(p, SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    sieve_ds_info in;
    sieve_ds_reader_info(r, &in);
    EXPECT_U64(in.count, n);
    EXPECT_U64(in.dim, d);
    uint64_t got[41 * 3];
    size_t nr;
    EXPECT_OK(err, sieve_ds_reader_read_u64(r, n, got, &nr, &err));
    EXPECT_U64(nr, n);
    for (size_t i = 0; i < n * d; i++)
        cr_assert_eq(got[i], v[i], "%s: value %zu is %llu, expected %llu", name, i,
                     (unsigned long long)got[i], (unsigned long long)v[i]);
    sieve_ds_reader_close(r);
}

Test(dense, roundtrip_ids) {
    roundtrip_u64("ids.u64bin", SIEVE_DS_FORMAT_U64BIN, SIEVE_DS_ELEM_AUTO, 1, UINT64_MAX);
    roundtrip_u64("ids.npy", SIEVE_DS_FORMAT_NPY, SIEVE_DS_ELEM_U64, 1, UINT64_MAX);
    roundtrip_u64("ids64.npy", SIEVE_DS_FORMAT_NPY, SIEVE_DS_ELEM_I64, 1, INT64_MAX);
    roundtrip_u64("ids32.npy", SIEVE_DS_FORMAT_NPY, SIEVE_DS_ELEM_U32, 1, UINT32_MAX);
    roundtrip_u64("ids.ibin", SIEVE_DS_FORMAT_IBIN, SIEVE_DS_ELEM_AUTO, 1, INT32_MAX);
    roundtrip_u64("gt.ivecs", SIEVE_DS_FORMAT_IVECS, SIEVE_DS_ELEM_AUTO, 3, INT32_MAX);
    roundtrip_u64("gt.u64bin", SIEVE_DS_FORMAT_U64BIN, SIEVE_DS_ELEM_AUTO, 3, UINT64_MAX);
    /* a dim-1 npy is written 1-D, as numpy would save an id vector */
    FILE *f = fopen(tpath("ids.npy"), "rb");
    char h[128];
    cr_assert_eq(fread(h, 1, sizeof h, f), sizeof h);
    fclose(f);
    h[127] = 0;
    cr_assert_not_null(strstr(h + 10, "'shape': (41,)"), "header: %s", h + 10);
    cr_assert_not_null(strstr(h + 10, "'descr': '<u8'"), "header: %s", h + 10);
}

Test(dense, chunked_reads_and_seek) {
    const size_t n = 1000;
    const uint32_t d = 12;
    float *m = test_matrix(n, d, 7);
    static const struct {
        const char *name;
        sieve_ds_format f;
        sieve_ds_elem e;
    } cases[] = {{"c.fbin", SIEVE_DS_FORMAT_FBIN, SIEVE_DS_ELEM_AUTO},
                 {"c.fvecs", SIEVE_DS_FORMAT_FVECS, SIEVE_DS_ELEM_AUTO},
                 {"c.npy", SIEVE_DS_FORMAT_NPY, SIEVE_DS_ELEM_F32}};
    for (size_t c = 0; c < 3; c++) {
        sieve_ds_error err = {0};
        const char *p = tpath(cases[c].name);
        sieve_ds_writer *w;
        EXPECT_OK(err, sieve_ds_writer_open(p, cases[c].f, cases[c].e, d, 0, &w, &err));
        EXPECT_OK(err, sieve_ds_writer_write_f32(w, m, n, &err));
        EXPECT_OK(err, sieve_ds_writer_close(w, &err));
        sieve_ds_reader *r;
        EXPECT_OK(err, sieve_ds_reader_open(p, SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
        float *got = malloc(n * d * sizeof(float));
        /* chunks of 7 rows: the last chunk is short */
        size_t total = 0, nr;
        do {
            EXPECT_OK(err, sieve_ds_reader_read_f32(r, 7, got + total * d, &nr, &err));
            total += nr;
            EXPECT_U64(sieve_ds_reader_tell(r), total);
        } while (nr > 0);
        EXPECT_U64(total, n);
        expect_floats_eq(got, m, n * d, cases[c].name);
        /* seek anywhere, including the end; beyond the end is ERANGE */
        const uint64_t at[] = {0, 1, 499, 993, 999};
        for (size_t k = 0; k < 5; k++) {
            EXPECT_OK(err, sieve_ds_reader_seek(r, at[k], &err));
            EXPECT_OK(err, sieve_ds_reader_read_f32(r, 3, got, &nr, &err));
            size_t want = n - at[k] < 3 ? n - at[k] : 3;
            EXPECT_U64(nr, want);
            expect_floats_eq(got, m + at[k] * d, want * d, "after seek");
        }
        EXPECT_OK(err, sieve_ds_reader_seek(r, n, &err));
        EXPECT_OK(err, sieve_ds_reader_read_f32(r, 3, got, &nr, &err));
        EXPECT_U64(nr, 0);
        EXPECT_RC(err, SIEVE_ERANGE, sieve_ds_reader_seek(r, n + 1, &err));
        EXPECT_MSG(err, cases[c].name);
        EXPECT_MSG(err, "row 1001");
        sieve_ds_reader_close(r);
        free(got);
    }
    free(m);
}

/* ------------------------------------------------------------ corrupt .bin files */

static void write_fbin(const char *path, uint32_t n, uint32_t d, size_t data_floats) {
    size_t bytes = 8 + data_floats * 4;
    unsigned char *b = calloc(1, bytes);
    memcpy(b, &n, 4);
    memcpy(b + 4, &d, 4);
    write_file(path, b, bytes);
    free(b);
}

Test(dense, fbin_truncated_names_file_and_sizes) {
    sieve_ds_error err = {0};
    const char *p = tpath("vectors.fbin");
    write_fbin(p, 1000, 768, 1000 * 768 - 5); /* 20 bytes short */
    sieve_ds_reader *r = (sieve_ds_reader *)1;
    EXPECT_RC(err, SIEVE_ECORRUPT, sieve_ds_reader_open(p, SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    cr_assert_null(r, "reader must be NULL after a failed open");
    EXPECT_MSG(err, "vectors.fbin: header says 1000 x 768 (3072008 bytes expected) but file has "
                    "3071988 bytes");
    EXPECT_MSG(err, "truncated");
}

Test(dense, fbin_header_too_short_and_too_long) {
    sieve_ds_error err = {0};
    sieve_ds_reader *r;
    const char *p = tpath("short.fbin");
    write_file(p, "\x01\x00\x00", 3);
    EXPECT_RC(err, SIEVE_ECORRUPT, sieve_ds_reader_open(p, SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    EXPECT_MSG(err, "short.fbin: file has 3 bytes; expected at least 8");
    p = tpath("long.fbin");
    write_fbin(p, 2, 3, 7); /* one float too many */
    EXPECT_RC(err, SIEVE_ECORRUPT, sieve_ds_reader_open(p, SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    EXPECT_MSG(err, "long.fbin: header says 2 x 3 (32 bytes expected) but file has 36 bytes");
    p = tpath("bigdim.fbin");
    write_fbin(p, 1, 1u << 20, 0);
    EXPECT_RC(err, SIEVE_ECORRUPT, sieve_ds_reader_open(p, SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    EXPECT_MSG(err, "bigdim.fbin: byte offset 4: header says dimension 1048576; expected 1 to 65536");
    /* a count whose size does not fit 64 bits is still just a size mismatch */
    p = tpath("huge.u64bin");
    unsigned char h[8] = {0xff, 0xff, 0xff, 0xff, 0, 0, 1, 0};
    write_file(p, h, 8);
    EXPECT_RC(err, SIEVE_ECORRUPT, sieve_ds_reader_open(p, SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    EXPECT_MSG(err, "huge.u64bin: header says 4294967295 x 65536");
}

Test(dense, missing_file_and_unknown_format) {
    sieve_ds_error err = {0};
    sieve_ds_reader *r;
    EXPECT_RC(err, SIEVE_ENOTFOUND,
              sieve_ds_reader_open(tpath("nope.fbin"), SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    EXPECT_MSG(err, "nope.fbin: cannot open: No such file or directory");
    write_file(tpath("x.dat"), "abcdefgh", 8);
    EXPECT_RC(err, SIEVE_EINVAL,
              sieve_ds_reader_open(tpath("x.dat"), SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    EXPECT_MSG(err, "x.dat: cannot tell the format from the file name");
    EXPECT_RC(err, SIEVE_EINVAL,
              sieve_ds_reader_open(tpath("x.dat"), SIEVE_DS_FORMAT_JSONL, 0, &r, &err));
    EXPECT_MSG(err, "jsonl is not a dense matrix format");
    EXPECT_RC(err, SIEVE_EINVAL, sieve_ds_reader_open(NULL, SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
}

/* ------------------------------------------------------------ corrupt fvecs files */

static void write_fvecs_rows(const char *path, const int32_t *dims, size_t rows, size_t extra) {
    FILE *f = fopen(path, "wb");
    for (size_t i = 0; i < rows; i++) {
        fwrite(&dims[i], 4, 1, f);
        for (int32_t j = 0; j < dims[i]; j++) {
            float v = (float)(i * 100 + (size_t)j);
            fwrite(&v, 4, 1, f);
        }
    }
    for (size_t i = 0; i < extra; i++) fputc(0, f);
    fclose(f);
}

Test(dense, fvecs_partial_last_row) {
    sieve_ds_error err = {0};
    sieve_ds_reader *r;
    const char *p = tpath("base.fvecs");
    int32_t dims[3] = {4, 4, 4};
    write_fvecs_rows(p, dims, 3, 6);
    EXPECT_RC(err, SIEVE_ECORRUPT, sieve_ds_reader_open(p, SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    EXPECT_MSG(err, "base.fvecs: file has 66 bytes, not a whole number of 20-byte rows");
    EXPECT_MSG(err, "row 3 at byte offset 60 has only 6 bytes");
}

Test(dense, fvecs_dimension_changes_mid_file) {
    sieve_ds_error err = {0};
    sieve_ds_reader *r;
    const char *p = tpath("mixed.fvecs");
    /* Rows of 3, 3, 3, 2 and 4 values: 80 bytes, which divides into five 16-byte rows, so
     * the size check passes; the early check of the last row's prefix (offset 64, inside
     * the real row 4) catches it at open. */
    int32_t dims[5] = {3, 3, 3, 2, 4};
    write_fvecs_rows(p, dims, 5, 0);
    EXPECT_RC(err, SIEVE_EDIM, sieve_ds_reader_open(p, SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    EXPECT_MSG(err, "mixed.fvecs: row 4 at byte offset 64 has dimension");
    EXPECT_MSG(err, "expected 3 (the first row's)");

    /* A bad prefix in a middle row only: open passes, reading stops at that row. */
    p = tpath("middle.fvecs");
    FILE *f = fopen(p, "wb");
    for (int i = 0; i < 5; i++) {
        int32_t d = 3;
        float v[3] = {(float)i, (float)i + 0.5f, (float)i + 0.25f};
        if (i == 2) d = 7; /* a corrupt prefix in the middle */
        fwrite(&d, 4, 1, f);
        fwrite(v, 4, 3, f);
    }
    fclose(f);
    EXPECT_OK(err, sieve_ds_reader_open(p, SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    float out[15];
    size_t nr = 99;
    EXPECT_RC(err, SIEVE_EDIM, sieve_ds_reader_read_f32(r, 5, out, &nr, &err));
    EXPECT_U64(nr, 2);
    EXPECT_U64(sieve_ds_reader_tell(r), 2);
    cr_assert_eq(out[3], 1.0f, "row 1 delivered before the bad row: %g", (double)out[3]);
    EXPECT_MSG(err, "middle.fvecs: row 2 at byte offset 32 has dimension 7; expected 3");
    sieve_ds_reader_close(r);
}

Test(dense, fvecs_bad_first_dimension_and_empty) {
    sieve_ds_error err = {0};
    sieve_ds_reader *r;
    const char *p = tpath("neg.bvecs");
    int32_t d = -5;
    write_file(p, &d, 4);
    EXPECT_RC(err, SIEVE_ECORRUPT, sieve_ds_reader_open(p, SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    EXPECT_MSG(err, "neg.bvecs: byte offset 0: first row's dimension is -5; expected 1 to 65536");
    p = tpath("empty.fvecs");
    write_file(p, "", 0);
    EXPECT_OK(err, sieve_ds_reader_open(p, SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    sieve_ds_info in;
    sieve_ds_reader_info(r, &in);
    EXPECT_U64(in.count, 0);
    float x;
    size_t nr = 9;
    EXPECT_OK(err, sieve_ds_reader_read_f32(r, 1, &x, &nr, &err));
    EXPECT_U64(nr, 0);
    sieve_ds_reader_close(r);
}

/* ------------------------------------------------------------ non-finite values */

Test(dense, nonfinite_values_are_reported_with_row_and_offset) {
    sieve_ds_error err = {0};
    const uint32_t d = 4;
    float m[6 * 4];
    for (int i = 0; i < 24; i++) m[i] = (float)i;
    m[3 * 4 + 2] = NAN;
    const char *p = tpath("nan.fbin");
    sieve_ds_writer *w;
    EXPECT_OK(err, sieve_ds_writer_open(p, SIEVE_DS_FORMAT_FBIN, SIEVE_DS_ELEM_AUTO, d,
                                        SIEVE_DS_ALLOW_NONFINITE, &w, &err));
    EXPECT_OK(err, sieve_ds_writer_write_f32(w, m, 6, &err));
    EXPECT_OK(err, sieve_ds_writer_close(w, &err));
    sieve_ds_reader *r;
    EXPECT_OK(err, sieve_ds_reader_open(p, SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    float out[24];
    size_t nr;
    EXPECT_RC(err, SIEVE_ENONFINITE, sieve_ds_reader_read_f32(r, 6, out, &nr, &err));
    EXPECT_U64(nr, 3);
    EXPECT_U64(sieve_ds_reader_tell(r), 3);
    /* row 3 starts at 8 + 3*16 = 56; element 2 at 64 */
    EXPECT_MSG(err, "nan.fbin: row 3, element 2 (byte offset 64) is NaN; expected finite values");
    sieve_ds_reader_close(r);
    /* allowed on request */
    EXPECT_OK(err, sieve_ds_reader_open(p, SIEVE_DS_FORMAT_AUTO, SIEVE_DS_ALLOW_NONFINITE, &r, &err));
    EXPECT_OK(err, sieve_ds_reader_read_f32(r, 6, out, &nr, &err));
    EXPECT_U64(nr, 6);
    cr_assert(isnan(out[14]), "NaN passed through");
    sieve_ds_reader_close(r);

    /* fvecs and float16 take the staged path; infinity there too */
    m[3 * 4 + 2] = -INFINITY;
    p = tpath("inf.npy");
    EXPECT_OK(err, sieve_ds_writer_open(p, SIEVE_DS_FORMAT_NPY, SIEVE_DS_ELEM_F16, d,
                                        SIEVE_DS_ALLOW_NONFINITE, &w, &err));
    EXPECT_OK(err, sieve_ds_writer_write_f32(w, m, 6, &err));
    EXPECT_OK(err, sieve_ds_writer_close(w, &err));
    EXPECT_OK(err, sieve_ds_reader_open(p, SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    EXPECT_OK(err, sieve_ds_reader_read_f32(r, 2, out, &nr, &err));
    EXPECT_U64(nr, 2);
    EXPECT_RC(err, SIEVE_ENONFINITE, sieve_ds_reader_read_f32(r, 6, out, &nr, &err));
    EXPECT_U64(nr, 1); /* row 2 is fine, row 3 is not */
    cr_assert_eq(out[0], 8.0f, "row 2 delivered: %g", (double)out[0]);
    /* header 128 bytes, rows of 4 x 2 bytes: row 3 element 2 is at 128 + 24 + 4 */
    EXPECT_MSG(err, "inf.npy: row 3, element 2 (byte offset 156) is -infinity");
    sieve_ds_reader_close(r);
}

/* ------------------------------------------------------------ .npy headers */

/* Writes an .npy file by hand: version major.0, the dict text padded like numpy does, then
 * data_len bytes of data. */
static size_t make_npy(const char *path, int major, const char *dict, const void *data,
                       size_t data_len) {
    size_t pre = major == 1 ? 10 : 12;
    size_t hlen = strlen(dict) + 1;
    while ((pre + hlen) % 64) hlen++;
    unsigned char *b = calloc(1, pre + hlen + data_len);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    if (major == 1) {
        b[8] = (unsigned char)(hlen & 0xff);
        b[9] = (unsigned char)(hlen >> 8);
    } else {
        uint32_t h = (uint32_t)hlen;
        memcpy(b + 8, &h, 4);
    }
    memset(b + pre, ' ', hlen);
    memcpy(b + pre, dict, strlen(dict));
    b[pre + hlen - 1] = '\n';
    if (data_len) memcpy(b + pre + hlen, data, data_len);
    write_file(path, b, pre + hlen + data_len);
    free(b);
    return pre + hlen; /* the data offset */
}

Test(dense, npy_versions_and_numpy_style_headers) {
    sieve_ds_error err = {0};
    float data[6] = {1.5f, -2.0f, 3.25f, 4.0f, -0.125f, 6.0f};
    const char *dicts[] = {
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }",  /* numpy 1.x style */
        "{\"shape\": (3, 2), \"descr\": \"<f4\", \"fortran_order\": False}", /* any key order */
        "{'descr':'<f4','fortran_order':False,'shape':(3,2)}",
    };
    for (int major = 1; major <= 3; major++) {
        for (size_t k = 0; k < 3; k++) {
            const char *p = tpath("v.npy");
            size_t off = make_npy(p, major, dicts[k], data, sizeof data);
            sieve_ds_reader *r;
            EXPECT_OK(err, sieve_ds_reader_open(p, SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
            sieve_ds_info in;
            sieve_ds_reader_info(r, &in);
            EXPECT_U64(in.count, 3);
            EXPECT_U64(in.dim, 2);
            EXPECT_U64(in.data_offset, off);
            float out[6];
            size_t nr;
            EXPECT_OK(err, sieve_ds_reader_read_f32(r, 3, out, &nr, &err));
            EXPECT_U64(nr, 3);
            expect_floats_eq(out, data, 6, dicts[k]);
            sieve_ds_reader_close(r);
        }
    }
    /* float16 and a 1-D int64 id vector */
    uint16_t h[4] = {0x3c00, 0xc000, 0x3555, 0x7bff}; /* 1, -2, 0.333, 65504 */
    make_npy(tpath("h.npy"), 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (2, 2), }", h,
             sizeof h);
    sieve_ds_reader *r;
    EXPECT_OK(err, sieve_ds_reader_open(tpath("h.npy"), SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    float out[4];
    size_t nr;
    EXPECT_OK(err, sieve_ds_reader_read_f32(r, 2, out, &nr, &err));
    float want[4] = {1.0f, -2.0f, 0.33325195f, 65504.0f};
    expect_floats_eq(out, want, 4, "float16 npy");
    sieve_ds_reader_close(r);
    int64_t ids[3] = {7, 0, 9000000000};
    make_npy(tpath("ids.npy"), 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", ids,
             sizeof ids);
    EXPECT_OK(err, sieve_ds_reader_open(tpath("ids.npy"), SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    sieve_ds_info in;
    sieve_ds_reader_info(r, &in);
    EXPECT_U64(in.dim, 1);
    EXPECT_U64(in.elem, SIEVE_DS_ELEM_I64);
    uint64_t u[3];
    EXPECT_OK(err, sieve_ds_reader_read_u64(r, 3, u, &nr, &err));
    EXPECT_U64(u[2], 9000000000ull);
    /* float reads of an id file are refused for ids, allowed as floats */
    sieve_ds_reader_close(r);
    make_npy(tpath("f.npy"), 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", data,
             12);
    EXPECT_OK(err, sieve_ds_reader_open(tpath("f.npy"), SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    EXPECT_RC(err, SIEVE_ENOTSUP, sieve_ds_reader_read_u64(r, 3, u, &nr, &err));
    EXPECT_MSG(err, "f.npy: file holds float32 values; expected an integer file");
    sieve_ds_reader_close(r);
}

Test(dense, npy_rejects_what_it_cannot_read) {
    sieve_ds_error err = {0};
    sieve_ds_reader *r;
    float data[6] = {0};
    static const struct {
        const char *dict;
        int code;
        const char *msg;
    } cases[] = {
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (3, 2), }", SIEVE_ENOTSUP,
         "array is in Fortran (column-major) order; expected C order"},
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (3, 2), }", SIEVE_ENOTSUP,
         "big-endian array (dtype '>f4'); expected little-endian"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (3, 1), }", SIEVE_ENOTSUP,
         "dtype '<f8' is not supported; expected float32 ('<f4'), float16 ('<f2')"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }", SIEVE_ENOTSUP,
         "structured dtype"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 2), }", SIEVE_ENOTSUP,
         "array has 3 dimensions; expected a 2-D (n, d) matrix or a 1-D (n,) array"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (), }", SIEVE_ENOTSUP,
         "array has 0 dimensions"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2), }", SIEVE_ECORRUPT,
         "header says shape (4, 2) of float32 (160 bytes expected: 128 of header, then data) "
         "but file has 152 bytes"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), 'extra': 1}", SIEVE_EPARSE,
         "npy header has unknown key 'extra'"},
        {"{'descr': '<f4', 'shape': (3, 2), }", SIEVE_EPARSE, "npy header lacks 'fortran_order'"},
        {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (3, 2), }", SIEVE_EPARSE,
         "expected True or False, found 'M'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, x), }", SIEVE_EPARSE,
         "expected a non-negative integer in the shape, found 'x'"},
        {"['descr', '<f4']", SIEVE_EPARSE, "expected '{' starting the header dict, found '['"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *p = tpath("bad.npy");
        make_npy(p, 1, cases[i].dict, data, sizeof data);
        EXPECT_RC(err, cases[i].code, sieve_ds_reader_open(p, SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
        EXPECT_MSG(err, "bad.npy: ");
        EXPECT_MSG(err, cases[i].msg);
    }
    /* byte offset of a syntax error: preamble 10 + position in the dict */
    make_npy(tpath("off.npy"), 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2]}",
             data, sizeof data);
    EXPECT_RC(err, SIEVE_EPARSE,
              sieve_ds_reader_open(tpath("off.npy"), SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    EXPECT_MSG(err, "off.npy: npy header dict at byte offset 65: expected ',' or ')' in the shape");

    /* bad magic, unknown version, header length past the end, tiny file */
    write_file(tpath("magic.npy"), "NUMPY\x01\x00\x10\x00{}", 11);
    EXPECT_RC(err, SIEVE_ECORRUPT,
              sieve_ds_reader_open(tpath("magic.npy"), SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    EXPECT_MSG(err, "magic.npy: byte offset 0: no NumPy magic");
    write_file(tpath("ver.npy"), "\x93NUMPY\x04\x00\x10\x00\x00\x00{}", 14);
    EXPECT_RC(err, SIEVE_ENOTSUP,
              sieve_ds_reader_open(tpath("ver.npy"), SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    EXPECT_MSG(err, "ver.npy: byte offset 6: npy format version 4.0; expected 1.0, 2.0 or 3.0");
    write_file(tpath("len.npy"), "\x93NUMPY\x01\x00\xff\x00{'descr'", 18);
    EXPECT_RC(err, SIEVE_ECORRUPT,
              sieve_ds_reader_open(tpath("len.npy"), SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    EXPECT_MSG(err, "len.npy: byte offset 8: header length 255 runs past the end of the file (18 "
                    "bytes)");
    write_file(tpath("tiny.npy"), "\x93NUM", 4);
    EXPECT_RC(err, SIEVE_ECORRUPT,
              sieve_ds_reader_open(tpath("tiny.npy"), SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    EXPECT_MSG(err, "tiny.npy: file has 4 bytes; expected at least 10");
}

/* ------------------------------------------------------------ writers */

Test(dense, writer_rejects_values_that_do_not_fit_and_writes_nothing) {
    sieve_ds_error err = {0};
    sieve_ds_writer *w;
    const char *p = tpath("b.bvecs");
    EXPECT_OK(err, sieve_ds_writer_open(p, SIEVE_DS_FORMAT_AUTO, SIEVE_DS_ELEM_AUTO, 2, 0, &w, &err));
    float ok[4] = {0, 255, 3, 4};
    EXPECT_OK(err, sieve_ds_writer_write_f32(w, ok, 2, &err));
    float bad[4] = {1, 2, 3.5f, 4};
    EXPECT_RC(err, SIEVE_ERANGE, sieve_ds_writer_write_f32(w, bad, 2, &err));
    EXPECT_MSG(err, "b.bvecs");
    EXPECT_MSG(err, "row 3, element 0 is 3.5; expected an integer in [0, 255] (uint8)");
    float neg[2] = {-1, 0};
    EXPECT_RC(err, SIEVE_ERANGE, sieve_ds_writer_write_f32(w, neg, 1, &err));
    EXPECT_U64(sieve_ds_writer_count(w), 2);
    EXPECT_OK(err, sieve_ds_writer_close(w, &err));
    EXPECT_U64(file_size(p), 2 * (4 + 2)); /* only the good rows */

    p = tpath("h.npy");
    EXPECT_OK(err, sieve_ds_writer_open(p, SIEVE_DS_FORMAT_NPY, SIEVE_DS_ELEM_F16, 2, 0, &w, &err));
    float big[2] = {65504.0f, 70000.0f};
    EXPECT_RC(err, SIEVE_ERANGE, sieve_ds_writer_write_f32(w, big, 1, &err));
    EXPECT_MSG(err, "row 0, element 1 is 70000; expected |x| <= 65504");
    float inf[2] = {1.0f, INFINITY};
    EXPECT_RC(err, SIEVE_ENONFINITE, sieve_ds_writer_write_f32(w, inf, 1, &err));
    EXPECT_MSG(err, "h.npy: row 0, element 1 is infinite");
    sieve_ds_writer_abort(w);
    cr_assert(!file_exists(p), "aborted writer left %s", p);
    char partial[600];
    snprintf(partial, sizeof partial, "%s.partial", p);
    cr_assert(!file_exists(partial), "aborted writer left %s", partial);

    p = tpath("i.ibin");
    EXPECT_OK(err, sieve_ds_writer_open(p, SIEVE_DS_FORMAT_AUTO, SIEVE_DS_ELEM_AUTO, 1, 0, &w, &err));
    uint64_t v = 1ull << 31;
    EXPECT_RC(err, SIEVE_ERANGE, sieve_ds_writer_write_u64(w, &v, 1, &err));
    EXPECT_MSG(err, "i.ibin: row 0, element 0 is 2147483648; expected at most 2147483647 (int32)");
    sieve_ds_writer_abort(w);

    /* format / element mismatches and bad dims */
    EXPECT_RC(err, SIEVE_EINVAL, sieve_ds_writer_open(tpath("x.fbin"), SIEVE_DS_FORMAT_AUTO,
                                                      SIEVE_DS_ELEM_F16, 4, 0, &w, &err));
    EXPECT_MSG(err, "x.fbin: a .fbin file cannot hold float16 values; expected float32");
    EXPECT_RC(err, SIEVE_EINVAL, sieve_ds_writer_open(tpath("x.fbin"), SIEVE_DS_FORMAT_AUTO,
                                                      SIEVE_DS_ELEM_AUTO, 0, 0, &w, &err));
    EXPECT_MSG(err, "dimension 0; expected 1 to 65536");
    EXPECT_OK(err, sieve_ds_writer_open(tpath("y.fbin"), SIEVE_DS_FORMAT_AUTO, SIEVE_DS_ELEM_AUTO,
                                        2, 0, &w, &err));
    EXPECT_RC(err, SIEVE_ENOTSUP, sieve_ds_writer_write_u64(w, &v, 1, &err));
    sieve_ds_writer_abort(w);
}

Test(dense, empty_files_round_trip) {
    sieve_ds_error err = {0};
    const char *names[] = {"e.fbin", "e.npy", "e.u64bin"};
    for (int i = 0; i < 3; i++) {
        sieve_ds_writer *w;
        EXPECT_OK(err, sieve_ds_writer_open(tpath(names[i]), SIEVE_DS_FORMAT_AUTO,
                                            SIEVE_DS_ELEM_AUTO, 5, 0, &w, &err));
        EXPECT_OK(err, sieve_ds_writer_close(w, &err));
        sieve_ds_reader *r;
        EXPECT_OK(err, sieve_ds_reader_open(tpath(names[i]), SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
        sieve_ds_info in;
        sieve_ds_reader_info(r, &in);
        EXPECT_U64(in.count, 0);
        EXPECT_U64(in.dim, 5);
        sieve_ds_reader_close(r);
    }
}

/* ------------------------------------------------------------ float16 conversion */

Test(dense, float16_matches_the_kernel_module_everywhere) {
    /* every half converts to the same float as the kernels' conversion */
    for (uint32_t h = 0; h < 65536; h++) {
        float a = sieve_ds_f16_to_f32((uint16_t)h), b = sieve_f16_to_f32((uint16_t)h);
        if (memcmp(&a, &b, 4) != 0)
            cr_assert_fail("half 0x%04x: datasets %a, kernels %a", h, (double)a, (double)b);
    }
    /* floats: every exponent with many mantissas, plus all ties around each half */
    for (uint32_t e = 0; e < 256; e++) {
        for (uint32_t k = 0; k < 4096; k++) {
            uint32_t man = (k * 2053u) & 0x7fffffu;
            if (k < 8) man = k;             /* smallest mantissas */
            if (k >= 4088) man = 0x7fffffu - (k - 4088); /* largest */
            for (uint32_t s = 0; s < 2; s++) {
                uint32_t u = (s << 31) | (e << 23) | man;
                float x;
                memcpy(&x, &u, 4);
                uint16_t a = sieve_ds_f32_to_f16(x), b = sieve_f32_to_f16(x);
                if (a != b) cr_assert_fail("float 0x%08x (%a): datasets 0x%04x, kernels 0x%04x", u,
                                           (double)x, a, b);
            }
        }
    }
    for (uint32_t h = 0; h < 0x7c00; h++) { /* exact midpoints between neighbouring halves */
        float lo = sieve_f16_to_f32((uint16_t)h), hi = sieve_f16_to_f32((uint16_t)(h + 1));
        float mid = (float)(((double)lo + (double)hi) / 2.0);
        uint16_t a = sieve_ds_f32_to_f16(mid), b = sieve_f32_to_f16(mid);
        if (a != b) cr_assert_fail("midpoint of 0x%04x: datasets 0x%04x, kernels 0x%04x", h, a, b);
        cr_assert_eq(a & 1u, 0u, "tie at 0x%04x rounded to odd 0x%04x", h, a);
    }
}

Test(dense, nonfinite_found_past_the_first_piece) {
    /* 1000 rows of 768 floats span three 1 MiB read pieces; the bad value is in the third */
    sieve_ds_error err = {0};
    const size_t n = 1000, d = 768;
    float *m = test_matrix(n, d, 11);
    m[700 * d + 5] = INFINITY;
    sieve_ds_writer *w;
    const char *p = tpath("big.fbin");
    EXPECT_OK(err, sieve_ds_writer_open(p, SIEVE_DS_FORMAT_FBIN, SIEVE_DS_ELEM_AUTO, d,
                                        SIEVE_DS_ALLOW_NONFINITE, &w, &err));
    EXPECT_OK(err, sieve_ds_writer_write_f32(w, m, n, &err));
    EXPECT_OK(err, sieve_ds_writer_close(w, &err));
    sieve_ds_reader *r;
    EXPECT_OK(err, sieve_ds_reader_open(p, SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    float *got = malloc(n * d * sizeof(float));
    size_t nr;
    EXPECT_OK(err, sieve_ds_reader_seek(r, 10, &err));
    EXPECT_RC(err, SIEVE_ENONFINITE, sieve_ds_reader_read_f32(r, n, got, &nr, &err));
    EXPECT_U64(nr, 690);
    EXPECT_U64(sieve_ds_reader_tell(r), 700);
    expect_floats_eq(got, m + 10 * d, 690 * d, "rows before the bad one");
    /* 8 + 700 * 3072 + 5 * 4 */
    EXPECT_MSG(err, "big.fbin: row 700, element 5 (byte offset 2150428) is +infinity");
    /* skipping the bad row, the rest reads fine */
    EXPECT_OK(err, sieve_ds_reader_seek(r, 701, &err));
    EXPECT_OK(err, sieve_ds_reader_read_f32(r, n, got, &nr, &err));
    EXPECT_U64(nr, n - 701);
    expect_floats_eq(got, m + 701 * d, (n - 701) * d, "rows after the bad one");
    sieve_ds_reader_close(r);
    free(got);
    free(m);
}

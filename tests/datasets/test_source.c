/* test_source.c: the ingestion source joining vectors, ids and payloads: batches carry the
 * right rows, resuming at any row gives the same tail, and files that disagree (counts, ids,
 * lengths) are caught with messages naming both files. */
#include "helpers.h"

TestSuite(source, .init = tmp_setup, .fini = tmp_teardown);

#define N 50
#define D 6

static float *g_vec;

static void write_vectors_fbin(const char *name, size_t n) {
    sieve_ds_error err = {0};
    g_vec = test_matrix(N, D, 3);
    sieve_ds_writer *w;
    EXPECT_OK(err, sieve_ds_writer_open(tpath(name), SIEVE_DS_FORMAT_AUTO, SIEVE_DS_ELEM_AUTO, D, 0,
                                        &w, &err));
    EXPECT_OK(err, sieve_ds_writer_write_f32(w, g_vec, n, &err));
    EXPECT_OK(err, sieve_ds_writer_close(w, &err));
}

static uint64_t id_of(size_t i) { return 1000000 + i * 3; }

static void write_ids(const char *name, size_t n) {
    sieve_ds_error err = {0};
    uint64_t ids[N + 5];
    for (size_t i = 0; i < n; i++) ids[i] = id_of(i);
    sieve_ds_writer *w;
    EXPECT_OK(err, sieve_ds_writer_open(tpath(name), SIEVE_DS_FORMAT_AUTO, SIEVE_DS_ELEM_AUTO, 1, 0,
                                        &w, &err));
    EXPECT_OK(err, sieve_ds_writer_write_u64(w, ids, n, &err));
    EXPECT_OK(err, sieve_ds_writer_close(w, &err));
}

/* TSV with n lines; line `wrong` (if < n) gets a different id. */
static void write_tsv(const char *name, size_t n, size_t wrong) {
    FILE *f = fopen(tpath(name), "w");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%llu\tpassage %zu says \"hi\" \\ \x01 caf\xc3\xa9\n",
                (unsigned long long)(i == wrong ? 7 : id_of(i)), i);
    fclose(f);
}

static void expected_payload(size_t i, char *buf, size_t len) {
    snprintf(buf, len, "{\"text\":\"passage %zu says \\\"hi\\\" \\\\ \\u0001 caf\xc3\xa9\"}", i);
}

/* Reads everything from the current position in batches of `batch`, checking each row. */
static size_t read_all_check(sieve_ds_source *s, size_t batch, size_t first, int ids, int pay) {
    sieve_ds_error err = {0};
    size_t row = first;
    for (;;) {
        sieve_ds_batch b;
        EXPECT_OK(err, sieve_ds_source_read(s, batch, &b, &err));
        if (b.n == 0) break;
        cr_assert_leq(b.n, batch);
        EXPECT_U64(b.first_row, row);
        EXPECT_U64(b.dim, D);
        expect_floats_eq(b.vectors, g_vec + row * D, b.n * D, "batch vectors");
        if (ids) {
            cr_assert_not_null(b.ids);
            for (size_t i = 0; i < b.n; i++) {
                cr_assert(!b.ids[i].is_uuid);
                EXPECT_U64(b.ids[i].num, id_of(row + i));
            }
        } else {
            cr_assert_null(b.ids, "no id source, yet ids given");
        }
        if (pay) {
            cr_assert_not_null(b.payloads);
            for (size_t i = 0; i < b.n; i++) {
                char want[256];
                expected_payload(row + i, want, sizeof want);
                cr_assert_str_eq(b.payloads[i], want);
                EXPECT_U64(b.payload_lens[i], strlen(want));
            }
        } else {
            cr_assert_null(b.payloads);
        }
        row += b.n;
        EXPECT_U64(sieve_ds_source_tell(s), row);
    }
    return row;
}

Test(source, dense_vectors_ids_and_tsv_payloads) {
    sieve_ds_error err = {0};
    write_vectors_fbin("v.fbin", N);
    write_ids("v.u64bin", N);
    write_tsv("p.tsv", N, N);
    sieve_ds_source_options o = {.vectors = tpath("v.fbin"), .ids = tpath("v.u64bin"),
                                 .payloads = tpath("p.tsv")};
    sieve_ds_source *s;
    EXPECT_OK(err, sieve_ds_source_open(&o, &s, &err));
    sieve_ds_source_info in;
    sieve_ds_source_info_get(s, &in);
    EXPECT_U64(in.count, N);
    EXPECT_U64(in.dim, D);
    cr_assert(in.has_ids && in.has_payloads);
    EXPECT_U64(in.total_bytes, 8 + N * D * 4);
    EXPECT_U64(read_all_check(s, 7, 0, 1, 1), N);
    EXPECT_U64(sieve_ds_source_tell_bytes(s), in.total_bytes);
    /* resume at several rows: the same tail every time */
    const uint64_t at[] = {0, 1, 13, 49, 50};
    for (size_t k = 0; k < 5; k++) {
        EXPECT_OK(err, sieve_ds_source_seek(s, at[k], &err));
        EXPECT_U64(read_all_check(s, 4, at[k], 1, 1), N);
    }
    EXPECT_RC(err, SIEVE_ERANGE, sieve_ds_source_seek(s, N + 1, &err));
    sieve_ds_source_close(s);
    free(g_vec);
}

Test(source, tsv_ids_become_the_ids_and_no_ids_is_null) {
    sieve_ds_error err = {0};
    write_vectors_fbin("v.fvecs", N);
    write_tsv("p.tsv", N, N);
    sieve_ds_source_options o = {.vectors = tpath("v.fvecs"), .payloads = tpath("p.tsv")};
    sieve_ds_source *s;
    EXPECT_OK(err, sieve_ds_source_open(&o, &s, &err));
    EXPECT_U64(read_all_check(s, 16, 0, 1, 1), N);
    sieve_ds_source_close(s);
    sieve_ds_source_options o2 = {.vectors = tpath("v.fvecs")};
    EXPECT_OK(err, sieve_ds_source_open(&o2, &s, &err));
    sieve_ds_source_info in;
    sieve_ds_source_info_get(s, &in);
    cr_assert(!in.has_ids && !in.has_payloads);
    EXPECT_U64(read_all_check(s, 100, 0, 0, 0), N);
    sieve_ds_source_close(s);
    free(g_vec);
}

Test(source, jsonl_vectors_with_ids_and_payloads) {
    sieve_ds_error err = {0};
    g_vec = test_matrix(N, D, 3);
    sieve_ds_jsonl_writer *w;
    EXPECT_OK(err, sieve_ds_jsonl_writer_open(tpath("v.jsonl"), &w, &err));
    for (size_t i = 0; i < N; i++) {
        sieve_ds_id id = {0, id_of(i), {0}};
        char pay[256];
        expected_payload(i, pay, sizeof pay);
        EXPECT_OK(err, sieve_ds_jsonl_write(w, &id, g_vec + i * D, D, pay, &err));
    }
    EXPECT_OK(err, sieve_ds_jsonl_writer_close(w, &err));
    sieve_ds_source_options o = {.vectors = tpath("v.jsonl")};
    sieve_ds_source *s;
    EXPECT_OK(err, sieve_ds_source_open(&o, &s, &err));
    sieve_ds_source_info in;
    sieve_ds_source_info_get(s, &in);
    EXPECT_U64(in.count, SIEVE_DS_UNKNOWN_COUNT);
    EXPECT_U64(in.dim, D);
    cr_assert(in.has_ids);
    EXPECT_U64(in.total_bytes, file_size(tpath("v.jsonl")));
    EXPECT_U64(read_all_check(s, 9, 0, 1, 1), N);
    EXPECT_U64(sieve_ds_source_tell_bytes(s), in.total_bytes);
    EXPECT_OK(err, sieve_ds_source_seek(s, 31, &err));
    EXPECT_U64(read_all_check(s, 9, 31, 1, 1), N);
    /* with a matching id file too: still fine */
    sieve_ds_source_close(s);
    write_ids("ids.u64bin", N);
    o.ids = tpath("ids.u64bin");
    EXPECT_OK(err, sieve_ds_source_open(&o, &s, &err));
    EXPECT_U64(read_all_check(s, 8, 0, 1, 1), N);
    sieve_ds_source_close(s);
    /* an id file longer than the jsonl: caught at the end */
    write_ids("long.u64bin", N + 2);
    o.ids = tpath("long.u64bin");
    EXPECT_OK(err, sieve_ds_source_open(&o, &s, &err));
    sieve_ds_batch b;
    do EXPECT_OK(err, sieve_ds_source_read(s, 64, &b, &err));
    while (b.n == 64);
    EXPECT_RC(err, SIEVE_ECORRUPT, sieve_ds_source_read(s, 64, &b, &err));
    EXPECT_MSG(err, "long.u64bin: has 52 ids but");
    EXPECT_MSG(err, "v.jsonl has 50 rows");
    sieve_ds_source_close(s);
    /* a payload file on top of payloads in the jsonl: two sources for one payload */
    write_tsv("p.tsv", N, N);
    sieve_ds_source_options o3 = {.vectors = tpath("v.jsonl"), .payloads = tpath("p.tsv")};
    EXPECT_OK(err, sieve_ds_source_open(&o3, &s, &err));
    EXPECT_RC(err, SIEVE_ECORRUPT, sieve_ds_source_read(s, 4, &b, &err));
    EXPECT_MSG(err, "p.tsv:1: a payload for row 0, which");
    EXPECT_MSG(err, "v.jsonl also gives one; expected one payload source");
    sieve_ds_source_close(s);
    free(g_vec);
}

Test(source, mismatched_files_are_caught) {
    sieve_ds_error err = {0};
    write_vectors_fbin("v.fbin", N);
    sieve_ds_source *s = (sieve_ds_source *)1;
    sieve_ds_batch b;

    write_ids("short.u64bin", N - 1);
    sieve_ds_source_options o = {.vectors = tpath("v.fbin"), .ids = tpath("short.u64bin")};
    EXPECT_RC(err, SIEVE_ECORRUPT, sieve_ds_source_open(&o, &s, &err));
    cr_assert_null(s);
    EXPECT_MSG(err, "short.u64bin: has 49 ids but");
    EXPECT_MSG(err, "v.fbin has 50 rows; expected one id per row");

    /* a TSV whose line 18 has another id than the id file's row 17 */
    write_ids("v.u64bin", N);
    write_tsv("drift.tsv", N, 17);
    sieve_ds_source_options o2 = {.vectors = tpath("v.fbin"), .ids = tpath("v.u64bin"),
                                  .payloads = tpath("drift.tsv")};
    EXPECT_OK(err, sieve_ds_source_open(&o2, &s, &err));
    EXPECT_OK(err, sieve_ds_source_read(s, 10, &b, &err));
    EXPECT_U64(b.n, 10);
    EXPECT_RC(err, SIEVE_ECORRUPT, sieve_ds_source_read(s, 10, &b, &err));
    EXPECT_MSG(err, "drift.tsv:18: id 7 for row 17, but");
    EXPECT_MSG(err, "v.u64bin gives id 1000051; expected the files to list the same rows");
    /* after a failure, reads are refused until a seek */
    EXPECT_RC(err, SIEVE_EINVAL, sieve_ds_source_read(s, 10, &b, &err));
    EXPECT_MSG(err, "an earlier read failed; seek (to resume) or close the source");
    EXPECT_OK(err, sieve_ds_source_seek(s, 18, &err));
    EXPECT_OK(err, sieve_ds_source_read(s, 10, &b, &err));
    EXPECT_U64(b.first_row, 18);
    sieve_ds_source_close(s);

    /* payload file shorter, then longer than the vectors */
    write_tsv("short.tsv", N - 2, N);
    sieve_ds_source_options o3 = {.vectors = tpath("v.fbin"), .payloads = tpath("short.tsv")};
    EXPECT_OK(err, sieve_ds_source_open(&o3, &s, &err));
    EXPECT_RC(err, SIEVE_ECORRUPT, sieve_ds_source_read(s, 100, &b, &err));
    EXPECT_MSG(err, "short.tsv: ends after 48 records but");
    EXPECT_MSG(err, "v.fbin has more rows (row 48 has no payload line)");
    sieve_ds_source_close(s);
    write_tsv("long.tsv", N + 1, N + 1);
    o3.payloads = tpath("long.tsv");
    EXPECT_OK(err, sieve_ds_source_open(&o3, &s, &err));
    EXPECT_OK(err, sieve_ds_source_read(s, 100, &b, &err));
    EXPECT_U64(b.n, N);
    EXPECT_RC(err, SIEVE_ECORRUPT, sieve_ds_source_read(s, 100, &b, &err));
    EXPECT_MSG(err, "long.tsv:51: an extra record:");
    EXPECT_MSG(err, "v.fbin has only 50 rows");
    sieve_ds_source_close(s);

    /* float "ids", a non-payload format, invalid UTF-8 in a payload text */
    sieve_ds_source_options o4 = {.vectors = tpath("v.fbin"), .ids = tpath("v.fbin")};
    EXPECT_RC(err, SIEVE_EINVAL, sieve_ds_source_open(&o4, &s, &err));
    EXPECT_MSG(err, "v.fbin: 50 x 6 float32 values; expected one integer id per row");
    sieve_ds_source_options o5 = {.vectors = tpath("v.fbin"), .payloads = tpath("v.u64bin")};
    EXPECT_RC(err, SIEVE_EINVAL, sieve_ds_source_open(&o5, &s, &err));
    EXPECT_MSG(err, "v.u64bin: payloads must be .jsonl or .tsv");
    write_text(tpath("utf.tsv"), "1000000\tok\n1000003\tbad \xff byte\n");
    sieve_ds_source_options o6 = {.vectors = tpath("v.fbin"), .payloads = tpath("utf.tsv")};
    EXPECT_OK(err, sieve_ds_source_open(&o6, &s, &err));
    EXPECT_RC(err, SIEVE_EPARSE, sieve_ds_source_read(s, 5, &b, &err));
    EXPECT_MSG(err, "utf.tsv:2: text is not valid UTF-8 at byte 4 of the text");
    sieve_ds_source_close(s);
    free(g_vec);
}

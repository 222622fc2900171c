/* test_text.c: JSON lines, MS MARCO TSV and qrels: round trips, seeking, and errors that
 * name the file and line. */
#include "helpers.h"

#include <float.h>
#include <math.h>

TestSuite(text, .init = tmp_setup, .fini = tmp_teardown);

static sieve_ds_id num_id(uint64_t v) {
    sieve_ds_id id = {0, v, {0}};
    return id;
}

Test(text, ids_parse_and_format) {
    sieve_ds_id id;
    cr_assert_eq(sieve_ds_id_parse("18446744073709551615", 20, &id), 0);
    cr_assert(!id.is_uuid && id.num == UINT64_MAX, "num %llu", (unsigned long long)id.num);
    cr_assert_eq(sieve_ds_id_parse("18446744073709551616", 20, &id), SIEVE_EPARSE);
    cr_assert_eq(sieve_ds_id_parse("-1", 2, &id), SIEVE_EPARSE);
    cr_assert_eq(sieve_ds_id_parse("", 0, &id), SIEVE_EPARSE);
    cr_assert_eq(sieve_ds_id_parse("5d6F1c1e-0f7b-4a0e-9a59-6a0f2b7c8d9e", 36, &id), 0);
    cr_assert(id.is_uuid);
    char b[40];
    sieve_ds_id_format(&id, b);
    cr_assert_str_eq(b, "5d6f1c1e-0f7b-4a0e-9a59-6a0f2b7c8d9e");
    sieve_ds_id id2;
    cr_assert_eq(sieve_ds_id_parse("5d6f1c1e0f7b4a0e9a596a0f2b7c8d9e", 32, &id2), 0);
    cr_assert_eq(memcmp(id.uuid, id2.uuid, 16), 0, "hyphen-less form differs");
    cr_assert_eq(sieve_ds_id_parse("5d6f1c1e-0f7b-4a0e-9a59-6a0f2b7c8d9g", 36, &id), SIEVE_EPARSE);
    cr_assert_eq(sieve_ds_id_parse("5d6f1c1e+0f7b-4a0e-9a59-6a0f2b7c8d9e", 36, &id), SIEVE_EPARSE);
}

Test(text, jsonl_round_trip_exact) {
    sieve_ds_error err = {0};
    const char *p = tpath("points.jsonl");
    const uint32_t d = 5;
    float v[4][5] = {{0.1f, -1e-30f, FLT_MAX, 1.0f / 3.0f, -FLT_MAX},
                     {1, 2, 3, 4, 5},
                     {1.17549435e-38f, 1e-45f, -2.5f, 7.0f, 65504.0f},
                     {0, 0, 0, 0, 0}};
    sieve_ds_id ids[4] = {num_id(0), num_id(UINT64_MAX), num_id(42), {1, 0, {0}}};
    for (int i = 0; i < 16; i++) ids[3].uuid[i] = (uint8_t)(i * 17);
    const char *pay[4] = {"{\"text\":\"caf\\u00e9 \\\"q\\\"\",\"n\":0.1}", NULL, "{}",
                          "{\"nested\": {\"a\": [1, 2.50, null]}}"};
    sieve_ds_jsonl_writer *w;
    EXPECT_OK(err, sieve_ds_jsonl_writer_open(p, &w, &err));
    for (int i = 0; i < 4; i++) EXPECT_OK(err, sieve_ds_jsonl_write(w, &ids[i], v[i], d, pay[i], &err));
    EXPECT_OK(err, sieve_ds_jsonl_writer_close(w, &err));

    sieve_ds_jsonl *r;
    EXPECT_OK(err, sieve_ds_jsonl_open(p, 0, &r, &err));
    for (int i = 0; i < 4; i++) {
        sieve_ds_record rec;
        int got;
        EXPECT_OK(err, sieve_ds_jsonl_next(r, &rec, &got, &err));
        cr_assert_eq(got, 1, "record %d missing", i);
        EXPECT_U64(rec.line, i + 1);
        EXPECT_U64(rec.index, i);
        cr_assert(rec.has_id);
        cr_assert_eq(rec.id.is_uuid, ids[i].is_uuid);
        if (ids[i].is_uuid) cr_assert_eq(memcmp(rec.id.uuid, ids[i].uuid, 16), 0);
        else EXPECT_U64(rec.id.num, ids[i].num);
        EXPECT_U64(rec.dim, d);
        expect_floats_eq(rec.vector, v[i], d, "jsonl vector");
        if (!pay[i]) cr_assert_null(rec.payload, "record %d: payload %s", i, rec.payload);
        else {
            /* written and read back as given: numbers keep their digits */
            cr_assert_str_eq(rec.payload, pay[i]);
            EXPECT_U64(rec.payload_len, strlen(pay[i]));
        }
    }
    sieve_ds_record rec;
    int got = 1;
    EXPECT_OK(err, sieve_ds_jsonl_next(r, &rec, &got, &err));
    cr_assert_eq(got, 0, "expected the end");
    /* seek back to record 2, then to 0 */
    EXPECT_OK(err, sieve_ds_jsonl_seek(r, 2, &err));
    EXPECT_OK(err, sieve_ds_jsonl_next(r, &rec, &got, &err));
    EXPECT_U64(rec.id.num, 42);
    EXPECT_U64(sieve_ds_jsonl_tell(r), 3);
    EXPECT_RC(err, SIEVE_ERANGE, sieve_ds_jsonl_seek(r, 5, &err));
    EXPECT_MSG(err, "points.jsonl: cannot seek to record 5; the file has 4 records");
    EXPECT_OK(err, sieve_ds_jsonl_seek(r, 0, &err));
    EXPECT_OK(err, sieve_ds_jsonl_next(r, &rec, &got, &err));
    EXPECT_U64(rec.line, 1);
    sieve_ds_jsonl_close(r);
}

Test(text, jsonl_optional_fields_blank_lines_and_crlf) {
    sieve_ds_error err = {0};
    const char *p = tpath("ids.jsonl");
    write_text(p, "{\"id\": \"123\", \"payload\": {\"a\": 1}}\r\n\n   \n{\"payload\": null}\n"
                  "{\"id\": 9}");
    sieve_ds_jsonl *r;
    EXPECT_OK(err, sieve_ds_jsonl_open(p, 0, &r, &err));
    sieve_ds_record rec;
    int got;
    EXPECT_OK(err, sieve_ds_jsonl_next(r, &rec, &got, &err));
    cr_assert(got && rec.has_id && rec.id.num == 123 && !rec.vector);
    cr_assert_str_eq(rec.payload, "{\"a\": 1}");
    EXPECT_OK(err, sieve_ds_jsonl_next(r, &rec, &got, &err));
    cr_assert(got && !rec.has_id && !rec.payload);
    EXPECT_U64(rec.line, 4);
    EXPECT_U64(rec.index, 1);
    EXPECT_OK(err, sieve_ds_jsonl_next(r, &rec, &got, &err));
    cr_assert(got && rec.id.num == 9, "last line without a newline");
    EXPECT_U64(rec.line, 5);
    EXPECT_OK(err, sieve_ds_jsonl_next(r, &rec, &got, &err));
    cr_assert_eq(got, 0);
    EXPECT_OK(err, sieve_ds_jsonl_seek(r, 2, &err)); /* blank lines do not count */
    EXPECT_OK(err, sieve_ds_jsonl_next(r, &rec, &got, &err));
    EXPECT_U64(rec.id.num, 9);
    sieve_ds_jsonl_close(r);
    uint64_t n;
    EXPECT_OK(err, sieve_ds_count_lines(p, &n, &err));
    EXPECT_U64(n, 3);
}

Test(text, jsonl_errors_name_file_and_line) {
    static const struct {
        const char *second_line;
        int code;
        const char *msg;
    } cases[] = {
        {"{\"id\": 2, \"vector\": [1, 2]}", SIEVE_EDIM,
         "bad.jsonl:2: \"vector\" has 2 values; expected 3 (as on line 1)"},
        {"{\"id\": 2, \"vector\": [1, 2, }", SIEVE_EPARSE, "bad.jsonl:2: column"},
        {"{\"id\": 2, \"vectors\": [1, 2, 3]}", SIEVE_EPARSE,
         "bad.jsonl:2: unknown key \"vectors\"; expected \"id\", \"vector\" and \"payload\""},
        {"{\"id\": -4, \"vector\": [1, 2, 3]}", SIEVE_EPARSE,
         "bad.jsonl:2: \"id\" is -4; expected a non-negative integer or a UUID string"},
        {"{\"id\": 1.5, \"vector\": [1, 2, 3]}", SIEVE_EPARSE, "bad.jsonl:2: \"id\" is a number"},
        {"{\"id\": \"abc\", \"vector\": [1, 2, 3]}", SIEVE_EPARSE,
         "bad.jsonl:2: \"id\" is \"abc\"; expected a UUID or a decimal integer string"},
        {"{\"id\": 2, \"vector\": [1, \"2\", 3]}", SIEVE_EPARSE,
         "bad.jsonl:2: \"vector\"[1] is a string; expected a number"},
        {"{\"id\": 2, \"vector\": {\"a\": 1}}", SIEVE_EPARSE,
         "bad.jsonl:2: \"vector\" is an object; expected an array of numbers"},
        {"{\"id\": 2, \"vector\": [1, 2, 1e39]}", SIEVE_ERANGE,
         "bad.jsonl:2: \"vector\"[2] is 1e+39; expected a value within the float32 range"},
        {"{\"id\": 2}", SIEVE_EDIM, "bad.jsonl:2: no \"vector\"; expected one of 3 values (line 1 has one)"},
        {"{\"id\": 2, \"vector\": [1, 2, 3], \"payload\": [1]}", SIEVE_EPARSE,
         "bad.jsonl:2: \"payload\" is an array; expected an object or null"},
        {"[1, 2, 3]", SIEVE_EPARSE, "bad.jsonl:2: line is an array; expected a JSON object"},
        {"{\"id\": 2, \"id\": 3, \"vector\": [1, 2, 3]}", SIEVE_EPARSE, "bad.jsonl:2: column"},
        {"{\"id\": 2, \"vector\": []}", SIEVE_EDIM, "bad.jsonl:2: \"vector\" has 0 values; expected 1 to"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sieve_ds_error err = {0};
        char text[512];
        snprintf(text, sizeof text, "{\"id\": 1, \"vector\": [1, 2, 3]}\n%s\n{\"id\": 3, \"vector\": [7, 8, 9]}\n",
                 cases[i].second_line);
        const char *p = tpath("bad.jsonl");
        write_text(p, text);
        sieve_ds_jsonl *r;
        EXPECT_OK(err, sieve_ds_jsonl_open(p, 0, &r, &err));
        sieve_ds_record rec;
        int got;
        EXPECT_OK(err, sieve_ds_jsonl_next(r, &rec, &got, &err));
        EXPECT_RC(err, cases[i].code, sieve_ds_jsonl_next(r, &rec, &got, &err));
        cr_assert_eq(got, 0);
        EXPECT_MSG(err, cases[i].msg);
        /* the bad record is consumed: the next call reads line 3 */
        EXPECT_OK(err, sieve_ds_jsonl_next(r, &rec, &got, &err));
        cr_assert(got && rec.line == 3 && rec.id.num == 3, "case %zu: after the error got line %llu",
                  i, (unsigned long long)rec.line);
        sieve_ds_jsonl_close(r);
    }
}

Test(text, jsonl_writer_rejects_bad_input) {
    sieve_ds_error err = {0};
    sieve_ds_jsonl_writer *w;
    EXPECT_OK(err, sieve_ds_jsonl_writer_open(tpath("w.jsonl"), &w, &err));
    float v[2] = {1.0f, NAN};
    EXPECT_RC(err, SIEVE_ENONFINITE, sieve_ds_jsonl_write(w, NULL, v, 2, NULL, &err));
    EXPECT_MSG(err, "w.jsonl: record 0, element 1 is not finite");
    EXPECT_RC(err, SIEVE_EPARSE, sieve_ds_jsonl_write(w, NULL, NULL, 0, "[1]", &err));
    EXPECT_MSG(err, "payload is not a JSON object");
    EXPECT_RC(err, SIEVE_EPARSE, sieve_ds_jsonl_write(w, NULL, NULL, 0, "{\"a\":", &err));
    /* a multi-line payload is compacted onto one line */
    EXPECT_OK(err, sieve_ds_jsonl_write(w, NULL, NULL, 0, "{\n \"a\": 1\n}", &err));
    EXPECT_OK(err, sieve_ds_jsonl_writer_close(w, &err));
    sieve_ds_jsonl *r;
    EXPECT_OK(err, sieve_ds_jsonl_open(tpath("w.jsonl"), 0, &r, &err));
    sieve_ds_record rec;
    int got;
    EXPECT_OK(err, sieve_ds_jsonl_next(r, &rec, &got, &err));
    cr_assert(got);
    cr_assert_str_eq(rec.payload, "{\"a\":1}");
    EXPECT_OK(err, sieve_ds_jsonl_next(r, &rec, &got, &err));
    cr_assert_eq(got, 0, "only the good record was written");
    sieve_ds_jsonl_close(r);
}

Test(text, tsv_round_trip_and_seek) {
    sieve_ds_error err = {0};
    const char *p = tpath("collection.tsv");
    const char *texts[4] = {"The presence of communication amid scientific minds",
                            "", "unicode: caf\xc3\xa9 \xe2\x82\xac", "quotes \" and \\ backslash"};
    sieve_ds_id ids[4] = {num_id(0), num_id(1), num_id(8841822), {1, 0, {0}}};
    ids[3].uuid[15] = 1;
    EXPECT_OK(err, sieve_ds_tsv_save(p, ids, texts, 4, &err));
    sieve_ds_tsv *r;
    EXPECT_OK(err, sieve_ds_tsv_open(p, &r, &err));
    for (int i = 0; i < 4; i++) {
        sieve_ds_text t;
        int got;
        EXPECT_OK(err, sieve_ds_tsv_next(r, &t, &got, &err));
        cr_assert(got);
        cr_assert_eq(t.id.is_uuid, ids[i].is_uuid);
        if (!ids[i].is_uuid) EXPECT_U64(t.id.num, ids[i].num);
        else cr_assert_eq(memcmp(t.id.uuid, ids[i].uuid, 16), 0);
        cr_assert_str_eq(t.text, texts[i]);
        EXPECT_U64(t.text_len, strlen(texts[i]));
    }
    EXPECT_OK(err, sieve_ds_tsv_seek(r, 2, &err));
    sieve_ds_text t;
    int got;
    EXPECT_OK(err, sieve_ds_tsv_next(r, &t, &got, &err));
    EXPECT_U64(t.id.num, 8841822);
    EXPECT_U64(t.line, 3);
    sieve_ds_tsv_close(r);
    const char *bad[1] = {"two\tcolumns"};
    EXPECT_RC(err, SIEVE_EINVAL, sieve_ds_tsv_save(tpath("x.tsv"), ids, bad, 1, &err));
    EXPECT_MSG(err, "x.tsv: text 0 holds a tab or line break");
    cr_assert(!file_exists(tpath("x.tsv")));
}

Test(text, tsv_errors_name_line) {
    sieve_ds_error err = {0};
    const char *p = tpath("queries.tsv");
    write_text(p, "1\tfirst\r\n2 no tab here\nx7\tbad id\n3\tthird\twith tab\n");
    sieve_ds_tsv *r;
    EXPECT_OK(err, sieve_ds_tsv_open(p, &r, &err));
    sieve_ds_text t;
    int got;
    EXPECT_OK(err, sieve_ds_tsv_next(r, &t, &got, &err));
    cr_assert_str_eq(t.text, "first", "CR dropped");
    EXPECT_RC(err, SIEVE_EPARSE, sieve_ds_tsv_next(r, &t, &got, &err));
    EXPECT_MSG(err, "queries.tsv:2: no tab; expected id<TAB>text (byte offset 9)");
    EXPECT_RC(err, SIEVE_EPARSE, sieve_ds_tsv_next(r, &t, &got, &err));
    EXPECT_MSG(err, "queries.tsv:3: id \"x7\" is not a decimal integer or a UUID");
    EXPECT_OK(err, sieve_ds_tsv_next(r, &t, &got, &err));
    cr_assert_str_eq(t.text, "third\twith tab", "text is everything after the first tab");
    sieve_ds_tsv_close(r);
}

Test(text, qrels_both_forms) {
    sieve_ds_error err = {0};
    sieve_ds_qrel q[3] = {{1185869, 0, 1}, {1185868, 16, 1}, {7, 8841822, 1}};
    sieve_ds_qrel *got;
    size_t n;
    EXPECT_OK(err, sieve_ds_qrels_save(tpath("q4.tsv"), q, 3, 0, &err));
    EXPECT_OK(err, sieve_ds_qrels_load(tpath("q4.tsv"), &got, &n, &err));
    EXPECT_U64(n, 3);
    for (size_t i = 0; i < 3; i++)
        cr_assert(got[i].qid == q[i].qid && got[i].pid == q[i].pid && got[i].rel == q[i].rel,
                  "qrel %zu: %llu %llu %d", i, (unsigned long long)got[i].qid,
                  (unsigned long long)got[i].pid, got[i].rel);
    free(got);
    EXPECT_OK(err, sieve_ds_qrels_save(tpath("q2.tsv"), q, 3, 1, &err));
    EXPECT_OK(err, sieve_ds_qrels_load(tpath("q2.tsv"), &got, &n, &err));
    EXPECT_U64(n, 3);
    EXPECT_U64(got[2].pid, 8841822);
    cr_assert_eq(got[2].rel, 1);
    free(got);
    /* MS MARCO's own layout: tabs in the TREC form, graded relevance */
    write_text(tpath("trec.tsv"), "300674\t0\t7067032\t1\n125705\t0\t7067056\t2\n");
    EXPECT_OK(err, sieve_ds_qrels_load(tpath("trec.tsv"), &got, &n, &err));
    EXPECT_U64(n, 2);
    cr_assert_eq(got[1].rel, 2);
    free(got);
    sieve_ds_qrel bad = {1, 2, 3};
    EXPECT_RC(err, SIEVE_EINVAL, sieve_ds_qrels_save(tpath("b.tsv"), &bad, 1, 1, &err));
    EXPECT_MSG(err, "qrel 0 has relevance 3; the two-column form expects 1");
}

Test(text, qrels_errors) {
    sieve_ds_error err = {0};
    sieve_ds_qrel *got = (sieve_ds_qrel *)1;
    size_t n = 9;
    write_text(tpath("mixed.qrels"), "1 0 2 1\n3\t4\n");
    EXPECT_RC(err, SIEVE_EPARSE, sieve_ds_qrels_load(tpath("mixed.qrels"), &got, &n, &err));
    EXPECT_MSG(err, "mixed.qrels:2: 2 fields; expected 4 like line 1");
    cr_assert_null(got);
    EXPECT_U64(n, 0);
    write_text(tpath("three.qrels"), "1 0 2\n");
    EXPECT_RC(err, SIEVE_EPARSE, sieve_ds_qrels_load(tpath("three.qrels"), &got, &n, &err));
    EXPECT_MSG(err, "three.qrels:1: 3 fields; expected 4 (qid 0 pid relevance) or 2 (qid<TAB>pid)");
    write_text(tpath("num.qrels"), "1\t2\n\nq3\t4\n");
    EXPECT_RC(err, SIEVE_EPARSE, sieve_ds_qrels_load(tpath("num.qrels"), &got, &n, &err));
    EXPECT_MSG(err, "num.qrels:3: expected \"qid<TAB>pid\" with decimal integers");
    EXPECT_RC(err, SIEVE_ENOTFOUND, sieve_ds_qrels_load(tpath("none.qrels"), &got, &n, &err));
}

Test(text, long_lines_are_read_whole) {
    /* a 3 MB line crosses the reader's 1 MiB buffer several times */
    sieve_ds_error err = {0};
    size_t len = 3u << 20;
    char *s = malloc(len + 64);
    memcpy(s, "5\t", 2);
    for (size_t i = 2; i < len; i++) s[i] = (char)('a' + i % 26);
    memcpy(s + len, "\n6\tshort\n", 10);
    write_file(tpath("long.tsv"), s, len + 9);
    sieve_ds_tsv *r;
    EXPECT_OK(err, sieve_ds_tsv_open(tpath("long.tsv"), &r, &err));
    sieve_ds_text t;
    int got;
    EXPECT_OK(err, sieve_ds_tsv_next(r, &t, &got, &err));
    EXPECT_U64(t.text_len, len - 2);
    cr_assert_eq(memcmp(t.text, s + 2, len - 2), 0, "long text differs");
    EXPECT_OK(err, sieve_ds_tsv_next(r, &t, &got, &err));
    cr_assert_str_eq(t.text, "short");
    EXPECT_U64(sieve_ds_tsv_tell_bytes(r), len + 9);
    sieve_ds_tsv_close(r);
    free(s);
}

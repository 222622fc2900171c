/* source.c: the ingestion source: a vector file joined row by row with an optional id file
 * and an optional payload file, read in batches with resumable positioning.
 * Must not: decide what ids mean when none are given (the caller does), or talk to a store.
 *
 * Id precedence: the id file, then the vectors' .jsonl "id", then the payload file's id.
 * Every other source that carries an id for a row must agree with the first, so a payload
 * file that drifted out of line with the vectors is caught at the first wrong row. */
#include <stdlib.h>
#include <string.h>

#include "ds_internal.h"

struct sieve_ds_source {
    char *vpath, *ipath, *ppath;
    sieve_ds_reader *vd;  /* dense vectors */
    sieve_ds_jsonl *vj;   /* .jsonl vectors */
    sieve_ds_reader *ids; /* id file */
    sieve_ds_jsonl *pj;   /* .jsonl payloads */
    sieve_ds_tsv *pt;     /* .tsv payloads */
    int vj_ids, pj_ids;   /* whether the .jsonl files carry ids (from their first record) */
    sieve_ds_source_info info;
    uint64_t row;
    int failed;
    /* batch buffers */
    size_t cap;
    float *vec;
    sieve_ds_id *idv;
    uint64_t *raw;
    const char **pay;
    size_t *plen;
    size_t *poff;    /* payload offsets into arena; SIZE_MAX for none */
    const char **idfrom; /* which file set idv[i] (for messages); NULL: not yet set */
    uint64_t *idline;    /* its line (0 for the id file) */
    char *arena;
    size_t alen, acap;
};

static int id_eq(const sieve_ds_id *a, const sieve_ds_id *b) {
    if (a->is_uuid != b->is_uuid) return 0;
    return a->is_uuid ? !memcmp(a->uuid, b->uuid, 16) : a->num == b->num;
}

void sieve_ds_source_close(sieve_ds_source *s) {
    if (!s) return;
    sieve_ds_reader_close(s->vd);
    sieve_ds_jsonl_close(s->vj);
    sieve_ds_reader_close(s->ids);
    sieve_ds_jsonl_close(s->pj);
    sieve_ds_tsv_close(s->pt);
    free(s->vpath);
    free(s->ipath);
    free(s->ppath);
    free(s->vec);
    free(s->idv);
    free(s->raw);
    free(s->pay);
    free(s->plen);
    free(s->poff);
    free(s->idfrom);
    free(s->idline);
    free(s->arena);
    free(s);
}

/* Reads the first record of a .jsonl file to learn its shape, then rewinds. */
static int peek_jsonl(sieve_ds_jsonl *j, sieve_ds_record *rec, int *got, sieve_ds_error *err) {
    int rc = sieve_ds_jsonl_next(j, rec, got, err);
    if (rc) return rc;
    return sieve_ds_jsonl_seek(j, 0, err);
}

int sieve_ds_source_open(const sieve_ds_source_options *o, sieve_ds_source **out,
                         sieve_ds_error *err) {
    if (out) *out = NULL;
    if (!o || !out || !o->vectors)
        return sieve__ds_fail(err, SIEVE_EINVAL, "source: no vectors file given");
    sieve_ds_source *s = calloc(1, sizeof *s);
    if (!s) return sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", o->vectors);
    int rc = 0;
    s->vpath = sieve__ds_strdup(o->vectors);
    s->ipath = o->ids ? sieve__ds_strdup(o->ids) : NULL;
    s->ppath = o->payloads ? sieve__ds_strdup(o->payloads) : NULL;
    if (!s->vpath || (o->ids && !s->ipath) || (o->payloads && !s->ppath)) {
        rc = sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", o->vectors);
        goto fail;
    }

    /* vectors */
    sieve_ds_format vf =
        o->vectors_format ? o->vectors_format : sieve_ds_format_from_path(o->vectors);
    if (vf == SIEVE_DS_FORMAT_JSONL) {
        if ((rc = sieve_ds_jsonl_open(o->vectors, o->flags, &s->vj, err))) goto fail;
        sieve_ds_record rec;
        int got;
        if ((rc = peek_jsonl(s->vj, &rec, &got, err))) goto fail;
        if (got && !rec.vector) {
            rc = sieve__ds_fail(err, SIEVE_EINVAL,
                                "%s:%llu: record has no \"vector\"; expected vectors in the "
                                "vectors file",
                                o->vectors, (unsigned long long)rec.line);
            goto fail;
        }
        s->vj_ids = got && rec.has_id;
        s->info.dim = got ? rec.dim : 0;
        s->info.count = got ? SIEVE_DS_UNKNOWN_COUNT : 0;
        s->info.has_payloads = 1;
        s->info.total_bytes = sieve__ds_jsonl_file_bytes(s->vj);
    } else if (sieve_ds_format_is_dense(vf) || vf == SIEVE_DS_FORMAT_AUTO) {
        if ((rc = sieve_ds_reader_open(o->vectors, vf, o->flags, &s->vd, err))) goto fail;
        sieve_ds_info in;
        sieve_ds_reader_info(s->vd, &in);
        s->info.count = in.count;
        s->info.dim = in.dim;
        s->info.total_bytes = in.file_bytes;
    } else {
        rc = sieve__ds_fail(err, SIEVE_EINVAL,
                            "%s: a .%s file cannot hold vectors; expected a dense format or "
                            ".jsonl",
                            o->vectors, sieve_ds_format_name(vf));
        goto fail;
    }

    /* ids */
    if (o->ids) {
        if ((rc = sieve_ds_reader_open(o->ids, o->ids_format, 0, &s->ids, err))) goto fail;
        sieve_ds_info in;
        sieve_ds_reader_info(s->ids, &in);
        if (in.elem == SIEVE_DS_ELEM_F32 || in.elem == SIEVE_DS_ELEM_F16 || in.dim != 1) {
            rc = sieve__ds_fail(err, SIEVE_EINVAL,
                                "%s: %llu x %u %s values; expected one integer id per row "
                                "(.u64bin, .ibin with d = 1, or a 1-D integer .npy)",
                                o->ids, (unsigned long long)in.count, in.dim,
                                sieve_ds_elem_name(in.elem));
            goto fail;
        }
        if (s->vd && in.count != s->info.count) {
            rc = sieve__ds_fail(err, SIEVE_ECORRUPT,
                                "%s: has %llu ids but %s has %llu rows; expected one id per row",
                                o->ids, (unsigned long long)in.count, o->vectors,
                                (unsigned long long)s->info.count);
            goto fail;
        }
        s->info.has_ids = 1;
    }

    /* payloads */
    if (o->payloads) {
        sieve_ds_format pf = o->payloads_format ? o->payloads_format
                                                : sieve_ds_format_from_path(o->payloads);
        if (pf == SIEVE_DS_FORMAT_JSONL) {
            if ((rc = sieve_ds_jsonl_open(o->payloads, o->flags, &s->pj, err))) goto fail;
            sieve_ds_record rec;
            int got;
            if ((rc = peek_jsonl(s->pj, &rec, &got, err))) goto fail;
            s->pj_ids = got && rec.has_id;
        } else if (pf == SIEVE_DS_FORMAT_TSV) {
            if ((rc = sieve_ds_tsv_open(o->payloads, &s->pt, err))) goto fail;
        } else {
            rc = sieve__ds_fail(err, SIEVE_EINVAL,
                                "%s: payloads must be .jsonl or .tsv (id<TAB>text); got %s",
                                o->payloads,
                                pf ? sieve_ds_format_name(pf) : "an unknown extension");
            goto fail;
        }
        s->info.has_payloads = 1;
    }
    s->info.has_ids = s->info.has_ids || s->vj_ids || s->pj_ids || s->pt != NULL;
    *out = s;
    return 0;
fail:
    sieve_ds_source_close(s);
    return rc;
}

void sieve_ds_source_info_get(const sieve_ds_source *s, sieve_ds_source_info *info) {
    *info = s->info;
}

uint64_t sieve_ds_source_tell(const sieve_ds_source *s) { return s->row; }

uint64_t sieve_ds_source_tell_bytes(const sieve_ds_source *s) {
    if (s->vj) return sieve_ds_jsonl_tell_bytes(s->vj);
    sieve_ds_info in;
    sieve_ds_reader_info(s->vd, &in);
    return in.data_offset + sieve_ds_reader_tell(s->vd) * in.row_bytes;
}

static int grow(sieve_ds_source *s, size_t n, sieve_ds_error *err) {
    if (n <= s->cap) return 0;
    size_t dim = s->info.dim ? s->info.dim : 1;
#define GROW(p, count)                                                          \
    do {                                                                        \
        void *np = realloc((void *)(p), (count) * sizeof *(p));                 \
        if (!np) return sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", s->vpath); \
        memcpy(&(p), &np, sizeof np);                                           \
    } while (0)
    GROW(s->vec, n * dim);
    GROW(s->idv, n);
    GROW(s->raw, n);
    GROW(s->pay, n);
    GROW(s->plen, n);
    GROW(s->poff, n);
    GROW(s->idfrom, n);
    GROW(s->idline, n);
#undef GROW
    s->cap = n;
    return 0;
}

/* Offers id `id` for row slot i from file `from` at `line`; the first offer sets it, later
 * ones must agree. */
static int offer_id(sieve_ds_source *s, size_t i, const sieve_ds_id *id, const char *from,
                    uint64_t line, sieve_ds_error *err) {
    if (!s->idfrom[i]) {
        s->idv[i] = *id;
        s->idfrom[i] = from;
        s->idline[i] = line;
        return 0;
    }
    if (id_eq(&s->idv[i], id)) return 0;
    char a[40], b[40], where[64] = "";
    sieve_ds_id_format(&s->idv[i], a);
    sieve_ds_id_format(id, b);
    if (s->idline[i]) snprintf(where, sizeof where, " (line %llu)", (unsigned long long)s->idline[i]);
    return sieve__ds_fail(err, SIEVE_ECORRUPT,
                          "%s:%llu: id %s for row %llu, but %s%s gives id %s; expected the "
                          "files to list the same rows in the same order",
                          from, (unsigned long long)line, b, (unsigned long long)(s->row + i),
                          s->idfrom[i], where, a);
}

/* Stores payload text for slot i in the arena. */
static int put_payload(sieve_ds_source *s, size_t i, const char *p, size_t n,
                       sieve_ds_error *err) {
    s->poff[i] = s->alen;
    s->plen[i] = n;
    if (sieve__ds_buf_append(&s->arena, &s->alen, &s->acap, p, n) ||
        sieve__ds_buf_append(&s->arena, &s->alen, &s->acap, "", 1))
        return sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", s->vpath);
    return 0;
}

/* Rows from the .jsonl vectors into slots [0, n); *got = rows read. */
static int read_vj(sieve_ds_source *s, size_t n, size_t *got, sieve_ds_error *err) {
    *got = 0;
    for (size_t i = 0; i < n; i++) {
        sieve_ds_record rec;
        int have;
        int rc = sieve_ds_jsonl_next(s->vj, &rec, &have, err);
        if (rc) return rc;
        if (!have) return 0;
        if (!rec.vector) /* the reader keeps records alike, so only if the first had none */
            return sieve__ds_fail(err, SIEVE_EINVAL, "%s:%llu: no \"vector\"", s->vpath,
                                  (unsigned long long)rec.line);
        if (rec.dim != s->info.dim)
            return sieve__ds_fail(err, SIEVE_EDIM, "%s:%llu: \"vector\" has %u values; expected %u",
                                  s->vpath, (unsigned long long)rec.line, rec.dim, s->info.dim);
        memcpy(s->vec + i * (size_t)s->info.dim, rec.vector, (size_t)rec.dim * sizeof(float));
        if (rec.has_id != s->vj_ids)
            return sieve__ds_fail(err, SIEVE_ECORRUPT,
                                  s->vj_ids ? "%s:%llu: no \"id\"; expected one on every line "
                                              "(the first record has one)"
                                            : "%s:%llu: has an \"id\" but the first record has "
                                              "none; expected every record alike",
                                  s->vpath, (unsigned long long)rec.line);
        if (rec.has_id && (rc = offer_id(s, i, &rec.id, s->vpath, rec.line, err))) return rc;
        if (rec.payload && (rc = put_payload(s, i, rec.payload, rec.payload_len, err))) return rc;
        *got = i + 1;
    }
    return 0;
}

static int payload_file_short(sieve_ds_source *s, uint64_t row, sieve_ds_error *err) {
    return sieve__ds_fail(err, SIEVE_ECORRUPT,
                          "%s: ends after %llu records but %s has more rows (row %llu has no "
                          "payload line); expected one line per row",
                          s->ppath, (unsigned long long)row, s->vpath, (unsigned long long)row);
}

/* Payload records for slots [0, n). */
static int read_payloads(sieve_ds_source *s, size_t n, sieve_ds_error *err) {
    for (size_t i = 0; i < n; i++) {
        int have, rc;
        if (s->pj) {
            sieve_ds_record rec;
            if ((rc = sieve_ds_jsonl_next(s->pj, &rec, &have, err))) return rc;
            if (!have) return payload_file_short(s, s->row + i, err);
            if (rec.has_id != s->pj_ids)
                return sieve__ds_fail(err, SIEVE_ECORRUPT,
                                      s->pj_ids ? "%s:%llu: no \"id\"; expected one on every "
                                                  "line (the first record has one)"
                                                : "%s:%llu: has an \"id\" but the first record "
                                                  "has none; expected every record alike",
                                      s->ppath, (unsigned long long)rec.line);
            if (rec.has_id && (rc = offer_id(s, i, &rec.id, s->ppath, rec.line, err))) return rc;
            if (rec.payload) {
                if (s->poff[i] != SIZE_MAX)
                    return sieve__ds_fail(err, SIEVE_ECORRUPT,
                                          "%s:%llu: a payload for row %llu, which %s also "
                                          "gives one; expected one payload source",
                                          s->ppath, (unsigned long long)rec.line,
                                          (unsigned long long)(s->row + i), s->vpath);
                if ((rc = put_payload(s, i, rec.payload, rec.payload_len, err))) return rc;
            }
        } else {
            sieve_ds_text t;
            if ((rc = sieve_ds_tsv_next(s->pt, &t, &have, err))) return rc;
            if (!have) return payload_file_short(s, s->row + i, err);
            if ((rc = offer_id(s, i, &t.id, s->ppath, t.line, err))) return rc;
            if (s->poff[i] != SIZE_MAX)
                return sieve__ds_fail(err, SIEVE_ECORRUPT,
                                      "%s:%llu: a payload for row %llu, which %s also gives "
                                      "one; expected one payload source",
                                      s->ppath, (unsigned long long)t.line,
                                      (unsigned long long)(s->row + i), s->vpath);
            size_t start = s->alen, bad = 0;
            s->poff[i] = start;
            if (sieve__ds_buf_append(&s->arena, &s->alen, &s->acap, "{\"text\":", 8))
                return sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", s->ppath);
            rc = sieve__ds_json_string(&s->arena, &s->alen, &s->acap, t.text, t.text_len, &bad);
            if (rc == SIEVE_EPARSE)
                return sieve__ds_fail(err, SIEVE_EPARSE,
                                      "%s:%llu: text is not valid UTF-8 at byte %zu of the text; "
                                      "expected UTF-8",
                                      s->ppath, (unsigned long long)t.line, bad);
            if (rc || sieve__ds_buf_append(&s->arena, &s->alen, &s->acap, "}", 2))
                return sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", s->ppath);
            s->plen[i] = s->alen - start - 1; /* the appended "}\0" counts its NUL in alen */
        }
    }
    return 0;
}

/* At the end of the vectors: the payload file must be at its end too. */
static int check_payload_end(sieve_ds_source *s, sieve_ds_error *err) {
    int have = 0, rc = 0;
    uint64_t line = 0;
    if (s->pj) {
        sieve_ds_record rec;
        rc = sieve_ds_jsonl_next(s->pj, &rec, &have, err);
        line = rec.line;
    } else if (s->pt) {
        sieve_ds_text t;
        rc = sieve_ds_tsv_next(s->pt, &t, &have, err);
        line = t.line;
    }
    if (rc) return rc;
    if (have)
        return sieve__ds_fail(err, SIEVE_ECORRUPT,
                              "%s:%llu: an extra record: %s has only %llu rows; expected one "
                              "payload line per row",
                              s->ppath, (unsigned long long)line, s->vpath,
                              (unsigned long long)s->row);
    return 0;
}

int sieve_ds_source_read(sieve_ds_source *s, size_t max_rows, sieve_ds_batch *b,
                         sieve_ds_error *err) {
    if (b) memset(b, 0, sizeof *b);
    if (!s || !b || max_rows == 0)
        return sieve__ds_fail(err, SIEVE_EINVAL, "source read: NULL argument or max_rows 0");
    if (s->failed)
        return sieve__ds_fail(err, SIEVE_EINVAL,
                              "%s: an earlier read failed; seek (to resume) or close the source",
                              s->vpath);
    size_t n = max_rows;
    if (s->vd && s->info.count - s->row < n) n = (size_t)(s->info.count - s->row);
    int rc = grow(s, n, err);
    if (rc) goto fail;
    s->alen = 0;
    for (size_t i = 0; i < n; i++) {
        s->poff[i] = SIZE_MAX;
        s->idfrom[i] = NULL;
        s->idline[i] = 0;
    }
    size_t got = 0;
    if (s->ids && n > 0) { /* ids first: they take precedence */
        if ((rc = sieve_ds_reader_read_u64(s->ids, n, s->raw, &got, err))) goto fail;
        for (size_t i = 0; i < got; i++) {
            sieve_ds_id id = {0, s->raw[i], {0}};
            offer_id(s, i, &id, s->ipath, 0, err);
        }
    }
    if (s->vd) {
        if (n > 0 && (rc = sieve_ds_reader_read_f32(s->vd, n, s->vec, &got, err))) goto fail;
        if (n == 0) got = 0;
    } else {
        if ((rc = read_vj(s, n, &got, err))) goto fail;
        if (s->ids && got < n) { /* .jsonl vectors may end before the id file */
            /* the id reader ran ahead by n - got rows; put it back */
            if ((rc = sieve_ds_reader_seek(s->ids, s->row + got, err))) goto fail;
        }
        if (s->ids && got > 0) {
            sieve_ds_info in;
            sieve_ds_reader_info(s->ids, &in);
            if (s->row + got > in.count) {
                rc = sieve__ds_fail(err, SIEVE_ECORRUPT,
                                    "%s: has %llu ids but %s has more rows; expected one id per "
                                    "row",
                                    s->ipath, (unsigned long long)in.count, s->vpath);
                goto fail;
            }
        }
    }
    if (got > 0 && (s->pj || s->pt) && (rc = read_payloads(s, got, err))) goto fail;
    if (got == 0) {
        if ((rc = check_payload_end(s, err))) goto fail;
        if (s->vj && s->ids) {
            sieve_ds_info in;
            sieve_ds_reader_info(s->ids, &in);
            if (in.count != s->row) {
                rc = sieve__ds_fail(err, SIEVE_ECORRUPT,
                                    "%s: has %llu ids but %s has %llu rows; expected one id per "
                                    "row",
                                    s->ipath, (unsigned long long)in.count, s->vpath,
                                    (unsigned long long)s->row);
                goto fail;
            }
        }
        return 0;
    }
    for (size_t i = 0; i < got; i++) s->pay[i] = s->poff[i] == SIZE_MAX ? NULL : s->arena + s->poff[i];
    for (size_t i = 0; i < got; i++)
        if (s->poff[i] == SIZE_MAX) s->plen[i] = 0;
    b->n = got;
    b->dim = s->info.dim;
    b->first_row = s->row;
    b->vectors = s->vec;
    b->ids = s->info.has_ids ? s->idv : NULL;
    b->payloads = s->info.has_payloads ? (const char *const *)s->pay : NULL;
    b->payload_lens = s->info.has_payloads ? s->plen : NULL;
    s->row += got;
    return 0;
fail:
    s->failed = 1;
    return rc;
}

int sieve_ds_source_seek(sieve_ds_source *s, uint64_t row, sieve_ds_error *err) {
    if (!s) return sieve__ds_fail(err, SIEVE_EINVAL, "source seek: NULL source");
    int rc;
    if (s->vd) rc = sieve_ds_reader_seek(s->vd, row, err);
    else rc = sieve_ds_jsonl_seek(s->vj, row, err);
    if (!rc && s->ids) rc = sieve_ds_reader_seek(s->ids, row, err);
    if (!rc && s->pj) rc = sieve_ds_jsonl_seek(s->pj, row, err);
    if (!rc && s->pt) rc = sieve_ds_tsv_seek(s->pt, row, err);
    if (rc) {
        s->failed = 1;
        return rc;
    }
    s->row = row;
    s->failed = 0;
    return 0;
}

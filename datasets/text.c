/* text.c: line-oriented record files: JSON lines ({"id","vector","payload"}), MS MARCO
 * style TSV (id<TAB>text), qrels, and a fast line count. Must not: buffer a whole file
 * (qrels excepted: they are small and loaded whole by design). Every error names the file
 * and the 1-based line. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ds_internal.h"

/* ------------------------------------------------------------ JSON lines reader */

struct sieve_ds_jsonl {
    sieve__ds_lines lines;
    unsigned flags;
    uint64_t consumed;    /* records consumed (also the index of the next record) */
    int shape_known;      /* the first record fixed whether records carry vectors */
    int has_vectors;
    uint32_t dim;
    uint64_t first_line;  /* line of the record that fixed the shape */
    float *vec;
    size_t vec_cap;
    char *payload;        /* json_dumps result of the last record */
};

int sieve_ds_jsonl_open(const char *path, unsigned flags, sieve_ds_jsonl **out,
                        sieve_ds_error *err) {
    if (out) *out = NULL;
    if (!path || !out) return sieve__ds_fail(err, SIEVE_EINVAL, "jsonl: NULL path or out");
    sieve_ds_jsonl *r = calloc(1, sizeof *r);
    if (!r) return sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", path);
    int rc = sieve__ds_lines_open(&r->lines, path, err);
    if (rc) {
        free(r);
        return rc;
    }
    r->flags = flags;
    *out = r;
    return 0;
}

void sieve_ds_jsonl_close(sieve_ds_jsonl *r) {
    if (!r) return;
    sieve__ds_lines_close(&r->lines);
    free(r->vec);
    free(r->payload);
    free(r);
}

uint64_t sieve_ds_jsonl_tell(const sieve_ds_jsonl *r) { return r->consumed; }
uint64_t sieve__ds_jsonl_file_bytes(const sieve_ds_jsonl *r) { return r->lines.file_bytes; }
uint64_t sieve_ds_jsonl_tell_bytes(const sieve_ds_jsonl *r) {
    return sieve__ds_lines_tell(&r->lines);
}

static const char *json_type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "a value";
}

/* Parses a JSON id value (non-negative integer, UUID string or decimal string). */
static int json_id(const json_t *v, sieve_ds_id *id, const char *path, uint64_t line,
                   sieve_ds_error *err) {
    if (json_is_integer(v)) {
        json_int_t x = json_integer_value(v);
        if (x < 0)
            return sieve__ds_fail(err, SIEVE_EPARSE,
                                  "%s:%llu: \"id\" is %lld; expected a non-negative integer or "
                                  "a UUID string",
                                  path, (unsigned long long)line, (long long)x);
        memset(id, 0, sizeof *id);
        id->num = (uint64_t)x;
        return 0;
    }
    if (json_is_string(v)) {
        if (sieve_ds_id_parse(json_string_value(v), json_string_length(v), id) == 0) return 0;
        return sieve__ds_fail(err, SIEVE_EPARSE,
                              "%s:%llu: \"id\" is \"%.60s\"; expected a UUID or a decimal "
                              "integer string",
                              path, (unsigned long long)line, json_string_value(v));
    }
    return sieve__ds_fail(err, SIEVE_EPARSE,
                          "%s:%llu: \"id\" is %s; expected a non-negative integer or a UUID "
                          "string",
                          path, (unsigned long long)line, json_type_name(v));
}

static int parse_vector(sieve_ds_jsonl *r, const json_t *v, uint64_t line, sieve_ds_error *err) {
    const char *path = r->lines.path;
    if (!json_is_array(v))
        return sieve__ds_fail(err, SIEVE_EPARSE,
                              "%s:%llu: \"vector\" is %s; expected an array of numbers", path,
                              (unsigned long long)line, json_type_name(v));
    size_t n = json_array_size(v);
    if (n == 0 || n > SIEVE_DS_MAX_DIM)
        return sieve__ds_fail(err, SIEVE_EDIM,
                              "%s:%llu: \"vector\" has %zu values; expected 1 to %u", path,
                              (unsigned long long)line, n, SIEVE_DS_MAX_DIM);
    if (r->shape_known && r->has_vectors && n != r->dim)
        return sieve__ds_fail(err, SIEVE_EDIM,
                              "%s:%llu: \"vector\" has %zu values; expected %u (as on line %llu)",
                              path, (unsigned long long)line, n, r->dim,
                              (unsigned long long)r->first_line);
    if (n > r->vec_cap) {
        float *nv = realloc(r->vec, n * sizeof *nv);
        if (!nv) return sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", path);
        r->vec = nv;
        r->vec_cap = n;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(v, i);
        if (!json_is_number(x))
            return sieve__ds_fail(err, SIEVE_EPARSE,
                                  "%s:%llu: \"vector\"[%zu] is %s; expected a number", path,
                                  (unsigned long long)line, i, json_type_name(x));
        double d = json_number_value(x);
        /* the float32 rounding decides: 9-digit FLT_MAX (3.40282347e+38) is a little above
           FLT_MAX as a double but rounds to it */
        if (isinf((float)d) && !(r->flags & SIEVE_DS_ALLOW_NONFINITE))
            return sieve__ds_fail(err, SIEVE_ERANGE,
                                  "%s:%llu: \"vector\"[%zu] is %g; expected a value within the "
                                  "float32 range (|x| <= 3.4e38)",
                                  path, (unsigned long long)line, i, d);
        r->vec[i] = (float)d;
    }
    return (int)n;
}

/* The raw text of a JSON object's top-level member `key` in line (already validated by
 * jansson), so a payload is handed on exactly as written (numbers keep their digits).
 * Returns 0 and the span, or -1 if not found (then the caller re-serialises). */
static size_t skip_ws_json(const char *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) i++;
    return i;
}

static size_t skip_string_json(const char *s, size_t n, size_t i) { /* s[i] == '"' */
    for (i++; i < n; i++) {
        if (s[i] == '\\') i++;
        else if (s[i] == '"') return i + 1;
    }
    return n;
}

static size_t skip_value_json(const char *s, size_t n, size_t i) {
    if (i >= n) return n;
    if (s[i] == '"') return skip_string_json(s, n, i);
    if (s[i] == '{' || s[i] == '[') {
        int depth = 0;
        while (i < n) {
            if (s[i] == '"') {
                i = skip_string_json(s, n, i);
                continue;
            }
            if (s[i] == '{' || s[i] == '[') depth++;
            else if (s[i] == '}' || s[i] == ']') {
                if (--depth == 0) return i + 1;
            }
            i++;
        }
        return n;
    }
    while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\t' &&
           s[i] != '\r' && s[i] != '\n')
        i++;
    return i;
}

static int raw_member(const char *s, size_t n, const char *key, size_t *b, size_t *e) {
    size_t klen = strlen(key);
    size_t i = skip_ws_json(s, n, 0);
    if (i >= n || s[i] != '{') return -1;
    i++;
    for (;;) {
        i = skip_ws_json(s, n, i);
        if (i >= n || s[i] != '"') return -1;
        size_t ks = i + 1, kend = skip_string_json(s, n, i);
        int match = kend - ks - 1 == klen && !memcmp(s + ks, key, klen);
        i = skip_ws_json(s, n, kend);
        if (i >= n || s[i] != ':') return -1;
        i = skip_ws_json(s, n, i + 1);
        size_t ve = skip_value_json(s, n, i);
        if (match) {
            *b = i;
            *e = ve;
            return 0;
        }
        i = skip_ws_json(s, n, ve);
        if (i >= n || s[i] != ',') return -1;
        i++;
    }
}

int sieve_ds_jsonl_next(sieve_ds_jsonl *r, sieve_ds_record *rec, int *got,
                        sieve_ds_error *err) {
    if (got) *got = 0;
    if (!r || !rec || !got) return sieve__ds_fail(err, SIEVE_EINVAL, "jsonl: NULL argument");
    const char *path = r->lines.path;
    char *line;
    size_t len;
    int have;
    for (;;) {
        int rc = sieve__ds_lines_next(&r->lines, &line, &len, &have, err);
        if (rc) return rc;
        if (!have) return 0;
        if (!sieve__ds_blank(line, len)) break;
    }
    uint64_t ln = r->lines.line_no;
    r->consumed++; /* a bad record is consumed too: the next call reads the next line */
    free(r->payload);
    r->payload = NULL;
    memset(rec, 0, sizeof *rec);
    rec->line = ln;
    rec->index = r->consumed - 1;

    json_error_t je;
    json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return sieve__ds_fail(err, SIEVE_EPARSE,
                              "%s:%llu: column %d: %s; expected one JSON object per line",
                              path, (unsigned long long)ln, je.column, je.text);
    int rc = 0;
    if (!json_is_object(root)) {
        rc = sieve__ds_fail(err, SIEVE_EPARSE, "%s:%llu: line is %s; expected a JSON object",
                            path, (unsigned long long)ln, json_type_name(root));
        goto out;
    }
    const char *key;
    json_t *val;
    json_t *vid = NULL, *vvec = NULL, *vpay = NULL;
    json_object_foreach(root, key, val) {
        if (!strcmp(key, "id")) vid = val;
        else if (!strcmp(key, "vector")) vvec = val;
        else if (!strcmp(key, "payload")) vpay = val;
        else {
            rc = sieve__ds_fail(err, SIEVE_EPARSE,
                                "%s:%llu: unknown key \"%.60s\"; expected \"id\", \"vector\" and "
                                "\"payload\"",
                                path, (unsigned long long)ln, key);
            goto out;
        }
    }
    if (vid) {
        if ((rc = json_id(vid, &rec->id, path, ln, err))) goto out;
        rec->has_id = 1;
    }
    if (r->shape_known && r->has_vectors && !vvec) {
        rc = sieve__ds_fail(err, SIEVE_EDIM,
                            "%s:%llu: no \"vector\"; expected one of %u values (line %llu has "
                            "one)",
                            path, (unsigned long long)ln, r->dim,
                            (unsigned long long)r->first_line);
        goto out;
    }
    if (r->shape_known && !r->has_vectors && vvec) {
        rc = sieve__ds_fail(err, SIEVE_EDIM,
                            "%s:%llu: has a \"vector\" but line %llu has none; expected every "
                            "record alike",
                            path, (unsigned long long)ln, (unsigned long long)r->first_line);
        goto out;
    }
    if (vvec) {
        int n = parse_vector(r, vvec, ln, err);
        if (n < 0) {
            rc = n;
            goto out;
        }
        rec->vector = r->vec;
        rec->dim = (uint32_t)n;
    }
    if (vpay && !json_is_null(vpay)) {
        if (!json_is_object(vpay)) {
            rc = sieve__ds_fail(err, SIEVE_EPARSE,
                                "%s:%llu: \"payload\" is %s; expected an object or null", path,
                                (unsigned long long)ln, json_type_name(vpay));
            goto out;
        }
        size_t pb, pe;
        if (raw_member(line, len, "payload", &pb, &pe) == 0) {
            r->payload = malloc(pe - pb + 1);
            if (r->payload) {
                memcpy(r->payload, line + pb, pe - pb);
                r->payload[pe - pb] = 0;
            }
        } else {
            r->payload = json_dumps(vpay, JSON_COMPACT);
        }
        if (!r->payload) {
            rc = sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", path);
            goto out;
        }
        rec->payload = r->payload;
        rec->payload_len = strlen(r->payload);
    }
    if (!r->shape_known) {
        r->shape_known = 1;
        r->has_vectors = vvec != NULL;
        r->dim = rec->dim;
        r->first_line = ln;
    }
    *got = 1;
out:
    json_decref(root);
    return rc;
}

/* Consumes non-blank lines until `index` records have been consumed. */
static int skip_records(sieve__ds_lines *l, uint64_t *consumed, uint64_t index,
                        sieve_ds_error *err) {
    if (index < *consumed) {
        sieve__ds_lines_rewind(l);
        *consumed = 0;
    }
    while (*consumed < index) {
        char *line;
        size_t len;
        int have;
        int rc = sieve__ds_lines_next(l, &line, &len, &have, err);
        if (rc) return rc;
        if (!have)
            return sieve__ds_fail(err, SIEVE_ERANGE,
                                  "%s: cannot seek to record %llu; the file has %llu records",
                                  l->path, (unsigned long long)index,
                                  (unsigned long long)*consumed);
        if (!sieve__ds_blank(line, len)) (*consumed)++;
    }
    return 0;
}

int sieve_ds_jsonl_seek(sieve_ds_jsonl *r, uint64_t index, sieve_ds_error *err) {
    if (!r) return sieve__ds_fail(err, SIEVE_EINVAL, "jsonl: NULL reader");
    return skip_records(&r->lines, &r->consumed, index, err);
}

/* ------------------------------------------------------------ JSON lines writer */

struct sieve_ds_jsonl_writer {
    sieve__ds_out out;
    uint64_t count;
    char *line;
    size_t len, cap;
};

int sieve_ds_jsonl_writer_open(const char *path, sieve_ds_jsonl_writer **out,
                               sieve_ds_error *err) {
    if (out) *out = NULL;
    if (!path || !out) return sieve__ds_fail(err, SIEVE_EINVAL, "jsonl writer: NULL argument");
    sieve_ds_jsonl_writer *w = calloc(1, sizeof *w);
    if (!w) return sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", path);
    int rc = sieve__ds_out_open(&w->out, path, err);
    if (rc) {
        free(w);
        return rc;
    }
    *out = w;
    return 0;
}

#define APPEND(s, n)                                                                       \
    do {                                                                                   \
        if (sieve__ds_buf_append(&w->line, &w->len, &w->cap, (s), (n)))                    \
            return sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", w->out.path);    \
    } while (0)

int sieve_ds_jsonl_write(sieve_ds_jsonl_writer *w, const sieve_ds_id *id, const float *vector,
                         uint32_t dim, const char *payload, sieve_ds_error *err) {
    if (!w || (!vector && dim)) return sieve__ds_fail(err, SIEVE_EINVAL, "jsonl write: NULL argument");
    const char *path = w->out.path;
    if (vector) {
        if (dim == 0 || dim > SIEVE_DS_MAX_DIM)
            return sieve__ds_fail(err, SIEVE_EINVAL, "%s: record %llu: dimension %u; expected 1 to %u",
                                  path, (unsigned long long)w->count, dim, SIEVE_DS_MAX_DIM);
        size_t bad = sieve__ds_find_nonfinite(vector, dim);
        if (bad < dim)
            return sieve__ds_fail(err, SIEVE_ENONFINITE,
                                  "%s: record %llu, element %zu is not finite; JSON has no NaN or "
                                  "infinity",
                                  path, (unsigned long long)w->count, bad);
    }
    char *pay = NULL;
    if (payload) {
        json_error_t je;
        json_t *p = json_loads(payload, 0, &je);
        if (!p || !json_is_object(p)) {
            json_decref(p);
            return sieve__ds_fail(err, SIEVE_EPARSE,
                                  "%s: record %llu: payload is not a JSON object (%s)", path,
                                  (unsigned long long)w->count, p ? "another type" : je.text);
        }
        /* Written as given (numbers keep their digits) unless it spans lines. */
        pay = strpbrk(payload, "\r\n") ? json_dumps(p, JSON_COMPACT) : sieve__ds_strdup(payload);
        json_decref(p);
        if (!pay) return sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", path);
    }
    w->len = 0;
    int first = 1;
    int rc = 0;
    if (sieve__ds_buf_append(&w->line, &w->len, &w->cap, "{", 1)) goto nomem;
    if (id) {
        char b[64];
        int n;
        if (id->is_uuid) {
            char u[40];
            sieve_ds_id_format(id, u);
            n = snprintf(b, sizeof b, "\"id\":\"%s\"", u);
        } else if (id->num > (uint64_t)INT64_MAX) {
            n = snprintf(b, sizeof b, "\"id\":\"%llu\"", (unsigned long long)id->num);
        } else {
            n = snprintf(b, sizeof b, "\"id\":%llu", (unsigned long long)id->num);
        }
        if (sieve__ds_buf_append(&w->line, &w->len, &w->cap, b, (size_t)n)) goto nomem;
        first = 0;
    }
    if (vector) {
        const char *k = first ? "\"vector\":[" : ",\"vector\":[";
        if (sieve__ds_buf_append(&w->line, &w->len, &w->cap, k, strlen(k))) goto nomem;
        for (uint32_t j = 0; j < dim; j++) {
            char b[32];
            /* "-0" would read back as the integer 0: keep the sign of zero. */
            int n = vector[j] == 0.0f && signbit(vector[j])
                        ? snprintf(b, sizeof b, j ? ",-0.0" : "-0.0")
                        : snprintf(b, sizeof b, j ? ",%.9g" : "%.9g", (double)vector[j]);
            if (sieve__ds_buf_append(&w->line, &w->len, &w->cap, b, (size_t)n)) goto nomem;
        }
        if (sieve__ds_buf_append(&w->line, &w->len, &w->cap, "]", 1)) goto nomem;
        first = 0;
    }
    if (pay) {
        const char *k = first ? "\"payload\":" : ",\"payload\":";
        if (sieve__ds_buf_append(&w->line, &w->len, &w->cap, k, strlen(k)) ||
            sieve__ds_buf_append(&w->line, &w->len, &w->cap, pay, strlen(pay)))
            goto nomem;
    }
    if (sieve__ds_buf_append(&w->line, &w->len, &w->cap, "}\n", 2)) goto nomem;
    free(pay);
    rc = sieve__ds_out_write(&w->out, w->line, w->len, err);
    if (!rc) w->count++;
    return rc;
nomem:
    free(pay);
    return sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", path);
}

int sieve_ds_jsonl_writer_close(sieve_ds_jsonl_writer *w, sieve_ds_error *err) {
    if (!w) return sieve__ds_fail(err, SIEVE_EINVAL, "jsonl writer: NULL");
    int rc = sieve__ds_out_commit(&w->out, err);
    free(w->line);
    free(w);
    return rc;
}

void sieve_ds_jsonl_writer_abort(sieve_ds_jsonl_writer *w) {
    if (!w) return;
    sieve__ds_out_abort(&w->out);
    free(w->line);
    free(w);
}

/* ------------------------------------------------------------ TSV */

struct sieve_ds_tsv {
    sieve__ds_lines lines;
    uint64_t consumed;
};

int sieve_ds_tsv_open(const char *path, sieve_ds_tsv **out, sieve_ds_error *err) {
    if (out) *out = NULL;
    if (!path || !out) return sieve__ds_fail(err, SIEVE_EINVAL, "tsv: NULL path or out");
    sieve_ds_tsv *r = calloc(1, sizeof *r);
    if (!r) return sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", path);
    int rc = sieve__ds_lines_open(&r->lines, path, err);
    if (rc) {
        free(r);
        return rc;
    }
    *out = r;
    return 0;
}

void sieve_ds_tsv_close(sieve_ds_tsv *r) {
    if (!r) return;
    sieve__ds_lines_close(&r->lines);
    free(r);
}

uint64_t sieve_ds_tsv_tell(const sieve_ds_tsv *r) { return r->consumed; }
uint64_t sieve_ds_tsv_tell_bytes(const sieve_ds_tsv *r) { return sieve__ds_lines_tell(&r->lines); }

int sieve_ds_tsv_next(sieve_ds_tsv *r, sieve_ds_text *rec, int *got, sieve_ds_error *err) {
    if (got) *got = 0;
    if (!r || !rec || !got) return sieve__ds_fail(err, SIEVE_EINVAL, "tsv: NULL argument");
    char *line;
    size_t len;
    int have;
    for (;;) {
        int rc = sieve__ds_lines_next(&r->lines, &line, &len, &have, err);
        if (rc) return rc;
        if (!have) return 0;
        if (!sieve__ds_blank(line, len)) break;
    }
    uint64_t ln = r->lines.line_no;
    r->consumed++;
    const char *path = r->lines.path;
    char *tab = memchr(line, '\t', len);
    if (!tab)
        return sieve__ds_fail(err, SIEVE_EPARSE,
                              "%s:%llu: no tab; expected id<TAB>text (byte offset %llu)", path,
                              (unsigned long long)ln, (unsigned long long)r->lines.line_offset);
    memset(rec, 0, sizeof *rec);
    if (sieve_ds_id_parse(line, (size_t)(tab - line), &rec->id))
        return sieve__ds_fail(err, SIEVE_EPARSE,
                              "%s:%llu: id \"%.*s\" is not a decimal integer or a UUID; expected "
                              "id<TAB>text",
                              path, (unsigned long long)ln, (int)((tab - line) > 40 ? 40 : (tab - line)),
                              line);
    rec->line = ln;
    rec->index = r->consumed - 1;
    rec->text = tab + 1;
    rec->text_len = len - (size_t)(tab + 1 - line);
    *got = 1;
    return 0;
}

int sieve_ds_tsv_seek(sieve_ds_tsv *r, uint64_t index, sieve_ds_error *err) {
    if (!r) return sieve__ds_fail(err, SIEVE_EINVAL, "tsv: NULL reader");
    return skip_records(&r->lines, &r->consumed, index, err);
}

int sieve_ds_tsv_save(const char *path, const sieve_ds_id *ids, const char *const *texts,
                      size_t n, sieve_ds_error *err) {
    if (!path || (n && (!ids || !texts)))
        return sieve__ds_fail(err, SIEVE_EINVAL, "tsv save: NULL argument");
    for (size_t i = 0; i < n; i++) {
        if (!texts[i])
            return sieve__ds_fail(err, SIEVE_EINVAL, "%s: text %zu is NULL", path, i);
        if (strpbrk(texts[i], "\t\r\n"))
            return sieve__ds_fail(err, SIEVE_EINVAL,
                                  "%s: text %zu holds a tab or line break; expected one line "
                                  "without tabs",
                                  path, i);
    }
    sieve__ds_out o;
    int rc = sieve__ds_out_open(&o, path, err);
    if (rc) return rc;
    for (size_t i = 0; i < n && !rc; i++) {
        char idb[40];
        sieve_ds_id_format(&ids[i], idb);
        rc = sieve__ds_out_write(&o, idb, strlen(idb), err);
        if (!rc) rc = sieve__ds_out_write(&o, "\t", 1, err);
        if (!rc) rc = sieve__ds_out_write(&o, texts[i], strlen(texts[i]), err);
        if (!rc) rc = sieve__ds_out_write(&o, "\n", 1, err);
    }
    if (rc) {
        sieve__ds_out_abort(&o);
        return rc;
    }
    return sieve__ds_out_commit(&o, err);
}

/* ------------------------------------------------------------ qrels */

static int parse_u64(const char *s, size_t n, uint64_t *out) {
    if (n == 0 || n > 20) return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static int parse_i32(const char *s, size_t n, int32_t *out) {
    int neg = n > 0 && s[0] == '-';
    uint64_t v;
    if (parse_u64(s + neg, n - (size_t)neg, &v) || v > (neg ? 2147483648ull : 2147483647ull))
        return -1;
    *out = neg ? (int32_t)(-(int64_t)v) : (int32_t)v;
    return 0;
}

int sieve_ds_qrels_load(const char *path, sieve_ds_qrel **out, size_t *n, sieve_ds_error *err) {
    if (out) *out = NULL;
    if (n) *n = 0;
    if (!path || !out || !n) return sieve__ds_fail(err, SIEVE_EINVAL, "qrels: NULL argument");
    sieve__ds_lines l;
    int rc = sieve__ds_lines_open(&l, path, err);
    if (rc) return rc;
    sieve_ds_qrel *q = NULL;
    size_t cnt = 0, cap = 0;
    int form = 0; /* fields per line, fixed by the first line */
    uint64_t form_line = 0;
    for (;;) {
        char *line;
        size_t len;
        int have;
        if ((rc = sieve__ds_lines_next(&l, &line, &len, &have, err))) break;
        if (!have) break;
        if (sieve__ds_blank(line, len)) continue;
        const char *f[5];
        size_t fl[5];
        int nf = 0;
        size_t i = 0;
        while (i < len) {
            while (i < len && (line[i] == ' ' || line[i] == '\t')) i++;
            if (i >= len) break;
            size_t s = i;
            while (i < len && line[i] != ' ' && line[i] != '\t') i++;
            if (nf < 5) {
                f[nf] = line + s;
                fl[nf] = i - s;
            }
            nf++;
        }
        if (nf != 2 && nf != 4) {
            rc = sieve__ds_fail(err, SIEVE_EPARSE,
                                "%s:%llu: %d fields; expected 4 (qid 0 pid relevance) or 2 "
                                "(qid<TAB>pid)",
                                path, (unsigned long long)l.line_no, nf);
            break;
        }
        if (form && nf != form) {
            rc = sieve__ds_fail(err, SIEVE_EPARSE,
                                "%s:%llu: %d fields; expected %d like line %llu", path,
                                (unsigned long long)l.line_no, nf, form,
                                (unsigned long long)form_line);
            break;
        }
        if (!form) {
            form = nf;
            form_line = l.line_no;
        }
        sieve_ds_qrel r = {0, 0, 1};
        int pi = nf == 4 ? 2 : 1;
        if (parse_u64(f[0], fl[0], &r.qid) || parse_u64(f[pi], fl[pi], &r.pid) ||
            (nf == 4 && parse_i32(f[3], fl[3], &r.rel))) {
            rc = sieve__ds_fail(err, SIEVE_EPARSE,
                                "%s:%llu: expected %s with decimal integers", path,
                                (unsigned long long)l.line_no,
                                nf == 4 ? "\"qid 0 pid relevance\"" : "\"qid<TAB>pid\"");
            break;
        }
        if (cnt == cap) {
            size_t ncap = cap ? cap * 2 : 1024;
            sieve_ds_qrel *nq = realloc(q, ncap * sizeof *nq);
            if (!nq) {
                rc = sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", path);
                break;
            }
            q = nq;
            cap = ncap;
        }
        q[cnt++] = r;
    }
    sieve__ds_lines_close(&l);
    if (rc) {
        free(q);
        return rc;
    }
    *out = q;
    *n = cnt;
    return 0;
}

int sieve_ds_qrels_save(const char *path, const sieve_ds_qrel *q, size_t n, int two_column,
                        sieve_ds_error *err) {
    if (!path || (n && !q)) return sieve__ds_fail(err, SIEVE_EINVAL, "qrels save: NULL argument");
    if (two_column)
        for (size_t i = 0; i < n; i++)
            if (q[i].rel != 1)
                return sieve__ds_fail(err, SIEVE_EINVAL,
                                      "%s: qrel %zu has relevance %d; the two-column form "
                                      "expects 1",
                                      path, i, (int)q[i].rel);
    sieve__ds_out o;
    int rc = sieve__ds_out_open(&o, path, err);
    if (rc) return rc;
    for (size_t i = 0; i < n && !rc; i++) {
        char b[96];
        int len = two_column
                      ? snprintf(b, sizeof b, "%llu\t%llu\n", (unsigned long long)q[i].qid,
                                 (unsigned long long)q[i].pid)
                      : snprintf(b, sizeof b, "%llu 0 %llu %d\n", (unsigned long long)q[i].qid,
                                 (unsigned long long)q[i].pid, (int)q[i].rel);
        rc = sieve__ds_out_write(&o, b, (size_t)len, err);
    }
    if (rc) {
        sieve__ds_out_abort(&o);
        return rc;
    }
    return sieve__ds_out_commit(&o, err);
}

/* ------------------------------------------------------------ line count */

int sieve_ds_count_lines(const char *path, uint64_t *out, sieve_ds_error *err) {
    if (!path || !out) return sieve__ds_fail(err, SIEVE_EINVAL, "count: NULL argument");
    *out = 0;
    sieve__ds_lines l;
    int rc = sieve__ds_lines_open(&l, path, err);
    if (rc) return rc;
    uint64_t n = 0;
    for (;;) {
        char *line;
        size_t len;
        int have;
        if ((rc = sieve__ds_lines_next(&l, &line, &len, &have, err)) || !have) break;
        if (!sieve__ds_blank(line, len)) n++;
    }
    sieve__ds_lines_close(&l);
    if (!rc) *out = n;
    return rc;
}

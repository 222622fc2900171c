/* jv.c: JSON validation helpers of sieve-server.
 *
 * Owns: checking request fields (types, ranges, finite float32 values, dimensions, point
 * ids, unknown keys) with messages that name the field and what was expected, and the
 * with_payload / with_vector selectors. Must not: touch the store or reply to requests
 * (callers pass the sieve__err on to reply.c).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

const char *sieve__jv_type(const json_t *j) {
    if (!j) return "nothing";
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "an unknown value";
}

/* "path.key", or "key" at the top level. */
static void field(char *buf, size_t n, const char *path, const char *key) {
    if (path && *path) sieve__pathf(buf, n, "%s.%s", path, key);
    else sieve__pathf(buf, n, "%s", key);
}

static int in_list(const char *key, const char *const *list) {
    for (; list && *list; list++)
        if (!strcmp(key, *list)) return 1;
    return 0;
}

int sieve__jv_keys(const json_t *obj, const char *path, const char *const *allowed,
                   const char *const *ignored, sieve__err *e) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        if (in_list(key, allowed) || in_list(key, ignored)) continue;
        char expected[384] = "";
        size_t off = 0;
        for (const char *const *a = allowed; a && *a && off < sizeof expected - 1; a++) {
            int w = sieve__pathf(expected + off, sizeof expected - off, "%s%s",
                             a == allowed ? "" : ", ", *a);
            if (w < 0) break;
            off += (size_t)w;
        }
        char f[320];
        field(f, sizeof f, path, key);
        return sieve__fail(e, 400, "%s: unknown field (expected one of: %s)", f, expected);
    }
    return 0;
}

json_t *sieve__jv_get(const json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    return v && !json_is_null(v) ? v : NULL;
}

int sieve__jv_int(const json_t *obj, const char *key, const char *path, long long min,
                  long long max, long long def, long long *out, sieve__err *e) {
    json_t *v = sieve__jv_get(obj, key);
    if (!v) {
        *out = def;
        return 0;
    }
    char f[320];
    field(f, sizeof f, path, key);
    if (!json_is_integer(v))
        return sieve__fail(e, 400, "%s: expected an integer from %lld to %lld, got %s", f,
                           min, max, sieve__jv_type(v));
    long long x = json_integer_value(v);
    if (x < min || x > max)
        return sieve__fail(e, 400, "%s: expected an integer from %lld to %lld, got %lld", f,
                           min, max, x);
    *out = x;
    return 0;
}

int sieve__jv_bool(const json_t *obj, const char *key, const char *path, int def, int *out,
                   sieve__err *e) {
    json_t *v = sieve__jv_get(obj, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v)) {
        char f[320];
        field(f, sizeof f, path, key);
        return sieve__fail(e, 400, "%s: expected true or false, got %s", f,
                           sieve__jv_type(v));
    }
    *out = json_is_true(v);
    return 0;
}

int sieve__jv_float(const json_t *j, const char *path, float *out, sieve__err *e) {
    double d;
    if (json_is_integer(j)) d = (double)json_integer_value(j);
    else if (json_is_real(j)) d = json_real_value(j);
    else return sieve__fail(e, 400, "%s: expected a number, got %s", path, sieve__jv_type(j));
    float f = (float)d;
    if (!isfinite(d) || !isfinite(f))
        return sieve__fail(e, 400, "%s: expected a finite number within float32 range "
                                   "(|x| <= 3.4028235e38), got %g", path, d);
    *out = f;
    return 0;
}

int sieve__jv_vector(const json_t *j, const char *path, uint32_t dim, float *out,
                     sieve__err *e) {
    if (!json_is_array(j)) {
        if (json_is_object(j))
            return sieve__fail(e, 400, "%s: expected an array of %u numbers, got an object "
                                       "(named and sparse vectors are not supported)",
                               path, dim);
        return sieve__fail(e, 400, "%s: expected an array of %u numbers, got %s", path, dim,
                           sieve__jv_type(j));
    }
    size_t n = json_array_size(j);
    if (n != dim)
        return sieve__fail(e, 400, "%s: expected %u numbers (the collection's dimension), "
                                   "got %zu", path, dim, n);
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(j, i);
        double d;
        if (json_is_real(x)) d = json_real_value(x);
        else if (json_is_integer(x)) d = (double)json_integer_value(x);
        else
            return sieve__fail(e, 400, "%s[%zu]: expected a number, got %s", path, i,
                               sieve__jv_type(x));
        float f = (float)d;
        if (!isfinite(f))
            return sieve__fail(e, 400, "%s[%zu]: expected a finite number within float32 "
                                       "range (|x| <= 3.4028235e38), got %g", path, i, d);
        out[i] = f;
    }
    return 0;
}

int sieve__jv_id(const json_t *j, const char *path, sieve_point_id *out, sieve__err *e) {
    memset(out, 0, sizeof *out);
    if (json_is_integer(j)) {
        long long v = json_integer_value(j);
        if (v < 0)
            return sieve__fail(e, 400, "%s: expected an unsigned integer or a UUID string, "
                                       "got %lld", path, v);
        out->kind = SIEVE_ID_NUM;
        out->num = (uint64_t)v;
        return 0;
    }
    if (json_is_string(j)) {
        const char *s = json_string_value(j);
        if (json_string_length(j) == strlen(s) && sieve_uuid_parse(s, out->uuid) == 0) {
            out->kind = SIEVE_ID_UUID;
            return 0;
        }
        return sieve__fail(e, 400, "%s: expected an unsigned integer or a UUID string, got "
                                   "\"%.64s\" (not a UUID)", path, s);
    }
    return sieve__fail(e, 400, "%s: expected an unsigned integer or a UUID string, got %s",
                       path, sieve__jv_type(j));
}

int sieve__id_parse_text(const char *text, sieve_point_id *out) {
    memset(out, 0, sizeof *out);
    if (!text || !*text) return SIEVE_EINVAL;
    if (text[0] >= '0' && text[0] <= '9') {
        const char *p = text;
        while (*p >= '0' && *p <= '9') p++;
        if (!*p) {
            errno = 0;
            char *end = NULL;
            unsigned long long v = strtoull(text, &end, 10);
            if (errno || *end || v > (unsigned long long)INT64_MAX) return SIEVE_ERANGE;
            out->kind = SIEVE_ID_NUM;
            out->num = v;
            return 0;
        }
    }
    if (sieve_uuid_parse(text, out->uuid) == 0) {
        out->kind = SIEVE_ID_UUID;
        return 0;
    }
    return SIEVE_EINVAL;
}

int sieve__fmt_id(char *out, const sieve_point_id *id) {
    if (id->kind == SIEVE_ID_NUM) { /* decimal digits, written backwards (no printf) */
        char d[20];
        int n = 0;
        uint64_t v = id->num;
        do {
            d[sizeof d - 1 - n++] = (char)('0' + v % 10u);
            v /= 10u;
        } while (v);
        memcpy(out, d + sizeof d - n, (size_t)n);
        out[n] = 0;
        return n;
    }
    char u[37];
    sieve_uuid_format(id->uuid, u);
    out[0] = '"';
    memcpy(out + 1, u, 36);
    out[37] = '"';
    out[38] = 0;
    return 38;
}

void sieve__sbuf_id(sieve__sbuf *b, const sieve_point_id *id) {
    char buf[SIEVE__ID_JSON_MAX];
    const int n = sieve__fmt_id(buf, id);
    sieve__sbuf_put(b, buf, (size_t)n);
}

json_t *sieve__id_json(const sieve_point_id *id) {
    if (id->kind == SIEVE_ID_NUM) return json_integer((json_int_t)id->num);
    char u[37];
    sieve_uuid_format(id->uuid, u);
    return json_string(u);
}

/* ---------------------------------------------------------------- with_payload */

void sieve__psel_free(sieve__psel *p) {
    for (size_t i = 0; i < p->n; i++) free(p->keys[i]);
    free(p->keys);
    memset(p, 0, sizeof *p);
}

static int psel_keys(const json_t *arr, const char *path, sieve__psel *out, sieve__err *e) {
    size_t n = json_array_size(arr);
    out->keys = n ? calloc(n, sizeof *out->keys) : NULL;
    if (n && !out->keys) return sieve__fail(e, 500, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *k = json_array_get(arr, i);
        if (!json_is_string(k) || json_string_length(k) == 0) {
            sieve__psel_free(out);
            return sieve__fail(e, 400, "%s[%zu]: expected a payload field name (a non-empty "
                                       "string), got %s", path, i, sieve__jv_type(k));
        }
        out->keys[i] = strdup(json_string_value(k));
        if (!out->keys[i]) {
            sieve__psel_free(out);
            return sieve__fail(e, 500, "out of memory");
        }
        out->n = i + 1;
    }
    return 0;
}

int sieve__psel_parse(const json_t *j, const char *path, sieve__psel_mode def_mode,
                      sieve__psel *out, sieve__err *e) {
    memset(out, 0, sizeof *out);
    if (!j || json_is_null(j)) {
        out->mode = def_mode;
        return 0;
    }
    if (json_is_boolean(j)) {
        out->mode = json_is_true(j) ? SIEVE_PSEL_ALL : SIEVE_PSEL_NONE;
        return 0;
    }
    if (json_is_array(j)) {
        out->mode = SIEVE_PSEL_INCLUDE;
        return psel_keys(j, path, out, e);
    }
    if (json_is_object(j) && json_object_size(j) == 1) {
        json_t *inc = json_object_get(j, "include"), *exc = json_object_get(j, "exclude");
        json_t *arr = inc ? inc : exc;
        if (arr && json_is_array(arr)) {
            char f[320];
            sieve__pathf(f, sizeof f, "%s.%s", path, inc ? "include" : "exclude");
            out->mode = inc ? SIEVE_PSEL_INCLUDE : SIEVE_PSEL_EXCLUDE;
            return psel_keys(arr, f, out, e);
        }
    }
    return sieve__fail(e, 400, "%s: expected true, false, a list of payload field names, "
                               "{\"include\": [...]} or {\"exclude\": [...]}, got %s",
                       path, sieve__jv_type(j));
}

/* Splits a dotted key into its first segment (into seg) and the rest (returned, or NULL). */
static const char *first_segment(const char *key, char *seg, size_t n) {
    const char *dot = strchr(key, '.');
    size_t len = dot ? (size_t)(dot - key) : strlen(key);
    if (len >= n) len = n - 1;
    memcpy(seg, key, len);
    seg[len] = 0;
    return dot ? dot + 1 : NULL;
}

/* Copies the value at dotted path key of src into dst, creating objects on the way. */
static void include_path(json_t *dst, const json_t *src, const char *key) {
    char seg[256];
    const char *rest = first_segment(key, seg, sizeof seg);
    json_t *v = json_object_get(src, seg);
    if (!v) return;
    if (!rest) {
        json_object_set(dst, seg, v);
        return;
    }
    if (!json_is_object(v)) return;
    json_t *sub = json_object_get(dst, seg);
    if (!sub || !json_is_object(sub)) {
        sub = json_object();
        if (!sub || json_object_set_new(dst, seg, sub)) return;
    }
    include_path(sub, v, rest);
}

static void exclude_path(json_t *obj, const char *key) {
    char seg[256];
    const char *rest = first_segment(key, seg, sizeof seg);
    if (!rest) {
        json_object_del(obj, seg);
        return;
    }
    json_t *v = json_object_get(obj, seg);
    if (v && json_is_object(v)) exclude_path(v, rest);
}

int sieve__psel_write(const sieve__psel *p, const char *json, size_t len, sieve__sbuf *out) {
    if (p->mode == SIEVE_PSEL_NONE) {
        sieve__sbuf_puts(out, "null");
        return 0;
    }
    if (!json || !len) {
        sieve__sbuf_puts(out, "{}");
        return 0;
    }
    if (p->mode == SIEVE_PSEL_ALL) {
        sieve__sbuf_put(out, json, len);
        return 0;
    }
    json_t *src = json_loadb(json, len, 0, NULL);
    if (!src || !json_is_object(src)) {
        json_decref(src);
        return -1;
    }
    if (p->mode == SIEVE_PSEL_EXCLUDE) {
        for (size_t i = 0; i < p->n; i++) exclude_path(src, p->keys[i]);
        sieve__sbuf_json(out, src);
    } else {
        json_t *dst = json_object();
        if (!dst) out->failed = 1;
        for (size_t i = 0; dst && i < p->n; i++) include_path(dst, src, p->keys[i]);
        if (dst) sieve__sbuf_json(out, dst);
        json_decref(dst);
    }
    json_decref(src);
    return 0;
}

int sieve__jv_with_vector(const json_t *j, const char *path, int def, int *out,
                          sieve__err *e) {
    if (!j || json_is_null(j)) {
        *out = def;
        return 0;
    }
    if (json_is_boolean(j)) {
        *out = json_is_true(j);
        return 0;
    }
    if (json_is_array(j)) {
        /* A list of vector names: only the unnamed vector "" exists here. */
        int any = 0;
        for (size_t i = 0; i < json_array_size(j); i++) {
            json_t *x = json_array_get(j, i);
            if (!json_is_string(x) || json_string_length(x) != 0)
                return sieve__fail(e, 400, "%s[%zu]: named vectors are not supported (only "
                                           "the unnamed vector \"\"); use true or false",
                                   path, i);
            any = 1;
        }
        *out = any;
        return 0;
    }
    return sieve__fail(e, 400, "%s: expected true or false, got %s", path, sieve__jv_type(j));
}

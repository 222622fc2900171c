/* filter.c: Qdrant filters in sieve-server.
 *
 * Owns: compiling a filter object (validated up front, so unknown keys and wrong types are
 * a 400 before any work) and evaluating it against a point's id and payload; building the
 * allowed-row bitmap the kernel takes, by visiting a snapshot's live rows. Must not: know
 * about HTTP or the batcher.
 *
 * Supported: must / should / must_not (a list or a single condition), min_should
 * {conditions, min_count}, nested filters, field conditions on a payload key (dotted
 * paths; "a[]" walks an array) with match {value | any | except | text}, range {gt, gte,
 * lt, lte}, values_count, is_empty, is_null, and has_id. As in Qdrant, when the payload
 * value is an array a field condition holds if any element satisfies it, and a missing key
 * satisfies no field condition (is_empty aside). An empty should list is ignored.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

typedef enum {
    C_FILTER = 0,
    C_FIELD,
    C_HAS_ID,
    C_IS_EMPTY,
    C_IS_NULL,
} cond_kind;

typedef enum { M_NONE = 0, M_VALUE, M_ANY, M_EXCEPT, M_TEXT } match_kind;

typedef struct bounds {
    int has_gt, has_gte, has_lt, has_lte;
    double gt, gte, lt, lte;
} bounds;

typedef struct cond {
    cond_kind kind;
    char *key;              /* payload path (field, is_empty, is_null) */
    match_kind match;
    json_t *value;          /* M_VALUE: string/integer/bool; M_ANY/M_EXCEPT: array; M_TEXT */
    int has_range;
    bounds range;
    int has_count;
    bounds count;
    int is_empty, is_null;  /* field condition flags: -1 unset, else 0 or 1 */
    sieve_point_id *ids;    /* has_id, sorted */
    size_t n_ids;
    sieve__filter *sub;     /* nested filter */
} cond;

typedef struct clist {
    cond *c;
    size_t n;
} clist;

struct sieve__filter {
    clist must, should, must_not, min_should;
    int has_min_should;
    size_t min_count;
    int needs_payload;
};

/* ---------------------------------------------------------------- freeing */

static void clist_free(clist *l);

static void cond_free(cond *c) {
    free(c->key);
    json_decref(c->value);
    free(c->ids);
    sieve__filter_free(c->sub);
}

static void clist_free(clist *l) {
    for (size_t i = 0; i < l->n; i++) cond_free(&l->c[i]);
    free(l->c);
    l->c = NULL;
    l->n = 0;
}

void sieve__filter_free(sieve__filter *f) {
    if (!f) return;
    clist_free(&f->must);
    clist_free(&f->should);
    clist_free(&f->must_not);
    clist_free(&f->min_should);
    free(f);
}

/* ---------------------------------------------------------------- parsing */

static int parse_filter(const json_t *j, const char *path, int depth, sieve__filter **out,
                        sieve__err *e);

static int id_cmp(const void *a, const void *b) { return sieve_point_id_cmp(a, b); }

static int parse_bounds(const json_t *j, const char *path, int integers, bounds *b,
                        sieve__err *e) {
    static const char *const keys[] = {"gt", "gte", "lt", "lte", NULL};
    if (!json_is_object(j))
        return sieve__fail(e, 400, "%s: expected an object with gt, gte, lt or lte, got %s",
                           path, sieve__jv_type(j));
    if (sieve__jv_keys(j, path, keys, NULL, e)) return -1;
    memset(b, 0, sizeof *b);
    int *has[] = {&b->has_gt, &b->has_gte, &b->has_lt, &b->has_lte};
    double *val[] = {&b->gt, &b->gte, &b->lt, &b->lte};
    for (int i = 0; i < 4; i++) {
        json_t *v = sieve__jv_get(j, keys[i]);
        if (!v) continue;
        if (!(json_is_integer(v) || (!integers && json_is_real(v))))
            return sieve__fail(e, 400, "%s.%s: expected %s, got %s%s", path, keys[i],
                               integers ? "an integer" : "a number", sieve__jv_type(v),
                               json_is_string(v) ? " (datetime ranges are not supported)"
                                                 : "");
        *has[i] = 1;
        *val[i] = json_number_value(v);
    }
    return 0;
}

static int parse_match(const json_t *j, const char *path, cond *c, sieve__err *e) {
    static const char *const keys[] = {"value", "any", "except", "text", NULL};
    if (!json_is_object(j))
        return sieve__fail(e, 400, "%s: expected an object with value, any, except or text, "
                                   "got %s", path, sieve__jv_type(j));
    if (json_object_get(j, "phrase") || json_object_get(j, "text_any"))
        return sieve__fail(e, 400, "%s: phrase and text_any matches are not supported", path);
    if (sieve__jv_keys(j, path, keys, NULL, e)) return -1;
    if (json_object_size(j) != 1)
        return sieve__fail(e, 400, "%s: expected exactly one of value, any, except or text",
                           path);
    const char *key = json_object_iter_key(json_object_iter((json_t *)j));
    json_t *v = json_object_get(j, key);
    char f[400];
    sieve__pathf(f, sizeof f, "%s.%s", path, key);
    if (!strcmp(key, "value")) {
        if (!(json_is_string(v) || json_is_integer(v) || json_is_boolean(v)))
            return sieve__fail(e, 400, "%s: expected a string (keyword), an integer or a "
                                       "boolean, got %s", f, sieve__jv_type(v));
        c->match = M_VALUE;
    } else if (!strcmp(key, "text")) {
        if (!json_is_string(v))
            return sieve__fail(e, 400, "%s: expected a string, got %s", f, sieve__jv_type(v));
        c->match = M_TEXT;
    } else {
        if (!json_is_array(v))
            return sieve__fail(e, 400, "%s: expected an array of strings or of integers, got "
                                       "%s", f, sieve__jv_type(v));
        int strings = 0, ints = 0;
        for (size_t i = 0; i < json_array_size(v); i++) {
            json_t *x = json_array_get(v, i);
            if (json_is_string(x)) strings = 1;
            else if (json_is_integer(x)) ints = 1;
            else
                return sieve__fail(e, 400, "%s[%zu]: expected a string or an integer, got %s",
                                   f, i, sieve__jv_type(x));
        }
        if (strings && ints)
            return sieve__fail(e, 400, "%s: expected all strings or all integers, not a mix",
                               f);
        c->match = !strcmp(key, "any") ? M_ANY : M_EXCEPT;
    }
    c->value = json_incref(v);
    return 0;
}

static int parse_key(const json_t *j, const char *path, char **out, sieve__err *e) {
    json_t *k = json_object_get(j, "key");
    if (!k || json_is_null(k))
        return sieve__fail(e, 400, "%s.key: required (the payload field name)", path);
    if (!json_is_string(k) || json_string_length(k) == 0 ||
        strlen(json_string_value(k)) != json_string_length(k))
        return sieve__fail(e, 400, "%s.key: expected a non-empty string, got %s", path,
                           sieve__jv_type(k));
    *out = strdup(json_string_value(k));
    if (!*out) return sieve__fail(e, 500, "out of memory");
    return 0;
}

static int parse_field(const json_t *j, const char *path, cond *c, sieve__err *e) {
    static const char *const keys[] = {"key", "match", "range", "values_count", "is_empty",
                                       "is_null", NULL};
    static const char *const geo[] = {"geo_bounding_box", "geo_radius", "geo_polygon", NULL};
    for (const char *const *g = geo; *g; g++)
        if (sieve__jv_get(j, *g))
            return sieve__fail(e, 400, "%s.%s: geo conditions are not supported", path, *g);
    if (sieve__jv_keys(j, path, keys, geo, e)) return -1;
    c->kind = C_FIELD;
    if (parse_key(j, path, &c->key, e)) return -1;
    char f[400];
    int any = 0;
    json_t *v;
    if ((v = sieve__jv_get(j, "match"))) {
        sieve__pathf(f, sizeof f, "%s.match", path);
        if (parse_match(v, f, c, e)) return -1;
        any = 1;
    }
    if ((v = sieve__jv_get(j, "range"))) {
        sieve__pathf(f, sizeof f, "%s.range", path);
        if (parse_bounds(v, f, 0, &c->range, e)) return -1;
        c->has_range = 1;
        any = 1;
    }
    if ((v = sieve__jv_get(j, "values_count"))) {
        sieve__pathf(f, sizeof f, "%s.values_count", path);
        if (parse_bounds(v, f, 1, &c->count, e)) return -1;
        c->has_count = 1;
        any = 1;
    }
    c->is_empty = c->is_null = -1;
    int flag = 0;
    if (sieve__jv_bool(j, "is_empty", path, -1, &flag, e)) return -1;
    if (flag >= 0) {
        c->is_empty = flag;
        any = 1;
    }
    if (sieve__jv_bool(j, "is_null", path, -1, &flag, e)) return -1;
    if (flag >= 0) {
        c->is_null = flag;
        any = 1;
    }
    if (!any)
        return sieve__fail(e, 400, "%s: expected one of match, range, values_count, is_empty "
                                   "or is_null next to key", path);
    return 0;
}

static int parse_has_id(const json_t *j, const char *path, cond *c, sieve__err *e) {
    static const char *const keys[] = {"has_id", NULL};
    if (sieve__jv_keys(j, path, keys, NULL, e)) return -1;
    json_t *arr = json_object_get(j, "has_id");
    char f[400];
    sieve__pathf(f, sizeof f, "%s.has_id", path);
    if (!json_is_array(arr))
        return sieve__fail(e, 400, "%s: expected an array of point ids, got %s", f,
                           sieve__jv_type(arr));
    c->kind = C_HAS_ID;
    size_t n = json_array_size(arr);
    c->ids = malloc((n ? n : 1) * sizeof *c->ids);
    if (!c->ids) return sieve__fail(e, 500, "out of memory");
    for (size_t i = 0; i < n; i++) {
        char fi[420];
        sieve__pathf(fi, sizeof fi, "%s[%zu]", f, i);
        if (sieve__jv_id(json_array_get(arr, i), fi, &c->ids[i], e)) return -1;
    }
    c->n_ids = n;
    qsort(c->ids, n, sizeof *c->ids, id_cmp);
    return 0;
}

static int parse_keyed(const json_t *j, const char *path, const char *which, cond_kind kind,
                       cond *c, sieve__err *e) {
    const char *const keys[] = {which, NULL};
    if (sieve__jv_keys(j, path, keys, NULL, e)) return -1;
    json_t *inner = json_object_get(j, which);
    char f[400];
    sieve__pathf(f, sizeof f, "%s.%s", path, which);
    if (!json_is_object(inner))
        return sieve__fail(e, 400, "%s: expected {\"key\": \"field\"}, got %s", f,
                           sieve__jv_type(inner));
    static const char *const ik[] = {"key", NULL};
    if (sieve__jv_keys(inner, f, ik, NULL, e)) return -1;
    c->kind = kind;
    return parse_key(inner, f, &c->key, e);
}

static int parse_cond(const json_t *j, const char *path, int depth, cond *c, sieve__err *e) {
    memset(c, 0, sizeof *c);
    if (!json_is_object(j))
        return sieve__fail(e, 400, "%s: expected a condition object, got %s", path,
                           sieve__jv_type(j));
    if (json_object_get(j, "key")) return parse_field(j, path, c, e);
    if (json_object_get(j, "has_id")) return parse_has_id(j, path, c, e);
    if (json_object_get(j, "is_empty")) return parse_keyed(j, path, "is_empty", C_IS_EMPTY, c, e);
    if (json_object_get(j, "is_null")) return parse_keyed(j, path, "is_null", C_IS_NULL, c, e);
    if (json_object_get(j, "nested"))
        return sieve__fail(e, 400, "%s.nested: nested conditions are not supported", path);
    if (json_object_get(j, "has_vector"))
        return sieve__fail(e, 400, "%s.has_vector: not supported (every point has the "
                                   "collection's one vector)", path);
    if (json_object_get(j, "must") || json_object_get(j, "should") ||
        json_object_get(j, "must_not") || json_object_get(j, "min_should") ||
        json_object_size(j) == 0) {
        c->kind = C_FILTER;
        return parse_filter(j, path, depth + 1, &c->sub, e);
    }
    const char *first = json_object_iter_key(json_object_iter((json_t *)j));
    return sieve__fail(e, 400, "%s.%s: unknown condition (expected key with match/range/"
                               "values_count, has_id, is_empty, is_null or a nested filter "
                               "with must/should/must_not)", path, first);
}

static int parse_clist(const json_t *j, const char *path, int depth, clist *out,
                       sieve__err *e) {
    memset(out, 0, sizeof *out);
    if (!j || json_is_null(j)) return 0;
    if (json_is_object(j)) { /* a single condition */
        out->c = calloc(1, sizeof *out->c);
        if (!out->c) return sieve__fail(e, 500, "out of memory");
        out->n = 1;
        return parse_cond(j, path, depth, &out->c[0], e);
    }
    if (!json_is_array(j))
        return sieve__fail(e, 400, "%s: expected an array of conditions, got %s", path,
                           sieve__jv_type(j));
    size_t n = json_array_size(j);
    out->c = calloc(n ? n : 1, sizeof *out->c);
    if (!out->c) return sieve__fail(e, 500, "out of memory");
    for (size_t i = 0; i < n; i++) {
        char f[400];
        sieve__pathf(f, sizeof f, "%s[%zu]", path, i);
        out->n = i + 1;
        if (parse_cond(json_array_get(j, i), f, depth, &out->c[i], e)) return -1;
    }
    return 0;
}

static int clist_needs_payload(const clist *l) {
    for (size_t i = 0; i < l->n; i++) {
        const cond *c = &l->c[i];
        if (c->kind == C_FIELD || c->kind == C_IS_EMPTY || c->kind == C_IS_NULL) return 1;
        if (c->kind == C_FILTER && c->sub && c->sub->needs_payload) return 1;
    }
    return 0;
}

static int parse_filter(const json_t *j, const char *path, int depth, sieve__filter **out,
                        sieve__err *e) {
    static const char *const keys[] = {"must", "should", "must_not", "min_should", NULL};
    *out = NULL;
    if (depth > SIEVE_SERVER_MAX_FILTER_DEPTH)
        return sieve__fail(e, 400, "%s: filters nested deeper than %d levels", path,
                           SIEVE_SERVER_MAX_FILTER_DEPTH);
    if (!json_is_object(j))
        return sieve__fail(e, 400, "%s: expected a filter object with must, should, must_not "
                                   "or min_should, got %s", path, sieve__jv_type(j));
    if (sieve__jv_keys(j, path, keys, NULL, e)) return -1;
    sieve__filter *f = calloc(1, sizeof *f);
    if (!f) return sieve__fail(e, 500, "out of memory");
    char p[400];
    sieve__pathf(p, sizeof p, "%s.must", path);
    if (parse_clist(json_object_get(j, "must"), p, depth, &f->must, e)) goto fail;
    sieve__pathf(p, sizeof p, "%s.should", path);
    if (parse_clist(json_object_get(j, "should"), p, depth, &f->should, e)) goto fail;
    sieve__pathf(p, sizeof p, "%s.must_not", path);
    if (parse_clist(json_object_get(j, "must_not"), p, depth, &f->must_not, e)) goto fail;
    json_t *ms = sieve__jv_get(j, "min_should");
    if (ms) {
        static const char *const mk[] = {"conditions", "min_count", NULL};
        sieve__pathf(p, sizeof p, "%s.min_should", path);
        if (!json_is_object(ms)) {
            sieve__fail(e, 400, "%s: expected {\"conditions\": [...], \"min_count\": n}, got "
                                "%s", p, sieve__jv_type(ms));
            goto fail;
        }
        if (sieve__jv_keys(ms, p, mk, NULL, e)) goto fail;
        long long mc = 0;
        if (!sieve__jv_get(ms, "min_count")) {
            sieve__fail(e, 400, "%s.min_count: required", p);
            goto fail;
        }
        if (sieve__jv_int(ms, "min_count", p, 0, 1000000, 0, &mc, e)) goto fail;
        char pc[420];
        sieve__pathf(pc, sizeof pc, "%s.conditions", p);
        json_t *cs = json_object_get(ms, "conditions");
        if (!json_is_array(cs)) {
            sieve__fail(e, 400, "%s: expected an array of conditions, got %s", pc,
                        sieve__jv_type(cs));
            goto fail;
        }
        if (parse_clist(cs, pc, depth, &f->min_should, e)) goto fail;
        f->has_min_should = 1;
        f->min_count = (size_t)mc;
    }
    f->needs_payload = clist_needs_payload(&f->must) || clist_needs_payload(&f->should) ||
                       clist_needs_payload(&f->must_not) ||
                       clist_needs_payload(&f->min_should);
    *out = f;
    return 0;
fail:
    sieve__filter_free(f);
    return -1;
}

int sieve__filter_parse(const json_t *j, const char *path, sieve__filter **out,
                        sieve__err *e) {
    *out = NULL;
    if (!j || json_is_null(j)) return 0;
    return parse_filter(j, path, 0, out, e);
}

/* ---------------------------------------------------------------- evaluation */

/* Collects the values at dotted path key under v: arrays met on the way are walked
 * element by element ("a[]" walks explicitly, a plain key walks implicitly), and an array
 * at the end contributes its elements. Returns the number of values, calling fn on each. */
typedef int (*value_fn)(void *ctx, const json_t *v);

static int walk(const json_t *v, const char *key, value_fn fn, void *ctx) {
    if (!v) return 0;
    if (!key || !*key) {
        if (json_is_array(v)) {
            size_t i;
            json_t *x;
            json_array_foreach((json_t *)v, i, x) {
                if (fn(ctx, x)) return 1;
            }
            return 0;
        }
        return fn(ctx, v);
    }
    if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach((json_t *)v, i, x) {
            if (json_is_object(x) && walk(x, key, fn, ctx)) return 1;
        }
        return 0;
    }
    if (!json_is_object(v)) return 0;
    char seg[256];
    const char *dot = strchr(key, '.');
    size_t len = dot ? (size_t)(dot - key) : strlen(key);
    if (len >= sizeof seg) return 0;
    memcpy(seg, key, len);
    seg[len] = 0;
    if (len >= 2 && !strcmp(seg + len - 2, "[]")) seg[len - 2] = 0;
    return walk(json_object_get(v, seg), dot ? dot + 1 : NULL, fn, ctx);
}

static int in_bounds(const bounds *b, double x) {
    if (b->has_gt && !(x > b->gt)) return 0;
    if (b->has_gte && !(x >= b->gte)) return 0;
    if (b->has_lt && !(x < b->lt)) return 0;
    if (b->has_lte && !(x <= b->lte)) return 0;
    return 1;
}

static int scalar_eq(const json_t *a, const json_t *b) {
    if (json_is_string(a) && json_is_string(b))
        return json_string_length(a) == json_string_length(b) &&
               !memcmp(json_string_value(a), json_string_value(b), json_string_length(a));
    if (json_is_integer(a) && json_is_integer(b))
        return json_integer_value(a) == json_integer_value(b);
    if (json_is_boolean(a) && json_is_boolean(b)) return json_is_true(a) == json_is_true(b);
    return 0;
}

static int in_array(const json_t *arr, const json_t *v) {
    size_t i;
    json_t *x;
    json_array_foreach((json_t *)arr, i, x) {
        if (scalar_eq(x, v)) return 1;
    }
    return 0;
}

typedef struct field_ctx {
    const cond *c;
    size_t count;     /* non-null values seen */
    int null_seen;
    int matched;      /* some value satisfies match and range */
} field_ctx;

static int value_matches(const cond *c, const json_t *v) {
    switch (c->match) {
    case M_NONE: break;
    case M_VALUE:
        if (!scalar_eq(c->value, v)) return 0;
        break;
    case M_ANY:
        if (!in_array(c->value, v)) return 0;
        break;
    case M_EXCEPT:
        if (in_array(c->value, v)) return 0;
        break;
    case M_TEXT:
        if (!json_is_string(v) || !strstr(json_string_value(v), json_string_value(c->value)))
            return 0;
        break;
    }
    if (c->has_range) {
        if (!json_is_number(v)) return 0;
        if (!in_bounds(&c->range, json_number_value(v))) return 0;
    }
    return 1;
}

static int field_value(void *vctx, const json_t *v) {
    field_ctx *fc = vctx;
    if (json_is_null(v)) {
        fc->null_seen = 1;
        return 0;
    }
    fc->count++;
    if (!fc->matched && fc->c->kind == C_FIELD && (fc->c->match != M_NONE || fc->c->has_range))
        fc->matched = value_matches(fc->c, v);
    return 0;
}

static int eval_cond(const cond *c, const sieve_point_id *id, const json_t *payload) {
    if (c->kind == C_FILTER) return sieve__filter_match(c->sub, id, payload);
    if (c->kind == C_HAS_ID)
        return bsearch(id, c->ids, c->n_ids, sizeof *c->ids, id_cmp) != NULL;
    field_ctx fc = {c, 0, 0, 0};
    walk(payload, c->key, field_value, &fc);
    if (c->kind == C_IS_EMPTY) return fc.count == 0;
    if (c->kind == C_IS_NULL) return fc.null_seen;
    if ((c->match != M_NONE || c->has_range) && !fc.matched) return 0;
    if (c->has_count && !in_bounds(&c->count, (double)fc.count)) return 0;
    if (c->is_empty >= 0 && (fc.count == 0) != c->is_empty) return 0;
    if (c->is_null >= 0 && fc.null_seen != c->is_null) return 0;
    return 1;
}

int sieve__filter_match(const sieve__filter *f, const sieve_point_id *id,
                        const json_t *payload) {
    if (!f) return 1;
    for (size_t i = 0; i < f->must.n; i++)
        if (!eval_cond(&f->must.c[i], id, payload)) return 0;
    for (size_t i = 0; i < f->must_not.n; i++)
        if (eval_cond(&f->must_not.c[i], id, payload)) return 0;
    if (f->should.n) {
        int any = 0;
        for (size_t i = 0; i < f->should.n && !any; i++)
            any = eval_cond(&f->should.c[i], id, payload);
        if (!any) return 0;
    }
    if (f->has_min_should) {
        size_t hits = 0;
        for (size_t i = 0; i < f->min_should.n && hits < f->min_count; i++)
            hits += (size_t)eval_cond(&f->min_should.c[i], id, payload);
        if (hits < f->min_count) return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- over a snapshot */

typedef struct visit_ctx {
    const sieve__filter *f;
    sieve__match_fn fn;
    void *ctx;
    int corrupt;
} visit_ctx;

static int visit_row(void *vctx, uint64_t row, const sieve_point_id *id, const char *payload,
                     size_t payload_len) {
    visit_ctx *v = vctx;
    if (v->f) {
        json_t *pj = NULL;
        if (v->f->needs_payload && payload && payload_len) {
            pj = json_loadb(payload, payload_len, 0, NULL);
            if (!pj) {
                v->corrupt = 1;
                return 1;
            }
        }
        int ok = sieve__filter_match(v->f, id, pj);
        json_decref(pj);
        if (!ok) return 0;
    }
    return v->fn(v->ctx, row, id, payload, payload_len);
}

int sieve__filter_foreach(const sieve__filter *f, sieve_snapshot *snap, sieve__match_fn fn,
                          void *ctx) {
    visit_ctx v = {f, fn, ctx, 0};
    int rc = sieve_snapshot_foreach(snap, visit_row, &v);
    if (v.corrupt) return SIEVE_ECORRUPT;
    return rc;
}

typedef struct mask_ctx {
    uint64_t *mask;
    uint64_t rows;
    uint64_t matches;
} mask_ctx;

static int mask_row(void *vctx, uint64_t row, const sieve_point_id *id, const char *payload,
                    size_t payload_len) {
    mask_ctx *m = vctx;
    if (row >= m->rows) return 0;
    m->mask[row >> 6] |= 1ull << (row & 63);
    m->matches++;
    return 0;
}

int sieve__filter_mask(const sieve__filter *f, sieve_snapshot *snap, uint64_t **mask,
                       uint64_t *matches) {
    const sieve_collection_info *info = sieve_snapshot_info(snap);
    uint64_t words = (info->rows + 63) / 64;
    mask_ctx m = {calloc(words ? words : 1, sizeof(uint64_t)), info->rows, 0};
    if (!m.mask) return SIEVE_ENOMEM;
    int rc = sieve__filter_foreach(f, snap, mask_row, &m);
    if (rc < 0) {
        free(m.mask);
        return rc;
    }
    *mask = m.mask;
    *matches = m.matches;
    return 0;
}

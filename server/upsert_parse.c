/* upsert_parse.c: a direct parser for upsert bodies and for the plainest search bodies.
 *
 * Owns: reading PUT .../points bodies ({"points": [...]} or {"batch": {...}}) straight
 * into float arrays, without building a jansson tree of every number (a 768-dimensional
 * vector is 768 tree nodes there, which made ingest parse-bound at a few thousand vectors a
 * second per core). Payload objects are still handed to jansson, one at a time, and stored
 * as compact JSON. Errors read like the rest of the server: syntax errors as "request body:
 * invalid JSON at line L, column C: ...", the rest naming the field
 * ("points[3].vector[7]: expected a number, got a string").
 * Search bodies of exactly the form {"vector": [...], "limit": N, "offset": M} (offset
 * optional) are read the same way; anything else about them is left to the generic path.
 * Must not: accept anything the generic JSON path would reject (NaN and Infinity literals,
 * numbers that overflow a double, integers beyond 2^63-1, duplicate keys, bad escapes,
 * control characters in strings, trailing data).
 *
 * Numbers: the decimal is converted to the nearest double (exactly, by Clinger's fast path
 * when the digits fit, else by strtod) and then to float32, the same two roundings the
 * jansson path applies, so both paths store identical values.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

#define MAX_DEPTH 2048 /* as jansson */

typedef struct parser {
    const char *start, *p, *end;
    sieve__err *e;
    int failed;
} parser;

/* ---------------------------------------------------------------- errors */

static int syntax(parser *ps, const char *what) {
    if (ps->failed) return -1;
    int line = 1, col = 0;
    for (const char *q = ps->start; q < ps->p && q < ps->end; q++) {
        if (*q == '\n') {
            line++;
            col = 0;
        } else {
            col++;
        }
    }
    ps->failed = 1;
    return sieve__fail(ps->e, 400, "request body: invalid JSON at line %d, column %d: %s", line,
                       col + 1, what);
}

static int field_error(parser *ps) { /* the message is already in ps->e */
    ps->failed = 1;
    return -1;
}

/* A 400 naming a field. */
__attribute__((format(printf, 2, 3))) static int ferr(parser *ps, const char *fmt, ...) {
    ps->e->status = 400;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->e->msg, sizeof ps->e->msg, fmt, ap);
    va_end(ap);
    return field_error(ps);
}

static int oom(parser *ps) {
    sieve__fail(ps->e, 500, "out of memory");
    return field_error(ps);
}

static void ws(parser *ps) {
    while (ps->p < ps->end &&
           (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\r' || *ps->p == '\t'))
        ps->p++;
}

static int peek(parser *ps) {
    ws(ps);
    return ps->p < ps->end ? (unsigned char)*ps->p : -1;
}

static int eat(parser *ps, char c) {
    if (peek(ps) != (unsigned char)c) {
        char msg[48];
        snprintf(msg, sizeof msg, "'%c' expected", c);
        return syntax(ps, ps->p >= ps->end ? "unexpected end of input" : msg);
    }
    ps->p++;
    return 0;
}

/* What the next value is, for messages. */
static const char *kind_here(parser *ps) {
    switch (peek(ps)) {
    case '"': return "a string";
    case '{': return "an object";
    case '[': return "an array";
    case 't':
    case 'f': return "a boolean";
    case 'n': return "null";
    default: return "a number";
    }
}

/* ---------------------------------------------------------------- scalars */

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Parses a string; its decoded bytes (UTF-8) go to out (up to cap-1, NUL-terminated);
 * *len gets the full decoded length (which may exceed cap-1). out may be NULL. */
static int parse_string(parser *ps, char *out, size_t cap, size_t *len) {
    if (eat(ps, '"')) return -1;
    size_t n = 0;
    for (;;) {
        if (ps->p >= ps->end) return syntax(ps, "premature end of input in a string");
        unsigned char c = (unsigned char)*ps->p++;
        if (c == '"') break;
        if (c < 0x20) return syntax(ps, "control character in a string");
        char buf[4];
        size_t blen = 1;
        buf[0] = (char)c;
        if (c >= 0x80) { /* the generic path (jansson) rejects invalid UTF-8 too */
            size_t k = sieve__utf8_seq((const unsigned char *)ps->p - 1,
                                       (size_t)(ps->end - ps->p) + 1);
            if (!k) return syntax(ps, "invalid UTF-8 in a string");
            for (size_t i = 1; i < k; i++) buf[i] = ps->p[i - 1];
            blen = k;
            ps->p += k - 1;
        }
        if (c == '\\') {
            if (ps->p >= ps->end) return syntax(ps, "premature end of input in a string");
            char x = *ps->p++;
            switch (x) {
            case '"': buf[0] = '"'; break;
            case '\\': buf[0] = '\\'; break;
            case '/': buf[0] = '/'; break;
            case 'b': buf[0] = '\b'; break;
            case 'f': buf[0] = '\f'; break;
            case 'n': buf[0] = '\n'; break;
            case 'r': buf[0] = '\r'; break;
            case 't': buf[0] = '\t'; break;
            case 'u': {
                unsigned cp = 0;
                for (int i = 0; i < 4; i++) {
                    int h = ps->p < ps->end ? hexval((unsigned char)*ps->p) : -1;
                    if (h < 0) return syntax(ps, "invalid \\u escape");
                    cp = cp * 16 + (unsigned)h;
                    ps->p++;
                }
                if (cp >= 0xd800 && cp <= 0xdbff) { /* a surrogate pair */
                    unsigned lo = 0;
                    if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u')
                        return syntax(ps, "invalid Unicode surrogate pair");
                    ps->p += 2;
                    for (int i = 0; i < 4; i++) {
                        int h = hexval((unsigned char)*ps->p);
                        if (h < 0) return syntax(ps, "invalid \\u escape");
                        lo = lo * 16 + (unsigned)h;
                        ps->p++;
                    }
                    if (lo < 0xdc00 || lo > 0xdfff)
                        return syntax(ps, "invalid Unicode surrogate pair");
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                    return syntax(ps, "invalid Unicode surrogate");
                }
                if (cp == 0) return syntax(ps, "\\u0000 is not allowed");
                if (cp < 0x80) {
                    buf[0] = (char)cp;
                } else if (cp < 0x800) {
                    buf[0] = (char)(0xc0 | (cp >> 6));
                    buf[1] = (char)(0x80 | (cp & 0x3f));
                    blen = 2;
                } else if (cp < 0x10000) {
                    buf[0] = (char)(0xe0 | (cp >> 12));
                    buf[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
                    buf[2] = (char)(0x80 | (cp & 0x3f));
                    blen = 3;
                } else {
                    buf[0] = (char)(0xf0 | (cp >> 18));
                    buf[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
                    buf[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
                    buf[3] = (char)(0x80 | (cp & 0x3f));
                    blen = 4;
                }
                break;
            }
            default: return syntax(ps, "invalid escape in a string");
            }
        }
        for (size_t i = 0; i < blen; i++, n++)
            if (out && n + 1 < cap) out[n] = buf[i];
    }
    if (out && cap) out[n < cap ? n : cap - 1] = 0;
    if (len) *len = n;
    return 0;
}

/* Parses a number token. *d gets the nearest double; when the token is an integer that
 * fits in int64, *is_int = 1 and *ival holds it. */
static int parse_number(parser *ps, double *d, int *is_int, long long *ival) {
    ws(ps);
    const char *s = ps->p, *q = s;
    int neg = 0;
    if (q < ps->end && *q == '-') {
        neg = 1;
        q++;
    }
    if (q >= ps->end || *q < '0' || *q > '9') return syntax(ps, "invalid token");
    uint64_t mant = 0;
    int digits = 0, dropped = 0; /* significant digits kept / integer digits dropped */
    if (*q == '0') {
        q++;
    } else {
        while (q < ps->end && *q >= '0' && *q <= '9') {
            if (digits < 19) {
                mant = mant * 10 + (uint64_t)(*q - '0');
                if (mant) digits++;
            } else {
                dropped++;
            }
            q++;
        }
    }
    int frac_digits = 0, integer = 1;
    if (q < ps->end && *q == '.') {
        integer = 0;
        q++;
        if (q >= ps->end || *q < '0' || *q > '9') return syntax(ps, "invalid token");
        while (q < ps->end && *q >= '0' && *q <= '9') {
            if (digits < 19) {
                mant = mant * 10 + (uint64_t)(*q - '0');
                if (mant) digits++;
                frac_digits++;
            }
            q++;
        }
    }
    long exp10 = 0;
    if (q < ps->end && (*q == 'e' || *q == 'E')) {
        integer = 0;
        q++;
        int eneg = 0;
        if (q < ps->end && (*q == '+' || *q == '-')) eneg = *q++ == '-';
        if (q >= ps->end || *q < '0' || *q > '9') return syntax(ps, "invalid token");
        while (q < ps->end && *q >= '0' && *q <= '9') {
            if (exp10 < 100000) exp10 = exp10 * 10 + (*q - '0');
            q++;
        }
        if (eneg) exp10 = -exp10;
    }
    ps->p = q;
    *is_int = 0;
    if (integer) {
        /* jansson's integer range: beyond it the whole body is rejected. */
        errno = 0;
        char tmp[32];
        size_t tl = (size_t)(q - s);
        if (tl >= sizeof tmp) return syntax(ps, "too big integer");
        memcpy(tmp, s, tl);
        tmp[tl] = 0;
        long long v = strtoll(tmp, NULL, 10);
        if (errno == ERANGE) return syntax(ps, "too big integer");
        *is_int = 1;
        *ival = v;
        *d = (double)v;
        return 0;
    }
    static const double pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                   1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                   1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    long e10 = exp10 - frac_digits + dropped;
    if (mant <= (1ull << 53) && e10 >= -22 && e10 <= 22) {
        double v = (double)mant; /* exact */
        v = e10 < 0 ? v / pow10[-e10] : v * pow10[e10];
        *d = neg ? -v : v;
        return 0;
    }
    /* Slow path: the C library rounds correctly. The body is NUL-terminated past its end
     * (sieve__sbuf), and the token was validated above, so strtod stops where we did. */
    char *endp = NULL;
    double v = strtod(s, &endp);
    if (endp != q) return syntax(ps, "invalid token");
    if (isinf(v)) return syntax(ps, "real number overflow");
    *d = v;
    return 0;
}

static int literal(parser *ps, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n)) return syntax(ps, "invalid token");
    ps->p += n;
    return 0;
}

/* Validates and skips any value. */
static int skip_value(parser *ps, int depth) {
    if (depth > MAX_DEPTH) return syntax(ps, "maximum parsing depth reached");
    int c = peek(ps);
    double d;
    int is_int;
    long long iv;
    switch (c) {
    case '"': return parse_string(ps, NULL, 0, NULL);
    case 't': return literal(ps, "true");
    case 'f': return literal(ps, "false");
    case 'n': return literal(ps, "null");
    case '[':
        ps->p++;
        if (peek(ps) == ']') {
            ps->p++;
            return 0;
        }
        for (;;) {
            if (skip_value(ps, depth + 1)) return -1;
            c = peek(ps);
            if (c == ',') {
                ps->p++;
                continue;
            }
            return eat(ps, ']');
        }
    case '{':
        ps->p++;
        if (peek(ps) == '}') {
            ps->p++;
            return 0;
        }
        for (;;) {
            if (peek(ps) != '"') return syntax(ps, "string or '}' expected");
            if (parse_string(ps, NULL, 0, NULL) || eat(ps, ':') || skip_value(ps, depth + 1))
                return -1;
            c = peek(ps);
            if (c == ',') {
                ps->p++;
                continue;
            }
            return eat(ps, '}');
        }
    case -1: return syntax(ps, "unexpected end of input");
    default: return parse_number(ps, &d, &is_int, &iv);
    }
}

/* ---------------------------------------------------------------- the upsert grammar */

/* Iterates an object's members: call with *first = 1; returns 1 with the key in key, 0 at
 * the closing brace, -1 on error. Rejects duplicate keys among those seen (seen, n). */
static int next_member(parser *ps, int *first, char *key, size_t cap) {
    if (*first) {
        if (eat(ps, '{')) return -1;
        *first = 0;
        if (peek(ps) == '}') {
            ps->p++;
            return 0;
        }
    } else {
        int c = peek(ps);
        if (c == '}') {
            ps->p++;
            return 0;
        }
        if (eat(ps, ',')) return -1;
    }
    if (peek(ps) != '"') return syntax(ps, "string or '}' expected");
    size_t len = 0;
    if (parse_string(ps, key, cap, &len) || eat(ps, ':')) return -1;
    if (len >= cap) key[0] = 1; /* too long to be any known key; keeps it unmatched */
    return 1;
}

static int dup_key(parser *ps, unsigned *seen, unsigned bit) {
    if (*seen & bit) return syntax(ps, "duplicate object key");
    *seen |= bit;
    return 0;
}

/* Next array element: call with *first = 1; returns 1 when an element follows, 0 at ']'. */
static int next_element(parser *ps, int *first) {
    if (*first) {
        if (eat(ps, '[')) return -1;
        *first = 0;
        if (peek(ps) == ']') {
            ps->p++;
            return 0;
        }
        return 1;
    }
    int c = peek(ps);
    if (c == ']') {
        ps->p++;
        return 0;
    }
    if (eat(ps, ',')) return -1;
    return 1;
}

static int grow(sieve__upsert *u, uint32_t dim, size_t need, sieve__err *e) {
    if (need <= u->cap) return 0;
    size_t cap = u->cap ? u->cap * 2 : 256;
    while (cap < need) cap *= 2;
    if (cap > SIZE_MAX / ((size_t)dim * sizeof(float)))
        return sieve__fail(e, 413, "too many points in one request");
    sieve_point *pts = realloc(u->points, cap * sizeof *pts);
    if (!pts) return sieve__fail(e, 500, "out of memory");
    u->points = pts;
    float *v = realloc(u->vectors, cap * dim * sizeof(float));
    if (!v) return sieve__fail(e, 500, "out of memory");
    u->vectors = v;
    char **pl = realloc(u->payloads, cap * sizeof *pl);
    if (!pl) return sieve__fail(e, 500, "out of memory");
    u->payloads = pl;
    for (size_t i = u->cap; i < cap; i++) {
        memset(&u->points[i], 0, sizeof u->points[i]);
        u->payloads[i] = NULL;
    }
    u->cap = cap;
    return 0;
}

/* A vector of exactly dim numbers into out. */
static int parse_vector(parser *ps, const char *path, uint32_t dim, float *out) {
    int c = peek(ps);
    if (c == '{')
        return ferr(ps, "%s: expected an array of %u numbers, got an object (named and sparse "
                        "vectors are not supported)", path, dim);
    if (c != '[')
        return ferr(ps, "%s: expected an array of %u numbers, got %s", path, dim,
                           kind_here(ps));
    int first = 1, more;
    size_t n = 0;
    while ((more = next_element(ps, &first)) == 1) {
        c = peek(ps);
        if (c != '-' && (c < '0' || c > '9')) {
            if (c == '"' || c == '[' || c == '{' || c == 't' || c == 'f' || c == 'n') {
                /* A literal that is not JSON at all (NaN, Infinity) is a syntax error. */
                if ((c == 't' || c == 'f' || c == 'n') && skip_value(ps, 1)) return -1;
                return ferr(ps, "%s[%zu]: expected a number, got %s", path, n,
                                   c == '"' ? "a string" : c == '[' ? "an array"
                                   : c == '{' ? "an object" : c == 'n' ? "null" : "a boolean");
            }
            return syntax(ps, "invalid token");
        }
        double d;
        int is_int;
        long long iv;
        if (parse_number(ps, &d, &is_int, &iv)) return -1;
        if (n < dim) {
            float f = (float)d;
            if (!isfinite(f))
                return ferr(ps, "%s[%zu]: expected a finite number within "
                                               "float32 range (|x| <= 3.4028235e38), got %g",
                                   path, n, d);
            out[n] = f;
        }
        n++;
    }
    if (more < 0) return -1;
    if (n != dim)
        return ferr(ps, "%s: expected %u numbers (the collection's dimension), "
                                       "got %zu", path, dim, n);
    return 0;
}

static int parse_id(parser *ps, const char *path, sieve_point_id *id) {
    memset(id, 0, sizeof *id);
    int c = peek(ps);
    if (c == '"') {
        char buf[80];
        size_t len = 0;
        if (parse_string(ps, buf, sizeof buf, &len)) return -1;
        if (len < sizeof buf && strlen(buf) == len && sieve_uuid_parse(buf, id->uuid) == 0) {
            id->kind = SIEVE_ID_UUID;
            return 0;
        }
        return ferr(ps, "%s: expected an unsigned integer or a UUID string, got "
                                       "\"%.64s\" (not a UUID)", path, buf);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        double d;
        int is_int;
        long long iv;
        if (parse_number(ps, &d, &is_int, &iv)) return -1;
        if (!is_int)
            return ferr(ps, "%s: expected an unsigned integer or a UUID string, "
                                           "got a number", path);
        if (iv < 0)
            return ferr(ps, "%s: expected an unsigned integer or a UUID string, "
                                           "got %lld", path, iv);
        id->kind = SIEVE_ID_NUM;
        id->num = (uint64_t)iv;
        return 0;
    }
    const char *k = kind_here(ps);
    if (skip_value(ps, 1)) return -1;
    return ferr(ps, "%s: expected an unsigned integer or a UUID string, got %s",
                       path, k);
}

/* A payload object (stored as compact JSON) or null. */
static int parse_payload(parser *ps, const char *path, char **out) {
    *out = NULL;
    int c = peek(ps);
    if (c == 'n') return literal(ps, "null");
    if (c != '{') {
        const char *k = kind_here(ps);
        if (skip_value(ps, 1)) return -1;
        return ferr(ps, "%s: expected an object, got %s", path, k);
    }
    const char *s = ps->p;
    if (skip_value(ps, 1)) return -1;
    json_error_t je;
    json_t *j = json_loadb(s, (size_t)(ps->p - s), JSON_REJECT_DUPLICATES, &je);
    if (!j) {
        ps->p = s + (je.position > 0 ? je.position : 0);
        return syntax(ps, je.text);
    }
    *out = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!*out) return oom(ps);
    return 0;
}

/* One element of "points": {"id", "vector", "payload"}. */
static int parse_point(parser *ps, size_t i, uint32_t dim, sieve__upsert *u) {
    char path[64], f[96], key[64];
    sieve__pathf(path, sizeof path, "points[%zu]", i);
    if (peek(ps) != '{') {
        const char *k = kind_here(ps);
        if (skip_value(ps, 1)) return -1;
        return ferr(ps, "%s: expected an object with id, vector and payload, "
                                       "got %s", path, k);
    }
    if (grow(u, dim, i + 1, ps->e)) return field_error(ps);
    sieve_point *pt = &u->points[i];
    float *vec = u->vectors + i * dim;
    int first = 1, r;
    unsigned seen = 0;
    while ((r = next_member(ps, &first, key, sizeof key)) == 1) {
        if (!strcmp(key, "id")) {
            if (dup_key(ps, &seen, 1)) return -1;
            sieve__pathf(f, sizeof f, "%s.id", path);
            if (peek(ps) == 'n') {
                if (literal(ps, "null")) return -1;
                seen &= ~1u;
                continue;
            }
            if (parse_id(ps, f, &pt->id)) return -1;
        } else if (!strcmp(key, "vector")) {
            if (dup_key(ps, &seen, 2)) return -1;
            sieve__pathf(f, sizeof f, "%s.vector", path);
            if (peek(ps) == '{') { /* {"": [...]}: the unnamed vector by name */
                int vf = 1, vr;
                char vk[64];
                int got = 0;
                while ((vr = next_member(ps, &vf, vk, sizeof vk)) == 1) {
                    if (vk[0] || got)
                        return ferr(ps, "%s: expected an array of %u numbers, "
                                                       "got an object (named and sparse vectors "
                                                       "are not supported)", f, dim);
                    char f2[120];
                    sieve__pathf(f2, sizeof f2, "%s[\"\"]", f);
                    if (parse_vector(ps, f2, dim, vec)) return -1;
                    got = 1;
                }
                if (vr < 0) return -1;
                if (!got)
                    return ferr(ps, "%s: expected an array of %u numbers, got "
                                                   "an object", f, dim);
            } else if (peek(ps) == 'n') {
                if (literal(ps, "null")) return -1;
                seen &= ~2u;
            } else if (parse_vector(ps, f, dim, vec)) {
                return -1;
            }
        } else if (!strcmp(key, "payload")) {
            if (dup_key(ps, &seen, 4)) return -1;
            sieve__pathf(f, sizeof f, "%s.payload", path);
            if (parse_payload(ps, f, &u->payloads[i])) return -1;
        } else {
            sieve__pathf(f, sizeof f, "%s.%s", path, key[0] == 1 ? "(long key)" : key);
            return ferr(ps, "%s: unknown field (expected one of: id, vector, "
                                           "payload)", f);
        }
    }
    if (r < 0) return -1;
    if (!(seen & 1))
        return ferr(ps, "%s.id: required (an unsigned integer or a UUID)", path);
    if (!(seen & 2))
        return ferr(ps, "%s.vector: required (an array of %u numbers)", path, dim);
    pt->payload = u->payloads[i]; /* vector pointers are set at the end: vectors may move */
    pt->payload_len = u->payloads[i] ? strlen(u->payloads[i]) : 0;
    return 0;
}

static int parse_points(parser *ps, uint32_t dim, sieve__upsert *u) {
    if (peek(ps) != '[') {
        const char *k = kind_here(ps);
        if (skip_value(ps, 1)) return -1;
        return ferr(ps, "points: expected an array of {\"id\", \"vector\", "
                                       "\"payload\"} objects, got %s", k);
    }
    int first = 1, r;
    size_t i = 0;
    while ((r = next_element(ps, &first)) == 1) {
        if (parse_point(ps, i, dim, u)) return -1;
        i++;
        u->n = i;
    }
    return r < 0 ? -1 : 0;
}

/* The opening of batch column `name` (key bit `bit`): 1 when an array follows (its
 * elements are the caller's), 0 after a null, -1 on a duplicate key or another value,
 * reported as "batch.NAME: expected EXPECTED, got KIND" (an object reads as obj_kind when
 * that is given). */
static int batch_column(parser *ps, unsigned *seen, unsigned bit, const char *name,
                        const char *expected, const char *obj_kind) {
    if (dup_key(ps, seen, bit)) return -1;
    int c = peek(ps);
    if (c == 'n') return literal(ps, "null") ? -1 : 0;
    if (c == '[') return 1;
    const char *k = c == '{' && obj_kind ? obj_kind : kind_here(ps);
    if (skip_value(ps, 1)) return -1;
    return ferr(ps, "batch.%s: expected %s, got %s", name, expected, k);
}

/* {"ids": [...], "vectors": [[...]], "payloads": [...]} in any key order. */
static int parse_batch(parser *ps, uint32_t dim, sieve__upsert *u) {
    if (peek(ps) != '{') {
        const char *k = kind_here(ps);
        if (skip_value(ps, 1)) return -1;
        return ferr(ps, "batch: expected {\"ids\": [...], \"vectors\": [...], "
                                       "\"payloads\": [...]}, got %s", k);
    }
    size_t n_ids = 0, n_vecs = 0, n_pays = 0;
    int has_ids = 0, has_vecs = 0, has_pays = 0;
    int first = 1, r;
    unsigned seen = 0;
    char key[64], f[64];
    while ((r = next_member(ps, &first, key, sizeof key)) == 1) {
        if (!strcmp(key, "ids")) {
            int b = batch_column(ps, &seen, 1, "ids", "an array of point ids", NULL);
            if (b <= 0) {
                if (b < 0) return -1;
                continue;
            }
            int ef = 1, er;
            while ((er = next_element(ps, &ef)) == 1) {
                if (grow(u, dim, n_ids + 1, ps->e)) return field_error(ps);
                sieve__pathf(f, sizeof f, "batch.ids[%zu]", n_ids);
                if (parse_id(ps, f, &u->points[n_ids].id)) return -1;
                n_ids++;
            }
            if (er < 0) return -1;
            has_ids = 1;
        } else if (!strcmp(key, "vectors")) {
            int b = batch_column(ps, &seen, 2, "vectors", "an array of vectors",
                                 "an object (named vectors are not supported)");
            if (b <= 0) {
                if (b < 0) return -1;
                continue;
            }
            int ef = 1, er;
            while ((er = next_element(ps, &ef)) == 1) {
                if (grow(u, dim, n_vecs + 1, ps->e)) return field_error(ps);
                sieve__pathf(f, sizeof f, "batch.vectors[%zu]", n_vecs);
                if (parse_vector(ps, f, dim, u->vectors + n_vecs * dim)) return -1;
                n_vecs++;
            }
            if (er < 0) return -1;
            has_vecs = 1;
        } else if (!strcmp(key, "payloads")) {
            int b = batch_column(ps, &seen, 4, "payloads", "an array of objects", NULL);
            if (b <= 0) {
                if (b < 0) return -1;
                continue;
            }
            int ef = 1, er;
            while ((er = next_element(ps, &ef)) == 1) {
                if (grow(u, dim, n_pays + 1, ps->e)) return field_error(ps);
                sieve__pathf(f, sizeof f, "batch.payloads[%zu]", n_pays);
                char *pl = NULL;
                if (parse_payload(ps, f, &pl)) return -1;
                free(u->payloads[n_pays]);
                u->payloads[n_pays] = pl;
                n_pays++;
                if (n_pays > u->n) u->n = n_pays; /* so every payload is freed */
            }
            if (er < 0) return -1;
            has_pays = 1;
        } else {
            return ferr(ps, "batch.%s: unknown field (expected one of: ids, "
                                           "vectors, payloads)", key[0] == 1 ? "(long key)" : key);
        }
    }
    if (r < 0) return -1;
    if (n_ids > u->n) u->n = n_ids;
    if (n_vecs > u->n) u->n = n_vecs;
    if (!has_ids)
        return ferr(ps, "batch.ids: expected an array of point ids, got nothing");
    if (!has_vecs || n_vecs != n_ids)
        return ferr(ps, "batch.vectors: expected %zu vectors (one per id), got "
                                       "%zu", n_ids, n_vecs);
    if (has_pays && n_pays != n_ids)
        return ferr(ps, "batch.payloads: expected %zu payloads (one per id), got "
                                       "%zu", n_ids, n_pays);
    u->n = n_ids;
    for (size_t i = 0; i < n_ids; i++) {
        u->points[i].vector = u->vectors + i * dim;
        u->points[i].payload = u->payloads[i];
        u->points[i].payload_len = u->payloads[i] ? strlen(u->payloads[i]) : 0;
    }
    return 0;
}

void sieve__upsert_free(sieve__upsert *u) {
    for (size_t i = 0; u->payloads && i < u->cap; i++) free(u->payloads[i]);
    free(u->payloads);
    free(u->points);
    free(u->vectors);
    memset(u, 0, sizeof *u);
}

int sieve__upsert_parse(const char *body, size_t len, uint32_t dim, sieve__upsert *u,
                        sieve__err *e) {
    memset(u, 0, sizeof *u);
    parser ps = {body, body, body + len, e, 0};
    int c = peek(&ps);
    if (c != '{') {
        if (c < 0) return sieve__fail(e, 400, "request body: expected a JSON object, got an "
                                              "empty body");
        const char *k = kind_here(&ps);
        if (skip_value(&ps, 0)) return -1;
        ws(&ps);
        if (ps.p != ps.end) return syntax(&ps, "end of file expected");
        return sieve__fail(e, 400, "request body: expected a JSON object, got %s", k);
    }
    int first = 1, r, which = 0;
    unsigned seen = 0;
    char key[64];
    while ((r = next_member(&ps, &first, key, sizeof key)) == 1) {
        int null = peek(&ps) == 'n';
        if (!strcmp(key, "points") || !strcmp(key, "batch")) {
            int is_points = key[0] == 'p';
            if (dup_key(&ps, &seen, is_points ? 1u : 2u)) return -1;
            if (null) {
                if (literal(&ps, "null")) return -1;
                continue;
            }
            if (which)
                return sieve__fail(e, 400, "request body: expected exactly one of \"points\" (a "
                                           "list of points) or \"batch\" (columns "
                                           "ids/vectors/payloads)");
            which = is_points ? 1 : 2;
            u->batch_form = !is_points;
            if (is_points ? parse_points(&ps, dim, u) : parse_batch(&ps, dim, u)) return -1;
        } else if (!strcmp(key, "shard_key")) {
            if (dup_key(&ps, &seen, 4) || skip_value(&ps, 1)) return -1;
        } else if (!strcmp(key, "update_filter")) {
            if (dup_key(&ps, &seen, 8)) return -1;
            if (null) {
                if (literal(&ps, "null")) return -1;
                continue;
            }
            return sieve__fail(e, 400, "update_filter: conditional updates are not supported");
        } else {
            return sieve__fail(e, 400, "%s: unknown field (expected one of: points, batch)",
                               key[0] == 1 ? "(long key)" : key);
        }
    }
    if (r < 0) return -1;
    ws(&ps);
    if (ps.p != ps.end) return syntax(&ps, "end of file expected");
    if (!which)
        return sieve__fail(e, 400, "request body: expected exactly one of \"points\" (a list of "
                                   "points) or \"batch\" (columns ids/vectors/payloads)");
    for (size_t i = 0; i < u->n; i++) u->points[i].vector = u->vectors + i * dim;
    return 0;
}

int sieve__search_parse_plain(const char *body, size_t len, uint32_t dim, float *vector,
                              uint32_t *limit, uint32_t *offset) {
    sieve__err scratch;
    parser ps = {body, body, body + len, &scratch, 0};
    if (peek(&ps) != '{') return 0;
    int first = 1, r;
    unsigned seen = 0;
    char key[16];
    long long lim = -1, off = 0;
    while ((r = next_member(&ps, &first, key, sizeof key)) == 1) {
        if (!strcmp(key, "vector")) {
            if (seen & 1u || parse_vector(&ps, "vector", dim, vector)) return 0;
            seen |= 1u;
        } else if (!strcmp(key, "limit") || !strcmp(key, "offset")) {
            unsigned bit = key[0] == 'l' ? 2u : 4u;
            int c = peek(&ps);
            if (seen & bit || (c != '-' && (c < '0' || c > '9'))) return 0;
            seen |= bit;
            double d;
            int is_int = 0;
            long long v = 0;
            if (parse_number(&ps, &d, &is_int, &v) || !is_int) return 0;
            if (bit == 2u) lim = v;
            else off = v;
        } else {
            return 0; /* anything else: the generic path decides */
        }
    }
    if (r < 0) return 0;
    ws(&ps);
    if (ps.p != ps.end || !(seen & 1u) || !(seen & 2u)) return 0;
    if (lim < 1 || lim > SIEVE_SERVER_MAX_K || off < 0 || off > SIEVE_SERVER_MAX_K - 1 ||
        lim + off > SIEVE_SERVER_MAX_K)
        return 0;
    *limit = (uint32_t)lim;
    *offset = (uint32_t)off;
    return 1;
}

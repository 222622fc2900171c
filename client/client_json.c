/* client_json.c: building request bodies for libsieve-client.
 *
 * Owns: the growable output buffer, the float32 writer (9 significant digits, exact round
 * trip, no printf), ids and vectors as JSON, and a syntax check for payload and filter
 * texts that callers hand over as JSON (so a broken text can never splice into a body).
 * Must not: do I/O, or parse replies (client_api.c does that with jansson).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

/* ---------------------------------------------------------------- buffer */

void sieve__cl_buf_init(sieve__cl_buf *b) { memset(b, 0, sizeof *b); }

void sieve__cl_buf_free(sieve__cl_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

void sieve__cl_buf_reset(sieve__cl_buf *b) {
    b->len = 0;
    b->failed = 0;
    if (b->p) b->p[0] = 0;
}

char *sieve__cl_buf_reserve(sieve__cl_buf *b, size_t n) {
    if (b->failed) return NULL;
    if (n + 1 > b->cap - b->len || !b->p) {
        size_t need = b->len + n + 1;
        if (need < b->len) { /* overflow */
            b->failed = 1;
            return NULL;
        }
        size_t cap = b->cap ? b->cap : 256;
        while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->failed = 1;
            return NULL;
        }
        b->p = p;
        b->cap = cap;
    }
    return b->p + b->len;
}

void sieve__cl_buf_put(sieve__cl_buf *b, const void *s, size_t n) {
    char *d = sieve__cl_buf_reserve(b, n);
    if (!d) return;
    memcpy(d, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void sieve__cl_buf_puts(sieve__cl_buf *b, const char *s) { sieve__cl_buf_put(b, s, strlen(s)); }

void sieve__cl_buf_putc(sieve__cl_buf *b, char ch) { sieve__cl_buf_put(b, &ch, 1); }

void sieve__cl_buf_printf(sieve__cl_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    char *d = sieve__cl_buf_reserve(b, (size_t)n);
    if (!d) return;
    va_start(ap, fmt);
    vsnprintf(d, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void sieve__cl_buf_json_str(sieve__cl_buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    sieve__cl_buf_putc(b, '"');
    size_t run = 0; /* start of the pending run of plain bytes */
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
        sieve__cl_buf_put(b, s + run, i - run);
        run = i + 1;
        char esc[6] = {'\\', 0, 0, 0, 0, 0};
        size_t len = 2;
        switch (ch) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[ch >> 4];
            esc[5] = hex[ch & 15];
            len = 6;
        }
        sieve__cl_buf_put(b, esc, len);
    }
    sieve__cl_buf_put(b, s + run, n - run);
    sieve__cl_buf_putc(b, '"');
}

void sieve__cl_buf_id(sieve__cl_buf *b, const sieve_client_id *id) {
    char tmp[40];
    sieve_client_id_format(id, tmp);
    if (id->is_uuid) {
        sieve__cl_buf_putc(b, '"');
        sieve__cl_buf_puts(b, tmp);
        sieve__cl_buf_putc(b, '"');
    } else {
        sieve__cl_buf_puts(b, tmp);
    }
}

void sieve__cl_buf_vector(sieve__cl_buf *b, const float *v, uint32_t dim) {
    char *d =
        sieve__cl_buf_reserve(b, (size_t)dim * (SIEVE__CL_F32_MAX + 1) + SIEVE__CL_F32_SCRATCH + 2);
    if (!d) return;
    char *p = d;
    *p++ = '[';
    for (uint32_t i = 0; i < dim; i++) {
        if (i) *p++ = ',';
        p += sieve__cl_fmt_f32(p, v[i]);
    }
    *p++ = ']';
    b->len += (size_t)(p - d);
    b->p[b->len] = 0;
}

/* ---------------------------------------------------------------- float32 */

/* Powers of ten as the nearest doubles (exact up to 1e22). */
static const double pow10_tab[64] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22, 1e23, 1e24, 1e25, 1e26, 1e27, 1e28, 1e29, 1e30, 1e31,
    1e32, 1e33, 1e34, 1e35, 1e36, 1e37, 1e38, 1e39, 1e40, 1e41, 1e42, 1e43, 1e44, 1e45, 1e46, 1e47,
    1e48, 1e49, 1e50, 1e51, 1e52, 1e53, 1e54, 1e55, 1e56, 1e57, 1e58, 1e59, 1e60, 1e61, 1e62, 1e63};

static const char digit_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* x * 10^k for the k this file needs (-31 .. 54). */
static double scaled(double x, int k) { return k >= 0 ? x * pow10_tab[k] : x / pow10_tab[-k]; }

/* Why 9 digits round-trip: a float32 x in [10^e, 10^(e+1)) is written as m * 10^(e-8)
 * with 10^8 <= m < 10^9, so the decimal differs from x by at most half a unit of the 9th
 * digit (5e-9 relative) plus the double arithmetic's ~2e-16; the neighbouring floats are
 * at least 2^-24 x (6e-8 relative) away, so the nearest float to the decimal is x, and
 * the detour through the nearest double cannot cross a float midpoint either. Subnormals
 * have fewer significant bits still. */
size_t sieve__cl_fmt_f32(char *out, float xf) {
    char *p = out;
    uint32_t bits;
    memcpy(&bits, &xf, sizeof bits);
    if (bits >> 31) *p++ = '-';
    bits &= 0x7fffffffu;
    if (bits == 0) {
        *p++ = '0';
        return (size_t)(p - out);
    }
    float af;
    memcpy(&af, &bits, sizeof af);
    double x = (double)af; /* always a normal double */
    uint64_t db;
    memcpy(&db, &x, sizeof db);
    int e2 = (int)((db >> 52) & 0x7ff) - 1023; /* 2^e2 <= x < 2^(e2+1) */
    /* e10 = floor(e2 * log10(2)), so 10^e10 <= x < 20 * 10^e10 */
    int t = e2 * 78913;
    int e10 = t >= 0 ? t >> 18 : -((-t + (1 << 18) - 1) >> 18);
    /* s = x * 10^(8 - e10) in [10^8, 2 * 10^9); one more decade when it has 10 digits. The
     * extra rounding of "* 0.1" is far inside the error budget above. */
    double sc = scaled(x, 8 - e10);
    while (sc >= 999999999.5) {
        sc *= 0.1;
        e10++;
    }
    uint32_t mm = (uint32_t)(int64_t)(sc + 0.5);
    char d[16]; /* 9 digits, padded so that fixed-size copies stay inside */
    d[0] = (char)('0' + mm / 100000000u);
    mm %= 100000000u;
    for (int i = 7; i >= 1; i -= 2) {
        uint32_t q = mm % 100u;
        mm /= 100u;
        d[i] = digit_pairs[2 * q];
        d[i + 1] = digit_pairs[2 * q + 1];
    }
    memset(d + 9, '0', 7);
    int nd = 9;
    while (nd > 1 && d[nd - 1] == '0') nd--;
    /* Fixed-size copies (no library calls for a few bytes); they may write scratch bytes
     * past the returned length, within SIEVE__CL_F32_SCRATCH. */
    if (e10 >= 0 && e10 < 9) {
        int ip = e10 + 1; /* integer digits; d holds the zeros an integer needs */
        memcpy(p, d, 16);
        if (nd <= ip) {
            p += ip;
        } else {
            p[ip] = '.';
            memcpy(p + ip + 1, d + ip, 8);
            p += nd + 1;
        }
    } else if (e10 < 0 && e10 >= -5) {
        memcpy(p, "0.00000", 8);
        p += 1 - e10;
        memcpy(p, d, 16);
        p += nd;
    } else {
        p[0] = d[0];
        p[1] = '.';
        memcpy(p + 2, d + 1, 8);
        p += nd > 1 ? nd + 1 : 1;
        *p++ = 'e';
        int ex = e10;
        if (ex < 0) {
            *p++ = '-';
            ex = -ex;
        }
        if (ex >= 10) *p++ = (char)('0' + ex / 10);
        *p++ = (char)('0' + ex % 10);
    }
    return (size_t)(p - out);
}

size_t sieve__cl_find_nonfinite(const float *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &v[i], sizeof bits);
        if ((bits & 0x7f800000u) == 0x7f800000u) return i;
    }
    return n;
}

/* ---------------------------------------------------------------- JSON syntax check */

typedef struct jcheck {
    const char *s, *p, *end;
    const char *why;
} jcheck;

#define JCHECK_MAX_DEPTH 512

static void ws(jcheck *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int fail(jcheck *j, const char *why) {
    j->why = why;
    return -1;
}

static int is_hex(char ch) {
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

static int string_(jcheck *j) {
    j->p++; /* opening quote */
    while (j->p < j->end) {
        unsigned char ch = (unsigned char)*j->p;
        if (ch == '"') {
            j->p++;
            return 0;
        }
        if (ch < 0x20) return fail(j, "control character in a string");
        if (ch == '\\') {
            j->p++;
            if (j->p >= j->end) break;
            char e = *j->p;
            if (e == 'u') {
                if (j->end - j->p < 5) return fail(j, "short \\u escape");
                for (int i = 1; i <= 4; i++)
                    if (!is_hex(j->p[i])) return fail(j, "bad \\u escape");
                j->p += 5;
                continue;
            }
            if (!strchr("\"\\/bfnrt", e) || !e) return fail(j, "bad escape");
        }
        j->p++;
    }
    return fail(j, "unterminated string");
}

static int number_(jcheck *j) {
    const char *p = j->p;
    if (p < j->end && *p == '-') p++;
    if (p >= j->end) return fail(j, "bad number");
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < j->end && *p >= '0' && *p <= '9') p++;
    } else {
        return fail(j, "bad number");
    }
    if (p < j->end && *p == '.') {
        p++;
        if (p >= j->end || *p < '0' || *p > '9') return fail(j, "bad number");
        while (p < j->end && *p >= '0' && *p <= '9') p++;
    }
    if (p < j->end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < j->end && (*p == '+' || *p == '-')) p++;
        if (p >= j->end || *p < '0' || *p > '9') return fail(j, "bad number");
        while (p < j->end && *p >= '0' && *p <= '9') p++;
    }
    j->p = p;
    return 0;
}

static int literal(jcheck *j, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n)) return fail(j, "unexpected text");
    j->p += n;
    return 0;
}

static int value(jcheck *j, int depth);

static int object_(jcheck *j, int depth) {
    j->p++; /* { */
    ws(j);
    if (j->p < j->end && *j->p == '}') {
        j->p++;
        return 0;
    }
    for (;;) {
        ws(j);
        if (j->p >= j->end || *j->p != '"') return fail(j, "expected a key string");
        if (string_(j)) return -1;
        ws(j);
        if (j->p >= j->end || *j->p != ':') return fail(j, "expected ':'");
        j->p++;
        if (value(j, depth + 1)) return -1;
        ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if (j->p < j->end && *j->p == '}') {
            j->p++;
            return 0;
        }
        return fail(j, "expected ',' or '}'");
    }
}

static int array_(jcheck *j, int depth) {
    j->p++; /* [ */
    ws(j);
    if (j->p < j->end && *j->p == ']') {
        j->p++;
        return 0;
    }
    for (;;) {
        if (value(j, depth + 1)) return -1;
        ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if (j->p < j->end && *j->p == ']') {
            j->p++;
            return 0;
        }
        return fail(j, "expected ',' or ']'");
    }
}

static int value(jcheck *j, int depth) {
    if (depth > JCHECK_MAX_DEPTH) return fail(j, "nested too deeply");
    ws(j);
    if (j->p >= j->end) return fail(j, "unexpected end");
    switch (*j->p) {
    case '{': return object_(j, depth);
    case '[': return array_(j, depth);
    case '"': return string_(j);
    case 't': return literal(j, "true");
    case 'f': return literal(j, "false");
    case 'n': return literal(j, "null");
    default: return number_(j);
    }
}

int sieve__cl_json_check_object(const char *s, size_t n, char *why, size_t why_len) {
    jcheck j = {s, s, s + n, NULL};
    if (!s) {
        if (why && why_len) snprintf(why, why_len, "no text");
        return SIEVE_EPARSE;
    }
    ws(&j);
    int rc = 0;
    if (j.p >= j.end || *j.p != '{') {
        j.why = "expected a JSON object ('{')";
        rc = -1;
    } else {
        rc = object_(&j, 1);
        if (!rc) {
            ws(&j);
            if (j.p != j.end) {
                j.why = "text after the object";
                rc = -1;
            }
        }
    }
    if (rc) {
        if (why && why_len)
            snprintf(why, why_len, "%s at byte %zu", j.why ? j.why : "invalid JSON",
                     (size_t)(j.p - s));
        return SIEVE_EPARSE;
    }
    return 0;
}

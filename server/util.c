/* util.c: small helpers of sieve-server: the text buffer, the clock, error records and
 * the log. Must not: know about routes or HTTP. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"

void sieve__sbuf_init(sieve__sbuf *b) { memset(b, 0, sizeof *b); }

void sieve__sbuf_free(sieve__sbuf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

static int reserve(sieve__sbuf *b, size_t extra) {
    if (b->failed) return -1;
    if (b->len + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2) {
            b->failed = 1;
            return -1;
        }
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void sieve__sbuf_put(sieve__sbuf *b, const char *s, size_t n) {
    if (reserve(b, n)) return;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void sieve__sbuf_puts(sieve__sbuf *b, const char *s) { sieve__sbuf_put(b, s, strlen(s)); }

void sieve__sbuf_putc(sieve__sbuf *b, char c) { sieve__sbuf_put(b, &c, 1); }

void sieve__sbuf_printf(sieve__sbuf *b, const char *fmt, ...) {
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        sieve__sbuf_put(b, small, (size_t)n);
        return;
    }
    if (reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

size_t sieve__utf8_seq(const unsigned char *s, size_t n) {
    if (!n) return 0;
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned cp;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

void sieve__sbuf_json_str(sieve__sbuf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    if (reserve(b, n + 2)) return;
    sieve__sbuf_putc(b, '"');
    size_t run = 0; /* bytes copied verbatim in one go */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char ubuf[7];
        if (c >= 0x80) {
            size_t k = sieve__utf8_seq((const unsigned char *)s + i, n - i);
            if (k) { /* a valid multi-byte sequence: copy it as is */
                run += k;
                i += k - 1;
                continue;
            }
            esc = "\\ufffd";
        }
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (!esc && c < 0x20) {
                ubuf[0] = '\\'; ubuf[1] = 'u'; ubuf[2] = '0'; ubuf[3] = '0';
                ubuf[4] = hex[c >> 4]; ubuf[5] = hex[c & 15]; ubuf[6] = 0;
                esc = ubuf;
            }
        }
        if (esc) {
            sieve__sbuf_put(b, s + i - run, run);
            run = 0;
            sieve__sbuf_puts(b, esc);
        } else {
            run++;
        }
    }
    sieve__sbuf_put(b, s + n - run, run);
    sieve__sbuf_putc(b, '"');
}

/* Powers of ten and five that fit in 64 bits. */
static const uint64_t P10[20] = {
    1ull, 10ull, 100ull, 1000ull,
    10000ull, 100000ull, 1000000ull, 10000000ull,
    100000000ull, 1000000000ull, 10000000000ull, 100000000000ull,
    1000000000000ull, 10000000000000ull, 100000000000000ull, 1000000000000000ull,
    10000000000000000ull, 100000000000000000ull, 1000000000000000000ull, 10000000000000000000ull};
static const uint64_t P5[28] = {
    1ull, 5ull, 25ull, 125ull,
    625ull, 3125ull, 15625ull, 78125ull,
    390625ull, 1953125ull, 9765625ull, 48828125ull,
    244140625ull, 1220703125ull, 6103515625ull, 30517578125ull,
    152587890625ull, 762939453125ull, 3814697265625ull, 19073486328125ull,
    95367431640625ull, 476837158203125ull, 2384185791015625ull, 11920928955078125ull,
    59604644775390625ull, 298023223876953125ull, 1490116119384765625ull, 7450580596923828125ull};

/* 10^i for i = 0 ... 38 (10^38 < 2^128). */
static unsigned __int128 pow10_u128(int i) {
    return i < 20 ? P10[i] : (unsigned __int128)P10[19] * P10[i - 19];
}

/* Bits in x (x > 0). */
static int bitlen_u128(unsigned __int128 x) {
    const uint64_t hi = (uint64_t)(x >> 64), lo = (uint64_t)x;
    return hi ? 128 - __builtin_clzll(hi) : 64 - __builtin_clzll(lo);
}

int sieve__fmt_float(char *out, float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const int neg = (int)(u >> 31);
    const uint32_t bexp = (u >> 23) & 0xffu, frac = u & 0x7fffffu;
    if (bexp == 0xffu || (bexp == 0 && frac != 0)) /* inf, nan, subnormal */
        return snprintf(out, 24, "%.9g", (double)f);
    char *o = out;
    if (neg) *o++ = '-';
    if (bexp == 0) { /* +-0 */
        *o++ = '0';
        *o = 0;
        return (int)(o - out);
    }
    /* f = m * 2^e exactly; the value as an integer N times 10^-k: N = m << e (e >= 0) or
       m * 5^k with k = -e (e < 0), kept when it fits in 126 bits */
    uint64_t m = frac | 0x800000u;
    int e = (int)bexp - 150;
    const int tz = __builtin_ctzll(m);
    m >>= tz;
    e += tz;
    unsigned __int128 N = m;
    int k = 0;
    if (e >= 0) {
        if (e > 100) return snprintf(out, 24, "%.9g", (double)f); /* m < 2^24: < 2^124 */
        N <<= e;
    } else {
        k = -e;
        N *= k < 28 ? P5[k] : P5[27]; /* < 2^24 * 2^63 */
        if (k >= 28) {
            if (k > 54 || bitlen_u128(N) + 64 - __builtin_clzll(P5[k - 27]) > 126)
                return snprintf(out, 24, "%.9g", (double)f);
            N *= P5[k - 27];
        }
    }
    /* D digits (from the bit length: log10(2) ~ 1233 / 4096, then one correction) */
    int D = (int)(((uint32_t)(bitlen_u128(N) - 1) * 1233u) >> 12) + 1;
    if (D < 39 && N >= pow10_u128(D)) D++;
    /* keep 9, rounded half to even on the exact remainder */
    uint64_t q;
    if (D > 9) {
        const unsigned __int128 P = pow10_u128(D - 9);
        unsigned __int128 r;
        if (!(N >> 64)) {
            q = (uint64_t)N / (uint64_t)P;
            r = (uint64_t)N % (uint64_t)P;
        } else { /* a floating estimate, off by at most one, made exact */
            q = (uint64_t)((double)N / (double)P);
            unsigned __int128 prod = (unsigned __int128)q * P;
            while (prod > N) {
                q--;
                prod -= P;
            }
            r = N - prod;
            while (r >= P) {
                q++;
                r -= P;
            }
        }
        const unsigned __int128 twice = r * 2;
        if (twice > P || (twice == P && (q & 1u))) q++;
        if (q == 1000000000u) { /* 999999999.5 -> 10^9: one digit more */
            q = 100000000u;
            D++;
        }
    } else {
        q = (uint64_t)N;
    }
    /* the significant digits without trailing zeros */
    char dig[10];
    int nd = D < 9 ? D : 9;
    for (int i = nd - 1; i >= 0; i--) {
        dig[i] = (char)('0' + q % 10u);
        q /= 10u;
    }
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    const int X = D - 1 - k; /* the exponent of the first digit */
    if (X < -4 || X >= 9) { /* d.ddde+XX, as %g does */
        *o++ = dig[0];
        if (nd > 1) {
            *o++ = '.';
            for (int i = 1; i < nd; i++) *o++ = dig[i];
        }
        *o++ = 'e';
        *o++ = X < 0 ? '-' : '+';
        const int ax = X < 0 ? -X : X;
        if (ax >= 10) *o++ = (char)('0' + ax / 10);
        else *o++ = '0';
        *o++ = (char)('0' + ax % 10);
    } else if (X >= 0) { /* ddd.ddd */
        for (int i = 0; i <= X; i++) *o++ = i < nd ? dig[i] : '0';
        if (nd > X + 1) {
            *o++ = '.';
            for (int i = X + 1; i < nd; i++) *o++ = dig[i];
        }
    } else { /* 0.000ddd */
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -X - 1; i++) *o++ = '0';
        for (int i = 0; i < nd; i++) *o++ = dig[i];
    }
    *o = 0;
    return (int)(o - out);
}

int sieve__fmt_json_float(char *out, float f) {
    if (isnan(f)) f = 0.0f; /* never produced for real results; keeps the JSON valid */
    if (isinf(f)) f = f > 0 ? 3.40282347e38f : -3.40282347e38f;
    return sieve__fmt_float(out, f);
}

void sieve__sbuf_float(sieve__sbuf *b, float f) {
    char buf[24];
    const int n = sieve__fmt_json_float(buf, f);
    if (n < 0) b->failed = 1;
    else sieve__sbuf_put(b, buf, (size_t)n);
}

static int dump_cb(const char *buffer, size_t size, void *data) {
    sieve__sbuf *b = data;
    sieve__sbuf_put(b, buffer, size);
    return b->failed ? -1 : 0;
}

void sieve__sbuf_json(sieve__sbuf *b, const json_t *j) {
    if (json_dump_callback(j, dump_cb, b, JSON_COMPACT | JSON_ENCODE_ANY)) b->failed = 1;
}

double sieve__now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int sieve__pathf(char *buf, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return r;
}

int sieve__fail(sieve__err *e, unsigned status, const char *fmt, ...) {
    e->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return -1;
}

unsigned sieve__status_for(int code) {
    switch (code) {
    case SIEVE_OK: return 200;
    case SIEVE_EINVAL:
    case SIEVE_EDIM:
    case SIEVE_ENONFINITE:
    case SIEVE_ERANGE:
    case SIEVE_EPARSE: return 400;
    case SIEVE_ENOTFOUND: return 404;
    case SIEVE_EEXIST: return 409;
    case SIEVE_ETOOBIG: return 413;
    case SIEVE_EAUTH: return 401;
    case SIEVE_EBUSY:
    case SIEVE_ECLOSED: return 503;
    default: return 500;
    }
}

void sieve__log(const sieve_server *s, int level, const char *fmt, ...) {
    if (s && level > s->cfg.log_level) return;
    static const char *names[] = {"error", "warn", "info", "debug"};
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    /* One fprintf per line: stdio locks the stream, so lines never interleave. */
    fprintf(stderr, "%s.%03ldZ sieve-server %s: %s\n", when, ts.tv_nsec / 1000000L,
            names[level < 0 ? 0 : level > 3 ? 3 : level], line);
}

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

void sieve__sbuf_float(sieve__sbuf *b, float f) {
    if (isnan(f)) f = 0.0f; /* never produced for real results; keeps the JSON valid */
    if (isinf(f)) f = f > 0 ? 3.40282347e38f : -3.40282347e38f;
    sieve__sbuf_printf(b, "%.9g", (double)f);
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

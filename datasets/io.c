/* io.c: error messages, whole-buffer reads, the line reader and the atomic output file of
 * the datasets module. Must not: know any file format. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ds_internal.h"

int sieve__ds_fail(sieve_ds_error *err, int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

int sieve__ds_fail_open(sieve_ds_error *err, const char *path, int errnum) {
    int code = (errnum == ENOENT || errnum == ENOTDIR) ? SIEVE_ENOTFOUND : SIEVE_EIO;
    return sieve__ds_fail(err, code, "%s: cannot open: %s", path, strerror(errnum));
}

char *sieve__ds_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

char *sieve__ds_group(uint64_t v, char *buf) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    int o = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0 && (n - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = 0;
    return buf;
}

size_t sieve__ds_find_nonfinite(const float *x, size_t n) {
    size_t i = 0;
    /* Fast pass in blocks: any exponent field of all ones marks NaN or infinity. */
    while (i < n) {
        size_t end = i + 1024 < n ? i + 1024 : n;
        uint32_t any = 0;
        for (size_t j = i; j < end; j++) {
            uint32_t u;
            memcpy(&u, &x[j], 4);
            any |= (uint32_t)((u & 0x7f800000u) == 0x7f800000u);
        }
        if (any) {
            for (size_t j = i; j < end; j++) {
                uint32_t u;
                memcpy(&u, &x[j], 4);
                if ((u & 0x7f800000u) == 0x7f800000u) return j;
            }
        }
        i = end;
    }
    return n;
}

int sieve__ds_open_read(const char *path, int *fd, uint64_t *size, sieve_ds_error *err) {
    int f = open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0) return sieve__ds_fail_open(err, path, errno);
    struct stat st;
    if (fstat(f, &st) != 0) {
        int e = errno;
        close(f);
        return sieve__ds_fail(err, SIEVE_EIO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(f);
        return sieve__ds_fail(err, SIEVE_EINVAL, "%s: is a directory; expected a file", path);
    }
#if defined(POSIX_FADV_SEQUENTIAL)
    (void)posix_fadvise(f, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    *fd = f;
    *size = (uint64_t)st.st_size;
    return 0;
}

int sieve__ds_pread_full(int fd, const char *path, void *buf, size_t n, uint64_t offset,
                         const char *what, sieve_ds_error *err) {
    char *p = buf;
    size_t done = 0;
    while (done < n) {
        size_t want = n - done;
        if (want > ((size_t)1 << 30)) want = (size_t)1 << 30;
        ssize_t got = pread(fd, p + done, want, (off_t)(offset + done));
        if (got < 0) {
            if (errno == EINTR) continue;
            return sieve__ds_fail(err, SIEVE_EIO, "%s: read error at byte offset %llu: %s",
                                  path, (unsigned long long)(offset + done), strerror(errno));
        }
        if (got == 0)
            return sieve__ds_fail(err, SIEVE_ECORRUPT,
                                  "%s: file ends at byte %llu while reading %s at byte "
                                  "offset %llu (%zu bytes expected); was it truncated?",
                                  path, (unsigned long long)(offset + done), what,
                                  (unsigned long long)offset, n);
        done += (size_t)got;
    }
    return 0;
}

/* ------------------------------------------------------------ line reader */

int sieve__ds_blank(const char *s, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return 0;
    return 1;
}

int sieve__ds_lines_open(sieve__ds_lines *l, const char *path, sieve_ds_error *err) {
    memset(l, 0, sizeof *l);
    l->fd = -1;
    if (!path) return sieve__ds_fail(err, SIEVE_EINVAL, "(null): no file name given");
    int rc = sieve__ds_open_read(path, &l->fd, &l->file_bytes, err);
    if (rc) return rc;
    l->path = sieve__ds_strdup(path);
    l->cap = (size_t)1 << 20;
    l->buf = malloc(l->cap);
    if (!l->path || !l->buf) {
        sieve__ds_lines_close(l);
        return sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", path);
    }
    return 0;
}

void sieve__ds_lines_close(sieve__ds_lines *l) {
    if (l->fd >= 0) close(l->fd);
    free(l->buf);
    free(l->path);
    memset(l, 0, sizeof *l);
    l->fd = -1;
}

void sieve__ds_lines_rewind(sieve__ds_lines *l) {
    l->start = l->end = 0;
    l->buf_offset = 0;
    l->line_no = 0;
    l->line_offset = 0;
    l->eof = 0;
}

uint64_t sieve__ds_lines_tell(const sieve__ds_lines *l) { return l->buf_offset + l->start; }

int sieve__ds_lines_next(sieve__ds_lines *l, char **line, size_t *len, int *got,
                         sieve_ds_error *err) {
    *got = 0;
    size_t scanned = 0; /* bytes of buf[start..] known to hold no newline */
    for (;;) {
        char *base = l->buf + l->start;
        size_t avail = l->end - l->start;
        char *nl = avail > scanned ? memchr(base + scanned, '\n', avail - scanned) : NULL;
        if (nl || (l->eof && avail > 0)) {
            size_t n = nl ? (size_t)(nl - base) : avail;
            if (n > SIEVE_DS_MAX_LINE)
                return sieve__ds_fail(err, SIEVE_ETOOBIG,
                                      "%s:%llu: line longer than %u bytes", l->path,
                                      (unsigned long long)(l->line_no + 1), SIEVE_DS_MAX_LINE);
            /* base[n] is the newline or, at the end of the file, the spare byte. */
            base[n] = 0;
            l->line_offset = l->buf_offset + l->start;
            l->line_no++;
            l->start += nl ? n + 1 : n;
            if (n > 0 && base[n - 1] == '\r') base[--n] = 0;
            *line = base;
            *len = n;
            *got = 1;
            return 0;
        }
        if (l->eof) return 0;
        scanned = avail;
        if (avail > SIEVE_DS_MAX_LINE)
            return sieve__ds_fail(err, SIEVE_ETOOBIG, "%s:%llu: line longer than %u bytes",
                                  l->path, (unsigned long long)(l->line_no + 1),
                                  SIEVE_DS_MAX_LINE);
        /* Make room: move the partial line to the front, grow if it fills the buffer
         * (one spare byte is kept for the terminating NUL of a last line). */
        if (l->start > 0) {
            memmove(l->buf, l->buf + l->start, avail);
            l->buf_offset += l->start;
            l->start = 0;
            l->end = avail;
        }
        if (l->cap - l->end < 2) {
            size_t ncap = l->cap * 2;
            char *nb = realloc(l->buf, ncap);
            if (!nb) return sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", l->path);
            l->buf = nb;
            l->cap = ncap;
        }
        ssize_t r = pread(l->fd, l->buf + l->end, l->cap - l->end - 1,
                          (off_t)(l->buf_offset + l->end));
        if (r < 0) {
            if (errno == EINTR) continue;
            return sieve__ds_fail(err, SIEVE_EIO, "%s: read error at byte offset %llu: %s",
                                  l->path, (unsigned long long)(l->buf_offset + l->end),
                                  strerror(errno));
        }
        if (r == 0) l->eof = 1;
        l->end += (size_t)r;
    }
}

/* ------------------------------------------------------------ output file */

int sieve__ds_out_open(sieve__ds_out *o, const char *path, sieve_ds_error *err) {
    memset(o, 0, sizeof *o);
    o->fd = -1;
    if (!path || !*path) return sieve__ds_fail(err, SIEVE_EINVAL, "no output file name given");
    size_t n = strlen(path);
    o->path = sieve__ds_strdup(path);
    o->tmp = malloc(n + sizeof ".partial");
    o->cap = (size_t)4 << 20;
    o->buf = malloc(o->cap);
    if (!o->path || !o->tmp || !o->buf) {
        free(o->path);
        free(o->tmp);
        free(o->buf);
        return sieve__ds_fail(err, SIEVE_ENOMEM, "%s: out of memory", path);
    }
    memcpy(o->tmp, path, n);
    memcpy(o->tmp + n, ".partial", sizeof ".partial");
    o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (o->fd < 0) {
        int e = errno;
        int rc = sieve__ds_fail(err, SIEVE_EIO, "%s: cannot create: %s", o->tmp, strerror(e));
        free(o->path);
        free(o->tmp);
        free(o->buf);
        return rc;
    }
    return 0;
}

static int out_write_direct(sieve__ds_out *o, const char *p, size_t n, sieve_ds_error *err) {
    while (n > 0) {
        size_t want = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t w = write(o->fd, p, want);
        if (w < 0) {
            if (errno == EINTR) continue;
            return sieve__ds_fail(err, SIEVE_EIO, "%s: write error at byte offset %llu: %s",
                                  o->tmp, (unsigned long long)o->offset, strerror(errno));
        }
        p += w;
        n -= (size_t)w;
        o->offset += (uint64_t)w;
    }
    return 0;
}

static int out_flush(sieve__ds_out *o, sieve_ds_error *err) {
    int rc = out_write_direct(o, o->buf, o->len, err);
    o->len = 0;
    return rc;
}

int sieve__ds_out_write(sieve__ds_out *o, const void *p, size_t n, sieve_ds_error *err) {
    if (o->len + n <= o->cap) {
        memcpy(o->buf + o->len, p, n);
        o->len += n;
        return 0;
    }
    int rc = out_flush(o, err);
    if (rc) return rc;
    if (n >= o->cap / 2) return out_write_direct(o, p, n, err);
    memcpy(o->buf, p, n);
    o->len = n;
    return 0;
}

int sieve__ds_out_pwrite(sieve__ds_out *o, const void *p, size_t n, uint64_t offset,
                         sieve_ds_error *err) {
    int rc = out_flush(o, err);
    if (rc) return rc;
    const char *c = p;
    size_t done = 0;
    while (done < n) {
        ssize_t w = pwrite(o->fd, c + done, n - done, (off_t)(offset + done));
        if (w < 0) {
            if (errno == EINTR) continue;
            return sieve__ds_fail(err, SIEVE_EIO, "%s: write error at byte offset %llu: %s",
                                  o->tmp, (unsigned long long)(offset + done), strerror(errno));
        }
        done += (size_t)w;
    }
    return 0;
}

static void out_free(sieve__ds_out *o) {
    free(o->path);
    free(o->tmp);
    free(o->buf);
    memset(o, 0, sizeof *o);
    o->fd = -1;
}

int sieve__ds_out_commit(sieve__ds_out *o, sieve_ds_error *err) {
    int rc = out_flush(o, err);
    if (!rc && fsync(o->fd) != 0)
        rc = sieve__ds_fail(err, SIEVE_EIO, "%s: fsync failed: %s", o->tmp, strerror(errno));
    if (close(o->fd) != 0 && !rc)
        rc = sieve__ds_fail(err, SIEVE_EIO, "%s: close failed: %s", o->tmp, strerror(errno));
    o->fd = -1;
    if (!rc && rename(o->tmp, o->path) != 0)
        rc = sieve__ds_fail(err, SIEVE_EIO, "%s: cannot rename to %s: %s", o->tmp, o->path,
                            strerror(errno));
    if (rc) unlink(o->tmp);
    out_free(o);
    return rc;
}

void sieve__ds_out_abort(sieve__ds_out *o) {
    if (o->fd >= 0) close(o->fd);
    if (o->tmp) unlink(o->tmp);
    out_free(o);
}

/* ------------------------------------------------------------ JSON text */

int sieve__ds_buf_append(char **buf, size_t *len, size_t *cap, const void *p, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t ncap = *cap ? *cap : 256;
        while (*len + n + 1 > ncap) ncap *= 2;
        char *nb = realloc(*buf, ncap);
        if (!nb) return SIEVE_ENOMEM;
        *buf = nb;
        *cap = ncap;
    }
    memcpy(*buf + *len, p, n);
    *len += n;
    (*buf)[*len] = 0;
    return 0;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t k;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) { k = 2; cp = c & 0x1f; }
    else if (c >= 0xe0 && c <= 0xef) { k = 3; cp = c & 0x0f; }
    else if (c >= 0xf0 && c <= 0xf4) { k = 4; cp = c & 0x07; }
    else return 0;
    if (n < k) return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10ffff))) return 0;
    if (cp >= 0xd800 && cp <= 0xdfff) return 0;
    return k;
}

int sieve__ds_json_string(char **buf, size_t *len, size_t *cap, const char *s, size_t n,
                          size_t *bad_at) {
    const unsigned char *u = (const unsigned char *)s;
    if (sieve__ds_buf_append(buf, len, cap, "\"", 1)) return SIEVE_ENOMEM;
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        /* Copy plain runs at once. */
        while (run < n && u[run] >= 0x20 && u[run] < 0x80 && u[run] != '"' && u[run] != '\\')
            run++;
        if (run > i && sieve__ds_buf_append(buf, len, cap, s + i, run - i)) return SIEVE_ENOMEM;
        i = run;
        if (i >= n) break;
        unsigned c = u[i];
        char esc[8];
        size_t elen = 0;
        if (c == '"' || c == '\\') { esc[0] = '\\'; esc[1] = (char)c; elen = 2; }
        else if (c == '\n') { memcpy(esc, "\\n", 2); elen = 2; }
        else if (c == '\r') { memcpy(esc, "\\r", 2); elen = 2; }
        else if (c == '\t') { memcpy(esc, "\\t", 2); elen = 2; }
        else if (c < 0x20) { elen = (size_t)snprintf(esc, sizeof esc, "\\u%04x", c); }
        if (elen) {
            if (sieve__ds_buf_append(buf, len, cap, esc, elen)) return SIEVE_ENOMEM;
            i++;
            continue;
        }
        size_t k = utf8_seq(u + i, n - i);
        if (!k) {
            if (bad_at) *bad_at = i;
            return SIEVE_EPARSE;
        }
        if (sieve__ds_buf_append(buf, len, cap, s + i, k)) return SIEVE_ENOMEM;
        i += k;
    }
    return sieve__ds_buf_append(buf, len, cap, "\"", 1) ? SIEVE_ENOMEM : 0;
}

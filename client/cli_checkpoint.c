/* cli_checkpoint.c: the resume checkpoint of `sieve ingest`.
 *
 * Owns: describing input files (absolute path, size, modification time), reading and
 * writing the checkpoint file (key=value lines and an FNV-1a checksum line, replaced by
 * rename so a reader sees the old or the new file, never a mix), and comparing two jobs.
 * Must not: decide where to resume (cli_ingest.c does, and verifies against the store).
 *
 * Why no fsync: the checkpoint is only ever behind the data it describes (it is written
 * after the batches are durably acknowledged), so losing its latest version to a power cut
 * costs re-sending some rows (re-upserting an id is idempotent), never correctness; a file
 * torn or emptied by a crash fails the checksum and is ignored (the ingest starts over).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#define CKPT_MAGIC "sieve-ingest-checkpoint 1"

int cli_ckpt_describe(const char *path, cli_ckpt_file *f) {
    memset(f, 0, sizeof *f);
    if (!path) return 0;
    struct stat st;
    if (stat(path, &st)) return -1;
    char *abs = realpath(path, NULL);
    if (!abs) return -1;
    if (strlen(abs) >= sizeof f->path || strchr(abs, '\n')) {
        free(abs);
        errno = ENAMETOOLONG;
        return -1;
    }
    snprintf(f->path, sizeof f->path, "%s", abs);
    free(abs);
    f->size = (uint64_t)st.st_size;
    f->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    return 0;
}

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The body (everything before the checksum line). Returns its length or -1. */
static int format_body(const cli_ckpt *c, char *buf, size_t len) {
    int n =
        snprintf(buf, len,
                 CKPT_MAGIC "\n"
                            "vectors=%s\nvectors_size=%" PRIu64 "\nvectors_mtime=%" PRId64 "\n"
                            "ids=%s\nids_size=%" PRIu64 "\nids_mtime=%" PRId64 "\n"
                            "payloads=%s\npayloads_size=%" PRIu64 "\npayloads_mtime=%" PRId64 "\n"
                            "format=%s\ntarget=%s\ncollection=%s\nid_start=%" PRIu64 "\n"
                            "rows=%" PRIu64 "\ndim=%u\ndone=%" PRIu64 "\n",
                 c->vectors.path, c->vectors.size, c->vectors.mtime_ns, c->ids.path, c->ids.size,
                 c->ids.mtime_ns, c->payloads.path, c->payloads.size, c->payloads.mtime_ns,
                 c->format, c->target, c->collection, c->id_start, c->rows, c->dim, c->done);
    return n < 0 || (size_t)n >= len ? -1 : n;
}

int cli_ckpt_save(const char *path, const cli_ckpt *c) {
    size_t cap = 4 * CLI_CKPT_PATH_MAX + 1024;
    char *buf = malloc(cap);
    if (!buf) return -1;
    int n = format_body(c, buf, cap - 64);
    if (n < 0) {
        free(buf);
        errno = ENAMETOOLONG;
        return -1;
    }
    n += snprintf(buf + n, cap - (size_t)n, "check=%016" PRIx64 "\n", fnv1a(buf, (size_t)n));
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 8);
    if (!tmp) {
        free(buf);
        return -1;
    }
    snprintf(tmp, plen + 8, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    int rc = -1;
    if (f) {
        size_t w = fwrite(buf, 1, (size_t)n, f);
        int e = ferror(f);
        if (fclose(f) == 0 && w == (size_t)n && !e && rename(tmp, path) == 0) rc = 0;
        if (rc) {
            int saved = errno;
            unlink(tmp);
            errno = saved;
        }
    }
    free(tmp);
    free(buf);
    return rc;
}

static int get_u64(const char *v, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end) return -1;
    *out = x;
    return 0;
}

static int get_i64(const char *v, int64_t *out) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end) return -1;
    *out = x;
    return 0;
}

static int set_str(char *dst, size_t cap, const char *v) {
    if (strlen(v) >= cap) return -1;
    memcpy(dst, v, strlen(v) + 1);
    return 0;
}

int cli_ckpt_load(const char *path, cli_ckpt *out, char *why, size_t why_len) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT) return 1;
        snprintf(why, why_len, "cannot open: %s", strerror(errno));
        return -1;
    }
    char *text;
    size_t len;
    int rc = cli_read_stream(f, &text, &len);
    fclose(f);
    if (rc) {
        snprintf(why, why_len, "read error: %s", strerror(errno));
        return -1;
    }
    rc = -1;
    const char *chk = strstr(text, "\ncheck=");
    uint64_t want = 0;
    if (strncmp(text, CKPT_MAGIC "\n", sizeof CKPT_MAGIC)) {
        snprintf(why, why_len, "not a sieve ingest checkpoint");
        goto out;
    }
    if (!chk || sscanf(chk + 7, "%16" SCNx64, &want) != 1 ||
        fnv1a(text, (size_t)(chk - text) + 1) != want) {
        snprintf(why, why_len, "checksum mismatch (torn or edited file)");
        goto out;
    }
    int seen = 0;
    char *save = NULL;
    text[chk - text + 1] = 0;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        if (!eq) continue; /* the magic line */
        *eq = 0;
        const char *k = line, *v = eq + 1;
        int bad = 0;
        if (!strcmp(k, "vectors"))
            bad = set_str(out->vectors.path, sizeof out->vectors.path, v);
        else if (!strcmp(k, "vectors_size"))
            bad = get_u64(v, &out->vectors.size);
        else if (!strcmp(k, "vectors_mtime"))
            bad = get_i64(v, &out->vectors.mtime_ns);
        else if (!strcmp(k, "ids"))
            bad = set_str(out->ids.path, sizeof out->ids.path, v);
        else if (!strcmp(k, "ids_size"))
            bad = get_u64(v, &out->ids.size);
        else if (!strcmp(k, "ids_mtime"))
            bad = get_i64(v, &out->ids.mtime_ns);
        else if (!strcmp(k, "payloads"))
            bad = set_str(out->payloads.path, sizeof out->payloads.path, v);
        else if (!strcmp(k, "payloads_size"))
            bad = get_u64(v, &out->payloads.size);
        else if (!strcmp(k, "payloads_mtime"))
            bad = get_i64(v, &out->payloads.mtime_ns);
        else if (!strcmp(k, "format"))
            bad = set_str(out->format, sizeof out->format, v);
        else if (!strcmp(k, "target"))
            bad = set_str(out->target, sizeof out->target, v);
        else if (!strcmp(k, "collection"))
            bad = set_str(out->collection, sizeof out->collection, v);
        else if (!strcmp(k, "id_start"))
            bad = get_u64(v, &out->id_start);
        else if (!strcmp(k, "rows"))
            bad = get_u64(v, &out->rows);
        else if (!strcmp(k, "dim")) {
            uint64_t d;
            bad = get_u64(v, &d) || d > UINT32_MAX;
            out->dim = (uint32_t)d;
        } else if (!strcmp(k, "done"))
            bad = get_u64(v, &out->done);
        else
            continue; /* unknown keys are ignored */
        if (bad) {
            snprintf(why, why_len, "bad value for %s", k);
            goto out;
        }
        seen++;
    }
    if (seen != 16) {
        snprintf(why, why_len, "incomplete (%d of 16 fields)", seen);
        goto out;
    }
    if (out->done > out->rows) {
        snprintf(why, why_len, "done %" PRIu64 " > rows %" PRIu64, out->done, out->rows);
        goto out;
    }
    rc = 0;
out:
    free(text);
    if (rc) memset(out, 0, sizeof *out);
    return rc;
}

static int file_same(const cli_ckpt_file *a, const cli_ckpt_file *b, const char *what, char *why,
                     size_t why_len) {
    if (strcmp(a->path, b->path)) {
        snprintf(why, why_len, "the %s file differs ('%s' then, '%s' now)", what, a->path, b->path);
        return 0;
    }
    if (a->size != b->size || a->mtime_ns != b->mtime_ns) {
        snprintf(why, why_len, "the %s file %s changed since (size or modification time)", what,
                 a->path);
        return 0;
    }
    return 1;
}

int cli_ckpt_same_job(const cli_ckpt *a, const cli_ckpt *b, char *why, size_t why_len) {
    if (!file_same(&a->vectors, &b->vectors, "vectors", why, why_len)) return 0;
    if (!file_same(&a->ids, &b->ids, "ids", why, why_len)) return 0;
    if (!file_same(&a->payloads, &b->payloads, "payloads", why, why_len)) return 0;
    if (strcmp(a->format, b->format)) {
        snprintf(why, why_len, "the vectors format differs");
        return 0;
    }
    if (strcmp(a->target, b->target)) {
        snprintf(why, why_len, "it was for %s", a->target);
        return 0;
    }
    if (strcmp(a->collection, b->collection)) {
        snprintf(why, why_len, "it was for collection '%s'", a->collection);
        return 0;
    }
    if (a->id_start != b->id_start || a->rows != b->rows || a->dim != b->dim) {
        snprintf(why, why_len, "--id-start, --limit or the dimension differ");
        return 0;
    }
    return 1;
}

/* cli_util.c: helpers shared by the subcommands of the `sieve` tool.
 *
 * Owns: the shared connection options and their environment variables, opening a client,
 * error and usage messages, strict number parsing, parsing vectors typed as text, and the
 * table/JSON printer for point lists. Must not: implement a subcommand.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"

void cli_common_init(cli_common *c) {
    memset(c, 0, sizeof *c);
    const char *u = getenv("SIEVE_URL");
    const char *k = getenv("SIEVE_API_KEY");
    c->url = u && *u ? u : SIEVE_CLIENT_DEFAULT_URL;
    c->api_key = k && *k ? k : NULL;
    c->retries = -1;
}

int cli_common_opt(cli_common *c, int opt, const char *arg, const char *cmd) {
    switch (opt) {
    case CLI_OPT_URL: c->url = arg; return 1;
    case CLI_OPT_API_KEY: c->api_key = arg; return 1;
    case CLI_OPT_TIMEOUT: {
        double t;
        if (cli_parse_double(arg, &t) || t <= 0 || t > 86400) {
            cli_usage_error(cmd, "--timeout wants seconds (0 < t <= 86400), got '%s'", arg);
            return -1;
        }
        c->timeout_s = t;
        return 1;
    }
    case CLI_OPT_RETRIES: {
        uint32_t r;
        if (cli_parse_u32(arg, 0, 100, &r)) {
            cli_usage_error(cmd, "--retries wants 0..100, got '%s'", arg);
            return -1;
        }
        c->retries = (int)r;
        return 1;
    }
    default: return 0;
    }
}

sieve_client *cli_client_open(const cli_common *c, const char *cmd) {
    sieve_client_options o;
    sieve_client_options_init(&o);
    o.url = c->url;
    o.api_key = c->api_key;
    if (c->timeout_s > 0) o.timeout_ms = (long)(c->timeout_s * 1000.0);
    if (c->retries >= 0) o.max_retries = c->retries;
    sieve_client *cl = NULL;
    int rc = sieve_client_open(&o, &cl);
    if (rc == SIEVE_EINVAL) {
        cli_error(CLI_USAGE, cmd, "bad server URL '%s': expected http://HOST:PORT", c->url);
        return NULL;
    }
    if (rc) {
        cli_error(CLI_FAIL, cmd, "cannot create an HTTP client: %s", sieve_strerror(rc));
        return NULL;
    }
    return cl;
}

int cli_client_error(sieve_client *cl, int rc, const char *cmd, const char *what) {
    const char *msg = sieve_client_message(cl);
    const char *hint = "";
    if (rc == SIEVE_EAUTH) hint = " (pass the server's key with --api-key or SIEVE_API_KEY)";
    return cli_error(CLI_FAIL, cmd, "%s: %s%s", what, msg && *msg ? msg : sieve_strerror(rc), hint);
}

int cli_error(int status, const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "sieve %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return status;
}

void cli_warn(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "sieve %s: warning: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "sieve %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'sieve %s --help'.\n", cmd);
    va_end(ap);
    return CLI_USAGE;
}

int cli_bad_option(const char *cmd, int opt, char **argv) {
    const char *arg = optind > 0 ? argv[optind - 1] : "?";
    if (opt == ':') return cli_usage_error(cmd, "option '%s' needs a value", arg);
    if (optopt) return cli_usage_error(cmd, "unknown option '-%c'", optopt);
    return cli_usage_error(cmd, "unknown option '%s'", arg);
}

int cli_parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s || *s == '-' || *s == '+') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

int cli_parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out) {
    uint64_t v;
    if (cli_parse_u64(s, &v) || v < min || v > max) return -1;
    *out = (uint32_t)v;
    return 0;
}

int cli_parse_double(const char *s, double *out) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

int cli_read_stream(FILE *f, char **out, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    if (!b) return -1;
    for (;;) {
        if (cap - n < 4096) {
            char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                errno = ENOMEM;
                return -1;
            }
            b = nb;
            cap *= 2;
        }
        size_t got = fread(b + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) {
                free(b);
                return -1;
            }
            break;
        }
    }
    b[n] = 0;
    *out = b;
    *len = n;
    return 0;
}

/* Parses one line of numbers into v (grown as needed). */
static int parse_line(const char *p, const char *end, float **v, size_t *cap, size_t *cnt,
                      char *why, size_t why_len) {
    *cnt = 0;
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
    int bracket = p < end && *p == '[';
    if (bracket) p++;
    int closed = 0;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == ',' || *p == '\r')) p++;
        if (p >= end) break;
        if (*p == ']') {
            if (!bracket) {
                snprintf(why, why_len, "unexpected ']'");
                return -1;
            }
            closed = 1;
            p++;
            while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
            if (p < end) {
                snprintf(why, why_len, "text after ']'");
                return -1;
            }
            break;
        }
        char num[64];
        size_t k = 0;
        while (p < end && !strchr(" \t,\r]", *p) && k < sizeof num - 1) num[k++] = *p++;
        num[k] = 0;
        char *e;
        errno = 0;
        float x = strtof(num, &e);
        if (!k || *e) {
            snprintf(why, why_len, "'%s' is not a number", num);
            return -1;
        }
        if (!isfinite(x) || errno == ERANGE) {
            snprintf(why, why_len, "'%s' is not a finite float32", num);
            return -1;
        }
        if (*cnt == *cap) {
            size_t nc = *cap ? *cap * 2 : 256;
            float *nv = realloc(*v, nc * sizeof *nv);
            if (!nv) {
                snprintf(why, why_len, "out of memory");
                return -1;
            }
            *v = nv;
            *cap = nc;
        }
        (*v)[(*cnt)++] = x;
    }
    if (bracket && !closed) {
        snprintf(why, why_len, "missing ']'");
        return -1;
    }
    return 0;
}

int cli_parse_vectors_text(const char *text, size_t len, float **out, size_t *n, uint32_t *dim,
                           char *why, size_t why_len) {
    *out = NULL;
    *n = 0;
    *dim = 0;
    float *all = NULL, *line = NULL;
    size_t all_n = 0, all_cap = 0, line_cap = 0;
    uint32_t d = 0;
    const char *p = text, *end = text + len;
    size_t lineno = 0;
    char sub[160];
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        lineno++;
        size_t cnt = 0;
        if (parse_line(p, le, &line, &line_cap, &cnt, sub, sizeof sub)) {
            snprintf(why, why_len, "line %zu: %s", lineno, sub);
            goto fail;
        }
        p = nl ? nl + 1 : end;
        if (!cnt) continue;
        if (cnt > SIEVE_DS_MAX_DIM) {
            snprintf(why, why_len, "line %zu: %zu values; at most %u allowed", lineno, cnt,
                     SIEVE_DS_MAX_DIM);
            goto fail;
        }
        if (!d) d = (uint32_t)cnt;
        if (cnt != d) {
            snprintf(why, why_len, "line %zu: %zu values; expected %u (as on the first line)",
                     lineno, cnt, d);
            goto fail;
        }
        if ((all_n + 1) * d > all_cap) {
            size_t nc = all_cap ? all_cap * 2 : (size_t)d * 4;
            while (nc < (all_n + 1) * d) nc *= 2;
            float *na = realloc(all, nc * sizeof *na);
            if (!na) {
                snprintf(why, why_len, "out of memory");
                goto fail;
            }
            all = na;
            all_cap = nc;
        }
        memcpy(all + all_n * d, line, d * sizeof *line);
        all_n++;
    }
    free(line);
    if (!all_n) {
        snprintf(why, why_len, "no numbers found");
        free(all);
        return -1;
    }
    *out = all;
    *n = all_n;
    *dim = d;
    return 0;
fail:
    free(line);
    free(all);
    return -1;
}

sieve_client_id cli_id_from_ds(const sieve_ds_id *id) {
    sieve_client_id c;
    memset(&c, 0, sizeof c);
    c.is_uuid = id->is_uuid;
    c.num = id->num;
    memcpy(c.uuid, id->uuid, sizeof c.uuid);
    return c;
}

/* ---------------------------------------------------------------- printing records */

static json_t *record_json(const sieve_client_record *r, int scored) {
    char idt[40];
    sieve_client_id_format(&r->id, idt);
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "id",
                        r->id.is_uuid ? json_string(idt) : json_integer((json_int_t)r->id.num));
    if (scored) json_object_set_new(o, "score", json_real(r->score));
    if (r->payload) {
        json_t *p = json_loads(r->payload, 0, NULL);
        json_object_set_new(o, "payload", p ? p : json_null());
    }
    if (r->vector) {
        json_t *v = json_array();
        for (uint32_t i = 0; v && i < r->dim; i++)
            json_array_append_new(v, json_real(r->vector[i]));
        json_object_set_new(o, "vector", v ? v : json_null());
    }
    return o;
}

void cli_print_records(FILE *out, const sieve_client_records *r, int scored, int json) {
    if (json) {
        json_t *arr = json_array();
        for (size_t i = 0; arr && i < r->n; i++)
            json_array_append_new(arr, record_json(&r->items[i], scored));
        char *s = arr ? json_dumps(arr, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
        fprintf(out, "%s\n", s ? s : "[]");
        free(s);
        json_decref(arr);
        return;
    }
    if (!r->n) {
        fprintf(out, "(no points)\n");
        return;
    }
    int idw = 2;
    for (size_t i = 0; i < r->n; i++) {
        char idt[40];
        sieve_client_id_format(&r->items[i].id, idt);
        int l = (int)strlen(idt);
        if (l > idw) idw = l;
    }
    if (scored)
        fprintf(out, "%4s  %-*s  %12s  %s\n", "rank", idw, "id", "score", "payload");
    else
        fprintf(out, "%-*s  %s\n", idw, "id", "payload");
    for (size_t i = 0; i < r->n; i++) {
        const sieve_client_record *x = &r->items[i];
        char idt[40];
        sieve_client_id_format(&x->id, idt);
        const char *pl = x->payload ? x->payload : "-";
        int pw = (int)strlen(pl);
        if (pw > 70) pw = 70;
        if (scored)
            fprintf(out, "%4zu  %-*s  %12.6g  %.*s%s", i + 1, idw, idt, x->score, pw, pl,
                    (int)strlen(pl) > pw ? "..." : "");
        else
            fprintf(out, "%-*s  %.*s%s", idw, idt, pw, pl, (int)strlen(pl) > pw ? "..." : "");
        if (x->vector) {
            fprintf(out, "  [");
            for (uint32_t k = 0; k < x->dim && k < 4; k++)
                fprintf(out, k ? ", %.6g" : "%.6g", x->vector[k]);
            fprintf(out, "%s] (dim %u)", x->dim > 4 ? ", ..." : "", x->dim);
        }
        fputc('\n', out);
    }
}

/* main.c: sieve-server's entry point.
 *
 * Owns: the command line and its SIEVE_* environment variables (flags win), --help, opening
 * the store, the batcher and the HTTP daemon in order, waiting for SIGINT/SIGTERM, and the
 * clean shutdown in reverse order (stop accepting, finish in-flight requests, stop the
 * workers, close the store). Must not: handle requests. Signals are blocked in every thread
 * and taken synchronously with sigwait, so no handler and no global state is needed.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server.h"

static void usage(FILE *f) {
    fprintf(f,
"usage: sieve-server [options]\n"
"\n"
"sieve's exact k-nearest-neighbour server. It speaks Qdrant's REST API (collections,\n"
"points, search, query, filters), so Qdrant clients work unchanged.\n"
"\n"
"Every option can also be set with the environment variable shown; the flag wins.\n"
"\n"
"  --host ADDR           address to listen on (default 127.0.0.1; 0.0.0.0 for all)\n"
"                        [SIEVE_HOST]\n"
"  --port N              TCP port (default 6333; 0 picks a free port, printed at start)\n"
"                        [SIEVE_PORT]\n"
"  --data-dir DIR        where the LMDB store lives (default ./data; created if missing)\n"
"                        [SIEVE_DATA_DIR]\n"
"  --api-key KEY         require this key (header 'api-key: KEY' or 'Authorization:\n"
"                        Bearer KEY') on every route but /, /healthz, /livez, /readyz\n"
"                        [SIEVE_API_KEY]\n"
"  --read-only-api-key KEY  a second key that may read but not write (403 on writes)\n"
"                        [SIEVE_READ_ONLY_API_KEY]\n"
"  --max-body SIZE       largest request body, e.g. 32M, 1G (default 32M; 413 past it)\n"
"                        [SIEVE_MAX_BODY]\n"
"  --batch-max N         most queries answered by one kernel call (default 128)\n"
"                        [SIEVE_BATCH_MAX]\n"
"  --batch-wait-us N     under concurrency, how long a collection's queue may wait for the\n"
"                        clients of its previous batch to come back, in microseconds, plus\n"
"                        5%% of that batch's time (default 1000; 0 = never wait; a lone\n"
"                        client never waits) [SIEVE_BATCH_WAIT_US]\n"
"  --batch-workers N     batch workers per search device (default 2 on a GPU, 1 on the\n"
"                        CPU): while one worker's batch is on the device, the next collects\n"
"                        and prepares its batch and the previous maps results and hands\n"
"                        replies back; on the CPU (cpu or auto, no :THREADS) the cores are\n"
"                        shared out between them\n"
"                        [SIEVE_BATCH_WORKERS]\n"
"  --threads N           HTTP worker threads (default: number of CPUs, at least 2)\n"
"                        [SIEVE_THREADS]\n"
"  --device SPEC         search device: auto, cpu, cpu:THREADS, cuda, cuda:N; a comma-\n"
"                        separated list runs batch workers on each device (default auto)\n"
"                        [SIEVE_DEVICE]\n"
"  --log-level LEVEL     error, warn, info or debug (default info) [SIEVE_LOG_LEVEL]\n"
"  --timeout SECONDS     idle connection timeout (default 60) [SIEVE_TIMEOUT]\n"
"  --no-sync             testing only: do not fsync writes (NOT durable) [SIEVE_NO_SYNC=1]\n"
"  --host-page-cache     testing only: on the CPU, search a copy of the pages kept and\n"
"                        refreshed like a GPU's page cache (no effect on a GPU)\n"
"                        [SIEVE_HOST_PAGE_CACHE=1]\n"
"  -h, --help            show this help\n"
"  --version             print the version\n"
"\n"
"Limits: limit is 1..%u and offset + limit at most %u per search; a batch request holds\n"
"at most %u searches.\n"
"\n"
"Stop it with SIGINT (Ctrl-C) or SIGTERM: it stops accepting connections, finishes the\n"
"requests in flight, and closes the store.\n",
            SIEVE_SERVER_MAX_K, SIEVE_SERVER_MAX_K, SIEVE_SERVER_MAX_BATCH_SEARCHES);
}

static int parse_u64(const char *s, unsigned long long max, unsigned long long *out) {
    if (!s || !*s || *s == '-') return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > max) return -1;
    *out = v;
    return 0;
}

/* "32M", "1G", "65536", "64k" (binary multiples). */
static int parse_size(const char *s, size_t *out) {
    if (!s || !*s || *s == '-') return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) return -1;
    unsigned long long mul = 1;
    if (*end) {
        switch (*end) {
        case 'k': case 'K': mul = 1ull << 10; break;
        case 'm': case 'M': mul = 1ull << 20; break;
        case 'g': case 'G': mul = 1ull << 30; break;
        default: return -1;
        }
        end++;
        if (*end == 'i' || *end == 'I') end++;
        if (*end == 'b' || *end == 'B') end++;
        if (*end) return -1;
    }
    if (v > (unsigned long long)SIZE_MAX / mul || v * mul == 0) return -1;
    *out = (size_t)(v * mul);
    return 0;
}

static int parse_level(const char *s, int *out) {
    static const char *const names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (!strcasecmp(s, names[i])) {
            *out = i;
            return 0;
        }
    return -1;
}

enum {
    OPT_HOST = 256, OPT_PORT, OPT_DATA, OPT_KEY, OPT_RO_KEY, OPT_MAX_BODY, OPT_BATCH_MAX,
    OPT_BATCH_WAIT, OPT_BATCH_WORKERS, OPT_THREADS, OPT_DEVICE, OPT_LOG, OPT_TIMEOUT, OPT_NO_SYNC,
    OPT_HOST_CACHE, OPT_VERSION
};

/* Applies one setting (from a flag or its environment variable). what names it in errors. */
static int apply(sieve_server_config *c, int opt, const char *v, const char *what) {
    unsigned long long n = 0;
    switch (opt) {
    case OPT_HOST:
        if (strlen(v) >= sizeof c->host) goto bad;
        snprintf(c->host, sizeof c->host, "%s", v);
        return 0;
    case OPT_PORT:
        if (parse_u64(v, 65535, &n)) goto bad;
        c->port = (unsigned)n;
        return 0;
    case OPT_DATA:
        if (!*v || strlen(v) >= sizeof c->data_dir) goto bad;
        snprintf(c->data_dir, sizeof c->data_dir, "%s", v);
        return 0;
    case OPT_KEY:
        if (strlen(v) >= sizeof c->api_key) goto bad;
        snprintf(c->api_key, sizeof c->api_key, "%s", v);
        return 0;
    case OPT_RO_KEY:
        if (strlen(v) >= sizeof c->read_only_key) goto bad;
        snprintf(c->read_only_key, sizeof c->read_only_key, "%s", v);
        return 0;
    case OPT_MAX_BODY:
        if (parse_size(v, &c->max_body)) goto bad;
        return 0;
    case OPT_BATCH_MAX:
        if (parse_u64(v, 65536, &n) || n == 0) goto bad;
        c->batch_max = (uint32_t)n;
        return 0;
    case OPT_BATCH_WAIT:
        if (parse_u64(v, 10 * 1000 * 1000, &n)) goto bad;
        c->batch_wait_us = (uint32_t)n;
        return 0;
    case OPT_BATCH_WORKERS:
        if (parse_u64(v, 64, &n) || n == 0) goto bad;
        c->batch_workers = (uint32_t)n;
        return 0;
    case OPT_THREADS:
        if (parse_u64(v, 1024, &n) || n == 0) goto bad;
        c->threads = (uint32_t)n;
        return 0;
    case OPT_DEVICE:
        if (!*v || strlen(v) >= sizeof c->device) goto bad;
        snprintf(c->device, sizeof c->device, "%s", v);
        return 0;
    case OPT_LOG:
        if (parse_level(v, &c->log_level)) goto bad;
        return 0;
    case OPT_TIMEOUT:
        if (parse_u64(v, 86400, &n)) goto bad;
        c->conn_timeout_s = (unsigned)n;
        return 0;
    case OPT_NO_SYNC:
        c->no_sync = !(v && (!strcmp(v, "0") || !strcasecmp(v, "false")));
        return 0;
    case OPT_HOST_CACHE:
        c->host_page_cache = !(v && (!strcmp(v, "0") || !strcasecmp(v, "false")));
        return 0;
    }
bad:
    fprintf(stderr, "sieve-server: invalid value for %s: '%s' (see --help)\n", what, v);
    return -1;
}

static const struct option long_opts[] = {
    {"host", required_argument, NULL, OPT_HOST},
    {"port", required_argument, NULL, OPT_PORT},
    {"data-dir", required_argument, NULL, OPT_DATA},
    {"api-key", required_argument, NULL, OPT_KEY},
    {"read-only-api-key", required_argument, NULL, OPT_RO_KEY},
    {"max-body", required_argument, NULL, OPT_MAX_BODY},
    {"batch-max", required_argument, NULL, OPT_BATCH_MAX},
    {"batch-wait-us", required_argument, NULL, OPT_BATCH_WAIT},
    {"batch-workers", required_argument, NULL, OPT_BATCH_WORKERS},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"log-level", required_argument, NULL, OPT_LOG},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"no-sync", no_argument, NULL, OPT_NO_SYNC},
    {"host-page-cache", no_argument, NULL, OPT_HOST_CACHE},
    {"version", no_argument, NULL, OPT_VERSION},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static const struct {
    const char *env;
    int opt;
} env_vars[] = {
    {"SIEVE_HOST", OPT_HOST}, {"SIEVE_PORT", OPT_PORT}, {"SIEVE_DATA_DIR", OPT_DATA},
    {"SIEVE_API_KEY", OPT_KEY}, {"SIEVE_READ_ONLY_API_KEY", OPT_RO_KEY},
    {"SIEVE_MAX_BODY", OPT_MAX_BODY}, {"SIEVE_BATCH_MAX", OPT_BATCH_MAX},
    {"SIEVE_BATCH_WAIT_US", OPT_BATCH_WAIT}, {"SIEVE_BATCH_WORKERS", OPT_BATCH_WORKERS},
    {"SIEVE_THREADS", OPT_THREADS},
    {"SIEVE_DEVICE", OPT_DEVICE}, {"SIEVE_LOG_LEVEL", OPT_LOG}, {"SIEVE_TIMEOUT", OPT_TIMEOUT},
    {"SIEVE_NO_SYNC", OPT_NO_SYNC}, {"SIEVE_HOST_PAGE_CACHE", OPT_HOST_CACHE},
};

/* Returns 0 to run, 1 to exit successfully (help/version), -1 on a usage error. */
static int configure(sieve_server_config *c, int argc, char **argv) {
    memset(c, 0, sizeof *c);
    snprintf(c->host, sizeof c->host, "127.0.0.1");
    c->port = 6333;
    snprintf(c->data_dir, sizeof c->data_dir, "./data");
    c->max_body = 32u << 20;
    c->batch_max = 128;
    c->batch_wait_us = 1000;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    c->threads = ncpu > 2 ? (uint32_t)ncpu : 2;
    snprintf(c->device, sizeof c->device, "auto");
    c->log_level = SIEVE_LOG_INFO;
    c->conn_timeout_s = 60;

    for (size_t i = 0; i < sizeof env_vars / sizeof env_vars[0]; i++) {
        const char *v = getenv(env_vars[i].env);
        if (v && apply(c, env_vars[i].opt, v, env_vars[i].env)) return -1;
    }
    int opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", long_opts, NULL)) != -1) {
        if (opt == 'h') {
            usage(stdout);
            return 1;
        }
        if (opt == OPT_VERSION) {
            printf("sieve-server %s\n", SIEVE_VERSION);
            return 1;
        }
        if (opt == '?' || opt == ':') {
            fprintf(stderr, "sieve-server: %s option '%s' (see --help)\n",
                    opt == ':' ? "missing value for" : "unknown", argv[optind - 1]);
            return -1;
        }
        char what[64];
        const char *name = "?";
        for (const struct option *o = long_opts; o->name; o++)
            if (o->val == opt) name = o->name;
        snprintf(what, sizeof what, "--%s", name);
        if (apply(c, opt, optarg ? optarg : "1", what)) return -1;
    }
    if (optind < argc) {
        fprintf(stderr, "sieve-server: unexpected argument '%s' (see --help)\n", argv[optind]);
        return -1;
    }
    if (c->api_key[0] && c->read_only_key[0] && !strcmp(c->api_key, c->read_only_key)) {
        fprintf(stderr, "sieve-server: --api-key and --read-only-api-key must differ\n");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    sieve_cpu_blas_fixup(argv);
    sieve_server *s = calloc(1, sizeof *s);
    if (!s) {
        fprintf(stderr, "sieve-server: out of memory\n");
        return 1;
    }
    int rc = configure(&s->cfg, argc, argv);
    if (rc) {
        free(s);
        return rc > 0 ? 0 : 2;
    }
    atomic_store(&s->next_op_id, 1);

    /* Block the stop signals before any thread exists, so every thread inherits the mask
     * and only sigwait below receives them. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    int exit_code = 1;
    if (mkdir(s->cfg.data_dir, 0755) && errno != EEXIST) {
        sieve__log(s, SIEVE_LOG_ERROR, "cannot create --data-dir %s: %s", s->cfg.data_dir,
                   strerror(errno));
        goto out;
    }
    sieve_store_options so;
    sieve_store_options_init(&so);
    so.no_sync = s->cfg.no_sync;
    rc = sieve_store_open(s->cfg.data_dir, &so, &s->store);
    if (rc) {
        sieve__log(s, SIEVE_LOG_ERROR, "cannot open the store in %s: %s%s", s->cfg.data_dir,
                   sieve_strerror(rc),
                   rc == SIEVE_EBUSY ? " (another sieve-server uses this directory)" : "");
        goto out;
    }
    if (sieve__metrics_create(&s->metrics)) goto out;
    rc = sieve__batcher_create(s, s->cfg.device, &s->batcher);
    if (rc) {
        sieve__log(s, SIEVE_LOG_ERROR, "cannot open --device %s: %s", s->cfg.device,
                   sieve_strerror(rc));
        goto out;
    }
    if (sieve__http_start(s)) goto out;
    atomic_store(&s->ready, 1);
    char dev[512];
    sieve__batcher_describe(s->batcher, dev, sizeof dev);
    sieve__log(s, SIEVE_LOG_INFO,
               "sieve-server %s listening on http://%s:%u (data %s, device %s, %u threads, "
               "batch %u / %u us%s%s)", SIEVE_VERSION, s->cfg.host, s->bound_port,
               s->cfg.data_dir, dev, s->cfg.threads, s->cfg.batch_max, s->cfg.batch_wait_us,
               s->cfg.api_key[0] ? ", api key required" : "",
               s->cfg.no_sync ? ", NO FSYNC" : "");

    int sig = 0;
    while (sigwait(&stop, &sig) != 0) {
    }
    sieve__log(s, SIEVE_LOG_INFO, "%s received: finishing in-flight requests",
               sig == SIGINT ? "SIGINT" : "SIGTERM");
    exit_code = 0;

out:
    atomic_store(&s->ready, 0);
    sieve__http_shutdown(s, 30.0);
    sieve__batcher_destroy(s->batcher);
    sieve_store_close(s->store);
    sieve__metrics_destroy(s->metrics);
    if (!exit_code) sieve__log(s, SIEVE_LOG_INFO, "stopped cleanly");
    free(s);
    return exit_code;
}

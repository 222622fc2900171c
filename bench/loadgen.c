/* loadgen.c: an HTTP load generator for sieve-server (sieve-loadgen).
 *
 * Owns: optionally creating a collection of random vectors through the API, then running
 * closed-loop search clients (one thread and one keep-alive connection each) at several
 * concurrency levels, reporting throughput, p50/p99/max latency, errors, and the mean
 * batch size the server's batcher formed during each level (from /metrics). Must not: use
 * anything of the server but its HTTP API.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct options {
    char url[512];
    char collection[128];
    char api_key[256];
    unsigned dim;
    unsigned long create; /* points to upload first; 0 = use the existing collection */
    char distance[16];
    char datatype[16];
    char clients[128];
    double duration, warmup;
    unsigned limit;
    unsigned long seed;
    unsigned upload_batch;
    unsigned upload_clients;
} options;

static void usage(FILE *f) {
    fprintf(f,
"usage: sieve-loadgen [options]\n"
"\n"
"Closed-loop search load against a running sieve-server: for each concurrency level,\n"
"N clients (one thread and one keep-alive connection each) send POST\n"
"/collections/NAME/points/search with random query vectors as fast as replies come\n"
"back. Prints queries/s, latency p50/p99/max and the mean batch size the server formed\n"
"(from /metrics).\n"
"\n"
"  --url URL          server (default http://127.0.0.1:6333)\n"
"  --collection NAME  collection to search (default bench)\n"
"  --api-key KEY      send this api key\n"
"  --create N         first (re)create the collection with N random vectors (uploaded in\n"
"                     batches; the collection is deleted first if it exists)\n"
"  --dim D            vector dimension for --create and queries (default 768)\n"
"  --distance NAME    Dot, Cosine or Euclid for --create (default Cosine)\n"
"  --datatype NAME    float32, float16 or bfloat16 for --create (default float32)\n"
"  --upload-batch N   points per upsert request for --create (default 1000)\n"
"  --upload-clients N concurrent upload connections for --create (default 4)\n"
"  --clients LIST     comma-separated concurrency levels (default 1,8,64)\n"
"  --duration S       measured seconds per level (default 10)\n"
"  --warmup S         unmeasured seconds before each level (default 1)\n"
"  --limit K          results per search (default 10)\n"
"  --seed N           random seed (default 1)\n"
"  -h, --help         show this help\n"
"\n"
"example: sieve-loadgen --create 100000 --dim 768 --clients 1,8,64 --duration 20\n");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static float gauss(uint64_t *s) {
    double u1 = ((double)(rng_next(s) >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (double)(rng_next(s) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* ---------------------------------------------------------------- HTTP */

typedef struct buf {
    char *p;
    size_t len;
} buf;

static size_t on_body(char *p, size_t sz, size_t n, void *ud) {
    buf *b = ud;
    size_t add = sz * n;
    char *q = realloc(b->p, b->len + add + 1);
    if (!q) return 0;
    memcpy(q + b->len, p, add);
    b->p = q;
    b->len += add;
    b->p[b->len] = 0;
    return add;
}

typedef struct conn {
    CURL *c;
    struct curl_slist *h;
    buf body;
} conn;

static int conn_init(conn *k, const options *o) {
    memset(k, 0, sizeof *k);
    k->c = curl_easy_init();
    if (!k->c) return -1;
    k->h = curl_slist_append(NULL, "Content-Type: application/json");
    k->h = curl_slist_append(k->h, "Expect:");
    if (o->api_key[0]) {
        char hdr[300];
        snprintf(hdr, sizeof hdr, "api-key: %s", o->api_key);
        k->h = curl_slist_append(k->h, hdr);
    }
    curl_easy_setopt(k->c, CURLOPT_HTTPHEADER, k->h);
    curl_easy_setopt(k->c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(k->c, CURLOPT_WRITEDATA, &k->body);
    curl_easy_setopt(k->c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(k->c, CURLOPT_TIMEOUT, 300L);
    curl_easy_setopt(k->c, CURLOPT_TCP_NODELAY, 1L);
    return 0;
}

static void conn_free(conn *k) {
    curl_slist_free_all(k->h);
    curl_easy_cleanup(k->c);
    free(k->body.p);
}

/* One request; returns the HTTP status (0 on a transport error). */
static long http(conn *k, const char *method, const char *url, const char *body, size_t len) {
    k->body.len = 0;
    if (k->body.p) k->body.p[0] = 0;
    curl_easy_setopt(k->c, CURLOPT_URL, url);
    curl_easy_setopt(k->c, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(k->c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(k->c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    } else {
        curl_easy_setopt(k->c, CURLOPT_POSTFIELDS, NULL);
        curl_easy_setopt(k->c, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(k->c, CURLOPT_CUSTOMREQUEST, method);
    }
    if (curl_easy_perform(k->c) != CURLE_OK) return 0;
    long st = 0;
    curl_easy_getinfo(k->c, CURLINFO_RESPONSE_CODE, &st);
    return st;
}

/* Appends a random vector as JSON. */
static void put_vector(FILE *f, unsigned dim, uint64_t *s) {
    fputc('[', f);
    for (unsigned d = 0; d < dim; d++) fprintf(f, "%s%.6g", d ? "," : "", (double)gauss(s));
    fputc(']', f);
}

typedef struct uploader {
    const options *o;
    pthread_mutex_t *mu;
    unsigned long *next;   /* next point to upload (shared) */
    unsigned long *done;
    double t0;
    int failed;
} uploader;

/* One upload connection: takes the next range of points, builds and sends its request. */
static void *upload_main(void *arg) {
    uploader *up = arg;
    const options *o = up->o;
    conn k;
    if (conn_init(&k, o)) {
        up->failed = 1;
        return NULL;
    }
    char url[1024];
    snprintf(url, sizeof url, "%s/collections/%s/points?wait=true", o->url, o->collection);
    for (;;) {
        pthread_mutex_lock(up->mu);
        unsigned long start = *up->next;
        unsigned long m = o->create - start < o->upload_batch ? o->create - start : o->upload_batch;
        *up->next += m;
        pthread_mutex_unlock(up->mu);
        if (!m) break;
        uint64_t s = (o->seed * 2654435761u + start) | 1; /* each range its own stream */
        char *req = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&req, &len);
        fprintf(f, "{\"batch\":{\"ids\":[");
        for (unsigned long i = 0; i < m; i++) fprintf(f, "%s%lu", i ? "," : "", start + i);
        fprintf(f, "],\"vectors\":[");
        for (unsigned long i = 0; i < m; i++) {
            if (i) fputc(',', f);
            put_vector(f, o->dim, &s);
        }
        fprintf(f, "]}}");
        fclose(f);
        long st = http(&k, "PUT", url, req, len);
        free(req);
        if (st != 200) {
            fprintf(stderr, "\nupsert: HTTP %ld %s\n", st, k.body.p ? k.body.p : "");
            up->failed = 1;
            break;
        }
        pthread_mutex_lock(up->mu);
        *up->done += m;
        unsigned long d = *up->done;
        pthread_mutex_unlock(up->mu);
        double el = now_s() - up->t0;
        fprintf(stderr, "\rcreate: %lu / %lu points (%.0f points/s)", d, o->create,
                d / (el > 0 ? el : 1e-9));
    }
    conn_free(&k);
    return NULL;
}

/* A Prometheus sample from /metrics (the line starting with name; 0 when the server has not
 * recorded it yet), or -1 when /metrics cannot be read. */
static double metric_sample(const options *o, const char *name) {
    conn k;
    if (conn_init(&k, o)) return -1;
    char url[1024];
    snprintf(url, sizeof url, "%s/metrics", o->url);
    double v = -1;
    if (http(&k, "GET", url, NULL, 0) == 200 && k.body.p) {
        v = 0;
        size_t n = strlen(name);
        for (const char *p = k.body.p; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
            if (!strncmp(p, name, n) && p[n] == ' ') {
                v = atof(p + n + 1);
                break;
            }
    }
    conn_free(&k);
    return v;
}

static int create_collection(const options *o) {
    conn k;
    if (conn_init(&k, o)) return -1;
    char url[1024];
    snprintf(url, sizeof url, "%s/collections/%s", o->url, o->collection);
    http(&k, "DELETE", url, NULL, 0);
    char body[256];
    int n = snprintf(body, sizeof body,
                     "{\"vectors\":{\"size\":%u,\"distance\":\"%s\",\"datatype\":\"%s\"}}",
                     o->dim, o->distance, o->datatype);
    long st = http(&k, "PUT", url, body, (size_t)n);
    if (st != 200) {
        fprintf(stderr, "create collection: HTTP %ld %s\n", st, k.body.p ? k.body.p : "");
        conn_free(&k);
        return -1;
    }
    conn_free(&k);
    static const char *upsert_sum = "sieve_http_request_duration_seconds_sum{method=\"PUT\","
                                    "route=\"/collections/{name}/points\"}";
    double server0 = metric_sample(o, upsert_sum);
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    unsigned long next = 0, done = 0;
    unsigned nt = o->upload_clients;
    uploader *ups = calloc(nt, sizeof *ups);
    pthread_t *th = calloc(nt, sizeof *th);
    if (!ups || !th) return -1;
    double t0 = now_s();
    for (unsigned i = 0; i < nt; i++) {
        ups[i] = (uploader){o, &mu, &next, &done, t0, 0};
        pthread_create(&th[i], NULL, upload_main, &ups[i]);
    }
    int failed = 0;
    for (unsigned i = 0; i < nt; i++) {
        pthread_join(th[i], NULL);
        failed |= ups[i].failed;
    }
    double wall = now_s() - t0;
    double server1 = metric_sample(o, upsert_sum);
    fprintf(stderr, "\n");
    if (!failed) {
        printf("create: %lu points of dim %u in %.1f s with %u upload clients: %.0f points/s "
               "end to end", o->create, o->dim, wall, nt, (double)o->create / wall);
        if (server0 >= 0 && server1 > server0)
            printf("; the server spent %.1f s in upsert requests (%.0f points per "
                   "request-second)", server1 - server0, (double)o->create / (server1 - server0));
        printf("\n");
    }
    free(ups);
    free(th);
    return failed ? -1 : 0;
}

/* Reads sieve_batch_size_sum and _count from /metrics. */
static int batch_metrics(const options *o, double *sum, double *count) {
    conn k;
    if (conn_init(&k, o)) return -1;
    char url[1024];
    snprintf(url, sizeof url, "%s/metrics", o->url);
    long st = http(&k, "GET", url, NULL, 0);
    int rc = -1;
    if (st == 200 && k.body.p) {
        const char *a = strstr(k.body.p, "\nsieve_batch_size_sum ");
        const char *b = strstr(k.body.p, "\nsieve_batch_size_count ");
        if (a && b) {
            *sum = atof(a + strlen("\nsieve_batch_size_sum "));
            *count = atof(b + strlen("\nsieve_batch_size_count "));
            rc = 0;
        }
    }
    conn_free(&k);
    return rc;
}

/* ---------------------------------------------------------------- load */

typedef struct shared {
    const options *o;
    char **queries; /* pre-built request bodies */
    size_t *qlen;
    unsigned nq;
    double start_measure, stop;
} shared;

typedef struct client {
    shared *sh;
    unsigned id;
    double *lat;
    size_t n, cap;
    unsigned long errors;
    long last_error;
} client;

static void *client_main(void *arg) {
    client *c = arg;
    shared *sh = c->sh;
    conn k;
    if (conn_init(&k, sh->o)) return NULL;
    char url[1024];
    snprintf(url, sizeof url, "%s/collections/%s/points/search", sh->o->url, sh->o->collection);
    unsigned qi = c->id * 7919u;
    for (;;) {
        double t0 = now_s();
        if (t0 >= sh->stop) break;
        unsigned q = qi++ % sh->nq;
        long st = http(&k, "POST", url, sh->queries[q], sh->qlen[q]);
        double t1 = now_s();
        if (t0 < sh->start_measure) continue; /* warm-up */
        if (st != 200) {
            c->errors++;
            c->last_error = st;
            continue;
        }
        if (c->n == c->cap) {
            size_t cap = c->cap ? c->cap * 2 : 4096;
            double *p = realloc(c->lat, cap * sizeof *p);
            if (!p) break;
            c->lat = p;
            c->cap = cap;
        }
        c->lat[c->n++] = t1 - t0;
    }
    conn_free(&k);
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void run_level(shared *sh, unsigned clients) {
    const options *o = sh->o;
    double bs0 = 0, bc0 = 0, bs1 = 0, bc1 = 0;
    int have_metrics = batch_metrics(o, &bs0, &bc0) == 0;
    client *cs = calloc(clients, sizeof *cs);
    pthread_t *th = calloc(clients, sizeof *th);
    if (!cs || !th) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    double t = now_s();
    sh->start_measure = t + o->warmup;
    sh->stop = sh->start_measure + o->duration;
    for (unsigned i = 0; i < clients; i++) {
        cs[i].sh = sh;
        cs[i].id = i;
        pthread_create(&th[i], NULL, client_main, &cs[i]);
    }
    /* Batch metrics over the measured window only. */
    struct timespec ts = {(time_t)o->warmup, (long)((o->warmup - (time_t)o->warmup) * 1e9)};
    nanosleep(&ts, NULL);
    if (have_metrics) have_metrics = batch_metrics(o, &bs0, &bc0) == 0;
    size_t total = 0;
    unsigned long errors = 0;
    long last_error = 0;
    for (unsigned i = 0; i < clients; i++) {
        pthread_join(th[i], NULL);
        total += cs[i].n;
        errors += cs[i].errors;
        if (cs[i].errors) last_error = cs[i].last_error;
    }
    if (have_metrics) have_metrics = batch_metrics(o, &bs1, &bc1) == 0;
    double *all = malloc((total ? total : 1) * sizeof *all);
    size_t off = 0;
    for (unsigned i = 0; i < clients; i++) {
        memcpy(all + off, cs[i].lat, cs[i].n * sizeof *all);
        off += cs[i].n;
        free(cs[i].lat);
    }
    qsort(all, total, sizeof *all, cmp_double);
    double p50 = total ? all[(size_t)(0.50 * (double)(total - 1))] : 0;
    double p99 = total ? all[(size_t)(0.99 * (double)(total - 1))] : 0;
    double mx = total ? all[total - 1] : 0;
    char batch[32] = "n/a";
    if (have_metrics && bc1 > bc0) snprintf(batch, sizeof batch, "%.1f", (bs1 - bs0) / (bc1 - bc0));
    printf("| %7u | %9.1f | %8.2f | %8.2f | %8.2f | %10s | %6lu |", clients,
           (double)total / o->duration, p50 * 1e3, p99 * 1e3, mx * 1e3, batch, errors);
    if (errors) printf(" (last error HTTP %ld)", last_error);
    printf("\n");
    fflush(stdout);
    free(all);
    free(cs);
    free(th);
}

int main(int argc, char **argv) {
    options o;
    memset(&o, 0, sizeof o);
    snprintf(o.url, sizeof o.url, "http://127.0.0.1:6333");
    snprintf(o.collection, sizeof o.collection, "bench");
    snprintf(o.distance, sizeof o.distance, "Cosine");
    snprintf(o.datatype, sizeof o.datatype, "float32");
    snprintf(o.clients, sizeof o.clients, "1,8,64");
    o.dim = 768;
    o.duration = 10;
    o.warmup = 1;
    o.limit = 10;
    o.seed = 1;
    o.upload_batch = 1000;
    o.upload_clients = 4;
    static const struct option lo[] = {
        {"url", required_argument, NULL, 'u'},      {"collection", required_argument, NULL, 'c'},
        {"api-key", required_argument, NULL, 'k'},  {"create", required_argument, NULL, 'C'},
        {"dim", required_argument, NULL, 'd'},      {"distance", required_argument, NULL, 'D'},
        {"datatype", required_argument, NULL, 'T'}, {"clients", required_argument, NULL, 'n'},
        {"duration", required_argument, NULL, 't'}, {"warmup", required_argument, NULL, 'w'},
        {"limit", required_argument, NULL, 'l'},    {"seed", required_argument, NULL, 's'},
        {"upload-batch", required_argument, NULL, 'b'}, {"help", no_argument, NULL, 'h'},
        {"upload-clients", required_argument, NULL, 'U'},
        {NULL, 0, NULL, 0}};
    int opt;
    while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (opt) {
        case 'u': snprintf(o.url, sizeof o.url, "%s", optarg); break;
        case 'c': snprintf(o.collection, sizeof o.collection, "%s", optarg); break;
        case 'k': snprintf(o.api_key, sizeof o.api_key, "%s", optarg); break;
        case 'C': o.create = strtoul(optarg, NULL, 10); break;
        case 'd': o.dim = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'D': snprintf(o.distance, sizeof o.distance, "%s", optarg); break;
        case 'T': snprintf(o.datatype, sizeof o.datatype, "%s", optarg); break;
        case 'n': snprintf(o.clients, sizeof o.clients, "%s", optarg); break;
        case 't': o.duration = atof(optarg); break;
        case 'w': o.warmup = atof(optarg); break;
        case 'l': o.limit = (unsigned)strtoul(optarg, NULL, 10); break;
        case 's': o.seed = strtoul(optarg, NULL, 10); break;
        case 'b': o.upload_batch = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'U': o.upload_clients = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc || o.dim == 0 || o.duration <= 0 || o.warmup < 0 || o.limit == 0 ||
        o.upload_batch == 0 || o.upload_clients == 0 || o.upload_clients > 256) {
        usage(stderr);
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (o.create && create_collection(&o)) return 1;

    shared sh;
    memset(&sh, 0, sizeof sh);
    sh.o = &o;
    sh.nq = 1024;
    sh.queries = calloc(sh.nq, sizeof *sh.queries);
    sh.qlen = calloc(sh.nq, sizeof *sh.qlen);
    uint64_t s = o.seed * 0x9e3779b97f4a7c15ull + 1;
    for (unsigned i = 0; i < sh.nq; i++) {
        FILE *f = open_memstream(&sh.queries[i], &sh.qlen[i]);
        fprintf(f, "{\"vector\":");
        put_vector(f, o.dim, &s);
        fprintf(f, ",\"limit\":%u}", o.limit);
        fclose(f);
    }
    /* Check once that searches work before measuring. */
    conn k;
    conn_init(&k, &o);
    char url[1024];
    snprintf(url, sizeof url, "%s/collections/%s/points/search", o.url, o.collection);
    long st = http(&k, "POST", url, sh.queries[0], sh.qlen[0]);
    if (st != 200) {
        fprintf(stderr, "search %s: HTTP %ld %s\n", url, st, k.body.p ? k.body.p : "");
        return 1;
    }
    conn_free(&k);

    printf("sieve-loadgen: %s collection %s, dim %u, limit %u, %.1f s per level (after %.1f s "
           "warm-up)\n\n", o.url, o.collection, o.dim, o.limit, o.duration, o.warmup);
    printf("| clients | queries/s | p50 ms   | p99 ms   | max ms   | mean batch | errors |\n");
    printf("|---------|-----------|----------|----------|----------|------------|--------|\n");
    char levels[128];
    snprintf(levels, sizeof levels, "%s", o.clients);
    for (char *save = NULL, *t = strtok_r(levels, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        unsigned n = (unsigned)strtoul(t, NULL, 10);
        if (n == 0 || n > 4096) {
            fprintf(stderr, "bad concurrency level '%s'\n", t);
            return 2;
        }
        run_level(&sh, n);
    }
    for (unsigned i = 0; i < sh.nq; i++) free(sh.queries[i]);
    free(sh.queries);
    free(sh.qlen);
    curl_global_cleanup();
    return 0;
}

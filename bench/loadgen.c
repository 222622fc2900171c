/* loadgen.c: an HTTP load generator for sieve-server (sieve-loadgen).
 *
 * Owns: optionally creating a collection of random vectors through the API, then running
 * closed-loop search clients (one thread and one keep-alive connection each) at several
 * concurrency levels, reporting throughput, p50/p99/max latency, errors, the mean batch
 * size the server's batcher formed during each level (from /metrics), and the CPU the load
 * generator itself used (and the whole machine's, from /proc/stat) so a reader can tell
 * whether the client or the server saturated. Must not: use anything of the server but its
 * HTTP API.
 *
 * The measured loop is kept cheap: a pool of complete HTTP requests (headers and a random
 * query each) is formatted before any level starts, and each client writes them on a plain
 * keep-alive socket and reads the reply by its Content-Length (no HTTP library in the loop).
 * libcurl is used only for setup (create, upload, /metrics).
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

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
    unsigned pool;        /* pre-formatted search requests */
} options;

static void usage(FILE *f) {
    fprintf(f,
"usage: sieve-loadgen [options]\n"
"\n"
"Closed-loop search load against a running sieve-server: for each concurrency level,\n"
"N clients (one thread and one keep-alive connection each) send POST\n"
"/collections/NAME/points/search with random query vectors as fast as replies come\n"
"back. Prints queries/s, latency p50/p99/max and the mean batch size the server formed\n"
"(from /metrics), and the CPU the load generator used (client cores: CPU seconds per\n"
"second) beside the whole machine's busy share (from /proc/stat), so a saturated client\n"
"shows. The search loop writes pre-formatted requests on plain keep-alive sockets.\n"
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
"  --pool N           distinct random queries, formatted as complete HTTP requests before\n"
"                     the first level (default 1024)\n"
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

/* ---------------------------------------------------------------- raw keep-alive HTTP */

/* Host, port and path prefix of --url (http:// only). Returns 0 or -1. */
static int parse_url(const char *url, char *host, size_t hn, char *port, size_t pn,
                     char *prefix, size_t fn) {
    const char *p = url;
    if (!strncmp(p, "http://", 7)) p += 7;
    else if (strstr(p, "://")) return -1;
    const char *slash = strchr(p, '/');
    size_t hp = slash ? (size_t)(slash - p) : strlen(p);
    snprintf(prefix, fn, "%s", slash ? slash : "");
    size_t plen = strlen(prefix);
    while (plen && prefix[plen - 1] == '/') prefix[--plen] = 0;
    const char *colon = NULL;
    if (p[0] == '[') { /* [v6]:port */
        const char *end = memchr(p, ']', hp);
        if (!end) return -1;
        snprintf(host, hn, "%.*s", (int)(end - p - 1), p + 1);
        colon = end + 1 < p + hp && end[1] == ':' ? end + 1 : NULL;
    } else {
        colon = memchr(p, ':', hp);
        snprintf(host, hn, "%.*s", (int)(colon ? (size_t)(colon - p) : hp), p);
    }
    if (colon) snprintf(port, pn, "%.*s", (int)(p + hp - colon - 1), colon + 1);
    else snprintf(port, pn, "80");
    return host[0] ? 0 : -1;
}

static int tcp_connect(const char *host, const char *port) {
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &ai)) return -1;
    int fd = -1;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return fd;
}

/* One keep-alive connection with its receive buffer. */
typedef struct rconn {
    int fd;
    char *buf;
    size_t cap, len; /* bytes held (the start of the next reply may follow this one) */
} rconn;

static int write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Grows the connection's buffer to at least cap bytes and appends what one recv returns
 * (retried on EINTR). Returns 0 on allocation failure, error or end of stream. */
static int recv_more(rconn *c, size_t cap) {
    if (c->cap < cap) {
        char *q = realloc(c->buf, cap);
        if (!q) return 0;
        c->buf = q;
        c->cap = cap;
    }
    for (;;) {
        ssize_t r = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        c->len += (size_t)r;
        return 1;
    }
}

/* Reads one reply; returns its HTTP status, 0 on a transport or framing error. Replies
 * must carry Content-Length (sieve-server's do). *close_after is set for Connection: close. */
static long read_reply(rconn *c, int *close_after) {
    size_t head = 0;
    *close_after = 0;
    for (;;) {
        if (c->len >= 4) {
            char *e = memmem(c->buf, c->len, "\r\n\r\n", 4);
            if (e) {
                head = (size_t)(e - c->buf) + 4;
                break;
            }
        }
        if (!recv_more(c, c->len == c->cap ? (c->cap ? c->cap * 2 : 16384) : c->cap)) return 0;
    }
    long status = 0;
    if (sscanf(c->buf, "HTTP/%*d.%*d %ld", &status) != 1) return 0;
    long long clen = -1;
    const char *end = c->buf + head;
    for (const char *l = memchr(c->buf, '\n', head); l && l + 1 < end;) {
        l++; /* start of a header line */
        const char *eol = memchr(l, '\n', (size_t)(end - l));
        size_t n = eol ? (size_t)(eol - l) : (size_t)(end - l);
        if (n >= 15 && !strncasecmp(l, "Content-Length:", 15)) clen = atoll(l + 15);
        else if (n >= 11 && !strncasecmp(l, "Connection:", 11) && memmem(l, n, "close", 5))
            *close_after = 1;
        else if (n >= 18 && !strncasecmp(l, "Transfer-Encoding:", 18))
            return 0; /* not supported */
        l = eol;
    }
    if (clen < 0) return 0;
    size_t total = head + (size_t)clen;
    while (c->len < total)
        if (!recv_more(c, total)) return 0;
    memmove(c->buf, c->buf + total, c->len - total);
    c->len -= total;
    return status;
}

/* ---------------------------------------------------------------- load */

typedef struct shared {
    const options *o;
    char host[256], port[16];
    char **requests; /* pre-built complete HTTP requests */
    size_t *rlen;
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
    rconn k = {-1, NULL, 0, 0};
    unsigned qi = c->id * 7919u;
    for (;;) {
        double t0 = now_s();
        if (t0 >= sh->stop) break;
        if (k.fd < 0) {
            k.fd = tcp_connect(sh->host, sh->port);
            k.len = 0;
            if (k.fd < 0) {
                if (t0 >= sh->start_measure) {
                    c->errors++;
                    c->last_error = 0;
                }
                struct timespec ts = {0, 10 * 1000 * 1000};
                nanosleep(&ts, NULL);
                continue;
            }
        }
        unsigned q = qi++ % sh->nq;
        int close_after = 0;
        long st = write_all(k.fd, sh->requests[q], sh->rlen[q]) ? 0
                                                                : read_reply(&k, &close_after);
        double t1 = now_s();
        if (st == 0 || close_after) {
            close(k.fd);
            k.fd = -1;
        }
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
    if (k.fd >= 0) close(k.fd);
    free(k.buf);
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* CPU seconds this process used (user + system, all threads). */
static double process_cpu_s(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru)) return 0;
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

/* The machine's busy and total jiffies from /proc/stat; 0 when unreadable. */
static int machine_jiffies(unsigned long long *busy, unsigned long long *total) {
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return 0;
    unsigned long long v[10] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
                   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
    fclose(f);
    if (n < 4) return 0;
    *total = 0;
    for (int i = 0; i < 8; i++) *total += v[i]; /* guest time is already in user */
    *busy = *total - v[3] - v[4];               /* less idle and iowait */
    return 1;
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
    /* Batch metrics and CPU over the measured window only. */
    double wait = sh->start_measure - now_s();
    if (wait > 0) {
        struct timespec ts = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
        nanosleep(&ts, NULL);
    }
    if (have_metrics) have_metrics = batch_metrics(o, &bs0, &bc0) == 0;
    double cpu0 = process_cpu_s(), w0 = now_s();
    unsigned long long mb0 = 0, mt0 = 0, mb1 = 0, mt1 = 0;
    int have_machine = machine_jiffies(&mb0, &mt0);
    wait = sh->stop - now_s();
    if (wait > 0) {
        struct timespec ts = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
        nanosleep(&ts, NULL);
    }
    double cpu1 = process_cpu_s(), w1 = now_s();
    if (have_machine) have_machine = machine_jiffies(&mb1, &mt1);
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
    char batch[32] = "n/a", machine[32] = "n/a";
    if (have_metrics && bc1 > bc0) snprintf(batch, sizeof batch, "%.1f", (bs1 - bs0) / (bc1 - bc0));
    if (have_machine && mt1 > mt0)
        snprintf(machine, sizeof machine, "%.0f%%", 100.0 * (double)(mb1 - mb0) / (double)(mt1 - mt0));
    double client_cores = w1 > w0 ? (cpu1 - cpu0) / (w1 - w0) : 0;
    printf("| %7u | %9.1f | %8.2f | %8.2f | %8.2f | %10s | %6lu | %12.2f | %12s |", clients,
           (double)total / o->duration, p50 * 1e3, p99 * 1e3, mx * 1e3, batch, errors,
           client_cores, machine);
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
    o.pool = 1024;
    static const struct option lo[] = {
        {"url", required_argument, NULL, 'u'},      {"collection", required_argument, NULL, 'c'},
        {"api-key", required_argument, NULL, 'k'},  {"create", required_argument, NULL, 'C'},
        {"dim", required_argument, NULL, 'd'},      {"distance", required_argument, NULL, 'D'},
        {"datatype", required_argument, NULL, 'T'}, {"clients", required_argument, NULL, 'n'},
        {"duration", required_argument, NULL, 't'}, {"warmup", required_argument, NULL, 'w'},
        {"limit", required_argument, NULL, 'l'},    {"seed", required_argument, NULL, 's'},
        {"upload-batch", required_argument, NULL, 'b'}, {"help", no_argument, NULL, 'h'},
        {"upload-clients", required_argument, NULL, 'U'},
        {"pool", required_argument, NULL, 'P'},
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
        case 'P': o.pool = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc || o.dim == 0 || o.duration <= 0 || o.warmup < 0 || o.limit == 0 ||
        o.upload_batch == 0 || o.upload_clients == 0 || o.upload_clients > 256 || o.pool == 0 ||
        o.pool > 1000000) {
        usage(stderr);
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (o.create && create_collection(&o)) return 1;

    shared sh;
    memset(&sh, 0, sizeof sh);
    sh.o = &o;
    char prefix[256];
    if (parse_url(o.url, sh.host, sizeof sh.host, sh.port, sizeof sh.port, prefix,
                  sizeof prefix)) {
        fprintf(stderr, "sieve-loadgen: --url must be http://HOST[:PORT][/PREFIX], got %s\n",
                o.url);
        return 2;
    }
    /* The pool: complete requests (headers and body), formatted before any level. */
    sh.nq = o.pool;
    sh.requests = calloc(sh.nq, sizeof *sh.requests);
    sh.rlen = calloc(sh.nq, sizeof *sh.rlen);
    if (!sh.requests || !sh.rlen) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    uint64_t s = o.seed * 0x9e3779b97f4a7c15ull + 1;
    char *first_body = NULL;
    size_t first_len = 0;
    for (unsigned i = 0; i < sh.nq; i++) {
        char *body = NULL;
        size_t blen = 0;
        FILE *f = open_memstream(&body, &blen);
        fprintf(f, "{\"vector\":");
        put_vector(f, o.dim, &s);
        fprintf(f, ",\"limit\":%u}", o.limit);
        fclose(f);
        f = open_memstream(&sh.requests[i], &sh.rlen[i]);
        fprintf(f, "POST %s/collections/%s/points/search HTTP/1.1\r\nHost: %s:%s\r\n"
                   "Content-Type: application/json\r\nContent-Length: %zu\r\n",
                prefix, o.collection, sh.host, sh.port, blen);
        if (o.api_key[0]) fprintf(f, "api-key: %s\r\n", o.api_key);
        fprintf(f, "\r\n");
        fwrite(body, 1, blen, f);
        fclose(f);
        if (i == 0) {
            first_body = body;
            first_len = blen;
        } else {
            free(body);
        }
    }
    /* Check once that searches work before measuring. */
    conn k;
    conn_init(&k, &o);
    char url[1024];
    snprintf(url, sizeof url, "%s/collections/%s/points/search", o.url, o.collection);
    long st = http(&k, "POST", url, first_body, first_len);
    free(first_body);
    if (st != 200) {
        fprintf(stderr, "search %s: HTTP %ld %s\n", url, st, k.body.p ? k.body.p : "");
        return 1;
    }
    conn_free(&k);

    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    printf("sieve-loadgen: %s collection %s, dim %u, limit %u, %.1f s per level (after %.1f s "
           "warm-up), %u pre-formatted queries, %ld CPUs here\n\n", o.url, o.collection, o.dim,
           o.limit, o.duration, o.warmup, sh.nq, ncpu);
    printf("| clients | queries/s | p50 ms   | p99 ms   | max ms   | mean batch | errors | client cores | machine busy |\n");
    printf("|---------|-----------|----------|----------|----------|------------|--------|--------------|--------------|\n");
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
    for (unsigned i = 0; i < sh.nq; i++) free(sh.requests[i]);
    free(sh.requests);
    free(sh.rlen);
    curl_global_cleanup();
    return 0;
}

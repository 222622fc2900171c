/* datagen.c: sieve-datagen, writes synthetic vectors (and queries) to .fbin/.npy/.fvecs, and
 * checks existing dataset files. Owns only argument parsing and the generate-then-write loop:
 * formats, generators and the progress bar come from sieve_datasets.h. Must not: hold a whole
 * dataset in memory (it streams in chunks, generating the next chunk on worker threads while
 * the current one is written). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sieve_datasets.h"

#define CHUNK_BYTES ((size_t)32 << 20)
#define MAX_THREADS 64

static void usage(FILE *f) {
    fputs(
        "usage: sieve-datagen --kind KIND --count N --out FILE [options]\n"
        "       sieve-datagen --check FILE...\n"
        "\n"
        "Writes deterministic synthetic vectors (same seed, same bytes, whatever the thread\n"
        "count) to .fbin, .npy or .fvecs, optionally with queries; or checks dataset files.\n"
        "\n"
        "kinds:\n"
        "  gaussian        i.i.d. N(0,1) elements (--normalize for unit vectors)\n"
        "  clustered       unit vectors around --clusters centres (--spread, --anisotropy)\n"
        "  msmarco         MS MARCO-shaped: 768-d unit vectors, at most 8,841,823 rows,\n"
        "                  4096 clusters; queries drawn near passages\n"
        "  adversarial:NAME  rows around one query, NAME one of sorted-asc, sorted-desc,\n"
        "                  ties, outlier, narrow-band, duplicates, random; the query is\n"
        "                  written to --queries-out\n"
        "\n"
        "options:\n"
        "  --count N          rows to write (msmarco default 8841823)\n"
        "  --dim D            dimension (default 768; msmarco must be 768)\n"
        "  --seed S           seed (default 0)\n"
        "  --out FILE         vectors file; the format comes from the extension\n"
        "  --format F         fbin, npy or fvecs (overrides the extension)\n"
        "  --dtype T          float32 (default) or float16 (npy only)\n"
        "  --queries N        queries to write to --queries-out (default 0; 1 for adversarial)\n"
        "  --queries-out FILE queries file (.fbin, .npy or .fvecs)\n"
        "  --sources-out FILE for each query, the row it was drawn near (.u64bin or .npy)\n"
        "  --normalize        gaussian: unit-normalise rows and queries\n"
        "  --clusters C       clustered: number of centres (default 1024)\n"
        "  --spread S         clustered: spread around a centre (default 1.0)\n"
        "  --anisotropy A     clustered: weight of the shared direction, in [0,1) (default 0.5)\n"
        "  --query-noise T    clustered: query distance from its source row (default 0.5)\n"
        "  --threads T        generator threads (default: online CPUs, at most 64)\n"
        "  --progress / --no-progress   force the progress bar on or off (default: on when\n"
        "                     stderr is a terminal)\n"
        "  --check FILE...    validate files (any supported format): print shape and type,\n"
        "                     read every row, report the read rate; exit 1 on any error\n"
        "  -h, --help         this text\n"
        "\n"
        "examples:\n"
        "  sieve-datagen --kind msmarco --count 1000000 --out passages.fbin \\\n"
        "                --queries 10000 --queries-out queries.fbin --sources-out src.u64bin\n"
        "  sieve-datagen --kind adversarial:outlier --count 100000 --dim 128 \\\n"
        "                --out outlier.npy --queries-out q.npy\n"
        "  sieve-datagen --check passages.fbin ids.u64bin collection.tsv\n",
        f);
}

typedef struct options {
    const char *kind;
    uint64_t count;
    int count_set;
    uint32_t dim;
    uint64_t seed;
    const char *out, *format, *dtype;
    uint64_t queries;
    int queries_set;
    const char *queries_out, *sources_out;
    int normalize;
    uint32_t clusters;
    float spread, anisotropy, query_noise;
    int clusters_set, spread_set, aniso_set, noise_set;
    int threads;
    sieve_progress_mode progress;
    const char **check;
    int ncheck;
} options;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s || *s == '-') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static int parse_f(const char *s, float *out) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static int bad_value(const char *opt, const char *v, const char *expect) {
    fprintf(stderr, "sieve-datagen: %s %s: expected %s (see --help)\n", opt, v ? v : "(missing)",
            expect);
    return 2;
}

static int parse_args(int argc, char **argv, options *o) {
    memset(o, 0, sizeof *o);
    o->dim = 768;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    o->threads = cpus > 0 ? (int)(cpus > MAX_THREADS ? MAX_THREADS : cpus) : 1;
    o->progress = SIEVE_PROGRESS_AUTO;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        const char *val = NULL;
        char name[64];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "sieve-datagen: unexpected argument '%s' (see --help)\n", a);
            return 2;
        }
        char *eq = strchr(a, '=');
        if (eq) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - a), a);
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
        }
#define FLAG(n) (!strcmp(name, n))
#define VALUE()                                                                          \
    do {                                                                                 \
        if (!val) {                                                                      \
            if (i + 1 >= argc) return bad_value(name, NULL, "a value");                  \
            val = argv[++i];                                                             \
        }                                                                                \
    } while (0)
        if (FLAG("--normalize")) o->normalize = 1;
        else if (FLAG("--progress")) o->progress = SIEVE_PROGRESS_ALWAYS;
        else if (FLAG("--no-progress")) o->progress = SIEVE_PROGRESS_NEVER;
        else if (FLAG("--check")) {
            o->check = (const char **)&argv[i + 1];
            if (val) { /* --check=FILE FILE... */
                argv[i] = (char *)val;
                o->check = (const char **)&argv[i];
            }
            o->ncheck = argc - (int)(o->check - (const char **)argv);
            if (o->ncheck <= 0) return bad_value("--check", NULL, "one or more files");
            return 0;
        } else {
            VALUE();
            uint64_t u;
            if (FLAG("--kind")) o->kind = val;
            else if (FLAG("--out")) o->out = val;
            else if (FLAG("--format")) o->format = val;
            else if (FLAG("--dtype")) o->dtype = val;
            else if (FLAG("--queries-out")) o->queries_out = val;
            else if (FLAG("--sources-out")) o->sources_out = val;
            else if (FLAG("--count")) {
                if (parse_u64(val, &o->count) || o->count == 0)
                    return bad_value(name, val, "a positive integer");
                o->count_set = 1;
            } else if (FLAG("--dim")) {
                if (parse_u64(val, &u) || u == 0 || u > SIEVE_DS_MAX_DIM)
                    return bad_value(name, val, "an integer from 1 to 65536");
                o->dim = (uint32_t)u;
            } else if (FLAG("--seed")) {
                if (parse_u64(val, &o->seed)) return bad_value(name, val, "a non-negative integer");
            } else if (FLAG("--queries")) {
                if (parse_u64(val, &o->queries)) return bad_value(name, val, "a non-negative integer");
                o->queries_set = 1;
            } else if (FLAG("--clusters")) {
                if (parse_u64(val, &u) || u == 0 || u > (1u << 24))
                    return bad_value(name, val, "an integer from 1 to 16777216");
                o->clusters = (uint32_t)u;
                o->clusters_set = 1;
            } else if (FLAG("--spread")) {
                if (parse_f(val, &o->spread)) return bad_value(name, val, "a number");
                o->spread_set = 1;
            } else if (FLAG("--anisotropy")) {
                if (parse_f(val, &o->anisotropy)) return bad_value(name, val, "a number");
                o->aniso_set = 1;
            } else if (FLAG("--query-noise")) {
                if (parse_f(val, &o->query_noise)) return bad_value(name, val, "a number");
                o->noise_set = 1;
            } else if (FLAG("--threads")) {
                if (parse_u64(val, &u) || u == 0 || u > MAX_THREADS)
                    return bad_value(name, val, "an integer from 1 to 64");
                o->threads = (int)u;
            } else {
                fprintf(stderr, "sieve-datagen: unknown option '%s' (see --help)\n", name);
                return 2;
            }
        }
#undef FLAG
#undef VALUE
    }
    return 0;
}

/* ------------------------------------------------------------ --check */

static void human_bytes(char *b, size_t n, double v) {
    if (v >= 1e9) snprintf(b, n, "%.2f GB", v / 1e9);
    else if (v >= 1e6) snprintf(b, n, "%.2f MB", v / 1e6);
    else snprintf(b, n, "%.0f bytes", v);
}

static int check_dense(const char *path, sieve_progress_mode pm) {
    sieve_ds_error err = {0};
    sieve_ds_reader *r;
    int rc = sieve_ds_reader_open(path, SIEVE_DS_FORMAT_AUTO, 0, &r, &err);
    if (rc) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    sieve_ds_info in;
    sieve_ds_reader_info(r, &in);
    int is_int = in.elem != SIEVE_DS_ELEM_F32 && in.elem != SIEVE_DS_ELEM_F16;
    size_t rows = in.dim ? CHUNK_BYTES / (in.dim * sizeof(float)) : 1;
    if (rows == 0) rows = 1;
    void *buf = malloc(rows * (in.dim ? in.dim : 1) * 8);
    if (!buf) {
        fprintf(stderr, "%s: out of memory\n", path);
        sieve_ds_reader_close(r);
        return 1;
    }
    sieve_progress pr;
    sieve_progress_init(&pr, stderr, "check", "rows", in.count, 0, pm);
    double t0 = now_s();
    uint64_t total = 0;
    for (;;) {
        size_t got;
        rc = is_int ? sieve_ds_reader_read_u64(r, rows, buf, &got, &err)
                    : sieve_ds_reader_read_f32(r, rows, buf, &got, &err);
        total += got;
        if (rc || got == 0) break;
        sieve_progress_update(&pr, total);
    }
    double dt = now_s() - t0;
    sieve_progress_finish(&pr);
    free(buf);
    sieve_ds_reader_close(r);
    if (rc) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    char hb[32];
    human_bytes(hb, sizeof hb, (double)in.file_bytes);
    printf("%s: %s, %s, %llu x %u, %s: ok (read in %.2f s, %.2f GB/s)\n", path,
           sieve_ds_format_name(in.format), sieve_ds_elem_name(in.elem),
           (unsigned long long)in.count, in.dim, hb, dt,
           dt > 0 ? (double)in.file_bytes / dt / 1e9 : 0.0);
    return 0;
}

static int check_text(const char *path, sieve_ds_format f) {
    sieve_ds_error err = {0};
    uint64_t n = 0;
    int rc = 0;
    uint32_t dim = 0;
    double t0 = now_s();
    if (f == SIEVE_DS_FORMAT_JSONL) {
        sieve_ds_jsonl *j;
        rc = sieve_ds_jsonl_open(path, 0, &j, &err);
        while (!rc) {
            sieve_ds_record rec;
            int got;
            rc = sieve_ds_jsonl_next(j, &rec, &got, &err);
            if (rc || !got) break;
            dim = rec.dim;
            n++;
        }
        if (j) sieve_ds_jsonl_close(j);
    } else if (f == SIEVE_DS_FORMAT_TSV) {
        sieve_ds_tsv *t;
        rc = sieve_ds_tsv_open(path, &t, &err);
        while (!rc) {
            sieve_ds_text rec;
            int got;
            rc = sieve_ds_tsv_next(t, &rec, &got, &err);
            if (rc || !got) break;
            n++;
        }
        if (t) sieve_ds_tsv_close(t);
    } else {
        sieve_ds_qrel *q;
        size_t qn;
        rc = sieve_ds_qrels_load(path, &q, &qn, &err);
        if (!rc) {
            free(q);
            n = qn;
        }
    }
    if (rc) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("%s: %s, %llu records", path, sieve_ds_format_name(f), (unsigned long long)n);
    if (dim) printf(" with %u-d vectors", dim);
    printf(": ok (read in %.2f s)\n", now_s() - t0);
    return 0;
}

static int run_check(const options *o) {
    int bad = 0;
    for (int i = 0; i < o->ncheck; i++) {
        const char *p = o->check[i];
        sieve_ds_format f = sieve_ds_format_from_path(p);
        if (f == SIEVE_DS_FORMAT_JSONL || f == SIEVE_DS_FORMAT_TSV) bad |= check_text(p, f);
        else if (strstr(p, "qrels")) bad |= check_text(p, SIEVE_DS_FORMAT_QRELS);
        else bad |= check_dense(p, o->progress);
    }
    return bad ? 1 : 0;
}

/* ------------------------------------------------------------ generation */

typedef struct source {
    const sieve_ds_gen *gen; /* or adversarial: */
    int adversarial;
    sieve_ds_adv_kind adv;
    const float *query;
    uint32_t dim;
    uint64_t count, seed;
} source;

typedef struct job {
    const source *src;
    uint64_t row0;
    size_t n;
    float *out;
    int rc;
    pthread_t th;
} job;

static void *job_run(void *arg) {
    job *j = arg;
    const source *s = j->src;
    if (s->adversarial)
        j->rc = sieve_ds_adv_rows(s->adv, s->query, s->dim, s->count, s->seed, j->row0, j->n,
                                  j->out, NULL);
    else
        j->rc = sieve_ds_gen_rows(s->gen, j->row0, j->n, j->out);
    return NULL;
}

/* Starts up to `threads` jobs filling rows [row0, row0+n) into out. Returns jobs started. */
static int start_jobs(const source *s, job *jobs, int threads, uint64_t row0, size_t n,
                      float *out) {
    size_t per = (n + (size_t)threads - 1) / (size_t)threads;
    int k = 0;
    for (size_t off = 0; off < n; off += per, k++) {
        job *j = &jobs[k];
        j->src = s;
        j->row0 = row0 + off;
        j->n = n - off < per ? n - off : per;
        j->out = out + off * s->dim;
        j->rc = 0;
        if (pthread_create(&j->th, NULL, job_run, j) != 0) {
            job_run(j); /* no thread: do it here */
            j->th = pthread_self();
        }
    }
    return k;
}

static int join_jobs(job *jobs, int k) {
    int rc = 0;
    for (int i = 0; i < k; i++) {
        if (!pthread_equal(jobs[i].th, pthread_self())) pthread_join(jobs[i].th, NULL);
        if (jobs[i].rc && !rc) rc = jobs[i].rc;
    }
    return rc;
}

static int open_writer(const char *path, const char *format, const char *dtype, uint32_t dim,
                       sieve_ds_writer **w) {
    sieve_ds_format f = SIEVE_DS_FORMAT_AUTO;
    if (format && sieve_ds_format_parse(format, &f)) {
        fprintf(stderr, "sieve-datagen: --format %s: expected fbin, npy or fvecs\n", format);
        return 2;
    }
    if (f == SIEVE_DS_FORMAT_AUTO) f = sieve_ds_format_from_path(path);
    if (f != SIEVE_DS_FORMAT_FBIN && f != SIEVE_DS_FORMAT_NPY && f != SIEVE_DS_FORMAT_FVECS) {
        fprintf(stderr,
                "sieve-datagen: %s: cannot write vectors in this format; expected a .fbin, .npy "
                "or .fvecs name (or --format)\n",
                path);
        return 2;
    }
    sieve_ds_elem e = SIEVE_DS_ELEM_F32;
    if (dtype) {
        if (sieve_ds_elem_parse(dtype, &e) || (e != SIEVE_DS_ELEM_F32 && e != SIEVE_DS_ELEM_F16)) {
            fprintf(stderr, "sieve-datagen: --dtype %s: expected float32 or float16\n", dtype);
            return 2;
        }
        if (e == SIEVE_DS_ELEM_F16 && f != SIEVE_DS_FORMAT_NPY) {
            fprintf(stderr, "sieve-datagen: --dtype float16 needs an .npy output\n");
            return 2;
        }
    }
    sieve_ds_error err = {0};
    if (sieve_ds_writer_open(path, f, e, dim, 0, w, &err)) {
        fprintf(stderr, "sieve-datagen: %s\n", err.msg);
        return 1;
    }
    return 0;
}

/* Writes the vectors of s to o->out in chunks, generating the next chunk while writing. */
static int write_vectors(const options *o, const source *s) {
    sieve_ds_writer *w;
    int rc = open_writer(o->out, o->format, o->dtype, s->dim, &w);
    if (rc) return rc;
    size_t rows = CHUNK_BYTES / ((size_t)s->dim * sizeof(float));
    if (rows < (size_t)o->threads) rows = (size_t)o->threads;
    float *buf[2] = {malloc(rows * s->dim * sizeof(float)), malloc(rows * s->dim * sizeof(float))};
    job *jobs = calloc(MAX_THREADS, sizeof *jobs);
    if (!buf[0] || !buf[1] || !jobs) {
        fprintf(stderr, "sieve-datagen: out of memory\n");
        free(buf[0]);
        free(buf[1]);
        free(jobs);
        sieve_ds_writer_abort(w);
        return 1;
    }
    sieve_progress pr;
    const char *base = strrchr(o->out, '/'); /* the name alone keeps the line short */
    sieve_progress_init(&pr, stderr, base ? base + 1 : o->out, "vectors", s->count, 0,
                        o->progress);
    sieve_ds_error err = {0};
    double t0 = now_s();
    uint64_t done = 0, next = 0;
    size_t prev_n = 0;
    int cur = 0;
    rc = 0;
    while (!rc && (next < s->count || prev_n)) {
        size_t n = s->count - next < rows ? (size_t)(s->count - next) : rows;
        int k = n ? start_jobs(s, jobs, o->threads, next, n, buf[cur]) : 0;
        if (prev_n) { /* write the previous chunk while this one is generated */
            if (sieve_ds_writer_write_f32(w, buf[cur ^ 1], prev_n, &err)) rc = 1;
            done += prev_n;
            sieve_progress_update(&pr, done);
        }
        int jr = join_jobs(jobs, k);
        if (jr && !rc) {
            fprintf(stderr, "sieve-datagen: generator failed: %s\n", sieve_strerror(jr));
            rc = 1;
        }
        next += n;
        prev_n = n;
        cur ^= 1;
    }
    if (rc && err.msg[0]) fprintf(stderr, "sieve-datagen: %s\n", err.msg);
    free(buf[0]);
    free(buf[1]);
    free(jobs);
    if (rc) {
        sieve_ds_writer_abort(w);
        return rc;
    }
    if (sieve_ds_writer_close(w, &err)) {
        fprintf(stderr, "sieve-datagen: %s\n", err.msg);
        return 1;
    }
    double dt = now_s() - t0;
    sieve_progress_finish(&pr);
    char hb[32];
    human_bytes(hb, sizeof hb, (double)s->count * s->dim * (o->dtype && strstr(o->dtype, "16") ? 2 : 4));
    fprintf(stderr, "wrote %s: %llu x %u (%s) in %.1f s\n", o->out, (unsigned long long)s->count,
            s->dim, hb, dt);
    return 0;
}

static int write_small(const char *path, const char *format, const char *dtype, uint32_t dim,
                       const float *rows, size_t n) {
    sieve_ds_writer *w;
    int rc = open_writer(path, format, dtype, dim, &w);
    if (rc) return rc;
    sieve_ds_error err = {0};
    if (sieve_ds_writer_write_f32(w, rows, n, &err)) {
        sieve_ds_writer_abort(w);
        fprintf(stderr, "sieve-datagen: %s\n", err.msg);
        return 1;
    }
    if (sieve_ds_writer_close(w, &err)) {
        fprintf(stderr, "sieve-datagen: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "wrote %s: %zu x %u\n", path, n, dim);
    return 0;
}

static int write_sources(const char *path, const uint64_t *src, size_t n) {
    sieve_ds_format f = sieve_ds_format_from_path(path);
    if (f != SIEVE_DS_FORMAT_U64BIN && f != SIEVE_DS_FORMAT_NPY && f != SIEVE_DS_FORMAT_IBIN) {
        fprintf(stderr, "sieve-datagen: %s: expected a .u64bin, .npy or .ibin name\n", path);
        return 2;
    }
    sieve_ds_writer *w = NULL;
    sieve_ds_error err = {0};
    sieve_ds_elem e = f == SIEVE_DS_FORMAT_IBIN ? SIEVE_DS_ELEM_I32 : SIEVE_DS_ELEM_U64;
    if (sieve_ds_writer_open(path, f, e, 1, 0, &w, &err) ||
        sieve_ds_writer_write_u64(w, src, n, &err)) {
        if (w) sieve_ds_writer_abort(w);
        fprintf(stderr, "sieve-datagen: %s\n", err.msg);
        return 1;
    }
    if (sieve_ds_writer_close(w, &err)) {
        fprintf(stderr, "sieve-datagen: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "wrote %s: %zu source rows\n", path, n);
    return 0;
}

static int run_generate(options *o) {
    if (!o->kind) {
        fprintf(stderr, "sieve-datagen: --kind is required (see --help)\n");
        return 2;
    }
    if (!o->out) {
        fprintf(stderr, "sieve-datagen: --out FILE is required (see --help)\n");
        return 2;
    }
    source s = {0};
    sieve_ds_gen *g = NULL, *qg = NULL;
    sieve_ds_gen_params p;
    sieve_ds_error err = {0};
    float *qbuf = NULL;
    uint64_t *src = NULL;
    int rc = 0;
    if (!strncmp(o->kind, "adversarial", 11)) {
        const char *name = o->kind[11] == ':' ? o->kind + 12 : NULL;
        if (!name || sieve_ds_adv_parse(name, &s.adv)) {
            fprintf(stderr,
                    "sieve-datagen: --kind %s: expected adversarial:NAME with NAME one of "
                    "sorted-asc, sorted-desc, ties, outlier, narrow-band, duplicates, random\n",
                    o->kind);
            return 2;
        }
        if (!o->count_set) {
            fprintf(stderr, "sieve-datagen: --count N is required for adversarial sets\n");
            return 2;
        }
        if (o->queries_set && o->queries != 1) {
            fprintf(stderr, "sieve-datagen: an adversarial set is built around one query; "
                            "--queries must be 1\n");
            return 2;
        }
        /* The query: a unit Gaussian vector from the seed. */
        sieve_ds_gen_params_init(&p, SIEVE_DS_GEN_GAUSSIAN);
        p.dim = o->dim;
        p.count = 1;
        p.seed = o->seed;
        p.normalize = 1;
        if (sieve_ds_gen_create(&p, &qg, &err)) {
            fprintf(stderr, "sieve-datagen: %s\n", err.msg);
            return 2;
        }
        qbuf = malloc((size_t)o->dim * sizeof(float));
        if (!qbuf) {
            sieve_ds_gen_destroy(qg);
            fprintf(stderr, "sieve-datagen: out of memory\n");
            return 1;
        }
        sieve_ds_gen_queries(qg, 0, 1, qbuf, NULL);
        s.adversarial = 1;
        s.query = qbuf;
        s.dim = o->dim;
        s.count = o->count;
        s.seed = o->seed;
        rc = write_vectors(o, &s);
        if (!rc && o->queries_out) rc = write_small(o->queries_out, NULL, NULL, o->dim, qbuf, 1);
        sieve_ds_gen_destroy(qg);
        free(qbuf);
        return rc;
    }
    sieve_ds_gen_kind kind;
    if (!strcmp(o->kind, "gaussian")) kind = SIEVE_DS_GEN_GAUSSIAN;
    else if (!strcmp(o->kind, "clustered")) kind = SIEVE_DS_GEN_CLUSTERED;
    else if (!strcmp(o->kind, "msmarco")) kind = SIEVE_DS_GEN_MSMARCO;
    else {
        fprintf(stderr, "sieve-datagen: --kind %s: expected gaussian, clustered, msmarco or "
                        "adversarial:NAME\n",
                o->kind);
        return 2;
    }
    sieve_ds_gen_params_init(&p, kind);
    if (kind != SIEVE_DS_GEN_MSMARCO || o->dim != 768) p.dim = o->dim;
    if (o->count_set) p.count = o->count;
    else if (kind != SIEVE_DS_GEN_MSMARCO) {
        fprintf(stderr, "sieve-datagen: --count N is required for --kind %s\n", o->kind);
        return 2;
    }
    p.seed = o->seed;
    p.normalize = o->normalize;
    if (o->clusters_set) p.clusters = o->clusters;
    if (o->spread_set) p.spread = o->spread;
    if (o->aniso_set) p.anisotropy = o->anisotropy;
    if (o->noise_set) p.query_noise = o->query_noise;
    if (sieve_ds_gen_create(&p, &g, &err)) {
        fprintf(stderr, "sieve-datagen: %s\n", err.msg);
        return 2;
    }
    s.gen = g;
    s.dim = p.dim;
    s.count = p.count;
    s.seed = p.seed;
    if (o->queries && !o->queries_out) {
        fprintf(stderr, "sieve-datagen: --queries needs --queries-out FILE\n");
        sieve_ds_gen_destroy(g);
        return 2;
    }
    rc = write_vectors(o, &s);
    if (!rc && o->queries && o->queries_out) {
        qbuf = malloc((size_t)o->queries * p.dim * sizeof(float));
        src = malloc((size_t)o->queries * sizeof(uint64_t));
        if (!qbuf || !src) {
            fprintf(stderr, "sieve-datagen: out of memory for %llu queries\n",
                    (unsigned long long)o->queries);
            rc = 1;
        } else {
            sieve_ds_gen_queries(g, 0, (size_t)o->queries, qbuf, src);
            rc = write_small(o->queries_out, NULL, NULL, p.dim, qbuf, (size_t)o->queries);
            if (!rc && o->sources_out) {
                if (kind == SIEVE_DS_GEN_GAUSSIAN)
                    fprintf(stderr, "sieve-datagen: Gaussian queries have no source rows; "
                                    "--sources-out ignored\n");
                else rc = write_sources(o->sources_out, src, (size_t)o->queries);
            }
        }
    }
    free(qbuf);
    free(src);
    sieve_ds_gen_destroy(g);
    return rc;
}

int main(int argc, char **argv) {
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc;
    if (argc == 1) {
        usage(stderr);
        return 2;
    }
    if (o.ncheck) return run_check(&o);
    return run_generate(&o);
}

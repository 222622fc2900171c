/* cli_points.c: `sieve upsert`, `sieve get`, `sieve delete` and `sieve count`.
 *
 * Owns: the command lines of the point commands and reading .jsonl points from a file or a
 * pipe for upsert (small jobs; `sieve ingest` is the bulk path). Must not: talk HTTP other
 * than through libsieve-client.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"

enum {
    OPT_COLLECTION = CLI_OPT_FIRST_LOCAL,
    OPT_ID,
    OPT_VECTOR,
    OPT_PAYLOAD,
    OPT_BATCH,
    OPT_FILTER,
    OPT_WITH_VECTOR,
    OPT_NO_PAYLOAD,
    OPT_JSON,
};

/* ---------------------------------------------------------------- upsert */

static void help_upsert(FILE *f) {
    fprintf(f,
            "usage: sieve upsert --collection NAME [FILE.jsonl | -]\n"
            "       sieve upsert --collection NAME --id ID --vector V [--payload JSON]\n"
            "\n"
            "Inserts or replaces points. FILE (or stdin when FILE is '-' or absent) holds one\n"
            "point per line: {\"id\": 7 or \"UUID\", \"vector\": [0.1, ...], \"payload\": {...}}.\n"
            "Points are sent in batches; each batch is written atomically and durably.\n"
            "For large vector files (.fvecs, .fbin, .npy, ...) use 'sieve ingest'.\n"
            "\n"
            "  --collection NAME  target collection (required)\n"
            "  --id ID            one point's id (an integer or a UUID)\n"
            "  --vector V         its vector: \"0.1,0.2,...\" or \"[0.1, 0.2, ...]\"\n"
            "  --payload JSON     its payload object, e.g. '{\"title\": \"x\"}'\n"
            "  --batch N          points per request (default 256)\n"
            "\n" CLI_COMMON_HELP);
}

typedef struct upsert_buf {
    sieve_client_point *pts;
    float *vecs;
    char **payloads;
    size_t n, cap;
    uint32_t dim;
} upsert_buf;

static void ub_clear(upsert_buf *b) {
    for (size_t i = 0; i < b->n; i++) free(b->payloads[i]);
    b->n = 0;
}

static void ub_free(upsert_buf *b) {
    ub_clear(b);
    free(b->pts);
    free(b->vecs);
    free(b->payloads);
}

static int flush(sieve_client *cl, const char *coll, upsert_buf *b, uint64_t *sent) {
    if (!b->n) return 0;
    for (size_t i = 0; i < b->n; i++) {
        b->pts[i].vector = b->vecs + i * b->dim;
        b->pts[i].payload = b->payloads[i];
        b->pts[i].payload_len = 0;
    }
    int rc = sieve_client_upsert(cl, coll, b->pts, b->n, b->dim);
    if (rc) return cli_client_error(cl, rc, "upsert", "upsert");
    *sent += b->n;
    ub_clear(b);
    return 0;
}

/* Parses one .jsonl line into the buffer's next slot. */
static int parse_point(const char *line, size_t len, uint64_t lineno, const char *src,
                       upsert_buf *b) {
    json_error_t je;
    json_t *j = json_loadb(line, len, 0, &je);
    if (!j || !json_is_object(j)) {
        json_decref(j);
        return cli_error(CLI_FAIL, "upsert", "%s:%llu: not a JSON object%s%s", src,
                         (unsigned long long)lineno, j ? "" : ": ", j ? "" : je.text);
    }
    int status = CLI_FAIL;
    const char *key;
    json_t *val;
    json_object_foreach(j, key, val) {
        if (strcmp(key, "id") && strcmp(key, "vector") && strcmp(key, "payload")) {
            cli_error(CLI_FAIL, "upsert",
                      "%s:%llu: unknown key \"%s\"; expected id, vector, payload", src,
                      (unsigned long long)lineno, key);
            goto out;
        }
    }
    json_t *id = json_object_get(j, "id"), *vec = json_object_get(j, "vector");
    json_t *pl = json_object_get(j, "payload");
    sieve_client_id cid;
    if (json_is_integer(id) && json_integer_value(id) >= 0) {
        cid = sieve_client_id_num((uint64_t)json_integer_value(id));
    } else if (!json_is_string(id) || sieve_client_id_parse(json_string_value(id), &cid)) {
        cli_error(CLI_FAIL, "upsert", "%s:%llu: \"id\" must be an unsigned integer or a UUID", src,
                  (unsigned long long)lineno);
        goto out;
    }
    size_t dim = json_array_size(vec);
    if (!json_is_array(vec) || !dim || dim > SIEVE_DS_MAX_DIM) {
        cli_error(CLI_FAIL, "upsert", "%s:%llu: \"vector\" must be an array of 1..%u numbers", src,
                  (unsigned long long)lineno, SIEVE_DS_MAX_DIM);
        goto out;
    }
    if (!b->dim) b->dim = (uint32_t)dim;
    if (dim != b->dim) {
        cli_error(CLI_FAIL, "upsert", "%s:%llu: vector has %zu values; expected %u (as before)",
                  src, (unsigned long long)lineno, dim, b->dim);
        goto out;
    }
    if (pl && !json_is_null(pl) && !json_is_object(pl)) {
        cli_error(CLI_FAIL, "upsert", "%s:%llu: \"payload\" must be an object", src,
                  (unsigned long long)lineno);
        goto out;
    }
    if (b->n == b->cap) {
        cli_error(CLI_FAIL, "upsert", "internal: batch full");
        goto out;
    }
    if (!b->vecs) {
        b->vecs = malloc(b->cap * b->dim * sizeof *b->vecs);
        if (!b->vecs) {
            cli_error(CLI_FAIL, "upsert", "out of memory");
            goto out;
        }
    }
    float *v = b->vecs + b->n * b->dim;
    for (size_t i = 0; i < dim; i++) {
        json_t *x = json_array_get(vec, i);
        double d = json_number_value(x);
        if (!json_is_number(x) || !isfinite((float)d)) {
            cli_error(CLI_FAIL, "upsert", "%s:%llu: vector[%zu] must be a finite float32 number",
                      src, (unsigned long long)lineno, i);
            goto out;
        }
        v[i] = (float)d;
    }
    b->payloads[b->n] = pl && json_is_object(pl) ? json_dumps(pl, JSON_COMPACT) : NULL;
    b->pts[b->n].id = cid;
    b->n++;
    status = CLI_OK;
out:
    json_decref(j);
    return status;
}

int cli_cmd_upsert(int argc, char **argv) {
    const char *cmd = "upsert";
    static const struct option lo[] = {{"collection", required_argument, NULL, OPT_COLLECTION},
                                       {"id", required_argument, NULL, OPT_ID},
                                       {"vector", required_argument, NULL, OPT_VECTOR},
                                       {"payload", required_argument, NULL, OPT_PAYLOAD},
                                       {"batch", required_argument, NULL, OPT_BATCH},
                                       CLI_COMMON_LONGOPTS,
                                       {NULL, 0, NULL, 0}};
    cli_common cc;
    cli_common_init(&cc);
    const char *coll = NULL, *id_text = NULL, *vec_text = NULL, *payload = NULL;
    uint32_t batch = 256;
    int o;
    opterr = 0;
    optind = 1;
    while ((o = getopt_long(argc, argv, ":hc:", lo, NULL)) != -1) {
        int r = cli_common_opt(&cc, o, optarg, cmd);
        if (r < 0) return CLI_USAGE;
        if (r) continue;
        switch (o) {
        case 'h':
        case CLI_OPT_HELP: help_upsert(stdout); return CLI_OK;
        case 'c':
        case OPT_COLLECTION: coll = optarg; break;
        case OPT_ID: id_text = optarg; break;
        case OPT_VECTOR: vec_text = optarg; break;
        case OPT_PAYLOAD: payload = optarg; break;
        case OPT_BATCH:
            if (cli_parse_u32(optarg, 1, 100000, &batch))
                return cli_usage_error(cmd, "--batch wants 1..100000, got '%s'", optarg);
            break;
        default: return cli_bad_option(cmd, o, argv);
        }
    }
    if (!coll) return cli_usage_error(cmd, "--collection NAME is required");
    const char *file = optind < argc ? argv[optind++] : NULL;
    if (optind < argc) return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if ((id_text || vec_text || payload) && file)
        return cli_usage_error(cmd, "give either FILE or --id/--vector, not both");
    if ((id_text || payload) && !vec_text) return cli_usage_error(cmd, "--id needs --vector");
    if (vec_text && !id_text) return cli_usage_error(cmd, "--vector needs --id");

    upsert_buf b;
    memset(&b, 0, sizeof b);
    b.cap = batch;
    b.pts = calloc(b.cap, sizeof *b.pts);
    b.payloads = calloc(b.cap, sizeof *b.payloads);
    if (!b.pts || !b.payloads) {
        ub_free(&b);
        return cli_error(CLI_FAIL, cmd, "out of memory");
    }
    int status = CLI_OK;
    uint64_t sent = 0;
    sieve_client *cl = NULL;
    if (id_text) {
        sieve_client_id id;
        float *v = NULL;
        size_t n;
        uint32_t dim;
        char why[200];
        if (sieve_client_id_parse(id_text, &id)) {
            status =
                cli_usage_error(cmd, "--id wants an unsigned integer or a UUID, got '%s'", id_text);
        } else if (cli_parse_vectors_text(vec_text, strlen(vec_text), &v, &n, &dim, why,
                                          sizeof why) ||
                   n != 1) {
            status = cli_usage_error(cmd, "--vector: %s", n > 1 ? "one vector only" : why);
        } else if (!(cl = cli_client_open(&cc, cmd))) {
            status = CLI_FAIL;
        } else {
            sieve_client_point p = {id, v, payload, 0};
            int rc = sieve_client_upsert(cl, coll, &p, 1, dim);
            if (rc)
                status = cli_client_error(cl, rc, cmd, "upsert");
            else
                sent = 1;
        }
        free(v);
    } else {
        FILE *in = stdin;
        const char *src = "stdin";
        if (file && strcmp(file, "-")) {
            in = fopen(file, "r");
            src = file;
            if (!in) {
                ub_free(&b);
                return cli_error(CLI_FAIL, cmd, "%s: cannot open: %s", file, strerror(errno));
            }
        }
        cl = cli_client_open(&cc, cmd);
        if (!cl) status = CLI_FAIL;
        char *line = NULL;
        size_t cap = 0;
        ssize_t len;
        uint64_t lineno = 0;
        while (!status && (len = getline(&line, &cap, in)) >= 0) {
            lineno++;
            size_t k = (size_t)len;
            while (k && (line[k - 1] == '\n' || line[k - 1] == '\r' || line[k - 1] == ' ')) k--;
            if (!k) continue;
            status = parse_point(line, k, lineno, src, &b);
            if (!status && b.n == b.cap) status = flush(cl, coll, &b, &sent);
        }
        if (!status && ferror(in)) status = cli_error(CLI_FAIL, cmd, "%s: read error", src);
        if (!status) status = flush(cl, coll, &b, &sent);
        free(line);
        if (in != stdin) fclose(in);
    }
    if (!status)
        fprintf(stderr, "upserted %llu points into '%s'\n", (unsigned long long)sent, coll);
    else if (sent)
        fprintf(stderr, "sieve upsert: %llu points were written before the error\n",
                (unsigned long long)sent);
    sieve_client_close(cl);
    ub_free(&b);
    return status;
}

/* ---------------------------------------------------------------- get */

static void help_get(FILE *f) {
    fprintf(f, "usage: sieve get --collection NAME ID... [--with-vector] [--no-payload] [--json]\n"
               "\n"
               "Fetches points by id and prints them (id, payload, and the vector's first values\n"
               "with --with-vector; the whole point as JSON with --json). Exit status 1 when an\n"
               "id is not found.\n"
               "\n"
               "  --collection NAME  collection (required)\n"
               "  --with-vector      include vectors\n"
               "  --no-payload       leave payloads out\n"
               "  --json             print a JSON array of points\n"
               "\n" CLI_COMMON_HELP);
}

/* Parses argv[optind..] as ids into a malloc'd array. */
static int parse_ids(const char *cmd, int argc, char **argv, sieve_client_id **ids, size_t *n) {
    *n = (size_t)(argc - optind);
    *ids = calloc(*n ? *n : 1, sizeof **ids);
    if (!*ids) return cli_error(CLI_FAIL, cmd, "out of memory");
    for (size_t i = 0; i < *n; i++)
        if (sieve_client_id_parse(argv[optind + (int)i], &(*ids)[i])) {
            free(*ids);
            *ids = NULL;
            return cli_usage_error(cmd, "'%s' is not an id (an unsigned integer or a UUID)",
                                   argv[optind + (int)i]);
        }
    return CLI_OK;
}

int cli_cmd_get(int argc, char **argv) {
    const char *cmd = "get";
    static const struct option lo[] = {{"collection", required_argument, NULL, OPT_COLLECTION},
                                       {"with-vector", no_argument, NULL, OPT_WITH_VECTOR},
                                       {"no-payload", no_argument, NULL, OPT_NO_PAYLOAD},
                                       {"json", no_argument, NULL, OPT_JSON},
                                       CLI_COMMON_LONGOPTS,
                                       {NULL, 0, NULL, 0}};
    cli_common cc;
    cli_common_init(&cc);
    const char *coll = NULL;
    int with_vector = 0, with_payload = 1, o;
    opterr = 0;
    optind = 1;
    while ((o = getopt_long(argc, argv, ":hc:", lo, NULL)) != -1) {
        int r = cli_common_opt(&cc, o, optarg, cmd);
        if (r < 0) return CLI_USAGE;
        if (r) continue;
        switch (o) {
        case 'h':
        case CLI_OPT_HELP: help_get(stdout); return CLI_OK;
        case 'c':
        case OPT_COLLECTION: coll = optarg; break;
        case OPT_WITH_VECTOR: with_vector = 1; break;
        case OPT_NO_PAYLOAD: with_payload = 0; break;
        case OPT_JSON: cc.json = 1; break;
        default: return cli_bad_option(cmd, o, argv);
        }
    }
    if (!coll) return cli_usage_error(cmd, "--collection NAME is required");
    if (optind >= argc) return cli_usage_error(cmd, "which ids? give one or more");
    sieve_client_id *ids;
    size_t n;
    int status = parse_ids(cmd, argc, argv, &ids, &n);
    if (status) return status;
    sieve_client *cl = cli_client_open(&cc, cmd);
    if (!cl) {
        free(ids);
        return CLI_FAIL;
    }
    sieve_client_records r;
    int rc = sieve_client_retrieve(cl, coll, ids, n, with_payload, with_vector, &r);
    if (rc) {
        status = cli_client_error(cl, rc, cmd, "retrieve");
    } else {
        cli_print_records(stdout, &r, 0, cc.json);
        if (r.n < n) {
            /* name the first missing id */
            for (size_t i = 0; i < n; i++) {
                int found = 0;
                for (size_t k = 0; k < r.n && !found; k++)
                    found = r.items[k].id.is_uuid == ids[i].is_uuid &&
                            (ids[i].is_uuid ? !memcmp(r.items[k].id.uuid, ids[i].uuid, 16)
                                            : r.items[k].id.num == ids[i].num);
                if (!found) {
                    char t[40];
                    sieve_client_id_format(&ids[i], t);
                    status =
                        cli_error(CLI_FAIL, cmd, "%zu of %zu ids not found in '%s' (first: %s)",
                                  n - r.n, n, coll, t);
                    break;
                }
            }
        }
        sieve_client_records_clear(&r);
    }
    sieve_client_close(cl);
    free(ids);
    return status;
}

/* ---------------------------------------------------------------- delete, count */

/* The options of the commands that take --collection (required) and --filter beside the
 * common ones. Returns CLI_OK with *coll (and *filter, or NULL) set, CLI_USAGE after a
 * usage error, or CLI_OK with *helped = 1 once help went to stdout. */
static int parse_coll_filter(const char *cmd, int argc, char **argv, void (*help)(FILE *),
                             cli_common *cc, const char **coll, const char **filter,
                             int *helped) {
    static const struct option lo[] = {{"collection", required_argument, NULL, OPT_COLLECTION},
                                       {"filter", required_argument, NULL, OPT_FILTER},
                                       CLI_COMMON_LONGOPTS,
                                       {NULL, 0, NULL, 0}};
    cli_common_init(cc);
    *coll = *filter = NULL;
    *helped = 0;
    int o;
    opterr = 0;
    optind = 1;
    while ((o = getopt_long(argc, argv, ":hc:", lo, NULL)) != -1) {
        int r = cli_common_opt(cc, o, optarg, cmd);
        if (r < 0) return CLI_USAGE;
        if (r) continue;
        switch (o) {
        case 'h':
        case CLI_OPT_HELP:
            help(stdout);
            *helped = 1;
            return CLI_OK;
        case 'c':
        case OPT_COLLECTION: *coll = optarg; break;
        case OPT_FILTER: *filter = optarg; break;
        default: return cli_bad_option(cmd, o, argv);
        }
    }
    if (!*coll) return cli_usage_error(cmd, "--collection NAME is required");
    return CLI_OK;
}

static void help_delete(FILE *f) {
    fprintf(f, "usage: sieve delete --collection NAME ID...\n"
               "       sieve delete --collection NAME --filter JSON\n"
               "\n"
               "Deletes points by id (absent ids are ignored) or every point a Qdrant filter\n"
               "matches, e.g. --filter '{\"must\": [{\"key\": \"lang\", \"match\": {\"value\": "
               "\"de\"}}]}'.\n"
               "The delete is durable when the command returns.\n"
               "\n"
               "  --collection NAME  collection (required)\n"
               "  --filter JSON      delete what the filter matches instead of ids\n"
               "\n" CLI_COMMON_HELP);
}

int cli_cmd_delete(int argc, char **argv) {
    const char *cmd = "delete";
    cli_common cc;
    const char *coll, *filter;
    int helped, st = parse_coll_filter(cmd, argc, argv, help_delete, &cc, &coll, &filter, &helped);
    if (st || helped) return st;
    if (filter && optind < argc) return cli_usage_error(cmd, "give ids or --filter, not both");
    if (!filter && optind >= argc) return cli_usage_error(cmd, "which ids? give ids or --filter");
    sieve_client_id *ids = NULL;
    size_t n = 0;
    int status = filter ? CLI_OK : parse_ids(cmd, argc, argv, &ids, &n);
    if (status) return status;
    sieve_client *cl = cli_client_open(&cc, cmd);
    if (!cl) {
        free(ids);
        return CLI_FAIL;
    }
    int rc = filter ? sieve_client_delete_filter(cl, coll, filter)
                    : sieve_client_delete_points(cl, coll, ids, n);
    if (rc)
        status = cli_client_error(cl, rc, cmd, "delete");
    else if (filter)
        fprintf(stderr, "deleted the points matching the filter from '%s'\n", coll);
    else
        fprintf(stderr, "deleted %zu id%s from '%s' (absent ids are ignored)\n", n,
                n == 1 ? "" : "s", coll);
    sieve_client_close(cl);
    free(ids);
    return status;
}

static void help_count(FILE *f) {
    fprintf(f, "usage: sieve count --collection NAME [--filter JSON]\n"
               "\n"
               "Prints the exact number of points (matching the Qdrant filter, if given).\n"
               "\n" CLI_COMMON_HELP);
}

int cli_cmd_count(int argc, char **argv) {
    const char *cmd = "count";
    cli_common cc;
    const char *coll, *filter;
    int helped, st = parse_coll_filter(cmd, argc, argv, help_count, &cc, &coll, &filter, &helped);
    if (st || helped) return st;
    if (optind < argc) return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    sieve_client *cl = cli_client_open(&cc, cmd);
    if (!cl) return CLI_FAIL;
    uint64_t count;
    int status = CLI_OK;
    int rc = sieve_client_count(cl, coll, filter, &count);
    if (rc)
        status = cli_client_error(cl, rc, cmd, "count");
    else
        printf("%llu\n", (unsigned long long)count);
    sieve_client_close(cl);
    return status;
}

/* cli_search.c: `sieve search`.
 *
 * Owns: getting query vectors (inline, a vector file of any format the datasets module
 * reads, a text file, stdin, or an existing point's vector) and printing the results as a
 * table or JSON. Must not: talk HTTP other than through libsieve-client.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"

enum {
    OPT_COLLECTION = CLI_OPT_FIRST_LOCAL,
    OPT_VECTOR,
    OPT_VECTOR_FILE,
    OPT_ROW,
    OPT_ID,
    OPT_LIMIT,
    OPT_OFFSET,
    OPT_FILTER,
    OPT_NO_PAYLOAD,
    OPT_WITH_VECTOR,
    OPT_THRESHOLD,
    OPT_JSON,
    OPT_QUERY_API,
};

#define SEARCH_CHUNK 256 /* searches per batch request */

static void help_search(FILE *f) {
    fprintf(
        f,
        "usage: sieve search --collection NAME [QUERY] [options]\n"
        "\n"
        "Finds the exact nearest neighbours of one or more query vectors. QUERY is one of:\n"
        "  --vector V          inline: \"0.1,0.2,...\" or \"[0.1, 0.2, ...]\"\n"
        "  --vector-file FILE  a vector file (.fvecs .bvecs .fbin .npy .jsonl ...; every row is\n"
        "                      a query unless --row picks one) or a text file with one vector\n"
        "                      per line (numbers separated by commas/spaces, or a JSON array)\n"
        "  --id ID             the vector of an existing point of the collection (the point\n"
        "                      itself is among the results)\n"
        "  -                   text vectors from stdin (also when no QUERY is given)\n"
        "\n"
        "Options:\n"
        "  --collection NAME   collection (required)\n"
        "  --row N             use only row N of --vector-file (0-based)\n"
        "  --limit K           results per query (default 10)\n"
        "  --offset N          skip the first N results\n"
        "  --filter JSON       a Qdrant filter, e.g. '{\"must\": [{\"key\": \"lang\", \"match\":\n"
        "                      {\"value\": \"en\"}}]}'\n"
        "  --threshold X       keep scores >= X (distances <= X for Euclid)\n"
        "  --no-payload        leave payloads out\n"
        "  --with-vector       include the result vectors\n"
        "  --query-api         send through /points/query instead of /points/search\n"
        "  --json              print JSON: the result list, or one list per query\n"
        "\n"
        "Scores: the dot product for Dot and Cosine (higher is better), the Euclidean\n"
        "distance for Euclid (lower is better).\n"
        "\n" CLI_COMMON_HELP);
}

/* Loads queries from a file: dense formats through the datasets readers, anything else as
 * text. row: UINT64_MAX for all. */
static int load_file(const char *cmd, const char *path, uint64_t row, float **out, size_t *n,
                     uint32_t *dim) {
    sieve_ds_format f = sieve_ds_format_from_path(path);
    sieve_ds_error err;
    if (sieve_ds_format_is_dense(f) || f == SIEVE_DS_FORMAT_JSONL) {
        sieve_ds_source_options so;
        memset(&so, 0, sizeof so);
        so.vectors = path;
        sieve_ds_source *src;
        if (sieve_ds_source_open(&so, &src, &err)) return cli_error(CLI_FAIL, cmd, "%s", err.msg);
        sieve_ds_source_info in;
        sieve_ds_source_info_get(src, &in);
        int status = CLI_OK;
        if (in.dim == 0) {
            status = cli_error(CLI_FAIL, cmd, "%s: no vectors in the file", path);
        } else if (row != UINT64_MAX && sieve_ds_source_seek(src, row, &err)) {
            status = cli_error(CLI_FAIL, cmd, "--row %llu: %s", (unsigned long long)row, err.msg);
        }
        float *all = NULL;
        size_t cnt = 0, cap = 0;
        while (!status) {
            sieve_ds_batch b;
            size_t want = row != UINT64_MAX ? 1 - cnt : 4096;
            if (!want) break;
            if (sieve_ds_source_read(src, want, &b, &err)) {
                status = cli_error(CLI_FAIL, cmd, "%s", err.msg);
                break;
            }
            if (!b.n) break;
            if (cnt + b.n > cap) {
                size_t nc = cap ? cap : 64;
                while (nc < cnt + b.n) nc *= 2;
                float *na = realloc(all, nc * (size_t)b.dim * sizeof *na);
                if (!na) {
                    status = cli_error(CLI_FAIL, cmd, "out of memory");
                    break;
                }
                all = na;
                cap = nc;
            }
            memcpy(all + cnt * b.dim, b.vectors, b.n * (size_t)b.dim * sizeof *all);
            cnt += b.n;
        }
        sieve_ds_source_close(src);
        if (!status && !cnt) status = cli_error(CLI_FAIL, cmd, "%s: no vectors read", path);
        if (status) {
            free(all);
            return status;
        }
        *out = all;
        *n = cnt;
        *dim = in.dim;
        return CLI_OK;
    }
    FILE *fp = fopen(path, "r");
    if (!fp) return cli_error(CLI_FAIL, cmd, "%s: cannot open: %s", path, strerror(errno));
    char *text;
    size_t len;
    int rc = cli_read_stream(fp, &text, &len);
    fclose(fp);
    if (rc) return cli_error(CLI_FAIL, cmd, "%s: read error: %s", path, strerror(errno));
    char why[200];
    rc = cli_parse_vectors_text(text, len, out, n, dim, why, sizeof why);
    free(text);
    if (rc) return cli_error(CLI_FAIL, cmd, "%s: %s", path, why);
    if (row != UINT64_MAX) {
        if (row >= *n) {
            free(*out);
            return cli_error(CLI_FAIL, cmd, "%s: --row %llu but the file has %zu vectors", path,
                             (unsigned long long)row, *n);
        }
        memmove(*out, *out + row * *dim, *dim * sizeof **out);
        *n = 1;
    }
    return CLI_OK;
}

int cli_cmd_search(int argc, char **argv) {
    const char *cmd = "search";
    static const struct option lo[] = {{"collection", required_argument, NULL, OPT_COLLECTION},
                                       {"vector", required_argument, NULL, OPT_VECTOR},
                                       {"vector-file", required_argument, NULL, OPT_VECTOR_FILE},
                                       {"row", required_argument, NULL, OPT_ROW},
                                       {"id", required_argument, NULL, OPT_ID},
                                       {"limit", required_argument, NULL, OPT_LIMIT},
                                       {"offset", required_argument, NULL, OPT_OFFSET},
                                       {"filter", required_argument, NULL, OPT_FILTER},
                                       {"threshold", required_argument, NULL, OPT_THRESHOLD},
                                       {"no-payload", no_argument, NULL, OPT_NO_PAYLOAD},
                                       {"with-vector", no_argument, NULL, OPT_WITH_VECTOR},
                                       {"query-api", no_argument, NULL, OPT_QUERY_API},
                                       {"json", no_argument, NULL, OPT_JSON},
                                       CLI_COMMON_LONGOPTS,
                                       {NULL, 0, NULL, 0}};
    cli_common cc;
    cli_common_init(&cc);
    const char *coll = NULL, *vec_text = NULL, *vec_file = NULL, *id_text = NULL;
    uint64_t row = UINT64_MAX;
    sieve_client_search_params q;
    memset(&q, 0, sizeof q);
    q.limit = 10;
    q.with_payload = 1;
    int use_query = 0, o;
    opterr = 0;
    optind = 1;
    while ((o = getopt_long(argc, argv, ":hc:k:", lo, NULL)) != -1) {
        int r = cli_common_opt(&cc, o, optarg, cmd);
        if (r < 0) return CLI_USAGE;
        if (r) continue;
        switch (o) {
        case 'h':
        case CLI_OPT_HELP: help_search(stdout); return CLI_OK;
        case 'c':
        case OPT_COLLECTION: coll = optarg; break;
        case OPT_VECTOR: vec_text = optarg; break;
        case OPT_VECTOR_FILE: vec_file = optarg; break;
        case OPT_ID: id_text = optarg; break;
        case OPT_ROW:
            if (cli_parse_u64(optarg, &row) || row == UINT64_MAX)
                return cli_usage_error(cmd, "--row wants a row number, got '%s'", optarg);
            break;
        case 'k':
        case OPT_LIMIT:
            if (cli_parse_u32(optarg, 1, 1000000, &q.limit))
                return cli_usage_error(cmd, "--limit wants a number >= 1, got '%s'", optarg);
            break;
        case OPT_OFFSET:
            if (cli_parse_u32(optarg, 0, 1000000, &q.offset))
                return cli_usage_error(cmd, "--offset wants a number >= 0, got '%s'", optarg);
            break;
        case OPT_FILTER: q.filter = optarg; break;
        case OPT_THRESHOLD: {
            double t;
            if (cli_parse_double(optarg, &t))
                return cli_usage_error(cmd, "--threshold wants a number, got '%s'", optarg);
            q.use_score_threshold = 1;
            q.score_threshold = (float)t;
            break;
        }
        case OPT_NO_PAYLOAD: q.with_payload = 0; break;
        case OPT_WITH_VECTOR: q.with_vector = 1; break;
        case OPT_QUERY_API: use_query = 1; break;
        case OPT_JSON: cc.json = 1; break;
        default: return cli_bad_option(cmd, o, argv);
        }
    }
    if (!coll) return cli_usage_error(cmd, "--collection NAME is required");
    int use_stdin = 0;
    if (optind < argc) {
        if (strcmp(argv[optind], "-") || optind + 1 < argc)
            return cli_usage_error(cmd,
                                   "unexpected argument '%s' (a vector file goes with "
                                   "--vector-file)",
                                   argv[optind]);
        use_stdin = 1;
    }
    int sources = !!vec_text + !!vec_file + !!id_text + use_stdin;
    if (sources > 1)
        return cli_usage_error(cmd, "give one query: --vector, --vector-file, --id or '-'");
    if (!sources) use_stdin = 1;
    if (row != UINT64_MAX && !vec_file)
        return cli_usage_error(cmd, "--row goes with --vector-file");

    float *vecs = NULL;
    size_t n = 0;
    uint32_t dim = 0;
    char why[200];
    int status = CLI_OK;
    sieve_client *cl = cli_client_open(&cc, cmd);
    if (!cl) return CLI_FAIL;
    if (vec_text) {
        if (cli_parse_vectors_text(vec_text, strlen(vec_text), &vecs, &n, &dim, why, sizeof why))
            status = cli_usage_error(cmd, "--vector: %s", why);
    } else if (vec_file) {
        status = load_file(cmd, vec_file, row, &vecs, &n, &dim);
    } else if (id_text) {
        sieve_client_id id;
        sieve_client_record rec;
        if (sieve_client_id_parse(id_text, &id)) {
            status =
                cli_usage_error(cmd, "--id wants an unsigned integer or a UUID, got '%s'", id_text);
        } else {
            int rc = sieve_client_get_point(cl, coll, &id, &rec);
            if (rc) {
                status = cli_client_error(cl, rc, cmd, "--id");
            } else if (!rec.vector) {
                status = cli_error(CLI_FAIL, cmd, "point %s came back without its vector", id_text);
            } else {
                vecs = rec.vector;
                rec.vector = NULL;
                dim = rec.dim;
                n = 1;
            }
            sieve_client_record_clear(&rec);
        }
    } else if (use_stdin) {
        char *text;
        size_t len;
        if (cli_read_stream(stdin, &text, &len)) {
            status = cli_error(CLI_FAIL, cmd, "reading stdin: %s", strerror(errno));
        } else {
            if (cli_parse_vectors_text(text, len, &vecs, &n, &dim, why, sizeof why))
                status = cli_error(CLI_FAIL, cmd,
                                   "stdin: %s (expected numbers, e.g. "
                                   "\"[0.1, 0.2]\" or \"0.1 0.2\")",
                                   why);
            free(text);
        }
    }

    json_t *all = NULL;
    if (!status && cc.json && n > 1) all = json_array();
    for (size_t base = 0; !status && base < n; base += SEARCH_CHUNK) {
        size_t cnt = n - base < SEARCH_CHUNK ? n - base : SEARCH_CHUNK;
        sieve_client_search_params *qs = calloc(cnt, sizeof *qs);
        sieve_client_records *res = calloc(cnt, sizeof *res);
        if (!qs || !res) {
            free(qs);
            free(res);
            status = cli_error(CLI_FAIL, cmd, "out of memory");
            break;
        }
        for (size_t i = 0; i < cnt; i++) {
            qs[i] = q;
            qs[i].vector = vecs + (base + i) * dim;
            qs[i].dim = dim;
        }
        int rc;
        if (n == 1)
            rc = use_query ? sieve_client_query(cl, coll, qs, res)
                           : sieve_client_search(cl, coll, qs, res);
        else
            rc = use_query ? sieve_client_query_batch(cl, coll, qs, cnt, res)
                           : sieve_client_search_batch(cl, coll, qs, cnt, res);
        if (rc) {
            status = cli_client_error(cl, rc, cmd, "search");
        } else {
            for (size_t i = 0; i < cnt; i++) {
                if (all) {
                    /* collect the per-query JSON lists into one array */
                    char *s = NULL;
                    size_t sl = 0;
                    FILE *mf = open_memstream(&s, &sl);
                    if (mf) {
                        cli_print_records(mf, &res[i], 1, 1);
                        fclose(mf);
                        json_t *one = json_loads(s, 0, NULL);
                        json_array_append_new(all, one ? one : json_array());
                    }
                    free(s);
                } else {
                    if (n > 1) printf("%squery %zu\n", base + i ? "\n" : "", base + i);
                    cli_print_records(stdout, &res[i], 1, cc.json);
                }
                sieve_client_records_clear(&res[i]);
            }
        }
        free(qs);
        free(res);
    }
    if (all) {
        if (!status) {
            char *s = json_dumps(all, JSON_COMPACT | JSON_REAL_PRECISION(9));
            printf("%s\n", s ? s : "[]");
            free(s);
        }
        json_decref(all);
    }
    free(vecs);
    sieve_client_close(cl);
    return status;
}

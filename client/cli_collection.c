/* cli_collection.c: `sieve collection create|list|info|delete` and `sieve health`.
 *
 * Owns: the command lines and output of the collection commands. Must not: talk HTTP other
 * than through libsieve-client.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"

static void help_collection(FILE *f) {
    fprintf(f, "usage: sieve collection create NAME --dim D [--distance Dot|Cosine|Euclid]\n"
               "                                 [--dtype float32|float16|bfloat16]\n"
               "       sieve collection list [--json]\n"
               "       sieve collection info NAME [--json]\n"
               "       sieve collection delete NAME\n"
               "\n"
               "Creates, lists, describes and deletes collections on sieve-server.\n"
               "  --dim D            vector dimension, 1..65536 (create)\n"
               "  --distance D       Dot (default), Cosine (vectors normalised on upsert) or\n"
               "                     Euclid (create)\n"
               "  --dtype T          storage type: float32 (default), float16, bfloat16 (create)\n"
               "  --json             machine-readable output (list, info)\n"
               "\n" CLI_COMMON_HELP);
}

enum { OPT_DIM = CLI_OPT_FIRST_LOCAL, OPT_DISTANCE, OPT_DTYPE, OPT_JSON };

int cli_cmd_collection(int argc, char **argv) {
    const char *cmd = "collection";
    static const struct option lo[] = {{"dim", required_argument, NULL, OPT_DIM},
                                       {"distance", required_argument, NULL, OPT_DISTANCE},
                                       {"dtype", required_argument, NULL, OPT_DTYPE},
                                       {"json", no_argument, NULL, OPT_JSON},
                                       CLI_COMMON_LONGOPTS,
                                       {NULL, 0, NULL, 0}};
    cli_common cc;
    cli_common_init(&cc);
    sieve_client_collection_config cfg = {0, SIEVE_CLIENT_DOT, SIEVE_CLIENT_FLOAT32};
    int have_dim = 0, o;
    opterr = 0;
    optind = 1;
    while ((o = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
        int r = cli_common_opt(&cc, o, optarg, cmd);
        if (r < 0) return CLI_USAGE;
        if (r) continue;
        switch (o) {
        case 'h':
        case CLI_OPT_HELP: help_collection(stdout); return CLI_OK;
        case OPT_DIM:
            if (cli_parse_u32(optarg, 1, 65536, &cfg.dim))
                return cli_usage_error(cmd, "--dim wants 1..65536, got '%s'", optarg);
            have_dim = 1;
            break;
        case OPT_DISTANCE:
            if (sieve_client_distance_parse(optarg, &cfg.distance))
                return cli_usage_error(cmd, "--distance wants Dot, Cosine or Euclid, got '%s'",
                                       optarg);
            break;
        case OPT_DTYPE:
            if (sieve_client_dtype_parse(optarg, &cfg.dtype))
                return cli_usage_error(cmd, "--dtype wants float32, float16 or bfloat16, got '%s'",
                                       optarg);
            break;
        case OPT_JSON: cc.json = 1; break;
        default: return cli_bad_option(cmd, o, argv);
        }
    }
    if (optind >= argc) return cli_usage_error(cmd, "which action? create, list, info or delete");
    const char *action = argv[optind++];
    const char *name = optind < argc ? argv[optind++] : NULL;
    if (optind < argc) return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    int is_list = !strcmp(action, "list") || !strcmp(action, "ls");
    if (!is_list && strcmp(action, "create") && strcmp(action, "info") && strcmp(action, "delete"))
        return cli_usage_error(cmd, "unknown action '%s' (create, list, info, delete)", action);
    if (is_list && name) return cli_usage_error(cmd, "list takes no name");
    if (!is_list && !name) return cli_usage_error(cmd, "%s needs a collection NAME", action);
    if (!strcmp(action, "create") && !have_dim)
        return cli_usage_error(cmd, "create needs --dim D (the vector dimension)");

    sieve_client *cl = cli_client_open(&cc, cmd);
    if (!cl) return CLI_FAIL;
    int status = CLI_OK, rc;
    if (is_list) {
        char **names;
        size_t n;
        rc = sieve_client_list_collections(cl, &names, &n);
        if (rc) {
            status = cli_client_error(cl, rc, cmd, "list");
        } else {
            if (cc.json) {
                json_t *a = json_array();
                for (size_t i = 0; i < n; i++) json_array_append_new(a, json_string(names[i]));
                char *s = json_dumps(a, JSON_COMPACT);
                printf("%s\n", s ? s : "[]");
                free(s);
                json_decref(a);
            } else {
                for (size_t i = 0; i < n; i++) printf("%s\n", names[i]);
            }
            sieve_client_free_names(names, n);
        }
    } else if (!strcmp(action, "create")) {
        rc = sieve_client_create_collection(cl, name, &cfg);
        if (rc == SIEVE_EEXIST)
            status = cli_error(CLI_FAIL, cmd,
                               "collection '%s' already exists (delete it first, or "
                               "use another name)",
                               name);
        else if (rc)
            status = cli_client_error(cl, rc, cmd, "create");
        else
            printf("created collection '%s' (%u dimensions, %s, %s)\n", name, cfg.dim,
                   sieve_client_distance_name(cfg.distance), sieve_client_dtype_name(cfg.dtype));
    } else if (!strcmp(action, "info")) {
        sieve_client_collection_info info;
        rc = sieve_client_get_collection(cl, name, &info);
        if (rc) {
            status = cli_client_error(cl, rc, cmd, "info");
        } else if (cc.json) {
            json_t *j = json_pack(
                "{s:s,s:s,s:I,s:i,s:s,s:s,s:I,s:I,s:i,s:I}", "name", name, "status", info.status,
                "points", (json_int_t)info.points, "dim", (int)info.config.dim, "distance",
                sieve_client_distance_name(info.config.distance), "dtype",
                sieve_client_dtype_name(info.config.dtype), "rows", (json_int_t)info.rows, "pages",
                (json_int_t)info.pages, "rows_per_page", (int)info.rows_per_page, "generation",
                (json_int_t)info.generation);
            char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
            printf("%s\n", s ? s : "{}");
            free(s);
            json_decref(j);
        } else {
            printf("name         %s\n"
                   "status       %s\n"
                   "points       %llu\n"
                   "dimension    %u\n"
                   "distance     %s\n"
                   "datatype     %s\n"
                   "rows         %llu\n"
                   "pages        %llu (%u rows each)\n"
                   "generation   %llu\n",
                   name, info.status, (unsigned long long)info.points, info.config.dim,
                   sieve_client_distance_name(info.config.distance),
                   sieve_client_dtype_name(info.config.dtype), (unsigned long long)info.rows,
                   (unsigned long long)info.pages, info.rows_per_page,
                   (unsigned long long)info.generation);
        }
    } else {
        int existed = 0;
        rc = sieve_client_delete_collection(cl, name, &existed);
        if (rc)
            status = cli_client_error(cl, rc, cmd, "delete");
        else if (existed)
            printf("deleted collection '%s'\n", name);
        else
            fprintf(stderr, "sieve collection: collection '%s' did not exist\n", name);
    }
    sieve_client_close(cl);
    return status;
}

static void help_health(FILE *f) {
    fprintf(f, "usage: sieve health [options]\n"
               "Asks the server who it is (GET /) and whether it is healthy (GET /healthz).\n"
               "Exit status 0 when it is.\n"
               "\n" CLI_COMMON_HELP);
}

int cli_cmd_health(int argc, char **argv) {
    const char *cmd = "health";
    static const struct option lo[] = {CLI_COMMON_LONGOPTS, {NULL, 0, NULL, 0}};
    cli_common cc;
    cli_common_init(&cc);
    int o;
    opterr = 0;
    optind = 1;
    while ((o = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
        int r = cli_common_opt(&cc, o, optarg, cmd);
        if (r < 0) return CLI_USAGE;
        if (r) continue;
        if (o == 'h' || o == CLI_OPT_HELP) {
            help_health(stdout);
            return CLI_OK;
        }
        return cli_bad_option(cmd, o, argv);
    }
    if (optind < argc) return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    sieve_client *cl = cli_client_open(&cc, cmd);
    if (!cl) return CLI_FAIL;
    sieve_client_server_info info;
    int status = CLI_OK;
    int rc = sieve_client_server_info_get(cl, &info);
    if (!rc) rc = sieve_client_healthz(cl);
    if (rc)
        status = cli_client_error(cl, rc, cmd, cc.url);
    else
        printf("%s %s at %s: healthy\n", info.title, info.version, cc.url);
    sieve_client_close(cl);
    return status;
}

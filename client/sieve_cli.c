/* sieve_cli.c: entry point of the `sieve` command-line tool.
 *
 * Owns: the top-level help, the version, and dispatching to the subcommands (each in its own
 * cli_*.c file). Must not: implement a subcommand here.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: sieve COMMAND [options]\n"
            "Command-line client of sieve-server (exact vector search, Qdrant-compatible API).\n"
            "\n"
            "Commands:\n"
            "  collection create NAME --dim D   create a collection\n"
            "  collection list                  list collections\n"
            "  collection info NAME             points, dimension, distance, datatype\n"
            "  collection delete NAME           delete a collection and its points\n"
            "  upsert --collection NAME [FILE]  insert or replace points from .jsonl (or stdin)\n"
            "  get --collection NAME ID...      fetch points by id\n"
            "  delete --collection NAME ID...   delete points by id (or --filter)\n"
            "  count --collection NAME          count points (optionally --filter)\n"
            "  search --collection NAME ...     nearest neighbours of a vector, a file or a point\n"
            "  ingest FILE --collection NAME    bulk load a vector file through the server or\n"
            "                                   straight into a data directory (--data-dir)\n"
            "  health                           is the server up? (title, version)\n"
            "  version                          print the tool's version\n"
            "\n"
            "Every command takes --url (or $SIEVE_URL, default %s),\n"
            "--api-key (or $SIEVE_API_KEY) and --help.\n"
            "\n"
            "Examples:\n"
            "  sieve collection create docs --dim 768 --distance Cosine --dtype float16\n"
            "  sieve ingest passages.fbin --ids ids.u64bin --payloads collection.tsv --collection "
            "docs\n"
            "  sieve search --collection docs --vector-file queries.fbin --row 3 --limit 10\n"
            "  echo '[0.1, 0.2, ...]' | sieve search --collection docs --json\n",
            SIEVE_CLIENT_DEFAULT_URL);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return CLI_OK;
    }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("sieve %s (libsieve-client %s)\n", SIEVE_CLIENT_VERSION, SIEVE_CLIENT_VERSION);
        return CLI_OK;
    }
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {
        {"collection", cli_cmd_collection}, {"collections", cli_cmd_collection},
        {"upsert", cli_cmd_upsert},         {"get", cli_cmd_get},
        {"delete", cli_cmd_delete},         {"count", cli_cmd_count},
        {"search", cli_cmd_search},         {"ingest", cli_cmd_ingest},
        {"health", cli_cmd_health},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(cmd, cmds[i].name)) return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "sieve: unknown command '%s'\nTry 'sieve --help'.\n", cmd);
    return CLI_USAGE;
}

/* cli.h: declarations shared by the files of the `sieve` command-line tool.
 *
 * Owns: the options every subcommand takes (--url, --api-key, --timeout, --retries and their
 * environment variables), the subcommand entry points, and small helpers (messages, number
 * parsing, opening a client, reading query vectors). Must not: be used outside client/.
 */
#ifndef SIEVE_CLI_H
#define SIEVE_CLI_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sieve_client.h"
#include "sieve_datasets.h"

/* Exit statuses. */
#define CLI_OK 0
#define CLI_FAIL 1  /* the operation failed (message on stderr) */
#define CLI_USAGE 2 /* bad command line */
#define CLI_INTERRUPTED 130

/* Options shared by every subcommand. */
typedef struct cli_common {
    const char *url;     /* --url, else $SIEVE_URL, else the default */
    const char *api_key; /* --api-key, else $SIEVE_API_KEY */
    double timeout_s;    /* --timeout: total per request (0: library default) */
    int retries;         /* --retries (-1: library default) */
    int json;            /* --json where a command supports it */
} cli_common;

/* getopt_long codes of the shared options, and the table entries to append. */
enum {
    CLI_OPT_URL = 1000,
    CLI_OPT_API_KEY,
    CLI_OPT_TIMEOUT,
    CLI_OPT_RETRIES,
    CLI_OPT_HELP,
    CLI_OPT_FIRST_LOCAL, /* subcommands number their own options from here */
};
#define CLI_COMMON_LONGOPTS                                                                        \
    {"url", required_argument, NULL, CLI_OPT_URL},                                                 \
        {"api-key", required_argument, NULL, CLI_OPT_API_KEY},                                     \
        {"timeout", required_argument, NULL, CLI_OPT_TIMEOUT},                                     \
        {"retries", required_argument, NULL, CLI_OPT_RETRIES}, {                                   \
        "help", no_argument, NULL, CLI_OPT_HELP                                                    \
    }
#define CLI_COMMON_HELP                                                                            \
    "Connection options (every command):\n"                                                        \
    "  --url URL          server address (default $SIEVE_URL, else " SIEVE_CLIENT_DEFAULT_URL      \
    ")\n"                                                                                          \
    "  --api-key KEY      api key (default $SIEVE_API_KEY)\n"                                      \
    "  --timeout SECONDS  limit per request (default 300)\n"                                       \
    "  --retries N        retries on 429/503 and connection errors (default 5)\n"                  \
    "  -h, --help         this text\n"

/* Initialises c from the environment. */
void cli_common_init(cli_common *c);
/* Handles a shared option: 1 if opt was one (stored in c), 0 if not, -1 on a bad value
 * (message printed). */
int cli_common_opt(cli_common *c, int opt, const char *arg, const char *cmd);

/* Opens a client for c; prints the error and returns NULL on failure. */
sieve_client *cli_client_open(const cli_common *c, const char *cmd);
/* Prints "sieve CMD: WHAT: MESSAGE" for a failed client call and returns CLI_FAIL. */
int cli_client_error(sieve_client *cl, int rc, const char *cmd, const char *what);

/* Messages to stderr prefixed with "sieve CMD: ". Return the given status. */
int cli_error(int status, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void cli_warn(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "sieve CMD: MSG\nTry 'sieve CMD --help'." and returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* For getopt_long's ':' (missing value) and '?' (unknown option) results, with the
 * optstring starting with ':' and opterr = 0: prints which option and returns CLI_USAGE. */
int cli_bad_option(const char *cmd, int opt, char **argv);

/* Strict number parsing (whole string, range checked). 0 or -1. */
int cli_parse_u64(const char *s, uint64_t *out);
int cli_parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out);
int cli_parse_double(const char *s, double *out);

/* Parses text holding one vector per line: a JSON array "[1, 2.5, ...]" or numbers
 * separated by commas and/or white space. Blank lines are skipped. *out gets n * dim floats
 * (malloc'd; caller frees). Every line must have the same length. On error returns -1 with
 * a message in why ("line 3: ..."). */
int cli_parse_vectors_text(const char *text, size_t len, float **out, size_t *n, uint32_t *dim,
                           char *why, size_t why_len);
/* Reads a whole stream into a malloc'd NUL-terminated buffer. 0 or -1 (errno set). */
int cli_read_stream(FILE *f, char **out, size_t *len);

/* Copies between the datasets module's id and the client's id (same meaning). */
sieve_client_id cli_id_from_ds(const sieve_ds_id *id);

/* ---------------------------------------------------------------- ingest checkpoints */

/* What a resumable ingest writes after its acknowledged batches: the job's identity (input
 * files with size and modification time, target, collection, id numbering, row range and
 * dimension) and `done`, the number of leading rows [0, done) that are durably stored.
 * Stored as "key=value" text lines closed by a checksum line, replaced atomically
 * (temporary file + rename). A torn or stale file is detected and ignored, never trusted. */
#define CLI_CKPT_PATH_MAX 4096
typedef struct cli_ckpt_file {
    char path[CLI_CKPT_PATH_MAX]; /* absolute; "" for none */
    uint64_t size;
    int64_t mtime_ns;
} cli_ckpt_file;

typedef struct cli_ckpt {
    cli_ckpt_file vectors, ids, payloads;
    char format[16];                    /* the vectors' format name */
    char target[CLI_CKPT_PATH_MAX + 8]; /* "data-dir:/abs/path" or "url:http://..." */
    char collection[72];
    uint64_t id_start; /* ids = id_start + row when the files give none */
    uint64_t rows;     /* rows this job ingests in total: [0, rows) */
    uint32_t dim;
    uint64_t done; /* rows [0, done) are acknowledged (durable) */
} cli_ckpt;

/* Describes path (absolute path, size, mtime) into f; path NULL gives an empty entry.
 * 0, or -1 with errno. */
int cli_ckpt_describe(const char *path, cli_ckpt_file *f);
/* Loads a checkpoint. 0: loaded; 1: no such file; -1: unreadable, torn or not a checkpoint
 * (why says which). */
int cli_ckpt_load(const char *path, cli_ckpt *out, char *why, size_t why_len);
/* Writes c atomically (PATH.tmp, then rename). 0, or -1 with errno. */
int cli_ckpt_save(const char *path, const cli_ckpt *c);
/* 1 when a and b describe the same job (everything but done), else 0 with the first
 * difference named in why. */
int cli_ckpt_same_job(const cli_ckpt *a, const cli_ckpt *b, char *why, size_t why_len);

/* Subcommands: argc/argv start at the subcommand's own name. */
int cli_cmd_collection(int argc, char **argv);
int cli_cmd_upsert(int argc, char **argv);
int cli_cmd_get(int argc, char **argv);
int cli_cmd_delete(int argc, char **argv);
int cli_cmd_count(int argc, char **argv);
int cli_cmd_search(int argc, char **argv);
int cli_cmd_ingest(int argc, char **argv);
int cli_cmd_health(int argc, char **argv);

/* Prints a record list as a table (rank, id, score when scored, payload, vector head) or,
 * with json, as one JSON array. */
void cli_print_records(FILE *out, const sieve_client_records *r, int scored, int json);

#endif

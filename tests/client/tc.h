/* tc.h: helpers shared by the client suites.
 *
 * Owns: a private temporary directory per test, running the real `sieve` binary as a child
 * process (stdout and stderr captured, exit status returned), spawning it to kill it, and
 * starting the real sieve-server on a free loopback port with its own data directory.
 * Must not: link server code or fake what a test checks; the binaries come from the build
 * directory ($SIEVE_BUILD_DIR, set by ctest).
 */
#ifndef SIEVE_TEST_TC_H
#define SIEVE_TEST_TC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Creates a fresh directory under $TMPDIR (or /tmp) into dir (256 bytes). 0 or -1. */
int tc_mkdtemp(char *dir, const char *prefix);
/* Removes path and everything below it. */
void tc_rmrf(const char *path);

/* "$SIEVE_BUILD_DIR/client/sieve" (or "./client/sieve" without the variable). */
const char *tc_sieve_bin(void);
/* "$SIEVE_BUILD_DIR/server/sieve-server", or $SIEVE_SERVER_BIN when set. */
const char *tc_server_bin(void);

typedef struct tc_out {
    int status; /* exit status, or 1000 + signal when killed */
    char *out;  /* stdout (NUL-terminated) */
    char *err;  /* stderr */
} tc_out;

/* Runs argv (argv[0] is the program path; NULL-terminated) with stdin from stdin_text (NULL:
 * /dev/null) and extra environment entries env ("K=V", NULL-terminated; NULL for none; an
 * entry "K=" unsets K). Fills *o; returns o->status. */
int tc_run(char *const argv[], const char *stdin_text, char *const env[], tc_out *o);
void tc_out_free(tc_out *o);

/* Starts argv with stdout/stderr appended to the files out_path/err_path. Returns the pid. */
pid_t tc_spawn(char *const argv[], const char *out_path, const char *err_path);
/* Waits for pid; returns the exit status or 1000 + signal. */
int tc_wait(pid_t pid);

/* Reads a whole file (malloc'd, NUL-terminated) or NULL. */
char *tc_read_file(const char *path, size_t *len);

/* ---------------------------------------------------------------- a real server */

typedef struct tc_server {
    pid_t pid;
    int port;
    char dir[256]; /* temporary directory holding data/ and server.log */
    char url[64];
} tc_server;

/* 1 when the build's sieve-server is the real server (its --help names --data-dir), 0 when
 * it is the placeholder that predates the server module. */
int tc_server_available(void);
/* Starts sieve-server --host 127.0.0.1 --port 0 --data-dir DIR/data --device cpu plus the
 * NULL-terminated extra arguments, and waits until its log says where it listens.
 * 0, or -1 (the log is printed). */
int tc_server_start(tc_server *s, const char *const *extra);
/* SIGTERM and wait; returns the exit status (0 clean) or 1000 + signal. Removes the
 * directory. */
int tc_server_stop(tc_server *s);

#endif

/* harness.h: black-box helpers for the sieve-server suites.
 *
 * Owns: starting the real sieve-server binary ($SIEVE_BUILD_DIR/server/sieve-server) on a
 * free loopback port with a temporary data directory, talking to it over real HTTP with
 * libcurl, and stopping it with SIGTERM while checking that it exits 0 (under ASan a leak
 * at shutdown makes that fail). Must not: link any server code; only the HTTP API is used.
 */
#ifndef SIEVE_TEST_HARNESS_H
#define SIEVE_TEST_HARNESS_H

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct th_server {
    pid_t pid;
    int port;
    char dir[256];      /* temporary directory: data/ and server.log inside */
    char data[300];
    char log[300];
    char *args[32];     /* extra arguments (owned copies) */
    int n_args;
} th_server;

/* Creates the temporary directory (once per th_server). */
void th_init(th_server *s);
/* Starts the server with extra NULL-terminated arguments (after the standard ones:
 * --host 127.0.0.1 --port 0 --data-dir DIR/data --device cpu --no-sync; the device is
 * $SIEVE_TEST_DEVICE when set, e.g. cuda:0). Waits until it listens. Returns 0, or -1 (the
 * log is printed). */
int th_start(th_server *s, ...);
/* Same with the previous call's arguments (restart after th_stop). */
int th_restart(th_server *s);
/* Sends SIGTERM and waits; returns the exit status (0 clean), or -1000 - signal. */
int th_stop(th_server *s);
/* Kills a server left running (fixture teardown) and removes the directory. */
void th_cleanup(th_server *s);
/* Prints the server log to stderr. */
void th_dump_log(const th_server *s);

typedef struct th_resp {
    long status;
    char *body;        /* NUL-terminated */
    size_t len;
    json_t *json;      /* parsed body, or NULL */
    char content_type[128];
    char error[256];   /* why no reply came back (th_req returned -1) */
} th_resp;

/* One request. method "GET"/"PUT"/"POST"/"DELETE"; body may be NULL; key (api-key header)
 * may be NULL. Returns 0 when an HTTP reply came back. */
int th_req(const th_server *s, const char *method, const char *path, const char *body,
           const char *key, th_resp *r);
/* Sends len bytes of body (any bytes; NULL with len 0 for none) with this Content-Type. */
int th_req_ct(const th_server *s, const char *method, const char *path, const void *body,
              size_t len, const char *content_type, const char *key, th_resp *r);
/* Like th_req with an Authorization: Bearer header instead. */
int th_req_bearer(const th_server *s, const char *method, const char *path, const char *body,
                  const char *token, th_resp *r);
/* Sends body with chunked transfer encoding (no Content-Length). */
int th_req_chunked(const th_server *s, const char *method, const char *path, const char *body,
                   size_t len, th_resp *r);
void th_resp_free(th_resp *r);

/* The "result" of an ok envelope (borrowed), or NULL. */
json_t *th_result(const th_resp *r);
/* The error message of an error envelope, or "". */
const char *th_error(const th_resp *r);

#endif

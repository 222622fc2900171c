/* harness.c: starts, stops and talks to a real sieve-server for the black-box suites.
 * See harness.h. Must not: use anything of the server but its binary and its HTTP API. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "harness.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void th_init(th_server *s) {
    memset(s, 0, sizeof *s);
    s->pid = -1;
    const char *tmp = getenv("TMPDIR");
    snprintf(s->dir, sizeof s->dir, "%s/sieve-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(s->dir)) {
        perror("mkdtemp");
        abort();
    }
    snprintf(s->data, sizeof s->data, "%s/data", s->dir);
    snprintf(s->log, sizeof s->log, "%s/server.log", s->dir);
}

void th_dump_log(const th_server *s) {
    FILE *f = fopen(s->log, "r");
    if (!f) return;
    fprintf(stderr, "---- %s\n", s->log);
    char line[1024];
    while (fgets(line, sizeof line, f)) fputs(line, stderr);
    fprintf(stderr, "----\n");
    fclose(f);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Finds the port in "listening on http://127.0.0.1:PORT" in the log. */
static int read_port(const th_server *s) {
    FILE *f = fopen(s->log, "r");
    if (!f) return 0;
    char line[2048];
    int port = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "=== launch", 10)) port = 0; /* only this launch counts */
        const char *p = strstr(line, "listening on http://");
        if (!p) continue;
        p = strchr(p + strlen("listening on http://"), ':');
        if (p) port = atoi(p + 1);
    }
    fclose(f);
    return port;
}

static int launch(th_server *s) {
    char bin[1024];
    const char *bd = getenv("SIEVE_BUILD_DIR");
    snprintf(bin, sizeof bin, "%s/server/sieve-server", bd && *bd ? bd : ".");
    char *argv[48];
    int n = 0;
    argv[n++] = bin;
    argv[n++] = "--host";
    argv[n++] = "127.0.0.1";
    argv[n++] = "--port";
    argv[n++] = "0";
    argv[n++] = "--data-dir";
    argv[n++] = s->data;
    /* SIEVE_TEST_DEVICE (e.g. cuda:0) runs the suites against another search device. */
    const char *dev = getenv("SIEVE_TEST_DEVICE");
    argv[n++] = "--device";
    argv[n++] = (char *)(dev && *dev ? dev : "cpu");
    argv[n++] = "--no-sync";
    for (int i = 0; i < s->n_args; i++) argv[n++] = s->args[i];
    argv[n] = NULL;
    FILE *mark = fopen(s->log, "a");
    if (mark) {
        fprintf(mark, "=== launch\n");
        fclose(mark);
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        /* Never outlive the test process, even when an assertion ends it early. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        FILE *log = freopen(s->log, "a", stderr);
        if (!log) _exit(127);
        int devnull = open("/dev/null", 0);
        if (devnull >= 0) dup2(devnull, 0);
        dup2(2, 1);
        execv(bin, argv);
        fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    s->pid = pid;
    double deadline = now_s() + 30.0;
    while (now_s() < deadline) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            s->pid = -1;
            fprintf(stderr, "sieve-server exited during startup (status %d)\n", st);
            th_dump_log(s);
            return -1;
        }
        s->port = read_port(s);
        if (s->port) return 0;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "sieve-server did not start listening within 30 s\n");
    th_dump_log(s);
    return -1;
}

int th_start(th_server *s, ...) {
    for (int i = 0; i < s->n_args; i++) free(s->args[i]);
    s->n_args = 0;
    va_list ap;
    va_start(ap, s);
    const char *a;
    while ((a = va_arg(ap, const char *)) && s->n_args < 30) s->args[s->n_args++] = strdup(a);
    va_end(ap);
    return launch(s);
}

int th_restart(th_server *s) { return launch(s); }

int th_stop(th_server *s) {
    if (s->pid <= 0) return -1;
    kill(s->pid, SIGTERM);
    int st = 0;
    double deadline = now_s() + 60.0;
    while (waitpid(s->pid, &st, WNOHANG) == 0) {
        if (now_s() > deadline) {
            fprintf(stderr, "sieve-server did not stop within 60 s of SIGTERM\n");
            kill(s->pid, SIGKILL);
            waitpid(s->pid, &st, 0);
            break;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    s->pid = -1;
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1000 - WTERMSIG(st);
    if (rc != 0) th_dump_log(s);
    return rc;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    return remove(path);
}

void th_cleanup(th_server *s) {
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        s->pid = -1;
    }
    for (int i = 0; i < s->n_args; i++) free(s->args[i]);
    s->n_args = 0;
    if (s->dir[0] && !getenv("SIEVE_KEEP_TEST_DIRS")) nftw(s->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---------------------------------------------------------------- HTTP */

static size_t on_body(char *p, size_t sz, size_t n, void *ud) {
    th_resp *r = ud;
    size_t add = sz * n;
    char *b = realloc(r->body, r->len + add + 1);
    if (!b) return 0;
    memcpy(b + r->len, p, add);
    r->body = b;
    r->len += add;
    r->body[r->len] = 0;
    return add;
}

typedef struct upload {
    const char *p;
    size_t left;
} upload;

static size_t on_read(char *buf, size_t sz, size_t n, void *ud) {
    upload *u = ud;
    size_t m = sz * n;
    if (m > 4096) m = 4096; /* several chunks */
    if (m > u->left) m = u->left;
    memcpy(buf, u->p, m);
    u->p += m;
    u->left -= m;
    return m;
}

static int request(const th_server *s, const char *method, const char *path, const char *body,
                   size_t len, int chunked, const char *auth_header, const char *ctype,
                   th_resp *r) {
    memset(r, 0, sizeof *r);
    CURL *c = curl_easy_init();
    if (!c) return -1;
    char url[2048];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", s->port, path);
    struct curl_slist *h = NULL;
    char ct_line[256];
    snprintf(ct_line, sizeof ct_line, "Content-Type: %s", ctype ? ctype : "application/json");
    h = curl_slist_append(h, ct_line);
    if (auth_header) h = curl_slist_append(h, auth_header);
    upload up = {body, len};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (body && chunked) {
        h = curl_slist_append(h, "Transfer-Encoding: chunked");
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(c, CURLOPT_READDATA, &up);
    } else if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    CURLcode cc = curl_easy_perform(c);
    int rc = -1;
    if (cc == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
        char *ct = NULL;
        curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
        if (ct) snprintf(r->content_type, sizeof r->content_type, "%s", ct);
        if (!r->body) r->body = calloc(1, 1);
        r->json = json_loadb(r->body, r->len, 0, NULL);
        rc = 0;
    } else {
        snprintf(r->error, sizeof r->error, "%s %s: %s", method, path, curl_easy_strerror(cc));
    }
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return rc;
}

int th_req(const th_server *s, const char *method, const char *path, const char *body,
           const char *key, th_resp *r) {
    char hdr[600];
    if (key) snprintf(hdr, sizeof hdr, "api-key: %s", key);
    return request(s, method, path, body, body ? strlen(body) : 0, 0, key ? hdr : NULL, NULL, r);
}

int th_req_ct(const th_server *s, const char *method, const char *path, const void *body,
              size_t len, const char *content_type, const char *key, th_resp *r) {
    char hdr[600];
    if (key) snprintf(hdr, sizeof hdr, "api-key: %s", key);
    return request(s, method, path, body, len, 0, key ? hdr : NULL, content_type, r);
}

int th_req_bearer(const th_server *s, const char *method, const char *path, const char *body,
                  const char *token, th_resp *r) {
    char hdr[600];
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s", token);
    return request(s, method, path, body, body ? strlen(body) : 0, 0, hdr, NULL, r);
}

int th_req_chunked(const th_server *s, const char *method, const char *path, const char *body,
                   size_t len, th_resp *r) {
    return request(s, method, path, body, len, 1, NULL, NULL, r);
}

void th_resp_free(th_resp *r) {
    free(r->body);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

json_t *th_result(const th_resp *r) { return r->json ? json_object_get(r->json, "result") : NULL; }

const char *th_error(const th_resp *r) {
    json_t *st = r->json ? json_object_get(r->json, "status") : NULL;
    const char *e = json_string_value(json_object_get(st, "error"));
    return e ? e : "";
}

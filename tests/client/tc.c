/* tc.c: helpers shared by the client suites (see tc.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tc.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int tc_mkdtemp(char *dir, const char *prefix) {
    const char *t = getenv("TMPDIR");
    snprintf(dir, 256, "%s/%s-XXXXXX", t && *t ? t : "/tmp", prefix);
    return mkdtemp(dir) ? 0 : -1;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void tc_rmrf(const char *path) {
    if (path && *path) nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *tc_sieve_bin(void) {
    static char path[512];
    const char *b = getenv("SIEVE_BUILD_DIR");
    snprintf(path, sizeof path, "%s/client/sieve", b && *b ? b : ".");
    return path;
}

const char *tc_server_bin(void) {
    static char path[512];
    const char *s = getenv("SIEVE_SERVER_BIN");
    if (s && *s) return s;
    const char *b = getenv("SIEVE_BUILD_DIR");
    snprintf(path, sizeof path, "%s/server/sieve-server", b && *b ? b : ".");
    return path;
}

char *tc_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (!b) break;
        if (cap - n < 2) {
            char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
        size_t got = fread(b + n, 1, cap - n - 1, f);
        if (!got) break;
        n += got;
    }
    fclose(f);
    if (b) b[n] = 0;
    if (len) *len = n;
    return b;
}

static void apply_env(char *const env[]) {
    for (size_t i = 0; env && env[i]; i++) {
        const char *eq = strchr(env[i], '=');
        if (!eq) continue;
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(eq - env[i]), env[i]);
        if (eq[1])
            setenv(key, eq + 1, 1);
        else
            unsetenv(key);
    }
}

static int status_of(int st) {
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 1000 + WTERMSIG(st);
    return -1;
}

int tc_wait(pid_t pid) {
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return status_of(st);
}

int tc_run(char *const argv[], const char *stdin_text, char *const env[], tc_out *o) {
    memset(o, 0, sizeof *o);
    char dir[256];
    if (tc_mkdtemp(dir, "sieve-run")) {
        o->status = -1;
        return -1;
    }
    char in[300], out[300], err[300];
    snprintf(in, sizeof in, "%s/in", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    FILE *f = fopen(in, "wb");
    if (f) {
        if (stdin_text) fputs(stdin_text, f);
        fclose(f);
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        int fi = stdin_text ? open(in, O_RDONLY) : open("/dev/null", O_RDONLY);
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fi < 0 || fo < 0 || fe < 0) _exit(127);
        dup2(fi, 0);
        dup2(fo, 1);
        dup2(fe, 2);
        apply_env(env);
        execv(argv[0], argv);
        _exit(127);
    }
    o->status = pid > 0 ? tc_wait(pid) : -1;
    o->out = tc_read_file(out, NULL);
    o->err = tc_read_file(err, NULL);
    if (!o->out) o->out = calloc(1, 1);
    if (!o->err) o->err = calloc(1, 1);
    tc_rmrf(dir);
    return o->status;
}

void tc_out_free(tc_out *o) {
    free(o->out);
    free(o->err);
    memset(o, 0, sizeof *o);
}

/* Like tc_spawn; with die_with_parent the child gets SIGTERM when the test process ends, so
 * a test that stops early (failed assertion, skip) never leaves a server behind. */
static pid_t spawn(char *const argv[], const char *out_path, const char *err_path,
                   int die_with_parent) {
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        if (die_with_parent) {
            prctl(PR_SET_PDEATHSIG, SIGTERM);
            if (getppid() != parent) _exit(126);
        }
        int fi = open("/dev/null", O_RDONLY);
        int fo = open(out_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int fe = open(err_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fi < 0 || fo < 0 || fe < 0) _exit(127);
        dup2(fi, 0);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

pid_t tc_spawn(char *const argv[], const char *out_path, const char *err_path) {
    return spawn(argv, out_path, err_path, 0);
}

/* ---------------------------------------------------------------- server */

int tc_server_available(void) {
    char *argv[] = {(char *)tc_server_bin(), "--help", NULL};
    if (access(argv[0], X_OK)) return 0;
    tc_out o;
    /* the placeholder ignores its arguments and serves forever: give it no chance to */
    char dir[256];
    if (tc_mkdtemp(dir, "sieve-probe")) return 0;
    char out[300], err[300];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    pid_t pid = spawn(argv, out, err, 1);
    int st = -1;
    for (int i = 0; i < 40; i++) {
        int w;
        pid_t r = waitpid(pid, &w, WNOHANG);
        if (r == pid) {
            st = status_of(w);
            break;
        }
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (st < 0) {
        kill(pid, SIGKILL);
        tc_wait(pid);
    }
    o.out = tc_read_file(out, NULL);
    int ok = st == 0 && o.out && strstr(o.out, "--data-dir");
    free(o.out);
    tc_rmrf(dir);
    return ok;
}

static int find_port(const char *log) {
    char *text = tc_read_file(log, NULL);
    int port = 0;
    const char *p = text ? strstr(text, "listening on http://") : NULL;
    if (p) {
        p = strchr(p + strlen("listening on http://"), ':');
        if (p) port = atoi(p + 1);
    }
    free(text);
    return port;
}

int tc_server_start(tc_server *s, const char *const *extra) {
    memset(s, 0, sizeof *s);
    if (tc_mkdtemp(s->dir, "sieve-srv")) return -1;
    char data[300], log[300];
    snprintf(data, sizeof data, "%s/data", s->dir);
    snprintf(log, sizeof log, "%s/server.log", s->dir);
    char *argv[40];
    int n = 0;
    argv[n++] = (char *)tc_server_bin();
    argv[n++] = "--host";
    argv[n++] = "127.0.0.1";
    argv[n++] = "--port";
    argv[n++] = "0";
    argv[n++] = "--data-dir";
    argv[n++] = data;
    argv[n++] = "--device";
    argv[n++] = "cpu";
    for (size_t i = 0; extra && extra[i] && n < 38; i++) argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    s->pid = spawn(argv, log, log, 1);
    for (int i = 0; i < 600 && !s->port; i++) {
        int w;
        if (waitpid(s->pid, &w, WNOHANG) == s->pid) {
            s->pid = 0;
            break;
        }
        s->port = find_port(log);
        if (!s->port) {
            struct timespec ts = {0, 50 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    if (!s->port) {
        char *text = tc_read_file(log, NULL);
        fprintf(stderr, "sieve-server did not start; its log:\n%s\n", text ? text : "(none)");
        free(text);
        if (s->pid > 0) {
            kill(s->pid, SIGKILL);
            tc_wait(s->pid);
        }
        tc_rmrf(s->dir);
        return -1;
    }
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", s->port);
    return 0;
}

int tc_server_stop(tc_server *s) {
    int st = 0;
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        st = tc_wait(s->pid);
        s->pid = 0;
        if (st != 0) {
            char log[300];
            snprintf(log, sizeof log, "%s/server.log", s->dir);
            char *text = tc_read_file(log, NULL);
            fprintf(stderr, "sieve-server exited with %d; its log:\n%s\n", st, text ? text : "");
            free(text);
        }
    }
    tc_rmrf(s->dir);
    return st;
}

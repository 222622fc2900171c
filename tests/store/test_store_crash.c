/* test_store_crash.c: kill -9 during writes loses nothing acknowledged.
 *
 * Each trial starts store_crash_child (a separate executable next to this one) on the same
 * data directory, lets it run a random 5..250 ms (every other trial: 0..245 ms after its first
 * acknowledged operation), and kills it with SIGKILL. The child
 * reports every acknowledged operation through a pipe. The parent then reopens the store and
 * checks: the environment opens cleanly; every batch whose upsert was acknowledged is fully
 * present with the exact vectors and payloads (unless its delete was acknowledged, then fully
 * absent); the one operation in flight is all-or-nothing; nothing else exists; the counter
 * point that every upsert overwrites names the last committed batch (same transaction); and
 * the row table, id map and view agree. Trials accumulate in one directory, so later trials
 * also recheck earlier ones.
 *
 * SIEVE_CRASH_TRIALS (default 20) sets the number of trials, SIEVE_CRASH_SEED the seed.
 */
#define _GNU_SOURCE /* pipe2, mkdtemp */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "crash_common.h"
#include "store_test_util.h"

typedef struct trial {
    uint64_t start;
    size_t n;            /* batches tracked: indices 0 .. n-1 from start */
    int8_t *want;        /* 1 present, 0 absent, -1 either (the operation in flight) */
    uint32_t *seen;      /* points counted by the last scan */
} trial;

typedef struct scan_ctx {
    trial *trials;
    size_t n_trials;
    sieve_snapshot *snap;
    size_t cur;          /* trial being checked: its vectors are all compared */
    uint64_t visited;
    uint64_t counter_last;
    int counter_seen;
    char err[1024];
} scan_ctx;

static int scan_row(void *arg, uint64_t row, const sieve_point_id *id, const char *payload,
                    size_t len) {
    scan_ctx *c = arg;
    c->visited++;
    if (id->kind != SIEVE_ID_NUM) {
        snprintf(c->err, sizeof c->err, "row %llu has a UUID id", (unsigned long long)row);
        return 1;
    }
    uint64_t back;
    if (sieve_snapshot_id_row(c->snap, id, &back) || back != row) {
        snprintf(c->err, sizeof c->err, "id %llu: row %llu does not map back",
                 (unsigned long long)id->num, (unsigned long long)row);
        return 1;
    }
    float v[CR_DIM];
    sieve_snapshot_row_vector(c->snap, row, v);
    if (id->num == CR_COUNTER) {
        unsigned long long last;
        if (!payload || sscanf(payload, "{\"last\":%llu}", &last) != 1 || v[0] != (float)last) {
            snprintf(c->err, sizeof c->err, "counter point is malformed (%.*s)", (int)len,
                     payload ? payload : "");
            return 1;
        }
        c->counter_last = last;
        c->counter_seen = 1;
        return 0;
    }
    uint64_t batch = id->num / CR_K;
    unsigned j = (unsigned)(id->num % CR_K);
    uint64_t t = batch / CR_TRIAL_BATCHES;
    if (t == 0 || t > c->n_trials || batch - c->trials[t - 1].start >= c->trials[t - 1].n) {
        snprintf(c->err, sizeof c->err, "unexpected point %llu (batch %llu)",
                 (unsigned long long)id->num, (unsigned long long)batch);
        return 1;
    }
    trial *tr = &c->trials[t - 1];
    tr->seen[batch - tr->start]++;
    char want[320];
    cr_payload(batch, j, want, sizeof want);
    if (!payload || len != strlen(want) || memcmp(payload, want, len)) {
        snprintf(c->err, sizeof c->err, "point %llu: payload %.*s, want %.320s",
                 (unsigned long long)id->num, (int)(len > 320 ? 320 : len), payload ? payload : "", want);
        return 1;
    }
    if (t - 1 == c->cur || row % 16 == c->cur % 16) {
        for (unsigned d = 0; d < CR_DIM; d++)
            if (v[d] != cr_value(id->num, d)) {
                snprintf(c->err, sizeof c->err, "point %llu: value %u is %.9g, want %.9g",
                         (unsigned long long)id->num, d, v[d], cr_value(id->num, d));
                return 1;
            }
    }
    return 0;
}

static void child_path(char *buf, size_t cap) {
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    cr_assert_gt(n, 0);
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    cr_assert_not_null(slash);
    snprintf(slash + 1, cap - (size_t)(slash + 1 - buf), "store_crash_child");
    cr_assert_eq(access(buf, X_OK), 0, "helper %s is missing", buf);
}

static char g_dir[512];

static void cleanup(void) { tu_rmdir(g_dir); }

Test(crash, sigkill_loses_no_acknowledged_write, .fini = cleanup, .timeout = 1800) {
    const char *te = getenv("SIEVE_CRASH_TRIALS");
    size_t trials = te && atoi(te) > 0 ? (size_t)atoi(te) : 20;
    const char *se = getenv("SIEVE_CRASH_SEED");
    unsigned seed = se ? (unsigned)strtoul(se, NULL, 10) : (unsigned)time(NULL);
    cr_log_info("crash: %zu trials, SIEVE_CRASH_SEED=%u", trials, seed);
    char child[PATH_MAX];
    child_path(child, sizeof child);
    tu_mkdtemp(g_dir, sizeof g_dir);

    trial *tr = calloc(trials, sizeof *tr);
    cr_assert_not_null(tr);
    int exists = 0;
    uint64_t last_upsert = 0; /* last committed upsert batch (0: none yet) */
    uint64_t acked_total = 0, inflight_committed = 0, inflight_lost = 0;
    for (size_t t = 0; t < trials; t++) {
        uint64_t start = (t + 1) * CR_TRIAL_BATCHES;
        int create = !exists;
        int fds[2];
        cr_assert_eq(pipe2(fds, O_CLOEXEC), 0);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            if (dup2(fds[1], 3) < 0) _exit(90);
            char sbuf[32], cbuf[4];
            snprintf(sbuf, sizeof sbuf, "%llu", (unsigned long long)start);
            snprintf(cbuf, sizeof cbuf, "%d", create);
            execl(child, child, g_dir, sbuf, cbuf, "3", (char *)NULL);
            _exit(91);
        }
        close(fds[1]);
        /* odd trials: kill at a random moment from the start (open and create included);
         * even trials: first wait for one acknowledgement (up to 20 s, for slow sanitizer
         * runs), so every other trial surely kills a child in the middle of writing */
        size_t cap = 64, n_acked = 0;
        cr_record *acked = malloc(cap * sizeof *acked);
        cr_assert_not_null(acked);
        if (t % 2 == 0) {
            struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
            cr_assert_eq(poll(&pfd, 1, 20000), 1, "trial %zu: no acknowledgement in 20 s", t);
            cr_assert_eq(read(fds[0], &acked[0], sizeof *acked), (ssize_t)sizeof *acked);
            n_acked = 1;
        }
        long ms = (t % 2 ? 5 : 0) + (long)(rand_r(&seed) % 246);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "trial %zu: the child ended by itself (status 0x%x) before the kill", t, status);

        /* acknowledged operations, in order */
        if (n_acked) {
            cr_record want = cr_op(start, create, 0);
            cr_assert(acked[0].op == want.op && acked[0].batch == want.batch,
                      "trial %zu: record 0 out of sequence", t);
        }
        for (;;) {
            if (n_acked == cap) {
                cap *= 2;
                acked = realloc(acked, cap * sizeof *acked);
                cr_assert_not_null(acked);
            }
            ssize_t r = read(fds[0], &acked[n_acked], sizeof *acked);
            if (r == 0) break;
            cr_assert_eq(r, (ssize_t)sizeof *acked, "trial %zu: short record", t);
            cr_record want = cr_op(start, create, n_acked);
            cr_assert(acked[n_acked].op == want.op && acked[n_acked].batch == want.batch,
                      "trial %zu: record %zu out of sequence", t, n_acked);
            n_acked++;
        }
        close(fds[0]);
        acked_total += n_acked;
        cr_record inflight = cr_op(start, create, n_acked);

        /* expectations for this trial's batches */
        uint64_t top = inflight.op == CR_OP_CREATE ? start : inflight.batch;
        for (size_t i = 0; i < n_acked; i++)
            if (acked[i].batch > top) top = acked[i].batch;
        tr[t].start = start;
        tr[t].n = (size_t)(top - start + 1);
        tr[t].want = calloc(tr[t].n, 1);
        tr[t].seen = calloc(tr[t].n, sizeof *tr[t].seen);
        cr_assert(tr[t].want && tr[t].seen);
        for (size_t i = 0; i < n_acked; i++) {
            if (acked[i].op == CR_OP_UPSERT) tr[t].want[acked[i].batch - start] = 1;
            if (acked[i].op == CR_OP_DELETE) tr[t].want[acked[i].batch - start] = 0;
            if (acked[i].op == CR_OP_UPSERT) last_upsert = acked[i].batch;
        }
        if (inflight.op != CR_OP_CREATE) tr[t].want[inflight.batch - start] = -1;
        free(acked);

        sieve_store *st = NULL;
        int rc = sieve_store_open(g_dir, NULL, &st);
        cr_assert_eq(rc, 0, "trial %zu: reopen after SIGKILL: %s", t, sieve_errname(rc));
        sieve_collection_info info;
        rc = sieve_store_collection_info(st, CR_COLL, &info);
        if (!exists && n_acked == 0) {
            /* killed before the create was acknowledged: it either happened or not */
            cr_assert(rc == 0 || rc == SIEVE_ENOTFOUND, "trial %zu: %s", t, sieve_errname(rc));
            if (rc == SIEVE_ENOTFOUND) {
                sieve_store_close(st);
                continue;
            }
            inflight_committed++;
            tr[t].want[0] = 0; /* the create committed; no upsert was in flight */
        }
        cr_assert_eq(rc, 0, "trial %zu: collection missing: %s", t, sieve_errname(rc));
        exists = 1;

        /* one scan of every live row */
        for (size_t u = 0; u <= t; u++)
            if (tr[u].seen) memset(tr[u].seen, 0, tr[u].n * sizeof *tr[u].seen);
        scan_ctx sc = {.trials = tr, .n_trials = t + 1, .cur = t};
        cr_assert_eq(sieve_snapshot_open(st, CR_COLL, &sc.snap), 0);
        rc = sieve_snapshot_foreach(sc.snap, scan_row, &sc);
        cr_assert_eq(rc, 0, "trial %zu: %s", t, sc.err);
        const sieve_collection_info *si = sieve_snapshot_info(sc.snap);
        const sieve_matrix *m = sieve_snapshot_matrix(sc.snap);
        uint64_t dead = 0;
        for (uint64_t r = 0; r < m->n_rows; r++) dead += (m->deleted[r / 64] >> (r % 64)) & 1;
        cr_assert_eq(si->points, sc.visited, "trial %zu: view says %llu points, rows hold %llu", t,
                     (unsigned long long)si->points, (unsigned long long)sc.visited);
        cr_assert_eq(si->points + dead, m->n_rows, "trial %zu", t);
        sieve_snapshot_close(sc.snap);

        uint64_t expect_points = 0;
        for (size_t u = 0; u <= t; u++) {
            for (size_t i = 0; i < tr[u].n; i++) {
                uint32_t seen = tr[u].seen[i];
                uint64_t batch = tr[u].start + i;
                cr_assert(seen == 0 || seen == CR_K,
                          "trial %zu: batch %llu is half-present (%u of %d points)", t,
                          (unsigned long long)batch, seen, CR_K);
                int w = tr[u].want[i];
                if (w >= 0)
                    cr_assert_eq(seen == CR_K, w == 1, "trial %zu: batch %llu %s", t,
                                 (unsigned long long)batch,
                                 w ? "was acknowledged but is missing" : "should be absent");
                else if (u == t) {
                    /* resolve the operation in flight by what is durable now */
                    tr[u].want[i] = seen == CR_K;
                    int committed = inflight.op == CR_OP_UPSERT ? seen == CR_K : seen == 0;
                    if (committed) inflight_committed++;
                    else inflight_lost++;
                    if (inflight.op == CR_OP_UPSERT && seen == CR_K) last_upsert = batch;
                }
                expect_points += seen;
            }
        }
        if (last_upsert) {
            cr_assert(sc.counter_seen, "trial %zu: counter point missing", t);
            cr_assert_eq(sc.counter_last, last_upsert,
                         "trial %zu: counter says batch %llu, last committed upsert is %llu", t,
                         (unsigned long long)sc.counter_last, (unsigned long long)last_upsert);
            expect_points++;
        } else {
            cr_assert(!sc.counter_seen, "trial %zu: counter without any upsert", t);
        }
        uint64_t count;
        cr_assert_eq(sieve_store_count(st, CR_COLL, &count), 0);
        cr_assert_eq(count, expect_points, "trial %zu: count %llu, expected %llu", t,
                     (unsigned long long)count, (unsigned long long)expect_points);
        sieve_store_close(st);
    }
    cr_log_info("crash: %zu trials, %llu acknowledged operations, in-flight operation "
                "committed %llu times and lost %llu times",
                trials, (unsigned long long)acked_total, (unsigned long long)inflight_committed,
                (unsigned long long)inflight_lost);
    cr_assert_geq(acked_total, trials / 2, "the child barely ran; the test proved little");
    for (size_t t = 0; t < trials; t++) {
        free(tr[t].want);
        free(tr[t].seen);
    }
    free(tr);
}

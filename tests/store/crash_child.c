/* crash_child.c: the writer the crash suite kills. Usage: store_crash_child DIR START CREATE FD
 * Opens the store in DIR (1 MiB initial map so the map grows while it runs), runs the trial's
 * operation sequence (crash_common.h) from batch START forever, and after each acknowledged
 * operation writes a cr_record to file descriptor FD. Exits non-zero on any error. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "crash_common.h"
#include "sieve_store.h"

static void report(int fd, cr_record r) {
    const char *p = (const char *)&r;
    size_t left = sizeof r;
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) _exit(3);
        p += w;
        left -= (size_t)w;
    }
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s DIR START CREATE FD\n", argv[0]);
        return 2;
    }
    uint64_t start = strtoull(argv[2], NULL, 10);
    int create = atoi(argv[3]);
    int fd = atoi(argv[4]);
    sieve_store_options o;
    sieve_store_options_init(&o);
    o.initial_map_bytes = 1u << 20;
    sieve_store *st;
    int rc = sieve_store_open(argv[1], &o, &st);
    if (rc) {
        fprintf(stderr, "crash child: open: %s\n", sieve_errname(rc));
        return 1;
    }
    static float vecs[CR_K + 1][CR_DIM];
    static char pays[CR_K + 1][320];
    sieve_point pts[CR_K + 1];
    sieve_point_id ids[CR_K];
    for (uint64_t i = 0;; i++) {
        cr_record op = cr_op(start, create, i);
        if (op.op == CR_OP_CREATE) {
            sieve_collection_config c;
            memset(&c, 0, sizeof c);
            snprintf(c.name, sizeof c.name, "%s", CR_COLL);
            c.dim = CR_DIM;
            c.metric = SIEVE_METRIC_DOT;
            c.dtype = SIEVE_DTYPE_F32;
            c.rows_per_page = 128;
            rc = sieve_store_create_collection(st, &c);
        } else if (op.op == CR_OP_UPSERT) {
            for (unsigned j = 0; j <= CR_K; j++) {
                uint64_t id = j < CR_K ? cr_point_id(op.batch, j) : CR_COUNTER;
                for (unsigned d = 0; d < CR_DIM; d++)
                    vecs[j][d] = j < CR_K ? cr_value(id, d) : (float)op.batch;
                if (j < CR_K) cr_payload(op.batch, j, pays[j], sizeof pays[j]);
                else snprintf(pays[j], sizeof pays[j], "{\"last\":%llu}", (unsigned long long)op.batch);
                memset(&pts[j], 0, sizeof pts[j]);
                pts[j].id.kind = SIEVE_ID_NUM;
                pts[j].id.num = id;
                pts[j].vector = vecs[j];
                pts[j].dim = CR_DIM;
                pts[j].payload = pays[j];
                pts[j].payload_len = strlen(pays[j]);
            }
            rc = sieve_store_upsert(st, CR_COLL, pts, CR_K + 1);
        } else {
            for (unsigned j = 0; j < CR_K; j++) {
                memset(&ids[j], 0, sizeof ids[j]);
                ids[j].kind = SIEVE_ID_NUM;
                ids[j].num = cr_point_id(op.batch, j);
            }
            uint64_t nd = 0;
            rc = sieve_store_delete(st, CR_COLL, ids, CR_K, &nd);
            if (!rc && nd != CR_K) rc = SIEVE_EINTERNAL;
        }
        if (rc) {
            fprintf(stderr, "crash child: op %llu: %s\n", (unsigned long long)i, sieve_errname(rc));
            return 1;
        }
        report(fd, op);
    }
}

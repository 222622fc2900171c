/* crash_common.h: what the crash child and the crash suite agree on: the operation sequence
 * of a trial, the records the child sends after each acknowledged operation, and the
 * contents of a batch. */
#ifndef CRASH_COMMON_H
#define CRASH_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define CR_COLL "crash"
#define CR_DIM 128
#define CR_K 64                   /* points a batch */
#define CR_COUNTER UINT64_MAX     /* id of the point overwritten by every batch */
#define CR_TRIAL_BATCHES 100000   /* batch numbers of trial t start at t * this */

enum { CR_OP_CREATE = 1, CR_OP_UPSERT = 2, CR_OP_DELETE = 3 };

typedef struct cr_record { uint64_t op, batch; } cr_record;

/* Operation i of a trial that starts at batch `start`: create (only when create is set),
 * then for b = start, start+1, ...: upsert batch b, and after every fifth upsert, delete
 * batch b-3. */
static inline cr_record cr_op(uint64_t start, int create, uint64_t i) {
    if (create) {
        if (i == 0) return (cr_record){CR_OP_CREATE, 0};
        i--;
    }
    /* every group of 6 ops: U s, U s+1, U s+2, U s+3, U s+4, D s+1 */
    uint64_t g = i / 6, r = i % 6, b0 = start + g * 5;
    if (r < 5) return (cr_record){CR_OP_UPSERT, b0 + r};
    return (cr_record){CR_OP_DELETE, b0 + 1};
}

static inline uint64_t cr_point_id(uint64_t batch, unsigned j) { return batch * CR_K + j; }

static inline float cr_value(uint64_t id, unsigned i) {
    uint64_t x = id * 0x9E3779B97F4A7C15ull + i * 0xD1B54A32D192ED03ull + 7;
    x ^= x >> 29; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 32;
    return (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static inline void cr_payload(uint64_t batch, unsigned j, char *buf, size_t cap) {
    /* sizes vary so payload pages are allocated and freed unevenly */
    snprintf(buf, cap, "{\"b\":%llu,\"j\":%u,\"pad\":\"%.*s\"}", (unsigned long long)batch, j,
             (int)((batch * 7 + j) % 200), "................................................"
             "................................................................................"
             "........................................................................");
}

#endif

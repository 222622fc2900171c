/* sparse_attn.c (cpu): the CPU backend of grouped sparse attention.
 * Owns: building each token's key set S_t (ascending, distinct, in range), the group union
 * counts the statistics report, the float32 attention over each token's own set, the
 * per-worker buffers and the timing.
 * Must not: depend on p->group for the answer (group only shapes the statistics), keep state
 * between calls, write the caller's arrays outside their shapes or on an error.
 *
 * Two parallel phases, each claimed dynamically by dev->threads workers (sieve__cpu_run):
 *  prepare: the workers claim groups of p->group neighbouring tokens. For each token t of a
 *    group, the entries of idx row t that lie in [0, n_keys) are sorted ascending and made
 *    distinct into sets (T x k positions, |S_t| in counts[t]); the group's union size is
 *    counted by a merge over its tokens' sorted sets (at most 32 cursors), without a buffer.
 *  attend: the workers claim tokens. For token t and kv head g, the query heads h of g
 *    (h / (q_heads / kv_heads) == g) are taken HCHUNK at a time over the set's entries by
 *    sieve__cpu_attend_entries (kernels/cpu/attention.c: the key rows converted to float32
 *    and gathered transposed, KBLOCK at a time, the value rows row-major), all in float32:
 *        dot_j = sum over d in index order of q[t,h,d] * key[s_j,g,d]   (s_j ascending)
 *        x_j = dot_j * scale,  m = max x_j,  e_j = expf(x_j - m),  l = sum_j e_j
 *        out[t,h,v] = (sum_j e_j * value[s_j,g,v]) / l,  lse[t,h] = m + logf(l)
 *    Sums run in ascending j. float16 and bfloat16 products are exact in float32, so the dot
 *    accumulates exact products as the contract says; float32 products round once. The
 *    sets are sorted and distinct, so the answer depends neither on the order of a row nor
 *    on duplicates in it, nor on group or the worker count: bit for bit. A token whose set
 *    is empty gets out = 0 and lse = -inf.
 * Statistics: groups = ceil(T / group); member_entries = sum |S_t|; union_entries = sum over
 * groups of the union's size; ms_prepare and ms_attend are the wall times of the two phases
 * (not summed over workers); ms_total is the call's wall time.
 * Memory: the sets (T x k positions, idx's size) and per worker a k-entry row (prepare) and
 * about HCHUNK x (head_dim + v_dim + max |S_t|) + KBLOCK x (head_dim + v_dim) floats
 * (attend), all allocated before out or lse is written, so SIEVE_ENOMEM leaves them
 * untouched.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#define MAX_WORKERS 256u
#define MAX_GROUP 32u /* sieve__check_sparse_attn_params bounds p->group */
#define HCHUNK 8u     /* query heads of one kv head attended together */

/* One worker's buffers. */
typedef struct wbuf {
    uint64_t *row;          /* k: one idx row's valid entries, sorted (prepare) */
    sieve__cpu_attn_buf ab; /* attend: HCHUNK heads over up to nmax = max |S_t| entries */
} wbuf;

typedef struct actx {
    const sieve_sparse_attn_params *p;
    sieve__cpu_attn_src src; /* for sieve__cpu_attend_entries */
    const void *q, *keys, *values;
    const int32_t *idx;
    uint32_t T, Hq, Hkv, D, Dv, k, rep, G;
    uint64_t n_groups;
    size_t esz;
    float scale;
    uint32_t *sets;   /* T x k: S_t ascending in sets[t k .. t k + counts[t]) */
    uint32_t *counts; /* T: |S_t| */
    wbuf *bufs;
    uint64_t *member; /* per worker: sum |S_t| */
    uint64_t *uni;    /* per worker: sum of union sizes */
    float *out, *lse;
    atomic_uint_fast64_t next;
} actx;

/* ---------------------------------------------------------------- prepare */

/* Builds S_t of token t into c->sets and c->counts; returns |S_t|. */
static uint32_t build_set(const actx *c, uint64_t *row, uint32_t t) {
    const int32_t *r = c->idx + (size_t)t * c->k;
    const uint32_t L = c->p->n_keys;
    size_t n = 0;
    for (uint32_t i = 0; i < c->k; i++)
        if (r[i] >= 0 && (uint32_t)r[i] < L) row[n++] = (uint64_t)r[i];
    sieve__cpu_sort_u64(row, n, NULL);
    uint32_t *set = c->sets + (size_t)t * c->k;
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || (uint32_t)row[i] != set[m - 1]) set[m++] = (uint32_t)row[i];
    c->counts[t] = m;
    return m;
}

/* The size of the union of the sorted, distinct sets of tokens t0 .. t0 + nt - 1
 * (nt <= MAX_GROUP): a merge that takes the smallest head of the cursors each step. */
static uint64_t union_size(const actx *c, uint32_t t0, uint32_t nt) {
    uint32_t pos[MAX_GROUP];
    for (uint32_t i = 0; i < nt; i++) pos[i] = 0;
    uint64_t u = 0;
    for (;;) {
        int any = 0;
        uint32_t lo = 0;
        for (uint32_t i = 0; i < nt; i++) {
            const uint32_t t = t0 + i;
            if (pos[i] >= c->counts[t]) continue;
            const uint32_t v = c->sets[(size_t)t * c->k + pos[i]];
            if (!any || v < lo) lo = v;
            any = 1;
        }
        if (!any) return u;
        u++;
        for (uint32_t i = 0; i < nt; i++) {
            const uint32_t t = t0 + i;
            if (pos[i] < c->counts[t] && c->sets[(size_t)t * c->k + pos[i]] == lo) pos[i]++;
        }
    }
}

static void prepare_worker(void *vc, uint32_t worker) {
    actx *c = vc;
    wbuf *b = &c->bufs[worker];
    for (;;) {
        const uint64_t gi = atomic_fetch_add(&c->next, 1);
        if (gi >= c->n_groups) break;
        const uint32_t t0 = (uint32_t)(gi * c->G);
        const uint32_t nt = c->T - t0 < c->G ? c->T - t0 : c->G;
        for (uint32_t i = 0; i < nt; i++) c->member[worker] += build_set(c, b->row, t0 + i);
        c->uni[worker] += union_size(c, t0, nt);
    }
}

/* ---------------------------------------------------------------- attend */

static void attend_token(const actx *c, wbuf *b, uint32_t t) {
    const uint32_t n = c->counts[t];
    const uint32_t *set = c->sets + (size_t)t * c->k;
    const uint32_t Dv = c->Dv;
    if (n == 0) {
        const size_t th0 = (size_t)t * c->Hq;
        memset(c->out + th0 * Dv, 0, (size_t)c->Hq * Dv * sizeof(float));
        if (c->lse)
            for (uint32_t h = 0; h < c->Hq; h++) c->lse[th0 + h] = -INFINITY;
        return;
    }
    const uint32_t R = c->rep < HCHUNK ? c->rep : HCHUNK;
    for (uint32_t g = 0; g < c->Hkv; g++)
        for (uint32_t r0 = 0; r0 < c->rep; r0 += R) {
            const uint32_t nr = c->rep - r0 < R ? c->rep - r0 : R;
            sieve__cpu_attend_entries(&c->src, &b->ab, NULL, NULL, t, g, g * c->rep + r0, nr,
                                      set, n, n);
        }
}

static void attend_worker(void *vc, uint32_t worker) {
    actx *c = vc;
    wbuf *b = &c->bufs[worker];
    for (;;) {
        const uint64_t t = atomic_fetch_add(&c->next, 1);
        if (t >= c->T) break;
        attend_token(c, b, (uint32_t)t);
    }
}

/* ---------------------------------------------------------------- entry */


/* One aligned block of W regions of per bytes: the base of region 0 in *base, the block to
 * free in the return value (NULL: out of memory). */
static char *worker_block(size_t per, uint32_t W, char **base) {
    if (per > (SIZE_MAX / 2) / W) return NULL;
    char *mem = malloc(per * W + SIEVE__ALIGN);
    if (mem) *base = mem + (SIEVE__ALIGN - (uintptr_t)mem % SIEVE__ALIGN) % SIEVE__ALIGN;
    return mem;
}

/* The prepare phase on W workers (a row buffer each); its wall time in *ms. 0 or
 * SIEVE_ENOMEM. */
static int run_prepare(actx *c, uint32_t W, double *ms) {
    size_t per = 0, o_row;
    char *base = NULL;
    if (!sieve__cpu_region(&per, &o_row, c->k, sizeof(uint64_t))) return SIEVE_ENOMEM;
    char *mem = worker_block(per, W, &base);
    if (!mem) return SIEVE_ENOMEM;
    for (uint32_t i = 0; i < W; i++)
        c->bufs[i].row = (uint64_t *)(void *)(base + (size_t)i * per + o_row);
    const uint32_t Wp = (uint64_t)W < c->n_groups ? W : (uint32_t)c->n_groups;
    const double t0 = sieve__now_ms();
    atomic_store(&c->next, 0);
    sieve__cpu_run(Wp, prepare_worker, c);
    *ms = sieve__now_ms() - t0;
    free(mem);
    for (uint32_t i = 0; i < W; i++) c->bufs[i].row = NULL;
    return 0;
}

/* The attend phase on W workers (buffers for the largest set); its wall time in *ms. 0 or
 * SIEVE_ENOMEM. */
static int run_attend(actx *c, uint32_t W, double *ms) {
    uint32_t nmax = 0;
    for (uint32_t t = 0; t < c->T; t++)
        if (c->counts[t] > nmax) nmax = c->counts[t];
    const size_t R = c->rep < HCHUNK ? c->rep : HCHUNK;
    size_t per = 0;
    sieve__cpu_attn_layout al;
    char *base = NULL;
    if (!sieve__cpu_attn_reserve(&per, &al, R, c->D, c->Dv, nmax)) return SIEVE_ENOMEM;
    char *mem = worker_block(per, W, &base);
    if (!mem) return SIEVE_ENOMEM;
    for (uint32_t i = 0; i < W; i++)
        sieve__cpu_attn_bind(&c->bufs[i].ab, &al, base + (size_t)i * per);
    const double t0 = sieve__now_ms();
    atomic_store(&c->next, 0);
    sieve__cpu_run(W, attend_worker, c);
    *ms = sieve__now_ms() - t0;
    free(mem);
    memset(c->bufs, 0, (size_t)W * sizeof *c->bufs);
    return 0;
}

int sieve__cpu_sparse_attention(const sieve_device *dev, const sieve_sparse_attn_params *p,
                                const void *q, const void *keys, const void *values,
                                const int32_t *idx, float *out, float *lse,
                                sieve_sparse_attn_stats *stats) {
    const double t_start = sieve__now_ms();
    const uint32_t T = p->n_queries;
    uint32_t W = dev->threads ? dev->threads : 1;
    if (W > T) W = T;
    if (W > MAX_WORKERS) W = MAX_WORKERS;

    actx c;
    memset(&c, 0, sizeof c);
    c.p = p;
    c.q = q;
    c.keys = keys;
    c.values = values;
    c.idx = idx;
    c.T = T;
    c.Hq = p->q_heads;
    c.Hkv = p->kv_heads;
    c.D = p->head_dim;
    c.Dv = p->v_dim;
    c.k = p->k;
    c.rep = p->q_heads / p->kv_heads;
    c.G = p->group;
    c.n_groups = ((uint64_t)T + p->group - 1) / p->group;
    c.esz = sieve_dtype_size(p->dtype);
    c.scale = p->scale == 0.0f ? (float)(1.0 / sqrt((double)p->head_dim)) : p->scale;
    c.out = out;
    c.lse = lse;
    c.src.dtype = p->dtype;
    c.src.esz = c.esz;
    c.src.q = q;
    c.src.keys = keys;
    c.src.values = values;
    c.src.Hq = c.Hq;
    c.src.Hkv = c.Hkv;
    c.src.D = c.D;
    c.src.Dv = c.Dv;
    c.src.scale = c.scale;
    c.src.pooled_bias = 0.0f; /* no pooled entries */
    c.src.out = out;
    c.src.lse = lse;
    atomic_init(&c.next, 0);
    /* T x k positions fit: checked as idx's byte size */
    c.sets = malloc((size_t)T * p->k * sizeof *c.sets);
    c.counts = malloc((size_t)T * sizeof *c.counts);
    c.bufs = calloc(W, sizeof *c.bufs);
    c.member = calloc(W, sizeof *c.member);
    c.uni = calloc(W, sizeof *c.uni);
    int rc = SIEVE_ENOMEM;
    double ms_prepare = 0.0, ms_attend = 0.0;
    if (c.sets && c.counts && c.bufs && c.member && c.uni) {
        rc = run_prepare(&c, W, &ms_prepare);
        if (!rc) rc = run_attend(&c, W, &ms_attend);
    }
    if (!rc && stats) {
        sieve_sparse_attn_stats st;
        memset(&st, 0, sizeof st);
        st.groups = c.n_groups;
        for (uint32_t i = 0; i < W; i++) {
            st.member_entries += c.member[i];
            st.union_entries += c.uni[i];
        }
        st.ms_prepare = ms_prepare;
        st.ms_attend = ms_attend;
        st.ms_total = sieve__now_ms() - t_start;
        *stats = st;
    }
    free(c.sets);
    free(c.counts);
    free(c.bufs);
    free(c.member);
    free(c.uni);
    return rc;
}

/* sparse_attn.cu: the CUDA backend of grouped sparse attention (sieve_kernels.h, "sparse
 * attention: grouped"; LiteDSA) and of dense causal attention ("attention: dense causal").
 *
 * Owns: the union kernel (each group's deduplicated key list and its tokens' membership
 * masks), the attention kernel (flash-attention style over a gathered list, mma.sync), the
 * scratch layout and the host flow (unions -> attention -> one wait).
 * Must not: apply a causal rule (the caller's sets already are), read keys or values outside
 * the listed positions, keep state between calls.
 *
 * Unions. One CTA per group of `group` neighbouring tokens marks every listed position in a
 * bitmap in shared memory (positions taken in windows of up to 2^18, so any n_keys works;
 * only the windows between the group's least and largest position are visited),
 * counts the bits by a block scan, writes the set positions in ascending order (the union
 * list, at most min(group * k, n_keys) a group) and then ORs bit j of the slot's mask for
 * every entry of the group's token j. Entries outside [0, n_keys) are skipped and a
 * repeated entry sets the same bit again, so each token's set is exactly S_t of the
 * contract. Per-query attention is the same with group 1 (its list is its own sorted set).
 *
 * Attention. A CTA (4 warps) takes one kv head of one group and up to 64 of the group's
 * group x (q_heads / kv_heads) rows (token-major: row r is token r / R, head r % R); each
 * warp owns 16 rows (an m16 block). With fewer than 64 rows the warps of a row block split
 * the list's columns instead (2 or 4 ways), each with its own online softmax, merged at
 * the end. The list streams through shared memory 64 slots a tile (keys, values and masks;
 * a 2-stage cp.async ring; 16-byte chunks swizzled by the row so ldmatrix is free of bank
 * conflicts; slots past the list zero-filled and masked). Per tile: S = Q K^T on the
 * tensor cores (m16n8k16, float32 accumulation; Q's fragments stay in registers), scaled
 * into the log2 domain, a slot whose mask lacks the row's token bit set to -inf, the
 * running max and sum updated, P rounded to the storage dtype and P V accumulated on the
 * tensor cores. The rows' partial results go through shared memory, where all threads
 * merge the column splits and write out (and lse) with coalesced stores.
 *
 * Dense causal attention (sieve_causal_attention) is the same kernel in its causal mode: a
 * group is 64 / R consecutive tokens, its "list" every key up to its last token's position
 * (copied without a position ring), a row's mask its own position; tiles every row of the
 * CTA sees whole skip the mask; the groups of the most keys go first; the ring has 3 stages.
 * On compute capability 9.0 with head_dim = v_dim = 128 and at least a CTA of 128 rows an
 * SM, attn_wg.cuh's wgmma kernels run it instead (their causal mode, 128-key tiles by
 * default; no slices).
 *
 * Slices. Where the groups, kv heads and row chunks give fewer CTAs than two an SM (decode,
 * short prefills), each list is cut into up to 32 slices of whole tiles, one CTA each; the
 * CTAs write their rows' (max, sum, normalised outputs) to scratch and a merge kernel
 * combines the slices as flash decoding does.
 */
#include <cub/cub.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn_kernel.cuh"
#include "attn_wg.cuh"

using namespace sieve_cuda;

namespace {

constexpr int SA_WINDOW = 1 << 18;  /* positions a union pass's bitmap covers */
constexpr int SA_UNION_THREADS = 1024;

/* ---------------------------------------------------------------- unions */

struct UnionArgs {
    const int32_t *idx;
    uint32_t T, k, G, L;
    size_t cap;        /* list slots a group */
    int32_t *pos;      /* groups x cap */
    uint32_t *mask;    /* groups x cap */
    uint32_t *count;   /* groups */
    uint32_t *members; /* groups */
};

struct MinU32 {
    __device__ uint32_t operator()(uint32_t x, uint32_t y) const { return x < y ? x : y; }
};
struct MaxU32 {
    __device__ uint32_t operator()(uint32_t x, uint32_t y) const { return x > y ? x : y; }
};

__global__ void __launch_bounds__(SA_UNION_THREADS)
sa_union_kernel(UnionArgs a) {
    extern __shared__ uint32_t sa_smem[];
    using Scan = cub::BlockScan<uint32_t, SA_UNION_THREADS>;
    using Reduce = cub::BlockReduce<uint32_t, SA_UNION_THREADS>;
    __shared__ union {
        typename Scan::TempStorage scan;
        typename Reduce::TempStorage reduce;
    } tmp;
    __shared__ uint32_t s_total, s_lo, s_hi;
    const uint32_t g = blockIdx.x, tid = threadIdx.x;
    const uint32_t t0 = g * a.G;
    const uint32_t nt = a.T - t0 < a.G ? a.T - t0 : a.G;
    const size_t E = (size_t)nt * a.k;
    const int32_t *ent = a.idx + (size_t)t0 * a.k;
    int32_t *opos = a.pos + (size_t)g * a.cap;
    uint32_t *omask = a.mask + (size_t)g * a.cap;
    const uint32_t wmax = a.L < (uint32_t)SA_WINDOW ? (a.L + 31) / 32 : SA_WINDOW / 32;
    uint32_t *bm = sa_smem;         /* wmax words */
    uint32_t *pre = sa_smem + wmax; /* wmax words: exclusive prefix of the bit counts */
    uint32_t U = 0, members = 0;
    /* the windows the group's entries reach: from its least valid position to its largest */
    uint32_t lo = 0xffffffffu, hi = 0;
    for (size_t e = tid; e < E; e += SA_UNION_THREADS) {
        const int32_t p = ent[e];
        if (p >= 0 && (uint32_t)p < a.L) {
            lo = min(lo, (uint32_t)p);
            hi = max(hi, (uint32_t)p);
        }
    }
    lo = Reduce(tmp.reduce).Reduce(lo, MinU32{});
    if (tid == 0) s_lo = lo;
    __syncthreads();
    hi = Reduce(tmp.reduce).Reduce(hi, MaxU32{});
    if (tid == 0) s_hi = hi;
    __syncthreads();
    lo = s_lo;
    hi = s_hi;
    for (uint32_t base = lo / SA_WINDOW * SA_WINDOW; base < a.L && base <= hi;
         base += SA_WINDOW) {
        const uint32_t wl = a.L - base < (uint32_t)SA_WINDOW ? a.L - base : SA_WINDOW;
        const uint32_t nw = (wl + 31) / 32;
        for (uint32_t w = tid; w < nw; w += SA_UNION_THREADS) bm[w] = 0;
        __syncthreads();
        for (size_t e = tid; e < E; e += SA_UNION_THREADS) {
            const int32_t p = ent[e];
            const uint32_t r = (uint32_t)p - base;
            if (p >= 0 && (uint32_t)p >= base && r < wl) atomicOr(&bm[r >> 5], 1u << (r & 31));
        }
        __syncthreads();
        /* each thread counts a contiguous run of words, then one block scan */
        const uint32_t per = (nw + SA_UNION_THREADS - 1) / SA_UNION_THREADS;
        const uint32_t w0 = tid * per, w1 = w0 + per < nw ? w0 + per : nw;
        uint32_t mine = 0;
        for (uint32_t w = w0; w < w1; w++) mine += __popc(bm[w]);
        uint32_t before, total;
        Scan(tmp.scan).ExclusiveSum(mine, before, total);
        for (uint32_t w = w0; w < w1; w++) {
            pre[w] = before;
            uint32_t bits = bm[w];
            uint32_t o = U + before;
            before += __popc(bits);
            while (bits) {
                const uint32_t b = __ffs(bits) - 1;
                opos[o] = (int32_t)(base + w * 32 + b);
                omask[o] = 0;
                o++;
                bits &= bits - 1;
            }
        }
        __syncthreads(); /* pre, and the zeroed masks, visible to the whole block */
        for (size_t e = tid; e < E; e += SA_UNION_THREADS) {
            const int32_t p = ent[e];
            const uint32_t r = (uint32_t)p - base;
            if (!(p >= 0 && (uint32_t)p >= base && r < wl)) continue;
            const uint32_t w = r >> 5, bit = 1u << (r & 31);
            const uint32_t slot = U + pre[w] + __popc(bm[w] & (bit - 1));
            const uint32_t jb = 1u << (uint32_t)(e / a.k);
            const uint32_t old = atomicOr(&omask[slot], jb);
            if (!(old & jb)) members++;
        }
        U += total;
        __syncthreads(); /* before the next window clears the bitmap */
    }
    const uint32_t msum = Reduce(tmp.reduce).Sum(members);
    if (tid == 0) s_total = msum;
    __syncthreads();
    if (tid == 0) {
        a.count[g] = U;
        a.members[g] = s_total;
    }
}

/* ---------------------------------------------------------------- host
 * (the attention kernel, its merge and launchers: attn_kernel.cuh) */

int check_shape(const sieve__cuda_ctx *c, const sieve_sparse_attn_params *p) {
    return sa_check_shape(c, p->dtype, p->head_dim, p->v_dim, p->q_heads, p->kv_heads);
}

/* Scratch layout. SIEVE_EINVAL where a size does not fit in size_t. */
int make_plan(const sieve_sparse_attn_params *p, int sms, SaPlan *pl) {
    memset(pl, 0, sizeof *pl);
    pl->G = p->group;
    pl->groups = (p->n_queries + p->group - 1) / p->group;
    pl->R = p->q_heads / p->kv_heads;
    const char *st = getenv("SIEVE_CUDA_SA_STAGES"); /* a tuning hook; the answer is the same */
    pl->stages = st && !strcmp(st, "3") ? 3 : 2;
    const uint64_t gk = (uint64_t)p->group * p->k;
    pl->cap = (size_t)(gk < p->n_keys ? gk : p->n_keys);
    const uint64_t slots = (uint64_t)pl->groups * pl->cap;
    if (slots > (uint64_t)(SIZE_MAX / 16)) return SIEVE_EINVAL;
    /* Slices: with fewer CTAs than two an SM, each list is cut into slices of whole tiles
     * (at most 32, at least a tile each) whose partial results a merge kernel combines. */
    pl->rows = (p->n_queries < pl->G ? p->n_queries : pl->G) * pl->R;
    /* CTAs with rows: the fullest group's row chunks (a short group's extra chunks exit) */
    const uint64_t ctas = ((uint64_t)pl->rows + SA_ROWS - 1) / SA_ROWS * p->kv_heads * pl->groups;
    const uint64_t want = 2 * (uint64_t)(sms > 0 ? sms : 132);
    const uint64_t tiles = (pl->cap + SA_BN - 1) / SA_BN;
    uint64_t nsl = ctas >= want ? 1 : (want + ctas - 1) / ctas;
    if (nsl > 32) nsl = 32;
    if (nsl > tiles) nsl = tiles;
    const char *fs = getenv("SIEVE_CUDA_SA_SLICES"); /* a tuning hook; the answer is the same */
    if (fs && atoi(fs) >= 1 && atoi(fs) <= 32) nsl = (uint64_t)atoi(fs);
    pl->nsl = nsl ? (uint32_t)nsl : 1;
    size_t o = 0;
    pl->o_pos = o;
    o = sieve__align_up(o + (size_t)slots * 4, 256);
    pl->o_mask = o;
    o = sieve__align_up(o + (size_t)slots * 4, 256);
    pl->o_count = o;
    o = sieve__align_up(o + (size_t)pl->groups * 4, 256);
    pl->o_members = o;
    o = sieve__align_up(o + (size_t)pl->groups * 4, 256);
    pl->o_part = o;
    if (pl->nsl > 1) {
        const uint64_t pb = (uint64_t)pl->nsl * p->n_queries * p->q_heads * (p->v_dim + 2) * 4;
        if (pb > (uint64_t)(SIZE_MAX / 2)) return SIEVE_EINVAL;
        o = sieve__align_up(o + (size_t)pb, 256);
    }
    pl->total = o;
    return 0;
}

using Events = sieve__cuda_events<3>;

int run_queued(sieve__cuda_ctx *c, const sieve_sparse_attn_params *p, const void *q,
               const void *keys, const void *values, const int32_t *idx, void *scratch,
               size_t scratch_bytes, float *out, float *lse, sieve_sparse_attn_stats *stats) {
    const double t0 = sieve__now_ms();
    int rc = check_shape(c, p);
    if (rc) return rc;
    if (((uintptr_t)q | (uintptr_t)keys | (uintptr_t)values) & 15) return SIEVE_ENOTSUP;
    if ((uintptr_t)scratch & 255) return SIEVE_EINVAL;
    if (((uintptr_t)idx | (uintptr_t)out | (uintptr_t)lse) & 3) return SIEVE_EINVAL;
    SaPlan pl;
    rc = make_plan(p, c->prop.multiProcessorCount, &pl);
    if (rc) return rc;
    SIEVE_CUDA_TRY(cudaSetDevice(c->ordinal));
    unsigned char *base = nullptr;
    rc = sieve__cuda_scratch(c, scratch, scratch_bytes, pl.total, &base);
    if (rc) return rc;
    Events ev;
    rc = ev.create();
    if (rc) return rc;
    cudaStream_t s = c->stream;
    int32_t *d_pos = (int32_t *)(base + pl.o_pos);
    uint32_t *d_mask = (uint32_t *)(base + pl.o_mask);
    uint32_t *d_count = (uint32_t *)(base + pl.o_count);
    uint32_t *d_members = (uint32_t *)(base + pl.o_members);

    SIEVE_CUDA_TRY(cudaEventRecord(ev.e[0], s));
    UnionArgs ua{idx, p->n_queries, p->k, pl.G, p->n_keys, pl.cap, d_pos, d_mask, d_count,
                 d_members};
    const uint32_t wmax = p->n_keys < (uint32_t)SA_WINDOW ? (p->n_keys + 31) / 32 : SA_WINDOW / 32;
    const int ubytes = (int)(wmax * 2 * 4);
    SIEVE_CUDA_TRY(cudaFuncSetAttribute(sa_union_kernel,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, ubytes));
    sa_union_kernel<<<pl.groups, SA_UNION_THREADS, ubytes, s>>>(ua);
    SIEVE_CUDA_LAUNCH_CHECK();
    SIEVE_CUDA_TRY(cudaEventRecord(ev.e[1], s));

    const float scale = p->scale != 0.f ? p->scale : 1.f / sqrtf((float)p->head_dim);
    AttnArgs aa{q, keys, values, d_pos, d_mask, d_count, pl.cap, p->n_queries, p->q_heads,
                p->kv_heads, pl.R, pl.G, 0, (float)((double)scale * 1.4426950408889634),
                out, lse, pl.nsl, (float *)(base + pl.o_part), p->n_keys, 0, pl.groups};
    rc = attend<SA_LIST>(aa, pl, p->dtype, p->head_dim, p->v_dim, s);
    if (rc) return rc;
    SIEVE_CUDA_TRY(cudaEventRecord(ev.e[2], s));
    SIEVE_CUDA_TRY(cudaStreamSynchronize(s));
    if (stats) {
        sieve_sparse_attn_stats st;
        memset(&st, 0, sizeof st);
        st.groups = pl.groups;
        uint32_t *h = (uint32_t *)malloc((size_t)pl.groups * 8);
        if (!h) return SIEVE_ENOMEM;
        cudaError_t e = cudaMemcpy(h, d_count, (size_t)pl.groups * 4, cudaMemcpyDeviceToHost);
        if (e == cudaSuccess)
            e = cudaMemcpy(h + pl.groups, d_members, (size_t)pl.groups * 4,
                           cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) {
            free(h);
            return sieve__cuda_fail(e, "cudaMemcpy", __FILE__, __LINE__);
        }
        for (uint32_t i = 0; i < pl.groups; i++) {
            st.union_entries += h[i];
            st.member_entries += h[pl.groups + i];
        }
        free(h);
        st.ms_prepare = ev.ms(0, 1);
        st.ms_attend = ev.ms(1, 2);
        st.ms_total = sieve__now_ms() - t0;
        *stats = st;
    }
    return 0;
}

/* ---- dense causal attention: the same kernel over contiguous keys */

int check_causal_shape(const sieve__cuda_ctx *c, const sieve_attn_params *p) {
    return sa_check_shape(c, p->dtype, p->head_dim, p->v_dim, p->q_heads, p->kv_heads);
}

/* A group is 64 / R consecutive tokens (one CTA's rows; R > 64: one token over several
 * CTAs); slices where the CTAs are fewer than two an SM. */
int make_causal_plan(const sieve_attn_params *p, int sms, SaPlan *pl) {
    memset(pl, 0, sizeof *pl);
    pl->R = p->q_heads / p->kv_heads;
    pl->G = pl->R <= (uint32_t)SA_ROWS ? (uint32_t)SA_ROWS / pl->R : 1;
    pl->groups = (p->n_queries + pl->G - 1) / pl->G;
    /* 3 stages (2 CTAs an SM): 5% faster than 2 at 32K-128K tokens (call 8); a tuning hook */
    const char *st = getenv("SIEVE_CUDA_SA_STAGES");
    pl->stages = st && !strcmp(st, "2") ? 2 : 3;
    pl->rows = (p->n_queries < pl->G ? p->n_queries : pl->G) * pl->R;
    /* CTAs with rows: the fullest group's row chunks (a short group's extra chunks exit) */
    const uint64_t ctas = ((uint64_t)pl->rows + SA_ROWS - 1) / SA_ROWS * p->kv_heads * pl->groups;
    const uint64_t want = 2 * (uint64_t)(sms > 0 ? sms : 132);
    const uint64_t last = (uint64_t)p->pos0 + p->n_queries;
    const uint64_t longest = last < p->n_keys ? last : p->n_keys;
    const uint64_t tiles = (longest + SA_BN - 1) / SA_BN;
    uint64_t nsl = ctas >= want ? 1 : (want + ctas - 1) / ctas;
    if (nsl > 32) nsl = 32;
    if (nsl > tiles) nsl = tiles;
    pl->nsl = nsl ? (uint32_t)nsl : 1;
    pl->o_part = 0;
    pl->total = 0;
    if (pl->nsl > 1) {
        const uint64_t pb = (uint64_t)pl->nsl * p->n_queries * p->q_heads * (p->v_dim + 2) * 4;
        if (pb > (uint64_t)(SIZE_MAX / 2)) return SIEVE_EINVAL;
        pl->total = sieve__align_up((size_t)pb, 256);
    }
    return 0;
}

int run_causal_queued(sieve__cuda_ctx *c, const sieve_attn_params *p, const void *q,
                      const void *keys, const void *values, void *scratch, size_t scratch_bytes,
                      float *out, float *lse, double *ms) {
    int rc = check_causal_shape(c, p);
    if (rc) return rc;
    if (((uintptr_t)q | (uintptr_t)keys | (uintptr_t)values) & 15) return SIEVE_ENOTSUP;
    if ((uintptr_t)scratch & 255) return SIEVE_EINVAL;
    if (((uintptr_t)out | (uintptr_t)lse) & 3) return SIEVE_EINVAL;
    SaPlan pl;
    rc = make_causal_plan(p, c->prop.multiProcessorCount, &pl);
    if (rc) return rc;
    SIEVE_CUDA_TRY(cudaSetDevice(c->ordinal));
    unsigned char *base = nullptr; /* the slices' partial results (none: total 0) */
    rc = sieve__cuda_scratch(c, scratch, scratch_bytes, pl.total, &base);
    if (rc) return rc;
    Events ev;
    rc = ev.create();
    if (rc) return rc;
    cudaStream_t s = c->stream;
    SIEVE_CUDA_TRY(cudaEventRecord(ev.e[0], s));
    const float scale = p->scale != 0.f ? p->scale : 1.f / sqrtf((float)p->head_dim);
    AttnArgs aa{q, keys, values, nullptr, nullptr, nullptr, 0, p->n_queries, p->q_heads,
                p->kv_heads, pl.R, pl.G, 0, (float)((double)scale * 1.4426950408889634),
                out, lse, pl.nsl, pl.nsl > 1 ? (float *)(base + pl.o_part) : nullptr,
                p->n_keys, p->pos0, pl.groups};
    /* the Hopper kernel where it runs (attn_wg.cuh), CTAs of 128 rows */
    const uint64_t chunks = ((uint64_t)p->n_queries * pl.R + WG_ROWS - 1) / WG_ROWS;
    if (chunks <= 0x7fffffffu &&
        wg_choose(c, p->head_dim, p->v_dim, chunks * p->kv_heads, out))
        rc = launch_wg<SA_CAUSAL>(aa, p->dtype, (uint32_t)chunks, s);
    else
        rc = attend<SA_CAUSAL>(aa, pl, p->dtype, p->head_dim, p->v_dim, s);
    if (rc) return rc;
    SIEVE_CUDA_TRY(cudaEventRecord(ev.e[1], s));
    SIEVE_CUDA_TRY(cudaStreamSynchronize(s));
    if (ms) *ms = ev.ms(0, 1);
    return 0;
}

} // namespace

extern "C" int sieve__cuda_causal_attn_scratch_size(void *ctx, const sieve_attn_params *p,
                                                    size_t *bytes) {
    const sieve__cuda_ctx *c = (const sieve__cuda_ctx *)ctx;
    int rc = check_causal_shape(c, p);
    if (rc) return rc;
    SaPlan pl;
    rc = make_causal_plan(p, c ? c->prop.multiProcessorCount : 0, &pl);
    if (rc) return rc;
    *bytes = pl.total;
    return 0;
}

extern "C" int sieve__cuda_causal_attention(void *ctx, const sieve_attn_params *p, const void *q,
                                            const void *keys, const void *values, void *scratch,
                                            size_t scratch_bytes, float *out, float *lse,
                                            double *ms) {
    sieve__cuda_ctx *c = (sieve__cuda_ctx *)ctx;
    const int rc = run_causal_queued(c, p, q, keys, values, scratch, scratch_bytes, out, lse, ms);
    return sieve__cuda_settle(c, rc);
}

extern "C" int sieve__cuda_sparse_attn_scratch_size(void *ctx, const sieve_sparse_attn_params *p,
                                                    size_t *bytes) {
    int rc = check_shape((const sieve__cuda_ctx *)ctx, p);
    if (rc) return rc;
    SaPlan pl;
    const sieve__cuda_ctx *c = (const sieve__cuda_ctx *)ctx;
    rc = make_plan(p, c ? c->prop.multiProcessorCount : 0, &pl);
    if (rc) return rc;
    *bytes = pl.total;
    return 0;
}

extern "C" int sieve__cuda_sparse_attention(void *ctx, const sieve_sparse_attn_params *p,
                                            const void *q, const void *keys, const void *values,
                                            const int32_t *idx, void *scratch,
                                            size_t scratch_bytes, float *out, float *lse,
                                            sieve_sparse_attn_stats *stats) {
    sieve__cuda_ctx *c = (sieve__cuda_ctx *)ctx;
    const int rc = run_queued(c, p, q, keys, values, idx, scratch, scratch_bytes, out, lse,
                              stats);
    return sieve__cuda_settle(c, rc);
}

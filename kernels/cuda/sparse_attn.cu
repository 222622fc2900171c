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

#include "cuda_common.cuh"
#include "prims.cuh"

using namespace sieve_cuda;

namespace {

constexpr int SA_WINDOW = 1 << 18;  /* positions a union pass's bitmap covers */
constexpr int SA_UNION_THREADS = 1024;
constexpr int SA_BN = 64;           /* list slots a tile */
constexpr int SA_THREADS = 128;     /* 4 warps */
constexpr int SA_ROWS = 64;         /* rows a CTA */
constexpr unsigned SA_GRID_Z_MAX = 65535;
constexpr uint32_t SA_MAX_R = 4096; /* query heads a kv head (a group's rows fit 32 bits) */

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

/* ---------------------------------------------------------------- attention */

struct AttnArgs {
    const void *q, *keys, *values;
    const int32_t *pos;
    const uint32_t *mask;
    const uint32_t *count;
    size_t cap;
    uint32_t T, Hq, Hkv, R, G;
    uint32_t group0;   /* first group of this launch */
    float scale_log2;  /* scale * log2(e) */
    float *out, *lse;
    uint32_t nsl;      /* slices of each list (CTAs sharing one list's tiles) */
    float *part;       /* nsl > 1: nsl x T x Hq rows of (max, sum, DV outputs) */
    /* dense causal mode: the "list" of a group is keys 0 .. min(L, pos0 + last token + 1) - 1
     * and a token sees the keys at or before its position */
    uint32_t L, pos0, ngroups;
};

template <typename E> struct MmaOps;
template <> struct MmaOps<__nv_bfloat16> {
    static __device__ inline uint32_t pack(float lo, float hi) {
        __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&v);
    }
    static __device__ inline void mma(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};
template <> struct MmaOps<__half> {
    static __device__ inline uint32_t pack(float lo, float hi) {
        __half2 v = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&v);
    }
    static __device__ inline void mma(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};

__device__ inline void ldsm_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2,
                               uint32_t &r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}
__device__ inline void ldsm_x4_t(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2,
                                 uint32_t &r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}
/* 2^x by the special function unit (ex2.approx: relative error about 2^-22; 2^-inf = 0). */
__device__ inline float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
__device__ inline void cp_async4(void *smem, const void *gmem, int src_bytes) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem),
                 "r"(src_bytes));
}

/* Byte offset of 16-byte chunk c of row n in a tile of rows of W elements (2 bytes each),
 * the chunk swizzled by the row's low three bits. */
template <int W>
__device__ inline uint32_t sw_off(uint32_t n, uint32_t c) {
    return n * (W * 2) + ((c ^ (n & 7)) << 4);
}

template <int D, int DV, int ST>
struct AttnSmem {
    static constexpr int K_BYTES = SA_BN * D * 2;
    static constexpr int V_BYTES = SA_BN * DV * 2;
    static constexpr int STAGE = K_BYTES + V_BYTES + SA_BN * 4; /* keys, values, masks */
    static constexpr int POS = 2 * ST * SA_BN * 4;              /* the positions' ring */
    static constexpr int RING = ST * STAGE + POS;
    /* the merge after the loop reuses the ring: per warp 16 rows of m, l and DV outputs */
    static constexpr int MERGE = 4 * 16 * (DV + 2) * 4;
    static constexpr int BYTES = RING > MERGE ? RING : MERGE;
};

/* The attention kernel. NSPLIT: warps sharing a row block (4, 2 or 1: the CTA's rows fit
 * one, two or more m16 blocks); ST: stages of the ring (tiles in flight).
 * Pipeline: group j of cp.async copies brings tile j's keys, values and masks and the list
 * positions of tile j + ST - 1 (a ring of 2 ST position slots), so a tile's row addresses
 * are in shared memory ST - 1 tiles before its copies are issued, and no thread waits on a
 * global load of a position before issuing a copy. */
template <typename E, int D, int DV, int NSPLIT, int ST, bool CAUSAL>
__global__ void __launch_bounds__(SA_THREADS, ST == 2 ? 3 : 2) /* what shared memory allows */
sa_attn_kernel(AttnArgs a) {
    using Ops = MmaOps<E>;
    using SM = AttnSmem<D, DV, ST>;
    constexpr int NCOL = SA_BN / NSPLIT; /* slots of a tile a warp scores */
    constexpr int NT = NCOL / 8;         /* its n8 tiles */
    extern __shared__ __align__(128) unsigned char sa_attn_smem[];
    const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    /* causal: the groups of the most keys first (the last tokens), so the short ones fill
     * the tail of the grid */
    const uint32_t g = CAUSAL ? a.ngroups - 1 - (a.group0 + blockIdx.z) : a.group0 + blockIdx.z;
    const uint32_t kvh = blockIdx.y;
    /* the group's rows: its tokens (fewer than G in the last group) x R */
    const uint32_t tokens = a.T - g * a.G < a.G ? a.T - g * a.G : a.G;
    const uint32_t rows_total = tokens * a.R;
    const uint32_t slice = blockIdx.x % a.nsl;
    const uint32_t row0 = blockIdx.x / a.nsl * SA_ROWS;
    if (row0 >= rows_total) return; /* a row chunk past a short group: nothing to compute */
    const uint32_t nrows = rows_total - row0 < (uint32_t)SA_ROWS ? rows_total - row0 : SA_ROWS;
    const uint32_t nblk = (nrows + 15) / 16;
    const uint32_t blk = warp / NSPLIT, split = warp % NSPLIT;
    const bool active = blk < nblk;
    uint32_t U;
    if (CAUSAL) {
        const uint32_t tl = (g + 1) * a.G < a.T ? (g + 1) * a.G : a.T; /* past the last token */
        const uint64_t v = (uint64_t)a.pos0 + tl;
        U = v < a.L ? (uint32_t)v : a.L;
    } else {
        U = a.count[g];
    }
    /* causal: the position of the CTA's first token, the least of its rows' */
    const int64_t cta_pos = (int64_t)a.pos0 + (int64_t)g * a.G + row0 / a.R;
    const int32_t *lpos = CAUSAL ? nullptr : a.pos + (size_t)g * a.cap;
    const uint32_t *lmask = CAUSAL ? nullptr : a.mask + (size_t)g * a.cap;
    int32_t *posr = (int32_t *)(sa_attn_smem + ST * SM::STAGE); /* 2 ST x SA_BN */

    /* this thread's two rows (gq and gq + 8 of the warp's block) */
    const uint32_t gq = lane >> 2, tq = lane & 3;
    uint32_t rowbit[2];
    int64_t rowpos[2]; /* causal: the row's position (keys up to it are visible), -1 none */
    const E *qrow[2];
    for (int i = 0; i < 2; i++) {
        const uint32_t r = row0 + blk * 16 + gq + 8 * i; /* row within the group */
        const uint32_t j = r / a.R, hr = r % a.R;
        const uint32_t t = g * a.G + j;
        const bool ok = active && r < rows_total && t < a.T;
        rowbit[i] = ok && j < 32 ? 1u << j : 0u; /* (causal groups may hold 64 tokens) */
        rowpos[i] = ok ? (int64_t)a.pos0 + t : -1;
        qrow[i] = ok ? (const E *)a.q + ((size_t)t * a.Hq + kvh * a.R + hr) * D : nullptr;
    }
    /* Q fragments (A operand, 16 x D): four registers a k-step */
    uint32_t qf[D / 16][4];
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++) {
        const uint32_t c0 = ks * 16 + 2 * tq;
        qf[ks][0] = qrow[0] ? *(const uint32_t *)(qrow[0] + c0) : 0u;
        qf[ks][1] = qrow[1] ? *(const uint32_t *)(qrow[1] + c0) : 0u;
        qf[ks][2] = qrow[0] ? *(const uint32_t *)(qrow[0] + c0 + 8) : 0u;
        qf[ks][3] = qrow[1] ? *(const uint32_t *)(qrow[1] + c0 + 8) : 0u;
    }

    const size_t kstride = (size_t)a.Hkv * D, vstride = (size_t)a.Hkv * DV;
    const E *kbase = (const E *)a.keys + (size_t)kvh * D;
    const E *vbase = (const E *)a.values + (size_t)kvh * DV;
    /* this CTA's tiles of the list: [tb, te) */
    const uint32_t ntiles = (U + SA_BN - 1) / SA_BN;
    const uint32_t per = (ntiles + a.nsl - 1) / a.nsl;
    const uint32_t tb = slice * per < ntiles ? slice * per : ntiles;
    const uint32_t te = tb + per < ntiles ? tb + per : ntiles;
    /* the list positions of tile j into their ring slot (slots past the list: 0) */
    auto load_pos = [&](uint32_t j) {
        if (!CAUSAL && tid < (uint32_t)SA_BN) {
            const uint32_t s = j * SA_BN + tid;
            const bool ok = s < U;
            cp_async4(posr + (j % (2 * ST)) * SA_BN + tid, ok ? lpos + s : lpos, ok ? 4 : 0);
        }
    };
    /* tile j's keys, values and masks into stage j % ST, from the positions in the ring */
    auto load_tile = [&](uint32_t j) {
        unsigned char *st = sa_attn_smem + (j % ST) * SM::STAGE;
        const int32_t *pr = posr + (j % (2 * ST)) * SA_BN;
        const uint32_t s0 = j * SA_BN;
        constexpr int KC = D / 8, VC = DV / 8;
#pragma unroll
        for (int x = 0; x < SA_BN * KC / SA_THREADS; x++) {
            const uint32_t i = tid + x * SA_THREADS, n = i / KC, c = i % KC;
            const bool ok = s0 + n < U;
            const size_t ps = CAUSAL ? s0 + n : (size_t)pr[n];
            const E *src = ok ? kbase + ps * kstride + c * 8 : kbase;
            cp_async16(st + sw_off<D>(n, c), src, ok ? 16 : 0);
        }
#pragma unroll
        for (int x = 0; x < SA_BN * VC / SA_THREADS; x++) {
            const uint32_t i = tid + x * SA_THREADS, n = i / VC, c = i % VC;
            const bool ok = s0 + n < U;
            const size_t ps = CAUSAL ? s0 + n : (size_t)pr[n];
            const E *src = ok ? vbase + ps * vstride + c * 8 : vbase;
            cp_async16(st + SM::K_BYTES + sw_off<DV>(n, c), src, ok ? 16 : 0);
        }
        if (!CAUSAL && tid < (uint32_t)SA_BN) {
            const uint32_t s = s0 + tid;
            const bool ok = s < U;
            cp_async4(st + SM::K_BYTES + SM::V_BYTES + tid * 4, ok ? lmask + s : lmask,
                      ok ? 4 : 0);
        }
    };

    float o[DV / 8][4];
#pragma unroll
    for (int j = 0; j < DV / 8; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    const uint32_t col0 = split * NCOL;

    /* prologue: positions of tiles 0 .. ST - 2, then groups 0 .. ST - 2 */
    for (uint32_t j = tb; j + 1 < tb + ST; j++) load_pos(j);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    for (uint32_t j = tb; j + 1 < tb + ST; j++) {
        if (j < te) load_tile(j);
        load_pos(j + ST - 1);
        cp_async_commit();
    }
    for (uint32_t it = tb; it < te; it++) {
        cp_async_wait<ST - 2>(); /* group it: tile it, positions of tile it + ST - 1 */
        __syncthreads();         /* ... visible to all; stage (it - 1) % ST free */
        {
            const uint32_t j = it + ST - 1;
            if (j < te) load_tile(j);
            load_pos(j + ST - 1);
            cp_async_commit();
        }
        const unsigned char *st = sa_attn_smem + (it % ST) * SM::STAGE;
        const uint32_t kS = smem_u32(st), vS = smem_u32(st + SM::K_BYTES);
        const uint32_t *mS = (const uint32_t *)(st + SM::K_BYTES + SM::V_BYTES);
        if (active) {
            float s[NT][4];
#pragma unroll
            for (int j = 0; j < NT; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
            for (int ks = 0; ks < D / 16; ks += 2) {
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    const uint32_t n = col0 + j * 8 + (lane & 7);
                    uint32_t b0, b1, b2, b3;
                    ldsm_x4(kS + sw_off<D>(n, ks * 2 + (lane >> 3)), b0, b1, b2, b3);
                    Ops::mma(s[j], qf[ks], b0, b1);
                    Ops::mma(s[j], qf[ks + 1], b2, b3);
                }
            }
            /* scale, mask, running max */
            float mx[2] = {m[0], m[1]};
            /* causal: a tile every row of the CTA sees whole needs no mask */
            const bool open = CAUSAL && (int64_t)(it + 1) * SA_BN <= (int64_t)U &&
                              (int64_t)(it + 1) * SA_BN - 1 <= cta_pos;
#pragma unroll
            for (int j = 0; j < NT; j++) {
                const uint32_t c = col0 + j * 8 + 2 * tq;
                bool in0[2], in1[2];
                if (open) {
                    in0[0] = in0[1] = in1[0] = in1[1] = true;
                } else if (CAUSAL) {
                    /* a key is visible to the row at or before its position (and in range) */
                    const int64_t kp = (int64_t)it * SA_BN + c;
#pragma unroll
                    for (int i = 0; i < 2; i++) {
                        in0[i] = kp <= rowpos[i] && kp < (int64_t)U;
                        in1[i] = kp + 1 <= rowpos[i] && kp + 1 < (int64_t)U;
                    }
                } else {
                    const uint32_t mk0 = mS[c], mk1 = mS[c + 1];
#pragma unroll
                    for (int i = 0; i < 2; i++) {
                        in0[i] = (mk0 & rowbit[i]) != 0;
                        in1[i] = (mk1 & rowbit[i]) != 0;
                    }
                }
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    s[j][2 * i] = in0[i] ? s[j][2 * i] * a.scale_log2 : -INFINITY;
                    s[j][2 * i + 1] = in1[i] ? s[j][2 * i + 1] * a.scale_log2 : -INFINITY;
                    mx[i] = fmaxf(mx[i], fmaxf(s[j][2 * i], s[j][2 * i + 1]));
                }
            }
            float corr[2], base[2];
#pragma unroll
            for (int i = 0; i < 2; i++) {
                mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
                mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
                base[i] = mx[i] == -INFINITY ? 0.f : mx[i];
                corr[i] = fast_exp2(m[i] - base[i]); /* m = -inf: 0 */
                m[i] = mx[i];
                l[i] *= corr[i];
            }
#pragma unroll
            for (int j = 0; j < DV / 8; j++) {
                o[j][0] *= corr[0];
                o[j][1] *= corr[0];
                o[j][2] *= corr[1];
                o[j][3] *= corr[1];
            }
            /* P = 2^(s - max), rounded to E for P V; l sums the float32 P */
#pragma unroll
            for (int j = 0; j < NT; j += 2) {
                uint32_t pa[4];
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const float p0 = fast_exp2(s[j + h][0] - base[0]);
                    const float p1 = fast_exp2(s[j + h][1] - base[0]);
                    const float p2 = fast_exp2(s[j + h][2] - base[1]);
                    const float p3 = fast_exp2(s[j + h][3] - base[1]);
                    l[0] += p0 + p1;
                    l[1] += p2 + p3;
                    pa[2 * h] = Ops::pack(p0, p1);
                    pa[2 * h + 1] = Ops::pack(p2, p3);
                }
                /* A fragment: pa[0] (row gq, k 0-7), pa[1] (gq + 8), pa[2] (gq, k 8-15), pa[3] */
                const uint32_t p0 = col0 + j * 8; /* the slots of this k-step */
#pragma unroll
                for (int nv = 0; nv < DV / 8; nv += 2) {
                    const uint32_t mi = lane >> 3;
                    const uint32_t prow = p0 + (lane & 7) + (mi & 1) * 8;
                    uint32_t b0, b1, b2, b3;
                    ldsm_x4_t(vS + sw_off<DV>(prow, nv + (mi >> 1)), b0, b1, b2, b3);
                    Ops::mma(o[nv], pa, b0, b1);
                    Ops::mma(o[nv + 1], pa, b2, b3);
                }
            }
        }
    }
    cp_async_wait<0>();
    __syncthreads();

    /* merge: each warp leaves its rows' m, l (summed over the quad) and outputs */
    float *mg = (float *)sa_attn_smem;
    float *wm = mg + warp * 16 * (DV + 2);
    if (active) {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
            l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
        }
        if (tq == 0) {
            wm[gq * (DV + 2)] = m[0];
            wm[gq * (DV + 2) + 1] = l[0];
            wm[(gq + 8) * (DV + 2)] = m[1];
            wm[(gq + 8) * (DV + 2) + 1] = l[1];
        }
#pragma unroll
        for (int j = 0; j < DV / 8; j++) {
            const uint32_t c = j * 8 + 2 * tq;
            wm[gq * (DV + 2) + 2 + c] = o[j][0];
            wm[gq * (DV + 2) + 2 + c + 1] = o[j][1];
            wm[(gq + 8) * (DV + 2) + 2 + c] = o[j][2];
            wm[(gq + 8) * (DV + 2) + 2 + c + 1] = o[j][3];
        }
    }
    __syncthreads();
    /* every thread: rows of the CTA in turn, columns across the threads */
    for (uint32_t rr = 0; rr < nrows; rr++) {
        const uint32_t r = row0 + rr;
        const uint32_t j = r / a.R, hr = r % a.R, t = g * a.G + j;
        if (t >= a.T) continue;
        const uint32_t b = rr / 16, ri = rr % 16;
        const float *wr[NSPLIT];
        float M = -INFINITY;
#pragma unroll
        for (int sp = 0; sp < NSPLIT; sp++) {
            wr[sp] = mg + (b * NSPLIT + sp) * 16 * (DV + 2) + ri * (DV + 2);
            M = fmaxf(M, wr[sp][0]);
        }
        const float Mb = M == -INFINITY ? 0.f : M;
        float Ls = 0.f, wgt[NSPLIT];
#pragma unroll
        for (int sp = 0; sp < NSPLIT; sp++) {
            wgt[sp] = fast_exp2(wr[sp][0] - Mb);
            Ls += wgt[sp] * wr[sp][1];
        }
        const size_t orow = (size_t)t * a.Hq + kvh * a.R + hr;
        const float inv = Ls > 0.f ? 1.f / Ls : 0.f;
        /* one slice: the answer; several: this slice's (max, sum, outputs) for the merge */
        float *dst = a.out + orow * DV;
        if (a.nsl > 1) {
            float *pr = a.part + ((size_t)slice * a.T * a.Hq + orow) * (DV + 2);
            if (tid == 0) {
                pr[0] = M;
                pr[1] = Ls;
            }
            dst = pr + 2;
        }
        for (uint32_t c = tid; c < (uint32_t)DV; c += SA_THREADS) {
            float acc = 0.f;
#pragma unroll
            for (int sp = 0; sp < NSPLIT; sp++) acc += wgt[sp] * wr[sp][2 + c];
            dst[c] = acc * inv;
        }
        if (a.nsl == 1 && a.lse && tid == 0)
            a.lse[orow] = Ls > 0.f ? (M + log2f(Ls)) * 0.69314718055994531f : -INFINITY;
    }
}

/* Merges the slices of each row: out = sum of 2^(m_s - M) l_s o_s over sum of 2^(m_s - M) l_s
 * (o_s normalised by its own sum), lse from M and the total. One thread a (row, column). */
__global__ void __launch_bounds__(256)
sa_merge_kernel(const float *part, uint32_t nsl, size_t rows, uint32_t DV, float *out, float *lse) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * DV) return;
    const size_t r = i / DV;
    const uint32_t c = (uint32_t)(i % DV);
    const size_t stride = rows * (DV + 2);
    const float *p0 = part + r * (DV + 2);
    float M = -INFINITY;
    for (uint32_t s = 0; s < nsl; s++) M = fmaxf(M, p0[s * stride]);
    const float Mb = M == -INFINITY ? 0.f : M;
    float L = 0.f, acc = 0.f;
    for (uint32_t s = 0; s < nsl; s++) {
        const float *ps = p0 + s * stride;
        const float w = fast_exp2(ps[0] - Mb) * ps[1];
        L += w;
        acc += w * ps[2 + c];
    }
    out[i] = L > 0.f ? acc / L : 0.f;
    if (lse && c == 0) lse[r] = L > 0.f ? (M + log2f(L)) * 0.69314718055994531f : -INFINITY;
}

/* ---------------------------------------------------------------- host */

struct SaPlan {
    uint32_t G, groups, R;
    uint32_t nsl;      /* slices a list: more CTAs where the groups and kv heads are few */
    uint32_t rows;     /* rows of the fullest CTA: min(group, n_queries) x R, at most 64 */
    int stages;        /* of the attention kernel's ring: lists 2 (3 with SIEVE_CUDA_SA_STAGES=3),
                          causal 3 (2 with SIEVE_CUDA_SA_STAGES=2) */
    size_t cap;
    size_t o_pos, o_mask, o_count, o_members, o_part, total;
};

int check_shape(const sieve__cuda_ctx *c, const sieve_sparse_attn_params *p) {
    if (p->dtype != SIEVE_DTYPE_F16 && p->dtype != SIEVE_DTYPE_BF16) return SIEVE_ENOTSUP;
    if ((p->head_dim != 64 && p->head_dim != 128) || (p->v_dim != 64 && p->v_dim != 128))
        return SIEVE_ENOTSUP;
    if (p->kv_heads > 65535) return SIEVE_ENOTSUP; /* the grid's y */
    if (p->q_heads / p->kv_heads > SA_MAX_R) return SIEVE_ENOTSUP; /* rows a group */
    if (c && c->prop.major < 9) return SIEVE_ENOTSUP;
    return 0;
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

template <typename E, int D, int DV, int NSPLIT, int ST, bool CAUSAL>
int launch_attn(const AttnArgs &base, const SaPlan &pl, cudaStream_t s) {
    constexpr int bytes = AttnSmem<D, DV, ST>::BYTES;
    auto kern = sa_attn_kernel<E, D, DV, NSPLIT, ST, CAUSAL>;
    SIEVE_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    const unsigned chunks = (pl.G * pl.R + SA_ROWS - 1) / SA_ROWS;
    for (uint32_t g0 = 0; g0 < pl.groups; g0 += SA_GRID_Z_MAX) {
        AttnArgs a = base;
        a.group0 = g0;
        const unsigned nz = pl.groups - g0 < SA_GRID_Z_MAX ? pl.groups - g0 : SA_GRID_Z_MAX;
        kern<<<dim3(chunks * pl.nsl, a.Hkv, nz), SA_THREADS, bytes, s>>>(a);
        SIEVE_CUDA_LAUNCH_CHECK();
    }
    return 0;
}

/* The column split by the rows a CTA holds: up to 16 rows four warps share one m16 block,
 * up to 32 two warps each of two blocks, else each warp its own block. */
template <typename E, int D, int DV, bool CAUSAL>
int launch_attn_split(const AttnArgs &a, const SaPlan &pl, cudaStream_t s) {
    /* the split fits the fullest CTA (with fewer tokens than a group: the only one) */
    const uint32_t rows = pl.rows;
    if (pl.stages == 3) {
        if (rows <= 16) return launch_attn<E, D, DV, 4, 3, CAUSAL>(a, pl, s);
        if (rows <= 32) return launch_attn<E, D, DV, 2, 3, CAUSAL>(a, pl, s);
        return launch_attn<E, D, DV, 1, 3, CAUSAL>(a, pl, s);
    }
    if (rows <= 16) return launch_attn<E, D, DV, 4, 2, CAUSAL>(a, pl, s);
    if (rows <= 32) return launch_attn<E, D, DV, 2, 2, CAUSAL>(a, pl, s);
    return launch_attn<E, D, DV, 1, 2, CAUSAL>(a, pl, s);
}

template <typename E, bool CAUSAL>
int launch_attn_dims(const AttnArgs &a, const SaPlan &pl, uint32_t D, uint32_t DV,
                     cudaStream_t s) {
    if (D == 64 && DV == 64) return launch_attn_split<E, 64, 64, CAUSAL>(a, pl, s);
    if (D == 64 && DV == 128) return launch_attn_split<E, 64, 128, CAUSAL>(a, pl, s);
    if (D == 128 && DV == 64) return launch_attn_split<E, 128, 64, CAUSAL>(a, pl, s);
    return launch_attn_split<E, 128, 128, CAUSAL>(a, pl, s);
}

/* The attention launches of one call and, with slices, the merge. 0 or SIEVE_EDEVICE. */
template <bool CAUSAL>
int attend(const AttnArgs &aa, const SaPlan &pl, sieve_dtype dtype, uint32_t D, uint32_t DV,
           cudaStream_t s) {
    const int rc = dtype == SIEVE_DTYPE_BF16
                       ? launch_attn_dims<__nv_bfloat16, CAUSAL>(aa, pl, D, DV, s)
                       : launch_attn_dims<__half, CAUSAL>(aa, pl, D, DV, s);
    if (rc) return rc;
    if (pl.nsl > 1) {
        const size_t rows = (size_t)aa.T * aa.Hq, n = rows * DV;
        sa_merge_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(aa.part, pl.nsl, rows, DV,
                                                                    aa.out, aa.lse);
        SIEVE_CUDA_LAUNCH_CHECK();
    }
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
    unsigned char *base = (unsigned char *)scratch;
    if (!base) {
        rc = sieve__cuda_ensure_work(c, pl.total);
        if (rc) return rc;
        base = (unsigned char *)c->work;
    } else if (scratch_bytes < pl.total) {
        return SIEVE_ENOSPC;
    }
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
    rc = attend<false>(aa, pl, p->dtype, p->head_dim, p->v_dim, s);
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
    if (p->dtype != SIEVE_DTYPE_F16 && p->dtype != SIEVE_DTYPE_BF16) return SIEVE_ENOTSUP;
    if ((p->head_dim != 64 && p->head_dim != 128) || (p->v_dim != 64 && p->v_dim != 128))
        return SIEVE_ENOTSUP;
    if (p->kv_heads > 65535) return SIEVE_ENOTSUP;
    if (p->q_heads / p->kv_heads > SA_MAX_R) return SIEVE_ENOTSUP; /* rows a group */
    if (c && c->prop.major < 9) return SIEVE_ENOTSUP;
    return 0;
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
    unsigned char *base = (unsigned char *)scratch;
    if (pl.total) {
        if (!base) {
            rc = sieve__cuda_ensure_work(c, pl.total);
            if (rc) return rc;
            base = (unsigned char *)c->work;
        } else if (scratch_bytes < pl.total) {
            return SIEVE_ENOSPC;
        }
    }
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
    rc = attend<true>(aa, pl, p->dtype, p->head_dim, p->v_dim, s);
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
    if (rc && rc != SIEVE_EINVAL && rc != SIEVE_ENOTSUP && rc != SIEVE_ENOSPC) {
        cudaStreamSynchronize(c->stream); /* queued work may still write scratch and out */
        cudaGetLastError();
    }
    return rc;
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
    if (rc && rc != SIEVE_EINVAL && rc != SIEVE_ENOTSUP && rc != SIEVE_ENOSPC) {
        cudaStreamSynchronize(c->stream); /* queued work may still write scratch and out */
        cudaGetLastError();
    }
    return rc;
}

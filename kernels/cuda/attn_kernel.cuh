/* attn_kernel.cuh: the flash-attention kernel shared by grouped sparse attention, dense
 * causal attention (kernels/cuda/sparse_attn.cu) and block-sparse prefill
 * (kernels/cuda/block_sparse.cu), its slice merge and its launchers.
 *
 * Owns: the attention kernel over a "list" of key rows (mma.sync m16n8k16, a cp.async ring,
 * online softmax in the log2 domain), its three modes, the merge of a row's slices, and the
 * launch by dtype, dims, column split and ring depth.
 * Must not: decide which keys a token sees beyond what its mode's arguments say, keep state
 * between calls. Included by one .cu file each: everything here has internal linkage.
 *
 * Modes (AttnArgs says which inputs each reads):
 *   SA_LIST    grouped sparse attention: a group's list of positions (union of its tokens'
 *              sets) and a membership mask a slot; a slot's row is visible to a token whose
 *              bit its mask holds.
 *   SA_CAUSAL  dense causal attention: a group's list is every key up to its last token's
 *              position (contiguous, no positions read); a key is visible at or before the
 *              row's position.
 *   SA_BLOCKS  block-sparse prefill: a group lies in one query tile; its list is the tile's
 *              kept key blocks (block ids, each B / 64 contiguous 64-key tiles, visible by
 *              position as in SA_CAUSAL) followed by its corrected blocks' pooled rows
 *              (64 a tile, gathered by block id, always visible, their logits raised by
 *              log2(B)).
 */
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

#include "cuda_common.cuh"
#include "prims.cuh"

namespace {

using namespace sieve_cuda;

constexpr int SA_BN = 64;           /* list slots a tile */
constexpr int SA_THREADS = 128;     /* 4 warps */
constexpr int SA_ROWS = 64;         /* rows a CTA */
constexpr unsigned SA_GRID_Z_MAX = 65535;
constexpr uint32_t SA_MAX_R = 4096; /* query heads a kv head (a group's rows fit 32 bits) */

enum AttnMode { SA_LIST = 0, SA_CAUSAL = 1, SA_BLOCKS = 2 };

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
    /* block-sparse mode (groups lie in one query tile I = g * G / block): the tile's kept
     * blocks and corrected blocks, each ascending, from kvh * per_head + tile_off[I], their
     * counts at kvh * tiles + I; the pooled rows (blocks x Hkv x D, and x DV) */
    const uint32_t *kept_count, *corr_count;
    const int32_t *kept, *corr;
    const unsigned long long *tile_off;
    unsigned long long per_head;
    uint32_t tiles, block, bsub; /* B and the 64-key tiles of a block, B / 64 */
    const void *pkeys, *pvalues;
    float corr_log2;             /* log2(B): a pooled row stands for B keys */
};

/* Block mode: query tile I's lists for kv head kvh, as the select kernel left them. */
struct BlockLists {
    uint32_t nkt, ncorr;        /* the kept blocks' 64-key tiles, the corrected blocks */
    const int32_t *kept, *corr; /* both ascending */
};
__device__ inline BlockLists block_lists(const AttnArgs &a, uint32_t kvh, uint32_t I) {
    const size_t ri = (size_t)kvh * a.tiles + I;
    const size_t lb = (size_t)kvh * a.per_head + a.tile_off[I];
    return BlockLists{a.kept_count[ri] * a.bsub, a.corr_count[ri], a.kept + lb, a.corr + lb};
}

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

/* A thread's A fragments (m16n8k16, and wgmma with A from registers) of rows r0 and r1 (its
 * gq and gq + 8) of a row-major matrix of D columns: f[kk] holds columns 16 kk + 2 tq, + 1
 * (f[kk][0] row r0, f[kk][1] row r1) and 8 on (f[kk][2], f[kk][3]); a null row gives zeros. */
template <typename E, int D>
__device__ inline void load_a_frags(const E *r0, const E *r1, uint32_t tq,
                                    uint32_t (&f)[D / 16][4]) {
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        const uint32_t c0 = kk * 16 + 2 * tq;
        f[kk][0] = r0 ? *(const uint32_t *)(r0 + c0) : 0u;
        f[kk][1] = r1 ? *(const uint32_t *)(r1 + c0) : 0u;
        f[kk][2] = r0 ? *(const uint32_t *)(r0 + c0 + 8) : 0u;
        f[kk][3] = r1 ? *(const uint32_t *)(r1 + c0 + 8) : 0u;
    }
}

/* The online softmax's step for a thread's two rows (gq and gq + 8 of an m16 block): mx,
 * the thread's maxima of the tile (the running maxima m folded in), reduced over the quad
 * that shares the rows; base, what the tile's probabilities subtract (0 where a row has seen
 * no key yet); corr = 2^(m - base), the rescale of the earlier sums; m and l updated. */
__device__ inline void online_max_step(float (&mx)[2], float (&m)[2], float (&l)[2],
                                       float (&base)[2], float (&corr)[2]) {
#pragma unroll
    for (int i = 0; i < 2; i++) {
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
        base[i] = mx[i] == -INFINITY ? 0.f : mx[i];
        corr[i] = fast_exp2(m[i] - base[i]); /* m = -inf: 0 */
        m[i] = mx[i];
        l[i] *= corr[i];
    }
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
template <typename E, int D, int DV, int NSPLIT, int ST, int MODE>
__global__ void __launch_bounds__(SA_THREADS, ST == 2 ? 3 : 2) /* what shared memory allows */
sa_attn_kernel(AttnArgs a) {
    using Ops = MmaOps<E>;
    using SM = AttnSmem<D, DV, ST>;
    constexpr bool CAUSAL = MODE == SA_CAUSAL, BLOCKS = MODE == SA_BLOCKS;
    constexpr int NCOL = SA_BN / NSPLIT; /* slots of a tile a warp scores */
    constexpr int NT = NCOL / 8;         /* its n8 tiles */
    extern __shared__ __align__(128) unsigned char sa_attn_smem[];
    const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    /* causal: the groups of the most keys first (the last tokens), so the short ones fill
     * the tail of the grid */
    const uint32_t g =
        CAUSAL || BLOCKS ? a.ngroups - 1 - (a.group0 + blockIdx.z) : a.group0 + blockIdx.z;
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
    uint32_t U = 0, nkt = 0, ncorr = 0; /* blocks: the kept blocks' tiles, the pooled rows */
    const int32_t *lkept = nullptr, *lcorr = nullptr;
    if (CAUSAL) {
        const uint32_t tl = (g + 1) * a.G < a.T ? (g + 1) * a.G : a.T; /* past the last token */
        const uint64_t v = (uint64_t)a.pos0 + tl;
        U = v < a.L ? (uint32_t)v : a.L;
    } else if (BLOCKS) {
        const BlockLists bl = block_lists(a, kvh, g * a.G / a.block);
        nkt = bl.nkt;
        ncorr = bl.ncorr;
        lkept = bl.kept;
        lcorr = bl.corr;
    } else {
        U = a.count[g];
    }
    /* causal: the position of the CTA's first token, the least of its rows' */
    const int64_t cta_pos = (int64_t)a.pos0 + (int64_t)g * a.G + row0 / a.R;
    const int32_t *lpos = CAUSAL || BLOCKS ? nullptr : a.pos + (size_t)g * a.cap;
    const uint32_t *lmask = CAUSAL || BLOCKS ? nullptr : a.mask + (size_t)g * a.cap;
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
    const E *pkbase = BLOCKS ? (const E *)a.pkeys + (size_t)kvh * D : nullptr;
    const E *pvbase = BLOCKS ? (const E *)a.pvalues + (size_t)kvh * DV : nullptr;
    /* this CTA's tiles of the list: [tb, te) */
    const uint32_t ntiles =
        BLOCKS ? nkt + (ncorr + SA_BN - 1) / SA_BN : (U + SA_BN - 1) / SA_BN;
    const uint32_t per = (ntiles + a.nsl - 1) / a.nsl;
    const uint32_t tb = slice * per < ntiles ? slice * per : ntiles;
    const uint32_t te = tb + per < ntiles ? tb + per : ntiles;
    /* the list positions of tile j into their ring slot (slots past the list: 0) */
    auto load_pos = [&](uint32_t j) {
        if (BLOCKS) {
            /* a kept block's tile: its block id in the slot's entry 0; a tile of pooled rows:
             * the corrected blocks' ids (past the list: 0) */
            int32_t *dst = posr + (j % (2 * ST)) * SA_BN + tid;
            if (j < nkt) {
                if (tid == 0) cp_async4(dst, lkept + j / a.bsub, 4);
            } else if (tid < (uint32_t)SA_BN) {
                const uint64_t s = (uint64_t)(j - nkt) * SA_BN + tid;
                const bool ok = s < ncorr;
                cp_async4(dst, ok ? lcorr + s : lcorr, ok ? 4 : 0);
            }
        } else if (!CAUSAL && tid < (uint32_t)SA_BN) {
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
        if (BLOCKS) {
            const bool keyt = j < nkt;
            /* keys: the block's 64-key tile j % bsub; pooled rows: the slots' blocks */
            const int64_t p0 = keyt ? (int64_t)pr[0] * a.block + (int64_t)(j % a.bsub) * SA_BN : 0;
            const uint64_t c0 = keyt ? 0 : (uint64_t)(j - nkt) * SA_BN;
#pragma unroll
            for (int x = 0; x < SA_BN * KC / SA_THREADS; x++) {
                const uint32_t i = tid + x * SA_THREADS, n = i / KC, c = i % KC;
                const bool ok = keyt ? p0 + n < (int64_t)a.L : c0 + n < ncorr;
                const E *src = !ok ? kbase
                               : keyt ? kbase + (size_t)(p0 + n) * kstride + c * 8
                                      : pkbase + (size_t)pr[n] * kstride + c * 8;
                cp_async16(st + sw_off<D>(n, c), src, ok ? 16 : 0);
            }
#pragma unroll
            for (int x = 0; x < SA_BN * VC / SA_THREADS; x++) {
                const uint32_t i = tid + x * SA_THREADS, n = i / VC, c = i % VC;
                const bool ok = keyt ? p0 + n < (int64_t)a.L : c0 + n < ncorr;
                const E *src = !ok ? vbase
                               : keyt ? vbase + (size_t)(p0 + n) * vstride + c * 8
                                      : pvbase + (size_t)pr[n] * vstride + c * 8;
                cp_async16(st + SM::K_BYTES + sw_off<DV>(n, c), src, ok ? 16 : 0);
            }
        } else {
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
            bool open = CAUSAL && (int64_t)(it + 1) * SA_BN <= (int64_t)U &&
                        (int64_t)(it + 1) * SA_BN - 1 <= cta_pos;
            /* blocks: a kept block's tile is masked by position (unless open), a tile of
             * pooled rows by the list's end, its logits raised by log2(B) */
            const bool keyt = BLOCKS && it < nkt;
            int64_t kp0 = (int64_t)it * SA_BN;
            float bias = 0.f;
            if (BLOCKS) {
                if (keyt) {
                    kp0 = (int64_t)posr[(it % (2 * ST)) * SA_BN] * a.block +
                          (int64_t)(it % a.bsub) * SA_BN;
                    open = kp0 + SA_BN <= (int64_t)a.L && kp0 + SA_BN - 1 <= cta_pos;
                } else {
                    kp0 = (int64_t)(it - nkt) * SA_BN; /* the first slot's index in the list */
                    bias = a.corr_log2;
                }
            }
#pragma unroll
            for (int j = 0; j < NT; j++) {
                const uint32_t c = col0 + j * 8 + 2 * tq;
                bool in0[2], in1[2];
                if (open) {
                    in0[0] = in0[1] = in1[0] = in1[1] = true;
                } else if (CAUSAL || keyt) {
                    /* a key is visible to the row at or before its position (and in range) */
                    const int64_t kp = kp0 + c;
                    const int64_t end = CAUSAL ? (int64_t)U : (int64_t)a.L;
#pragma unroll
                    for (int i = 0; i < 2; i++) {
                        in0[i] = kp <= rowpos[i] && kp < end;
                        in1[i] = kp + 1 <= rowpos[i] && kp + 1 < end;
                    }
                } else if (BLOCKS) {
                    /* pooled rows: every row of the tile sees them (full blocks) */
                    const int64_t sl = kp0 + c;
#pragma unroll
                    for (int i = 0; i < 2; i++) {
                        in0[i] = rowpos[i] >= 0 && sl < (int64_t)ncorr;
                        in1[i] = rowpos[i] >= 0 && sl + 1 < (int64_t)ncorr;
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
                    if (BLOCKS) {
                        s[j][2 * i] = in0[i] ? fmaf(s[j][2 * i], a.scale_log2, bias) : -INFINITY;
                        s[j][2 * i + 1] =
                            in1[i] ? fmaf(s[j][2 * i + 1], a.scale_log2, bias) : -INFINITY;
                    } else {
                        s[j][2 * i] = in0[i] ? s[j][2 * i] * a.scale_log2 : -INFINITY;
                        s[j][2 * i + 1] = in1[i] ? s[j][2 * i + 1] * a.scale_log2 : -INFINITY;
                    }
                    mx[i] = fmaxf(mx[i], fmaxf(s[j][2 * i], s[j][2 * i + 1]));
                }
            }
            float corr[2], base[2];
            online_max_step(mx, m, l, base, corr);
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

/* ---------------------------------------------------------------- launch */

/* What the kernel runs: float16 or bfloat16, head_dim and v_dim 64 or 128, at most 65,535 kv
 * heads (the grid's y) and SA_MAX_R query heads a kv head, compute capability 9.0 or newer
 * (c may be NULL: no device check). 0 or SIEVE_ENOTSUP. */
inline int sa_check_shape(const sieve__cuda_ctx *c, sieve_dtype dtype, uint32_t head_dim,
                          uint32_t v_dim, uint32_t q_heads, uint32_t kv_heads) {
    if (dtype != SIEVE_DTYPE_F16 && dtype != SIEVE_DTYPE_BF16) return SIEVE_ENOTSUP;
    if ((head_dim != 64 && head_dim != 128) || (v_dim != 64 && v_dim != 128))
        return SIEVE_ENOTSUP;
    if (kv_heads > 65535) return SIEVE_ENOTSUP;
    if (q_heads / kv_heads > SA_MAX_R) return SIEVE_ENOTSUP; /* a group's rows fit 32 bits */
    if (c && c->prop.major < 9) return SIEVE_ENOTSUP;
    return 0;
}

/* A call's attention launch: groups of G tokens (one CTA's rows, G x R <= 64, or one token
 * over several CTAs when R > 64) and the scratch layout of grouped sparse attention. */
struct SaPlan {
    uint32_t G, groups, R;
    uint32_t nsl;      /* slices a list: more CTAs where the groups and kv heads are few */
    uint32_t rows;     /* rows of the fullest CTA: min(group, n_queries) x R, at most 64 */
    int stages;        /* of the attention kernel's ring: lists 2 (3 with SIEVE_CUDA_SA_STAGES=3),
                          causal 3 (2 with SIEVE_CUDA_SA_STAGES=2), blocks 2 (3 with
                          SIEVE_CUDA_SA_STAGES=3) */
    size_t cap;
    size_t o_pos, o_mask, o_count, o_members, o_part, total;
};

template <typename E, int D, int DV, int NSPLIT, int ST, int MODE>
int launch_attn(const AttnArgs &base, const SaPlan &pl, cudaStream_t s) {
    constexpr int bytes = AttnSmem<D, DV, ST>::BYTES;
    auto kern = sa_attn_kernel<E, D, DV, NSPLIT, ST, MODE>;
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
template <typename E, int D, int DV, int MODE>
int launch_attn_split(const AttnArgs &a, const SaPlan &pl, cudaStream_t s) {
    /* the split fits the fullest CTA (with fewer tokens than a group: the only one) */
    const uint32_t rows = pl.rows;
    if (pl.stages == 3) {
        if (rows <= 16) return launch_attn<E, D, DV, 4, 3, MODE>(a, pl, s);
        if (rows <= 32) return launch_attn<E, D, DV, 2, 3, MODE>(a, pl, s);
        return launch_attn<E, D, DV, 1, 3, MODE>(a, pl, s);
    }
    if (rows <= 16) return launch_attn<E, D, DV, 4, 2, MODE>(a, pl, s);
    if (rows <= 32) return launch_attn<E, D, DV, 2, 2, MODE>(a, pl, s);
    return launch_attn<E, D, DV, 1, 2, MODE>(a, pl, s);
}

template <typename E, int MODE>
int launch_attn_dims(const AttnArgs &a, const SaPlan &pl, uint32_t D, uint32_t DV,
                     cudaStream_t s) {
    if (D == 64 && DV == 64) return launch_attn_split<E, 64, 64, MODE>(a, pl, s);
    if (D == 64 && DV == 128) return launch_attn_split<E, 64, 128, MODE>(a, pl, s);
    if (D == 128 && DV == 64) return launch_attn_split<E, 128, 64, MODE>(a, pl, s);
    return launch_attn_split<E, 128, 128, MODE>(a, pl, s);
}

/* The attention launches of one call and, with slices, the merge. 0 or SIEVE_EDEVICE. */
template <int MODE>
int attend(const AttnArgs &aa, const SaPlan &pl, sieve_dtype dtype, uint32_t D, uint32_t DV,
           cudaStream_t s) {
    const int rc = dtype == SIEVE_DTYPE_BF16
                       ? launch_attn_dims<__nv_bfloat16, MODE>(aa, pl, D, DV, s)
                       : launch_attn_dims<__half, MODE>(aa, pl, D, DV, s);
    if (rc) return rc;
    if (pl.nsl > 1) {
        const size_t rows = (size_t)aa.T * aa.Hq, n = rows * DV;
        sa_merge_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(aa.part, pl.nsl, rows, DV,
                                                                    aa.out, aa.lse);
        SIEVE_CUDA_LAUNCH_CHECK();
    }
    return 0;
}


} // namespace

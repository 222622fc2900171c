/* attn_wg.cuh: the Hopper (sm_90a) attention kernels of dense causal attention
 * (kernels/cuda/sparse_attn.cu) and block-sparse prefill (kernels/cuda/block_sparse.cu) for
 * head_dim = v_dim = 128, float16 or bfloat16: scores and P V on wgmma, and their launch.
 *
 * Owns: sa_wg_kernel (64-key tiles) and sa_wgp_kernel (128-key tiles, a producer
 * warpgroup; described above it) in the causal and block modes of attn_kernel.cuh (the same
 * inputs, AttnArgs, and the same answer up to float32 rounding), the choice between them and
 * attn_kernel.cuh's mma.sync kernel (wg_choose, wg_ring), and their launch.
 * Must not: run on anything but compute capability 9.0 (sm_90a instructions), slice a row's
 * keys (one CTA sees all of a row's tiles), keep state between calls. Included by one .cu
 * file each: everything here has internal linkage.
 *
 * sa_wg_kernel (blocks of 64; elsewhere by SIEVE_CUDA_WG_RING): a CTA is 128 rows (two
 * warpgroups of 64, token-major: the scope's tokens x the kv head's query heads; the scope is
 * one query tile in the block mode, the whole call in the causal mode). Each warpgroup holds its
 * 64 query rows in registers, as the A fragments of S's wgmma, negated where the scale is
 * negative. Per 64-key tile i a warpgroup, in its turn at the tensor cores, issues S_i = Q K_i^T
 * (eight m64n64k16, A from registers, K from shared memory) and then O += P_{i-1} V_{i-1} (four
 * m64n128k16, A from registers, V N-major in shared memory), lets the other warpgroup take its
 * turn (named barriers 1 and 2, warpgroup 0 first), waits for S_i alone, and while P_{i-1}
 * V_{i-1} still runs: the mask (skipped for tiles every row sees whole) and the running maxima
 * on the raw scores, then P_i = 2^(|scale| s + bias - max) (the scale folded into the exponent's
 * FMA) rounded to the storage type into the other of two register sets (tiles alternate them: a
 * copy would let ptxas merge the sets and serialise the wgmma); then it waits for P_{i-1}
 * V_{i-1}, frees that tile's slot and rescales O (skipped where none of the warp's maxima
 * moved). So one warpgroup's softmax runs beside the other's matrix work and its own P V. Keys
 * and values stream through a ring of ST tiles (WG_RINGS: 5 by default) that all threads fill by
 * cp.async (one row a four threads, immediate offsets), LA = 2 tiles ahead; each warp announces
 * tile i + 1 on its full barrier once its own copies of it landed (fence.proxy.async first), at
 * the start of its iteration i, and frees tile i - 1 (the empty barrier) after P_{i-1} V_{i-1}.
 * Refilling at iteration i goes into tile i + 2 - ST's slot: with ST = 5, tile i - 3's, which
 * both warpgroups freed in iteration i - 2, so neither waits for the other's softmax (a ring of
 * 4 made the faster warpgroup wait for the slower one's tile i - 1). Descriptors are one add to
 * a slot's base (desc_add). The causal and block modes share every instruction of a tile, so
 * block-sparse prefill at alpha 0 equals dense causal attention bit for bit when both calls take
 * this kernel (wg_choose counts their CTAs differently: the block mode ceil(B R / 128) a tile,
 * the causal mode ceil(T R / 128)); fully masked trailing tiles change nothing (p = 0, scale 1).
 */
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_kernel.cuh"
#include "wgmma.cuh"

namespace {

constexpr int WG_ROWS = 128; /* rows a CTA: two warpgroups of 64 */
constexpr int WG_THREADS = 256;
constexpr int WG_DIM = 128;  /* head_dim = v_dim */

/* sa_wg_kernel's ring: ST key tiles, LA of them loaded ahead of the one computed. Refilling
 * at iteration i goes into tile i + LA - ST's slot, which both warpgroups must have freed
 * (after their P V of it); ST - LA >= 3 leaves that a tile behind the slower warpgroup's
 * P V. Its default, 5 x 2, was the fastest of 4 x 2, 5 x 2, 6 x 2 and 6 x 3 on the H200
 * (dense 32K 19.8-20.1 ms against 21.0-21.3 with 4 x 2; bench/results/h200-ring-runs/);
 * SIEVE_CUDA_WG_RING=6x2 or 6x3 picks another (a tuning hook). */
struct WgRing {
    int st, la;
};
constexpr WgRing WG_RINGS[] = {{5, 2}, {6, 2}, {6, 3}};
constexpr int WG_NRINGS = sizeof WG_RINGS / sizeof WG_RINGS[0];
constexpr int WG_RING_DEFAULT = 0;

template <int ST>
struct WgSmem {
    static constexpr uint32_t HALF = SA_BN * 64 * 2; /* 64 rows x 64 columns: 8 KB */
    static constexpr uint32_t KV = 2 * HALF;         /* a tile's keys, or values: 16 KB */
    static constexpr uint32_t STAGE = 2 * KV;
    static constexpr uint32_t BAR = ST * STAGE;
    static constexpr uint32_t BYTES = BAR + 2 * ST * 8 + 1024; /* + alignment slack */
    static_assert(BYTES <= 232448, "a ring beyond the SM's 227 KB of shared memory");
};

/* Keeps the compiler from moving accumulator registers across a wgmma sequence (a copy
 * between two wgmma of one sequence makes ptxas wait for the first). */
template <int N>
__device__ inline void fence_regs(float *r) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(r[i])::"memory");
}
/* The same for the A fragments of P: live until the wgmma reading them completed. */
template <int K>
__device__ inline void fence_frags(uint32_t (&f)[K][4]) {
#pragma unroll
    for (int i = 0; i < K; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) asm volatile("" : "+r"(f[i][j])::"memory");
}

/* A CTA's scope, both kernels: the scope's tokens [tok0, tok0 + ntok) (the block mode: query
 * tile I, the tiles of the most blocks first; the causal mode: the whole call) and the CTA's
 * 128 rows [r0, r0 + 128) of its nrows = ntok x R (the causal mode: the most keys first). */
struct WgScope {
    uint32_t tok0, ntok, I;
    uint64_t r0, nrows;
};
template <bool BLOCKS>
__device__ inline WgScope wg_scope(const AttnArgs &a) {
    WgScope c{0, a.T, 0, 0, 0};
    if (BLOCKS) {
        c.I = a.tiles - 1 - (a.group0 + blockIdx.z);
        c.tok0 = c.I * a.block;
        c.ntok = a.T - c.tok0 < a.block ? a.T - c.tok0 : a.block;
        c.r0 = (uint64_t)blockIdx.x * WG_ROWS;
    } else {
        c.r0 = (uint64_t)(gridDim.x - 1 - blockIdx.x) * WG_ROWS;
    }
    c.nrows = (uint64_t)c.ntok * a.R;
    return c;
}
/* The causal mode: the keys the CTA's last row sees, U (keys 0 .. U - 1). */
__device__ inline uint32_t wg_causal_keys(const AttnArgs &a, const WgScope &c) {
    const uint64_t rl = (c.r0 + WG_ROWS < c.nrows ? c.r0 + WG_ROWS : c.nrows) - 1;
    const uint64_t v = (uint64_t)a.pos0 + c.tok0 + rl / a.R + 1;
    return v < a.L ? (uint32_t)v : a.L;
}
/* O's rows times this tile's rescale (corr[h] for row h of the thread's pair); a scale of
 * 1 changes nothing, so the warp skips it where its maxima all held. */
__device__ __forceinline__ void wg_rescale(float *o, const float *corr) {
    if (__any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f)) {
#pragma unroll
        for (int j = 0; j < 16; j++) {
            o[4 * j] *= corr[0];
            o[4 * j + 1] *= corr[0];
            o[4 * j + 2] *= corr[1];
            o[4 * j + 3] *= corr[1];
        }
    }
}
/* The CTA's key tiles of BN keys: causal, keys 0 .. U - 1; blocks, the kept blocks' tiles
 * (nkt; block_lists counts 64-key tiles, so BN = 128 halves it) and then the corrected
 * blocks' pooled rows (ncorr at lcorr), BN a tile. Returns the number of tiles. */
template <bool BLOCKS, int BN>
__device__ __forceinline__ uint32_t wg_tiles(const AttnArgs &a, const WgScope &sc0, uint32_t kvh,
                                             uint32_t &nkt, uint32_t &ncorr, uint32_t &U,
                                             const int32_t *&lkept, const int32_t *&lcorr) {
    if (BLOCKS) {
        const BlockLists bl = block_lists(a, kvh, sc0.I);
        nkt = BN == 128 ? bl.nkt >> 1 : bl.nkt;
        ncorr = bl.ncorr;
        lkept = bl.kept;
        lcorr = bl.corr;
        return nkt + (ncorr + BN - 1) / BN;
    }
    U = wg_causal_keys(a, sc0);
    return (U + BN - 1) / BN;
}
/* Row r of the scope: its output row (token x Hq + head). */
__device__ inline size_t wg_out_row(const AttnArgs &a, const WgScope &c, uint32_t kvh,
                                    uint64_t r) {
    const uint64_t t = c.tok0 + r / a.R;
    return (size_t)t * a.Hq + (size_t)kvh * a.R + (uint32_t)(r % a.R);
}
/* No key visible (no keys at all): out 0, lse -inf for the CTA's rows, as elsewhere; by the
 * CTA's NT threads. */
template <uint32_t NT>
__device__ inline void wg_no_keys(const AttnArgs &a, const WgScope &c, uint32_t kvh,
                                  uint32_t tid) {
    for (uint32_t i = tid; i < WG_ROWS; i += NT) {
        const uint64_t r = c.r0 + i;
        if (r >= c.nrows) break;
        const size_t orow = wg_out_row(a, c, kvh, r);
        for (int k = 0; k < WG_DIM; k++) a.out[orow * WG_DIM + k] = 0.f;
        if (a.lse) a.lse[orow] = -INFINITY;
    }
}
/* A warpgroup's 64 query rows as the A fragments of S's wgmma: qa[kk], columns 16 kk ..
 * 16 kk + 15 of rows rb and rb + 8 of the scope (rb = the warp's first row + gq; rows past the
 * scope: zeros), each element negated where the scale is negative (so scores times |scale|
 * are the scaled scores, and a tile's largest raw score gives its largest scaled one). */
template <typename E>
__device__ inline void wg_load_queries(const AttnArgs &a, const WgScope &c, uint32_t kvh,
                                       uint64_t rb, uint32_t tq,
                                       uint32_t (&qa)[WG_DIM / 16][4]) {
    const E *qr[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const uint64_t r = rb + 8 * h;
        qr[h] = r < c.nrows ? (const E *)a.q + wg_out_row(a, c, kvh, r) * WG_DIM : nullptr;
    }
    load_a_frags<E, WG_DIM>(qr[0], qr[1], tq, qa);
    if (a.scale_log2 < 0.f) /* both halves' signs */
#pragma unroll
        for (int kk = 0; kk < WG_DIM / 16; kk++)
#pragma unroll
            for (int x = 0; x < 4; x++) qa[kk][x] ^= 0x80008000u;
}
/* The positions of the thread's rows rb and rb + 8 (-1 past the scope), and the least
 * position of its warpgroup's rows (from rw). */
__device__ inline void wg_positions(const AttnArgs &a, const WgScope &c, uint64_t rb,
                                    uint64_t rw, int64_t (&rowpos)[2], int64_t &wgpos) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const uint64_t r = rb + 8 * h;
        rowpos[h] = r < c.nrows ? (int64_t)a.pos0 + c.tok0 + (int64_t)(r / a.R) : -1;
    }
    wgpos = rw < c.nrows ? (int64_t)a.pos0 + c.tok0 + (int64_t)(rw / a.R) : -1;
}
/* The mask of a tile of NB x 8 keys (scores s, accumulator 4 j + 2 h + e: row h's column
 * 8 j + 2 tq + e) and the thread's maxima of its two rows: open, every key visible to every
 * row of the warpgroup (no mask); else columns past a row's last visible key (key tiles: its
 * position, clipped at end - 1; pooled rows: the list's ncorr) become -inf. */
template <int NB>
__device__ inline void wg_mask_max(float *s, bool open, bool keyt, const int64_t (&rowpos)[2],
                                   int64_t end, int64_t kp0, uint32_t ncorr, uint32_t tq,
                                   float (&mx)[2]) {
    if (open) {
#pragma unroll
        for (int i = 0; i < 4 * NB; i++) mx[(i >> 1) & 1] = fmaxf(mx[(i >> 1) & 1], s[i]);
        return;
    }
    /* the last visible column of each row (-1: none), relative to the tile */
    int32_t lim[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int64_t x = keyt ? (rowpos[h] < end - 1 ? rowpos[h] : end - 1) - kp0
                         : (int64_t)ncorr - 1 - kp0;
        x = x < -1 ? -1 : x > 8 * NB - 1 ? 8 * NB - 1 : x;
        lim[h] = (int32_t)x;
    }
#pragma unroll
    for (int j = 0; j < NB; j++) {
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int32_t col = j * 8 + 2 * (int32_t)tq + e;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float &v = s[4 * j + 2 * h + e];
                v = col <= lim[h] ? v : -INFINITY;
                mx[h] = fmaxf(mx[h], v);
            }
        }
    }
}
/* out = O / l, lse = (m + log2 l) ln 2 of the thread's rows rb and rb + 8, straight from the
 * accumulators (l: the thread's partial sums, completed over the quad here). */
__device__ inline void wg_store(const AttnArgs &a, const WgScope &c, uint32_t kvh, uint64_t rb,
                                uint32_t tq, const float (&o)[64], float (&l)[2],
                                const float (&m)[2]) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
        const uint64_t r = rb + 8 * h;
        if (r >= c.nrows) continue;
        const size_t orow = wg_out_row(a, c, kvh, r);
        const float inv = l[h] > 0.f ? 1.f / l[h] : 0.f;
        float *dst = a.out + orow * WG_DIM + 2 * tq;
#pragma unroll
        for (int j = 0; j < 16; j++)
            *(float2 *)(dst + 8 * j) =
                make_float2(o[4 * j + 2 * h] * inv, o[4 * j + 2 * h + 1] * inv);
        if (tq == 0 && a.lse)
            a.lse[orow] = l[h] > 0.f ? (m[h] + log2f(l[h])) * 0.69314718055994531f : -INFINITY;
    }
}

template <typename E, int MODE, int RING>
__global__ void __launch_bounds__(WG_THREADS, 1) sa_wg_kernel(const __grid_constant__ AttnArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using Ops = MmaOps<E>;
    constexpr int ST = WG_RINGS[RING].st, LA = WG_RINGS[RING].la;
    static_assert(ST - LA >= 3, "a refill would wait for the other warpgroup's softmax");
    using SM = WgSmem<ST>;
    constexpr bool BLOCKS = MODE == SA_BLOCKS;
    extern __shared__ unsigned char sa_wg_raw[];
    unsigned char *sm = sa_wg_raw + ((1024u - (smem_u32(sa_wg_raw) & 1023u)) & 1023u);
    uint64_t *full = (uint64_t *)(sm + SM::BAR), *empty = full + ST;
    const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;
    const uint32_t wq = warp & 3, gq = lane >> 2, tq = lane & 3;
    const uint32_t kvh = blockIdx.y;
    const WgScope sc0 = wg_scope<BLOCKS>(a);
    const uint64_t r0 = sc0.r0, nrows = sc0.nrows;
    if (r0 >= nrows) return;

    /* the key tiles: causal, keys 0 .. U - 1; blocks, the kept blocks' 64-key tiles and then
     * the corrected blocks' pooled rows, 64 a tile */
    uint32_t ntiles, nkt = 0, ncorr = 0, U = 0;
    const uint32_t bsh = a.bsub == 2 ? 1u : 0u; /* blocks: 64-key tiles a block, 1 or 2 */
    const int32_t *lkept = nullptr, *lcorr = nullptr;
    ntiles = wg_tiles<BLOCKS, SA_BN>(a, sc0, kvh, nkt, ncorr, U, lkept, lcorr);
    if (ntiles == 0) {
        wg_no_keys<WG_THREADS>(a, sc0, kvh, tid);
        return;
    }
    if (tid == 0) {
        for (int s = 0; s < ST; s++) {
            mbar_init(&full[s], 8);  /* one arrival a warp: its copies landed */
            mbar_init(&empty[s], 8); /* one arrival a warp: its P V read the slot */
        }
    }
    __syncthreads();

    /* loads: thread tid copies chunks sub, sub + 4, ... of row n of each tile */
    const uint32_t n = tid >> 2, sub = tid & 3;
    const size_t kst = (size_t)a.Hkv * WG_DIM;
    const E *kb = (const E *)a.keys + (size_t)kvh * WG_DIM;
    const E *vb = (const E *)a.values + (size_t)kvh * WG_DIM;
    const E *pkb = BLOCKS ? (const E *)a.pkeys + (size_t)kvh * WG_DIM : nullptr;
    const E *pvb = BLOCKS ? (const E *)a.pvalues + (size_t)kvh * WG_DIM : nullptr;
    /* what tile j's copies need (blocks): a kept block's id, or the corrected block of this
     * thread's pooled row (-1 past the list); read a tile before the copies are issued */
    auto tile_id = [&](uint32_t j) -> int32_t {
        if (!BLOCKS || j >= ntiles) return 0;
        if (j < nkt) return __ldg(lkept + (j >> bsh));
        const uint32_t s = (j - nkt) * SA_BN + n;
        return s < ncorr ? __ldg(lcorr + s) : -1;
    };
    /* this thread's two positions in a tile's 64-column half (chunks sub and sub + 4 of row
     * n, swizzled); chunks sub + 8 and sub + 12 take the same positions in the second half */
    const uint32_t ring0 = smem_u32(sm);
    const uint32_t so0 = sw_off<64>(n, sub), so1 = sw_off<64>(n, sub + 4);
    auto issue = [&](uint32_t j, int32_t id) {
        const uint32_t st = ring0 + (j % ST) * SM::STAGE;
        const E *ks = kb, *vs = vb;
        bool ok;
        if (!BLOCKS) {
            const uint32_t p = j * SA_BN + n;
            ok = p < U;
            if (ok) {
                ks = kb + (size_t)p * kst;
                vs = vb + (size_t)p * kst;
            }
        } else if (j < nkt) {
            const int64_t p = (int64_t)id * a.block + (int64_t)(j & bsh) * SA_BN + n;
            ok = p < (int64_t)a.L;
            if (ok) {
                ks = kb + (size_t)p * kst;
                vs = vb + (size_t)p * kst;
            }
        } else {
            ok = id >= 0;
            if (ok) {
                ks = pkb + (size_t)id * kst;
                vs = pvb + (size_t)id * kst;
            }
        }
        /* chunk sub + 4 x of the row: 16 bytes at 16 sub + 64 x */
        ks += sub * 8;
        vs += sub * 8;
        const int sz = ok ? 16 : 0;
        constexpr uint32_t H = SM::HALF, KV = SM::KV;
        cp_async16_at<0, 0>(st + so0, ks, sz);
        cp_async16_at<0, 64>(st + so1, ks, sz);
        cp_async16_at<H, 128>(st + so0, ks, sz);
        cp_async16_at<H, 192>(st + so1, ks, sz);
        cp_async16_at<KV, 0>(st + so0, vs, sz);
        cp_async16_at<KV, 64>(st + so1, vs, sz);
        cp_async16_at<KV + H, 128>(st + so0, vs, sz);
        cp_async16_at<KV + H, 192>(st + so1, vs, sz);
    };

    int32_t nid = tile_id(0);
    for (uint32_t j = 0; j < (uint32_t)LA; j++) { /* group j: tile j */
        if (j < ntiles) {
            issue(j, nid);
            nid = tile_id(j + 1);
        }
        cp_async_commit();
    }
    /* this warpgroup's 64 query rows as the A fragments of S's wgmma: qa[kk], columns 16 kk
     * .. 16 kk + 15 of rows gq and gq + 8 of the warp's 16 (rows past the scope: zeros), each
     * element negated where the scale is negative (so scores times |scale| are the scaled
     * scores, and a tile's largest raw score gives its largest scaled one). Loaded after the
     * first tiles' copies are issued, and negated only where needed, so that no thread waits
     * for its queries before issuing copies: the two latencies overlap. */
    uint32_t qa[WG_DIM / 16][4];
    const uint64_t rb = r0 + wg * 64 + wq * 16 + gq; /* this thread's rows rb, rb + 8 */
    wg_load_queries<E>(a, sc0, kvh, rb, tq, qa);
    /* tile t is announced (its full barrier) by each warp once that warp's own copies of it
     * landed: tile 0 here, tile i + 1 at the start of iteration i */
    cp_async_wait<LA - 1>();
    fence_proxy_async_smem();
    __syncwarp();
    if (lane == 0) mbar_arrive(&full[0]);

    /* this thread's two rows (gq and gq + 8 of its warp's 16): their positions (-1 past the
     * scope), and the least position of the warpgroup's rows */
    int64_t rowpos[2], wgpos;
    wg_positions(a, sc0, rb, r0 + wg * 64, rowpos, wgpos);

    /* the tensor cores in turns: warpgroup w issues its matrix work after named barrier
     * 1 + w completes (its own 128 threads and the other's 128 arrivals) and then lets the
     * other go, so one's softmax runs beside the other's matrix work; warpgroup 0 first */
    const int my_turn = 1 + (int)wg, their_turn = 2 - (int)wg;
    if (wg == 1) named_bar_arrive(1, WG_THREADS);

    /* the descriptors of slot 0's keys (K-major) and values (N-major) */
    const uint64_t kdesc0 = sw128_desc(sm), vdesc0 = sw128_desc_mn(sm + SM::KV, SM::HALF);
    const float sc = fabsf(a.scale_log2); /* the queries carry the sign */
    float o[64];
#pragma unroll
    for (int i = 0; i < 64; i++) o[i] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    /* P of the previous tile (A fragments of keys 16 kk .. 16 kk + 15) in one of two sets,
     * the other written by this tile's softmax while the previous P V still reads it: tiles
     * alternate the sets (a copy between them would let ptxas give both one set of registers
     * and serialise the wgmma) */
    uint32_t pa[4][4], pb[4][4];
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
        for (int x = 0; x < 4; x++) pa[kk][x] = pb[kk][x] = 0u;
    auto step = [&](uint32_t it, uint32_t(&pu)[4][4], uint32_t(&pw)[4][4]) {
        {
            const uint32_t j = it + LA; /* into the slot tile j - ST left */
            if (j < ntiles) {
                if (j >= (uint32_t)ST) mbar_wait(&empty[j % ST], (j / ST - 1) & 1u);
                issue(j, nid);
                nid = tile_id(j + 1);
            }
            cp_async_commit();
            cp_async_wait<LA - 1>(); /* this thread's copies of tile it + 1 */
            fence_proxy_async_smem();
            __syncwarp();
            if (lane == 0 && it + 1 < ntiles) mbar_arrive(&full[(it + 1) % ST]);
        }
        /* the tile's first key position (or, pooled rows, its first slot in the list) */
        const bool keyt = !BLOCKS || it < nkt;
        int64_t kp0 = (int64_t)it * SA_BN;
        float bias = 0.f;
        if (BLOCKS) {
            if (keyt)
                kp0 = (int64_t)__ldg(lkept + (it >> bsh)) * a.block +
                      (int64_t)(it & bsh) * SA_BN;
            else {
                kp0 = (int64_t)(it - nkt) * SA_BN;
                bias = a.corr_log2; /* a pooled row stands for B keys */
            }
        }
        mbar_wait(&full[it % ST], (it / ST) & 1u);

        /* this warpgroup's turn: S = Q K^T of tile it, then O += P V of tile it - 1. The
         * descriptors: keys of tile it's slot, values of tile it - 1's (iteration 0 multiplies
         * P = 0 (pa) by tile 0's values, which stay put until that tile's own P V, while the
         * slot of tile -1 may be refilled by then) */
        uint64_t dk[WG_DIM / 16], dv[4];
        {
            const uint32_t ku = (it % ST) * (SM::STAGE >> 4);
            const uint32_t vu = (it == 0 ? 0 : (it + ST - 1) % ST) * (SM::STAGE >> 4);
#pragma unroll
            for (int kk = 0; kk < WG_DIM / 16; kk++)
                dk[kk] = desc_add(kdesc0, ku + (((kk >> 2) * SM::HALF + (kk & 3) * 32) >> 4));
#pragma unroll
            for (int kk = 0; kk < 4; kk++) dv[kk] = desc_add(vdesc0, vu + kk * (2048 >> 4));
        }
        float s[32]; /* written by the first wgmma (run_zero) */
        named_bar_sync(my_turn, WG_THREADS);
        fence_regs<32>(s);
        fence_regs<64>(o);
        fence_frags(pu);
        wgmma_fence();
        WgmmaRsKOp<E, SA_BN>::run_zero(s, qa[0], dk[0]);
#pragma unroll
        for (int kk = 1; kk < WG_DIM / 16; kk++) WgmmaRsKOp<E, SA_BN>::run_acc(s, qa[kk], dk[kk]);
        wgmma_commit();
#pragma unroll
        for (int kk = 0; kk < 4; kk++) WgmmaRsOp<E, WG_DIM>::run(o, pu[kk], dv[kk]);
        wgmma_commit();
        named_bar_arrive(their_turn, WG_THREADS);
        wgmma_wait<1>(); /* S done; P V of tile it - 1 may still run */
        fence_regs<32>(s);

        /* mask and running max on the raw scores (the queries carry the scale's sign), the
         * scale folded into the exponent below. Accumulator 4j + 2h + e: row gq + 8h of the
         * warp's 16, key 8j + 2tq + e of the tile */
        const int64_t end = BLOCKS ? (int64_t)a.L : (int64_t)U;
        const bool open = keyt ? kp0 + SA_BN <= end && kp0 + SA_BN - 1 <= wgpos
                               : kp0 + SA_BN <= (int64_t)ncorr;
        float mx[2] = {-INFINITY, -INFINITY};
        wg_mask_max<SA_BN / 8>(s, open, keyt, rowpos, end, kp0, ncorr, tq, mx);
        /* the scaled maxima (|scale| > 0: the raw order is the scaled one; scale 0 means the
         * default, never 0 here), the running maxima folded in */
#pragma unroll
        for (int h = 0; h < 2; h++) mx[h] = fmaxf(m[h], fmaf(mx[h], sc, bias)); /* -inf: m */
        float base[2], corr[2];
        online_max_step(mx, m, l, base, corr);
        const float nb[2] = {bias - base[0], bias - base[1]};
        /* P = 2^(|scale| s + bias - max) rounded to E: the A fragments of keys 16 kk ..
         * 16 kk + 15 are the accumulators of n8 blocks 2 kk and 2 kk + 1; l sums the float32 P */
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                const int jb = 2 * kk + hh;
                const float p0 = fast_exp2(fmaf(s[4 * jb], sc, nb[0]));
                const float p1 = fast_exp2(fmaf(s[4 * jb + 1], sc, nb[0]));
                const float p2 = fast_exp2(fmaf(s[4 * jb + 2], sc, nb[1]));
                const float p3 = fast_exp2(fmaf(s[4 * jb + 3], sc, nb[1]));
                l[0] += p0 + p1;
                l[1] += p2 + p3;
                pw[kk][2 * hh] = Ops::pack(p0, p1);
                pw[kk][2 * hh + 1] = Ops::pack(p2, p3);
            }
        }
        /* P V of tile it - 1 done: its slot is free, O takes this tile's rescale */
        wgmma_wait<0>();
        fence_regs<64>(o);
        fence_frags(pu);
        if (it > 0) {
            __syncwarp();
            if (lane == 0) mbar_arrive(&empty[(it - 1) % ST]);
        }
        wg_rescale(o, corr);
    };
    /* O += P V of the last tile: one more turn each */
    auto finish = [&](uint32_t(&pu)[4][4]) {
        const uint32_t vu = ((ntiles - 1) % ST) * (SM::STAGE >> 4);
        uint64_t dv[4];
#pragma unroll
        for (int kk = 0; kk < 4; kk++) dv[kk] = desc_add(vdesc0, vu + kk * (2048 >> 4));
        named_bar_sync(my_turn, WG_THREADS);
        fence_regs<64>(o);
        fence_frags(pu);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; kk++) WgmmaRsOp<E, WG_DIM>::run(o, pu[kk], dv[kk]);
        wgmma_commit();
        if (wg == 0) named_bar_arrive(their_turn, WG_THREADS); /* warpgroup 1 takes no more */
        wgmma_wait<0>();
        fence_regs<64>(o);
    };
    uint32_t it = 0;
    for (; it + 1 < ntiles; it += 2) {
        step(it, pa, pb);
        step(it + 1, pb, pa);
    }
    if (it < ntiles) {
        step(it, pa, pb);
        finish(pb);
    } else {
        finish(pa);
    }
    cp_async_wait<0>();
    wg_store(a, sc0, kvh, rb, tq, o, l, m);
#else
    (void)a;
    __trap();
#endif
}

/* The 128-key form (sa_wgp_kernel, sm_90a, head_dim = v_dim = 128): the same answer as
 * sa_wg_kernel up to float32 rounding (a tile's sums and products in another order), the
 * same modes and arguments; in the block mode only for blocks of 128 (a block one tile).
 * A CTA is 384 threads: warpgroup 0 the producer, which copies every tile (cp.async, each
 * thread's copies an arrival on the tile's full barrier once they landed, so no consumer
 * waits for its own copies; a thread copies one 16-byte chunk of 16 rows 8 apart, one
 * pointer stepped along where the tile's rows are all keys; the next tile's block id, or its
 * pooled rows' ids, loaded a tile ahead, the ids a lane each and spread by shuffles), and
 * warpgroups 1 and 2 the consumers, 64 query rows each in registers as before.
 * Keys and values have rings of their own (WgpRing: SK and SV tiles of 32 KB): a key tile's
 * slot is freed once both consumers' S of it completed, a value tile's once their P V of it
 * did, a tile later. Per 128-key tile a consumer, in its turn at the tensor cores (named
 * barriers 1 and 2, as in sa_wg_kernel), issues S_i = Q K_i^T (eight m64n128k16) and
 * O += P_{i-1} V_{i-1} (eight m64n128k16), lets the other consumer go, waits for S_i, frees
 * K_i's slot, and while P_{i-1} V_{i-1} still runs: the mask and maxima, then 2^(|scale| s +
 * bias - max) in place in the score registers (float32); then it waits for P_{i-1} V_{i-1},
 * frees V_{i-1}'s slot, rescales O and only then rounds the new P into the one set of A
 * fragments the finished P V read (so one set, not two: 64 registers fewer than two sets
 * of 128 keys, which is what lets 128-key tiles fit). Twice the keys a tile halves the
 * barriers, waits, descriptor and bookkeeping instructions a key: on the H200 dense causal
 * attention at 32K issued 4.7 billion instructions instead of 6.2 and ran 15.4 ms instead of
 * 18.2-18.5 (bench/results/h200-wgp-runs/). */
struct WgpRing {
    int sk, sv;
};
constexpr WgpRing WGP_RINGS[] = {{3, 3}, {3, 4}};
constexpr int WGP_NRINGS = sizeof WGP_RINGS / sizeof WGP_RINGS[0];
constexpr int WGP_BN = 128;     /* keys a tile */
constexpr int WGP_THREADS = 384; /* the producer warpgroup, two consumer warpgroups */

template <int SK, int SV>
struct WgpSmem {
    static constexpr uint32_t HALF = WGP_BN * 64 * 2; /* 128 rows x 64 columns: 16 KB */
    static constexpr uint32_t TILE = 2 * HALF;        /* a tile's keys, or values: 32 KB */
    static constexpr uint32_t V0 = SK * TILE;         /* the values' ring */
    static constexpr uint32_t BAR = (SK + SV) * TILE;
    static constexpr uint32_t BYTES = BAR + 2 * (SK + SV) * 8 + 1024; /* + alignment slack */
    static_assert(BYTES <= 232448, "a ring beyond the SM's 227 KB of shared memory");
};

template <typename E, int MODE, int RING>
__global__ void __launch_bounds__(WGP_THREADS, 1)
    sa_wgp_kernel(const __grid_constant__ AttnArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using Ops = MmaOps<E>;
    constexpr int SK = WGP_RINGS[RING].sk, SV = WGP_RINGS[RING].sv, BN = WGP_BN;
    using SM = WgpSmem<SK, SV>;
    constexpr bool BLOCKS = MODE == SA_BLOCKS;
    extern __shared__ unsigned char sa_wg_raw[];
    unsigned char *sm = sa_wg_raw + ((1024u - (smem_u32(sa_wg_raw) & 1023u)) & 1023u);
    uint64_t *fullk = (uint64_t *)(sm + SM::BAR), *fullv = fullk + SK;
    uint64_t *emptyk = fullv + SV, *emptyv = emptyk + SK;
    const uint32_t tid = threadIdx.x, wg = tid >> 7;
    const uint32_t kvh = blockIdx.y;
    const WgScope sc0 = wg_scope<BLOCKS>(a);
    const uint64_t r0 = sc0.r0, nrows = sc0.nrows;
    if (r0 >= nrows) return;

    /* the key tiles: causal, keys 0 .. U - 1; blocks, the kept blocks (one tile each) and then
     * the corrected blocks' pooled rows, 128 a tile */
    uint32_t ntiles, nkt = 0, ncorr = 0, U = 0;
    const int32_t *lkept = nullptr, *lcorr = nullptr;
    ntiles = wg_tiles<BLOCKS, BN>(a, sc0, kvh, nkt, ncorr, U, lkept, lcorr);
    if (ntiles == 0) {
        wg_no_keys<WGP_THREADS>(a, sc0, kvh, tid);
        return;
    }
    if (tid == 0) {
        for (int s = 0; s < SK; s++) {
            mbar_init(&fullk[s], 128); /* each producer thread's copies landed */
            mbar_init(&emptyk[s], 8);  /* one arrival a consumer warp: its S read the slot */
        }
        for (int s = 0; s < SV; s++) {
            mbar_init(&fullv[s], 128);
            mbar_init(&emptyv[s], 8); /* its P V read the slot */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        /* thread tid copies 16-byte chunk c of rows rr, rr + 8, ..., rr + 120 of each tile:
         * a warp's copy covers two whole rows, and the chunk's swizzled position is the same
         * in all sixteen rows (rows 8 apart), 1 KB apart */
        const uint32_t c = tid & 15, rr = tid >> 4;
        const uint32_t soff = (c >> 3) * SM::HALF + rr * 128 + (((c & 7) ^ (rr & 7)) << 4);
        const size_t kst = (size_t)a.Hkv * WG_DIM;
        const E *kb = (const E *)a.keys + (size_t)kvh * WG_DIM + c * 8;
        const E *vb = (const E *)a.values + (size_t)kvh * WG_DIM + c * 8;
        const E *pkb = BLOCKS ? (const E *)a.pkeys + (size_t)kvh * WG_DIM + c * 8 : nullptr;
        const E *pvb = BLOCKS ? (const E *)a.pvalues + (size_t)kvh * WG_DIM + c * 8 : nullptr;
        const uint32_t ring0 = smem_u32(sm);
        const uint32_t lane = tid & 31;
        /* a pooled tile's row ids: lane l loads the id of its warp's row 2 w + (l & 1) + 8 (l >> 1)
         * (the warp's 32 rows), a tile ahead; the thread of rows rr + 8 i takes row i's id from
         * lane 2 i + (rr & 1) */
        const uint32_t lrow = (tid >> 5) * 2 + (lane & 1) + 8 * (lane >> 1), src1 = rr & 1;
        const int64_t step = 8 * (int64_t)kst; /* elements from row r to r + 8 */
        auto tile_base = [&](uint32_t j) -> int64_t { /* first key (or -1: pooled) */
            if (j >= ntiles || (BLOCKS && j >= nkt)) return -1;
            return BLOCKS ? (int64_t)__ldg(lkept + j) * a.block : (int64_t)j * BN;
        };
        auto pooled_id = [&](uint32_t j) -> int32_t {
            if (!BLOCKS || j >= ntiles || j < nkt) return -1;
            const uint32_t sl = (j - nkt) * BN + lrow;
            return sl < ncorr ? __ldg(lcorr + sl) : -1;
        };
        int64_t nbase = tile_base(0);
        int32_t nid = pooled_id(0);
        for (uint32_t j = 0; j < ntiles; j++) {
            const int64_t kbase = nbase;
            const int32_t myid = nid;
            nbase = tile_base(j + 1);
            nid = pooled_id(j + 1);
            const bool pooled = BLOCKS && j >= nkt;
            const int64_t end = BLOCKS ? (int64_t)a.L : (int64_t)U;
            const bool whole = !pooled && kbase + BN <= end;
            /* copies of one tile's rows into the slot at d from kb / pkb (or vb / pvb) */
            auto copy = [&](uint32_t d, const E *b, const E *pb) {
                if (whole) { /* every row a key: one pointer stepped 8 rows at a time */
                    const E *g = b + (kbase + rr) * (int64_t)kst;
#pragma unroll
                    for (int i = 0; i < 16; i++) {
                        cp_async16_at<0, 0>(d + i * 1024, g, 16);
                        g += step;
                    }
                } else if (!pooled) {
#pragma unroll 4
                    for (int i = 0; i < 16; i++) {
                        const int64_t p = kbase + rr + 8 * i;
                        const bool ok = p < end;
                        cp_async16_at<0, 0>(d + i * 1024, ok ? b + p * (int64_t)kst : b,
                                            ok ? 16 : 0);
                    }
                } else {
#pragma unroll 4
                    for (int i = 0; i < 16; i++) {
                        const int32_t id = __shfl_sync(0xffffffffu, myid, 2 * i + src1);
                        cp_async16_at<0, 0>(d + i * 1024,
                                            id >= 0 ? pb + (int64_t)id * (int64_t)kst : pb,
                                            id >= 0 ? 16 : 0);
                    }
                }
            };
            const uint32_t sk = j % SK, sv = j % SV;
            if (j >= (uint32_t)SK) mbar_wait(&emptyk[sk], (j / SK - 1) & 1u);
            copy(ring0 + sk * SM::TILE + soff, kb, pkb);
            mbar_arrive_cp_async(&fullk[sk]);
            if (j >= (uint32_t)SV) mbar_wait(&emptyv[sv], (j / SV - 1) & 1u);
            copy(ring0 + SM::V0 + sv * SM::TILE + soff, vb, pvb);
            mbar_arrive_cp_async(&fullv[sv]);
        }
        /* every copy landed before the producer leaves (none is in a committed group) */
        asm volatile("cp.async.wait_all;\n" ::: "memory");
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");

    const uint32_t ct = tid - 128, lane = ct & 31, warp = ct >> 5, cw = warp >> 2;
    const uint32_t wq = warp & 3, gq = lane >> 2, tq = lane & 3;
    /* this consumer's 64 query rows as the A fragments of S's wgmma (as in sa_wg_kernel) */
    uint32_t qa[WG_DIM / 16][4];
    const uint64_t rb = r0 + cw * 64 + wq * 16 + gq; /* this thread's rows rb, rb + 8 */
    wg_load_queries<E>(a, sc0, kvh, rb, tq, qa);
    int64_t rowpos[2], wgpos;
    wg_positions(a, sc0, rb, r0 + cw * 64, rowpos, wgpos);

    const int my_turn = 1 + (int)cw, their_turn = 2 - (int)cw;
    if (cw == 1) named_bar_arrive(1, 256);

    const uint64_t kdesc0 = sw128_desc(sm), vdesc0 = sw128_desc_mn(sm + SM::V0, SM::HALF);
    const float sc = fabsf(a.scale_log2);
    float o[64];
#pragma unroll
    for (int i = 0; i < 64; i++) o[i] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    uint32_t pa[8][4]; /* P of the previous tile: A fragments of keys 16 kk .. 16 kk + 15 */
#pragma unroll
    for (int kk = 0; kk < 8; kk++)
#pragma unroll
        for (int x = 0; x < 4; x++) pa[kk][x] = 0u;
    float s[64];
    for (uint32_t it = 0; it < ntiles; it++) {
        const bool keyt = !BLOCKS || it < nkt;
        int64_t kp0 = (int64_t)it * BN;
        float bias = 0.f;
        if (BLOCKS) {
            if (keyt)
                kp0 = (int64_t)__ldg(lkept + it) * a.block;
            else {
                kp0 = (int64_t)(it - nkt) * BN;
                bias = a.corr_log2; /* a pooled row stands for B keys */
            }
        }
        /* keys of tile it, values of tile it - 1 (iteration 0: P = 0 times tile 0's values,
         * which stay until that tile's own P V) */
        const uint32_t pv = it == 0 ? 0 : it - 1;
        mbar_wait(&fullk[it % SK], (it / SK) & 1u);
        mbar_wait(&fullv[pv % SV], (pv / SV) & 1u);
        fence_proxy_async_smem();
        const uint32_t ku = (it % SK) * (SM::TILE >> 4), vu = (pv % SV) * (SM::TILE >> 4);
        named_bar_sync(my_turn, 256);
        fence_regs<64>(s);
        fence_regs<64>(o);
        fence_frags(pa);
        wgmma_fence();
        WgmmaRsKOp<E, BN>::run_zero(s, qa[0], desc_add(kdesc0, ku));
#pragma unroll
        for (int kk = 1; kk < WG_DIM / 16; kk++)
            WgmmaRsKOp<E, BN>::run_acc(
                s, qa[kk], desc_add(kdesc0, ku + (((kk >> 2) * SM::HALF + (kk & 3) * 32) >> 4)));
        wgmma_commit();
#pragma unroll
        for (int kk = 0; kk < 8; kk++)
            WgmmaRsOp<E, WG_DIM>::run(o, pa[kk], desc_add(vdesc0, vu + kk * (2048 >> 4)));
        wgmma_commit();
        named_bar_arrive(their_turn, 256);
        wgmma_wait<1>(); /* S done; P V of tile it - 1 may still run */
        fence_regs<64>(s);
        __syncwarp();
        if (lane == 0) mbar_arrive(&emptyk[it % SK]);

        const int64_t end = BLOCKS ? (int64_t)a.L : (int64_t)U;
        const bool open = keyt ? kp0 + BN <= end && kp0 + BN - 1 <= wgpos
                               : kp0 + BN <= (int64_t)ncorr;
        float mx[2] = {-INFINITY, -INFINITY};
        wg_mask_max<BN / 8>(s, open, keyt, rowpos, end, kp0, ncorr, tq, mx);
#pragma unroll
        for (int h = 0; h < 2; h++) mx[h] = fmaxf(m[h], fmaf(mx[h], sc, bias));
        float base[2], corr[2];
        online_max_step(mx, m, l, base, corr);
        const float nb[2] = {bias - base[0], bias - base[1]};
        /* P in place, float32, row sums in l */
#pragma unroll
        for (int j = 0; j < 16; j++) {
            s[4 * j] = fast_exp2(fmaf(s[4 * j], sc, nb[0]));
            s[4 * j + 1] = fast_exp2(fmaf(s[4 * j + 1], sc, nb[0]));
            s[4 * j + 2] = fast_exp2(fmaf(s[4 * j + 2], sc, nb[1]));
            s[4 * j + 3] = fast_exp2(fmaf(s[4 * j + 3], sc, nb[1]));
            l[0] += s[4 * j] + s[4 * j + 1];
            l[1] += s[4 * j + 2] + s[4 * j + 3];
        }
        /* P V of tile it - 1 done: its slot is free, O takes this tile's rescale, and the
         * fragments take this tile's P */
        wgmma_wait<0>();
        fence_regs<64>(o);
        fence_frags(pa);
        if (it > 0) {
            __syncwarp();
            if (lane == 0) mbar_arrive(&emptyv[(it - 1) % SV]);
        }
        wg_rescale(o, corr);
#pragma unroll
        for (int kk = 0; kk < 8; kk++)
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                const int jb = 2 * kk + hh;
                pa[kk][2 * hh] = Ops::pack(s[4 * jb], s[4 * jb + 1]);
                pa[kk][2 * hh + 1] = Ops::pack(s[4 * jb + 2], s[4 * jb + 3]);
            }
    }
    /* O += P V of the last tile: one more turn each */
    {
        const uint32_t last = ntiles - 1;
        mbar_wait(&fullv[last % SV], (last / SV) & 1u);
        fence_proxy_async_smem();
        const uint32_t vu = (last % SV) * (SM::TILE >> 4);
        named_bar_sync(my_turn, 256);
        fence_regs<64>(o);
        fence_frags(pa);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 8; kk++)
            WgmmaRsOp<E, WG_DIM>::run(o, pa[kk], desc_add(vdesc0, vu + kk * (2048 >> 4)));
        wgmma_commit();
        if (cw == 0) named_bar_arrive(their_turn, 256); /* consumer 1 takes no more */
        wgmma_wait<0>();
        fence_regs<64>(o);
    }

    wg_store(a, sc0, kvh, rb, tq, o, l, m);
#else
    (void)a;
    __trap();
#endif
}

/* Whether a call runs on a wgmma kernel (sa_wgp_kernel or sa_wg_kernel, as wg_ring picks):
 * compute capability 9.0, head_dim = v_dim = 128,
 * out 8-byte aligned (float2 stores; lse is written a float at a time), and
 * (SIEVE_CUDA_ATTN_KERNEL unset or "auto") at least one CTA of 128 rows an SM; "wgmma" drops
 * the last condition, "mma" keeps the mma.sync kernel. */
inline bool wg_choose(const sieve__cuda_ctx *c, uint32_t head_dim, uint32_t v_dim,
                      uint64_t ctas, const void *out) {
    if (!c || c->prop.major != 9 || c->prop.minor != 0) return false;
    if (head_dim != WG_DIM || v_dim != WG_DIM) return false;
    if ((uintptr_t)out & 7) return false;
    const char *e = getenv("SIEVE_CUDA_ATTN_KERNEL");
    if (e && !strcmp(e, "mma")) return false;
    if (e && !strcmp(e, "wgmma")) return true;
    return ctas >= (uint64_t)c->prop.multiProcessorCount;
}

/* Launches kern (THREADS threads, BYTES of dynamic shared memory): the causal mode over
 * ceil(T R / 128) CTAs a kv head (chunks), the block mode over a.tiles tiles x chunks
 * (ceil(B R / 128)) a kv head, at most SA_GRID_Z_MAX tiles a launch. 0 or SIEVE_EDEVICE. */
template <int MODE, typename K>
int launch_wg_grid(K kern, uint32_t threads, uint32_t bytes, const AttnArgs &base,
                   uint32_t chunks, cudaStream_t s) {
    SIEVE_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)bytes));
    const uint32_t nz = MODE == SA_BLOCKS ? base.tiles : 1;
    for (uint32_t g0 = 0; g0 < nz; g0 += SA_GRID_Z_MAX) {
        AttnArgs a = base;
        a.group0 = g0;
        const unsigned z = nz - g0 < SA_GRID_Z_MAX ? nz - g0 : SA_GRID_Z_MAX;
        kern<<<dim3(chunks, a.Hkv, z), threads, bytes, s>>>(a);
        SIEVE_CUDA_LAUNCH_CHECK();
    }
    return 0;
}

/* Launches sa_wg_kernel with ring RING (launch_wg_grid). */
template <typename E, int MODE, int RING>
int launch_wg_ring(const AttnArgs &base, uint32_t chunks, cudaStream_t s) {
    return launch_wg_grid<MODE>(sa_wg_kernel<E, MODE, RING>, WG_THREADS,
                                WgSmem<WG_RINGS[RING].st>::BYTES, base, chunks, s);
}

/* Launches sa_wgp_kernel with rings RING (launch_wg_grid). */
template <typename E, int MODE, int RING>
int launch_wgp_ring(const AttnArgs &base, uint32_t chunks, cudaStream_t s) {
    return launch_wg_grid<MODE>(sa_wgp_kernel<E, MODE, RING>, WGP_THREADS,
                                WgpSmem<WGP_RINGS[RING].sk, WGP_RINGS[RING].sv>::BYTES, base,
                                chunks, s);
}

/* The kernel and its rings, by SIEVE_CUDA_WG_RING (a tuning hook; a name not listed: the
 * default): "5x2", "6x2", "6x3" name sa_wg_kernel's rings (64-key tiles, STxLA), "k3v3" and
 * "k3v4" sa_wgp_kernel's (128-key tiles, SK and SV). Every ring of one kernel gives the same
 * answer bit for bit; the two kernels agree up to float32 rounding. The default is
 * sa_wgp_kernel's k3v3 where it runs (the causal mode, and the block mode with blocks of
 * 128), else sa_wg_kernel's 5x2. Returns the index into WG_RINGS, or WG_NRINGS + the index
 * into WGP_RINGS. */
inline int wg_ring(bool k128) {
    const char *e = getenv("SIEVE_CUDA_WG_RING");
    if (e) {
        for (int r = 0; r < WG_NRINGS; r++) {
            char name[16];
            snprintf(name, sizeof name, "%dx%d", WG_RINGS[r].st, WG_RINGS[r].la);
            if (!strcmp(e, name)) return r;
        }
        for (int r = 0; k128 && r < WGP_NRINGS; r++) {
            char name[16];
            snprintf(name, sizeof name, "k%dv%d", WGP_RINGS[r].sk, WGP_RINGS[r].sv);
            if (!strcmp(e, name)) return WG_NRINGS + r;
        }
    }
    return k128 ? WG_NRINGS : WG_RING_DEFAULT;
}

template <typename E, int MODE>
int launch_wg_typed(const AttnArgs &a, uint32_t chunks, cudaStream_t s) {
    static_assert(WG_NRINGS == 3 && WGP_NRINGS == 2, "a case for each ring");
    switch (wg_ring(MODE != SA_BLOCKS || a.block == WGP_BN)) {
    case 1: return launch_wg_ring<E, MODE, 1>(a, chunks, s);
    case 2: return launch_wg_ring<E, MODE, 2>(a, chunks, s);
    case WG_NRINGS: return launch_wgp_ring<E, MODE, 0>(a, chunks, s);
    case WG_NRINGS + 1: return launch_wgp_ring<E, MODE, 1>(a, chunks, s);
    default: return launch_wg_ring<E, MODE, 0>(a, chunks, s);
    }
}

template <int MODE>
int launch_wg(const AttnArgs &a, sieve_dtype dtype, uint32_t chunks, cudaStream_t s) {
    return dtype == SIEVE_DTYPE_BF16 ? launch_wg_typed<__nv_bfloat16, MODE>(a, chunks, s)
                                     : launch_wg_typed<__half, MODE>(a, chunks, s);
}

} // namespace

/* indexer.cu: the CUDA backend of the indexer top-k (sieve_kernels.h, "sparse attention:
 * indexer top-k").
 *
 * Owns: the scoring tile every mode shares (wgmma, sm_90a), the propose, select and
 * materialized-select kernels, and the host flow: sample -> proposed boundaries -> one gated
 * pass -> certification and sort -> whole-row recovery of the queries not certified.
 * Must not: know about the store or the k-NN search's state; synchronise the host more than
 * once on the fused path before the recovery (the certification's report).
 *
 * The scoring tile. A CTA of two warpgroups holds 128 head rows of query tokens resident in
 * shared memory (each token's heads padded to Hp = 16, 32 or 64 rows, so 128 / Hp tokens)
 * and streams a range of keys past them, 128 keys a tile: keys are the wgmma A operand
 * (M = 64 a warpgroup), the head rows the B operand (N = 128), both K-major in
 * 128-byte-swizzled shared memory, the keys through a 4-slot cp.async ring of 64-wide chunks
 * of head_dim. A work unit is (token tile, key range); the ranges are sized so the units
 * fill the GPU in nearly whole waves. Loading the queries once a unit halves the bytes per
 * product against a tile that reloads both operands (measured: 17.4 -> 12.2 ms at the target
 * shape, bench/RESULTS.md). With the keys as rows of the product a thread holds two keys
 * and, for each, a quarter of every token's head rows in its registers: the epilogue folds them
 * (w relu(dot), summed over the thread's heads in a fixed tree) and the four lanes of a quad
 * finish each sum by a two-step reduce-scatter, so every score is ((P0 + P1) + (P2 + P3)) of
 * the quad's partial sums: the same order of additions for every key, and the GATE and MAT
 * modes score a key bit for bit alike (the same code at the same tile position). With
 * the queries as rows instead, a tile also cost a 16-row reduce-scatter and a shared-memory
 * combine: the gate scan at the target shape ran 5.59 against 4.14 billion instructions,
 * 10.6 against 8.4 ms (bench/RESULTS.md). Then:
 *   SAMPLE  writes the score of each key of a fixed-stride sample (-inf where not visible);
 *   GATE    appends (score, key) of every visible key at or above the query's proposed
 *           boundary to its candidate buffer (one atomic a warp and token), counting past
 *           the capacity;
 *   MAT     writes every score of the row (-inf where not visible): the materialized path.
 * The score matrix is never written on the fused path.
 */
#include <cub/cub.cuh>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"
#include "prims.cuh"
#include "wgmma.cuh"

using namespace sieve_cuda;

namespace {

constexpr int IX_SAMPLE = 0, IX_GATE = 1, IX_MAT = 2;
constexpr int IX_BQ = 128; /* head rows a tile (wgmma N, both warpgroups) */
constexpr int IX_BR = 128; /* keys a tile: two warpgroups of 64 (wgmma M) */
constexpr int IX_KC = 64;  /* elements a K chunk: one 128-byte swizzle row */
constexpr int IX_ST = 4;   /* key pipeline stages */
constexpr int IX_KT_MAX = 4; /* K chunks of the resident query tile: head_dim up to 256 */
/* dynamic shared memory: the resident query tile (KT chunks) and the key ring */
constexpr size_t ix_smem(int kt) { return (size_t)(kt * IX_BQ + IX_ST * IX_BR) * IX_KC * 2 + 1024; }
constexpr int IX_SORT_T = 512, IX_SORT_I = 16;
constexpr uint32_t IX_CAP_MAX = (uint32_t)IX_SORT_T * IX_SORT_I; /* what one block sorts */
constexpr int IX_SEL_T = 1024;         /* the materialized select's threads a row */
constexpr uint32_t IX_SAMPLE_DEFAULT = 4096;
constexpr size_t IX_RECOVER_BYTES = (size_t)256 << 20; /* a recovery chunk's row buffers */

/* Path bytes (sieve_search_path values). */
constexpr uint8_t P_CERT = SIEVE_PATH_CERTIFIED, P_UNDER = SIEVE_PATH_UNDERFILL,
                  P_OVER = SIEVE_PATH_OVERFLOW, P_DIRECT = SIEVE_PATH_DIRECT;

/* Which keys query token qt sees: 0 .. vis - 1 (causal visibility is a prefix). */
struct IxVis {
    uint32_t L, causal, pos0, k;
    __host__ __device__ uint32_t visible(uint32_t qt) const {
        if (!causal) return L;
        uint64_t v = (uint64_t)pos0 + qt + 1;
        return v < L ? (uint32_t)v : L;
    }
    __host__ __device__ uint32_t need(uint32_t qt) const {
        uint32_t v = visible(qt);
        return v < k ? v : k;
    }
};

struct IxParams {
    const void *q;    /* [T][H][D] */
    const void *keys; /* [L][D] */
    const float *w;   /* [T][H] */
    uint32_t H, hp_log2, D;  /* heads, log2 of the padded heads Hp, head_dim */
    IxVis vis;
    uint32_t ntok;        /* tokens in this launch */
    const uint32_t *tmap; /* launch token i -> query token (NULL: i) */
    uint32_t ntt;         /* token tiles: ceil(ntok / (128 / Hp)) */
    uint32_t nsplit;      /* key ranges a token tile is split into (work units: ntt x nsplit) */
    uint32_t kt_per;      /* key tiles a range */
    uint32_t nkeys;       /* keys in this launch: the sample's S, or L */
    const uint32_t *s_rows; /* SAMPLE: logical key i is key s_rows[i] (ascending) */
    float *out;           /* SAMPLE, MAT: [ntok][ld] */
    uint64_t ld;
    const float *thr;     /* GATE: [T] proposed boundaries */
    uint32_t *cnt;        /* GATE: [T] admitted (counted past cap too) */
    uint64_t *cand;       /* GATE: [T][cap] packed (score, key) */
    uint32_t cap;
};


template <typename E, int MODE, int HPL>
__global__ void __launch_bounds__(256, 2) ix_scan_kernel(const __grid_constant__ IxParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int KC = IX_KC, BQ = IX_BQ, BR = IX_BR, ST = IX_ST;
    constexpr int AHEAD = ST - 2; /* key chunks loading ahead of the one computed */
    constexpr int HP = 1 << HPL;  /* head rows a token */
    constexpr int TPT = BQ / HP;  /* tokens a tile: 8, 4 or 2 */
    constexpr int NPT = HP / 8;   /* accumulator steps of n a token: 2, 4 or 8 */
    constexpr int NL = TPT / 2;   /* (key, token) scores a lane holds after the sum: 4, 2, 1 */
    static_assert(HPL >= 4 && HPL <= 6, "Hp = 16, 32 or 64");
    extern __shared__ unsigned char smem_raw[];
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(smem_raw);
    unsigned char *sm = smem_raw + ((1024u - (sbase & 1023u)) & 1023u);
    const int KT = (int)((p.D + KC - 1) / KC);
    E *Qs = (E *)sm;                               /* [KT][BQ][64]: the unit's queries */
    E *Rs = (E *)(sm + (size_t)KT * BQ * KC * 2);  /* [ST][BR][64]: the key ring */
    __shared__ __align__(16) float wsm[BQ];        /* the unit's weights by head row */

    const uint32_t nkt = (p.nkeys + BR - 1) / BR;
    const uint32_t units = p.ntt * p.nsplit;
    const E *qg = (const E *)p.q;
    const E *kg = (const E *)p.keys;
    const int lc = threadIdx.x & 7, lr = threadIdx.x >> 3; /* 16-byte column, first row */
    const int wg = threadIdx.x / 128;
    const int lane = threadIdx.x % 32, wq = (threadIdx.x % 128) / 32;
    const int g = lane / 4, tq = lane % 4;
    /* this thread's keys in a tile: rows 16 wq + g + 8h of its warpgroup's 64; after the
       sum over heads it holds row h = tq & 1 (kx below) for tokens 2m + (tq >> 1) */
    const uint32_t kx = (uint32_t)(64 * wg + 16 * wq + g + 8 * (tq & 1));
    /* the shared-memory address of this thread's first copied row in ring slot 0 (rows 32
       apart share its swizzle, which repeats every 8 rows) */
    const uint32_t rs0 =
        smem_u32(sm + (size_t)KT * BQ * KC * 2) + 2u * (uint32_t)(lr * KC + ((lc ^ (lr & 7)) << 3));
    auto tok = [&](uint32_t i) { return p.tmap ? p.tmap[i] : i; };

    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; i++) acc[i] = 0.f;

    for (uint32_t u = blockIdx.x; u < units; u += gridDim.x) {
        const uint32_t tok0 = (u / p.nsplit) * TPT;
        const uint32_t kt0 = (u % p.nsplit) * p.kt_per;
        if (kt0 >= nkt) continue;
        const uint32_t nt = min(p.kt_per, nkt - kt0); /* key tiles of this unit */
        const uint32_t total = nt * (uint32_t)KT;      /* key chunks */

        /* the unit's query tile, resident for all its key tiles: rows and columns outside
           the data load as zeros (src-size 0), so padded heads and tokens score
           0 * relu(0) = 0, never a NaN from stale shared memory */
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const uint32_t m = lr + 32 * j; /* row: token m / Hp, head m % Hp */
            const uint32_t ti = tok0 + (m >> HPL), hd = m & (HP - 1);
            const E *qp = ti < p.ntok && hd < p.H ? qg + ((size_t)tok(ti) * p.H + hd) * p.D : nullptr;
            for (int kt = 0; kt < KT; kt++) {
                const int k0 = kt * KC + lc * 8;
                const bool ok = qp && k0 < (int)p.D;
                cp_async16(Qs + (size_t)kt * BQ * KC + m * KC + ((lc ^ (m & 7)) << 3),
                           ok ? (const void *)(qp + k0) : p.q, ok ? 16 : 0);
            }
        }
        cp_async_commit();
        /* the unit's weights by head row (0 for padded heads and tokens): read by every
           thread after the first chunk's block barrier; the previous unit's reads ended
           before its closing barrier */
        if (threadIdx.x < (unsigned)BQ) {
            const uint32_t m = threadIdx.x, ti = tok0 + (m >> HPL), hd = m & (HP - 1);
            wsm[m] = ti < p.ntok && hd < p.H ? __ldg(p.w + (size_t)tok(ti) * p.H + hd) : 0.f;
        }
        /* the key loads run ahead of the chunks computed: a cursor (tile, chunk, slot) that
           steps by one chunk a call. The gate and materialized scans read keys in order:
           one pointer to this thread's first row steps along whole tiles, its other rows
           32 rows apart; the sample reads its keys through the sample's row table */
        uint32_t ld_slot = 0;
        int ld_kc = 0;
        uint32_t ld_row = kt0 * BR + (uint32_t)lr; /* this thread's first row in the tile */
        const E *ld_ptr = kg + (size_t)ld_row * p.D + lc * 8;
        const size_t rstep = (size_t)32 * p.D;
        auto load_next = [&]() {
            const int k0 = ld_kc * KC + lc * 8;
            const uint32_t rs = rs0 + ld_slot * (uint32_t)(BR * KC * 2);
            const bool kin = k0 < (int)p.D;
            constexpr uint32_t RB = 32 * KC * 2; /* bytes between a thread's rows */
            if constexpr (MODE == IX_SAMPLE) {
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const uint32_t li = ld_row + 32u * (uint32_t)j;
                    const bool ok = li < p.nkeys && kin;
                    const uint32_t phys = ok ? __ldg(p.s_rows + li) : 0u;
                    cp_async16_at<0, 0>(rs + RB * (uint32_t)j,
                                        ok ? (const void *)(kg + (size_t)phys * p.D + k0)
                                           : p.keys,
                                        ok ? 16 : 0);
                }
            } else {
                const E *src = ld_ptr + ld_kc * KC;
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const bool ok = ld_row + 32u * (uint32_t)j < p.nkeys && kin;
                    cp_async16_at<0, 0>(rs + RB * (uint32_t)j, ok ? (const void *)src : p.keys,
                                        ok ? 16 : 0);
                    src += rstep;
                }
            }
            ld_slot = ld_slot + 1 == (uint32_t)ST ? 0u : ld_slot + 1;
            if (++ld_kc == KT) {
                ld_kc = 0;
                ld_row += BR;
                ld_ptr += (size_t)BR * p.D;
            }
        };
#pragma unroll
        for (int s = 0; s < AHEAD; s++) {
            if ((uint32_t)s < total) load_next();
            cp_async_commit();
        }
        /* this thread's tokens (2m + (tq >> 1) of the tile): the query, its visible keys
           and its boundary */
        uint32_t u_qt[NL], u_vis[NL];
        float u_thr[NL];
#pragma unroll
        for (int m = 0; m < NL; m++) {
            const uint32_t tiu = tok0 + 2u * (uint32_t)m + ((uint32_t)tq >> 1);
            const bool tv = tiu < p.ntok;
            u_qt[m] = tv ? tok(tiu) : 0u;
            u_vis[m] = tv ? p.vis.visible(u_qt[m]) : 0u; /* 0: no key of this slot is visible */
            u_thr[m] = MODE == IX_GATE && tv ? __ldg(p.thr + u_qt[m]) : 0.f;
        }
        uint32_t slot = 0; /* the ring slot of the chunk computed */
        /* slot 0's keys of this warpgroup, and the query tile's first chunk */
        const uint64_t kdesc0 = sw128_desc(Rs + (size_t)wg * 64 * KC), qdesc0 = sw128_desc(Qs);
        for (uint32_t it = 0; it < nt; it++) {
            for (int kc = 0; kc < KT; kc++) {
                const uint32_t c = it * (uint32_t)KT + (uint32_t)kc;
                /* chunk c landed (and the query tile, older), visible to wgmma */
                cp_async_wait<AHEAD - 1>();
                fence_proxy_async_smem();
                __syncthreads();
                /* slot (c + AHEAD) % ST is free: every warpgroup waited for the wgmma group
                   that read it (chunk c + AHEAD - ST <= c - 2) */
                if (c + AHEAD < total) load_next();
                cp_async_commit();
                /* keys are the A operand (this warpgroup's 64), the tile's 128 head rows B;
                   16 elements along K are 2 units of the descriptors' address */
                const uint32_t ku = slot * (uint32_t)(BR * KC * 2 / 16);
                const uint32_t qu = (uint32_t)kc * (uint32_t)(BQ * KC * 2 / 16);
                slot = slot + 1 == (uint32_t)ST ? 0u : slot + 1;
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < KC; kk += 16)
                    WgmmaOp<E, BQ>::run(acc, desc_add(kdesc0, ku + kk / 8),
                                        desc_add(qdesc0, qu + kk / 8), kc > 0 || kk > 0);
                wgmma_commit();
                wgmma_wait<1>();
            }
            wgmma_wait<0>();

            /* accumulator 4n + 2h + j: key 16 wq + g + 8h of this warpgroup, head row
               8n + 2tq + j (token n / NPT). Each thread folds its head rows of each token
               and key, w relu(dot), summed over n in a fixed tree; then the four lanes of a
               quad, which hold the token's other head rows, sum by a reduce-scatter over
               lane bits 0 and 1 (h, then the token's lowest bit), so every score is
               ((P0 + P1) + (P2 + P3)) of the quad's partial sums, whichever lane ends with
               it: one order of additions for every key */
            float v[2 * TPT]; /* [token][h] */
#pragma unroll
            for (int t = 0; t < TPT; t++) {
                float s[NPT][2];
#pragma unroll
                for (int i = 0; i < NPT; i++) {
                    const int n = t * NPT + i;
                    const float2 w = *(const float2 *)&wsm[8 * n + 2 * tq];
#pragma unroll
                    for (int h = 0; h < 2; h++)
                        s[i][h] = fmaf(w.y, fmaxf(acc[n * 4 + 2 * h + 1], 0.f),
                                       w.x * fmaxf(acc[n * 4 + 2 * h], 0.f));
                }
#pragma unroll
                for (int w2 = 1; w2 < NPT; w2 *= 2)
#pragma unroll
                    for (int i = 0; i < NPT; i += 2 * w2)
#pragma unroll
                        for (int h = 0; h < 2; h++) s[i][h] += s[i + w2][h];
                v[2 * t] = s[0][0];
                v[2 * t + 1] = s[0][1];
            }
            float u1[TPT]; /* after lane bit 0: this lane's h (tq & 1), every token */
            {
                const bool up = (tq & 1) != 0;
#pragma unroll
                for (int t = 0; t < TPT; t++) {
                    const float mine = up ? v[2 * t + 1] : v[2 * t];
                    const float give = up ? v[2 * t] : v[2 * t + 1];
                    u1[t] = mine + __shfl_xor_sync(0xffffffffu, give, 1);
                }
            }
            float sc[NL]; /* after lane bit 1: tokens 2m + (tq >> 1) */
            {
                const bool up = (tq & 2) != 0;
#pragma unroll
                for (int m = 0; m < NL; m++) {
                    const float mine = up ? u1[2 * m + 1] : u1[2 * m];
                    const float give = up ? u1[2 * m] : u1[2 * m + 1];
                    sc[m] = mine + __shfl_xor_sync(0xffffffffu, give, 2);
                }
            }
            const uint32_t li = (kt0 + it) * BR + kx;
            const uint32_t phys =
                MODE == IX_SAMPLE ? (li < p.nkeys ? __ldg(p.s_rows + li) : 0u) : li;
#pragma unroll
            for (int m = 0; m < NL; m++) {
                /* as the CPU does: NaN ranks last (-inf), -0 is +0 */
                const float s = sc[m] != sc[m] ? -INFINITY : sc[m] + 0.0f;
                /* u_vis is 0 for a slot past the launch's tokens; li < nkeys: a real key */
                const bool vis = li < p.nkeys && phys < u_vis[m];
                if (MODE == IX_GATE) {
                    /* the warp holds 16 keys of two tokens (lanes with tq < 2: token 2m,
                       the others 2m + 1): one atomic a token, both issued together */
                    const bool pass = vis && s >= u_thr[m];
                    const unsigned bal = __ballot_sync(0xffffffffu, pass);
                    if (bal) {
                        const unsigned mine = bal & ((tq & 2) ? 0xccccccccu : 0x33333333u);
                        const int lead = mine ? __ffs(mine) - 1 : 0;
                        uint32_t base = 0;
                        if (mine && lane == lead)
                            base = atomicAdd(p.cnt + u_qt[m], (uint32_t)__popc(mine));
                        base = __shfl_sync(0xffffffffu, base, lead);
                        if (pass) {
                            const uint32_t pos =
                                base + (uint32_t)__popc(mine & ((1u << lane) - 1u));
                            if (pos < p.cap)
                                p.cand[(size_t)u_qt[m] * p.cap + pos] = pack_cand(s, phys);
                        }
                    }
                } else {
                    const uint32_t tiu = tok0 + 2u * (uint32_t)m + ((uint32_t)tq >> 1);
                    if (tiu < p.ntok && li < p.nkeys)
                        p.out[(size_t)tiu * p.ld + li] = vis ? s : -INFINITY;
                }
            }
        }
        /* every load of this unit landed and every warpgroup is done with the query tile
           and the weights before the next unit overwrites them */
        cp_async_wait<0>();
        __syncthreads();
    }
#else
    (void)p;
    __trap();
#endif
}

/* Radix search over the ordered bits of a block's keys (ord_of): the ordinal of the
 * rank-th largest (1-based) among the n floats at keys, and how many keys equal to it are
 * among the rank largest (*eq_take). blockDim.x threads; hist: 256 shared words. */
__device__ uint32_t block_rank_ord(const float *keys, uint32_t n, uint32_t rank,
                                   uint32_t *hist, uint32_t *shared2, uint32_t *eq_take) {
    uint32_t prefix = 0, mask = 0, rem = rank;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0;
        __syncthreads();
        for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
            const uint32_t o = ord_of(keys[i]);
            if ((o & mask) == prefix) atomicAdd(&hist[(o >> shift) & 255u], 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            uint32_t cum = 0, d = 255;
            for (;; d--) {
                if (cum + hist[d] >= rem || d == 0) break;
                cum += hist[d];
            }
            shared2[0] = prefix | (d << shift);
            shared2[1] = rem - cum;
        }
        __syncthreads();
        prefix = shared2[0];
        rem = shared2[1];
        mask |= 255u << shift;
        __syncthreads(); /* shared2 and hist are rewritten next pass */
    }
    *eq_take = rem;
    return prefix;
}

/* The sampled keys: key i of S is floor((i L + o) / S) for an offset o in [0, L) (a
 * fractional stride: the sample spans the whole row for every L and S, as on the CPU). */
__host__ __device__ inline uint32_t sample_key(uint64_t i, uint32_t S, uint32_t L, uint32_t o) {
    return (uint32_t)((i * L + o) / S);
}
/* How many of those keys lie below v (a prefix: they ascend): i L + o < v S. */
__host__ __device__ inline uint32_t sampled_below(uint32_t v, uint32_t S, uint32_t L, uint32_t o) {
    const uint64_t vs = (uint64_t)v * S;
    if (vs <= o) return 0;
    const uint64_t n = (vs - 1 - o) / L + 1;
    return n < S ? (uint32_t)n : S;
}

__global__ void ix_sample_rows_kernel(uint32_t *rows, uint32_t S, uint32_t L, uint32_t o) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < S) rows[i] = sample_key(i, S, L, o);
}

/* The proposed boundary of each query token (one block each): the sample key of descending
 * rank J (0-based) among the sampled keys it sees, or -inf when it sees no more than J. */
__global__ void __launch_bounds__(256) ix_propose_kernel(const float *sample, uint32_t S,
                                                         uint32_t s_off, IxVis vis, uint32_t J,
                                                         float *thr) {
    __shared__ uint32_t hist[256];
    __shared__ uint32_t sh[2];
    const uint32_t t = blockIdx.x;
    const uint32_t v = vis.visible(t);
    const uint32_t St = sampled_below(v, S, vis.L, s_off); /* a prefix of the sample */
    if (J >= St) {
        if (threadIdx.x == 0) thr[t] = -INFINITY;
        return;
    }
    uint32_t eq;
    const uint32_t o = block_rank_ord(sample + (size_t)t * S, St, J + 1, hist, sh, &eq);
    if (threadIdx.x == 0) thr[t] = float_of_ord(o);
}

/* Sorts the n (<= IX_CAP_MAX) packed candidates at buf (ascending: score descending, key
 * ascending) and writes the first `need` of them as query qt's results, the rest of its k
 * slots padded with -1 / NaN. The sort orders each candidate repacked as
 * (~ord(score) << b) | key over 32 + b bits, b the bits of the largest key index (17 at
 * 131,072 keys): 13 radix passes there instead of the pair's 16; and a block of 4,096 slots
 * where the candidates fit, else 8,192. */
template <int I>
using IxSort = cub::BlockRadixSort<uint64_t, IX_SORT_T, I>;
constexpr size_t IX_SORT_SMEM = sizeof(typename IxSort<IX_SORT_I>::TempStorage);

template <int I>
__device__ void sort_write_i(unsigned char *smem, const uint64_t *buf, uint32_t n, uint32_t need,
                             uint32_t k, uint32_t qt, int b, int32_t *oidx, float *osc) {
    uint64_t key[I];
#pragma unroll
    for (int j = 0; j < I; j++) {
        const uint32_t i = (uint32_t)j * IX_SORT_T + threadIdx.x;
        key[j] = ~0ull; /* past every real candidate: no score's ~ord is all ones */
        if (i < n) {
            const uint64_t v = buf[i];
            key[j] = ((v >> 32) << b) | (uint32_t)v;
        }
    }
    IxSort<I>(*reinterpret_cast<typename IxSort<I>::TempStorage *>(smem))
        .SortBlockedToStriped(key, 0, 32 + b);
    int32_t *ri = oidx + (size_t)qt * k;
    float *rs = osc + (size_t)qt * k;
    const uint64_t imask = (1ull << b) - 1;
#pragma unroll
    for (int j = 0; j < I; j++) {
        const uint32_t r = (uint32_t)j * IX_SORT_T + threadIdx.x;
        if (r < need) {
            ri[r] = (int32_t)(key[j] & imask);
            rs[r] = float_of_ord(~(uint32_t)(key[j] >> b));
        }
    }
}

__device__ void sort_write(unsigned char *smem, const uint64_t *buf, uint32_t n, uint32_t need,
                           uint32_t k, uint32_t L, uint32_t qt, int32_t *oidx, float *osc,
                           uint32_t *ocnt) {
    const int b = 32 - __clz(L > 1 ? L - 1 : 1u);
    if (n <= (uint32_t)IX_SORT_T * (IX_SORT_I / 2))
        sort_write_i<IX_SORT_I / 2>(smem, buf, n, need, k, qt, b, oidx, osc);
    else
        sort_write_i<IX_SORT_I>(smem, buf, n, need, k, qt, b, oidx, osc);
    const float nan = __int_as_float(0x7fc00000);
    for (uint32_t r = need + threadIdx.x; r < k; r += IX_SORT_T) {
        oidx[(size_t)qt * k + r] = -1;
        osc[(size_t)qt * k + r] = nan;
    }
    if (ocnt && threadIdx.x == 0) ocnt[qt] = need;
}

/* Certification and select of the fused path (one block a query token): a token that kept
 * at least min(k, visible) and at most cap candidates is sorted and written; any other is
 * marked for recovery (paths[t] = UNDERFILL or OVERFLOW) and written later. */
__global__ void __launch_bounds__(IX_SORT_T) ix_select_kernel(const uint64_t *cand, uint32_t cap,
                                                              const uint32_t *cnt, const float *thr,
                                                              IxVis vis, int32_t *oidx, float *osc,
                                                              uint32_t *ocnt, uint8_t *paths) {
    extern __shared__ __align__(16) unsigned char sort_smem[];
    const uint32_t t = blockIdx.x;
    const uint32_t n = cnt[t], need = vis.need(t);
    if (n < need || n > cap) {
        if (threadIdx.x == 0) paths[t] = n < need ? P_UNDER : P_OVER;
        return;
    }
    if (threadIdx.x == 0) paths[t] = thr[t] == -INFINITY ? P_DIRECT : P_CERT;
    sort_write(sort_smem, cand + (size_t)t * cap, n, need, vis.k, vis.L, t, oidx, osc, ocnt);
}

/* The materialized select (one block a row of the score matrix, row i for query token
 * tmap[i]): the need-th largest score by a radix search over the row, then every key above it
 * and, of the keys equal to it, the ones with the smallest indices, packed into buf[i][0 ..
 * need) (unordered; buf[i][need .. k) set empty). */
__global__ void __launch_bounds__(IX_SEL_T) ix_matsel_kernel(const float *mat, uint64_t ld,
                                                             const uint32_t *tmap, IxVis vis,
                                                             uint64_t *buf) {
    using Scan = cub::BlockScan<uint32_t, IX_SEL_T>;
    __shared__ typename Scan::TempStorage scan_tmp;
    __shared__ uint32_t hist[256];
    __shared__ uint32_t sh[2];
    __shared__ uint32_t n_gt;
    const uint32_t i = blockIdx.x;
    const uint32_t qt = tmap ? tmap[i] : i;
    const uint32_t v = vis.visible(qt), need = vis.need(qt);
    const float *row = mat + (size_t)i * ld;
    uint64_t *out = buf + (size_t)i * vis.k;
    for (uint32_t r = need + threadIdx.x; r < vis.k; r += IX_SEL_T) out[r] = ~0ull;
    uint32_t take;
    const uint32_t kth = block_rank_ord(row, v, need, hist, sh, &take);
    if (threadIdx.x == 0) n_gt = 0;
    __syncthreads();
    for (uint32_t j = threadIdx.x; j < v; j += IX_SEL_T) {
        const float x = row[j];
        if (ord_of(x) > kth) out[atomicAdd(&n_gt, 1u)] = pack_cand(x, j);
    }
    /* the equal ones in index order: the first `take` of them */
    const uint32_t gt = need - take;
    uint32_t base = 0;
    for (uint32_t c0 = 0; c0 < v && base < take; c0 += IX_SEL_T) {
        const uint32_t j = c0 + threadIdx.x;
        const float x = j < v ? row[j] : 0.f;
        const uint32_t f = j < v && ord_of(x) == kth ? 1u : 0u;
        uint32_t rank, agg;
        Scan(scan_tmp).ExclusiveSum(f, rank, agg);
        if (f && base + rank < take) out[gt + base + rank] = pack_cand(x, j);
        base += agg;
        __syncthreads(); /* scan_tmp is reused */
    }
}

/* Sorted candidates already in buf ([rows][k], segment-sorted): the results of row i's query. */
__global__ void ix_write_kernel(const uint64_t *buf, uint32_t rows, const uint32_t *tmap,
                                IxVis vis, int32_t *oidx, float *osc, uint32_t *ocnt) {
    const float nan = __int_as_float(0x7fc00000);
    const uint64_t total = (uint64_t)rows * vis.k;
    for (uint64_t e = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; e < total;
         e += (uint64_t)gridDim.x * blockDim.x) {
        const uint32_t i = (uint32_t)(e / vis.k), r = (uint32_t)(e % vis.k);
        const uint32_t qt = tmap ? tmap[i] : i;
        const uint32_t need = vis.need(qt);
        const uint64_t o = (uint64_t)qt * vis.k + r;
        if (r < need) {
            oidx[o] = (int32_t)cand_row(buf[e]);
            osc[o] = cand_key(buf[e]);
        } else {
            oidx[o] = -1;
            osc[o] = nan;
        }
        if (ocnt && r == 0) ocnt[qt] = need;
    }
}

/* buf rows already hold `need` candidates each (ix_matsel_kernel): sort and write (k <=
 * IX_CAP_MAX). */
__global__ void __launch_bounds__(IX_SORT_T) ix_sortrows_kernel(const uint64_t *buf,
                                                                const uint32_t *tmap, IxVis vis,
                                                                int32_t *oidx, float *osc,
                                                                uint32_t *ocnt) {
    extern __shared__ __align__(16) unsigned char sort_smem[];
    const uint32_t i = blockIdx.x;
    const uint32_t qt = tmap ? tmap[i] : i;
    const uint32_t need = vis.need(qt);
    sort_write(sort_smem, buf + (size_t)i * vis.k, need, need, vis.k, vis.L, qt, oidx, osc, ocnt);
}

__global__ void ix_fill_kernel(float *x, uint32_t n, float v) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v;
}

__global__ void ix_offsets_kernel(int64_t *off, uint32_t rows, uint32_t k) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= rows) off[i] = (int64_t)i * k;
}

/* ------------------------------------------------------------------ host side */

/* Everything one call decides before it launches; scratch offsets included. */
struct IxPlan {
    uint32_t Hp, hp_log2;
    IxVis vis;
    int mode_thr;          /* 0: sampled boundaries, 1: forced, 2: -inf (direct) */
    uint32_t S, s_off, J;
    uint32_t cap;
    bool fused;            /* false: every token scored whole (k or the expected admissions
                              past what one block sorts) */
    uint32_t R;            /* recovery tokens a chunk */
    bool seg_sort;         /* recovery sorts by cub's segmented sort (k > IX_CAP_MAX) */
    size_t cub_bytes;
    size_t o_sample, o_srows, o_thr, o_cnt, o_cand, o_paths, o_tmap, o_mat, o_buf, o_buf2,
        o_off, o_cub, total;
};

int check_shape(const sieve__cuda_ctx *c, const sieve_indexer_params *p) {
    if (p->dtype != SIEVE_DTYPE_F16 && p->dtype != SIEVE_DTYPE_BF16) return SIEVE_ENOTSUP;
    if (p->heads > 64 || p->head_dim % 8 || p->head_dim > (uint32_t)IX_KT_MAX * IX_KC)
        return SIEVE_ENOTSUP;
    if (c && !(c->prop.major == 9 && c->prop.minor == 0)) return SIEVE_ENOTSUP; /* sm_90a */
    return 0;
}

/* The plan of one call (materialized: every token scored whole, in one chunk). Errors:
 * SIEVE_EINVAL where a buffer's size does not fit in size_t, SIEVE_EDEVICE. */
int make_plan(const sieve_indexer_params *p, bool materialized, IxPlan *pl) {
    memset(pl, 0, sizeof *pl);
    const uint32_t H = p->heads;
    pl->Hp = H <= 16 ? 16 : H <= 32 ? 32 : 64;
    pl->hp_log2 = pl->Hp == 16 ? 4 : pl->Hp == 32 ? 5 : 6;
    pl->vis = IxVis{p->n_keys, p->causal ? 1u : 0u, p->pos0, p->k};
    const uint32_t T = p->n_queries, L = p->n_keys, k = p->k;
    pl->fused = !materialized && k <= IX_CAP_MAX;
    pl->seg_sort = k > IX_CAP_MAX;
    if (pl->fused) {
        /* the sample: 4,096 keys, or a quarter of a short row (at least 1,024) */
        uint32_t S = p->sample_keys;
        if (!S) {
            S = L / 4 < IX_SAMPLE_DEFAULT ? L / 4 : IX_SAMPLE_DEFAULT;
            if (S < 1024) S = 1024;
        }
        if (S > L) S = L;
        pl->S = S;
        pl->s_off = (uint32_t)(sieve__splitmix64(p->seed) % L);
        /* every token's expected count of sampled keys among its best: r = need * S_t / v */
        double rmax = 0.0;
        for (uint32_t t = 0; t < T; t++) {
            const uint32_t v = pl->vis.visible(t);
            const uint32_t St = sampled_below(v, S, L, pl->s_off);
            const double r = (double)pl->vis.need(t) * St / (double)v;
            if (r > rmax) rmax = r;
        }
        const uint64_t J = sieve__boundary_rank(rmax);
        pl->J = J > UINT32_MAX ? UINT32_MAX : (uint32_t)J;
        /* expected admissions k (J + 1) / r, about L / S keys a sampled key above the
           boundary; half as many again before a token overflows, at least 2,048 (memory
           only: the select's work follows what was kept; at small k the expectation is a
           few hundred and its spread wide: k = 1 and 64 at 128K keys overflowed 1-2 tokens
           in 2,048 with 1.5 x + 256, bench/RESULTS.md) */
        const double expect = rmax > 0 ? (double)k * ((double)pl->J + 1.0) / rmax : (double)L;
        double cap = 1.5 * expect + 256.0;
        if (cap < 2048.0) cap = 2048.0;
        if (p->candidate_capacity) cap = p->candidate_capacity;
        if (cap < k) cap = k;
        if (cap > IX_CAP_MAX) cap = IX_CAP_MAX;
        pl->cap = (uint32_t)cap;
        if (p->force_boundary) pl->mode_thr = 1;
        else if (L <= pl->cap) pl->mode_thr = 2; /* admit every visible key */
        else pl->mode_thr = 0;
        /* where most tokens would overflow what one block sorts (the expectation plus four
           of its spread, sqrt(J + 1) sampled keys of L / S each, past it), every token is
           scored whole at once instead of after a wasted pass */
        const double spread = 4.0 * sqrt((double)pl->J + 1.0) * (double)L / S;
        if (pl->mode_thr == 0 && !p->candidate_capacity && expect + spread > IX_CAP_MAX)
            pl->fused = false;
        if (pl->mode_thr != 0 || !pl->fused) pl->S = 0;
    }
    /* recovery (and the materialized path): rows of L scores and their k candidates */
    const size_t per_row = (size_t)L * 4 + (size_t)k * 8 * (pl->seg_sort ? 2 : 1); /* < 2^36 */
    if (materialized) {
        pl->R = T;
    } else {
        size_t R = IX_RECOVER_BYTES / per_row;
        if (R < 1) R = 1;
        if (R > T) R = T;
        pl->R = (uint32_t)R;
    }
    if (pl->seg_sort) {
        size_t cb = 0;
        if (cub::DeviceSegmentedSort::SortKeys((void *)nullptr, cb, (const uint64_t *)nullptr,
                                               (uint64_t *)nullptr, (int64_t)pl->R * k,
                                               (int64_t)pl->R, (const int64_t *)nullptr,
                                               (const int64_t *)nullptr) != cudaSuccess)
            return SIEVE_EDEVICE;
        pl->cub_bytes = cb;
    }
    /* offsets 256-byte aligned; every product and sum checked against size_t */
    size_t o = 0;
    bool ok = true;
    auto take = [&](uint64_t a, uint64_t b, uint64_t c) {
        const size_t at = o;
        uint64_t n;
        if (__builtin_mul_overflow(a, b, &n) || __builtin_mul_overflow(n, c, &n) ||
            n > SIZE_MAX - o - 255) {
            ok = false;
            return at;
        }
        o = sieve__align_up(o + (size_t)n, 256);
        return at;
    };
    pl->o_sample = take(T, pl->S, 4);
    pl->o_srows = take(pl->S, 4, 1);
    pl->o_thr = take(T, 4, 1);
    pl->o_cnt = take(T, 4, 1);
    pl->o_cand = take(pl->fused ? T : 0, pl->cap, 8);
    pl->o_paths = take(T, 1, 1);
    pl->o_tmap = take(T, 4, 1);
    pl->o_mat = take(pl->R, L, 4);
    pl->o_buf = take(pl->R, k, 8);
    pl->o_buf2 = take(pl->seg_sort ? pl->R : 0, k, 8);
    pl->o_off = take(pl->seg_sort ? (uint64_t)pl->R + 1 : 0, 8, 1);
    pl->o_cub = take(pl->cub_bytes, 1, 1);
    pl->total = o;
    return ok ? 0 : SIEVE_EINVAL;
}

template <typename E, int MODE>
int launch_scan_t(sieve__cuda_ctx *c, const IxParams &p0) {
    IxParams p = p0;
    if (p.hp_log2 < 4 || p.hp_log2 > 6) return SIEVE_EINVAL; /* the plan pads to 16, 32, 64 */
    const uint32_t tpt = (uint32_t)IX_BQ >> p.hp_log2;
    p.ntt = (p.ntok + tpt - 1) / tpt;
    const uint32_t nkt = (p.nkeys + IX_BR - 1) / IX_BR;
    if (p.ntt == 0 || nkt == 0) return 0;
    const int KT = (int)((p.D + IX_KC - 1) / IX_KC);
    const size_t smem = ix_smem(KT);
    auto kern = p.hp_log2 == 4 ? ix_scan_kernel<E, MODE, 4>
              : p.hp_log2 == 5 ? ix_scan_kernel<E, MODE, 5>
                               : ix_scan_kernel<E, MODE, 6>;
    SIEVE_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)ix_smem(IX_KT_MAX)));
    int per_sm = 0;
    SIEVE_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, 256, smem));
    if (per_sm < 1) per_sm = 1;
    const uint64_t slots = (uint64_t)per_sm * (uint64_t)c->prop.multiProcessorCount;
    /* split each token tile's keys into ranges so the units fill the GPU's slots in nearly
       whole waves (a unit loads its query tile once; more ranges cost a little more) */
    uint32_t best = 1;
    double best_eff = -1.0;
    for (uint32_t ns = 1; ns <= nkt && ns <= 256; ns++) {
        const uint32_t per = (nkt + ns - 1) / ns;
        if ((nkt + per - 1) / per != ns) continue; /* the same ranges as a smaller ns */
        const double units = (double)p.ntt * ns;
        const double waves = ceil(units / (double)slots);
        const double eff = units / (waves * (double)slots) - 0.002 * ns;
        if (eff > best_eff + 1e-9) {
            best_eff = eff;
            best = ns;
        }
    }
    p.kt_per = (nkt + best - 1) / best;
    p.nsplit = (nkt + p.kt_per - 1) / p.kt_per;
    const uint64_t units = (uint64_t)p.ntt * p.nsplit;
    const uint64_t grid = units < slots ? units : slots;
    kern<<<(unsigned)grid, 256, smem, c->stream>>>(p);
    SIEVE_CUDA_LAUNCH_CHECK();
    return 0;
}

int scan(sieve__cuda_ctx *c, sieve_dtype dt, int mode, const IxParams &p) {
    if (dt == SIEVE_DTYPE_F16) {
        if (mode == IX_SAMPLE) return launch_scan_t<__half, IX_SAMPLE>(c, p);
        if (mode == IX_GATE) return launch_scan_t<__half, IX_GATE>(c, p);
        return launch_scan_t<__half, IX_MAT>(c, p);
    }
    if (mode == IX_SAMPLE) return launch_scan_t<__nv_bfloat16, IX_SAMPLE>(c, p);
    if (mode == IX_GATE) return launch_scan_t<__nv_bfloat16, IX_GATE>(c, p);
    return launch_scan_t<__nv_bfloat16, IX_MAT>(c, p);
}

IxParams base_params(const sieve_indexer_params *p, const IxPlan &pl, const void *q,
                     const void *keys, const float *w) {
    IxParams x;
    memset(&x, 0, sizeof x);
    x.q = q;
    x.keys = keys;
    x.w = w;
    x.H = p->heads;
    x.hp_log2 = pl.hp_log2;
    x.D = p->head_dim;
    x.vis = pl.vis;
    return x;
}

/* Scores the rows of the n query tokens listed at d_tmap (device memory) in full and writes
 * their results, pl.R tokens at a time: the materialized path, and the fused path's
 * recovery. */
int materialize_rows(sieve__cuda_ctx *c, const sieve_indexer_params *p, const IxPlan &pl,
                     unsigned char *base, const void *q, const void *keys, const float *w,
                     const uint32_t *d_tmap, uint32_t n, int32_t *oidx, float *osc,
                     uint32_t *ocnt) {
    const uint32_t L = p->n_keys, k = p->k;
    float *mat = (float *)(base + pl.o_mat);
    uint64_t *buf = (uint64_t *)(base + pl.o_buf);
    for (uint32_t s0 = 0; s0 < n; s0 += pl.R) {
        const uint32_t m = n - s0 < pl.R ? n - s0 : pl.R;
        const uint32_t *tm = d_tmap + s0;
        IxParams x = base_params(p, pl, q, keys, w);
        x.ntok = m;
        x.tmap = tm;
        x.nkeys = L;
        x.out = mat;
        x.ld = L;
        int rc = scan(c, p->dtype, IX_MAT, x);
        if (rc) return rc;
        ix_matsel_kernel<<<m, IX_SEL_T, 0, c->stream>>>(mat, L, tm, pl.vis, buf);
        SIEVE_CUDA_LAUNCH_CHECK();
        if (!pl.seg_sort) {
            SIEVE_CUDA_TRY(cudaFuncSetAttribute(ix_sortrows_kernel,
                                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                (int)IX_SORT_SMEM));
            ix_sortrows_kernel<<<m, IX_SORT_T, IX_SORT_SMEM, c->stream>>>(buf, tm, pl.vis, oidx,
                                                                          osc, ocnt);
            SIEVE_CUDA_LAUNCH_CHECK();
        } else {
            uint64_t *buf2 = (uint64_t *)(base + pl.o_buf2);
            int64_t *off = (int64_t *)(base + pl.o_off);
            ix_offsets_kernel<<<(m + 256) / 256, 256, 0, c->stream>>>(off, m, k);
            SIEVE_CUDA_LAUNCH_CHECK();
            size_t cb = pl.cub_bytes;
            SIEVE_CUDA_TRY(cub::DeviceSegmentedSort::SortKeys(base + pl.o_cub, cb, buf, buf2,
                                                              (int64_t)m * k, (int64_t)m, off,
                                                              off + 1, c->stream));
            const uint64_t tot = (uint64_t)m * k;
            unsigned blocks = (unsigned)((tot + 255) / 256 < 65535 ? (tot + 255) / 256 : 65535);
            ix_write_kernel<<<blocks, 256, 0, c->stream>>>(buf2, m, tm, pl.vis, oidx, osc, ocnt);
            SIEVE_CUDA_LAUNCH_CHECK();
        }
    }
    return 0;
}

using Events = sieve__cuda_events<4>;

int run_topk_queued(sieve__cuda_ctx *c, const sieve_indexer_params *p, bool materialized, const void *q,
             const void *keys, const float *w, void *scratch, size_t scratch_bytes,
             int32_t *oidx, float *osc, uint32_t *ocnt, sieve_indexer_stats *stats) {
    const double t0 = sieve__now_ms();
    int rc = check_shape(c, p);
    if (rc) return rc;
    if (((uintptr_t)q | (uintptr_t)keys) & 15) return SIEVE_ENOTSUP;
    if ((uintptr_t)scratch & 255) return SIEVE_EINVAL; /* the layout's 256-byte offsets */
    IxPlan pl;
    rc = make_plan(p, materialized, &pl);
    if (rc) return rc;
    SIEVE_CUDA_TRY(cudaSetDevice(c->ordinal));
    unsigned char *base = nullptr;
    rc = sieve__cuda_scratch(c, scratch, scratch_bytes, pl.total, &base);
    if (rc) return rc;
    const uint32_t T = p->n_queries, L = p->n_keys;
    Events ev;
    rc = ev.create();
    if (rc) return rc;
    cudaStream_t s = c->stream;
    sieve_indexer_stats st;
    memset(&st, 0, sizeof st);
    st.queries = T;

    uint8_t *h_paths = nullptr;
    uint32_t *h_cnt = nullptr;
    uint32_t *h_tmap = nullptr;
    SIEVE_CUDA_TRY(cudaEventRecord(ev.e[0], s));
    if (!pl.fused) {
        SIEVE_CUDA_TRY(cudaEventRecord(ev.e[1], s));
        SIEVE_CUDA_TRY(cudaEventRecord(ev.e[2], s));
        SIEVE_CUDA_TRY(cudaEventRecord(ev.e[3], s));
        const double r0 = sieve__now_ms();
        /* every token in full: an identity map so chunks can start past token 0 */
        h_tmap = (uint32_t *)malloc((size_t)T * 4);
        if (!h_tmap) return SIEVE_ENOMEM;
        for (uint32_t t = 0; t < T; t++) h_tmap[t] = t;
        uint32_t *d_tmap = (uint32_t *)(base + pl.o_tmap);
        cudaError_t e = cudaMemcpyAsync(d_tmap, h_tmap, (size_t)T * 4, cudaMemcpyHostToDevice, s);
        if (e != cudaSuccess) {
            free(h_tmap);
            return sieve__cuda_fail(e, "cudaMemcpyAsync", __FILE__, __LINE__);
        }
        rc = materialize_rows(c, p, pl, base, q, keys, w, d_tmap, T, oidx, osc, ocnt);
        if (!rc) {
            e = cudaStreamSynchronize(s);
            if (e != cudaSuccess) rc = sieve__cuda_fail(e, "cudaStreamSynchronize", __FILE__, __LINE__);
        }
        free(h_tmap);
        if (rc) return rc;
        st.path_count[SIEVE_PATH_FULL] = T;
        st.ms_recover = sieve__now_ms() - r0;
        st.ms_total = sieve__now_ms() - t0;
        if (stats) *stats = st;
        return 0;
    }

    float *thr = (float *)(base + pl.o_thr);
    uint32_t *cnt = (uint32_t *)(base + pl.o_cnt);
    uint64_t *cand = (uint64_t *)(base + pl.o_cand);
    uint8_t *paths = base + pl.o_paths;
    if (pl.mode_thr == 0) {
        float *sample = (float *)(base + pl.o_sample);
        IxParams x = base_params(p, pl, q, keys, w);
        x.ntok = T;
        x.nkeys = pl.S;
        uint32_t *srows = (uint32_t *)(base + pl.o_srows);
        ix_sample_rows_kernel<<<(pl.S + 255) / 256, 256, 0, s>>>(srows, pl.S, L, pl.s_off);
        SIEVE_CUDA_LAUNCH_CHECK();
        x.s_rows = srows;
        x.out = sample;
        x.ld = pl.S;
        rc = scan(c, p->dtype, IX_SAMPLE, x);
        if (rc) return rc;
        ix_propose_kernel<<<T, 256, 0, s>>>(sample, pl.S, pl.s_off, pl.vis, pl.J, thr);
        SIEVE_CUDA_LAUNCH_CHECK();
    } else {
        const float v = pl.mode_thr == 1 ? p->forced_boundary : -INFINITY;
        ix_fill_kernel<<<(T + 255) / 256, 256, 0, s>>>(thr, T, v);
        SIEVE_CUDA_LAUNCH_CHECK();
    }
    SIEVE_CUDA_TRY(cudaEventRecord(ev.e[1], s));
    SIEVE_CUDA_TRY(cudaMemsetAsync(cnt, 0, (size_t)T * 4, s));
    {
        IxParams x = base_params(p, pl, q, keys, w);
        x.ntok = T;
        x.nkeys = L;
        x.thr = thr;
        x.cnt = cnt;
        x.cand = cand;
        x.cap = pl.cap;
        rc = scan(c, p->dtype, IX_GATE, x);
        if (rc) return rc;
    }
    SIEVE_CUDA_TRY(cudaEventRecord(ev.e[2], s));
    SIEVE_CUDA_TRY(cudaFuncSetAttribute(ix_select_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)IX_SORT_SMEM));
    ix_select_kernel<<<T, IX_SORT_T, IX_SORT_SMEM, s>>>(cand, pl.cap, cnt, thr, pl.vis, oidx, osc,
                                                        ocnt, paths);
    SIEVE_CUDA_LAUNCH_CHECK();
    SIEVE_CUDA_TRY(cudaEventRecord(ev.e[3], s));

    /* the certification's report: one wait for the device */
    h_paths = (uint8_t *)malloc(T);
    h_cnt = (uint32_t *)malloc((size_t)T * 4);
    h_tmap = (uint32_t *)malloc((size_t)T * 4);
    if (!h_paths || !h_cnt || !h_tmap) {
        free(h_paths);
        free(h_cnt);
        free(h_tmap);
        return SIEVE_ENOMEM;
    }
    cudaError_t e = cudaMemcpyAsync(h_paths, paths, T, cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess) e = cudaMemcpyAsync(h_cnt, cnt, (size_t)T * 4, cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    uint32_t nrec = 0;
    if (e == cudaSuccess) {
        for (uint32_t t = 0; t < T; t++) {
            st.candidates_admitted += h_cnt[t];
            st.path_count[h_paths[t] < SIEVE_PATH_COUNT ? h_paths[t] : SIEVE_PATH_FULL]++;
            if (h_paths[t] == P_UNDER || h_paths[t] == P_OVER) h_tmap[nrec++] = t;
        }
        if (pl.mode_thr == 0)
            for (uint32_t t = 0; t < T; t++) {
                const uint32_t v = pl.vis.visible(t);
                st.keys_sampled += sampled_below(v, pl.S, L, pl.s_off);
            }
    }
    const double r0 = sieve__now_ms();
    if (e == cudaSuccess && nrec) {
        uint32_t *d_tmap = (uint32_t *)(base + pl.o_tmap);
        e = cudaMemcpyAsync(d_tmap, h_tmap, (size_t)nrec * 4, cudaMemcpyHostToDevice, s);
        if (e == cudaSuccess)
            rc = materialize_rows(c, p, pl, base, q, keys, w, d_tmap, nrec, oidx, osc, ocnt);
        if (e == cudaSuccess && !rc) e = cudaStreamSynchronize(s);
    }
    free(h_paths);
    free(h_cnt);
    free(h_tmap);
    if (e != cudaSuccess) return sieve__cuda_fail(e, "indexer report", __FILE__, __LINE__);
    if (rc) return rc;
    st.ms_sample = ev.ms(0, 1);
    st.ms_scan = ev.ms(1, 2);
    st.ms_select = ev.ms(2, 3);
    st.ms_recover = nrec ? sieve__now_ms() - r0 : 0.0;
    st.ms_total = sieve__now_ms() - t0;
    if (stats) *stats = st;
    return 0;
}

/* run_topk_queued, and where it failed after queueing work (a launch, a copy), a wait for
 * that work before returning: it may still write the scratch and the outputs the caller
 * frees on the error (the failure itself is already reported). */
int run_topk(sieve__cuda_ctx *c, const sieve_indexer_params *p, bool materialized, const void *q,
             const void *keys, const float *w, void *scratch, size_t scratch_bytes,
             int32_t *oidx, float *osc, uint32_t *ocnt, sieve_indexer_stats *stats) {
    const int rc = run_topk_queued(c, p, materialized, q, keys, w, scratch, scratch_bytes, oidx,
                                   osc, ocnt, stats);
    return sieve__cuda_settle(c, rc);
}

} // namespace

extern "C" int sieve__cuda_indexer_scratch_size(void *ctx, const sieve_indexer_params *p,
                                                size_t *bytes) {
    int rc = check_shape((const sieve__cuda_ctx *)ctx, p);
    if (rc) return rc;
    IxPlan pl;
    rc = make_plan(p, false, &pl);
    if (rc) return rc;
    *bytes = pl.total;
    return 0;
}

extern "C" int sieve__cuda_indexer_topk(void *ctx, const sieve_indexer_params *p, const void *q,
                                        const void *keys, const float *w, void *scratch,
                                        size_t scratch_bytes, int32_t *out_idx, float *out_scores,
                                        uint32_t *out_counts, sieve_indexer_stats *stats) {
    return run_topk((sieve__cuda_ctx *)ctx, p, false, q, keys, w, scratch, scratch_bytes, out_idx,
                    out_scores, out_counts, stats);
}

extern "C" int sieve__cuda_indexer_materialized(void *ctx, const sieve_indexer_params *p,
                                                const void *q, const void *keys, const float *w,
                                                int32_t *out_idx, float *out_scores,
                                                uint32_t *out_counts, sieve_indexer_stats *stats) {
    return run_topk((sieve__cuda_ctx *)ctx, p, true, q, keys, w, nullptr, 0, out_idx, out_scores,
                    out_counts, stats);
}

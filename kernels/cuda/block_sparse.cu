/* block_sparse.cu: the CUDA backend of block-sparse prefill with mean correction
 * (sieve_kernels.h, "attention: block-sparse prefill"; FlashPrefill V2).
 *
 * Owns: the pooling kernel (each key block's mean key and value row), the block-score
 * kernel (each query tile's per-block maximum and sum of exponentials over the pooled keys),
 * the select kernel (threshold, forced blocks, the kept and corrected lists), the scratch
 * layout and the host flow (pool -> scores -> select -> attention -> one wait). The
 * attention itself is attn_wg.cuh's or attn_kernel.cuh's kernel in its SA_BLOCKS mode.
 * Must not: write the score matrix of tokens and keys, keep state between calls.
 *
 * Pooling. One CTA a block and 1,024 elements of a token's row (all kv heads' columns side by
 * side): each thread sums 8 consecutive elements over the block's rows in double, ascending
 * position (one 16-byte load a row, eight rows in flight), divides by the rows and rounds to
 * float32 and then to the storage dtype (the contract's pooled rows, bit-identical to the
 * CPU's).
 *
 * Scores. One CTA (8 warps) a (tile, kv head), the tiles of the most blocks first. The
 * tile's rows (token-major: its tokens x the kv head's query heads) are taken 256 at a time
 * (two m16 blocks a warp, Q fragments in registers); the visible pooled keys stream through
 * shared memory 64 blocks a chunk (cp.async, swizzled for ldmatrix). Per chunk: scores on the
 * tensor cores (m16n8k16, float32), scaled into the log2 domain, each column's maximum over
 * each warp's rows (warp shuffles) and its sum of 2^(v - that maximum), merged across the
 * warps in shared memory (32 columns at a time in registers: two CTAs an SM);
 * row passes after the first merge into the (max, sum) already written. Output: (m_J, S_J)
 * for every visible block J, so E_J = S_J 2^(m_J - M) with M = max m_J. On compute
 * capability 9.0 with D = 128 the scores run transposed on wgmma (bs_score_wg_kernel: the
 * pooled keys as the A operand, passes of 128 query rows as B, so a block's maximum and sum
 * over a pass stay in one thread and its quad, no exchange between warps);
 * SIEVE_CUDA_BSP_SCORE=mma keeps the mma.sync kernel.
 *
 * Select. One CTA a (tile, kv head): M and max E_J by block reductions, then every visible
 * block in order, 256 at a time: kept (forced, or E_J >= alpha max E) or corrected (a full
 * block not kept, when correction is on), compacted by a block scan into the two ascending
 * lists.
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

constexpr int BS_SCORE_THREADS = 256; /* 8 warps (mma.sync kernel: 256 rows a pass) */
constexpr int BS_COLS = 64;           /* pooled keys a chunk */
constexpr int BS_SELECT_THREADS = 256;

/* The call's geometry: tiles of B tokens over keys of blocks of B. */
struct Geom {
    uint32_t T, L, pos0, B, tiles;
    /* keys token t sees */
    __device__ uint32_t seen(uint32_t t) const {
        const uint64_t v = (uint64_t)pos0 + t + 1;
        return v < L ? (uint32_t)v : L;
    }
    __device__ uint32_t ntok(uint32_t I) const { return T - I * B < B ? T - I * B : B; }
    /* n_I: blocks the last token sees any key of; nf: blocks every token sees whole */
    __device__ uint32_t visible(uint32_t I) const {
        return (uint32_t)(((uint64_t)seen(I * B + ntok(I) - 1) + B - 1) / B);
    }
    __device__ uint32_t full(uint32_t I) const { return seen(I * B) / B; }
};

/* ---------------------------------------------------------------- pooling */

template <typename E>
__device__ inline E from_float(float x);
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}
template <>
__device__ inline __half from_float<__half>(float x) {
    return __float2half_rn(x);
}
template <typename E>
__device__ inline float to_float(E x);
template <>
__device__ inline float to_float<__nv_bfloat16>(__nv_bfloat16 x) {
    return __bfloat162float(x);
}
template <>
__device__ inline float to_float<__half>(__half x) {
    return __half2float(x);
}

/* Eight consecutive stored elements (16 bytes) to float. */
template <typename E>
__device__ inline void unpack8(const uint4 &u, float (&f)[8]) {
    const E *e = (const E *)&u;
#pragma unroll
    for (int i = 0; i < 8; i++) f[i] = to_float(e[i]);
}

constexpr int BS_POOL_THREADS = 128;
constexpr int BS_POOL_BATCH = 8; /* rows loaded before they are summed */

/* The pooled rows of one stored array (rows of W elements, W a multiple of 8, the array
 * 16-byte aligned): pooled[J * W + w] = the mean of src[s * W + w] over the block's rows s,
 * summed in double in ascending s (the CPU's order). One thread sums 8 consecutive elements
 * of the row (one 16-byte load a row), BS_POOL_BATCH rows loaded before they are added, so
 * a warp reads 512 contiguous bytes a row and a thread has 128 bytes in flight. */
template <typename E>
__device__ inline void bs_pool_rows(const E *src, uint32_t L, uint32_t W, uint32_t B, uint32_t J,
                                    uint32_t w8, E *dst) {
    if ((uint64_t)w8 * 8 >= W) return;
    const uint64_t s0 = (uint64_t)J * B;
    const uint32_t n = L - s0 < B ? (uint32_t)(L - s0) : B;
    const uint4 *p = (const uint4 *)(src + s0 * W) + w8;
    const size_t stride = W / 8; /* 16-byte units a row */
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    uint32_t i = 0;
    for (; i + BS_POOL_BATCH <= n; i += BS_POOL_BATCH) {
        uint4 u[BS_POOL_BATCH];
#pragma unroll
        for (int b = 0; b < BS_POOL_BATCH; b++) u[b] = __ldg(p + (i + b) * stride);
#pragma unroll
        for (int b = 0; b < BS_POOL_BATCH; b++) {
            float f[8];
            unpack8<E>(u[b], f);
#pragma unroll
            for (int x = 0; x < 8; x++) acc[x] += (double)f[x];
        }
    }
    for (; i < n; i++) {
        float f[8];
        unpack8<E>(__ldg(p + i * stride), f);
#pragma unroll
        for (int x = 0; x < 8; x++) acc[x] += (double)f[x];
    }
    alignas(16) E o[8];
#pragma unroll
    for (int x = 0; x < 8; x++) o[x] = from_float<E>((float)(acc[x] / (double)n));
    ((uint4 *)(dst + (size_t)J * W))[w8] = *(const uint4 *)o;
}

/* Grid (blocks, ceil(max(Wk, Wv) / 8 / BS_POOL_THREADS), 2): z = 0 the keys (Wk = Hkv x D
 * elements a row), z = 1 the values (Wv = Hkv x DV). pk: (J x Hkv + g) x D + d, pv:
 * (J x Hkv + g) x DV + d. */
template <typename E>
__global__ void __launch_bounds__(BS_POOL_THREADS)
bs_pool_kernel(const E *keys, const E *values, uint32_t L, uint32_t Wk, uint32_t Wv,
               uint32_t B, E *pk, E *pv) {
    const uint32_t w8 = blockIdx.y * BS_POOL_THREADS + threadIdx.x;
    if (blockIdx.z == 0)
        bs_pool_rows<E>(keys, L, Wk, B, blockIdx.x, w8, pk);
    else
        bs_pool_rows<E>(values, L, Wv, B, blockIdx.x, w8, pv);
}

/* ---------------------------------------------------------------- block scores */

struct ScoreArgs {
    const void *q, *pk;
    Geom geo;
    uint32_t Hq, Hkv, R;
    float scale_log2;
    const unsigned long long *tile_off;
    unsigned long long per_head;
    float2 *ms; /* Hkv x per_head: (m_J, S_J) in the log2 domain */
};

/* One column of a chunk for a warp: v, the thread's four scores of it (rows gq and gq + 8 of
 * two 16-row blocks, -inf past the tile; v[2 mb + i]); the column's maximum over the warp's
 * 32 rows and the sum of 2^(v - that maximum), left in red_m / red_s by the lanes of gq 0. */
__device__ inline void bs_col_reduce(const float (&v)[4], uint32_t gq, uint32_t warp,
                                     uint32_t col, float (*red_m)[BS_COLS],
                                     float (*red_s)[BS_COLS]) {
    float mx = -INFINITY;
#pragma unroll
    for (int x = 0; x < 4; x++) mx = fmaxf(mx, v[x]);
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
    const float mb0 = mx == -INFINITY ? 0.f : mx;
    float sum = 0.f;
#pragma unroll
    for (int x = 0; x < 4; x++) sum += fast_exp2(v[x] - mb0);
    sum += __shfl_xor_sync(0xffffffffu, sum, 4);
    sum += __shfl_xor_sync(0xffffffffu, sum, 8);
    sum += __shfl_xor_sync(0xffffffffu, sum, 16);
    if (gq == 0) {
        red_m[warp][col] = mx;
        red_s[warp][col] = sum;
    }
}

/* A warp's scores of NJ n8 column blocks of a chunk (s[mb][4j + 2i + e]: row gq + 8i of its
 * 16-row block mb, column col0 + 8j + 2tq + e), scaled into the log2 domain (rows past the
 * tile -inf) and reduced a column at a time (bs_col_reduce). */
template <int NJ>
__device__ inline void bs_scale_reduce(const float (&s)[2][4 * NJ], const bool (&valid)[2][2],
                                       float scale_log2, uint32_t gq, uint32_t tq,
                                       uint32_t warp, uint32_t col0, float (*red_m)[BS_COLS],
                                       float (*red_s)[BS_COLS]) {
#pragma unroll
    for (int j = 0; j < NJ; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            float v[4];
#pragma unroll
            for (int mb = 0; mb < 2; mb++)
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    const float x = s[mb][4 * j + 2 * i + e];
                    v[2 * mb + i] = valid[mb][i] ? x * scale_log2 : -INFINITY;
                }
            bs_col_reduce(v, gq, warp, col0 + j * 8 + 2 * tq + e, red_m, red_s);
        }
}

/* A block's (m, sum) of this pass merged with the earlier passes' (max, sum) o, base-2
 * exponents relative to each maximum (-inf: no rows yet). */
__device__ inline void bs_merge_pass(float2 o, float &m, float &sum) {
    const float M = fmaxf(o.x, m);
    const float Mb = M == -INFINITY ? 0.f : M;
    sum = o.y * exp2f(o.x - Mb) + sum * exp2f(m - Mb);
    m = M;
}

/* The chunk's columns merged over the 8 warps (threads 0 .. 63, a column each) and with the
 * earlier row passes' (max, sum) of the same blocks: out[J] = (m_J, S_J). */
__device__ inline void bs_merge_chunk(uint32_t tid, uint32_t c, uint32_t nI, uint32_t r0,
                                      float2 *out, const float (*red_m)[BS_COLS],
                                      const float (*red_s)[BS_COLS]) {
    if (tid < (uint32_t)BS_COLS) {
        const uint64_t J = (uint64_t)c * BS_COLS + tid;
        if (J < nI) {
            float m = red_m[0][tid];
#pragma unroll
            for (int w = 1; w < 8; w++) m = fmaxf(m, red_m[w][tid]);
            const float mb0 = m == -INFINITY ? 0.f : m;
            float sum = 0.f;
#pragma unroll
            for (int w = 0; w < 8; w++) sum += red_s[w][tid] * exp2f(red_m[w][tid] - mb0);
            if (m == -INFINITY) sum = 0.f;
            if (r0 > 0) bs_merge_pass(out[J], m, sum); /* the earlier passes' (max, sum) */
            out[J] = make_float2(m, sum);
        }
    }
}

template <typename E, int D>
__global__ void __launch_bounds__(BS_SCORE_THREADS, 2)
bs_score_kernel(ScoreArgs a) {
    using Ops = MmaOps<E>;
    __shared__ __align__(128) unsigned char kS_raw[2][BS_COLS * D * 2];
    __shared__ float red_m[8][BS_COLS], red_s[8][BS_COLS];
    const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const uint32_t gq = lane >> 2, tq = lane & 3;
    const uint32_t I = a.geo.tiles - 1 - blockIdx.x, kvh = blockIdx.y;
    const uint32_t nI = a.geo.visible(I), ntok = a.geo.ntok(I);
    const uint32_t rows = ntok * a.R;
    float2 *out = a.ms + (size_t)kvh * a.per_head + a.tile_off[I];
    const E *pbase = (const E *)a.pk + (size_t)kvh * D;
    const size_t pstride = (size_t)a.Hkv * D;
    const uint32_t nchunks = (nI + BS_COLS - 1) / BS_COLS;

    auto load_chunk = [&](uint32_t c, int buf) {
        constexpr int KC = D / 8;
        for (uint32_t i = tid; i < (uint32_t)(BS_COLS * KC); i += BS_SCORE_THREADS) {
            const uint32_t n = i / KC, k = i % KC;
            const uint64_t J = (uint64_t)c * BS_COLS + n;
            const bool ok = J < nI;
            const E *src = ok ? pbase + J * pstride + k * 8 : pbase;
            cp_async16(kS_raw[buf] + sw_off<D>(n, k), src, ok ? 16 : 0);
        }
        cp_async_commit();
    };

    for (uint32_t r0 = 0; r0 < rows; r0 += BS_SCORE_THREADS) {
        /* this thread's rows: block mb, rows gq and gq + 8 */
        uint32_t qf[2][D / 16][4];
        bool valid[2][2];
#pragma unroll
        for (int mb = 0; mb < 2; mb++) {
            const E *qr[2];
#pragma unroll
            for (int i = 0; i < 2; i++) {
                const uint32_t r = r0 + warp * 32 + mb * 16 + gq + 8 * i;
                valid[mb][i] = r < rows;
                const uint32_t t = I * a.geo.B + r / a.R, h = kvh * a.R + r % a.R;
                qr[i] = valid[mb][i] ? (const E *)a.q + ((size_t)t * a.Hq + h) * D : nullptr;
            }
            load_a_frags<E, D>(qr[0], qr[1], tq, qf[mb]);
        }
        load_chunk(0, 0);
        for (uint32_t c = 0; c < nchunks; c++) {
            if (c + 1 < nchunks) {
                load_chunk(c + 1, (c + 1) & 1);
                cp_async_wait<1>();
            } else {
                cp_async_wait<0>();
            }
            __syncthreads();
            const uint32_t kS = smem_u32(kS_raw[c & 1]);
            /* 32 columns at a time (registers: two CTAs an SM); each warp's column maximum
             * over its 32 rows and the sum of 2^(v - that maximum), merged across the warps
             * below */
#pragma unroll
            for (int half = 0; half < 2; half++) {
                float s[2][16]; /* n8 block j of row block mb: s[mb][4 j .. 4 j + 3] */
#pragma unroll
                for (int mb = 0; mb < 2; mb++)
#pragma unroll
                    for (int x = 0; x < 16; x++) s[mb][x] = 0.f;
#pragma unroll
                for (int ks = 0; ks < D / 16; ks += 2) {
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        const uint32_t n = (half * 4 + j) * 8 + (lane & 7);
                        uint32_t b0, b1, b2, b3;
                        ldsm_x4(kS + sw_off<D>(n, ks * 2 + (lane >> 3)), b0, b1, b2, b3);
#pragma unroll
                        for (int mb = 0; mb < 2; mb++) {
                            Ops::mma(&s[mb][4 * j], qf[mb][ks], b0, b1);
                            Ops::mma(&s[mb][4 * j], qf[mb][ks + 1], b2, b3);
                        }
                    }
                }
                bs_scale_reduce<4>(s, valid, a.scale_log2, gq, tq, warp, half * 32, red_m,
                                   red_s);
            }
            __syncthreads();
            bs_merge_chunk(tid, c, nI, r0, out, red_m, red_s);
            __syncthreads(); /* the partials and the chunk's buffer free for the next chunk */
        }
    }
}

/* Block scores on wgmma, transposed (compute capability 9.0, D = 128): S^T = Kbar Q^T, the
 * chunk's 64 pooled keys the A operand (M = 64) and a pass of 128 query rows the B operand
 * (N = 128), both K-major with the 128-byte swizzle. A thread's accumulators hold two pooled
 * keys (rows 16 wq + gq and + 8) against 32 query rows each (columns 8j + 2tq + e), so a
 * block's maximum and sum over the pass's rows take 32 steps in the thread and two shuffles
 * (the lanes of one gq), with no exchange between warps. The two warpgroups take alternate
 * chunks (chunk c on warpgroup c % 2, so a block's (max, sum) is merged over the passes by
 * one thread), each with its own two chunk buffers and named barrier; two CTAs an SM. The
 * copies are strength-reduced: a thread's pieces of a chunk (or of the pass's queries) are
 * rows 8 (16) apart, at one swizzle position, so each copy is an add to the last.
 * At 128K (GQA 32/8, blocks of 128) it took 1.97-1.98 ms under Nsight Compute against
 * 2.79-2.82 for the kernel before (queries as A, each 64-key column reduced by shuffles
 * across 8 lanes and merged across warps in shared memory): 9.7 instructions issued a score
 * instead of 17.6. A form with the tile's 512 query rows resident (one CTA an SM), each
 * chunk read once for four passes and the next pass's wgmma during this one's reduction,
 * took 2.00-2.04 ms and was not kept. */
struct ScoreWgSmem {
    static constexpr uint32_t QROWS = 128;                 /* query rows a pass */
    static constexpr uint32_t QHALF = QROWS * 128;         /* 128 rows x 64 columns: 16 KB */
    static constexpr uint32_t Q = 2 * QHALF;               /* the pass's queries: 32 KB */
    static constexpr uint32_t KHALF = BS_COLS * 128;       /* 64 keys x 64 columns: 8 KB */
    static constexpr uint32_t CHUNK = 2 * KHALF;           /* 16 KB */
    static constexpr uint32_t BYTES = Q + 2 * 2 * CHUNK + 1024; /* + alignment slack */
};

/* Two pooled keys' (max, sum) over the pass's columns from the thread's N raw scores of each,
 * x[k][..] (N a multiple of 4; past the tile -inf, or +inf with NEG), completed over the
 * keys' 4 lanes (tq): the maximum of x c is c times the largest x (the smallest with NEG:
 * c < 0), as rounding is monotonic, and each term 2^(x c - max) takes one FMA. The two keys
 * go side by side (eight independent chains a step) to hide the latencies. */
template <int N, bool NEG>
__device__ inline void bs_rows_reduce(const float (&x)[2][N], float c, float2 (&r)[2]) {
    auto pick = [](float p, float q) { return NEG ? fminf(p, q) : fmaxf(p, q); };
    float m[2][4];
#pragma unroll
    for (int k = 0; k < 2; k++)
#pragma unroll
        for (int u = 0; u < 4; u++) m[k][u] = x[k][u];
#pragma unroll
    for (int i = 4; i < N; i += 4)
#pragma unroll
        for (int k = 0; k < 2; k++)
#pragma unroll
            for (int u = 0; u < 4; u++) m[k][u] = pick(m[k][u], x[k][i + u]);
    float mk[2], nb[2];
#pragma unroll
    for (int k = 0; k < 2; k++) mk[k] = pick(pick(m[k][0], m[k][1]), pick(m[k][2], m[k][3]));
#pragma unroll
    for (int k = 0; k < 2; k++) mk[k] = pick(mk[k], __shfl_xor_sync(0xffffffffu, mk[k], 1));
#pragma unroll
    for (int k = 0; k < 2; k++) mk[k] = pick(mk[k], __shfl_xor_sync(0xffffffffu, mk[k], 2));
#pragma unroll
    for (int k = 0; k < 2; k++) {
        mk[k] *= c; /* -inf when every column is past the tile */
        nb[k] = mk[k] == -INFINITY ? 0.f : -mk[k];
    }
    float sm[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int i = 0; i < N; i += 4)
#pragma unroll
        for (int k = 0; k < 2; k++)
#pragma unroll
            for (int u = 0; u < 4; u++) sm[k][u] += fast_exp2(fmaf(x[k][i + u], c, nb[k]));
    float sum[2];
#pragma unroll
    for (int k = 0; k < 2; k++) sum[k] = (sm[k][0] + sm[k][1]) + (sm[k][2] + sm[k][3]);
#pragma unroll
    for (int k = 0; k < 2; k++) sum[k] += __shfl_xor_sync(0xffffffffu, sum[k], 1);
#pragma unroll
    for (int k = 0; k < 2; k++) sum[k] += __shfl_xor_sync(0xffffffffu, sum[k], 2);
#pragma unroll
    for (int k = 0; k < 2; k++) r[k] = make_float2(mk[k], sum[k]);
}

/* A thread's two pooled keys of a chunk (J0 and J0 + 8) from its accumulators acc: each
 * key's (max, sum) over the pass's columns (scaled by c, negative with NEG; with MASK,
 * columns at or past lim left out), merged with the earlier passes' (max, sum) in out
 * (r0 > 0) by the lane of tq 0. */
template <bool MASK, bool NEG>
__device__ inline void bs_wg_store(const float (&acc)[64], float c, uint32_t lim, uint32_t tq,
                                   uint64_t J0, uint32_t nI, uint32_t r0, float2 *out) {
    float x[2][32];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 16; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const bool past = MASK && 8u * j + 2u * tq + e >= lim;
                x[i][2 * j + e] = past ? (NEG ? INFINITY : -INFINITY) : acc[4 * j + 2 * i + e];
            }
    float2 rr[2];
    bs_rows_reduce<32, NEG>(x, c, rr);
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const float2 r = rr[i];
        const uint64_t J = J0 + 8 * i;
        if (tq == 0 && J < nI) {
            float m = r.x, sum = r.y;
            if (r0 > 0) bs_merge_pass(out[J], m, sum); /* the earlier passes' (max, sum) */
            out[J] = make_float2(m, sum);
        }
    }
}

template <typename E>
__global__ void __launch_bounds__(BS_SCORE_THREADS, 2)
bs_score_wg_kernel(const __grid_constant__ ScoreArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using SM = ScoreWgSmem;
    constexpr uint32_t D = 128;
    extern __shared__ unsigned char bs_wg_raw[];
    unsigned char *sm = bs_wg_raw + ((1024u - (smem_u32(bs_wg_raw) & 1023u)) & 1023u);
    const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;
    const uint32_t wq = warp & 3, gq = lane >> 2, tq = lane & 3, wt = tid & 127;
    const uint32_t I = a.geo.tiles - 1 - blockIdx.x, kvh = blockIdx.y;
    const uint32_t nI = a.geo.visible(I), ntok = a.geo.ntok(I);
    const uint32_t rows = ntok * a.R;
    float2 *out = a.ms + (size_t)kvh * a.per_head + a.tile_off[I];
    const E *pbase = (const E *)a.pk + (size_t)kvh * D;
    const size_t pstride = (size_t)a.Hkv * D;
    const uint32_t nchunks = (nI + BS_COLS - 1) / BS_COLS;
    /* this warpgroup's chunks: wg, wg + 2, ... */
    const uint32_t mine = nchunks > wg ? (nchunks - wg + 1) / 2 : 0;
    unsigned char *bufs = sm + SM::Q + wg * 2 * SM::CHUNK;
    /* chunk c into buffer b by the warpgroup's 128 threads: 64 keys x 16 pieces of 16 bytes;
     * the thread's piece k of keys n0 + 8x (x < 8) all at one swizzle position */
    const uint32_t n0 = wt >> 4, kp = wt & 15;
    const uint32_t kdst = smem_u32(bufs) + (kp >> 3) * SM::KHALF + sw_off<64>(n0, kp & 7);
    const E *ksrc = pbase + (size_t)n0 * pstride + kp * 8;
    auto load_chunk = [&](uint32_t c, uint32_t b) {
        const int left = (int)(nI - c * BS_COLS - n0); /* key n0 + 8x exists when 8x < left */
        const E *src = ksrc + (size_t)c * BS_COLS * pstride;
        const uint32_t dst = kdst + b * SM::CHUNK;
#pragma unroll
        for (int x = 0; x < 8; x++) {
            const bool ok = 8 * x < left;
            cp_async16_at<0, 0>(dst + x * 1024, ok ? src : pbase, ok ? 16 : 0);
            src += 8 * pstride;
        }
    };
    const uint32_t rq = tid >> 4, kq = tid & 15, d16 = 16 / a.R, m16 = 16 % a.R;
    /* the tile's first token, kv head kvh's first query head, the thread's piece */
    const E *qtile =
        (const E *)a.q + ((size_t)I * a.geo.B * a.Hq + (size_t)kvh * a.R) * D + kq * 8;
    const uint64_t qdesc0 = sw128_desc(sm), kdesc0 = sw128_desc(bufs);
    const float c = a.scale_log2;

    for (uint32_t r0 = 0; r0 < rows; r0 += SM::QROWS) {
        __syncthreads(); /* the queries' and chunks' buffers free (the pass before done) */
        /* the pass's 128 query rows (zeros past the tile): [k half][row][128 bytes]; the
         * thread's piece kq of rows rq + 16x (x < 8), row r = token r / R, head r % R */
        {
            uint32_t r = r0 + rq, tok = r / a.R, hh = r - tok * a.R;
            const uint32_t qdst = smem_u32(sm) + (kq >> 3) * SM::QHALF + sw_off<64>(rq, kq & 7);
#pragma unroll
            for (int x = 0; x < 8; x++) {
                const bool ok = r < rows;
                const E *src = ok ? qtile + ((size_t)tok * a.Hq + hh) * D : qtile;
                cp_async16_at<0, 0>(qdst + x * 2048, src, ok ? 16 : 0);
                r += 16;
                tok += d16;
                hh += m16;
                if (hh >= a.R) {
                    hh -= a.R;
                    tok++;
                }
            }
        }
        if (mine > 0) load_chunk(wg, 0);
        cp_async_commit();
        cp_async_wait<0>();
        fence_proxy_async_smem();
        __syncthreads(); /* the queries and each warpgroup's first chunk landed */
        const uint32_t lim = rows - r0; /* columns at or past lim are past the tile */
        const bool full = lim >= SM::QROWS;
        for (uint32_t t = 0; t < mine; t++) {
            if (t > 0) {
                cp_async_wait<0>();
                fence_proxy_async_smem();
                /* chunk t landed; chunk t - 1's buffer free (ids by constant: one a warpgroup) */
                if (wg == 0)
                    named_bar_sync(1, 128);
                else
                    named_bar_sync(2, 128);
            }
            if (t + 1 < mine) {
                load_chunk(wg + 2 * (t + 1), (t + 1) & 1);
                cp_async_commit();
            }
            float acc[64];
            const uint32_t ku = (t & 1) * (SM::CHUNK >> 4);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < 8; kk++) {
                const uint32_t o = ((kk >> 2) * SM::KHALF + (kk & 3) * 32) >> 4;
                const uint32_t oq = ((kk >> 2) * SM::QHALF + (kk & 3) * 32) >> 4;
                if (kk == 0)
                    WgmmaOp<E, 128>::run_zero(acc, desc_add(kdesc0, ku + o), desc_add(qdesc0, oq));
                else
                    WgmmaOp<E, 128>::run_acc(acc, desc_add(kdesc0, ku + o), desc_add(qdesc0, oq));
            }
            wgmma_commit();
            wgmma_wait<0>();
            const uint64_t J0 = (uint64_t)(wg + 2 * t) * BS_COLS + 16 * wq + gq;
            if (c > 0.f) {
                if (full)
                    bs_wg_store<false, false>(acc, c, lim, tq, J0, nI, r0, out);
                else
                    bs_wg_store<true, false>(acc, c, lim, tq, J0, nI, r0, out);
            } else {
                if (full)
                    bs_wg_store<false, true>(acc, c, lim, tq, J0, nI, r0, out);
                else
                    bs_wg_store<true, true>(acc, c, lim, tq, J0, nI, r0, out);
            }
        }
    }
#else
    (void)a;
    __trap();
#endif
}

/* ---------------------------------------------------------------- select */

struct SelectArgs {
    Geom geo;
    uint32_t Hkv, sink, window;
    float alpha;
    int correct;
    const unsigned long long *tile_off;
    unsigned long long per_head;
    const float2 *ms;
    uint32_t *kept_count, *corr_count; /* Hkv x tiles */
    int32_t *kept, *corr;              /* Hkv x per_head */
};

struct MaxF {
    __device__ float operator()(float x, float y) const { return fmaxf(x, y); }
};

__global__ void __launch_bounds__(BS_SELECT_THREADS)
bs_select_kernel(SelectArgs a) {
    using Reduce = cub::BlockReduce<float, BS_SELECT_THREADS>;
    using Scan = cub::BlockScan<uint32_t, BS_SELECT_THREADS>;
    __shared__ union {
        typename Reduce::TempStorage reduce;
        typename Scan::TempStorage scan;
    } tmp;
    __shared__ float s_val;
    const uint32_t tid = threadIdx.x;
    const uint32_t I = blockIdx.x, kvh = blockIdx.y;
    const uint32_t nI = a.geo.visible(I), nf = a.geo.full(I);
    const size_t lb = (size_t)kvh * a.per_head + a.tile_off[I];
    const float2 *ms = a.ms + lb;
    float M = -INFINITY;
    for (uint32_t J = tid; J < nI; J += BS_SELECT_THREADS) M = fmaxf(M, ms[J].x);
    M = Reduce(tmp.reduce).Reduce(M, MaxF{});
    if (tid == 0) s_val = M;
    __syncthreads();
    M = s_val;
    const float Mb = M == -INFINITY ? 0.f : M;
    __syncthreads();
    float emax = 0.f;
    for (uint32_t J = tid; J < nI; J += BS_SELECT_THREADS)
        emax = fmaxf(emax, ms[J].y * exp2f(ms[J].x - Mb));
    emax = Reduce(tmp.reduce).Reduce(emax, MaxF{});
    if (tid == 0) s_val = emax;
    __syncthreads();
    const float thr = a.alpha * s_val;
    uint32_t nk = 0, nc = 0;
    int32_t *kept = a.kept + lb, *corr = a.corr + lb;
    for (uint32_t J0 = 0; J0 < nI; J0 += BS_SELECT_THREADS) {
        const uint32_t J = J0 + tid;
        bool keep = false, cor = false;
        if (J < nI) {
            const bool forced = J >= nf || J < a.sink || (uint64_t)J + a.window >= nf;
            keep = forced || ms[J].y * exp2f(ms[J].x - Mb) >= thr;
            cor = !keep && a.correct; /* not forced: J < nf, a full block */
        }
        const uint32_t v = (keep ? 1u : 0u) | (cor ? 1u << 16 : 0u);
        uint32_t before, total;
        Scan(tmp.scan).ExclusiveSum(v, before, total);
        if (keep) kept[nk + (before & 0xffffu)] = (int32_t)J;
        if (cor) corr[nc + (before >> 16)] = (int32_t)J;
        nk += total & 0xffffu;
        nc += total >> 16;
        __syncthreads(); /* the scan's storage reused */
    }
    if (tid == 0) {
        a.kept_count[(size_t)kvh * a.geo.tiles + I] = nk;
        a.corr_count[(size_t)kvh * a.geo.tiles + I] = nc;
    }
}

/* ---------------------------------------------------------------- host */

struct BspPlan {
    SaPlan at;         /* the attention launch */
    uint32_t tiles, nblocks;
    uint64_t per_head;
    size_t o_pk, o_pv, o_off, o_ms, o_kc, o_kl, o_cc, o_cl, o_part, total;
};

int check_bsp_shape(const sieve__cuda_ctx *c, const sieve_bsp_params *p) {
    const sieve_attn_params *a = &p->attn;
    if (p->block != 64 && p->block != 128) return SIEVE_ENOTSUP;
    return sa_check_shape(c, a->dtype, a->head_dim, a->v_dim, a->q_heads, a->kv_heads);
}

/* Host copy of the tiles' list offsets (tiles + 1 values); NULL when out of memory. */
unsigned long long *tile_offsets(const sieve_bsp_params *p, uint32_t tiles) {
    unsigned long long *off = (unsigned long long *)malloc(((size_t)tiles + 1) * 8);
    if (!off) return nullptr;
    off[0] = 0;
    for (uint32_t i = 0; i < tiles; i++) off[i + 1] = off[i] + sieve__bsp_visible_blocks(p, i);
    return off;
}

int make_bsp_plan(const sieve_bsp_params *p, int sms, BspPlan *pl) {
    memset(pl, 0, sizeof *pl);
    const sieve_attn_params *a = &p->attn;
    pl->tiles = sieve__bsp_tiles(p);
    pl->nblocks = (uint32_t)(((uint64_t)a->n_keys + p->block - 1) / p->block);
    uint64_t ph = 0, nmax = 0;
    for (uint32_t i = 0; i < pl->tiles; i++) {
        const uint32_t n = sieve__bsp_visible_blocks(p, i);
        ph += n;
        if (n > nmax) nmax = n;
    }
    pl->per_head = ph;
    /* the attention: groups of a power of two tokens (so none straddles a tile), 64 rows */
    SaPlan &at = pl->at;
    at.R = a->q_heads / a->kv_heads;
    uint32_t G = 1;
    while (at.R <= (uint32_t)SA_ROWS && G * 2 * at.R <= (uint32_t)SA_ROWS) G *= 2;
    at.G = G;
    at.groups = (a->n_queries + G - 1) / G;
    /* 2 stages (3 CTAs an SM): at 128K tokens and 5% density the attention took 55.4 ms
     * against 63.0 with 3 (device call 2); SIEVE_CUDA_SA_STAGES=3 is the tuning hook */
    const char *st = getenv("SIEVE_CUDA_SA_STAGES");
    at.stages = st && !strcmp(st, "3") ? 3 : 2;
    at.rows = (a->n_queries < G ? a->n_queries : G) * at.R;
    const uint64_t ctas = ((uint64_t)at.rows + SA_ROWS - 1) / SA_ROWS * a->kv_heads * at.groups;
    const uint64_t want = 2 * (uint64_t)(sms > 0 ? sms : 132);
    /* at most: every visible block kept, or one kept and the rest pooled */
    const uint64_t tiles_max = nmax * (p->block / SA_BN) + (nmax + SA_BN - 1) / SA_BN;
    uint64_t nsl = ctas >= want ? 1 : (want + ctas - 1) / ctas;
    if (nsl > 32) nsl = 32;
    if (nsl > tiles_max) nsl = tiles_max;
    at.nsl = nsl ? (uint32_t)nsl : 1;
    /* sizes */
    const uint64_t Hkv = a->kv_heads;
    const uint64_t pk = (uint64_t)pl->nblocks * Hkv * a->head_dim * 2;
    const uint64_t pv = (uint64_t)pl->nblocks * Hkv * a->v_dim * 2;
    const uint64_t lists = Hkv * ph; /* checked within INT64_MAX by the dispatcher */
    const uint64_t counts = Hkv * pl->tiles;
    if (lists > (uint64_t)(SIZE_MAX / 64) || pk > (uint64_t)(SIZE_MAX / 8) ||
        pv > (uint64_t)(SIZE_MAX / 8))
        return SIEVE_EINVAL;
    uint64_t part = 0;
    if (at.nsl > 1) {
        part = (uint64_t)at.nsl * a->n_queries * a->q_heads * (a->v_dim + 2) * 4;
        if (part > (uint64_t)(SIZE_MAX / 8)) return SIEVE_EINVAL;
    }
    size_t o = 0;
    pl->o_pk = o;
    o = sieve__align_up(o + (size_t)pk, 256);
    pl->o_pv = o;
    o = sieve__align_up(o + (size_t)pv, 256);
    pl->o_off = o;
    o = sieve__align_up(o + ((size_t)pl->tiles + 1) * 8, 256);
    pl->o_ms = o;
    o = sieve__align_up(o + (size_t)lists * 8, 256);
    pl->o_kc = o;
    o = sieve__align_up(o + (size_t)counts * 4, 256);
    pl->o_cc = o;
    o = sieve__align_up(o + (size_t)counts * 4, 256);
    pl->o_kl = o;
    o = sieve__align_up(o + (size_t)lists * 4, 256);
    pl->o_cl = o;
    o = sieve__align_up(o + (size_t)lists * 4, 256);
    pl->o_part = o;
    o = sieve__align_up(o + (size_t)part, 256);
    pl->total = o;
    return 0;
}

template <typename E>
int launch_select(const sieve_bsp_params *p, const BspPlan &pl, const Geom &geo,
                  const void *q, const void *keys, const void *values, unsigned char *base,
                  uint32_t *kc, int32_t *kl, bool score_wg, cudaStream_t s) {
    const sieve_attn_params *a = &p->attn;
    E *pk = (E *)(base + pl.o_pk), *pv = (E *)(base + pl.o_pv);
    /* head_dim and v_dim are 64 or 128 (check_bsp_shape): rows of whole 16-byte units */
    const uint32_t wk = a->kv_heads * a->head_dim, wv = a->kv_heads * a->v_dim;
    const uint32_t wmax = wk > wv ? wk : wv;
    const uint32_t gy = (wmax / 8 + BS_POOL_THREADS - 1) / BS_POOL_THREADS;
    bs_pool_kernel<E><<<dim3(pl.nblocks, gy, 2), BS_POOL_THREADS, 0, s>>>(
        (const E *)keys, (const E *)values, a->n_keys, wk, wv, p->block, pk, pv);
    SIEVE_CUDA_LAUNCH_CHECK();
    const float scale = a->scale != 0.f ? a->scale : 1.f / sqrtf((float)a->head_dim);
    ScoreArgs sa{q, pk, geo, a->q_heads, a->kv_heads, pl.at.R,
                 (float)((double)scale * 1.4426950408889634),
                 (const unsigned long long *)(base + pl.o_off), pl.per_head,
                 (float2 *)(base + pl.o_ms)};
    const dim3 grid(pl.tiles, a->kv_heads);
    if (score_wg) {
        SIEVE_CUDA_TRY(cudaFuncSetAttribute(bs_score_wg_kernel<E>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            ScoreWgSmem::BYTES));
        bs_score_wg_kernel<E><<<grid, BS_SCORE_THREADS, ScoreWgSmem::BYTES, s>>>(sa);
    } else if (a->head_dim == 64) {
        bs_score_kernel<E, 64><<<grid, BS_SCORE_THREADS, 0, s>>>(sa);
    } else {
        bs_score_kernel<E, 128><<<grid, BS_SCORE_THREADS, 0, s>>>(sa);
    }
    SIEVE_CUDA_LAUNCH_CHECK();
    SelectArgs se{geo, a->kv_heads, p->sink_blocks, p->window_blocks, p->alpha, p->correct,
                  (const unsigned long long *)(base + pl.o_off), pl.per_head,
                  (const float2 *)(base + pl.o_ms), kc, (uint32_t *)(base + pl.o_cc), kl,
                  (int32_t *)(base + pl.o_cl)};
    bs_select_kernel<<<grid, BS_SELECT_THREADS, 0, s>>>(se);
    SIEVE_CUDA_LAUNCH_CHECK();
    return 0;
}

int run_bsp(sieve__cuda_ctx *c, const sieve_bsp_params *p, const void *q, const void *keys,
            const void *values, void *scratch, size_t scratch_bytes, float *out, float *lse,
            uint32_t *sel_counts, int32_t *sel_blocks, sieve_bsp_stats *stats) {
    int rc = check_bsp_shape(c, p);
    if (rc) return rc;
    const sieve_attn_params *a = &p->attn;
    if (((uintptr_t)q | (uintptr_t)keys | (uintptr_t)values) & 15) return SIEVE_ENOTSUP;
    if ((uintptr_t)scratch & 255) return SIEVE_EINVAL;
    if (((uintptr_t)out | (uintptr_t)lse | (uintptr_t)sel_counts | (uintptr_t)sel_blocks) & 3)
        return SIEVE_EINVAL;
    BspPlan pl;
    rc = make_bsp_plan(p, c->prop.multiProcessorCount, &pl);
    if (rc) return rc;
    SIEVE_CUDA_TRY(cudaSetDevice(c->ordinal));
    unsigned char *base = nullptr;
    rc = sieve__cuda_scratch(c, scratch, scratch_bytes, pl.total, &base);
    if (rc) return rc;
    unsigned long long *off = tile_offsets(p, pl.tiles);
    if (!off) return SIEVE_ENOMEM;
    sieve__cuda_events<3> ev;
    rc = ev.create();
    if (rc) {
        free(off);
        return rc;
    }
    cudaStream_t s = c->stream;
    /* pageable source: the copy has read it when the call returns */
    const cudaError_t ce = cudaMemcpyAsync(base + pl.o_off, off, ((size_t)pl.tiles + 1) * 8,
                                           cudaMemcpyHostToDevice, s);
    free(off);
    if (ce != cudaSuccess) return sieve__cuda_fail(ce, "cudaMemcpyAsync", __FILE__, __LINE__);
    uint32_t *kc = sel_counts ? sel_counts : (uint32_t *)(base + pl.o_kc);
    int32_t *kl = sel_blocks ? sel_blocks : (int32_t *)(base + pl.o_kl);
    const Geom geo{a->n_queries, a->n_keys, a->pos0, p->block, pl.tiles};

    SIEVE_CUDA_TRY(cudaEventRecord(ev.e[0], s));
    /* the block scores on wgmma on compute capability 9.0 with D = 128 (the transposed
     * kernel: at 128K the selection 2.4 -> 1.7 ms); SIEVE_CUDA_BSP_SCORE=mma keeps the
     * mma.sync kernel */
    const char *es = getenv("SIEVE_CUDA_BSP_SCORE");
    const bool score_wg = c->prop.major == 9 && c->prop.minor == 0 && a->head_dim == 128 &&
                          !(es && !strcmp(es, "mma"));
    rc = a->dtype == SIEVE_DTYPE_BF16
             ? launch_select<__nv_bfloat16>(p, pl, geo, q, keys, values, base, kc, kl, score_wg, s)
             : launch_select<__half>(p, pl, geo, q, keys, values, base, kc, kl, score_wg, s);
    if (rc) return rc;
    SIEVE_CUDA_TRY(cudaEventRecord(ev.e[1], s));

    const float scale = a->scale != 0.f ? a->scale : 1.f / sqrtf((float)a->head_dim);
    AttnArgs aa{q, keys, values, nullptr, nullptr, nullptr, 0, a->n_queries, a->q_heads,
                a->kv_heads, pl.at.R, pl.at.G, 0, (float)((double)scale * 1.4426950408889634),
                out, lse, pl.at.nsl, pl.at.nsl > 1 ? (float *)(base + pl.o_part) : nullptr,
                a->n_keys, a->pos0, pl.at.groups};
    aa.kept_count = kc;
    aa.corr_count = (const uint32_t *)(base + pl.o_cc);
    aa.kept = kl;
    aa.corr = (const int32_t *)(base + pl.o_cl);
    aa.tile_off = (const unsigned long long *)(base + pl.o_off);
    aa.per_head = pl.per_head;
    aa.tiles = pl.tiles;
    aa.block = p->block;
    aa.bsub = p->block / SA_BN;
    aa.pkeys = base + pl.o_pk;
    aa.pvalues = base + pl.o_pv;
    aa.corr_log2 = log2f((float)p->block);
    /* the Hopper kernels where they run (attn_wg.cuh: 128-key tiles for blocks of 128), CTAs
     * of 128 rows of one tile */
    const uint64_t chunks = ((uint64_t)p->block * pl.at.R + WG_ROWS - 1) / WG_ROWS;
    if (wg_choose(c, a->head_dim, a->v_dim, chunks * pl.tiles * a->kv_heads, out))
        rc = launch_wg<SA_BLOCKS>(aa, a->dtype, (uint32_t)chunks, s);
    else
        rc = attend<SA_BLOCKS>(aa, pl.at, a->dtype, a->head_dim, a->v_dim, s);
    if (rc) return rc;
    SIEVE_CUDA_TRY(cudaEventRecord(ev.e[2], s));
    SIEVE_CUDA_TRY(cudaStreamSynchronize(s));
    if (stats) {
        const size_t n = (size_t)a->kv_heads * pl.tiles;
        uint32_t *h = (uint32_t *)malloc(n * 8);
        if (!h) return SIEVE_ENOMEM;
        cudaError_t e = cudaMemcpy(h, kc, n * 4, cudaMemcpyDeviceToHost);
        if (e == cudaSuccess)
            e = cudaMemcpy(h + n, base + pl.o_cc, n * 4, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) {
            free(h);
            return sieve__cuda_fail(e, "cudaMemcpy", __FILE__, __LINE__);
        }
        sieve_bsp_stats st;
        memset(&st, 0, sizeof st);
        st.visible_blocks = (uint64_t)a->kv_heads * pl.per_head;
        for (size_t i = 0; i < n; i++) {
            st.kept_blocks += h[i];
            st.corrected_blocks += h[n + i];
        }
        free(h);
        st.density = st.visible_blocks ? (double)st.kept_blocks / (double)st.visible_blocks : 0.0;
        st.ms_select = ev.ms(0, 1);
        st.ms_attend = ev.ms(1, 2);
        *stats = st;
    }
    return 0;
}

} // namespace

extern "C" int sieve__cuda_bsp_scratch_size(void *ctx, const sieve_bsp_params *p,
                                            size_t *bytes) {
    const sieve__cuda_ctx *c = (const sieve__cuda_ctx *)ctx;
    int rc = check_bsp_shape(c, p);
    if (rc) return rc;
    BspPlan pl;
    rc = make_bsp_plan(p, c ? c->prop.multiProcessorCount : 0, &pl);
    if (rc) return rc;
    *bytes = pl.total;
    return 0;
}

extern "C" int sieve__cuda_block_sparse_prefill(void *ctx, const sieve_bsp_params *p,
                                                const void *q, const void *keys,
                                                const void *values, void *scratch,
                                                size_t scratch_bytes, float *out, float *lse,
                                                uint32_t *sel_counts, int32_t *sel_blocks,
                                                sieve_bsp_stats *stats) {
    sieve__cuda_ctx *c = (sieve__cuda_ctx *)ctx;
    const int rc = run_bsp(c, p, q, keys, values, scratch, scratch_bytes, out, lse, sel_counts,
                           sel_blocks, stats);
    return sieve__cuda_settle(c, rc);
}

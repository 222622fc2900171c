/* knn.cu: the CUDA backend's batched exact k-NN (fused score + sample-guided top-k).
 *
 * Owns: the host pipeline of one search on the GPU and its small helper kernels:
 *   1. upload and prepare the queries (Cosine normalisation, |q|^2, conversion to the
 *      storage type, zero padding);
 *   2. sample: score a fixed-stride sample (random offset) and, per query, radix-select
 *      the proposed boundary (rank j), a secondary boundary (rank j2) and the sample max,
 *      which spans the bins;
 *   3. scan: one fused pass (scan.cuh, MODE_GATE) reads each tile of rows once for all
 *      queries of the tile, gates, appends candidates, counts bins and tightens;
 *   4. certify on the host from the admitted counts: k <= count <= capacity is exact;
 *      underfill rescans with the secondary boundary, overflow rescans with the histogram
 *      edge that already holds k, and what still fails takes the full path (every eligible
 *      row materialised and sorted), so no answer depends on the sample;
 *   5. select: per query, the candidates at or above the threshold bin sorted (key desc,
 *      row asc) and the first k written out: by one block in shared memory where they fit,
 *      or by up to eight blocks each sorting a run of consecutive histogram bins
 *      (select_block_kernel), else by one segmented sort. The block select and the download
 *      usually run before step 4, speculatively (speculation()): the blocks certify on the
 *      device, and step 4 checks their report.
 * Must not: be called except through kernels/device.c; allocate on the fused path when the
 * caller passes scratch.
 */
#include <cooperative_groups.h>
#include <cub/cub.cuh>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <thread>
#include <type_traits>
#include <vector>

#include "cuda_common.cuh"
#include "scan.cuh"

using namespace sieve_cuda;
namespace cg = cooperative_groups;

namespace {

constexpr uint32_t NEG_INF_ORD = 0x007fffffu; /* ord_of(-inf) */
constexpr size_t FULL_BUDGET = 512ull << 20;  /* bytes of full-path buffers per chunk */
constexpr uint32_t SEGSORT_MAX = 262144;      /* full-path segments up to this use one
                                                 segmented sort; longer ones a device sort */


float host_float_of_ord(uint32_t o) {
    uint32_t u = bits_of_ord(o);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ------------------------------------------------------------------ small kernels */

/* The score a result reports for its key: Euclid's distance from the query's |q|^2 (*qn2,
 * read only for Euclid) and the key 2 q.x - |x|^2; the key itself for Dot and Cosine. */
__device__ inline float score_of(int metric, const float *qn2, float key) {
    return metric == 2 ? sqrtf(fmaxf(0.f, *qn2 - key)) : key;
}

/* Queries: Cosine normalisation, |q|^2 (index order, float32), conversion, padding.
 * Only Euclid reads |q|^2 (the select's distances) and only Cosine scales the row, so the
 * one thread's fmaf chain in index order (the CPU's order) runs for those two metrics
 * alone: |q|^2 for Euclid, the norm for Cosine (whose qn2 is then 0, as Dot's, unread).
 * A chain is 768 dependent fmaf at d = 768, a few microseconds that every kernel after
 * this one waits for. With `staged` the block first copies the row into dynamic shared
 * memory (dim floats), so the chain reads shared memory instead of waiting on global loads
 * (Nsight Compute on the H200, B = 64: 25 us a call reading global memory). Also zeroes
 * the gate scan's tile counter `ctr` (the chained gate scan's producer counts on it before
 * it waits: scan.cuh, pdl_wait). The first kernel of the search's chain: the sample scan
 * behind it waits for it. */
template <typename T>
__global__ void prep_queries_kernel(const float *qf, uint32_t nq, uint32_t nq_pad, uint32_t dim,
                                    uint32_t dpad, int metric, bool staged, T *out, float *qn2,
                                    uint32_t *ctr) {
    pdl_trigger();
    extern __shared__ float qrow[];
    uint32_t q = blockIdx.x;
    if (q == 0 && threadIdx.x == 0) *ctr = 0;
    if (q >= nq_pad) return;
    const float *src = qf + (size_t)q * dim;
    const bool chain = metric == 1 || metric == 2;
    __shared__ float scale;
    if (chain && staged && q < nq) {
        for (uint32_t i = threadIdx.x; i < dim; i += blockDim.x) qrow[i] = src[i];
        __syncthreads();
        src = qrow;
    }
    if (threadIdx.x == 0) {
        float s = 1.0f, n2 = 0.f;
        if (q < nq) {
            if (chain) {
#pragma unroll 8
                for (uint32_t i = 0; i < dim; i++) n2 = fmaf(src[i], src[i], n2);
            }
            if (metric == 1) {
                float nrm = sqrtf(n2);
                s = nrm > 0.f ? 1.0f / nrm : 1.0f;
                n2 = 0.f;
            }
            qn2[q] = n2;
        }
        scale = s;
    }
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < dpad; i += blockDim.x) {
        float v = (q < nq && i < dim) ? src[i] * scale : 0.f;
        out[(size_t)q * dpad + i] = T(v);
    }
}

/* Gathers prepared query rows (and |q|^2) listed in idx into a compact buffer. */
__global__ void gather_rows_kernel(const unsigned char *src, unsigned char *dst, size_t row_bytes,
                                   const uint32_t *idx, uint32_t n, uint32_t n_pad,
                                   const float *qn2, float *qn2_dst) {
    uint32_t j = blockIdx.x;
    if (j >= n_pad) return;
    unsigned char *d = dst + (size_t)j * row_bytes;
    if (j < n) {
        const unsigned char *s = src + (size_t)idx[j] * row_bytes;
        for (size_t i = threadIdx.x; i < row_bytes; i += blockDim.x) d[i] = s[i];
        if (threadIdx.x == 0) qn2_dst[j] = qn2[idx[j]];
    } else {
        for (size_t i = threadIdx.x; i < row_bytes; i += blockDim.x) d[i] = 0;
    }
}

/* The result rows as 32-bit values for the pipelined download (download_results): rows
 * are below 2^31 there and the padding row -1 stays -1. */
__global__ void narrow_rows_kernel(const int64_t *rows, int32_t *out, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = (int32_t)rows[i];
}

/* Eligible rows (not deleted, allowed): over all n_rows into out[0], over the s_count sample
 * rows (s_offset, then every s_stride-th) into out[1]; out zeroed by the caller. One thread
 * per bitmap word and per sample row. */
__global__ void count_eligible_kernel(const uint64_t *deleted, const uint64_t *allowed,
                                      uint32_t n_rows, uint32_t s_offset, uint32_t s_stride,
                                      uint32_t s_count, unsigned long long *out) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long c = 0, cs = 0;
    if (i < (n_rows + 63) / 64) {
        uint64_t w = ~0ull;
        if (deleted) w &= ~deleted[i];
        if (allowed) w &= allowed[i];
        const uint32_t rem = n_rows - i * 64;
        if (rem < 64) w &= (1ull << rem) - 1ull;
        c = __popcll(w);
    }
    if (i < s_count) {
        const uint32_t r = s_offset + i * s_stride;
        bool e = true;
        if (deleted && ((deleted[r >> 6] >> (r & 63)) & 1ull)) e = false;
        if (allowed && !((allowed[r >> 6] >> (r & 63)) & 1ull)) e = false;
        cs = e;
    }
    for (int o = 16; o > 0; o /= 2) {
        c += __shfl_down_sync(0xffffffffu, c, o);
        cs += __shfl_down_sync(0xffffffffu, cs, o);
    }
    if ((threadIdx.x & 31) == 0) {
        if (c) atomicAdd(out, c);
        if (cs) atomicAdd(out + 1, cs);
    }
}

/* Adds each lane's key to bin `bin` of h when `on`; lanes of the warp with the same bin add
 * once, together (a sample's keys share their top bytes, so one atomic per key would queue
 * on one or two bins). Every lane of the warp calls it. */
__device__ inline void hist_add_warp(uint32_t *h, uint32_t bin, bool on) {
    if (!__any_sync(0xffffffffu, on)) return;
    const uint32_t peers = __match_any_sync(0xffffffffu, on ? bin : 0xffffffffu);
    if (on && (threadIdx.x & 31u) == (uint32_t)(__ffs(peers) - 1))
        atomicAdd(&h[bin], (uint32_t)__popc(peers));
}

/* Ordered values at descending ranks 0, rj and rj2 of n keys. */
struct Sel3 {
    uint32_t hi, j, j2;
};

/* Static shared memory of the sample selection. sum: the cluster's histogram of each pass
 * (only the cluster's first block's is used); hist: this block's histogram of the pass, then
 * the cluster's; sel: the digits and the ranks left (j, then j2); mx: the maximum. */
struct SelSmem {
    uint32_t sum[4][512];
    uint32_t hist[512];
    uint32_t sel[4];
    uint32_t mx;
};

/* Keys per slice when n keys are split over `parts` blocks, and the dynamic shared memory a
 * block stages its slice in (0: the slice does not fit in SELECT_SMEM and is read in place). */
constexpr size_t SELECT_SMEM = 96 * 1024;
__host__ __device__ inline uint32_t select_slice(uint32_t n, uint32_t parts) {
    return (n + parts - 1) / parts;
}
__host__ __device__ inline size_t select_stage_bytes(uint32_t n, uint32_t parts) {
    const size_t b = (size_t)select_slice(n, parts) * sizeof(uint32_t);
    return b <= SELECT_SMEM ? b : 0;
}

/* One warp: the digit of a radix pass from a 256-bin histogram h of the keys that match the
 * prefix so far: the highest bin whose count from the top passes `remaining` (*digit) and the
 * rank left inside it (*rest). When the counts do not pass it (a rank at or past the matching
 * keys) digit 0 and `remaining` less their total, as a selection of that rank alone gives.
 * Lane l sums bins 255 - 8l ... 248 - 8l; a prefix sum over the lanes finds the lane that holds
 * the digit, which walks its 8 bins. Every lane of the warp calls it. */
__device__ void digit_from_top(const uint32_t *h, uint32_t remaining, uint32_t *digit,
                               uint32_t *rest) {
    const uint32_t lane = threadIdx.x & 31u;
    uint32_t c[8], s = 0;
    for (int t = 0; t < 8; t++) {
        c[t] = h[255 - 8 * lane - t];
        s += c[t];
    }
    uint32_t incl = s;
    for (uint32_t o = 1; o < 32; o *= 2) {
        const uint32_t v = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += v;
    }
    const uint32_t hit = __ballot_sync(0xffffffffu, incl > remaining);
    const uint32_t total = __shfl_sync(0xffffffffu, incl, 31);
    if (!hit) {
        if (lane == 0) {
            *digit = 0;
            *rest = remaining - total;
        }
        return;
    }
    if (lane != (uint32_t)(__ffs(hit) - 1)) return;
    uint32_t accu = incl - s;
    for (int t = 0; t < 8; t++) {
        if (accu + c[t] > remaining) {
            *digit = 255 - 8 * lane - t;
            *rest = remaining - accu;
            return;
        }
        accu += c[t];
    }
}

/* Sel3 of n keys (global memory) split over the blocks of the calling thread block cluster:
 * block r of C takes the r-th slice of select_slice(n, C) keys, stages its ordered values in
 * `ords` (dynamic shared memory, when select_stage_bytes(n, C) > 0) and takes their maximum
 * on the way. Ranks rj and rj2 (each only when wanted; 0 otherwise) by 4 radix passes of 8
 * bits: each block counts its slice's keys that match the prefix (warp-aggregated), adds the
 * counts into the first block's sum for the pass (distributed shared memory), and after one
 * cluster barrier every block copies the sum back and finds the same digits. A rank at or past
 * n gives what a selection of that rank alone gives. C = 1 is one block on its own.
 * One block with its keys staged and wanted ranks R < (groups of 32 keys) / 2, the usual
 * case of the propose step from 34 queries on (select_parts; rank 16 of 16384 sample keys at
 * k = 128 and 5M rows): the radix passes
 * run over the keys at or above the R-th largest group maximum
 * (found by the same passes over the groups' maxima, kept on the way in), a few hundred keys
 * in place of all of them. At least R + 1 groups have a maximum at or above it, so at least
 * R + 1 keys are, and the ranks up to R among those keys are the ranks among all keys; when
 * more than SELECT_FEW keys are at or above it (ties), the passes run over all keys as before.
 * The group maxima and those keys live in SelSmem::sum, which only clusters of several blocks
 * use otherwise.
 * Every thread of every block of the cluster calls it; blockDim.x a multiple of 32, >= 64.
 * .hi is the maximum of all n keys in the cluster's first block only (the others get their
 * slice's). */
constexpr uint32_t SELECT_GROUP = 32;                  /* keys a group maximum covers */
constexpr uint32_t SELECT_GROUPS = SELECT_SMEM / 4 / SELECT_GROUP; /* most groups: 768 */
constexpr uint32_t SELECT_FEW = 4 * 512 - SELECT_GROUPS; /* the fast path's keys: 1280 */
constexpr uint32_t SELECT_LOADS = 8;                   /* keys a thread loads at once */

/* The ordered value at descending rank `rank` (< n) of n values in shared memory, by 4 radix
 * passes of 8 bits over them (one block; every thread calls it). */
__device__ uint32_t block_rank_desc(const uint32_t *v, uint32_t n, uint32_t rank, SelSmem &sm) {
    const uint32_t tid = threadIdx.x, bd = blockDim.x;
    uint32_t pre = 0, mask = 0, rem = rank;
    for (int p = 0; p < 4; p++) {
        const int shift = 24 - 8 * p;
        for (uint32_t i = tid; i < 256; i += bd) sm.hist[i] = 0;
        __syncthreads();
        for (uint32_t base = 0; base < n; base += bd) {
            const uint32_t i = base + tid;
            const uint32_t u = i < n ? v[i] : 0u;
            hist_add_warp(sm.hist, (u >> shift) & 255u, i < n && (u & mask) == pre);
        }
        __syncthreads();
        if (tid < 32) digit_from_top(sm.hist, rem, &sm.sel[0], &sm.sel[1]);
        __syncthreads();
        pre |= sm.sel[0] << shift;
        rem = sm.sel[1];
        mask |= 255u << shift;
        __syncthreads(); /* sel and hist are read before the next pass writes them */
    }
    return pre;
}
__device__ Sel3 cluster_select3_desc(const float *keys, uint32_t n, uint32_t rj, uint32_t rj2,
                                     bool want_j, bool want_j2, SelSmem &sm, uint32_t *ords) {
    cg::cluster_group cl = cg::this_cluster();
    const uint32_t tid = threadIdx.x, bd = blockDim.x;
    const uint32_t C = cl.num_blocks(), r = cl.block_rank();
    const uint32_t per = select_slice(n, C);
    const uint32_t lo = r * per < n ? r * per : n;
    const uint32_t len = (n - lo < per ? n - lo : per);
    const bool staged = select_stage_bytes(n, C) != 0;
    const float *src = keys + lo;
    if (C > 1) /* the cluster's sums (one block on its own keeps its group maxima there) */
        for (uint32_t i = tid; i < 4 * 512; i += bd) (&sm.sum[0][0])[i] = 0;
    if (tid < 4) sm.sel[tid] = 0;
    if (tid == 0) sm.mx = 0u; /* the smallest ordered value */
    uint32_t m = 0u;
    /* one staged block: the maximum of each group of SELECT_GROUP keys, after the gathered
       keys in sm.sum (which such a block does not otherwise use) */
    const bool groups_kept = C == 1 && staged;
    uint32_t *gmax = &sm.sum[0][0] + SELECT_FEW;
    const uint32_t groups = (len + SELECT_GROUP - 1) / SELECT_GROUP;
    static_assert(SELECT_GROUP == 32, "a group is a warp's keys");
    /* SELECT_LOADS keys a thread in flight: a loop of one load each waited once per key
       for the memory (16384 keys over 512 threads: 32 round trips in a row). Whole warps
       go round (groups_kept is the block's, so every lane reaches the reduction) */
    for (uint32_t base = 0; base < len; base += bd * SELECT_LOADS) {
        uint32_t u[SELECT_LOADS];
#pragma unroll
        for (uint32_t t = 0; t < SELECT_LOADS; t++) {
            const uint32_t i = base + t * bd + tid;
            u[t] = i < len ? ord_of(src[i]) : 0u;
        }
#pragma unroll
        for (uint32_t t = 0; t < SELECT_LOADS; t++) {
            const uint32_t i = base + t * bd + tid;
            if (i < len && staged) ords[i] = u[t];
            m = max(m, u[t]);
            if (groups_kept) {
                const uint32_t g = __reduce_max_sync(0xffffffffu, u[t]);
                if ((tid & 31u) == 0 && i < len) gmax[i / SELECT_GROUP] = g;
            }
        }
    }
    m = __reduce_max_sync(0xffffffffu, m);
    cl.sync(); /* every block's sums zeroed and slice staged */
    uint32_t *sum0 = cl.map_shared_rank(&sm.sum[0][0], 0);
    if ((tid & 31u) == 0) atomicMax(cl.map_shared_rank(&sm.mx, 0), m);
    /* one staged block, small ranks: the passes over the keys at or above the R-th largest
       group maximum only (see above), gathered into sm.sum */
    const uint32_t R = want_j && want_j2 ? max(rj, rj2) : want_j ? rj : rj2;
    const uint32_t *vals = ords;
    uint32_t nv = len;
    if (groups_kept && (want_j || want_j2) && R < groups / 2) {
        const uint32_t T = block_rank_desc(gmax, groups, R, sm);
        if (tid == 0) sm.sel[2] = 0; /* the gathered count */
        __syncthreads();
        uint32_t *few = &sm.sum[0][0];
        for (uint32_t base = 0; base < len; base += bd) {
            const uint32_t i = base + tid;
            const bool keep = i < len && ords[i] >= T;
            const uint32_t bal = __ballot_sync(0xffffffffu, keep);
            uint32_t at = 0;
            if ((tid & 31u) == 0 && bal) at = atomicAdd(&sm.sel[2], (uint32_t)__popc(bal));
            at = __shfl_sync(0xffffffffu, at, 0) + __popc(bal & ((1u << (tid & 31u)) - 1u));
            if (keep && at < SELECT_FEW) few[at] = ords[i];
        }
        __syncthreads();
        const uint32_t got = sm.sel[2];
        if (got > R && got <= SELECT_FEW) {
            vals = few;
            nv = got;
        }
        __syncthreads();
        if (tid < 4) sm.sel[tid] = 0;
        __syncthreads();
    }
    uint32_t pj = 0, pj2 = 0, mask = 0, rem_j = rj, rem_j2 = rj2;
    for (int p = 0; p < 4 && (want_j || want_j2); p++) {
        const int shift = 24 - 8 * p;
        /* while both ranks' digits so far agree (always in the first pass) their counts are
           the same: count once, copy */
        const bool one = want_j && want_j2 && pj == pj2;
        for (uint32_t i = tid; i < 512; i += bd) sm.hist[i] = 0;
        __syncthreads();
        for (uint32_t base = 0; base < nv; base += bd) {
            const uint32_t i = base + tid;
            const bool in = i < nv;
            const uint32_t u = in ? (staged ? vals[i] : ord_of(src[i])) : 0u;
            const uint32_t d = (u >> shift) & 255u;
            if (want_j) hist_add_warp(sm.hist, d, in && (u & mask) == pj);
            if (want_j2 && !one) hist_add_warp(sm.hist + 256, d, in && (u & mask) == pj2);
        }
        __syncthreads();
        if (one) {
            for (uint32_t i = tid; i < 256; i += bd) sm.hist[256 + i] = sm.hist[i];
            __syncthreads();
        }
        if (C > 1) {
            for (uint32_t i = tid; i < 512; i += bd)
                if (sm.hist[i]) atomicAdd(sum0 + p * 512 + i, sm.hist[i]);
            cl.sync(); /* the pass's sum is complete */
            for (uint32_t i = tid; i < 512; i += bd) sm.hist[i] = sum0[p * 512 + i];
            __syncthreads();
        }
        const uint32_t w = tid >> 5;
        if (w == 0 && want_j) digit_from_top(sm.hist, rem_j, &sm.sel[0], &sm.sel[1]);
        if (w == 1 && want_j2) digit_from_top(sm.hist + 256, rem_j2, &sm.sel[2], &sm.sel[3]);
        __syncthreads();
        pj |= sm.sel[0] << shift;
        rem_j = sm.sel[1];
        pj2 |= sm.sel[2] << shift;
        rem_j2 = sm.sel[3];
        mask |= 255u << shift;
    }
    /* the maximum is complete, and no block leaves while another may still read its sums */
    cl.sync();
    return {r == 0 ? sm.mx : m, want_j ? pj : 0u, want_j2 ? pj2 : 0u};
}

/* Query q's bin table over [lo, hi]: edges[q][b] = edge_at(b, lo, w) and binw[q] = w, so
 * the scan can compute any edge from edges[q][0] and binw[q] (scan.cuh, bin_of). */
__device__ void write_edges(float *edges, float *binw, uint32_t q, float lo, float hi) {
    float w = (hi - lo) / (float)NBINS;
    if (!(w > 0.f) || !isfinite(w)) w = 0.f;
    for (int b = threadIdx.x; b < NBINS; b += blockDim.x) edges[(size_t)q * NBINS + b] = edge_at(b, lo, w);
    if (threadIdx.x == 0) binw[q] = w;
}

/* Test entry's kernel: cluster b selects over list b (n keys) into out[3b .. 3b + 2]. */
__global__ void select3_kernel(const float *keys, uint32_t n, uint32_t rj, uint32_t rj2,
                               float *out) {
    extern __shared__ uint32_t ords[];
    __shared__ SelSmem sm;
    cg::cluster_group cl = cg::this_cluster();
    const uint32_t l = blockIdx.x / cl.num_blocks();
    const Sel3 r = cluster_select3_desc(keys + (size_t)l * n, n, rj, rj2, true, true, sm, ords);
    if (cl.block_rank() == 0 && threadIdx.x == 0) {
        out[3 * l + 0] = float_of_ord(r.hi);
        out[3 * l + 1] = float_of_ord(r.j);
        out[3 * l + 2] = float_of_ord(r.j2);
    }
}

/* One cluster per query: proposed boundary (rank j), secondary (rank j2, or -inf when
 * j2 >= s_e), sample max; bins over [boundary, max]; state reset. forced: use `fb`. */
__global__ void propose_kernel(const float *sample, uint32_t S, uint32_t s_e, uint32_t j,
                               uint32_t j2, int forced, float fb, uint32_t *thr, uint32_t *thr2,
                               float *hi_out, float *edges, float *binw, uint32_t *hist,
                               uint32_t *cnt) {
    pdl_wait(); /* the sample scan's keys; then the gate scan may be scheduled */
    pdl_trigger();
    extern __shared__ uint32_t ords[];
    __shared__ SelSmem sm;
    cg::cluster_group cl = cg::this_cluster();
    const uint32_t q = blockIdx.x / cl.num_blocks();
    const Sel3 r = cluster_select3_desc(sample + (size_t)q * S, S, j, j2, !forced, j2 < s_e, sm,
                                        ords);
    if (cl.block_rank() != 0) return;
    uint32_t o_hi = r.hi;
    uint32_t o_j = r.j;
    uint32_t o_j2 = j2 < s_e ? r.j2 : NEG_INF_ORD;
    float lo = forced ? fb : float_of_ord(o_j);
    float hi = float_of_ord(o_hi);
    if (hi < lo) hi = lo;
    float lo2 = float_of_ord(o_j2);
    if (forced && lo2 > lo) lo2 = -__int_as_float(0x7f800000);
    if (threadIdx.x == 0) {
        thr[q] = ord_of(lo);
        thr2[q] = ord_of(lo2);
        hi_out[q] = hi;
        cnt[q] = 0;
    }
    write_edges(edges, binw, q, lo, hi);
    for (int b = threadIdx.x; b < NBINS; b += blockDim.x) hist[(size_t)q * NBINS + b] = 0;
}

/* Resets the listed queries' state to boundary lo[i] with bins over [lo, hi]. */
__global__ void reset_state_kernel(const uint32_t *idx, const float *lo, const float *hi,
                                   uint32_t *thr, float *edges, float *binw, uint32_t *hist,
                                   uint32_t *cnt) {
    uint32_t q = idx[blockIdx.x];
    float l = lo[blockIdx.x], h = hi[q];
    if (h < l) h = l;
    if (threadIdx.x == 0) {
        thr[q] = ord_of(l);
        cnt[q] = 0;
    }
    write_edges(edges, binw, q, l, h);
    for (int b = threadIdx.x; b < NBINS; b += blockDim.x) hist[(size_t)q * NBINS + b] = 0;
}

/* One block per query: keeps the candidates at or above the threshold bin (the highest bin
 * whose count from the top reaches k; every top-k key lies there or above), compacted to
 * out[q*cap ...], their number in m[q] and the segment bounds for the sort. A query not in
 * `use` gets an empty segment. The histogram counts exactly the buffered candidates of a
 * certified query (cnt <= cap), and bin_of puts a key at or above edges[b] in bin b or
 * higher, so the kept ones are exactly those with key >= edges[b] (all of them when b = 0,
 * whose lower edge is not a bound). */
__global__ void compact_top_kernel(const uint64_t *cand, uint32_t cap, const uint32_t *cnt,
                                   const unsigned char *use, const uint32_t *hist,
                                   const float *edges, uint32_t k, uint64_t *out, uint32_t *m,
                                   int64_t *beg, int64_t *end) {
    const uint32_t q = blockIdx.x;
    __shared__ float edge;
    __shared__ uint32_t pos;
    if (threadIdx.x == 0) {
        beg[q] = (int64_t)q * cap;
        uint32_t cum = 0;
        edge = -__int_as_float(0x7f800000);
        for (int b = NBINS - 1; b > 0; b--) {
            cum += hist[(size_t)q * NBINS + b];
            if (cum >= k) {
                edge = edges[(size_t)q * NBINS + b];
                break;
            }
        }
        pos = 0;
    }
    __syncthreads();
    const uint32_t n = use[q] ? (cnt[q] < cap ? cnt[q] : cap) : 0;
    const uint64_t *c = cand + (size_t)q * cap;
    uint64_t *o = out + (size_t)q * cap;
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
        const uint64_t v = c[i];
        if (cand_key(v) >= edge) o[atomicAdd(&pos, 1u)] = v; /* order: the sort restores it */
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        m[q] = pos;
        end[q] = (int64_t)q * cap + pos;
    }
}

/* Writes the first k of each sorted list. Row j of the list goes to output query dst[j]
 * (or j); len[j] (or len_all) bounds the valid entries. Euclid scores become distances. */
__global__ void extract_kernel(const uint64_t *sorted, size_t ld, const uint32_t *len,
                               uint32_t len_all, const unsigned char *use, const uint32_t *dst,
                               uint32_t n, uint32_t k, int metric, const float *qn2,
                               int64_t *out_rows, float *out_scores, uint32_t *out_counts) {
    for (uint32_t j = blockIdx.y; j < n; j += gridDim.y) {
        if (use && !use[j]) continue;
        uint32_t q = dst ? dst[j] : j;
        uint32_t L = len ? len[j] : len_all;
        const uint64_t *s = sorted + (size_t)j * ld;
        for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < k;
             i += gridDim.x * blockDim.x) {
            uint64_t v = i < L ? s[i] : EMPTY_SLOT;
            int64_t r = -1;
            float sc = __int_as_float(0x7fc00000);
            if (v != EMPTY_SLOT) {
                r = cand_row(v);
                float key = cand_key(v);
                sc = score_of(metric, qn2 + j, key);
            }
            out_rows[(size_t)q * k + i] = r;
            out_scores[(size_t)q * k + i] = sc;
        }
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            /* valid entries are a prefix (EMPTY sorts last) */
            uint32_t m = L < k ? L : k;
            uint32_t lo = 0, hi = m;
            while (lo < hi) {
                uint32_t mid = (lo + hi) / 2;
                if (s[mid] != EMPTY_SLOT) lo = mid + 1;
                else hi = mid;
            }
            out_counts[q] = lo;
        }
    }
}

/* One block per query (or per part of a query, below), in place of compact + segmented
 * sort + extract when every used query's kept candidates fit the block: finds the threshold
 * bin as
 * compact_top_kernel does (a suffix sum of the histogram in place of its serial walk),
 * compacts the candidates at or above it into shared memory, sorts those with a block radix
 * sort sized by their number (T * I >= m, I <= IMAX) and writes the first k (best first,
 * ties by the smaller row) with the same padding and counts as extract_kernel. The sort key
 * drops the bits every kept candidate shares: (hi - hi_min) << rb | row, where hi is the
 * candidate's upper word (~ord(key)) and rb the bits of the largest row (23 at 5M rows), so
 * the radix passes cover the kept keys' range and the row bits instead of 64 bits (cub's
 * default 4-bit digits; 5 bits measured slower). Rows are unique within a query, so the
 * order is a full sort's. The staging holds spec.stage candidates (at most T * IMAX, what
 * the block sorts): what a query keeps is known before it is compacted (the histogram counts
 * exactly the buffered candidates of a used query, so the kept ones number the threshold
 * bin's count from the top), and a query keeping more is split into parts (blockIdx.y, up to
 * gridDim.y) of consecutive bins from the top, each at most what a block stages and sorts by
 * the histogram's counts; part i sorts the candidates between its bins' edges and writes
 * them behind the candidates above its upper edge, which it counts itself (so its ranks
 * hold whatever the histogram said), and the last part writes the count and the padding.
 * Keys in different bins differ, so the parts' concatenation is the full sort's order. A
 * query whose split needs more parts than launched, or whose one bin holds more than a
 * block sorts, is left to the segmented select: over[q] = 1 and *n_over counts it. So the
 * staging and the block are sized by what is kept (about k), not by what is admitted.
 * Shared memory: select_block_smem<T, IMAX>(stage).
 * Speculative (use == nullptr, the speculative select of sieve__cuda_knn): each block
 * certifies its query as the host would (SelSpec), copies its count and secondary boundary
 * into the report, and hands back (over[q] = 1) a query keeping more than the staging
 * holds; n_over is then nullptr. Measured on the H200 (bench/RESULTS.md, "The block select
 * in parts"). */
template <int T, int I>
using SelSort = cub::BlockRadixSort<uint64_t, T, I>;

template <int T, int I>
constexpr size_t sel_sort_bytes() {
    return sizeof(typename SelSort<T, I>::TempStorage);
}

struct SelOut {
    const float *qn2;
    int64_t *rows;
    float *scores;
    uint32_t *counts;
    uint32_t k;
    int metric;
};

/* The speculative select's certification (select_block_kernel with use == nullptr): a query
 * is used when it holds k candidates, or every eligible row (n_e), within the capacity; the
 * staging in shared memory holds `stage` candidates (a query keeping more is handed back). */
struct SelSpec {
    uint64_t n_e;
    uint32_t stage;
    uint32_t part_max; /* the most kept candidates a part takes where the batch leaves SMs
                          idle (else up to what the block sorts) */
    const uint32_t *thr2; /* speculative: copied into the report */
    uint32_t *report;     /* speculative: [nq] counts, [nq] thr2, [nq] bytes `over` */
    uint32_t rank_max;    /* up to this many candidates a block writes by rank (at most
                             SEL_RANK_MAX; 0: the radix sort always) */
};

/* Bytes of the speculative select's report for nq queries. */
__host__ __device__ constexpr size_t report_bytes(uint32_t nq) { return (size_t)nq * 9; }

/* Sorts the m staged candidates and writes them at ranks part[0].. (those under k); part[1]
 * != 0: the query's last part, which also writes the padding past its candidates (rows -1,
 * NaN scores) up to k. `part` is in static shared memory and read after the sort (kept out
 * of the registers the sort needs). */
template <int T, int I>
__device__ void sel_sort_write(unsigned char *smem, uint32_t q, uint32_t m, uint32_t hmin,
                               uint32_t rb, int end_bit, const SelOut &o,
                               const uint32_t *part) {
    const uint64_t *stage = reinterpret_cast<const uint64_t *>(smem);
    const uint32_t t = threadIdx.x;
    uint64_t key[I];
#pragma unroll
    for (int j = 0; j < I; j++) {
        const uint32_t i = j * T + t;
        key[j] = ~0ull;
        if (i < m) {
            const uint64_t v = stage[i];
            key[j] = ((uint64_t)((uint32_t)(v >> 32) - hmin) << rb) | (uint32_t)v;
        }
    }
    __syncthreads(); /* the sort reuses the staging memory */
    SelSort<T, I>(*reinterpret_cast<typename SelSort<T, I>::TempStorage *>(smem))
        .SortBlockedToStriped(key, 0, end_bit);
    const uint32_t off = part[0];
    const bool last = part[1] != 0;
    const uint64_t rmask = (1ull << rb) - 1;
    const float nan = __int_as_float(0x7fc00000);
    int64_t *orow = o.rows + (size_t)q * o.k + off;
    float *osc = o.scores + (size_t)q * o.k + off;
    const uint32_t room = o.k - off; /* off < k: a part starts above the k-th candidate */
#pragma unroll
    for (int j = 0; j < I; j++) {
        const uint32_t r = j * T + t;
        if (r < room && (r < m || last)) {
            int64_t row = -1;
            float sc = nan;
            if (r < m) {
                const uint64_t v =
                    ((uint64_t)((uint32_t)(key[j] >> rb) + hmin) << 32) | (key[j] & rmask);
                row = cand_row(v);
                const float kk = cand_key(v);
                sc = score_of(o.metric, o.qn2 + q, kk);
            }
            orow[r] = row;
            osc[r] = sc;
        }
    }
    if (last)
        for (uint32_t r = (uint32_t)I * T + t; r < room; r += T) {
            orow[r] = -1;
            osc[r] = nan;
        }
}

/* sel_sort_write for at most SEL_RANK_MAX staged candidates: each thread takes one and
 * counts the staged candidates below it (its rank; the packed (~ord(key), row) values are
 * unique within a query and order as the full sort does), then writes it at that rank. One
 * block barrier before (the caller's) in place of the radix sort's passes: at k = 10 the
 * sort was about 60% of the select kernel's samples (Nsight Compute on the H200, 1M rows,
 * 16 queries: bench/results/h200-v35-runs/c5). */
constexpr uint32_t SEL_RANK_MAX = 256;
template <int T>
__device__ void sel_rank_write(const unsigned char *smem, uint32_t q, uint32_t m,
                               const SelOut &o, const uint32_t *part) {
    static_assert(T >= (int)SEL_RANK_MAX, "one candidate a thread");
    const uint64_t *stage = reinterpret_cast<const uint64_t *>(smem);
    const uint32_t t = threadIdx.x;
    const uint32_t off = part[0];
    const bool last = part[1] != 0;
    const uint32_t room = o.k - off; /* off < k: a part starts above the k-th candidate */
    int64_t *orow = o.rows + (size_t)q * o.k + off;
    float *osc = o.scores + (size_t)q * o.k + off;
    if (t < m) {
        const uint64_t v = stage[t];
        uint32_t r = 0;
        for (uint32_t j = 0; j < m; j++) r += stage[j] < v ? 1u : 0u;
        if (r < room) {
            const float kk = cand_key(v);
            orow[r] = cand_row(v);
            osc[r] = score_of(o.metric, o.qn2 + q, kk);
        }
    }
    if (last) {
        const float nan = __int_as_float(0x7fc00000);
        for (uint32_t r = m + t; r < room; r += T) {
            orow[r] = -1;
            osc[r] = nan;
        }
    }
}

/* A query handed back to the segmented select (or, speculative, to the host): over[q] = 1
 * and, the first time, one count in *n_over (nullptr: not counted). Where a query's
 * candidates are sorted in parts (gridDim.y > 1) the flags start zeroed (the launcher) and
 * any of its blocks may hand it back, so the flag is set with an atomic OR on its 32-bit
 * word (the layout leaves room past the last flag) and counted only by the block that set
 * it; with one block per query the block writes the flag either way, as before. */
__device__ void sel_hand_back(unsigned char *over, uint32_t q, uint32_t *n_over) {
    if (gridDim.y == 1) {
        over[q] = 1;
        if (n_over) atomicAdd(n_over, 1u);
        return;
    }
    const uintptr_t a = (uintptr_t)(over + q);
    const uint32_t sh = (uint32_t)(a & 3) * 8;
    const uint32_t old = atomicOr(reinterpret_cast<uint32_t *>(a & ~(uintptr_t)3), 1u << sh);
    if (n_over && !((old >> sh) & 0xffu)) atomicAdd(n_over, 1u);
}

/* The split of a query's kept candidates (bins bsel and up, suffix counts sufs[0..NBINS],
 * sufs[NBINS] = 0) into parts of consecutive bins from the top, each at most `size` by the
 * counts: 1 with this block's part (`part`) in [*lo, *hi), 2 where the split has fewer
 * parts than that, 0 where it needs more than `parts` or one bin alone holds more than
 * `size`. Every block of the query finds the same split; the whole block calls it. */
__device__ int sel_split(const uint32_t *sufs, uint32_t *plo, uint32_t bsel, uint32_t size,
                         uint32_t part, uint32_t parts, uint32_t *lo, uint32_t *hi) {
    const uint32_t t = threadIdx.x;
    uint32_t top = NBINS;
    for (uint32_t i = 0; i < parts; i++) {
        if (t == 0) *plo = top;
        __syncthreads();
        if (t >= bsel && t < top && sufs[t] - sufs[top] <= size) atomicMin(plo, t);
        __syncthreads();
        const uint32_t b = *plo;
        __syncthreads(); /* (*plo is set again next round) */
        if (b == top) return 0; /* one bin alone holds more than `size` */
        if (i == part) *lo = b, *hi = top;
        if (b == bsel) return part > i ? 2 : 1;
        top = b;
    }
    return 0;
}

template <int T, int IMAX>
__global__ void __launch_bounds__(T, 1)
select_block_kernel(const uint64_t *cand, uint32_t cap, const uint32_t *cnt,
                    const unsigned char *use, const uint32_t *hist, const float *edges,
                    uint32_t n_rows, SelOut o, unsigned char *over, uint32_t *n_over,
                    SelSpec spec) {
    static_assert(T >= NBINS && T % 32 == 0, "one thread per bin");
    pdl_wait(); /* the chained gate scan's candidates and counts (speculative) */
    extern __shared__ __align__(16) unsigned char sel_smem[];
    uint64_t *stage = reinterpret_cast<uint64_t *>(sel_smem);
    __shared__ uint32_t wsum[NBINS / 32], sufs[NBINS + 1], bsel, msel, pos, above, plo, hmin,
        hmax, spart[2]; /* spart: this part's offset and whether it is the last */
    const uint32_t q = blockIdx.x, part = blockIdx.y, parts = gridDim.y, t = threadIdx.x,
                   lane = t & 31, warp = t >> 5;
    /* use == nullptr: speculative, the host's certification test on the device */
    const uint32_t cq = cnt[q];
    const bool used = use ? use[q] != 0 : (cq >= o.k || cq >= spec.n_e) && cq <= cap;
    if (!use && t == 0 && part == 0) { /* what the host certifies from, with the results */
        spec.report[q] = cq;
        spec.report[gridDim.x + q] = spec.thr2[q];
    }
    if (!used) { /* a recovery or the full path writes this query's results */
        if (t == 0 && parts == 1) over[q] = 0;
        return;
    }
    /* threshold bin: the largest b > 0 whose count from the top reaches k (0: keep all) */
    uint32_t suf = 0;
    if (t == 0) bsel = 0, pos = 0, above = 0, hmin = 0xffffffffu, hmax = 0, sufs[NBINS] = 0;
    if (t < NBINS) {
        suf = hist[(size_t)q * NBINS + t];
        for (int d = 1; d < 32; d <<= 1) {
            const uint32_t v = __shfl_down_sync(0xffffffffu, suf, d);
            if (lane + d < 32) suf += v;
        }
        if (lane == 0) wsum[warp] = suf;
    }
    __syncthreads();
    if (t < NBINS) {
        for (int w = warp + 1; w < NBINS / 32; w++) suf += wsum[w];
        sufs[t] = suf;
        if (t > 0 && suf >= o.k) atomicMax(&bsel, t);
    }
    __syncthreads();
    if (t == bsel) msel = suf;
    __syncthreads();
    /* the kept candidates are those in the threshold bin and above, as many as the histogram
       counts there (it counts exactly the buffered candidates of a used query). Up to `want`
       (below) one block sorts them all; more are split into parts of consecutive bins, each
       at most `want` by the histogram, else at most `per` (what the staging holds and the
       block sorts), from the top bin down (every block of the query finds the same split,
       sel_split); part i sorts the candidates in its bins, [edges[lo], edges[hi]), and
       writes them behind those above edges[hi], which it counts. A query keeping more than
       `per` whose split needs more parts than launched, or a bin alone more than `per`, is
       handed back before it is compacted (to the segmented select, or, speculative, to the
       host's select). */
    const uint32_t n = cq < cap ? cq : cap;
    const uint32_t kept = bsel ? msel : n;
    const uint32_t per = spec.stage < (uint32_t)T * IMAX ? spec.stage : (uint32_t)T * IMAX;
    uint32_t lo = bsel, hi = NBINS; /* this block's bins, [lo, hi); hi = NBINS: open above */
    /* parts of at most `want` (spec.part_max: smaller than a block holds where the batch
       leaves SMs idle), else of at most `per`, else handed back */
    const uint32_t want = spec.part_max < per ? spec.part_max : per;
    int how = kept <= want ? (part ? 2 : 1) /* one block: part 0, every kept bin */
                           : sel_split(sufs, &plo, bsel, want, part, parts, &lo, &hi);
    if (!how && want < per) {
        lo = bsel, hi = NBINS;
        how = kept <= per ? (part ? 2 : 1) : sel_split(sufs, &plo, bsel, per, part, parts, &lo, &hi);
    }
    if (how == 2) return; /* the query needs fewer parts than launched */
    if (!how) {
        if (t == 0 && part == 0) sel_hand_back(over, q, n_over);
        return;
    }
    const float *eq = edges + (size_t)q * NBINS;
    const float ninf = -__int_as_float(0x7f800000);
    const float edge = lo ? eq[lo] : ninf, ceil_edge = hi < NBINS ? eq[hi] : ninf;
    const bool capped = hi < NBINS;
    /* compact this block's candidates into shared memory, one atomic per warp and round, and
       count those above its bins */
    const uint64_t *c = cand + (size_t)q * cap;
    uint32_t wlo = 0xffffffffu, whi = 0, nabove = 0;
    for (uint32_t base = 0; base < n; base += T) {
        const uint32_t i = base + t;
        uint64_t v = 0;
        bool keep = false, up = false;
        if (i < n) {
            v = __ldcs(c + i);
            const float key = cand_key(v);
            up = capped && key >= ceil_edge;
            keep = key >= edge && !up;
        }
        const uint32_t mask = __ballot_sync(0xffffffffu, keep);
        nabove += __popc(__ballot_sync(0xffffffffu, up));
        uint32_t at = 0;
        if (lane == 0 && mask) at = atomicAdd(&pos, (uint32_t)__popc(mask));
        at = __shfl_sync(0xffffffffu, at, 0);
        const uint32_t slot = at + __popc(mask & ((1u << lane) - 1));
        if (keep && slot < per) { /* (a count past the histogram's is handed back) */
            stage[slot] = v;
            const uint32_t w = (uint32_t)(v >> 32);
            wlo = w < wlo ? w : wlo;
            whi = w > whi ? w : whi;
        }
    }
    wlo = __reduce_min_sync(0xffffffffu, wlo);
    whi = __reduce_max_sync(0xffffffffu, whi);
    if (lane == 0) {
        if (wlo <= whi) {
            atomicMin(&hmin, wlo);
            atomicMax(&hmax, whi);
        }
        if (nabove) atomicAdd(&above, nabove);
    }
    __syncthreads();
    const uint32_t m = pos, h0 = hmin, off = above;
    const uint32_t rb = n_rows > 1 ? 32 - __clz(n_rows - 1) : 0;
    int end_bit = 1;
    if (m) {
        /* every real key <= top < top + 1 <= all ones in [0, end_bit): padding sorts last */
        const uint64_t top = ((uint64_t)(hmax - h0) << rb) | (uint64_t)(n_rows - 1);
        end_bit = 64 - __clzll(top + 1);
    }
    /* (not when the histogram's counts hold; a part whose edges start at or past the k-th
       candidate would mean the same) */
    if (m > per || off >= o.k) {
        if (t == 0) sel_hand_back(over, q, n_over);
        return;
    }
    const bool last = lo == bsel;
    if (t == 0) {
        if (parts == 1) over[q] = 0;
        if (last) o.counts[q] = off + m < o.k ? off + m : o.k;
        spart[0] = off;
        spart[1] = last;
    }
    __syncthreads();
    if (m <= spec.rank_max) return sel_rank_write<T>(sel_smem, q, m, o, spart);
    if (m <= (uint32_t)T)
        return sel_sort_write<T, 1>(sel_smem, q, m, h0, rb, end_bit, o, spart);
    if (IMAX >= 2 && m <= 2u * T)
        return sel_sort_write<T, 2>(sel_smem, q, m, h0, rb, end_bit, o, spart);
    if constexpr (IMAX >= 4)
        if (m <= 4u * T) return sel_sort_write<T, 4>(sel_smem, q, m, h0, rb, end_bit, o, spart);
    if constexpr (IMAX >= 8)
        if (m <= 8u * T) return sel_sort_write<T, 8>(sel_smem, q, m, h0, rb, end_bit, o, spart);
    if constexpr (IMAX >= 12)
        return sel_sort_write<T, 12>(sel_smem, q, m, h0, rb, end_bit, o, spart);
    static_assert(IMAX <= 12, "sort sizes 1, 2, 4, 8, 12");
}

/* ------------------------------------------------------------------ scan launchers */

/* Launches kern (grid x block, smem dynamic bytes) on stream s, in clusters of `cluster`
 * blocks (0: none). chain != nullptr: behind the stream's previous kernel by programmatic
 * dependent launch (the kernel's pdl_wait orders its reads, scan.cuh), counted in *chain;
 * nullptr: an ordinary launch. */
template <typename... P, typename... A>
cudaError_t launch_ex(void (*kern)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                      uint32_t *chain, unsigned cluster, A... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute at[2];
    unsigned n = 0;
    if (cluster) {
        at[n].id = cudaLaunchAttributeClusterDimension;
        at[n].val.clusterDim.x = cluster;
        at[n].val.clusterDim.y = 1;
        at[n].val.clusterDim.z = 1;
        n++;
    }
    if (chain) {
        at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[n].val.programmaticStreamSerializationAllowed = 1;
        n++;
    }
    cfg.attrs = n ? at : nullptr;
    cfg.numAttrs = n;
    cudaError_t e = cudaLaunchKernelEx(&cfg, kern, args...);
    if (e == cudaSuccess && chain) (*chain)++;
    return e;
}

template <typename T, int BM, int BN, int WM, int WN, int ST, int MODE>
int launch_mma(cudaStream_t s, const ScanParams &p, uint32_t L, bool vec) {
    using Sm = MmaSmem<BM, BN, ST>;
    ScanParams q = p;
    q.nqt = (p.nq + BN - 1) / BN;
    uint64_t blocks = (uint64_t)((L + BM - 1) / BM) * q.nqt;
    if (blocks == 0) return 0;
    if (blocks > 0x7fffffffull) return SIEVE_EINVAL;
    if (vec) {
        auto kern = scan_mma_kernel<T, BM, BN, WM, WN, ST, MODE, true>;
        SIEVE_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            (int)Sm::bytes));
        kern<<<(unsigned)blocks, WM * WN * 32, Sm::bytes, s>>>(q);
    } else {
        auto kern = scan_mma_kernel<T, BM, BN, WM, WN, ST, MODE, false>;
        SIEVE_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            (int)Sm::bytes));
        kern<<<(unsigned)blocks, WM * WN * 32, Sm::bytes, s>>>(q);
    }
    SIEVE_CUDA_LAUNCH_CHECK();
    return 0;
}

template <int BM, int BN, int TN, int MODE>
int launch_f32(cudaStream_t s, const ScanParams &p, uint32_t L, bool vec) {
    ScanParams q = p;
    q.nqt = (p.nq + BN - 1) / BN;
    uint64_t blocks = (uint64_t)((L + BM - 1) / BM) * q.nqt;
    if (blocks == 0) return 0;
    if (blocks > 0x7fffffffull) return SIEVE_EINVAL;
    if (vec) scan_f32_kernel<BM, BN, TN, MODE, true><<<(unsigned)blocks, 256, 0, s>>>(q);
    else scan_f32_kernel<BM, BN, TN, MODE, false><<<(unsigned)blocks, 256, 0, s>>>(q);
    SIEVE_CUDA_LAUNCH_CHECK();
    return 0;
}

/* The float32 loop for up to 4 queries (scan_f32v_kernel), NQ queries a thread. */
template <int NQ, int MODE>
int launch_f32v(cudaStream_t s, const ScanParams &p, uint32_t L, bool vec) {
    ScanParams q = p;
    q.nqt = 1;
    uint64_t blocks = (uint64_t)((L + F32V_BM - 1) / F32V_BM);
    if (blocks == 0) return 0;
    if (blocks > 0x7fffffffull) return SIEVE_EINVAL;
    constexpr size_t smem = f32v_smem_bytes<NQ>();
    auto kern = vec ? scan_f32v_kernel<NQ, MODE, true> : scan_f32v_kernel<NQ, MODE, false>;
    SIEVE_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)smem));
    kern<<<(unsigned)blocks, F32V_BM, smem, s>>>(q);
    SIEVE_CUDA_LAUNCH_CHECK();
    return 0;
}

/* The row-major cp.async float32 loop for 5-32 queries (scan_f32r_kernel; dim % 4 == 0). */
template <int NT, int TM, int TX, int TN, int MINB, int MODE>
int launch_f32r(cudaStream_t s, const ScanParams &p, uint32_t L) {
    using C = F32R<NT, TM, TX, TN>;
    ScanParams q = p;
    q.nqt = (p.nq + C::BN - 1) / C::BN;
    uint64_t blocks = (uint64_t)((L + C::BM - 1) / C::BM) * q.nqt;
    if (blocks == 0) return 0;
    if (blocks > 0x7fffffffull) return SIEVE_EINVAL;
    auto kern = scan_f32r_kernel<NT, TM, TX, TN, MINB, MODE>;
    SIEVE_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)C::bytes));
    kern<<<(unsigned)blocks, NT, C::bytes, s>>>(q);
    SIEVE_CUDA_LAUNCH_CHECK();
    return 0;
}

/* Query-tile width the launcher picks for nq queries (the prepared buffer is padded to it). */
uint32_t tile_queries(sieve_dtype dt, uint32_t nq) {
    if (dt == SIEVE_DTYPE_F32) return nq <= 8 ? 8 : nq <= 32 ? 32 : nq <= 64 ? 64 : 128;
    return nq <= 16 ? 16 : nq <= 32 ? 32 : nq <= 64 ? 64 : 128;
}

template <typename T, int BQ, int BR, int ST, int MODE, bool STAGED>
int launch_wg(const sieve__cuda_ctx *c, cudaStream_t s, const ScanParams &p, uint32_t L,
              uint32_t *chain) {
    using Sm = WgSmem<BQ, BR, ST>;
    ScanParams q = p;
    q.nqt = (p.nq + BQ - 1) / BQ;
    uint64_t tiles = (uint64_t)((L + BR - 1) / BR) * q.nqt;
    if (tiles == 0) return 0;
    auto kern = scan_wgmma_kernel<T, BQ, BR, ST, MODE, STAGED>;
    SIEVE_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)Sm::bytes));
    /* persistent: as many CTAs as fit on the GPU at once, each walking its tiles */
    int per_sm = 0;
    SIEVE_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, 256, Sm::bytes));
    if (per_sm < 1) per_sm = 1;
    uint64_t grid = (uint64_t)per_sm * (uint64_t)c->prop.multiProcessorCount;
    if (grid > tiles) grid = tiles;
    SIEVE_CUDA_TRY(launch_ex(kern, dim3((unsigned)grid), dim3(256), Sm::bytes, s, chain, 0, q));
    return 0;
}

/* cuTensorMapEncodeTiled's signature (the driver's, reached through the runtime). */
typedef CUresult (*EncodeTiledFn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                  const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                  const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                  CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* Whether scan_tma_kernel can read this matrix and query buffer with BR-row tiles: evenly
 * spaced pages, 16-byte strides and bases, tiles that never straddle a page boundary
 * unevenly (rows per page a multiple of BR, or BR a multiple of it). */
bool tma_ok(const sieve__cuda_ctx *c, const ScanParams &p, uint32_t BR) {
    return c && c->encode_tiled && p.page_base && p.dim % 8 == 0 && p.page_stride % 16 == 0 &&
           (uintptr_t)p.page_base % 16 == 0 && (uintptr_t)p.q % 16 == 0 &&
           (p.rpp % BR == 0 || BR % p.rpp == 0) && p.page_stride >= (uint64_t)p.rpp * p.dim * 2;
}

/* chain: see launch_ex. p.tile_ctr must be zero (tile_counter: the query preparation zeroes
 * it before the first gate scan, rescan before each later one). */
template <typename T, int BQ, int BR, int ST, bool STG = false, bool HLP = false>
int launch_tma(const sieve__cuda_ctx *c, cudaStream_t s, const ScanParams &p, uint32_t L,
               uint32_t *chain) {
    using Sm = TmaSmem<BQ, BR, ST>;
    ScanParams q = p;
    q.nqt = (p.nq + BQ - 1) / BQ;
    const uint64_t tiles = (uint64_t)((L + BR - 1) / BR) * q.nqt;
    if (tiles == 0) return 0;
    if (tiles >= 0xffffffffull || !p.tile_ctr || !p.tile_log) return SIEVE_EINVAL;
    const CUtensorMapDataType dt = std::is_same<T, __half>::value
                                       ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                       : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    EncodeTiledFn enc = (EncodeTiledFn)c->encode_tiled;
    /* a row tile lies within one page, or covers whole pages */
    const cuuint32_t boxr = BR < p.rpp ? BR : p.rpp;
    const cuuint64_t rdim[3] = {p.dim, p.rpp, (L + p.rpp - 1) / p.rpp};
    const cuuint64_t rstride[2] = {(cuuint64_t)p.dim * 2, p.page_stride};
    const cuuint32_t rbox[3] = {64, boxr, BR / boxr};
    const cuuint32_t ones[3] = {1, 1, 1};
    const cuuint64_t qdim[2] = {p.dpad, p.nq};
    const cuuint64_t qstride[1] = {(cuuint64_t)p.dpad * 2};
    const cuuint32_t qbox[2] = {64, BQ};
    CUtensorMap rows_map, q_map;
    CUresult r1 = enc(&rows_map, dt, 3, (void *)p.page_base, rdim, rstride, rbox, ones,
                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    CUresult r2 = enc(&q_map, dt, 2, (void *)p.q, qdim, qstride, qbox, ones,
                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r1 != CUDA_SUCCESS || r2 != CUDA_SUCCESS) {
        fprintf(stderr, "sieve: cuTensorMapEncodeTiled failed (%d, %d)\n", (int)r1, (int)r2);
        return SIEVE_EDEVICE;
    }
    auto kern = scan_tma_kernel<T, BQ, BR, ST, STG, HLP>;
    const size_t smem = Sm::bytes;
    SIEVE_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)smem));
    uint64_t grid = (uint64_t)c->prop.multiProcessorCount; /* one CTA per SM */
    if (grid > tiles) grid = tiles;
    if (grid > (uint64_t)TLOG_CTAS) grid = TLOG_CTAS;
    SIEVE_CUDA_TRY(launch_ex(kern, dim3((unsigned)grid), dim3(384), smem, s, chain, 0, q,
                             rows_map, q_map));
    return 0;
}

/* The scan variant for a search: "mma" (mma.sync, any sm_80+ GPU, any row alignment) or a
 * wgmma one (sm_90 only, 16-byte rows). cp.async tiles, two CTAs per SM: "wg64x128" (64
 * queries x 128 rows) and "wg128x128s3" (128 x 128, three stages) stage admissions per tile
 * in shared memory; their "-direct" forms admit each key from the epilogue as it passes.
 * TMA-fed warp-specialised tiles, one CTA per SM, direct admissions: "tma64x256",
 * "tma64x128" (64 queries; above 64 both use "tma128x256"), "tma128x256"; and their forms
 * that stage admissions per warp in shared memory (WST_CAP in scan.cuh): "tma64x128s",
 * "tma64x256s" (above 64 queries both use "tma128x256s") and "tma128x256s"; "tma128x256h" is
 * "tma128x256s" with the staged entries completed by the producer warpgroup's idle warps
 * (HLP in scan.cuh; the same on the 64-query tile, measured, was no faster). The TMA tiles
 * need evenly spaced pages (sieve_matrix.page_base) and fall back to the cp.async tiles
 * otherwise and for the sample and materialized modes.
 * Defaults, from the H200 A/B runs in bench/KERNEL_NOTES.md (5M rows, float16, unless
 * named): tma64x256 up to 16 queries for k <= 256, tma64x256s above 256 (v30, against
 * tma64x256 with the direct admissions' tightening by the warp, whole calls: 1M rows,
 * B = 1-16, k = 512 1.7-6.7%, k = 1024 2-13% faster, B = 1-8 k = 8192 4-26%; 5M B = 1-16
 * k = 1024 0.2-1.8%, B = 1-8 k = 8192 0.8-8.5%; 8,841,823 B = 1 and 16 k = 1024 0.2 and
 * 0.8%; at k = 128-256 1M 0.6-4% faster but 5M B = 16 0.9-1.6% and 8,841,823 B = 16 0.6%
 * slower); before v30 tma64x256 up to 8 queries, and up to 16 for
 * k <= 1024 (v12: B = 1, k = 8192: 2.28 against 2.67 ms
 * for tma64x128s; B = 16, k = 128: 1.93 against 2.27); tma64x256s up to 64 queries (v18,
 * whole calls against tma64x128s: B = 16 k = 8192 2.13-2.14 against 2.49-2.51 ms, B = 32
 * k = 8192 2.23-2.24 against 2.43, B = 64 k = 8192 2.46-2.49 against 2.57, k = 1024
 * 2.02-2.03 against 2.12-2.15, k = 128 1.97-2.00 against 1.99-2.01; tma64x128s had replaced
 * tma64x128 and wg64x128 in v12); above 64 queries tma128x256s (v12: B = 1024, k = 1024
 * 22.2-22.6 against 23.4 ms, k = 8192 26.1-26.6 against 43.4-44.1 for wg128x128s3; since
 * v14 also at small k, two rounds against tma128x256: B = 1024 k = 128 15.6-15.7 against
 * 17.7-17.9 ms, k = 10 14.9-15.1 against 16.4-16.7, B = 128 k = 128 2.23-2.26 against 2.50;
 * v12's staged form had been slower there); since v24 tma128x256h above 64 queries (whole
 * calls, three rounds each way against tma128x256s in one call, 5M: B = 1024 k = 10
 * 14.44-14.49 against 14.68-15.04 ms, k = 128 14.79-14.92 against 15.19-15.27, k = 8192
 * 21.07-21.52 against 21.76-22.18, B = 128 k = 8192 3.19-3.28 against 3.29-3.42; B = 128
 * k <= 128 within noise). k between 129 and 1023 was not measured.
 * SIEVE_CUDA_SCAN overrides the choice for benchmarks and tests; every
 * mode of one search uses the same variant, and every variant computes each key the same
 * way (the GPU tests check the keys are bit-identical across variants). */
enum ScanVariant {
    SV_MMA, SV_WG64x128, SV_WG128x128S3, SV_WG64x128D, SV_WG128x128S3D,
    SV_TMA64x256, SV_TMA128x256, SV_TMA64x128, SV_TMA64x128S, SV_TMA128x256S, SV_TMA64x256S,
    SV_TMA128x256H
};

ScanVariant scan_variant(const sieve__cuda_ctx *c, uint32_t nq, uint32_t k, bool vec) {
    bool hopper = c && c->prop.major == 9 && c->prop.minor == 0;
    if (!hopper || !vec) return SV_MMA;
    const char *e = getenv("SIEVE_CUDA_SCAN");
    if (e && *e) {
        if (!strcmp(e, "mma")) return SV_MMA;
        if (!strcmp(e, "wg64x128")) return nq <= 64 ? SV_WG64x128 : SV_WG128x128S3;
        if (!strcmp(e, "wg128x128s3")) return SV_WG128x128S3;
        if (!strcmp(e, "wg64x128-direct")) return nq <= 64 ? SV_WG64x128D : SV_WG128x128S3D;
        if (!strcmp(e, "wg128x128s3-direct")) return SV_WG128x128S3D;
        if (!strcmp(e, "tma64x256")) return nq <= 64 ? SV_TMA64x256 : SV_TMA128x256;
        if (!strcmp(e, "tma64x128")) return nq <= 64 ? SV_TMA64x128 : SV_TMA128x256;
        if (!strcmp(e, "tma128x256")) return SV_TMA128x256;
        if (!strcmp(e, "tma64x128s")) return nq <= 64 ? SV_TMA64x128S : SV_TMA128x256S;
        if (!strcmp(e, "tma64x256s")) return nq <= 64 ? SV_TMA64x256S : SV_TMA128x256S;
        if (!strcmp(e, "tma128x256s")) return SV_TMA128x256S;
        if (!strcmp(e, "tma128x256h")) return SV_TMA128x256H;
    }
    if (nq <= 16 && k <= 256) return SV_TMA64x256;
    if (nq <= 64) return SV_TMA64x256S;
    return SV_TMA128x256H;
}

/* Whether the sample scan takes the deep cp.async pipeline (one CTA per SM, six or four K
 * chunks in flight): when its tiles fit on the GPU at once. SIEVE_CUDA_SAMPLE_DEEP=0 / 1
 * overrides (A/B runs). */
bool sample_deep(const sieve__cuda_ctx *c, uint64_t tiles) {
    const char *e = getenv("SIEVE_CUDA_SAMPLE_DEEP");
    if (e && *e) return *e == '1';
    return tiles <= (uint64_t)c->prop.multiProcessorCount;
}

template <int MODE, typename T>
int launch_scan_t(const sieve__cuda_ctx *c, cudaStream_t s, const ScanParams &p, uint32_t L,
                  bool vec, uint32_t *chain) {
    /* staging applies to the GATE mode only: the other modes share one instance */
    constexpr bool G = MODE == MODE_GATE;
    ScanVariant v = scan_variant(c, p.nq, p.k, vec);
    if (v >= SV_TMA64x256) {
        const uint32_t br = v == SV_TMA64x128 || v == SV_TMA64x128S ? 128 : 256;
        if (G && tma_ok(c, p, br)) {
            if (v == SV_TMA64x256) return launch_tma<T, 64, 256, 5>(c, s, p, L, chain);
            if (v == SV_TMA64x128) return launch_tma<T, 64, 128, 8>(c, s, p, L, chain);
            if (v == SV_TMA64x128S) return launch_tma<T, 64, 128, 8, true>(c, s, p, L, chain);
            if (v == SV_TMA64x256S) return launch_tma<T, 64, 256, 5, true>(c, s, p, L, chain);
            if (v == SV_TMA128x256S) return launch_tma<T, 128, 256, 4, true>(c, s, p, L, chain);
            if (v == SV_TMA128x256H)
                return launch_tma<T, 128, 256, 4, true, true>(c, s, p, L, chain);
            return launch_tma<T, 128, 256, 4>(c, s, p, L, chain);
        }
        /* the sample and materialized modes, and matrices the TMA cannot address, use the
           cp.async tiles (every variant computes each key the same way) */
        v = p.nq <= 64 ? SV_WG64x128 : p.k > 1024 ? SV_WG128x128S3 : SV_WG128x128S3D;
        if constexpr (MODE == MODE_SAMPLE) {
            /* a sample of at most one tile per SM: each CTA has one tile, whose 12 K chunks
               (d = 768) two or one in flight wait for the memory six or twelve times in a
               row; one CTA per SM can keep six or four in flight */
            const uint32_t bq = p.nq <= 64 ? 64 : 128; /* the tile's queries, 128 rows */
            const uint64_t tiles = (uint64_t)((L + 127) / 128) * ((p.nq + bq - 1) / bq);
            if (sample_deep(c, tiles))
                return p.nq <= 64 ? launch_wg<T, 64, 128, 8, MODE, false>(c, s, p, L, chain)
                                  : launch_wg<T, 128, 128, 6, MODE, false>(c, s, p, L, chain);
        }
    }
    switch (v) {
    case SV_WG64x128: return launch_wg<T, 64, 128, 4, MODE, G>(c, s, p, L, chain);
    case SV_WG128x128S3: return launch_wg<T, 128, 128, 3, MODE, G>(c, s, p, L, chain);
    case SV_WG64x128D: return launch_wg<T, 64, 128, 4, MODE, false>(c, s, p, L, chain);
    case SV_WG128x128S3D: return launch_wg<T, 128, 128, 3, MODE, false>(c, s, p, L, chain);
    case SV_MMA:
    default: break;
    }
    /* mma.sync tiles measured on the H200 (bench/KERNEL_NOTES.md): one 128-row tile per
       CTA, two CTAs per SM, beat persistent variants and 256 x 128 tiles. */
    uint32_t bn = tile_queries(SIEVE_DTYPE_F16, p.nq);
    if (bn == 16) return launch_mma<T, 128, 16, 4, 1, 4, MODE>(s, p, L, vec);
    if (bn == 32) return launch_mma<T, 128, 32, 4, 1, 4, MODE>(s, p, L, vec);
    if (bn == 64) return launch_mma<T, 128, 64, 4, 2, 4, MODE>(s, p, L, vec);
    return launch_mma<T, 128, 128, 2, 4, 3, MODE>(s, p, L, vec);
}

/* chain: see launch_ex; only the wgmma and TMA tiles (sm_90) take it, the other loops launch
 * as before (their kernels do not wait: a chained successor still waits for them). */
template <int MODE>
int launch_scan(const sieve__cuda_ctx *c, cudaStream_t s, sieve_dtype dt, const ScanParams &p,
                uint32_t L, uint32_t *chain = nullptr) {
    if (dt == SIEVE_DTYPE_F32) {
        bool vec = p.dim % 4 == 0;
        /* SIEVE_CUDA_SCAN=f32tile asks for the tiles at every batch (benchmarks, tests: every
           loop gives the same keys). Up to 4 queries: the row-per-thread loop; 5-32 (and dim
           % 4 == 0): the row-major cp.async loop; otherwise the tiles. Measured on the H200
           (5M x 768, k = 128, bench/RESULTS.md v21): B = 8 4.12-4.38 -> 3.79-3.83 ms, B = 16
           5.5-6.2 -> 3.87-3.98, B = 32 9.1-9.2 -> 6.6-6.7; the row-major loop lost at B = 1-4
           (4.1 vs 3.9), 64 (13.5 vs 12.6) and 128 (25.6 vs 23.8). */
        const char *e = getenv("SIEVE_CUDA_SCAN");
        if (!(e && !strcmp(e, "f32tile"))) {
            if (p.nq <= 1) return launch_f32v<1, MODE>(s, p, L, vec);
            if (p.nq <= 2) return launch_f32v<2, MODE>(s, p, L, vec);
            if (p.nq <= 4) return launch_f32v<4, MODE>(s, p, L, vec);
            /* the materialized oracle keeps the tiles, so the fused path's check compares
               two different loops */
            if constexpr (MODE != MODE_MAT) {
                if (vec && p.nq <= 8) return launch_f32r<128, 8, 4, 2, 3, MODE>(s, p, L);
                if (vec && p.nq <= 16) return launch_f32r<128, 8, 4, 4, 3, MODE>(s, p, L);
                if (vec && p.nq <= 32) return launch_f32r<128, 8, 4, 8, 2, MODE>(s, p, L);
            }
        }
        uint32_t bn = tile_queries(dt, p.nq);
        if (bn == 8) return launch_f32<128, 8, 2, MODE>(s, p, L, vec);
        if (bn == 32) return launch_f32<128, 32, 4, MODE>(s, p, L, vec);
        /* 8 x 8 keys a thread: 64 FFMA per four float4 reads from shared memory */
        if (bn == 64) return launch_f32<256, 64, 8, MODE>(s, p, L, vec);
        return launch_f32<128, 128, 8, MODE>(s, p, L, vec);
    }
    bool vec = p.dim % 8 == 0;
    if (dt == SIEVE_DTYPE_F16) return launch_scan_t<MODE, __half>(c, s, p, L, vec, chain);
    return launch_scan_t<MODE, __nv_bfloat16>(c, s, p, L, vec, chain);
}

/* ------------------------------------------------------------------ plan and layout */

struct Plan {
    uint32_t nq, nq_pad, dim, dpad, k, S, stride, offset, cap, full_chunk;
    size_t esz, qrow_bytes;
    bool direct_possible;
};

/* Bytes of the packed results (rows, scores, then counts at nq * k * 12), as the device
 * layout and the pinned staging buffer both hold them; the speculative select's report
 * follows them in both. */
size_t results_bytes(const Plan &pl) {
    return (size_t)pl.nq * pl.k * 12 + (size_t)pl.nq * 4;
}

struct Layout {
    size_t qf32, qprep, qsub, qn2, qn2sub, sample, thr, thr2, hi, edges, binw, hist, cnt, cand,
        sorted, segb, sege, topm, use, idx, lo, outrows, outscores, outcounts, report, misc, tlog, cub, fullA, fullB,
        fullcub, rows32, total;
    size_t cub_bytes, fullcub_bytes;
};

/* The sample: p->sample_rows, else max(16384, 8k) rows, and 4k from k = 8192 on where the
 * fused path runs either way (2 x 8k < n); where the fused path runs, also at most the
 * power of two at or above 64 n / k (never under 16384), i.e. a sample expecting about 64
 * of its rows above the k-th row (r = k S / n). The sample scan writes B x S keys and the
 * propose step selects over them, so once r is large a smaller sample costs less than the
 * candidates its looser boundary adds; where r is small the candidates dominate (at 5M
 * rows k = 4096, B = 1024, a sample of 16384 rows, r = 13, was 9% slower than 8k).
 * Measured on the H200, whole calls alternating (bench/RESULTS.md, "A smaller sample at
 * large k" and "The pageable download on the host's threads; the sample by its count above
 * the k-th row"): 4k against 8k, 1M rows 3-7% faster at k = 8192 and 16384, 5M 1-3% at
 * k = 16384, within 1% at k = 8192 (B = 16 1-1.5% slower), 8,841,823 rows 0.6-2%; the
 * bound by r (16384 rows at 1M k = 4096-16384, 32768 at 5M k = 16384) against the rule
 * before: 1M rows 2-7% faster up to B = 128 and 0.3-4% at B = 1024 but B = 128 k = 4096
 * (1.5% slower), 5M 0-3%. The direct path's choice (2 S >= n under 8k) is unchanged. */
uint32_t sample_rows(const sieve_search_params *p, uint64_t n) {
    uint64_t s = p->sample_rows;
    if (!s) {
        const uint64_t k = p->k, s8 = k * 8 > 16384 ? k * 8 : 16384;
        s = s8;
        if (2 * s8 < n) {
            if (k >= 8192) s = k * 4;
            uint64_t cap = 16384;
            while (cap < s && cap * k < 64 * n) cap *= 2; /* 64 n / k, up to s */
            if (cap < s) s = cap;
        }
    }
    return (uint32_t)(s > n ? n : s);
}

/* Capacity for expected sample rank j2 (the secondary boundary) at rows-per-sample ratio. */
uint32_t capacity_for(uint32_t j2, double ratio, uint32_t k, uint64_t n) {
    double e = ((double)j2 + 1.0 + 6.0 * sqrt((double)j2 + 1.0) + 6.0) * ratio + (double)k;
    uint64_t c = (uint64_t)sieve__align_up((size_t)ceil(e), 256);
    if (c > n) c = n;
    if (c < k) c = k;
    return (uint32_t)c;
}

/* The proposed boundary's sample rank j (sieve__boundary_rank) and the secondary one's. */
void ranks_for(uint32_t k, uint64_t s_e, uint64_t n_e, uint32_t *j, uint32_t *j2) {
    double r = (double)k * (double)s_e / (double)(n_e ? n_e : 1);
    uint64_t jj = sieve__boundary_rank(r);
    *j = (uint32_t)(jj > 2000000000u ? 2000000000u : jj);
    *j2 = 2 * *j + 8;
}

void make_plan(const sieve_matrix *m, uint32_t nq, const sieve_search_params *p, bool full_only,
               Plan *pl) {
    memset(pl, 0, sizeof *pl);
    pl->nq = nq;
    pl->k = p->k;
    pl->dim = m->dim;
    pl->esz = sieve_dtype_size(m->dtype);
    pl->dpad = (uint32_t)sieve__align_up(m->dim, m->dtype == SIEVE_DTYPE_F32 ? 32 : 64);
    pl->nq_pad = (uint32_t)sieve__align_up(nq, 128);
    pl->qrow_bytes = (size_t)pl->dpad * pl->esz;
    uint64_t n = m->n_rows;
    pl->S = sample_rows(p, n);
    pl->stride = (uint32_t)(n / pl->S);
    if (pl->stride == 0) pl->stride = 1;
    pl->offset = (uint32_t)(sieve__splitmix64(p->seed) % pl->stride);
    uint32_t j, j2;
    ranks_for(p->k, pl->S, n, &j, &j2);
    pl->cap = p->candidate_capacity ? p->candidate_capacity
                                    : capacity_for(j2, (double)n / pl->S, p->k, n);
    /* full-path chunk: large when the full path is the main path (oracle, small N), one
       query at a time (within 64 MiB where possible) when it is only the recovery path */
    uint64_t per_q = (uint64_t)n * 16;
    bool main_full = full_only || (uint64_t)pl->S * 2 >= n;
    uint64_t c = (main_full ? FULL_BUDGET : (64ull << 20)) / per_q;
    if (c < 1) c = 1;
    if (c > nq) c = nq;
    pl->full_chunk = (uint32_t)c;
}

int make_layout(const Plan &pl, uint64_t n_rows, bool full_only, Layout *L) {
    memset(L, 0, sizeof *L);
    size_t o = 0;
    auto take = [&](size_t bytes) {
        size_t at = o;
        o = sieve__align_up(o + (bytes ? bytes : 1), 256);
        return at;
    };
    uint32_t nq = pl.nq, np = pl.nq_pad;
    L->qf32 = take((size_t)nq * pl.dim * 4);
    L->qprep = take((size_t)np * pl.qrow_bytes);
    L->qsub = take((size_t)np * pl.qrow_bytes);
    L->qn2 = take((size_t)np * 4);
    L->qn2sub = take((size_t)np * 4);
    L->use = take((size_t)np * 2); /* use, then the block select's overflow flags */
    L->idx = take((size_t)np * 4);
    L->lo = take((size_t)np * 4);
    /* the results packed as the pinned staging buffer holds them (rows, scores, counts), then
       the speculative select's report: one copy brings all of it */
    const size_t nr = (size_t)nq * pl.k;
    L->outrows = take(results_bytes(pl) + report_bytes(nq) + 4); /* + the last flag's word */
    L->outscores = L->outrows + nr * 8;
    L->outcounts = L->outrows + nr * 12;
    L->report = L->outrows + results_bytes(pl);
    L->misc = take(64);
    if (!full_only) {
        L->sample = take((size_t)nq * pl.S * 4);
        L->thr = take((size_t)nq * 4);
        L->thr2 = take((size_t)nq * 4);
        L->hi = take((size_t)nq * 4);
        L->edges = take((size_t)nq * NBINS * 4);
        L->binw = take((size_t)nq * 4);
        L->hist = take((size_t)nq * NBINS * 4);
        L->cnt = take((size_t)nq * 4);
        L->cand = take((size_t)nq * pl.cap * 8);
        L->rows32 = L->cand; /* nq * k * 4 bytes, the candidates dead once selected */
        L->sorted = take((size_t)nq * pl.cap * 8);
        L->segb = take((size_t)nq * 8);
        L->sege = take((size_t)nq * 8);
        L->topm = take((size_t)nq * 4);
        L->tlog = take((size_t)TLOG_CTAS * TLOG_RING * 4);
        size_t cb = 0;
        if (cub::DeviceSegmentedSort::SortKeys((void *)nullptr, cb, (const uint64_t *)nullptr,
                                               (uint64_t *)nullptr, (int64_t)nq * pl.cap,
                                               (int64_t)nq, (const int64_t *)nullptr,
                                               (const int64_t *)nullptr) != cudaSuccess)
            return SIEVE_EDEVICE;
        L->cub_bytes = cb;
        L->cub = take(cb);
    }
    size_t fcb = 0;
    uint32_t fc = pl.full_chunk;
    if (n_rows <= SEGSORT_MAX) {
        if (cub::DeviceSegmentedSort::SortKeys((void *)nullptr, fcb, (const uint64_t *)nullptr,
                                               (uint64_t *)nullptr, (int64_t)fc * n_rows,
                                               (int64_t)fc, (const int64_t *)nullptr,
                                               (const int64_t *)nullptr) != cudaSuccess)
            return SIEVE_EDEVICE;
    } else {
        if (cub::DeviceRadixSort::SortKeys((void *)nullptr, fcb, (const uint64_t *)nullptr,
                                           (uint64_t *)nullptr, (int64_t)n_rows) != cudaSuccess)
            return SIEVE_EDEVICE;
    }
    L->fullcub_bytes = fcb;
    L->fullA = take((size_t)fc * n_rows * 8);
    L->fullB = take((size_t)fc * n_rows * 8);
    L->fullcub = take(fcb + (size_t)fc * 16 + 256); /* + segment offsets */
    L->total = o;
    return 0;
}

/* Host staging (pinned, grown on demand, owned by the context). */
int ensure_pinned(sieve__cuda_ctx *c, size_t bytes) {
    if (c->pinned_bytes >= bytes) return 0;
    if (c->pinned) cudaFreeHost(c->pinned);
    c->pinned = NULL;
    c->pinned_bytes = 0;
    size_t want = sieve__align_up(bytes, 1 << 20);
    SIEVE_CUDA_TRY(cudaMallocHost(&c->pinned, want));
    c->pinned_bytes = want;
    return 0;
}

/* ------------------------------------------------------------------ the search */

struct Search {
    sieve__cuda_ctx *c;
    cudaStream_t s;
    const sieve_matrix *m;
    const sieve_search_params *p;
    Plan pl;
    Layout L;
    unsigned char *base;
    ScanParams sp; /* matrix part filled once */
    uint64_t n_e;

    template <typename X> X *at(size_t off) { return (X *)(base + off); }
};

/* The gate scan's tile counter (scan_tma_kernel), zeroed by the query preparation for the
 * first gate scan and by rescan for each later one. */
uint32_t *tile_counter(Search &S) { return S.at<uint32_t>(S.L.misc + 32); }

/* Prepares queries (into qprep, padded) from the float32 queries in qf32. */
int prep_queries(Search &S) {
    const Plan &pl = S.pl;
    int metric = S.p->metric;
    /* the row in shared memory when it fits the default 48 KiB */
    const bool staged = (size_t)pl.dim * sizeof(float) <= 48 * 1024;
    const size_t smem = staged ? (size_t)pl.dim * sizeof(float) : 0;
    switch (S.m->dtype) {
    case SIEVE_DTYPE_F16:
        prep_queries_kernel<__half><<<pl.nq_pad, 128, smem, S.s>>>(
            S.at<float>(S.L.qf32), pl.nq, pl.nq_pad, pl.dim, pl.dpad, metric, staged,
            S.at<__half>(S.L.qprep), S.at<float>(S.L.qn2), tile_counter(S));
        break;
    case SIEVE_DTYPE_BF16:
        prep_queries_kernel<__nv_bfloat16><<<pl.nq_pad, 128, smem, S.s>>>(
            S.at<float>(S.L.qf32), pl.nq, pl.nq_pad, pl.dim, pl.dpad, metric, staged,
            S.at<__nv_bfloat16>(S.L.qprep), S.at<float>(S.L.qn2), tile_counter(S));
        break;
    default:
        prep_queries_kernel<float><<<pl.nq_pad, 128, smem, S.s>>>(
            S.at<float>(S.L.qf32), pl.nq, pl.nq_pad, pl.dim, pl.dpad, metric, staged,
            S.at<float>(S.L.qprep), S.at<float>(S.L.qn2), tile_counter(S));
        break;
    }
    SIEVE_CUDA_LAUNCH_CHECK();
    return 0;
}

/* Eligible rows overall (*n_e) and in the plan's sample (*s_e). Without a deleted bitmap or
 * an allowed mask: n_rows and the sample size; with one, one counting launch and one wait
 * for the device (a wait costs 7-8 us on the H200: bench/results/h200-v23-runs/host_costs/). */
int count_eligible(Search &S, uint64_t *n_e, uint64_t *s_e) {
    const sieve_matrix *m = S.m;
    const Plan &pl = S.pl;
    if (!m->deleted && !m->allowed) {
        *n_e = m->n_rows;
        *s_e = pl.S;
        return 0;
    }
    unsigned long long *d = S.at<unsigned long long>(S.L.misc); /* misc + 0, + 8 */
    SIEVE_CUDA_TRY(cudaMemsetAsync(d, 0, 16, S.s));
    const uint32_t words = (uint32_t)((m->n_rows + 63) / 64);
    const uint32_t n = words > pl.S ? words : pl.S;
    count_eligible_kernel<<<(n + 255) / 256, 256, 0, S.s>>>(m->deleted, m->allowed,
                                                            (uint32_t)m->n_rows, pl.offset,
                                                            pl.stride, pl.S, d);
    SIEVE_CUDA_LAUNCH_CHECK();
    unsigned long long h[2] = {0, 0};
    SIEVE_CUDA_TRY(cudaMemcpyAsync(h, d, 16, cudaMemcpyDeviceToHost, S.s));
    SIEVE_CUDA_TRY(cudaStreamSynchronize(S.s));
    *n_e = h[0];
    *s_e = h[1];
    return 0;
}

/* Full path: every eligible row of each listed query materialised and sorted. qlist are
 * output query numbers; the prepared rows come from qprep. */
int full_path(Search &S, const std::vector<uint32_t> &qlist, sieve_search_stats *st) {
    const Plan &pl = S.pl;
    const uint64_t n = S.m->n_rows;
    uint32_t *idx = S.at<uint32_t>(S.L.idx);
    uint64_t *A = S.at<uint64_t>(S.L.fullA), *B = S.at<uint64_t>(S.L.fullB);
    void *cubtmp = S.at<void>(S.L.fullcub);
    int64_t *offs =
        (int64_t *)((unsigned char *)cubtmp + sieve__align_up(S.L.fullcub_bytes, 256));
    for (size_t c0 = 0; c0 < qlist.size(); c0 += pl.full_chunk) {
        uint32_t nc = (uint32_t)std::min<size_t>(pl.full_chunk, qlist.size() - c0);
        uint32_t ncp = (uint32_t)sieve__align_up(nc, 128);
        SIEVE_CUDA_TRY(cudaMemcpyAsync(idx, qlist.data() + c0, nc * 4, cudaMemcpyHostToDevice, S.s));
        gather_rows_kernel<<<ncp, 128, 0, S.s>>>(S.at<unsigned char>(S.L.qprep),
                                                 S.at<unsigned char>(S.L.qsub), pl.qrow_bytes, idx,
                                                 nc, ncp, S.at<float>(S.L.qn2),
                                                 S.at<float>(S.L.qn2sub));
        SIEVE_CUDA_LAUNCH_CHECK();
        ScanParams sp = S.sp;
        sp.q = S.at<void>(S.L.qsub);
        sp.nq = nc;
        sp.mat = A;
        sp.mat_ld = n;
        int rc = launch_scan<MODE_MAT>(S.c, S.s, S.m->dtype, sp, (uint32_t)n);
        if (rc) return rc;
        size_t tb = S.L.fullcub_bytes;
        if (n <= SEGSORT_MAX) {
            std::vector<int64_t> h(nc + 1);
            for (uint32_t i = 0; i <= nc; i++) h[i] = (int64_t)i * (int64_t)n;
            SIEVE_CUDA_TRY(cudaMemcpyAsync(offs, h.data(), (nc + 1) * 8, cudaMemcpyHostToDevice, S.s));
            SIEVE_CUDA_TRY(cub::DeviceSegmentedSort::SortKeys(cubtmp, tb, A, B, (int64_t)nc * n,
                                                              (int64_t)nc, offs, offs + 1, S.s));
            SIEVE_CUDA_TRY(cudaStreamSynchronize(S.s)); /* h must outlive the copy */
        } else {
            for (uint32_t j = 0; j < nc; j++) {
                tb = S.L.fullcub_bytes;
                SIEVE_CUDA_TRY(cub::DeviceRadixSort::SortKeys(cubtmp, tb, A + (size_t)j * n,
                                                              B + (size_t)j * n, (int64_t)n, 0, 64,
                                                              S.s));
            }
        }
        dim3 grid((pl.k + 255) / 256 < 64 ? (pl.k + 255) / 256 : 64, nc < 65535 ? nc : 65535);
        extract_kernel<<<grid, 256, 0, S.s>>>(B, n, nullptr, (uint32_t)std::min<uint64_t>(n, 0xffffffffu),
                                              nullptr, idx, nc, pl.k,
                                              (S.p->flags & SIEVE_SEARCH_RAW_KEYS) ? 0 : S.p->metric,
                                              S.at<float>(S.L.qn2sub), S.at<int64_t>(S.L.outrows),
                                              S.at<float>(S.L.outscores),
                                              S.at<uint32_t>(S.L.outcounts));
        SIEVE_CUDA_LAUNCH_CHECK();
        if (st) st->rows_scanned += (uint64_t)nc * n;
    }
    return 0;
}

/* Rescans the listed queries (state slots = output numbers) with their reset state. */
int rescan(Search &S, const std::vector<uint32_t> &qlist, const std::vector<float> &lo) {
    const Plan &pl = S.pl;
    uint32_t nc = (uint32_t)qlist.size();
    uint32_t ncp = (uint32_t)sieve__align_up(nc, 128);
    uint32_t *idx = S.at<uint32_t>(S.L.idx);
    float *lod = S.at<float>(S.L.lo);
    SIEVE_CUDA_TRY(cudaMemcpyAsync(idx, qlist.data(), nc * 4, cudaMemcpyHostToDevice, S.s));
    SIEVE_CUDA_TRY(cudaMemcpyAsync(lod, lo.data(), nc * 4, cudaMemcpyHostToDevice, S.s));
    (void)pl;
    reset_state_kernel<<<nc, 128, 0, S.s>>>(idx, lod, S.at<float>(S.L.hi), S.at<uint32_t>(S.L.thr),
                                            S.at<float>(S.L.edges), S.at<float>(S.L.binw),
                                            S.at<uint32_t>(S.L.hist), S.at<uint32_t>(S.L.cnt));
    SIEVE_CUDA_LAUNCH_CHECK();
    gather_rows_kernel<<<ncp, 128, 0, S.s>>>(S.at<unsigned char>(S.L.qprep),
                                             S.at<unsigned char>(S.L.qsub), pl.qrow_bytes, idx, nc,
                                             ncp, S.at<float>(S.L.qn2), S.at<float>(S.L.qn2sub));
    SIEVE_CUDA_LAUNCH_CHECK();
    ScanParams sp = S.sp;
    sp.q = S.at<void>(S.L.qsub);
    sp.nq = nc;
    sp.qmap = idx;
    /* the first gate scan left the tile counter where it stopped */
    SIEVE_CUDA_TRY(cudaMemsetAsync(tile_counter(S), 0, sizeof(uint32_t), S.s));
    int rc = launch_scan<MODE_GATE>(S.c, S.s, S.m->dtype, sp, (uint32_t)S.m->n_rows);
    if (rc) return rc;
    SIEVE_CUDA_TRY(cudaStreamSynchronize(S.s)); /* lo, qlist stay valid until here */
    return 0;
}

int fetch_cnt(Search &S, std::vector<uint32_t> &cnt) {
    cnt.resize(S.pl.nq);
    SIEVE_CUDA_TRY(cudaMemcpyAsync(cnt.data(), S.at<uint32_t>(S.L.cnt), S.pl.nq * 4,
                                   cudaMemcpyDeviceToHost, S.s));
    SIEVE_CUDA_TRY(cudaStreamSynchronize(S.s));
    return 0;
}

/* Highest lower edge whose histogram count reaches k (the boundary for an overflow rescan). */
int overflow_edge(Search &S, uint32_t q, float *edge) {
    std::vector<uint32_t> h(NBINS);
    std::vector<float> e(NBINS);
    SIEVE_CUDA_TRY(cudaMemcpyAsync(h.data(), S.at<uint32_t>(S.L.hist) + (size_t)q * NBINS,
                                   NBINS * 4, cudaMemcpyDeviceToHost, S.s));
    SIEVE_CUDA_TRY(cudaMemcpyAsync(e.data(), S.at<float>(S.L.edges) + (size_t)q * NBINS, NBINS * 4,
                                   cudaMemcpyDeviceToHost, S.s));
    SIEVE_CUDA_TRY(cudaStreamSynchronize(S.s));
    uint64_t cum = 0;
    *edge = e[0];
    for (int b = NBINS - 1; b >= 0; b--) {
        cum += h[b];
        if (cum >= S.pl.k) {
            *edge = e[b];
            return 0;
        }
    }
    return 0;
}

/* Blocks per list for the sample selection (a power of two up to 8, the portable cluster
 * size): enough that `lists` clusters give every SM two blocks and that a block's slice of the
 * n keys fits in shared memory. But one block a list where clusters of 8 would put more
 * than two blocks on an SM (34 lists and more on 132 SMs) and the largest wanted rank `rank`
 * lets one block take the group-maxima fast path (cluster_select3_desc): on the H200 at
 * 1M rows, k = 128 (16,384 sample keys, Nsight Compute) the propose step took 18.1 against
 * 21.0 us at 64 queries (clusters of 8) and 18.8 against 27.4 at 128 (clusters of 4), but
 * 17.6 against 14.4 at one query, where the cluster's 8 SMs share the work
 * (bench/results/h200-v35-runs, call 1). SIEVE_CUDA_PROPOSE_PARTS=1/2/4/8 overrides (A/B
 * runs). */
uint32_t select_parts(const sieve__cuda_ctx *c, uint32_t lists, uint32_t n, uint32_t rank) {
    const char *e = getenv("SIEVE_CUDA_PROPOSE_PARTS");
    if (e && *e) {
        const uint32_t v = (uint32_t)atoi(e);
        if (v == 1 || v == 2 || v == 4 || v == 8) return v;
    }
    const uint64_t want = 2ull * (uint64_t)c->prop.multiProcessorCount;
    if ((uint64_t)lists * 8 > want && select_stage_bytes(n, 1) &&
        rank < (n + SELECT_GROUP - 1) / SELECT_GROUP / 2)
        return 1;
    uint32_t parts = 1;
    while (parts < 8 && ((uint64_t)lists * parts < want || select_stage_bytes(n, parts) == 0))
        parts *= 2;
    return parts;
}

/* Launches a selection kernel (select3_kernel, propose_kernel) as `lists` clusters of `parts`
 * blocks over lists of n keys, each block with its slice's staging memory; chain: see
 * launch_ex. */
template <typename... P, typename... A>
cudaError_t launch_select(void (*kern)(P...), uint32_t lists, uint32_t parts, uint32_t n,
                          cudaStream_t s, uint32_t *chain, A... args) {
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)SELECT_SMEM);
    if (e != cudaSuccess) return e;
    return launch_ex(kern, dim3(lists * parts), dim3(select_slice(n, parts) <= 4096 ? 256 : 512),
                     select_stage_bytes(n, parts), s, chain, parts, args...);
}

/* True when [p, p + len) starts and ends in page-locked host memory (cudaHostAlloc or
 * cudaHostRegister), so the copy engine can read or write it directly. Pageable memory reports
 * cudaMemoryTypeUnregistered; managed and device memory are not taken. */
bool host_pinned(const void *p, size_t len) {
    if (!p || !len) return false;
    const void *ends[2] = {p, (const unsigned char *)p + len - 1};
    for (const void *e : ends) {
        cudaPointerAttributes a;
        if (cudaPointerGetAttributes(&a, e) != cudaSuccess) {
            (void)cudaGetLastError(); /* not sticky: clear it */
            return false;
        }
        if (a.type != cudaMemoryTypeHost) return false;
    }
    return true;
}

/* Host threads for the copies between the caller's pageable arrays and the pinned staging
 * buffer, kept by the context and started at the first copy that needs them (a caller whose
 * arrays are page-locked, like the server's batcher, never starts them): copy_threads() of
 * them for every copy (host_copier) but the streamed downloads, which have a pool of
 * stream_threads() of their own (host_streamer). On the H200 machine's host (16 threads;
 * bench/results/h200-v27-runs/probe.txt) one thread copies 3 MiB in 0.28 ms and 100 MiB in
 * 17-18 ms; 4 kept threads 3 MiB in 0.04 ms, 8 kept threads 100 MiB in 1.3 ms (source and
 * destination in the cache; the downloads, which are not, reached 27 GB/s on 8 threads:
 * stream_threads()); threads started for the copy cost about 40 us each (3 MiB over 8
 * started threads: 0.22 ms). The copies are loops over pieces that the calling thread
 * starts on at once and the pool's threads join as they wake (sieve_pool_for); copies of
 * up to SIEVE_POOL_ALONE_MAX (512 KiB) in all stay on the calling thread. A first version
 * that split even 0.2-0.4 MB copies over every thread and waited for each to take its share
 * was 0.11-0.15 ms slower at 5M rows B = 64 k = 128 (call 3 of
 * bench/results/h200-v27-runs); this one gains 6-14% on large pageable results and is
 * unchanged elsewhere (call 4; bench/RESULTS.md, "Host copy threads"). Both return NULL (copies on the calling thread; the pipelined
 * download then starts its threads per call, the behaviour before the pool) when
 * SIEVE_CUDA_HOSTCOPY=0 (A/B runs) or the pool cannot be created. */
constexpr unsigned HC_THREADS = 8, HC_STREAM_THREADS = 16;
constexpr uint32_t HC_SPIN_US = 50; /* an idle worker polls this long before it sleeps */

/* Threads a host copy uses: HC_THREADS, at most half the hardware threads, at least one
 * (and the threads the pipelined download starts per call without the pool). */
unsigned copy_threads() {
    const unsigned hw = std::thread::hardware_concurrency();
    const unsigned nt = hw / 2 < HC_THREADS ? hw / 2 : HC_THREADS;
    return nt ? nt : 1;
}

/* Threads a streamed download uses (DL_STREAM_MIN): HC_STREAM_THREADS, at most one fewer
 * than the hardware threads, at least copy_threads(); SIEVE_CUDA_COPY_THREADS sets it (A/B
 * runs). A large pipelined download is bound by the host's copies, not the bus: on the
 * H200 machine (16 hardware threads) 201 MB of results took 6.8-7.9 ms with 8 threads and
 * memcpy (27 GB/s against the bus's 54), 3.1-3.5 ms with 15 or 16, streaming stores and
 * 32-bit rows, 4.8-5.5 with 8 of those; but downloads of 6-25 MB were 3-10% slower with 15
 * threads than with 8 (bench/RESULTS.md, "The pageable download"), hence two pools. */
unsigned stream_threads() {
    if (const char *e = getenv("SIEVE_CUDA_COPY_THREADS"))
        if (atoi(e) > 0 && atoi(e) <= 256) return (unsigned)atoi(e);
    const unsigned hw = std::thread::hardware_concurrency(), small = copy_threads();
    const unsigned nt = hw < 2 ? 1 : hw - 1 < HC_STREAM_THREADS ? hw - 1 : HC_STREAM_THREADS;
    return nt > small ? nt : small;
}

/* The pool in *pool (state in *state, see sieve__cuda_ctx), started with `threads`
 * threads at the first call. */
sieve_pool *kept_pool(sieve_pool **pool, int *state, unsigned threads) {
    if (*state == 0) {
        const char *e = getenv("SIEVE_CUDA_HOSTCOPY");
        *state = -1;
        if (!(e && !strcmp(e, "0")) && sieve_pool_create(threads, HC_SPIN_US, pool) == 0)
            *state = 1;
    }
    return *state == 1 ? *pool : nullptr;
}

sieve_pool *host_copier(sieve__cuda_ctx *c) {
    return kept_pool(&c->copier, &c->copier_state, copy_threads());
}

sieve_pool *host_streamer(sieve__cuda_ctx *c) {
    return kept_pool(&c->streamer, &c->streamer_state, stream_threads());
}

/* Host -> device copy of the queries: straight from the caller's array when it is
 * page-locked (the copy engine reads it; the search syncs before it returns), otherwise
 * through the pinned staging buffer (copied there by the context's host threads). */
int upload_queries(Search &S, const float *queries) {
    size_t qb = (size_t)S.pl.nq * S.pl.dim * 4;
    const void *src = queries;
    if (!host_pinned(queries, qb)) {
        int rc = ensure_pinned(S.c, qb);
        if (rc) return rc;
        sieve_pool_memcpy(host_copier(S.c), S.c->pinned, queries, qb);
        src = S.c->pinned;
    }
    SIEVE_CUDA_TRY(cudaMemcpyAsync(S.at<float>(S.L.qf32), src, qb, cudaMemcpyHostToDevice, S.s));
    return prep_queries(S);
}

/* Device -> host copy of the result arrays: straight into them when the caller's arrays are
 * page-locked, otherwise through the pinned staging buffer.
 * Large results go in chunks: each chunk's copy to pinned memory is queued with an event,
 * and the context's host threads (host_copier, from DL_STREAM_MIN bytes host_streamer with
 * streaming stores; copy_threads() threads started per call without them) move landed
 * chunks to the caller's arrays while later chunks are still crossing the bus (on the H200
 * machine 100 MiB crosses the bus in 1.9 ms: bench/results/h200-v27-runs/probe.txt). The host side is the slower: 201 MB of
 * results (1M rows, B = 1024, k = 16384) took 6.8-7.9 ms with 8 threads and memcpy, 27
 * GB/s; with the rows as 32-bit values on the bus (narrow_download), streaming stores and
 * 15-16 threads 3.1-3.5 ms (bench/RESULTS.md, "The pageable download"). Chunks of 2 or 4
 * MiB were slower than 1 MiB; 512 KiB no faster. */
constexpr size_t DL_CHUNK = 1u << 20;
constexpr size_t DL_PIPELINE_MIN = 2u << 20;
/* From this many bytes of results (at 12 bytes a result) the pipelined download moves the
 * rows as 32-bit values and writes the caller's arrays with streaming stores: on the H200
 * machine both gained from 25 MB on (1M rows B = 128 k = 16384: 2.03 -> 1.89-1.91 ms; B =
 * 1024 k = 16384: 16.2-16.4 -> 12.2 ms), and cost 0.05-0.1 ms at 6 MB (8,841,823 rows
 * B = 64 k = 8192: the last chunk's streaming copy is slower than memcpy into a destination
 * that stays in the cache); 12.6 MB moved neither way (bench/RESULTS.md, "The pageable
 * download"). */
constexpr size_t DL_STREAM_MIN = 16u << 20;

/* Whether a streamed download (DL_STREAM_MIN) moves the rows as 32-bit values:
 * narrow_rows_kernel writes them into the candidate buffer (Layout::rows32,
 * dead once the select has run) and the host threads widen each chunk as they move it, so
 * a result crosses the bus, and is read from the staging buffer, in 8 bytes instead of 12.
 * With 8 threads and memcpy it gained nothing measurable (201 MB: 6.8-7.9 -> 6.9-7.1 ms);
 * with streaming stores and 15 threads it is a third of the gain. Needs rows below 2^31
 * and the search's layout (not the materialized oracle's); SIEVE_CUDA_NARROW=0 turns it
 * off (A/B runs, a GPU test comparing both). */
bool narrow_download(const Search &S) {
    if (!S.L.rows32 || S.m->n_rows > (uint64_t)INT32_MAX) return false;
    const char *e = getenv("SIEVE_CUDA_NARROW");
    return !(e && !strcmp(e, "0"));
}

enum class Dl { DIRECT, STAGED, PIPELINED };

/* How the results reach the caller: DIRECT when both arrays are page-locked, STAGED (one copy
 * each into the pinned staging buffer, then host copies) when they are small, else PIPELINED. */
Dl download_kind(const Search &S, const int64_t *out_rows, const float *out_scores) {
    const size_t nr = (size_t)S.pl.nq * S.pl.k;
    if (host_pinned(out_rows, nr * 8) && host_pinned(out_scores, nr * 4)) return Dl::DIRECT;
    return nr * 12 < DL_PIPELINE_MIN ? Dl::STAGED : Dl::PIPELINED;
}

/* Bytes of the pinned staging buffer the STAGED and PIPELINED downloads use: rows, scores,
 * counts (at nr * 12) and slack. */
size_t staging_bytes(const Plan &pl) { return results_bytes(pl) + 64; }

/* Queues a DIRECT or STAGED download on the stream (the staging buffer must already hold
 * staging_bytes, and report_bytes more with the report); nothing waits for it. STAGED is
 * one copy of the packed results (make_layout), with the speculative select's report when
 * `report`; DIRECT copies into the caller's arrays and leaves the report to the caller. */
int download_queue(Search &S, Dl kind, int64_t *out_rows, float *out_scores,
                   uint32_t *out_counts, bool report) {
    const size_t nr = (size_t)S.pl.nq * S.pl.k;
    if (kind == Dl::STAGED) {
        const size_t bytes = results_bytes(S.pl) + (report ? report_bytes(S.pl.nq) : 0);
        SIEVE_CUDA_TRY(cudaMemcpyAsync(S.c->pinned, S.at<int64_t>(S.L.outrows), bytes,
                                       cudaMemcpyDeviceToHost, S.s));
        return 0;
    }
    SIEVE_CUDA_TRY(cudaMemcpyAsync(out_rows, S.at<int64_t>(S.L.outrows), nr * 8,
                                   cudaMemcpyDeviceToHost, S.s));
    SIEVE_CUDA_TRY(cudaMemcpyAsync(out_scores, S.at<float>(S.L.outscores), nr * 4,
                                   cudaMemcpyDeviceToHost, S.s));
    if (out_counts)
        SIEVE_CUDA_TRY(cudaMemcpyAsync(out_counts, S.at<uint32_t>(S.L.outcounts), S.pl.nq * 4,
                                       cudaMemcpyDeviceToHost, S.s));
    return 0;
}

/* After the stream is synchronised: a STAGED download's host copies. */
void download_unstage(const Search &S, int64_t *out_rows, float *out_scores,
                      uint32_t *out_counts) {
    const size_t nr = (size_t)S.pl.nq * S.pl.k;
    const unsigned char *h = (const unsigned char *)S.c->pinned;
    const sieve_pool_copy c[3] = {{out_rows, h, nr * 8},
                                  {out_scores, h + nr * 8, nr * 4},
                                  {out_counts, h + nr * 12, out_counts ? S.pl.nq * 4 : 0}};
    sieve_pool_memcpyv(host_copier(S.c), c, 3); /* one loop for the three */
}

int download_results(Search &S, int64_t *out_rows, float *out_scores, uint32_t *out_counts) {
    const Plan &pl = S.pl;
    size_t nr = (size_t)pl.nq * pl.k;
    const Dl kind = download_kind(S, out_rows, out_scores);
    int rc = kind == Dl::DIRECT ? 0 : ensure_pinned(S.c, staging_bytes(pl));
    if (rc) return rc;
    if (kind != Dl::PIPELINED) {
        if ((rc = download_queue(S, kind, out_rows, out_scores, out_counts, false))) return rc;
        SIEVE_CUDA_TRY(cudaStreamSynchronize(S.s));
        if (kind == Dl::STAGED) download_unstage(S, out_rows, out_scores, out_counts);
        return 0;
    }
    unsigned char *h = (unsigned char *)S.c->pinned;
    SIEVE_CUDA_TRY(cudaMemcpyAsync(h + nr * 12, S.at<uint32_t>(S.L.outcounts), pl.nq * 4,
                                   cudaMemcpyDeviceToHost, S.s));
    const bool stream = nr * 12 >= DL_STREAM_MIN; /* streaming stores, more threads */
    const bool narrow = stream && narrow_download(S);
    const size_t rb = narrow ? 4 : 8; /* bytes of a row on the bus */
    if (narrow) {
        const size_t blocks = (nr + 255) / 256;
        narrow_rows_kernel<<<(unsigned)(blocks < 4096 ? blocks : 4096), 256, 0, S.s>>>(
            S.at<int64_t>(S.L.outrows), S.at<int32_t>(S.L.rows32), nr);
        SIEVE_CUDA_LAUNCH_CHECK();
    }
    struct Chunk {
        const unsigned char *dev;
        unsigned char *pin, *dst;
        size_t len;
        bool widen; /* 32-bit rows in pinned memory, 64-bit in the caller's array */
        cudaEvent_t ev;
    };
    std::vector<Chunk> ch;
    auto plan = [&](const void *dev, unsigned char *pin, void *dst, size_t len, bool widen) {
        for (size_t o = 0; o < len; o += DL_CHUNK)
            ch.push_back({(const unsigned char *)dev + o, pin + o,
                          (unsigned char *)dst + (widen ? 2 * o : o),
                          len - o < DL_CHUNK ? len - o : DL_CHUNK, widen, nullptr});
    };
    if (narrow)
        plan(S.at<int32_t>(S.L.rows32), h, out_rows, nr * 4, true);
    else
        plan(S.at<int64_t>(S.L.outrows), h, out_rows, nr * 8, false);
    plan(S.at<float>(S.L.outscores), h + nr * rb, out_scores, nr * 4, false);
    cudaError_t err = cudaSuccess;
    for (size_t i = 0; i < ch.size() && err == cudaSuccess; i++) {
        Chunk &c = ch[i];
        err = cudaEventCreateWithFlags(&c.ev, cudaEventDisableTiming);
        if (err != cudaSuccess) {
            c.ev = nullptr;
            break;
        }
        err = cudaMemcpyAsync(c.pin, c.dev, c.len, cudaMemcpyDeviceToHost, S.s);
        if (err == cudaSuccess) err = cudaEventRecord(c.ev, S.s);
    }
    if (err == cudaSuccess) {
        struct Job {
            const std::vector<Chunk> *ch;
            std::atomic<int> failed;
            bool stream; /* streaming stores */
        } job{&ch, {0}, stream};
        /* one chunk: wait until it has landed, move it to the caller's array */
        auto move_chunk = [](void *ctx, size_t i) {
            Job &j = *(Job *)ctx;
            const Chunk &c = (*j.ch)[i];
            if (j.failed.load(std::memory_order_relaxed)) return;
            if (cudaEventSynchronize(c.ev) != cudaSuccess) {
                j.failed.store(1);
                return;
            }
            if (c.widen)
                sieve_widen_i32_stream((int64_t *)c.dst, (const int32_t *)c.pin, c.len / 4);
            else if (j.stream)
                sieve_copy_stream(c.dst, c.pin, c.len);
            else
                memcpy(c.dst, c.pin, c.len);
        };
        if (sieve_pool *hc = stream ? host_streamer(S.c) : host_copier(S.c)) {
            /* chunks claimed in order by this thread and the copy threads as they wake */
            sieve_pool_for(hc, ch.size(), move_chunk, &job);
        } else { /* SIEVE_CUDA_HOSTCOPY=0: threads started for this call, thread t moving
                    chunks t, t + nt, ... */
            unsigned nt = copy_threads();
            if (nt > ch.size()) nt = (unsigned)ch.size();
            auto worker = [&](unsigned t) {
                for (size_t i = t; i < ch.size(); i += nt) move_chunk(&job, i);
            };
            std::vector<std::thread> pool;
            for (unsigned t = 1; t < nt; t++) pool.emplace_back(worker, t);
            worker(0);
            for (auto &th : pool) th.join();
        }
        if (job.failed.load()) err = cudaErrorUnknown;
    }
    if (err == cudaSuccess) err = cudaStreamSynchronize(S.s); /* the counts */
    for (Chunk &c : ch)
        if (c.ev) cudaEventDestroy(c.ev);
    if (err != cudaSuccess) {
        cudaStreamSynchronize(S.s); /* nothing may still write the staging buffer */
        return sieve__cuda_fail(err, "result download", __FILE__, __LINE__);
    }
    if (out_counts) memcpy(out_counts, h + nr * 12, pl.nq * 4);
    return 0;
}

/* The select step: the block sort (select_block_kernel), one block per query or per part of
 * one (select_block_parts), for k up to SEL_BLOCK_MAX_K; a query keeping more than its parts
 * stage or sort (the threshold bin and above) is handed to compact + segmented sort +
 * extract, as are all queries for larger k.
 * The block (select_threads): the smallest of SEL_SMALL_T threads (sorting up to
 * SEL_SMALL_T * SEL_SMALL_I), SEL_MID_T (SEL_MID_T * SEL_MID_I) and SEL_T (SEL_T * SEL_I; 64
 * registers a thread at 1024 threads, 16 keys a thread spilled) that sorts what a query is
 * expected to keep: k, plus the rows above the sample's maximum, which all fall in the top
 * bin of the scan's histogram (open above it): about n / S of them, exponentially
 * distributed, so 10 n / S is passed by one query in 22,000 (at 5M rows, k = 128, one query
 * in 30 kept more than 1024: the rows above the maximum). The staging is sized by what the
 * block sorts, not by what a query admitted (k = 8192 at 5M rows admits about 12.6k
 * candidates a query, k = 128 about 700). Before, the block and its staging were sized by
 * the most candidates a query admitted, and above 128 queries with at most 1024 the
 * segmented select ran (bench/RESULTS.md "Kernel v19", "Select sized by what is kept").
 * SIEVE_CUDA_SELECT=segmented forces the segmented select, =small the SEL_SMALL_T block at
 * every k up to SEL_BLOCK_MAX_K (tests: queries split in parts of it, and queries keeping
 * more than its parts sort, handed back). */
constexpr uint32_t SEL_SMALL_T = 256, SEL_SMALL_I = 4, SEL_MID_T = 512, SEL_MID_I = 8,
                   SEL_T = 1024, SEL_I = 12;

/* A query keeping more than its block sorts is split into up to SEL_PARTS parts of
 * consecutive histogram bins, one block each (select_block_kernel); the block path runs for
 * k up to SEL_BLOCK_MAX_K (three parts of the largest block). Where the batch leaves SMs
 * idle (fewer queries than SMs: one block of SEL_T threads fills an SM), a query's kept
 * candidates are split for speed as well, none under SEL_PART_MIN (select_part_max),
 * since a block sorting fewer keys a thread finishes sooner. */
constexpr uint32_t SEL_PARTS = 8, SEL_PART_MIN = 2048, SEL_BLOCK_MAX_K = SEL_T * SEL_I * 3;

bool select_by_block(uint32_t k) {
    const char *e = getenv("SIEVE_CUDA_SELECT");
    if (e && !strcmp(e, "segmented")) return false;
    return k <= SEL_BLOCK_MAX_K;
}

/* What a query is expected to keep (the threshold bin and above): k, plus the rows above
 * the sample's maximum (select_threads, below), at most `most` where known. */
double select_keep(uint32_t k, uint64_t n, uint32_t S, uint32_t most) {
    double keep = (double)k + 10.0 * (double)n / (double)(S ? S : 1);
    if (most && (double)most < keep) keep = most;
    return keep;
}

/* The most kept candidates a part takes, for blocks sorting up to `per` each, nq queries
 * and `sms` SMs: `per`, or where nq <= sms / 2 and a query is expected to keep more than two
 * parts of SEL_PART_MIN (k plus the mean count above the sample's maximum, n / S, not the
 * tail select_keep allows for) that over min(SEL_PARTS - 2, sms / nq) parts, at least
 * SEL_PART_MIN (two parts to spare for the bins' granularity and the tail). */
uint32_t select_part_max(uint32_t k, uint64_t n, uint32_t S, uint32_t per, uint32_t nq,
                         uint32_t sms) {
    const double mean = (double)k + (double)n / (double)(S ? S : 1);
    if (nq >= sms || mean <= 2.0 * SEL_PART_MIN) return per;
    const uint32_t spread = std::min<uint32_t>(SEL_PARTS - 2, sms / nq);
    if (spread < 2) return per; /* no SMs left for a second part of every query */
    const double size = std::max<double>(SEL_PART_MIN, ceil(mean / spread));
    return size < per ? (uint32_t)size : per;
}

/* The parts (blocks) a query's select is launched with: one where the expected keep fits a
 * part, else one more than the keep over the part size, at most SEL_PARTS. */
uint32_t select_block_parts(double keep, uint32_t part_max) {
    if (keep <= part_max) return 1;
    const uint32_t p = (uint32_t)ceil(keep / part_max) + 1;
    return p < SEL_PARTS ? p : SEL_PARTS;
}

/* The block select's threads (see above) for k, the plan's sample of S of n rows and, where
 * known, the most candidates a used query holds (0: not known). */
uint32_t select_threads(uint32_t k, uint64_t n, uint32_t S, uint32_t most) {
    const char *e = getenv("SIEVE_CUDA_SELECT");
    if (e && !strcmp(e, "small")) return SEL_SMALL_T;
    const double keep = select_keep(k, n, S, most);
    return keep <= SEL_SMALL_T * SEL_SMALL_I ? SEL_SMALL_T
           : keep <= SEL_MID_T * SEL_MID_I   ? SEL_MID_T
                                             : SEL_T;
}

/* launch_select_block with the block select_threads picked. */
int launch_select_sized(Search &S, uint32_t threads, const unsigned char *used, uint32_t most,
                        int metric, uint32_t *chain = nullptr);

/* Bytes of shared memory for a block of T threads that stages (and sorts) up to `stage`
 * candidates: the staging array, or the largest sort it may run. */
template <int T, int IMAX>
size_t select_block_smem(uint32_t stage) {
    const uint32_t items = (stage + T - 1) / T;
    size_t sort = items <= 1 || IMAX < 2    ? sel_sort_bytes<T, 1>()
                  : items <= 2 || IMAX < 4  ? sel_sort_bytes<T, 2>()
                  : items <= 4 || IMAX < 8  ? sel_sort_bytes<T, 4>()
                  : items <= 8 || IMAX < 12 ? sel_sort_bytes<T, 8>()
                                            : sel_sort_bytes<T, 12>();
    size_t bytes = (size_t)stage * 8;
    return sort > bytes ? sort : bytes;
}

/* used: the host's certification per query, or nullptr for the speculative select (the
 * kernel certifies); most: the most candidates a used query holds (the staging holds the
 * smaller of it and what the block sorts); chain: see launch_ex */
template <int T, int IMAX>
int launch_select_block(Search &S, const unsigned char *used, uint32_t most, int metric,
                        uint32_t *chain = nullptr) {
    const uint32_t stage = std::max<uint32_t>(1, std::min<uint32_t>(most, (uint32_t)T * IMAX));
    const size_t smem = select_block_smem<T, IMAX>(stage);
    auto kern = select_block_kernel<T, IMAX>;
    SIEVE_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)smem));
    SelOut o = {S.at<float>(S.L.qn2), S.at<int64_t>(S.L.outrows), S.at<float>(S.L.outscores),
                S.at<uint32_t>(S.L.outcounts), S.pl.k, metric};
    const double keep = select_keep(S.pl.k, S.sp.n_rows, S.pl.S, most);
    const uint32_t part_max = select_part_max(S.pl.k, S.sp.n_rows, S.pl.S, stage, S.pl.nq,
                                              (uint32_t)S.c->prop.multiProcessorCount);
    const uint32_t parts = select_block_parts(keep, part_max);
    const char *re = getenv("SIEVE_CUDA_SELECT_RANK"); /* 0: the radix sort always (A/B) */
    const SelSpec spec = {S.n_e, stage, part_max, S.at<uint32_t>(S.L.thr2),
                          S.at<uint32_t>(S.L.report),
                          re && *re == '0' ? 0u : SEL_RANK_MAX};
    unsigned char *over = used ? S.at<unsigned char>(S.L.use) + S.pl.nq_pad
                               : S.at<unsigned char>(S.L.report) + (size_t)8 * S.pl.nq;
    if (parts > 1) { /* the blocks of a split query only ever set its flag (sel_hand_back) */
        SIEVE_CUDA_TRY(cudaMemsetAsync(over, 0, S.pl.nq, S.s));
        chain = nullptr; /* behind the memset, not the scan */
    }
    SIEVE_CUDA_TRY(launch_ex(kern, dim3(S.pl.nq, parts), dim3(T), smem, S.s, chain, 0,
                             S.at<uint64_t>(S.L.cand), S.pl.cap, S.at<uint32_t>(S.L.cnt), used,
                             S.at<uint32_t>(S.L.hist), S.at<float>(S.L.edges), S.sp.n_rows, o,
                             over, used ? S.at<uint32_t>(S.L.misc + 16) : nullptr, spec));
    return 0;
}

int select_segmented(Search &S, const unsigned char *used, int metric);

/* most: the most candidates a used query holds; *handed: the queries left to the segmented
 * sort (more kept candidates than the block stages) */
int select_block(Search &S, const unsigned char *used, uint32_t most, int metric,
                 uint32_t *handed) {
    *handed = 0;
    uint32_t *n_over = S.at<uint32_t>(S.L.misc + 16);
    SIEVE_CUDA_TRY(cudaMemsetAsync(n_over, 0, 4, S.s));
    int rc = launch_select_sized(S, select_threads(S.pl.k, S.sp.n_rows, S.pl.S, most), used,
                                 most, metric);
    if (rc) return rc;
    uint32_t h = 0; /* (the caller waits for the select anyway: this copy is that wait) */
    SIEVE_CUDA_TRY(cudaMemcpyAsync(&h, n_over, 4, cudaMemcpyDeviceToHost, S.s));
    SIEVE_CUDA_TRY(cudaStreamSynchronize(S.s));
    *handed = h;
    return h ? select_segmented(S, S.at<unsigned char>(S.L.use) + S.pl.nq_pad, metric) : 0;
}

int launch_select_sized(Search &S, uint32_t threads, const unsigned char *used, uint32_t most,
                        int metric, uint32_t *chain) {
    if (threads == SEL_SMALL_T)
        return launch_select_block<SEL_SMALL_T, SEL_SMALL_I>(S, used, most, metric, chain);
    if (threads == SEL_MID_T)
        return launch_select_block<SEL_MID_T, SEL_MID_I>(S, used, most, metric, chain);
    return launch_select_block<SEL_T, SEL_I>(S, used, most, metric, chain);
}

int select_segmented(Search &S, const unsigned char *used, int metric) {
    const Plan &pl = S.pl;
    const uint32_t n_queries = pl.nq;
    int64_t *beg = S.at<int64_t>(S.L.segb), *end = S.at<int64_t>(S.L.sege);
    /* keep what is at or above each query's threshold bin (k plus that bin), sort that */
    compact_top_kernel<<<n_queries, 256, 0, S.s>>>(
        S.at<uint64_t>(S.L.cand), pl.cap, S.at<uint32_t>(S.L.cnt), used,
        S.at<uint32_t>(S.L.hist), S.at<float>(S.L.edges), pl.k, S.at<uint64_t>(S.L.sorted),
        S.at<uint32_t>(S.L.topm), beg, end);
    SIEVE_CUDA_LAUNCH_CHECK();
    size_t tb = S.L.cub_bytes;
    SIEVE_CUDA_TRY(cub::DeviceSegmentedSort::SortKeys(
        S.at<void>(S.L.cub), tb, S.at<uint64_t>(S.L.sorted), S.at<uint64_t>(S.L.cand),
        (int64_t)n_queries * pl.cap, (int64_t)n_queries, beg, end, S.s));
    dim3 grid((pl.k + 255) / 256 < 64 ? (pl.k + 255) / 256 : 64,
              n_queries < 65535 ? n_queries : 65535);
    extract_kernel<<<grid, 256, 0, S.s>>>(S.at<uint64_t>(S.L.cand), pl.cap,
                                          S.at<uint32_t>(S.L.topm), 0, used, nullptr, n_queries,
                                          pl.k, metric, S.at<float>(S.L.qn2),
                                          S.at<int64_t>(S.L.outrows), S.at<float>(S.L.outscores),
                                          S.at<uint32_t>(S.L.outcounts));
    SIEVE_CUDA_LAUNCH_CHECK();
    return 0;
}

/* The speculative select (sieve__cuda_knn): for k up to SEL_SPEC_MAX_K (the block path's
 * limit; up to 8192 before the block select in parts), at any batch, the
 * block select and the result download are queued right behind the scan, each query
 * certified on the device by the host's own test (select_block_kernel with use == nullptr),
 * so a call whose queries all certify waits for the device once instead of three times (for
 * the counts, the select, the download): the fixed cost that dominates calls of a few
 * queries over 1M rows. Not where the results go through the pipelined download (large
 * results into pageable arrays): there the download's milliseconds dwarf a round trip, and
 * the speculative calls measured 0.1-0.17 ms slower at 5M rows, B = 64, k = 8192 (cause not
 * established). The host then certifies from the same counts; if a query is not certified,
 * or keeps more candidates than its block or parts stage or sort, the call goes on exactly as
 * without speculation (recoveries, the select again, the download again), so no answer
 * depends on it. Returns 0 (off) or the block's threads, as the select step picks them
 * (select_threads). The first form sized the block by what a query was expected to admit
 * (the 256-thread block up to 768 admissions), with staging for the capacity, and stopped
 * at 128 queries (bench/RESULTS.md, "Speculative select", "Select sized by what is kept");
 * above 128 queries, whole calls on the H200 alternating with it off: 1M rows B = 256
 * 0.6-10% faster (k = 8192 to k = 128), B = 1024 0.3-2%; 5M B = 256-512 0.2-4% faster at 6
 * of 8 shapes (one unchanged, one 1% slower), B = 1024 within +-2%, the spread of those
 * runs ("The speculative select at any batch").
 * SIEVE_CUDA_SPECULATE=0 turns it off; =small or =large forces the 256- or the 1024-thread
 * block (tests: a query keeping more than the small block sorts; benchmarks). */
constexpr uint32_t SEL_SPEC_MAX_K = SEL_BLOCK_MAX_K;

uint32_t speculation(const Plan &pl, uint64_t n_rows, Dl dl) {
    const char *e = getenv("SIEVE_CUDA_SPECULATE");
    if (e && !strcmp(e, "0")) return 0;
    const char *sel = getenv("SIEVE_CUDA_SELECT");
    if (sel && !strcmp(sel, "segmented")) return 0;
    if (pl.k > SEL_SPEC_MAX_K || dl == Dl::PIPELINED) return 0;
    if (e && !strcmp(e, "small")) return SEL_SMALL_T;
    if (e && !strcmp(e, "large")) return SEL_T;
    return select_threads(pl.k, n_rows, pl.S, 0);
}

/* The launches a search chains behind their predecessor by programmatic dependent launch
 * (scan.cuh, pdl_wait): the sample scan (behind the query preparation), the propose step,
 * the gate scan and the speculative select. */
enum : unsigned { CH_SAMPLE = 1, CH_PROPOSE = 2, CH_GATE = 4, CH_SELECT = 8, CH_ALL = 15 };

/* Which launches to chain (sm_90 and later): every one for up to CHAIN_MAX_QUERIES queries,
 * none above. Measured on the H200 (float16, whole calls, median of 40, two rounds in
 * alternating order against the same build unchained; bench/RESULTS.md "Chained launches"):
 * 1M rows B = 1-8 6-14 us faster (B = 1 k = 128: 0.420-0.428 -> 0.409-0.410 ms), 5M rows
 * within noise; chaining every launch was within noise at B = 16 and 10-40 us slower at
 * B = 64 and 128 (1M; chaining one launch alone cost less there and gained nothing).
 * SIEVE_CUDA_PDL=1 chains every launch at any batch, 0 none, or a comma-separated list of
 * sample, propose, gate, select those (A/B runs, tests). */
constexpr uint32_t CHAIN_MAX_QUERIES = 8;

unsigned chain_stages(const sieve__cuda_ctx *c, uint32_t nq) {
    if (c->prop.major < 9) return 0;
    const char *e = getenv("SIEVE_CUDA_PDL");
    if (!e || !*e) return nq <= CHAIN_MAX_QUERIES ? (unsigned)CH_ALL : 0u;
    if (!strcmp(e, "1")) return CH_ALL;
    unsigned m = 0;
    if (strstr(e, "sample")) m |= CH_SAMPLE;
    if (strstr(e, "propose")) m |= CH_PROPOSE;
    if (strstr(e, "gate")) m |= CH_GATE;
    if (strstr(e, "select")) m |= CH_SELECT;
    return m;
}

/* Where the speculative select's report lands in the pinned buffer: behind the staged
 * results (at results_bytes, as on the device: one copy brings both), or at its start when
 * the results go straight into the caller's page-locked arrays (DIRECT). */
size_t spec_report_at(const Plan &pl, Dl dl) { return dl == Dl::STAGED ? results_bytes(pl) : 0; }

/* Pinned bytes the speculative select needs: the report and, STAGED, the results before it. */
size_t spec_pinned_bytes(const Plan &pl, Dl dl) {
    return spec_report_at(pl, dl) + report_bytes(pl.nq) + 64;
}

int setup(Search &S, void *ctx, const sieve_matrix *m, uint32_t nq, const sieve_search_params *p,
          bool full_only) {
    S.c = (sieve__cuda_ctx *)ctx;
    S.s = S.c->stream;
    S.m = m;
    S.p = p;
    make_plan(m, nq, p, full_only, &S.pl);
    memset(&S.sp, 0, sizeof S.sp);
    S.sp.pages = m->pages;
    S.sp.norm_pages = m->norm_pages;
    S.sp.deleted = m->deleted;
    S.sp.allowed = m->allowed;
    S.sp.rpp = m->rows_per_page;
    S.sp.dim = m->dim;
    S.sp.dpad = S.pl.dpad;
    S.sp.n_rows = (uint32_t)m->n_rows;
    S.sp.metric = (int)p->metric;
    S.sp.k = p->k;
    S.sp.page_base = m->page_base;
    S.sp.page_stride = m->page_stride;
    SIEVE_CUDA_TRY(cudaSetDevice(S.c->ordinal));
    if (m->rows_per_page % 128) return SIEVE_EINVAL;
    return 0;
}

} // namespace

/* ------------------------------------------------------------------ entry points */

void sieve__cuda_release_workspace(sieve__cuda_ctx *c) {
    if (c->work) cudaFree(c->work);
    if (c->pinned) cudaFreeHost(c->pinned);
    c->work = NULL;
    c->pinned = NULL;
    c->work_bytes = c->pinned_bytes = 0;
}

int sieve__cuda_ensure_work(sieve__cuda_ctx *c, size_t bytes) {
    if (c->work_bytes >= bytes) return 0;
    if (c->work) cudaFree(c->work);
    c->work = NULL;
    c->work_bytes = 0;
    SIEVE_CUDA_TRY(cudaMalloc(&c->work, bytes));
    c->work_bytes = bytes;
    return 0;
}

extern "C" int sieve__cuda_knn_scratch_size(void *ctx, const sieve_matrix *m, uint32_t n_queries,
                                            const sieve_search_params *p, size_t *bytes) {
    Plan pl;
    make_plan(m, n_queries, p, false, &pl);
    Layout L;
    int rc = make_layout(pl, m->n_rows, false, &L);
    if (rc) return rc;
    *bytes = L.total;
    return 0;
}

extern "C" int sieve__cuda_knn(void *ctx, const sieve_matrix *m, const float *queries,
                               uint32_t n_queries, const sieve_search_params *p, void *scratch,
                               size_t scratch_bytes, int64_t *out_rows, float *out_scores,
                               uint32_t *out_counts, uint8_t *out_paths,
                               sieve_search_stats *stats) {
    double t0 = sieve__now_ms();
    Search S;
    int rc = setup(S, ctx, m, n_queries, p, false);
    if (rc) return rc;
    const Plan &pl = S.pl;
    rc = make_layout(pl, m->n_rows, false, &S.L);
    if (rc) return rc;
    if (scratch) {
        if (scratch_bytes < S.L.total) return SIEVE_ENOSPC;
        S.base = (unsigned char *)scratch;
    } else {
        rc = sieve__cuda_ensure_work(S.c, S.L.total);
        if (rc) return rc;
        S.base = (unsigned char *)S.c->work;
    }
    sieve_search_stats st;
    memset(&st, 0, sizeof st);
    st.queries = n_queries;
    std::vector<uint8_t> path(n_queries, SIEVE_PATH_CERTIFIED);
    const int metric = (p->flags & SIEVE_SEARCH_RAW_KEYS) ? 0 : (int)p->metric;
    /* the speculative select's pinned bytes first: growing the buffer later would free it
       under the queries' upload */
    const Dl dl = download_kind(S, out_rows, out_scores);
    const uint32_t spec = speculation(pl, m->n_rows, dl);
    if (spec && (rc = ensure_pinned(S.c, spec_pinned_bytes(pl, dl)))) return rc;

    rc = upload_queries(S, queries);
    if (rc) return rc;
    uint32_t chained = 0; /* kernels launched behind their predecessor */
    const unsigned stages = chain_stages(S.c, n_queries);
    auto chain = [&](unsigned stage) { return (stages & stage) ? &chained : nullptr; };

    /* eligible rows overall and in the sample decide between the fused and direct paths */
    uint64_t n_e = 0, s_e = 0;
    if ((rc = count_eligible(S, &n_e, &s_e))) return rc;
    S.n_e = n_e;
    uint32_t j = 0, j2 = 0;
    ranks_for(pl.k, s_e, n_e, &j, &j2);
    bool direct = n_e == 0 || (uint64_t)pl.S * 2 >= m->n_rows || (!p->force_boundary && j >= s_e);
    double t_sample = sieve__now_ms();

    std::vector<uint32_t> all_full;
    std::vector<unsigned char> use(n_queries, 0);
    std::vector<uint32_t> cnt_final; /* admitted counts after any rescan */
    bool selected = false;           /* the speculative select answered every query */
    if (direct) {
        for (uint32_t q = 0; q < n_queries; q++) {
            all_full.push_back(q);
            path[q] = SIEVE_PATH_DIRECT;
        }
    } else {
        /* sample + propose */
        ScanParams sp = S.sp;
        sp.q = S.at<void>(S.L.qprep);
        sp.nq = n_queries;
        sp.s_offset = pl.offset;
        sp.s_stride = pl.stride;
        sp.s_count = pl.S;
        sp.sample_out = S.at<float>(S.L.sample);
        rc = launch_scan<MODE_SAMPLE>(S.c, S.s, m->dtype, sp, pl.S, chain(CH_SAMPLE));
        if (rc) return rc;
        SIEVE_CUDA_TRY(launch_select(
            propose_kernel, n_queries, select_parts(S.c, n_queries, pl.S, j > j2 ? j : j2),
            pl.S, S.s,
            chain(CH_PROPOSE),
            (const float *)S.at<float>(S.L.sample), pl.S, (uint32_t)s_e, j, j2,
            p->force_boundary, p->forced_boundary, S.at<uint32_t>(S.L.thr),
            S.at<uint32_t>(S.L.thr2), S.at<float>(S.L.hi), S.at<float>(S.L.edges),
            S.at<float>(S.L.binw), S.at<uint32_t>(S.L.hist), S.at<uint32_t>(S.L.cnt)));
        SIEVE_CUDA_LAUNCH_CHECK();
        st.rows_sampled = (uint64_t)pl.S * n_queries;
        t_sample = sieve__now_ms(); /* launch time only: the scan's sync below waits for both */

        /* the fused scan */
        sp = S.sp;
        sp.q = S.at<void>(S.L.qprep);
        sp.nq = n_queries;
        sp.thr = S.at<uint32_t>(S.L.thr);
        sp.edges = S.at<float>(S.L.edges);
        sp.binw = S.at<float>(S.L.binw);
        sp.hist = S.at<uint32_t>(S.L.hist);
        sp.cnt = S.at<uint32_t>(S.L.cnt);
        sp.tile_ctr = tile_counter(S);
        sp.tile_log = S.at<uint32_t>(S.L.tlog);
        sp.cand = S.at<uint64_t>(S.L.cand);
        sp.cap = pl.cap;
        sp.tighten = (p->flags & SIEVE_SEARCH_NO_TIGHTEN) ? 0 : 1;
        S.sp = sp; /* rescans reuse the state arrays */
        if ((rc = launch_scan<MODE_GATE>(S.c, S.s, m->dtype, sp, (uint32_t)m->n_rows,
                                          chain(CH_GATE))))
            return rc;
        st.rows_scanned += (uint64_t)m->n_rows * n_queries;
        /* certify; recover what is not certified (one sync for counts and boundaries) */
        std::vector<uint32_t> cnt(n_queries), thr2(n_queries);
        uint32_t spec_over = 0;
        if (spec) { /* select and download first, then the same sync */
            const uint32_t most = pl.cap;
            rc = launch_select_sized(S, spec, nullptr, most, metric, chain(CH_SELECT));
            if (rc) return rc;
            unsigned char *hr = (unsigned char *)S.c->pinned + spec_report_at(pl, dl);
            if (dl == Dl::DIRECT) /* the report alone; STAGED brings it with the results */
                SIEVE_CUDA_TRY(cudaMemcpyAsync(hr, S.at<unsigned char>(S.L.report),
                                               report_bytes(n_queries), cudaMemcpyDeviceToHost,
                                               S.s));
            if ((rc = download_queue(S, dl, out_rows, out_scores, out_counts, true))) return rc;
            SIEVE_CUDA_TRY(cudaStreamSynchronize(S.s));
            memcpy(cnt.data(), hr, n_queries * 4);
            memcpy(thr2.data(), hr + (size_t)n_queries * 4, n_queries * 4);
            for (uint32_t q = 0; q < n_queries; q++) spec_over += hr[(size_t)n_queries * 8 + q];
            st.select_speculated = 1;
        } else {
            SIEVE_CUDA_TRY(cudaMemcpyAsync(thr2.data(), S.at<uint32_t>(S.L.thr2), n_queries * 4,
                                           cudaMemcpyDeviceToHost, S.s));
            if ((rc = fetch_cnt(S, cnt))) return rc;
        }
        std::vector<uint32_t> rq;
        std::vector<float> rlo;
        for (uint32_t q = 0; q < n_queries; q++) {
            st.candidates_admitted += cnt[q];
            bool enough = (uint64_t)cnt[q] >= pl.k || (uint64_t)cnt[q] >= n_e;
            if (enough && cnt[q] <= pl.cap) {
                use[q] = 1;
                continue;
            }
            if (cnt[q] > pl.cap) {
                float e;
                if ((rc = overflow_edge(S, q, &e))) return rc;
                path[q] = SIEVE_PATH_OVERFLOW;
                rq.push_back(q);
                rlo.push_back(e);
            } else if (thr2[q] != NEG_INF_ORD) {
                path[q] = SIEVE_PATH_UNDERFILL;
                rq.push_back(q);
                rlo.push_back(host_float_of_ord(thr2[q]));
            } else {
                path[q] = SIEVE_PATH_FULL;
                all_full.push_back(q);
            }
        }
        if (!rq.empty()) {
            if ((rc = rescan(S, rq, rlo))) return rc;
            st.rescans += rq.size();
            st.rows_scanned += (uint64_t)m->n_rows * rq.size();
            if ((rc = fetch_cnt(S, cnt))) return rc;
            for (uint32_t q : rq) {
                bool enough = (uint64_t)cnt[q] >= pl.k || (uint64_t)cnt[q] >= n_e;
                if (enough && cnt[q] <= pl.cap) {
                    use[q] = 1;
                } else {
                    path[q] = SIEVE_PATH_FULL;
                    all_full.push_back(q);
                }
            }
        }
        if (spec) {
            selected = rq.empty() && all_full.empty() && spec_over == 0;
            st.speculation_missed = !selected;
        }
        cnt_final.swap(cnt);
    }
    double t_scan = sieve__now_ms();

    /* select: sort the certified queries' candidates, then the full-path queries */
    if (!direct && !selected) {
        unsigned char *used = S.at<unsigned char>(S.L.use);
        SIEVE_CUDA_TRY(cudaMemcpyAsync(used, use.data(), n_queries, cudaMemcpyHostToDevice, S.s));
        uint32_t most = 0, n_use = 0; /* the most candidates a used query holds */
        for (uint32_t q = 0; q < n_queries; q++)
            if (use[q]) {
                most = std::max(most, std::min(cnt_final[q], pl.cap));
                n_use++;
            }
        if (select_by_block(pl.k)) {
            uint32_t handed = 0;
            rc = select_block(S, used, most, metric, &handed);
            st.select_segmented = handed;
        } else {
            rc = select_segmented(S, used, metric);
            st.select_segmented = n_use;
        }
        if (rc) return rc;
        SIEVE_CUDA_TRY(cudaStreamSynchronize(S.s)); /* `use` must outlive the copy */
    }
    if (!all_full.empty()) {
        if ((rc = full_path(S, all_full, &st))) return rc;
    }
    double t_dl = sieve__now_ms();
    if (!selected) {
        if ((rc = download_results(S, out_rows, out_scores, out_counts))) return rc;
    } else if (dl == Dl::STAGED) { /* speculation queued the download (never PIPELINED) */
        download_unstage(S, out_rows, out_scores, out_counts);
    }
    double t_end = sieve__now_ms();

    for (uint32_t q = 0; q < n_queries; q++) st.path_count[path[q]]++;
    st.launches_chained = chained;
    st.ms_download = t_end - t_dl;
    if (out_paths) memcpy(out_paths, path.data(), n_queries);
    st.ms_sample = t_sample - t0;
    st.ms_scan = t_scan - t_sample;
    st.ms_select = t_end - t_scan;
    st.ms_total = t_end - t0;
    if (stats) *stats = st;
    return 0;
}

extern "C" int sieve__cuda_knn_materialized(void *ctx, const sieve_matrix *m,
                                            const float *queries, uint32_t n_queries,
                                            const sieve_search_params *p, int64_t *out_rows,
                                            float *out_scores, uint32_t *out_counts,
                                            sieve_search_stats *stats) {
    double t0 = sieve__now_ms();
    Search S;
    int rc = setup(S, ctx, m, n_queries, p, true);
    if (rc) return rc;
    rc = make_layout(S.pl, m->n_rows, true, &S.L);
    if (rc) return rc;
    void *buf = NULL;
    SIEVE_CUDA_TRY(cudaMalloc(&buf, S.L.total));
    S.base = (unsigned char *)buf;
    sieve_search_stats st;
    memset(&st, 0, sizeof st);
    st.queries = n_queries;
    std::vector<uint32_t> all(n_queries);
    for (uint32_t q = 0; q < n_queries; q++) all[q] = q;
    rc = upload_queries(S, queries);
    if (!rc) rc = full_path(S, all, &st);
    if (!rc) rc = download_results(S, out_rows, out_scores, out_counts);
    cudaFree(buf);
    if (rc) return rc;
    st.path_count[SIEVE_PATH_FULL] = n_queries;
    st.ms_total = sieve__now_ms() - t0;
    if (stats) *stats = st;
    return 0;
}

/* Test entry (sieve_kernels_internal.h): the sample selection of propose_kernel over `lists`
 * host lists of n keys each, `parts` blocks per list (0: as the search picks);
 * out (host, lists x 3): the keys at descending ranks 0, rj, rj2. */
extern "C" int sieve__cuda_select3(void *ctx, const float *keys, uint32_t lists, uint32_t n,
                                   uint32_t rj, uint32_t rj2, uint32_t parts, float *out) {
    sieve__cuda_ctx *c = (sieve__cuda_ctx *)ctx;
    if (!c || !keys || !out || !lists || !n || (parts & (parts - 1)) || parts > 8)
        return SIEVE_EINVAL;
    if (!parts) parts = select_parts(c, lists, n, rj > rj2 ? rj : rj2);
    const size_t kb = (size_t)lists * n * sizeof(float), ob = (size_t)lists * 3 * sizeof(float);
    float *dk = nullptr, *dout = nullptr;
    cudaError_t e = cudaMalloc(&dk, kb);
    if (e == cudaSuccess) e = cudaMalloc(&dout, ob);
    if (e == cudaSuccess) e = cudaMemcpyAsync(dk, keys, kb, cudaMemcpyHostToDevice, c->stream);
    if (e == cudaSuccess)
        e = launch_select(select3_kernel, lists, parts, n, c->stream, nullptr, (const float *)dk,
                          n, rj, rj2, dout);
    if (e == cudaSuccess) e = cudaMemcpyAsync(out, dout, ob, cudaMemcpyDeviceToHost, c->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    cudaFree(dk);
    cudaFree(dout);
    return e == cudaSuccess ? 0 : sieve__cuda_fail(e, "select3", __FILE__, __LINE__);
}

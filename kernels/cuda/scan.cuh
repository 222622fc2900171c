/* scan.cuh: the fused scoring kernels of the CUDA backend, shared by every search path.
 *
 * Owns: the one scoring main loop per element type (tensor-core mma.sync for float16 and
 * bfloat16 with float32 accumulation; an exact float32 FFMA loop for float32 storage) and
 * its three epilogues:
 *   MODE_GATE    gate each key against the query's boundary, append passing (key,row) pairs
 *                to the query's candidate buffer, count them in the bin histogram and tighten
 *                the boundary (the fused path; the score matrix is never written);
 *   MODE_SAMPLE  score a fixed-stride sample of the rows and write the sample keys;
 *   MODE_MAT     write every packed (key,row) of the row (the materialized oracle / full path).
 * Every mode runs the same main loop with the same per-element accumulation order, so a key
 * is bit-identical whichever mode, tile shape or batch position produced it.
 * Must not: allocate, synchronise the host, or know about the store.
 */
#ifndef SIEVE_CUDA_SCAN_CUH
#define SIEVE_CUDA_SCAN_CUH

#include <cuda.h> /* CUtensorMap (types only: the driver is reached through the runtime) */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "prims.cuh"
#include "wgmma.cuh"

namespace sieve_cuda {

constexpr int NBINS = 256;          /* histogram bins per query */
constexpr int MODE_GATE = 0;
constexpr int MODE_SAMPLE = 1;
constexpr int MODE_MAT = 2;
constexpr uint64_t EMPTY_SLOT = ~0ull; /* sorts after every real (key,row) */
constexpr int TLOG_CTAS = 1024;     /* TMA scan: most CTAs a launch may have */
constexpr int TLOG_RING = 16;       /* TMA scan: tiles a CTA's producer may run ahead (> STAGES) */

/* Programmatic dependent launch (sm_90): the search's main chain (query preparation, sample
 * scan, propose step, gate scan, speculative select) launches each kernel behind the one
 * before with cudaLaunchAttributeProgrammaticStreamSerialization, so it is scheduled while
 * its predecessor still runs. pdl_wait blocks until the predecessor grid has completed and
 * its writes are visible; pdl_trigger lets the successor be scheduled once every CTA of this
 * grid has triggered or exited (the successor's own pdl_wait still waits for this grid to
 * complete). Both do nothing in a grid launched without the attribute. The rule that keeps
 * the chain exact: a kernel triggers only after its own pdl_wait (so when a successor starts,
 * everything queued before its predecessor has completed), and before its pdl_wait a kernel
 * reads nothing its predecessor writes and writes nothing its predecessor reads. The
 * exceptions are kernels whose successor does nothing before its wait (query preparation,
 * the gate scan): they trigger at their start. */
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}


struct ScanParams {
    /* the stored matrix (device memory) */
    const void *const *pages;
    const float *const *norm_pages;
    const uint64_t *deleted;
    const uint64_t *allowed;
    uint32_t rpp, dim, dpad, n_rows;
    int metric;                 /* SIEVE_METRIC_* */
    /* queries: [nq_pad][dpad] of the element type (float for float32 storage), zero padded */
    const void *q;
    uint32_t nq;
    uint32_t nqt;               /* query tiles; block b covers row tile b / nqt, query tile b % nqt */
    /* MODE_SAMPLE: logical row i is physical row s_offset + i * s_stride, i < s_count */
    uint32_t s_offset, s_stride, s_count;
    float *sample_out;          /* [nq][s_count] */
    /* MODE_GATE */
    uint32_t *thr;              /* [nq] ordered-uint boundary (only rises) */
    const float *edges;         /* [nq][NBINS] lower bin edges, non-decreasing */
    const float *binw;          /* [nq] bin width w: edges[q][b] = edge_at(b, edges[q][0], w) */
    uint32_t *hist;             /* [nq][NBINS] */
    uint32_t *cnt;              /* [nq] admitted (counts past cap too) */
    uint64_t *cand;             /* [nq][cap] */
    uint32_t cap, k, tighten;
    const uint32_t *qmap;       /* MODE_GATE: state slot of launch query j (NULL = j) */
    /* MODE_MAT */
    uint64_t *mat;              /* [nq][mat_ld] */
    uint64_t mat_ld;
    uint32_t *tile_ctr;         /* TMA GATE scan: the next tile to claim (zero at launch) */
    uint32_t *tile_log;         /* TMA GATE scan: [TLOG_CTAS][TLOG_RING] tiles each CTA took */
    /* host side only (the TMA launcher's row map): sieve_matrix.page_base / page_stride */
    const void *page_base;
    uint64_t page_stride;
};

/* Lower edge of bin b of a table over [lo, lo + NBINS w): one rounding, the same wherever
 * it is computed (the tables are written with it, the scan recomputes edges with it). */
__device__ inline float edge_at(int b, float lo, float w) {
    return b == 0 ? lo : __fmaf_rn((float)b, w, lo);
}

/* Bin of key in the query's table (lower edge lo, width w): edge_at(b) <= key <
 * edge_at(b + 1) (top bin open; bin 0 also takes keys below lo). No memory reads. */
__device__ inline int bin_of(float key, float lo, float w) {
    int b = 0;
    if (w > 0.f) {
        float x = (key - lo) / w;
        b = x >= (float)(NBINS - 1) ? NBINS - 1 : (x > 0.f ? (int)x : 0);
    }
    while (b > 0 && key < edge_at(b, lo, w)) b--;
    while (b < NBINS - 1 && key >= edge_at(b + 1, lo, w)) b++;
    return b;
}

/* Raises the query's boundary to the highest lower edge whose admitted count (a lower
 * bound, read while other threads still add) already reaches k. The bins are read 16 at a
 * time (independent loads) so a call costs at most 16 L2 round trips, not 256. */
__device__ inline void tighten_boundary(const ScanParams &p, uint32_t q) {
    const uint32_t *h = p.hist + (size_t)q * NBINS;
    const float *e = p.edges + (size_t)q * NBINS;
    uint32_t cum = 0;
    for (int b0 = NBINS - 16; b0 >= 0; b0 -= 16) {
        uint32_t v[16];
#pragma unroll
        for (int i = 0; i < 16; i++) v[i] = __ldcg(h + b0 + i);
#pragma unroll
        for (int i = 15; i >= 0; i--) {
            cum += v[i];
            if (cum >= p.k) {
                atomicMax(p.thr + q, ord_of(e[b0 + i]));
                return;
            }
        }
    }
}

/* tighten_boundary by a whole warp (all 32 lanes call it with the same q): lane l reads the
 * 8 bins NBINS - 8 (l + 1) .. NBINS - 8 l - 1 at once, a warp prefix sum from the top finds
 * the lane whose bins reach k, and that lane finds the bin, so a call costs one L2 round
 * trip for the counts (and one for the edge) instead of up to NBINS / 16. Same boundary as
 * tighten_boundary on the same counts. */
static_assert(NBINS == 32 * 8, "tighten_warp: 8 bins a lane");
__device__ inline void tighten_warp(const ScanParams &p, uint32_t q) {
    const uint32_t lane = threadIdx.x % 32;
    const uint32_t *h = p.hist + (size_t)q * NBINS;
    const int b0 = NBINS - 8 * (int)(lane + 1);
    uint32_t v[8], sum = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = __ldcg(h + b0 + i);
#pragma unroll
    for (int i = 0; i < 8; i++) sum += v[i];
    uint32_t inc = sum; /* bins from the top through this lane's */
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const uint32_t t = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= (uint32_t)o) inc += t;
    }
    const uint32_t hit = __ballot_sync(0xffffffffu, inc >= p.k);
    if (hit && lane == (uint32_t)(__ffs(hit) - 1)) {
        uint32_t cum = inc - sum;
#pragma unroll
        for (int i = 7; i >= 0; i--) {
            cum += v[i];
            if (cum >= p.k) {
                atomicMax(p.thr + q, ord_of(p.edges[(size_t)q * NBINS + b0 + i]));
                break;
            }
        }
    }
}

__device__ inline uint32_t slot_of(const ScanParams &p, uint32_t q) {
    return p.qmap ? p.qmap[q] : q;
}

/* Whether a query's n-th admission (n from 1) calls for a tightening of its boundary: at
 * n = k, 2k, 4k, ... below max(k, 256), then at every multiple of max(k, 256). A tightening
 * reads counts other threads are still adding (entries reserved, not yet counted) and may
 * find fewer than k; below the step it tries again at the next doubling (at k = 10 the
 * step alone came only after 256 admissions). */
__device__ inline bool tighten_due(const ScanParams &p, uint32_t n) {
    if (!p.tighten || n < p.k) return false;
    const uint32_t step = p.k > 256 ? p.k : 256;
    if (n < step) return n % p.k == 0 && ((n / p.k) & (n / p.k - 1)) == 0;
    return n % step == 0;
}

/* tighten_due for the sites that tighten by the whole warp (one read of the bins, not up to
 * 16): tighten_due's schedule and also every s admissions after k, s = k / 4 rounded down
 * to a power of two, at least 64. With the boundary raised only at k and 2k, a query at
 * k >= 256 admitted about as many rows as lay above its first boundary (the first
 * tightening, at k counted, can hardly raise it); raised every k / 4 or so it follows the
 * k-th best seen so far. */
__device__ inline bool tighten_due_warp(const ScanParams &p, uint32_t n) {
    if (!p.tighten || n < p.k) return false;
    const uint32_t q4 = p.k >> 2;
    const uint32_t step = q4 > 64u ? 1u << (31 - __clz(q4)) : 64u;
    return ((n - p.k) & (step - 1u)) == 0 || tighten_due(p, n);
}

/* Appends one admitted key of state slot q: candidate and histogram. Returns the query's
 * admission count with it (n, from 1), for the caller's tightening schedule. */
__device__ inline uint32_t admit_count(const ScanParams &p, uint32_t row, uint32_t q, float key) {
    uint32_t pos = atomicAdd(p.cnt + q, 1u);
    if (pos < p.cap) p.cand[(size_t)q * p.cap + pos] = pack_cand(key, row);
    atomicAdd(p.hist + (size_t)q * NBINS + bin_of(key, p.edges[(size_t)q * NBINS], p.binw[q]), 1u);
    return pos + 1;
}

/* Appends one admitted key of state slot q: candidate, histogram, maybe tighten (by the
 * calling lane alone, so on tighten_due's sparser schedule). */
__device__ inline void admit_slot(const ScanParams &p, uint32_t row, uint32_t q, float key) {
    if (tighten_due(p, admit_count(p, row, q, key))) tighten_boundary(p, q);
}

/* Admits one key that passed the gate (launch query q). Out of line: the unrolled
 * epilogues call it from many sites, and inlining it at each one made the scan kernels
 * large enough to miss in the instruction cache (measured with Nsight Compute). */
__device__ __noinline__ void admit(const ScanParams &p, uint32_t row, uint32_t q, float key) {
    q = slot_of(p, q);
    /* once a query overflowed its buffer, further admissions only cost atomics: the
       host recovers it anyway, from a histogram that stays a valid lower bound */
    if (__ldcg(p.cnt + q) > p.cap) return;
    admit_slot(p, row, q, key);
}

template <int MODE>
__device__ inline void emit(const ScanParams &p, uint32_t li, uint32_t row, uint32_t q,
                            float dot, float norm, bool elig, float thr) {
    float key = p.metric == 2 ? 2.0f * dot - norm : dot;
    if (MODE == MODE_SAMPLE) {
        p.sample_out[(size_t)q * p.s_count + li] = elig ? key : -__int_as_float(0x7f800000);
    } else if (MODE == MODE_MAT) {
        p.mat[(size_t)q * p.mat_ld + row] = elig ? pack_cand(key, row) : EMPTY_SLOT;
    } else {
        if (!elig || !(key >= thr)) return;
        admit(p, row, q, key);
    }
}

/* ------------------------------------------------------------------ shared CTA prologue */

/* Per-CTA row table: pointer, eligibility and norm of each of the BM logical rows. */
template <typename T, int BM, int MODE>
__device__ inline void load_rows(const ScanParams &p, uint32_t row0, const T **rowptr,
                                 uint32_t *rowid, unsigned char *elig, float *norm) {
    const uint32_t L = MODE == MODE_SAMPLE ? p.s_count : p.n_rows;
    for (int i = threadIdx.x; i < BM; i += blockDim.x) {
        uint32_t li = row0 + i;
        const T *ptr = nullptr;
        uint32_t r = 0;
        bool e = false;
        float nv = 0.f;
        if (li < L) {
            r = MODE == MODE_SAMPLE ? p.s_offset + li * p.s_stride : li;
            ptr = (const T *)p.pages[r / p.rpp] + (size_t)(r % p.rpp) * p.dim;
            e = true;
            if (p.deleted && ((p.deleted[r >> 6] >> (r & 63)) & 1ull)) e = false;
            if (p.allowed && !((p.allowed[r >> 6] >> (r & 63)) & 1ull)) e = false;
            if (p.metric == 2) nv = p.norm_pages[r / p.rpp][r % p.rpp];
        }
        rowptr[i] = ptr;
        rowid[i] = r;
        elig[i] = e;
        norm[i] = nv;
    }
}

/* A CTA's row table (load_rows) and the gate's float boundary of each of its BN queries,
 * declared __shared__ by the scans that emit keys per element: load fills it (the caller
 * syncs before reading), emit_key hands logical row rl's key for query q0 + ql to emit. */
template <typename T, int BM, int BN>
struct CtaRows {
    const T *ptr[BM];
    uint32_t id[BM];
    unsigned char elig[BM];
    float norm[BM];
    float thr[BN];

    template <int MODE>
    __device__ void load(const ScanParams &p, uint32_t row0, uint32_t q0) {
        load_rows<T, BM, MODE>(p, row0, ptr, id, elig, norm);
        if (MODE == MODE_GATE)
            for (int i = threadIdx.x; i < BN; i += blockDim.x)
                thr[i] = q0 + i < p.nq ? float_of_ord(__ldcg(p.thr + slot_of(p, q0 + i))) : 0.f;
    }
    template <int MODE>
    __device__ void emit_key(const ScanParams &p, uint32_t row0, uint32_t q0, int rl, int ql,
                             float dot) const {
        emit<MODE>(p, row0 + rl, id[rl], q0 + ql, dot, norm[rl], elig[rl],
                   MODE == MODE_GATE ? thr[ql] : 0.f);
    }
};


/* ------------------------------------------------------------------ tensor-core main loop */

template <typename T> struct MmaOp;
template <> struct MmaOp<__half> {
    __device__ static inline void run(float *c, const uint32_t *a, const uint32_t *b) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
            "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
};
template <> struct MmaOp<__nv_bfloat16> {
    __device__ static inline void run(float *c, const uint32_t *a, const uint32_t *b) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
            "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
};

__device__ inline void ldmatrix_x4(uint32_t *r, const void *smem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

template <int BM, int BN, int STAGES>
struct MmaSmem {
    static constexpr int KC = 64;        /* elements per K chunk */
    static constexpr int LDS = KC + 8;   /* padded smem row: conflict-free ldmatrix */
    static constexpr size_t bytes = (size_t)STAGES * (BM + BN) * LDS * 2;
};

/* CTA: BM logical rows x BN queries; warps WM x WN; each warp (BM/WM) x (BN/WN).
 * VEC: rows are 16-byte aligned and dim % 8 == 0 (cp.async); else element-wise loads. */
template <typename T, int BM, int BN, int WM, int WN, int STAGES, int MODE, bool VEC>
__global__ void __launch_bounds__(WM *WN * 32)
scan_mma_kernel(ScanParams p) {
    using S = MmaSmem<BM, BN, STAGES>;
    constexpr int KC = S::KC, LDS = S::LDS, NT = WM * WN * 32;
    constexpr int WTM = BM / WM, WTN = BN / WN;
    constexpr int MT = WTM / 16, NTL = WTN / 8;
    static_assert(WTM % 16 == 0 && WTN % 16 == 0, "warp tile must be a multiple of 16");

    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *As = (T *)smem_raw;
    T *Bs = As + (size_t)STAGES * BM * LDS;
    __shared__ CtaRows<T, BM, BN> cr;

    const uint32_t row0 = (blockIdx.x / p.nqt) * BM;
    const uint32_t q0 = (blockIdx.x % p.nqt) * BN;
    const T *qbase = (const T *)p.q + (size_t)q0 * p.dpad;
    cr.template load<MODE>(p, row0, q0);
    __syncthreads();

    const int KT = p.dpad / KC;
    auto load_stage = [&](int st, int kt) {
        const int k0 = kt * KC;
        T *as = As + (size_t)st * BM * LDS;
        T *bs = Bs + (size_t)st * BN * LDS;
        if (VEC) {
            for (int i = threadIdx.x; i < BM * (KC / 8); i += NT) {
                int r = i / (KC / 8), c = (i % (KC / 8)) * 8;
                const T *src = cr.ptr[r];
                bool ok = src && (k0 + c < (int)p.dim);
                cp_async16(as + r * LDS + c, ok ? (const void *)(src + k0 + c) : p.q, ok ? 16 : 0);
            }
        } else {
            for (int i = threadIdx.x; i < BM * KC; i += NT) {
                int r = i / KC, c = i % KC;
                const T *src = cr.ptr[r];
                T v = (src && k0 + c < (int)p.dim) ? src[k0 + c] : T(0.f);
                as[r * LDS + c] = v;
            }
        }
        for (int i = threadIdx.x; i < BN * (KC / 8); i += NT) {
            int r = i / (KC / 8), c = (i % (KC / 8)) * 8;
            cp_async16(bs + r * LDS + c, qbase + (size_t)r * p.dpad + k0 + c, 16);
        }
    };

    float acc[MT][NTL][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NTL; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm0 = (warp / WN) * WTM, wn0 = (warp % WN) * WTN;

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < KT) load_stage(s, s);
        cp_async_commit();
    }
    for (int kt = 0; kt < KT; kt++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        int nk = kt + STAGES - 1;
        if (nk < KT) load_stage(nk % STAGES, nk);
        cp_async_commit();
        const T *as = As + (size_t)(kt % STAGES) * BM * LDS;
        const T *bs = Bs + (size_t)(kt % STAGES) * BN * LDS;
#pragma unroll
        for (int kk = 0; kk < KC; kk += 16) {
            uint32_t af[MT][4], bf[NTL][2];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
                ldmatrix_x4(af[mt], as + (wm0 + mt * 16 + (lane % 16)) * LDS + kk + (lane / 16) * 8);
#pragma unroll
            for (int np = 0; np < NTL / 2; np++) {
                uint32_t r4[4];
                ldmatrix_x4(r4, bs + (wn0 + np * 16 + (lane % 8) + (lane / 16) * 8) * LDS + kk +
                                    ((lane / 8) % 2) * 8);
                bf[2 * np][0] = r4[0];
                bf[2 * np][1] = r4[1];
                bf[2 * np + 1][0] = r4[2];
                bf[2 * np + 1][1] = r4[3];
            }
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int nt = 0; nt < NTL; nt++) MmaOp<T>::run(acc[mt][nt], af[mt], bf[nt]);
        }
    }
    cp_async_wait<0>();

    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NTL; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int rl = wm0 + mt * 16 + g + (e / 2) * 8;
                int ql = wn0 + nt * 8 + 2 * t + (e % 2);
                if (!cr.ptr[rl] || q0 + ql >= p.nq) continue;
                cr.template emit_key<MODE>(p, row0, q0, rl, ql, acc[mt][nt][e]);
            }
}

/* ------------------------------------------------------------------ Hopper wgmma main loop */


/* Admissions staged per tile in shared memory (GATE mode of the wgmma kernel), so no
 * epilogue waits on a global atomic. Tile i's epilogue appends its passing keys to buffer
 * i % 3 (one entry per thread at most: STAGE_CAP = the CTA's 256 threads; past that a tile
 * admits directly). At tile i + 1's start, thread t issues the count atomic for entry t of
 * that buffer (stage_reserve) and goes on without waiting for the slot it returns; at tile
 * i + 2's start, the slot has long arrived and the thread writes the candidate, counts the
 * histogram bin and checks for tightening (stage_finish). Both run before the tile's first
 * wgmma, where no wgmma is in flight. The histogram trails the counts by at most a tile,
 * so a tightening reads a lower bound, as it always does. */
constexpr int STAGE_CAP = 256;
constexpr int STAGE_BUFS = 3;

template <int CAP> /* STAGE_CAP where staging is on, 1 (unused) elsewhere */
struct StageBuf {
    uint32_t n[STAGE_BUFS];        /* entries staged in each buffer (may exceed CAP) */
    float key[STAGE_BUFS][CAP];
    uint32_t row[STAGE_BUFS][CAP]; /* physical row */
    uint32_t q[STAGE_BUFS][CAP];   /* launch query */
};

/* What a thread carries from stage_reserve to stage_finish (values not waited for). */
struct StagePending {
    uint32_t pos; /* the reserved slot; ~0u: no entry */
    float lo, w;  /* the query's bin table */
};

/* Entry threadIdx.x of buffer b, if staged: issues its count atomic and the reads of its
 * query's bin table, without waiting for any of them. */
template <int CAP>
__device__ inline StagePending stage_reserve(const ScanParams &p, const StageBuf<CAP> &sb, int b) {
    const uint32_t n = sb.n[b] < (uint32_t)CAP ? sb.n[b] : (uint32_t)CAP;
    StagePending r = {~0u, 0.f, 0.f};
    if (threadIdx.x < n) {
        const uint32_t q = slot_of(p, sb.q[b][threadIdx.x]);
        r.pos = atomicAdd(p.cnt + q, 1u);
        r.lo = __ldcg(p.edges + (size_t)q * NBINS);
        r.w = __ldcg(p.binw + q);
    }
    return r;
}

/* Completes entry threadIdx.x of buffer b as reserved in r. */
template <int CAP>
__device__ __noinline__ void stage_finish(const ScanParams &p, const StageBuf<CAP> &sb, int b,
                                          StagePending r) {
    if (r.pos == ~0u) return;
    const uint32_t pos = r.pos;
    const uint32_t q = slot_of(p, sb.q[b][threadIdx.x]);
    const float key = sb.key[b][threadIdx.x];
    if (pos < p.cap) p.cand[(size_t)q * p.cap + pos] = pack_cand(key, sb.row[b][threadIdx.x]);
    atomicAdd(p.hist + (size_t)q * NBINS + bin_of(key, r.lo, r.w), 1u);
    if (tighten_due(p, pos + 1)) tighten_boundary(p, q);
}

/* Stages one admission in buffer b, or admits it directly when the buffer is full. Out of
 * line for the same reason as admit(): it is called from every unrolled accumulator site. */
template <int CAP>
__device__ __noinline__ void stage_admit(const ScanParams &p, StageBuf<CAP> &sb, int b,
                                         uint32_t row, uint32_t q, float key) {
    const uint32_t s = atomicAdd(&sb.n[b], 1u);
    if (s < (uint32_t)CAP) {
        sb.key[b][s] = key;
        sb.row[b][s] = row;
        sb.q[b][s] = q;
    } else {
        admit(p, row, q, key);
    }
}

template <int BQ, int BR, int STAGES>
struct WgSmem {
    static constexpr int KC = 64; /* elements per K chunk: one 128-byte swizzle row */
    static constexpr size_t stage_bytes = (size_t)(BQ + BR) * KC * 2;
    static constexpr size_t bytes = STAGES * stage_bytes + 1024; /* + alignment slack */
    /* two CTAs per SM when their shared memory fits (then at most 128 registers a thread) */
    static constexpr int min_blocks = bytes <= 110 * 1024 ? 2 : 1;
};

/* Persistent CTAs over tiles of BQ queries (64 or 128) x BR rows, two warpgroups each.
 * With BQ = 128 each warpgroup owns 64 queries and all BR rows (wgmma N = BR); with BQ = 64
 * both own the 64 queries and half the rows each (N = BR / 2). Queries are the wgmma A
 * operand (M = 64), rows the B operand, both K-major in 128-byte-swizzled shared memory.
 *
 * Pipeline: the CTA walks its tiles (t = blockIdx.x + i * gridDim.x; consecutive t share a
 * row tile, so the query tiles of one row tile run at the same time and the rows come from
 * L2 after the first read) as one flat sequence of 64-wide K chunks. cp.async keeps
 * STAGES - 2 chunks in flight, across tile boundaries, so the next tile's rows load while
 * this tile finishes and runs its epilogue; one wgmma group stays in flight. Each thread
 * loads fixed rows and one 16-byte column of every chunk and caches its row pointers per
 * tile. The row table the epilogue needs (row id, eligibility, norm) is built while the
 * tile's first chunk computes.
 *
 * Per element, the float32 accumulation runs over K in 16-wide steps in index order, in
 * every mode and tile shape (the GPU tests check that keys are bit-identical across
 * variants). Rows must be 16-byte aligned with dim % 8 == 0 (the launcher checks). */
template <typename T, int BQ, int BR, int STAGES, int MODE, bool STAGED>
__global__ void __launch_bounds__(256, (WgSmem<BQ, BR, STAGES>::min_blocks))
scan_wgmma_kernel(ScanParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    /* as the chain's sample scan (see pdl_wait): the prepared queries first, then the
       propose step may be scheduled */
    pdl_wait();
    pdl_trigger();
    using S = WgSmem<BQ, BR, STAGES>;
    constexpr int KC = S::KC;
    constexpr int WN = BQ == 128 ? BR : BR / 2; /* wgmma N */
    constexpr int NACC = WN / 2;
    constexpr int RJ = BR / 32, QJ = BQ / 32; /* rows, queries each thread loads per chunk */
    static_assert(BQ == 64 || BQ == 128, "query tile");
    static_assert(STAGES >= 3, "pipeline depth");
    /* chunks loading ahead of the one computed (one wgmma group stays in flight, reading
       the slot before). Waiting for each chunk's wgmma to load one more ahead was measured
       slower (bench/KERNEL_NOTES.md, v8). */
    constexpr int AHEAD = STAGES - 2;

    extern __shared__ unsigned char smem_raw[];
    uint32_t sbase = (uint32_t)__cvta_generic_to_shared(smem_raw);
    unsigned char *sm = smem_raw + ((1024u - (sbase & 1023u)) & 1023u);
    T *Qs = (T *)sm;                                  /* [STAGES][BQ][64] */
    T *Rs = (T *)(sm + (size_t)STAGES * BQ * KC * 2); /* [STAGES][BR][64] */
    __shared__ const T *rowptr[BR];
    __shared__ uint32_t rowid[BR];
    __shared__ unsigned char elig[BR];
    __shared__ float rnorm[BR];
    constexpr bool STG = STAGED && MODE == MODE_GATE;
    __shared__ StageBuf<STG ? STAGE_CAP : 1> sb;

    const uint32_t L = MODE == MODE_SAMPLE ? p.s_count : p.n_rows;
    const uint32_t nrt = (L + BR - 1) / BR;
    const uint64_t ntiles = (uint64_t)nrt * p.nqt;
    if (blockIdx.x >= ntiles) return;
    const uint32_t my_tiles = (uint32_t)((ntiles - 1 - blockIdx.x) / gridDim.x + 1);
    const int KT = p.dpad / KC;
    const uint32_t total = my_tiles * (uint32_t)KT;
    static_assert(!STG || STAGE_CAP == 256, "one staged entry per thread");
    if (STG && threadIdx.x == 0) /* ordered by the first barrier */
        for (int b = 0; b < STAGE_BUFS; b++) sb.n[b] = 0;
    StagePending st_pend = {~0u, 0.f, 0.f}; /* STG: this thread's entry of buffer st_buf */
    int st_buf = 0;

    /* ---- loads: the cursor runs AHEAD chunks ahead */
    const int lc = threadIdx.x & 7; /* this thread's 16-byte column */
    const int lr = threadIdx.x >> 3; /* and first row (then every 32nd) */
    const T *rptr[RJ];
    const T *qptr[QJ];
    auto enter_tile = [&](uint32_t i) {
        const uint64_t t = blockIdx.x + (uint64_t)i * gridDim.x;
        const uint32_t row0 = (uint32_t)(t / p.nqt) * BR;
        const uint32_t q0 = (uint32_t)(t % p.nqt) * BQ;
#pragma unroll
        for (int j = 0; j < RJ; j++) {
            uint32_t li = row0 + lr + 32 * j;
            const T *ptr = nullptr;
            if (li < L) {
                uint32_t r = MODE == MODE_SAMPLE ? p.s_offset + li * p.s_stride : li;
                ptr = (const T *)p.pages[r / p.rpp] + (size_t)(r % p.rpp) * p.dim;
            }
            rptr[j] = ptr;
        }
        /* query rows past the batch are not loaded: their accumulators are never read
           (the epilogue skips q0 + ql >= nq), so their shared-memory rows may hold anything */
#pragma unroll
        for (int j = 0; j < QJ; j++)
            qptr[j] = q0 + lr + 32 * j < p.nq ? (const T *)p.q + (size_t)(q0 + lr + 32 * j) * p.dpad
                                              : nullptr;
    };
    auto load_chunk = [&](uint32_t c) {
        const int kt = (int)(c % (uint32_t)KT);
        if (kt == 0) enter_tile(c / (uint32_t)KT);
        const int st = (int)(c % STAGES);
        const int k0 = kt * KC + lc * 8;
        T *qs = Qs + (size_t)st * BQ * KC;
        T *rs = Rs + (size_t)st * BR * KC;
        const bool kin = k0 < (int)p.dim;
#pragma unroll
        for (int j = 0; j < RJ; j++) {
            int r = lr + 32 * j;
            bool ok = rptr[j] && kin;
            cp_async16(rs + r * KC + ((lc ^ (r & 7)) << 3), ok ? (const void *)(rptr[j] + k0) : p.q,
                       ok ? 16 : 0);
        }
#pragma unroll
        for (int j = 0; j < QJ; j++) {
            int r = lr + 32 * j;
            if (qptr[j]) cp_async16(qs + r * KC + ((lc ^ (r & 7)) << 3), qptr[j] + k0, 16);
        }
    };

    const int wg = threadIdx.x / 128;
    const int qo = BQ == 128 ? wg * 64 : 0;      /* this warpgroup's first query */
    const int ro = BQ == 128 ? 0 : wg * (BR / 2); /* and first row */
    const int lane = threadIdx.x % 32, wq = (threadIdx.x % 128) / 32;
    const int g = lane / 4, tq = lane % 4;

    float acc[NACC];
#pragma unroll
    for (int i = 0; i < NACC; i++) acc[i] = 0.f;

#pragma unroll
    for (int s = 0; s < AHEAD; s++) {
        if ((uint32_t)s < total) load_chunk((uint32_t)s);
        cp_async_commit();
    }
    for (uint32_t i = 0; i < my_tiles; i++) {
        const uint64_t t = blockIdx.x + (uint64_t)i * gridDim.x;
        const uint32_t row0 = (uint32_t)(t / p.nqt) * BR;
        const uint32_t q0 = (uint32_t)(t % p.nqt) * BQ;
        float thr_h[2] = {0.f, 0.f}; /* GATE: this thread's two boundaries, read early */
        for (int kt = 0; kt < KT; kt++) {
            const uint32_t c = i * (uint32_t)KT + (uint32_t)kt;
            /* chunk c landed (at most AHEAD - 1 younger groups pending), visible to wgmma */
            cp_async_wait<AHEAD - 1>();
            fence_proxy_async_smem();
            __syncthreads();
            /* the slot of chunk c + AHEAD - STAGES is free: every warpgroup waited for the
               wgmma group that read it */
            if (c + AHEAD < total) load_chunk(c + AHEAD);
            cp_async_commit();
            if (MODE == MODE_GATE && kt == 0) {
                /* before the tile's first wgmma (no wgmma in flight, so the out-of-line
                   call costs no accumulator traffic), while this tile's next chunks load:
                   the staged admissions of the previous two tiles (their entries were
                   written before the barrier above; buffer counts are reset in epilogues) */
                if (STG) {
                    stage_finish(p, sb, st_buf, st_pend); /* tile i - 2's */
                    st_pend.pos = ~0u;
                    if (i > 0) {
                        st_buf = (int)((i - 1) % STAGE_BUFS);
                        st_pend = stage_reserve(p, sb, st_buf); /* tile i - 1's */
                    }
                }
                /* the boundaries the epilogue gates against: a boundary only rises, so an
                   early (lower) value admits a superset and stays exact */
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const uint32_t qq = q0 + qo + wq * 16 + g + 8 * h;
                    if (qq < p.nq) thr_h[h] = float_of_ord(__ldcg(p.thr + slot_of(p, qq)));
                }
            }
            const T *qs = Qs + (size_t)(c % STAGES) * BQ * KC + (size_t)qo * KC;
            const T *rs = Rs + (size_t)(c % STAGES) * BR * KC + (size_t)ro * KC;
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < KC; kk += 16)
                WgmmaOp<T, WN>::run(acc, sw128_desc(qs + kk), sw128_desc(rs + kk), kt > 0 || kk > 0);
            wgmma_commit();
            if (kt == 0) /* the epilogue's row table, while the tensor cores work */
                load_rows<T, BR, MODE>(p, row0, rowptr, rowid, elig, rnorm);
            wgmma_wait<1>();
        }
        wgmma_wait<0>();
        __syncthreads(); /* the row table is complete; the previous flush is done */
        /* tile i - 2's buffer is finished (before this barrier): tile i + 1 refills it */
        if (STG && threadIdx.x == 0 && i > 1) sb.n[(i - 2) % STAGE_BUFS] = 0;

        /* accumulator 4n + 2h + j: query qo + 16 wq + g + 8h, row ro + 8n + 2 tq + j */
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int ql = qo + wq * 16 + g + 8 * h;
            if (q0 + ql >= p.nq) continue;
            const float thr = thr_h[h];
#pragma unroll
            for (int n = 0; n < WN / 8; n++)
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    const int rl = ro + n * 8 + 2 * tq + j;
                    /* + 0: a tile's first wgmma does not add the old accumulator
                       (D = A*B), so an all-zero product sum may be -0 where the mma.sync
                       loop (0 + sum) gives +0; this keeps the keys identical */
                    const float dot = acc[n * 4 + h * 2 + j] + 0.0f;
                    if (MODE == MODE_GATE) {
                        /* most keys fail the gate: test before touching the row table */
                        float key = p.metric == 2 ? 2.0f * dot - rnorm[rl] : dot;
                        if (!(key >= thr)) continue;
                        if (STG) {
                            if (rowptr[rl] && elig[rl])
                                stage_admit(p, sb, (int)(i % STAGE_BUFS), rowid[rl], q0 + ql,
                                            key);
                            continue;
                        }
                    }
                    if (!rowptr[rl]) continue;
                    emit<MODE>(p, row0 + rl, rowid[rl], q0 + ql, dot, rnorm[rl], elig[rl], thr);
                }
        }
    }
    if (STG) { /* the last two tiles' staged admissions */
        stage_finish(p, sb, st_buf, st_pend);
        __syncthreads(); /* the last epilogue's entries */
        const int b = (int)((my_tiles - 1) % STAGE_BUFS);
        stage_finish(p, sb, b, stage_reserve(p, sb, b));
    }
    cp_async_wait<0>();
#else
    (void)p;
    __trap();
#endif
}

/* ------------------------------------------------------------------ TMA-fed, warp-specialised gate scan */

/* Tensor-memory-access (TMA) loads, sm_90 (the mbarriers: prims.cuh). */
__device__ inline void tma_load_2d(void *dst, const CUtensorMap *map, int c0, int c1,
                                   uint64_t *bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(smem_u32(dst)),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(smem_u32(bar))
                 : "memory");
}
__device__ inline void tma_load_3d(void *dst, const CUtensorMap *map, int c0, int c1, int c2,
                                   uint64_t *bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(smem_u32(dst)),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar))
                 : "memory");
}

/* Shared memory of scan_tma_kernel: STAGES slots of (query chunk, row chunk). */
template <int BQ, int BR, int STAGES>
struct TmaSmem {
    static constexpr int KC = 64;
    static constexpr uint32_t q_bytes = BQ * KC * 2;
    static constexpr uint32_t r_bytes = BR * KC * 2;
    static constexpr uint32_t stage_bytes = q_bytes + r_bytes;
    static constexpr size_t bytes = (size_t)STAGES * stage_bytes + 1024; /* + alignment slack */
};

/* Whether row li exists and is eligible (the TMA scan reads past the last row as zeros and
 * has no row table). */
__device__ inline bool row_admissible(const ScanParams &p, uint32_t li) {
    if (li >= p.n_rows) return false;
    if (p.deleted && ((p.deleted[li >> 6] >> (li & 63)) & 1ull)) return false;
    if (p.allowed && !((p.allowed[li >> 6] >> (li & 63)) & 1ull)) return false;
    return true;
}

/* Admits a key of row li (launch query q) that passed the gate, if the row is admissible
 * (as admit()), and returns whether a tightening of the query's boundary is due: the TMA
 * epilogue collects them and runs them after the tile by the whole warp (tighten_pending),
 * where the lane form (tighten_boundary, up to 16 dependent reads) kept the lane's warp
 * waiting at each. */
__device__ __noinline__ bool admit_row(const ScanParams &p, uint32_t li, uint32_t q, float key) {
    if (!row_admissible(p, li)) return false;
    q = slot_of(p, q);
    if (__ldcg(p.cnt + q) > p.cap) return false; /* as admit() */
    return tighten_due_warp(p, admit_count(p, li, q, key));
}

/* Runs the tightenings the warp's lanes collected in pend (bit j: launch query q0 + j), one
 * query at a time, by the whole warp (all 32 lanes call it). */
__device__ __forceinline__ void tighten_pending(const ScanParams &p, uint64_t pend, uint32_t q0) {
    const uint32_t lo = __reduce_or_sync(~0u, (uint32_t)pend);
    const uint32_t hi = __reduce_or_sync(~0u, (uint32_t)(pend >> 32));
    for (uint32_t m = lo; m; m &= m - 1) tighten_warp(p, slot_of(p, q0 + __ffs(m) - 1));
    for (uint32_t m = hi; m; m &= m - 1) tighten_warp(p, slot_of(p, q0 + 31 + __ffs(m)));
}

/* Per-warp staging of the TMA scan's admissions (the "s" variants). Measured on the H200
 * (5M rows, B = 1024, k = 8192, Nsight Compute source counters): with an admission call per
 * passing key, about half the scan's warp samples sat in the epilogue's per-key sites (each
 * site a divergent call whose checks load from the parameters and wait), a fifth on the
 * barrier that kept both consumer warpgroups in step, a quarter waiting for instructions.
 * Here a site where any lane passes appends all of the warp's passing keys at once to the
 * warp's own buffer in shared memory (a ballot, no atomics, no calls, no loads); in the next
 * tile, between its last wgmma and its epilogue, the warp's lanes take one entry each, check
 * the row (exists, not deleted, allowed), issue the count atomic and the reads of the
 * query's bin table without waiting (wst_reserve); a tile later they write the candidate,
 * count the histogram bin and check for tightening (wst_finish). No barrier between warps:
 * each warp drains its own buffer. A warp whose buffer passes WST_FLUSH entries within a
 * tile admits them directly (wst_flush), so a buffer never overflows. The buffers live in
 * the kernel's shared array wst, [tile parity][warp][WST_CAP]; an entry is key bits << 32 |
 * query in tile << 16 | row in tile. */
constexpr int WST_CAP = 64;               /* entries of one warp's buffer */
constexpr int WST_FLUSH = WST_CAP - 32;   /* more than this after a site: admit them now */
constexpr int WST_WARPS = 8;              /* consumer warps of the TMA scan */

/* One reserved entry, carried in registers from wst_reserve to wst_finish. */
struct WstPending {
    uint32_t pos; /* the count slot; ~0u: no entry */
    uint32_t q;   /* state slot of the query */
    uint32_t li;  /* row */
    float key, lo, w;
};

/* Lane's entry of a warp buffer of n entries (n <= 32) of the tile at (row0, q0). */
__device__ inline WstPending wst_reserve(const ScanParams &p, const uint64_t *buf, uint32_t n,
                                         uint32_t row0, uint32_t q0, uint32_t lane) {
    WstPending r = {~0u, 0u, 0u, 0.f, 0.f, 0.f};
    if (lane < n) {
        const uint64_t e = buf[lane];
        const uint32_t li = row0 + (uint32_t)(e & 0xffffu);
        if (row_admissible(p, li)) {
            r.q = slot_of(p, q0 + ((uint32_t)e >> 16));
            r.li = li;
            r.key = __uint_as_float((uint32_t)(e >> 32));
            r.pos = atomicAdd(p.cnt + r.q, 1u);
            r.lo = __ldcg(p.edges + (size_t)r.q * NBINS);
            r.w = __ldcg(p.binw + r.q);
        }
    }
    return r;
}

/* Called by all 32 lanes of a warp together; the tightenings the entries call for run
 * afterwards, one query at a time, by the whole warp (tighten_warp). */
__device__ __forceinline__ void wst_finish_inl(const ScanParams &p, WstPending r) {
    bool tighten = false;
    if (r.pos != ~0u) {
        if (r.pos < p.cap) p.cand[(size_t)r.q * p.cap + r.pos] = pack_cand(r.key, r.li);
        atomicAdd(p.hist + (size_t)r.q * NBINS + bin_of(r.key, r.lo, r.w), 1u);
        tighten = tighten_due_warp(p, r.pos + 1);
    }
    for (uint32_t m = __ballot_sync(0xffffffffu, tighten); m; m &= m - 1)
        tighten_warp(p, __shfl_sync(0xffffffffu, r.q, __ffs(m) - 1));
}
__device__ __noinline__ void wst_finish(const ScanParams &p, WstPending r) { wst_finish_inl(p, r); }

/* Admits the n entries of a warp buffer at once (called by the whole warp). */
__device__ __noinline__ void wst_flush(const ScanParams &p, const uint64_t *buf, uint32_t n,
                                       uint32_t row0, uint32_t q0) {
    for (uint32_t j = threadIdx.x % 32; j < n; j += 32) {
        const uint64_t e = buf[j];
        const uint32_t li = row0 + (uint32_t)(e & 0xffffu);
        if (row_admissible(p, li))
            admit(p, li, q0 + ((uint32_t)e >> 16), __uint_as_float((uint32_t)(e >> 32)));
    }
}

/* The staged sites of one group of 8 keys of a thread's query row (see tma_epilogue): key
 * s lies at row rbase + 8 (s / 2) + s % 2 of the tile, query ql. Out of line: inlined, the
 * 128-query tile's epilogue unrolled 128 such sites per query row and form (dot, Euclid),
 * and its kernel's code grew to 319 KB against 105 KB without staging. Called by the whole
 * warp; returns the warp buffer's new count. */
struct WstGroup {
    float key[8];
};

__device__ __noinline__ uint32_t wst_group(const ScanParams &p, WstGroup k, bool valid,
                                           float thr, int ql, int rbase, uint64_t *wbuf,
                                           uint32_t wcnt, uint32_t row0, uint32_t q0) {
    const uint32_t lane = threadIdx.x % 32;
#pragma unroll
    for (int s = 0; s < 8; s++) {
        const float key = k.key[s];
        const int rl = rbase + 8 * (s / 2) + s % 2;
        const bool pass = valid && key >= thr;
        const uint32_t bal = __ballot_sync(~0u, pass);
        if (bal) {
            if (pass)
                wbuf[wcnt + __popc(bal & ((1u << lane) - 1u))] =
                    ((uint64_t)__float_as_uint(key) << 32) | ((uint32_t)ql << 16 | (uint32_t)rl);
            wcnt += __popc(bal);
            if (wcnt > (uint32_t)WST_FLUSH) {
                __syncwarp();
                wst_flush(p, wbuf, wcnt, row0, q0);
                __syncwarp();
                wcnt = 0;
            }
        }
    }
    return wcnt;
}

/* HLP (the 128-query staged tile): the staged entries are completed by the producer
 * warpgroup's warps 1-3 (the helpers), which have nothing else to do, instead of by the
 * consumer warps a tile and two tiles later: the consumer warps' time is the tensor cores'
 * time (their epilogue delays their next wgmma). Helper h (1..3) serves the consumer warps
 * w with w % 3 == h - 1 (three warps, two for helper 3), tile by tile, through one named
 * barrier per helper (id HB_FULL + h - 1) that the helper and its consumer warps all
 * bar.sync once a tile: a consumer warp after writing tile i's entries (buffer i & 1), its
 * count and tile; the helper before reading them. The helper reads tile i between the
 * barrier of tile i and that of tile i + 1, and a consumer warp writes that buffer again only
 * after the barrier of tile i + 1, so the buffers need no second barrier; and with bar.sync
 * on both sides compute-sanitizer's racecheck follows the hand-off (it follows neither
 * bar.arrive nor mbarrier ordering of shared memory: a first form with bar.arrive, and an
 * earlier one with mbarriers, were reported). After the last tile each consumer warp
 * publishes a count of ~0 (the end). Every consumer warp of a CTA runs the same tiles, so
 * the barriers line up. Deadlock-free: before the barrier of tile i a consumer warp waits
 * only for the Euclid barrier of tile i (all consumer warps, none of which waits on a helper
 * there) and the ring (the producer thread); the helper, only for memory. The cost: a
 * consumer warp waits at tile i's barrier for its helper to have completed tile i - 1 (a few
 * microseconds against a tile's ten or more) and for the helper's two other warps; measured
 * on the H200 against the bar.arrive form (5M, B = 1024 k = 128: 14.79-14.92 against
 * 14.64-14.79 ms, tma128x256s 15.19-15.27), about 1% for a hand-off racecheck can check.
 * Ids: 0 is __syncthreads, 1 the Euclid norm table. */
constexpr int HB_FULL = 2; /* + h - 1: ids 2..4 */
constexpr int HB_PAD = 5;  /* + h - 1: ids 5..7, see the helper loop */
__device__ __forceinline__ int hlp_threads(int h) { return h == 3 ? 96 : 128; }

/* The TMA scan's gate (GATE epilogue) for one tile: per query row of the thread, the
 * largest of its keys first (one compare against the boundary; in most tiles nothing
 * passes and that is all), then, only if it passes, each key. Measured on the H200 (v10):
 * the per-key form spent about a quarter of the scan's warp samples here at B = 1024 while
 * the tensor cores idled. Accumulator 4n + 2h + j: query qo + 16 wq + g + 8h, row
 * ro + 8n + 2 tq + j. STG: keys are staged in the warp's buffer wbuf (wcnt entries so far,
 * the same in every lane), see the per-warp staging above; otherwise each is admitted as it
 * passes and the tightenings due are collected in tpend (bit ql - qo), for tighten_pending
 * after the epilogue. */
template <int WN, bool EUCLID, bool STG>
__device__ __forceinline__ void tma_epilogue(const ScanParams &p, const float *acc,
                                             const float *thr_h, const float *rn, uint32_t row0,
                                             uint32_t q0, int qo, int ro, int wq, int g, int tq,
                                             uint64_t *wbuf, uint32_t &wcnt, uint64_t &tpend) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int ql = qo + wq * 16 + g + 8 * h;
        const bool valid = q0 + ql < p.nq;
        if (!STG && !valid) continue;
        const float thr = thr_h[h];
        /* the largest key of each group of 8 (4 steps of n), and of the row; keys as the
           admission computes them; NaN (rows past the end may hold anything) never wins
           fmaxf and never passes the gate */
        constexpr int NG = WN / 32;
        static_assert(WN % 32 == 0, "groups of 4 steps of n");
        float gm[NG];
        float m = -__int_as_float(0x7f800000);
#pragma unroll
        for (int gi = 0; gi < NG; gi++) {
            gm[gi] = -__int_as_float(0x7f800000);
#pragma unroll
            for (int n = 4 * gi; n < 4 * gi + 4; n++)
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    const float dot = acc[n * 4 + h * 2 + j];
                    const float key = EUCLID ? 2.0f * dot - rn[ro + n * 8 + 2 * tq + j] : dot;
                    gm[gi] = fmaxf(gm[gi], key);
                }
            m = fmaxf(m, gm[gi]);
        }
        if (STG) {
            if (!__any_sync(~0u, valid && m >= thr)) continue;
        } else if (!(m >= thr)) {
            continue;
        }
#pragma unroll
        for (int gi = 0; gi < NG; gi++) {
            /* STG: a group none of the warp's lanes passes skips its eight sites (at large k
               most rows pass somewhere in a warp, fewer groups do) */
            if (STG && !__any_sync(~0u, valid && gm[gi] >= thr)) continue;
            if constexpr (STG) {
                WstGroup k;
#pragma unroll
                for (int s = 0; s < 8; s++) {
                    const int n = 4 * gi + s / 2, j = s % 2;
                    /* + 0: see scan_wgmma_kernel (keys identical to the mma.sync loop) */
                    const float dot = acc[n * 4 + h * 2 + j] + 0.0f;
                    k.key[s] = EUCLID ? 2.0f * dot - rn[ro + n * 8 + 2 * tq + j] : dot;
                }
                wcnt = wst_group(p, k, valid, thr, ql, ro + 32 * gi + 2 * tq, wbuf, wcnt, row0,
                                 q0);
            } else {
#pragma unroll
                for (int n = 4 * gi; n < 4 * gi + 4; n++)
#pragma unroll
                    for (int j = 0; j < 2; j++) {
                        const int rl = ro + n * 8 + 2 * tq + j;
                        /* + 0: see scan_wgmma_kernel (keys identical to the mma.sync loop) */
                        const float dot = acc[n * 4 + h * 2 + j] + 0.0f;
                        const float key = EUCLID ? 2.0f * dot - rn[rl] : dot;
                        if (!(key >= thr)) continue;
                        if (admit_row(p, row0 + rl, q0 + ql, key)) tpend |= 1ull << (ql - qo);
                    }
            }
        }
    }
}

/* The GATE scan with the loads issued by the tensor memory accelerator. One CTA per SM,
 * persistent over tiles of BQ queries x BR rows, claimed in order from a counter
 * (p.tile_ctr, zero at launch: tile t is row tile t / nqt, query tile t % nqt) by
 * the producer, which tells the consumers through p.tile_log a tile ahead (global memory,
 * read after a slot's barrier: compute-sanitizer's racecheck does not follow mbarrier
 * ordering of shared memory and reported a shared-memory hand-off as a race);
 * three warpgroups: warpgroup 0 is the producer (one thread issues both
 * TMA loads of each 64-wide K chunk into a ring of STAGES slots, waiting on the slot's
 * "empty" barrier), warpgroups 1 and 2 consume (wait on the slot's "full" barrier, run the
 * wgmma, release the slot when that wgmma has completed) and run the epilogue. The producer
 * runs up to STAGES chunks ahead, across tiles, so the loads continue through the
 * consumers' epilogue. Consumers split the tile like scan_wgmma_kernel: with BQ = 128 each
 * owns 64 queries and all BR rows, with BQ = 64 the 64 queries and half the rows.
 *
 * Rows: a 3-D map {dim, rows in a page, pages} over evenly spaced pages (box {64, BOXR,
 * BR / BOXR}, BOXR = min(BR, rows per page)); K past dim and pages past the last read as
 * zeros, rows of the last page past n_rows as whatever the page holds (admit_row never
 * admits them). Queries: a 2-D map {dpad, nq}, box {64, BQ} (rows past nq read as zeros).
 * Both use the 128-byte
 * swizzle, the layout sw128_desc describes. The per-element accumulation order is the one of
 * scan_wgmma_kernel (same wgmma sequence), so keys are bit-identical to the other variants.
 */
template <typename T, int BQ, int BR, int STAGES, bool STG, bool HLP = false>
__global__ void __launch_bounds__(384, 1)
scan_tma_kernel(const __grid_constant__ ScanParams p, const __grid_constant__ CUtensorMap tm_rows,
                const __grid_constant__ CUtensorMap tm_q) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using S = TmaSmem<BQ, BR, STAGES>;
    constexpr int KC = S::KC;
    constexpr int WN = BQ == 128 ? BR : BR / 2; /* wgmma N */
    constexpr int NACC = WN / 2;
    static_assert(BQ == 64 || BQ == 128, "query tile");
    static_assert(!HLP || STG, "the helpers complete staged entries");

    extern __shared__ unsigned char smem_raw[];
    uint32_t sbase = smem_u32(smem_raw);
    unsigned char *sm = smem_raw + ((1024u - (sbase & 1023u)) & 1023u);
    T *Qs = (T *)sm;                                  /* [STAGES][BQ][64] */
    T *Rs = (T *)(sm + (size_t)STAGES * S::q_bytes);  /* [STAGES][BR][64] */
    const int KT = p.dpad / KC;
    __shared__ __align__(8) uint64_t full_bar[STAGES];
    __shared__ __align__(8) uint64_t empty_bar[STAGES];
    __shared__ float rnorm[2][BR]; /* Euclid: |x|^2 of the tile's rows, by tile parity */
    /* STG: the consumer warps' admission buffers (WST_CAP above), by tile parity */
    __shared__ uint64_t wst[STG ? 2 * WST_WARPS * WST_CAP : 1];
    /* HLP: each consumer warp's entry count (~0: the end) and tile, by buffer parity */
    __shared__ uint32_t hlp_n[HLP ? 2 : 1][WST_WARPS], hlp_t[HLP ? 2 : 1][WST_WARPS];

    const uint32_t L = p.n_rows;
    const uint32_t ntiles = ((L + BR - 1) / BR) * p.nqt; /* the launcher checks it fits */

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(&full_bar[s], 1);  /* the producer's arrival (+ the bytes) */
            mbar_init(&empty_bar[s], 8); /* one arrival per consumer warp */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    /* as the chain's gate scan (see pdl_wait): the speculative select behind it does nothing
       before its own wait, so it may be scheduled now. The producer loads rows and prepared
       queries and counts tiles on p.tile_ctr (zeroed by the query preparation): all
       complete before the propose step started, so it does not wait; the consumers wait
       for the propose step's boundaries, bins and counts. */
    pdl_trigger();
    const int wg = threadIdx.x / 128;
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        if (HLP && threadIdx.x >= 32) {
            /* a helper (see HLP above tma_epilogue): the admission inline (an out-of-line
               call here makes ptxas ignore setmaxnreg, info C7507) */
            const int h = threadIdx.x / 32, nthr = hlp_threads(h), nw = nthr / 32 - 1;
            const uint32_t ln = threadIdx.x % 32;
            pdl_wait(); /* the propose step's counts, bins and boundaries */
            for (uint32_t i = 0;; i++) {
                const int par = (int)(i & 1);
                /* for racecheck only: with Euclid the consumer warps pass the norm table's
                   barrier each tile as well, and without a barrier of the helper's own here
                   racecheck reported this hand-off (not with Dot, and not with this): it
                   seems to pair a thread's barriers by their count */
                if (p.metric == 2) named_bar_sync(HB_PAD + h - 1, 32);
                named_bar_sync(HB_FULL + h - 1, nthr); /* tile i published */
                WstPending r[3];
                bool end = false;
#pragma unroll
                for (int m = 0; m < 3; m++) {
                    r[m].pos = ~0u;
                    if (m >= nw) continue;
                    const int w = h - 1 + 3 * m;
                    const uint32_t n = hlp_n[par][w], tt = hlp_t[par][w];
                    if (n == ~0u) {
                        end = true;
                        continue;
                    }
                    r[m] = wst_reserve(p, wst + ((size_t)par * WST_WARPS + w) * WST_CAP, n,
                                       (tt / p.nqt) * BR, (tt % p.nqt) * BQ, ln);
                }
                if (end) return; /* every consumer warp publishes the end after the same tile */
#pragma unroll
                for (int m = 0; m < 3; m++) wst_finish_inl(p, r[m]);
            }
        }
        if (threadIdx.x != 0) return;
        /* tiles are taken from a counter, in order across the GPU, so the query tiles of a
           row tile run at about the same time and its rows come from L2 after the first
           read (a fixed stride per CTA let CTAs drift apart and re-read rows from DRAM).
           The next tile is claimed a tile ahead, so the atomic's latency is hidden. */
        /* the CTA's tiles, for the consumers, in p.tile_log: tile 0 is stored before any
           arrival; tile j + 1 just before the arrival of tile j's chunk KPUB, after which
           the consumers read it (the arrival orders the store), so they know the next tile
           a tile early and no tile start waits on memory. The producer runs at most
           STAGES chunks, so fewer than TLOG_RING tiles, ahead of the entries read. */
        uint32_t *log = p.tile_log + (size_t)blockIdx.x * TLOG_RING;
        const int kpub = KT > 1 ? 1 : 0;
        uint32_t cur = atomicAdd(p.tile_ctr, 1u), nxt = 0, j = 0;
        __stcg(log, cur);
        int kt = 0;
        for (uint32_t c = 0;; c++) {
            const int s = (int)(c % STAGES);
            mbar_wait(&empty_bar[s], ((c / STAGES) & 1u) ^ 1u);
            if (kt == 0 && c > 0) cur = nxt;
            if (cur >= ntiles) {
                /* no tile left; the consumers learnt it with the previous tile, or, when
                   this CTA got no tile at all, learn it here */
                if (j == 0) mbar_arrive(&full_bar[s]);
                break;
            }
            if (kt == 0) nxt = atomicAdd(p.tile_ctr, 1u);
            if (kt == kpub) __stcg(log + ((j + 1) % TLOG_RING), nxt);
            const uint32_t row0 = (cur / p.nqt) * BR;
            const uint32_t q0 = (cur % p.nqt) * BQ;
            const int k0 = kt * KC;
            mbar_arrive_tx(&full_bar[s], S::stage_bytes);
            tma_load_2d(Qs + (size_t)s * BQ * KC, &tm_q, k0, (int)q0, &full_bar[s]);
            tma_load_3d(Rs + (size_t)s * BR * KC, &tm_rows, k0, (int)(row0 % p.rpp),
                        (int)(row0 / p.rpp), &full_bar[s]);
            if (++kt == KT) {
                kt = 0;
                j++;
            }
        }
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    pdl_wait();

    const int cw = wg - 1;                        /* consumer warpgroup 0 or 1 */
    const int ct = threadIdx.x - 128;             /* consumer thread 0..255 */
    const int qo = BQ == 128 ? cw * 64 : 0;       /* this warpgroup's first query */
    const int ro = BQ == 128 ? 0 : cw * (BR / 2); /* and first row */
    const int lane = threadIdx.x % 32, wq = (threadIdx.x % 128) / 32;
    const int g = lane / 4, tq = lane % 4;
    const int hw = (ct / 32) % 3; /* HLP: this warp's helper, less one */

    float acc[NACC];
#pragma unroll
    for (int i = 0; i < NACC; i++) acc[i] = 0.f;

    const uint32_t *log = p.tile_log + (size_t)blockIdx.x * TLOG_RING;
    const int kpub = KT > 1 ? 1 : 0;
    /* the first tile: stored before the first arrival (waiting again on a completed phase
       returns at once) */
    mbar_wait(&full_bar[0], 0);
    uint32_t t = __ldcg(log);
    uint32_t c = 0;
    /* STG: after tile i's last wgmma and before its epilogue, the warp completes the entries
       of tile i - 2 (reserved in pend) and reserves those of tile i - 1 (n_p1 entries, tile
       t_p1, buffer (i - 1) & 1); tile i's epilogue appends to buffer i & 1 (wcnt entries) */
    uint64_t *const wst_w = wst + (size_t)(ct / 32) * WST_CAP;
    uint32_t wcnt = 0, n_p1 = 0, t_p1 = 0;
    WstPending pend = {~0u, 0u, 0u, 0.f, 0.f, 0.f};
    /* the boundaries the epilogue gates against (ordered values), loaded a tile ahead, as
       soon as the next tile is known, so no tile start waits for them (a boundary only
       rises: an early value admits a superset and stays exact) */
    uint32_t thr_o[2], thr_nx[2] = {0u, 0u};
    auto load_thr = [&](uint32_t tile, uint32_t *o) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const uint32_t qq = (tile % p.nqt) * BQ + qo + wq * 16 + g + 8 * h;
            o[h] = tile < ntiles && qq < p.nq ? __ldcg(p.thr + slot_of(p, qq)) : 0u;
        }
    };
    load_thr(t, thr_o);
    uint32_t i = 0;
    for (; t < ntiles; i++) {
        const uint32_t row0 = (t / p.nqt) * BR;
        const uint32_t q0 = (t % p.nqt) * BQ;
        float thr_h[2];
#pragma unroll
        for (int h = 0; h < 2; h++) thr_h[h] = float_of_ord(thr_o[h]);
        uint32_t t_next = ntiles;
        for (int kt = 0; kt < KT; kt++, c++) {
            const int s = (int)(c % STAGES);
            mbar_wait(&full_bar[s], (c / STAGES) & 1u);
            if (kt == kpub) {
                t_next = __ldcg(log + ((i + 1) % TLOG_RING));
                load_thr(t_next, thr_nx);
            }
            const T *qs = Qs + (size_t)s * BQ * KC + (size_t)qo * KC;
            const T *rs = Rs + (size_t)s * BR * KC + (size_t)ro * KC;
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < KC; kk += 16)
                WgmmaOp<T, WN>::run(acc, sw128_desc(qs + kk), sw128_desc(rs + kk), kt > 0 || kk > 0);
            wgmma_commit();
            if (kt == 0 && p.metric == 2) /* the epilogue's norms, while the tensor cores work */
                for (int r = ct; r < BR; r += 256) {
                    const uint32_t li = row0 + r;
                    rnorm[i & 1][r] = li < L ? p.norm_pages[li / p.rpp][li % p.rpp] : 0.f;
                }
            wgmma_wait<1>();
            /* the previous chunk's wgmma has completed: its slot may be refilled (the
               warp's reads ordered before lane 0's arrival) */
            if (kt > 0) {
                __syncwarp();
                if (lane == 0) mbar_arrive(&empty_bar[(c - 1) % STAGES]);
            }
        }
        wgmma_wait<0>();
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty_bar[(c - 1) % STAGES]);
        if (STG && !HLP) { /* before the epilogue: its loads land while the epilogue runs */
            wst_finish(p, pend);
            pend = wst_reserve(p, wst_w + (size_t)((i + 1) & 1) * WST_WARPS * WST_CAP, n_p1,
                               (t_p1 / p.nqt) * BR, (t_p1 % p.nqt) * BQ, (uint32_t)lane);
        }
        /* the norm table of this tile is complete (both consumer warpgroups wrote it); the
           table of tile i - 1 is no longer read (both passed its epilogue) */
        if (p.metric == 2) named_bar_sync(1, 256);

        uint64_t *const wbuf = wst_w + (size_t)(i & 1) * WST_WARPS * WST_CAP;
        uint64_t tpend = 0; /* direct admissions: tightenings due, by query of the warpgroup */
        if (p.metric == 2)
            tma_epilogue<WN, true, STG>(p, acc, thr_h, rnorm[i & 1], row0, q0, qo, ro, wq, g,
                                        tq, wbuf, wcnt, tpend);
        else
            tma_epilogue<WN, false, STG>(p, acc, thr_h, rnorm[i & 1], row0, q0, qo, ro, wq, g,
                                         tq, wbuf, wcnt, tpend);
        if (!STG) tighten_pending(p, tpend, q0 + qo);
        if (HLP) { /* tile i's entries to the helper */
            if (lane == 0) {
                hlp_n[i & 1][ct / 32] = wcnt;
                hlp_t[i & 1][ct / 32] = t;
            }
            named_bar_sync(HB_FULL + hw, hlp_threads(hw + 1));
            wcnt = 0;
        } else if (STG) {
            n_p1 = wcnt;
            t_p1 = t;
            wcnt = 0;
        }
        t = t_next;
        thr_o[0] = thr_nx[0];
        thr_o[1] = thr_nx[1];
    }
    if (HLP) { /* the end to the helper (i tiles ran) */
        if (lane == 0) hlp_n[i & 1][ct / 32] = ~0u;
        named_bar_sync(HB_FULL + hw, hlp_threads(hw + 1));
    } else if (STG) { /* the last two tiles' entries (i tiles ran) */
        __syncwarp();
        wst_finish(p, pend);
        wst_finish(p, wst_reserve(p, wst_w + (size_t)((i + 1) & 1) * WST_WARPS * WST_CAP, n_p1,
                                  (t_p1 / p.nqt) * BR, (t_p1 % p.nqt) * BQ, (uint32_t)lane));
    }
#else
    (void)p;
    (void)tm_rows;
    (void)tm_q;
    __trap();
#endif
}

/* ------------------------------------------------------------------ exact float32 loop */

/* Index of a thread's i-th item along an axis of `extent` items split over threads of T
 * items each: T / V vectors of V = min(T, 4) consecutive items, the vectors extent / (T / V)
 * apart, so a warp's shared-memory vector reads span contiguous runs (float4 or float2). */
template <int T, int EXTENT>
__device__ __forceinline__ int f32_item(int t, int i) {
    constexpr int V = T < 4 ? T : 4;
    return (i / V) * (EXTENT / (T / V)) + t * V + i % V;
}

/* CTA: BM rows x BN queries, 256 threads, each TM rows x TN queries (f32_item mapping, read
 * from shared memory as float4 / float2: the scalar reads before issued 12 shared-memory
 * reads per 32 FFMA at B = 64, more than that pipe serves by instruction count; 5M B = 64
 * 16.2 -> 12.5 ms with this and the 256 x 64 tile), sequential fmaf over k: the same
 * per-element order in every configuration. */
template <int BM, int BN, int TN, int MODE, bool VEC>
__global__ void __launch_bounds__(256, 2) scan_f32_kernel(const __grid_constant__ ScanParams p) {
    constexpr int NT = 256, KC = 16;
    constexpr int TX = BN / TN, TY = NT / TX, TM = BM / TY;
    constexpr int VM = TM < 4 ? TM : 4, VN = TN < 4 ? TN : 4;
    static_assert(TX * TY == NT && TM * TY == BM, "bad f32 tile");
    static_assert((VM == 2 || VM == 4) && (VN == 2 || VN == 4), "f32 tile vectors");
    __shared__ __align__(16) float As[2][KC][BM + 4];
    __shared__ __align__(16) float Bs[2][KC][BN + 4];
    __shared__ CtaRows<float, BM, BN> cr;

    const uint32_t row0 = (blockIdx.x / p.nqt) * BM;
    const uint32_t q0 = (blockIdx.x % p.nqt) * BN;
    const float *qbase = (const float *)p.q + (size_t)q0 * p.dpad;
    cr.template load<MODE>(p, row0, q0);
    __syncthreads();

    const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
    constexpr int AV = BM * KC / 4 / NT; /* float4 per thread for the row tile */
    constexpr int BV = (BN * KC / 4 + NT - 1) / NT;
    float4 ra[AV > 0 ? AV : 1], rb[BV];
    const int KT = p.dpad / KC;

    auto gload = [&](int kt) {
        const int k0 = kt * KC;
#pragma unroll
        for (int v = 0; v < AV; v++) {
            int i = threadIdx.x + v * NT;
            int r = i / (KC / 4), c = (i % (KC / 4)) * 4;
            const float *src = cr.ptr[r];
            float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
            if (src) {
                if (VEC) {
                    if (k0 + c < (int)p.dim) x = *(const float4 *)(src + k0 + c);
                } else {
                    if (k0 + c + 0 < (int)p.dim) x.x = src[k0 + c + 0];
                    if (k0 + c + 1 < (int)p.dim) x.y = src[k0 + c + 1];
                    if (k0 + c + 2 < (int)p.dim) x.z = src[k0 + c + 2];
                    if (k0 + c + 3 < (int)p.dim) x.w = src[k0 + c + 3];
                }
            }
            ra[v] = x;
        }
#pragma unroll
        for (int v = 0; v < BV; v++) {
            int i = threadIdx.x + v * NT;
            if (i < BN * KC / 4) {
                int r = i / (KC / 4), c = (i % (KC / 4)) * 4;
                rb[v] = *(const float4 *)(qbase + (size_t)r * p.dpad + k0 + c);
            }
        }
    };
    auto sstore = [&](int st) {
#pragma unroll
        for (int v = 0; v < AV; v++) {
            int i = threadIdx.x + v * NT;
            int r = i / (KC / 4), c = (i % (KC / 4)) * 4;
            As[st][c + 0][r] = ra[v].x;
            As[st][c + 1][r] = ra[v].y;
            As[st][c + 2][r] = ra[v].z;
            As[st][c + 3][r] = ra[v].w;
        }
#pragma unroll
        for (int v = 0; v < BV; v++) {
            int i = threadIdx.x + v * NT;
            if (i < BN * KC / 4) {
                int r = i / (KC / 4), c = (i % (KC / 4)) * 4;
                Bs[st][c + 0][r] = rb[v].x;
                Bs[st][c + 1][r] = rb[v].y;
                Bs[st][c + 2][r] = rb[v].z;
                Bs[st][c + 3][r] = rb[v].w;
            }
        }
    };

    float acc[TM][TN] = {};

    gload(0);
    sstore(0);
    __syncthreads();
    for (int kt = 0; kt < KT; kt++) {
        const int st = kt & 1;
        if (kt + 1 < KT) gload(kt + 1);
#pragma unroll 8
        for (int kk = 0; kk < KC; kk++) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; i += VM) {
                const float *s = &As[st][kk][f32_item<TM, BM>(ty, i)];
                if constexpr (VM == 4) {
                    const float4 v = *(const float4 *)s;
                    a[i] = v.x, a[i + 1] = v.y, a[i + 2] = v.z, a[i + 3] = v.w;
                } else {
                    const float2 v = *(const float2 *)s;
                    a[i] = v.x, a[i + 1] = v.y;
                }
            }
#pragma unroll
            for (int j = 0; j < TN; j += VN) {
                const float *s = &Bs[st][kk][f32_item<TN, BN>(tx, j)];
                if constexpr (VN == 4) {
                    const float4 v = *(const float4 *)s;
                    b[j] = v.x, b[j + 1] = v.y, b[j + 2] = v.z, b[j + 3] = v.w;
                } else {
                    const float2 v = *(const float2 *)s;
                    b[j] = v.x, b[j + 1] = v.y;
                }
            }
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (kt + 1 < KT) sstore(st ^ 1);
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) {
            const int rl = f32_item<TM, BM>(ty, i), ql = f32_item<TN, BN>(tx, j);
            if (!cr.ptr[rl] || q0 + ql >= p.nq) continue;
            cr.template emit_key<MODE>(p, row0, q0, rl, ql, acc[i][j]);
        }
}

/* The float32 loop for batches of up to 4 queries, where the scan reads the rows at memory
 * speed and the products cost little: one row per thread, its keys for NQ queries (NQ = 1,
 * 2 or 4, at least the batch), each a sequential fmaf over k in the order of
 * scan_f32_kernel (so its keys are bit-identical). Rows and queries stream through F32V_ST
 * stages of F32V_KC columns in shared memory by cp.async (16-byte copies when VEC, 4-byte
 * ones otherwise; columns past dim and rows past the end read as zeros), two stages in flight
 * while the third is multiplied. Row r of a stage sits at r * (F32V_KC + 4) floats, so each
 * quarter-warp's float4 reads hit distinct banks. Dynamic shared memory: f32v_smem_bytes. */
constexpr int F32V_BM = 128, F32V_KC = 32, F32V_ST = 3, F32V_LD = F32V_KC + 4;
template <int NQ>
constexpr size_t f32v_smem_bytes() {
    return (size_t)F32V_ST * (F32V_BM * F32V_LD + NQ * F32V_KC) * sizeof(float);
}

__device__ inline void cp_async4(void *smem, const void *gmem, int src_bytes) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem),
                 "r"(src_bytes));
}

template <int NQ, int MODE, bool VEC>
__global__ void __launch_bounds__(F32V_BM) scan_f32v_kernel(const __grid_constant__ ScanParams p) {
    constexpr int BM = F32V_BM, KC = F32V_KC, ST = F32V_ST, LD = F32V_LD;
    extern __shared__ __align__(16) float f32v_smem[];
    float *Rs = f32v_smem;                  /* [ST][BM][LD] */
    float *Qs = f32v_smem + ST * BM * LD;   /* [ST][NQ][KC] */
    __shared__ CtaRows<float, BM, NQ> cr;

    const uint32_t row0 = blockIdx.x * BM; /* one query tile: p.nqt == 1 */
    const float *qbase = (const float *)p.q;
    const int tid = threadIdx.x;
    cr.template load<MODE>(p, row0, 0);
    __syncthreads();
    const int KT = p.dpad / KC;

    auto issue = [&](int kt) {
        const int k0 = kt * KC, st = kt % ST;
        float *rs = Rs + st * BM * LD;
        if (VEC) {
#pragma unroll
            for (int v = 0; v < BM * KC / 4 / BM; v++) {
                const int i = tid + v * BM, r = i / (KC / 4), c = (i % (KC / 4)) * 4;
                const float *src = cr.ptr[r];
                const bool in = src && k0 + c < (int)p.dim;
                cp_async16(rs + r * LD + c, in ? src + k0 + c : qbase, in ? 16 : 0);
            }
        } else {
#pragma unroll 8
            for (int v = 0; v < KC; v++) {
                const int i = tid + v * BM, r = i / KC, c = i % KC;
                const float *src = cr.ptr[r];
                const bool in = src && k0 + c < (int)p.dim;
                cp_async4(rs + r * LD + c, in ? src + k0 + c : qbase, in ? 4 : 0);
            }
        }
        /* the query buffer is padded to the tile (rows past nq are zeros) and to dpad */
        if (tid < NQ * KC / 4) {
            const int j = tid / (KC / 4), c = (tid % (KC / 4)) * 4;
            cp_async16(Qs + (st * NQ + j) * KC + c, qbase + (size_t)j * p.dpad + k0 + c, 16);
        }
    };

    float acc[NQ] = {};
#pragma unroll
    for (int s = 0; s < ST - 1; s++) {
        if (s < KT) issue(s);
        cp_async_commit();
    }
    for (int kt = 0; kt < KT; kt++) {
        cp_async_wait<ST - 2>(); /* stage kt landed (this thread's copies) */
        __syncthreads();         /* everyone's copies, and stage kt - 1 is free */
        if (kt + ST - 1 < KT) issue(kt + ST - 1);
        cp_async_commit();
        const int st = kt % ST;
        const float *a = Rs + (st * BM + tid) * LD;
        const float *qs = Qs + st * NQ * KC;
#pragma unroll
        for (int kk = 0; kk < KC; kk += 4) {
            const float4 x = *(const float4 *)(a + kk);
#pragma unroll
            for (int j = 0; j < NQ; j++) {
                const float4 y = *(const float4 *)(qs + j * KC + kk);
                acc[j] = fmaf(x.x, y.x, acc[j]);
                acc[j] = fmaf(x.y, y.y, acc[j]);
                acc[j] = fmaf(x.z, y.z, acc[j]);
                acc[j] = fmaf(x.w, y.w, acc[j]);
            }
        }
    }
    cp_async_wait<0>();
    if (!cr.ptr[tid]) return;
#pragma unroll
    for (int j = 0; j < NQ; j++) {
        if ((uint32_t)j >= p.nq) break;
        cr.template emit_key<MODE>(p, row0, 0, tid, j, acc[j]);
    }
}

/* The float32 loop for 5-32 queries: rows and queries row-major in shared memory, copied
 * by cp.async in stages of F32R_KC = 32 columns, two stages (one loading while the other is
 * multiplied). NT threads, each TM rows x TN queries: TX query groups (tx = thread % TX),
 * TY = NT / TX row groups; thread (tx, ty) owns rows ty + i * TY and queries tx + j * TX.
 * Every 4 columns it reads one float4 of each of its rows and queries, then 4 * TM * TN fmaf
 * (k in index order: the keys of scan_f32_kernel, bit for bit). Rows are 128 bytes with the
 * 16-byte chunk c of row r at c ^ (r & 7), so a quarter-warp's float4 reads of eight rows
 * hit distinct banks without padding. When the block's rows lie at one pointer plus
 * i * dim (one page, or pages laid end to end), all present, with dim == dpad, every copy is
 * a fixed offset from one pointer: without that, issuing the copies (a row-table read and
 * range checks per copy) was a fifth of all instructions at 16 queries. Requires dim % 4 ==
 * 0. Dynamic shared memory: F32R::bytes. */
constexpr int F32R_KC = 32, F32R_ST = 2;
template <int NT, int TM, int TX, int TN>
struct F32R {
    static constexpr int TY = NT / TX, BM = TM * TY, BN = TX * TN, LD = F32R_KC;
    static constexpr int RSTEP = NT / (F32R_KC / 4); /* rows between a thread's copies */
    static constexpr size_t bytes = (size_t)F32R_ST * (BM + BN) * LD * sizeof(float);
    static_assert(NT % TX == 0 && NT % 32 == 0 && TY % 8 == 0, "f32r threads");
    static_assert(RSTEP % 8 == 0 && BM % RSTEP == 0, "f32r copies");
};

template <int NT, int TM, int TX, int TN, int MINB, int MODE>
__global__ void __launch_bounds__(NT, MINB) scan_f32r_kernel(const __grid_constant__ ScanParams p) {
    using C = F32R<NT, TM, TX, TN>;
    constexpr int BM = C::BM, BN = C::BN, LD = C::LD, TY = C::TY, KC = F32R_KC, ST = F32R_ST;
    constexpr int RSTEP = C::RSTEP;
    /* float offset of column c (a multiple of 4 plus 0-3) in row r of a stage */
    auto col = [](int r, int c) { return (((c >> 2) ^ (r & 7)) << 2) | (c & 3); };
    extern __shared__ __align__(16) float f32r_smem[];
    float *Rs = f32r_smem;                /* [ST][BM][LD] */
    float *Qs = f32r_smem + ST * BM * LD; /* [ST][BN][LD] */
    __shared__ CtaRows<float, BM, BN> cr;

    const uint32_t row0 = (blockIdx.x / p.nqt) * BM;
    const uint32_t q0 = (blockIdx.x % p.nqt) * BN;
    const float *qbase = (const float *)p.q + (size_t)q0 * p.dpad;
    const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;
    cr.template load<MODE>(p, row0, q0);
    __syncthreads();
    const int KT = p.dpad / KC;
    bool line = p.dim == p.dpad && cr.ptr[0] != nullptr;
    for (int i = tid; i < BM && line; i += NT) line = cr.ptr[i] == cr.ptr[0] + (size_t)i * p.dim;
    line = __syncthreads_and(line);
    /* this thread copies 16-byte chunk c0 / 4 of rows r0 + v * RSTEP */
    const int r0 = tid / (KC / 4), c0 = (tid % (KC / 4)) * 4;
    const float *src0 = line ? cr.ptr[0] + (size_t)r0 * p.dim + c0 : nullptr;
    const size_t vstride = (size_t)RSTEP * p.dim;

    auto issue = [&](int kt) {
        const int k0 = kt * KC, st = kt % ST;
        float *rs = Rs + st * BM * LD + r0 * LD + col(r0, c0);
        if (line) {
#pragma unroll
            for (int v = 0; v < BM / RSTEP; v++)
                cp_async16(rs + v * RSTEP * LD, src0 + v * vstride + k0, 16);
        } else {
#pragma unroll
            for (int v = 0; v < BM / RSTEP; v++) {
                const float *src = cr.ptr[r0 + v * RSTEP];
                const bool in = src && k0 + c0 < (int)p.dim;
                cp_async16(rs + v * RSTEP * LD, in ? src + k0 + c0 : qbase, in ? 16 : 0);
            }
        }
        /* the query buffer is padded to 128 queries and to dpad (zeros) */
#pragma unroll
        for (int v = 0; v < (BN * KC / 4 + NT - 1) / NT; v++) {
            const int j = r0 + v * RSTEP;
            if (j < BN)
                cp_async16(Qs + (st * BN + j) * LD + col(j, c0),
                           qbase + (size_t)j * p.dpad + k0 + c0, 16);
        }
    };

    float acc[TM][TN] = {};
    issue(0);
    cp_async_commit();
    for (int kt = 0; kt < KT; kt++) {
        cp_async_wait<0>(); /* stage kt landed (this thread's copies) */
        __syncthreads();    /* everyone's copies, and stage kt - 1 is free */
        if (kt + 1 < KT) issue(kt + 1);
        cp_async_commit();
        const int st = kt % ST;
        const float *rs = Rs + (st * BM + ty) * LD;
        const float *qs = Qs + (st * BN + tx) * LD;
#pragma unroll
        for (int kk = 0; kk < KC; kk += 4) {
            float4 x[TM];
#pragma unroll
            for (int i = 0; i < TM; i++) x[i] = *(const float4 *)(rs + i * TY * LD + col(ty, kk));
#pragma unroll
            for (int j = 0; j < TN; j++) {
                const float4 y = *(const float4 *)(qs + j * TX * LD + col(tx + j * TX, kk));
#pragma unroll
                for (int i = 0; i < TM; i++) {
                    acc[i][j] = fmaf(x[i].x, y.x, acc[i][j]);
                    acc[i][j] = fmaf(x[i].y, y.y, acc[i][j]);
                    acc[i][j] = fmaf(x[i].z, y.z, acc[i][j]);
                    acc[i][j] = fmaf(x[i].w, y.w, acc[i][j]);
                }
            }
        }
    }
    cp_async_wait<0>();
#pragma unroll
    for (int i = 0; i < TM; i++) {
        const int rl = ty + i * TY;
        if (!cr.ptr[rl]) continue;
#pragma unroll
        for (int j = 0; j < TN; j++) {
            const int ql = tx + j * TX;
            if (q0 + ql >= p.nq) continue;
            cr.template emit_key<MODE>(p, row0, q0, rl, ql, acc[i][j]);
        }
    }
}

} // namespace sieve_cuda

#endif

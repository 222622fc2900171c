/* prims.cuh: device primitives the CUDA kernels share (the k-NN scan, the indexer, the
 * attention kernels): the order-preserving float <-> uint32 map and the packed (key, row)
 * candidate, cp.async, the wgmma shared-memory descriptors and fences, mbarriers,
 * shared-memory addresses and named barriers.
 * Everything here is inline, so any number of .cu files may include it.
 * Must not: define non-inline functions or hold state. */
#ifndef SIEVE_CUDA_PRIMS_CUH
#define SIEVE_CUDA_PRIMS_CUH

#include <stdint.h>

namespace sieve_cuda {

/* Order-preserving map float -> uint32 (larger float, larger uint). */
__host__ __device__ inline uint32_t ord_of_bits(uint32_t u) {
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__host__ __device__ inline uint32_t bits_of_ord(uint32_t o) {
    return (o & 0x80000000u) ? (o & 0x7fffffffu) : ~o;
}
__device__ inline uint32_t ord_of(float f) { return ord_of_bits(__float_as_uint(f)); }
__device__ inline float float_of_ord(uint32_t o) { return __uint_as_float(bits_of_ord(o)); }

/* Candidate packing: ascending order of the packed value = key descending, row ascending. */
__device__ inline uint64_t pack_cand(float key, uint32_t row) {
    return ((uint64_t)(~ord_of(key)) << 32) | row;
}
__device__ inline float cand_key(uint64_t v) { return float_of_ord(~(uint32_t)(v >> 32)); }
__device__ inline uint32_t cand_row(uint64_t v) { return (uint32_t)v; }

__device__ inline void cp_async16(void *smem, const void *gmem, int src_bytes) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
                 "r"(src_bytes));
}
/* The same from a shared-memory address (32-bit) and with both addresses offset by
 * immediates (no register arithmetic for a row's several chunks). */
template <uint32_t SOFF, uint32_t GOFF>
__device__ inline void cp_async16_at(uint32_t smem, const void *gmem, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0+%3], [%1+%4], 16, %2;\n" ::"r"(smem), "l"(gmem),
                 "r"(src_bytes), "n"(SOFF), "n"(GOFF));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ inline void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

/* Shared-memory matrix descriptor of a K-major tile stored with the 128-byte swizzle: rows of
 * 64 elements (128 bytes), 16-byte chunk c of row r at chunk position c ^ (r % 8), 8-row
 * groups 1024 bytes apart, the tile 1024-byte aligned. Advancing along K by 16 elements
 * adds 32 bytes to the start address. */
__device__ inline uint64_t sw128_desc(const void *smem) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    uint64_t d = (uint64_t)((a & 0x3ffffu) >> 4);
    d |= (uint64_t)(16u >> 4) << 16;   /* leading byte offset (unused with this swizzle) */
    d |= (uint64_t)(1024u >> 4) << 32; /* stride byte offset: one 8-row group */
    d |= 1ull << 62;                   /* 128-byte swizzle */
    return d;
}
/* The same for an N-major (MN-major) B operand, K x N, N contiguous: rows of 64 N-elements
 * (128 bytes) along K, chunk c of row k at chunk position c ^ (k % 8), 8-row (8-K) groups
 * 1024 bytes apart, the next 64 N-elements lbo bytes on. Advancing along K by 16 adds 2048
 * bytes to the start address. */
__device__ inline uint64_t sw128_desc_mn(const void *smem, uint32_t lbo) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    uint64_t d = (uint64_t)((a & 0x3ffffu) >> 4);
    d |= (uint64_t)((lbo & 0x3ffffu) >> 4) << 16; /* leading byte offset: the next 64 along N */
    d |= (uint64_t)(1024u >> 4) << 32;            /* stride byte offset: the next 8 along K */
    d |= 1ull << 62;                              /* 128-byte swizzle */
    return d;
}

/* Descriptor d (sw128_desc, sw128_desc_mn) moved u 16-byte units on: the start address
 * (>> 4) is the low word's low 14 bits and shared addresses are below 2^18, so one 32-bit
 * add to the low word, no carry into the other fields: per tile an add a descriptor, not a
 * rebuild. */
__device__ inline uint64_t desc_add(uint64_t d, uint32_t u) {
    return (d & ~0xffffffffull) | (uint32_t)((uint32_t)d + u);
}

__device__ inline void wgmma_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ inline void wgmma_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ inline void wgmma_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
/* Makes this thread's completed cp.async writes visible to the async proxy (wgmma). */
__device__ inline void fence_proxy_async_smem() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

__device__ inline uint32_t smem_u32(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
/* Synchronises the n threads that use named barrier id (ids 1..15; 0 is __syncthreads). */
__device__ inline void named_bar_sync(int id, int n) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
/* Arrives at named barrier id (of n threads) without waiting. */
__device__ inline void named_bar_arrive(int id, int n) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}

/* mbarriers (shared::cta), sm_90. */
__device__ inline void mbar_init(uint64_t *b, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(b)), "r"(count)
                 : "memory");
}
/* The arrival of the thread that issues a stage's loads, announcing their byte count. */
__device__ inline void mbar_arrive_tx(uint64_t *b, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(b)),
                 "r"(bytes)
                 : "memory");
}
__device__ inline void mbar_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(b)) : "memory");
}
/* An arrival on the barrier once every cp.async this thread issued before it has landed
 * (the barrier's count includes it: noinc). */
__device__ inline void mbar_arrive_cp_async(uint64_t *b) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(b))
                 : "memory");
}
/* Waits until the barrier's phase of the given parity has completed. */
__device__ inline void mbar_wait(uint64_t *b, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile("{\n .reg .pred p;\n"
                     " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(smem_u32(b)), "r"(parity)
                     : "memory");
    } while (!done);
}

} // namespace sieve_cuda

#endif

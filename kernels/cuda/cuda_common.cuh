/* cuda_common.cuh: what the CUDA backend's files share: the context struct and the
 * error-check macros. Internal to kernels/cuda. */
#ifndef SIEVE_CUDA_COMMON_CUH
#define SIEVE_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <stdio.h>

#include "sieve_kernels_internal.h"
#include "sieve_pool.h"

struct sieve__cuda_ctx {
    int ordinal;
    cudaDeviceProp prop;
    cudaStream_t stream;
    /* workspace owned by the context, grown on demand (used when the caller passes no
     * scratch, and for pinned staging of queries and results) */
    void *work;
    size_t work_bytes;
    void *pinned;
    size_t pinned_bytes;
    /* host threads for copies between pageable arrays and `pinned` (knn.cu, host_copier):
     * `copier` for every copy but the streamed downloads, `streamer` (more threads) for
     * those; each started at the first copy that needs it, stopped at close; state 0 not
     * yet started, 1 running, -1 off (SIEVE_CUDA_HOSTCOPY=0, or the pool could not be
     * created) */
    sieve_pool *copier, *streamer;
    int copier_state, streamer_state;
    /* the driver's cuTensorMapEncodeTiled (found through the runtime at open; NULL where the
     * driver lacks it: the scan then uses no tensor-memory-access loads) */
    void *encode_tiled;
};

/* Releases the context's workspaces. */
void sieve__cuda_release_workspace(sieve__cuda_ctx *c);
/* x rounded up to a multiple of a (host code: scratch layouts). */
static inline size_t sieve__align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Grows the context's device workspace (`work`) to at least bytes (its contents are lost
 * when it grows). 0, SIEVE_ENOMEM or SIEVE_EDEVICE. */
int sieve__cuda_ensure_work(sieve__cuda_ctx *c, size_t bytes);

/* The scratch a call runs in (*base): the caller's when scratch is not NULL (SIEVE_ENOSPC
 * when it holds fewer than need bytes), else the context's workspace grown to need. 0,
 * SIEVE_ENOSPC, SIEVE_ENOMEM or SIEVE_EDEVICE. */
static inline int sieve__cuda_scratch(sieve__cuda_ctx *c, void *scratch, size_t scratch_bytes,
                                      size_t need, unsigned char **base) {
    if (scratch) {
        if (scratch_bytes < need) return SIEVE_ENOSPC;
        *base = (unsigned char *)scratch;
        return 0;
    }
    const int rc = sieve__cuda_ensure_work(c, need);
    if (rc) return rc;
    *base = (unsigned char *)c->work;
    return 0;
}

/* The end of an entry point that queued work on c's stream: when rc is a device failure (not
 * SIEVE_EINVAL, SIEVE_ENOTSUP or SIEVE_ENOSPC, which return before anything is queued), waits
 * for the queued work, which may still write scratch and the outputs, and clears the error.
 * Returns rc. */
static inline int sieve__cuda_settle(sieve__cuda_ctx *c, int rc) {
    if (rc && rc != SIEVE_EINVAL && rc != SIEVE_ENOTSUP && rc != SIEVE_ENOSPC) {
        cudaStreamSynchronize(c->stream);
        cudaGetLastError();
    }
    return rc;
}

/* Reports a failed CUDA call with file and line on stderr, returns SIEVE_EDEVICE. */
static inline int sieve__cuda_fail(cudaError_t e, const char *what, const char *file, int line) {
    fprintf(stderr, "sieve: CUDA error %s (%s) in %s at %s:%d\n", cudaGetErrorName(e),
            cudaGetErrorString(e), what, file, line);
    return e == cudaErrorMemoryAllocation ? SIEVE_ENOMEM : SIEVE_EDEVICE;
}

#define SIEVE_CUDA_TRY(call)                                                        \
    do {                                                                            \
        cudaError_t sieve__e = (call);                                              \
        if (sieve__e != cudaSuccess) {                                              \
            cudaGetLastError();                                                     \
            return sieve__cuda_fail(sieve__e, #call, __FILE__, __LINE__);           \
        }                                                                           \
    } while (0)

/* N CUDA events for timing the phases of one call; destroyed with the object. */
template <int N>
struct sieve__cuda_events {
    cudaEvent_t e[N] = {};
    sieve__cuda_events() = default;
    sieve__cuda_events(const sieve__cuda_events &) = delete;
    sieve__cuda_events &operator=(const sieve__cuda_events &) = delete;
    ~sieve__cuda_events() {
        for (auto &x : e)
            if (x) cudaEventDestroy(x);
    }
    /* 0, or SIEVE_EDEVICE / SIEVE_ENOMEM (reported) */
    int create() {
        for (auto &x : e) {
            const cudaError_t r = cudaEventCreate(&x);
            if (r != cudaSuccess) {
                cudaGetLastError();
                return sieve__cuda_fail(r, "cudaEventCreate", __FILE__, __LINE__);
            }
        }
        return 0;
    }
    /* milliseconds from event a to event b, 0 where they cannot be read */
    float ms(int a, int b) const {
        float v = 0.f;
        if (cudaEventElapsedTime(&v, e[a], e[b]) != cudaSuccess) return 0.f;
        return v;
    }
};

/* After every launch: catches launch-configuration errors. */
#define SIEVE_CUDA_LAUNCH_CHECK() SIEVE_CUDA_TRY(cudaGetLastError())

#endif

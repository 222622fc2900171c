/* block_sparse.c: the device-agnostic entry points of block-sparse prefill with mean
 * correction (sieve_kernels.h, "attention: block-sparse prefill").
 * Owns: the parameter defaults, the argument checks (SIEVE_EINVAL before any work), the
 * selection's layout, dispatch to the CPU or CUDA backend and the call's wall time.
 * Must not: implement the kernels (kernels/cpu/block_sparse.c, the CUDA backend) or the
 * float64 references (kernels/block_sparse_ref.c), keep state between calls.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sieve_kernels_internal.h"

void sieve_bsp_params_init(sieve_bsp_params *p, sieve_dtype dtype, uint32_t n_queries,
                           uint32_t q_heads, uint32_t kv_heads, uint32_t head_dim,
                           uint32_t v_dim, uint32_t n_keys) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    sieve_attn_params_init(&p->attn, dtype, n_queries, q_heads, kv_heads, head_dim, v_dim,
                           n_keys);
    p->block = 128; /* FlashPrefill V2's configuration: 256 sink and 512 window tokens */
    p->alpha = 0.1f;
    p->sink_blocks = 2;
    p->window_blocks = 4;
    p->correct = 1;
}

/* per_head: the sum over tiles of n_I, and n_blocks (optional) the n_I, written only when
 * the sum fits. 0 when it (or kv_heads times it) passes INT64_MAX. */
static int bsp_per_head(const sieve_bsp_params *p, uint32_t tiles, uint64_t *per_head,
                        uint32_t *n_blocks) {
    uint64_t sum = 0;
    for (uint32_t i = 0; i < tiles; i++)
        sum += sieve__bsp_visible_blocks(p, i); /* at most 2^32 tiles x 2^31 blocks: no wrap */
    if (sum > (uint64_t)INT64_MAX / p->attn.kv_heads) return 0;
    if (n_blocks)
        for (uint32_t i = 0; i < tiles; i++) n_blocks[i] = sieve__bsp_visible_blocks(p, i);
    *per_head = sum;
    return 1;
}

int sieve__check_bsp_params(const sieve_bsp_params *p) {
    if (!p) return SIEVE_EINVAL;
    int rc = sieve__check_attn_params(&p->attn);
    if (rc) return rc;
    if (p->block == 0) return SIEVE_EINVAL;
    if (!(p->alpha >= 0.0f && p->alpha <= 1.0f)) return SIEVE_EINVAL; /* NaN fails too */
    if (p->correct != 0 && p->correct != 1) return SIEVE_EINVAL;
    return 0;
}

int sieve_bsp_layout(const sieve_bsp_params *p, uint32_t *tiles, uint64_t *per_head,
                     uint32_t *n_blocks) {
    if (!p || !tiles || !per_head) return SIEVE_EINVAL;
    int rc = sieve__check_bsp_params(p);
    if (rc) return rc;
    const uint32_t nt = sieve__bsp_tiles(p);
    uint64_t ph;
    if (!bsp_per_head(p, nt, &ph, n_blocks)) return SIEVE_EINVAL;
    *tiles = nt;
    *per_head = ph;
    return 0;
}

int sieve_bsp_scratch_size(sieve_device *dev, const sieve_bsp_params *p, size_t *bytes) {
    if (!dev || !p || !bytes) return SIEVE_EINVAL;
    int rc = sieve__check_bsp_params(p);
    if (rc) return rc;
    uint64_t ph;
    if (!bsp_per_head(p, sieve__bsp_tiles(p), &ph, NULL)) return SIEVE_EINVAL;
    if (dev->kind == SIEVE_DEVICE_CUDA) return sieve__cuda_bsp_scratch_size(dev->cuda, p, bytes);
    *bytes = 0; /* the CPU allocates its buffers itself */
    return 0;
}

int sieve_block_sparse_prefill(sieve_device *dev, const sieve_bsp_params *p, const void *q,
                               const void *keys, const void *values, void *scratch,
                               size_t scratch_bytes, float *out, float *lse,
                               uint32_t *sel_counts, int32_t *sel_blocks,
                               sieve_bsp_stats *stats) {
    if (!dev || !p || !q || !keys || !values || !out) return SIEVE_EINVAL;
    if (!sel_counts != !sel_blocks) return SIEVE_EINVAL; /* both or neither */
    int rc = sieve__check_bsp_params(p);
    if (rc) return rc;
    uint64_t ph;
    if (!bsp_per_head(p, sieve__bsp_tiles(p), &ph, NULL)) return SIEVE_EINVAL;
    const double t0 = sieve__now_ms();
    sieve_bsp_stats st;
    memset(&st, 0, sizeof st);
    /* statistics only when asked for (CUDA downloads the selection's counts for them) */
    sieve_bsp_stats *sp = stats ? &st : NULL;
    if (dev->kind == SIEVE_DEVICE_CUDA)
        rc = sieve__cuda_block_sparse_prefill(dev->cuda, p, q, keys, values, scratch,
                                              scratch_bytes, out, lse, sel_counts, sel_blocks,
                                              sp);
    else /* the CPU needs no scratch (sieve_bsp_scratch_size gives 0) and ignores it */
        rc = sieve__cpu_block_sparse_prefill(dev, p, q, keys, values, out, lse, sel_counts,
                                             sel_blocks, sp);
    if (rc) return rc;
    if (stats) {
        st.ms_total = sieve__now_ms() - t0;
        *stats = st;
    }
    return 0;
}

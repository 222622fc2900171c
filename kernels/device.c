/* device.c: device selection and the device-agnostic entry points of sieve_kernels.h.
 * Owns: parsing device specs, dispatch to the CPU or CUDA backend, argument checks shared
 * by every search. Must not: implement kernels (kernels/cpu, kernels/cuda do). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sieve_kernels_internal.h"

double sieve__now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

int sieve_cuda_device_count(void) {
    int n = sieve__cuda_device_count();
    return n > 0 ? n : 0;
}

static int parse_uint(const char *s, long max, long *out) {
    if (*s < '0' || *s > '9') return SIEVE_EINVAL; /* no sign, no blank, not empty */
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 0 || v > max) return SIEVE_EINVAL;
    *out = v;
    return 0;
}

static int open_cpu(uint32_t threads, sieve_device **out) {
    sieve_device *d = calloc(1, sizeof *d);
    if (!d) return SIEVE_ENOMEM;
    d->kind = SIEVE_DEVICE_CPU;
    d->ordinal = -1;
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (uint32_t)n : 1u;
    }
    d->threads = threads;
    *out = d;
    return 0;
}

static int open_cuda(int ordinal, sieve_device **out) {
    if (ordinal >= sieve_cuda_device_count()) return SIEVE_ENODEV;
    sieve_device *d = calloc(1, sizeof *d);
    if (!d) return SIEVE_ENOMEM;
    d->kind = SIEVE_DEVICE_CUDA;
    d->ordinal = ordinal;
    d->threads = 1;
    int rc = sieve__cuda_open(ordinal, &d->cuda);
    if (rc) {
        free(d);
        return rc;
    }
    *out = d;
    return 0;
}

int sieve_device_open(const char *spec, sieve_device **out) {
    if (!spec || !out) return SIEVE_EINVAL;
    *out = NULL;
    long v = 0;
    if (!strcmp(spec, "auto"))
        return sieve_cuda_device_count() > 0 ? open_cuda(0, out) : open_cpu(0, out);
    if (!strcmp(spec, "cpu")) return open_cpu(0, out);
    if (!strncmp(spec, "cpu:", 4)) {
        if (parse_uint(spec + 4, 1024, &v) || v == 0) return SIEVE_EINVAL;
        return open_cpu((uint32_t)v, out);
    }
    if (!strcmp(spec, "cuda")) return open_cuda(0, out);
    if (!strncmp(spec, "cuda:", 5)) {
        if (parse_uint(spec + 5, INT_MAX, &v)) return SIEVE_EINVAL;
        return open_cuda((int)v, out);
    }
    return SIEVE_EINVAL;
}

void sieve_device_close(sieve_device *dev) {
    if (!dev) return;
    if (dev->kind == SIEVE_DEVICE_CUDA) sieve__cuda_close(dev->cuda);
    free(dev);
}

sieve_device_kind sieve_device_get_kind(const sieve_device *dev) { return dev->kind; }

int sieve_device_get_info(sieve_device *dev, sieve_device_info *info) {
    if (!dev || !info) return SIEVE_EINVAL;
    memset(info, 0, sizeof *info);
    info->kind = dev->kind;
    info->ordinal = dev->ordinal;
    info->threads = dev->threads;
    if (dev->kind == SIEVE_DEVICE_CUDA) return sieve__cuda_info(dev->cuda, info);
    snprintf(info->name, sizeof info->name, "cpu (%u threads)", dev->threads);
    return 0;
}

int sieve_device_alloc(sieve_device *dev, size_t bytes, void **out) {
    if (!dev || !out) return SIEVE_EINVAL;
    *out = NULL;
    if (dev->kind == SIEVE_DEVICE_CUDA) return sieve__cuda_alloc(dev->cuda, bytes, out);
    *out = malloc(bytes ? bytes : 1);
    return *out ? 0 : SIEVE_ENOMEM;
}

void sieve_device_free(sieve_device *dev, void *ptr) {
    if (!dev || !ptr) return;
    if (dev->kind == SIEVE_DEVICE_CUDA) sieve__cuda_free(dev->cuda, ptr);
    else free(ptr);
}

static int copy(sieve_device *dev, void *dst, const void *src, size_t bytes, int kind,
                int async) {
    if (!dev || (bytes && (!dst || !src))) return SIEVE_EINVAL;
    if (!bytes) return 0;
    if (dev->kind == SIEVE_DEVICE_CUDA)
        return sieve__cuda_copy(dev->cuda, dst, src, bytes, kind, async);
    memmove(dst, src, bytes);
    return 0;
}

int sieve_device_upload(sieve_device *dev, void *dst, const void *src, size_t bytes) {
    return copy(dev, dst, src, bytes, SIEVE__COPY_H2D, 0);
}

int sieve_device_upload_async(sieve_device *dev, void *dst, const void *src, size_t bytes) {
    return copy(dev, dst, src, bytes, SIEVE__COPY_H2D, 1);
}

int sieve_device_download(sieve_device *dev, void *dst, const void *src, size_t bytes) {
    return copy(dev, dst, src, bytes, SIEVE__COPY_D2H, 0);
}

int sieve_device_sync(sieve_device *dev) {
    if (!dev) return SIEVE_EINVAL;
    return dev->kind == SIEVE_DEVICE_CUDA ? sieve__cuda_sync(dev->cuda) : 0;
}

int sieve_host_alloc_pinned(sieve_device *dev, size_t bytes, void **out) {
    if (!dev || !out) return SIEVE_EINVAL;
    *out = NULL;
    if (dev->kind == SIEVE_DEVICE_CUDA) return sieve__cuda_host_alloc(dev->cuda, bytes, out);
    *out = malloc(bytes ? bytes : 1);
    return *out ? 0 : SIEVE_ENOMEM;
}

void sieve_host_free_pinned(sieve_device *dev, void *ptr) {
    if (!dev || !ptr) return;
    if (dev->kind == SIEVE_DEVICE_CUDA) sieve__cuda_host_free(dev->cuda, ptr);
    else free(ptr);
}

/* ---------------------------------------------------------------- search dispatch */

void sieve_search_params_init(sieve_search_params *p, sieve_metric metric, uint32_t k) {
    memset(p, 0, sizeof *p);
    p->metric = metric;
    p->k = k;
    p->seed = 0x5eed5eedull;
}

void sieve_search_stats_add(sieve_search_stats *a, const sieve_search_stats *b) {
    a->queries += b->queries;
    a->rows_scanned += b->rows_scanned;
    a->rows_sampled += b->rows_sampled;
    a->candidates_admitted += b->candidates_admitted;
    a->rescans += b->rescans;
    for (int i = 0; i < SIEVE_PATH_COUNT; i++) a->path_count[i] += b->path_count[i];
    a->select_segmented += b->select_segmented;
    a->select_speculated += b->select_speculated;
    a->speculation_missed += b->speculation_missed;
    a->launches_chained += b->launches_chained;
    a->ms_sample += b->ms_sample;
    a->ms_scan += b->ms_scan;
    a->ms_select += b->ms_select;
    a->ms_total += b->ms_total;
    a->ms_download += b->ms_download;
}

static int check_matrix(const sieve_matrix *m, sieve_metric metric) {
    if (!m || m->dim == 0 || m->n_rows == 0 || !m->pages) return SIEVE_EINVAL;
    if (sieve_dtype_size(m->dtype) == 0) return SIEVE_EINVAL;
    if (m->rows_per_page == 0 || m->rows_per_page % 64) return SIEVE_EINVAL;
    if (m->n_rows > UINT32_MAX) return SIEVE_EINVAL; /* rows are 32-bit inside the kernels */
    if (metric == SIEVE_METRIC_EUCLID && !m->norm_pages) return SIEVE_EINVAL;
    return 0;
}

int sieve__check_search_args(const sieve_matrix *m, const float *queries, uint32_t n_queries,
                             const sieve_search_params *p, const int64_t *out_rows,
                             const float *out_scores) {
    if (!p || !queries || !out_rows || !out_scores || n_queries == 0) return SIEVE_EINVAL;
    if ((unsigned)p->metric > SIEVE_METRIC_EUCLID) return SIEVE_EINVAL;
    int rc = check_matrix(m, p->metric);
    if (rc) return rc;
    if (p->k == 0 || (uint64_t)p->k > m->n_rows) return SIEVE_EINVAL;
    return 0;
}

int sieve_knn_scratch_size(sieve_device *dev, const sieve_matrix *m, uint32_t n_queries,
                           const sieve_search_params *p, size_t *bytes) {
    if (!dev || !p || !bytes || n_queries == 0) return SIEVE_EINVAL;
    int rc = check_matrix(m, p->metric);
    if (rc) return rc;
    if (p->k == 0 || (uint64_t)p->k > m->n_rows) return SIEVE_EINVAL;
    if (dev->kind == SIEVE_DEVICE_CUDA)
        return sieve__cuda_knn_scratch_size(dev->cuda, m, n_queries, p, bytes);
    return sieve__cpu_knn_scratch_size(dev, m, n_queries, p, bytes);
}

int sieve_knn(sieve_device *dev, const sieve_matrix *m, const float *queries,
              uint32_t n_queries, const sieve_search_params *p, void *scratch,
              size_t scratch_bytes, int64_t *out_rows, float *out_scores,
              uint32_t *out_counts, uint8_t *out_paths, sieve_search_stats *stats) {
    if (!dev) return SIEVE_EINVAL;
    int rc = sieve__check_search_args(m, queries, n_queries, p, out_rows, out_scores);
    if (rc) return rc;
    if (dev->kind == SIEVE_DEVICE_CUDA)
        return sieve__cuda_knn(dev->cuda, m, queries, n_queries, p, scratch, scratch_bytes,
                               out_rows, out_scores, out_counts, out_paths, stats);
    return sieve__cpu_knn(dev, m, queries, n_queries, p, scratch, scratch_bytes, out_rows,
                          out_scores, out_counts, out_paths, stats);
}

int sieve_knn_materialized(sieve_device *dev, const sieve_matrix *m, const float *queries,
                           uint32_t n_queries, const sieve_search_params *p,
                           int64_t *out_rows, float *out_scores, uint32_t *out_counts,
                           sieve_search_stats *stats) {
    if (!dev) return SIEVE_EINVAL;
    int rc = sieve__check_search_args(m, queries, n_queries, p, out_rows, out_scores);
    if (rc) return rc;
    if (dev->kind == SIEVE_DEVICE_CUDA)
        return sieve__cuda_knn_materialized(dev->cuda, m, queries, n_queries, p, out_rows,
                                            out_scores, out_counts, stats);
    return sieve__cpu_knn_materialized(dev, m, queries, n_queries, p, out_rows, out_scores,
                                       out_counts, stats);
}

/* ---------------------------------------------------------------- test/bench data */

int sieve_device_fill_normal(sieve_device *dev, void *dst, sieve_dtype dtype, size_t n,
                             uint64_t seed, float scale) {
    if (!dev || (n && !dst) || sieve_dtype_size(dtype) == 0) return SIEVE_EINVAL;
    if (dev->kind == SIEVE_DEVICE_CUDA)
        return sieve__cuda_fill_normal(dev->cuda, dst, dtype, n, seed, scale);
    for (size_t i = 0; i < n; i++) {
        float v = sieve__normal_at(seed, i) * scale;
        switch (dtype) {
        case SIEVE_DTYPE_F32: ((float *)dst)[i] = v; break;
        case SIEVE_DTYPE_F16: ((uint16_t *)dst)[i] = sieve_f32_to_f16(v); break;
        case SIEVE_DTYPE_BF16: ((uint16_t *)dst)[i] = sieve_f32_to_bf16(v); break;
        }
    }
    return 0;
}

int sieve_device_row_sqnorms(sieve_device *dev, sieve_dtype dtype, const void *rows,
                             uint64_t n_rows, uint32_t dim, float *out) {
    size_t esz = sieve_dtype_size(dtype);
    if (!dev || esz == 0 || dim == 0 || (n_rows && (!rows || !out))) return SIEVE_EINVAL;
    if (dev->kind == SIEVE_DEVICE_CUDA)
        return sieve__cuda_row_sqnorms(dev->cuda, dtype, rows, n_rows, dim, out);
    for (uint64_t r = 0; r < n_rows; r++)
        out[r] = sieve_row_sqnorm(dtype, (const unsigned char *)rows + r * dim * esz, dim);
    return 0;
}

static const char *const pattern_names[SIEVE_PATTERN_COUNT] = {
    "normal", "ties", "dups", "sorted_asc", "sorted_desc", "outlier", "band"};

const char *sieve_pattern_name(sieve_pattern pattern) {
    return (unsigned)pattern < SIEVE_PATTERN_COUNT ? pattern_names[pattern] : NULL;
}

int sieve_pattern_parse(const char *name, sieve_pattern *out) {
    if (!name || !out) return SIEVE_EINVAL;
    for (int i = 0; i < SIEVE_PATTERN_COUNT; i++)
        if (!strcmp(name, pattern_names[i])) {
            *out = (sieve_pattern)i;
            return 0;
        }
    return SIEVE_EINVAL;
}

int sieve_device_fill_rows(sieve_device *dev, void *dst, sieve_dtype dtype, uint64_t n_rows,
                           uint32_t dim, sieve_pattern pattern, uint64_t seed) {
    size_t esz = sieve_dtype_size(dtype);
    if (!dev || esz == 0 || dim == 0 || (n_rows && !dst) ||
        (unsigned)pattern >= SIEVE_PATTERN_COUNT)
        return SIEVE_EINVAL;
    if (dev->kind == SIEVE_DEVICE_CUDA)
        return sieve__cuda_fill_rows(dev->cuda, dst, dtype, n_rows, dim, (int)pattern, seed);
    for (uint64_t r = 0; r < n_rows; r++)
        for (uint32_t i = 0; i < dim; i++) {
            float v = sieve__pattern_at((int)pattern, seed, n_rows, dim, r, i);
            size_t at = (size_t)(r * dim + i);
            switch (dtype) {
            case SIEVE_DTYPE_F32: ((float *)dst)[at] = v; break;
            case SIEVE_DTYPE_F16: ((uint16_t *)dst)[at] = sieve_f32_to_f16(v); break;
            case SIEVE_DTYPE_BF16: ((uint16_t *)dst)[at] = sieve_f32_to_bf16(v); break;
            }
        }
    return 0;
}

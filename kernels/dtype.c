/* dtype.c: element types, their names and float conversions, and the stored-row norm.
 * Owns nothing with state. Must not: allocate. */
#include <math.h>
#include <string.h>
#include <strings.h>

#include "sieve_kernels.h"

size_t sieve_dtype_size(sieve_dtype dtype) {
    switch (dtype) {
    case SIEVE_DTYPE_F32: return 4;
    case SIEVE_DTYPE_F16: return 2;
    case SIEVE_DTYPE_BF16: return 2;
    }
    return 0;
}

const char *sieve_dtype_name(sieve_dtype dtype) {
    switch (dtype) {
    case SIEVE_DTYPE_F32: return "float32";
    case SIEVE_DTYPE_F16: return "float16";
    case SIEVE_DTYPE_BF16: return "bfloat16";
    }
    return NULL;
}

int sieve_dtype_parse(const char *name, sieve_dtype *out) {
    if (!name || !out) return SIEVE_EINVAL;
    if (!strcasecmp(name, "float32") || !strcasecmp(name, "f32") || !strcasecmp(name, "float"))
        *out = SIEVE_DTYPE_F32;
    else if (!strcasecmp(name, "float16") || !strcasecmp(name, "f16") || !strcasecmp(name, "half"))
        *out = SIEVE_DTYPE_F16;
    else if (!strcasecmp(name, "bfloat16") || !strcasecmp(name, "bf16"))
        *out = SIEVE_DTYPE_BF16;
    else
        return SIEVE_EINVAL;
    return 0;
}

const char *sieve_metric_name(sieve_metric metric) {
    switch (metric) {
    case SIEVE_METRIC_DOT: return "Dot";
    case SIEVE_METRIC_COSINE: return "Cosine";
    case SIEVE_METRIC_EUCLID: return "Euclid";
    }
    return NULL;
}

int sieve_metric_parse(const char *name, sieve_metric *out) {
    if (!name || !out) return SIEVE_EINVAL;
    if (!strcasecmp(name, "Dot")) *out = SIEVE_METRIC_DOT;
    else if (!strcasecmp(name, "Cosine")) *out = SIEVE_METRIC_COSINE;
    else if (!strcasecmp(name, "Euclid")) *out = SIEVE_METRIC_EUCLID;
    else return SIEVE_EINVAL;
    return 0;
}

static uint32_t f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float bits_f32(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

uint16_t sieve_f32_to_f16(float x) {
    uint32_t u = f32_bits(x);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t exp = (u >> 23) & 0xffu;
    uint32_t man = u & 0x7fffffu;
    if (exp == 0xffu) /* inf or nan */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0u));
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u); /* overflow -> inf */
    if (e <= 0) {                                    /* subnormal or zero */
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1u);
        uint32_t mid = 1u << (shift - 1u);
        if (rem > mid || (rem == mid && (half & 1u))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) half++; /* may carry into exp: ok */
    return (uint16_t)half;
}

float sieve_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0) {
        if (man == 0) return bits_f32(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (man << 13));
    return bits_f32(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

uint16_t sieve_f32_to_bf16(float x) {
    uint32_t u = f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet nan */
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;
    return (uint16_t)(u >> 16);
}

float sieve_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SIEVE__X86 1

/* F16C conversions: round to nearest even, like the scalar code (inputs are finite). */
__attribute__((target("f16c,avx"))) static void f32_to_f16_f16c(const float *src, uint16_t *dst,
                                                                 size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(dst + i), h);
    }
    for (; i < n; i++) dst[i] = sieve_f32_to_f16(src[i]);
}

__attribute__((target("f16c,avx"))) static void f16_to_f32_f16c(const uint16_t *src, float *dst,
                                                                 size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) dst[i] = sieve_f16_to_f32(src[i]);
}

static int have_f16c(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
}
#endif

void sieve_convert_from_f32(sieve_dtype dtype, const float *src, void *dst, size_t n) {
    switch (dtype) {
    case SIEVE_DTYPE_F32: memmove(dst, src, n * 4); break;
    case SIEVE_DTYPE_F16:
#ifdef SIEVE__X86
        if (have_f16c()) {
            /* NaN payloads may differ from the scalar path; only finite values are stored */
            f32_to_f16_f16c(src, (uint16_t *)dst, n);
            break;
        }
#endif
        for (size_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = sieve_f32_to_f16(src[i]);
        break;
    case SIEVE_DTYPE_BF16:
        for (size_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = sieve_f32_to_bf16(src[i]);
        break;
    }
}

void sieve_convert_to_f32(sieve_dtype dtype, const void *src, float *dst, size_t n) {
    switch (dtype) {
    case SIEVE_DTYPE_F32: memmove(dst, src, n * 4); break;
    case SIEVE_DTYPE_F16:
#ifdef SIEVE__X86
        if (have_f16c()) {
            f16_to_f32_f16c((const uint16_t *)src, dst, n);
            break;
        }
#endif
        for (size_t i = 0; i < n; i++) dst[i] = sieve_f16_to_f32(((const uint16_t *)src)[i]);
        break;
    case SIEVE_DTYPE_BF16:
        for (size_t i = 0; i < n; i++) dst[i] = sieve_bf16_to_f32(((const uint16_t *)src)[i]);
        break;
    }
}

static inline float elem_f32(sieve_dtype dtype, const void *row, uint32_t i) {
    switch (dtype) {
    case SIEVE_DTYPE_F16: return sieve_f16_to_f32(((const uint16_t *)row)[i]);
    case SIEVE_DTYPE_BF16: return sieve_bf16_to_f32(((const uint16_t *)row)[i]);
    default: return ((const float *)row)[i];
    }
}

/* Eight interleaved partial sums (element i goes to lane i % 8, fmaf in index order within
 * a lane), combined pairwise: vectorises on the CPU, and the CUDA norm kernel uses the same
 * order, so |x|^2 is bit-identical everywhere. fmaf is exactly rounded whether the hardware
 * instruction or libm computes it, so the FMA clone below changes speed only. */
#define SIEVE__SQNORM_BODY                                                                 \
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                 \
    uint32_t i = 0;                                                                        \
    if (dtype == SIEVE_DTYPE_F32) {                                                        \
        const float *x = row;                                                              \
        for (; i + 8 <= dim; i += 8)                                                       \
            for (int l = 0; l < 8; l++) s[l] = fmaf(x[i + l], x[i + l], s[l]);             \
    } else {                                                                               \
        float buf[64];                                                                     \
        for (; i + 64 <= dim; i += 64) {                                                   \
            sieve_convert_to_f32(dtype, (const unsigned char *)row + (size_t)i * 2, buf, 64); \
            for (int j = 0; j < 64; j += 8)                                                \
                for (int l = 0; l < 8; l++) s[l] = fmaf(buf[j + l], buf[j + l], s[l]);     \
        }                                                                                  \
    }                                                                                      \
    for (; i < dim; i++) {                                                                 \
        float v = elem_f32(dtype, row, i);                                                 \
        s[i % 8] = fmaf(v, v, s[i % 8]);                                                   \
    }                                                                                      \
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));

#ifdef SIEVE__X86
__attribute__((target("fma,avx2"))) static float sqnorm_fma(sieve_dtype dtype, const void *row,
                                                           uint32_t dim) {
    SIEVE__SQNORM_BODY
}
#endif

static float sqnorm_plain(sieve_dtype dtype, const void *row, uint32_t dim) { SIEVE__SQNORM_BODY }

float sieve_row_sqnorm(sieve_dtype dtype, const void *row, uint32_t dim) {
#ifdef SIEVE__X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2"))
        return sqnorm_fma(dtype, row, dim);
#endif
    return sqnorm_plain(dtype, row, dim);
}

float sieve_euclid_distance(const float *query, uint32_t dim, float key) {
    float n2 = 0.0f;
    for (uint32_t i = 0; i < dim; i++) n2 = fmaf(query[i], query[i], n2);
    return sqrtf(fmaxf(0.0f, n2 - key));
}

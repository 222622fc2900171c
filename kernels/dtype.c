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

void sieve_convert_from_f32(sieve_dtype dtype, const float *src, void *dst, size_t n) {
    switch (dtype) {
    case SIEVE_DTYPE_F32: memmove(dst, src, n * 4); break;
    case SIEVE_DTYPE_F16:
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
        for (size_t i = 0; i < n; i++) dst[i] = sieve_f16_to_f32(((const uint16_t *)src)[i]);
        break;
    case SIEVE_DTYPE_BF16:
        for (size_t i = 0; i < n; i++) dst[i] = sieve_bf16_to_f32(((const uint16_t *)src)[i]);
        break;
    }
}

float sieve_row_sqnorm(sieve_dtype dtype, const void *row, uint32_t dim) {
    float s = 0.0f;
    for (uint32_t i = 0; i < dim; i++) {
        float v;
        switch (dtype) {
        case SIEVE_DTYPE_F16: v = sieve_f16_to_f32(((const uint16_t *)row)[i]); break;
        case SIEVE_DTYPE_BF16: v = sieve_bf16_to_f32(((const uint16_t *)row)[i]); break;
        default: v = ((const float *)row)[i]; break;
        }
        s = fmaf(v, v, s);
    }
    return s;
}

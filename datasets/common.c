/* common.c: format and element-type names, float16 conversion and point ids.
 * Owns nothing with state. Must not: do I/O. */
#include <string.h>
#include <strings.h>

#include "ds_internal.h"

/* ------------------------------------------------------------ formats */

static const struct {
    sieve_ds_format f;
    const char *name;
    const char *ext;
} FORMATS[] = {
    {SIEVE_DS_FORMAT_FVECS, "fvecs", ".fvecs"},   {SIEVE_DS_FORMAT_IVECS, "ivecs", ".ivecs"},
    {SIEVE_DS_FORMAT_BVECS, "bvecs", ".bvecs"},   {SIEVE_DS_FORMAT_FBIN, "fbin", ".fbin"},
    {SIEVE_DS_FORMAT_IBIN, "ibin", ".ibin"},      {SIEVE_DS_FORMAT_U8BIN, "u8bin", ".u8bin"},
    {SIEVE_DS_FORMAT_I8BIN, "i8bin", ".i8bin"},   {SIEVE_DS_FORMAT_U64BIN, "u64bin", ".u64bin"},
    {SIEVE_DS_FORMAT_NPY, "npy", ".npy"},         {SIEVE_DS_FORMAT_JSONL, "jsonl", ".jsonl"},
    {SIEVE_DS_FORMAT_JSONL, "ndjson", ".ndjson"}, {SIEVE_DS_FORMAT_TSV, "tsv", ".tsv"},
    {SIEVE_DS_FORMAT_QRELS, "qrels", NULL},
};

sieve_ds_format sieve_ds_format_from_path(const char *path) {
    if (!path) return SIEVE_DS_FORMAT_AUTO;
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash)) return SIEVE_DS_FORMAT_AUTO;
    for (size_t i = 0; i < sizeof FORMATS / sizeof FORMATS[0]; i++)
        if (FORMATS[i].ext && !strcasecmp(dot, FORMATS[i].ext)) return FORMATS[i].f;
    return SIEVE_DS_FORMAT_AUTO;
}

const char *sieve_ds_format_name(sieve_ds_format f) {
    for (size_t i = 0; i < sizeof FORMATS / sizeof FORMATS[0]; i++)
        if (FORMATS[i].f == f) return FORMATS[i].name;
    return NULL;
}

int sieve_ds_format_parse(const char *name, sieve_ds_format *out) {
    if (!name || !out) return SIEVE_EINVAL;
    if (*name == '.') name++;
    for (size_t i = 0; i < sizeof FORMATS / sizeof FORMATS[0]; i++)
        if (!strcasecmp(name, FORMATS[i].name)) {
            *out = FORMATS[i].f;
            return 0;
        }
    return SIEVE_EINVAL;
}

int sieve_ds_format_is_dense(sieve_ds_format f) {
    return f >= SIEVE_DS_FORMAT_FVECS && f <= SIEVE_DS_FORMAT_NPY;
}

/* ------------------------------------------------------------ element types */

static const struct {
    sieve_ds_elem e;
    size_t size;
    const char *name, *alias;
} ELEMS[] = {
    {SIEVE_DS_ELEM_F32, 4, "float32", "f32"}, {SIEVE_DS_ELEM_F16, 2, "float16", "f16"},
    {SIEVE_DS_ELEM_U8, 1, "uint8", "u8"},     {SIEVE_DS_ELEM_I8, 1, "int8", "i8"},
    {SIEVE_DS_ELEM_I32, 4, "int32", "i32"},   {SIEVE_DS_ELEM_U32, 4, "uint32", "u32"},
    {SIEVE_DS_ELEM_I64, 8, "int64", "i64"},   {SIEVE_DS_ELEM_U64, 8, "uint64", "u64"},
};

size_t sieve_ds_elem_size(sieve_ds_elem e) {
    for (size_t i = 0; i < sizeof ELEMS / sizeof ELEMS[0]; i++)
        if (ELEMS[i].e == e) return ELEMS[i].size;
    return 0;
}

const char *sieve_ds_elem_name(sieve_ds_elem e) {
    for (size_t i = 0; i < sizeof ELEMS / sizeof ELEMS[0]; i++)
        if (ELEMS[i].e == e) return ELEMS[i].name;
    return NULL;
}

int sieve_ds_elem_parse(const char *name, sieve_ds_elem *out) {
    if (!name || !out) return SIEVE_EINVAL;
    for (size_t i = 0; i < sizeof ELEMS / sizeof ELEMS[0]; i++)
        if (!strcasecmp(name, ELEMS[i].name) || !strcasecmp(name, ELEMS[i].alias)) {
            *out = ELEMS[i].e;
            return 0;
        }
    return SIEVE_EINVAL;
}

/* ------------------------------------------------------------ float16 */

uint16_t sieve_ds_f32_to_f16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) /* infinity, or NaN kept quiet with its top payload bits */
        return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0u));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to infinity */
    if (a >= 0x38800000u) {                                   /* normal half (>= 2^-14) */
        uint32_t r = a - 0x38000000u;                          /* exponent bias 127 -> 15 */
        r += 0xfffu + ((r >> 13) & 1u);                        /* round half to even */
        return (uint16_t)(sign | (r >> 13));
    }
    if (a < 0x33000000u) return sign; /* below 2^-25 (or exactly it: tie to even 0) */
    /* Subnormal half: units of 2^-24. */
    uint32_t e = a >> 23;
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e; /* 14 .. 24 */
    uint32_t h = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

float sieve_ds_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    uint32_t u;
    if (e == 0x1fu) u = sign | 0x7f800000u | (m << 13);
    else if (e) u = sign | ((e + 112u) << 23) | (m << 13);
    else if (!m) u = sign;
    else {
        uint32_t s = 0;
        while (!(m & 0x400u)) {
            m <<= 1;
            s++;
        }
        u = sign | ((113u - s) << 23) | ((m & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ------------------------------------------------------------ ids */

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int sieve_ds_id_parse(const char *text, size_t len, sieve_ds_id *out) {
    if (!text || !out || len == 0) return SIEVE_EPARSE;
    memset(out, 0, sizeof *out);
    int digits = 1;
    for (size_t i = 0; i < len; i++)
        if (text[i] < '0' || text[i] > '9') digits = 0;
    if (digits && len <= 20) {
        uint64_t v = 0;
        for (size_t i = 0; i < len; i++) {
            uint64_t d = (uint64_t)(text[i] - '0');
            if (v > (UINT64_MAX - d) / 10) return SIEVE_EPARSE;
            v = v * 10 + d;
        }
        out->num = v;
        return 0;
    }
    if (len != 32 && len != 36) return SIEVE_EPARSE;
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (len == 36 && (i == 8 || i == 13 || i == 18 || i == 23)) {
            if (text[i] != '-') return SIEVE_EPARSE;
            continue;
        }
        int v = hexval(text[i]);
        if (v < 0) return SIEVE_EPARSE;
        if (k % 2 == 0) out->uuid[k / 2] = (uint8_t)(v << 4);
        else out->uuid[k / 2] |= (uint8_t)v;
        k++;
    }
    out->is_uuid = 1;
    return 0;
}

void sieve_ds_id_format(const sieve_ds_id *id, char buf[40]) {
    if (!id->is_uuid) {
        snprintf(buf, 40, "%llu", (unsigned long long)id->num);
        return;
    }
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) buf[o++] = '-';
        buf[o++] = hex[id->uuid[i] >> 4];
        buf[o++] = hex[id->uuid[i] & 15];
    }
    buf[o] = 0;
}

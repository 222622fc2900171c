/* upsert_binary.c: the binary upsert body (Content-Type: application/x-sieve-points).
 *
 * Owns: checking a binary body completely (header, lengths, dimension, dtype, ids, values,
 * the optional payload section) and turning it into sieve__upsert points for the route.
 * The layout is documented in server/README.md ("Binary upsert"). float32 rows are not
 * copied: the points' vectors point into the body, so the body must outlive the store call.
 * float16 and bfloat16 rows are widened to float32 (exactly) into u->vectors.
 * Must not: touch the store or accept anything half-checked: every error is found before the
 * route writes, and each names the part of the body that is wrong.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

static uint16_t le16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}
static uint64_t le64(const unsigned char *p) {
    return (uint64_t)le32(p) | ((uint64_t)le32(p + 4) << 32);
}

static const char *dtype_wire_name(unsigned t) {
    switch (t) {
    case SIEVE_BIN_F32: return "float32";
    case SIEVE_BIN_F16: return "float16";
    case SIEVE_BIN_BF16: return "bfloat16";
    default: return "?";
    }
}

/* The payload section: a JSON array of n entries, each an object or null. */
static int parse_payloads(const char *s, size_t len, sieve__upsert *u, sieve__err *e) {
    json_error_t je;
    json_t *arr = json_loadb(s, len, JSON_REJECT_DUPLICATES, &je);
    if (!arr)
        return sieve__fail(e, 400, "payloads: invalid JSON at byte %d of the payload section: %s",
                           je.position, je.text);
    int rc = 0;
    if (!json_is_array(arr)) {
        rc = sieve__fail(e, 400, "payloads: expected a JSON array with one object or null per "
                                 "point, got %s", sieve__jv_type(arr));
    } else if (json_array_size(arr) != u->n) {
        rc = sieve__fail(e, 400, "payloads: expected %zu entries (one per point), got %zu", u->n,
                         json_array_size(arr));
    } else {
        u->payloads = calloc(u->n ? u->n : 1, sizeof *u->payloads);
        if (!u->payloads) rc = sieve__fail(e, 500, "out of memory");
        else u->cap = u->n; /* sieve__upsert_free frees cap entries */
        for (size_t i = 0; i < u->n && !rc; i++) {
            json_t *p = json_array_get(arr, i);
            if (json_is_null(p)) continue;
            if (!json_is_object(p)) {
                rc = sieve__fail(e, 400, "payloads[%zu]: expected an object or null, got %s", i,
                                 sieve__jv_type(p));
                break;
            }
            u->payloads[i] = json_dumps(p, JSON_COMPACT);
            if (!u->payloads[i]) rc = sieve__fail(e, 500, "out of memory");
        }
    }
    json_decref(arr);
    return rc;
}

int sieve__upsert_parse_binary(const char *body, size_t len, uint32_t dim, sieve__upsert *u,
                               sieve__err *e) {
    memset(u, 0, sizeof *u);
    const unsigned char *b = (const unsigned char *)body;
    if (len < SIEVE_BIN_HEADER)
        return sieve__fail(e, 400, "binary upsert: the body has %zu bytes, shorter than the "
                                   "%u-byte header", len, SIEVE_BIN_HEADER);
    if (memcmp(b, SIEVE_BIN_MAGIC, 4))
        return sieve__fail(e, 400, "binary upsert: bad magic (expected the bytes \"%s\" at "
                                   "offset 0)", SIEVE_BIN_MAGIC);
    unsigned version = le16(b + 4), dtype = le16(b + 6);
    uint32_t flags = le32(b + 8), bdim = le32(b + 12);
    uint64_t count = le64(b + 16), pbytes = le64(b + 24);
    if (version != SIEVE_BIN_VERSION)
        return sieve__fail(e, 400, "binary upsert: version %u is not supported (this server "
                                   "reads version %u)", version, SIEVE_BIN_VERSION);
    if (dtype != SIEVE_BIN_F32 && dtype != SIEVE_BIN_F16 && dtype != SIEVE_BIN_BF16)
        return sieve__fail(e, 400, "binary upsert: dtype %u is unknown (0 float32, 1 float16, "
                                   "2 bfloat16)", dtype);
    if (flags & ~(uint32_t)SIEVE_BIN_FLAG_PAYLOADS)
        return sieve__fail(e, 400, "binary upsert: flags 0x%x has unknown bits (only bit 0, "
                                   "payloads, is defined)", (unsigned)flags);
    if (bdim != dim)
        return sieve__fail(e, 400, "binary upsert: dim is %u but the collection's vectors have "
                                   "%u dimensions", (unsigned)bdim, (unsigned)dim);
    if (!(flags & SIEVE_BIN_FLAG_PAYLOADS) && pbytes)
        return sieve__fail(e, 400, "binary upsert: payload_bytes is %llu but the payloads flag "
                                   "is not set", (unsigned long long)pbytes);
    size_t esize = dtype == SIEVE_BIN_F32 ? 4 : 2;
    uint64_t per_point = 8 + (uint64_t)dim * esize; /* dim <= 65536: no overflow */
    uint64_t room = len - SIEVE_BIN_HEADER;
    if (count > room / per_point || pbytes > room - count * per_point ||
        count * per_point + pbytes != room)
        return sieve__fail(e, 400, "binary upsert: the body has %zu bytes but the header "
                                   "(count %llu, dim %u, %s, payload_bytes %llu) describes %s",
                           len, (unsigned long long)count, (unsigned)dim,
                           dtype_wire_name(dtype), (unsigned long long)pbytes,
                           count > room / per_point || pbytes > room - count * per_point
                               ? "more"
                               : "fewer");
    if ((flags & SIEVE_BIN_FLAG_PAYLOADS) && !pbytes)
        return sieve__fail(e, 400, "binary upsert: the payloads flag is set but payload_bytes "
                                   "is 0");
    size_t n = (size_t)count;
    const unsigned char *ids = b + SIEVE_BIN_HEADER;
    const unsigned char *rows = ids + n * 8;
    for (size_t i = 0; i < n; i++) {
        uint64_t id = le64(ids + i * 8);
        if (id > (uint64_t)INT64_MAX)
            return sieve__fail(e, 400, "ids[%zu]: %llu is larger than the largest point id "
                                       "2^63-1", i, (unsigned long long)id);
    }
    u->n = n;
    u->points = calloc(n ? n : 1, sizeof *u->points);
    if (!u->points) return sieve__fail(e, 500, "out of memory");
    if (esize == 2) {
        u->vectors = malloc(n ? n * (size_t)dim * sizeof(float) : 1);
        if (!u->vectors) return sieve__fail(e, 500, "out of memory");
        sieve_convert_to_f32(dtype == SIEVE_BIN_F16 ? SIEVE_DTYPE_F16 : SIEVE_DTYPE_BF16, rows,
                             u->vectors, n * (size_t)dim);
    } else if (((uintptr_t)rows & 3) != 0) {
        /* the body buffer comes from malloc and the rows start at a multiple of 8, so this
         * does not happen; copy rather than read unaligned floats if it ever does */
        u->vectors = malloc(n ? n * (size_t)dim * sizeof(float) : 1);
        if (!u->vectors) return sieve__fail(e, 500, "out of memory");
        memcpy(u->vectors, rows, n * (size_t)dim * sizeof(float));
    }
    const float *vec = u->vectors ? u->vectors : (const float *)(const void *)rows;
    for (size_t i = 0; i < n; i++) {
        const float *v = vec + i * (size_t)dim;
        uint32_t bad = 0; /* branch-free (vectorises): exponent all ones = NaN or infinity */
        for (uint32_t k = 0; k < dim; k++) {
            uint32_t w;
            memcpy(&w, &v[k], 4);
            bad |= (w & 0x7f800000u) == 0x7f800000u;
        }
        if (bad) {
            uint32_t k = 0;
            for (; k < dim; k++) {
                uint32_t w;
                memcpy(&w, &v[k], 4);
                if ((w & 0x7f800000u) == 0x7f800000u) break;
            }
            return sieve__fail(e, 400, "rows[%zu][%u]: NaN or infinity; vectors must be finite",
                               i, (unsigned)k);
        }
        sieve_point *p = &u->points[i];
        p->id.kind = SIEVE_ID_NUM;
        p->id.num = le64(ids + i * 8);
        p->vector = v;
        p->dim = dim;
    }
    if (pbytes) {
        const char *sec = (const char *)rows + n * (size_t)dim * esize;
        if (parse_payloads(sec, (size_t)pbytes, u, e)) return -1;
        for (size_t i = 0; i < n; i++) {
            u->points[i].payload = u->payloads[i];
            u->points[i].payload_len = u->payloads[i] ? strlen(u->payloads[i]) : 0;
        }
    }
    return 0;
}

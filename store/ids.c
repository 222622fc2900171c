/* ids.c: point ids (UUID text, ordering, the 17-byte id key) and collection name rules.
 * Owns nothing with state. Must not: touch LMDB. */
#include <string.h>

#include "store_internal.h"

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int sieve_uuid_parse(const char *text, uint8_t out[16]) {
    if (!text || !out) return SIEVE_EINVAL;
    size_t len = strlen(text);
    int hyphens;
    if (len == 36) hyphens = 1;
    else if (len == 32) hyphens = 0;
    else return SIEVE_EINVAL;
    uint8_t tmp[16];
    size_t pos = 0;
    for (int i = 0; i < 16; i++) {
        if (hyphens && (pos == 8 || pos == 13 || pos == 18 || pos == 23)) {
            if (text[pos] != '-') return SIEVE_EINVAL;
            pos++;
        }
        int hi = hexval(text[pos]), lo = hexval(text[pos + 1]);
        if (hi < 0 || lo < 0) return SIEVE_EINVAL;
        tmp[i] = (uint8_t)(hi << 4 | lo);
        pos += 2;
    }
    memcpy(out, tmp, 16);
    return 0;
}

void sieve_uuid_format(const uint8_t uuid[16], char buf[37]) {
    static const char hex[] = "0123456789abcdef";
    size_t pos = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) buf[pos++] = '-';
        buf[pos++] = hex[uuid[i] >> 4];
        buf[pos++] = hex[uuid[i] & 15];
    }
    buf[pos] = '\0';
}

int sieve_point_id_cmp(const sieve_point_id *a, const sieve_point_id *b) {
    if (a->kind != b->kind) return a->kind == SIEVE_ID_NUM ? -1 : 1;
    if (a->kind == SIEVE_ID_NUM) return a->num < b->num ? -1 : a->num > b->num;
    int c = memcmp(a->uuid, b->uuid, 16);
    return (c > 0) - (c < 0);
}

void sieve__id_key(const sieve_point_id *id, uint8_t key[SIEVE__IDKEY]) {
    if (id->kind == SIEVE_ID_NUM) {
        key[0] = 0;
        memset(key + 1, 0, 8);
        sieve__put_be64(key + 9, id->num);
    } else {
        key[0] = 1;
        memcpy(key + 1, id->uuid, 16);
    }
}

int sieve__id_from_key(const uint8_t key[SIEVE__IDKEY], sieve_point_id *out) {
    memset(out, 0, sizeof *out);
    if (key[0] == 0) {
        out->kind = SIEVE_ID_NUM;
        out->num = sieve__get_be64(key + 9);
        return 0;
    }
    if (key[0] == 1) {
        out->kind = SIEVE_ID_UUID;
        memcpy(out->uuid, key + 1, 16);
        return 0;
    }
    return SIEVE_ECORRUPT;
}

int sieve_store_name_valid(const char *name) {
    if (!name) return 0;
    size_t len = strnlen(name, SIEVE_NAME_MAX + 1);
    if (len == 0 || len > SIEVE_NAME_MAX) return 0;
    if (!strcmp(name, ".") || !strcmp(name, "..")) return 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '.' || c == '-';
        if (!ok) return 0;
    }
    return 1;
}

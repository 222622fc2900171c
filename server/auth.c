/* auth.c: API keys of sieve-server.
 *
 * Owns: deciding whether a request may proceed: with an api key configured, every route
 * except /, /healthz, /livez and /readyz needs `api-key: KEY` or `Authorization: Bearer
 * KEY`; a wrong or missing key gets 401; the read-only key gets 403 on writes. Keys are
 * compared in constant time. Must not: log or echo keys.
 */
#define _POSIX_C_SOURCE 200809L
#include <string.h>
#include <strings.h>

#include "server.h"

int sieve__ct_equal(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    size_t n = la > lb ? la : lb;
    unsigned char diff = (unsigned char)(la != lb);
    /* Walk the longer length; read past the shorter string as zeros, so the time does not
     * depend on where the first difference is. */
    for (size_t i = 0; i < n; i++) {
        unsigned char ca = i < la ? (unsigned char)a[i] : 0;
        unsigned char cb = i < lb ? (unsigned char)b[i] : 0;
        diff |= (unsigned char)(ca ^ cb);
    }
    return diff == 0;
}

/* The key the client sent, or NULL. */
static const char *presented_key(struct MHD_Connection *c) {
    const char *k = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "api-key");
    if (k) return k;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (a && !strncasecmp(a, "Bearer ", 7)) {
        a += 7;
        while (*a == ' ') a++;
        return a;
    }
    return NULL;
}

int sieve__auth_check(const sieve_server *s, struct MHD_Connection *c, int write,
                      sieve__err *e) {
    if (!s->cfg.api_key[0] && !s->cfg.read_only_key[0]) return 0;
    const char *k = presented_key(c);
    if (!k || !*k)
        return sieve__fail(e, 401, "authentication required: send the api key in the "
                                   "'api-key' header or as 'Authorization: Bearer KEY'");
    /* Compare against both keys every time so timing does not reveal which one matched. */
    int rw = s->cfg.api_key[0] && sieve__ct_equal(k, s->cfg.api_key);
    int ro = s->cfg.read_only_key[0] && sieve__ct_equal(k, s->cfg.read_only_key);
    if (rw) return 0;
    if (ro) {
        if (!write) return 0;
        return sieve__fail(e, 403, "forbidden: the read-only api key cannot change data");
    }
    return sieve__fail(e, 401, "invalid api key");
}

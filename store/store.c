/* store.c: the LMDB store (placeholder until the store lands). */
#include <stdlib.h>
#include "sieve_store.h"

void sieve_store_options_init(sieve_store_options *o) {
    o->initial_map_bytes = 1ull << 30;
    o->no_sync = 0;
    o->group_max = 256;
}
int sieve_store_open(const char *dir, const sieve_store_options *opts, sieve_store **out) {
    return SIEVE_ENOTSUP;
}
void sieve_store_close(sieve_store *st) {}

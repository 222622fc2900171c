/* sieve_error.c: messages and names for the SIEVE_ERRNO_MAP table. Owns nothing else. */
#include "sieve_error.h"

const char *sieve_strerror(int code) {
    switch (code) {
    case SIEVE_OK: return "success";
#define SIEVE__ERR_MSG(name, val, msg) case SIEVE_##name: return msg;
    SIEVE_ERRNO_MAP(SIEVE__ERR_MSG)
#undef SIEVE__ERR_MSG
    default: return "unknown error";
    }
}

const char *sieve_errname(int code) {
    switch (code) {
    case SIEVE_OK: return "SIEVE_OK";
#define SIEVE__ERR_NAME(name, val, msg) case SIEVE_##name: return "SIEVE_" #name;
    SIEVE_ERRNO_MAP(SIEVE__ERR_NAME)
#undef SIEVE__ERR_NAME
    default: return "SIEVE_UNKNOWN";
    }
}

/* sieve_error.h: the one error table of sieve.
 *
 * Owns: the negative SIEVE_E* codes every public sieve function returns, and their
 * messages. Must not: depend on any other sieve module.
 *
 * Every public function that can fail returns int: 0 on success, a negative SIEVE_E*
 * code otherwise. Codes and messages come from one X-macro table so they never drift.
 */
#ifndef SIEVE_ERROR_H
#define SIEVE_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* XX(name, value, message) */
#define SIEVE_ERRNO_MAP(XX)                                                          \
    XX(EINVAL,    -1,  "invalid argument")                                          \
    XX(ENOMEM,    -2,  "out of memory")                                             \
    XX(ENOTFOUND, -3,  "not found")                                                 \
    XX(EEXIST,    -4,  "already exists")                                            \
    XX(EIO,       -5,  "input/output error")                                        \
    XX(ECORRUPT,  -6,  "data is corrupt or has an unexpected format")               \
    XX(ENOTSUP,   -7,  "not supported by this build or device")                     \
    XX(ENODEV,    -8,  "no such device")                                            \
    XX(EDEVICE,   -9,  "device error (CUDA call failed)")                           \
    XX(ERANGE,    -10, "value out of range")                                        \
    XX(EDIM,      -11, "vector dimension does not match the collection")            \
    XX(ENONFINITE,-12, "vector contains NaN or infinity")                           \
    XX(ENOSPC,    -13, "scratch buffer too small")                                  \
    XX(EBUSY,     -14, "resource busy (locked by another process)")                 \
    XX(ECLOSED,   -15, "object is shut down")                                       \
    XX(ETOOBIG,   -16, "input too large")                                           \
    XX(EPARSE,    -17, "malformed input")                                           \
    XX(EAUTH,     -18, "authentication failed")                                     \
    XX(ENET,      -19, "network or HTTP error")                                     \
    XX(EINTERNAL, -20, "internal error")

typedef enum sieve_errno {
    SIEVE_OK = 0,
#define SIEVE__ERR_ENUM(name, val, msg) SIEVE_##name = (val),
    SIEVE_ERRNO_MAP(SIEVE__ERR_ENUM)
#undef SIEVE__ERR_ENUM
} sieve_errno;

/* Returns a static message for code (never NULL; "unknown error" for unknown codes). */
const char *sieve_strerror(int code);

/* Returns the symbolic name ("SIEVE_EINVAL") for code, or "SIEVE_UNKNOWN". */
const char *sieve_errname(int code);

#ifdef __cplusplus
}
#endif
#endif

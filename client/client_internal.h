/* client_internal.h: helpers shared by the files of libsieve-client (sieve__cl_ names).
 *
 * Owns: the growable output buffer used to build request bodies, the float32 and id
 * writers, the JSON object syntax check for caller payloads, and the HTTP core's entry
 * point used by the endpoint functions. Must not: be installed or included outside client/
 * and tests/client/.
 */
#ifndef SIEVE_CLIENT_INTERNAL_H
#define SIEVE_CLIENT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "sieve_client.h"

#if defined(__GNUC__)
#define SIEVE__CL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SIEVE__CL_PRINTF(a, b)
#endif

/* ------------------------------------------------------------ output buffer */

/* A growable byte buffer; failed is set (and further appends ignored) once a growth fails,
 * so builders check once at the end. p is NUL-terminated whenever len < cap. */
typedef struct sieve__cl_buf {
    char *p;
    size_t len, cap;
    int failed;
} sieve__cl_buf;

void sieve__cl_buf_init(sieve__cl_buf *b);
void sieve__cl_buf_free(sieve__cl_buf *b);
/* Empties b, keeping its memory. */
void sieve__cl_buf_reset(sieve__cl_buf *b);
/* Makes room for n more bytes; returns a pointer to them or NULL (failed set). */
char *sieve__cl_buf_reserve(sieve__cl_buf *b, size_t n);
void sieve__cl_buf_put(sieve__cl_buf *b, const void *s, size_t n);
void sieve__cl_buf_puts(sieve__cl_buf *b, const char *s);
void sieve__cl_buf_putc(sieve__cl_buf *b, char ch);
void sieve__cl_buf_printf(sieve__cl_buf *b, const char *fmt, ...) SIEVE__CL_PRINTF(2, 3);
/* A JSON string literal (quotes and escapes) of s[0..n). */
void sieve__cl_buf_json_str(sieve__cl_buf *b, const char *s, size_t n);
/* An id as JSON: a number, or a quoted UUID. */
void sieve__cl_buf_id(sieve__cl_buf *b, const sieve_client_id *id);
/* "[v0,v1,...]" with sieve__cl_fmt_f32. The values must be finite. */
void sieve__cl_buf_vector(sieve__cl_buf *b, const float *v, uint32_t dim);

/* ------------------------------------------------------------ numbers */

/* Longest output of sieve__cl_fmt_f32 ("-0.0000123456789" is 16), and the room it needs at
 * out (it may write scratch bytes after the number it returns). */
#define SIEVE__CL_F32_MAX 16
#define SIEVE__CL_F32_SCRATCH 32

/* Writes finite x as a JSON number with at most 9 significant digits (trailing zeros
 * dropped) into out, which must have SIEVE__CL_F32_SCRATCH bytes of room, enough that parsing it
 * back to the nearest double and rounding that to float32 gives x bit for bit (also through
 * strtof). Plain notation for 1e-5 <= |x| < 1e9, else d.ddde[-]N. Returns the length (no NUL
 * written). -0 is written "-0". */
size_t sieve__cl_fmt_f32(char *out, float x);

/* Index of the first NaN or infinity in v[0..n), or n. */
size_t sieve__cl_find_nonfinite(const float *v, size_t n);

/* ------------------------------------------------------------ JSON checks */

/* 0 when s[0..n) is exactly one JSON object (optional surrounding white space) with valid
 * syntax (strings, escapes, UTF-8 not checked beyond control characters, numbers, nesting up
 * to 512 levels); else SIEVE_EPARSE with a short reason and its byte offset in why. */
int sieve__cl_json_check_object(const char *s, size_t n, char *why, size_t why_len);

/* ------------------------------------------------------------ HTTP core */

/* Sends one request (path below the base URL, starting with '/') with the retry rules
 * (idempotent: may a lost connection be retried) and reads the reply. On a 2xx reply with
 * want_json, *json gets the parsed body (caller json_decref); envelope == 1 additionally
 * requires Qdrant's {"status":"ok","result":...} and returns the envelope itself. On an
 * error status the message of the reply is recorded and the matching SIEVE_E* returned. */
int sieve__cl_request(sieve_client *c, const char *method, const char *path, const char *body,
                      size_t body_len, int idempotent, json_t **json);

/* The same with the body sent as Content-Type SIEVE_CLIENT_POINTS_MEDIA_TYPE. */
int sieve__cl_request_binary(sieve_client *c, const char *method, const char *path,
                             const char *body, size_t body_len, int idempotent, json_t **json);

/* Records a message for sieve_client_message (formatted) and returns code. */
int sieve__cl_fail(sieve_client *c, int code, const char *fmt, ...) SIEVE__CL_PRINTF(3, 4);
/* Clears the last message and status at the start of a call that does no HTTP itself. */
void sieve__cl_begin(sieve_client *c);

/* Appends "/collections/NAME" (NAME percent-encoded where needed) to b; SIEVE_EINVAL for
 * NULL or empty names. */
int sieve__cl_path_collection(sieve_client *c, sieve__cl_buf *b, const char *name);

/* Parses a JSON id (number or UUID string) into *out. 0 or SIEVE_EPARSE. */
int sieve__cl_id_from_json(const json_t *j, sieve_client_id *out);

#endif

/* test_error.c: the error table yields distinct codes, names and messages. */
#include <criterion/criterion.h>
#include <string.h>

#include "sieve_error.h"

Test(error, codes_are_negative_and_named) {
    int codes[] = {
#define XX(name, val, msg) SIEVE_##name,
        SIEVE_ERRNO_MAP(XX)
#undef XX
    };
    size_t n = sizeof codes / sizeof codes[0];
    cr_assert_gt(n, 10);
    for (size_t i = 0; i < n; i++) {
        cr_assert_lt(codes[i], 0, "code %d must be negative", codes[i]);
        cr_assert_str_neq(sieve_strerror(codes[i]), "unknown error");
        cr_assert_eq(strncmp(sieve_errname(codes[i]), "SIEVE_E", 7), 0);
        for (size_t j = i + 1; j < n; j++) cr_assert_neq(codes[i], codes[j]);
    }
    cr_assert_str_eq(sieve_strerror(SIEVE_OK), "success");
    cr_assert_str_eq(sieve_strerror(-9999), "unknown error");
    cr_assert_str_eq(sieve_errname(SIEVE_EDIM), "SIEVE_EDIM");
}

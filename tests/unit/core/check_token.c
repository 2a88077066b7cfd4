/* core/token: random base64url tokens (length, alphabet, bounds, no repeats) and the
 * comparison. */
#include "core/first.h"
#include "core/token.h"
#include "core/rc.h"
#include "tests/unit/check_common.h"

#include <string.h>

START_TEST(test_token_random)
{
    char a[64], b[64];
    ck_assert_int_eq(token_random_b64url(a, sizeof(a), 32), TN_OK);
    ck_assert_uint_eq(strlen(a), 43);   /* 32 bytes: 256 bits in 6-bit characters */
    ck_assert_uint_eq(strspn(a, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                "0123456789-_"), 43);
    ck_assert_int_eq(token_random_b64url(b, sizeof(b), 32), TN_OK);
    ck_assert_str_ne(a, b);
    ck_assert_int_eq(token_random_b64url(a, sizeof(a), 3), TN_OK);
    ck_assert_uint_eq(strlen(a), 4);
    ck_assert_int_eq(token_random_b64url(a, sizeof(a), 1), TN_OK);
    ck_assert_uint_eq(strlen(a), 2);
    /* exactly enough room, and one byte short */
    char c[44];
    ck_assert_int_eq(token_random_b64url(c, sizeof(c), 32), TN_OK);
    ck_assert_int_eq(token_random_b64url(c, sizeof(c) - 1, 32), TN_INVALID);
    ck_assert_int_eq(token_random_b64url(a, sizeof(a), 65), TN_INVALID);
}
END_TEST

START_TEST(test_token_equal)
{
    ck_assert(token_equal("", ""));
    ck_assert(token_equal("abc", "abc"));
    ck_assert(!token_equal("abc", "abd"));
    ck_assert(!token_equal("abc", "ab"));
    ck_assert(!token_equal("ab", "abc"));
    ck_assert(!token_equal("", "a"));
}
END_TEST

Suite *token_suite(void);
Suite *token_suite(void)
{
    Suite *s = suite_create("token");
    TCase *tc = tcase_create("token");
    tcase_add_test(tc, test_token_random);
    tcase_add_test(tc, test_token_equal);
    suite_add_tcase(s, tc);
    return s;
}

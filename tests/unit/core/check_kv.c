/* check_kv.c — query strings, form bodies and cookies. */
#include "core/first.h"
#include "core/kv.h"

#include <check.h>
#include <string.h>

START_TEST(test_form_get)
{
    arena *a = arena_create(0);
    const char *q = "a=1&b=hello+world&c=%41%42%2f&flag&e=&a=2&%6e%61me=x";
    ck_assert_str_eq(kv_form_get(q, strlen(q), "a", a), "1");
    ck_assert_str_eq(kv_form_get(q, strlen(q), "b", a), "hello world");
    ck_assert_str_eq(kv_form_get(q, strlen(q), "c", a), "AB/");
    ck_assert_str_eq(kv_form_get(q, strlen(q), "flag", a), "");
    ck_assert_str_eq(kv_form_get(q, strlen(q), "e", a), "");
    ck_assert_str_eq(kv_form_get(q, strlen(q), "name", a), "x");
    ck_assert_ptr_null(kv_form_get(q, strlen(q), "zz", a));
    ck_assert_ptr_null(kv_form_get("x=%00", 5, "x", a));   /* NUL refused */
    ck_assert_str_eq(kv_form_get("x=%zz%4", 7, "x", a), "%zz%4"); /* bad escapes kept */
    ck_assert_str_eq(kv_form_get("x=1", 2, "x", a), "");   /* length is honoured */
    arena_destroy(a);
}
END_TEST

START_TEST(test_form_next)
{
    arena *a = arena_create(0);
    const char *t = "&&k1=v1&k2&k+3=v%203";
    const char *p = t, *end = t + strlen(t);
    char *k, *v;
    int n = 0;
    while ((p = kv_form_next(p, end, &k, &v, a)) != NULL) {
        n++;
        if (n == 3) {
            ck_assert_str_eq(k, "k 3");
            ck_assert_str_eq(v, "v 3");
        }
    }
    ck_assert_int_eq(n, 3);
    arena_destroy(a);
}
END_TEST

/* FastCGI params as libfcgi keeps them: the exact name before '=', first match wins. */
START_TEST(test_env_get)
{
    char *env[] = {"HTTP_HOST=a.example", "HTTP_HOSTX=no", "H=1", "EMPTY=", "NOEQUALS",
                   "HTTP_HOST=second", NULL};
    ck_assert_str_eq(kv_env_get(env, "HTTP_HOST"), "a.example");
    ck_assert_str_eq(kv_env_get(env, "HTTP_HOSTX"), "no");
    ck_assert_str_eq(kv_env_get(env, "H"), "1");
    ck_assert_str_eq(kv_env_get(env, "EMPTY"), "");
    ck_assert_ptr_null(kv_env_get(env, "HTTP"));       /* a prefix of a name is not it */
    ck_assert_ptr_null(kv_env_get(env, "NOEQUALS"));   /* no '=': not a param */
    ck_assert_ptr_null(kv_env_get(env, "MISSING"));
    ck_assert_ptr_null(kv_env_get(env, ""));
    ck_assert_ptr_null(kv_env_get(NULL, "HTTP_HOST"));
}
END_TEST

START_TEST(test_cookies)
{
    arena *a = arena_create(0);
    const char *h = "theme=dark; sid=\"abc123\" ;  other = x; empty=";
    ck_assert_str_eq(kv_cookie_get(h, "sid", a), "abc123");
    ck_assert_str_eq(kv_cookie_get(h, "theme", a), "dark");
    ck_assert_str_eq(kv_cookie_get(h, "other", a), "x");
    ck_assert_str_eq(kv_cookie_get(h, "empty", a), "");
    ck_assert_ptr_null(kv_cookie_get(h, "si", a));
    ck_assert_ptr_null(kv_cookie_get(NULL, "sid", a));
    arena_destroy(a);
}
END_TEST

Suite *kv_suite(void);
Suite *kv_suite(void)
{
    Suite *s = suite_create("kv");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_form_get);
    tcase_add_test(tc, test_form_next);
    tcase_add_test(tc, test_cookies);
    tcase_add_test(tc, test_env_get);
    suite_add_tcase(s, tc);
    return s;
}

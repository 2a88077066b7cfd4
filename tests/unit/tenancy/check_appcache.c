/* check_appcache.c — the per-tenant app cache: tenants never see each other's entries;
 * bounds, LRU, TTL. */
#include "core/first.h"
#include "core/rc.h"
#include "tenancy/appcache.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

START_TEST(test_namespaces)
{
    appcache *c = appcache_create(1 << 20, 1000);
    const void *v;
    size_t n;
    ck_assert_int_eq(appcache_set(c, 1, "k", 1, "acme", 4, 0), TN_OK);
    ck_assert_int_eq(appcache_set(c, 2, "k", 1, "globex", 6, 0), TN_OK);
    ck_assert_int_eq(appcache_get(c, 1, "k", 1, 0, &v, &n), TN_OK);
    ck_assert_uint_eq(n, 4);
    ck_assert(memcmp(v, "acme", 4) == 0);
    ck_assert_int_eq(appcache_get(c, 2, "k", 1, 0, &v, &n), TN_OK);
    ck_assert(memcmp(v, "globex", 6) == 0);
    ck_assert_int_eq(appcache_get(c, 3, "k", 1, 0, &v, &n), TN_NOTFOUND);
    ck_assert_int_eq(appcache_del(c, 1, "k", 1), TN_OK);
    ck_assert_int_eq(appcache_get(c, 1, "k", 1, 0, &v, &n), TN_NOTFOUND);
    ck_assert_int_eq(appcache_get(c, 2, "k", 1, 0, &v, &n), TN_OK);
    appcache_destroy(c);
}
END_TEST

START_TEST(test_bounds_ttl_lru)
{
    appcache *c = appcache_create(4096, 10);
    char key[16], val[100];
    memset(val, 'x', sizeof(val));
    for (int i = 0; i < 50; i++) {
        int kl = snprintf(key, sizeof(key), "k%d", i);
        ck_assert_int_eq(appcache_set(c, 7, key, (size_t)kl, val, sizeof(val), 0), TN_OK);
        ck_assert_int_le(appcache_entries(c), 10);
        ck_assert_uint_le(appcache_bytes(c), 4096);
    }
    const void *v;
    size_t n;
    ck_assert_int_eq(appcache_get(c, 7, "k0", 2, 0, &v, &n), TN_NOTFOUND);   /* evicted */
    ck_assert_int_eq(appcache_get(c, 7, "k49", 3, 0, &v, &n), TN_OK);
    /* A recently read entry survives the next evictions. */
    ck_assert_int_eq(appcache_get(c, 7, "k40", 3, 0, &v, &n), TN_OK);
    for (int i = 50; i < 58; i++) {
        int kl = snprintf(key, sizeof(key), "k%d", i);
        appcache_set(c, 7, key, (size_t)kl, val, sizeof(val), 0);
    }
    ck_assert_int_eq(appcache_get(c, 7, "k40", 3, 0, &v, &n), TN_OK);
    /* TTL */
    ck_assert_int_eq(appcache_set(c, 7, "t", 1, "v", 1, 100), TN_OK);
    ck_assert_int_eq(appcache_get(c, 7, "t", 1, 99, &v, &n), TN_OK);
    ck_assert_int_eq(appcache_get(c, 7, "t", 1, 100, &v, &n), TN_NOTFOUND);
    /* Larger than the whole cache */
    char big[8192] = {0};
    ck_assert_int_eq(appcache_set(c, 7, "big", 3, big, sizeof(big), 0), TN_TOOBIG);
    appcache_destroy(c);
}
END_TEST

Suite *appcache_suite(void);
Suite *appcache_suite(void)
{
    Suite *s = suite_create("appcache");
    TCase *tc = tcase_create("cache");
    tcase_add_test(tc, test_namespaces);
    tcase_add_test(tc, test_bounds_ttl_lru);
    suite_add_tcase(s, tc);
    return s;
}

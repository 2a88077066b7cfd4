/* check_lookup.c — the lookup cache: hits, negative entries, TTL, bound, generation flush,
 * and the stale write-back race. */
#include "core/first.h"
#include "core/rc.h"
#include "tenancy/lookup.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fetches;
static uint64_t generation;
static bool bump_during_fetch;

static int fake_fetch(void *ctx, int kind, const char *key, tenant_rec **out)
{
    (void)ctx;
    fetches++;
    if (bump_during_fetch)
        generation++;   /* a registry change lands while we read */
    if (strncmp(key, "no", 2) == 0)
        return TN_NOTFOUND;
    if (strcmp(key, "down") == 0)
        return TN_IO;
    *out = tenant_rec_new(kind == LK_DOMAIN ? 1000 : 1, key, "Name", TENANT_ACTIVE, "sqlite", "",
                          0, 0, 0, "{}");
    return *out ? TN_OK : TN_NOMEM;
}

static uint64_t fake_gen(void *ctx)
{
    (void)ctx;
    return generation;
}

static int get(lookup_cache *c, int kind, const char *key, int64_t now, const tenant_rec **t)
{
    return lookup_get(c, kind, key, now, fake_fetch, NULL, fake_gen, NULL, t);
}

static void reset(void)
{
    fetches = 0;
    generation = 0;
    bump_during_fetch = false;
}

START_TEST(test_hits_and_negative)
{
    reset();
    lookup_cache *c = lookup_create(100, 1000, 200);
    const tenant_rec *t;
    ck_assert_int_eq(get(c, LK_SLUG, "acme", 0, &t), TN_OK);
    ck_assert_str_eq(t->slug, "acme");
    ck_assert_int_eq(get(c, LK_SLUG, "acme", 10, &t), TN_OK);
    ck_assert_int_eq(fetches, 1);
    /* Same key, other kind: a different entry. */
    ck_assert_int_eq(get(c, LK_DOMAIN, "acme", 10, &t), TN_OK);
    ck_assert_int_eq(t->id, 1000);
    ck_assert_int_eq(fetches, 2);
    /* Unknown: cached as unknown for the negative TTL. */
    ck_assert_int_eq(get(c, LK_DOMAIN, "nobody.example", 10, &t), TN_NOTFOUND);
    ck_assert_int_eq(get(c, LK_DOMAIN, "nobody.example", 100, &t), TN_NOTFOUND);
    ck_assert_int_eq(fetches, 3);
    ck_assert_int_eq(get(c, LK_DOMAIN, "nobody.example", 300, &t), TN_NOTFOUND);
    ck_assert_int_eq(fetches, 4);
    /* Errors are not cached. */
    ck_assert_int_eq(get(c, LK_SLUG, "down", 300, &t), TN_IO);
    ck_assert_int_eq(get(c, LK_SLUG, "down", 300, &t), TN_IO);
    ck_assert_int_eq(fetches, 6);
    /* Positive TTL. */
    ck_assert_int_eq(get(c, LK_SLUG, "acme", 1100, &t), TN_OK);
    ck_assert_int_eq(fetches, 7);
    lookup_stats st;
    lookup_get_stats(c, &st);
    ck_assert_uint_eq(st.hits, 1);
    ck_assert_uint_eq(st.negative_hits, 1);
    lookup_destroy(c);
}
END_TEST

START_TEST(test_generation_flush_and_race)
{
    reset();
    lookup_cache *c = lookup_create(100, 60000, 60000);
    const tenant_rec *t;
    lookup_sync(c, generation);
    ck_assert_int_eq(get(c, LK_SLUG, "acme", 0, &t), TN_OK);
    ck_assert_int_eq(get(c, LK_SLUG, "no-such", 0, &t), TN_NOTFOUND);
    ck_assert_int_eq(fetches, 2);
    /* A registry change: the next request's sync drops everything, negatives included. */
    generation++;
    lookup_sync(c, generation);
    ck_assert_int_eq(get(c, LK_SLUG, "acme", 0, &t), TN_OK);
    ck_assert_int_eq(get(c, LK_SLUG, "no-such", 0, &t), TN_NOTFOUND);
    ck_assert_int_eq(fetches, 4);
    /* A change while we read: the answer is used once but not stored. */
    bump_during_fetch = true;
    ck_assert_int_eq(get(c, LK_SLUG, "racy", 0, &t), TN_OK);
    ck_assert_str_eq(t->slug, "racy");   /* still readable until the next sync */
    bump_during_fetch = false;
    ck_assert_int_eq(get(c, LK_SLUG, "racy", 0, &t), TN_OK);
    ck_assert_int_eq(fetches, 6);
    lookup_stats st;
    lookup_get_stats(c, &st);
    ck_assert_uint_ge(st.stale_skips, 1);
    ck_assert_uint_ge(st.flushes, 1);
    lookup_destroy(c);
}
END_TEST

START_TEST(test_bound_eviction_and_retired_records)
{
    reset();
    lookup_cache *c = lookup_create(32, 60000, 60000);
    const tenant_rec *first;
    ck_assert_int_eq(get(c, LK_SLUG, "t0", 0, &first), TN_OK);
    for (int i = 1; i < 500; i++) {
        char k[16];
        const tenant_rec *t;
        snprintf(k, sizeof(k), "t%d", i);
        ck_assert_int_eq(get(c, LK_SLUG, k, i, &t), TN_OK);
        ck_assert_str_eq(t->slug, k);
    }
    lookup_stats st;
    lookup_get_stats(c, &st);
    ck_assert_uint_le(st.entries, 32);
    ck_assert_uint_ge(st.evictions, 400);
    /* The first record was evicted but a request may still hold it: readable until sync. */
    ck_assert_str_eq(first->slug, "t0");
    lookup_sync(c, generation);
    /* Every cached key still maps to its own record. */
    for (int i = 480; i < 500; i++) {
        char k[16];
        const tenant_rec *t;
        snprintf(k, sizeof(k), "t%d", i);
        ck_assert_int_eq(get(c, LK_SLUG, k, 600, &t), TN_OK);
        ck_assert_str_eq(t->slug, k);
    }
    lookup_destroy(c);
}
END_TEST

/* A cached tenant is served for its own host only: hosts that share a long beginning, or of
 * which one is the beginning of the other, are different entries, each with its own record
 * (a key compared or hashed on part of its bytes would hand one tenant's record to the
 * other host). */
START_TEST(test_whole_key)
{
    reset();
    lookup_cache *c = lookup_create(100, 60000, 60000);
    const char *hosts[] = {
        "shop.a-rather-long-company-name.example.com",
        "shop.a-rather-long-company-name.example.org",
        "shop.a-rather-long-company-name.example.com.evil.example",
        "shop.a-rather-long-company-name.example.co",
        "acme.example",
        "acme.example.evil.example",
        "acme.exampl",
    };
    int n = (int)(sizeof(hosts) / sizeof(hosts[0]));
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < n; i++) {
            const tenant_rec *t;
            ck_assert_int_eq(get(c, LK_DOMAIN, hosts[i], 10, &t), TN_OK);
            ck_assert_msg(strcmp(t->slug, hosts[i]) == 0, "round %d: %s served the record of %s",
                          round, hosts[i], t->slug);
        }
    }
    ck_assert_int_eq(fetches, n);   /* one fetch per host; the second round hit */
    lookup_destroy(c);
}
END_TEST

START_TEST(test_cache_off)
{
    reset();
    lookup_cache *c = lookup_create(0, 60000, 60000);
    const tenant_rec *t;
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(get(c, LK_SLUG, "acme", 0, &t), TN_OK);
        ck_assert_str_eq(t->slug, "acme");
        lookup_sync(c, generation);
    }
    ck_assert_int_eq(fetches, 5);
    lookup_destroy(c);
}
END_TEST

Suite *lookup_suite(void);
Suite *lookup_suite(void)
{
    Suite *s = suite_create("lookup");
    TCase *tc = tcase_create("cache");
    tcase_add_test(tc, test_hits_and_negative);
    tcase_add_test(tc, test_generation_flush_and_race);
    tcase_add_test(tc, test_bound_eviction_and_retired_records);
    tcase_add_test(tc, test_whole_key);
    tcase_add_test(tc, test_cache_off);
    suite_add_tcase(s, tc);
    return s;
}

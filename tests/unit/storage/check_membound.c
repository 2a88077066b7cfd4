/*
 * check_membound.c — the byte bound of a kept schema-mode connection (membound.h): when the
 * backend's memory is read, the pacing by the distance to the bound, a changed bound, a new
 * backend, and a login that may not read it. Against the real server of TENANCY_TEST_PG.
 */
#include "core/first.h"
#include "storage/db.h"
#include "storage/membound.h"
#include "storage/target.h"
#include "core/rc.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/storage/storage_test.h"

/* The backend's memory as the bound reads it. */
static long long backend_bytes(tn_db *d)
{
    char v[32];
    ST_OK(d, db_query_value(d, v, sizeof(v),
                            "SELECT sum(total_bytes)::bigint "
                            "FROM pg_catalog.pg_backend_memory_contexts", 0, NULL));
    return atoll(v);
}

START_TEST(test_membound_due)
{
    tn_db *d = st_open(st_pg, NULL);
    membound m = {0};
    membound_reset(&m);
    membound_set_max(&m, 0);
    ck_assert_int_eq(membound_check(&m, d, 1000, 4), MEMBOUND_NOT_DUE);   /* no bound */
    membound_set_max(&m, 1ll << 40);
    ck_assert_int_eq(membound_check(&m, d, 3, 4), MEMBOUND_NOT_DUE);      /* not yet */
    ck_assert_int_eq(membound_check(&m, d, 4, 4), MEMBOUND_UNDER);        /* first read */
    /* a terabyte away: the next read is planned about halfway there, far beyond 4 more */
    ck_assert_int_eq(membound_check(&m, d, 8, 4), MEMBOUND_NOT_DUE);
    ck_assert_int_eq(membound_check(&m, d, 100000, 4), MEMBOUND_NOT_DUE);
    /* a changed bound: due again 4 schemas after the last read, long passed */
    membound_set_max(&m, 1);
    ck_assert_int_eq(membound_check(&m, d, 100000, 4), MEMBOUND_REACHED);
    /* the same bound again keeps the plan: due 4 after that read */
    membound_set_max(&m, 1);
    ck_assert_int_eq(membound_check(&m, d, 100003, 4), MEMBOUND_NOT_DUE);
    ck_assert_int_eq(membound_check(&m, d, 100004, 4), MEMBOUND_REACHED);
    /* a new backend starts over */
    membound_reset(&m);
    ck_assert_int_eq(membound_check(&m, d, 3, 4), MEMBOUND_NOT_DUE);
    ck_assert_int_eq(membound_check(&m, d, 4, 4), MEMBOUND_REACHED);
    db_close(d);
}
END_TEST

/* The pacing: with the bound at twice what the backend holds after 10 schemas, it could
 * reach it in 10 more at that rate; the next read comes halfway, 5 later (every = 2). */
START_TEST(test_membound_pacing)
{
    tn_db *d = st_open(st_pg, NULL);
    long long now = backend_bytes(d);
    ck_assert_int_gt(now, 0);
    membound m = {0};
    membound_set_max(&m, 2 * now);
    ck_assert_int_eq(membound_check(&m, d, 10, 2), MEMBOUND_UNDER);
    /* the read itself may have grown the backend a little: halfway is 4 or 5 schemas on */
    ck_assert_msg(m.next >= 14 && m.next <= 15, "next read at %zu, want 14 or 15", m.next);
    ck_assert_int_eq(membound_check(&m, d, 13, 2), MEMBOUND_NOT_DUE);
    ck_assert_int_eq(membound_check(&m, d, m.next, 2), MEMBOUND_UNDER);
    /* close to the bound the pace falls back to every */
    membound_set_max(&m, backend_bytes(d) + 1024);
    ck_assert_int_eq(membound_check(&m, d, 20, 2), MEMBOUND_UNDER);
    ck_assert_uint_eq(m.next, 0);   /* every after this read */
    ck_assert_int_eq(membound_check(&m, d, 21, 2), MEMBOUND_NOT_DUE);
    db_close(d);
}
END_TEST

/* A connection still scoped to the last tenant (its role may not read the memory): the
 * read unscopes it and runs as the login. */
START_TEST(test_membound_unscopes)
{
    tn_db *a = st_open(st_pg, NULL);
    tn_db_exec(a, "DROP SCHEMA IF EXISTS tn_mb_s CASCADE", 0, NULL);
    tn_db_exec(a, "DROP ROLE IF EXISTS tn_mb_tenant", 0, NULL);
    ST_OK(a, tn_db_exec(a, "CREATE ROLE tn_mb_tenant NOLOGIN", 0, NULL));
    ST_OK(a, tn_db_exec(a, "CREATE SCHEMA tn_mb_s AUTHORIZATION tn_mb_tenant", 0, NULL));
    db_close(a);
    tn_db *d = st_open(st_pg, NULL);
    ST_OK(d, db_set_scope(d, "tn_mb_s", "tn_mb_tenant"));
    char who[64];
    ST_OK(d, db_query_value(d, who, sizeof(who), "SELECT current_user", 0, NULL));
    ck_assert_str_eq(who, "tn_mb_tenant");
    membound m = {0};
    membound_set_max(&m, 1);
    ck_assert_int_eq(membound_check(&m, d, 1, 1), MEMBOUND_REACHED);
    ck_assert_ptr_null(db_schema_scope(d));
    ST_OK(d, db_query_value(d, who, sizeof(who), "SELECT current_user", 0, NULL));
    ck_assert_str_ne(who, "tn_mb_tenant");
    db_close(d);
}
END_TEST

/* A login without pg_read_all_stats: refused, remembered, not asked again on that backend;
 * a new backend asks again. */
START_TEST(test_membound_denied)
{
    char server[1024];
    st_plain_login("tn_membound_nostats", server, sizeof(server));
    tn_db *d = st_open(server, NULL);
    membound m = {0};
    membound_set_max(&m, 1);
    ck_assert_int_eq(membound_check(&m, d, 1, 1), MEMBOUND_DENIED);
    ck_assert(m.unread);
    ck_assert_int_eq(membound_check(&m, d, 50, 1), MEMBOUND_NOT_DUE);
    membound_reset(&m);
    ck_assert_int_eq(membound_check(&m, d, 1, 1), MEMBOUND_DENIED);
    db_close(d);
}
END_TEST

/* A CLI run's count bound: the operator's max_tenants when set; none while the byte bound
 * applies and can be read; the default count otherwise (no byte bound, or a login that may
 * not read it). */
START_TEST(test_membound_run_count)
{
    char server[1024];
    st_plain_login("tn_membound_nostats", server, sizeof(server));
    membound m = {0};
    ck_assert_uint_eq(membound_run_count(&m, 0), POOL_PG_MAX_TENANTS);   /* no byte bound */
    ck_assert_uint_eq(membound_run_count(&m, 7), 7);
    membound_set_max(&m, 64ll << 20);
    ck_assert_uint_eq(membound_run_count(&m, 0), SIZE_MAX);
    ck_assert_uint_eq(membound_run_count(&m, 7), 7);
    tn_db *d = st_open(server, NULL);
    ck_assert_int_eq(membound_check(&m, d, 64, 64), MEMBOUND_DENIED);
    ck_assert_uint_eq(membound_run_count(&m, 0), POOL_PG_MAX_TENANTS);   /* unreadable */
    db_close(d);
}
END_TEST

Suite *membound_suite(void);
Suite *membound_suite(void)
{
    Suite *s = suite_create("membound");
    TCase *tc = tcase_create("postgres");
    tcase_add_test(tc, test_membound_due);
    tcase_add_test(tc, test_membound_pacing);
    tcase_add_test(tc, test_membound_unscopes);
    tcase_add_test(tc, test_membound_denied);
    tcase_add_test(tc, test_membound_run_count);
    suite_add_tcase(s, tc);
    return s;
}

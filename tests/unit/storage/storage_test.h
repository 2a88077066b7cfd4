/*
 * storage_test.h — what the storage suites beyond check_db.c share: the PostgreSQL URI and
 * the temporary folder main.c set up, opening with an assertion, and killing a backend.
 */
#ifndef TN_TESTS_STORAGE_TEST_H
#define TN_TESTS_STORAGE_TEST_H

#include <check.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "storage/db.h"

extern const char *st_pg;   /* TENANCY_TEST_PG */
extern char st_dir[256];    /* a temporary folder, removed at the end */

#define ST_EXPECT(d, want, expr)                                                             \
    do {                                                                                     \
        int rc_ = (expr);                                                                    \
        ck_assert_msg(rc_ == (want), "%s = %s, want %s: %s", #expr, tn_rc_str(rc_),          \
                      tn_rc_str(want), tn_db_error(d));                                      \
    } while (0)
#define ST_OK(d, expr) ST_EXPECT(d, TN_OK, expr)

static inline tn_db *st_open(const char *uri, const db_options *opt)
{
    tn_db *d = NULL;
    char err[512];
    int rc = db_open(uri, opt, &d, err, sizeof(err));
    ck_assert_msg(rc == TN_OK, "db_open: %s: %s", tn_rc_str(rc), err);
    return d;
}

/* d's backend pid (an unscoped query would work too; this one runs in d's scope). */
static inline void st_backend_pid(tn_db *d, char pid[32])
{
    ST_OK(d, db_query_value(d, pid, 32, "SELECT pg_catalog.pg_backend_pid()", 0, NULL));
}

/* Terminate a backend from another connection and wait until it is gone. */
static inline void st_kill_pid(const char *pid)
{
    tn_db *admin = st_open(st_pg, NULL);
    const char *p[] = {pid};
    char v[16];
    ST_OK(admin, db_query_value(admin, v, sizeof(v),
                                "SELECT pg_catalog.pg_terminate_backend($1::int)", 1, p));
    ck_assert_str_eq(v, "t");
    for (int i = 0; i < 200; i++) {
        ST_OK(admin, db_query_value(admin, v, sizeof(v),
                                    "SELECT count(*) FROM pg_catalog.pg_stat_activity "
                                    "WHERE pid = $1::int",
                                    1, p));
        if (strcmp(v, "0") == 0)
            break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ck_assert_str_eq(v, "0");
    db_close(admin);
}

static inline void st_kill_backend(tn_db *d)
{
    char pid[32];
    st_backend_pid(d, pid);
    st_kill_pid(pid);
}

/* A new login role of that name with no more than LOGIN (so not a member of
 * pg_read_all_stats), dropped first if there; server: TENANCY_TEST_PG as that user. */
static inline void st_plain_login(const char *role, char *server, size_t n)
{
    tn_db *a = st_open(st_pg, NULL);
    char sql[256];
    snprintf(sql, sizeof(sql), "DROP ROLE IF EXISTS %s", role);
    tn_db_exec(a, sql, 0, NULL);
    snprintf(sql, sizeof(sql), "CREATE ROLE %s LOGIN", role);
    ST_OK(a, tn_db_exec(a, sql, 0, NULL));
    db_close(a);
    snprintf(server, n, "%s user=%s", st_pg, role);
}

#endif

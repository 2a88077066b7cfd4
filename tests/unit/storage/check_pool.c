/*
 * check_pool.c — the per-worker pool (target.h): SQLite LRU and its file-descriptor bound,
 * one scoped connection per server in schema mode (isolation through every bad ending of
 * a request, recycling after pg_max_tenants), database mode's LRU, and what release must
 * leave behind: nothing of the tenant that used the connection.
 */
#include "core/first.h"
#include "storage/db.h"
#include "storage/db_int.h"
#include "storage/target.h"
#include "core/clock.h"
#include "core/rc.h"

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/storage/storage_test.h"

#define NSCHEMAS 6

static storage_pool *pool;

static void acquire(const storage_target *t, tn_db **d)
{
    char err[512];
    int rc = pool_acquire(pool, t, d, err, sizeof(err));
    ck_assert_msg(rc == TN_OK, "pool_acquire %s: %s: %s", t->name, tn_rc_str(rc), err);
}

/* The marker a connection reads with an unqualified name. */
static void expect_marker(tn_db *d, const char *want)
{
    char v[64];
    bool sqlite = strcmp(tn_db_backend(d), "sqlite") == 0;
    ST_OK(d, db_query_value(d, v, sizeof(v),
                            sqlite ? "SELECT group_concat(marker, ',') FROM "
                                     "(SELECT marker FROM items ORDER BY marker)"
                                   : "SELECT string_agg(marker, ',' ORDER BY marker) FROM items",
                            0, NULL));
    ck_assert_str_eq(v, want);
}

static void stats(pool_stats *s)
{
    pool_get_stats(pool, s);
}

static void teardown_pool(void)
{
    pool_destroy(pool);
    pool = NULL;
}

/* ---- SQLite ------------------------------------------------------------------------------------ */

static char sq_path[32][512];
static storage_target sq[32];

/* n tenant files, each with items(marker) = "sN" */
static void make_sqlite_tenants(int n)
{
    /* A fresh set of files per test: in one process (CK_FORK=no, tests/valgrind.sh) the pid
     * alone would name the previous test's files. */
    static int set;
    set++;
    for (int i = 0; i < n; i++) {
        snprintf(sq_path[i], sizeof(sq_path[i]), "%s/pool/%ld-%d-s%d.db", st_dir,
                 (long)getpid(), set, i);
        sq[i] = (storage_target){.kind = TARGET_SQLITE, .name = sq_path[i]};
        char err[512];
        ck_assert_msg(target_create(&sq[i], err, sizeof(err)) == TN_OK, "%s", err);
        tn_db *d = NULL;
        ck_assert_int_eq(target_open(&sq[i], &d, err, sizeof(err)), TN_OK);
        char marker[16];
        snprintf(marker, sizeof(marker), "s%d", i);
        const char *p[] = {marker};
        ST_OK(d, tn_db_exec(d, "CREATE TABLE items (marker TEXT PRIMARY KEY)", 0, NULL));
        ST_OK(d, tn_db_exec(d, "INSERT INTO items VALUES ($1)", 1, p));
        db_close(d);
    }
}

START_TEST(test_pool_sqlite_lru)
{
    make_sqlite_tenants(5);
    pool = pool_create(&(pool_limits){.sqlite_max_open = 3});
    ck_assert_ptr_nonnull(pool);
    tn_db *d;
    pool_stats s;
    for (int i = 0; i < 3; i++) {
        acquire(&sq[i], &d);
        char want[8];
        snprintf(want, sizeof(want), "s%d", i);
        expect_marker(d, want);
        pool_release(pool, d);
    }
    stats(&s);
    ck_assert_int_eq(s.sqlite_open, 3);
    ck_assert_uint_eq(s.sqlite_opens, 3);
    acquire(&sq[0], &d);   /* a hit, and s0 is now the most recent */
    pool_release(pool, d);
    acquire(&sq[3], &d);   /* evicts s1, the least recently used */
    expect_marker(d, "s3");
    pool_release(pool, d);
    stats(&s);
    ck_assert_uint_eq(s.sqlite_hits, 1);
    ck_assert_uint_eq(s.evictions, 1);
    ck_assert_int_eq(s.sqlite_open, 3);
    acquire(&sq[0], &d);
    pool_release(pool, d);
    acquire(&sq[2], &d);
    pool_release(pool, d);
    stats(&s);
    ck_assert_uint_eq(s.sqlite_hits, 3);   /* s0 and s2 were kept */
    acquire(&sq[1], &d);                   /* s1 was not */
    pool_release(pool, d);
    stats(&s);
    ck_assert_uint_eq(s.sqlite_opens, 5);

    /* handles lent out are never evicted: the bound is exceeded, then restored */
    tn_db *held[4];
    for (int i = 0; i < 4; i++)
        acquire(&sq[i], &held[i]);
    acquire(&sq[4], &d);
    stats(&s);
    ck_assert_int_eq(s.sqlite_open, 5);
    for (int i = 0; i < 4; i++) {
        char want[8];
        snprintf(want, sizeof(want), "s%d", i);
        expect_marker(held[i], want);   /* every one still usable */
    }
    /* the same target twice at once */
    char err[256];
    tn_db *again = NULL;
    ck_assert_int_eq(pool_acquire(pool, &sq[4], &again, err, sizeof(err)), TN_BUSY);
    ck_assert_ptr_null(again);
    pool_release(pool, d);
    for (int i = 0; i < 4; i++)
        pool_release(pool, held[i]);
    stats(&s);
    ck_assert_int_eq(s.sqlite_open, 3);
    pool_release(pool, held[0]);   /* twice: ignored */
    pool_release(pool, NULL);

    /* a tenant that switches to synchronous=NORMAL gets a handle opened that way */
    char v[8];
    acquire(&sq[0], &d);
    ST_OK(d, db_query_value(d, v, sizeof(v), "PRAGMA synchronous", 0, NULL));
    ck_assert_str_eq(v, "2");
    pool_release(pool, d);
    storage_target normal = sq[0];
    normal.sync_normal = true;
    acquire(&normal, &d);
    ST_OK(d, db_query_value(d, v, sizeof(v), "PRAGMA synchronous", 0, NULL));
    ck_assert_str_eq(v, "1");
    pool_release(pool, d);

    /* a file that does not exist is not created */
    storage_target missing = {.kind = TARGET_SQLITE, .name = "/nonexistent-dir/x.db"};
    ck_assert_int_eq(pool_acquire(pool, &missing, &d, err, sizeof(err)), TN_NOTFOUND);
    ck_assert_int_eq(pool_acquire(pool, NULL, &d, err, sizeof(err)), TN_INVALID);
    ck_assert_int_eq(pool_acquire(NULL, &sq[0], &d, err, sizeof(err)), TN_INVALID);
}
END_TEST

START_TEST(test_pool_sqlite_release)
{
    make_sqlite_tenants(2);
    pool = pool_create(NULL);
    tn_db *d;
    pool_stats s;
    /* a transaction left open is rolled back */
    acquire(&sq[0], &d);
    ST_OK(d, tn_db_begin(d));
    ST_OK(d, tn_db_exec(d, "INSERT INTO items VALUES ('uncommitted')", 0, NULL));
    pool_release(pool, d);
    acquire(&sq[0], &d);
    ck_assert(db_is_clean(d));
    expect_marker(d, "s0");
    /* a row set left in the middle of its statement (a read snapshot) */
    tn_rows *r = NULL;
    ST_OK(d, tn_db_query(d, &r, "SELECT marker FROM items UNION ALL SELECT 'x'", 0, NULL));
    ST_OK(d, tn_rows_next(r));
    ck_assert(!db_is_clean(d));
    /* an error message that quotes the tenant's data */
    ST_EXPECT(d, TN_EXISTS, tn_db_exec(d, "INSERT INTO items VALUES ('s0')", 0, NULL));
    pool_release(pool, d);
    ck_assert_ptr_null(tn_rows_get(r, 0));   /* detached, not dangling */
    tn_rows_free(r);
    acquire(&sq[0], &d);
    ck_assert(db_is_clean(d));
    ck_assert_str_eq(tn_db_error(d), "");
    expect_marker(d, "s0");
    pool_release(pool, d);
    stats(&s);
    ck_assert_uint_eq(s.resets, 2);
    ck_assert_int_eq(s.sqlite_open, 1);
}
END_TEST

static void expect_pragma(tn_db *d, const char *pragma, const char *want)
{
    char v[32];
    ST_OK(d, db_query_value(d, v, sizeof(v), pragma, 0, NULL));
    ck_assert_msg(strcmp(v, want) == 0, "%s: '%s', not '%s'", pragma, v, want);
}

static long long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* What a handle of the pool is opened with, and what its file is left with when the pool
 * closes it: still in WAL, its -wal file kept but empty (the close checkpointed it, so the
 * next open has nothing to read back), its rows there; a small page cache per handle. */
START_TEST(test_pool_sqlite_settings)
{
    make_sqlite_tenants(2);
    pool = pool_create(&(pool_limits){.sqlite_max_open = 1});
    tn_db *d;
    acquire(&sq[0], &d);
    expect_pragma(d, "PRAGMA journal_mode", "wal");
    expect_pragma(d, "PRAGMA cache_size", "-256");   /* POOL_SQLITE_CACHE_KIB */
    expect_pragma(d, "PRAGMA journal_size_limit", "8388608");
    for (int i = 0; i < 50; i++) {
        char m[16];
        snprintf(m, sizeof(m), "w%02d", i);
        const char *p[] = {m};
        ST_OK(d, tn_db_exec(d, "INSERT INTO items VALUES ($1)", 1, p));
    }
    pool_release(pool, d);
    char wal[600];
    snprintf(wal, sizeof(wal), "%s-wal", sq_path[0]);
    ck_assert_int_gt(file_size(wal), 0);   /* the commits are in the WAL */
    acquire(&sq[1], &d);                    /* sqlite_max_open 1: s0's handle is closed */
    pool_release(pool, d);
    pool_stats s;
    stats(&s);
    ck_assert_uint_eq(s.evictions, 1);
    ck_assert_int_eq(file_size(wal), 0);   /* kept, and empty */
    acquire(&sq[0], &d);
    expect_pragma(d, "PRAGMA journal_mode", "wal");
    expect_pragma(d, "SELECT count(*) FROM items", "51");
    pool_release(pool, d);
    pool_destroy(pool);

    pool = pool_create(&(pool_limits){.sqlite_cache_kib = 64});
    acquire(&sq[0], &d);
    expect_pragma(d, "PRAGMA cache_size", "-64");
    pool_release(pool, d);
    /* the descriptors the limits want: three per SQLite handle, and the PostgreSQL ones */
    ck_assert_int_eq(pool_fds_wanted(NULL), POOL_SQLITE_MAX_OPEN * 3 + 8 + 16);
    ck_assert_int_eq(pool_fds_wanted(&(pool_limits){.sqlite_max_open = 10, .pg_db_max_open = 2}),
                     10 * 3 + 2 + 16);
}
END_TEST

/* Count this process's open descriptors. */
static int open_fds(void)
{
    int n = 0;
    DIR *dir = opendir("/proc/self/fd");
    if (dir == NULL)
        return -1;
    while (readdir(dir) != NULL)
        n++;
    closedir(dir);
    return n - 3;   /* ".", ".." and the directory's own */
}

/* RLIMIT_NOFILE = 100 leaves 36 descriptors for the pool: 12 WAL handles, whatever
 * sqlite_max_open says. (Check runs each test in its own process: the limit dies with it.) */
START_TEST(test_pool_sqlite_fd_bound)
{
    make_sqlite_tenants(30);
    struct rlimit rl;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    rl.rlim_cur = 100;
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    pool = pool_create(&(pool_limits){.sqlite_max_open = 1000});
    int base = open_fds();
    tn_db *d;
    pool_stats s;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 30; i++) {
            acquire(&sq[i], &d);
            char want[8];
            snprintf(want, sizeof(want), "s%d", i);
            expect_marker(d, want);
            pool_release(pool, d);
            stats(&s);
            ck_assert_int_le(s.sqlite_open, 12);
            ck_assert_int_le(open_fds() - base, 36);
        }
    }
    stats(&s);
    ck_assert_int_eq(s.sqlite_open, 12);
    ck_assert_uint_eq(s.evictions, 60 - 12);
}
END_TEST

/* ---- PostgreSQL: schema mode ------------------------------------------------------------------- */

static char schema_name[NSCHEMAS][32];
static storage_target sch[NSCHEMAS];

/* tn_pool_0 .. tn_pool_5, each with items(marker) = its own name, and public.items */
static void setup_pg(void)
{
    tn_db *d = st_open(st_pg, NULL);
    ST_OK(d, db_exec_script(d, "DROP TABLE IF EXISTS public.items;"
                               "CREATE TABLE public.items (marker TEXT PRIMARY KEY);"
                               "INSERT INTO public.items VALUES ('public')"));
    for (int i = 0; i < NSCHEMAS; i++) {
        snprintf(schema_name[i], sizeof(schema_name[i]), "tn_pool_%d", i);
        sch[i] = (storage_target){.kind = TARGET_PG_SCHEMA, .server = st_pg,
                                  .name = schema_name[i]};
        char err[512];
        target_drop(&sch[i], err, sizeof(err));
        ck_assert_msg(target_create(&sch[i], err, sizeof(err)) == TN_OK, "%s", err);
        tn_db *t = NULL;
        ck_assert_int_eq(target_open(&sch[i], &t, err, sizeof(err)), TN_OK);
        const char *p[] = {schema_name[i]};
        ST_OK(t, tn_db_exec(t, "CREATE TABLE items (marker TEXT PRIMARY KEY)", 0, NULL));
        ST_OK(t, tn_db_exec(t, "INSERT INTO items VALUES ($1)", 1, p));
        db_close(t);
    }
    db_close(d);
}

static void pid_of(tn_db *d, char pid[32])
{
    st_backend_pid(d, pid);
}

START_TEST(test_pool_schema_isolation)
{
    pool = pool_create(&(pool_limits){.pg_max_tenants = 100});
    tn_db *d, *first = NULL;
    pool_stats s;
    char pid0[32], pid[32];
    /* alternating tenants on one connection and one backend */
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < NSCHEMAS; i++) {
            acquire(&sch[i], &d);
            if (first == NULL) {
                first = d;
                pid_of(d, pid0);
            }
            ck_assert_ptr_eq(d, first);
            ck_assert_str_eq(db_schema_scope(d), schema_name[i]);
            expect_marker(d, schema_name[i]);
            pool_release(pool, d);
            ck_assert_ptr_null(db_schema_scope(d));
        }
    }
    acquire(&sch[0], &d);
    pid_of(d, pid);
    ck_assert_str_eq(pid, pid0);
    pool_release(pool, d);
    stats(&s);
    ck_assert_int_eq(s.pg_open, 1);
    ck_assert_uint_eq(s.pg_connects, 1);

    /* an error in the middle of a transaction, left for release to clean */
    acquire(&sch[0], &d);
    ST_OK(d, tn_db_begin(d));
    ST_OK(d, tn_db_exec(d, "INSERT INTO items VALUES ('half')", 0, NULL));
    ST_EXPECT(d, TN_EXISTS, tn_db_exec(d, "INSERT INTO items VALUES ('tn_pool_0')", 0, NULL));
    pool_release(pool, d);
    acquire(&sch[1], &d);
    ck_assert(db_is_clean(d));
    ck_assert_str_eq(tn_db_error(d), "");
    expect_marker(d, "tn_pool_1");
    pool_release(pool, d);
    acquire(&sch[0], &d);
    expect_marker(d, "tn_pool_0");   /* 'half' was rolled back */
    /* a transaction left open, its scope still on it */
    ST_OK(d, tn_db_begin(d));
    ST_OK(d, tn_db_exec(d, "INSERT INTO items VALUES ('open')", 0, NULL));
    pool_release(pool, d);
    acquire(&sch[1], &d);
    expect_marker(d, "tn_pool_1");
    pool_release(pool, d);
    acquire(&sch[0], &d);
    expect_marker(d, "tn_pool_0");
    /* begun, nothing sent yet */
    ST_OK(d, tn_db_begin(d));
    pool_release(pool, d);
    acquire(&sch[2], &d);
    expect_marker(d, "tn_pool_2");
    pool_release(pool, d);

    /* session state left behind: a session path to another tenant, a temporary table that
     * shadows items, a prepared statement reading the first tenant's table */
    acquire(&sch[0], &d);
    ST_OK(d, tn_db_exec(d, "SET search_path TO tn_pool_3", 0, NULL));
    ST_OK(d, tn_db_exec(d, "CREATE TEMP TABLE items (marker TEXT)", 0, NULL));
    ST_OK(d, tn_db_exec(d, "INSERT INTO pg_temp.items VALUES ('temp of 0')", 0, NULL));
    ST_OK(d, tn_db_exec(d, "PREPARE peek AS SELECT marker FROM tn_pool_0.items", 0, NULL));
    pool_release(pool, d);
    acquire(&sch[1], &d);
    expect_marker(d, "tn_pool_1");
    ST_EXPECT(d, TN_INVALID, tn_db_exec(d, "EXECUTE peek", 0, NULL));
    pool_release(pool, d);

    /* a statement timeout */
    storage_target quick = sch[4];
    quick.statement_timeout_ms = 100;
    acquire(&quick, &d);
    ST_EXPECT(d, TN_TIMEOUT, tn_db_exec(d, "SELECT pg_sleep(3)", 0, NULL));
    pool_release(pool, d);
    acquire(&quick, &d);
    expect_marker(d, "tn_pool_4");
    pool_release(pool, d);
    acquire(&sch[5], &d);
    expect_marker(d, "tn_pool_5");
    pool_release(pool, d);
    stats(&s);
    ck_assert_int_eq(s.pg_open, 2);   /* one per (server, statement timeout) */
}
END_TEST

START_TEST(test_pool_schema_broken)
{
    pool = pool_create(NULL);
    tn_db *d;
    char pid0[32], pid[32];
    acquire(&sch[0], &d);
    expect_marker(d, "tn_pool_0");
    pid_of(d, pid0);
    st_kill_pid(pid0);
    ST_EXPECT(d, TN_IO, tn_db_exec(d, "SELECT 1", 0, NULL));
    pool_release(pool, d);   /* reset: a new backend */
    acquire(&sch[1], &d);
    expect_marker(d, "tn_pool_1");
    pid_of(d, pid);
    ck_assert_str_ne(pid, pid0);
    pool_release(pool, d);
    /* killed in the middle of a transaction */
    acquire(&sch[2], &d);
    ST_OK(d, tn_db_begin(d));
    ST_OK(d, tn_db_exec(d, "INSERT INTO items VALUES ('lost')", 0, NULL));
    st_kill_backend(d);
    pool_release(pool, d);
    acquire(&sch[2], &d);
    expect_marker(d, "tn_pool_2");
    pool_release(pool, d);
    /* killed while idle in the pool (a server restart, pg_terminate_backend): acquire sees
     * the closed socket and connects afresh, so no request pays for it */
    acquire(&sch[3], &d);
    pid_of(d, pid0);
    pool_release(pool, d);
    st_kill_pid(pid0);
    acquire(&sch[3], &d);
    expect_marker(d, "tn_pool_3");
    pid_of(d, pid);
    ck_assert_str_ne(pid, pid0);
    pool_release(pool, d);
    acquire(&sch[4], &d);
    expect_marker(d, "tn_pool_4");
    pool_release(pool, d);
    pool_stats s;
    stats(&s);
    ck_assert_uint_eq(s.pg_connects, 2);   /* db_reset reconnected in place twice; one stale */
    ck_assert_uint_eq(s.stale, 1);
    ck_assert_uint_ge(s.resets, 2);
}
END_TEST

START_TEST(test_pool_schema_recycle)
{
    pool = pool_create(&(pool_limits){.pg_max_tenants = 3});
    tn_db *d;
    char pid0[32], pid[32];
    pool_stats s;
    /* two tenants, many times: under the bound */
    for (int i = 0; i < 10; i++) {
        acquire(&sch[i % 2], &d);
        if (i == 0)
            pid_of(d, pid0);
        pool_release(pool, d);
    }
    stats(&s);
    ck_assert_uint_eq(s.pg_recycles, 0);
    /* the third distinct schema reaches it: closed on release */
    acquire(&sch[2], &d);
    pid_of(d, pid);
    ck_assert_str_eq(pid, pid0);
    pool_release(pool, d);
    stats(&s);
    ck_assert_uint_eq(s.pg_recycles, 1);
    ck_assert_int_eq(s.pg_open, 0);
    acquire(&sch[0], &d);
    pid_of(d, pid);
    ck_assert_str_ne(pid, pid0);   /* a new backend, with an empty catalog cache */
    expect_marker(d, "tn_pool_0");
    pool_release(pool, d);
    stats(&s);
    ck_assert_uint_eq(s.pg_connects, 2);
    ck_assert_int_eq(s.pg_open, 1);

    /* a target's own bound (its placement's max_tenants) wins over the pool's default, up
     * and down */
    storage_target t[4];
    for (int i = 0; i < 4; i++) {
        t[i] = sch[i];
        t[i].max_tenants = 100;
    }
    for (int i = 0; i < 4; i++) {
        acquire(&t[i], &d);
        pool_release(pool, d);
    }
    stats(&s);
    ck_assert_uint_eq(s.pg_recycles, 1);   /* 4 distinct schemas, over the default 3 */
    t[1].max_tenants = 2;
    acquire(&t[1], &d);
    pool_release(pool, d);
    stats(&s);
    ck_assert_uint_eq(s.pg_recycles, 2);   /* the entry had served 4 >= 2 */
}
END_TEST

/* One acquire and release of t; pid: the backend that served it. */
static void served_by(const storage_target *t, char pid[32])
{
    tn_db *d;
    acquire(t, &d);
    pid_of(d, pid);
    pool_release(pool, d);
}

/* A tenant's role on the shared login: each statement of its requests runs as that role, in
 * an autocommit statement and in a transaction alike, and the role ends with the request: the
 * next tenant on the same connection (one without a role here) runs as the login again. A
 * role set for the session instead of the transaction, or left out of one of the two forms,
 * shows as the wrong current_user. */
START_TEST(test_pool_schema_roles)
{
    pool = pool_create(&(pool_limits){.pg_max_tenants = 100});
    static char rname[2][32];
    storage_target r[2];
    char err[512];
    for (int i = 0; i < 2; i++) {
        snprintf(rname[i], sizeof(rname[i]), "tn_pool_r%d", i);
        r[i] = (storage_target){.kind = TARGET_PG_SCHEMA, .server = st_pg, .name = rname[i],
                                .role = rname[i]};
        target_drop(&r[i], err, sizeof(err));
        ck_assert_msg(target_create(&r[i], err, sizeof(err)) == TN_OK, "%s", err);
    }
    tn_db *d;
    char login[64], pid0[32], pid[32], v[64];
    acquire(&sch[0], &d);
    ST_OK(d, db_query_value(d, login, sizeof(login), "SELECT session_user", 0, NULL));
    pid_of(d, pid0);
    pool_release(pool, d);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 2; i++) {
            for (int txn = 0; txn < 2; txn++) {
                acquire(&r[i], &d);
                pid_of(d, pid);
                ck_assert_str_eq(pid, pid0);   /* one connection for every tenant */
                if (txn)
                    ST_OK(d, tn_db_begin(d));
                ST_OK(d, db_query_value(d, v, sizeof(v), "SELECT current_user", 0, NULL));
                ck_assert_msg(strcmp(v, rname[i]) == 0, "round %d, %s, %s: current_user %s",
                              round, rname[i], txn ? "transaction" : "autocommit", v);
                if (txn)
                    ST_OK(d, tn_db_commit(d));
                pool_release(pool, d);
                acquire(&sch[0], &d);
                ST_OK(d, db_query_value(d, v, sizeof(v), "SELECT current_user", 0, NULL));
                ck_assert_msg(strcmp(v, login) == 0,
                              "after %s (%s): the next tenant runs as %s, not the login %s",
                              rname[i], txn ? "transaction" : "autocommit", v, login);
                pool_release(pool, d);
            }
        }
    }
    for (int i = 0; i < 2; i++)
        ck_assert_msg(target_drop(&r[i], err, sizeof(err)) == TN_OK, "%s", err);
}
END_TEST

/* Group logins (placement.NAME.login = group): a tenant's connection logs in as its group's
 * login, one connection per group, each transaction as the tenant's role; from a group's
 * connection the database refuses the role of a tenant of another group. */
START_TEST(test_pool_schema_groups)
{
    pool = pool_create(&(pool_limits){.pg_max_tenants = 100});
    static char rname[3][32];
    const char *group[3] = {"tn_pool_ga", "tn_pool_ga", "tn_pool_gb"};
    storage_target r[3];
    char err[512];
    tn_db *a = st_open(st_pg, NULL);
    for (int i = 0; i < 3; i++) {
        snprintf(rname[i], sizeof(rname[i]), "tn_pool_g%d", i);
        r[i] = (storage_target){.kind = TARGET_PG_SCHEMA, .server = st_pg, .name = rname[i],
                                .role = rname[i], .group_role = group[i]};
        target_drop(&r[i], err, sizeof(err));
    }
    tn_db_exec(a, "DROP ROLE IF EXISTS tn_pool_ga", 0, NULL);
    tn_db_exec(a, "DROP ROLE IF EXISTS tn_pool_gb", 0, NULL);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(target_create(&r[i], err, sizeof(err)) == TN_OK, "%s", err);
    tn_db *d;
    char pid[3][32], v[128];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 3; i++) {
            acquire(&r[i], &d);
            ST_OK(d, tn_db_begin(d));
            ST_OK(d, db_query_value(d, v, sizeof(v),
                                    "SELECT session_user || ' ' || current_user", 0, NULL));
            char want[160];
            snprintf(want, sizeof(want), "%s %s", group[i], rname[i]);
            ck_assert_str_eq(v, want);
            ST_OK(d, tn_db_commit(d));
            char p[32];
            pid_of(d, p);
            if (round == 0)
                memcpy(pid[i], p, sizeof(p));
            else
                ck_assert_str_eq(p, pid[i]);   /* kept, one per group */
            pool_release(pool, d);
        }
        ck_assert_str_eq(pid[0], pid[1]);      /* the tenants of a group share it */
        ck_assert_str_ne(pid[0], pid[2]);      /* another group's is another */
    }
    /* the database, not the host, keeps a group's connection out of another group's tenant;
     * within its group, as with the shared login, the app's own SQL may switch (README) */
    acquire(&r[0], &d);
    ST_OK(d, tn_db_begin(d));
    ck_assert_int_ne(tn_db_exec(d, "SET LOCAL ROLE tn_pool_g2", 0, NULL), TN_OK);
    ck_assert_msg(strstr(tn_db_error(d), "permission denied to set role") != NULL, "%s",
                  tn_db_error(d));
    tn_db_rollback(d);
    ST_OK(d, tn_db_begin(d));
    ST_OK(d, tn_db_exec(d, "SET LOCAL ROLE tn_pool_g1", 0, NULL));
    tn_db_rollback(d);
    pool_release(pool, d);
    pool_destroy(pool);
    pool = NULL;
    for (int i = 0; i < 3; i++)
        ck_assert_msg(target_drop(&r[i], err, sizeof(err)) == TN_OK, "%s", err);
    ST_OK(a, tn_db_exec(a, "DROP ROLE tn_pool_ga", 0, NULL));
    ST_OK(a, tn_db_exec(a, "DROP ROLE tn_pool_gb", 0, NULL));
    db_close(a);
}
END_TEST

/* The byte bound (placement.NAME.max_backend_memory): the backend's memory is read first
 * after pg_memory_every new schemas, then paced by how far it is from its bound; the
 * connection is closed once it reaches the bound; a login that may not read it is counted
 * and left to the count bound. */
START_TEST(test_pool_schema_memory)
{
    pool = pool_create(&(pool_limits){.pg_max_tenants = 100, .pg_memory_every = 2});
    storage_target t[6];
    for (int i = 0; i < 6; i++) {
        t[i] = sch[i];
        t[i].max_backend_bytes = 1ll << 40;   /* a terabyte: read, never reached */
    }
    tn_db *d;
    char pid0[32], pid[32];
    pool_stats s;
    for (int i = 0; i < 6; i++) {
        acquire(&t[i], &d);
        expect_marker(d, schema_name[i]);
        if (i == 0)
            pid_of(d, pid0);
        pool_release(pool, d);
        stats(&s);
        /* read after the 2nd new schema; a terabyte away, the next read is far off */
        ck_assert_uint_eq(s.pg_memory_looks, (i >= 1 ? 1u : 0u));
    }
    ck_assert_uint_eq(s.pg_recycles, 0);
    /* a bound any backend is over: a changed bound makes the read due again (every new
     * schemas after the last one, long passed here), so the next release reads it and
     * closes the connection after it served */
    for (int i = 0; i < 6; i++)
        t[i].max_backend_bytes = 1;
    served_by(&t[0], pid);
    ck_assert_str_eq(pid, pid0);
    stats(&s);
    ck_assert_uint_eq(s.pg_memory_looks, 2);
    ck_assert_uint_eq(s.pg_memory_recycles, 1);
    ck_assert_uint_eq(s.pg_recycles, 1);
    acquire(&t[2], &d);
    pid_of(d, pid);
    ck_assert_str_ne(pid, pid0);   /* a new backend */
    expect_marker(d, schema_name[2]);
    pool_release(pool, d);   /* its first new schema: no read yet */
    stats(&s);
    ck_assert_uint_eq(s.pg_memory_looks, 2);
    served_by(&t[3], pid);   /* the 2nd: read, over the bound, closed */
    stats(&s);
    ck_assert_uint_eq(s.pg_memory_looks, 3);
    ck_assert_uint_eq(s.pg_memory_recycles, 2);
    pool_destroy(pool);

    /* A login without pg_read_all_stats: the read is refused, counted, and not tried again
     * on that backend; the connection stays (its count bound still holds). */
    char server[1024];
    st_plain_login("tn_pool_nostats", server, sizeof(server));
    pool = pool_create(&(pool_limits){.pg_max_tenants = 100, .pg_memory_every = 1});
    storage_target u[3];
    for (int i = 0; i < 3; i++) {
        u[i] = sch[i];
        u[i].server = server;
        u[i].max_backend_bytes = 1;
    }
    for (int i = 0; i < 3; i++) {
        acquire(&u[i], &d);
        char who[64];
        ST_OK(d, db_query_value(d, who, sizeof(who), "SELECT current_user", 0, NULL));
        ck_assert_str_eq(who, "tn_pool_nostats");
        pool_release(pool, d);
    }
    stats(&s);
    ck_assert_uint_eq(s.pg_memory_unread, 1);
    ck_assert_uint_eq(s.pg_memory_looks, 1);
    ck_assert_uint_eq(s.pg_recycles, 0);
    ck_assert_int_eq(s.pg_open, 1);
}
END_TEST

/* Each of the six targets served once (its marker read when `read`: a login without rights
 * on the schemas only connects): the pool's stats after. */
static void serve_six(const storage_target *t, bool read, pool_stats *s)
{
    tn_db *d;
    for (int i = 0; i < 6; i++) {
        acquire(&t[i], &d);
        if (read)
            expect_marker(d, schema_name[i]);
        pool_release(pool, d);
    }
    stats(s);
}

/* A placement that sets no max_tenants: while the byte bound is read, the count does not
 * close the connection (a worker keeps its share of the tenants warm); with the byte bound
 * off, or a login that may not read the memory, the pool's count does. */
START_TEST(test_pool_schema_count_default)
{
    pool = pool_create(&(pool_limits){.pg_max_tenants = 3, .pg_memory_every = 2});
    storage_target t[6];
    for (int i = 0; i < 6; i++) {
        t[i] = sch[i];
        t[i].max_tenants = 0;
        t[i].max_backend_bytes = 1ll << 40;   /* read, never reached */
    }
    pool_stats s;
    serve_six(t, true, &s);
    serve_six(t, true, &s);
    ck_assert_uint_eq(s.pg_recycles, 0);   /* 6 schemas on one backend, over the count 3 */
    ck_assert_int_eq(s.pg_open, 1);
    /* the byte bound off: the count holds */
    for (int i = 0; i < 6; i++)
        t[i].max_backend_bytes = 0;
    serve_six(t, true, &s);
    ck_assert_uint_ge(s.pg_recycles, 1);
    /* the placement's own count wins over the byte bound */
    pool_destroy(pool);
    pool = pool_create(&(pool_limits){.pg_max_tenants = 100, .pg_memory_every = 2});
    for (int i = 0; i < 6; i++) {
        t[i].max_backend_bytes = 1ll << 40;
        t[i].max_tenants = 2;
    }
    serve_six(t, true, &s);
    ck_assert_uint_eq(s.pg_recycles, 3);
    pool_destroy(pool);
    /* a login that may not read its backend's memory: the pool's count after the refusal */
    char server[1024];
    st_plain_login("tn_pool_nostats2", server, sizeof(server));
    pool = pool_create(&(pool_limits){.pg_max_tenants = 3, .pg_memory_every = 2});
    for (int i = 0; i < 6; i++) {
        t[i].server = server;
        t[i].max_tenants = 0;
    }
    serve_six(t, false, &s);
    ck_assert_uint_ge(s.pg_memory_unread, 1);   /* once per backend */
    ck_assert_uint_ge(s.pg_recycles, 1);
}
END_TEST

/* Random tenants and random bad endings, one connection: every read is its own tenant's. */
START_TEST(test_pool_schema_random)
{
    pool = pool_create(&(pool_limits){.pg_max_tenants = 4});
    srand(12345);
    tn_db *d;
    int wrong = 0;
    for (int op = 0; op < 400; op++) {
        int i = rand() % NSCHEMAS, how = rand() % 6;
        acquire(&sch[i], &d);
        char v[64] = "";
        int rc;
        switch (how) {
        case 0:   /* autocommit */
            rc = db_query_value(d, v, sizeof(v), "SELECT marker FROM items", 0, NULL);
            break;
        case 1:   /* a transaction */
            ST_OK(d, tn_db_begin(d));
            rc = db_query_value(d, v, sizeof(v), "SELECT marker FROM items", 0, NULL);
            ST_OK(d, tn_db_commit(d));
            break;
        case 2:   /* a transaction that fails and is left open */
            ST_OK(d, tn_db_begin(d));
            rc = db_query_value(d, v, sizeof(v), "SELECT marker FROM items", 0, NULL);
            tn_db_exec(d, "SELECT * FROM no_such_table", 0, NULL);
            break;
        case 3:   /* a failed autocommit statement, then a read */
            tn_db_exec(d, "INSERT INTO items VALUES (NULL)", 0, NULL);
            rc = db_query_value(d, v, sizeof(v), "SELECT marker FROM items", 0, NULL);
            break;
        case 4:   /* session state */
            tn_db_exec(d, "SET search_path TO public", 0, NULL);
            rc = db_query_value(d, v, sizeof(v), "SELECT marker FROM items", 0, NULL);
            break;
        default:  /* a transaction left open after a read */
            ST_OK(d, tn_db_begin(d));
            rc = db_query_value(d, v, sizeof(v), "SELECT marker FROM items", 0, NULL);
            break;
        }
        ck_assert_msg(rc == TN_OK, "op %d: %s", op, tn_db_error(d));
        if (strcmp(v, schema_name[i]) != 0)
            wrong++;
        pool_release(pool, d);
    }
    ck_assert_int_eq(wrong, 0);
    pool_stats s;
    stats(&s);
    ck_assert_uint_gt(s.pg_recycles, 0);
}
END_TEST

/* ---- PostgreSQL: database mode ----------------------------------------------------------------- */

START_TEST(test_pool_database_lru)
{
    static const char *names[] = {"tn_pool_db0", "tn_pool_db1", "tn_pool_db2"};
    storage_target t[3];
    char err[512];
    for (int i = 0; i < 3; i++) {
        t[i] = (storage_target){.kind = TARGET_PG_DATABASE, .server = st_pg, .name = names[i]};
        target_drop(&t[i], err, sizeof(err));
        ck_assert_msg(target_create(&t[i], err, sizeof(err)) == TN_OK, "%s", err);
        tn_db *d = NULL;
        ck_assert_int_eq(target_open(&t[i], &d, err, sizeof(err)), TN_OK);
        const char *p[] = {names[i]};
        ST_OK(d, tn_db_exec(d, "CREATE TABLE items (marker TEXT PRIMARY KEY)", 0, NULL));
        ST_OK(d, tn_db_exec(d, "INSERT INTO items VALUES ($1)", 1, p));
        db_close(d);
    }
    pool = pool_create(&(pool_limits){.pg_db_max_open = 2});
    tn_db *d;
    pool_stats s;
    for (int i = 0; i < 3; i++) {
        acquire(&t[i], &d);
        expect_marker(d, names[i]);
        pool_release(pool, d);
    }
    stats(&s);
    ck_assert_int_eq(s.pg_open, 2);
    ck_assert_uint_eq(s.pg_connects, 3);
    ck_assert_uint_eq(s.evictions, 1);
    ck_assert_uint_eq(s.pg_evictions, 1);   /* what auto tenant.affinity looks for */
    acquire(&t[2], &d);   /* kept */
    expect_marker(d, names[2]);
    ST_OK(d, tn_db_begin(d));
    ST_OK(d, tn_db_exec(d, "INSERT INTO items VALUES ('x')", 0, NULL));
    pool_release(pool, d);
    acquire(&t[0], &d);   /* was evicted */
    expect_marker(d, names[0]);
    pool_release(pool, d);
    stats(&s);
    ck_assert_uint_eq(s.pg_connects, 4);
    acquire(&t[2], &d);
    expect_marker(d, names[2]);   /* the open transaction was rolled back */
    pool_release(pool, d);
    pool_destroy(pool);
    pool = NULL;
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(target_drop(&t[i], err, sizeof(err)), TN_OK);
}
END_TEST



/* Tenant `gone`'s file leaves its path (with its -wal and -shm), and tenant `other`'s file,
 * checkpointed, takes the path as a new tenant's would. */
static void replace_sqlite_file(int gone, int other)
{
    char side[600];
    ck_assert_int_eq(unlink(sq_path[gone]), 0);
    snprintf(side, sizeof(side), "%s-wal", sq_path[gone]);
    unlink(side);
    snprintf(side, sizeof(side), "%s-shm", sq_path[gone]);
    unlink(side);
    tn_db *c = NULL;
    char err[512];
    ck_assert_int_eq(target_open(&sq[other], &c, err, sizeof(err)), TN_OK);
    ST_OK(c, tn_db_exec(c, "PRAGMA wal_checkpoint(TRUNCATE)", 0, NULL));
    db_close(c);
    ck_assert_int_eq(link(sq_path[other], sq_path[gone]), 0);
}

/* A tenant's file deleted and another created at the same path (a purge, or a move that
 * dropped its source, then a new tenant with the same slug): the kept handle reads the
 * deleted file, so the pool must notice and open the new one. */
START_TEST(test_pool_sqlite_replaced)
{
    make_sqlite_tenants(2);
    pool = pool_create(NULL);
    tn_db *d;
    pool_stats s;
    acquire(&sq[0], &d);
    expect_marker(d, "s0");
    pool_release(pool, d);
    /* s0's file goes away; s1's file takes its path */
    replace_sqlite_file(0, 1);
    char err[512];
    acquire(&sq[0], &d);
    expect_marker(d, "s1");   /* the file now at that path, not the deleted one */
    pool_release(pool, d);
    stats(&s);
    ck_assert_uint_eq(s.stale, 1);
    /* deleted and not replaced: not found, never the old data */
    ck_assert_int_eq(unlink(sq_path[0]), 0);
    ck_assert_int_eq(pool_acquire(pool, &sq[0], &d, err, sizeof(err)), TN_NOTFOUND);
}
END_TEST

/* With the registry generation (what a worker's pool gets): a kept handle is taken without a
 * stat while the generation stands still, and after a purge and a new tenant at the same path
 * (each bumps it) the path is checked, so the new file is read and never the deleted one.
 * A generation of 0 (not known) checks every time. */
static uint64_t test_gen;
static uint64_t gen_of_test(void *ctx)
{
    (void)ctx;
    return test_gen;
}

/* Acquire and release t n times (each read seeing marker, unless NULL); the pool's path
 * checks so far. */
static uint64_t checks_after(storage_target *t, int n, const char *marker)
{
    tn_db *d;
    pool_stats s;
    for (int i = 0; i < n; i++) {
        acquire(t, &d);
        if (marker != NULL)
            expect_marker(d, marker);
        pool_release(pool, d);
    }
    stats(&s);
    return s.sqlite_checks;
}

START_TEST(test_pool_sqlite_generation)
{
    make_sqlite_tenants(2);
    test_gen = 7;
    pool = pool_create(&(pool_limits){.generation = gen_of_test});
    tn_db *d;
    pool_stats s;
    ck_assert_uint_eq(checks_after(&sq[0], 3, "s0"), 0);   /* opened at 7, kept at 7: no stat */
    stats(&s);
    ck_assert_uint_eq(s.sqlite_opens, 1);
    /* purged (a bump), and s1's file at the path as a new tenant (another bump) */
    test_gen += 2;
    replace_sqlite_file(0, 1);
    char err[512];
    /* the file now at that path is read, not the deleted one */
    ck_assert_uint_eq(checks_after(&sq[0], 1, "s1"), 1);
    stats(&s);
    ck_assert_uint_eq(s.stale, 1);
    /* the new handle was opened at this generation: no stat while it stands */
    ck_assert_uint_eq(checks_after(&sq[0], 1, NULL), 1);
    /* another registry change, the file unchanged: one stat, then none again */
    test_gen++;
    ck_assert_uint_eq(checks_after(&sq[0], 2, "s1"), 2);
    stats(&s);
    ck_assert_uint_eq(s.stale, 1);
    /* no generation known: every acquire checks */
    test_gen = 0;
    ck_assert_uint_eq(checks_after(&sq[0], 2, NULL), 4);
    /* purged and not replaced, with a bump: not found, never the old data */
    test_gen = 20;
    ck_assert_int_eq(unlink(sq_path[0]), 0);
    ck_assert_int_eq(pool_acquire(pool, &sq[0], &d, err, sizeof(err)), TN_NOTFOUND);
}
END_TEST

/* A tenant's database dropped WITH FORCE (a move, a delete) and created again: the pooled
 * connection's backend was terminated, so the next acquire connects afresh instead of
 * failing the first request. */
START_TEST(test_pool_database_dropped)
{
    storage_target t = {.kind = TARGET_PG_DATABASE, .server = st_pg, .name = "tn_pool_dbx"};
    char err[512];
    target_drop(&t, err, sizeof(err));
    ck_assert_msg(target_create(&t, err, sizeof(err)) == TN_OK, "%s", err);
    pool = pool_create(NULL);
    tn_db *d;
    pool_stats s;
    acquire(&t, &d);
    ST_OK(d, tn_db_exec(d, "CREATE TABLE items (marker TEXT PRIMARY KEY)", 0, NULL));
    ST_OK(d, tn_db_exec(d, "INSERT INTO items VALUES ('old')", 0, NULL));
    pool_release(pool, d);
    ck_assert_int_eq(target_drop(&t, err, sizeof(err)), TN_OK);
    ck_assert_msg(target_create(&t, err, sizeof(err)) == TN_OK, "%s", err);
    tn_db *c = NULL;
    ck_assert_int_eq(target_open(&t, &c, err, sizeof(err)), TN_OK);
    ST_OK(c, tn_db_exec(c, "CREATE TABLE items (marker TEXT PRIMARY KEY)", 0, NULL));
    ST_OK(c, tn_db_exec(c, "INSERT INTO items VALUES ('new')", 0, NULL));
    db_close(c);
    acquire(&t, &d);
    expect_marker(d, "new");
    pool_release(pool, d);
    stats(&s);
    ck_assert_uint_eq(s.stale, 1);
    ck_assert_uint_eq(s.pg_connects, 2);
    pool_destroy(pool);
    pool = NULL;
    ck_assert_int_eq(target_drop(&t, err, sizeof(err)), TN_OK);
}
END_TEST

/* A target whose connect fails is refused at once until its retry time (250 ms, doubling),
 * then tried again; once it connects it is served as usual. The target here is a database
 * that does not exist yet, then does. A refusal is asserted only when the test itself ran
 * well inside the window (a busy machine can stall a step past it, and CREATE DATABASE sits
 * inside the 500 ms one); the counters are checked against what did happen either way. */
START_TEST(test_pool_pg_down_backoff)
{
    storage_target t = {.kind = TARGET_PG_DATABASE, .server = st_pg, .name = "tn_pool_late"};
    char err[512];
    target_drop(&t, err, sizeof(err));
    pool = pool_create(NULL);
    tn_db *d = NULL;
    pool_stats s;
    unsigned down = 0, refused = 0;
    ck_assert_int_eq(pool_acquire(pool, &t, &d, err, sizeof(err)), TN_IO);
    down++;
    int64_t failed_at = clock_mono_ms();   /* retry time: at least this + 250 */
    ck_assert_msg(strstr(err, "not tried again") == NULL, "%s", err);
    ck_assert_int_eq(pool_acquire(pool, &t, &d, err, sizeof(err)), TN_IO);
    if (clock_mono_ms() - failed_at < 200) {
        ck_assert_msg(strstr(err, "not tried again") != NULL, "refused at once: %s", err);
        refused++;
    } else {
        if (strstr(err, "not tried again"))
            refused++;
        else
            down++;
    }
    stats(&s);
    ck_assert_uint_eq(s.pg_down, down);
    ck_assert_uint_eq(s.pg_refused, refused);
    ck_assert_uint_eq(s.pg_connects, 0);
    usleep(300 * 1000);   /* past the first retry time: tried, fails, now 500 ms */
    int64_t tried_at = clock_mono_ms();
    ck_assert_int_eq(pool_acquire(pool, &t, &d, err, sizeof(err)), TN_IO);
    down++;
    ck_assert_msg(strstr(err, "not tried again") == NULL, "tried again: %s", err);
    stats(&s);
    ck_assert_uint_eq(s.pg_down, down);
    ck_assert_msg(target_create(&t, err, sizeof(err)) == TN_OK, "%s", err);
    unsigned connects = 0;
    if (clock_mono_ms() - tried_at < 450) {
        /* up now, but still backing off */
        ck_assert_int_eq(pool_acquire(pool, &t, &d, err, sizeof(err)), TN_IO);
        ck_assert_msg(strstr(err, "not tried again") != NULL, "still backing off: %s", err);
        refused++;
    }
    usleep(550 * 1000);
    acquire(&t, &d);   /* tried again: up, and forgotten as down */
    connects++;
    pool_release(pool, d);
    acquire(&t, &d);
    pool_release(pool, d);
    stats(&s);
    ck_assert_uint_eq(s.pg_connects, connects);
    ck_assert_uint_eq(s.pg_down, down);
    ck_assert_uint_eq(s.pg_refused, refused);
    pool_destroy(pool);
    pool = NULL;
    ck_assert_int_eq(target_drop(&t, err, sizeof(err)), TN_OK);
}
END_TEST

/* ---- suites ---------------------------------------------------------------------------------- */

Suite *pool_suite(void);
Suite *pool_suite(void)
{
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("sqlite");
    tcase_add_checked_fixture(tc, NULL, teardown_pool);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_pool_sqlite_lru);
    tcase_add_test(tc, test_pool_sqlite_release);
    tcase_add_test(tc, test_pool_sqlite_fd_bound);
    tcase_add_test(tc, test_pool_sqlite_settings);
    tcase_add_test(tc, test_pool_sqlite_replaced);
    tcase_add_test(tc, test_pool_sqlite_generation);
    suite_add_tcase(s, tc);
    tc = tcase_create("postgres");
    tcase_add_checked_fixture(tc, setup_pg, teardown_pool);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_pool_schema_isolation);
    tcase_add_test(tc, test_pool_schema_roles);
    tcase_add_test(tc, test_pool_schema_groups);
    tcase_add_test(tc, test_pool_schema_broken);
    tcase_add_test(tc, test_pool_schema_recycle);
    tcase_add_test(tc, test_pool_schema_memory);
    tcase_add_test(tc, test_pool_schema_count_default);
    tcase_add_test(tc, test_pool_schema_random);
    tcase_add_test(tc, test_pool_database_lru);
    tcase_add_test(tc, test_pool_database_dropped);
    tcase_add_test(tc, test_pool_pg_down_backoff);
    suite_add_tcase(s, tc);
    return s;
}

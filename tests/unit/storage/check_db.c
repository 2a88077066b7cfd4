/*
 * check_db.c — the storage driver layer: one suite of test cases run against SQLite (a
 * temporary file per test) and against a real PostgreSQL (TENANCY_TEST_PG, a schema
 * recreated per test), plus backend-specific cases and the script splitter on its own.
 *
 * The SQL in the shared cases is written to mean the same on both backends; where the
 * backends differ on purpose (last_id, an error inside a transaction) the case says so.
 */
#include "core/first.h"
#include "storage/db.h"
#include "storage/db_int.h"   /* the splitter */
#include "core/rc.h"
#include "storage/migrate.h"  /* migrate_clone: the one connection not opened by the driver */

#include <check.h>
#include <dirent.h>
#include <dlfcn.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- fixtures ----------------------------------------------------------------------------- */

static char tmpdir[256];       /* made by db_tests_init, removed by db_tests_fini */
static const char *pg_uri;
static bool backend_pg;        /* the test case running: PostgreSQL or SQLite */
static char uri[512];          /* this test's database */
static tn_db *db;

#define EXPECT(d, want, expr)                                                                \
    do {                                                                                     \
        int rc_ = (expr);                                                                    \
        ck_assert_msg(rc_ == (want), "%s = %s, want %s: %s", #expr, tn_rc_str(rc_),          \
                      tn_rc_str(want), tn_db_error(d));                                      \
    } while (0)
#define OK(expr) EXPECT(db, TN_OK, expr)

static tn_db *open_db(const char *u, const db_options *opt)
{
    tn_db *d = NULL;
    char err[512];
    int rc = db_open(u, opt, &d, err, sizeof(err));
    ck_assert_msg(rc == TN_OK, "db_open: %s: %s", tn_rc_str(rc), err);
    ck_assert_ptr_nonnull(d);
    if (backend_pg) {   /* every connection of a test works in the test's schema */
        EXPECT(d, TN_OK, tn_db_exec(d, "SET search_path TO tn_check", 0, NULL));
    }
    return d;
}

static void setup_sqlite(void)
{
    static int n;
    backend_pg = false;
    snprintf(uri, sizeof(uri), "sqlite:%s/t-%ld-%d.db", tmpdir, (long)getpid(), ++n);
    db = open_db(uri, NULL);
}

static void setup_pg(void)
{
    backend_pg = true;
    snprintf(uri, sizeof(uri), "%s", pg_uri);
    tn_db *d = NULL;
    char err[512];
    int rc = db_open(uri, NULL, &d, err, sizeof(err));
    ck_assert_msg(rc == TN_OK, "db_open: %s: %s", tn_rc_str(rc), err);
    EXPECT(d, TN_OK, tn_db_exec(d, "DROP SCHEMA IF EXISTS tn_check CASCADE", 0, NULL));
    EXPECT(d, TN_OK, tn_db_exec(d, "CREATE SCHEMA tn_check", 0, NULL));
    EXPECT(d, TN_OK, tn_db_exec(d, "SET search_path TO tn_check", 0, NULL));
    db = d;
}

static void teardown(void)
{
    db_close(db);
    db = NULL;
}

static void make_table(void)
{
    OK(tn_db_exec(db, "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE, note TEXT)", 0,
                  NULL));
}

static long count(tn_db *d, const char *sql)
{
    char v[32];
    EXPECT(d, TN_OK, db_query_value(d, v, sizeof(v), sql, 0, NULL));
    return strtol(v, NULL, 10);
}

static void insert(const char *id, const char *name, const char *note)
{
    const char *p[] = {id, name, note};
    OK(tn_db_exec(db, "INSERT INTO t (id, name, note) VALUES ($1, $2, $3)", 3, p));
}

/* ---- shared cases --------------------------------------------------------------------------- */

START_TEST(test_exec_query_nulls)
{
    make_table();
    insert("1", "alice", NULL);
    insert("2", "bob", "");
    insert("3", "carol", "x;y 'z'");
    tn_rows *r = NULL;
    OK(tn_db_query(db, &r, "SELECT id, name, note FROM t ORDER BY id", 0, NULL));
    ck_assert_int_eq(tn_rows_ncols(r), 3);
    ck_assert_str_eq(tn_rows_colname(r, 0), "id");
    ck_assert_str_eq(tn_rows_colname(r, 2), "note");
    ck_assert_ptr_null(tn_rows_colname(r, 3));
    ck_assert_ptr_null(tn_rows_get(r, 0));   /* no current row yet */
    EXPECT(db, TN_OK, tn_rows_next(r));
    ck_assert_str_eq(tn_rows_get(r, 0), "1");
    ck_assert_str_eq(tn_rows_get(r, 1), "alice");
    ck_assert_ptr_null(tn_rows_get(r, 2));   /* SQL NULL */
    ck_assert_ptr_null(tn_rows_get(r, 3));   /* no such column */
    ck_assert_ptr_null(tn_rows_get(r, -1));
    EXPECT(db, TN_OK, tn_rows_next(r));
    ck_assert_str_eq(tn_rows_get(r, 2), "");   /* '' is not NULL */
    EXPECT(db, TN_OK, tn_rows_next(r));
    ck_assert_str_eq(tn_rows_get(r, 2), "x;y 'z'");
    EXPECT(db, TN_DONE, tn_rows_next(r));
    EXPECT(db, TN_DONE, tn_rows_next(r));
    ck_assert_ptr_null(tn_rows_get(r, 0));
    tn_rows_free(r);
    tn_rows_free(NULL);

    /* an empty result, and a filter by a NULL parameter */
    const char *p[] = {NULL};
    OK(tn_db_query(db, &r, "SELECT id FROM t WHERE note IS NOT DISTINCT FROM $1", 1, p));
    EXPECT(db, TN_OK, tn_rows_next(r));
    ck_assert_str_eq(tn_rows_get(r, 0), "1");
    EXPECT(db, TN_DONE, tn_rows_next(r));
    tn_rows_free(r);
    OK(tn_db_query(db, &r, "SELECT id FROM t WHERE id > 100", 0, NULL));
    ck_assert_int_eq(tn_rows_ncols(r), 1);
    EXPECT(db, TN_DONE, tn_rows_next(r));
    tn_rows_free(r);
    /* integers as text, at both ends of their range, two rows through one column */
    OK(tn_db_query(db, &r,
                   "SELECT 0, -1, 9223372036854775807, -9223372036854775807 - 1, 42, 1.5 "
                   "UNION ALL SELECT 7, 8, 9, 10, -11, 2.5",
                   0, NULL));
    EXPECT(db, TN_OK, tn_rows_next(r));
    static const char *const first[] = {"0", "-1", "9223372036854775807",
                                        "-9223372036854775808", "42", "1.5"};
    for (int i = 0; i < 6; i++)
        ck_assert_str_eq(tn_rows_get(r, i), first[i]);
    const char *kept = tn_rows_get(r, 4);
    ck_assert_str_eq(kept, "42");   /* the same text asked twice */
    EXPECT(db, TN_OK, tn_rows_next(r));
    ck_assert_str_eq(tn_rows_get(r, 0), "7");
    ck_assert_str_eq(tn_rows_get(r, 4), "-11");
    ck_assert_str_eq(tn_rows_get(r, 5), "2.5");
    tn_rows_free(r);
    ck_assert_str_eq(tn_db_error(db), "");
    ck_assert_str_eq(tn_db_backend(db), backend_pg ? "postgres" : "sqlite");
    ck_assert_ptr_nonnull(tn_db_native(db));
}
END_TEST

START_TEST(test_placeholders_reuse_and_order)
{
    char v[64];
    const char *ab[] = {"a", "b"};
    OK(db_query_value(db, v, sizeof(v), "SELECT $2 || '-' || $1 || '-' || $2", 2, ab));
    ck_assert_str_eq(v, "b-a-b");
    const char *n[] = {"41"};
    OK(db_query_value(db, v, sizeof(v), "SELECT $1 + 1", 1, n));   /* text converted */
    ck_assert_str_eq(v, "42");
    /* ten parameters: $10 is not $1 followed by 0 */
    const char *ten[] = {"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"};
    OK(db_query_value(db, v, sizeof(v),
                      "SELECT $10 || $9 || $8 || $7 || $6 || $5 || $4 || $3 || $2 || $1", 10,
                      ten));
    ck_assert_str_eq(v, "10987654321");
    /* the same statements again, now from the cache: $2 before $1 is still bound by name */
    OK(db_query_value(db, v, sizeof(v), "SELECT $2 || '-' || $1 || '-' || $2", 2, ab));
    ck_assert_str_eq(v, "b-a-b");
    OK(db_query_value(db, v, sizeof(v), "SELECT $1 + 1", 1, n));
    ck_assert_str_eq(v, "42");
    /* a parameter is never SQL: quotes and semicolons come back as they went */
    const char *evil[] = {"x'); DROP TABLE t; --"};
    OK(db_query_value(db, v, sizeof(v), "SELECT $1", 1, evil));
    ck_assert_str_eq(v, evil[0]);
}
END_TEST

START_TEST(test_param_count_and_form)
{
    const char *one[] = {"1"}, *three[] = {"1", "2", "3"}, *two[] = {"1", "2"};
    tn_rows *r = (tn_rows *)&r;   /* must come back NULL */
    EXPECT(db, TN_INVALID, tn_db_query(db, &r, "SELECT $1, $2", 1, one));
    ck_assert_ptr_null(r);
    ck_assert_str_ne(tn_db_error(db), "");
    EXPECT(db, TN_INVALID, tn_db_exec(db, "SELECT $1, $2", 3, three));   /* $3 unused */
    /* checked again after the statement was cached and bound by position */
    OK(tn_db_exec(db, "SELECT $1, $2", 2, two));
    EXPECT(db, TN_INVALID, tn_db_exec(db, "SELECT $1, $2", 1, one));
    EXPECT(db, TN_INVALID, tn_db_exec(db, "SELECT $1, $2", 3, three));
    OK(tn_db_exec(db, "SELECT $1, $2", 2, two));
    EXPECT(db, TN_INVALID, tn_db_exec(db, "SELECT $2", 2, two));         /* $1 unused */
    EXPECT(db, TN_INVALID, tn_db_exec(db, "SELECT $1", 0, NULL));
    EXPECT(db, TN_INVALID, tn_db_exec(db, "SELECT ?", 1, one));
    EXPECT(db, TN_INVALID, tn_db_exec(db, "SELECT :a", 1, one));
    EXPECT(db, TN_INVALID, tn_db_exec(db, "SELECT $1", 1, NULL));
    EXPECT(db, TN_INVALID, tn_db_exec(db, "SELECT 1", -1, NULL));
    EXPECT(db, TN_INVALID, tn_db_exec(db, NULL, 0, NULL));
    EXPECT(db, TN_INVALID, tn_db_exec(db, "", 0, NULL));
    EXPECT(db, TN_INVALID, tn_db_exec(db, "  -- nothing\n", 0, NULL));
    EXPECT(db, TN_INVALID, tn_db_exec(db, "SELEKT 1", 0, NULL));
    /* two statements in one string: refused, not half-run */
    make_table();
    EXPECT(db, TN_INVALID,
           tn_db_exec(db, "INSERT INTO t (id) VALUES (1); INSERT INTO t (id) VALUES (2)", 0,
                      NULL));
    ck_assert_int_eq(count(db, "SELECT count(*) FROM t"), 0);
    OK(tn_db_exec(db, "INSERT INTO t (id) VALUES (1); -- one statement and a comment", 0,
                  NULL));
    EXPECT(db, TN_INVALID, tn_db_exec(NULL, "SELECT 1", 0, NULL));
    /* the connection is fine after all that */
    ck_assert_int_eq(count(db, "SELECT count(*) FROM t"), 1);
    ck_assert(db_is_clean(db));
}
END_TEST

START_TEST(test_unique_is_exists)
{
    make_table();
    insert("1", "alice", NULL);
    const char *dup_name[] = {"2", "alice", NULL}, *dup_id[] = {"1", "zed", NULL};
    const char *sql = "INSERT INTO t (id, name, note) VALUES ($1, $2, $3)";
    EXPECT(db, TN_EXISTS, tn_db_exec(db, sql, 3, dup_name));
    ck_assert_msg(strcasestr(tn_db_error(db), "unique") != NULL, "%s", tn_db_error(db));
    EXPECT(db, TN_EXISTS, tn_db_exec(db, sql, 3, dup_id));
    tn_rows *r;
    EXPECT(db, TN_EXISTS, tn_db_query(db, &r, "INSERT INTO t (id, name) VALUES (5, 'alice') "
                                              "RETURNING id", 0, NULL));
    /* other constraints are plain invalid input */
    OK(tn_db_exec(db, "CREATE TABLE nn (a TEXT NOT NULL, b INTEGER CHECK (b > 0))", 0, NULL));
    EXPECT(db, TN_INVALID, tn_db_exec(db, "INSERT INTO nn (a, b) VALUES (NULL, 1)", 0, NULL));
    EXPECT(db, TN_INVALID, tn_db_exec(db, "INSERT INTO nn (a, b) VALUES ('x', 0)", 0, NULL));
    ck_assert_int_eq(count(db, "SELECT count(*) FROM t"), 1);
}
END_TEST

START_TEST(test_transactions)
{
    make_table();
    EXPECT(db, TN_INVALID, tn_db_commit(db));
    EXPECT(db, TN_INVALID, tn_db_rollback(db));
    ck_assert(db_is_clean(db));

    OK(tn_db_begin(db));
    ck_assert(!db_is_clean(db));
    insert("1", "a", NULL);
    EXPECT(db, TN_INVALID, tn_db_begin(db));   /* no nesting */
    ck_assert(!db_is_clean(db));               /* ... and the open one is untouched */
    insert("2", "b", NULL);
    OK(tn_db_rollback(db));
    ck_assert(db_is_clean(db));
    ck_assert_int_eq(count(db, "SELECT count(*) FROM t"), 0);
    EXPECT(db, TN_INVALID, tn_db_rollback(db));

    OK(tn_db_begin(db));
    insert("3", "c", NULL);
    /* another connection does not see it before the commit */
    tn_db *other = open_db(uri, NULL);
    ck_assert_int_eq(count(other, "SELECT count(*) FROM t"), 0);
    OK(tn_db_commit(db));
    ck_assert_int_eq(count(other, "SELECT count(*) FROM t"), 1);
    db_close(other);
    EXPECT(db, TN_INVALID, tn_db_commit(db));

    /* a script inside a transaction rolls back with it */
    OK(tn_db_begin(db));
    OK(db_exec_script(db, "INSERT INTO t (id) VALUES (10); INSERT INTO t (id) VALUES (11);"));
    OK(tn_db_rollback(db));
    ck_assert_int_eq(count(db, "SELECT count(*) FROM t"), 1);
}
END_TEST

/* The backends differ here, and the test pins it down: in PostgreSQL an error aborts the
 * whole transaction (commit then rolls back and says so); in SQLite only the failing
 * statement is undone. Portable code rolls back on any error. */
START_TEST(test_error_inside_transaction)
{
    make_table();
    OK(tn_db_begin(db));
    insert("1", "a", NULL);
    const char *dup[] = {"1", "b", NULL};
    EXPECT(db, TN_EXISTS, tn_db_exec(db, "INSERT INTO t (id, name, note) VALUES ($1, $2, $3)",
                                     3, dup));
    ck_assert(!db_is_clean(db));
    if (backend_pg) {
        EXPECT(db, TN_INVALID, tn_db_exec(db, "SELECT 1", 0, NULL));   /* aborted */
        EXPECT(db, TN_ERR, tn_db_commit(db));
        ck_assert_int_eq(count(db, "SELECT count(*) FROM t"), 0);
    } else {
        OK(tn_db_commit(db));
        ck_assert_int_eq(count(db, "SELECT count(*) FROM t"), 1);
    }
    ck_assert(db_is_clean(db));
    OK(tn_db_begin(db));   /* the flag was cleared either way */
    OK(tn_db_rollback(db));
}
END_TEST

/* db_exec_batch: in order, the first failure's index and error, the last statement's rows,
 * the COMMIT when asked, and nothing of a failed batch kept after the rollback. */
START_TEST(test_batch)
{
    make_table();
    const char *p3[] = {"3", "c"};
    db_stmt ok[] = {{"INSERT INTO t (id, name) VALUES (1, 'a')", 0, NULL},
                    {"INSERT INTO t (id, name) VALUES ($1, $2)", 2, p3},
                    {"SELECT name FROM t ORDER BY id", 0, NULL}};
    int failed = -1;
    tn_rows *rows = NULL;
    EXPECT(db, TN_INVALID, db_exec_batch(db, ok, 3, 0, NULL, &failed));   /* no transaction */
    OK(tn_db_begin(db));
    EXPECT(db, TN_INVALID, db_exec_batch(db, ok, 3, DB_BATCH_COMMIT, &rows, &failed));
    OK(db_exec_batch(db, ok, 3, 0, &rows, &failed));
    ck_assert_int_eq(failed, 3);
    ck_assert(!db_is_clean(db));
    ck_assert_int_eq(tn_rows_next(rows), TN_OK);
    ck_assert_str_eq(tn_rows_get(rows, 0), "a");
    ck_assert_int_eq(tn_rows_next(rows), TN_OK);
    ck_assert_str_eq(tn_rows_get(rows, 0), "c");
    ck_assert_int_eq(tn_rows_next(rows), TN_DONE);
    tn_rows_free(rows);
    OK(tn_db_commit(db));
    ck_assert_int_eq(count(db, "SELECT count(*) FROM t"), 2);

    /* the second of three fails (a duplicate name): its index, its error, the third not run */
    db_stmt bad[] = {{"INSERT INTO t (id, name) VALUES (4, 'd')", 0, NULL},
                     {"INSERT INTO t (id, name) VALUES (5, 'a')", 0, NULL},
                     {"INSERT INTO t (id, name) VALUES (6, 'f')", 0, NULL}};
    OK(tn_db_begin(db));
    rows = NULL;
    EXPECT(db, TN_EXISTS, db_exec_batch(db, bad, 3, 0, &rows, &failed));
    ck_assert_int_eq(failed, 1);
    ck_assert_ptr_null(rows);
    ck_assert(!db_is_clean(db));   /* still open: the caller rolls back */
    OK(tn_db_rollback(db));
    ck_assert(db_is_clean(db));
    ck_assert_int_eq(count(db, "SELECT count(*) FROM t"), 2);
    ck_assert_int_eq(count(db, "SELECT count(*) FROM t WHERE id IN (4, 6)"), 0);

    /* with the COMMIT: committed, the connection clean */
    OK(tn_db_begin(db));
    OK(db_exec_batch(db, bad, 1, DB_BATCH_COMMIT, NULL, &failed));
    ck_assert_int_eq(failed, 1);
    ck_assert(db_is_clean(db));
    ck_assert_int_eq(count(db, "SELECT count(*) FROM t"), 3);
}
END_TEST

START_TEST(test_changes_and_last_id)
{
    make_table();
    ck_assert_int_eq(tn_db_changes(db), 0);
    OK(tn_db_exec(db, "INSERT INTO t (id, name) VALUES (1, 'a'), (2, 'b'), (3, 'c')", 0, NULL));
    ck_assert_int_eq(tn_db_changes(db), 3);
    OK(tn_db_exec(db, "UPDATE t SET note = 'n' WHERE id >= 2", 0, NULL));
    ck_assert_int_eq(tn_db_changes(db), 2);
    OK(tn_db_exec(db, "SELECT * FROM t", 0, NULL));
    ck_assert_int_eq(tn_db_changes(db), 0);
    OK(tn_db_exec(db, "DELETE FROM t WHERE id = 99", 0, NULL));
    ck_assert_int_eq(tn_db_changes(db), 0);
    OK(tn_db_exec(db, "DELETE FROM t WHERE id = 3", 0, NULL));
    ck_assert_int_eq(tn_db_changes(db), 1);
    OK(tn_db_exec(db, "CREATE TABLE u (x INTEGER)", 0, NULL));
    ck_assert_int_eq(tn_db_changes(db), 0);

    /* RETURNING is the portable way to learn an id */
    tn_rows *r;
    OK(tn_db_query(db, &r, "INSERT INTO t (id, name) VALUES (7, 'g') RETURNING id, name", 0,
                   NULL));
    EXPECT(db, TN_OK, tn_rows_next(r));
    ck_assert_str_eq(tn_rows_getn(r, "id"), "7");
    EXPECT(db, TN_DONE, tn_rows_next(r));
    ck_assert_int_eq(tn_db_changes(db), 1);
    tn_rows_free(r);

    if (backend_pg) {
        ck_assert_int_eq(tn_db_last_id(db), -1);   /* documented */
    } else {
        OK(tn_db_exec(db, "INSERT INTO t (name) VALUES ('auto')", 0, NULL));
        ck_assert_int_eq(tn_db_last_id(db), 8);
    }
    ck_assert_int_eq(tn_db_last_id(NULL), -1);
    ck_assert_int_eq(tn_db_changes(NULL), 0);
}
END_TEST

START_TEST(test_column_by_name)
{
    tn_rows *r;
    OK(tn_db_query(db, &r, "SELECT 1 AS one, 'x' AS Two, NULL AS three, 4 AS \"A\", 5 AS a", 0,
                   NULL));
    EXPECT(db, TN_OK, tn_rows_next(r));
    ck_assert_str_eq(tn_rows_getn(r, "one"), "1");
    ck_assert_str_eq(tn_rows_getn(r, "two"), "x");   /* PostgreSQL folds, SQLite keeps */
    ck_assert_str_eq(tn_rows_getn(r, "TWO"), "x");
    ck_assert_ptr_null(tn_rows_getn(r, "three"));
    ck_assert_ptr_null(tn_rows_getn(r, "nope"));
    ck_assert_ptr_null(tn_rows_getn(r, NULL));
    ck_assert_str_eq(tn_rows_getn(r, "A"), "4");     /* an exact match wins */
    ck_assert_str_eq(tn_rows_getn(r, "a"), "5");
    ck_assert_ptr_null(tn_rows_getn(NULL, "one"));
    tn_rows_free(r);
}
END_TEST

static const char common_script[] =
    "-- a leading comment; with a semicolon\n"
    "CREATE TABLE s (id INTEGER PRIMARY KEY, v TEXT);\n"
    "/* a block; comment */ INSERT INTO s VALUES (1, 'semi;colon');\n"
    "INSERT INTO s VALUES (2, 'it''s; quoted');   -- a trailing; comment\n"
    "INSERT INTO s VALUES (3, '-- not a comment');\n"
    "INSERT INTO s VALUES (4, '/* nor; this */');\n"
    "CREATE TABLE \"odd;name\" (\"a;b\" INTEGER);\n"
    "INSERT INTO \"odd;name\" VALUES (5);\n"
    ";;\n"
    "INSERT INTO s VALUES (6, 'multi\n"
    "line;\n"
    "string');\n"
    "INSERT INTO s VALUES (7, 'no semicolon at the end')\n";

static const char pg_script[] =
    "INSERT INTO s VALUES (20, $$dollar; quoted 'x'$$);\n"
    "INSERT INTO s VALUES (21, $tag$ has $$ and ; inside $tag$);\n"
    "INSERT INTO s VALUES (22, E'back\\'slash; quote');\n"
    "/* nested /* comment; */ still; a comment */\n"
    "CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $body$\n"
    "BEGIN RETURN 1; END;\n"
    "$body$;\n"
    "CREATE FUNCTION g() RETURNS int LANGUAGE sql\n"
    "BEGIN ATOMIC SELECT 1; SELECT CASE WHEN true THEN 2 END; END;\n"
    "CREATE TABLE log (msg TEXT);\n"
    "CREATE RULE r AS ON INSERT TO s WHERE new.id = 99 DO ALSO\n"
    "  (INSERT INTO log VALUES ('one;'); INSERT INTO log VALUES ('two'));\n"
    "INSERT INTO s VALUES (99, 'ruled');\n";

static const char sqlite_script[] =
    "CREATE TABLE log (msg TEXT);\n"
    "CREATE TRIGGER trg AFTER INSERT ON s WHEN new.id = 99 BEGIN\n"
    "  INSERT INTO log VALUES ('one;');\n"
    "  INSERT INTO log VALUES (CASE WHEN new.id > 0 THEN 'two' END);\n"
    "END;\n"
    "INSERT INTO [s] VALUES (20, 'bracket;ed');\n"
    "INSERT INTO `s` VALUES (21, 'backtick;ed');\n"
    "INSERT INTO s VALUES (99, 'triggered');\n";

START_TEST(test_exec_script)
{
    OK(db_exec_script(db, common_script));
    ck_assert_int_eq(count(db, "SELECT count(*) FROM s"), 6);   /* 1-4, 6, 7 */
    char v[64];
    const char *id[] = {"2"};
    OK(db_query_value(db, v, sizeof(v), "SELECT v FROM s WHERE id = $1", 1, id));
    ck_assert_str_eq(v, "it's; quoted");
    id[0] = "6";
    OK(db_query_value(db, v, sizeof(v), "SELECT v FROM s WHERE id = $1", 1, id));
    ck_assert_str_eq(v, "multi\nline;\nstring");
    ck_assert_int_eq(count(db, "SELECT \"a;b\" FROM \"odd;name\""), 5);

    OK(db_exec_script(db, backend_pg ? pg_script : sqlite_script));
    ck_assert_int_eq(count(db, "SELECT count(*) FROM log"), 2);
    ck_assert_int_eq(count(db, "SELECT count(*) FROM log WHERE msg = 'one;'"), 1);
    if (backend_pg) {
        ck_assert_int_eq(count(db, "SELECT f() + g()"), 3);
        id[0] = "22";
        OK(db_query_value(db, v, sizeof(v), "SELECT v FROM s WHERE id = $1", 1, id));
        ck_assert_str_eq(v, "back'slash; quote");
        id[0] = "21";
        OK(db_query_value(db, v, sizeof(v), "SELECT v FROM s WHERE id = $1", 1, id));
        ck_assert_str_eq(v, " has $$ and ; inside ");
    } else {
        id[0] = "21";
        OK(db_query_value(db, v, sizeof(v), "SELECT v FROM s WHERE id = $1", 1, id));
        ck_assert_str_eq(v, "backtick;ed");
    }

    /* an unterminated quote: refused before anything runs */
    EXPECT(db, TN_INVALID,
           db_exec_script(db, "INSERT INTO s VALUES (100, 'x');\nSELECT 'open;\n"));
    ck_assert_msg(strstr(tn_db_error(db), "line 2") != NULL, "%s", tn_db_error(db));
    ck_assert_int_eq(count(db, "SELECT count(*) FROM s WHERE id = 100"), 0);
    EXPECT(db, TN_INVALID, db_exec_script(db, "SELECT 1; /* open"));

    /* a failing statement stops the script and is named with its line */
    EXPECT(db, TN_INVALID, db_exec_script(db, "INSERT INTO s VALUES (101, 'a');\n\n"
                                              "INSERT INTO nope VALUES (1);\n"
                                              "INSERT INTO s VALUES (102, 'b');"));
    ck_assert_msg(strstr(tn_db_error(db), "statement 2 (line 3)") != NULL, "%s",
                  tn_db_error(db));
    ck_assert_int_eq(count(db, "SELECT count(*) FROM s WHERE id = 101"), 1);
    ck_assert_int_eq(count(db, "SELECT count(*) FROM s WHERE id = 102"), 0);

    OK(db_exec_script(db, ""));
    OK(db_exec_script(db, " ;; -- nothing\n"));
    EXPECT(db, TN_INVALID, db_exec_script(db, NULL));
}
END_TEST

START_TEST(test_quote_ident)
{
    char q[80];
    OK(db_quote_ident("tenant_01", q, sizeof(q)));
    ck_assert_str_eq(q, "\"tenant_01\"");
    OK(db_quote_ident("_x", q, sizeof(q)));
    char name63[64], name64[65];
    memset(name63, 'a', 63);
    name63[63] = '\0';
    memset(name64, 'b', 64);
    name64[64] = '\0';
    OK(db_quote_ident(name63, q, sizeof(q)));
    ck_assert_int_eq(strlen(q), 65);
    strcpy(q, "untouched");
    const char *bad[] = {"a\"b", "1abc", "", "a-b", "a b", "a;b", "é", "a.b", "tab\t", name64};
    for (size_t i = 0; i < TN_ARRAY_LEN(bad); i++) {
        ck_assert_msg(db_quote_ident(bad[i], q, sizeof(q)) == TN_INVALID, "accepted '%s'",
                      bad[i]);
        ck_assert_str_eq(q, "untouched");
    }
    ck_assert_int_eq(db_quote_ident(NULL, q, sizeof(q)), TN_INVALID);
    ck_assert_int_eq(db_quote_ident("abc", q, 5), TN_INVALID);   /* needs 6 */
    ck_assert_str_eq(q, "untouched");
    ck_assert_int_eq(db_quote_ident("abc", q, 6), TN_OK);

    /* the quoted name works in real SQL, case kept, next to a same-named lower-case one */
    char sql[256];
    OK(db_quote_ident("Tenant_A", q, sizeof(q)));
    snprintf(sql, sizeof(sql), "CREATE TABLE %s (x INTEGER)", q);
    OK(tn_db_exec(db, sql, 0, NULL));
    snprintf(sql, sizeof(sql), "INSERT INTO %s (x) VALUES (1)", q);
    OK(tn_db_exec(db, sql, 0, NULL));
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", q);
    ck_assert_int_eq(count(db, sql), 1);
}
END_TEST

START_TEST(test_query_value)
{
    char v[8];
    make_table();
    insert("1", "alice", NULL);
    insert("2", "a-much-longer-name", NULL);
    OK(db_query_value(db, v, sizeof(v), "SELECT name FROM t WHERE id = 1", 0, NULL));
    ck_assert_str_eq(v, "alice");
    EXPECT(db, TN_NOTFOUND, db_query_value(db, v, sizeof(v), "SELECT name FROM t WHERE id = 9",
                                           0, NULL));
    ck_assert_str_eq(v, "");
    EXPECT(db, TN_NOTFOUND, db_query_value(db, v, sizeof(v), "SELECT note FROM t WHERE id = 1",
                                           0, NULL));
    EXPECT(db, TN_TOOBIG, db_query_value(db, v, sizeof(v), "SELECT name FROM t WHERE id = 2",
                                         0, NULL));
    ck_assert_str_eq(v, "");
    EXPECT(db, TN_INVALID, db_query_value(db, v, 0, "SELECT 1", 0, NULL));
    EXPECT(db, TN_INVALID, db_query_value(db, v, sizeof(v), "SELECT nope FROM t", 0, NULL));
    ck_assert(db_is_clean(db));
}
END_TEST

START_TEST(test_clean_and_reset)
{
    make_table();
    ck_assert(db_is_clean(db));
    OK(db_reset(db));   /* nothing to do */
    OK(tn_db_begin(db));
    insert("1", "a", NULL);
    ck_assert(!db_is_clean(db));
    OK(db_reset(db));
    ck_assert(db_is_clean(db));
    ck_assert_int_eq(count(db, "SELECT count(*) FROM t"), 0);
    EXPECT(db, TN_INVALID, tn_db_commit(db));   /* the flag went with it */
    OK(tn_db_begin(db));
    OK(tn_db_commit(db));
    ck_assert(!db_is_clean(NULL));
    ck_assert_int_eq(db_reset(NULL), TN_INVALID);
}
END_TEST

/* Two row sets of the same statement at once (the cache must not hand out the one being
 * read), and more distinct statements than the cache holds. */
START_TEST(test_same_statement_twice_and_many)
{
    make_table();
    insert("1", "a", NULL);
    insert("2", "b", NULL);
    const char *sql = "SELECT name FROM t ORDER BY id";
    tn_rows *r1, *r2;
    OK(tn_db_query(db, &r1, sql, 0, NULL));
    EXPECT(db, TN_OK, tn_rows_next(r1));
    OK(tn_db_query(db, &r2, sql, 0, NULL));
    EXPECT(db, TN_OK, tn_rows_next(r2));
    EXPECT(db, TN_OK, tn_rows_next(r2));
    ck_assert_str_eq(tn_rows_get(r1, 0), "a");
    ck_assert_str_eq(tn_rows_get(r2, 0), "b");
    EXPECT(db, TN_OK, tn_rows_next(r1));
    ck_assert_str_eq(tn_rows_get(r1, 0), "b");
    tn_rows_free(r2);
    tn_rows_free(r1);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 40; i++) {
            char q[64], v[32], want[32];
            snprintf(q, sizeof(q), "SELECT %d + count(*) FROM t", i);   /* constant SQL */
            snprintf(want, sizeof(want), "%d", i + 2);
            OK(db_query_value(db, v, sizeof(v), q, 0, NULL));
            ck_assert_str_eq(v, want);
        }
    }
    /* an unfinished row set, then the statement again from the cache */
    OK(tn_db_query(db, &r1, sql, 0, NULL));
    EXPECT(db, TN_OK, tn_rows_next(r1));
    tn_rows_free(r1);
    OK(tn_db_query(db, &r1, sql, 0, NULL));
    EXPECT(db, TN_OK, tn_rows_next(r1));
    ck_assert_str_eq(tn_rows_get(r1, 0), "a");
    tn_rows_free(r1);
}
END_TEST

/* A row set may outlive its connection: closing or resetting must not leave it dangling. */
START_TEST(test_rows_outlive_connection)
{
    make_table();
    insert("1", "a", NULL);
    insert("2", "b", NULL);
    tn_db *other = open_db(uri, NULL);
    tn_rows *r;
    EXPECT(other, TN_OK, tn_db_query(other, &r, "SELECT name FROM t ORDER BY id", 0, NULL));
    EXPECT(other, TN_OK, tn_rows_next(r));
    /* SQLite: an unfinished SELECT holds a read snapshot, so the connection is not clean */
    ck_assert(db_is_clean(other) == backend_pg);
    OK(db_reset(other));
    ck_assert(db_is_clean(other));
    int rc = tn_rows_next(r);
    if (backend_pg) {
        ck_assert_int_eq(rc, TN_OK);   /* the result is all in memory */
        ck_assert_str_eq(tn_rows_get(r, 0), "b");
    } else {
        ck_assert_int_eq(rc, TN_INVALID);   /* detached */
        ck_assert_ptr_null(tn_rows_get(r, 0));
    }
    tn_rows *r2;
    EXPECT(other, TN_OK, tn_db_query(other, &r2, "SELECT name FROM t ORDER BY id", 0, NULL));
    db_close(other);
    tn_rows_next(r2);
    tn_rows_free(r2);
    tn_rows_free(r);
}
END_TEST

START_TEST(test_open_errors)
{
    tn_db *d = (tn_db *)&d;
    char err[256];
    ck_assert_int_eq(db_open("mysql://x", NULL, &d, err, sizeof(err)), TN_INVALID);
    ck_assert_ptr_null(d);
    /* preloading a driver: nothing to load for SQLite, an unknown URI refused */
    ck_assert_int_eq(db_preload("sqlite:/nonexistent-dir/x.db", err, sizeof(err)), TN_OK);
    ck_assert_int_eq(db_preload("mysql://x", err, sizeof(err)), TN_INVALID);
    ck_assert_str_ne(err, "");
    ck_assert_str_ne(err, "");
    ck_assert_int_eq(db_open(NULL, NULL, &d, err, sizeof(err)), TN_INVALID);
    ck_assert_int_eq(db_open("sqlite:", NULL, &d, err, sizeof(err)), TN_INVALID);
    ck_assert_int_eq(db_open("sqlite:/x.db?mode=zz", NULL, &d, err, sizeof(err)), TN_INVALID);
    ck_assert_int_eq(db_open("sqlite:/nonexistent-dir/x.db", NULL, &d, err, sizeof(err)), TN_IO);
    ck_assert_msg(strstr(err, "/nonexistent-dir/x.db") != NULL, "%s", err);
    ck_assert_int_eq(db_open("postgres:bogus", NULL, &d, err, sizeof(err)), TN_INVALID);
    ck_assert_int_eq(db_open("postgres:host=/nonexistent-dir port=1 password=secret", NULL, &d,
                             err, sizeof(err)),
                     TN_IO);
    ck_assert_msg(strstr(err, "secret") == NULL, "the password leaked: %s", err);
    ck_assert_ptr_null(d);
    ck_assert_int_eq(db_open("sqlite::memory:", NULL, &d, NULL, 0), TN_OK);
    db_close(d);
    db_close(NULL);
    ck_assert_int_eq(db_open("sqlite::memory:", NULL, NULL, err, sizeof(err)), TN_INVALID);

    ck_assert_str_eq(db_uri_backend("sqlite:/a.db"), "sqlite");
    ck_assert_str_eq(db_uri_backend("postgres:host=/run/postgresql dbname=x"), "postgres");
    ck_assert_str_eq(db_uri_backend("postgresql://u@h/db"), "postgres");
    ck_assert_str_eq(db_uri_backend("postgres://u@h/db"), "postgres");
    ck_assert_ptr_null(db_uri_backend("mysql://u@h/db"));
    ck_assert_ptr_null(db_uri_backend("SQLITE:/a.db"));
    ck_assert_ptr_null(db_uri_backend(NULL));
    ck_assert_str_eq(tn_db_error(NULL), "no database handle");
    ck_assert_ptr_null(tn_db_backend(NULL));
    ck_assert_int_eq(tn_db_begin(NULL), TN_INVALID);
    ck_assert_int_eq(tn_rows_next(NULL), TN_INVALID);
}
END_TEST

/* ---- a VFS that counts the syncs of WAL files -------------------------------------------------
 * Registered as the default VFS by test_sqlite_deferred_sync, over the one that was default:
 * every call goes through unchanged, and an xSync on a file opened as a WAL is counted, so the
 * test sees whether a commit waited for the disk. */

static sqlite3_vfs *real_vfs;
static sqlite3_vfs counting_vfs;
static int wal_syncs;

typedef struct counted_file {
    sqlite3_file base;     /* first: SQLite sees this */
    bool wal;
    sqlite3_file *real;    /* real_vfs->szOsFile bytes, right after this struct */
} counted_file;

#define REAL(f) (((counted_file *)(f))->real)
static int cf_close(sqlite3_file *f) { return REAL(f)->pMethods->xClose(REAL(f)); }
static int cf_read(sqlite3_file *f, void *p, int n, sqlite3_int64 o)
{
    return REAL(f)->pMethods->xRead(REAL(f), p, n, o);
}
static int cf_write(sqlite3_file *f, const void *p, int n, sqlite3_int64 o)
{
    return REAL(f)->pMethods->xWrite(REAL(f), p, n, o);
}
static int cf_truncate(sqlite3_file *f, sqlite3_int64 n)
{
    return REAL(f)->pMethods->xTruncate(REAL(f), n);
}
static int cf_sync(sqlite3_file *f, int flags)
{
    if (((counted_file *)f)->wal)
        wal_syncs++;
    return REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int cf_size(sqlite3_file *f, sqlite3_int64 *n)
{
    return REAL(f)->pMethods->xFileSize(REAL(f), n);
}
static int cf_lock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xLock(REAL(f), l); }
static int cf_unlock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xUnlock(REAL(f), l); }
static int cf_reserved(sqlite3_file *f, int *r)
{
    return REAL(f)->pMethods->xCheckReservedLock(REAL(f), r);
}
static int cf_control(sqlite3_file *f, int op, void *a)
{
    return REAL(f)->pMethods->xFileControl(REAL(f), op, a);
}
static int cf_sector(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int cf_devchar(sqlite3_file *f)
{
    return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int cf_shm_map(sqlite3_file *f, int pg, int sz, int ext, void volatile **pp)
{
    return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, ext, pp);
}
static int cf_shm_lock(sqlite3_file *f, int off, int n, int fl)
{
    return REAL(f)->pMethods->xShmLock(REAL(f), off, n, fl);
}
static void cf_shm_barrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int cf_shm_unmap(sqlite3_file *f, int del)
{
    return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}

static const sqlite3_io_methods counted_methods = {
    .iVersion = 2,
    .xClose = cf_close, .xRead = cf_read, .xWrite = cf_write, .xTruncate = cf_truncate,
    .xSync = cf_sync, .xFileSize = cf_size, .xLock = cf_lock, .xUnlock = cf_unlock,
    .xCheckReservedLock = cf_reserved, .xFileControl = cf_control, .xSectorSize = cf_sector,
    .xDeviceCharacteristics = cf_devchar, .xShmMap = cf_shm_map, .xShmLock = cf_shm_lock,
    .xShmBarrier = cf_shm_barrier, .xShmUnmap = cf_shm_unmap,
};

static int cv_open(sqlite3_vfs *v, const char *name, sqlite3_file *f, int flags, int *out)
{
    (void)v;
    counted_file *c = (counted_file *)f;
    c->real = (sqlite3_file *)(c + 1);
    c->wal = (flags & SQLITE_OPEN_WAL) != 0;
    c->base.pMethods = NULL;
    int rc = real_vfs->xOpen(real_vfs, name, c->real, flags, out);
    if (rc == SQLITE_OK && c->real->pMethods != NULL)
        c->base.pMethods = &counted_methods;
    return rc;
}

static void counting_vfs_install(void)
{
    if (real_vfs != NULL)
        return;
    real_vfs = sqlite3_vfs_find(NULL);
    ck_assert_ptr_nonnull(real_vfs);
    counting_vfs = *real_vfs;
    counting_vfs.iVersion = real_vfs->iVersion < 3 ? real_vfs->iVersion : 3;
    counting_vfs.zName = "tn-counting";
    counting_vfs.szOsFile = (int)sizeof(counted_file) + real_vfs->szOsFile;
    counting_vfs.xOpen = cv_open;
    counting_vfs.pAppData = NULL;
    ck_assert_int_eq(sqlite3_vfs_register(&counting_vfs, 1), SQLITE_OK);
}

/* ---- SQLite only ----------------------------------------------------------------------------- */

static const char *sqlite_path(void)
{
    return uri + strlen("sqlite:");
}

START_TEST(test_sqlite_pragmas)
{
    char v[16];
    OK(db_query_value(db, v, sizeof(v), "PRAGMA journal_mode", 0, NULL));
    ck_assert_str_eq(v, "wal");
    OK(db_query_value(db, v, sizeof(v), "PRAGMA synchronous", 0, NULL));
    ck_assert_str_eq(v, "2");   /* FULL */
    OK(db_query_value(db, v, sizeof(v), "PRAGMA foreign_keys", 0, NULL));
    ck_assert_str_eq(v, "1");
    db_options o = {.sync_normal = true, .busy_timeout_ms = 250};
    tn_db *d = open_db(uri, &o);
    EXPECT(d, TN_OK, db_query_value(d, v, sizeof(v), "PRAGMA synchronous", 0, NULL));
    ck_assert_str_eq(v, "1");   /* NORMAL */
    /* the busy timeout (our own handler: PRAGMA busy_timeout reads 0): with the write lock
     * held elsewhere, a writer waits its 250 ms, then gets TN_BUSY */
    OK(tn_db_begin(db));
    OK(tn_db_exec(db, "CREATE TABLE held (x INTEGER)", 0, NULL));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    EXPECT(d, TN_BUSY, tn_db_exec(d, "CREATE TABLE waits (x INTEGER)", 0, NULL));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    ck_assert_msg(waited >= 0.24 && waited < 4.0, "waited %.3f s for a 250 ms busy timeout",
                  waited);
    OK(tn_db_rollback(db));
    OK(tn_db_exec(d, "CREATE TABLE waits (x INTEGER)", 0, NULL));   /* free again */
    db_close(d);
    /* foreign keys are enforced */
    OK(db_exec_script(db, "CREATE TABLE p (id INTEGER PRIMARY KEY);"
                          "CREATE TABLE c (p INTEGER REFERENCES p(id));"));
    EXPECT(db, TN_INVALID, tn_db_exec(db, "INSERT INTO c VALUES (1)", 0, NULL));
    /* "x" is an identifier, never a string (double-quoted strings are off) */
    EXPECT(db, TN_INVALID, tn_db_exec(db, "SELECT \"no such column\"", 0, NULL));
}
END_TEST

/* tn_db_data_version, what apps/data validates its cached catalog with instead of a
 * statement: read after a statement, it moves when another connection changed the schema
 * (or the data) and stays when nothing changed; this connection's own commits move it; two
 * connections, or the same file opened again, never give the same number. A catalog cached
 * at one number and kept while the number stands still would be served stale after another
 * connection's DDL if any of this failed. */
static uint64_t dv_after_read(tn_db *d)
{
    char v[32];
    uint64_t n = 0;
    EXPECT(d, TN_OK, db_query_value(d, v, sizeof(v), "SELECT count(*) FROM sqlite_schema", 0,
                                    NULL));
    EXPECT(d, TN_OK, tn_db_data_version(d, &n));
    return n;
}

START_TEST(test_sqlite_data_version)
{
    OK(tn_db_exec(db, "CREATE TABLE items (id INTEGER PRIMARY KEY, n INTEGER)", 0, NULL));
    uint64_t a = dv_after_read(db);
    ck_assert_uint_eq(dv_after_read(db), a);   /* nothing changed */
    tn_db *other = open_db(uri, NULL);
    uint64_t o = dv_after_read(other);
    ck_assert_uint_ne(o, a);                    /* another connection's own number */
    /* DDL by the other connection: seen after this connection's next statement */
    EXPECT(other, TN_OK, tn_db_exec(other, "ALTER TABLE items ADD COLUMN extra TEXT", 0, NULL));
    uint64_t b = dv_after_read(db);
    ck_assert_uint_ne(b, a);
    ck_assert_uint_eq(dv_after_read(db), b);
    /* data by the other connection, and this connection's own commit */
    EXPECT(other, TN_OK, tn_db_exec(other, "INSERT INTO items (n) VALUES (1)", 0, NULL));
    uint64_t c = dv_after_read(db);
    ck_assert_uint_ne(c, b);
    OK(tn_db_exec(db, "INSERT INTO items (n) VALUES (2)", 0, NULL));
    uint64_t e = 0;
    OK(tn_db_data_version(db, &e));
    ck_assert_uint_ne(e, c);
    db_close(other);
    /* the file opened again: a number of its own, not the first handle's */
    tn_db *again = open_db(uri, NULL);
    ck_assert_uint_ne(dv_after_read(again), dv_after_read(db));
    db_close(again);
    EXPECT(NULL, TN_INVALID, tn_db_data_version(NULL, &e));
}
END_TEST

/* Deferred commits (db_defer_sync/db_flush, the bulk create's registry): a commit waits for
 * the disk (one WAL sync) as opened, not once deferred, and db_flush syncs the WAL, also for
 * commits another connection deferred; undeferring brings the opened mode back. */
START_TEST(test_sqlite_deferred_sync)
{
    counting_vfs_install();
    db_close(db);
    db = open_db(uri, NULL);   /* opened through the counting VFS */
    char v[16];
    OK(tn_db_exec(db, "CREATE TABLE d (x INTEGER)", 0, NULL));
    int before = wal_syncs;
    OK(tn_db_exec(db, "INSERT INTO d VALUES (1)", 0, NULL));
    ck_assert_int_eq(wal_syncs, before + 1);   /* synchronous=FULL: the commit waited */

    OK(db_defer_sync(db, true));
    OK(db_query_value(db, v, sizeof(v), "PRAGMA synchronous", 0, NULL));
    ck_assert_str_eq(v, "1");
    before = wal_syncs;
    OK(tn_db_begin(db));
    OK(tn_db_exec(db, "INSERT INTO d VALUES (2)", 0, NULL));
    EXPECT(db, TN_BUSY, db_flush(db));          /* not inside a transaction */
    EXPECT(db, TN_BUSY, db_defer_sync(db, false));
    OK(tn_db_commit(db));
    OK(tn_db_exec(db, "INSERT INTO d VALUES (3)", 0, NULL));
    ck_assert_int_eq(wal_syncs, before);       /* deferred: nothing waited */

    /* another connection, new (its WAL opened by flush's read), makes them durable */
    tn_db *d = open_db(uri, NULL);
    EXPECT(d, TN_OK, db_flush(d));
    ck_assert_int_eq(wal_syncs, before + 1);
    ck_assert_int_eq(count(d, "SELECT count(*) FROM d"), 3);
    db_close(d);
    OK(db_flush(db));
    ck_assert_int_eq(wal_syncs, before + 2);

    OK(db_defer_sync(db, false));              /* as opened again: FULL */
    OK(db_query_value(db, v, sizeof(v), "PRAGMA synchronous", 0, NULL));
    ck_assert_str_eq(v, "2");
    before = wal_syncs;
    OK(tn_db_exec(db, "INSERT INTO d VALUES (4)", 0, NULL));
    ck_assert_int_eq(wal_syncs, before + 1);

    /* opened with sync_normal: undeferring keeps NORMAL */
    db_options o = {.sync_normal = true};
    d = open_db(uri, &o);
    EXPECT(d, TN_OK, db_defer_sync(d, true));
    EXPECT(d, TN_OK, db_defer_sync(d, false));
    EXPECT(d, TN_OK, db_query_value(d, v, sizeof(v), "PRAGMA synchronous", 0, NULL));
    ck_assert_str_eq(v, "1");
    db_close(d);
}
END_TEST

START_TEST(test_sqlite_read_only)
{
    make_table();
    insert("1", "a", NULL);
    db_close(db);
    db = NULL;
    char ro[600];
    snprintf(ro, sizeof(ro), "%s?mode=ro", uri);
    tn_db *d = open_db(ro, NULL);
    ck_assert_int_eq(count(d, "SELECT count(*) FROM t"), 1);
    EXPECT(d, TN_DENIED, tn_db_exec(d, "INSERT INTO t (id) VALUES (2)", 0, NULL));
    EXPECT(d, TN_DENIED, tn_db_exec(d, "CREATE TABLE x (a INTEGER)", 0, NULL));
    db_close(d);
    db_options o = {.read_only = true};
    d = open_db(uri, &o);
    EXPECT(d, TN_DENIED, tn_db_exec(d, "DELETE FROM t", 0, NULL));
    ck_assert_int_eq(count(d, "SELECT count(*) FROM t"), 1);
    db_close(d);

    /* read-only and rw never create a file */
    char missing[600], err[256];
    snprintf(missing, sizeof(missing), "sqlite:%s/missing-%ld.db?mode=ro", tmpdir,
             (long)getpid());
    ck_assert_int_eq(db_open(missing, NULL, &d, err, sizeof(err)), TN_IO);
    snprintf(missing, sizeof(missing), "sqlite:%s/missing-%ld.db?mode=rw", tmpdir,
             (long)getpid());
    ck_assert_int_eq(db_open(missing, NULL, &d, err, sizeof(err)), TN_IO);
    struct stat st;
    *strchr(missing, '?') = '\0';
    ck_assert_int_ne(stat(missing + strlen("sqlite:"), &st), 0);
}
END_TEST

START_TEST(test_sqlite_authorizer)
{
    char sql[700], other[600];
    struct stat st;
    snprintf(other, sizeof(other), "%s.other", sqlite_path());
    /* the path is a value: this test builds it into SQL text only because ATTACH is the
     * very thing being refused */
    snprintf(sql, sizeof(sql), "ATTACH DATABASE '%s' AS o", other);
    EXPECT(db, TN_DENIED, tn_db_exec(db, sql, 0, NULL));
    ck_assert_msg(strstr(tn_db_error(db), "not authorized") != NULL, "%s", tn_db_error(db));
    const char *p[] = {other};
    EXPECT(db, TN_DENIED, tn_db_exec(db, "ATTACH DATABASE $1 AS o", 1, p));
    EXPECT(db, TN_DENIED, tn_db_exec(db, "ATTACH ':memory:' AS m", 0, NULL));
    EXPECT(db, TN_DENIED, tn_db_exec(db, "DETACH DATABASE main", 0, NULL));
    OK(tn_db_exec(db, "ATTACH '' AS scratch", 0, NULL));   /* private and temporary */
    EXPECT(db, TN_DENIED, db_exec_script(db, "SELECT 1; ATTACH DATABASE 'x' AS x;"));
    snprintf(sql, sizeof(sql), "VACUUM INTO '%s'", other);
    ck_assert_int_ne(tn_db_exec(db, sql, 0, NULL), TN_OK);
    ck_assert_int_ne(stat(other, &st), 0);   /* nothing was written there */
    ck_assert_int_ne(tn_db_exec(db, "SELECT load_extension('/nonexistent/x')", 0, NULL), TN_OK);
    /* defensive mode: the schema cannot be edited by hand */
    make_table();
    ck_assert_int_ne(db_exec_script(db, "PRAGMA writable_schema = ON;"
                                        "UPDATE sqlite_master SET sql = 'x' WHERE name = 't';"),
                     TN_OK);
    ck_assert_int_eq(count(db, "SELECT count(*) FROM t"), 0);   /* still intact */
    OK(tn_db_exec(db, "VACUUM", 0, NULL));   /* the ordinary one still works */
}
END_TEST

/* fts3_tokenizer(): the one-argument form hands out the address of a tokenizer module inside
 * the library, the two-argument form replaces that address with any 8 bytes, and every FTS3/4
 * table then calls through it: one query doing both, and the worker jumps where the SQL says.
 * The driver turns the function's switch off (a literal argument then gets NULL, an overwrite
 * an error) and its authorizer refuses the function whatever its arguments, because SQLite
 * honours the switch only for literals: a bound argument still works, and apps bind. */
START_TEST(test_sqlite_fts3_tokenizer)
{
    OK(db_exec_script(db, "CREATE VIRTUAL TABLE docs USING fts4(body);"
                          "INSERT INTO docs (body) VALUES ('hello tokenizer');"));
    char v[64] = "";
    /* Asked first, so that a driver without the fix stops here, at the leak, and never
     * reaches the overwrites below. */
    int rc = db_query_value(db, v, sizeof(v), "SELECT typeof(fts3_tokenizer('simple'))", 0, NULL);
    ck_assert_msg(rc == TN_DENIED, "fts3_tokenizer('simple') = %s, a %s: %s", tn_rc_str(rc), v,
                  tn_db_error(db));
    ck_assert_msg(strstr(tn_db_error(db), "not authorized") != NULL, "%s", tn_db_error(db));
    const char *simple[] = {"simple"};
    EXPECT(db, TN_DENIED,
           db_query_value(db, v, sizeof(v), "SELECT typeof(fts3_tokenizer($1))", 1, simple));
    EXPECT(db, TN_DENIED,
           tn_db_exec(db, "SELECT fts3_tokenizer('simple', fts3_tokenizer('simple'))", 0, NULL));
    const char *bogus[] = {"simple", "AAAAAAAA"};   /* 8 bytes, the size of the pointer */
    EXPECT(db, TN_DENIED, tn_db_exec(db, "SELECT fts3_tokenizer($1, $2)", 2, bogus));
    EXPECT(db, TN_DENIED, tn_db_exec(db, "SELECT upper(fts3_tokenizer('simple')) FROM docs", 0,
                                     NULL));
    /* nor through a view someone wrote into the file */
    OK(tn_db_exec(db, "CREATE VIEW leak AS SELECT fts3_tokenizer('simple') AS p", 0, NULL));
    ck_assert_int_ne(db_query_value(db, v, sizeof(v), "SELECT typeof(p) FROM leak", 0, NULL),
                     TN_OK);
    /* the table still finds its row: its tokenizer is the library's own */
    ck_assert_int_eq(count(db, "SELECT count(*) FROM docs WHERE docs MATCH 'tokenizer'"), 1);

    /* The switch on its own, under the authorizer: off, so with the authorizer taken away a
     * literal argument gets NULL and an overwrite is an error. */
    sqlite3 *h = tn_db_native(db);
    int got = -1;
    ck_assert_int_eq(sqlite3_db_config(h, SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, -1, &got),
                     SQLITE_OK);
    ck_assert_int_eq(got, 0);
    ck_assert_int_eq(sqlite3_set_authorizer(h, NULL, NULL), SQLITE_OK);
    OK(db_query_value(db, v, sizeof(v), "SELECT typeof(fts3_tokenizer('simple'))", 0, NULL));
    ck_assert_str_eq(v, "null");
    ck_assert_int_ne(tn_db_exec(db, "SELECT fts3_tokenizer('simple', x'4141414141414141')", 0,
                                NULL),
                     TN_OK);
    ck_assert_int_eq(count(db, "SELECT count(*) FROM docs WHERE docs MATCH 'hello'"), 1);
}
END_TEST

/* ---- every connection is hardened ---------------------------------------------------------------
 * An automatic extension (SQLite runs it in every sqlite3_open* of this process, whoever
 * calls it) asks to be told when the connection closes; at the close the settings are read
 * back. So the check covers connections the test cannot reach, such as the one
 * migrate_clone opens for VACUUM INTO and closes before it returns. */

static int closes_seen;
static char close_bad[512];   /* the first setting found wrong, "" while none */

static int on_close(unsigned type, void *ctx, void *p, void *x)
{
    static const struct {
        int op, want;
        const char *name;
    } need[] = {
        {SQLITE_DBCONFIG_DEFENSIVE, 1, "DEFENSIVE"},
        {SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, "TRUSTED_SCHEMA"},
        {SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, 0, "ENABLE_FTS3_TOKENIZER"},
        {SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, "ENABLE_LOAD_EXTENSION"},
    };
    (void)ctx, (void)x;
    if (type != SQLITE_TRACE_CLOSE)
        return 0;
    sqlite3 *h = p;
    const char *file = sqlite3_db_filename(h, "main");
    closes_seen++;
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
        int got = -1;
        if ((sqlite3_db_config(h, need[i].op, -1, &got) != SQLITE_OK || got != need[i].want) &&
            close_bad[0] == '\0')
            snprintf(close_bad, sizeof(close_bad), "%s is %d on %s", need[i].name, got,
                     file != NULL && file[0] != '\0' ? file : "(memory)");
    }
    return 0;
}

static int watch_closes(sqlite3 *h, char **err, const sqlite3_api_routines *api)
{
    (void)err, (void)api;
    return sqlite3_trace_v2(h, SQLITE_TRACE_CLOSE, on_close, NULL);
}

/* What every driver connection must show from SQL: trusted_schema off and not to be turned
 * on, fts3_tokenizer refused, and (when it may write) no editing of sqlite_master. */
static void check_hardened(tn_db *d, bool writable)
{
    char v[16];
    EXPECT(d, TN_OK, db_query_value(d, v, sizeof(v), "PRAGMA trusted_schema", 0, NULL));
    ck_assert_str_eq(v, "0");
    EXPECT(d, TN_DENIED, tn_db_exec(d, "PRAGMA trusted_schema = ON", 0, NULL));
    EXPECT(d, TN_OK, db_query_value(d, v, sizeof(v), "PRAGMA trusted_schema", 0, NULL));
    ck_assert_str_eq(v, "0");
    EXPECT(d, TN_DENIED, tn_db_exec(d, "SELECT fts3_tokenizer('simple')", 0, NULL));
    if (writable) {
        /* writable_schema may not be set (and would do nothing in defensive mode), nor the
         * PRAGMAs that reach the whole process or the file's journal */
        EXPECT(d, TN_DENIED, tn_db_exec(d, "PRAGMA writable_schema = 1", 0, NULL));
        EXPECT(d, TN_DENIED, tn_db_exec(d, "PRAGMA hard_heap_limit = 1", 0, NULL));
        EXPECT(d, TN_DENIED, tn_db_exec(d, "PRAGMA soft_heap_limit = 1", 0, NULL));
        EXPECT(d, TN_DENIED, tn_db_exec(d, "PRAGMA journal_mode = DELETE", 0, NULL));
        EXPECT(d, TN_OK, db_query_value(d, v, sizeof(v), "PRAGMA hard_heap_limit", 0, NULL));
        ck_assert_str_eq(v, "0");
        ck_assert_int_ne(tn_db_exec(d, "UPDATE sqlite_master SET sql = 'x' WHERE name = 'h'", 0,
                                    NULL),
                         TN_OK);
        ck_assert_int_ne(tn_db_exec(d, "DELETE FROM sqlite_master", 0, NULL), TN_OK);
    }
}

START_TEST(test_sqlite_hardened_everywhere)
{
    ck_assert_int_eq(sqlite3_auto_extension((void (*)(void))watch_closes), SQLITE_OK);
    closes_seen = 0;
    close_bad[0] = '\0';
    OK(tn_db_exec(db, "CREATE TABLE h (x INTEGER)", 0, NULL));
    char u[700];
    /* the kinds of connection the host opens: read-write (tenants, the registry, copies),
     * must-exist, read-only by URI (the panel) or by option, the bulk job's NORMAL sync, no
     * busy wait, and a private database in memory */
    const struct {
        const char *suffix;
        db_options o;
        bool writable;
    } kinds[] = {
        {"", {0}, true},
        {"?mode=rw", {0}, true},
        {"?mode=ro", {.busy_timeout_ms = 2000, .read_only = true}, false},
        {"", {.read_only = true}, false},
        {"?mode=rwc", {.sync_normal = true}, true},
        {"?mode=rw", {.busy_timeout_ms = -1}, true},
    };
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        snprintf(u, sizeof(u), "%s%s", uri, kinds[i].suffix);
        tn_db *d = open_db(u, &kinds[i].o);
        check_hardened(d, kinds[i].writable);
        db_close(d);
    }
    tn_db *m = open_db("sqlite::memory:", NULL);
    EXPECT(m, TN_OK, tn_db_exec(m, "CREATE TABLE h (x INTEGER)", 0, NULL));
    check_hardened(m, true);
    db_close(m);
    /* the template clone's private connection */
    char copy[600], err[512];
    snprintf(copy, sizeof(copy), "%s.clone", sqlite_path());
    storage_target from = {.kind = TARGET_SQLITE, .name = sqlite_path()};
    storage_target to = {.kind = TARGET_SQLITE, .name = copy};
    int rc = migrate_clone(&from, &to, err, sizeof(err));
    ck_assert_msg(rc == TN_OK, "migrate_clone: %s: %s", tn_rc_str(rc), err);
    unlink(copy);
    sqlite3_cancel_auto_extension((void (*)(void))watch_closes);
    ck_assert_int_eq(closes_seen, 8);
    ck_assert_msg(close_bad[0] == '\0', "a connection was not hardened: %s", close_bad);
}
END_TEST

START_TEST(test_sqlite_busy)
{
    make_table();
    db_options o = {.busy_timeout_ms = -1};   /* do not wait */
    tn_db *other = open_db(uri, &o);
    OK(tn_db_exec(db, "BEGIN IMMEDIATE", 0, NULL));
    insert("1", "a", NULL);
    EXPECT(other, TN_BUSY, tn_db_exec(other, "INSERT INTO t (id) VALUES (2)", 0, NULL));
    ck_assert_int_eq(count(other, "SELECT count(*) FROM t"), 0);   /* WAL: readers go on */
    OK(tn_db_commit(db));   /* a raw BEGIN can be ended through the API */
    EXPECT(other, TN_OK, tn_db_exec(other, "INSERT INTO t (id) VALUES (2)", 0, NULL));
    /* tn_db_begin takes the write lock up front (IMMEDIATE): a second writer is told at
     * its begin, not halfway through its work */
    OK(tn_db_begin(db));
    EXPECT(other, TN_BUSY, tn_db_begin(other));
    ck_assert(db_is_clean(other));
    OK(tn_db_rollback(db));
    EXPECT(other, TN_OK, tn_db_begin(other));
    EXPECT(other, TN_OK, tn_db_commit(other));
    db_close(other);
    /* ... except on a read-only connection, which only reads */
    db_options ro = {.read_only = true};
    other = open_db(uri, &ro);
    OK(tn_db_begin(db));
    EXPECT(other, TN_OK, tn_db_begin(other));
    ck_assert_int_eq(count(other, "SELECT count(*) FROM t"), 2);
    EXPECT(other, TN_OK, tn_db_commit(other));
    OK(tn_db_rollback(db));
    db_close(other);
}
END_TEST

/* ---- PostgreSQL only ------------------------------------------------------------------------ */

/* Terminate d's backend from another connection and wait until it is gone. */
static void kill_backend(tn_db *d)
{
    char pid[32];
    EXPECT(d, TN_OK, db_query_value(d, pid, sizeof(pid), "SELECT pg_backend_pid()", 0, NULL));
    tn_db *admin = open_db(uri, NULL);
    const char *p[] = {pid};
    char v[16];
    EXPECT(admin, TN_OK,
           db_query_value(admin, v, sizeof(v), "SELECT pg_terminate_backend($1::int)", 1, p));
    ck_assert_str_eq(v, "t");
    for (int i = 0; i < 200; i++) {
        EXPECT(admin, TN_OK,
               db_query_value(admin, v, sizeof(v),
                              "SELECT count(*) FROM pg_stat_activity WHERE pid = $1::int", 1, p));
        if (strcmp(v, "0") == 0)
            break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ck_assert_str_eq(v, "0");
    db_close(admin);
}

START_TEST(test_pg_broken_connection)
{
    db_options o = {.statement_timeout_ms = 4000};
    tn_db *d = open_db(uri, &o);
    char v[32];
    kill_backend(d);
    EXPECT(d, TN_IO, tn_db_exec(d, "SELECT 1", 0, NULL));
    ck_assert_str_ne(tn_db_error(d), "");
    ck_assert(!db_is_clean(d));
    EXPECT(d, TN_IO, tn_db_exec(d, "SELECT 1", 0, NULL));   /* still broken, still TN_IO */
    EXPECT(d, TN_OK, db_reset(d));
    ck_assert(db_is_clean(d));
    EXPECT(d, TN_OK, tn_db_exec(d, "SELECT 1", 0, NULL));
    /* the session settings came back with the new backend */
    EXPECT(d, TN_OK, db_query_value(d, v, sizeof(v), "SHOW statement_timeout", 0, NULL));
    ck_assert_str_eq(v, "4s");
    EXPECT(d, TN_OK, db_query_value(d, v, sizeof(v), "SHOW client_encoding", 0, NULL));
    ck_assert_str_eq(v, "UTF8");
    /* the program names itself in pg_stat_activity (the target did not set a name) */
    EXPECT(d, TN_OK, db_query_value(d, v, sizeof(v), "SHOW application_name", 0, NULL));
    ck_assert_str_eq(v, "check_storage");

    /* broken inside a transaction: the commit says so, and reset recovers */
    EXPECT(d, TN_OK, tn_db_begin(d));
    kill_backend(d);
    EXPECT(d, TN_IO, tn_db_exec(d, "SELECT 1", 0, NULL));
    EXPECT(d, TN_IO, tn_db_commit(d));
    EXPECT(d, TN_OK, db_reset(d));
    EXPECT(d, TN_OK, tn_db_begin(d));
    EXPECT(d, TN_OK, tn_db_commit(d));
    db_close(d);
}
END_TEST

START_TEST(test_pg_statement_timeout)
{
    db_options o = {.statement_timeout_ms = 100};
    tn_db *d = open_db(uri, &o);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    EXPECT(d, TN_TIMEOUT, tn_db_exec(d, "SELECT pg_sleep(3)", 0, NULL));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ck_assert_int_lt(t1.tv_sec - t0.tv_sec, 2);
    ck_assert(db_is_clean(d));
    EXPECT(d, TN_OK, tn_db_exec(d, "SELECT 1", 0, NULL));
    db_close(d);
}
END_TEST

/* What the server session itself holds, read on the native connection with no transaction
 * start of the driver's before it: what the next client of that server session gets behind
 * PgBouncer in transaction mode. libpq is the one the driver loaded. */
static void session_value(tn_db *d, const char *sql, char *out, size_t outlen)
{
    void *lib = dlopen("libpq.so.5", RTLD_LAZY | RTLD_NOLOAD);
    ck_assert_msg(lib != NULL, "libpq is not loaded: %s", dlerror());
    void *(*exec)(void *, const char *) = (void *(*)(void *, const char *))dlsym(lib, "PQexec");
    char *(*value)(const void *, int, int) =
        (char *(*)(const void *, int, int))dlsym(lib, "PQgetvalue");
    int (*ntuples)(const void *) = (int (*)(const void *))dlsym(lib, "PQntuples");
    void (*clear)(void *) = (void (*)(void *))dlsym(lib, "PQclear");
    ck_assert(exec != NULL && value != NULL && ntuples != NULL && clear != NULL);
    void *res = exec(tn_db_native(d), sql);
    ck_assert_msg(res != NULL && ntuples(res) == 1, "%s: no row", sql);
    snprintf(out, outlen, "%s", value(res, 0, 0));
    clear(res);
    dlclose(lib);
}

/* The timeout and read-only ride with each transaction and never stay on the server
 * session: set there, a request's timeout would cancel the next client's migration behind
 * PgBouncer, and a read-only default refuse its writes. */
START_TEST(test_pg_settings_ride_with_transactions)
{
    make_table();
    char v[32], server[32];
    EXPECT(db, TN_OK, db_query_value(db, server, sizeof(server), "SHOW statement_timeout", 0,
                                     NULL));
    ck_assert_str_ne(server, "150ms");
    db_options o = {.statement_timeout_ms = 150, .read_only = true};
    tn_db *d = open_db(uri, &o);
    for (int scoped = 0; scoped < 2; scoped++) {
        if (scoped)
            EXPECT(d, TN_OK, db_set_scope(d, "tn_check", NULL));
        /* autocommit */
        EXPECT(d, TN_OK, db_query_value(d, v, sizeof(v), "SHOW statement_timeout", 0, NULL));
        ck_assert_str_eq(v, "150ms");
        EXPECT(d, TN_TIMEOUT, tn_db_exec(d, "SELECT pg_sleep(3)", 0, NULL));
        EXPECT(d, TN_DENIED, tn_db_exec(d, "INSERT INTO t (id) VALUES (1)", 0, NULL));
        /* a transaction, whose first statement may still choose its isolation */
        EXPECT(d, TN_OK, tn_db_begin(d));
        EXPECT(d, TN_OK, tn_db_exec(d, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", 0,
                                    NULL));
        EXPECT(d, TN_OK, db_query_value(d, v, sizeof(v), "SHOW transaction_isolation", 0,
                                        NULL));
        ck_assert_str_eq(v, "repeatable read");
        EXPECT(d, TN_OK, db_query_value(d, v, sizeof(v), "SHOW transaction_read_only", 0,
                                        NULL));
        ck_assert_str_eq(v, "on");
        EXPECT(d, TN_TIMEOUT, tn_db_exec(d, "SELECT pg_sleep(3)", 0, NULL));
        EXPECT(d, TN_OK, tn_db_rollback(d));
        EXPECT(d, TN_OK, tn_db_begin(d));
        EXPECT(d, TN_DENIED, tn_db_exec(d, "INSERT INTO t (id) VALUES (1)", 0, NULL));
        EXPECT(d, TN_OK, tn_db_rollback(d));
        /* a BEGIN the caller sends itself (db_read_begin's BEGIN READ ONLY) */
        EXPECT(d, TN_OK, tn_db_exec(d, "BEGIN", 0, NULL));
        EXPECT(d, TN_OK, db_query_value(d, v, sizeof(v), "SHOW statement_timeout", 0, NULL));
        ck_assert_str_eq(v, "150ms");
        EXPECT(d, TN_TIMEOUT, tn_db_exec(d, "SELECT pg_sleep(3)", 0, NULL));
        EXPECT(d, TN_OK, tn_db_exec(d, "ROLLBACK", 0, NULL));
        /* the server session holds neither */
        session_value(d, "SHOW statement_timeout", v, sizeof(v));
        ck_assert_str_eq(v, server);
        session_value(d, "SHOW default_transaction_read_only", v, sizeof(v));
        ck_assert_str_eq(v, "off");
        session_value(d, "SHOW transaction_read_only", v, sizeof(v));
        ck_assert_str_eq(v, "off");
    }
    db_close(d);
    /* without settings nothing rides: a migration gets the server's timeout */
    d = open_db(uri, NULL);
    EXPECT(d, TN_OK, db_query_value(d, v, sizeof(v), "SHOW statement_timeout", 0, NULL));
    ck_assert_str_eq(v, server);
    db_close(d);
}
END_TEST

START_TEST(test_pg_read_only_and_copy)
{
    make_table();
    db_options o = {.read_only = true};
    tn_db *d = open_db(uri, &o);
    EXPECT(d, TN_DENIED, tn_db_exec(d, "INSERT INTO t (id) VALUES (1)", 0, NULL));
    EXPECT(d, TN_DENIED, tn_db_exec(d, "CREATE TABLE x (a INTEGER)", 0, NULL));
    ck_assert_int_eq(count(d, "SELECT count(*) FROM t"), 0);
    db_close(d);
    /* COPY is refused and leaves the connection usable */
    EXPECT(db, TN_INVALID, tn_db_exec(db, "COPY t FROM STDIN", 0, NULL));
    ck_assert(db_is_clean(db));
    EXPECT(db, TN_INVALID, tn_db_exec(db, "COPY (SELECT 1) TO STDOUT", 0, NULL));
    ck_assert(db_is_clean(db));
    ck_assert_int_eq(count(db, "SELECT count(*) FROM t"), 0);
}
END_TEST

START_TEST(test_pg_uri_forms)
{
    const char *host = getenv("PGHOST"), *port = getenv("PGPORT"), *dbn = getenv("PGDATABASE");
    ck_assert_msg(host != NULL && port != NULL && dbn != NULL, "run under tests/pg.sh");
    char u[600];
    snprintf(u, sizeof(u), "postgresql:///%s?host=%s&port=%s&user=postgres", dbn, host, port);
    char err[256];
    ck_assert_int_eq(db_preload(u, err, sizeof(err)), TN_OK);   /* the driver loads */
    tn_db *d = open_db(u, NULL);
    ck_assert_str_eq(tn_db_backend(d), "postgres");
    /* deferred commits are SQLite's: on PostgreSQL both calls succeed and change nothing */
    EXPECT(d, TN_OK, db_defer_sync(d, true));
    EXPECT(d, TN_OK, db_flush(d));
    db_close(d);
    d = open_db("postgres:", NULL);   /* libpq's defaults: the PG* variables */
    char v[64];
    EXPECT(d, TN_OK, db_query_value(d, v, sizeof(v), "SELECT current_database()", 0, NULL));
    ck_assert_str_eq(v, dbn);
    db_close(d);
}
END_TEST

/* ---- the splitter alone ---------------------------------------------------------------------- */

/* Split `sql` and compare with the expected statements, "|"-joined. */
static void expect_split(db_dialect dialect, const char *sql, const char *want)
{
    char got[1024] = "";
    db_splitter s;
    const char *st;
    size_t len;
    int line, r;
    db_split_init(&s, dialect, sql, strlen(sql));
    while ((r = db_split_next(&s, &st, &len, &line)) == 1) {
        if (got[0] != '\0')
            strcat(got, "|");
        strncat(got, st, len);
    }
    ck_assert_int_eq(r, 0);
    ck_assert_msg(strcmp(got, want) == 0, "split of [%s]:\n got [%s]\nwant [%s]", sql, got,
                  want);
}

static void expect_unterminated(db_dialect dialect, const char *sql, int want_line)
{
    db_splitter s;
    const char *st;
    size_t len;
    int line = 0, r;
    db_split_init(&s, dialect, sql, strlen(sql));
    while ((r = db_split_next(&s, &st, &len, &line)) == 1)
        ;
    ck_assert_msg(r == -1, "[%s] not refused", sql);
    ck_assert_int_eq(line, want_line);
}

START_TEST(test_splitter)
{
    const db_dialect PG = DB_DIALECT_PG, SQ = DB_DIALECT_SQLITE;
    expect_split(PG, "a;b", "a|b");
    expect_split(PG, " a ; ; b ;", "a |b ");
    expect_split(PG, "", "");
    expect_split(PG, " -- x;\n /* y; */ ;", "");
    expect_split(PG, "select ';'; x", "select ';'|x");
    expect_split(PG, "select 'it''s;'; x", "select 'it''s;'|x");
    expect_split(PG, "select \"a;\"\"b\"; x", "select \"a;\"\"b\"|x");
    expect_split(PG, "select $$;$$; x", "select $$;$$|x");
    expect_split(PG, "select $a$ $$; $b$ ;$a$; x", "select $a$ $$; $b$ ;$a$|x");
    expect_split(PG, "select $1; select a$b$c; x", "select $1|select a$b$c|x");
    expect_split(PG, "select E'\\';'; x", "select E'\\';'|x");
    expect_split(PG, "select e'\\\\'; x", "select e'\\\\'|x");
    expect_split(PG, "select date';'; x", "select date';'|x");
    expect_split(PG, "/* a /* b; */ c; */ x; y", "x|y");
    expect_split(PG, "x -- a;\n; y", "x -- a;\n|y");
    expect_split(PG, "create rule r as on insert to t do (insert into a values (1); "
                     "insert into b values (2)); x",
                 "create rule r as on insert to t do (insert into a values (1); "
                 "insert into b values (2))|x");
    expect_split(PG, "create or replace function f() returns int language sql begin atomic "
                     "select 1; select case when true then 2 end; end; begin; commit",
                 "create or replace function f() returns int language sql begin atomic "
                 "select 1; select case when true then 2 end; end|begin|commit");
    expect_split(PG, "begin; select 1; end; x", "begin|select 1|end|x");
    /* SQLite: [] and `` quote, block comments do not nest, $ is not a quote */
    expect_split(SQ, "select [a;b]; select `c;d`; x", "select [a;b]|select `c;d`|x");
    expect_split(SQ, "/* a /* b */ x; y", "x|y");
    expect_split(SQ, "select $a; x", "select $a|x");
    expect_split(SQ, "create temp trigger if not exists t after insert on a begin "
                     "insert into b values (1); update c set d = case when 1 then 2 end; end; x",
                 "create temp trigger if not exists t after insert on a begin "
                 "insert into b values (1); update c set d = case when 1 then 2 end; end|x");
    expect_split(SQ, "create table trigger_log (a); x", "create table trigger_log (a)|x");
    expect_unterminated(PG, "a;\nselect 'x", 2);
    expect_unterminated(PG, "a;\n\nselect \"x", 3);
    expect_unterminated(PG, "select $q$ x $Q$", 1);
    expect_unterminated(PG, "/* /* */", 1);
    expect_unterminated(SQ, "select [x", 1);
    expect_unterminated(SQ, "x;\n/* y", 2);
    ck_assert(db_sql_is_blank(SQ, " ; -- x\n/* y */", 15));
    ck_assert(!db_sql_is_blank(SQ, " ; x", 4));

    /* lines: where each statement starts */
    db_splitter s;
    const char *st;
    size_t len;
    int line;
    const char *sql = "a;\n'x\ny';\n\n  b";
    db_split_init(&s, PG, sql, strlen(sql));
    ck_assert_int_eq(db_split_next(&s, &st, &len, &line), 1);
    ck_assert_int_eq(line, 1);
    ck_assert_int_eq(db_split_next(&s, &st, &len, &line), 1);
    ck_assert_int_eq(line, 2);
    ck_assert_int_eq(db_split_next(&s, &st, &len, &line), 1);
    ck_assert_int_eq(line, 5);
    ck_assert_int_eq(db_split_next(&s, &st, &len, &line), 0);
}
END_TEST

/* ---- suites ---------------------------------------------------------------------------------- */

void db_tests_init(const char *dir, const char *pg);
void db_tests_init(const char *dir, const char *pg)
{
    snprintf(tmpdir, sizeof(tmpdir), "%s", dir);
    pg_uri = pg;
}

Suite *db_suite(bool pg);
Suite *db_suite(bool pg)
{
    Suite *s = suite_create(pg ? "db-postgres" : "db-sqlite");
    TCase *tc = tcase_create(pg ? "postgres" : "sqlite");
    tcase_add_checked_fixture(tc, pg ? setup_pg : setup_sqlite, teardown);
    tcase_set_timeout(tc, 20);
    /* the same cases on both backends */
    tcase_add_test(tc, test_exec_query_nulls);
    tcase_add_test(tc, test_placeholders_reuse_and_order);
    tcase_add_test(tc, test_param_count_and_form);
    tcase_add_test(tc, test_unique_is_exists);
    tcase_add_test(tc, test_transactions);
    tcase_add_test(tc, test_error_inside_transaction);
    tcase_add_test(tc, test_batch);
    tcase_add_test(tc, test_changes_and_last_id);
    tcase_add_test(tc, test_column_by_name);
    tcase_add_test(tc, test_exec_script);
    tcase_add_test(tc, test_quote_ident);
    tcase_add_test(tc, test_query_value);
    tcase_add_test(tc, test_clean_and_reset);
    tcase_add_test(tc, test_same_statement_twice_and_many);
    tcase_add_test(tc, test_rows_outlive_connection);
    /* what only one backend has */
    if (pg) {
        tcase_add_test(tc, test_pg_broken_connection);
        tcase_add_test(tc, test_pg_statement_timeout);
        tcase_add_test(tc, test_pg_settings_ride_with_transactions);
        tcase_add_test(tc, test_pg_read_only_and_copy);
        tcase_add_test(tc, test_pg_uri_forms);
    } else {
        tcase_add_test(tc, test_sqlite_pragmas);
        tcase_add_test(tc, test_sqlite_data_version);
        tcase_add_test(tc, test_sqlite_read_only);
        tcase_add_test(tc, test_sqlite_deferred_sync);
        tcase_add_test(tc, test_sqlite_authorizer);
        tcase_add_test(tc, test_sqlite_fts3_tokenizer);
        tcase_add_test(tc, test_sqlite_hardened_everywhere);
        tcase_add_test(tc, test_sqlite_busy);
    }
    suite_add_tcase(s, tc);
    return s;
}

Suite *db_misc_suite(void);
Suite *db_misc_suite(void)
{
    Suite *s = suite_create("db");
    TCase *tc = tcase_create("neutral");
    tcase_add_test(tc, test_splitter);
    tcase_add_test(tc, test_open_errors);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * check_target.c — the schema scope (db_set_schema_scope), notifications, and storage
 * targets (target.h: create, exists, drop, open, tables) on all three kinds, and the
 * inventory of a folder's SQLite targets (inventory.h).
 *
 * The scope cases are the leak cases of schema-per-tenant hosting: two schemas with the
 * same table names, one connection alternating between them, and every way a request can
 * end badly (an error in a transaction, a statement timeout, a killed backend, session
 * state left behind) followed by a check that the next request reads its own tenant.
 */
#include "core/first.h"
#include "storage/db.h"
#include "storage/db_int.h"
#include "storage/target.h"
#include "storage/inventory.h"
#include "core/rc.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/unit/storage/storage_test.h"

/* ---- fixtures -------------------------------------------------------------------------------- */

/* Two tenant schemas, tn_scope_a and tn_scope_b, each with items(marker) holding its own
 * letter, and a public.items that no scoped statement may ever read. */
static void setup_schemas(void)
{
    tn_db *d = st_open(st_pg, NULL);
    ST_OK(d, db_exec_script(d, "DROP SCHEMA IF EXISTS tn_scope_a CASCADE;"
                               "DROP SCHEMA IF EXISTS tn_scope_b CASCADE;"
                               "DROP TABLE IF EXISTS public.items;"
                               "CREATE SCHEMA tn_scope_a; CREATE SCHEMA tn_scope_b;"
                               "CREATE TABLE tn_scope_a.items (marker TEXT PRIMARY KEY);"
                               "CREATE TABLE tn_scope_b.items (marker TEXT PRIMARY KEY);"
                               "CREATE TABLE public.items (marker TEXT PRIMARY KEY);"
                               "INSERT INTO tn_scope_a.items VALUES ('a');"
                               "INSERT INTO tn_scope_b.items VALUES ('b');"
                               "INSERT INTO public.items VALUES ('public');"
                               "CREATE TABLE tn_scope_a.counted (id SERIAL PRIMARY KEY, x INT);"
                               /* a session setting made where no statement text shows it */
                               "CREATE FUNCTION tn_scope_a.sneak() RETURNS TEXT LANGUAGE sql "
                               "AS $$SELECT pg_catalog.set_config('app.sneak', 'a', false)$$"));
    db_close(d);
}

/* The marker the connection reads with an unqualified name (autocommit). */
static void expect_marker(tn_db *d, const char *want)
{
    char v[32];
    ST_OK(d, db_query_value(d, v, sizeof(v), "SELECT string_agg(marker, ',' ORDER BY marker) "
                                             "FROM items", 0, NULL));
    ck_assert_str_eq(v, want);
}

static void scope(tn_db *d, const char *schema)
{
    ST_OK(d, db_set_schema_scope(d, schema));
}

/* ---- the scope -------------------------------------------------------------------------------- */

START_TEST(test_scope_basics)
{
    tn_db *d = st_open(st_pg, NULL);
    char v[64];
    /* unscoped: the session path is empty, so an unqualified name resolves nowhere */
    ST_OK(d, db_query_value(d, v, sizeof(v), "SHOW search_path", 0, NULL));
    ck_assert_str_eq(v, "");
    ST_EXPECT(d, TN_INVALID, tn_db_exec(d, "SELECT * FROM items", 0, NULL));
    ck_assert(db_is_clean(d));
    ck_assert_ptr_null(db_schema_scope(d));

    ST_EXPECT(d, TN_INVALID, db_set_schema_scope(d, "bad-name"));
    ST_EXPECT(d, TN_INVALID, db_set_schema_scope(d, "x\"; DROP SCHEMA tn_scope_a; --"));
    ST_EXPECT(d, TN_INVALID, db_set_schema_scope(d, ""));
    ck_assert_ptr_null(db_schema_scope(d));

    scope(d, "tn_scope_a");
    ck_assert_str_eq(db_schema_scope(d), "tn_scope_a");
    expect_marker(d, "a");
    ST_OK(d, db_query_value(d, v, sizeof(v), "SHOW search_path", 0, NULL));
    ck_assert_str_eq(v, "\"tn_scope_a\"");   /* public is never in it */
    ck_assert(db_is_clean(d));               /* the autocommit statement committed */
    scope(d, "tn_scope_b");
    expect_marker(d, "b");
    scope(d, "tn_scope_a");
    expect_marker(d, "a");
    /* writes land in the scope */
    ST_OK(d, tn_db_exec(d, "INSERT INTO items VALUES ('a2')", 0, NULL));
    ck_assert_int_eq(tn_db_changes(d), 1);
    expect_marker(d, "a,a2");
    scope(d, "tn_scope_b");
    expect_marker(d, "b");
    /* parameters and row sets through the pipeline */
    const char *p[] = {"b"};
    tn_rows *r = NULL;
    ST_OK(d, tn_db_query(d, &r, "SELECT marker, $1 = marker AS same FROM items", 1, p));
    ST_EXPECT(d, TN_OK, tn_rows_next(r));
    ck_assert_str_eq(tn_rows_getn(r, "marker"), "b");
    ck_assert_str_eq(tn_rows_getn(r, "same"), "t");
    tn_rows_free(r);

    /* no scope again: nothing resolves, and the session path is empty again */
    scope(d, NULL);
    ck_assert_ptr_null(db_schema_scope(d));
    ST_EXPECT(d, TN_INVALID, tn_db_exec(d, "SELECT * FROM items", 0, NULL));
    ST_OK(d, db_query_value(d, v, sizeof(v), "SHOW search_path", 0, NULL));
    ck_assert_str_eq(v, "");
    db_close(d);

    /* SQLite has no schemas to scope to */
    char uri[512];
    snprintf(uri, sizeof(uri), "sqlite:%s/scope.db", st_dir);
    tn_db *s = st_open(uri, NULL);
    ST_EXPECT(s, TN_INVALID, db_set_schema_scope(s, "tn_scope_a"));
    ck_assert_ptr_null(db_schema_scope(s));
    ST_EXPECT(s, TN_INVALID, db_listen(s, "chan"));
    ST_EXPECT(s, TN_INVALID, db_wait_notify(s, 0));
    db_close(s);
    ck_assert_int_eq(db_set_schema_scope(NULL, "x"), TN_INVALID);
    ck_assert_ptr_null(db_schema_scope(NULL));
}
END_TEST

START_TEST(test_scope_transactions)
{
    tn_db *d = st_open(st_pg, NULL);
    scope(d, "tn_scope_a");
    /* begin sends nothing: BEGIN goes with the first statement */
    ST_OK(d, tn_db_begin(d));
    ck_assert(!db_is_clean(d));
    ST_EXPECT(d, TN_BUSY, db_set_schema_scope(d, "tn_scope_b"));
    ST_EXPECT(d, TN_BUSY, db_set_schema_scope(d, NULL));
    ck_assert_str_eq(db_schema_scope(d), "tn_scope_a");
    ST_EXPECT(d, TN_INVALID, tn_db_begin(d));   /* no nesting, even before the round trip */
    ST_OK(d, tn_db_exec(d, "INSERT INTO items VALUES ('a2')", 0, NULL));
    ST_OK(d, tn_db_exec(d, "INSERT INTO items VALUES ('a3')", 0, NULL));
    expect_marker(d, "a,a2,a3");
    ST_EXPECT(d, TN_BUSY, db_set_schema_scope(d, "tn_scope_b"));
    ST_OK(d, tn_db_rollback(d));
    ck_assert(db_is_clean(d));
    expect_marker(d, "a");
    ST_OK(d, tn_db_begin(d));
    ST_OK(d, tn_db_exec(d, "INSERT INTO items VALUES ('a4')", 0, NULL));
    ST_OK(d, tn_db_commit(d));
    expect_marker(d, "a,a4");

    /* an empty transaction: begin and commit without a statement, or rollback */
    ST_OK(d, tn_db_begin(d));
    ST_OK(d, tn_db_commit(d));
    ST_OK(d, tn_db_begin(d));
    ST_OK(d, tn_db_rollback(d));
    ck_assert(db_is_clean(d));
    ST_EXPECT(d, TN_INVALID, tn_db_commit(d));

    /* an error inside a transaction: failed (as without a scope), commit rolls back */
    scope(d, "tn_scope_b");
    ST_OK(d, tn_db_begin(d));
    ST_OK(d, tn_db_exec(d, "INSERT INTO items VALUES ('b2')", 0, NULL));
    ST_EXPECT(d, TN_EXISTS, tn_db_exec(d, "INSERT INTO items VALUES ('b')", 0, NULL));
    ST_EXPECT(d, TN_INVALID, tn_db_exec(d, "SELECT 1", 0, NULL));   /* aborted */
    ST_EXPECT(d, TN_ERR, tn_db_commit(d));
    ck_assert(db_is_clean(d));
    expect_marker(d, "b");
    /* the first statement of a transaction fails: the transaction is failed, not gone */
    ST_OK(d, tn_db_begin(d));
    ST_EXPECT(d, TN_INVALID, tn_db_exec(d, "SELECT * FROM no_such_table", 0, NULL));
    ck_assert(!db_is_clean(d));
    ST_EXPECT(d, TN_BUSY, db_set_schema_scope(d, "tn_scope_a"));
    ST_OK(d, tn_db_rollback(d));
    scope(d, "tn_scope_a");
    expect_marker(d, "a,a4");
    db_close(d);
}
END_TEST

/* A batch on a scoped connection goes out with the transaction's start (BEGIN and the
 * scope in the same pipeline): its statements see the tenant's schema, and a first statement
 * that fails leaves a failed transaction, as tn_db_exec does. */
START_TEST(test_scope_batch)
{
    tn_db *d = st_open(st_pg, NULL);
    scope(d, "tn_scope_a");
    ST_OK(d, tn_db_begin(d));
    db_stmt st[] = {{"INSERT INTO items VALUES ('a6')", 0, NULL},
                    {"SELECT current_schema(), count(*) FROM items", 0, NULL}};
    tn_rows *rows = NULL;
    int failed = -1;
    ST_OK(d, db_exec_batch(d, st, 2, 0, &rows, &failed));
    ck_assert_int_eq(failed, 2);
    ck_assert_int_eq(tn_rows_next(rows), TN_OK);
    ck_assert_str_eq(tn_rows_get(rows, 0), "tn_scope_a");
    ck_assert_str_eq(tn_rows_get(rows, 1), "2");
    tn_rows_free(rows);
    db_stmt last[] = {{"INSERT INTO items VALUES ('a7')", 0, NULL}};
    ST_OK(d, db_exec_batch(d, last, 1, DB_BATCH_COMMIT, NULL, &failed));
    ck_assert(db_is_clean(d));
    expect_marker(d, "a,a6,a7");

    scope(d, "tn_scope_b");
    ST_OK(d, tn_db_begin(d));
    db_stmt bad[] = {{"INSERT INTO items VALUES ('b')", 0, NULL},   /* b is there */
                     {"INSERT INTO items VALUES ('b7')", 0, NULL}};
    ST_EXPECT(d, TN_EXISTS, db_exec_batch(d, bad, 2, DB_BATCH_COMMIT, NULL, &failed));
    ck_assert_int_eq(failed, 0);
    ck_assert(!db_is_clean(d));
    ST_OK(d, tn_db_rollback(d));
    expect_marker(d, "b");
    db_close(d);
}
END_TEST

START_TEST(test_scope_autocommit_error)
{
    tn_db *d = st_open(st_pg, NULL);
    scope(d, "tn_scope_a");
    /* a failed autocommit statement rolls its implicit transaction back: clean at once */
    ST_EXPECT(d, TN_EXISTS, tn_db_exec(d, "INSERT INTO items VALUES ('z'), ('a')", 0, NULL));
    ck_assert(db_is_clean(d));
    ck_assert_str_ne(tn_db_error(d), "");
    expect_marker(d, "a");   /* 'z' went with it */
    ST_EXPECT(d, TN_INVALID, tn_db_exec(d, "SELEKT 1", 0, NULL));
    ck_assert(db_is_clean(d));
    ST_EXPECT(d, TN_INVALID, tn_db_exec(d, "SELECT 1; SELECT 2", 0, NULL));
    ST_EXPECT(d, TN_INVALID, tn_db_exec(d, "SELECT $1", 0, NULL));
    /* COPY would stall the pipeline: refused before anything is sent */
    ST_EXPECT(d, TN_INVALID, tn_db_exec(d, "COPY items FROM STDIN", 0, NULL));
    ST_EXPECT(d, TN_INVALID, tn_db_exec(d, " /* x */ -- y\n copy items TO STDOUT", 0, NULL));
    ck_assert(db_is_clean(d));
    expect_marker(d, "a");
    scope(d, "tn_scope_b");
    expect_marker(d, "b");
    db_close(d);
}
END_TEST

/* The role is part of the scope: the same schema served under a tenant's role and then
 * without one (the login's rights: the host's own work on that schema), or the other way, is
 * a change of scope, and what the one left in the session (a temporary table that shadows
 * items, a prepared statement) is wiped before the other runs. */
START_TEST(test_scope_role_change_wiped)
{
    tn_db *a = st_open(st_pg, NULL);
    tn_db_exec(a, "DROP ROLE IF EXISTS tn_scope_ra", 0, NULL);
    ST_OK(a, db_exec_script(a, "CREATE ROLE tn_scope_ra;"
                               "GRANT USAGE ON SCHEMA tn_scope_a TO tn_scope_ra;"
                               "GRANT SELECT ON tn_scope_a.items TO tn_scope_ra"));
    const char *roles[2][2] = {{"tn_scope_ra", NULL}, {NULL, "tn_scope_ra"}};
    char v[64], login[64];
    for (int dir = 0; dir < 2; dir++) {
        tn_db *d = st_open(st_pg, NULL);
        ST_OK(d, db_query_value(d, login, sizeof(login), "SELECT session_user", 0, NULL));
        ST_OK(d, db_set_scope(d, "tn_scope_a", roles[dir][0]));
        ST_OK(d, db_query_value(d, v, sizeof(v), "SELECT current_user", 0, NULL));
        ck_assert_str_eq(v, roles[dir][0] != NULL ? roles[dir][0] : login);
        ST_OK(d, tn_db_exec(d, "CREATE TEMP TABLE items (marker TEXT)", 0, NULL));
        ST_OK(d, tn_db_exec(d, "INSERT INTO pg_temp.items VALUES ('temp')", 0, NULL));
        ST_OK(d, tn_db_exec(d, "PREPARE leak AS SELECT 'left'", 0, NULL));
        ST_OK(d, db_set_scope(d, "tn_scope_a", roles[dir][1]));
        ST_OK(d, db_query_value(d, v, sizeof(v), "SELECT current_user", 0, NULL));
        ck_assert_str_eq(v, roles[dir][1] != NULL ? roles[dir][1] : login);
        expect_marker(d, "a");
        ST_EXPECT(d, TN_INVALID, tn_db_exec(d, "EXECUTE leak", 0, NULL));
        db_close(d);
    }
    ST_OK(a, tn_db_exec(a, "DROP OWNED BY tn_scope_ra", 0, NULL));
    ST_OK(a, tn_db_exec(a, "DROP ROLE tn_scope_ra", 0, NULL));
    db_close(a);
}
END_TEST

/* What a tenant may leave in its session: none of it may reach the next tenant. */
START_TEST(test_scope_session_wiped)
{
    db_options o = {.statement_timeout_ms = 7000};
    tn_db *d = st_open(st_pg, &o);
    char v[64];
    scope(d, "tn_scope_a");
    /* a session-level path pointing at the other tenant, a temporary table that would
     * shadow items (pg_temp is searched first), a prepared statement, a held cursor, a
     * listen */
    ST_OK(d, tn_db_exec(d, "SET search_path TO tn_scope_b", 0, NULL));
    ST_OK(d, tn_db_exec(d, "CREATE TEMP TABLE items (marker TEXT)", 0, NULL));
    ST_OK(d, tn_db_exec(d, "INSERT INTO pg_temp.items VALUES ('temp-a')", 0, NULL));
    ST_OK(d, tn_db_exec(d, "PREPARE leak AS SELECT marker FROM tn_scope_a.items", 0, NULL));
    ST_OK(d, db_listen(d, "tn_scope_a_events"));
    ST_OK(d, tn_db_begin(d));
    ST_OK(d, tn_db_exec(d, "DECLARE held CURSOR WITH HOLD FOR SELECT 'a-cursor'", 0, NULL));
    ST_OK(d, tn_db_commit(d));
    ST_OK(d, tn_db_exec(d, "SELECT set_config('app.tenant', 'a', false)", 0, NULL));

    scope(d, "tn_scope_b");
    /* the first transaction after the switch fails and takes the restored session settings
     * with it: they ride again with the next transaction start */
    ST_EXPECT(d, TN_INVALID, tn_db_exec(d, "SELEKT 1", 0, NULL));
    ST_OK(d, tn_db_begin(d));
    ST_OK(d, db_query_value(d, v, sizeof(v), "SHOW statement_timeout", 0, NULL));
    ck_assert_str_eq(v, "7s");
    ST_OK(d, tn_db_rollback(d));
    expect_marker(d, "b");
    ST_OK(d, db_query_value(d, v, sizeof(v), "SHOW search_path", 0, NULL));
    ck_assert_str_eq(v, "\"tn_scope_b\"");
    ST_EXPECT(d, TN_INVALID, tn_db_exec(d, "EXECUTE leak", 0, NULL));
    ST_EXPECT(d, TN_INVALID, tn_db_exec(d, "FETCH held", 0, NULL));
    ST_EXPECT(d, TN_INVALID, tn_db_exec(d, "SELECT * FROM pg_temp.items", 0, NULL));
    ST_OK(d, db_query_value(d, v, sizeof(v),
                            "SELECT count(*) FROM pg_listening_channels()", 0, NULL));
    ck_assert_str_eq(v, "0");
    ST_OK(d, db_query_value(d, v, sizeof(v),
                            "SELECT coalesce(current_setting('app.tenant', true), '')", 0,
                            NULL));
    ck_assert_str_eq(v, "");
    /* the session settings came back after the wipe */
    ST_OK(d, db_query_value(d, v, sizeof(v), "SHOW client_encoding", 0, NULL));
    ck_assert_str_eq(v, "UTF8");
    ST_OK(d, db_query_value(d, v, sizeof(v), "SHOW statement_timeout", 0, NULL));
    ck_assert_str_eq(v, "7s");

    /* a read-only connection stays read-only through a wipe and a failed first statement */
    db_options ro = {.read_only = true};
    tn_db *r = st_open(st_pg, &ro);
    scope(r, "tn_scope_a");
    expect_marker(r, "a");
    scope(r, "tn_scope_b");
    ST_EXPECT(r, TN_INVALID, tn_db_exec(r, "SELEKT 1", 0, NULL));
    ST_EXPECT(r, TN_DENIED, tn_db_exec(r, "INSERT INTO items VALUES ('ro')", 0, NULL));
    ST_OK(r, tn_db_begin(r));
    ST_EXPECT(r, TN_DENIED, tn_db_exec(r, "INSERT INTO items VALUES ('ro')", 0, NULL));
    ST_OK(r, tn_db_rollback(r));
    ST_EXPECT(r, TN_DENIED, tn_db_exec(r, "INSERT INTO items VALUES ('ro')", 0, NULL));
    db_close(r);

    /* the same tenant again keeps its session (no wipe between its own requests) */
    ST_OK(d, tn_db_exec(d, "CREATE TEMP TABLE scratch (x INT)", 0, NULL));
    scope(d, NULL);
    scope(d, "tn_scope_b");
    ST_OK(d, tn_db_exec(d, "SELECT * FROM pg_temp.scratch", 0, NULL));
    db_close(d);
}
END_TEST

/* Each kind of leftover alone: tenant a leaves it, tenant b must not find it. A clean
 * statement leaves nothing to wipe, so the change of scope costs nothing: state made where no
 * statement shows it (a function's session setting) then survives, unless the connection
 * wipes at every change (reset_always). */
typedef struct leftover_case {
    const char *leave[3];   /* run under tn_scope_a (in one transaction when txn) */
    bool txn, native;
    const char *check;      /* run under tn_scope_b ... */
    const char *want;       /* ... answers this; NULL: must fail */
    unsigned flags;         /* the leave statements' (DB_EXEC_CATALOG: vouched for) */
    bool batch;             /* leave sent in one db_exec_batch with its COMMIT (txn only) */
} leftover_case;

static void run_leftover_case(tn_db *d, const leftover_case *c, int i)
{
    char v[64];
    scope(d, "tn_scope_a");
    expect_marker(d, "a");
    if (c->txn)
        ST_OK(d, tn_db_begin(d));
    if (c->batch) {
        db_stmt st[3];
        int n = 0, failed;
        for (; n < 3 && c->leave[n] != NULL; n++)
            st[n] = (db_stmt){c->leave[n], 0, NULL, c->flags};
        ST_OK(d, db_exec_batch(d, st, n, DB_BATCH_COMMIT, NULL, &failed));
    } else {
        for (int k = 0; k < 3 && c->leave[k] != NULL; k++)
            ST_OK(d, db_exec_flags(d, c->leave[k], 0, NULL, c->flags));
        if (c->txn)
            ST_OK(d, tn_db_commit(d));
    }
    if (c->native)
        ck_assert_ptr_nonnull(tn_db_native(d));
    scope(d, "tn_scope_b");
    if (c->want == NULL) {
        ck_assert_msg(tn_db_exec(d, c->check, 0, NULL) != TN_OK, "case %d: %s answered", i,
                      c->check);
    } else {
        ST_OK(d, db_query_value(d, v, sizeof(v), c->check, 0, NULL));
        ck_assert_msg(strcmp(v, c->want) == 0, "case %d: %s: '%s', want '%s'", i, c->check, v,
                      c->want);
    }
    expect_marker(d, "b");
    ck_assert(db_is_clean(d));
}

START_TEST(test_scope_wipe_per_leftover)
{
    static const char SNEAKED[] = "SELECT coalesce(current_setting('app.sneak', true), '')";
    static const leftover_case cases[] = {
        {{"SET statement_timeout = '1234ms'"}, false, false, "SHOW statement_timeout", "7s"},
        {{"SELECT set_config('app.t', 'a', false)"}, false, false,
         "SELECT coalesce(current_setting('app.t', true), '')", ""},
        {{"CREATE TEMP TABLE leak_t AS SELECT 'a'::text AS marker"}, false, false,
         "SELECT count(*) FROM pg_catalog.pg_class "
         "WHERE relnamespace = pg_catalog.pg_my_temp_schema()", "0"},
        {{"PREPARE leak_p AS SELECT 1"}, false, false,
         "SELECT count(*) FROM pg_catalog.pg_prepared_statements", "0"},
        {{"SELECT pg_advisory_lock(4242)"}, false, false,
         "SELECT count(*) FROM pg_catalog.pg_locks "
         "WHERE locktype = 'advisory' AND pid = pg_catalog.pg_backend_pid()", "0"},
        {{"LISTEN leak_c"}, false, false,
         "SELECT count(*) FROM pg_catalog.pg_listening_channels()", "0"},
        {{"DECLARE leak_h CURSOR WITH HOLD FOR SELECT 'a'"}, true, false,
         "SELECT count(*) FROM pg_catalog.pg_cursors WHERE name = 'leak_h'", "0"},
        /* a serial's nextval: lastval() must not answer tenant a's value */
        {{"INSERT INTO counted (x) VALUES (1)"}, false, false, "SELECT lastval()", NULL},
        {{"INSERT INTO counted (x) VALUES (2)", "UPDATE counted SET x = 3"}, true, false,
         "SELECT lastval()", NULL},
        /* the native handle may have run anything */
        {{"SELECT tn_scope_a.sneak()"}, false, true, SNEAKED, ""},
        /* what no statement shows: not wiped (placement.NAME.session_reset = always is) */
        {{"SELECT tn_scope_a.sneak()"}, false, false, SNEAKED, "a"},
        /* schema DDL wipes only sequence state: a migration wave pays no DISCARD ALL per
         * tenant (the sneaked setting survives), yet a serial added to rows filled with
         * nextval leaves no lastval() behind */
        {{"SELECT tn_scope_a.sneak()", "ALTER TABLE counted ADD COLUMN note TEXT"}, false,
         false, SNEAKED, "a"},
        {{"ALTER TABLE counted ADD COLUMN n SERIAL"}, true, false, "SELECT lastval()", NULL},
        /* a DO block may run anything: wiped ... */
        {{"SELECT tn_scope_a.sneak()", "DO $x$BEGIN PERFORM 1; END$x$"}, true, false, SNEAKED,
         ""},
        /* ... unless its caller vouches that it changes the catalog only (a new tenant's
         * role and schema script: DB_EXEC_CATALOG); SET LOCAL likewise */
        {{"SELECT tn_scope_a.sneak()", "DO $x$BEGIN PERFORM 1; END$x$",
          "SET LOCAL statement_timeout = '5s'"}, true, false, SNEAKED, "a", DB_EXEC_CATALOG},
        /* the same in one batch (a new tenant's whole provision goes in one): each
         * statement is judged with its own flags */
        {{"SELECT tn_scope_a.sneak()", "DO $x$BEGIN PERFORM 1; END$x$",
          "SET LOCAL statement_timeout = '5s'"}, true, false, SNEAKED, "a", DB_EXEC_CATALOG,
         true},
        {{"SELECT tn_scope_a.sneak()", "DO $x$BEGIN PERFORM 1; END$x$"}, true, false, SNEAKED,
         "", 0, true},
        /* a vouched statement that names session state is still wiped */
        {{"SELECT tn_scope_a.sneak()",
          "DO $x$BEGIN PERFORM pg_catalog.set_config('app.t', 'a', false); END$x$"}, true,
         false, SNEAKED, "", DB_EXEC_CATALOG},
    };
    db_options o = {.statement_timeout_ms = 7000};
    tn_db *d = st_open(st_pg, &o);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        run_leftover_case(d, &cases[i], (int)i);
    db_close(d);

    /* reset_always: every change of scope wipes */
    o.reset_always = true;
    d = st_open(st_pg, &o);
    leftover_case always = {{"SELECT tn_scope_a.sneak()"}, false, false, SNEAKED, ""};
    run_leftover_case(d, &always, 0);
    db_close(d);
}
END_TEST

START_TEST(test_scope_timeout)
{
    db_options o = {.statement_timeout_ms = 150};
    tn_db *d = st_open(st_pg, &o);
    scope(d, "tn_scope_a");
    ST_EXPECT(d, TN_TIMEOUT, tn_db_exec(d, "SELECT pg_sleep(3)", 0, NULL));
    ck_assert(db_is_clean(d));
    scope(d, "tn_scope_b");
    expect_marker(d, "b");
    /* inside a transaction: failed, rolled back, and the next tenant is still itself */
    ST_OK(d, tn_db_begin(d));
    ST_OK(d, tn_db_exec(d, "INSERT INTO items VALUES ('b9')", 0, NULL));
    ST_EXPECT(d, TN_TIMEOUT, tn_db_exec(d, "SELECT pg_sleep(3)", 0, NULL));
    ck_assert(!db_is_clean(d));
    ST_OK(d, db_reset(d));
    ck_assert(db_is_clean(d));
    scope(d, "tn_scope_a");
    expect_marker(d, "a");
    scope(d, "tn_scope_b");
    expect_marker(d, "b");
    db_close(d);
}
END_TEST

START_TEST(test_scope_broken_connection)
{
    db_options o = {.statement_timeout_ms = 4000};
    tn_db *d = st_open(st_pg, &o);
    scope(d, "tn_scope_a");
    expect_marker(d, "a");
    st_kill_backend(d);
    ST_EXPECT(d, TN_IO, tn_db_exec(d, "SELECT 1", 0, NULL));
    ck_assert(!db_is_clean(d));
    ST_EXPECT(d, TN_IO, tn_db_exec(d, "SELECT 1", 0, NULL));
    uint64_t before = d->session;
    ST_OK(d, db_reset(d));
    ck_assert(db_is_clean(d));
    ck_assert_uint_gt(d->session, before);   /* a new backend */
    scope(d, "tn_scope_b");
    expect_marker(d, "b");
    char v[32];
    ST_OK(d, db_query_value(d, v, sizeof(v), "SHOW statement_timeout", 0, NULL));
    ck_assert_str_eq(v, "4s");

    /* killed inside a transaction, after its first statement */
    ST_OK(d, tn_db_begin(d));
    ST_OK(d, tn_db_exec(d, "INSERT INTO items VALUES ('b7')", 0, NULL));
    st_kill_backend(d);
    ST_EXPECT(d, TN_IO, tn_db_exec(d, "SELECT 1", 0, NULL));
    ST_EXPECT(d, TN_IO, tn_db_commit(d));
    ST_OK(d, db_reset(d));
    scope(d, "tn_scope_a");
    expect_marker(d, "a");
    /* killed between begin and the first statement (the pipeline meets the dead socket) */
    char pid[32];
    st_backend_pid(d, pid);
    ST_OK(d, tn_db_begin(d));
    st_kill_pid(pid);
    ST_EXPECT(d, TN_IO, tn_db_exec(d, "SELECT 1", 0, NULL));
    ST_OK(d, db_reset(d));
    scope(d, "tn_scope_b");
    expect_marker(d, "b");
    db_close(d);
}
END_TEST

START_TEST(test_listen_notify)
{
    tn_db *l = st_open(st_pg, NULL), *n = st_open(st_pg, NULL);
    ST_EXPECT(l, TN_INVALID, db_listen(l, "bad channel"));
    ST_OK(l, db_listen(l, "tn_events"));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ST_EXPECT(l, TN_TIMEOUT, db_wait_notify(l, 200));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    ck_assert_int_ge(ms, 150);
    ck_assert_int_lt(ms, 1500);
    /* two in one transaction: delivered together at COMMIT, consumed by one wait (two
     * separate transactions could arrive between two waits) */
    ST_OK(n, tn_db_begin(n));
    ST_OK(n, tn_db_exec(n, "NOTIFY tn_events", 0, NULL));
    ST_OK(n, tn_db_exec(n, "SELECT pg_notify('tn_events', 'x')", 0, NULL));
    ST_OK(n, tn_db_commit(n));
    ST_OK(l, db_wait_notify(l, 2000));
    ST_EXPECT(l, TN_TIMEOUT, db_wait_notify(l, 0));   /* both were consumed */
    /* one that arrives while the listener is busy with a statement is kept by libpq */
    ST_OK(n, tn_db_exec(n, "NOTIFY tn_events", 0, NULL));
    ST_OK(l, tn_db_exec(l, "SELECT pg_sleep(0.1)", 0, NULL));
    ST_OK(l, db_wait_notify(l, 0));
    /* a broken connection */
    st_kill_backend(l);
    ST_EXPECT(l, TN_IO, db_wait_notify(l, 2000));
    db_close(l);
    db_close(n);
}
END_TEST

START_TEST(test_uri_with_dbname)
{
    char out[512], err[256];
    ck_assert_int_eq(db_uri_with_dbname("postgres:host=/tmp port=5 dbname=app user=u", "t1", out,
                                        sizeof(out), err, sizeof(err)),
                     TN_OK);
    ck_assert_str_eq(out, "postgres:user='u' host='/tmp' port='5' dbname='t1'");
    ck_assert_int_eq(db_uri_with_dbname("postgresql://bob:p%27w@db.example:6432/app?sslmode=disable",
                                        "t2", out, sizeof(out), err, sizeof(err)),
                     TN_OK);
    ck_assert_msg(strstr(out, "dbname='t2'") != NULL && strstr(out, "app") == NULL &&
                      strstr(out, "password='p\\'w'") != NULL &&
                      strstr(out, "host='db.example'") != NULL &&
                      strstr(out, "port='6432'") != NULL &&
                      strstr(out, "sslmode='disable'") != NULL,
                  "%s", out);
    ck_assert_int_eq(db_uri_with_dbname("postgres:", "t3", out, sizeof(out), err, sizeof(err)),
                     TN_OK);
    ck_assert_str_eq(out, "postgres:dbname='t3'");
    ck_assert_int_eq(db_uri_with_dbname("postgres:bogus", "t", out, sizeof(out), err,
                                        sizeof(err)),
                     TN_INVALID);
    ck_assert_int_eq(db_uri_with_dbname("sqlite:/x.db", "t", out, sizeof(out), err, sizeof(err)),
                     TN_INVALID);
    ck_assert_int_eq(db_uri_with_dbname("postgres:host=/tmp", "t", out, 16, err, sizeof(err)),
                     TN_TOOBIG);
    /* the rebuilt string reaches the same server */
    ck_assert_int_eq(db_uri_with_dbname(st_pg, "postgres", out, sizeof(out), err, sizeof(err)),
                     TN_OK);
    tn_db *d = st_open(out, NULL);
    char v[64];
    ST_OK(d, db_query_value(d, v, sizeof(v), "SELECT current_database()", 0, NULL));
    ck_assert_str_eq(v, "postgres");
    db_close(d);
}
END_TEST

/* ---- targets ---------------------------------------------------------------------------------- */

static int collect(void *ctx, const char *table)
{
    char *out = ctx;
    if (out[0] != '\0')
        strcat(out, ",");
    strcat(out, table);
    return TN_OK;
}

/* Tables whose names sort against their foreign keys: parents must still come first. */
static const char FK_SCHEMA[] =
    "CREATE TABLE z_parent (id INTEGER PRIMARY KEY);"
    "CREATE TABLE m_mid (id INTEGER PRIMARY KEY, p INTEGER REFERENCES z_parent (id));"
    "CREATE TABLE a_child (id INTEGER PRIMARY KEY, m INTEGER REFERENCES m_mid (id),"
    " p INTEGER REFERENCES z_parent (id), self INTEGER REFERENCES a_child (id));"
    "CREATE TABLE b_alone (id INTEGER PRIMARY KEY);"
    "CREATE TABLE schema_version (version INTEGER)";
static const char FK_ORDER[] = "b_alone,schema_version,z_parent,m_mid,a_child";

static void check_target_kind(const storage_target *t)
{
    char err[512];
    bool exists = true;
    /* make sure it is not there from an earlier run */
    target_drop(t, err, sizeof(err));
    ck_assert_int_eq(target_exists(t, &exists, err, sizeof(err)), TN_OK);
    ck_assert(!exists);
    tn_db *d = (tn_db *)&d;
    ck_assert_int_eq(target_open(t, &d, err, sizeof(err)), TN_NOTFOUND);
    ck_assert_ptr_null(d);
    ck_assert_int_eq(target_drop(t, err, sizeof(err)), TN_NOTFOUND);

    ck_assert_msg(target_create(t, err, sizeof(err)) == TN_OK, "create: %s", err);
    ck_assert_int_eq(target_exists(t, &exists, err, sizeof(err)), TN_OK);
    ck_assert(exists);
    ck_assert_int_eq(target_create(t, err, sizeof(err)), TN_EXISTS);
    ck_assert_str_ne(err, "");

    ck_assert_msg(target_open(t, &d, err, sizeof(err)) == TN_OK, "open: %s", err);
    ST_OK(d, db_exec_script(d, FK_SCHEMA));
    ST_OK(d, tn_db_exec(d, "INSERT INTO z_parent (id) VALUES (1)", 0, NULL));
    char order[256] = "";
    ST_OK(d, target_tables(d, t, collect, order));
    ck_assert_str_eq(order, FK_ORDER);
    db_close(d);

    ck_assert_msg(target_drop(t, err, sizeof(err)) == TN_OK, "drop: %s", err);
    ck_assert_int_eq(target_exists(t, &exists, err, sizeof(err)), TN_OK);
    ck_assert(!exists);
    ck_assert_int_eq(target_drop(t, err, sizeof(err)), TN_NOTFOUND);
}

START_TEST(test_target_kinds_names)
{
    ck_assert_str_eq(target_kind_name(TARGET_SQLITE), "sqlite");
    ck_assert_str_eq(target_kind_name(TARGET_PG_SCHEMA), "schema");
    ck_assert_str_eq(target_kind_name(TARGET_PG_DATABASE), "database");
    ck_assert_ptr_null(target_kind_name((target_kind)7));
    ck_assert_int_eq(target_kind_parse("sqlite"), TARGET_SQLITE);
    ck_assert_int_eq(target_kind_parse("schema"), TARGET_PG_SCHEMA);
    ck_assert_int_eq(target_kind_parse("database"), TARGET_PG_DATABASE);
    ck_assert_int_eq(target_kind_parse("Schema"), -1);
    ck_assert_int_eq(target_kind_parse(NULL), -1);

    char err[256];
    bool exists;
    storage_target bad = {.kind = TARGET_PG_SCHEMA, .server = st_pg, .name = "no-dash"};
    ck_assert_int_eq(target_create(&bad, err, sizeof(err)), TN_INVALID);
    ck_assert_int_eq(target_exists(&bad, &exists, err, sizeof(err)), TN_INVALID);
    ck_assert_int_eq(target_drop(&bad, err, sizeof(err)), TN_INVALID);
    bad.name = "ok_name";
    bad.server = "sqlite:/x.db";
    ck_assert_int_eq(target_create(&bad, err, sizeof(err)), TN_INVALID);
    bad.server = NULL;
    ck_assert_int_eq(target_create(&bad, err, sizeof(err)), TN_INVALID);
    storage_target sq = {.kind = TARGET_SQLITE, .name = "/x?mode=ro"};
    ck_assert_int_eq(target_create(&sq, err, sizeof(err)), TN_INVALID);
    sq.name = "";
    ck_assert_int_eq(target_create(&sq, err, sizeof(err)), TN_INVALID);
    ck_assert_int_eq(target_create(NULL, err, sizeof(err)), TN_INVALID);
}
END_TEST

START_TEST(test_target_sqlite)
{
    char path[512], err[512];
    snprintf(path, sizeof(path), "%s/tenants/deep/er/t1.db", st_dir);
    storage_target t = {.kind = TARGET_SQLITE, .name = path, .sync_normal = true};
    check_target_kind(&t);
    /* the folders made on the way are 0750, the file is WAL */
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/tenants/deep", st_dir);
    struct stat st;
    ck_assert_int_eq(stat(dir, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0750);
    ck_assert_int_eq(target_create(&t, err, sizeof(err)), TN_OK);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0640);
    tn_db *d = NULL;
    ck_assert_int_eq(target_open(&t, &d, err, sizeof(err)), TN_OK);
    char v[16];
    ST_OK(d, db_query_value(d, v, sizeof(v), "PRAGMA journal_mode", 0, NULL));
    ck_assert_str_eq(v, "wal");
    ST_OK(d, db_query_value(d, v, sizeof(v), "PRAGMA synchronous", 0, NULL));
    ck_assert_str_eq(v, "1");   /* NORMAL: the target asked for it */
    ST_OK(d, tn_db_exec(d, "CREATE TABLE x (a INTEGER)", 0, NULL));
    /* drop takes the side files too, even with the file open */
    char wal[600];
    snprintf(wal, sizeof(wal), "%s-wal", path);
    ck_assert_int_eq(stat(wal, &st), 0);
    ck_assert_int_eq(target_drop(&t, err, sizeof(err)), TN_OK);
    ck_assert_int_ne(stat(wal, &st), 0);
    ck_assert_int_ne(stat(path, &st), 0);
    db_close(d);
    /* a folder that cannot be made */
    storage_target t2 = {.kind = TARGET_SQLITE, .name = "/proc/no/such/t.db"};
    ck_assert_int_eq(target_create(&t2, err, sizeof(err)), TN_IO);
    ck_assert_str_ne(err, "");
}
END_TEST

START_TEST(test_target_schema)
{
    storage_target t = {.kind = TARGET_PG_SCHEMA, .server = st_pg, .name = "tn_tgt_schema"};
    check_target_kind(&t);
    /* target_open scopes the connection; tables of another schema are not listed */
    char err[512];
    ck_assert_int_eq(target_create(&t, err, sizeof(err)), TN_OK);
    tn_db *d = NULL;
    ck_assert_int_eq(target_open(&t, &d, err, sizeof(err)), TN_OK);
    ck_assert_str_eq(db_schema_scope(d), "tn_tgt_schema");
    ST_OK(d, tn_db_exec(d, "CREATE TABLE mine (x INT)", 0, NULL));
    char order[256] = "";
    ST_OK(d, target_tables(d, &t, collect, order));
    ck_assert_str_eq(order, "mine");
    db_close(d);
    /* target_connect: the server with no scope (the bulk create scopes it per schema) */
    tn_db *s = NULL;
    ck_assert_int_eq(target_connect(&t, &s, err, sizeof(err)), TN_OK);
    ck_assert_ptr_null(db_schema_scope(s));
    ST_OK(s, db_set_schema_scope(s, "tn_tgt_schema"));
    ST_OK(s, tn_db_begin(s));   /* BEGIN + SET LOCAL search_path + the INSERT */
    ST_OK(s, tn_db_exec(s, "INSERT INTO mine VALUES (7)", 0, NULL));
    ST_OK(s, tn_db_commit(s));
    ST_OK(s, db_set_schema_scope(s, NULL));
    char v[64];
    ST_OK(s, db_query_value(s, v, sizeof(v), "SELECT x FROM tn_tgt_schema.mine", 0, NULL));
    ck_assert_str_eq(v, "7");
    ST_OK(s, db_query_value(s, v, sizeof(v), "SHOW search_path", 0, NULL));
    ck_assert_str_eq(v, "");   /* the SET LOCAL ended with its transaction */
    db_close(s);
    storage_target sq = {.kind = TARGET_SQLITE, .name = "/nonexistent-dir/x.db"};
    ck_assert_int_eq(target_connect(&sq, &s, err, sizeof(err)), TN_DECLINED);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(target_drop(&t, err, sizeof(err)), TN_OK);
}
END_TEST

/* A schema with its tenant role: made with the schema (LOGIN, its owner, the login a member);
 * one that is already there (left by a purge that could not drop it) is taken over, not a
 * failure; dropped with the schema. */
START_TEST(test_target_schema_role)
{
    tn_db *a = st_open(st_pg, NULL);
    tn_db_exec(a, "DROP SCHEMA IF EXISTS tn_tgt_role CASCADE", 0, NULL);
    tn_db_exec(a, "DROP ROLE IF EXISTS tn_tgt_role", 0, NULL);
    storage_target t = {.kind = TARGET_PG_SCHEMA, .server = st_pg, .name = "tn_tgt_role",
                        .role = "tn_tgt_role"};
    char err[512], v[64];
    const char *q = "SELECT r.rolcanlogin::text || ' ' || "
                    "(SELECT pg_catalog.pg_get_userbyid(nspowner) FROM pg_catalog.pg_namespace "
                    "WHERE nspname = 'tn_tgt_role') FROM pg_catalog.pg_roles r "
                    "WHERE r.rolname = 'tn_tgt_role'";
    for (int round = 0; round < 2; round++) {
        if (round == 1)   /* a role of that name already there, without LOGIN */
            ST_OK(a, tn_db_exec(a, "CREATE ROLE tn_tgt_role NOLOGIN", 0, NULL));
        ck_assert_msg(target_create(&t, err, sizeof(err)) == TN_OK, "round %d: %s", round, err);
        ST_OK(a, db_query_value(a, v, sizeof(v), q, 0, NULL));
        if (round == 0)
            ck_assert_str_eq(v, "true tn_tgt_role");
        else   /* taken over: it owns the schema; LOGIN is given only with a password */
            ck_assert_str_eq(v, "false tn_tgt_role");
        ck_assert_int_eq(target_drop(&t, err, sizeof(err)), TN_OK);
        ST_EXPECT(a, TN_NOTFOUND, db_query_value(a, v, sizeof(v), q, 0, NULL));
    }
    db_close(a);
}
END_TEST

/* The roles a login may become, through other roles too; a superuser says so. */
START_TEST(test_server_login_roles)
{
    tn_db *a = st_open(st_pg, NULL);
    const char *drop = "DROP ROLE IF EXISTS tn_lr_login, tn_lr_1, tn_lr_2, tn_lr_3, tn_lr_4";
    tn_db_exec(a, drop, 0, NULL);
    ST_OK(a, tn_db_exec(a, "CREATE ROLE tn_lr_login LOGIN", 0, NULL));
    ST_OK(a, tn_db_exec(a, "CREATE ROLE tn_lr_1", 0, NULL));
    ST_OK(a, tn_db_exec(a, "CREATE ROLE tn_lr_2", 0, NULL));
    ST_OK(a, tn_db_exec(a, "CREATE ROLE tn_lr_3", 0, NULL));
    ST_OK(a, tn_db_exec(a, "CREATE ROLE tn_lr_4", 0, NULL));   /* not reachable */
    ST_OK(a, tn_db_exec(a, "GRANT tn_lr_1, tn_lr_2 TO tn_lr_login", 0, NULL));
    ST_OK(a, tn_db_exec(a, "GRANT tn_lr_3 TO tn_lr_2", 0, NULL));
    ST_OK(a, tn_db_exec(a, "GRANT tn_lr_3 TO tn_lr_1", 0, NULL));   /* counted once */
    char uri[600], err[512];
    snprintf(uri, sizeof(uri), "%s user=tn_lr_login", st_pg);
    bool super = true;
    int64_t roles = -1;
    ck_assert_msg(target_server_login_roles(uri, &super, &roles, err, sizeof(err)) == TN_OK, "%s",
                  err);
    ck_assert(!super);
    ck_assert_int_eq(roles, 3);
    ck_assert_int_eq(target_server_login_roles(st_pg, &super, &roles, err, sizeof(err)), TN_OK);
    ck_assert(super);
    ST_OK(a, tn_db_exec(a, drop, 0, NULL));
    db_close(a);
}
END_TEST

static void count_problem(void *ctx, const char *problem)
{
    snprintf(ctx, 256, "%s", problem);
}

/* target_role_check of t finds `want` problems, the last of them `last` (NULL: any). */
static void expect_problems(const storage_target *t, int want, const char *last)
{
    int n = -1;
    char problem[256] = "", err[512];
    ck_assert_int_eq(target_role_check(NULL, t, &n, count_problem, problem, err, sizeof(err)),
                     TN_OK);
    ck_assert_msg(n == want, "%d problems, not %d; the last: %s", n, want, problem);
    if (last != NULL)
        ck_assert_str_eq(problem, last);
}

/* A schema with a group login (placement.NAME.login = group): the group login made with the
 * tenant's role and made a member of it (and only of its group's tenants); target_role_check
 * says when it is not a member, and target_role_repair makes it one again. */
START_TEST(test_target_schema_group)
{
    tn_db *a = st_open(st_pg, NULL);
    const char *names[] = {"tn_tgt_g1", "tn_tgt_g2", "tn_tgt_g3"};
    const char *groups[] = {"tn_tgtgrp_0", "tn_tgtgrp_0", "tn_tgtgrp_1"};
    storage_target t[3];
    char err[512], v[256];
    for (int i = 0; i < 3; i++) {
        char sql[128];
        snprintf(sql, sizeof(sql), "DROP SCHEMA IF EXISTS %s CASCADE", names[i]);
        tn_db_exec(a, sql, 0, NULL);
        snprintf(sql, sizeof(sql), "DROP ROLE IF EXISTS %s", names[i]);
        tn_db_exec(a, sql, 0, NULL);
    }
    tn_db_exec(a, "DROP ROLE IF EXISTS tn_tgtgrp_0", 0, NULL);
    tn_db_exec(a, "DROP ROLE IF EXISTS tn_tgtgrp_1", 0, NULL);
    for (int i = 0; i < 3; i++) {
        t[i] = (storage_target){.kind = TARGET_PG_SCHEMA, .server = st_pg, .name = names[i],
                                .role = names[i], .group_role = groups[i]};
        ck_assert_msg(target_create(&t[i], err, sizeof(err)) == TN_OK, "%s: %s", names[i], err);
    }
    /* each group login is a LOGIN role, a member of exactly its group's tenant roles */
    ST_OK(a, db_query_value(a, v, sizeof(v),
                            "SELECT string_agg(g.rolname || (CASE WHEN g.rolcanlogin THEN ':login' "
                            "ELSE '' END) || '>' || r.rolname, ' ' ORDER BY g.rolname, r.rolname) "
                            "FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.member "
                            "JOIN pg_roles r ON r.oid = m.roleid WHERE g.rolname LIKE 'tn\\_tgtgrp\\__'",
                            0, NULL));
    /* (and of pg_read_all_stats, as the login that made it is: a superuser here) */
    ck_assert_str_eq(v, "tn_tgtgrp_0:login>pg_read_all_stats tn_tgtgrp_0:login>tn_tgt_g1 "
                        "tn_tgtgrp_0:login>tn_tgt_g2 tn_tgtgrp_1:login>pg_read_all_stats "
                        "tn_tgtgrp_1:login>tn_tgt_g3");
    /* the dsn's user held the roles only while it made them */
    const char *held = "SELECT count(*) FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid "
                       "WHERE m.member = (SELECT oid FROM pg_roles WHERE rolname = current_user) "
                       "AND r.rolname LIKE 'tn\\_tgt\\_g_'";
    ST_OK(a, db_query_value(a, v, sizeof(v), held, 0, NULL));
    ck_assert_str_eq(v, "0");
    expect_problems(&t[0], 0, NULL);
    /* a login left a member (a tenant made before the placement had groups) is reported,
     * and a repair takes the role back */
    ST_OK(a, tn_db_exec(a, "GRANT tn_tgt_g1 TO CURRENT_USER", 0, NULL));
    expect_problems(&t[0], 1, "the host's login is still a member of its role tn_tgt_g1 (its "
                              "group login serves it; --repair-roles takes it back)");
    /* ... unless the placement is moving from the shared login (--keep-shared-login): not
     * reported, and a repair (of its group login, taken out here) leaves it a member */
    storage_target keep = t[0];
    keep.keep_host_member = true;
    expect_problems(&keep, 0, NULL);
    ST_OK(a, tn_db_exec(a, "REVOKE tn_tgt_g1 FROM tn_tgtgrp_0", 0, NULL));
    expect_problems(&keep, 1, "its group login tn_tgtgrp_0 is not a member of its role tn_tgt_g1");
    ck_assert_msg(target_role_repair(NULL, &keep, err, sizeof(err)) == TN_OK, "%s", err);
    expect_problems(&keep, 0, NULL);
    ST_OK(a, db_query_value(a, v, sizeof(v), held, 0, NULL));
    ck_assert_str_eq(v, "1");
    ck_assert_msg(target_role_repair(NULL, &t[0], err, sizeof(err)) == TN_OK, "%s", err);
    ST_OK(a, db_query_value(a, v, sizeof(v), held, 0, NULL));
    ck_assert_str_eq(v, "0");
    ST_OK(a, tn_db_exec(a, "REVOKE tn_tgt_g1 FROM tn_tgtgrp_0", 0, NULL));
    expect_problems(&t[0], 1, "its group login tn_tgtgrp_0 is not a member of its role tn_tgt_g1");
    ck_assert_msg(target_role_repair(NULL, &t[0], err, sizeof(err)) == TN_OK, "%s", err);
    expect_problems(&t[0], 0, NULL);
    /* another group login of the placement (login_groups changed) is reported, and a
     * repair lets it go */
    ST_OK(a, tn_db_exec(a, "GRANT tn_tgt_g3 TO tn_tgtgrp_0", 0, NULL));
    expect_problems(&t[2], 1, "other group logins of its placement are members of its role "
                              "tn_tgt_g3: tn_tgtgrp_0");
    ck_assert_msg(target_role_repair(NULL, &t[2], err, sizeof(err)) == TN_OK, "%s", err);
    expect_problems(&t[2], 0, NULL);
    /* a group login that may do more than a tenant is reported */
    ST_OK(a, tn_db_exec(a, "ALTER ROLE tn_tgtgrp_1 CREATEDB", 0, NULL));
    expect_problems(&t[2], 1, "its group login tn_tgtgrp_1 may do what no tenant may (superuser, "
                              "CREATEROLE, CREATEDB, REPLICATION or BYPASSRLS)");
    /* a missing group login is reported, and a repair makes it */
    ST_OK(a, tn_db_exec(a, "DROP ROLE tn_tgtgrp_1", 0, NULL));
    expect_problems(&t[2], 1, "its group login tn_tgtgrp_1 does not exist ('tenancy check "
                              "--repair-roles' makes it)");
    ck_assert_msg(target_role_repair(NULL, &t[2], err, sizeof(err)) == TN_OK, "%s", err);
    expect_problems(&t[2], 0, NULL);
    /* a group login is only for a schema with a role of its own */
    storage_target bad = t[0];
    bad.login_as_role = true;
    ck_assert_int_eq(target_create(&bad, err, sizeof(err)), TN_INVALID);
    bad = t[0];
    bad.role = NULL;
    ck_assert_int_eq(target_create(&bad, err, sizeof(err)), TN_INVALID);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(target_drop(&t[i], err, sizeof(err)), TN_OK);
    ST_OK(a, tn_db_exec(a, "DROP ROLE tn_tgtgrp_0", 0, NULL));
    ST_OK(a, tn_db_exec(a, "DROP ROLE tn_tgtgrp_1", 0, NULL));
    db_close(a);
}
END_TEST

START_TEST(test_target_database)
{
    storage_target t = {.kind = TARGET_PG_DATABASE, .server = st_pg, .name = "tn_tgt_db"};
    check_target_kind(&t);
    char err[512];
    ck_assert_int_eq(target_create(&t, err, sizeof(err)), TN_OK);
    tn_db *d = NULL;
    ck_assert_int_eq(target_open(&t, &d, err, sizeof(err)), TN_OK);
    char v[64];
    ST_OK(d, db_query_value(d, v, sizeof(v), "SELECT current_database()", 0, NULL));
    ck_assert_str_eq(v, "tn_tgt_db");
    ck_assert_str_eq(db_schema_scope(d), "public");
    /* a connection still open does not stop the drop */
    ck_assert_msg(target_drop(&t, err, sizeof(err)) == TN_OK, "%s", err);
    ST_EXPECT(d, TN_IO, tn_db_exec(d, "SELECT 1", 0, NULL));
    db_close(d);
    /* the server URI's own database is never dropped */
    storage_target own = {.kind = TARGET_PG_DATABASE, .server = st_pg, .name = "tenancy_test"};
    ck_assert_int_eq(target_drop(&own, err, sizeof(err)), TN_INVALID);
}
END_TEST

/* A folder's SQLite targets: none while it is not there (TN_NOTFOUND), none in an empty one
 * (the sort is not given the list that was never allocated), then the prefix's *.db regular
 * files in name order. */
START_TEST(test_inventory_sqlite)
{
    char dir[300], path[400], err[512], seen[1024] = "";
    snprintf(dir, sizeof(dir), "%s/inventory", st_dir);
    ck_assert_int_eq(inventory_list(TARGET_SQLITE, dir, "t_", collect, seen, err, sizeof(err)),
                     TN_NOTFOUND);
    ck_assert_int_eq(mkdir(dir, 0750), 0);
    ck_assert_msg(inventory_list(TARGET_SQLITE, dir, "t_", collect, seen, err, sizeof(err)) ==
                      TN_OK, "%s", err);
    ck_assert_str_eq(seen, "");
    const char *files[] = {"t_b.db", "t_a.db", "other.db", "t_c.txt"};
    for (size_t i = 0; i < TN_ARRAY_LEN(files); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fclose(f);
    }
    snprintf(path, sizeof(path), "%s/t_dir.db", dir);
    ck_assert_int_eq(mkdir(path, 0750), 0);
    ck_assert_msg(inventory_list(TARGET_SQLITE, dir, "t_", collect, seen, err, sizeof(err)) ==
                      TN_OK, "%s", err);
    char want[1024];
    snprintf(want, sizeof(want), "%s/t_a.db,%s/t_b.db", dir, dir);
    ck_assert_str_eq(seen, want);
}
END_TEST

/* ---- suites ---------------------------------------------------------------------------------- */

Suite *target_suite(void);
Suite *target_suite(void)
{
    Suite *s = suite_create("target");
    TCase *tc = tcase_create("scope");
    tcase_add_checked_fixture(tc, setup_schemas, NULL);
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, test_scope_basics);
    tcase_add_test(tc, test_scope_transactions);
    tcase_add_test(tc, test_scope_batch);
    tcase_add_test(tc, test_scope_autocommit_error);
    tcase_add_test(tc, test_scope_session_wiped);
    tcase_add_test(tc, test_scope_role_change_wiped);
    tcase_add_test(tc, test_scope_wipe_per_leftover);
    tcase_add_test(tc, test_scope_timeout);
    tcase_add_test(tc, test_scope_broken_connection);
    tcase_add_test(tc, test_listen_notify);
    tcase_add_test(tc, test_uri_with_dbname);
    suite_add_tcase(s, tc);
    tc = tcase_create("targets");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_target_kinds_names);
    tcase_add_test(tc, test_target_sqlite);
    tcase_add_test(tc, test_target_schema);
    tcase_add_test(tc, test_target_schema_role);
    tcase_add_test(tc, test_target_schema_group);
    tcase_add_test(tc, test_server_login_roles);
    tcase_add_test(tc, test_target_database);
    tcase_add_test(tc, test_inventory_sqlite);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * check_catalog.c — db_describe, db_describe_tables and the sandboxed, capped query
 * (storage/catalog.c, readonly.c, sqlite_read.c) on both backends: SQLite in main.c's
 * temporary folder, PostgreSQL in run.sh's throwaway cluster, in a schema of their own.
 */
#include "core/first.h"
#include "storage/db.h"
#include "tests/unit/check_common.h"
#include "tests/unit/storage/storage_test.h"

#include <stdlib.h>

/* The same two tables in both dialects: a parent, and a child with a foreign key, a
 * boolean, a default, a unique index and an index on an expression. */
static const char SCHEMA_SQL[] =
    "CREATE TABLE parent (id integer PRIMARY KEY, name text NOT NULL DEFAULT 'x');"
    "CREATE TABLE child (id integer PRIMARY KEY, pid integer REFERENCES parent (id),"
    " flag boolean, v text);"
    "CREATE UNIQUE INDEX child_v ON child (v);"
    "CREATE INDEX child_lower ON child (lower(v));"
    "INSERT INTO parent (id, name) VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e');";

#define PG_SCHEMA "tn_catalog_t"
#define PG_READER "tn_catalog_reader"

/* A connection to the two tables: SQLite's file (read-only when ro), or the PostgreSQL
 * schema made afresh (ro: logged in as a plain role that may only read it). */
static tn_db *open_tables(bool pg, bool ro)
{
    if (!pg) {
        char uri[400];
        snprintf(uri, sizeof(uri), "sqlite:%s/catalog.db", st_dir);
        tn_db *w = st_open(uri, NULL);
        char v[16];
        if (db_query_value(w, v, sizeof(v), "SELECT count(*) FROM sqlite_master WHERE "
                                            "name = 'child'", 0, NULL) == TN_OK &&
            strcmp(v, "0") == 0)
            ST_OK(w, db_exec_script(w, SCHEMA_SQL));
        if (!ro)
            return w;
        db_close(w);
        snprintf(uri, sizeof(uri), "sqlite:%s/catalog.db?mode=ro", st_dir);
        db_options o = {.read_only = true};
        return st_open(uri, &o);
    }
    tn_db *admin = st_open(st_pg, NULL);
    ST_OK(admin, db_exec_script(admin, "DROP SCHEMA IF EXISTS " PG_SCHEMA " CASCADE;"
                                       "CREATE SCHEMA " PG_SCHEMA ";"
                                       "DROP ROLE IF EXISTS " PG_READER ";"
                                       "CREATE ROLE " PG_READER " LOGIN;"
                                       "GRANT USAGE ON SCHEMA " PG_SCHEMA " TO " PG_READER ";"
                                       "SET search_path TO " PG_SCHEMA ";"));
    ST_OK(admin, db_exec_script(admin, SCHEMA_SQL));
    ST_OK(admin, db_exec_script(admin, "GRANT SELECT ON ALL TABLES IN SCHEMA " PG_SCHEMA
                                       " TO " PG_READER ";"
                                       "ANALYZE " PG_SCHEMA ".parent;"));
    if (!ro)
        return admin;
    db_close(admin);
    char uri[1024], err[256];
    int rc = db_uri_with(st_pg, NULL, PG_READER, NULL, uri, sizeof(uri), err, sizeof(err));
    ck_assert_msg(rc == TN_OK, "db_uri_with: %s", err);
    return st_open(uri, NULL);
}

static const char *schema_of(bool pg)
{
    return pg ? PG_SCHEMA : NULL;
}

static const db_index *index_named(const db_table_desc *d, const char *name)
{
    for (int i = 0; i < d->nidx; i++)
        if (strcmp(d->idx[i].name, name) == 0)
            return &d->idx[i];
    return NULL;
}

static void describe_case(bool pg)
{
    tn_db *d = open_tables(pg, false);
    arena *a = arena_create(0);
    db_table_desc *t = NULL;
    ST_OK(d, db_describe(d, schema_of(pg), "child", a, &t));
    ck_assert_str_eq(t->backend, pg ? "postgres" : "sqlite");
    ck_assert_int_eq(t->ncols, 4);
    ck_assert_str_eq(t->cols[0].name, "id");
    ck_assert_int_eq(t->cols[0].pk, 1);
    ck_assert_int_eq(t->cols[1].pk, 0);
    ck_assert(t->cols[2].boolean);
    ck_assert(!t->cols[3].notnull);
    /* SQLite: INTEGER PRIMARY KEY is the rowid; PostgreSQL: a plain integer is no identity */
    ck_assert(t->cols[0].identity == !pg);
    const db_index *u = index_named(t, "child_v"), *e = index_named(t, "child_lower");
    ck_assert_ptr_nonnull(u);
    ck_assert(u->unique && u->plain && !u->primary);
    ck_assert_int_eq(u->ncols, 1);
    ck_assert_str_eq(u->cols[0], "v");
    ck_assert_ptr_nonnull(e);
    ck_assert(!e->plain && !e->unique);
    /* PostgreSQL's primary key has an index of its own; SQLite's rowid does not */
    ck_assert_int_eq(t->nidx, pg ? 3 : 2);
    ck_assert_int_eq(t->nfkeys, 1);
    ck_assert_msg(strstr(t->fkeys[0].def, "REFERENCES parent") != NULL, "%s", t->fkeys[0].def);

    ST_OK(d, db_describe(d, schema_of(pg), "parent", a, &t));
    ck_assert_int_eq(t->ncols, 2);
    ck_assert(t->cols[1].notnull);
    ck_assert_msg(t->cols[1].dflt != NULL && strstr(t->cols[1].dflt, "'x'") != NULL, "%s",
                  t->cols[1].dflt ? t->cols[1].dflt : "NULL");
    ck_assert_int_eq(t->rows_estimate, pg ? 5 : -1);

    ST_EXPECT(d, TN_NOTFOUND, db_describe(d, schema_of(pg), "nosuch", a, &t));
    ck_assert_ptr_null(t);
    if (pg) /* another schema's table is not this one's */
        ST_EXPECT(d, TN_NOTFOUND, db_describe(d, "public", "child", a, &t));
    else
        ST_EXPECT(d, TN_INVALID, db_describe(d, "other", "child", a, &t));
    arena_destroy(a);
    db_close(d);
}

START_TEST(describe_sqlite) { describe_case(false); }
END_TEST

START_TEST(describe_pg) { describe_case(true); }
END_TEST

static int collect(void *ctx, const char *table, const char *parent)
{
    char *out = ctx;
    size_t n = strlen(out);
    snprintf(out + n, 256 - n, "%s%s>%s", n ? " " : "", table, parent ? parent : "-");
    return TN_OK;
}

static void tables_case(bool pg)
{
    tn_db *d = open_tables(pg, false);
    char seen[256] = "";
    ST_OK(d, db_describe_tables(d, schema_of(pg), collect, seen));
    ck_assert_str_eq(seen, "child>parent parent>-");
    db_close(d);
}

START_TEST(tables_sqlite) { tables_case(false); }
END_TEST

START_TEST(tables_pg) { tables_case(true); }
END_TEST

/* db_schema_exists: the tenant's own schema yes, a name that is not there no (with a
 * message), and on SQLite only "main". */
static void schema_exists_case(bool pg)
{
    tn_db *d = open_tables(pg, true);
    ST_OK(d, db_schema_exists(d, pg ? PG_SCHEMA : "main"));
    ck_assert_int_eq(db_schema_exists(d, "tn_catalog_absent"), TN_NOTFOUND);
    ck_assert(strstr(tn_db_error(d), "no such schema") != NULL);
    ck_assert_int_eq(db_schema_exists(d, NULL), TN_INVALID);
    db_close(d);
}

START_TEST(schema_exists_sqlite) { schema_exists_case(false); }
END_TEST

START_TEST(schema_exists_pg) { schema_exists_case(true); }
END_TEST

/* One capped query: its code, and the message when it failed. */
static int capped(tn_db *d, bool pg, const char *sql, int cap, int64_t timeout_ms, arena *a,
                  db_result **r)
{
    db_read_opts o = {.timeout_ms = timeout_ms, .schema = schema_of(pg)};
    int rc = db_query_capped(d, sql, 0, NULL, cap, &o, a, r);
    ck_assert(db_is_clean(d));   /* whatever happened, nothing is left open */
    return rc;
}

/* Each statement of sql[] refused by the SQLite console (TN_DENIED), for the reason its
 * message names: the refusal must come from the check the caller means, not a later one. */
static void refused_each(tn_db *d, const char *const *sql, size_t n, const char *reason,
                         arena *a, db_result **r)
{
    for (size_t i = 0; i < n; i++) {
        int rc = capped(d, false, sql[i], 10, 5000, a, r);
        ck_assert_msg(rc == TN_DENIED && strstr(tn_db_error(d), reason) != NULL,
                      "%s = %s, want refused (%s): %s", sql[i], tn_rc_str(rc), reason,
                      tn_db_error(d));
    }
}

static void capped_case(bool pg)
{
    tn_db *d = open_tables(pg, true);
    arena *a = arena_create(0);
    db_result *r = NULL;
    ST_OK(d, capped(d, pg, "SELECT id, name, NULL AS n FROM parent ORDER BY id", 3, 5000, a,
                    &r));
    ck_assert_int_eq(r->ncols, 3);
    ck_assert_str_eq(r->cols[1], "name");
    ck_assert_int_eq(r->nrows, 3);
    ck_assert(r->truncated);
    ck_assert_str_eq(r->rows[2][1], "c");
    ck_assert_ptr_null(r->rows[0][2]);
    ST_OK(d, capped(d, pg, "SELECT count(*) FROM parent", 3, 5000, a, &r));
    ck_assert(!r->truncated);
    ck_assert_str_eq(r->rows[0][0], "5");

    /* refused, each with the database's own error */
    ST_EXPECT(d, TN_DENIED, capped(d, pg, "DELETE FROM parent", 10, 5000, a, &r));
    ck_assert_ptr_null(r);
    ST_EXPECT(d, TN_DENIED, capped(d, pg, "UPDATE parent SET name = 'z'", 10, 5000, a, &r));
    const char *endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
                          "SELECT count(*) FROM n";
    ST_EXPECT(d, TN_TIMEOUT, capped(d, pg, endless, 10, 100, a, &r));
    if (!pg) {
        ST_EXPECT(d, TN_DENIED, capped(d, pg, "SELECT fts3_tokenizer('simple')", 10, 5000, a,
                                       &r));
        ck_assert_msg(strstr(tn_db_error(d), "not authorized") != NULL, "%s", tn_db_error(d));
        ST_EXPECT(d, TN_DENIED, capped(d, pg, "SELECT randomblob(10)", 10, 5000, a, &r));
        /* the built-ins left off the allow list on purpose (sqlite_read.c says why), each
         * refused by name: one added to the list by mistake is caught here */
        static const char *const left_out[] = {
            "SELECT zeroblob(10)", "SELECT changes()", "SELECT total_changes()",
            "SELECT last_insert_rowid()", "SELECT sqlite_compileoption_used('THREADSAFE')",
            "SELECT sqlite_compileoption_get(0)", "SELECT sqlite_source_id()"};
        refused_each(d, left_out, TN_ARRAY_LEN(left_out), "not authorized", a, &r);
        ST_EXPECT(d, TN_DENIED, capped(d, pg, "SELECT 1; SELECT 2", 10, 5000, a, &r));
        ST_EXPECT(d, TN_DENIED, capped(d, pg, "ATTACH 'x.db' AS x", 10, 5000, a, &r));
        ST_EXPECT(d, TN_DENIED, capped(d, pg, "PRAGMA trusted_schema = 1", 10, 5000, a, &r));
        /* settings the console may read are refused with a value, by the authorizer: one
         * changes the connection a later read runs on, the other would write the file */
        static const char *const sets[] = {"PRAGMA foreign_keys = OFF",
                                           "PRAGMA user_version = 5"};
        refused_each(d, sets, TN_ARRAY_LEN(sets), "with a value", a, &r);
        ST_OK(d, capped(d, pg, "PRAGMA foreign_keys", 10, 5000, a, &r));
        /* a write is refused twice over: by the authorizer when it is prepared, and by
         * sqlite3_stmt_readonly after. The authorizer's refusal must stand on its own, so it
         * is the one that answers (its reason in the message), not the later check. */
        static const char *const writes[] = {"UPDATE parent SET name = 'z'",
                                             "DELETE FROM parent",
                                             "INSERT INTO parent (name) VALUES ('z')"};
        refused_each(d, writes, TN_ARRAY_LEN(writes), "only reads", a, &r);
        ST_OK(d, capped(d, pg, "PRAGMA table_info(parent)", 10, 5000, a, &r));
        ck_assert_int_eq(r->nrows, 2);
        /* the driver's own authorizer is back: randomblob() runs, ATTACH is still denied */
        char v[16];
        ST_OK(d, db_query_value(d, v, sizeof(v), "SELECT length(randomblob(4))", 0, NULL));
        ST_EXPECT(d, TN_DENIED, tn_db_exec(d, "ATTACH 'x.db' AS x", 0, NULL));
    } else {
        ST_EXPECT(d, TN_DENIED, capped(d, pg, "SELECT pg_catalog.lo_create(0)", 10, 5000, a,
                                       &r));
        ST_EXPECT(d, TN_INVALID, capped(d, pg, "SELECT 1; SELECT 2", 10, 5000, a, &r));
        /* a superuser login is refused by the sandbox before the statement runs */
        tn_db *su = st_open(st_pg, NULL);
        ST_EXPECT(su, TN_DENIED, capped(su, pg, "SELECT 1", 10, 5000, a, &r));
        ck_assert_msg(strstr(tn_db_error(su), "superuser") != NULL, "%s", tn_db_error(su));
        /* and so is a role that was made a member of one of the predefined roles that reach
         * outside the database (server files, server programs, other sessions' backends):
         * each on its own, then taken back, after which the same login runs again */
        static const char *const outside[] = {"pg_execute_server_program",
                                              "pg_read_server_files", "pg_write_server_files",
                                              "pg_signal_backend"};
        for (size_t i = 0; i < TN_ARRAY_LEN(outside); i++) {
            char sql[200];
            snprintf(sql, sizeof(sql), "GRANT %s TO " PG_READER, outside[i]);
            ST_OK(su, db_exec_script(su, sql));
            int rc = capped(d, pg, "SELECT 1", 10, 5000, a, &r);
            ck_assert_msg(rc == TN_DENIED && strstr(tn_db_error(d), outside[i]) != NULL,
                          "a member of %s = %s, want denied: %s", outside[i], tn_rc_str(rc),
                          tn_db_error(d));
            snprintf(sql, sizeof(sql), "REVOKE %s FROM " PG_READER, outside[i]);
            ST_OK(su, db_exec_script(su, sql));
            ST_OK(d, capped(d, pg, "SELECT 1", 10, 5000, a, &r));
        }
        db_close(su);
    }
    arena_destroy(a);
    db_close(d);
}

/* Parameters: bound as text, NULL as SQL NULL, through the cursor on PostgreSQL; on SQLite
 * only $1..$n, and a number past the count is refused rather than read as NULL. */
static void capped_params_case(bool pg)
{
    tn_db *d = open_tables(pg, true);
    arena *a = arena_create(0);
    db_read_opts o = {.timeout_ms = 5000, .schema = schema_of(pg)};
    db_result *r = NULL;
    const char *p[] = {"b", NULL};
    ST_OK(d, db_query_capped(d, "SELECT id, name FROM parent WHERE name >= $1 ORDER BY id", 1,
                             p, 2, &o, a, &r));
    ck_assert_int_eq(r->nrows, 2);
    ck_assert(r->truncated);
    ck_assert_str_eq(r->rows[0][1], "b");
    ST_OK(d, db_query_capped(d, pg ? "SELECT $2::text IS NULL, $1::text" : "SELECT $2 IS NULL, $1", 2, p, 10, &o, a, &r));
    ck_assert_str_eq(r->rows[0][1], "b");
    ck_assert_str_eq(r->rows[0][0], pg ? "t" : "1");
    if (!pg) {
        ST_EXPECT(d, TN_INVALID, db_query_capped(d, "SELECT $2", 1, p, 10, &o, a, &r));
        ST_EXPECT(d, TN_INVALID, db_query_capped(d, "SELECT ?", 1, p, 10, &o, a, &r));
        ST_EXPECT(d, TN_INVALID, db_query_capped(d, "SELECT :x", 1, p, 10, &o, a, &r));
    } else {
        ck_assert_int_ne(db_query_capped(d, "SELECT $2", 1, p, 10, &o, a, &r), TN_OK);
    }
    ST_EXPECT(d, TN_DENIED, db_query_capped(d, "DELETE FROM parent WHERE name = $1", 1, p, 10,
                                            &o, a, &r));
    ck_assert(db_is_clean(d));
    arena_destroy(a);
    db_close(d);
}

START_TEST(capped_params_sqlite) { capped_params_case(false); }
END_TEST

START_TEST(capped_params_pg) { capped_params_case(true); }
END_TEST

START_TEST(capped_sqlite) { capped_case(false); }
END_TEST

START_TEST(capped_pg) { capped_case(true); }
END_TEST

/* db_read_begin's deadline, then db_read_end lifts it. */
START_TEST(read_deadline_sqlite)
{
    tn_db *d = open_tables(false, true);
    db_read_opts o = {.timeout_ms = 100};
    ST_OK(d, db_read_begin(d, &o));
    char v[32];
    ST_EXPECT(d, TN_TIMEOUT,
              db_query_value(d, v, sizeof(v),
                             "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                             "WHERE i < 100000000) SELECT count(*) FROM n", 0, NULL));
    db_read_end(d);
    ST_OK(d, db_query_value(d, v, sizeof(v),
                            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                            "WHERE i < 300000) SELECT count(*) FROM n", 0, NULL));
    ck_assert_str_eq(v, "300000");
    db_close(d);
}
END_TEST

Suite *catalog_suite(void);
Suite *catalog_suite(void)
{
    Suite *s = suite_create("catalog");
    TCase *tc = tcase_create("both");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, describe_sqlite);
    tcase_add_test(tc, describe_pg);
    tcase_add_test(tc, tables_sqlite);
    tcase_add_test(tc, tables_pg);
    tcase_add_test(tc, schema_exists_sqlite);
    tcase_add_test(tc, schema_exists_pg);
    tcase_add_test(tc, capped_sqlite);
    tcase_add_test(tc, capped_pg);
    tcase_add_test(tc, capped_params_sqlite);
    tcase_add_test(tc, capped_params_pg);
    tcase_add_test(tc, read_deadline_sqlite);
    suite_add_tcase(s, tc);
    return s;
}

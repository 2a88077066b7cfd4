/*
 * check_migrate.c — storage/migrate: loading a migration folder, applying it to one target
 * (a SQLite file; a PostgreSQL schema through the connection's schema scope), resuming after
 * a failure, checksums, seeds that bind only what each statement uses, and template clones.
 *
 * The shared cases run on both backends with SQL that means the same on both. On PostgreSQL
 * each test gets two fresh schemas (tn_mig_a, the target, and tn_mig_b, a neighbour that
 * must stay untouched) and a connection scoped to tn_mig_a, as target_open gives one.
 */
#include "core/first.h"
#include "storage/migrate.h"
#include "core/rc.h"
#include "storage/db.h"
#include "storage/db_int.h"   /* db_sql_bind_used, db_uri_with_dbname */

#include <check.h>
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char root[256];         /* made by migrate_tests_init, removed by migrate_tests_fini */
static const char *pg_uri;
static bool backend_pg;
static char dir[512];          /* this test's migration folder */
static char file_db[512];      /* SQLite: this test's target */
static tn_db *db;              /* the target's connection */
static tn_db *adm;             /* PostgreSQL: an unscoped connection for setup and checks */

#define EXPECT(d, want, expr)                                                                \
    do {                                                                                     \
        int rc_ = (expr);                                                                    \
        ck_assert_msg(rc_ == (want), "%s = %s, want %s: %s", #expr, tn_rc_str(rc_),          \
                      tn_rc_str(want), tn_db_error(d));                                      \
    } while (0)
#define OK(expr) EXPECT(db, TN_OK, expr)

/* ---- fixtures ----------------------------------------------------------------------------- */

static tn_db *open_uri(const char *u)
{
    tn_db *d = NULL;
    char err[512];
    int rc = db_open(u, NULL, &d, err, sizeof(err));
    ck_assert_msg(rc == TN_OK, "db_open: %s: %s", tn_rc_str(rc), err);
    return d;
}

/* A connection to the target, as target_open gives one. */
static tn_db *open_target(void)
{
    if (!backend_pg)
        return open_uri(file_db);
    tn_db *d = open_uri(pg_uri);
    EXPECT(d, TN_OK, db_set_schema_scope(d, "tn_mig_a"));
    return d;
}

static void new_dir(void)
{
    static int n;
    snprintf(dir, sizeof(dir), "%s/m-%ld-%d", root, (long)getpid(), ++n);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
}

static void setup_sqlite(void)
{
    static int n;
    backend_pg = false;
    new_dir();
    snprintf(file_db, sizeof(file_db), "sqlite:%s/t-%ld-%d.db", root, (long)getpid(), ++n);
    db = open_target();
}

static void setup_pg(void)
{
    backend_pg = true;
    new_dir();
    adm = open_uri(pg_uri);
    /* public emptied too: the cases check that nothing lands there, and other suites of
     * this program leave a public.items behind on the same database */
    EXPECT(adm, TN_OK, db_exec_script(adm, "DROP SCHEMA IF EXISTS tn_mig_a CASCADE;"
                                           "DROP SCHEMA IF EXISTS tn_mig_b CASCADE;"
                                           "DROP SCHEMA public CASCADE; CREATE SCHEMA public;"
                                           "CREATE SCHEMA tn_mig_a; CREATE SCHEMA tn_mig_b"));
    db = open_target();
}

static void teardown(void)
{
    db_close(db);
    db = NULL;
    db_close(adm);
    adm = NULL;
}

static void put(const char *name, const char *text)
{
    char path[700];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static migration_set *load(void)
{
    migration_set *s = NULL;
    char err[512];
    int rc = migrate_load(dir, &s, err, sizeof(err));
    ck_assert_msg(rc == TN_OK, "migrate_load: %s: %s", tn_rc_str(rc), err);
    return s;
}

static long count(tn_db *d, const char *sql)
{
    char v[32];
    EXPECT(d, TN_OK, db_query_value(d, v, sizeof(v), sql, 0, NULL));
    return strtol(v, NULL, 10);
}

static bool has_table(tn_db *d, const char *table)
{
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", table);
    char v[32];
    int rc = db_query_value(d, v, sizeof(v), sql, 0, NULL);
    ck_assert_msg(rc == TN_OK || rc == TN_INVALID, "%s: %s", sql, tn_db_error(d));
    return rc == TN_OK;
}

static void apply_ok(const migration_set *s, migrate_result *r)
{
    int rc = migrate_apply(db, s, r);
    ck_assert_msg(rc == TN_OK, "migrate_apply: %s: %s statement %d: %s", tn_rc_str(rc),
                  r->error.file, r->error.statement, r->error.message);
    ck_assert(db_is_clean(db));
}

static const char *const m1 = "-- the first\nCREATE TABLE items (id INTEGER PRIMARY KEY, "
                              "name TEXT NOT NULL);\nCREATE INDEX items_name ON items (name);\n";
static const char *const m2 = "CREATE TABLE tags (id INTEGER PRIMARY KEY, label TEXT);\n"
                              "INSERT INTO tags (id, label) VALUES (1, 'a;b');\n";
static const char *const m3 = "ALTER TABLE items ADD COLUMN note TEXT;";

/* ---- shared cases --------------------------------------------------------------------------- */

/* The first file applied, as a tenant that a later file finds one version behind. */
static void first_applied(void)
{
    put("0001_items.sql", m1);
    migration_set *s = load();
    migrate_result r;
    apply_ok(s, &r);
    migrate_free(s);
}

START_TEST(test_apply_and_resume)
{
    put("0001_items.sql", m1);
    put("0002_tags.sql", m2);
    put("0003_note.sql", m3);
    migration_set *s = load();
    migrate_result r;
    apply_ok(s, &r);
    ck_assert_str_eq(r.from, "");
    ck_assert_str_eq(r.to, "0003");
    ck_assert_int_eq(r.applied, 3);
    ck_assert_int_eq(r.pending, 0);
    ck_assert_int_eq(r.nwarnings, 0);
    ck_assert_int_eq(count(db, "SELECT count(*) FROM tenancy_migrations"), 3);
    char v[80];
    const char *p[] = {"0002"};
    OK(db_query_value(db, v, sizeof(v), "SELECT name FROM tenancy_migrations WHERE version = $1",
                      1, p));
    ck_assert_str_eq(v, "tags");
    OK(db_query_value(db, v, sizeof(v),
                      "SELECT checksum FROM tenancy_migrations WHERE version = $1", 1, p));
    ck_assert_str_eq(v, migrate_at(s, 1)->checksum);
    OK(tn_db_exec(db, "INSERT INTO items (id, name, note) VALUES (1, 'x', 'y')", 0, NULL));
    ck_assert_int_eq(count(db, "SELECT count(*) FROM tags WHERE label = 'a;b'"), 1);

    /* Up to date: nothing applied, nothing warned. */
    apply_ok(s, &r);
    ck_assert_str_eq(r.from, "0003");
    ck_assert_str_eq(r.to, "0003");
    ck_assert_int_eq(r.applied, 0);
    char cur[MIGRATE_VERSION_MAX];
    migrate_error e;
    OK(migrate_current(db, cur, sizeof(cur), &e));
    ck_assert_str_eq(cur, "0003");
    migrate_free(s);

    /* A new file: only it is applied. */
    put("0004_more.sql", "CREATE TABLE more (id INTEGER);");
    s = load();
    apply_ok(s, &r);
    ck_assert_str_eq(r.from, "0003");
    ck_assert_str_eq(r.to, "0004");
    ck_assert_int_eq(r.applied, 1);
    migrate_free(s);
}
END_TEST

/* A new storage in one transaction: every file with its version row, then the seed; after
 * it, migrate_apply has nothing to do. */
START_TEST(test_provision_all_in_one)
{
    put("0001_items.sql", m1);
    put("0002_tags.sql", m2);
    migration_set *s = load();
    const char *vals[] = {"acme", "Acme Inc"};
    migrate_result r;
    int rc = migrate_provision(db, NULL, s, "seed.sql",
                               "INSERT INTO items (id, name) VALUES (1, $2);\n"
                               "INSERT INTO tags (id, label) VALUES (2, $1);\n", 2, vals, &r);
    ck_assert_msg(rc == TN_OK, "migrate_provision: %s: %s statement %d: %s", tn_rc_str(rc),
                  r.error.file, r.error.statement, r.error.message);
    ck_assert(db_is_clean(db));
    ck_assert_str_eq(r.to, "0002");
    ck_assert_int_eq(r.applied, 2);
    ck_assert_int_eq(r.pending, 0);
    ck_assert(!r.seed_failed);
    ck_assert_int_eq(count(db, "SELECT count(*) FROM tenancy_migrations"), 2);
    ck_assert_int_eq(count(db, "SELECT count(*) FROM items WHERE name = 'Acme Inc'"), 1);
    ck_assert_int_eq(count(db, "SELECT count(*) FROM tags WHERE label = 'acme'"), 1);
    char v[80];
    const char *p[] = {"0001"};
    OK(db_query_value(db, v, sizeof(v),
                      "SELECT checksum FROM tenancy_migrations WHERE version = $1", 1, p));
    ck_assert_str_eq(v, migrate_at(s, 0)->checksum);
    apply_ok(s, &r);
    ck_assert_str_eq(r.from, "0002");
    ck_assert_int_eq(r.applied, 0);
    /* not on a storage that has a version table already: refused, nothing changed */
    rc = migrate_provision(db, NULL, s, "seed.sql", "INSERT INTO tags (id) VALUES (3);", 0, NULL, &r);
    ck_assert_int_ne(rc, TN_OK);
    ck_assert(db_is_clean(db));
    ck_assert_int_eq(count(db, "SELECT count(*) FROM tags"), 2);
    migrate_free(s);
}
END_TEST

/* All or nothing: a failing seed takes the migrations with it, and says it was the seed; a
 * failing file takes the files before it. */
START_TEST(test_provision_rolls_back_everything)
{
    put("0001_items.sql", m1);
    put("0002_tags.sql", m2);
    migration_set *s = load();
    migrate_result r;
    int rc = migrate_provision(db, NULL, s, "seed.sql",
                               "INSERT INTO tags (id, label) VALUES (5, 'x');\n"
                               "INSERT INTO items (id, name) VALUES (1, NULL);\n", 0, NULL, &r);
    ck_assert_int_eq(rc, TN_INVALID);
    ck_assert(db_is_clean(db));
    ck_assert(r.seed_failed);
    ck_assert_str_eq(r.error.file, "seed.sql");
    ck_assert_int_eq(r.error.statement, 2);
    ck_assert_str_eq(r.to, "");
    ck_assert_int_eq(r.applied, 0);
    ck_assert(!has_table(db, "tenancy_migrations"));
    ck_assert(!has_table(db, "items"));
    ck_assert(!has_table(db, "tags"));
    migrate_free(s);

    put("0003_bad.sql", "CREATE TABLE extra (id INTEGER);\nINSERT INTO nowhere VALUES (1);\n");
    s = load();
    rc = migrate_provision(db, NULL, s, "seed.sql", "INSERT INTO tags (id) VALUES (1);", 0, NULL, &r);
    ck_assert_int_ne(rc, TN_OK);
    ck_assert(db_is_clean(db));
    ck_assert(!r.seed_failed);
    ck_assert_str_eq(r.error.file, "0003_bad.sql");
    ck_assert_int_eq(r.error.statement, 2);
    ck_assert_str_eq(r.to, "");
    ck_assert(!has_table(db, "tenancy_migrations"));
    ck_assert(!has_table(db, "items"));
    ck_assert(!has_table(db, "extra"));
    /* and the storage takes them afterwards as if nothing had happened */
    char path[700];
    snprintf(path, sizeof(path), "%s/0003_bad.sql", dir);
    ck_assert_int_eq(unlink(path), 0);
    migrate_free(s);
    s = load();
    rc = migrate_provision(db, NULL, s, NULL, NULL, 0, NULL, &r);
    ck_assert_int_eq(rc, TN_OK);
    ck_assert_int_eq(count(db, "SELECT count(*) FROM tenancy_migrations"), 2);
    migrate_free(s);
}
END_TEST

START_TEST(test_failure_rolls_back_that_file_only)
{
    put("0001_items.sql", m1);
    put("0002_bad.sql", "CREATE TABLE extra (id INTEGER);\n"
                        "INSERT INTO items (id, name) VALUES (1, NULL);\n");
    put("0003_note.sql", m3);
    migration_set *s = load();
    migrate_result r;
    int rc = migrate_apply(db, s, &r);
    ck_assert_int_eq(rc, TN_INVALID);   /* NOT NULL: a constraint, TN_INVALID on both */
    ck_assert(db_is_clean(db));
    ck_assert_str_eq(r.from, "");
    ck_assert_str_eq(r.to, "0001");
    ck_assert_int_eq(r.applied, 1);
    ck_assert_int_eq(r.pending, 2);
    ck_assert_str_eq(r.error.file, "0002_bad.sql");
    ck_assert_int_eq(r.error.statement, 2);
    ck_assert_int_eq(r.error.line, 2);
    ck_assert_msg(r.error.message[0] != '\0', "no database message");
    ck_assert(!has_table(db, "extra"));   /* statement 1 of the file was rolled back too */
    ck_assert(has_table(db, "items"));    /* the file before it stays */
    ck_assert_int_eq(count(db, "SELECT count(*) FROM tenancy_migrations"), 1);
    migrate_free(s);

    /* Fixed: the next run resumes at 0002. */
    put("0002_bad.sql", "CREATE TABLE extra (id INTEGER);\n"
                        "INSERT INTO items (id, name) VALUES (1, 'one');\n");
    s = load();
    apply_ok(s, &r);
    ck_assert_str_eq(r.from, "0001");
    ck_assert_str_eq(r.to, "0003");
    ck_assert_int_eq(r.applied, 2);
    ck_assert(has_table(db, "extra"));
    migrate_free(s);
}
END_TEST

/* A file that fails when the version table was read first (the file goes out in the round
 * trip of its version row and COMMIT on PostgreSQL): the same report, statement and line,
 * and nothing of the file kept. */
START_TEST(test_failure_after_read)
{
    first_applied();
    put("0002_bad.sql", "CREATE TABLE extra (id INTEGER);\n\n"
                        "INSERT INTO items (id, name) VALUES (1, NULL);\n");
    migration_set *s = load();
    migrate_result r;
    int rc = migrate_apply(db, s, &r);
    ck_assert_int_eq(rc, TN_INVALID);
    ck_assert(db_is_clean(db));
    ck_assert_str_eq(r.from, "0001");
    ck_assert_str_eq(r.to, "0001");
    ck_assert_int_eq(r.applied, 0);
    ck_assert_str_eq(r.error.file, "0002_bad.sql");
    ck_assert_int_eq(r.error.statement, 2);
    ck_assert_int_eq(r.error.line, 3);
    ck_assert_msg(r.error.message[0] != '\0', "no database message");
    ck_assert(!has_table(db, "extra"));
    ck_assert_int_eq(count(db, "SELECT count(*) FROM tenancy_migrations"), 1);
    migrate_free(s);
    /* a transaction-control statement is refused before anything is sent */
    put("0002_bad.sql", "CREATE TABLE extra (id INTEGER);\nCOMMIT;\n");
    s = load();
    ck_assert_int_eq(migrate_apply(db, s, &r), TN_INVALID);
    ck_assert_int_eq(r.error.statement, 2);
    ck_assert(db_is_clean(db));
    ck_assert(!has_table(db, "extra"));
    migrate_free(s);
}
END_TEST

static int apply_exp(const migration_set *s, const char *expect, migrate_result *r)
{
    int rc = migrate_apply_expected(db, s, expect, r);
    ck_assert(db_is_clean(db));
    return rc;
}

/* migrate_apply_expected: the registry's copy of the version is a guess the version table
 * must confirm. A right guess applies the next file in the round trip of BEGIN; a wrong or
 * stale one, a changed file or no table at all gives migrate_apply's results exactly. */
START_TEST(test_apply_expected)
{
    put("0001_items.sql", m1);
    migration_set *s = load();
    migrate_result r;
    ck_assert_int_eq(apply_exp(s, "0001", &r), TN_OK);   /* no table yet: the usual way */
    ck_assert_str_eq(r.to, "0001");
    ck_assert_int_eq(r.applied, 1);
    migrate_free(s);

    /* the copy claims 0002, the table holds 0001 only: 0002 is not skipped */
    put("0002_tags.sql", m2);
    put("0003_note.sql", m3);
    s = load();
    ck_assert_int_eq(apply_exp(s, "0002", &r), TN_OK);
    ck_assert_str_eq(r.from, "0001");
    ck_assert_str_eq(r.to, "0003");
    ck_assert_int_eq(r.applied, 2);
    ck_assert(has_table(db, "tags"));
    ck_assert_int_eq(count(db, "SELECT count(*) FROM tenancy_migrations"), 3);
    migrate_free(s);

    /* a right guess, two files after it */
    put("0004_more.sql", "CREATE TABLE more (id INTEGER);");
    put("0005_less.sql", "CREATE TABLE less (id INTEGER);");
    s = load();
    ck_assert_int_eq(apply_exp(s, "0003", &r), TN_OK);
    ck_assert_str_eq(r.from, "0003");
    ck_assert_str_eq(r.to, "0005");
    ck_assert_int_eq(r.applied, 2);
    ck_assert_int_eq(r.nwarnings, 0);
    ck_assert(has_table(db, "more") && has_table(db, "less"));
    migrate_free(s);

    /* a stale copy (lower than the table): only the new file */
    put("0006_six.sql", "CREATE TABLE six (id INTEGER);");
    s = load();
    ck_assert_int_eq(apply_exp(s, "0004", &r), TN_OK);
    ck_assert_str_eq(r.from, "0005");
    ck_assert_str_eq(r.to, "0006");
    ck_assert_int_eq(r.applied, 1);
    ck_assert_int_eq(count(db, "SELECT count(*) FROM tenancy_migrations"), 6);
    migrate_free(s);

    /* an applied file edited afterwards: the warning migrate_apply gives */
    put("0001_items.sql", "-- edited\nCREATE TABLE items (id INTEGER PRIMARY KEY);");
    put("0007_seven.sql", "CREATE TABLE seven (id INTEGER);");
    s = load();
    ck_assert_int_eq(apply_exp(s, "0006", &r), TN_OK);
    ck_assert_int_eq(r.applied, 1);
    ck_assert_int_eq(r.nwarnings, 1);
    ck_assert_msg(strstr(r.warnings[0], "0001_items.sql was changed after it was applied"),
                  "%s", r.warnings[0]);
    migrate_free(s);

    /* nothing pending and a right guess: current (in one round trip, test_pg_current_...),
     * unless a file was edited since: then the warning, as migrate_apply gives it */
    s = load();
    ck_assert_int_eq(apply_exp(s, "0007", &r), TN_OK);
    ck_assert_str_eq(r.from, "0007");
    ck_assert_str_eq(r.to, "0007");
    ck_assert_int_eq(r.applied, 0);
    ck_assert_int_eq(r.nwarnings, 1);
    ck_assert_msg(strstr(r.warnings[0], "0001_items.sql was changed after it was applied"),
                  "%s", r.warnings[0]);
    migrate_free(s);
    put("0001_items.sql", m1);
    s = load();
    ck_assert_int_eq(apply_exp(s, "0007", &r), TN_OK);
    ck_assert_str_eq(r.from, "0007");
    ck_assert_str_eq(r.to, "0007");
    ck_assert_int_eq(r.applied, 0);
    ck_assert_int_eq(r.pending, 0);
    ck_assert_int_eq(r.nwarnings, 0);
    /* a stale guess with nothing pending: the table says where it is */
    ck_assert_int_eq(apply_exp(s, "0006", &r), TN_OK);
    ck_assert_str_eq(r.to, "0007");
    ck_assert_int_eq(r.applied, 0);
    ck_assert_int_eq(count(db, "SELECT count(*) FROM tenancy_migrations"), 7);
    migrate_free(s);

    /* a right guess and a failing file: statement and line, nothing of it kept */
    put("0008_bad.sql", "CREATE TABLE extra (id INTEGER);\n"
                        "INSERT INTO items (id, name) VALUES (1, NULL);\n");
    s = load();
    ck_assert_int_eq(apply_exp(s, "0007", &r), TN_INVALID);
    ck_assert_str_eq(r.from, "0007");
    ck_assert_str_eq(r.to, "0007");   /* the version reached, as migrate_apply says it */
    ck_assert_int_eq(r.pending, 1);
    ck_assert_str_eq(r.error.file, "0008_bad.sql");
    ck_assert_int_eq(r.error.statement, 2);
    ck_assert_int_eq(r.error.line, 2);
    ck_assert(!has_table(db, "extra"));
    ck_assert_int_eq(count(db, "SELECT count(*) FROM tenancy_migrations"), 7);
    migrate_free(s);
}
END_TEST

START_TEST(test_warnings)
{
    put("0001_items.sql", m1);
    put("0003_note.sql", m3);
    migration_set *s = load();
    migrate_result r;
    apply_ok(s, &r);
    migrate_free(s);

    /* An applied file edited afterwards: a warning, not an error. */
    put("0001_items.sql", "-- edited\nCREATE TABLE items (id INTEGER PRIMARY KEY);");
    /* A version added below the highest applied one: applied, with a warning. */
    put("0002_tags.sql", m2);
    s = load();
    apply_ok(s, &r);
    ck_assert_int_eq(r.applied, 1);
    ck_assert_str_eq(r.to, "0003");
    ck_assert_int_eq(r.nwarnings, 2);
    ck_assert_msg(strstr(r.warnings[0], "0001_items.sql was changed after it was applied"),
                  "%s", r.warnings[0]);
    ck_assert_msg(strstr(r.warnings[1], "0002_tags.sql is applied out of order"), "%s",
                  r.warnings[1]);
    migrate_free(s);

    /* A version applied that the folder no longer has. */
    char path[700];
    snprintf(path, sizeof(path), "%s/0003_note.sql", dir);
    ck_assert_int_eq(unlink(path), 0);
    s = load();
    apply_ok(s, &r);
    ck_assert_int_eq(r.nwarnings, 2);
    ck_assert_msg(strstr(r.warnings[1], "version 0003 is applied but no file has it"), "%s",
                  r.warnings[1]);
    ck_assert_str_eq(r.to, "0003");
    migrate_free(s);
}
END_TEST

START_TEST(test_transaction_control_refused)
{
    put("0001_items.sql", m1);
    put("0002_txn.sql", "CREATE TABLE x (id INTEGER);\nCOMMIT;\nCREATE TABLE y (id INTEGER);");
    migration_set *s = load();
    migrate_result r;
    ck_assert_int_eq(migrate_apply(db, s, &r), TN_INVALID);
    ck_assert_str_eq(r.error.file, "0002_txn.sql");
    ck_assert_int_eq(r.error.statement, 2);
    ck_assert_msg(strstr(r.error.message, "transaction control"), "%s", r.error.message);
    ck_assert(!has_table(db, "x"));
    ck_assert_str_eq(r.to, "0001");
    migrate_free(s);
}
END_TEST

/* Every word that would end or restart the file's transaction is refused, not only COMMIT: a
 * bare ROLLBACK would throw away the file's earlier statements and let the rest run outside
 * any transaction. ROLLBACK TO a savepoint stays inside the transaction and is the file's own
 * business. */
START_TEST(test_transaction_control_words)
{
    static const char *const refused[] = {"BEGIN;", "START TRANSACTION;", "END;", "ROLLBACK;",
                                          "rollback\n;", "ROLLBACK WORK;"};
    put("0001_items.sql", m1);
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        char text[128];
        snprintf(text, sizeof(text), "CREATE TABLE x (id INTEGER);\n%s\nCREATE TABLE y (id "
                                     "INTEGER);", refused[i]);
        put("0002_txn.sql", text);
        migration_set *s = load();
        migrate_result r;
        ck_assert_msg(migrate_apply(db, s, &r) == TN_INVALID, "%s was not refused", refused[i]);
        ck_assert_str_eq(r.error.file, "0002_txn.sql");
        ck_assert_int_eq(r.error.statement, 2);
        ck_assert_msg(strstr(r.error.message, "transaction control"), "%s", r.error.message);
        ck_assert(db_is_clean(db));
        ck_assert(!has_table(db, "x"));
        ck_assert(!has_table(db, "y"));
        ck_assert_str_eq(r.to, "0001");
        migrate_free(s);
    }
    put("0002_txn.sql", "SAVEPOINT s;\nCREATE TABLE x (id INTEGER);\nROLLBACK TO SAVEPOINT s;\n"
                        "rollback  to s;\nCREATE TABLE y (id INTEGER);\nRELEASE s;");
    migration_set *s = load();
    migrate_result r;
    apply_ok(s, &r);
    ck_assert_str_eq(r.to, "0002");
    ck_assert(!has_table(db, "x"));
    ck_assert(has_table(db, "y"));
    migrate_free(s);
}
END_TEST

START_TEST(test_empty_set_creates_nothing)
{
    migration_set *s = NULL;
    char err[256];
    ck_assert_int_eq(migrate_load(NULL, &s, err, sizeof(err)), TN_OK);
    ck_assert_int_eq(migrate_count(s), 0);
    ck_assert_str_eq(migrate_latest(s), "");
    migrate_result r;
    apply_ok(s, &r);
    ck_assert_str_eq(r.to, "");
    ck_assert(!has_table(db, "tenancy_migrations"));
    char cur[MIGRATE_VERSION_MAX] = "x";
    migrate_error e;
    OK(migrate_current(db, cur, sizeof(cur), &e));
    ck_assert_str_eq(cur, "");
    migrate_free(s);
}
END_TEST

START_TEST(test_seed_binds_what_each_statement_uses)
{
    put("0001_kv.sql", "CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT);");
    migration_set *s = load();
    migrate_result r;
    apply_ok(s, &r);
    migrate_free(s);
    const char *seed =
        "-- $1 slug, $2 name, $3 id\n"
        "INSERT INTO kv (k, v) VALUES ('slug', $1);\n"
        "INSERT INTO kv (k, v) VALUES ('id', $3);\n"
        "INSERT INTO kv (k, v) VALUES ('greeting', 'Hello from ' || $2 || ' (' || $1 || ')');\n"
        "INSERT INTO kv (k, v) VALUES ('literal', '$2 stays; so does $3'); /* $1 */\n"
        "INSERT INTO kv (k, v) VALUES ('none', 'x');\n";
    const char *vals[] = {"acme", "Acme Inc.", "42"};
    migrate_error e;
    int rc = migrate_seed(db, "seed.sql", seed, 3, vals, &e);
    ck_assert_msg(rc == TN_OK, "seed: %s statement %d: %s", tn_rc_str(rc), e.statement,
                  e.message);
    char v[128];
    const char *k[] = {"greeting"};
    OK(db_query_value(db, v, sizeof(v), "SELECT v FROM kv WHERE k = $1", 1, k));
    ck_assert_str_eq(v, "Hello from Acme Inc. (acme)");
    k[0] = "id";
    OK(db_query_value(db, v, sizeof(v), "SELECT v FROM kv WHERE k = $1", 1, k));
    ck_assert_str_eq(v, "42");
    k[0] = "literal";
    OK(db_query_value(db, v, sizeof(v), "SELECT v FROM kv WHERE k = $1", 1, k));
    ck_assert_str_eq(v, "$2 stays; so does $3");
    ck_assert_int_eq(count(db, "SELECT count(*) FROM kv"), 5);

    /* A failing statement leaves nothing of the seed. */
    OK(tn_db_exec(db, "DELETE FROM kv", 0, NULL));
    rc = migrate_seed(db, "seed.sql",
                      "INSERT INTO kv (k, v) VALUES ('a', $1);\nINSERT INTO nosuch VALUES (1);", 3,
                      vals, &e);
    ck_assert_int_eq(rc, TN_INVALID);
    ck_assert_str_eq(e.file, "seed.sql");
    ck_assert_int_eq(e.statement, 2);
    ck_assert_int_eq(e.line, 2);
    ck_assert_int_eq(count(db, "SELECT count(*) FROM kv"), 0);
    ck_assert(db_is_clean(db));

    /* A placeholder beyond the values given. */
    rc = migrate_seed(db, "seed.sql", "INSERT INTO kv (k, v) VALUES ('a', $4);", 3, vals, &e);
    ck_assert_int_eq(rc, TN_INVALID);
    ck_assert_msg(strstr(e.message, "placeholder $4"), "%s", e.message);
    ck_assert_int_eq(count(db, "SELECT count(*) FROM kv"), 0);
}
END_TEST

/* ---- backend-specific ---------------------------------------------------------------------------- */

/* The Syncs libpq sent on db's connection while fn ran: one per round trip. Counted in
 * libpq's own protocol trace (PQtrace, found in the libpq the driver loaded). */
static int syncs_during(void (*fn)(void *), void *arg)
{
    void *lib = dlopen("libpq.so.5", RTLD_LAZY | RTLD_NOLOAD);
    ck_assert_msg(lib != NULL, "libpq is not loaded: %s", dlerror());
    void (*trace)(void *, FILE *) = (void (*)(void *, FILE *))dlsym(lib, "PQtrace");
    void (*untrace)(void *) = (void (*)(void *))dlsym(lib, "PQuntrace");
    ck_assert(trace != NULL && untrace != NULL);
    void *conn = tn_db_native(db);   /* (the next change of scope wipes the session) */
    ck_assert_ptr_nonnull(conn);
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    trace(conn, f);
    fn(arg);
    untrace(conn);
    rewind(f);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof(line), f) != NULL)
        n += strstr(line, "\tF\t") != NULL && strstr(line, "\tSync") != NULL;
    fclose(f);
    dlclose(lib);
    return n;
}

static void provision_two_files(void *arg)
{
    const migration_set *s = arg;
    const char *vals[] = {"acme"};
    migrate_result r;
    int rc = migrate_provision(db, NULL, s, "seed.sql",
                               "INSERT INTO items (id, name) VALUES (1, $1);\n"
                               "INSERT INTO tags (id, label) VALUES (2, $1);\n", 1, vals, &r);
    ck_assert_msg(rc == TN_OK, "migrate_provision: %s: %s statement %d: %s", tn_rc_str(rc),
                  r.error.file, r.error.statement, r.error.message);
}

static void provision_long(void *arg)
{
    const migration_set *s = arg;
    migrate_result r;
    int rc = migrate_provision(db, NULL, s, NULL, NULL, 0, NULL, &r);
    ck_assert_msg(rc == TN_OK, "migrate_provision: %s: %s statement %d: %s", tn_rc_str(rc),
                  r.error.file, r.error.statement, r.error.message);
}

/* More statements than one pipeline takes: statement by statement, all of them applied. */
START_TEST(test_pg_provision_long)
{
    static char sql[300 * 64];
    size_t at = (size_t)snprintf(sql, sizeof(sql), "CREATE TABLE many (id INTEGER);\n");
    for (int i = 1; i < 300; i++)
        at += (size_t)snprintf(sql + at, sizeof(sql) - at, "INSERT INTO many VALUES (%d);\n", i);
    put("0001_many.sql", sql);
    migration_set *s = load();
    int syncs = syncs_during(provision_long, s);
    ck_assert_msg(syncs > 300, "%d round trips", syncs);
    ck_assert_int_eq(count(db, "SELECT count(*) FROM many"), 299);
    ck_assert_int_eq(count(db, "SELECT count(*) FROM tenancy_migrations"), 1);
    migrate_free(s);
}
END_TEST

static void apply_current(void *arg)
{
    const migration_set *s = arg;
    migrate_result r;
    ck_assert_int_eq(migrate_apply_expected(db, s, "0002", &r), TN_OK);
    ck_assert_str_eq(r.to, "0002");
    ck_assert_int_eq(r.applied, 0);
    ck_assert(db_is_clean(db));
}

/* A tenant with nothing to apply, whose registry copy is right: one round trip (the lock,
 * the guard, the COMMIT), where reading its table and ending that transaction took two. */
START_TEST(test_pg_current_one_round_trip)
{
    put("0001_items.sql", m1);
    put("0002_tags.sql", m2);
    migration_set *s = load();
    migrate_result r;
    apply_ok(s, &r);
    int syncs = syncs_during(apply_current, s);
    ck_assert_msg(syncs == 1, "%d round trips", syncs);
    migrate_free(s);
}
END_TEST

static void apply_pending(void *arg)
{
    const migration_set *s = arg;
    migrate_result r;
    apply_ok(s, &r);
    ck_assert_str_eq(r.to, "0002");
    ck_assert_int_eq(r.applied, 1);
}

/* A tenant one file behind, migrated without a registry copy to guess from: the version table
 * is read under the lock in the round trip of BEGIN, and the file, its version row and the
 * COMMIT go in one more. Reading the table first on its own, then taking the lock and
 * looking again in the file's transaction, is what a wave over every tenant must not pay. */
START_TEST(test_pg_apply_reads_under_the_lock)
{
    first_applied();
    put("0002_tags.sql", m2);
    migration_set *s = load();
    int syncs = syncs_during(apply_pending, s);
    ck_assert_msg(syncs == 2, "%d round trips", syncs);
    ck_assert_int_eq(count(db, "SELECT count(*) FROM tenancy_migrations"), 2);
    migrate_free(s);
}
END_TEST

/* A new storage's whole transaction (its lock, the version table, each file and its version
 * row, the seed's statements, the COMMIT: eleven statements here) in one round trip: a bulk
 * create pays it for every tenant, and statement by statement it cost one each. */
START_TEST(test_pg_provision_one_round_trip)
{
    put("0001_items.sql", m1);
    put("0002_tags.sql", m2);
    migration_set *s = load();
    int syncs = syncs_during(provision_two_files, s);
    ck_assert_msg(syncs == 1, "%d round trips", syncs);
    ck_assert_int_eq(count(db, "SELECT count(*) FROM tenancy_migrations"), 2);
    ck_assert_int_eq(count(db, "SELECT count(*) FROM tags WHERE label = 'acme'"), 1);
    migrate_free(s);
}
END_TEST

START_TEST(test_sqlite_trigger_body)
{
    put("0001_items.sql", m1);
    put("0002_trigger.sql",
        "CREATE TABLE log (msg TEXT);\n"
        "CREATE TRIGGER items_log AFTER INSERT ON items BEGIN\n"
        "  INSERT INTO log (msg) VALUES ('added; ' || new.name);\n"
        "END;\n");
    migration_set *s = load();
    migrate_result r;
    apply_ok(s, &r);
    OK(tn_db_exec(db, "INSERT INTO items (id, name) VALUES (1, 'a')", 0, NULL));
    ck_assert_int_eq(count(db, "SELECT count(*) FROM log WHERE msg = 'added; a'"), 1);
    migrate_free(s);
}
END_TEST

START_TEST(test_sqlite_clone)
{
    put("0001_items.sql", m1);
    put("0002_tags.sql", m2);
    migration_set *s = load();
    migrate_result r;
    apply_ok(s, &r);
    OK(tn_db_exec(db, "INSERT INTO items (id, name) VALUES (7, 'template row')", 0, NULL));
    storage_target from = {.kind = TARGET_SQLITE, .name = file_db + strlen("sqlite:")};
    char copy[600];
    snprintf(copy, sizeof(copy), "%s/clone-%ld.db", root, (long)getpid());
    storage_target to = {.kind = TARGET_SQLITE, .name = copy};
    char err[512];
    /* The template is open (db): VACUUM INTO reads a snapshot beside it. */
    int rc = migrate_clone(&from, &to, err, sizeof(err));
    ck_assert_msg(rc == TN_OK, "clone: %s: %s", tn_rc_str(rc), err);
    char uri[700];
    snprintf(uri, sizeof(uri), "sqlite:%s", copy);
    tn_db *c = open_uri(uri);
    ck_assert_int_eq(count(c, "SELECT count(*) FROM tenancy_migrations"), 2);
    ck_assert_int_eq(count(c, "SELECT count(*) FROM items WHERE id = 7"), 1);
    char mode[16];
    EXPECT(c, TN_OK, db_query_value(c, mode, sizeof(mode), "PRAGMA journal_mode", 0, NULL));
    ck_assert_str_eq(mode, "wal");
    /* The clone is up to date: migrating it applies nothing. */
    tn_db *keep = db;
    db = c;
    apply_ok(s, &r);
    ck_assert_int_eq(r.applied, 0);
    db = keep;
    db_close(c);
    /* Onto an existing file: refused, the file left alone. */
    struct stat before, after;
    ck_assert_int_eq(stat(copy, &before), 0);
    ck_assert_int_eq(migrate_clone(&from, &to, err, sizeof(err)), TN_EXISTS);
    ck_assert_int_eq(stat(copy, &after), 0);
    ck_assert(before.st_ino == after.st_ino && before.st_size == after.st_size);
    /* From a template that is not there. */
    storage_target none = {.kind = TARGET_SQLITE, .name = "/nonexistent/t.db"};
    char other[600];
    snprintf(other, sizeof(other), "%s/clone2-%ld.db", root, (long)getpid());
    to.name = other;
    ck_assert_int_eq(migrate_clone(&none, &to, err, sizeof(err)), TN_NOTFOUND);
    ck_assert_int_eq(access(other, F_OK), -1);
    /* Kinds that differ; schema mode has no clone. */
    storage_target schema = {.kind = TARGET_PG_SCHEMA, .server = "postgres:", .name = "t_a"};
    ck_assert_int_eq(migrate_clone(&from, &schema, err, sizeof(err)), TN_INVALID);
    storage_target schema2 = schema;
    schema2.name = "t_b";
    ck_assert_int_eq(migrate_clone(&schema, &schema2, err, sizeof(err)), TN_DECLINED);
    migrate_free(s);
}
END_TEST

START_TEST(test_pg_scope_and_neighbour)
{
    put("0001_items.sql", m1);
    put("0002_fn.sql", "CREATE FUNCTION twice(x integer) RETURNS integer AS $$\n"
                       "  SELECT x * 2; -- a ';' inside the body\n$$ LANGUAGE sql;\n");
    migration_set *s = load();
    migrate_result r;
    apply_ok(s, &r);
    ck_assert_str_eq(r.to, "0002");
    /* Everything is in the target's schema, nothing in its neighbour or in public. */
    ck_assert_int_eq(count(adm, "SELECT count(*) FROM tn_mig_a.tenancy_migrations"), 2);
    ck_assert_int_eq(count(adm, "SELECT count(*) FROM pg_tables WHERE schemaname = 'tn_mig_a'"),
                     2);
    ck_assert_int_eq(count(adm, "SELECT count(*) FROM pg_tables WHERE schemaname IN "
                                "('tn_mig_b', 'public')"), 0);
    ck_assert_int_eq(count(db, "SELECT twice(21)"), 42);
    /* The scope is per transaction: the session's own path stays empty. */
    ck_assert_str_eq(db_schema_scope(db), "tn_mig_a");
    migrate_free(s);

    /* The neighbour, migrated on the same connection after a change of scope. */
    OK(db_set_schema_scope(db, "tn_mig_b"));
    s = load();
    apply_ok(s, &r);
    ck_assert_str_eq(r.from, "");
    ck_assert_int_eq(count(adm, "SELECT count(*) FROM tn_mig_b.tenancy_migrations"), 2);
    migrate_free(s);

    /* A scope whose schema does not exist: an error, nothing created anywhere. */
    OK(db_set_schema_scope(db, "tn_mig_missing"));
    s = load();
    int rc = migrate_apply(db, s, &r);
    ck_assert_int_ne(rc, TN_OK);
    ck_assert(db_is_clean(db));
    ck_assert_int_eq(count(adm, "SELECT count(*) FROM pg_tables WHERE tablename = "
                                "'tenancy_migrations' AND schemaname NOT IN "
                                "('tn_mig_a', 'tn_mig_b')"), 0);
    migrate_free(s);
}
END_TEST

/* Apply s here and, at the same time, in a forked second migrator on its own connection;
 * both must succeed. Returns the files the two applied between them (*r: this side's). */
static int race_second_migrator(migration_set *s, const char *what, migrate_result *r)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        tn_db *d = open_target();
        migrate_result cr;
        int rc = migrate_apply(d, s, &cr);
        if (rc != TN_OK)
            fprintf(stderr, "%s: the second migrator: %s: %s\n", what, tn_rc_str(rc),
                    cr.error.message);
        /* Freed before _exit: under valgrind (--error-exitcode) a leak would change the
         * exit status this test counts with. */
        db_close(d);
        migrate_free(s);
        _exit(rc == TN_OK ? cr.applied : 100);
    }
    ck_assert_int_ge(pid, 0);
    apply_ok(s, r);
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st));
    ck_assert_int_lt(WEXITSTATUS(st), 100);
    return r->applied + WEXITSTATUS(st);
}

/* Two migrators on one schema at once (the advisory lock and the re-check inside each
 * transaction): every file applied exactly once between them, neither fails. */
START_TEST(test_pg_two_migrators)
{
    put("0001_slow.sql", "CREATE TABLE items (id INTEGER PRIMARY KEY);\nSELECT pg_sleep(0.3);");
    put("0002_tags.sql", m2);
    put("0003_slow.sql", "ALTER TABLE items ADD COLUMN note TEXT;\nSELECT pg_sleep(0.2);");
    migration_set *s = load();
    migrate_result r;
    ck_assert_int_eq(race_second_migrator(s, "two_migrators", &r), 3);
    ck_assert_int_eq(count(adm, "SELECT count(*) FROM tn_mig_a.tenancy_migrations"), 3);
    migrate_free(s);
}
END_TEST

/* The same once the version table is there: each reads it under the lock, in the first
 * pending file's transaction, so the one that waited sees what the other applied. */
START_TEST(test_pg_two_migrators_read_locked)
{
    put("0001_items.sql", "CREATE TABLE items (id INTEGER PRIMARY KEY);");
    migration_set *s = load();
    migrate_result r;
    apply_ok(s, &r);
    migrate_free(s);
    put("0002_slow.sql", "CREATE TABLE tags (id INTEGER);\nSELECT pg_sleep(0.3);");
    put("0003_slow.sql", "ALTER TABLE items ADD COLUMN note TEXT;\nSELECT pg_sleep(0.2);");
    s = load();
    ck_assert_int_eq(race_second_migrator(s, "read_locked", &r), 2);
    ck_assert_int_eq(count(adm, "SELECT count(*) FROM tn_mig_a.tenancy_migrations"), 3);
    migrate_free(s);
}
END_TEST

/* The lock is per schema: a migrator held up in one tenant's schema must not hold up the
 * migration of another. The first migrator is stopped inside its file by a table lock the
 * test holds (so it holds its own lock for as long as the test wants); the neighbour's
 * migration, with a lock_timeout, must go through meanwhile rather than time out. */
START_TEST(test_pg_lock_is_per_schema)
{
    EXPECT(adm, TN_OK, db_exec_script(adm, "CREATE TABLE public.gate (id INTEGER)"));
    EXPECT(adm, TN_OK, tn_db_begin(adm));
    EXPECT(adm, TN_OK, db_exec_script(adm, "LOCK TABLE public.gate IN ACCESS EXCLUSIVE MODE"));
    put("0001_gate.sql", "CREATE TABLE items (id INTEGER);\nSELECT count(*) FROM public.gate;");
    migration_set *s = load();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        tn_db *d = open_target();
        migrate_result cr;
        int rc = migrate_apply(d, s, &cr);
        db_close(d);
        migrate_free(s);
        _exit(rc == TN_OK ? 0 : 1);
    }
    ck_assert_int_ge(pid, 0);
    migrate_free(s);
    /* Until the first migrator waits on the gate, inside its file's transaction. */
    for (int i = 0; count(adm, "SELECT count(*) FROM pg_locks WHERE NOT granted AND "
                               "relation = 'public.gate'::regclass") == 0; i++) {
        ck_assert_msg(i < 1000, "the first migrator never reached the gate");
        usleep(10000);
    }
    new_dir();
    put("0001_items.sql", m1);
    s = load();
    OK(db_set_schema_scope(db, "tn_mig_b"));
    OK(db_exec_script(db, "SET lock_timeout = '2s'"));
    migrate_result r;
    int rc = migrate_apply(db, s, &r);
    EXPECT(adm, TN_OK, tn_db_rollback(adm));   /* let the first go whatever happened */
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(rc == TN_OK, "the neighbour's migration: %s: %s", tn_rc_str(rc),
                  r.error.message);
    ck_assert_str_eq(r.to, "0001");
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ck_assert_int_eq(count(adm, "SELECT count(*) FROM tn_mig_a.tenancy_migrations"), 1);
    migrate_free(s);
}
END_TEST

START_TEST(test_pg_database_clone)
{
    EXPECT(adm, TN_OK, tn_db_exec(adm, "DROP DATABASE IF EXISTS tn_mig_tpl", 0, NULL));
    EXPECT(adm, TN_OK, tn_db_exec(adm, "DROP DATABASE IF EXISTS tn_mig_new", 0, NULL));
    EXPECT(adm, TN_OK, tn_db_exec(adm, "CREATE DATABASE tn_mig_tpl", 0, NULL));
    char uri[1024], err[512];
    ck_assert_int_eq(db_uri_with_dbname(pg_uri, "tn_mig_tpl", uri, sizeof(uri), err,
                                        sizeof(err)), TN_OK);
    tn_db *t = open_uri(uri);   /* scoped as target_open scopes a database-mode tenant */
    EXPECT(t, TN_OK, db_set_schema_scope(t, "public"));
    put("0001_items.sql", m1);
    migration_set *s = load();
    migrate_result r;
    ck_assert_int_eq(migrate_apply(t, s, &r), TN_OK);
    db_close(t);
    storage_target from = {.kind = TARGET_PG_DATABASE, .server = pg_uri, .name = "tn_mig_tpl"};
    storage_target to = {.kind = TARGET_PG_DATABASE, .server = pg_uri, .name = "tn_mig_new"};
    int rc = migrate_clone(&from, &to, err, sizeof(err));
    ck_assert_msg(rc == TN_OK, "clone: %s: %s", tn_rc_str(rc), err);
    ck_assert_int_eq(migrate_clone(&from, &to, err, sizeof(err)), TN_EXISTS);
    ck_assert_int_eq(db_uri_with_dbname(pg_uri, "tn_mig_new", uri, sizeof(uri), err,
                                        sizeof(err)), TN_OK);
    tn_db *c = open_uri(uri);
    EXPECT(c, TN_OK, db_set_schema_scope(c, "public"));
    ck_assert_int_eq(count(c, "SELECT count(*) FROM tenancy_migrations"), 1);
    db_close(c);
    EXPECT(adm, TN_OK, tn_db_exec(adm, "DROP DATABASE tn_mig_new", 0, NULL));
    EXPECT(adm, TN_OK, tn_db_exec(adm, "DROP DATABASE tn_mig_tpl", 0, NULL));
    migrate_free(s);
}
END_TEST

/* ---- backend-neutral -------------------------------------------------------------------------- */

START_TEST(test_load_folder)
{
    new_dir();
    put("0002_b.sql", "abc");
    put("0001_a-x.sql", "SELECT 1;");
    put("README.md", "not a migration");
    put(".hidden.sql", "ignored");
    put("notes.txt", "ignored");
    migration_set *s = load();
    ck_assert_int_eq(migrate_count(s), 2);
    ck_assert_str_eq(migrate_at(s, 0)->version, "0001");
    ck_assert_str_eq(migrate_at(s, 0)->name, "a-x");
    ck_assert_str_eq(migrate_at(s, 0)->file, "0001_a-x.sql");
    ck_assert_str_eq(migrate_at(s, 1)->name, "b");
    ck_assert_ptr_null(migrate_at(s, 2));
    ck_assert_str_eq(migrate_latest(s), "0002");
    /* SHA-256("abc"), FIPS 180-2 appendix B.1 */
    ck_assert_str_eq(migrate_at(s, 1)->checksum,
                     "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    migrate_free(s);

    /* Across a block boundary (56..64 bytes of padding): SHA-256 of 56 'a'. */
    new_dir();
    put("1_x.sql", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    s = load();
    ck_assert_str_eq(migrate_at(s, 0)->checksum,
                     "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
    migrate_free(s);
}
END_TEST

static void refused(int want, const char *needle)
{
    migration_set *s = NULL;
    char err[512] = "";
    int rc = migrate_load(dir, &s, err, sizeof(err));
    ck_assert_msg(rc == want, "migrate_load = %s, want %s (%s)", tn_rc_str(rc), tn_rc_str(want),
                  err);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err, needle) != NULL, "'%s' not in '%s'", needle, err);
}

START_TEST(test_load_refusals)
{
    static const char *const bad[] = {"1-a.sql", "0001_.sql", "x_abc.sql", "0001_a b.sql",
                                      "123456789012345678901234567890123_x.sql"};
    for (size_t i = 0; i < TN_ARRAY_LEN(bad); i++) {
        new_dir();
        put("0001_ok.sql", "SELECT 1;");
        put(bad[i], "SELECT 1;");
        refused(TN_INVALID, bad[i]);
    }
    new_dir();
    put("0001_a.sql", "SELECT 1;");
    put("0001_b.sql", "SELECT 1;");
    refused(TN_INVALID, "0001_a.sql and 0001_b.sql have the same version 0001");
    new_dir();
    put("01_a.sql", "SELECT 1;");
    put("1_b.sql", "SELECT 1;");
    refused(TN_INVALID, "have the same version");
    new_dir();
    put("9_a.sql", "SELECT 1;");
    put("10_b.sql", "SELECT 1;");
    refused(TN_INVALID, "10_b.sql sorts before 9_a.sql");
    /* Unreadable: a link to nothing (root reads any file, so no chmod). */
    new_dir();
    put("0001_a.sql", "SELECT 1;");
    char path[700];
    snprintf(path, sizeof(path), "%s/0002_gone.sql", dir);
    ck_assert_int_eq(symlink("/nonexistent/file.sql", path), 0);
    refused(TN_IO, "0002_gone.sql");
    new_dir();
    snprintf(path, sizeof(path), "%s/0001_dir.sql", dir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    refused(TN_IO, "0001_dir.sql");
    rmdir(path);
    new_dir();
    FILE *f;
    snprintf(path, sizeof(path), "%s/0001_nul.sql", dir);
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    fwrite("SELECT\0 1;", 1, 10, f);
    fclose(f);
    refused(TN_INVALID, "NUL byte");
    snprintf(dir, sizeof(dir), "%s/no-such-folder", root);
    refused(TN_IO, "no-such-folder");
}
END_TEST

static void bind_case(db_dialect d, const char *in, int nparams, const char *want, int nused,
                      const int *used)
{
    char *out = NULL;
    int u[64], n = -1;
    long bad = -1;
    int rc = db_sql_bind_used(d, in, strlen(in), nparams, &out, u, &n, &bad);
    ck_assert_msg(rc == TN_OK, "%s: %s", in, tn_rc_str(rc));
    ck_assert_str_eq(out, want);
    ck_assert_int_eq(n, nused);
    for (int i = 0; i < nused; i++)
        ck_assert_int_eq(u[i], used[i]);
    free(out);
}

START_TEST(test_bind_used)
{
    static const int u02[] = {0, 2}, u1[] = {1}, u012[] = {0, 1, 2};
    bind_case(DB_DIALECT_SQLITE,
              "SELECT $3, '$2', \"$1\", [$2], `$2` -- $1\n, a$2, $3, $1 /* $2 */", 3,
              "SELECT $2, '$2', \"$1\", [$2], `$2` -- $1\n, a$2, $2, $1 /* $2 */", 2, u02);
    bind_case(DB_DIALECT_PG, "SELECT $$ $1 $$, $t$ $1 $t$, E'\\' $1', $2::text", 3,
              "SELECT $$ $1 $$, $t$ $1 $t$, E'\\' $1', $1::text", 1, u1);
    bind_case(DB_DIALECT_PG, "SELECT $3 || $2 || $1 || $3", 3, "SELECT $3 || $2 || $1 || $3", 3,
              u012);
    bind_case(DB_DIALECT_SQLITE, "SELECT 1", 3, "SELECT 1", 0, NULL);
    bind_case(DB_DIALECT_SQLITE, "SELECT $003", 3, "SELECT $1", 1, (const int[]){2});
    char *out = (char *)"x";
    int u[64], n;
    long bad;
    ck_assert_int_eq(db_sql_bind_used(DB_DIALECT_SQLITE, "SELECT $4", 9, 3, &out, u, &n, &bad),
                     TN_INVALID);
    ck_assert_int_eq(bad, 4);
    ck_assert_ptr_null(out);
    ck_assert_int_eq(db_sql_bind_used(DB_DIALECT_SQLITE, "SELECT $0", 9, 3, &out, u, &n, &bad),
                     TN_INVALID);
    ck_assert_int_eq(db_sql_bind_used(DB_DIALECT_SQLITE, "SELECT '$1", 10, 3, &out, u, &n, &bad),
                     TN_INVALID);
    ck_assert_int_eq(bad, 0);
}
END_TEST

/* ---- suites ------------------------------------------------------------------------------------ */

static void rm_rf(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d != NULL && (e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char sub[1024];
            snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
            rm_rf(sub);
        }
        if (d != NULL)
            closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

void migrate_tests_init(const char *pg);
void migrate_tests_init(const char *pg)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof(root), "%s/tenancy-migrate.XXXXXX",
             tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
    if (mkdtemp(root) == NULL) {
        perror("check_migrate: mkdtemp");
        exit(99);
    }
    pg_uri = pg;
}

void migrate_tests_fini(void);
void migrate_tests_fini(void)
{
    rm_rf(root);
}

Suite *migrate_suite(bool pg);
Suite *migrate_suite(bool pg)
{
    Suite *s = suite_create(pg ? "migrate-postgres" : "migrate-sqlite");
    TCase *tc = tcase_create(pg ? "postgres" : "sqlite");
    tcase_add_checked_fixture(tc, pg ? setup_pg : setup_sqlite, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_apply_and_resume);
    tcase_add_test(tc, test_provision_all_in_one);
    tcase_add_test(tc, test_provision_rolls_back_everything);
    tcase_add_test(tc, test_failure_rolls_back_that_file_only);
    tcase_add_test(tc, test_failure_after_read);
    tcase_add_test(tc, test_apply_expected);
    tcase_add_test(tc, test_warnings);
    tcase_add_test(tc, test_transaction_control_refused);
    tcase_add_test(tc, test_transaction_control_words);
    tcase_add_test(tc, test_empty_set_creates_nothing);
    tcase_add_test(tc, test_seed_binds_what_each_statement_uses);
    if (pg) {
        tcase_add_test(tc, test_pg_scope_and_neighbour);
        tcase_add_test(tc, test_pg_provision_one_round_trip);
        tcase_add_test(tc, test_pg_current_one_round_trip);
        tcase_add_test(tc, test_pg_apply_reads_under_the_lock);
        tcase_add_test(tc, test_pg_provision_long);
        tcase_add_test(tc, test_pg_two_migrators);
        tcase_add_test(tc, test_pg_two_migrators_read_locked);
        tcase_add_test(tc, test_pg_lock_is_per_schema);
        tcase_add_test(tc, test_pg_database_clone);
    } else {
        tcase_add_test(tc, test_sqlite_trigger_body);
        tcase_add_test(tc, test_sqlite_clone);
    }
    suite_add_tcase(s, tc);
    return s;
}

Suite *migrate_misc_suite(void);
Suite *migrate_misc_suite(void)
{
    Suite *s = suite_create("migrate");
    TCase *tc = tcase_create("neutral");
    tcase_add_test(tc, test_load_folder);
    tcase_add_test(tc, test_load_refusals);
    tcase_add_test(tc, test_bind_used);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * check_dump.c — tenancy/dump.c (the tenant dump format: writer and strict reader) and the
 * type mapping of storage/copy.c (copy_type_for). No database: the dumps live in memory.
 *
 * Owns: these cases. The round trip through real databases is tests/integration/lifecycle.sh.
 */
#include "core/first.h"
#include "tenancy/dump.h"
#include "core/rc.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static copy_column cols[] = {
    {.name = "id", .type = "INTEGER", .pk = 1, .identity = true},
    {.name = "note", .type = "TEXT", .notnull = true, .dflt = "'x'"},
};
static copy_table table = {.name = "notes", .backend = "sqlite", .ncols = 2, .cols = cols};

/* A whole dump of `notes` with the given rows (2 values each) into b. */
static void write_dump(buf *b, const char *const (*rows)[2], int n)
{
    const char *tables[] = {"notes"};
    dump_domain d[] = {{"a.example", true}, {"b.example", false}};
    dump_header h = {.slug = "acme", .name = "Acme \"Inc\"", .state = "active",
                     .settings = "{\"theme\":\"dark\"}", .domains = d, .ndomains = 2,
                     .migration_version = "0002", .placement = "sqlite", .backend = "sqlite",
                     .exported_at = 1, .tables = tables, .ntables = 1};
    char err[256];
    dump_put_header(b, &h);
    dump_put_table(b, &table, n);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(dump_put_row(b, &table, rows[i], err, sizeof(err)), TN_OK);
    dump_put_end(b, 1, n);
    ck_assert(!b->oom);
}

/* Read a dump from text; returns the first error code and its message in err. */
static int read_all(const char *text, char *err, size_t errlen, int *nrows)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    ck_assert_ptr_nonnull(f);
    dump_reader *r = NULL;
    arena *a = arena_create(0);
    int rc = dump_open(f, &r, err, errlen);
    *nrows = 0;
    while (rc == TN_OK) {
        copy_table *t = NULL;
        int64_t want = 0;
        rc = dump_next_table(r, a, &t, &want, err, errlen);
        if (rc != TN_OK)
            break;
        const char *const *v;
        while ((rc = dump_next_row(r, &v, err, errlen)) == TN_OK)
            (*nrows)++;
        if (rc == TN_DONE)
            rc = TN_OK;
    }
    dump_close(r);
    arena_destroy(a);
    fclose(f);
    return rc == TN_DONE ? TN_OK : rc;
}

START_TEST(test_round_trip)
{
    static const char *const rows[][2] = {
        {"1", "plain"},
        {"2", "quote \" backslash \\ newline \n tab \t end"},
        {"3", "\xc3\xb1\xe2\x82\xac\xf0\x9f\x98\x80"},   /* ñ€😀 */
        {"4", ""},
        {"5", NULL},
    };
    buf b = BUF_INIT;
    write_dump(&b, rows, 5);
    FILE *f = fmemopen(b.p, b.len, "r");
    dump_reader *r = NULL;
    char err[256];
    ck_assert_int_eq(dump_open(f, &r, err, sizeof(err)), TN_OK);
    const dump_header *h = dump_header_of(r);
    ck_assert_str_eq(h->slug, "acme");
    ck_assert_str_eq(h->name, "Acme \"Inc\"");
    ck_assert_str_eq(h->settings, "{\"theme\":\"dark\"}");
    ck_assert_int_eq(h->ndomains, 2);
    ck_assert(h->domains[0].primary && !h->domains[1].primary);
    ck_assert_str_eq(h->migration_version, "0002");
    ck_assert_int_eq(h->ntables, 1);
    arena *a = arena_create(0);
    copy_table *t = NULL;
    int64_t want = -1;
    ck_assert_int_eq(dump_next_table(r, a, &t, &want, err, sizeof(err)), TN_OK);
    ck_assert_int_eq(want, 5);
    ck_assert_int_eq(t->ncols, 2);
    ck_assert(t->cols[0].identity && t->cols[0].pk == 1);
    ck_assert(t->cols[1].notnull);
    ck_assert_str_eq(t->cols[1].dflt, "'x'");
    for (int i = 0; i < 5; i++) {
        const char *const *v;
        ck_assert_int_eq(dump_next_row(r, &v, err, sizeof(err)), TN_OK);
        ck_assert_str_eq(v[0], rows[i][0]);
        if (rows[i][1] == NULL)
            ck_assert_ptr_null(v[1]);
        else
            ck_assert_str_eq(v[1], rows[i][1]);
    }
    const char *const *v;
    ck_assert_int_eq(dump_next_row(r, &v, err, sizeof(err)), TN_DONE);
    ck_assert_int_eq(dump_next_table(r, a, &t, &want, err, sizeof(err)), TN_DONE);
    dump_close(r);
    arena_destroy(a);
    fclose(f);
    buf_free(&b);
}
END_TEST

START_TEST(test_not_utf8_refused)
{
    const char *vals[] = {"1", "\xff\xfe"};
    buf b = BUF_INIT;
    char err[256];
    ck_assert_int_eq(dump_put_row(&b, &table, vals, err, sizeof(err)), TN_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "not UTF-8"));
    ck_assert_int_eq(b.len, 0);
    buf_free(&b);
}
END_TEST

/* Take a good dump and break it in one way; the reader must refuse it with `why`. */
static void refused(const char *from, const char *to, const char *why)
{
    static const char *const rows[][2] = {{"1", "a"}, {"2", "b"}};
    buf b = BUF_INIT;
    write_dump(&b, rows, 2);
    char *p = strstr(b.p, from);
    ck_assert_msg(p != NULL, "'%s' not in the dump", from);
    buf c = BUF_INIT;
    buf_append(&c, b.p, (size_t)(p - b.p));
    buf_puts(&c, to);
    buf_puts(&c, p + strlen(from));
    char err[256] = "";
    int n;
    int rc = read_all(c.p, err, sizeof(err), &n);
    ck_assert_msg(rc == TN_INVALID, "%s -> %s: %s, %s", from, to, tn_rc_str(rc), err);
    ck_assert_msg(strstr(err, why) != NULL, "%s -> %s: '%s' lacks '%s'", from, to, err, why);
    buf_free(&b);
    buf_free(&c);
}

START_TEST(test_broken_dumps)
{
    refused("{\"end\":\"tenancy-dump\",\"tables\":1,\"rows\":2}\n", "", "it was cut");
    refused("[\"2\",\"b\"]\n", "", "has 1 of its 2 rows");
    refused("[\"2\",\"b\"]\n", "[\"2\",\"b\"]\n[\"3\",\"c\"]\n", "a table line");
    refused("\"rows\":2}\n", "\"rows\":3}\n", "the end line counts");
    refused("\"version\":1", "\"version\":2", "this tenancy reads version 1");
    refused("\"format\":\"tenancy-dump\"", "\"format\":\"other\"", "not a tenancy dump");
    refused("[\"1\",\"a\"]", "[\"1\"]", "array of 2 values");
    refused("[\"1\",\"a\"]", "[\"1\",\"a\",]", "not a JSON value");
    refused("[\"1\",\"a\"]", "[\"1\",2]", "strings or null");
    refused("[\"1\",\"a\"]", "[\"1\",\"\\u0000\"]", "\\u0000");
    refused("[\"1\",\"a\"]", "[\"1\",\"\\ud800\"]", "lone surrogate");
    refused("[\"1\",\"a\"]", "[\"1\",\"\xc3\"]", "not UTF-8");
    refused("[\"1\",\"a\"]", "[\"1\",\"a\"] x", "text after the value");
    refused("{\"table\":\"notes\"", "{\"table\":\"other\"", "not the next one");
    refused("\"end\":\"tenancy-dump\",\"tables\":1,\"rows\":2}\n",
            "\"end\":\"tenancy-dump\",\"tables\":1,\"rows\":2}\nmore\n", "after the end line");
}
END_TEST

START_TEST(test_surrogate_pair)
{
    static const char *const rows[][2] = {{"1", "x"}};
    buf b = BUF_INIT;
    write_dump(&b, rows, 1);
    char *p = strstr(b.p, "[\"1\",\"x\"]");
    ck_assert_ptr_nonnull(p);
    buf c = BUF_INIT;
    buf_append(&c, b.p, (size_t)(p - b.p));
    buf_puts(&c, "[\"1\",\"\\ud83d\\ude00\\u00f1\"]");
    buf_puts(&c, p + strlen("[\"1\",\"x\"]"));
    FILE *f = fmemopen(c.p, c.len, "r");
    dump_reader *r = NULL;
    char err[256];
    ck_assert_int_eq(dump_open(f, &r, err, sizeof(err)), TN_OK);
    arena *a = arena_create(0);
    copy_table *t;
    int64_t want;
    ck_assert_int_eq(dump_next_table(r, a, &t, &want, err, sizeof(err)), TN_OK);
    const char *const *v;
    ck_assert_int_eq(dump_next_row(r, &v, err, sizeof(err)), TN_OK);
    ck_assert_str_eq(v[1], "\xf0\x9f\x98\x80\xc3\xb1");
    dump_close(r);
    arena_destroy(a);
    fclose(f);
    buf_free(&b);
    buf_free(&c);
}
END_TEST

/* ---- type mapping (storage/copy.c) ----------------------------------------------------------- */

static const char *map(const char *type, const char *from, const char *to)
{
    static char out[160];
    copy_column c = {.name = "c", .type = type};
    return copy_type_for(&c, from, to, out, sizeof(out)) == TN_OK ? out : "(refused)";
}

START_TEST(test_types)
{
    /* SQLite to PostgreSQL: a PostgreSQL name kept, else the affinity's type. */
    ck_assert_str_eq(map("INTEGER", "sqlite", "postgres"), "bigint");
    ck_assert_str_eq(map("int", "sqlite", "postgres"), "bigint");
    ck_assert_str_eq(map("SMALLINT", "sqlite", "postgres"), "smallint");
    ck_assert_str_eq(map("VARCHAR(20)", "sqlite", "postgres"), "varchar(20)");
    ck_assert_str_eq(map("decimal(10, 2)", "sqlite", "postgres"), "decimal(10,2)");
    ck_assert_str_eq(map("REAL", "sqlite", "postgres"), "double precision");
    ck_assert_str_eq(map("DATETIME", "sqlite", "postgres"), "timestamp");
    ck_assert_str_eq(map("BLOB", "sqlite", "postgres"), "bytea");
    ck_assert_str_eq(map("", "sqlite", "postgres"), "text");
    ck_assert_str_eq(map("NVARCHAR(5)", "sqlite", "postgres"), "text");
    ck_assert_str_eq(map("whatever", "sqlite", "postgres"), "text");
    ck_assert_str_eq(map("boolean", "sqlite", "postgres"), "boolean");
    ck_assert_str_eq(map("timestamp with time zone", "sqlite", "postgres"),
                     "timestamp with time zone");
    /* PostgreSQL to SQLite: the name kept (a round trip gives it back), arguments last. */
    ck_assert_str_eq(map("timestamp(3) with time zone", "postgres", "sqlite"),
                     "timestamp with time zone");
    ck_assert_str_eq(map("character varying(20)", "postgres", "sqlite"),
                     "character varying(20)");
    ck_assert_str_eq(map("integer[]", "postgres", "sqlite"), "text");
    /* PostgreSQL to PostgreSQL: rebuilt as it was. */
    ck_assert_str_eq(map("timestamp(3) with time zone", "postgres", "postgres"),
                     "timestamp(3) with time zone");
    ck_assert_str_eq(map("numeric(10,2)[]", "postgres", "postgres"), "numeric(10,2)[]");
    /* Outside the grammar: never written into DDL. */
    const char *bad[] = {"int; DROP TABLE x", "text, extra int", "t_acme.mood", "\"char\"",
                         "int -- x", "varchar(1,2,3)", "text /* x */", "int)"};
    for (size_t i = 0; i < TN_ARRAY_LEN(bad); i++) {
        ck_assert_msg(strcmp(map(bad[i], "sqlite", "postgres"), "(refused)") == 0, "%s", bad[i]);
        ck_assert_msg(strcmp(map(bad[i], "postgres", "sqlite"), "(refused)") == 0, "%s", bad[i]);
    }
}
END_TEST

Suite *dump_suite(void);
Suite *dump_suite(void)
{
    Suite *s = suite_create("dump");
    TCase *tc = tcase_create("format");
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_not_utf8_refused);
    tcase_add_test(tc, test_broken_dumps);
    tcase_add_test(tc, test_surrogate_pair);
    tcase_add_test(tc, test_types);
    suite_add_tcase(s, tc);
    return s;
}

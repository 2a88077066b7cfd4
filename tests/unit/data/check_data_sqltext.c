/* check_data_sqltext.c — the data app's type map, names, DEFAULT literals, the internal-object
 * scanner of POST /query, timestamps and FTS5 terms (apps/data/sqltext.c). */
#include <string.h>

#include "tests/unit/data/data_test.h"

static test_block *blocks;
static rest_mem mem = {test_alloc, &blocks};

static void teardown(void)
{
    test_mem_free(&blocks);
}

START_TEST(test_type_map)
{
    ck_assert_int_eq(dt_type_parse("text"), DT_TEXT);
    ck_assert_int_eq(dt_type_parse("json"), DT_JSON);
    ck_assert_int_eq(dt_type_parse("varchar"), -1);
    ck_assert_int_eq(dt_type_parse(NULL), -1);
    ck_assert_str_eq(dt_type_sql(DT_INTEGER, REST_SQLITE), "INTEGER");
    ck_assert_str_eq(dt_type_sql(DT_INTEGER, REST_POSTGRES), "bigint");
    ck_assert_str_eq(dt_type_sql(DT_TIMESTAMP, REST_POSTGRES), "timestamptz");
    ck_assert_str_eq(dt_type_sql(DT_JSON, REST_POSTGRES), "jsonb");
    /* every type survives the round trip through each dialect's catalog */
    static const char *pg_reported[DT_NTYPES] = {"text", "bigint", "double precision",
                                                 "boolean", "timestamp with time zone", "jsonb"};
    for (int t = 0; t < DT_NTYPES; t++) {
        ck_assert_int_eq(dt_type_from_sqlite(dt_type_sql(t, REST_SQLITE)), t);
        ck_assert_int_eq(dt_type_from_pg(pg_reported[t]), t);
        ck_assert_int_eq(dt_type_parse(dt_type_name(t)), t);
    }
    /* tables the API did not create: SQLite's affinity rules */
    ck_assert_int_eq(dt_type_from_sqlite("VARCHAR(20)"), DT_TEXT);
    ck_assert_int_eq(dt_type_from_sqlite("bigint"), DT_INTEGER);
    ck_assert_int_eq(dt_type_from_sqlite("DOUBLE"), DT_REAL);
    ck_assert_int_eq(dt_type_from_sqlite("DATETIME"), DT_TIMESTAMP);
    ck_assert_int_eq(dt_type_from_sqlite(""), DT_TEXT);
    ck_assert_int_eq(dt_type_from_pg("character varying"), DT_TEXT);
    ck_assert_int_eq(dt_type_from_pg("integer"), DT_INTEGER);
}
END_TEST

START_TEST(test_names)
{
    ck_assert(dt_name_ok("todos"));
    ck_assert(dt_name_ok("a_1"));
    ck_assert(!dt_name_ok("_fts_todos"));
    ck_assert(!dt_name_ok("tenancy_migrations"));
    ck_assert(!dt_name_ok("SQLITE_x"));
    ck_assert(!dt_name_ok("1a"));
    ck_assert(!dt_name_ok("a-b"));
    ck_assert(!dt_name_ok("a\"b"));
    ck_assert(!dt_name_ok(""));
    char longname[DT_NAME_MAX + 2];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    ck_assert(!dt_name_ok(longname));
    longname[DT_NAME_MAX] = '\0';
    ck_assert(dt_name_ok(longname));
    ck_assert(!dt_table_name_ok("tables"));
    ck_assert(!dt_table_name_ok("Query"));
    ck_assert(dt_table_name_ok("todos"));
    ck_assert(dt_name_internal("_data_changelog"));
    ck_assert(dt_name_internal("Tenancy_Migrations"));
    ck_assert(!dt_name_internal("tenancy"));
    dt_str b;
    dt_str_init(&b, &mem);
    dt_quote_ident(&b, "a\"b");
    ck_assert_str_eq(dt_str_get(&b), "\"a\"\"b\"");
}
END_TEST

/* literal(json text, type, dialect) → the DEFAULT text, or NULL when refused */
static const char *literal(const char *json, int type, rest_dialect d)
{
    json_t *v = json_loads(json, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    ck_assert_ptr_nonnull(v);
    dt_str b;
    dt_str_init(&b, &mem);
    int rc = dt_default_literal(&b, v, type, d);
    json_decref(v);
    return rc == TN_OK ? dt_str_get(&b) : NULL;
}

START_TEST(test_default_literal)
{
    ck_assert_str_eq(literal("\"it's\"", DT_TEXT, REST_SQLITE), "'it''s'");
    ck_assert_str_eq(literal("\"'); DROP TABLE x; --\"", DT_TEXT, REST_POSTGRES),
                     "'''); DROP TABLE x; --'");
    ck_assert_str_eq(literal("42", DT_INTEGER, REST_SQLITE), "42");
    ck_assert_str_eq(literal("-1.5", DT_REAL, REST_POSTGRES), "-1.5");
    ck_assert_str_eq(literal("true", DT_BOOLEAN, REST_SQLITE), "1");
    ck_assert_str_eq(literal("false", DT_BOOLEAN, REST_POSTGRES), "FALSE");
    ck_assert_str_eq(literal("null", DT_TEXT, REST_SQLITE), "NULL");
    ck_assert_str_eq(literal("\"2024-05-01T10:00:00Z\"", DT_TIMESTAMP, REST_SQLITE),
                     "'2024-05-01T10:00:00Z'");
    ck_assert_str_eq(literal("7", DT_JSON, REST_POSTGRES), "'7'");
    ck_assert_ptr_null(literal("\"x\"", DT_INTEGER, REST_SQLITE));
    ck_assert_ptr_null(literal("1.5", DT_INTEGER, REST_SQLITE));
    ck_assert_ptr_null(literal("\"yesterday\"", DT_TIMESTAMP, REST_SQLITE));
    ck_assert_ptr_null(literal("{\"a\":1}", DT_TEXT, REST_SQLITE));
    ck_assert_ptr_null(literal("[1]", DT_JSON, REST_SQLITE));
    ck_assert_ptr_null(literal("\"a\\u0000b\"", DT_TEXT, REST_SQLITE));
}
END_TEST

START_TEST(test_scan_internal)
{
    ck_assert_ptr_null(dt_scan_internal(&mem, "SELECT title FROM todos WHERE id = $1"));
    ck_assert_str_eq(dt_scan_internal(&mem, "SELECT * FROM _data_changelog"), "_data_changelog");
    ck_assert_str_eq(dt_scan_internal(&mem, "select * from \"_fts_todos\""), "_fts_todos");
    ck_assert_str_eq(dt_scan_internal(&mem, "SELECT * FROM main.tenancy_migrations"),
                     "tenancy_migrations");
    ck_assert_str_eq(dt_scan_internal(&mem, "SELECT name FROM sqlite_schema"), "sqlite_schema");
    ck_assert_str_eq(dt_scan_internal(&mem, "SELECT * FROM [_x]"), "_x");
    ck_assert_str_eq(dt_scan_internal(&mem, "SELECT * FROM \"_a\"\"b\""), "_a\"b");
    /* words in strings and comments are not names */
    ck_assert_ptr_null(dt_scan_internal(&mem, "SELECT '_data_changelog', 'it''s _x'"));
    ck_assert_ptr_null(dt_scan_internal(&mem, "SELECT 1 -- _secret\n"));
    ck_assert_ptr_null(dt_scan_internal(&mem, "SELECT 1 /* tenancy_x */"));
    /* a name after a string that doubles its quote is still seen */
    ck_assert_str_eq(dt_scan_internal(&mem, "SELECT 'a''b' FROM _hidden"), "_hidden");
    ck_assert_ptr_null(dt_scan_internal(&mem, "SELECT a_b FROM t1"));
}
END_TEST

START_TEST(test_timestamps)
{
    ck_assert(dt_timestamp_ok("2024-05-01"));
    ck_assert(dt_timestamp_ok("2024-05-01T10:00"));
    ck_assert(dt_timestamp_ok("2024-05-01T10:00:00Z"));
    ck_assert(dt_timestamp_ok("2024-05-01 10:00:00.123+02:00"));
    ck_assert(dt_timestamp_ok("2024-05-01T10:00:00-0500"));
    ck_assert(!dt_timestamp_ok("2024-5-1"));
    ck_assert(!dt_timestamp_ok("yesterday"));
    ck_assert(!dt_timestamp_ok("2024-05-01T10"));
    ck_assert(!dt_timestamp_ok("2024-05-01T10:00:00Zjunk"));
}
END_TEST

START_TEST(test_fts5_terms)
{
    ck_assert_str_eq(dt_fts5_terms(&mem, "  red  fox "), "\"red\" \"fox\"");
    ck_assert_str_eq(dt_fts5_terms(&mem, "a\"b OR"), "\"a\"\"b\" \"OR\"");
    ck_assert_ptr_null(dt_fts5_terms(&mem, "   "));
}
END_TEST

Suite *data_sqltext_suite(void)
{
    Suite *s = suite_create("data_sqltext");
    TCase *tc = tcase_create("sqltext");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, test_type_map);
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_default_literal);
    tcase_add_test(tc, test_scan_internal);
    tcase_add_test(tc, test_timestamps);
    tcase_add_test(tc, test_fts5_terms);
    suite_add_tcase(s, tc);
    return s;
}

/* check_data_dump.c — the whole-tenant dump's checks and the reading of stored DEFAULTs back
 * to JSON (apps/data/dump.c). */
#include <string.h>

#include "tests/unit/data/data_test.h"

static test_block *blocks;
static rest_mem mem = {test_alloc, &blocks};

static void teardown(void)
{
    test_mem_free(&blocks);
}

#define HEAD "{\"format\":\"tenancy-data-dump\",\"version\":1,\"tables\":"
#define TODOS_COLS                                                                              \
    "[{\"name\":\"title\",\"type\":\"text\",\"not_null\":true,\"unique\":true},"                \
    "{\"name\":\"done\",\"type\":\"boolean\",\"default\":false},"                               \
    "{\"name\":\"at\",\"type\":\"timestamp\"},{\"name\":\"meta\",\"type\":\"json\"}]"

/* The dump's verdict: TN_OK, or the code of its refusal. */
static const char *check(const char *text, long long *nrows)
{
    static char code[64];
    json_error_t je;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &je);
    ck_assert_msg(v != NULL, "test JSON: %s", je.text);
    dt_dump_err e = {0};
    long long n = -1;
    int rc = dt_dump_check(&mem, v, &n, &e);
    json_decref(v);
    if (nrows != NULL)
        *nrows = n;
    snprintf(code, sizeof(code), "%s", rc == TN_OK ? "ok" : e.code);
    return code;
}

START_TEST(test_good)
{
    long long n = 0;
    ck_assert_str_eq(check(HEAD "[]}", &n), "ok");
    ck_assert_int_eq(n, 0);
    ck_assert_str_eq(check(HEAD "[{\"name\":\"todos\",\"columns\":" TODOS_COLS ","
                           "\"search\":[\"title\"],\"indexes\":[{\"name\":\"todos_at\","
                           "\"unique\":false,\"columns\":[\"at\",\"id\"]}],\"rows\":["
                           "[1,\"a\",true,\"2024-05-01T10:00:00Z\",{\"k\":[1]},"
                           "\"2024-05-01T10:00:00.123Z\",\"2024-05-01 10:00:00+00\"],"
                           "[null,\"b\",null,null,null,null,null]]},"
                           "{\"name\":\"empty\"}],\"changelog\":[]}", &n),
                     "ok");
    ck_assert_int_eq(n, 2);
}
END_TEST

START_TEST(test_shape)
{
    ck_assert_str_eq(check("[]", NULL), "bad_dump");
    ck_assert_str_eq(check("{\"format\":\"pg_dump\",\"version\":1,\"tables\":[]}", NULL),
                     "bad_dump");
    ck_assert_str_eq(check("{\"format\":\"tenancy-data-dump\",\"version\":2,\"tables\":[]}",
                           NULL), "bad_dump");
    ck_assert_str_eq(check("{\"format\":\"tenancy-data-dump\",\"version\":\"1\",\"tables\":[]}",
                           NULL), "bad_dump");
    ck_assert_str_eq(check("{\"format\":\"tenancy-data-dump\",\"version\":1}", NULL), "bad_dump");
    ck_assert_str_eq(check(HEAD "[], \"changelog\":{}}", NULL), "bad_dump");
    ck_assert_str_eq(check(HEAD "[1]}", NULL), "bad_table");
    ck_assert_str_eq(check(HEAD "[{\"name\":\"t\"},{\"name\":\"t\"}]}", NULL), "bad_table");
    ck_assert_str_eq(check(HEAD "[{\"name\":\"t\",\"columns\":{}}]}", NULL), "bad_table");
}
END_TEST

START_TEST(test_names_and_types)
{
    ck_assert_str_eq(check(HEAD "[{\"name\":\"_x\"}]}", NULL), "bad_name");
    ck_assert_str_eq(check(HEAD "[{\"name\":\"tenancy_migrations\"}]}", NULL), "bad_name");
    ck_assert_str_eq(check(HEAD "[{\"name\":\"sqlite_master\"}]}", NULL), "bad_name");
    ck_assert_str_eq(check(HEAD "[{\"name\":\"stats\"}]}", NULL), "bad_name");
    ck_assert_str_eq(check(HEAD "[{\"name\":\"a\\\"b\"}]}", NULL), "bad_name");
    ck_assert_str_eq(check(HEAD "[{\"name\":\"t\",\"columns\":[{\"name\":\"a b\"}]}]}", NULL),
                     "bad_name");
    ck_assert_str_eq(check(HEAD "[{\"name\":\"t\",\"columns\":[{\"name\":\"_search\"}]}]}",
                           NULL), "bad_name");
    ck_assert_str_eq(check(HEAD "[{\"name\":\"t\",\"columns\":[{\"name\":\"id\"}]}]}", NULL),
                     "reserved_column");
    ck_assert_str_eq(check(HEAD "[{\"name\":\"t\",\"columns\":[{\"name\":\"a\"},{\"name\":"
                           "\"a\"}]}]}", NULL), "duplicate_column");
    ck_assert_str_eq(check(HEAD "[{\"name\":\"t\",\"columns\":[{\"name\":\"a\",\"type\":"
                           "\"money\"}]}]}", NULL), "unknown_type");
    ck_assert_str_eq(check(HEAD "[{\"name\":\"t\",\"columns\":[{\"name\":\"a\",\"type\":1}]}]}",
                           NULL), "bad_column");
    ck_assert_str_eq(check(HEAD "[{\"name\":\"t\",\"columns\":[{\"name\":\"a\",\"type\":"
                           "\"integer\",\"default\":\"1; DROP TABLE t\"}]}]}", NULL),
                     "bad_default");
    ck_assert_str_eq(check(HEAD "[{\"name\":\"t\",\"columns\":[{\"name\":\"a\",\"type\":"
                           "\"integer\"}],\"search\":[\"a\"]}]}", NULL), "bad_search");
    ck_assert_str_eq(check(HEAD "[{\"name\":\"t\",\"columns\":[{\"name\":\"a\"}],\"search\":"
                           "[\"b\"]}]}", NULL), "bad_search");
}
END_TEST

START_TEST(test_indexes)
{
    const char *cols = "\"columns\":[{\"name\":\"a\"}]";
    char buf[512];
    snprintf(buf, sizeof(buf), HEAD "[{\"name\":\"t\",%s,\"indexes\":[{\"name\":\"i\","
             "\"columns\":[\"nope\"]}]}]}", cols);
    ck_assert_str_eq(check(buf, NULL), "unknown_column");
    snprintf(buf, sizeof(buf), HEAD "[{\"name\":\"t\",%s,\"indexes\":[{\"name\":\"_i\","
             "\"columns\":[\"a\"]}]}]}", cols);
    ck_assert_str_eq(check(buf, NULL), "bad_name");
    snprintf(buf, sizeof(buf), HEAD "[{\"name\":\"t\",%s,\"indexes\":[{\"name\":\"t\","
             "\"columns\":[\"a\"]}]}]}", cols);
    ck_assert_str_eq(check(buf, NULL), "bad_index");   /* a table's name */
    snprintf(buf, sizeof(buf), HEAD "[{\"name\":\"t\",%s,\"indexes\":[{\"name\":\"i\","
             "\"columns\":[\"a\"]},{\"name\":\"i\",\"columns\":[\"id\"]}]}]}", cols);
    ck_assert_str_eq(check(buf, NULL), "bad_index");   /* twice */
    snprintf(buf, sizeof(buf), HEAD "[{\"name\":\"t\",%s,\"indexes\":[{\"name\":\"i\","
             "\"columns\":[]}]}]}", cols);
    ck_assert_str_eq(check(buf, NULL), "bad_index");
}
END_TEST

START_TEST(test_rows)
{
#define ROWS_DOC HEAD "[{\"name\":\"t\",\"columns\":[{\"name\":\"n\",\"type\":\"integer\"," \
                 "\"not_null\":true}],\"rows\":%s}]}"
    char buf[512];
    static const struct {
        const char *rows, *code;
    } cases[] = {
        {"[[1,2,null,null]]", "ok"},
        {"[[1,2,null]]", "bad_dump"},              /* one short */
        {"[{\"id\":1}]", "bad_dump"},              /* an object, not an array */
        {"{}", "bad_dump"},
        {"[[\"1\",2,null,null]]", "invalid_value"}, /* id as a string */
        {"[[1,2.5,null,null]]", "invalid_value"},   /* a real in an integer column */
        {"[[1,\"2\",null,null]]", "invalid_value"},
        {"[[1,null,null,null]]", "invalid_value"},  /* null in a not_null column */
        {"[[1,2,\"yesterday\",null]]", "invalid_value"},
        {"[[1,2,null,5]]", "invalid_value"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(buf, sizeof(buf), ROWS_DOC, cases[i].rows);
        ck_assert_msg(strcmp(check(buf, NULL), cases[i].code) == 0, "rows %s: %s, expected %s",
                      cases[i].rows, check(buf, NULL), cases[i].code);
    }
}
END_TEST

START_TEST(test_value_ok)
{
    json_t *s = json_string("x"), *n = json_integer(3), *r = json_real(1.5), *b = json_true();
    json_t *ts = json_string("2024-05-01T10:00:00+02:00"), *nul = json_stringn("a\0b", 3);
    ck_assert(dt_dump_value_ok(s, DT_TEXT));
    ck_assert(!dt_dump_value_ok(nul, DT_TEXT));
    ck_assert(!dt_dump_value_ok(n, DT_TEXT));
    ck_assert(dt_dump_value_ok(n, DT_REAL));
    ck_assert(dt_dump_value_ok(r, DT_REAL));
    ck_assert(!dt_dump_value_ok(r, DT_INTEGER));
    ck_assert(dt_dump_value_ok(b, DT_BOOLEAN));
    ck_assert(!dt_dump_value_ok(n, DT_BOOLEAN));
    ck_assert(dt_dump_value_ok(ts, DT_TIMESTAMP));
    ck_assert(!dt_dump_value_ok(s, DT_TIMESTAMP));
    ck_assert(dt_dump_value_ok(s, DT_JSON) && dt_dump_value_ok(json_null(), DT_INTEGER));
    json_decref(s), json_decref(n), json_decref(r), json_decref(b), json_decref(ts);
    json_decref(nul);
}
END_TEST

/* dt_default_json(stored, type) dumped compactly, or "(none)". */
static const char *dflt(const char *stored, int type)
{
    static char out[128];
    json_t *v = dt_default_json(&mem, stored, type);
    char *s = v != NULL ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    snprintf(out, sizeof(out), "%s", s != NULL ? s : "(none)");
    free(s);
    json_decref(v);
    return out;
}

START_TEST(test_default_json)
{
    /* SQLite's dflt_value: the literal as dt_default_literal wrote it */
    ck_assert_str_eq(dflt("0", DT_BOOLEAN), "false");
    ck_assert_str_eq(dflt("1", DT_BOOLEAN), "true");
    ck_assert_str_eq(dflt("42", DT_INTEGER), "42");
    ck_assert_str_eq(dflt("-1.5", DT_REAL), "-1.5");
    ck_assert_str_eq(dflt("'it''s'", DT_TEXT), "\"it's\"");
    ck_assert_str_eq(dflt("'1'", DT_JSON), "1");   /* POST /tables takes scalars only */
    ck_assert_str_eq(dflt("'{\"a\":1}'", DT_JSON), "(none)");
    ck_assert_str_eq(dflt("NULL", DT_TEXT), "null");
    /* PostgreSQL's column_default: typed literals */
    ck_assert_str_eq(dflt("false", DT_BOOLEAN), "false");
    ck_assert_str_eq(dflt("'x'::text", DT_TEXT), "\"x\"");
    ck_assert_str_eq(dflt("'-5'::bigint", DT_INTEGER), "-5");
    ck_assert_str_eq(dflt("'2024-05-01 10:00:00+00'::timestamp with time zone", DT_TIMESTAMP),
                     "\"2024-05-01 10:00:00+00\"");
    ck_assert_str_eq(dflt("'true'::jsonb", DT_JSON), "true");
    /* anything but a literal that fits is left out */
    ck_assert_str_eq(dflt("now()", DT_TIMESTAMP), "(none)");
    ck_assert_str_eq(dflt("CURRENT_TIMESTAMP", DT_TIMESTAMP), "(none)");
    ck_assert_str_eq(dflt("'abc'", DT_INTEGER), "(none)");
    ck_assert_str_eq(dflt("'not a date'", DT_TIMESTAMP), "(none)");
    ck_assert_str_eq(dflt("'x' || 'y'", DT_TEXT), "(none)");
    ck_assert_str_eq(dflt("'unterminated", DT_TEXT), "(none)");
    ck_assert_str_eq(dflt(NULL, DT_TEXT), "(none)");
}
END_TEST

Suite *data_dump_suite(void)
{
    Suite *s = suite_create("data_dump");
    TCase *tc = tcase_create("dump");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, test_good);
    tcase_add_test(tc, test_shape);
    tcase_add_test(tc, test_names_and_types);
    tcase_add_test(tc, test_indexes);
    tcase_add_test(tc, test_rows);
    tcase_add_test(tc, test_value_ok);
    tcase_add_test(tc, test_default_json);
    suite_add_tcase(s, tc);
    return s;
}

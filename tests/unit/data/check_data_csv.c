/* check_data_csv.c — CSV out with the formula rule, and CSV in (apps/data/csv.c). */
#include <string.h>

#include "tests/unit/data/data_test.h"

static test_block *blocks;
static rest_mem mem = {test_alloc, &blocks};

static void teardown(void)
{
    test_mem_free(&blocks);
}

static const char *field(const char *s)
{
    dt_str b;
    dt_str_init(&b, &mem);
    dt_csv_field(&b, s);
    return dt_str_get(&b);
}

START_TEST(test_field)
{
    ck_assert_str_eq(field("plain"), "plain");
    ck_assert_str_eq(field(""), "");
    ck_assert_str_eq(field(NULL), "");
    ck_assert_str_eq(field("a,b"), "\"a,b\"");
    ck_assert_str_eq(field("say \"hi\""), "\"say \"\"hi\"\"\"");
    ck_assert_str_eq(field("two\nlines"), "\"two\nlines\"");
    /* what a spreadsheet would run, neutralised as the panel's export does */
    ck_assert_str_eq(field("=1+1"), "\"'=1+1\"");
    ck_assert_str_eq(field("+cmd"), "\"'+cmd\"");
    ck_assert_str_eq(field("-2"), "\"'-2\"");
    ck_assert_str_eq(field("@SUM(A1)"), "\"'@SUM(A1)\"");
    ck_assert_str_eq(field("\tx"), "\"'\tx\"");
    ck_assert_str_eq(field("a=b"), "a=b");
}
END_TEST

START_TEST(test_parse)
{
    const char *text = "title,prio,note\r\nalpha,1,\"a, \"\"quoted\"\" one\"\r\n"
                       "beta,,\"\"\n\ngamma,3,\"two\nlines\"";
    dt_csv c;
    int line = 0;
    ck_assert_int_eq(dt_csv_parse(&mem, text, strlen(text), &c, &line), TN_OK);
    ck_assert_int_eq(c.ncols, 3);
    ck_assert_str_eq(c.header[2], "note");
    ck_assert_int_eq(c.nrows, 3);
    ck_assert_str_eq(c.rows[0][2], "a, \"quoted\" one");
    ck_assert_ptr_null(c.rows[1][1]);      /* empty unquoted: NULL */
    ck_assert_str_eq(c.rows[1][2], "");    /* empty quoted: "" */
    ck_assert_str_eq(c.rows[2][0], "gamma");
    ck_assert_str_eq(c.rows[2][2], "two\nlines");
}
END_TEST

static int parse_line(const char *text)
{
    dt_csv c;
    int line = 0;
    int rc = dt_csv_parse(&mem, text, strlen(text), &c, &line);
    ck_assert_int_eq(rc, TN_INVALID);
    return line;
}

START_TEST(test_parse_errors)
{
    ck_assert_int_eq(parse_line("a,b\n1,2\n3\n"), 3);           /* short row */
    ck_assert_int_eq(parse_line("a,b\n1,2,3\n"), 2);            /* long row */
    ck_assert_int_eq(parse_line("a,b\n\"1,2\n"), 2);            /* open quote */
    ck_assert_int_eq(parse_line("a,b\n1\"x,2\n"), 2);           /* quote in a bare field */
    ck_assert_int_eq(parse_line("a,b\n\"1\"x,2\n"), 2);         /* text after a quote */
    ck_assert_int_eq(parse_line("a,,b\n1,2,3\n"), 1);           /* an empty column name */
}
END_TEST

Suite *data_csv_suite(void)
{
    Suite *s = suite_create("data_csv");
    TCase *tc = tcase_create("csv");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, test_field);
    tcase_add_test(tc, test_parse);
    tcase_add_test(tc, test_parse_errors);
    suite_add_tcase(s, tc);
    return s;
}

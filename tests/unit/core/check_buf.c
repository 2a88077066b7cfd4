/* check_buf.c — growable buffer and the JSON/HTML/CSV escapers. */
#include "core/first.h"
#include "core/buf.h"

#include <check.h>
#include <string.h>

START_TEST(test_append_and_printf)
{
    buf b = BUF_INIT;
    for (int i = 0; i < 1000; i++)
        buf_printf(&b, "%d,", i);
    ck_assert(!b.oom);
    ck_assert(strncmp(b.p, "0,1,2,", 6) == 0);
    ck_assert_uint_eq(strlen(b.p), b.len);
    buf_reset(&b);
    buf_u64(&b, 18446744073709551615ull);
    buf_putc(&b, ' ');
    buf_i64(&b, -9223372036854775807LL - 1);
    ck_assert_str_eq(b.p, "18446744073709551615 -9223372036854775808");
    buf_free(&b);
}
END_TEST

START_TEST(test_json_escaping)
{
    buf b = BUF_INIT;
    buf_json_str(&b, "a\"b\\c\n\x01\xc3\xa9\xff");
    ck_assert_str_eq(b.p, "\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\\ufffd\"");
    buf_reset(&b);
    buf_json_str(&b, NULL);
    ck_assert_str_eq(b.p, "null");
    buf_reset(&b);
    /* Overlong encodings and surrogates are not valid UTF-8. */
    buf_json_str(&b, "\xc0\xaf\xed\xa0\x80");
    ck_assert_ptr_null(strstr(b.p, "\xc0"));
    ck_assert_ptr_null(strstr(b.p, "\xed"));
    buf_free(&b);
}
END_TEST

START_TEST(test_html_and_csv)
{
    buf b = BUF_INIT;
    buf_html(&b, "<script>alert('x')&\"</script>");
    ck_assert_str_eq(b.p, "&lt;script&gt;alert(&#39;x&#39;)&amp;&quot;&lt;/script&gt;");
    buf_reset(&b);
    buf_csv(&b, "plain");
    buf_putc(&b, ',');
    buf_csv(&b, "a,\"b\"");
    buf_putc(&b, ',');
    buf_csv(&b, "=cmd()");
    ck_assert_str_eq(b.p, "plain,\"a,\"\"b\"\"\",\"'=cmd()\"");
    buf_free(&b);
}
END_TEST

/* OWASP's CSV injection list: a cell that starts with = + - @, a tab or a carriage return
 * is read as a formula by some spreadsheet (a tab or CR in front of = is skipped by Excel
 * when it imports), so each gets a leading quote and is quoted as a field. */
START_TEST(test_csv_formulas)
{
    static const char *const cases[][2] = {
        {"=1+2", "\"'=1+2\""},
        {"+1+2", "\"'+1+2\""},
        {"-1+2", "\"'-1+2\""},
        {"@SUM(A1)", "\"'@SUM(A1)\""},
        {"\t=cmd|' /C calc'!A0", "\"'\t=cmd|' /C calc'!A0\""},
        {"\r=cmd", "\"'\r=cmd\""},
        {"=\"x\",y", "\"'=\"\"x\"\",y\""},   /* quoting still applies after the quote */
        {"a=b", "a=b"},                      /* only the first byte counts */
        {" =x", " =x"},
        {"'=x", "'=x"},
        /* a line break inside a value is quoted, or it would end the record there and
         * start a row of the value's choosing */
        {"a\rb", "\"a\rb\""},
        {"a\nb", "\"a\nb\""},
        {"a\r\n=cmd", "\"a\r\n=cmd\""},
        {"", ""},
    };
    buf b = BUF_INIT;
    for (size_t i = 0; i < TN_ARRAY_LEN(cases); i++) {
        buf_reset(&b);
        buf_csv(&b, cases[i][0]);
        ck_assert_msg(strcmp(b.p ? b.p : "", cases[i][1]) == 0, "case %zu: got [%s], want [%s]",
                      i, b.p ? b.p : "", cases[i][1]);
    }
    buf_free(&b);
}
END_TEST

START_TEST(test_utf8_prefix)
{
    ck_assert_uint_eq(utf8_valid_prefix("abc\xe2\x82\xac", 6), 6);
    ck_assert_uint_eq(utf8_valid_prefix("abc\xe2\x82", 5), 3);
    ck_assert_uint_eq(utf8_valid_prefix("\xf5\x80\x80\x80", 4), 0);
}
END_TEST

/* The request path's inline strlen, strchr and strcmp (== 0). */
START_TEST(test_str_len_chr_eq)
{
    ck_assert_uint_eq(str_len(""), 0);
    ck_assert_uint_eq(str_len("t00042.bench.test"), 17);
    const char *h = "acme.example.com:8080";
    ck_assert_ptr_eq(str_chr(h, ':'), h + 16);
    ck_assert_ptr_eq(str_chr(h, '\0'), h + 21);   /* the NUL is found, as strchr finds it */
    ck_assert_ptr_null(str_chr(h, '?'));
    ck_assert(str_eq("", ""));
    ck_assert(str_eq("/_theme.css", "/_theme.css"));
    ck_assert(!str_eq("/_theme.css", "/_theme.cs"));   /* a prefix either way is not equal */
    ck_assert(!str_eq("/_theme.cs", "/_theme.css"));
    ck_assert(!str_eq(".bench.test", ".bench.tesT"));
}
END_TEST

/* buf_reset leaves an empty buf's memory alone, but a reset buf always reads as "". */
START_TEST(test_reset_keeps_nul)
{
    buf b = BUF_INIT;
    buf_reset(&b);   /* no memory yet */
    ck_assert_ptr_null(b.p);
    buf_puts(&b, "Status: 200");
    buf_reset(&b);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_str_eq(b.p, "");
    buf_reset(&b);   /* already empty */
    ck_assert_str_eq(b.p, "");
    buf_append(&b, "", 0);
    buf_reset(&b);
    ck_assert_str_eq(b.p, "");
    buf_free(&b);
}
END_TEST

Suite *buf_suite(void);
/* f writes v's digits (no NUL) and returns how many: they are want. */
static void digits_are(size_t (*f)(char *, unsigned long long), unsigned long long v,
                       const char *want)
{
    char n[32];
    size_t k = f(n, v);
    n[k] = '\0';
    ck_assert_str_eq(n, want);
}

START_TEST(test_str_copy_u64)
{
    char d[8];
    ck_assert_uint_eq(str_copy(d, sizeof(d), "abc"), 3);
    ck_assert_str_eq(d, "abc");
    ck_assert_uint_eq(str_copy(d, sizeof(d), "abcdefghij"), 7);   /* cut, still terminated */
    ck_assert_str_eq(d, "abcdefg");
    ck_assert_uint_eq(str_copy(d, 1, "abc"), 0);
    ck_assert_str_eq(d, "");
    ck_assert_uint_eq(str_copy(d, 0, "abc"), 0);
    digits_are(str_u64, 0, "0");
    digits_are(str_u64, 18446744073709551615ULL, "18446744073709551615");
    digits_are(str_u64, 404, "404");
    digits_are(str_x64, 0, "0");
    digits_are(str_x64, 18446744073709551615ULL, "ffffffffffffffff");
    digits_are(str_x64, 0x1a2b, "1a2b");
}
END_TEST

Suite *buf_suite(void)
{
    Suite *s = suite_create("buf");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_str_copy_u64);
    tcase_add_test(tc, test_str_len_chr_eq);
    tcase_add_test(tc, test_reset_keeps_nul);
    tcase_add_test(tc, test_append_and_printf);
    tcase_add_test(tc, test_json_escaping);
    tcase_add_test(tc, test_html_and_csv);
    tcase_add_test(tc, test_csv_formulas);
    tcase_add_test(tc, test_utf8_prefix);
    suite_add_tcase(s, tc);
    return s;
}

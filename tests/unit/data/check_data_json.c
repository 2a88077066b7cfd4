/* check_data_json.c — a value read back as JSON (apps/data/jsonout.c): the text a read's rows
 * are written with (dt_value_write, dt_json_string) must be, byte for byte, what json_dumps
 * gives for the value dt_value_json builds, and absent exactly when that value is. */
#include <stdio.h>
#include <string.h>

#include "tests/unit/data/data_test.h"

static test_block *blocks;
static rest_mem mem = {test_alloc, &blocks};

static void teardown(void)
{
    test_mem_free(&blocks);
}

/* Compare both paths for one value; a failure names the type, dialect and input in hex. */
static void same(rest_dialect dialect, int type, const char *s)
{
    dt_req d = {.dialect = dialect, .mem = mem};
    json_t *v = dt_value_json(&d, type, s);
    char *want = v != NULL ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(v);
    dt_str b;
    dt_str_init(&b, &mem);
    dt_str_add(&b, "<");
    bool wrote = dt_value_write(&d, &b, type, s);
    const char *got = dt_str_get(&b);
    char hex[512] = "";
    for (size_t i = 0; s != NULL && s[i] != '\0' && i < 200; i++)
        snprintf(hex + strlen(hex), sizeof(hex) - strlen(hex), "%02x", (unsigned char)s[i]);
    if (want == NULL) {
        ck_assert_msg(!wrote && strcmp(got, "<") == 0,
                      "type %d dialect %d input %s: jansson gives no value, written '%s'", type,
                      dialect, hex, got);
    } else {
        ck_assert_msg(wrote && strcmp(got + 1, want) == 0,
                      "type %d dialect %d input %s: jansson '%s', written '%s'", type, dialect,
                      hex, want, got);
    }
    free(want);
}

static void same_all(const char *s)
{
    for (int type = 0; type < DT_NTYPES; type++) {
        same(REST_SQLITE, type, s);
        same(REST_POSTGRES, type, s);
    }
}

START_TEST(test_values)
{
    static const char *const cases[] = {
        NULL, "", "0", "1", "-1", "-0", "00", "007", "+7", " 7", "7 ", "42", "-42",
        "123456789012345678", "-123456789012345678", "1234567890123456789",
        "9223372036854775807", "-9223372036854775808", "9223372036854775808",
        "99999999999999999999", "1.5", "-0.0", "1e3", "1E+300", "1e999", "-1e999", "inf",
        "-inf", "nan", "0x10", ".5", "5.", "3.14159265358979323846", "2.5e-310",
        "t", "f", "true", "false", "TRUE", "2", "[1,2]", "{\"a\":1}", "\"s\"", "null", "{",
        "plain text", "say \"hi\"", "back\\slash", "a/b", "tab\there", "line\nfeed",
        "cr\rlf", "\b\f", "\x01\x02\x1f", "\x7f", "caf\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
        "\xc3", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff", "a\xe2\x82", "\xe2\x82\xacx",
        "2026-12-05T01:02:03.456Z",
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        same_all(cases[i]);
}
END_TEST

/* Every single byte, and every pair of bytes from a set that covers each class (controls,
 * the escapes, ASCII, continuation bytes, lead bytes of every length, bytes never in
 * UTF-8). */
START_TEST(test_bytes)
{
    char s[3] = {0};
    for (int c = 1; c < 256; c++) {
        s[0] = (char)c;
        s[1] = '\0';
        same_all(s);
    }
    static const unsigned char set[] = {0x01, 0x08, 0x0a, 0x1f, 0x20, 0x22, 0x2f, 0x30, 0x5c,
                                        0x7f, 0x80, 0xbf, 0xc0, 0xc2, 0xdf, 0xe0, 0xed, 0xef,
                                        0xf0, 0xf4, 0xf5, 0xff};
    for (size_t i = 0; i < sizeof(set); i++) {
        for (size_t j = 0; j < sizeof(set); j++) {
            s[0] = (char)set[i];
            s[1] = (char)set[j];
            same(REST_SQLITE, DT_TEXT, s);
            same(REST_SQLITE, DT_INTEGER, s);
        }
    }
}
END_TEST

/* Random strings, deterministic: mostly ASCII with some of everything. */
START_TEST(test_random)
{
    unsigned seed = 12345;
    char s[24];
    for (int n = 0; n < 20000; n++) {
        int len = (int)(rand_r(&seed) % (sizeof(s) - 1));
        for (int i = 0; i < len; i++) {
            unsigned r = (unsigned)rand_r(&seed);
            s[i] = (char)(r % 4 == 0 ? 1 + r % 255 : r % 3 == 0 ? '0' + r % 10 : 32 + r % 95);
        }
        s[len] = '\0';
        same(REST_SQLITE, n % DT_NTYPES, s);
    }
}
END_TEST

START_TEST(test_string)
{
    dt_str b;
    dt_str_init(&b, &mem);
    ck_assert(dt_json_string(&b, "a\"b\\c\x01"));
    ck_assert_str_eq(dt_str_get(&b), "\"a\\\"b\\\\c\\u0001\"");
    size_t len = b.len;
    ck_assert(!dt_json_string(&b, "bad \xff"));   /* json_string refuses it */
    ck_assert_uint_eq(b.len, len);
    dt_str_cut(&b, 1);
    ck_assert_str_eq(dt_str_get(&b), "\"");
}
END_TEST

Suite *data_json_suite(void)
{
    Suite *s = suite_create("data_json");
    TCase *tc = tcase_create("json");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, test_values);
    tcase_add_test(tc, test_bytes);
    tcase_add_test(tc, test_random);
    tcase_add_test(tc, test_string);
    suite_add_tcase(s, tc);
    return s;
}

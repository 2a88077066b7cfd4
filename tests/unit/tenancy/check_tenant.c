/*
 * check_tenant.c — tenancy/tenant.c on its own: slugs, host names, the settings parser and
 * the one-allocation tenant records. No database, no files.
 *
 * Owns: these cases only. Must not: open the registry (check_registry.c does that).
 */
#include "core/first.h"
#include "tenancy/tenant.h"
#include "core/arena.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- slugs ---------------------------------------------------------------------------------- */

START_TEST(test_slug_valid)
{
    char s63[64], s64[65];
    memset(s63, 'a', 63);
    s63[63] = '\0';
    memset(s64, 'a', 64);
    s64[64] = '\0';
    const char *good[] = {"a", "acme", "a-b", "0a", "9", "a--b", "xn--bcher-kva", s63};
    for (size_t i = 0; i < TN_ARRAY_LEN(good); i++)
        ck_assert_msg(tenant_slug_valid(good[i]), "'%s' should be valid", good[i]);
    const char *bad[] = {"", "-a", "a-", "-", "A", "Acme", "a b", "a_b", "a.b", "a/b",
                         "\xc3\xa4", "a%", s64, " a"};
    for (size_t i = 0; i < TN_ARRAY_LEN(bad); i++)
        ck_assert_msg(!tenant_slug_valid(bad[i]), "'%s' should be invalid", bad[i]);
    ck_assert(!tenant_slug_valid(NULL));
}
END_TEST

START_TEST(test_states)
{
    for (int i = 0; i < TENANT_NSTATES; i++)
        ck_assert_int_eq(tenant_state_parse(tenant_state_name(i)), i);
    ck_assert_str_eq(tenant_state_name(TENANT_ACTIVE), "active");
    ck_assert_str_eq(tenant_state_name(TENANT_DELETING), "deleting");
    ck_assert_str_eq(tenant_state_name(-1), "unknown");
    ck_assert_str_eq(tenant_state_name(TENANT_NSTATES), "unknown");
    ck_assert_int_eq(tenant_state_parse("Active"), -1);
    ck_assert_int_eq(tenant_state_parse(""), -1);
}
END_TEST

/* ---- host names ----------------------------------------------------------------------------- */

static void host_ok(const char *in, const char *want)
{
    char out[256];
    size_t n = tenant_host_normalise(in, out, sizeof(out));
    ck_assert_msg(n > 0, "'%s' should be accepted", in);
    ck_assert_str_eq(out, want);
    ck_assert_uint_eq(n, strlen(want));
}

static void host_bad(const char *in)
{
    char out[256];
    ck_assert_msg(tenant_host_normalise(in, out, sizeof(out)) == 0, "'%s' should be refused",
                  in);
}

START_TEST(test_host_normalise_basic)
{
    host_ok("example.com", "example.com");
    host_ok("Example.COM", "example.com");
    host_ok("localhost", "localhost");
    host_ok("a", "a");
    host_ok("a-b.c-d.example", "a-b.c-d.example");
    host_ok("123.example", "123.example");
    host_ok("a1.b2", "a1.b2");
    /* ports */
    host_ok("example.com:8080", "example.com");
    host_ok("example.com:80", "example.com");
    host_bad("example.com:");
    host_bad("example.com:8a");
    host_bad("example.com:80:90");
    host_bad(":80");
    /* trailing dot */
    host_ok("example.com.", "example.com");
    host_ok("EXAMPLE.com.:443", "example.com");
    host_bad("example.com..");
    host_bad(".");
    host_bad("..");
    /* empty labels */
    host_bad("");
    host_bad(".example.com");
    host_bad("a..b");
    /* hyphens at a label's ends, other characters */
    host_bad("-a.com");
    host_bad("a-.com");
    host_bad("a.-b.com");
    host_bad("a_b.com");
    host_bad("a b.com");
    host_bad("a/b");
    host_bad("a@b.com");
    host_bad("b\xc3\xbc" "cher.example");   /* raw UTF-8: only punycode is a host name */
    host_bad(NULL);
}
END_TEST

START_TEST(test_host_normalise_ip_literals)
{
    host_bad("1.2.3.4");
    host_bad("1.2.3.4:80");
    host_bad("127.0.0.1.");
    host_bad("123");
    host_bad("0x7f.1");
    host_bad("0X7F.0.0.1");
    host_bad("a.123");
    host_bad("a.0x1f");
    host_bad("a.0x");
    host_bad("[::1]");
    host_bad("[::1]:80");
    host_bad("::1");
    host_bad("fe80::1");
    host_bad("2001:db8::1");
    /* names that only look numeric in part */
    host_ok("1.2.3.a", "1.2.3.a");
    host_ok("a.0xg", "a.0xg");
    host_ok("a.1x", "a.1x");
}
END_TEST

START_TEST(test_host_normalise_lengths)
{
    char in[400], out[256];
    /* a label of 63 bytes is fine, 64 is not */
    memset(in, 'a', 63);
    strcpy(in + 63, ".com");
    host_ok(in, in);
    memset(in, 'a', 64);
    strcpy(in + 64, ".com");
    host_bad(in);
    /* 253 bytes in all: 63+1+63+1+63+1+61 */
    size_t o = 0;
    for (int l = 0; l < 4; l++) {
        size_t len = l < 3 ? 63 : 61;
        memset(in + o, 'a' + l, len);
        o += len;
        in[o++] = '.';
    }
    in[--o] = '\0';
    ck_assert_uint_eq(strlen(in), 253);
    host_ok(in, in);
    /* ...with a trailing dot (254 bytes written) still fine */
    in[o] = '.';
    in[o + 1] = '\0';
    ck_assert_uint_eq(tenant_host_normalise(in, out, sizeof(out)), 253);
    /* 254 bytes of name are too many */
    in[o] = 'x';
    in[o + 1] = '\0';
    host_bad(in);
    in[o + 1] = '.';
    in[o + 2] = '\0';
    host_bad(in);
    /* far too long input stops early, whatever follows */
    memset(in, 'a', sizeof(in) - 1);
    in[sizeof(in) - 1] = '\0';
    host_bad(in);
    /* the output buffer must hold a maximal name */
    ck_assert_uint_eq(tenant_host_normalise("example.com", out, 253), 0);
    ck_assert_uint_eq(tenant_host_normalise("example.com", out, 254), 11);
}
END_TEST

START_TEST(test_host_normalise_punycode)
{
    host_ok("xn--bcher-kva.example", "xn--bcher-kva.example");
    host_ok("XN--BCHER-KVA.EXAMPLE", "xn--bcher-kva.example");
    host_ok("www.xn--fsq.xn--0zwm56d", "www.xn--fsq.xn--0zwm56d");
    host_bad("xn--.example-");
}
END_TEST

/* ---- settings ------------------------------------------------------------------------------- */

static arena *A;

static void *alloc_cb(void *ctx, size_t n) { return arena_alloc(ctx, n); }

static void settings_setup(void) { A = arena_create(0); }
static void settings_teardown(void)
{
    arena_destroy(A);
    A = NULL;
}

static int parse(const char *json, tenant_setting **s) { return settings_parse(json, s, alloc_cb, A); }

START_TEST(test_settings_basic)
{
    tenant_setting *s;
    ck_assert_int_eq(parse("{}", &s), 0);
    ck_assert_int_eq(parse("  { \n\t}  ", &s), 0);
    ck_assert_int_eq(parse(NULL, &s), 0);   /* NULL reads as {} */
    ck_assert_int_eq(parse("{\"b\":\"2\",\"a\":\"1\",\"c\":\"3\"}", &s), 3);
    ck_assert_str_eq(s[0].key, "a");
    ck_assert_str_eq(s[1].key, "b");
    ck_assert_str_eq(s[2].key, "c");
    ck_assert_str_eq(s[2].value, "3");
    /* numbers and booleans come back as their text */
    ck_assert_int_eq(parse("{ \"n\" : -12.5e3 , \"t\":true,\"f\":false, \"z\":0}", &s), 4);
    ck_assert_str_eq(s[0].key, "f");
    ck_assert_str_eq(s[0].value, "false");
    ck_assert_str_eq(s[1].value, "-12.5e3");
    ck_assert_str_eq(s[2].value, "true");
    ck_assert_str_eq(s[3].value, "0");
    /* the string "null" is a value, the literal is not */
    ck_assert_int_eq(parse("{\"a\":\"null\",\"b\":null}", &s), 1);
    ck_assert_str_eq(s[0].key, "a");
    ck_assert_str_eq(s[0].value, "null");
}
END_TEST

START_TEST(test_settings_escapes)
{
    tenant_setting *s;
    ck_assert_int_eq(parse("{\"k\":\"q\\\"b\\\\s\\/n\\nt\\tr\\rb\\bf\\f\"}", &s), 1);
    ck_assert_str_eq(s[0].value, "q\"b\\s/n\nt\tr\rb\bf\f");
    ck_assert_int_eq(parse("{\"\\u00e9\":\"\\u20AC \\u0041\"}", &s), 1);
    ck_assert_str_eq(s[0].key, "\xc3\xa9");
    ck_assert_str_eq(s[0].value, "\xe2\x82\xac A");
    /* a surrogate pair is one code point, in 4 bytes of UTF-8 */
    ck_assert_int_eq(parse("{\"e\":\"\\ud83d\\ude00!\"}", &s), 1);
    ck_assert_str_eq(s[0].value, "\xf0\x9f\x98\x80!");
    ck_assert_int_eq(parse("{\"e\":\"\\uD834\\uDD1E\"}", &s), 1);
    ck_assert_str_eq(s[0].value, "\xf0\x9d\x84\x9e");
    /* raw UTF-8 passes through */
    ck_assert_int_eq(parse("{\"k\":\"caf\xc3\xa9\"}", &s), 1);
    ck_assert_str_eq(s[0].value, "caf\xc3\xa9");
    /* broken escapes */
    ck_assert_int_eq(parse("{\"e\":\"\\ud83d\"}", &s), -1);          /* lone high */
    ck_assert_int_eq(parse("{\"e\":\"\\ud83dx\"}", &s), -1);
    ck_assert_int_eq(parse("{\"e\":\"\\ud83d\\u0041\"}", &s), -1);   /* high + not low */
    ck_assert_int_eq(parse("{\"e\":\"\\ude00\"}", &s), -1);          /* lone low */
    ck_assert_int_eq(parse("{\"e\":\"\\u12\"}", &s), -1);
    ck_assert_int_eq(parse("{\"e\":\"\\u12G4\"}", &s), -1);
    ck_assert_int_eq(parse("{\"e\":\"\\x41\"}", &s), -1);
    ck_assert_int_eq(parse("{\"e\":\"\\", &s), -1);
    ck_assert_int_eq(parse("{\"e\":\"abc", &s), -1);
}
END_TEST

START_TEST(test_settings_refused)
{
    tenant_setting *s;
    /* NUL in a C string: refused, never truncated */
    ck_assert_int_eq(parse("{\"k\":\"a\\u0000b\"}", &s), -1);
    ck_assert_int_eq(parse("{\"\\u0000\":\"x\"}", &s), -1);
    /* raw control characters */
    ck_assert_int_eq(parse("{\"k\":\"a\nb\"}", &s), -1);
    ck_assert_int_eq(parse("{\"k\":\"a\tb\"}", &s), -1);
    /* nested values */
    ck_assert_int_eq(parse("{\"k\":{\"a\":\"b\"}}", &s), -1);
    ck_assert_int_eq(parse("{\"k\":[1,2]}", &s), -1);
    ck_assert_int_eq(parse("{\"k\":{}}", &s), -1);
    /* not an object, or not only one */
    ck_assert_int_eq(parse("", &s), -1);
    ck_assert_int_eq(parse("[]", &s), -1);
    ck_assert_int_eq(parse("\"a\"", &s), -1);
    ck_assert_int_eq(parse("1", &s), -1);
    ck_assert_int_eq(parse("{} {}", &s), -1);
    ck_assert_int_eq(parse("{}x", &s), -1);
    /* syntax */
    ck_assert_int_eq(parse("{\"a\":1,}", &s), -1);
    ck_assert_int_eq(parse("{,}", &s), -1);
    ck_assert_int_eq(parse("{\"a\" 1}", &s), -1);
    ck_assert_int_eq(parse("{\"a\":}", &s), -1);
    ck_assert_int_eq(parse("{a:1}", &s), -1);
    ck_assert_int_eq(parse("{\"a\":1 \"b\":2}", &s), -1);
    ck_assert_int_eq(parse("{\"a\":tru}", &s), -1);
    ck_assert_int_eq(parse("{\"a\":nullx}", &s), -1);
    ck_assert_int_eq(parse("{\"a\":-}", &s), -1);
    ck_assert_int_eq(parse("{\"a\":'x'}", &s), -1);
    ck_assert_int_eq(parse("{\"a\":1", &s), -1);
    /* numbers JSON does not have (the registry would have kept them as text) */
    const char *loose[] = {"01", "-01", "00", "1.", "-2.", ".5", "5e", "5e+", "1E-", "1-2",
                           "1+2", "1.2.3", "1e2e3", "+1", "--1", "0x10", "1.e5", "-"};
    for (size_t i = 0; i < sizeof(loose) / sizeof(loose[0]); i++) {
        char doc[64];
        snprintf(doc, sizeof(doc), "{\"n\":%s}", loose[i]);
        ck_assert_msg(parse(doc, &s) == -1, "accepted %s", doc);
    }
}
END_TEST

START_TEST(test_settings_numbers)
{
    tenant_setting *s;
    /* every form of RFC 8259's number grammar, each kept exactly as written */
    const char *ok[] = {"0",   "-0",     "7",      "10",   "-123", "0.5",   "-0.0",  "3.14159",
                        "1e5", "1E5",    "1e+05",  "2e-3", "0e0",  "-0.5E-10", "12.50e+1"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        char doc[64];
        snprintf(doc, sizeof(doc), "{ \"n\" : %s }", ok[i]);
        ck_assert_msg(parse(doc, &s) == 1, "refused %s", doc);
        ck_assert_str_eq(s[0].value, ok[i]);
    }
}
END_TEST

START_TEST(test_settings_duplicates_and_null)
{
    tenant_setting *s;
    /* a key given twice: the later value wins */
    ck_assert_int_eq(parse("{\"a\":\"1\",\"b\":\"x\",\"a\":\"2\"}", &s), 2);
    ck_assert_str_eq(s[0].key, "a");
    ck_assert_str_eq(s[0].value, "2");
    ck_assert_str_eq(s[1].value, "x");
    ck_assert_int_eq(parse("{\"a\":1,\"a\":2,\"a\":3}", &s), 1);
    ck_assert_str_eq(s[0].value, "3");
    /* null values are dropped; a later null drops an earlier value */
    ck_assert_int_eq(parse("{\"a\":null}", &s), 0);
    ck_assert_int_eq(parse("{\"a\":\"1\",\"b\":\"2\",\"a\":null}", &s), 1);
    ck_assert_str_eq(s[0].key, "b");
    /* ...and a value after the null comes back */
    ck_assert_int_eq(parse("{\"a\":\"1\",\"a\":null,\"a\":\"3\"}", &s), 1);
    ck_assert_str_eq(s[0].value, "3");
    /* many keys stay sorted */
    char big[4096];
    size_t o = 0;
    big[o++] = '{';
    for (int i = 99; i >= 0; i--)
        o += (size_t)snprintf(big + o, sizeof(big) - o, "%s\"k%02d\":\"%d\"", i < 99 ? "," : "", i, i);
    big[o++] = '}';
    big[o] = '\0';
    ck_assert_int_eq(parse(big, &s), 100);
    for (int i = 1; i < 100; i++)
        ck_assert_int_lt(strcmp(s[i - 1].key, s[i].key), 0);
    ck_assert_str_eq(s[42].key, "k42");
    ck_assert_str_eq(s[42].value, "42");
}
END_TEST

/* ---- records -------------------------------------------------------------------------------- */

START_TEST(test_rec_new_dup)
{
    tenant_rec *t = tenant_rec_new(7, "acme", "Acme Inc.", TENANT_SUSPENDED, "sqlite",
                                   "acme.db", 3, 100, 200,
                                   "{\"theme\":\"dark\",\"color\":\"red\",\"n\":5}");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->id, 7);
    ck_assert_str_eq(t->slug, "acme");
    ck_assert_str_eq(t->name, "Acme Inc.");
    ck_assert_int_eq(t->state, TENANT_SUSPENDED);
    ck_assert_str_eq(t->placement, "sqlite");
    ck_assert_str_eq(t->storage, "acme.db");
    ck_assert_int_eq(t->max_workers, 3);
    ck_assert_int_eq(t->created_at, 100);
    ck_assert_int_eq(t->updated_at, 200);
    ck_assert_int_eq(t->nsettings, 3);
    ck_assert_str_eq(t->settings[0].key, "color");
    ck_assert_str_eq(tenant_setting_get(t, "theme"), "dark");
    ck_assert_str_eq(tenant_setting_get(t, "n"), "5");
    ck_assert_str_eq(tenant_setting_get(t, "color"), "red");
    ck_assert_ptr_null(tenant_setting_get(t, "nope"));
    ck_assert_ptr_null(tenant_setting_get(t, ""));
    ck_assert_str_eq(t->settings_json, "{\"theme\":\"dark\",\"color\":\"red\",\"n\":5}");
    /* one allocation: every string lies inside it */
    const char *lo = (const char *)t, *hi = lo + t->size;
    ck_assert(t->slug > lo && t->slug < hi);
    ck_assert(t->settings_json > lo && t->settings_json < hi);
    ck_assert(t->settings[2].value > lo && t->settings[2].value < hi);

    tenant_rec *d = tenant_rec_dup(t);
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_ne(d, t);
    ck_assert_uint_eq(d->size, t->size);
    memset(t, 0xAA, t->size);   /* the copy must not point into the original */
    free(t);
    ck_assert_int_eq(d->id, 7);
    ck_assert_str_eq(d->slug, "acme");
    ck_assert_str_eq(d->name, "Acme Inc.");
    ck_assert_str_eq(d->storage, "acme.db");
    ck_assert_int_eq(d->state, TENANT_SUSPENDED);
    ck_assert_int_eq(d->nsettings, 3);
    ck_assert_str_eq(tenant_setting_get(d, "theme"), "dark");
    free(d);
}
END_TEST

START_TEST(test_rec_defaults_and_refusals)
{
    tenant_rec *t = tenant_rec_new(1, NULL, NULL, TENANT_ACTIVE, NULL, NULL, 0, 0, 0, NULL);
    ck_assert_ptr_nonnull(t);
    ck_assert_str_eq(t->slug, "");
    ck_assert_str_eq(t->name, "");
    ck_assert_str_eq(t->placement, "");
    ck_assert_str_eq(t->storage, "");
    ck_assert_str_eq(t->settings_json, "{}");
    ck_assert_int_eq(t->nsettings, 0);
    ck_assert_ptr_null(tenant_setting_get(t, "a"));
    tenant_rec *d = tenant_rec_dup(t);
    ck_assert_ptr_nonnull(d);
    ck_assert_str_eq(d->settings_json, "{}");
    free(d);
    free(t);
    /* settings that are not a flat object: no record */
    ck_assert_ptr_null(tenant_rec_new(1, "a", "A", 0, "", "", 0, 0, 0, "[1]"));
    ck_assert_ptr_null(tenant_rec_new(1, "a", "A", 0, "", "", 0, 0, 0, "{\"a\":{}}"));
    ck_assert_ptr_null(tenant_rec_new(1, "a", "A", 0, "", "", 0, 0, 0, "not json"));
}
END_TEST

Suite *tenant_suite(void);
Suite *tenant_suite(void)
{
    Suite *s = suite_create("tenant");
    TCase *tc = tcase_create("names");
    tcase_add_test(tc, test_slug_valid);
    tcase_add_test(tc, test_states);
    tcase_add_test(tc, test_host_normalise_basic);
    tcase_add_test(tc, test_host_normalise_ip_literals);
    tcase_add_test(tc, test_host_normalise_lengths);
    tcase_add_test(tc, test_host_normalise_punycode);
    suite_add_tcase(s, tc);
    tc = tcase_create("settings");
    tcase_add_checked_fixture(tc, settings_setup, settings_teardown);
    tcase_add_test(tc, test_settings_basic);
    tcase_add_test(tc, test_settings_escapes);
    tcase_add_test(tc, test_settings_refused);
    tcase_add_test(tc, test_settings_numbers);
    tcase_add_test(tc, test_settings_duplicates_and_null);
    suite_add_tcase(s, tc);
    tc = tcase_create("records");
    tcase_add_test(tc, test_rec_new_dup);
    tcase_add_test(tc, test_rec_defaults_and_refusals);
    suite_add_tcase(s, tc);
    return s;
}

/* check_conf.c — the table-driven INI parser: types, sections, errors with file:line. */
#include "core/first.h"
#include "core/conf.h"
#include "core/rc.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct cfg {
    const char *name;
    int workers;
    bool on;
    int64_t timeout;
    int64_t slice;
    int64_t size;
    int mode;
    int pm;
};

static const char *const pms[] = {"static", "dynamic", NULL};
static const conf_opt table[] = {
    {"name", CONF_STR, offsetof(struct cfg, name), "x", 0, 0, NULL, 0, "a name"},
    {"pm.workers", CONF_INT, offsetof(struct cfg, workers), "4", 1, 64, NULL, 0, "count"},
    {"on", CONF_BOOL, offsetof(struct cfg, on), "off", 0, 0, NULL, 0, "flag"},
    {"timeout", CONF_DURATION, offsetof(struct cfg, timeout), "30s", 0, 0, NULL, 0, "t"},
    {"slice", CONF_USEC, offsetof(struct cfg, slice), "100us", 0, 100000, NULL, 0, "u"},
    {"size", CONF_SIZE, offsetof(struct cfg, size), "1M", 0, 0, NULL, 0, "s"},
    {"mode", CONF_MODE, offsetof(struct cfg, mode), "0660", 0, 0, NULL, 0, "m"},
    {"pm", CONF_ENUM, offsetof(struct cfg, pm), "dynamic", 0, 0, pms, 0, "e"},
    {NULL, 0, 0, NULL, 0, 0, NULL, 0, NULL},
};

static int parse(const char *text, struct cfg *c, conf_error *err, arena *a)
{
    memset(c, 0, sizeof(*c));
    return conf_parse_text(table, c, "test.conf", text, a, NULL, err);
}

START_TEST(test_defaults_and_values)
{
    arena *a = arena_create(0);
    struct cfg c;
    conf_error err;
    ck_assert_int_eq(parse("", &c, &err, a), TN_OK);
    ck_assert_str_eq(c.name, "x");
    ck_assert_int_eq(c.workers, 4);
    ck_assert_int_eq(c.timeout, 30000);
    ck_assert_int_eq(c.slice, 100);
    ck_assert_int_eq(c.size, 1048576);
    ck_assert_int_eq(c.mode, 0660);
    ck_assert_int_eq(c.pm, 1);
    const char *text = "# comment\n; another\n\nname = \"hello world\"\n[pm]\nworkers = 12\n"
                       "[]\non = yes\ntimeout = 250ms\nsize = 64k\nmode = 0600\npm = static\n"
                       "slice = 3ms\n";
    ck_assert_int_eq(parse(text, &c, &err, a), TN_OK);
    ck_assert_str_eq(c.name, "hello world");
    ck_assert_int_eq(c.workers, 12);
    ck_assert(c.on);
    ck_assert_int_eq(c.timeout, 250);
    ck_assert_int_eq(c.slice, 3000);
    ck_assert_int_eq(c.size, 65536);
    ck_assert_int_eq(c.mode, 0600);
    ck_assert_int_eq(c.pm, 0);
    char shown[64];
    conf_format(&table[4], &c, shown, sizeof(shown));
    ck_assert_str_eq(shown, "3ms");
    ck_assert_int_eq(parse("slice = 250us\n", &c, &err, a), TN_OK);
    ck_assert_int_eq(c.slice, 250);
    conf_format(&table[4], &c, shown, sizeof(shown));
    ck_assert_str_eq(shown, "250us");
    ck_assert_int_eq(parse("slice = 0\n", &c, &err, a), TN_OK);
    ck_assert_int_eq(c.slice, 0);
    arena_destroy(a);
}
END_TEST

static void expect_error(const char *text, int line, const char *needle)
{
    arena *a = arena_create(0);
    struct cfg c;
    conf_error err;
    ck_assert_int_ne(parse(text, &c, &err, a), TN_OK);
    char msg[1024];
    conf_error_format(&err, msg, sizeof(msg));
    ck_assert_msg(err.line == line, "line %d, expected %d: %s", err.line, line, msg);
    ck_assert_msg(strstr(msg, needle) != NULL, "'%s' lacks '%s'", msg, needle);
    ck_assert_msg(strncmp(msg, "test.conf:", 10) == 0, "no file name: %s", msg);
    arena_destroy(a);
}

START_TEST(test_errors_name_file_and_line)
{
    expect_error("name = a\nbogus = 1\n", 2, "unknown option 'bogus'");
    expect_error("\n\npm.workers = ten\n", 3, "expected an integer");
    expect_error("pm.workers = 65\n", 1, "out of range");
    expect_error("on = maybe\n", 1, "expected on or off");
    expect_error("timeout = 5 parsecs\n", 1, "expected a duration");
    expect_error("slice = 100ns\n", 1, "expected a duration (e.g. 100us, 2ms)");
    expect_error("slice = 1s\n", 1, "slice: 1000000us is out of range [0us, 100000us]");
    expect_error("pm = fastest\n", 1, "expected one of static, dynamic");
    expect_error("name = a\nname = b\n", 2, "already set on line 1");
    expect_error("[pm\n", 1, "malformed section");
    expect_error("just words\n", 1, "expected 'key = value'");
    expect_error("name = \"open\n", 1, "unterminated");
    expect_error("mode = 999\n", 1, "octal");
}
END_TEST

START_TEST(test_load_file_and_io_error)
{
    char path[] = "/tmp/tenancy-conf-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char *text = "pm.workers = 7\n";
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    arena *a = arena_create(0);
    struct cfg c;
    conf_error err;
    ck_assert_int_eq(conf_load(table, &c, path, a, NULL, &err), TN_OK);
    ck_assert_int_eq(c.workers, 7);
    unlink(path);
    ck_assert_int_eq(conf_load(table, &c, path, a, NULL, &err), TN_IO);
    ck_assert_ptr_nonnull(strstr(err.msg, "cannot open"));
    arena_destroy(a);
}
END_TEST

START_TEST(test_value_parsers)
{
    int64_t v;
    ck_assert_int_eq(conf_parse_duration("2m", &v), TN_OK);
    ck_assert_int_eq(v, 120000);
    ck_assert_int_eq(conf_parse_duration("1h", &v), TN_OK);
    ck_assert_int_eq(v, 3600000);
    ck_assert_int_eq(conf_parse_duration("-1", &v), TN_INVALID);
    ck_assert_int_eq(conf_parse_duration("99999999999999999999", &v), TN_INVALID);
    ck_assert_int_eq(conf_parse_size("8G", &v), TN_OK);
    ck_assert_int_eq(v, 8LL << 30);
    ck_assert_int_eq(conf_parse_size("8X", &v), TN_INVALID);
    bool b;
    ck_assert_int_eq(conf_parse_bool("TRUE", &b), TN_OK);
    ck_assert(b);
}
END_TEST

/* What tenancyd -T prints reads back as the same values: a string the parser would trim or
 * unquote is written quoted, with its quotes and backslashes escaped. */
START_TEST(test_dump_reads_back)
{
    static const char *const names[] = {"plain", "a \\ b", " lead", "trail\t", "\"q\" x",
                                        "cr\r", "\"", "\\\"", "  ", "x\\"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        arena *a = arena_create(0);
        struct cfg c, back;
        conf_error err;
        ck_assert_int_eq(parse("", &c, &err, a), TN_OK);
        c.name = names[i];
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        ck_assert_ptr_nonnull(f);
        conf_dump(table, &c, f);
        fclose(f);
        ck_assert_msg(parse(text, &back, &err, a) == TN_OK,
                      "dump of [%s] does not parse: %d: %s\n%s", names[i], err.line, err.msg,
                      text);
        ck_assert_msg(strcmp(back.name, names[i]) == 0, "[%s] read back as [%s]:\n%s", names[i],
                      back.name, text);
        ck_assert_int_eq(back.slice, c.slice);
        ck_assert_int_eq(back.mode, c.mode);
        free(text);
        arena_destroy(a);
    }
    /* a long value (a list of allowed clients, say) is written whole */
    arena *a = arena_create(0);
    struct cfg c, back;
    conf_error err;
    ck_assert_int_eq(parse("", &c, &err, a), TN_OK);
    char *longname = malloc(5001);
    memset(longname, 'n', 5000);
    longname[5000] = '\0';
    c.name = longname;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    conf_dump(table, &c, f);
    fclose(f);
    ck_assert_int_eq(parse(text, &back, &err, a), TN_OK);
    ck_assert_uint_eq(strlen(back.name), 5000);
    free(text);
    free(longname);
    arena_destroy(a);
}
END_TEST

Suite *conf_suite(void);
Suite *conf_suite(void)
{
    Suite *s = suite_create("conf");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_defaults_and_values);
    tcase_add_test(tc, test_errors_name_file_and_line);
    tcase_add_test(tc, test_load_file_and_io_error);
    tcase_add_test(tc, test_value_parsers);
    tcase_add_test(tc, test_dump_reads_back);
    suite_add_tcase(s, tc);
    return s;
}

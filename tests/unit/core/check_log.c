/* check_log.c — one line per message, context prefix, levels, reopen after rotation. */
#include "core/first.h"
#include "core/log.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    static char text[8192];
    size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
    text[n] = '\0';
    if (f)
        fclose(f);
    return text;
}

START_TEST(test_lines_context_levels)
{
    char path[] = "/tmp/tenancy-log-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    log_init("t", TN_LOG_INFO);
    ck_assert_int_eq(log_open(path), TN_OK);
    log_set_context("req=abc tenant=acme");
    log_error("first %d", 1);
    log_set_context(NULL);
    log_debug("hidden");
    log_info("two\nlines");
    char *t = slurp(path);
    ck_assert_ptr_nonnull(strstr(t, "error: [req=abc tenant=acme] first 1\n"));
    ck_assert_ptr_null(strstr(t, "hidden"));
    ck_assert_ptr_nonnull(strstr(t, "info: two?lines\n"));   /* stays one line */
    /* Rotation: move the file away, reopen, write: the new line is in a new file. */
    char moved[64];
    snprintf(moved, sizeof(moved), "%s.1", path);
    ck_assert_int_eq(rename(path, moved), 0);
    ck_assert_int_eq(log_reopen(), TN_OK);
    log_warn("after");
    ck_assert_ptr_nonnull(strstr(slurp(path), "warn: after"));
    ck_assert_ptr_null(strstr(slurp(moved), "after"));
    log_open(NULL);
    unlink(path);
    unlink(moved);
    ck_assert_int_eq(log_level_parse("debug"), TN_LOG_DEBUG);
    ck_assert_int_eq(log_level_parse("loud"), -1);
}
END_TEST

/* A failure retried in a loop is logged once, then once a minute with the count held back;
 * a different message, or one after a success, is logged at once. */
START_TEST(test_repeat)
{
    log_repeat r = {0};
    unsigned held = 99;
    ck_assert(log_repeat_due(&r, "cannot open x", 1000, &held));
    ck_assert_uint_eq(held, 0);
    for (int i = 1; i <= 5; i++)
        ck_assert(!log_repeat_due(&r, "cannot open x", 1000 + i * 500, &held));
    ck_assert(log_repeat_due(&r, "cannot open y", 4000, &held));   /* another message */
    ck_assert_uint_eq(held, 0);
    ck_assert(!log_repeat_due(&r, "cannot open y", 5000, &held));
    ck_assert(!log_repeat_due(&r, "cannot open y", 4000 + LOG_REPEAT_MS - 1, &held));
    ck_assert(log_repeat_due(&r, "cannot open y", 4000 + LOG_REPEAT_MS, &held));
    ck_assert_uint_eq(held, 2);   /* the two held back since the last line */
    ck_assert(log_repeat_clear(&r));   /* it worked: the next failure is news */
    ck_assert(!log_repeat_clear(&r));  /* nothing left to forget */
    ck_assert(log_repeat_due(&r, "cannot open y", 4000 + LOG_REPEAT_MS + 1, &held));
    ck_assert_uint_eq(held, 0);
}
END_TEST

Suite *log_suite(void);
Suite *log_suite(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_lines_context_levels);
    tcase_add_test(tc, test_repeat);
    suite_add_tcase(s, tc);
    return s;
}

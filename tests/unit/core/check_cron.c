/*
 * check_cron.c — core/cron.c: specs with their exact next times (month ends, leap years and
 * 2100, which is not one, the day-of-month/day-of-week OR rule and Vixie's '*' exception,
 * steps, names, macros) and the refusals, each with its sentence.
 *
 * The expected times are written as UTC dates and turned into seconds with libc's timegm,
 * so the calendar of cron.c is checked against another one.
 */
#include "core/first.h"
#include "core/cron.h"
#include "core/rc.h"

#include <check.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* "YYYY-MM-DD HH:MM[:SS]" in UTC → seconds since the epoch. */
static int64_t at(const char *text)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    int n = sscanf(text, "%d-%d-%d %d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                   &tm.tm_hour, &tm.tm_min, &tm.tm_sec);
    ck_assert_msg(n >= 5, "bad date in the test: %s", text);
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm);
}

static void show(int64_t t, char *out, size_t n)
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(out, n, "%Y-%m-%d %H:%M:%S %a", &tm);
}

/* spec's next time after `after` is `want`. */
static void next_is(const char *spec, const char *after, const char *want)
{
    cron_spec c;
    char err[256] = "";
    int rc = cron_parse(spec, &c, err, sizeof(err));
    ck_assert_msg(rc == TN_OK, "'%s': %s", spec, err);
    int64_t got = cron_next(&c, at(after));
    char g[64], w[64];
    show(got, g, sizeof(g));
    show(at(want), w, sizeof(w));
    ck_assert_msg(got == at(want), "'%s' after %s: got %s, want %s", spec, after, g, w);
}

/* spec is refused with exactly this sentence. */
static void refused(const char *spec, const char *want)
{
    cron_spec c;
    char err[256] = "";
    int rc = cron_parse(spec, &c, err, sizeof(err));
    ck_assert_msg(rc == TN_INVALID, "'%s' was accepted", spec);
    ck_assert_msg(strcmp(err, want) == 0, "'%s': got \"%s\", want \"%s\"", spec, err, want);
}

START_TEST(test_every_minute_and_steps)
{
    next_is("* * * * *", "2024-01-01 00:00", "2024-01-01 00:01");
    next_is("* * * * *", "2024-01-01 00:00:59", "2024-01-01 00:01");   /* strictly after */
    next_is("* * * * *", "2024-12-31 23:59:30", "2025-01-01 00:00");
    next_is("*/5 * * * *", "2024-01-01 00:03", "2024-01-01 00:05");
    next_is("*/5 * * * *", "2024-01-01 00:55", "2024-01-01 01:00");
    next_is("1-10/2 * * * *", "2024-01-01 00:00", "2024-01-01 00:01");
    next_is("1-10/2 * * * *", "2024-01-01 00:09", "2024-01-01 01:01");
    next_is("0,30 * * * *", "2024-01-01 00:00", "2024-01-01 00:30");
    next_is("15 */6 * * *", "2024-01-01 06:15", "2024-01-01 12:15");
    next_is("0 0-23/7 * * *", "2024-01-01 21:00", "2024-01-02 00:00");
    next_is("5,10-12,50-59/3 * * * *", "2024-01-01 00:12", "2024-01-01 00:50");
    next_is("5,10-12,50-59/3 * * * *", "2024-01-01 00:56", "2024-01-01 00:59");
    next_is("30 2 * * *", "2024-01-01 02:30", "2024-01-02 02:30");
}
END_TEST

START_TEST(test_month_ends_and_leap_years)
{
    next_is("0 0 31 * *", "2024-04-15 00:00", "2024-05-31 00:00");   /* April has no 31st */
    next_is("0 0 30 * *", "2024-01-31 00:00", "2024-03-30 00:00");   /* nor February a 30th */
    next_is("0 0 28-31 * *", "2023-02-28 00:00", "2023-03-28 00:00");
    next_is("0 0 29 2 *", "2024-03-01 00:00", "2028-02-29 00:00");
    next_is("0 0 29 2 *", "2023-01-01 00:00", "2024-02-29 00:00");
    next_is("0 0 29 2 *", "2096-03-01 00:00", "2104-02-29 00:00");   /* 2100 is not leap */
    next_is("0 0 29 2 *", "1999-03-01 00:00", "2000-02-29 00:00");   /* 2000 is */
    next_is("59 23 31 12 *", "2024-12-31 23:59", "2025-12-31 23:59");
    next_is("0 0 31 1-12/2 *", "2024-01-31 00:00", "2024-03-31 00:00");
    next_is("0 0 31 */2 *", "2024-07-31 00:00", "2025-01-31 00:00");   /* Sep, Nov: 30 days */
    next_is("0 0 1 * *", "2024-01-31 23:59:59", "2024-02-01 00:00");
}
END_TEST

START_TEST(test_day_rule)
{
    next_is("0 0 * * 1", "2024-01-01 00:00", "2024-01-08 00:00");   /* 2024-01-01: Monday */
    /* both restricted: the 1st OR a Monday */
    next_is("0 0 1 * 1", "2024-01-01 00:00", "2024-01-08 00:00");
    next_is("0 0 1 * 1", "2024-01-29 00:00", "2024-02-01 00:00");   /* a Thursday */
    next_is("0 0 1,15 * 5", "2024-01-12 00:00", "2024-01-15 00:00");
    next_is("0 0 13 * 5", "2024-09-06 00:00", "2024-09-13 00:00");  /* both: a Friday 13th */
    next_is("0 0 13 * 5", "2024-09-13 00:00", "2024-09-20 00:00");
    /* a field that begins with '*' is not a restriction for the rule: both must match */
    next_is("0 0 */2 * 1", "2024-01-01 00:00", "2024-01-15 00:00");   /* odd days, Mondays */
    next_is("0 0 * * 1", "2024-01-02 00:00", "2024-01-08 00:00");
    next_is("0 0 1 * *", "2024-01-02 00:00", "2024-02-01 00:00");
    /* 0 and 7 are Sunday; ranges across it */
    next_is("0 0 * * 7", "2024-01-01 00:00", "2024-01-07 00:00");
    next_is("0 0 * * 0", "2024-01-01 00:00", "2024-01-07 00:00");
    next_is("0 0 * * 5-7", "2024-01-01 00:00", "2024-01-05 00:00");
    next_is("0 0 * * 6-7", "2024-01-06 00:00", "2024-01-07 00:00");
    next_is("0 12 * * 1-5/2", "2024-01-01 12:00", "2024-01-03 12:00");   /* Mon, Wed, Fri */
}
END_TEST

START_TEST(test_names_and_macros)
{
    next_is("0 9 * * mon-fri", "2024-01-05 09:00", "2024-01-08 09:00");
    next_is("0 9 * * SUN", "2024-01-01 00:00", "2024-01-07 09:00");
    next_is("0 9 * * Sat,sun", "2024-01-01 00:00", "2024-01-06 09:00");
    next_is("0 12 * feb,aug *", "2024-03-01 00:00", "2024-08-01 12:00");
    next_is("0 0 1 jan-mar/2 *", "2024-01-01 00:00", "2024-03-01 00:00");
    next_is("0 0 1 DEC *", "2024-01-01 00:00", "2024-12-01 00:00");
    next_is("@hourly", "2024-01-01 00:00", "2024-01-01 01:00");
    next_is("@daily", "2024-01-01 00:00", "2024-01-02 00:00");
    next_is("@midnight", "2024-01-01 23:59", "2024-01-02 00:00");
    next_is("@weekly", "2024-01-06 10:00", "2024-01-07 00:00");   /* Sunday */
    next_is("@monthly", "2024-02-15 00:00", "2024-03-01 00:00");
    next_is("@yearly", "2024-06-01 00:00", "2025-01-01 00:00");
    next_is("@annually", "2024-01-01 00:00", "2025-01-01 00:00");
    next_is("  0   0\t* * *  ", "2024-01-01 00:00", "2024-01-02 00:00");
}
END_TEST

START_TEST(test_refusals)
{
    refused("60 * * * *", "cron: field 1 (minute): 60 is outside 0-59");
    refused("* 25 * * *", "cron: field 2 (hour): 25 is outside 0-23");
    refused("* * 0 * *", "cron: field 3 (day of month): 0 is outside 1-31");
    refused("* * 32 * *", "cron: field 3 (day of month): 32 is outside 1-31");
    refused("* * * 13 *", "cron: field 4 (month): 13 is outside 1-12");
    refused("* * * * 8", "cron: field 5 (day of week): 8 is outside 0-7");
    refused("0 * * * * *", "cron: 6 fields; a spec has 5 (minute hour day-of-month month "
                           "day-of-week), no seconds or year field");
    refused("* * *", "cron: 3 fields; a spec has 5 (minute hour day-of-month month "
                     "day-of-week)");
    refused("", "cron: the spec is empty");
    refused("   ", "cron: the spec is empty");
    refused("0 0 L * *", "cron: field 3 (day of month): 'L' is not supported");
    refused("0 0 15W * *", "cron: field 3 (day of month): 'W' is not supported");
    refused("0 0 * * 5#3", "cron: field 5 (day of week): '#' is not supported");
    refused("0 0 * * 5L", "cron: field 5 (day of week): 'L' is not supported");
    refused("0 0 ? * *", "cron: field 3 (day of month): '?' is not supported (only numbers, "
                         "'*', ',', '-' and '/')");
    refused("5/15 * * * *", "cron: field 1 (minute): a step needs '*' or a range before it "
                            "(5-59/N)");
    refused("*/0 * * * *", "cron: field 1 (minute): the step 0 is outside 1-60");
    refused("*/ * * * *", "cron: field 1 (minute): '/' needs a step (a number)");
    refused("10-5 * * * *", "cron: field 1 (minute): the range 10-5 goes backwards");
    refused("0 0 * * sat-sun", "cron: field 5 (day of week): the range 6-0 goes backwards");
    refused("1,,2 * * * *", "cron: field 1 (minute): a value is missing");
    refused("1- * * * *", "cron: field 1 (minute): a value is missing");
    refused("0 mon * * *", "cron: field 2 (hour): 'mon' is not a number");
    refused("0 0 * foo *", "cron: field 4 (month): 'foo' is not a month (1-12 or jan..dec)");
    refused("0 0 * * monday", "cron: field 5 (day of week): 'monday' is not a day (0-7 or "
                              "sun..sat)");
    refused("0 0 30 2 *", "cron: the days of the month given never fall in the months given, "
                          "so the spec would never run");
    refused("0 0 31 4,6,9,11 *", "cron: the days of the month given never fall in the months "
                                 "given, so the spec would never run");
    refused("@reboot", "cron: @reboot is not supported (@hourly, @daily, @midnight, @weekly, "
                       "@monthly, @yearly, @annually)");
    refused("@daily 5", "cron: @daily takes no fields after it");
    refused("0 0 1-5*2 * *", "cron: field 3 (day of month): unexpected '*'");
    refused("99999 * * * *", "cron: field 1 (minute): 99999... is outside 0-59");
    cron_spec c;
    char err[64];
    ck_assert_int_eq(cron_parse(NULL, &c, err, sizeof(err)), TN_INVALID);
    char longspec[300];
    memset(longspec, ' ', sizeof(longspec) - 1);
    longspec[sizeof(longspec) - 1] = '\0';
    memcpy(longspec, "* * * * *", 9);
    ck_assert_int_eq(cron_parse(longspec, &c, err, sizeof(err)), TN_INVALID);
    /* the day rule is read from the fields as given: the days of "30 2" with a weekday run */
    ck_assert_int_eq(cron_parse("0 0 30 2 mon", &c, err, sizeof(err)), TN_OK);
}
END_TEST

Suite *cron_suite(void);
Suite *cron_suite(void)
{
    Suite *s = suite_create("cron");
    TCase *tc = tcase_create("cron");
    tcase_add_test(tc, test_every_minute_and_steps);
    tcase_add_test(tc, test_month_ends_and_leap_years);
    tcase_add_test(tc, test_day_rule);
    tcase_add_test(tc, test_names_and_macros);
    tcase_add_test(tc, test_refusals);
    suite_add_tcase(s, tc);
    return s;
}

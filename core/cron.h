/*
 * cron.h — cron schedules: the five fields of Vixie cron and its macros, read in UTC.
 *
 *   minute hour day-of-month month day-of-week
 *   0-59   0-23 1-31         1-12  0-7 (0 and 7: Sunday)
 *
 * Each field is a list (`,`) of items; an item is `*`, a number, a range `a-b`, or either
 * of `*` and a range with a step (`*\/15`, `1-10/2`). Months and weekdays may be named by
 * their first three letters (jan..dec, sun..sat, any case), also in ranges (mon-fri).
 * Macros: @hourly, @daily and @midnight, @weekly, @monthly, @yearly and @annually.
 *
 * The day rule is Vixie cron's: when the day-of-month and the day-of-week fields are both
 * restricted, a day matches when EITHER does ("0 0 1 * mon": the 1st and every Monday); when
 * one of them begins with `*` (also `*\/2`), both must match. Cron implementations differ in
 * what else they accept; this one refuses the rest with a sentence naming the field: a
 * seconds or year field, L, W, #, ?, `n/step` without a range, @reboot, full day names.
 *
 * Owns: the parser and the next-time computation. Must not: read the clock or the time zone
 * (times are seconds since the epoch, matched as UTC), or allocate.
 */
#ifndef TN_CORE_CRON_H
#define TN_CORE_CRON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CRON_TEXT_MAX 200   /* bytes of a spec */

/* A parsed spec: one bit per value that matches. */
typedef struct cron_spec {
    uint64_t minutes;    /* bit 0..59 */
    uint32_t hours;      /* bit 0..23 */
    uint32_t days;       /* bit 1..31: days of the month */
    uint16_t months;     /* bit 1..12 */
    uint8_t weekdays;    /* bit 0..6: Sunday .. Saturday */
    bool days_star;      /* the day-of-month field began with '*' (Vixie's DOM_STAR) */
    bool weekdays_star;  /* the day-of-week field began with '*' */
} cron_spec;

/* Parse `text` into *out. TN_OK, or TN_INVALID with a sentence in err that names the field
 * ("cron: field 2 (hour): 25 is outside 0-23"). A spec that can never match (day 30 of
 * February alone) is refused too. */
int cron_parse(const char *text, cron_spec *out, char *err, size_t errlen);

/* The first matching minute strictly after `after_s` (seconds since the epoch, UTC), in
 * seconds; -1 when none comes within 50 years (only a spec cron_parse refuses). */
int64_t cron_next(const cron_spec *spec, int64_t after_s);

#endif

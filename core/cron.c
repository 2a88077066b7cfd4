/*
 * cron.c — cron specs (see cron.h): the parser and the next matching minute.
 *
 * The calendar is computed from days since the epoch (proleptic Gregorian, the algorithm of
 * H. Hinnant's "chrono-compatible low-level date algorithms"), never with gmtime or mktime,
 * so the answer depends on neither the process's time zone nor its locale. cron_next walks
 * forward by whole months, days and hours while those do not match, so even a yearly spec
 * is found in a few hundred steps. Must not: read the clock, or allocate.
 */
#include "core/first.h"
#include "core/cron.h"
#include "core/rc.h"

#include <stdio.h>
#include <string.h>

/* cron_next gives up after this many days (50 years): every spec that cron_parse accepts
 * matches at least once in far less. */
#define HORIZON_DAYS (50 * 366)

static const struct field {
    const char *name;
    int min, max;
} fields[5] = {
    {"minute", 0, 59},
    {"hour", 0, 23},
    {"day of month", 1, 31},
    {"month", 1, 12},
    {"day of week", 0, 7},
};

static const char *const month_names[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                          "jul", "aug", "sep", "oct", "nov", "dec"};
static const char *const day_names[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

static const struct macro {
    const char *name, *spec;
} macros[] = {
    {"@hourly", "0 * * * *"},  {"@daily", "0 0 * * *"},   {"@midnight", "0 0 * * *"},
    {"@weekly", "0 0 * * 0"},  {"@monthly", "0 0 1 * *"}, {"@yearly", "0 0 1 1 *"},
    {"@annually", "0 0 1 1 *"},
};

static bool is_space(char c) { return c == ' ' || c == '\t'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static char lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

/* One value of field f at *p (a number, or a name in the month and weekday fields); *p moves
 * past it. TN_OK or TN_INVALID with err set. */
static int parse_value(int f, const char **p, int *out, char *err, size_t errlen)
{
    const struct field *fd = &fields[f];
    const char *s = *p;
    if (is_digit(*s)) {
        int n = 0;
        while (is_digit(s[n]))
            n++;
        if (n > 4)
            return tn_errf(err, errlen, TN_INVALID, "cron: field %d (%s): %.*s... is outside "
                           "%d-%d", f + 1, fd->name, n > 8 ? 8 : n, s, fd->min, fd->max);
        long v = 0;
        while (is_digit(*s))
            v = v * 10 + (*s++ - '0');
        if (v < fd->min || v > fd->max)
            return tn_errf(err, errlen, TN_INVALID, "cron: field %d (%s): %ld is outside %d-%d",
                           f + 1, fd->name, v, fd->min, fd->max);
        *out = (int)v;
        *p = s;
        return TN_OK;
    }
    if (is_alpha(*s)) {
        char word[8];
        size_t n = 0;
        while (is_alpha(s[n]) && n < sizeof(word) - 1) {
            word[n] = lower(s[n]);
            n++;
        }
        word[n] = '\0';
        if (f == 3 || f == 4) {
            const char *const *names = f == 3 ? month_names : day_names;
            int count = f == 3 ? 12 : 7;
            for (int i = 0; n == 3 && !is_alpha(s[n]) && i < count; i++)
                if (strcmp(word, names[i]) == 0) {
                    *out = f == 3 ? i + 1 : i;
                    *p = s + n;
                    return TN_OK;
                }
        }
        if (n == 1 && (word[0] == 'l' || word[0] == 'w'))
            return tn_errf(err, errlen, TN_INVALID, "cron: field %d (%s): '%c' is not "
                           "supported", f + 1, fd->name, *s);
        if (f == 3)
            return tn_errf(err, errlen, TN_INVALID, "cron: field 4 (month): '%s' is not a month "
                           "(1-12 or jan..dec)", word);
        if (f == 4)
            return tn_errf(err, errlen, TN_INVALID, "cron: field 5 (day of week): '%s' is not a "
                           "day (0-7 or sun..sat)", word);
        return tn_errf(err, errlen, TN_INVALID, "cron: field %d (%s): '%s' is not a number",
                       f + 1, fd->name, word);
    }
    if (*s == '\0' || *s == ',' || is_space(*s))
        return tn_errf(err, errlen, TN_INVALID, "cron: field %d (%s): a value is missing",
                       f + 1, fd->name);
    return tn_errf(err, errlen, TN_INVALID, "cron: field %d (%s): '%c' is not supported (only "
                   "numbers%s, '*', ',', '-' and '/')", f + 1, fd->name, *s,
                   f >= 3 ? ", names" : "");
}

/* Field f, the text from *p up to the next blank or the end, into *bits. */
static int parse_field(int f, const char **p, uint64_t *bits, bool *star, char *err,
                       size_t errlen)
{
    const struct field *fd = &fields[f];
    const char *s = *p;
    *bits = 0;
    *star = *s == '*';
    for (;;) {
        int lo, hi, step = 1;
        bool ranged = false;
        int rc;
        if (*s == '*') {
            lo = fd->min;
            hi = fd->max;
            ranged = true;
            s++;
        } else {
            if ((rc = parse_value(f, &s, &lo, err, errlen)) != TN_OK)
                return rc;
            hi = lo;
            if (*s == '-') {
                s++;
                if ((rc = parse_value(f, &s, &hi, err, errlen)) != TN_OK)
                    return rc;
                if (hi < lo)
                    return tn_errf(err, errlen, TN_INVALID, "cron: field %d (%s): the range "
                                   "%d-%d goes backwards", f + 1, fd->name, lo, hi);
                ranged = true;
            }
        }
        if (*s == '/') {
            if (!ranged)
                return tn_errf(err, errlen, TN_INVALID, "cron: field %d (%s): a step needs '*' "
                               "or a range before it (%d-%d/N)", f + 1, fd->name, lo, fd->max);
            s++;
            if (!is_digit(*s))
                return tn_errf(err, errlen, TN_INVALID, "cron: field %d (%s): '/' needs a step "
                               "(a number)", f + 1, fd->name);
            long v = 0;
            for (int n = 0; is_digit(*s); n++, s++)
                if (n < 4)
                    v = v * 10 + (*s - '0');
                else
                    v = 10000;
            if (v < 1 || v > fd->max - fd->min + 1)
                return tn_errf(err, errlen, TN_INVALID, "cron: field %d (%s): the step %ld is "
                               "outside 1-%d", f + 1, fd->name, v, fd->max - fd->min + 1);
            step = (int)v;
        }
        for (int v = lo; v <= hi; v += step)
            *bits |= (uint64_t)1 << (f == 4 && v == 7 ? 0 : v);
        if (*s == ',') {
            s++;
            continue;
        }
        if (*s == '\0' || is_space(*s))
            break;
        if (strchr("LlWw#?", *s) != NULL)
            return tn_errf(err, errlen, TN_INVALID, "cron: field %d (%s): '%c' is not "
                           "supported", f + 1, fd->name, *s);
        if (*s == '-' || is_digit(*s) || is_alpha(*s) || *s == '*')
            return tn_errf(err, errlen, TN_INVALID, "cron: field %d (%s): unexpected '%c'",
                           f + 1, fd->name, *s);
        return tn_errf(err, errlen, TN_INVALID, "cron: field %d (%s): '%c' is not supported "
                       "(only numbers%s, '*', ',', '-' and '/')", f + 1, fd->name, *s,
                       f >= 3 ? ", names" : "");
    }
    *p = s;
    return TN_OK;
}

/* ---- the calendar ------------------------------------------------------------------------- */

static int64_t floor_div(int64_t a, int64_t b)
{
    return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

/* Days since 1970-01-01 of y-m-d. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = floor_div(y, 400);
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = floor_div(z, 146097);
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

/* 0 Sunday .. 6 Saturday; 1970-01-01 was a Thursday. */
static int weekday(int64_t z) { return (int)(((z % 7) + 7 + 4) % 7); }

static bool day_matches(const cron_spec *c, int d, int wd)
{
    bool dom = (c->days >> d) & 1, dow = (c->weekdays >> wd) & 1;
    return c->days_star || c->weekdays_star ? dom && dow : dom || dow;
}

int64_t cron_next(const cron_spec *c, int64_t after_s)
{
    int64_t t = floor_div(after_s, 60) + 1;   /* minutes since the epoch */
    int64_t end = floor_div(t, 1440) + HORIZON_DAYS;
    for (;;) {
        int64_t day = floor_div(t, 1440);
        if (day > end)
            return -1;
        int mod = (int)(t - day * 1440), hour = mod / 60, minute = mod % 60;
        int64_t y;
        int m, d;
        civil_from_days(day, &y, &m, &d);
        if (!((c->months >> m) & 1)) {
            t = (m == 12 ? days_from_civil(y + 1, 1, 1) : days_from_civil(y, m + 1, 1)) * 1440;
            continue;
        }
        if (!day_matches(c, d, weekday(day))) {
            t = (day + 1) * 1440;
            continue;
        }
        if (!((c->hours >> hour) & 1)) {
            t = day * 1440 + (hour + 1) * 60;
            continue;
        }
        uint64_t later = c->minutes >> minute;
        if (later == 0) {
            t = day * 1440 + (hour + 1) * 60;
            continue;
        }
        return (t + __builtin_ctzll(later)) * 60;
    }
}

/* ---- parse -------------------------------------------------------------------------------- */

static const int month_days[13] = {0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

int cron_parse(const char *text, cron_spec *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (text == NULL)
        return tn_errf(err, errlen, TN_INVALID, "cron: no spec");
    if (strlen(text) > CRON_TEXT_MAX)
        return tn_errf(err, errlen, TN_INVALID, "cron: the spec is over %d bytes",
                       CRON_TEXT_MAX);
    const char *s = text;
    while (is_space(*s))
        s++;
    if (*s == '@') {
        size_t n = 0;
        while (s[n] != '\0' && !is_space(s[n]))
            n++;
        const char *rest = s + n;
        while (is_space(*rest))
            rest++;
        for (size_t i = 0; i < TN_ARRAY_LEN(macros); i++)
            if (strlen(macros[i].name) == n && strncmp(s, macros[i].name, n) == 0) {
                if (*rest != '\0')
                    return tn_errf(err, errlen, TN_INVALID, "cron: %s takes no fields after it",
                                   macros[i].name);
                return cron_parse(macros[i].spec, out, err, errlen);
            }
        return tn_errf(err, errlen, TN_INVALID, "cron: %.*s is not supported (@hourly, @daily, "
                       "@midnight, @weekly, @monthly, @yearly, @annually)", (int)(n > 20 ? 20 : n),
                       s);
    }
    /* Count the fields first, so a six-field spec is named as such and not as a bad minute. */
    int nf = 0;
    for (const char *q = s; *q != '\0';) {
        while (is_space(*q))
            q++;
        if (*q == '\0')
            break;
        nf++;
        while (*q != '\0' && !is_space(*q))
            q++;
    }
    if (nf == 0)
        return tn_errf(err, errlen, TN_INVALID, "cron: the spec is empty");
    if (nf != 5)
        return tn_errf(err, errlen, TN_INVALID, "cron: %d field%s; a spec has 5 (minute hour "
                       "day-of-month month day-of-week)%s", nf, nf == 1 ? "" : "s",
                       nf > 5 ? ", no seconds or year field" : "");
    uint64_t bits[5];
    bool star[5];
    for (int f = 0; f < 5; f++) {
        while (is_space(*s))
            s++;
        int rc = parse_field(f, &s, &bits[f], &star[f], err, errlen);
        if (rc != TN_OK)
            return rc;
    }
    out->minutes = bits[0];
    out->hours = (uint32_t)bits[1];
    out->days = (uint32_t)bits[2];
    out->months = (uint16_t)bits[3];
    out->weekdays = (uint8_t)bits[4];
    out->days_star = star[2];
    out->weekdays_star = star[4];
    /* Days that no month given has ("30 2"): when the weekday field begins with '*', the
     * days of the month decide alone and such a spec would never run. */
    if (out->weekdays_star) {
        bool some = false;
        for (int m = 1; m <= 12 && !some; m++)
            if ((out->months >> m) & 1)
                some = (out->days & ((((uint32_t)1 << month_days[m]) - 1) << 1)) != 0;
        if (!some)
            return tn_errf(err, errlen, TN_INVALID, "cron: the days of the month given never "
                           "fall in the months given, so the spec would never run");
    }
    if (cron_next(out, 946684800 /* 2000-01-01 */) < 0)
        return tn_errf(err, errlen, TN_INVALID, "cron: the spec never matches");
    return TN_OK;
}

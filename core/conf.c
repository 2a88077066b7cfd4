/*
 * conf.c — the table-driven INI parser (see conf.h).
 * Must not: touch any live configuration (callers parse into a new generation), or log
 * (errors are returned in conf_error for the caller to report).
 */
#include "core/first.h"
#include "core/conf.h"
#include "core/buf.h"
#include "core/rc.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define FIELD(obj, off, type) ((type *)((char *)(obj) + (off)))

const conf_opt *conf_find(const conf_opt *table, const char *key)
{
    for (const conf_opt *o = table; o->key != NULL; o++)
        if (strcmp(o->key, key) == 0)
            return o;
    return NULL;
}

int conf_parse_int(const char *s, long long *out)
{
    if (s == NULL || *s == '\0')
        return TN_INVALID;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || end == s)
        return TN_INVALID;
    *out = v;
    return TN_OK;
}

int conf_parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"on", "yes", "true", "1"};
    static const char *const no[] = {"off", "no", "false", "0"};
    for (size_t i = 0; i < TN_ARRAY_LEN(yes); i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return TN_OK;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return TN_OK;
        }
    }
    return TN_INVALID;
}

/* A number with an optional unit suffix from units[] (name, factor); `bare` is the factor
 * for no suffix. */
struct unit {
    const char *name;
    long long factor;
};

static int parse_scaled(const char *s, const struct unit *units, size_t nunits, long long bare,
                        int64_t *out)
{
    if (s == NULL || !isdigit((unsigned char)s[0]))
        return TN_INVALID;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0)
        return TN_INVALID;
    long long factor = bare;
    if (*end != '\0') {
        factor = 0;
        for (size_t i = 0; i < nunits; i++)
            if (strcmp(end, units[i].name) == 0)
                factor = units[i].factor;
        if (factor == 0)
            return TN_INVALID;
    }
    if (v > (unsigned long long)(INT64_MAX / factor))
        return TN_INVALID;
    *out = (int64_t)v * factor;
    return TN_OK;
}

int conf_parse_duration(const char *s, int64_t *ms)
{
    static const struct unit u[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
    return parse_scaled(s, u, TN_ARRAY_LEN(u), 1000, ms);
}

/* A duration in microseconds, for the few settings finer than a millisecond: us, ms or s (a
 * bare number is seconds, as for every other duration). */
static int parse_usec(const char *s, int64_t *us)
{
    static const struct unit u[] = {{"us", 1}, {"ms", 1000}, {"s", 1000000}};
    return parse_scaled(s, u, TN_ARRAY_LEN(u), 1000000, us);
}

int conf_parse_size(const char *s, int64_t *bytes)
{
    static const struct unit u[] = {{"k", 1024},       {"K", 1024},       {"M", 1048576},
                                    {"m", 1048576},    {"G", 1073741824}, {"g", 1073741824},
                                    {"kB", 1024},      {"MB", 1048576},   {"GB", 1073741824}};
    return parse_scaled(s, u, TN_ARRAY_LEN(u), 1, bytes);
}

static int check_bounds(const conf_opt *o, long long v, char *err, size_t errlen)
{
    if (o->min < o->max && (v < o->min || v > o->max)) {
        /* a duration in the unit it is kept in: "5000000us", not a bare number */
        const char *u = o->type == CONF_DURATION ? "ms" : o->type == CONF_USEC ? "us" : "";
        return tn_errf(err, errlen, TN_INVALID, "%s: %lld%s is out of range [%lld%s, %lld%s]",
                       o->key, v, u, o->min, u, o->max, u);
    }
    return TN_OK;
}

/* "key: expected one of a, b, c; got 'value'": the list is built first so that the message
 * is filled once, like every other. */
static int enum_error(const conf_opt *o, const char *value, char *err, size_t errlen)
{
    buf names = BUF_INIT;
    for (int i = 0; o->names[i] != NULL; i++)
        buf_printf(&names, "%s %s", i ? "," : "", o->names[i]);
    int rc = names.oom ? tn_errf(err, errlen, TN_NOMEM, "%s: out of memory", o->key)
                       : tn_errf(err, errlen, TN_INVALID, "%s: expected one of%s; got '%s'",
                                 o->key, names.p != NULL ? names.p : "", value);
    buf_free(&names);
    return rc;
}

static int set_value(const conf_opt *o, void *obj, const char *value, arena *a, char *err,
                     size_t errlen)
{
    switch (o->type) {
    case CONF_STR: {
        char *copy = arena_strdup(a, value);
        if (copy == NULL) {
            return tn_errf(err, errlen, TN_NOMEM, "%s: out of memory", o->key);
        }
        *FIELD(obj, o->offset, const char *) = copy;
        return TN_OK;
    }
    case CONF_INT: {
        long long v;
        if (conf_parse_int(value, &v) != TN_OK || v < INT_MIN || v > INT_MAX) {
            return tn_errf(err, errlen, TN_INVALID,
                           "%s: expected an integer, got '%s'", o->key, value);
        }
        if (check_bounds(o, v, err, errlen) != TN_OK)
            return TN_INVALID;
        *FIELD(obj, o->offset, int) = (int)v;
        return TN_OK;
    }
    case CONF_BOOL: {
        bool v;
        if (conf_parse_bool(value, &v) != TN_OK) {
            return tn_errf(err, errlen, TN_INVALID,
                           "%s: expected on or off, got '%s'", o->key, value);
        }
        *FIELD(obj, o->offset, bool) = v;
        return TN_OK;
    }
    case CONF_DURATION:
    case CONF_USEC:
    case CONF_SIZE: {
        int64_t v;
        int rc = o->type == CONF_DURATION ? conf_parse_duration(value, &v)
                 : o->type == CONF_USEC   ? parse_usec(value, &v)
                                          : conf_parse_size(value, &v);
        if (rc != TN_OK) {
            return tn_errf(err, errlen, TN_INVALID,
                           o->type == CONF_DURATION
                               ? "%s: expected a duration (e.g. 30s, 500ms, 2m), got '%s'"
                           : o->type == CONF_USEC
                               ? "%s: expected a duration (e.g. 100us, 2ms), got '%s'"
                               : "%s: expected a size (e.g. 512, 64k, 8M), got '%s'",
                           o->key, value);
        }
        if (check_bounds(o, v, err, errlen) != TN_OK)
            return TN_INVALID;
        *FIELD(obj, o->offset, int64_t) = v;
        return TN_OK;
    }
    case CONF_ENUM:
        for (int i = 0; o->names[i] != NULL; i++) {
            if (strcmp(o->names[i], value) == 0) {
                *FIELD(obj, o->offset, int) = i;
                return TN_OK;
            }
        }
        return enum_error(o, value, err, errlen);
    case CONF_MODE: {
        char *end;
        errno = 0;
        long v = strtol(value, &end, 8);
        if (errno != 0 || *end != '\0' || end == value || v < 0 || v > 07777) {
            return tn_errf(err, errlen, TN_INVALID,
                           "%s: expected an octal mode such as 0660, got '%s'", o->key, value);
        }
        *FIELD(obj, o->offset, int) = (int)v;
        return TN_OK;
    }
    }
    return tn_errf(err, errlen, TN_ERR, "%s: unsupported option type", o->key);
}

int conf_defaults(const conf_opt *table, void *obj, arena *a, conf_error *err)
{
    for (const conf_opt *o = table; o->key != NULL; o++) {
        if (o->def == NULL) {
            if (o->type == CONF_STR)
                *FIELD(obj, o->offset, const char *) = NULL;
            continue;
        }
        err->line = 0;
        if (set_value(o, obj, o->def, a, err->msg, sizeof(err->msg)) != TN_OK)
            return TN_INVALID;
    }
    return TN_OK;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* Unquote "..." in place (\" and \\ escapes). Returns NULL when the quotes do not close. */
static char *unquote(char *v)
{
    if (v[0] != '"')
        return v;
    char *out = v, *in = v + 1;
    while (*in != '\0' && *in != '"') {
        if (*in == '\\' && (in[1] == '"' || in[1] == '\\'))
            in++;
        *out++ = *in++;
    }
    if (*in != '"' || in[1] != '\0')
        return NULL;
    *out = '\0';
    return v;
}

static bool key_ok(const char *k)
{
    if (*k == '\0')
        return false;
    for (; *k; k++)
        if (!(isalnum((unsigned char)*k) || *k == '.' || *k == '_' || *k == '-'))
            return false;
    return true;
}

int conf_parse_text_targets(const conf_target *t, int n, const char *name, const char *text,
                            arena *a, conf_unknown_fn unknown, conf_error *err)
{
    snprintf(err->file, sizeof(err->file), "%s", name);
    err->line = 0;
    err->msg[0] = '\0';
    /* Line where each option was set (per table, concatenated), to refuse duplicates. */
    size_t total = 0;
    size_t base[16];
    if (n < 1 || n > (int)TN_ARRAY_LEN(base)) {
        return tn_errf(err->msg, sizeof(err->msg), TN_INVALID, "bad number of option tables");
    }
    for (int i = 0; i < n; i++) {
        if (conf_defaults(t[i].table, t[i].obj, a, err) != TN_OK)
            return TN_INVALID;
        base[i] = total;
        for (const conf_opt *o = t[i].table; o->key != NULL; o++)
            total++;
    }
    int *seen = arena_calloc(a, (total + 1) * sizeof(int));
    char *copy = arena_strdup(a, text);
    if (seen == NULL || copy == NULL) {
        return tn_errf(err->msg, sizeof(err->msg), TN_NOMEM, "out of memory");
    }
    char section[128] = "";
    int lineno = 0;
    char *save = NULL;
    /* strtok_r would skip empty lines and lose the count: split by hand. */
    for (char *line = copy; line != NULL; line = save) {
        char *nl = strchr(line, '\n');
        save = nl ? nl + 1 : NULL;
        if (nl)
            *nl = '\0';
        lineno++;
        err->line = lineno;
        char *s = trim(line);
        if (*s == '\0' || *s == '#' || *s == ';')
            continue;
        if (*s == '[') {
            char *close = strchr(s, ']');
            if (close == NULL || close[1] != '\0') {
                return tn_errf(err->msg, sizeof(err->msg), TN_INVALID,
                               "malformed section header '%s'", s);
            }
            *close = '\0';
            char *sec = trim(s + 1);
            if (*sec != '\0' && !key_ok(sec)) {
                return tn_errf(err->msg, sizeof(err->msg), TN_INVALID,
                               "invalid section name '%s'", sec);
            }
            snprintf(section, sizeof(section), "%s", sec);
            continue;
        }
        char *eq = strchr(s, '=');
        if (eq == NULL) {
            return tn_errf(err->msg, sizeof(err->msg), TN_INVALID,
                           "expected 'key = value', got '%s'", s);
        }
        *eq = '\0';
        char *k = trim(s);
        char *v = unquote(trim(eq + 1));
        if (v == NULL) {
            return tn_errf(err->msg, sizeof(err->msg), TN_INVALID,
                           "%s: unterminated quoted value", k);
        }
        if (!key_ok(k)) {
            return tn_errf(err->msg, sizeof(err->msg), TN_INVALID, "invalid option name '%s'", k);
        }
        char key[256];
        if (section[0] != '\0')
            snprintf(key, sizeof(key), "%s.%s", section, k);
        else
            snprintf(key, sizeof(key), "%s", k);
        const conf_opt *o = NULL;
        int ti = 0;
        for (; ti < n && o == NULL; ti++)
            o = conf_find(t[ti].table, key);
        ti--;
        if (o == NULL) {
            int rc = TN_NOTFOUND;
            if (unknown != NULL)
                rc = unknown(t[0].obj, key, v, a, err->msg, sizeof(err->msg));
            if (rc == TN_NOTFOUND) {
                return tn_errf(err->msg, sizeof(err->msg), TN_INVALID, "unknown option '%s'", key);
            }
            if (rc != TN_OK)
                return TN_INVALID;
            continue;
        }
        size_t idx = base[ti] + (size_t)(o - t[ti].table);
        if (seen[idx]) {
            return tn_errf(err->msg, sizeof(err->msg), TN_INVALID,
                           "%s: already set on line %d", key, seen[idx]);
        }
        seen[idx] = lineno;
        int rc = set_value(o, t[ti].obj, v, a, err->msg, sizeof(err->msg));
        if (rc != TN_OK)
            return rc == TN_NOMEM ? TN_NOMEM : TN_INVALID;
    }
    err->line = 0;
    return TN_OK;
}

int conf_parse_text(const conf_opt *table, void *obj, const char *name, const char *text,
                    arena *a, conf_unknown_fn unknown, conf_error *err)
{
    conf_target t = {table, obj};
    return conf_parse_text_targets(&t, 1, name, text, a, unknown, err);
}

int conf_load_targets(const conf_target *t, int n, const char *path, arena *a,
                      conf_unknown_fn unknown, conf_error *err)
{
    snprintf(err->file, sizeof(err->file), "%s", path);
    err->line = 0;
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        return tn_errf(err->msg, sizeof(err->msg), TN_IO, "cannot open: %s", strerror(errno));
    }
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (mem == NULL) {
        fclose(f);
        return tn_errf(err->msg, sizeof(err->msg), TN_NOMEM, "out of memory");
    }
    char chunk[4096];
    size_t got;
    bool bad = false;
    while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (memchr(chunk, '\0', got) != NULL)
            bad = true;
        fwrite(chunk, 1, got, mem);
    }
    bool rerr = ferror(f);
    fclose(f);
    fclose(mem);
    if (rerr) {
        free(text);
        return tn_errf(err->msg, sizeof(err->msg), TN_IO, "read error");
    }
    if (bad) {
        free(text);
        return tn_errf(err->msg, sizeof(err->msg), TN_INVALID,
                       "file contains NUL bytes (not a text file)");
    }
    int rc = conf_parse_text_targets(t, n, path, text, a, unknown, err);
    free(text);
    return rc;
}

int conf_load(const conf_opt *table, void *obj, const char *path, arena *a,
              conf_unknown_fn unknown, conf_error *err)
{
    conf_target t = {table, obj};
    return conf_load_targets(&t, 1, path, a, unknown, err);
}

void conf_format(const conf_opt *o, const void *obj, char *out, size_t n)
{
    const char *base = obj;
    switch (o->type) {
    case CONF_STR: {
        const char *s = *(const char *const *)(base + o->offset);
        snprintf(out, n, "%s", s ? s : "");
        break;
    }
    case CONF_INT: snprintf(out, n, "%d", *(const int *)(base + o->offset)); break;
    case CONF_BOOL: snprintf(out, n, "%s", *(const bool *)(base + o->offset) ? "on" : "off"); break;
    case CONF_DURATION: {
        int64_t ms = *(const int64_t *)(base + o->offset);
        if (ms % 1000 == 0)
            snprintf(out, n, "%llds", (long long)(ms / 1000));
        else
            snprintf(out, n, "%lldms", (long long)ms);
        break;
    }
    case CONF_USEC: {
        int64_t us = *(const int64_t *)(base + o->offset);
        if (us != 0 && us % 1000 == 0)
            snprintf(out, n, "%lldms", (long long)(us / 1000));
        else
            snprintf(out, n, "%lldus", (long long)us);
        break;
    }
    case CONF_SIZE: snprintf(out, n, "%lld", (long long)*(const int64_t *)(base + o->offset)); break;
    case CONF_ENUM: snprintf(out, n, "%s", o->names[*(const int *)(base + o->offset)]); break;
    case CONF_MODE: snprintf(out, n, "%04o", *(const int *)(base + o->offset)); break;
    }
}

/* Whether a value written bare would read back as something else: the parser trims blanks
 * around it (and a CR at its end) and unquotes one that starts with a quote. */
static bool needs_quotes(const char *v)
{
    size_t n = strlen(v);
    return n > 0 && (v[0] == ' ' || v[0] == '\t' || v[0] == '"' || v[n - 1] == ' ' ||
                     v[n - 1] == '\t' || v[n - 1] == '\r');
}

void conf_dump(const conf_opt *table, const void *obj, FILE *f)
{
    char num[64];
    for (const conf_opt *o = table; o->key != NULL; o++) {
        /* A string is written whole, however long (conf_format fills a buffer); every other
         * type fits in a few bytes. */
        const char *val = num;
        if (o->type == CONF_STR) {
            val = *(const char *const *)((const char *)obj + o->offset);
            val = val ? val : "";
        } else {
            conf_format(o, obj, num, sizeof(num));
        }
        if (!needs_quotes(val)) {
            fprintf(f, "%s = %s\n", o->key, val);
            continue;
        }
        /* Quoted, with the two escapes unquote() reads: \" and \\. */
        fprintf(f, "%s = \"", o->key);
        for (const char *p = val; *p; p++) {
            if (*p == '"' || *p == '\\')
                fputc('\\', f);
            fputc(*p, f);
        }
        fputs("\"\n", f);
    }
}

void conf_error_format(const conf_error *err, char *out, size_t n)
{
    if (err->line > 0)
        snprintf(out, n, "%s:%d: %s", err->file, err->line, err->msg);
    else
        snprintf(out, n, "%s: %s", err->file, err->msg);
}

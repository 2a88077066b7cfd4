/*
 * conf.h — INI configuration driven by a declarative table of options.
 *
 * A module describes its options once, as an array of conf_opt rows (key, type, where the
 * value goes, default, bounds, help). conf_load() parses a file into a fresh struct: defaults
 * first, then the file; any error leaves the caller's live configuration untouched, because
 * the caller parses into a new generation and swaps only on success. Errors name the file
 * and line: "tenancyd.conf:12: pm.max_children: expected an integer, got 'ten'".
 *
 * File syntax: `key = value` lines; `[section]` prefixes the keys that follow with
 * "section." (so `[pm]` + `max_children = 4` sets `pm.max_children`); full-line comments
 * start with '#' or ';'; values may be double-quoted. Durations take ms/s/m/h suffixes (a
 * bare number means seconds); sizes take k/M/G (powers of 1024).
 */
#ifndef TN_CORE_CONF_H
#define TN_CORE_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/arena.h"

typedef enum conf_type {
    CONF_STR,       /* const char *  (NULL when unset and no default) */
    CONF_INT,       /* int */
    CONF_BOOL,      /* bool: on/off, yes/no, true/false, 1/0 */
    CONF_DURATION,  /* int64_t milliseconds */
    CONF_USEC,      /* int64_t microseconds: a duration finer than a millisecond (us, ms, s) */
    CONF_SIZE,      /* int64_t bytes */
    CONF_ENUM,      /* int: index into names */
    CONF_MODE       /* int: octal file mode */
} conf_type;

#define CONF_RESTART 0x1u   /* a change takes effect only after a restart (said on reload) */

typedef struct conf_opt {
    const char *key;
    conf_type type;
    size_t offset;
    const char *def;             /* default, in file syntax; NULL = none */
    long long min, max;          /* bounds for INT/DURATION/SIZE when min < max */
    const char *const *names;    /* CONF_ENUM: NULL-terminated */
    unsigned flags;
    const char *help;            /* one line */
} conf_opt;

typedef struct conf_error {
    char file[256];
    int line;          /* 0 when the error is not tied to a line */
    char msg[512];
} conf_error;

/* Called for a key the table does not have (dynamic keys such as `placement.NAME.dsn`).
 * Return TN_OK when taken, TN_NOTFOUND for "unknown option", or TN_INVALID with err set. */
typedef int (*conf_unknown_fn)(void *obj, const char *key, const char *value, arena *a,
                               char *err, size_t errlen);

/* Several modules may share one file: each brings its own table and struct. */
typedef struct conf_target {
    const conf_opt *table;
    void *obj;
} conf_target;

/* Apply every default to obj. TN_OK, or TN_INVALID when a default does not parse (a bug). */
int conf_defaults(const conf_opt *table, void *obj, arena *a, conf_error *err);

/* Defaults, then the file. Returns TN_OK, TN_IO (cannot read the file), TN_INVALID. */
int conf_load(const conf_opt *table, void *obj, const char *path, arena *a,
              conf_unknown_fn unknown, conf_error *err);

/* Parse a whole text (as if it were a file named `name`). */
int conf_parse_text(const conf_opt *table, void *obj, const char *name, const char *text,
                    arena *a, conf_unknown_fn unknown, conf_error *err);

/* The same over several tables: a key belongs to the first table that has it; duplicates are
 * refused across all of them. `unknown` receives the first target's obj. */
int conf_load_targets(const conf_target *t, int n, const char *path, arena *a,
                      conf_unknown_fn unknown, conf_error *err);
int conf_parse_text_targets(const conf_target *t, int n, const char *name, const char *text,
                            arena *a, conf_unknown_fn unknown, conf_error *err);

const conf_opt *conf_find(const conf_opt *table, const char *key);

/* The current value of an option in file syntax, into out. */
void conf_format(const conf_opt *opt, const void *obj, char *out, size_t n);

/* `key = value` for every option (tenancyd -T). */
void conf_dump(const conf_opt *table, const void *obj, FILE *f);

/* "file:line: msg" into out. */
void conf_error_format(const conf_error *err, char *out, size_t n);

/* Value parsers, shared with command-line parsing. Return TN_OK or TN_INVALID. */
int conf_parse_duration(const char *s, int64_t *ms);
int conf_parse_size(const char *s, int64_t *bytes);
int conf_parse_bool(const char *s, bool *out);
int conf_parse_int(const char *s, long long *out);

#endif

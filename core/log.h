/*
 * log.h — the error log: leveled lines with their context.
 *
 * Every line is written with a single write(2) so lines from concurrent workers never
 * interleave:  2026-12-02T14:43:07.123Z tenancyd[1234] error: [req=… tenant=acme] message
 * The bracketed context is whatever the current request set with log_set_context() and is
 * cleared when it ends, so a line can never carry another request's tenant.
 *
 * The log goes to stderr (the journal under systemd) or to a file given to log_open(); a
 * reopen (SIGUSR1 after rotation) switches to a fresh file without losing lines.
 * Not thread-safe (one thread per process in this project).
 */
#ifndef TN_CORE_LOG_H
#define TN_CORE_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/rc.h"

/* The levels, most severe first. Apps log through tn_log with the same values, so
 * include/tenancy.h declares them too; fcgi/app.c asserts that the two agree, and the one
 * guard TN_LOG_DECLARED keeps a single declaration when a file sees both headers. */
#define TN_LOG_LIST(X) X(TN_LOG_ERROR, 0) X(TN_LOG_WARN, 1) X(TN_LOG_INFO, 2) X(TN_LOG_DEBUG, 3)
#ifndef TN_LOG_DECLARED
#define TN_LOG_DECLARED
#define TN_LOG_ENUMERATOR(name, value) name = value,
enum { TN_LOG_LIST(TN_LOG_ENUMERATOR) };
#undef TN_LOG_ENUMERATOR
#endif

/* Name shown in every line ("tenancyd", "tenancy"), and the most verbose level written. */
void log_init(const char *ident, int level);
void log_set_level(int level);
int log_level(void);

/* Parse "error", "warn", "info", "debug"; -1 when unknown. */
int log_level_parse(const char *name);

/* Write to `path` (appending) instead of stderr; NULL or "" or "stderr" means stderr.
 * Returns TN_OK or TN_IO (the log then stays where it was). log_reopen() reopens the same
 * path (after rotation). */
int log_open(const char *path);
int log_reopen(void);

/* The request context printed in brackets on every line until cleared (NULL or ""). The
 * string is copied; at most 255 bytes are kept. */
void log_set_context(const char *ctx);

/* The process id shown on lines (refresh after fork). */
void log_set_pid(void);

TN_COLD void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
TN_COLD void log_vmsg(int level, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

#define log_error(...) log_msg(TN_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(TN_LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(TN_LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(TN_LOG_DEBUG, __VA_ARGS__)

/* A failure retried in a loop (a registry that cannot be opened, a server that is down) is
 * logged when it first happens, when its message changes, and then at most once per
 * LOG_REPEAT_MS, not at every retry: log_repeat_due says whether to log msg now and, in
 * *held, how many identical messages it held back since the last one logged.
 * log_repeat_clear forgets the failure (call it on success: the next one logs at once) and
 * says whether there was one to forget (so the caller can log that it passed).
 * Zero-initialised state is ready to use. */
#define LOG_REPEAT_MS 60000
typedef struct log_repeat {
    int64_t next_ms;     /* the same message is held back until then */
    unsigned held;
    char last[160];      /* the start of the last message logged */
} log_repeat;
bool log_repeat_due(log_repeat *r, const char *msg, int64_t now_ms, unsigned *held);
bool log_repeat_clear(log_repeat *r);

/* Format an ISO-8601 UTC timestamp with milliseconds into out (at least 32 bytes). */
void log_timestamp(char *out, size_t n);

#endif

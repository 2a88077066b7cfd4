/*
 * log.c — the error log (see log.h).
 * Must not: allocate memory (it runs in low-memory and post-fork paths), or buffer lines.
 */
#include "core/first.h"
#include "core/log.h"
#include "core/buf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const char *log_ident = "tenancy";
static int log_max = TN_LOG_INFO;
static int log_fd = 2;
static char log_path[4096];
static char log_ctx[256];
static long log_pid;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void log_init(const char *ident, int level)
{
    log_ident = ident;
    log_max = level;
    log_pid = (long)getpid();
}

void log_set_level(int level) { log_max = level; }
int log_level(void) { return log_max; }
void log_set_pid(void) { log_pid = (long)getpid(); }

int log_level_parse(const char *name)
{
    for (int i = 0; i < (int)TN_ARRAY_LEN(level_names); i++)
        if (strcmp(name, level_names[i]) == 0)
            return i;
    if (strcmp(name, "warning") == 0)
        return TN_LOG_WARN;
    return -1;
}

int log_open(const char *path)
{
    if (path == NULL || path[0] == '\0' || strcmp(path, "stderr") == 0) {
        if (log_fd != 2)
            close(log_fd);
        log_fd = 2;
        log_path[0] = '\0';
        return TN_OK;
    }
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0)
        return TN_IO;
    if (log_fd != 2)
        close(log_fd);
    log_fd = fd;
    snprintf(log_path, sizeof(log_path), "%s", path);
    return TN_OK;
}

int log_reopen(void)
{
    if (log_path[0] == '\0')
        return TN_OK;
    char path[sizeof(log_path)];
    memcpy(path, log_path, sizeof(path));
    return log_open(path);
}

TN_HOT void log_set_context(const char *ctx)
{
    if (ctx == NULL)
        log_ctx[0] = '\0';
    else
        str_copy(log_ctx, sizeof(log_ctx), ctx);   /* per request: no printf */
}

void log_timestamp(char *out, size_t n)
{
    /* The part up to the seconds changes once a second: formatted then, per thread (the
     * access log asks for one stamp per request). */
    static __thread time_t sec = -1;
    static __thread char head[72];   /* "2026-12-03T15:04:05." (room for any int year) */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (ts.tv_sec != sec) {
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        snprintf(head, sizeof(head), "%04d-%02d-%02dT%02d:%02d:%02d.", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
        sec = ts.tv_sec;
    }
    int ms = (int)(ts.tv_nsec / 1000000);
    char tail[5] = {(char)('0' + ms / 100), (char)('0' + ms / 10 % 10), (char)('0' + ms % 10),
                    'Z', '\0'};
    size_t k = str_copy(out, n, head);
    str_copy(out + k, n - k, tail);
}

void log_vmsg(int level, const char *fmt, va_list ap)
{
    if (level > log_max)
        return;
    int saved = errno;
    char line[2048];
    char ts[40];
    log_timestamp(ts, sizeof(ts));
    if (level < 0)
        level = 0;
    if (level > TN_LOG_DEBUG)
        level = TN_LOG_DEBUG;
    int n = snprintf(line, sizeof(line), "%s %s[%ld] %s: ", ts, log_ident, log_pid,
                     level_names[level]);
    if (log_ctx[0] != '\0' && n > 0 && (size_t)n < sizeof(line))
        n += snprintf(line + n, sizeof(line) - (size_t)n, "[%s] ", log_ctx);
    if (n > 0 && (size_t)n < sizeof(line)) {
        errno = saved;   /* so %m in fmt reports the caller's errno */
        n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    }
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof(line) - 1) {
        /* Long lines are cut with a visible mark rather than dropped. */
        memcpy(line + sizeof(line) - 5, "...\n", 4);
        n = (int)sizeof(line) - 1;
    } else {
        line[n++] = '\n';
    }
    /* Keep each line on one row: control characters from request data become '?'. */
    for (int i = 0; i < n - 1; i++)
        if ((unsigned char)line[i] < 0x20 && line[i] != '\t')
            line[i] = '?';
    ssize_t w;
    do {
        w = write(log_fd, line, (size_t)n);
    } while (w < 0 && errno == EINTR);
    errno = saved;
}

void log_msg(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vmsg(level, fmt, ap);
    va_end(ap);
}

bool log_repeat_due(log_repeat *r, const char *msg, int64_t now_ms, unsigned *held)
{
    *held = 0;
    bool same = strncmp(r->last, msg, sizeof(r->last) - 1) == 0 && r->last[0] != '\0';
    if (same && now_ms < r->next_ms) {
        r->held++;
        return false;
    }
    *held = same ? r->held : 0;
    r->held = 0;
    r->next_ms = now_ms + LOG_REPEAT_MS;
    snprintf(r->last, sizeof(r->last), "%s", msg);
    return true;
}

bool log_repeat_clear(log_repeat *r)
{
    bool was = r->last[0] != '\0';
    memset(r, 0, sizeof(*r));
    return was;
}

/*
 * accesslog.c — a worker's access log buffer (see accesslog.h).
 * Must not: format lines (reqlog.c does), or keep a line across a reopen.
 */
#include "core/first.h"
#include "fcgi/accesslog.h"
#include "core/rc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct alog {
    int fd;
    bool owned;        /* opened here: closed by alog_close */
    size_t cap;        /* 0: unbuffered */
    size_t len;
    int64_t first_ms;  /* when the oldest gathered line came */
    int64_t flush_ms;
    char *buf;
};

/* All of it, or give up on an error (a full disk must not stop the requests). */
static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return;
        p += k;
        n -= (size_t)k;
    }
}

int alog_open(const char *path, size_t buffer, int64_t flush_ms, alog **out)
{
    *out = NULL;
    alog *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return TN_NOMEM;
    if (strcmp(path, "stdout") == 0) {
        a->fd = 1;
    } else if (strcmp(path, "stderr") == 0) {
        a->fd = 2;
    } else {
        a->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
        if (a->fd < 0) {
            int e = errno;
            free(a);
            errno = e;
            return TN_ERR;
        }
        a->owned = true;
    }
    struct stat st;
    bool regular = fstat(a->fd, &st) == 0 && S_ISREG(st.st_mode);
    a->cap = regular || buffer <= PIPE_BUF ? buffer : PIPE_BUF;
    a->flush_ms = flush_ms;
    if (a->cap > 0 && (a->buf = malloc(a->cap)) == NULL) {
        alog_close(a);
        return TN_NOMEM;
    }
    *out = a;
    return TN_OK;
}

void alog_flush(alog *a)
{
    if (a == NULL || a->len == 0)
        return;
    write_all(a->fd, a->buf, a->len);
    a->len = 0;
}

void alog_line(alog *a, const char *line, size_t n, int64_t now_ms)
{
    if (n > a->cap) {
        /* unbuffered, or a line longer than the buffer: the gathered ones first */
        alog_flush(a);
        write_all(a->fd, line, n);
        return;
    }
    if (a->len + n > a->cap)
        alog_flush(a);
    if (a->len == 0)
        a->first_ms = now_ms;
    memcpy(a->buf + a->len, line, n);
    a->len += n;
    if (now_ms - a->first_ms >= a->flush_ms)
        alog_flush(a);
}

size_t alog_pending(const alog *a) { return a ? a->len : 0; }

int64_t alog_due(const alog *a) { return a && a->len > 0 ? a->first_ms + a->flush_ms : -1; }

void alog_close(alog *a)
{
    if (a == NULL)
        return;
    alog_flush(a);
    if (a->owned)
        close(a->fd);
    free(a->buf);
    free(a);
}

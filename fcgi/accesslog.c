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
    size_t writeback;  /* 0: the kernel's own pace */
    size_t unsynced;   /* bytes written since the last writeback was started */
    uint64_t writebacks;
    char *buf;
};

/* All of it, or give up on an error (a full disk must not stop the requests); then, past
 * the writeback threshold, start the file's writeback (asynchronous: SYNC_FILE_RANGE_WRITE
 * alone does not wait for the disk; the whole file, as the other workers append too). */
static void write_all(alog *a, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(a->fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return;
        p += k;
        n -= (size_t)k;
        a->unsynced += (size_t)k;
    }
    if (a->writeback > 0 && a->unsynced >= a->writeback) {
        a->unsynced = 0;
        if (sync_file_range(a->fd, 0, 0, SYNC_FILE_RANGE_WRITE) == 0)
            a->writebacks++;
        else
            a->writeback = 0;   /* not a file that has a writeback to start: stop asking */
    }
}

int alog_open(const char *path, size_t buffer, int64_t flush_ms, size_t writeback, alog **out)
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
    a->writeback = regular ? writeback : 0;
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
    write_all(a, a->buf, a->len);
    a->len = 0;
}

void alog_line(alog *a, const char *line, size_t n, int64_t now_ms)
{
    if (n > a->cap) {
        /* unbuffered, or a line longer than the buffer: the gathered ones first */
        alog_flush(a);
        write_all(a, line, n);
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

uint64_t alog_writebacks(const alog *a) { return a ? a->writebacks : 0; }

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

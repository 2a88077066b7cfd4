/*
 * guard.c — the read guard under libfcgi (see guard.h).
 * Must not: touch descriptors other than the one it was told to guard, or log (the worker
 * logs the refusal after the request, with its context).
 */
#include "core/first.h"
#include "fcgi/guard.h"

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

/* libfcgi's prototype (fcgios.h): defined here, it replaces libfcgi's for libfcgi's calls. */
int OS_Read(int fd, char *buf, size_t len);

static struct {
    int fd;                 /* guarded descriptor (-1: none) */
    unsigned char hdr[8];   /* the record header being read */
    unsigned have;          /* bytes of it seen */
    size_t left;            /* content and padding of the current record still to pass */
    bool refused;
} g = {.fd = -1};

void guard_begin(int fd)
{
    g.fd = fd;
    g.have = 0;
    g.left = 0;
    g.refused = false;
}

bool guard_end(void)
{
    g.fd = -1;
    return g.refused;
}

bool guard_active(void)
{
    return dlsym(RTLD_DEFAULT, "OS_Read") == (void *)OS_Read;
}

int OS_Read(int fd, char *buf, size_t len)
{
    if (fd != g.fd)
        return (int)read(fd, buf, len);
    if (g.refused) {
        errno = EPROTO;
        return -1;
    }
    ssize_t n = read(fd, buf, len);
    if (n <= 0)
        return (int)n;
    size_t pos = 0;
    while (pos < (size_t)n) {
        if (g.left > 0) {
            size_t k = (size_t)n - pos < g.left ? (size_t)n - pos : g.left;
            pos += k;
            g.left -= k;
            continue;
        }
        /* a header: it may have begun in an earlier read */
        size_t start = pos;
        unsigned had = g.have;
        while (g.have < sizeof(g.hdr) && pos < (size_t)n)
            g.hdr[g.have++] = (unsigned char)buf[pos++];
        if (g.have < sizeof(g.hdr))
            break;
        g.have = 0;
        g.left = ((size_t)g.hdr[4] << 8 | g.hdr[5]) + g.hdr[6];
        if ((g.hdr[2] | g.hdr[3]) == 0) {
            /* request id 0: a management record inside the request. libfcgi gets the bytes
             * before its header, and then only errors. */
            g.refused = true;
            if (had == 0 && start > 0)
                return (int)start;
            errno = EPROTO;
            return -1;
        }
    }
    return (int)n;
}

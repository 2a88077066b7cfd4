/*
 * gen.c — the shared registry generation counter (see gen.h).
 * Must not: take locks (an atomic add on a shared mapping is enough), or grow the file.
 */
#include "core/first.h"
#include "tenancy/gen.h"
#include "core/rc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GEN_SIZE 4096

struct gen_map {
    uint64_t *p;
    bool writable;
};

int gen_open(const char *path, bool writable, bool create, gen_map **out, char *err,
             size_t errlen)
{
    *out = NULL;
    int flags = (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC;
    int fd = open(path, flags);
    if (fd < 0 && errno == ENOENT && create) {
        fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno == EEXIST)
            fd = open(path, flags);
        else if (fd >= 0 && ftruncate(fd, GEN_SIZE) < 0) {
            int rc = tn_errf(err, errlen, TN_IO, "%s: %s", path, strerror(errno));
            close(fd);
            return rc;
        }
    }
    if (fd < 0) {
        return tn_errf(err, errlen, TN_IO, "%s: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size < (off_t)sizeof(uint64_t)) {
        if (writable && ftruncate(fd, GEN_SIZE) == 0) {
            /* A truncated file (crash during creation): start over at 0. */
        } else {
            int rc = tn_errf(err, errlen, TN_IO, "%s: not a generation file", path);
            close(fd);
            return rc;
        }
    }
    void *p = mmap(NULL, GEN_SIZE, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED,
                   fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        return tn_errf(err, errlen, TN_IO, "%s: mmap: %s", path, strerror(errno));
    }
    gen_map *g = malloc(sizeof(*g));
    if (g == NULL) {
        munmap(p, GEN_SIZE);
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    }
    g->p = p;
    g->writable = writable;
    *out = g;
    return TN_OK;
}

void gen_close(gen_map *g)
{
    if (g == NULL)
        return;
    munmap(g->p, GEN_SIZE);
    free(g);
}

TN_HOT uint64_t gen_read(const gen_map *g) { return __atomic_load_n(g->p, __ATOMIC_ACQUIRE); }

uint64_t gen_bump(gen_map *g) { return __atomic_add_fetch(g->p, 1, __ATOMIC_ACQ_REL); }

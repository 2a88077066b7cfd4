/*
 * arena.c — chunked bump allocator with LIFO cleanups (see arena.h).
 *
 * Layout: a singly linked list of chunks, newest first; the oldest chunk (the "base") is
 * the one kept by arena_reset(). An allocation larger than a quarter of a chunk gets its own
 * chunk, inserted behind the current one so the current chunk keeps serving small requests.
 * Must not: call anything of the project (it is the leaf of core/), or abort on OOM.
 */
#include "core/first.h"
#include "core/arena.h"
#include "core/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_ALIGN 16
#define ALIGN_UP(n) (((n) + (ARENA_ALIGN - 1)) & ~(size_t)(ARENA_ALIGN - 1))

struct chunk {
    struct chunk *next;
    size_t size;   /* usable bytes after the header */
    size_t used;
    _Alignas(ARENA_ALIGN) unsigned char data[];
};

struct cleanup {
    struct cleanup *next;
    void (*fn)(void *);
    void *data;
};

struct arena {
    struct chunk *head;    /* current chunk (newest) */
    struct chunk *base;    /* first chunk, kept across resets */
    struct cleanup *cleanups;
    size_t chunk_size;
    size_t used;
    size_t mallocs;
};

static struct chunk *chunk_new(arena *a, size_t size)
{
    struct chunk *c = malloc(sizeof(*c) + size);
    if (c == NULL)
        return NULL;
    c->next = NULL;
    c->size = size;
    c->used = 0;
    a->mallocs++;
    return c;
}

arena *arena_create(size_t chunk)
{
    arena *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return NULL;
    a->chunk_size = chunk ? ALIGN_UP(chunk) : 16384;
    a->base = chunk_new(a, a->chunk_size);
    if (a->base == NULL) {
        free(a);
        return NULL;
    }
    a->head = a->base;
    return a;
}

static void run_cleanups(arena *a)
{
    while (a->cleanups != NULL) {
        struct cleanup *c = a->cleanups;
        a->cleanups = c->next;
        c->fn(c->data);   /* the record itself lives in the arena: no free */
    }
}

TN_HOT void arena_reset(arena *a)
{
    if (a == NULL)
        return;
    run_cleanups(a);
    struct chunk *c = a->head;
    while (c != NULL) {
        struct chunk *next = c->next;
        if (c != a->base)
            free(c);
        c = next;
    }
    a->base->used = 0;
    a->base->next = NULL;
    a->head = a->base;
    a->used = 0;
}

void arena_destroy(arena *a)
{
    if (a == NULL)
        return;
    arena_reset(a);
    free(a->base);
    free(a);
}

TN_HOT void *arena_alloc(arena *a, size_t n)
{
    size_t need = ALIGN_UP(n ? n : 1);
    struct chunk *c = a->head;
    if (TN_LIKELY(c->size - c->used >= need)) {
        void *p = c->data + c->used;
        c->used += need;
        a->used += need;
        return p;
    }
    if (need > a->chunk_size / 4) {
        /* A big block: its own chunk, behind the current one. */
        struct chunk *big = chunk_new(a, need);
        if (big == NULL)
            return NULL;
        big->used = need;
        big->next = c->next;
        c->next = big;
        a->used += need;
        return big->data;
    }
    struct chunk *fresh = chunk_new(a, a->chunk_size);
    if (fresh == NULL)
        return NULL;
    fresh->next = c;
    a->head = fresh;
    fresh->used = need;
    a->used += need;
    return fresh->data;
}

void *arena_calloc(arena *a, size_t n)
{
    void *p = arena_alloc(a, n);
    if (p != NULL)
        memset(p, 0, n);
    return p;
}

void *arena_memdup(arena *a, const void *src, size_t n)
{
    void *p = arena_alloc(a, n);
    if (p != NULL && n)
        memcpy(p, src, n);
    return p;
}

TN_HOT char *arena_strndup(arena *a, const char *s, size_t n)
{
    char *p = arena_alloc(a, n + 1);
    if (p == NULL)
        return NULL;
    if (n < 64)
        mem_copy(p, s, n);   /* the request's method, path and host: no library call */
    else
        memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

TN_HOT char *arena_strdup(arena *a, const char *s)
{
    return arena_strndup(a, s, str_len(s));
}

char *arena_vsprintf(arena *a, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    struct chunk *c = a->head;
    size_t room = c->size - c->used;
    /* Try to format in place in the current chunk; fall back to a sized allocation. */
    int n = vsnprintf((char *)c->data + c->used, room, fmt, ap);
    if (n < 0) {
        va_end(ap2);
        return NULL;
    }
    if ((size_t)n < room) {
        char *p = (char *)c->data + c->used;
        size_t need = ALIGN_UP((size_t)n + 1);
        if (need > room)
            need = room;
        c->used += need;
        a->used += need;
        va_end(ap2);
        return p;
    }
    char *p = arena_alloc(a, (size_t)n + 1);
    if (p != NULL)
        vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}

char *arena_sprintf(arena *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *p = arena_vsprintf(a, fmt, ap);
    va_end(ap);
    return p;
}

int arena_cleanup_add(arena *a, void (*fn)(void *), void *data)
{
    struct cleanup *c = arena_alloc(a, sizeof(*c));
    if (c == NULL)
        return -1;
    c->fn = fn;
    c->data = data;
    c->next = a->cleanups;
    a->cleanups = c;
    return 0;
}

size_t arena_used(const arena *a) { return a->used; }
size_t arena_mallocs(const arena *a) { return a->mallocs; }

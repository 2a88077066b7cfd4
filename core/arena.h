/*
 * arena.h — region allocator with cleanup callbacks, one per lifetime.
 *
 * The project gives every lifetime its own arena: the process, a configuration generation,
 * a request. Objects are carved from chunks and freed all at once by arena_reset() or
 * arena_destroy(); resources that are not memory (file descriptors, PGresults, sqlite
 * statements) register a cleanup that runs, last registered first, at the same moment.
 * After warm-up a reset keeps its first chunk, so a request that fits in it allocates
 * nothing from malloc.
 *
 * Not thread-safe: an arena belongs to one thread.
 */
#ifndef TN_CORE_ARENA_H
#define TN_CORE_ARENA_H

#include <stdarg.h>
#include <stddef.h>

typedef struct arena arena;

/* A new arena whose chunks are `chunk` bytes (0 picks 16 KiB). NULL when out of memory. */
arena *arena_create(size_t chunk);

/* Run the cleanups, free every chunk. NULL is accepted. */
void arena_destroy(arena *a);

/* Run the cleanups and forget every allocation; keep the first chunk for reuse. */
void arena_reset(arena *a);

/* n bytes aligned for any type, or NULL when out of memory. n == 0 returns a valid pointer. */
void *arena_alloc(arena *a, size_t n);
void *arena_calloc(arena *a, size_t n);
char *arena_strdup(arena *a, const char *s);
char *arena_strndup(arena *a, const char *s, size_t n);
void *arena_memdup(arena *a, const void *p, size_t n);
char *arena_sprintf(arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
char *arena_vsprintf(arena *a, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* Register fn(data) to run at the next reset or destroy. Returns 0, or -1 when out of
 * memory (fn is then NOT registered: the caller still owns data). */
int arena_cleanup_add(arena *a, void (*fn)(void *), void *data);

/* Bytes handed out since the last reset. */
size_t arena_used(const arena *a);

/* How many times a chunk had to be malloc'ed since creation (the hot-path check). */
size_t arena_mallocs(const arena *a);

#endif

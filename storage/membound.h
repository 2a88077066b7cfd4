/*
 * membound.h — the byte bound of a kept schema-mode connection
 * (placement.NAME.max_backend_memory): when to read its backend's memory, and whether it
 * has reached the bound.
 *
 * A PostgreSQL backend caches the catalog of every schema it touches and never gives the
 * memory back, so whoever keeps one connection for many tenants (the per-worker pool, the
 * workers of `tenancy tenant create` and `tenancy migrate`) closes it once its backend is too
 * big. The read walks every memory context of the backend, a cost that grows with what it
 * caches, so it is paced: first after `every` schemas served, then when the backend could
 * have grown halfway to its bound at the rate it grew so far (every byte counted as growth,
 * so the rate is if anything overstated), never sooner than `every` schemas later. A
 * backend whose later tenants are much larger than its earlier ones can pass its bound by
 * up to that difference before the next read.
 */
#ifndef TN_STORAGE_MEMBOUND_H
#define TN_STORAGE_MEMBOUND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/db.h"

typedef struct membound {
    int64_t max;      /* bytes (0: no bound) */
    size_t looked;    /* schemas served when the memory was last read */
    size_t next;      /* when to read it next (0: `every` after the last read) */
    bool unread;      /* the server refused the read: not asked again on this backend */
} membound;

typedef enum membound_look {
    MEMBOUND_NOT_DUE,   /* no read (not due, no bound, or refused before) */
    MEMBOUND_UNDER,     /* read: below the bound */
    MEMBOUND_REACHED,   /* read: at or over the bound; close the connection */
    MEMBOUND_DENIED,    /* the login may not read it (PostgreSQL gives it to
                           pg_read_all_stats): the count alone bounds this backend */
    MEMBOUND_FAILED,    /* another failure (the server gone): the caller's to notice */
} membound_look;

/* A new backend: its memory is read again from the start. */
void membound_reset(membound *m);

/* The bound for the connection's next use; a changed bound makes the read due again. */
void membound_set_max(membound *m, int64_t max);

/* After the backend has served `served` distinct schemas (`every` > 0): read its memory
 * when the read is due. db must be clean (no transaction open); a read leaves it unscoped
 * (db_set_schema_scope(db, NULL)), since it must run as the login, not as the last tenant's
 * role, which may not read it. */
membound_look membound_check(membound *m, tn_db *db, size_t served, size_t every);

/* The count bound of a connection kept for one run of `tenancy tenant create -j` or
 * `tenancy migrate` (one per worker and placement): `configured` when the operator set
 * placement.NAME.max_tenants (> 0); otherwise none (SIZE_MAX) while the byte bound is on and
 * the login may read the backend's memory, since that bound holds the backend for any schema
 * and a new backend costs the run its cold caches (a migration over 10,000 schema tenants ran
 * about a fifth slower with a new backend every 1,000 tenants); else POOL_PG_MAX_TENANTS.
 * tenancyd's pool decides the same way with its own fallback (membound_count). */
size_t membound_run_count(const membound *m, int configured);

/* The same rule with `fallback` for the count when no byte bound can be read (the pool's
 * pg_max_tenants). */
size_t membound_count(const membound *m, int configured, size_t fallback);

#endif

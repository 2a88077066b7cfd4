/*
 * limits.h — per-tenant counters shared by every worker of a host: requests in flight (the
 * `tenant.max_workers` cap), requests, 5xx answers and refusals.
 *
 * The master maps the table (anonymous shared memory) before forking; workers inherit it.
 * Entries are found by tenant id with open addressing and are never removed, so the table
 * holds the LIMITS_SLOTS tenants seen first (fewer when a neighbourhood of LIMITS_PROBE slots
 * fills up first); beyond that, tenants are not counted and their cap is not enforced
 * (logged once per worker). A worker that dies mid-request leaves its
 * in-flight count behind; the master gives it back (limits_leave) from the dead worker's
 * scoreboard slot.
 */
#ifndef TN_TENANCY_LIMITS_H
#define TN_TENANCY_LIMITS_H

#include <stdbool.h>
#include <stdint.h>

#define LIMITS_SLOTS 16384
#define LIMITS_PROBE 256   /* slots looked at from an id's home slot */

typedef struct limits_entry {
    int64_t tenant_id;      /* 0: free */
    int32_t inflight;
    int32_t max_seen;
    uint64_t requests;
    uint64_t errors;        /* 5xx */
    uint64_t rejected;      /* over tenant.max_workers */
    int64_t last_ms;        /* monotonic ms of the last request */
    char slug[64];
} limits_entry;

typedef struct limits limits;

limits *limits_create(void);
void limits_destroy(limits *l);

/* Count a request of tenant id in. TN_OK, or TN_BUSY when `cap` (> 0) requests of it are
 * already running (counted as rejected). TN_DECLINED when the table is full (not counted,
 * not limited). */
int limits_enter(limits *l, int64_t id, const char *slug, int cap, int64_t now_ms);

/* The request ended with `status` (status 0: the worker died, nothing more to count). */
void limits_leave(limits *l, int64_t id, int status);

/* Copy the `n` entries with the most requests into out (for the status page). */
int limits_top(const limits *l, limits_entry *out, int n);

/* One tenant's entry copy; false when not in the table. */
bool limits_get(const limits *l, int64_t id, limits_entry *out);

#endif

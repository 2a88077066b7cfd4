/*
 * limits.h — per-tenant counters shared by every worker of a host: requests in flight (the
 * `tenant.max_workers` cap), requests, 5xx answers and refusals.
 *
 * The master maps the table (anonymous shared memory) before forking; workers inherit it.
 * Two parts. The cap is enforced from a per-worker array: each worker publishes the capped
 * tenant it is about to serve in its own slot (an uncapped one is not published: no worker
 * counts it), then counts the slots serving that tenant, and withdraws when they are more
 * than the cap. Two workers entering at once both count both, so the cap is never exceeded
 * (at worst both refuse); it holds for every tenant, however many the host has. The counters (requests, 5xx, refusals, in flight, for the status page)
 * are in a table found by tenant id with open addressing, whose entries are never removed:
 * it holds the LIMITS_SLOTS tenants seen first (all of them while the registry's ids, which
 * are dense sequence numbers, span fewer than LIMITS_SLOTS; fewer when a neighbourhood of
 * LIMITS_PROBE slots fills up first); beyond that, tenants are not counted (logged once per
 * worker), but still capped. Its pages are shared memory the kernel gives only when first
 * written, and the status page reads only those (limits_top), so a host with few tenants
 * pays for few pages. A worker that dies mid-request leaves its slot and its in-flight count
 * behind; the master gives them back (limits_leave) from the dead worker's scoreboard slot.
 *
 * Waiting for a worker (tenant.queue_wait). A request of a tenant at its cap need not be
 * refused: the host can leave it unread in its connection, holding no worker, until one of
 * the tenant's requests ends. The table helps with three things: whether any tenant reached
 * its cap lately (limits_contended: only then is a request's tenant worked out before it is
 * read), a claim of the tenant's share made before the request is read (limits_try, kept by
 * the chain's limits_enter that follows), and a wake-up: an eventfd every worker can watch,
 * written by limits_leave when requests of that tenant are waiting (limits_wait counts them),
 * and never otherwise, so a host with no waiting request makes no extra system call.
 */
#ifndef TN_TENANCY_LIMITS_H
#define TN_TENANCY_LIMITS_H

#include <stdbool.h>
#include <stdint.h>

#define LIMITS_SLOTS 131072   /* 14 MB of shared memory, in pages as tenants arrive */
#define LIMITS_PROBE 256   /* slots looked at from an id's home slot */
#define LIMITS_WORKERS 1024   /* worker slots: the scoreboard's (fcgi/ checks it fits) */

typedef struct limits_entry {
    int64_t tenant_id;      /* 0: free */
    int32_t inflight;
    int32_t max_seen;
    uint64_t requests;
    uint64_t errors;        /* 5xx */
    uint64_t rejected;      /* over tenant.max_workers */
    int64_t last_ms;        /* monotonic ms of the last request */
    int32_t waiting;        /* requests held unread for a worker of this tenant */
    char slug[64];
} limits_entry;

typedef struct limits limits;

limits *limits_create(void);
void limits_destroy(limits *l);

/* Worker `worker` (its scoreboard slot, < LIMITS_WORKERS) starts a request of tenant id.
 * TN_OK: admitted and counted; TN_DECLINED: admitted, not counted (the table is full, or
 * no table); TN_BUSY: `cap` (> 0) requests of it already run (counted as rejected when the
 * tenant is in the table). After TN_OK or TN_DECLINED, limits_leave must follow. */
int limits_enter(limits *l, int worker, int64_t id, const char *slug, int cap,
                 int64_t now_ms);

/* The request of worker `worker` ended with `status` (status 0: the worker died, nothing more
 * to count). */
void limits_leave(limits *l, int worker, int64_t id, int status);

/* Whether a tenant reached its cap within the last second (a cheap load: see the banner). */
bool limits_contended(const limits *l, int64_t now_ms);

/* Claim worker `worker`'s share of tenant id before its request is read: TN_OK (claimed:
 * the chain's limits_enter for the same worker and tenant then admits it; limits_unclaim
 * when no limits_enter followed), TN_BUSY (`cap` requests of it run: nothing claimed),
 * TN_DECLINED (no table or no id: nothing to claim). */
int limits_try(limits *l, int worker, int64_t id, int cap, int64_t now_ms);
void limits_unclaim(limits *l, int worker, int64_t id);

/* How many more requests of tenant id its cap lets run now (0 when at or over it). */
int limits_free(limits *l, int64_t id, int cap);

/* A request of tenant id starts (+1) or stops (-1) waiting for a worker. */
void limits_wait(limits *l, int64_t id, int delta);

/* Requests of tenant id waiting for a worker now (0 when none, or it is not in the table). */
int limits_waiting(limits *l, int64_t id);

/* The eventfd limits_leave writes when a request of the tenant it left waits (-1: none). */
int limits_wake_fd(const limits *l);

/* The worker of slot `worker` is gone: its mark (a claim or a request) is taken back. */
void limits_release_worker(limits *l, int worker);

/* Copy the `n` entries with the most requests into out (for the status page). */
int limits_top(const limits *l, limits_entry *out, int n);

/* One tenant's entry copy; false when not in the table. */
bool limits_get(const limits *l, int64_t id, limits_entry *out);

#endif

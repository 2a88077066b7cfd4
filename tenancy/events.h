/*
 * events.h — the host's event log: what tn_publish writes and the stream hub reads.
 *
 * One log per host, in shared memory the master maps before it forks anything, so every
 * worker generation and the hub (restarted or not) see the same log: it survives reloads,
 * worker recycling and a crashed hub, not a restart of the master.
 *
 * Layout: a header (a process-shared robust mutex, counters), a table of tenants found by id
 * with open addressing (tenant id -> last id given, oldest id still kept, the positions of
 * its first and last record), and a ring of variable-size records (tenant, id, global
 * sequence number, origin host, time, channel, data). A record never wraps: the space left
 * at the ring's end is padded. Appending evicts the oldest records until the new one fits;
 * each record links to its tenant's next one, so reading one tenant costs its own records,
 * not the whole ring.
 *
 * Ids. Per tenant, from 1, increasing by one per append, never given twice while the master
 * lives (a worker killed in the middle of an append may leave one id unused: never reused).
 * A reader asking for a tenant's events after id X gets them in order, or TN_NOTFOUND when
 * some of them were evicted (a gap: the client must reload). Ids are per host: events that
 * came from another host (events_remote_*) get this host's next ids.
 *
 * Locking. Appends and reads take the one mutex for short sections. It is robust: a process
 * killed while holding it (SIGKILL in the middle of an append) does not wedge the log; the
 * next locker rebuilds the tenant table from the ring and goes on. A holder that is stopped
 * (SIGSTOP) makes others give up after a second with TN_BUSY.
 *
 * Wake-up. Every append writes to an eventfd made with the log (after the unlock); the hub
 * polls event_log_wake_fd and reads it to clear it.
 *
 * Must not: call anything of fcgi/, block longer than the lock wait, allocate from malloc
 * on the append path, or let a reader see another tenant's record through event_log_since.
 */
#ifndef TN_TENANCY_EVENTS_H
#define TN_TENANCY_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/buf.h"
#include "tenancy/config.h"

#define EVENT_CHANNEL_MAX 64

typedef struct event_log event_log;

typedef struct event_rec {
    int64_t tenant_id;
    uint64_t id;          /* per tenant, from 1 */
    uint64_t seq;         /* per host, every append */
    uint64_t origin;      /* the host that published it (event_log_origin of its log) */
    int64_t time_ms;      /* wall clock at append */
    const char *channel;  /* NUL-terminated */
    const char *data;     /* NUL-terminated, len bytes */
    size_t len;
} event_rec;

/* The bytes a log of ring_bytes of records and max_tenants tenants takes. */
size_t event_log_bytes(size_t ring_bytes, int max_tenants);

/* Make a log in mem (bytes from event_log_bytes, shared between the processes that will use
 * it, zero-filled or not). ring_bytes is rounded down to a multiple of 8; wake_fd (an
 * eventfd or a pipe's write end, -1: none) is written after each append. A random origin id
 * names this host in events sent to others. TN_OK, TN_INVALID (sizes too small or bytes too
 * small), TN_ERR (the mutex cannot be made). */
int event_log_init(void *mem, size_t bytes, size_t ring_bytes, int max_tenants, int wake_fd);

/* The log made in mem by event_log_init (after fork: the same region), or NULL when mem
 * holds none. */
event_log *event_log_at(void *mem);

/* For the master: map anonymous shared memory, make an eventfd and a log in it. NULL when
 * either fails (errno says why). Destroy unmaps and closes the eventfd (the master only). */
event_log *event_log_create(size_t ring_bytes, int max_tenants);
void event_log_destroy(event_log *l);

/* The eventfd written after each append (-1: none), this host's origin id. */
int event_log_wake_fd(const event_log *l);
uint64_t event_log_origin(const event_log *l);

/* A channel name as tn_publish takes it: [A-Za-z0-9_.:-]{1,64}. */
bool event_channel_valid(const char *channel);

/* Append an event of tenant_id (> 0) from this host. channel must be valid
 * (event_channel_valid; not checked again), data len bytes without NUL. TN_OK with the
 * event's id in *id (may be NULL); TN_TOOBIG (the record would take more than a quarter of
 * the ring), TN_BUSY (the tenant table is full, or the lock could not be had within a
 * second), TN_INVALID (tenant_id <= 0), TN_ERR (the lock is broken). */
int event_log_append(event_log *l, int64_t tenant_id, const char *channel, const char *data,
                     size_t len, uint64_t *id);

/* The same for an event that came from another host (origin: its id): it gets this host's
 * next id for the tenant. */
int event_log_append_from(event_log *l, uint64_t origin, int64_t tenant_id,
                          const char *channel, const char *data, size_t len, uint64_t *id);

/* Where a feed reader stands: the last sequence number it has seen, and a hint of where the
 * next record is (kept up to date by event_log_read; {0, 0} reads from the oldest kept). */
typedef struct event_cursor {
    uint64_t seq;
    uint64_t pos;
} event_cursor;

/* A cursor at the newest event: a reader that starts there reads what comes after. */
int event_log_cursor_now(event_log *l, event_cursor *c);

/* The hub's feed: copy up to n events with seq > c->seq (all tenants, in seq order) into
 * out, their channel and data into arena a, and advance c. Returns how many (0: none new),
 * or TN_NOMEM (the arena; nothing copied for that event, c stops before it), TN_BUSY, TN_ERR.
 * *lost (may be NULL) gets how many events were evicted before this reader saw them (it
 * fell more than a ring behind); the reader should then treat every subscriber as having a
 * gap. */
int event_log_read(event_log *l, event_cursor *c, event_rec *out, int n, arena *a,
                   uint64_t *lost);

/* The events of tenant_id with id > after, oldest first: fn is called for each, with the
 * lock held (so fn must be quick and must not call the log; copy what it keeps: the record
 * is only valid during the call); a non-zero return from fn stops the walk (and is
 * returned). TN_OK; TN_NOTFOUND when some event after `after` was evicted (a gap: nothing
 * was delivered); TN_BUSY, TN_ERR. A tenant never seen has no events (TN_OK, no calls). */
int event_log_since(event_log *l, int64_t tenant_id, uint64_t after,
                    int (*fn)(void *ctx, const event_rec *e), void *ctx);

/* The last id given to tenant_id (0: none yet). */
uint64_t event_log_last_id(event_log *l, int64_t tenant_id);

/* For the status page and tests: the counters of the log. */
typedef struct event_log_stats {
    uint64_t appended;        /* events appended (local and remote) */
    uint64_t evicted;         /* events pushed out of the ring */
    uint64_t recovered;       /* times a lock was taken from a dead holder */
    uint64_t seq;             /* the last sequence number */
    uint64_t ring_bytes;
    uint64_t used_bytes;
    int tenants;
    int max_tenants;
} event_log_stats;
void event_log_get_stats(event_log *l, event_log_stats *out);

/* ---- across hosts (PostgreSQL registry) -----------------------------------------------------
 *
 * A publisher on a host with a PostgreSQL registry also sends
 *   SELECT pg_notify('tenancy_events', PAYLOAD)
 * on its registry connection, PAYLOAD a flat JSON object:
 *   {"origin":"<16 hex digits>","tenant":<id>,"channel":"...","data":"..."}
 * Data over EVENTS_NOTIFY_DATA_MAX bytes is not sent: the payload carries
 * "data":EVENTS_TOO_BIG instead (NOTIFY payloads are limited to 8000 bytes), so a remote
 * subscriber learns that something changed and polls for it.
 *
 * The hub of every host LISTENs on its own registry connection and appends the events of
 * other origins to its local log (where they get local ids):
 *
 *   events_remote *er = NULL;
 *   events_remote_open(cfg, log, &er, err, sizeof(err));    // connect + LISTEN
 *   poll/epoll on events_remote_fd(er) for input;
 *   events_remote_poll(er);   // when readable, and now and then: appends what arrived
 *   on TN_IO: events_remote_close(er), then open again after a delay (1 s growing to 30 s);
 *   notifications sent while no connection listened are lost (the subscribers of remote
 *   events may miss them: only local events are in the log for sure).
 */
#define EVENTS_NOTIFY_CHANNEL "tenancy_events"
#define EVENTS_NOTIFY_DATA_MAX 7000
#define EVENTS_TOO_BIG "{\"too_big\":true}"

/* The NOTIFY payload of an event, appended to out (check out->oom). data over
 * EVENTS_NOTIFY_DATA_MAX bytes is replaced by EVENTS_TOO_BIG. */
void events_notify_payload(buf *out, uint64_t origin, int64_t tenant_id, const char *channel,
                           const char *data, size_t len);

/* Parse a payload into its parts (channel and data into a). TN_OK, TN_INVALID (not such a
 * payload: ignored by the listener), TN_NOMEM. */
int events_notify_parse(const char *payload, arena *a, uint64_t *origin, int64_t *tenant_id,
                        const char **channel, const char **data);

typedef struct events_remote events_remote;

/* True when cfg's registry is PostgreSQL (then publishers notify and the hub listens). */
bool events_remote_needed(const tenancy_config *cfg);

/* Connect to cfg's registry and LISTEN on EVENTS_NOTIFY_CHANNEL; events that arrive go into
 * log (the caller's, in shared memory). TN_OK with *out; TN_INVALID (the registry is not
 * PostgreSQL), TN_IO (cannot connect or listen: err says why; try again later), TN_NOMEM. */
int events_remote_open(const tenancy_config *cfg, event_log *log, events_remote **out,
                       char *err, size_t errlen);

/* The connection's socket, for poll/epoll (POLLIN). */
int events_remote_fd(const events_remote *er);

/* Take what has arrived, without blocking: each notification from another origin is appended
 * to the log (its own origin's are skipped: they are in the log already; malformed ones are
 * logged and skipped). Returns how many were appended (>= 0), or TN_IO when the connection is
 * lost (close and open again). */
int events_remote_poll(events_remote *er);

void events_remote_close(events_remote *er);

#endif

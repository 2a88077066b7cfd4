/*
 * scoreboard.h — the shared-memory table where workers say what they are doing.
 *
 * The master maps it once, before the first fork; every worker inherits the mapping. A
 * worker owns exactly one slot and updates it at each request stage (accepting, reading,
 * running, finishing, keepalive); the master reads all slots to decide spawning and
 * timeouts, and any worker reads them to answer the status and metrics endpoints. The pool
 * counters are atomics; a slot's text fields are written under a per-slot sequence counter so
 * readers can take a consistent copy without locks (sb_slot_read).
 *
 * Capacity is fixed at 2 × TN_MAX_CHILDREN slots, so an old and a new generation fit side
 * by side during a reload. Untouched pages cost no memory.
 */
#ifndef TN_FCGI_SCOREBOARD_H
#define TN_FCGI_SCOREBOARD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fcgi/config.h"

#define SB_SLOTS (2 * TN_MAX_CHILDREN)

enum sb_state {
    SB_FREE = 0,     /* no process */
    SB_STARTING,     /* forked, loading the app */
    SB_IDLE,         /* waiting for a connection */
    SB_KEEPALIVE,    /* idle, holding a kept FastCGI connection */
    SB_READING,      /* reading params and body */
    SB_RUNNING,      /* in the chain or the handler */
    SB_FINISHING,    /* flushing the response, closing */
    SB_EXITING,      /* leaving (recycle, stop, idle timeout) */
    SB_NSTATES
};

/* Histogram buckets (upper bounds, seconds) for request durations. */
#define SB_NBUCKETS 12
extern const double sb_bucket_bounds[SB_NBUCKETS];

typedef struct sb_slot {
    uint32_t seq;            /* odd while the text fields are being written */
    int32_t pid;
    uint32_t generation;
    uint32_t index;          /* worker index within its generation */
    int32_t shard;           /* the shard socket it serves (listen.shards; -1: none) */
    uint8_t state;
    uint8_t ready;           /* the app's init succeeded */
    uint8_t stage;           /* chain stage while SB_RUNNING (tenancy stages) */
    uint8_t timeout_killed;  /* set by the master before it kills for request_timeout */
    uint8_t heavy;           /* worker: its request is one of a tenant that wants more than
                                its tenant.max_workers share (it waited, or others wait), so
                                other tenants' requests on the connections it holds are passed
                                on sooner (master.c) */
    uint64_t requests;       /* requests served by this process */
    uint64_t req_seq;        /* increments per request: the master logs slow ones once */
    int64_t started_ns;      /* process start, monotonic */
    int64_t req_start_ns;    /* current request start (0 when none) */
    int64_t last_duration_us;
    int32_t last_status;
    uint32_t slow_logged_seq; /* master-only: req_seq already reported slow */
    int64_t tenant_id;       /* tenant counted in the per-tenant table now (0: none) */
    uint32_t held;           /* worker: connections it holds beside the current request */
    uint32_t affine_pending; /* worker: connections it took from its tenant.affinity inbox
                                whose request it has not looked at yet */
    uint32_t handoff_seq;    /* master: low bits of the req_seq whose worker it asked to pass
                                the connections it holds on (a futex word the worker's
                                handoff thread waits on; see handoff.c) */
    uint32_t pg_open;        /* worker: the PostgreSQL connections its pool holds now */
    uint32_t sqlite_open;    /* worker: the SQLite handles its pool holds now */
    char method[8];
    char uri[200];
    char tenant[64];
    char req_id[40];
    char audit_id[24];       /* worker: the audit entry of the console statement it runs now
                                ("": none); the master closes that entry if the worker dies */
} __attribute__((aligned(64))) sb_slot;   /* whole cache lines: workers write their own
                                             slots at every request stage, so no two
                                             slots share a line */

typedef struct sb_pool {
    uint64_t magic;
    int64_t start_wall_us;
    uint64_t accepted;             /* connections accepted */
    uint64_t requests;             /* requests served */
    uint64_t status_class[6];      /* 1xx..5xx by index 1..5 */
    uint64_t duration_bucket[SB_NBUCKETS + 1];
    uint64_t duration_sum_us;
    uint64_t slow;
    uint64_t timeouts;
    uint64_t crashes;
    uint64_t respawns;
    uint64_t reloads;
    uint64_t reload_failures;
    uint64_t rejected_deadline;    /* answered 503: waited past queue_timeout */
    uint64_t rejected_tenant_limit;
    uint64_t keepalive_released;   /* connections passed to another worker */
    uint64_t affinity_sent;        /* requests sent to their tenant's home worker */
    uint64_t affinity_spilled;     /* served where they arrived: the home was too far behind */
    uint64_t malformed;            /* FastCGI streams refused before libfcgi saw them */
    uint64_t get_values;           /* FCGI_GET_VALUES answered */
    uint64_t max_children_reached;
    uint32_t max_active;
    int32_t idle_workers;          /* workers in SB_IDLE or SB_KEEPALIVE now */
    int32_t active_workers;        /* workers reading, running or finishing now */
    uint32_t generation;
    uint32_t brake;                /* respawn brake engaged */
    uint32_t log_generation;       /* bumped on SIGUSR1: workers reopen their logs */
    int32_t max_children;
    int32_t pm;
    /* 1 + the highest worker slot ever given (master-written). Whoever reads every slot
     * stops here: reading a slot of shared memory makes its page, and the 1,024 slots are
     * half a megabyte a master with a few workers never needs. */
    int32_t slots_used;
    /* tenant.affinity: per worker number, the connections in that number's inbox (the
     * sender adds one before it sends, whoever takes one out subtracts it at once); with
     * the taker's affine_pending, how far behind a home is, read to keep a busy tenant from
     * piling up behind it. Counted per number, not per process, so that nothing is lost
     * when the process dies: what is in the inbox stays there for the next one. */
    int32_t affine_queued[TN_AFFINITY_MAX];
    /* tenant.affinity = auto: the generation one of whose workers found that the tenants do
     * not all fit (its pool closed a connection at its bound or for room; 0: none yet). Its
     * other workers, and those started later, send from then on without finding it again. */
    uint32_t crowded_generation;
} sb_pool;

/* The stream hub's counters (fcgi/hub.h). The hub is their only writer, but for `restarts`
 * (the master) and `handed_off`/`refused_*` (the workers); workers read `pid`, `subscribers`
 * and the per-tenant table to refuse a subscription over a limit before handing it on (a
 * read that races the hub is only a pre-check: the hub enforces the limits itself). The
 * limits are the master's copy of the generation that serves (a reload updates them; the
 * hub is not restarted). */
#define SB_HUB_TENANTS 4096   /* tenants with subscribers counted at once (a power of two) */
typedef struct sb_hub_tenant {
    int64_t tenant_id;        /* 0: empty */
    int32_t subscribers;
    int32_t pad;
} sb_hub_tenant;

typedef struct sb_hub {
    int32_t pid;                  /* the running hub (0: none) */
    int32_t max_per_tenant;       /* stream.max_per_tenant */
    int32_t max_total;            /* stream.max_total */
    int32_t pad;
    int64_t heartbeat_ms;         /* stream.heartbeat */
    int64_t max_buffer;           /* stream.max_buffer */
    uint64_t subscribers;         /* open streams now */
    uint64_t streams;             /* streams taken since the master started */
    uint64_t events_sent;
    uint64_t heartbeats;
    uint64_t bytes_buffered;      /* bytes waiting for slow clients now */
    uint64_t dropped_slow;        /* ended with `event: dropped` (over stream.max_buffer) */
    uint64_t ended_client;        /* the client (web server) went away */
    uint64_t ended_tenant;        /* the tenant was suspended or deleted */
    uint64_t ended_stop;          /* the hub stopped */
    uint64_t refused_limit;       /* refused over a limit (by a worker or the hub) */
    uint64_t handed_off;          /* requests workers handed to the hub */
    uint64_t kept_returned;       /* kept connections passed back to the workers */
    uint64_t restarts;            /* hubs started after the first */
    sb_hub_tenant tenants[SB_HUB_TENANTS];
} sb_hub;

/* The job workers (fcgi/jobs.h). An entry per job worker, at the index the master gave it
 * (two generations side by side during a reload): pid and generation are the master's; the
 * rest is the worker's own, read by status and, after a death, by the master (the lease, to
 * have the job run again at once). Counters are the job workers'; `wake` is bumped by any
 * worker that queued a job (tn_job_enqueue) and waited on by idle job workers (a futex). */
#define SB_JOB_SLOTS (2 * TN_MAX_JOB_WORKERS)
enum sb_job_state { SBJ_FREE, SBJ_STARTING, SBJ_IDLE, SBJ_RUNNING, SBJ_EXITING };

typedef struct sb_job_slot {
    int32_t pid;
    int32_t state;             /* enum sb_job_state */
    uint32_t generation;
    int32_t timeout_ms;        /* the running job's */
    int64_t job_id;            /* the running job (0: none) */
    int64_t tenant_id;
    int64_t job_start_ns;      /* monotonic */
    uint64_t jobs;             /* jobs this worker ran */
    char lease[48];            /* its lease token (tenancy/jobs.h) */
    char tenant[64];
    char name[64];
} sb_job_slot;

typedef struct sb_jobs {
    uint32_t wake;
    int32_t pad;
    uint64_t claimed;          /* attempts started */
    uint64_t done;
    uint64_t failed;           /* attempts that failed (retried or dead) */
    uint64_t dead;
    uint64_t recovered;        /* jobs of dead workers queued again */
    uint64_t timeouts;
    uint64_t crashes;          /* job workers that died */
    uint64_t enqueued;         /* by this host's workers and job workers */
    uint64_t scheduled;        /* queued by schedules */
    sb_job_slot slots[SB_JOB_SLOTS];
} sb_jobs;

/* What the workers' storage pools did (tenancy/chain.h's chain_storage), summed: after each
 * request a worker adds what its pool did since its last one (fcgi/serve.c), so the counts
 * outlive a worker that leaves. The connections open now are each slot's own. */
#define SB_STORAGE_COUNTERS(X)                                                             \
    X(pg_connects) X(pg_closed_tenants) X(pg_closed_memory) X(pg_evicted) X(pg_unreachable) \
    X(pg_refused) X(memory_reads) X(sqlite_opens) X(sqlite_hits) X(sqlite_evicted) X(resets)
typedef struct sb_storage {
#define SB_STORAGE_FIELD(f) uint64_t f;
    SB_STORAGE_COUNTERS(SB_STORAGE_FIELD)
#undef SB_STORAGE_FIELD
    uint32_t warned;   /* a worker said that the tenants it serves do not fit its
                          connection (once per master) */
    int32_t pad;
} sb_storage;

typedef struct scoreboard {
    sb_pool pool;
    sb_storage storage __attribute__((aligned(64)));   /* apart from the pool's counters */
    sb_slot slots[SB_SLOTS];
    sb_hub hub;
    sb_jobs jobs;
} scoreboard;

/* A queued job: wake the idle job workers of this host. */
void sb_jobs_wake(sb_jobs *j);

/* A tenant's subscriber count in the hub's table (0 when absent). Lock-free read. */
int32_t sb_hub_tenant_count(const sb_hub *h, int64_t tenant_id);
/* The hub's side: add delta to the tenant's count (an entry is taken or kept). False when the
 * table is full (the hub then refuses the stream). */
bool sb_hub_tenant_add(sb_hub *h, int64_t tenant_id, int delta);

/* Map a fresh, zeroed scoreboard (shared with children forked later). NULL on failure. */
scoreboard *sb_create(void);
void sb_destroy(scoreboard *sb);

/* How many slots a reader of every slot looks at (see sb_pool.slots_used). */
static inline int sb_slots_used(const scoreboard *sb)
{
    int n = __atomic_load_n(&sb->pool.slots_used, __ATOMIC_ACQUIRE);
    return n < 0 ? 0 : n > SB_SLOTS ? SB_SLOTS : n;
}

/* The slot at index i; for the owning worker's writes. */
static inline sb_slot *sb_slot_at(scoreboard *sb, int i) { return &sb->slots[i]; }

/* Worker side: state changes (cheap: relaxed stores) and request begin/end with text. */
void sb_set_state(scoreboard *sb, sb_slot *s, enum sb_state st);
/* Master side: forget a reaped worker's slot (keeps the idle count right). */
void sb_slot_free(scoreboard *sb, sb_slot *s);
/* A request's first byte is being read: clear the previous request's text. */
void sb_reading_begin(scoreboard *sb, sb_slot *s, int64_t start_ns);
void sb_request_begin(sb_slot *s, const char *method, const char *uri, const char *req_id);
void sb_set_tenant(sb_slot *s, const char *tenant);
void sb_request_end(scoreboard *sb, sb_slot *s, int status, int64_t duration_us);
/* The pending audit entry of the statement the worker is about to run (NULL or "": none
 * any more). A new request clears it too (sb_reading_begin). */
void sb_set_audit(sb_slot *s, const char *id);

/* Reader side: a consistent copy of a slot. */
void sb_slot_read(const sb_slot *s, sb_slot *out);

const char *sb_state_name(int st);

/* Atomic counter helpers. */
static inline void sb_inc(uint64_t *c) { __atomic_fetch_add(c, 1, __ATOMIC_RELAXED); }
static inline uint64_t sb_get(const uint64_t *c) { return __atomic_load_n(c, __ATOMIC_RELAXED); }

#endif

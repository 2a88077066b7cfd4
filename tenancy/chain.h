/*
 * chain.h — the tenancy chain every request passes through, and the tenant context.
 *
 *   identify -> check the tenant's state -> per-tenant worker cap -> /_theme.css
 *            -> the app (env.pick) -> that app's own stages -> its handler  (then chain_finish)
 *
 * Identification reads the host only from the FastCGI params the web server sets
 * (tenant.host_params), validates and normalises it before any lookup, answers central
 * domains first (they never resolve to a tenant), then tries the configured resolvers in
 * order through the lookup cache. An unknown or invalid host is answered 404/400 without
 * touching any storage.
 *
 * The context is the request's tenant pointer plus this process's "current tenant"; it is
 * asserted empty when a request starts and cleared by chain_finish, which the worker calls
 * on every path out of a request (a timeout ends the whole process). Nothing of a tenant
 * survives into the next request except what the lookup cache holds.
 */
#ifndef TN_TENANCY_CHAIN_H
#define TN_TENANCY_CHAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "tenancy/config.h"
#include "tenancy/events.h"
#include "tenancy/limits.h"
#include "tenancy/request.h"

/* An app behind the chain: its handler and the stages its init added (chain_stages_open /
 * chain_stages_close). A stage runs for its own app's requests only: the auth stage of one
 * app never sees another's. */
typedef struct chain_app {
    int (*handle)(tn_request *r);
    int first_stage;   /* its stages: [first_stage, first_stage + nstages) */
    int nstages;
} chain_app;

typedef struct chain_env {
    const tenancy_config *cfg;
    int max_children;                 /* for tenant.max_workers given as a percentage */
    limits *lim;                      /* shared counters (may be NULL) */
    int worker;                       /* this worker's slot in them (limits_enter) */
    /* The host's scoreboard hook: which tenant this worker now serves (id 0: none). */
    void (*note_tenant)(void *ctx, int64_t id, const char *slug);
    void *hook_ctx;
    /* Which app serves r, asked after identification (r->path is then the path after a
     * tenant prefix), before any stage; it may set r->path and r->mount. NULL when it
     * answered r itself (a 404, a 400). NULL pick: the app chain_run is given serves every
     * request, with no call. */
    const chain_app *(*pick)(void *ctx, tn_request *r);
    void *pick_ctx;
    /* The host's event log in shared memory (tn_publish, tn_events); NULL: none in this
     * process (both then answer TN_ERR). */
    event_log *events;
    /* A job was queued (tn_job_enqueue): wake this host's idle job workers (NULL: none). */
    void (*job_wake)(void *ctx);
    void *job_wake_ctx;
} chain_env;

/* Per process (a worker, the CLI). The registry is opened lazily, on the first lookup, so
 * start-up never waits for it. TN_OK or TN_NOMEM. */
int chain_init(const chain_env *env);
void chain_fini(void);

/* The file descriptors the chain's storage pool may hold with this configuration (its
 * SQLite handles, three each, and its PostgreSQL connections): the process that calls
 * chain_init lets it open that many besides its own (fcgi's fd_limit_raise). */
long chain_fds_wanted(const tenancy_config *c);

/* An app's init may call tn_stage_add only between these two; the stages it adds are app's
 * (first_stage and nstages set). Apps' inits run one after the other. */
void chain_stages_open(chain_app *app);
void chain_stages_close(chain_app *app);

/* What the early looks find of a request not read yet. */
typedef struct chain_peek {
    int64_t id;    /* an active tenant */
    int cap;       /* its tenant.max_workers in workers (0: none) */
    bool affine;   /* its storage keeps per-worker state that grows with the tenants a worker
                    * serves (a PostgreSQL placement), and tenant.affinity says its requests
                    * are worth serving in one worker (on; auto once this worker's pool closed
                    * a connection at its bound) */
} chain_peek;

/* What this process's storage pool did since it started (counters) and holds now (gauges):
 * what fcgi publishes for the status page and the metrics, so that an operator sees
 * connections being made, closed at their bounds or evicted for room. */
typedef struct chain_storage {
    uint64_t pg_connects;       /* PostgreSQL connections opened */
    uint64_t pg_closed_tenants; /* closed after max_tenants distinct schemas */
    uint64_t pg_closed_memory;  /* closed at max_backend_memory */
    uint64_t pg_evicted;        /* database-mode (or a tenant login's) ones closed for room
                                   (storage.pg_db_max_open) */
    uint64_t pg_unreachable;    /* connects that failed */
    uint64_t pg_refused;        /* acquires refused while their server backs off */
    uint64_t memory_reads;      /* reads of a backend's memory (the byte bound) */
    uint64_t sqlite_opens;      /* SQLite handles opened */
    uint64_t sqlite_hits;       /* requests that found their tenant's handle open */
    uint64_t sqlite_evicted;    /* handles closed for room (storage.sqlite_max_open) */
    uint64_t resets;            /* connections a request left dirty, rolled back or wiped */
    uint32_t pg_open, sqlite_open;
} chain_storage;

/* TN_OK with *out, or TN_DECLINED before chain_init made the pool (all zero). */
int chain_storage_stats(chain_storage *out);

/* A number that changes whenever the pool is used: while it stays the same, so does every
 * count of chain_storage (a request that touched no storage need not look at them). */
uint64_t chain_storage_uses(void);

/* Whether tenant.affinity sends anything from this worker now (on; or auto once its pool has
 * closed a PostgreSQL connection at its bound or to make room): when not, fcgi need not even
 * look at a request's tenant for it. */
bool chain_affinity_now(void);

/* Another worker of this generation found that the tenants do not all fit (fcgi reads it from
 * the scoreboard): with tenant.affinity = auto this worker sends from now on too, as if its
 * own pool had closed a connection at its bound. */
void chain_affinity_learn(void);

/* The tenant of a request not read yet (its params only: fcgi's tenant.queue_wait and
 * tenant.affinity look before it reads), found as the chain finds it (the lookup cache, else
 * the registry, the result cached) but with nothing answered and no context entered. TN_OK
 * with *out for an active tenant; TN_NOTFOUND otherwise (the chain then decides as usual). */
int chain_peek_tenant(tn_request *r, int64_t now_ms, chain_peek *out);

/* The same from the host params alone, without a request (get: a param's raw bytes, NULL when
 * absent): TN_DECLINED when the resolvers need more than the host (a header or a path
 * resolver is configured: use chain_peek_tenant), else as chain_peek_tenant. */
int chain_peek_host(const char *(*get)(void *ctx, const char *name, size_t *len), void *ctx,
                    int64_t now_ms, chain_peek *out);

/* Run the request through the chain, then app's stages and handler (or, with env.pick set,
 * those of the app pick names). Returns the handler's code, or TN_DONE when the chain
 * answered the request itself (404, 503, a theme, a stage, pick). */
int chain_run(tn_request *r, const chain_app *app);

/* End the request's tenant context: counters, cap, and the asserted-empty state for the
 * next request. Safe to call when chain_run did not get far. */
void chain_finish(tn_request *r, int status);

/* Run fn as a job of the tenant `slug` (NULL or "": a central job, no tenant), with a
 * request that has no client, as tn_run does: the same context, storage released and the
 * context cleared after, however fn ends. `hook`: a tenant being deleted is served too (the
 * lifecycle hook that tells the app). `app`: the job's app (its mount name, "" the root
 * one), which tn_job_enqueue from the job queues for. `timeout_ms` > 0: the job's own time
 * limit, which bounds its PostgreSQL statements in place of the placement's
 * statement_timeout (a request's bound; a job may take longer, and a statement must not
 * outlive the attempt the job worker gives up on); 0: the placement's, as for a request.
 * fn's code, TN_NOTFOUND (no such tenant, or it is being deleted), TN_DENIED (inside a
 * request), or a registry error. */
int chain_run_job(const char *slug, bool hook, const char *app, int timeout_ms, tn_run_fn fn,
                  void *arg);

/* For the access log and error lines: the stage that was running ("identify", "state",
 * "limit", "theme", an app stage's name, "handler"). */
const char *chain_stage(const tn_request *r);

#endif

/*
 * tenancy.h — the one header an app module includes.
 *
 * An app is a shared object that tenancyd loads (`app = /path/to/app.so`). It exports one
 * symbol, `tenancy_app`, of type `tn_app`, and handles requests through the functions
 * below. Apps never see libfcgi, the process manager or the storage drivers: everything
 * they may touch is declared here, and nothing here may change meaning without bumping
 * TN_ABI_VERSION.
 *
 * Lifetimes. A `tn_request` and every pointer obtained from it (params, headers, body,
 * memory from tn_alloc) are valid until the handler returns; the host then resets the
 * request arena. Nothing may be kept across requests except what the app allocates itself.
 *
 * Threads. A worker runs one request at a time in one thread; apps need no locking for
 * per-process state, but must not start threads that touch a request.
 *
 * Return codes. Every function that can fail returns a `tn_rc` (or NULL for lookups); the
 * comment on each says which codes it returns.
 */
#ifndef TENANCY_H
#define TENANCY_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2 added tn_app.job (the job handler). The host loads modules built for 1 or 2. */
#define TN_ABI_VERSION 2

#if defined(__GNUC__)
#define TN_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define TN_EXPORT __attribute__((visibility("default")))
#else
#define TN_PRINTF(a, b)
#define TN_EXPORT
#endif

/* One return-code vocabulary for the whole project (host, modules and apps). The host
 * declares the same codes, value for value, in its own core (checked when it is built);
 * TN_RC_DECLARED keeps the one declaration when a file sees both. */
#ifndef TN_RC_DECLARED
#define TN_RC_DECLARED
typedef enum tn_rc {
    TN_OK = 0,          /* done */
    TN_ERR = -1,        /* failed; errno or the log says why */
    TN_AGAIN = -2,      /* not now; retry later (a timeout, a busy resource) */
    TN_DECLINED = -3,   /* not mine: let the next stage or resolver decide */
    TN_BUSY = -4,       /* a limit is reached (workers, handles, queue) */
    TN_NOTFOUND = -5,   /* no such thing */
    TN_INVALID = -6,    /* bad input; nothing was changed */
    TN_TOOBIG = -7,     /* input over a configured size limit */
    TN_TIMEOUT = -8,    /* a deadline passed */
    TN_DENIED = -9,     /* not allowed */
    TN_EXISTS = -10,    /* already there */
    TN_NOMEM = -11,     /* out of memory */
    TN_IO = -12,        /* the peer or a file failed (write error, client gone) */
    TN_DONE = 1         /* a stage answered the request itself: stop the chain */
} tn_rc;
#endif

/* A short, static, lower-case name for a return code ("ok", "not found", ...). */
const char *tn_rc_str(int rc);

/* ---- Requests --------------------------------------------------------------------------- */

typedef struct tn_request tn_request;

/* The HTTP method ("GET"), the path without the query ("/a/b"), and the raw query string
 * without '?' ("" when there is none). Never NULL. */
const char *tn_method(const tn_request *r);
const char *tn_path(const tn_request *r);
const char *tn_query(const tn_request *r);

/* The request's host name as the web server passed it, lower-cased and without a port.
 * "" when the web server passed none. */
const char *tn_host(const tn_request *r);

/* A FastCGI parameter ("REMOTE_ADDR", "SERVER_NAME", ...) or NULL when absent. */
const char *tn_param(const tn_request *r, const char *name);

/* A request header by its HTTP name, case-insensitive ("Content-Type", "X-Token"), or NULL. */
const char *tn_header(const tn_request *r, const char *name);

/* The value of one query-string or cookie field, percent-decoded for the query; NULL when
 * absent. The first occurrence wins. */
const char *tn_query_arg(tn_request *r, const char *name);
const char *tn_cookie(tn_request *r, const char *name);

/* Read the whole request body into memory owned by the request.
 * Returns TN_OK (data may be NULL when len is 0), TN_TOOBIG when the body exceeds the
 * configured `max_body` (the host then answers 413 if nothing was sent yet), TN_IO when the
 * client went away. */
int tn_body(tn_request *r, const char **data, size_t *len);

/* A unique id for this request (also on its access-log line). */
const char *tn_request_id(const tn_request *r);

/* Memory that lives until the request ends. NULL only when out of memory. */
void *tn_alloc(tn_request *r, size_t n);
char *tn_strdup(tn_request *r, const char *s);
char *tn_sprintf(tn_request *r, const char *fmt, ...) TN_PRINTF(2, 3);

/* ---- Responses -------------------------------------------------------------------------- */

/* Set the status (default 200) and add headers; both only before the first body byte.
 * Return TN_OK, TN_INVALID for a status outside 100..599 or a name/value with CR, LF or NUL,
 * TN_ERR when the body has started. */
int tn_set_status(tn_request *r, int status);
int tn_add_header(tn_request *r, const char *name, const char *value);

/* Append to the body. Return TN_OK or TN_IO when the client has gone away. */
int tn_write(tn_request *r, const void *data, size_t len);
int tn_puts(tn_request *r, const char *s);
int tn_printf(tn_request *r, const char *fmt, ...) TN_PRINTF(2, 3);

/* Answer with a small error page (HTML or JSON, chosen from the Accept header).
 * Only valid before the body has started: returns TN_ERR after. */
int tn_send_error(tn_request *r, int status, const char *message);

/* Send the response head and what is buffered now, and go on writing: a long answer
 * streams instead of waiting for the end (tn_write buffers up to 64 KiB, then sends too).
 * The head goes out once, on the first flush; headers and status are fixed from then on.
 * The request still ends at request_timeout; for a stream that outlives it, use
 * tn_subscribe. TN_OK, TN_IO (the client went away, or a request with no client). The web
 * server must pass the bytes on as they come (nginx: `fastcgi_buffering off`). */
int tn_flush(tn_request *r);

/* Hand this request to the host's stream hub as a Server-Sent Events stream of the
 * request's tenant: the hub answers 200 text/event-stream, replays the events after
 * `last_event_id` (NULL: the Last-Event-ID header, else none) on `channels` (NULL/0: all
 * the tenant's), then sends each new one as it is published, with heartbeats, until the
 * client goes away, the tenant is suspended or deleted, or a limit ends it. The worker is
 * free as soon as this returns TN_OK; the handler must return right after and write
 * nothing more. Only before anything was sent, and with the request body read or empty.
 * TN_BUSY (a subscriber limit: answer 503), TN_NOTFOUND (central request), TN_INVALID (a
 * bad channel name, more than 16 channels, a bad last_event_id), TN_ERR (no hub running,
 * or the response has started: answer 503). A channel is [A-Za-z0-9_.:-]{1,64}. */
int tn_subscribe(tn_request *r, const char *const *channels, int nchannels,
                 const char *last_event_id);

/* Write to the host's error log with this request's context (request id, tenant, pid).
 * Levels: */
#ifndef TN_LOG_DECLARED
#define TN_LOG_DECLARED
enum { TN_LOG_ERROR = 0, TN_LOG_WARN = 1, TN_LOG_INFO = 2, TN_LOG_DEBUG = 3 };
#endif
void tn_log(const tn_request *r, int level, const char *fmt, ...) TN_PRINTF(3, 4);

/* ---- The tenant -----------------------------------------------------------------------------
 *
 * The chain identifies the tenant of each request before the handler runs (from the host, a
 * subdomain, a trusted header or a path prefix; see tenancyd.conf(5)) and refuses requests
 * for unknown, suspended or unavailable tenants itself. The handler only ever sees its own
 * request's tenant; the context is cleared when the request ends, however it ends.
 */

typedef struct tn_tenant tn_tenant;

/* The request's tenant, or NULL for a request to a central domain (the platform's own
 * pages) or when tenancy is not configured. */
const tn_tenant *tn_tenant_of(const tn_request *r);

int64_t tn_tenant_id(const tn_tenant *t);
const char *tn_tenant_slug(const tn_tenant *t);
const char *tn_tenant_name(const tn_tenant *t);
/* "active", "maintenance", "suspended", "moving", ... (handlers normally see "active", or
 * "moving" for a read). */
const char *tn_tenant_state(const tn_tenant *t);
/* A tenant setting (tenancy settings set ...), or NULL when unset. */
const char *tn_tenant_setting(const tn_tenant *t, const char *key);

/* A per-tenant cache in each worker's memory. Keys are namespaced by the request's tenant
 * (central requests share one namespace of their own), so a tenant can never read another's
 * entries. Bounded by app_cache.bytes and app_cache.entries (least recently used evicted).
 * tn_cache_get copies the value into request memory: TN_OK or TN_NOTFOUND. tn_cache_set:
 * TN_OK, TN_TOOBIG (larger than the whole cache), TN_NOMEM. ttl_s 0 means no expiry. */
int tn_cache_get(tn_request *r, const char *key, const void **value, size_t *len);
int tn_cache_set(tn_request *r, const char *key, const void *value, size_t len, int ttl_s);
int tn_cache_del(tn_request *r, const char *key);

/* Add a stage to the chain (auth, rate limits...), from the app's init only. Stages run in
 * the order added, after the tenant is identified and its state checked, before the
 * handler, for this app's requests only (another app mounted in the same tenancyd never
 * runs them). A stage returns TN_OK to go on, TN_DONE when it answered the request itself;
 * anything else gives a 500 (logged with the stage name). Returns TN_OK, TN_BUSY (too many
 * stages) or TN_ERR outside init. */
typedef int (*tn_stage_fn)(tn_request *r, void *arg);
int tn_stage_add(const char *name, tn_stage_fn fn, void *arg);

/* Run fn for one tenant outside an HTTP request (a job, a script): the same context and the
 * same guarantees as a request, with a request object that has no client (params absent,
 * responses refused). Returns fn's code, TN_NOTFOUND for an unknown or deleted tenant,
 * TN_DENIED when called inside a request (a request's code must not act for another
 * tenant), or a registry error. */
typedef int (*tn_run_fn)(tn_request *r, void *arg);
int tn_run(const char *slug, tn_run_fn fn, void *arg);

/* ---- Events ------------------------------------------------------------------------------
 *
 * Each host keeps a bounded log of events per tenant (`events.ring_size`), which the host's
 * stream hub sends to the tenant's Server-Sent Events subscribers. A tenant's events never
 * reach another tenant. Ids are per tenant and per host, from 1, increasing by one; they
 * start again when tenancyd restarts. With a PostgreSQL registry, each event also reaches
 * the other hosts (NOTIFY), where it gets that host's next id.
 */

/* Publish an event to the request's own tenant's subscribers, on `channel` (a name
 * [A-Za-z0-9_.:-]{1,64}; the data API uses "table:<name>" and "schema"). Call it after the
 * commit that made the change. data is UTF-8 text without NUL (SSE "data:" lines: newlines
 * are split into several data lines by the hub). Works in tn_run too. TN_OK with the
 * event's id in *id (may be NULL); TN_INVALID (a bad channel name), TN_TOOBIG (data over
 * events.max_event), TN_NOTFOUND (a central request), TN_BUSY (the log's tenant table is
 * full, or its lock is held too long), TN_ERR (no event log in this process). */
int tn_publish(tn_request *r, const char *channel, const char *data, uint64_t *id);

/* One event as tn_events gives it; valid during the callback only. */
typedef struct tn_event {
    uint64_t id;
    const char *channel;
    const char *data;
    size_t len;
    int64_t time_ms;   /* wall clock (ms since the epoch) when this host logged it */
} tn_event;

/* The request's own tenant's events with id > after that the log still holds, oldest first
 * (polling, or a page that shows what changed): fn is called for each, and must be quick
 * (the host's log is locked meanwhile: copy what you keep or append it to the response
 * buffer; do not call the storage, tn_publish or anything that may wait); a non-zero return
 * stops the walk and is returned. *last (may be NULL) gets the
 * tenant's newest id. TN_OK; TN_AGAIN when some events after `after` are no longer kept, or
 * `after` is newer than any id (ids restarted): the caller should reload and go on from
 * *last; TN_NOTFOUND (a central request), TN_BUSY, TN_ERR (no event log in this process). */
typedef int (*tn_event_fn)(void *ctx, const tn_event *e);
int tn_events(tn_request *r, uint64_t after, tn_event_fn fn, void *ctx, uint64_t *last);

/* ---- Jobs --------------------------------------------------------------------------------
 *
 * Work outside a request, in a tenant's context. A job is stored durably in the registry
 * and run by the host's job workers (`pm.jobs`), never by a worker that serves HTTP: the
 * app's `job` handler gets a request object with no client whose tenant is the job's
 * (tn_tenant_of, tn_db_of, tn_publish, tn_job_enqueue work as in a request; the storage
 * scope is cleared after each job however it ends). At least once: a job whose worker dies
 * runs again, so a handler must be safe to repeat. Tenants are served in turn, so one
 * tenant's backlog never starves another's job.
 */
typedef struct tn_job_opts {
    int64_t delay_ms;        /* run no sooner than this after now (0: at once) */
    int priority;            /* -100..100, higher first among one tenant's jobs (0) */
    const char *unique_key;  /* while a job of the tenant with this key is queued or running,
                              * enqueue returns TN_EXISTS and its id instead (NULL: none) */
    int max_attempts;        /* 0: jobs.max_attempts */
    int timeout_ms;          /* 0: jobs.timeout; the attempt is killed after it, and it is
                              * each of the job's PostgreSQL statements' statement_timeout
                              * (in place of the placement's, a request's bound) */
    const char *tenant;      /* central requests and jobs only: the slug of the tenant to
                              * queue for (NULL: the caller's own tenant, or a central job) */
} tn_job_opts;

/* Queue job `name` ([a-z][a-z0-9_.:-]{0,63}, not starting "tenancy.") with payload text (at
 * most 64 KiB, NULL: none) for the request's own tenant, handled by the app that serves
 * the request (by its mount). opts may be NULL. TN_OK with *id (may be NULL); TN_EXISTS with
 * the holder's id (unique_key); TN_INVALID (a bad name, payload or option);
 * TN_DENIED (opts->tenant from a tenant's request); TN_NOTFOUND (no such tenant); TN_IO (the
 * registry cannot be reached). Not part of the tenant storage's transaction: call it after
 * the commit whose change the job needs. */
int tn_job_enqueue(tn_request *r, const char *name, const char *payload,
                   const tn_job_opts *opts, int64_t *id);

/* A recurring job of the request's own tenant (a central request: a central one), for the
 * app serving the request: `cron` is five fields (minute hour day-of-month month
 * day-of-week, in UTC; lists, ranges, steps, names) or @hourly, @daily, @weekly, @monthly,
 * @yearly. One schedule per (tenant, app, name): setting it again replaces it. At each time
 * it queues job `name` with `payload`; after downtime it runs once to catch up, not once per
 * missed time, and a run still queued or running is not stacked. TN_OK; TN_INVALID (the
 * spec or name: tn_request_error() says which field), TN_IO. Unschedule: TN_OK or
 * TN_NOTFOUND. */
int tn_job_schedule(tn_request *r, const char *name, const char *cron, const char *payload);
int tn_job_unschedule(tn_request *r, const char *name);

/* The job a job handler runs; valid during the call. */
typedef struct tn_job {
    int64_t id;
    const char *name;        /* the app's name, or "tenancy.created", "tenancy.suspended",
                              * "tenancy.resumed", "tenancy.migrated", "tenancy.moved",
                              * "tenancy.deleted" (lifecycle hooks) */
    const char *payload;     /* "" when none */
    size_t len;
    int attempt;             /* 1 for the first run */
    int max_attempts;
    int64_t enqueued_ms;     /* wall clock */
} tn_job;

/* In a job handler: record why this attempt failed (shown in `tenancy job show` and the
 * panel) and return TN_ERR, so `return tn_job_fail(r, "...")` ends the attempt. The job
 * runs again after a backoff until its attempts are used up, then is kept as dead. */
int tn_job_fail(tn_request *r, const char *fmt, ...) TN_PRINTF(2, 3);

/* ---- Storage ------------------------------------------------------------------------------
 *
 * One API over SQLite and PostgreSQL. SQL takes positional parameters written $1, $2, ... in
 * both backends; values are passed as text (NULL for SQL NULL) and converted by the database.
 * Never build SQL from input: pass it as parameters. Rows come back as text.
 */

typedef struct tn_db tn_db;
typedef struct tn_rows tn_rows;

/* Run a statement that returns no rows. TN_OK, TN_EXISTS (a unique constraint refused it),
 * TN_INVALID (SQL error), TN_BUSY (locked past busy_timeout), TN_IO (connection lost),
 * TN_ERR; tn_db_error() says why. */
int tn_db_exec(tn_db *db, const char *sql, int nparams, const char *const *params);

/* Run a query; iterate with tn_rows_next(). Returns as tn_db_exec. *rows is NULL on error. */
int tn_db_query(tn_db *db, tn_rows **rows, const char *sql, int nparams,
                const char *const *params);

/* Advance to the next row: TN_OK (a row is there), TN_DONE (no more rows), or an error. */
int tn_rows_next(tn_rows *rows);
int tn_rows_ncols(const tn_rows *rows);
const char *tn_rows_colname(const tn_rows *rows, int col);
/* A column of the current row by index or by name: NULL for SQL NULL or no such column. */
const char *tn_rows_get(const tn_rows *rows, int col);
const char *tn_rows_getn(const tn_rows *rows, const char *name);
void tn_rows_free(tn_rows *rows);

/* The request's own tenant storage: its SQLite file, PostgreSQL schema or database, as the
 * registry places it; opened on first use and held until the request ends. When the request
 * ends, a transaction it left open is rolled back and the connection's state is checked, so
 * nothing of this tenant can reach the next request. NULL for a central request, or when
 * the storage cannot be reached (the reason is logged; answer 503). On PostgreSQL in schema
 * mode each transaction runs with the tenant's schema as its only search path. */
tn_db *tn_db_of(tn_request *r);

/* Rows changed by the last statement, and the id of the last inserted row (SQLite rowid;
 * in PostgreSQL, use INSERT ... RETURNING id instead: this returns -1). */
int64_t tn_db_changes(const tn_db *db);
int64_t tn_db_last_id(const tn_db *db);

/* Transactions. tn_db_commit/rollback without a begin return TN_INVALID. */
int tn_db_begin(tn_db *db);
int tn_db_commit(tn_db *db);
int tn_db_rollback(tn_db *db);

/* The last error message ("" when none), the backend name ("sqlite" or "postgres"), and the
 * native handle (sqlite3 * or PGconn *) for what this API does not cover. */
const char *tn_db_error(const tn_db *db);
const char *tn_db_backend(const tn_db *db);
void *tn_db_native(tn_db *db);

/* SQLite: a number that moves whenever the database's content may have changed, through this
 * connection (its commits) or any other (schema or data), read without a statement. It
 * reflects the connection's last read transaction: another connection's commit shows only
 * after a statement of this connection has begun a transaction that sees it, so read it
 * after such a statement. Equal numbers from one connection mean that nothing changed in
 * between; a number is never given again by another connection of the process. A schema
 * check can then skip its statement while the number stands still (apps/data does).
 * TN_OK; TN_INVALID on PostgreSQL (no such number without a round trip). */
int tn_db_data_version(tn_db *db, uint64_t *version);

/* A read-only statement from the tenant's own clients (a data API's query endpoint), run in
 * the sandbox the admin panel's console uses (storage/readonly.c): SQLite on a read-only
 * connection under an allow-list authorizer, one statement; PostgreSQL in a READ ONLY
 * transaction as the tenant's own role with the tenant's schema as its only search path,
 * always rolled back. Parameters as tn_db_query. At most row_cap rows (truncated says there
 * were more); each statement stops after timeout_ms. The result lives in the request's
 * arena. TN_OK with *out; TN_DENIED (the sandbox refused it: tn_request_error() says by what
 * rule), TN_TIMEOUT, TN_INVALID (SQL error), TN_NOTFOUND (a central request), or a storage
 * error. */
typedef struct tn_result {
    int ncols;
    const char *const *cols;
    int nrows;
    const char *const *const *rows;   /* rows[i][j]: text, NULL for SQL NULL */
    int truncated;
} tn_result;
int tn_db_query_sandboxed(tn_request *r, const char *sql, int nparams,
                          const char *const *params, int row_cap, int timeout_ms,
                          const tn_result **out);

/* The message of the last tn_db_query_sandboxed or tn_key_check that failed ("" if none). */
const char *tn_request_error(const tn_request *r);

/* ---- API keys -----------------------------------------------------------------------------
 *
 * Per-tenant bearer tokens (`tenancy key create SLUG`), kept in the registry as hashes. An app
 * that serves a tenant's own clients (apps/data) checks the token it was given.
 */
#define TN_KEY_READ_ONLY 1u   /* the key may read, not write */

/* Check `token` against the live keys of the request's own tenant: TN_OK with *flags when it
 * is one; TN_DENIED when it is unknown, revoked, expired or another tenant's; TN_INVALID when
 * it is not a key's shape; TN_NOTFOUND for a central request; or a registry error (TN_IO:
 * answer 503). tn_request_error() says why for each refusal. Answers are cached in the worker
 * for a few seconds, but a revoke reaches every worker by its next request, and expiry is
 * checked at each call. */
int tn_key_check(tn_request *r, const char *token, unsigned *flags);

/* ---- Mounts ------------------------------------------------------------------------------- */

/* The path prefix the request's app is mounted at ("" for the app at the root); tn_path()
 * is the path after it. A tenant path prefix comes before the mount and is not part of it
 * (/t/acme/api/x: mount "/api", path "/x"). */
const char *tn_mount(const tn_request *r);

/* ---- The app module --------------------------------------------------------------------- */

/* What the host tells an app at init. */
typedef struct tn_app_env {
    const char *config_path;  /* the tenancyd config file */
    const char *app_path;     /* this module's path */
    int worker_index;         /* 0..pm.max_children-1 within its generation */
    unsigned generation;      /* config generation (bumped by each reload) */
    int job_worker;           /* 1 in a job worker (pm.jobs), 0 in a worker serving HTTP */
} tn_app_env;

typedef struct tn_app {
    unsigned abi;          /* must be TN_ABI_VERSION */
    const char *name;      /* short name for logs and status */
    const char *version;   /* free text, shown in status */
    /* Called once in each worker after fork, before its first request. Anything but TN_OK
     * makes the worker exit; during a reload that keeps the old generation running. May be
     * NULL. */
    int (*init)(const tn_app_env *env);
    /* Called for each request. Return TN_OK when the response is complete (also for 4xx/5xx
     * the app sent itself); any other code makes the host answer 500 if nothing was sent
     * yet, and is logged with the request's context. Required. */
    int (*handle)(tn_request *r);
    /* Called once when the worker exits normally. May be NULL. */
    void (*fini)(void);
    /* (abi 2) Run one job in the job's tenant context (see Jobs). TN_OK: done; anything
     * else: the attempt failed (retried with backoff, then dead). Also told of tenants'
     * lifecycle (names "tenancy.*"), where TN_OK or TN_DECLINED both mean done. NULL: the
     * app takes no jobs (its jobs die with "no job handler"; hooks are skipped, and with
     * jobs.hooks = auto not even queued while no app of a running host has a handler). */
    int (*job)(tn_request *r, const tn_job *job);
} tn_app;

/* The symbol an app exports:  TN_APP_DEFINE = { .abi = TN_ABI_VERSION, ... }; */
#define TN_APP_SYMBOL "tenancy_app"
#define TN_APP_DEFINE TN_EXPORT const tn_app tenancy_app

#ifdef __cplusplus
}
#endif
#endif /* TENANCY_H */

/*
 * jobs.h — the job queue, kept in the registry's database (SQLite control.db, or the
 * PostgreSQL schema `tenancy` shared by several hosts): jobs, their attempts, leases and
 * dead letters; recurring schedules (cron); the fair claim across tenants.
 *
 * Who calls it: the chain (tn_job_enqueue from a request or a job), the job workers
 * (fcgi/jobs.c: claim, finish, fail, recover), the tenant operations (lifecycle hooks:
 * ops_*.c enqueue "tenancy.<event>" jobs), the command (`tenancy job ...`) and the panel.
 *
 * Model. A job belongs to one tenant (tenant_id > 0) or to none (0: a central job, run with
 * no tenant context). It names the app that handles it (`app`: a mount's name, "" for the
 * app at the root; hooks use "*": every app with a job handler). States:
 *
 *   queued ──claim──▶ running ──finish──▶ done
 *     ▲                 │ fail (attempts < max: run_at = now + backoff)
 *     └─────────────────┤
 *                       └ fail (attempts = max) ──▶ dead ──retry──▶ queued
 *   queued ──cancel──▶ cancelled ──retry──▶ queued
 *
 * At least once: a job is marked running with a lease (a random token of the claiming
 * process, and lease_until = now + timeout + grace). finish/fail act only while the lease
 * is the caller's, so a worker that lost its lease (it was presumed dead) cannot overwrite a
 * later attempt. A job whose worker died is queued again: at once when the master saw the
 * death (jobs_recover, by lease), or when its lease expires (jobs_reap). Such a re-run is the
 * only way a job runs twice; it counts as an attempt.
 *
 * Fairness. Ready jobs are claimed one tenant at a time in round robin: the tenant whose
 * last claim is oldest goes first (job_queues.served_at), so one tenant's 10,000 queued
 * jobs wait behind one job of each other tenant, not the other way round. Within a tenant:
 * higher priority first, then the oldest. A tenant with `per_tenant_cap` jobs running is
 * skipped. On PostgreSQL the claim takes its rows FOR UPDATE SKIP LOCKED, so many job
 * workers on many hosts claim without waiting on each other; on SQLite a claim is one
 * BEGIN IMMEDIATE transaction.
 *
 * Unique keys. While a job of a tenant with a given unique_key is queued or running, another
 * enqueue with that key returns TN_EXISTS and the existing job's id (idempotent enqueue).
 *
 * Schedules. A schedule is (tenant, name, cron spec in UTC, payload, app). jobs_schedules_due
 * enqueues one job for each schedule whose next_run_at has passed and sets next_run_at to the
 * first time after *now*: after downtime a schedule runs once to catch up, never once per
 * missed time. Its job's unique key is "schedule:<id>", so a slow job is not stacked.
 *
 * Tables (registry schema, both dialects): jobs, job_queues, job_schedules. Times are
 * milliseconds since the epoch (wall clock). Every statement is parameterized; every change
 * is one transaction. None bumps the registry generation (jobs are not tenant records).
 *
 * Must not: run a job, know the app API, or scan the jobs table without an index (lists are
 * paged by id; counts are per state with GROUP BY).
 */
#ifndef TN_TENANCY_JOBS_H
#define TN_TENANCY_JOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tenancy/registry.h"

enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_DONE, JOB_DEAD, JOB_CANCELLED, JOB_NSTATES };

/* "queued", "running", "done", "dead", "cancelled"; parse: the state or -1. */
const char *job_state_name(int state);
int job_state_parse(const char *name);

#define JOB_NAME_MAX 64          /* [a-z0-9_.:-]{1,64}, starting with a letter */
#define JOB_PAYLOAD_MAX 65536    /* bytes of payload text (no NUL) */
#define JOB_KEY_MAX 200          /* bytes of a unique key */
#define JOB_ERROR_MAX 1000       /* last_error is cut to this */
#define JOB_PRIORITY_MIN (-100)
#define JOB_PRIORITY_MAX 100
#define JOB_APP_ALL "*"          /* a hook: every app with a job handler */

/* A job's name: the rule above. Names starting "tenancy." are the host's (lifecycle hooks);
 * apps may not enqueue them (the chain refuses). */
bool job_name_valid(const char *name);

/* A new job. Its app (and a schedule's) is NULL or "" (the root app), JOB_APP_ALL, or 1-64
 * of A-Z, a-z, 0-9, '_', '.' and '-' (a mount's name). */
typedef struct job_new {
    int64_t tenant_id;        /* 0: central */
    const char *app;          /* NULL or "": the root app; a mount name; JOB_APP_ALL */
    const char *name;
    const char *payload;      /* NULL: "" */
    int64_t run_at_ms;        /* 0: now */
    int priority;             /* JOB_PRIORITY_MIN..MAX */
    const char *unique_key;   /* NULL: none */
    int max_attempts;         /* >= 1 */
    int timeout_ms;           /* >= 1 */
} job_new;

/* Queue a job. TN_OK with *id; TN_EXISTS with *id the job that holds unique_key (nothing
 * added); TN_INVALID (a bad name, payload, priority, key or limits, with err saying which);
 * TN_NOTFOUND (no such tenant, or it is being deleted and the job is not a hook); or a
 * storage error. The payload and the key must be UTF-8 (PostgreSQL's text is); a key ""
 * is no key. A tenant in any other state (suspended, moving ...) takes jobs: the workers
 * decide what to run. */
int jobs_enqueue(registry *r, const job_new *j, int64_t now_ms, int64_t *id, char *err,
                 size_t errlen);

/* n jobs queued in one transaction (a wave of lifecycle hooks: one commit, not n). rcs[i]
 * gets job i's own outcome: TN_OK, TN_EXISTS (no id is reported), TN_NOTFOUND or
 * TN_INVALID, as jobs_enqueue would answer. Returns TN_OK, or a storage error with err set
 * and nothing queued (the caller may queue them one by one to find the job it comes from). */
int jobs_enqueue_many(registry *r, const job_new *j, int n, int64_t now_ms, int *rcs, char *err,
                      size_t errlen);

/* A job as read: strings point into memory owned by the store's caller-visible buffer and
 * stay valid until the next call on the same registry handle. */
typedef struct job_rec {
    int64_t id;
    int64_t tenant_id;       /* 0: central */
    const char *slug;        /* the tenant's slug ("" for central) */
    const char *app;
    const char *name;
    const char *payload;
    const char *unique_key;  /* "" when none */
    const char *last_error;  /* "" when none */
    const char *lease;       /* "" unless running */
    const char *progress;    /* free text the running attempt reported ("" when none) */
    int state;
    int priority;
    int attempts;            /* attempts started, this one included while running */
    int max_attempts;
    int timeout_ms;
    int64_t schedule_id;     /* 0: not from a schedule */
    int64_t run_at;
    int64_t created_at;
    int64_t started_at;      /* 0: never started */
    int64_t finished_at;     /* 0: not finished */
    int64_t lease_until;     /* 0 unless running */
} job_rec;

/* Claim the next job fairly (see above) with lease token `lease` ([A-Za-z0-9_-]{8,64}):
 * it becomes running, attempts + 1, lease_until = now + timeout + grace_ms. TN_OK with *out
 * (valid until the next call on r); TN_NOTFOUND when no job is ready (then *next_ms, when
 * not NULL, gets the earliest run_at of a queued job, or 0 when none is queued; the caller
 * may sleep until then); or a storage error. per_tenant_cap <= 0: no cap.
 * A *next_ms at or before now means jobs are ready but none could be taken: their tenants
 * are at the cap (a job must end first), or, on PostgreSQL, another claimer holds them at
 * this moment (try again shortly). TN_INVALID for a lease of another form. The claim's cost
 * does not depend on how many jobs are queued (tests/unit/tenancy/check_jobs.c measures
 * it); one tenant is claimed by one process at a time. */
int jobs_claim(registry *r, const char *lease, int per_tenant_cap, int grace_ms, int64_t now_ms,
               job_rec *out, int64_t *next_ms, char *err, size_t errlen);

/* A job that ran to its end, for jobs_finish_claim: its id (0: none) and when it ended; once
 * its end is committed, `recorded` is set and `rc` has jobs_finish's answer for it. */
typedef struct job_done {
    int64_t id, at_ms;
    int rc;
    bool recorded;
} job_done;

/* jobs_finish of `done` and jobs_claim in one registry transaction: a job worker that ran a
 * job to its end records it and takes its next with one commit, where the two calls wait
 * for the disk twice. The finish's own answer goes to done->rc (TN_NOTFOUND: its lease was
 * taken back; the claim goes on either way) with done->recorded, whatever the call returns
 * after the commit; when done->recorded is false nothing was committed (try again). Returns
 * as jobs_claim. */
int jobs_finish_claim(registry *r, job_done *done, const char *lease, int per_tenant_cap,
                      int grace_ms, int64_t now_ms, job_rec *out, int64_t *next_ms, char *err,
                      size_t errlen);

/* The job ran to the end: done. TN_OK; TN_NOTFOUND when the job is no longer running under
 * this lease (it was recovered and may be running elsewhere: the caller logs it). */
int jobs_finish(registry *r, int64_t id, const char *lease, int64_t now_ms, char *err,
                size_t errlen);

/* The attempt failed with `error`: queued again at now + backoff(attempts) (1 s, 2 s, 4 s ...
 * capped at max_backoff_ms, with up to 10 % jitter) while attempts < max_attempts, else dead.
 * *dead (may be NULL) says which. TN_OK; TN_NOTFOUND as jobs_finish. */
int jobs_fail(registry *r, int64_t id, const char *lease, const char *error, int64_t now_ms,
              int64_t max_backoff_ms, bool *dead, char *err, size_t errlen);

/* The claimed job cannot run now (its tenant is suspended, in maintenance or moving): queued
 * again at run_at_ms with `why` as its last error, the attempt not counted. TN_OK;
 * TN_NOTFOUND as jobs_finish. */
int jobs_release(registry *r, int64_t id, const char *lease, const char *why, int64_t run_at_ms,
                 int64_t now_ms, char *err, size_t errlen);

/* Lifecycle hooks of a tenant run one at a time, in the order they were queued (an app told
 * "suspended" then "resumed" must not see them the other way round): TN_OK when a hook of
 * tenant_id queued before job `id` is still queued or running (the caller releases `id` for
 * a moment), TN_NOTFOUND when none is. One read of the index jobs_hooks. */
int jobs_hook_waits(registry *r, int64_t tenant_id, int64_t id, char *err, size_t errlen);

/* The running attempt's progress (free text, at most 200 bytes, e.g. "40/100 tenants"), shown
 * by the command and the panel. TN_OK; TN_NOTFOUND as jobs_finish. Cleared by the next claim.
 * Longer text is cut at 200 bytes (on a UTF-8 boundary), as an error is at JOB_ERROR_MAX. */
int jobs_progress(registry *r, int64_t id, const char *lease, const char *progress, char *err,
                  size_t errlen);

/* A worker holding `lease` died (the master saw it): its running job, if any, is failed as
 * jobs_fail with the error `why` but queued again with no backoff (or dead when it was the
 * last attempt). *n (may be NULL) gets the number recovered (0 or 1). TN_OK or a storage
 * error (a lease of another form: TN_OK, nothing recovered). */
int jobs_recover(registry *r, const char *lease, const char *why, int64_t now_ms, int *n,
                 char *err, size_t errlen);

/* Running jobs whose lease_until has passed (a host that died, a worker nobody saw die):
 * each failed as jobs_recover does, with the error "lease expired". *n gets how many. */
int jobs_reap(registry *r, int64_t now_ms, int *n, char *err, size_t errlen);

/* Operator actions. cancel: queued → cancelled (TN_BUSY when running, TN_INVALID when
 * finished). retry: dead or cancelled → queued at once, attempts 0 (TN_INVALID otherwise;
 * TN_EXISTS when another job now holds its unique key). last_error is kept.
 * TN_NOTFOUND when there is no such job (or it is another tenant's, when tenant_id > 0 is
 * given; tenant_id 0: only a central job; -1 means any). */
int jobs_cancel(registry *r, int64_t id, int64_t tenant_id, int64_t now_ms, char *err,
                size_t errlen);
int jobs_retry(registry *r, int64_t id, int64_t tenant_id, int64_t now_ms, char *err,
               size_t errlen);

/* One job by id: TN_OK with *out (valid as jobs_claim's), TN_NOTFOUND. */
int jobs_get(registry *r, int64_t id, job_rec *out, char *err, size_t errlen);

/* A page of jobs, newest first (id < before_id; 0: from the newest), at most limit (1..1000),
 * filtered by tenant (-1: any, 0: central only) and state (-1: any). fn gets each; a non-zero
 * return stops and is returned. The page is read before fn is called, so fn may use r (the
 * record is valid during the call only). TN_OK, fn's code, TN_INVALID (an argument out of
 * range) or a storage error (logged). */
typedef int (*jobs_list_fn)(void *ctx, const job_rec *j);
int jobs_list(registry *r, int64_t tenant_id, int state, int64_t before_id, int limit,
              jobs_list_fn fn, void *ctx);

/* How many jobs are in each state, for one tenant (-1: all, 0: the central jobs). One GROUP BY
 * query. TN_OK or a storage error (logged; counts are then 0). */
int jobs_counts(registry *r, int64_t tenant_id, int64_t counts[JOB_NSTATES]);

/* Delete done and cancelled jobs that finished before `before_ms` (dead ones are kept until
 * retried or removed by hand). *n gets how many. SQLite: in batches of 1,000, each its own
 * transaction (none holds the write lock long); PostgreSQL: one statement. */
int jobs_prune(registry *r, int64_t before_ms, int *n, char *err, size_t errlen);

/* ---- which hosts take hooks (jobs.hooks = auto) ---------------------------------------- */

/* A host's job workers say every JOBS_HOST_SAY_MS whether an app of theirs has a job handler
 * (each hook goes to every such app); a row not renewed for JOBS_HOST_STALE_MS no longer
 * counts, and one a day old is deleted by the next say. */
#define JOBS_HOST_SAY_MS 10000
#define JOBS_HOST_STALE_MS 35000

/* The row of host `host` (its key, jobworker_host_key), written by the job worker `worker`
 * (its lease). TN_OK or a storage error. */
int jobs_host_say(registry *r, const char *host, const char *worker, bool hooks, int64_t now_ms,
                  char *err, size_t errlen);

/* The job worker `worker` stops for good: the host's row goes, unless another worker of the
 * host (a reload's) has written it since. TN_OK or a storage error. */
int jobs_host_gone(registry *r, const char *host, const char *worker, char *err, size_t errlen);

/* Whether a hook queued now can reach an app: true when some host said lately that it runs an
 * app with a job handler, and when none said anything lately (no job worker runs: the hook
 * waits for whichever apps start); false only when every host that said lately runs none.
 * TN_OK with *wanted, or a storage error (*wanted true). One read of job_hosts. */
int jobs_hooks_wanted(registry *r, int64_t now_ms, bool *wanted, char *err, size_t errlen);

/* ---- schedules ----------------------------------------------------------------------- */

typedef struct job_schedule {
    int64_t id;
    int64_t tenant_id;       /* 0: central */
    const char *slug;
    const char *app;
    const char *name;        /* the job's name; one schedule per (tenant, app, name) */
    const char *cron;        /* as given */
    const char *payload;
    int64_t next_run_at;
    int64_t last_run_at;     /* 0: never */
} job_schedule;

/* Add or replace the schedule (tenant_id, app, name): the spec is checked (core/cron.h) and
 * next_run_at set to its first time after now. TN_OK with *id; TN_INVALID (a bad spec or
 * name: err names it); TN_NOTFOUND (no such tenant). */
int jobs_schedule_set(registry *r, int64_t tenant_id, const char *app, const char *name,
                      const char *cron, const char *payload, int64_t now_ms, int64_t *id,
                      char *err, size_t errlen);
/* TN_OK or TN_NOTFOUND. */
int jobs_schedule_remove(registry *r, int64_t tenant_id, const char *app, const char *name,
                         char *err, size_t errlen);
/* Schedules of a tenant (-1: all, 0: the central ones), by id, read in pages of 500 (fn may use
 * r; the record is valid during the call only). TN_OK, fn's code, or a storage error. */
typedef int (*jobs_schedule_fn)(void *ctx, const job_schedule *s);
int jobs_schedule_list(registry *r, int64_t tenant_id, jobs_schedule_fn fn, void *ctx);

/* Enqueue the due schedules' jobs (see above), at most `limit` (1..1000) per call. *n gets how
 * many jobs were queued. Safe to run from several processes and hosts at once: a schedule's
 * next_run_at moves in the same transaction as its job is queued (PostgreSQL: the schedules
 * are taken FOR UPDATE SKIP LOCKED). A due schedule whose last job is still queued or
 * running, or whose tenant is being deleted, queues nothing this time; its next_run_at moves
 * on all the same (and last_run_at, the time a job was last queued, stays). The job runs at
 * once with priority 0, its schedule's app, name and payload, and the given max_attempts
 * and timeout_ms. */
int jobs_schedules_due(registry *r, int64_t now_ms, int limit, int max_attempts,
                       int timeout_ms, int *n, char *err, size_t errlen);

#endif

/*
 * ops.h — the tenant operations as a C API: what `tenancy` (cli/) and the panel (admin/)
 * both do to tenants, written once.
 *
 * Every operation takes an ops_env (the tenancy options, the configuration file's path for
 * relative storage.migrations / storage.seed, an open registry, an optional progress
 * callback), returns a TN_* code, fills err with tn_errf on failure, and prints nothing:
 * the caller decides what a person or a script sees. Long operations (migrate) report
 * their progress through the callback: ticks (done/total) and, per tenant, its slug and
 * outcome, so the command can draw its bar and the panel can write a progress file.
 *
 * Files: ops_env.c (what they share), ops_init.c (init), ops_create.c (create, single and bulk),
 * ops_tenant.c (state changes, restore, domains, settings, limits), ops_keys.c (API keys),
 * ops_jobs.c (the job queue as operators see it), ops_migrate.c (migrate
 * and its status), ops_move.c (move, export, import), ops_lifecycle.c (purge, check),
 * ops_runner.c (the parallel runner behind migrate and the bulk create:
 * ops_runner.h, for the ops files only), ops_run.c (a command once per tenant).
 *
 * Must not: print, read the terminal, install signal handlers (but the runner's, the
 * create's, which hold a signal until the running step ends, and ops_run's, which stop
 * handing out tenants), or run
 * SQL of its own (the registry is registry.h, a tenant's storage storage/).
 */
#ifndef TN_TENANCY_OPS_H
#define TN_TENANCY_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stdio.h>
#include <sys/types.h>

#include "storage/migrate.h"
#include "storage/target.h"
#include "tenancy/config.h"
#include "tenancy/jobs.h"
#include "tenancy/keys.h"
#include "tenancy/registry.h"

/* ---- the environment and progress -------------------------------------------------------- */

/* One event of a long operation. Over tenants (migrate, bulk create): a tick has slug NULL;
 * a tenant's outcome names it. Over one tenant's tables (move, export, import): a note (a
 * line for a person: "copying 3 tables from sqlite to pg"), or a table's rows so far (done
 * and total then count tables). */
typedef struct ops_progress {
    int done, total, failed;
    int64_t elapsed_ms;          /* since the operation started (a table: since it started) */
    const char *slug;            /* the tenant that just finished, or NULL (a tick) */
    const char *outcome;         /* its outcome: "migrated", "current", "failed", ... */
    const char *error;           /* its error, or NULL */
    bool final;                  /* the last event: the workers are gone */
    const char *note;            /* a line to show, or NULL */
    const char *table;           /* the table being copied, or NULL */
    int64_t rows, rows_want;     /* its rows so far, and how many it has (-1: not known) */
    bool table_done;             /* the table's last event */
} ops_progress;

typedef void (*ops_progress_fn)(void *ctx, const ops_progress *p);

/* A run's progress as a small file another process reads (the panel's job page): `key=value`
 * lines (done, total, failed, seconds, slug, outcome, table, rows, final), written whole to
 * a temporary file beside it and renamed over, so a reader never sees half of it. TN_OK or
 * TN_IO. */
int ops_progress_write(const char *path, const ops_progress *p);

typedef struct ops_progress_seen {
    int done, total, failed;
    double seconds;
    char slug[64], outcome[16];  /* the last tenant that finished */
    char table[128];             /* a copy: the table in hand ... */
    long long rows;              /* ... and its rows so far */
    bool final;
} ops_progress_seen;

/* The file read back. TN_OK, TN_NOTFOUND (not written yet), TN_IO. */
int ops_progress_read(const char *path, ops_progress_seen *out);

typedef struct ops_env {
    const tenancy_config *tc;
    const char *conf_path;       /* relative paths of the options are taken from its folder */
    const char *user, *group;    /* the workers' owner (`user`, `group`): what root makes
                                    for them is given to them; NULL: nobody */
    registry *reg;               /* open; an operation that forks may close and reopen it */
    ops_progress_fn progress;    /* may be NULL */
    void *progress_ctx;
} ops_env;

/* Queue the lifecycle hook "tenancy.<event>" of tenant `slug` for the apps' job handlers
 * (ops_hooks.c), after the change committed; payload may be NULL. The operations call it
 * themselves (create, set_state, restore, migrate, move); a failure does not undo the
 * change. TN_OK (also when jobs.hooks is off), or the error with err set. */
int ops_hook(ops_env *e, const char *slug, const char *event, const char *payload, char *err,
             size_t errlen);
/* ops_hook whose failure becomes a progress note ("warning: ...") for the caller to show. */
void ops_hook_told(ops_env *e, const char *slug, const char *event, const char *payload);

/* The same hook for many tenants in one registry transaction (a wave: `tenancy migrate`
 * records its results in batches, and a transaction per tenant cost the wave more than its
 * bookkeeping); each failure becomes a progress note. When the batch cannot be written,
 * the tenants are tried one by one, so each failure names its tenant. */
typedef struct ops_hook_item {
    const char *slug;
    int64_t tenant_id;
    const char *payload;   /* may be NULL */
} ops_hook_item;
void ops_hooks_told(ops_env *e, const ops_hook_item *items, int n, const char *event);

/* A path option of tenancyd.conf (storage.migrations, storage.seed): a relative one is
 * taken from the configuration file's folder. */
void ops_conf_path(const ops_env *e, const char *value, char *out, size_t outlen);

/* The migration set of storage.migrations (empty when it is not set). TN_OK or the error. */
int ops_migrations_load(const ops_env *e, migration_set **out, char *err, size_t errlen);

/* Load the PostgreSQL driver when the registry or a placement needs it, before forking, so
 * workers share it. Nothing is opened; a failure is left for the workers' opens to say. */
void ops_preload_drivers(const tenancy_config *tc);

/* Deferred registry commits of a parallel run (registry_defer_sync): flushed at most every
 * OPS_FLUSH_MS with ops_flush_due, at a worker's end with ops_flush_now, and once more by the
 * parent with ops_flush_all (opening e->reg when it is not open) before anything is told.
 * A killed worker loses nothing it committed; a power loss, at most OPS_FLUSH_MS of entries. */
#define OPS_FLUSH_MS 1000
void ops_flush_due(registry *r, int64_t *flushed_ms);
void ops_flush_now(registry *r);   /* NULL is fine */
int ops_flush_all(ops_env *e, char *err, size_t errlen);

/* "2026-12-02T14:43:07Z" (UTC) into out (at least 32 bytes); "" for 0. */
void ops_utc_time(int64_t t, char *out, size_t n);

/* The workers' owner (e->user, e->group) when root runs the operation; *uid stays -1 when
 * there is nothing to do. TN_OK or TN_INVALID (no such user or group). */
int ops_workers_owner(const ops_env *e, uid_t *uid, gid_t *gid, char *err, size_t errlen);
/* chown path to them; a missing path is TN_OK unless must_exist. TN_OK or TN_IO. */
int ops_give(const char *path, uid_t uid, gid_t gid, bool must_exist, char *err,
             size_t errlen);

/* A PostgreSQL target's role password, derived from the role key (rolekey.h), as the SCRAM
 * verifier target_create sets: written to v->role and pointed at by t->role_verifier; left
 * unset when there is no role or no key, or when nothing logs in as the role from the start
 * (login_as_role false: the console sets the password when it first logs in). With a group
 * login (t->group_role), its password the same way, to v->group and t->group_verifier. */
#define OPS_VERIFIER_MAX 200
#define OPS_VERSION_MAX MIGRATE_VERSION_MAX
/* What the operations' connections need before any runs: a group target's connections
 * (placement.NAME.login = group) log in as its group login, with the password the role key
 * gives (target_set_login_password). Process-wide; call once the configuration is loaded. */
void ops_env_ready(const ops_env *e);

typedef struct ops_verifiers {
    char role[OPS_VERIFIER_MAX];
    char group[OPS_VERIFIER_MAX];
} ops_verifiers;
void ops_role_verifier(const tenancy_config *tc, storage_target *t, ops_verifiers *v);

/* Whether a placement's byte bound (max_backend_memory) cannot apply: a schema placement
 * with the bound on whose login may not read its backends' memory (PostgreSQL gives that to
 * pg_read_all_stats). TN_OK with *unread set (false for any other placement), or the storage
 * error, which why says. init and check tell it with OPS_MEMORY_UNREAD. */
int ops_memory_unread(const placement *p, bool *unread, char *why, size_t whylen);
#define OPS_MEMORY_UNREAD                                                                    \
    "its login may not read its backends' memory (pg_backend_memory_contexts), so "            \
    "max_backend_memory does not apply and max_tenants alone bounds each connection"

/* A schema placement on the shared login (placement.NAME.login, its default): how many roles
 * that login may become, when it is not a superuser (0 otherwise, and for any other
 * placement). PostgreSQL 15 lists them on each connection's first SET ROLE and after any role
 * of the cluster changes, in a time that grows with the square of the count: above
 * OPS_LOGIN_ROLES_MAX, check says so (bench/run roles measures it). TN_OK, or the storage
 * error, which why says. */
int ops_login_roles(const placement *p, int64_t *roles, char *why, size_t whylen);
#define OPS_LOGIN_ROLES_MAX 2000
#define OPS_LOGIN_ROLES                                                                       \
    "PostgreSQL 15 lists the roles a login may become on each connection's first SET ROLE "   \
    "and after any role of the cluster changes, in a time that grows with the square of "     \
    "their number; set placement.%s.login = group, then run tenancy check --repair-roles"

/* ---- init (ops_init.c) -------------------------------------------------------------------- */

typedef struct ops_initialized {
    const char *backend;         /* "sqlite" or "postgres" */
    bool sqlite;
    bool key_made;               /* the role key was made now */
} ops_initialized;

/* Make state_dir, the role key, the registry's tables (e->reg is opened; closed again when
 * the files are given to the workers' owner) and the generation file; idempotent. A schema
 * placement whose public schema cannot be closed to PUBLIC is a note (e->progress). */
int ops_init(ops_env *e, ops_initialized *out, char *err, size_t errlen);

/* Is the registry a SQLite file that is not there (its path in path)? */
bool ops_registry_missing(const tenancy_config *tc, char *path, size_t n);

/* ---- short operations (ops_tenant.c): one registry transaction each ----------------------- */

/* Suspend, resume, maintenance or delete (state TENANT_SUSPENDED, ACTIVE, MAINTENANCE,
 * DELETING). A deleted tenant changes state only by ops_restore: TN_BUSY with err saying
 * so. TN_NOTFOUND, TN_INVALID, ... with the registry's message. */
int ops_set_state(ops_env *e, const char *slug, int state, char *err, size_t errlen);

/* Bring a deleted tenant back (active) within storage.delete_grace; TN_TIMEOUT once it is
 * over (err names when it ended). */
int ops_restore(ops_env *e, const char *slug, char *err, size_t errlen);

int ops_domain_add(ops_env *e, const char *slug, const char *domain, bool primary, char *err,
                   size_t errlen);
/* Remove a domain; when slug is not NULL, only a domain of that tenant (TN_NOTFOUND else). */
int ops_domain_remove(ops_env *e, const char *slug, const char *domain, char *err,
                      size_t errlen);

/* Set a setting (value NULL: remove it). */
int ops_setting_set(ops_env *e, const char *slug, const char *key, const char *value,
                    char *err, size_t errlen);

/* A tenant's own worker cap (0: the host's tenant.max_workers). */
int ops_set_max_workers(ops_env *e, const char *slug, int max_workers, char *err,
                        size_t errlen);

/* ---- API keys (ops_keys.c): a tenant's bearer tokens for its own clients ------------------ */

typedef struct ops_key_opts {
    bool read_only;              /* TN_KEY_READ_ONLY */
    const char *label;           /* NULL: none */
    const char *expires;         /* NULL: never; a duration from now (30d, 12h, 90m, 3600s,
                                    2w) or a UTC date (2027-01-31 or 2027-01-31T12:00:00Z) */
} ops_key_opts;

typedef struct ops_key_made {
    int64_t id;
    char token[KEY_TOKEN_MAX];   /* the only copy there will be: show it once */
    char prefix[KEY_PREFIX_MAX];
    bool read_only;
    int64_t created_at, expires_at;   /* expires_at 0: never */
} ops_key_made;

/* When `text` (as ops_key_opts.expires) ends, seen at `now`: TN_OK with *out, or TN_INVALID
 * (not a duration or a date, or not in the future) with err saying which forms it takes. */
int ops_key_expiry(const char *text, int64_t now, int64_t *out, char *err, size_t errlen);

/* Make a key for tenant slug: TN_OK with *out holding the token (never stored: the registry
 * keeps its hash), or the registry's code and message (TN_NOTFOUND, TN_INVALID), or TN_IO
 * when no random bytes could be had. */
int ops_key_create(ops_env *e, const char *slug, const ops_key_opts *o, ops_key_made *out,
                   char *err, size_t errlen);

/* Every key of one tenant (slug) or of all (NULL), in id order, a registry page at a time;
 * fn as registry_key_list's. Lists never hold a token or a hash. TN_OK or the error. */
int ops_key_list(ops_env *e, const char *slug, registry_key_fn fn, void *ctx, char *err,
                 size_t errlen);

/* Revoke a key of tenant slug named by `which`: its id (digits) or its prefix (tnk_ and 8
 * characters; a whole token is taken by its prefix too). From the next request on, every
 * worker refuses it. TN_OK (*already true when it was revoked before; *out may be NULL),
 * TN_NOTFOUND, TN_INVALID, or the registry's error. */
int ops_key_revoke(ops_env *e, const char *slug, const char *which, registry_key *out,
                   bool *already, char *err, size_t errlen);

/* ---- jobs (ops_jobs.c): the job queue as operators see it (tenancy/jobs.h) ---------------- */

/* Tenants are named by slug here (NULL: no tenant given; the functions say what that means)
 * and turned into the store's ids; a job's strings (job_rec, job_schedule) are the store's,
 * valid until the next call on e->reg. */

typedef struct ops_job_new {
    const char *slug;            /* NULL: a central job (no tenant) */
    const char *app;             /* NULL or "": the root app; a mount's name; "host.module": a
                                    host module's job (only with host set) */
    const char *name;            /* jobs.h's rule, not starting "tenancy." (the hooks') */
    const char *payload;         /* NULL: "" */
    int64_t delay_ms;
    int priority;
    const char *unique_key;      /* NULL: none */
    int max_attempts;            /* 0: jobs.max_attempts */
    int timeout_ms;              /* 0: jobs.timeout */
    bool host;                   /* queued by the host itself (the panel's long actions) */
} ops_job_new;

/* Queue a job. TN_OK with *id; TN_EXISTS with *id the job holding unique_key; TN_INVALID (a
 * "tenancy." name, an app "*" or "host.*" from outside the host, or the store's refusal);
 * TN_NOTFOUND (no such tenant). */
int ops_job_enqueue(ops_env *e, const ops_job_new *j, int64_t *id, char *err, size_t errlen);

/* A page of jobs, newest first: of tenant slug (NULL: every tenant and the central jobs;
 * central true: the central jobs only), in `state` (-1: any), with id < before_id (0: from
 * the newest), at most limit (1..1000). */
int ops_job_list(ops_env *e, const char *slug, bool central, int state, int64_t before_id,
                 int limit, jobs_list_fn fn, void *ctx, char *err, size_t errlen);

/* One job. With slug not NULL, only a job of that tenant: another's is TN_NOTFOUND, as a job
 * that is not there. */
int ops_job_get(ops_env *e, int64_t id, const char *slug, job_rec *out, char *err,
                size_t errlen);

/* Retry (dead or cancelled: queued again at once, attempts from 0) or cancel (queued) a
 * job; slug as ops_job_get's. TN_OK, TN_NOTFOUND, TN_INVALID (not in a state it applies to),
 * TN_BUSY (cancel of a running job), with err saying so. */
int ops_job_retry(ops_env *e, int64_t id, const char *slug, char *err, size_t errlen);
int ops_job_cancel(ops_env *e, int64_t id, const char *slug, char *err, size_t errlen);

/* How many jobs are in each state: of tenant slug, or of all (NULL). */
int ops_job_counts(ops_env *e, const char *slug, int64_t counts[JOB_NSTATES], char *err,
                   size_t errlen);

/* Schedules of tenant slug (NULL: all), by id; remove one of a tenant (slug NULL: central)
 * by its app (NULL: the root app) and job name. */
int ops_job_schedules(ops_env *e, const char *slug, jobs_schedule_fn fn, void *ctx, char *err,
                      size_t errlen);
/* Add or replace the schedule of job `name` (not "tenancy.*") for the tenant `slug` (NULL: a
 * central one) and the app mounted as `app` (NULL or "": the root one): cron in UTC, as
 * tn_job_schedule. TN_OK with *id; TN_INVALID (the spec, naming the field), TN_NOTFOUND. */
int ops_job_schedule(ops_env *e, const char *slug, const char *app, const char *name,
                     const char *cron, const char *payload, int64_t *id, char *err,
                     size_t errlen);
int ops_job_unschedule(ops_env *e, const char *slug, const char *app, const char *name,
                       char *err, size_t errlen);

/* ---- create (ops_create.c) ---------------------------------------------------------------- */

typedef struct ops_create_opts {
    const char *placement;       /* NULL: storage.default_placement */
    bool from_template;          /* clone storage.template's storage */
    bool no_seed;                /* leave storage.seed out */
    int final_state;             /* TENANT_ACTIVE, or TENANT_PROVISIONING */
} ops_create_opts;

/* What every tenant of one create gets, checked before anything is created: the
 * placement, the migration set, the seed, the template. */
typedef struct ops_plan ops_plan;
int ops_create_prepare(ops_env *e, const ops_create_opts *o, ops_plan **out, char *err,
                       size_t errlen);
void ops_plan_free(ops_plan *p);   /* NULL is fine */
const char *ops_plan_placement(const ops_plan *p);
const char *ops_plan_kind(const ops_plan *p);       /* "sqlite", "schema", "database" */
const char *ops_plan_latest(const ops_plan *p);     /* the set's latest version, or "" */
const char *ops_plan_template(const ops_plan *p);   /* storage.template's slug, or NULL */

typedef struct ops_created {
    int64_t id;
    char storage[4096];          /* its storage name */
    const char *kind;            /* its storage's kind */
    migrate_result mr;           /* its version (mr.to), files applied, warnings */
    bool seeded, cloned;
    bool replayed;               /* from_template in schema mode: migrations replayed */
    int64_t ms;
} ops_created;

/* Create one tenant and its storage, all or nothing (n->state, placement and storage are
 * set here). TN_OK with *out filled, or the code with err saying which step failed and
 * what was undone. */
int ops_create(ops_env *e, const ops_plan *p, registry_new *n, ops_created *out, char *err,
               size_t errlen);

enum ops_bstatus { OPS_B_PENDING, OPS_B_CREATED, OPS_B_FAILED, OPS_B_SKIPPED, OPS_B_NSTATUS };
const char *ops_bstatus_name(int status);   /* "pending", "created", "failed", "skipped" */

#define OPS_MAX_DOMAINS 64
typedef struct ops_bulk_item {
    int line;                    /* the caller's (a line number): named in duplicates */
    const char *slug, *name;
    const char *domains[OPS_MAX_DOMAINS];
    int nd;
    int status;                  /* pending; a caller may mark one failed before the run */
    int rc;                      /* a failure's TN_* code */
    int64_t id, ms;
    int applied, nwarnings;
    bool seeded;
    char version[OPS_VERSION_MAX];
    char *error, *warning;       /* owned: ops_bulk_item_clear */
} ops_bulk_item;

typedef struct ops_bulk_report {
    int count[OPS_B_NSTATUS];
    int jobs;
    const char *stopped;         /* why the run stopped early, NULL when it did not */
    double seconds;
    int flush_rc;                /* the final registry flush, as ops_migrate_report's */
    char flush_err[600];
} ops_bulk_report;

/* Create many tenants, each as ops_create does, on `jobs` forked workers (e->reg is closed
 * first and reopened for the flush). A slug given twice: the later items fail (TN_EXISTS).
 * Each item's status says what happened; progress by e->progress. TN_OK when the run took
 * place, else the error (the workers could not start, out of memory). */
int ops_create_bulk(ops_env *e, const ops_plan *p, const registry_new *tpl,
                    ops_bulk_item *v, int n, int jobs, ops_bulk_report *rep, char *err,
                    size_t errlen);
void ops_bulk_item_clear(ops_bulk_item *it);

/* ---- migrate (ops_migrate.c) -------------------------------------------------------------- */

#define OPS_JOBS_MAX 64        /* parallel workers at most */
#define OPS_MIGRATE_JOBS 4     /* workers when the caller gives none (ops_migrate.c says why) */

enum ops_mstatus {
    OPS_M_PENDING, OPS_M_RUNNING, OPS_M_MIGRATED, OPS_M_CURRENT, OPS_M_FAILED, OPS_M_SKIPPED,
    OPS_M_NSTATUS
};
/* "pending", "running", "migrated", "current", "failed", "skipped". */
const char *ops_mstatus_name(int status);

typedef struct ops_migrate_opts {
    bool all;                    /* every migratable tenant, or ... */
    const char *const *slugs;    /* ... these (duplicates taken once) */
    int nslugs;
    int jobs;                    /* workers, 1..OPS_JOBS_MAX; 0: OPS_MIGRATE_JOBS */
    int canary;                  /* first migrate this many alone; 0: none */
    bool stop_on_error;
} ops_migrate_opts;

typedef struct ops_migrated {
    char *slug;
    int status;                  /* enum ops_mstatus: never pending/running in a report */
    char from[OPS_VERSION_MAX], to[OPS_VERSION_MAX];
    int applied;
    int64_t ms;
    char *error;                 /* NULL when none */
    char *warning;               /* the first warning, NULL when none */
    int nwarnings;
} ops_migrated;

typedef struct ops_migrate_report {
    ops_migrated *v;
    int n;
    int count[OPS_M_NSTATUS];
    int left_out[TENANT_NSTATES];   /* --all: tenants not migrated because of their state */
    const char *stopped;         /* why the run stopped early, NULL when it did not */
    int jobs;                    /* workers used */
    int done;                    /* tenants that came back */
    double seconds;
    char latest[OPS_VERSION_MAX];   /* the latest version of the set, "" when none */
    int files;
    int flush_rc;                /* the final registry flush: TN_OK, or ... */
    char flush_err[600];         /* ... why it failed (the results are in the registry) */
} ops_migrate_report;

/* Migrate tenants' storage to the latest version of storage.migrations, in parallel (forked
 * workers; e->reg is closed first and reopened for the results). TN_OK when the run took
 * place: then *out says what happened to each tenant (failures included, each rolled back
 * on its own; a failing tenant never stops the others unless stop_on_error). Otherwise the
 * error (storage.migrations not set or bad, no such tenant, a tenant not migratable, the
 * workers could not start) with err set and *out NULL. Free with ops_migrate_report_free. */
int ops_migrate(ops_env *e, const ops_migrate_opts *o, ops_migrate_report **out, char *err,
                size_t errlen);
void ops_migrate_report_free(ops_migrate_report *r);

/* migrate status: for each version the registry has, its tenants and how many have an
 * error, by callback; latest gets the set's latest version. TN_OK or the error. */
typedef int (*ops_version_fn)(void *ctx, const char *version, int64_t tenants,
                              int64_t failing);
int ops_migrate_status(ops_env *e, char *latest, size_t latestlen, ops_version_fn fn,
                       void *ctx, char *err, size_t errlen);

/* ---- purge and check (ops_lifecycle.c) ---------------------------------------------------- */

/* A tenant purged (error NULL) or not (error says why; slug "" when the registry failed). */
typedef struct ops_purged {
    const char *slug, *placement, *storage;
    const char *where;           /* "file PATH", "schema NAME", or "no storage" */
    const char *error;
} ops_purged;
typedef void (*ops_purged_fn)(void *ctx, const ops_purged *p);

/* Remove deleted tenants for good, each in three steps (tombstone, storage, row): the ones
 * named (only once their grace period is over, unless `now`), then with `expired` every one
 * whose grace period is over. Each outcome goes to fn as it happens; *purged and *failed
 * count them. TN_OK, or the registry's error (the run stopped there; fn was told). */
int ops_purge(ops_env *e, const char *const *slugs, int nslugs, bool expired, bool now,
              ops_purged_fn fn, void *ctx, int *purged, int *failed);

/* A problem `check` found: kind (stuck, tombstone, nostorage, placement, unreachable,
 * missing, role, rolekey, memory, login, orphan), where, and what. */
typedef struct ops_problem {
    const char *kind, *slug, *placement, *storage, *detail;
} ops_problem;
typedef void (*ops_problem_fn)(void *ctx, const ops_problem *p);

typedef struct ops_checked {
    int64_t tenants;
    int places;                  /* storage locations listed */
    int repaired;                /* tenants whose role the repair mended */
    int problems;
} ops_checked;

/* Compare the registry with the storage (read-only unless repair: then drifted tenant roles
 * are mended first). keep_shared_login: a placement moving from the shared login to group
 * logins, its tenancyd not reloaded yet: the dsn's user stays a member of the tenant roles
 * of group placements, and that is not a problem (storage_target.keep_host_member). Each
 * problem goes to fn. TN_OK (problems or not), or the error. */
int ops_check(ops_env *e, bool repair, bool keep_shared_login, ops_problem_fn fn, void *ctx,
              ops_checked *out, char *err, size_t errlen);

/* ---- move, export, import (ops_move.c) ------------------------------------------------------ */

typedef struct ops_copy_table {
    const char *name;
    int64_t rows, ms;
} ops_copy_table;

#define OPS_COPY_NOTES 64
/* What a copy into a target did (move, import); its memory is freed by ops_copy_free. */
typedef struct ops_copy_report {
    ops_copy_table *tables;
    int ntables;
    int64_t rows, ms;
    bool migrations;             /* the tables were made by the app's migrations ... */
    const char *why_defs;        /* ... or why not ("copied from the source's definitions") */
    const char *notes[OPS_COPY_NOTES];   /* what the portable definitions leave out, ... */
    int nnotes;
    arena *a;
} ops_copy_report;
void ops_copy_free(ops_copy_report *r);

typedef struct ops_move_opts {
    const char *to;              /* the placement */
    int drain_s;                 /* seconds in state moving before the copy */
    bool drop_source, copy_definitions;
} ops_move_opts;

typedef struct ops_moved {
    char from_placement[64], from_storage[4200], from_where[4300];
    char to_storage[4200], to_where[4300];   /* where: "file PATH", "schema NAME", ... */
    const char *from_kind, *to_kind;
    int state;                   /* the tenant's state before and after */
    bool source_dropped;
    int drop_rc;                 /* drop_source failed (the move itself was made) ... */
    char drop_err[1024];         /* ... and why */
    ops_copy_report copy;
} ops_moved;

/* Move a tenant's storage to another placement: state moving, drain, the source locked,
 * copied, counts compared, then the registry switched in one transaction. TN_OK with *out
 * filled (ops_copy_free(&out->copy)); or the error, the target dropped and the state
 * restored, with err naming the step. */
int ops_move(ops_env *e, const char *slug, const ops_move_opts *o, ops_moved *out, char *err,
             size_t errlen);

typedef struct ops_exported {
    int tables;
    int64_t rows, ms;
    char version[OPS_VERSION_MAX + 32];
} ops_exported;

/* Write a tenant as a dump (tenancy/dump.h): to `file` (written beside it, then renamed
 * over it: a failed export leaves no file) or, when file is NULL, to `stream`. */
int ops_export(ops_env *e, const char *slug, const char *file, FILE *stream,
               ops_exported *out, char *err, size_t errlen);

typedef struct ops_import_opts {
    const char *slug;            /* NULL: the dump's */
    const char *placement;       /* NULL: storage.placement */
    bool no_domains;
} ops_import_opts;

typedef struct ops_imported {
    char slug[64], placement[64], storage[4200], version[OPS_VERSION_MAX + 32];
    const char *kind;
    ops_copy_report copy;
} ops_imported;

/* Create a tenant and its storage from the dump read from f (`label` names it in messages),
 * all or nothing. TN_OK with *out filled (ops_copy_free(&out->copy)), or the error. */
int ops_import(ops_env *e, FILE *f, const char *label, const ops_import_opts *o,
               ops_imported *out, char *err, size_t errlen);

/* ---- a command once per tenant (ops_run.c) ------------------------------------------------ */

#define OPS_RUN_TAIL 4096           /* output kept per tenant when the caller gives no size */
#define OPS_RUN_TAIL_MAX (1 << 20)
#define OPS_RUN_KILL_GRACE_MS 2000  /* from SIGTERM to SIGKILL of a command's process group */

enum ops_rstatus {
    OPS_R_OK,          /* exited 0 */
    OPS_R_FAILED,      /* exited non-zero, or a signal it did not get from the run */
    OPS_R_TIMEOUT,     /* its process group killed at the time limit */
    OPS_R_KILLED,      /* its process group killed at the second stop signal */
    OPS_R_ERROR,       /* never started: no storage here, a role password unreadable, fork */
    OPS_R_NSTATUS
};
/* "ok", "failed", "timeout", "killed", "error". */
const char *ops_rstatus_name(int status);

typedef struct ops_run_opts {
    const char *const *argv;     /* the command: one word is a shell command (/bin/sh -c); */
    int argc;                    /* more are a program and its arguments (no shell) */
    const char *const *slugs;    /* these tenants, in this order (any state but deleting; a
                                    slug given twice runs once), or ... */
    int nslugs;
    unsigned states;             /* ... every tenant in these states (1u << state; deleting
                                    refused), in slug order; 0: active only */
    const char *placement;       /* only tenants of this placement; NULL: any */
    int jobs;                    /* commands at once, 1..OPS_JOBS_MAX; 0: 1 */
    int64_t timeout_ms;          /* per tenant; 0: none */
    size_t tail;                 /* the end of each command's output kept (stdout and
                                    stderr together), at most OPS_RUN_TAIL_MAX */
    const char *resume;          /* a state file: tenants it records as done are skipped and
                                    each finished one is added; NULL: none */
} ops_run_opts;

/* One tenant's run, told as it ends (strings valid during the call only). */
typedef struct ops_ran {
    const char *slug, *placement;
    int64_t id;
    int state;
    int status;                  /* enum ops_rstatus */
    int exit_code;               /* -1 when it did not exit */
    int signal;                  /* what ended it, 0 when none */
    int64_t ms;
    const char *output;          /* the end of its output (starts on a UTF-8 character) */
    size_t output_len;
    int64_t output_bytes;        /* everything it wrote */
    const char *error;           /* why it did not start (OPS_R_ERROR) or why its status is
                                    not known; else NULL */
} ops_ran;
typedef void (*ops_ran_fn)(void *ctx, const ops_ran *r);

typedef struct ops_run_report {
    int count[OPS_R_NSTATUS];
    int ran;                     /* tenants told (every status) */
    int skipped_done;            /* --resume: done in an earlier run */
    int left_out;                /* gone, deleted or moved out of the selection before
                                    their turn */
    int not_run;                 /* stopped: tenants of the selection never started */
    int jobs;
    const char *stopped;         /* why the run stopped early, NULL when it did not */
    char stop_err[512];          /* ... its detail ("" when none) */
    double seconds;
} ops_run_report;

/* Run a command once per selected tenant, at most o->jobs at once, each in a process group
 * of its own with the tenant's context in its environment (TENANCY_SLUG, TENANCY_TENANT_ID,
 * TENANCY_TENANT_NAME, TENANCY_STATE, TENANCY_PLACEMENT, TENANCY_STORAGE,
 * TENANCY_STORAGE_KIND, TENANCY_SETTINGS, TENANCY_CONFIG and TENANCY_CONF; see ops_run.c),
 * stdin /dev/null, stdout and stderr captured. Tenants are read from e->reg a page at a time
 * and each again when its turn comes. Each tenant's end goes to fn (in the caller's
 * process); progress by e->progress. The first SIGINT/SIGTERM stops handing out tenants
 * (the running ones finish); a second one kills the running ones. TN_OK when the run took
 * place (failures and a stop are in *rep), or the error before anything ran (no such tenant
 * or placement, a tenant being deleted named, the resume file another command's or in use),
 * err saying which. */
int ops_run(ops_env *e, const ops_run_opts *o, ops_ran_fn fn, void *ctx, ops_run_report *rep,
            char *err, size_t errlen);

/* The pieces ops_run is made of, for its tests. */

/* The end of a stream: the last `cap` bytes written, and how many there were. */
typedef struct ops_tail {
    char *p;
    size_t cap, len, head;       /* len bytes kept, the oldest at p[head] */
    int64_t total;
} ops_tail;
int ops_tail_init(ops_tail *t, size_t cap);   /* TN_OK or TN_NOMEM; cap 0 keeps nothing */
void ops_tail_add(ops_tail *t, const char *s, size_t n);
/* What is kept, in order, into out (cap bytes at least); when bytes were dropped, from the
 * first whole UTF-8 character. Returns the length written. */
size_t ops_tail_copy(const ops_tail *t, char *out);
void ops_tail_free(ops_tail *t);

/* A resume file's text: the ids of the tenants it records as done ("ok"), sorted, unique,
 * in *ids (malloc'd; NULL when none). A line cut short at the end (a write the run did not
 * finish) is ignored. TN_OK; TN_INVALID when the text is not a resume file or, with key
 * (the command's, ops_run_key) not NULL, one of another command; TN_NOMEM. */
int ops_run_resume_parse(const char *text, size_t len, const char *key, int64_t **ids,
                         int *nids, char *err, size_t errlen);
/* The key a resume file is bound to: SHA-256 of the command's words. */
void ops_run_key(const char *const *argv, int argc, char out[65]);

/* A libpq conninfo (keyword='value' pairs, as db_uri_with writes them) with
 * `-c search_path=SCHEMA` and `-c role=ROLE` added to its options (each NULL: not added).
 * TN_OK, TN_INVALID (not a conninfo), TN_TOOBIG. */
int ops_run_pg_dsn(const char *conninfo, const char *schema, const char *role, char *out,
                   size_t outlen);

#endif

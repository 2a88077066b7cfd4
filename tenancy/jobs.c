/*
 * jobs.c — the job queue in the registry's database (see jobs.h for the model).
 *
 * Tables (registry.c, JOBS_SCHEMA): jobs; job_queues, one row per tenant that has had a job
 * (tenant_key 0: the central jobs) with the turn it was last served (served_at), the
 * earliest run_at of its queued jobs (next_run_at, NULL when none is queued) and how many of
 * its jobs run; job_schedules.
 *
 * The fair claim reads job_queues, never the jobs of tenants it does not serve: the queue
 * whose turn is oldest among those with a ready job (next_run_at <= now) and room under the
 * cap, through a partial index that holds only queues with queued jobs, in turn order; then
 * that tenant's best ready job through (tenant_id, state, priority DESC, id). So a claim
 * costs the same with 10 or 10,000 jobs queued. (The one walk it makes: past the tenant's
 * jobs that wait for a later run_at, a retry's backoff, and come before its first ready
 * one in priority order; a tenant has few such.) The job is marked running, and the queue
 * takes its next turn and the earliest run_at of what it still has queued (an index read).
 * A queue's turn is max(now, its last turn + 1): two claims in the same millisecond still
 * move a tenant behind the others, so the round robin holds at any claim rate.
 *
 * Every change that moves a job into or out of `queued` keeps next_run_at right in the same
 * transaction: lowered to the job's run_at when one is queued (enqueue, fail, recover, reap,
 * retry), read again from the index when one leaves (claim, cancel). `running` is counted
 * down when a job stops running and counted again from the index at each claim.
 *
 * Concurrency. PostgreSQL: the claim takes its queue row FOR UPDATE SKIP LOCKED, so claimers
 * on several hosts never wait on each other and never serve one tenant twice at once (a
 * claimer that finds every ready queue taken answers TN_NOTFOUND with next_ms <= now); the
 * job row is taken the same way. Locks are taken in one order, a job's row before its
 * queue's row, except by the claim, which never waits for a job row (SKIP LOCKED); the
 * schedules' pass takes several queues in tenant order; reap takes one job per
 * transaction. A unique key is held by a partial unique index; enqueue inserts with ON
 * CONFLICT DO NOTHING (a violation would abort a PostgreSQL transaction) and then reads the
 * holder. SQLite: every change is one BEGIN IMMEDIATE transaction (tn_db_begin).
 *
 * Must not: run a job, know the app API, bump the registry generation, or read the jobs
 * table without an index (every statement has its index: registry.c lists them; counts
 * read the index range of a tenant, or all of one index for every tenant).
 */
#include "core/first.h"
#include "tenancy/jobs.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/cron.h"
#include "core/log.h"
#include "core/rc.h"
#include "storage/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* How many queues one claim tries when the one it picked had no job it could take (its
 * next_run_at was stale, or PostgreSQL's SKIP LOCKED passed its jobs by). */
#define CLAIM_TRIES 4
/* Rows one prune statement deletes: a long delete would hold SQLite's write lock. */
#define PRUNE_BATCH 1000
/* Schedules read per page by jobs_schedule_list. */
#define SCHEDULE_PAGE 500
#define PROGRESS_MAX 200
#define APP_MAX 64
#define LEASE_MIN 8
#define LEASE_MAX 64
/* Where a stored spec that no longer parses is put off to, so it is not read again at once. */
#define BAD_SPEC_DELAY_MS (24 * 3600 * 1000LL)

static const char *const state_names[JOB_NSTATES] = {"queued", "running", "done", "dead",
                                                     "cancelled"};

const char *job_state_name(int state)
{
    return state >= 0 && state < JOB_NSTATES ? state_names[state] : "unknown";
}

int job_state_parse(const char *name)
{
    for (int i = 0; name != NULL && i < JOB_NSTATES; i++)
        if (strcmp(name, state_names[i]) == 0)
            return i;
    return -1;
}

bool job_name_valid(const char *name)
{
    if (name == NULL || !(name[0] >= 'a' && name[0] <= 'z'))
        return false;
    size_t n = 0;
    for (const char *s = name; *s; s++, n++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == ':' || c == '-'))
            return false;
    }
    return n <= JOB_NAME_MAX;
}

static bool lease_valid(const char *s)
{
    size_t n = 0;
    for (; s != NULL && s[n] != '\0'; n++) {
        char c = s[n];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    return s != NULL && n >= LEASE_MIN && n <= LEASE_MAX;
}

/* NULL or "": the root app; "*": every app; else a mount's name. */
static bool app_valid(const char *s)
{
    if (s == NULL || s[0] == '\0' || strcmp(s, JOB_APP_ALL) == 0)
        return true;
    size_t n = 0;
    for (; s[n] != '\0'; n++) {
        char c = s[n];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
    }
    return n <= APP_MAX;
}

static bool utf8_text(const char *s) { return utf8_valid_prefix(s, strlen(s)) == strlen(s); }

/* s cut to at most max bytes of valid UTF-8, into out (max + 1 bytes). */
static const char *cut_text(const char *s, size_t max, char *out)
{
    size_t n = strnlen(s, max);
    n = utf8_valid_prefix(s, n);
    memcpy(out, s, n);
    out[n] = '\0';
    return out;
}

/* ---- small pieces over the connection ------------------------------------------------------ */

typedef struct num {
    char s[24];
} num;

static void num_set(num *n, int64_t v) { snprintf(n->s, sizeof(n->s), "%lld", (long long)v); }

static bool is_pg(registry *r) { return strcmp(tn_db_backend(registry_db(r)), "postgres") == 0; }

static int64_t col_i64(tn_rows *rows, int c)
{
    const char *v = tn_rows_get(rows, c);
    return v != NULL ? atoll(v) : 0;
}

/* The storage error of the last statement, as this module's sentence. */
static int db_err(registry *r, int rc, char *err, size_t errlen)
{
    return tn_errf(err, errlen, rc, "jobs: %s", tn_db_error(registry_db(r)));
}

/* A statement inside in_tx (which resets the connection when the transaction fails). */
static int exec(registry *r, char *err, size_t errlen, const char *sql, int n,
                const char *const *p)
{
    int rc = tn_db_exec(registry_db(r), sql, n, p);
    return rc == TN_OK ? TN_OK : db_err(r, rc, err, errlen);
}

/* Returns rc, a failed call's code; after TN_IO the connection is reset first (rolled back,
 * reconnected when it broke), so that the next call finds it usable. */
static int reset_on_io(registry *r, int rc)
{
    if (rc == TN_IO)
        registry_reconnect(r);
    return rc;
}

/* One statement on its own, outside in_tx: TN_OK with *changes the rows it changed, or the
 * storage error with err set (read before the connection is reset). */
static int exec_alone(registry *r, int64_t *changes, char *err, size_t errlen, const char *sql,
                      int n, const char *const *p)
{
    tn_db *db = registry_db(r);
    int rc = tn_db_exec(db, sql, n, p);
    if (rc != TN_OK)
        return reset_on_io(r, db_err(r, rc, err, errlen));
    *changes = tn_db_changes(db);
    return TN_OK;
}

/* The first row's first n columns as integers (NULL: 0). TN_OK, TN_NOTFOUND (no row), or
 * the storage error with err set. */
static int query_ints(registry *r, int64_t *v, int n, char *err, size_t errlen, const char *sql,
                      int np, const char *const *p)
{
    tn_rows *rows = NULL;
    int rc = tn_db_query(registry_db(r), &rows, sql, np, p);
    if (rc != TN_OK)
        return db_err(r, rc, err, errlen);
    rc = tn_rows_next(rows);
    if (rc == TN_OK) {
        for (int i = 0; i < n; i++)
            v[i] = col_i64(rows, i);
    } else if (rc == TN_DONE) {
        rc = TN_NOTFOUND;
    } else {
        rc = db_err(r, rc, err, errlen);
    }
    tn_rows_free(rows);
    return rc;
}

/* The predicate "the row's tenant is key" on column `col` with parameter $param: tenant_id
 * = $n, or, for the central jobs (key 0), tenant_id IS NULL (which the same indexes read);
 * the parameter is used either way, as both backends want every parameter used. */
static const char *tenant_is(char *out, size_t n, const char *col, int param, int64_t key)
{
    if (key > 0)
        snprintf(out, n, "%s = $%d", col, param);
    else
        snprintf(out, n, "%s IS NULL AND CAST($%d AS BIGINT) = 0", col, param);
    return out;
}

/* Run fn in one transaction: committed on TN_OK, rolled back otherwise. A PostgreSQL
 * deadlock or serialization failure (TN_BUSY) is tried again once: nothing of the first
 * attempt remains. */
static int in_tx(registry *r, int (*fn)(registry *, void *, char *, size_t), void *arg,
                 char *err, size_t errlen)
{
    tn_db *db = registry_db(r);
    int rc = TN_BUSY;
    for (int attempt = 0; attempt < 2 && rc == TN_BUSY; attempt++) {
        if (attempt > 0 && !is_pg(r))
            break;
        rc = tn_db_begin(db);
        if (rc != TN_OK) {
            rc = db_err(r, rc, err, errlen);
            break;
        }
        rc = fn(r, arg, err, errlen);
        if (rc == TN_OK) {
            rc = tn_db_commit(db);
            if (rc != TN_OK)
                rc = tn_errf(err, errlen, rc, "jobs: commit failed: %s", tn_db_error(db));
        } else {
            tn_db_rollback(db);
        }
    }
    return reset_on_io(r, rc);
}

static int prepare(registry *r, char *err, size_t errlen)
{
    return registry_jobs_prepare(r, err, errlen);
}

/* ---- records ------------------------------------------------------------------------------ */

#define JOB_COLS                                                                              \
    "j.id, j.tenant_id, t.slug, j.app, j.name, j.payload, j.unique_key, j.last_error, j.lease, " \
    "j.progress, j.state, j.priority, j.attempts, j.max_attempts, j.timeout_ms, j.schedule_id, " \
    "j.run_at, j.created_at, j.started_at, j.finished_at, j.lease_until"
#define JOB_FROM " FROM jobs j LEFT JOIN tenants t ON t.id = j.tenant_id"
#define JOB_NSTR 8   /* slug .. progress: columns 2..9 */

/* Columns first..first+n-1 of the row as NUL-ended texts appended to text (NULL as ""), their
 * offsets into off[]: a record's strings, pointed at once the buffer stops moving. */
static void texts_read(tn_rows *rows, int first, int n, size_t *off, buf *text)
{
    for (int i = 0; i < n; i++) {
        const char *v = tn_rows_get(rows, first + i);
        off[i] = text->len;
        buf_puts(text, v != NULL ? v : "");
        buf_putc(text, '\0');
    }
}

/* Point each of n string fields at its offset into text. */
static void texts_fix(const char **const *f, int n, const size_t *off, const buf *text)
{
    for (int i = 0; i < n; i++)
        *f[i] = text->p + off[i];
}

/* A job read, its strings as offsets into a buffer until job_fix points them there (the
 * buffer may move while it grows). */
typedef struct job_row {
    job_rec j;
    size_t off[JOB_NSTR];
} job_row;

static void job_read(tn_rows *rows, job_row *jr, buf *text)
{
    memset(jr, 0, sizeof(*jr));
    texts_read(rows, 2, JOB_NSTR, jr->off, text);
    job_rec *j = &jr->j;
    j->id = col_i64(rows, 0);
    j->tenant_id = col_i64(rows, 1);
    int st = job_state_parse(tn_rows_get(rows, 10));
    j->state = st >= 0 ? st : JOB_DEAD;
    j->priority = (int)col_i64(rows, 11);
    j->attempts = (int)col_i64(rows, 12);
    j->max_attempts = (int)col_i64(rows, 13);
    j->timeout_ms = (int)col_i64(rows, 14);
    j->schedule_id = col_i64(rows, 15);
    j->run_at = col_i64(rows, 16);
    j->created_at = col_i64(rows, 17);
    j->started_at = col_i64(rows, 18);
    j->finished_at = col_i64(rows, 19);
    j->lease_until = col_i64(rows, 20);
}

static void job_fix(job_row *jr, const buf *text)
{
    const char **f[JOB_NSTR] = {&jr->j.slug,       &jr->j.app,        &jr->j.name,
                                &jr->j.payload,    &jr->j.unique_key, &jr->j.last_error,
                                &jr->j.lease,      &jr->j.progress};
    texts_fix((const char **const *)f, JOB_NSTR, jr->off, text);
}

/* One job by id into *out, its strings in the registry's buffer. TN_OK, TN_NOTFOUND, or the
 * storage error with err set. */
static int job_load(registry *r, int64_t id, job_rec *out, char *err, size_t errlen)
{
    num ids;
    num_set(&ids, id);
    const char *p[] = {ids.s};
    tn_rows *rows = NULL;
    int rc = tn_db_query(registry_db(r), &rows, "SELECT " JOB_COLS JOB_FROM " WHERE j.id = $1",
                         1, p);
    if (rc != TN_OK)
        return db_err(r, rc, err, errlen);
    buf *text = registry_jobs_text(r);
    buf_reset(text);
    job_row jr;
    rc = tn_rows_next(rows);
    if (rc == TN_OK) {
        job_read(rows, &jr, text);
        if (text->oom) {
            rc = tn_errf(err, errlen, TN_NOMEM, "jobs: out of memory");
        } else {
            job_fix(&jr, text);
            *out = jr.j;
        }
    } else if (rc == TN_DONE) {
        rc = tn_errf(err, errlen, TN_NOTFOUND, "no job %lld", (long long)id);
    } else {
        rc = db_err(r, rc, err, errlen);
    }
    tn_rows_free(rows);
    return rc;
}

/* ---- the queues --------------------------------------------------------------------------- */

/* A job of tenant `key` is queued to run at `at`: the queue exists and its next_run_at is at
 * most `at`. */
static int queue_ready(registry *r, int64_t key, int64_t at, char *err, size_t errlen)
{
    num k, a;
    num_set(&k, key);
    num_set(&a, at);
    const char *p[] = {k.s, key > 0 ? k.s : NULL, a.s};
    return exec(r, err, errlen,
                "INSERT INTO job_queues (tenant_key, tenant_id, next_run_at) VALUES ($1, $2, $3) "
                "ON CONFLICT (tenant_key) DO UPDATE SET next_run_at = CASE WHEN "
                "job_queues.next_run_at IS NULL OR job_queues.next_run_at > excluded.next_run_at "
                "THEN excluded.next_run_at ELSE job_queues.next_run_at END",
                3, p);
}

/* A job of tenant `key` stopped running. */
static int queue_stopped(registry *r, int64_t key, char *err, size_t errlen)
{
    num k;
    num_set(&k, key);
    const char *p[] = {k.s};
    return exec(r, err, errlen,
                "UPDATE job_queues SET running = running - 1 WHERE tenant_key = $1 AND running > 0",
                1, p);
}

/* The earliest run_at of the tenant's queued jobs as an SQL subquery, the tenant as $1. */
static const char *next_run_sql(char *out, size_t n, int64_t key)
{
    char tp[96];
    snprintf(out, n, "(SELECT j.run_at FROM jobs j WHERE %s AND j.state = 'queued' "
             "ORDER BY j.run_at LIMIT 1)", tenant_is(tp, sizeof(tp), "j.tenant_id", 1, key));
    return out;
}

/* A queued job of tenant `key` left the queue (cancel): next_run_at read again. */
static int queue_recount(registry *r, int64_t key, char *err, size_t errlen)
{
    char next[256], sql[512];
    snprintf(sql, sizeof(sql), "UPDATE job_queues SET next_run_at = %s WHERE tenant_key = $1",
             next_run_sql(next, sizeof(next), key));
    num k;
    num_set(&k, key);
    const char *p[] = {k.s};
    return exec(r, err, errlen, sql, 1, p);
}

/* The queue of tenant `key` was served at `now` (claimed > 0: a job was claimed): its next
 * turn, its running jobs counted and its next_run_at read again. */
static int queue_served(registry *r, int64_t key, int64_t now, bool claimed, char *err,
                        size_t errlen)
{
    char next[256], tp[96], sql[1024];
    snprintf(sql, sizeof(sql),
             "UPDATE job_queues SET served_at = CASE WHEN served_at + 1 > CAST($2 AS BIGINT) "
             "THEN served_at + 1 ELSE CAST($2 AS BIGINT) END, next_run_at = %s%s%s%s "
             "WHERE tenant_key = $1",
             next_run_sql(next, sizeof(next), key),
             claimed ? ", running = (SELECT count(*) FROM jobs r WHERE " : "",
             claimed ? tenant_is(tp, sizeof(tp), "r.tenant_id", 1, key) : "",
             claimed ? " AND r.state = 'running')" : "");
    num k, n;
    num_set(&k, key);
    num_set(&n, now);
    const char *p[] = {k.s, n.s};
    return exec(r, err, errlen, sql, 2, p);
}

/* ---- enqueue ------------------------------------------------------------------------------ */

static int job_check(const job_new *j, char *err, size_t errlen)
{
    if (j->tenant_id < 0)
        return tn_errf(err, errlen, TN_INVALID, "a job's tenant is an id, or 0 for a central job");
    if (!job_name_valid(j->name))
        return tn_errf(err, errlen, TN_INVALID, "invalid job name '%.80s': 1 to %d of a-z, 0-9, "
                       "'_', '.', ':' and '-', starting with a letter",
                       j->name ? j->name : "", JOB_NAME_MAX);
    if (!app_valid(j->app))
        return tn_errf(err, errlen, TN_INVALID, "invalid app '%.80s' for a job: a mount's name, "
                       "\"\" for the root app or \"*\"", j->app);
    if (j->payload != NULL && strlen(j->payload) > JOB_PAYLOAD_MAX)
        return tn_errf(err, errlen, TN_INVALID, "a job's payload is at most %d bytes",
                       JOB_PAYLOAD_MAX);
    if (j->payload != NULL && !utf8_text(j->payload))
        return tn_errf(err, errlen, TN_INVALID, "a job's payload must be UTF-8 text");
    if (j->priority < JOB_PRIORITY_MIN || j->priority > JOB_PRIORITY_MAX)
        return tn_errf(err, errlen, TN_INVALID, "a job's priority is %d to %d, not %d",
                       JOB_PRIORITY_MIN, JOB_PRIORITY_MAX, j->priority);
    if (j->unique_key != NULL && (strlen(j->unique_key) > JOB_KEY_MAX || !utf8_text(j->unique_key)))
        return tn_errf(err, errlen, TN_INVALID, "a job's unique key is at most %d bytes of UTF-8",
                       JOB_KEY_MAX);
    if (j->max_attempts < 1)
        return tn_errf(err, errlen, TN_INVALID, "a job needs max_attempts >= 1");
    if (j->timeout_ms < 1)
        return tn_errf(err, errlen, TN_INVALID, "a job needs timeout_ms >= 1");
    if (j->run_at_ms < 0)
        return tn_errf(err, errlen, TN_INVALID, "a job's run_at is a time in ms, or 0 for now");
    return TN_OK;
}

/* The tenant may have jobs queued for it: it exists and, unless the job is a hook, is not
 * being deleted. */
static int tenant_accepts(registry *r, int64_t tenant_id, const char *name, char *err,
                          size_t errlen)
{
    if (tenant_id == 0)
        return TN_OK;
    num t;
    num_set(&t, tenant_id);
    const char *p[] = {t.s};
    char state[32];
    int rc = db_query_value(registry_db(r), state, sizeof(state),
                            "SELECT state FROM tenants WHERE id = $1", 1, p);
    if (rc == TN_NOTFOUND)
        return tn_errf(err, errlen, TN_NOTFOUND, "no tenant with id %lld", (long long)tenant_id);
    if (rc != TN_OK)
        return db_err(r, rc, err, errlen);
    if (tenant_state_parse(state) == TENANT_DELETING && strncmp(name, "tenancy.", 8) != 0)
        return tn_errf(err, errlen, TN_NOTFOUND, "tenant %lld is being deleted",
                       (long long)tenant_id);
    return TN_OK;
}

/* The job of tenant `key` that holds unique key `ukey`: TN_OK with *id, TN_NOTFOUND. Read
 * from the partial unique index: SQLite uses an index on an expression only against a value
 * without affinity, hence "+ 0" after the cast (a CAST has one; the sum has none). */
static int key_holder(registry *r, int64_t key, const char *ukey, int64_t *id, char *err,
                      size_t errlen)
{
    num k;
    num_set(&k, key);
    const char *p[] = {k.s, ukey};
    return query_ints(r, id, 1, err, errlen,
                      "SELECT id FROM jobs WHERE COALESCE(tenant_id, 0) = CAST($1 AS BIGINT) + 0 "
                      "AND unique_key = $2 AND state IN ('queued', 'running')",
                      2, p);
}

/* The job's row (p: enqueue_tx's eleven parameters): TN_OK with *id, TN_NOTFOUND when its
 * unique key is held (nothing added). SQLite answers RETURNING from a table it fills during
 * the statement, a cost per insert that reading the connection's last rowid does not have
 * (bench/README.md, `migrate`: a migration queues a hook per tenant), so there the id is
 * that rowid, read when the insert added a row; PostgreSQL has no such rowid and returns it. */
#define INSERT_JOB_SQL                                                                      \
    "INSERT INTO jobs (tenant_id, app, name, payload, priority, unique_key, max_attempts, " \
    "timeout_ms, schedule_id, run_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, "  \
    "$9, $10, $11) ON CONFLICT ((COALESCE(tenant_id, 0)), unique_key) WHERE unique_key IS "  \
    "NOT NULL AND state IN ('queued', 'running') DO NOTHING"
static int insert_job(registry *r, const char *const *p, int64_t *id, char *err, size_t errlen)
{
    if (is_pg(r))
        return query_ints(r, id, 1, err, errlen, INSERT_JOB_SQL " RETURNING id", 11, p);
    tn_db *db = registry_db(r);
    int rc = exec(r, err, errlen, INSERT_JOB_SQL, 11, p);
    if (rc != TN_OK)
        return rc;
    if (tn_db_changes(db) != 1)
        return TN_NOTFOUND;
    *id = tn_db_last_id(db);
    return TN_OK;
}

/* Enqueue inside the caller's transaction (jobs_enqueue, jobs_schedules_due). */
static int enqueue_tx(registry *r, const job_new *j, int64_t now, int64_t schedule_id,
                      int64_t *id, char *err, size_t errlen)
{
    int rc = tenant_accepts(r, j->tenant_id, j->name, err, errlen);
    if (rc != TN_OK)
        return rc;
    const char *ukey = j->unique_key != NULL && j->unique_key[0] != '\0' ? j->unique_key : NULL;
    int64_t run_at = j->run_at_ms > 0 ? j->run_at_ms : now;
    num tid, prio, maxa, tmo, sid, run, cre;
    num_set(&tid, j->tenant_id);
    num_set(&prio, j->priority);
    num_set(&maxa, j->max_attempts);
    num_set(&tmo, j->timeout_ms);
    num_set(&sid, schedule_id);
    num_set(&run, run_at);
    num_set(&cre, now);
    const char *p[] = {j->tenant_id > 0 ? tid.s : NULL,
                       j->app != NULL ? j->app : "",
                       j->name,
                       j->payload != NULL ? j->payload : "",
                       prio.s,
                       ukey,
                       maxa.s,
                       tmo.s,
                       schedule_id > 0 ? sid.s : NULL,
                       run.s,
                       cre.s};
    /* A holder can finish between the insert that met it and the read that looks for it
     * (PostgreSQL: another transaction): then the insert is tried again. */
    for (int attempt = 0; attempt < 3; attempt++) {
        rc = insert_job(r, p, id, err, errlen);
        if (rc == TN_OK)
            return queue_ready(r, j->tenant_id, run_at, err, errlen);
        if (rc != TN_NOTFOUND || ukey == NULL)
            return rc == TN_NOTFOUND ? tn_errf(err, errlen, TN_ERR, "jobs: the insert returned "
                                               "no id") : rc;
        rc = key_holder(r, j->tenant_id, ukey, id, err, errlen);
        if (rc == TN_OK)
            return tn_errf(err, errlen, TN_EXISTS, "job %lld holds the unique key '%.80s'",
                           (long long)*id, ukey);
        if (rc != TN_NOTFOUND)
            return rc;
    }
    return tn_errf(err, errlen, TN_BUSY, "jobs: the unique key '%.80s' changed hands during "
                   "the enqueue", ukey);
}

struct enqueue_arg {
    const job_new *j;
    int64_t now, *id;
};

static int do_enqueue(registry *r, void *arg, char *err, size_t errlen)
{
    struct enqueue_arg *a = arg;
    return enqueue_tx(r, a->j, a->now, 0, a->id, err, errlen);
}

int jobs_enqueue(registry *r, const job_new *j, int64_t now_ms, int64_t *id, char *err,
                 size_t errlen)
{
    int64_t dummy = 0;
    if (id == NULL)
        id = &dummy;
    *id = 0;
    int rc = job_check(j, err, errlen);
    if (rc != TN_OK || (rc = prepare(r, err, errlen)) != TN_OK)
        return rc;
    /* TN_EXISTS rolls back (nothing was added) and keeps *id, the holder's. */
    struct enqueue_arg a = {j, now_ms, id};
    return in_tx(r, do_enqueue, &a, err, errlen);
}

/* Many jobs in one transaction. A job's own refusal (TN_EXISTS: its key is held; TN_NOTFOUND:
 * no such tenant) is found by reads that leave the transaction usable, so it is kept in its
 * slot and the others go on; any other error ends the call and rolls back the lot. */
struct many_arg {
    const job_new *j;
    int n;
    int64_t now;
    int *rcs;
};

static int do_enqueue_many(registry *r, void *arg, char *err, size_t errlen)
{
    struct many_arg *a = arg;
    for (int i = 0; i < a->n; i++) {
        if (a->rcs[i] != TN_OK)
            continue;   /* refused by job_check */
        int64_t id = 0;
        char why[256];
        int rc = enqueue_tx(r, &a->j[i], a->now, 0, &id, why, sizeof(why));
        if (rc == TN_EXISTS || rc == TN_NOTFOUND)
            a->rcs[i] = rc;
        else if (rc != TN_OK)
            return tn_errf(err, errlen, rc, "%s", why);
    }
    return TN_OK;
}

int jobs_enqueue_many(registry *r, const job_new *j, int n, int64_t now_ms, int *rcs, char *err,
                      size_t errlen)
{
    int ok = 0;
    for (int i = 0; i < n; i++) {
        char why[256];
        rcs[i] = job_check(&j[i], why, sizeof(why));
        ok += rcs[i] == TN_OK;
    }
    if (ok == 0)
        return TN_OK;
    int rc = prepare(r, err, errlen);
    if (rc != TN_OK)
        return rc;
    struct many_arg a = {j, n, now_ms, rcs};
    return in_tx(r, do_enqueue_many, &a, err, errlen);
}

/* ---- which hosts take hooks --------------------------------------------------------------- */

#define HOST_KEEP_MS (24ll * 3600 * 1000)   /* a row unsaid this long is deleted */

int jobs_host_say(registry *r, const char *host, const char *worker, bool hooks, int64_t now_ms,
                  char *err, size_t errlen)
{
    int rc = prepare(r, err, errlen);
    if (rc != TN_OK)
        return rc;
    num now, old;
    num_set(&now, now_ms);
    num_set(&old, now_ms - HOST_KEEP_MS);
    const char *p[] = {host, worker, hooks ? "1" : "0", now.s};
    int64_t changed = 0;
    rc = exec_alone(r, &changed, err, errlen,
                    "INSERT INTO job_hosts (host, worker, hooks, seen_at) VALUES ($1, $2, $3, $4) "
                    "ON CONFLICT (host) DO UPDATE SET worker = excluded.worker, hooks = "
                    "excluded.hooks, seen_at = excluded.seen_at",
                    4, p);
    const char *po[] = {old.s};
    if (rc == TN_OK)
        rc = exec_alone(r, &changed, err, errlen, "DELETE FROM job_hosts WHERE seen_at < $1", 1,
                        po);
    return rc;
}

int jobs_host_gone(registry *r, const char *host, const char *worker, char *err, size_t errlen)
{
    int rc = prepare(r, err, errlen);
    if (rc != TN_OK)
        return rc;
    const char *p[] = {host, worker};
    int64_t changed = 0;
    return exec_alone(r, &changed, err, errlen,
                      "DELETE FROM job_hosts WHERE host = $1 AND worker = $2", 2, p);
}

int jobs_hooks_wanted(registry *r, int64_t now_ms, bool *wanted, char *err, size_t errlen)
{
    *wanted = true;
    int rc = prepare(r, err, errlen);
    if (rc != TN_OK)
        return rc;
    num since;
    num_set(&since, now_ms - JOBS_HOST_STALE_MS);
    const char *p[] = {since.s};
    int64_t v[2] = {0, 0};
    rc = query_ints(r, v, 2, err, errlen,
                    "SELECT count(*), COALESCE(max(hooks), 0) FROM job_hosts WHERE seen_at >= $1",
                    1, p);
    if (rc != TN_OK)
        return reset_on_io(r, rc);
    *wanted = v[0] == 0 || v[1] != 0;
    return TN_OK;
}

/* ---- claim -------------------------------------------------------------------------------- */

struct claim_arg {
    const char *lease;
    int cap, grace_ms;
    int64_t now, id;
    job_rec *out;
};

static int do_claim(registry *r, void *arg, char *err, size_t errlen)
{
    struct claim_arg *a = arg;
    bool pg = is_pg(r);
    num now, cap, grace;
    num_set(&now, a->now);
    num_set(&cap, a->cap);
    num_set(&grace, a->grace_ms);
    a->id = 0;
    for (int tries = 0; tries < CLAIM_TRIES; tries++) {
        /* the tenant whose turn is oldest, with a ready job and room under the cap */
        char sql[1024];
        snprintf(sql, sizeof(sql),
                 "SELECT tenant_key FROM job_queues WHERE next_run_at <= $1 AND "
                 "(CAST($2 AS BIGINT) <= 0 OR running < CAST($2 AS BIGINT)) "
                 "ORDER BY served_at, tenant_key LIMIT 1%s",
                 pg ? " FOR UPDATE SKIP LOCKED" : "");
        const char *pq[] = {now.s, cap.s};
        int64_t key = 0;
        int rc = query_ints(r, &key, 1, err, errlen, sql, 2, pq);
        if (rc == TN_NOTFOUND)
            return TN_OK;
        if (rc != TN_OK)
            return rc;
        /* its best ready job: higher priority first, then the oldest, read in that order
         * from jobs_claim. "+run_at" keeps SQLite's planner from the index on run_at
         * (jobs_next), which it would prefer for the range and then sort every ready job
         * of the tenant; the unary plus is plain arithmetic to PostgreSQL. An expression
         * has no column affinity in SQLite, so the parameter (bound as text) is cast. */
        char tp[96];
        snprintf(sql, sizeof(sql),
                 "SELECT id FROM jobs WHERE %s AND state = 'queued' AND "
                 "+run_at <= CAST($2 AS BIGINT) "
                 "ORDER BY priority DESC, id LIMIT 1%s",
                 tenant_is(tp, sizeof(tp), "tenant_id", 1, key),
                 pg ? " FOR UPDATE SKIP LOCKED" : "");
        num k;
        num_set(&k, key);
        const char *pj[] = {k.s, now.s};
        int64_t id = 0;
        rc = query_ints(r, &id, 1, err, errlen, sql, 2, pj);
        if (rc == TN_NOTFOUND) {
            /* nothing to take after all: the queue's next_run_at is read again and its turn
             * passes, so the next try looks at another tenant */
            if ((rc = queue_served(r, key, a->now, false, err, errlen)) != TN_OK)
                return rc;
            continue;
        }
        if (rc != TN_OK)
            return rc;
        num ids;
        num_set(&ids, id);
        const char *pu[] = {ids.s, now.s, a->lease, grace.s};
        rc = exec(r, err, errlen,
                  "UPDATE jobs SET state = 'running', attempts = attempts + 1, started_at = $2, "
                  "lease = $3, lease_until = CAST($2 AS BIGINT) + timeout_ms + CAST($4 AS BIGINT), "
                  "progress = '', finished_at = NULL WHERE id = $1",
                  4, pu);
        if (rc == TN_OK)
            rc = queue_served(r, key, a->now, true, err, errlen);
        /* read in the same transaction: what the caller gets is what it claimed */
        if (rc == TN_OK)
            rc = job_load(r, id, a->out, err, errlen);
        if (rc == TN_OK)
            a->id = id;
        return rc;
    }
    return TN_OK;
}

/* An attempt's end (do_finish, do_fail and the rest below). */
struct end_arg {
    int64_t id;
    const char *lease, *error;
    int64_t now, max_backoff;
    bool dead;
};

static int do_finish(registry *r, void *arg, char *err, size_t errlen);

struct finish_claim_arg {
    job_done *done;   /* NULL: a claim alone */
    int done_rc;
    struct claim_arg claim;
};

/* The finish first, so that the claim sees the tenant's running count and hooks after it. */
static int do_finish_claim(registry *r, void *arg, char *err, size_t errlen)
{
    struct finish_claim_arg *a = arg;
    a->done_rc = TN_OK;   /* again on each attempt of in_tx */
    if (a->done != NULL) {
        struct end_arg e = {.id = a->done->id, .lease = a->claim.lease, .now = a->done->at_ms};
        char why[256];
        int rc = do_finish(r, &e, why, sizeof(why));
        if (rc != TN_OK && rc != TN_NOTFOUND)
            return tn_errf(err, errlen, rc, "%s", why);
        a->done_rc = rc;
    }
    return do_claim(r, &a->claim, err, errlen);
}

int jobs_finish_claim(registry *r, job_done *done, const char *lease, int per_tenant_cap,
                      int grace_ms, int64_t now_ms, job_rec *out, int64_t *next_ms, char *err,
                      size_t errlen)
{
    if (next_ms != NULL)
        *next_ms = 0;
    if (!lease_valid(lease))
        return tn_errf(err, errlen, TN_INVALID, "a lease is %d to %d of A-Z, a-z, 0-9, '_' and '-'",
                       LEASE_MIN, LEASE_MAX);
    int rc = prepare(r, err, errlen);
    if (rc != TN_OK)
        return rc;
    struct finish_claim_arg a = {done != NULL && done->id > 0 ? done : NULL, TN_OK,
                                 {lease, per_tenant_cap, grace_ms < 0 ? 0 : grace_ms, now_ms, 0,
                                  out}};
    rc = in_tx(r, do_finish_claim, &a, err, errlen);
    if (rc != TN_OK)
        return rc;
    if (a.done != NULL) {
        a.done->rc = a.done_rc;
        a.done->recorded = true;
    }
    if (a.claim.id > 0)
        return TN_OK;
    if (next_ms != NULL) {
        int64_t v = 0;
        rc = query_ints(r, &v, 1, err, errlen, "SELECT MIN(next_run_at) FROM job_queues", 0, NULL);
        if (rc != TN_OK && rc != TN_NOTFOUND)
            return rc;
        *next_ms = v;
    }
    return tn_errf(err, errlen, TN_NOTFOUND, "no job is ready");
}

int jobs_claim(registry *r, const char *lease, int per_tenant_cap, int grace_ms, int64_t now_ms,
               job_rec *out, int64_t *next_ms, char *err, size_t errlen)
{
    return jobs_finish_claim(r, NULL, lease, per_tenant_cap, grace_ms, now_ms, out, next_ms, err,
                             errlen);
}

/* ---- the end of an attempt ---------------------------------------------------------------- */

static uint32_t random_u32(void)
{
    uint32_t v;
    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v))
        return v;
    return (uint32_t)clock_mono_ns() * 2654435761u;
}

/* 1 s, 2 s, 4 s ... after attempt 1, 2, 3 ..., capped at max_ms (<= 0: no cap), plus up to
 * 10 % so that jobs that failed together do not come back together. */
static int64_t backoff_ms(int attempts, int64_t max_ms)
{
    int e = attempts < 1 ? 0 : attempts - 1;
    int64_t b = (int64_t)1000 << (e > 40 ? 40 : e);
    if (max_ms > 0 && b > max_ms)
        b = max_ms;
    return b + (int64_t)(random_u32() % (uint64_t)(b / 10 + 1));
}

/* The running job `id` of tenant `key` ends its attempt with `error`: dead, or queued again
 * at run_at. Inside the caller's transaction, with the job's row read (and, on PostgreSQL,
 * locked) by the caller. */
static int end_attempt(registry *r, int64_t id, int64_t key, bool dead, int64_t run_at,
                       int64_t now, const char *error, char *err, size_t errlen)
{
    char cut[JOB_ERROR_MAX + 1];
    num ids, at, n;
    num_set(&ids, id);
    num_set(&at, run_at);
    num_set(&n, now);
    const char *p[] = {ids.s, dead ? n.s : at.s, cut_text(error ? error : "", JOB_ERROR_MAX, cut)};
    int rc = exec(r, err, errlen,
                  dead ? "UPDATE jobs SET state = 'dead', finished_at = $2, last_error = $3, "
                         "lease = NULL, lease_until = NULL WHERE id = $1"
                       : "UPDATE jobs SET state = 'queued', run_at = $2, last_error = $3, "
                         "lease = NULL, lease_until = NULL WHERE id = $1",
                  3, p);
    if (rc == TN_OK)
        rc = queue_stopped(r, key, err, errlen);
    if (rc == TN_OK && !dead)
        rc = queue_ready(r, key, run_at, err, errlen);
    return rc;
}

/* The running job `id` under `lease`: its attempts, max_attempts and tenant key, locked on
 * PostgreSQL. TN_NOTFOUND with a sentence when it is not running under that lease. */
static int running_job(registry *r, int64_t id, const char *lease, int64_t v[3], char *err,
                       size_t errlen)
{
    num ids;
    num_set(&ids, id);
    const char *p[] = {ids.s, lease};
    int rc = query_ints(r, v, 3, err, errlen,
                        is_pg(r) ? "SELECT attempts, max_attempts, COALESCE(tenant_id, 0) FROM "
                                   "jobs WHERE id = $1 AND state = 'running' AND lease = $2 "
                                   "FOR UPDATE"
                                 : "SELECT attempts, max_attempts, COALESCE(tenant_id, 0) FROM "
                                   "jobs WHERE id = $1 AND state = 'running' AND lease = $2",
                        2, p);
    if (rc == TN_NOTFOUND)
        rc = tn_errf(err, errlen, TN_NOTFOUND, "job %lld is not running under lease %s",
                     (long long)id, lease);
    return rc;
}

static int do_finish(registry *r, void *arg, char *err, size_t errlen)
{
    struct end_arg *a = arg;
    num ids, now;
    num_set(&ids, a->id);
    num_set(&now, a->now);
    const char *p[] = {ids.s, a->lease, now.s};
    int64_t key = 0;
    int rc = query_ints(r, &key, 1, err, errlen,
                        "UPDATE jobs SET state = 'done', finished_at = $3, lease = NULL, "
                        "lease_until = NULL WHERE id = $1 AND state = 'running' AND lease = $2 "
                        "RETURNING COALESCE(tenant_id, 0)",
                        3, p);
    if (rc == TN_NOTFOUND)
        return tn_errf(err, errlen, TN_NOTFOUND, "job %lld is not running under lease %s",
                       (long long)a->id, a->lease);
    if (rc != TN_OK)
        return rc;
    return queue_stopped(r, key, err, errlen);
}

int jobs_finish(registry *r, int64_t id, const char *lease, int64_t now_ms, char *err,
                size_t errlen)
{
    if (!lease_valid(lease))
        return tn_errf(err, errlen, TN_NOTFOUND, "job %lld is not running under that lease",
                       (long long)id);
    int rc = prepare(r, err, errlen);
    if (rc != TN_OK)
        return rc;
    struct end_arg a = {.id = id, .lease = lease, .now = now_ms};
    return in_tx(r, do_finish, &a, err, errlen);
}

static int do_fail(registry *r, void *arg, char *err, size_t errlen)
{
    struct end_arg *a = arg;
    int64_t v[3];
    int rc = running_job(r, a->id, a->lease, v, err, errlen);
    if (rc != TN_OK)
        return rc;
    a->dead = v[0] >= v[1];
    int64_t at = a->dead ? 0 : a->now + backoff_ms((int)v[0], a->max_backoff);
    return end_attempt(r, a->id, v[2], a->dead, at, a->now, a->error, err, errlen);
}

int jobs_fail(registry *r, int64_t id, const char *lease, const char *error, int64_t now_ms,
              int64_t max_backoff_ms, bool *dead, char *err, size_t errlen)
{
    if (dead != NULL)
        *dead = false;
    if (!lease_valid(lease))
        return tn_errf(err, errlen, TN_NOTFOUND, "job %lld is not running under that lease",
                       (long long)id);
    int rc = prepare(r, err, errlen);
    if (rc != TN_OK)
        return rc;
    struct end_arg a = {.id = id, .lease = lease, .error = error, .now = now_ms,
                        .max_backoff = max_backoff_ms};
    rc = in_tx(r, do_fail, &a, err, errlen);
    if (rc == TN_OK && dead != NULL)
        *dead = a.dead;
    return rc;
}

/* Deferral: the attempt never started (its tenant is not active), so it is not counted. */
static int do_release(registry *r, void *arg, char *err, size_t errlen)
{
    struct end_arg *a = arg;
    int64_t v[3];
    int rc = running_job(r, a->id, a->lease, v, err, errlen);
    if (rc != TN_OK)
        return rc;
    num ids;
    num_set(&ids, a->id);
    const char *p[] = {ids.s};
    rc = exec(r, err, errlen, "UPDATE jobs SET attempts = attempts - 1 WHERE id = $1", 1, p);
    if (rc == TN_OK)
        rc = end_attempt(r, a->id, v[2], false, a->max_backoff, a->now, a->error, err, errlen);
    return rc;
}

int jobs_release(registry *r, int64_t id, const char *lease, const char *why, int64_t run_at_ms,
                 int64_t now_ms, char *err, size_t errlen)
{
    if (!lease_valid(lease))
        return tn_errf(err, errlen, TN_NOTFOUND, "job %lld is not running under that lease",
                       (long long)id);
    int rc = prepare(r, err, errlen);
    if (rc != TN_OK)
        return rc;
    /* max_backoff carries run_at here: end_attempt's "queued again at" */
    struct end_arg a = {.id = id, .lease = lease, .error = why, .now = now_ms,
                        .max_backoff = run_at_ms};
    return in_tx(r, do_release, &a, err, errlen);
}

int jobs_hook_waits(registry *r, int64_t tenant_id, int64_t id, char *err, size_t errlen)
{
    int rc = prepare(r, err, errlen);
    if (rc != TN_OK)
        return rc;
    num t, i;
    num_set(&t, tenant_id);
    num_set(&i, id);
    const char *p[] = {t.s, i.s};
    int64_t before = 0;
    return query_ints(r, &before, 1, err, errlen,
                      "SELECT id FROM jobs WHERE tenant_id = CAST($1 AS BIGINT) AND app = '*' AND "
                      "state IN ('queued', 'running') AND id < CAST($2 AS BIGINT) LIMIT 1",
                      2, p);
}

int jobs_progress(registry *r, int64_t id, const char *lease, const char *progress, char *err,
                  size_t errlen)
{
    if (!lease_valid(lease))
        return tn_errf(err, errlen, TN_NOTFOUND, "job %lld is not running under that lease",
                       (long long)id);
    int rc = prepare(r, err, errlen);
    if (rc != TN_OK)
        return rc;
    char cut[PROGRESS_MAX + 1];
    num ids;
    num_set(&ids, id);
    const char *p[] = {ids.s, lease, cut_text(progress ? progress : "", PROGRESS_MAX, cut)};
    int64_t changed = 0;
    rc = exec_alone(r, &changed, err, errlen, "UPDATE jobs SET progress = $3 WHERE id = $1 AND "
                    "state = 'running' AND lease = $2", 3, p);
    if (rc == TN_OK && changed == 0)
        return tn_errf(err, errlen, TN_NOTFOUND, "job %lld is not running under lease %s",
                       (long long)id, lease);
    return rc;
}

/* ---- recover and reap --------------------------------------------------------------------- */

struct requeue_arg {
    const char *lease;   /* recover: the dead worker's; reap: NULL */
    const char *why;
    int64_t now;
    int n;
};

/* One running job found by lease (recover) or by an expired lease_until (reap) back to
 * queued at once, or dead after its last attempt. One job per transaction: a transaction
 * holds one queue row at a time, so two reapers cannot deadlock on queues. */
static int do_requeue(registry *r, void *arg, char *err, size_t errlen)
{
    struct requeue_arg *a = arg;
    bool pg = is_pg(r);
    num now;
    num_set(&now, a->now);
    const char *p[] = {a->lease != NULL ? a->lease : now.s};
    char sql[512];
    snprintf(sql, sizeof(sql),
             "SELECT id, attempts, max_attempts, COALESCE(tenant_id, 0) FROM jobs WHERE %s "
             "LIMIT 1%s",
             a->lease != NULL ? "lease = $1 AND state = 'running' ORDER BY id"
                              : "state = 'running' AND lease_until < $1 ORDER BY lease_until",
             pg ? " FOR UPDATE SKIP LOCKED" : "");
    int64_t v[4];
    int rc = query_ints(r, v, 4, err, errlen, sql, 1, p);
    if (rc == TN_NOTFOUND)
        return TN_OK;
    if (rc != TN_OK)
        return rc;
    rc = end_attempt(r, v[0], v[3], v[1] >= v[2], a->now, a->now, a->why, err, errlen);
    if (rc == TN_OK)
        a->n++;
    return rc;
}

static int requeue_all(registry *r, struct requeue_arg *a, int *n, char *err, size_t errlen)
{
    if (n != NULL)
        *n = 0;
    int rc = prepare(r, err, errlen);
    if (rc != TN_OK)
        return rc;
    for (;;) {
        int before = a->n;
        rc = in_tx(r, do_requeue, a, err, errlen);
        if (rc != TN_OK || a->n == before)
            break;
    }
    if (n != NULL)
        *n = a->n;
    return rc;
}

int jobs_recover(registry *r, const char *lease, const char *why, int64_t now_ms, int *n,
                 char *err, size_t errlen)
{
    if (n != NULL)
        *n = 0;
    if (!lease_valid(lease))
        return TN_OK;   /* no job was ever claimed under it */
    struct requeue_arg a = {lease, why != NULL ? why : "the worker died", now_ms, 0};
    return requeue_all(r, &a, n, err, errlen);
}

int jobs_reap(registry *r, int64_t now_ms, int *n, char *err, size_t errlen)
{
    struct requeue_arg a = {NULL, "lease expired", now_ms, 0};
    return requeue_all(r, &a, n, err, errlen);
}

/* ---- operator actions --------------------------------------------------------------------- */

struct op_arg {
    int64_t id, tenant_id, now;
};

/* The job's state and tenant key, locked on PostgreSQL; TN_NOTFOUND when there is none (or
 * it is not the tenant's, when one is given). */
static int job_state_of(registry *r, const struct op_arg *a, int *state, int64_t *key,
                        char *ukey, size_t ukeylen, char *err, size_t errlen)
{
    num ids;
    num_set(&ids, a->id);
    const char *p[] = {ids.s};
    tn_rows *rows = NULL;
    int rc = tn_db_query(registry_db(r), &rows,
                         is_pg(r) ? "SELECT state, COALESCE(tenant_id, 0), unique_key FROM jobs "
                                    "WHERE id = $1 FOR UPDATE"
                                  : "SELECT state, COALESCE(tenant_id, 0), unique_key FROM jobs "
                                    "WHERE id = $1",
                         1, p);
    if (rc != TN_OK)
        return db_err(r, rc, err, errlen);
    rc = tn_rows_next(rows);
    if (rc == TN_OK) {
        *state = job_state_parse(tn_rows_get(rows, 0));
        *key = col_i64(rows, 1);
        const char *u = tn_rows_get(rows, 2);
        snprintf(ukey, ukeylen, "%s", u != NULL ? u : "");
        if (a->tenant_id >= 0 && *key != a->tenant_id)
            rc = TN_DONE;
    } else if (rc != TN_DONE) {
        rc = db_err(r, rc, err, errlen);
    }
    tn_rows_free(rows);
    if (rc == TN_DONE)
        rc = tn_errf(err, errlen, TN_NOTFOUND, "no job %lld%s", (long long)a->id,
                     a->tenant_id > 0 ? " of this tenant" : a->tenant_id == 0 ? " (central)" : "");
    return rc;
}

static int do_cancel(registry *r, void *arg, char *err, size_t errlen)
{
    struct op_arg *a = arg;
    int state;
    int64_t key;
    char ukey[JOB_KEY_MAX + 1];
    int rc = job_state_of(r, a, &state, &key, ukey, sizeof(ukey), err, errlen);
    if (rc != TN_OK)
        return rc;
    if (state == JOB_RUNNING)
        return tn_errf(err, errlen, TN_BUSY, "job %lld is running", (long long)a->id);
    if (state != JOB_QUEUED)
        return tn_errf(err, errlen, TN_INVALID, "job %lld is %s: only a queued job is cancelled",
                       (long long)a->id, job_state_name(state));
    num ids, now;
    num_set(&ids, a->id);
    num_set(&now, a->now);
    const char *p[] = {ids.s, now.s};
    rc = exec(r, err, errlen,
              "UPDATE jobs SET state = 'cancelled', finished_at = $2 WHERE id = $1", 2, p);
    return rc == TN_OK ? queue_recount(r, key, err, errlen) : rc;
}

int jobs_cancel(registry *r, int64_t id, int64_t tenant_id, int64_t now_ms, char *err,
                size_t errlen)
{
    int rc = prepare(r, err, errlen);
    if (rc != TN_OK)
        return rc;
    struct op_arg a = {id, tenant_id, now_ms};
    return in_tx(r, do_cancel, &a, err, errlen);
}

static int do_retry(registry *r, void *arg, char *err, size_t errlen)
{
    struct op_arg *a = arg;
    int state;
    int64_t key;
    char ukey[JOB_KEY_MAX + 1];
    int rc = job_state_of(r, a, &state, &key, ukey, sizeof(ukey), err, errlen);
    if (rc != TN_OK)
        return rc;
    if (state != JOB_DEAD && state != JOB_CANCELLED)
        return tn_errf(err, errlen, TN_INVALID, "job %lld is %s: only a dead or cancelled job "
                       "is retried", (long long)a->id, job_state_name(state));
    if (ukey[0] != '\0') {
        int64_t holder = 0;
        rc = key_holder(r, key, ukey, &holder, err, errlen);
        if (rc == TN_OK)
            return tn_errf(err, errlen, TN_EXISTS, "job %lld holds its unique key '%.80s'",
                           (long long)holder, ukey);
        if (rc != TN_NOTFOUND)
            return rc;
    }
    num ids, now;
    num_set(&ids, a->id);
    num_set(&now, a->now);
    const char *p[] = {ids.s, now.s};
    rc = tn_db_exec(registry_db(r),
                    "UPDATE jobs SET state = 'queued', attempts = 0, run_at = $2, "
                    "finished_at = NULL WHERE id = $1",
                    2, p);
    if (rc == TN_EXISTS)
        return tn_errf(err, errlen, TN_EXISTS, "another job took its unique key '%.80s'", ukey);
    if (rc != TN_OK)
        return db_err(r, rc, err, errlen);
    return queue_ready(r, key, a->now, err, errlen);
}

int jobs_retry(registry *r, int64_t id, int64_t tenant_id, int64_t now_ms, char *err,
               size_t errlen)
{
    int rc = prepare(r, err, errlen);
    if (rc != TN_OK)
        return rc;
    struct op_arg a = {id, tenant_id, now_ms};
    return in_tx(r, do_retry, &a, err, errlen);
}

/* ---- reads -------------------------------------------------------------------------------- */

int jobs_get(registry *r, int64_t id, job_rec *out, char *err, size_t errlen)
{
    int rc = prepare(r, err, errlen);
    if (rc != TN_OK)
        return rc;
    return reset_on_io(r, job_load(r, id, out, err, errlen));
}

int jobs_list(registry *r, int64_t tenant_id, int state, int64_t before_id, int limit,
              jobs_list_fn fn, void *ctx)
{
    char err[256];
    if (limit < 1 || limit > 1000 || state < -1 || state >= JOB_NSTATES || tenant_id < -1 ||
        fn == NULL)
        return TN_INVALID;
    int rc = prepare(r, err, sizeof(err));
    if (rc != TN_OK)
        return rc;
    num before, lim, tid;
    num_set(&before, before_id > 0 ? before_id : INT64_MAX);
    num_set(&lim, limit);
    num_set(&tid, tenant_id);
    const char *p[] = {before.s, lim.s, NULL, NULL};
    int np = 2;
    char sql[4096], tp[96];
    if (tenant_id < 0 && state < 0) {
        snprintf(sql, sizeof(sql), "SELECT " JOB_COLS JOB_FROM " WHERE j.id < $1 "
                 "ORDER BY j.id DESC LIMIT $2");
    } else if (tenant_id < 0) {
        p[np++] = job_state_name(state);
        snprintf(sql, sizeof(sql), "SELECT " JOB_COLS JOB_FROM " WHERE j.state = $3 AND "
                 "j.id < $1 ORDER BY j.id DESC LIMIT $2");
    } else if (state >= 0) {
        p[np++] = tid.s;
        p[np++] = job_state_name(state);
        snprintf(sql, sizeof(sql), "SELECT " JOB_COLS JOB_FROM " WHERE %s AND j.state = $4 AND "
                 "j.id < $1 ORDER BY j.id DESC LIMIT $2",
                 tenant_is(tp, sizeof(tp), "j.tenant_id", 3, tenant_id));
    } else {
        /* one tenant, every state: the newest of each state (an index range each), merged */
        p[np++] = tid.s;
        tenant_is(tp, sizeof(tp), "tenant_id", 3, tenant_id);
        buf q = BUF_INIT;
        buf_puts(&q, "SELECT " JOB_COLS JOB_FROM " WHERE j.id IN (");
        for (int s = 0; s < JOB_NSTATES; s++)
            buf_printf(&q, "%sSELECT id FROM (SELECT id FROM jobs WHERE %s AND state = '%s' AND "
                       "id < $1 ORDER BY id DESC LIMIT $2) s%d", s > 0 ? " UNION ALL " : "", tp,
                       state_names[s], s);
        buf_puts(&q, ") ORDER BY j.id DESC LIMIT $2");
        if (q.oom || q.len >= sizeof(sql)) {
            buf_free(&q);
            return TN_NOMEM;
        }
        memcpy(sql, q.p, q.len + 1);
        buf_free(&q);
    }
    tn_db *db = registry_db(r);
    tn_rows *rows = NULL;
    rc = tn_db_query(db, &rows, sql, np, p);
    if (rc != TN_OK) {
        log_warn("jobs: list failed: %s", tn_db_error(db));
        return reset_on_io(r, rc);
    }
    /* The page is read whole first: fn may use the registry. */
    job_row *page = calloc((size_t)limit, sizeof(*page));
    buf text = BUF_INIT;
    int n = 0;
    if (page == NULL)
        rc = TN_NOMEM;
    while (rc == TN_OK && n < limit && (rc = tn_rows_next(rows)) == TN_OK)
        job_read(rows, &page[n++], &text);
    tn_rows_free(rows);
    if (rc == TN_DONE || (rc == TN_OK && n == limit))
        rc = text.oom ? TN_NOMEM : TN_OK;
    for (int i = 0; rc == TN_OK && i < n; i++) {
        job_fix(&page[i], &text);
        rc = fn(ctx, &page[i].j);
    }
    free(page);
    buf_free(&text);
    return rc;
}

int jobs_counts(registry *r, int64_t tenant_id, int64_t counts[JOB_NSTATES])
{
    for (int i = 0; i < JOB_NSTATES; i++)
        counts[i] = 0;
    char err[256];
    int rc = prepare(r, err, sizeof(err));
    if (rc != TN_OK)
        return rc;
    num tid;
    num_set(&tid, tenant_id);
    const char *p[] = {tid.s};
    char sql[256], tp[96];
    if (tenant_id >= 0)
        snprintf(sql, sizeof(sql), "SELECT state, count(*) FROM jobs WHERE %s GROUP BY state",
                 tenant_is(tp, sizeof(tp), "tenant_id", 1, tenant_id));
    else
        snprintf(sql, sizeof(sql), "SELECT state, count(*) FROM jobs GROUP BY state");
    tn_db *db = registry_db(r);
    tn_rows *rows = NULL;
    rc = tn_db_query(db, &rows, sql, tenant_id >= 0 ? 1 : 0, p);
    if (rc != TN_OK) {
        log_warn("jobs: counts failed: %s", tn_db_error(db));
        return reset_on_io(r, rc);
    }
    while ((rc = tn_rows_next(rows)) == TN_OK) {
        int st = job_state_parse(tn_rows_get(rows, 0));
        if (st >= 0)
            counts[st] = col_i64(rows, 1);
    }
    tn_rows_free(rows);
    return rc == TN_DONE ? TN_OK : rc;
}

int jobs_prune(registry *r, int64_t before_ms, int *n, char *err, size_t errlen)
{
    if (n != NULL)
        *n = 0;
    int rc = prepare(r, err, errlen);
    if (rc != TN_OK)
        return rc;
    num before, batch;
    num_set(&before, before_ms);
    num_set(&batch, PRUNE_BATCH);
    const char *p[] = {before.s, batch.s};
    bool pg = is_pg(r);
    for (;;) {
        /* SQLite: in batches, each its own transaction, so that no delete holds the one
         * write lock for long. PostgreSQL: at once (readers and claimers do not wait for it,
         * and a batch's IN (subquery) would be planned as a scan of the table per batch). */
        int64_t c = 0;
        rc = exec_alone(r, &c, err, errlen,
                        pg ? "DELETE FROM jobs WHERE state IN ('done', 'cancelled') AND "
                             "finished_at < $1"
                           : "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE state "
                             "IN ('done', 'cancelled') AND finished_at < $1 LIMIT $2)",
                        pg ? 1 : 2, p);
        if (rc != TN_OK)
            return rc;
        if (n != NULL)
            *n += (int)c;
        if (pg || c < PRUNE_BATCH)
            return TN_OK;
    }
}

/* ---- schedules ---------------------------------------------------------------------------- */

static int schedule_check(int64_t tenant_id, const char *app, const char *name, char *err,
                          size_t errlen)
{
    if (tenant_id < 0)
        return tn_errf(err, errlen, TN_INVALID, "a schedule's tenant is an id, or 0 for central");
    if (!job_name_valid(name))
        return tn_errf(err, errlen, TN_INVALID, "invalid job name '%.80s': 1 to %d of a-z, 0-9, "
                       "'_', '.', ':' and '-', starting with a letter", name ? name : "",
                       JOB_NAME_MAX);
    if (!app_valid(app))
        return tn_errf(err, errlen, TN_INVALID, "invalid app '%.80s' for a schedule", app);
    return TN_OK;
}

struct sched_set_arg {
    int64_t tenant_id;
    const char *app, *name, *cron, *payload;
    int64_t now, next, *id;
};

static int do_schedule_set(registry *r, void *arg, char *err, size_t errlen)
{
    struct sched_set_arg *a = arg;
    num tid, next, now;
    num_set(&tid, a->tenant_id);
    num_set(&next, a->next);
    num_set(&now, a->now);
    if (a->tenant_id > 0) {
        int64_t one = 0;
        const char *pt[] = {tid.s};
        int rc = query_ints(r, &one, 1, err, errlen, "SELECT 1 FROM tenants WHERE id = $1", 1, pt);
        if (rc == TN_NOTFOUND)
            return tn_errf(err, errlen, TN_NOTFOUND, "no tenant with id %lld",
                           (long long)a->tenant_id);
        if (rc != TN_OK)
            return rc;
    }
    const char *p[] = {a->tenant_id > 0 ? tid.s : NULL, a->app != NULL ? a->app : "", a->name,
                       a->cron, a->payload != NULL ? a->payload : "", next.s, now.s};
    return query_ints(r, a->id, 1, err, errlen,
                      "INSERT INTO job_schedules (tenant_id, app, name, cron, payload, "
                      "next_run_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, "
                      "$7) ON CONFLICT ((COALESCE(tenant_id, 0)), app, name) DO UPDATE SET "
                      "cron = excluded.cron, payload = excluded.payload, next_run_at = "
                      "excluded.next_run_at, updated_at = excluded.updated_at RETURNING id",
                      7, p);
}

int jobs_schedule_set(registry *r, int64_t tenant_id, const char *app, const char *name,
                      const char *cron, const char *payload, int64_t now_ms, int64_t *id,
                      char *err, size_t errlen)
{
    int64_t dummy = 0;
    if (id == NULL)
        id = &dummy;
    *id = 0;
    int rc = schedule_check(tenant_id, app, name, err, errlen);
    if (rc != TN_OK)
        return rc;
    cron_spec spec;
    if ((rc = cron_parse(cron, &spec, err, errlen)) != TN_OK)
        return rc;
    if (payload != NULL && (strlen(payload) > JOB_PAYLOAD_MAX || !utf8_text(payload)))
        return tn_errf(err, errlen, TN_INVALID, "a job's payload is at most %d bytes of UTF-8",
                       JOB_PAYLOAD_MAX);
    int64_t next = cron_next(&spec, now_ms / 1000);
    if (next < 0)
        return tn_errf(err, errlen, TN_INVALID, "cron: the spec never matches");
    if ((rc = prepare(r, err, errlen)) != TN_OK)
        return rc;
    struct sched_set_arg a = {tenant_id, app, name, cron, payload, now_ms, next * 1000, id};
    return in_tx(r, do_schedule_set, &a, err, errlen);
}

int jobs_schedule_remove(registry *r, int64_t tenant_id, const char *app, const char *name,
                         char *err, size_t errlen)
{
    int rc = prepare(r, err, errlen);
    if (rc != TN_OK)
        return rc;
    num tid;
    num_set(&tid, tenant_id);
    const char *p[] = {tid.s, app != NULL ? app : "", name != NULL ? name : ""};
    int64_t changed = 0;
    /* "+ 0": see key_holder */
    rc = exec_alone(r, &changed, err, errlen, "DELETE FROM job_schedules WHERE "
                    "COALESCE(tenant_id, 0) = CAST($1 AS BIGINT) + 0 AND app = $2 AND name = $3",
                    3, p);
    if (rc == TN_OK && changed == 0)
        return tn_errf(err, errlen, TN_NOTFOUND, "no schedule '%.80s'%s%.80s%s", name ? name : "",
                       app != NULL && app[0] ? " (app " : "", app != NULL ? app : "",
                       app != NULL && app[0] ? ")" : "");
    return rc;
}

#define SCHED_COLS                                                                            \
    "s.id, COALESCE(s.tenant_id, 0), t.slug, s.app, s.name, s.cron, s.payload, s.next_run_at, " \
    "s.last_run_at"
#define SCHED_NSTR 5   /* slug .. payload: columns 2..6 */

typedef struct sched_row {
    job_schedule s;
    size_t off[SCHED_NSTR];
} sched_row;

static void sched_read(tn_rows *rows, sched_row *sr, buf *text)
{
    memset(sr, 0, sizeof(*sr));
    texts_read(rows, 2, SCHED_NSTR, sr->off, text);
    sr->s.id = col_i64(rows, 0);
    sr->s.tenant_id = col_i64(rows, 1);
    sr->s.next_run_at = col_i64(rows, 7);
    sr->s.last_run_at = col_i64(rows, 8);
}

static void sched_fix(sched_row *sr, const buf *text)
{
    const char **f[SCHED_NSTR] = {&sr->s.slug, &sr->s.app, &sr->s.name, &sr->s.cron,
                                  &sr->s.payload};
    texts_fix((const char **const *)f, SCHED_NSTR, sr->off, text);
}

/* A page of schedules (the query's rows, at most `max`) into *page and text. TN_OK, TN_NOMEM
 * or the storage error (the message in the connection). */
static int sched_page(registry *r, const char *sql, int np, const char *const *p, sched_row *page,
                      int max, int *count, buf *text)
{
    tn_db *db = registry_db(r);
    tn_rows *rows = NULL;
    *count = 0;
    int rc = tn_db_query(db, &rows, sql, np, p);
    if (rc != TN_OK)
        return rc;
    while (*count < max && (rc = tn_rows_next(rows)) == TN_OK)
        sched_read(rows, &page[(*count)++], text);
    tn_rows_free(rows);
    if (rc == TN_DONE || rc == TN_OK)
        rc = text->oom ? TN_NOMEM : TN_OK;
    for (int i = 0; rc == TN_OK && i < *count; i++)
        sched_fix(&page[i], text);
    return rc;
}

int jobs_schedule_list(registry *r, int64_t tenant_id, jobs_schedule_fn fn, void *ctx)
{
    char err[256];
    if (tenant_id < -1 || fn == NULL)
        return TN_INVALID;
    int rc = prepare(r, err, sizeof(err));
    if (rc != TN_OK)
        return rc;
    sched_row *page = calloc(SCHEDULE_PAGE, sizeof(*page));
    if (page == NULL)
        return TN_NOMEM;
    char sql[512], tp[96];
    snprintf(sql, sizeof(sql), "SELECT " SCHED_COLS " FROM job_schedules s LEFT JOIN tenants t "
             "ON t.id = s.tenant_id WHERE s.id > $1%s%s ORDER BY s.id LIMIT $2",
             tenant_id >= 0 ? " AND " : "",
             tenant_id >= 0 ? tenant_is(tp, sizeof(tp), "s.tenant_id", 3, tenant_id) : "");
    num after, lim, tid;
    num_set(&after, 0);
    num_set(&lim, SCHEDULE_PAGE);
    num_set(&tid, tenant_id);
    buf text = BUF_INIT;
    for (;;) {
        const char *p[] = {after.s, lim.s, tid.s};
        int n = 0;
        buf_reset(&text);
        rc = sched_page(r, sql, tenant_id >= 0 ? 3 : 2, p, page, SCHEDULE_PAGE, &n, &text);
        if (rc != TN_OK) {
            log_warn("jobs: listing the schedules: %s",
                     rc == TN_NOMEM ? "out of memory" : tn_db_error(registry_db(r)));
            reset_on_io(r, rc);
        }
        for (int i = 0; rc == TN_OK && i < n; i++)
            rc = fn(ctx, &page[i].s);
        if (rc != TN_OK || n < SCHEDULE_PAGE)
            break;
        num_set(&after, page[n - 1].s.id);
    }
    free(page);
    buf_free(&text);
    return rc;
}

struct due_arg {
    int64_t now;
    int limit, max_attempts, timeout_ms, n;
};

static int by_tenant(const void *a, const void *b)
{
    const sched_row *x = a, *y = b;
    if (x->s.tenant_id != y->s.tenant_id)
        return x->s.tenant_id < y->s.tenant_id ? -1 : 1;
    return x->s.id < y->s.id ? -1 : x->s.id > y->s.id;
}

static int do_due(registry *r, void *arg, char *err, size_t errlen)
{
    struct due_arg *a = arg;
    a->n = 0;
    sched_row *page = calloc((size_t)a->limit, sizeof(*page));
    if (page == NULL)
        return tn_errf(err, errlen, TN_NOMEM, "jobs: out of memory");
    buf text = BUF_INIT;
    char sql[512];
    snprintf(sql, sizeof(sql), "SELECT " SCHED_COLS " FROM job_schedules s LEFT JOIN tenants t "
             "ON t.id = s.tenant_id WHERE s.next_run_at <= $1 ORDER BY s.next_run_at, s.id "
             "LIMIT $2%s", is_pg(r) ? " FOR UPDATE OF s SKIP LOCKED" : "");
    num now, lim;
    num_set(&now, a->now);
    num_set(&lim, a->limit);
    const char *p[] = {now.s, lim.s};
    int n = 0;
    int rc = sched_page(r, sql, 2, p, page, a->limit, &n, &text);
    if (rc != TN_OK)
        rc = tn_errf(err, errlen, rc, "jobs: reading the due schedules: %s",
                     rc == TN_NOMEM ? "out of memory" : tn_db_error(registry_db(r)));
    /* The queues are taken in tenant order, so two passes at once cannot deadlock. */
    qsort(page, (size_t)n, sizeof(*page), by_tenant);
    for (int i = 0; rc == TN_OK && i < n; i++) {
        const job_schedule *s = &page[i].s;
        cron_spec spec;
        char e[256];
        int64_t next;
        bool queued = false;
        if (cron_parse(s->cron, &spec, e, sizeof(e)) != TN_OK ||
            (next = cron_next(&spec, a->now / 1000)) < 0) {
            log_warn("jobs: schedule %lld (%s): %s; put off for a day", (long long)s->id,
                     s->name, e);
            next = (a->now + BAD_SPEC_DELAY_MS) / 1000;
        } else {
            char ukey[40];
            snprintf(ukey, sizeof(ukey), "schedule:%lld", (long long)s->id);
            job_new j = {.tenant_id = s->tenant_id, .app = s->app, .name = s->name,
                         .payload = s->payload, .unique_key = ukey,
                         .max_attempts = a->max_attempts, .timeout_ms = a->timeout_ms};
            int64_t id = 0;
            rc = enqueue_tx(r, &j, a->now, s->id, &id, e, sizeof(e));
            if (rc == TN_OK) {
                queued = true;
                a->n++;
            } else if (rc == TN_EXISTS || rc == TN_NOTFOUND || rc == TN_INVALID) {
                /* the last run is still queued or running; the tenant is being deleted; a
                 * schedule stored under other rules: this time is skipped */
                log_debug("jobs: schedule %lld (%s) skipped: %s", (long long)s->id, s->name, e);
                rc = TN_OK;
            } else {
                rc = tn_errf(err, errlen, rc, "%s", e);
                break;
            }
        }
        num ids, nx;
        num_set(&ids, s->id);
        num_set(&nx, next * 1000);
        const char *pu[] = {ids.s, nx.s, now.s};
        rc = exec(r, err, errlen,
                  queued ? "UPDATE job_schedules SET next_run_at = $2, last_run_at = $3 "
                           "WHERE id = $1"
                         : "UPDATE job_schedules SET next_run_at = $2 WHERE id = $1",
                  queued ? 3 : 2, pu);
    }
    free(page);
    buf_free(&text);
    return rc;
}

int jobs_schedules_due(registry *r, int64_t now_ms, int limit, int max_attempts,
                       int timeout_ms, int *n, char *err, size_t errlen)
{
    if (n != NULL)
        *n = 0;
    if (limit < 1 || limit > 1000 || max_attempts < 1 || timeout_ms < 1)
        return tn_errf(err, errlen, TN_INVALID, "jobs_schedules_due: limit 1-1000, max_attempts "
                       "and timeout_ms >= 1");
    int rc = prepare(r, err, errlen);
    if (rc != TN_OK)
        return rc;
    struct due_arg a = {now_ms, limit, max_attempts, timeout_ms, 0};
    rc = in_tx(r, do_due, &a, err, errlen);
    if (rc == TN_OK && n != NULL)
        *n = a.n;
    return rc;
}

/*
 * cli_migrate.c — `tenancy migrate`: bring tenants' storage to the latest version of
 * storage.migrations, in parallel; and `tenancy migrate status`.
 *
 *   tenancy migrate (--all | SLUG...) [-j N] [--canary K] [--stop-on-error]
 *   tenancy migrate status            (or: tenancy migrate --status)
 *
 * Shape: the parent builds the list of tenants from the registry (one paged query per 1,000
 * tenants, no per-tenant lookups), closes its registry connection, then forks N workers
 * (the runner of cli_jobs.c, shared with `tenancy tenant create --from-file`; N is -j,
 * DEFAULT_JOBS without it). Each worker opens its own storage connections (a libpq socket or
 * a SQLite handle must never be shared across fork), takes one tenant at a time from its
 * task pipe (an index into the list it inherited), migrates it (storage/migrate.h: one
 * transaction per file), and writes one fixed-size result to the shared result pipe
 * (smaller than PIPE_BUF, so results of several workers never interleave). The parent hands
 * out tenants as workers come back, so a slow tenant never holds up the others, records the
 * versions and errors in the registry, draws the progress bar, and prints the table.
 *
 * Why the parent records, in batches, on a registry connection it opens after the fork:
 * one transaction per tenant, from N workers, made the workers queue for SQLite's write
 * lock (its busy handler sleeps) once per tenant, which cost a wave more than its DDL. A
 * batch is written every REG_BATCH results or CLI_FLUSH_MS (once the workers have their
 * next tenants, so they do not wait for it), at the end of a canary and at the end; a
 * tenant whose copy could not be written is reported failed ("migrated to V, but the
 * registry could not record it"), as before. The tenant's version table stays the
 * truth: a run killed between a tenant's commit and its batch leaves the old copy, which
 * the next run (the tenant current, its copy wrong) writes.
 *
 * Why the parent hands out work (rather than giving each worker a fixed slice): --canary
 * and --stop-on-error need one place that decides whether to go on, and a wave is only as
 * fast as its slowest slice otherwise.
 *
 * Schema-mode tenants share one server connection per worker and placement, re-scoped per
 * tenant between transactions (db_set_schema_scope), and replaced after
 * placement.NAME.max_tenants schemas (a backend's catalog cache grows with every schema it
 * touches and never shrinks). A tenant that is up to date costs one query on its own
 * version table and no registry write.
 *
 * Signals: the first SIGINT/SIGTERM stops handing out tenants; workers finish the tenant in
 * hand (its file's transaction commits or rolls back, never half) and the table shows the
 * rest as skipped. A second one kills the workers (their open transaction rolls back).
 * Workers ignore SIGINT (the terminal sends it to the whole group) and die with the parent
 * (PR_SET_PDEATHSIG).
 *
 * Why DEFAULT_JOBS workers without -j: a wave's time is the server's (the DDL, its commit)
 * and the round trips in between; one connection leaves the server idle during every round
 * trip, a few keep it busy. Four is what a hand-written script over a few psql sessions
 * would use, and few enough to leave a server's connection slots and CPUs to its apps.
 *
 * Must not: touch tenant storage in the parent, share a connection across fork, print
 * anything but the progress bar to stderr while running, or write to stdout before the end.
 */
#include "core/first.h"
#include "tenancy/cli_int.h"
#include "core/clock.h"
#include "core/rc.h"
#include "storage/migrate.h"
#include "storage/target.h"
#include "tenancy/placement.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE 1000
#define DEFAULT_JOBS 4     /* workers without -j (see the banner) */
#define REG_BATCH 256      /* results recorded in the registry in one transaction */

/* ---- shared with cli_tenant.c -------------------------------------------------------------- */

void cli_conf_path(const cli *c, const char *value, char *out, size_t outlen)
{
    const char *conf = c->conf_path != NULL ? c->conf_path : "";
    const char *slash = strrchr(conf, '/');
    if (value[0] == '/' || slash == NULL)
        snprintf(out, outlen, "%s", value);
    else
        snprintf(out, outlen, "%.*s/%s", (int)(slash - conf), conf, value);
}

int cli_migrations_load(cli *c, migration_set **out)
{
    const char *m = c->cfg->tenancy.migrations;
    char dir[4096] = "", err[1024];
    if (m != NULL && m[0] != '\0')
        cli_conf_path(c, m, dir, sizeof(dir));
    int rc = migrate_load(dir, out, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "storage.migrations: %s", err);
    return 0;
}

/* ---- the list of tenants ----------------------------------------------------------------------- */

enum job_status { JOB_PENDING, JOB_RUNNING, JOB_MIGRATED, JOB_CURRENT, JOB_FAILED, JOB_SKIPPED };
static const char *const status_names[] = {"pending", "running", "migrated", "current",
                                           "failed", "skipped"};

typedef struct job {
    char *slug, *placement, *storage, *reg_version, *reg_error;
    int status;
    char from[MIGRATE_VERSION_MAX], to[MIGRATE_VERSION_MAX];
    int applied;
    int64_t ms;
    char *error;        /* NULL when none */
    char *warning;      /* the first warning, NULL when none */
    int nwarnings;
} job;

typedef struct job_list {
    job *v;
    int n, cap;
    int left_out[TENANT_NSTATES];   /* --all: tenants not migrated because of their state */
    bool oom;
} job_list;

/* Tenants in these states are migrated; the others are being created (provisioning), moved
 * or deleted by someone else right now. */
static bool migratable(int state)
{
    return state == TENANT_ACTIVE || state == TENANT_MAINTENANCE || state == TENANT_SUSPENDED;
}

static int add_job(job_list *l, const registry_migration *m)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 256;
        job *nv = realloc(l->v, (size_t)cap * sizeof(*nv));
        if (nv == NULL) {
            l->oom = true;
            return TN_NOMEM;
        }
        l->v = nv;
        l->cap = cap;
    }
    job *j = &l->v[l->n];
    memset(j, 0, sizeof(*j));
    j->slug = strdup(m->slug);
    j->placement = strdup(m->placement);
    j->storage = strdup(m->storage);
    j->reg_version = strdup(m->version);
    j->reg_error = strdup(m->last_error);
    l->n++;
    if (!j->slug || !j->placement || !j->storage || !j->reg_version || !j->reg_error) {
        l->oom = true;
        return TN_NOMEM;
    }
    snprintf(j->from, sizeof(j->from), "%s", m->version);
    snprintf(j->to, sizeof(j->to), "%s", m->version);
    return TN_OK;
}

typedef struct page_ctx {
    job_list *l;
    char last[128];   /* the last slug of the page, migratable or not */
} page_ctx;

static int all_cb(void *ctx, const registry_migration *m)
{
    page_ctx *p = ctx;
    snprintf(p->last, sizeof(p->last), "%s", m->slug);
    if (!migratable(m->state)) {
        p->l->left_out[m->state]++;
        return TN_OK;
    }
    return add_job(p->l, m);
}

typedef struct one_ctx {
    job_list *l;
    cli *c;
    int status;
} one_ctx;

static int one_cb(void *ctx, const registry_migration *m)
{
    one_ctx *o = ctx;
    if (!migratable(m->state)) {
        o->status = cli_fail(o->c, TN_INVALID, "tenant '%s' is %s: not migrated (only active, "
                                               "maintenance and suspended tenants are)",
                             m->slug, tenant_state_name(m->state));
        return TN_DONE;
    }
    return add_job(o->l, m);
}

static void free_jobs(job_list *l)
{
    for (int i = 0; i < l->n; i++) {
        job *j = &l->v[i];
        free(j->slug);
        free(j->placement);
        free(j->storage);
        free(j->reg_version);
        free(j->reg_error);
        free(j->error);
        free(j->warning);
    }
    free(l->v);
}

/* ---- the wire between workers and the parent ---------------------------------------------------- */

typedef struct wire_result {
    int32_t idx;
    int32_t status;              /* JOB_MIGRATED, JOB_CURRENT, JOB_FAILED */
    int32_t applied;
    int32_t nwarnings;
    int32_t record;              /* the registry's copy differs: the parent writes `to`, error */
    int64_t ms;
    char from[MIGRATE_VERSION_MAX], to[MIGRATE_VERSION_MAX];
    char error[1600];
    char warning[256];
} wire_result;

/* One write() of at most PIPE_BUF bytes is atomic: results of several workers never mix. */
_Static_assert(sizeof(wire_result) <= CLI_JOBS_RESULT_MAX, "a result must fit in PIPE_BUF");

/* ---- a worker ------------------------------------------------------------------------------------ */

typedef struct pooled {
    const char *placement;
    tn_db *db;
    int served;
} pooled;

typedef struct worker_ctx {
    const tenancy_config *tc;
    const migration_set *set;
    pooled conns[MAX_PLACEMENTS];
    int nconns;
} worker_ctx;

/* A connection to a schema-mode tenant: the worker's connection to that server, re-scoped. */
static int schema_conn(worker_ctx *w, const storage_target *t, const char *pname, tn_db **out,
                       char *err, size_t errlen)
{
    pooled *p = NULL;
    for (int i = 0; i < w->nconns && p == NULL; i++)
        if (strcmp(w->conns[i].placement, pname) == 0)
            p = &w->conns[i];
    if (p == NULL) {
        p = &w->conns[w->nconns++];
        p->placement = pname;
        p->db = NULL;
    }
    const placement *pl = tenancy_placement(w->tc, pname);
    int max = pl != NULL && pl->max_tenants > 0 ? pl->max_tenants : POOL_PG_MAX_TENANTS;
    if (p->db != NULL && (p->served >= max || !db_is_clean(p->db) ||
                          db_set_scope(p->db, t->name, t->role) != TN_OK)) {
        db_close(p->db);
        p->db = NULL;
    }
    if (p->db == NULL) {
        int rc = target_open(t, &p->db, err, errlen);
        if (rc != TN_OK) {
            p->db = NULL;
            return rc;
        }
        p->served = 0;
    }
    p->served++;
    *out = p->db;
    return TN_OK;
}

static void drop_schema_conn(worker_ctx *w, tn_db *db)
{
    for (int i = 0; i < w->nconns; i++)
        if (w->conns[i].db == db) {
            db_close(db);
            w->conns[i].db = NULL;
        }
}

static void migrate_one(worker_ctx *w, const job *j, wire_result *r)
{
    int64_t t0 = clock_mono_ms();
    storage_target t;
    char err[1024] = "";
    bool known = false;   /* the version was read from the tenant's storage */
    snprintf(r->from, sizeof(r->from), "%s", j->reg_version);
    snprintf(r->to, sizeof(r->to), "%s", j->reg_version);
    int rc = placement_target_of(w->tc, j->placement, j->storage, NULL, &t);
    if (rc == TN_NOTFOUND)
        snprintf(err, sizeof(err), "placement '%s' is not configured on this host",
                 j->placement);
    else if (rc != TN_OK)
        snprintf(err, sizeof(err), "the tenant has no storage");
    tn_db *db = NULL;
    bool shared = false;
    if (rc == TN_OK) {
        t.statement_timeout_ms = 0;   /* a migration may take longer than a request */
        shared = t.kind == TARGET_PG_SCHEMA;
        rc = shared ? schema_conn(w, &t, j->placement, &db, err, sizeof(err))
                    : target_open(&t, &db, err, sizeof(err));
        if (rc != TN_OK)
            db = NULL;
    }
    if (rc == TN_OK) {
        migrate_result m;
        rc = migrate_apply(db, w->set, &m);
        r->applied = m.applied;
        r->nwarnings = m.nwarnings;
        if (m.nwarnings > 0)
            snprintf(r->warning, sizeof(r->warning), "%s", m.warnings[0]);
        /* A failure before the version table was read leaves the version unknown. */
        known = rc == TN_OK || m.error.file[0] != '\0';
        if (known) {
            snprintf(r->from, sizeof(r->from), "%s", m.from);
            snprintf(r->to, sizeof(r->to), "%s", m.to);
        }
        if (rc != TN_OK && m.error.statement > 0)
            snprintf(err, sizeof(err), "%s statement %d (line %d): %s", m.error.file,
                     m.error.statement, m.error.line, m.error.message);
        else if (rc != TN_OK)
            snprintf(err, sizeof(err), "%s%s%s", m.error.file, m.error.file[0] ? ": " : "",
                     m.error.message);
    }
    if (shared && db != NULL && (rc == TN_IO || !db_is_clean(db)))
        drop_schema_conn(w, db);   /* a broken connection is not reused */
    else if (!shared)
        db_close(db);
    r->status = rc != TN_OK ? JOB_FAILED : r->applied > 0 ? JOB_MIGRATED : JOB_CURRENT;
    snprintf(r->error, sizeof(r->error), "%s", rc != TN_OK ? err : "");

    /* The registry's copy (r->to is the registry's own version when the tenant's is not
     * known), written by the parent; an up-to-date tenant whose copy is right costs none. */
    r->record = !(strcmp(r->to, j->reg_version) == 0 && strcmp(r->error, j->reg_error) == 0);
    r->ms = clock_mono_ms() - t0;
}

/* ---- the run: tasks are indexes into the job list (cli_jobs.c runs them) ------------------------ */

typedef struct run {
    cli *c;
    job_list *l;
    const migration_set *set;
    worker_ctx w;                /* in a worker */
    int *pend;                   /* in the parent: results the registry must record ... */
    int npend;
    int64_t recorded_ms;         /* ... since the last batch was written at this time */
    int64_t flushed_ms;          /* the parent's last registry flush (cli_flush_due) */
    cli_jobs j;
} run;

static void worker_begin(void *ctx)
{
    run *r = ctx;
    memset(&r->w, 0, sizeof(r->w));
    r->w.tc = &r->c->cfg->tenancy;
    r->w.set = r->set;
}

static bool worker_task(void *ctx, int idx, void *result)
{
    run *r = ctx;
    migrate_one(&r->w, &r->l->v[idx], result);
    return true;
}

static void worker_end(void *ctx)
{
    run *r = ctx;
    for (int i = 0; i < r->w.nconns; i++)
        db_close(r->w.conns[i].db);
}

static void set_text(char **dst, const char *s)
{
    free(*dst);
    *dst = s != NULL && s[0] != '\0' ? strdup(s) : NULL;
}

/* A tenant migrated whose registry copy could not be written counts as failed. */
static int record_failed(job *j, const char *why)
{
    if (j->status == JOB_FAILED)
        return 0;   /* its own error says more */
    char msg[1024];
    snprintf(msg, sizeof(msg), "migrated to %s, but the registry could not record it: %s",
             j->to, why);
    j->status = JOB_FAILED;
    set_text(&j->error, msg);
    return 1;
}

/* Write the pending results to the registry in one transaction (its commit deferred, as
 * cli_int.h says, and flushed by cli_flush_due and cli_flush_all). The connection is the
 * parent's own, opened at the first batch, after the workers were forked. Returns how many
 * tenants turned failed. */
static int record_batch(run *r)
{
    cli *c = r->c;
    int turned = 0;
    r->recorded_ms = clock_mono_ms();
    if (r->npend == 0)
        return 0;
    char err[600] = "";
    int rc = TN_OK;
    if (c->reg == NULL) {
        const tenancy_config *tc = &c->cfg->tenancy;
        rc = registry_open(tc->registry_uri, tc->gen_path, &c->reg, err, sizeof(err));
        if (rc == TN_OK)
            rc = registry_defer_sync(c->reg, err, sizeof(err));
        r->flushed_ms = clock_mono_ms();
    }
    registry_migration_update *u = calloc((size_t)r->npend, sizeof(*u));
    if (rc == TN_OK && u == NULL) {
        rc = TN_NOMEM;
        snprintf(err, sizeof(err), "out of memory");
    }
    if (rc == TN_OK) {
        for (int i = 0; i < r->npend; i++) {
            const job *j = &r->l->v[r->pend[i]];
            u[i] = (registry_migration_update){j->slug, j->to, j->error ? j->error : "", 0};
        }
        rc = registry_set_migrations(c->reg, u, r->npend, err, sizeof(err));
    }
    for (int i = 0; i < r->npend; i++) {
        job *j = &r->l->v[r->pend[i]];
        if (rc != TN_OK && c->reg != NULL && u != NULL) {
            /* The batch failed as a whole: one by one, so that only a tenant whose own row
             * cannot be written is reported (as it was when each tenant wrote its own). */
            char one[600];
            int orc = registry_set_migration(c->reg, j->slug, u[i].version, u[i].last_error,
                                             one, sizeof(one));
            if (orc != TN_OK)
                turned += record_failed(j, one);
        } else if (rc != TN_OK) {
            turned += record_failed(j, err);
        } else if (u[i].rc == TN_NOTFOUND) {
            char why[200];
            snprintf(why, sizeof(why), "no tenant '%s'", j->slug);
            turned += record_failed(j, why);
        }
    }
    free(u);
    r->npend = 0;
    if (c->reg != NULL)
        cli_flush_due(c->reg, &r->flushed_ms);
    return turned;
}

static bool take_result(void *ctx, const void *result)
{
    run *r = ctx;
    const wire_result *res = result;
    job *j = &r->l->v[res->idx];
    j->status = res->status;
    snprintf(j->from, sizeof(j->from), "%s", res->from);
    snprintf(j->to, sizeof(j->to), "%s", res->to);
    j->applied = res->applied;
    j->ms = res->ms;
    j->nwarnings = res->nwarnings;
    set_text(&j->error, res->error);
    set_text(&j->warning, res->warning);
    if (res->record)
        r->pend[r->npend++] = res->idx;
    return j->status == JOB_FAILED;
}

/* After the workers got their next tenants: a batch that is due is written while they
 * work. A tenant it turns failed is counted there. */
static int record_due(void *ctx)
{
    run *r = ctx;
    if (r->npend >= REG_BATCH || clock_mono_ms() - r->recorded_ms >= CLI_FLUSH_MS)
        return record_batch(r);
    return 0;
}

static void lost_job(void *ctx, int idx, const char *why)
{
    run *r = ctx;
    r->l->v[idx].status = JOB_FAILED;
    set_text(&r->l->v[idx].error, why);
}

/* A second signal kills the workers: the transaction of the file in hand rolls back. */
static const cli_jobs_ops migrate_ops = {
    .result_size = sizeof(wire_result),
    .worker_begin = worker_begin,
    .work = worker_task,
    .worker_end = worker_end,
    .take = take_result,
    .lost = lost_job,
    .idle = record_due,
    .hard_signal = SIGKILL,
};

/* ---- output ---------------------------------------------------------------------------------------- */

static void count_status(const job_list *l, int *n)
{
    memset(n, 0, sizeof(int) * 6);
    for (int i = 0; i < l->n; i++)
        n[l->v[i].status]++;
}

static void print_json(cli *c, const run *r, const migration_set *set, int jobs, int canary,
                       double secs)
{
    int n[6];
    count_status(r->l, n);
    buf *b = &c->out;
    bool ok = n[JOB_FAILED] == 0 && r->j.stopped == NULL;
    buf_puts(b, "{\"ok\":");
    buf_puts(b, ok ? "true" : "false");
    if (!ok) {
        char msg[160];
        if (n[JOB_FAILED] > 0)
            snprintf(msg, sizeof(msg), "%d tenant%s failed", n[JOB_FAILED],
                     n[JOB_FAILED] == 1 ? "" : "s");
        else
            snprintf(msg, sizeof(msg), "stopped (%s)", r->j.stopped);
        buf_puts(b, ",\"error\":");
        buf_json_str(b, msg);
        buf_puts(b, ",\"code\":\"error\"");
    }
    buf_puts(b, ",\"latest\":");
    buf_json_str(b, migrate_latest(set));
    buf_puts(b, ",\"files\":");
    buf_i64(b, migrate_count(set));
    buf_puts(b, ",\"jobs\":");
    buf_i64(b, jobs);
    buf_puts(b, ",\"canary\":");
    if (canary > 0)
        buf_i64(b, canary);
    else
        buf_puts(b, "null");
    buf_puts(b, ",\"stopped\":");
    buf_json_str(b, r->j.stopped);
    buf_puts(b, ",\"total\":");
    buf_i64(b, r->l->n);
    static const int shown[] = {JOB_MIGRATED, JOB_CURRENT, JOB_FAILED, JOB_SKIPPED};
    for (size_t k = 0; k < TN_ARRAY_LEN(shown); k++) {
        buf_printf(b, ",\"%s\":", status_names[shown[k]]);
        buf_i64(b, n[shown[k]] + (shown[k] == JOB_SKIPPED ? n[JOB_PENDING] : 0));
    }
    buf_printf(b, ",\"seconds\":%.3f,\"left_out\":{", secs);
    bool first = true;
    for (int s = 0; s < TENANT_NSTATES; s++)
        if (r->l->left_out[s] > 0) {
            buf_printf(b, "%s\"%s\":%d", first ? "" : ",", tenant_state_name(s),
                       r->l->left_out[s]);
            first = false;
        }
    buf_puts(b, "},\"tenants\":[");
    for (int i = 0; i < r->l->n; i++) {
        const job *j = &r->l->v[i];
        buf_puts(b, i ? ",{\"slug\":" : "{\"slug\":");
        buf_json_str(b, j->slug);
        buf_puts(b, ",\"status\":");
        buf_json_str(b, status_names[j->status == JOB_PENDING ? JOB_SKIPPED : j->status]);
        buf_puts(b, ",\"from\":");
        buf_json_str(b, j->from);
        buf_puts(b, ",\"to\":");
        buf_json_str(b, j->to);
        buf_puts(b, ",\"applied\":");
        buf_i64(b, j->applied);
        buf_puts(b, ",\"ms\":");
        buf_i64(b, j->ms);
        buf_puts(b, ",\"error\":");
        buf_json_str(b, j->error);
        buf_puts(b, ",\"warnings\":");
        buf_i64(b, j->nwarnings);
        buf_puts(b, ",\"warning\":");
        buf_json_str(b, j->warning);
        buf_putc(b, '}');
    }
    buf_puts(b, "]}");
}

static void print_text(cli *c, const run *r, const migration_set *set, double secs)
{
    int n[6];
    count_status(r->l, n);
    n[JOB_SKIPPED] += n[JOB_PENDING];
    if (c->tty) {
        int ws = 4;
        for (int i = 0; i < r->l->n; i++) {
            int l = (int)strlen(r->l->v[i].slug);
            ws = l > ws ? l : ws;
        }
        printf("%-*s  %-8s  %-*s  %8s  %s\n", ws, "SLUG", "STATUS", 2 * MIGRATE_VERSION_MAX / 3,
               "VERSION", "MS", "ERROR");
        for (int i = 0; i < r->l->n; i++) {
            const job *j = &r->l->v[i];
            char ver[80];
            snprintf(ver, sizeof(ver), "%s -> %s", j->from[0] ? j->from : "-",
                     j->to[0] ? j->to : "-");
            printf("%-*s  %-8s  %-*s  %8lld  ", ws, j->slug,
                   status_names[j->status == JOB_PENDING ? JOB_SKIPPED : j->status],
                   2 * MIGRATE_VERSION_MAX / 3, ver, (long long)j->ms);
            cli_put_text(stdout, j->error ? j->error : j->warning ? j->warning : "");
            fputc('\n', stdout);
        }
    } else {
        /* Not a terminal: one tab-separated line per tenant (slug, status, from, to, ms,
         * error), no header, for scripts. */
        for (int i = 0; i < r->l->n; i++) {
            const job *j = &r->l->v[i];
            printf("%s\t%s\t%s\t%s\t%lld\t", j->slug,
                   status_names[j->status == JOB_PENDING ? JOB_SKIPPED : j->status], j->from,
                   j->to, (long long)j->ms);
            cli_put_text(stdout, j->error ? j->error : "");
            fputc('\n', stdout);
        }
    }
    FILE *f = c->tty ? stdout : stderr;
    fprintf(f, "%d tenant%s to %s: %d migrated, %d current, %d failed, %d skipped in %.1f s "
               "(%.1f tenants/s)", r->l->n, r->l->n == 1 ? "" : "s",
            migrate_latest(set)[0] ? migrate_latest(set) : "(no migrations)", n[JOB_MIGRATED],
            n[JOB_CURRENT], n[JOB_FAILED], n[JOB_SKIPPED], secs,
            secs > 0 ? r->j.done / secs : 0.0);
    if (r->j.stopped != NULL)
        fprintf(f, "; stopped: %s", r->j.stopped);
    fputc('\n', f);
}

/* ---- migrate status ------------------------------------------------------------------------------- */

typedef struct status_ctx {
    buf rows;            /* JSON */
    int n;
    int64_t total, behind, failing;
    const char *latest;
    bool tty;
    bool json;
} status_ctx;

static int status_cb(void *ctx, const char *version, int64_t tenants, int64_t failing)
{
    status_ctx *s = ctx;
    s->total += tenants;
    s->failing += failing;
    if (strcmp(version, s->latest) != 0)
        s->behind += tenants;
    if (s->json) {
        buf_puts(&s->rows, s->n ? ",{\"version\":" : "{\"version\":");
        buf_json_str(&s->rows, version);
        buf_puts(&s->rows, ",\"tenants\":");
        buf_i64(&s->rows, tenants);
        buf_puts(&s->rows, ",\"failing\":");
        buf_i64(&s->rows, failing);
        buf_puts(&s->rows, ",\"latest\":");
        buf_puts(&s->rows, strcmp(version, s->latest) == 0 ? "true}" : "false}");
    } else if (s->tty) {
        if (s->n == 0)
            printf("%-16s  %10s  %10s\n", "VERSION", "TENANTS", "FAILING");
        printf("%-16s  %10lld  %10lld%s\n", version[0] ? version : "(none)", (long long)tenants,
               (long long)failing, strcmp(version, s->latest) == 0 ? "  (latest)" : "");
    } else {
        printf("%s\t%lld\t%lld\n", version, (long long)tenants, (long long)failing);
    }
    s->n++;
    return TN_OK;
}

static int migrate_status(cli *c)
{
    migration_set *set = NULL;
    int rc = cli_migrations_load(c, &set);
    if (rc != 0)
        return rc;
    status_ctx s;
    memset(&s, 0, sizeof(s));
    s.latest = migrate_latest(set);
    s.tty = c->tty;
    s.json = c->json;
    rc = registry_migration_status(c->reg, status_cb, &s);
    if (rc != TN_OK || s.rows.oom) {
        buf_free(&s.rows);
        migrate_free(set);
        return cli_fail(c, rc != TN_OK ? rc : TN_NOMEM, "cannot read the migration status: %s",
                        rc != TN_OK ? tn_rc_str(rc) : "out of memory");
    }
    if (c->json) {
        buf_puts(&c->out, "{\"latest\":");
        buf_json_str(&c->out, s.latest);
        buf_puts(&c->out, ",\"total\":");
        buf_i64(&c->out, s.total);
        buf_puts(&c->out, ",\"behind\":");
        buf_i64(&c->out, s.behind);
        buf_puts(&c->out, ",\"failing\":");
        buf_i64(&c->out, s.failing);
        buf_puts(&c->out, ",\"versions\":[");
        if (s.rows.len > 0)
            buf_append(&c->out, s.rows.p, s.rows.len);
        buf_puts(&c->out, "]}");
    } else if (c->tty) {
        printf("latest: %s; %lld of %lld tenant%s behind, %lld with a migration error\n",
               s.latest[0] ? s.latest : "(no migrations)", (long long)s.behind,
               (long long)s.total, s.total == 1 ? "" : "s", (long long)s.failing);
    }
    buf_free(&s.rows);
    migrate_free(set);
    return 0;
}

/* ---- tenancy migrate ---------------------------------------------------------------------------- */

static int collect(cli *c, const cli_args *a, bool all, job_list *l)
{
    int rc = TN_OK;
    if (all) {
        /* Keyset pages of PAGE tenants: one query each, no per-tenant lookups. */
        page_ctx p = {l, ""};
        char after[128] = "";
        int got;
        do {
            got = 0;
            rc = registry_migration_list(c->reg, after, PAGE, all_cb, &p, &got);
            snprintf(after, sizeof(after), "%s", p.last);
        } while (rc == TN_OK && got == PAGE);
        if (rc != TN_OK || l->oom)
            return cli_fail(c, l->oom ? TN_NOMEM : rc, "cannot list the tenants: %s",
                            l->oom ? "out of memory" : tn_rc_str(rc));
        return 0;
    }
    for (int i = 0; i < a->npos; i++) {
        bool dup = false;
        for (int k = 0; k < l->n && !dup; k++)
            dup = strcmp(l->v[k].slug, a->pos[i]) == 0;
        if (dup)
            continue;
        one_ctx o = {l, c, 0};
        rc = registry_migration_get(c->reg, a->pos[i], one_cb, &o);
        if (o.status != 0)
            return o.status;
        if (rc == TN_NOTFOUND)
            return cli_fail(c, rc, "no tenant '%s'", a->pos[i]);
        if (rc != TN_OK || l->oom)
            return cli_fail(c, l->oom ? TN_NOMEM : rc, "cannot read tenant '%s': %s", a->pos[i],
                            l->oom ? "out of memory" : tn_rc_str(rc));
    }
    return 0;
}

int cli_migrate(cli *c, const cli_args *a)
{
    bool status = strcmp(c->cmd->name, "migrate status") == 0 || cli_opt(a, "--status");
    bool all = cli_opt(a, "--all") != NULL;
    if (status) {
        if (all || a->npos > 0 || cli_opt(a, "-j") || cli_opt(a, "--canary") ||
            cli_opt(a, "--stop-on-error"))
            return cli_usage(c, "--status takes no tenants and no other option");
        return migrate_status(c);
    }
    if (all == (a->npos > 0))
        return cli_usage(c, "give --all or the slugs of the tenants to migrate (not both)");
    int jobs = DEFAULT_JOBS, canary = 0;
    int rc = cli_opt_int(c, a, "-j", 1, CLI_JOBS_MAX, &jobs);
    if (rc == 0)
        rc = cli_opt_int(c, a, "--canary", 1, 1000000, &canary);
    if (rc != 0)
        return rc;
    bool stop_on_error = cli_opt(a, "--stop-on-error") != NULL;
    const tenancy_config *tc = &c->cfg->tenancy;
    if (tc->migrations == NULL || tc->migrations[0] == '\0')
        return cli_fail(c, TN_INVALID, "storage.migrations is not set in %s: nothing to apply",
                        c->conf_path);
    migration_set *set = NULL;
    rc = cli_migrations_load(c, &set);
    if (rc != 0)
        return rc;
    job_list l;
    memset(&l, 0, sizeof(l));
    rc = collect(c, a, all, &l);
    if (rc != 0) {
        free_jobs(&l);
        migrate_free(set);
        return rc;
    }

    run r;
    memset(&r, 0, sizeof(r));
    r.c = c;
    r.l = &l;
    r.set = set;
    r.pend = calloc((size_t)(l.n > 0 ? l.n : 1), sizeof(*r.pend));
    if (r.pend == NULL) {
        free_jobs(&l);
        migrate_free(set);
        return cli_fail(c, TN_NOMEM, "out of memory");
    }
    /* The workers open their own connections: the parent's must not be inherited in use. */
    registry_close(c->reg);
    c->reg = NULL;

    char err[512] = "";
    cli_preload_drivers(c);
    rc = cli_jobs_start(&r.j, &migrate_ops, &r, l.n, jobs, err, sizeof(err));
    r.recorded_ms = clock_mono_ms();
    if (rc == TN_OK && l.n > 0) {
        if (canary > 0 && canary < l.n) {
            cli_jobs_run(&r.j, canary, stop_on_error);
            r.j.failed += record_batch(&r);   /* the canaries' registry copies count too */
            if (r.j.failed > 0 && r.j.stopped == NULL)
                r.j.stopped = "a canary failed";
        }
        if (r.j.stopped == NULL)
            cli_jobs_run(&r.j, l.n, stop_on_error);
        if (r.j.stopped == NULL && r.j.next < l.n)
            r.j.stopped = "no worker left";   /* every worker died */
    }
    cli_jobs_finish(&r.j);
    r.j.failed += record_batch(&r);
    free(r.pend);
    /* The registry commits were deferred: one flush makes them durable before anything is
     * reported. */
    char ferr[600] = "";
    int frc = rc == TN_OK && r.j.done > 0 ? cli_flush_all(c, ferr, sizeof(ferr)) : TN_OK;
    double secs = (double)(clock_mono_ms() - r.j.t0) / 1000.0;
    for (int i = 0; i < l.n; i++)
        if (l.v[i].status == JOB_PENDING || l.v[i].status == JOB_RUNNING)
            l.v[i].status = JOB_SKIPPED;

    int status_code = 0;
    if (rc != TN_OK) {
        status_code = cli_fail(c, rc, "cannot start the workers: %s", err);
    } else {
        if (c->json)
            print_json(c, &r, set, r.j.nworkers, canary, secs);
        else
            print_text(c, &r, set, secs);
        int n[6];
        count_status(&l, n);
        if (frc != TN_OK) {
            status_code = cli_fail(c, frc, "the registry could not be flushed to disk (%s): "
                                           "the results recorded are in it, but a power loss "
                                           "now could lose them; run 'tenancy check' after one",
                                   ferr);
            c->keep_out = true;
        } else if (n[JOB_FAILED] > 0 || r.j.stopped != NULL) {
            status_code = n[JOB_FAILED] > 0
                              ? cli_fail(c, TN_ERR, "%d of %d tenant%s failed%s%s",
                                         n[JOB_FAILED], l.n, l.n == 1 ? "" : "s",
                                         r.j.stopped ? "; stopped: " : "",
                                         r.j.stopped ? r.j.stopped : "")
                              : cli_fail(c, TN_ERR, "stopped: %s", r.j.stopped);
            c->keep_out = true;   /* the JSON document is the table, with error and code */
        }
    }
    free_jobs(&l);
    migrate_free(set);
    return status_code;
}

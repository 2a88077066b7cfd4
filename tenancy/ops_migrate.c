/*
 * ops_migrate.c — ops_migrate: bring tenants' storage to the latest version of
 * storage.migrations, in parallel; and ops_migrate_status (see ops.h). `tenancy migrate`
 * (cli/migrate.c) and the panel's detached migrate (admin/actions.c) call it.
 *
 * Shape: the parent builds the list of tenants from the registry (one paged query per 1,000
 * tenants, no per-tenant lookups), closes its registry connection, then forks N workers
 * (the runner of ops_runner.c, shared with `tenancy tenant create --from-file`; N is
 * opts->jobs, OPS_MIGRATE_JOBS without it). Each worker opens its own storage connections (a libpq socket or
 * a SQLite handle must never be shared across fork), takes one tenant at a time from its
 * task pipe (an index into the list it inherited), migrates it (storage/migrate.h: one
 * transaction per file), and writes one fixed-size result to the shared result pipe
 * (smaller than PIPE_BUF, so results of several workers never interleave). The parent hands
 * out tenants as workers come back, so a slow tenant never holds up the others, records the
 * versions and errors in the registry, and reports progress (ticks and each tenant's
 * outcome) through the caller's callback; the report is the caller's to show.
 *
 * Why the parent records, in batches, on a registry connection it opens after the fork:
 * one transaction per tenant, from N workers, made the workers queue for SQLite's write
 * lock (its busy handler sleeps) once per tenant, which cost a wave more than its DDL. A
 * batch is written every REG_BATCH results or OPS_FLUSH_MS (once the workers have their
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
 * tenant between transactions (db_set_schema_scope), and replaced once its backend's memory
 * reaches placement.NAME.max_backend_memory, or after max_tenants schemas when that is set
 * or the memory cannot be read (membound_run_count: a backend's catalog cache grows with
 * every schema it touches and never shrinks). A tenant that is up to date costs one query
 * on its own version table and no registry write.
 *
 * Signals: the first SIGINT/SIGTERM stops handing out tenants; workers finish the tenant in
 * hand (its file's transaction commits or rolls back, never half) and the table shows the
 * rest as skipped. A second one kills the workers (their open transaction rolls back).
 * Workers ignore SIGINT (the terminal sends it to the whole group) and die with the parent
 * (PR_SET_PDEATHSIG).
 *
 * Why OPS_MIGRATE_JOBS workers without -j: a wave's time is the server's (the DDL, its commit)
 * and the round trips in between; one connection leaves the server idle during every round
 * trip, a few keep it busy. Four is what a hand-written script over a few psql sessions
 * would use, and few enough to leave a server's connection slots and CPUs to its apps.
 *
 * Must not: touch tenant storage in the parent, share a connection across fork, or print.
 */
#include "core/first.h"
#include "tenancy/ops_runner.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/rc.h"
#include "storage/db.h"
#include "storage/membound.h"
#include "storage/migrate.h"
#include "storage/target.h"
#include "tenancy/placement.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE 1000
#define REG_BATCH 256      /* results recorded in the registry in one transaction */

/* ---- the list of tenants ----------------------------------------------------------------------- */

static const char *const status_names[] = {"pending", "running", "migrated", "current",
                                           "failed", "skipped"};

const char *ops_mstatus_name(int status)
{
    return status >= 0 && status < OPS_M_NSTATUS ? status_names[status] : "?";
}

typedef struct job {
    char *slug, *placement, *storage, *reg_version, *reg_error;
    int64_t id;         /* the registry's */
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
    j->id = m->id;
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
    char *err;
    size_t errlen;
    int rc;
} one_ctx;

static int one_cb(void *ctx, const registry_migration *m)
{
    one_ctx *o = ctx;
    if (!migratable(m->state)) {
        o->rc = tn_errf(o->err, o->errlen, TN_INVALID, "tenant '%s' is %s: not migrated (only "
                        "active, maintenance and suspended tenants are)", m->slug,
                        tenant_state_name(m->state));
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
    int32_t status;              /* OPS_M_MIGRATED, OPS_M_CURRENT, OPS_M_FAILED */
    int32_t applied;
    int32_t nwarnings;
    int32_t record;              /* the registry's copy differs: the parent writes `to`, error */
    int64_t ms;
    char from[MIGRATE_VERSION_MAX], to[MIGRATE_VERSION_MAX];
    char error[1600];
    char warning[256];
} wire_result;

/* One write() of at most PIPE_BUF bytes is atomic: results of several workers never mix. */
_Static_assert(sizeof(wire_result) <= OPS_RESULT_MAX, "a result must fit in PIPE_BUF");

/* ---- a worker ------------------------------------------------------------------------------------ */

typedef struct pooled {
    const char *placement;
    const char *group;   /* its group login (login = group), or NULL */
    tn_db *db;
    size_t served;
    membound mem;   /* the backend's byte bound (placement.NAME.max_backend_memory) */
} pooled;

typedef struct worker_ctx {
    const tenancy_config *tc;
    const migration_set *set;
    pooled conns[MAX_PLACEMENTS * PLACEMENT_GROUPS_MAX];
    int nconns;
} worker_ctx;

/* A connection to a schema-mode tenant: the worker's connection to that server (and group
 * login: target_open logs in as it), re-scoped. */
static int schema_conn(worker_ctx *w, const storage_target *t, const char *pname, tn_db **out,
                       char *err, size_t errlen)
{
    pooled *p = NULL;
    /* a group login's name is the configuration's one string (placement_target_of) */
    for (int i = 0; i < w->nconns && p == NULL; i++)
        if (strcmp(w->conns[i].placement, pname) == 0 && w->conns[i].group == t->group_role)
            p = &w->conns[i];
    if (p == NULL) {
        p = &w->conns[w->nconns++];
        p->placement = pname;
        p->group = t->group_role;   /* lives as long as w->tc */
        p->db = NULL;
    }
    const placement *pl = tenancy_placement(w->tc, pname);
    membound_set_max(&p->mem, t->max_backend_bytes);
    bool reached = false;
    if (p->db != NULL && db_is_clean(p->db))   /* between two tenants */
        reached = membound_check(&p->mem, p->db, p->served, POOL_PG_MEMORY_EVERY) ==
                  MEMBOUND_REACHED;
    size_t max = membound_run_count(&p->mem, pl != NULL ? pl->max_tenants : 0);
    if (p->db != NULL && (reached || p->served >= max || !db_is_clean(p->db) ||
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
        membound_reset(&p->mem);
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
        rc = tn_errf(err, sizeof(err), rc, "placement '%s' is not configured on this host",
                     j->placement);
    else if (rc != TN_OK)
        rc = tn_errf(err, sizeof(err), rc, "the tenant has no storage");
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
        rc = migrate_apply_expected(db, w->set, j->reg_version, &m);
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
            rc = tn_errf(err, sizeof(err), rc, "%s statement %d (line %d): %s", m.error.file,
                         m.error.statement, m.error.line, m.error.message);
        else if (rc != TN_OK)
            rc = tn_errf(err, sizeof(err), rc, "%s%s%s", m.error.file,
                         m.error.file[0] ? ": " : "", m.error.message);
    }
    if (shared && db != NULL && (rc == TN_IO || !db_is_clean(db)))
        drop_schema_conn(w, db);   /* a broken connection is not reused */
    else if (!shared)
        db_close(db);
    r->status = rc != TN_OK ? OPS_M_FAILED : r->applied > 0 ? OPS_M_MIGRATED : OPS_M_CURRENT;
    str_copy(r->error, sizeof(r->error), rc != TN_OK ? err : "");

    /* The registry's copy (r->to is the registry's own version when the tenant's is not
     * known), written by the parent; an up-to-date tenant whose copy is right costs none. */
    r->record = !(strcmp(r->to, j->reg_version) == 0 && strcmp(r->error, j->reg_error) == 0);
    r->ms = clock_mono_ms() - t0;
}

/* ---- the run: tasks are indexes into the job list (ops_runner.c runs them) ---------------------- */

typedef struct run {
    ops_env *e;
    job_list *l;
    const migration_set *set;
    worker_ctx w;                /* in a worker */
    int *pend;                   /* in the parent: results the registry must record ... */
    int npend;
    int64_t recorded_ms;         /* ... since the last batch was written at this time */
    int64_t flushed_ms;          /* the parent's last registry flush (ops_flush_due) */
    ops_runner j;
} run;

static void worker_begin(void *ctx)
{
    run *r = ctx;
    memset(&r->w, 0, sizeof(r->w));
    r->w.tc = r->e->tc;
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
    if (j->status == OPS_M_FAILED)
        return 0;   /* its own error says more */
    char msg[1024];
    tn_errf(msg, sizeof(msg), TN_ERR, "migrated to %s, but the registry could not record it: %s",
            j->to, why);
    j->status = OPS_M_FAILED;
    set_text(&j->error, msg);
    return 1;
}

/* Write the pending results to the registry in one transaction (its commit deferred, as
 * ops.h says, and flushed by ops_flush_due and ops_flush_all). The connection is the
 * parent's own, opened at the first batch, after the workers were forked. Returns how many
 * tenants turned failed. */
static int record_batch(run *r)
{
    ops_env *e = r->e;
    int turned = 0;
    r->recorded_ms = clock_mono_ms();
    if (r->npend == 0)
        return 0;
    char err[600] = "";
    int rc = TN_OK;
    if (e->reg == NULL) {
        rc = registry_open(e->tc->registry_uri, e->tc->gen_path, &e->reg, err, sizeof(err));
        if (rc == TN_OK)
            rc = registry_defer_sync(e->reg, err, sizeof(err));
        r->flushed_ms = clock_mono_ms();
    }
    registry_migration_update *u = calloc((size_t)r->npend, sizeof(*u));
    ops_hook_item *hooks = calloc((size_t)r->npend, sizeof(*hooks));
    char (*payloads)[2 * MIGRATE_VERSION_MAX + 24] = calloc((size_t)r->npend, sizeof(*payloads));
    int nhooks = 0;
    if (rc == TN_OK && (u == NULL || hooks == NULL || payloads == NULL)) {
        rc = tn_errf(err, sizeof(err), TN_NOMEM, "out of memory");
    }
    if (rc == TN_OK) {
        for (int i = 0; i < r->npend; i++) {
            const job *j = &r->l->v[r->pend[i]];
            u[i] = (registry_migration_update){j->slug, j->to, j->error ? j->error : "", 0};
        }
        rc = registry_set_migrations(e->reg, u, r->npend, err, sizeof(err));
    }
    for (int i = 0; i < r->npend; i++) {
        job *j = &r->l->v[r->pend[i]];
        if (rc != TN_OK && e->reg != NULL && u != NULL) {
            /* The batch failed as a whole: one by one, so that only a tenant whose own row
             * cannot be written is reported (as it was when each tenant wrote its own). */
            char one[600];
            int orc = registry_set_migration(e->reg, j->slug, u[i].version, u[i].last_error,
                                             one, sizeof(one));
            if (orc != TN_OK)
                turned += record_failed(j, one);
        } else if (rc != TN_OK) {
            turned += record_failed(j, err);
        } else if (u[i].rc == TN_NOTFOUND) {
            char why[200];
            tn_errf(why, sizeof(why), u[i].rc, "no tenant '%s'", j->slug);
            turned += record_failed(j, why);
        } else if (j->status == OPS_M_MIGRATED) {
            snprintf(payloads[nhooks], sizeof(payloads[nhooks]), "{\"from\":\"%s\",\"to\":\"%s\"}",
                     j->from, j->to);
            hooks[nhooks] = (ops_hook_item){j->slug, j->id, payloads[nhooks]};
            nhooks++;
        }
    }
    /* the batch's hooks in one transaction of their own, after its records committed */
    ops_hooks_told(e, hooks, nhooks, "migrated");
    free(hooks);
    free(payloads);
    free(u);
    r->npend = 0;
    if (e->reg != NULL)
        ops_flush_due(e->reg, &r->flushed_ms);
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
    return j->status == OPS_M_FAILED;
}

/* After the workers got their next tenants: a batch that is due is written while they
 * work. A tenant it turns failed is counted there. */
static int record_due(void *ctx)
{
    run *r = ctx;
    if (r->npend >= REG_BATCH || clock_mono_ms() - r->recorded_ms >= OPS_FLUSH_MS)
        return record_batch(r);
    return 0;
}

static void lost_job(void *ctx, int idx, const char *why)
{
    run *r = ctx;
    r->l->v[idx].status = OPS_M_FAILED;
    set_text(&r->l->v[idx].error, why);
}

static void job_outcome(void *ctx, int idx, ops_progress *p)
{
    const job *j = &((run *)ctx)->l->v[idx];
    p->slug = j->slug;
    p->outcome = status_names[j->status];
    p->error = j->error;
}

/* A second signal kills the workers: the transaction of the file in hand rolls back. */
static const ops_runner_ops migrate_ops = {
    .result_size = sizeof(wire_result),
    .worker_begin = worker_begin,
    .work = worker_task,
    .worker_end = worker_end,
    .take = take_result,
    .lost = lost_job,
    .outcome = job_outcome,
    .idle = record_due,
    .hard_signal = SIGKILL,
};


/* ---- migrate status ------------------------------------------------------------------------------- */

int ops_migrate_status(ops_env *e, char *latest, size_t latestlen, ops_version_fn fn,
                       void *ctx, char *err, size_t errlen)
{
    migration_set *set = NULL;
    int rc = ops_migrations_load(e, &set, err, errlen);
    if (rc != TN_OK)
        return rc;
    snprintf(latest, latestlen, "%s", migrate_latest(set));
    migrate_free(set);
    rc = registry_migration_status(e->reg, fn, ctx);
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "cannot read the migration status: %s", tn_rc_str(rc));
    return TN_OK;
}

/* ---- ops_migrate ----------------------------------------------------------------------------------- */

static int collect(ops_env *e, const ops_migrate_opts *o, job_list *l, char *err, size_t errlen)
{
    int rc = TN_OK;
    if (o->all) {
        /* Keyset pages of PAGE tenants: one query each, no per-tenant lookups. */
        page_ctx p = {l, ""};
        char after[128] = "";
        int got;
        do {
            got = 0;
            rc = registry_migration_list(e->reg, after, PAGE, all_cb, &p, &got);
            snprintf(after, sizeof(after), "%s", p.last);
        } while (rc == TN_OK && got == PAGE);
        if (rc != TN_OK || l->oom)
            return tn_errf(err, errlen, l->oom ? TN_NOMEM : rc, "cannot list the tenants: %s",
                           l->oom ? "out of memory" : tn_rc_str(rc));
        return TN_OK;
    }
    for (int i = 0; i < o->nslugs; i++) {
        bool dup = false;
        for (int k = 0; k < l->n && !dup; k++)
            dup = strcmp(l->v[k].slug, o->slugs[i]) == 0;
        if (dup)
            continue;
        one_ctx one = {l, err, errlen, TN_OK};
        rc = registry_migration_get(e->reg, o->slugs[i], one_cb, &one);
        if (one.rc != TN_OK)
            return one.rc;
        if (rc == TN_NOTFOUND)
            return tn_errf(err, errlen, rc, "no tenant '%s'", o->slugs[i]);
        if (rc != TN_OK || l->oom)
            return tn_errf(err, errlen, l->oom ? TN_NOMEM : rc, "cannot read tenant '%s': %s",
                           o->slugs[i], l->oom ? "out of memory" : tn_rc_str(rc));
    }
    return TN_OK;
}

/* The jobs into the caller's report: the strings change hands. */
static void fill_report(ops_migrate_report *rep, job_list *l)
{
    for (int i = 0; i < l->n; i++) {
        job *j = &l->v[i];
        if (j->status == OPS_M_PENDING || j->status == OPS_M_RUNNING)
            j->status = OPS_M_SKIPPED;
        ops_migrated *m = &rep->v[i];
        m->slug = j->slug;
        m->status = j->status;
        snprintf(m->from, sizeof(m->from), "%s", j->from);
        snprintf(m->to, sizeof(m->to), "%s", j->to);
        m->applied = j->applied;
        m->ms = j->ms;
        m->error = j->error;
        m->warning = j->warning;
        m->nwarnings = j->nwarnings;
        rep->count[j->status]++;
        j->slug = j->error = j->warning = NULL;
    }
    rep->n = l->n;
    memcpy(rep->left_out, l->left_out, sizeof(rep->left_out));
}

void ops_migrate_report_free(ops_migrate_report *r)
{
    if (r == NULL)
        return;
    for (int i = 0; i < r->n; i++) {
        free(r->v[i].slug);
        free(r->v[i].error);
        free(r->v[i].warning);
    }
    free(r->v);
    free(r);
}

int ops_migrate(ops_env *e, const ops_migrate_opts *o, ops_migrate_report **out, char *err,
                size_t errlen)
{
    *out = NULL;
    const tenancy_config *tc = e->tc;
    if (tc->migrations == NULL || tc->migrations[0] == '\0')
        return tn_errf(err, errlen, TN_INVALID,
                       "storage.migrations is not set in %s: nothing to apply",
                       e->conf_path ? e->conf_path : "the configuration");
    int jobs = o->jobs > 0 ? o->jobs : OPS_MIGRATE_JOBS;
    if (jobs > OPS_JOBS_MAX)
        jobs = OPS_JOBS_MAX;
    migration_set *set = NULL;
    job_list l;
    memset(&l, 0, sizeof(l));
    run r;
    memset(&r, 0, sizeof(r));
    ops_migrate_report *rep = NULL;
    int rc = ops_migrations_load(e, &set, err, errlen);
    if (rc != TN_OK)
        goto done;
    rc = collect(e, o, &l, err, errlen);
    if (rc != TN_OK)
        goto done;
    rep = calloc(1, sizeof(*rep));
    r.pend = calloc((size_t)(l.n > 0 ? l.n : 1), sizeof(*r.pend));
    if (rep != NULL)
        rep->v = calloc((size_t)(l.n > 0 ? l.n : 1), sizeof(*rep->v));
    if (rep == NULL || rep->v == NULL || r.pend == NULL) {
        rc = tn_errf(err, errlen, TN_NOMEM, "out of memory");
        goto done;
    }
    r.e = e;
    r.l = &l;
    r.set = set;
    /* The workers open their own connections: the parent's must not be inherited in use. */
    registry_close(e->reg);
    e->reg = NULL;

    char why[512] = "";
    ops_preload_drivers(tc);
    rc = ops_runner_start(&r.j, &migrate_ops, &r, l.n, jobs, e->progress, e->progress_ctx, why,
                          sizeof(why));
    r.recorded_ms = clock_mono_ms();
    if (rc == TN_OK && l.n > 0) {
        if (o->canary > 0 && o->canary < l.n) {
            ops_runner_run(&r.j, o->canary, o->stop_on_error);
            r.j.failed += record_batch(&r);   /* the canaries' registry copies count too */
            if (r.j.failed > 0 && r.j.stopped == NULL)
                r.j.stopped = "a canary failed";
        }
        if (r.j.stopped == NULL)
            ops_runner_run(&r.j, l.n, o->stop_on_error);
        if (r.j.stopped == NULL && r.j.next < l.n)
            r.j.stopped = "no worker left";   /* every worker died */
    }
    ops_runner_finish(&r.j);
    r.j.failed += record_batch(&r);
    if (rc != TN_OK) {
        rc = tn_errf(err, errlen, rc, "cannot start the workers: %s", why);
        goto done;
    }
    /* The registry commits were deferred: one flush makes them durable before anything is
     * reported. */
    rep->flush_rc = r.j.done > 0 ? ops_flush_all(e, rep->flush_err, sizeof(rep->flush_err))
                                 : TN_OK;
    rep->seconds = (double)(clock_mono_ms() - r.j.t0) / 1000.0;
    rep->stopped = r.j.stopped;
    rep->jobs = r.j.nworkers;
    rep->done = r.j.done;
    snprintf(rep->latest, sizeof(rep->latest), "%s", migrate_latest(set));
    rep->files = migrate_count(set);
    fill_report(rep, &l);
    *out = rep;
    rep = NULL;
done:
    free(r.pend);
    ops_migrate_report_free(rep);
    free_jobs(&l);
    migrate_free(set);
    return rc;
}

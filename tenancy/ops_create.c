/*
 * ops_create.c — ops_create and ops_create_bulk (see ops.h): a new tenant and its storage.
 * `tenancy tenant create` (cli/tenant.c) and the panel's create (admin/actions.c) call it.
 *
 * The steps that give a new tenant its storage:
 *
 *   1. the registry entry, in state provisioning (the host answers 503 for it meanwhile),
 *      with its placement and storage name (placement_storage_name) fixed from the start;
 *   2. the storage: target_create, or a clone of storage.template's (from_template);
 *   3. the migrations (storage.migrations), then 4. the seed (storage.seed): in ONE
 *      transaction for a storage made in step 2 (migrate_provision), each file in its own and
 *      the seed in one more for a clone;
 *   5. the version recorded and the state set, in one registry transaction.
 *
 * All or nothing: when a step fails (or SIGINT/SIGTERM/SIGHUP arrives: the signal is held
 * until the running step ends), the storage this operation created is dropped and the
 * registry entry removed, and the message names the step. A storage that was already there
 * is never dropped: it is not ours.
 *
 * ops_create_bulk runs the same steps (provision_tenant: one function for both) for each
 * tenant on the parallel runner (ops_runner.c): N forked workers, each keeping its registry
 * connection and, in schema mode, one server connection for all its tenants
 * (provision_keep), so a tenant costs no process start and no new backend. Each tenant
 * stays its own unit: a failing one is undone alone and reported; the run goes on.
 *
 * Must not: check what the registry checks (slugs, domains, limits: its message is the one
 * returned), or print.
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
#include "tenancy/lookup.h"
#include "tenancy/placement.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- provisioning (the create path) -------------------------------------------------------- */

/* What every tenant of one command gets, made before anything is created. */
struct ops_plan {
    const placement *placement;
    migration_set *set;          /* storage.migrations (maybe empty) */
    char *seed_sql;              /* storage.seed, NULL when none or --no-seed */
    char seed_path[4096];
    bool from_template, no_seed;
    int final_state;             /* active, or provisioning with --state provisioning */
    tenant_rec *tpl;             /* storage.template's entry (--from-template) */
    storage_target tpl_target;
};
typedef struct ops_plan provision_plan;

/* One tenant: its storage, and what happened. */
typedef struct provision {
    const provision_plan *plan;
    char storage[4096];          /* its storage name (placement_storage_name) */
    storage_target target;
    int64_t id;
    bool cloned, replayed;       /* replayed: --from-template in schema mode */
    bool inline_schema;          /* schema and role made inside the migrations' transaction */
    ops_verifiers verifiers;  /* the tenant role's and group login's passwords (rolekey.h) */
    migrate_result mr;
    bool seeded;
    int64_t ms;
} provision;

/* What a process keeps from one tenant to the next (create --from-file): in schema mode its
 * one connection to the placement's server, re-scoped per tenant between transactions (the
 * schema scope is per transaction: db.h), and replaced once its backend's memory reaches
 * placement.NAME.max_backend_memory, or after max_tenants schemas when that is set or the
 * memory cannot be read (membound_run_count: a backend's catalog cache grows with every
 * schema it touches). A single create keeps nothing. */
typedef struct provision_keep {
    tn_db *db;
    size_t served;
    int max_tenants;   /* placement.NAME.max_tenants (0: not set) */
    membound mem;
} provision_keep;

void ops_plan_free(provision_plan *p)
{
    if (p == NULL)
        return;
    migrate_free(p->set);
    free(p->seed_sql);
    free(p->tpl);
    free(p);
}

/* Everything that can be refused for all tenants alike is refused here, before the registry
 * or a storage is touched: the placement, the migration folder, the seed, the template. */
static int provision_prepare(ops_env *e, const char *pname, provision_plan *p, char *err,
                             size_t errlen)
{
    const tenancy_config *tc = e->tc;
    char why[1024];
    if (pname == NULL)
        pname = tc->default_placement;
    p->placement = tenancy_placement(tc, pname);
    if (p->placement == NULL)
        return tn_errf(err, errlen, TN_NOTFOUND, "no placement '%s' (sqlite, or one declared "
                       "with placement.%s.dsn in tenancyd.conf)", pname, pname);
    int rc = ops_migrations_load(e, &p->set, err, errlen);
    if (rc != TN_OK)
        return rc;
    if (!p->no_seed && tc->seed != NULL && tc->seed[0] != '\0') {
        ops_conf_path(e, tc->seed, p->seed_path, sizeof(p->seed_path));
        rc = migrate_read_file(p->seed_path, &p->seed_sql, why, sizeof(why));
        if (rc != TN_OK)
            return tn_errf(err, errlen, rc, "storage.seed: %s", why);
    }
    if (p->from_template) {
        const char *ts = tc->template_slug;
        if (ts == NULL || ts[0] == '\0')
            return tn_errf(err, errlen, TN_INVALID, "--from-template: storage.template is not "
                           "set in tenancyd.conf");
        rc = registry_fetch(e->reg, LK_SLUG, ts, &p->tpl);
        if (rc == TN_NOTFOUND)
            return tn_errf(err, errlen, rc, "storage.template: no tenant '%s'", ts);
        if (rc != TN_OK)
            return tn_errf(err, errlen, rc, "storage.template: cannot read tenant '%s'", ts);
        if (p->tpl->storage == NULL || p->tpl->storage[0] == '\0')
            return tn_errf(err, errlen, TN_INVALID, "storage.template: tenant '%s' has no "
                           "storage", ts);
        if (strcmp(p->tpl->placement, pname) != 0)
            return tn_errf(err, errlen, TN_INVALID, "storage.template: tenant '%s' is in "
                           "placement '%s', the new tenant in '%s'", ts, p->tpl->placement,
                           pname);
        if (placement_target(tc, p->tpl, &p->tpl_target) != TN_OK)
            return tn_errf(err, errlen, TN_NOTFOUND, "storage.template: the placement of '%s' "
                           "is not configured here", ts);
        p->tpl_target.statement_timeout_ms = 0;   /* a clone may take longer than a request */
    }
    return TN_OK;
}

int ops_create_prepare(ops_env *e, const ops_create_opts *o, ops_plan **out, char *err,
                       size_t errlen)
{
    *out = NULL;
    provision_plan *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    p->final_state = o->final_state;
    p->from_template = o->from_template;
    p->no_seed = o->no_seed;
    int rc = provision_prepare(e, o->placement, p, err, errlen);
    if (rc != TN_OK) {
        ops_plan_free(p);
        return rc;
    }
    *out = p;
    return TN_OK;
}

const char *ops_plan_placement(const ops_plan *p)
{
    return p->placement->name;
}

const char *ops_plan_kind(const ops_plan *p)
{
    return target_kind_name(p->placement->kind);
}

const char *ops_plan_latest(const ops_plan *p)
{
    return migrate_latest(p->set);
}

const char *ops_plan_template(const ops_plan *p)
{
    return p->from_template ? p->tpl->slug : NULL;
}

/* SIGINT, SIGTERM and SIGHUP only set a flag while a tenant is provisioned: the running step
 * ends, then everything is undone (a signal's default action would leave a tenant half made).
 * A signal ignored on entry stays ignored: a worker of create --from-file ignores SIGINT
 * (its parent decides) and finishes the tenant in hand. */
static volatile sig_atomic_t interrupted;
static void on_signal(int sig) { interrupted = sig; }

static const int held_signals[] = {SIGINT, SIGTERM, SIGHUP};

static void hold_signals(struct sigaction *old)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    interrupted = 0;
    for (size_t i = 0; i < TN_ARRAY_LEN(held_signals); i++) {
        sigaction(held_signals[i], NULL, &old[i]);
        if (old[i].sa_handler != SIG_IGN)
            sigaction(held_signals[i], &sa, NULL);
    }
}

/* Whether to take the next step: the previous ones succeeded and no signal came. The step is
 * named either way, so a failure message says what was not done. */
static bool next_step(int *rc, const char **step, const char *name, char *why, size_t whylen)
{
    if (*rc != TN_OK)
        return false;
    *step = name;
    if (interrupted != 0) {
        *rc = tn_errf(why, whylen, TN_ERR, "interrupted by signal %d", (int)interrupted);
        return false;
    }
    return true;
}

/* The caller's dispositions back. A caller with a handler of its own (a panel's worker,
 * whose SIGTERM means "stop after this request") gets the signal that was held: without
 * that it would never learn of it. A default or ignored disposition is left alone: the
 * command reports the interruption in its message and exits. */
static void release_signals(const struct sigaction *old)
{
    int held = (int)interrupted;
    for (size_t i = 0; i < TN_ARRAY_LEN(held_signals); i++) {
        sigaction(held_signals[i], &old[i], NULL);
        bool own = (old[i].sa_flags & SA_SIGINFO) ||
                   (old[i].sa_handler != SIG_DFL && old[i].sa_handler != SIG_IGN);
        if (held == held_signals[i] && own)
            raise(held);
    }
}

/* The storage's folder and file to the workers' user when root provisions (SQLite). */
static int give_storage(ops_env *e, const provision *p, char *err, size_t errlen)
{
    uid_t uid;
    gid_t gid;
    if (p->target.kind != TARGET_SQLITE)
        return TN_OK;
    int rc = ops_workers_owner(e, &uid, &gid, err, errlen);
    if (rc != TN_OK || uid == (uid_t)-1)
        return rc;
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", p->storage);
    char *slash = strrchr(dir, '/');
    if (slash != NULL && slash != dir) {
        *slash = '\0';
        rc = ops_give(dir, uid, gid, true, err, errlen);
    }
    return rc == TN_OK ? ops_give(p->storage, uid, gid, true, err, errlen) : rc;
}

/* Can keep's connection serve the next tenant (schema mode)? */
static bool keep_reusable(const provision_keep *keep)
{
    return keep != NULL && keep->db != NULL &&
           keep->served < membound_run_count(&keep->mem, keep->max_tenants) &&
           db_is_clean(keep->db);
}

/* The connection to the new storage: keep's (re-scoped) in schema mode when there is one,
 * else a new one (kept in keep when keep is given; target_open checks that the storage is
 * there, so a schema made inside the provisioning transaction needs keep_reusable). */
static int storage_open(provision *p, provision_keep *keep, tn_db **db, char *err,
                        size_t errlen)
{
    if (keep == NULL || p->target.kind != TARGET_PG_SCHEMA)
        return target_open(&p->target, db, err, errlen);
    /* A schema made inline does not exist yet, nor maybe its role: the script that makes
     * them sets the role itself (target_schema_create_sql). */
    const char *role = p->inline_schema ? NULL : p->target.role;
    if (keep->db != NULL && (!keep_reusable(keep) ||
                             db_set_scope(keep->db, p->target.name, role) != TN_OK)) {
        db_close(keep->db);
        keep->db = NULL;
    }
    if (keep->db == NULL) {
        int rc = target_open(&p->target, &keep->db, err, errlen);
        if (rc != TN_OK) {
            keep->db = NULL;
            return rc;
        }
        keep->served = 0;
        membound_reset(&keep->mem);
    }
    keep->served++;
    *db = keep->db;
    return TN_OK;
}

/* A migration or seed failure as the create message gives it: file, statement, line.
 * Returns rc, the failure's code. */
static int migrate_why(int rc, const migrate_error *e, char *why, size_t len)
{
    if (e->statement > 0)
        return tn_errf(why, len, rc, "%s statement %d (line %d): %s", e->file, e->statement,
                       e->line, e->message);
    return tn_errf(why, len, rc, "%s%s%s", e->file, e->file[0] ? ": " : "", e->message);
}

/* Steps 2-5 for a tenant whose registry entry exists (state provisioning). TN_OK, or the
 * failing step's code with msg (the whole sentence: step, reason, what was undone). */
static int provision_run(ops_env *e, const registry_new *n, provision *p,
                         provision_keep *keep, char *msg, size_t msglen)
{
    const provision_plan *pl = p->plan;
    char err[1024] = "", why[1400] = "";
    const char *step = "create the storage";
    bool created = false;
    int rc = TN_OK;
    tn_db *db = NULL;
    struct sigaction old[TN_ARRAY_LEN(held_signals)];
    hold_signals(old);
    int64_t t0 = clock_mono_ms();

    /* Schema mode with a kept connection: a worker's first (or renewed) connection is one
     * to the server, opened here with no scope, so its first schema is made inline too. If
     * that fails, the steps below open their own and say why. */
    if (keep != NULL && p->target.kind == TARGET_PG_SCHEMA && keep_reusable(keep)) {
        /* between two tenants (the read unscopes it; storage_open scopes it again) */
        membound_set_max(&keep->mem, p->target.max_backend_bytes);
        if (membound_check(&keep->mem, keep->db, keep->served, POOL_PG_MEMORY_EVERY) ==
            MEMBOUND_REACHED) {
            db_close(keep->db);
            keep->db = NULL;
        }
    }
    if (keep != NULL && p->target.kind == TARGET_PG_SCHEMA && !keep_reusable(keep)) {
        db_close(keep->db);
        (void)target_connect(&p->target, &keep->db, err, sizeof(err));   /* NULL on failure */
        keep->served = 0;
        membound_reset(&keep->mem);
    }
    tn_db *kept = keep != NULL ? keep->db : NULL;

    /* The seed's parameters ($1 slug, $2 name, $3 id) and its name in messages. */
    char id[24];
    snprintf(id, sizeof(id), "%lld", (long long)p->id);
    const char *vals[] = {n->slug, n->name, id};
    const char *seed_label = strrchr(pl->seed_path, '/');
    seed_label = seed_label != NULL ? seed_label + 1 : pl->seed_path;

    /* Schema mode on the kept connection: CREATE SCHEMA goes into the transaction of the
     * migrations and the seed (migrate_provision's prelude), one commit in all. */
    char create_sql[4096];
    bool inline_schema = keep_reusable(keep) && p->target.kind == TARGET_PG_SCHEMA &&
                         migrate_count(pl->set) > 0 &&
                         target_schema_create_sql(&p->target, create_sql, sizeof(create_sql)) ==
                             TN_OK;
    p->inline_schema = inline_schema;
    if (pl->from_template && p->target.kind != TARGET_PG_SCHEMA) {
        rc = migrate_clone(&pl->tpl_target, &p->target, err, sizeof(err));
        p->cloned = rc == TN_OK;
    } else {
        p->replayed = pl->from_template;   /* schema mode: no clone in PostgreSQL */
        if (!inline_schema)
            rc = target_create_on(kept, &p->target, err, sizeof(err));
    }
    created = rc == TN_OK && !inline_schema;   /* TN_EXISTS: someone else's, left alone */
    if (rc == TN_OK)
        rc = give_storage(e, p, err, sizeof(err));
    if (rc != TN_OK)
        str_copy(why, sizeof(why), err);

    if (next_step(&rc, &step, "open the storage", why, sizeof(why))) {
        rc = storage_open(p, keep, &db, err, sizeof(err));
        if (rc != TN_OK)
            str_copy(why, sizeof(why), err);
    }
    /* A storage this command made is empty: its migrations and seed go in one transaction
     * (migrate_provision). A clone, or a storage that was there, takes the usual steps. */
    bool fresh = (created || inline_schema) && !p->cloned && migrate_count(pl->set) > 0;
    if (fresh && next_step(&rc, &step, "apply the migrations", why, sizeof(why))) {
        rc = migrate_provision(db, inline_schema ? create_sql : NULL, pl->set, seed_label,
                               pl->seed_sql, 3, vals, &p->mr);
        p->seeded = rc == TN_OK && pl->seed_sql != NULL;
        if (rc != TN_OK) {
            const migrate_error *me = &p->mr.error;
            if (p->mr.seed_failed)
                step = "run the seed";
            if (p->mr.prelude_failed) {
                /* ours was rolled back: a schema there now is someone else's */
                bool exists = false;
                step = "create the storage";
                if (target_exists(&p->target, &exists, err, sizeof(err)) == TN_OK && exists)
                    rc = tn_errf(why, sizeof(why), TN_EXISTS, "the %s %s already exists",
                                 target_kind_name(p->target.kind), p->target.name);
                else
                    str_copy(why, sizeof(why), me->message);
            } else {
                rc = migrate_why(rc, me, why, sizeof(why));
            }
        }
    }
    if (!fresh && (migrate_count(pl->set) > 0 || p->cloned) &&
        next_step(&rc, &step, "apply the migrations", why, sizeof(why))) {
        rc = migrate_apply(db, pl->set, &p->mr);
        if (rc != TN_OK)
            rc = migrate_why(rc, &p->mr.error, why, sizeof(why));
    }
    if (!fresh && pl->seed_sql != NULL &&
        next_step(&rc, &step, "run the seed", why, sizeof(why))) {
        migrate_error me;
        rc = migrate_seed(db, seed_label, pl->seed_sql, 3, vals, &me);
        p->seeded = rc == TN_OK;
        if (rc != TN_OK)
            rc = migrate_why(rc, &me, why, sizeof(why));
    }
    if (keep != NULL && db != NULL && db == keep->db) {
        if (!db_is_clean(db)) {   /* a broken connection is not reused */
            db_close(db);
            keep->db = NULL;
        }
    } else {
        db_close(db);
    }
    db = NULL;
    /* Once recorded the tenant is complete: a signal after that changes nothing. */
    if (next_step(&rc, &step, "record it in the registry", why, sizeof(why))) {
        rc = registry_provisioned(e->reg, n->slug, p->mr.to, pl->final_state, err, sizeof(err));
        if (rc != TN_OK)
            str_copy(why, sizeof(why), err);
    }
    p->ms = clock_mono_ms() - t0;
    if (rc == TN_OK) {
        release_signals(old);
        return TN_OK;
    }

    /* Undo: the storage this command made, then the registry entry. */
    char undo[1200] = "";
    char e2[512];
    if (created && target_drop_on(keep != NULL ? keep->db : NULL, &p->target, e2,
                                  sizeof(e2)) != TN_OK)
        snprintf(undo, sizeof(undo), "; its storage %.500s could not be dropped (%s): drop it "
                                     "by hand", p->storage, e2);
    if (registry_purge(e->reg, n->slug, e2, sizeof(e2)) != TN_OK)
        snprintf(undo + strlen(undo), sizeof(undo) - strlen(undo),
                 "; its registry entry could not be removed (%s): 'tenancy tenant show %s'",
                 e2, n->slug);
    release_signals(old);
    if (undo[0] == '\0')
        snprintf(undo, sizeof(undo), created ? "; its storage was dropped and its registry "
                                               "entry removed"
                                             : "; its registry entry was removed");
    return tn_errf(msg, msglen, rc,
                   "tenant '%s' not created: cannot %s: %s%s", n->slug, step, why, undo);
}

/* One tenant, start to end — the one function of both `tenant create SLUG` and each line of
 * `tenant create --from-file`: its storage name (fixed from the start), the registry entry in
 * state provisioning (the host answers 503 for it meanwhile), then provision_run. All or
 * nothing. n->placement, n->storage and n->state are set here. TN_OK, or the code with msg. */
static int provision_tenant(ops_env *e, registry_new *n, provision *p, provision_keep *keep,
                            char *msg, size_t msglen)
{
    const provision_plan *pl = p->plan;
    const tenancy_config *tc = e->tc;
    const char *pname = pl->placement->name;
    if (placement_storage_name(tc, pl->placement, n->slug, p->storage, sizeof(p->storage)) !=
        TN_OK) {
        return tn_errf(msg, msglen, TN_TOOBIG, "the storage name of '%s' is too long", n->slug);
    }
    if (placement_target_of(tc, pname, p->storage, NULL, &p->target) != TN_OK) {
        return tn_errf(msg, msglen, TN_INVALID, "placement '%s' cannot be used", pname);
    }
    p->target.statement_timeout_ms = 0;   /* a migration may take longer than a request */
    ops_role_verifier(tc, &p->target, &p->verifiers);
    n->state = TENANT_PROVISIONING;       /* until its storage is ready */
    n->placement = pname;
    n->storage = p->storage;
    int rc = registry_create(e->reg, n, &p->id, msg, msglen);
    /* A group target's storage is made by the dsn's user (which may make roles and schemas)
     * and filled through its group login (the dsn's user holds the role only while it makes
     * it, see target.h): no connection of the one kind serves both, so none is kept. */
    if (p->target.group_role != NULL)
        keep = NULL;
    return rc == TN_OK ? provision_run(e, n, p, keep, msg, msglen) : rc;
}

int ops_create(ops_env *e, const ops_plan *plan, registry_new *n, ops_created *out, char *err,
               size_t errlen)
{
    provision *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    p->plan = plan;
    int rc = provision_tenant(e, n, p, NULL, err, errlen);
    if (rc == TN_OK)
        ops_hook_told(e, n->slug, "created", NULL);
    memset(out, 0, sizeof(*out));
    out->id = p->id;
    snprintf(out->storage, sizeof(out->storage), "%s", p->storage);
    out->kind = target_kind_name(p->target.kind);
    out->mr = p->mr;
    out->seeded = p->seeded;
    out->cloned = p->cloned;
    out->replayed = p->replayed;
    out->ms = p->ms;
    free(p);
    return rc;
}

/* ---- bulk ------------------------------------------------------------------------------------- */

static const char *const bulk_status[] = {"pending", "created", "failed", "skipped"};

const char *ops_bstatus_name(int status)
{
    return status >= 0 && status < OPS_B_NSTATUS ? bulk_status[status] : "?";
}

typedef struct bulk {
    ops_env *e;
    const registry_new *tpl;     /* state, max_workers, settings for every tenant */
    const provision_plan *plan;
    ops_bulk_item *v;
    int n;
    int *task;                   /* task index -> line index (lines not refused on reading) */
    int ntasks;
    /* in a worker */
    provision_keep keep;
    int open_rc;
    char open_err[1024];
    int64_t flushed_ms;          /* when this worker last flushed the registry */
    ops_runner j;
} bulk;

typedef struct bulk_result {
    int32_t idx;
    int32_t rc;                  /* TN_OK: created */
    int32_t applied, nwarnings, seeded;
    int64_t id, ms;
    char version[MIGRATE_VERSION_MAX];
    char error[1100];
    char warning[256];
} bulk_result;

_Static_assert(sizeof(bulk_result) <= OPS_RESULT_MAX, "a result must fit in PIPE_BUF");

static void set_text(char **dst, const char *s)
{
    free(*dst);
    *dst = s != NULL && s[0] != '\0' ? strdup(s) : NULL;
}

static void line_fail(ops_bulk_item *l, int rc, const char *msg)
{
    l->status = OPS_B_FAILED;
    l->rc = rc;
    set_text(&l->error, msg);
}

static const ops_bulk_item *sort_base;
static int by_slug(const void *x, const void *y)
{
    int i = *(const int *)x, k = *(const int *)y;
    int d = strcmp(sort_base[i].slug, sort_base[k].slug);
    return d != 0 ? d : i - k;
}

/* A slug given twice in the file: the later lines are refused (the registry refuses one that
 * exists already, with its own message). Sorted, not compared pairwise: files are large. */
static int bulk_refuse_duplicates(bulk *b)
{
    int *ord = malloc((size_t)(b->n > 0 ? b->n : 1) * sizeof(*ord));
    if (ord == NULL)
        return TN_NOMEM;
    for (int i = 0; i < b->n; i++)
        ord[i] = i;
    sort_base = b->v;
    qsort(ord, (size_t)b->n, sizeof(*ord), by_slug);
    for (int i = 1; i < b->n; i++) {
        const ops_bulk_item *first = &b->v[ord[i - 1]];
        ops_bulk_item *l = &b->v[ord[i]];
        if (strcmp(first->slug, l->slug) != 0 || l->slug[0] == '\0')
            continue;
        int at = first->line;
        for (int k = i - 1; k > 0 && strcmp(b->v[ord[k - 1]].slug, l->slug) == 0; k--)
            at = b->v[ord[k - 1]].line;
        char msg[300];
        int rc = tn_errf(msg, sizeof(msg), TN_EXISTS,
                         "tenant '%.200s' is given twice: already on line %d", l->slug, at);
        if (l->status == OPS_B_PENDING)
            line_fail(l, rc, msg);
    }
    free(ord);
    return TN_OK;
}

static void bulk_worker_begin(void *ctx)
{
    bulk *b = ctx;
    const tenancy_config *tc = b->e->tc;
    const placement *pl = b->plan->placement;
    b->keep.max_tenants = pl->max_tenants;
    membound_set_max(&b->keep.mem, pl->max_backend_memory);
    b->open_rc = registry_open(tc->registry_uri, tc->gen_path, &b->e->reg, b->open_err,
                               sizeof(b->open_err));
    if (b->open_rc == TN_OK)
        b->open_rc = registry_defer_sync(b->e->reg, b->open_err, sizeof(b->open_err));
    b->flushed_ms = clock_mono_ms();
}

static bool bulk_work(void *ctx, int idx, void *result)
{
    bulk *b = ctx;
    bulk_result *r = result;
    const ops_bulk_item *l = &b->v[b->task[idx]];
    if (b->open_rc != TN_OK) {
        r->rc = tn_errf(r->error, sizeof(r->error), b->open_rc,
                        "the worker cannot open the registry: %s", b->open_err);
        return true;
    }
    registry_new n = *b->tpl;
    n.slug = l->slug;
    n.name = l->name;
    n.domains = l->domains;
    n.ndomains = l->nd;
    provision p;
    memset(&p, 0, sizeof(p));
    p.plan = b->plan;
    r->rc = provision_tenant(b->e, &n, &p, &b->keep, r->error, sizeof(r->error));
    r->id = p.id;
    r->ms = p.ms;
    r->applied = p.mr.applied;
    r->seeded = p.seeded;
    r->nwarnings = p.mr.nwarnings;
    snprintf(r->version, sizeof(r->version), "%s", p.mr.to);
    if (p.mr.nwarnings > 0)
        snprintf(r->warning, sizeof(r->warning), "%s", p.mr.warnings[0]);
    if (r->rc == TN_OK) {
        r->error[0] = '\0';
        /* in the worker: its progress callback is the parent's, so a failure is kept as
         * the tenant's warning */
        char herr[600];
        if (ops_hook(b->e, l->slug, "created", NULL, herr, sizeof(herr)) != TN_OK &&
            r->warning[0] == '\0')
            snprintf(r->warning, sizeof(r->warning), "%.250s", herr);
    }
    ops_flush_due(b->e->reg, &b->flushed_ms);   /* the registry commits: see ops.h */
    return interrupted == 0;   /* SIGTERM undid the tenant in hand: this worker ends */
}

static void bulk_worker_end(void *ctx)
{
    bulk *b = ctx;
    db_close(b->keep.db);
    ops_flush_now(b->e->reg);
    registry_close(b->e->reg);
    b->e->reg = NULL;
}

static bool bulk_take(void *ctx, const void *result)
{
    bulk *b = ctx;
    const bulk_result *r = result;
    ops_bulk_item *l = &b->v[b->task[r->idx]];
    l->id = r->id;
    l->ms = r->ms;
    l->applied = r->applied;
    l->seeded = r->seeded != 0;
    l->nwarnings = r->nwarnings;
    snprintf(l->version, sizeof(l->version), "%s", r->version);
    set_text(&l->warning, r->warning);
    if (r->rc == TN_OK) {
        l->status = OPS_B_CREATED;
        return false;
    }
    line_fail(l, r->rc, r->error);
    return true;
}

static void bulk_lost(void *ctx, int idx, const char *why)
{
    bulk *b = ctx;
    char msg[600];
    ops_bulk_item *l = &b->v[b->task[idx]];
    int rc = tn_errf(msg, sizeof(msg), TN_ERR,
                     "tenant '%.200s': %s; see 'tenancy tenant show %.200s'", l->slug, why,
                     l->slug);
    line_fail(l, rc, msg);
}

/* A second signal sends SIGTERM: each worker undoes the tenant in hand (provision_run holds
 * it until the running step ends), then ends. */
static void bulk_outcome(void *ctx, int idx, ops_progress *p)
{
    const bulk *b = ctx;
    const ops_bulk_item *l = &b->v[b->task[idx]];
    p->slug = l->slug;
    p->outcome = bulk_status[l->status];
    p->error = l->error;
}

static const ops_runner_ops bulk_ops = {
    .result_size = sizeof(bulk_result),
    .worker_begin = bulk_worker_begin,
    .work = bulk_work,
    .worker_end = bulk_worker_end,
    .take = bulk_take,
    .lost = bulk_lost,
    .outcome = bulk_outcome,
    .hard_signal = SIGTERM,
};

int ops_create_bulk(ops_env *e, const ops_plan *plan, const registry_new *tpl,
                    ops_bulk_item *v, int n, int jobs, ops_bulk_report *rep, char *err,
                    size_t errlen)
{
    memset(rep, 0, sizeof(*rep));
    bulk b;
    memset(&b, 0, sizeof(b));
    b.e = e;
    b.tpl = tpl;
    b.plan = plan;
    b.v = v;
    b.n = n;
    if (bulk_refuse_duplicates(&b) != TN_OK ||
        (b.task = malloc((size_t)(n > 0 ? n : 1) * sizeof(int))) == NULL)
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    for (int i = 0; i < n; i++)
        if (v[i].status == OPS_B_PENDING)
            b.task[b.ntasks++] = i;
    /* The workers open their own connections: the parent's must not be inherited. */
    registry_close(e->reg);
    e->reg = NULL;
    char why[512] = "";
    ops_preload_drivers(e->tc);
    int rc = ops_runner_start(&b.j, &bulk_ops, &b, b.ntasks, jobs, e->progress,
                              e->progress_ctx, why, sizeof(why));
    if (rc == TN_OK) {
        ops_runner_run(&b.j, b.ntasks, false);
        if (b.j.stopped == NULL && b.j.next < b.ntasks)
            b.j.stopped = "no worker left";   /* every worker died */
    }
    ops_runner_finish(&b.j);
    free(b.task);
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "cannot start the workers: %s", why);
    /* The workers' registry commits were deferred: one flush for the whole run makes them
     * durable before anything is reported as created. */
    rep->flush_rc = b.j.done > 0 ? ops_flush_all(e, rep->flush_err, sizeof(rep->flush_err))
                                 : TN_OK;
    rep->seconds = (double)(clock_mono_ms() - b.j.t0) / 1000.0;
    rep->jobs = b.j.nworkers;
    rep->stopped = b.j.stopped;
    for (int i = 0; i < n; i++) {
        if (v[i].status == OPS_B_PENDING)
            v[i].status = OPS_B_SKIPPED;
        rep->count[v[i].status]++;
    }
    return TN_OK;
}

void ops_bulk_item_clear(ops_bulk_item *it)
{
    free(it->error);
    free(it->warning);
    it->error = it->warning = NULL;
}

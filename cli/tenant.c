/*
 * tenant.c — the `tenancy tenant ...` commands: create (with the provisioning of the
 * tenant's storage), list, show, the state changes (suspend, resume, maintenance, delete)
 * and set.
 *
 * Owns: turning their arguments into registry calls and printing the result, as a table or
 * `key: value` lines for a human, or one JSON value (cli_int.h); and provisioning, the steps
 * that give a new tenant its storage:
 *
 *   1. the registry entry, in state provisioning (the host answers 503 for it meanwhile),
 *      with its placement and storage name (placement_storage_name) fixed from the start;
 *   2. the storage: target_create, or a clone of storage.template's (--from-template);
 *   3. the migrations (storage.migrations), then 4. the seed (storage.seed): in ONE
 *      transaction for a storage made in step 2 (migrate_provision), each file in its own and
 *      the seed in one more for a clone;
 *   5. the version recorded and the state set, in one registry transaction.
 *
 * All or nothing: when a step fails (or SIGINT/SIGTERM/SIGHUP arrives: the signal is held
 * until the running step ends), the storage this command created is dropped and the registry
 * entry removed, and the message names the step. A storage that was already there is never
 * dropped: it is not ours.
 *
 * `tenant create --from-file FILE -j N` runs the same steps (provision_tenant: one function
 * for both) for each line of FILE on the parallel runner of tenancy/ops_runner.c: N forked workers,
 * each keeping its registry connection and, in schema mode, one server connection for all
 * its tenants (provision_keep), so a tenant costs no process start and no new backend. Each
 * tenant stays its own unit: a failing one is undone alone and reported; the run goes on.
 *
 * Must not: check what the registry checks (slugs, domains, limits: its message is the one
 * shown), or print to stdout before the change succeeded.
 */
#include "core/first.h"
#include "cli/cli_int.h"
#include "core/clock.h"
#include "core/rc.h"
#include "storage/migrate.h"
#include "storage/target.h"
#include "tenancy/lookup.h"
#include "tenancy/ops_runner.h"
#include "tenancy/placement.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CREATE_DOMAINS 64
#define MAX_CREATE_SETTINGS 128

/* ---- provisioning (the create path) -------------------------------------------------------- */

/* What every tenant of one command gets, made before anything is created. */
typedef struct provision_plan {
    const placement *placement;
    migration_set *set;          /* storage.migrations (maybe empty) */
    char *seed_sql;              /* storage.seed, NULL when none or --no-seed */
    char seed_path[4096];
    bool from_template, no_seed;
    int final_state;             /* active, or provisioning with --state provisioning */
    tenant_rec *tpl;             /* storage.template's entry (--from-template) */
    storage_target tpl_target;
} provision_plan;

/* One tenant: its storage, and what happened. */
typedef struct provision {
    const provision_plan *plan;
    char storage[4096];          /* its storage name (placement_storage_name) */
    storage_target target;
    int64_t id;
    bool cloned, replayed;       /* replayed: --from-template in schema mode */
    bool inline_schema;          /* schema and role made inside the migrations' transaction */
    char role_verifier[CLI_VERIFIER_MAX]; /* the tenant role's password (rolekey.h), or "" */
    migrate_result mr;
    bool seeded;
    int64_t ms;
} provision;

/* What a process keeps from one tenant to the next (create --from-file): in schema mode its
 * one connection to the placement's server, re-scoped per tenant between transactions (the
 * schema scope is per transaction: db.h), and replaced after placement.NAME.max_tenants
 * schemas (a backend's catalog cache grows with every schema it touches). A single create
 * keeps nothing. */
typedef struct provision_keep {
    tn_db *db;
    int served, max;
} provision_keep;

static void plan_free(provision_plan *p)
{
    migrate_free(p->set);
    free(p->seed_sql);
    free(p->tpl);
}

/* Everything that can be refused for all tenants alike is refused here, before the registry
 * or a storage is touched: the placement, the migration folder, the seed, the template. */
static int provision_prepare(cli *c, const char *pname, provision_plan *p)
{
    const tenancy_config *tc = &c->cfg->tenancy;
    char err[1024];
    if (pname == NULL)
        pname = tc->default_placement;
    p->placement = tenancy_placement(tc, pname);
    if (p->placement == NULL)
        return cli_fail(c, TN_NOTFOUND, "no placement '%s' (sqlite, or one declared with "
                                         "placement.%s.dsn in tenancyd.conf)", pname, pname);
    ops_env e;
    cli_ops_env(c, &e);
    int rc = ops_migrations_load(&e, &p->set, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    if (!p->no_seed && tc->seed != NULL && tc->seed[0] != '\0') {
        ops_conf_path(&e, tc->seed, p->seed_path, sizeof(p->seed_path));
        rc = migrate_read_file(p->seed_path, &p->seed_sql, err, sizeof(err));
        if (rc != TN_OK)
            return cli_fail(c, rc, "storage.seed: %s", err);
    }
    if (p->from_template) {
        const char *ts = tc->template_slug;
        if (ts == NULL || ts[0] == '\0')
            return cli_fail(c, TN_INVALID, "--from-template: storage.template is not set in "
                                           "tenancyd.conf");
        rc = registry_fetch(c->reg, LK_SLUG, ts, &p->tpl);
        if (rc == TN_NOTFOUND)
            return cli_fail(c, rc, "storage.template: no tenant '%s'", ts);
        if (rc != TN_OK)
            return cli_fail(c, rc, "storage.template: cannot read tenant '%s'", ts);
        if (p->tpl->storage == NULL || p->tpl->storage[0] == '\0')
            return cli_fail(c, TN_INVALID, "storage.template: tenant '%s' has no storage", ts);
        if (strcmp(p->tpl->placement, pname) != 0)
            return cli_fail(c, TN_INVALID, "storage.template: tenant '%s' is in placement '%s', "
                                           "the new tenant in '%s'", ts, p->tpl->placement,
                            pname);
        if (placement_target(tc, p->tpl, &p->tpl_target) != TN_OK)
            return cli_fail(c, TN_NOTFOUND, "storage.template: the placement of '%s' is not "
                                            "configured here", ts);
    }
    return 0;
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
        *rc = TN_ERR;
        snprintf(why, whylen, "interrupted by signal %d", (int)interrupted);
        return false;
    }
    return true;
}

static void release_signals(const struct sigaction *old)
{
    for (size_t i = 0; i < TN_ARRAY_LEN(held_signals); i++)
        sigaction(held_signals[i], &old[i], NULL);
}

/* The storage's folder and file to the workers' user when root provisions (SQLite). */
static int give_storage(cli *c, const provision *p, char *err, size_t errlen)
{
    uid_t uid;
    gid_t gid;
    if (p->target.kind != TARGET_SQLITE)
        return TN_OK;
    int rc = cli_workers_owner(c->cfg, &uid, &gid, err, errlen);
    if (rc != TN_OK || uid == (uid_t)-1)
        return rc;
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", p->storage);
    char *slash = strrchr(dir, '/');
    if (slash != NULL && slash != dir) {
        *slash = '\0';
        rc = cli_give(dir, uid, gid, true, err, errlen);
    }
    return rc == TN_OK ? cli_give(p->storage, uid, gid, true, err, errlen) : rc;
}

/* Can keep's connection serve the next tenant (schema mode)? */
static bool keep_reusable(const provision_keep *keep)
{
    return keep != NULL && keep->db != NULL && keep->served < keep->max &&
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
    }
    keep->served++;
    *db = keep->db;
    return TN_OK;
}

/* A migration or seed failure as the create message gives it: file, statement, line. */
static void migrate_why(const migrate_error *e, char *why, size_t len)
{
    if (e->statement > 0)
        snprintf(why, len, "%s statement %d (line %d): %s", e->file, e->statement, e->line,
                 e->message);
    else
        snprintf(why, len, "%s%s%s", e->file, e->file[0] ? ": " : "", e->message);
}

/* Steps 2-5 for a tenant whose registry entry exists (state provisioning). TN_OK, or the
 * failing step's code with msg (the whole sentence: step, reason, what was undone). */
static int provision_run(cli *c, const registry_new *n, provision *p, provision_keep *keep,
                         char *msg, size_t msglen)
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
    if (keep != NULL && p->target.kind == TARGET_PG_SCHEMA && !keep_reusable(keep)) {
        db_close(keep->db);
        (void)target_connect(&p->target, &keep->db, err, sizeof(err));   /* NULL on failure */
        keep->served = 0;
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
    char create_sql[2048];
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
        rc = give_storage(c, p, err, sizeof(err));
    if (rc != TN_OK)
        snprintf(why, sizeof(why), "%s", err);

    if (next_step(&rc, &step, "open the storage", why, sizeof(why))) {
        rc = storage_open(p, keep, &db, err, sizeof(err));
        if (rc != TN_OK)
            snprintf(why, sizeof(why), "%s", err);
    }
    /* A storage this command made is empty: its migrations and seed go in one transaction
     * (migrate_provision). A clone, or a storage that was there, takes the usual steps. */
    bool fresh = (created || inline_schema) && !p->cloned && migrate_count(pl->set) > 0;
    if (fresh && next_step(&rc, &step, "apply the migrations", why, sizeof(why))) {
        rc = migrate_provision(db, inline_schema ? create_sql : NULL, pl->set, seed_label,
                               pl->seed_sql, 3, vals, &p->mr);
        p->seeded = rc == TN_OK && pl->seed_sql != NULL;
        if (rc != TN_OK) {
            const migrate_error *e = &p->mr.error;
            if (p->mr.seed_failed)
                step = "run the seed";
            if (p->mr.prelude_failed) {
                /* ours was rolled back: a schema there now is someone else's */
                bool exists = false;
                step = "create the storage";
                if (target_exists(&p->target, &exists, err, sizeof(err)) == TN_OK && exists) {
                    rc = TN_EXISTS;
                    snprintf(why, sizeof(why), "the %s %s already exists",
                             target_kind_name(p->target.kind), p->target.name);
                } else {
                    snprintf(why, sizeof(why), "%s", e->message);
                }
            } else {
                migrate_why(e, why, sizeof(why));
            }
        }
    }
    if (!fresh && (migrate_count(pl->set) > 0 || p->cloned) &&
        next_step(&rc, &step, "apply the migrations", why, sizeof(why))) {
        rc = migrate_apply(db, pl->set, &p->mr);
        if (rc != TN_OK)
            migrate_why(&p->mr.error, why, sizeof(why));
    }
    if (!fresh && pl->seed_sql != NULL &&
        next_step(&rc, &step, "run the seed", why, sizeof(why))) {
        migrate_error e;
        rc = migrate_seed(db, seed_label, pl->seed_sql, 3, vals, &e);
        p->seeded = rc == TN_OK;
        if (rc != TN_OK)
            migrate_why(&e, why, sizeof(why));
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
        rc = registry_provisioned(c->reg, n->slug, p->mr.to, pl->final_state, err, sizeof(err));
        if (rc != TN_OK)
            snprintf(why, sizeof(why), "%s", err);
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
    if (registry_purge(c->reg, n->slug, e2, sizeof(e2)) != TN_OK)
        snprintf(undo + strlen(undo), sizeof(undo) - strlen(undo),
                 "; its registry entry could not be removed (%s): 'tenancy tenant show %s'",
                 e2, n->slug);
    release_signals(old);
    if (undo[0] == '\0')
        snprintf(undo, sizeof(undo), created ? "; its storage was dropped and its registry "
                                               "entry removed"
                                             : "; its registry entry was removed");
    snprintf(msg, msglen, "tenant '%s' not created: cannot %s: %s%s", n->slug, step, why, undo);
    return rc;
}

/* One tenant, start to end — the one function of both `tenant create SLUG` and each line of
 * `tenant create --from-file`: its storage name (fixed from the start), the registry entry in
 * state provisioning (the host answers 503 for it meanwhile), then provision_run. All or
 * nothing. n->placement, n->storage and n->state are set here. TN_OK, or the code with msg. */
static int provision_tenant(cli *c, registry_new *n, provision *p, provision_keep *keep,
                            char *msg, size_t msglen)
{
    const provision_plan *pl = p->plan;
    const tenancy_config *tc = &c->cfg->tenancy;
    const char *pname = pl->placement->name;
    if (placement_storage_name(tc, pl->placement, n->slug, p->storage, sizeof(p->storage)) !=
        TN_OK) {
        snprintf(msg, msglen, "the storage name of '%s' is too long", n->slug);
        return TN_TOOBIG;
    }
    if (placement_target_of(tc, pname, p->storage, NULL, &p->target) != TN_OK) {
        snprintf(msg, msglen, "placement '%s' cannot be used", pname);
        return TN_INVALID;
    }
    p->target.statement_timeout_ms = 0;   /* a migration may take longer than a request */
    cli_role_verifier(c, &p->target, p->role_verifier);
    n->state = TENANT_PROVISIONING;       /* until its storage is ready */
    n->placement = pname;
    n->storage = p->storage;
    int rc = registry_create(c->reg, n, &p->id, msg, msglen);
    return rc == TN_OK ? provision_run(c, n, p, keep, msg, msglen) : rc;
}

static int provisioned_cb(void *ctx, const tenant_rec *t, const registry_domain *d, int nd)
{
    cli_json_tenant(ctx, t, d, nd);
    return TN_OK;
}

static void provision_report(cli *c, const registry_new *n, int nd, const provision *p)
{
    const provision_plan *pl = p->plan;
    const migrate_result *m = &p->mr;
    for (int i = 0; i < m->nwarnings && i < MIGRATE_MAX_WARNINGS; i++)
        fprintf(stderr, "tenancy: warning: %s: %s\n", n->slug, m->warnings[i]);
    if (c->json) {
        buf *b = &c->out;
        buf_puts(b, "{\"ok\":true,\"tenant\":");
        buf t = BUF_INIT;
        if (registry_show(c->reg, n->slug, provisioned_cb, &t) == TN_OK && !t.oom)
            buf_append(b, t.p, t.len);
        else
            buf_puts(b, "null");
        buf_free(&t);
        buf_puts(b, ",\"storage\":{\"placement\":");
        buf_json_str(b, pl->placement->name);
        buf_puts(b, ",\"kind\":");
        buf_json_str(b, target_kind_name(p->target.kind));
        buf_puts(b, ",\"name\":");
        buf_json_str(b, p->storage);
        buf_puts(b, ",\"migration_version\":");
        buf_json_str(b, m->to);
        buf_puts(b, ",\"applied\":");
        buf_i64(b, m->applied);
        buf_puts(b, ",\"seeded\":");
        buf_puts(b, p->seeded ? "true" : "false");
        buf_puts(b, ",\"template\":");
        buf_json_str(b, pl->from_template ? pl->tpl->slug : NULL);
        buf_puts(b, ",\"cloned\":");
        buf_puts(b, p->cloned ? "true" : "false");
        buf_puts(b, ",\"ms\":");
        buf_i64(b, p->ms);
        buf_puts(b, ",\"warnings\":[");
        for (int i = 0; i < m->nwarnings && i < MIGRATE_MAX_WARNINGS; i++) {
            if (i)
                buf_putc(b, ',');
            buf_json_str(b, m->warnings[i]);
        }
        buf_puts(b, "]}}");
        return;
    }
    printf("created tenant '%s' (id %lld, %s, %d domain%s): %s %s", n->slug,
           (long long)p->id, tenant_state_name(pl->final_state), nd, nd == 1 ? "" : "s",
           target_kind_name(p->target.kind), p->storage);
    if (p->cloned)
        printf(", cloned from '%s'", pl->tpl->slug);
    if (m->to[0] != '\0')
        printf(", migrations at %s (%d applied)", m->to, m->applied);
    if (p->seeded)
        printf(", seeded");
    printf(", in %lld ms\n", (long long)p->ms);
    if (p->replayed)
        printf("note: PostgreSQL cannot clone a schema: the migrations were replayed instead "
               "of cloning '%s'\n", pl->tpl->slug);
}

/* ---- create ----------------------------------------------------------------------------------- */

/* --setting KEY=VALUE...: a JSON object for registry_new.settings (a later KEY wins), into
 * json. 0 or what cli_usage/cli_fail return. */
static int settings_json(cli *c, const cli_args *a, buf *json)
{
    const char *sets[MAX_CREATE_SETTINGS + 1];
    int ns = cli_opt_all(a, "--setting", sets, MAX_CREATE_SETTINGS + 1);
    if (ns > MAX_CREATE_SETTINGS)
        return cli_usage(c, "at most %d --setting options", MAX_CREATE_SETTINGS);
    buf_putc(json, '{');
    for (int i = 0; i < ns; i++) {
        const char *eq = strchr(sets[i], '=');
        if (eq == NULL || eq == sets[i])
            return cli_usage(c, "--setting expects KEY=VALUE, not '%s'", sets[i]);
        size_t vlen = strlen(eq + 1), klen = (size_t)(eq - sets[i]);
        /* Checked here: the JSON writer would turn bad bytes into U+FFFD, silently. */
        if (utf8_valid_prefix(sets[i], klen) != klen ||
            utf8_valid_prefix(eq + 1, vlen) != vlen)
            return cli_fail(c, TN_INVALID, "setting '%.*s' is not UTF-8 text", (int)klen,
                            sets[i]);
        if (i > 0)
            buf_putc(json, ',');
        buf_json_strn(json, sets[i], klen);
        buf_putc(json, ':');
        buf_json_str(json, eq + 1);
    }
    buf_putc(json, '}');
    if (json->oom)
        return cli_fail(c, TN_NOMEM, "out of memory");
    return 0;
}

static int create_from_file(cli *c, const cli_args *a, const registry_new *tpl,
                            provision_plan *plan);

int cli_tenant_create(cli *c, const cli_args *a)
{
    const char *file = cli_opt(a, "--from-file");
    if (a->npos == 0 && file == NULL)
        return cli_usage(c, "'tenant create' needs SLUG, or --from-file FILE");
    if (a->npos > 0 && file != NULL)
        return cli_usage(c, "give the SLUG of one tenant or --from-file FILE, not both");
    if (file != NULL && (cli_opt(a, "--name") != NULL || cli_opt(a, "--domain") != NULL))
        return cli_usage(c, "with --from-file, the names and domains come from the file");
    if (file == NULL && cli_opt(a, "-j") != NULL)
        return cli_usage(c, "-j goes with --from-file");
    const char *slug = a->pos[0];
    const char *name = cli_opt(a, "--name");
    const char *domains[MAX_CREATE_DOMAINS + 1];
    int nd = cli_opt_all(a, "--domain", domains, MAX_CREATE_DOMAINS + 1);
    if (nd > MAX_CREATE_DOMAINS)
        return cli_usage(c, "at most %d --domain options", MAX_CREATE_DOMAINS);
    registry_new n = {.slug = slug, .name = name ? name : slug, .state = TENANT_ACTIVE,
                      .domains = domains, .ndomains = nd};
    const char *st = cli_opt(a, "--state");
    if (st != NULL) {
        n.state = tenant_state_parse(st);
        if (n.state != TENANT_ACTIVE && n.state != TENANT_PROVISIONING)
            return cli_usage(c, "--state is active or provisioning, not '%s'", st);
    }
    int rc = cli_opt_int(c, a, "--max-workers", 0, 100000, &n.max_workers);
    if (rc != 0)
        return rc;
    buf json = BUF_INIT;
    rc = settings_json(c, a, &json);
    if (rc != 0) {
        buf_free(&json);
        return rc;
    }
    n.settings = json.p;

    provision_plan plan;
    memset(&plan, 0, sizeof(plan));
    plan.final_state = n.state;
    plan.from_template = cli_opt(a, "--from-template") != NULL;
    plan.no_seed = cli_opt(a, "--no-seed") != NULL;
    rc = provision_prepare(c, cli_opt(a, "--placement"), &plan);
    if (rc == 0 && file != NULL) {
        rc = create_from_file(c, a, &n, &plan);
    } else if (rc == 0) {
        provision p;
        memset(&p, 0, sizeof(p));
        p.plan = &plan;
        char msg[1024];
        int r = provision_tenant(c, &n, &p, NULL, msg, sizeof(msg));
        rc = r == TN_OK ? 0 : cli_fail(c, r, "%s", msg);
        if (rc == 0)
            provision_report(c, &n, nd, &p);
    }
    buf_free(&json);
    plan_free(&plan);
    return rc;
}

/* ---- create --from-file ------------------------------------------------------------------------ */

/* FILE: one tenant a line, tab-separated: SLUG [NAME [DOMAIN...]] (an empty NAME is the
 * slug; the first domain is primary); blank lines and lines starting with '#' are skipped.
 * Each tenant is created exactly as `tenant create SLUG` creates it (provision_tenant), on
 * the runner of tenancy/ops_runner.c: -j N workers, each with its own registry connection and, in
 * schema mode, one storage connection for all its tenants (provision_keep). A tenant that
 * fails is undone alone and reported with its slug and reason; the others go on. */

enum { BULK_PENDING, BULK_CREATED, BULK_FAILED, BULK_SKIPPED };
static const char *const bulk_status[] = {"pending", "created", "failed", "skipped"};

typedef struct bulk_line {
    int lineno;
    char *text;                  /* the line, cut at its tabs */
    const char *slug, *name;
    const char *domains[MAX_CREATE_DOMAINS];
    int nd;
    int status;
    const char *code;            /* a failure's JSON code */
    int64_t id, ms;
    int applied, nwarnings;
    bool seeded;
    char version[MIGRATE_VERSION_MAX];
    char *error, *warning;
} bulk_line;

typedef struct bulk {
    cli *c;
    const registry_new *tpl;     /* state, max_workers, settings for every tenant */
    const provision_plan *plan;
    bulk_line *v;
    int n, cap;
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

static void line_fail(bulk_line *l, const char *code, const char *msg)
{
    l->status = BULK_FAILED;
    l->code = code;
    set_text(&l->error, msg);
}

/* Read FILE ("-": stdin) into b->v. 0, or what cli_fail returns. */
static int bulk_read(cli *c, const char *file, bulk *b)
{
    FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "r");
    if (f == NULL)
        return cli_fail(c, TN_IO, "--from-file %s: %s", file, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0, rc = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (line[strspn(line, " \t")] == '\0' || line[0] == '#')
            continue;
        if (b->n == b->cap) {
            int ncap = b->cap ? b->cap * 2 : 256;
            bulk_line *nv = realloc(b->v, (size_t)ncap * sizeof(*nv));
            if (nv == NULL) {
                rc = cli_fail(c, TN_NOMEM, "out of memory");
                break;
            }
            b->v = nv;
            b->cap = ncap;
        }
        bulk_line *l = &b->v[b->n];
        memset(l, 0, sizeof(*l));
        l->lineno = lineno;
        l->text = strdup(line);
        if (l->text == NULL) {
            rc = cli_fail(c, TN_NOMEM, "out of memory");
            break;
        }
        b->n++;
        char *save = l->text, *field;
        int k = 0;
        while ((field = strsep(&save, "\t")) != NULL) {
            if (k == 0)
                l->slug = field;
            else if (k == 1)
                l->name = field[0] != '\0' ? field : NULL;
            else if (field[0] == '\0')
                continue;
            else if (l->nd < MAX_CREATE_DOMAINS)
                l->domains[l->nd++] = field;
            else
                line_fail(l, "invalid", "more than 64 domains");
            k++;
        }
        if (l->name == NULL)
            l->name = l->slug;
        if (l->slug[0] == '\0')
            line_fail(l, "invalid", "no slug (the line starts with a tab)");
    }
    if (rc == 0 && ferror(f))
        rc = cli_fail(c, TN_IO, "--from-file %s: %s", file, strerror(errno));
    free(line);
    if (f != stdin)
        fclose(f);
    return rc;
}

static const bulk_line *sort_base;
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
        const bulk_line *first = &b->v[ord[i - 1]];
        bulk_line *l = &b->v[ord[i]];
        if (strcmp(first->slug, l->slug) != 0 || l->slug[0] == '\0')
            continue;
        int at = first->lineno;
        for (int k = i - 1; k > 0 && strcmp(b->v[ord[k - 1]].slug, l->slug) == 0; k--)
            at = b->v[ord[k - 1]].lineno;
        char msg[300];
        snprintf(msg, sizeof(msg), "tenant '%.200s' is given twice: already on line %d",
                 l->slug, at);
        if (l->status == BULK_PENDING)
            line_fail(l, "exists", msg);
    }
    free(ord);
    return TN_OK;
}

static void bulk_worker_begin(void *ctx)
{
    bulk *b = ctx;
    const tenancy_config *tc = &b->c->cfg->tenancy;
    const placement *pl = b->plan->placement;
    b->keep.max = pl->max_tenants > 0 ? pl->max_tenants : POOL_PG_MAX_TENANTS;
    b->open_rc = registry_open(tc->registry_uri, tc->gen_path, &b->c->reg, b->open_err,
                               sizeof(b->open_err));
    if (b->open_rc == TN_OK)
        b->open_rc = registry_defer_sync(b->c->reg, b->open_err, sizeof(b->open_err));
    b->flushed_ms = clock_mono_ms();
}

static bool bulk_work(void *ctx, int idx, void *result)
{
    bulk *b = ctx;
    bulk_result *r = result;
    const bulk_line *l = &b->v[b->task[idx]];
    if (b->open_rc != TN_OK) {
        r->rc = b->open_rc;
        snprintf(r->error, sizeof(r->error), "the worker cannot open the registry: %s",
                 b->open_err);
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
    r->rc = provision_tenant(b->c, &n, &p, &b->keep, r->error, sizeof(r->error));
    r->id = p.id;
    r->ms = p.ms;
    r->applied = p.mr.applied;
    r->seeded = p.seeded;
    r->nwarnings = p.mr.nwarnings;
    snprintf(r->version, sizeof(r->version), "%s", p.mr.to);
    if (p.mr.nwarnings > 0)
        snprintf(r->warning, sizeof(r->warning), "%s", p.mr.warnings[0]);
    if (r->rc == TN_OK)
        r->error[0] = '\0';
    ops_flush_due(b->c->reg, &b->flushed_ms);   /* the registry commits: see ops.h */
    return interrupted == 0;   /* SIGTERM undid the tenant in hand: this worker ends */
}

static void bulk_worker_end(void *ctx)
{
    bulk *b = ctx;
    db_close(b->keep.db);
    ops_flush_now(b->c->reg);
    registry_close(b->c->reg);
    b->c->reg = NULL;
}

static bool bulk_take(void *ctx, const void *result)
{
    bulk *b = ctx;
    const bulk_result *r = result;
    bulk_line *l = &b->v[b->task[r->idx]];
    l->id = r->id;
    l->ms = r->ms;
    l->applied = r->applied;
    l->seeded = r->seeded != 0;
    l->nwarnings = r->nwarnings;
    snprintf(l->version, sizeof(l->version), "%s", r->version);
    set_text(&l->warning, r->warning);
    if (r->rc == TN_OK) {
        l->status = BULK_CREATED;
        return false;
    }
    line_fail(l, cli_rc_code(r->rc), r->error);
    return true;
}

static void bulk_lost(void *ctx, int idx, const char *why)
{
    bulk *b = ctx;
    char msg[600];
    bulk_line *l = &b->v[b->task[idx]];
    snprintf(msg, sizeof(msg), "tenant '%.200s': %s; see 'tenancy tenant show %.200s'",
             l->slug, why, l->slug);
    line_fail(l, "error", msg);
}

/* A second signal sends SIGTERM: each worker undoes the tenant in hand (provision_run holds
 * it until the running step ends), then ends. */
static const ops_runner_ops bulk_ops = {
    .result_size = sizeof(bulk_result),
    .worker_begin = bulk_worker_begin,
    .work = bulk_work,
    .worker_end = bulk_worker_end,
    .take = bulk_take,
    .lost = bulk_lost,
    .hard_signal = SIGTERM,
};

static void bulk_json(cli *c, const bulk *b, const int *cnt, double secs)
{
    const tenancy_config *tc = &c->cfg->tenancy;
    buf *o = &c->out;
    bool ok = cnt[BULK_FAILED] == 0 && cnt[BULK_SKIPPED] == 0;
    buf_puts(o, "{\"ok\":");
    buf_puts(o, ok ? "true" : "false");
    if (!ok) {
        char msg[160];
        snprintf(msg, sizeof(msg), "%d of %d tenant%s not created", b->n - cnt[BULK_CREATED],
                 b->n, b->n == 1 ? "" : "s");
        buf_puts(o, ",\"error\":");
        buf_json_str(o, msg);
        buf_puts(o, ",\"code\":\"error\"");
    }
    buf_puts(o, ",\"placement\":");
    buf_json_str(o, b->plan->placement->name);
    buf_puts(o, ",\"kind\":");
    buf_json_str(o, target_kind_name(b->plan->placement->kind));
    buf_puts(o, ",\"latest\":");
    buf_json_str(o, migrate_latest(b->plan->set));
    buf_puts(o, ",\"jobs\":");
    buf_i64(o, b->j.nworkers);
    buf_puts(o, ",\"stopped\":");
    buf_json_str(o, b->j.stopped);
    buf_puts(o, ",\"total\":");
    buf_i64(o, b->n);
    for (int s = BULK_CREATED; s <= BULK_SKIPPED; s++) {
        buf_printf(o, ",\"%s\":", bulk_status[s]);
        buf_i64(o, cnt[s]);
    }
    buf_printf(o, ",\"seconds\":%.3f,\"per_s\":%.1f,\"tenants\":[", secs,
               secs > 0 ? cnt[BULK_CREATED] / secs : 0.0);
    for (int i = 0; i < b->n; i++) {
        const bulk_line *l = &b->v[i];
        char storage[4096] = "";
        if (l->status == BULK_CREATED)
            placement_storage_name(tc, b->plan->placement, l->slug, storage, sizeof(storage));
        buf_puts(o, i ? ",{\"line\":" : "{\"line\":");
        buf_i64(o, l->lineno);
        buf_puts(o, ",\"slug\":");
        buf_json_str(o, l->slug);
        buf_puts(o, ",\"status\":");
        buf_json_str(o, bulk_status[l->status]);
        buf_puts(o, ",\"id\":");
        if (l->status == BULK_CREATED)
            buf_i64(o, l->id);
        else
            buf_puts(o, "null");
        buf_puts(o, ",\"storage\":");
        buf_json_str(o, storage[0] ? storage : NULL);
        buf_puts(o, ",\"migration_version\":");
        buf_json_str(o, l->version);
        buf_puts(o, ",\"applied\":");
        buf_i64(o, l->applied);
        buf_puts(o, ",\"seeded\":");
        buf_puts(o, l->seeded ? "true" : "false");
        buf_puts(o, ",\"ms\":");
        buf_i64(o, l->ms);
        buf_puts(o, ",\"error\":");
        buf_json_str(o, l->error);
        buf_puts(o, ",\"code\":");
        buf_json_str(o, l->status == BULK_FAILED ? l->code : NULL);
        buf_puts(o, ",\"warnings\":");
        buf_i64(o, l->nwarnings);
        buf_puts(o, ",\"warning\":");
        buf_json_str(o, l->warning);
        buf_putc(o, '}');
    }
    buf_puts(o, "]}");
}

/* On a terminal: the tenants that were not created, as a table (10,000 created ones are not
 * worth a screen), then the summary. Otherwise one tab-separated line per tenant (slug,
 * status, id, ms, error; no header) for scripts, and the summary on stderr. */
static void bulk_text(cli *c, const bulk *b, const int *cnt, double secs)
{
    if (c->tty) {
        int ws = 4;
        for (int i = 0; i < b->n; i++)
            if (b->v[i].status != BULK_CREATED && (int)strlen(b->v[i].slug) > ws)
                ws = (int)strlen(b->v[i].slug);
        if (cnt[BULK_CREATED] < b->n)
            printf("%6s  %-*s  %-7s  %s\n", "LINE", ws, "SLUG", "STATUS", "ERROR");
        for (int i = 0; i < b->n; i++) {
            const bulk_line *l = &b->v[i];
            if (l->status == BULK_CREATED)
                continue;
            printf("%6d  ", l->lineno);
            cli_put_cell(stdout, l->slug, ws);
            printf("  %-7s  ", bulk_status[l->status]);
            cli_put_text(stdout, l->error ? l->error : "");
            fputc('\n', stdout);
        }
    } else {
        for (int i = 0; i < b->n; i++) {
            const bulk_line *l = &b->v[i];
            cli_put_text(stdout, l->slug);
            printf("\t%s\t", bulk_status[l->status]);
            if (l->status == BULK_CREATED)
                printf("%lld", (long long)l->id);
            printf("\t%lld\t", (long long)l->ms);
            cli_put_text(stdout, l->error ? l->error : "");
            fputc('\n', stdout);
        }
    }
    for (int i = 0; i < b->n; i++)
        if (b->v[i].warning != NULL)
            fprintf(stderr, "tenancy: warning: %s: %s%s\n", b->v[i].slug, b->v[i].warning,
                    b->v[i].nwarnings > 1 ? " (and more)" : "");
    FILE *f = c->tty ? stdout : stderr;
    fprintf(f, "%d tenant%s in %s: %d created, %d failed, %d skipped in %.1f s (%.1f tenants/s, "
               "%d at once)", b->n, b->n == 1 ? "" : "s", b->plan->placement->name,
            cnt[BULK_CREATED], cnt[BULK_FAILED], cnt[BULK_SKIPPED], secs,
            secs > 0 ? cnt[BULK_CREATED] / secs : 0.0, b->j.nworkers);
    if (b->j.stopped != NULL)
        fprintf(f, "; stopped: %s", b->j.stopped);
    fputc('\n', f);
}

static int create_from_file(cli *c, const cli_args *a, const registry_new *tpl,
                            provision_plan *plan)
{
    int jobs = 1;
    int rc = cli_opt_int(c, a, "-j", 1, OPS_JOBS_MAX, &jobs);
    if (rc != 0)
        return rc;
    bulk b;
    memset(&b, 0, sizeof(b));
    b.c = c;
    b.tpl = tpl;
    b.plan = plan;
    rc = bulk_read(c, cli_opt(a, "--from-file"), &b);
    if (rc == 0 && bulk_refuse_duplicates(&b) != TN_OK)
        rc = cli_fail(c, TN_NOMEM, "out of memory");
    if (rc == 0 && (b.task = malloc((size_t)(b.n > 0 ? b.n : 1) * sizeof(int))) == NULL)
        rc = cli_fail(c, TN_NOMEM, "out of memory");
    if (rc == 0) {
        for (int i = 0; i < b.n; i++)
            if (b.v[i].status == BULK_PENDING)
                b.task[b.ntasks++] = i;
        /* The workers open their own connections: the parent's must not be inherited. */
        registry_close(c->reg);
        c->reg = NULL;
        char err[512] = "";
        ops_preload_drivers(&c->cfg->tenancy);
        cli_bar bar;
        cli_bar_init(&bar);
        int r = ops_runner_start(&b.j, &bulk_ops, &b, b.ntasks, jobs, cli_bar_draw, &bar, err,
                                 sizeof(err));
        if (r == TN_OK) {
            ops_runner_run(&b.j, b.ntasks, false);
            if (b.j.stopped == NULL && b.j.next < b.ntasks)
                b.j.stopped = "no worker left";   /* every worker died */
        }
        ops_runner_finish(&b.j);
        /* The workers' registry commits were deferred: one flush for the whole run makes
         * them durable before anything is reported as created. */
        char ferr[600] = "";
        ops_env e;
        cli_ops_env(c, &e);
        int frc = r == TN_OK && b.j.done > 0 ? ops_flush_all(&e, ferr, sizeof(ferr)) : TN_OK;
        c->reg = e.reg;
        double secs = (double)(clock_mono_ms() - b.j.t0) / 1000.0;
        int cnt[4] = {0};
        for (int i = 0; i < b.n; i++) {
            if (b.v[i].status == BULK_PENDING)
                b.v[i].status = BULK_SKIPPED;
            cnt[b.v[i].status]++;
        }
        if (r != TN_OK) {
            rc = cli_fail(c, r, "cannot start the workers: %s", err);
        } else {
            if (c->json)
                bulk_json(c, &b, cnt, secs);
            else
                bulk_text(c, &b, cnt, secs);
            if (frc != TN_OK) {
                rc = cli_fail(c, frc, "the registry could not be flushed to disk (%s): the "
                                      "%d tenants created are in it, but a power loss now "
                                      "could lose them; run 'tenancy check' after one",
                              ferr, cnt[BULK_CREATED]);
                c->keep_out = true;
            } else if (cnt[BULK_CREATED] < b.n) {
                rc = cli_fail(c, TN_ERR, "%d of %d tenant%s not created (%d failed, %d skipped)%s%s",
                              b.n - cnt[BULK_CREATED], b.n, b.n == 1 ? "" : "s",
                              cnt[BULK_FAILED], cnt[BULK_SKIPPED],
                              b.j.stopped ? "; stopped: " : "",
                              b.j.stopped ? b.j.stopped : "");
                c->keep_out = true;   /* the JSON document is the table, with error and code */
            }
        }
    }
    for (int i = 0; i < b.n; i++) {
        free(b.v[i].text);
        free(b.v[i].error);
        free(b.v[i].warning);
    }
    free(b.v);
    free(b.task);
    return rc;
}

/* ---- list ------------------------------------------------------------------------------------- */

typedef struct row {
    char *slug, *name, *state, *placement, *domain;
} row;

typedef struct list_ctx {
    cli *c;
    buf items;        /* JSON mode */
    row *rows;        /* text mode */
    int n, cap;
    int limit;
    bool more;        /* a tenant after this page exists (the list asked for limit + 1) */
    char last[64];
    bool oom;
} list_ctx;

static int list_cb(void *ctx, const tenant_rec *t, const registry_domain *d, int nd)
{
    list_ctx *l = ctx;
    if (l->n == l->limit) {
        l->more = true;
        return TN_DONE;
    }
    snprintf(l->last, sizeof(l->last), "%s", t->slug);
    const char *primary = "";
    for (int i = 0; i < nd; i++)
        if (d[i].primary) {
            primary = d[i].domain;
            break;
        }
    if (l->c->json) {
        if (l->n > 0)
            buf_putc(&l->items, ',');
        cli_json_tenant(&l->items, t, d, nd);
        l->n++;
        return TN_OK;
    }
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 64;
        row *nr = realloc(l->rows, (size_t)cap * sizeof(*nr));
        if (nr == NULL) {
            l->oom = true;
            return TN_NOMEM;
        }
        l->rows = nr;
        l->cap = cap;
    }
    row *r = &l->rows[l->n];
    r->slug = strdup(t->slug);
    r->name = strdup(t->name);
    r->state = strdup(tenant_state_name(t->state));
    r->placement = strdup(t->placement);
    r->domain = strdup(primary);
    l->n++;
    if (!r->slug || !r->name || !r->state || !r->placement || !r->domain) {
        l->oom = true;
        return TN_NOMEM;
    }
    return TN_OK;
}

/* Characters (not bytes) of s, at most cap. */
static int text_width(const char *s, int cap)
{
    int w = 0;
    for (; *s && w < cap; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            w++;
    return w;
}

static void print_table(const list_ctx *l, int64_t total)
{
    static const char *const head[] = {"SLUG", "NAME", "STATE", "PLACEMENT", "DOMAIN"};
    int w[5];
    for (int k = 0; k < 5; k++)
        w[k] = (int)strlen(head[k]);
    for (int i = 0; i < l->n; i++) {
        const char *cells[] = {l->rows[i].slug, l->rows[i].name, l->rows[i].state,
                               l->rows[i].placement, l->rows[i].domain};
        for (int k = 0; k < 5; k++) {
            int cw = text_width(cells[k], k == 1 ? 32 : 253);
            if (cw > w[k])
                w[k] = cw;
        }
    }
    for (int k = 0; k < 5; k++) {
        cli_put_cell(stdout, head[k], k == 4 ? (int)strlen(head[k]) : w[k]);
        fputs(k == 4 ? "\n" : "  ", stdout);
    }
    for (int i = 0; i < l->n; i++) {
        const char *cells[] = {l->rows[i].slug, l->rows[i].name, l->rows[i].state,
                               l->rows[i].placement, l->rows[i].domain};
        for (int k = 0; k < 5; k++) {
            cli_put_cell(stdout, cells[k], k == 4 ? (int)strlen(cells[k]) : w[k]);
            fputs(k == 4 ? "\n" : "  ", stdout);
        }
    }
    printf("(%d of %lld tenant%s", l->n, (long long)total, total == 1 ? "" : "s");
    if (l->more)
        printf("; next page: --after %s", l->last);
    printf(")\n");
}

int cli_tenant_list(cli *c, const cli_args *a)
{
    int state = -1, limit = 100;
    const char *st = cli_opt(a, "--state");
    if (st != NULL && (state = tenant_state_parse(st)) < 0)
        return cli_usage(c, "unknown state '%s' (provisioning, active, maintenance, suspended, "
                            "moving, deleting)", st);
    int rc = cli_opt_int(c, a, "--limit", 1, 10000, &limit);
    if (rc != 0)
        return rc;
    const char *search = cli_opt(a, "--search");
    const char *after = cli_opt(a, "--after");

    list_ctx l;
    memset(&l, 0, sizeof(l));
    l.c = c;
    l.limit = limit;
    int64_t total = -1;
    rc = registry_list(c->reg, state, search, after, limit + 1, list_cb, &l, &total);
    int status = 0;
    if (rc != TN_OK || l.oom || l.items.oom) {
        status = cli_fail(c, l.oom || l.items.oom ? TN_NOMEM : rc, "cannot list the tenants: %s",
                          l.oom || l.items.oom ? "out of memory" : tn_rc_str(rc));
    } else if (c->json) {
        buf_puts(&c->out, "{\"total\":");
        buf_i64(&c->out, total);
        buf_puts(&c->out, ",\"count\":");
        buf_i64(&c->out, l.n);
        buf_puts(&c->out, ",\"next_after\":");
        buf_json_str(&c->out, l.more ? l.last : NULL);
        buf_puts(&c->out, ",\"tenants\":[");
        if (l.items.len > 0)
            buf_append(&c->out, l.items.p, l.items.len);
        buf_puts(&c->out, "]}");
    } else if (c->tty) {
        print_table(&l, total);
    } else {
        /* Not a terminal: one tab-separated line per tenant, no header (for scripts). */
        for (int i = 0; i < l.n; i++) {
            const char *cells[] = {l.rows[i].slug, l.rows[i].name, l.rows[i].state,
                                   l.rows[i].placement, l.rows[i].domain};
            for (int k = 0; k < 5; k++) {
                cli_put_text(stdout, cells[k]);
                fputc(k == 4 ? '\n' : '\t', stdout);
            }
        }
    }
    for (int i = 0; i < l.n && !c->json; i++) {
        free(l.rows[i].slug);
        free(l.rows[i].name);
        free(l.rows[i].state);
        free(l.rows[i].placement);
        free(l.rows[i].domain);
    }
    free(l.rows);
    buf_free(&l.items);
    return status;
}

/* ---- show ------------------------------------------------------------------------------------- */

static int show_cb(void *ctx, const tenant_rec *t, const registry_domain *d, int nd)
{
    cli *c = ctx;
    if (c->json) {
        cli_json_tenant(&c->out, t, d, nd);
        return TN_OK;
    }
    char ts[32];
    printf("id:          %lld\n", (long long)t->id);
    printf("slug:        %s\n", t->slug);
    fputs("name:        ", stdout);
    cli_put_text(stdout, t->name);
    printf("\nstate:       %s\n", tenant_state_name(t->state));
    fputs("placement:   ", stdout);
    cli_put_text(stdout, t->placement);
    fputs("\nstorage:     ", stdout);
    cli_put_text(stdout, t->storage);
    if (t->max_workers > 0)
        printf("\nmax_workers: %d\n", t->max_workers);
    else
        printf("\nmax_workers: 0 (the host's tenant.max_workers)\n");
    ops_utc_time(t->created_at, ts, sizeof(ts));
    printf("created:     %s\n", ts);
    ops_utc_time(t->updated_at, ts, sizeof(ts));
    printf("updated:     %s\n", ts);
    if (nd == 0)
        printf("domains:     (none)\n");
    for (int i = 0; i < nd; i++)
        printf("%s%s%s\n", i == 0 ? "domains:     " : "             ", d[i].domain,
               d[i].primary ? " (primary)" : "");
    if (t->nsettings == 0)
        printf("settings:    (none)\n");
    for (int i = 0; i < t->nsettings; i++) {
        fputs(i == 0 ? "settings:    " : "             ", stdout);
        cli_put_text(stdout, t->settings[i].key);
        fputs(" = ", stdout);
        cli_put_text(stdout, t->settings[i].value);
        fputc('\n', stdout);
    }
    return TN_OK;
}

int cli_tenant_show(cli *c, const cli_args *a)
{
    int rc = registry_show(c->reg, a->pos[0], show_cb, c);
    if (rc == TN_NOTFOUND)
        return cli_fail(c, rc, "no tenant '%s'", a->pos[0]);
    if (rc != TN_OK)
        return cli_fail(c, rc, "cannot read tenant '%s': %s", a->pos[0], tn_rc_str(rc));
    return 0;
}

/* ---- state changes ---------------------------------------------------------------------------- */

/* A deleted tenant leaves state deleting only through `tenant restore` (within
 * storage.delete_grace) or `purge`: suspend, resume or maintenance would otherwise be a
 * restore that ignores the grace period. Delete refuses a tenant already deleted (its
 * deleted_at, and so its grace period, would start again). The check and the change are one
 * compare-and-set in the registry, so a concurrent delete cannot slip between them. */
int cli_tenant_state(cli *c, const cli_args *a)
{
    const char *verb = c->cmd->name + strlen("tenant ");
    int state = strcmp(verb, "suspend") == 0       ? TENANT_SUSPENDED
                : strcmp(verb, "resume") == 0      ? TENANT_ACTIVE
                : strcmp(verb, "maintenance") == 0 ? TENANT_MAINTENANCE
                                                   : TENANT_DELETING;
    const char *slug = a->pos[0];
    char err[1024];
    ops_env e;
    cli_ops_env(c, &e);
    int rc = ops_set_state(&e, slug, state, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    if (c->json) {
        cli_json_changed(c, slug);
    } else if (state == TENANT_DELETING) {
        char until[32];
        ops_utc_time((int64_t)time(NULL) + c->cfg->tenancy.delete_grace_ms / 1000, until,
                 sizeof(until));
        printf("tenant '%s' is now deleting: the host answers 404 for it; 'tenancy tenant "
               "restore %s' brings it back until %s, then 'tenancy purge' removes it\n", slug,
               slug, until);
    } else {
        printf("tenant '%s' is now %s\n", slug, tenant_state_name(state));
    }
    return 0;
}

/* ---- set -------------------------------------------------------------------------------------- */

int cli_tenant_set(cli *c, const cli_args *a)
{
    const char *slug = a->pos[0];
    int mw = -1;
    int rc = cli_opt_int(c, a, "--max-workers", 0, 100000, &mw);
    if (rc != 0)
        return rc;
    if (mw < 0)
        return cli_usage(c, "nothing to set: give --max-workers N");
    char err[1024];
    ops_env e;
    cli_ops_env(c, &e);
    rc = ops_set_max_workers(&e, slug, mw, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    if (c->json)
        cli_json_changed(c, slug);
    else
        printf("tenant '%s': max_workers = %d%s\n", slug, mw,
               mw == 0 ? " (the host's tenant.max_workers)" : "");
    return 0;
}

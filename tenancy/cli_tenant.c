/*
 * cli_tenant.c — the `tenancy tenant ...` commands: create (with the provisioning of the
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
 *   3. the migrations (storage.migrations), then 4. the seed (storage.seed);
 *   5. the version recorded and the state set, in one registry transaction.
 *
 * All or nothing: when a step fails (or SIGINT/SIGTERM/SIGHUP arrives: the signal is held
 * until the running step ends), the storage this command created is dropped and the registry
 * entry removed, and the message names the step. A storage that was already there is never
 * dropped: it is not ours.
 *
 * Must not: check what the registry checks (slugs, domains, limits: its message is the one
 * shown), or print to stdout before the change succeeded.
 */
#include "core/first.h"
#include "tenancy/cli_int.h"
#include "core/clock.h"
#include "core/rc.h"
#include "storage/migrate.h"
#include "storage/target.h"
#include "tenancy/lookup.h"
#include "tenancy/placement.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CREATE_DOMAINS 64
#define MAX_CREATE_SETTINGS 128

/* ---- provisioning (the create path) -------------------------------------------------------- */

typedef struct provision {
    /* the plan, made before anything is created */
    const placement *placement;
    char storage[4096];          /* its storage name (placement_storage_name) */
    storage_target target;
    migration_set *set;          /* storage.migrations (maybe empty) */
    char *seed_sql;              /* storage.seed, NULL when none or --no-seed */
    char seed_path[4096];
    bool from_template, no_seed;
    int final_state;             /* active, or provisioning with --state provisioning */
    tenant_rec *tpl;             /* storage.template's entry (--from-template) */
    storage_target tpl_target;
    /* what happened */
    int64_t id;
    bool cloned, replayed;       /* replayed: --from-template in schema mode */
    migrate_result mr;
    bool seeded;
    int64_t ms;
} provision;

static void provision_free(provision *p)
{
    migrate_free(p->set);
    free(p->seed_sql);
    free(p->tpl);
}

/* Everything that can be refused is refused here, before the registry or a storage is
 * touched: the placement, the storage name, the migration folder, the seed, the template. */
static int provision_prepare(cli *c, const char *pname, const char *slug, provision *p)
{
    const tenancy_config *tc = &c->cfg->tenancy;
    char err[1024];
    if (pname == NULL)
        pname = tc->default_placement;
    p->placement = tenancy_placement(tc, pname);
    if (p->placement == NULL)
        return cli_fail(c, TN_NOTFOUND, "no placement '%s' (sqlite, or one declared with "
                                         "placement.%s.dsn in tenancyd.conf)", pname, pname);
    if (placement_storage_name(tc, p->placement, slug, p->storage, sizeof(p->storage)) != TN_OK)
        return cli_fail(c, TN_TOOBIG, "the storage name of '%s' is too long", slug);
    if (placement_target_of(tc, pname, p->storage, NULL, &p->target) != TN_OK)
        return cli_fail(c, TN_INVALID, "placement '%s' cannot be used", pname);
    p->target.statement_timeout_ms = 0;   /* a migration may take longer than a request */
    int rc = cli_migrations_load(c, &p->set);
    if (rc != 0)
        return rc;
    if (!p->no_seed && tc->seed != NULL && tc->seed[0] != '\0') {
        cli_conf_path(c, tc->seed, p->seed_path, sizeof(p->seed_path));
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
 * ends, then everything is undone (a signal's default action would leave a tenant half made). */
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
    for (size_t i = 0; i < TN_ARRAY_LEN(held_signals); i++)
        sigaction(held_signals[i], &sa, &old[i]);
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

static int provision_run(cli *c, const registry_new *n, provision *p)
{
    char err[1024] = "", why[1400] = "";
    const char *step = "create the storage";
    bool created = false;
    int rc = TN_OK;
    tn_db *db = NULL;
    struct sigaction old[TN_ARRAY_LEN(held_signals)];
    hold_signals(old);
    int64_t t0 = clock_mono_ms();

    if (p->from_template && p->target.kind != TARGET_PG_SCHEMA) {
        rc = migrate_clone(&p->tpl_target, &p->target, err, sizeof(err));
        p->cloned = rc == TN_OK;
    } else {
        p->replayed = p->from_template;   /* schema mode: no clone in PostgreSQL */
        rc = target_create(&p->target, err, sizeof(err));
    }
    created = rc == TN_OK;   /* TN_EXISTS: someone else's storage, left alone */
    if (rc == TN_OK)
        rc = give_storage(c, p, err, sizeof(err));
    if (rc != TN_OK)
        snprintf(why, sizeof(why), "%s", err);

    if (next_step(&rc, &step, "open the storage", why, sizeof(why))) {
        rc = target_open(&p->target, &db, err, sizeof(err));
        if (rc != TN_OK)
            snprintf(why, sizeof(why), "%s", err);
    }
    if ((migrate_count(p->set) > 0 || p->cloned) &&
        next_step(&rc, &step, "apply the migrations", why, sizeof(why))) {
        rc = migrate_apply(db, p->set, &p->mr);
        if (rc != TN_OK) {
            const migrate_error *e = &p->mr.error;
            if (e->statement > 0)
                snprintf(why, sizeof(why), "%s statement %d (line %d): %s", e->file,
                         e->statement, e->line, e->message);
            else
                snprintf(why, sizeof(why), "%s%s%s", e->file, e->file[0] ? ": " : "",
                         e->message);
        }
    }
    if (p->seed_sql != NULL && next_step(&rc, &step, "run the seed", why, sizeof(why))) {
        char id[24];
        snprintf(id, sizeof(id), "%lld", (long long)p->id);
        const char *vals[] = {n->slug, n->name, id};
        const char *label = strrchr(p->seed_path, '/');
        migrate_error e;
        rc = migrate_seed(db, label ? label + 1 : p->seed_path, p->seed_sql, 3, vals, &e);
        p->seeded = rc == TN_OK;
        if (rc != TN_OK)
            snprintf(why, sizeof(why), "%s statement %d (line %d): %s", e.file, e.statement,
                     e.line, e.message);
    }
    db_close(db);
    db = NULL;
    /* Once recorded the tenant is complete: a signal after that changes nothing. */
    if (next_step(&rc, &step, "record it in the registry", why, sizeof(why))) {
        rc = registry_provisioned(c->reg, n->slug, p->mr.to, p->final_state, err, sizeof(err));
        if (rc != TN_OK)
            snprintf(why, sizeof(why), "%s", err);
    }
    p->ms = clock_mono_ms() - t0;
    if (rc == TN_OK) {
        release_signals(old);
        return 0;
    }

    /* Undo: the storage this command made, then the registry entry. */
    char undo[1200] = "";
    char e2[512];
    if (created && target_drop(&p->target, e2, sizeof(e2)) != TN_OK)
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
    return cli_fail(c, rc, "tenant '%s' not created: cannot %s: %s%s", n->slug, step, why, undo);
}

static int provisioned_cb(void *ctx, const tenant_rec *t, const registry_domain *d, int nd)
{
    cli_json_tenant(ctx, t, d, nd);
    return TN_OK;
}

static void provision_report(cli *c, const registry_new *n, int nd, const provision *p)
{
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
        buf_json_str(b, p->placement->name);
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
        buf_json_str(b, p->from_template ? p->tpl->slug : NULL);
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
           (long long)p->id, tenant_state_name(p->final_state), nd, nd == 1 ? "" : "s",
           target_kind_name(p->target.kind), p->storage);
    if (p->cloned)
        printf(", cloned from '%s'", p->tpl->slug);
    if (m->to[0] != '\0')
        printf(", migrations at %s (%d applied)", m->to, m->applied);
    if (p->seeded)
        printf(", seeded");
    printf(", in %lld ms\n", (long long)p->ms);
    if (p->replayed)
        printf("note: PostgreSQL cannot clone a schema: the migrations were replayed instead "
               "of cloning '%s'\n", p->tpl->slug);
}

/* ---- create ----------------------------------------------------------------------------------- */

int cli_tenant_create(cli *c, const cli_args *a)
{
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

    /* --setting KEY=VALUE...: a JSON object for registry_new.settings (a later KEY wins). */
    const char *sets[MAX_CREATE_SETTINGS + 1];
    int ns = cli_opt_all(a, "--setting", sets, MAX_CREATE_SETTINGS + 1);
    if (ns > MAX_CREATE_SETTINGS)
        return cli_usage(c, "at most %d --setting options", MAX_CREATE_SETTINGS);
    buf json = BUF_INIT;
    buf_putc(&json, '{');
    for (int i = 0; i < ns; i++) {
        const char *eq = strchr(sets[i], '=');
        if (eq == NULL || eq == sets[i]) {
            buf_free(&json);
            return cli_usage(c, "--setting expects KEY=VALUE, not '%s'", sets[i]);
        }
        size_t vlen = strlen(eq + 1), klen = (size_t)(eq - sets[i]);
        /* Checked here: the JSON writer would turn bad bytes into U+FFFD, silently. */
        if (utf8_valid_prefix(sets[i], klen) != klen ||
            utf8_valid_prefix(eq + 1, vlen) != vlen) {
            buf_free(&json);
            return cli_fail(c, TN_INVALID, "setting '%.*s' is not UTF-8 text", (int)klen,
                            sets[i]);
        }
        if (i > 0)
            buf_putc(&json, ',');
        buf_json_strn(&json, sets[i], klen);
        buf_putc(&json, ':');
        buf_json_str(&json, eq + 1);
    }
    buf_putc(&json, '}');
    if (json.oom) {
        buf_free(&json);
        return cli_fail(c, TN_NOMEM, "out of memory");
    }
    n.settings = json.p;

    provision p;
    memset(&p, 0, sizeof(p));
    p.final_state = n.state;
    p.from_template = cli_opt(a, "--from-template") != NULL;
    p.no_seed = cli_opt(a, "--no-seed") != NULL;
    rc = provision_prepare(c, cli_opt(a, "--placement"), slug, &p);
    if (rc == 0) {
        n.state = TENANT_PROVISIONING;   /* until its storage is ready */
        n.placement = p.placement->name;
        n.storage = p.storage;
        char err[1024];
        int r = registry_create(c->reg, &n, &p.id, err, sizeof(err));
        rc = r == TN_OK ? provision_run(c, &n, &p) : cli_fail(c, r, "%s", err);
    }
    buf_free(&json);
    if (rc == 0)
        provision_report(c, &n, nd, &p);
    provision_free(&p);
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
    cli_time(t->created_at, ts, sizeof(ts));
    printf("created:     %s\n", ts);
    cli_time(t->updated_at, ts, sizeof(ts));
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
    unsigned all = (1u << TENANT_NSTATES) - 1, from = all & ~(1u << TENANT_DELETING);
    int was = -1;
    int rc = registry_set_state_if(c->reg, slug, from, state, &was, err, sizeof(err));
    if (rc == TN_BUSY && was == TENANT_DELETING)
        return cli_fail(c, rc, state == TENANT_DELETING
                                   ? "tenant '%s' is already deleted"
                                   : "tenant '%s' is deleted: 'tenancy tenant restore %s' "
                                     "brings it back", slug, slug);
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    if (c->json) {
        cli_json_changed(c, slug);
    } else if (state == TENANT_DELETING) {
        char until[32];
        cli_time((int64_t)time(NULL) + c->cfg->tenancy.delete_grace_ms / 1000, until,
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
    rc = registry_set_max_workers(c->reg, slug, mw, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    if (c->json)
        cli_json_changed(c, slug);
    else
        printf("tenant '%s': max_workers = %d%s\n", slug, mw,
               mw == 0 ? " (the host's tenant.max_workers)" : "");
    return 0;
}

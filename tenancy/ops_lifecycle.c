/*
 * ops_lifecycle.c — the end of a tenant's life and the check of the whole: ops_purge and
 * ops_check (see ops.h; `tenancy purge` and `tenancy check` in cli/lifecycle.c call them;
 * delete and restore are ops_set_state and ops_restore, ops_tenant.c).
 *
 * Delete is soft: state deleting (the host answers 404) with deleted_at; for
 * storage.delete_grace the tenant can be restored as it was. A purge then removes it for
 * good, one tenant at a time, each in this order (registry.h has the details):
 *   1. the registry tombstone: its domains released, the row marked (deleted_at 0) so that
 *      it can no longer be restored, while it still reserves the slug and says where the
 *      storage is;
 *   2. the storage dropped (file, schema or database);
 *   3. the registry row removed.
 * Why this order: a purge cut anywhere leaves a tombstone that names the storage still to
 * drop, and the next `purge --expired` finishes it. The other orders fail worse: rows first
 * strands the storage with nothing pointing at it (an orphan only `check` finds) and frees
 * the slug while its storage name is still taken; storage first leaves, after a crash, a
 * restorable tenant whose data is gone.
 *
 * Check is read-only: the registry walked a page at a time; on each server only the names
 * of schemas (t_*) or databases (tenant_*), in the folder only the *.db files; never a
 * catalog-wide listing of tables.
 *
 * Each purged tenant and each problem found goes to the caller's callback as it happens.
 *
 * Must not: drop storage before its tombstone is committed, touch a target whose placement
 * this host does not declare, or print.
 */
#include "core/first.h"
#include "tenancy/ops.h"
#include "core/rc.h"
#include "storage/db.h"
#include "storage/inventory.h"
#include "storage/target.h"
#include "tenancy/lookup.h"
#include "tenancy/placement.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STUCK_AFTER_S 3600

/* ---- purge ------------------------------------------------------------------------------------ */

typedef struct purge_run {
    ops_env *e;
    int64_t cutoff;     /* deleted at or before this may go */
    bool now;           /* named tenants go whenever they were deleted */
    int ok, failed;
    ops_purged_fn fn;
    void *ctx;
} purge_run;

static void purge_failed(purge_run *p, const char *slug, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void purge_failed(purge_run *p, const char *slug, const char *fmt, ...)
{
    char m[1400];
    va_list ap;
    va_start(ap, fmt);
    tn_verrf(m, sizeof(m), TN_ERR, fmt, ap);
    va_end(ap);
    p->failed++;
    ops_purged x = {.slug = slug, .error = m};
    p->fn(p->ctx, &x);
}

static int purge_one(void *ctx, const char *slug)
{
    purge_run *p = ctx;
    ops_env *e = p->e;
    const tenancy_config *tc = e->tc;
    char err[1024];
    registry_life life;
    int rc = registry_life_get(e->reg, slug, &life, err, sizeof(err));
    if (rc != TN_OK) {
        purge_failed(p, slug, "%s", err);
        return rc == TN_NOTFOUND ? TN_OK : rc;   /* a registry that fails stops the run */
    }
    if (life.state != TENANT_DELETING) {
        purge_failed(p, slug, "it is %s, not deleted ('tenancy tenant delete %s' first)",
                     tenant_state_name(life.state), slug);
        return TN_OK;
    }
    if (!p->now && life.deleted_at > 0 && life.deleted_at > p->cutoff) {
        char end[32];
        ops_utc_time(life.deleted_at + tc->delete_grace_ms / 1000, end, sizeof(end));
        purge_failed(p, slug, "its grace period ends at %s (--now purges it earlier)", end);
        return TN_OK;
    }
    tenant_rec *t = NULL;
    rc = registry_fetch(e->reg, LK_SLUG, slug, &t);
    if (rc != TN_OK) {
        purge_failed(p, slug, "cannot read it: %s", tn_rc_str(rc));
        return TN_OK;
    }
    storage_target tg;
    bool has_storage = t->storage[0] != '\0';
    if (has_storage && placement_target(tc, t, &tg) != TN_OK) {
        purge_failed(p, slug, "its placement '%s' is not declared on this host: purge it "
                              "where it is", t->placement);
        free(t);
        return TN_OK;
    }
    if (has_storage)   /* a drop waits for the locks it needs, not a request's timeout */
        tg.statement_timeout_ms = 0;
    char where[4300] = "no storage";
    if (has_storage)
        snprintf(where, sizeof(where), "%s %s", tg.kind == TARGET_SQLITE ? "file"
                                                                        : target_kind_name(tg.kind),
                 tg.name);
    /* 1. the tombstone */
    rc = registry_tombstone(e->reg, slug, p->now ? INT64_MAX : p->cutoff, err, sizeof(err));
    if (rc != TN_OK) {
        purge_failed(p, slug, "%s", err);
        free(t);
        return TN_OK;
    }
    /* 2. the storage */
    if (has_storage) {
        rc = target_drop(&tg, err, sizeof(err));
        if (rc != TN_OK && rc != TN_NOTFOUND) {
            purge_failed(p, slug, "its storage (%s) could not be dropped: %s; the tombstone "
                                  "stays and 'tenancy purge --expired' finishes it", where, err);
            free(t);
            return TN_OK;
        }
    }
    /* 3. the row */
    rc = registry_purge_tombstone(e->reg, slug, err, sizeof(err));
    if (rc != TN_OK) {
        purge_failed(p, slug, "storage dropped, but the registry row stays: %s", err);
        free(t);
        return TN_OK;
    }
    p->ok++;
    ops_purged x = {.slug = slug, .placement = t->placement, .storage = t->storage,
                    .where = where};
    p->fn(p->ctx, &x);
    free(t);
    return TN_OK;
}

typedef struct due_page {
    int n;
    char last[64];
    purge_run *p;
} due_page;

static int due_cb(void *ctx, const char *slug)
{
    due_page *d = ctx;
    d->n++;
    snprintf(d->last, sizeof(d->last), "%s", slug);
    return purge_one(d->p, slug);
}

int ops_purge(ops_env *e, const char *const *slugs, int nslugs, bool expired, bool now,
              ops_purged_fn fn, void *ctx, int *purged, int *failed)
{
    purge_run p = {.e = e, .now = now, .fn = fn, .ctx = ctx};
    p.cutoff = (int64_t)time(NULL) - e->tc->delete_grace_ms / 1000;
    int rc = TN_OK;
    for (int i = 0; i < nslugs && rc == TN_OK; i++)
        rc = purge_one(&p, slugs[i]);
    if (expired && rc == TN_OK) {
        /* Keyset pages of due tenants; a tenant that fails stays behind the cursor. */
        due_page d = {.p = &p};
        bool now_named = p.now;
        p.now = false;
        do {
            d.n = 0;
            rc = registry_list_due(e->reg, p.cutoff, d.last, 100, due_cb, &d);
        } while (rc == TN_OK && d.n == 100);
        p.now = now_named;
    }
    if (rc != TN_OK)
        purge_failed(&p, "", "the registry failed: %s", tn_rc_str(rc));
    *purged = p.ok;
    *failed = p.failed;
    return rc;
}

/* ---- check ------------------------------------------------------------------------------------ */

/* A storage as "kind\twhere\tname": where is the server's URI (PostgreSQL) or "" (SQLite,
 * whose name is a whole path). Only ever compared, never shown (a URI may hold a password). */
typedef struct strset {
    char **v;
    size_t n, cap;
    bool sorted;
} strset;

static int set_add(strset *s, const char *kind, const char *where, const char *name)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        char **nv = realloc(s->v, cap * sizeof(*nv));
        if (nv == NULL)
            return TN_NOMEM;
        s->v = nv;
        s->cap = cap;
    }
    size_t l = strlen(kind) + strlen(where) + strlen(name) + 3;
    char *k = malloc(l);
    if (k == NULL)
        return TN_NOMEM;
    snprintf(k, l, "%s\t%s\t%s", kind, where, name);
    s->v[s->n++] = k;
    s->sorted = false;
    return TN_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool set_has(strset *s, const char *kind, const char *where, const char *name)
{
    if (s->n == 0)
        return false;   /* (qsort and bsearch want an array, even of nothing) */
    if (!s->sorted) {
        qsort(s->v, s->n, sizeof(*s->v), cmp_str);
        s->sorted = true;
    }
    size_t l = strlen(kind) + strlen(where) + strlen(name) + 3;
    char *k = malloc(l);
    if (k == NULL)
        return true;   /* out of memory: claim nothing */
    snprintf(k, l, "%s\t%s\t%s", kind, where, name);
    bool found = bsearch(&k, s->v, s->n, sizeof(*s->v), cmp_str) != NULL;
    free(k);
    return found;
}

static void set_free(strset *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
}

/* A storage location to list: a folder or a server, with the placement that names it. */
typedef struct place {
    int kind;
    const char *where;      /* sqlite_dir, or the server URI */
    const char *pname;      /* the first placement with this kind and where */
    bool listed, down;
    char why[512];
} place;

/* A tenant's storage to look for. */
typedef struct want {
    char *slug, *pname, *name;
    int place;              /* index into places */
} want;

typedef struct check_run {
    ops_env *e;
    ops_problem_fn fn;
    void *ctx;
    strset registered, found;
    place places[MAX_PLACEMENTS];
    int nplaces;
    want *wants;
    size_t nwants, capwants;
    int64_t tenants, now;
    int problems;
    char last[64];
    int page;
    bool oom;
    int repaired;           /* tenants whose role --repair-roles mended (no drift left) */
} check_run;

static void problem(check_run *r, const char *kind, const char *slug, const char *pname,
                    const char *storage, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void problem(check_run *r, const char *kind, const char *slug, const char *pname,
                    const char *storage, const char *fmt, ...)
{
    char m[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof(m), fmt, ap);
    va_end(ap);
    r->problems++;
    ops_problem x = {kind, slug, pname, storage, m};
    r->fn(r->ctx, &x);
}

static int place_of(check_run *r, int kind, const char *where)
{
    for (int i = 0; i < r->nplaces; i++)
        if (r->places[i].kind == kind && strcmp(r->places[i].where, where) == 0)
            return i;
    return -1;
}

static const char *kind_where(const storage_target *t, const tenancy_config *tc)
{
    return t->kind == TARGET_SQLITE ? tc->sqlite_dir : t->server;
}

static int tenant_cb(void *ctx, const tenant_rec *t, const registry_domain *d, int nd)
{
    (void)d, (void)nd;
    check_run *r = ctx;
    const tenancy_config *tc = r->e->tc;
    r->tenants++;
    r->page++;
    snprintf(r->last, sizeof(r->last), "%s", t->slug);
    char since[32];
    if ((t->state == TENANT_MOVING || t->state == TENANT_PROVISIONING) &&
        r->now - t->updated_at > STUCK_AFTER_S) {
        ops_utc_time(t->updated_at, since, sizeof(since));
        problem(r, "stuck", t->slug, t->placement, t->storage,
                "%s since %s (over an hour): a move or creation that died? 'tenancy tenant "
                "resume' ends it; its half-made storage shows as an orphan",
                tenant_state_name(t->state), since);
    }
    if (t->state == TENANT_DELETING) {
        registry_life life;
        char e[256];
        if (registry_life_get(r->e->reg, t->slug, &life, e, sizeof(e)) == TN_OK &&
            life.deleted_at == 0)
            problem(r, "tombstone", t->slug, t->placement, t->storage,
                    "a purge began and did not finish: 'tenancy purge --expired' finishes it");
    }
    if (t->storage[0] == '\0') {
        if (t->state != TENANT_PROVISIONING)
            problem(r, "nostorage", t->slug, t->placement, NULL,
                    "the registry gives it no storage");
        return TN_OK;
    }
    storage_target tg;
    if (placement_target(tc, t, &tg) != TN_OK) {
        problem(r, "placement", t->slug, t->placement, t->storage,
                "placement '%s' is not declared on this host", t->placement);
        return TN_OK;
    }
    const char *kn = target_kind_name(tg.kind);
    int pi = place_of(r, tg.kind, kind_where(&tg, tc));
    if (set_add(&r->registered, kn, tg.kind == TARGET_SQLITE ? "" : tg.server, tg.name) != TN_OK)
        return TN_NOMEM;
    if (r->nwants == r->capwants) {
        size_t cap = r->capwants ? r->capwants * 2 : 256;
        want *nw = realloc(r->wants, cap * sizeof(*nw));
        if (nw == NULL)
            return TN_NOMEM;
        r->wants = nw;
        r->capwants = cap;
    }
    want *w = &r->wants[r->nwants];
    w->slug = strdup(t->slug);
    w->pname = strdup(t->placement);
    w->name = strdup(tg.name);
    w->place = pi;
    if (w->slug == NULL || w->pname == NULL || w->name == NULL) {
        free(w->slug);
        free(w->pname);
        free(w->name);
        return TN_NOMEM;
    }
    r->nwants++;
    return TN_OK;
}

/* One tenant's role problems, as check problems. */
typedef struct role_ctx {
    check_run *r;
    want *w;
} role_ctx;

static void role_quiet(void *ctx, const char *m)
{
    (void)ctx, (void)m;   /* before a repair: only counted */
}

static void role_problem(void *ctx, const char *m)
{
    role_ctx *x = ctx;
    problem(x->r, "role", x->w->slug, x->w->pname, x->w->name, "%s", m);
}

typedef struct found_ctx {
    check_run *r;
    place *p;
} found_ctx;

static int found_cb(void *ctx, const char *name)
{
    found_ctx *f = ctx;
    return set_add(&f->r->found, target_kind_name((target_kind)f->p->kind),
                   f->p->kind == TARGET_SQLITE ? "" : f->p->where, name);
}

static const char *const prefixes[] = {"", "t_", "tenant_"};

static void check_free(check_run *r)
{
    set_free(&r->registered);
    set_free(&r->found);
    for (size_t i = 0; i < r->nwants; i++) {
        free(r->wants[i].slug);
        free(r->wants[i].pname);
        free(r->wants[i].name);
    }
    free(r->wants);
}

int ops_check(ops_env *e, bool repair, bool keep_shared_login, ops_problem_fn fn, void *ctx,
              ops_checked *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    const tenancy_config *tc = e->tc;
    check_run r;
    memset(&r, 0, sizeof(r));
    r.e = e;
    r.fn = fn;
    r.ctx = ctx;
    r.now = (int64_t)time(NULL);
    int rc = TN_OK;
    /* The places to list: each folder or server once. */
    for (int i = 0; i < tc->nplacements; i++) {
        const placement *p = &tc->placements[i];
        const char *where = p->kind == TARGET_SQLITE ? tc->sqlite_dir : p->server;
        if (where == NULL || place_of(&r, p->kind, where) >= 0)
            continue;
        place *pl = &r.places[r.nplaces++];
        pl->kind = p->kind;
        pl->where = where;
        pl->pname = p->name;
    }
    /* The registry, a page at a time. */
    do {
        r.page = 0;
        rc = registry_list(e->reg, -1, NULL, r.last, 500, tenant_cb, &r, NULL);
    } while (rc == TN_OK && r.page == 500);
    if (rc != TN_OK) {
        check_free(&r);
        return tn_errf(err, errlen, rc, "cannot read the registry: %s", tn_rc_str(rc));
    }
    /* What is there: names only. */
    for (int i = 0; i < r.nplaces; i++) {
        place *pl = &r.places[i];
        found_ctx f = {&r, pl};
        int lrc = inventory_list((target_kind)pl->kind, pl->where, prefixes[pl->kind], found_cb,
                                 &f, pl->why, sizeof(pl->why));
        if (lrc == TN_OK || (lrc == TN_NOTFOUND && pl->kind == TARGET_SQLITE)) {
            pl->listed = true;   /* a folder not made yet holds nothing */
        } else if (lrc == TN_NOMEM) {
            r.oom = true;
        } else {
            pl->down = true;
            problem(&r, "unreachable", NULL, pl->pname, NULL, "%s", pl->why);
        }
    }
    /* Missing: registered, not found. A SQLite file outside the folder is looked at. */
    for (size_t i = 0; i < r.nwants; i++) {
        want *w = &r.wants[i];
        place *pl = w->place >= 0 ? &r.places[w->place] : NULL;
        if (pl == NULL || pl->down)
            continue;
        const char *kn = target_kind_name((target_kind)pl->kind);
        if (set_has(&r.found, kn, pl->kind == TARGET_SQLITE ? "" : pl->where, w->name))
            continue;
        if (pl->kind == TARGET_SQLITE) {
            storage_target t = {.kind = TARGET_SQLITE, .name = w->name};
            bool exists = false;
            char why[512];
            if (target_exists(&t, &exists, why, sizeof(why)) == TN_OK && exists)
                continue;
        }
        problem(&r, "missing", w->slug, w->pname, w->name, "the registry points at a %s that "
                "does not exist", pl->kind == TARGET_SQLITE ? "file" : kn);
    }
    /* Tenant roles (PostgreSQL): drift, repaired first with --repair-roles. One server
     * connection per place, opened when its first tenant is looked at. */
    bool any_pg = false;
    tn_db *servers[MAX_PLACEMENTS] = {0};
    for (size_t i = 0; i < r.nwants; i++) {
        want *w = &r.wants[i];
        place *pl = w->place >= 0 ? &r.places[w->place] : NULL;
        if (pl == NULL || pl->down || pl->kind == TARGET_SQLITE)
            continue;
        any_pg = true;
        storage_target tg;
        if (placement_target_of(tc, w->pname, w->name, NULL, &tg) != TN_OK)
            continue;
        tg.keep_host_member = keep_shared_login;
        if (!set_has(&r.found, target_kind_name(tg.kind), pl->where, w->name))
            continue;   /* missing: said above */
        char e2[512];
        if (servers[w->place] == NULL) {
            if (db_open(tg.server, NULL, &servers[w->place], e2, sizeof(e2)) != TN_OK) {
                problem(&r, "unreachable", NULL, pl->pname, NULL, "%s", e2);
                pl->down = true;
                continue;
            }
        }
        role_ctx rc_ctx = {&r, w};
        int n = 0;
        int crc = target_role_check(servers[w->place], &tg, &n,
                                    repair ? role_quiet : role_problem, &rc_ctx, e2, sizeof(e2));
        if (crc == TN_OK && n > 0 && repair) {
            ops_verifiers pw;
            bool own = tg.login_as_role;
            tg.login_as_role = true;   /* a repair sets the password in any case */
            ops_role_verifier(tc, &tg, &pw);
            tg.login_as_role = own;
            if (target_role_repair(servers[w->place], &tg, e2, sizeof(e2)) != TN_OK) {
                problem(&r, "role", w->slug, w->pname, w->name, "repair failed: %s", e2);
            } else {
                crc = target_role_check(servers[w->place], &tg, &n, role_problem, &rc_ctx, e2,
                                        sizeof(e2));
                if (crc == TN_OK && n == 0)
                    r.repaired++;   /* nothing left: mended */
            }
        }
        if (crc != TN_OK && crc != TN_NOTFOUND)
            problem(&r, "role", w->slug, w->pname, w->name, "cannot check its role: %s", e2);
    }
    for (int i = 0; i < MAX_PLACEMENTS; i++)
        db_close(servers[i]);
    if (any_pg && access(tc->role_key_path, R_OK) != 0)
        problem(&r, "rolekey", NULL, NULL, tc->role_key_path,
                "no readable role key: tenant roles have no password, so the console's "
                "logins work only where the server trusts them ('tenancy init' makes one)");
    /* The byte bound reads each backend's memory as the placement's login; a login the
     * server does not let read it leaves the bound to the count alone, silently at run
     * time, so it is told here (and by init). */
    for (int i = 0; i < tc->nplacements; i++) {
        const placement *p = &tc->placements[i];
        int pi = p->server != NULL ? place_of(&r, p->kind, p->server) : -1;
        if (pi < 0 || r.places[pi].down)
            continue;
        bool unread = false;
        char why[512];
        if (ops_memory_unread(p, &unread, why, sizeof(why)) != TN_OK)
            problem(&r, "memory", NULL, p->name, NULL, "cannot tell whether its login may "
                    "read its backends' memory: %s", why);
        else if (unread)
            problem(&r, "memory", NULL, p->name, NULL, OPS_MEMORY_UNREAD "; GRANT "
                    "pg_read_all_stats TO the login, or set max_backend_memory = 0");
        /* The shared login's list of roles: silent at run time but for the stalls it
         * causes, so it is told here. */
        int64_t roles = 0;
        if (ops_login_roles(p, &roles, why, sizeof(why)) != TN_OK)
            problem(&r, "login", NULL, p->name, NULL, "cannot count the roles its login may "
                    "become: %s", why);
        else if (roles > OPS_LOGIN_ROLES_MAX)
            problem(&r, "login", NULL, p->name, NULL, "its login may become %lld roles "
                    "(more than %d): " OPS_LOGIN_ROLES, (long long)roles, OPS_LOGIN_ROLES_MAX,
                    p->name);
    }

    /* Orphans: found, registered by nobody. The registry's own SQLite file is not one. */
    const char *reg_path = strncmp(tc->registry_uri, "sqlite:", 7) == 0 ? tc->registry_uri + 7
                                                                        : "";
    size_t reg_len = strcspn(reg_path, "?");
    for (size_t i = 0; i < r.found.n; i++) {
        char *k = r.found.v[i];
        char *t1 = strchr(k, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (t2 == NULL)
            continue;
        *t1 = '\0';
        *t2 = '\0';
        const char *kind = k, *where = t1 + 1, *name = t2 + 1;
        bool reg_file = strcmp(kind, "sqlite") == 0 && strlen(name) == reg_len &&
                        strncmp(name, reg_path, reg_len) == 0;
        bool known = reg_file || set_has(&r.registered, kind, where, name);
        int pi = place_of(&r, target_kind_parse(kind),
                          strcmp(kind, "sqlite") == 0 ? tc->sqlite_dir : where);
        if (!known)
            problem(&r, "orphan", NULL, pi >= 0 ? r.places[pi].pname : kind, name,
                    "a %s no tenant owns (a kept move source, an interrupted create or "
                    "purge?)", strcmp(kind, "sqlite") == 0 ? "file" : kind);
        *t1 = '\t';
        *t2 = '\t';
    }
    out->tenants = r.tenants;
    out->places = r.nplaces;
    out->repaired = r.repaired;
    out->problems = r.problems;
    check_free(&r);
    if (r.oom)
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    return TN_OK;
}

/*
 * store.c — one tenant's storage, opened for the panel to read.
 *
 * SQLite: the tenant's file opened read-only (db_open with ?mode=ro and read_only), so the
 * database refuses every write whatever SQL reaches it. PostgreSQL: target_open (scoped to
 * the tenant's schema, or its own database). Reads run inside db_read_begin (storage:
 * SQLite's deadline; PostgreSQL's READ ONLY transaction with a transaction-local
 * statement_timeout, search_path and the tenant's role). The SQL console does not come
 * here: the operator's SQL runs on the tenant's own login (tenancy/sandbox.c), as the apps'
 * sandboxed queries do.
 *
 * Must not: read another tenant's schema or file (catalog reads are filtered by this
 * tenant's namespace OID), or leave a transaction open (store_ro_end, store_close).
 */
#include "core/first.h"
#include "admin/page.h"
#include "admin/store.h"
#include "core/clock.h"
#include "core/rc.h"
#include "storage/keep.h"
#include "tenancy/placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *store_quote(arena *ar, const char *ident)
{
    char q[80];
    if (ident == NULL || db_quote_ident(ident, q, sizeof(q)) != TN_OK)
        return NULL;
    return arena_strdup(ar, q);
}

/* Always qualified: PostgreSQL searches pg_catalog before the search path unless it is named
 * in it, so a tenant's table called pg_tables or pg_stat_activity would, unqualified, be the
 * catalog's view of every schema and session. */
char *store_relation(adm_store *s, arena *ar, const char *table)
{
    char *qt = store_quote(ar, table);
    char *qs = store_quote(ar, s->sqlite ? "main" : s->schema);
    if (qt == NULL || qs == NULL)
        return NULL;
    return arena_sprintf(ar, "%s.%s", qs, qt);
}


/* ---- kept PostgreSQL connections -------------------------------------------------------------
 * A new backend pays for its catalog caches on its first queries (with many schemas, the
 * planning of the first catalog query alone is slow), so each worker keeps a few of its panel's
 * connections between requests, one per (server, database). They are the panel's own:
 * never lent to tenant code, and never given the operator's SQL. A connection is kept only
 * when it is clean after the request (its read-only transaction rolled back), and each is
 * closed after its max_uses requests, which bounds the catalog memory a backend collects as it
 * visits schemas. */
static db_keep kept = {.max_uses = 200};

static void keep_key(const storage_target *t, char *key, size_t n)
{
    /* a group target's connection is its group login's, which only its group's tenants may
     * use */
    snprintf(key, n, "%d|%s|%s|%s", (int)t->kind, t->group_role ? t->group_role : "",
             t->kind == TARGET_PG_DATABASE ? t->name : "", t->server ? t->server : "");
}

void store_fini(void) { db_keep_close_all(&kept); }

int store_open(adm_req *a, const tenant_rec *t, adm_store *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof(*s));
    int rc = placement_target(adm.env.tcfg, t, &s->target);
    if (rc == TN_NOTFOUND) {
        return tn_errf(err, errlen, rc,
                       "placement '%s' is not configured on this host", t->placement);
    }
    if (rc != TN_OK) {
        return tn_errf(err, errlen, rc, "this tenant has no storage yet");
    }
    s->sqlite = s->target.kind == TARGET_SQLITE;
    if (s->sqlite) {
        db_options o = {.busy_timeout_ms = 2000, .read_only = true};
        char *uri = arena_sprintf(a->r->arena, "sqlite:%s?mode=ro", s->target.name);
        if (uri == NULL || strchr(s->target.name, '?') != NULL) {
            return tn_errf(err, errlen, TN_INVALID, "cannot name the tenant's file");
        }
        rc = db_open(uri, &o, &s->db, err, errlen);
        return rc;
    }
    storage_target tt = s->target;
    keep_key(&tt, s->key, sizeof(s->key));
    /* The schema target_tables lists: the tenant's own, or public in its own database. */
    snprintf(s->schema, sizeof(s->schema), "%s",
             s->target.kind == TARGET_PG_SCHEMA ? s->target.name : "public");
    s->db = db_keep_take(&kept, s->key, &s->uses);
    for (int attempt = 0;; attempt++) {
        if (s->db == NULL) {
            s->uses = 0;
            rc = target_open(&tt, &s->db, err, errlen);
            if (rc != TN_OK)
                return rc;
            /* The panel runs its own transactions (store_ro_begin): no per-statement scope. */
            if (s->target.kind == TARGET_PG_SCHEMA)
                db_set_schema_scope(s->db, NULL);
        }
        rc = db_schema_exists(s->db, s->schema);
        if (rc != TN_IO || attempt > 0 || s->uses == 0)
            break;
        db_close(s->db);   /* a kept connection the server dropped: one new one */
        s->db = NULL;
    }
    s->uses++;
    if (rc != TN_OK) {
        rc = tn_errf(err, errlen, rc, "the tenant's schema is missing: %s",
                     rc == TN_NOTFOUND ? "no such schema" : tn_db_error(s->db));
        db_close(s->db);
        s->db = NULL;
        return rc;
    }
    return TN_OK;
}

void store_close(adm_store *s)
{
    if (s->db == NULL)
        return;
    if (s->sqlite) {
        db_close(s->db);
    } else {
        if (!db_is_clean(s->db))
            tn_db_rollback(s->db);
        db_keep_put(&kept, s->db, s->key, s->uses);
    }
    s->db = NULL;
}

/* ---- read-only transactions and deadlines -------------------------------------------------- */

int store_ro_begin(adm_store *s, int64_t timeout_ms, char *err, size_t errlen)
{
    db_read_opts o = {.timeout_ms = timeout_ms,
                      .schema = s->sqlite ? NULL : s->schema,
                      .role = s->target.role};
    int rc = db_read_begin(s->db, &o);
    if (rc != TN_OK)
        rc = tn_errf(err, errlen, rc, "%s", tn_db_error(s->db));
    return rc;
}

void store_ro_end(adm_store *s)
{
    db_read_end(s->db);
}

/* ---- tables -------------------------------------------------------------------------------- */

struct tables_ctx {
    arena *ar;
    const char **v;
    int n, cap;
    bool oom;
};

static int add_table(void *ctx, const char *name)
{
    struct tables_ctx *c = ctx;
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 32;
        const char **nv = arena_alloc(c->ar, (size_t)cap * sizeof(*nv));
        if (nv == NULL) {
            c->oom = true;
            return TN_NOMEM;
        }
        if (c->n)
            memcpy(nv, c->v, (size_t)c->n * sizeof(*nv));
        c->v = nv;
        c->cap = cap;
    }
    c->v[c->n] = arena_strdup(c->ar, name);
    if (c->v[c->n] == NULL) {
        c->oom = true;
        return TN_NOMEM;
    }
    c->n++;
    return TN_OK;
}

static int cmp_names(const void *x, const void *y)
{
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

int store_tables(adm_store *s, arena *ar, const char ***names, char *err, size_t errlen)
{
    struct tables_ctx c = {.ar = ar};
    int rc = target_tables(s->db, &s->target, add_table, &c);
    if (rc != TN_OK) {
        tn_errf(err, errlen, rc, "%s", c.oom ? "out of memory" : tn_db_error(s->db));
        return -1;
    }
    if (c.n > 1)
        qsort(c.v, (size_t)c.n, sizeof(*c.v), cmp_names);
    *names = c.v;
    return c.n;
}

bool store_has_table(adm_store *s, arena *ar, const char *name)
{
    const char **names;
    char err[256];
    int n = store_tables(s, ar, &names, err, sizeof(err));
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return true;
    return false;
}

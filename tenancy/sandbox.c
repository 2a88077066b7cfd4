/*
 * sandbox.c — the connection a tenant's own SQL runs on, and the read-only query (sandbox.h).
 *
 * Kept connections: a new PostgreSQL login as a tenant role costs a SCRAM exchange and a
 * backend whose catalog caches are cold, so each process keeps a few sandbox connections,
 * one per tenant (server, database and role). A kept connection is the tenant's own login:
 * it can reach nothing another tenant's could not, so keeping it crosses no boundary. It is
 * kept only when clean after its read-only transaction (storage's db_is_clean: no open
 * transaction, no session state left), and closed after its max_uses queries (storage/keep.h).
 *
 * Must not: run SQL other than through db_query_capped, open a tenant's storage writable, or
 * log in as the placement's shared login for PostgreSQL.
 */
#include "core/first.h"
#include "tenancy/sandbox.h"
#include "core/clock.h"
#include "core/rc.h"
#include "storage/keep.h"
#include "tenancy/placement.h"
#include "tenancy/rolekey.h"

#include <stdio.h>
#include <string.h>

static db_keep kept = {.max_uses = 500};

void sandbox_fini(void) { db_keep_close_all(&kept); }

static int open_sqlite(sandbox *s, arena *a, char *err, size_t errlen)
{
    db_options o = {.busy_timeout_ms = 2000, .read_only = true};
    if (strchr(s->target.name, '?') != NULL)
        return tn_errf(err, errlen, TN_INVALID, "cannot name the tenant's file");
    char *uri = arena_sprintf(a, "sqlite:%s?mode=ro", s->target.name);
    if (uri == NULL)
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    return db_open(uri, &o, &s->db, err, errlen);
}

/* The role given the verifier of its derived password, by the host's own login (it made the
 * role, so it may): the first login as a role of a shared-login placement. */
static int set_password(const tenancy_config *c, const storage_target *t, char *err,
                        size_t errlen)
{
    char pw[65], v[200];
    int rc = rolekey_password(c, t->role, pw, err, errlen);
    if (rc == TN_OK)
        rc = rolekey_verifier(pw, v, sizeof(v));
    memset(pw, 0, sizeof(pw));
    if (rc != TN_OK)
        return rc;
    storage_target tt = *t;
    tt.role_verifier = v;
    return target_role_ensure(&tt, err, errlen);
}

static int open_pg(const tenancy_config *c, sandbox *s, char *err, size_t errlen)
{
    storage_target tt = s->target;
    if (tt.role == NULL)
        return tn_errf(err, errlen, TN_INVALID, "the tenant has no role (tenancy check)");
    char pw[65] = "", login[4096];
    int rc = rolekey_password(c, tt.role, pw, err, errlen);
    if (rc != TN_OK && rc != TN_NOTFOUND)
        return rc;   /* no key at all: the server may trust the role without one */
    rc = db_uri_with(tt.server, NULL, tt.role, pw[0] ? pw : NULL, login, sizeof(login), err,
                     errlen);
    memset(pw, 0, sizeof(pw));
    if (rc != TN_OK)
        return rc;
    tt.server = login;
    tt.group_role = NULL;   /* the tenant's own login, never its group's */
    rc = target_open(&tt, &s->db, err, errlen);
    if (rc != TN_OK && strstr(err, "password authentication failed") != NULL) {
        /* No password yet (schema mode makes none) or an old one (a new role key). */
        rc = set_password(c, &s->target, err, errlen);
        if (rc == TN_OK)
            rc = target_open(&tt, &s->db, err, errlen);
    }
    memset(login, 0, sizeof(login));
    if (rc != TN_OK)
        return rc;
    /* Each query runs in its own read-only transaction that sets the path and the role
     * itself (db_read_begin): no per-statement scope. */
    if (s->target.kind == TARGET_PG_SCHEMA)
        db_set_schema_scope(s->db, NULL);
    return TN_OK;
}

int sandbox_open(const tenancy_config *c, const tenant_rec *t, arena *a, sandbox *s,
                 char *err, size_t errlen)
{
    memset(s, 0, sizeof(*s));
    int rc = placement_target(c, t, &s->target);
    if (rc == TN_NOTFOUND)
        return tn_errf(err, errlen, rc, "placement '%s' is not configured on this host",
                       t->placement);
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "the tenant has no storage yet");
    s->sqlite = s->target.kind == TARGET_SQLITE;
    snprintf(s->schema, sizeof(s->schema), "%s",
             s->target.kind == TARGET_PG_SCHEMA ? s->target.name : "public");
    snprintf(s->key, sizeof(s->key), "%d|%s|%s|%s", (int)s->target.kind,
             s->target.server ? s->target.server : "", s->target.name,
             s->target.role ? s->target.role : "");
    s->db = db_keep_take(&kept, s->key, &s->uses);
    if (s->db != NULL)
        return TN_OK;
    return s->sqlite ? open_sqlite(s, a, err, errlen) : open_pg(c, s, err, errlen);
}

void sandbox_close(sandbox *s, bool keep)
{
    if (s->db == NULL)
        return;
    /* SQLite files are opened afresh (cheap, and never a stale inode after an import or a
     * move replaced the file). */
    if (keep && !s->sqlite)
        db_keep_put(&kept, s->db, s->key, s->uses + 1);
    else
        db_close(s->db);
    s->db = NULL;
}

int sandbox_query(sandbox *s, const char *sql, int nparams, const char *const *params,
                  int row_cap, int64_t timeout_ms, arena *a, db_result **out, char *err,
                  size_t errlen)
{
    db_read_opts o = {.timeout_ms = timeout_ms,
                      .schema = s->sqlite ? NULL : s->schema,
                      .role = s->target.role};
    int rc = db_query_capped(s->db, sql, nparams, params, row_cap, &o, a, out);
    if (rc != TN_OK)
        rc = tn_errf(err, errlen, rc, "%s", tn_db_error(s->db));
    return rc;
}

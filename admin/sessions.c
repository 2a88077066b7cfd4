/*
 * sessions.c — the panel's tables admin_sessions and admin_throttle (see sessions.h).
 *
 * The one file that names them: their layout, their creation on the registry's connection,
 * the columns added to them since their first layout, and every statement on them. The
 * tables use only types both backends spell alike (TEXT, BIGINT), so one text creates them
 * on SQLite and on PostgreSQL (where the registry connection's search_path puts them in the
 * registry's schema). Owns no policy: how long a session lasts, when a login locks and
 * which password a session needs are auth.c's.
 *
 * Must not: read or write any other table, keep a session id (only its hash reaches here),
 * or build SQL from anything but the constants below.
 */
#include "core/first.h"
#include "admin/sessions.h"
#include "core/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct panel_table {
    const char *name, *create;
} panel_tables[] = {
    {"admin_sessions",
     "CREATE TABLE IF NOT EXISTS admin_sessions ("
     " id_hash TEXT PRIMARY KEY, csrf TEXT NOT NULL, username TEXT NOT NULL,"
     " client TEXT NOT NULL, created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL,"
     " pw_fp TEXT NOT NULL DEFAULT '')"},
    {"admin_throttle",
     "CREATE TABLE IF NOT EXISTS admin_throttle ("
     " key TEXT PRIMARY KEY, failures BIGINT NOT NULL, first_at BIGINT NOT NULL,"
     " locked_until BIGINT NOT NULL)"},
};

/* Columns added after a table's first layout: a registry prepared by an older version has
 * the table without them. Each needs a default (the existing rows get it) and is in the
 * CREATE text above too. */
static const struct added_column {
    const char *table, *column, *add;
} added_columns[] = {
    /* the password fingerprint a session was opened under; '' in the rows from before,
     * which then match no user and are refused */
    {"admin_sessions", "pw_fp", "ALTER TABLE admin_sessions ADD COLUMN pw_fp TEXT NOT NULL "
                                "DEFAULT ''"},
};

static bool is_pg(tn_db *db) { return strcmp(tn_db_backend(db), "postgres") == 0; }

/* TN_OK (there), TN_NOTFOUND, or an error. On PostgreSQL the name is looked up through the
 * connection's search_path, where the registry connection finds its own schema. */
static int table_exists(tn_db *db, const char *table)
{
    char v[8];
    const char *p[] = {table};
    return db_query_value(db, v, sizeof(v),
                          is_pg(db) ? "SELECT 1 WHERE to_regclass($1) IS NOT NULL"
                                    : "SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                      "name = $1",
                          1, p);
}

static int column_exists(tn_db *db, const char *table, const char *column)
{
    char v[8];
    const char *p[] = {table, column};
    return db_query_value(db, v, sizeof(v),
                          is_pg(db) ? "SELECT 1 FROM pg_attribute WHERE attrelid = "
                                      "to_regclass($1) AND attname = $2 AND NOT attisdropped"
                                    : "SELECT 1 FROM pragma_table_info($1) WHERE name = $2",
                          2, p);
}

/* Run a statement that makes `what` exist; `there` says whether it does. Another worker or
 * host may be doing the same at this moment (PostgreSQL can then refuse the second CREATE
 * even with IF NOT EXISTS): what counts is that it is there afterwards. */
static int make(tn_db *db, const char *sql, int (*there)(tn_db *, const char *, const char *),
                const char *table, const char *column, char *err, size_t errlen)
{
    int rc = there(db, table, column);
    if (rc == TN_OK)
        return TN_OK;
    if (rc != TN_NOTFOUND)
        return tn_errf(err, errlen, rc, "cannot read the catalog for %s: %s", table,
                       tn_db_error(db));
    rc = tn_db_exec(db, sql, 0, NULL);
    if (rc != TN_OK && there(db, table, column) != TN_OK)
        return tn_errf(err, errlen, rc, "cannot create %s%s%s (the registry's owner can, once): "
                       "%s", table, column ? "." : "", column ? column : "", tn_db_error(db));
    if (rc == TN_OK)
        log_info("admin: created %s%s%s in the registry", table, column ? "." : "",
                 column ? column : "");
    return TN_OK;
}

static int table_there(tn_db *db, const char *table, const char *column)
{
    (void)column;
    return table_exists(db, table);
}

int sessions_prepare(tn_db *db, char *err, size_t errlen)
{
    for (size_t i = 0; i < TN_ARRAY_LEN(panel_tables); i++) {
        int rc = make(db, panel_tables[i].create, table_there, panel_tables[i].name, NULL,
                      err, errlen);
        if (rc != TN_OK)
            return rc;
    }
    for (size_t i = 0; i < TN_ARRAY_LEN(added_columns); i++) {
        const struct added_column *c = &added_columns[i];
        int rc = make(db, c->add, column_exists, c->table, c->column, err, errlen);
        if (rc != TN_OK)
            return rc;
    }
    return TN_OK;
}

static void i64s(char *out, size_t n, int64_t v) { snprintf(out, n, "%lld", (long long)v); }

/* ---- sessions -------------------------------------------------------------------------------- */

int sessions_find(tn_db *db, const char *id_hash, int64_t now, session_rec *out)
{
    char n[24];
    i64s(n, sizeof(n), now);
    const char *p[] = {id_hash, n};
    tn_rows *rows = NULL;
    int rc = tn_db_query(db, &rows, "SELECT username, csrf, pw_fp FROM admin_sessions "
                                    "WHERE id_hash = $1 AND expires_at > $2", 2, p);
    if (rc != TN_OK)
        return rc;
    rc = tn_rows_next(rows);
    if (rc == TN_OK) {
        const char *user = tn_rows_get(rows, 0), *csrf = tn_rows_get(rows, 1),
                   *fp = tn_rows_get(rows, 2);
        snprintf(out->user, sizeof(out->user), "%s", user ? user : "");
        snprintf(out->csrf, sizeof(out->csrf), "%s", csrf ? csrf : "");
        snprintf(out->pw_fp, sizeof(out->pw_fp), "%s", fp ? fp : "");
    } else if (rc == TN_DONE) {
        rc = TN_NOTFOUND;
    }
    tn_rows_free(rows);
    return rc;
}

int sessions_add(tn_db *db, const char *id_hash, const char *csrf, const char *user,
                 const char *client, int64_t created, int64_t expires, const char *pw_fp)
{
    char c[24], e[24];
    i64s(c, sizeof(c), created);
    i64s(e, sizeof(e), expires);
    const char *p[] = {id_hash, csrf, user, client, c, e, pw_fp};
    return tn_db_exec(db, "INSERT INTO admin_sessions (id_hash, csrf, username, client, "
                          "created_at, expires_at, pw_fp) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                      7, p);
}

int sessions_end(tn_db *db, const char *id_hash)
{
    const char *p[] = {id_hash};
    return tn_db_exec(db, "DELETE FROM admin_sessions WHERE id_hash = $1", 1, p);
}

struct holder {
    char *user, *pw_fp;
};

int sessions_sweep(tn_db *db, int64_t now, sessions_fp_fn fp, void *ctx)
{
    char n[24];
    i64s(n, sizeof(n), now);
    const char *np[] = {n};
    int rc = tn_db_exec(db, "DELETE FROM admin_sessions WHERE expires_at <= $1", 1, np);
    if (rc != TN_OK)
        return rc;
    int ended = (int)tn_db_changes(db);

    /* Who holds the sessions left, by password: a few rows whatever the number of sessions.
     * Read whole before anything is deleted through the same connection. */
    tn_rows *rows = NULL;
    struct holder *h = NULL;
    size_t nh = 0, cap = 0;
    rc = tn_db_query(db, &rows, "SELECT DISTINCT username, pw_fp FROM admin_sessions", 0, NULL);
    while (rc == TN_OK && (rc = tn_rows_next(rows)) == TN_OK) {
        if (nh == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            struct holder *nv = realloc(h, ncap * sizeof(*h));
            if (nv == NULL) {
                rc = TN_NOMEM;
                break;
            }
            h = nv;
            cap = ncap;
        }
        const char *u = tn_rows_get(rows, 0), *f = tn_rows_get(rows, 1);
        h[nh].user = strdup(u ? u : "");
        h[nh].pw_fp = strdup(f ? f : "");
        if (h[nh].user == NULL || h[nh].pw_fp == NULL) {
            free(h[nh].user);
            free(h[nh].pw_fp);
            rc = TN_NOMEM;
            break;
        }
        nh++;
    }
    tn_rows_free(rows);
    if (rc == TN_DONE)
        rc = TN_OK;

    for (size_t i = 0; i < nh; i++) {
        char cur[65];
        int frc = rc == TN_OK ? fp(ctx, h[i].user, cur) : TN_ERR;
        /* Fingerprints are no secret here: both come from our own files, none from a
         * request, so a plain comparison tells nothing to anyone. */
        if (frc == TN_NOTFOUND || (frc == TN_OK && strcmp(cur, h[i].pw_fp) != 0)) {
            const char *p[] = {h[i].user, h[i].pw_fp};
            rc = tn_db_exec(db, "DELETE FROM admin_sessions WHERE username = $1 AND pw_fp = $2",
                            2, p);
            if (rc == TN_OK)
                ended += (int)tn_db_changes(db);
        }
        free(h[i].user);
        free(h[i].pw_fp);
    }
    free(h);
    return rc == TN_OK ? ended : rc;
}

/* ---- failed-login counters ------------------------------------------------------------------ */

int throttle_locked_until(tn_db *db, const char *key, int64_t *until)
{
    char v[32];
    const char *p[] = {key};
    *until = 0;
    int rc = db_query_value(db, v, sizeof(v),
                            "SELECT locked_until FROM admin_throttle WHERE key = $1", 1, p);
    if (rc == TN_OK)
        *until = atoll(v);
    return rc == TN_NOTFOUND ? TN_OK : rc;
}

int throttle_fail(tn_db *db, const char *key, int64_t now, int64_t window_start,
                  int64_t *failures)
{
    /* Reading the count and writing it back plus one lost all but one of the failures that
     * overlapped in several workers. The upsert adds one under the row's lock (PostgreSQL)
     * or the write lock (SQLite) and returns the new count. */
    char n[24], since[24], v[24];
    i64s(n, sizeof(n), now);
    i64s(since, sizeof(since), window_start);
    const char *p[] = {key, n, since};
    int rc = db_query_value(db, v, sizeof(v),
                            "INSERT INTO admin_throttle (key, failures, first_at, locked_until) "
                            "VALUES ($1, 1, $2, 0) ON CONFLICT (key) DO UPDATE SET "
                            "failures = CASE WHEN admin_throttle.first_at < $3 THEN 1 "
                            "ELSE admin_throttle.failures + 1 END, "
                            "first_at = CASE WHEN admin_throttle.first_at < $3 "
                            "THEN excluded.first_at ELSE admin_throttle.first_at END "
                            "RETURNING failures", 3, p);
    *failures = rc == TN_OK ? atoll(v) : 0;
    return rc;
}

int throttle_lock(tn_db *db, const char *key, int64_t until)
{
    char u[24];
    i64s(u, sizeof(u), until);
    const char *p[] = {key, u};
    return tn_db_exec(db, "UPDATE admin_throttle SET locked_until = $2 WHERE key = $1 AND "
                          "locked_until < $2", 2, p);
}

int throttle_clear(tn_db *db, const char *key1, const char *key2)
{
    const char *p[] = {key1, key2};
    return tn_db_exec(db, "DELETE FROM admin_throttle WHERE key = $1 OR key = $2", 2, p);
}

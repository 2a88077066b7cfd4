/*
 * readonly.c — reading with a time limit (db_read_begin/db_read_end) and the sandboxed,
 * capped query (db_query_capped), see db.h; PostgreSQL's half here, SQLite's in
 * sqlite_read.c (it needs the library's own handle).
 *
 * PostgreSQL: a READ ONLY transaction with a transaction-local statement_timeout,
 * search_path and role, checked to be read-only (and, strict, checked not to run as a role
 * that could act outside the database: a superuser, or a member of
 * pg_execute_server_program, pg_read_server_files, pg_write_server_files or
 * pg_signal_backend could run programs, read files or stop other sessions even in a read-only
 * transaction). The sandboxed query runs there through a cursor (the server stops at the cap;
 * PQexecParams would read a result of millions of rows whole), a statement that was given a
 * transaction id (it wrote despite READ ONLY, as lo_create() can) is refused and its rows
 * dropped, and the transaction is always rolled back. The tenant's own login role is the
 * caller's choice of connection (the panel's store.c): nothing here can change identity.
 *
 * Must not: leave a transaction open, or run the caller's SQL outside READ ONLY.
 */
#include "core/first.h"
#include "storage/db_int.h"
#include "core/buf.h"
#include "core/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *db_result_grow(arena *a, const char ***rows, int n, int *cap)
{
    if (n < *cap)
        return rows;
    int ncap = *cap ? *cap * 2 : 64;
    const char ***nr = arena_alloc(a, (size_t)ncap * sizeof(*nr));
    if (nr == NULL)
        return NULL;
    if (n > 0)
        memcpy(nr, rows, (size_t)n * sizeof(*nr));
    *cap = ncap;
    return nr;
}

static bool is_pg(const tn_db *db)
{
    return db->drv->dialect == DB_DIALECT_PG;
}

/* ---- PostgreSQL ------------------------------------------------------------------------- */

static int pg_read_begin(tn_db *db, const db_read_opts *o)
{
    int rc = tn_db_exec(db, "BEGIN READ ONLY", 0, NULL);
    if (rc != TN_OK)
        return rc;
    char ms[24], path[80] = "";
    snprintf(ms, sizeof(ms), "%lld", (long long)o->timeout_ms);
    if (o->schema != NULL && o->schema[0] != '\0' &&
        db_quote_ident(o->schema, path, sizeof(path)) != TN_OK) {
        db_read_end(db);
        return db_set_error(db, TN_INVALID, "the schema name cannot be quoted");
    }
    const char *p[] = {ms, path, o->role != NULL ? o->role : ""};
    tn_rows *rows = NULL;
    rc = tn_db_query(db, &rows,
                     "SELECT set_config('statement_timeout', $1, true), "
                     "CASE WHEN $2 = '' THEN '' ELSE set_config('search_path', $2, true) END, "
                     "CASE WHEN $3 = '' THEN '' ELSE set_config('role', $3, true) END, "
                     "current_setting('transaction_read_only'), "
                     "(SELECT r.rolsuper "
                     " OR pg_has_role(current_user, 'pg_execute_server_program', 'MEMBER') "
                     " OR pg_has_role(current_user, 'pg_read_server_files', 'MEMBER') "
                     " OR pg_has_role(current_user, 'pg_write_server_files', 'MEMBER') "
                     " OR pg_has_role(current_user, 'pg_signal_backend', 'MEMBER') "
                     " FROM pg_roles r WHERE r.rolname = current_user)::text",
                     3, p);
    char why[DB_ERRLEN] = "";
    if (rc == TN_OK && tn_rows_next(rows) == TN_OK) {
        const char *ro = tn_rows_get(rows, 3), *danger = tn_rows_get(rows, 4);
        if (ro == NULL || strcmp(ro, "on") != 0) {
            rc = tn_errf(why, sizeof(why), TN_DENIED, "the transaction is not read-only");
        } else if (o->strict && (danger == NULL || strcmp(danger, "false") != 0)) {
            rc = tn_errf(why, sizeof(why), TN_DENIED,
                         "the SQL console does not run as a PostgreSQL superuser or a member of "
                         "pg_execute_server_program, pg_read_server_files, pg_write_server_files "
                         "or pg_signal_backend: the tenant's role %s was given rights it must "
                         "not have (see tenancy check)",
                         o->role != NULL ? o->role : "");
        }
    } else if (rc == TN_OK) {
        rc = tn_errf(why, sizeof(why), TN_ERR, "cannot set up the read-only transaction");
    } else {
        str_copy(why, sizeof(why), tn_db_error(db));
    }
    tn_rows_free(rows);
    if (rc != TN_OK) {
        db_read_end(db);   /* it clears the connection's message: why keeps it */
        rc = db_set_error(db, rc, "%s", why);
    }
    return rc;
}

/* Only a query can be a cursor; any other statement (SHOW, EXPLAIN, or a write the
 * transaction then refuses) runs as it is, after the savepoint has undone the failed
 * DECLARE. */
static int pg_query_cursor(tn_db *db, const char *sql, int nparams, const char *const *params,
                           int row_cap, tn_rows **rows)
{
    buf declare = BUF_INIT;
    buf_puts(&declare, "DECLARE tn_admin_c NO SCROLL CURSOR FOR ");
    buf_puts(&declare, sql);
    char fetch[64];
    snprintf(fetch, sizeof(fetch), "FETCH FORWARD %d FROM tn_admin_c", row_cap + 1);
    int rc = declare.oom ? db_set_error(db, TN_NOMEM, "out of memory")
                         : tn_db_exec(db, "SAVEPOINT tn_admin_q", 0, NULL);
    if (rc == TN_OK && tn_db_exec(db, declare.p, nparams, params) == TN_OK) {
        buf_free(&declare);
        return tn_db_query(db, rows, fetch, 0, NULL);
    }
    buf_free(&declare);
    if (rc != TN_OK)
        return rc;
    rc = tn_db_exec(db, "ROLLBACK TO SAVEPOINT tn_admin_q", 0, NULL);
    if (rc != TN_OK)
        return rc;
    return tn_db_query(db, rows, sql, nparams, params);
}

static int pg_query_capped(tn_db *db, const char *sql, int nparams, const char *const *params,
                           int row_cap, arena *a, db_result *res)
{
    tn_rows *rows = NULL;
    int rc = pg_query_cursor(db, sql, nparams, params, row_cap, &rows);
    if (rc != TN_OK)
        return rc;
    res->ncols = tn_rows_ncols(rows);
    res->cols = arena_calloc(a, (size_t)(res->ncols ? res->ncols : 1) * sizeof(char *));
    for (int i = 0; res->cols != NULL && i < res->ncols; i++) {
        const char *n = tn_rows_colname(rows, i);
        res->cols[i] = arena_strdup(a, n != NULL ? n : "?");
    }
    int cap = 0;
    while (res->cols != NULL && (rc = tn_rows_next(rows)) == TN_OK) {
        if (res->nrows == row_cap) {
            res->truncated = true;
            break;
        }
        const char **row = arena_calloc(a, (size_t)(res->ncols ? res->ncols : 1) *
                                               sizeof(char *));
        if (row == NULL || (res->rows = db_result_grow(a, res->rows, res->nrows, &cap)) == NULL)
            break;
        res->rows[res->nrows++] = row;
        for (int i = 0; i < res->ncols; i++) {
            const char *v = tn_rows_get(rows, i);
            row[i] = v != NULL ? arena_strdup(a, v) : NULL;
        }
    }
    tn_rows_free(rows);
    if (rc != TN_OK && rc != TN_DONE)
        return rc;
    if (res->cols == NULL || (rc == TN_OK && !res->truncated))
        return db_set_error(db, TN_NOMEM, "out of memory");
    /* A few functions still write in a READ ONLY transaction (lo_create() does on some
     * servers). Whatever wrote was given a transaction id: such a statement is refused and
     * its result not shown (the transaction is rolled back in any case). */
    char xid[8] = "";
    rc = db_query_value(db, xid, sizeof(xid),
                        "SELECT (pg_catalog.txid_current_if_assigned() IS NOT NULL)::text", 0,
                        NULL);
    if (rc != TN_OK || strcmp(xid, "false") != 0) {
        res->nrows = 0;
        res->truncated = false;
        return db_set_error(db, TN_DENIED, "%s",
                            rc != TN_OK ? "refused: cannot tell whether the statement wrote"
                                        : "refused: the statement wrote to the database "
                                          "(rolled back: the console is read-only)");
    }
    return TN_OK;
}

/* ---- the entry points ------------------------------------------------------------------- */

int db_read_begin(tn_db *db, const db_read_opts *o)
{
    if (db == NULL)
        return TN_INVALID;
    if (o == NULL || o->timeout_ms <= 0)
        return db_set_error(db, TN_INVALID, "db_read_begin: no time limit");
    db->err[0] = '\0';
    if (!is_pg(db)) {
        db_sqlite_deadline(db, clock_mono_ms() + o->timeout_ms);
        return TN_OK;
    }
    return pg_read_begin(db, o);
}

void db_read_end(tn_db *db)
{
    if (db == NULL)
        return;
    if (!is_pg(db)) {
        db_sqlite_deadline(db, 0);
        return;
    }
    tn_db_rollback(db);
    if (!db_is_clean(db))
        db_reset(db);
}

int db_query_capped(tn_db *db, const char *sql, int nparams, const char *const *params,
                    int row_cap, const db_read_opts *o, arena *a, db_result **out)
{
    if (out != NULL)
        *out = NULL;
    if (db == NULL)
        return TN_INVALID;
    if (sql == NULL || o == NULL || a == NULL || out == NULL || row_cap < 0 || nparams < 0 ||
        nparams > DB_MAX_PARAMS || (nparams > 0 && params == NULL))
        return db_set_error(db, TN_INVALID, "db_query_capped: no SQL, options, arena or result");
    db->err[0] = '\0';
    db_result *res = arena_calloc(a, sizeof(*res));
    if (res == NULL)
        return db_set_error(db, TN_NOMEM, "out of memory");
    db_read_opts strict = *o;
    strict.strict = true;
    int rc = db_read_begin(db, &strict);
    if (rc != TN_OK)
        return rc;
    rc = is_pg(db) ? pg_query_capped(db, sql, nparams, params, row_cap, a, res)
                   : db_sqlite_query_capped(db, sql, nparams, params, row_cap, a, res);
    /* The end rolls back, which clears the message: keep the statement's. */
    char why[DB_ERRLEN];
    str_copy(why, sizeof(why), tn_db_error(db));
    db_read_end(db);
    if (rc != TN_OK)
        return db_set_error(db, rc, "%s", why);
    *out = res;
    return TN_OK;
}

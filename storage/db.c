/*
 * db.c — the driver-neutral half of the storage layer (see db.h and db_int.h).
 *
 * Owns: parsing connection URIs and picking a driver, the argument checks every public
 * tn_db_* / tn_rows_* function makes before a driver runs, the transaction flag, the error
 * buffer, the list of open row sets (so closing or resetting a connection can never leave a
 * row set pointing at freed driver state), and db_query_value. Loading
 * the PostgreSQL driver is db_load.c's (so a host that only opens sqlite: URIs never maps
 * libpq), SQL text (identifier quoting, scripts) is script.c's, the catalog is catalog.c's, the read-only sandbox
 * readonly.c's.
 *
 * Must not: include sqlite3.h or libpq-fe.h (drivers own those), put anything but a
 * db_quote_ident() result or constant text into SQL, log, or abort.
 */
#include "core/first.h"
#include "storage/db_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ---------------------------------------------------------------------------- */

int db_set_error(tn_db *db, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rc = tn_verrf(db->err, sizeof(db->err), rc, fmt, ap);
    va_end(ap);
    return rc;
}

static void clear_error(tn_db *db)
{
    db->err[0] = '\0';
}

static void clear_errbuf(char *err, size_t errlen)
{
    if (err != NULL && errlen > 0)
        err[0] = '\0';
}

static bool txn_open(const tn_db *db)
{
    db_txn st = db->drv->txn_state(db);
    return st == DB_TXN_OPEN || st == DB_TXN_FAILED;
}

/* ---- opening ----------------------------------------------------------------------------- */

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

enum backend { BACKEND_NONE, BACKEND_SQLITE, BACKEND_PG };

/* The backend of a URI, and the part of it the driver gets (*target). */
static enum backend pick_backend(const char *uri, const char **target)
{
    if (uri == NULL)
        return BACKEND_NONE;
    if (has_prefix(uri, "sqlite:")) {
        *target = uri + strlen("sqlite:");
        return BACKEND_SQLITE;
    }
    /* A libpq URI goes to libpq whole; "postgres:" followed by anything else is the prefix
     * of a conninfo string ("postgres:host=... dbname=..."). */
    if (has_prefix(uri, "postgresql://") || has_prefix(uri, "postgres://")) {
        *target = uri;
        return BACKEND_PG;
    }
    if (has_prefix(uri, "postgres:")) {
        *target = uri + strlen("postgres:");
        return BACKEND_PG;
    }
    return BACKEND_NONE;
}

const char *db_uri_backend(const char *uri)
{
    const char *target;
    switch (pick_backend(uri, &target)) {
    case BACKEND_SQLITE:
        return "sqlite";
    case BACKEND_PG:
        return "postgres";
    default:
        return NULL;
    }
}

int db_defer_sync(tn_db *db, bool deferred)
{
    if (db == NULL)
        return TN_INVALID;
    if (txn_open(db))
        return db_set_error(db, TN_BUSY, "db_defer_sync: inside a transaction");
    return db->drv->defer_sync != NULL ? db->drv->defer_sync(db, deferred) : TN_OK;
}

int db_flush(tn_db *db)
{
    if (db == NULL)
        return TN_INVALID;
    if (txn_open(db))
        return db_set_error(db, TN_BUSY, "db_flush: inside a transaction");
    return db->drv->flush != NULL ? db->drv->flush(db) : TN_OK;
}

int db_preload(const char *uri, char *err, size_t errlen)
{
    const char *target;
    clear_errbuf(err, errlen);
    switch (pick_backend(uri, &target)) {
    case BACKEND_SQLITE:
        return TN_OK;
    case BACKEND_PG: {
        const db_driver *drv;
        return db_pg_load(&drv, err, errlen);
    }
    default:
        return tn_errf(err, errlen, TN_INVALID, "unknown database URI");
    }
}

/*
 * Defaults: busy_timeout_ms 0 means 5000 and a negative value means "do not wait";
 * statement_timeout_ms 0 leaves the server's setting alone (negative is taken as 0).
 */
int db_open(const char *uri, const db_options *opt, tn_db **out, char *err, size_t errlen)
{
    const char *target = NULL;
    if (out == NULL)
        return tn_errf(err, errlen, TN_INVALID, "db_open: no place for the handle");
    *out = NULL;
    clear_errbuf(err, errlen);
    enum backend b = pick_backend(uri, &target);
    if (b == BACKEND_NONE)
        return tn_errf(err, errlen, TN_INVALID,
                       "unknown database URI (expected sqlite:PATH, postgres:CONNINFO or "
                       "postgresql://...)");
    const db_driver *drv = &db_sqlite_driver;
    int rc = b == BACKEND_PG ? db_pg_load(&drv, err, errlen) : TN_OK;
    if (rc != TN_OK)
        return rc;
    db_options o = {0};
    if (opt != NULL)
        o = *opt;
    if (o.busy_timeout_ms == 0)
        o.busy_timeout_ms = 5000;
    else if (o.busy_timeout_ms < 0)
        o.busy_timeout_ms = 0;
    if (o.statement_timeout_ms < 0)
        o.statement_timeout_ms = 0;

    char scratch[DB_ERRLEN];
    if (err == NULL || errlen == 0) {   /* the drivers always get somewhere to write */
        err = scratch;
        errlen = sizeof(scratch);
    }
    tn_db *db = NULL;
    rc = drv->open(target, &o, &db, err, errlen);
    if (rc != TN_OK)
        return rc;
    db->drv = drv;
    db->opt = o;
    db->in_txn = false;
    db->changes = 0;
    db->rows = NULL;
    clear_error(db);
    *out = db;
    return TN_OK;
}

void db_close(tn_db *db)
{
    if (db == NULL)
        return;
    db_rows_detach_all(db);
    db->drv->close(db);   /* both backends roll back an open transaction on close */
}

bool db_is_clean(const tn_db *db)
{
    return db != NULL && db->drv->is_clean(db);
}

int db_reset(tn_db *db)
{
    if (db == NULL)
        return TN_INVALID;
    clear_error(db);
    int rc = db->drv->reset(db);
    db->in_txn = txn_open(db);
    return rc;
}

int db_uri_with_dbname(const char *uri, const char *dbname, char *out, size_t outlen,
                       char *err, size_t errlen)
{
    if (dbname == NULL)
        return tn_errf(err, errlen, TN_INVALID, "no database name");
    return db_uri_with(uri, dbname, NULL, NULL, out, outlen, err, errlen);
}

int db_uri_with(const char *uri, const char *dbname, const char *user, const char *password,
                char *out, size_t outlen, char *err, size_t errlen)
{
    const char *target = NULL;
    clear_errbuf(err, errlen);
    if (out == NULL || outlen == 0 || pick_backend(uri, &target) != BACKEND_PG)
        return tn_errf(err, errlen, TN_INVALID, "not a PostgreSQL URI");
    const db_driver *drv;
    int rc = db_pg_load(&drv, err, errlen);
    if (rc != TN_OK)
        return rc;
    static const char prefix[] = "postgres:";
    if (outlen <= sizeof(prefix))
        return tn_errf(err, errlen, TN_TOOBIG, "no room for the URI");
    memcpy(out, prefix, sizeof(prefix));
    char scratch[DB_ERRLEN];
    if (err == NULL || errlen == 0) {
        err = scratch;
        errlen = sizeof(scratch);
    }
    return drv->with_dbname(target, dbname, user, password, out + sizeof(prefix) - 1,
                            outlen - (sizeof(prefix) - 1), err, errlen);
}

/* ---- the schema scope and notifications (PostgreSQL) ---------------------------------------- */

int db_set_scope(tn_db *db, const char *schema, const char *role)
{
    if (db == NULL)
        return TN_INVALID;
    clear_error(db);
    if (db->drv->set_scope == NULL)
        return db_set_error(db, TN_INVALID, "a schema scope needs PostgreSQL");
    char quoted[72], quoted_role[72];
    if (schema != NULL && db_quote_ident(schema, quoted, sizeof(quoted)) != TN_OK)
        return db_set_error(db, TN_INVALID, "not a schema name");
    if (role != NULL && (schema == NULL || db_quote_ident(role, quoted_role,
                                                          sizeof(quoted_role)) != TN_OK))
        return db_set_error(db, TN_INVALID, "not a role name, or a role without a schema");
    if (db->in_txn || txn_open(db))
        return db_set_error(db, TN_BUSY,
                            "the schema scope changes between transactions, not inside one");
    return db->drv->set_scope(db, schema, schema != NULL ? quoted : NULL, role,
                              role != NULL ? quoted_role : NULL);
}

int db_set_schema_scope(tn_db *db, const char *schema)
{
    return db_set_scope(db, schema, NULL);
}

const char *db_schema_scope(const tn_db *db)
{
    return db != NULL && db->drv->scope != NULL ? db->drv->scope(db) : NULL;
}

const char *db_scope_role(const tn_db *db)
{
    return db != NULL && db->drv->scope_role != NULL ? db->drv->scope_role(db) : NULL;
}

int db_listen(tn_db *db, const char *channel)
{
    if (db == NULL)
        return TN_INVALID;
    clear_error(db);
    if (db->drv->wait_notify == NULL)
        return db_set_error(db, TN_INVALID, "notifications need PostgreSQL");
    char quoted[72], sql[96];
    if (db_quote_ident(channel, quoted, sizeof(quoted)) != TN_OK)
        return db_set_error(db, TN_INVALID, "not a channel name");
    snprintf(sql, sizeof(sql), "LISTEN %s", quoted);
    db->changes = 0;
    return db->drv->exec(db, sql, 0, NULL, DB_EXEC_NOCACHE);
}

int db_wait_notify(tn_db *db, int timeout_ms)
{
    return db_wait_notify_each(db, timeout_ms, NULL, NULL);
}

int db_wait_notify_each(tn_db *db, int timeout_ms, db_notify_fn fn, void *ctx)
{
    if (db == NULL)
        return TN_INVALID;
    clear_error(db);
    if (db->drv->wait_notify == NULL)
        return db_set_error(db, TN_INVALID, "notifications need PostgreSQL");
    return db->drv->wait_notify(db, timeout_ms, fn, ctx);
}

int db_socket(tn_db *db)
{
    return db != NULL && db->drv->socket != NULL ? db->drv->socket(db) : -1;
}

/* ---- row sets ---------------------------------------------------------------------------- */

void db_rows_link(tn_db *db, tn_rows *rows)
{
    rows->db = db;
    rows->prev = NULL;
    rows->next = db->rows;
    if (db->rows != NULL)
        db->rows->prev = rows;
    db->rows = rows;
}

static void rows_unlink(tn_rows *rows)
{
    if (rows->db == NULL)
        return;
    if (rows->prev != NULL)
        rows->prev->next = rows->next;
    else
        rows->db->rows = rows->next;
    if (rows->next != NULL)
        rows->next->prev = rows->prev;
    rows->prev = rows->next = NULL;
}

void db_rows_detach_all(tn_db *db)
{
    while (db->rows != NULL) {
        tn_rows *r = db->rows;
        r->drv->rows_detach(r);
        rows_unlink(r);
        r->db = NULL;
    }
}

int tn_rows_next(tn_rows *rows)
{
    if (rows == NULL)
        return TN_INVALID;
    return rows->drv->rows_next(rows);
}

int tn_rows_ncols(const tn_rows *rows)
{
    return rows != NULL ? rows->drv->rows_ncols(rows) : 0;
}

const char *tn_rows_colname(const tn_rows *rows, int col)
{
    if (rows == NULL || col < 0 || col >= rows->drv->rows_ncols(rows))
        return NULL;
    return rows->drv->rows_colname(rows, col);
}

const char *tn_rows_get(const tn_rows *rows, int col)
{
    if (rows == NULL || col < 0 || col >= rows->drv->rows_ncols(rows))
        return NULL;
    return rows->drv->rows_get(rows, col);
}

static bool ascii_caseeq(const char *a, const char *b)
{
    for (;; a++, b++) {
        unsigned char x = (unsigned char)*a, y = (unsigned char)*b;
        if (x >= 'A' && x <= 'Z')
            x = (unsigned char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z')
            y = (unsigned char)(y - 'A' + 'a');
        if (x != y)
            return false;
        if (x == '\0')
            return true;
    }
}

/* An exact match wins; otherwise the first ASCII case-insensitive one, because PostgreSQL
 * folds unquoted aliases to lower case and SQLite keeps them as written ("AS userId"). */
const char *tn_rows_getn(const tn_rows *rows, const char *name)
{
    if (rows == NULL || name == NULL)
        return NULL;
    int n = rows->drv->rows_ncols(rows), fold = -1;
    for (int i = 0; i < n; i++) {
        const char *c = rows->drv->rows_colname(rows, i);
        if (c == NULL)
            continue;
        if (strcmp(c, name) == 0)
            return rows->drv->rows_get(rows, i);
        if (fold < 0 && ascii_caseeq(c, name))
            fold = i;
    }
    return fold >= 0 ? rows->drv->rows_get(rows, fold) : NULL;
}

void tn_rows_free(tn_rows *rows)
{
    if (rows == NULL)
        return;
    rows_unlink(rows);
    rows->drv->rows_free(rows);
}

/* ---- statements -------------------------------------------------------------------------- */

static int check_args(tn_db *db, const char *sql, int nparams, const char *const *params)
{
    if (sql == NULL)
        return db_set_error(db, TN_INVALID, "no SQL given");
    if (nparams < 0 || nparams > DB_MAX_PARAMS)
        return db_set_error(db, TN_INVALID, "parameter count %d out of range 0..%d", nparams,
                            DB_MAX_PARAMS);
    if (nparams > 0 && params == NULL)
        return db_set_error(db, TN_INVALID, "%d parameters announced but none given", nparams);
    return TN_OK;
}

int db_exec_flags(tn_db *db, const char *sql, int nparams, const char *const *params,
                  unsigned flags)
{
    if (db == NULL)
        return TN_INVALID;
    clear_error(db);
    db->changes = 0;
    int rc = check_args(db, sql, nparams, params);
    if (rc != TN_OK)
        return rc;
    return db->drv->exec(db, sql, nparams, params, flags);
}

int tn_db_exec(tn_db *db, const char *sql, int nparams, const char *const *params)
{
    return db_exec_flags(db, sql, nparams, params, 0);
}

int db_exec_batch(tn_db *db, const db_stmt *stmts, int n, unsigned flags, tn_rows **rows,
                  int *failed)
{
    if (rows != NULL)
        *rows = NULL;
    *failed = 0;
    if (db == NULL)
        return TN_INVALID;
    clear_error(db);
    db->changes = 0;
    if (n <= 0 || stmts == NULL)
        return db_set_error(db, TN_INVALID, "db_exec_batch: no statements");
    for (int i = 0; i < n; i++) {
        int rc = check_args(db, stmts[i].sql, stmts[i].nparams, stmts[i].params);
        if (rc != TN_OK) {
            *failed = i;
            return rc;
        }
    }
    if (!db->in_txn)
        return db_set_error(db, TN_INVALID, "db_exec_batch: no transaction is open");
    bool commit = (flags & DB_BATCH_COMMIT) != 0;
    if (commit && rows != NULL)   /* SQLite reads rows as they are asked for */
        return db_set_error(db, TN_INVALID, "db_exec_batch: rows and the COMMIT in one batch");
    int rc = TN_OK;
    if (db->drv->batch != NULL) {
        rc = db->drv->batch(db, stmts, n, commit, rows, failed);
        if (commit)
            db->in_txn = txn_open(db);
        return rc;
    }
    *failed = n;
    for (int i = 0; i < n && rc == TN_OK; i++) {
        const db_stmt *st = &stmts[i];
        if (i == n - 1 && rows != NULL)
            rc = db->drv->query(db, rows, st->sql, st->nparams, st->params);
        else
            rc = db->drv->exec(db, st->sql, st->nparams, st->params, st->flags);
        if (rc != TN_OK)
            *failed = i;
    }
    if (rc == TN_OK && commit)
        rc = tn_db_commit(db);
    return rc;
}

int tn_db_query(tn_db *db, tn_rows **rows, const char *sql, int nparams,
                const char *const *params)
{
    if (rows != NULL)
        *rows = NULL;
    if (db == NULL || rows == NULL) {
        if (db != NULL)
            return db_set_error(db, TN_INVALID, "no place for the rows");
        return TN_INVALID;
    }
    clear_error(db);
    db->changes = 0;
    int rc = check_args(db, sql, nparams, params);
    if (rc != TN_OK)
        return rc;
    return db->drv->query(db, rows, sql, nparams, params);
}

int64_t tn_db_changes(const tn_db *db)
{
    return db != NULL ? db->changes : 0;
}

int64_t tn_db_last_id(const tn_db *db)
{
    return db != NULL ? db->drv->last_id(db) : -1;
}

const char *tn_db_error(const tn_db *db)
{
    return db != NULL ? db->err : "no database handle";
}

const char *tn_db_backend(const tn_db *db)
{
    return db != NULL ? db->drv->name : NULL;
}

void *tn_db_native(tn_db *db)
{
    return db != NULL ? db->drv->native(db) : NULL;
}

int tn_db_data_version(tn_db *db, uint64_t *version)
{
    if (db == NULL || version == NULL)
        return TN_INVALID;
    if (db->drv->data_version == NULL)
        return db_set_error(db, TN_INVALID, "%s has no data version", db->drv->name);
    return db->drv->data_version(db, version);
}

/* ---- transactions -------------------------------------------------------------------------
 * db->in_txn is what the caller asked for; the driver's txn_state() is what the database
 * says. They differ when an error already ended the transaction (SQLite rolls back by itself
 * on some errors; PostgreSQL keeps an aborted transaction open until ROLLBACK), and commit
 * reports that instead of pretending the work was saved.
 */

int tn_db_begin(tn_db *db)
{
    if (db == NULL)
        return TN_INVALID;
    clear_error(db);
    db->changes = 0;
    db_txn st = db->drv->txn_state(db);
    if (db->in_txn && st == DB_TXN_LOST)   /* the connection broke inside the last one */
        db->in_txn = false;
    if (db->in_txn || st == DB_TXN_OPEN || st == DB_TXN_FAILED)
        return db_set_error(db, TN_INVALID, "a transaction is already open");
    int rc = db->drv->begin(db);
    if (rc == TN_OK)
        db->in_txn = true;
    return rc;
}

int tn_db_commit(tn_db *db)
{
    if (db == NULL)
        return TN_INVALID;
    clear_error(db);
    db->changes = 0;
    db_txn st = db->drv->txn_state(db);
    if (!db->in_txn && (st == DB_TXN_NONE || st == DB_TXN_LOST))
        return db_set_error(db, TN_INVALID, "commit: no transaction is open");
    if (st == DB_TXN_LOST) {
        db->in_txn = false;
        return db_set_error(db, TN_IO, "commit: the connection was lost with the transaction");
    }
    if (st == DB_TXN_NONE) {
        db->in_txn = false;
        return db_set_error(db, TN_ERR,
                            "commit: an earlier error already rolled the transaction back");
    }
    if (st == DB_TXN_FAILED) {
        int rc = db->drv->exec(db, "ROLLBACK", 0, NULL, 0);
        db->in_txn = txn_open(db);
        if (rc != TN_OK)
            return rc;
        return db_set_error(db, TN_ERR,
                            "commit: the transaction had failed and was rolled back");
    }
    int rc = db->drv->exec(db, "COMMIT", 0, NULL, 0);
    /* A COMMIT that failed may leave the transaction open (SQLite: busy): then the caller
     * may retry or roll back. */
    db->in_txn = txn_open(db);
    return rc;
}

int tn_db_rollback(tn_db *db)
{
    if (db == NULL)
        return TN_INVALID;
    clear_error(db);
    db->changes = 0;
    db_txn st = db->drv->txn_state(db);
    if (!db->in_txn && (st == DB_TXN_NONE || st == DB_TXN_LOST))
        return db_set_error(db, TN_INVALID, "rollback: no transaction is open");
    if (st == DB_TXN_LOST) {   /* rolled back, but the caller must know to reset */
        db->in_txn = false;
        return db_set_error(db, TN_IO, "rollback: the connection was lost (the server "
                                       "rolled the transaction back)");
    }
    if (st == DB_TXN_NONE) {   /* an error rolled it back already: that is what was asked */
        db->in_txn = false;
        return TN_OK;
    }
    int rc = db->drv->exec(db, "ROLLBACK", 0, NULL, 0);
    db->in_txn = txn_open(db);
    return rc;
}

/* ---- helpers ---------------------------------------------------------------------------------- */

/* A value longer than outlen - 1 is TN_TOOBIG (out is then ""), never cut silently. */
int db_query_value(tn_db *db, char *out, size_t outlen, const char *sql, int nparams,
                   const char *const *params)
{
    if (db == NULL)
        return TN_INVALID;
    if (out == NULL || outlen == 0)
        return db_set_error(db, TN_INVALID, "no room for the value");
    out[0] = '\0';
    tn_rows *rows = NULL;
    int rc = tn_db_query(db, &rows, sql, nparams, params);
    if (rc != TN_OK)
        return rc;
    rc = tn_rows_next(rows);
    if (rc == TN_OK) {
        const char *v = tn_rows_get(rows, 0);
        if (v == NULL) {
            rc = db_set_error(db, TN_NOTFOUND, "the value is NULL");
        } else if (strlen(v) >= outlen) {
            rc = db_set_error(db, TN_TOOBIG, "the value is %zu bytes, more than %zu",
                              strlen(v), outlen - 1);
        } else {
            memcpy(out, v, strlen(v) + 1);
        }
    } else if (rc == TN_DONE) {
        rc = db_set_error(db, TN_NOTFOUND, "no row");
    }
    tn_rows_free(rows);
    return rc;
}

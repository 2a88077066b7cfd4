/*
 * db.c — the driver-neutral half of the storage layer (see db.h and db_int.h).
 *
 * Owns: parsing connection URIs and picking a driver, the argument checks every public
 * tn_db_* / tn_rows_* function makes before a driver runs, the transaction flag, the error
 * buffer, the list of open row sets (so closing or resetting a connection can never leave a
 * row set pointing at freed driver state), identifier quoting, and splitting scripts into
 * statements.
 *
 * The PostgreSQL driver is loaded on first use (see "the PostgreSQL driver" below), so a
 * host that only opens sqlite: URIs never maps libpq.
 *
 * Must not: include sqlite3.h or libpq-fe.h (drivers own those), put anything but a
 * db_quote_ident() result or constant text into SQL, log, or abort.
 */
#include "core/first.h"
#include "storage/db_int.h"
#include "core/log.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ---------------------------------------------------------------------------- */

int db_set_error(tn_db *db, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(db->err, sizeof(db->err), fmt, ap);
    va_end(ap);
    return rc;
}

static void clear_error(tn_db *db)
{
    db->err[0] = '\0';
}

static void set_errbuf(char *err, size_t errlen, const char *msg)
{
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "%s", msg);
}

static bool txn_open(const tn_db *db)
{
    db_txn st = db->drv->txn_state(db);
    return st == DB_TXN_OPEN || st == DB_TXN_FAILED;
}

/* ---- the PostgreSQL driver ----------------------------------------------------------------
 *
 * Linked in, libpq would cost every exec of tenancyd its relocations and mappings, whether or
 * not a PostgreSQL URI is ever opened, so the driver is a module (storage/pgdriver.so,
 * linked with libpq) that is dlopen()ed the first time one is: from $TENANCY_PGDRIVER when
 * set (the build tree, tests), else from PGDRIVER_PATH (the installed one). A failed load is
 * not retried (the message is kept for every later open). A program that links pg.c itself
 * defines tn_pgdriver_entry, and then that one is used and nothing is loaded.
 */

#ifndef PGDRIVER_PATH
#define PGDRIVER_PATH "pgdriver.so"
#endif

extern db_pg_entry_fn tn_pgdriver_entry __attribute__((weak));

static void host_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void host_log(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vmsg(level, fmt, ap);
    va_end(ap);
}

static const db_host the_host = {
    .abi = DB_HOST_ABI,
    .sizeof_db = sizeof(tn_db),
    .sizeof_rows = sizeof(tn_rows),
    .sizeof_driver = sizeof(db_driver),
    .set_error = db_set_error,
    .rows_link = db_rows_link,
    .rows_detach_all = db_rows_detach_all,
    .log = host_log,
};

static const db_driver *pg_driver;
static bool pg_tried;
static char pg_load_error[DB_ERRLEN];

/* The PostgreSQL driver, loaded on the first call; NULL with err set when it cannot be. */
static const db_driver *pg_load(char *err, size_t errlen)
{
    if (!pg_tried) {
        pg_tried = true;
        db_pg_entry_fn *entry = tn_pgdriver_entry;
        const char *path = NULL;
        char why[DB_ERRLEN] = "";
        if (entry == NULL) {
            path = secure_getenv("TENANCY_PGDRIVER");
            if (path == NULL || *path == '\0')
                path = PGDRIVER_PATH;
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (h == NULL) {
                const char *e = dlerror();
                snprintf(pg_load_error, sizeof(pg_load_error),
                         "the PostgreSQL driver cannot be loaded (%s; set TENANCY_PGDRIVER to "
                         "the path of pgdriver.so)",
                         e != NULL ? e : path);
                goto out;
            }
            *(void **)&entry = dlsym(h, DB_PG_ENTRY);
            if (entry == NULL) {
                snprintf(pg_load_error, sizeof(pg_load_error),
                         "the PostgreSQL driver %s has no %s: not a tenancy driver", path,
                         DB_PG_ENTRY);
                goto out;   /* the handle stays: unloading code we touched is not worth it */
            }
        }
        pg_driver = entry(&the_host, why, sizeof(why));
        if (pg_driver == NULL)
            snprintf(pg_load_error, sizeof(pg_load_error), "%s: %s",
                     path != NULL ? path : "the PostgreSQL driver", why);
    }
out:
    if (pg_driver == NULL)
        set_errbuf(err, errlen, pg_load_error);
    return pg_driver;
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
    set_errbuf(err, errlen, "");
    switch (pick_backend(uri, &target)) {
    case BACKEND_SQLITE:
        return TN_OK;
    case BACKEND_PG:
        return pg_load(err, errlen) != NULL ? TN_OK : TN_IO;
    default:
        set_errbuf(err, errlen, "unknown database URI");
        return TN_INVALID;
    }
}

/*
 * Defaults: busy_timeout_ms 0 means 5000 and a negative value means "do not wait";
 * statement_timeout_ms 0 leaves the server's setting alone (negative is taken as 0).
 */
int db_open(const char *uri, const db_options *opt, tn_db **out, char *err, size_t errlen)
{
    const char *target = NULL;
    if (out == NULL) {
        set_errbuf(err, errlen, "db_open: no place for the handle");
        return TN_INVALID;
    }
    *out = NULL;
    set_errbuf(err, errlen, "");
    enum backend b = pick_backend(uri, &target);
    if (b == BACKEND_NONE) {
        set_errbuf(err, errlen,
                   "unknown database URI (expected sqlite:PATH, postgres:CONNINFO or "
                   "postgresql://...)");
        return TN_INVALID;
    }
    const db_driver *drv = b == BACKEND_SQLITE ? &db_sqlite_driver : pg_load(err, errlen);
    if (drv == NULL)
        return TN_IO;
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
    int rc = drv->open(target, &o, &db, err, errlen);
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
    if (dbname == NULL) {
        set_errbuf(err, errlen, "no database name");
        return TN_INVALID;
    }
    return db_uri_with(uri, dbname, NULL, NULL, out, outlen, err, errlen);
}

int db_uri_with(const char *uri, const char *dbname, const char *user, const char *password,
                char *out, size_t outlen, char *err, size_t errlen)
{
    const char *target = NULL;
    set_errbuf(err, errlen, "");
    if (out == NULL || outlen == 0 || pick_backend(uri, &target) != BACKEND_PG) {
        set_errbuf(err, errlen, "not a PostgreSQL URI");
        return TN_INVALID;
    }
    const db_driver *drv = pg_load(err, errlen);
    if (drv == NULL)
        return TN_IO;
    static const char prefix[] = "postgres:";
    if (outlen <= sizeof(prefix)) {
        set_errbuf(err, errlen, "no room for the URI");
        return TN_TOOBIG;
    }
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
    if (db == NULL)
        return TN_INVALID;
    clear_error(db);
    if (db->drv->wait_notify == NULL)
        return db_set_error(db, TN_INVALID, "notifications need PostgreSQL");
    return db->drv->wait_notify(db, timeout_ms);
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

int tn_db_exec(tn_db *db, const char *sql, int nparams, const char *const *params)
{
    if (db == NULL)
        return TN_INVALID;
    clear_error(db);
    db->changes = 0;
    int rc = check_args(db, sql, nparams, params);
    if (rc != TN_OK)
        return rc;
    return db->drv->exec(db, sql, nparams, params, 0);
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

/* ---- identifiers --------------------------------------------------------------------------- */

static bool ident_start(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static bool ident_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* Why so strict: the identifier is then safe without escaping in both dialects, fits
 * PostgreSQL's NAMEDATALEN (63 bytes) so it is never silently truncated, and means the
 * same thing on a file system (SQLite tenants are files named after it). */
int db_quote_ident(const char *ident, char *out, size_t outlen)
{
    if (ident == NULL || out == NULL || !ident_start((unsigned char)ident[0]))
        return TN_INVALID;
    size_t n = 1;
    for (; ident[n] != '\0'; n++) {
        unsigned char c = (unsigned char)ident[n];
        if (n >= 63 || !(ident_start(c) || ident_digit(c)))
            return TN_INVALID;
    }
    if (outlen < n + 3)
        return TN_INVALID;
    out[0] = '"';
    memcpy(out + 1, ident, n);
    out[n + 1] = '"';
    out[n + 2] = '\0';
    return TN_OK;
}

/* ---- the script splitter ------------------------------------------------------------------ */

void db_split_init(db_splitter *s, db_dialect dialect, const char *sql, size_t len)
{
    s->dialect = dialect;
    s->p = sql;
    s->end = sql + len;
    s->line = 1;
}

static bool word_char(unsigned char c)
{
    return ident_start(c) || ident_digit(c) || c == '$' || c >= 0x80;
}

static bool word_is(const char *w, size_t n, const char *kw)
{
    size_t k = strlen(kw);
    if (n != k)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)w[i];
        if (c >= 'a' && c <= 'z')
            c = (unsigned char)(c - 'a' + 'A');
        if (c != (unsigned char)kw[i])
            return false;
    }
    return true;
}

/* Skip a quoted run that opens at s->p with `open` and closes with `close`; a doubled
 * close char stands for itself; `backslash` makes \x an escape (PostgreSQL E''). */
static bool skip_quoted(db_splitter *s, char close, bool doubled, bool backslash)
{
    const char *p = s->p + 1;
    for (; p < s->end; p++) {
        if (*p == '\n')
            s->line++;
        if (backslash && *p == '\\' && p + 1 < s->end) {
            p++;
            if (*p == '\n')
                s->line++;
            continue;
        }
        if (*p == close) {
            if (doubled && p + 1 < s->end && p[1] == close) {
                p++;
                continue;
            }
            s->p = p + 1;
            return true;
        }
    }
    return false;
}

static bool skip_block_comment(db_splitter *s)
{
    bool nest = s->dialect == DB_DIALECT_PG;   /* SQLite ends at the first close */
    int depth = 1;
    const char *p = s->p + 2;
    while (p < s->end) {
        if (*p == '\n') {
            s->line++;
        } else if (*p == '*' && p + 1 < s->end && p[1] == '/') {
            p += 2;
            if (--depth == 0) {
                s->p = p;
                return true;
            }
            continue;
        } else if (nest && *p == '/' && p + 1 < s->end && p[1] == '*') {
            depth++;
            p += 2;
            continue;
        }
        p++;
    }
    return false;
}

/* At a '$' that does not continue a word: a dollar quote ($$ or $tag$) or not (a $1
 * parameter). Returns 1 skipped, 0 not a dollar quote, -1 unterminated. */
static int skip_dollar(db_splitter *s)
{
    const char *q = s->p + 1;
    if (q < s->end && ident_start((unsigned char)*q)) {
        while (q < s->end && (ident_start((unsigned char)*q) || ident_digit((unsigned char)*q) ||
                              (unsigned char)*q >= 0x80))
            q++;
    }
    if (q >= s->end || *q != '$')
        return 0;
    size_t taglen = (size_t)(q - s->p) + 1;   /* "$tag$" */
    const char *tag = s->p;
    for (const char *p = q + 1; p < s->end; p++) {
        if (*p == '\n')
            s->line++;
        if (*p == '$' && (size_t)(s->end - p) >= taglen && memcmp(p, tag, taglen) == 0) {
            s->p = p + taglen;
            return 1;
        }
    }
    return -1;
}

enum { KW_START, KW_CREATE, KW_BODY, KW_OTHER };

int db_split_next(db_splitter *s, const char **stmt, size_t *len, int *line)
{
    const char *start = NULL;
    int start_line = 0, kw = KW_START, parens = 0, blocks = 0;
    while (s->p < s->end) {
        unsigned char c = (unsigned char)*s->p;
        const char *next = s->p + 1 < s->end ? s->p + 1 : NULL;
        if (c == '\n') {
            s->line++;
            s->p++;
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
            s->p++;
            continue;
        }
        if (c == '-' && next != NULL && *next == '-') {
            while (s->p < s->end && *s->p != '\n')
                s->p++;
            continue;
        }
        if (c == '/' && next != NULL && *next == '*') {
            int open_line = s->line;
            if (!skip_block_comment(s)) {
                *line = open_line;
                return -1;
            }
            continue;
        }
        if (c == ';' && parens == 0 && blocks == 0) {
            s->p++;
            if (start == NULL)   /* an empty statement */
                continue;
            *stmt = start;
            *len = (size_t)(s->p - 1 - start);
            *line = start_line;
            return 1;
        }
        if (start == NULL) {
            start = s->p;
            start_line = s->line;
        }
        int open_line = s->line;
        bool ok = true;
        if (c == '\'') {
            ok = skip_quoted(s, '\'', true, false);
        } else if (c == '"') {
            ok = skip_quoted(s, '"', true, false);
        } else if (c == '`' && s->dialect == DB_DIALECT_SQLITE) {
            ok = skip_quoted(s, '`', true, false);
        } else if (c == '[' && s->dialect == DB_DIALECT_SQLITE) {
            ok = skip_quoted(s, ']', false, false);
        } else if (c == '$' && s->dialect == DB_DIALECT_PG) {
            int r = skip_dollar(s);
            ok = r >= 0;
            if (r == 0)
                s->p++;
        } else if (ident_start(c) || c >= 0x80) {
            const char *w = s->p;
            while (s->p < s->end && word_char((unsigned char)*s->p))
                s->p++;
            size_t n = (size_t)(s->p - w);
            if (s->dialect == DB_DIALECT_PG && n == 1 && (*w == 'E' || *w == 'e') &&
                s->p < s->end && *s->p == '\'') {
                ok = skip_quoted(s, '\'', true, true);   /* E'...' */
            } else if (kw == KW_START) {
                kw = word_is(w, n, "CREATE") ? KW_CREATE : KW_OTHER;
            } else if (kw == KW_CREATE) {
                if (word_is(w, n, "TRIGGER") || word_is(w, n, "FUNCTION") ||
                    word_is(w, n, "PROCEDURE"))
                    kw = KW_BODY;
                else if (!(word_is(w, n, "OR") || word_is(w, n, "REPLACE") ||
                           word_is(w, n, "TEMP") || word_is(w, n, "TEMPORARY") ||
                           word_is(w, n, "CONSTRAINT")))
                    kw = KW_OTHER;
            } else if (kw == KW_BODY) {
                if (word_is(w, n, "BEGIN") || word_is(w, n, "CASE"))
                    blocks++;
                else if (word_is(w, n, "END") && blocks > 0)
                    blocks--;
            }
        } else if (ident_digit(c)) {
            while (s->p < s->end && word_char((unsigned char)*s->p))
                s->p++;   /* 1e5, 0x1F: not words */
        } else {
            if (c == '(')
                parens++;
            else if (c == ')' && parens > 0)
                parens--;
            s->p++;
        }
        if (!ok) {
            *line = open_line;
            return -1;
        }
    }
    if (start == NULL)
        return 0;
    *stmt = start;
    *len = (size_t)(s->end - start);
    *line = start_line;
    return 1;
}

bool db_sql_is_blank(db_dialect dialect, const char *sql, size_t len)
{
    db_splitter s;
    const char *stmt;
    size_t n;
    int line;
    db_split_init(&s, dialect, sql, len);
    return db_split_next(&s, &stmt, &n, &line) == 0;
}

/* ---- scripts and helpers ------------------------------------------------------------------- */

/* The whole script is split once before anything runs, so a script with an unterminated
 * quote changes nothing. Statements then run one by one (each in its own implicit
 * transaction unless the caller opened one): wrap the call in tn_db_begin/commit to make
 * a migration all-or-nothing. */
int db_exec_script(tn_db *db, const char *sql)
{
    if (db == NULL)
        return TN_INVALID;
    clear_error(db);
    db->changes = 0;
    if (sql == NULL)
        return db_set_error(db, TN_INVALID, "no SQL given");
    size_t total = strlen(sql);
    db_splitter s;
    const char *stmt;
    size_t len, longest = 0;
    int line, r;
    db_split_init(&s, db->drv->dialect, sql, total);
    while ((r = db_split_next(&s, &stmt, &len, &line)) == 1) {
        if (len > longest)
            longest = len;
    }
    if (r < 0)
        return db_set_error(db, TN_INVALID,
                            "script: unterminated string, quoted name or comment at line %d",
                            line);
    char *copy = malloc(longest + 1);
    if (copy == NULL)
        return db_set_error(db, TN_NOMEM, "script: out of memory");
    int rc = TN_OK, n = 0;
    db_split_init(&s, db->drv->dialect, sql, total);
    while (db_split_next(&s, &stmt, &len, &line) == 1) {
        n++;
        memcpy(copy, stmt, len);
        copy[len] = '\0';
        rc = db->drv->exec(db, copy, 0, NULL, DB_EXEC_NOCACHE);
        if (rc != TN_OK) {
            char why[DB_ERRLEN];
            snprintf(why, sizeof(why), "%s", db->err);
            db_set_error(db, rc, "script statement %d (line %d): %s", n, line, why);
            break;
        }
    }
    free(copy);
    return rc;
}

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

/* ---- binding only the placeholders a statement uses ----------------------------------------
 * Seeds run one set of values ($1 slug, $2 name, $3 id) through statements that each use some
 * of them, while both drivers insist that every parameter given is used. The placeholders are
 * found with the splitter's own rules (skip_quoted, skip_block_comment, skip_dollar), so a
 * "$2" inside a string, a quoted name, a comment or a dollar quote is left alone. */

static int placeholder_at(const char *p, const char *end, long *n)
{
    const char *q = p + 1;
    long v = 0;
    while (q < end && ident_digit((unsigned char)*q)) {
        if (v <= DB_MAX_PARAMS)
            v = v * 10 + (*q - '0');
        q++;
    }
    *n = v;
    return (int)(q - p) > 1 ? (int)(q - p) : 0;
}

int db_sql_bind_used(db_dialect dialect, const char *stmt, size_t len, int nparams, char **out,
                     int *used, int *nused, long *bad)
{
    *out = NULL;
    *nused = 0;
    *bad = 0;
    if (nparams < 0 || nparams > 64)
        return TN_INVALID;
    int rank[64] = {0};   /* 1-based new number of each parameter used, 0 when unused */
    for (int pass = 0; pass < 2; pass++) {
        char *o = pass == 1 ? *out : NULL;
        db_splitter s;
        db_split_init(&s, dialect, stmt, len);
        const char *copied = stmt;   /* pass 1: text up to here is in o */
        while (s.p < s.end) {
            unsigned char c = (unsigned char)*s.p;
            const char *next = s.p + 1 < s.end ? s.p + 1 : NULL;
            bool ok = true;
            if (c == '-' && next != NULL && *next == '-') {
                while (s.p < s.end && *s.p != '\n')
                    s.p++;
            } else if (c == '/' && next != NULL && *next == '*') {
                ok = skip_block_comment(&s);
            } else if (c == '\'') {
                ok = skip_quoted(&s, '\'', true, false);
            } else if (c == '"') {
                ok = skip_quoted(&s, '"', true, false);
            } else if (c == '`' && dialect == DB_DIALECT_SQLITE) {
                ok = skip_quoted(&s, '`', true, false);
            } else if (c == '[' && dialect == DB_DIALECT_SQLITE) {
                ok = skip_quoted(&s, ']', false, false);
            } else if (c == '$') {
                int r = dialect == DB_DIALECT_PG ? skip_dollar(&s) : 0;
                long n;
                int plen = r == 0 ? placeholder_at(s.p, s.end, &n) : 0;
                ok = r >= 0;
                if (plen > 0) {
                    if (n < 1 || n > nparams) {
                        free(*out);
                        *out = NULL;
                        *bad = n;
                        return TN_INVALID;
                    }
                    if (pass == 0) {
                        rank[n - 1] = 1;
                    } else {
                        memcpy(o, copied, (size_t)(s.p - copied));
                        o += s.p - copied;
                        o += sprintf(o, "$%d", rank[n - 1]);
                        copied = s.p + plen;
                    }
                    s.p += plen;
                } else if (r == 0) {
                    s.p++;
                }
            } else if (ident_start(c) || c >= 0x80) {
                const char *w = s.p;
                while (s.p < s.end && word_char((unsigned char)*s.p))
                    s.p++;   /* a$1 is a name, not a placeholder */
                if (dialect == DB_DIALECT_PG && s.p - w == 1 && (*w == 'E' || *w == 'e') &&
                    s.p < s.end && *s.p == '\'')
                    ok = skip_quoted(&s, '\'', true, true);
            } else if (ident_digit(c)) {
                while (s.p < s.end && word_char((unsigned char)*s.p))
                    s.p++;
            } else {
                s.p++;
            }
            if (!ok) {
                free(*out);
                *out = NULL;
                return TN_INVALID;
            }
        }
        if (pass == 0) {
            /* Ranks in increasing order of the original numbers; each new number is at most
             * as long as the old one, so the copy never grows. */
            for (int i = 0; i < nparams; i++)
                if (rank[i]) {
                    used[*nused] = i;
                    rank[i] = ++*nused;
                }
            *out = malloc(len + 1);
            if (*out == NULL)
                return TN_NOMEM;
        } else {
            memcpy(o, copied, (size_t)(s.end - copied));
            o += s.end - copied;
            *o = '\0';
        }
    }
    return TN_OK;
}

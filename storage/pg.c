/*
 * pg.c — the PostgreSQL driver (db_pg_driver, see db_int.h), on libpq.
 *
 * Owns: one PGconn per tn_db, the session settings every connection gets, and the
 * translation of SQLSTATEs into tn_rc codes.
 *
 * Statements go through PQexecParams with text parameters (one round trip: parse, bind,
 * execute of the unnamed statement), which also refuses several statements in one string.
 * There is no prepared-statement cache yet: a cache must survive PQreset, DISCARD ALL and
 * "cached plan must not change result type" after a migration, and correctness comes first.
 *
 * The session, set after connect and again after every PQreset (a new backend forgets it),
 * in one parameterized statement: client_encoding UTF8 (the project's text encoding),
 * statement_timeout from db_options (0: the server's), and default_transaction_read_only
 * when the connection is read-only.
 *
 * Codes: 23505 → TN_EXISTS; other class 23, classes 22, 42, 0A, 21, 25, 26, 2B, 34, 3D, 3F,
 * 44, and 08P01 on a healthy connection (a wrong parameter count) → TN_INVALID; 42501 and
 * 25006 (a write in a read-only transaction) → TN_DENIED; 57014 (statement_timeout, cancel)
 * → TN_TIMEOUT; 40001, 40P01, 55P03, 53300 → TN_BUSY; 53200 → TN_NOMEM; class 08,
 * 57P01..57P03, 53100 and a connection whose PQstatus went bad → TN_IO;
 * the rest TN_ERR. tn_db_last_id() is always -1 (use INSERT ... RETURNING). COPY is refused
 * (TN_INVALID) after ending the copy, so the connection stays usable.
 *
 * Server notices go to the error log (WARNING as warn, the rest as debug), never to stderr
 * as libpq would by default.
 *
 * Must not: build SQL from values (the session settings are parameters too), echo the
 * conninfo in messages (it may hold a password), or block outside libpq's own calls.
 */
#include "core/first.h"
#include "storage/db_int.h"
#include "core/log.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pg_db {
    tn_db base;        /* first: tn_db * and pg_db * convert both ways */
    PGconn *conn;
} pg_db;

typedef struct pg_rows {
    tn_rows base;      /* first */
    PGresult *res;
    int nrows, ncols;
    int cur;           /* -1 before the first tn_rows_next */
} pg_rows;

static pg_db *PDB(tn_db *db)
{
    return (pg_db *)db;
}

static const pg_db *CPDB(const tn_db *db)
{
    return (const pg_db *)db;
}

/* ---- errors ------------------------------------------------------------------------------ */

static int map_sqlstate(const char *s)
{
    if (s == NULL || strlen(s) != 5)
        return TN_ERR;
    if (strcmp(s, "23505") == 0)
        return TN_EXISTS;
    /* "bind message supplies 1 parameters, but prepared statement requires 2": a wrong
     * parameter count, on a connection that is fine (a lost one was caught before). */
    if (strcmp(s, "08P01") == 0)
        return TN_INVALID;
    if (strcmp(s, "42501") == 0 || strcmp(s, "25006") == 0)
        return TN_DENIED;
    if (strcmp(s, "57014") == 0)
        return TN_TIMEOUT;
    if (strcmp(s, "40001") == 0 || strcmp(s, "40P01") == 0 || strcmp(s, "55P03") == 0 ||
        strcmp(s, "53300") == 0)
        return TN_BUSY;
    if (strcmp(s, "53200") == 0)
        return TN_NOMEM;
    if (strncmp(s, "08", 2) == 0 || strcmp(s, "57P01") == 0 || strcmp(s, "57P02") == 0 ||
        strcmp(s, "57P03") == 0 || strcmp(s, "53100") == 0)
        return TN_IO;
    static const char *const invalid[] = {"22", "23", "42", "0A", "21", "25", "26",
                                          "2B", "34", "3D", "3F", "44"};
    for (size_t i = 0; i < TN_ARRAY_LEN(invalid); i++)
        if (strncmp(s, invalid[i], 2) == 0)
            return TN_INVALID;
    return TN_ERR;
}

/* libpq's messages end with a newline (and may hold several lines): keep the first. */
static void first_line(char *out, size_t n, const char *msg)
{
    if (msg == NULL || *msg == '\0')
        msg = "unknown error";
    size_t len = strcspn(msg, "\n");
    if (len >= n)
        len = n - 1;
    memcpy(out, msg, len);
    out[len] = '\0';
}

static int conn_error(pg_db *d, int rc, const char *what)
{
    char line[DB_ERRLEN];
    first_line(line, sizeof(line), PQerrorMessage(d->conn));
    return db_set_error(&d->base, rc, "%s: %s", what, line);
}

/* Finish a COPY that a statement started, so the connection leaves the copy state. */
static void end_copy(pg_db *d, ExecStatusType st)
{
    if (st == PGRES_COPY_IN) {
        PQputCopyEnd(d->conn, "COPY FROM STDIN is not supported by tn_db");
    } else if (st == PGRES_COPY_OUT) {
        char *buf = NULL;
        while (PQgetCopyData(d->conn, &buf, 0) > 0) {
            PQfreemem(buf);
            buf = NULL;
        }
    }
    PGresult *r;
    while ((r = PQgetResult(d->conn)) != NULL)
        PQclear(r);
}

/* TN_OK when res is a success, or the error (message set). Does not free res. */
static int check_result(pg_db *d, PGresult *res)
{
    if (res == NULL) {
        if (PQstatus(d->conn) != CONNECTION_OK)
            return conn_error(d, TN_IO, "connection lost");
        return conn_error(d, TN_ERR, "no result");
    }
    ExecStatusType st = PQresultStatus(res);
    switch (st) {
    case PGRES_COMMAND_OK:
    case PGRES_TUPLES_OK:
        return TN_OK;
    case PGRES_EMPTY_QUERY:
        return db_set_error(&d->base, TN_INVALID, "empty statement");
    case PGRES_COPY_IN:
    case PGRES_COPY_OUT:
    case PGRES_COPY_BOTH:
        end_copy(d, st);
        return db_set_error(&d->base, TN_INVALID, "COPY is not supported");
    default:
        break;
    }
    if (PQstatus(d->conn) != CONNECTION_OK) {
        char line[DB_ERRLEN];
        first_line(line, sizeof(line), PQresultErrorMessage(res));
        return db_set_error(&d->base, TN_IO, "connection lost: %s", line);
    }
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
    char line[DB_ERRLEN];
    first_line(line, sizeof(line), primary != NULL ? primary : PQresultErrorMessage(res));
    return db_set_error(&d->base, map_sqlstate(state), "%s%s%s [%s]", line,
                        detail != NULL ? ": " : "", detail != NULL ? detail : "",
                        state != NULL ? state : "?");
}

/* Rows changed, from the command tag: INSERT/UPDATE/DELETE/MERGE only (a SELECT's tag
 * counts rows returned, which SQLite would not report as changes). */
static int64_t tag_changes(PGresult *res)
{
    const char *tag = PQcmdStatus(res);
    if (tag == NULL || !(strncmp(tag, "INSERT ", 7) == 0 || strncmp(tag, "UPDATE ", 7) == 0 ||
                         strncmp(tag, "DELETE ", 7) == 0 || strncmp(tag, "MERGE ", 6) == 0))
        return 0;
    return strtoll(PQcmdTuples(res), NULL, 10);
}

static void notice_receiver(void *arg, const PGresult *res)
{
    (void)arg;
    const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
    const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    bool warn = sev != NULL && strcmp(sev, "WARNING") == 0;
    log_msg(warn ? TN_LOG_WARN : TN_LOG_DEBUG, "postgres %s: %s", sev != NULL ? sev : "NOTICE",
            msg != NULL ? msg : "");
}

/* ---- the session ---------------------------------------------------------------------------- */

/* One statement, values as parameters; a NULL keeps the server's setting. */
static const char SESSION_SQL[] =
    "SELECT set_config('client_encoding', 'UTF8', false), "
    "set_config('statement_timeout', "
    "COALESCE($1, current_setting('statement_timeout')), false), "
    "set_config('default_transaction_read_only', "
    "COALESCE($2, current_setting('default_transaction_read_only')), false)";

static int session_setup(pg_db *d)
{
    char timeout[32];
    const char *params[2] = {NULL, d->base.opt.read_only ? "on" : NULL};
    if (d->base.opt.statement_timeout_ms > 0) {
        snprintf(timeout, sizeof(timeout), "%d", d->base.opt.statement_timeout_ms);
        params[0] = timeout;
    }
    PGresult *res = PQexecParams(d->conn, SESSION_SQL, 2, NULL, params, NULL, NULL, 0);
    int rc = check_result(d, res);
    PQclear(res);
    return rc;
}

/* ---- opening and closing ------------------------------------------------------------------ */

static int pg_open(const char *target, const db_options *opt, tn_db **out, char *err,
                   size_t errlen)
{
    char *perr = NULL;
    PQconninfoOption *parsed = PQconninfoParse(target, &perr);
    if (parsed == NULL) {
        char line[DB_ERRLEN];
        first_line(line, sizeof(line), perr != NULL ? perr : "out of memory");
        snprintf(err, errlen, "postgres: bad connection string: %s", line);
        int rc = perr != NULL ? TN_INVALID : TN_NOMEM;
        PQfreemem(perr);
        return rc;
    }
    PQconninfoFree(parsed);

    pg_db *d = calloc(1, sizeof(*d));
    if (d == NULL) {
        snprintf(err, errlen, "postgres: out of memory");
        return TN_NOMEM;
    }
    d->base.opt = *opt;   /* session_setup reads it */
    d->conn = PQconnectdb(target);
    if (d->conn == NULL || PQstatus(d->conn) != CONNECTION_OK) {
        char line[DB_ERRLEN];
        first_line(line, sizeof(line), d->conn != NULL ? PQerrorMessage(d->conn) : NULL);
        snprintf(err, errlen, "postgres: cannot connect: %s", line);
        goto fail;
    }
    PQsetNoticeReceiver(d->conn, notice_receiver, NULL);
    if (session_setup(d) != TN_OK) {
        snprintf(err, errlen, "postgres: session setup failed: %s", d->base.err);
        goto fail;
    }
    d->base.drv = &db_pg_driver;
    *out = &d->base;
    return TN_OK;

fail:
    PQfinish(d->conn);   /* NULL is accepted */
    free(d);
    return TN_IO;
}

static void pg_close(tn_db *db)
{
    PQfinish(PDB(db)->conn);   /* the server rolls back an open transaction */
    free(db);
}

/* ---- statements ----------------------------------------------------------------------------- */

static PGresult *run(pg_db *d, const char *sql, int nparams, const char *const *params, int *rc)
{
    PGresult *res = PQexecParams(d->conn, sql, nparams, NULL, params, NULL, NULL, 0);
    *rc = check_result(d, res);
    if (*rc != TN_OK) {
        PQclear(res);
        return NULL;
    }
    d->base.changes = tag_changes(res);
    return res;
}

static int pg_exec(tn_db *db, const char *sql, int nparams, const char *const *params,
                   unsigned flags)
{
    (void)flags;   /* nothing is cached yet */
    int rc;
    PQclear(run(PDB(db), sql, nparams, params, &rc));
    return rc;
}

static int pg_query(tn_db *db, tn_rows **rows, const char *sql, int nparams,
                    const char *const *params)
{
    int rc;
    PGresult *res = run(PDB(db), sql, nparams, params, &rc);
    if (res == NULL)
        return rc;
    pg_rows *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        PQclear(res);
        return db_set_error(db, TN_NOMEM, "out of memory");
    }
    r->base.drv = &db_pg_driver;
    r->res = res;
    r->nrows = PQntuples(res);
    r->ncols = PQnfields(res);
    r->cur = -1;
    db_rows_link(db, &r->base);
    *rows = &r->base;
    return TN_OK;
}

/* ---- row sets: the whole result is in memory, so they outlive their connection --------- */

static int pg_rows_next(tn_rows *rows)
{
    pg_rows *r = (pg_rows *)rows;
    if (r->cur + 1 < r->nrows) {
        r->cur++;
        return TN_OK;
    }
    r->cur = r->nrows;
    return TN_DONE;
}

static int pg_rows_ncols(const tn_rows *rows)
{
    return ((const pg_rows *)rows)->ncols;
}

static const char *pg_rows_colname(const tn_rows *rows, int col)
{
    return PQfname(((const pg_rows *)rows)->res, col);
}

static const char *pg_rows_get(const tn_rows *rows, int col)
{
    const pg_rows *r = (const pg_rows *)rows;
    if (r->cur < 0 || r->cur >= r->nrows || PQgetisnull(r->res, r->cur, col))
        return NULL;
    return PQgetvalue(r->res, r->cur, col);
}

static void pg_rows_detach(tn_rows *rows)
{
    (void)rows;
}

static void pg_rows_free(tn_rows *rows)
{
    PQclear(((pg_rows *)rows)->res);
    free(rows);
}

/* ---- state -------------------------------------------------------------------------------- */

static int pg_begin(tn_db *db)
{
    return pg_exec(db, "BEGIN", 0, NULL, 0);
}

static int64_t pg_last_id(const tn_db *db)
{
    (void)db;
    return -1;
}

static db_txn pg_txn_state(const tn_db *db)
{
    switch (PQtransactionStatus(CPDB(db)->conn)) {
    case PQTRANS_INTRANS:
    case PQTRANS_ACTIVE:
        return DB_TXN_OPEN;
    case PQTRANS_INERROR:
        return DB_TXN_FAILED;
    case PQTRANS_IDLE:
        return DB_TXN_NONE;
    default:   /* unknown: the connection broke, and the server rolled back */
        return DB_TXN_LOST;
    }
}

static bool pg_is_clean(const tn_db *db)
{
    const PGconn *c = CPDB(db)->conn;
    return PQstatus(c) == CONNECTION_OK && PQtransactionStatus(c) == PQTRANS_IDLE;
}

/* Roll back when the connection is healthy; reconnect (PQreset, then the session settings
 * again) when it is not or the rollback fails. */
static int pg_reset(tn_db *db)
{
    pg_db *d = PDB(db);
    PGTransactionStatusType ts = PQtransactionStatus(d->conn);
    if (PQstatus(d->conn) == CONNECTION_OK && ts == PQTRANS_IDLE)
        return TN_OK;
    if (PQstatus(d->conn) == CONNECTION_OK &&
        (ts == PQTRANS_INTRANS || ts == PQTRANS_INERROR)) {
        PGresult *res = PQexecParams(d->conn, "ROLLBACK", 0, NULL, NULL, NULL, NULL, 0);
        int rc = check_result(d, res);
        PQclear(res);
        if (rc == TN_OK && PQtransactionStatus(d->conn) == PQTRANS_IDLE)
            return TN_OK;
    }
    PQreset(d->conn);
    if (PQstatus(d->conn) != CONNECTION_OK)
        return conn_error(d, TN_IO, "reset: cannot reconnect");
    int rc = session_setup(d);
    if (rc != TN_OK) {
        char why[DB_ERRLEN];
        snprintf(why, sizeof(why), "%s", d->base.err);
        return db_set_error(db, TN_IO, "reset: session setup failed: %s", why);
    }
    db->err[0] = '\0';
    return TN_OK;
}

static void *pg_native(tn_db *db)
{
    return PDB(db)->conn;
}

const db_driver db_pg_driver = {
    .name = "postgres",
    .dialect = DB_DIALECT_PG,
    .open = pg_open,
    .close = pg_close,
    .exec = pg_exec,
    .query = pg_query,
    .rows_next = pg_rows_next,
    .rows_ncols = pg_rows_ncols,
    .rows_colname = pg_rows_colname,
    .rows_get = pg_rows_get,
    .rows_detach = pg_rows_detach,
    .rows_free = pg_rows_free,
    .begin = pg_begin,
    .last_id = pg_last_id,
    .txn_state = pg_txn_state,
    .is_clean = pg_is_clean,
    .reset = pg_reset,
    .native = pg_native,
};

/*
 * pg.c — the PostgreSQL driver (db_pg_driver, see db_int.h), on libpq.
 *
 * Built as its own module, storage/pgdriver.so, the only object linked with libpq: db.c
 * loads it on the first postgres URI and gets the vtable from tn_pgdriver_entry(), its one
 * exported symbol, handing over the few db.c functions it calls (see db_int.h).
 *
 * Owns: one PGconn per tn_db, the session settings every connection gets, the schema scope
 * (a transaction-local search_path sent in the same round trip as each transaction's first
 * statement, in libpq pipeline mode; see "the pipeline" below), the session wipe when the
 * scope changes after a statement that may have left something in the session ("what a
 * statement may leave" below), LISTEN/NOTIFY waits, and the translation of SQLSTATEs into
 * tn_rc codes.
 *
 * Statements go through PQexecParams with text parameters (one round trip: parse, bind,
 * execute of the unnamed statement), which also refuses several statements in one string;
 * the first statement of a transaction on a scoped connection goes through pipeline().
 * There is no prepared-statement cache yet: a cache must survive PQreset, DISCARD ALL and
 * "cached plan must not change result type" after a migration, and correctness comes first.
 *
 * The session, set after connect and again after every PQreset (a new backend forgets it)
 * and every wipe, in one statement: client_encoding UTF8 (the project's text encoding) and
 * an empty search_path (unscoped, an unqualified name resolves nowhere). These are the
 * server session's: behind PgBouncer in transaction mode a session serves other clients of
 * the same login between two of our transactions, so they reach those clients too (and
 * theirs reach us; PgBouncer carries client_encoding from client to client itself). That is
 * why everything else rides with each transaction: the scope, and the transaction settings
 * of db_options, statement_timeout (0: the server's, nothing sent) and read-only. Set on the
 * session, a request's timeout would cancel the next client's migration on that server
 * session, and a read-only default would refuse its writes.
 *
 * Codes: 23505 → TN_EXISTS; other class 23, classes 22, 42, 0A, 21, 25, 26, 2B, 34, 3D, 3F,
 * 44, and 08P01 on a healthy connection (a wrong parameter count) → TN_INVALID; 42501 and
 * 25006 (a write in a read-only transaction) → TN_DENIED; 57014 (statement_timeout, cancel)
 * → TN_TIMEOUT; 40001, 40P01, 55P03, 53300 → TN_BUSY; 53200 → TN_NOMEM; class 08,
 * 57P01..57P03, 53100 and a connection whose PQstatus went bad → TN_IO;
 * the rest TN_ERR. tn_db_last_id() is always -1 (use INSERT ... RETURNING). COPY is refused
 * (TN_INVALID) after ending the copy, so the connection stays usable; at the start of a
 * scoped transaction it is refused before anything is sent (it would stall the pipeline).
 *
 * Server notices go to the error log (WARNING as warn, the rest as debug), never to stderr
 * as libpq would by default.
 *
 * Must not: build SQL from values (the settings are parameters too; the one exception is
 * the timeout's SET LOCAL, formatted here from an int), echo the conninfo in messages (it
 * may hold a password), or block outside libpq's own calls.
 */
#include "core/first.h"
#include "storage/db_int.h"
#include "core/rc.h"

#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* db.c's functions, handed over by tn_pgdriver_entry (see db_int.h: a module cannot call
 * into the executable directly). tn_errf, the one way an error buffer is filled, is not
 * among them: core/rc.c is a leaf that calls only libc, so the module is built with its own
 * copy of it (Makefile.am), which also serves the entry's answer to a host it cannot trust. */
static const db_host *host;
#define db_set_error host->set_error
#define db_rows_link host->rows_link
#define db_rows_detach_all host->rows_detach_all

static const db_driver db_pg_driver;   /* defined at the end */

#define SCOPE_MAX 66   /* a quoted identifier: 63 bytes, two quotes, NUL */
#define SCOPE_SQL_PREFIX "SET LOCAL search_path TO "
#define ROLE_SQL_PREFIX "SET LOCAL ROLE "
#define SCOPE_QUOTED(d) ((d)->scope_sql + sizeof(SCOPE_SQL_PREFIX) - 1)

#define PG_CONNECT_TIMEOUT_S "5"

typedef struct pg_db {
    tn_db base;        /* first: tn_db * and pg_db * convert both ways */
    PGconn *conn;
    char scope[SCOPE_MAX];   /* the scope as db_set_scope got it; "" when none */
    char role[SCOPE_MAX];    /* the scope's role ("" when none: the login role's rights) */
    char role_sql[SCOPE_MAX + 32];    /* SET LOCAL ROLE <quoted> */
    char scope_sql[SCOPE_MAX + 32];   /* SET LOCAL search_path TO <quoted>: the scope's
                                         quoted form (the search_path value) is its tail,
                                         SCOPE_QUOTED(d) */
    char timeout_sql[48];    /* SET LOCAL statement_timeout = <ms>; "" with no timeout */
    char timeout[24];        /* the same value, as set_config's parameter */
    char auto_sql[3][320];   /* the autocommit form's first statement (build_auto_sql) */
    bool begin_pending;      /* tn_db_begin on a scoped connection (or one with transaction
                                settings): BEGIN goes out with the first statement */
    bool served_any;         /* this backend has run a transaction start of ours ... */
    char served[SCOPE_MAX];  /* ... under this scope ("" unscoped) */
    char served_role[SCOPE_MAX];   /* ... and this role */
    bool session_pending;    /* after a wipe, the session settings ride with every
                                transaction start until one of them commits */
    bool session_in_txn;     /* the open transaction carries them */
    int leftover;            /* LEFT_*: what this session's statements since the last wipe
                                may have left in it (see "what a statement may leave") */
    bool catalog_stmt;       /* the statement running now came with DB_EXEC_CATALOG */
    bool desync;             /* the protocol state is unknown: the next reset reconnects */
    bool doomed;             /* the server sent FATAL (its backend is ending): not alive */
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
    pg_db *d = arg;
    const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
    /* An error that arrives while the connection is idle reaches libpq as a notice: a
     * FATAL one (pg_terminate_backend, a shutdown) means the backend is ending. */
    if (sev != NULL && (strcmp(sev, "FATAL") == 0 || strcmp(sev, "PANIC") == 0))
        d->doomed = true;
    const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    bool warn = sev != NULL && strcmp(sev, "WARNING") == 0;
    host->log(warn ? TN_LOG_WARN : TN_LOG_DEBUG, "postgres %s: %s", sev != NULL ? sev : "NOTICE",
              msg != NULL ? msg : "");
}

/* ---- what a statement may leave in the session --------------------------------------------
 *
 * A change of scope wipes the session only when a statement since the last wipe may have left
 * something in it for the next tenant: wiping at every change costs a DISCARD ALL and the
 * session settings again, a large share of the server's work when a request runs one
 * query. Judged per statement, conservatively:
 *
 *   LEFT_SESSION   a command tag outside the list below (SET, RESET, PREPARE, DECLARE CURSOR,
 *                  LISTEN, CREATE FUNCTION, DO, CALL, LOCK, EXPLAIN, ...), or a text naming TEMP
 *                  (TEMP, TEMPORARY, pg_temp: a temporary table would shadow the next
 *                  tenant's), SET_CONFIG (a session setting, SET ROLE's too),
 *                  ADVISORY_LOCK (session-level locks survive a rollback), DBLINK, LISTEN,
 *                  PREPARE or DECLARE, whatever the statement's outcome; or the native handle
 *                  was handed out (anything may have been run on it)
 *                  -> DISCARD ALL and the session settings;
 *   LEFT_SEQUENCES an INSERT, UPDATE, DELETE or MERGE (a serial default or a trigger calls
 *                  nextval, and lastval() would answer the previous tenant's value), a
 *                  text naming NEXTVAL or SETVAL, or the schema DDL of a migration wave
 *                  (CREATE, ALTER or DROP of a TABLE, INDEX, VIEW or SEQUENCE; COMMENT,
 *                  GRANT, REVOKE: they change the catalog, which is not the session, but
 *                  ALTER TABLE ... ADD COLUMN with a serial fills the existing rows with
 *                  nextval) -> DISCARD SEQUENCES, so `tenancy migrate` does not pay a
 *                  DISCARD ALL and the session settings at every tenant;
 *   LEFT_NONE      SELECT, SHOW, BEGIN, START TRANSACTION, COMMIT, ROLLBACK, SAVEPOINT,
 *                  RELEASE with none of those words -> nothing.
 *
 * A statement run with DB_EXEC_CATALOG (this folder's own script that makes a tenant's role
 * and schema, target_schema_create_sql) counts as LEFT_SEQUENCES at most unless it names one
 * of the session words: its DO block, CREATE SCHEMA and SET LOCAL ROLE change the catalog or
 * the transaction, not the session, and `tenancy tenant create` would otherwise wipe the
 * session after every tenant.
 *
 * A word inside a string or a column name ("temperature") only costs a wipe. What this cannot
 * see: session state made by a user-defined function called from a plain SELECT (one that runs
 * SET, creates a temporary table or takes a session advisory lock inside); db_options'
 * reset_always (placement.NAME.session_reset = always) wipes at every change of scope for an
 * app that does that.
 */

enum { LEFT_NONE, LEFT_SEQUENCES, LEFT_SESSION };

static bool names_any(const char *sql, const char *const *words)
{
    for (; *words != NULL; words++)
        if (strcasestr(sql, *words) != NULL)
            return true;
    return false;
}

/* A command tag of schema DDL that leaves nothing in the session but sequence state: the
 * verb, one space, the object. A temporary object says TEMP in its text, caught before. */
static bool schema_ddl(const char *tag)
{
    static const char *const verbs[] = {"CREATE ", "ALTER ", "DROP ", NULL};
    static const char *const objects[] = {"TABLE", "INDEX", "VIEW", "SEQUENCE", NULL};
    for (const char *const *v = verbs; *v != NULL; v++) {
        size_t n = strlen(*v);
        if (strncmp(tag, *v, n) != 0)
            continue;
        for (const char *const *o = objects; *o != NULL; o++)
            if (strcmp(tag + n, *o) == 0)
                return true;
    }
    return false;
}

/* catalog: the caller vouched for the statement (DB_EXEC_CATALOG): a command tag outside
 * the lists counts as sequence state, not session state; the words still count. */
static int statement_leftover(const char *sql, const PGresult *res, bool catalog)
{
    static const char *const session_words[] = {"TEMP", "SET_CONFIG", "ADVISORY_LOCK",
                                                 "DBLINK", "LISTEN", "PREPARE", "DECLARE",
                                                 NULL};
    static const char *const sequence_words[] = {"NEXTVAL", "SETVAL", NULL};
    if (names_any(sql, session_words))
        return LEFT_SESSION;
    int left = names_any(sql, sequence_words) ? LEFT_SEQUENCES : LEFT_NONE;
    ExecStatusType st = res != NULL ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        return left;   /* it failed: what it did is rolled back with its transaction */
    const char *tag = PQcmdStatus((PGresult *)res);
    size_t n = strcspn(tag, " ");
#define TAG_IS(w) (n == sizeof(w) - 1 && strncmp(tag, w, n) == 0)
    if (TAG_IS("INSERT") || TAG_IS("UPDATE") || TAG_IS("DELETE") || TAG_IS("MERGE") ||
        TAG_IS("COMMENT") || TAG_IS("GRANT") || TAG_IS("REVOKE") || schema_ddl(tag))
        return LEFT_SEQUENCES;
    if (TAG_IS("SELECT") || TAG_IS("SHOW") || TAG_IS("BEGIN") || TAG_IS("COMMIT") ||
        TAG_IS("ROLLBACK") || TAG_IS("SAVEPOINT") || TAG_IS("RELEASE") ||
        strcmp(tag, "START TRANSACTION") == 0)
        return left;
#undef TAG_IS
    return catalog ? LEFT_SEQUENCES : LEFT_SESSION;
}

static void note_statement(pg_db *d, const char *sql, const PGresult *res)
{
    if (d->leftover == LEFT_SESSION)
        return;   /* the most there is: nothing to judge until the next wipe */
    int left = statement_leftover(sql, res, d->catalog_stmt);
    if (left > d->leftover)
        d->leftover = left;
}

/* ---- the session ---------------------------------------------------------------------------- */

/* One statement. The search_path is empty: outside a schema scope an unqualified name
 * resolves nowhere (pg_catalog is always searched, which is why the functions here are
 * qualified anyway). */
static const char SESSION_SQL[] =
    "SELECT pg_catalog.set_config('client_encoding', 'UTF8', false), "
    "pg_catalog.set_config('search_path', '', false)";

/* The transaction settings (see the banner): whether this connection has any. */
static bool txn_settings(const pg_db *d)
{
    return d->timeout[0] != '\0' || d->base.opt.read_only;
}

/* The scope of one transaction. After our BEGIN: SET LOCAL (scope_sql, built once per scope
 * from the quoted identifier db_quote_ident made) — a utility statement, with no function to look
 * up and nothing to plan, which counts where concurrent DDL keeps resetting the backends'
 * catalog caches (tenant creation does). In the autocommit form
 * there is no transaction block, where PostgreSQL before 17 answers SET LOCAL with a
 * WARNING (its effect is the same): set_config(..., true) says it without one.
 *
 * With a role (the tenant's: see target.h), the same statement sets both, still one
 * statement of the round trip: the role's rights apply from the next statement on, and the
 * transaction-local setting dies with the transaction like the path. set_config takes the
 * role's plain name; SET LOCAL ROLE its quoted form. The transaction settings join the same
 * statement too: a statement of their own would cost the server a parse, a plan and an
 * execution more per transaction (bench/README.md, `load`). */
#define SET_PATH "pg_catalog.set_config('search_path', $1, true)"
#define SET_ROLE ", pg_catalog.set_config('role', $2, true)"
#define SET_READ_ONLY "pg_catalog.set_config('transaction_read_only', 'on', true)"

/* The autocommit form's statement, built once per connection from the fixed parts above
 * (only what the connection has: each expression costs the server): [0] unscoped, with the
 * settings alone ("" when it has none), [1] the scope, [2] the scope and its role. */
static void build_auto_sql(pg_db *d)
{
    for (int kind = 0; kind < 3; kind++) {
        char *o = d->auto_sql[kind];
        size_t len = sizeof(d->auto_sql[kind]);
        int np = kind;   /* the scope's parameters: $1 the path, $2 the role */
        int n = snprintf(o, len, "SELECT %s%s", kind > 0 ? SET_PATH : "",
                         kind > 1 ? SET_ROLE : "");
        const char *sep = kind > 0 ? ", " : "";
        if (d->timeout[0] != '\0') {
            n += snprintf(o + n, len - (size_t)n,
                          "%spg_catalog.set_config('statement_timeout', $%d, true)", sep, ++np);
            sep = ", ";
        }
        if (d->base.opt.read_only)
            snprintf(o + n, len - (size_t)n, "%s" SET_READ_ONLY, sep);
        if (kind == 0 && !txn_settings(d))
            o[0] = '\0';
    }
}

/* A new backend: nothing served yet, the session settings applied. */
static int session_setup(pg_db *d)
{
    d->served_any = false;
    d->served[0] = '\0';
    d->served_role[0] = '\0';
    d->desync = false;
    d->session_pending = d->session_in_txn = false;
    d->leftover = LEFT_NONE;
    d->base.session++;
    PGresult *res = PQexecParams(d->conn, SESSION_SQL, 0, NULL, NULL, NULL, NULL, 0);
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
        int rc = tn_errf(err, errlen, perr != NULL ? TN_INVALID : TN_NOMEM,
                         "postgres: bad connection string: %s", line);
        PQfreemem(perr);
        return rc;
    }
    PQconninfoFree(parsed);

    int rc;
    pg_db *d = calloc(1, sizeof(*d));
    if (d == NULL) {
        return tn_errf(err, errlen, TN_NOMEM, "postgres: out of memory");
    }
    d->base.opt = *opt;
    if (opt->statement_timeout_ms > 0) {
        snprintf(d->timeout, sizeof(d->timeout), "%d", opt->statement_timeout_ms);
        snprintf(d->timeout_sql, sizeof(d->timeout_sql), "SET LOCAL statement_timeout = %d",
                 opt->statement_timeout_ms);
    }
    build_auto_sql(d);
    /* A server that accepts the connection and never answers must not hold a worker for
     * good: a connect timeout unless the target names its own (it comes after, and wins).
     * The program's name shows in pg_stat_activity unless the target sets application_name. */
    static const char *const keys[] = {"connect_timeout", "fallback_application_name", "dbname",
                                       NULL};
    const char *vals[] = {PG_CONNECT_TIMEOUT_S, program_invocation_short_name, target, NULL};
    d->conn = PQconnectdbParams(keys, vals, 1);
    if (d->conn == NULL || PQstatus(d->conn) != CONNECTION_OK) {
        char line[DB_ERRLEN];
        first_line(line, sizeof(line), d->conn != NULL ? PQerrorMessage(d->conn) : NULL);
        rc = tn_errf(err, errlen, TN_IO, "postgres: cannot connect: %s", line);
        goto fail;
    }
    PQsetNoticeReceiver(d->conn, notice_receiver, d);
    if (session_setup(d) != TN_OK) {
        rc = tn_errf(err, errlen, TN_IO, "postgres: session setup failed: %s", d->base.err);
        goto fail;
    }
    d->base.drv = &db_pg_driver;
    *out = &d->base;
    return TN_OK;

fail:
    PQfinish(d->conn);   /* NULL is accepted */
    free(d);
    return rc;
}

static void pg_close(tn_db *db)
{
    PQfinish(PDB(db)->conn);   /* the server rolls back an open transaction */
    free(db);
}

/* ---- the pipeline: a transaction start in one round trip -----------------------------------
 *
 * On a scoped connection every transaction starts with the scope, in the same round trip as
 * its first statement (libpq pipeline mode: the messages go out together, the results are
 * read in order):
 *
 *   autocommit statement:        set_config(search_path, "s", true); STMT; Sync
 *   first statement after begin: BEGIN; SET LOCAL search_path TO "s"; STMT; Sync
 *
 * A connection with transaction settings (a statement_timeout, read-only) sends them the
 * same way, scoped or not:
 *
 *   autocommit statement:        SELECT [set_config(search_path, ...), ...,]
 *                                  set_config(statement_timeout, true), [read-only]; STMT; Sync
 *   first statement after begin: BEGIN; [SET LOCAL ...;] SET LOCAL statement_timeout = N;
 *                                  [SET TRANSACTION READ ONLY;] STMT; Sync
 *
 * After BEGIN they are utility statements, which take no snapshot: the caller's first
 * statement may still be SET TRANSACTION ISOLATION LEVEL (a copy's source is). The
 * timeout applies from the next statement on: PostgreSQL arms it per statement, reading
 * the setting then.
 *
 * The autocommit form needs no BEGIN/COMMIT: every message before a Sync runs in one
 * implicit transaction, committed at the Sync, and rolled back there when anything in it
 * failed, so a failed statement leaves the connection idle and clean (an explicit BEGIN
 * would leave it in a failed transaction block that needs another round trip). The
 * transaction-local search_path dies with the transaction either way.
 *
 * When the scope changed since the backend's last transaction (another schema, or none)
 * and a statement since the last wipe may have left something in the session (see above;
 * always, with reset_always), the session is wiped first, in the same round trip and the
 * same Sync segment:
 *
 *   DISCARD ALL; SESSION_SQL; [BEGIN;] set_config(...); STMT; Sync
 *
 * or, when only sequence state may be left (lastval()), the lighter
 *
 *   DISCARD SEQUENCES; [BEGIN;] set_config(...); STMT; Sync
 *
 * so nothing the previous tenant left in the session (a session SET, temporary tables,
 * prepared statements, WITH HOLD cursors, LISTEN, advisory locks, SET ROLE) reaches the
 * next one. DISCARD ALL may not run inside a transaction, but as the first command after a
 * Sync it is accepted and committed at once; what follows starts a new implicit
 * transaction. ONE Sync per round trip is deliberate: PgBouncer before 1.21 may hand the
 * server to another client at the first ReadyForQuery of a multi-Sync pipeline. The price:
 * SESSION_SQL is part of the transaction, so when that transaction does not commit the
 * session is left with the server's defaults, and SESSION_SQL rides again with every
 * transaction start until one commits (session_pending). Unscoped connections that were
 * never scoped and have no transaction settings never take this path.
 */

typedef struct pcmd {
    const char *sql;
    int nparams;
    const char *const *params;
    bool sync;           /* a Sync point follows this command */
    PGresult **out;      /* when not NULL: its result when it succeeded (the caller clears
                            it), else NULL */
} pcmd;

/* Keep the first error's message when a later result fails too. */
static int note_error(pg_db *d, int rc, int new_rc, const char *saved)
{
    if (rc == TN_OK)
        return new_rc;
    return db_set_error(&d->base, rc, "%s", saved);
}

/*
 * Send cmds in one pipeline, then read every result. Returns TN_OK or the first error (its
 * message set); *failed is the index of the first command that failed (n when none).
 * cmds[keep]'s result goes to *kept when it succeeded (the caller clears it).
 */
static int pipeline(pg_db *d, const pcmd *cmds, int n, int keep, PGresult **kept, int *failed)
{
    PGconn *c = d->conn;
    *kept = NULL;
    *failed = n;
    for (int i = 0; i < n; i++)
        if (cmds[i].out != NULL)
            *cmds[i].out = NULL;
    if (!PQenterPipelineMode(c))
        return conn_error(d, PQstatus(c) == CONNECTION_OK ? TN_ERR : TN_IO, "pipeline");
    for (int i = 0; i < n; i++) {
        if (!PQsendQueryParams(c, cmds[i].sql, cmds[i].nparams, NULL, cmds[i].params, NULL,
                               NULL, 0) ||
            (cmds[i].sync && !PQpipelineSync(c))) {
            /* Nothing was read yet and part of it may be out: the protocol state is unknown,
             * so the connection is reset before it is used again. */
            d->desync = true;
            *failed = 0;
            int rc = conn_error(d, PQstatus(c) == CONNECTION_OK ? TN_ERR : TN_IO, "send");
            if (PQstatus(c) == CONNECTION_OK)
                PQpipelineSync(c);
            return rc;
        }
    }
    int rc = TN_OK;
    char saved[DB_ERRLEN];
    for (int i = 0; i < n; i++) {
        PGresult *r = PQgetResult(c);
        if (r == NULL) {   /* no result for a command that was sent: the connection broke */
            snprintf(saved, sizeof(saved), "%s", d->base.err);
            rc = note_error(d, rc, conn_error(d, TN_IO, "connection lost"), saved);
            if (*failed == n)
                *failed = i;
            d->desync = true;
            break;
        }
        if (PQresultStatus(r) == PGRES_PIPELINE_ABORTED) {
            PQclear(r);   /* skipped after an earlier error of its segment */
        } else {
            snprintf(saved, sizeof(saved), "%s", d->base.err);
            int r_rc = check_result(d, r);
            if (r_rc != TN_OK) {
                rc = note_error(d, rc, r_rc, saved);
                if (*failed == n)
                    *failed = i;
                PQclear(r);
            } else if (i == keep) {
                *kept = r;
            } else if (cmds[i].out != NULL) {
                *cmds[i].out = r;
            } else {
                PQclear(r);
            }
        }
        /* The end of this command's results; then its Sync, if it has one. */
        while ((r = PQgetResult(c)) != NULL) {
            ExecStatusType st = PQresultStatus(r);
            PQclear(r);
            if (st == PGRES_PIPELINE_SYNC) {   /* only when a command had no result */
                d->desync = true;
                break;
            }
        }
        if (cmds[i].sync) {
            r = PQgetResult(c);
            bool ok = r != NULL && PQresultStatus(r) == PGRES_PIPELINE_SYNC;
            PQclear(r);
            if (!ok) {
                snprintf(saved, sizeof(saved), "%s", d->base.err);
                rc = note_error(d, rc, conn_error(d, TN_IO, "connection lost"), saved);
                if (*failed == n)
                    *failed = i;
                d->desync = true;
                break;
            }
        }
    }
    if (!PQexitPipelineMode(c))   /* results left unread: only after a broken connection */
        d->desync = true;
    if (rc != TN_OK && *kept != NULL) {
        PQclear(*kept);
        *kept = NULL;
    }
    return rc;
}

/* The first word of a statement (blanks and comments skipped), upper-cased into out. */
static void first_word(const char *sql, char *out, size_t n)
{
    const char *p = sql;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == '(')
            p++;
        if (p[0] == '-' && p[1] == '-') {
            p += strcspn(p, "\n");
        } else if (p[0] == '/' && p[1] == '*') {
            int depth = 1;   /* PostgreSQL nests block comments */
            for (p += 2; *p != '\0' && depth > 0; p++) {
                if (p[0] == '*' && p[1] == '/')
                    depth--, p++;
                else if (p[0] == '/' && p[1] == '*')
                    depth++, p++;
            }
        } else {
            break;
        }
    }
    size_t i = 0;
    for (; i + 1 < n && ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')); p++)
        out[i++] = (char)(*p >= 'a' ? *p - 'a' + 'A' : *p);
    out[i] = '\0';
}

/* The wipe the next transaction start needs: LEFT_NONE, LEFT_SEQUENCES or LEFT_SESSION. */
static int wipe_needed(const pg_db *d)
{
    if (!d->served_any ||
        (strcmp(d->served, d->scope) == 0 && strcmp(d->served_role, d->role) == 0))
        return LEFT_NONE;
    return d->base.opt.reset_always ? LEFT_SESSION : d->leftover;
}

/* What a transaction start sends before the caller's statements (see the banner of this
 * section), in cmds (room for START_MAX); the buffers are the caller's and must live until
 * the pipeline was read. Returns the number of commands. */
#define START_MAX 7
typedef struct start_state {
    const char *params[3];
    bool discard, session;
} start_state;

static int start_prefix(pg_db *d, pcmd *cmds, start_state *st)
{
    int n = 0;
    bool role = d->role[0] != '\0', settings = txn_settings(d);
    int wipe = wipe_needed(d);
    st->discard = wipe != LEFT_NONE;
    st->session = wipe == LEFT_SESSION || d->session_pending;
    if (wipe == LEFT_SESSION)
        cmds[n++] = (pcmd){"DISCARD ALL", 0, NULL, false, NULL};
    else if (wipe == LEFT_SEQUENCES)
        cmds[n++] = (pcmd){"DISCARD SEQUENCES", 0, NULL, false, NULL};
    if (st->session)
        cmds[n++] = (pcmd){SESSION_SQL, 0, NULL, false, NULL};
    bool begin = d->begin_pending;
    if (begin) {
        cmds[n++] = (pcmd){"BEGIN", 0, NULL, false, NULL};
        if (d->scope[0] != '\0') {
            cmds[n++] = (pcmd){d->scope_sql, 0, NULL, false, NULL};
            if (role)
                cmds[n++] = (pcmd){d->role_sql, 0, NULL, false, NULL};
        }
        if (d->timeout_sql[0] != '\0')
            cmds[n++] = (pcmd){d->timeout_sql, 0, NULL, false, NULL};
        if (d->base.opt.read_only)
            cmds[n++] = (pcmd){"SET TRANSACTION READ ONLY", 0, NULL, false, NULL};
    } else if (d->scope[0] != '\0' || settings) {
        int np = 0;
        if (d->scope[0] != '\0') {
            st->params[np++] = SCOPE_QUOTED(d);
            if (role)
                st->params[np++] = d->role;
        }
        if (d->timeout[0] != '\0')
            st->params[np++] = d->timeout;
        const char *sql = d->auto_sql[d->scope[0] == '\0' ? 0 : role ? 2 : 1];
        cmds[n++] = (pcmd){sql, np, st->params, false, NULL};
    }
    d->begin_pending = false;   /* sent: the server's state says the rest */
    return n;
}

/* After a transaction start's pipeline was read (rc its outcome, failed as pipeline()). The
 * backend now serves this scope, unless the wipe itself failed: then nothing after it ran,
 * and the next transaction start tries again. */
static void start_done(pg_db *d, const start_state *st, int rc, int failed)
{
    if (!st->discard || failed > 0) {
        d->served_any = true;
        memcpy(d->served, d->scope, sizeof(d->served));
        memcpy(d->served_role, d->role, sizeof(d->served_role));
        if (st->discard)
            d->leftover = LEFT_NONE;
        if (st->session) {
            PGTransactionStatusType ts = PQtransactionStatus(d->conn);
            d->session_in_txn = ts == PQTRANS_INTRANS || ts == PQTRANS_INERROR;
            d->session_pending = !(rc == TN_OK && ts == PQTRANS_IDLE);   /* committed */
        }
    }
}

/* Whether the next statement must go out with a transaction start. */
static bool start_due(const pg_db *d)
{
    return PQstatus(d->conn) == CONNECTION_OK && PQtransactionStatus(d->conn) == PQTRANS_IDLE &&
           (d->scope[0] != '\0' || d->begin_pending || d->session_pending ||
            txn_settings(d) || wipe_needed(d) != LEFT_NONE);
}

/* COPY would stall a pipeline: refused before anything is sent. */
static int refuse_copy(pg_db *d, const char *sql)
{
    char word[8];
    first_word(sql, word, sizeof(word));
    return strcmp(word, "COPY") == 0 ? db_set_error(&d->base, TN_INVALID, "COPY is not supported")
                                     : TN_OK;
}

/* The first statement of a transaction on a scoped (or formerly scoped) connection: see the
 * banner of this section. */
static PGresult *run_start(pg_db *d, const char *sql, int nparams, const char *const *params,
                           int *rc)
{
    if ((*rc = refuse_copy(d, sql)) != TN_OK)
        return NULL;
    pcmd cmds[START_MAX + 1];
    start_state st;
    int n = start_prefix(d, cmds, &st);
    int user = n;
    cmds[n++] = (pcmd){sql, nparams, params, true, NULL};
    PGresult *res = NULL;
    int failed;
    *rc = pipeline(d, cmds, n, user, &res, &failed);
    start_done(d, &st, *rc, failed);
    note_statement(d, sql, res);
    if (res != NULL)
        d->base.changes = tag_changes(res);
    return res;
}

/* ---- statements ----------------------------------------------------------------------------- */

static int desync_error(pg_db *d)
{
    return db_set_error(&d->base, TN_IO, "the connection must be reset (an earlier exchange "
                                         "with the server broke off)");
}

/* The transaction that carried the session settings has ended (committed: they stay). */
static void session_txn_ended(pg_db *d, bool committed)
{
    if (d->session_in_txn && PQtransactionStatus(d->conn) != PQTRANS_INTRANS &&
        PQtransactionStatus(d->conn) != PQTRANS_INERROR) {
        if (committed)
            d->session_pending = false;
        d->session_in_txn = false;
    }
}

static PGresult *run(pg_db *d, const char *sql, int nparams, const char *const *params, int *rc)
{
    if (d->desync) {
        *rc = desync_error(d);
        return NULL;
    }
    if (start_due(d))
        return run_start(d, sql, nparams, params, rc);
    PGresult *res = PQexecParams(d->conn, sql, nparams, NULL, params, NULL, NULL, 0);
    *rc = check_result(d, res);
    note_statement(d, sql, res);
    /* a COMMIT of a failed transaction answers ROLLBACK */
    session_txn_ended(d, *rc == TN_OK && strcmp(PQcmdStatus(res), "COMMIT") == 0);
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
    pg_db *d = PDB(db);
    /* A transaction whose BEGIN was never sent ends without a round trip. db.c sends
     * exactly these two words. */
    if (d->begin_pending && (strcmp(sql, "COMMIT") == 0 || strcmp(sql, "ROLLBACK") == 0)) {
        d->begin_pending = false;
        return TN_OK;
    }
    int rc;
    d->catalog_stmt = (flags & DB_EXEC_CATALOG) != 0;   /* (nothing is cached yet) */
    PQclear(run(d, sql, nparams, params, &rc));
    d->catalog_stmt = false;
    return rc;
}

static int wrap_rows(tn_db *db, PGresult *res, tn_rows **rows);

static int pg_query(tn_db *db, tn_rows **rows, const char *sql, int nparams,
                    const char *const *params)
{
    int rc;
    PGresult *res = run(PDB(db), sql, nparams, params, &rc);
    if (res == NULL)
        return rc;
    return wrap_rows(db, res, rows);
}

/* The statements of db_exec_batch and, when due, the transaction's start, then the COMMIT,
 * in one pipeline with one Sync. */
static int pg_batch(tn_db *db, const db_stmt *stmts, int n, bool commit, tn_rows **rows,
                    int *failed)
{
    pg_db *d = PDB(db);
    *failed = 0;
    if (d->desync)
        return desync_error(d);
    for (int i = 0; i < n; i++) {
        int rc = refuse_copy(d, stmts[i].sql);
        if (rc != TN_OK) {
            *failed = i;
            return rc;
        }
    }
    pcmd *cmds = calloc((size_t)n + START_MAX + 1, sizeof(*cmds));
    PGresult **res = calloc((size_t)n, sizeof(*res));
    if (cmds == NULL || res == NULL) {
        free(cmds);
        free(res);
        return db_set_error(db, TN_NOMEM, "out of memory");
    }
    start_state st;
    bool start = start_due(d);
    int p = start ? start_prefix(d, cmds, &st) : 0, total = p;
    for (int i = 0; i < n; i++)
        cmds[total++] = (pcmd){stmts[i].sql, stmts[i].nparams, stmts[i].params, false, &res[i]};
    if (commit)
        cmds[total++] = (pcmd){"COMMIT", 0, NULL, false, NULL};
    cmds[total - 1].sync = true;
    PGresult *none = NULL;
    int f;
    int rc = pipeline(d, cmds, total, -1, &none, &f);
    if (start)
        start_done(d, &st, rc, f);
    *failed = f < p ? 0 : f - p > n ? n : f - p;
    for (int i = 0; i < n; i++) {
        d->catalog_stmt = (stmts[i].flags & DB_EXEC_CATALOG) != 0;
        note_statement(d, stmts[i].sql, res[i]);
    }
    d->catalog_stmt = false;
    session_txn_ended(d, rc == TN_OK && commit);
    if (rc == TN_OK)
        d->base.changes = tag_changes(res[n - 1]);
    for (int i = 0; i < n; i++)
        if (res[i] != NULL && !(rc == TN_OK && rows != NULL && i == n - 1))
            PQclear(res[i]);
    if (rc == TN_OK && rows != NULL)
        rc = wrap_rows(db, res[n - 1], rows);
    free(res);
    free(cmds);
    return rc;
}

/* A successful result as a row set linked to db (res is the row set's from then on). */
static int wrap_rows(tn_db *db, PGresult *res, tn_rows **rows)
{
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

/* On a scoped connection, or one with transaction settings, BEGIN waits for the first
 * statement (one round trip for both, and the settings go with it). */
static int pg_begin(tn_db *db)
{
    pg_db *d = PDB(db);
    if ((d->scope[0] != '\0' || txn_settings(d)) && PQstatus(d->conn) == CONNECTION_OK &&
        !d->desync) {
        d->begin_pending = true;
        return TN_OK;
    }
    return pg_exec(db, "BEGIN", 0, NULL, 0);
}

static int64_t pg_last_id(const tn_db *db)
{
    (void)db;
    return -1;
}

static db_txn pg_txn_state(const tn_db *db)
{
    const pg_db *d = CPDB(db);
    switch (PQtransactionStatus(d->conn)) {
    case PQTRANS_INTRANS:
    case PQTRANS_ACTIVE:
        return DB_TXN_OPEN;
    case PQTRANS_INERROR:
        return DB_TXN_FAILED;
    case PQTRANS_IDLE:
        return d->begin_pending ? DB_TXN_OPEN : DB_TXN_NONE;
    default:   /* unknown: the connection broke, and the server rolled back */
        return DB_TXN_LOST;
    }
}

static bool pg_is_clean(const tn_db *db)
{
    const pg_db *d = CPDB(db);
    return PQstatus(d->conn) == CONNECTION_OK && PQtransactionStatus(d->conn) == PQTRANS_IDLE &&
           !d->begin_pending && !d->desync && !d->doomed;
}

/* Whether an idle connection still has a backend, without a round trip: a backend that was
 * terminated (pg_terminate_backend, DROP DATABASE ... WITH FORCE, a server restart) has
 * sent its FATAL error and closed the socket, so the socket is readable and reading it
 * marks the connection bad. One poll(2) with no wait. */
static bool pg_alive(tn_db *db)
{
    pg_db *d = PDB(db);
    if (PQstatus(d->conn) != CONNECTION_OK)
        return false;
    struct pollfd p = {.fd = PQsocket(d->conn), .events = POLLIN};
    if (p.fd < 0)
        return false;
    /* Read what is there; PQisBusy parses it (an idle-time error goes to notice_receiver,
     * which marks the connection doomed). The FATAL message and the end of the stream can
     * arrive in two reads: read again while the socket stays readable. */
    for (int i = 0; i < 4 && !d->doomed; i++) {
        if (poll(&p, 1, 0) <= 0)
            return true;
        if (p.revents & (POLLERR | POLLNVAL))
            return false;
        if (!PQconsumeInput(d->conn) || PQstatus(d->conn) != CONNECTION_OK)
            return false;
        (void)PQisBusy(d->conn);
    }
    return !d->doomed;
}

/* Roll back when the connection is healthy; reconnect (PQreset, then the session settings
 * again) when it is not, when the rollback fails, or when an exchange broke off. */
static int pg_reset(tn_db *db)
{
    pg_db *d = PDB(db);
    d->begin_pending = false;
    d->session_in_txn = false;   /* rolled back below, or a new backend */
    PGTransactionStatusType ts = PQtransactionStatus(d->conn);
    if (!d->desync && !d->doomed && PQstatus(d->conn) == CONNECTION_OK && ts == PQTRANS_IDLE)
        return TN_OK;
    if (!d->desync && PQstatus(d->conn) == CONNECTION_OK &&
        (ts == PQTRANS_INTRANS || ts == PQTRANS_INERROR)) {
        PGresult *res = PQexecParams(d->conn, "ROLLBACK", 0, NULL, NULL, NULL, NULL, 0);
        int rc = check_result(d, res);
        PQclear(res);
        if (rc == TN_OK && PQtransactionStatus(d->conn) == PQTRANS_IDLE)
            return TN_OK;
    }
    PQreset(d->conn);
    d->doomed = false;
    if (PQstatus(d->conn) != CONNECTION_OK)
        return conn_error(d, TN_IO, "reset: cannot reconnect");
    int rc = session_setup(d);
    if (rc != TN_OK) {
        char why[sizeof(d->base.err)];   /* the message is rewritten from itself */
        memcpy(why, d->base.err, sizeof(why));
        return db_set_error(db, TN_IO, "reset: session setup failed: %s", why);
    }
    db->err[0] = '\0';
    return TN_OK;
}

/* Anything may be run on the handle: the next change of scope wipes the session. */
static void *pg_native(tn_db *db)
{
    PDB(db)->leftover = LEFT_SESSION;
    return PDB(db)->conn;
}

/* ---- the schema scope ----------------------------------------------------------------------- */

static int pg_set_scope(tn_db *db, const char *schema, const char *quoted, const char *role,
                        const char *quoted_role)
{
    pg_db *d = PDB(db);
    snprintf(d->scope, sizeof(d->scope), "%s", schema != NULL ? schema : "");
    snprintf(d->scope_sql, sizeof(d->scope_sql), SCOPE_SQL_PREFIX "%s",
             quoted != NULL ? quoted : "");
    snprintf(d->role, sizeof(d->role), "%s", role != NULL ? role : "");
    snprintf(d->role_sql, sizeof(d->role_sql), ROLE_SQL_PREFIX "%s",
             quoted_role != NULL ? quoted_role : "");
    return TN_OK;
}

static const char *pg_scope_role(const tn_db *db)
{
    const pg_db *d = CPDB(db);
    return d->role[0] != '\0' ? d->role : NULL;
}

static const char *pg_scope(const tn_db *db)
{
    const pg_db *d = CPDB(db);
    return d->scope[0] != '\0' ? d->scope : NULL;
}

/* ---- notifications ------------------------------------------------------------------------ */

static bool drain_notifies(PGconn *c, db_notify_fn fn, void *ctx)
{
    bool any = false;
    PGnotify *nt;
    while ((nt = PQnotifies(c)) != NULL) {
        any = true;
        if (fn != NULL)
            fn(ctx, nt->relname, nt->extra != NULL ? nt->extra : "");
        PQfreemem(nt);
    }
    return any;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int pg_socket(tn_db *db) { return PQsocket(PDB(db)->conn); }

/* An interrupted wait (a signal) counts as a timeout, so the caller sees its stop flag. */
static int pg_wait_notify(tn_db *db, int timeout_ms, db_notify_fn fn, void *ctx)
{
    pg_db *d = PDB(db);
    PGconn *c = d->conn;
    if (PQstatus(c) != CONNECTION_OK)
        return conn_error(d, TN_IO, "connection lost");
    if (!PQconsumeInput(c))
        return conn_error(d, TN_IO, "connection lost");
    if (drain_notifies(c, fn, ctx))
        return TN_OK;
    int64_t end = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        int64_t left = end - now_ms();
        if (left <= 0)
            return db_set_error(db, TN_TIMEOUT, "no notification");
        struct pollfd p = {.fd = PQsocket(c), .events = POLLIN};
        int n = poll(&p, 1, (int)left);
        if (n < 0 && errno == EINTR)
            return db_set_error(db, TN_TIMEOUT, "interrupted");
        if (n < 0)
            return db_set_error(db, TN_IO, "poll: %s", strerror(errno));
        if (n == 0)
            continue;
        if (!PQconsumeInput(c))
            return conn_error(d, TN_IO, "connection lost");
        if (drain_notifies(c, fn, ctx))
            return TN_OK;
    }
}

/* ---- conninfo with another database ----------------------------------------------------- */

/* Append " key='value'" to out, quoted as libpq's conninfo wants (\ and ' escaped). */
static bool append_kv(char *out, size_t outlen, size_t *len, const char *key, const char *val)
{
    int w = snprintf(out + *len, outlen - *len, "%s%s='", *len > 0 ? " " : "", key);
    if (w < 0 || (size_t)w >= outlen - *len)
        return false;
    *len += (size_t)w;
    for (const char *p = val; *p != '\0'; p++) {
        if (*len + 3 >= outlen)
            return false;
        if (*p == '\\' || *p == '\'')
            out[(*len)++] = '\\';
        out[(*len)++] = *p;
    }
    if (*len + 2 > outlen)
        return false;
    out[(*len)++] = '\'';
    out[*len] = '\0';
    return true;
}

/* Parse the target (a conninfo string or a URI) and write every option it sets back as
 * keyword=value pairs, with dbname replaced. */
static int pg_with_dbname(const char *target, const char *dbname, const char *user,
                          const char *password, char *out, size_t outlen, char *err,
                          size_t errlen)
{
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(target, &perr);
    if (opts == NULL) {
        char line[DB_ERRLEN];
        first_line(line, sizeof(line), perr != NULL ? perr : "out of memory");
        int rc = tn_errf(err, errlen, perr != NULL ? TN_INVALID : TN_NOMEM,
                         "postgres: bad connection string: %s", line);
        PQfreemem(perr);
        return rc;
    }
    size_t len = 0;
    bool ok = outlen > 0;
    if (ok)
        out[0] = '\0';
    for (PQconninfoOption *o = opts; ok && o->keyword != NULL; o++) {
        if (o->val == NULL || (dbname != NULL && strcmp(o->keyword, "dbname") == 0) ||
            (user != NULL && (strcmp(o->keyword, "user") == 0 ||
                              strcmp(o->keyword, "password") == 0)))
            continue;
        ok = append_kv(out, outlen, &len, o->keyword, o->val);
    }
    if (ok && dbname != NULL)
        ok = append_kv(out, outlen, &len, "dbname", dbname);
    if (ok && user != NULL)
        ok = append_kv(out, outlen, &len, "user", user);
    if (ok && user != NULL && password != NULL)
        ok = append_kv(out, outlen, &len, "password", password);
    PQconninfoFree(opts);
    if (!ok) {
        return tn_errf(err, errlen, TN_TOOBIG, "postgres: connection string too long");
    }
    return TN_OK;
}

static const db_driver db_pg_driver = {
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
    .set_scope = pg_set_scope,
    .scope = pg_scope,
    .scope_role = pg_scope_role,
    .wait_notify = pg_wait_notify,
    .socket = pg_socket,
    .with_dbname = pg_with_dbname,
    .alive = pg_alive,
    .batch = pg_batch,
};

/* ---- the module's entry ------------------------------------------------------------------- */

const db_driver *tn_pgdriver_entry(const db_host *h, char *err, size_t errlen)
{
    if (h == NULL || h->abi != DB_HOST_ABI || h->sizeof_db != sizeof(tn_db) ||
        h->sizeof_rows != sizeof(tn_rows) || h->sizeof_driver != sizeof(db_driver)) {
        /* The entry answers NULL, not a code: its signature is what a stale module and a
         * newer host still agree on. */
        tn_errf(err, errlen, TN_INVALID,
                "the PostgreSQL driver was built for another version of the host");
        return NULL;
    }
    host = h;
    return &db_pg_driver;
}

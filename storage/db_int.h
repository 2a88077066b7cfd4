/*
 * db_int.h — what the storage drivers share with db.c: the driver vtable and the
 * transparent connection and row structs. Private to storage/ (and its unit tests).
 *
 * Shape: db.c owns everything that is the same for both backends (argument checks, the
 * transaction flag, the error buffer, the list of open row sets, script splitting) and calls
 * a driver through `db_driver` for the rest. A driver allocates its own struct with `tn_db`
 * (or `tn_rows`) as the FIRST member and casts back, so db.c never sees sqlite3 or PGconn.
 * The PostgreSQL driver lives in a loadable module and reaches db.c through `db_host`.
 * target.c and pool.c (storage targets and the pool) use it too, for db_set_error and the
 * connection's state.
 *
 * Must not: be included outside storage/ and tests/unit/storage/; carry anything a
 * caller of db.h could use to bypass the parameterized API.
 */
#ifndef TN_STORAGE_DB_INT_H
#define TN_STORAGE_DB_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/db.h"

/* The bound of the message kept for tn_db_error() (longer ones are cut). */
#define DB_ERRLEN 512

/* The most parameters a statement may take (PostgreSQL's protocol limit). */
#define DB_MAX_PARAMS 65535

/* What the script splitter must know of the SQL dialect. */
typedef enum db_dialect {
    DB_DIALECT_SQLITE,   /* `ident`, [ident]; block comments do not nest */
    DB_DIALECT_PG        /* $tag$...$tag$, E'\'', nested block comments */
} db_dialect;

typedef struct db_driver db_driver;

typedef enum db_txn {
    DB_TXN_NONE,     /* autocommit */
    DB_TXN_OPEN,     /* inside a transaction */
    DB_TXN_FAILED,   /* inside a transaction that an error aborted (PostgreSQL) */
    DB_TXN_LOST      /* the connection broke; the server rolled back (PostgreSQL) */
} db_txn;

/* Flags for db_driver.exec. */
#define DB_EXEC_NOCACHE 1u      /* run once: do not keep the prepared statement */
#define DB_EXEC_CATALOG 2u      /* the caller vouches that the statement changes the catalog
                                   only (a schema, a role, SET LOCAL): it leaves at most
                                   sequence state in the session (PostgreSQL's wipe at the next
                                   change of scope; see pg.c) */

/* tn_db_exec with driver flags (DB_EXEC_*), for this folder's own statements. */
int db_exec_flags(tn_db *db, const char *sql, int nparams, const char *const *params,
                  unsigned flags);

struct tn_db {
    const db_driver *drv;
    db_options opt;             /* with defaults applied */
    uint64_t session;           /* bumped by the driver at each (re)connect: a new server
                                   session (the pool counts the schemas one has served) */
    bool in_txn;                /* tn_db_begin() succeeded and no commit/rollback since */
    int64_t changes;            /* rows changed by the last statement (tn_db_changes) */
    struct tn_rows *rows;       /* row sets not freed yet (detached on close and reset) */
    char err[DB_ERRLEN];        /* tn_db_error(); "" when the last call succeeded */
};

struct tn_rows {
    const db_driver *drv;
    tn_db *db;                  /* NULL once detached (the connection closed or reset) */
    struct tn_rows *prev, *next;
};

/*
 * The driver vtable. Every function gets arguments db.c has already checked (non-NULL db,
 * sql and rows; 0 <= nparams <= DB_MAX_PARAMS; params non-NULL when nparams > 0). Errors
 * return a tn_rc and leave a message with db_set_error(). The mapping of native errors to
 * codes is the driver's, and is listed in its banner.
 */
struct db_driver {
    const char *name;           /* "sqlite", "postgres" */
    db_dialect dialect;
    /* target: the URI without what db.c stripped (see db_open in db.c). On failure the
     * driver frees what it allocated and writes err. */
    int (*open)(const char *target, const db_options *opt, tn_db **out, char *err,
                size_t errlen);
    void (*close)(tn_db *db);
    int (*exec)(tn_db *db, const char *sql, int nparams, const char *const *params,
                unsigned flags);
    int (*query)(tn_db *db, tn_rows **rows, const char *sql, int nparams,
                 const char *const *params);
    int (*rows_next)(tn_rows *rows);
    int (*rows_ncols)(const tn_rows *rows);
    const char *(*rows_colname)(const tn_rows *rows, int col);
    const char *(*rows_get)(const tn_rows *rows, int col);   /* col already range-checked */
    /* Let go of the connection's resources (the row set stays allocated, reads give NULL
     * or TN_DONE as the driver can), or free it all. */
    void (*rows_detach)(tn_rows *rows);
    void (*rows_free)(tn_rows *rows);
    int (*begin)(tn_db *db);              /* start a transaction (db.c checked nesting) */
    int64_t (*last_id)(const tn_db *db);
    db_txn (*txn_state)(const tn_db *db);   /* the server's or library's own view */
    bool (*is_clean)(const tn_db *db);
    int (*reset)(tn_db *db);
    void *(*native)(tn_db *db);
    /* SQLite only (NULL in the PostgreSQL driver: its commits are as durable as the server
     * is set to be). defer_sync: commits from now on are not flushed one by one (deferred)
     * or are again as opened; flush: make every commit so far durable. db.c checked that no
     * transaction is open. */
    int (*defer_sync)(tn_db *db, bool deferred);
    int (*flush)(tn_db *db);
    /* PostgreSQL only (NULL in the SQLite driver). set_scope: `schema` already validated,
     * `quoted` its db_quote_ident() form, both NULL to remove the scope; `role` and
     * `quoted_role` the same for the scope's role (NULL: none; only with a schema); db.c
     * checked that no transaction is open. */
    int (*set_scope)(tn_db *db, const char *schema, const char *quoted, const char *role,
                     const char *quoted_role);
    const char *(*scope)(const tn_db *db);
    const char *(*scope_role)(const tn_db *db);
    int (*wait_notify)(tn_db *db, int timeout_ms, db_notify_fn fn, void *ctx);
    int (*socket)(tn_db *db);   /* the connection's socket (-1: none) */
    /* `target` (as open gets it) with its database replaced by `dbname`, as a keyword=value
     * conninfo string in out. TN_OK, TN_INVALID (a malformed target), TN_TOOBIG. */
    int (*with_dbname)(const char *target, const char *dbname, const char *user,
                       const char *password, char *out, size_t outlen, char *err,
                       size_t errlen);
    /* An idle connection taken from a pool: false when the server has ended it (a
     * terminated backend, a dropped database, a restart), read without a round trip. */
    bool (*alive)(tn_db *db);
    /* SQLite only (NULL in the PostgreSQL driver): tn_db_data_version (tenancy.h). */
    int (*data_version)(tn_db *db, uint64_t *out);
    /* db_exec_batch in one round trip (NULL: db.c runs the statements one by one). db.c
     * checked the arguments and that a transaction is open; *rows is set only when rows is
     * not NULL and everything succeeded. */
    int (*batch)(tn_db *db, const db_stmt *stmts, int n, bool commit, tn_rows **rows,
                 int *failed);
};

extern const db_driver db_sqlite_driver;

/* Every SQLite connection of the host gets these settings right after sqlite3_open_v2 (the
 * driver's own, and the few a module opens itself, such as migrate.c's template clone):
 * extension loading, fts3_tokenizer() and trusted_schema off, DEFENSIVE on, double-quoted
 * strings off (the banner of sqlite.c says why). Each is read back. TN_OK, or TN_ERR with
 * the setting the library refused in err; the caller closes the handle. */
struct sqlite3;
int db_sqlite_harden(struct sqlite3 *h, char *err, size_t errlen);

/* The library's process-wide settings (sqlite.c says which and why), before the first
 * connection of the process: every module that opens one itself calls it first. */
void db_sqlite_configure(void);

/* sqlite.c, for sqlite_read.c and readonly.c: a deadline past which the connection's
 * statements are interrupted (SQLITE_INTERRUPT, TN_TIMEOUT), 0 for none; and the driver's own
 * authorizer put back after a statement ran under another (TN_OK or TN_ERR). */
void db_sqlite_deadline(tn_db *db, int64_t deadline_ms);
int db_sqlite_own_authorizer(tn_db *db);

/* sqlite_read.c: SQLite's half of db_query_capped (inside db_read_begin; res zeroed). */
int db_sqlite_query_capped(tn_db *db, const char *sql, int nparams, const char *const *params,
                           int row_cap, arena *a, db_result *res);

/* readonly.c: rows (n of them) in an array of at least n + 1 (the old one left to the arena);
 * NULL when out of memory. */
void *db_result_grow(arena *a, const char ***rows, int n, int *cap);

/*
 * The PostgreSQL driver is a loadable module (storage/pgdriver.so) so that a host that
 * only uses SQLite never maps libpq. A module cannot count on the executable exporting
 * db.c's functions, so db.c hands it the few it calls in a db_host, and the module answers
 * with its vtable. Both sides are built from the same tree; `abi` and the struct sizes
 * catch a stale module installed beside a newer host.
 */
#define DB_HOST_ABI 5
#define DB_PG_ENTRY "tn_pgdriver_entry"

typedef struct db_host {
    int abi;                    /* DB_HOST_ABI */
    size_t sizeof_db, sizeof_rows, sizeof_driver;
    int (*set_error)(tn_db *db, int rc, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
    void (*rows_link)(tn_db *db, tn_rows *rows);
    void (*rows_detach_all)(tn_db *db);
    void (*log)(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
} db_host;

/* The module's one exported symbol: its vtable, or NULL (with why in err) when host does
 * not match what it was built for. */
typedef const db_driver *db_pg_entry_fn(const db_host *host, char *err, size_t errlen);
db_pg_entry_fn tn_pgdriver_entry;

/* db_load.c: the PostgreSQL driver in *drv, loaded on the first call. TN_OK, or TN_IO with
 * err set and *drv NULL when it cannot be (the failure is kept: never retried). */
int db_pg_load(const db_driver **drv, char *err, size_t errlen);

/* For target.c: a PostgreSQL URI (postgres:CONNINFO or postgresql://...) with its database
 * replaced by dbname, as "postgres:CONNINFO" in out. Loads the driver when needed. TN_OK,
 * TN_INVALID (not a PostgreSQL URI, malformed), TN_TOOBIG, TN_IO (no driver). */
int db_uri_with_dbname(const char *uri, const char *dbname, char *out, size_t outlen,
                       char *err, size_t errlen);

/* Set the connection's error message (printf-style, cut at DB_ERRLEN) and return rc. */
int db_set_error(tn_db *db, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Link a new row set into db's list (drivers call it when tn_db_query succeeds). */
void db_rows_link(tn_db *db, tn_rows *rows);

/* Detach every open row set of db (drivers call it before a reset that invalidates them). */
void db_rows_detach_all(tn_db *db);

/*
 * The script splitter. Walks a ';'-separated script one statement at a time, honouring
 * '...' strings ('' inside), "..." identifiers and the dialect's other quotes, -- and block
 * comments, and (PG) $tag$ strings and E'' escapes. A ';' does not end a statement inside
 * parentheses (PostgreSQL rules with several actions) nor inside BEGIN ... END or CASE ... END
 * of CREATE TRIGGER / FUNCTION / PROCEDURE (SQLite trigger bodies, PostgreSQL BEGIN ATOMIC),
 * the same heuristic psql uses. Statements holding only blanks and comments are skipped.
 */
typedef struct db_splitter {
    db_dialect dialect;
    const char *p, *end;
    int line;                   /* the line p is on (1-based) */
} db_splitter;

void db_split_init(db_splitter *s, db_dialect dialect, const char *sql, size_t len);

/* Returns 1 with the next statement in *stmt and *len (without its ';') and *line where it
 * starts; 0 when no statement is left; -1 for an unterminated string, quoted identifier or
 * comment, with *line where it opened. */
int db_split_next(db_splitter *s, const char **stmt, size_t *len, int *line);

/* True when sql[0..len) holds no statement (only blanks, comments and ';'). */
bool db_sql_is_blank(db_dialect dialect, const char *sql, size_t len);

/* Bind only what one statement uses (seeds: one set of values for statements that each use
 * some of them; both drivers refuse a parameter the statement does not use). Copies
 * stmt[0..len) into *out (malloc'd, NUL-terminated) with every placeholder $N outside
 * strings, quoted names, comments and dollar quotes (the splitter's rules) renumbered to its
 * rank among the distinct ones used, in increasing N; used[k] gets the original N - 1 of
 * the k-th and *nused their count (used holds nparams entries; nparams <= 64). TN_OK;
 * TN_INVALID for a placeholder outside $1..$nparams (its number in *bad) or unterminated
 * text (*bad 0); TN_NOMEM. *out is NULL unless TN_OK. */
int db_sql_bind_used(db_dialect dialect, const char *stmt, size_t len, int nparams, char **out,
                     int *used, int *nused, long *bad);

#endif

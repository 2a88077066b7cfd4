/*
 * db_int.h — what the storage drivers share with db.c: the driver vtable and the
 * transparent connection and row structs. Private to storage/ (and its unit tests).
 *
 * Shape: db.c owns everything that is the same for both backends (argument checks, the
 * transaction flag, the error buffer, the list of open row sets, script splitting) and calls
 * a driver through `db_driver` for the rest. A driver allocates its own struct with `tn_db`
 * (or `tn_rows`) as the FIRST member and casts back, so db.c never sees sqlite3 or PGconn.
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

struct tn_db {
    const db_driver *drv;
    db_options opt;             /* with defaults applied */
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
};

extern const db_driver db_sqlite_driver;
extern const db_driver db_pg_driver;

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

#endif

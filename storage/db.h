/*
 * db.h — the storage driver layer: one connection API over SQLite and PostgreSQL.
 *
 * The statement, row and transaction functions are the public ones of include/tenancy.h
 * (tn_db_*, tn_rows_*), so apps and the host's own modules (the registry, migrations, the
 * admin panel) use exactly the same code. This header adds what only the host may do: open
 * and close connections, and a few helpers.
 *
 * A connection is opened from a URI:
 *   sqlite:/path/to/file.db            (file created when missing, WAL, busy_timeout)
 *   sqlite:/path/to/file.db?mode=ro    (read-only connection)
 *   postgres:<libpq conninfo or URI>   e.g. postgres:host=/run/postgresql dbname=app
 *   postgresql://user@host/db          (a libpq URI as is)
 * Drivers sit behind a small vtable (db_int.h); SQL is always parameterized, and the only
 * function that may put an identifier into SQL text is db_quote_ident().
 *
 * A tn_db is used by one thread at a time. Errors never abort: every call returns a tn_rc
 * and leaves a message for tn_db_error().
 */
#ifndef TN_STORAGE_DB_H
#define TN_STORAGE_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/rc.h"
#include "tenancy.h"   /* the public tn_db_* and tn_rows_* this layer implements */

typedef struct db_options {
    int busy_timeout_ms;      /* SQLite: wait this long for a lock (default 5000) */
    bool sync_normal;         /* SQLite: synchronous=NORMAL instead of FULL */
    bool read_only;           /* open read-only (SQLite: mode=ro; PostgreSQL: read-only
                                 transactions by default) */
    int statement_timeout_ms; /* PostgreSQL: statement_timeout (0: server default) */
    bool reset_always;        /* PostgreSQL: wipe the session at every change of schema scope,
                                 not only after a statement that may have left state in it */
    int cache_kib;            /* SQLite: the connection's page cache holds at most this many
                                 KiB (PRAGMA cache_size; 0: SQLite's default) */
} db_options;

/* Open a connection. Returns TN_OK with *out set, TN_INVALID for a URI we do not understand,
 * TN_IO when the database cannot be reached or opened; err says why (never NULL). */
int db_open(const char *uri, const db_options *opt, tn_db **out, char *err, size_t errlen);

/* Load the driver that uri needs without connecting (the PostgreSQL one is a module loaded
 * on first use, see db.c). A process about to fork workers calls it first, so the workers
 * share the loaded libpq instead of each loading it again. TN_OK, TN_INVALID (unknown URI),
 * TN_IO (the driver cannot be loaded: err says why). */
int db_preload(const char *uri, char *err, size_t errlen);

/* Durability in bulk (SQLite; a no-op on PostgreSQL, whose commits are as durable as the
 * server is set to be). db_defer_sync(db, true): this connection's commits are no longer
 * flushed one by one: each is written (a crashed process loses none) but an OS crash or a
 * power loss may lose the last ones until db_flush() (or a checkpoint) has run; false:
 * flushed at commit again, as opened. db_flush: everything committed so far, by any
 * connection to the database, made durable. Between transactions only (TN_BUSY inside
 * one). TN_OK or a storage error. */
int db_defer_sync(tn_db *db, bool deferred);
int db_flush(tn_db *db);

/* Close; NULL is accepted. An open transaction is rolled back. */
void db_close(tn_db *db);

/* True when the connection is usable (PostgreSQL: CONNECTION_OK and idle, not in a
 * transaction; SQLite: autocommit). Used on release to catch a request that left a
 * transaction open or a broken connection. */
bool db_is_clean(const tn_db *db);

/* Roll back whatever is open and bring the connection back to a clean state (PostgreSQL: a
 * reset when the connection broke). TN_OK or TN_IO. */
int db_reset(tn_db *db);

/* Quote an identifier (a schema or table name) for SQL text: validated against
 * [A-Za-z_][A-Za-z0-9_]{0,62} and double-quoted. Returns TN_OK or TN_INVALID (nothing
 * written). The ONLY way an identifier may enter SQL text in this project. */
int db_quote_ident(const char *ident, char *out, size_t outlen);

/* PostgreSQL only: scope every later transaction of this connection to `schema` (see
 * storage/target.h): the first statement of each transaction — an autocommit statement, or
 * the first after tn_db_begin — goes in one round trip with
 * set_config('search_path', schema, true) (after tn_db_begin, which itself sends nothing,
 * BEGIN and the same as SET LOCAL search_path); an autocommit statement runs in the
 * implicit transaction of that round trip,
 * committed at its end, or rolled back there when it fails (the connection is then clean,
 * not in a failed transaction). NULL removes the scope. TN_OK, TN_INVALID (SQLite, or a bad identifier),
 * TN_BUSY (inside a transaction: change scope between transactions only).
 * When the scope changes (to another schema, or to none) on a connection that has run a
 * transaction under the old one, and a statement since the last wipe may have left
 * something in the session (any command but SELECT/SHOW/DML/transaction control, a text
 * naming TEMP, SET_CONFIG, ADVISORY_LOCK, DBLINK, LISTEN, PREPARE or DECLARE, or the native
 * handle handed out; see pg.c), that next transaction start also carries, in the same
 * round trip, DISCARD ALL and the session settings again: nothing a tenant left in the
 * session (a session SET, temporary tables, prepared statements, held cursors, LISTEN,
 * advisory locks, SET ROLE) reaches the next one. After DML only (a serial's nextval), it
 * carries DISCARD SEQUENCES, so lastval() cannot answer the previous tenant's value. With
 * db_options.reset_always, DISCARD ALL at every change. On a scoped connection COPY is refused
 * (TN_INVALID), and statements that may not run in a transaction (VACUUM, CREATE DATABASE)
 * fail. Outside a scope the session search_path is empty. */
int db_set_schema_scope(tn_db *db, const char *schema);
const char *db_schema_scope(const tn_db *db);

/* The same with the tenant's role: every transaction of the scope also runs as `role`
 * (SET LOCAL ROLE, in the same round trip as the path), so the database itself refuses what
 * that role may not touch: another tenant's schema, the registry, server functions. The
 * connection's login role must be a member of `role`. A role needs a schema; NULL: the
 * login role's own rights (db_set_schema_scope). */
int db_set_scope(tn_db *db, const char *schema, const char *role);
const char *db_scope_role(const tn_db *db);

/* A PostgreSQL URI with any of its database, user and password replaced (NULL keeps the
 * URI's; a user given drops the URI's password unless a password is given too), as
 * "postgres:CONNINFO" in out: the logins as a tenant's own role (the pool, the panel's
 * console). Loads the driver when needed. TN_OK, TN_INVALID, TN_TOOBIG, TN_IO. */
int db_uri_with(const char *uri, const char *dbname, const char *user, const char *password,
                char *out, size_t outlen, char *err, size_t errlen);

/* PostgreSQL only: LISTEN on a channel (a fixed identifier), then wait up to timeout_ms for
 * notifications. db_wait_notify returns TN_OK when at least one arrived (all are consumed),
 * TN_TIMEOUT when none, TN_IO when the connection broke. */
int db_listen(tn_db *db, const char *channel);
int db_wait_notify(tn_db *db, int timeout_ms);

/* The same, handing each notification to fn (its channel and payload, "" when none) before
 * it is consumed. timeout_ms 0 takes only what has arrived, without waiting. With
 * db_socket (the connection's socket, -1 when there is none or it is not PostgreSQL), a
 * caller waits in its own poll/epoll and calls this when the socket is readable. */
typedef void (*db_notify_fn)(void *ctx, const char *channel, const char *payload);
int db_wait_notify_each(tn_db *db, int timeout_ms, db_notify_fn fn, void *ctx);
int db_socket(tn_db *db);

/* The backend of a URI without opening it: "sqlite", "postgres" or NULL. */
const char *db_uri_backend(const char *uri);

/* Run several statements separated by ';' (DDL scripts, migrations); no parameters.
 * TN_OK or an error as tn_db_exec. */
int db_exec_script(tn_db *db, const char *sql);

/* One statement of db_exec_batch; flags as db_exec_flags takes them, judged per statement. */
typedef struct db_stmt {
    const char *sql;
    int nparams;
    const char *const *params;
    unsigned flags;              /* DB_EXEC_CATALOG, as db_exec_flags takes it; 0 otherwise */
} db_stmt;

#define DB_BATCH_COMMIT 1u   /* the batch ends with the transaction's COMMIT */

/* Run n statements in order inside the open transaction (tn_db_begin), in one round trip
 * where the driver can: PostgreSQL sends them in one pipeline with one Sync, together with
 * the transaction's start when that has not gone out yet (a scoped connection's BEGIN, its
 * scope and role: see pg.c); SQLite runs them one after another. It stops at the first
 * failure: TN_OK or that statement's error, *failed its index (n when none failed, and when
 * only the COMMIT did). With rows, the last statement's rows (freed by the caller) when all
 * succeeded. With DB_BATCH_COMMIT (never with rows) the transaction is committed after the
 * last statement; otherwise it stays open, failed or not (the caller rolls back). Why: a
 * round trip costs both ends a sleep and a wake-up, which on a small virtual machine is more
 * than a short statement; `tenancy migrate` applies a file to a tenant in one or two round
 * trips instead of five. */
int db_exec_batch(tn_db *db, const db_stmt *stmts, int n, unsigned flags, tn_rows **rows,
                  int *failed);

/* True when sql holds no statement: only blanks, comments and ';' (an unterminated comment
 * holds none). */
bool db_text_is_blank(const char *sql);

/* A single text value from a query (first column of the first row) into out.
 * TN_OK, TN_NOTFOUND (no row or NULL), or an error. */
int db_query_value(tn_db *db, char *out, size_t outlen, const char *sql, int nparams,
                   const char *const *params);

/* ---- describe: the catalog, read in one place per dialect (catalog.c) ------------------- */

/* A column as the catalog has it. */
typedef struct db_column {
    const char *name;
    const char *type;       /* SQLite: as declared (any text, possibly ""); PostgreSQL:
                               format_type() */
    bool notnull;
    const char *dflt;       /* the default as the catalog writes it, or NULL */
    int pk;                 /* 1-based position in the primary key; 0: not in it */
    bool identity;          /* a generated id: SQLite's INTEGER PRIMARY KEY of a rowid table,
                               a PostgreSQL identity column or a serial (nextval default) */
    bool boolean;           /* declared boolean */
    bool custom;            /* PostgreSQL: a type outside pg_catalog (an enum, a domain) */
    bool generated;         /* computed from other columns (GENERATED ALWAYS AS) */
} db_column;

typedef struct db_index {
    const char *name;
    bool unique;
    bool primary;           /* the primary key's own index */
    bool partial;           /* has a WHERE */
    bool plain;             /* on plain columns only (PostgreSQL: and a btree): cols has them
                               all; false: cols may be short */
    int ncols;
    const char **cols;
    const char *def;        /* for people: PostgreSQL pg_get_indexdef(), SQLite the columns
                               ("a, b", "(expression)" for an expression) */
} db_index;

typedef struct db_fkey {
    const char *name;       /* PostgreSQL: the constraint's name; SQLite: its id */
    const char *def;        /* for people: pg_get_constraintdef(), or SQLite's
                               "(a) REFERENCES t (b) ON UPDATE ... ON DELETE ..." */
} db_fkey;

/* One table: columns in their order, every index (the primary key's included), the foreign
 * keys, what else hangs on it, and the planner's row estimate. Allocated from the caller's
 * arena; valid as long as it. */
typedef struct db_table_desc {
    const char *name;
    const char *backend;    /* "sqlite" or "postgres" */
    int ncols;
    db_column *cols;
    int nidx;
    db_index *idx;
    int nfkeys;
    db_fkey *fkeys;
    int nchecks;            /* PostgreSQL: CHECK and exclusion constraints (SQLite: 0) */
    int ntriggers;
    int64_t rows_estimate;  /* PostgreSQL: reltuples; -1 unknown (SQLite, never analyzed) */
} db_table_desc;

/* The definition of `table` in `schema` (NULL: the connection's own: SQLite's main,
 * PostgreSQL's current_schema()). Only that schema's catalog rows are read: a relation is
 * found by its namespace and name, then everything by its OID (never a catalog-wide scan).
 * SQLite takes no schema but "main". TN_OK, TN_NOTFOUND (no such table, a message in the
 * handle), TN_INVALID, TN_NOMEM or a storage error. */
int db_describe(tn_db *db, const char *schema, const char *table, arena *a,
                db_table_desc **out);

/* The tables of `schema` (NULL as above; partitions left out: they are read through their
 * parent), each given to fn with, per foreign key, the table of the same schema it references
 * (parent NULL for a table without one; a table with several keys comes once per key), in
 * name order. fn returns TN_OK to go on. TN_OK or the first error. */
int db_describe_tables(tn_db *db, const char *schema,
                       int (*fn)(void *ctx, const char *table, const char *parent), void *ctx);

/* Whether `schema` exists on this connection's server: TN_OK, TN_NOTFOUND (a message in the
 * handle) or a storage error. SQLite has one schema, "main" (anything else: TN_NOTFOUND). */
int db_schema_exists(tn_db *db, const char *schema);

/* ---- reading with a time limit, and the sandboxed query (readonly.c) ---------------------- */

typedef struct db_read_opts {
    int64_t timeout_ms;     /* the time limit of every statement until db_read_end */
    const char *schema;     /* PostgreSQL: the search_path of the transaction (NULL: none) */
    const char *role;       /* PostgreSQL: the role the transaction runs as (NULL: the login) */
    bool strict;            /* PostgreSQL: refuse a role that can act outside the database (a
                               superuser, or a member of pg_execute_server_program,
                               pg_read_server_files, pg_write_server_files, pg_signal_backend) */
} db_read_opts;

/* Start reading: SQLite arms a deadline (statements past it are interrupted: TN_TIMEOUT);
 * PostgreSQL opens a READ ONLY transaction with a transaction-local statement_timeout,
 * search_path and role, and checks that it is read-only (and, strict, the role). TN_OK, or
 * an error with the message in the handle (nothing left open). End with db_read_end, which
 * rolls back whatever was read or done. */
int db_read_begin(tn_db *db, const db_read_opts *o);
void db_read_end(tn_db *db);

/* What db_query_capped read: column names, and rows of text values (NULL for SQL NULL,
 * SQLite blobs as x'hex'), allocated from the caller's arena. */
typedef struct db_result {
    int ncols;
    const char **cols;
    int nrows;
    const char ***rows;
    bool truncated;         /* there were more than row_cap rows */
} db_result;

/* Run one statement of someone else's (an operator's, a tenant client's) read-only, with
 * parameters as tn_db_query ($1..$n; SQLite refuses any other placeholder), in the sandbox: inside
 * db_read_begin(o, made strict) and db_read_end, at most row_cap rows. SQLite (open the file
 * read-only): one statement only, refused unless sqlite3_stmt_readonly(), under an allow list
 * authorizer (SELECT, reads, the reading PRAGMAs, a list of built-in functions: nothing
 * else, so fts3_tokenizer() and load_extension() never run) for that statement alone.
 * PostgreSQL (log in as the tenant's own role): READ ONLY, always rolled back, the rows
 * through a cursor that stops at row_cap + 1, and a statement that was given a transaction
 * id (it wrote despite READ ONLY) refused and its rows dropped. TN_OK with *out; TN_DENIED
 * (refused: the handle says by what rule), TN_TIMEOUT, TN_INVALID, TN_NOMEM or a storage
 * error, with the message in the handle. */
int db_query_capped(tn_db *db, const char *sql, int nparams, const char *const *params,
                    int row_cap, const db_read_opts *o, arena *a, db_result **out);

/* SQLite: copy the file at `from` into a new file `to` (VACUUM INTO on a private, hardened
 * connection of its own: tenant connections refuse ATTACH, which VACUUM INTO needs), waiting
 * up to busy_timeout_ms for a writer. TN_OK, TN_BUSY, TN_IO, with err set. `to` must not
 * exist. */
int db_sqlite_vacuum_into(const char *from, const char *to, int busy_timeout_ms, char *err,
                          size_t errlen);

#endif

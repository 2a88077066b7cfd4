/*
 * copy.h — a target's tables, portably: their definitions, and their rows as text, read from
 * one backend and written into the other (SQLite file, PostgreSQL schema or database).
 * What `tenancy move`, `export` and `import` are built on; it knows nothing of tenants.
 *
 * A definition (copy_table) is what survives the trip between backends: columns with their
 * declared type, NOT NULL, a simple default, the primary key, a generated id (SQLite's
 * INTEGER PRIMARY KEY, a PostgreSQL identity or serial column), and the indexes on plain
 * columns. Not carried: CHECK constraints, foreign keys, triggers, views, partial and
 * expression indexes, generated columns, and types a tenant defined itself (PostgreSQL enums,
 * domains): copy_create refuses a column of such a type rather than make it something else
 * (a target made by the app's migrations has the type and takes the values as text).
 * Types are mapped (copy_type_for): a PostgreSQL type name is kept in SQLite as its declared
 * type (SQLite keeps any name), so a round trip gives the type back; a SQLite type becomes
 * the PostgreSQL type of the same name when it is one, else that of its affinity (INTEGER
 * → bigint, because SQLite integers are 64-bit).
 *
 * Values travel as text, exactly: SQLite REAL values are read with as many digits as they
 * need to come back equal (SQLite's own text form keeps 15 and loses the rest), PostgreSQL
 * is read with ISO dates in UTC and shortest-exact floats; booleans become 1/0 in SQLite;
 * binary values travel as hex text ('\x...', PostgreSQL's bytea form), exact into
 * PostgreSQL, text in SQLite.
 *
 * Identifiers (tables, columns, indexes) must be plain ([A-Za-z_][A-Za-z0-9_]*, at most 63
 * bytes): every one goes through db_quote_ident, and a table that has another fails with
 * TN_INVALID. Type names and defaults are rebuilt from a strict grammar, never pasted.
 *
 * Must not: read outside the connection's own schema or file (no catalog-wide listing: the
 * catalog queries are filtered by namespace and relation), write to a source, or log.
 */
#ifndef TN_STORAGE_COPY_H
#define TN_STORAGE_COPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "storage/db.h"
#include "storage/target.h"

typedef struct copy_column {
    const char *name;
    const char *type;      /* as declared in the source (SQLite: any text, possibly "") */
    bool notnull;
    int pk;                /* 1-based position in the primary key; 0: not in it */
    bool identity;         /* generated ids: SQLite INTEGER PRIMARY KEY, PG identity/serial */
    bool boolean;          /* a boolean column (converted to 1/0 for SQLite) */
    bool custom;           /* PostgreSQL: a type the tenant defined (an enum, a domain): only a
                              target made by the migrations can take it (copy_create refuses) */
    const char *dflt;      /* a portable default (a literal or CURRENT_TIMESTAMP...), or NULL */
} copy_column;

typedef struct copy_index {
    const char *name;
    bool unique;
    int ncols;
    const char **cols;
} copy_index;

typedef struct copy_table {
    const char *name;
    const char *backend;   /* where the definition was read: "sqlite" or "postgres" */
    int ncols;
    copy_column *cols;
    int nidx;
    copy_index *idx;
    int nnotes;            /* what was not carried over (a default, an index), for the user */
    const char **notes;
} copy_table;

/* Open a connection to read a source, in a transaction that sees one state of all tables.
 * lock false (export): a snapshot that does not stop the tenant's writers (SQLite: a
 * read-only connection in a deferred transaction; PostgreSQL: REPEATABLE READ, READ ONLY).
 * lock true (move): writers are stopped until copy_source_close: SQLite takes the write lock
 * (BEGIN IMMEDIATE, waiting busy_timeout for a writer in flight); PostgreSQL takes SHARE locks
 * on the tables as copy_lock is called for each, waiting up to 30 s (lock_timeout) for writers
 * in flight. Either way
 * the source is never written. TN_OK, or a storage error with err set. */
int copy_source_open(const storage_target *t, bool lock, tn_db **out, char *err, size_t errlen);
int copy_lock(tn_db *src, const char *table, char *err, size_t errlen);
void copy_source_close(tn_db *src);   /* rolls back and closes; NULL accepted */

/* Begin the copy's transaction on a target's connection (target_open), with the settings
 * the copy relies on (PostgreSQL: ISO dates in UTC, read-write, read committed; they last as
 * long as the transaction). */
int copy_target_begin(tn_db *dst, char *err, size_t errlen);

/* The definition of `table` as the connection sees it, allocated from a. TN_OK, TN_NOTFOUND,
 * TN_INVALID (an identifier that is not plain, a type the copy cannot carry), or a storage
 * error; err names the table and column. */
int copy_describe(tn_db *db, const char *table, arena *a, copy_table **out, char *err,
                  size_t errlen);

/* Create the table and its indexes in dst (inside the caller's transaction). TN_EXISTS when
 * a table of that name is there; err says why. */
int copy_create(tn_db *dst, const copy_table *def, char *err, size_t errlen);

/* The type a column gets in a backend ("sqlite" or "postgres"), into out. TN_OK, or
 * TN_INVALID for a declared type outside the grammar the copy accepts. */
int copy_type_for(const copy_column *c, const char *src_backend, const char *dst_backend,
                  char *out, size_t outlen);

/* Rows of a table, a batch at a time, in primary-key order when there is one (so a move
 * is repeatable), as text (NULL for SQL NULL). The reader must be closed before the next
 * table is read. */
typedef struct copy_reader copy_reader;
int copy_read_open(tn_db *src, const copy_table *def, copy_reader **out, char *err,
                   size_t errlen);
/* TN_OK with *vals (def->ncols values, valid until the next call), TN_DONE, or an error. */
int copy_read_next(copy_reader *r, const char *const **vals, char *err, size_t errlen);
void copy_read_close(copy_reader *r);

/* Rows into a table (which must exist: its own column types are read), a batch at a time,
 * sent when full and by copy_write_flush. PostgreSQL: one parameter per column holding the
 * batch's values as an array, INSERT ... SELECT * FROM unnest($1::type[], ...) (one short
 * statement per 2,000 rows instead of a VALUES list of thousands of parameters to parse);
 * multi-row VALUES when a column's type cannot be named in a cast. SQLite: multi-row VALUES
 * of a few hundred parameters (it looks each one up by name). */
typedef struct copy_writer copy_writer;
int copy_write_open(tn_db *dst, const copy_table *def, copy_writer **out, char *err,
                    size_t errlen);
int copy_write_row(copy_writer *w, const char *const *vals, char *err, size_t errlen);
int copy_write_flush(copy_writer *w, char *err, size_t errlen);
void copy_write_close(copy_writer *w);

/* Delete every row of a table (rows a migration inserted, before the copy brings the
 * source's own). */
int copy_clear(tn_db *dst, const char *table, char *err, size_t errlen);

/* Inside a transaction: check foreign keys at commit rather than per row, so rows may
 * arrive in any order (SQLite: every key; PostgreSQL: keys declared DEFERRABLE). */
int copy_defer_constraints(tn_db *dst, char *err, size_t errlen);

/* count(*) of a table. */
int copy_count(tn_db *db, const char *table, int64_t *n, char *err, size_t errlen);

/* After the rows: move the id generator of each identity column past the largest id, so
 * the next insert does not collide (PostgreSQL: setval; SQLite: nothing to do, a rowid
 * continues from the largest). */
int copy_fix_ids(tn_db *dst, const copy_table *def, char *err, size_t errlen);

#endif

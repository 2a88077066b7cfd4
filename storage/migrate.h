/*
 * migrate.h — versioned SQL migrations and seed scripts, applied to one storage target.
 *
 * A migration folder holds files named VERSION_NAME.sql ("0001_create_items.sql": version
 * "0001", name "create_items"), applied in file-name order. Each file is applied in its own
 * transaction, together with the row that records it in the target's own version table:
 *
 *   tenancy_migrations(version TEXT PRIMARY KEY, name TEXT, checksum TEXT, applied_at BIGINT)
 *
 * created with CREATE TABLE IF NOT EXISTS inside the target (its file, or its schema through
 * the connection's scope). Nothing here ever asks the catalog about other schemas: the cost
 * of migrating one target does not grow with the number of targets (the trap of migrators
 * that look for their version table in information_schema across every schema, O(N^2) at
 * 10,000 tenants). A target that is up to date costs one query on its version table.
 *
 * This module knows nothing of tenants or of the registry: it gets a tn_db already scoped
 * to one target (storage/target.h: target_open) and the values a seed binds.
 *
 * Must not: run SQL in a target other than through the caller's connection (the template
 * clone, which opens its own, is the exception), build SQL from values, log.
 */
#ifndef TN_STORAGE_MIGRATE_H
#define TN_STORAGE_MIGRATE_H

#include <stdbool.h>
#include <stddef.h>

#include "storage/db.h"
#include "storage/target.h"

/* The longest version ("20261202164727" fits; 32 digits at most). */
#define MIGRATE_VERSION_MAX 33

/* The largest migration or seed file read (a migration is DDL, not data). */
#define MIGRATE_FILE_MAX (16u << 20)

typedef struct migration_set migration_set;

typedef struct migration_info {
    const char *version;   /* "0001" */
    const char *name;      /* "create_items" */
    const char *file;      /* "0001_create_items.sql" */
    const char *checksum;  /* SHA-256 of the file's bytes, 64 hex digits */
} migration_info;

/* Load every *.sql file of `dir` (other files and hidden ones are ignored), ordered by file
 * name. dir NULL or "" gives an empty set. TN_OK; TN_INVALID when a .sql file is not named
 * VERSION_NAME.sql (VERSION: 1-32 digits, NAME: letters, digits, '_' and '-') or two files
 * have the same version (numerically: "1" and "01" are the same); TN_IO when the folder or a
 * file cannot be read; TN_TOOBIG over MIGRATE_FILE_MAX. err names the file. */
int migrate_load(const char *dir, migration_set **out, char *err, size_t errlen);
void migrate_free(migration_set *s);

int migrate_count(const migration_set *s);
/* The i-th file (0-based, in order), or NULL. */
const migration_info *migrate_at(const migration_set *s, int i);
/* The last version of the set, "" when it is empty. */
const char *migrate_latest(const migration_set *s);

/* Where a script failed. */
typedef struct migrate_error {
    char file[256];        /* the file ("" when the failure was not in a file: reading or
                              creating the version table) */
    int statement;         /* its statement that failed, from 1; 0 when it was not one of
                              the file's statements (begin, the version row, commit) */
    int line;              /* the line that statement starts on */
    char message[512];     /* the database's message */
} migrate_error;

#define MIGRATE_MAX_WARNINGS 8

typedef struct migrate_result {
    char from[MIGRATE_VERSION_MAX];  /* the highest version applied before ("" none) */
    char to[MIGRATE_VERSION_MAX];    /* the highest applied after (on failure: reached) */
    int applied;                     /* files applied by this call */
    int pending;                     /* files of the set still not applied */
    migrate_error error;             /* when the call failed */
    bool seed_failed;                /* migrate_provision: the failure was in the seed */
    bool prelude_failed;             /* migrate_provision: ... in its prelude */
    /* Not errors: an applied file whose checksum differs from the file now (edited after it
     * was applied), a version applied that the folder does not have, a file applied out of
     * order. nwarnings counts them all; the first MIGRATE_MAX_WARNINGS are kept. */
    int nwarnings;
    char warnings[MIGRATE_MAX_WARNINGS][256];
} migrate_result;

/* Bring the target up to date: read its version table, create it when missing, and apply
 * each pending file in order, each in its own transaction with its version row. On
 * PostgreSQL each transaction first takes a transaction-scoped advisory lock keyed by the
 * schema, and the version is read (the first file's transaction) or checked again (the
 * others') under it, so two runs on the same target never apply a file twice; an up-to-date
 * target costs that lock and read in a transaction that is rolled back. On SQLite the read
 * is one query outside any transaction. A failing file is rolled back (that file only: the
 * ones before it stay applied) and the call stops there.
 *
 * TN_OK (res->to is the set's latest, or higher); otherwise the database's code with
 * res->error set and res->to the version reached. db must be outside a transaction. */
int migrate_apply(tn_db *db, const migration_set *s, migrate_result *res);

/* migrate_apply when the caller knows which version the target should be at (`expect`, the
 * registry's copy; NULL or "": not known). On PostgreSQL the next file then goes out in the
 * round trip of BEGIN with the lock and a guard that the version table holds exactly the
 * files up to `expect` with their checksums; when it does not (a stale copy, a changed file,
 * a version no file has, no table yet), the transaction is rolled back before the file ran
 * and migrate_apply does it all as usual, warnings included. The same results. */
int migrate_apply_expected(tn_db *db, const migration_set *s, const char *expect,
                           migrate_result *res);

/* Only read the target's version ("" when it has no version table or no row). TN_OK, or an
 * error with e set. Creates nothing. */
int migrate_current(tn_db *db, char *version, size_t versionlen, migrate_error *e);

/* Read a SQL file whole (a seed). *out is malloc'd and NUL-terminated. TN_OK, TN_IO,
 * TN_TOOBIG (over MIGRATE_FILE_MAX), TN_INVALID (a NUL byte in it), with err naming it. */
int migrate_read_file(const char *path, char **out, char *err, size_t errlen);

/* Run a seed script in one transaction: split into statements (db.c's splitter), each bound
 * to only the parameters it references ($N of params[0..nparams), renumbered; nparams <= 64).
 * `label` names the script in errors. TN_OK, or the database's code with e set (nothing of
 * the script is left). */
int migrate_seed(tn_db *db, const char *label, const char *sql, int nparams,
                 const char *const *params, migrate_error *e);

/* A storage the caller has just created, that no migration has touched (or creates in the
 * same transaction: `prelude`, target_schema_create_sql's script, run first and taken as
 * changing the catalog only, not the session (DB_EXEC_CATALOG, db_int.h); NULL for none;
 * when it fails, res->prelude_failed is set): the version table,
 * every file of the set with its version row, and then the seed (as migrate_seed: nparams,
 * params; seed_sql NULL for none), all in ONE transaction — on PostgreSQL under the same
 * advisory lock as migrate_apply, except with a prelude (the storage it creates is nobody
 * else's to see before the commit). A new tenant costs one commit instead of one per file plus
 * one for the seed, and on PostgreSQL one round trip: the whole transaction goes in one
 * pipeline (up to 256 statements; a longer one statement by statement). All or nothing: on failure nothing of it is left (res->to is ""), and
 * res->error names the file or the seed's label and the statement; a version table that is
 * already there fails the call. db must be outside a transaction. */
int migrate_provision(tn_db *db, const char *prelude, const migration_set *s,
                      const char *seed_label, const char *seed_sql, int nparams,
                      const char *const *params, migrate_result *res);

/* Create `to` as a copy of `from` (the template of a new tenant), both of the same kind:
 * SQLite: VACUUM INTO the new file (a consistent snapshot, even while the template is
 * written to), on a private connection of our own, since tenant connections deny ATTACH;
 * database mode: CREATE DATABASE to TEMPLATE from (PostgreSQL refuses while anyone is
 * connected to the template). TN_OK; TN_DECLINED for schema mode (PostgreSQL has no schema
 * clone: replay the migrations instead); TN_EXISTS when `to` exists; TN_INVALID for kinds
 * that differ or a bad name; a storage error otherwise. err says why. Nothing of `to` is
 * left after a failure. */
int migrate_clone(const storage_target *from, const storage_target *to, char *err,
                  size_t errlen);

#endif

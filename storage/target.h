/*
 * target.h — where one tenant's data lives (a storage target), and the per-worker pool of
 * open connections to targets.
 *
 * A target is one of three placements:
 *   TARGET_SQLITE        a file of its own (the embedded default);
 *   TARGET_PG_SCHEMA     a schema of its own in a shared PostgreSQL database;
 *   TARGET_PG_DATABASE   a database of its own on a PostgreSQL server.
 * This module knows nothing of tenants: the tenancy layer maps a tenant's registry entry
 * (placement, storage) to a storage_target and asks for a connection.
 *
 * Schema mode is where pooled connections leak tenants in other tools (a session-level
 * `SET search_path` that outlives the request). Here the schema is never a session setting:
 * a connection scoped to a schema (db_set_schema_scope in db.h) sends
 * `set_config('search_path', <schema>, true)` (after BEGIN, when the transaction is
 * explicit, `SET LOCAL search_path TO <schema>`, the same transaction-local setting; an
 * autocommit statement runs in the implicit transaction of its round trip) in the same
 * round trip as the first statement of every transaction, so the path is
 * transaction-local, dies with COMMIT or ROLLBACK, and is safe behind PgBouncer in
 * transaction mode. Outside a scope the session search_path is empty: an unqualified table
 * name fails instead of resolving anywhere. The shared database's `public` is never in a
 * schema-mode path (a database-mode tenant's connections are scoped to the `public` of its
 * own database, where its tables live).
 *
 * Must not: build SQL from a target's name except through db_quote_ident; keep a
 * connection whose state is unknown after a request (pool_release resets or closes it).
 */
#ifndef TN_STORAGE_TARGET_H
#define TN_STORAGE_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/db.h"

typedef enum target_kind {
    TARGET_SQLITE = 0,
    TARGET_PG_SCHEMA = 1,
    TARGET_PG_DATABASE = 2
} target_kind;

typedef struct storage_target {
    target_kind kind;
    const char *server;   /* PostgreSQL: the server's URI ("postgres:host=... dbname=app");
                             for TARGET_PG_DATABASE the dbname in it is replaced by `name`.
                             SQLite: NULL */
    const char *name;     /* SQLite: the file's path; schema mode: the schema; database
                             mode: the database */
    bool sync_normal;     /* SQLite: synchronous=NORMAL instead of FULL (per-tenant opt-in:
                             the newest transactions may be lost on power failure) */
    int busy_timeout_ms;  /* SQLite (0: 5000) */
    int statement_timeout_ms; /* PostgreSQL (0: server default) */
    int max_tenants;      /* schema mode: recycle a server connection after it has served
                             this many distinct schemas (0: none while its backend's memory
                             is read against max_backend_bytes, else the pool's
                             pg_max_tenants; membound_count) */
    int64_t max_backend_bytes; /* schema mode: ... or once its backend's memory reaches this
                             (0: no byte bound; see pool.c, backend_too_big) */
    bool reset_always;    /* PostgreSQL: db_options.reset_always */
    const char *role;     /* PostgreSQL: the tenant's role, which owns the schema or database
                             and everything in it; every scoped transaction runs as it
                             (db_set_scope). NULL: none (the login role's rights) */
    const char *role_verifier; /* the SCRAM-SHA-256 verifier of the role's password (the
                             tenancy layer derives the password from its role key and makes
                             the verifier), set on the role when it is made; NULL: none */
    bool login_as_role;   /* the pool's connections for it log in as the role itself (one
                             per tenant: nothing run on them can SET ROLE to another tenant)
                             instead of the server URI's user with SET LOCAL ROLE */
    const char *group_role; /* schema mode with a role, not login_as_role: the group login
                             the pool's shared connections and target_open's for it log in
                             as instead of the server URI's user (a member of the roles of
                             its group's tenants only, so that PostgreSQL's check of SET
                             ROLE, which lists every role a login may become, stays small);
                             made with the tenant's role and made a member of it. The URI's
                             user is then a member of the role only while it makes, mends or
                             drops it. NULL: the URI's user does everything */
    const char *group_verifier; /* the SCRAM-SHA-256 verifier of the group login's password,
                             set on it when the role script runs; NULL: none */
    bool keep_host_member; /* with group_role, while a placement moves from the shared login
                             to group logins: target_role_repair leaves the URI's user a
                             member of the role (a tenancyd still on the shared login keeps
                             serving it) and target_role_check does not report it */
} storage_target;

/* Where target_open's connections for a group target (group_role) get the group login's
 * password: fn fills out (64 hex characters) and returns TN_OK, TN_NOTFOUND to log in
 * without one (a server that trusts the login), or another code to fail. Process-wide; the
 * tenancy layer sets it (the role key is its). Unset: no password. */
void target_set_login_password(int (*fn)(void *ctx, const char *role, char out[65]), void *ctx);

/* A connection to `server` (its database `dbname` when not NULL) logged in as `user` (NULL:
 * the URI's), with the password pw_fn gives it (TN_NOTFOUND from pw_fn, or no pw_fn: none,
 * for a server that trusts the login). What the pool and target_open share. */
int target_login(const char *server, const char *dbname, const char *user,
                 int (*pw_fn)(void *ctx, const char *role, char out[65]), void *ctx,
                 const db_options *o, tn_db **out, char *err, size_t errlen);

/* Names: "target_kind" <-> "sqlite" | "schema" | "database". */
const char *target_kind_name(target_kind k);
int target_kind_parse(const char *s);   /* -1 when unknown */

/* Create the file, schema or database. With a role (PostgreSQL), the role first when it is
 * not there yet (LOGIN, with role_verifier as its password when one is given, which an
 * existing role is given too), the login role made a member of it (so that SET LOCAL ROLE
 * works), then the schema (AUTHORIZATION the role; in the role's transaction) or the
 * database (OWNER the role; CONNECT and TEMPORARY revoked from PUBLIC, and its public
 * schema's rights too). TN_OK, TN_EXISTS (already there: nothing changed, its role not
 * touched), TN_INVALID (bad name), or a storage error; err says why. */
int target_create(const storage_target *t, char *err, size_t errlen);

/* The tenant role's drift (PostgreSQL targets with a role), asked on `server` (a
 * connection to t's server database, unscoped, or NULL for one of its own): the role
 * missing, the schema or database not owned by it, the login not a member, the role given
 * rights a tenant must not have (superuser, CREATEROLE, CREATEDB, REPLICATION, BYPASSRLS,
 * membership of another role), relations in the schema owned by someone else, PUBLIC
 * allowed to connect to a tenant's database. TN_OK and *nproblems (0: none); each problem's
 * sentence goes to fn. A storage error otherwise. */
int target_role_check(tn_db *server, const storage_target *t, int *nproblems,
                      void (*fn)(void *ctx, const char *problem), void *ctx, char *err,
                      size_t errlen);

/* The role alone, as target_create makes it (with role_verifier as its password when
 * given), and the login's membership: how a password is set later (the panel, the first
 * time its console logs in as a shared-login tenant). TN_OK or a storage error. */
int target_role_ensure(const storage_target *t, char *err, size_t errlen);

/* Make t's role what target_create makes: the role (with its verifier when given) and the
 * login's membership, the schema or database owned by it, PUBLIC's CONNECT and TEMPORARY
 * on a tenant database revoked (and its rights on that database's public schema), and the
 * schema's (database mode: the public schema's)
 * relations, routines and types given to it: the way from a tenant made before roles, or
 * one whose objects someone made as another user. Rights given to the role beyond that
 * (superuser and the like) are reported by target_role_check, not taken back here. TN_OK
 * or a storage error. `server`: a connection to t's server to run it on (as
 * target_role_check's), or NULL to open one for it. */
int target_role_repair(tn_db *server, const storage_target *t, char *err, size_t errlen);

/* Schema mode: PUBLIC's default rights on the shared database's public schema revoked
 * (tenancy init), so a tenant role reaches nothing there. TN_OK, or a storage error (err
 * says why: the login must own the schema or be a member of its owner). */
int target_server_harden(const char *server, char *err, size_t errlen);

/* Schema mode: whether the server's login may read its own backend's memory
 * (pg_backend_memory_contexts, which PostgreSQL gives to pg_read_all_stats), which the pool's
 * byte bound reads (placement.NAME.max_backend_memory). TN_OK with *can set, or a storage
 * error. */
int target_server_reads_memory(const char *server, bool *can, char *err, size_t errlen);

/* How many roles the server's login may become (its memberships, direct and through other
 * roles), and whether it is a superuser (PostgreSQL checks a superuser's SET ROLE against no
 * list). TN_OK with both set, or a storage error. */
int target_server_login_roles(const char *server, bool *super, int64_t *roles, char *err,
                              size_t errlen);

/* Whether it exists. TN_OK with *exists set, or a storage error. */
int target_exists(const storage_target *t, bool *exists, char *err, size_t errlen);

/* The script that creates t when it is a schema, for a caller that runs it inside a
 * transaction of its own (tenant create: the schema, its migrations and its seed in one
 * commit): with a role, the role (when it is not there yet; see target_create), the schema
 * owned by it, and SET LOCAL ROLE, so that what the transaction creates next belongs to the
 * tenant's role; without, "CREATE SCHEMA" and the quoted name. TN_OK; TN_DECLINED for the
 * other kinds (a database cannot be created in a transaction); TN_INVALID for a name
 * target_create would refuse, or a verifier with characters a verifier never has;
 * TN_TOOBIG. */
int target_schema_create_sql(const storage_target *t, char *sql, size_t len);


/* Remove it and everything in it, and then its role (DROP OWNED, DROP ROLE) unless the role
 * still owns something elsewhere on the server (another database's schema of the same
 * name): then it stays. TN_OK, TN_NOTFOUND, or a storage error. */
int target_drop(const storage_target *t, char *err, size_t errlen);

/* The same two on a connection the caller keeps for many targets (the bulk create of the
 * CLI: one connection per worker for every schema it makes, not one per schema): in schema
 * mode `kept` (a clean connection to t's server, from target_open of any schema there,
 * scoped or not; its scope is left as it was) sends the statement; otherwise, or when kept
 * is NULL or not clean, a connection of their own is opened for the call, as above. */
int target_create_on(tn_db *kept, const storage_target *t, char *err, size_t errlen);
int target_drop_on(tn_db *kept, const storage_target *t, char *err, size_t errlen);

/* Schema mode only: a connection to t's server with no scope, for a caller that scopes it
 * to each schema it makes (the bulk create: the first schema of a worker is made on it
 * too, so a worker opens one backend, not two). TN_OK; TN_DECLINED for the other kinds; or
 * a storage error. */
int target_connect(const storage_target *t, tn_db **out, char *err, size_t errlen);

/* A connection scoped to the target, for the caller alone (the CLI, migrations, a move):
 * a SQLite file opened, a PostgreSQL connection with the schema scope set, or a connection
 * to the tenant's database (scoped to its "public" schema, where a database-mode tenant's
 * tables live). Close with db_close. TN_NOTFOUND when the target does not exist (a SQLite
 * file is never created here), or a storage error. */
int target_open(const storage_target *t, tn_db **out, char *err, size_t errlen);

/* The tables of the target, in an order fit for copying (parents before children), its
 * own version table included. Only the target's schema or file is read (never a
 * catalog-wide listing: that is the O(N^2) trap at 10,000 schemas). fn gets each name;
 * TN_OK to go on. */
int target_tables(tn_db *db, const storage_target *t, int (*fn)(void *ctx, const char *table),
                  void *ctx);

/* ---- the per-worker pool ---------------------------------------------------------------- */

typedef struct storage_pool storage_pool;

typedef struct pool_limits {
    int sqlite_max_open;        /* SQLite handles kept open (LRU); also bounded by the file
                                   descriptors the process may open (3 per handle in WAL) */
    int sqlite_cache_kib;       /* the page cache of each SQLite handle, at most (KiB) */
    int pg_max_tenants;         /* schema mode: recycle a server connection after it has
                                   served this many distinct schemas (backend catalog memory
                                   grows with each schema touched and never shrinks), when
                                   the target sets no count and no byte bound can be read */
    int pg_db_max_open;         /* database mode: connections kept open (LRU) */
    int pg_memory_every;        /* schema mode: new schemas between two reads of a backend's
                                   memory (0: POOL_PG_MEMORY_EVERY; tests set it lower) */
    /* The password of a tenant role, for targets with login_as_role (asked at connect time
     * only): TN_OK with 64 hex digits in out, TN_NOTFOUND to connect without one (a server
     * that trusts the role), another code to fail. NULL: always without. */
    int (*role_password)(void *ctx, const char *role, char out[65]);
    void *role_password_ctx;
    /* The registry generation (tenancy/gen.h), which whoever purges, moves or creates a
     * tenant bumps: a kept SQLite handle's path is checked again (stat) only when it moved
     * since the last check (pool.c, entry_current). 0: not known (check every time). NULL:
     * no generation, every acquire checks. */
    uint64_t (*generation)(void *ctx);
    void *generation_ctx;
} pool_limits;                  /* 0 (or less) picks the default: POOL_SQLITE_MAX_OPEN,
                                   POOL_SQLITE_CACHE_KIB, POOL_PG_MAX_TENANTS, 8 */

/* The defaults of pool_limits.sqlite_max_open and .sqlite_cache_kib (storage.sqlite_max_open
 * and storage.sqlite_cache_size): enough handles for a worker to keep a thousand tenants'
 * files open, each with a small page cache, so that the bound on a worker's memory stays
 * that of fewer handles with SQLite's default cache (see pool.c). */
#define POOL_SQLITE_MAX_OPEN 1024
#define POOL_SQLITE_CACHE_KIB 256

/* The default of pool_limits.pg_max_tenants: the count a placement without max_tenants
 * gets when its byte bound is off or its login may not read its backends' memory. */
#define POOL_PG_MAX_TENANTS 1000
/* The default of placement.NAME.max_backend_memory, and how many new schemas a backend
 * serves between two looks at its memory. */
#define POOL_PG_MAX_BACKEND_BYTES (64ll << 20)
#define POOL_PG_MEMORY_EVERY 64

typedef struct pool_stats {
    uint64_t acquires, sqlite_opens, sqlite_hits, pg_connects, pg_recycles, resets, evictions;
    uint64_t pg_memory_looks;   /* reads of a backend's memory (max_backend_bytes) */
    uint64_t pg_memory_recycles; /* of pg_recycles, those for the backend's memory */
    uint64_t pg_memory_unread;  /* looks at a backend's memory the server refused (the login
                                   role may not read pg_backend_memory_contexts): that
                                   connection is bounded by max_tenants alone */
    uint64_t stale;             /* kept entries found gone on acquire and opened afresh */
    uint64_t sqlite_checks;     /* kept SQLite handles checked against their path (a stat) */
    uint64_t pg_down;           /* PostgreSQL connects that failed (the target backs off) */
    uint64_t pg_refused;        /* acquires refused at once while their target backs off */
    uint64_t pg_evictions;      /* of evictions, connections of database mode or of a tenant's
                                   own login (pg_db_max_open reached) */
    int sqlite_open, pg_open;
} pool_stats;

storage_pool *pool_create(const pool_limits *l);

/* The file descriptors a pool with these limits holds at most when RLIMIT_NOFILE does not
 * bound it (3 per SQLite handle, one per PostgreSQL connection, and a few server connections
 * of schema mode): what a process should let it open. */
long pool_fds_wanted(const pool_limits *l);
void pool_destroy(storage_pool *p);

/* The connection for one request of target t, valid until pool_release. A connection in
 * use is never evicted. TN_OK, TN_BUSY (that target's connection is already lent out, or
 * no file descriptor is left), TN_NOTFOUND (a SQLite file that does not exist), or a
 * storage error (err says why). A PostgreSQL target whose connect failed is refused at once
 * (TN_IO, its last error quoted) until its retry time: 250 ms after the first failure,
 * doubling up to 4 s; a successful connect forgets it (see pool.c). */
int pool_acquire(storage_pool *p, const storage_target *t, tn_db **out, char *err,
                 size_t errlen);

/* The request is over: roll back a transaction it left open, check the connection's state
 * (db_is_clean), reset or close one that is not clean, drop the schema scope. After this
 * nothing of the request's tenant remains on the connection. */
void pool_release(storage_pool *p, tn_db *db);

void pool_get_stats(const storage_pool *p, pool_stats *s);
/* How many acquires the pool has served (0 for NULL): every count of pool_stats changes in
 * an acquire or the release after it, so while this stays the same, so do they. */
uint64_t pool_uses(const storage_pool *p);

#endif

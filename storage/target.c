/*
 * target.c — storage targets: create, test, drop and open the place one tenant's data lives
 * (see target.h). The pool of open connections is pool.c.
 *
 * Owns: the mapping of a target to a URI (a SQLite path, the server's URI for a schema, the
 * server's URI with the database replaced), the DDL that makes and removes targets, and the
 * per-target table listing used to copy a tenant.
 *
 * Names enter SQL only through db_quote_ident(); values (a schema or database name in a
 * catalog query) are parameters. A database-mode tenant keeps its tables in the public
 * schema of its own database: its connections are scoped to "public", so unqualified names
 * behave as in schema mode.
 *
 * Listing a schema's tables (db_describe_tables, catalog.c) goes through pg_depend (every
 * table records a dependency on its namespace, which is what DROP SCHEMA ... CASCADE
 * follows) by the pg_depend_reference_index, then pg_class and pg_constraint by OID: the cost is the
 * schema's own objects. pg_class.relnamespace has no index, so "WHERE relnamespace = oid"
 * would read all of pg_class (130,000 rows at 10,000 tenants of a dozen relations) for
 * every tenant, the O(N^2) of a migration wave.
 *
 * Must not: list a catalog across schemas, create anything outside the target, or keep a
 * connection (every function opens what it needs and closes it).
 */
#include "core/first.h"
#include "core/rc.h"
#include "storage/target.h"
#include "storage/db_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define URI_MAX 4096

static const char *const kind_names[] = {"sqlite", "schema", "database"};

const char *target_kind_name(target_kind k)
{
    return (unsigned)k < TN_ARRAY_LEN(kind_names) ? kind_names[k] : NULL;
}

int target_kind_parse(const char *s)
{
    for (size_t i = 0; s != NULL && i < TN_ARRAY_LEN(kind_names); i++)
        if (strcmp(s, kind_names[i]) == 0)
            return (int)i;
    return -1;
}

static void clear(char *err, size_t errlen)
{
    if (err != NULL && errlen > 0)
        err[0] = '\0';
}

/* The checks every entry point makes: a known kind, a name, a PostgreSQL server. */
static int check_target(const storage_target *t, char *err, size_t errlen)
{
    if (t == NULL || target_kind_name(t->kind) == NULL)
        return tn_errf(err, errlen, TN_INVALID, "no target or an unknown kind");
    if (t->name == NULL || t->name[0] == '\0')
        return tn_errf(err, errlen, TN_INVALID, "the %s target has no name",
                       target_kind_name(t->kind));
    if (t->kind == TARGET_SQLITE) {
        /* the driver reads "?mode=" after the path: a '?' in a tenant's path would be
         * taken for options */
        if (strchr(t->name, '?') != NULL)
            return tn_errf(err, errlen, TN_INVALID, "a SQLite path may not contain '?'");
        return TN_OK;
    }
    char q[72];
    if (db_quote_ident(t->name, q, sizeof(q)) != TN_OK)
        return tn_errf(err, errlen, TN_INVALID, "'%s' is not a valid %s name", t->name,
                       target_kind_name(t->kind));
    if (t->group_role != NULL &&
        (t->kind != TARGET_PG_SCHEMA || t->role == NULL || t->login_as_role ||
         db_quote_ident(t->group_role, q, sizeof(q)) != TN_OK))
        return tn_errf(err, errlen, TN_INVALID,
                       "a group login needs a schema target with a role of its own, and a "
                       "valid name");
    const char *b = db_uri_backend(t->server);
    if (b == NULL || strcmp(b, "postgres") != 0)
        return tn_errf(err, errlen, TN_INVALID, "a %s target needs a PostgreSQL server URI",
                       target_kind_name(t->kind));
    return TN_OK;
}

static db_options target_options(const storage_target *t)
{
    db_options o = {0};
    o.busy_timeout_ms = t->busy_timeout_ms;
    o.sync_normal = t->sync_normal;
    o.statement_timeout_ms = t->statement_timeout_ms;
    return o;
}

/* Open the server's own database (schema mode, and to create or drop a database). */
static int open_server(const storage_target *t, tn_db **db, char *err, size_t errlen)
{
    db_options o = target_options(t);
    return db_open(t->server, &o, db, err, errlen);
}

/* Run one statement on db; its error into err. */
static int run(tn_db *db, const char *sql, int nparams, const char *const *params, char *err,
               size_t errlen)
{
    int rc = tn_db_exec(db, sql, nparams, params);
    if (rc != TN_OK)
        tn_errf(err, errlen, rc, "%s", tn_db_error(db));
    return rc;
}

/* ---- group logins: the login a group target's connections use ------------------------------ */

static int (*login_password)(void *ctx, const char *role, char out[65]);
static void *login_password_ctx;

void target_set_login_password(int (*fn)(void *ctx, const char *role, char out[65]), void *ctx)
{
    login_password = fn;
    login_password_ctx = ctx;
}

/* The dsn's user is a member of a group target's role only while it makes, mends or drops
 * it: the role script grants it (or `take` does, for a drop), and the same transaction or
 * the step right after takes it back. A member of every tenant role, its own list of roles,
 * which PostgreSQL 15 rebuilds after every change of a role, would grow with the square of
 * the tenants again (see storage/README.md). Nothing for other targets. */
static int hold_role(tn_db *db, const storage_target *t, bool take, char *err, size_t errlen)
{
    if (t->group_role == NULL || t->role == NULL)
        return TN_OK;
    char qr[72], sql[128];
    if (db_quote_ident(t->role, qr, sizeof(qr)) != TN_OK)
        return tn_errf(err, errlen, TN_INVALID, "'%s' is not a valid role name", t->role);
    snprintf(sql, sizeof(sql), take ? "GRANT %s TO CURRENT_USER" : "REVOKE %s FROM CURRENT_USER",
             qr);
    return run(db, sql, 0, NULL, err, errlen);
}

int target_login(const char *server, const char *dbname, const char *user,
                 int (*pw_fn)(void *ctx, const char *role, char out[65]), void *ctx,
                 const db_options *o, tn_db **out, char *err, size_t errlen)
{
    char pw[65] = "", uri[URI_MAX];
    int rc = TN_OK;
    if (user != NULL && pw_fn != NULL) {
        rc = pw_fn(ctx, user, pw);
        if (rc == TN_NOTFOUND)
            rc = TN_OK;   /* no role key: a server that trusts the login */
        else if (rc != TN_OK)
            tn_errf(err, errlen, rc, "no password for the role %s", user);
    }
    if (rc == TN_OK)
        rc = db_uri_with(server, dbname, user, pw[0] ? pw : NULL, uri, sizeof(uri), err,
                         errlen);
    memset(pw, 0, sizeof(pw));
    if (rc == TN_OK)
        rc = db_open(uri, o, out, err, errlen);
    memset(uri, 0, sizeof(uri));
    return rc;
}

/* A group target's connection: its group login, with the password the hook gives. */
static int open_group(const storage_target *t, tn_db **db, char *err, size_t errlen)
{
    db_options o = target_options(t);
    return target_login(t->server, NULL, t->group_role, login_password, login_password_ctx, &o,
                        db, err, errlen);
}

static const char NSP_SQL[] = "SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1";
static const char DATABASE_SQL[] = "SELECT 1 FROM pg_catalog.pg_database WHERE datname = $1";

/* Does the schema or database exist, asked on db. */
static int pg_exists(tn_db *db, const storage_target *t, bool *exists, char *err, size_t errlen)
{
    char v[8];
    const char *p[] = {t->name};
    int rc = db_query_value(db, v, sizeof(v), t->kind == TARGET_PG_SCHEMA ? NSP_SQL : DATABASE_SQL,
                            1, p);
    *exists = rc == TN_OK;
    if (rc == TN_NOTFOUND)
        return TN_OK;
    if (rc != TN_OK)
        tn_errf(err, errlen, rc, "%s", tn_db_error(db));
    return rc;
}

/* ---- SQLite files ------------------------------------------------------------------------------ */

/* mkdir -p of the folders above path, 0750 for the ones made here. */
static int make_parents(const char *path, char *err, size_t errlen)
{
    size_t n = strlen(path);
    char *dir = malloc(n + 1);
    if (dir == NULL)
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    memcpy(dir, path, n + 1);
    char *slash = strrchr(dir, '/');
    int rc = TN_OK;
    if (slash != NULL && slash != dir) {
        *slash = '\0';
        for (char *p = dir + 1; rc == TN_OK; p++) {
            bool end = *p == '\0';
            if (*p != '/' && !end)
                continue;
            *p = '\0';
            if (mkdir(dir, 0750) != 0 && errno != EEXIST)
                rc = tn_errf(err, errlen, TN_IO, "cannot create the folder %s: %s", dir,
                             strerror(errno));
            if (end)
                break;
            *p = '/';
        }
    }
    free(dir);
    return rc;
}

static int sqlite_uri(const storage_target *t, const char *mode, char *out, size_t outlen,
                      char *err, size_t errlen)
{
    int n = snprintf(out, outlen, "sqlite:%s?mode=%s", t->name, mode);
    if (n < 0 || (size_t)n >= outlen)
        return tn_errf(err, errlen, TN_TOOBIG, "the path is too long");
    return TN_OK;
}

/* The file is claimed with O_EXCL first, so of two concurrent creators exactly one gets
 * TN_OK; the driver then sets it up (WAL is a property of the file and stays). */
static int sqlite_create(const storage_target *t, char *err, size_t errlen)
{
    char uri[URI_MAX];
    int rc = sqlite_uri(t, "rw", uri, sizeof(uri), err, errlen);
    if (rc == TN_OK)
        rc = make_parents(t->name, err, errlen);
    if (rc != TN_OK)
        return rc;
    int fd = open(t->name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd < 0) {
        if (errno == EEXIST)
            return tn_errf(err, errlen, TN_EXISTS, "%s already exists", t->name);
        return tn_errf(err, errlen, TN_IO, "cannot create %s: %s", t->name, strerror(errno));
    }
    close(fd);
    db_options o = target_options(t);
    tn_db *db = NULL;
    rc = db_open(uri, &o, &db, err, errlen);
    db_close(db);
    if (rc != TN_OK)
        unlink(t->name);   /* ours (O_EXCL): not left half made */
    return rc;
}

static int sqlite_exists(const storage_target *t, bool *exists, char *err, size_t errlen)
{
    struct stat st;
    *exists = false;
    if (stat(t->name, &st) == 0) {
        *exists = true;
        return TN_OK;
    }
    if (errno == ENOENT || errno == ENOTDIR)
        return TN_OK;
    return tn_errf(err, errlen, TN_IO, "cannot stat %s: %s", t->name, strerror(errno));
}

static int sqlite_drop(const storage_target *t, char *err, size_t errlen)
{
    size_t n = strlen(t->name);
    char *side = malloc(n + 16);
    if (side == NULL)
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    int rc = TN_OK;
    if (unlink(t->name) != 0) {
        rc = errno == ENOENT ? tn_errf(err, errlen, TN_NOTFOUND, "%s does not exist", t->name)
                             : tn_errf(err, errlen, TN_IO, "cannot remove %s: %s", t->name,
                                       strerror(errno));
    }
    /* The side files go too (a crash can leave them without the main file). */
    static const char *const suffixes[] = {"-wal", "-shm", "-journal"};
    for (size_t i = 0; i < TN_ARRAY_LEN(suffixes); i++) {
        snprintf(side, n + 16, "%s%s", t->name, suffixes[i]);
        if (unlink(side) != 0 && errno != ENOENT && rc == TN_OK)
            rc = tn_errf(err, errlen, TN_IO, "cannot remove %s: %s", side, strerror(errno));
    }
    free(side);
    return rc;
}

/* ---- the public functions ------------------------------------------------------------------- */

/* Whether a kept connection may stand in for the server's (schema mode only: CREATE
 * DATABASE may not run in the transaction a scope wraps around an autocommit statement). */
static bool use_kept(const storage_target *t, tn_db *kept)
{
    return kept != NULL && t->kind == TARGET_PG_SCHEMA && db_is_clean(kept);
}

/* CREATE SCHEMA or CREATE DATABASE of a checked PostgreSQL target, its name quoted, owned by
 * its role when it has one. */
static int create_sql(const storage_target *t, char *sql, size_t len)
{
    char q[72], qr[72] = "";
    db_quote_ident(t->name, q, sizeof(q));
    if (t->role != NULL)
        db_quote_ident(t->role, qr, sizeof(qr));
    int n = snprintf(sql, len, "%s %s%s%s",
                     t->kind == TARGET_PG_SCHEMA ? "CREATE SCHEMA" : "CREATE DATABASE", q,
                     t->role == NULL                  ? ""
                     : t->kind == TARGET_PG_SCHEMA ? " AUTHORIZATION "
                                                      : " OWNER ",
                     qr);
    return n > 0 && (size_t)n < len ? TN_OK : TN_INVALID;
}

/* ---- the tenant's role ------------------------------------------------------------------------
 *
 * A PostgreSQL tenant's schema or database, and everything in it, belongs to a role of its
 * own (named as the storage: t_<slug> or tenant_<slug>). The host's login role is a member,
 * so a scoped transaction can SET LOCAL ROLE to it (db_set_scope), and so is the tenant's
 * group login when it has one (group_role: the login the pool's connections use, which
 * PostgreSQL lets become its group's tenants only); the tenant's own SQL that
 * must not be able to switch back (the panel's console) logs in as the role itself, with the
 * password the tenancy layer derives. The role is made inside a DO block so that one that is
 * already there (left by a purge that could not drop it) is taken over instead of failing
 * the create: role names are checked identifiers (db_quote_ident), so they can stand in a
 * string literal, and a password reaches the server only as a SCRAM verifier, whose
 * characters role_script checks before it quotes it. */

static bool verifier_ok(const char *v)
{
    return v == NULL ||
           (strncmp(v, "SCRAM-SHA-256$", 14) == 0 && strlen(v) <= 400 &&
            strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                      "0123456789+/=$:-") == strlen(v));
}

/* The regular expression every group login of the placement of `group` matches: its name
 * without the trailing number (tn_<placement>_), then digits. Group names are checked
 * identifiers of [a-z0-9_], none of them special in a regular expression. */
static void group_pattern(const char *group, char *out, size_t len)
{
    size_t n = strlen(group);
    while (n > 0 && group[n - 1] >= '0' && group[n - 1] <= '9')
        n--;
    snprintf(out, len, "^%.*s[0-9]+$", (int)n, group);
}

/* With a group login (schema mode): the group role made when it is not there (LOGIN, with
 * its password when one is given; an existing one is given it again only with
 * `set_password`: a repair) and made a member of the tenant's role, in the same DO block as
 * the role; the placement's other group logins (after login_groups changed) let go of the
 * role. Creators of one group's tenants at once take turns on a transaction lock: two
 * would otherwise both make the missing group role, or update its row together ("tuple
 * concurrently updated"). "" without a group login. A new group login may read its
 * backends' memory (the pool's byte bound, see pool.c) when the login that makes it may:
 * a tenant's role is never a member of the group (the group is a member of the tenant's
 * role, not the other way), so no tenant's SQL gains that right. */
static int group_clause(const storage_target *t, const char *qr, bool set_password, char *out,
                        size_t len, char *err, size_t errlen)
{
    out[0] = '\0';
    if (t->group_role == NULL)
        return TN_OK;
    char qg[72], pw[440] = "", again[520] = "";
    if (db_quote_ident(t->group_role, qg, sizeof(qg)) != TN_OK)
        return tn_errf(err, errlen, TN_INVALID, "'%s' is not a valid role name", t->group_role);
    if (!verifier_ok(t->group_verifier))
        return tn_errf(err, errlen, TN_INVALID,
                       "the group login's password verifier is malformed");
    if (t->group_verifier != NULL)
        snprintf(pw, sizeof(pw), " PASSWORD '%s'", t->group_verifier);
    if (t->group_verifier != NULL && set_password)
        snprintf(again, sizeof(again), "ELSE ALTER ROLE %s LOGIN%s; ", qg, pw);
    char stats[200];
    snprintf(stats, sizeof(stats),
             "IF pg_catalog.pg_has_role(current_user, 'pg_read_all_stats', 'MEMBER') "
             "THEN GRANT pg_read_all_stats TO %s; END IF;",
             qg);
    char others[640], pattern[80];
    group_pattern(t->group_role, pattern, sizeof(pattern));
    snprintf(others, sizeof(others),
             "FOR o IN SELECT g.rolname FROM pg_catalog.pg_auth_members m "
             "JOIN pg_catalog.pg_roles g ON g.oid = m.member "
             "WHERE m.roleid = '%s'::pg_catalog.regrole AND g.rolname ~ '%s' "
             "AND g.rolname <> '%s' LOOP "
             "EXECUTE pg_catalog.format('REVOKE %%I FROM %%I', '%s', o.rolname); END LOOP; ",
             qr, pattern, t->group_role, t->role);
    int n = snprintf(out, len,
                     "PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext("
                     "'tenancy group login %s')); "
                     "IF pg_catalog.to_regrole('%s') IS NULL "
                     "THEN CREATE ROLE %s LOGIN%s; %s %sEND IF; GRANT %s TO %s; %s",
                     t->group_role, qg, qg, pw, stats, again, qr, qg, others);
    if (n < 0 || (size_t)n >= len)
        return tn_errf(err, errlen, TN_TOOBIG, "the group login's statement is too long");
    return TN_OK;
}

static int role_script(const storage_target *t, bool set_password, char *sql, size_t len,
                       char *err, size_t errlen)
{
    char qr[72];
    if (db_quote_ident(t->role, qr, sizeof(qr)) != TN_OK)
        return tn_errf(err, errlen, TN_INVALID, "'%s' is not a valid role name", t->role);
    const char *v = t->role_verifier;
    if (!verifier_ok(v))
        return tn_errf(err, errlen, TN_INVALID, "the role's password verifier is malformed");
    char pw[440] = "", group[2048];
    if (v != NULL)
        snprintf(pw, sizeof(pw), " PASSWORD '%s'", v);
    int rc = group_clause(t, qr, set_password, group, sizeof(group), err, errlen);
    if (rc != TN_OK)
        return rc;
    const char *declare = group[0] != '\0' ? "DECLARE o record; " : "";   /* its loop's */
    /* Without a password, a role that is there is left as it is (setting a password costs
     * the server about half a millisecond, a third of the role's whole cost). */
    /* to_regrole (a cache lookup, the quoted name) rather than a query of the pg_roles view,
     * which the server plans as a join at every tenant. */
    int n = v != NULL ? snprintf(sql, len,
                                 "DO $tn_role$%sBEGIN "
                                 "IF pg_catalog.to_regrole('%s') IS NOT NULL "
                                 "THEN ALTER ROLE %s LOGIN%s; "
                                 "ELSE CREATE ROLE %s LOGIN%s; END IF; "
                                 "GRANT %s TO CURRENT_USER; %sEND$tn_role$",
                                 declare, qr, qr, pw, qr, pw, qr, group)
                      : snprintf(sql, len,
                                 "DO $tn_role$%sBEGIN "
                                 "IF pg_catalog.to_regrole('%s') IS NULL "
                                 "THEN CREATE ROLE %s LOGIN; END IF; "
                                 "GRANT %s TO CURRENT_USER; %sEND$tn_role$",
                                 declare, qr, qr, qr, group);
    if (n < 0 || (size_t)n >= len)
        return tn_errf(err, errlen, TN_TOOBIG, "the role's statement is too long");
    return TN_OK;
}

/* The role made (or given its password again) and the login made a member, on db. */
static int ensure_role(tn_db *db, const storage_target *t, char *err, size_t errlen)
{
    char sql[4096];
    int rc = role_script(t, true, sql, sizeof(sql), err, errlen);
    return rc == TN_OK ? run(db, sql, 0, NULL, err, errlen) : rc;
}

/* A kept connection's scope, set aside while the login itself acts (makes or drops a role, a
 * schema): the previous tenant's role may do neither. */
typedef struct kept_scope {
    bool set;
    char schema[72], role[72];
} kept_scope;

static void unscope(tn_db *db, kept_scope *k)
{
    const char *schema = db_schema_scope(db), *role = db_scope_role(db);
    k->set = role != NULL;   /* a role needs a schema (db_set_scope) */
    if (!k->set)
        return;
    snprintf(k->schema, sizeof(k->schema), "%s", schema);
    snprintf(k->role, sizeof(k->role), "%s", role);
    (void)db_set_scope(db, NULL, NULL);
}

static void rescope(tn_db *db, const kept_scope *k)
{
    if (k->set)
        (void)db_set_scope(db, k->schema, k->role);
}

/* After DROP SCHEMA or DROP DATABASE: the role, unless something elsewhere still needs it
 * (DROP OWNED takes back whatever it was granted in this database first). */
static void drop_role(tn_db *db, const storage_target *t)
{
    if (t->role == NULL)
        return;
    char qr[72], sql[512];
    if (db_quote_ident(t->role, qr, sizeof(qr)) != TN_OK)
        return;
    snprintf(sql, sizeof(sql),
             "DO $tn_role$BEGIN "
             "IF pg_catalog.to_regrole('%s') IS NOT NULL THEN "
             "DROP OWNED BY %s; DROP ROLE %s; END IF; "
             "EXCEPTION WHEN dependent_objects_still_exist THEN NULL; END$tn_role$",
             qr, qr, qr);
    (void)tn_db_exec(db, sql, 0, NULL);   /* a role that stays costs nothing but a name */
}

static int give_objects(tn_db *db, const char *nsp, const char *role, char *err,
                        size_t errlen);

static const char REVOKE_PUBLIC_SCHEMA_SQL[] = "REVOKE ALL ON SCHEMA public FROM PUBLIC";

/* A tenant database: nobody but its role (and the login, a member) may connect to it or make
 * temporary tables there. On a connection to the server. */
static int revoke_database(tn_db *db, const storage_target *t, char *err, size_t errlen)
{
    char q[72], sql[160];
    db_quote_ident(t->name, q, sizeof(q));
    snprintf(sql, sizeof(sql), "REVOKE CONNECT, TEMPORARY ON DATABASE %s FROM PUBLIC", q);
    return run(db, sql, 0, NULL, err, errlen);
}

/* Inside a tenant database, on an unscoped login connection of its own (a scoped one would
 * already be the tenant): PUBLIC's default USAGE on its public schema revoked, and with
 * `give` the objects there given to the tenant's role (target_role_repair, a clone). */
static int inside_database(const storage_target *t, bool give, char *err, size_t errlen)
{
    char uri[URI_MAX];
    db_options o = target_options(t);
    tn_db *db = NULL;
    int rc = db_uri_with_dbname(t->server, t->name, uri, sizeof(uri), err, errlen);
    if (rc == TN_OK)
        rc = db_open(uri, &o, &db, err, errlen);
    if (rc == TN_OK)
        rc = run(db, REVOKE_PUBLIC_SCHEMA_SQL, 0, NULL, err, errlen);
    if (rc == TN_OK && give)
        rc = give_objects(db, "public", t->role, err, errlen);
    db_close(db);
    return rc;
}

int target_server_harden(const char *server, char *err, size_t errlen)
{
    clear(err, errlen);
    tn_db *db = NULL;
    int rc = db_open(server, NULL, &db, err, errlen);
    if (rc == TN_OK)
        rc = run(db, REVOKE_PUBLIC_SCHEMA_SQL, 0, NULL, err, errlen);
    /* A REVOKE that its user may not make only warns: the result is read back. */
    char v[8];
    if (rc == TN_OK &&
        (rc = db_query_value(db, v, sizeof(v),
                             "SELECT pg_catalog.has_schema_privilege('public', 'public', "
                             "'USAGE') OR pg_catalog.has_schema_privilege('public', 'public', "
                             "'CREATE')", 0, NULL)) == TN_OK &&
        strcmp(v, "f") != 0)
        rc = tn_errf(err, errlen, TN_DENIED, "the login is not the public schema's owner");
    else if (rc != TN_OK && db != NULL && err != NULL && err[0] == '\0')
        tn_errf(err, errlen, rc, "%s", tn_db_error(db));
    db_close(db);
    return rc;
}

int target_server_reads_memory(const char *server, bool *can, char *err, size_t errlen)
{
    clear(err, errlen);
    *can = false;
    tn_db *db = NULL;
    int rc = db_open(server, NULL, &db, err, errlen);
    char v[8];
    if (rc == TN_OK)
        rc = db_query_value(db, v, sizeof(v),
                            "SELECT pg_catalog.has_table_privilege("
                            "'pg_catalog.pg_backend_memory_contexts', 'SELECT')", 0, NULL);
    if (rc == TN_OK)
        *can = strcmp(v, "t") == 0;
    else if (db != NULL && err != NULL && err[0] == '\0')
        tn_errf(err, errlen, rc, "%s", tn_db_error(db));
    db_close(db);
    return rc;
}

int target_server_login_roles(const char *server, bool *super, int64_t *roles, char *err,
                              size_t errlen)
{
    clear(err, errlen);
    *super = false;
    *roles = 0;
    tn_db *db = NULL;
    tn_rows *rows = NULL;
    int rc = db_open(server, NULL, &db, err, errlen);
    if (rc == TN_OK)
        rc = tn_db_query(db, &rows,
                         "WITH RECURSIVE m(oid) AS ("
                         "SELECT a.roleid FROM pg_catalog.pg_auth_members a "
                         "WHERE a.member = (SELECT r.oid FROM pg_catalog.pg_roles r "
                         "WHERE r.rolname = current_user) "
                         "UNION SELECT a.roleid FROM pg_catalog.pg_auth_members a "
                         "JOIN m ON a.member = m.oid) "
                         "SELECT (SELECT r.rolsuper FROM pg_catalog.pg_roles r "
                         "WHERE r.rolname = current_user)::text, (SELECT count(*) FROM m)",
                         0, NULL);
    if (rc == TN_OK && tn_rows_next(rows) == TN_OK) {
        const char *s = tn_rows_get(rows, 0), *n = tn_rows_get(rows, 1);
        *super = s != NULL && strcmp(s, "true") == 0;
        *roles = n != NULL ? strtoll(n, NULL, 10) : 0;
    } else if (rc == TN_OK) {
        rc = tn_errf(err, errlen, TN_ERR, "the login's roles could not be read");
    } else if (db != NULL && err != NULL && err[0] == '\0') {
        tn_errf(err, errlen, rc, "%s", tn_db_error(db));
    }
    tn_rows_free(rows);
    db_close(db);
    return rc;
}

int target_create_on(tn_db *kept, const storage_target *t, char *err, size_t errlen)
{
    clear(err, errlen);
    int rc = check_target(t, err, errlen);
    if (rc != TN_OK)
        return rc;
    if (t->kind == TARGET_SQLITE)
        return sqlite_create(t, err, errlen);

    char sql[256], role[4096];
    create_sql(t, sql, sizeof(sql));
    tn_db *db = use_kept(t, kept) ? kept : NULL;
    if (db == NULL) {
        rc = open_server(t, &db, err, errlen);
        if (rc != TN_OK)
            return rc;
    }
    /* The role first (its own statement: the schema or database names it as owner). On a
     * kept connection it runs outside the connection's scope. */
    kept_scope ks;
    unscope(db, &ks);
    /* A schema or database that is there already is someone else's: its role (maybe theirs
     * too) is not touched. The race this leaves (two creators) ends in CREATE failing below. */
    bool exists = false;
    if (t->role != NULL && (rc = pg_exists(db, t, &exists, err, errlen)) == TN_OK && exists)
        rc = tn_errf(err, errlen, TN_EXISTS, "the %s %s already exists",
                     target_kind_name(t->kind), t->name);
    if (rc == TN_OK && t->role != NULL)
        rc = role_script(t, false, role, sizeof(role), err, errlen);
    /* Schema mode: the role and the schema in one transaction, so a failure leaves neither.
     * CREATE DATABASE may not run in a transaction (it is only ever sent on an unscoped
     * connection of its own): the role is its own statement before it. A failure because it
     * is already there is TN_EXISTS. */
    bool txn = rc == TN_OK && t->role != NULL && t->kind == TARGET_PG_SCHEMA;
    if (txn && (rc = tn_db_begin(db)) != TN_OK)
        tn_errf(err, errlen, rc, "%s", tn_db_error(db));
    if (rc == TN_OK && t->role != NULL)
        rc = run(db, role, 0, NULL, err, errlen);
    if (rc == TN_OK)
        rc = run(db, sql, 0, NULL, err, errlen);
    if (rc == TN_OK)
        rc = hold_role(db, t, false, err, errlen);
    if (txn && rc == TN_OK && (rc = tn_db_commit(db)) != TN_OK)
        tn_errf(err, errlen, rc, "%s", tn_db_error(db));
    if (txn && rc != TN_OK)
        tn_db_rollback(db);
    if (rc == TN_OK && t->kind == TARGET_PG_DATABASE && t->role != NULL)
        rc = revoke_database(db, t, err, errlen);
    rescope(db, &ks);
    if (rc == TN_OK && t->kind == TARGET_PG_DATABASE && t->role != NULL)
        rc = inside_database(t, false, err, errlen);
    if (rc != TN_OK && rc != TN_EXISTS) {
        char ignored[8];
        if (pg_exists(db, t, &exists, ignored, sizeof(ignored)) == TN_OK && exists)
            rc = tn_errf(err, errlen, TN_EXISTS, "the %s %s already exists",
                         target_kind_name(t->kind), t->name);
    }
    if (db != kept)
        db_close(db);
    return rc;
}

int target_schema_create_sql(const storage_target *t, char *sql, size_t len)
{
    char err[256];
    if (check_target(t, err, sizeof(err)) != TN_OK)
        return TN_INVALID;
    if (t->kind != TARGET_PG_SCHEMA)
        return TN_DECLINED;
    if (t->role == NULL)
        return create_sql(t, sql, len);
    char role[4096], create[256], qr[72];
    int rc = role_script(t, false, role, sizeof(role), err, sizeof(err));
    if (rc != TN_OK)
        return rc;
    create_sql(t, create, sizeof(create));
    db_quote_ident(t->role, qr, sizeof(qr));
    int n = snprintf(sql, len, "%s;\n%s;\nSET LOCAL ROLE %s;\n", role, create, qr);
    return n > 0 && (size_t)n < len ? TN_OK : TN_TOOBIG;
}

int target_create(const storage_target *t, char *err, size_t errlen)
{
    return target_create_on(NULL, t, err, errlen);
}

int target_exists(const storage_target *t, bool *exists, char *err, size_t errlen)
{
    clear(err, errlen);
    if (exists == NULL)
        return tn_errf(err, errlen, TN_INVALID, "no place for the answer");
    *exists = false;
    int rc = check_target(t, err, errlen);
    if (rc != TN_OK)
        return rc;
    if (t->kind == TARGET_SQLITE)
        return sqlite_exists(t, exists, err, errlen);
    tn_db *db = NULL;
    rc = open_server(t, &db, err, errlen);
    if (rc == TN_OK)
        rc = pg_exists(db, t, exists, err, errlen);
    db_close(db);
    return rc;
}

int target_drop(const storage_target *t, char *err, size_t errlen)
{
    return target_drop_on(NULL, t, err, errlen);
}

int target_drop_on(tn_db *kept, const storage_target *t, char *err, size_t errlen)
{
    clear(err, errlen);
    int rc = check_target(t, err, errlen);
    if (rc != TN_OK)
        return rc;
    if (t->kind == TARGET_SQLITE)
        return sqlite_drop(t, err, errlen);

    char q[72], sql[128];
    db_quote_ident(t->name, q, sizeof(q));
    /* WITH (FORCE): the workers' pools keep idle connections to a tenant's database, and
     * they would otherwise block the drop until they happen to close. */
    snprintf(sql, sizeof(sql), t->kind == TARGET_PG_SCHEMA ? "DROP SCHEMA %s CASCADE"
                                                           : "DROP DATABASE %s WITH (FORCE)",
             q);
    tn_db *db = use_kept(t, kept) ? kept : NULL;
    if (db == NULL) {
        rc = open_server(t, &db, err, errlen);
        if (rc != TN_OK)
            return rc;
    }
    bool exists = false;
    rc = pg_exists(db, t, &exists, err, errlen);
    if (rc == TN_OK && !exists)
        rc = tn_errf(err, errlen, TN_NOTFOUND, "the %s %s does not exist",
                     target_kind_name(t->kind), t->name);
    if (rc == TN_OK && t->kind == TARGET_PG_DATABASE) {
        char cur[80];
        if (db_query_value(db, cur, sizeof(cur), "SELECT pg_catalog.current_database()", 0,
                           NULL) == TN_OK &&
            strcmp(cur, t->name) == 0)
            rc = tn_errf(err, errlen, TN_INVALID,
                         "the database %s is the server URI's own: not dropped", t->name);
    }
    if (rc == TN_OK) {
        /* On a kept connection the drop runs outside its scope. */
        kept_scope ks;
        unscope(db, &ks);
        rc = hold_role(db, t, true, err, errlen);
        if (rc == TN_OK)
            rc = run(db, sql, 0, NULL, err, errlen);
        if (rc == TN_OK)
            drop_role(db, t);
        else
            (void)hold_role(db, t, false, NULL, 0);
        rescope(db, &ks);
    }
    if (db != kept)
        db_close(db);
    return rc;
}

int target_connect(const storage_target *t, tn_db **out, char *err, size_t errlen)
{
    clear(err, errlen);
    *out = NULL;
    int rc = check_target(t, err, errlen);
    if (rc != TN_OK)
        return rc;
    if (t->kind != TARGET_PG_SCHEMA)
        return tn_errf(err, errlen, TN_DECLINED, "not a schema");
    return open_server(t, out, err, errlen);
}

int target_open(const storage_target *t, tn_db **out, char *err, size_t errlen)
{
    clear(err, errlen);
    if (out == NULL)
        return tn_errf(err, errlen, TN_INVALID, "no place for the connection");
    *out = NULL;
    int rc = check_target(t, err, errlen);
    if (rc != TN_OK)
        return rc;
    char uri[URI_MAX];
    tn_db *db = NULL;
    db_options o = target_options(t);
    if (t->kind == TARGET_SQLITE) {
        /* mode=rw: a missing tenant file is an error, never silently created */
        bool exists = false;
        rc = sqlite_exists(t, &exists, err, errlen);
        if (rc == TN_OK && !exists)
            rc = tn_errf(err, errlen, TN_NOTFOUND, "%s does not exist", t->name);
        if (rc == TN_OK)
            rc = sqlite_uri(t, "rw", uri, sizeof(uri), err, errlen);
        if (rc == TN_OK)
            rc = db_open(uri, &o, &db, err, errlen);
        if (rc == TN_OK)
            *out = db;
        return rc;
    }
    if (t->kind == TARGET_PG_SCHEMA) {
        rc = t->group_role != NULL ? open_group(t, &db, err, errlen)
                                   : db_open(t->server, &o, &db, err, errlen);
        if (rc == TN_OK) {
            bool exists = false;
            rc = pg_exists(db, t, &exists, err, errlen);
            if (rc == TN_OK && !exists)
                rc = tn_errf(err, errlen, TN_NOTFOUND, "the schema %s does not exist", t->name);
        }
    } else {
        rc = db_uri_with_dbname(t->server, t->name, uri, sizeof(uri), err, errlen);
        if (rc == TN_OK)
            rc = db_open(uri, &o, &db, err, errlen);
        if (rc == TN_IO) {   /* is it that the database is not there? */
            bool exists = true;
            tn_db *server = NULL;
            char ignored[DB_ERRLEN];
            if (open_server(t, &server, ignored, sizeof(ignored)) == TN_OK &&
                pg_exists(server, t, &exists, ignored, sizeof(ignored)) == TN_OK && !exists)
                rc = tn_errf(err, errlen, TN_NOTFOUND, "the database %s does not exist", t->name);
            db_close(server);
        }
    }
    if (rc == TN_OK) {
        rc = db_set_scope(db, t->kind == TARGET_PG_SCHEMA ? t->name : "public", t->role);
        if (rc != TN_OK)
            tn_errf(err, errlen, rc, "%s", tn_db_error(db));
    }
    if (rc != TN_OK) {
        db_close(db);
        return rc;
    }
    *out = db;
    return TN_OK;
}

/* ---- the role's drift and its repair ------------------------------------------------------- */

/* Whether role r (a tenant's, a group login) may do what no login that runs tenants' SQL
 * may; and whether the connection's own login is a member of r itself (not through
 * superuser, which pg_has_role counts). */
#define EXTRA_RIGHTS(r)                                                                      \
    "COALESCE(" r ".rolsuper OR " r ".rolcreaterole OR " r ".rolcreatedb OR " r                \
    ".rolreplication OR " r ".rolbypassrls, false)"
#define HOST_IS_MEMBER                                                                       \
    "COALESCE(EXISTS (SELECT FROM pg_catalog.pg_auth_members m WHERE m.roleid = r.oid "       \
    "AND m.member = (SELECT u.oid FROM pg_catalog.pg_roles u WHERE u.rolname = current_user)), " \
    "false) "

static const char ROLE_CHECK_SCHEMA_SQL[] =
    "SELECT r.oid IS NOT NULL, COALESCE(n.nspowner = r.oid, false), "
    "COALESCE(pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER'), false), "
    EXTRA_RIGHTS("r") ", "
    "(SELECT count(*) FROM pg_catalog.pg_auth_members m WHERE m.member = r.oid), "
    /* the schema's relations by pg_depend, as target_tables lists them (no catalog scan) */
    "(SELECT count(*) FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_class c ON c.oid = d.objid "
    " WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass "
    " AND d.refclassid = 'pg_catalog.pg_namespace'::pg_catalog.regclass "
    " AND d.refobjid = n.oid AND d.deptype = 'n' AND c.relowner IS DISTINCT FROM r.oid), "
    "false, "
    HOST_IS_MEMBER
    "FROM pg_catalog.pg_namespace n LEFT JOIN pg_catalog.pg_roles r ON r.rolname = $2 "
    "WHERE n.nspname = $1";

static const char ROLE_CHECK_DATABASE_SQL[] =
    "SELECT r.oid IS NOT NULL, COALESCE(d.datdba = r.oid, false), "
    "COALESCE(pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER'), false), "
    EXTRA_RIGHTS("r") ", "
    "(SELECT count(*) FROM pg_catalog.pg_auth_members m WHERE m.member = r.oid), "
    "0, pg_catalog.has_database_privilege('public', d.oid, 'CONNECT'), "
    HOST_IS_MEMBER
    "FROM pg_catalog.pg_database d LEFT JOIN pg_catalog.pg_roles r ON r.rolname = $2 "
    "WHERE d.datname = $1";

/* A group login: whether it exists, is a member of the tenant's role, and may do what no
 * login that runs tenants' SQL may. */
static const char GROUP_CHECK_SQL[] =
    "SELECT g.oid IS NOT NULL, COALESCE(EXISTS (SELECT FROM pg_catalog.pg_auth_members m "
    "JOIN pg_catalog.pg_roles r ON r.oid = m.roleid WHERE m.member = g.oid AND r.rolname = $1), "
    "false), " EXTRA_RIGHTS("g") ", "
    /* the placement's other group logins that are members too (login_groups changed) */
    "(SELECT pg_catalog.string_agg(o.rolname, ', ' ORDER BY o.rolname) "
    "FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles o ON o.oid = m.member "
    "JOIN pg_catalog.pg_roles r ON r.oid = m.roleid "
    "WHERE r.rolname = $1 AND o.rolname ~ $3 AND o.rolname <> $2) "
    "FROM (SELECT 1) x LEFT JOIN pg_catalog.pg_roles g ON g.rolname = $2";

/* One drift found: counted, and told to fn. PROBLEM in the two functions below, whose
 * parameters it names. */
static void problem(int *nproblems, void (*fn)(void *ctx, const char *problem), void *ctx,
                    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void problem(int *nproblems, void (*fn)(void *ctx, const char *problem), void *ctx,
                    const char *fmt, ...)
{
    char m[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof(m), fmt, ap);
    va_end(ap);
    (*nproblems)++;
    fn(ctx, m);
}
#define PROBLEM(...) problem(nproblems, fn, ctx, __VA_ARGS__)

static int group_check(tn_db *db, const storage_target *t, int *nproblems,
                       void (*fn)(void *ctx, const char *problem), void *ctx, char *err,
                       size_t errlen)
{
    tn_rows *g = NULL;
    char pattern[80];
    group_pattern(t->group_role, pattern, sizeof(pattern));
    const char *gp[] = {t->role, t->group_role, pattern};
    int rc = tn_db_query(db, &g, GROUP_CHECK_SQL, 3, gp);
    if (rc == TN_OK && tn_rows_next(g) == TN_OK) {
        const char *ge = tn_rows_get(g, 0), *gm = tn_rows_get(g, 1), *gb = tn_rows_get(g, 2);
        if (ge == NULL || strcmp(ge, "t") != 0)
            PROBLEM("its group login %s does not exist ('tenancy check --repair-roles' makes "
                    "it)", t->group_role);
        else if (gm == NULL || strcmp(gm, "t") != 0)
            PROBLEM("its group login %s is not a member of its role %s", t->group_role,
                    t->role);
        if (gb != NULL && strcmp(gb, "t") == 0)
            PROBLEM("its group login %s may do what no tenant may (superuser, CREATEROLE, "
                    "CREATEDB, REPLICATION or BYPASSRLS)", t->group_role);
        const char *go = tn_rows_get(g, 3);
        if (go != NULL && go[0] != '\0')
            PROBLEM("other group logins of its placement are members of its role %s: %.120s",
                    t->role, go);
    } else if (rc != TN_OK) {
        tn_errf(err, errlen, rc, "%s", tn_db_error(db));
    }
    tn_rows_free(g);
    return rc;
}

int target_role_check(tn_db *server, const storage_target *t, int *nproblems,
                      void (*fn)(void *ctx, const char *problem), void *ctx, char *err,
                      size_t errlen)
{
    clear(err, errlen);
    *nproblems = 0;
    int rc = check_target(t, err, errlen);
    if (rc != TN_OK || t->kind == TARGET_SQLITE || t->role == NULL)
        return rc;
    tn_db *db = server;
    if (db == NULL && (rc = open_server(t, &db, err, errlen)) != TN_OK)
        return rc;
    const char *p[] = {t->name, t->role};
    tn_rows *rows = NULL;
    bool role_there = false;
    rc = tn_db_query(db, &rows,
                     t->kind == TARGET_PG_SCHEMA ? ROLE_CHECK_SCHEMA_SQL : ROLE_CHECK_DATABASE_SQL,
                     2, p);
    if (rc == TN_OK && tn_rows_next(rows) == TN_OK) {
        const char *v[8];
        for (int i = 0; i < 8; i++)
            v[i] = tn_rows_get(rows, i);
        const char *what = t->kind == TARGET_PG_SCHEMA ? "schema" : "database";
        if (v[0] == NULL || strcmp(v[0], "t") != 0) {
            PROBLEM("its role %s does not exist ('tenancy check --repair-roles' makes it)",
                    t->role);
        } else {
            if (strcmp(v[1] ? v[1] : "", "t") != 0)
                PROBLEM("the %s is not owned by its role %s", what, t->role);
            if (t->group_role == NULL && strcmp(v[2] ? v[2] : "", "t") != 0)
                PROBLEM("the host's login is not a member of its role %s", t->role);
            else if (t->group_role != NULL && !t->keep_host_member &&
                     strcmp(v[7] ? v[7] : "", "t") == 0)
                PROBLEM("the host's login is still a member of its role %s (its group login "
                        "serves it; --repair-roles takes it back)",
                        t->role);
            if (strcmp(v[3] ? v[3] : "", "f") != 0)
                PROBLEM("its role %s may do what no tenant may (superuser, CREATEROLE, "
                        "CREATEDB, REPLICATION or BYPASSRLS)", t->role);
            if (strcmp(v[4] ? v[4] : "0", "0") != 0)
                PROBLEM("its role %s is a member of %s other role(s)", t->role, v[4]);
            if (strcmp(v[5] ? v[5] : "0", "0") != 0)
                PROBLEM("%s relation(s) in the schema are not owned by its role %s", v[5],
                        t->role);
            if (strcmp(v[6] ? v[6] : "", "t") == 0)
                PROBLEM("PUBLIC may connect to its database");
        }
        role_there = v[0] != NULL && strcmp(v[0], "t") == 0;
    } else if (rc == TN_OK) {
        rc = tn_errf(err, errlen, TN_NOTFOUND, "the %s %s does not exist",
                     target_kind_name(t->kind), t->name);
    } else {
        tn_errf(err, errlen, rc, "%s", tn_db_error(db));
    }
    tn_rows_free(rows);
    if (rc == TN_OK && role_there && t->group_role != NULL)
        rc = group_check(db, t, nproblems, fn, ctx, err, errlen);
    if (db != server)
        db_close(db);
    return rc;
}

#undef PROBLEM

/* Everything in schema `nsp` of the connection's database given to the role: tables,
 * views, materialized views, foreign tables and sequences no column owns, then routines,
 * then types that are not a relation's row type. One DO block, names quoted by the server
 * (format's %I over pg_catalog's own names). */
static int give_objects(tn_db *db, const char *nsp, const char *role, char *err, size_t errlen)
{
    char sql[2600];
    snprintf(sql, sizeof(sql),
             "DO $tn_give$DECLARE o record; BEGIN "
             "FOR o IN SELECT c.oid::pg_catalog.regclass AS name, c.relkind FROM "
             "pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
             "WHERE n.nspname = '%s' AND c.relkind IN ('r','p','v','m','f','S') "
             "AND c.relowner <> (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = '%s') "
             "AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d WHERE d.objid = c.oid "
             "AND d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.deptype = 'a') "
             "LOOP EXECUTE pg_catalog.format('ALTER %%s %%s OWNER TO %%I', CASE o.relkind "
             "WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'f' THEN "
             "'FOREIGN TABLE' WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, o.name, '%s'); "
             "END LOOP; "
             "FOR o IN SELECT p.oid::pg_catalog.regprocedure AS name FROM pg_catalog.pg_proc p "
             "JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = '%s' "
             "LOOP EXECUTE pg_catalog.format('ALTER ROUTINE %%s OWNER TO %%I', o.name, '%s'); "
             "END LOOP; "
             "FOR o IN SELECT t.oid::pg_catalog.regtype AS name FROM pg_catalog.pg_type t "
             "JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = '%s' "
             "AND (t.typtype IN ('d','e','r') OR (t.typtype = 'c' AND (SELECT c.relkind "
             "FROM pg_catalog.pg_class c WHERE c.oid = t.typrelid) = 'c')) "
             "LOOP EXECUTE pg_catalog.format('ALTER TYPE %%s OWNER TO %%I', o.name, '%s'); "
             "END LOOP; END$tn_give$",
             nsp, role, role, nsp, role, nsp, role);
    return run(db, sql, 0, NULL, err, errlen);
}

int target_role_repair(tn_db *server, const storage_target *t, char *err, size_t errlen)
{
    clear(err, errlen);
    int rc = check_target(t, err, errlen);
    if (rc != TN_OK || t->kind == TARGET_SQLITE || t->role == NULL)
        return rc;
    char q[72], qr[72], sql[256];
    db_quote_ident(t->name, q, sizeof(q));
    if (db_quote_ident(t->role, qr, sizeof(qr)) != TN_OK)
        return tn_errf(err, errlen, TN_INVALID, "'%s' is not a valid role name", t->role);
    /* A connection per repair costs a new backend whose catalogs and PL/pgSQL are cold:
     * about 100 ms a tenant, against 4 ms on one kept for the whole check. */
    tn_db *db = server;
    if (db == NULL && (rc = open_server(t, &db, err, errlen)) != TN_OK)
        return rc;
    rc = ensure_role(db, t, err, errlen);
    if (rc == TN_OK) {
        snprintf(sql, sizeof(sql), "ALTER %s %s OWNER TO %s",
                 t->kind == TARGET_PG_SCHEMA ? "SCHEMA" : "DATABASE", q, qr);
        rc = run(db, sql, 0, NULL, err, errlen);
    }
    if (rc == TN_OK && t->kind == TARGET_PG_SCHEMA)
        rc = give_objects(db, t->name, t->role, err, errlen);
    if (rc == TN_OK && t->kind == TARGET_PG_DATABASE)
        rc = revoke_database(db, t, err, errlen);
    if (rc == TN_OK && !t->keep_host_member)
        rc = hold_role(db, t, false, err, errlen);
    if (db != server)
        db_close(db);
    if (rc == TN_OK && t->kind == TARGET_PG_DATABASE)
        rc = inside_database(t, true, err, errlen);
    return rc;
}

int target_role_ensure(const storage_target *t, char *err, size_t errlen)
{
    clear(err, errlen);
    int rc = check_target(t, err, errlen);
    if (rc != TN_OK || t->kind == TARGET_SQLITE || t->role == NULL)
        return rc;
    tn_db *db = NULL;
    if ((rc = open_server(t, &db, err, errlen)) == TN_OK)
        rc = ensure_role(db, t, err, errlen);
    if (rc == TN_OK)
        rc = hold_role(db, t, false, err, errlen);
    db_close(db);
    return rc;
}

/* ---- tables in copy order ---------------------------------------------------------------------- */

typedef struct table_graph {
    char **name;        /* sorted by name, unique */
    int n, cap;
    int *edge_child, *edge_parent;   /* indexes into name: child references parent */
    int nedges, edge_cap;
} table_graph;

static int graph_find(const table_graph *g, const char *name, bool fold)
{
    for (int i = 0; i < g->n; i++)
        if (fold ? strcasecmp(g->name[i], name) == 0 : strcmp(g->name[i], name) == 0)
            return i;
    return -1;
}

static int graph_add_table(table_graph *g, const char *name)
{
    if (graph_find(g, name, false) >= 0)
        return TN_OK;
    if (g->n == g->cap) {
        int cap = g->cap ? g->cap * 2 : 16;
        char **nn = realloc(g->name, (size_t)cap * sizeof(*nn));
        if (nn == NULL)
            return TN_NOMEM;
        g->name = nn;
        g->cap = cap;
    }
    g->name[g->n] = strdup(name);
    if (g->name[g->n] == NULL)
        return TN_NOMEM;
    g->n++;
    return TN_OK;
}

static int graph_add_edge(table_graph *g, int child, int parent)
{
    if (child < 0 || parent < 0 || child == parent)   /* self-references order nothing */
        return TN_OK;
    if (g->nedges == g->edge_cap) {
        int cap = g->edge_cap ? g->edge_cap * 2 : 16;
        int *c = realloc(g->edge_child, (size_t)cap * sizeof(int));
        if (c == NULL)
            return TN_NOMEM;
        g->edge_child = c;
        int *p = realloc(g->edge_parent, (size_t)cap * sizeof(int));
        if (p == NULL)
            return TN_NOMEM;
        g->edge_parent = p;
        g->edge_cap = cap;
    }
    g->edge_child[g->nedges] = child;
    g->edge_parent[g->nedges] = parent;
    g->nedges++;
    return TN_OK;
}

static void graph_free(table_graph *g)
{
    for (int i = 0; i < g->n; i++)
        free(g->name[i]);
    free(g->name);
    free(g->edge_child);
    free(g->edge_parent);
}

/* Parents before children (Kahn), the smallest name first among the ready ones so the order
 * is stable. A cycle of foreign keys has no such order: its tables come in name order (a
 * copy must then defer its constraints). */
static int graph_emit(table_graph *g, int (*fn)(void *ctx, const char *table), void *ctx)
{
    int n = g->n, rc = TN_OK;
    bool *done = calloc((size_t)n + 1, sizeof(bool));
    if (done == NULL)
        return TN_NOMEM;
    for (int emitted = 0; emitted < n && rc == TN_OK; emitted++) {
        int pick = -1, fallback = -1;
        for (int i = 0; i < n; i++) {
            if (done[i])
                continue;
            bool ready = true;
            for (int e = 0; e < g->nedges && ready; e++)
                if (g->edge_child[e] == i && !done[g->edge_parent[e]])
                    ready = false;
            if (ready && (pick < 0 || strcmp(g->name[i], g->name[pick]) < 0))
                pick = i;
            if (fallback < 0 || strcmp(g->name[i], g->name[fallback]) < 0)
                fallback = i;
        }
        if (pick < 0)
            pick = fallback;
        done[pick] = true;
        rc = fn(ctx, g->name[pick]);
    }
    free(done);
    return rc;
}

/* db_describe_tables' pairs, kept until every table is in the graph (an edge needs both). */
struct table_pairs {
    table_graph *g;
    char **pairs;
    int npairs, cap;
};

static int collect_pair(void *ctx, const char *child, const char *parent)
{
    struct table_pairs *tp = ctx;
    int rc = graph_add_table(tp->g, child);
    if (rc != TN_OK || parent == NULL)
        return rc;
    if (tp->npairs + 2 > tp->cap) {
        int cap = tp->cap ? tp->cap * 2 : 32;
        char **np = realloc(tp->pairs, (size_t)cap * sizeof(*np));
        if (np == NULL)
            return TN_NOMEM;
        tp->pairs = np;
        tp->cap = cap;
    }
    tp->pairs[tp->npairs] = strdup(child);
    tp->pairs[tp->npairs + 1] = strdup(parent);
    tp->npairs += 2;
    return tp->pairs[tp->npairs - 2] == NULL || tp->pairs[tp->npairs - 1] == NULL ? TN_NOMEM
                                                                                : TN_OK;
}

int target_tables(tn_db *db, const storage_target *t, int (*fn)(void *ctx, const char *table),
                  void *ctx)
{
    if (db == NULL || fn == NULL)
        return db != NULL ? db_set_error(db, TN_INVALID, "no callback") : TN_INVALID;
    char why[DB_ERRLEN];
    int rc = check_target(t, why, sizeof(why));
    if (rc != TN_OK)
        return db_set_error(db, rc, "%s", why);
    bool sqlite = strcmp(tn_db_backend(db), "sqlite") == 0;
    if (sqlite != (t->kind == TARGET_SQLITE))
        return db_set_error(db, TN_INVALID, "the connection is not of the target's backend");

    table_graph g = {0};
    struct table_pairs tp = {.g = &g};
    /* The schema target_tables lists: the tenant's own, or public in its own database. */
    rc = db_describe_tables(db, sqlite ? NULL : t->kind == TARGET_PG_SCHEMA ? t->name : "public",
                            collect_pair, &tp);
    for (int i = 0; rc == TN_OK && i < tp.npairs; i += 2)   /* SQLite keeps the DDL's spelling */
        rc = graph_add_edge(&g, graph_find(&g, tp.pairs[i], false),
                            graph_find(&g, tp.pairs[i + 1], sqlite));
    for (int i = 0; i < tp.npairs; i++)
        free(tp.pairs[i]);
    free(tp.pairs);
    if (rc == TN_NOMEM)
        db_set_error(db, rc, "out of memory");
    else if (rc == TN_OK)
        rc = graph_emit(&g, fn, ctx);
    graph_free(&g);
    return rc;
}

/*
 * registry.c — the tenant registry over the storage driver layer (see registry.h).
 *
 * The SQL is the same for both backends: the schema is one text with a small dialect map
 * (the id column, and where the tables live: PostgreSQL schema "tenancy", this connection's
 * schema scope; the connection is the registry's own and is never lent to
 * tenant code). All statements are parameterized. Must not: scan the tenants table outside
 * registry_list's paged query, change anything outside a transaction, or create or read the
 * tables of other modules kept in the same database (the admin panel's: admin/sessions.c).
 */
#include "core/first.h"
#include "tenancy/registry.h"
#include "core/arena.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/log.h"
#include "storage/db.h"
#include "tenancy/gen.h"
#include "tenancy/lookup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct registry {
    tn_db *db;
    bool pg;
    gen_map *gen;
    bool gen_writable;      /* gen is mapped read-write: only such a map may be bumped */
    int64_t gen_retry_ms;   /* no new attempt to map a missing file before */
    const char *gen_path;
    char gen_path_buf[512];
    char key_text[512];     /* registry_key_revoke's *out: its slug, prefix and label */
    bool jobs_ready;        /* the job tables were found or made on this connection */
    buf jobs_text;          /* the job store's records' strings (registry_jobs_text) */
};

/* Limits shared by create and set_setting. */
#define NAME_MAX_BYTES 200
#define SETTING_KEY_MAX 128
#define SETTING_VALUE_MAX 8192
#define MAX_WORKERS_MAX 100000

#define TENANT_COLS                                                                          \
    "t.id, t.slug, t.name, t.state, t.placement, t.storage, t.max_workers, t.created_at, "    \
    "t.updated_at, t.settings"

/* PostgreSQL: the schema the registry's tables live in (this connection's search_path). */
#define PG_SCHEMA "tenancy"

/* Tenants' API keys (tenancy/keys.h): only the token's SHA-256 and a prefix to show, never
 * the token. A table added after the registry's first layout: registry_init makes it with
 * the rest, and a registry made before gets it from `tenancy init` run again or from its
 * first registry_key_create (keys_prepare), so an upgraded host needs no step of its own.
 * Until then the key reads answer "no keys" (keys_missing). Removed with its tenant (ON
 * DELETE CASCADE: SQLite connections run with foreign_keys on, storage/sqlite.c). */
#define KEYS_SCHEMA                                                                          \
    "CREATE TABLE IF NOT EXISTS @ns@api_keys ("                                              \
    " id @id@,"                                                                              \
    " tenant_id BIGINT NOT NULL REFERENCES @ns@tenants(id) ON DELETE CASCADE,"              \
    " prefix TEXT NOT NULL,"                                                                 \
    " token_hash TEXT NOT NULL UNIQUE,"                                                      \
    " read_only INTEGER NOT NULL DEFAULT 0,"                                                 \
    " label TEXT NOT NULL DEFAULT '',"                                                       \
    " created_at BIGINT NOT NULL,"                                                           \
    " expires_at BIGINT,"                                                                    \
    " revoked_at BIGINT,"                                                                    \
    " last_used_at BIGINT);"                                                                 \
    "CREATE INDEX IF NOT EXISTS api_keys_tenant ON @ns@api_keys(tenant_id, id);"

static const char keys_schema[] = KEYS_SCHEMA;

/* The job store's tables (tenancy/jobs.h, jobs.c), made like api_keys: by registry_init, and
 * on a registry made before them by `tenancy init` run again or the store's first call
 * (registry_jobs_prepare). Central jobs have no tenant (tenant_id NULL); a tenant's go with
 * it (ON DELETE CASCADE), its queue and schedules too. Every index serves one statement of
 * jobs.c, so that none reads more than the rows it returns: claim (a tenant's best queued
 * job; the earliest queued run_at of a tenant), list (by tenant and state, newest first),
 * reap (running jobs by lease_until), recover (by lease), prune (finished, by time). The
 * partial unique index holds a unique key while its job is queued or running; both
 * backends accept it as written, and INSERT ... ON CONFLICT names it by the same terms.
 * job_queues has one row per tenant that ever had a job (tenant_key 0: the central jobs):
 * when it was last served (the round robin), the earliest run_at of its queued jobs (NULL:
 * none queued) and how many of its jobs run; the partial index lists only the queues with
 * queued jobs, in turn order. job_hosts has a row per tenancyd whose job workers run (its
 * host key): whether an app of theirs has a job handler, and when they last said so
 * (jobs.hooks = auto reads it). */
#define JOBS_SCHEMA                                                                          \
    "CREATE TABLE IF NOT EXISTS @ns@jobs ("                                                  \
    " id @id@,"                                                                              \
    " tenant_id BIGINT REFERENCES @ns@tenants(id) ON DELETE CASCADE,"                       \
    " app TEXT NOT NULL DEFAULT '',"                                                         \
    " name TEXT NOT NULL,"                                                                   \
    " payload TEXT NOT NULL DEFAULT '',"                                                     \
    " state TEXT NOT NULL DEFAULT 'queued',"                                                 \
    " priority INTEGER NOT NULL DEFAULT 0,"                                                  \
    " unique_key TEXT,"                                                                      \
    " attempts INTEGER NOT NULL DEFAULT 0,"                                                  \
    " max_attempts INTEGER NOT NULL,"                                                        \
    " timeout_ms INTEGER NOT NULL,"                                                          \
    " schedule_id BIGINT,"                                                                   \
    " run_at BIGINT NOT NULL,"                                                               \
    " created_at BIGINT NOT NULL,"                                                           \
    " started_at BIGINT,"                                                                    \
    " finished_at BIGINT,"                                                                   \
    " lease TEXT,"                                                                           \
    " lease_until BIGINT,"                                                                   \
    " last_error TEXT NOT NULL DEFAULT '',"                                                  \
    " progress TEXT NOT NULL DEFAULT '');"                                                   \
    "CREATE INDEX IF NOT EXISTS jobs_claim ON @ns@jobs(tenant_id, state, priority DESC, id);" \
    "CREATE INDEX IF NOT EXISTS jobs_next ON @ns@jobs(tenant_id, state, run_at);"           \
    "CREATE INDEX IF NOT EXISTS jobs_tenant_list ON @ns@jobs(tenant_id, state, id);"        \
    "CREATE INDEX IF NOT EXISTS jobs_state_list ON @ns@jobs(state, id);"                    \
    "CREATE INDEX IF NOT EXISTS jobs_expiry ON @ns@jobs(state, lease_until);"               \
    "CREATE INDEX IF NOT EXISTS jobs_finished ON @ns@jobs(state, finished_at);"             \
    "CREATE INDEX IF NOT EXISTS jobs_lease ON @ns@jobs(lease);"                             \
    "CREATE INDEX IF NOT EXISTS jobs_hooks ON @ns@jobs(tenant_id, id)"                       \
    " WHERE app = '*' AND state IN ('queued', 'running');"                                  \
    "CREATE UNIQUE INDEX IF NOT EXISTS jobs_unique ON @ns@jobs((COALESCE(tenant_id, 0)),"    \
    " unique_key) WHERE unique_key IS NOT NULL AND state IN ('queued', 'running');"          \
    "CREATE TABLE IF NOT EXISTS @ns@job_queues ("                                            \
    " tenant_key BIGINT PRIMARY KEY,"                                                        \
    " tenant_id BIGINT REFERENCES @ns@tenants(id) ON DELETE CASCADE,"                       \
    " served_at BIGINT NOT NULL DEFAULT 0,"                                                  \
    " next_run_at BIGINT,"                                                                   \
    " running INTEGER NOT NULL DEFAULT 0);"                                                  \
    "CREATE INDEX IF NOT EXISTS job_queues_turn ON @ns@job_queues(served_at, tenant_key)"    \
    " WHERE next_run_at IS NOT NULL;"                                                        \
    "CREATE INDEX IF NOT EXISTS job_queues_next ON @ns@job_queues(next_run_at);"            \
    "CREATE INDEX IF NOT EXISTS job_queues_tenant ON @ns@job_queues(tenant_id);"            \
    "CREATE TABLE IF NOT EXISTS @ns@job_schedules ("                                         \
    " id @id@,"                                                                              \
    " tenant_id BIGINT REFERENCES @ns@tenants(id) ON DELETE CASCADE,"                       \
    " app TEXT NOT NULL DEFAULT '',"                                                         \
    " name TEXT NOT NULL,"                                                                   \
    " cron TEXT NOT NULL,"                                                                   \
    " payload TEXT NOT NULL DEFAULT '',"                                                     \
    " next_run_at BIGINT NOT NULL,"                                                          \
    " last_run_at BIGINT,"                                                                   \
    " created_at BIGINT NOT NULL,"                                                           \
    " updated_at BIGINT NOT NULL);"                                                          \
    "CREATE UNIQUE INDEX IF NOT EXISTS job_schedules_name ON"                                \
    " @ns@job_schedules((COALESCE(tenant_id, 0)), app, name);"                              \
    "CREATE INDEX IF NOT EXISTS job_schedules_due ON @ns@job_schedules(next_run_at);"       \
    "CREATE INDEX IF NOT EXISTS job_schedules_tenant ON @ns@job_schedules(tenant_id, id);"   \
    "CREATE TABLE IF NOT EXISTS @ns@job_hosts ("                                             \
    " host TEXT PRIMARY KEY,"                                                                \
    " worker TEXT NOT NULL,"                                                                 \
    " hooks INTEGER NOT NULL,"                                                               \
    " seen_at BIGINT NOT NULL);"

static const char jobs_schema[] = JOBS_SCHEMA;

/* The registry's tables, written once for both backends. A word between '@' is the
 * dialect's (dialect_words below): the few things the two spell differently. Everything
 * else uses TEXT, INTEGER and BIGINT, alike in both, so the two registries have the same
 * tables and columns (tests/unit/tenancy/check_registry.c compares their catalogs). Only
 * IF NOT EXISTS statements: `tenancy init` may run again on a registry of any earlier
 * layout. A column added to a table later also needs a step that adds it to the registries
 * made before (CREATE TABLE IF NOT EXISTS leaves an existing table as it is). */
static const char registry_schema[] =
    "@create schema@"
    "CREATE TABLE IF NOT EXISTS @ns@tenancy_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS @ns@tenants ("
    " id @id@,"
    " slug TEXT NOT NULL UNIQUE,"
    " name TEXT NOT NULL,"
    " state TEXT NOT NULL DEFAULT 'active',"
    " placement TEXT NOT NULL DEFAULT 'sqlite',"
    " storage TEXT NOT NULL DEFAULT '',"
    " settings TEXT NOT NULL DEFAULT '{}',"
    " max_workers INTEGER NOT NULL DEFAULT 0,"
    " migration_version TEXT NOT NULL DEFAULT '',"
    " last_error TEXT NOT NULL DEFAULT '',"
    " created_at BIGINT NOT NULL,"
    " updated_at BIGINT NOT NULL,"
    " deleted_at BIGINT);"
    "CREATE TABLE IF NOT EXISTS @ns@domains ("
    " domain TEXT PRIMARY KEY,"
    " tenant_id BIGINT NOT NULL REFERENCES @ns@tenants(id) ON DELETE CASCADE,"
    " is_primary INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX IF NOT EXISTS domains_tenant ON @ns@domains(tenant_id);"
    "CREATE INDEX IF NOT EXISTS tenants_state ON @ns@tenants(state, slug);"
    KEYS_SCHEMA
    JOBS_SCHEMA
    "INSERT INTO @ns@tenancy_meta (key, value) VALUES ('schema_version', '1') "
    " ON CONFLICT (key) DO NOTHING;";

/* The dialect map: each word of the schema in SQLite's and PostgreSQL's spelling. */
static const struct dialect_word {
    const char *word, *sqlite, *pg;
} dialect_words[] = {
    /* where the tables are created: PostgreSQL gives the registry a schema of its own */
    {"@create schema@", "", "CREATE SCHEMA IF NOT EXISTS " PG_SCHEMA ";"},
    {"@ns@", "", PG_SCHEMA "."},
    /* a table's own 64-bit id, given by the database; with AUTOINCREMENT SQLite never hands
     * out a deleted row's id again, as a PostgreSQL sequence does not */
    {"@id@", "INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY"},
};

/* The schema in one backend's spelling, into b. TN_OK, TN_NOMEM, or TN_INVALID for an '@'
 * that starts no word of the map (a mistake in the text above). */
static int schema_for(bool pg, const char *text, buf *b)
{
    for (const char *p = text; *p != '\0';) {
        const char *at = strchr(p, '@');
        if (at == NULL) {
            buf_puts(b, p);
            break;
        }
        buf_append(b, p, (size_t)(at - p));
        const struct dialect_word *w = NULL;
        for (size_t i = 0; w == NULL && i < TN_ARRAY_LEN(dialect_words); i++)
            if (strncmp(at, dialect_words[i].word, strlen(dialect_words[i].word)) == 0)
                w = &dialect_words[i];
        if (w == NULL)
            return TN_INVALID;
        buf_puts(b, pg ? w->pg : w->sqlite);
        p = at + strlen(w->word);
    }
    return b->oom ? TN_NOMEM : TN_OK;
}

/* The session every registry connection runs in. PostgreSQL: the registry's tables live in
 * schema "tenancy", this connection's scope (db_set_scope): the driver sends it with every
 * transaction, never on the session, because behind PgBouncer in transaction mode the
 * server session is another client's between two of our transactions, and a search_path
 * left there (by the next client, or reset by it) would send the registry's unqualified
 * statements to another schema's tables, or to none. SQLite: temporary storage in memory.
 * A statement with RETURNING (a job's enqueue) keeps its rows in a temporary table, which
 * SQLite otherwise puts in a file of its own in /var/tmp;
 * in a transaction of many such statements (a migration wave's batch of hooks) that file
 * took a page write for every page each statement touched: 6,000 writes for 256 hooks,
 * against 160 for the same inserts without it. */
static int set_session(registry *r)
{
    if (!r->pg)
        return tn_db_exec(r->db, "PRAGMA temp_store = MEMORY", 0, NULL);
    return db_set_scope(r->db, PG_SCHEMA, NULL);
}

/* After an I/O error: roll back or reconnect, then restore the session. */
static void reconnect(registry *r)
{
    registry_reconnect(r);
}

void registry_reconnect(registry *r)
{
    if (db_reset(r->db) != TN_OK || set_session(r) != TN_OK)
        log_warn("registry: reconnect failed: %s", tn_db_error(r->db));
}

int registry_open(const char *uri, const char *gen_path, registry **out, char *err,
                  size_t errlen)
{
    *out = NULL;
    registry *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    }
    db_options opt = {.busy_timeout_ms = 5000};
    int rc = db_open(uri, &opt, &r->db, err, errlen);
    if (rc != TN_OK) {
        free(r);
        return rc;
    }
    r->pg = strcmp(tn_db_backend(r->db), "postgres") == 0;
    rc = set_session(r);
    if (rc != TN_OK) {
        rc = tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
        db_close(r->db);
        free(r);
        return rc;
    }
    if (gen_path != NULL) {
        snprintf(r->gen_path_buf, sizeof(r->gen_path_buf), "%s", gen_path);
        r->gen_path = r->gen_path_buf;
    }
    *out = r;
    return TN_OK;
}

int registry_defer_sync(registry *r, char *err, size_t errlen)
{
    int rc = db_defer_sync(r->db, true);
    if (rc != TN_OK)
        rc = tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
    return rc;
}

int registry_flush(registry *r, char *err, size_t errlen)
{
    int rc = db_flush(r->db);
    if (rc != TN_OK)
        rc = tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
    return rc;
}

void registry_close(registry *r)
{
    if (r == NULL)
        return;
    db_close(r->db);
    gen_close(r->gen);
    buf_free(&r->jobs_text);
    free(r);
}

tn_db *registry_db(registry *r) { return r->db; }

int registry_notify(registry *r, const char *channel, const char *payload)
{
    if (!r->pg)
        return TN_DECLINED;
    const char *p[] = {channel, payload};
    return tn_db_exec(r->db, "SELECT pg_notify($1, $2)", 2, p);
}

/* Map the generation file on first use (readers tolerate its absence: generation 0). A
 * writer that finds a read-only map (registry_generation ran first) maps it again
 * read-write: bumping through a PROT_READ mapping would crash the process. */
static TN_HOT gen_map *gen_of(registry *r, bool writable)
{
    if (r->gen_path == NULL)
        return NULL;
    if (r->gen != NULL && (r->gen_writable || !writable))
        return r->gen;
    /* Readers ask on every request: while the file is missing, try again once a second
     * rather than paying an open() per request. */
    int64_t now = clock_mono_ms();
    if (!writable && r->gen == NULL && now < r->gen_retry_ms)
        return NULL;
    char e[256];
    gen_map *g = NULL;
    if (gen_open(r->gen_path, writable, writable, &g, e, sizeof(e)) != TN_OK) {
        if (writable)
            log_warn("registry: generation file: %s", e);
        else
            r->gen_retry_ms = now + 1000;
        return r->gen;   /* keep a read-only map rather than none */
    }
    gen_close(r->gen);
    r->gen = g;
    r->gen_writable = writable;
    return r->gen;
}

TN_HOT uint64_t registry_generation(void *ctx)
{
    gen_map *g = gen_of(ctx, false);
    return g ? gen_read(g) : 0;
}

int registry_init(registry *r, char *err, size_t errlen)
{
    buf sql = BUF_INIT;
    int rc = schema_for(r->pg, registry_schema, &sql);
    if (rc != TN_OK) {
        rc = tn_errf(err, errlen, rc, "registry: %s", rc == TN_NOMEM ? "out of memory"
                                                      : "the schema has a word the dialects lack");
        goto done;
    }
    rc = db_exec_script(r->db, sql.p);
    if (rc != TN_OK) {
        rc = tn_errf(err, errlen, rc, "registry: cannot create the tables: %s",
                     tn_db_error(r->db));
        goto done;
    }
    if (r->gen_path != NULL && (gen_of(r, true) == NULL || !r->gen_writable))
        rc = tn_errf(err, errlen, TN_IO, "registry: cannot create the generation file %s",
                     r->gen_path);
done:
    buf_free(&sql);
    return rc;
}

int registry_ready(registry *r, char *err, size_t errlen)
{
    char v[32];
    int rc = db_query_value(r->db, v, sizeof(v),
                            "SELECT value FROM tenancy_meta WHERE key = 'schema_version'", 0, NULL);
    if (rc == TN_OK)
        return TN_OK;
    if (rc == TN_IO) {
        return tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
    }
    return tn_errf(err, errlen, TN_NOTFOUND,
                   "the registry is not initialised (run 'tenancy init')");
}

/* After a committed change: every worker of this host and (PostgreSQL) every other host. */
static void changed(registry *r)
{
    gen_map *g = gen_of(r, true);
    if (g != NULL)
        gen_bump(g);
    if (r->pg) {
        const char *p[] = {"tenancy_registry", "changed"};
        if (tn_db_exec(r->db, "SELECT pg_notify($1, $2)", 2, p) != TN_OK)
            log_warn("registry: NOTIFY failed: %s", tn_db_error(r->db));
    }
}

static int64_t now_s(void) { return (int64_t)time(NULL); }

static tenant_rec *row_to_rec(tn_rows *rows);

/* Read every row of a result into an array of heap objects that take makes (NULL: out of
 * memory), and free the result. The caller frees each object and the array, also on error
 * (the objects made before the error are there). */
static int collect_rows(tn_rows *rows, void *(*take)(tn_rows *), void ***out, int *count)
{
    int cap = 64, n = 0;
    void **v = malloc((size_t)cap * sizeof(*v));
    int rc = v != NULL ? TN_OK : TN_NOMEM;
    while (rc == TN_OK && (rc = tn_rows_next(rows)) == TN_OK) {
        if (n == cap) {
            void **nv = realloc(v, (size_t)cap * 2 * sizeof(*v));
            if (nv == NULL) {
                rc = TN_NOMEM;
                break;
            }
            v = nv;
            cap *= 2;
        }
        if ((v[n] = take(rows)) == NULL)
            rc = TN_NOMEM;
        else
            n++;
    }
    tn_rows_free(rows);
    *out = v;
    *count = n;
    return rc == TN_DONE ? TN_OK : rc;
}

static void *take_rec(tn_rows *rows) { return row_to_rec(rows); }
static void *take_slug(tn_rows *rows) { return strdup(tn_rows_get(rows, 0)); }

static tenant_rec *row_to_rec(tn_rows *rows)
{
    const char *state = tn_rows_get(rows, 3);
    int st = state ? tenant_state_parse(state) : -1;
    return tenant_rec_new(atoll(tn_rows_get(rows, 0)), tn_rows_get(rows, 1), tn_rows_get(rows, 2),
                          st < 0 ? TENANT_SUSPENDED : st, tn_rows_get(rows, 4),
                          tn_rows_get(rows, 5), atoi(tn_rows_get(rows, 6) ? tn_rows_get(rows, 6) : "0"),
                          atoll(tn_rows_get(rows, 7) ? tn_rows_get(rows, 7) : "0"),
                          atoll(tn_rows_get(rows, 8) ? tn_rows_get(rows, 8) : "0"),
                          tn_rows_get(rows, 9));
}

int registry_fetch(void *ctx, int kind, const char *key, tenant_rec **out)
{
    registry *r = ctx;
    *out = NULL;
    const char *sql = kind == LK_DOMAIN
                          ? "SELECT " TENANT_COLS " FROM domains d JOIN tenants t ON t.id = d.tenant_id"
                            " WHERE d.domain = $1"
                          : "SELECT " TENANT_COLS " FROM tenants t WHERE t.slug = $1";
    const char *p[] = {key};
    tn_rows *rows = NULL;
    int rc = tn_db_query(r->db, &rows, sql, 1, p);
    if (rc != TN_OK) {
        log_error("registry: lookup of '%s' failed: %s", key, tn_db_error(r->db));
        if (rc == TN_IO)
            reconnect(r);
        return rc;
    }
    rc = tn_rows_next(rows);
    if (rc == TN_OK) {
        *out = row_to_rec(rows);
        rc = *out ? TN_OK : TN_NOMEM;
    } else if (rc == TN_DONE) {
        rc = TN_NOTFOUND;
    }
    tn_rows_free(rows);
    return rc;
}

/* Run fn inside one transaction; commit on TN_OK, roll back otherwise. */
static int run_tx(registry *r, int (*fn)(registry *, void *, char *, size_t), void *arg,
                  char *err, size_t errlen, bool bump)
{
    int rc = tn_db_begin(r->db);
    if (rc != TN_OK) {
        return tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
    }
    rc = fn(r, arg, err, errlen);
    if (rc == TN_OK) {
        rc = tn_db_commit(r->db);
        if (rc != TN_OK)
            rc = tn_errf(err, errlen, rc, "registry: commit failed: %s", tn_db_error(r->db));
    } else {
        tn_db_rollback(r->db);
    }
    if (rc == TN_OK && bump)
        changed(r);
    else if (rc == TN_IO)
        reconnect(r);
    return rc;
}

static int in_tx(registry *r, int (*fn)(registry *, void *, char *, size_t), void *arg,
                 char *err, size_t errlen)
{
    return run_tx(r, fn, arg, err, errlen, true);
}

static int exec(registry *r, char *err, size_t errlen, const char *sql, int n,
                const char *const *p)
{
    int rc = tn_db_exec(r->db, sql, n, p);
    if (rc != TN_OK && rc != TN_EXISTS)
        rc = tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
    return rc;
}

/* The id of a slug, or TN_NOTFOUND with a sentence. */
static int id_of(registry *r, const char *slug, char *id, size_t idlen, char *err, size_t errlen)
{
    const char *p[] = {slug};
    int rc = db_query_value(r->db, id, idlen, "SELECT id FROM tenants WHERE slug = $1", 1, p);
    if (rc == TN_NOTFOUND)
        rc = tn_errf(err, errlen, rc, "no tenant '%s'", slug);
    else if (rc != TN_OK)
        rc = tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
    return rc;
}


/* ---- settings: the stored form --------------------------------------------------------------
 * A tenant's settings are stored as a flat JSON object whose keys are unique and sorted (byte
 * order) and whose values are all JSON strings (a number or boolean given at create is kept as
 * its text). Create and set_setting both write through settings_write, so the stored text is
 * the same whichever way it was built, and equal settings compare equal as text. */

static bool text_ok(const char *s, bool allow_control)
{
    size_t n = strlen(s);
    if (utf8_valid_prefix(s, n) != n)
        return false;
    for (size_t i = 0; i < n && !allow_control; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return false;
    return true;
}

static int setting_check(const char *key, const char *value, char *err, size_t errlen)
{
    if (key == NULL || key[0] == '\0' || strlen(key) > SETTING_KEY_MAX) {
        return tn_errf(err, errlen, TN_INVALID,
                       "a setting needs a key of 1 to %d bytes", SETTING_KEY_MAX);
    }
    if (!text_ok(key, false)) {
        return tn_errf(err, errlen, TN_INVALID,
                       "invalid setting key: UTF-8 text without control characters");
    }
    if (value != NULL && strlen(value) > SETTING_VALUE_MAX) {
        return tn_errf(err, errlen, TN_INVALID,
                       "the value of setting '%s' is over %d bytes", key, SETTING_VALUE_MAX);
    }
    if (value != NULL && !text_ok(value, true)) {
        return tn_errf(err, errlen, TN_INVALID, "the value of setting '%s' is not UTF-8 text", key);
    }
    return TN_OK;
}

/* s: sorted, unique keys (as settings_parse returns them). */
static int settings_write(const tenant_setting *s, int n, buf *b, char *err, size_t errlen)
{
    buf_putc(b, '{');
    for (int i = 0; i < n; i++) {
        int rc = setting_check(s[i].key, s[i].value, err, errlen);
        if (rc != TN_OK)
            return rc;
        if (i > 0)
            buf_putc(b, ',');
        buf_json_str(b, s[i].key);
        buf_putc(b, ':');
        buf_json_str(b, s[i].value);
    }
    buf_putc(b, '}');
    if (b->oom) {
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    }
    return TN_OK;
}

static void *arena_cb(void *ctx, size_t n) { return arena_alloc(ctx, n); }

/* Any settings JSON the API accepts → the stored form, in b. */
static int settings_canonical(const char *json, buf *b, char *err, size_t errlen)
{
    arena *a = arena_create(4096);
    if (a == NULL) {
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    }
    tenant_setting *s = NULL;
    int n = settings_parse(json, &s, arena_cb, a);
    int rc;
    if (n < 0) {
        rc = tn_errf(err, errlen, TN_INVALID,
                     "settings must be a flat JSON object of strings, numbers and booleans");
    } else {
        rc = settings_write(s, n, b, err, errlen);
    }
    arena_destroy(a);
    return rc;
}

/* ---- domains -------------------------------------------------------------------------------- */

static int owner_of(registry *r, const char *domain, char *owner, size_t ownerlen, char *err,
                    size_t errlen)
{
    const char *q[] = {domain};
    int rc = db_query_value(r->db, owner, ownerlen,
                            "SELECT t.slug FROM domains d JOIN tenants t ON t.id = d.tenant_id "
                            "WHERE d.domain = $1", 1, q);
    if (rc != TN_OK && rc != TN_NOTFOUND)
        rc = tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
    return rc;
}

/* Insert one (normalised) domain for tenant `id`, inside the caller's transaction. The owner
 * is looked up BEFORE the insert: on PostgreSQL a failed statement aborts the transaction, so
 * nothing could be asked after it. The unique key stays the guard: a writer that took the
 * domain between the two statements still makes the insert fail (TN_EXISTS). */
static int insert_domain(registry *r, const char *domain, const char *id, bool primary,
                         char *err, size_t errlen)
{
    char owner[128];
    int rc = owner_of(r, domain, owner, sizeof(owner), err, errlen);
    if (rc == TN_OK) {
        return tn_errf(err, errlen, TN_EXISTS,
                       "domain '%s' already belongs to '%s'", domain, owner);
    }
    if (rc != TN_NOTFOUND)
        return rc;
    const char *p[] = {domain, id, primary ? "1" : "0"};
    rc = exec(r, err, errlen,
              "INSERT INTO domains (domain, tenant_id, is_primary) VALUES ($1, $2, $3)", 3, p);
    if (rc == TN_EXISTS)
        rc = tn_errf(err, errlen, rc, "domain '%s' is taken", domain);
    return rc;
}

/* A domain as the registry keeps it: normalised, and without a port. */
static int domain_norm(const char *in, char *norm, size_t normlen, char *err, size_t errlen)
{
    if (in == NULL || strchr(in, ':') != NULL || tenant_host_normalise(in, norm, normlen) == 0) {
        return tn_errf(err, errlen, TN_INVALID, "invalid domain '%s'", in ? in : "");
    }
    return TN_OK;
}

/* ---- create --------------------------------------------------------------------------------- */

struct create_arg {
    const registry_new *t;
    const char *settings;     /* the stored form */
    char (*norm)[256];        /* the domains, normalised */
    int64_t id;
};

static int do_create(registry *r, void *arg, char *err, size_t errlen)
{
    struct create_arg *a = arg;
    const registry_new *t = a->t;
    char now[24], mw[16], id[24];
    snprintf(now, sizeof(now), "%lld", (long long)now_s());
    snprintf(mw, sizeof(mw), "%d", t->max_workers);
    const char *p[] = {t->slug, t->name, tenant_state_name(t->state),
                       t->placement ? t->placement : "sqlite", t->storage ? t->storage : "",
                       a->settings, mw, now};
    int rc = exec(r, err, errlen,
                  "INSERT INTO tenants (slug, name, state, placement, storage, settings, "
                  "max_workers, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)",
                  8, p);
    if (rc == TN_EXISTS) {
        return tn_errf(err, errlen, rc, "slug '%s' is taken", t->slug);
    }
    if (rc != TN_OK)
        return rc;
    rc = id_of(r, t->slug, id, sizeof(id), err, errlen);
    if (rc != TN_OK)
        return rc;
    a->id = atoll(id);
    for (int i = 0; i < t->ndomains; i++) {
        rc = insert_domain(r, a->norm[i], id, i == 0, err, errlen);
        if (rc != TN_OK)
            return rc;
    }
    return TN_OK;
}

int registry_create(registry *r, const registry_new *t, int64_t *id, char *err, size_t errlen)
{
    if (!tenant_slug_valid(t->slug)) {
        return tn_errf(err, errlen, TN_INVALID,
                       "invalid slug '%s': use 1-63 of a-z, 0-9 and '-', not at the ends",
                       t->slug ? t->slug : "");
    }
    if (t->name == NULL || t->name[0] == '\0' || strlen(t->name) > NAME_MAX_BYTES) {
        return tn_errf(err, errlen, TN_INVALID,
                       "a tenant needs a name of 1 to %d bytes", NAME_MAX_BYTES);
    }
    /* The name is shown in terminals, logs and the admin panel: text only. */
    if (!text_ok(t->name, false)) {
        return tn_errf(err, errlen, TN_INVALID,
                       "invalid name for '%s': UTF-8 text without control characters",
                       t->slug);
    }
    if (t->state != TENANT_ACTIVE && t->state != TENANT_PROVISIONING) {
        return tn_errf(err, errlen, TN_INVALID, "a new tenant is active or provisioning, not %s",
                       tenant_state_name(t->state));
    }
    if (t->max_workers < 0 || t->max_workers > MAX_WORKERS_MAX) {
        return tn_errf(err, errlen, TN_INVALID,
                       "max_workers must be between 0 and %d", MAX_WORKERS_MAX);
    }
    if (t->ndomains < 0 || (t->ndomains > 0 && t->domains == NULL)) {
        return tn_errf(err, errlen, TN_INVALID, "registry_create: bad domain list");
    }
    char (*norm)[256] = t->ndomains > 0 ? calloc((size_t)t->ndomains, sizeof(*norm)) : NULL;
    if (t->ndomains > 0 && norm == NULL) {
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    }
    buf settings = BUF_INIT;
    int rc = TN_OK;
    for (int i = 0; i < t->ndomains && rc == TN_OK; i++) {
        rc = domain_norm(t->domains[i], norm[i], sizeof(norm[i]), err, errlen);
        for (int j = 0; j < i && rc == TN_OK; j++)
            if (strcmp(norm[i], norm[j]) == 0) {
                rc = tn_errf(err, errlen, TN_INVALID, "domain '%s' is given twice", norm[i]);
            }
    }
    if (rc == TN_OK)
        rc = settings_canonical(t->settings ? t->settings : "{}", &settings, err, errlen);
    if (rc == TN_OK) {
        struct create_arg a = {t, settings.p, norm, 0};
        rc = in_tx(r, do_create, &a, err, errlen);
        if (rc == TN_OK && id != NULL)
            *id = a.id;
    }
    buf_free(&settings);
    free(norm);
    return rc;
}

/* ---- updates -------------------------------------------------------------------------------- */

struct upd_arg {
    const char *sql;
    int n;
    const char *p[6];
    const char *slug;
};

static int do_update(registry *r, void *arg, char *err, size_t errlen)
{
    struct upd_arg *a = arg;
    int rc = exec(r, err, errlen, a->sql, a->n, a->p);
    if (rc == TN_OK && tn_db_changes(r->db) == 0) {
        return tn_errf(err, errlen, TN_NOTFOUND, "no tenant '%s'", a->slug);
    }
    return rc;
}

int registry_set_state(registry *r, const char *slug, int state, char *err, size_t errlen)
{
    if (state < 0 || state >= TENANT_NSTATES) {
        return tn_errf(err, errlen, TN_INVALID, "invalid state");
    }
    char now[24];
    snprintf(now, sizeof(now), "%lld", (long long)now_s());
    /* deleted_at is computed here, not with CASE in SQL: PostgreSQL deduces one type per
     * parameter, and "$2" cannot be both the bigint of updated_at and a CASE result. */
    struct upd_arg a = {"UPDATE tenants SET state = $1, updated_at = $2, deleted_at = $3 "
                        "WHERE slug = $4",
                        4, {tenant_state_name(state), now,
                            state == TENANT_DELETING ? now : NULL, slug}, slug};
    return in_tx(r, do_update, &a, err, errlen);
}

int registry_set_storage(registry *r, const char *slug, const char *placement,
                         const char *storage, char *err, size_t errlen)
{
    if (placement == NULL || storage == NULL) {
        return tn_errf(err, errlen, TN_INVALID,
                       "registry_set_storage: placement and storage are required");
    }
    char now[24];
    snprintf(now, sizeof(now), "%lld", (long long)now_s());
    struct upd_arg a = {"UPDATE tenants SET placement = $1, storage = $2, updated_at = $3 "
                        "WHERE slug = $4",
                        4, {placement, storage, now, slug}, slug};
    return in_tx(r, do_update, &a, err, errlen);
}

int registry_set_max_workers(registry *r, const char *slug, int max_workers, char *err,
                             size_t errlen)
{
    if (max_workers < 0 || max_workers > MAX_WORKERS_MAX) {
        return tn_errf(err, errlen, TN_INVALID,
                       "max_workers must be between 0 and %d", MAX_WORKERS_MAX);
    }
    char now[24], mw[16];
    snprintf(now, sizeof(now), "%lld", (long long)now_s());
    snprintf(mw, sizeof(mw), "%d", max_workers);
    struct upd_arg a = {"UPDATE tenants SET max_workers = $1, updated_at = $2 WHERE slug = $3",
                        3, {mw, now, slug}, slug};
    return in_tx(r, do_update, &a, err, errlen);
}

struct setting_arg {
    const char *slug, *key, *value;
};

static int do_setting(registry *r, void *arg, char *err, size_t errlen)
{
    struct setting_arg *a = arg;
    const char *p[] = {a->slug};
    char cur[65536];
    int rc = db_query_value(r->db, cur, sizeof(cur), "SELECT settings FROM tenants WHERE slug = $1",
                            1, p);
    if (rc == TN_NOTFOUND) {
        return tn_errf(err, errlen, rc, "no tenant '%s'", a->slug);
    }
    if (rc != TN_OK) {
        return tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
    }
    tenant_rec *t = tenant_rec_new(0, a->slug, "x", 0, "", "", 0, 0, 0, cur);
    if (t == NULL) {
        return tn_errf(err, errlen, TN_INVALID,
                       "the stored settings of '%s' are not a flat JSON object", a->slug);
    }
    /* The new list: the old one with the key replaced, inserted in order, or removed. */
    tenant_setting *s = malloc(((size_t)t->nsettings + 1) * sizeof(*s));
    if (s == NULL) {
        free(t);
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    }
    int n = 0;
    bool found = false, placed = a->value == NULL;
    for (int i = 0; i < t->nsettings; i++) {
        int c = strcmp(a->key, t->settings[i].key);
        if (c == 0)
            found = true;
        if (!placed && c <= 0) {
            s[n++] = (tenant_setting){a->key, a->value};
            placed = true;
        }
        if (c != 0)
            s[n++] = t->settings[i];
    }
    if (!placed)
        s[n++] = (tenant_setting){a->key, a->value};
    if (a->value == NULL && !found) {
        rc = tn_errf(err, errlen, TN_NOTFOUND, "tenant '%s' has no setting '%s'", a->slug, a->key);
    } else {
        buf b = BUF_INIT;
        rc = settings_write(s, n, &b, err, errlen);
        if (rc == TN_OK) {
            char now[24];
            snprintf(now, sizeof(now), "%lld", (long long)now_s());
            const char *u[] = {b.p, now, a->slug};
            rc = exec(r, err, errlen,
                      "UPDATE tenants SET settings = $1, updated_at = $2 WHERE slug = $3", 3, u);
        }
        buf_free(&b);
    }
    free(s);
    free(t);
    return rc;
}

int registry_set_setting(registry *r, const char *slug, const char *key, const char *value,
                         char *err, size_t errlen)
{
    int rc = setting_check(key, value, err, errlen);
    if (rc != TN_OK)
        return rc;
    struct setting_arg a = {slug, key, value};
    return in_tx(r, do_setting, &a, err, errlen);
}

struct domain_arg {
    const char *slug;
    const char *domain;
    bool primary;
};

static int do_domain_add(registry *r, void *arg, char *err, size_t errlen)
{
    struct domain_arg *a = arg;
    char id[24], owner[128], n[32];
    int rc = id_of(r, a->slug, id, sizeof(id), err, errlen);
    if (rc != TN_OK)
        return rc;
    const char *p0[] = {id};
    rc = owner_of(r, a->domain, owner, sizeof(owner), err, errlen);
    if (rc == TN_OK && (!a->primary || strcmp(owner, a->slug) != 0)) {
        return tn_errf(err, errlen, TN_EXISTS,
                       "domain '%s' already belongs to '%s'", a->domain, owner);
    }
    if (rc != TN_OK && rc != TN_NOTFOUND)
        return rc;
    bool mine = rc == TN_OK;   /* the tenant's own domain, to be made primary */
    /* The first domain of a tenant is its primary one. */
    bool primary = a->primary;
    if (!primary) {
        rc = db_query_value(r->db, n, sizeof(n),
                            "SELECT count(*) FROM domains WHERE tenant_id = $1 AND is_primary = 1",
                            1, p0);
        if (rc != TN_OK) {
            return tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
        }
        primary = atoll(n) == 0;
    }
    if (primary) {
        rc = exec(r, err, errlen, "UPDATE domains SET is_primary = 0 WHERE tenant_id = $1", 1, p0);
        if (rc != TN_OK)
            return rc;
    }
    if (mine) {
        const char *p[] = {a->domain};
        return exec(r, err, errlen, "UPDATE domains SET is_primary = 1 WHERE domain = $1", 1, p);
    }
    return insert_domain(r, a->domain, id, primary, err, errlen);
}

int registry_domain_add(registry *r, const char *slug, const char *domain, bool primary,
                        char *err, size_t errlen)
{
    char norm[256];
    int rc = domain_norm(domain, norm, sizeof(norm), err, errlen);
    if (rc != TN_OK)
        return rc;
    struct domain_arg a = {slug, norm, primary};
    return in_tx(r, do_domain_add, &a, err, errlen);
}

static int do_domain_remove(registry *r, void *arg, char *err, size_t errlen)
{
    struct domain_arg *a = arg;
    const char *p[] = {a->domain};
    tn_rows *rows = NULL;
    int rc = tn_db_query(r->db, &rows, "SELECT tenant_id, is_primary FROM domains WHERE domain = $1",
                         1, p);
    if (rc != TN_OK) {
        return tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
    }
    char id[24] = "";
    bool was_primary = false;
    rc = tn_rows_next(rows);
    if (rc == TN_OK) {
        snprintf(id, sizeof(id), "%s", tn_rows_get(rows, 0));
        was_primary = atoi(tn_rows_get(rows, 1)) != 0;
    }
    tn_rows_free(rows);
    if (rc == TN_DONE) {
        return tn_errf(err, errlen, TN_NOTFOUND, "no domain '%s'", a->domain);
    }
    if (rc != TN_OK) {
        return tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
    }
    rc = exec(r, err, errlen, "DELETE FROM domains WHERE domain = $1", 1, p);
    if (rc == TN_OK && was_primary) {
        /* The tenant keeps a primary domain while it has any: the first by name. */
        const char *q[] = {id};
        rc = exec(r, err, errlen,
                  "UPDATE domains SET is_primary = 1 WHERE domain = (SELECT domain FROM domains "
                  "WHERE tenant_id = $1 ORDER BY domain LIMIT 1)", 1, q);
    }
    return rc;
}

int registry_domain_remove(registry *r, const char *domain, char *err, size_t errlen)
{
    char norm[256];
    int rc = domain_norm(domain, norm, sizeof(norm), err, errlen);
    if (rc != TN_OK)
        return rc;
    struct domain_arg a = {NULL, norm, false};
    return in_tx(r, do_domain_remove, &a, err, errlen);
}

static int do_purge(registry *r, void *arg, char *err, size_t errlen)
{
    const char *slug = arg;
    char id[24];
    int rc = id_of(r, slug, id, sizeof(id), err, errlen);
    if (rc != TN_OK)
        return rc;
    const char *p[] = {id};
    rc = exec(r, err, errlen, "DELETE FROM domains WHERE tenant_id = $1", 1, p);
    if (rc == TN_OK)
        rc = exec(r, err, errlen, "DELETE FROM tenants WHERE id = $1", 1, p);
    return rc;
}

int registry_purge(registry *r, const char *slug, char *err, size_t errlen)
{
    return in_tx(r, do_purge, (void *)slug, err, errlen);
}

/* ---- reads ---------------------------------------------------------------------------------- */

/* Domains of one tenant into d (at most `max`, primary first), strings in store.
 * The count, or a negative tn_rc. */
static int domains_of(registry *r, int64_t id, registry_domain *d, int max, char *store,
                      size_t storelen)
{
    char ids[24];
    snprintf(ids, sizeof(ids), "%lld", (long long)id);
    const char *p[] = {ids};
    tn_rows *rows = NULL;
    int rc = tn_db_query(r->db, &rows,
                         "SELECT domain, is_primary FROM domains WHERE tenant_id = $1 "
                         "ORDER BY is_primary DESC, domain", 1, p);
    if (rc != TN_OK)
        return rc;
    int n = 0;
    size_t used = 0;
    while (n < max && (rc = tn_rows_next(rows)) == TN_OK) {
        const char *dom = tn_rows_get(rows, 0);
        size_t l = strlen(dom) + 1;
        if (used + l > storelen)
            break;
        memcpy(store + used, dom, l);
        d[n].domain = store + used;
        d[n].primary = atoi(tn_rows_get(rows, 1)) != 0;
        used += l;
        n++;
    }
    tn_rows_free(rows);
    return rc == TN_OK || rc == TN_DONE ? n : rc;
}

int registry_list(registry *r, int state, const char *search, const char *after_slug,
                  int limit, registry_list_fn fn, void *ctx, int64_t *total)
{
    char lim[16], pat[300];
    snprintf(lim, sizeof(lim), "%d", limit > 0 ? limit : 100);
    /* LIKE pattern with the user's text escaped: % and _ match themselves. */
    size_t o = 0;
    pat[o++] = '%';
    for (const char *s = search ? search : ""; *s && o < sizeof(pat) - 3; s++) {
        if (*s == '%' || *s == '_' || *s == '\\')
            pat[o++] = '\\';
        pat[o++] = *s;
    }
    pat[o++] = '%';
    pat[o] = '\0';
    const char *st = state >= 0 ? tenant_state_name(state) : "";
    const char *p[] = {st, pat, after_slug ? after_slug : "", lim};
    /* lower() on both sides: SQLite's LIKE ignores ASCII case and PostgreSQL's does not; this
     * way both backends find the same tenants. */
    const char *where = " WHERE ($1 = '' OR t.state = $1)"
                        " AND (t.slug LIKE lower($2) ESCAPE '\\'"
                        " OR lower(t.name) LIKE lower($2) ESCAPE '\\')";
    if (total != NULL) {
        char q[512], v[32];
        snprintf(q, sizeof(q), "SELECT count(*) FROM tenants t%s", where);
        if (db_query_value(r->db, v, sizeof(v), q, 2, p) == TN_OK)
            *total = atoll(v);
        else
            *total = -1;
    }
    char sql[768];
    snprintf(sql, sizeof(sql), "SELECT " TENANT_COLS " FROM tenants t%s AND t.slug > $3 "
             "ORDER BY t.slug LIMIT $4", where);
    tn_rows *rows = NULL;
    int rc = tn_db_query(r->db, &rows, sql, 4, p);
    if (rc != TN_OK)
        return rc;
    /* Collected first: the per-tenant domain queries need the connection. A collecting
     * error ends the list with that error after the rows already read. */
    void **recs = NULL;
    int n = 0;
    rc = collect_rows(rows, take_rec, &recs, &n);
    for (int i = 0; i < n; i++) {
        if (rc == TN_OK) {
            registry_domain d[64];
            char store[8192];
            const tenant_rec *t = recs[i];
            int nd = domains_of(r, t->id, d, 64, store, sizeof(store));
            rc = nd < 0 ? nd : fn(ctx, t, d, nd);
        }
        free(recs[i]);
    }
    free(recs);
    return rc == TN_DONE ? TN_OK : rc;
}

int registry_show(registry *r, const char *slug, registry_list_fn fn, void *ctx)
{
    tenant_rec *t = NULL;
    int rc = registry_fetch(r, LK_SLUG, slug, &t);
    if (rc != TN_OK)
        return rc;
    registry_domain d[64];
    char store[8192];
    int nd = domains_of(r, t->id, d, 64, store, sizeof(store));
    rc = nd < 0 ? nd : fn(ctx, t, d, nd);
    free(t);
    return rc;
}

/* ---- migrations: each tenant's storage version -------------------------------------------- */

int registry_set_migration(registry *r, const char *slug, const char *version,
                           const char *last_error, char *err, size_t errlen)
{
    /* A batch of one (registry_set_migrations), so the statement is written once. No
     * generation bump: no worker caches these columns, and a migration wave over 10,000
     * tenants must not flush every worker's lookup cache 10,000 times. */
    registry_migration_update u = {slug, version, last_error, TN_OK};
    int rc = registry_set_migrations(r, &u, 1, err, errlen);
    if (rc == TN_OK && u.rc == TN_NOTFOUND) {
        return tn_errf(err, errlen, TN_NOTFOUND, "no tenant '%s'", slug);
    }
    return rc;
}

struct batch_arg {
    registry_migration_update *u;
    int n;
    const char *now;
};

static int do_batch(registry *r, void *arg, char *err, size_t errlen)
{
    struct batch_arg *b = arg;
    for (int i = 0; i < b->n; i++) {
        registry_migration_update *u = &b->u[i];
        const char *p[] = {u->version, u->last_error, b->now, u->slug};
        int rc = exec(r, err, errlen, "UPDATE tenants SET migration_version = $1, "
                                      "last_error = $2, updated_at = $3 WHERE slug = $4",
                      4, p);
        if (rc != TN_OK)
            return rc;
        u->rc = tn_db_changes(r->db) == 0 ? TN_NOTFOUND : TN_OK;
    }
    return TN_OK;
}

int registry_set_migrations(registry *r, registry_migration_update *u, int n, char *err,
                            size_t errlen)
{
    for (int i = 0; i < n; i++)
        if (u[i].slug == NULL || u[i].version == NULL || u[i].last_error == NULL) {
            return tn_errf(err, errlen, TN_INVALID,
                           "registry_set_migrations: slug, version and last_error are "
                           "required");
        }
    char now[24];
    snprintf(now, sizeof(now), "%lld", (long long)now_s());
    struct batch_arg b = {u, n, now};
    return n > 0 ? run_tx(r, do_batch, &b, err, errlen, false) : TN_OK;
}

int registry_provisioned(registry *r, const char *slug, const char *version, int state,
                         char *err, size_t errlen)
{
    if (version == NULL || state < 0 || state >= TENANT_NSTATES) {
        return tn_errf(err, errlen, TN_INVALID,
                       "registry_provisioned: a version and a valid state are required");
    }
    char now[24];
    snprintf(now, sizeof(now), "%lld", (long long)now_s());
    struct upd_arg a = {"UPDATE tenants SET migration_version = $1, last_error = '', state = $2, "
                        "updated_at = $3 WHERE slug = $4",
                        4, {version, tenant_state_name(state), now, slug}, slug};
    return in_tx(r, do_update, &a, err, errlen);
}

#define MIGRATION_COLS \
    "id, slug, name, state, placement, storage, migration_version, last_error"

/* Feed each row of a migration query to fn (which must not use the registry). */
static int migration_rows(registry *r, const char *sql, int n, const char *const *p,
                          registry_migration_fn fn, void *ctx, int *count)
{
    tn_rows *rows = NULL;
    int rc = tn_db_query(r->db, &rows, sql, n, p);
    if (rc != TN_OK) {
        if (rc == TN_IO)
            reconnect(r);
        return rc;
    }
    while ((rc = tn_rows_next(rows)) == TN_OK) {
        const char *st = tn_rows_get(rows, 3);
        int state = st != NULL ? tenant_state_parse(st) : -1;
        registry_migration m = {
            .id = atoll(tn_rows_get(rows, 0) ? tn_rows_get(rows, 0) : "0"),
            .slug = tn_rows_get(rows, 1),
            .name = tn_rows_get(rows, 2),
            .state = state < 0 ? TENANT_SUSPENDED : state,
            .placement = tn_rows_get(rows, 4) ? tn_rows_get(rows, 4) : "",
            .storage = tn_rows_get(rows, 5) ? tn_rows_get(rows, 5) : "",
            .version = tn_rows_get(rows, 6) ? tn_rows_get(rows, 6) : "",
            .last_error = tn_rows_get(rows, 7) ? tn_rows_get(rows, 7) : "",
        };
        if (count != NULL)
            (*count)++;
        rc = fn(ctx, &m);
        if (rc != TN_OK)
            break;
    }
    tn_rows_free(rows);
    return rc == TN_DONE ? TN_OK : rc;
}

int registry_migration_list(registry *r, const char *after_slug, int limit,
                            registry_migration_fn fn, void *ctx, int *count)
{
    char lim[16];
    snprintf(lim, sizeof(lim), "%d", limit > 0 ? limit : 1000);
    const char *p[] = {after_slug ? after_slug : "", lim};
    if (count != NULL)
        *count = 0;
    return migration_rows(r, "SELECT " MIGRATION_COLS " FROM tenants WHERE slug > $1 "
                             "ORDER BY slug LIMIT $2", 2, p, fn, ctx, count);
}

int registry_migration_get(registry *r, const char *slug, registry_migration_fn fn, void *ctx)
{
    const char *p[] = {slug};
    int n = 0;
    int rc = migration_rows(r, "SELECT " MIGRATION_COLS " FROM tenants WHERE slug = $1", 1, p,
                            fn, ctx, &n);
    return rc == TN_OK && n == 0 ? TN_NOTFOUND : rc;
}

int registry_migration_status(registry *r, registry_version_fn fn, void *ctx)
{
    tn_rows *rows = NULL;
    /* One query, whatever the number of tenants: one row per version. */
    int rc = tn_db_query(r->db, &rows,
                         "SELECT migration_version, count(*), "
                         "sum(CASE WHEN last_error <> '' THEN 1 ELSE 0 END) FROM tenants "
                         "WHERE state <> 'deleting' GROUP BY migration_version "
                         "ORDER BY migration_version", 0, NULL);
    if (rc != TN_OK) {
        if (rc == TN_IO)
            reconnect(r);
        return rc;
    }
    while ((rc = tn_rows_next(rows)) == TN_OK) {
        const char *v = tn_rows_get(rows, 0), *n = tn_rows_get(rows, 1),
                   *f = tn_rows_get(rows, 2);
        rc = fn(ctx, v ? v : "", atoll(n ? n : "0"), atoll(f ? f : "0"));
        if (rc != TN_OK)
            break;
    }
    tn_rows_free(rows);
    return rc == TN_DONE ? TN_OK : rc;
}

/* ---- lifecycle (registry.h: move, import, delete with a grace period, purge, check) -------- */

static int64_t i64_or(const char *s, int64_t null_value)
{
    return s != NULL ? strtoll(s, NULL, 10) : null_value;
}

/* State, deleted_at and id of a slug, inside the caller's transaction (or not). */
static int life_row(registry *r, const char *slug, int *state, int64_t *deleted_at,
                    char *id, size_t idlen, char *err, size_t errlen)
{
    const char *p[] = {slug};
    tn_rows *rows = NULL;
    int rc = tn_db_query(r->db, &rows, "SELECT id, state, deleted_at FROM tenants WHERE slug = $1",
                         1, p);
    if (rc != TN_OK) {
        return tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
    }
    rc = tn_rows_next(rows);
    if (rc == TN_OK) {
        if (id != NULL)
            snprintf(id, idlen, "%s", tn_rows_get(rows, 0));
        int st = tn_rows_get(rows, 1) ? tenant_state_parse(tn_rows_get(rows, 1)) : -1;
        *state = st < 0 ? TENANT_SUSPENDED : st;
        *deleted_at = i64_or(tn_rows_get(rows, 2), -1);
    } else if (rc == TN_DONE) {
        rc = tn_errf(err, errlen, TN_NOTFOUND, "no tenant '%s'", slug);
    } else {
        rc = tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
    }
    tn_rows_free(rows);
    return rc;
}

int registry_life_get(registry *r, const char *slug, registry_life *out, char *err,
                      size_t errlen)
{
    memset(out, 0, sizeof(*out));
    const char *p[] = {slug};
    tn_rows *rows = NULL;
    int rc = tn_db_query(r->db, &rows,
                         "SELECT state, updated_at, deleted_at, migration_version FROM tenants "
                         "WHERE slug = $1", 1, p);
    if (rc != TN_OK) {
        rc = tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
        if (rc == TN_IO)
            reconnect(r);
        return rc;
    }
    rc = tn_rows_next(rows);
    if (rc == TN_OK) {
        int st = tn_rows_get(rows, 0) ? tenant_state_parse(tn_rows_get(rows, 0)) : -1;
        out->state = st < 0 ? TENANT_SUSPENDED : st;
        out->updated_at = i64_or(tn_rows_get(rows, 1), 0);
        out->deleted_at = i64_or(tn_rows_get(rows, 2), -1);
        snprintf(out->migration_version, sizeof(out->migration_version), "%s",
                 tn_rows_get(rows, 3) ? tn_rows_get(rows, 3) : "");
    } else if (rc == TN_DONE) {
        rc = tn_errf(err, errlen, TN_NOTFOUND, "no tenant '%s'", slug);
    } else {
        rc = tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
    }
    tn_rows_free(rows);
    return rc;
}

struct cas_arg {
    const char *slug;
    unsigned from;
    int to;
    int was;
};

/* Read the state, check it against the mask, then update only that state: on PostgreSQL a
 * writer that changed it in between makes the UPDATE match nothing (TN_BUSY) rather than be
 * overwritten. */
static int do_cas(registry *r, void *arg, char *err, size_t errlen)
{
    struct cas_arg *a = arg;
    int64_t deleted_at;
    int rc = life_row(r, a->slug, &a->was, &deleted_at, NULL, 0, err, errlen);
    if (rc != TN_OK)
        return rc;
    if (!(a->from & (1u << a->was))) {
        return tn_errf(err, errlen, TN_BUSY,
                       "tenant '%s' is %s", a->slug, tenant_state_name(a->was));
    }
    char now[24];
    snprintf(now, sizeof(now), "%lld", (long long)now_s());
    const char *p[] = {tenant_state_name(a->to), now, a->to == TENANT_DELETING ? now : NULL,
                       a->slug, tenant_state_name(a->was)};
    rc = exec(r, err, errlen,
              "UPDATE tenants SET state = $1, updated_at = $2, deleted_at = $3 "
              "WHERE slug = $4 AND state = $5", 5, p);
    if (rc == TN_OK && tn_db_changes(r->db) == 0) {
        return tn_errf(err, errlen, TN_BUSY, "tenant '%s' changed meanwhile; try again", a->slug);
    }
    return rc;
}

int registry_set_state_if(registry *r, const char *slug, unsigned from, int to, int *was,
                          char *err, size_t errlen)
{
    if (to < 0 || to >= TENANT_NSTATES) {
        return tn_errf(err, errlen, TN_INVALID, "invalid state");
    }
    struct cas_arg a = {slug, from, to, -1};
    int rc = in_tx(r, do_cas, &a, err, errlen);
    if (was != NULL)
        *was = a.was;
    return rc;
}

struct switch_arg {
    const char *slug, *from_placement, *from_storage, *placement, *storage;
    int state;
};

static int do_switch(registry *r, void *arg, char *err, size_t errlen)
{
    struct switch_arg *a = arg;
    char now[24];
    snprintf(now, sizeof(now), "%lld", (long long)now_s());
    const char *p[] = {a->placement, a->storage, tenant_state_name(a->state), now, a->slug,
                       a->from_placement, a->from_storage};
    int rc = exec(r, err, errlen,
                  "UPDATE tenants SET placement = $1, storage = $2, state = $3, updated_at = $4 "
                  "WHERE slug = $5 AND state = 'moving' AND placement = $6 AND storage = $7",
                  7, p);
    if (rc != TN_OK || tn_db_changes(r->db) == 1)
        return rc;
    int st;
    int64_t deleted_at;
    rc = life_row(r, a->slug, &st, &deleted_at, NULL, 0, err, errlen);
    if (rc == TN_OK) {
        rc = tn_errf(err, errlen, TN_BUSY,
                     "tenant '%s' is no longer moving from %s (it is %s): someone changed "
                     "it during the move", a->slug, a->from_placement,
                     tenant_state_name(st));
    }
    return rc;
}

int registry_switch_storage(registry *r, const char *slug, const char *from_placement,
                            const char *from_storage, const char *placement,
                            const char *storage, int state, char *err, size_t errlen)
{
    if (state < 0 || state >= TENANT_NSTATES || placement == NULL || storage == NULL ||
        from_placement == NULL || from_storage == NULL) {
        return tn_errf(err, errlen, TN_INVALID, "registry_switch_storage: bad arguments");
    }
    struct switch_arg a = {slug, from_placement, from_storage, placement, storage, state};
    return in_tx(r, do_switch, &a, err, errlen);
}

struct restore_arg {
    const char *slug;
    int64_t not_before;
};

static int do_restore(registry *r, void *arg, char *err, size_t errlen)
{
    struct restore_arg *a = arg;
    int st;
    int64_t deleted_at;
    int rc = life_row(r, a->slug, &st, &deleted_at, NULL, 0, err, errlen);
    if (rc != TN_OK)
        return rc;
    if (st != TENANT_DELETING) {
        return tn_errf(err, errlen, TN_INVALID, "tenant '%s' is not deleted (it is %s)", a->slug,
                       tenant_state_name(st));
    }
    if (deleted_at == 0) {
        return tn_errf(err, errlen, TN_BUSY,
                       "tenant '%s' is being purged: it cannot be restored", a->slug);
    }
    if (deleted_at <= a->not_before) {
        return tn_errf(err, errlen, TN_TIMEOUT,
                       "the grace period of tenant '%s' is over: it can only be purged",
                       a->slug);
    }
    char now[24], was[24];
    snprintf(now, sizeof(now), "%lld", (long long)now_s());
    snprintf(was, sizeof(was), "%lld", (long long)deleted_at);
    const char *p[] = {now, a->slug, was};
    rc = exec(r, err, errlen,
              "UPDATE tenants SET state = 'active', updated_at = $1, deleted_at = NULL "
              "WHERE slug = $2 AND state = 'deleting' AND deleted_at = $3", 3, p);
    if (rc == TN_OK && tn_db_changes(r->db) == 0) {
        return tn_errf(err, errlen, TN_BUSY, "tenant '%s' changed meanwhile; try again", a->slug);
    }
    return rc;
}

int registry_restore(registry *r, const char *slug, int64_t not_before, char *err,
                     size_t errlen)
{
    struct restore_arg a = {slug, not_before};
    return in_tx(r, do_restore, &a, err, errlen);
}

struct tomb_arg {
    const char *slug;
    int64_t deleted_before;
    bool remove;          /* step 3: remove the row instead */
};

static int do_tomb(registry *r, void *arg, char *err, size_t errlen)
{
    struct tomb_arg *a = arg;
    int st;
    int64_t deleted_at;
    char id[24];
    int rc = life_row(r, a->slug, &st, &deleted_at, id, sizeof(id), err, errlen);
    if (rc != TN_OK)
        return rc;
    if (st != TENANT_DELETING) {
        return tn_errf(err, errlen, TN_INVALID, "tenant '%s' is not deleted (it is %s)", a->slug,
                       tenant_state_name(st));
    }
    const char *p[] = {id};
    if (a->remove) {
        if (deleted_at != 0) {
            return tn_errf(err, errlen, TN_INVALID,
                           "tenant '%s' is not a tombstone: purge it first", a->slug);
        }
        rc = exec(r, err, errlen, "DELETE FROM domains WHERE tenant_id = $1", 1, p);
        if (rc == TN_OK)
            rc = exec(r, err, errlen, "DELETE FROM tenants WHERE id = $1 AND state = 'deleting' "
                                      "AND deleted_at = 0", 1, p);
        return rc;
    }
    if (deleted_at != 0 && deleted_at > a->deleted_before) {
        return tn_errf(err, errlen, TN_TIMEOUT,
                       "tenant '%s' was deleted too recently: its grace period is not over",
                       a->slug);
    }
    char now[24];
    snprintf(now, sizeof(now), "%lld", (long long)now_s());
    const char *u[] = {now, id};
    rc = exec(r, err, errlen, "DELETE FROM domains WHERE tenant_id = $1", 1, p);
    if (rc == TN_OK)
        rc = exec(r, err, errlen, "UPDATE tenants SET deleted_at = 0, updated_at = $1 "
                                  "WHERE id = $2 AND state = 'deleting'", 2, u);
    return rc;
}

int registry_tombstone(registry *r, const char *slug, int64_t deleted_before, char *err,
                       size_t errlen)
{
    struct tomb_arg a = {slug, deleted_before, false};
    return in_tx(r, do_tomb, &a, err, errlen);
}

int registry_purge_tombstone(registry *r, const char *slug, char *err, size_t errlen)
{
    struct tomb_arg a = {slug, 0, true};
    return in_tx(r, do_tomb, &a, err, errlen);
}

int registry_list_due(registry *r, int64_t deleted_before, const char *after_slug, int limit,
                      int (*fn)(void *ctx, const char *slug), void *ctx)
{
    char before[24], lim[16];
    snprintf(before, sizeof(before), "%lld", (long long)deleted_before);
    snprintf(lim, sizeof(lim), "%d", limit > 0 ? limit : 100);
    const char *p[] = {before, after_slug ? after_slug : "", lim};
    tn_rows *rows = NULL;
    int rc = tn_db_query(r->db, &rows,
                         "SELECT slug FROM tenants WHERE state = 'deleting' AND deleted_at <= $1 "
                         "AND slug > $2 ORDER BY slug LIMIT $3", 3, p);
    if (rc != TN_OK) {
        if (rc == TN_IO)
            reconnect(r);
        return rc;
    }
    /* Collected first: fn may change the registry through this connection. */
    void **slugs = NULL;
    int n = 0;
    rc = collect_rows(rows, take_slug, &slugs, &n);
    for (int i = 0; i < n; i++) {
        if (rc == TN_OK)
            rc = fn(ctx, slugs[i]);
        free(slugs[i]);
    }
    free(slugs);
    return rc == TN_DONE ? TN_OK : rc;
}

/* ---- API keys ---------------------------------------------------------------------------- */

#define KEY_LABEL_MAX 200
#define KEY_COLS                                                                              \
    "k.id, k.tenant_id, t.slug, k.prefix, k.label, k.read_only, k.created_at, k.expires_at, "  \
    "k.revoked_at, k.last_used_at"

/* TN_OK when the keys' table is there, TN_NOTFOUND when not (a registry made before it),
 * or the error. On PostgreSQL the name is looked up through this connection's scope. */
static int keys_table(registry *r)
{
    char v[8];
    const char *p[] = {"api_keys"};
    return db_query_value(r->db, v, sizeof(v),
                          r->pg ? "SELECT 1 WHERE to_regclass($1) IS NOT NULL"
                                : "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = $1",
                          1, p);
}

/* After a failed key read: true when it failed because the table is not there yet (then
 * there are no keys to find). */
static bool keys_missing(registry *r, int rc)
{
    return rc == TN_INVALID && keys_table(r) == TN_NOTFOUND;
}

/* The keys' table on a registry made before it (see KEYS_SCHEMA). Another host may make it
 * at the same moment (PostgreSQL can then refuse the second CREATE even with IF NOT EXISTS):
 * what counts is that it is there afterwards. */
static int keys_prepare(registry *r, char *err, size_t errlen)
{
    int rc = keys_table(r);
    if (rc != TN_NOTFOUND)
        return rc == TN_OK ? TN_OK : tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
    buf sql = BUF_INIT;
    rc = schema_for(r->pg, keys_schema, &sql);
    if (rc == TN_OK)
        rc = db_exec_script(r->db, sql.p);
    buf_free(&sql);
    if (rc != TN_OK && keys_table(r) != TN_OK)
        return tn_errf(err, errlen, rc, "registry: cannot create the API keys' table: %s",
                       tn_db_error(r->db));
    log_info("registry: created the API keys' table");
    return TN_OK;
}

static int64_t col_i64(tn_rows *rows, int c)
{
    const char *v = tn_rows_get(rows, c);
    return v ? atoll(v) : 0;
}

static void row_to_key(tn_rows *rows, registry_key *k)
{
    memset(k, 0, sizeof(*k));
    k->id = col_i64(rows, 0);
    k->tenant_id = col_i64(rows, 1);
    k->slug = tn_rows_get(rows, 2);
    k->prefix = tn_rows_get(rows, 3);
    k->label = tn_rows_get(rows, 4) ? tn_rows_get(rows, 4) : "";
    k->read_only = col_i64(rows, 5) != 0;
    k->created_at = col_i64(rows, 6);
    k->expires_at = col_i64(rows, 7);
    k->revoked_at = col_i64(rows, 8);
    k->last_used_at = col_i64(rows, 9);
}

static bool hex64(const char *s)
{
    if (s == NULL || strlen(s) != 64)
        return false;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
            return false;
    return true;
}

static bool key_prefix_ok(const char *s)
{
    if (s == NULL || strlen(s) != 12 || strncmp(s, "tnk_", 4) != 0)
        return false;
    for (s += 4; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '-' || *s == '_'))
            return false;
    return true;
}

static int do_key_create(registry *r, void *arg, char *err, size_t errlen)
{
    const registry_key_new *k = ((void **)arg)[0];
    int64_t *id = ((void **)arg)[1];
    char tid[24], ro[4], cr[24], ex[24];
    int rc = id_of(r, k->slug, tid, sizeof(tid), err, errlen);
    if (rc != TN_OK)
        return rc;
    snprintf(ro, sizeof(ro), "%d", k->read_only ? 1 : 0);
    snprintf(cr, sizeof(cr), "%lld", (long long)k->created_at);
    snprintf(ex, sizeof(ex), "%lld", (long long)k->expires_at);
    const char *p[] = {tid, k->prefix, k->hash, ro, k->label ? k->label : "", cr,
                       k->expires_at > 0 ? ex : NULL};
    char v[24];
    rc = db_query_value(r->db, v, sizeof(v),
                        "INSERT INTO api_keys (tenant_id, prefix, token_hash, read_only, label, "
                        "created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7) "
                        "RETURNING id", 7, p);
    if (rc == TN_EXISTS)
        return tn_errf(err, errlen, rc, "this key is registered already");
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
    if (id != NULL)
        *id = atoll(v);
    return TN_OK;
}

int registry_key_create(registry *r, const registry_key_new *k, int64_t *id, char *err,
                        size_t errlen)
{
    if (k->slug == NULL || !key_prefix_ok(k->prefix) || !hex64(k->hash))
        return tn_errf(err, errlen, TN_INVALID,
                       "registry_key_create: a slug, a key prefix and a SHA-256 hex are required");
    if (k->label != NULL && (strlen(k->label) > KEY_LABEL_MAX || !text_ok(k->label, false)))
        return tn_errf(err, errlen, TN_INVALID,
                       "a key's label is at most %d bytes of UTF-8 without control characters",
                       KEY_LABEL_MAX);
    if (k->expires_at != 0 && k->expires_at <= k->created_at)
        return tn_errf(err, errlen, TN_INVALID, "a key must expire after it is made");
    int rc = keys_prepare(r, err, errlen);
    if (rc != TN_OK)
        return rc;
    void *arg[] = {(void *)k, id};
    return in_tx(r, do_key_create, arg, err, errlen);
}

int registry_key_list(registry *r, const char *slug, int64_t after_id, int limit,
                      registry_key_fn fn, void *ctx, int *count, char *err, size_t errlen)
{
    if (count != NULL)
        *count = 0;
    char tid[24] = "", after[24], lim[16];
    if (slug != NULL) {
        int rc = id_of(r, slug, tid, sizeof(tid), err, errlen);
        if (rc != TN_OK)
            return rc;
    }
    snprintf(after, sizeof(after), "%lld", (long long)after_id);
    snprintf(lim, sizeof(lim), "%d", limit > 0 ? limit : 100);
    const char *p[] = {after, lim, tid};
    tn_rows *rows = NULL;
    int rc = tn_db_query(r->db, &rows,
                         slug != NULL ? "SELECT " KEY_COLS " FROM api_keys k JOIN tenants t ON "
                                        "t.id = k.tenant_id WHERE k.tenant_id = $3 AND k.id > $1 "
                                        "ORDER BY k.id LIMIT $2"
                                      : "SELECT " KEY_COLS " FROM api_keys k JOIN tenants t ON "
                                        "t.id = k.tenant_id WHERE k.id > $1 ORDER BY k.id LIMIT $2",
                         slug != NULL ? 3 : 2, p);
    if (rc != TN_OK) {
        if (keys_missing(r, rc))
            return TN_OK;
        rc = tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
        if (rc == TN_IO)
            reconnect(r);
        return rc;
    }
    int n = 0;
    while ((rc = tn_rows_next(rows)) == TN_OK) {
        registry_key k;
        row_to_key(rows, &k);
        n++;
        if ((rc = fn(ctx, &k)) != TN_OK)
            break;
    }
    tn_rows_free(rows);
    if (count != NULL)
        *count = n;
    if (rc == TN_DONE)
        return TN_OK;
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "registry: listing the keys stopped: %s",
                       tn_rc_str(rc));
    return TN_OK;
}

struct key_revoke_arg {
    const char *slug, *prefix;
    int64_t id, now;
    registry_key *out;
    bool *already;
};

static int do_key_revoke(registry *r, void *arg, char *err, size_t errlen)
{
    struct key_revoke_arg *a = arg;
    char tid[24], kid[24], now[24];
    int rc = id_of(r, a->slug, tid, sizeof(tid), err, errlen);
    if (rc != TN_OK)
        return rc;
    snprintf(kid, sizeof(kid), "%lld", (long long)a->id);
    const char *p[] = {tid, a->id > 0 ? kid : a->prefix};
    /* asked first: in a PostgreSQL transaction, a failed query would end it */
    if ((rc = keys_table(r)) == TN_NOTFOUND)
        return tn_errf(err, errlen, TN_NOTFOUND, "tenant '%s' has no key %s", a->slug, p[1]);
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
    tn_rows *rows = NULL;
    rc = tn_db_query(r->db, &rows,
                     a->id > 0 ? "SELECT " KEY_COLS " FROM api_keys k JOIN tenants t ON t.id = "
                                 "k.tenant_id WHERE k.tenant_id = $1 AND k.id = $2"
                               : "SELECT " KEY_COLS " FROM api_keys k JOIN tenants t ON t.id = "
                                 "k.tenant_id WHERE k.tenant_id = $1 AND k.prefix = $2 "
                                 "ORDER BY k.id LIMIT 2",
                     2, p);
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
    registry_key k;
    int found = 0;
    while ((rc = tn_rows_next(rows)) == TN_OK) {
        if (found++ == 0) {
            row_to_key(rows, &k);
            /* the strings outlive the rows: into the registry's buffer */
            size_t o = 0;
            const char *f[] = {k.slug ? k.slug : "", k.prefix ? k.prefix : "", k.label};
            const char **to[] = {&k.slug, &k.prefix, &k.label};
            for (int i = 0; i < 3; i++) {
                size_t l = strnlen(f[i], sizeof(r->key_text) / 3 - 1);
                memcpy(r->key_text + o, f[i], l);
                r->key_text[o + l] = '\0';
                *to[i] = r->key_text + o;
                o += l + 1;
            }
        }
    }
    tn_rows_free(rows);
    if (rc != TN_DONE)
        return tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
    if (found == 0)
        return tn_errf(err, errlen, TN_NOTFOUND, "tenant '%s' has no key %s", a->slug, p[1]);
    if (found > 1)
        return tn_errf(err, errlen, TN_INVALID,
                       "several keys of tenant '%s' begin with %s: give the key's id", a->slug,
                       a->prefix);
    *a->already = k.revoked_at != 0;
    if (!*a->already) {
        snprintf(kid, sizeof(kid), "%lld", (long long)k.id);
        snprintf(now, sizeof(now), "%lld", (long long)a->now);
        const char *u[] = {now, kid};
        rc = exec(r, err, errlen, "UPDATE api_keys SET revoked_at = $1 WHERE id = $2", 2, u);
        if (rc != TN_OK)
            return rc;
        k.revoked_at = a->now;
    }
    if (a->out != NULL)
        *a->out = k;
    return TN_OK;
}

int registry_key_revoke(registry *r, const char *slug, int64_t id, const char *prefix,
                        int64_t now, registry_key *out, bool *already, char *err,
                        size_t errlen)
{
    bool was = false;
    if (slug == NULL || (id <= 0 && !key_prefix_ok(prefix)))
        return tn_errf(err, errlen, TN_INVALID,
                       "a key is named by its id or its prefix (tnk_ and 8 characters)");
    struct key_revoke_arg a = {slug, prefix, id, now, out, already ? already : &was};
    return in_tx(r, do_key_revoke, &a, err, errlen);
}

int registry_key_find(registry *r, int64_t tenant_id, const char *hash, registry_key *out)
{
    char tid[24];
    snprintf(tid, sizeof(tid), "%lld", (long long)tenant_id);
    const char *p[] = {hash, tid};
    tn_rows *rows = NULL;
    /* By the unique hash, then the tenant: another tenant's key is simply not found. */
    int rc = tn_db_query(r->db, &rows,
                         "SELECT id, tenant_id, NULL, NULL, NULL, read_only, created_at, "
                         "expires_at, revoked_at, last_used_at FROM api_keys "
                         "WHERE token_hash = $1 AND tenant_id = $2", 2, p);
    if (rc != TN_OK) {
        if (keys_missing(r, rc))
            return TN_NOTFOUND;
        log_error("registry: key lookup failed: %s", tn_db_error(r->db));
        if (rc == TN_IO)
            reconnect(r);
        return rc;
    }
    rc = tn_rows_next(rows);
    if (rc == TN_OK)
        row_to_key(rows, out);
    else if (rc == TN_DONE)
        rc = TN_NOTFOUND;
    tn_rows_free(rows);
    return rc;
}

struct key_touch_arg {
    int64_t id, now, min_interval_s;
};

static int do_key_touch(registry *r, void *arg, char *err, size_t errlen)
{
    const struct key_touch_arg *a = arg;
    char id[24], now[24], before[24];
    snprintf(id, sizeof(id), "%lld", (long long)a->id);
    snprintf(now, sizeof(now), "%lld", (long long)a->now);
    snprintf(before, sizeof(before), "%lld", (long long)(a->now - a->min_interval_s));
    const char *p[] = {now, id, before};
    return exec(r, err, errlen,
                "UPDATE api_keys SET last_used_at = $1 WHERE id = $2 AND "
                "(last_used_at IS NULL OR last_used_at <= $3)", 3, p);
}

int registry_key_touch(registry *r, int64_t id, int64_t now, int64_t min_interval_s)
{
    char err[512];
    struct key_touch_arg a = {id, now, min_interval_s};
    int rc = run_tx(r, do_key_touch, &a, err, sizeof(err), false);
    if (rc != TN_OK)
        log_warn("registry: key last_used_at not recorded: %s", err);
    return rc;
}

/* ---- the job store's tables -------------------------------------------------------------- */

/* TN_OK when all the job tables are there, TN_NOTFOUND when one is missing (job_hosts came
 * after the others: a registry made before it gets it here). */
static int jobs_tables(registry *r)
{
    static const char *const names[] = {"jobs", "job_queues", "job_schedules", "job_hosts"};
    int rc = TN_OK;
    for (size_t i = 0; rc == TN_OK && i < TN_ARRAY_LEN(names); i++) {
        char v[8];
        const char *p[] = {names[i]};
        rc = db_query_value(r->db, v, sizeof(v),
                            r->pg ? "SELECT 1 WHERE to_regclass($1) IS NOT NULL"
                                  : "SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                    "name = $1",
                            1, p);
    }
    return rc;
}

/* As keys_prepare: another host may make the tables at the same moment; what counts is
 * that they are there afterwards. */
int registry_jobs_prepare(registry *r, char *err, size_t errlen)
{
    if (r->jobs_ready)
        return TN_OK;
    int rc = jobs_tables(r);
    if (rc == TN_NOTFOUND) {
        buf sql = BUF_INIT;
        rc = schema_for(r->pg, jobs_schema, &sql);
        if (rc == TN_OK)
            rc = db_exec_script(r->db, sql.p);
        buf_free(&sql);
        if (rc != TN_OK && jobs_tables(r) != TN_OK)
            return tn_errf(err, errlen, rc, "registry: cannot create the job tables: %s",
                           tn_db_error(r->db));
        log_info("registry: created the job tables");
        rc = TN_OK;
    } else if (rc != TN_OK) {
        rc = tn_errf(err, errlen, rc, "registry: %s", tn_db_error(r->db));
        if (rc == TN_IO)
            reconnect(r);
        return rc;
    }
    r->jobs_ready = true;
    return TN_OK;
}

buf *registry_jobs_text(registry *r) { return &r->jobs_text; }

/*
 * sqlite.c — the SQLite driver (db_sqlite_driver, see db_int.h).
 *
 * Owns: one sqlite3 handle per tn_db, opened the way every tenant file must be opened
 * (WAL, a busy timeout with its own fine-grained handler, synchronous=FULL unless
 * sync_normal or deferred for a bulk job by db_defer_sync, foreign keys on), a small
 * per-connection cache of prepared statements, and the translation of SQLite's codes.
 *
 * Hardening, applied to every connection and not negotiable by SQL:
 *   - an authorizer that denies ATTACH and DETACH (a tenant's SQL must not reach another
 *     file: that also denies VACUUM INTO, which attaches its target), any call to
 *     load_extension() or fts3_tokenizer(), and the PRAGMAs of fixed_pragmas given a
 *     value (the schema's protections, process-wide limits and folders, the journal and
 *     locking modes); only ATTACH '' (a private temporary database, what a plain VACUUM
 *     attaches internally) is let through;
 *   - the settings of db_sqlite_harden (db_int.h), which migrate.c's private connection
 *     gets too: SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION off, SQLITE_DBCONFIG_DEFENSIVE on (no
 *     writable_schema, no journal_mode=OFF, no shadow-table writes),
 *     SQLITE_DBCONFIG_TRUSTED_SCHEMA off (schema objects may not call risky functions),
 *     SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER off, and double-quoted string literals off
 *     (DQS), so "x" is always an identifier, as in PostgreSQL.
 *
 * Why fts3_tokenizer twice: fts3_tokenizer('simple') returns the address of a tokenizer
 * module inside the library, and fts3_tokenizer('simple', X) replaces it with any 8 bytes,
 * which every FTS3/4 table then calls through: one query doing both sends the worker to an
 * address of the caller's choosing. Debian builds SQLite with the function switched on. The
 * switch off makes a literal argument answer NULL and an overwrite fail, but SQLite honours
 * it only for literals: a bound argument still leaks and still overwrites. Hence the
 * authorizer, which refuses the function whatever its arguments (FTS tables never call it;
 * they look their tokenizer up themselves). trusted_schema is a PRAGMA, so SQL could switch
 * it back on; the authorizer keeps it off.
 *
 * Placeholders are $1..$N only, bound by name: every placeholder in the statement must be
 * one of $1..$nparams and every one of them must be used (PostgreSQL refuses both too), so
 * a mistake is TN_INVALID instead of a silently NULL or ignored value. Values are bound as
 * text; column affinity converts them as PostgreSQL would convert an untyped literal.
 *
 * The statement cache: STMT_CACHE entries per connection keyed by the SQL text, evicting
 * the least recently used one that no open row set is reading. A statement that is in use
 * (the same query iterated twice at once) or that comes from a script is prepared for one
 * use and finalized after it. Everything is finalized on close. A cached statement's
 * placeholders are checked at its first use; those that are $1..$N in order are bound by
 * position from then on (bind_params).
 *
 * The library's own settings for the process (db_sqlite_configure) and, per connection, what
 * a pool of many open files needs: the WAL kept but emptied by the last close, a bounded
 * page cache (sq_open).
 *
 * Transactions begin IMMEDIATE (see sq_begin), deferred on read-only connections.
 *
 * Codes: SQLITE_CONSTRAINT_UNIQUE/PRIMARYKEY → TN_EXISTS, other constraints → TN_INVALID;
 * SQLITE_BUSY/LOCKED → TN_BUSY; SQLITE_AUTH/READONLY/PERM and whatever the authorizer
 * refused (a refused function comes back as SQLITE_ERROR) → TN_DENIED; SQLITE_IOERR/FULL/
 * CANTOPEN/CORRUPT/NOTADB → TN_IO; SQLITE_NOMEM → TN_NOMEM; SQLITE_TOOBIG → TN_TOOBIG;
 * SQLITE_INTERRUPT → TN_TIMEOUT; SQLITE_ERROR/MISMATCH/RANGE/SCHEMA → TN_INVALID; the rest
 * TN_ERR. tn_db_last_id() is sqlite3_last_insert_rowid().
 *
 * Must not: open anything but the one file named by the URI, or run SQL other than the
 * caller's statements (through acquire) and constant PRAGMAs (the open's, the cache size a
 * number from the options, synchronous for db_defer_sync, schema_version to open the WAL
 * before db_flush syncs it).
 */
#include "core/first.h"
#include "storage/db_int.h"
#include "core/rc.h"
#include "core/clock.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STMT_CACHE 16
#define WAL_KEEP_BYTES "8388608"   /* journal_size_limit: see sq_open */
#define NUM_TEXT 24                /* an int64 in decimal, its sign and NUL */

/* The 64-bit counters came with SQLite 3.37; configure accepts 3.31. */
#if SQLITE_VERSION_NUMBER >= 3037000
typedef sqlite3_int64 changes_t;
#define TOTAL_CHANGES sqlite3_total_changes64
#define LAST_CHANGES sqlite3_changes64
#else
typedef int changes_t;
#define TOTAL_CHANGES sqlite3_total_changes
#define LAST_CHANGES sqlite3_changes
#endif

struct cached {
    char *sql;             /* NULL: a free slot */
    size_t len;
    uint32_t hash;
    sqlite3_stmt *stmt;
    uint64_t used;         /* tick of the last use, for LRU */
    bool busy;             /* an open row set is reading it */
    int in_order;          /* its placeholders are $1..$in_order at indexes 1..in_order, as
                              checked at a use (-1: not known, or not so) */
};

typedef struct sqlite_db {
    tn_db base;            /* first: tn_db * and sqlite_db * convert both ways */
    sqlite3 *h;
    uint64_t tick;
    struct cached cache[STMT_CACHE];
    int busy_timeout_ms;
    struct timespec busy_since;   /* when the current wait for a lock began */
    bool denied;           /* the authorizer refused something since the last prepare: SQLite
                              reports a refused function as SQLITE_ERROR, not SQLITE_AUTH */
    int64_t deadline_ms;   /* db_sqlite_deadline: interrupt statements past it (0: none) */
    bool own;              /* the driver's own constant PRAGMA is being prepared (the open's,
                              db_defer_sync's): not judged as a caller's */
    uint32_t serial;       /* this handle among the process's opens (sq_data_version) */
} sqlite_db;

typedef struct sqlite_rows {
    tn_rows base;          /* first */
    sqlite3_stmt *stmt;    /* NULL once detached */
    struct cached *entry;  /* the cache slot, or NULL for a one-use statement */
    changes_t total_before;
    int ncols;
    bool pending;          /* the first row was stepped by the query, not returned yet */
    bool row;              /* a current row is readable */
    bool done;
    char (*num)[NUM_TEXT]; /* per column: an integer's text (sq_rows_get) */
} sqlite_rows;             /* followed by num, then the copies of the values it binds */

static sqlite_db *SDB(tn_db *db)
{
    return (sqlite_db *)db;
}

static const sqlite_db *CSDB(const tn_db *db)
{
    return (const sqlite_db *)db;
}

/* ---- errors ------------------------------------------------------------------------------ */

static int map_code(int ext)
{
    switch (ext & 0xff) {
    case SQLITE_CONSTRAINT:
        return ext == SQLITE_CONSTRAINT_UNIQUE || ext == SQLITE_CONSTRAINT_PRIMARYKEY
                   ? TN_EXISTS
                   : TN_INVALID;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return TN_BUSY;
    case SQLITE_AUTH:
    case SQLITE_READONLY:
    case SQLITE_PERM:
        return TN_DENIED;
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_PROTOCOL:
        return TN_IO;
    case SQLITE_NOMEM:
        return TN_NOMEM;
    case SQLITE_TOOBIG:
        return TN_TOOBIG;
    case SQLITE_INTERRUPT:
        return TN_TIMEOUT;
    case SQLITE_ERROR:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
    case SQLITE_SCHEMA:
        return TN_INVALID;
    default:
        return TN_ERR;
    }
}

/* The error of the last call on h as a tn_rc, with SQLite's message. */
static int fail(sqlite_db *d, int rc)
{
    int ext = sqlite3_extended_errcode(d->h);
    if ((ext & 0xff) != (rc & 0xff))   /* the call's own code is the authority */
        ext = rc;
    int code = d->denied ? TN_DENIED : map_code(ext);
    d->denied = false;
    return db_set_error(&d->base, code, "%s", sqlite3_errmsg(d->h));
}

/* ---- the authorizer ---------------------------------------------------------------------- */

/* PRAGMAs a caller may ask but not set: the schema's protections (writable_schema,
 * trusted_schema), what reaches past the connection into the whole process and so every
 * tenant a worker serves after (the heap limits: "PRAGMA hard_heap_limit = 1" made every
 * later allocation fail, the registry's too; the temporary and data folders), and the
 * journal and locking modes the host opened the file with (WAL, shared with the other
 * workers' connections). */
static const char *const fixed_pragmas[] = {
    "writable_schema", "trusted_schema",   "hard_heap_limit", "soft_heap_limit",
    "temp_store_directory", "data_store_directory", "journal_mode", "locking_mode", NULL};

/* The hardening of the banner, as one verdict per action. */
static int judge(int action, const char *a1, const char *a2, bool own)
{
    switch (action) {
    case SQLITE_ATTACH:
        /* a1 is the file name when written as a literal. VACUUM attaches '' (a private
         * temporary database) and must keep working; '' reaches no file, so it is allowed.
         * Anything else, a parameter included (a1 NULL), is refused. */
        return a1 != NULL && a1[0] == '\0' ? SQLITE_OK : SQLITE_DENY;
    case SQLITE_DETACH:
        return SQLITE_DENY;
    case SQLITE_FUNCTION:   /* a2 is the function's name */
        if (a2 != NULL && (sqlite3_stricmp(a2, "load_extension") == 0 ||
                           sqlite3_stricmp(a2, "fts3_tokenizer") == 0))
            return SQLITE_DENY;
        return SQLITE_OK;
    case SQLITE_PRAGMA:     /* a1 the PRAGMA, a2 its value (NULL: only asked) */
        if (a1 == NULL || a2 == NULL || own)
            return SQLITE_OK;
        for (int i = 0; fixed_pragmas[i] != NULL; i++)
            if (sqlite3_stricmp(a1, fixed_pragmas[i]) == 0)
                return SQLITE_DENY;
        return SQLITE_OK;
    default:
        return SQLITE_OK;
    }
}

/* ud is the connection: a refusal is remembered for fail(). */
static int authorizer(void *ud, int action, const char *a1, const char *a2, const char *dbname,
                      const char *trigger)
{
    (void)dbname, (void)trigger;
    int verdict = judge(action, a1, a2, ((sqlite_db *)ud)->own);
    if (verdict != SQLITE_OK)
        ((sqlite_db *)ud)->denied = true;
    return verdict;
}

int db_sqlite_own_authorizer(tn_db *db)
{
    return sqlite3_set_authorizer(SDB(db)->h, authorizer, db) == SQLITE_OK ? TN_OK : TN_ERR;
}

/* ---- the deadline ------------------------------------------------------------------------ */

/* Every PROGRESS_OPS virtual machine instructions: often enough that a runaway statement
 * stops soon after its deadline, rarely enough to cost nothing measurable. */
#define PROGRESS_OPS 1000

static int past_deadline(void *arg)
{
    return clock_mono_ms() > ((const sqlite_db *)arg)->deadline_ms ? 1 : 0;
}

void db_sqlite_deadline(tn_db *db, int64_t deadline_ms)
{
    sqlite_db *d = SDB(db);
    d->deadline_ms = deadline_ms;
    sqlite3_progress_handler(d->h, deadline_ms > 0 ? PROGRESS_OPS : 0,
                             deadline_ms > 0 ? past_deadline : NULL, d);
}

/* ---- statements and the cache ------------------------------------------------------------ */

static uint32_t hash_sql(const char *s, size_t n)
{
    uint32_t h = 2166136261u;   /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

/* A prepared statement for sql: from the cache when allowed and free, else new. *entry is
 * the cache slot (NULL: a one-use statement to finalize after use). */
static int acquire(sqlite_db *d, const char *sql, bool use_cache, sqlite3_stmt **out,
                   struct cached **entry)
{
    size_t len = strlen(sql);
    uint32_t h = hash_sql(sql, len);
    *out = NULL;
    *entry = NULL;
    d->tick++;
    if (use_cache) {
        for (int i = 0; i < STMT_CACHE; i++) {
            struct cached *c = &d->cache[i];
            if (c->sql != NULL && c->hash == h && c->len == len &&
                memcmp(c->sql, sql, len) == 0) {
                if (c->busy) {        /* being read: a one-use copy, not a second entry */
                    use_cache = false;
                    break;
                }
                c->used = d->tick;
                c->busy = true;
                *out = c->stmt;
                *entry = c;
                return TN_OK;
            }
        }
    }
    if (len > (size_t)INT32_MAX - 1)
        return db_set_error(&d->base, TN_TOOBIG, "statement too long");
    sqlite3_stmt *st = NULL;
    const char *tail = NULL;
    d->denied = false;
    int rc = sqlite3_prepare_v3(d->h, sql, (int)len + 1, use_cache ? SQLITE_PREPARE_PERSISTENT : 0,
                                &st, &tail);
    if (rc != SQLITE_OK) {
        sqlite3_finalize(st);
        return fail(d, rc);
    }
    if (st == NULL)
        return db_set_error(&d->base, TN_INVALID, "empty statement");
    if (tail != NULL && !db_sql_is_blank(DB_DIALECT_SQLITE, tail, strlen(tail))) {
        sqlite3_finalize(st);
        return db_set_error(&d->base, TN_INVALID,
                            "more than one statement (run scripts with db_exec_script)");
    }
    *out = st;
    if (!use_cache)
        return TN_OK;
    struct cached *victim = NULL;
    for (int i = 0; i < STMT_CACHE; i++) {
        struct cached *c = &d->cache[i];
        if (c->sql == NULL) {
            victim = c;
            break;
        }
        if (!c->busy && (victim == NULL || c->used < victim->used))
            victim = c;
    }
    if (victim == NULL)   /* every slot is being read: this one is for one use */
        return TN_OK;
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return TN_OK;     /* not cached, still usable */
    memcpy(copy, sql, len + 1);
    if (victim->sql != NULL) {
        sqlite3_finalize(victim->stmt);
        free(victim->sql);
    }
    *victim = (struct cached){copy, len, h, st, d->tick, true, -1};
    *entry = victim;
    return TN_OK;
}

/* Give a statement back: reset it for the next use, or finalize a one-use one. */
static void release(sqlite3_stmt *st, struct cached *entry)
{
    if (st == NULL)
        return;
    if (entry == NULL) {
        sqlite3_finalize(st);
        return;
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    entry->busy = false;
}

/* Is name a canonical "$k" (no leading zero)? Returns k, or 0. */
static long placeholder_number(const char *name)
{
    if (name == NULL || name[0] != '$' || name[1] < '1' || name[1] > '9')
        return 0;
    long k = 0;
    for (const char *p = name + 1; *p != '\0'; p++) {
        if (*p < '0' || *p > '9' || k > DB_MAX_PARAMS)
            return 0;
        k = k * 10 + (*p - '0');
    }
    return k;
}

/* Check the statement's placeholders against nparams and bind the values as text. `keep`:
 * where the values are copied to (they must outlive this call: row sets; room for each with
 * its NUL), else they are bound where they are. A cached statement's check is made once: a
 * statement whose placeholders are $1..$N in that order (what the host and the apps write)
 * is bound by index from then on, given N values; anything else is checked at each use. */
static int bind_params(sqlite_db *d, sqlite3_stmt *st, struct cached *entry, int nparams,
                       const char *const *params, char *keep)
{
    if (entry != NULL && entry->in_order == nparams) {
        for (int k = 1; k <= nparams; k++) {
            const char *v = params[k - 1];
            if (v != NULL && keep != NULL) {
                size_t n = strlen(v) + 1;
                v = memcpy(keep, v, n);
                keep += n;
            }
            int rc = v == NULL ? sqlite3_bind_null(st, k)
                               : sqlite3_bind_text(st, k, v, -1, SQLITE_STATIC);
            if (rc != SQLITE_OK)
                return fail(d, rc);
        }
        return TN_OK;
    }
    int count = sqlite3_bind_parameter_count(st);
    bool in_order = count == nparams;
    for (int i = 1; i <= count; i++) {
        const char *name = sqlite3_bind_parameter_name(st, i);
        long k = placeholder_number(name);
        if (k == 0)
            return db_set_error(&d->base, TN_INVALID,
                                "placeholder %s is not supported: use $1..$N",
                                name != NULL ? name : "?");
        if (k > nparams)
            return db_set_error(&d->base, TN_INVALID,
                                "placeholder $%ld but %d parameter(s) given", k, nparams);
        in_order = in_order && k == i;
    }
    for (int k = 1; k <= nparams; k++) {
        char name[16];
        snprintf(name, sizeof(name), "$%d", k);
        int idx = sqlite3_bind_parameter_index(st, name);
        if (idx == 0)
            return db_set_error(&d->base, TN_INVALID,
                                "parameter $%d is not used by the statement (%d given)", k,
                                nparams);
        const char *v = params[k - 1];
        if (v != NULL && keep != NULL) {
            size_t n = strlen(v) + 1;
            v = memcpy(keep, v, n);
            keep += n;
        }
        int rc = v == NULL ? sqlite3_bind_null(st, idx)
                           : sqlite3_bind_text(st, idx, v, -1, SQLITE_STATIC);
        if (rc != SQLITE_OK)
            return fail(d, rc);
    }
    if (entry != NULL && in_order)
        entry->in_order = nparams;
    return TN_OK;
}

/* Rows changed by a statement that just completed: sqlite3_changes() keeps the count of the
 * last INSERT/UPDATE/DELETE across SELECTs and DDL, so it counts only when the statement
 * changed something at all. */
static int64_t changes_since(sqlite_db *d, changes_t total_before)
{
    if (TOTAL_CHANGES(d->h) == total_before)
        return 0;
    return LAST_CHANGES(d->h);
}

static int sq_exec(tn_db *db, const char *sql, int nparams, const char *const *params,
                   unsigned flags)
{
    sqlite_db *d = SDB(db);
    sqlite3_stmt *st;
    struct cached *entry;
    int rc = acquire(d, sql, !(flags & DB_EXEC_NOCACHE), &st, &entry);
    if (rc != TN_OK)
        return rc;
    rc = bind_params(d, st, entry, nparams, params, NULL);
    if (rc == TN_OK) {
        changes_t before = TOTAL_CHANGES(d->h);
        int s;
        while ((s = sqlite3_step(st)) == SQLITE_ROW)
            ;
        if (s == SQLITE_DONE)
            db->changes = changes_since(d, before);
        else
            rc = fail(d, s);
    }
    release(st, entry);
    return rc;
}

/* ---- row sets ------------------------------------------------------------------------------ */

/* Step once; on the end or an error the statement is reset at once, so a finished row set
 * holds no lock while it waits to be freed. */
static int rows_step(sqlite_rows *r)
{
    sqlite_db *d = SDB(r->base.db);
    int s = sqlite3_step(r->stmt);
    if (s == SQLITE_ROW) {
        r->row = true;
        return TN_OK;
    }
    r->row = false;
    r->done = true;
    int rc = TN_DONE;
    if (s == SQLITE_DONE)
        d->base.changes = changes_since(d, r->total_before);
    else
        rc = fail(d, s);
    sqlite3_reset(r->stmt);
    return rc;
}

static int sq_query(tn_db *db, tn_rows **rows, const char *sql, int nparams,
                    const char *const *params)
{
    sqlite_db *d = SDB(db);
    sqlite3_stmt *st;
    struct cached *entry;
    int rc = acquire(d, sql, true, &st, &entry);
    if (rc != TN_OK)
        return rc;
    /* The row set keeps a copy of the values, which the statement reads until it is reset */
    int ncols = sqlite3_column_count(st);
    size_t keep = 0;
    for (int k = 0; k < nparams; k++)
        keep += params[k] != NULL ? strlen(params[k]) + 1 : 0;
    sqlite_rows *r = calloc(1, sizeof(*r) + (size_t)ncols * NUM_TEXT + keep);
    if (r == NULL) {
        release(st, entry);
        return db_set_error(db, TN_NOMEM, "out of memory");
    }
    r->num = (char (*)[NUM_TEXT])(r + 1);
    rc = bind_params(d, st, entry, nparams, params, (char *)(r + 1) + (size_t)ncols * NUM_TEXT);
    if (rc != TN_OK) {
        release(st, entry);
        free(r);
        return rc;
    }
    r->base.drv = &db_sqlite_driver;
    r->base.db = db;
    r->stmt = st;
    r->entry = entry;
    r->ncols = ncols;
    r->total_before = TOTAL_CHANGES(d->h);
    /* Run the statement now, as PostgreSQL does, so its errors are the query's. */
    rc = rows_step(r);
    if (rc != TN_OK && rc != TN_DONE) {
        release(st, entry);
        free(r);
        return rc;
    }
    r->pending = rc == TN_OK;
    r->row = false;
    db_rows_link(db, &r->base);
    *rows = &r->base;
    return TN_OK;
}

static int sq_rows_next(tn_rows *rows)
{
    sqlite_rows *r = (sqlite_rows *)rows;
    if (r->stmt == NULL) {
        r->row = false;
        return TN_INVALID;   /* detached: its connection was closed or reset */
    }
    if (r->pending) {
        r->pending = false;
        r->row = true;
        return TN_OK;
    }
    if (r->done) {
        r->row = false;
        return TN_DONE;
    }
    return rows_step(r);
}

static int sq_rows_ncols(const tn_rows *rows)
{
    return ((const sqlite_rows *)rows)->ncols;
}

static const char *sq_rows_colname(const tn_rows *rows, int col)
{
    const sqlite_rows *r = (const sqlite_rows *)rows;
    return r->stmt != NULL ? sqlite3_column_name(r->stmt, col) : NULL;
}

/* An integer is written here, as SQLite would write it: sqlite3_column_text would convert
 * the value in place, allocating for the text, for every integer of every row read. */
static const char *int_text(char *buf, sqlite3_int64 v)
{
    char tmp[NUM_TEXT];
    size_t n = 0, len = 0;
    sqlite3_uint64 u = v < 0 ? (sqlite3_uint64)0 - (sqlite3_uint64)v : (sqlite3_uint64)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    if (v < 0)
        buf[len++] = '-';
    while (n > 0)
        buf[len++] = tmp[--n];
    buf[len] = '\0';
    return buf;
}

static const char *sq_rows_get(const tn_rows *rows, int col)
{
    const sqlite_rows *r = (const sqlite_rows *)rows;
    if (r->stmt == NULL || !r->row)
        return NULL;
    switch (sqlite3_column_type(r->stmt, col)) {
    case SQLITE_NULL:
        return NULL;
    case SQLITE_INTEGER:
        if (col >= 0 && col < r->ncols)
            return int_text(r->num[col], sqlite3_column_int64(r->stmt, col));
        break;
    default:
        break;
    }
    return (const char *)sqlite3_column_text(r->stmt, col);
}

static void sq_rows_detach(tn_rows *rows)
{
    sqlite_rows *r = (sqlite_rows *)rows;
    release(r->stmt, r->entry);
    r->stmt = NULL;
    r->entry = NULL;
    r->ncols = 0;
    r->row = r->pending = false;
    r->done = true;
}

static void sq_rows_free(tn_rows *rows)
{
    sq_rows_detach(rows);
    free(rows);
}

/* ---- the connection ------------------------------------------------------------------------ */

/* The settings of the banner, each set and read back: a library that does not know one, or
 * answers with another value, fails the open rather than running without it. */
int db_sqlite_harden(struct sqlite3 *h, char *err, size_t errlen)
{
    static const struct {
        int op, value;
        const char *name;
    } settings[] = {
        {SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, "ENABLE_LOAD_EXTENSION"},
        {SQLITE_DBCONFIG_DEFENSIVE, 1, "DEFENSIVE"},
        {SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, "TRUSTED_SCHEMA"},
        {SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, 0, "ENABLE_FTS3_TOKENIZER"},
        {SQLITE_DBCONFIG_DQS_DML, 0, "DQS_DML"},
        {SQLITE_DBCONFIG_DQS_DDL, 0, "DQS_DDL"},
    };
    for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++) {
        int got = -1;
        int rc = sqlite3_db_config(h, settings[i].op, settings[i].value, &got);
        if (rc != SQLITE_OK || got != settings[i].value)
            return tn_errf(err, errlen, TN_ERR,
                           "sqlite: cannot harden the connection: SQLITE_DBCONFIG_%s=%d %s (%s)",
                           settings[i].name, settings[i].value,
                           rc != SQLITE_OK ? "refused" : "did not hold",
                           rc != SQLITE_OK ? sqlite3_errstr(rc) : "read back another value");
    }
    return TN_OK;
}

static void sq_close(tn_db *db)
{
    sqlite_db *d = SDB(db);
    for (int i = 0; i < STMT_CACHE; i++) {
        if (d->cache[i].sql != NULL) {
            sqlite3_finalize(d->cache[i].stmt);
            free(d->cache[i].sql);
        }
    }
    sqlite3_close_v2(d->h);   /* rolls back an open transaction */
    free(d);
}

/* Run a constant PRAGMA (or other setup statement) and, when want is given, check that
 * its first column says so (journal_mode answers with the mode it got). */
static int run_setup(sqlite_db *d, const char *sql, const char *want, char *err, size_t errlen)
{
    sqlite3_stmt *st = NULL;
    d->own = true;
    int rc = sqlite3_prepare_v2(d->h, sql, -1, &st, NULL);
    d->own = false;
    int s = rc == SQLITE_OK ? sqlite3_step(st) : rc;
    if (s != SQLITE_ROW && s != SQLITE_DONE) {
        rc = tn_errf(err, errlen, map_code(s) == TN_BUSY ? TN_BUSY : TN_IO, "sqlite: %s: %s", sql,
                     sqlite3_errmsg(d->h));
        sqlite3_finalize(st);
        return rc;
    }
    if (want != NULL) {
        const char *got = s == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
        if (got == NULL || sqlite3_stricmp(got, want) != 0) {
            rc = tn_errf(err, errlen, TN_IO, "sqlite: %s gave '%s'", sql, got != NULL ? got : "");
            sqlite3_finalize(st);   /* after the message: got is the statement's */
            return rc;
        }
    }
    sqlite3_finalize(st);
    return TN_OK;
}

/* Waiting for a lock (busy_timeout_ms in all). SQLite's own handler sleeps 1, 2, 5, 10, 15,
 * 20, 25, 25, 25, 50, 50, 100 ms between tries, so a writer queued behind commits that each
 * take one fsync sleeps through many of them: concurrent tenant creations on one registry
 * spent their time in those sleeps rather than waiting for the lock. This one tries again
 * after 50 us, doubling up to 2 ms. */
static int busy_wait(void *arg, int tries)
{
    sqlite_db *d = arg;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (tries == 0)
        d->busy_since = now;
    int64_t waited_us = (int64_t)(now.tv_sec - d->busy_since.tv_sec) * 1000000 +
                        (now.tv_nsec - d->busy_since.tv_nsec) / 1000;
    if (waited_us >= (int64_t)d->busy_timeout_ms * 1000)
        return 0;   /* give up: SQLITE_BUSY */
    long us = tries < 6 ? 50L << tries : 2000;   /* 50, 100 ... 1600, then 2000 */
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
    return 1;
}

/* SQLite's page cache gives each connection a bulk allocation of 20 pages at its first
 * read, and builds its free list through all of them, so all of it is resident whatever the
 * connection then uses. A worker's pool keeps many tenant files open, each reading a few
 * pages per request: most of that block would be memory nobody reads. Without it pages are
 * allocated one at a time as they are read. The setting is the library's, for every
 * connection of the process, and SQLite takes it only before it initialises: the first
 * open of the process makes it (afterwards SQLite refuses it and nothing changes). */
void db_sqlite_configure(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    (void)sqlite3_config(SQLITE_CONFIG_PAGECACHE, (void *)NULL, 0, 0);
}

/* target: PATH[?mode=ro|rw|rwc]. ro: read-only; rw: must exist; rwc (default): created
 * when missing. ":memory:" is a private in-memory database (tests). */
static int sq_open(const char *target, const db_options *opt, tn_db **out, char *err,
                   size_t errlen)
{
    const char *q = strchr(target, '?');
    size_t plen = q != NULL ? (size_t)(q - target) : strlen(target);
    if (plen == 0)
        return tn_errf(err, errlen, TN_INVALID, "sqlite: no file name in the URI");
    bool ro = opt->read_only, create = !ro;
    if (q != NULL) {
        const char *mode = q + 1;
        if (strcmp(mode, "mode=ro") == 0) {
            ro = true;
            create = false;
        } else if (strcmp(mode, "mode=rw") == 0) {
            create = false;
        } else if (strcmp(mode, "mode=rwc") != 0) {
            return tn_errf(err, errlen, TN_INVALID,
                           "sqlite: unknown URI option '%s' (mode=ro|rw|rwc)", mode);
        }
    }
    char *path = malloc(plen + 1);
    sqlite_db *d = calloc(1, sizeof(*d));
    if (path == NULL || d == NULL) {
        free(path);
        free(d);
        return tn_errf(err, errlen, TN_NOMEM, "sqlite: out of memory");
    }
    memcpy(path, target, plen);
    path[plen] = '\0';
    static uint32_t opened;   /* one process, one thread: a plain counter */
    d->serial = ++opened;
    bool memory = strcmp(path, ":memory:") == 0;

    db_sqlite_configure();
    int flags = (ro ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) |
                (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX;
    int rc = sqlite3_open_v2(path, &d->h, flags, NULL);
    if (rc != SQLITE_OK) {
        rc = tn_errf(err, errlen, rc == SQLITE_NOMEM ? TN_NOMEM : TN_IO,
                     "sqlite: cannot open %s: %s", path,
                     d->h != NULL ? sqlite3_errmsg(d->h) : sqlite3_errstr(rc));
        goto fail;
    }
    sqlite3_extended_result_codes(d->h, 1);
    rc = db_sqlite_harden(d->h, err, errlen);
    if (rc != TN_OK)
        goto fail;
    d->busy_timeout_ms = opt->busy_timeout_ms;
    if (sqlite3_set_authorizer(d->h, authorizer, d) != SQLITE_OK ||
        sqlite3_busy_handler(d->h, opt->busy_timeout_ms > 0 ? busy_wait : NULL, d) !=
            SQLITE_OK) {
        rc = tn_errf(err, errlen, TN_ERR, "sqlite: cannot configure the connection: %s",
                     sqlite3_errmsg(d->h));
        goto fail;
    }
    if (!ro) {
        /* A read-only connection cannot change the journal mode; it reads what is there. */
        rc = run_setup(d, "PRAGMA journal_mode=WAL", memory ? NULL : "wal", err, errlen);
        /* Keep the -wal file when the last connection closes: a worker's pool opens and
         * closes tenant files as tenants come and go, and creating and unlinking it each
         * time (a checkpoint, a file create and an unlink in the file system's journal) cost
         * more than the request that caused it. But empty it then: the last connection's
         * close checkpoints the WAL, and with a journal size limit SQLite truncates the file
         * to nothing after that checkpoint. Without one the frames stayed in the file, and
         * every later open of it (any worker's) rebuilt the WAL index from all of them, and
         * the next last close copied them into the database again and synced it twice: for
         * a file that was only read since. The limit's other use, the size a WAL is cut back
         * to when a writer starts it over, is set above what the default autocheckpoint
         * lets it reach (1000 pages), so a busy file's WAL is not cut and regrown each
         * time. */
        int persist = 1;
        if (rc == TN_OK && !memory)
            sqlite3_file_control(d->h, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
        if (rc == TN_OK && !memory)
            rc = run_setup(d, "PRAGMA journal_size_limit=" WAL_KEEP_BYTES, NULL, err, errlen);
        if (rc == TN_OK)
            rc = run_setup(d,
                           opt->sync_normal ? "PRAGMA synchronous=NORMAL"
                                            : "PRAGMA synchronous=FULL",
                           NULL, err, errlen);
        if (rc != TN_OK)
            goto fail;
    }
    rc = run_setup(d, "PRAGMA foreign_keys=ON", NULL, err, errlen);
    if (rc == TN_OK && opt->cache_kib > 0) {
        /* A bound on the pages this connection keeps (the pool's handles: many open at once) */
        char sql[48];
        snprintf(sql, sizeof(sql), "PRAGMA cache_size=-%d", opt->cache_kib);
        rc = run_setup(d, sql, NULL, err, errlen);
    }
    if (rc != TN_OK)
        goto fail;
    free(path);
    d->base.drv = &db_sqlite_driver;
    *out = &d->base;
    return TN_OK;

fail:
    sqlite3_close_v2(d->h);
    free(path);
    free(d);
    return rc;
}

/* BEGIN IMMEDIATE takes the write lock at once, waiting up to busy_timeout for it. A
 * deferred BEGIN would take it at the first write, where WAL answers SQLITE_BUSY at once when
 * another connection committed since the transaction's snapshot: the busy handler cannot
 * help there, and the caller would see TN_BUSY in the middle of its work. A read-only
 * connection cannot take the write lock and begins deferred. */
static int sq_begin(tn_db *db)
{
    return sq_exec(db, db->opt.read_only || sqlite3_db_readonly(SDB(db)->h, "main") == 1
                           ? "BEGIN"
                           : "BEGIN IMMEDIATE",
                   0, NULL, 0);
}

static int64_t sq_last_id(const tn_db *db)
{
    return sqlite3_last_insert_rowid(CSDB(db)->h);
}

static db_txn sq_txn_state(const tn_db *db)
{
    return sqlite3_get_autocommit(CSDB(db)->h) ? DB_TXN_NONE : DB_TXN_OPEN;
}

/* Clean: no transaction, and no row set in the middle of its statement (an unfinished
 * SELECT keeps a read snapshot open, which blocks WAL checkpoints). */
static bool sq_is_clean(const tn_db *db)
{
    if (!sqlite3_get_autocommit(CSDB(db)->h))
        return false;
    for (const tn_rows *r = db->rows; r != NULL; r = r->next) {
        const sqlite_rows *sr = (const sqlite_rows *)r;
        if (sr->stmt != NULL && sqlite3_stmt_busy(sr->stmt))
            return false;
    }
    return true;
}

static int sq_reset(tn_db *db)
{
    sqlite_db *d = SDB(db);
    db_rows_detach_all(db);
    if (!sqlite3_get_autocommit(d->h)) {
        int rc = sq_exec(db, "ROLLBACK", 0, NULL, 0);
        if (rc != TN_OK)
            return db_set_error(db, TN_IO, "reset: rollback failed: %s", sqlite3_errmsg(d->h));
    }
    return TN_OK;
}

/* Deferred commits: synchronous=NORMAL on this connection, whatever it was opened with, so
 * a commit writes the WAL without waiting for the disk; sq_flush makes them durable. A
 * checkpoint still flushes the WAL before it copies frames back (NORMAL does that), so the
 * WAL that sq_flush syncs holds every commit not yet in a synced database file. */
static int sq_defer_sync(tn_db *db, bool deferred)
{
    bool normal = deferred || db->opt.sync_normal;
    sqlite_db *d = (sqlite_db *)db;
    d->own = true;
    int rc = sq_exec(db, normal ? "PRAGMA synchronous=NORMAL" : "PRAGMA synchronous=FULL", 0,
                     NULL, DB_EXEC_NOCACHE);
    d->own = false;
    return rc;
}

/* Every commit so far on disk: the WAL file flushed (by any process: the page cache is
 * shared, so this covers other connections' deferred commits too). A read opens the WAL
 * first (a new connection opens it lazily); with no WAL open after that (not WAL mode, an
 * in-memory database) there is nothing to flush. */
static int sq_flush(tn_db *db)
{
    sqlite_db *d = SDB(db);
    char v[32];
    int rc = db_query_value(db, v, sizeof(v), "PRAGMA schema_version", 0, NULL);
    if (rc != TN_OK)
        return rc;
    sqlite3_file *wal = NULL;
    if (sqlite3_file_control(d->h, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal) != SQLITE_OK)
        return db_set_error(db, TN_IO, "flush: %s", sqlite3_errmsg(d->h));
    if (wal == NULL || wal->pMethods == NULL)
        return TN_OK;
    int src = wal->pMethods->xSync(wal, SQLITE_SYNC_NORMAL);
    if (src != SQLITE_OK)
        return db_set_error(db, TN_IO, "flush: the WAL could not be synced (%s)",
                            sqlite3_errstr(src));
    return TN_OK;
}

/* SQLite's data version of main (SQLITE_FCNTL_DATA_VERSION, no statement, no system call):
 * the pager's counter, moved whenever its cache had to be dropped because the file changed
 * (seen at the start of a read transaction) and at each commit of this handle's. It says
 * nothing of another connection's commit until this handle begins its next transaction, hence
 * "after a statement" in tenancy.h. Each handle counts from its own start, so the handle's
 * serial goes in the high half: a handle closed and opened again, or another one, never
 * gives a number an earlier handle gave. */
static int sq_data_version(tn_db *db, uint64_t *out)
{
    sqlite_db *d = SDB(db);
    unsigned int v = 0;
    int s = sqlite3_file_control(d->h, "main", SQLITE_FCNTL_DATA_VERSION, &v);
    if (s != SQLITE_OK)
        return db_set_error(db, map_code(s), "data version: %s", sqlite3_errstr(s));
    *out = (uint64_t)d->serial << 32 | (uint64_t)v;
    return TN_OK;
}

static void *sq_native(tn_db *db)
{
    return SDB(db)->h;
}

const db_driver db_sqlite_driver = {
    .name = "sqlite",
    .dialect = DB_DIALECT_SQLITE,
    .open = sq_open,
    .close = sq_close,
    .exec = sq_exec,
    .query = sq_query,
    .rows_next = sq_rows_next,
    .rows_ncols = sq_rows_ncols,
    .rows_colname = sq_rows_colname,
    .rows_get = sq_rows_get,
    .rows_detach = sq_rows_detach,
    .rows_free = sq_rows_free,
    .begin = sq_begin,
    .last_id = sq_last_id,
    .txn_state = sq_txn_state,
    .is_clean = sq_is_clean,
    .reset = sq_reset,
    .native = sq_native,
    .defer_sync = sq_defer_sync,
    .flush = sq_flush,
    .data_version = sq_data_version,
};

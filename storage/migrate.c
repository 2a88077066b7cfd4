/*
 * migrate.c — versioned migrations, seeds and the template clone (see migrate.h).
 *
 * Owns: reading and checking a migration folder (names, versions, checksums), the version
 * table of one target and the order files are applied in, running a seed with only the
 * parameters each statement uses, and cloning a target from a template.
 *
 * Why one transaction per file rather than one for all: a tenant that fails at file 7 keeps
 * files 1-6 and reports version 6; the next run resumes at 7. One transaction for the whole
 * run would redo everything on each attempt and hold locks for its whole length.
 *
 * Why the version table is read with a plain SELECT first: on SQLite, a tenant that is up to
 * date then costs that one query and no write lock on its file. On PostgreSQL the read is
 * the second statement of the first file's transaction, after the advisory lock: a wave
 * that applies a file to every tenant then pays one transaction per tenant and no second
 * look under the lock, and an up-to-date tenant three round trips (the lock, the read, the
 * rollback), none of which blocks its app. Only when the read fails is the table created
 * (CREATE TABLE IF NOT EXISTS, resolved in the target's own file or schema, in the first
 * file's transaction), never looked up in a catalog-wide view.
 *
 * Scripts are split with db.c's splitter (db_int.h), the one splitter of the project, so a
 * ';' inside a string, a comment, a dollar quote or a trigger body never ends a statement.
 *
 * Must not: touch a schema or file other than the connection's own, except migrate_clone
 * (which reads the template and writes the new target, through a connection of its own);
 * put anything in SQL text but constants and db_quote_ident() results; log.
 */
#include "core/first.h"
#include "core/buf.h"
#include "storage/migrate.h"
#include "core/rc.h"
#include "core/sha256.h"
#include "storage/db_int.h"   /* the script splitter, the dialect, db_sql_bind_used */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct migration {
    migration_info info;
    char *sql;
    size_t len;
    char checksum[65];
    char *storage;              /* one allocation: file name, version, name */
};

struct migration_set {
    struct migration *m;
    int n;
};

/* ---- reading files ------------------------------------------------------------------------ */

int migrate_read_file(const char *path, char **out, char *err, size_t errlen)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tn_errf(err, errlen, TN_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return tn_errf(err, errlen, TN_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > MIGRATE_FILE_MAX) {
        close(fd);
        return tn_errf(err, errlen, TN_TOOBIG, "%s: %lld bytes, more than %u", path,
                       (long long)st.st_size, MIGRATE_FILE_MAX);
    }
    size_t cap = (size_t)st.st_size + 1, len = 0;
    char *b = malloc(cap);
    if (b == NULL) {
        close(fd);
        return tn_errf(err, errlen, TN_NOMEM, "%s: out of memory", path);
    }
    for (;;) {   /* the file may grow while we read it: never past the limit */
        if (len + 1 == cap) {
            if (cap > MIGRATE_FILE_MAX) {
                free(b);
                close(fd);
                return tn_errf(err, errlen, TN_TOOBIG, "%s: more than %u bytes", path,
                               MIGRATE_FILE_MAX);
            }
            char *nb = realloc(b, cap * 2);
            if (nb == NULL) {
                free(b);
                close(fd);
                return tn_errf(err, errlen, TN_NOMEM, "%s: out of memory", path);
            }
            b = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, b + len, cap - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(b);
            close(fd);
            return tn_errf(err, errlen, TN_IO, "%s: %s", path, strerror(e));
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    b[len] = '\0';
    if (strlen(b) != len) {
        free(b);
        return tn_errf(err, errlen, TN_INVALID, "%s: holds a NUL byte (not SQL text)", path);
    }
    *out = b;
    return TN_OK;
}

/* ---- loading a folder ------------------------------------------------------------------------ */

/* "0001_create_items.sql" → version length and name span; false when not of that form. */
static bool parse_name(const char *file, size_t *vlen, const char **name, size_t *nlen)
{
    size_t n = strlen(file);
    if (n < 5 || strcmp(file + n - 4, ".sql") != 0)
        return false;
    size_t v = 0;
    while (file[v] >= '0' && file[v] <= '9')
        v++;
    if (v == 0 || v >= MIGRATE_VERSION_MAX || file[v] != '_')
        return false;
    const char *nm = file + v + 1;
    size_t l = n - 4 - (v + 1);
    if (l == 0)
        return false;
    for (size_t i = 0; i < l; i++) {
        char c = nm[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    *vlen = v;
    *name = nm;
    *nlen = l;
    return true;
}

/* Compare two versions as numbers (digit strings of any width). */
static int version_cmp(const char *a, const char *b)
{
    while (*a == '0' && a[1] != '\0')
        a++;
    while (*b == '0' && b[1] != '\0')
        b++;
    size_t la = strlen(a), lb = strlen(b);
    if (la != lb)
        return la < lb ? -1 : 1;
    return strcmp(a, b);
}

static int by_file(const void *x, const void *y)
{
    const struct migration *a = x, *b = y;
    return strcmp(a->info.file, b->info.file);
}

void migrate_free(migration_set *s)
{
    if (s == NULL)
        return;
    for (int i = 0; i < s->n; i++) {
        free(s->m[i].sql);
        free(s->m[i].storage);
    }
    free(s->m);
    free(s);
}

int migrate_load(const char *dir, migration_set **out, char *err, size_t errlen)
{
    *out = NULL;
    migration_set *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    if (dir == NULL || dir[0] == '\0') {
        *out = s;
        return TN_OK;
    }
    DIR *d = opendir(dir);
    if (d == NULL) {
        free(s);
        return tn_errf(err, errlen, TN_IO, "migrations folder %s: %s", dir, strerror(errno));
    }
    int rc = TN_OK, cap = 0;
    struct dirent *e;
    while (rc == TN_OK && (errno = 0, e = readdir(d)) != NULL) {
        const char *f = e->d_name;
        size_t fl = strlen(f);
        if (f[0] == '.' || fl < 4 || strcmp(f + fl - 4, ".sql") != 0)
            continue;   /* README, editor backups, hidden files */
        size_t vlen, nlen;
        const char *nm;
        if (!parse_name(f, &vlen, &nm, &nlen)) {
            rc = tn_errf(err, errlen, TN_INVALID,
                         "%s/%s: expected VERSION_NAME.sql (VERSION: 1 to %d digits; NAME: "
                         "letters, digits, '_' and '-')", dir, f, MIGRATE_VERSION_MAX - 1);
            break;
        }
        if (s->n == cap) {
            int nc = cap ? cap * 2 : 32;
            struct migration *nm2 = realloc(s->m, (size_t)nc * sizeof(*nm2));
            if (nm2 == NULL) {
                rc = tn_errf(err, errlen, TN_NOMEM, "out of memory");
                break;
            }
            s->m = nm2;
            cap = nc;
        }
        struct migration *m = &s->m[s->n];
        memset(m, 0, sizeof(*m));
        m->storage = malloc(fl + 1 + vlen + 1 + nlen + 1);
        if (m->storage == NULL) {
            rc = tn_errf(err, errlen, TN_NOMEM, "out of memory");
            break;
        }
        s->n++;
        char *p = m->storage;
        memcpy(p, f, fl + 1);
        m->info.file = p;
        p += fl + 1;
        memcpy(p, f, vlen);
        p[vlen] = '\0';
        m->info.version = p;
        p += vlen + 1;
        memcpy(p, nm, nlen);
        p[nlen] = '\0';
        m->info.name = p;
        char path[4096];
        if (snprintf(path, sizeof(path), "%s/%s", dir, f) >= (int)sizeof(path)) {
            rc = tn_errf(err, errlen, TN_INVALID, "%s/%s: path too long", dir, f);
            break;
        }
        rc = migrate_read_file(path, &m->sql, err, errlen);
        if (rc != TN_OK)
            break;
        m->len = strlen(m->sql);
        sha256_hex(m->sql, m->len, m->checksum);
    }
    if (rc == TN_OK && errno != 0)
        rc = tn_errf(err, errlen, TN_IO, "migrations folder %s: %s", dir, strerror(errno));
    closedir(d);
    if (rc == TN_OK && s->n > 0) {
        qsort(s->m, (size_t)s->n, sizeof(*s->m), by_file);
        /* info.checksum points into the entry itself: set once the array has stopped
         * moving (realloc while reading, then the sort). */
        for (int i = 0; i < s->n; i++)
            s->m[i].info.checksum = s->m[i].checksum;
        for (int i = 0; i < s->n && rc == TN_OK; i++) {
            for (int j = i + 1; j < s->n; j++)
                if (version_cmp(s->m[i].info.version, s->m[j].info.version) == 0) {
                    rc = tn_errf(err, errlen, TN_INVALID,
                                 "%s/%s and %s have the same version %s", dir,
                                 s->m[i].info.file, s->m[j].info.file, s->m[i].info.version);
                    break;
                }
            /* Name order is the order of application: a version that sorts by name before
             * a smaller one ("10_b.sql" before "9_a.sql") would be applied out of order. */
            if (rc == TN_OK && i > 0 &&
                version_cmp(s->m[i - 1].info.version, s->m[i].info.version) > 0)
                rc = tn_errf(err, errlen, TN_INVALID,
                             "%s/%s sorts before %s but has a higher version: give every "
                             "version the same number of digits", dir, s->m[i - 1].info.file,
                             s->m[i].info.file);
        }
    }
    if (rc != TN_OK) {
        migrate_free(s);
        return rc;
    }
    *out = s;
    return TN_OK;
}

int migrate_count(const migration_set *s) { return s != NULL ? s->n : 0; }

const migration_info *migrate_at(const migration_set *s, int i)
{
    return s != NULL && i >= 0 && i < s->n ? &s->m[i].info : NULL;
}

const char *migrate_latest(const migration_set *s)
{
    return s != NULL && s->n > 0 ? s->m[s->n - 1].info.version : "";
}

/* ---- the version table ------------------------------------------------------------------------ */

#define VERSION_TABLE_COLUMNS \
    "(version TEXT PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, " \
    "applied_at BIGINT NOT NULL)"
static const char *const create_table_sql =
    "CREATE TABLE IF NOT EXISTS tenancy_migrations " VERSION_TABLE_COLUMNS;
/* For a storage that must not have one yet (migrate_provision): without IF NOT EXISTS, so
 * a table somebody else made fails the call instead of being written over. */
static const char *const create_new_table_sql =
    "CREATE TABLE tenancy_migrations " VERSION_TABLE_COLUMNS;

static bool is_pg(const tn_db *db)
{
    return strcmp(tn_db_backend(db), "postgres") == 0;
}

/* PostgreSQL: one migrator per schema at a time (advisory locks are per database, and
 * current_schema() is the tenant's own in schema mode), until the transaction ends. The
 * two-key form keeps clear of the one-key locks an app may take. SQLite: BEGIN IMMEDIATE
 * already holds the file's write lock. */
#define LOCK_SQL "SELECT pg_advisory_xact_lock(1952804210, hashtext(current_schema()))"
static int lock_migrators(tn_db *db)
{
    if (!is_pg(db))
        return TN_OK;
    return tn_db_exec(db, LOCK_SQL, 0, NULL);
}

/* The row that says file m is applied (`now`: seconds since the epoch, as text). */
#define RECORD_SQL "INSERT INTO tenancy_migrations (version, name, checksum, applied_at) " \
                   "VALUES ($1, $2, $3, $4)"
static int record_version(tn_db *db, const struct migration *m, const char *now)
{
    const char *p[] = {m->info.version, m->info.name, m->checksum, now};
    return tn_db_exec(db, RECORD_SQL, 4, p);
}

/* The one way a migrate_error is set: where, and a message already made (by tn_errf, or the
 * connection's own). */
static void set_error(migrate_error *e, const char *file, int statement, int line,
                      const char *msg)
{
    str_copy(e->file, sizeof(e->file), file ? file : "");
    e->statement = statement;
    e->line = line;
    str_copy(e->message, sizeof(e->message), msg);
}

typedef struct applied {
    char version[MIGRATE_VERSION_MAX];
    char checksum[65];
} applied;

/* Whether the version table exists, asked of this target only: SQLite's own sqlite_master,
 * PostgreSQL's to_regclass() resolved through the connection's search_path (the tenant's
 * schema), never a listing of every schema. */
static int table_exists(tn_db *db, bool *exists)
{
    char v[16];
    int rc = is_pg(db)
                 ? db_query_value(db, v, sizeof(v),
                                  "SELECT CASE WHEN to_regclass('tenancy_migrations') IS NULL "
                                  "THEN 0 ELSE 1 END", 0, NULL)
                 : db_query_value(db, v, sizeof(v),
                                  "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                                  "name = 'tenancy_migrations'", 0, NULL);
    if (rc == TN_OK)
        *exists = strcmp(v, "1") == 0;
    return rc;
}

static int collect_applied(tn_db *db, tn_rows *rows, applied **out, int *n, migrate_error *e);

/* The rows of the version table into *out (malloc'd). *missing is set when the table does
 * not exist (then TN_OK with no rows). */
static int read_applied(tn_db *db, applied **out, int *n, bool *missing, migrate_error *e)
{
    *out = NULL;
    *n = 0;
    *missing = false;
    tn_rows *rows = NULL;
    int rc = tn_db_query(db, &rows, "SELECT version, checksum FROM tenancy_migrations", 0, NULL);
    if (rc == TN_INVALID) {   /* no such table, most likely: make sure of it */
        char why[DB_ERRLEN];
        str_copy(why, sizeof(why), tn_db_error(db));
        bool exists = true;
        if (table_exists(db, &exists) == TN_OK && !exists) {
            *missing = true;
            return TN_OK;
        }
        /* another migrator created it between the two looks: read it again, once */
        if (exists)
            rc = tn_db_query(db, &rows, "SELECT version, checksum FROM tenancy_migrations", 0,
                             NULL);
        if (rc != TN_OK) {
            set_error(e, NULL, 0, 0, rc == TN_INVALID ? why : tn_db_error(db));
            return rc;
        }
    }
    if (rc != TN_OK) {
        set_error(e, NULL, 0, 0, tn_db_error(db));
        return rc;
    }
    return collect_applied(db, rows, out, n, e);
}

/* The rows of a version-table query into *out (malloc'd); frees rows. */
static int collect_applied(tn_db *db, tn_rows *rows, applied **out, int *n, migrate_error *e)
{
    int rc, cap = 0;
    applied *a = NULL;
    while ((rc = tn_rows_next(rows)) == TN_OK) {
        const char *v = tn_rows_get(rows, 0), *c = tn_rows_get(rows, 1);
        if (*n == cap) {
            int nc = cap ? cap * 2 : 32;
            applied *na = realloc(a, (size_t)nc * sizeof(*na));
            if (na == NULL) {
                rc = TN_NOMEM;
                break;
            }
            a = na;
            cap = nc;
        }
        snprintf(a[*n].version, sizeof(a[*n].version), "%s", v ? v : "");
        snprintf(a[*n].checksum, sizeof(a[*n].checksum), "%s", c ? c : "");
        (*n)++;
    }
    if (rc != TN_DONE) {
        set_error(e, NULL, 0, 0, rc == TN_NOMEM ? "out of memory" : tn_db_error(db));
        tn_rows_free(rows);
        free(a);
        *n = 0;
        return rc;
    }
    tn_rows_free(rows);
    *out = a;
    return TN_OK;
}

static const char *highest(const applied *a, int n)
{
    const char *h = "";
    for (int i = 0; i < n; i++)
        if (h[0] == '\0' || version_cmp(a[i].version, h) > 0)
            h = a[i].version;
    return h;
}

int migrate_current(tn_db *db, char *version, size_t versionlen, migrate_error *e)
{
    memset(e, 0, sizeof(*e));
    applied *a;
    int n;
    bool missing;
    int rc = read_applied(db, &a, &n, &missing, e);
    if (rc == TN_OK)
        snprintf(version, versionlen, "%s", highest(a, n));
    free(a);
    return rc;
}

static void warn(migrate_result *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(migrate_result *res, const char *fmt, ...)
{
    if (res->nwarnings < MIGRATE_MAX_WARNINGS) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(res->warnings[res->nwarnings], sizeof(res->warnings[0]), fmt, ap);
        va_end(ap);
    }
    res->nwarnings++;
}

/* ---- running a script --------------------------------------------------------------------------- */

static bool word_eq(const char *s, size_t n, const char *w)
{
    return strlen(w) == n && strncasecmp(s, w, n) == 0;
}

/* Transaction control inside a script would end the transaction the script runs in. */
static bool is_txn_control(const char *stmt, size_t len)
{
    size_t n = 0;
    while (n < len && ((stmt[n] >= 'a' && stmt[n] <= 'z') || (stmt[n] >= 'A' && stmt[n] <= 'Z')))
        n++;
    if (word_eq(stmt, n, "BEGIN") || word_eq(stmt, n, "COMMIT") || word_eq(stmt, n, "END") ||
        word_eq(stmt, n, "START"))
        return true;
    if (word_eq(stmt, n, "ROLLBACK")) {   /* ROLLBACK TO SAVEPOINT stays inside */
        size_t p = n;
        while (p < len && (stmt[p] == ' ' || stmt[p] == '\t' || stmt[p] == '\n' ||
                           stmt[p] == '\r'))
            p++;
        return !(p + 2 <= len && strncasecmp(stmt + p, "TO", 2) == 0);
    }
    return false;
}

static void refuse_txn_control(migrate_error *e, const char *label, int statement, int line)
{
    set_error(e, label, statement, line,
              "transaction control is not allowed here: each file already runs in a "
              "transaction of its own");
}

/* Run the statements of sql inside the caller's transaction. nparams < 0: no parameters at
 * all (a migration); otherwise each statement gets the ones it uses. */
static int run_statements(tn_db *db, const char *label, const char *sql, int nparams,
                          const char *const *params, unsigned flags, migrate_error *e)
{
    db_dialect dialect = db->drv->dialect;
    size_t total = strlen(sql), len, longest = 0;
    db_splitter sp;
    const char *stmt;
    int line, r;
    db_split_init(&sp, dialect, sql, total);
    while ((r = db_split_next(&sp, &stmt, &len, &line)) == 1)
        if (len > longest)
            longest = len;
    if (r < 0) {
        set_error(e, label, 0, line, "unterminated string, quoted name or comment");
        return TN_INVALID;
    }
    char *copy = malloc(longest + 1);
    if (copy == NULL) {
        set_error(e, label, 0, 0, "out of memory");
        return TN_NOMEM;
    }
    int rc = TN_OK, n = 0;
    db_split_init(&sp, dialect, sql, total);
    while (rc == TN_OK && db_split_next(&sp, &stmt, &len, &line) == 1) {
        n++;
        if (is_txn_control(stmt, len)) {
            refuse_txn_control(e, label, n, line);
            rc = TN_INVALID;
            break;
        }
        if (nparams < 0) {
            memcpy(copy, stmt, len);
            copy[len] = '\0';
            rc = db_exec_flags(db, copy, 0, NULL, flags);
        } else {
            char *bound = NULL;
            int used[64], nused = 0;
            long bad = 0;
            rc = db_sql_bind_used(dialect, stmt, len, nparams, &bound, used, &nused, &bad);
            if (rc != TN_OK) {
                char msg[128] = "out of memory";
                if (rc != TN_NOMEM)
                    rc = tn_errf(msg, sizeof(msg), rc, "placeholder $%ld: only $1..$%d are bound",
                                 bad, nparams);
                set_error(e, label, n, line, msg);
                break;
            }
            const char *vals[64];
            for (int k = 0; k < nused; k++)
                vals[k] = params[used[k]];
            rc = db_exec_flags(db, bound, nused, vals, flags);
            free(bound);
        }
        if (rc != TN_OK)
            set_error(e, label, n, line, tn_db_error(db));
    }
    free(copy);
    return rc;
}

/* Roll back after a failure, keeping the first error (the rollback's own is secondary). */
static void abandon(tn_db *db)
{
    if (!db_is_clean(db))
        tn_db_rollback(db);
}

/* ---- batches: statements of one transaction sent in one pipeline ------------------------------ */

/* The most statements provision_batched sends in one pipeline; a longer provision goes
 * statement by statement. As for apply_batched, the results are a few bytes each (DDL,
 * INSERTs), so the server never waits for the client to read while it is still sending. */
#define PROVISION_BATCH_MAX 256

/* Where a statement of the batch came from, to say where it failed as run_statements says it. */
typedef struct origin {
    const char *label;   /* its file, the seed's label, "" for the prelude, NULL for ours */
    int statement, line;
    char kind;           /* 'p' prelude, 'm' a migration's, 'r' a version row, 's' the seed's,
                            'c' the caller's (apply_batched's pre), 0 ours */
} origin;

typedef struct pbatch {
    db_stmt st[PROVISION_BATCH_MAX];
    origin org[PROVISION_BATCH_MAX];
    void *owned[2 * PROVISION_BATCH_MAX];   /* statement copies and parameter arrays */
    int n, nowned;
    bool full;
} pbatch;

/* p, freed with the batch; NULL (p freed) when there is no room or p is NULL. */
static void *pb_own(pbatch *b, void *p)
{
    if (p != NULL && b->nowned == (int)TN_ARRAY_LEN(b->owned)) {
        free(p);
        return NULL;
    }
    if (p != NULL)
        b->owned[b->nowned++] = p;
    return p;
}

static void pb_add(pbatch *b, const char *sql, int nparams, const char *const *params,
                   unsigned flags, origin o)
{
    if (b->n == PROVISION_BATCH_MAX) {
        b->full = true;
        return;
    }
    b->st[b->n] = (db_stmt){sql, nparams, params, flags};
    b->org[b->n++] = o;
}

/* Each statement of text added to b, bound to what it uses of params when nparams >= 0 (the
 * seed's, as run_statements binds them). TN_DECLINED for what run_statements reports itself
 * (unsplittable text, a placeholder out of range, and transaction control when refuse is
 * NULL) or no room; TN_INVALID for transaction control, refused in *refuse as run_statements
 * refuses it; TN_NOMEM. */
static int pb_text(pbatch *b, db_dialect dialect, const char *text, int nparams,
                   const char *const *params, unsigned flags, const char *label, char kind,
                   migrate_error *refuse)
{
    size_t total = strlen(text), len;
    db_splitter sp;
    const char *stmt;
    int line, r, k = 0;
    db_split_init(&sp, dialect, text, total);   /* unsplittable text first, as run_statements */
    while ((r = db_split_next(&sp, &stmt, &len, &line)) == 1)
        ;
    if (r < 0)
        return TN_DECLINED;
    db_split_init(&sp, dialect, text, total);
    while ((r = db_split_next(&sp, &stmt, &len, &line)) == 1) {
        k++;
        if (is_txn_control(stmt, len) && refuse != NULL) {
            refuse_txn_control(refuse, label, k, line);
            return TN_INVALID;
        }
        if (is_txn_control(stmt, len) || b->n == PROVISION_BATCH_MAX)
            return TN_DECLINED;
        origin o = {label, k, line, kind};
        if (nparams < 0) {
            char *copy = pb_own(b, malloc(len + 1));
            if (copy == NULL)
                return TN_NOMEM;
            memcpy(copy, stmt, len);
            copy[len] = '\0';
            pb_add(b, copy, 0, NULL, flags, o);
            continue;
        }
        char *bound = NULL;
        int used[64], nused = 0;
        long bad = 0;
        int rc = db_sql_bind_used(dialect, stmt, len, nparams, &bound, used, &nused, &bad);
        if (rc != TN_OK)
            return rc == TN_NOMEM ? TN_NOMEM : TN_DECLINED;
        if (pb_own(b, bound) == NULL)
            return TN_NOMEM;
        const char **vals = pb_own(b, malloc(sizeof(*vals) * (size_t)(nused > 0 ? nused : 1)));
        if (vals == NULL)
            return TN_NOMEM;
        for (int i = 0; i < nused; i++)
            vals[i] = params[used[i]];
        pb_add(b, bound, nused, vals, flags, o);
    }
    return TN_OK;
}

/* Send b with the COMMIT in one pipeline. On failure *where is the failing statement's origin,
 * commit's when the COMMIT itself failed. */
static int pb_run(tn_db *db, pbatch *b, origin commit, origin *where)
{
    int failed;
    int rc = db_exec_batch(db, b->st, b->n, DB_BATCH_COMMIT, NULL, &failed);
    if (rc != TN_OK)
        *where = failed < b->n ? b->org[failed] : commit;
    return rc;
}

static void pb_free(pbatch *b)
{
    if (b == NULL)
        return;
    for (int i = 0; i < b->nowned; i++)
        free(b->owned[i]);
    free(b);
}

/* A file of at most this many statements is applied in one round trip (apply_batched). The
 * results of a migration's statements are a few bytes each, so the server never waits for
 * the client to read while the client is still sending. */
#define BATCH_MAX 64

/* PostgreSQL, in an open transaction: `pre` (the caller's own statements, or none), the
 * file's statements, its version row and the COMMIT in one round trip, where apply_one's
 * path sends each on its own. Failures are reported as run_statements reports them (the
 * statement's number and line). TN_DECLINED when the file is too long for one batch (nothing
 * sent, the transaction still open), or when the last of `pre` failed (a guard: rolled
 * back, nothing of the file ran). */
static int apply_batched(tn_db *db, const struct migration *m, const db_stmt *pre, int npre,
                         migrate_error *e)
{
    pbatch *b = calloc(1, sizeof(*b));
    const origin record = {m->info.file, 0, 0, 'r'};
    int rc = b != NULL ? TN_OK : TN_NOMEM;
    for (int i = 0; i < npre && rc == TN_OK; i++)   /* 'c': the caller's, numbered from 1 */
        pb_add(b, pre[i].sql, pre[i].nparams, pre[i].params, pre[i].flags,
               (origin){NULL, i + 1, 0, 'c'});
    if (rc == TN_OK)
        rc = pb_text(b, db->drv->dialect, m->sql, -1, NULL, 0, m->info.file, 'm', e);
    if (rc == TN_OK && b->n - npre > BATCH_MAX)
        rc = TN_DECLINED;   /* too long: nothing sent, the transaction still open */
    char now[24];
    snprintf(now, sizeof(now), "%lld", (long long)time(NULL));
    const char *p[] = {m->info.version, m->info.name, m->checksum, now};
    bool sent = false;
    if (rc == TN_OK) {
        pb_add(b, RECORD_SQL, 4, p, 0, record);
        origin o;
        sent = true;
        rc = pb_run(db, b, record, &o);
        if (rc != TN_OK && o.kind == 'c' && o.statement == npre)
            rc = TN_DECLINED;   /* the caller's guard said no: nothing of the file ran */
        else if (rc != TN_OK && o.kind == 'c')   /* before the guard: the version is not known */
            set_error(e, NULL, 0, 0, tn_db_error(db));
        else if (rc != TN_OK)
            set_error(e, o.label, o.statement, o.line, tn_db_error(db));
    }
    pb_free(b);
    if (rc == TN_NOMEM)
        set_error(e, m->info.file, 0, 0, "out of memory");
    if (rc != TN_OK && (sent || rc != TN_DECLINED))
        abandon(db);
    return rc;
}

/* Apply one file in one transaction. *skipped: another run applied it meanwhile. locked:
 * the transaction is open already, under the lock, and the version table was read in it
 * (read_locked), so there is nothing to look at again. With
 * create_table (the version table was missing), the table is created first in the same
 * transaction, under the same lock: a new tenant's first migration costs one transaction,
 * not two (if the file fails, the table goes with it and the next run creates it again).
 * Two migrators that both found no version table would otherwise race in CREATE TABLE IF
 * NOT EXISTS (PostgreSQL checks existence before it inserts into its catalog, so the loser
 * fails on pg_type's unique index): the advisory lock, or SQLite's write lock, serialises
 * them. */
static int apply_one(tn_db *db, const struct migration *m, bool create_table, bool locked,
                     bool *skipped, migrate_error *e)
{
    *skipped = false;
    int rc = TN_OK;
    if (locked && !create_table) {
        rc = apply_batched(db, m, NULL, 0, e);
        if (rc != TN_DECLINED)
            return rc;
        rc = TN_OK;
    }
    if (!locked) {
        rc = tn_db_begin(db);
        if (rc != TN_OK) {
            set_error(e, m->info.file, 0, 0, tn_db_error(db));
            return rc;
        }
        rc = lock_migrators(db);
    }
    if (rc == TN_OK && create_table)
        rc = tn_db_exec(db, create_table_sql, 0, NULL);
    char have[80];
    const char *pv[] = {m->info.version};
    if (rc == TN_OK && !locked) {
        rc = db_query_value(db, have, sizeof(have),
                            "SELECT checksum FROM tenancy_migrations WHERE version = $1", 1, pv);
        if (rc == TN_OK) {   /* applied by someone else since we looked */
            tn_db_rollback(db);
            *skipped = true;
            return TN_OK;
        }
        if (rc == TN_NOTFOUND)
            rc = TN_OK;
    }
    if (rc != TN_OK) {
        set_error(e, m->info.file, 0, 0, tn_db_error(db));
        abandon(db);
        return rc;
    }
    rc = run_statements(db, m->info.file, m->sql, -1, NULL, 0, e);
    if (rc != TN_OK) {
        abandon(db);
        return rc;
    }
    char now[24];
    snprintf(now, sizeof(now), "%lld", (long long)time(NULL));
    rc = record_version(db, m, now);
    if (rc == TN_OK)
        rc = tn_db_commit(db);
    if (rc != TN_OK) {
        set_error(e, m->info.file, 0, 0, tn_db_error(db));
        abandon(db);
    }
    return rc;
}

/* PostgreSQL: open the first file's transaction, take the lock, then read the version
 * table in it. What is read under the lock needs no second look before the first file, and
 * the read needs no transaction of its own: a wave that applies a file to every tenant pays
 * one transaction per tenant, with the scope, the role and the lock in the round trip of
 * BEGIN (pg.c), as a hand-written script would. TN_OK with the transaction open; TN_DECLINED
 * when the read failed (no version table, most likely: rolled back, and the caller reads
 * as SQLite does, which tells a missing table from an error and creates it); or an error
 * with e set. */
static int read_locked(tn_db *db, applied **out, int *n, migrate_error *e)
{
    *out = NULL;
    *n = 0;
    int rc = tn_db_begin(db);
    tn_rows *rows = NULL;
    if (rc == TN_OK) {   /* the lock, then the read, in the round trip of BEGIN */
        const db_stmt st[] = {{LOCK_SQL, 0, NULL},
                              {"SELECT version, checksum FROM tenancy_migrations", 0, NULL}};
        int failed;
        rc = db_exec_batch(db, st, 2, 0, &rows, &failed);
    }
    if (rc == TN_OK)
        rc = collect_applied(db, rows, out, n, e);
    else
        set_error(e, NULL, 0, 0, tn_db_error(db));
    if (rc != TN_OK) {
        abandon(db);
        if (rc == TN_INVALID) {
            memset(e, 0, sizeof(*e));
            return TN_DECLINED;
        }
    }
    return rc;
}

/* What the guard of apply_expected reads: the version table holds exactly the files before
 * the first pending one, with their checksums ($1: "version:checksum" of each, joined by ','
 * in byte order), or the statement fails (a division by zero computed from the aggregate,
 * so that the planner cannot fold it into an error of every run). One aggregate over a
 * table of a few rows: about what reading them costs. */
#define GUARD_SQL                                                                        \
    "SELECT 1 / (CASE WHEN string_agg(version || ':' || checksum, ',' "                  \
    "ORDER BY version COLLATE \"C\") = $1 THEN 1 ELSE 0 END) FROM tenancy_migrations"

static int by_version_bytes(const void *x, const void *y)
{
    const struct migration *a = *(const struct migration *const *)x;
    const struct migration *b = *(const struct migration *const *)y;
    return strcmp(a->info.version, b->info.version);
}

/* GUARD_SQL's $1 for files [0, n). */
static int guard_text(const migration_set *s, int n, buf *out)
{
    const struct migration **v = malloc((size_t)n * sizeof(*v));
    if (v == NULL)
        return TN_NOMEM;
    for (int i = 0; i < n; i++)
        v[i] = &s->m[i];
    qsort(v, (size_t)n, sizeof(*v), by_version_bytes);
    for (int i = 0; i < n; i++) {
        if (i > 0)
            buf_lit(out, ",");
        buf_puts(out, v[i]->info.version);
        buf_lit(out, ":");
        buf_puts(out, v[i]->checksum);
    }
    free(v);
    return out->oom ? TN_NOMEM : TN_OK;
}

/* PostgreSQL, when the caller knows the version the target should be at (`expect`, the
 * registry's copy): the lock, a guard that the version table holds exactly the files up to
 * it, the next file, its version row and the COMMIT, all in the round trip of BEGIN. A wave
 * that applies one file to every tenant then costs one round trip per tenant. TN_DECLINED
 * (nothing kept, the transaction rolled back) when the guess does not hold or the file
 * cannot go in one batch: migrate_apply then reads the table as usual. *done: the file's
 * index when it was applied, s->n when `expect` is the last file and the guard confirmed
 * that the table holds exactly the set (nothing to apply: the lock, the guard and the COMMIT
 * in one round trip, where reading the table and ending its transaction took two; a
 * deploy with nothing new pays it for every tenant). */
static int apply_expected(tn_db *db, const migration_set *s, const char *expect, int *done,
                          migrate_result *res)
{
    int k = 0;   /* the first file after `expect` */
    while (k < s->n && version_cmp(s->m[k].info.version, expect) <= 0)
        k++;
    if (k == 0 || version_cmp(s->m[k - 1].info.version, expect) != 0)
        return TN_DECLINED;   /* `expect` names no file */
    buf want = BUF_INIT;
    int rc = guard_text(s, k, &want);
    if (k == s->n) {   /* nothing pending, if the guess holds */
        if (rc == TN_OK)
            rc = tn_db_begin(db);
        if (rc == TN_OK) {
            const char *gp[] = {want.p};
            const db_stmt st[] = {{LOCK_SQL, 0, NULL}, {GUARD_SQL, 1, gp}};
            int failed;
            rc = db_exec_batch(db, st, 2, DB_BATCH_COMMIT, NULL, &failed);
            abandon(db);
        }
        buf_free(&want);
        if (rc == TN_NOMEM)
            set_error(&res->error, NULL, 0, 0, "out of memory");
        if (rc != TN_OK)
            return rc == TN_NOMEM ? rc : TN_DECLINED;   /* migrate_apply reads and says */
        snprintf(res->from, sizeof(res->from), "%s", expect);
        snprintf(res->to, sizeof(res->to), "%s", expect);
        *done = s->n;
        return TN_OK;
    }
    if (rc == TN_OK)
        rc = tn_db_begin(db);
    if (rc == TN_OK) {
        const char *gp[] = {want.p};
        const db_stmt pre[] = {{LOCK_SQL, 0, NULL}, {GUARD_SQL, 1, gp}};
        rc = apply_batched(db, &s->m[k], pre, 2, &res->error);
        if (rc == TN_DECLINED)
            abandon(db);
    }
    buf_free(&want);
    if (rc == TN_OK) {
        snprintf(res->from, sizeof(res->from), "%s", s->m[k - 1].info.version);
        *done = k;
    } else if (rc == TN_NOMEM) {
        set_error(&res->error, NULL, 0, 0, "out of memory");
    } else if (rc != TN_DECLINED && res->error.file[0] != '\0') {
        /* the guard passed, so the table holds exactly the files up to k - 1 */
        snprintf(res->from, sizeof(res->from), "%s", s->m[k - 1].info.version);
        snprintf(res->to, sizeof(res->to), "%s", s->m[k - 1].info.version);
        res->pending = s->n - k;
    }
    return rc;
}

int migrate_apply_expected(tn_db *db, const migration_set *s, const char *expect,
                           migrate_result *res)
{
    memset(res, 0, sizeof(*res));
    int done = -1;
    if (db != NULL && s != NULL && expect != NULL && expect[0] != '\0' && is_pg(db)) {
        int rc = apply_expected(db, s, expect, &done, res);
        if (rc != TN_OK && rc != TN_DECLINED)
            return rc;   /* the file failed: res->error says where, as migrate_apply would */
        if (rc == TN_DECLINED)
            memset(res, 0, sizeof(*res));
    }
    if (done < 0)
        return migrate_apply(db, s, res);
    if (done == s->n)   /* current: confirmed by the guard */
        return TN_OK;
    char from[MIGRATE_VERSION_MAX];
    snprintf(from, sizeof(from), "%s", res->from);
    if (done == s->n - 1) {   /* that was the last file */
        snprintf(res->to, sizeof(res->to), "%s", s->m[done].info.version);
        res->applied = 1;
        return TN_OK;
    }
    int rc = migrate_apply(db, s, res);   /* the files after it, as usual */
    snprintf(res->from, sizeof(res->from), "%s", from);
    res->applied++;
    return rc;
}

int migrate_apply(tn_db *db, const migration_set *s, migrate_result *res)
{
    memset(res, 0, sizeof(*res));
    if (db == NULL || s == NULL) {
        set_error(&res->error, NULL, 0, 0, "no connection or no migration set");
        return TN_INVALID;
    }
    applied *a = NULL;
    int na = 0;
    bool missing = false, locked = false;
    int rc = TN_DECLINED;
    if (is_pg(db) && s->n > 0) {
        rc = read_locked(db, &a, &na, &res->error);
        locked = rc == TN_OK;
    }
    if (rc == TN_DECLINED)
        rc = read_applied(db, &a, &na, &missing, &res->error);
    if (rc != TN_OK)
        return rc;
    if (missing && s->n == 0)
        return TN_OK;   /* nothing to apply, nothing to create */
    bool create_table = missing;   /* with the first file applied (apply_one) */
    snprintf(res->from, sizeof(res->from), "%s", highest(a, na));
    char top[MIGRATE_VERSION_MAX];
    snprintf(top, sizeof(top), "%s", res->from);

    /* What is applied against what the folder holds. */
    bool *done = calloc((size_t)s->n + 1, sizeof(bool));
    if (done == NULL) {
        free(a);
        if (locked)
            abandon(db);
        set_error(&res->error, NULL, 0, 0, "out of memory");
        return TN_NOMEM;
    }
    for (int i = 0; i < na; i++) {
        int k = -1;
        for (int j = 0; j < s->n && k < 0; j++)
            if (version_cmp(a[i].version, s->m[j].info.version) == 0)
                k = j;
        if (k < 0) {
            warn(res, "version %s is applied but no file has it", a[i].version);
            continue;
        }
        done[k] = true;
        if (strcmp(a[i].checksum, s->m[k].checksum) != 0)
            warn(res, "%s was changed after it was applied (checksum %.12s..., applied "
                      "%.12s...)", s->m[k].info.file, s->m[k].checksum, a[i].checksum);
    }
    free(a);
    for (int j = 0; j < s->n; j++)
        if (!done[j])
            res->pending++;
    if (locked && res->pending == 0) {   /* up to date: end the read's transaction */
        rc = tn_db_rollback(db);
        if (rc != TN_OK)
            set_error(&res->error, NULL, 0, 0, tn_db_error(db));
        locked = false;
    }

    for (int j = 0; j < s->n && rc == TN_OK; j++) {
        if (done[j])
            continue;
        const struct migration *m = &s->m[j];
        if (top[0] != '\0' && version_cmp(m->info.version, top) < 0)
            warn(res, "%s is applied out of order (version %s is applied already)",
                 m->info.file, top);
        bool skipped = false;
        rc = apply_one(db, m, create_table, locked, &skipped, &res->error);
        locked = false;
        if (rc != TN_OK)
            break;
        create_table = false;
        res->pending--;
        if (!skipped)
            res->applied++;
        if (top[0] == '\0' || version_cmp(m->info.version, top) > 0)
            snprintf(top, sizeof(top), "%s", m->info.version);
    }
    free(done);
    snprintf(res->to, sizeof(res->to), "%s", top);
    return rc;
}

/* ---- a new storage: everything in one transaction --------------------------------------------- */

/* PostgreSQL, in the transaction migrate_provision opened: the prelude, the version table,
 * every file with its version row, the seed and the COMMIT in one round trip, where the
 * statement-by-statement path sends each on its own (a dozen round trips for a small schema,
 * each a sleep and a wake-up at both ends, for every tenant of a bulk create). TN_OK;
 * TN_DECLINED when it does not fit one batch or a text is one run_statements would refuse
 * (nothing sent, the transaction still open: that path then runs and says why); or the
 * failing statement's error, res saying where as that path would (rolled back). */
static int provision_batched(tn_db *db, const char *prelude, const migration_set *s,
                             const char *seed_label, const char *seed_sql, int nparams,
                             const char *const *params, const char *now, migrate_result *res)
{
    pbatch *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return TN_DECLINED;
    db_dialect dialect = db->drv->dialect;
    const origin ours = {NULL, 0, 0, 0};
    int rc = TN_OK;
    if (prelude != NULL)
        rc = pb_text(b, dialect, prelude, -1, NULL, DB_EXEC_CATALOG, "", 'p', NULL);
    else
        pb_add(b, LOCK_SQL, 0, NULL, 0, ours);   /* as migrate_provision says why */
    if (rc == TN_OK && s->n > 0)
        pb_add(b, create_new_table_sql, 0, NULL, 0, ours);
    for (int j = 0; j < s->n && rc == TN_OK; j++) {
        const struct migration *m = &s->m[j];
        rc = pb_text(b, dialect, m->sql, -1, NULL, 0, m->info.file, 'm', NULL);
        const char **p = rc == TN_OK ? pb_own(b, malloc(4 * sizeof(*p))) : NULL;
        if (rc == TN_OK && p == NULL)
            rc = TN_NOMEM;
        if (rc == TN_OK) {
            p[0] = m->info.version, p[1] = m->info.name, p[2] = m->checksum, p[3] = now;
            pb_add(b, RECORD_SQL, 4, p, 0, (origin){m->info.file, 0, 0, 'r'});
        }
    }
    if (rc == TN_OK && seed_sql != NULL)
        rc = pb_text(b, dialect, seed_sql, nparams, params, 0, seed_label, 's', NULL);
    if (rc == TN_OK && (b->full || b->n == 0))
        rc = TN_DECLINED;
    origin o;
    if (rc == TN_OK && (rc = pb_run(db, b, ours, &o)) != TN_OK) {
        res->prelude_failed = o.kind == 'p';
        res->seed_failed = o.kind == 's';
        set_error(&res->error, o.label, o.statement, o.line, tn_db_error(db));
        abandon(db);
    }
    pb_free(b);
    if (rc == TN_NOMEM)
        rc = TN_DECLINED;   /* the other path says so if it runs out too */
    return rc;
}

int migrate_provision(tn_db *db, const char *prelude, const migration_set *s,
                      const char *seed_label, const char *seed_sql, int nparams,
                      const char *const *params, migrate_result *res)
{
    memset(res, 0, sizeof(*res));
    if (db == NULL || s == NULL || nparams < 0 || nparams > 64 ||
        (nparams > 0 && params == NULL)) {
        set_error(&res->error, NULL, 0, 0, "bad arguments");
        return TN_INVALID;
    }
    res->pending = s->n;
    if (s->n == 0 && seed_sql == NULL && prelude == NULL)
        return TN_OK;
    char now[24];
    snprintf(now, sizeof(now), "%lld", (long long)time(NULL));
    int rc = tn_db_begin(db);
    if (rc != TN_OK) {
        set_error(&res->error, NULL, 0, 0, tn_db_error(db));
        return rc;
    }
    if (is_pg(db)) {
        rc = provision_batched(db, prelude, s, seed_label, seed_sql, nparams, params, now, res);
        if (rc == TN_OK)
            goto done;
        if (rc != TN_DECLINED)
            goto fail;
        rc = TN_OK;
    }
    if (prelude != NULL) {
        rc = run_statements(db, "", prelude, -1, NULL, DB_EXEC_CATALOG, &res->error);
        res->prelude_failed = rc != TN_OK;
    }
    /* the migrators' lock (apply_one): a `migrate` run that finds the storage meanwhile
     * waits for this transaction, then sees its versions. Not when the prelude made the
     * storage in this very transaction: nobody else can see it before the commit, so the
     * lock would only cost a round trip per new tenant. */
    if (rc == TN_OK && prelude == NULL)
        rc = lock_migrators(db);
    if (rc == TN_OK && s->n > 0)
        rc = tn_db_exec(db, create_new_table_sql, 0, NULL);
    if (rc != TN_OK) {
        set_error(&res->error, NULL, 0, 0, tn_db_error(db));
        goto fail;
    }
    for (int j = 0; j < s->n; j++) {
        const struct migration *m = &s->m[j];
        rc = run_statements(db, m->info.file, m->sql, -1, NULL, 0, &res->error);
        if (rc != TN_OK)
            goto fail;
        rc = record_version(db, m, now);
        if (rc != TN_OK) {
            set_error(&res->error, m->info.file, 0, 0, tn_db_error(db));
            goto fail;
        }
    }
    if (seed_sql != NULL) {
        rc = run_statements(db, seed_label, seed_sql, nparams, params, 0, &res->error);
        if (rc != TN_OK) {
            res->seed_failed = true;
            goto fail;
        }
    }
    rc = tn_db_commit(db);
    if (rc != TN_OK) {
        set_error(&res->error, NULL, 0, 0, tn_db_error(db));
        goto fail;
    }
done:   /* committed, by either path: every file is applied */
    for (int j = 0; j < s->n; j++)
        if (res->to[0] == '\0' || version_cmp(s->m[j].info.version, res->to) > 0)
            snprintf(res->to, sizeof(res->to), "%s", s->m[j].info.version);
    res->applied = s->n;
    res->pending = 0;
    return TN_OK;
fail:
    abandon(db);   /* nothing of it is left (provision_batched has rolled back already) */
    return rc;
}

/* ---- seeds ------------------------------------------------------------------------------------- */

int migrate_seed(tn_db *db, const char *label, const char *sql, int nparams,
                 const char *const *params, migrate_error *e)
{
    memset(e, 0, sizeof(*e));
    if (db == NULL || sql == NULL || nparams < 0 || nparams > 64 ||
        (nparams > 0 && params == NULL)) {
        set_error(e, label, 0, 0, "bad arguments");
        return TN_INVALID;
    }
    int rc = tn_db_begin(db);
    if (rc != TN_OK) {
        set_error(e, label, 0, 0, tn_db_error(db));
        return rc;
    }
    rc = run_statements(db, label, sql, nparams, params, 0, e);
    if (rc == TN_OK) {
        rc = tn_db_commit(db);
        if (rc != TN_OK)
            set_error(e, label, 0, 0, tn_db_error(db));
    }
    if (rc != TN_OK)
        abandon(db);
    return rc;
}

/* ---- cloning a template -------------------------------------------------------------------------- */

/* fsync a file, then its folder (the new directory entry). */
static int sync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int r = fsync(fd);
    close(fd);
    return r;
}

/*
 * SQLite: VACUUM INTO needs ATTACH, which every tenant connection denies (sqlite.c's
 * authorizer), so the template is read through db_sqlite_vacuum_into's private connection
 * (sqlite_read.c), which runs that one constant statement with the new file's path bound as
 * a parameter, hardened like every other. VACUUM INTO reads in one transaction: a consistent
 * copy even while the template is written to.
 */
static int clone_sqlite(const storage_target *from, const storage_target *to, char *err,
                        size_t errlen)
{
    struct stat st;
    if (stat(to->name, &st) == 0)
        return tn_errf(err, errlen, TN_EXISTS, "%s exists already", to->name);
    if (stat(from->name, &st) < 0)
        return tn_errf(err, errlen, TN_NOTFOUND, "the template's file %s: %s", from->name,
                       strerror(errno));
    int rc = db_sqlite_vacuum_into(from->name, to->name, from->busy_timeout_ms, err, errlen);
    if (rc == TN_OK && sync_path(to->name) < 0)
        rc = tn_errf(err, errlen, TN_IO, "cannot sync %s: %s", to->name, strerror(errno));
    if (rc != TN_OK) {   /* we checked it did not exist: whatever is there is ours */
        unlink(to->name);
        char j[4200];
        snprintf(j, sizeof(j), "%s-journal", to->name);
        unlink(j);
    }
    return rc;
}

/* Database mode: on the server's maintenance connection (the dsn's own database). */
static int clone_database(const storage_target *from, const storage_target *to, char *err,
                          size_t errlen)
{
    char qf[80], qt[80];
    if (db_quote_ident(from->name, qf, sizeof(qf)) != TN_OK ||
        db_quote_ident(to->name, qt, sizeof(qt)) != TN_OK)
        return tn_errf(err, errlen, TN_INVALID, "'%s' or '%s' is not a valid database name",
                       from->name, to->name);
    if (from->server == NULL || to->server == NULL || strcmp(from->server, to->server) != 0)
        return tn_errf(err, errlen, TN_INVALID,
                       "the template and the new tenant must be on the same server");
    tn_db *db = NULL;
    char e[512];
    int rc = db_open(to->server, NULL, &db, e, sizeof(e));
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "cannot reach the server: %s", e);
    /* A point lookup by name (pg_database's unique index), for a clear TN_EXISTS. */
    char one[8];
    const char *p[] = {to->name};
    rc = db_query_value(db, one, sizeof(one), "SELECT 1 FROM pg_database WHERE datname = $1", 1,
                        p);
    if (rc == TN_OK) {
        rc = tn_errf(err, errlen, TN_EXISTS, "database %s exists already", to->name);
    } else if (rc != TN_NOTFOUND) {
        tn_errf(err, errlen, rc, "cannot read pg_database: %s", tn_db_error(db));
    } else {
        char sql[256];
        snprintf(sql, sizeof(sql), "CREATE DATABASE %s TEMPLATE %s", qt, qf);
        rc = tn_db_exec(db, sql, 0, NULL);
        if (rc != TN_OK)
            tn_errf(err, errlen, rc, "CREATE DATABASE %s TEMPLATE %s: %s", to->name, from->name,
                    tn_db_error(db));
    }
    db_close(db);
    return rc;
}

int migrate_clone(const storage_target *from, const storage_target *to, char *err,
                  size_t errlen)
{
    if (from == NULL || to == NULL || from->name == NULL || to->name == NULL)
        return tn_errf(err, errlen, TN_INVALID, "migrate_clone: no template or no target");
    if (from->kind != to->kind)
        return tn_errf(err, errlen, TN_INVALID,
                       "the template and the new tenant are not in the same kind of storage");
    switch (to->kind) {
    case TARGET_SQLITE:
        return clone_sqlite(from, to, err, errlen);
    case TARGET_PG_DATABASE: {
        int rc = clone_database(from, to, err, errlen);
        if (rc != TN_OK || to->role == NULL)
            return rc;
        /* The copy's objects still belong to the template's role, and the database to the
         * login: both go to the new tenant's role, or the clone is dropped (all or nothing;
         * the caller drops only what it knows it made). */
        rc = target_role_repair(NULL, to, err, errlen);
        if (rc != TN_OK) {
            char e2[256];
            (void)target_drop(to, e2, sizeof(e2));
        }
        return rc;
    }
    case TARGET_PG_SCHEMA:
    default:
        return tn_errf(err, errlen, TN_DECLINED,
                       "PostgreSQL cannot clone a schema: the migrations are replayed instead");
    }
}

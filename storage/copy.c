/*
 * copy.c — table definitions and rows between backends (see copy.h).
 *
 * Owns: reading a table's definition from SQLite's pragmas or PostgreSQL's catalog (always
 * one relation of the connection's own schema: the catalog queries are filtered by the
 * relation's oid, found by name in current_schema()), rebuilding it in the other dialect,
 * and moving rows as text in batches. Type names and defaults are parsed with a small
 * grammar and written back from the parts, so nothing read from a catalog is pasted into
 * SQL; identifiers go through db_quote_ident.
 *
 * Backend differences handled here and nowhere else: SQLite's text form of a REAL (15
 * digits) is replaced by an exact one; a SQLite blob is read as '\x' || hex; PostgreSQL's
 * booleans ('t'/'f') become 1/0 in SQLite; PostgreSQL is read with a cursor (its result sets
 * are held in memory whole) and written with ISO dates in UTC.
 *
 * Must not: write to a source connection, read another schema, or log (messages go to err).
 */
#include "core/first.h"
#include "storage/copy.h"
#include "core/buf.h"
#include "core/rc.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_COLS 1600           /* PostgreSQL's own limit */
#define MAX_INDEXES 64
#define MAX_NOTES 64
#define BATCH_PARAMS 30000      /* below SQLite's 32766 variables and PostgreSQL's 65535 */
#define BATCH_ROWS 500
#define FETCH_ROWS "2000"
#define COPY_LOCK_TIMEOUT "30s"     /* PostgreSQL: how long a move waits for a writer */

static void msg(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void msg(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static bool is_pg(tn_db *db)
{
    return strcmp(tn_db_backend(db), "postgres") == 0;
}

/* Append a quoted identifier; false (with err) when it is not plain. */
static bool put_ident(buf *b, const char *ident, const char *what, char *err, size_t errlen)
{
    char q[72];
    if (db_quote_ident(ident, q, sizeof(q)) != TN_OK) {
        msg(err, errlen, "%s '%.80s' is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*, at "
                         "most 63 bytes): the copy cannot carry it", what, ident);
        return false;
    }
    buf_puts(b, q);
    return true;
}

static int oom(char *err, size_t errlen)
{
    msg(err, errlen, "out of memory");
    return TN_NOMEM;
}

/* ---- connections ---------------------------------------------------------------------------- */

/* The session the copy reads and writes PostgreSQL with: text forms that mean the same
 * whichever server settings the cluster has. */
static int pg_session(tn_db *db, bool source, bool lock)
{
    /* A move waits for the writers in flight to finish (its SHARE locks), but not forever. */
    const char *p[] = {source && !lock ? "repeatable read" : "read committed",
                       source ? "on" : "off", lock ? COPY_LOCK_TIMEOUT : "0"};
    return tn_db_exec(db,
                      "SELECT set_config('DateStyle', 'ISO, YMD', false), "
                      "set_config('TimeZone', 'UTC', false), "
                      "set_config('IntervalStyle', 'postgres', false), "
                      "set_config('extra_float_digits', '1', false), "
                      "set_config('bytea_output', 'hex', false), "
                      "set_config('default_transaction_isolation', $1, false), "
                      "set_config('default_transaction_read_only', $2, false), "
                      "set_config('lock_timeout', $3, false)",
                      3, p);
}

/* SQLite sources are opened here rather than with target_open: `mode=rw`/`mode=ro` never
 * create a file that is not there, and a read-only connection cannot write by mistake. */
static int open_sqlite(const storage_target *t, bool ro, tn_db **out, char *err, size_t errlen)
{
    char uri[4200];
    if (snprintf(uri, sizeof(uri), "sqlite:%s?mode=%s", t->name, ro ? "ro" : "rw") >=
        (int)sizeof(uri)) {
        msg(err, errlen, "path too long: %.200s", t->name);
        return TN_INVALID;
    }
    db_options opt = {.busy_timeout_ms = t->busy_timeout_ms > 0 ? t->busy_timeout_ms : 5000,
                      .sync_normal = t->sync_normal, .read_only = ro};
    return db_open(uri, &opt, out, err, errlen);
}

int copy_source_open(const storage_target *t, bool lock, tn_db **out, char *err, size_t errlen)
{
    *out = NULL;
    tn_db *db = NULL;
    int rc = t->kind == TARGET_SQLITE ? open_sqlite(t, !lock, &db, err, errlen)
                                      : target_open(t, &db, err, errlen);
    if (rc != TN_OK)
        return rc;
    if (is_pg(db) && (rc = pg_session(db, true, lock)) != TN_OK) {
        msg(err, errlen, "source: %s", tn_db_error(db));
        db_close(db);
        return rc;
    }
    /* SQLite: BEGIN IMMEDIATE on a read-write connection (the write lock), deferred on a
     * read-only one (a snapshot from the first read). */
    rc = tn_db_begin(db);
    if (rc != TN_OK) {
        msg(err, errlen, "source: cannot begin: %s", tn_db_error(db));
        db_close(db);
        return rc;
    }
    *out = db;
    return TN_OK;
}

int copy_lock(tn_db *src, const char *table, char *err, size_t errlen)
{
    if (!is_pg(src))
        return TN_OK;   /* SQLite: the write lock of the whole file is held already */
    buf sql = BUF_INIT;
    buf_puts(&sql, "LOCK TABLE ");
    if (!put_ident(&sql, table, "table", err, errlen)) {
        buf_free(&sql);
        return TN_INVALID;
    }
    buf_puts(&sql, " IN SHARE MODE");
    int rc = sql.oom ? TN_NOMEM : tn_db_exec(src, sql.p, 0, NULL);
    if (rc != TN_OK)
        msg(err, errlen, "cannot lock table %s of the source: %s", table,
            sql.oom ? "out of memory" : tn_db_error(src));
    buf_free(&sql);
    return rc;
}

void copy_source_close(tn_db *src)
{
    if (src == NULL)
        return;
    tn_db_rollback(src);
    db_close(src);
}

int copy_target_open(const storage_target *t, tn_db **out, char *err, size_t errlen)
{
    tn_db *db = NULL;
    int rc = target_open(t, &db, err, errlen);
    if (rc != TN_OK)
        return rc;
    if (is_pg(db) && (rc = pg_session(db, false, false)) != TN_OK) {
        msg(err, errlen, "target: %s", tn_db_error(db));
        db_close(db);
        return rc;
    }
    *out = db;
    return TN_OK;
}

/* ---- type names ----------------------------------------------------------------------------
 * The grammar a type name must fit to be written into DDL: words ([A-Za-z_][A-Za-z0-9_]*)
 * separated by blanks, each optionally followed by one parenthesised list of one or two
 * (signed) numbers, and trailing "[]" pairs. Anything else (quotes, a schema-qualified
 * name, an expression) is refused. The result is rebuilt: lower-case, single spaces. */

typedef struct type_parts {
    char base[128];     /* the words, lower-case, single spaces, without the arguments */
    char args[48];      /* "(10,2)" or "" (the last argument list given) */
    bool args_inside;   /* the arguments were not after the last word */
    int array;          /* number of [] */
} type_parts;

static bool type_parse(const char *s, type_parts *tp)
{
    memset(tp, 0, sizeof(*tp));
    size_t bl = 0;
    const char *p = s;
    int words = 0;
    while (*p) {
        while (isspace((unsigned char)*p))
            p++;
        if (*p == '\0')
            break;
        if (tp->array > 0)
            return false;   /* nothing after [] */
        if (isalpha((unsigned char)*p) || *p == '_') {
            if (tp->args[0] != '\0')
                tp->args_inside = true;
            if (words > 0 && bl < sizeof(tp->base) - 1)
                tp->base[bl++] = ' ';
            while (isalnum((unsigned char)*p) || *p == '_') {
                if (bl >= sizeof(tp->base) - 1)
                    return false;
                tp->base[bl++] = (char)tolower((unsigned char)*p++);
            }
            words++;
        } else if (*p == '(' && words > 0 && tp->args[0] == '\0') {
            size_t al = 0;
            tp->args[al++] = '(';
            p++;
            int nums = 0;
            for (;;) {
                while (isspace((unsigned char)*p))
                    p++;
                if (*p == '+' || *p == '-')
                    tp->args[al++] = *p++;
                if (!isdigit((unsigned char)*p))
                    return false;
                while (isdigit((unsigned char)*p)) {
                    if (al >= sizeof(tp->args) - 4)
                        return false;
                    tp->args[al++] = *p++;
                }
                nums++;
                while (isspace((unsigned char)*p))
                    p++;
                if (*p == ',' && nums == 1) {
                    tp->args[al++] = ',';
                    p++;
                    continue;
                }
                if (*p != ')')
                    return false;
                p++;
                break;
            }
            tp->args[al++] = ')';
            tp->args[al] = '\0';
        } else if (p[0] == '[' && p[1] == ']' && words > 0) {
            tp->array++;
            p += 2;
        } else {
            return false;
        }
    }
    tp->base[bl] = '\0';
    return true;
}

static bool base_is(const type_parts *tp, const char *const *names)
{
    for (; *names; names++)
        if (strcmp(tp->base, *names) == 0)
            return true;
    return false;
}

static bool base_has(const type_parts *tp, const char *part)
{
    return strstr(tp->base, part) != NULL;
}

/* PostgreSQL names a SQLite declared type keeps as it is (with its arguments). */
static const char *const pg_kept[] = {
    "smallint", "int2", "bigint", "int8", "numeric", "decimal", "boolean", "bool", "text",
    "varchar", "character varying", "char", "character", "date", "time", "timetz",
    "time with time zone", "time without time zone", "timestamp", "timestamptz",
    "timestamp with time zone", "timestamp without time zone", "interval", "json", "jsonb",
    "uuid", "bytea", "double precision", "float8", NULL};
static const char *const int_names[] = {"smallint", "integer", "bigint", "int2", "int4", "int8",
                                        NULL};

int copy_type_for(const copy_column *c, const char *src_backend, const char *dst_backend,
                  char *out, size_t outlen)
{
    type_parts tp;
    const char *decl = c->type ? c->type : "";
    if (!type_parse(decl, &tp))
        return TN_INVALID;
    bool to_pg = strcmp(dst_backend, "postgres") == 0;
    bool from_pg = strcmp(src_backend, "postgres") == 0;
    int n;
    if (!to_pg) {
        /* SQLite keeps any declared name; its grammar wants the arguments last and knows
         * no arrays (an array keeps its text form). */
        if (tp.base[0] == '\0')
            n = snprintf(out, outlen, "%s", "");
        else if (tp.array > 0)
            n = snprintf(out, outlen, "text");
        else
            n = snprintf(out, outlen, "%s%s", tp.base, tp.args_inside ? "" : tp.args);
    } else if (from_pg) {
        /* Same backend: the catalog's own name, rebuilt. The arguments go where they were:
         * "timestamp(3) with time zone" has them inside. */
        if (tp.args_inside) {
            const char *sp = strchr(tp.base, ' ');
            n = snprintf(out, outlen, "%.*s%s%s", (int)(sp - tp.base), tp.base, tp.args, sp);
        } else {
            n = snprintf(out, outlen, "%s%s", tp.base, tp.args);
        }
        for (int i = 0; i < tp.array && n >= 0 && (size_t)n + 2 < outlen; i++)
            n += snprintf(out + n, outlen - (size_t)n, "[]");
    } else {
        /* SQLite to PostgreSQL: a PostgreSQL name is kept; otherwise SQLite's affinity
         * rules (https://sqlite.org/datatype3.html, 3.1) pick the type. Integers are 64-bit
         * in SQLite, so every integer name that is not explicitly small becomes bigint; REAL
         * is 8 bytes in SQLite, so double precision. */
        const char *t;
        bool args = false;
        if (tp.array > 0 || tp.args_inside)
            t = "text";
        else if (strcmp(tp.base, "smallint") == 0 || strcmp(tp.base, "int2") == 0)
            t = tp.base;
        else if (base_is(&tp, pg_kept)) {
            t = tp.base;
            args = true;
        } else if (strcmp(tp.base, "datetime") == 0)
            t = "timestamp";
        else if (strcmp(tp.base, "blob") == 0)
            t = "bytea";
        else if (base_has(&tp, "int"))
            t = "bigint";
        else if (base_has(&tp, "char") || base_has(&tp, "clob") || base_has(&tp, "text"))
            t = "text";
        else if (base_has(&tp, "real") || base_has(&tp, "floa") || base_has(&tp, "doub"))
            t = "double precision";
        else
            t = "text";   /* no type, BLOB-ish or NUMERIC affinity: SQLite let it hold anything */
        n = snprintf(out, outlen, "%s%s", t, args ? tp.args : "");
    }
    return n < 0 || (size_t)n >= outlen ? TN_INVALID : TN_OK;
}

/* ---- defaults ------------------------------------------------------------------------------
 * A default is carried when it is a literal (a number, a string, NULL, true/false) or the
 * current time; anything else (a function call, an expression) is dropped with a note. */

static bool is_number(const char *s)
{
    const char *p = s;
    if (*p == '-' || *p == '+')
        p++;
    if (!isdigit((unsigned char)*p))
        return false;
    while (isdigit((unsigned char)*p))
        p++;
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p))
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '-' || *p == '+')
            p++;
        if (!isdigit((unsigned char)*p))
            return false;
        while (isdigit((unsigned char)*p))
            p++;
    }
    return *p == '\0';
}

/* Length of a '...' literal ('' inside) at s, or 0. */
static size_t quoted_len(const char *s)
{
    if (*s != '\'')
        return 0;
    for (size_t i = 1; s[i]; i++)
        if (s[i] == '\'') {
            if (s[i + 1] == '\'')
                i++;
            else
                return i + 1;
        }
    return 0;
}

static bool ieq(const char *a, const char *b)
{
    return strcasecmp(a, b) == 0;
}

/* raw: the default as the source shows it. out: the default for dst, or "" for none.
 * Returns false when it is dropped (out ""). */
static bool default_for(const char *raw, bool boolean, bool to_pg, char *out, size_t outlen)
{
    out[0] = '\0';
    char s[512];
    if (raw == NULL)
        return true;
    size_t n = strlen(raw);
    if (n >= sizeof(s))
        return false;
    /* Trim blanks and outer parentheses: "(0)", " ( 'x' ) ". */
    const char *a = raw, *e = raw + n;
    for (;;) {
        while (a < e && isspace((unsigned char)*a))
            a++;
        while (e > a && isspace((unsigned char)e[-1]))
            e--;
        if (e - a >= 2 && *a == '(' && e[-1] == ')') {
            a++;
            e--;
            continue;
        }
        break;
    }
    memcpy(s, a, (size_t)(e - a));
    s[e - a] = '\0';
    /* PostgreSQL writes casts: 'x'::text, '-1'::integer, 0::bigint. */
    char *cast;
    while ((cast = strstr(s, "::")) != NULL) {
        type_parts tp;
        if (!type_parse(cast + 2, &tp))
            return false;
        *cast = '\0';
    }
    if (s[0] == '\0' || ieq(s, "null"))
        return true;
    if (is_number(s)) {
        if (boolean && to_pg && (strcmp(s, "0") == 0 || strcmp(s, "1") == 0))
            snprintf(out, outlen, "%s", s[0] == '1' ? "true" : "false");
        else
            snprintf(out, outlen, "%s", s);
        return true;
    }
    size_t q = quoted_len(s);
    if (q > 0 && q == strlen(s)) {
        if (boolean && !to_pg) {
            if (ieq(s, "'t'") || ieq(s, "'true'")) {
                snprintf(out, outlen, "1");
                return true;
            }
            if (ieq(s, "'f'") || ieq(s, "'false'")) {
                snprintf(out, outlen, "0");
                return true;
            }
        }
        if (strlen(s) >= outlen)
            return false;
        snprintf(out, outlen, "%s", s);
        return true;
    }
    if (ieq(s, "true") || ieq(s, "false")) {
        snprintf(out, outlen, "%s", to_pg ? (ieq(s, "true") ? "true" : "false")
                                          : (ieq(s, "true") ? "1" : "0"));
        return true;
    }
    static const char *const now[] = {"current_timestamp", "now()", "localtimestamp",
                                      "transaction_timestamp()", "datetime('now')",
                                      "datetime( 'now' )", NULL};
    for (int i = 0; now[i]; i++)
        if (ieq(s, now[i])) {
            snprintf(out, outlen, "CURRENT_TIMESTAMP");
            return true;
        }
    if (ieq(s, "current_date") || ieq(s, "current_time")) {
        snprintf(out, outlen, "%s", ieq(s, "current_date") ? "CURRENT_DATE" : "CURRENT_TIME");
        return true;
    }
    return false;
}

/* ---- describe ------------------------------------------------------------------------------- */

static void note(copy_table *t, arena *a, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note(copy_table *t, arena *a, const char *fmt, ...)
{
    if (t->nnotes >= MAX_NOTES)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *s = arena_vsprintf(a, fmt, ap);
    va_end(ap);
    if (s != NULL)
        t->notes[t->nnotes++] = s;
}

/* Each column name must be quotable; checked once here so later steps cannot fail on it. */
static int check_idents(const copy_table *t, char *err, size_t errlen)
{
    char q[72];
    if (db_quote_ident(t->name, q, sizeof(q)) != TN_OK) {
        msg(err, errlen, "table '%.80s' is not a plain identifier: the copy cannot carry it",
            t->name);
        return TN_INVALID;
    }
    for (int i = 0; i < t->ncols; i++)
        if (db_quote_ident(t->cols[i].name, q, sizeof(q)) != TN_OK) {
            msg(err, errlen, "column %s.%.80s is not a plain identifier: the copy cannot "
                             "carry it", t->name, t->cols[i].name);
            return TN_INVALID;
        }
    return TN_OK;
}

/* The catalog's columns as the copy carries them: generated ones left out (their values are
 * computed), SQLite's booleans by the copy's own type grammar, no default on an id. */
static int take_columns(const db_table_desc *d, arena *a, copy_table *t, char *err,
                        size_t errlen)
{
    bool pg = strcmp(d->backend, "postgres") == 0;
    int generated = 0;
    for (int i = 0; i < d->ncols; i++) {
        const db_column *dc = &d->cols[i];
        if (dc->generated) {
            generated++;
            if (pg)
                note(t, a, "%s.%s: a generated column, not copied (its values are computed)",
                     d->name, dc->name);
            continue;
        }
        if (t->ncols == MAX_COLS) {
            msg(err, errlen, "table %s: too many columns", d->name);
            return TN_TOOBIG;
        }
        copy_column *c = &t->cols[t->ncols++];
        c->name = dc->name;
        c->type = dc->type;
        c->notnull = dc->notnull;
        c->pk = dc->pk;
        c->identity = dc->identity;
        c->custom = dc->custom;
        c->dflt = dc->identity && pg ? NULL : dc->dflt;
        type_parts tp;
        c->boolean = pg ? dc->boolean
                        : type_parse(c->type, &tp) &&
                              (strcmp(tp.base, "boolean") == 0 || strcmp(tp.base, "bool") == 0);
    }
    if (!pg && generated > 0)
        note(t, a, "%s: %d generated column(s) not carried (their values are computed)",
             d->name, generated);
    return TN_OK;
}

/* Indexes on plain columns; the primary key's is the table's own. SQLite names the index of
 * a UNIQUE constraint sqlite_autoindex_<table>_<n>: it gets a name of ours in the target. */
static void take_indexes(const db_table_desc *d, arena *a, copy_table *t)
{
    bool pg = strcmp(d->backend, "postgres") == 0;
    for (int i = 0; i < d->nidx; i++) {
        const db_index *dx = &d->idx[i];
        if (dx->primary)
            continue;
        if (pg && (!dx->plain || dx->partial || dx->ncols == 0)) {
            note(t, a, "%s: index %s (an expression, partial or not a btree) not carried",
                 d->name, dx->name);
            continue;
        }
        if (t->nidx == MAX_INDEXES) {
            note(t, a, "%s: indexes after the first %d not carried", d->name, MAX_INDEXES);
            break;
        }
        if (!pg && dx->partial) {
            note(t, a, "%s: partial index %s not carried", d->name, dx->name);
            continue;
        }
        if (!pg && (!dx->plain || dx->ncols == 0 || dx->ncols > 32)) {
            note(t, a, "%s: index %s on an expression not carried", d->name, dx->name);
            continue;
        }
        copy_index *x = &t->idx[t->nidx++];
        x->name = !pg && strncmp(dx->name, "sqlite_", 7) == 0 ? NULL : dx->name;
        x->unique = dx->unique;
        x->ncols = dx->ncols < 32 ? dx->ncols : 32;
        x->cols = dx->cols;
    }
}

int copy_describe(tn_db *db, const char *table, arena *a, copy_table **out, char *err,
                  size_t errlen)
{
    *out = NULL;
    copy_table *t = arena_calloc(a, sizeof(*t));
    if (t == NULL)
        return oom(err, errlen);
    t->name = arena_strdup(a, table);
    t->backend = is_pg(db) ? "postgres" : "sqlite";
    t->cols = arena_calloc(a, MAX_COLS * sizeof(copy_column));
    t->idx = arena_calloc(a, MAX_INDEXES * sizeof(copy_index));
    t->notes = arena_calloc(a, MAX_NOTES * sizeof(char *));
    if (t->name == NULL || t->cols == NULL || t->idx == NULL || t->notes == NULL)
        return oom(err, errlen);
    db_table_desc *desc = NULL;
    int rc = db_describe(db, NULL, table, a, &desc);
    if (rc != TN_OK)
        msg(err, errlen, "table %s: %s", table, tn_db_error(db));
    if (rc == TN_OK)
        rc = take_columns(desc, a, t, err, errlen);
    if (rc == TN_OK) {
        /* What a portable definition leaves behind, said once per table. */
        if (is_pg(db) && desc->nfkeys + desc->nchecks > 0)
            note(t, a, "%s: %d foreign key, check or exclusion constraint(s) not carried",
                 table, desc->nfkeys + desc->nchecks);
        else if (!is_pg(db) && desc->nfkeys > 0)
            note(t, a, "%s: %d foreign key(s) not carried", table, desc->nfkeys);
        if (desc->ntriggers > 0)
            note(t, a, "%s: %d trigger(s) not carried", table, desc->ntriggers);
        take_indexes(desc, a, t);
    }
    if (rc == TN_OK)
        rc = check_idents(t, err, errlen);
    /* A default that is not a literal or the current time is dropped here, with a note, so
     * copy_create never meets one it cannot write. */
    for (int i = 0; i < t->ncols && rc == TN_OK; i++) {
        copy_column *c = &t->cols[i];
        char d[520];
        if (c->dflt != NULL && !default_for(c->dflt, c->boolean, true, d, sizeof(d))) {
            note(t, a, "%s.%s: default %.200s not carried", table, c->name, c->dflt);
            c->dflt = NULL;
        }
    }
    if (rc == TN_OK)
        *out = t;
    return rc;
}

/* ---- create --------------------------------------------------------------------------------- */

/* The name an index gets in the target: its own when it is plain, else <table>_key<n>. */
static void index_name(const copy_table *def, int i, char *out, size_t outlen)
{
    char q[72];
    const char *n = def->idx[i].name;
    if (n != NULL && db_quote_ident(n, q, sizeof(q)) == TN_OK) {
        snprintf(out, outlen, "%s", n);
        return;
    }
    snprintf(out, outlen, "%.48s_key%d", def->name, i + 1);
}

int copy_create(tn_db *dst, const copy_table *def, char *err, size_t errlen)
{
    bool to_pg = is_pg(dst);
    const char *dstb = to_pg ? "postgres" : "sqlite";
    int npk = 0;
    for (int i = 0; i < def->ncols; i++)
        if (def->cols[i].pk > 0)
            npk++;
    buf sql = BUF_INIT;
    int rc = TN_OK;
    buf_puts(&sql, "CREATE TABLE ");
    if (!put_ident(&sql, def->name, "table", err, errlen)) {
        rc = TN_INVALID;
        goto out;
    }
    buf_puts(&sql, " (");
    bool inline_pk = false;
    for (int i = 0; i < def->ncols; i++) {
        const copy_column *c = &def->cols[i];
        char type[160], dflt[520];
        if (i > 0)
            buf_puts(&sql, ", ");
        put_ident(&sql, c->name, "column", err, errlen);
        if (c->custom) {
            msg(err, errlen, "column %s.%s has type %.80s, defined in the tenant's schema: the "
                             "portable copy carries built-in types only (a target made by the "
                             "app's migrations can take it)", def->name, c->name, c->type);
            rc = TN_INVALID;
            goto out;
        }
        if (copy_type_for(c, def->backend, dstb, type, sizeof(type)) != TN_OK) {
            msg(err, errlen, "column %s.%s: type '%.80s' is outside what the copy can carry",
                def->name, c->name, c->type);
            rc = TN_INVALID;
            goto out;
        }
        if (c->identity && to_pg) {
            bool intish = false;
            type_parts tp;
            if (type_parse(type, &tp))
                intish = base_is(&tp, int_names) && tp.args[0] == '\0';
            buf_printf(&sql, " %s GENERATED BY DEFAULT AS IDENTITY", intish ? type : "bigint");
            continue;
        }
        if (c->identity && !to_pg && c->pk == 1 && npk == 1) {
            buf_puts(&sql, " INTEGER PRIMARY KEY");
            inline_pk = true;
            continue;
        }
        if (type[0] != '\0')
            buf_printf(&sql, " %s", type);
        if (c->notnull)
            buf_puts(&sql, " NOT NULL");
        /* copy_describe kept only defaults default_for accepts. */
        if (c->dflt != NULL && default_for(c->dflt, c->boolean, to_pg, dflt, sizeof(dflt)) &&
            dflt[0] != '\0')
            buf_printf(&sql, " DEFAULT %s", dflt);
    }
    if (npk > 0 && !inline_pk) {
        buf_puts(&sql, ", PRIMARY KEY (");
        for (int k = 1; k <= npk; k++)
            for (int i = 0; i < def->ncols; i++)
                if (def->cols[i].pk == k) {
                    if (k > 1)
                        buf_puts(&sql, ", ");
                    put_ident(&sql, def->cols[i].name, "column", err, errlen);
                }
        buf_putc(&sql, ')');
    }
    buf_putc(&sql, ')');
    if (sql.oom) {
        rc = oom(err, errlen);
        goto out;
    }
    rc = tn_db_exec(dst, sql.p, 0, NULL);
    if (rc != TN_OK) {
        msg(err, errlen, "cannot create table %s: %s", def->name, tn_db_error(dst));
        goto out;
    }
    for (int i = 0; i < def->nidx; i++) {
        const copy_index *x = &def->idx[i];
        char name[80];
        index_name(def, i, name, sizeof(name));
        buf_reset(&sql);
        buf_puts(&sql, x->unique ? "CREATE UNIQUE INDEX " : "CREATE INDEX ");
        put_ident(&sql, name, "index", err, errlen);
        buf_puts(&sql, " ON ");
        put_ident(&sql, def->name, "table", err, errlen);
        buf_puts(&sql, " (");
        for (int k = 0; k < x->ncols; k++) {
            if (k > 0)
                buf_puts(&sql, ", ");
            if (!put_ident(&sql, x->cols[k], "column", err, errlen)) {
                rc = TN_INVALID;
                goto out;
            }
        }
        buf_putc(&sql, ')');
        if (sql.oom) {
            rc = oom(err, errlen);
            goto out;
        }
        rc = tn_db_exec(dst, sql.p, 0, NULL);
        if (rc != TN_OK) {
            msg(err, errlen, "cannot create index %s on %s: %s", name, def->name,
                tn_db_error(dst));
            goto out;
        }
    }
out:
    buf_free(&sql);
    return rc;
}

/* ---- reading -------------------------------------------------------------------------------- */

struct copy_reader {
    tn_db *db;
    const copy_table *def;
    bool pg;
    bool cursor_open;
    tn_rows *rows;
    bool done;
    int64_t batch;           /* rows read from the current batch */
    const char **vals;
};

/* SQLite: the exact text of a REAL (the shortest of 15, 16 or 17 digits that reads back
 * equal), hex for a blob, the value itself otherwise. */
static void sqlite_expr(buf *b, const char *q)
{
    buf_printf(b,
               "CASE typeof(%s) WHEN 'real' THEN (CASE WHEN CAST(printf('%%.15g', %s) AS REAL) "
               "= %s THEN printf('%%.15g', %s) WHEN CAST(printf('%%.16g', %s) AS REAL) = %s "
               "THEN printf('%%.16g', %s) ELSE printf('%%!.17g', %s) END) "
               "WHEN 'blob' THEN '\\x' || lower(hex(%s)) ELSE %s END",
               q, q, q, q, q, q, q, q, q, q);
}

int copy_read_open(tn_db *src, const copy_table *def, copy_reader **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    copy_reader *r = calloc(1, sizeof(*r));
    if (r == NULL || (r->vals = calloc((size_t)def->ncols, sizeof(char *))) == NULL) {
        free(r);
        return oom(err, errlen);
    }
    r->db = src;
    r->def = def;
    r->pg = is_pg(src);
    buf sql = BUF_INIT;
    if (r->pg)
        buf_puts(&sql, "DECLARE tenancy_copy NO SCROLL CURSOR FOR ");
    buf_puts(&sql, "SELECT ");
    for (int i = 0; i < def->ncols; i++) {
        char q[72];
        if (db_quote_ident(def->cols[i].name, q, sizeof(q)) != TN_OK) {
            buf_free(&sql);
            copy_read_close(r);
            return check_idents(def, err, errlen);
        }
        if (i > 0)
            buf_puts(&sql, ", ");
        if (r->pg)
            buf_puts(&sql, q);
        else
            sqlite_expr(&sql, q);
    }
    buf_puts(&sql, " FROM ");
    put_ident(&sql, def->name, "table", err, errlen);
    int npk = 0;
    for (int i = 0; i < def->ncols; i++)
        if (def->cols[i].pk > 0)
            npk++;
    if (npk > 0) {
        buf_puts(&sql, " ORDER BY ");
        for (int k = 1; k <= npk; k++)
            for (int i = 0; i < def->ncols; i++)
                if (def->cols[i].pk == k) {
                    if (k > 1)
                        buf_puts(&sql, ", ");
                    put_ident(&sql, def->cols[i].name, "column", err, errlen);
                }
    }
    int rc;
    if (sql.oom)
        rc = oom(err, errlen);
    else if (r->pg)
        rc = tn_db_exec(src, sql.p, 0, NULL);
    else
        rc = tn_db_query(src, &r->rows, sql.p, 0, NULL);
    buf_free(&sql);
    if (rc != TN_OK) {
        if (rc != TN_NOMEM)
            msg(err, errlen, "cannot read table %s: %s", def->name, tn_db_error(src));
        copy_read_close(r);
        return rc;
    }
    r->cursor_open = r->pg;
    *out = r;
    return TN_OK;
}

int copy_read_next(copy_reader *r, const char *const **vals, char *err, size_t errlen)
{
    for (;;) {
        if (r->done)
            return TN_DONE;
        if (r->rows == NULL) {   /* PostgreSQL: the next batch from the cursor */
            int rc = tn_db_query(r->db, &r->rows, "FETCH FORWARD " FETCH_ROWS " FROM tenancy_copy",
                                 0, NULL);
            if (rc != TN_OK) {
                msg(err, errlen, "cannot read table %s: %s", r->def->name, tn_db_error(r->db));
                return rc;
            }
        }
        int rc = tn_rows_next(r->rows);
        if (rc == TN_OK) {
            r->batch++;
            for (int i = 0; i < r->def->ncols; i++)
                r->vals[i] = tn_rows_get(r->rows, i);
            *vals = r->vals;
            return TN_OK;
        }
        if (rc != TN_DONE) {
            msg(err, errlen, "cannot read table %s: %s", r->def->name, tn_db_error(r->db));
            return rc;
        }
        /* The batch is over: SQLite's query was the whole table; a PostgreSQL batch that
         * came back empty ends the cursor. */
        bool had_rows = r->pg && r->batch > 0;
        tn_rows_free(r->rows);
        r->rows = NULL;
        r->batch = 0;
        if (!r->pg || !had_rows)
            r->done = true;
    }
}

void copy_read_close(copy_reader *r)
{
    if (r == NULL)
        return;
    tn_rows_free(r->rows);
    if (r->cursor_open)
        tn_db_exec(r->db, "CLOSE tenancy_copy", 0, NULL);
    free(r->vals);
    free(r);
}

/* ---- writing -------------------------------------------------------------------------------- */

#define UNNEST_ROWS 2000

struct copy_writer {
    tn_db *db;
    const copy_table *def;
    bool to_pg;
    bool unnest;             /* PostgreSQL, every column's type named in a cast */
    int per_batch;           /* rows in a full batch */
    int n;                   /* rows held */
    arena *a;                /* VALUES: the held values */
    const char **params;
    buf *arrays;             /* unnest: one array literal per column */
    buf full;                /* the statement of a full batch (VALUES), or the only one */
};

/* The quoting cannot fail after check_idents, and is checked all the same: an identifier
 * that is not plain never reaches the statement. */
static int insert_head(buf *b, const copy_table *def, bool pg, char *err, size_t errlen)
{
    buf_puts(b, "INSERT INTO ");
    if (!put_ident(b, def->name, "table", err, errlen))
        return TN_INVALID;
    buf_puts(b, " (");
    for (int i = 0; i < def->ncols; i++) {
        buf_puts(b, i ? ", " : "");
        if (!put_ident(b, def->cols[i].name, "column", err, errlen))
            return TN_INVALID;
    }
    /* An identity column GENERATED ALWAYS takes the copied ids only with this. */
    buf_puts(b, pg ? ") OVERRIDING SYSTEM VALUE " : ") ");
    return TN_OK;
}

static int insert_sql(buf *b, const copy_table *def, bool pg, int nrows, char *err,
                      size_t errlen)
{
    int rc = insert_head(b, def, pg, err, errlen);
    if (rc != TN_OK)
        return rc;
    buf_puts(b, "VALUES ");
    int p = 1;
    for (int r = 0; r < nrows; r++) {
        buf_puts(b, r ? ", (" : "(");
        for (int i = 0; i < def->ncols; i++) {
            if (i > 0)
                buf_putc(b, ',');
            buf_putc(b, '$');
            buf_i64(b, p++);
        }
        buf_putc(b, ')');
    }
    return b->oom ? oom(err, errlen) : TN_OK;
}

/* PostgreSQL: INSERT ... SELECT * FROM unnest($1::T1[], ...) with the target's own column
 * types. False (use VALUES) when one cannot be written as a cast: an array column (unnest
 * would flatten it), or a type outside the grammar (a schema-qualified one). */
static bool unnest_sql(tn_db *dst, const copy_table *def, buf *b)
{
    arena *a = arena_create(0);
    copy_table *have = NULL;
    char e[256];
    bool ok = a != NULL && copy_describe(dst, def->name, a, &have, e, sizeof(e)) == TN_OK &&
              insert_head(b, def, true, e, sizeof(e)) == TN_OK;
    if (ok)
        buf_puts(b, "SELECT * FROM unnest(");
    for (int i = 0; ok && i < def->ncols; i++) {
        const copy_column *tc = NULL;
        for (int k = 0; k < have->ncols && tc == NULL; k++)
            if (strcmp(have->cols[k].name, def->cols[i].name) == 0)
                tc = &have->cols[k];
        char type[160];
        type_parts tp;
        ok = tc != NULL && type_parse(tc->type, &tp) && tp.array == 0 &&
             copy_type_for(tc, "postgres", "postgres", type, sizeof(type)) == TN_OK &&
             type[0] != '\0';
        if (ok)
            buf_printf(b, "%s$%d::%s[]", i ? ", " : "", i + 1, type);
    }
    if (ok)
        buf_putc(b, ')');
    arena_destroy(a);
    return ok && !b->oom;
}

int copy_write_open(tn_db *dst, const copy_table *def, copy_writer **out, char *err,
                    size_t errlen)
{
    *out = NULL;
    if (check_idents(def, err, errlen) != TN_OK)
        return TN_INVALID;
    copy_writer *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return oom(err, errlen);
    w->db = dst;
    w->def = def;
    w->to_pg = is_pg(dst);
    if (w->to_pg && unnest_sql(dst, def, &w->full)) {
        w->unnest = true;
        w->per_batch = UNNEST_ROWS;
        w->arrays = calloc((size_t)def->ncols, sizeof(buf));
        w->params = calloc((size_t)def->ncols, sizeof(char *));
        if (w->arrays == NULL || w->params == NULL) {
            copy_write_close(w);
            return oom(err, errlen);
        }
        *out = w;
        return TN_OK;
    }
    buf_reset(&w->full);
    /* SQLite finds each parameter by name (a linear search), so its batches stay small. */
    int maxp = w->to_pg ? BATCH_PARAMS : 256;
    w->per_batch = maxp / def->ncols;
    if (w->per_batch > BATCH_ROWS)
        w->per_batch = BATCH_ROWS;
    if (w->per_batch < 1)
        w->per_batch = 1;
    w->a = arena_create(64 * 1024);
    w->params = calloc((size_t)w->per_batch * (size_t)def->ncols, sizeof(char *));
    if (w->a == NULL || w->params == NULL) {
        copy_write_close(w);
        return oom(err, errlen);
    }
    int rc = insert_sql(&w->full, def, w->to_pg, w->per_batch, err, errlen);
    if (rc != TN_OK) {
        copy_write_close(w);
        return rc;
    }
    *out = w;
    return TN_OK;
}

static const char *convert(const copy_writer *w, const copy_column *c, const char *v)
{
    if (v == NULL || w->to_pg || !c->boolean)
        return v;
    /* PostgreSQL's booleans into SQLite, where apps compare with 1 and 0. */
    if (strcmp(v, "t") == 0 || strcmp(v, "true") == 0)
        return "1";
    if (strcmp(v, "f") == 0 || strcmp(v, "false") == 0)
        return "0";
    return v;
}

int copy_write_flush(copy_writer *w, char *err, size_t errlen)
{
    if (w->n == 0)
        return TN_OK;
    int rc;
    if (w->unnest) {
        bool bad = false;
        for (int i = 0; i < w->def->ncols; i++) {
            buf_putc(&w->arrays[i], '}');
            w->params[i] = w->arrays[i].p;
            bad = bad || w->arrays[i].oom;
        }
        rc = bad ? TN_NOMEM : tn_db_exec(w->db, w->full.p, w->def->ncols, w->params);
        for (int i = 0; i < w->def->ncols; i++)
            buf_reset(&w->arrays[i]);
    } else if (w->n == w->per_batch) {
        rc = tn_db_exec(w->db, w->full.p, w->n * w->def->ncols, w->params);
    } else {
        buf sql = BUF_INIT;
        rc = insert_sql(&sql, w->def, w->to_pg, w->n, err, errlen);
        if (rc != TN_OK) {   /* err says why */
            buf_free(&sql);
            w->n = 0;
            arena_reset(w->a);
            return rc;
        }
        rc = tn_db_exec(w->db, sql.p, w->n * w->def->ncols, w->params);
        buf_free(&sql);
    }
    if (rc != TN_OK)
        msg(err, errlen, "cannot insert into %s: %s", w->def->name,
            rc == TN_NOMEM ? "out of memory" : tn_db_error(w->db));
    w->n = 0;
    if (w->a != NULL)
        arena_reset(w->a);
    return rc;
}

/* One element of a PostgreSQL array literal: NULL, or "..." with " and \ escaped. */
static void array_elem(buf *b, const char *v)
{
    if (v == NULL) {
        buf_puts(b, "NULL");
        return;
    }
    buf_putc(b, '"');
    for (const char *s = v;;) {
        size_t run = strcspn(s, "\"\\");
        buf_append(b, s, run);
        s += run;
        if (*s == '\0')
            break;
        buf_putc(b, '\\');
        buf_putc(b, *s++);
    }
    buf_putc(b, '"');
}

int copy_write_row(copy_writer *w, const char *const *vals, char *err, size_t errlen)
{
    if (w->unnest) {
        for (int i = 0; i < w->def->ncols; i++) {
            buf_putc(&w->arrays[i], w->n == 0 ? '{' : ',');
            array_elem(&w->arrays[i], vals[i]);
        }
    } else {
        const char **p = w->params + (size_t)w->n * (size_t)w->def->ncols;
        for (int i = 0; i < w->def->ncols; i++) {
            const char *v = convert(w, &w->def->cols[i], vals[i]);
            if (v != NULL && (v = arena_strdup(w->a, v)) == NULL)
                return oom(err, errlen);
            p[i] = v;
        }
    }
    w->n++;
    return w->n == w->per_batch ? copy_write_flush(w, err, errlen) : TN_OK;
}

void copy_write_close(copy_writer *w)
{
    if (w == NULL)
        return;
    arena_destroy(w->a);
    if (w->arrays != NULL)
        for (int i = 0; i < w->def->ncols; i++)
            buf_free(&w->arrays[i]);
    free(w->arrays);
    free(w->params);
    buf_free(&w->full);
    free(w);
}

/* ---- emptying, constraints ------------------------------------------------------------------ */

int copy_clear(tn_db *dst, const char *table, char *err, size_t errlen)
{
    buf sql = BUF_INIT;
    buf_puts(&sql, "DELETE FROM ");
    if (!put_ident(&sql, table, "table", err, errlen)) {
        buf_free(&sql);
        return TN_INVALID;
    }
    int rc = sql.oom ? TN_NOMEM : tn_db_exec(dst, sql.p, 0, NULL);
    if (rc != TN_OK)
        msg(err, errlen, "cannot empty %s: %s", table,
            rc == TN_NOMEM ? "out of memory" : tn_db_error(dst));
    buf_free(&sql);
    return rc;
}

int copy_defer_constraints(tn_db *dst, char *err, size_t errlen)
{
    int rc = tn_db_exec(dst, is_pg(dst) ? "SET CONSTRAINTS ALL DEFERRED"
                                        : "PRAGMA defer_foreign_keys = ON", 0, NULL);
    if (rc != TN_OK)
        msg(err, errlen, "cannot defer constraints: %s", tn_db_error(dst));
    return rc;
}

/* ---- counts and ids ------------------------------------------------------------------------- */

int copy_count(tn_db *db, const char *table, int64_t *n, char *err, size_t errlen)
{
    buf sql = BUF_INIT;
    buf_puts(&sql, "SELECT count(*) FROM ");
    if (!put_ident(&sql, table, "table", err, errlen)) {
        buf_free(&sql);
        return TN_INVALID;
    }
    char v[32];
    int rc = sql.oom ? TN_NOMEM : db_query_value(db, v, sizeof(v), sql.p, 0, NULL);
    buf_free(&sql);
    if (rc != TN_OK) {
        msg(err, errlen, "cannot count the rows of %s: %s", table,
            rc == TN_NOMEM ? "out of memory" : tn_db_error(db));
        return rc;
    }
    *n = strtoll(v, NULL, 10);
    return TN_OK;
}

int copy_fix_ids(tn_db *dst, const copy_table *def, char *err, size_t errlen)
{
    if (!is_pg(dst))
        return TN_OK;
    for (int i = 0; i < def->ncols; i++) {
        if (!def->cols[i].identity)
            continue;
        buf sql = BUF_INIT;
        buf_puts(&sql, "SELECT setval(pg_get_serial_sequence(quote_ident(current_schema()) || "
                       "'.' || quote_ident($1), $2), GREATEST((SELECT max(");
        put_ident(&sql, def->cols[i].name, "column", err, errlen);
        buf_puts(&sql, ") FROM ");
        put_ident(&sql, def->name, "table", err, errlen);
        buf_puts(&sql, "), 0) + 1, false)");
        const char *p[] = {def->name, def->cols[i].name};
        int rc = sql.oom ? TN_NOMEM : tn_db_exec(dst, sql.p, 2, p);
        buf_free(&sql);
        if (rc != TN_OK) {
            msg(err, errlen, "cannot set the id sequence of %s.%s: %s", def->name,
                def->cols[i].name, rc == TN_NOMEM ? "out of memory" : tn_db_error(dst));
            return rc;
        }
    }
    return TN_OK;
}

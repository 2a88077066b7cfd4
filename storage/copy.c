/*
 * copy.c — table definitions and rows between backends (see copy.h).
 *
 * Owns: the connections of a copy (source snapshot or lock, target session), a table's
 * portable definition (from db_describe, storage/catalog.c: one relation of the connection's
 * own schema), creating it in the other dialect, emptying, deferred constraints, counts
 * and ids. Type names and defaults are copy_types.c's, rows copy_rows.c's; the helpers they
 * share are in copy_int.h. Identifiers go through db_quote_ident, always checked.
 *
 * Must not: write to a source connection, read another schema, or log (messages go to err).
 */
#include "core/first.h"
#include "storage/copy.h"
#include "storage/copy_int.h"
#include "core/buf.h"
#include "core/rc.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool copy_is_pg(tn_db *db)
{
    return strcmp(tn_db_backend(db), "postgres") == 0;
}

/* Append a quoted identifier; TN_INVALID (with err) when it is not plain. */
int copy_put_ident(buf *b, const char *ident, const char *what, char *err, size_t errlen)
{
    char q[72];
    if (db_quote_ident(ident, q, sizeof(q)) != TN_OK)
        return tn_errf(err, errlen, TN_INVALID,
                       "%s '%.80s' is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*, at most 63 "
                       "bytes): the copy cannot carry it",
                       what, ident);
    buf_puts(b, q);
    return TN_OK;
}

/* ---- connections ---------------------------------------------------------------------------- */

/* The settings the copy reads and writes PostgreSQL with: text forms that mean the same
 * whichever server settings the cluster has. Transaction-local, sent as the transaction's
 * first statements: on the session they would reach the next client of the login's server
 * session behind PgBouncer in transaction mode (a read-only default refusing its writes),
 * and the copy's own transaction might not even run on that session. The isolation level is
 * a utility statement, the first: it must come before the transaction's first snapshot. */
static int pg_txn_settings(tn_db *db, bool source, bool lock)
{
    int rc = tn_db_exec(db,
                        !source ? "SET TRANSACTION ISOLATION LEVEL READ COMMITTED, READ WRITE"
                        : lock  ? "SET TRANSACTION ISOLATION LEVEL READ COMMITTED, READ ONLY"
                                : "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY",
                        0, NULL);
    if (rc != TN_OK)
        return rc;
    /* A move waits for the writers in flight to finish (its SHARE locks), but not forever. */
    const char *p[] = {lock ? COPY_LOCK_TIMEOUT : "0"};
    return tn_db_exec(db,
                      "SELECT set_config('DateStyle', 'ISO, YMD', true), "
                      "set_config('TimeZone', 'UTC', true), "
                      "set_config('IntervalStyle', 'postgres', true), "
                      "set_config('extra_float_digits', '1', true), "
                      "set_config('bytea_output', 'hex', true), "
                      "set_config('lock_timeout', $1, true)",
                      1, p);
}

/* SQLite sources are opened here rather than with target_open: `mode=rw`/`mode=ro` never
 * create a file that is not there, and a read-only connection cannot write by mistake. */
static int open_sqlite(const storage_target *t, bool ro, tn_db **out, char *err, size_t errlen)
{
    char uri[4200];
    if (snprintf(uri, sizeof(uri), "sqlite:%s?mode=%s", t->name, ro ? "ro" : "rw") >=
        (int)sizeof(uri)) {
        return tn_errf(err, errlen, TN_INVALID, "path too long: %.200s", t->name);
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
    /* SQLite: BEGIN IMMEDIATE on a read-write connection (the write lock), deferred on a
     * read-only one (a snapshot from the first read). */
    rc = tn_db_begin(db);
    if (rc != TN_OK) {
        rc = tn_errf(err, errlen, rc, "source: cannot begin: %s", tn_db_error(db));
        db_close(db);
        return rc;
    }
    if (copy_is_pg(db) && (rc = pg_txn_settings(db, true, lock)) != TN_OK) {
        rc = tn_errf(err, errlen, rc, "source: %s", tn_db_error(db));
        copy_source_close(db);
        return rc;
    }
    *out = db;
    return TN_OK;
}

int copy_lock(tn_db *src, const char *table, char *err, size_t errlen)
{
    if (!copy_is_pg(src))
        return TN_OK;   /* SQLite: the write lock of the whole file is held already */
    buf sql = BUF_INIT;
    buf_puts(&sql, "LOCK TABLE ");
    if (copy_put_ident(&sql, table, "table", err, errlen) != TN_OK) {
        buf_free(&sql);
        return TN_INVALID;
    }
    buf_puts(&sql, " IN SHARE MODE");
    int rc = sql.oom ? TN_NOMEM : tn_db_exec(src, sql.p, 0, NULL);
    if (rc != TN_OK)
        rc = tn_errf(err, errlen, rc, "cannot lock table %s of the source: %s", table,
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

int copy_target_begin(tn_db *dst, char *err, size_t errlen)
{
    int rc = tn_db_begin(dst);
    if (rc == TN_OK && copy_is_pg(dst))
        rc = pg_txn_settings(dst, false, false);
    if (rc != TN_OK)
        rc = tn_errf(err, errlen, rc, "target: %s", tn_db_error(dst));
    return rc;
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
int copy_check_idents(const copy_table *t, char *err, size_t errlen)
{
    char q[72];
    if (db_quote_ident(t->name, q, sizeof(q)) != TN_OK) {
        return tn_errf(err, errlen, TN_INVALID,
                       "table '%.80s' is not a plain identifier: the copy cannot carry it",
                       t->name);
    }
    for (int i = 0; i < t->ncols; i++)
        if (db_quote_ident(t->cols[i].name, q, sizeof(q)) != TN_OK) {
            return tn_errf(err, errlen, TN_INVALID,
                           "column %s.%.80s is not a plain identifier: the copy cannot carry it",
                           t->name, t->cols[i].name);
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
            return tn_errf(err, errlen, TN_TOOBIG, "table %s: too many columns", d->name);
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
                        : copy_type_parse(c->type, &tp) &&
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
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    t->name = arena_strdup(a, table);
    t->backend = copy_is_pg(db) ? "postgres" : "sqlite";
    t->cols = arena_calloc(a, MAX_COLS * sizeof(copy_column));
    t->idx = arena_calloc(a, MAX_INDEXES * sizeof(copy_index));
    t->notes = arena_calloc(a, MAX_NOTES * sizeof(char *));
    if (t->name == NULL || t->cols == NULL || t->idx == NULL || t->notes == NULL)
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    db_table_desc *desc = NULL;
    int rc = db_describe(db, NULL, table, a, &desc);
    if (rc != TN_OK)
        rc = tn_errf(err, errlen, rc, "table %s: %s", table, tn_db_error(db));
    if (rc == TN_OK)
        rc = take_columns(desc, a, t, err, errlen);
    if (rc == TN_OK) {
        /* What a portable definition leaves behind, said once per table. */
        if (copy_is_pg(db) && desc->nfkeys + desc->nchecks > 0)
            note(t, a, "%s: %d foreign key, check or exclusion constraint(s) not carried",
                 table, desc->nfkeys + desc->nchecks);
        else if (!copy_is_pg(db) && desc->nfkeys > 0)
            note(t, a, "%s: %d foreign key(s) not carried", table, desc->nfkeys);
        if (desc->ntriggers > 0)
            note(t, a, "%s: %d trigger(s) not carried", table, desc->ntriggers);
        take_indexes(desc, a, t);
    }
    if (rc == TN_OK)
        rc = copy_check_idents(t, err, errlen);
    /* A default that is not a literal or the current time is dropped here, with a note, so
     * copy_create never meets one it cannot write. */
    for (int i = 0; i < t->ncols && rc == TN_OK; i++) {
        copy_column *c = &t->cols[i];
        char d[520];
        if (c->dflt != NULL && !copy_default_for(c->dflt, c->boolean, true, d, sizeof(d))) {
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
    bool to_pg = copy_is_pg(dst);
    const char *dstb = to_pg ? "postgres" : "sqlite";
    int npk = 0;
    for (int i = 0; i < def->ncols; i++)
        if (def->cols[i].pk > 0)
            npk++;
    buf sql = BUF_INIT;
    int rc = TN_OK;
    buf_puts(&sql, "CREATE TABLE ");
    if (copy_put_ident(&sql, def->name, "table", err, errlen) != TN_OK) {
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
        copy_put_ident(&sql, c->name, "column", err, errlen);
        if (c->custom) {
            rc = tn_errf(err, errlen, TN_INVALID,
                         "column %s.%s has type %.80s, defined in the tenant's schema: the "
                         "portable copy carries built-in types only (a target made by the "
                         "app's migrations can take it)",
                         def->name, c->name, c->type);
            goto out;
        }
        if (copy_type_for(c, def->backend, dstb, type, sizeof(type)) != TN_OK) {
            rc = tn_errf(err, errlen, TN_INVALID,
                         "column %s.%s: type '%.80s' is outside what the copy can carry",
                         def->name, c->name, c->type);
            goto out;
        }
        if (c->identity && to_pg) {
            bool intish = false;
            type_parts tp;
            if (copy_type_parse(type, &tp))
                intish = copy_type_is_int(&tp);
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
        if (c->dflt != NULL && copy_default_for(c->dflt, c->boolean, to_pg, dflt, sizeof(dflt)) &&
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
                    copy_put_ident(&sql, def->cols[i].name, "column", err, errlen);
                }
        buf_putc(&sql, ')');
    }
    buf_putc(&sql, ')');
    if (sql.oom) {
        rc = tn_errf(err, errlen, TN_NOMEM, "out of memory");
        goto out;
    }
    rc = tn_db_exec(dst, sql.p, 0, NULL);
    if (rc != TN_OK) {
        rc = tn_errf(err, errlen, rc, "cannot create table %s: %s", def->name, tn_db_error(dst));
        goto out;
    }
    for (int i = 0; i < def->nidx; i++) {
        const copy_index *x = &def->idx[i];
        char name[80];
        index_name(def, i, name, sizeof(name));
        buf_reset(&sql);
        buf_puts(&sql, x->unique ? "CREATE UNIQUE INDEX " : "CREATE INDEX ");
        copy_put_ident(&sql, name, "index", err, errlen);
        buf_puts(&sql, " ON ");
        copy_put_ident(&sql, def->name, "table", err, errlen);
        buf_puts(&sql, " (");
        for (int k = 0; k < x->ncols; k++) {
            if (k > 0)
                buf_puts(&sql, ", ");
            if (copy_put_ident(&sql, x->cols[k], "column", err, errlen) != TN_OK) {
                rc = TN_INVALID;
                goto out;
            }
        }
        buf_putc(&sql, ')');
        if (sql.oom) {
            rc = tn_errf(err, errlen, TN_NOMEM, "out of memory");
            goto out;
        }
        rc = tn_db_exec(dst, sql.p, 0, NULL);
        if (rc != TN_OK) {
            rc = tn_errf(err, errlen, rc, "cannot create index %s on %s: %s", name, def->name,
                tn_db_error(dst));
            goto out;
        }
    }
out:
    buf_free(&sql);
    return rc;
}

/* ---- emptying, constraints ------------------------------------------------------------------ */

int copy_clear(tn_db *dst, const char *table, char *err, size_t errlen)
{
    buf sql = BUF_INIT;
    buf_puts(&sql, "DELETE FROM ");
    if (copy_put_ident(&sql, table, "table", err, errlen) != TN_OK) {
        buf_free(&sql);
        return TN_INVALID;
    }
    int rc = sql.oom ? TN_NOMEM : tn_db_exec(dst, sql.p, 0, NULL);
    if (rc != TN_OK)
        rc = tn_errf(err, errlen, rc, "cannot empty %s: %s", table,
            rc == TN_NOMEM ? "out of memory" : tn_db_error(dst));
    buf_free(&sql);
    return rc;
}

int copy_defer_constraints(tn_db *dst, char *err, size_t errlen)
{
    int rc = tn_db_exec(dst, copy_is_pg(dst) ? "SET CONSTRAINTS ALL DEFERRED"
                                        : "PRAGMA defer_foreign_keys = ON", 0, NULL);
    if (rc != TN_OK)
        rc = tn_errf(err, errlen, rc, "cannot defer constraints: %s", tn_db_error(dst));
    return rc;
}

/* ---- counts and ids ------------------------------------------------------------------------- */

int copy_count(tn_db *db, const char *table, int64_t *n, char *err, size_t errlen)
{
    buf sql = BUF_INIT;
    buf_puts(&sql, "SELECT count(*) FROM ");
    if (copy_put_ident(&sql, table, "table", err, errlen) != TN_OK) {
        buf_free(&sql);
        return TN_INVALID;
    }
    char v[32];
    int rc = sql.oom ? TN_NOMEM : db_query_value(db, v, sizeof(v), sql.p, 0, NULL);
    buf_free(&sql);
    if (rc != TN_OK) {
        rc = tn_errf(err, errlen, rc, "cannot count the rows of %s: %s", table,
            rc == TN_NOMEM ? "out of memory" : tn_db_error(db));
        return rc;
    }
    *n = strtoll(v, NULL, 10);
    return TN_OK;
}

int copy_fix_ids(tn_db *dst, const copy_table *def, char *err, size_t errlen)
{
    if (!copy_is_pg(dst))
        return TN_OK;
    for (int i = 0; i < def->ncols; i++) {
        if (!def->cols[i].identity)
            continue;
        buf sql = BUF_INIT;
        buf_puts(&sql, "SELECT setval(pg_get_serial_sequence(quote_ident(current_schema()) || "
                       "'.' || quote_ident($1), $2), GREATEST((SELECT max(");
        copy_put_ident(&sql, def->cols[i].name, "column", err, errlen);
        buf_puts(&sql, ") FROM ");
        copy_put_ident(&sql, def->name, "table", err, errlen);
        buf_puts(&sql, "), 0) + 1, false)");
        const char *p[] = {def->name, def->cols[i].name};
        int rc = sql.oom ? TN_NOMEM : tn_db_exec(dst, sql.p, 2, p);
        buf_free(&sql);
        if (rc != TN_OK) {
            rc = tn_errf(err, errlen, rc, "cannot set the id sequence of %s.%s: %s", def->name,
                def->cols[i].name, rc == TN_NOMEM ? "out of memory" : tn_db_error(dst));
            return rc;
        }
    }
    return TN_OK;
}

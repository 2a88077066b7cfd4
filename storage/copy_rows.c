/*
 * copy_rows.c — a table's rows between backends, as text in batches (copy_read_*,
 * copy_write_*; see copy.h).
 *
 * Backend differences handled here and nowhere else: SQLite's text form of a REAL (15
 * digits) is replaced by an exact one; a SQLite blob is read as '\x' || hex; PostgreSQL's
 * booleans ('t'/'f') become 1/0 in SQLite; PostgreSQL is read with a cursor (its result sets
 * are held in memory whole), written with unnest of one array per column.
 *
 * Must not: write to a source connection, or put a value into SQL text (parameters only).
 */
#include "core/first.h"
#include "storage/copy_int.h"
#include "core/rc.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    }
    r->db = src;
    r->def = def;
    r->pg = copy_is_pg(src);
    buf sql = BUF_INIT;
    if (r->pg)
        buf_puts(&sql, "DECLARE tenancy_copy NO SCROLL CURSOR FOR ");
    buf_puts(&sql, "SELECT ");
    for (int i = 0; i < def->ncols; i++) {
        char q[72];
        if (db_quote_ident(def->cols[i].name, q, sizeof(q)) != TN_OK) {
            buf_free(&sql);
            copy_read_close(r);
            return copy_check_idents(def, err, errlen);
        }
        if (i > 0)
            buf_puts(&sql, ", ");
        if (r->pg)
            buf_puts(&sql, q);
        else
            sqlite_expr(&sql, q);
    }
    buf_puts(&sql, " FROM ");
    copy_put_ident(&sql, def->name, "table", err, errlen);
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
                    copy_put_ident(&sql, def->cols[i].name, "column", err, errlen);
                }
    }
    int rc;
    if (sql.oom)
        rc = tn_errf(err, errlen, TN_NOMEM, "out of memory");
    else if (r->pg)
        rc = tn_db_exec(src, sql.p, 0, NULL);
    else
        rc = tn_db_query(src, &r->rows, sql.p, 0, NULL);
    buf_free(&sql);
    if (rc != TN_OK) {
        if (rc != TN_NOMEM)
            rc = tn_errf(err, errlen, rc, "cannot read table %s: %s", def->name, tn_db_error(src));
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
                rc = tn_errf(err, errlen, rc, "cannot read table %s: %s", r->def->name,
                             tn_db_error(r->db));
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
            rc = tn_errf(err, errlen, rc, "cannot read table %s: %s", r->def->name,
                         tn_db_error(r->db));
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
    if (copy_put_ident(b, def->name, "table", err, errlen) != TN_OK)
        return TN_INVALID;
    buf_puts(b, " (");
    for (int i = 0; i < def->ncols; i++) {
        buf_puts(b, i ? ", " : "");
        if (copy_put_ident(b, def->cols[i].name, "column", err, errlen) != TN_OK)
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
    return b->oom ? tn_errf(err, errlen, TN_NOMEM, "out of memory") : TN_OK;
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
        ok = tc != NULL && copy_type_parse(tc->type, &tp) && tp.array == 0 &&
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
    if (copy_check_idents(def, err, errlen) != TN_OK)
        return TN_INVALID;
    copy_writer *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    w->db = dst;
    w->def = def;
    w->to_pg = copy_is_pg(dst);
    if (w->to_pg && unnest_sql(dst, def, &w->full)) {
        w->unnest = true;
        w->per_batch = UNNEST_ROWS;
        w->arrays = calloc((size_t)def->ncols, sizeof(buf));
        w->params = calloc((size_t)def->ncols, sizeof(char *));
        if (w->arrays == NULL || w->params == NULL) {
            copy_write_close(w);
            return tn_errf(err, errlen, TN_NOMEM, "out of memory");
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
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
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
        rc = tn_errf(err, errlen, rc, "cannot insert into %s: %s", w->def->name,
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
                return tn_errf(err, errlen, TN_NOMEM, "out of memory");
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

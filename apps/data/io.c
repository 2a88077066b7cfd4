/*
 * io.c — the whole tenant out and in: GET /export and PUT /import (README: export and
 * import).
 *
 * Owns: reading the tenant's visible tables (the catalog's rules: dt_name_internal hides the
 * app's and the host's objects) with their columns, DEFAULTs, UNIQUE columns, indexes,
 * search columns and rows into the dump format (dump.c); the SQLite file export (a
 * consistent copy taken with sqlite3_serialize inside a read transaction, then cleaned in a
 * private in-memory connection of everything but the visible tables, their FTS tables and
 * _data_changelog, and vacuumed so no freed page keeps what was dropped); and the import,
 * which reads an uploaded .db in a private read-only in-memory connection into the same
 * dump, checks it whole (dt_dump_check), and replaces the tenant's tables in ONE
 * transaction through tn_db: drop, create by POST /tables' DDL (dt_table_plan), indexes,
 * rows, FTS rebuilt, the changelog entry.
 *
 * Why sqlite3.h here: tenancy.h gives the tenant's sqlite3 handle (tn_db_native) but no
 * serialize; apps/README allows libsqlite3 to this file only. PostgreSQL is SQL only.
 *
 * Must not: attach a file, replace or write the tenant's file other than through tn_db, let
 * an uploaded file's SQL run with trust (its connection is defensive, without trusted schema,
 * extensions or the FTS3 tokenizer), export a host table (tenancy_*) or any other tenant's
 * data (only the request's own storage is read), or write anything when any part of an
 * import is refused.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "data.h"

#define DEFAULT_EXPORT_MAX (256LL << 20)
#define MIN_EXPORT_MAX 1024LL
#define MAX_EXPORT_MAX (4LL << 30)
#define CHUNK 65536
#define MAX_SRC_COLS 256

/* ---- a capped buffer in malloc memory (exports can be far larger than a request needs) ---- */

typedef struct obuf {
    char *s;
    size_t len, cap;
    long long limit;
    bool over, oom;
} obuf;

static void ob_add(obuf *b, const char *s, size_t n)
{
    if (b->over || b->oom)
        return;
    if ((long long)(b->len + n) > b->limit) {
        b->over = true;
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *ns = realloc(b->s, cap);
        if (ns == NULL) {
            b->oom = true;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void ob_puts(obuf *b, const char *s)
{
    ob_add(b, s, strlen(s));
}

static int ob_cb(const char *buf, size_t size, void *data)
{
    obuf *b = data;
    ob_add(b, buf, size);
    return b->over || b->oom ? -1 : 0;
}

static void ob_json(obuf *b, const json_t *v)
{
    if (json_dump_callback(v, ob_cb, b, JSON_COMPACT | JSON_ENCODE_ANY) != 0 && !b->over)
        b->oom = true;
}

/* data.export_max_bytes, else TENANCY_DATA_EXPORT_MAX, else 256 MiB. */
static long long export_max(dt_req *d)
{
    const char *v = tn_tenant_setting(tn_tenant_of(d->r), "data.export_max_bytes");
    if (v == NULL)
        v = getenv("TENANCY_DATA_EXPORT_MAX");
    char *end;
    long long n = v != NULL ? strtoll(v, &end, 10) : DEFAULT_EXPORT_MAX;
    if (v != NULL && (*end != '\0' || end == v))
        n = DEFAULT_EXPORT_MAX;
    return n < MIN_EXPORT_MAX ? MIN_EXPORT_MAX : n > MAX_EXPORT_MAX ? MAX_EXPORT_MAX : n;
}

static int too_large(dt_req *d, long long limit)
{
    return dt_errorf(d, 413, "too_large", tn_sprintf(d->r, "%lld bytes", limit),
                     "the export is over data.export_max_bytes");
}

/* ---- a source of rows: the tenant's tn_db, or a private connection to an uploaded file ---- */

typedef int (*row_fn)(void *arg, int ncols, const char *const *vals);

typedef struct src {
    dt_req *d;
    rest_dialect dialect;
    tn_db *db;
    sqlite3 *h;
    const char *why;     /* the failure's message, request memory */
} src;

static int src_tn(src *s, const char *sql, int np, const char *const *p, row_fn fn, void *arg)
{
    tn_rows *rows = NULL;
    const char *vals[MAX_SRC_COLS];
    int rc = tn_db_query(s->db, &rows, sql, np, p);
    while (rc == TN_OK && (rc = tn_rows_next(rows)) == TN_OK) {
        int n = tn_rows_ncols(rows);
        if (n > MAX_SRC_COLS) {
            rc = TN_TOOBIG;
            break;
        }
        for (int i = 0; i < n; i++)
            vals[i] = tn_rows_get(rows, i);
        rc = fn(arg, n, vals);
    }
    if (rc != TN_DONE && rc != TN_OK && s->why == NULL)
        s->why = tn_strdup(s->d->r, tn_db_error(s->db));
    tn_rows_free(rows);
    return rc == TN_DONE ? TN_OK : rc;
}

static int src_sqlite(src *s, const char *sql, int np, const char *const *p, row_fn fn,
                      void *arg)
{
    sqlite3_stmt *st = NULL;
    const char *vals[MAX_SRC_COLS];
    int rc = TN_OK, s3 = sqlite3_prepare_v2(s->h, sql, -1, &st, NULL);
    for (int i = 0; s3 == SQLITE_OK && i < np; i++) {
        char name[16];
        snprintf(name, sizeof(name), "$%d", i + 1);
        s3 = sqlite3_bind_text(st, sqlite3_bind_parameter_index(st, name), p[i], -1,
                               SQLITE_STATIC);
    }
    while (s3 == SQLITE_OK && rc == TN_OK && (s3 = sqlite3_step(st)) == SQLITE_ROW) {
        int n = sqlite3_column_count(st);
        if (n > MAX_SRC_COLS) {
            rc = TN_TOOBIG;
            break;
        }
        for (int i = 0; i < n; i++) {
            if (sqlite3_column_type(st, i) == SQLITE_BLOB) {
                s->why = "a value is a BLOB; the dump takes the API's types only";
                rc = TN_INVALID;
                break;
            }
            vals[i] = (const char *)sqlite3_column_text(st, i);
        }
        if (rc == TN_OK)
            rc = fn(arg, n, vals);
        s3 = SQLITE_OK;
    }
    if (s3 != SQLITE_OK && s3 != SQLITE_DONE && rc == TN_OK) {
        s->why = tn_strdup(s->d->r, sqlite3_errmsg(s->h));
        rc = s3 == SQLITE_NOMEM ? TN_NOMEM : TN_INVALID;
    }
    sqlite3_finalize(st);
    return rc;
}

static int src_each(src *s, const char *sql, int np, const char *const *p, row_fn fn, void *arg)
{
    return s->db != NULL ? src_tn(s, sql, np, p, fn, arg) : src_sqlite(s, sql, np, p, fn, arg);
}

/* ---- reading the tables ------------------------------------------------------------------- */

/* SQLite: the FTS5 tables come along (their columns are their table's search columns); other
 * virtual tables of an uploaded file are left unread. */
static const char sqlite_cols[] =
    "SELECT m.name, p.name, p.type, p.\"notnull\", p.dflt_value, p.pk, "
    " coalesce(m.sql, '') LIKE 'CREATE VIRTUAL TABLE%' "
    "FROM sqlite_schema m JOIN pragma_table_info(m.name) p "
    "WHERE m.type = 'table' AND (coalesce(m.sql, '') NOT LIKE 'CREATE VIRTUAL TABLE%' "
    " OR m.sql LIKE '%USING fts5(%') ORDER BY m.name, p.cid";

static const char pg_cols[] =
    "SELECT c.table_name, c.column_name, c.data_type, (c.is_nullable = 'NO')::int, "
    " c.column_default, 0, 0 "
    "FROM information_schema.columns c JOIN information_schema.tables t "
    " ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
    "WHERE c.table_schema = pg_catalog.current_schema() AND t.table_type = 'BASE TABLE' "
    "ORDER BY c.table_name, c.ordinal_position";


/* Columns with a one-column UNIQUE constraint (what POST /tables' "unique" makes). */
static const char sqlite_unique[] =
    "SELECT (SELECT group_concat(name, ',') FROM pragma_index_info(l.name)) "
    "FROM pragma_index_list($1) l WHERE l.origin = 'u'";
static const char pg_unique[] =
    "SELECT a.attname FROM pg_catalog.pg_constraint co "
    "JOIN pg_catalog.pg_class c ON c.oid = co.conrelid "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "JOIN pg_catalog.pg_attribute a ON a.attrelid = co.conrelid AND a.attnum = co.conkey[1] "
    "WHERE n.nspname = pg_catalog.current_schema() AND c.relname = $1 AND co.contype = 'u' "
    "AND pg_catalog.array_length(co.conkey, 1) = 1";


typedef struct xtable {
    const char *name;
    json_t *obj;          /* {name, columns, search, indexes} */
    int ncols;
    const char *cols[MAX_SRC_COLS];
    int types[MAX_SRC_COLS];
    bool has_id, has_created, has_updated, fts;
    const char *search;   /* SQLite: the FTS table's columns, comma list */
} xtable;

typedef struct reader {
    src *s;
    int n, cap;
    xtable **t;
    int status;           /* a refusal found while reading: 400 too_many_columns */
} reader;

static xtable *reader_table(reader *rd, const char *name)
{
    if (rd->n > 0 && strcmp(rd->t[rd->n - 1]->name, name) == 0)
        return rd->t[rd->n - 1];
    if (rd->n == rd->cap) {
        int cap = rd->cap ? rd->cap * 2 : 16;
        xtable **nt = tn_alloc(rd->s->d->r, (size_t)cap * sizeof(*nt));
        if (nt == NULL)
            return NULL;
        if (rd->n > 0)
            memcpy(nt, rd->t, (size_t)rd->n * sizeof(*nt));
        rd->t = nt;
        rd->cap = cap;
    }
    xtable *t = tn_alloc(rd->s->d->r, sizeof(*t));
    if (t == NULL)
        return NULL;
    memset(t, 0, sizeof(*t));
    t->name = tn_strdup(rd->s->d->r, name);
    t->obj = json_pack("{s:s, s:[], s:[], s:[]}", "name", name, "columns", "search",
                       "indexes");
    rd->t[rd->n++] = t;
    return t->name != NULL && t->obj != NULL ? t : NULL;
}

static int col_row(void *arg, int n, const char *const *v)
{
    reader *rd = arg;
    if (n < 7 || v[0] == NULL || v[1] == NULL)
        return TN_OK;
    const char *tname = v[0], *cname = v[1];
    bool fts = rd->s->dialect == REST_SQLITE && strncmp(tname, "_fts_", 5) == 0 &&
               v[6] != NULL && v[6][0] == '1';
    if (dt_name_internal(tname) && !fts)
        return TN_OK;
    xtable *t = reader_table(rd, tname);
    if (t == NULL)
        return TN_NOMEM;
    t->fts = fts;
    if (dt_name_internal(cname))   /* PostgreSQL's _search */
        return TN_OK;
    if (strcmp(cname, "id") == 0)
        t->has_id = true;
    else if (strcmp(cname, "created_at") == 0)
        t->has_created = true;
    else if (strcmp(cname, "updated_at") == 0)
        t->has_updated = true;
    if (dt_dump_reserved_col(cname) && !fts)
        return TN_OK;
    if (t->ncols == MAX_SRC_COLS - 3) {
        rd->status = 400;
        return TN_TOOBIG;
    }
    int type = rd->s->dialect == REST_SQLITE ? dt_type_from_sqlite(v[2]) : dt_type_from_pg(v[2]);
    t->cols[t->ncols] = tn_strdup(rd->s->d->r, cname);
    t->types[t->ncols++] = type;
    json_t *c = json_pack("{s:s, s:s, s:b, s:b}", "name", cname, "type", dt_type_name(type),
                          "not_null", v[3] != NULL && v[3][0] == '1', "unique", 0);
    json_t *dflt = dt_default_json(&rd->s->d->mem, v[4], type);
    if (c != NULL && dflt != NULL)
        json_object_set_new(c, "default", dflt);
    return json_array_append_new(json_object_get(t->obj, "columns"), c) == 0 ? TN_OK : TN_NOMEM;
}

static xtable *find_table(reader *rd, const char *name)
{
    for (int i = 0; i < rd->n; i++)
        if (!rd->t[i]->fts && strcmp(rd->t[i]->name, name) == 0)
            return rd->t[i];
    return NULL;
}

/* "a,b" appended to a JSON array of strings. */
static void add_list(json_t *arr, const char *list)
{
    const char *p = list;
    while (p != NULL && *p) {
        const char *e = strchr(p, ',');
        size_t n = e != NULL ? (size_t)(e - p) : strlen(p);
        json_array_append_new(arr, json_stringn(p, n));
        p = e != NULL ? e + 1 : NULL;
    }
}

static int pg_search_row(void *arg, int n, const char *const *v)
{
    reader *rd = arg;
    xtable *t = n >= 2 && v[0] != NULL ? find_table(rd, v[0]) : NULL;
    if (t != NULL && v[1] != NULL)
        add_list(json_object_get(t->obj, "search"), v[1]);
    return TN_OK;
}

static int unique_row(void *arg, int n, const char *const *v)
{
    xtable *t = arg;
    if (n < 1 || v[0] == NULL || strchr(v[0], ',') != NULL)
        return TN_OK;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(t->obj, "columns"), i, c)
        if (strcmp(json_string_value(json_object_get(c, "name")), v[0]) == 0)
            json_object_set_new(c, "unique", json_true());
    return TN_OK;
}

static int index_row(void *arg, int n, const char *const *v)
{
    xtable *t = arg;
    if (n < 3 || v[0] == NULL || dt_name_internal(v[0]))
        return TN_OK;
    json_t *cols = json_array();
    add_list(cols, v[2]);
    return json_array_append_new(json_object_get(t->obj, "indexes"),
                                 json_pack("{s:s, s:b, s:o}", "name", v[0], "unique",
                                           v[1] != NULL && v[1][0] == '1', "columns", cols)) == 0
               ? TN_OK : TN_NOMEM;
}

/* The visible tables of s with everything but their rows. */
static int read_tables(src *s, reader *rd)
{
    memset(rd, 0, sizeof(*rd));
    rd->s = s;
    bool lite = s->dialect == REST_SQLITE;
    int rc = src_each(s, lite ? sqlite_cols : pg_cols, 0, NULL, col_row, rd);
    if (rc == TN_OK && !lite)
        rc = src_each(s, dt_sql_search_pg, 0, NULL, pg_search_row, rd);
    for (int i = 0; rc == TN_OK && lite && i < rd->n; i++) {
        xtable *fts = rd->t[i], *t = fts->fts ? find_table(rd, fts->name + 5) : NULL;
        for (int k = 0; t != NULL && k < fts->ncols; k++)
            json_array_append_new(json_object_get(t->obj, "search"),
                                  json_string(fts->cols[k]));
    }
    for (int i = 0; rc == TN_OK && i < rd->n; i++) {
        xtable *t = rd->t[i];
        const char *p[1] = {t->name};
        if (t->fts)
            continue;
        rc = src_each(s, lite ? sqlite_unique : pg_unique, 1, p, unique_row, t);
        if (rc == TN_OK)
            rc = src_each(s, lite ? dt_sql_indexes_sqlite : dt_sql_indexes_pg, 1, p, index_row, t);
    }
    return rc;
}

static void reader_free(reader *rd)
{
    for (int i = 0; i < rd->n; i++)
        json_decref(rd->t[i]->obj);
    rd->n = 0;
}

/* ---- rows ----------------------------------------------------------------------------------- */

/* PostgreSQL's timestamps as ISO-8601 UTC (what the API's timestamp values accept). */
static void pg_ts_col(dt_str *b, const char *col)
{
    dt_str_add(b, "pg_catalog.to_char(");
    dt_quote_ident(b, col);
    dt_str_add(b, "::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')");
}

static void select_col(src *s, dt_str *b, const char *col, int type, bool present)
{
    if (!present)
        dt_str_add(b, "NULL");
    else if (type == DT_TIMESTAMP && s->dialect == REST_POSTGRES)
        pg_ts_col(b, col);
    else
        dt_quote_ident(b, col);
}

static const char *rows_sql(src *s, const xtable *t)
{
    dt_str b;
    dt_str_init(&b, &s->d->mem);
    dt_str_add(&b, "SELECT ");
    if (t->has_id)
        dt_quote_ident(&b, "id");
    else
        dt_str_add(&b, s->dialect == REST_SQLITE ? "rowid" : "NULL");
    for (int i = 0; i < t->ncols; i++) {
        dt_str_add(&b, ", ");
        select_col(s, &b, t->cols[i], t->types[i], true);
    }
    dt_str_add(&b, ", ");
    select_col(s, &b, "created_at", DT_TIMESTAMP, t->has_created);
    dt_str_add(&b, ", ");
    select_col(s, &b, "updated_at", DT_TIMESTAMP, t->has_updated);
    dt_str_add(&b, " FROM ");
    dt_quote_ident(&b, t->name);
    dt_str_add(&b, " ORDER BY 1");
    return dt_str_get(&b);
}

/* "...10:00:00.120000Z" → "...10:00:00.12Z": PostgreSQL's microseconds, trailing zeros cut. */
static const char *trim_fraction(dt_req *d, const char *ts)
{
    const char *dot = ts != NULL ? strrchr(ts, '.') : NULL;
    if (dot == NULL)
        return ts;
    char *c = tn_strdup(d->r, ts);
    if (c == NULL)
        return ts;
    char *z = c + (dot - ts) + strlen(dot) - 1, *e = z;   /* the 'Z' */
    while (e[-1] == '0')
        e--;
    if (e[-1] == '.')
        e--;
    memmove(e, z, 2);
    return c;
}

typedef struct rowctx {
    src *s;
    const xtable *t;
    obuf *out;
    dt_req *as;           /* the source's dialect, for dt_value_json */
    long long n;
} rowctx;

static json_t *ts_json(rowctx *c, const char *v)
{
    if (v == NULL)
        return json_null();
    return json_string(c->s->dialect == REST_POSTGRES ? trim_fraction(c->s->d, v) : v);
}

static int row_out(void *arg, int n, const char *const *v)
{
    rowctx *c = arg;
    const xtable *t = c->t;
    if (n != t->ncols + 3)
        return TN_ERR;
    json_t *row = json_array();
    json_array_append_new(row, v[0] != NULL ? json_integer(strtoll(v[0], NULL, 10))
                                            : json_null());
    for (int i = 0; i < t->ncols; i++) {
        json_t *x = t->types[i] == DT_TIMESTAMP ? ts_json(c, v[i + 1])
                                                : dt_value_json(c->as, t->types[i], v[i + 1]);
        if (x == NULL) {   /* not UTF-8 */
            json_decref(row);
            c->s->why = tn_sprintf(c->s->d->r, "%s.%s: a value is not UTF-8 text", t->name,
                                   t->cols[i]);
            return TN_INVALID;
        }
        json_array_append_new(row, x);
    }
    json_array_append_new(row, ts_json(c, v[t->ncols + 1]));
    json_array_append_new(row, ts_json(c, v[t->ncols + 2]));
    if (c->n++ > 0)
        ob_puts(c->out, ",");
    ob_json(c->out, row);
    json_decref(row);
    return c->out->over ? TN_TOOBIG : c->out->oom ? TN_NOMEM : TN_OK;
}

static int changelog_row(void *arg, int n, const char *const *v)
{
    static const int types[5] = {DT_INTEGER, DT_TIMESTAMP, DT_TEXT, DT_TEXT, DT_JSON};
    static const char *const names[5] = {"id", "at", "action", "table", "detail"};
    rowctx *c = arg;
    json_t *o = json_object();
    for (int i = 0; i < n && i < 5; i++)
        json_object_set_new(o, names[i], dt_value_json(c->as, types[i], v[i]));
    if (c->n++ > 0)
        ob_puts(c->out, ",");
    ob_json(c->out, o);
    json_decref(o);
    return c->out->over ? TN_TOOBIG : TN_OK;
}

static int write_changelog(src *s, rowctx *c)
{
    const char *exists = s->dialect == REST_SQLITE
        ? "SELECT 1 FROM sqlite_schema WHERE name = '_data_changelog'"
        : "SELECT 1 WHERE pg_catalog.to_regclass('_data_changelog') IS NOT NULL";
    int found = 0;
    ob_puts(c->out, ",\"changelog\":[");
    c->n = 0;
    tn_rows *rows = NULL;
    int rc = tn_db_query(s->db, &rows, exists, 0, NULL);
    if (rc == TN_OK)
        found = tn_rows_next(rows) == TN_OK;
    tn_rows_free(rows);
    if (rc == TN_OK && found)
        rc = src_each(s, "SELECT \"id\", \"at\", \"action\", \"table\", \"detail\" FROM "
                         "\"_data_changelog\" ORDER BY \"id\"", 0, NULL, changelog_row, c);
    ob_puts(c->out, "]");
    return rc;
}

static int lock_tables(src *s, const reader *rd);

/* The whole dump of s as JSON text into out; the changelog only from the tenant's own
 * storage. TN_TOOBIG when out's limit is reached. */
static int dump_text(src *s, obuf *out)
{
    reader rd;
    dt_req as = *s->d;
    as.dialect = s->dialect;
    int rc = read_tables(s, &rd);
    if (rc == TN_OK)
        rc = lock_tables(s, &rd);
    ob_puts(out, "{\"format\":\"" DT_DUMP_FORMAT "\",\"version\":1,\"tables\":[");
    int k = 0;
    for (int i = 0; rc == TN_OK && i < rd.n; i++) {
        const xtable *t = rd.t[i];
        if (t->fts)
            continue;
        char *meta = json_dumps(t->obj, JSON_COMPACT);
        if (meta == NULL) {
            rc = TN_NOMEM;
            break;
        }
        if (k++ > 0)
            ob_puts(out, ",");
        ob_add(out, meta, strlen(meta) - 1);   /* without its '}' */
        free(meta);
        ob_puts(out, ",\"rows\":[");
        rowctx c = {s, t, out, &as, 0};
        const char *sql = rows_sql(s, t);
        rc = sql != NULL ? src_each(s, sql, 0, NULL, row_out, &c) : TN_NOMEM;
        ob_puts(out, "]}");
    }
    ob_puts(out, "]");
    if (rc == TN_OK && s->db != NULL) {
        rowctx c = {s, NULL, out, &as, 0};
        rc = write_changelog(s, &c);
    }
    ob_puts(out, "}");
    reader_free(&rd);
    if (rc == TN_OK && out->over)
        rc = TN_TOOBIG;
    if (rc == TN_OK && out->oom)
        rc = TN_NOMEM;
    return rc;
}

/* ---- the read transaction of an export ------------------------------------------------------ */

/* SQLite: a deferred BEGIN (a snapshot, no write lock: writers go on in WAL); tn_db_begin
 * would take the write lock. PostgreSQL: a transaction in which dump_text locks the tables
 * IN SHARE MODE (lock_tables) before reading their rows, so no write commits between two of
 * them. REPEATABLE READ would not block writers, but the host starts each transaction with
 * its scope (search path, role) and SET TRANSACTION must come before any of that. */
static int read_begin(dt_req *d)
{
    if (d->dialect == REST_SQLITE)
        return tn_db_exec(d->db, "BEGIN", 0, NULL);
    return tn_db_begin(d->db);
}

static int lock_tables(src *s, const reader *rd)
{
    if (s->db == NULL || s->dialect != REST_POSTGRES)
        return TN_OK;
    dt_str b;
    dt_str_init(&b, &s->d->mem);
    dt_str_add(&b, "LOCK TABLE ");
    int n = 0;
    for (int i = 0; i < rd->n; i++) {
        if (n++ > 0)
            dt_str_add(&b, ", ");
        dt_quote_ident(&b, rd->t[i]->name);
    }
    dt_str_add(&b, " IN SHARE MODE");
    const char *sql = dt_str_get(&b);
    int rc = n == 0 ? TN_OK : sql != NULL ? tn_db_exec(s->db, sql, 0, NULL) : TN_NOMEM;
    if (rc != TN_OK && s->why == NULL)
        s->why = tn_strdup(s->d->r, tn_db_error(s->db));
    return rc;
}

static void read_end(dt_req *d)
{
    tn_db_rollback(d->db);
}

/* ---------------------------------------------------------------------------------------------- */

static int send_blob(dt_req *d, const char *ctype, const char *ext, const void *data,
                     size_t len)
{
    tn_set_status(d->r, 200);
    tn_add_header(d->r, "Content-Type", ctype);
    tn_add_header(d->r, "Content-Disposition",
                  tn_sprintf(d->r, "attachment; filename=\"%s.%s\"",
                             tn_tenant_slug(tn_tenant_of(d->r)), ext));
    int rc = TN_OK;
    for (size_t off = 0; rc == TN_OK && off < len; off += CHUNK)
        rc = tn_write(d->r, (const char *)data + off, len - off < CHUNK ? len - off : CHUNK);
    return rc;
}

static int export_json(dt_req *d, long long limit)
{
    src s = {d, d->dialect, d->db, NULL, NULL};
    obuf out = {.limit = limit};
    int rc = read_begin(d);
    if (rc == TN_OK)
        rc = dump_text(&s, &out);
    else
        s.why = tn_strdup(d->r, tn_db_error(d->db));
    read_end(d);
    if (rc == TN_OK)
        rc = send_blob(d, "application/json; charset=utf-8", "json", out.s, out.len);
    else if (rc == TN_TOOBIG)
        rc = too_large(d, limit);
    else
        rc = dt_db_error_why(d, rc, "reading the tenant's tables", s.why ? s.why : "");
    free(out.s);
    return rc;
}

/* Bytes 18 and 19 of the header say WAL (2) or rollback journal (1); an image in memory has
 * no WAL to read, so a copy is always marked rollback. */
static void rollback_header(unsigned char *img, sqlite3_int64 size)
{
    if (size >= 100)
        img[18] = img[19] = 1;
}

/* The settings db_sqlite_harden gives the host's connections (an uploaded file's schema is
 * the uploader's). */
static bool harden(sqlite3 *h)
{
    static const int off[] = {SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, SQLITE_DBCONFIG_TRUSTED_SCHEMA,
                              SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, SQLITE_DBCONFIG_ENABLE_TRIGGER,
                              SQLITE_DBCONFIG_ENABLE_VIEW};
    int got = -1;
    if (sqlite3_db_config(h, SQLITE_DBCONFIG_DEFENSIVE, 1, &got) != SQLITE_OK || got != 1)
        return false;
    for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++)
        if (sqlite3_db_config(h, off[i], 0, &got) != SQLITE_OK || got != 0)
            return false;
    return true;
}

/* An image into a private in-memory connection (img is the connection's from then on, freed
 * with it, even when this fails). */
static int open_image(unsigned char *img, sqlite3_int64 size, bool read_only, sqlite3 **out)
{
    sqlite3 *h = NULL;
    *out = NULL;
    if (sqlite3_open_v2(":memory:", &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        sqlite3_free(img);
        sqlite3_close(h);
        return TN_NOMEM;
    }
    rollback_header(img, size);
    unsigned flags = SQLITE_DESERIALIZE_FREEONCLOSE |
                     (read_only ? SQLITE_DESERIALIZE_READONLY : SQLITE_DESERIALIZE_RESIZEABLE);
    if (sqlite3_deserialize(h, "main", img, size, size, flags) != SQLITE_OK) {
        sqlite3_close(h);
        return TN_INVALID;
    }
    *out = h;
    return TN_OK;
}

static int exec1(sqlite3 *h, const char *sql)
{
    return sqlite3_exec(h, sql, NULL, NULL, NULL) == SQLITE_OK ? TN_OK : TN_ERR;
}

typedef struct dropper {
    dt_req *d;
    const char *keep;      /* the names kept, each between two "\n" */
    dt_str drops;          /* the DROP statements, each ending in ";" */
} dropper;

static bool kept(const dropper *dr, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = dr->keep; (p = strstr(p, name)) != NULL; p++)
        if ((p == dr->keep || p[-1] == '\n') && p[n] == '\n')
            return true;
    return false;
}

static int drop_row(void *arg, int n, const char *const *v)
{
    dropper *dr = arg;
    if (n < 2 || v[0] == NULL || v[1] == NULL || strncasecmp(v[1], "sqlite_", 7) == 0 ||
        kept(dr, v[1]))
        return TN_OK;
    dt_str_add(&dr->drops, "DROP ");
    dt_str_add(&dr->drops, strcmp(v[0], "table") == 0 ? "TABLE IF EXISTS " :
                           strcmp(v[0], "view") == 0 ? "VIEW IF EXISTS " : "TRIGGER IF EXISTS ");
    dt_quote_ident(&dr->drops, v[1]);
    dt_str_add(&dr->drops, ";");
    return TN_OK;
}

static int keep_row(void *arg, int n, const char *const *v)
{
    dt_str *keep = arg;
    static const char *const shadows[] = {"", "_data", "_idx", "_docsize", "_config",
                                          "_content"};
    if (n < 1 || v[0] == NULL)
        return TN_OK;
    if (!dt_name_internal(v[0])) {
        dt_str_add(keep, v[0]);
        dt_str_addc(keep, '\n');
        return TN_OK;
    }
    if (strncmp(v[0], "_fts_", 5) != 0 || n < 2 || v[1] == NULL || v[1][0] != '1')
        return TN_OK;
    for (size_t i = 0; i < sizeof(shadows) / sizeof(shadows[0]); i++) {
        dt_str_add(keep, v[0]);
        dt_str_add(keep, shadows[i]);
        dt_str_addc(keep, '\n');
    }
    return TN_OK;
}

/* Keep the visible tables, the FTS5 tables of visible tables (with their shadow tables) and
 * the changelog; drop the rest (the host's tenancy_* among them), then VACUUM so that no
 * free page keeps their content. */
static int clean_image(dt_req *d, sqlite3 *h)
{
    src s = {d, REST_SQLITE, NULL, h, NULL};
    dt_str keep;
    dt_str_init(&keep, &d->mem);
    dt_str_add(&keep, "\n_data_changelog\n");
    int rc = src_each(&s, "SELECT m.name, coalesce(m.sql, '') LIKE 'CREATE VIRTUAL TABLE%' AND "
                          " EXISTS (SELECT 1 FROM sqlite_schema t WHERE t.type = 'table' AND "
                          "  '_fts_' || t.name = m.name) "
                          "FROM sqlite_schema m WHERE m.type = 'table'", 0, NULL, keep_row,
                      &keep);
    dropper dr = {d, dt_str_get(&keep), {0}};
    dt_str_init(&dr.drops, &d->mem);
    if (rc == TN_OK)
        rc = src_each(&s, "SELECT type, name FROM sqlite_schema WHERE type IN "
                          "('table', 'view', 'trigger') ORDER BY type = 'table', "
                          "coalesce(sql, '') NOT LIKE 'CREATE VIRTUAL TABLE%'",
                      0, NULL, drop_row, &dr);
    const char *drops = dt_str_get(&dr.drops);
    if (rc == TN_OK && (dr.keep == NULL || drops == NULL))
        rc = TN_NOMEM;
    if (rc == TN_OK && drops[0] != '\0')
        rc = exec1(h, drops);
    if (rc == TN_OK)
        rc = exec1(h, "VACUUM");
    if (rc != TN_OK && s.why == NULL)
        tn_log(d->r, TN_LOG_ERROR, "export: cleaning the copy: %s", sqlite3_errmsg(h));
    return rc;
}

static int export_db(dt_req *d, long long limit)
{
    sqlite3 *h = tn_db_native(d->db), *copy = NULL;
    tn_rows *rows = NULL;
    long long size = 0;
    int rc = read_begin(d);
    if (rc == TN_OK)
        rc = tn_db_query(d->db, &rows, "SELECT page_count * page_size FROM pragma_page_count(), "
                         "pragma_page_size()", 0, NULL);
    if (rc == TN_OK && (rc = tn_rows_next(rows)) == TN_OK)
        size = strtoll(tn_rows_get(rows, 0) ? tn_rows_get(rows, 0) : "0", NULL, 10);
    tn_rows_free(rows);
    if (rc != TN_OK) {
        const char *why = tn_strdup(d->r, tn_db_error(d->db));
        read_end(d);
        return dt_db_error_why(d, rc, "reading the tenant's file", why);
    }
    if (size > limit) {
        read_end(d);
        return too_large(d, limit);
    }
    sqlite3_int64 n = 0;
    unsigned char *img = sqlite3_serialize(h, "main", &n, 0);
    read_end(d);
    if (img == NULL)
        return dt_error(d, 500, "storage_error", "the file could not be copied", NULL);
    rc = open_image(img, n, false, &copy);
    if (rc == TN_OK)
        rc = clean_image(d, copy);
    unsigned char *out = rc == TN_OK ? sqlite3_serialize(copy, "main", &n, 0) : NULL;
    sqlite3_close(copy);
    if (out == NULL)
        return dt_error(d, 500, "storage_error", "the file could not be copied", NULL);
    rc = n > limit ? too_large(d, limit)
                   : send_blob(d, "application/vnd.sqlite3", "db", out, (size_t)n);
    sqlite3_free(out);
    return rc;
}

static bool has_type(const char *header, const char *type)
{
    return header != NULL && strstr(header, type) != NULL;
}

int dt_export(dt_req *d)
{
    const char *a = tn_header(d->r, "Accept");
    bool lite = d->dialect == REST_SQLITE;
    bool db = has_type(a, "application/vnd.sqlite3") || has_type(a, "application/x-sqlite3");
    bool json = has_type(a, "application/json");
    bool any = a == NULL || a[0] == '\0' || has_type(a, "*/*") || has_type(a, "application/*");
    if (!db && !json && !any)
        return dt_error(d, 406, "not_acceptable", lite ? "the export is application/vnd.sqlite3 "
                        "or application/json" : "the export is application/json", a);
    if (db && !lite && !json && !any)
        return dt_error(d, 406, "not_acceptable", "a PostgreSQL tenant exports the JSON dump "
                        "(application/json)", a);
    long long limit = export_max(d);
    return lite && (db || !json) ? export_db(d, limit) : export_json(d, limit);
}

/* ---------------------------------------------------------------------------------------------- */

typedef struct plan {
    const json_t *t;
    const char *sql[3];
    int nsql;
    int ncols;
    const char **cols;
    int *types;
    const char *insert;
} plan;

static int make_plan(dt_req *d, const json_t *t, plan *p)
{
    memset(p, 0, sizeof(*p));
    p->t = t;
    int rc = dt_table_plan(d, t, p->sql, &p->nsql);
    if (rc != TN_OK)
        return rc;
    const json_t *cols = json_object_get(t, "columns");
    p->ncols = (int)json_array_size(cols);
    p->cols = tn_alloc(d->r, (size_t)(p->ncols + 1) * sizeof(char *));
    p->types = tn_alloc(d->r, (size_t)(p->ncols + 1) * sizeof(int));
    if (p->cols == NULL || p->types == NULL)
        return TN_NOMEM;
    dt_str b;
    dt_str_init(&b, &d->mem);
    dt_str_add(&b, "INSERT INTO ");
    dt_quote_ident(&b, json_string_value(json_object_get(t, "name")));
    dt_str_add(&b, " (\"id\"");
    for (int i = 0; i < p->ncols; i++) {
        const json_t *c = json_array_get(cols, (size_t)i);
        const json_t *ty = json_object_get(c, "type");
        p->cols[i] = json_string_value(json_object_get(c, "name"));
        p->types[i] = dt_type_parse(ty != NULL ? json_string_value(ty) : "text");
        dt_str_add(&b, ", ");
        dt_quote_ident(&b, p->cols[i]);
    }
    dt_str_add(&b, ", \"created_at\", \"updated_at\") VALUES (");
    for (int i = 0; i < p->ncols + 3; i++)
        dt_str_add(&b, tn_sprintf(d->r, i > 0 ? ", $%d" : "$%d", i + 1));
    dt_str_add(&b, ")");
    p->insert = dt_str_get(&b);
    return p->insert != NULL ? TN_OK : TN_NOMEM;
}

static int exec_built(dt_req *d, dt_str *b)
{
    const char *sql = dt_str_get(b);
    return sql != NULL ? tn_db_exec(d->db, sql, 0, NULL) : TN_NOMEM;
}

static int drop_existing(dt_req *d, json_t *dropped)
{
    int rc = dt_catalog_load(d);
    for (int i = 0; rc == TN_OK && i < d->ntables; i++) {
        const dt_table *t = &d->tables[i];
        dt_str b;
        if (d->dialect == REST_SQLITE && t->nsearch > 0) {
            dt_str_init(&b, &d->mem);
            dt_str_add(&b, "DROP TABLE ");
            dt_quote_ident(&b, dt_fts_name(d, t->name));
            rc = exec_built(d, &b);
        }
        dt_str_init(&b, &d->mem);
        dt_str_add(&b, "DROP TABLE ");
        dt_quote_ident(&b, t->name);
        if (rc == TN_OK)
            rc = exec_built(d, &b);
        json_array_append_new(dropped, json_string(t->name));
    }
    dt_catalog_reset(d);
    return rc;
}

static int create_indexes(dt_req *d, const plan *p)
{
    const char *table = json_string_value(json_object_get(p->t, "name"));
    size_t i, j;
    const json_t *x, *c;
    int rc = TN_OK;
    json_array_foreach(json_object_get(p->t, "indexes"), i, x) {
        dt_str b;
        dt_str_init(&b, &d->mem);
        dt_str_add(&b, json_is_true(json_object_get(x, "unique")) ? "CREATE UNIQUE INDEX "
                                                                  : "CREATE INDEX ");
        dt_quote_ident(&b, json_string_value(json_object_get(x, "name")));
        dt_str_add(&b, " ON ");
        dt_quote_ident(&b, table);
        dt_str_add(&b, " (");
        json_array_foreach(json_object_get(x, "columns"), j, c) {
            if (j > 0)
                dt_str_add(&b, ", ");
            dt_quote_ident(&b, json_string_value(c));
        }
        dt_str_add(&b, ")");
        if ((rc = exec_built(d, &b)) != TN_OK)
            break;
    }
    return rc;
}

static int insert_rows(dt_req *d, const plan *p)
{
    const json_t *rows = json_object_get(p->t, "rows");
    long long next = 1;
    size_t i;
    const json_t *r;
    json_array_foreach(rows, i, r) {   /* rows without an id come after the highest one */
        const json_t *id = json_array_get(r, 0);
        if (json_is_integer(id) && json_integer_value(id) >= next)
            next = json_integer_value(id) + 1;
    }
    const char **v = tn_alloc(d->r, (size_t)(p->ncols + 3) * sizeof(char *));
    const char *now = dt_now(d), *why = NULL;
    if (v == NULL)
        return TN_NOMEM;
    int rc = TN_OK;
    json_array_foreach(rows, i, r) {
        const json_t *id = json_array_get(r, 0);
        v[0] = tn_sprintf(d->r, "%lld", json_is_integer(id) ? (long long)json_integer_value(id)
                                                            : next++);
        for (int k = 0; rc == TN_OK && k < p->ncols; k++)
            rc = dt_value_text(d, p->types[k], json_array_get(r, (size_t)k + 1), &v[k + 1],
                               &why);
        for (int k = 0; k < 2; k++) {
            const char *ts = json_string_value(json_array_get(r, (size_t)p->ncols + 1 + k));
            v[p->ncols + 1 + k] = ts != NULL ? ts : now;
        }
        if (rc == TN_OK)
            rc = tn_db_exec(d->db, p->insert, p->ncols + 3, v);
        if (rc != TN_OK)
            break;
    }
    return rc;
}

/* SQLite: the FTS5 index from the rows; PostgreSQL: the identity past the highest id. */
static int after_rows(dt_req *d, const plan *p)
{
    const char *table = json_string_value(json_object_get(p->t, "name"));
    dt_str b;
    dt_str_init(&b, &d->mem);
    if (d->dialect == REST_SQLITE) {
        if (json_array_size(json_object_get(p->t, "search")) == 0)
            return TN_OK;
        const char *fts = dt_fts_name(d, table);
        dt_str_add(&b, "INSERT INTO ");
        dt_quote_ident(&b, fts);
        dt_str_add(&b, " (");
        dt_quote_ident(&b, fts);
        dt_str_add(&b, ") VALUES ('rebuild')");
        return exec_built(d, &b);
    }
    dt_str q;
    dt_str_init(&q, &d->mem);
    dt_quote_ident(&q, table);
    dt_str_add(&b, "SELECT pg_catalog.setval(pg_catalog.pg_get_serial_sequence($1, 'id'), "
                   "coalesce(max(\"id\"), 0) + 1, false) FROM ");
    dt_quote_ident(&b, table);
    const char *sql = dt_str_get(&b), *p1[1] = {dt_str_get(&q)};
    tn_rows *rows = NULL;
    int rc = sql != NULL && p1[0] != NULL ? tn_db_query(d->db, &rows, sql, 1, p1) : TN_NOMEM;
    if (rc == TN_OK && (rc = tn_rows_next(rows)) == TN_DONE)
        rc = TN_OK;
    tn_rows_free(rows);
    return rc;
}

static int import_dump(dt_req *d, const json_t *dump, const char *from)
{
    long long nrows = 0;
    dt_dump_err e;
    if (dt_dump_check(&d->mem, dump, &nrows, &e) != TN_OK)
        return dt_error(d, e.status, e.code, e.message, e.details[0] ? e.details : NULL);
    const json_t *tables = json_object_get(dump, "tables");
    size_t nt = json_array_size(tables);
    plan *plans = tn_alloc(d->r, (nt + 1) * sizeof(plan));
    if (plans == NULL)
        return TN_NOMEM;
    for (size_t i = 0; i < nt; i++) {
        int rc = make_plan(d, json_array_get(tables, i), &plans[i]);
        if (rc != TN_OK)
            return rc == TN_DONE ? TN_OK : rc;
    }
    json_t *dropped = json_array();
    int rc = tn_db_begin(d->db);
    if (rc == TN_OK)
        rc = drop_existing(d, dropped);
    for (size_t i = 0; rc == TN_OK && i < nt; i++)
        for (int k = 0; rc == TN_OK && k < plans[i].nsql; k++)
            rc = tn_db_exec(d->db, plans[i].sql[k], 0, NULL);
    for (size_t i = 0; rc == TN_OK && i < nt; i++) {
        rc = create_indexes(d, &plans[i]);
        if (rc == TN_OK)
            rc = insert_rows(d, &plans[i]);
        if (rc == TN_OK)
            rc = after_rows(d, &plans[i]);
    }
    json_t *detail = json_pack("{s:s, s:I, s:I, s:o}", "from", from, "tables", (json_int_t)nt,
                               "rows", (json_int_t)nrows, "dropped", dropped);
    if (rc == TN_OK)
        rc = dt_changelog_add(d, "import", NULL, detail);
    if (rc == TN_OK)
        rc = tn_db_commit(d->db);
    dt_catalog_reset(d);
    if (rc != TN_OK) {
        const char *why = tn_strdup(d->r, tn_db_error(d->db));
        tn_db_rollback(d->db);
        json_decref(detail);
        return dt_db_error_why(d, rc, "the import was refused; nothing was changed", why);
    }
    json_decref(detail);
    json_t *out = json_pack("{s:I, s:I}", "tables", (json_int_t)nt, "rows", (json_int_t)nrows);
    rc = dt_send_json(d, 200, out);
    json_decref(out);
    return rc;
}

/* An uploaded .db: opened read-only from memory in a private hardened connection, read by
 * the same rules as the tenant's own tables into the dump, then imported as one. */
static int import_db(dt_req *d, const char *data, size_t len)
{
    if (len < 100 || memcmp(data, "SQLite format 3", 16) != 0)
        return dt_error(d, 400, "bad_database", "the body is not an SQLite database file", NULL);
    unsigned char *img = sqlite3_malloc64(len);
    if (img == NULL)
        return TN_NOMEM;
    memcpy(img, data, len);
    sqlite3 *h = NULL;
    int rc = open_image(img, (sqlite3_int64)len, true, &h);
    if (rc == TN_OK && !harden(h))
        rc = TN_ERR;
    if (rc != TN_OK) {
        sqlite3_close(h);
        return rc == TN_INVALID ? dt_error(d, 400, "bad_database", "the file cannot be opened",
                                           NULL) : rc;
    }
    src s = {d, REST_SQLITE, NULL, h, NULL};
    obuf text = {.limit = export_max(d)};
    sqlite3_stmt *st = NULL;
    bool ok = sqlite3_prepare_v2(h, "PRAGMA quick_check", -1, &st, NULL) == SQLITE_OK &&
              sqlite3_step(st) == SQLITE_ROW &&
              strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0;
    sqlite3_finalize(st);
    rc = ok ? dump_text(&s, &text) : TN_INVALID;
    if (!ok)
        s.why = "the file fails SQLite's quick_check";
    sqlite3_close(h);
    json_t *dump = NULL;
    if (rc == TN_OK) {
        json_error_t je;
        dump = json_loadb(text.s, text.len, 0, &je);
        rc = dump != NULL ? import_dump(d, dump, "sqlite") : TN_NOMEM;
    } else if (rc == TN_TOOBIG) {
        rc = too_large(d, text.limit);
    } else {
        rc = dt_error(d, 400, "bad_database", "the file cannot be read as the API's tables",
                      s.why);
    }
    json_decref(dump);
    free(text.s);
    return rc;
}

int dt_import(dt_req *d)
{
    const char *ct = tn_header(d->r, "Content-Type");
    bool db = ct != NULL && (strncasecmp(ct, "application/vnd.sqlite3", 23) == 0 ||
                             strncasecmp(ct, "application/x-sqlite3", 21) == 0);
    if (db && d->dialect != REST_SQLITE)
        return dt_error(d, 415, "unsupported_media_type", "a PostgreSQL tenant imports the "
                        "JSON dump (application/json)", ct);
    if (db) {
        const char *data;
        size_t len;
        int rc = dt_body_raw(d, &data, &len);
        if (rc == TN_OK)
            rc = import_db(d, data != NULL ? data : "", len);
        return rc == TN_DONE ? TN_OK : rc;
    }
    if (ct == NULL || strncasecmp(ct, "application/json", 16) != 0)
        return dt_error(d, 415, "unsupported_media_type", d->dialect == REST_SQLITE
                        ? "the body must be application/json or application/vnd.sqlite3"
                        : "the body must be application/json", ct);
    json_t *dump = NULL;
    int rc = dt_body_json(d, &dump);
    if (rc == TN_OK)
        rc = import_dump(d, dump, "json");
    json_decref(dump);
    return rc == TN_DONE ? TN_OK : rc;
}

/*
 * data.h — what the data app's files share (apps/data, private to this folder).
 *
 * Owns: the request context (dt_req), the catalog's types (dt_table, dt_col), the API's
 * column types and their map per dialect, and the declarations of each file's entry points.
 * The pure helpers (sqltext.c, csv.c) take a rest_mem allocator and nothing of a request,
 * so their unit tests link them alone.
 *
 * Must not: be included outside apps/data; declare anything the host provides (that is
 * tenancy.h's).
 */
#ifndef TENANCY_APPS_DATA_DATA_H
#define TENANCY_APPS_DATA_DATA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tenancy.h"
#include "rest.h"

/* ---- types ------------------------------------------------------------------------------ */

/* The API's column types (README: the type map). */
typedef enum dt_type {
    DT_TEXT, DT_INTEGER, DT_REAL, DT_BOOLEAN, DT_TIMESTAMP, DT_JSON, DT_NTYPES
} dt_type;

/* "text" → DT_TEXT ...; -1 for a name that is none of them. */
int dt_type_parse(const char *name);
const char *dt_type_name(int type);
/* The column type written in DDL for the dialect ("INTEGER", "bigint", ...). */
const char *dt_type_sql(int type, rest_dialect d);
/* A column's declared type as the catalog reports it, read back to an API type (any
 * declared type maps to one: unknown ones are text). */
int dt_type_from_sqlite(const char *decl);
int dt_type_from_pg(const char *data_type);

/* ---- a growing string (pure) ------------------------------------------------------------ */

typedef struct dt_str {
    const rest_mem *m;
    char *s;
    size_t len, cap;
    bool oom;
} dt_str;

void dt_str_init(dt_str *b, const rest_mem *m);
void dt_str_add(dt_str *b, const char *s);
void dt_str_addn(dt_str *b, const char *s, size_t n);
void dt_str_addc(dt_str *b, char c);
/* The text so far ("" when empty), NULL when an allocation failed. */
const char *dt_str_get(dt_str *b);
/* Back to the first len bytes (len <= b->len). */
void dt_str_cut(dt_str *b, size_t len);

/* ---- names and literals (sqltext.c, pure) ------------------------------------------------ */

/* An internal object's name: starts with '_', "tenancy_" or "sqlite_" (any case). */
bool dt_name_internal(const char *name);
/* A name the API accepts for a new table or column: a letter then letters, digits and '_',
 * at most DT_NAME_MAX bytes, not internal; tables also not one of the reserved words. */
#define DT_NAME_MAX 63
bool dt_name_ok(const char *name);
bool dt_table_name_ok(const char *name);
bool dt_name_reserved(const char *name);
/* "ident" with '"' doubled. */
void dt_quote_ident(dt_str *b, const char *ident);
/* 'text' with '\'' doubled: for names we validated, where SQL wants a string (FTS5's
 * content=, COMMENT ON). */
void dt_quote_literal(dt_str *b, const char *s);
/* A DEFAULT literal from JSON: a number, 'string' (quotes doubled, NUL refused), TRUE/FALSE
 * (1/0 on SQLite), NULL. TN_OK or TN_INVALID (an object, array or a string with NUL). */
int dt_default_literal(dt_str *b, const json_t *v, int type, rest_dialect d);
/* The first word of sql that names an internal object (outside string literals and
 * comments; quoted identifiers are read as names), or NULL. Defence in depth only: the
 * sandbox is what guards the tenant's storage. */
const char *dt_scan_internal(const rest_mem *m, const char *sql);
/* ISO-8601 date or date-time ("2024-05-01", "2024-05-01T10:00:00Z", "...+02:00"). */
bool dt_timestamp_ok(const char *s);
/* Full-text terms as an FTS5 query: every word double-quoted, joined by spaces; NULL when
 * there is no word. */
const char *dt_fts5_terms(const rest_mem *m, const char *terms);

/* ---- CSV (csv.c, pure) ------------------------------------------------------------------- */

/* One field as RFC 4180 with the admin panel's formula rule: a value starting with = + - @
 * TAB or CR is quoted with a leading apostrophe. NULL writes nothing. */
void dt_csv_field(dt_str *b, const char *s);

/* A parsed CSV document: a header row and data rows, every field a string; an empty
 * unquoted field is NULL (SQL NULL), "" quoted is the empty string. */
typedef struct dt_csv {
    int ncols;
    const char **header;
    int nrows;
    const char ***rows;
} dt_csv;
/* TN_OK, TN_INVALID with *line (1-based) on a malformed document or a row whose field count
 * differs from the header's, TN_NOMEM. */
int dt_csv_parse(const rest_mem *m, const char *text, size_t len, dt_csv *out, int *line);

/* ---- the whole-tenant dump (dump.c, pure) ------------------------------------------------ */

/* README: export and import. A row of a dump's table is [id, its columns in order,
 * created_at, updated_at]. */
#define DT_DUMP_FORMAT "tenancy-data-dump"
#define DT_DUMP_VERSION 1

typedef struct dt_dump_err {
    int status;          /* 400, 422 (a value), 500 (out of memory) */
    const char *code;    /* the app's stable error code */
    char message[256];
    char details[256];   /* where: "tables[1]", "todos.rows[3]", "format" ... */
} dt_dump_err;

/* The whole dump checked by POST /tables' rules and each value by its column's type, before
 * anything is written: TN_OK with *nrows, or TN_INVALID with *e filled. */
int dt_dump_check(const rest_mem *m, const json_t *dump, long long *nrows, dt_dump_err *e);
/* v is a value a column of type takes (null included). */
bool dt_dump_value_ok(const json_t *v, int type);
/* id, created_at, updated_at: kept by the API, never a dump's column. */
bool dt_dump_reserved_col(const char *name);
/* A column's stored DEFAULT (SQLite's dflt_value, PostgreSQL's column_default) as the JSON
 * literal POST /tables takes: a number, 'string' (PostgreSQL's ::cast after it allowed),
 * TRUE/FALSE, 1/0 for booleans, NULL. New reference, or NULL for anything else (an
 * expression such as now(): such a default is left out of a dump). */
json_t *dt_default_json(const rest_mem *m, const char *sql, int type);

/* ---- the catalog (catalog.c) ------------------------------------------------------------- */

typedef struct dt_col {
    const char *name;
    int type;
    bool not_null;
    bool has_default;
    bool pk;
} dt_col;

typedef struct dt_index {
    const char *name;
    bool unique;
    const char *columns;   /* comma list */
} dt_index;

typedef struct dt_table {
    const char *name;
    int ncols;
    dt_col *cols;
    int nindexes;
    dt_index *indexes;
    int nsearch;
    const char **search;   /* full-text columns; 0 when the table has none */
} dt_table;

typedef struct dt_req {
    tn_request *r;
    tn_db *db;
    rest_dialect dialect;
    rest_mem mem;
    unsigned key_flags;
    int ntables;
    dt_table *tables;       /* loaded on first use; read only (catcache.c) */
    bool loaded;
    bool pin;               /* a read: keep the version's row set open (catcache.c) */
    tn_rows *pinned;        /* ... here, until dt_unpin */
    bool fast;              /* a read of rows on SQLite: the cached catalog may be taken on
                               the data version alone (catcache.c) ... */
    bool unconfirmed;       /* ... it was: each statement confirms it (dt_read_query) ... */
    bool ran;               /* ... a statement since has confirmed it for its snapshot ... */
    bool stale;             /* ... or found it stale: nothing was answered, and the request
                               is served again with the catalog read anew (data.c) */
    uint64_t dv;            /* SQLite: the data version the catalog was confirmed at */
} dt_req;

int dt_catalog_load(dt_req *d);
/* catcache.c: the worker's copies of its tenants' catalogs. The version of the request's
 * tenant's catalog now (with d->pin on SQLite, its row set stays open in d->pinned, and so
 * does the read transaction it began, until dt_unpin); the cached catalog of that version
 * into d (a read gets the cached block itself, a write a copy; TN_NOTFOUND when there is
 * none); keep d's loaded catalog as that version's; free them all. */
int dt_catcache_version(dt_req *d, char *out, size_t n);
void dt_unpin(dt_req *d);
/* With d->fast: the cached catalog into d when the connection's data version is the one
 * the cache last confirmed it at, without a statement (d->unconfirmed set); TN_NOTFOUND
 * when not. */
int dt_catcache_fast(dt_req *d);
/* tn_db_query for the statements of a read that may run on an unconfirmed catalog: after
 * the statement has begun its snapshot, the catalog is confirmed for it (the data version,
 * or the schema version when that moved); a catalog found stale gives TN_AGAIN with no rows
 * and d->stale set. */
int dt_read_query(dt_req *d, tn_rows **rows, const char *sql, int nparams,
                  const char *const *params);
/* Before an answer decided on an unconfirmed catalog without any statement (an error: no
 * such table, no such column): confirm it now. TN_OK to answer; TN_AGAIN when it was stale
 * (d->stale set: answer nothing). */
int dt_catcache_confirm(dt_req *d);
int dt_catcache_get(dt_req *d, const char *version);
void dt_catcache_put(dt_req *d, const char *version);
void dt_catcache_fini(void);
/* The visible table called name (exact), or NULL. Loads the catalog first. */
const dt_table *dt_table_find(dt_req *d, const char *name);
const dt_col *dt_col_find(const dt_table *t, const char *name);
/* rest_column_fn for a dt_table. */
bool dt_col_cb(void *ctx, const char *column, int *type);
/* Forget the loaded catalog (after DDL). */
void dt_catalog_reset(dt_req *d);
/* The table's indexes, read now (only GET /tables/T and /tables need them). */
int dt_catalog_indexes(dt_req *d, dt_table *t);
/* The queries that list a table's CREATE INDEX indexes ($1 the table): name, unique, columns. */
extern const char dt_sql_indexes_sqlite[];
extern const char dt_sql_indexes_pg[];
/* PostgreSQL: each table's search columns (the comment on its generated _search column). */
extern const char dt_sql_search_pg[];

/* ---- answers (out.c) ----------------------------------------------------------------------- */

/* The error body {"code","message","details","hint":null} with status; returns TN_OK (the
 * answer is complete) or TN_IO. details may be NULL. */
int dt_error(dt_req *d, int status, const char *code, const char *message,
             const char *details);
int dt_errorf(dt_req *d, int status, const char *code, const char *details,
              const char *fmt, ...) TN_PRINTF(5, 6);
/* A storage error of rc as the API's: unique conflicts 409, bad SQL 400, busy 503 ... */
int dt_db_error(dt_req *d, int rc, const char *what);
/* The same with the database's message given (read before a rollback clears it). */
int dt_db_error_why(dt_req *d, int rc, const char *what, const char *why);
/* Send v (borrowed) as JSON with status. */
int dt_send_json(dt_req *d, int status, const json_t *v);
/* Send text, JSON written by the caller (dt_value_write), as dt_send_json sends a value. */
int dt_send_json_text(dt_req *d, int status, const char *text, size_t len);
/* The request body parsed as JSON; on failure the error is sent (413, 415, 400 with line
 * and column) and TN_DONE returned. *out is a new reference on TN_OK. */
int dt_body_json(dt_req *d, json_t **out);
/* The raw body with its size checked (413 sent → TN_DONE). */
int dt_body_raw(dt_req *d, const char **data, size_t *len);
/* ---- values as JSON (jsonout.c, pure) --------------------------------------------------- */

/* Whether s is all of one integer (strtoll, in range) or one real (strtod). */
bool dt_int_text(const char *s);
bool dt_real_text(const char *s);
/* A row value (text) as JSON of its column type. New reference. */
json_t *dt_value_json(const dt_req *d, int type, const char *text);
/* The same value appended to b as the JSON text json_dumps gives for it (compact), without
 * building it when it is plain; false (b unchanged) when dt_value_json gives no value (a
 * string that is not UTF-8, a real out of range), which an object then lacks. */
bool dt_value_write(const dt_req *d, dt_str *b, int type, const char *text);
/* A string as JSON text, escaped as json_dumps escapes it; false (b unchanged) when it is
 * not UTF-8, which json_string refuses. */
bool dt_json_string(dt_str *b, const char *s);
/* A JSON value as the text to bind for a column of type: TN_OK, TN_INVALID (wrong type:
 * *why says which). *text is NULL for JSON null. */
int dt_value_text(dt_req *d, int type, const json_t *v, const char **text, const char **why);
/* The same for a CSV field (a string or NULL). */
int dt_csv_value_text(dt_req *d, int type, const char *s, const char **text, const char **why);
/* Now as ISO-8601 UTC with milliseconds, in request memory. */
const char *dt_now(dt_req *d);
/* One rows' column as JSON with names, types given per column. */
json_t *dt_row_object(const dt_req *d, tn_rows *rows, const int *types);

/* ---- handlers --------------------------------------------------------------------------- */

int dt_auth(dt_req *d);                                    /* auth.c: TN_OK or TN_DONE */
bool dt_can_write(const dt_req *d);
int dt_forbid_read_only(dt_req *d);

int dt_tables_list(dt_req *d);                             /* tables.c */
int dt_tables_create(dt_req *d);
int dt_table_describe(dt_req *d, const char *name);
int dt_table_alter(dt_req *d, const char *name);
int dt_table_drop(dt_req *d, const char *name);
int dt_index_create(dt_req *d, const char *name);
int dt_index_drop(dt_req *d, const char *table, const char *index);
int dt_changelog(dt_req *d);
/* The statements that create the table spec describes (POST /tables' body and rules) without
 * running them: TN_OK with sql[0..*nsql-1] (at most 3, request memory); TN_DONE when the spec
 * was refused (the error is answered); or an error. */
int dt_table_plan(dt_req *d, const json_t *spec, const char **sql, int *nsql);
/* Append one entry in the caller's transaction. */
int dt_changelog_add(dt_req *d, const char *action, const char *table, json_t *detail);
/* After a committed change (tables.c: the schema; rows.c: rows), tell the tenant's
 * subscribers with tn_publish: `ev` (taken: decref'd here) on "table:<table>" (table NULL:
 * on "schema"). A failure is logged, never answered: the change is committed. */
void dt_publish(dt_req *d, const char *table, json_t *ev);
json_t *dt_table_json(const dt_table *t);
/* FTS maintenance for the row ids given (SQLite only: PostgreSQL's column is generated). */
int dt_fts_delete(dt_req *d, const dt_table *t, const char *where_sql, int nparams,
                  const char *const *params);
int dt_fts_insert_ids(dt_req *d, const dt_table *t, int nids, const char *const *ids);
const char *dt_fts_name(dt_req *d, const char *table);

int dt_rows_get(dt_req *d, const dt_table *t);             /* rows.c */
int dt_rows_post(dt_req *d, const dt_table *t);
int dt_rows_patch(dt_req *d, const dt_table *t);
int dt_rows_delete(dt_req *d, const dt_table *t);
/* An error from rest.c as the API's. */
int dt_rest_error(dt_req *d, const rest_err *e);

int dt_query(dt_req *d);                                   /* query.c */
/* The row cap (POST /query and GET rows without a smaller limit) and the statement timeout
 * of POST /query: tenant settings data.row_cap and data.query_timeout_ms, else the
 * environment's TENANCY_DATA_ROW_CAP and TENANCY_DATA_TIMEOUT_MS, else the defaults. */
int dt_row_cap(dt_req *d);
int dt_timeout_ms(dt_req *d);
int dt_stats(dt_req *d);                                   /* stats.c */
/* GET /subscribe?tables=a,b: hand the request to the stream hub (subscribe.c). */
int dt_subscribe(dt_req *d);
void dt_stats_count(tn_request *r);
int dt_openapi(dt_req *d);                                 /* openapi.c */
int dt_export(dt_req *d);                                  /* io.c */
int dt_import(dt_req *d);

#endif

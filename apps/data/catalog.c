/*
 * catalog.c — the tenant's own tables as the data API shows them.
 *
 * Owns: reading the catalog at most once per request, and only when the worker's copy
 * (catcache.c) is of another version (SQLite: sqlite_schema with pragma_table_info
 * and pragma_index_list as table-valued functions; PostgreSQL: information_schema and
 * pg_catalog limited to current_schema(), the tenant's only search path), hiding internal
 * objects (dt_name_internal: '_', "tenancy_" — the host's tenancy_migrations among them —
 * and "sqlite_"), and the lookups every request's identifiers go through before they are
 * quoted into SQL.
 *
 * Must not: write, read another schema, or put a name into SQL text (names are parameters).
 */
#include <stdlib.h>
#include <string.h>

#include "data.h"

/* Only the tables the API shows, and the full-text tables that say their search columns:
 * each table's pragma_table_info costs its own virtual table, so the internal ones
 * (dt_name_internal's, the FTS shadow tables among them) are left out here, not only
 * hidden after. */
static const char sqlite_columns[] =
    "SELECT m.name, p.name, p.type, p.\"notnull\", p.dflt_value IS NOT NULL, p.pk "
    "FROM sqlite_schema m JOIN pragma_table_info(m.name) p "
    "WHERE m.type = 'table' AND ((m.name NOT GLOB '_*' AND m.name NOT LIKE 'tenancy\\_%' "
    "ESCAPE '\\' AND m.name NOT LIKE 'sqlite\\_%' ESCAPE '\\') OR (m.name GLOB '_fts_*' "
    "AND m.sql LIKE 'CREATE VIRTUAL TABLE %')) ORDER BY m.name, p.cid";

static const char pg_columns[] =
    "SELECT c.table_name, c.column_name, c.data_type, (c.is_nullable = 'NO')::int, "
    " (c.column_default IS NOT NULL OR c.is_identity = 'YES' OR c.is_generated <> 'NEVER')::int, "
    " EXISTS (SELECT 1 FROM information_schema.table_constraints tc "
    "  JOIN information_schema.key_column_usage k ON k.constraint_schema = tc.constraint_schema "
    "   AND k.constraint_name = tc.constraint_name "
    "  WHERE tc.table_schema = c.table_schema AND tc.table_name = c.table_name "
    "   AND tc.constraint_type = 'PRIMARY KEY' AND k.column_name = c.column_name)::int "
    "FROM information_schema.columns c JOIN information_schema.tables t "
    " ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
    "WHERE c.table_schema = pg_catalog.current_schema() AND t.table_type = 'BASE TABLE' "
    "ORDER BY c.table_name, c.ordinal_position";

/* The search columns of each table: a comment on its generated _search column. */
const char dt_sql_search_pg[] =
    "SELECT c.relname, pg_catalog.col_description(c.oid, a.attnum) "
    "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = pg_catalog.current_schema() AND a.attname = '_search' "
    "AND NOT a.attisdropped";

/* Arrays grown in request memory (the old block is left to the arena). */
static void *grow(dt_req *d, void *v, int n, int *cap, size_t size)
{
    if (n < *cap)
        return v;
    int ncap = *cap ? *cap * 2 : 8;
    void *nv = tn_alloc(d->r, (size_t)ncap * size);
    if (nv != NULL && n > 0)
        memcpy(nv, v, (size_t)n * size);
    if (nv != NULL)
        *cap = ncap;
    return nv;
}

typedef struct loader {
    dt_req *d;
    int captables;
    int capcols;     /* of the last table */
} loader;

static dt_table *table_for(loader *l, const char *name)
{
    dt_req *d = l->d;
    if (d->ntables > 0 && strcmp(d->tables[d->ntables - 1].name, name) == 0)
        return &d->tables[d->ntables - 1];
    d->tables = grow(d, d->tables, d->ntables, &l->captables, sizeof(dt_table));
    if (d->tables == NULL)
        return NULL;
    dt_table *t = &d->tables[d->ntables++];
    memset(t, 0, sizeof(*t));
    t->name = tn_strdup(d->r, name);
    l->capcols = 0;
    return t->name != NULL ? t : NULL;
}

static int add_column(loader *l, tn_rows *rows)
{
    const char *tname = tn_rows_get(rows, 0), *cname = tn_rows_get(rows, 1);
    if (tname == NULL || cname == NULL)
        return TN_OK;
    dt_table *t = table_for(l, tname);
    if (t == NULL)
        return TN_NOMEM;
    t->cols = grow(l->d, t->cols, t->ncols, &l->capcols, sizeof(dt_col));
    if (t->cols == NULL)
        return TN_NOMEM;
    dt_col *c = &t->cols[t->ncols++];
    const char *ty = tn_rows_get(rows, 2);
    c->name = tn_strdup(l->d->r, cname);
    c->type = l->d->dialect == REST_SQLITE ? dt_type_from_sqlite(ty) : dt_type_from_pg(ty);
    c->not_null = atoi(tn_rows_get(rows, 3) ? tn_rows_get(rows, 3) : "0") != 0;
    c->has_default = atoi(tn_rows_get(rows, 4) ? tn_rows_get(rows, 4) : "0") != 0;
    c->pk = atoi(tn_rows_get(rows, 5) ? tn_rows_get(rows, 5) : "0") != 0;
    return c->name != NULL ? TN_OK : TN_NOMEM;
}

static dt_table *find_any(dt_req *d, const char *name)
{
    for (int i = 0; i < d->ntables; i++)
        if (strcmp(d->tables[i].name, name) == 0)
            return &d->tables[i];
    return NULL;
}

/* "a,b" as a list in request memory. */
static int split_list(dt_req *d, const char *list, const char ***out)
{
    int n = 1;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    const char **v = tn_alloc(d->r, (size_t)n * sizeof(*v));
    char *copy = tn_strdup(d->r, list);
    if (v == NULL || copy == NULL)
        return -1;
    int i = 0;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save))
        v[i++] = tok;
    *out = v;
    return i;
}

/* SQLite: the FTS table _fts_T's columns are T's search columns. */
static int sqlite_search(dt_req *d)
{
    for (int i = 0; i < d->ntables; i++) {
        dt_table *fts = &d->tables[i];
        if (strncmp(fts->name, "_fts_", 5) != 0)
            continue;
        dt_table *t = find_any(d, fts->name + 5);
        if (t == NULL)
            continue;
        t->search = tn_alloc(d->r, (size_t)(fts->ncols + 1) * sizeof(char *));
        if (t->search == NULL)
            return TN_NOMEM;
        for (int j = 0; j < fts->ncols; j++)
            t->search[t->nsearch++] = fts->cols[j].name;
    }
    return TN_OK;
}

static int pg_search_cols(dt_req *d)
{
    tn_rows *rows = NULL;
    int rc = tn_db_query(d->db, &rows, dt_sql_search_pg, 0, NULL);
    while (rc == TN_OK && (rc = tn_rows_next(rows)) == TN_OK) {
        dt_table *t = find_any(d, tn_rows_get(rows, 0));
        const char *list = tn_rows_get(rows, 1);
        if (t != NULL && list != NULL && (t->nsearch = split_list(d, list, &t->search)) < 0)
            rc = TN_NOMEM;
    }
    tn_rows_free(rows);
    return rc == TN_DONE ? TN_OK : rc;
}

/* Drop the internal tables from the list, keeping the order. */
static void hide_internal(dt_req *d)
{
    int n = 0;
    for (int i = 0; i < d->ntables; i++)
        if (!dt_name_internal(d->tables[i].name))
            d->tables[n++] = d->tables[i];
    d->ntables = n;
}

/* Internal columns (PostgreSQL's _search) are not the API's. */
static void hide_columns(dt_table *t)
{
    int n = 0;
    for (int i = 0; i < t->ncols; i++)
        if (!dt_name_internal(t->cols[i].name))
            t->cols[n++] = t->cols[i];
    t->ncols = n;
}

int dt_catalog_load(dt_req *d)
{
    if (d->loaded)
        return TN_OK;
    /* Nothing at all when the file is as it was when the cache last confirmed the catalog
     * (a read of rows on SQLite, confirmed after its statements, catcache.c); else one
     * version number instead of the whole catalog when this worker has it already. */
    if (d->fast && dt_catcache_fast(d) == TN_OK) {
        d->loaded = true;
        return TN_OK;
    }
    char version[64];
    bool versioned = dt_catcache_version(d, version, sizeof(version)) == TN_OK;
    if (versioned && dt_catcache_get(d, version) == TN_OK) {
        d->loaded = true;
        return TN_OK;
    }
    loader l = {d, 0, 0};
    tn_rows *rows = NULL;
    d->ntables = 0;
    d->tables = NULL;
    int rc = tn_db_query(d->db, &rows, d->dialect == REST_SQLITE ? sqlite_columns : pg_columns,
                         0, NULL);
    while (rc == TN_OK && (rc = tn_rows_next(rows)) == TN_OK)
        rc = add_column(&l, rows);
    tn_rows_free(rows);
    if (rc == TN_DONE)
        rc = d->dialect == REST_SQLITE ? sqlite_search(d) : pg_search_cols(d);
    if (rc != TN_OK)
        return rc;
    hide_internal(d);
    for (int i = 0; i < d->ntables; i++)
        hide_columns(&d->tables[i]);
    d->loaded = true;
    if (versioned)
        dt_catcache_put(d, version);
    return TN_OK;
}

void dt_catalog_reset(dt_req *d)
{
    d->loaded = false;
}

const dt_table *dt_table_find(dt_req *d, const char *name)
{
    if (dt_catalog_load(d) != TN_OK || dt_name_internal(name))
        return NULL;
    return find_any(d, name);
}

const dt_col *dt_col_find(const dt_table *t, const char *name)
{
    for (int i = 0; i < t->ncols; i++)
        if (strcmp(t->cols[i].name, name) == 0)
            return &t->cols[i];
    return NULL;
}

bool dt_col_cb(void *ctx, const char *column, int *type)
{
    const dt_col *c = dt_col_find(ctx, column);
    if (c != NULL && type != NULL)
        *type = c->type;
    return c != NULL;
}

/* ---- indexes ----------------------------------------------------------------------------- */

/* Indexes made by CREATE INDEX, not those of a constraint (a column's "unique", which the
 * column says and an import remakes); io.c reads an uploaded file's with the same query. */
const char dt_sql_indexes_sqlite[] =
    "SELECT l.name, l.\"unique\", (SELECT group_concat(name, ',') FROM "
    " (SELECT name FROM pragma_index_info(l.name) ORDER BY seqno)) "
    "FROM pragma_index_list($1) l WHERE l.origin = 'c' ORDER BY l.name";
const char dt_sql_indexes_pg[] =
    "SELECT i.relname, ix.indisunique::int, (SELECT pg_catalog.string_agg(a.attname, ',' "
    " ORDER BY k.ord) FROM pg_catalog.unnest(ix.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord) "
    " JOIN pg_catalog.pg_attribute a ON a.attrelid = ix.indrelid AND a.attnum = k.attnum) "
    "FROM pg_catalog.pg_index ix JOIN pg_catalog.pg_class i ON i.oid = ix.indexrelid "
    "JOIN pg_catalog.pg_class c ON c.oid = ix.indrelid "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = pg_catalog.current_schema() AND c.relname = $1 "
    "AND NOT ix.indisprimary AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint co "
    " WHERE co.conindid = ix.indexrelid) ORDER BY i.relname";

int dt_catalog_indexes(dt_req *d, dt_table *t)
{
    tn_rows *rows = NULL;
    int cap = 0;
    const char *p[1] = {t->name};
    t->nindexes = 0;
    int rc = tn_db_query(d->db, &rows, d->dialect == REST_SQLITE ? dt_sql_indexes_sqlite : dt_sql_indexes_pg,
                         1, p);
    while (rc == TN_OK && (rc = tn_rows_next(rows)) == TN_OK) {
        const char *name = tn_rows_get(rows, 0);
        if (name == NULL || dt_name_internal(name))
            continue;
        t->indexes = grow(d, t->indexes, t->nindexes, &cap, sizeof(dt_index));
        if (t->indexes == NULL) {
            rc = TN_NOMEM;
            break;
        }
        dt_index *ix = &t->indexes[t->nindexes++];
        ix->name = tn_strdup(d->r, name);
        ix->unique = tn_rows_get(rows, 1) != NULL && tn_rows_get(rows, 1)[0] == '1';
        ix->columns = tn_strdup(d->r, tn_rows_get(rows, 2) ? tn_rows_get(rows, 2) : "");
    }
    tn_rows_free(rows);
    return rc == TN_DONE ? TN_OK : rc;
}

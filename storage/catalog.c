/*
 * catalog.c — the catalog, read in one place per dialect: a table's definition
 * (db_describe) and the tables of a schema (db_describe_tables), see db.h.
 *
 * Owns: the SQL that reads SQLite's pragmas and sqlite_master, and the SQL that reads
 * PostgreSQL's pg_class, pg_attribute, pg_index, pg_constraint and pg_trigger. Everyone who
 * needs a definition (the copy between backends, the panel's explorer, storage targets'
 * table order) goes through here, so there is one reading per dialect to keep right.
 * Both readers run through the parameterized API (tn_db_query), so this file needs neither
 * libsqlite3 nor libpq, and the PostgreSQL reader is linked here, not in the driver module.
 *
 * One schema only: SQLite reads one file's main schema; PostgreSQL finds the relation by its
 * namespace and name, then reads everything by its OID (a catalog-wide scan is the O(N^2)
 * trap at ten thousand schemas), and lists a schema's tables through pg_depend on its OID.
 *
 * Must not: write, read another schema than the one asked, or put a name into SQL text
 * (names are parameters here).
 */
#include "core/first.h"
#include "storage/db_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Arrays grown in the caller's arena (the old block is left to the arena). */
static void *grow(arena *a, void *v, int n, int *cap, size_t size)
{
    if (n < *cap)
        return v;
    int ncap = *cap ? *cap * 2 : 16;
    void *nv = arena_calloc(a, (size_t)ncap * size);
    if (nv != NULL && n > 0)
        memcpy(nv, v, (size_t)n * size);
    if (nv != NULL)
        *cap = ncap;
    return nv;
}

static const char *dup_or_null(arena *a, const char *s, bool *oom)
{
    if (s == NULL)
        return NULL;
    char *d = arena_strdup(a, s);
    if (d == NULL)
        *oom = true;
    return d;
}

static const char *dup0(arena *a, const char *s, bool *oom)
{
    return dup_or_null(a, s != NULL ? s : "", oom);
}

static int atoi0(const char *s)
{
    return s != NULL ? atoi(s) : 0;
}

/* A count from a one-value query; -1 when it failed (its message is in the handle). */
static int count_of(tn_db *db, const char *sql, const char *param)
{
    char v[32];
    const char *p[] = {param};
    return db_query_value(db, v, sizeof(v), sql, 1, p) == TN_OK ? atoi(v) : -1;
}

/* ==== SQLite ================================================================================ */

static int sqlite_columns(tn_db *db, const char *table, arena *a, db_table_desc *t, bool *oom)
{
    const char *p[] = {table};
    tn_rows *rows = NULL;
    /* table_xinfo, not table_info: generated columns are listed too (hidden 2 and 3); hidden
     * 1 is a virtual table's hidden column, not one of the rows' values. */
    int rc = tn_db_query(db, &rows, "SELECT name, type, \"notnull\", dflt_value, pk, hidden "
                                    "FROM pragma_table_xinfo($1) WHERE hidden <> 1 ORDER BY cid",
                         1, p);
    if (rc != TN_OK)
        return rc;
    int cap = 0;
    while ((rc = tn_rows_next(rows)) == TN_OK) {
        t->cols = grow(a, t->cols, t->ncols, &cap, sizeof(*t->cols));
        if (t->cols == NULL) {
            *oom = true;
            break;
        }
        db_column *c = &t->cols[t->ncols++];
        c->name = dup0(a, tn_rows_get(rows, 0), oom);
        c->type = dup0(a, tn_rows_get(rows, 1), oom);
        c->notnull = atoi0(tn_rows_get(rows, 2)) != 0;
        c->dflt = dup_or_null(a, tn_rows_get(rows, 3), oom);
        c->pk = atoi0(tn_rows_get(rows, 4));
        c->generated = atoi0(tn_rows_get(rows, 5)) >= 2;
        c->boolean = strcasecmp(c->type, "boolean") == 0 || strcasecmp(c->type, "bool") == 0;
    }
    tn_rows_free(rows);
    return rc == TN_DONE || rc == TN_OK ? TN_OK : rc;
}

/* Every index with its columns; an expression's place is "(expression)" in def. */
static int sqlite_indexes(tn_db *db, const char *table, arena *a, db_table_desc *t, bool *oom)
{
    const char *p[] = {table};
    tn_rows *rows = NULL;
    int rc = tn_db_query(db, &rows, "SELECT name, \"unique\", origin, partial FROM "
                                    "pragma_index_list($1) ORDER BY name", 1, p);
    if (rc != TN_OK)
        return rc;
    int cap = 0;
    while (!*oom && (rc = tn_rows_next(rows)) == TN_OK) {
        t->idx = grow(a, t->idx, t->nidx, &cap, sizeof(*t->idx));
        if (t->idx == NULL) {
            *oom = true;
            break;
        }
        db_index *x = &t->idx[t->nidx++];
        x->name = dup0(a, tn_rows_get(rows, 0), oom);
        x->unique = atoi0(tn_rows_get(rows, 1)) != 0;
        x->primary = tn_rows_get(rows, 2) != NULL && strcmp(tn_rows_get(rows, 2), "pk") == 0;
        x->partial = atoi0(tn_rows_get(rows, 3)) != 0;
    }
    tn_rows_free(rows);
    if (rc != TN_DONE && rc != TN_OK)
        return rc;
    for (int k = 0; k < t->nidx && !*oom; k++) {
        db_index *x = &t->idx[k];
        const char *ip[] = {x->name};
        rc = tn_db_query(db, &rows, "SELECT name FROM pragma_index_info($1) ORDER BY seqno", 1,
                         ip);
        if (rc != TN_OK)
            return rc;
        int ccap = 0;
        size_t dlen = 0;
        char def[1024] = "";
        x->plain = true;
        while ((rc = tn_rows_next(rows)) == TN_OK) {
            const char *cn = tn_rows_get(rows, 0);
            int w = snprintf(def + dlen, sizeof(def) - dlen, "%s%s", dlen ? ", " : "",
                             cn != NULL ? cn : "(expression)");
            dlen = w < 0 || (size_t)w >= sizeof(def) - dlen ? sizeof(def) - 1 : dlen + (size_t)w;
            if (cn == NULL) {
                x->plain = false;
                continue;
            }
            x->cols = grow(a, x->cols, x->ncols, &ccap, sizeof(*x->cols));
            if (x->cols == NULL) {
                *oom = true;
                break;
            }
            x->cols[x->ncols++] = dup0(a, cn, oom);
        }
        tn_rows_free(rows);
        if (rc != TN_DONE && rc != TN_OK)
            return rc;
        x->def = dup0(a, def, oom);
    }
    return TN_OK;
}

/* The foreign keys a query gives as (name, definition) rows, into t. */
static int fkeys_from(tn_db *db, const char *sql, const char *param, arena *a,
                      db_table_desc *t, bool *oom)
{
    const char *p[] = {param};
    tn_rows *rows = NULL;
    int rc = tn_db_query(db, &rows, sql, 1, p);
    if (rc != TN_OK)
        return rc;
    int cap = 0;
    while ((rc = tn_rows_next(rows)) == TN_OK) {
        t->fkeys = grow(a, t->fkeys, t->nfkeys, &cap, sizeof(*t->fkeys));
        if (t->fkeys == NULL) {
            *oom = true;
            break;
        }
        db_fkey *f = &t->fkeys[t->nfkeys++];
        f->name = dup0(a, tn_rows_get(rows, 0), oom);
        f->def = dup0(a, tn_rows_get(rows, 1), oom);
    }
    tn_rows_free(rows);
    return rc == TN_DONE || rc == TN_OK ? TN_OK : rc;
}

static int sqlite_fkeys(tn_db *db, const char *table, arena *a, db_table_desc *t, bool *oom)
{
    return fkeys_from(db,
                      "SELECT id, '(' || group_concat(\"from\", ', ') || ') REFERENCES ' || "
                      "\"table\" || ' (' || group_concat(COALESCE(\"to\", '(primary key)'), "
                      "', ') || ') ON UPDATE ' || on_update || ' ON DELETE ' || on_delete "
                      "FROM pragma_foreign_key_list($1) GROUP BY id ORDER BY id",
                      table, a, t, oom);
}

static int describe_sqlite(tn_db *db, const char *schema, const char *table, arena *a,
                           db_table_desc *t, bool *oom)
{
    if (schema != NULL && strcmp(schema, "main") != 0)
        return db_set_error(db, TN_INVALID, "a SQLite connection describes its main schema");
    int n = count_of(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                         "name = $1", table);
    if (n < 0)
        return TN_ERR;
    if (n == 0)
        return db_set_error(db, TN_NOTFOUND, "no such table");
    int rc = sqlite_columns(db, table, a, t, oom);
    if (rc == TN_OK && !*oom)
        rc = sqlite_indexes(db, table, a, t, oom);
    if (rc == TN_OK && !*oom)
        rc = sqlite_fkeys(db, table, a, t, oom);
    if (rc != TN_OK || *oom)
        return rc;
    t->ntriggers = count_of(db, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' "
                                "AND tbl_name = $1", table);
    if (t->ntriggers < 0)
        return TN_ERR;
    t->rows_estimate = -1;
    /* INTEGER PRIMARY KEY is the rowid (generated ids) unless the table is WITHOUT ROWID,
     * whose primary key has an index of its own. */
    int npk = 0;
    bool pk_index = false;
    for (int i = 0; i < t->ncols; i++)
        npk += t->cols[i].pk > 0;
    for (int i = 0; i < t->nidx; i++)
        pk_index |= t->idx[i].primary;
    for (int i = 0; i < t->ncols && npk == 1 && !pk_index; i++)
        if (t->cols[i].pk == 1 && strcasecmp(t->cols[i].type, "integer") == 0)
            t->cols[i].identity = true;
    return TN_OK;
}

/* Tables of a SQLite file, with the table each foreign key references (NULL for none). */
static const char SQLITE_TABLES_SQL[] =
    "SELECT m.name, f.\"table\" FROM sqlite_master m "
    "LEFT JOIN pragma_foreign_key_list(m.name) f "
    "WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
    "ORDER BY m.name";

/* ==== PostgreSQL ============================================================================ */

/* $1 the table; $2 the schema, '' for current_schema(). */
static const char PG_RELATION_SQL[] =
    "SELECT c.oid::text, c.reltuples::bigint::text FROM pg_catalog.pg_class c "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = CASE WHEN $2 = '' THEN pg_catalog.current_schema() ELSE $2 END "
    "AND c.relname = $1 AND c.relkind IN ('r', 'p')";

static const char PG_COLUMNS_SQL[] =
    "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull::int, "
    " COALESCE((SELECT pg_catalog.array_position(k.conkey, a.attnum) "
    "  FROM pg_catalog.pg_constraint k WHERE k.conrelid = a.attrelid AND k.contype = 'p'), 0), "
    " (a.attidentity IN ('a', 'd') OR COALESCE(pg_catalog.pg_get_expr(d.adbin, d.adrelid) "
    "  LIKE 'nextval(%', false))::int, "
    " (ty.typnamespace = 'pg_catalog'::pg_catalog.regnamespace)::int, "
    " pg_catalog.pg_get_expr(d.adbin, d.adrelid), "
    " (a.atttypid = 'boolean'::pg_catalog.regtype)::int, (a.attgenerated = 's')::int "
    "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type ty ON ty.oid = a.atttypid "
    "LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
    "WHERE a.attrelid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum";

/* The columns of an index, in order, by name: an expression's place (attnum 0) joins no
 * attribute, so a non-plain index may list fewer. */
static const char PG_INDEXES_SQL[] =
    "SELECT ic.relname, ix.indisunique::int, ix.indisprimary::int, "
    " (ix.indpred IS NOT NULL)::int, "
    " (ix.indexprs IS NULL AND am.amname = 'btree' AND 0 <> ALL (ix.indkey::int2[]))::int, "
    " (SELECT pg_catalog.string_agg(a.attname, ',' ORDER BY k.ord) "
    "  FROM pg_catalog.unnest(ix.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord) "
    "  JOIN pg_catalog.pg_attribute a ON a.attrelid = ix.indrelid AND a.attnum = k.attnum), "
    " pg_catalog.pg_get_indexdef(ix.indexrelid) "
    "FROM pg_catalog.pg_index ix JOIN pg_catalog.pg_class ic ON ic.oid = ix.indexrelid "
    "JOIN pg_catalog.pg_am am ON am.oid = ic.relam "
    "WHERE ix.indrelid = $1::oid ORDER BY ic.relname";

static int pg_columns(tn_db *db, const char *oid, arena *a, db_table_desc *t, bool *oom)
{
    const char *o[] = {oid};
    tn_rows *rows = NULL;
    int rc = tn_db_query(db, &rows, PG_COLUMNS_SQL, 1, o);
    if (rc != TN_OK)
        return rc;
    int cap = 0;
    while ((rc = tn_rows_next(rows)) == TN_OK) {
        t->cols = grow(a, t->cols, t->ncols, &cap, sizeof(*t->cols));
        if (t->cols == NULL) {
            *oom = true;
            break;
        }
        db_column *c = &t->cols[t->ncols++];
        c->name = dup0(a, tn_rows_get(rows, 0), oom);
        c->type = dup0(a, tn_rows_get(rows, 1), oom);
        c->notnull = atoi0(tn_rows_get(rows, 2)) != 0;
        c->pk = atoi0(tn_rows_get(rows, 3));
        c->identity = atoi0(tn_rows_get(rows, 4)) != 0;
        c->custom = atoi0(tn_rows_get(rows, 5)) == 0;
        c->dflt = dup_or_null(a, tn_rows_get(rows, 6), oom);
        c->boolean = atoi0(tn_rows_get(rows, 7)) != 0;
        c->generated = atoi0(tn_rows_get(rows, 8)) != 0;
    }
    tn_rows_free(rows);
    return rc == TN_DONE || rc == TN_OK ? TN_OK : rc;
}

static int pg_indexes(tn_db *db, const char *oid, arena *a, db_table_desc *t, bool *oom)
{
    const char *o[] = {oid};
    tn_rows *rows = NULL;
    int rc = tn_db_query(db, &rows, PG_INDEXES_SQL, 1, o);
    if (rc != TN_OK)
        return rc;
    int cap = 0;
    while ((rc = tn_rows_next(rows)) == TN_OK) {
        t->idx = grow(a, t->idx, t->nidx, &cap, sizeof(*t->idx));
        if (t->idx == NULL) {
            *oom = true;
            break;
        }
        db_index *x = &t->idx[t->nidx++];
        x->name = dup0(a, tn_rows_get(rows, 0), oom);
        x->unique = atoi0(tn_rows_get(rows, 1)) != 0;
        x->primary = atoi0(tn_rows_get(rows, 2)) != 0;
        x->partial = atoi0(tn_rows_get(rows, 3)) != 0;
        x->plain = atoi0(tn_rows_get(rows, 4)) != 0;
        x->def = dup0(a, tn_rows_get(rows, 6), oom);
        const char *list = tn_rows_get(rows, 5);
        char *cols = list != NULL ? arena_strdup(a, list) : NULL;
        int ccap = 0;
        char *save = NULL;
        for (char *s = cols != NULL ? strtok_r(cols, ",", &save) : NULL; s != NULL;
             s = strtok_r(NULL, ",", &save)) {
            x->cols = grow(a, x->cols, x->ncols, &ccap, sizeof(*x->cols));
            if (x->cols == NULL) {
                *oom = true;
                break;
            }
            x->cols[x->ncols++] = s;
        }
        if (list != NULL && cols == NULL)
            *oom = true;
    }
    tn_rows_free(rows);
    return rc == TN_DONE || rc == TN_OK ? TN_OK : rc;
}

static int pg_fkeys(tn_db *db, const char *oid, arena *a, db_table_desc *t, bool *oom)
{
    return fkeys_from(db,
                      "SELECT con.conname, pg_catalog.pg_get_constraintdef(con.oid) "
                      "FROM pg_catalog.pg_constraint con WHERE con.conrelid = $1::oid "
                      "AND con.contype = 'f' ORDER BY con.conname",
                      oid, a, t, oom);
}

static int describe_pg(tn_db *db, const char *schema, const char *table, arena *a,
                       db_table_desc *t, bool *oom)
{
    const char *p[] = {table, schema != NULL ? schema : ""};
    tn_rows *rows = NULL;
    int rc = tn_db_query(db, &rows, PG_RELATION_SQL, 2, p);
    if (rc != TN_OK)
        return rc;
    char oid[32] = "";
    rc = tn_rows_next(rows);
    if (rc == TN_OK) {
        snprintf(oid, sizeof(oid), "%s", tn_rows_get(rows, 0) ? tn_rows_get(rows, 0) : "");
        t->rows_estimate = tn_rows_get(rows, 1) ? strtoll(tn_rows_get(rows, 1), NULL, 10) : -1;
    }
    tn_rows_free(rows);
    if (rc == TN_DONE)
        return db_set_error(db, TN_NOTFOUND, "no such table");
    if (rc != TN_OK)
        return rc;
    rc = pg_columns(db, oid, a, t, oom);
    if (rc == TN_OK && !*oom)
        rc = pg_indexes(db, oid, a, t, oom);
    if (rc == TN_OK && !*oom)
        rc = pg_fkeys(db, oid, a, t, oom);
    if (rc != TN_OK || *oom)
        return rc;
    t->nchecks = count_of(db, "SELECT count(*) FROM pg_catalog.pg_constraint WHERE conrelid = "
                              "$1::oid AND contype IN ('c', 'x')", oid);
    t->ntriggers = count_of(db, "SELECT count(*) FROM pg_catalog.pg_trigger WHERE tgrelid = "
                                "$1::oid AND NOT tgisinternal", oid);
    return t->nchecks < 0 || t->ntriggers < 0 ? TN_ERR : TN_OK;
}

/* Tables of one schema (found through pg_depend by its OID), each with the table a foreign
 * key of it references inside the same schema. Partitions are left out: their rows are read
 * and written through their partitioned parent. $1 the schema, '' for current_schema(). */
static const char PG_TABLES_SQL[] =
    "WITH t AS ("
    " SELECT c.oid, c.relname FROM pg_catalog.pg_depend d"
    " JOIN pg_catalog.pg_class c ON c.oid = d.objid"
    " WHERE d.refclassid = 'pg_catalog.pg_namespace'::pg_catalog.regclass"
    " AND d.refobjid = (SELECT n.oid FROM pg_catalog.pg_namespace n WHERE n.nspname ="
    "  CASE WHEN $1 = '' THEN pg_catalog.current_schema() ELSE $1 END)"
    " AND d.refobjsubid = 0"
    " AND d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass"
    " AND c.relkind IN ('r', 'p') AND NOT c.relispartition)"
    " SELECT t.relname, p.relname FROM t"
    " LEFT JOIN pg_catalog.pg_constraint k ON k.conrelid = t.oid AND k.contype = 'f'"
    " LEFT JOIN t p ON p.oid = k.confrelid"
    " ORDER BY 1, 2";

/* ==== the entry points ======================================================================= */

int db_describe(tn_db *db, const char *schema, const char *table, arena *a, db_table_desc **out)
{
    if (out != NULL)
        *out = NULL;
    if (db == NULL)
        return TN_INVALID;
    if (table == NULL || a == NULL || out == NULL)
        return db_set_error(db, TN_INVALID, "db_describe: no table, arena or result");
    db->err[0] = '\0';
    db_table_desc *t = arena_calloc(a, sizeof(*t));
    if (t == NULL)
        return db_set_error(db, TN_NOMEM, "out of memory");
    bool oom = false;
    bool pg = db->drv->dialect == DB_DIALECT_PG;
    t->name = dup0(a, table, &oom);
    t->backend = pg ? "postgres" : "sqlite";
    int rc = pg ? describe_pg(db, schema, table, a, t, &oom)
                : describe_sqlite(db, schema, table, a, t, &oom);
    if (rc == TN_OK && oom)
        rc = db_set_error(db, TN_NOMEM, "out of memory");
    if (rc == TN_OK)
        *out = t;
    return rc;
}

int db_describe_tables(tn_db *db, const char *schema,
                       int (*fn)(void *ctx, const char *table, const char *parent), void *ctx)
{
    if (db == NULL)
        return TN_INVALID;
    if (fn == NULL)
        return db_set_error(db, TN_INVALID, "db_describe_tables: no callback");
    bool pg = db->drv->dialect == DB_DIALECT_PG;
    if (!pg && schema != NULL && strcmp(schema, "main") != 0)
        return db_set_error(db, TN_INVALID, "a SQLite connection describes its main schema");
    const char *nsp[] = {schema != NULL ? schema : ""};
    tn_rows *rows = NULL;
    int rc = pg ? tn_db_query(db, &rows, PG_TABLES_SQL, 1, nsp)
                : tn_db_query(db, &rows, SQLITE_TABLES_SQL, 0, NULL);
    while (rc == TN_OK && (rc = tn_rows_next(rows)) == TN_OK)
        if (tn_rows_get(rows, 0) != NULL)
            rc = fn(ctx, tn_rows_get(rows, 0), tn_rows_get(rows, 1));
    tn_rows_free(rows);
    return rc == TN_DONE ? TN_OK : rc;
}

int db_schema_exists(tn_db *db, const char *schema)
{
    if (db == NULL || schema == NULL)
        return TN_INVALID;
    if (db->drv->dialect != DB_DIALECT_PG)
        return strcmp(schema, "main") == 0
                   ? TN_OK
                   : db_set_error(db, TN_NOTFOUND, "no such schema: %s", schema);
    const char *nsp[] = {schema};
    char oid[24];
    int rc = db_query_value(db, oid, sizeof(oid),
                            "SELECT oid::text FROM pg_catalog.pg_namespace WHERE nspname = $1",
                            1, nsp);
    if (rc == TN_NOTFOUND)
        return db_set_error(db, TN_NOTFOUND, "no such schema");
    return rc;
}

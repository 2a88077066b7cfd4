/*
 * stats.c — GET /stats: rows per table, storage size, and this worker's request count.
 *
 * Owns: the request counter (per tenant and worker: a slot per tenant id in a direct-mapped
 * table, so tenants never see each other's, and one whose slot another tenant took starts
 * again from zero; every request counts, so it costs an increment, not a cache entry
 * written back as text), the row counts of the visible tables, and the size of the tenant's
 * storage (SQLite: page_count * page_size of its file through the pragma functions;
 * PostgreSQL: pg_total_relation_size of each table of its schema).
 *
 * Must not: read another schema, or count anything but the request's own tenant.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data.h"

#define COUNTER_SLOTS 4096

static struct counter {
    int64_t tenant_id;      /* 0: empty */
    long long n;
} counters[COUNTER_SLOTS];

/* The request's tenant's slot, taken over when another tenant had it. */
static struct counter *slot_of(tn_request *r)
{
    const tn_tenant *t = tn_tenant_of(r);
    if (t == NULL)
        return NULL;
    int64_t id = tn_tenant_id(t);
    struct counter *c = &counters[(uint64_t)id % COUNTER_SLOTS];
    if (c->tenant_id != id)
        *c = (struct counter){id, 0};
    return c;
}

static long long counter(tn_request *r)
{
    const struct counter *c = slot_of(r);
    return c != NULL ? c->n : 0;
}

void dt_stats_count(tn_request *r)
{
    struct counter *c = slot_of(r);
    if (c != NULL)
        c->n++;
}

/* One number from a query of one row and one column; -1 when there is none. */
static int64_t one_number(dt_req *d, const char *sql, int n, const char *const *p, int *rc)
{
    tn_rows *rows = NULL;
    int64_t v = -1;
    *rc = tn_db_query(d->db, &rows, sql, n, p);
    if (*rc == TN_OK && (*rc = tn_rows_next(rows)) == TN_OK && tn_rows_get(rows, 0) != NULL)
        v = strtoll(tn_rows_get(rows, 0), NULL, 10);
    if (*rc == TN_DONE)
        *rc = TN_OK;
    tn_rows_free(rows);
    return v;
}

static const char pg_size[] =
    "SELECT pg_catalog.pg_total_relation_size(c.oid) FROM pg_catalog.pg_class c "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = pg_catalog.current_schema() AND c.relname = $1";
static const char pg_schema_size[] =
    "SELECT COALESCE(sum(pg_catalog.pg_total_relation_size(c.oid)), 0)::bigint "
    "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = pg_catalog.current_schema() AND c.relkind IN ('r', 'm')";
static const char sqlite_size[] =
    "SELECT p.page_count * s.page_size FROM pragma_page_count() p, pragma_page_size() s";

static json_t *table_stats(dt_req *d, const dt_table *t, int *rc)
{
    dt_str b;
    dt_str_init(&b, &d->mem);
    dt_str_add(&b, "SELECT count(*) FROM ");
    dt_quote_ident(&b, t->name);
    int64_t rows = one_number(d, dt_str_get(&b), 0, NULL, rc);
    json_t *o = json_pack("{s:s, s:I}", "name", t->name, "rows", (json_int_t)rows);
    if (*rc == TN_OK && d->dialect == REST_POSTGRES) {
        const char *p[1] = {t->name};
        json_object_set_new(o, "bytes", json_integer(one_number(d, pg_size, 1, p, rc)));
    }
    return o;
}

int dt_stats(dt_req *d)
{
    int rc = dt_catalog_load(d);
    json_t *list = json_array();
    for (int i = 0; rc == TN_OK && i < d->ntables; i++)
        json_array_append_new(list, table_stats(d, &d->tables[i], &rc));
    int64_t size = -1;
    if (rc == TN_OK)
        size = one_number(d, d->dialect == REST_SQLITE ? sqlite_size : pg_schema_size, 0, NULL,
                          &rc);
    json_t *body = json_pack("{s:o, s:I, s:I, s:i, s:s}", "tables", list, "storage_bytes",
                             (json_int_t)size, "requests", (json_int_t)counter(d->r), "worker",
                             (int)getpid(), "backend", tn_db_backend(d->db));
    rc = rc == TN_OK ? dt_send_json(d, 200, body) : dt_db_error(d, rc, "reading the stats");
    json_decref(body);
    return rc;
}

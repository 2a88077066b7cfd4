/*
 * data.c — the data app's entry: the tn_app symbol, the request context and the router.
 *
 * Owns: the order every request goes through (a tenant's request only; its storage; the
 * bearer check; the request counter of GET /stats; then one handler chosen by method and
 * path, as README's table lays out), the 404 and 405 answers, and the refusal of writes with
 * a read-only key.
 *
 * Must not: answer a central request (no tenant) with anything but 404, touch storage
 * before the key is checked, or hold anything of a request after it ends.
 */
#include <string.h>

#include "data.h"

static void *req_alloc(void *ctx, size_t n)
{
    return tn_alloc(ctx, n);
}

/* The path split into at most four segments after the mount ("/tables/T/indexes/N"). */
typedef struct route {
    int n;
    const char *seg[4];
} route;

static int split_path(tn_request *r, const char *path, route *rt)
{
    char *copy = tn_strdup(r, path);
    if (copy == NULL)
        return TN_NOMEM;
    rt->n = 0;
    for (char *save = NULL, *s = strtok_r(copy, "/", &save); s != NULL;
         s = strtok_r(NULL, "/", &save)) {
        if (rt->n == 4)
            return TN_NOTFOUND;
        rt->seg[rt->n++] = s;
    }
    return TN_OK;
}

static bool is(const char *a, const char *b)
{
    return strcmp(a, b) == 0;
}

static int not_found(dt_req *d)
{
    return dt_errorf(d, 404, "not_found", tn_path(d->r), "no such resource");
}

static int bad_method(dt_req *d, const char *allow)
{
    tn_add_header(d->r, "Allow", allow);
    return dt_errorf(d, 405, "method_not_allowed", allow, "%s is not allowed here",
                     tn_method(d->r));
}

static bool reading(const char *m)
{
    return is(m, "GET") || is(m, "HEAD");
}

/* /tables, /tables/T, /tables/T/indexes[/N] */
static int route_tables(dt_req *d, const route *rt, const char *m)
{
    if (rt->n == 1)
        return is(m, "GET") ? dt_tables_list(d)
               : is(m, "POST") ? dt_tables_create(d)
                               : bad_method(d, "GET, POST");
    if (rt->n == 2)
        return is(m, "GET") ? dt_table_describe(d, rt->seg[1])
               : is(m, "PATCH") ? dt_table_alter(d, rt->seg[1])
               : is(m, "DELETE") ? dt_table_drop(d, rt->seg[1])
                                 : bad_method(d, "GET, PATCH, DELETE");
    if (!is(rt->seg[2], "indexes"))
        return not_found(d);
    if (rt->n == 3)
        return is(m, "POST") ? dt_index_create(d, rt->seg[1]) : bad_method(d, "POST");
    return is(m, "DELETE") ? dt_index_drop(d, rt->seg[1], rt->seg[3]) : bad_method(d, "DELETE");
}

static int rows_once(dt_req *d, const char *name, const char *m)
{
    const dt_table *t = dt_table_find(d, name);
    if (t == NULL)
        return dt_errorf(d, 404, "unknown_table", name, "no table %s", name);
    return is(m, "GET") || is(m, "HEAD") ? dt_rows_get(d, t)
           : is(m, "POST") ? dt_rows_post(d, t)
           : is(m, "PATCH") ? dt_rows_patch(d, t)
           : is(m, "DELETE") ? dt_rows_delete(d, t)
                             : bad_method(d, "GET, POST, PATCH, DELETE");
}

/* A read of rows on SQLite may take the cached catalog without its version statement and
 * confirm it afterwards (catcache.c). When that finds it stale, nothing has been answered:
 * the read is served again, with the version statement and the catalog read anew. */
static int route_rows(dt_req *d, const char *name, const char *m)
{
    d->fast = reading(m) && d->dialect == REST_SQLITE;
    int rc = rows_once(d, name, m);
    if (!d->stale)
        return rc;
    d->fast = d->unconfirmed = d->stale = false;
    dt_unpin(d);
    dt_catalog_reset(d);
    return rows_once(d, name, m);
}

static int route_top(dt_req *d, const route *rt, const char *m)
{
    const char *s = rt->n > 0 ? rt->seg[0] : "";
    if (rt->n == 0 || (rt->n == 1 && is(s, "openapi.json")))
        return is(m, "GET") ? dt_openapi(d) : bad_method(d, "GET");
    if (is(s, "tables"))
        return route_tables(d, rt, m);
    if (rt->n > 1)
        return not_found(d);
    if (is(s, "query"))
        return is(m, "POST") ? dt_query(d) : bad_method(d, "POST");
    if (is(s, "changelog"))
        return is(m, "GET") ? dt_changelog(d) : bad_method(d, "GET");
    if (is(s, "subscribe"))
        return is(m, "GET") ? dt_subscribe(d) : bad_method(d, "GET");
    if (is(s, "stats"))
        return is(m, "GET") ? dt_stats(d) : bad_method(d, "GET");
    if (is(s, "export"))
        return is(m, "GET") ? dt_export(d) : bad_method(d, "GET");
    if (is(s, "import"))
        return is(m, "PUT") ? dt_import(d) : bad_method(d, "PUT");
    if (dt_name_reserved(s))
        return not_found(d);
    return route_rows(d, s, m);
}

static int data_handle(tn_request *r)
{
    dt_req d = {.r = r, .mem = {req_alloc, r}};
    route rt;
    if (tn_tenant_of(r) == NULL)
        return dt_error(&d, 404, "not_found", "the data API serves tenants only", NULL);
    int rc = dt_auth(&d);
    if (rc != TN_OK)
        return rc == TN_DONE ? TN_OK : rc;
    d.db = tn_db_of(r);
    if (d.db == NULL) {
        tn_add_header(r, "Retry-After", "5");
        return dt_error(&d, 503, "storage_unavailable", "the tenant's storage is unavailable",
                        NULL);
    }
    d.dialect = strcmp(tn_db_backend(d.db), "sqlite") == 0 ? REST_SQLITE : REST_POSTGRES;
    dt_stats_count(r);
    const char *m = tn_method(r);
    bool write = !reading(m) && !(is(m, "POST") && is(tn_path(r), "/query"));
    if (write && !dt_can_write(&d))
        return dt_forbid_read_only(&d);
    rc = split_path(r, tn_path(r), &rt);
    if (rc == TN_NOTFOUND)
        return not_found(&d);
    d.pin = reading(m);
    rc = rc == TN_OK ? route_top(&d, &rt, m) : rc;
    dt_unpin(&d);
    return rc;
}

static void data_fini(void) { dt_catcache_fini(); }

TN_APP_DEFINE = {
    .abi = TN_ABI_VERSION,
    .name = "data",
    .version = "1",
    .handle = data_handle,
    .fini = data_fini,
};

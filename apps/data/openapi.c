/*
 * openapi.c — GET / and GET /openapi.json: an OpenAPI 3.0 document of the tenant's own
 * tables, written from the catalog.
 *
 * Owns: the API type → OpenAPI type map (README), a component schema per table, and the
 * paths /T with GET, POST, PATCH and DELETE.
 *
 * Must not: describe internal objects (the catalog already hides them) or another tenant's.
 */
#include <string.h>

#include "data.h"

static json_t *col_schema(int type)
{
    switch (type) {
    case DT_INTEGER:
        return json_pack("{s:s, s:s}", "type", "integer", "format", "int64");
    case DT_REAL:
        return json_pack("{s:s, s:s}", "type", "number", "format", "double");
    case DT_BOOLEAN:
        return json_pack("{s:s}", "type", "boolean");
    case DT_TIMESTAMP:
        return json_pack("{s:s, s:s}", "type", "string", "format", "date-time");
    case DT_JSON:
        return json_object();
    default:
        return json_pack("{s:s}", "type", "string");
    }
}

static json_t *table_schema(const dt_table *t)
{
    json_t *props = json_object(), *req = json_array();
    for (int i = 0; i < t->ncols; i++) {
        const dt_col *c = &t->cols[i];
        json_object_set_new(props, c->name, col_schema(c->type));
        if (c->not_null && !c->has_default && !c->pk && strcmp(c->name, "created_at") != 0 &&
            strcmp(c->name, "updated_at") != 0)
            json_array_append_new(req, json_string(c->name));
    }
    json_t *s = json_pack("{s:s, s:o}", "type", "object", "properties", props);
    if (json_array_size(req) > 0)
        json_object_set_new(s, "required", req);
    else
        json_decref(req);
    return s;
}

static json_t *ref(dt_req *d, const char *table)
{
    return json_pack("{s:s}", "$ref", tn_sprintf(d->r, "#/components/schemas/%s", table));
}

static json_t *rows_content(dt_req *d, const char *table)
{
    return json_pack("{s:{s:{s:s, s:o}}, s:{}}", "application/json", "schema", "type", "array",
                     "items", ref(d, table), "text/csv");
}

static json_t *table_path(dt_req *d, const dt_table *t)
{
    json_t *ok = json_pack("{s:s, s:o}", "description", "the rows", "content",
                           rows_content(d, t->name));
    json_t *body = json_pack("{s:b, s:{s:{s:o}, s:{}}}", "required", 1, "content",
                             "application/json", "schema", ref(d, t->name), "text/csv");
    return json_pack("{s:{s:s, s:[s], s:{s:o}}, s:{s:s, s:[s], s:o, s:{s:{s:s}}},"
                     " s:{s:s, s:[s], s:{s:{s:{}}}, s:{s:{s:s}}},"
                     " s:{s:s, s:[s], s:{s:{s:s}}}}",
                     "get", "summary", tn_sprintf(d->r, "read %s", t->name), "tags", t->name,
                     "responses", "200", ok,
                     "post", "summary", tn_sprintf(d->r, "insert into %s", t->name), "tags",
                     t->name, "requestBody", body, "responses", "201", "description", "created",
                     "patch", "summary", tn_sprintf(d->r, "update %s (a filter is required)",
                     t->name), "tags", t->name, "requestBody", "content", "application/json",
                     "responses", "204", "description", "updated",
                     "delete", "summary", tn_sprintf(d->r, "delete from %s (a filter is "
                     "required)", t->name), "tags", t->name, "responses", "204", "description",
                     "deleted");
}

int dt_openapi(dt_req *d)
{
    int rc = dt_catalog_load(d);
    if (rc != TN_OK)
        return dt_db_error(d, rc, "reading the catalog");
    json_t *paths = json_object(), *schemas = json_object();
    for (int i = 0; i < d->ntables; i++) {
        const dt_table *t = &d->tables[i];
        json_object_set_new(paths, tn_sprintf(d->r, "/%s", t->name), table_path(d, t));
        json_object_set_new(schemas, t->name, table_schema(t));
    }
    const char *mount = tn_mount(d->r);
    json_t *doc = json_pack(
        "{s:s, s:{s:s, s:s}, s:[{s:s}], s:o, s:{s:o, s:{s:{s:s, s:s}}}, s:[{s:[]}]}",
        "openapi", "3.0.3", "info", "title",
        tn_sprintf(d->r, "%s data API", tn_tenant_name(tn_tenant_of(d->r))), "version", "1",
        "servers", "url", mount[0] ? mount : "/", "paths", paths, "components", "schemas",
        schemas, "securitySchemes", "bearer", "type", "http", "scheme", "bearer", "security",
        "bearer");
    rc = doc != NULL ? dt_send_json(d, 200, doc) : TN_NOMEM;
    json_decref(doc);
    return rc;
}

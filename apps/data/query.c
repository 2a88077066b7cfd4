/*
 * query.c — POST /query: the tenant's own read-only SQL, in the host's sandbox.
 *
 * Owns: the body ({"sql", "params"} or {"batch": [...]}), the row cap and the statement
 * timeout (tenant settings, else the environment, else the defaults: README's limits), the
 * refusal of statements that name internal objects, and the answer
 * {"columns", "rows", "truncated"}.
 *
 * The name check (dt_scan_internal) hides the app's and the host's own objects from the
 * tenant's clients; it is defence in depth, not the guard: tn_db_query_sandboxed (a
 * read-only connection under an allow-list, or a READ ONLY transaction as the tenant's
 * role) is what keeps the statement from writing or reaching past the tenant.
 *
 * Must not: run a statement outside tn_db_query_sandboxed.
 */
#include <stdlib.h>
#include <string.h>

#include "data.h"

#define DEFAULT_ROW_CAP 1000
#define DEFAULT_TIMEOUT_MS 2000
#define MAX_ROW_CAP 100000
#define MAX_TIMEOUT_MS 60000
#define MAX_BATCH 20
#define MAX_PARAMS 100

/* A setting of the tenant, else the environment, else dflt; clamped to [lo, hi]. */
static int setting(dt_req *d, const char *key, const char *env, int dflt, int lo, int hi)
{
    const char *v = tn_tenant_setting(tn_tenant_of(d->r), key);
    if (v == NULL)
        v = getenv(env);
    char *end;
    long n = v != NULL ? strtol(v, &end, 10) : dflt;
    if (v != NULL && (*end != '\0' || end == v))
        n = dflt;
    return n < lo ? lo : n > hi ? hi : (int)n;
}

int dt_row_cap(dt_req *d)
{
    return setting(d, "data.row_cap", "TENANCY_DATA_ROW_CAP", DEFAULT_ROW_CAP, 1, MAX_ROW_CAP);
}

int dt_timeout_ms(dt_req *d)
{
    return setting(d, "data.query_timeout_ms", "TENANCY_DATA_TIMEOUT_MS", DEFAULT_TIMEOUT_MS,
                   10, MAX_TIMEOUT_MS);
}

/* One statement's parameters as text; answers bad ones (TN_DONE). */
static int read_params(dt_req *d, const json_t *jp, const char ***out, int *n)
{
    *n = 0;
    *out = NULL;
    if (jp == NULL || json_is_null(jp))
        return TN_OK;
    if (!json_is_array(jp) || json_array_size(jp) > MAX_PARAMS)
        return dt_error(d, 400, "bad_params", "params is an array of values", NULL) == TN_OK
                   ? TN_DONE : TN_IO;
    *out = tn_alloc(d->r, (json_array_size(jp) + 1) * sizeof(char *));
    size_t i;
    const json_t *v;
    json_array_foreach(jp, i, v) {
        const char *why;
        int type = json_is_string(v) ? DT_TEXT : json_is_boolean(v) ? DT_BOOLEAN : DT_JSON;
        if (dt_value_text(d, type, v, &(*out)[i], &why) != TN_OK)
            return dt_error(d, 400, "bad_params", "a parameter could not be read", why) == TN_OK
                       ? TN_DONE : TN_IO;
        (*n)++;
    }
    return TN_OK;
}

static json_t *result_json(const tn_result *res)
{
    json_t *cols = json_array(), *rows = json_array();
    for (int j = 0; j < res->ncols; j++)
        json_array_append_new(cols, json_string(res->cols[j]));
    for (int i = 0; i < res->nrows; i++) {
        json_t *row = json_array();
        for (int j = 0; j < res->ncols; j++)
            json_array_append_new(row, res->rows[i][j] ? json_string(res->rows[i][j])
                                                       : json_null());
        json_array_append_new(rows, row);
    }
    return json_pack("{s:o, s:o, s:b}", "columns", cols, "rows", rows, "truncated",
                     res->truncated);
}

/* The sandbox's refusal as the API's; always answers. */
static int sandbox_error(dt_req *d, int rc, const char *at)
{
    const char *why = tn_request_error(d->r);
    switch (rc) {
    case TN_DENIED:
        return dt_error(d, 403, "read_only", tn_sprintf(d->r, "%srefused by the sandbox", at),
                        why);
    case TN_TIMEOUT:
        return dt_error(d, 400, "query_timeout", tn_sprintf(d->r, "%sran past the time limit",
                        at), why);
    case TN_INVALID:
        return dt_error(d, 400, "sql_error", tn_sprintf(d->r, "%sis not valid SQL here", at),
                        why);
    case TN_TOOBIG:
        return dt_error(d, 413, "too_large", tn_sprintf(d->r, "%sanswer is too large", at), why);
    default:
        return dt_db_error_why(d, rc, "the query failed", why);
    }
}

/* Run one {"sql", "params"}; *res on TN_OK, else answered (TN_DONE). */
static int run_one(dt_req *d, const json_t *stmt, int index, json_t **res)
{
    const char *sql = json_string_value(json_object_get(stmt, "sql"));
    const char *at = index >= 0 ? tn_sprintf(d->r, "statement %d ", index + 1) : "the statement ";
    const char **params;
    int n;
    if (!json_is_object(stmt) || sql == NULL)
        return dt_error(d, 400, "bad_query", "a query is {\"sql\", \"params\": [...]}", NULL) ==
                       TN_OK ? TN_DONE : TN_IO;
    const char *word = dt_scan_internal(&d->mem, sql);
    if (word != NULL)
        return dt_errorf(d, 403, "internal_object", word, "%snames an internal object", at) ==
                       TN_OK ? TN_DONE : TN_IO;
    int rc = read_params(d, json_object_get(stmt, "params"), &params, &n);
    if (rc != TN_OK)
        return rc;
    const tn_result *out = NULL;
    rc = tn_db_query_sandboxed(d->r, sql, n, params, dt_row_cap(d), dt_timeout_ms(d), &out);
    if (rc != TN_OK)
        return sandbox_error(d, rc, at) == TN_OK ? TN_DONE : TN_IO;
    *res = result_json(out);
    return *res != NULL ? TN_OK : TN_NOMEM;
}

static int run_batch(dt_req *d, const json_t *batch, json_t **out)
{
    if (!json_is_array(batch) || json_array_size(batch) == 0 ||
        json_array_size(batch) > MAX_BATCH)
        return dt_error(d, 400, "bad_query", "batch is a list of queries", NULL) == TN_OK
                   ? TN_DONE : TN_IO;
    json_t *list = json_array();
    int rc = TN_OK;
    for (size_t i = 0; rc == TN_OK && i < json_array_size(batch); i++) {
        json_t *one = NULL;
        rc = run_one(d, json_array_get(batch, i), (int)i, &one);
        if (rc == TN_OK)
            json_array_append_new(list, one);
    }
    *out = rc == TN_OK ? json_pack("{s:o}", "results", list) : NULL;
    if (rc != TN_OK)
        json_decref(list);
    return rc;
}

int dt_query(dt_req *d)
{
    json_t *body = NULL, *out = NULL;
    int rc = dt_body_json(d, &body);
    const json_t *batch = json_object_get(body, "batch");
    if (rc == TN_OK && batch != NULL)
        rc = run_batch(d, batch, &out);
    else if (rc == TN_OK)
        rc = run_one(d, body, -1, &out);
    if (rc == TN_OK)
        rc = dt_send_json(d, 200, out);
    json_decref(out);
    json_decref(body);
    return rc == TN_DONE ? TN_OK : rc;
}

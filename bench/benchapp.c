/*
 * benchapp.c — the app module of bench/run load, sqlite and scaling (never installed).
 *
 *   GET  /hello    no storage: {"tenant":"<slug>"} (the chain alone, for bench/run scaling)
 *   GET  /         one query in the tenant's own storage ("SELECT tenant FROM marker WHERE
 *                  id = 1") and {"tenant":"<slug from the context>","data":"<what it read>"}:
 *                  the load generator checks both against the Host of its request.
 *   POST /insert   one transaction inserting one row into items per line of the body (name =
 *                  the line, n = its index); {"tenant":"<slug>","inserted":<rows>}.
 *
 * Migrations and seeds: bench/fixtures/load (PostgreSQL schema mode) and bench/fixtures/sqlite.
 * Built by bench/run with the C compiler against include/tenancy.h only; its tn_* symbols
 * come from tenancyd when it is loaded.
 */
#include <stdio.h>
#include <string.h>

#include "tenancy.h"

static int storage_error(tn_request *r, tn_db *db)
{
    tn_log(r, TN_LOG_ERROR, "storage: %s", db ? tn_db_error(db) : "no storage");
    return tn_send_error(r, 503, "storage error");
}

static const char *slug_of(tn_request *r)
{
    const tn_tenant *t = tn_tenant_of(r);
    return t ? tn_tenant_slug(t) : "";
}

static int read_marker(tn_request *r)
{
    tn_db *db = tn_db_of(r);
    tn_rows *rows = NULL;
    if (db == NULL ||
        tn_db_query(db, &rows, "SELECT tenant FROM marker WHERE id = 1", 0, NULL) != TN_OK)
        return storage_error(r, db);
    const char *v = tn_rows_next(rows) == TN_OK ? tn_rows_get(rows, 0) : NULL;
    tn_add_header(r, "Content-Type", "application/json");
    int rc = tn_printf(r, "{\"tenant\":\"%s\",\"data\":\"%s\"}\n", slug_of(r), v ? v : "");
    tn_rows_free(rows);
    return rc;
}

static int insert_rows(tn_request *r)
{
    const char *body;
    size_t len;
    if (tn_body(r, &body, &len) != TN_OK || len == 0)
        return tn_send_error(r, 400, "a body of lines is required");
    tn_db *db = tn_db_of(r);
    if (db == NULL || tn_db_begin(db) != TN_OK)
        return storage_error(r, db);
    char *copy = tn_strdup(r, body);
    char *save = NULL;
    int n = 0;
    for (char *line = strtok_r(copy, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save), n++) {
        char num[16];
        snprintf(num, sizeof(num), "%d", n);
        const char *p[] = {line, num};
        if (tn_db_exec(db, "INSERT INTO items (name, n) VALUES ($1, $2)", 2, p) != TN_OK) {
            int rc = storage_error(r, db);
            tn_db_rollback(db);
            return rc;
        }
    }
    if (tn_db_commit(db) != TN_OK)
        return storage_error(r, db);
    tn_add_header(r, "Content-Type", "application/json");
    return tn_printf(r, "{\"tenant\":\"%s\",\"inserted\":%d}\n", slug_of(r), n);
}

static int handle(tn_request *r)
{
    const char *path = tn_path(r);
    if (strcmp(path, "/") == 0)
        return read_marker(r);
    if (strcmp(path, "/hello") == 0) {
        tn_add_header(r, "Content-Type", "application/json");
        return tn_printf(r, "{\"tenant\":\"%s\"}\n", slug_of(r));
    }
    if (strcmp(path, "/insert") == 0 && strcmp(tn_method(r), "POST") == 0)
        return insert_rows(r);
    return tn_send_error(r, 404, "no such route");
}

TN_APP_DEFINE = {
    .abi = TN_ABI_VERSION,
    .name = "benchapp",
    .version = "1",
    .handle = handle,
};

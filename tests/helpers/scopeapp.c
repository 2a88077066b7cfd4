/*
 * scopeapp.c — a test app module (never installed) that reads its tenant's marker on a
 * PostgreSQL schema placement three ways: the two the host scopes, and the session way
 * that leaks behind PgBouncer in transaction mode (tests/integration/pgbouncer.sh).
 *
 *   GET /         one autocommit query through tn_db_of(): the marker and current_user
 *   GET /plain    the marker alone, current_user empty (either backend: the SQLite tenants of
 *                 tests/integration/affinity.sh)
 *   GET /txn      the same in an explicit transaction, as two statements (current_user,
 *                 then the marker): the second one has no scope of its own in its round
 *                 trip and relies on the transaction's SET LOCAL
 *   GET /timeout  one autocommit query: the statement_timeout it ran with (in "data"), which
 *                 the host sends with each transaction, never on the shared session
 *   GET /session  the control: the tenant's schema made the SESSION's search_path
 *                 (set_config(..., false), through tn_db_exec, as an app that switches
 *                 schemas per request would), then the marker read unqualified in a
 *                 transaction of its own, on the same connection's native handle
 *
 * Each answers {"tenant":"<slug from the context>","data":"<marker>","role":"<current_user>"}
 * (200), or 503 with the database's message. The marker is what the storeapp fixtures'
 * seed writes (tests/fixtures/storeapp/): the tenant's slug, in its own schema only.
 *
 * Why /session reads through the native handle: every transaction the host starts on a
 * scoped connection carries the tenant's own search_path, so an unqualified read through
 * tn_db_* never sees the session's. A statement the host does not scope runs with whatever
 * the server connection's session holds, and behind PgBouncer in transaction mode that
 * server connection is shared: between this request's set_config and its read, another
 * worker's request may set another tenant's schema on it. Its session role is the shared
 * login, a member of every tenant role, so the wrong schema is readable: the answer then
 * carries another tenant's marker. That is the leak the test must be able to see.
 *
 * Links libpq (for the native handle) and nothing of the project but tenancy.h.
 */
#include <stdio.h>
#include <string.h>

#include <libpq-fe.h>

#include "tenancy.h"

static int answer(tn_request *r, const char *data, const char *role)
{
    const tn_tenant *t = tn_tenant_of(r);
    tn_add_header(r, "Content-Type", "application/json");
    return tn_printf(r, "{\"tenant\":\"%s\",\"data\":\"%s\",\"role\":\"%s\"}\n",
                     t ? tn_tenant_slug(t) : "", data ? data : "", role ? role : "");
}

static int fail_db(tn_request *r, const char *what, const char *msg)
{
    tn_log(r, TN_LOG_ERROR, "%s: %s", what, msg);
    return tn_send_error(r, 503, "storage error");
}

static int scoped(tn_request *r, tn_db *db, const char *sql)
{
    tn_rows *rows = NULL;
    if (tn_db_query(db, &rows, sql, 0, NULL) != TN_OK)
        return fail_db(r, "query", tn_db_error(db));
    int rc = tn_rows_next(rows) == TN_OK ? answer(r, tn_rows_get(rows, 0), tn_rows_get(rows, 1))
                                         : fail_db(r, "query", "no marker row");
    tn_rows_free(rows);
    return rc;
}

static int in_txn(tn_request *r, tn_db *db)
{
    char role[128] = "";
    tn_rows *rows = NULL;
    if (tn_db_begin(db) != TN_OK)
        return fail_db(r, "begin", tn_db_error(db));
    if (tn_db_query(db, &rows, "SELECT current_user", 0, NULL) != TN_OK ||
        tn_rows_next(rows) != TN_OK)
        goto fail;
    snprintf(role, sizeof(role), "%s", tn_rows_get(rows, 0));
    tn_rows_free(rows);
    rows = NULL;
    if (tn_db_query(db, &rows, "SELECT tenant FROM marker WHERE id = 1", 0, NULL) != TN_OK ||
        tn_rows_next(rows) != TN_OK)
        goto fail;
    char data[128];
    snprintf(data, sizeof(data), "%s", tn_rows_get(rows, 0));
    tn_rows_free(rows);
    if (tn_db_commit(db) != TN_OK)
        return fail_db(r, "commit", tn_db_error(db));
    return answer(r, data, role);

fail:
    tn_rows_free(rows);
    tn_db_rollback(db);   /* the host would roll back too; the message is kept first */
    return fail_db(r, "transaction", tn_db_error(db));
}

static int session(tn_request *r, tn_db *db)
{
    if (strcmp(tn_db_backend(db), "postgres") != 0)
        return tn_send_error(r, 404, "PostgreSQL only");
    /* Inside the host's scoped transaction current_schema() is the tenant's; false makes the
     * setting outlive the transaction, on the session of the server connection. */
    if (tn_db_exec(db, "SELECT pg_catalog.set_config('search_path', "
                       "pg_catalog.quote_ident(pg_catalog.current_schema()), false)",
                   0, NULL) != TN_OK)
        return fail_db(r, "set_config", tn_db_error(db));
    PGconn *c = tn_db_native(db);
    PGresult *res = PQexec(c, "SELECT tenant, current_user FROM marker WHERE id = 1");
    int rc;
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
        rc = answer(r, PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1));
    else
        rc = fail_db(r, "unscoped read", PQresultErrorMessage(res));
    PQclear(res);
    return rc;
}

static int handle(tn_request *r)
{
    tn_db *db = tn_db_of(r);
    if (db == NULL)
        return fail_db(r, "storage", "no connection");
    const char *path = tn_path(r);
    if (strcmp(path, "/") == 0)
        return scoped(r, db, "SELECT tenant, current_user FROM marker WHERE id = 1");
    if (strcmp(path, "/plain") == 0)
        return scoped(r, db, "SELECT tenant, '' FROM marker WHERE id = 1");
    if (strcmp(path, "/timeout") == 0)
        return scoped(r, db, "SELECT pg_catalog.current_setting('statement_timeout'), "
                             "current_user");
    if (strcmp(path, "/txn") == 0)
        return in_txn(r, db);
    if (strcmp(path, "/session") == 0)
        return session(r, db);
    return tn_send_error(r, 404, "no such route");
}

TN_APP_DEFINE = {
    .abi = TN_ABI_VERSION,
    .name = "scopeapp",
    .version = "1",
    .handle = handle,
};

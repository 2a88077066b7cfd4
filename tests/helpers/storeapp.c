/*
 * storeapp.c — a test app module that reads and writes its tenant's own storage, and
 * misbehaves on purpose, to prove that nothing of one request's tenant reaches the next.
 *
 *   GET  /                {"tenant":"<slug from the context>","data":"<marker read from
 *                          the tenant's own storage>","name":"<display name from the
 *                          registry>"}: neither of the last two can be made from the Host,
 *                          so a test that sets them apart per tenant sees a wrong tenant
 *                          even when the slug is right
 *   GET  /fail            begins a transaction, writes the marker wrong, points the
 *                          session's search_path elsewhere (PostgreSQL), then fails
 *   GET  /sleep?ms=N      begins a transaction, writes, then sleeps (request_timeout kills)
 *   GET  /big             begins a transaction, writes, then streams 8 MB (clients abort)
 *   POST /write?batch=B&n=N  inserts N rows with ids from the body (one per line) in one
 *                          transaction; answers the ids it committed
 *   GET  /count?batch=B   rows of a batch
 *   GET  /v               {"tenant":...,"data":...,"cache":"<what this tenant's app cache
 *                          holds>"}: the stress suite's check of context, storage and
 *                          tn_cache_* together (the cache entry is set on a miss)
 *   POST /sql             runs the body as one statement on the tenant's own connection, as
 *                          an app with an SQL injection would: 200 and the rows (a line each,
 *                          values joined by '|'), or 403 "refused: <the database's message>"
 *                          (TN_DENIED), or 400 "error: <message>" (tests/integration/
 *                          isolation.sh: what the database refuses to a tenant's SQL)
 * And a chain stage, "chaos", that misbehaves before the handler on /chaos/... (the stress
 * suite, tests/stress/): each first begins a transaction and overwrites the marker, then
 *   /chaos/fail           fails (the host answers 500)
 *   /chaos/abort          abort()s the worker (nginx answers 502)
 *   /chaos/sleep?ms=N     sleeps, so that request_timeout kills the worker (504)
 * Test-only; never installed. Migrations and seed: tests/fixtures/storeapp/.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tenancy.h"

static int fail_db(tn_request *r, tn_db *db)
{
    tn_log(r, TN_LOG_ERROR, "storage: %s", db ? tn_db_error(db) : "no storage");
    return tn_send_error(r, 503, "storage error");
}

static int read_marker(tn_request *r)
{
    tn_db *db = tn_db_of(r);
    tn_rows *rows = NULL;
    if (db == NULL || tn_db_query(db, &rows, "SELECT tenant FROM marker WHERE id = 1", 0, NULL) != TN_OK)
        return fail_db(r, db);
    const char *v = tn_rows_next(rows) == TN_OK ? tn_rows_get(rows, 0) : NULL;
    const tn_tenant *t = tn_tenant_of(r);
    tn_add_header(r, "Content-Type", "application/json");
    int rc = tn_printf(r, "{\"tenant\":\"%s\",\"data\":\"%s\",\"name\":\"%s\"}\n",
                       t ? tn_tenant_slug(t) : "", v ? v : "", t ? tn_tenant_name(t) : "");
    tn_rows_free(rows);
    return rc;
}

/* Start a transaction and overwrite the marker: must never be seen by anyone. */
static tn_db *dirty(tn_request *r)
{
    tn_db *db = tn_db_of(r);
    if (db == NULL || tn_db_begin(db) != TN_OK)
        return NULL;
    const char *p[] = {"LEAKED"};
    tn_db_exec(db, "UPDATE marker SET tenant = $1 WHERE id = 1", 1, p);
    return db;
}

/* The marker, and what the app cache holds for this tenant (set to its slug on a miss). */
static int verify(tn_request *r)
{
    const tn_tenant *t = tn_tenant_of(r);
    if (t == NULL)
        return tn_send_error(r, 404, "no tenant");
    const void *cv = NULL;
    size_t cl = 0;
    if (tn_cache_get(r, "who", &cv, &cl) != TN_OK) {
        const char *slug = tn_tenant_slug(t);
        tn_cache_set(r, "who", slug, strlen(slug), 0);
        cv = slug;
        cl = strlen(slug);
    }
    tn_db *db = tn_db_of(r);
    tn_rows *rows = NULL;
    if (db == NULL || tn_db_query(db, &rows, "SELECT tenant FROM marker WHERE id = 1", 0, NULL) != TN_OK)
        return fail_db(r, db);
    const char *v = tn_rows_next(rows) == TN_OK ? tn_rows_get(rows, 0) : NULL;
    tn_add_header(r, "Content-Type", "application/json");
    int rc = tn_printf(r, "{\"tenant\":\"%s\",\"data\":\"%s\",\"cache\":\"%.*s\"}\n",
                       tn_tenant_slug(t), v ? v : "", (int)cl, (const char *)cv);
    tn_rows_free(rows);
    return rc;
}

static void sleep_ms(long v)
{
    struct timespec ts = {v / 1000, (v % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* The "chaos" stage: misbehaves mid-transaction on /chaos/..., passes everything else. */
static int chaos(tn_request *r, void *arg)
{
    (void)arg;
    const char *path = tn_path(r);
    if (strncmp(path, "/chaos/", 7) != 0)
        return TN_OK;
    dirty(r);
    if (strcmp(path, "/chaos/fail") == 0)
        return TN_ERR;
    if (strcmp(path, "/chaos/abort") == 0)
        abort();
    if (strcmp(path, "/chaos/sleep") == 0) {
        const char *ms = tn_query_arg(r, "ms");
        sleep_ms(ms ? strtol(ms, NULL, 10) : 0);
        tn_puts(r, "slept\n");
        return TN_DONE;
    }
    return tn_send_error(r, 404, "no such chaos") == TN_OK ? TN_DONE : TN_ERR;
}

static int init(const tn_app_env *env)
{
    (void)env;
    return tn_stage_add("chaos", chaos, NULL);
}

static int handle(tn_request *r)
{
    const char *path = tn_path(r);
    if (strcmp(path, "/") == 0)
        return read_marker(r);
    if (strcmp(path, "/v") == 0)
        return verify(r);
    if (strcmp(path, "/fail") == 0) {
        tn_db *db = dirty(r);
        if (db != NULL && strcmp(tn_db_backend(db), "postgres") == 0) {
            /* A hostile app tries to leave the session pointing at another schema. */
            const char *p[] = {"public"};
            tn_db_exec(db, "SELECT set_config('search_path', $1, false)", 1, p);
        }
        return TN_ERR;   /* the host answers 500; the transaction must be rolled back */
    }
    if (strcmp(path, "/sleep") == 0) {
        dirty(r);
        const char *ms = tn_query_arg(r, "ms");
        sleep_ms(ms ? strtol(ms, NULL, 10) : 0);
        return tn_puts(r, "slept\n");
    }
    if (strcmp(path, "/big") == 0) {
        dirty(r);
        static char chunk[65536];
        memset(chunk, 'x', sizeof(chunk));
        for (int i = 0; i < 128; i++)
            if (tn_write(r, chunk, sizeof(chunk)) != TN_OK)
                return TN_IO;   /* the client went away mid-response */
        return TN_OK;
    }
    if (strcmp(path, "/write") == 0 && strcmp(tn_method(r), "POST") == 0) {
        const char *batch = tn_query_arg(r, "batch");
        const char *body;
        size_t len;
        if (batch == NULL || tn_body(r, &body, &len) != TN_OK)
            return tn_send_error(r, 400, "batch and a body of ids are required");
        tn_db *db = tn_db_of(r);
        if (db == NULL || tn_db_begin(db) != TN_OK)
            return fail_db(r, db);
        int n = 0;
        char *copy = tn_strdup(r, body);
        char *save = NULL;
        for (char *id = strtok_r(copy, "\n", &save); id; id = strtok_r(NULL, "\n", &save), n++) {
            char num[16];
            snprintf(num, sizeof(num), "%d", n);
            const char *p[] = {id, batch, num};
            if (tn_db_exec(db, "INSERT INTO writes (id, batch, n) VALUES ($1, $2, $3)", 3, p) != TN_OK) {
                tn_db_rollback(db);
                return fail_db(r, db);
            }
        }
        if (tn_db_commit(db) != TN_OK)
            return fail_db(r, db);
        return tn_printf(r, "committed %d\n", n);
    }
    if (strcmp(path, "/sql") == 0 && strcmp(tn_method(r), "POST") == 0) {
        const char *body;
        size_t len;
        if (tn_body(r, &body, &len) != TN_OK || len == 0)
            return tn_send_error(r, 400, "a statement is required");
        tn_db *db = tn_db_of(r);
        if (db == NULL)
            return fail_db(r, db);
        tn_rows *rows = NULL;
        int rc = tn_db_query(db, &rows, tn_strdup(r, body), 0, NULL);
        tn_add_header(r, "Content-Type", "text/plain");
        if (rc != TN_OK) {
            tn_set_status(r, rc == TN_DENIED ? 403 : 400);
            return tn_printf(r, "%s: %s\n", rc == TN_DENIED ? "refused" : "error",
                             tn_db_error(db));
        }
        int n = tn_rows_ncols(rows);
        while (tn_rows_next(rows) == TN_OK) {
            for (int i = 0; i < n; i++) {
                const char *v = tn_rows_get(rows, i);
                tn_printf(r, "%s%s", i ? "|" : "", v ? v : "NULL");
            }
            tn_puts(r, "\n");
        }
        tn_rows_free(rows);
        return TN_OK;
    }
    if (strcmp(path, "/count") == 0) {
        const char *batch = tn_query_arg(r, "batch");
        tn_db *db = tn_db_of(r);
        tn_rows *rows = NULL;
        const char *p[] = {batch ? batch : ""};
        if (db == NULL ||
            tn_db_query(db, &rows, "SELECT count(*) FROM writes WHERE batch = $1", 1, p) != TN_OK)
            return fail_db(r, db);
        int rc = tn_printf(r, "%s\n", tn_rows_next(rows) == TN_OK ? tn_rows_get(rows, 0) : "?");
        tn_rows_free(rows);
        return rc;
    }
    return tn_send_error(r, 404, "no such route");
}

TN_APP_DEFINE = {
    .abi = TN_ABI_VERSION,
    .name = "storeapp",
    .version = "1",
    .init = init,
    .handle = handle,
};

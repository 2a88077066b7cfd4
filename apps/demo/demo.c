/*
 * demo — the app `make demo` serves: a small JSON page about the request it answers, with
 * the tenant taken from the request's context.
 *
 *   GET /       {"tenant": "acme", "name": "Acme Corp", "data": "<read from acme's own
 *                storage>", "host": ..., "worker": pid, "request_id": ..., "visits": n}
 *                (visits counted per tenant, per worker, in the tenant cache; data is the
 *                first greeting the tenant's seed wrote in its own file or schema)
 *               on a central domain: {"tenant": null, "platform": true, ...}
 *   GET /hello  plain text greeting
 *   POST /greet?message=TEXT   queues a job (tn_job_enqueue) that adds TEXT to the tenant's
 *               greetings later, outside the request, in the tenant's context: 202
 *               {"queued": job id}; GET /greetings then lists them (the job workers,
 *               pm.jobs, run it; the host's status shows it under "jobs")
 *   GET /greetings  the tenant's greetings, one a line, from its own storage
 * Anything else is a 404 page. The tenant's theme is at /_theme.css (served by the host).
 * The job handler also hears of the tenant's lifecycle (tenancy.created ...) and writes
 * nothing for it: TN_DECLINED.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tenancy.h"

/* Append s as a JSON string (the demo's values are plain, but escape anyway). */
static int json_str(tn_request *r, const char *s)
{
    if (s == NULL)
        return tn_puts(r, "null");
    tn_puts(r, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            tn_printf(r, "\\%c", c);
        else if (c < 0x20)
            tn_printf(r, "\\u%04x", c);
        else
            tn_write(r, s, 1);
    }
    return tn_puts(r, "\"");
}

static int demo_handle(tn_request *r)
{
    const char *path = tn_path(r);
    const tn_tenant *t = tn_tenant_of(r);
    if (strcmp(path, "/hello") == 0) {
        tn_add_header(r, "Content-Type", "text/plain; charset=utf-8");
        return tn_printf(r, "hello from %s\n", t ? tn_tenant_name(t) : tn_host(r));
    }
    if (strcmp(path, "/greet") == 0 && t != NULL) {
        if (strcmp(tn_method(r), "POST") != 0)
            return tn_send_error(r, 405, "POST to queue a greeting");
        const char *msg = tn_query_arg(r, "message");
        if (msg == NULL || msg[0] == '\0' || strlen(msg) > 200)
            return tn_send_error(r, 400, "message=TEXT (1 to 200 bytes) is required");
        int64_t id = 0;
        int rc = tn_job_enqueue(r, "greet", msg, NULL, &id);
        if (rc != TN_OK)
            return tn_send_error(r, rc == TN_INVALID ? 400 : 503, tn_request_error(r));
        tn_set_status(r, 202);
        tn_add_header(r, "Content-Type", "application/json");
        return tn_printf(r, "{\"queued\":%lld}\n", (long long)id);
    }
    if (strcmp(path, "/greetings") == 0 && t != NULL) {
        tn_db *db = tn_db_of(r);
        tn_rows *rows = NULL;
        if (db == NULL ||
            tn_db_query(db, &rows, "SELECT message FROM greetings ORDER BY id", 0, NULL) != TN_OK)
            return tn_send_error(r, 503, "the tenant's storage cannot be read");
        tn_add_header(r, "Content-Type", "text/plain; charset=utf-8");
        while (tn_rows_next(rows) == TN_OK)
            tn_printf(r, "%s\n", tn_rows_get(rows, 0) ? tn_rows_get(rows, 0) : "");
        tn_rows_free(rows);
        return TN_OK;
    }
    if (strcmp(path, "/") != 0)
        return tn_send_error(r, 404, "no such page in the demo app");

    /* A per-tenant visit counter in the tenant cache: tenants never see each other's. */
    const void *v;
    size_t vl;
    long visits = 0;
    if (tn_cache_get(r, "visits", &v, &vl) == TN_OK && vl < 24) {
        char tmp[24];
        memcpy(tmp, v, vl);
        tmp[vl] = '\0';
        visits = atol(tmp);
    }
    char num[24];
    int nl = snprintf(num, sizeof(num), "%ld", ++visits);
    tn_cache_set(r, "visits", num, (size_t)nl, 0);

    /* A value from the tenant's own storage, read in this request. */
    const char *data = NULL;
    if (t != NULL) {
        /* A tenant without storage (created without provisioning) answers data: null; the
         * host has logged why. */
        tn_db *db = tn_db_of(r);
        tn_rows *rows = NULL;
        if (db != NULL) {
            if (tn_db_query(db, &rows, "SELECT message FROM greetings ORDER BY id LIMIT 1", 0,
                            NULL) == TN_OK &&
                tn_rows_next(rows) == TN_OK)
                data = tn_strdup(r, tn_rows_get(rows, 0) ? tn_rows_get(rows, 0) : "");
            else
                tn_log(r, TN_LOG_ERROR, "reading greetings: %s", tn_db_error(db));
            tn_rows_free(rows);
        }
    }

    tn_add_header(r, "Content-Type", "application/json");
    tn_puts(r, "{\"tenant\":");
    json_str(r, t ? tn_tenant_slug(t) : NULL);
    tn_puts(r, ",\"name\":");
    json_str(r, t ? tn_tenant_name(t) : "the platform");
    tn_puts(r, ",\"data\":");
    json_str(r, data);
    if (t == NULL)
        tn_puts(r, ",\"platform\":true");
    tn_puts(r, ",\"host\":");
    json_str(r, tn_host(r));
    tn_printf(r, ",\"worker\":%ld,\"request_id\":", (long)getpid());
    json_str(r, tn_request_id(r));
    return tn_printf(r, ",\"visits\":%ld}\n", visits);
}

/* The job a POST /greet queued: it runs in a job worker, with the same tenant context as the
 * request that queued it (its storage, its settings), and may be run again if its worker
 * dies (at least once): a greeting added twice is harmless here. */
static int demo_job(tn_request *r, const tn_job *j)
{
    if (strcmp(j->name, "greet") != 0)
        return TN_DECLINED;   /* the lifecycle hooks (tenancy.*): nothing to do */
    tn_db *db = tn_db_of(r);
    if (db == NULL)
        return tn_job_fail(r, "the tenant's storage cannot be reached");
    const char *p[] = {j->payload};
    /* the next id, written out: SQLite and PostgreSQL make one differently */
    if (tn_db_exec(db, "INSERT INTO greetings (id, message) "
                       "SELECT COALESCE(MAX(id), 0) + 1, $1 FROM greetings", 1, p) != TN_OK)
        return tn_job_fail(r, "adding the greeting: %s", tn_db_error(db));
    return TN_OK;
}

TN_APP_DEFINE = {
    .abi = TN_ABI_VERSION,
    .name = "demo",
    .version = "4",
    .handle = demo_handle,
    .job = demo_job,
};

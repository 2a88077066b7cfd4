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
 * Anything else is a 404 page. The tenant's theme is at /_theme.css (served by the host).
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

TN_APP_DEFINE = {
    .abi = TN_ABI_VERSION,
    .name = "demo",
    .version = "3",
    .handle = demo_handle,
};

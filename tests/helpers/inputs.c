/*
 * inputs.c — a test app module (never installed) that reads every kind of request input
 * through the app API and says what it got, with its tenant, so that
 * tests/integration/hostile.sh can send malformed inputs through nginx and check both the
 * answer and that it belongs to the right tenant:
 *
 *   any path  -> 200 {"tenant":"acme"|null,"path":"/x","q":"..."|null,"sid":"..."|null,
 *                     "agent":"..."|null,"body":N|null}
 *
 * q is tn_query_arg(r, "q") (core/kv.c's form decoder), sid is tn_cookie(r, "sid") (the
 * cookie parser), agent is tn_header(r, "User-Agent"); body is the length tn_body read when
 * the path is /body (over max_body the host answers 413). Strings are JSON-escaped
 * (", \ and control characters; other bytes as they came).
 * Must not: call anything but tenancy.h, or keep anything between requests.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "tenancy.h"

static void json_str(tn_request *r, const char *s)
{
    if (s == NULL) {
        tn_puts(r, "null");
        return;
    }
    tn_puts(r, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            tn_printf(r, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            tn_printf(r, "\\u%04x", c);
        else
            tn_write(r, s, 1);
    }
    tn_puts(r, "\"");
}

static int inputs_handle(tn_request *r)
{
    const char *body = NULL;
    size_t len = 0;
    int body_rc = TN_OK;
    bool want_body = strcmp(tn_path(r), "/body") == 0;
    if (want_body) {
        body_rc = tn_body(r, &body, &len);
        if (body_rc != TN_OK)
            return body_rc;   /* TN_TOOBIG: the host answers 413 */
    }
    const tn_tenant *t = tn_tenant_of(r);
    tn_add_header(r, "Content-Type", "application/json");
    tn_puts(r, "{\"tenant\":");
    json_str(r, t ? tn_tenant_slug(t) : NULL);
    tn_puts(r, ",\"path\":");
    json_str(r, tn_path(r));
    tn_puts(r, ",\"q\":");
    json_str(r, tn_query_arg(r, "q"));
    tn_puts(r, ",\"sid\":");
    json_str(r, tn_cookie(r, "sid"));
    tn_puts(r, ",\"agent\":");
    json_str(r, tn_header(r, "User-Agent"));
    if (want_body)
        tn_printf(r, ",\"body\":%zu}\n", len);
    else
        tn_puts(r, ",\"body\":null}\n");
    return TN_OK;
}

TN_APP_DEFINE = {
    .abi = TN_ABI_VERSION,
    .name = "inputs",
    .version = "1",
    .handle = inputs_handle,
};

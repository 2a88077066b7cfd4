/*
 * hello — the smallest useful app: answers with the host it was asked for.
 *
 *   GET /            -> "hello from <host>\n"
 *   GET /sleep?ms=N  -> sleeps N ms first (for timeout and drain tests)
 *   GET /crash       -> dies from SIGSEGV (for respawn tests)
 *   GET /key         -> checks the "Authorization: Bearer TOKEN" header with tn_key_check:
 *                       200 "key ok flags=N read_only=0|1", or 401 with tn_request_error's
 *                       message (for the API key tests)
 *   POST /echo       -> the request body back
 *   GET /stream?n=N&ms=M -> N lines "chunk I", each flushed (tn_flush), M ms apart (for the
 *                       streaming tests: each line must reach the client before the next)
 *   GET /subscribe?channels=a,b -> hands the request to the stream hub (tn_subscribe); 503
 *                       when it cannot (the hub's tests)
 *   GET /_mount...   -> "mount=<tn_mount> path=<tn_path>" (where it is mounted, what it sees)
 *   POST /_publish?channel=C -> tn_publish of the body on channel C: "id=N" (the event's id),
 *                       or 4xx/5xx with tn_request_error's message
 *   GET /_events?after=N -> the tenant's own events after id N from tn_events, one a line:
 *                       "id=N channel=C data=D", then "last=N"; 410 "gap" when some are no
 *                       longer kept (for the event log tests)
 *
 * The test routes exist only when the environment says TENANCY_HELLO_TEST_ROUTES=1, so the
 * shipped module cannot be crashed from outside.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tenancy.h"

static int test_routes;

static int hello_init(const tn_app_env *env)
{
    (void)env;
    const char *t = getenv("TENANCY_HELLO_TEST_ROUTES");
    test_routes = t != NULL && strcmp(t, "1") == 0;
    return TN_OK;
}

static int publish(tn_request *r)
{
    const char *body;
    size_t len;
    int rc = tn_body(r, &body, &len);
    if (rc != TN_OK)
        return rc;
    char *data = tn_alloc(r, len + 1);
    if (data == NULL)
        return TN_NOMEM;
    memcpy(data, body, len);
    data[len] = '\0';
    const char *channel = tn_query_arg(r, "channel");
    uint64_t id = 0;
    rc = tn_publish(r, channel ? channel : "", data, &id);
    if (rc != TN_OK) {
        int status = rc == TN_INVALID ? 400 : rc == TN_TOOBIG ? 413 : rc == TN_NOTFOUND ? 404 : 503;
        return tn_send_error(r, status, tn_request_error(r));
    }
    tn_add_header(r, "Content-Type", "text/plain; charset=utf-8");
    return tn_printf(r, "id=%" PRIu64 "\n", id);
}

static int list_event(void *ctx, const tn_event *e)
{
    return tn_printf(ctx, "id=%" PRIu64 " channel=%s data=%s\n", e->id, e->channel, e->data);
}

static int list_events(tn_request *r)
{
    const char *a = tn_query_arg(r, "after");
    uint64_t after = a ? strtoull(a, NULL, 10) : 0, last = 0;
    tn_add_header(r, "Content-Type", "text/plain; charset=utf-8");
    int rc = tn_events(r, after, list_event, r, &last);
    if (rc == TN_AGAIN) {
        tn_set_status(r, 410);
        return tn_printf(r, "gap last=%" PRIu64 "\n", last);
    }
    if (rc != TN_OK)
        return tn_send_error(r, 503, tn_request_error(r));
    return tn_printf(r, "last=%" PRIu64 "\n", last);
}

static int hello_handle(tn_request *r)
{
    const char *path = tn_path(r);
    if (test_routes && strcmp(path, "/sleep") == 0) {
        const char *ms = tn_query_arg(r, "ms");
        long v = ms ? strtol(ms, NULL, 10) : 0;
        struct timespec ts = {v / 1000, (v % 1000) * 1000000};
        while (nanosleep(&ts, &ts) != 0)
            ;
    } else if (test_routes && strcmp(path, "/crash") == 0) {
        /* The default action, so that the worker dies of the signal as from a real crash,
         * even in a sanitizer build whose own handler would report it as an error. */
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
    } else if (test_routes && strncmp(path, "/_mount", 7) == 0) {
        tn_add_header(r, "Content-Type", "text/plain; charset=utf-8");
        return tn_printf(r, "mount=%s path=%s\n", tn_mount(r), path);
    } else if (test_routes && strcmp(path, "/_publish") == 0 &&
               strcmp(tn_method(r), "POST") == 0) {
        return publish(r);
    } else if (test_routes && strcmp(path, "/_events") == 0) {
        return list_events(r);
    } else if (test_routes && strcmp(path, "/key") == 0) {
        const char *auth = tn_header(r, "Authorization");
        const char *token = auth && strncmp(auth, "Bearer ", 7) == 0 ? auth + 7 : "";
        unsigned flags = 0;
        int rc = tn_key_check(r, token, &flags);
        if (rc == TN_OK) {
            tn_add_header(r, "Content-Type", "text/plain; charset=utf-8");
            return tn_printf(r, "key ok flags=%u read_only=%d\n", flags,
                             (flags & TN_KEY_READ_ONLY) ? 1 : 0);
        }
        if (rc != TN_DENIED && rc != TN_INVALID)
            return tn_send_error(r, 503, tn_request_error(r)) == TN_OK ? TN_OK : rc;
        tn_add_header(r, "WWW-Authenticate", "Bearer");
        tn_set_status(r, 401);
        tn_add_header(r, "Content-Type", "text/plain; charset=utf-8");
        return tn_printf(r, "%s: %s\n", tn_rc_str(rc), tn_request_error(r));
    } else if (test_routes && strcmp(path, "/stream") == 0) {
        const char *ns = tn_query_arg(r, "n"), *ms = tn_query_arg(r, "ms");
        long n = ns ? strtol(ns, NULL, 10) : 3, v = ms ? strtol(ms, NULL, 10) : 200;
        tn_add_header(r, "Content-Type", "text/plain; charset=utf-8");
        for (long i = 1; i <= n; i++) {
            if (tn_printf(r, "chunk %ld\n", i) != TN_OK || tn_flush(r) != TN_OK)
                return TN_IO;
            struct timespec ts = {v / 1000, (v % 1000) * 1000000};
            if (i < n)
                while (nanosleep(&ts, &ts) != 0)
                    ;
        }
        return TN_OK;
    } else if (test_routes && strcmp(path, "/subscribe") == 0) {
        /* channels=a,b: at most 16, split here; none: all the tenant's */
        const char *list = tn_query_arg(r, "channels");
        const char *ch[16];
        int n = 0;
        char *copy = list && *list ? tn_strdup(r, list) : NULL;
        for (char *save = NULL, *t = copy ? strtok_r(copy, ",", &save) : NULL; t && n < 16;
             t = strtok_r(NULL, ",", &save))
            ch[n++] = t;
        int rc = tn_subscribe(r, ch, n, NULL);
        if (rc == TN_OK)
            return TN_OK;
        if (rc == TN_BUSY)
            tn_add_header(r, "Retry-After", "5");
        return tn_send_error(r, rc == TN_INVALID ? 400 : rc == TN_NOTFOUND ? 404 : 503,
                             tn_request_error(r)) == TN_OK ? TN_OK : rc;
    } else if (strcmp(path, "/echo") == 0 && strcmp(tn_method(r), "POST") == 0) {
        const char *body;
        size_t len;
        int rc = tn_body(r, &body, &len);
        if (rc != TN_OK)
            return rc;
        tn_add_header(r, "Content-Type", "application/octet-stream");
        return tn_write(r, body, len);
    }
    tn_add_header(r, "Content-Type", "text/plain; charset=utf-8");
    return tn_printf(r, "hello from %s\n", tn_host(r)[0] ? tn_host(r) : "nowhere");
}

TN_APP_DEFINE = {
    .abi = TN_ABI_VERSION,
    .name = "hello",
    .version = "1",
    .init = hello_init,
    .handle = hello_handle,
};

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
 *   GET /_mount...   -> "mount=<tn_mount> path=<tn_path>" (where it is mounted, what it sees)
 *
 * The test routes exist only when the environment says TENANCY_HELLO_TEST_ROUTES=1, so the
 * shipped module cannot be crashed from outside.
 */
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

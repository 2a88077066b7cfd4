/*
 * demo — the app `make demo` serves: a small JSON page about the request it answers.
 *
 *   GET /       {"host": ..., "worker": pid, "request_id": ..., "served_by_this_worker": n}
 *   GET /hello  plain text greeting
 * Anything else is a 404 page.
 */
#include <string.h>
#include <unistd.h>

#include "tenancy.h"

static unsigned long served;

static int demo_handle(tn_request *r)
{
    const char *path = tn_path(r);
    served++;
    if (strcmp(path, "/hello") == 0) {
        tn_add_header(r, "Content-Type", "text/plain; charset=utf-8");
        return tn_printf(r, "hello from %s\n", tn_host(r));
    }
    if (strcmp(path, "/") != 0)
        return tn_send_error(r, 404, "no such page in the demo app");
    tn_add_header(r, "Content-Type", "application/json");
    return tn_printf(r,
                     "{\"host\":\"%s\",\"worker\":%ld,\"request_id\":\"%s\","
                     "\"served_by_this_worker\":%lu}\n",
                     tn_host(r), (long)getpid(), tn_request_id(r), served);
}

TN_APP_DEFINE = {
    .abi = TN_ABI_VERSION,
    .name = "demo",
    .version = "1",
    .handle = demo_handle,
};

/*
 * greet.c — a test app module built in three flavours (see tests/Makefile.inc):
 *   greet_v1.so and greet_v2.so answer "GREETING from <host>" with their own GREETING, so a
 *   test can tell which build served a request (app deploys by reload);
 *   greet_bad.so fails its init, so a test can check that a reload rolls back.
 * A POST to /echo answers its body back, unchanged by the build, so that a test can send
 * writes through reloads and check each answer to the byte.
 * Its init adds a stage that marks every response it runs for with `X-Greet-Stage:
 * GREETING`, so that a test can see which apps' stages ran for a request (mount.sh: a stage
 * runs for its own app's requests only).
 * Test-only: never installed.
 */
#include <string.h>

#include "tenancy.h"

#ifndef GREETING
#define GREETING "v1"
#endif

#ifndef GREET_FAIL_INIT
static int greet_stage(tn_request *r, void *arg)
{
    (void)arg;
    return tn_add_header(r, "X-Greet-Stage", GREETING);
}
#endif

static int greet_init(const tn_app_env *env)
{
    (void)env;
#ifdef GREET_FAIL_INIT
    return TN_ERR;
#else
    return tn_stage_add("greet", greet_stage, NULL);
#endif
}

static int greet_handle(tn_request *r)
{
    if (strcmp(tn_path(r), "/echo") == 0 && strcmp(tn_method(r), "POST") == 0) {
        const char *body;
        size_t len;
        int rc = tn_body(r, &body, &len);
        if (rc != TN_OK)
            return rc;
        tn_add_header(r, "Content-Type", "application/octet-stream");
        return tn_write(r, body, len);
    }
    tn_add_header(r, "Content-Type", "text/plain");
    return tn_printf(r, "%s from %s\n", GREETING, tn_host(r));
}

TN_APP_DEFINE = {
    .abi = TN_ABI_VERSION,
    .name = "greet",
    .version = GREETING,
    .init = greet_init,
    .handle = greet_handle,
};

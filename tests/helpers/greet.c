/*
 * greet.c — a test app module built in three flavours (see tests/Makefile.inc):
 *   greet_v1.so and greet_v2.so answer "GREETING from <host>" with their own GREETING, so a
 *   test can tell which build served a request (app deploys by reload);
 *   greet_bad.so fails its init, so a test can check that a reload rolls back.
 * GET /sleep answers after 1.5 s (a request in flight for as long as a test needs one).
 * A POST to /echo answers its body back, unchanged by the build, so that a test can send
 * writes through reloads and check each answer to the byte.
 * Its init adds a stage that marks every response it runs for with `X-Greet-Stage:
 * GREETING`, so that a test can see which apps' stages ran for a request (mount.sh: a stage
 * runs for its own app's requests only).
 * With GREET_SLOW_INIT=PATH and GREET_SLOW_INDEX=N in the environment, the worker of index N
 * looks for the file PATH at init: when it is there, that worker writes its pid to PATH.pid
 * and sleeps for 2 s, then fails its init if the file says "fail". So reload.sh can kill a new generation's worker while another of it is still
 * starting, or have a reload fail with some of its workers already serving.
 * Test-only: never installed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* See GREET_SLOW_INIT above: TN_OK, or TN_ERR when the file asks this worker to fail. */
static int slow_init(const tn_app_env *env)
{
    const char *path = getenv("GREET_SLOW_INIT");
    const char *last = getenv("GREET_SLOW_INDEX");
    if (path == NULL || last == NULL || env->worker_index != atoi(last))
        return TN_OK;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return TN_OK;
    char what[16] = "";
    if (fgets(what, sizeof(what), f) == NULL)
        what[0] = '\0';
    fclose(f);
    char pidpath[4096];
    snprintf(pidpath, sizeof(pidpath), "%s.pid", path);
    FILE *p = fopen(pidpath, "w");
    if (p != NULL) {
        fprintf(p, "%d\n", (int)getpid());
        fclose(p);
    }
    sleep(2);
    return strncmp(what, "fail", 4) == 0 ? TN_ERR : TN_OK;
}

static int greet_init(const tn_app_env *env)
{
    if (slow_init(env) != TN_OK)
        return TN_ERR;
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
    if (strcmp(tn_path(r), "/sleep") == 0) {
        usleep(1500 * 1000);
        return tn_printf(r, "slept in %s\n", GREETING);
    }
    return tn_printf(r, "%s from %s\n", GREETING, tn_host(r));
}

TN_APP_DEFINE = {
    .abi = TN_ABI_VERSION,
    .name = "greet",
    .version = GREETING,
    .init = greet_init,
    .handle = greet_handle,
};

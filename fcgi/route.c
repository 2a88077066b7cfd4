/*
 * route.c — the request handlers fcgi/ brings (route.h) and what a worker offers every
 * handler (worker_int.h: route_host_env).
 *
 * The composition root puts them in the worker's list (fcgi/handler.h) with the others: the
 * host's endpoints claim a request by its path; the tenancy chain takes every request left
 * and runs the app behind it (with mounts, the app whose prefix the path falls under). Both serve through the worker they were set up in (one per
 * process, after the fork).
 *
 * Must not: name a module above fcgi/ (the panel reaches the worker only through
 * tn_handler_env), or serve an endpoint to an address outside status_allow.
 */
#include "core/first.h"
#include "fcgi/route.h"
#include "core/log.h"
#include "core/netaddr.h"
#include "core/rc.h"
#include "fcgi/status.h"
#include "fcgi/worker_int.h"
#include "tenancy/chain.h"

#include <string.h>

static worker *rw;   /* the worker these handlers serve in (set by their init) */

/* ---- the host's endpoints: ping_path, status_path, metrics_path ---------------------------- */

static int endpoints_init(const tn_handler_env *env)
{
    rw = env->host;
    return TN_OK;
}

static bool builtin_allowed(const worker *w, tn_request *r)
{
    return netaddr_match_text(w->cfg->status_allowed, tn_param(r, "REMOTE_ADDR"));
}

static bool path_is(const char *cfgpath, const char *path)
{
    return cfgpath != NULL && cfgpath[0] != '\0' && strcmp(cfgpath, path) == 0;
}

/* Which of the host's endpoints r asks for: 1 ping, 2 status, 3 metrics, 0 none. */
static TN_HOT int endpoint_of(const worker *w, const tn_request *r)
{
    const tn_config *c = w->cfg;
    return path_is(c->ping_path, r->path) ? 1 : path_is(c->status_path, r->path) ? 2
         : path_is(c->metrics_path, r->path) ? 3 : 0;
}

static TN_HOT bool endpoints_claim(tn_request *r) { return endpoint_of(rw, r) != 0; }

/* The host's own endpoints, to status_allow only. */
static int endpoints_handle(tn_request *r)
{
    worker *w = rw;
    int which = endpoint_of(w, r);
    if (!builtin_allowed(w, r)) {
        tn_send_error(r, 403, "status endpoints are not open to this address");
        return r->status;
    }
    tn_add_header(r, "Cache-Control", "no-store");
    if (which == 1) {
        tn_puts(r, "pong\n");
    } else if (which == 2) {
        tn_add_header(r, "Content-Type", "application/json");
        status_json(r->out, w->sb, w->args->lis, w->args->lim, w->status_apps,
                    w->nstatus_apps);
        r->bytes_out = r->out->len;
    } else {
        tn_add_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
        status_metrics(r->out, w->sb, w->args->lis, w->status_apps, w->nstatus_apps);
        r->bytes_out = r->out->len;
    }
    return r->status;
}

const tn_handler route_endpoints = {.name = "status endpoints", .init = endpoints_init,
                                     .claims = endpoints_claim, .handle = endpoints_handle};

/* ---- the tenancy chain and the app --------------------------------------------------------- */

/* The chain tells the scoreboard which tenant this worker serves (slow and timeout logs,
 * and the master's clean-up of the per-tenant counts if the worker dies). */
static TN_HOT void note_tenant(void *ctx, int64_t id, const char *slug)
{
    sb_slot *s = ctx;
    __atomic_store_n(&s->tenant_id, id, __ATOMIC_RELEASE);
    sb_set_tenant(s, slug);
}


/* With mounts, the chain asks which app serves r once the tenant is known (a tenant path
 * prefix comes first, the mount after it: /t/acme/api/x is tenant acme, mount /api, path
 * /x). The raw path decides, so a path the web server may read otherwise is refused, as the
 * tenant path resolver refuses it: /api/../x must not reach the app at /api while nginx
 * applies the rules of /x. */
static TN_HOT const chain_app *pick_app(void *ctx, tn_request *r)
{
    const worker *w = ctx;
    if (request_path_ambiguous(r->path)) {
        tn_send_error(r, 400, "ambiguous path: dot segments and encoded dots or slashes are "
                              "not allowed");
        return NULL;
    }
    const char *rest = NULL;
    int i = mount_match(&w->cfg->mounts, r->path, &rest);
    if (i < 0) {
        if (w->apps[0].serve == NULL) {
            tn_send_error(r, 404, "no app is mounted at this path");
            return NULL;
        }
        r->mount = "";
        r->app = "";
        return w->apps[0].serve;
    }
    r->mount = w->cfg->mounts.m[i].prefix;
    r->app = w->cfg->mounts.m[i].name;
    r->path = rest;
    return w->apps[1 + i].serve;
}

/* A request queued a job: the job workers of this host look at once. */
static void job_wake(void *ctx)
{
    sb_jobs *j = ctx;
    sb_inc(&j->enqueued);
    sb_jobs_wake(j);
}

static int chain_handler_init(const tn_handler_env *env)
{
    worker *w = rw = env->host;
    chain_env ce = {.cfg = &w->cfg->tenancy, .max_children = w->cfg->max_children,
                    .lim = w->args->lim, .worker = w->args->slot, .note_tenant = note_tenant,
                    .hook_ctx = w->slot, .events = w->args->events, .job_wake = job_wake,
                    .job_wake_ctx = &w->sb->jobs};
    if (w->cfg->mounts.n > 0) {
        /* No mounts: no pick, and the chain calls the root app with nothing more to do. */
        ce.pick = pick_app;
        ce.pick_ctx = w;
    }
    return chain_init(&ce);
}

/* The chain, then the app's handler (the apps are loaded after the handlers were set up:
 * worker.c). */
static TN_HOT int chain_handle(tn_request *r)
{
    int rc = chain_run(r, rw->apps[0].serve);
    if (rc == TN_DONE)
        return r->status;   /* the chain answered (404, 503, a theme, a stage) */
    if (rc != TN_OK && !request_started(r) && !r->io_error) {
        if (rc == TN_TOOBIG) {
            tn_send_error(r, 413, "the request body is larger than max_body");
        } else {
            log_error("stage %s: the app returned '%s'", r->stage, tn_rc_str(rc));
            tn_send_error(r, 500, "the application failed");
        }
    } else if (rc != TN_OK && rc != TN_IO && rc != TN_TOOBIG) {
        log_error("stage %s: the app returned '%s' after it started answering", r->stage,
                  tn_rc_str(rc));
    }
    return r->status;
}

const tn_handler route_chain = {.name = "tenancy chain", .init = chain_handler_init,
                                .fini = chain_fini, .handle = chain_handle};

/* ---- what the worker offers every handler ---------------------------------------------------- */

/* The host's status document, for a handler that shows it (the panel knows no scoreboard). */
static void host_status(void *host, buf *out)
{
    worker *w = host;
    status_json(out, w->sb, w->args->lis, w->args->lim, w->status_apps, w->nstatus_apps);
}

/* A handler's pending id, kept in this worker's slot: should the request take the worker
 * down, the master finds the id there and hands it to its hook (master_hooks). */
_Static_assert(sizeof(((sb_slot *)0)->audit_id) >= TN_PENDING_ID_SIZE,
               "the scoreboard holds a whole pending id");
static void host_keep_pending(void *host, const char *id)
{
    worker *w = host;
    sb_set_audit(w->slot, id);
}

/* A handler queued a host job (the panel's migrate): this host's job workers look at once. */
static void host_job_queued(void *host)
{
    worker *w = host;
    job_wake(&w->sb->jobs);
}

void route_host_env(worker *w, tn_handler_env *env)
{
    *env = (tn_handler_env){.config_path = w->cfg->path, .status_json = host_status,
                            .keep_pending = host_keep_pending, .job_queued = host_job_queued,
                            .host = w};
}

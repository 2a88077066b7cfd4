/*
 * admin.h — the admin web panel, as the host sees it: a request handler (admin_handler: set
 * up once per worker, it claims every request whose routing host is admin.host); and, for
 * the master, the one audit line it writes: the outcome of a console statement whose worker
 * died under it. The composition root (fcgi/main.c) wires both in; nothing else calls in.
 *
 * The panel's long actions (migrate, move) are jobs of its own (app ADMIN_JOB_APP): the host's
 * job workers set the handler up too and run them through admin_handler.job.
 *
 * The panel lives on its own host name and is never reached through a tenant's domain: it
 * claims a request by the routing host the chain reads (request_route_host), and comes
 * before the chain in the worker's list; the composition root counts admin.host among the
 * chain's central domains. The registry is opened lazily, on the first panel request,
 * never at start-up.
 */
#ifndef TN_ADMIN_ADMIN_H
#define TN_ADMIN_ADMIN_H

#include <stdbool.h>
#include <stddef.h>

#include "admin/config.h"
#include "core/buf.h"
#include "tenancy/config.h"
#include "tenancy/handler.h"
#include "tenancy/request.h"

typedef struct admin_env {
    const admin_config *cfg;
    const tenancy_config *tcfg;
    const char *config_path;      /* tenancyd.conf (passed to the `tenancy` command) */
    /* The host's status JSON (the document of status_path), appended to out: the host's
     * view of workers and per-tenant counters without admin/ knowing the scoreboard. */
    void (*status_json)(void *ctx, buf *out);
    void *status_ctx;
    /* The console's pending audit entry: called with the entry's id just before a statement
     * runs, and with NULL once its outcome is in the audit log. The host keeps the id where
     * its supervisor looks after a worker's death (the scoreboard), so that an entry is
     * closed even when the statement takes the worker down (admin_audit_died). NULL: the
     * host keeps nothing. */
    void (*audit_pending)(void *ctx, const char *id);
    void *audit_ctx;
    /* The panel queued a job (its migrate or move, a retry): the host wakes its job workers.
     * NULL: they find it at their next poll. */
    void (*job_queued)(void *ctx);
    void *job_ctx;
} admin_env;

/* The app name of the panel's own jobs (tenancy/handler.h: a host module's jobs). */
#define ADMIN_JOB_APP "host.admin"

/* An audit entry id: 16 hex digits and the NUL. */
#define ADMIN_AUDIT_ID_SIZE 17

/* The panel as a request handler (tenancy/handler.h). Its env->conf is the generation's
 * admin_config, finished (admin_config_finish) against the tenancy options it names. */
extern const tn_handler admin_handler;

/* Per worker, after fork. Copies env (its pointers must outlive the worker's generation).
 * TN_OK or TN_NOMEM. */
int admin_init(const admin_env *env);
void admin_fini(void);

/* True when `host` (already normalised) is the panel's host. */
bool admin_is_host(const char *host);

/* Serve one panel request completely (pages, API, assets, errors). Returns the HTTP status
 * sent. */
int admin_handle(tn_request *r);

/* For the supervisor, when a worker died with a console entry pending (its id, from
 * admin_env.audit_pending): the entry's completion line in cfg->audit_log, result "died",
 * written "by":"master", with `outcome` (how the worker ended) as its detail and the
 * request's id. Uses nothing but its arguments (the master never runs admin_init). TN_OK,
 * or TN_INVALID (no id), TN_NOMEM or TN_IO with err set. */
int admin_audit_died(const admin_config *cfg, const char *id, const char *req_id,
                     const char *outcome, char *err, size_t errlen);

#endif

/*
 * admin.h — the admin web panel, as the host sees it: set up once per worker, then hand it
 * every request whose host is admin.host (fcgi/worker.c does both; nothing else calls in).
 *
 * The panel lives on its own host name and is never reached through a tenant's domain: the
 * worker routes by the same host param the chain reads, before the chain runs, and the
 * chain counts admin.host among its central domains. The registry is opened lazily, on the
 * first panel request, never at start-up.
 */
#ifndef TN_ADMIN_ADMIN_H
#define TN_ADMIN_ADMIN_H

#include <stdbool.h>

#include "admin/config.h"
#include "core/buf.h"
#include "tenancy/config.h"
#include "tenancy/request.h"

typedef struct admin_env {
    const admin_config *cfg;
    const tenancy_config *tcfg;
    const char *config_path;      /* tenancyd.conf (passed to the `tenancy` command) */
    /* The host's status JSON (the document of status_path), appended to out: the host's
     * view of workers and per-tenant counters without admin/ knowing the scoreboard. */
    void (*status_json)(void *ctx, buf *out);
    void *status_ctx;
} admin_env;

/* Per worker, after fork. Copies env (its pointers must outlive the worker's generation).
 * TN_OK or TN_NOMEM. */
int admin_init(const admin_env *env);
void admin_fini(void);

/* True when `host` (already normalised) is the panel's host. */
bool admin_is_host(const char *host);

/* Serve one panel request completely (pages, API, assets, errors). Returns the HTTP status
 * sent. */
int admin_handle(tn_request *r);

#endif

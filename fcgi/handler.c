/*
 * handler.c — the worker's ordered list of request handlers (see handler.h), and the same
 * list as the job workers use it: the handlers that run host jobs.
 * Must not: know what any handler is; the list is filled by the composition root only.
 */
#include "core/first.h"
#include "fcgi/handler.h"
#include "core/rc.h"

#include <string.h>

static struct {
    const tn_handler *h[TN_MAX_HANDLERS];
    const config_part *part[TN_MAX_HANDLERS];
    int n;
    bool up[TN_MAX_HANDLERS];   /* set up (init ran), fini'd in reverse */
} list;

int handlers_add(const tn_handler *h, const config_part *part)
{
    if (list.n >= TN_MAX_HANDLERS || (list.n > 0 && list.h[list.n - 1]->claims == NULL))
        return TN_INVALID;
    list.h[list.n] = h;
    list.part[list.n] = part;
    list.up[list.n] = false;
    list.n++;
    return TN_OK;
}

/* Each handler's init in order (only those with a job function when jobs_only). */
static int init_some(const tn_config *cfg, const tn_handler_env *base, bool jobs_only,
                     const char **failed)
{
    for (int i = 0; i < list.n; i++) {
        const tn_handler *h = list.h[i];
        if (jobs_only && h->job == NULL)
            continue;
        tn_handler_env env = *base;
        env.conf = list.part[i] != NULL ? config_part_of(cfg, list.part[i]) : NULL;
        int rc = h->init != NULL ? h->init(&env) : TN_OK;
        if (rc != TN_OK) {
            *failed = h->name;
            handlers_fini();
            return rc;
        }
        list.up[i] = true;
    }
    return TN_OK;
}

int handlers_init(const tn_config *cfg, const tn_handler_env *base, const char **failed)
{
    return init_some(cfg, base, false, failed);
}

int handlers_init_jobs(const tn_config *cfg, const tn_handler_env *base, const char **failed)
{
    return init_some(cfg, base, true, failed);
}

bool handlers_queue_jobs(const tn_config *cfg)
{
    for (int i = 0; i < list.n; i++) {
        const tn_handler *h = list.h[i];
        if (h->job == NULL)
            continue;
        if (h->queues_jobs == NULL)
            return true;
        if (h->queues_jobs(list.part[i] != NULL ? config_part_of(cfg, list.part[i]) : NULL))
            return true;
    }
    return false;
}

const tn_handler *handlers_job(const char *app)
{
    for (int i = 0; i < list.n; i++) {
        const tn_handler *h = list.h[i];
        if (list.up[i] && h->job != NULL && h->job_app != NULL && strcmp(h->job_app, app) == 0)
            return h;
    }
    return NULL;
}

void handlers_fini(void)
{
    for (int i = list.n - 1; i >= 0; i--) {
        if (!list.up[i])
            continue;
        list.up[i] = false;
        if (list.h[i]->fini != NULL)
            list.h[i]->fini();
    }
}

void handlers_clear(void)
{
    handlers_fini();
    list.n = 0;
}

TN_HOT const tn_handler *handlers_claim(tn_request *r)
{
    for (int i = 0; i < list.n; i++) {
        const tn_handler *h = list.h[i];
        if (h->claims == NULL || h->claims(r))
            return h;
    }
    return NULL;
}

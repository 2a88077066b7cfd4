/*
 * handler.c — the worker's ordered list of request handlers (see handler.h).
 * Must not: know what any handler is; the list is filled by the composition root only.
 */
#include "core/first.h"
#include "fcgi/handler.h"
#include "core/rc.h"

static struct {
    const tn_handler *h[TN_MAX_HANDLERS];
    const config_part *part[TN_MAX_HANDLERS];
    int n;
    int ready;   /* handlers set up (handlers_init), fini'd in reverse */
} list;

int handlers_add(const tn_handler *h, const config_part *part)
{
    if (list.n >= TN_MAX_HANDLERS || (list.n > 0 && list.h[list.n - 1]->claims == NULL))
        return TN_INVALID;
    list.h[list.n] = h;
    list.part[list.n] = part;
    list.n++;
    return TN_OK;
}

int handlers_init(const tn_config *cfg, const tn_handler_env *base, const char **failed)
{
    for (int i = 0; i < list.n; i++) {
        const tn_handler *h = list.h[i];
        tn_handler_env env = *base;
        env.conf = list.part[i] != NULL ? config_part_of(cfg, list.part[i]) : NULL;
        int rc = h->init != NULL ? h->init(&env) : TN_OK;
        if (rc != TN_OK) {
            *failed = h->name;
            handlers_fini();
            return rc;
        }
        list.ready = i + 1;
    }
    return TN_OK;
}

void handlers_fini(void)
{
    while (list.ready > 0) {
        const tn_handler *h = list.h[--list.ready];
        if (h->fini != NULL)
            h->fini();
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

/*
 * ops_tenant.c — the short tenant operations (see ops.h): state changes and restore,
 * domains, settings, the worker cap. Each is one registry transaction, so it bumps the
 * generation and every worker sees it at its next request; the command and the panel call
 * the same functions, with the same rules and the same messages.
 *
 * Must not: check what the registry checks (slugs, domains, limits: its message is the one
 * returned), or print.
 */
#include "core/first.h"
#include "tenancy/ops.h"
#include "core/rc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A grace period as it is written in tenancyd.conf: 7d, 12h, 30m, 45s. */
static void put_duration(char *out, size_t n, int64_t s)
{
    if (s % 86400 == 0 && s > 0)
        snprintf(out, n, "%lldd", (long long)(s / 86400));
    else if (s % 3600 == 0 && s > 0)
        snprintf(out, n, "%lldh", (long long)(s / 3600));
    else if (s % 60 == 0 && s > 0)
        snprintf(out, n, "%lldm", (long long)(s / 60));
    else
        snprintf(out, n, "%llds", (long long)s);
}

int ops_set_state(ops_env *e, const char *slug, int state, char *err, size_t errlen)
{
    /* A deleted tenant changes state only by a restore, within its grace period; any other
     * state may change, atomically. */
    unsigned all = (1u << TENANT_NSTATES) - 1, from = all & ~(1u << TENANT_DELETING);
    int was = -1;
    int rc = registry_set_state_if(e->reg, slug, from, state, &was, err, errlen);
    if (rc == TN_BUSY && was == TENANT_DELETING)
        return state == TENANT_DELETING
                   ? tn_errf(err, errlen, rc, "tenant '%s' is already deleted", slug)
                   : tn_errf(err, errlen, rc, "tenant '%s' is deleted: 'tenancy tenant restore "
                                              "%s' brings it back", slug, slug);
    if (rc == TN_OK && was != state) {
        const char *ev = state == TENANT_SUSPENDED  ? "suspended"
                         : state == TENANT_DELETING ? "deleted"
                         : state == TENANT_ACTIVE   ? "resumed"
                                                    : NULL;
        if (ev != NULL)
            ops_hook_told(e, slug, ev, NULL);
    }
    return rc;
}

int ops_restore(ops_env *e, const char *slug, char *err, size_t errlen)
{
    int64_t now = (int64_t)time(NULL), g = e->tc->delete_grace_ms / 1000;
    int rc = registry_restore(e->reg, slug, now - g, err, errlen);
    if (rc == TN_OK)
        ops_hook_told(e, slug, "restored", NULL);
    if (rc == TN_TIMEOUT) {
        registry_life life;
        char e2[256], del[32], end[32], gs[32];
        if (registry_life_get(e->reg, slug, &life, e2, sizeof(e2)) == TN_OK &&
            life.deleted_at > 0) {
            ops_utc_time(life.deleted_at, del, sizeof(del));
            ops_utc_time(life.deleted_at + g, end, sizeof(end));
            put_duration(gs, sizeof(gs), g);
            return tn_errf(err, errlen, rc, "the grace period of tenant '%s' ended at %s "
                           "(deleted at %s, storage.delete_grace %s): it can only be purged",
                           slug, end, del, gs);
        }
    }
    return rc;
}

int ops_domain_add(ops_env *e, const char *slug, const char *domain, bool primary, char *err,
                   size_t errlen)
{
    return registry_domain_add(e->reg, slug, domain, primary, err, errlen);
}

typedef struct owns_ctx {
    const char *norm;
    bool owns;
} owns_ctx;

static int owns_cb(void *ctx, const tenant_rec *t, const registry_domain *d, int nd)
{
    (void)t;
    owns_ctx *o = ctx;
    for (int i = 0; i < nd; i++)
        o->owns = o->owns || strcmp(d[i].domain, o->norm) == 0;
    return TN_OK;
}

int ops_domain_remove(ops_env *e, const char *slug, const char *domain, char *err,
                      size_t errlen)
{
    if (slug != NULL) {
        /* The registry removes a domain by its name alone: first, is it this tenant's? */
        char norm[256];
        if (tenant_host_normalise(domain, norm, sizeof(norm)) == 0)
            snprintf(norm, sizeof(norm), "%s", domain);
        owns_ctx o = {norm, false};
        int rc = registry_show(e->reg, slug, owns_cb, &o);
        if (rc != TN_OK && rc != TN_NOTFOUND)
            return tn_errf(err, errlen, rc, "cannot read tenant '%s': %s", slug, tn_rc_str(rc));
        if (!o.owns)
            return tn_errf(err, errlen, TN_NOTFOUND, "'%.200s' is not a domain of '%s'", domain,
                           slug);
    }
    return registry_domain_remove(e->reg, domain, err, errlen);
}

int ops_setting_set(ops_env *e, const char *slug, const char *key, const char *value,
                    char *err, size_t errlen)
{
    return registry_set_setting(e->reg, slug, key, value, err, errlen);
}

int ops_set_max_workers(ops_env *e, const char *slug, int max_workers, char *err,
                        size_t errlen)
{
    return registry_set_max_workers(e->reg, slug, max_workers, err, errlen);
}

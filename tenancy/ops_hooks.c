/*
 * ops_hooks.c — the lifecycle hooks (ops.h): after an operation changed a tenant, a job
 * "tenancy.<event>" for every app with a job handler (tenancy/jobs.h, app JOB_APP_ALL), so
 * an app learns of a tenant created, suspended, resumed, restored, migrated, moved or
 * deleted as its job workers run, not inside the operator's command.
 *
 * A hook is queued after the change committed, never in its transaction: the change stands
 * whatever happens to its hook, and a hook that cannot be queued is reported to the caller
 * (the command prints it as a warning) with the change already done.
 *
 * jobs.hooks = auto (the default) queues a hook only when it can reach an app: some host's
 * job workers said lately that they run an app with a job handler, or none said anything
 * (jobs_hooks_wanted); otherwise a job worker would claim it and tell nobody. Asked once per
 * call: a batch's hooks go or stay together.
 *
 * Must not: fail the operation it follows, or queue anything when jobs.hooks is off.
 */
#include "core/first.h"
#include "tenancy/ops.h"
#include "core/clock.h"
#include "core/rc.h"
#include "tenancy/jobs.h"
#include "tenancy/lookup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether this call's hooks are queued (jobs.hooks; auto asks the registry, and queues
 * when it cannot say). */
static bool hooks_wanted(ops_env *e)
{
    if (e->tc->jobs_hooks != HOOKS_AUTO)
        return e->tc->jobs_hooks == HOOKS_ON;
    if (e->reg == NULL)
        return true;   /* the caller reports the missing registry */
    bool wanted = true;
    char err[512];
    (void)jobs_hooks_wanted(e->reg, clock_wall_us() / 1000, &wanted, err, sizeof(err));
    return wanted;
}

/* The job of a hook: every app's, now, with the host's limits. */
static job_new hook_job(const ops_env *e, int64_t tenant_id, const char *name,
                        const char *payload, int64_t now)
{
    return (job_new){.tenant_id = tenant_id, .app = JOB_APP_ALL, .name = name,
                     .payload = payload ? payload : "", .run_at_ms = now,
                     .max_attempts = e->tc->jobs_max_attempts,
                     .timeout_ms = (int)e->tc->jobs_timeout_ms};
}

int ops_hook(ops_env *e, const char *slug, const char *event, const char *payload, char *err,
             size_t errlen)
{
    if (!hooks_wanted(e))
        return TN_OK;
    if (e->reg == NULL)
        return tn_errf(err, errlen, TN_IO, "hook %s of '%s': no registry connection", event, slug);
    tenant_rec *t = NULL;
    int rc = registry_fetch(e->reg, LK_SLUG, slug, &t);
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "hook %s of '%s': the tenant cannot be read (%s)",
                       event, slug, tn_rc_str(rc));
    int64_t id = t->id;
    free(t);
    char name[JOB_NAME_MAX + 1];
    snprintf(name, sizeof(name), "tenancy.%s", event);
    int64_t now = clock_wall_us() / 1000;
    job_new j = hook_job(e, id, name, payload, now);
    int64_t jid = 0;
    char why[512];
    rc = jobs_enqueue(e->reg, &j, now, &jid, why, sizeof(why));
    if (rc != TN_OK && rc != TN_EXISTS)
        return tn_errf(err, errlen, rc, "hook %s of '%s' not queued: %s", event, slug, why);
    return TN_OK;
}

static void tell(ops_env *e, const char *err)
{
    if (e->progress == NULL)
        return;
    char note[700];
    snprintf(note, sizeof(note), "warning: %s", err);
    ops_progress p = {.note = note};
    e->progress(e->progress_ctx, &p);
}

void ops_hooks_told(ops_env *e, const ops_hook_item *items, int n, const char *event)
{
    if (n <= 0 || !hooks_wanted(e))
        return;
    char name[JOB_NAME_MAX + 1];
    snprintf(name, sizeof(name), "tenancy.%s", event);
    int64_t now = clock_wall_us() / 1000;
    job_new *j = calloc((size_t)n, sizeof(*j));
    int *rcs = calloc((size_t)n, sizeof(*rcs));
    int rc = j != NULL && rcs != NULL ? TN_OK : TN_NOMEM;
    char err[600] = "";
    if (rc == TN_OK && e->reg == NULL)
        rc = TN_IO;
    for (int i = 0; i < n && rc == TN_OK; i++)
        j[i] = hook_job(e, items[i].tenant_id, name, items[i].payload, now);
    if (rc == TN_OK)
        rc = jobs_enqueue_many(e->reg, j, n, now, rcs, err, sizeof(err));
    for (int i = 0; i < n; i++) {
        if (rc != TN_OK) {   /* one by one: each failure is told with its tenant */
            ops_hook_told(e, items[i].slug, event, items[i].payload);
        } else if (rcs[i] != TN_OK && rcs[i] != TN_EXISTS) {
            char why[600];
            tn_errf(why, sizeof(why), rcs[i], "hook %s of '%s' not queued: %s", event,
                    items[i].slug, tn_rc_str(rcs[i]));
            tell(e, why);
        }
    }
    free(j);
    free(rcs);
}

void ops_hook_told(ops_env *e, const char *slug, const char *event, const char *payload)
{
    char err[600];
    if (ops_hook(e, slug, event, payload, err, sizeof(err)) != TN_OK)
        tell(e, err);
}

/*
 * ops_jobs.c — the job queue as operators see it (ops.h): the thin functions the command
 * (`tenancy job ...`) and the panel (its jobs page, its long actions) call over the store
 * (tenancy/jobs.h). They name tenants by slug and turn them into the store's ids, refuse
 * what only the host may queue, and word the store's codes for a person.
 *
 * Who may queue what: the hooks ("tenancy.*", app "*") are queued by the operations
 * themselves (ops_hooks.c), never here; a host module's job (app "host.NAME", the panel's
 * migrate and move) only by the host (ops_job_new.host), since its payload is what the
 * host module acts on.
 *
 * Must not: run SQL (the store does), print, or show one tenant's job under another's name
 * (a job asked for with a slug is looked up with that tenant's id).
 */
#include "core/first.h"
#include "tenancy/ops.h"
#include "core/clock.h"
#include "core/rc.h"
#include "tenancy/lookup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t now_ms(void) { return clock_wall_us() / 1000; }

/* The id of tenant slug (NULL: *id = none). TN_OK, TN_NOTFOUND or the registry's error. */
static int tenant_id(ops_env *e, const char *slug, int64_t none, int64_t *id, char *err,
                     size_t errlen)
{
    *id = none;
    if (slug == NULL)
        return TN_OK;
    if (e->reg == NULL)
        return tn_errf(err, errlen, TN_IO, "no registry connection");
    if (!tenant_slug_valid(slug))
        return tn_errf(err, errlen, TN_NOTFOUND, "no tenant '%.64s'", slug);
    tenant_rec *t = NULL;
    int rc = registry_fetch(e->reg, LK_SLUG, slug, &t);
    if (rc == TN_NOTFOUND)
        return tn_errf(err, errlen, rc, "no tenant '%.64s'", slug);
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "tenant '%.64s' cannot be read (%s)", slug,
                       tn_rc_str(rc));
    *id = t->id;
    free(t);
    return TN_OK;
}

int ops_job_enqueue(ops_env *e, const ops_job_new *j, int64_t *id, char *err, size_t errlen)
{
    *id = 0;
    const char *app = j->app ? j->app : "";
    if (j->name == NULL || !job_name_valid(j->name))
        return tn_errf(err, errlen, TN_INVALID,
                       "bad job name '%.80s': [a-z][a-z0-9_.:-]{0,63}", j->name ? j->name : "");
    if (strncmp(j->name, "tenancy.", 8) == 0)
        return tn_errf(err, errlen, TN_INVALID,
                       "job names starting 'tenancy.' are the host's lifecycle hooks");
    if (strcmp(app, JOB_APP_ALL) == 0)
        return tn_errf(err, errlen, TN_INVALID, "app '*' is the lifecycle hooks' alone");
    if (strncmp(app, "host.", 5) == 0 && !j->host)
        return tn_errf(err, errlen, TN_INVALID,
                       "app '%.64s' is a module of the host: only the host queues its jobs", app);
    if (j->delay_ms < 0 || j->max_attempts < 0 || j->timeout_ms < 0)
        return tn_errf(err, errlen, TN_INVALID, "delay, attempts and timeout are never negative");
    int64_t tid;
    int rc = tenant_id(e, j->slug, 0, &tid, err, errlen);
    if (rc != TN_OK)
        return rc;
    const tenancy_config *c = e->tc;
    int64_t now = now_ms();
    job_new n = {.tenant_id = tid, .app = app, .name = j->name,
                 .payload = j->payload ? j->payload : "", .run_at_ms = now + j->delay_ms,
                 .priority = j->priority, .unique_key = j->unique_key,
                 .max_attempts = j->max_attempts ? j->max_attempts : c->jobs_max_attempts,
                 .timeout_ms = j->timeout_ms ? j->timeout_ms : (int)c->jobs_timeout_ms};
    char why[512] = "";
    rc = jobs_enqueue(e->reg, &n, now, id, why, sizeof(why));
    if (rc == TN_EXISTS)
        return tn_errf(err, errlen, rc, "job %lld holds the unique key '%.200s'",
                       (long long)*id, j->unique_key ? j->unique_key : "");
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "%s", why[0] ? why : tn_rc_str(rc));
    return TN_OK;
}

int ops_job_list(ops_env *e, const char *slug, bool central, int state, int64_t before_id,
                 int limit, jobs_list_fn fn, void *ctx, char *err, size_t errlen)
{
    if (limit < 1 || limit > 1000)
        return tn_errf(err, errlen, TN_INVALID, "a page is 1 to 1000 jobs");
    int64_t tid;
    int rc = tenant_id(e, slug, central ? 0 : -1, &tid, err, errlen);
    if (rc != TN_OK)
        return rc;
    rc = jobs_list(e->reg, tid, state, before_id, limit, fn, ctx);
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "the jobs cannot be listed (%s)", tn_rc_str(rc));
    return TN_OK;
}

int ops_job_get(ops_env *e, int64_t id, const char *slug, job_rec *out, char *err,
                size_t errlen)
{
    int64_t tid;
    int rc = tenant_id(e, slug, -1, &tid, err, errlen);
    if (rc != TN_OK)
        return rc;
    char why[512] = "";
    rc = jobs_get(e->reg, id, out, why, sizeof(why));
    if (rc == TN_OK && tid >= 0 && out->tenant_id != tid)
        rc = TN_NOTFOUND;   /* another tenant's: as if it were not there */
    if (rc == TN_NOTFOUND)
        return slug ? tn_errf(err, errlen, rc, "tenant '%.64s' has no job %lld", slug,
                              (long long)id)
                    : tn_errf(err, errlen, rc, "no job %lld", (long long)id);
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "job %lld cannot be read: %s", (long long)id,
                       why[0] ? why : tn_rc_str(rc));
    return TN_OK;
}

typedef int (*job_change_fn)(registry *r, int64_t id, int64_t tenant_id, int64_t now_ms,
                             char *err, size_t errlen);

static int job_change(ops_env *e, int64_t id, const char *slug, job_change_fn fn,
                      const char *verb, char *err, size_t errlen)
{
    int64_t tid;
    int rc = tenant_id(e, slug, -1, &tid, err, errlen);
    if (rc != TN_OK)
        return rc;
    char why[512] = "";
    rc = fn(e->reg, id, tid, now_ms(), why, sizeof(why));
    if (rc == TN_OK)
        return TN_OK;
    if (rc == TN_NOTFOUND)
        return slug ? tn_errf(err, errlen, rc, "tenant '%.64s' has no job %lld", slug,
                              (long long)id)
                    : tn_errf(err, errlen, rc, "no job %lld", (long long)id);
    return tn_errf(err, errlen, rc, "job %lld cannot be %s: %s", (long long)id, verb,
                   why[0] ? why : tn_rc_str(rc));
}

int ops_job_retry(ops_env *e, int64_t id, const char *slug, char *err, size_t errlen)
{
    return job_change(e, id, slug, jobs_retry, "retried", err, errlen);
}

int ops_job_cancel(ops_env *e, int64_t id, const char *slug, char *err, size_t errlen)
{
    return job_change(e, id, slug, jobs_cancel, "cancelled", err, errlen);
}

int ops_job_counts(ops_env *e, const char *slug, int64_t counts[JOB_NSTATES], char *err,
                   size_t errlen)
{
    memset(counts, 0, sizeof(int64_t) * JOB_NSTATES);
    int64_t tid;
    int rc = tenant_id(e, slug, -1, &tid, err, errlen);
    if (rc != TN_OK)
        return rc;
    rc = jobs_counts(e->reg, tid, counts);
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "the jobs cannot be counted (%s)", tn_rc_str(rc));
    return TN_OK;
}

int ops_job_schedules(ops_env *e, const char *slug, jobs_schedule_fn fn, void *ctx, char *err,
                      size_t errlen)
{
    int64_t tid;
    int rc = tenant_id(e, slug, -1, &tid, err, errlen);
    if (rc != TN_OK)
        return rc;
    rc = jobs_schedule_list(e->reg, tid, fn, ctx);
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "the schedules cannot be listed (%s)", tn_rc_str(rc));
    return TN_OK;
}

int ops_job_schedule(ops_env *e, const char *slug, const char *app, const char *name,
                     const char *cron, const char *payload, int64_t *id, char *err,
                     size_t errlen)
{
    if (name == NULL || strncmp(name, "tenancy.", 8) == 0)
        return tn_errf(err, errlen, TN_INVALID, "job names starting 'tenancy.' are the host's "
                                                "lifecycle hooks");
    int64_t tid;
    int rc = tenant_id(e, slug, 0, &tid, err, errlen);
    if (rc != TN_OK)
        return rc;
    char why[512] = "";
    rc = jobs_schedule_set(e->reg, tid, app ? app : "", name, cron, payload,
                           clock_wall_us() / 1000, id, why, sizeof(why));
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "%s", why[0] ? why : tn_rc_str(rc));
    return TN_OK;
}

int ops_job_unschedule(ops_env *e, const char *slug, const char *app, const char *name,
                       char *err, size_t errlen)
{
    int64_t tid;
    int rc = tenant_id(e, slug, 0, &tid, err, errlen);
    if (rc != TN_OK)
        return rc;
    char why[512] = "";
    rc = jobs_schedule_remove(e->reg, tid, app ? app : "", name, why, sizeof(why));
    if (rc == TN_NOTFOUND)
        return tn_errf(err, errlen, rc, "%s%.64s%s has no schedule '%.80s'%s%.64s%s",
                       slug ? "tenant '" : "", slug ? slug : "the host (central)",
                       slug ? "'" : "", name, app && app[0] ? " of app '" : "",
                       app && app[0] ? app : "", app && app[0] ? "'" : "");
    if (rc != TN_OK)
        return tn_errf(err, errlen, rc, "%s", why[0] ? why : tn_rc_str(rc));
    return TN_OK;
}

/*
 * jobs.c — the job queue in the panel: every tenant's jobs (/jobs, filtered by tenant and
 * state) or one tenant's (/t/SLUG/jobs), newest first and paged by id; one job
 * (/job?id=N, /t/SLUG/job?id=N, and the page a migrate or move is sent to,
 * /t/SLUG/confirm?job=N) with its payload, attempts, last error, progress, lease and times,
 * refreshing itself while the job is queued or running; retry and cancel (POST with the
 * session's CSRF token, audited as job-retry and job-cancel); a tenant's counts per state
 * for its overview.
 *
 * Everything goes through the operations the command uses (ops_job_*: tenancy/ops_jobs.c).
 * Under /t/SLUG/ a job is looked up with that tenant's id, so another tenant's job id there
 * is "no such job", shown or acted on never.
 *
 * Must not: change anything on a GET; keep a job's strings past the next registry call (the
 * store's buffer: a page is written from one read); let a job's text reach the page
 * unescaped (payloads and errors are the apps' text).
 */
#include "core/first.h"
#include "admin/pages.h"
#include "core/log.h"
#include "tenancy/ops.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define JOBS_PAGE_MAX 1000

static void put_ms(buf *o, int64_t ms)
{
    char s[40] = "";
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (ms > 0 && gmtime_r(&t, &tm) != NULL)
        strftime(s, sizeof(s), "%Y-%m-%d %H:%M:%S UTC", &tm);
    if (s[0])
        buf_puts(o, s);
    else
        buf_puts(o, "<span class=\"muted\">—</span>");
}

static void put_job_state(buf *o, int state)
{
    const char *n = job_state_name(state);
    buf_puts(o, "<span class=\"state state-");
    buf_puts(o, n);
    buf_puts(o, "\">");
    buf_puts(o, n);
    buf_puts(o, "</span>");
}

/* The job's app for a person: the root app, every app (a lifecycle hook), the panel, a mount. */
static const char *app_label(const char *app)
{
    if (app[0] == '\0')
        return "the root app";
    if (strcmp(app, JOB_APP_ALL) == 0)
        return "every app (a hook)";
    if (strcmp(app, ADMIN_JOB_APP) == 0)
        return "the panel";
    return app;
}

/* A positive id from the URL or a form, or 0. */
static int64_t id_of(const char *s)
{
    if (s == NULL || s[0] == '\0' || strlen(s) > 18)
        return 0;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return strtoll(s, NULL, 10);
}

/* The address of a job's page: under its tenant when the page is a tenant's. */
static void job_href(buf *b, const char *slug, int64_t id)
{
    if (slug != NULL) {
        buf_puts(b, "/t/");
        put_url(b, slug);
        buf_puts(b, "/job?id=");
    } else {
        buf_puts(b, "/job?id=");
    }
    buf_i64(b, id);
}

/* ---- counts -------------------------------------------------------------------------------- */

/* The states as links to the list in each (href: the list's address; state the one shown). */
static void counts_links(buf *o, const char *href, const int64_t n[JOB_NSTATES], int state)
{
    int64_t all = 0;
    for (int s = 0; s < JOB_NSTATES; s++)
        all += n[s];
    buf_puts(o, "<nav class=\"job-counts\" id=\"job-counts\" aria-label=\"jobs by state\">");
    buf_puts(o, "<a href=\"");
    buf_html(o, href);
    buf_puts(o, state < 0 ? "\" class=\"active\">" : "\">");
    buf_printf(o, "every state <b>%lld</b></a>", (long long)all);
    for (int s = 0; s < JOB_NSTATES; s++) {
        const char *name = job_state_name(s);
        buf_puts(o, "<a id=\"count-");
        buf_puts(o, name);
        buf_puts(o, "\" href=\"");
        buf_html(o, href);
        buf_puts(o, strchr(href, '?') ? "&amp;state=" : "?state=");
        buf_puts(o, name);
        buf_puts(o, s == state ? "\" class=\"active\">" : "\">");
        put_job_state(o, s);
        buf_printf(o, " <b>%lld</b></a>", (long long)n[s]);
    }
    buf_puts(o, "</nav>");
}

void jobs_counts_html(adm_req *a, const char *slug)
{
    buf *o = a->out;
    ops_env e;
    adm_ops_env(&e);
    int64_t n[JOB_NSTATES];
    char err[512];
    buf href = BUF_INIT;
    buf_puts(&href, "/t/");
    put_url(&href, slug);
    buf_puts(&href, "/jobs");
    if (ops_job_counts(&e, slug, n, err, sizeof(err)) != TN_OK) {
        adm_registry_failed(a);
        buf_puts(o, "<p class=\"error\">");
        buf_html(o, err);
        buf_puts(o, "</p>");
    } else {
        counts_links(o, href.p ? href.p : "", n, -1);
    }
    buf_free(&href);
}

/* ---- the list --------------------------------------------------------------------------------- */

typedef struct list_ctx {
    adm_req *a;
    const char *slug;   /* the page's tenant, or NULL */
    int n;
    int64_t last_id;
} list_ctx;

static int list_row(void *ctx, const job_rec *j)
{
    list_ctx *c = ctx;
    buf *o = c->a->out;
    c->n++;
    c->last_id = j->id;
    buf h = BUF_INIT;
    job_href(&h, c->slug != NULL || j->tenant_id ? j->slug : NULL, j->id);
    buf_puts(o, "<tr id=\"job-");
    buf_i64(o, j->id);
    buf_puts(o, "\" data-href=\"");
    buf_html(o, h.p ? h.p : "");
    buf_puts(o, "\"><td class=\"num\"><a href=\"");
    buf_html(o, h.p ? h.p : "");
    buf_puts(o, "\">");
    buf_i64(o, j->id);
    buf_puts(o, "</a></td>");
    if (c->slug == NULL) {
        buf_puts(o, "<td class=\"mono\">");
        if (j->tenant_id) {
            buf_puts(o, "<a href=\"/t/");
            put_url(o, j->slug);
            buf_puts(o, "/jobs\">");
            buf_html(o, j->slug);
            buf_puts(o, "</a>");
        } else {
            buf_puts(o, "<span class=\"muted\">central</span>");
        }
        buf_puts(o, "</td>");
    }
    buf_puts(o, "<td>");
    buf_html(o, app_label(j->app));
    buf_puts(o, "</td><td class=\"mono\">");
    buf_html(o, j->name);
    buf_puts(o, "</td><td>");
    put_job_state(o, j->state);
    buf_printf(o, "</td><td class=\"num\">%d/%d</td><td>", j->attempts, j->max_attempts);
    put_ms(o, j->created_at);
    buf_puts(o, "</td><td>");
    put_ms(o, j->finished_at ? j->finished_at : j->started_at);
    buf_puts(o, "</td><td class=\"detail\">");
    if (j->state == JOB_RUNNING && j->progress[0]) {
        buf_html(o, j->progress);
    } else if (j->last_error[0]) {
        buf_puts(o, "<span class=\"error-text\">");
        buf_html(o, j->last_error);
        buf_puts(o, "</span>");
    } else if (j->state == JOB_QUEUED && j->run_at > 0) {
        buf_puts(o, "<span class=\"muted\">due ");
        put_ms(o, j->run_at);
        buf_puts(o, "</span>");
    }
    buf_puts(o, "</td></tr>");
    buf_free(&h);
    return o->oom ? TN_NOMEM : TN_OK;
}

int page_jobs(adm_req *a, const char *slug)
{
    const char *tenant = slug ? slug : adm_arg(a, "tenant");
    if (tenant != NULL && tenant[0] == '\0')
        tenant = NULL;
    const char *st = adm_arg(a, "state");
    int state = st && st[0] ? job_state_parse(st) : -1;
    if (st && st[0] && state < 0)
        return send_message(a, 400, "No such state",
                            "A job is queued, running, done, dead or cancelled.");
    const char *b = adm_arg(a, "before");
    int64_t before = id_of(b);
    if (b != NULL && b[0] && before == 0)
        return send_message(a, 400, "Bad page", "before= takes a job id.");
    if (tenant != NULL && !tenant_slug_valid(tenant))
        return send_message(a, 404, "No such tenant", "There is no tenant with this slug.");
    int limit = adm.env.cfg->page_size;
    if (limit > JOBS_PAGE_MAX)
        limit = JOBS_PAGE_MAX;

    ops_env e;
    adm_ops_env(&e);
    char err[1024];
    int64_t n[JOB_NSTATES];
    int rc = ops_job_counts(&e, tenant, n, err, sizeof(err));
    if (rc == TN_NOTFOUND)
        return send_message(a, 404, "No such tenant", "There is no tenant with this slug.");
    if (rc != TN_OK) {
        adm_registry_failed(a);
        return send_message(a, 503, "Registry error", err);
    }
    /* the list's own address, its filters kept (but the page) */
    buf self = BUF_INIT;
    if (slug != NULL) {
        buf_puts(&self, "/t/");
        put_url(&self, slug);
        buf_puts(&self, "/jobs");
    } else {
        buf_puts(&self, "/jobs");
        if (tenant != NULL) {
            buf_puts(&self, "?tenant=");
            put_url(&self, tenant);
        }
    }
    buf *o = a->out;
    char title[120];
    snprintf(title, sizeof(title), slug ? "Jobs · %s" : "Jobs", slug ? slug : "");
    page_begin(a, title, slug ? "tenant-jobs" : "jobs", slug);
    buf_puts(o, "<header class=\"page-head\"><h1>Jobs");
    if (tenant != NULL) {
        buf_puts(o, " of <span class=\"mono\">");
        buf_html(o, tenant);
        buf_puts(o, "</span>");
    }
    buf_puts(o, "</h1><span class=\"count\">newest first</span>");
    if (tenant != NULL) {
        buf_puts(o, "<a class=\"button\" href=\"/t/");
        put_url(o, tenant);
        buf_puts(o, "\">The tenant</a>");
    }
    buf_puts(o, "</header>");
    counts_links(o, self.p ? self.p : "/jobs", n, state);
    if (slug == NULL) {
        buf_puts(o, "<form class=\"filters\" method=\"get\" action=\"/jobs\" id=\"job-filters\">"
                    "<input type=\"search\" name=\"tenant\" placeholder=\"Tenant slug\" "
                    "aria-label=\"Tenant slug\" autocomplete=\"off\" value=\"");
        buf_html(o, tenant ? tenant : "");
        buf_puts(o, "\"><select name=\"state\" aria-label=\"State\"><option value=\"\">every "
                    "state</option>");
        for (int s = 0; s < JOB_NSTATES; s++) {
            buf_puts(o, "<option");
            buf_puts(o, s == state ? " selected>" : ">");
            buf_puts(o, job_state_name(s));
            buf_puts(o, "</option>");
        }
        buf_puts(o, "</select><button type=\"submit\">Filter</button></form>");
    }
    buf_puts(o, "<div class=\"table-wrap\"><table class=\"grid nav-rows\" id=\"jobs\"><thead><tr>"
                "<th class=\"num\">Id</th>");
    if (slug == NULL)
        buf_puts(o, "<th>Tenant</th>");
    buf_puts(o, "<th>App</th><th>Name</th><th>State</th><th class=\"num\">Tries</th>"
                "<th>Queued</th><th>Started / ended</th><th>Progress or last error</th></tr>"
                "</thead><tbody id=\"job-rows\">");
    list_ctx lc = {a, slug, 0, 0};
    rc = ops_job_list(&e, tenant, false, state, before, limit, list_row, &lc, err, sizeof(err));
    buf_puts(o, "</tbody></table>");
    if (rc != TN_OK) {
        adm_registry_failed(a);
        buf_puts(o, "<p class=\"error\">");
        buf_html(o, err);
        buf_puts(o, "</p>");
    } else if (lc.n == 0) {
        buf_puts(o, "<p class=\"empty\">No jobs here.</p>");
    }
    buf_puts(o, "</div><nav class=\"pager\" aria-label=\"pages\">");
    /* keyset pages by id: the newest, and older than the last row */
    const char *sep = strchr(self.p ? self.p : "", '?') ? "&amp;" : "?";
    if (before > 0) {
        buf_puts(o, "<a rel=\"prev\" id=\"prev-page\" href=\"");
        buf_html(o, self.p ? self.p : "/jobs");
        if (state >= 0) {
            buf_puts(o, sep);
            buf_puts(o, "state=");
            buf_puts(o, job_state_name(state));
        }
        buf_puts(o, "\">← Newest</a>");
    } else {
        buf_puts(o, "<span class=\"disabled\">← Newest</span>");
    }
    if (rc == TN_OK && lc.n == limit) {
        buf_puts(o, "<a rel=\"next\" id=\"next-page\" href=\"");
        buf_html(o, self.p ? self.p : "/jobs");
        buf_puts(o, sep);
        if (state >= 0) {
            buf_puts(o, "state=");
            buf_puts(o, job_state_name(state));
            buf_puts(o, "&amp;");
        }
        buf_printf(o, "before=%lld\">Older →</a>", (long long)lc.last_id);
    } else {
        buf_puts(o, "<span class=\"disabled\">Older →</span>");
    }
    buf_puts(o, "</nav>");
    buf_free(&self);
    page_end(a);
    return send_html(a, 200);
}

/* ---- one job ----------------------------------------------------------------------------------- */

static void fact(buf *o, const char *name)
{
    buf_puts(o, "</dd><dt>");
    buf_puts(o, name);
    buf_puts(o, "</dt><dd>");
}

/* Retry (dead, cancelled) or cancel (queued): a form each, posted to the page's own address. */
static void job_buttons(adm_req *a, const char *slug, const job_rec *j)
{
    buf *o = a->out;
    bool retry = j->state == JOB_DEAD || j->state == JOB_CANCELLED;
    bool cancel = j->state == JOB_QUEUED;
    if (!retry && !cancel)
        return;
    buf_puts(o, "<form method=\"post\" class=\"row\" id=\"job-form\" action=\"");
    if (slug != NULL) {
        buf_puts(o, "/t/");
        put_url(o, slug);
    }
    buf_puts(o, "/job\">");
    put_csrf(a);
    buf_puts(o, "<input type=\"hidden\" name=\"id\" value=\"");
    buf_i64(o, j->id);
    buf_puts(o, "\">");
    if (retry)
        buf_puts(o, "<button type=\"submit\" class=\"primary\" name=\"op\" value=\"retry\" "
                    "id=\"job-retry\">Retry</button>");
    if (cancel)
        buf_puts(o, "<button type=\"submit\" class=\"danger\" name=\"op\" value=\"cancel\" "
                    "id=\"job-cancel\">Cancel</button>");
    buf_puts(o, "</form>");
}

int page_job(adm_req *a, const char *slug, const char *id_text)
{
    int64_t id = id_of(id_text);
    ops_env e;
    adm_ops_env(&e);
    char err[1024];
    job_rec j;
    int rc = id > 0 ? ops_job_get(&e, id, slug, &j, err, sizeof(err)) : TN_NOTFOUND;
    if (rc == TN_NOTFOUND)
        return send_message(a, 404, "No such job",
                            slug ? "This tenant has no job with this id."
                                 : "There is no job with this id.");
    if (rc != TN_OK) {
        adm_registry_failed(a);
        return send_message(a, 503, "Registry error", err);
    }
    /* From here on nothing calls the registry: j's strings are the store's until then. */
    bool live = j.state == JOB_QUEUED || j.state == JOB_RUNNING;
    bool host = strcmp(j.app, ADMIN_JOB_APP) == 0;
    const char *output = host ? actions_job_output(a, j.id) : NULL;
    if (live)
        tn_add_header(a->r, "Refresh", "2");   /* until it is over */
    buf *o = a->out;
    char title[160];
    snprintf(title, sizeof(title), "Job %lld", (long long)j.id);
    page_begin(a, title, slug ? "tenant-jobs" : "jobs", slug);
    buf_puts(o, "<section class=\"confirm wide\" id=\"job\"><h1>Job ");
    buf_i64(o, j.id);
    buf_puts(o, " <span class=\"mono\">");
    buf_html(o, j.name);
    buf_puts(o, "</span></h1><p id=\"job-state\" class=\"");
    buf_puts(o, live ? "muted" : j.state == JOB_DONE ? "flash" : j.state == JOB_DEAD ? "error"
                                                                                   : "muted");
    buf_puts(o, "\">");
    buf_puts(o, job_state_name(j.state));
    buf_puts(o, "</p>");
    if (j.state == JOB_QUEUED)
        buf_puts(o, "<p class=\"muted\" id=\"job-waiting\">Queued: a job worker of the host "
                    "(pm.jobs) runs it when it is due and one is free.</p>");
    if (j.progress[0]) {
        buf_puts(o, "<p id=\"job-progress\">");
        buf_html(o, j.progress);
        buf_puts(o, "</p>");
    }
    if (j.last_error[0]) {
        buf_puts(o, "<p class=\"error\" id=\"job-error\">");
        buf_html(o, j.last_error);
        buf_puts(o, "</p>");
    }
    buf_puts(o, "<dl class=\"facts\" id=\"job-facts\"><dt>Tenant</dt><dd>");
    if (j.tenant_id) {
        buf_puts(o, "<a class=\"mono\" href=\"/t/");
        put_url(o, j.slug);
        buf_puts(o, "\">");
        buf_html(o, j.slug);
        buf_puts(o, "</a>");
    } else {
        buf_puts(o, "central (no tenant)");
    }
    fact(o, "App");
    buf_html(o, app_label(j.app));
    fact(o, "Attempts");
    buf_printf(o, "%d of %d", j.attempts, j.max_attempts);
    fact(o, "Priority");
    buf_printf(o, "%d", j.priority);
    fact(o, "Timeout");
    buf_printf(o, "%.1f s", j.timeout_ms / 1000.0);
    if (j.unique_key[0]) {
        fact(o, "Unique key");
        buf_html(o, j.unique_key);
    }
    if (j.schedule_id) {
        fact(o, "Schedule");
        buf_i64(o, j.schedule_id);
    }
    fact(o, "Queued");
    put_ms(o, j.created_at);
    fact(o, "Due");
    put_ms(o, j.run_at);
    fact(o, "Started");
    put_ms(o, j.started_at);
    fact(o, "Ended");
    put_ms(o, j.finished_at);
    if (j.lease[0]) {
        fact(o, "Lease");
        buf_puts(o, "<span class=\"mono\">");
        buf_html(o, j.lease);
        buf_puts(o, "</span> until ");
        put_ms(o, j.lease_until);
    }
    buf_puts(o, "</dd></dl><h2>Payload</h2>");
    if (j.payload[0]) {
        buf_puts(o, "<pre class=\"output\" id=\"job-payload\">");
        buf_html(o, j.payload);
        buf_puts(o, "</pre>");
    } else {
        buf_puts(o, "<p class=\"muted\">none</p>");
    }
    if (output != NULL && output[0]) {
        buf_puts(o, "<h2>Output</h2><pre class=\"output\" id=\"job-output\">");
        buf_html(o, output);
        buf_puts(o, "</pre>");
    }
    job_buttons(a, slug, &j);
    buf_puts(o, "<p class=\"row\">");
    if (j.tenant_id) {
        buf_puts(o, "<a class=\"button\" href=\"/t/");
        put_url(o, j.slug);
        buf_puts(o, "\">Back to the tenant</a><a class=\"button\" href=\"/t/");
        put_url(o, j.slug);
        buf_puts(o, "/jobs\">Its jobs</a>");
    }
    buf_puts(o, "<a class=\"button\" href=\"/jobs\">Every job</a></p></section>");
    page_end(a);
    return send_html(a, 200);
}

/* ---- retry and cancel ----------------------------------------------------------------------- */

int post_job(adm_req *a, const char *slug)
{
    const char *op = adm_form(a, "op");
    bool retry = op != NULL && strcmp(op, "retry") == 0;
    if (op == NULL || (!retry && strcmp(op, "cancel") != 0))
        return send_message(a, 400, "No such action", "A job is retried or cancelled.");
    const char *action = retry ? "job-retry" : "job-cancel";
    int64_t id = id_of(adm_form(a, "id"));
    ops_env e;
    adm_ops_env(&e);
    char err[1024], detail[300], tenant[64] = "";
    job_rec j;
    int rc = id > 0 ? ops_job_get(&e, id, slug, &j, err, sizeof(err)) : TN_NOTFOUND;
    if (rc == TN_OK) {
        snprintf(tenant, sizeof(tenant), "%s", j.slug);
        snprintf(detail, sizeof(detail), "job %lld %.80s", (long long)id, j.name);
    } else {
        snprintf(detail, sizeof(detail), "job %lld", (long long)id);
    }
    if (rc == TN_NOTFOUND) {
        audit(a, action, slug, detail, "refused");
        return send_message(a, 404, "No such job",
                            slug ? "This tenant has no job with this id."
                                 : "There is no job with this id.");
    }
    if (rc == TN_OK)
        rc = retry ? ops_job_retry(&e, id, slug, err, sizeof(err))
                   : ops_job_cancel(&e, id, slug, err, sizeof(err));
    audit(a, action, tenant, rc == TN_OK ? detail : err, rc == TN_OK ? "ok" : "error");
    if (rc == TN_INVALID || rc == TN_BUSY || rc == TN_NOTFOUND)
        return send_message(a, 409, retry ? "Not retried" : "Not cancelled", err);
    if (rc != TN_OK) {
        adm_registry_failed(a);
        return send_message(a, 503, "Registry error", err);
    }
    if (retry && adm.env.job_queued != NULL)
        adm.env.job_queued(adm.env.job_ctx);
    buf h = BUF_INIT;
    job_href(&h, slug, id);
    int st = send_redirect(a, h.p ? h.p : "/jobs");
    buf_free(&h);
    return st;
}

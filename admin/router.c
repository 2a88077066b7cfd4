/*
 * router.c — the panel's front door: admin_init/admin_handle, the request handler the
 * composition root adds (admin_handler), and the router that sends each path to its page
 * (see page.h for the shape).
 *
 * It is also the panel's face to the job workers: admin_handler.job runs the panel's own
 * jobs (app "host.admin": its migrate and move) through actions.c.
 *
 * Routes other than the login page and the two static assets refuse a request without a
 * session: pages redirect to the login, /api/ answers 401. Every POST but the login needs
 * the session's CSRF token.
 *
 * Must not: serve anything when the client address is outside admin.allow; answer a tenant
 * (it claims only requests whose routing host is admin.host).
 */
#include "core/first.h"
#include "admin/admin.h"
#include "admin/pages.h"
#include "admin/store.h"
#include "core/log.h"
#include "tenancy/handler.h"

#include <string.h>

int admin_init(const admin_env *env)
{
    memset(&adm, 0, sizeof(adm));
    adm.env = *env;
    page_kit_init();
    adm.ready = true;
    return TN_OK;
}

void admin_fini(void)
{
    store_fini();
    page_kit_fini();
    memset(&adm, 0, sizeof(adm));
}

bool admin_is_host(const char *host)
{
    return adm.ready && adm.env.cfg->enabled && host != NULL &&
           strcmp(host, adm.env.cfg->host_norm) == 0;
}

/* ---- routing --------------------------------------------------------------------------------- */

static bool starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* "/t/acme/sql" -> slug "acme" (valid slugs only), rest "/sql". */
static bool tenant_path(adm_req *a, char *slug, size_t n, const char **rest)
{
    const char *s = a->path + 3;
    size_t l = strcspn(s, "/");
    if (l == 0 || l >= n)
        return false;
    memcpy(slug, s, l);
    slug[l] = '\0';
    *rest = s + l;
    return tenant_slug_valid(slug);
}

static int not_found(adm_req *a)
{
    if (starts(a->path, "/api/"))
        return send_json_error(a, 404, "no such API route");
    return send_message(a, 404, "Not found", "There is no page at this address.");
}

static int method_not_allowed(adm_req *a)
{
    tn_add_header(a->r, "Allow", "GET, HEAD, POST");
    return send_message(a, 405, "Method not allowed", "This page does not take that method.");
}

static int route(adm_req *a)
{
    const char *p = a->path;
    const char *m = tn_method(a->r);
    bool get = strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0;
    if (!get && !a->post)
        return method_not_allowed(a);

    /* Public: the two assets and the login. */
    if (strcmp(p, "/assets/admin.css") == 0 && get)
        return send_asset(a, admin_asset_css, admin_asset_css_len, "text/css; charset=utf-8",
                           adm.css_etag);
    if (strcmp(p, "/assets/admin.js") == 0 && get)
        return send_asset(a, admin_asset_js, admin_asset_js_len,
                           "text/javascript; charset=utf-8", adm.js_etag);
    if (strcmp(p, "/login") == 0) {
        if (a->post)
            return auth_login_post(a);
        if (adm_registry(a) == NULL)
            return a->r->status;
        if (auth_session(a) == TN_OK)
            return send_redirect(a, "/");
        return auth_login_page(a, 200, NULL);
    }

    /* Everything else: a session first. */
    if (adm_registry(a) == NULL)
        return a->r->status;
    int rc = auth_session(a);
    if (rc != TN_OK && rc != TN_NOTFOUND) {
        adm_registry_failed(a);
        return send_message(a, 503, "Registry unavailable", "Sessions cannot be read now.");
    }
    if (rc == TN_NOTFOUND) {
        if (starts(p, "/api/"))
            return send_json_error(a, 401, "log in first");
        if (!get)
            return send_redirect(a, "/login");
        buf *next = &(buf)BUF_INIT;
        buf_puts(next, "/login?next=");
        put_url(next, p);
        if (tn_query(a->r)[0] != '\0') {
            buf_puts(next, "%3F");
            put_url(next, tn_query(a->r));
        }
        int st = next->oom ? send_redirect(a, "/login") : send_redirect(a, next->p);
        buf_free(next);
        return st;
    }
    if (a->post && !auth_csrf_ok(a)) {
        audit(a, "csrf_refused", NULL, p, "refused");
        if (starts(p, "/api/"))
            return send_json_error(a, 403, "missing or wrong CSRF token");
        return send_message(a, 403, "Refused",
                            "This form is stale or did not come from the panel (CSRF token "
                            "missing or wrong). Reload the page and try again.");
    }

    if (strcmp(p, "/") == 0)
        return get ? page_fleet(a) : method_not_allowed(a);
    if (strcmp(p, "/logout") == 0)
        return a->post ? auth_logout(a) : method_not_allowed(a);
    if (strcmp(p, "/host") == 0)
        return get ? page_host(a) : method_not_allowed(a);
    if (strcmp(p, "/audit") == 0)
        return get ? page_audit(a) : method_not_allowed(a);
    if (strcmp(p, "/new") == 0)
        return page_new(a);
    if (strcmp(p, "/jobs") == 0)
        return get ? page_jobs(a, NULL) : method_not_allowed(a);
    if (strcmp(p, "/job") == 0)
        return a->post ? post_job(a, NULL) : page_job(a, NULL, adm_arg(a, "id"));
    if (strcmp(p, "/api/status") == 0)
        return get ? api_status(a) : method_not_allowed(a);
    if (strcmp(p, "/api/tenants") == 0)
        return get ? api_tenants(a) : method_not_allowed(a);
    if (starts(p, "/t/")) {
        char slug[64];
        const char *rest;
        if (!tenant_path(a, slug, sizeof(slug), &rest))
            return not_found(a);
        if (rest[0] == '\0')
            return get ? page_tenant(a, slug) : method_not_allowed(a);
        if (strcmp(rest, "/sql") == 0)
            return page_console(a, slug);
        if (strcmp(rest, "/table") == 0) {
            const char *name = adm_arg(a, "name");
            return !get ? method_not_allowed(a) : name ? page_table(a, slug, name) : not_found(a);
        }
        if (strcmp(rest, "/row") == 0) {
            const char *name = adm_arg(a, "name");
            return !get ? method_not_allowed(a) : name ? page_row(a, slug, name) : not_found(a);
        }
        if (strcmp(rest, "/confirm") == 0)
            return get ? page_confirm(a, slug) : method_not_allowed(a);
        if (strcmp(rest, "/action") == 0)
            return a->post ? post_action(a, slug) : method_not_allowed(a);
        if (strcmp(rest, "/jobs") == 0)
            return get ? page_jobs(a, slug) : method_not_allowed(a);
        if (strcmp(rest, "/job") == 0)
            return a->post ? post_job(a, slug) : page_job(a, slug, adm_arg(a, "id"));
    }
    return not_found(a);
}

int admin_handle(tn_request *r)
{
    adm_req a;
    memset(&a, 0, sizeof(a));
    a.r = r;
    a.path = tn_path(r);
    a.out = &adm.out;
    buf_reset(a.out);
    const char *ra = tn_param(r, "REMOTE_ADDR");
    a.client = ra ? ra : "";
    const char *https = tn_param(r, "HTTPS");
    a.https = https != NULL && https[0] != '\0' && strcmp(https, "off") != 0;
    a.post = strcmp(tn_method(r), "POST") == 0;

    if (!netaddr_match_text(adm.env.cfg->allowed, a.client))
        return send_message(&a, 403, "Forbidden",
                            "The admin panel is not open to this address (admin.allow).");
    if (a.post) {
        const char *body;
        size_t len;
        int rc = tn_body(r, &body, &len);
        if (rc == TN_TOOBIG)
            return send_message(&a, 413, "Too large", "The request body is over max_body.");
        if (rc != TN_OK)
            return 499;
        a.body = body ? body : "";
        a.body_len = len;
    }
    int status = route(&a);
    if (adm.reg != NULL && !db_is_clean(registry_db(adm.reg)))
        db_reset(registry_db(adm.reg));   /* nothing of this request stays open */
    return status;
}

/* ---- the request handler ------------------------------------------------------------------- */

_Static_assert(ADMIN_AUDIT_ID_SIZE <= TN_PENDING_ID_SIZE,
               "the host keeps a whole audit entry id for the master");

/* The host's environment as the panel's: its options (with the tenancy options they were
 * finished with), the status document, and the slot for a console query's audit id. */
static int handler_init(const tn_handler_env *he)
{
    const admin_config *c = he->conf;
    if (c == NULL)
        return TN_INVALID;
    admin_env env = {.cfg = c, .tcfg = c->tenancy, .config_path = he->config_path,
                     .status_json = he->status_json, .status_ctx = he->host,
                     .audit_pending = he->keep_pending, .audit_ctx = he->host,
                     .job_queued = he->job_queued, .job_ctx = he->host};
    return admin_init(&env);
}

/* A job of the panel's own (its migrate or move), in a job worker (tenancy/handler.h). */
static int handler_job(const tn_handler_job *j, char *err, size_t errlen)
{
    if (!adm.ready)
        return tn_errf(err, errlen, TN_ERR, "the panel is not set up in this job worker");
    return actions_job(j, err, errlen);
}

/* A request for the panel: its routing host (the one the chain reads: tenant.host_params)
 * is admin.host. */
static TN_HOT bool handler_claims(tn_request *r)
{
    if (!adm.ready || !adm.env.cfg->enabled)
        return false;
    const tenancy_config *tc = adm.env.tcfg;
    return request_route_host(r, (const char *const *)tc->hparams, tc->nhparams) == RH_OK &&
           admin_is_host(r->route_host);
}

/* Only a panel that is on queues its migrate and move. */
static bool handler_queues_jobs(const void *conf)
{
    const admin_config *c = conf;
    return c != NULL && c->enabled;
}

const tn_handler admin_handler = {.name = "admin panel", .init = handler_init,
                                  .fini = admin_fini, .claims = handler_claims,
                                  .handle = admin_handle, .job_app = ADMIN_JOB_APP,
                                  .job = handler_job, .queues_jobs = handler_queues_jobs};

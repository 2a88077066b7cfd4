/*
 * http.c — the panel's front door: admin_init/admin_handle, the router, the response
 * headers every answer carries, and the page frame (see admin_int.h for the shape).
 *
 * Every answer carries a Content-Security-Policy that allows scripts and styles only from
 * the panel itself (the two files of assets.c, no inline code), forbids framing, and keeps
 * forms and fetches on this origin; pages are never cached. Routes other than the login
 * page and the two static assets refuse a request without a session: pages redirect to the
 * login, /api/ answers 401. Every POST but the login needs the session's CSRF token.
 *
 * Must not: serve anything when the client address is outside admin.allow; answer a tenant
 * (the worker sends only admin.host here); let a request's data reach a page unescaped.
 */
#include "core/first.h"
#include "admin/admin_int.h"
#include "admin/sessions.h"
#include "admin/store.h"
#include "core/clock.h"
#include "core/kv.h"
#include "core/log.h"
#include "tenancy/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

admin_state adm;

extern const char admin_asset_css[];
extern const size_t admin_asset_css_len;
extern const char admin_asset_js[];
extern const size_t admin_asset_js_len;

static void etag_of(const char *p, size_t n, char out[24])
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ull;
    }
    snprintf(out, 24, "%016llx", (unsigned long long)h);
}

int admin_init(const admin_env *env)
{
    memset(&adm, 0, sizeof(adm));
    adm.env = *env;
    etag_of(admin_asset_css, admin_asset_css_len, adm.css_etag);
    etag_of(admin_asset_js, admin_asset_js_len, adm.js_etag);
    adm.ready = true;
    return TN_OK;
}

void admin_fini(void)
{
    store_fini();
    registry_close(adm.reg);
    buf_free(&adm.out);
    memset(&adm, 0, sizeof(adm));
}

bool admin_is_host(const char *host)
{
    return adm.ready && adm.env.cfg->enabled && host != NULL &&
           strcmp(host, adm.env.cfg->host_norm) == 0;
}

/* ---- the registry --------------------------------------------------------------------------- */

registry *adm_registry(adm_req *a)
{
    if (adm.reg != NULL)
        return adm.reg;
    int64_t now = clock_mono_ms();
    if (now >= adm.reg_retry_ms) {
        char err[512];
        const tenancy_config *tc = adm.env.tcfg;
        if (registry_open(tc->registry_uri, tc->gen_path, &adm.reg, err, sizeof(err)) != TN_OK) {
            log_error("admin: tenant registry unavailable: %s", err);
            adm.reg = NULL;
            adm.reg_retry_ms = now + 1000;
        } else if (registry_ready(adm.reg, err, sizeof(err)) != TN_OK ||
                   sessions_prepare(registry_db(adm.reg), err, sizeof(err)) != TN_OK) {
            /* sessions_prepare: the panel's own tables, made or brought up to date */
            log_error("admin: %s", err);
            registry_close(adm.reg);
            adm.reg = NULL;
            adm.reg_retry_ms = now + 1000;
        }
    }
    if (adm.reg == NULL) {
        tn_add_header(a->r, "Retry-After", "2");
        if (strncmp(a->path, "/api/", 5) == 0)
            send_json_error(a, 503, "the tenant registry is unavailable");
        else
            send_message(a, 503, "Registry unavailable",
                         "The tenant registry cannot be reached right now (see the error log).");
    }
    return adm.reg;
}

void adm_registry_failed(adm_req *a)
{
    (void)a;
    if (adm.reg != NULL && !db_is_clean(registry_db(adm.reg))) {
        registry_close(adm.reg);
        adm.reg = NULL;
    }
}

/* ---- request data ----------------------------------------------------------------------------- */

const char *adm_arg(adm_req *a, const char *name) { return tn_query_arg(a->r, name); }

const char *adm_form(adm_req *a, const char *name)
{
    if (!a->post)
        return tn_query_arg(a->r, name);
    if (a->body == NULL)
        return NULL;
    return kv_form_get(a->body, a->body_len, name, a->r->arena);
}

void put_url(buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~') {
            buf_putc(b, (char)c);
        } else {
            buf_putc(b, '%');
            buf_putc(b, hex[c >> 4]);
            buf_putc(b, hex[c & 15]);
        }
    }
}

/* ---- responses ---------------------------------------------------------------------------------- */

static void security_headers(adm_req *a)
{
    tn_request *r = a->r;
    tn_add_header(r, "Content-Security-Policy",
                  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                  "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "
                  "base-uri 'none'");
    tn_add_header(r, "X-Content-Type-Options", "nosniff");
    tn_add_header(r, "X-Frame-Options", "DENY");
    tn_add_header(r, "Referrer-Policy", "same-origin");   /* no-referrer would make
                                                                  * the browser send Origin: null */
    tn_add_header(r, "Cross-Origin-Opener-Policy", "same-origin");
}

static int send_buf(adm_req *a, int status, const char *type, const char *disposition,
                    bool nocache)
{
    tn_request *r = a->r;
    if (a->out->oom) {
        buf_reset(a->out);
        status = 500;
        type = "text/plain; charset=utf-8";
        disposition = NULL;
        buf_puts(a->out, "out of memory\n");
    }
    tn_set_status(r, status);
    security_headers(a);
    tn_add_header(r, "Content-Type", type);
    if (nocache)
        tn_add_header(r, "Cache-Control", "no-store");
    if (disposition != NULL)
        tn_add_header(r, "Content-Disposition", disposition);
    if (strcmp(tn_method(r), "HEAD") != 0)
        tn_write(r, a->out->p ? a->out->p : "", a->out->len);
    return status;
}

int send_html(adm_req *a, int status)
{
    return send_buf(a, status, "text/html; charset=utf-8", NULL, true);
}

int send_doc(adm_req *a, int status, const char *type, const char *disposition)
{
    return send_buf(a, status, type, disposition, true);
}

int send_json_error(adm_req *a, int status, const char *msg)
{
    buf_reset(a->out);
    buf_puts(a->out, "{\"error\":");
    buf_json_str(a->out, msg);
    buf_puts(a->out, "}\n");
    return send_doc(a, status, "application/json", NULL);
}

int send_redirect(adm_req *a, const char *location)
{
    buf_reset(a->out);
    tn_add_header(a->r, "Location", location);
    buf_puts(a->out, "See ");
    buf_html(a->out, location);
    buf_putc(a->out, '\n');
    return send_doc(a, 303, "text/plain; charset=utf-8", NULL);
}

/* A bare page (no navigation): the login page and errors before a session exists. */
static void head(adm_req *a, const char *title, const char *body_class)
{
    buf *o = a->out;
    buf_puts(o, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                "<title>");
    buf_html(o, title);
    buf_puts(o, " · tenancy admin</title><link rel=\"icon\" href=\"data:,\">"
                "<link rel=\"stylesheet\" href=\"/assets/admin.css?v=");
    buf_puts(o, adm.css_etag);
    buf_puts(o, "\"><script src=\"/assets/admin.js?v=");
    buf_puts(o, adm.js_etag);
    buf_puts(o, "\" defer></script></head><body class=\"");
    buf_puts(o, body_class);
    buf_puts(o, "\">");
}

int send_message(adm_req *a, int status, const char *title, const char *msg)
{
    buf_reset(a->out);
    if (a->user != NULL) {
        page_begin(a, title, "", NULL);
    } else {
        head(a, title, "bare");
        buf_puts(a->out, "<main class=\"bare-main\">");
    }
    buf_puts(a->out, "<h1>");
    buf_html(a->out, title);
    buf_puts(a->out, "</h1><p class=\"message\">");
    buf_html(a->out, msg);
    buf_puts(a->out, "</p><p><a href=\"/\">Back to the fleet</a></p>");
    if (a->user != NULL)
        page_end(a);
    else
        buf_puts(a->out, "</main></body></html>\n");
    return send_html(a, status);
}

void put_csrf(adm_req *a)
{
    buf_puts(a->out, "<input type=\"hidden\" name=\"csrf\" value=\"");
    buf_html(a->out, a->csrf ? a->csrf : "");
    buf_puts(a->out, "\">");
}

static void nav_link(buf *o, const char *href, const char *label, const char *key,
                     bool active)
{
    buf_puts(o, "<a class=\"nav-item");
    if (active)
        buf_puts(o, " active\" aria-current=\"page");
    buf_puts(o, "\" href=\"");
    buf_puts(o, href);
    buf_puts(o, "\"");
    if (key != NULL) {
        buf_puts(o, " data-key=\"");
        buf_puts(o, key);
        buf_puts(o, "\"");
    }
    buf_puts(o, ">");
    buf_puts(o, label);
    if (key != NULL) {
        buf_puts(o, "<kbd>g ");
        buf_puts(o, key);
        buf_puts(o, "</kbd>");
    }
    buf_puts(o, "</a>");
}

void page_begin(adm_req *a, const char *title, const char *nav, const char *tenant)
{
    buf *o = a->out;
    head(a, title, "app");
    buf_puts(o, "<div class=\"layout\"><nav class=\"side\" aria-label=\"main\">"
                "<a class=\"brand\" href=\"/\">tenancy<span>admin</span></a>"
                "<form class=\"side-search\" action=\"/\" method=\"get\" role=\"search\">"
                "<input type=\"search\" name=\"q\" id=\"global-search\" autocomplete=\"off\" "
                "placeholder=\"Search tenants\" aria-label=\"Search tenants\"><kbd>/</kbd></form>"
                "<div class=\"nav-group\">");
    nav_link(o, "/", "Fleet", "f", strcmp(nav, "fleet") == 0);
    nav_link(o, "/host", "Host", "h", strcmp(nav, "host") == 0);
    nav_link(o, "/new", "New tenant", "n", strcmp(nav, "new") == 0);
    nav_link(o, "/audit", "Audit log", "a", strcmp(nav, "audit") == 0);
    buf_puts(o, "</div>");
    if (tenant != NULL) {
        buf_puts(o, "<div class=\"nav-group\"><div class=\"nav-title\">Tenant <b>");
        buf_html(o, tenant);
        buf_puts(o, "</b></div>");
        buf *href = &(buf)BUF_INIT;
        buf_puts(href, "/t/");
        put_url(href, tenant);
        nav_link(o, href->p, "Overview", NULL, strcmp(nav, "tenant") == 0);
        buf_puts(href, "/sql");
        nav_link(o, href->p, "SQL console", "s", strcmp(nav, "sql") == 0);
        buf_free(href);
        buf_puts(o, "</div>");
    }
    buf_puts(o, "<div class=\"side-foot\"><span class=\"who\">");
    buf_html(o, a->user ? a->user : "");
    buf_puts(o, "</span><form method=\"post\" action=\"/logout\">");
    put_csrf(a);
    buf_puts(o, "<button type=\"submit\" class=\"link\">Log out</button></form>"
                "<button type=\"button\" class=\"link\" id=\"show-keys\">Keys <kbd>?</kbd>"
                "</button></div></nav><main class=\"main\" id=\"main\">");
    if (a->flash != NULL) {
        buf_puts(o, "<div class=\"flash\" role=\"status\">");
        buf_html(o, a->flash);
        buf_puts(o, "</div>");
    }
}

void page_end(adm_req *a)
{
    buf_puts(a->out,
             "</main></div><div class=\"keys\" id=\"keys\" hidden><div class=\"keys-box\">"
             "<h2>Keyboard</h2><dl>"
             "<dt><kbd>/</kbd></dt><dd>search tenants</dd>"
             "<dt><kbd>g</kbd> <kbd>f</kbd></dt><dd>fleet</dd>"
             "<dt><kbd>g</kbd> <kbd>h</kbd></dt><dd>host</dd>"
             "<dt><kbd>g</kbd> <kbd>n</kbd></dt><dd>new tenant</dd>"
             "<dt><kbd>g</kbd> <kbd>a</kbd></dt><dd>audit log</dd>"
             "<dt><kbd>g</kbd> <kbd>s</kbd></dt><dd>SQL console of this tenant</dd>"
             "<dt><kbd>j</kbd> <kbd>k</kbd></dt><dd>next / previous row</dd>"
             "<dt><kbd>Enter</kbd></dt><dd>open the selected row</dd>"
             "<dt><kbd>[</kbd> <kbd>]</kbd></dt><dd>previous / next page</dd>"
             "<dt><kbd>Ctrl</kbd> <kbd>Enter</kbd></dt><dd>run the query</dd>"
             "<dt><kbd>Esc</kbd></dt><dd>close this</dd></dl></div></div></body></html>\n");
}

/* ---- assets ---------------------------------------------------------------------------------- */

static int serve_asset(adm_req *a, const char *p, size_t n, const char *type, const char *etag)
{
    tn_request *r = a->r;
    char quoted[32];
    snprintf(quoted, sizeof(quoted), "\"%s\"", etag);
    const char *inm = tn_header(r, "If-None-Match");
    security_headers(a);
    tn_add_header(r, "ETag", quoted);
    tn_add_header(r, "Cache-Control", "public, max-age=86400");
    if (inm != NULL && strcmp(inm, quoted) == 0) {
        tn_set_status(r, 304);
        return 304;
    }
    tn_add_header(r, "Content-Type", type);
    if (strcmp(tn_method(r), "HEAD") != 0)
        tn_write(r, p, n);
    return 200;
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
        return serve_asset(a, admin_asset_css, admin_asset_css_len, "text/css; charset=utf-8",
                           adm.css_etag);
    if (strcmp(p, "/assets/admin.js") == 0 && get)
        return serve_asset(a, admin_asset_js, admin_asset_js_len,
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

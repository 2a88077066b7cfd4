/*
 * page.c — the panel's page kit (see page.h): the registry connection, request data, the
 * response headers every answer carries, the page frame and the two static files.
 *
 * Every answer carries a Content-Security-Policy that allows scripts and styles only from
 * the panel itself (the two files of assets.c, no inline code), forbids framing, and keeps
 * forms and fetches on this origin; pages are never cached.
 *
 * Must not: name a page or a route (router.c does); let a request's data reach a page
 * unescaped.
 */
#include "core/first.h"
#include "admin/page.h"
#include "admin/sessions.h"
#include "core/clock.h"
#include "core/kv.h"
#include "core/log.h"
#include "storage/db.h"
#include "tenancy/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

admin_state adm;

static void etag_of(const char *p, size_t n, char out[24])
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ull;
    }
    snprintf(out, 24, "%016llx", (unsigned long long)h);
}

void page_kit_init(void)
{
    etag_of(admin_asset_css, admin_asset_css_len, adm.css_etag);
    etag_of(admin_asset_js, admin_asset_js_len, adm.js_etag);
}

void page_kit_fini(void)
{
    registry_close(adm.reg);
    adm.reg = NULL;
    buf_free(&adm.out);
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
    nav_link(o, "/jobs", "Jobs", "j", strcmp(nav, "jobs") == 0);
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
        size_t base = href->len;
        buf_puts(href, "/sql");
        nav_link(o, href->p, "SQL console", "s", strcmp(nav, "sql") == 0);
        href->len = base;
        buf_puts(href, "/jobs");
        nav_link(o, href->p, "Jobs", NULL, strcmp(nav, "tenant-jobs") == 0);
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
             "<dt><kbd>g</kbd> <kbd>j</kbd></dt><dd>jobs</dd>"
             "<dt><kbd>g</kbd> <kbd>a</kbd></dt><dd>audit log</dd>"
             "<dt><kbd>g</kbd> <kbd>s</kbd></dt><dd>SQL console of this tenant</dd>"
             "<dt><kbd>j</kbd> <kbd>k</kbd></dt><dd>next / previous row</dd>"
             "<dt><kbd>Enter</kbd></dt><dd>open the selected row</dd>"
             "<dt><kbd>[</kbd> <kbd>]</kbd></dt><dd>previous / next page</dd>"
             "<dt><kbd>Ctrl</kbd> <kbd>Enter</kbd></dt><dd>run the query</dd>"
             "<dt><kbd>Esc</kbd></dt><dd>close this</dd></dl></div></div></body></html>\n");
}

/* ---- assets ---------------------------------------------------------------------------------- */

int send_asset(adm_req *a, const char *p, size_t n, const char *type, const char *etag)
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

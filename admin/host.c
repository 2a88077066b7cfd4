/*
 * host.c — the host page: workers and their state, requests per second, per-tenant
 * requests and errors. The numbers come from the host's status document (the same function
 * that answers status_path, reached through admin_env.status_json); the page's script polls
 * /api/status and draws the charts itself (SVG, no external asset).
 *
 * Must not: include fcgi/ headers (the host hands us the document).
 */
#include "core/first.h"
#include "admin/pages.h"

#include <string.h>

int api_status(adm_req *a)
{
    buf *o = a->out;
    buf_reset(o);
    if (adm.env.status_json == NULL)
        return send_json_error(a, 503, "the host status is not available");
    adm.env.status_json(adm.env.status_ctx, o);
    return send_doc(a, 200, "application/json", NULL);
}

int page_host(adm_req *a)
{
    buf *o = a->out;
    page_begin(a, "Host", "host", NULL);
    buf_puts(o, "<header class=\"page-head\"><h1>Host</h1><span class=\"count\" id=\"host-summary\">"
                "</span></header>"
                "<div class=\"cards\" id=\"host\" data-poll=\"/api/status\">"
                "<section class=\"card wide\"><h2>Requests per second</h2>"
                "<div class=\"chart\" id=\"chart-rps\" role=\"img\" aria-label=\"requests per "
                "second, last two minutes\"></div><p class=\"chart-note\" id=\"rps-now\"></p>"
                "</section>"
                "<section class=\"card\"><h2>Pool</h2><dl class=\"facts\" id=\"pool\"></dl>"
                "</section>"
                "<section class=\"card wide\"><h2>Tenants by requests</h2>"
                "<div class=\"chart\" id=\"chart-tenants\" role=\"img\" aria-label=\"requests "
                "and errors per tenant\"></div></section></div>"
                "<section class=\"block\"><h2>Workers</h2><div class=\"table-wrap\">"
                "<table class=\"grid\" id=\"workers\"><thead><tr><th>PID</th><th>Gen</th>"
                "<th>State</th><th class=\"num\">Requests</th><th>Current request</th>"
                "<th class=\"num\">Last status</th><th class=\"num\">Last ms</th></tr></thead>"
                "<tbody></tbody></table></div></section>"
                "<noscript><p class=\"muted\">The host page draws its figures with the panel's "
                "script; <a href=\"/api/status\">/api/status</a> has the same numbers as JSON."
                "</p></noscript>");
    page_end(a);
    return send_html(a, 200);
}

/*
 * console.c — the SQL console of one tenant: read-only, with a timeout and a row cap,
 * results as a table or exported as CSV or JSON.
 *
 * Read-only is the database's doing, not ours: nothing here looks at the SQL text for
 * keywords. The statement runs through db_query_capped (storage/readonly.c,
 * storage/sqlite_read.c), the storage layer's sandbox: SQLite on the tenant's file opened
 * read-only (store.c), one statement, refused unless SQLite says it writes nothing, under an
 * allow-list authorizer (SELECT, reads, a list of built-in functions, the PRAGMAs that read:
 * ATTACH, transactions, load_extension() and fts3_tokenizer() are refused); PostgreSQL on a
 * connection logged in as the tenant's own role (store.c), inside BEGIN READ ONLY with a
 * transaction-local statement_timeout, refused when that role could act outside the
 * database, rolled back afterwards whatever it did, and a statement that was given a
 * transaction id (it wrote something despite READ ONLY) refused with its rows dropped. The
 * timeout is admin.query_timeout; at most admin.row_cap rows are read. Every query is
 * written to the audit log before it runs, and its outcome after (audit.c).
 *
 * Must not: run the operator's SQL on a writable connection, or on another tenant's storage,
 * or other than through db_query_capped.
 */
#include "core/first.h"
#include "admin/pages.h"
#include "admin/store.h"
#include "core/clock.h"
#include "core/rc.h"
#include "tenancy/sandbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SQL_MAX 65536

typedef struct result {
    int ncols;
    const char **cols;
    const char ***rows;
    int nrows;
    bool truncated;
    int64_t elapsed_us;
    int rc;                       /* TN_OK, or why it failed */
    char err[1024];
} result;

static void run(adm_req *a, const tenant_rec *t, const char *sql, result *res)
{
    memset(res, 0, sizeof(*res));
    sandbox s;
    int64_t t0 = clock_mono_ns();
    int rc = sandbox_open(adm.env.tcfg, t, a->r->arena, &s, res->err, sizeof(res->err));
    if (rc != TN_OK) {
        res->rc = rc;
        return;
    }
    db_result *r = NULL;
    rc = sandbox_query(&s, sql, 0, NULL, adm.env.cfg->row_cap, adm.env.cfg->query_timeout_ms,
                       a->r->arena, &r, res->err, sizeof(res->err));
    if (rc == TN_OK) {
        res->ncols = r->ncols;
        res->cols = r->cols;
        res->nrows = r->nrows;
        res->rows = r->rows;
        res->truncated = r->truncated;
    } else if (rc == TN_TIMEOUT) {
        res->rc = tn_errf(res->err, sizeof(res->err), rc, "%s",
                          s.sqlite ? "the query ran past admin.query_timeout"
                                   : "the query ran past admin.query_timeout (statement_timeout)");
    } else {
        res->rc = rc;   /* sandbox_query said why in res->err */
    }
    /* The operator's own login as the tenant's role: one query, then gone. */
    sandbox_close(&s, false);
    res->elapsed_us = (clock_mono_ns() - t0) / 1000;
}

/* ---- exports ------------------------------------------------------------------------------ */

static int send_csv(adm_req *a, const char *slug, const result *res)
{
    buf *o = a->out;
    buf_reset(o);
    for (int i = 0; i < res->ncols; i++) {
        if (i)
            buf_putc(o, ',');
        buf_csv(o, res->cols[i]);
    }
    buf_puts(o, "\r\n");
    for (int r = 0; r < res->nrows; r++) {
        for (int i = 0; i < res->ncols; i++) {
            if (i)
                buf_putc(o, ',');
            if (res->rows[r][i] != NULL)
                buf_csv(o, res->rows[r][i]);
        }
        buf_puts(o, "\r\n");
    }
    char disp[128];
    snprintf(disp, sizeof(disp), "attachment; filename=\"%s-query.csv\"", slug);
    return send_doc(a, 200, "text/csv; charset=utf-8", disp);
}

static int send_json(adm_req *a, const char *slug, const result *res)
{
    buf *o = a->out;
    buf_reset(o);
    buf_puts(o, "{\"tenant\":");
    buf_json_str(o, slug);
    buf_puts(o, ",\"columns\":[");
    for (int i = 0; i < res->ncols; i++) {
        if (i)
            buf_putc(o, ',');
        buf_json_str(o, res->cols[i]);
    }
    buf_puts(o, "],\"rows\":[");
    for (int r = 0; r < res->nrows; r++) {
        buf_puts(o, r ? ",[" : "[");
        for (int i = 0; i < res->ncols; i++) {
            if (i)
                buf_putc(o, ',');
            buf_json_str(o, res->rows[r][i]);   /* NULL -> null */
        }
        buf_putc(o, ']');
    }
    buf_puts(o, "],\"truncated\":");
    buf_puts(o, res->truncated ? "true" : "false");
    buf_puts(o, "}\n");
    char disp[128];
    snprintf(disp, sizeof(disp), "attachment; filename=\"%s-query.json\"", slug);
    return send_doc(a, 200, "application/json", disp);
}

/* ---- the page ----------------------------------------------------------------------------- */

static void put_result(adm_req *a, const result *res)
{
    buf *o = a->out;
    if (res->rc != TN_OK) {
        buf_puts(o, "<div class=\"result-error\" id=\"result-error\" role=\"alert\"><b>");
        buf_puts(o, res->rc == TN_DENIED    ? "Refused"
                    : res->rc == TN_TIMEOUT ? "Timed out"
                                            : "Error");
        buf_puts(o, "</b> ");
        buf_html(o, res->err);
        buf_puts(o, "</div>");
        return;
    }
    buf_printf(o, "<p class=\"result-meta\" id=\"result-meta\">%d row%s%s · %.1f ms</p>",
               res->nrows, res->nrows == 1 ? "" : "s",
               res->truncated ? " (stopped at admin.row_cap)" : "",
               (double)res->elapsed_us / 1000.0);
    if (res->ncols == 0)
        return;
    buf_puts(o, "<div class=\"table-wrap\"><table class=\"grid data\" id=\"result\"><thead><tr>");
    for (int i = 0; i < res->ncols; i++) {
        buf_puts(o, "<th>");
        buf_html(o, res->cols[i]);
        buf_puts(o, "</th>");
    }
    buf_puts(o, "</tr></thead><tbody>");
    for (int r = 0; r < res->nrows; r++) {
        buf_puts(o, "<tr>");
        for (int i = 0; i < res->ncols; i++) {
            const char *v = res->rows[r][i];
            buf_puts(o, "<td>");
            if (v == NULL) {
                buf_puts(o, "<span class=\"null\">NULL</span>");
            } else if (strlen(v) > 400) {
                buf_htmln(o, v, utf8_valid_prefix(v, 400));
                buf_puts(o, "<span class=\"more\">…</span>");
            } else {
                buf_html(o, v);
            }
            buf_puts(o, "</td>");
        }
        buf_puts(o, "</tr>");
    }
    buf_puts(o, "</tbody></table></div>");
}

int page_console(adm_req *a, const char *slug)
{
    adm_tenant t;
    int rc = adm_tenant_get(a, slug, &t);
    if (rc == TN_NOTFOUND)
        return send_message(a, 404, "No such tenant", "There is no tenant with this slug.");
    if (rc != TN_OK) {
        adm_registry_failed(a);
        return send_message(a, 503, "Registry error", "The tenant could not be read.");
    }
    const char *sql = a->post ? adm_form(a, "sql") : NULL;
    const char *format = a->post ? adm_form(a, "format") : NULL;
    if (format == NULL)
        format = "html";
    result *res = NULL;
    audit_sql q;
    char aerr[512];
    if (sql != NULL && strlen(sql) > SQL_MAX) {
        /* Not run, and still logged (by its length, hash and first KiB): what an operator
         * tried is on record even when it was too long to try. */
        if (audit_sql_start(a, slug, sql, &q, aerr, sizeof(aerr)) == TN_OK)
            audit_sql_end(a, slug, &q, "refused", "longer than 64 KiB: not run");
        free(t.rec);
        return send_message(a, 413, "Too long", "A query is at most 64 KiB.");
    }
    if (sql != NULL && !db_text_is_blank(sql)) {
        res = tn_alloc(a->r, sizeof(*res));
        if (res == NULL) {
            free(t.rec);
            return send_message(a, 500, "Error", "out of memory");
        }
        /* The entry is written before the statement runs, so that one which never finishes
         * (it takes the worker down, or request_timeout does) is still on record; a
         * statement that cannot be put on record does not run. */
        if (audit_sql_start(a, slug, sql, &q, aerr, sizeof(aerr)) != TN_OK) {
            free(t.rec);
            return send_message(a, 503, "Not run", "The audit log cannot be written, so the "
                                                   "query was not run.");
        }
        run(a, t.rec, sql, res);
        char outcome[1200];
        if (res->rc == TN_OK)
            snprintf(outcome, sizeof(outcome), "%d row%s%s, %.1f ms", res->nrows,
                     res->nrows == 1 ? "" : "s",
                     res->truncated ? " (stopped at admin.row_cap)" : "",
                     (double)res->elapsed_us / 1000.0);
        else
            snprintf(outcome, sizeof(outcome), "%s (%.1f ms)", res->err,
                     (double)res->elapsed_us / 1000.0);
        audit_sql_end(a, slug, &q,
                      res->rc == TN_OK        ? "ok"
                      : res->rc == TN_DENIED  ? "refused"
                      : res->rc == TN_TIMEOUT ? "timeout"
                                              : "error",
                      outcome);
        if (res->rc == TN_OK && strcmp(format, "csv") == 0) {
            free(t.rec);
            return send_csv(a, slug, res);
        }
        if (res->rc == TN_OK && strcmp(format, "json") == 0) {
            free(t.rec);
            return send_json(a, slug, res);
        }
    }
    buf *o = a->out;
    char title[120];
    snprintf(title, sizeof(title), "SQL · %s", slug);
    page_begin(a, title, "sql", slug);
    buf_puts(o, "<header class=\"page-head\"><h1><a class=\"crumb\" href=\"/t/");
    buf_html(o, slug);
    buf_puts(o, "\">");
    buf_html(o, slug);
    buf_puts(o, "</a> <span class=\"sep\">/</span> SQL console</h1><span class=\"count\">"
                "read-only · ");
    buf_printf(o, "%lld ms timeout · %d rows at most",
               (long long)adm.env.cfg->query_timeout_ms, adm.env.cfg->row_cap);
    buf_puts(o, "</span></header><form method=\"post\" action=\"/t/");
    buf_html(o, slug);
    buf_puts(o, "/sql\" class=\"console\" id=\"console\">");
    put_csrf(a);
    buf_puts(o, "<textarea name=\"sql\" id=\"sql\" rows=\"8\" spellcheck=\"false\" "
                "aria-label=\"SQL\" placeholder=\"SELECT * FROM …\">");
    buf_html(o, sql ? sql : "");
    buf_puts(o, "</textarea><div class=\"console-bar\">"
                "<button type=\"submit\" class=\"primary\" id=\"run\" name=\"format\" "
                "value=\"html\">Run <kbd>Ctrl Enter</kbd></button>"
                "<button type=\"submit\" name=\"format\" value=\"csv\" id=\"export-csv\">"
                "Export CSV</button><button type=\"submit\" name=\"format\" value=\"json\" "
                "id=\"export-json\">Export JSON</button></div></form>");
    if (res != NULL)
        put_result(a, res);
    page_end(a);
    free(t.rec);
    return send_html(a, res != NULL && res->rc != TN_OK ? (res->rc == TN_DENIED ? 403 : 400)
                                                         : 200);
}

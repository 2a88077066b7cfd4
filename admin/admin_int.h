/*
 * admin_int.h — what the files of admin/ share (the .c files of admin/ only).
 *
 * Shape: http.c owns admin_handle(): the per-request context (adm_req), the router, the
 * page frame and the response headers every answer carries. auth.c owns logins, sessions,
 * CSRF and throttling (sessions.c their tables); fleet.c the fleet and tenant pages; schema.c the schema explorer and
 * the table browser; console.c the SQL console; actions.c the actions; audit.c the audit
 * log; host.c the host page; store.c opening one tenant's storage. Pages are built in one buffer
 * (a->out) and sent whole, so an error found half-way can still answer with its own status.
 *
 * Must not: be included outside admin/; write anything to a page that did not pass
 * buf_html/buf_json_str/buf_csv (or is a constant of ours); put an identifier into SQL
 * except through db_quote_ident.
 */
#ifndef TN_ADMIN_INT_H
#define TN_ADMIN_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "admin/admin.h"
#include "core/buf.h"
#include "core/sha256.h"
#include "storage/db.h"
#include "storage/target.h"
#include "tenancy/registry.h"
#include "tenancy/request.h"
#include "tenancy/tenant.h"

/* Per-process state (one worker). */
typedef struct admin_state {
    admin_env env;
    bool ready;
    registry *reg;
    int64_t reg_retry_ms;
    buf out;                      /* the page or document being built */
    char css_etag[24], js_etag[24];
} admin_state;

extern admin_state adm;

typedef struct adm_req {
    tn_request *r;
    const char *path;             /* tn_path */
    const char *client;           /* REMOTE_ADDR ("" when absent) */
    bool post;
    bool https;
    const char *body;             /* POST form body (NUL-terminated) */
    size_t body_len;
    /* the session, when there is one */
    const char *user;
    const char *csrf;
    buf *out;
    const char *flash;            /* a message shown at the top of the next page */
} adm_req;

/* ---- http.c: responses and the page frame ------------------------------------------------ */

/* The registry connection (opened on first use; NULL and an error page already sent when it
 * cannot be reached: callers return at once). */
registry *adm_registry(adm_req *a);
/* After a registry error that may have broken the connection. */
void adm_registry_failed(adm_req *a);

/* Form field of a POST body, or query argument of a GET; NULL when absent. */
const char *adm_form(adm_req *a, const char *name);
const char *adm_arg(adm_req *a, const char *name);

/* The frame of every page after login: head, left navigation, main. `nav`: "fleet",
 * "host", "audit", "new" or a tenant slug (shows its sub-navigation). */
void page_begin(adm_req *a, const char *title, const char *nav, const char *tenant);
void page_end(adm_req *a);

/* Send a->out as a page (text/html) or a document with the given type. */
int send_html(adm_req *a, int status);
int send_doc(adm_req *a, int status, const char *type, const char *disposition);
/* A page with a title and one message (escaped). */
int send_message(adm_req *a, int status, const char *title, const char *msg);
/* 303 See Other to a path of the panel. */
int send_redirect(adm_req *a, const char *location);
/* {"error": msg} with the status (for /api/). */
int send_json_error(adm_req *a, int status, const char *msg);

/* Hidden CSRF field for a form. */
void put_csrf(adm_req *a);

/* Percent-encode s for a URL path segment or query value. */
void put_url(buf *b, const char *s);

/* ---- auth.c -------------------------------------------------------------------------------- */

/* Look up the session of the request's cookie: sets a->user and a->csrf. TN_OK (a session),
 * TN_NOTFOUND (none or expired), or a registry error. */
int auth_session(adm_req *a);
/* True when the request carries the session's CSRF token (form field or header) and, when
 * it says where it comes from (Origin), comes from the panel itself. */
bool auth_csrf_ok(adm_req *a);
int auth_login_page(adm_req *a, int status, const char *msg);
int auth_login_post(adm_req *a);
int auth_logout(adm_req *a);
/* Random bytes as base64url text (43 characters for 32 bytes) into out (>= 2n). */
int auth_random_token(char *out, size_t outlen, size_t nbytes);

/* ---- SHA-256: core/sha256.h (session ids are stored by their hash) ------------------------- */

/* ---- the pages ----------------------------------------------------------------------------- */
int page_fleet(adm_req *a);
int api_tenants(adm_req *a);
int page_tenant(adm_req *a, const char *slug);
int page_table(adm_req *a, const char *slug, const char *table);
int page_row(adm_req *a, const char *slug, const char *table);
int page_console(adm_req *a, const char *slug);
int page_host(adm_req *a);
int api_status(adm_req *a);
int page_audit(adm_req *a);
int page_new(adm_req *a);
int page_confirm(adm_req *a, const char *slug);
int post_action(adm_req *a, const char *slug);

/* ---- audit.c: the audit log ------------------------------------------------------------------ */

/* Append one JSON line to the audit log: who (a->user), when, from where, what, which
 * tenant, the outcome. A failed write is logged to the error log. */
void audit(adm_req *a, const char *action, const char *tenant, const char *detail,
           const char *result);

/* A console statement's entry: a start line before it runs, a completion after (audit.c). */
typedef struct audit_sql {
    char id[ADMIN_AUDIT_ID_SIZE];
} audit_sql;

/* Before the statement runs: a new entry id, handed to the host (admin_env.audit_pending) so
 * that its supervisor can close the entry should the worker die, then the start line with
 * the text's length, SHA-256 and the text. TN_OK, or TN_IO / TN_NOMEM with err set when
 * the line could not be written: the statement must not run then. */
int audit_sql_start(adm_req *a, const char *tenant, const char *sql, audit_sql *q, char *err,
                    size_t errlen);
/* After it: the completion line (result "ok", "error", "refused" or "timeout"; detail: the
 * rows and the time, or the error), then the host forgets the pending id. */
void audit_sql_end(adm_req *a, const char *tenant, const audit_sql *q, const char *result,
                   const char *detail);

/* ---- fleet.c: one tenant from the registry ------------------------------------------------- */

typedef struct adm_tenant {
    tenant_rec *rec;              /* free() */
    char migration_version[128];
    char last_error[1024];
    int64_t deleted_at;
} adm_tenant;

/* TN_OK, TN_NOTFOUND, or a registry error (no page sent). */
int adm_tenant_get(adm_req *a, const char *slug, adm_tenant *out);

#endif

/*
 * pages.h — the panel's pages and what they share (the .c files of admin/ only): logins and
 * sessions (auth.c; sessions.c keeps their tables), the fleet and one tenant (fleet.c), the
 * schema explorer (schema.c), the SQL console (console.c), the actions (actions.c), the jobs
 * (jobs.c), the audit log (audit.c), the host page (host.c). router.c calls the page functions; the pages build on
 * the page kit (page.h) and never call the router.
 *
 * Must not: be included outside admin/; put an identifier into SQL except through
 * db_quote_ident.
 */
#ifndef TN_ADMIN_PAGES_H
#define TN_ADMIN_PAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "admin/page.h"
#include "core/sha256.h"
#include "storage/db.h"
#include "storage/target.h"
#include "tenancy/handler.h"
#include "tenancy/ops.h"
#include "tenancy/registry.h"
#include "tenancy/tenant.h"

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

/* ---- jobs.c: the job queue (every tenant's, or one tenant's: slug not NULL) ---------------- */
int page_jobs(adm_req *a, const char *slug);
/* One job by its id (text from the URL); with slug, only a job of that tenant (404 else). */
int page_job(adm_req *a, const char *slug, const char *id);
/* Retry or cancel (form: id, op), audited; slug as page_job's. */
int post_job(adm_req *a, const char *slug);
/* A tenant's job counts per state, each a link to its jobs page in that state. */
void jobs_counts_html(adm_req *a, const char *slug);
/* ---- actions.c: the panel's own jobs (migrate, move), run by a job worker ------------------ */

/* The environment of the tenant operations (tenancy/ops.h) on the panel's registry
 * connection. */
void adm_ops_env(ops_env *e);

/* admin_handler.job: run the `tenancy` command of a migrate or move job, its progress to the
 * job's row, its output kept in state_dir/admin-jobs/ID.out, its outcome audited. */
int actions_job(const tn_handler_job *j, char *err, size_t errlen);
/* That output (NULL: none kept), in request memory. */
const char *actions_job_output(adm_req *a, int64_t id);

/* The line for a job's outcome, written by the job worker (no request): who started it and
 * from where come from the job. */
void audit_job(const char *user, const char *client, const char *req, int64_t job_id,
               const char *action, const char *tenant, const char *detail, const char *result);

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

/*
 * config.c — the admin.* option table and its parsed forms (see config.h).
 * Must not: open the registry, the password file or any other file.
 */
#include "core/first.h"
#include "admin/config.h"
#include "core/rc.h"
#include "tenancy/operators.h"
#include "tenancy/tenant.h"

#include <stdio.h>
#include <string.h>

#ifndef TN_BINDIR
#define TN_BINDIR "/usr/local/bin"
#endif

#define OFF(f) offsetof(admin_config, f)

const conf_opt admin_config_table[] = {
    {"admin.host", CONF_STR, OFF(host), "", 0, 0, NULL, 0,
     "host name that serves the admin panel (empty: no panel)"},
    {"admin.password_file", CONF_STR, OFF(password_file_text), NULL, 0, 0, NULL, 0,
     "file of user:hash lines written by `tenancy admin passwd` (default: state_dir/admin.passwd)"},
    {"admin.session_ttl", CONF_DURATION, OFF(session_ttl_ms), "8h", 60000, 2592000000LL, NULL, 0,
     "how long a panel login lasts"},
    {"admin.query_timeout", CONF_DURATION, OFF(query_timeout_ms), "5s", 10, 3600000, NULL, 0,
     "longest a SQL console query or a table page may run"},
    {"admin.row_cap", CONF_INT, OFF(row_cap), "1000", 1, 1000000, NULL, 0,
     "most rows a SQL console query returns (shown and exported)"},
    {"admin.page_size", CONF_INT, OFF(page_size), "50", 5, 1000, NULL, 0,
     "rows per page in the fleet and the table browser"},
    {"admin.audit_log", CONF_STR, OFF(audit_log_text), NULL, 0, 0, NULL, 0,
     "file of JSON lines: panel actions, logins, console queries (logged before they run) "
     "(default: state_dir/admin-audit.log)"},
    {"admin.allow", CONF_STR, OFF(allow), "127.0.0.1, ::1", 0, 0, NULL, 0,
     "client addresses (REMOTE_ADDR) that may reach the panel"},
    {"admin.pg_console_user", CONF_STR, OFF(pg_console_user), "", 0, 0, NULL, 0,
     "removed: the SQL console logs in as the tenant's own role (must be empty)"},
    {"admin.cli", CONF_STR, OFF(cli), TN_BINDIR "/tenancy", 0, 0, NULL, 0,
     "the tenancy command the panel runs for migrate and move"},
    {"admin.job_timeout", CONF_DURATION, OFF(job_timeout_ms), "1h", 1000, 86400000, NULL, 0,
     "longest the panel's migrate or move may run (a job: its job worker stops it then)"},
    {NULL, 0, 0, NULL, 0, 0, NULL, 0, NULL},
};

int admin_config_finish(admin_config *c, const tenancy_config *tc, arena *a, char *err,
                        size_t errlen)
{
    char msg[256];
    c->enabled = false;
    c->host_norm = "";
    c->tenancy = tc;
    if (c->host != NULL && c->host[0] != '\0') {
        char norm[256];
        if (tenant_host_normalise(c->host, norm, sizeof(norm)) == 0) {
            return tn_errf(err, errlen, TN_INVALID, "admin.host: '%s' is not a host name",
                           c->host);
        }
        c->host_norm = arena_strdup(a, norm);
        c->enabled = true;
    }
    const char *sd = tc->state_dir ? tc->state_dir : "";
    c->password_file = operators_file(c->password_file_text, sd, a);
    c->audit_log = c->audit_log_text && c->audit_log_text[0]
                       ? c->audit_log_text
                       : arena_sprintf(a, "%s/admin-audit.log", sd);
    if (c->password_file == NULL || c->audit_log == NULL || c->host_norm == NULL) {
        return tn_errf(err, errlen, TN_NOMEM, "out of memory");
    }
    if (c->pg_console_user[0] != '\0') {
        /* A shared console role could read every tenant it was granted; the console now
         * logs in as each tenant's own role. Refused rather than ignored, so that nobody
         * believes a setting is in force that is not. */
        return tn_errf(err, errlen, TN_INVALID,
                       "admin.pg_console_user was removed: the SQL console logs in as the "
                       "tenant's own PostgreSQL role (tenancyd.conf(5), placement.NAME.login); "
                       "delete the line");
    }
    if (netaddr_list_parse(c->allow, a, &c->allowed, msg, sizeof(msg)) != TN_OK) {
        return tn_errf(err, errlen, TN_INVALID, "admin.allow: %s", msg);
    }
    return TN_OK;
}

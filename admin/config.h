/*
 * config.h — the admin panel's options of tenancyd.conf (admin.*): their own table, parsed
 * into the same generation as the host's and the tenancy chain's options, and the parsed
 * forms the panel uses.
 *
 * Must not: open anything (this runs in `tenancyd -t`, on reload and in the `tenancy`
 * command); the panel reads the files it names when it needs them.
 */
#ifndef TN_ADMIN_CONFIG_H
#define TN_ADMIN_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/conf.h"
#include "core/netaddr.h"
#include "tenancy/config.h"

typedef struct admin_config {
    /* as written */
    const char *host;              /* "" : the panel is off */
    const char *password_file_text;
    int64_t session_ttl_ms;
    int64_t query_timeout_ms;
    int row_cap;
    int page_size;
    const char *audit_log_text;
    const char *allow;
    const char *pg_console_user;
    const char *cli;               /* the `tenancy` command, for migrate and move */
    int64_t job_timeout_ms;        /* a migrate or move job's time limit */

    /* parsed (admin_config_finish) */
    bool enabled;
    const char *host_norm;         /* normalised admin.host */
    const char *password_file;     /* admin.password_file, or <state_dir>/admin.passwd
                                      (tenancy/operators.h) */
    const char *audit_log;         /* admin.audit_log, or <state_dir>/admin-audit.log */
    netaddr_list *allowed;
    const tenancy_config *tenancy; /* the options it was finished with (they outlive it) */
} admin_config;

extern const conf_opt admin_config_table[];

/* Parse the text options; defaults that depend on the tenancy options (state_dir) are
 * resolved here, and c keeps tc (the panel reads the registry and the placements from it).
 * TN_OK or TN_INVALID with a message naming the option. */
int admin_config_finish(admin_config *c, const tenancy_config *tc, arena *a, char *err,
                        size_t errlen);

#endif

/*
 * conf.h — what the `tenancy` command reads of tenancyd.conf.
 *
 * The command links the tenancy options (tenancy/config.h) and declares the few host and
 * panel options it needs itself (`user`, `group`, `admin.password_file`), so it includes
 * nothing of fcgi/ or admin/. Every other key of the file belongs to a module the command
 * does not link and is passed over unread: `tenancyd -t` is the full check of the file.
 * tests/unit/cli/check_cli.c fails when a row declared here drifts from the module's own row
 * (key, type, default).
 *
 * Must not: open anything but the configuration file.
 */
#ifndef TN_CLI_CONF_H
#define TN_CLI_CONF_H

#include "core/arena.h"
#include "core/conf.h"
#include "tenancy/config.h"

typedef struct cli_config {
    arena *arena;                  /* owns every string below */
    const char *user;              /* `user`: the workers' user (fcgi/config.c's row) */
    const char *group;             /* `group` */
    const char *password_file_text;   /* `admin.password_file` (admin/config.c's row) */
    tenancy_config tenancy;

    /* parsed */
    const char *password_file;     /* admin.password_file, or <state_dir>/admin.passwd */
} cli_config;

/* The rows the command declares itself, {NULL} ended. */
extern const conf_opt cli_config_table[];

/* Read the file: the tenancy options, cli_config_table, placement.NAME.KEY lines; other
 * keys are skipped. A new configuration (owning its arena), or NULL with err filled. */
cli_config *cli_config_load(const char *path, conf_error *err);

/* NULL is accepted. */
void cli_config_free(cli_config *cfg);

#endif

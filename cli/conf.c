/*
 * conf.c — the command's reading of tenancyd.conf (see conf.h).
 * Owns: the rows the command declares for itself and the rule for keys of other modules.
 * Must not: validate what belongs to the host or the panel (tenancyd -t does).
 */
#include "core/first.h"
#include "cli/conf.h"
#include "core/rc.h"
#include "tenancy/operators.h"

#include <stdio.h>
#include <string.h>

#define OFF(f) offsetof(cli_config, f)

/* key, type, offset, default, min, max, enum names, flags, help: the same key, type and
 * default as the module that owns the option (check_cli.c compares them). */
const conf_opt cli_config_table[] = {
    {"user", CONF_STR, OFF(user), NULL, 0, 0, NULL, CONF_RESTART,
     "user the workers run as (when started as root)"},
    {"group", CONF_STR, OFF(group), NULL, 0, 0, NULL, CONF_RESTART,
     "group the workers run as (default: the user's group)"},
    {"admin.password_file", CONF_STR, OFF(password_file_text), NULL, 0, 0, NULL, 0,
     "file of user:hash lines written by `tenancy admin passwd` (default: state_dir/admin.passwd)"},
    {NULL, 0, 0, NULL, 0, 0, NULL, 0, NULL},
};

/* placement.NAME.KEY lines are the tenancy options'; any other key the two tables do not
 * have belongs to a module the command does not link (the host's pm.*, the panel's
 * admin.*): skipped, not refused. */
static int other_key(void *obj, const char *key, const char *value, arena *a, char *err,
                     size_t errlen)
{
    int rc = tenancy_config_placement(&((cli_config *)obj)->tenancy, key, value, a, err,
                                      errlen);
    return rc == TN_NOTFOUND ? TN_OK : rc;
}

static int fail(conf_error *err, const char *path, const char *msg)
{
    snprintf(err->file, sizeof(err->file), "%s", path);
    err->line = 0;
    snprintf(err->msg, sizeof(err->msg), "%s", msg);
    return TN_INVALID;
}

cli_config *cli_config_load(const char *path, conf_error *err)
{
    arena *a = arena_create(8192);
    if (a == NULL) {
        fail(err, path, "out of memory");
        return NULL;
    }
    cli_config *c = arena_calloc(a, sizeof(*c));
    if (c == NULL) {
        fail(err, path, "out of memory");
        goto fail;
    }
    c->arena = a;
    conf_target targets[] = {{cli_config_table, c}, {tenancy_config_table, &c->tenancy}};
    if (conf_load_targets(targets, 2, path, a, other_key, err) != TN_OK)
        goto fail;
    char msg[512];
    if (tenancy_config_finish(&c->tenancy, a, msg, sizeof(msg)) != TN_OK) {
        fail(err, path, msg);
        goto fail;
    }
    c->password_file = operators_file(c->password_file_text, c->tenancy.state_dir, a);
    if (c->password_file == NULL) {
        fail(err, path, "out of memory");
        goto fail;
    }
    return c;
fail:
    arena_destroy(a);
    return NULL;
}

void cli_config_free(cli_config *cfg)
{
    if (cfg != NULL)
        arena_destroy(cfg->arena);
}

/*
 * conf.c — the command's reading of tenancyd.conf (see conf.h).
 * Owns: the rows the command declares for itself and the rule for keys of other modules.
 * Must not: validate what belongs to the host or the panel (tenancyd -t does).
 */
#include "core/first.h"
#include "cli/conf.h"
#include "core/buf.h"
#include "core/rc.h"
#include "tenancy/operators.h"

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

cli_config *cli_config_load(const char *path, conf_error *err)
{
    cli_config *c = NULL;
    arena *a = arena_create(8192);
    if (a == NULL || (c = arena_calloc(a, sizeof(*c))) == NULL) {
        tn_errf(err->msg, sizeof(err->msg), TN_NOMEM, "out of memory");
        goto whole_file;
    }
    c->arena = a;
    conf_target targets[] = {{cli_config_table, c}, {tenancy_config_table, &c->tenancy}};
    if (conf_load_targets(targets, 2, path, a, other_key, err) != TN_OK)
        goto fail;
    if (tenancy_config_finish(&c->tenancy, a, err->msg, sizeof(err->msg)) != TN_OK)
        goto whole_file;
    c->password_file = operators_file(c->password_file_text, c->tenancy.state_dir, a);
    if (c->password_file == NULL) {
        tn_errf(err->msg, sizeof(err->msg), TN_NOMEM, "out of memory");
        goto whole_file;
    }
    return c;
whole_file:   /* the message is about the file as a whole, not one of its lines */
    str_copy(err->file, sizeof(err->file), path);
    err->line = 0;
fail:
    arena_destroy(a);
    return NULL;
}

void cli_config_free(cli_config *cfg)
{
    if (cfg != NULL)
        arena_destroy(cfg->arena);
}

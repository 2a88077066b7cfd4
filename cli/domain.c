/*
 * domain.c — the `tenancy domain ...` and `tenancy settings ...` commands: a tenant's
 * domains and its settings, one at a time.
 *
 * Owns: turning their arguments into registry calls and printing the result (cli_int.h).
 * Must not: check what the registry checks (host names, keys, value sizes), or print to
 * stdout before the change succeeded.
 */
#include "core/first.h"
#include "cli/cli_int.h"
#include "core/rc.h"
#include "tenancy/lookup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- domains ---------------------------------------------------------------------------------- */

int cli_domain_add(cli *c, const cli_args *a)
{
    const char *slug = a->pos[0], *domain = a->pos[1];
    bool primary = cli_opt(a, "--primary") != NULL;
    char err[1024];
    ops_env e;
    cli_ops_env(c, &e);
    int rc = ops_domain_add(&e, slug, domain, primary, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    if (c->json) {
        cli_json_changed(c, slug);
    } else {
        char norm[256];
        if (tenant_host_normalise(domain, norm, sizeof(norm)) == 0)
            snprintf(norm, sizeof(norm), "%s", domain);
        printf("domain '%s' added to '%s'%s\n", norm, slug, primary ? " as its primary" : "");
    }
    return 0;
}

int cli_domain_remove(cli *c, const cli_args *a)
{
    const char *domain = a->pos[0];
    char err[1024];
    ops_env e;
    cli_ops_env(c, &e);
    int rc = ops_domain_remove(&e, NULL, domain, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    char norm[256];
    if (tenant_host_normalise(domain, norm, sizeof(norm)) == 0)
        snprintf(norm, sizeof(norm), "%s", domain);
    if (c->json) {
        buf_puts(&c->out, "{\"ok\":true,\"removed\":");
        buf_json_str(&c->out, norm);
        buf_putc(&c->out, '}');
    } else {
        printf("domain '%s' removed\n", norm);
    }
    return 0;
}

/* ---- settings --------------------------------------------------------------------------------- */

/* Set `key` to value, or remove it (value NULL). */
static int settings_change(cli *c, const char *slug, const char *key, const char *value)
{
    char err[1024];
    ops_env e;
    cli_ops_env(c, &e);
    int rc = ops_setting_set(&e, slug, key, value, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    if (c->json) {
        cli_json_changed(c, slug);
        return 0;
    }
    printf("tenant '%s': ", slug);
    cli_put_text(stdout, key);
    if (value == NULL) {
        fputs(" removed\n", stdout);
    } else {
        fputs(" = ", stdout);
        cli_put_text(stdout, value);
        fputc('\n', stdout);
    }
    return 0;
}

int cli_settings_set(cli *c, const cli_args *a)
{
    return settings_change(c, a->pos[0], a->pos[1], a->pos[2]);
}

int cli_settings_unset(cli *c, const cli_args *a)
{
    return settings_change(c, a->pos[0], a->pos[1], NULL);
}

int cli_settings_get(cli *c, const cli_args *a)
{
    const char *slug = a->pos[0], *key = a->npos > 1 ? a->pos[1] : NULL;
    tenant_rec *t = NULL;
    int rc = registry_fetch(c->reg, LK_SLUG, slug, &t);
    if (rc == TN_NOTFOUND)
        return cli_fail(c, rc, "no tenant '%s'", slug);
    if (rc != TN_OK)
        return cli_fail(c, rc, "cannot read tenant '%s': %s", slug, tn_rc_str(rc));
    int status = 0;
    if (key != NULL) {
        const char *v = tenant_setting_get(t, key);
        if (v == NULL) {
            status = cli_fail(c, TN_NOTFOUND, "tenant '%s' has no setting '%s'", slug, key);
        } else if (c->json) {
            buf_puts(&c->out, "{\"slug\":");
            buf_json_str(&c->out, slug);
            buf_puts(&c->out, ",\"key\":");
            buf_json_str(&c->out, key);
            buf_puts(&c->out, ",\"value\":");
            buf_json_str(&c->out, v);
            buf_putc(&c->out, '}');
        } else if (c->tty) {
            cli_put_text(stdout, v);
            fputc('\n', stdout);
        } else {
            /* The value exactly (for $(tenancy settings get ...)), then a newline. */
            fputs(v, stdout);
            fputc('\n', stdout);
        }
    } else if (c->json) {
        buf_puts(&c->out, "{\"slug\":");
        buf_json_str(&c->out, slug);
        buf_puts(&c->out, ",\"settings\":{");
        for (int i = 0; i < t->nsettings; i++) {
            if (i)
                buf_putc(&c->out, ',');
            buf_json_str(&c->out, t->settings[i].key);
            buf_putc(&c->out, ':');
            buf_json_str(&c->out, t->settings[i].value);
        }
        buf_puts(&c->out, "}}");
    } else {
        for (int i = 0; i < t->nsettings; i++) {
            cli_put_text(stdout, t->settings[i].key);
            fputc('=', stdout);
            cli_put_text(stdout, t->settings[i].value);
            fputc('\n', stdout);
        }
    }
    free(t);
    return status;
}

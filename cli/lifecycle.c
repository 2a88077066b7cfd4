/*
 * lifecycle.c — `tenancy tenant restore`, `tenancy purge` and `tenancy check`: their
 * arguments and their output; the work is ops_restore (tenancy/ops_tenant.c), ops_purge and
 * ops_check (tenancy/ops_lifecycle.c, which says how a purge is ordered and what check
 * reads). `tenant delete` is in cli/tenant.c.
 *
 * Output: purge prints each tenant purged (stdout) or not (stderr) as it happens; check one
 * line per problem; with --json one document with the lists.
 */
#include "core/first.h"
#include "cli/cli_int.h"
#include "core/rc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- restore ---------------------------------------------------------------------------------- */

int cli_tenant_restore(cli *c, const cli_args *a)
{
    const char *slug = a->pos[0];
    char err[1024];
    ops_env e;
    cli_ops_env(c, &e);
    int rc = ops_restore(&e, slug, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    if (c->json)
        cli_json_changed(c, slug);
    else
        printf("tenant '%s' is restored (active): the host serves it again\n", slug);
    return 0;
}

/* ---- purge ------------------------------------------------------------------------------------ */

typedef struct purge_out {
    cli *c;
    buf done, bad;      /* JSON array items */
    int ndone, nbad;
} purge_out;

static void purged(void *ctx, const ops_purged *p)
{
    purge_out *o = ctx;
    if (p->error != NULL) {
        if (o->nbad++ > 0)
            buf_putc(&o->bad, ',');
        buf_puts(&o->bad, "{\"slug\":");
        buf_json_str(&o->bad, p->slug);
        buf_puts(&o->bad, ",\"error\":");
        buf_json_str(&o->bad, p->error);
        buf_putc(&o->bad, '}');
        fprintf(stderr, "tenancy: purge of '%s': %s\n", p->slug, p->error);
        return;
    }
    if (o->ndone++ > 0)
        buf_putc(&o->done, ',');
    buf_puts(&o->done, "{\"slug\":");
    buf_json_str(&o->done, p->slug);
    buf_puts(&o->done, ",\"placement\":");
    buf_json_str(&o->done, p->placement);
    buf_puts(&o->done, ",\"storage\":");
    buf_json_str(&o->done, p->storage);
    buf_putc(&o->done, '}');
    if (!o->c->json)
        printf("purged '%s': %s dropped, registry rows removed\n", p->slug, p->where);
}

int cli_purge(cli *c, const cli_args *a)
{
    bool expired = cli_opt(a, "--expired") != NULL, now = cli_opt(a, "--now") != NULL;
    if (a->npos == 0 && !expired)
        return cli_usage(c, "name the tenants to purge, or give --expired");
    if (now && a->npos == 0)
        return cli_usage(c, "--now purges the tenants named, not every deleted one");
    purge_out p = {.c = c, .done = BUF_INIT, .bad = BUF_INIT};
    ops_env e;
    cli_ops_env(c, &e);
    int ok = 0, failed = 0;
    int rc = ops_purge(&e, a->pos, a->npos, expired, now, purged, &p, &ok, &failed);
    int status = 0;
    if (c->json) {
        buf_printf(&c->out, "{\"ok\":%s,\"purged\":[", failed ? "false" : "true");
        if (p.done.len)
            buf_append(&c->out, p.done.p, p.done.len);
        buf_puts(&c->out, "],\"failed\":[");
        if (p.bad.len)
            buf_append(&c->out, p.bad.p, p.bad.len);
        buf_putc(&c->out, ']');
    } else if (ok == 0 && failed == 0) {
        printf("nothing to purge\n");
    }
    if (p.done.oom || p.bad.oom) {
        status = cli_fail(c, TN_NOMEM, "out of memory");
    } else if (failed > 0) {
        status = cli_fail(c, rc != TN_OK ? rc : TN_ERR, "%d of %d tenant%s not purged",
                          failed, failed + ok, failed + ok == 1 ? "" : "s");
        if (c->json) {
            buf_puts(&c->out, ",\"error\":");
            buf_json_str(&c->out, c->err);
            buf_puts(&c->out, ",\"code\":");
            buf_json_str(&c->out, c->code);
            c->keep_out = true;
        }
    }
    if (c->json)
        buf_putc(&c->out, '}');
    buf_free(&p.done);
    buf_free(&p.bad);
    return status;
}

/* ---- check ------------------------------------------------------------------------------------ */

typedef struct check_out {
    cli *c;
    buf items;
    int n;
} check_out;

static void problem(void *ctx, const ops_problem *p)
{
    check_out *o = ctx;
    if (o->n++ > 0)
        buf_putc(&o->items, ',');
    buf_puts(&o->items, "{\"kind\":");
    buf_json_str(&o->items, p->kind);
    buf_puts(&o->items, ",\"slug\":");
    buf_json_str(&o->items, p->slug);
    buf_puts(&o->items, ",\"placement\":");
    buf_json_str(&o->items, p->placement);
    buf_puts(&o->items, ",\"storage\":");
    buf_json_str(&o->items, p->storage);
    buf_puts(&o->items, ",\"detail\":");
    buf_json_str(&o->items, p->detail);
    buf_putc(&o->items, '}');
    if (!o->c->json) {
        printf("%-10s %-20s %-12s ", p->kind, p->slug ? p->slug : "-",
               p->placement ? p->placement : "-");
        cli_put_text(stdout, p->storage ? p->storage : "-");
        fputs("  ", stdout);
        cli_put_text(stdout, p->detail);
        fputc('\n', stdout);
    }
}

int cli_check(cli *c, const cli_args *a)
{
    check_out o = {.c = c, .items = BUF_INIT};
    ops_env e;
    cli_ops_env(c, &e);
    ops_checked r;
    char err[600];
    bool keep = cli_opt(a, "--keep-shared-login") != NULL;
    int rc = ops_check(&e, cli_opt(a, "--repair-roles") != NULL, keep, problem, &o, &r, err,
                       sizeof(err));
    if (rc != TN_OK) {
        buf_free(&o.items);
        return cli_fail(c, rc, "%s", err);
    }
    int status = 0;
    if (c->json) {
        buf_printf(&c->out, "{\"ok\":%s,\"tenants\":%lld,\"roles_repaired\":%d,\"problems\":[",
                   r.problems ? "false" : "true", (long long)r.tenants, r.repaired);
        if (o.items.len)
            buf_append(&c->out, o.items.p, o.items.len);
        buf_putc(&c->out, ']');
    } else if (r.problems == 0) {
        printf("consistent: %lld tenant%s, %d storage location%s checked\n",
               (long long)r.tenants, r.tenants == 1 ? "" : "s", r.places,
               r.places == 1 ? "" : "s");
    }
    if (!c->json && r.repaired > 0)
        printf("repaired the roles of %d tenant%s\n", r.repaired, r.repaired == 1 ? "" : "s");
    if (!c->json && keep)
        printf("the dsn's users stay members of the tenant roles of group placements: once "
               "tenancyd has reloaded, run tenancy check --repair-roles\n");
    if (o.items.oom) {
        status = cli_fail(c, TN_NOMEM, "out of memory");
    } else if (r.problems > 0) {
        status = cli_fail(c, TN_ERR, "%d problem%s found in %lld tenant%s", r.problems,
                          r.problems == 1 ? "" : "s", (long long)r.tenants,
                          r.tenants == 1 ? "" : "s");
        c->code = "inconsistent";
        if (c->json) {
            buf_puts(&c->out, ",\"error\":");
            buf_json_str(&c->out, c->err);
            buf_puts(&c->out, ",\"code\":\"inconsistent\"");
            c->keep_out = true;
        }
    }
    if (c->json)
        buf_putc(&c->out, '}');
    buf_free(&o.items);
    return status;
}

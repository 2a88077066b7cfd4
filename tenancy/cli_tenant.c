/*
 * cli_tenant.c — the `tenancy tenant ...` commands: create, list, show, the state changes
 * (suspend, resume, maintenance, delete) and set.
 *
 * Owns: turning their arguments into registry calls and printing the result, as a table or
 * `key: value` lines for a human, or one JSON value (cli_int.h). Must not: check what the
 * registry checks (slugs, domains, limits: its message is the one shown), or print to stdout
 * before the change succeeded.
 */
#include "core/first.h"
#include "tenancy/cli_int.h"
#include "core/rc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CREATE_DOMAINS 64
#define MAX_CREATE_SETTINGS 128

/* ---- create ----------------------------------------------------------------------------------- */

int cli_tenant_create(cli *c, const cli_args *a)
{
    const char *slug = a->pos[0];
    const char *name = cli_opt(a, "--name");
    const char *domains[MAX_CREATE_DOMAINS + 1];
    int nd = cli_opt_all(a, "--domain", domains, MAX_CREATE_DOMAINS + 1);
    if (nd > MAX_CREATE_DOMAINS)
        return cli_usage(c, "at most %d --domain options", MAX_CREATE_DOMAINS);
    registry_new n = {.slug = slug, .name = name ? name : slug, .state = TENANT_ACTIVE,
                      .domains = domains, .ndomains = nd};
    const char *st = cli_opt(a, "--state");
    if (st != NULL) {
        n.state = tenant_state_parse(st);
        if (n.state != TENANT_ACTIVE && n.state != TENANT_PROVISIONING)
            return cli_usage(c, "--state is active or provisioning, not '%s'", st);
    }
    int rc = cli_opt_int(c, a, "--max-workers", 0, 100000, &n.max_workers);
    if (rc != 0)
        return rc;

    /* --setting KEY=VALUE...: a JSON object for registry_new.settings (a later KEY wins). */
    const char *sets[MAX_CREATE_SETTINGS + 1];
    int ns = cli_opt_all(a, "--setting", sets, MAX_CREATE_SETTINGS + 1);
    if (ns > MAX_CREATE_SETTINGS)
        return cli_usage(c, "at most %d --setting options", MAX_CREATE_SETTINGS);
    buf json = BUF_INIT;
    buf_putc(&json, '{');
    for (int i = 0; i < ns; i++) {
        const char *eq = strchr(sets[i], '=');
        if (eq == NULL || eq == sets[i]) {
            buf_free(&json);
            return cli_usage(c, "--setting expects KEY=VALUE, not '%s'", sets[i]);
        }
        size_t vlen = strlen(eq + 1), klen = (size_t)(eq - sets[i]);
        /* Checked here: the JSON writer would turn bad bytes into U+FFFD, silently. */
        if (utf8_valid_prefix(sets[i], klen) != klen ||
            utf8_valid_prefix(eq + 1, vlen) != vlen) {
            buf_free(&json);
            return cli_fail(c, TN_INVALID, "setting '%.*s' is not UTF-8 text", (int)klen,
                            sets[i]);
        }
        if (i > 0)
            buf_putc(&json, ',');
        buf_json_strn(&json, sets[i], klen);
        buf_putc(&json, ':');
        buf_json_str(&json, eq + 1);
    }
    buf_putc(&json, '}');
    if (json.oom) {
        buf_free(&json);
        return cli_fail(c, TN_NOMEM, "out of memory");
    }
    n.settings = json.p;

    char err[1024];
    int64_t id = 0;
    rc = registry_create(c->reg, &n, &id, err, sizeof(err));
    buf_free(&json);
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    if (c->json)
        cli_json_changed(c, slug);
    else
        printf("created tenant '%s' (id %lld, %s, %d domain%s)\n", slug, (long long)id,
               tenant_state_name(n.state), nd, nd == 1 ? "" : "s");
    return 0;
}

/* ---- list ------------------------------------------------------------------------------------- */

typedef struct row {
    char *slug, *name, *state, *placement, *domain;
} row;

typedef struct list_ctx {
    cli *c;
    buf items;        /* JSON mode */
    row *rows;        /* text mode */
    int n, cap;
    int limit;
    bool more;        /* a tenant after this page exists (the list asked for limit + 1) */
    char last[64];
    bool oom;
} list_ctx;

static int list_cb(void *ctx, const tenant_rec *t, const registry_domain *d, int nd)
{
    list_ctx *l = ctx;
    if (l->n == l->limit) {
        l->more = true;
        return TN_DONE;
    }
    snprintf(l->last, sizeof(l->last), "%s", t->slug);
    const char *primary = "";
    for (int i = 0; i < nd; i++)
        if (d[i].primary) {
            primary = d[i].domain;
            break;
        }
    if (l->c->json) {
        if (l->n > 0)
            buf_putc(&l->items, ',');
        cli_json_tenant(&l->items, t, d, nd);
        l->n++;
        return TN_OK;
    }
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 64;
        row *nr = realloc(l->rows, (size_t)cap * sizeof(*nr));
        if (nr == NULL) {
            l->oom = true;
            return TN_NOMEM;
        }
        l->rows = nr;
        l->cap = cap;
    }
    row *r = &l->rows[l->n];
    r->slug = strdup(t->slug);
    r->name = strdup(t->name);
    r->state = strdup(tenant_state_name(t->state));
    r->placement = strdup(t->placement);
    r->domain = strdup(primary);
    l->n++;
    if (!r->slug || !r->name || !r->state || !r->placement || !r->domain) {
        l->oom = true;
        return TN_NOMEM;
    }
    return TN_OK;
}

/* Characters (not bytes) of s, at most cap. */
static int text_width(const char *s, int cap)
{
    int w = 0;
    for (; *s && w < cap; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            w++;
    return w;
}

static void print_table(const list_ctx *l, int64_t total)
{
    static const char *const head[] = {"SLUG", "NAME", "STATE", "PLACEMENT", "DOMAIN"};
    int w[5];
    for (int k = 0; k < 5; k++)
        w[k] = (int)strlen(head[k]);
    for (int i = 0; i < l->n; i++) {
        const char *cells[] = {l->rows[i].slug, l->rows[i].name, l->rows[i].state,
                               l->rows[i].placement, l->rows[i].domain};
        for (int k = 0; k < 5; k++) {
            int cw = text_width(cells[k], k == 1 ? 32 : 253);
            if (cw > w[k])
                w[k] = cw;
        }
    }
    for (int k = 0; k < 5; k++) {
        cli_put_cell(stdout, head[k], k == 4 ? (int)strlen(head[k]) : w[k]);
        fputs(k == 4 ? "\n" : "  ", stdout);
    }
    for (int i = 0; i < l->n; i++) {
        const char *cells[] = {l->rows[i].slug, l->rows[i].name, l->rows[i].state,
                               l->rows[i].placement, l->rows[i].domain};
        for (int k = 0; k < 5; k++) {
            cli_put_cell(stdout, cells[k], k == 4 ? (int)strlen(cells[k]) : w[k]);
            fputs(k == 4 ? "\n" : "  ", stdout);
        }
    }
    printf("(%d of %lld tenant%s", l->n, (long long)total, total == 1 ? "" : "s");
    if (l->more)
        printf("; next page: --after %s", l->last);
    printf(")\n");
}

int cli_tenant_list(cli *c, const cli_args *a)
{
    int state = -1, limit = 100;
    const char *st = cli_opt(a, "--state");
    if (st != NULL && (state = tenant_state_parse(st)) < 0)
        return cli_usage(c, "unknown state '%s' (provisioning, active, maintenance, suspended, "
                            "moving, deleting)", st);
    int rc = cli_opt_int(c, a, "--limit", 1, 10000, &limit);
    if (rc != 0)
        return rc;
    const char *search = cli_opt(a, "--search");
    const char *after = cli_opt(a, "--after");

    list_ctx l;
    memset(&l, 0, sizeof(l));
    l.c = c;
    l.limit = limit;
    int64_t total = -1;
    rc = registry_list(c->reg, state, search, after, limit + 1, list_cb, &l, &total);
    int status = 0;
    if (rc != TN_OK || l.oom || l.items.oom) {
        status = cli_fail(c, l.oom || l.items.oom ? TN_NOMEM : rc, "cannot list the tenants: %s",
                          l.oom || l.items.oom ? "out of memory" : tn_rc_str(rc));
    } else if (c->json) {
        buf_puts(&c->out, "{\"total\":");
        buf_i64(&c->out, total);
        buf_puts(&c->out, ",\"count\":");
        buf_i64(&c->out, l.n);
        buf_puts(&c->out, ",\"next_after\":");
        buf_json_str(&c->out, l.more ? l.last : NULL);
        buf_puts(&c->out, ",\"tenants\":[");
        if (l.items.len > 0)
            buf_append(&c->out, l.items.p, l.items.len);
        buf_puts(&c->out, "]}");
    } else if (c->tty) {
        print_table(&l, total);
    } else {
        /* Not a terminal: one tab-separated line per tenant, no header (for scripts). */
        for (int i = 0; i < l.n; i++) {
            const char *cells[] = {l.rows[i].slug, l.rows[i].name, l.rows[i].state,
                                   l.rows[i].placement, l.rows[i].domain};
            for (int k = 0; k < 5; k++) {
                cli_put_text(stdout, cells[k]);
                fputc(k == 4 ? '\n' : '\t', stdout);
            }
        }
    }
    for (int i = 0; i < l.n && !c->json; i++) {
        free(l.rows[i].slug);
        free(l.rows[i].name);
        free(l.rows[i].state);
        free(l.rows[i].placement);
        free(l.rows[i].domain);
    }
    free(l.rows);
    buf_free(&l.items);
    return status;
}

/* ---- show ------------------------------------------------------------------------------------- */

static int show_cb(void *ctx, const tenant_rec *t, const registry_domain *d, int nd)
{
    cli *c = ctx;
    if (c->json) {
        cli_json_tenant(&c->out, t, d, nd);
        return TN_OK;
    }
    char ts[32];
    printf("id:          %lld\n", (long long)t->id);
    printf("slug:        %s\n", t->slug);
    fputs("name:        ", stdout);
    cli_put_text(stdout, t->name);
    printf("\nstate:       %s\n", tenant_state_name(t->state));
    fputs("placement:   ", stdout);
    cli_put_text(stdout, t->placement);
    fputs("\nstorage:     ", stdout);
    cli_put_text(stdout, t->storage);
    if (t->max_workers > 0)
        printf("\nmax_workers: %d\n", t->max_workers);
    else
        printf("\nmax_workers: 0 (the host's tenant.max_workers)\n");
    cli_time(t->created_at, ts, sizeof(ts));
    printf("created:     %s\n", ts);
    cli_time(t->updated_at, ts, sizeof(ts));
    printf("updated:     %s\n", ts);
    if (nd == 0)
        printf("domains:     (none)\n");
    for (int i = 0; i < nd; i++)
        printf("%s%s%s\n", i == 0 ? "domains:     " : "             ", d[i].domain,
               d[i].primary ? " (primary)" : "");
    if (t->nsettings == 0)
        printf("settings:    (none)\n");
    for (int i = 0; i < t->nsettings; i++) {
        fputs(i == 0 ? "settings:    " : "             ", stdout);
        cli_put_text(stdout, t->settings[i].key);
        fputs(" = ", stdout);
        cli_put_text(stdout, t->settings[i].value);
        fputc('\n', stdout);
    }
    return TN_OK;
}

int cli_tenant_show(cli *c, const cli_args *a)
{
    int rc = registry_show(c->reg, a->pos[0], show_cb, c);
    if (rc == TN_NOTFOUND)
        return cli_fail(c, rc, "no tenant '%s'", a->pos[0]);
    if (rc != TN_OK)
        return cli_fail(c, rc, "cannot read tenant '%s': %s", a->pos[0], tn_rc_str(rc));
    return 0;
}

/* ---- state changes ---------------------------------------------------------------------------- */

int cli_tenant_state(cli *c, const cli_args *a)
{
    const char *verb = c->cmd->name + strlen("tenant ");
    int state = strcmp(verb, "suspend") == 0       ? TENANT_SUSPENDED
                : strcmp(verb, "resume") == 0      ? TENANT_ACTIVE
                : strcmp(verb, "maintenance") == 0 ? TENANT_MAINTENANCE
                                                   : TENANT_DELETING;
    const char *slug = a->pos[0];
    char err[1024];
    int rc = registry_set_state(c->reg, slug, state, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    if (c->json) {
        cli_json_changed(c, slug);
    } else if (state == TENANT_DELETING) {
        printf("tenant '%s' is now deleting: the host answers 404 for it; "
               "'tenancy tenant resume %s' restores it\n", slug, slug);
    } else {
        printf("tenant '%s' is now %s\n", slug, tenant_state_name(state));
    }
    return 0;
}

/* ---- set -------------------------------------------------------------------------------------- */

int cli_tenant_set(cli *c, const cli_args *a)
{
    const char *slug = a->pos[0];
    int mw = -1;
    int rc = cli_opt_int(c, a, "--max-workers", 0, 100000, &mw);
    if (rc != 0)
        return rc;
    if (mw < 0)
        return cli_usage(c, "nothing to set: give --max-workers N");
    char err[1024];
    rc = registry_set_max_workers(c->reg, slug, mw, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    if (c->json)
        cli_json_changed(c, slug);
    else
        printf("tenant '%s': max_workers = %d%s\n", slug, mw,
               mw == 0 ? " (the host's tenant.max_workers)" : "");
    return 0;
}

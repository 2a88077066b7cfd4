/*
 * key.c — the `tenancy key ...` commands: a tenant's API keys made, listed and revoked
 * (over tenancy/ops_keys.c).
 *
 * Owns: turning their arguments into ops_key_* calls and printing the result (cli_int.h).
 * `key create` prints the token, once: the registry keeps only its hash, so nothing can
 * show it again. Must not: print a token anywhere else, or a hash at all (lists show the
 * prefix), or print to stdout before the change succeeded.
 */
#include "core/first.h"
#include "cli/cli_int.h"
#include "core/rc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void put_time(buf *b, const char *name, int64_t t)
{
    char ts[32];
    buf_puts(b, ",\"");
    buf_puts(b, name);
    buf_puts(b, "\":");
    if (t == 0) {
        buf_puts(b, "null");
        return;
    }
    ops_utc_time(t, ts, sizeof(ts));
    buf_json_str(b, ts);
}

/* The JSON object of a key: never its token or hash. */
static void json_key(buf *b, const registry_key *k)
{
    buf_puts(b, "{\"id\":");
    buf_i64(b, k->id);
    buf_puts(b, ",\"tenant\":");
    buf_json_str(b, k->slug);
    buf_puts(b, ",\"prefix\":");
    buf_json_str(b, k->prefix);
    buf_puts(b, ",\"label\":");
    buf_json_str(b, k->label);
    buf_puts(b, ",\"read_only\":");
    buf_puts(b, k->read_only ? "true" : "false");
    put_time(b, "created_at", k->created_at);
    put_time(b, "expires_at", k->expires_at);
    put_time(b, "revoked_at", k->revoked_at);
    put_time(b, "last_used_at", k->last_used_at);
    buf_puts(b, ",\"status\":");
    int64_t now = (int64_t)time(NULL);
    buf_json_str(b, k->revoked_at ? "revoked"
                    : k->expires_at != 0 && k->expires_at <= now ? "expired" : "active");
    buf_putc(b, '}');
}

int cli_key_create(cli *c, const cli_args *a)
{
    const char *slug = a->pos[0];
    ops_key_opts o = {.read_only = cli_opt(a, "--read-only") != NULL,
                      .label = cli_opt(a, "--label"), .expires = cli_opt(a, "--expires")};
    char err[1024];
    ops_env e;
    cli_ops_env(c, &e);
    ops_key_made m;
    int rc = ops_key_create(&e, slug, &o, &m, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    char ts[32];
    if (c->json) {
        registry_key k = {.id = m.id, .slug = slug, .prefix = m.prefix,
                          .label = o.label ? o.label : "", .read_only = m.read_only,
                          .created_at = m.created_at, .expires_at = m.expires_at};
        buf_puts(&c->out, "{\"ok\":true,\"token\":");
        buf_json_str(&c->out, m.token);
        buf_puts(&c->out, ",\"key\":");
        json_key(&c->out, &k);
        buf_putc(&c->out, '}');
    } else {
        printf("created key %lld of tenant '%s' (%s%s", (long long)m.id, slug, m.prefix,
               m.read_only ? ", read-only" : "");
        if (m.expires_at != 0) {
            ops_utc_time(m.expires_at, ts, sizeof(ts));
            printf(", expires %s", ts);
        }
        printf(")\n%s\n", m.token);
        if (c->tty)
            fputs("This token is shown only now: the registry keeps its hash alone.\n", stdout);
    }
    explicit_bzero(m.token, sizeof(m.token));
    return 0;
}

typedef struct list_out {
    cli *c;
    int n;
} list_out;

static const char *time_text(int64_t t, char ts[32])
{
    snprintf(ts, 32, "-");
    if (t != 0)
        ops_utc_time(t, ts, 32);
    return ts;
}

static int list_cb(void *ctx, const registry_key *k)
{
    list_out *l = ctx;
    if (l->c->json) {
        if (l->n)
            buf_putc(&l->c->out, ',');
        json_key(&l->c->out, k);
    } else {
        if (l->n == 0)
            printf("%-6s %-20s %-12s %-9s %-20s %-20s %-20s %-20s %s\n", "ID", "TENANT",
                   "PREFIX", "FLAGS", "CREATED", "EXPIRES", "LAST USED", "REVOKED", "LABEL");
        char id[24], t1[32], t2[32], t3[32], t4[32];
        snprintf(id, sizeof(id), "%lld", (long long)k->id);
        const cli_cell row[] = {{id, 6},
                                {k->slug, 20},
                                {k->prefix, 12},
                                {k->read_only ? "read-only" : "-", 9},
                                {time_text(k->created_at, t1), 20},
                                {time_text(k->expires_at, t2), 20},
                                {time_text(k->last_used_at, t3), 20},
                                {time_text(k->revoked_at, t4), 20}};
        cli_put_row(stdout, row, (int)TN_ARRAY_LEN(row), k->label);
    }
    l->n++;
    return TN_OK;
}

int cli_key_list(cli *c, const cli_args *a)
{
    const char *slug = a->npos > 0 ? a->pos[0] : NULL;
    char err[1024];
    ops_env e;
    cli_ops_env(c, &e);
    list_out l = {c, 0};
    if (c->json)
        buf_puts(&c->out, "{\"keys\":[");
    int rc = ops_key_list(&e, slug, list_cb, &l, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    if (c->json) {
        buf_puts(&c->out, "],\"count\":");
        buf_i64(&c->out, l.n);
        buf_putc(&c->out, '}');
    } else if (l.n == 0) {
        if (slug != NULL)
            printf("tenant '%s' has no keys\n", slug);
        else
            printf("no keys\n");
    }
    return 0;
}

int cli_key_revoke(cli *c, const cli_args *a)
{
    const char *slug = a->pos[0], *which = a->pos[1];
    char err[1024];
    ops_env e;
    cli_ops_env(c, &e);
    registry_key k;
    bool already = false;
    int rc = ops_key_revoke(&e, slug, which, &k, &already, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    if (c->json) {
        buf_puts(&c->out, "{\"ok\":true,\"already\":");
        buf_puts(&c->out, already ? "true" : "false");
        buf_puts(&c->out, ",\"key\":");
        json_key(&c->out, &k);
        buf_putc(&c->out, '}');
    } else {
        char ts[32];
        ops_utc_time(k.revoked_at, ts, sizeof(ts));
        printf("key %lld (%s) of tenant '%s' %s at %s\n", (long long)k.id, k.prefix, slug,
               already ? "was already revoked" : "revoked", ts);
    }
    return 0;
}

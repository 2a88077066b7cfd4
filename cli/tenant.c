/*
 * tenant.c — the `tenancy tenant ...` commands: create (with the provisioning of the
 * tenant's storage), list, show, the state changes (suspend, resume, maintenance, delete)
 * and set.
 *
 * Owns: turning their arguments into registry calls and tenant operations (tenancy/ops.h:
 * ops_create, ops_create_bulk, ops_set_state, ops_set_max_workers) and printing the result,
 * as a table or `key: value` lines for a human, or one JSON value (cli_int.h); reading the
 * file of `tenant create --from-file`. The steps of a create and what is undone when one
 * fails are tenancy/ops_create.c's.
 *
 * Must not: check what the registry checks (slugs, domains, limits: its message is the one
 * shown), or print to stdout before the change succeeded.
 */
#include "core/first.h"
#include "cli/cli_int.h"
#include "core/clock.h"
#include "core/rc.h"
#include "tenancy/lookup.h"
#include "tenancy/placement.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CREATE_DOMAINS OPS_MAX_DOMAINS
#define MAX_CREATE_SETTINGS 128

static int provisioned_cb(void *ctx, const tenant_rec *t, const registry_domain *d, int nd)
{
    cli_json_tenant(ctx, t, d, nd);
    return TN_OK;
}

static void provision_report(cli *c, const registry_new *n, int nd, int state,
                             const ops_plan *pl, const ops_created *p)
{
    const migrate_result *m = &p->mr;
    for (int i = 0; i < m->nwarnings && i < MIGRATE_MAX_WARNINGS; i++)
        fprintf(stderr, "tenancy: warning: %s: %s\n", n->slug, m->warnings[i]);
    if (c->json) {
        buf *b = &c->out;
        buf_puts(b, "{\"ok\":true,\"tenant\":");
        buf t = BUF_INIT;
        if (registry_show(c->reg, n->slug, provisioned_cb, &t) == TN_OK && !t.oom)
            buf_append(b, t.p, t.len);
        else
            buf_puts(b, "null");
        buf_free(&t);
        buf_puts(b, ",\"storage\":{\"placement\":");
        buf_json_str(b, ops_plan_placement(pl));
        buf_puts(b, ",\"kind\":");
        buf_json_str(b, p->kind);
        buf_puts(b, ",\"name\":");
        buf_json_str(b, p->storage);
        buf_puts(b, ",\"migration_version\":");
        buf_json_str(b, m->to);
        buf_puts(b, ",\"applied\":");
        buf_i64(b, m->applied);
        buf_puts(b, ",\"seeded\":");
        buf_puts(b, p->seeded ? "true" : "false");
        buf_puts(b, ",\"template\":");
        buf_json_str(b, ops_plan_template(pl));
        buf_puts(b, ",\"cloned\":");
        buf_puts(b, p->cloned ? "true" : "false");
        buf_puts(b, ",\"ms\":");
        buf_i64(b, p->ms);
        buf_puts(b, ",\"warnings\":[");
        for (int i = 0; i < m->nwarnings && i < MIGRATE_MAX_WARNINGS; i++) {
            if (i)
                buf_putc(b, ',');
            buf_json_str(b, m->warnings[i]);
        }
        buf_puts(b, "]}}");
        return;
    }
    printf("created tenant '%s' (id %lld, %s, %d domain%s): %s %s", n->slug,
           (long long)p->id, tenant_state_name(state), nd, nd == 1 ? "" : "s",
           p->kind, p->storage);
    if (p->cloned)
        printf(", cloned from '%s'", ops_plan_template(pl));
    if (m->to[0] != '\0')
        printf(", migrations at %s (%d applied)", m->to, m->applied);
    if (p->seeded)
        printf(", seeded");
    printf(", in %lld ms\n", (long long)p->ms);
    if (p->replayed)
        printf("note: PostgreSQL cannot clone a schema: the migrations were replayed instead "
               "of cloning '%s'\n", ops_plan_template(pl));
}

/* ---- create ----------------------------------------------------------------------------------- */

/* --setting KEY=VALUE...: a JSON object for registry_new.settings (a later KEY wins), into
 * json. 0 or what cli_usage/cli_fail return. */
static int settings_json(cli *c, const cli_args *a, buf *json)
{
    const char *sets[MAX_CREATE_SETTINGS + 1];
    int ns = cli_opt_all(a, "--setting", sets, MAX_CREATE_SETTINGS + 1);
    if (ns > MAX_CREATE_SETTINGS)
        return cli_usage(c, "at most %d --setting options", MAX_CREATE_SETTINGS);
    buf_putc(json, '{');
    for (int i = 0; i < ns; i++) {
        const char *eq = strchr(sets[i], '=');
        if (eq == NULL || eq == sets[i])
            return cli_usage(c, "--setting expects KEY=VALUE, not '%s'", sets[i]);
        size_t vlen = strlen(eq + 1), klen = (size_t)(eq - sets[i]);
        /* Checked here: the JSON writer would turn bad bytes into U+FFFD, silently. */
        if (utf8_valid_prefix(sets[i], klen) != klen ||
            utf8_valid_prefix(eq + 1, vlen) != vlen)
            return cli_fail(c, TN_INVALID, "setting '%.*s' is not UTF-8 text", (int)klen,
                            sets[i]);
        if (i > 0)
            buf_putc(json, ',');
        buf_json_strn(json, sets[i], klen);
        buf_putc(json, ':');
        buf_json_str(json, eq + 1);
    }
    buf_putc(json, '}');
    if (json->oom)
        return cli_fail(c, TN_NOMEM, "out of memory");
    return 0;
}

static int create_from_file(cli *c, const cli_args *a, const registry_new *tpl,
                            const ops_plan *plan);

int cli_tenant_create(cli *c, const cli_args *a)
{
    const char *file = cli_opt(a, "--from-file");
    if (a->npos == 0 && file == NULL)
        return cli_usage(c, "'tenant create' needs SLUG, or --from-file FILE");
    if (a->npos > 0 && file != NULL)
        return cli_usage(c, "give the SLUG of one tenant or --from-file FILE, not both");
    if (file != NULL && (cli_opt(a, "--name") != NULL || cli_opt(a, "--domain") != NULL))
        return cli_usage(c, "with --from-file, the names and domains come from the file");
    if (file == NULL && cli_opt(a, "-j") != NULL)
        return cli_usage(c, "-j goes with --from-file");
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
    buf json = BUF_INIT;
    rc = settings_json(c, a, &json);
    if (rc != 0) {
        buf_free(&json);
        return rc;
    }
    n.settings = json.p;

    ops_create_opts co = {cli_opt(a, "--placement"), cli_opt(a, "--from-template") != NULL,
                          cli_opt(a, "--no-seed") != NULL, n.state};
    ops_plan *plan = NULL;
    char msg[1200];
    ops_env e;
    cli_ops_env(c, &e);
    int r = ops_create_prepare(&e, &co, &plan, msg, sizeof(msg));
    if (r != TN_OK) {
        rc = cli_fail(c, r, "%s", msg);
    } else if (file != NULL) {
        rc = create_from_file(c, a, &n, plan);
    } else {
        ops_created *p = calloc(1, sizeof(*p));
        r = p == NULL ? tn_errf(msg, sizeof(msg), TN_NOMEM, "out of memory")
                      : ops_create(&e, plan, &n, p, msg, sizeof(msg));
        rc = r == TN_OK ? 0 : cli_fail(c, r, "%s", msg);
        if (rc == 0)
            provision_report(c, &n, nd, co.final_state, plan, p);
        free(p);
    }
    buf_free(&json);
    ops_plan_free(plan);
    return rc;
}

/* ---- create --from-file ------------------------------------------------------------------------ */

/* FILE: one tenant a line, tab-separated: SLUG [NAME [DOMAIN...]] (an empty NAME is the
 * slug; the first domain is primary); blank lines and lines starting with '#' are skipped.
 * Each tenant is created exactly as `tenant create SLUG` creates it, by ops_create_bulk on
 * -j N workers. A tenant that fails is undone alone and reported with its slug and reason;
 * the others go on. */

/* The lines of the file: the tenants, and the text their fields point into. */
typedef struct bulk {
    ops_bulk_item *v;
    char **text;
    int n, cap;
    ops_bulk_report rep;
    const ops_plan *plan;
} bulk;

static void line_fail(ops_bulk_item *l, int rc, const char *msg)
{
    l->status = OPS_B_FAILED;
    l->rc = rc;
    free(l->error);
    l->error = strdup(msg);
}


/* Read FILE ("-": stdin) into b->v. 0, or what cli_fail returns. */
static int bulk_read(cli *c, const char *file, bulk *b)
{
    FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "r");
    if (f == NULL)
        return cli_fail(c, TN_IO, "--from-file %s: %s", file, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0, rc = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (line[strspn(line, " \t")] == '\0' || line[0] == '#')
            continue;
        if (b->n == b->cap) {
            int ncap = b->cap ? b->cap * 2 : 256;
            ops_bulk_item *nv = realloc(b->v, (size_t)ncap * sizeof(*nv));
            if (nv != NULL)
                b->v = nv;
            char **nt = realloc(b->text, (size_t)ncap * sizeof(*nt));
            if (nt != NULL)
                b->text = nt;
            if (nv == NULL || nt == NULL) {
                rc = cli_fail(c, TN_NOMEM, "out of memory");
                break;
            }
            b->cap = ncap;
        }
        ops_bulk_item *l = &b->v[b->n];
        memset(l, 0, sizeof(*l));
        l->line = lineno;
        b->text[b->n] = strdup(line);
        if (b->text[b->n] == NULL) {
            rc = cli_fail(c, TN_NOMEM, "out of memory");
            break;
        }
        b->n++;
        char *save = b->text[b->n - 1], *field;
        int k = 0;
        while ((field = strsep(&save, "\t")) != NULL) {
            if (k == 0)
                l->slug = field;
            else if (k == 1)
                l->name = field[0] != '\0' ? field : NULL;
            else if (field[0] == '\0')
                continue;
            else if (l->nd < MAX_CREATE_DOMAINS)
                l->domains[l->nd++] = field;
            else
                line_fail(l, TN_INVALID, "more than 64 domains");
            k++;
        }
        if (l->name == NULL)
            l->name = l->slug;
        if (l->slug[0] == '\0')
            line_fail(l, TN_INVALID, "no slug (the line starts with a tab)");
    }
    if (rc == 0 && ferror(f))
        rc = cli_fail(c, TN_IO, "--from-file %s: %s", file, strerror(errno));
    free(line);
    if (f != stdin)
        fclose(f);
    return rc;
}

static void bulk_json(cli *c, const bulk *b, const int *cnt, double secs)
{
    const tenancy_config *tc = &c->cfg->tenancy;
    const placement *pl = tenancy_placement(tc, ops_plan_placement(b->plan));
    buf *o = &c->out;
    bool ok = cnt[OPS_B_FAILED] == 0 && cnt[OPS_B_SKIPPED] == 0;
    buf_puts(o, "{\"ok\":");
    buf_puts(o, ok ? "true" : "false");
    if (!ok) {
        char msg[160];
        tn_errf(msg, sizeof(msg), TN_ERR, "%d of %d tenant%s not created",
                b->n - cnt[OPS_B_CREATED], b->n, b->n == 1 ? "" : "s");
        buf_puts(o, ",\"error\":");
        buf_json_str(o, msg);
        buf_puts(o, ",\"code\":\"error\"");
    }
    buf_puts(o, ",\"placement\":");
    buf_json_str(o, ops_plan_placement(b->plan));
    buf_puts(o, ",\"kind\":");
    buf_json_str(o, ops_plan_kind(b->plan));
    buf_puts(o, ",\"latest\":");
    buf_json_str(o, ops_plan_latest(b->plan));
    buf_puts(o, ",\"jobs\":");
    buf_i64(o, b->rep.jobs);
    buf_puts(o, ",\"stopped\":");
    buf_json_str(o, b->rep.stopped);
    buf_puts(o, ",\"total\":");
    buf_i64(o, b->n);
    for (int s = OPS_B_CREATED; s <= OPS_B_SKIPPED; s++) {
        buf_printf(o, ",\"%s\":", ops_bstatus_name(s));
        buf_i64(o, cnt[s]);
    }
    buf_printf(o, ",\"seconds\":%.3f,\"per_s\":%.1f,\"tenants\":[", secs,
               secs > 0 ? cnt[OPS_B_CREATED] / secs : 0.0);
    for (int i = 0; i < b->n; i++) {
        const ops_bulk_item *l = &b->v[i];
        char storage[4096] = "";
        if (l->status == OPS_B_CREATED && pl != NULL)
            placement_storage_name(tc, pl, l->slug, storage, sizeof(storage));
        buf_puts(o, i ? ",{\"line\":" : "{\"line\":");
        buf_i64(o, l->line);
        buf_puts(o, ",\"slug\":");
        buf_json_str(o, l->slug);
        buf_puts(o, ",\"status\":");
        buf_json_str(o, ops_bstatus_name(l->status));
        buf_puts(o, ",\"id\":");
        if (l->status == OPS_B_CREATED)
            buf_i64(o, l->id);
        else
            buf_puts(o, "null");
        buf_puts(o, ",\"storage\":");
        buf_json_str(o, storage[0] ? storage : NULL);
        buf_puts(o, ",\"migration_version\":");
        buf_json_str(o, l->version);
        buf_puts(o, ",\"applied\":");
        buf_i64(o, l->applied);
        buf_puts(o, ",\"seeded\":");
        buf_puts(o, l->seeded ? "true" : "false");
        buf_puts(o, ",\"ms\":");
        buf_i64(o, l->ms);
        buf_puts(o, ",\"error\":");
        buf_json_str(o, l->error);
        buf_puts(o, ",\"code\":");
        buf_json_str(o, l->status == OPS_B_FAILED ? cli_rc_code(l->rc) : NULL);
        buf_puts(o, ",\"warnings\":");
        buf_i64(o, l->nwarnings);
        buf_puts(o, ",\"warning\":");
        buf_json_str(o, l->warning);
        buf_putc(o, '}');
    }
    buf_puts(o, "]}");
}

/* On a terminal: the tenants that were not created, as a table (10,000 created ones are not
 * worth a screen), then the summary. Otherwise one tab-separated line per tenant (slug,
 * status, id, ms, error; no header) for scripts, and the summary on stderr. */
static void bulk_text(cli *c, const bulk *b, const int *cnt, double secs)
{
    if (c->tty) {
        int ws = 4;
        for (int i = 0; i < b->n; i++)
            if (b->v[i].status != OPS_B_CREATED && (int)strlen(b->v[i].slug) > ws)
                ws = (int)strlen(b->v[i].slug);
        if (cnt[OPS_B_CREATED] < b->n)
            printf("%6s  %-*s  %-7s  %s\n", "LINE", ws, "SLUG", "STATUS", "ERROR");
        for (int i = 0; i < b->n; i++) {
            const ops_bulk_item *l = &b->v[i];
            if (l->status == OPS_B_CREATED)
                continue;
            printf("%6d  ", l->line);
            cli_put_cell(stdout, l->slug, ws);
            printf("  %-7s  ", ops_bstatus_name(l->status));
            cli_put_text(stdout, l->error ? l->error : "");
            fputc('\n', stdout);
        }
    } else {
        for (int i = 0; i < b->n; i++) {
            const ops_bulk_item *l = &b->v[i];
            cli_put_text(stdout, l->slug);
            printf("\t%s\t", ops_bstatus_name(l->status));
            if (l->status == OPS_B_CREATED)
                printf("%lld", (long long)l->id);
            printf("\t%lld\t", (long long)l->ms);
            cli_put_text(stdout, l->error ? l->error : "");
            fputc('\n', stdout);
        }
    }
    for (int i = 0; i < b->n; i++)
        if (b->v[i].warning != NULL)
            fprintf(stderr, "tenancy: warning: %s: %s%s\n", b->v[i].slug, b->v[i].warning,
                    b->v[i].nwarnings > 1 ? " (and more)" : "");
    FILE *f = c->tty ? stdout : stderr;
    fprintf(f, "%d tenant%s in %s: %d created, %d failed, %d skipped in %.1f s (%.1f tenants/s, "
               "%d at once)", b->n, b->n == 1 ? "" : "s", ops_plan_placement(b->plan),
            cnt[OPS_B_CREATED], cnt[OPS_B_FAILED], cnt[OPS_B_SKIPPED], secs,
            secs > 0 ? cnt[OPS_B_CREATED] / secs : 0.0, b->rep.jobs);
    if (b->rep.stopped != NULL)
        fprintf(f, "; stopped: %s", b->rep.stopped);
    fputc('\n', f);
}

static int create_from_file(cli *c, const cli_args *a, const registry_new *tpl,
                            const ops_plan *plan)
{
    int jobs = 1;
    int rc = cli_opt_int(c, a, "-j", 1, OPS_JOBS_MAX, &jobs);
    if (rc != 0)
        return rc;
    bulk b;
    memset(&b, 0, sizeof(b));
    b.plan = plan;
    rc = bulk_read(c, cli_opt(a, "--from-file"), &b);
    if (rc == 0) {
        cli_bar bar;
        cli_bar_init(&bar, NULL);
        ops_env e;
        cli_ops_env(c, &e);
        e.progress = cli_bar_draw;
        e.progress_ctx = &bar;
        char err[700];
        int r = ops_create_bulk(&e, plan, tpl, b.v, b.n, jobs, &b.rep, err, sizeof(err));
        c->reg = e.reg;   /* closed for the workers, reopened for the flush */
        const int *cnt = b.rep.count;
        if (r != TN_OK) {
            rc = cli_fail(c, r, "%s", err);
        } else {
            if (c->json)
                bulk_json(c, &b, cnt, b.rep.seconds);
            else
                bulk_text(c, &b, cnt, b.rep.seconds);
            if (b.rep.flush_rc != TN_OK) {
                rc = cli_fail(c, b.rep.flush_rc, "the registry could not be flushed to disk "
                                                 "(%s): the %d tenants created are in it, but a "
                                                 "power loss now could lose them; run 'tenancy "
                                                 "check' after one",
                              b.rep.flush_err, cnt[OPS_B_CREATED]);
                c->keep_out = true;
            } else if (cnt[OPS_B_CREATED] < b.n) {
                rc = cli_fail(c, TN_ERR, "%d of %d tenant%s not created (%d failed, %d skipped)%s%s",
                              b.n - cnt[OPS_B_CREATED], b.n, b.n == 1 ? "" : "s",
                              cnt[OPS_B_FAILED], cnt[OPS_B_SKIPPED],
                              b.rep.stopped ? "; stopped: " : "",
                              b.rep.stopped ? b.rep.stopped : "");
                c->keep_out = true;   /* the JSON document is the table, with error and code */
            }
        }
    }
    for (int i = 0; i < b.n; i++) {
        free(b.text[i]);
        ops_bulk_item_clear(&b.v[i]);
    }
    free(b.text);
    free(b.v);
    return rc;
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
    ops_utc_time(t->created_at, ts, sizeof(ts));
    printf("created:     %s\n", ts);
    ops_utc_time(t->updated_at, ts, sizeof(ts));
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

/* A deleted tenant leaves state deleting only through `tenant restore` (within
 * storage.delete_grace) or `purge`: suspend, resume or maintenance would otherwise be a
 * restore that ignores the grace period. Delete refuses a tenant already deleted (its
 * deleted_at, and so its grace period, would start again). The check and the change are one
 * compare-and-set in the registry, so a concurrent delete cannot slip between them. */
int cli_tenant_state(cli *c, const cli_args *a)
{
    const char *verb = c->cmd->name + strlen("tenant ");
    int state = strcmp(verb, "suspend") == 0       ? TENANT_SUSPENDED
                : strcmp(verb, "resume") == 0      ? TENANT_ACTIVE
                : strcmp(verb, "maintenance") == 0 ? TENANT_MAINTENANCE
                                                   : TENANT_DELETING;
    const char *slug = a->pos[0];
    char err[1024];
    ops_env e;
    cli_ops_env(c, &e);
    int rc = ops_set_state(&e, slug, state, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    if (c->json) {
        cli_json_changed(c, slug);
    } else if (state == TENANT_DELETING) {
        char until[32];
        ops_utc_time((int64_t)time(NULL) + c->cfg->tenancy.delete_grace_ms / 1000, until,
                 sizeof(until));
        printf("tenant '%s' is now deleting: the host answers 404 for it; 'tenancy tenant "
               "restore %s' brings it back until %s, then 'tenancy purge' removes it\n", slug,
               slug, until);
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
    ops_env e;
    cli_ops_env(c, &e);
    rc = ops_set_max_workers(&e, slug, mw, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    if (c->json)
        cli_json_changed(c, slug);
    else
        printf("tenant '%s': max_workers = %d%s\n", slug, mw,
               mw == 0 ? " (the host's tenant.max_workers)" : "");
    return 0;
}


/*
 * migrate.c — `tenancy migrate`: its arguments, the progress bar, and the table or JSON
 * document of what ops_migrate (tenancy/ops_migrate.c) did; and `tenancy migrate status`.
 *
 *   tenancy migrate (--all | SLUG...) [-j N] [--canary K] [--stop-on-error]
 *                   [--progress-file FILE]
 *   tenancy migrate status            (or: tenancy migrate --status)
 *
 * Output: on a terminal a table (SLUG, STATUS, VERSION, MS, ERROR) and a summary line;
 * otherwise one tab-separated line per tenant and the summary on stderr; with --json one
 * document (with "error" and "code" when a tenant failed or the run stopped). Exit status 1
 * when a tenant failed or the run stopped.
 *
 * Must not: write to stdout before the run ended (the bar is on stderr).
 */
#include "core/first.h"
#include "cli/cli_int.h"
#include "core/rc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- output ---------------------------------------------------------------------------------------- */

static void print_json(cli *c, const ops_migrate_report *r, int canary)
{
    const int *n = r->count;
    buf *b = &c->out;
    bool ok = n[OPS_M_FAILED] == 0 && r->stopped == NULL;
    buf_puts(b, "{\"ok\":");
    buf_puts(b, ok ? "true" : "false");
    if (!ok) {
        char msg[160];
        if (n[OPS_M_FAILED] > 0)
            tn_errf(msg, sizeof(msg), TN_ERR, "%d tenant%s failed", n[OPS_M_FAILED],
                    n[OPS_M_FAILED] == 1 ? "" : "s");
        else
            tn_errf(msg, sizeof(msg), TN_ERR, "stopped (%s)", r->stopped);
        buf_puts(b, ",\"error\":");
        buf_json_str(b, msg);
        buf_puts(b, ",\"code\":\"error\"");
    }
    buf_puts(b, ",\"latest\":");
    buf_json_str(b, r->latest);
    buf_puts(b, ",\"files\":");
    buf_i64(b, r->files);
    buf_puts(b, ",\"jobs\":");
    buf_i64(b, r->jobs);
    buf_puts(b, ",\"canary\":");
    if (canary > 0)
        buf_i64(b, canary);
    else
        buf_puts(b, "null");
    buf_puts(b, ",\"stopped\":");
    buf_json_str(b, r->stopped);
    buf_puts(b, ",\"total\":");
    buf_i64(b, r->n);
    static const int shown[] = {OPS_M_MIGRATED, OPS_M_CURRENT, OPS_M_FAILED, OPS_M_SKIPPED};
    for (size_t k = 0; k < TN_ARRAY_LEN(shown); k++) {
        buf_printf(b, ",\"%s\":", ops_mstatus_name(shown[k]));
        buf_i64(b, n[shown[k]] + (shown[k] == OPS_M_SKIPPED ? n[OPS_M_PENDING] : 0));
    }
    buf_printf(b, ",\"seconds\":%.3f,\"left_out\":{", r->seconds);
    bool first = true;
    for (int s = 0; s < TENANT_NSTATES; s++)
        if (r->left_out[s] > 0) {
            buf_printf(b, "%s\"%s\":%d", first ? "" : ",", tenant_state_name(s),
                       r->left_out[s]);
            first = false;
        }
    buf_puts(b, "},\"tenants\":[");
    for (int i = 0; i < r->n; i++) {
        const ops_migrated *j = &r->v[i];
        buf_puts(b, i ? ",{\"slug\":" : "{\"slug\":");
        buf_json_str(b, j->slug);
        buf_puts(b, ",\"status\":");
        buf_json_str(b, ops_mstatus_name(j->status));
        buf_puts(b, ",\"from\":");
        buf_json_str(b, j->from);
        buf_puts(b, ",\"to\":");
        buf_json_str(b, j->to);
        buf_puts(b, ",\"applied\":");
        buf_i64(b, j->applied);
        buf_puts(b, ",\"ms\":");
        buf_i64(b, j->ms);
        buf_puts(b, ",\"error\":");
        buf_json_str(b, j->error);
        buf_puts(b, ",\"warnings\":");
        buf_i64(b, j->nwarnings);
        buf_puts(b, ",\"warning\":");
        buf_json_str(b, j->warning);
        buf_putc(b, '}');
    }
    buf_puts(b, "]}");
}

static void print_text(cli *c, const ops_migrate_report *r)
{
    const int *n = r->count;
    double secs = r->seconds;
    if (c->tty) {
        int ws = 4;
        for (int i = 0; i < r->n; i++) {
            int l = (int)strlen(r->v[i].slug);
            ws = l > ws ? l : ws;
        }
        printf("%-*s  %-8s  %-*s  %8s  %s\n", ws, "SLUG", "STATUS", 2 * OPS_VERSION_MAX / 3,
               "VERSION", "MS", "ERROR");
        for (int i = 0; i < r->n; i++) {
            const ops_migrated *j = &r->v[i];
            char ver[80];
            snprintf(ver, sizeof(ver), "%s -> %s", j->from[0] ? j->from : "-",
                     j->to[0] ? j->to : "-");
            printf("%-*s  %-8s  %-*s  %8lld  ", ws, j->slug,
                   ops_mstatus_name(j->status),
                   2 * OPS_VERSION_MAX / 3, ver, (long long)j->ms);
            cli_put_text(stdout, j->error ? j->error : j->warning ? j->warning : "");
            fputc('\n', stdout);
        }
    } else {
        /* Not a terminal: one tab-separated line per tenant (slug, status, from, to, ms,
         * error), no header, for scripts. */
        for (int i = 0; i < r->n; i++) {
            const ops_migrated *j = &r->v[i];
            printf("%s\t%s\t%s\t%s\t%lld\t", j->slug,
                   ops_mstatus_name(j->status), j->from,
                   j->to, (long long)j->ms);
            cli_put_text(stdout, j->error ? j->error : "");
            fputc('\n', stdout);
        }
    }
    FILE *f = c->tty ? stdout : stderr;
    fprintf(f, "%d tenant%s to %s: %d migrated, %d current, %d failed, %d skipped in %.1f s "
               "(%.1f tenants/s)", r->n, r->n == 1 ? "" : "s",
            r->latest[0] ? r->latest : "(no migrations)", n[OPS_M_MIGRATED],
            n[OPS_M_CURRENT], n[OPS_M_FAILED], n[OPS_M_SKIPPED], secs,
            secs > 0 ? r->done / secs : 0.0);
    if (r->stopped != NULL)
        fprintf(f, "; stopped: %s", r->stopped);
    fputc('\n', f);
}

/* ---- migrate status ------------------------------------------------------------------------------- */

typedef struct status_ctx {
    buf rows;            /* JSON */
    int n;
    int64_t total, behind, failing;
    const char *latest;
    bool tty;
    bool json;
} status_ctx;

static int status_cb(void *ctx, const char *version, int64_t tenants, int64_t failing)
{
    status_ctx *s = ctx;
    s->total += tenants;
    s->failing += failing;
    if (strcmp(version, s->latest) != 0)
        s->behind += tenants;
    if (s->json) {
        buf_puts(&s->rows, s->n ? ",{\"version\":" : "{\"version\":");
        buf_json_str(&s->rows, version);
        buf_puts(&s->rows, ",\"tenants\":");
        buf_i64(&s->rows, tenants);
        buf_puts(&s->rows, ",\"failing\":");
        buf_i64(&s->rows, failing);
        buf_puts(&s->rows, ",\"latest\":");
        buf_puts(&s->rows, strcmp(version, s->latest) == 0 ? "true}" : "false}");
    } else if (s->tty) {
        if (s->n == 0)
            printf("%-16s  %10s  %10s\n", "VERSION", "TENANTS", "FAILING");
        printf("%-16s  %10lld  %10lld%s\n", version[0] ? version : "(none)", (long long)tenants,
               (long long)failing, strcmp(version, s->latest) == 0 ? "  (latest)" : "");
    } else {
        printf("%s\t%lld\t%lld\n", version, (long long)tenants, (long long)failing);
    }
    s->n++;
    return TN_OK;
}

static int migrate_status(cli *c)
{
    status_ctx s;
    memset(&s, 0, sizeof(s));
    char latest[OPS_VERSION_MAX], err[1200];
    s.latest = latest;
    s.tty = c->tty;
    s.json = c->json;
    ops_env e;
    cli_ops_env(c, &e);
    int rc = ops_migrate_status(&e, latest, sizeof(latest), status_cb, &s, err, sizeof(err));
    if (rc != TN_OK || s.rows.oom) {
        buf_free(&s.rows);
        return rc != TN_OK ? cli_fail(c, rc, "%s", err)
                           : cli_fail(c, TN_NOMEM, "cannot read the migration status: %s",
                                      "out of memory");
    }
    if (c->json) {
        buf_puts(&c->out, "{\"latest\":");
        buf_json_str(&c->out, s.latest);
        buf_puts(&c->out, ",\"total\":");
        buf_i64(&c->out, s.total);
        buf_puts(&c->out, ",\"behind\":");
        buf_i64(&c->out, s.behind);
        buf_puts(&c->out, ",\"failing\":");
        buf_i64(&c->out, s.failing);
        buf_puts(&c->out, ",\"versions\":[");
        if (s.rows.len > 0)
            buf_append(&c->out, s.rows.p, s.rows.len);
        buf_puts(&c->out, "]}");
    } else if (c->tty) {
        printf("latest: %s; %lld of %lld tenant%s behind, %lld with a migration error\n",
               s.latest[0] ? s.latest : "(no migrations)", (long long)s.behind,
               (long long)s.total, s.total == 1 ? "" : "s", (long long)s.failing);
    }
    buf_free(&s.rows);
    return 0;
}

/* ---- tenancy migrate ---------------------------------------------------------------------------- */

int cli_migrate(cli *c, const cli_args *a)
{
    bool status = strcmp(c->cmd->name, "migrate status") == 0 || cli_opt(a, "--status");
    bool all = cli_opt(a, "--all") != NULL;
    if (status) {
        if (all || a->npos > 0 || cli_opt(a, "-j") || cli_opt(a, "--canary") ||
            cli_opt(a, "--stop-on-error") || cli_opt(a, "--progress-file"))
            return cli_usage(c, "--status takes no tenants and no other option");
        return migrate_status(c);
    }
    if (all == (a->npos > 0))
        return cli_usage(c, "give --all or the slugs of the tenants to migrate (not both)");
    ops_migrate_opts o = {.all = all, .slugs = a->pos, .nslugs = a->npos,
                          .jobs = OPS_MIGRATE_JOBS, .stop_on_error = cli_opt(a, "--stop-on-error") != NULL};
    int rc = cli_opt_int(c, a, "-j", 1, OPS_JOBS_MAX, &o.jobs);
    if (rc == 0)
        rc = cli_opt_int(c, a, "--canary", 1, 1000000, &o.canary);
    if (rc != 0)
        return rc;
    cli_bar bar;
    cli_bar_init(&bar, cli_opt(a, "--progress-file"));
    ops_env e;
    cli_ops_env(c, &e);
    e.progress = cli_bar_draw;
    e.progress_ctx = &bar;
    ops_migrate_report *r = NULL;
    char err[1200];
    rc = ops_migrate(&e, &o, &r, err, sizeof(err));
    c->reg = e.reg;   /* closed for the workers, reopened for the results */
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);

    int status_code = 0;
    if (c->json)
        print_json(c, r, o.canary);
    else
        print_text(c, r);
    const int *n = r->count;
    if (r->flush_rc != TN_OK) {
        status_code = cli_fail(c, r->flush_rc, "the registry could not be flushed to disk (%s): "
                                               "the results recorded are in it, but a power "
                                               "loss now could lose them; run 'tenancy check' "
                                               "after one",
                               r->flush_err);
        c->keep_out = true;
    } else if (n[OPS_M_FAILED] > 0 || r->stopped != NULL) {
        status_code = n[OPS_M_FAILED] > 0
                          ? cli_fail(c, TN_ERR, "%d of %d tenant%s failed%s%s", n[OPS_M_FAILED],
                                     r->n, r->n == 1 ? "" : "s",
                                     r->stopped ? "; stopped: " : "",
                                     r->stopped ? r->stopped : "")
                          : cli_fail(c, TN_ERR, "stopped: %s", r->stopped);
        c->keep_out = true;   /* the JSON document is the table, with error and code */
    }
    ops_migrate_report_free(r);
    return status_code;
}

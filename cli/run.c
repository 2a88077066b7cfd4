/*
 * run.c — `tenancy run`: a command once per tenant with the tenant's context in its
 * environment (ops_run, tenancy/ops_run.c): its arguments, the progress bar, a line and the
 * output's end for each tenant that failed, the summary, or one JSON document.
 *
 *   tenancy run [--tenant SLUG]... [--all | --state STATE[,STATE...]] [--placement NAME]
 *               [-j N] [--timeout DURATION] [--tail BYTES] [--resume FILE] [--output]
 *               [--progress-file FILE] [--] CMD [ARG...]
 *
 * CMD alone is a shell command (/bin/sh -c CMD); with ARGs, a program and its arguments, run
 * without a shell. Without --tenant, --all or --state: the active tenants.
 *
 * Output: as each tenant ends, a line for one that did not succeed (and, with --output, for
 * every one that wrote something), then the end of its output, indented; a summary at the
 * end (on stdout on a terminal, else on stderr). With --json nothing but one document at the
 * end. Exit status 1 when a tenant did not succeed or the run stopped before the end.
 *
 * Must not: write to stdout in JSON mode before the run ended (the bar is on stderr), or
 * show a tenant's TENANCY_STORAGE (it may hold a password).
 */
#include "core/first.h"
#include "cli/cli_int.h"
#include "core/conf.h"
#include "core/rc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct run_out {
    cli *c;
    cli_bar bar;
    bool output;         /* --output: every tenant's output, not only failures' */
    buf items;           /* JSON: the tenants' objects */
    int nitems;
} run_out;

static void json_item(run_out *o, const ops_ran *r)
{
    buf *b = &o->items;
    buf_puts(b, o->nitems++ ? ",{\"slug\":" : "{\"slug\":");
    buf_json_str(b, r->slug);
    buf_puts(b, ",\"id\":");
    buf_i64(b, r->id);
    buf_puts(b, ",\"state\":");
    buf_json_str(b, tenant_state_name(r->state));
    buf_puts(b, ",\"placement\":");
    buf_json_str(b, r->placement);
    buf_puts(b, ",\"status\":");
    buf_json_str(b, ops_rstatus_name(r->status));
    buf_puts(b, ",\"exit\":");
    if (r->exit_code >= 0)
        buf_i64(b, r->exit_code);
    else
        buf_puts(b, "null");
    buf_puts(b, ",\"signal\":");
    if (r->signal > 0)
        buf_i64(b, r->signal);
    else
        buf_puts(b, "null");
    buf_puts(b, ",\"ms\":");
    buf_i64(b, r->ms);
    buf_puts(b, ",\"output\":");
    buf_json_strn(b, r->output ? r->output : "", r->output ? r->output_len : 0);
    buf_puts(b, ",\"output_bytes\":");
    buf_i64(b, r->output_bytes);
    buf_puts(b, ",\"truncated\":");
    buf_puts(b, r->output_bytes > (int64_t)r->output_len ? "true" : "false");
    buf_puts(b, ",\"error\":");
    buf_json_str(b, r->error);
    buf_putc(b, '}');
}

/* "exit 3", "signal 9", ... into s. */
static void how(const ops_ran *r, char *s, size_t n)
{
    if (r->status == OPS_R_ERROR)
        snprintf(s, n, "not started");
    else if (r->exit_code >= 0)
        snprintf(s, n, "exit %d, %.2f s", r->exit_code, (double)r->ms / 1000.0);
    else
        snprintf(s, n, "signal %d, %.2f s", r->signal, (double)r->ms / 1000.0);
}

static void text_item(run_out *o, const ops_ran *r)
{
    bool ok = r->status == OPS_R_OK;
    if (ok && (!o->output || r->output_bytes == 0))
        return;
    if (o->bar.on)
        fputs("\r\033[K", stderr);   /* the bar's line: this tenant's lines go there */
    char h[64];
    how(r, h, sizeof(h));
    printf("%s: %s (%s)", r->slug, ops_rstatus_name(r->status), h);
    if (r->error != NULL) {
        fputs(": ", stdout);
        cli_put_text(stdout, r->error);
    }
    fputc('\n', stdout);
    if (r->output_bytes > (int64_t)r->output_len)
        printf("  | [%lld bytes before]\n",
               (long long)(r->output_bytes - (int64_t)r->output_len));
    /* Each line of the output, control characters escaped. */
    size_t i = 0;
    while (i < r->output_len) {
        const char *line = r->output + i;
        const char *nl = memchr(line, '\n', r->output_len - i);
        size_t len = nl ? (size_t)(nl - line) : r->output_len - i;
        char *copy = strndup(line, len);
        fputs("  | ", stdout);
        cli_put_text(stdout, copy ? copy : "?");
        fputc('\n', stdout);
        free(copy);
        i += len + (nl != NULL);
    }
    fflush(stdout);
}

static void ran(void *ctx, const ops_ran *r)
{
    run_out *o = ctx;
    if (o->c->json)
        json_item(o, r);
    else
        text_item(o, r);
}

static void print_json(cli *c, run_out *o, const ops_run_report *rep, bool ok, const char *msg)
{
    buf *b = &c->out;
    const int *n = rep->count;
    buf_puts(b, ok ? "{\"ok\":true" : "{\"ok\":false");
    if (!ok) {
        buf_puts(b, ",\"error\":");
        buf_json_str(b, msg);
        buf_puts(b, ",\"code\":\"error\"");
    }
    buf_puts(b, ",\"jobs\":");
    buf_i64(b, rep->jobs);
    buf_puts(b, ",\"total\":");
    buf_i64(b, rep->ran);
    static const char *const names[] = {"succeeded", "failed", "timed_out", "killed",
                                        "not_started"};
    _Static_assert(TN_ARRAY_LEN(names) == OPS_R_NSTATUS, "a name per status");
    for (int s = 0; s < OPS_R_NSTATUS; s++) {
        buf_printf(b, ",\"%s\":", names[s]);
        buf_i64(b, n[s]);
    }
    buf_puts(b, ",\"skipped_done\":");
    buf_i64(b, rep->skipped_done);
    buf_puts(b, ",\"left_out\":");
    buf_i64(b, rep->left_out);
    buf_puts(b, ",\"not_run\":");
    buf_i64(b, rep->not_run);
    buf_puts(b, ",\"stopped\":");
    buf_json_str(b, rep->stopped);
    buf_printf(b, ",\"seconds\":%.3f,\"tenants\":[", rep->seconds);
    if (o->items.len > 0)
        buf_append(b, o->items.p, o->items.len);
    buf_puts(b, "]}");
}

static void print_summary(cli *c, const ops_run_report *rep)
{
    const int *n = rep->count;
    FILE *f = c->tty ? stdout : stderr;
    double secs = rep->seconds;
    fprintf(f, "%d tenant%s: %d ok, %d failed", rep->ran, rep->ran == 1 ? "" : "s",
            n[OPS_R_OK], n[OPS_R_FAILED]);
    if (n[OPS_R_TIMEOUT] > 0)
        fprintf(f, ", %d timed out", n[OPS_R_TIMEOUT]);
    if (n[OPS_R_KILLED] > 0)
        fprintf(f, ", %d killed", n[OPS_R_KILLED]);
    if (n[OPS_R_ERROR] > 0)
        fprintf(f, ", %d not started", n[OPS_R_ERROR]);
    fprintf(f, " in %.1f s (%.1f tenants/s)", secs, secs > 0 ? rep->ran / secs : 0.0);
    if (rep->skipped_done > 0)
        fprintf(f, "; %d done before (--resume)", rep->skipped_done);
    if (rep->left_out > 0)
        fprintf(f, "; %d left out (changed since the list)", rep->left_out);
    if (rep->stopped != NULL)
        fprintf(f, "; stopped (%s): %d not run", rep->stopped, rep->not_run);
    fputc('\n', f);
}

/* --state a,b: the mask; 0 and a usage error when a name is not a state. */
static int parse_states(cli *c, const char *text, unsigned *mask)
{
    char copy[256];
    snprintf(copy, sizeof(copy), "%s", text);
    *mask = 0;
    for (char *save = NULL, *w = strtok_r(copy, ",", &save); w != NULL;
         w = strtok_r(NULL, ",", &save)) {
        int s = tenant_state_parse(w);
        if (s < 0)
            return cli_usage(c, "--state: no state '%s'", w);
        if (s == TENANT_DELETING)
            return cli_usage(c, "--state: tenants being deleted are never run");
        *mask |= 1u << s;
    }
    if (*mask == 0)
        return cli_usage(c, "--state needs a state");
    return 0;
}

int cli_run(cli *c, const cli_args *a)
{
    const char *slugs[CLI_MAX_OPTS];
    int nslugs = cli_opt_all(a, "--tenant", slugs, CLI_MAX_OPTS);
    bool all = cli_opt(a, "--all") != NULL;
    const char *state = cli_opt(a, "--state");
    ops_run_opts o = {.argv = a->pos, .argc = a->npos, .slugs = slugs, .nslugs = nslugs,
                      .placement = cli_opt(a, "--placement"), .jobs = 1,
                      .tail = OPS_RUN_TAIL, .resume = cli_opt(a, "--resume")};
    if (nslugs > 0 && (all || state != NULL || o.placement != NULL))
        return cli_usage(c, "--tenant names the tenants: not with --all, --state or "
                            "--placement");
    if (all && state != NULL)
        return cli_usage(c, "--all or --state, not both");
    if (all)
        o.states = 1u << TENANT_ACTIVE | 1u << TENANT_MAINTENANCE | 1u << TENANT_SUSPENDED;
    int rc = state != NULL ? parse_states(c, state, &o.states) : 0;
    if (rc == 0)
        rc = cli_opt_int(c, a, "-j", 1, OPS_JOBS_MAX, &o.jobs);
    if (rc != 0)
        return rc;
    const char *s = cli_opt(a, "--timeout");
    if (s != NULL && (conf_parse_duration(s, &o.timeout_ms) != TN_OK || o.timeout_ms <= 0))
        return cli_usage(c, "--timeout expects a duration (30s, 5m, 500ms), not '%s'", s);
    s = cli_opt(a, "--tail");
    int64_t tail;
    if (s != NULL) {
        if (conf_parse_size(s, &tail) != TN_OK || tail < 0 || tail > OPS_RUN_TAIL_MAX)
            return cli_usage(c, "--tail expects a size from 0 to %d bytes (4096, 64k), "
                                "not '%s'", OPS_RUN_TAIL_MAX, s);
        o.tail = (size_t)tail;
    }
    if (o.placement != NULL && o.placement[0] == '\0')
        return cli_usage(c, "--placement needs a name");

    run_out out;
    memset(&out, 0, sizeof(out));
    out.c = c;
    out.output = cli_opt(a, "--output") != NULL;
    cli_bar_init(&out.bar, cli_opt(a, "--progress-file"));
    out.bar.on = out.bar.on && c->tty;   /* quiet when stdout is not a terminal */
    ops_env e;
    cli_ops_env(c, &e);
    e.progress = cli_bar_draw;
    e.progress_ctx = &out.bar;
    ops_run_report rep;
    char err[1200];
    rc = ops_run(&e, &o, ran, &out, &rep, err, sizeof(err));
    if (rc != TN_OK) {
        buf_free(&out.items);
        return cli_fail(c, rc, "%s", err);
    }
    const int *n = rep.count;
    int bad = rep.ran - n[OPS_R_OK];
    char msg[800] = "";
    if (bad > 0)
        tn_errf(msg, sizeof(msg), TN_ERR, "%d of %d tenant%s did not succeed%s%s%s%s", bad,
                rep.ran, rep.ran == 1 ? "" : "s", rep.stopped ? "; stopped: " : "",
                rep.stopped ? rep.stopped : "", rep.stop_err[0] ? ": " : "", rep.stop_err);
    else if (rep.stopped != NULL)
        tn_errf(msg, sizeof(msg), TN_ERR, "stopped: %s%s%s (%d not run)", rep.stopped,
                rep.stop_err[0] ? ": " : "", rep.stop_err, rep.not_run);
    bool ok = msg[0] == '\0';
    if (c->json)
        print_json(c, &out, &rep, ok, msg);
    else
        print_summary(c, &rep);
    bool oom = out.items.oom;
    buf_free(&out.items);
    if (oom)
        return cli_fail(c, TN_NOMEM, "out of memory");
    if (!ok) {
        c->keep_out = true;   /* the JSON document says what each tenant did */
        return cli_fail(c, TN_ERR, "%s", msg);
    }
    return 0;
}

/*
 * job.c — the `tenancy job ...` commands: the job queue for operators (over
 * tenancy/ops_jobs.c): list, show, retry, cancel, counts, schedules, schedule, unschedule,
 * enqueue.
 *
 * Owns: turning their arguments into ops_job_* calls and printing the result (cli_int.h).
 * Times are the store's milliseconds, printed as UTC (seconds). Jobs are paged by id, newest
 * first: a full page says how to ask for the next one (--before).
 * Must not: run SQL, queue a hook ("tenancy.*") or a host module's job (app "host.*"), or
 * print to stdout before a change succeeded.
 */
#include "core/first.h"
#include "cli/cli_int.h"
#include "core/conf.h"
#include "core/rc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIST_DEFAULT 50

/* ---- shared ------------------------------------------------------------------------------- */

static void ms_time(int64_t ms, char *out, size_t n)
{
    if (ms <= 0) {
        snprintf(out, n, "-");
        return;
    }
    ops_utc_time(ms / 1000, out, n);
}

static void put_ms(buf *b, const char *name, int64_t ms)
{
    char ts[32];
    buf_puts(b, ",\"");
    buf_puts(b, name);
    buf_puts(b, "\":");
    if (ms <= 0) {
        buf_puts(b, "null");
        return;
    }
    ops_utc_time(ms / 1000, ts, sizeof(ts));
    buf_json_str(b, ts);
}

static void json_job(buf *b, const job_rec *j)
{
    buf_puts(b, "{\"id\":");
    buf_i64(b, j->id);
    buf_puts(b, ",\"tenant\":");
    if (j->tenant_id == 0)
        buf_puts(b, "null");   /* central */
    else
        buf_json_str(b, j->slug);
    buf_puts(b, ",\"app\":");
    buf_json_str(b, j->app);
    buf_puts(b, ",\"name\":");
    buf_json_str(b, j->name);
    buf_puts(b, ",\"state\":");
    buf_json_str(b, job_state_name(j->state));
    buf_puts(b, ",\"attempts\":");
    buf_i64(b, j->attempts);
    buf_puts(b, ",\"max_attempts\":");
    buf_i64(b, j->max_attempts);
    buf_puts(b, ",\"priority\":");
    buf_i64(b, j->priority);
    buf_puts(b, ",\"timeout_ms\":");
    buf_i64(b, j->timeout_ms);
    buf_puts(b, ",\"payload\":");
    buf_json_str(b, j->payload);
    buf_puts(b, ",\"unique_key\":");
    if (j->unique_key[0])
        buf_json_str(b, j->unique_key);
    else
        buf_puts(b, "null");
    buf_puts(b, ",\"schedule_id\":");
    if (j->schedule_id)
        buf_i64(b, j->schedule_id);
    else
        buf_puts(b, "null");
    buf_puts(b, ",\"last_error\":");
    buf_json_str(b, j->last_error);
    buf_puts(b, ",\"progress\":");
    buf_json_str(b, j->progress);
    buf_puts(b, ",\"lease\":");
    buf_json_str(b, j->lease);
    put_ms(b, "created_at", j->created_at);
    put_ms(b, "run_at", j->run_at);
    put_ms(b, "started_at", j->started_at);
    put_ms(b, "finished_at", j->finished_at);
    put_ms(b, "lease_until", j->lease_until);
    buf_putc(b, '}');
}

/* A job id argument: a whole positive number. */
static int job_id_arg(cli *c, const char *s, int64_t *id)
{
    long long v;
    bool digits = s[0] != '\0' && strlen(s) <= 18;
    for (const char *p = s; *p; p++)
        digits = digits && *p >= '0' && *p <= '9';
    if (!digits || conf_parse_int(s, &v) != TN_OK || v <= 0)
        return cli_usage(c, "a job id is a whole number above 0, not '%s'", s);
    *id = v;
    return 0;
}

/* Every job command starts here: the ops environment into *e, then, when slug is not NULL,
 * the tenant options: --tenant SLUG or --central, at most one (`required`: one of them);
 * *slug NULL and *central false when neither (central may be NULL: the command only needs
 * the slug). A command without --central in its option table never sees it set. 0, or the
 * usage error's exit status. */
static int job_begin(cli *c, const cli_args *a, bool required, const char **slug, bool *central,
                     ops_env *e)
{
    cli_ops_env(c, e);
    if (slug == NULL)
        return 0;
    *slug = cli_opt(a, "--tenant");
    bool cen = cli_opt(a, "--central") != NULL;
    if (central != NULL)
        *central = cen;
    if (*slug != NULL && cen)
        return cli_usage(c, "give --tenant or --central, not both");
    if (required && *slug == NULL && !cen)
        return cli_usage(c, "'%s' needs --tenant SLUG (or --central)", c->cmd->name);
    if (*slug != NULL && !tenant_slug_valid(*slug))
        return cli_usage(c, "'%s' is not a tenant slug", *slug);
    return 0;
}

/* ---- list ------------------------------------------------------------------------------- */

typedef struct list_out {
    cli *c;
    int n;
    int64_t last_id;
} list_out;

static int list_cb(void *ctx, const job_rec *j)
{
    list_out *l = ctx;
    l->last_id = j->id;
    if (l->c->json) {
        if (l->n)
            buf_putc(&l->c->out, ',');
        json_job(&l->c->out, j);
        l->n++;
        return TN_OK;
    }
    if (l->n++ == 0)
        printf("%-8s %-9s %-20s %-12s %-24s %-8s %-20s %s\n", "ID", "STATE", "TENANT", "APP",
               "NAME", "TRIES", "WHEN", "PROGRESS/ERROR");
    char ts[32], tries[24];
    /* when: finished, else started, else due */
    int64_t when = j->finished_at ? j->finished_at : j->started_at ? j->started_at : j->run_at;
    ms_time(when, ts, sizeof(ts));
    snprintf(tries, sizeof(tries), "%d/%d", j->attempts, j->max_attempts);
    char id[24];
    snprintf(id, sizeof(id), "%" PRId64, j->id);
    const char *note = j->state == JOB_RUNNING && j->progress[0] ? j->progress : j->last_error;
    char cut[81];
    snprintf(cut, sizeof(cut), "%s", note);
    const cli_cell row[] = {{id, 8},
                            {job_state_name(j->state), 9},
                            {j->tenant_id ? j->slug : "(central)", 20},
                            {j->app[0] ? j->app : "-", 12},
                            {j->name, 24},
                            {tries, 8},
                            {ts, 20}};
    cli_put_row(stdout, row, (int)TN_ARRAY_LEN(row), cut);
    return TN_OK;
}

int cli_job_list(cli *c, const cli_args *a)
{
    const char *slug;
    bool central;
    ops_env e;
    int rc = job_begin(c, a, false, &slug, &central, &e);
    if (rc != 0)
        return rc;
    int state = -1;
    const char *st = cli_opt(a, "--state");
    if (st != NULL && (state = job_state_parse(st)) < 0)
        return cli_usage(c, "--state is queued, running, done, dead or cancelled, not '%s'", st);
    int limit = LIST_DEFAULT;
    if ((rc = cli_opt_int(c, a, "--limit", 1, 1000, &limit)) != 0)
        return rc;
    int64_t before = 0;
    const char *b = cli_opt(a, "--before");
    if (b != NULL && (rc = job_id_arg(c, b, &before)) != 0)
        return rc;
    char err[1024];
    list_out l = {c, 0, 0};
    if (c->json)
        buf_puts(&c->out, "{\"jobs\":[");
    rc = ops_job_list(&e, slug, central, state, before, limit, list_cb, &l, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    if (c->json) {
        buf_puts(&c->out, "],\"count\":");
        buf_i64(&c->out, l.n);
        buf_puts(&c->out, ",\"next_before\":");
        if (l.n == limit)
            buf_i64(&c->out, l.last_id);
        else
            buf_puts(&c->out, "null");
        buf_putc(&c->out, '}');
    } else if (l.n == 0) {
        printf("no jobs\n");
    } else if (l.n == limit) {
        printf("(more: --before %" PRId64 ")\n", l.last_id);
    }
    return 0;
}

/* ---- show, retry, cancel ----------------------------------------------------------------- */

static void print_job(const job_rec *j)
{
    char ts[32];
    printf("id:           %" PRId64 "\n", j->id);
    printf("tenant:       ");
    cli_put_text(stdout, j->tenant_id ? j->slug : "(central)");
    printf("\napp:          ");
    cli_put_text(stdout, j->app[0] ? j->app : "(the root app)");
    printf("\nname:         ");
    cli_put_text(stdout, j->name);
    printf("\nstate:        %s\n", job_state_name(j->state));
    printf("attempts:     %d of %d\n", j->attempts, j->max_attempts);
    printf("priority:     %d\n", j->priority);
    printf("timeout:      %d ms\n", j->timeout_ms);
    printf("unique key:   ");
    cli_put_text(stdout, j->unique_key[0] ? j->unique_key : "-");
    fputc('\n', stdout);
    if (j->schedule_id)
        printf("schedule:     %" PRId64 "\n", j->schedule_id);
    ms_time(j->created_at, ts, sizeof(ts));
    printf("created:      %s\n", ts);
    ms_time(j->run_at, ts, sizeof(ts));
    printf("run at:       %s\n", ts);
    ms_time(j->started_at, ts, sizeof(ts));
    printf("started:      %s\n", ts);
    ms_time(j->finished_at, ts, sizeof(ts));
    printf("finished:     %s\n", ts);
    printf("lease:        ");
    cli_put_text(stdout, j->lease[0] ? j->lease : "-");
    if (j->lease_until) {
        ms_time(j->lease_until, ts, sizeof(ts));
        printf(" (until %s)", ts);
    }
    printf("\nprogress:     ");
    cli_put_text(stdout, j->progress[0] ? j->progress : "-");
    printf("\nlast error:   ");
    cli_put_text(stdout, j->last_error[0] ? j->last_error : "-");
    printf("\npayload:      ");
    cli_put_text(stdout, j->payload[0] ? j->payload : "-");
    fputc('\n', stdout);
}

int cli_job_show(cli *c, const cli_args *a)
{
    ops_env e;
    int64_t id;
    int rc = job_begin(c, a, false, NULL, NULL, &e);
    if (rc != 0 || (rc = job_id_arg(c, a->pos[0], &id)) != 0)
        return rc;
    char err[1024];
    job_rec j;
    rc = ops_job_get(&e, id, NULL, &j, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    if (c->json)
        json_job(&c->out, &j);
    else
        print_job(&j);
    return 0;
}

/* retry and cancel: the change, then the job read back. */
static int job_change(cli *c, const cli_args *a, bool retry)
{
    ops_env e;
    int64_t id;
    int rc = job_begin(c, a, false, NULL, NULL, &e);
    if (rc != 0 || (rc = job_id_arg(c, a->pos[0], &id)) != 0)
        return rc;
    char err[1024];
    rc = retry ? ops_job_retry(&e, id, NULL, err, sizeof(err))
               : ops_job_cancel(&e, id, NULL, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    job_rec j;
    bool got = ops_job_get(&e, id, NULL, &j, err, sizeof(err)) == TN_OK;
    if (c->json) {
        buf_puts(&c->out, "{\"ok\":true");
        if (got) {
            buf_puts(&c->out, ",\"job\":");
            json_job(&c->out, &j);
        }
        buf_putc(&c->out, '}');
    } else {
        printf("job %" PRId64 " %s\n", id, retry ? "queued again" : "cancelled");
    }
    return 0;
}

int cli_job_retry(cli *c, const cli_args *a) { return job_change(c, a, true); }
int cli_job_cancel(cli *c, const cli_args *a) { return job_change(c, a, false); }

/* ---- counts ------------------------------------------------------------------------------- */

int cli_job_counts(cli *c, const cli_args *a)
{
    const char *slug;
    bool central;
    ops_env e;
    int rc = job_begin(c, a, false, &slug, &central, &e);
    if (rc != 0)
        return rc;
    if (central)
        return cli_usage(c, "counts are per tenant or of all jobs (--tenant, or nothing)");
    char err[1024];
    int64_t n[JOB_NSTATES];
    rc = ops_job_counts(&e, slug, n, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    int64_t total = 0;
    for (int s = 0; s < JOB_NSTATES; s++)
        total += n[s];
    if (c->json) {
        buf_putc(&c->out, '{');
        for (int s = 0; s < JOB_NSTATES; s++) {
            buf_json_str(&c->out, job_state_name(s));
            buf_putc(&c->out, ':');
            buf_i64(&c->out, n[s]);
            buf_putc(&c->out, ',');
        }
        buf_puts(&c->out, "\"total\":");
        buf_i64(&c->out, total);
        buf_putc(&c->out, '}');
    } else {
        for (int s = 0; s < JOB_NSTATES; s++)
            printf("%-10s %" PRId64 "\n", job_state_name(s), n[s]);
        printf("%-10s %" PRId64 "\n", "total", total);
    }
    return 0;
}

/* ---- schedules ---------------------------------------------------------------------------- */

typedef struct sched_out {
    cli *c;
    int n;
} sched_out;

static int sched_cb(void *ctx, const job_schedule *s)
{
    sched_out *o = ctx;
    if (o->c->json) {
        buf *b = &o->c->out;
        if (o->n++)
            buf_putc(b, ',');
        buf_puts(b, "{\"id\":");
        buf_i64(b, s->id);
        buf_puts(b, ",\"tenant\":");
        if (s->tenant_id == 0)
            buf_puts(b, "null");
        else
            buf_json_str(b, s->slug);
        buf_puts(b, ",\"app\":");
        buf_json_str(b, s->app);
        buf_puts(b, ",\"name\":");
        buf_json_str(b, s->name);
        buf_puts(b, ",\"cron\":");
        buf_json_str(b, s->cron);
        buf_puts(b, ",\"payload\":");
        buf_json_str(b, s->payload);
        put_ms(b, "next_run_at", s->next_run_at);
        put_ms(b, "last_run_at", s->last_run_at);
        buf_putc(b, '}');
        return TN_OK;
    }
    if (o->n++ == 0)
        printf("%-6s %-20s %-12s %-24s %-18s %-20s %-20s %s\n", "ID", "TENANT", "APP", "NAME",
               "CRON", "NEXT", "LAST", "PAYLOAD");
    char next[32], last[32];
    ms_time(s->next_run_at, next, sizeof(next));
    ms_time(s->last_run_at, last, sizeof(last));
    char id[24];
    snprintf(id, sizeof(id), "%" PRId64, s->id);
    char cut[61];
    snprintf(cut, sizeof(cut), "%s", s->payload);
    const cli_cell row[] = {{id, 6},
                            {s->tenant_id ? s->slug : "(central)", 20},
                            {s->app[0] ? s->app : "-", 12},
                            {s->name, 24},
                            {s->cron, 18},
                            {next, 20},
                            {last, 20}};
    cli_put_row(stdout, row, (int)TN_ARRAY_LEN(row), cut);
    return TN_OK;
}

int cli_job_schedules(cli *c, const cli_args *a)
{
    const char *slug;
    ops_env e;
    int rc = job_begin(c, a, false, &slug, NULL, &e);
    if (rc != 0)
        return rc;
    char err[1024];
    sched_out o = {c, 0};
    if (c->json)
        buf_puts(&c->out, "{\"schedules\":[");
    rc = ops_job_schedules(&e, slug, sched_cb, &o, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    if (c->json) {
        buf_puts(&c->out, "],\"count\":");
        buf_i64(&c->out, o.n);
        buf_putc(&c->out, '}');
    } else if (o.n == 0) {
        printf("no schedules\n");
    }
    return 0;
}

int cli_job_unschedule(cli *c, const cli_args *a)
{
    const char *slug;
    ops_env e;
    int rc = job_begin(c, a, true, &slug, NULL, &e);
    if (rc != 0)
        return rc;
    const char *app = cli_opt(a, "--app"), *name = a->pos[0];
    char err[1024];
    rc = ops_job_unschedule(&e, slug, app, name, err, sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    if (!c->json) {
        printf("schedule '%s' of %s%s%s removed\n", name, slug ? "tenant '" : "the host",
               slug ? slug : "", slug ? "'" : "");
    }
    return 0;
}

int cli_job_schedule(cli *c, const cli_args *a)
{
    const char *slug;
    ops_env e;
    int rc = job_begin(c, a, true, &slug, NULL, &e);
    if (rc != 0)
        return rc;
    const char *app = cli_opt(a, "--app"), *name = a->pos[0], *cron = a->pos[1];
    if (app != NULL && (strncmp(app, "host.", 5) == 0 || strcmp(app, JOB_APP_ALL) == 0))
        return cli_usage(c, "--app names a mount ('%s' is the host's)", app);
    char err[1024];
    int64_t id = 0;
    rc = ops_job_schedule(&e, slug, app, name, cron, cli_opt(a, "--payload"), &id, err,
                          sizeof(err));
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    if (c->json) {
        buf_puts(&c->out, "{\"ok\":true,\"id\":");
        buf_i64(&c->out, id);
        buf_putc(&c->out, '}');
    } else
        printf("schedule %lld: job '%s' of %s%s%s at '%s' (UTC)\n", (long long)id, name,
               slug ? "tenant '" : "the host", slug ? slug : "", slug ? "'" : "", cron);
    return 0;
}

/* ---- enqueue ------------------------------------------------------------------------------ */

int cli_job_enqueue(cli *c, const cli_args *a)
{
    const char *slug;
    ops_env e;
    int rc = job_begin(c, a, true, &slug, NULL, &e);
    if (rc != 0)
        return rc;
    ops_job_new n = {.slug = slug, .app = cli_opt(a, "--app"), .name = a->pos[0],
                     .payload = cli_opt(a, "--payload"), .unique_key = cli_opt(a, "--unique")};
    if (strncmp(n.name, "tenancy.", 8) == 0)
        return cli_usage(c, "job names starting 'tenancy.' are the host's lifecycle hooks");
    if (n.app != NULL && (strncmp(n.app, "host.", 5) == 0 || strcmp(n.app, JOB_APP_ALL) == 0))
        return cli_usage(c, "--app names a mount ('%s' is the host's)", n.app);
    int delay_s = 0;
    if ((rc = cli_opt_int(c, a, "--delay", 0, 31536000, &delay_s)) != 0 ||
        (rc = cli_opt_int(c, a, "--priority", JOB_PRIORITY_MIN, JOB_PRIORITY_MAX, &n.priority)) !=
            0 ||
        (rc = cli_opt_int(c, a, "--max-attempts", 1, 1000, &n.max_attempts)) != 0)
        return rc;
    n.delay_ms = (int64_t)delay_s * 1000;
    char err[1024];
    int64_t id = 0;
    rc = ops_job_enqueue(&e, &n, &id, err, sizeof(err));
    if (rc == TN_EXISTS && c->json) {
        buf_puts(&c->out, "{\"error\":");
        buf_json_str(&c->out, err);
        buf_puts(&c->out, ",\"code\":\"exists\",\"id\":");
        buf_i64(&c->out, id);
        buf_putc(&c->out, '}');
        c->keep_out = true;
    }
    if (rc != TN_OK)
        return cli_fail(c, rc, "%s", err);
    if (c->json) {
        buf_puts(&c->out, "{\"ok\":true,\"id\":");
        buf_i64(&c->out, id);
        buf_putc(&c->out, '}');
    } else {
        printf("queued job %" PRId64 "\n", id);
    }
    return 0;
}
